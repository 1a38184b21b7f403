# Shared helpers of the attack scripts; sourced, not run. Needs BIN (the ndstore binary, normally the
# ASan+UBSan build). Makes the scratch directory T (removed on exit) and counts into pass and fail.
# Every command runs under a time bound: a hang is a failure, never a stuck suite.
set -u
ATTACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
T=$(mktemp -d "${TMPDIR:-/tmp}/ndstore-attack.XXXXXX")
pass=0
fail=0
cleanup_hooks=()
attack_cleanup() {
    local h
    for h in "${cleanup_hooks[@]}"; do eval "$h"; done
    chmod -R u+rwX "$T" 2>/dev/null
    rm -rf "$T"
}
trap attack_cleanup EXIT
on_exit() { cleanup_hooks+=("$1"); } # on_exit 'COMMAND': run at exit (stop a server, ...)

# Sanitizer reports make the process exit with these codes, so they can't pass for a clean error.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:exitcode=86:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:exitcode=87}
ATTACK_TIMEOUT=${ATTACK_TIMEOUT:-60}

source "$ATTACK_DIR/../integration/check_lib.sh"

# nds ARGS...: the binary under the time bound; sets OUT, ERR, RC (124 = timed out).
nds() {
    OUT=$(timeout -k 5 "$ATTACK_TIMEOUT" "$BIN" "$@" 2>"$T/.stderr")
    RC=$?
    ERR=$(cat "$T/.stderr")
}

# clean_exit DESC: no crash, no hang, no sanitizer report.
clean_exit() {
    if [ "$RC" -eq 124 ] || [ "$RC" -eq 137 ]; then no "$1: hung (killed after ${ATTACK_TIMEOUT}s)"; return; fi
    if [ "$RC" -ge 128 ]; then no "$1: killed by signal $((RC - 128))"; return; fi
    if [ "$RC" -eq 86 ] || [ "$RC" -eq 87 ] || [[ "$ERR" == *"Sanitizer"* || "$ERR" == *"runtime error:"* ]]; then
        no "$1: sanitizer report"; return
    fi
    ok
}
# refused DESC [TEXT]: a clean failure (exit 1, one "ndstore:" line) whose message contains TEXT.
refused() {
    clean_exit "$1"
    expect_rc 1 "$1"
    if [[ "$ERR" == "ndstore: "* ]] && [ "$(printf '%s\n' "$ERR" | grep -c .)" -eq 1 ]; then ok
    else no "$1: expected one 'ndstore:' line on stderr"; fi
    [ $# -ge 2 ] && expect_err "$2" "$1"
    return 0
}
# succeeded DESC: exit 0, clean.
succeeded() { clean_exit "$1"; expect_rc 0 "$1"; }

finish() { echo "$pass passed, $fail failed"; [ "$fail" -eq 0 ]; }
