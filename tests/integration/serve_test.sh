#!/usr/bin/env bash
# `ndstore serve` answered by curl on 127.0.0.1: every status it gives (200, 206, 204, 400, 404, 405,
# 416, 500), byte ranges at the edges of a value, HEAD, CORS headers and the preflight, paths that try
# to leave the store (curl --path-as-is), 24 concurrent downloads through 2 threads, one log line per
# request, SIGTERM and SIGINT stopping it with exit 0 and the port free again; and the bytes served equal
# the bytes stored: every file of a file:// store byte for byte, and an array in an LMDB store and in a
# versioned store read back through ndstore's own http:// kvstore equal to the same array read
# directly. A corrupt versioned object is a 500, and the server goes on.
#
# usage: tests/integration/serve_test.sh BUILD_DIR   (or path/to/ndstore)
# Needs curl and /usr/bin/python3 (standard library). Talks only to 127.0.0.1; every server it starts is
# stopped on exit. Prints "FAIL: ..." per failed check and a final "N passed, N failed" line.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ARG=${1:?usage: serve_test.sh BUILD_DIR}
if [ -d "$ARG" ]; then BIN=$ARG/ndstore; else BIN=$ARG; fi
BIN=$(realpath "$BIN")
PY=/usr/bin/python3
T=$(mktemp -d "${TMPDIR:-/tmp}/ndstore-serve.XXXXXX")
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
    [ -n "${KEEP:-}" ] || rm -rf "$T"
}
trap cleanup EXIT
cd "$T" || exit 1

pass=0
fail=0
source "$HERE/check_lib.sh"
export NDS_TEST_DRIVERS=faulty # the faulty test driver: a test build's library registers it when asked
RC=0 OUT="" ERR=""

