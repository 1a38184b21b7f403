#!/usr/bin/env bash
# Runs every test: the structure check (scripts/check_structure.py: no call cycles between files, at most
# 7 parameters), the Check unit suites and fuzz-corpus replays (Release build), installing and building
# against the installed library, the same suites under AddressSanitizer + UndefinedBehaviorSanitizer, the
# CLI integration tests, the multi-process writers test, the S3/GCS/HTTP drivers, interop with zarr-python
# and zarrita, and the same unit suites in a fresh clone in an empty folder. Installs what it needs first.
# Prints one summary line per stage and, last, "N passed, N failed" over the stages; exits non-zero when
# any stage fails.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=$(nproc)
# The fixtures in the tree (tests/fixtures); NDS_FIXTURES points the interop stages at another copy.
fixtures=${NDS_FIXTURES:-$root/tests/fixtures}
case "$fixtures" in /*) ;; *) fixtures=$root/$fixtures ;; esac

bash scripts/install-deps.sh || exit 1

passed=0
failed=0
failures=()
stage() { # stage NAME COMMAND...
  local name=$1
  shift
  echo "=== $name"
  local start=$SECONDS
  if "$@"; then
    passed=$((passed + 1))
    echo "=== $name: ok ($((SECONDS - start)) s)"
  else
    failed=$((failed + 1))
    failures+=("$name")
    echo "=== $name: FAILED ($((SECONDS - start)) s)"
  fi
}

build() { # build DIR CMAKE-ARGS...
  local dir=$1
  shift
  cmake -S . -B "$dir" -DNDS_WERROR=ON "$@" >/dev/null && cmake --build "$dir" -j"$jobs" >/dev/null
}

stage "build (release)" build build -DCMAKE_BUILD_TYPE=Release
# Issue 22's structure rules on the release build's objects and the sources (nothing built here): no
# call cycle between files, no function over 7 parameters. Any output fails the stage, as does the
# checker's own self-test.
structure() {
  local out
  out=$(python3 scripts/check_structure.py --self-test 2>&1 &&
    python3 scripts/check_structure.py "$root/build" lib drivers formats cli 2>&1)
  local rc=$?
  [ -n "$out" ] && echo "$out"
  [ "$rc" -eq 0 ] && [ -z "$out" ]
}
stage "structure (no call cycles, at most 7 parameters)" structure
stage "unit tests (release)" bash -c "cd build && ctest --output-on-failure -j$jobs"
# The release build installed into a temporary prefix; programs built against it with pkg-config and
# find_package(ndstore), shared and static, run.
[ -f tests/install/install_test.sh ] &&
  stage "install + consumer (pkg-config, find_package)" bash tests/install/install_test.sh "$root/build"
# The Python package (python/, docs/python.md) built by the release build, its pytest suites run against
# build/python with Debian's python3.
[ -d tests/python ] &&
  stage "python package (pytest)" env NDS_BUILD="$root/build" /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/python
stage "build (asan+ubsan)" build build-asan -DCMAKE_BUILD_TYPE=Debug -DNDS_SANITIZE=ON
stage "unit tests (asan+ubsan)" bash -c "cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j$jobs"
# The attack suite: the CLI against hostile stores, servers and arguments, under ASan+UBSan.
[ -f tests/attack/run.sh ] && stage "attack suite (asan+ubsan)" bash tests/attack/run.sh "$root/build-asan/ndstore" "$root/build-asan"
[ -f tests/integration/cli_test.sh ] && stage "cli integration" bash tests/integration/cli_test.sh "$root/build/ndstore"
[ -f tests/integration/images_test.sh ] &&
  stage "images out (png, tif)" bash tests/integration/images_test.sh "$root/build/ndstore"
[ -f tests/integration/downsample_test.sh ] &&
  stage "downsample (pyramids)" bash tests/integration/downsample_test.sh "$root/build/ndstore"
[ -f tests/integration/ome_test.sh ] && stage "OME-Zarr metadata" bash tests/integration/ome_test.sh "$root/build/ndstore"
[ -f tests/integration/cp_matrix_test.sh ] &&
  stage "cp between formats" bash tests/integration/cp_matrix_test.sh "$root/build"
[ -f tests/integration/versioned_test.sh ] &&
  stage "versioned store (cli)" bash tests/integration/versioned_test.sh "$root/build/ndstore"
[ -f tests/integration/serve_test.sh ] &&
  stage "ndstore serve (curl)" bash tests/integration/serve_test.sh "$root/build/ndstore"
[ -f tests/integration/memory_budget_test.sh ] && stage "memory budget (cp, read, write peak RSS)" bash tests/integration/memory_budget_test.sh "$root/build/ndstore"
[ -f tests/integration/concurrent_writers.sh ] &&
  stage "concurrent writers" bash tests/integration/concurrent_writers.sh "$root/build/ndstore"
[ -f tests/integration/s3_test.sh ] &&
  stage "s3 (strict double, Ceph RGW, Swift s3api)" bash tests/integration/s3_test.sh build
[ -f tests/integration/gcs_http_test.sh ] &&
  stage "gcs + http kvstores" bash tests/integration/gcs_http_test.sh "$root/build/ndstore" "$root/build/test_kv_gcs"
[ -f tests/interop/zarr2_interop.py ] &&
  stage "interop zarr-python (zarr v2)" /usr/bin/python3 tests/interop/zarr2_interop.py "$root/build/ndstore" "$fixtures"
[ -f tests/interop/n5_interop.py ] &&
  stage "interop zarr-python (N5)" /usr/bin/python3 tests/interop/n5_interop.py "$root/build/ndstore" "$fixtures"
[ -f tests/interop/zarr3_interop.mjs ] &&
  stage "interop zarrita (zarr v3)" bash -c "npm ci --prefix tests/interop --no-audit --no-fund >/dev/null && node tests/interop/zarr3_interop.mjs '$root/build/ndstore' '$fixtures'"
[ -f tests/interop/precomputed_interop.py ] &&
  stage "interop precomputed" /usr/bin/python3 tests/interop/precomputed_interop.py "$root/build/ndstore" "$fixtures"
# Neuroglancer itself (npm @janelia-flyem/neuroglancer 2.37.5 and neuroglancer 2.41.2, pinned in
# tests/interop/neuroglancer/) in headless Chromium, reading precomputed (JPEG image, sharded
# segmentation), zarr v3 (plain, sharded) and zarr v2 volumes that ndstore wrote and `ndstore serve`
# serves; screenshots checked pixel by pixel, and each check failing once the volume is damaged.
[ -f tests/interop/neuroglancer_test.py ] &&
  stage "neuroglancer in chromium" bash -c "npm ci --prefix tests/interop/neuroglancer --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null && timeout -k 10 200 /usr/bin/python3 tests/interop/neuroglancer_test.py '$root/build/ndstore'"
# The repository stands alone: a clone in an empty temporary folder (no folder beside it)
# builds from nothing and passes its unit suites.
[ -f scripts/fresh_clone_test.sh ] &&
  stage "fresh clone in an empty folder: build + unit tests (release)" bash scripts/fresh_clone_test.sh
# The benchmark still runs end to end (small arrays; numbers not checked: speed belongs to bench/).
stage "benchmark smoke run (bench/run.sh --quick)" bash -c "bash bench/run.sh '$root/build' --quick >/dev/null"

echo
[ ${#failures[@]} -gt 0 ] && echo "failed stages: ${failures[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
