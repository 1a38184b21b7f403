#!/usr/bin/env bash
# Integration tests of the gcs and http kvstore drivers, on 127.0.0.1 only:
#  - tests/servers/strict_gcs.py (a GCS JSON-API test double) and, for the http driver, Python's own
#    `python3 -m http.server` (no Range, no ETag: the driver must cope) and strict_gcs.py's --static files
#    (Range, ETag);
#  - the unit binary test_kv_gcs against that server: the kvstore conformance suite on gcs, faults, http;
#  - `ndstore cp` of a local zarr v2 and v3 array to gs:// and back (values equal), `ndstore ls gs://...`,
#    `ndstore read` and `info` of a zarr array served over http://127.0.0.1 (read-only: writes and listing fail
#    with a clear error);
#  - faults (503s, resets, truncated answers) during `cp`: the copy lands whole, or fails cleanly leaving
#    nothing behind;
#  - a service-account key (made here with `openssl genpkey`) against a second server that requires tokens
#    and verifies the JWT signature: the copy works, and no private key or token appears in any output.
# Every server started here is stopped on exit.
#
# usage: tests/integration/gcs_http_test.sh path/to/ndstore [path/to/test_kv_gcs]
# Prints "FAIL: ..." per failed check and a final "N passed, N failed" line; exits 1 on any failure.
set -u

BIN=$(realpath "${1:?usage: gcs_http_test.sh path/to/ndstore [path/to/test_kv_gcs]}")
UNIT=$(realpath "${2:-$(dirname "$BIN")/test_kv_gcs}")
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SERVER="$ROOT/tests/servers/strict_gcs.py"
T=$(mktemp -d "${TMPDIR:-/tmp}/ndstore-gcs-test.XXXXXX")
PIDS=()

cleanup() {
    for p in "${PIDS[@]}"; do
        kill "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    rm -rf "$T"
}
trap cleanup EXIT
cd "$T" || exit 1

pass=0
fail=0
ok() { pass=$((pass + 1)); }
no() {
    fail=$((fail + 1))
    echo "FAIL: $*"
    [ -n "${OUT:-}" ] && printf '  stdout: %s\n' "$(printf '%s' "$OUT" | head -5)"
    [ -n "${ERR:-}" ] && printf '  stderr: %s\n' "$(printf '%s' "$ERR" | head -5)"
    return 0
}
# nds ARGS...: runs ndstore; sets OUT, ERR, RC, and keeps every output in $T/all.out for the secrets check.
nds() {
    OUT=$("$BIN" "$@" 2>"$T/.stderr")
    RC=$?
    ERR=$(cat "$T/.stderr")
    printf '%s\n%s\n' "$OUT" "$ERR" >>"$T/all.out"
}
expect_ok() { if [ "$RC" -eq 0 ]; then ok; else no "$1: exit $RC"; fi; }
expect_fail() { # DESC NEEDLE: exit 1 with one "ndstore:" line containing NEEDLE
    if [ "$RC" -eq 1 ] && [[ "$ERR" == "ndstore: "*"$2"* ]] && [ "$(printf '%s\n' "$ERR" | grep -c .)" -eq 1 ]; then
        ok
    else
        no "$1: expected exit 1 and one 'ndstore: ...$2...' line (exit $RC)"
    fi
}
check() { if eval "$1"; then ok; else no "$2 ($1)"; fi; }

# start_gcs NAME ARGS...: starts strict_gcs.py; sets PORT.
start_gcs() {
    local name=$1
    shift
    python3 "$SERVER" --port-file "$T/$name.port" "$@" >"$T/$name.log" 2>&1 &
    PIDS+=($!)
    for _ in $(seq 200); do [ -s "$T/$name.port" ] && break; sleep 0.05; done
    PORT=$(cat "$T/$name.port" 2>/dev/null)
    [ -n "$PORT" ] || { echo "FAIL: $name did not start"; cat "$T/$name.log"; exit 1; }
}
control() { # control ENDPOINT METHOD PATH [BODY]
    python3 - "$@" <<'EOF'
import sys, urllib.request
ep, method, path = sys.argv[1:4]
data = sys.argv[4].encode() if len(sys.argv) > 4 else None
print(urllib.request.urlopen(urllib.request.Request(ep + path, data=data, method=method), timeout=10).read().decode())
EOF
}
faults() { control "$1" POST /_test/faults "{\"rules\": $2}" >/dev/null; }
stat() { control "$1" GET /_test/stats | python3 -c "import json,sys; print(json.load(sys.stdin)['$2'])"; }

