#!/bin/bash
# The s3 kvstore against real servers and the project's strict test double, all on 127.0.0.1:
#   strict  tests/servers/strict_s3.py (test double: atomic If-Match, fault injection)
#   ceph    Ceph RGW (one mon, one memstore OSD, radosgw), from tests/servers/ceph-rgw
#   swift   OpenStack Swift + s3api (answers 501 to conditional PUTs), from tests/servers/swift-s3api
# For each: test_kv_s3 (the kvstore conformance suite and the driver's own tests, with what "auto" must
# decide there), `ndstore cp` of a local zarr v2 array to s3:// (as zarr v2 and as zarr v3) and back, with
# equal values, `ndstore ls`, and secrets never in any output. On Ceph also: 8 concurrent `ndstore write` processes whose regions share every chunk,
# checked element by element (no lost update). On the double also: `ndstore cp` while PUTs and GETs fail
# with 503s and resets. On Swift: writes refused with a reason, then accepted with "conditional_writes":"off".
# The versioned store (`s3://bucket/p/|versioned:`, issue 18), on the double and on Ceph: the kvstore contract
# suite, 8 processes x 10 rounds committing a shared counter and keys of their own with every version read
# back, "conditional_writes":"off" refused at open, and the head hint written without the lease, with a
# commit's cost printed (test_kv_s3 with NDS_S3_TEST_VERSIONED=1), and `ndstore create/write/read/log/tag` of
# a zarr v3 array; on Swift: refused at open (test_kv_s3, `ndstore create` and `ndstore log`), saying it
# lacks create-only writes.
#
# usage: tests/integration/s3_test.sh [BUILD_DIR] [--only strict|ceph|swift] [--section base|versioned]
#   (BUILD_DIR default build; --section runs only the driver's checks, or only the versioned store's)
# Installs the servers first (scripts/install-s3-servers.sh, idempotent). Every server it starts it stops
# (trap on exit, by pid). Last line: "N passed, N failed"; exit status 1 on any failure.
set -u
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
BUILD=build
ONLY=""
SECTION=""
while [ $# -gt 0 ]; do
    case "$1" in
        --only) ONLY=$2; shift 2 ;;
        --section) SECTION=$2; shift 2 ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) BUILD=$1; shift ;;
    esac
done
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
NDS=$BUILD/ndstore
TKV=$BUILD/test_kv_s3
PY=/usr/bin/python3
SERVERS=$ROOT/tests/servers
for f in "$NDS" "$TKV"; do [ -x "$f" ] || { echo "s3_test.sh: $f not built" >&2; exit 2; }; done

