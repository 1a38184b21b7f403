#!/usr/bin/env bash
# The memory budget (issue 22, docs/guarantees.md "Memory budget"): `ndstore cp --memory-budget 64M`
# of a 512 MiB array of 4 MiB chunks peaks (VmHWM of the process, by GNU time's %M) under the budget
# plus a fixed overhead (the process itself, its libraries, the codec contexts of each thread), for
# zarr v2, zarr v3 with shards and N5 destinations, with and without --jobs; the copy is checked
# element by element in sampled regions. So do `ndstore read -o` and `ndstore write -i` of the
# whole array (issue 17), the written array checked the same way.
#
# usage: tests/integration/memory_budget_test.sh path/to/ndstore
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/check_lib.sh"
scratch_setup memory-budget-test "${1:?usage: memory_budget_test.sh path/to/ndstore}"
if ! "$PY" -c 'import numpy' 2>/dev/null; then echo "FAIL: $PY has no numpy"; exit 1; fi
if [ ! -x /usr/bin/time ]; then echo "FAIL: needs GNU time (/usr/bin/time)"; exit 1; fi

BUDGET_MIB=64
OVERHEAD_MIB=32 # measured before the budget was enforced: 76-82 MiB for this copy

# The source: 512 MiB of uint16 (512 x 512 x 1024) in 128^3 chunks of 4 MiB, zstd-1, written in
# four slabs of 128 MiB (each made by NumPy: compressible but not constant).
nds create src.zarr --shape 512,512,1024 --chunks 128,128,128 --dtype uint16 --codec zstd:1
expect_rc 0 "create the 512 MiB source"
for k in 0 1 2 3; do
    "$PY" -c "
import numpy as np
k = $k
z = np.arange(k * 128, (k + 1) * 128, dtype=np.uint32)[:, None, None]
y = np.arange(512, dtype=np.uint32)[None, :, None]
x = np.arange(1024, dtype=np.uint32)[None, None, :]
np.save('slab.npy', ((z * 7 + y * 3 + x) % 4099 ^ (x * y) % 13).astype(np.uint16))"
    nds write src.zarr -r "[$((k * 128)):$((k * 128 + 128))]" -i slab.npy
    expect_rc 0 "write slab $k of the source"
done
rm -f slab.npy

# peak ARGS...: ndstore ARGS --memory-budget under GNU time; PEAK_MIB is its peak RSS.
peak() {
    OUT=$(/usr/bin/time -f %M -o peak.txt "$BIN" "$@" --memory-budget ${BUDGET_MIB}M 2>"$T/.stderr")
    RC=$?
    ERR=$(cat "$T/.stderr")
    PEAK_MIB=$(($(tail -1 peak.txt) / 1024))
}

# peak_cp DST ARGS...: cp src.zarr to DST under GNU time; PEAK_MIB is its peak RSS.
peak_cp() {
    local dst=$1
    shift
    peak cp src.zarr "$dst" "$@"
}

# same DST: sampled regions of DST equal the source's.
same() {
    local r
    for r in '[0:40, 0:512, 0:1024]' '[200:330, 100:260, 500:1024]' '[511, 511, :]' '[300:512, 7, 3:1000]'; do
        nds read src.zarr -r "$r" -o a.npy
        nds read "$1" -r "$r" -o b.npy
        check "$PY -c \"import numpy as np, sys; sys.exit(not (np.load('a.npy') == np.load('b.npy')).all())\"" \
            "cp to $1: region $r equals the source"
    done
}

limit=$((BUDGET_MIB + OVERHEAD_MIB))
for jobs in "" "--jobs 4"; do
    rm -rf v2.zarr v3.zarr b.n5
    peak_cp v2.zarr $jobs
    expect_rc 0 "cp to zarr v2 $jobs"
    echo "cp --memory-budget ${BUDGET_MIB}M to zarr v2 $jobs: peak $PEAK_MIB MiB"
    check "[ $PEAK_MIB -le $limit ]" "cp to zarr v2 $jobs peaks at $PEAK_MIB MiB, under $limit"
    same v2.zarr
    peak_cp '{"driver":"zarr3","kvstore":"file://'"$T"'/v3.zarr/","schema":{"chunk_layout":{"write_chunk":{"shape":[256,256,256]}}}}' $jobs
    expect_rc 0 "cp to zarr v3 sharded $jobs"
    echo "cp --memory-budget ${BUDGET_MIB}M to zarr v3 (256^3 shards) $jobs: peak $PEAK_MIB MiB"
    check "[ $PEAK_MIB -le $limit ]" "cp to zarr v3 sharded $jobs peaks at $PEAK_MIB MiB, under $limit"
    same "file://$T/v3.zarr|zarr3:"
    peak_cp "file://$T/b.n5|n5:" $jobs
    expect_rc 0 "cp to N5 $jobs"
    echo "cp --memory-budget ${BUDGET_MIB}M to N5 $jobs: peak $PEAK_MIB MiB"
    check "[ $PEAK_MIB -le $limit ]" "cp to N5 $jobs peaks at $PEAK_MIB MiB, under $limit"
    same "file://$T/b.n5|n5:"
done

# read -o and write -i of the whole array (512 MiB .npy) under the same budget: the slabs and the
# library's chunks in flight (cli_context_new) share it.
for jobs in "" "--jobs 4"; do
    rm -f whole.npy
    peak read src.zarr -o whole.npy $jobs
    expect_rc 0 "read -o of 512 MiB $jobs"
    echo "read --memory-budget ${BUDGET_MIB}M $jobs: peak $PEAK_MIB MiB"
    check "[ $PEAK_MIB -le $limit ]" "read $jobs peaks at $PEAK_MIB MiB, under $limit"
    rm -rf w.zarr
    nds create w.zarr --shape 512,512,1024 --chunks 128,128,128 --dtype uint16 --codec zstd:1
    peak write w.zarr -i whole.npy $jobs
    expect_rc 0 "write -i of 512 MiB $jobs"
    echo "write --memory-budget ${BUDGET_MIB}M $jobs: peak $PEAK_MIB MiB"
    check "[ $PEAK_MIB -le $limit ]" "write $jobs peaks at $PEAK_MIB MiB, under $limit"
    same w.zarr
done
rm -f whole.npy

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
