#!/usr/bin/env bash
# `ndstore cp` between every pair of formats: zarr v2, zarr v3, zarr v3 sharded, N5, neuroglancer
# precomputed, and precomputed sharded (identity hash, box-shaped shards): 36 ordered pairs, same-format
# ones included. Each source is created and written independently (ndstore create + write --raw) with a
# known uint16 volume of shape [20, 17, 9, 1] ([x, y, z, channel], as precomputed needs) in [8, 8, 4, 1]
# chunks that do not divide it, shards of [16, 16, 8, 1]; the first chunk is all zero (fill), so it is not
# stored and must come back as fill. Every copy is read back with `ndstore read --raw` and compared byte
# for byte with the data written, and its format and chunk layout are checked with `ndstore info`
# (the destination takes the source's read chunk, the inner chunk of a sharded source).
# `ndstore info` and `ndstore ls` are checked on each source for the format's own detail (text and JSON).
# Then the pairs that cannot work: dtypes and ranks a format lacks, and fill values N5 and precomputed
# cannot hold, each a clear one-line error that writes nothing; plus a precomputed volume with two scales
# (a scale copied out, a new scale copied in). Last, the peak RSS (GNU time) of a small-budget cp of
# 32 MiB into shards is checked against the budget (skipped without /usr/bin/time).
#
# usage: tests/integration/cp_matrix_test.sh BUILD_DIR   (or path/to/ndstore)
# Needs /usr/bin/python3 (standard library only) to make the test volume. Prints "FAIL: ..." for each
# failed check and a final "N passed, N failed" line; exits 1 on any failure.
set -u
HERE=$(cd "$(dirname "$0")" && pwd) # before the cd into the scratch directory

