#!/usr/bin/env bash
# Installs a build into a temporary prefix P (not the configured one) and builds a user's program
# (consumer.c) against it, the two ways a user would:
#   - P/lib/pkgconfig/ndstore.pc names prefix P; P/lib/cmake/ndstore holds ndstoreConfig.cmake and
#     ndstoreConfigVersion.cmake;
#   - pkg-config: with the shared library (`pkg-config --cflags --libs`), and with the static one
#     (`pkg-config --static`, libndstore.a named as -l:libndstore.a since both are installed);
#   - find_package(ndstore 0.1): ndstore::ndstore (shared) and ndstore::ndstore_static; a version the
#     package does not provide (9.0) is refused;
#   - an out-of-tree codec (tests/unit/oot_codec.c) the same way;
#   - an out-of-tree kvstore driver (oot_driver.c) built against the installed headers and shared
#     library alone, used through a spec by a zarr array;
#   - the Python package (when built): /usr/bin/python3 in a clean environment imports it from P, with
#     P's libndstore.so, and round-trips an array.
# Each program is compiled with -Wall -Wextra -Werror -std=c11, runs, and must print "OK <version>";
# ldd must show libndstore.so from P (shared) or no libndstore at all (static).
#
# usage: tests/install/install_test.sh [BUILD_DIR]   (default build; its libraries must be built)
# Last line: "N passed, N failed"; exit status 1 on any failure. Everything goes under one temporary
# directory, removed at the end.
set -u
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
BUILD=${1:-build}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
CC=${CC:-cc}
[ -f "$BUILD/CMakeCache.txt" ] || { echo "install_test.sh: $BUILD is not a configured build" >&2; exit 2; }
TMP=$(mktemp -d "${TMPDIR:-/tmp}/nds-install-XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
P=$TMP/prefix
SRC=$ROOT/tests/install

passed=0
failed=0
ok() { passed=$((passed + 1)); echo "ok   $*"; }
bad() { failed=$((failed + 1)); echo "FAIL $*"; }
finish() { echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit; }

# runs NAME PROGRAM SHARED|STATIC: the program prints OK, and links libndstore as asked.
runs() {
    local name=$1 prog=$2 kind=$3 out lib
    if ! out=$("$prog" 2>&1) || [[ "$out" != "OK "* ]]; then
        bad "$name: the program failed: $out"
        return
    fi
    lib=$(ldd "$prog" | grep libndstore)
    if [ "$kind" = shared ] && [[ "$lib" != *"=> $LIBDIR/libndstore.so"* ]]; then
        bad "$name: libndstore.so not taken from $LIBDIR: ${lib:-not linked}"
    elif [ "$kind" = static ] && [ -n "$lib" ]; then
        bad "$name: linked statically but needs $lib"
    else
        ok "$name: builds, runs and prints '$out' ($kind library)"
    fi
}

# ---- install ----
if cmake --install "$BUILD" --prefix "$P" >"$TMP/install.txt" 2>&1; then
    ok "cmake --install --prefix $P"
else
    bad "cmake --install failed:"; tail -5 "$TMP/install.txt"; finish
fi
PC=$P/lib/pkgconfig/ndstore.pc
CFG=$P/lib/cmake/ndstore
LIBDIR=$P/lib
CFLAGS="-std=c11 -Wall -Wextra -Werror -O1"

# ---- pkg-config ----
if [ ! -f "$PC" ]; then
    bad "no lib/pkgconfig/ndstore.pc in $P (found: $(cd "$P" && find . -name '*.pc' | tr '\n' ' '))"
else
    export PKG_CONFIG_PATH=$P/lib/pkgconfig
    prefix=$(pkg-config --variable=prefix ndstore)
    if [ "$prefix" = "$P" ]; then ok "ndstore.pc: prefix=$prefix"
    else bad "ndstore.pc: prefix=$prefix, installed in $P"; fi
    # shellcheck disable=SC2046,SC2086
    if $CC $CFLAGS "$SRC/consumer.c" -o "$TMP/pc-shared" $(pkg-config --cflags --libs ndstore) \
        -Wl,-rpath,"$(pkg-config --variable=libdir ndstore)" 2>"$TMP/pc-shared.txt"
    then runs "pkg-config, shared" "$TMP/pc-shared" shared
    else bad "pkg-config, shared: does not build:"; head -10 "$TMP/pc-shared.txt"; fi
    # shellcheck disable=SC2046,SC2086
    if $CC $CFLAGS "$SRC/consumer.c" -o "$TMP/pc-static" $(pkg-config --cflags ndstore) \
        $(pkg-config --static --libs ndstore | sed 's/-lndstore\b/-l:libndstore.a/') 2>"$TMP/pc-static.txt"
    then runs "pkg-config --static" "$TMP/pc-static" static
    else bad "pkg-config --static: does not build:"; head -10 "$TMP/pc-static.txt"; fi
    # An out-of-tree kvstore driver (oot_driver.c): only the installed headers (sys/kv_driver.h,
    # sys/error.h) and the exported symbols; a missing one fails the build or the link.
    # shellcheck disable=SC2046,SC2086
    if $CC $CFLAGS "$SRC/oot_driver.c" -o "$TMP/oot-shared" $(pkg-config --cflags --libs ndstore) \
        -lpthread -Wl,-rpath,"$(pkg-config --variable=libdir ndstore)" 2>"$TMP/oot-shared.txt"
    then runs "out-of-tree kvstore driver, zarr array on it" "$TMP/oot-shared" shared
    else bad "out-of-tree kvstore driver: does not build against the installed library:"; head -10 "$TMP/oot-shared.txt"; fi
    # An out-of-tree codec (tests/unit/oot_codec.c): the installed sys/codec.h and the exported
    # symbols, used through zarr v2 and v3 specs (its checks use Check and json-c).
    # shellcheck disable=SC2046,SC2086
    if $CC $CFLAGS "$ROOT/tests/unit/oot_codec.c" -o "$TMP/oot-codec" \
        $(pkg-config --cflags --libs ndstore check json-c) \
        -Wl,-rpath,"$(pkg-config --variable=libdir ndstore)" 2>"$TMP/oot-codec.txt"
    then runs "out-of-tree codec, zarr v2 and v3 arrays through it" "$TMP/oot-codec" shared
    else bad "out-of-tree codec: does not build against the installed library:"; head -10 "$TMP/oot-codec.txt"; fi
fi

# ---- Python package (when the build has it: NDS_PYTHON) ----
# Imported by Debian's python3 in a clean environment (env -i, PYTHONPATH = the installed dist-packages
# only, run from an empty directory), it must come from P, load P's libndstore.so (the extension's RPATH),
# and round-trip an array.
pydir=$(sed -n 's/^NDS_PYTHON_INSTALL_DIR:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
if grep -q '^NDS_PYTHON:BOOL=ON' "$BUILD/CMakeCache.txt" && [ -n "$pydir" ] && [ -d "$BUILD/python/ndstore" ]; then
    mkdir -p "$TMP/pyrun"
    # shellcheck disable=SC2016
    if out=$(cd "$TMP/pyrun" && env -i PATH=/usr/bin:/bin PYTHONPATH="$P/$pydir" /usr/bin/python3 -c '
import os, sys, numpy as np, ndstore
mod = ndstore._ndstore.__file__
libs = [l.split()[-1] for l in open("/proc/self/maps") if "libndstore.so" in l]
a = ndstore.open("memory://install/a|zarr:", create=True, shape=(6, 4), chunks=(4, 4), dtype="int32", codec="zstd:1")
a[1:5:2] = np.arange(4, dtype=np.int32)
ok = (a[...].sum() == 12 and a[3, 2] == 2)
print("OK" if ok else "WRONG", ndstore.__version__, os.path.realpath(mod), os.path.realpath(libs[0]))
' 2>&1) && [[ "$out" == "OK "* ]]; then
        read -r _ version module lib <<<"$out"
        if [[ "$module" != "$P/$pydir/ndstore/"* ]]; then bad "python: ndstore imported from $module, not $P/$pydir"
        elif [[ "$lib" != "$(realpath "$LIBDIR")/libndstore.so"* ]]; then bad "python: the extension loaded $lib, not $LIBDIR's"
        else ok "python: import ndstore $version from $P/$pydir (libndstore from $LIBDIR), array round trip"; fi
    else
        bad "python: the installed package does not import or round-trip: $out"
    fi
else
    echo "skip python: the build has no Python package (NDS_PYTHON is OFF)"
fi

# ---- find_package ----
consumer_cmake() { # NAME TARGET KIND
    local name=$1 target=$2 kind=$3 b=$TMP/cmake-$3
    if cmake -S "$SRC" -B "$b" -DCMAKE_PREFIX_PATH="$P" -DNDS_TARGET="$target" \
        -DCMAKE_C_FLAGS="$CFLAGS" >"$b.txt" 2>&1 && cmake --build "$b" >>"$b.txt" 2>&1
    then
        local dir
        dir=$(sed -n 's/^ndstore_DIR:PATH=//p' "$b/CMakeCache.txt")
        if [ "$dir" = "$CFG" ]; then runs "$name" "$b/consumer" "$kind"
        else bad "$name: found ndstore in $dir, not $CFG"; fi
    else
        bad "$name: does not configure or build:"; tail -15 "$b.txt"
    fi
}
if [ ! -f "$CFG/ndstoreConfig.cmake" ] || [ ! -f "$CFG/ndstoreConfigVersion.cmake" ]; then
    bad "no lib/cmake/ndstore/ndstoreConfig.cmake and ndstoreConfigVersion.cmake in $P"
    finish
fi
ok "installed lib/cmake/ndstore/ndstoreConfig.cmake and ndstoreConfigVersion.cmake"
consumer_cmake "find_package(ndstore 0.1), ndstore::ndstore" ndstore::ndstore shared
consumer_cmake "find_package(ndstore 0.1), ndstore::ndstore_static" ndstore::ndstore_static static
if cmake -S "$SRC" -B "$TMP/cmake-v9" -DCMAKE_PREFIX_PATH="$P" -DNDS_VERSION=9.0 >"$TMP/v9.txt" 2>&1; then
    bad "find_package(ndstore 9.0) succeeded: the version file accepts a version it is not"
elif grep -q 'compatible with requested version "9.0"' "$TMP/v9.txt"; then
    ok "find_package(ndstore 9.0) refused: no compatible version"
else
    bad "find_package(ndstore 9.0) failed for another reason:"; tail -10 "$TMP/v9.txt"
fi
finish