mkdir -p static www
start_gcs gcs --bucket ndsit --bucket ndstest --static "$T/static" --page-size 7
EP="http://127.0.0.1:$PORT"

# ---- the unit binary: conformance suite on gcs, faults, http ----------------------------------------
if STORAGE_EMULATOR_HOST=$EP NDS_TEST_GCS_STATIC="$T/static" CK_FORK=yes "$UNIT" >"$T/unit.log" 2>&1; then
    ok
else
    no "test_kv_gcs against $EP"
    tail -20 "$T/unit.log"
fi
grep -h "Checks:" "$T/unit.log"
faults "$EP" "[]"

# ---- cp local -> gs:// -> local, ls, info --------------------------------------------------------------
export STORAGE_EMULATOR_HOST=$EP
python3 -c "import struct,sys; sys.stdout.buffer.write(struct.pack('<1200i', *[i * 7 - 300 for i in range(1200)]))" >in.raw
nds create src.zarr --shape 40,30 --chunks 16,16 --dtype int32 --codec zstd:1
expect_ok "create src.zarr"
nds write src.zarr --raw -i in.raw
expect_ok "write src.zarr"
for fmt in zarr zarr3; do
    nds cp src.zarr "gs://ndsit/$fmt.arr|$fmt:"
    expect_ok "cp src.zarr -> gs://ndsit/$fmt.arr ($fmt)"
    nds cp "gs://ndsit/$fmt.arr|$fmt:" "back-$fmt.zarr"
    expect_ok "cp gs://ndsit/$fmt.arr -> back-$fmt.zarr"
    nds read "back-$fmt.zarr" --raw -o "back-$fmt.raw"
    check "cmp -s in.raw back-$fmt.raw" "values after cp to gs:// and back ($fmt)"
    nds read "gs://ndsit/$fmt.arr" --raw -o "direct-$fmt.raw"
    check "cmp -s in.raw direct-$fmt.raw" "values read straight from gs:// ($fmt)"
done
nds ls gs://ndsit/zarr.arr
expect_ok "ls gs://ndsit/zarr.arr"
check '[[ "$OUT" == *".zarray"* && "$OUT" == *" 0.0"* && "$OUT" == *"7 entries"* ]]' "ls lists .zarray and 6 chunks"
nds ls gs://ndsit/ --no-recursive
check '[[ "$OUT" == *"zarr.arr/"* && "$OUT" == *"zarr3.arr/"* ]]' "ls --no-recursive of the bucket"
nds info gs://ndsit/zarr.arr --json
check '[[ "$(printf "%s" "$OUT" | tr -d " \n")" == *"\"shape\":[40,30]"* ]]' "info over gs://"
nds ls gs://no-such-bucket/x/
expect_fail "ls of a missing bucket" "gs://no-such-bucket/x/"
check '[[ "$ERR" == *"HTTP 404"* && "$ERR" == *"notFound"* ]]' "the error names status and reason"

# ---- http (read-only): python3 -m http.server and strict_gcs.py --static ----------------------------
cp -r src.zarr www/ && cp -r src.zarr static/
HPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 -m http.server --bind 127.0.0.1 --directory "$T/www" "$HPORT" >"$T/http.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$HPORT/')" 2>/dev/null && break; sleep 0.1; done
for url in "http://127.0.0.1:$HPORT/src.zarr" "$EP/files/src.zarr"; do
    nds read "$url" --raw -o http.raw
    expect_ok "read $url"
    check "cmp -s in.raw http.raw" "values read over http ($url)"
    nds read "$url" --region '[3:5, 28:30]'
    check '[[ "$OUT" == *"[[ -"* || "$OUT" == *"[["* ]]' "region read over http ($url)"
    nds write "$url" --raw -i in.raw
    expect_fail "write over http ($url)" "read-only"
    nds ls "$url"
    expect_fail "ls over http ($url)" "read-only"
