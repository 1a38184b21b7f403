#!/usr/bin/env bash
# verify and info on sharded volumes, each kind of damage aimed at one part of a shard (issue 21):
# the shard index, a minishard index, a chunk's data inside the shard, a truncated shard file. Every
# one must be reported as a bad chunk naming the shard's key, with exit status 1; on the intact
# volume the counts must equal the chunks written. Covers neuroglancer precomputed with hashed
# shards (murmurhash3: the chunks of a shard are no box of the grid), with identity-hash shards that
# are grid boxes, and zarr v3 sharding_indexed.
source "$(dirname "$0")/attack_lib.sh"

command -v python3 >/dev/null || { echo "SKIP: python3 needed to damage shard files"; finish; exit; }

# Values 1..250 (never the fill value 0), so every chunk written is stored.
python3 -c "
import sys
sys.stdout.buffer.write(bytes((i * 7) % 250 + 1 for i in range(64 * 64 * 16 * 2)))" >"$T/r.bin"

# precomputed_spec DIR HASH PRESHIFT MINISHARD SHARD MINISHARD_INDEX_ENCODING
precomputed_spec() {
    printf '%s' '{"driver":"neuroglancer_precomputed","kvstore":"file://'"$1"'/","create":true,
 "multiscale_metadata":{"data_type":"uint16","num_channels":1},
 "scale_metadata":{"size":[64,64,16],"chunk_size":[8,8,8],"encoding":"raw",
  "sharding":{"@type":"neuroglancer_uint64_sharded_v1","preshift_bits":'"$3"',"minishard_bits":'"$4"',
   "shard_bits":'"$5"',"hash":"'"$2"'","minishard_index_encoding":"'"$6"'","data_encoding":"gzip"}}}'
}