ARG=${1:?usage: cp_matrix_test.sh BUILD_DIR}
if [ -d "$ARG" ]; then BIN=$ARG/ndstore; else BIN=$ARG; fi
BIN=$(realpath "$BIN")
PY=/usr/bin/python3
T=$(mktemp -d "${TMPDIR:-/tmp}/ndstore-cp-matrix.XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1

pass=0
fail=0

source "$HERE/check_lib.sh"
# expect_fail TEXT DESC: exit 1, exactly one "ndstore: " line on stderr, containing TEXT
expect_fail() {
    local lines
    lines=$(printf '%s\n' "$ERR" | grep -c .)
    if [ "$RC" -eq 1 ] && [ "$lines" -eq 1 ] && [[ "$ERR" == "ndstore: "* && "$ERR" == *"$1"* ]]; then
        ok
    else
        no "$2: expected exit 1 and one 'ndstore: ...$1...' line"
    fi
}
check() { if eval "$1"; then ok; else OUT=""; ERR=""; no "$2 ($1)"; fi; }

# same_data DIR WANT.raw DESC: DIR's array reads back as WANT.raw, element for element
same_data() {
    nds read "$1" --raw -o "$1.out.raw"
    if [ "$RC" -ne 0 ]; then no "$3: read back"; return; fi
    local diff
    if diff=$(cmp "$1.out.raw" "$2" 2>&1); then ok; return; fi
    # "differ: byte N": name the element (uint16, C order over [20, 17, 9, 1])
    local byte=${diff##*byte } e
    byte=${byte%%,*}
    e=$(((byte - 1) / 2))
    OUT=""; ERR=""
    no "$3: element [$((e / 153)), $((e / 9 % 17)), $((e % 9)), 0] differs ($diff)"
}

# ---- the test volume --------------------------------------------------------------------------------
SHAPE=20,17,9,1
if ! "$PY" -c '
from array import array
v = array("H")  # host byte order, as `ndstore write --raw` takes it
for x in range(20):
    for y in range(17):
        for z in range(9):
            i = (x * 17 + y) * 9 + z
            v.append(0 if (x < 8 and y < 8 and z < 4) else (7 * i + 3) & 0xFFFF)
open("ramp.raw", "wb").write(v.tobytes())
open("ramp7.raw", "wb").write(array("H", [7 if e == 0 else e for e in v]).tobytes())
open("small.raw", "wb").write(array("H", [(5 * i + 1) & 0xFFFF for i in range(450)]).tobytes())
'; then
    echo "FAIL: cannot make the test volume with $PY"
    echo "0 passed, 1 failed"
    exit 1
fi

FORMATS="zarr2 zarr3 zarr3s n5 pc pcs"
SHARDING='{"@type":"neuroglancer_uint64_sharded_v1","preshift_bits":2,"minishard_bits":1,"shard_bits":3,"hash":"identity","minishard_index_encoding":"gzip","data_encoding":"gzip"}'

# spec FORMAT DIR: a spec creating an array of FORMAT in $T/DIR. The sharded ones name only their
# shards; the inner chunk comes from --chunks (sources) or from the source's read chunk (cp).
# Precomputed sharding: a grid of 3 x 3 x 3 chunks is 2 + 2 + 2 Morton bits; preshift 2 + minishard 1
# + shard 3 covers them, so each shard file is a 2 x 2 x 2 box of chunks (writable).
spec() {
    case $1 in
    zarr2) echo "file://$T/$2|zarr:" ;;
    zarr3) echo "file://$T/$2|zarr3:" ;;
    zarr3s) echo "{\"driver\":\"zarr3\",\"kvstore\":\"file://$T/$2/\",\"schema\":{\"chunk_layout\":{\"write_chunk\":{\"shape\":[16,16,8,1]}}}}" ;;
    n5) echo "file://$T/$2|n5:" ;;
    pc) echo "file://$T/$2/|neuroglancer-precomputed:" ;;
    pcs) echo "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"file://$T/$2/\",\"scale_metadata\":{\"sharding\":$SHARDING}}" ;;
    esac
}
# driver FORMAT: the format name info prints
driver() {
    case $1 in
    zarr2) echo zarr ;; zarr3 | zarr3s) echo zarr3 ;; n5) echo n5 ;; pc | pcs) echo neuroglancer_precomputed ;;
    esac
}
# layout_ok FORMAT DIR DESC: info shows the format, chunks [8, 8, 4, 1], and shards for sharded formats
layout_ok() {
    nds info "$2"
    expect_out "format:      $(driver "$1")" "$3: format"
    expect_out "chunks:      [8, 8, 4, 1]" "$3: chunks are the source's read chunks"
    case $1 in
    zarr3s | pcs) expect_out "shards:      [16, 16, 8, 1] (8 chunks each)" "$3: shards" ;;
    *) if [[ "$OUT" != *"shards:"* ]]; then ok; else no "$3: unsharded, but info shows shards"; fi ;;
    esac
}

# ---- sources ----------------------------------------------------------------------------------------
for f in $FORMATS; do
    nds create "$(spec "$f" "src_$f")" --shape $SHAPE --chunks 8,8,4,1 --dtype uint16
    expect_rc 0 "create the $f source"
    nds write "src_$f" --raw -i ramp.raw
    expect_rc 0 "write the $f source"
    same_data "src_$f" ramp.raw "$f source"
    layout_ok "$f" "src_$f" "$f source"
done
nds info src_zarr2
expect_out "stored:      26 of 27 chunks" "the all-zero chunk is not stored"

