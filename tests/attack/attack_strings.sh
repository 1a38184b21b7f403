#!/usr/bin/env bash
# Fixed-width strings (issue 20) through the command line: zarr v2 "|S<n>" / "<U<n>" / ">U<n>"
# arrays created from a spec, written from and read to .npy files of the same typestring, printed
# as NumPy prints them, shown by info with their typestring; malformed widths, fill values and
# mismatched .npy files refused naming what is wrong. Then variable-length arrays (vlen-utf8 /
# vlen-bytes lists, zarr v2 and v3): counts or lengths past the end or not matching the chunk,
# huge counts, invalid UTF-8, each a clear error naming the chunk; JSON Lines input and output.
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

# ---- variable-length arrays ----

# objects DIR FILTER: a zarr v2 object array of 4 elements in chunks of 2, no compressor.
objects() {
    mkdir -p "$T/$1"
    printf '{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":"|O","compressor":null,"fill_value":"","order":"C","filters":[{"id":"%s"}]}' \
        "$2" >"$T/$1/.zarray"
}
# chunk DIR KEY PRINTF-BYTES: writes one stored chunk.
chunk() { mkdir -p "$(dirname "$T/$1/$2")"; printf "$3" >"$T/$1/$2"; }

objects count_past vlen-utf8
chunk count_past 0 '\x02\x00\x00\x00\x01\x00\x00\x00a'
nds read "$T/count_past" -o "$T/out.jsonl"; refused "element count past the end" "chunk 0 of"
expect_err "cannot fit" "element count past the end"

objects count_wrong vlen-utf8
chunk count_wrong 0 '\x03\x00\x00\x00\x01\x00\x00\x00a\x01\x00\x00\x00b\x00\x00\x00\x00'
nds read "$T/count_wrong" -o "$T/out.jsonl"; refused "count other than the chunk's" "3 elements stored, the chunk has 2"

objects length_past vlen-bytes
chunk length_past 1 '\x02\x00\x00\x00\x01\x00\x00\x00a\xff\xff\xff\x7fb'
nds read "$T/length_past" -o "$T/out.jsonl"; refused "length past the end" "chunk 1 of"
expect_err "runs past the end" "length past the end"

objects huge_count vlen-bytes
chunk huge_count 0 '\xff\xff\xff\xff\x00\x00\x00\x00'
nds read "$T/huge_count" -o "$T/out.jsonl"; refused "a count of 2^32-1" "chunk 0 of"

objects bad_utf8 vlen-utf8
chunk bad_utf8 1 '\x02\x00\x00\x00\x01\x00\x00\x00a\x02\x00\x00\x00\xc3\x28'
nds read "$T/bad_utf8" -o "$T/out.jsonl"; refused "invalid UTF-8" "chunk 1 of"
expect_err "element 1 is not valid UTF-8" "invalid UTF-8"
nds write "$T/bad_utf8" --region '[2:3]' -i /dev/null; refused "a write needing a damaged chunk" "ended after 0"
printf '"q"\n' >"$T/one.jsonl"
nds write "$T/bad_utf8" --region '[3:4]' -i "$T/one.jsonl"; refused "a partial write of a damaged chunk" "chunk 1 of"
nds verify "$T/bad_utf8"; clean_exit "verify of a damaged string chunk"
check '[ "$RC" -ne 0 ]' "verify reports the damaged chunk"

objects truncated vlen-utf8
chunk truncated 0 '\x02\x00'
nds read "$T/truncated" -o "$T/out.jsonl"; refused "2 bytes" "fewer than the 4"

# compressed: a zstd frame that decodes to a hostile list, and one that is not zstd at all
mkdir -p "$T/zstd"
printf '{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":"|O","compressor":{"id":"zstd","level":1},"fill_value":"","order":"C","filters":[{"id":"vlen-utf8"}]}' >"$T/zstd/.zarray"
chunk zstd 0 'not a zstd frame'
nds read "$T/zstd" -o "$T/out.jsonl"; refused "garbage under zstd" "chunk 0 of"

# zarr v3 string arrays
mkdir -p "$T/v3/c"
printf '{"zarr_format":3,"node_type":"array","shape":[4],"data_type":"string","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2]}},"chunk_key_encoding":{"name":"default"},"fill_value":"","codecs":[{"name":"vlen-utf8"}]}' >"$T/v3/zarr.json"
chunk v3 c/1 '\x02\x00\x00\x00\x05\x00\x00\x00ab'
nds read "$T/v3" -o "$T/out.jsonl"; refused "zarr3: length past the end" "chunk c/1 of"
chunk v3 c/1 '\x02\x00\x00\x00\x01\x00\x00\x00\x80\x00\x00\x00\x00'
nds read "$T/v3" -o "$T/out.jsonl"; refused "zarr3: invalid UTF-8" "not valid UTF-8"
mkdir -p "$T/v3bad"
printf '{"zarr_format":3,"node_type":"array","shape":[4],"data_type":"uint8","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2]}},"chunk_key_encoding":{"name":"default"},"fill_value":0,"codecs":[{"name":"vlen-utf8"}]}' >"$T/v3bad/zarr.json"
nds info "$T/v3bad"; refused "vlen-utf8 on uint8" "needs data_type"

