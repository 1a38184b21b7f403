#!/usr/bin/env bash
# The attack suite: the command line against hostile stores, hostile local servers (127.0.0.1 only,
# bounded in count and time) and hostile arguments, built with ASan+UBSan (`make check` passes the
# build-asan binary). Each tests/attack/attack_*.sh is one class of attack; it prints "FAIL: ..." per
# failed check and ends with "N passed, N failed". This runner runs each under a time bound and ends
# with the totals.
#
# usage: tests/attack/run.sh path/to/ndstore [BUILD_DIR]
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=$(realpath "${1:?usage: run.sh path/to/ndstore [BUILD_DIR]}")
BUILD_DIR=$(realpath "${2:-$(dirname "$BIN")}")
export BIN BUILD_DIR

shopt -s nullglob
total_pass=0
total_fail=0
for script in "$HERE"/attack_*.sh; do
    [ "$(basename "$script")" = attack_lib.sh ] && continue
    name=$(basename "$script" .sh)
    out=$(timeout -k 10 600 bash "$script" 2>&1)
    rc=$?
    printf '%s\n' "$out" | grep -E '^(FAIL|SKIP)' | sed "s/^/[$name] /"
    line=$(printf '%s\n' "$out" | grep -E '^[0-9]+ passed, [0-9]+ failed' | tail -1)
    p=$(echo "$line" | awk '{print $1}')
    f=$(echo "$line" | awk '{print $3}')
    if [ -z "$line" ] || { [ "$rc" -ne 0 ] && [ "${f:-0}" -eq 0 ]; }; then
        echo "[$name] FAIL: ended with exit $rc and no result line (timeout is 124)"
        printf '%s\n' "$out" | tail -5 | sed "s/^/[$name]   /"
        f=$((${f:-0} + 1))
    fi
    echo "[$name] ${p:-0} passed, ${f:-0} failed"
    total_pass=$((total_pass + ${p:-0}))
    total_fail=$((total_fail + ${f:-0}))
done
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]
