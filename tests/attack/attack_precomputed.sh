#!/usr/bin/env bash
# Hostile shard files of a neuroglancer precomputed volume whose shards are chosen by a hash:
# verify must decode every chunk listed by the shards' indexes and name each bad shard, info must
# count the chunks inside the shards, and neither may report a clean result on garbage (both used
# to see no chunk at all: "0 of 128 chunks", "checked 0 stored chunks: 0 bad", exit 0).
source "$(dirname "$0")/attack_lib.sh"

command -v python3 >/dev/null || { echo "SKIP: python3 needed to write shard files"; finish; exit; }

V="$T/v"
SPEC='{"driver":"neuroglancer_precomputed","kvstore":"file://'"$V"'/","create":true,
 "multiscale_metadata":{"data_type":"uint16","num_channels":1},
 "scale_metadata":{"size":[64,64,16],"chunk_size":[8,8,8],"encoding":"raw",
  "sharding":{"@type":"neuroglancer_uint64_sharded_v1","preshift_bits":1,"minishard_bits":2,
   "shard_bits":2,"hash":"murmurhash3_x86_128","minishard_index_encoding":"gzip",
   "data_encoding":"gzip"}}}'
python3 -c "
import random, sys
r = random.Random(2)
sys.stdout.buffer.write(bytes(r.getrandbits(8) | 1 for i in range(64 * 64 * 16 * 2)))" >"$T/r.bin"
nds create "$SPEC"; succeeded "create a hashed sharded volume"
nds write "file://$V/" --raw -i "$T/r.bin"; succeeded "write it"
check '[ "$(ls "$V/1_1_1" | grep -c "\.shard$")" -eq 4 ]' "4 shard files"

# Intact: every chunk is counted and checked.
nds info "file://$V/"; succeeded "info of the intact volume"
expect_out "stored:      128 of 128 chunks" "info counts the chunks inside the shards"
nds verify "file://$V/"; succeeded "verify of the intact volume"
expect_out "checked 128 stored chunks" "verify decodes the chunks inside the shards"

# damaged NAME SHARD MODE: a copy of the volume with one shard file replaced or altered.
damaged() {
    rm -rf "$T/$1"
    cp -r "$V" "$T/$1"
    python3 - "$T/$1/1_1_1/$2.shard" "$3" <<'EOF'
import sys
path, mode = sys.argv[1:3]
d = bytearray(open(path, "rb").read())
if mode == "garbage":
    d = bytearray((i * 97 + 13) & 0xff for i in range(3000))
elif mode == "empty":
    d = bytearray()
elif mode == "ff":
    d = bytearray(b"\xff" * len(d))
elif mode == "short":
    d = d[:40]
elif mode == "data":  # a byte inside the chunk data, past the 64-byte shard index
    d[64 + 50] ^= 0xff
open(path, "wb").write(d)
EOF
}

for mode in garbage empty ff short data; do
    damaged "$mode" 2 "$mode"
    nds verify "file://$T/$mode/"
    refused "verify, shard 2 $mode" "bad"
    expect_out "bad: 1_1_1/2.shard: " "verify names shard 2 ($mode)"
    check '[[ "$OUT" != *"checked 0 stored"* ]]' "verify checks the other shards' chunks ($mode)"
    nds info "file://$T/$mode/"
    clean_exit "info, shard 2 $mode"
    check '[[ "$OUT" != *"stored:      0 of"* ]]' "info does not claim 0 chunks ($mode)"
done
# The shard whose index is garbage makes info fail naming it, never report a count.
nds info "file://$T/garbage/"; refused "info with a garbage shard" "1_1_1/2.shard"

# A file that is not a shard of this scale (name, digits) is not taken for one.
cp -r "$V" "$T/extra"
printf 'junk' >"$T/extra/1_1_1/notes.shard"
printf 'junk' >"$T/extra/1_1_1/002.shard"
nds verify "file://$T/extra/"; succeeded "verify ignores files that are not shards of the scale"
expect_out "checked 128 stored chunks" "verify with stray files"
finish