PASSED=0
FAILED=0
TMP=$(mktemp -d "${TMPDIR:-/tmp}/nds-s3test-XXXXXX") || exit 1
CEPH_D=$TMP/ceph
SWIFT_D=$TMP/swift
STRICT_PID=""
CEPH_STARTED=0
SWIFT_STARTED=0
cleanup() {
    [ -n "$STRICT_PID" ] && kill "$STRICT_PID" 2>/dev/null && wait "$STRICT_PID" 2>/dev/null
    [ $CEPH_STARTED = 1 ] && D=$CEPH_D bash "$SERVERS/ceph-rgw/stop.sh"
    [ $SWIFT_STARTED = 1 ] && D=$SWIFT_D bash "$SERVERS/swift-s3api/stop.sh"
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

ok() { PASSED=$((PASSED + 1)); echo "ok   $*"; }
bad() { FAILED=$((FAILED + 1)); echo "FAIL $*"; }
t0=$SECONDS
elapsed() { echo "$((SECONDS - t0)) s"; }

# Runs a command, keeping its output in $TMP/out.txt (checked for secrets at the end).
run() { "$@" >>"$TMP/all-output.txt" 2>&1; }

mkbucket() { # endpoint ak sk bucket
    "$PY" - "$@" <<'EOF'
import sys, boto3
ep, ak, sk, b = sys.argv[1:5]
s = boto3.client('s3', endpoint_url=ep, aws_access_key_id=ak, aws_secret_access_key=sk, region_name='us-east-1')
try:
    s.create_bucket(Bucket=b)
except s.exceptions.BucketAlreadyOwnedByYou:
    pass
EOF
}

# A small zarr v2 array with known values, made locally.
make_source() {
    "$PY" -c "import numpy as np; np.save('$TMP/src.npy', (np.arange(300*200, dtype='<u2') * 7).reshape(300, 200))"
    run "$NDS" create "$TMP/src.zarr" --shape 300,200 --chunks 64,48 --dtype uint16 --codec zstd:1 &&
        run "$NDS" write "$TMP/src.zarr" --region '[0:300, 0:200]' -i "$TMP/src.npy"
}

same_npy() { "$PY" -c "import sys, numpy as np; sys.exit(0 if (np.load('$1') == np.load('$2')).all() else 1)"; }

# cp local -> s3 -> local, values equal; ls shows the keys.
cp_roundtrip() { # name url-prefix extra-spec
    local name=$1 url=$2
    if run "$NDS" cp "$TMP/src.zarr" "$url/rt.zarr/|zarr:" && run "$NDS" cp "$url/rt.zarr/|zarr:" "$TMP/back-$name.zarr" &&
        run "$NDS" read "$TMP/back-$name.zarr" -o "$TMP/back-$name.npy" && same_npy "$TMP/src.npy" "$TMP/back-$name.npy" &&
        run "$NDS" read "$url/rt.zarr/|zarr:" --region '[100:200, 50:150]' -o "$TMP/part-$name.npy" &&
        "$PY" -c "import sys, numpy as np; sys.exit(0 if (np.load('$TMP/part-$name.npy') == np.load('$TMP/src.npy')[100:200, 50:150]).all() else 1)"
    then ok "$name: ndstore cp zarr v2 local -> s3 -> local, values equal"
    else bad "$name: cp round trip (see output above)"; tail -5 "$TMP/all-output.txt"; fi
    if run "$NDS" cp "$TMP/src.zarr" "$url/rt3/|zarr3:" && run "$NDS" cp "$url/rt3/|zarr3:" "file://$TMP/back3-$name/|zarr3:" &&
        run "$NDS" read "file://$TMP/back3-$name/|zarr3:" -o "$TMP/back3-$name.npy" && same_npy "$TMP/src.npy" "$TMP/back3-$name.npy"
    then ok "$name: ndstore cp zarr v3 local -> s3 -> local, values equal"
    else bad "$name: zarr v3 cp round trip"; tail -5 "$TMP/all-output.txt"; fi
    "$NDS" ls "$url/rt.zarr/" >"$TMP/ls-$name.txt" 2>&1
    cat "$TMP/ls-$name.txt" >>"$TMP/all-output.txt"
    if grep -qE ' \.zarray( |$)' "$TMP/ls-$name.txt" && [ "$(grep -cE ' [0-9]+\.[0-9]+$' "$TMP/ls-$name.txt")" -eq 25 ]
    then ok "$name: ndstore ls lists .zarray and the 25 chunks"
    else bad "$name: ndstore ls"; cat "$TMP/ls-$name.txt"; fi
}

unit_suite() { # name expect [env...]
    local name=$1; shift
    if env "$@" CK_FORK=yes "$TKV" >"$TMP/unit-$name.txt" 2>&1; then ok "$name: test_kv_s3 ($(grep -o '[0-9]*%: Checks: [0-9]*' "$TMP/unit-$name.txt"))"
    else bad "$name: test_kv_s3"; grep -E "F:|E:|%" "$TMP/unit-$name.txt" | head -10; fi
    cat "$TMP/unit-$name.txt" >>"$TMP/all-output.txt"
    grep "auto decision" "$TMP/unit-$name.txt" | head -1
}

# ---- the versioned store over s3 (issue 18) ----
base_tests() { [ "$SECTION" != versioned ]; }
versioned_tests() { [ "$SECTION" != base ]; }

# The contract suite, and 8 processes committing, the refusals and the hint (test_kv_s3), through
# |versioned:. Prints the commit cost and the 8 processes' time that test_kv_s3 reports.
versioned_unit() { # name [env...]
    local name=$1 c=0 case cases=("s3 versioned conformance" "s3 versioned"); shift
    [ "$name" = swift ] && cases=("s3 versioned")
    for case in "${cases[@]}"; do
        c=$((c + 1))
        local out=$TMP/vunit-$name-$c.txt s=$SECONDS
        if env "$@" NDS_S3_TEST_VERSIONED=1 CK_RUN_CASE="$case" CK_FORK=yes "$TKV" >"$out" 2>&1 &&
            grep -q '100%: Checks: [1-9]' "$out"
        then ok "$name: test_kv_s3 \"$case\" ($(grep -o 'Checks: [0-9]*' "$out"), $((SECONDS - s)) s)"
        else bad "$name: test_kv_s3 \"$case\""; grep -E "F:|E:|%|failed" "$out" | head -10; fi
        grep -E "^s3 versioned" "$out" | sed 's/^/  /'
        cat "$out" >>"$TMP/all-output.txt"
    done
}

# ndstore create/write/read/log/tag of a small zarr v3 array through URL|versioned: (the store's base).
torch_checkpoint() { # name base-url: ndstore.torch's S3 test (tests/python/test_torch.py -k s3)
    local name=$1 out=$TMP/torch-$1.txt s=$SECONDS
    if [ ! -d "$BUILD/python/ndstore" ] || ! "$PY" -c 'import torch' 2>/dev/null; then
        echo "  $name: ndstore.torch not checked: needs python3-torch and the Python package in $BUILD/python"
        return 0
    fi
    if NDS_BUILD=$BUILD NDS_TORCH_TEST_S3_URL=$2 timeout 900 "$PY" -m pytest -q -p no:cacheprovider \
        "$ROOT/tests/python/test_torch.py" -k s3 >"$out" 2>&1 && grep -q ' passed' "$out" && ! grep -q skipped "$out"
    then ok "$name: ndstore.torch: 4 ranks save a model-shaped state dict to $2, 3 ranks load it resharded, bit for bit ($((SECONDS - s)) s)"
    else bad "$name: ndstore.torch on $2"; tail -30 "$out"; fi
    cat "$out" >>"$TMP/all-output.txt"
}

versioned_cli() { # name base-url (s3://bucket/prefix/)
    local name=$1 S=$2 A="$2|versioned:m/a/|zarr3:"
    "$PY" -c "import numpy as np; a = np.arange(64*48, dtype='<u2').reshape(64, 48); np.save('$TMP/v1.npy', a); np.save('$TMP/v2.npy', a * 3 + 1)"
    if run "$NDS" create "$A" --shape 64,48 --chunks 16,16 --dtype uint16 --codec zstd:1 &&
        run "$NDS" write "$A" -i "$TMP/v1.npy" && run "$NDS" tag "$S" first &&
        run "$NDS" write "$A" -i "$TMP/v2.npy" --txn atomic &&
        run "$NDS" read "$A" -o "$TMP/vnow-$name.npy" && same_npy "$TMP/v2.npy" "$TMP/vnow-$name.npy" &&
        run "$NDS" read "$S|versioned:@first/m/a/|zarr3:" -o "$TMP/vthen-$name.npy" && same_npy "$TMP/v1.npy" "$TMP/vthen-$name.npy"
    then ok "$name: ndstore create, write, tag, write --txn atomic through $S|versioned:; latest and @first read back"
    else bad "$name: versioned create/write/tag/read"; tail -5 "$TMP/all-output.txt"; fi
    "$NDS" log "$S" >"$TMP/vlog-$name.txt" 2>&1
    cat "$TMP/vlog-$name.txt" >>"$TMP/all-output.txt"
    local nv
    nv=$(grep -c '^version ' "$TMP/vlog-$name.txt")
    if [ "$nv" -ge 3 ] && head -1 "$TMP/vlog-$name.txt" | grep -q '^version '
    then ok "$name: ndstore log lists $nv versions, newest first"
    else bad "$name: ndstore log"; cat "$TMP/vlog-$name.txt"; fi
    if "$NDS" tag "$S" first >"$TMP/vtag-$name.txt" 2>&1; then bad "$name: a tag moved"
    elif grep -q 'tags never move' "$TMP/vtag-$name.txt"; then ok "$name: ndstore tag refuses to move a tag"
    else bad "$name: tag again failed without the reason"; cat "$TMP/vtag-$name.txt"; fi
    cat "$TMP/vtag-$name.txt" >>"$TMP/all-output.txt"
}

# ---- install ----
s=$SECONDS
bash scripts/install-s3-servers.sh || { echo "s3_test.sh: installing the servers failed" >&2; exit 1; }
echo "install: $((SECONDS - s)) s"
make_source || { echo "s3_test.sh: cannot make the source array" >&2; exit 1; }

# ---- strict test double ----
if [ -z "$ONLY" ] || [ "$ONLY" = strict ]; then
    base_tests && unit_suite strict-double  # test_kv_s3 starts and stops its own double
    "$PY" tests/servers/strict_s3.py --port-file "$TMP/strict.port" --buckets ndstest --access-key STRICTAK \
        --secret-key 'strict/SECRET+key' >/dev/null 2>&1 &
    STRICT_PID=$!
    for i in $(seq 100); do [ -s "$TMP/strict.port" ] && break; sleep 0.1; done
    SP=$(cat "$TMP/strict.port")
    export AWS_ENDPOINT_URL_S3=http://127.0.0.1:$SP AWS_ACCESS_KEY_ID=STRICTAK AWS_SECRET_ACCESS_KEY='strict/SECRET+key'
    base_tests && cp_roundtrip strict s3://ndstest
    if versioned_tests; then
        versioned_unit strict  # its own double
        versioned_cli strict s3://ndstest/ck/
    fi
    # faults while copying: 503s and resets on PUT and GET, answers lost after the change was applied
    base_tests && curl -s -X POST "http://127.0.0.1:$SP/__faults" -d '{"rules":[
        {"method":"PUT","key":"f.zarr/[0-9]","action":"503","count":6},
        {"method":"PUT","key":"f.zarr/[0-9]","action":"reset","count":4},
        {"method":"PUT","key":"f.zarr/[0-9]","action":"reset_after","count":4},
        {"method":"GET","key":"f.zarr/[0-9]","action":"truncate","count":4}]}' >/dev/null
    if ! base_tests; then :
    elif run "$NDS" cp "$TMP/src.zarr" "s3://ndstest/f.zarr/|zarr:" && run "$NDS" read "s3://ndstest/f.zarr/|zarr:" -o "$TMP/f.npy" &&
        same_npy "$TMP/src.npy" "$TMP/f.npy"
    then ok "strict: cp and read under injected 503s, resets and truncated bodies, values equal ($(curl -s "http://127.0.0.1:$SP/__stats" | "$PY" -c 'import sys,json; print(json.load(sys.stdin)["faults_fired"])') faults fired)"
    else bad "strict: cp under faults"; tail -5 "$TMP/all-output.txt"; fi
    kill "$STRICT_PID"; wait "$STRICT_PID" 2>/dev/null; STRICT_PID=""
    unset AWS_ENDPOINT_URL_S3
