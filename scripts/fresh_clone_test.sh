#!/usr/bin/env bash
# Proves the repository stands alone: copies it into a new temporary folder with no neighbours
# ($TMPDIR/nds-clone-*/x/y/ndstore: no sibling folders of any kind), builds it there from nothing
# (Release, its own build directory, nothing reused from this tree's builds) and runs its unit suites
# with ctest, NDS_FIXTURES unset, so the suites must find every fixture inside the copy.
# The copy is `git clone` of the committed HEAD (what CI checks out); outside a git checkout (a
# source tarball), the tree's files without build directories.
#
# usage: scripts/fresh_clone_test.sh          (JOBS=N to set the build and ctest parallelism)
# Prints the time of each step; exit status non-zero when the copy, the build or a suite fails.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd -P)
jobs=${JOBS:-$(nproc)}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/nds-clone-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/x/y"
dest=$tmp/x/y/ndstore
unset NDS_FIXTURES

start=$SECONDS
if [ "$(git -C "$root" rev-parse --show-toplevel 2>/dev/null)" = "$root" ]; then
    git clone -q --no-hardlinks "$root" "$dest"
    echo "fresh clone: cloned $(git -C "$dest" rev-parse --short HEAD) into $dest"
else
    mkdir "$dest"
    tar -C "$root" --exclude='./build' --exclude='./build-*' --exclude='./ndstore-demo' \
        --exclude='node_modules' -cf - . | tar -C "$dest" -xf -
    echo "fresh clone: not a git checkout; copied the tree into $dest"
fi
neighbours=$(find "$tmp" -mindepth 1 -maxdepth 3 -not -path "$dest" -not -path "$tmp/x" -not -path "$tmp/x/y")
[ -z "$neighbours" ] || { echo "fresh clone: $dest has neighbours: $neighbours" >&2; exit 1; }

cd "$dest"
s=$SECONDS
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DNDS_WERROR=ON >/dev/null
cmake --build build -j"$jobs" >"$tmp/build.txt" 2>&1 || { tail -30 "$tmp/build.txt"; exit 1; }
echo "fresh clone: built in $((SECONDS - s)) s"
s=$SECONDS
(cd build && ctest --output-on-failure -j"$jobs") >"$tmp/ctest.txt" 2>&1 || { cat "$tmp/ctest.txt"; exit 1; }
grep -E 'tests passed|tests failed' "$tmp/ctest.txt"
echo "fresh clone: unit suites in $((SECONDS - s)) s; $((SECONDS - start)) s in all"