# ---- info and ls: each format's own detail, in text and JSON -----------------------------------------
# pyjson DESC FILE EXPR: EXPR (Python, over the JSON object o loaded from FILE) holds
pyjson() {
    local out
    if out=$("$PY" -c "import json, sys
o = json.load(open('$2'))
assert $3, o.get('details', o)" 2>&1); then ok; else OUT=$out; ERR=""; no "$1"; fi
}
nds attrs src_n5 --set '{"axes": ["x", "y", "z", "c"], "units": ["nm", "nm", "nm", ""], "resolution": [4, 4, 40, 1]}'
for f in $FORMATS; do
    nds info "src_$f" --json
    printf '%s' "$OUT" > "info_$f.json"
    nds info "src_$f"
    printf '%s' "$OUT" > "info_$f.txt"
done
OUT=$(cat info_zarr2.txt)
expect_out 'compressor:  {"id": "zstd", "level": 1}' "info zarr: compressor"
expect_out "filters:     none" "info zarr: filters"
expect_out "order:       C" "info zarr: order"
expect_out 'chunk keys:  separator "." (0.0.0.0)' "info zarr: dimension_separator"
pyjson "info --json zarr: details" info_zarr2.json "o['details'] == {'compressor': {'id': 'zstd', 'level': 1}, 'filters': None, 'order': 'C', 'dimension_separator': '.'}"
OUT=$(cat info_zarr3.txt)
expect_out "codec:       bytes(endian=little) | zstd(" "info zarr3: codec chain"
expect_out 'chunk keys:  default, separator "/" (c/0/0/0/0)' "info zarr3: chunk key encoding"
pyjson "info --json zarr3: details" info_zarr3.json "o['details']['chunk_key_encoding'] == {'name': 'default', 'separator': '/'} and 'sharding' not in o['details'] and [c['name'] for c in o['details']['codecs']] == ['bytes', 'zstd']"
OUT=$(cat info_zarr3s.txt)
expect_out "per shard:   [2, 2, 2, 1] inner chunks of [8, 8, 4, 1]" "info zarr3 sharded: chunks per shard"
expect_out "shard index: at the end, bytes(endian=little) | crc32c" "info zarr3 sharded: index location and codecs"
expect_out "inner codec: bytes(endian=little) | zstd(" "info zarr3 sharded: inner codecs"
pyjson "info --json zarr3 sharded: sharding" info_zarr3s.json "o['details']['sharding']['chunks_per_shard'] == [2, 2, 2, 1] and o['details']['sharding']['index_location'] == 'end' and o['chunks_per_shard'] == 8"
OUT=$(cat info_n5.txt)
expect_out 'compression: {"type": "gzip", "level": 1, "useZlib": false}' "info n5: compression"
expect_out "block size:  [8, 8, 4, 1]" "info n5: block size"
expect_out 'axes:        ["x", "y", "z", "c"]' "info n5: axes"
expect_out 'units:       ["nm", "nm", "nm", ""]' "info n5: units"
expect_out "resolution:  [4, 4, 40, 1]" "info n5: resolution"
pyjson "info --json n5: details" info_n5.json "o['details']['block_size'] == [8, 8, 4, 1] and o['details']['compression']['type'] == 'gzip' and o['details']['axes'] == ['x', 'y', 'z', 'c']"
OUT=$(cat info_pc.txt)
expect_out "volume:      image, uint16, 1 channel" "info precomputed: type and channels"
expect_out "scales:      1 (* = this array)" "info precomputed: scales"
expect_out "* 0  1_1_1  size [20, 17, 9]  offset [0, 0, 0]" "info precomputed: the open scale's row"
expect_out "chunk [8, 8, 4]  raw  unsharded" "info precomputed: chunk size, encoding, unsharded"
pyjson "info --json precomputed: scales" info_pc.json "o['details']['scale_key'] == '1_1_1' and o['details']['scales'][0]['open'] is True and o['details']['scales'][0]['sharding'] is None and o['details']['num_channels'] == 1"
OUT=$(cat info_pcs.txt)
expect_out "raw  sharded(hash=identity, preshift_bits=2, minishard_bits=1, shard_bits=3, minishard_index=gzip, data=gzip)" "info precomputed sharded: sharding parameters"
pyjson "info --json precomputed sharded" info_pcs.json "o['details']['scales'][0]['sharding']['shard_bits'] == 3 and o['shards'] == [16, 16, 8, 1]"
nds ls --no-recursive .
expect_out "src_zarr2/  (zarr: uint16 [20, 17, 9, 1], chunks [8, 8, 4, 1], zstd)" "ls: zarr"
expect_out "src_zarr3/  (zarr3: uint16 [20, 17, 9, 1], chunks [8, 8, 4, 1], zstd)" "ls: zarr3"
expect_out "src_zarr3s/  (zarr3: uint16 [20, 17, 9, 1], chunks [8, 8, 4, 1], sharded 2x2x2x1 per shard, zstd)" "ls: zarr3 sharded"
expect_out "src_n5/  (n5: uint16 [20, 17, 9, 1], chunks [8, 8, 4, 1], gzip)" "ls: n5"
expect_out "src_pc/  (neuroglancer_precomputed: 1 scale [1_1_1]; 1_1_1: uint16 [20, 17, 9, 1], chunks [8, 8, 4, 1], raw)" "ls: precomputed"
expect_out "src_pcs/  (neuroglancer_precomputed: 1 scale [1_1_1]; 1_1_1: uint16 [20, 17, 9, 1], chunks [8, 8, 4, 1], sharded 2x2x2x1 per shard, raw)" "ls: precomputed sharded"
nds ls src_zarr3s
expect_out "zarr.json  (zarr3: " "ls of an array names it on its metadata key"
expect_out "  c/0/0/0/0" "ls of an array still lists its keys"

# ---- every ordered pair ------------------------------------------------------------------------------
for s in $FORMATS; do
    for d in $FORMATS; do
        nds cp "src_$s" "$(spec "$d" "${s}_to_$d")" --memory-budget 4K -j 2
        expect_rc 0 "cp $s -> $d"
        expect_out "copied 3060 elements (6120 bytes)" "cp $s -> $d report"
        same_data "${s}_to_$d" ramp.raw "cp $s -> $d"
        layout_ok "$d" "${s}_to_$d" "cp $s -> $d"
    done
done

# ---- pairs that cannot work: a clear error, nothing written -------------------------------------------
nds create "file://$T/f64|zarr:" --shape $SHAPE --dtype float64
nds cp f64 "$(spec pc e_f64_pc)"
expect_fail "dtype float64 is not supported by the precomputed format" "float64 -> precomputed"
check '[ ! -e e_f64_pc ]' "a refused copy writes nothing"
nds create "file://$T/i64|zarr3:" --shape $SHAPE --dtype int64
nds cp i64 "$(spec pcs e_i64_pcs)"
expect_fail "dtype int64 is not supported by the precomputed format" "int64 -> precomputed sharded"
nds create "file://$T/c64|zarr3:" --shape $SHAPE --dtype complex64
nds cp c64 "$(spec n5 e_c64_n5)"
expect_fail 'dtype "complex64" is not supported by N5' "complex64 -> N5"
check '[ ! -e e_c64_n5 ]' "a refused copy writes nothing"
nds create "file://$T/b|zarr:" --shape $SHAPE --dtype bool
nds cp b "$(spec n5 e_b_n5)"
expect_fail 'dtype "bool" is not supported by N5' "bool -> N5"
nds cp b "$(spec pc e_b_pc)"
expect_fail "dtype bool is not supported by the precomputed format" "bool -> precomputed"
nds create "file://$T/flat|n5:" --shape 20,17 --dtype uint16
nds cp flat "$(spec pc e_flat_pc)"
expect_fail '"domain.shape" must have 4 entries [x, y, z, channel]' "2-d -> precomputed"
# A fill value N5 and precomputed cannot hold: refused with the way out, which then copies exactly.
nds create "file://$T/fill7|zarr:" --shape $SHAPE --chunks 8,8,4,1 --dtype uint16 --fill 7
nds write fill7 --raw -i ramp7.raw # the first chunk is all 7: not stored, read as fill
nds cp fill7 "$(spec n5 e_fill_n5)"
expect_fail "fill value 7 is not supported" "fill 7 -> N5"
expect_fail "pass --fill 0" "fill 7 -> N5 says what to do"
check '[ ! -e e_fill_n5 ]' "a refused copy writes nothing"
nds cp fill7 "$(spec pcs e_fill_pcs)"
expect_fail "fill value 7" "fill 7 -> precomputed sharded"
for d in n5 pcs; do
    nds cp fill7 "$(spec $d fill7_$d)" --fill 0
    expect_rc 0 "fill 7 -> $d with --fill 0"
    same_data "fill7_$d" ramp7.raw "fill 7 -> $d with --fill 0 copies the fill-valued elements"
done

# ---- a multiscale precomputed volume: copy a new scale in, and a scale out -----------------------------
nds create "file://$T/half|zarr3:" --shape 10,9,5,1 --chunks 4,4,4,1 --dtype uint16
nds write half --raw -i small.raw
nds cp half "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"file://$T/src_pc/\",\"scale_metadata\":{\"resolution\":[2,2,2]}}"
expect_rc 0 "cp into a new scale of an existing volume"
nds info src_pc
expect_out "scales:      2 (* = this array)" "the volume has two scales"
expect_out "1  2_2_2  size [10, 9, 5]" "the new scale is listed"
same_data src_pc ramp.raw "scale 0 is untouched"
nds cp "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"file://$T/src_pc/\",\"scale_index\":1}" "$(spec zarr2 half_back)"
expect_rc 0 "cp a scale chosen by index out"
nds read half_back --raw -o half_back.raw
check 'cmp -s half_back.raw small.raw' "scale 1 copied out equals what was copied in"

# ---- memory: a small budget bounds the peak RSS of a copy into shards ------------------------------------
# cp of 32 MiB of incompressible uint16 (so an encoded shard is as big as the shard) into 4 MiB zarr v3 and
# precomputed shards with --memory-budget 16M and 4 threads: the peak RSS (GNU time's %M) stays within the
# budget plus 8 MiB over that of a tiny copy (the process itself). An in-flight shard write holds up to
# three shards, so the budget allows one thread here; four threads would take ~40 MiB.
# peak_rss ARGS...: runs the binary under GNU time; sets RC and KIB (its peak RSS in KiB)
peak_rss() {
    /usr/bin/time -f %M -o "$T/.time" "$BIN" "$@" >/dev/null 2>"$T/.stderr"
    RC=$?
    KIB=$(tail -n 1 "$T/.time")
}
if [ ! -x /usr/bin/time ]; then
    echo "SKIP: /usr/bin/time (GNU time) is missing: the peak RSS of a small-budget cp is not checked"
elif ldd "$BIN" 2>/dev/null | grep -q libasan; then
    echo "SKIP: $BIN is built with AddressSanitizer (its quarantine keeps freed memory): peak RSS not checked"
else
    "$PY" -c 'import os; open("rand.raw", "wb").write(os.urandom(32 << 20))'
    nds create "file://$T/mem_src|zarr:" --shape 256,256,256,1 --chunks 64,64,64,1 --dtype uint16
    nds write mem_src --raw -i rand.raw
    expect_rc 0 "write the 32 MiB memory-test source"
    peak_rss cp src_zarr2 "$(spec zarr2 mem_tiny)" -j 4
    bound=$((KIB + (16 + 8) * 1024))
    # 4 x 4 x 4 chunks of 64^3: $SHARDING's bits make shards of 2 x 2 x 2 chunks, 128^3, as the zarr v3
    # ones; raw data encoding (gzip of 32 MiB on one thread would take seconds)
    for d in zarr3s pcs; do
        if [ $d = zarr3s ]; then
            dst="{\"driver\":\"zarr3\",\"kvstore\":\"file://$T/mem_$d/\",\"schema\":{\"chunk_layout\":{\"write_chunk\":{\"shape\":[128,128,128,1]}}}}"
        else
            dst=$(spec pcs "mem_$d" | sed 's/"data_encoding":"gzip"/"data_encoding":"raw"/')
        fi
        peak_rss cp mem_src "$dst" --memory-budget 16M -j 4
        OUT=""; ERR=$(cat "$T/.stderr")
        expect_rc 0 "cp 32 MiB into $d shards with --memory-budget 16M"
        check "[ $KIB -le $bound ]" "cp into $d shards with --memory-budget 16M: peak RSS $((KIB / 1024)) MiB, bound $((bound / 1024)) MiB"
        nds read "mem_$d" --raw -o "mem_$d.raw"
        check "cmp -s mem_$d.raw rand.raw" "cp into $d shards with a small budget copies every element"
        rm -rf "mem_$d" "mem_$d.raw"
    done
    rm -f rand.raw
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