fi

# ---- Ceph RGW ----
# 8 `ndstore write` processes at once, regions sharing every chunk (64x64) but no element; round r picks
# the pattern: interleaved rows, interleaved columns, a 2-D lattice. Prints the lost elements.
concurrent_writers() { # array-spec round
    local spec=$1 r=$2 n=8
    "$PY" - "$TMP" $n "$r" <<'EOF2'
import sys, numpy as np
d, n, r = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ids = np.arange(256 * 300, dtype=np.uint32).reshape(256, 300)
want = np.zeros((256, 300), np.uint32)
regions = []
for k in range(n):
    sel, text = [((slice(k, None, n), slice(None)), "[%d::%d, :]" % (k, n)),
                 ((slice(None), slice(k, None, n)), "[:, %d::%d]" % (k, n)),
                 ((slice(k % 2, None, 2), slice(k // 2, None, n // 2)),
                  "[%d::2, %d::%d]" % (k % 2, k // 2, n // 2))][r % 3]
    v = 1 + ids[sel] * 64 + k
    np.save('%s/w%d.npy' % (d, k), v)
    want[sel] = v
    regions.append(text)
np.save(d + '/want.npy', want)
open(d + '/regions.txt', 'w').write('\n'.join(regions) + '\n')
EOF2
    run "$NDS" create "$spec" --shape 256,300 --chunks 64,64 --dtype uint32 --codec zstd:1 --delete-existing || return 1
    local pids="" k=0 region
    while read -r region; do
        "$NDS" write "$spec" --region "$region" -i "$TMP/w$k.npy" >"$TMP/cw$k.txt" 2>&1 &
        pids="$pids $!"
        k=$((k + 1))
    done <"$TMP/regions.txt"
    local rc=0
    for p in $pids; do wait "$p" || rc=1; done
    cat "$TMP"/cw*.txt >>"$TMP/all-output.txt"
    [ $rc = 0 ] || { cat "$TMP"/cw*.txt | grep -v "^wrote" | head -5; return 1; }
    run "$NDS" read "$spec" -o "$TMP/cw.npy" || return 1
    "$PY" -c "
import sys, numpy as np
got, want = np.load('$TMP/cw.npy'), np.load('$TMP/want.npy')
bad = int((got != want).sum())
print('  round $r: %d elements differ, %d lost (read as fill)' % (bad, int((got[got != want] == 0).sum())))
sys.exit(1 if bad else 0)"
}

if [ -z "$ONLY" ] || [ "$ONLY" = ceph ]; then
    s=$SECONDS
    if D=$CEPH_D bash "$SERVERS/ceph-rgw/start.sh" memstore >"$TMP/ceph-start.txt" 2>&1; then
        CEPH_STARTED=1
        echo "ceph start: $((SECONDS - s)) s"
        CEP=http://127.0.0.1:7480
        mkbucket $CEP testak testsecret ndstest
        base_tests && unit_suite ceph NDS_S3_TEST_ENDPOINT=$CEP NDS_S3_TEST_BUCKET=ndstest NDS_S3_TEST_EXPECT=create_only \
            AWS_ACCESS_KEY_ID=testak AWS_SECRET_ACCESS_KEY=testsecret
        export AWS_ENDPOINT_URL_S3=$CEP AWS_ACCESS_KEY_ID=testak AWS_SECRET_ACCESS_KEY=testsecret
        if versioned_tests; then
            versioned_unit ceph NDS_S3_TEST_ENDPOINT=$CEP NDS_S3_TEST_BUCKET=ndstest NDS_S3_TEST_EXPECT=create_only
            versioned_cli ceph s3://ndstest/ck/
            torch_checkpoint ceph s3://ndstest/torch-ck/
        fi
        base_tests && cp_roundtrip ceph s3://ndstest
        s=$SECONDS
        cw_ok=1
        if base_tests; then
            for r in 0 1 2; do concurrent_writers "s3://ndstest/cw.zarr/|zarr:" $r || cw_ok=0; done
            if [ $cw_ok = 1 ]; then ok "ceph: 8 concurrent ndstore write processes sharing every chunk, 3 rounds, no lost update ($((SECONDS - s)) s)"
            else bad "ceph: concurrent writers lost updates"; fi
        fi
        # Why auto uses the lease on Ceph, measured here (reported, not counted): racing If-Match PUTs.
        base_tests && timeout 120 "$PY" "$SERVERS/race.py" $CEP testak testsecret 20 4 65536 2>&1 | tail -1 | sed 's/^/  race.py: /'
        unset AWS_ENDPOINT_URL_S3
        D=$CEPH_D bash "$SERVERS/ceph-rgw/stop.sh"; CEPH_STARTED=0
    else
        bad "ceph: could not start (see below)"; tail -20 "$TMP/ceph-start.txt"
    fi
fi

# ---- Swift s3api ----
if [ -z "$ONLY" ] || [ "$ONLY" = swift ]; then
    s=$SECONDS
    if D=$SWIFT_D bash "$SERVERS/swift-s3api/setup.sh" >"$TMP/swift-setup.txt" 2>&1 &&
        D=$SWIFT_D bash "$SERVERS/swift-s3api/start.sh" >"$TMP/swift-start.txt" 2>&1; then
        SWIFT_STARTED=1
        echo "swift setup + start: $((SECONDS - s)) s"
        SEP=http://127.0.0.1:8080
        mkbucket $SEP test:tester testing ndstest
        if base_tests; then
            unit_suite swift NDS_S3_TEST_ENDPOINT=$SEP NDS_S3_TEST_BUCKET=ndstest NDS_S3_TEST_EXPECT=none \
                AWS_ACCESS_KEY_ID=test:tester AWS_SECRET_ACCESS_KEY=testing
        fi
        export AWS_ENDPOINT_URL_S3=$SEP AWS_ACCESS_KEY_ID=test:tester AWS_SECRET_ACCESS_KEY=testing
        if versioned_tests; then
            versioned_unit swift NDS_S3_TEST_ENDPOINT=$SEP NDS_S3_TEST_BUCKET=ndstest NDS_S3_TEST_EXPECT=none
            "$NDS" create 's3://ndstest/ck/|versioned:m/a/|zarr3:' --shape 8,8 --chunks 4,4 --dtype uint16 >"$TMP/swift-vrefused.txt" 2>&1
            vrc=$?
            left=$("$NDS" ls s3://ndstest/ck/ 2>&1 | tail -1)
            if [ $vrc = 0 ]; then bad "swift: a versioned store was created without create-only writes"
            elif grep -q 'lacks atomic create-only writes' "$TMP/swift-vrefused.txt" && grep -q 'versioned store' "$TMP/swift-vrefused.txt" &&
                grep -q '501' "$TMP/swift-vrefused.txt" && [ "$left" = "0 entries, 0 bytes" ]
            then ok "swift: ndstore create through |versioned: refused at open, saying why, nothing left"
            else bad "swift: versioned refusal (ls after it: $left)"; cat "$TMP/swift-vrefused.txt"; fi
            cat "$TMP/swift-vrefused.txt" >>"$TMP/all-output.txt"
            # a command that only reads the latest version opens it the same way: refused too
            "$NDS" log 's3://ndstest/ck/|versioned:' >"$TMP/swift-vlog.txt" 2>&1
            vrc=$?
            if [ $vrc = 0 ]; then bad "swift: ndstore log of a versioned store without create-only writes succeeded"
            elif grep -q 'ndstore: versioned kvstore: its base s3://ndstest/ck/ lacks atomic create-only writes' "$TMP/swift-vlog.txt" &&
                grep -q 'If-None-Match' "$TMP/swift-vlog.txt" && grep -q '501' "$TMP/swift-vlog.txt"
            then ok "swift: ndstore log 's3://ndstest/ck/|versioned:' refused (exit $vrc), naming the base and the server's 501"
            else bad "swift: ndstore log refusal (exit $vrc)"; cat "$TMP/swift-vlog.txt"; fi
            cat "$TMP/swift-vlog.txt" >>"$TMP/all-output.txt"
        fi
        if base_tests; then
            if "$NDS" cp "$TMP/src.zarr" "s3://ndstest/refused.zarr/|zarr:" >"$TMP/swift-refused.txt" 2>&1; then
                bad "swift: cp succeeded although conditional writes are unavailable"
            elif grep -q 'conditional_writes' "$TMP/swift-refused.txt" && grep -q '501' "$TMP/swift-refused.txt"; then
                ok "swift: cp refused with the reason ($(grep -o 'answered HTTP 501[A-Za-z ]*' "$TMP/swift-refused.txt" | head -1))"
            else bad "swift: cp failed without the reason"; cat "$TMP/swift-refused.txt"; fi
            cat "$TMP/swift-refused.txt" >>"$TMP/all-output.txt"
            OFF='{"driver":"zarr","kvstore":{"driver":"s3","bucket":"ndstest","path":"off.zarr/","conditional_writes":"off"}}'
            if run "$NDS" cp "$TMP/src.zarr" "$OFF" && run "$NDS" read "$OFF" -o "$TMP/off.npy" && same_npy "$TMP/src.npy" "$TMP/off.npy"
            then ok "swift: cp with \"conditional_writes\":\"off\", values equal"
            else bad "swift: cp with conditional_writes off"; tail -5 "$TMP/all-output.txt"; fi
        fi
        unset AWS_ENDPOINT_URL_S3
        D=$SWIFT_D bash "$SERVERS/swift-s3api/stop.sh"; SWIFT_STARTED=0
    else
        bad "swift: could not set up or start"; tail -20 "$TMP/swift-setup.txt" "$TMP/swift-start.txt" 2>/dev/null
    fi
fi

# ---- secrets never printed ----
if grep -qE 'strict/SECRET\+key|testsecret|STRICTAK|testak' "$TMP/all-output.txt"; then
    bad "a credential appears in the output:"; grep -nE 'strict/SECRET\+key|testsecret|STRICTAK|testak' "$TMP/all-output.txt" | head -5
else
    ok "no access key or secret in any output ($(wc -l <"$TMP/all-output.txt") lines checked)"
fi

echo "total: $(elapsed)"
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
