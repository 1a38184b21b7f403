#!/usr/bin/env bash
# Data types and metadata other tools write (issue 20): integers beyond 64 bits refused naming the
# member (json-c would clamp them), the pre-1.0 zarr v3 draft named, and the float8 / int4 /
# datetime64 types through create, write, read, info and .npy files, with mismatched .npy dtypes
# refused.
source "$(dirname "$0")/attack_lib.sh"

zarray() { # zarray DIR JSON
    mkdir -p "$T/$1"
    printf '%s' "$2" >"$T/$1/.zarray"
}
zarrjson() { # zarrjson DIR JSON
    mkdir -p "$T/$1"
    printf '%s' "$2" >"$T/$1/zarr.json"
}
V3HEAD='"zarr_format":3,"node_type":"array","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2]}},"chunk_key_encoding":{"name":"default"},"codecs":[{"name":"bytes","configuration":{"endian":"little"}}]'

zarray bigshape '{"zarr_format":2,"shape":[18446744073709551616],"chunks":[2],"dtype":"|u1","compressor":null,"fill_value":0,"order":"C","filters":null}'
nds read "$T/bigshape" -o "$T/o.npy"; refused "zarr v2 shape 2^64" '"shape" 18446744073709551616 does not fit 64 bits'

zarray bigfill '{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":"<u8","compressor":null,"fill_value":18446744073709551616,"order":"C","filters":null}'
nds info "$T/bigfill"; refused "zarr v2 uint64 fill 2^64" '"fill_value" 18446744073709551616 does not fit 64 bits'

zarrjson v3bigshape "{$V3HEAD,\"shape\":[99999999999999999999999],\"data_type\":\"uint8\",\"fill_value\":0}"
nds info "$T/v3bigshape"; refused "zarr v3 shape beyond 2^64" '"shape" 99999999999999999999999 does not fit 64 bits'

zarrjson v3negfill "{$V3HEAD,\"shape\":[4],\"data_type\":\"int64\",\"fill_value\":-9223372036854775809}"
nds info "$T/v3negfill"; refused "zarr v3 int64 fill -2^63-1" '"fill_value" -9223372036854775809 does not fit 64 bits'

zarrjson draft '{"zarr_format":"https://purl.org/zarr/spec/protocol/core/3.0","metadata_encoding":"https://purl.org/zarr/spec/protocol/core/3.0","metadata_key_suffix":".json","extensions":[]}'
nds info "file://$T/draft/|zarr3:"; refused "pre-1.0 zarr v3 draft" "pre-1.0 draft of zarr v3"

zarrjson i4bad "{$V3HEAD,\"shape\":[4],\"data_type\":\"int4\",\"fill_value\":8}"
nds info "$T/i4bad"; refused "int4 fill 8" "fill_value out of range for int4"

zarrjson f8inf "{$V3HEAD,\"shape\":[4],\"data_type\":\"float8_e4m3fn\",\"fill_value\":\"Infinity\"}"
nds info "$T/f8inf"; refused "float8_e4m3fn fill Infinity" "has no infinity"

# float8 through the command line: '|u1' .npy files hold the bit patterns.
nds create "file://$T/f8.zarr|zarr3:" --shape 4 --chunks 2 --dtype float8_e4m3fn --fill NaN
succeeded "create float8_e4m3fn"
nds info "$T/f8.zarr"; succeeded "info float8_e4m3fn"
expect_out "dtype:       float8_e4m3fn" "info names float8_e4m3fn"
printf '\x38\x7e\xfe\x00' >"$T/f8.raw"
nds write "$T/f8.zarr" --raw -i "$T/f8.raw"; succeeded "write float8 bit patterns raw"
nds read "$T/f8.zarr"; succeeded "print float8"
expect_out "[   1.  448. -448.    0.]" "float8_e4m3fn printed as values"
nds read "$T/f8.zarr" -o "$T/f8out.npy"; succeeded "read float8 to .npy"
check 'grep -q "|u1" "$T/f8out.npy"' "float8 .npy written as |u1"
check '[ "$(tail -c 4 "$T/f8out.npy" | od -An -tx1 | tr -d " ")" = "387efe00" ]' "float8 bytes round trip"
nds write "$T/f8.zarr" -i "$T/f8out.npy"; succeeded "write float8 from the |u1 .npy it read"

# datetime64 through a spec: .npy files are '<M8[s]', a different unit is refused.
nds create '{"driver":"zarr","kvstore":"file://'"$T"'/dt.zarr/","metadata":{"dtype":"<M8[s]","shape":[2],"chunks":[2],"fill_value":-9223372036854775808,"compressor":null}}'
succeeded "create <M8[s]"
nds info "$T/dt.zarr"; succeeded "info datetime64"
expect_out "datetime64[s]" "info shows the unit"
expect_out "NaT" "info shows the NaT fill"
nds read "$T/dt.zarr" -o "$T/dt.npy"; succeeded "read datetime64 to .npy"
check 'grep -q "<M8\[s\]" "$T/dt.npy"' ".npy descr is <M8[s]"
nds write "$T/dt.zarr" -i "$T/dt.npy"; succeeded "write back the .npy it read"
sed 's/<M8\[s\]/<M8[h]/' "$T/dt.npy" >"$T/dth.npy"
nds write "$T/dt.zarr" -i "$T/dth.npy"; refused "a .npy of another unit" "dtype mismatch"
nds write "$T/f8.zarr" -i "$T/dt.npy"; refused "a datetime .npy into a float8 array" "dtype mismatch"

# cp keeps a datetime's unit (the counts mean nothing without it).
nds cp "$T/dt.zarr" "file://$T/dtcp.zarr|zarr3:"; succeeded "cp zarr v2 <M8[s] to zarr v3"
nds info "$T/dtcp.zarr"; expect_out "datetime64[s]" "the copy keeps the unit"

# --dtype with a unit, and a --fill json-c would clamp.
nds create "file://$T/dt3.zarr|zarr3:" --shape 3 --dtype "datetime64[ns]" --fill NaT
succeeded "create zarr3 datetime64[ns] from --dtype"
check 'grep -q numpy.datetime64 "$T/dt3.zarr/zarr.json"' "zarr.json names numpy.datetime64"
nds info "$T/dt3.zarr"; expect_out "datetime64[ns]" "info of a --dtype datetime64[ns] array"
nds create "$T/dt4.zarr" --shape 3 --dtype "timedelta64[10s]"
succeeded "create zarr v2 timedelta64[10s] from --dtype"
check 'grep -q "<m8\[10s\]" "$T/dt4.zarr/.zarray"' ".zarray has <m8[10s]"
nds create "$T/dt5.zarr" --shape 3 --dtype "datetime64[fortnight]"; refused "an unknown unit" "unknown \"dtype\""
nds create "$T/big.zarr" --shape 3 --dtype uint64 --fill 18446744073709551616
check '[ "$RC" -eq 2 ] && [ ! -e "$T/big.zarr" ]' "--fill 2^64 refused, nothing created"

finish