# damage_pc FILE MODE MINISHARD_BITS: one part of a neuroglancer shard file altered (python: the shard index is
# 16 bytes per minishard, [start, end) after the index; a raw minishard index is 3 x n uint64:
# ids, offsets and sizes).
damage_pc() {
    python3 - "$1" "$2" "$3" <<'EOF'
import struct, sys, zlib
path, mode = sys.argv[1:3]
d = bytearray(open(path, "rb").read())
n = 1 << int(sys.argv[3])  # minishards per shard
entries = [struct.unpack_from("<QQ", d, 16 * i) for i in range(n)]
index_len = 16 * len(entries)
used = [i for i, (s, e) in enumerate(entries) if e > s]
m = used[0]
start, end = entries[m]
if mode == "shard-index":  # the first used minishard's range runs past the end of the file
    struct.pack_into("<QQ", d, 16 * m, start, len(d) + 4096)
elif mode == "minishard-index":  # a chunk's size in the raw minishard index made huge
    k = (end - start) // 24
    struct.pack_into("<Q", d, index_len + start + 8 * (2 * k), 1 << 40)
elif mode == "chunk":  # a byte inside the first chunk's gzip stream (after its 10-byte header)
    d[index_len + 20] ^= 0xff
elif mode == "truncated":
    d = d[: len(d) // 2]
open(path, "wb").write(d)
EOF
}

# verify_damaged NAME DIR SHARD_FILE MINISHARD_BITS: each mode on a copy of DIR; verify must name
# SHARD_FILE.
verify_damaged() {
    local name=$1 dir=$2 shard=$3 bits=$4 mode
    for mode in shard-index minishard-index chunk truncated; do
        rm -rf "$T/d"
        cp -r "$dir" "$T/d"
        damage_pc "$T/d/$shard" "$mode" "$bits"
        nds verify "file://$T/d/"
        refused "$name: verify, $mode" "bad"
        expect_out "bad: $shard: " "$name: verify names the shard ($mode)"
        check '[[ "$OUT" != *": 0 bad"* ]]' "$name: verify counts the damage ($mode)"
    done
}

# ---- precomputed, murmurhash3 shards (grouped: each shard's chunks found through its indexes)
H="$T/hashed"
nds create "$(precomputed_spec "$H" murmurhash3_x86_128 1 2 2 raw)"; succeeded "create hashed"
# 4 of the 8 x 8 x 2 = 128 chunks' worth of z: rows 0..31 of y, every x, z 0..7 = 8 x 4 x 1 = 32 chunks
nds write "file://$H/" --raw -i <(head -c $((64 * 32 * 8 * 2)) "$T/r.bin") --region 0:64,0:32,0:8,0:1
succeeded "write 32 chunks into hashed shards"
nds info "file://$H/"; succeeded "info, hashed"
expect_out "stored:      32 of 128 chunks" "info counts the 32 chunks written"
nds verify "file://$H/"; succeeded "verify, hashed"
expect_out "checked 32 stored chunks" "verify checks the 32 chunks written"
nds write "file://$H/" --raw -i "$T/r.bin"; succeeded "write every chunk"
nds verify "file://$H/"; succeeded "verify, hashed, full"
expect_out "checked 128 stored chunks" "verify checks all 128 chunks"
first=$(cd "$H" && ls 1_1_1/*.shard | head -1)
verify_damaged hashed "$H" "$first" 2
# info names the shard whose index is broken instead of reporting a count
rm -rf "$T/d"; cp -r "$H" "$T/d"; damage_pc "$T/d/$first" shard-index 2
nds info "file://$T/d/"; refused "info, hashed, broken shard index" "$first"

# ---- precomputed, identity hash whose shards are grid boxes (a shard is one storage chunk)
B="$T/box"
nds create "$(precomputed_spec "$B" identity 3 1 3 raw)"; succeeded "create box-sharded"
nds write "file://$B/" --raw -i "$T/r.bin"; succeeded "write box-sharded"
nds info "file://$B/"; succeeded "info, box"
expect_out "stored:      8 of 8 shards" "info counts the 8 shards"
nds verify "file://$B/"; succeeded "verify, box"
expect_out "checked 8 stored shards" "verify checks the 8 shards"
verify_damaged box "$B" "1_1_1/0.shard" 1

# ---- zarr v3 sharding_indexed (index with crc32c at the end of the shard)
Z="$T/z3"
nds create '{"driver":"zarr3","kvstore":"file://'"$Z"'/","create":true,"metadata":{"shape":[32,32],
 "data_type":"uint16","chunk_grid":{"name":"regular","configuration":{"chunk_shape":[16,16]}},
 "codecs":[{"name":"sharding_indexed","configuration":{"chunk_shape":[4,4],"codecs":[{"name":"bytes",
 "configuration":{"endian":"little"}},{"name":"gzip","configuration":{"level":1}}],"index_codecs":[
 {"name":"bytes","configuration":{"endian":"little"}},{"name":"crc32c"}]}}]}}'
succeeded "create zarr3 sharded"
nds write "file://$Z/" --raw -i <(head -c 2048 "$T/r.bin"); succeeded "write zarr3 sharded"
nds verify "file://$Z/"; succeeded "verify, zarr3"
expect_out "checked 4 stored shards" "verify checks the 4 shards"
for mode in index chunk-last chunk-first truncated; do
    rm -rf "$T/d"; cp -r "$Z" "$T/d"
    python3 - "$T/d/c/0/1" "$mode" <<'EOF'
import sys
path, mode = sys.argv[1:3]
d = bytearray(open(path, "rb").read())
if mode == "index":          # inside the 16 x 16 x 2 + 4 byte index at the end
    d[-20] ^= 0xff
elif mode == "chunk-first":  # inside the first inner chunk's gzip stream
    d[12] ^= 0xff
elif mode == "chunk-last":   # the last inner chunk: the one verify would see if it stopped early
    d[len(d) - 16 * 16 - 4 - 6] ^= 0xff
elif mode == "truncated":
    d = d[: len(d) // 2]
open(path, "wb").write(d)
EOF
    nds verify "file://$T/d/"
    refused "zarr3: verify, $mode" "bad"
    expect_out "bad: c/0/1: " "zarr3: verify names the shard ($mode)"
done
finish