done

# ---- faults during cp: lands whole, or fails cleanly ----------------------------------------------
# Every 2nd upload and every 3rd download meets one of these until each has fired a few times.
faults "$EP" '[{"method":"POST","kind":"503","every":2,"count":3},{"method":"POST","kind":"reset","every":2,"count":2},
               {"method":"POST","kind":"truncate","every":2,"count":2},{"method":"POST","kind":"503_after","every":2,"count":2},
               {"method":"GET","kind":"503","every":3,"count":3},{"method":"GET","kind":"truncate","every":3,"count":2}]'
nds cp src.zarr "gs://ndsit/faulty.zarr|zarr:"
expect_ok "cp to gs:// under injected faults"
check '[ "$(stat "$EP" faults_fired)" -gt 0 ]' "faults fired"
faults "$EP" "[]"
nds read gs://ndsit/faulty.zarr --raw -o faulty.raw
check "cmp -s in.raw faulty.raw" "values after a copy under faults"
nds ls gs://ndsit/faulty.zarr
check '[[ "$OUT" == *"7 entries"* ]]' "no duplicate or stray objects after faults"
faults "$EP" '[{"method":"POST","kind":"503","count":100000}]'
nds cp src.zarr "gs://ndsit/failed.zarr|zarr:"
expect_fail "cp against a server that always answers 503" "HTTP 503"
faults "$EP" "[]"
nds ls gs://ndsit/failed.zarr
check '[[ "$OUT" == *"0 entries"* ]]' "a failed copy leaves nothing"

# ---- credentials: a service-account key against a server that requires tokens ---------------------
unset STORAGE_EMULATOR_HOST
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out key.pem 2>/dev/null &&
    openssl pkey -in key.pem -pubout -out pub.pem 2>/dev/null || { echo "FAIL: openssl genpkey"; exit 1; }
start_gcs auth --bucket authb --require-auth --public-key "$T/pub.pem"
AEP="http://127.0.0.1:$PORT"
python3 - "$AEP" >sa.json <<'EOF'
import json, sys
print(json.dumps({"type": "service_account", "project_id": "p", "private_key_id": "k1",
                  "private_key": open("key.pem").read(), "client_email": "robot@p.iam.gserviceaccount.com",
                  "token_uri": sys.argv[1] + "/token"}))
EOF
MARK=$(sed -n 2p key.pem | cut -c1-40) # a piece of the private key, to look for in every output
spec() { echo "{\"driver\":\"zarr\",\"kvstore\":{\"driver\":\"gcs\",\"bucket\":\"authb\",\"path\":\"$1/\",\"endpoint\":\"$AEP\",\"credentials\":$2}}"; }
GOOGLE_APPLICATION_CREDENTIALS="$T/sa.json" nds cp src.zarr "$(spec a.zarr '"default"')"
expect_ok "cp with GOOGLE_APPLICATION_CREDENTIALS (service account)"
nds read "$(spec a.zarr "{\"key_file\":\"$T/sa.json\"}")" --raw -o auth.raw
check "cmp -s in.raw auth.raw" "values read back with a key file"
check '[ "$(stat "$AEP" tokens_issued)" -eq 2 ]' "one token per process"
nds info "$(spec a.zarr "{\"key_file\":\"$T/sa.json\"}")" --json
check '[[ "$OUT" == *"key_file"* ]]' "info --json prints a spec naming the key file"
nds read "$(spec a.zarr '"anonymous"')" --raw -o anon.raw
expect_fail "anonymous read of a private bucket" "HTTP 401"
sed 's#/token"#/token?x=1"#' sa.json >bad.json
nds read "$(spec a.zarr "{\"key_file\":\"$T/bad.json\"}")" --raw -o bad.raw
expect_fail "a key the token endpoint refuses" "invalid_grant"
check '! grep -q -e "ya29\." -e "PRIVATE KEY" -e "eyJ" -e "$MARK" "$T/all.out"' \
    "no token, JWT or private key in any output"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
