#!/usr/bin/env bash
# Hostile zarr v3 packbits chunks and configurations (issue 20): payloads cut short, grown, with a
# wrong padding count or non-zero padding bits, inside and outside a shard, and bad configurations.
# Each must be a clear error naming the chunk or the member, never a crash, a hang or wrong data.
# Then attributes holding integers beyond 64 bits (which json-c clamps): attrs, info, info --json
# and attrs --set must show and store them digit for digit.
source "$(dirname "$0")/attack_lib.sh"

# z3 DIR DTYPE SHAPE FILL CODECS: a one-chunk zarr v3 array whose zarr.json has CODECS.
z3() {
    mkdir -p "$T/$1/c"
    printf '{"zarr_format":3,"node_type":"array","shape":%s,"data_type":"%s","chunk_grid":{"name":"regular","configuration":{"chunk_shape":%s}},"chunk_key_encoding":{"name":"default"},"fill_value":%s,"codecs":%s}' \
        "$3" "$2" "$3" "$4" "$5" >"$T/$1/zarr.json"
}
chunk() { printf "$2" >"$T/$1/c/0"; } # chunk DIR BYTES (printf escapes)

PB_FIRST='[{"name":"packbits","configuration":{"padding_encoding":"first_byte"}}]'
z3 pb bool '[11]' false "$PB_FIRST"

chunk pb '\x05\x8d\x03'
nds read "$T/pb"; succeeded "golden bool chunk"
check '[[ "$OUT" == *"True False  True  True False False False  True  True  True False"* ]]' \
    "golden bool chunk reads 1 0 1 1 0 0 0 1 1 1 0 (got: $OUT)"

chunk pb '\x05\x8d'
nds read "$T/pb"; refused "packbits payload one byte short" "expected 3 encoded bytes, found 2"
expect_err "c/0" "short payload names the chunk"
chunk pb '\x05\x8d\x03\x00'
nds read "$T/pb"; refused "packbits payload one byte long" "expected 3 encoded bytes, found 4"
chunk pb ''
nds read "$T/pb"; refused "empty packbits payload" "found 0"
chunk pb '\x04\x8d\x03'
nds read "$T/pb"; refused "wrong padding count" "4 padding bits recorded, 5 expected"
chunk pb '\xff\x8d\x03'
nds read "$T/pb"; refused "padding count 255" "255 padding bits recorded"
chunk pb '\x05\x8d\xe3'
nds read "$T/pb"; refused "non-zero padding bits" "padding bits of the last byte are not zero"
chunk pb '\x05\x8d\x83'
nds verify "$T/pb"; clean_exit "verify of a chunk with non-zero padding bits"
check '[ "$RC" -ne 0 ]' "verify reports non-zero padding bits"

# last_byte, int4: a huge recorded count at the end, and a payload of 1 MiB for 3 bytes.
z3 i4 int4 '[5]' 0 '[{"name":"packbits","configuration":{"padding_encoding":"last_byte"}}]'
chunk i4 '\x2f\x78\x00\x04'
nds read "$T/i4"; succeeded "golden int4 chunk"
check '[[ "$OUT" == *"-1  2 -8  7  0"* ]]' "golden int4 chunk reads -1 2 -8 7 0 (got: $OUT)"
chunk i4 '\x2f\x78\x00\xfc'
nds read "$T/i4"; refused "int4 last byte 252" "252 padding bits recorded"
head -c 1048576 /dev/zero >"$T/i4/c/0"
nds read "$T/i4"; refused "1 MiB payload for a 4-byte chunk" "expected 4 encoded bytes, found 1048576"

# Inside a shard: the inner chunk's damage is named.
z3 sh bool '[16]' false '[{"name":"sharding_indexed","configuration":{"chunk_shape":[8],"codecs":[{"name":"packbits"}],"index_codecs":[{"name":"bytes","configuration":{"endian":"little"}}]}}]'
# inner chunk 0 at 0 (1 byte), inner chunk 1 at 1 but 2 bytes long: past its packed size.
printf '\x03\x80\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x02\x00\x00\x00\x00\x00\x00\x00' >"$T/sh/c/0"
nds read "$T/sh"; refused "shard with an inner packbits chunk 1 byte long" "expected 1 encoded bytes, found 2"

# Bad configurations name the member; types the registry does not list are refused.
z3 bad1 bool '[4]' false '[{"name":"packbits","configuration":{"padding_encoding":7}}]'
nds info "$T/bad1"; refused "padding_encoding 7" '"padding_encoding" must be'
z3 bad2 int16 '[4]' 0 '[{"name":"packbits","configuration":{"first_bit":9,"last_bit":2}}]'
nds info "$T/bad2"; refused "last_bit below first_bit" '"last_bit" (2) is less than "first_bit" (9)'
z3 bad3 uint8 '[4]' 0 '[{"name":"packbits","configuration":{"last_bit":18446744073709551616}}]'
nds info "$T/bad3"; refused "last_bit 2^64" "last_bit"
z3 bad4 float16 '[4]' 0 '[{"name":"packbits"}]'
nds info "$T/bad4"; refused "float16 packbits" 'packbits does not support data type "float16"'
z3 bad5 bool '[4]' false '[{"name":"packbits","configuration":[]}]'
nds info "$T/bad5"; refused "configuration not an object" "configuration"

# ---- integers beyond 64 bits in attributes -------------------------------------------------------
BIG='{"id": 18446744073709551617, "neg": -9223372036854775809, "deep": {"l": [123456789012345678901234567890]}}'
mkdir -p "$T/big"
printf '{"zarr_format":2,"shape":[4],"chunks":[4],"dtype":"<u1","compressor":null,"fill_value":0,"order":"C","filters":null}' >"$T/big/.zarray"
printf '%s' "$BIG" >"$T/big/.zattrs"
has_all() { [[ "$1" == *18446744073709551617* && "$1" == *-9223372036854775809* && "$1" == *123456789012345678901234567890* ]]; }
nds attrs "$T/big"; succeeded "attrs with 2^64+1"
check 'has_all "$OUT"' "attrs prints the big integers exactly (got: $OUT)"
nds info "$T/big"; succeeded "info with 2^64+1 in attributes"
check 'has_all "$OUT"' "info prints the big integers exactly"
nds info --json "$T/big"; succeeded "info --json with 2^64+1 in attributes"
check 'has_all "$OUT"' "info --json keeps the big integers exactly"
check 'python3 -c "import json,sys; d=json.loads(sys.argv[1]); assert d[\"attributes\"][\"id\"] == 2**64+1" "$OUT"' \
    "info --json is valid JSON with attributes.id == 2^64+1"
z3 big3 uint8 '[4]' 0 '[{"name":"bytes"}]'
nds attrs "$T/big3" --set "$BIG"; succeeded "attrs --set with 2^64+1"
check 'has_all "$(cat "$T/big3/zarr.json")"' "attrs --set stores the big integers exactly"
nds attrs "$T/big3"; succeeded "attrs after --set"
check 'has_all "$OUT"' "attrs reads back what --set stored"
printf '%s' "$BIG" >"$T/big.json"
nds attrs "$T/big3" --set "@$T/big.json"; succeeded "attrs --set @file with 2^64+1"
check 'has_all "$(cat "$T/big3/zarr.json")"' "attrs --set @file stores the big integers exactly"
nds attrs "$T/big3" --set '{"x": 1} trailing'; refused "attrs --set with trailing text" "invalid JSON"

finish
