#!/usr/bin/env bash
# `ndstore downsample` (issue 21): pyramids built from known volumes of odd sizes, every level read
# back and compared exactly with a NumPy reference computed here (the same cascade: level k from
# level k-1), for every method, with slabs of whole chunks and (when a chunk's input exceeds the
# budget) of parts of chunks; precomputed scales (in place and into a new volume) checked with
# `ndstore info`; the OME-Zarr group's metadata checked member by member; refusals.
#
# usage: tests/integration/downsample_test.sh path/to/ndstore
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/check_lib.sh"
scratch_setup downsample-test "${1:?usage: downsample_test.sh path/to/ndstore}"
if ! "$PY" -c 'import numpy' 2>/dev/null; then echo "FAIL: $PY has no numpy"; exit 1; fi

# The reference: level k of a (C order) reduced by factors, as docs/cli.md defines each method.
cat >ref.py <<'EOF'
import numpy as np

def reduce(a, f, method, sparse=False):
    out_shape = tuple(-(-n // k) for n, k in zip(a.shape, f))
    out = np.empty(out_shape, a.dtype)
    for idx in np.ndindex(*out_shape):
        blk = a[tuple(slice(i * k, min((i + 1) * k, n)) for i, k, n in zip(idx, f, a.shape))].ravel()
        if method == "mean":
            if a.dtype.kind == "f":
                s = 0.0
                for x in blk:  # summed in C order in double, as the kernel does
                    s += float(x)
                v = s / blk.size
            else:
                s, n = sum(int(x) for x in blk), blk.size
                v = (s + n // 2) // n if s >= 0 else -((-s + n // 2) // n)  # halves away from zero
        elif method == "min":
            v = blk.min()
        elif method == "max":
            v = blk.max()
        elif method == "stride":
            v = blk[0]
        else:  # mode: the most frequent, ties to the smallest; sparse: 0 only when all are 0
            vals = blk[blk != 0] if sparse and (blk != 0).any() else blk
            u, c = np.unique(vals, return_counts=True)
            v = u[np.argmax(c)]
        out[idx] = v
    return out

def pyramid(a, f, levels, method, sparse=False):
    out = [a]
    for _ in range(levels):
        out.append(reduce(out[-1], f, method, sparse))
    return out
EOF

# same_levels NPY FACTORS LEVELS METHOD SPARSE URL_OF_LEVEL...: every level read back (.npy) equals
# the reference.
same_levels() {
    local npy=$1 factors=$2 levels=$3 method=$4 sparse=$5
    shift 5
    local k=0 url
    for url in "$@"; do
        nds read "$url" -o "got_$k.npy"
        [ "$RC" -eq 0 ] || { no "read level $k of $npy ($url)"; return; }
        k=$((k + 1))
    done
    if "$PY" - "$npy" "$factors" "$levels" "$method" "$sparse" <<'EOF'; then ok; else no "$npy $method $factors: levels differ from NumPy's"; fi
import sys, numpy as np
sys.path.insert(0, ".")
from ref import pyramid
npy, factors, levels, method, sparse = sys.argv[1:6]
a = np.load(npy)
f = [int(x) for x in factors.split(",")]
f += [1] * (a.ndim - len(f))
want = pyramid(a, f, int(levels), method, sparse == "1")
bad = 0
for k, w in enumerate(want):
    g = np.load("got_%d.npy" % k)
    if g.shape != w.shape or g.dtype != w.dtype or not np.array_equal(g, w, equal_nan=True):
        bad += 1
        print("level", k, "got", g.dtype, g.shape, g.ravel()[:10], "want", w.dtype, w.shape, w.ravel()[:10])
sys.exit(1 if bad else 0)
EOF
}

# make NAME DTYPE SHAPE CHUNKS KIND: a zarr v3 array (and NAME.npy) of random values: KIND image
# (the dtype's range) or labels (few values, runs of zeros, so modes tie and background matters).
make() {
    "$PY" - "$1" "$2" "$3" "$5" <<'EOF'
import numpy as np, sys
name, dt, shape, kind = sys.argv[1], np.dtype(sys.argv[2]), tuple(int(s) for s in sys.argv[3].split(",")), sys.argv[4]
rng = np.random.default_rng(21)
if kind == "labels":
    a = rng.choice(np.array([0, 0, 0, 7, 9, 2**31 + 5 if dt.itemsize >= 4 else 11], dtype=np.uint64), size=shape).astype(dt)
elif dt.kind == "f":
    a = (rng.standard_normal(shape) * 1000).astype(dt)
else:
    info = np.iinfo(dt)
    a = rng.integers(int(info.min), int(info.max), size=shape, endpoint=True, dtype=dt)
np.save(name + ".npy", a)
EOF
    nds create "file://$T/$1|zarr3:" --shape "$3" --chunks "$4" --dtype "$2" --delete-existing
    nds write "file://$T/$1|zarr3:" -i "$1.npy"
    expect_rc 0 "make $1"
}

zlevels() { # zlevels DIR N: the URLs of levels 0..N of an OME-Zarr pyramid
    local k
    for ((k = 0; k <= $2; k++)); do printf '%s\n' "file://$T/$1/$k|zarr3:"; done
}

# ---- zarr v3 -> OME-Zarr, every method, odd sizes, several slabs ------------------------------------
make img_u8 uint8 11,9,7 4,4,3 image
make img_i16 int16 10,13,5 3,5,2 image
make img_f32 float32 9,6,7 4,4,4 image
make img_u64 uint64 7,7,3 4,4,2 image
make lab_u32 uint32 13,10,6 4,4,4 labels
make lab_i64 int64 9,9,5 4,3,2 labels
run() { # run NAME FACTORS LEVELS METHOD [--sparse]
    local name=$1 factors=$2 levels=$3 method=$4 sparse=0
    [ "${5:-}" = --sparse ] && sparse=1
    local out="pyr_${name}_${method}_${sparse}_${factors//,/x}.zarr"
    nds downsample "file://$T/$name|zarr3:" "file://$T/$out|zarr3:" --factors "$factors" --levels "$levels" \
        --method "$method" ${5:-} --memory-budget 4K --jobs 3
    expect_rc 0 "downsample $name $method $factors"
    mapfile -t urls < <(zlevels "$out" "$levels")
    same_levels "$name.npy" "$factors" "$levels" "$method" "$sparse" "${urls[@]}"
}
for m in mean min max stride; do
    run img_u8 2,2,2 2 "$m"
    run img_i16 3,2,1 2 "$m"
    run img_f32 2,3,2 2 "$m"
done
run img_u64 2,2,2 2 mean
run img_u8 4,3,4 1 mean # one chunk's input (48 x 48 bytes) exceeds the slab budget: chunks written in parts
run img_u64 2,2,1 1 max
run lab_u32 2,2,2 2 mode
run lab_u32 2,2,2 2 mode --sparse
run lab_i64 3,3,2 2 mode
run lab_i64 2,2,2 1 mode --sparse

# The group's OME-Zarr 0.5 metadata and the levels' dimension names.
"$PY" - "$T/pyr_img_i16_mean_0_3x2x1.zarr" <<'EOF' && ok || no "OME-Zarr multiscales metadata"
import json, sys
d = sys.argv[1]
g = json.load(open(d + "/zarr.json"))
assert g["zarr_format"] == 3 and g["node_type"] == "group", g
ome = g["attributes"]["ome"]
assert ome["version"] == "0.5", ome
ms = ome["multiscales"]
assert len(ms) == 1
axes = ms[0]["axes"]
assert [a["name"] for a in axes] == ["z", "y", "x"] and all(a["type"] == "space" for a in axes), axes
ds = ms[0]["datasets"]
assert [x["path"] for x in ds] == ["0", "1", "2"], ds
scales = [x["coordinateTransformations"] for x in ds]
assert scales == [[{"type": "scale", "scale": s}] for s in ([1, 1, 1], [3, 2, 1], [9, 4, 1])], scales
assert ms[0]["type"] == "mean" and ms[0]["metadata"]["factors"] == [3, 2, 1]
for k, shape in enumerate([[10, 13, 5], [4, 7, 5], [2, 4, 5]]):
    a = json.load(open("%s/%d/zarr.json" % (d, k)))
    assert a["node_type"] == "array" and a["shape"] == shape and a["dimension_names"] == ["z", "y", "x"], a
    assert a["data_type"] == "int16" and a["chunk_grid"]["configuration"]["chunk_shape"] == [3, 5, 2], a
EOF

# ---- precomputed: a segmentation's scales added in place, with an odd voxel offset -------------------
"$PY" -c '
import numpy as np
rng = np.random.default_rng(5)
np.save("seg.npy", rng.choice(np.array([0, 0, 3, 8, 4000000000], np.uint32), size=(13, 11, 5, 1)))'
nds create "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"file://$T/seg/\",\"multiscale_metadata\":{\"data_type\":\"uint32\",\"num_channels\":1,\"type\":\"segmentation\"},\"scale_metadata\":{\"size\":[13,11,5],\"chunk_size\":[8,8,4],\"resolution\":[4,4,40],\"voxel_offset\":[-3,1,2],\"encoding\":\"compressed_segmentation\"}}"
expect_rc 0 "create a precomputed segmentation"
nds write "file://$T/seg/|neuroglancer-precomputed:" -i seg.npy; expect_rc 0 "write it"
SEG="file://$T/seg/|neuroglancer-precomputed:"
nds downsample "$SEG" "$SEG" --factors 2,2,1 --levels 2 --memory-budget 8K
expect_rc 0 "downsample a precomputed volume in place"
expect_out "level 2: shape [4, 3, 5, 1], scale 16_16_40: compressed_segmentation(block=8,8,8)" "in place: level 2"
nds info "$SEG"
expect_out "scales:      3" "info shows all the scales"
expect_out "0  4_4_40    size [13, 11, 5]  offset [-3, 1, 2]  resolution [4, 4, 40]" "info: scale 0"
expect_out "1  8_8_40    size [7, 6, 5]    offset [-2, 0, 2]  resolution [8, 8, 40]" "info: scale 1 (size ceil, offset floor)"
expect_out "2  16_16_40  size [4, 3, 5]    offset [-1, 0, 2]  resolution [16, 16, 40]" "info: scale 2"
expect_out "chunk [8, 8, 4]  compressed_segmentation block [8, 8, 8]" "info: chunk and encoding carried"
# mode is the default for a segmentation
same_levels seg.npy 2,2,1 2 mode 0 "$SEG" "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"file://$T/seg/\",\"scale_index\":1}" \
    "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"file://$T/seg/\",\"scale_index\":2}"

nds downsample "$SEG" "$SEG" --factors 2,2,1 --levels 2
expect_rc 0 "in place again"
nds info "$SEG"
expect_out "scales:      3" "in place again: the same scales rewritten, none added"
# Into a new volume with --codec and --chunks (x,y,z): every level takes them.
nds downsample "$SEG" "file://$T/seg_raw|neuroglancer-precomputed:" --factors 2,2,1 --levels 1 --codec raw --chunks 4,4,2
expect_rc 0 "precomputed into a new volume with --codec and --chunks"
nds info "file://$T/seg_raw/|neuroglancer-precomputed:"
expect_out "1  8_8_40  size [7, 6, 5]    offset [-2, 0, 2]  resolution [8, 8, 40]  chunk [4, 4, 2]  raw  unsharded" "--codec and --chunks carried to level 1"
expect_out "volume:      segmentation, uint32, 1 channel" "the type is the source's"
same_levels seg.npy 2,2,1 1 mode 0 "file://$T/seg_raw/|neuroglancer-precomputed:" \
    "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"file://$T/seg_raw/\",\"scale_index\":1}"
# A sharded scale's sharding is carried to its levels.
nds cp "$SEG" "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"file://$T/segsh/\",\"scale_metadata\":{\"resolution\":[4,4,40],\"voxel_offset\":[-3,1,2],\"chunk_size\":[4,4,4],\"encoding\":\"compressed_segmentation\",\"sharding\":{\"@type\":\"neuroglancer_uint64_sharded_v1\",\"preshift_bits\":1,\"minishard_bits\":1,\"shard_bits\":2,\"hash\":\"murmurhash3_x86_128\",\"minishard_index_encoding\":\"gzip\",\"data_encoding\":\"gzip\"}}}"
expect_rc 0 "a sharded copy"
SH="file://$T/segsh/|neuroglancer-precomputed:"
nds downsample "$SH" "$SH" --factors 2,2,1 --levels 2 --memory-budget 16K
expect_rc 0 "downsample a hashed-sharded volume in place"
nds info "$SH"
expect_out "2  16_16_40  size [4, 3, 5]" "sharded: level 2"
check '[ "$(grep -o murmurhash3_x86_128 segsh/info | wc -l)" -eq 3 ]' "sharded: every scale is sharded"
same_levels seg.npy 2,2,1 2 mode 0 "$SH" "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"file://$T/segsh/\",\"scale_index\":1}" \
    "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"file://$T/segsh/\",\"scale_index\":2}"

# ---- precomputed: a zarr v3 image into a new volume, 3 factors for x,y,z -----------------------------
make img4 uint8 17,12,7,1 5,5,5,1 image
nds downsample "file://$T/img4|zarr3:" "file://$T/img4_pc|neuroglancer-precomputed:" --factors 2,2,2 --levels 2 --jobs 2
expect_rc 0 "downsample a zarr v3 image into a new precomputed volume"
nds info "file://$T/img4_pc/|neuroglancer-precomputed:"
expect_out "volume:      image, uint8, 1 channel" "new volume: image"
expect_out "2  4_4_4  size [5, 3, 2]" "new volume: level 2"
same_levels img4.npy 2,2,2 2 mean 0 "file://$T/img4_pc/|neuroglancer-precomputed:" \
    "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"file://$T/img4_pc/\",\"scale_index\":1}" \
    "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"file://$T/img4_pc/\",\"scale_index\":2}"
# The precomputed resolution becomes the OME-Zarr scale, in nanometres.
nds downsample "$SEG" "file://$T/seg_ome.zarr|zarr3:" --factors 2,2,1 --levels 1 --method mode
expect_rc 0 "precomputed into OME-Zarr"
"$PY" - "$T/seg_ome.zarr/zarr.json" <<'EOF' && ok || no "OME-Zarr from precomputed: axes and scales"
import json, sys
ms = json.load(open(sys.argv[1]))["attributes"]["ome"]["multiscales"][0]
assert [a["name"] for a in ms["axes"]] == ["x", "y", "z", "c"], ms["axes"]
assert ms["axes"][0]["unit"] == "nanometer" and ms["axes"][3]["type"] == "channel", ms["axes"]
assert [d["coordinateTransformations"][0]["scale"] for d in ms["datasets"]] == [[4, 4, 40, 1], [8, 8, 40, 1]]
EOF

# ---- refusals ------------------------------------------------------------------------------------------
nds downsample "file://$T/img_u8|zarr3:" "file://$T/r1.zarr|zarr3:" --factors 2,2
expect_rc 1 "factors of the wrong rank"; expect_err "--factors has 2 values; file://$T/img_u8|zarr3: has 3 dimensions" "wrong rank"
nds downsample "file://$T/img_u8|zarr3:" "file://$T/r1.zarr|zarr3:" --factors 1,1,1
expect_rc 1 "all factors 1"; expect_err "every factor is 1" "all factors 1"
nds downsample "file://$T/img_f32|zarr3:" "file://$T/r1.zarr|zarr3:" --factors 2,2,2 --method mode
expect_rc 1 "mode of floats"; expect_err "mode needs integer labels" "mode of floats"
nds downsample "file://$T/img_u8|zarr3:" "file://$T/r1.zarr|zarr3:" --factors 2,2,2 --method mean --sparse
expect_rc 2 "--sparse with mean"; expect_err "--sparse applies to --method mode only" "--sparse with mean"
nds downsample "file://$T/img_u8|zarr3:" "file://$T/r1.zarr|zarr:" --factors 2,2,2
expect_rc 1 "zarr v2 DST"; expect_err "an OME-Zarr group (|zarr3:), not 'zarr'" "zarr v2 DST"
nds downsample "$SEG" "$SEG" --factors 2,2,1,2
expect_rc 1 "precomputed channel factor"; expect_err "channel dimension is not downsampled" "channel factor"
nds downsample "file://$T/img_u8|zarr3:" "file://$T/r1.zarr|zarr3:" --factors 2,2,2 --method median
expect_rc 2 "unknown method"; expect_err "--method: expected mean, mode, min, max or stride, got 'median'" "unknown method"
nds downsample "file://$T/img_u8|zarr3:" '{"driver":"zarr3"}' --factors 2,2,2
expect_rc 1 "JSON DST"; expect_err "give a URL ending in |zarr3:" "JSON DST"
check '[ ! -e r1.zarr ]' "refusals write nothing"
# An existing pyramid is not replaced without --delete-existing, and is with it.
nds downsample "file://$T/img_u8|zarr3:" "file://$T/pyr_img_u8_mean_0_2x2x2.zarr|zarr3:" --factors 2,2,2 --levels 1
expect_rc 1 "existing pyramid"
nds downsample "file://$T/img_u8|zarr3:" "file://$T/pyr_img_u8_mean_0_2x2x2.zarr|zarr3:" --factors 2,2,2 --levels 1 --method max --delete-existing
expect_rc 0 "existing pyramid replaced with --delete-existing"
mapfile -t urls < <(zlevels pyr_img_u8_mean_0_2x2x2.zarr 1)
same_levels img_u8.npy 2,2,2 1 max 0 "${urls[@]}"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