# fixed widths of 0 and past 4096 bytes
for dtype in '|S0' '<U0' '|S4097' '<U1025' '|S99999999999999999999'; do
    mkdir -p "$T/w"
    printf '{"zarr_format":2,"shape":[4],"chunks":[2],"dtype":"%s","compressor":null,"fill_value":null,"order":"C","filters":null}' \
        "$dtype" >"$T/w/.zarray"
    nds info "$T/w"; refused "width $dtype" "$dtype"
done
nds create "$T/cw" --shape 4 --dtype '|S0'; refused "create --dtype |S0" "not a numpy string typestring"
nds create "$T/cw" --shape 4 --dtype '<U1025'; refused "create --dtype <U1025" "wider than 4096"
nds create "file://$T/cw3|zarr3:" --shape 4 --dtype '<U1025'; refused "zarr3 fixed width past 4096" "zarr3"
nds create "file://$T/cw4|zarr3:" --shape 4 --dtype '<U5'; succeeded "zarr3 fixed_length_utf32 by --dtype"
nds create "file://$T/cw4|zarr3:" --shape 4 --dtype '<U5'; refused "zarr3 create over an existing array" "exists"
mkdir -p "$T/z3w"
printf '{"zarr_format":3,"node_type":"array","shape":[4],"data_type":{"name":"fixed_length_utf32","configuration":{"length_bytes":0}},"chunk_grid":{"name":"regular","configuration":{"chunk_shape":[2]}},"chunk_key_encoding":{"name":"default"},"fill_value":"","codecs":[{"name":"bytes","configuration":{"endian":"little"}}]}' >"$T/z3w/zarr.json"
nds info "$T/z3w"; refused "zarr3 length_bytes 0" "length_bytes"
sed -i 's/"length_bytes":0/"length_bytes":99999999999/' "$T/z3w/zarr.json"
nds info "$T/z3w"; refused "zarr3 length_bytes past 4096" "length_bytes"
nds create "file://$T/cn5|n5:" --shape 4 --dtype string; refused "n5 string" "n5"

# the command line: output and input forms
objects ok vlen-utf8
nds read "$T/ok" -o "$T/out.npy"; refused "a .npy of strings" "JSON Lines"
nds read "$T/ok" --raw -o "$T/out.raw"; clean_exit "--raw of strings"
check '[ "$RC" -eq 2 ]' "--raw of strings is a usage error"
printf '"a"\n"b"\n"c"\n"d"\n"e"\n' >"$T/five.jsonl"
nds write "$T/ok" -i "$T/five.jsonl"; refused "more lines than elements" "more lines"
printf '"a"\n{"b":1}\n"c"\n"d"\n' >"$T/obj.jsonl"
nds write "$T/ok" -i "$T/obj.jsonl"; refused "a line that is not a string" "line 2"
printf '"a"\n"b"\n"c"\n"d"\n' >"$T/four.jsonl"
nds write "$T/ok" -i "$T/four.jsonl"; succeeded "a good write"
nds read "$T/ok" -o "$T/back.jsonl"; succeeded "read back"
check 'cmp -s "$T/four.jsonl" "$T/back.jsonl"' "read back equals what was written"

# cp of string arrays: zarr v2 -> zarr v3 -> zarr v2, and fixed width zarr v2 -> zarr v3
nds cp "$T/ok" "file://$T/ok3|zarr3:"; succeeded "cp a zarr v2 string array to zarr v3"
nds read "file://$T/ok3|zarr3:" -o "$T/back3.jsonl"; succeeded "read the zarr v3 copy"
check 'cmp -s "$T/four.jsonl" "$T/back3.jsonl"' "the zarr v3 copy holds the same elements"
nds cp "file://$T/ok3|zarr3:" "$T/ok2.zarr"; succeeded "cp it back to zarr v2"
nds read "$T/ok2.zarr" -o "$T/back2.jsonl"; succeeded "read the zarr v2 copy"
check 'cmp -s "$T/four.jsonl" "$T/back2.jsonl"' "the zarr v2 copy holds the same elements"
nds cp "$T/s.zarr" "file://$T/s3|zarr3:"; succeeded "cp |S5 to zarr v3 (null_terminated_bytes)"
nds read "file://$T/s3|zarr3:" -o "$T/s3.npy"; succeeded "read the |S5 copy"
check 'cmp -s "$T/s.npy" "$T/s3.npy"' "the |S5 copy's .npy equals the source's"
nds cp "$T/ok" "file://$T/okn5|n5:"; refused "cp of strings to n5" "n5"

finish
