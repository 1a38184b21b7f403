#!/bin/sh
# ndstore vs zarr-python benchmark: write and read a 1024x1024x256 uint16 array (64^3 chunks) with
# compressor none, zstd level 1, blosc lz4 shuffle clevel 5 and gzip level 1, with both, in one run.
#
# usage: bench/run.sh [BUILD_DIR] [bench_zarr_python.py options: --reps N, --only NAME, --shape ...]
#        BUILD_DIR defaults to build/; the nds_bench target is built there if missing.
# Needs /usr/bin/python3 with numpy and zarr (Debian's python3-zarr). Arrays go to a temporary
# directory on local disk (under $TMPDIR, default /tmp), removed at the end; nothing is written to
# the repository. About 2 GB of memory and 2 GB of disk at peak; a few minutes on 2 cores.
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=build
case "${1:-}" in ''|-*) ;; *) BUILD=$1; shift ;; esac

if [ ! -x "$BUILD/nds_bench" ]; then
    echo "building nds_bench in $BUILD ..." >&2
    cmake --build "$BUILD" --target nds_bench -j2 >&2
fi
BENCH=$(cd "$BUILD" && pwd)/nds_bench

TMP=$(mktemp -d "${TMPDIR:-/tmp}/nds-bench-XXXXXX")
trap 'rm -rf "$TMP"' EXIT
trap 'exit 1' INT TERM HUP

CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
echo "machine: $(nproc) cores, $CPU," \
     "$(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo) RAM," \
     "temp dir $TMP on $(df -P "$TMP" | awk 'NR == 2 {print $1}')"
# Other work on the machine skews the numbers: the load average is printed before and after.
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 "$HERE/bench_zarr_python.py" --nds-bench "$BENCH" --tmp "$TMP" "$@"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
