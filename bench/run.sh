#!/bin/sh
# ndstore vs zarr-python vs this machine's physical limit (issue 6), in one run: first the command
# line as users run it, whole processes against zarr-python + NumPy (bench/cli_bench.py); the versioned
# store's rows (bench/versioned_bench.py); PyTorch checkpoints against torch.save (bench/torch_bench.py); then full write, full
# read and random region reads of three array layouts x four compressors, peak RSS of every phase,
# thread scaling, the memory of `ndstore cp` of a 2 GiB array, and the peak RSS of 8 concurrent reads
# under the memory budget. See docs/performance.md and
# bench/bench.py.
#
# usage: bench/run.sh [BUILD_DIR] [--reps N] [--only NAME[,NAME..]] [--quick] [--seconds X]
#        BUILD_DIR defaults to build/; the targets nds_bench, nds_limit, nds_versioned_bench and ndstore_cli
#        (the CLI) are (re)built there.
# Needs /usr/bin/python3 with numpy and zarr (Debian's python3-zarr). Arrays go to a temporary
# directory under $TMPDIR (default /tmp), removed at the end; nothing is written to the repository.
# Full run: about 10 minutes on 2 cores, 2.5 GB of memory and 3.6 GB of disk at peak; --quick: about
# 20 seconds.
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=build
case "${1:-}" in ''|-*) ;; *) BUILD=$1; shift ;; esac

cmake --build "$BUILD" --target nds_bench nds_limit nds_versioned_bench ndstore_cli $(grep -q '^NDS_PYTHON:BOOL=ON' "$BUILD/CMakeCache.txt" 2>/dev/null && echo ndstore_python) -j2 >/dev/null
BUILD=$(cd "$BUILD" && pwd)

TMP=$(mktemp -d "${TMPDIR:-/tmp}/nds-bench-XXXXXX")
trap 'rm -rf "$TMP"' EXIT
trap 'exit 1' INT TERM HUP

CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
echo "machine: $(nproc) cores, $CPU," \
     "$(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo) RAM," \
     "temp dir $TMP on $(df -P "$TMP" | awk 'NR == 2 {print $1}')," \
     "$(df -Ph "$TMP" | awk 'NR == 2 {print $4}') free"
# Other work on the machine skews the numbers: the load average is printed before and after.
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
# What users run first (issue 17): whole ndstore processes against zarr-python + NumPy.
cli_args=--families
for a in "$@"; do [ "$a" = --quick ] && cli_args=--quick; done
echo
echo "## What users run"
/usr/bin/python3 "$HERE/cli_bench.py" "$BUILD/ndstore" --tmp "$TMP" $cli_args
echo
echo "## Versioned store (issue 18)"
/usr/bin/python3 "$HERE/versioned_bench.py" "$BUILD" --tmp "$TMP" $([ "$cli_args" = --quick ] && echo --quick)
echo
echo "## PyTorch checkpoints (issue 19)"
if /usr/bin/python3 -c 'import torch' 2>/dev/null && [ -d "$BUILD/python/ndstore" ]; then
  /usr/bin/python3 "$HERE/torch_bench.py" "$BUILD" --tmp "$TMP" $([ "$cli_args" = --quick ] && echo --quick)
else
  echo "skipped: needs python3-torch and the Python package in $BUILD/python"
fi
echo
/usr/bin/python3 "$HERE/bench.py" --build "$BUILD" --tmp "$TMP" "$@"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
