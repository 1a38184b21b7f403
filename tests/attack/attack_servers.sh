#!/usr/bin/env bash
# Hostile servers and credential files for the network drivers (s3, gcs, http): an endless body, a
# huge Content-Length, a listing that repeats its continuation token, a server that accepts and never
# answers, and credential files that are /dev/zero, a FIFO or too large. Each must fail with a clear
# message, quickly, with bounded memory (no hang, no 8 GB of buffered body).
#
# The servers are one Python 3 (standard library) program written below, one process per mode, on
# 127.0.0.1 with a free port; each is bounded (it exits after 170 s, an endless body stops at 1 GiB)
# and killed on exit. The bounds under test are set small through the environment (NDS_HTTP_*), so
# the whole script takes well under a minute.
source "$(dirname "$0")/attack_lib.sh"

export HOME="$T/home" # no real ~/.aws or gcloud files
mkdir -p "$HOME"
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_SESSION_TOKEN AWS_PROFILE AWS_ENDPOINT_URL \
    AWS_SHARED_CREDENTIALS_FILE GOOGLE_APPLICATION_CREDENTIALS STORAGE_EMULATOR_HOST \
    NDS_HTTP_MAX_RESPONSE_BYTES NDS_HTTP_DEADLINE NDS_HTTP_STALL_TIMEOUT
ATTACK_TIMEOUT=40 # the bounds below fail every case in seconds; 40 s means a hang

cat >"$T/hostile.py" <<'EOF'
"""A hostile HTTP server for ndstore's attack tests (Python 3 standard library, 127.0.0.1 only).
usage: hostile.py MODE PORTFILE COUNTFILE
  endless       200 without a length, then bytes until the client leaves (at most 1 GiB)
  huge_length   200 announcing Content-Length 10^15, 64 KiB, then close
  stall         reads the request and never answers (the connection stays open)
  repeat_token  listings (S3 list-type=2, GCS /o?...) answer a truncated empty page whose next token
                is the one asked with ("t0" first); anything else is 404
Every request is counted in COUNTFILE."""
import json, socket, sys, threading, time, urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE, PORTFILE, COUNTFILE = sys.argv[1], sys.argv[2], sys.argv[3]
LOCK = threading.Lock()
COUNT = [0]

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def count(self):
        with LOCK:
            COUNT[0] += 1
            with open(COUNTFILE, "w") as f:
                f.write(str(COUNT[0]))
    def answer(self):
        self.count()
        self.close_connection = True
        try:
            getattr(self, MODE)()
        except OSError:
            pass  # the client left: what a bounded client does
    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = answer

    def head(self, status, length=None, ctype="application/octet-stream"):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("x-goog-generation", "1")
        if length is not None:
            self.send_header("Content-Length", str(length))
        self.send_header("Connection", "close")
        self.end_headers()

    def endless(self):
        self.head(200)
        block = b"x" * 65536
        for _ in range(16384):  # 1 GiB at most
            self.wfile.write(block)

    def huge_length(self):
        self.head(200, 10 ** 15)
        self.wfile.write(b"x" * 65536)
        self.wfile.flush()
        time.sleep(1)

    def stall(self):
        time.sleep(170)

    def repeat_token(self):
        u = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(u.query))
        if q.get("list-type") == "2":
            tok = q.get("continuation-token") or "t0"
            body = ('<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>b</Name>'
                    '<IsTruncated>true</IsTruncated><NextContinuationToken>%s</NextContinuationToken>'
                    '</ListBucketResult>' % tok).encode()
            ctype = "application/xml"
        elif u.path.endswith("/o"):
            body = json.dumps({"kind": "storage#objects", "nextPageToken": q.get("pageToken") or "dDA"}).encode()
            ctype = "application/json"
        else:
            self.head(404, 0)
            return
        self.head(200, len(body), ctype)
        self.wfile.write(body)

