# Shared checks of the CLI integration scripts (cli_test.sh, cp_matrix_test.sh); sourced, not run.
# Needs BIN (the ndstore binary) and T (the scratch directory); counts into pass and fail.

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
