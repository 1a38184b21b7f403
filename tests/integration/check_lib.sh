# Shared checks of the CLI integration scripts and the attack suite; sourced, not run.
# Needs BIN (the ndstore binary) and T (the scratch directory), or scratch_setup to make them;
# counts into pass and fail.

# scratch_setup NAME BIN_OR_BUILD_DIR: BIN (a build directory names its ndstore), PY
# (/usr/bin/python3) and a new empty scratch directory T, removed at exit and made current;
# pass and fail start at 0. For scripts that need no other clean-up at exit.
scratch_setup() {
    if [ -d "$2" ]; then BIN=$2/ndstore; else BIN=$2; fi
    BIN=$(realpath "$BIN")
    PY=/usr/bin/python3
    T=$(mktemp -d "${TMPDIR:-/tmp}/ndstore-$1.XXXXXX")
    trap 'rm -rf "$T"' EXIT
    cd "$T" || exit 1
    pass=0
    fail=0
}

# nds ARGS...: runs the binary; sets OUT (stdout), ERR (stderr), RC.
nds() {
    OUT=$("$BIN" "$@" 2>"$T/.stderr")
    RC=$?
    ERR=$(cat "$T/.stderr")
}

ok() { pass=$((pass + 1)); }
no() {
    fail=$((fail + 1))
    echo "FAIL: $*"
    echo "  rc=$RC"
    [ -n "$OUT" ] && printf '  stdout: %s\n' "$(printf '%s' "$OUT" | head -5)"
    [ -n "$ERR" ] && printf '  stderr: %s\n' "$(printf '%s' "$ERR" | head -5)"
    return 0
}

# expect_rc WANT DESC
expect_rc() { if [ "$RC" -eq "$1" ]; then ok; else no "$2: exit $RC, expected $1"; fi; }
# expect_out TEXT DESC: stdout contains TEXT
expect_out() { if [[ "$OUT" == *"$1"* ]]; then ok; else no "$2: stdout lacks '$1'"; fi; }
# expect_err TEXT DESC: stderr contains TEXT
expect_err() { if [[ "$ERR" == *"$1"* ]]; then ok; else no "$2: stderr lacks '$1'"; fi; }
# check COND DESC: a shell condition
check() { if eval "$1"; then ok; else no "$2 ($1)"; fi; }