# serve NAME ARGS...: starts `ndstore serve ARGS` in the background; sets PID and URL (the line it
# prints once listening; waits at most 20 s). Its stderr goes to NAME.log.
serve() {
    local name=$1
    shift
    "$BIN" serve "$@" >"$T/$name.out" 2>"$T/$name.log" &
    PID=$!
    PIDS+=("$PID")
    URL=""
    for _ in $(seq 200); do
        URL=$(head -n 1 "$T/$name.out" 2>/dev/null)
        [ -n "$URL" ] && return 0
        kill -0 "$PID" 2>/dev/null || break
        sleep 0.1
    done
    echo "FAIL: serve $* did not print its URL"
    cat "$T/$name.log"
    fail=$((fail + 1))
    return 1
}
# stop PID SIGNAL: sends it and waits; sets RC to the exit status (124 after 20 s).
stop() {
    kill -"$2" "$1"
    for _ in $(seq 200); do
        kill -0 "$1" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$1" 2>/dev/null; then kill -9 "$1"; RC=124; wait "$1" 2>/dev/null; return; fi
    wait "$1"
    RC=$?
}
# get ARGS...: curl; sets CODE (status), BODY (file of the body), SIZE (body bytes received), HDR
# (headers, lower-case names). With -I, curl puts the headers in BODY too: SIZE is what counts.
get() {
    local w
    w=$(curl -s --max-time 20 -o "$T/body" -D "$T/hdr" -w '%{http_code} %{size_download}' "$@")
    CODE=${w% *} SIZE=${w#* }
    BODY=$T/body
    HDR=$(tr -d '\r' <"$T/hdr" | sed 's/^\([^:]*\):/\L\1:/')
}
header() { printf '%s\n' "$HDR" | sed -n "s/^$1: //p" | head -n 1; } # header NAME (lower case)

# ---- a file:// store ----
mkdir -p site/sub site/vol
printf 'hello world' >site/a.txt
printf '<h1>index</h1>' >site/index.html
printf '{"a": 1}' >site/sub/doc.json
: >site/empty.bin
head -c 3000000 /dev/urandom >site/sub/big.bin # three blocks and a bit: streamed
nds() { OUT=$("$BIN" "$@" 2>"$T/.stderr"); RC=$?; ERR=$(cat "$T/.stderr"); }
nds create "file://$T/site/vol/|zarr:" --shape 40,30 --chunks 16,16 --dtype uint16 --codec zstd:1
$PY -c "import sys,struct; sys.stdout.buffer.write(struct.pack('<1200H', *range(1200)))" >vol.raw
nds write "file://$T/site/vol/|zarr:" --raw -i vol.raw
check '[ "$RC" -eq 0 ]' "an array written into the served directory"

serve main "file://$T/site" --port 0 --threads 2 || exit 1
U=$URL MAIN=$PID
check '[[ "$U" == http://127.0.0.1:*/ ]]' "prints the URL it listens on"

# Every file of the store, served byte for byte.
while IFS= read -r f; do
    get "$U${f#site/}"
    check '[ "$CODE" = 200 ] && cmp -s "$BODY" "$f"' "GET ${f#site/} equals the stored file"
done < <(find site -type f | sort)

get "${U}a.txt"
check '[ "$(header content-length)" = 11 ] && [ "$(header content-type)" = "text/plain; charset=utf-8" ]' "GET: length and type"
check '[ "$(header access-control-allow-origin)" = "*" ] && [ "$(header accept-ranges)" = bytes ]' "GET: CORS and Accept-Ranges"
get -I "${U}sub/big.bin"
check '[ "$CODE" = 200 ] && [ "$(header content-length)" = 3000000 ] && [ "$SIZE" = 0 ]' "HEAD: the length, no body"
check '[ "$(header content-type)" = application/octet-stream ]' "HEAD: a chunk-like key is application/octet-stream"
get "${U}sub/doc.json"
check '[ "$(header content-type)" = application/json ]' ".json is application/json"
get "$U"
check '[ "$CODE" = 200 ] && [ "$(cat "$BODY")" = "<h1>index</h1>" ] && [[ "$(header content-type)" == text/html* ]]' "/ serves index.html"
get "${U}missing/key"
check '[ "$CODE" = 404 ] && [ "$(header access-control-allow-origin)" = "*" ]' "a missing key: 404, readable cross-origin"
get "${U}sub"
check '[ "$CODE" = 404 ]' "a directory is no key: 404"

# Keep-alive: one connection answers several requests (a viewer asks for many small chunks).
curl -sv --max-time 20 -o /dev/null -o /dev/null "${U}a.txt" "${U}sub/doc.json" 2>"$T/keepalive.txt"
check 'grep -q "Re-using existing connection" "$T/keepalive.txt" && ! grep -qi "^< connection: close" "$T/keepalive.txt"' "two requests on one connection (keep-alive)"

# Byte ranges: 206 with Content-Range, at the edges of the value.
range() { # range SPEC WANT_CODE WANT_BODY WANT_CONTENT_RANGE
    local want_code=$2 want_body=$3 want_range=$4
    get -H "Range: $1" "${U}a.txt"
    check '[ "$CODE" = "$want_code" ] && [ "$(cat "$BODY")" = "$want_body" ] && [ "$(header content-range)" = "$want_range" ]' "Range $1"
}
range "bytes=0-0" 206 "h" "bytes 0-0/11"
range "bytes=2-4" 206 "llo" "bytes 2-4/11"
range "bytes=10-10" 206 "d" "bytes 10-10/11"
range "bytes=6-" 206 "world" "bytes 6-10/11"
range "bytes=3-999" 206 "lo world" "bytes 3-10/11"
range "bytes=-5" 206 "world" "bytes 6-10/11"
range "bytes=-11" 206 "hello world" "bytes 0-10/11"
range "bytes=-500" 206 "hello world" "bytes 0-10/11"
range "bytes=0-" 206 "hello world" "bytes 0-10/11"
get -H "Range: bytes=11-" "${U}a.txt"
check '[ "$CODE" = 416 ] && [ "$(header content-range)" = "bytes */11" ]' "a range starting at the end: 416"
get -H "Range: bytes=9999-10000" "${U}a.txt"
check '[ "$CODE" = 416 ] && [ "$(header content-range)" = "bytes */11" ]' "a range past the end: 416"
get -H "Range: bytes=-0" "${U}a.txt"
check '[ "$CODE" = 416 ]' "an empty suffix: 416"
get -H "Range: bytes=0-0" "${U}empty.bin"
check '[ "$CODE" = 416 ] && [ "$(header content-range)" = "bytes */0" ]' "any range of an empty value: 416"
get "${U}empty.bin"
check '[ "$CODE" = 200 ] && [ "$(header content-length)" = 0 ]' "an empty value: 200, length 0"
get -H "Range: bytes=5-2" "${U}a.txt"
check '[ "$CODE" = 200 ] && [ "$(cat "$BODY")" = "hello world" ]' "a malformed range is ignored: 200"
get -H "Range: bytes=0-1,4-5" "${U}a.txt"
check '[ "$CODE" = 200 ] && [ "$(header content-length)" = 11 ]' "several ranges: the whole value, 200"
get -I -H "Range: bytes=4-" "${U}a.txt"
check '[ "$CODE" = 206 ] && [ "$(header content-length)" = 7 ] && [ "$(header content-range)" = "bytes 4-10/11" ] && [ "$SIZE" = 0 ]' "HEAD with a range: 206 headers, no body"
# Ranges across the blocks a large value is streamed in.
get -H "Range: bytes=1048570-2097160" "${U}sub/big.bin"
check '[ "$CODE" = 206 ] && cmp -s "$BODY" <(tail -c +1048571 site/sub/big.bin | head -c 1048591)' "a range across two blocks"
get -H "Range: bytes=-1" "${U}sub/big.bin"
check '[ "$CODE" = 206 ] && cmp -s "$BODY" <(tail -c 1 site/sub/big.bin) && [ "$(header content-range)" = "bytes 2999999-2999999/3000000" ]' "the last byte of a large value"

# Validators: an ETag from the store's generation; If-Range holds the range only for that ETag.
get "${U}a.txt"
etag=$(header etag)
check '[[ "$etag" == \"*\" ]]' "GET: an ETag (got '$etag')"
get -H "Range: bytes=0-4" -H "If-Range: $etag" "${U}a.txt"
check '[ "$CODE" = 206 ] && [ "$(cat "$BODY")" = hello ]' "If-Range with the current ETag: 206"
get -H "Range: bytes=0-4" -H 'If-Range: "an-older-value"' "${U}a.txt"
check '[ "$CODE" = 200 ] && [ "$(cat "$BODY")" = "hello world" ]' "If-Range with another ETag: the whole value, 200 (got $CODE)"
get -H "Range: bytes=0-4" -H "If-Range: Wed, 21 Oct 2015 07:28:00 GMT" "${U}a.txt"
check '[ "$CODE" = 200 ]' "If-Range with a date: the whole value, 200 (got $CODE)"

# ndstore serving what another ndstore serve serves (its http:// kvstore): a range is a ranged
# request upstream, never the whole value, and a large value streams whole (stable ETags).
serve chain "$U" --port 0 && {
    before=$(wc -l <main.log)
    get -H "Range: bytes=1000-1999" "${URL}sub/big.bin"
    check '[ "$CODE" = 206 ] && cmp -s "$BODY" <(tail -c +1001 site/sub/big.bin | head -c 1000)' "through a second serve: a range"
    check '[ -z "$(tail -n +$((before + 1)) main.log | grep "^GET /sub/big.bin 200")" ] && tail -n +$((before + 1)) main.log | grep -q "^GET /sub/big.bin 206 1000 "' "a range through a second serve reads only the range upstream"
    get "${URL}sub/big.bin"
    check '[ "$CODE" = 200 ] && cmp -s "$BODY" site/sub/big.bin' "through a second serve: 3 MB whole, in blocks"
    stop "$PID" TERM
}

# Read-only: other methods are 405 and change nothing.
for m in POST PUT DELETE PATCH; do
    get -X "$m" --data-binary x "${U}a.txt"
    check '[ "$CODE" = 405 ] && [[ "$(header allow)" == "GET, HEAD, OPTIONS" ]] && grep -q read-only "$BODY"' "$m is 405 (read-only)"
done
check '[ "$(cat site/a.txt)" = "hello world" ]' "the file is unchanged after PUT and DELETE"
get -X OPTIONS -H "Origin: http://127.0.0.1:1" -H "Access-Control-Request-Method: GET" \
    -H "Access-Control-Request-Headers: range" "${U}sub/big.bin"
check '[ "$CODE" = 204 ] && [ "$(header access-control-allow-origin)" = "*" ] && [[ "$(header access-control-allow-methods)" == *GET* ]] && [[ "$(header access-control-allow-headers)" == *range* ]]' "OPTIONS preflight: 204 allowing GET and Range"

# Paths that leave the store, or are not keys: 400, and nothing outside is read.
echo "secret outside" >"$T/outside.txt"
for p in "../outside.txt" "sub/../../outside.txt" "%2e%2e/outside.txt" "sub/%2E%2E/%2e%2e/outside.txt" \
    ".%2e/outside.txt" "..%2foutside.txt" "//$T/outside.txt" "%2f$T/outside.txt" "a%00.txt" \
    "sub%5c..%5c..%5coutside.txt" 'sub\..\a.txt' "a%0a.txt" "./a.txt" "sub//doc.json" "a%zz" "a%2"; do
    get --path-as-is "$U$p"
    check '[ "$CODE" = 400 ] && ! grep -q secret "$BODY"' "path $p refused with 400"
done
get --path-as-is "${U}sub%2fdoc.json"
check '[ "$CODE" = 200 ] && cmp -s "$BODY" site/sub/doc.json' "an encoded '/' inside the store is a key separator"
long=$(printf 'a%.0s' $(seq 5000))
get "$U$long"
check '[ "$CODE" = 414 ] || [ "$CODE" = 400 ]' "a path over 4096 bytes is refused"

# Hostile clients: garbage, an endless header, a request cut short, a huge declared body, a
# smuggling attempt. Each gets an error or a closed connection; the server goes on answering.
$PY - "${U#http://}" <<'EOF' >hostile.out 2>&1
import socket, sys
host, port = sys.argv[1].rstrip('/').split(':')
def send(data, read=True):
    s = socket.create_connection((host, int(port)), timeout=3)
    try:
        s.sendall(data)
        return s.recv(200).split(b'\r\n')[0].decode('latin-1') if read else ''
    except OSError as e:
        return 'closed (%s)' % type(e).__name__
    finally:
        s.close()
print('garbage:', send(b'\x00\xff GARBAGE \x01\r\n\r\n'))
print('long header:', send(b'GET /a.txt HTTP/1.1\r\nHost: x\r\nX-Long: ' + b'a' * 200000 + b'\r\n\r\n'))
print('cut short:', send(b'GET /a.txt HTTP/1.1\r\nHos', read=False))
print('huge body:', send(b'PUT /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\nabc'))
print('smuggled:', send(b'GET /a.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n'
                        b'Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n'))
EOF
check '! grep -v smuggled hostile.out | grep -q " 200 " && kill -0 "$MAIN"' "hostile clients get no 200 and the server lives ($(tr '\n' ';' <hostile.out))"
get "${U}a.txt"
check '[ "$CODE" = 200 ] && [ "$(cat "$BODY")" = "hello world" ]' "after hostile clients the server still answers"

# Concurrency: 24 downloads at once through 2 threads, each whole and equal.
for i in $(seq 24); do
    curl -s --max-time 60 -o "$T/c$i" "${U}sub/big.bin" &
done
wait_curls() { local j; for j in $(jobs -p); do [ "$j" = "$MAIN" ] || wait "$j"; done; }
wait_curls
same=0
for i in $(seq 24); do cmp -s "$T/c$i" site/sub/big.bin && same=$((same + 1)); done
check '[ "$same" = 24 ]' "24 concurrent downloads all equal the file ($same did)"

# The log: one line per request (method, path, status, bytes, ms).
check 'grep -q "^GET /a.txt 200 11 [0-9.]*ms$" main.log' "a log line per request"
check 'grep -q "^HEAD /sub/big.bin 200 0 " main.log && grep -q "^GET /\.\./outside.txt 400 " main.log' "HEAD and refusals are logged"
check 'grep -q "^GET /a.txt 206 3 [0-9.]*ms: bytes 2-4/11$" main.log && grep -q "^GET /a.txt 200 11 [0-9.]*ms: Range ignored: bytes=5-2$" main.log' "a 206 logs its Content-Range, an ignored Range is logged"
check '[ "$(grep -c "^GET /sub/big.bin 200 3000000 " main.log)" -ge 24 ]' "the concurrent downloads are logged"

port=${U#http://127.0.0.1:}
port=${port%/}
stop "$MAIN" TERM
check '[ "$RC" -eq 0 ]' "SIGTERM: exit 0 (got $RC)"
check 'grep -q "SIGTERM received" main.log' "SIGTERM: says so"
check '! curl -s --max-time 5 -o /dev/null "$U"' "SIGTERM: no longer answers"
serve again "file://$T/site" --port "$port" && {
    check '[ "$URL" = "$U" ]' "the port is free again after SIGTERM"
    stop "$PID" INT
    check '[ "$RC" -eq 0 ]' "SIGINT: exit 0 (got $RC)"
}

# ---- a store whose reads come back short (the faulty adapter): an error, never a short body ----
# A read that returns fewer bytes than asked, not at the value's end, is the store failing: the
# first one is an error status (502 here: an adapter is not a local store); a later one (a large value streams in 1 MiB blocks) ends the response early,
# which curl sees as an error. Before, the short bytes were sent and the response lost its last byte.
faulty() { # faulty READ-SCHEDULE: the site through the faulty adapter
    printf '{"driver":"faulty","base":"file://%s/site/","fail":{"read":%s}}' "$T" "$1"
}
serve short "$(faulty '{"every":1,"mode":"short_read"}')" --port 0 && {
    get "${URL}a.txt"
    check '[ "$CODE" = 502 ]' "a short first read: 502, the faulty adapter is no local store (got $CODE, body '$(head -c 40 "$BODY")')"
    get -H "Range: bytes=1-9" "${URL}a.txt"
    check '[ "$CODE" = 502 ]' "a short ranged read: 502 (got $CODE)"
    stop "$PID" TERM
}
serve short2 "$(faulty '{"nth":2,"mode":"short_read"}')" --port 0 && {
    curl -s --max-time 20 -o "$T/short2.bin" "${URL}sub/big.bin"
    RC=$?
    check '[ "$RC" -ne 0 ] && ! cmp -s "$T/short2.bin" site/sub/big.bin' "a short read mid-stream ends the response early: curl fails (exit $RC)"
    check 'grep -q "returned .* bytes of the .* asked for" short2.log && grep -q "^GET /sub/big.bin 200 3000000 .*(connection ended early)" short2.log' "a short read mid-stream is logged"
    stop "$PID" TERM
}

# A value replaced while it streams: the next block's read is conditional on the generation the
# first came from, so the response ends early instead of mixing two values.
head -c 40000000 /dev/urandom >site/huge.bin
serve change "file://$T/site" --port 0 && {
    curl -s --max-time 30 --limit-rate 8M -o "$T/changed.bin" "${URL}huge.bin" &
    cpid=$!
    sleep 0.7
    head -c 40000000 /dev/zero >site/huge.new && mv site/huge.new site/huge.bin
    wait "$cpid"
    RC=$?
    check '[ "$RC" -ne 0 ] && [ "$(stat -c %s "$T/changed.bin")" -lt 40000000 ]' "a value replaced mid-stream: the response ends early (curl exit $RC, $(stat -c %s "$T/changed.bin") bytes)"
    check 'grep -q "changed while it was sent" change.log' "a value replaced mid-stream is logged"
    stop "$PID" TERM
}
rm -f site/huge.bin

# A symbolic link inside the store to a file outside: the file store follows none, nothing is sent.
ln -s "$T/outside.txt" site/link.txt
serve links "file://$T/site" --port 0 && {
    get "${URL}link.txt"
    check '[ "$CODE" != 200 ] && ! grep -q secret "$BODY"' "a link to a file outside the store is not followed (got $CODE)"
    stop "$PID" TERM
}
rm -f site/link.txt

# A store with no keys (a mistyped path) is served, with a warning that every request will be 404.
serve empty "file://$T/no/such/dir" --port 0 && {
    get "${URL}a.txt"
    check '[ "$CODE" = 404 ] && grep -q "holds no keys: every request will be 404" empty.log' "an empty store: a warning, then 404s"
    stop "$PID" TERM
}
check '! grep -q "holds no keys" main.log' "no warning for a store with keys"

# ---- LMDB and versioned stores: the array read through HTTP equals the array read directly ----
$PY -c "import sys,struct; sys.stdout.buffer.write(struct.pack('<4096H', *[(i * 37) % 65536 for i in range(4096)]))" >arr.raw
through_http() { # through_http STORE_URL PATH_IN_STORE FORMAT DESC
    nds create "$1$2|$3:" --shape 64,64 --chunks 16,32 --dtype uint16 --codec zstd:1
    nds write "$1$2|$3:" --raw -i arr.raw
    check '[ "$RC" -eq 0 ]' "$4: written"
    nds read "$1$2|$3:" --raw -o direct.raw
    serve "$4" "$1" --port 0 || return
    nds read "$URL$2|$3:" --raw -o served.raw
    check '[ "$RC" -eq 0 ] && cmp -s served.raw direct.raw && cmp -s served.raw arr.raw' "$4: read over HTTP equals the stored array"
    nds ls "$1"
    local key size n=0 bad=0
    while read -r size key _; do
        [[ "$size" =~ ^[0-9]+$ ]] && [ -n "$key" ] && [ "$key" != "entries," ] || continue
        get -I "$URL$key"
        n=$((n + 1))
        [ "$CODE" = 200 ] && [ "$(header content-length)" = "$size" ] || bad=$((bad + 1))
    done <<<"$OUT"
    check '[ "$n" -gt 4 ] && [ "$bad" = 0 ]' "$4: HEAD of each of the $n listed keys gives its stored size"
    LAST=$PID
}
through_http "lmdb://$T/s.lmdb/" "arr/" zarr3 lmdb
stop "$LAST" TERM
through_http "file://$T/vs/|versioned:" "arr/" zarr versioned
# A damaged versioned object (every data object cut short): a 500 naming no server path, and the
# server keeps answering.
for f in "$T"/vs/data/*; do head -c 8 "$f" >"$f.cut" && mv "$f.cut" "$f"; done
get "${URL}arr/0.0"
check '[ "$CODE" = 500 ] && ! grep -q "$T" "$BODY"' "a corrupt versioned object: 500 (got $CODE)"
get -H "Range: bytes=2-5" "${URL}arr/0.1"
check '[ "$CODE" = 500 ]' "a range of a corrupt versioned object: 500, not 416 (got $CODE)"
get "${URL}arr/.zarray"
check '[ "$CODE" = 200 ] || [ "$CODE" = 500 ]' "the server still answers after the corrupt reads"
stop "$LAST" TERM
check '[ "$RC" -eq 0 ]' "versioned: stops with exit 0 after store errors"

# An S3 store (the strict S3 test double on 127.0.0.1): the same, and an S3 that fails is a 502.
$PY "$HERE/../servers/strict_s3.py" --port-file "$T/s3.port" --buckets ndstest --access-key SERVEAK \
    --secret-key 'serve/SECRET' >"$T/s3.log" 2>&1 &
S3_PID=$!
PIDS+=("$S3_PID")
for _ in $(seq 100); do [ -s "$T/s3.port" ] && break; sleep 0.1; done
export AWS_ENDPOINT_URL_S3=http://127.0.0.1:$(cat "$T/s3.port") AWS_ACCESS_KEY_ID=SERVEAK AWS_SECRET_ACCESS_KEY='serve/SECRET'
through_http "s3://ndstest/" "arr/" zarr3 s3
curl -s -X POST "$AWS_ENDPOINT_URL_S3/__faults" -d '{"rules":[{"method":"GET","key":"arr/c/0/0","action":"503","count":1000}]}' >/dev/null
get "${URL}arr/c/0/0"
check '[ "$CODE" = 502 ] && ! grep -q SECRET "$BODY"' "an S3 that answers 503: 502 (got $CODE: $(head -c 80 "$BODY"))"
check '! grep -q "serve/SECRET" s3.log' "no secret in the log"
stop "$LAST" TERM
check '[ "$RC" -eq 0 ]' "s3: stops with exit 0"
unset AWS_ENDPOINT_URL_S3 AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
