#!/usr/bin/env bash
# Fixed-width strings (issue 20) through the command line: zarr v2 "|S<n>" / "<U<n>" / ">U<n>"
# arrays created from a spec, written from and read to .npy files of the same typestring, printed
# as NumPy prints them, shown by info with their typestring; malformed widths, fill values and
# mismatched .npy files refused naming what is wrong.
source "$(dirname "$0")/attack_lib.sh"

zarray() { # zarray DIR JSON
    mkdir -p "$T/$1"
    printf '%s' "$2" >"$T/$1/.zarray"
}
REST='"chunks":[2],"compressor":null,"order":"C","filters":null'

zarray s0 "{\"zarr_format\":2,\"shape\":[4],\"dtype\":\"|S0\",\"fill_value\":null,$REST}"
nds info "$T/s0"; refused "width 0" '"dtype" "|S0" is not a numpy string typestring'
zarray swide "{\"zarr_format\":2,\"shape\":[4],\"dtype\":\"<U99999999999999999999\",\"fill_value\":null,$REST}"
nds info "$T/swide"; refused "width beyond the limit" "elements wider than 4096 bytes"
zarray sfill "{\"zarr_format\":2,\"shape\":[4],\"dtype\":\"|S2\",\"fill_value\":\"not base64!\",$REST}"
nds info "$T/sfill"; refused "fill not base64" 'is not base64 of at most 2 bytes'
zarray ufill "{\"zarr_format\":2,\"shape\":[4],\"dtype\":\"<U1\",\"fill_value\":\"toolong\",$REST}"
nds info "$T/ufill"; refused "fill wider than the dtype" "longer than the dtype's width"
zarray short "{\"zarr_format\":2,\"shape\":[4],\"dtype\":\"|S3\",\"fill_value\":null,$REST}"
printf 'abcd' >"$T/short/0"
nds read "$T/short" -o "$T/short.npy"; refused "chunk of the wrong length" "0"

# |S5 created from a spec: info, .npy round trip, printing.
nds create '{"driver":"zarr","kvstore":"file://'"$T"'/s.zarr/","metadata":{"dtype":"|S5","shape":[3],"chunks":[2],"fill_value":"eno=","compressor":null}}'
succeeded "create |S5 with a base64 fill"
nds info "$T/s.zarr"; succeeded "info |S5"
expect_out "dtype:       |S5" "info shows the typestring"
expect_out "fill value:  b'zz'" "info shows the fill as NumPy prints it"
nds read "$T/s.zarr"; succeeded "print unwritten |S5"
expect_out "[b'zz' b'zz' b'zz']" "fill elements printed"
printf 'hello\0\0\0\0\0a\0b\0\0' >"$T/s.raw"
nds write "$T/s.zarr" --raw -i "$T/s.raw"; succeeded "write |S5 raw"
nds read "$T/s.zarr" -o "$T/s.npy"; succeeded "read |S5 to .npy"
check 'grep -q "|S5" "$T/s.npy"' ".npy descr is |S5"
check 'tail -c 15 "$T/s.npy" | cmp -s - "$T/s.raw"' "|S5 bytes round trip"
nds write "$T/s.zarr" -i "$T/s.npy"; succeeded "write |S5 from the .npy it read"
nds read "$T/s.zarr"; succeeded "print |S5"
expect_out "b'a\\x00b'" "an inner NUL is kept, trailing NULs dropped"

# >U3: stored big-endian, .npy in host order.
nds create '{"driver":"zarr","kvstore":"file://'"$T"'/u.zarr/","metadata":{"dtype":">U3","shape":[2],"chunks":[2],"fill_value":"","compressor":null}}'
succeeded "create >U3"
nds info "$T/u.zarr"; succeeded "info >U3"
expect_out "dtype:       >U3" "info keeps the stored byte order"
printf 'a\0\0\0b\0\0\0\0\0\0\0\xe9\0\0\0\0\0\0\0\0\0\0\0' >"$T/u.raw"
nds write "$T/u.zarr" --raw -i "$T/u.raw"; succeeded "write <U3 code points raw"
check '[ "$(od -An -tx1 "$T/u.zarr/0" | tr -d " \n" | cut -c1-8)" = "00000061" ]' "stored big-endian"
nds read "$T/u.zarr"; succeeded "print >U3"
expect_out "'ab'" "unicode element printed"
nds read "$T/u.zarr" -o "$T/u.npy"; succeeded "read >U3 to .npy"
nds write "$T/u.zarr" -i "$T/u.npy"; succeeded "write the .npy back"
nds write "$T/u.zarr" -i "$T/s.npy" -r '[0:2]'; refused "a |S5 .npy into a U3 array" "dtype mismatch"
nds info -j "$T/u.zarr"; succeeded "info -j >U3"
expect_out '"fill_value": "'"''"'"' "json fill is the printed string"

finish