ThreadingHTTPServer.daemon_threads = True
srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
with open(PORTFILE + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
import os
os.replace(PORTFILE + ".tmp", PORTFILE)
threading.Timer(170, lambda: os._exit(0)).start()  # bounded, whatever happens
srv.serve_forever()
EOF

# serve MODE: starts the hostile server; sets PORT and COUNTFILE. Stopped at exit.
serve() {
    local pf="$T/port.$1"
    COUNTFILE="$T/count.$1"
    echo 0 >"$COUNTFILE"
    python3 "$T/hostile.py" "$1" "$pf" "$COUNTFILE" &
    local pid=$!
    on_exit "kill $pid 2>/dev/null; wait $pid 2>/dev/null"
    for _ in $(seq 100); do [ -s "$pf" ] && break; sleep 0.05; done
    PORT=$(cat "$pf")
}

# timed ARGS...: nds ARGS under /usr/bin/time; sets SECS (whole seconds of wall time) and RSS_MB (peak
# resident set). time writes "Command exited with non-zero status N" first when the command fails.
timed() {
    local tf="$T/.time"
    OUT=$(timeout -k 5 "$ATTACK_TIMEOUT" /usr/bin/time -f '%e %M' -o "$tf" "$BIN" "$@" 2>"$T/.stderr")
    RC=$?
    ERR=$(cat "$T/.stderr")
    SECS=999 KB=99999999
    [ -s "$tf" ] && read -r SECS KB < <(tail -1 "$tf")
    SECS=${SECS%.*}
    RSS_MB=$((KB / 1024))
}

s3_at() { echo "{\"driver\":\"s3\",\"bucket\":\"b\",\"path\":\"arr/\",\"endpoint\":\"http://127.0.0.1:$1\"}"; }
gcs_at() { echo "{\"driver\":\"gcs\",\"bucket\":\"bkt\",\"path\":\"arr/\",\"endpoint\":\"http://127.0.0.1:$1\",\"credentials\":\"anonymous\"}"; }
zarr_on() { echo "{\"driver\":\"zarr\",\"kvstore\":$1}"; }

# ---- an endless body on a metadata GET: s3, gcs and http alike ----
serve endless
export NDS_HTTP_MAX_RESPONSE_BYTES=8M
for store in "$(s3_at "$PORT")" "$(gcs_at "$PORT")" "\"http://127.0.0.1:$PORT/arr/\""; do
    drv=$(echo "$store" | sed -n 's/.*"driver":"\([a-z0-9]*\)".*/\1/p'); drv=${drv:-http}
    timed info "$(zarr_on "$store")"
    refused "$drv: endless metadata body" "larger than 8388608 bytes"
    expect_err "NDS_HTTP_MAX_RESPONSE_BYTES" "$drv: endless body names the setting"
    expect_err "127.0.0.1:$PORT" "$drv: endless body names the URL"
    check "[ $RSS_MB -lt 400 ]" "$drv: endless body: peak RSS ${RSS_MB} MB stays bounded"
    check "[ $SECS -lt 15 ]" "$drv: endless body fails quickly (${SECS} s)"
done
unset NDS_HTTP_MAX_RESPONSE_BYTES

# ---- a huge Content-Length fails before the body is read (default limit) ----
serve huge_length
timed info "$(zarr_on "$(s3_at "$PORT")")"
refused "huge Content-Length" "Content-Length: 1000000000000000"
check "[ $RSS_MB -lt 400 ]" "huge Content-Length: peak RSS ${RSS_MB} MB"

# ---- a listing whose server repeats its continuation token ----
serve repeat_token
timed ls "$(s3_at "$PORT")"
refused "s3 listing repeating its token" "continuation token"
n=$(cat "$COUNTFILE")
check "[ $n -le 5 ]" "s3 repeated token stops after a few requests ($n)"
timed ls "$(gcs_at "$PORT")"
refused "gcs listing repeating its token" "continuation token"

# ---- a server that accepts and never answers ----
serve stall
export NDS_HTTP_STALL_TIMEOUT=1s NDS_HTTP_DEADLINE=3s
timed info "$(zarr_on "$(s3_at "$PORT")")"
refused "s3 server that never answers" "deadline of 3.0 s"
expect_err "attempt" "stall: the message counts the tries"
expect_err "127.0.0.1:$PORT" "stall: the message names the URL"
check "[ $SECS -lt 20 ]" "stall fails within the configured bounds (${SECS} s)"
timed info "$(zarr_on "$(gcs_at "$PORT")")"
refused "gcs server that never answers" "NDS_HTTP_DEADLINE"
unset NDS_HTTP_STALL_TIMEOUT
NDS_HTTP_DEADLINE=2s timed info "http://127.0.0.1:$PORT/arr/"
refused "http server that never answers (deadline alone)" "deadline of 2.0 s"
check "[ $SECS -lt 15 ]" "deadline alone bounds the wait (${SECS} s)"
unset NDS_HTTP_DEADLINE
NDS_HTTP_DEADLINE=soon timed info "http://127.0.0.1:$PORT/arr/"
refused "a malformed NDS_HTTP_DEADLINE" "NDS_HTTP_DEADLINE"

# ---- credential files that would hang or flood: /dev/zero, a FIFO, 2 MiB ----
mkfifo "$T/fifo"
truncate -s 2M "$T/huge"
for f in /dev/zero "$T/fifo" "$T/huge"; do
    AWS_SHARED_CREDENTIALS_FILE=$f timed info "$(zarr_on "$(s3_at "$PORT")")"
    refused "AWS_SHARED_CREDENTIALS_FILE=$f" "credentials file $f"
    check "[ $SECS -lt 5 ]" "AWS_SHARED_CREDENTIALS_FILE=$f fails at once (${SECS} s)"
done
gcs_key() { echo "{\"driver\":\"gcs\",\"bucket\":\"bkt\",\"endpoint\":\"http://127.0.0.1:$PORT\",\"credentials\":{\"key_file\":\"$1\"}}"; }
for f in "$T/fifo" /dev/zero "$T/huge"; do
    timed info "$(zarr_on "$(gcs_key "$f")")"
    refused "gcs key_file $f" "credentials file $f"
    check "[ $SECS -lt 5 ]" "gcs key_file $f fails at once (${SECS} s)"
done
GOOGLE_APPLICATION_CREDENTIALS="$T/fifo" timed info "gs://bkt/arr/"
refused "GOOGLE_APPLICATION_CREDENTIALS naming a FIFO" "GOOGLE_APPLICATION_CREDENTIALS"

finish
