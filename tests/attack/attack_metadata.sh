#!/usr/bin/env bash
# Hostile metadata documents: malformed JSON, hostile sizes and types. Each must give a clear error
# naming what is wrong, never a crash, a hang or a huge allocation.
source "$(dirname "$0")/attack_lib.sh"

zarray() { # zarray DIR JSON: a zarr v2 array whose .zarray is JSON
    mkdir -p "$T/$1"
    printf '%s' "$2" >"$T/$1/.zarray"
}

zarray trunc '{"zarr_format": 2, "shape": [4'
nds info "$T/trunc"; refused "truncated .zarray" ".zarray"

zarray huge '{"zarr_format":2,"shape":[18446744073709551615,18446744073709551615],"chunks":[1,1],"dtype":"<u8","compressor":null,"fill_value":0,"order":"C","filters":null}'
nds read "$T/huge" -o "$T/out.npy"; clean_exit "read of a 2^64 x 2^64 array"
check '[ "$RC" -ne 0 ]' "read of a 2^64 x 2^64 array fails"

zarray zerochunk '{"zarr_format":2,"shape":[4],"chunks":[0],"dtype":"<u1","compressor":null,"fill_value":0,"order":"C","filters":null}'
nds read "$T/zerochunk"; refused "zero chunk size" "chunks"

zarray baddtype '{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":"<q99999999999","compressor":null,"fill_value":0,"order":"C","filters":null}'
nds info "$T/baddtype"; refused "unknown dtype" "dtype"

finish
