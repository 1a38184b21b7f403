#!/usr/bin/env bash
# The versioned store over s3 bases that cannot hold one (issue 18): a server without create-only writes
# (Swift's s3api answers 501 to If-None-Match: *; played here by a small double written below) and a
# base with "conditional_writes": "off" (the strict S3 double, tests/servers/strict_s3.py). Every
# command that opens the latest version (log, create, write) must be refused at open, exit 1, naming the
# base, what it lacks and what to do, leaving nothing behind; a version pinned read-only still opens.
# Servers on 127.0.0.1 with free ports, bounded in time (300 s at most), killed on exit by pid.
source "$(dirname "$0")/attack_lib.sh"

export HOME="$T/home" # no real ~/.aws files
mkdir -p "$HOME"
unset AWS_PROFILE AWS_ENDPOINT_URL AWS_SHARED_CREDENTIALS_FILE AWS_SESSION_TOKEN
export AWS_ACCESS_KEY_ID=ATTACKAK AWS_SECRET_ACCESS_KEY='attack/SECRET+key' AWS_REGION=us-east-1
ATTACK_TIMEOUT=40

# A Swift-s3api-like server: plain PUT/GET/HEAD/DELETE and listings, 501 NotImplemented to any
# conditional PUT (as Swift answers If-None-Match: *). GET /__objects gives how many objects it holds.
cat >"$T/nocond.py" <<'EOF'
import sys, threading, time, urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
OBJ = {}
LOCK = threading.Lock()
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def reply(self, status, body=b"", ctype="application/xml"):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Type", ctype)
        if status == 200 and self.command in ("GET", "HEAD", "PUT") and not body.startswith(b"<?xml"):
            self.send_header("ETag", '"%032x"' % (hash(body) & (1 << 128) - 1))
        self.end_headers()
        if self.command != "HEAD": self.wfile.write(body)
    def key(self):
        return urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
    def do_PUT(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.headers.get("If-None-Match") or self.headers.get("If-Match"):
            return self.reply(501, b"<?xml version='1.0'?><Error><Code>NotImplemented</Code>"
                              b"<Message>A header you provided implies functionality that is not implemented</Message></Error>")
        with LOCK: OBJ[self.key()] = body
        self.reply(200)
    def do_GET(self):
        if self.path == "/__objects": return self.reply(200, str(len(OBJ)).encode(), "text/plain")
        u = urllib.parse.urlsplit(self.path)
        if "list-type=2" in u.query:
            q = urllib.parse.parse_qs(u.query)
            pre = u.path.rstrip("/") + "/" + q.get("prefix", [""])[0]
            keys = sorted(k for k in OBJ if k.startswith(pre))
            items = "".join("<Contents><Key>%s</Key><Size>%d</Size></Contents>" % (
                urllib.parse.quote(k.split("/", 2)[2]), len(OBJ[k])) for k in keys)
            return self.reply(200, ("<?xml version='1.0'?><ListBucketResult><IsTruncated>false</IsTruncated>%s"
                                    "</ListBucketResult>" % items).encode())
        with LOCK: body = OBJ.get(self.key())
        if body is None:
            return self.reply(404, b"<?xml version='1.0'?><Error><Code>NoSuchKey</Code></Error>")
        self.reply(200, body, "application/octet-stream")
    do_HEAD = do_GET
    def do_DELETE(self):
        with LOCK: OBJ.pop(self.key(), None)
        self.reply(204)
srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(srv.server_address[1]))
threading.Thread(target=lambda: (time.sleep(170), srv.shutdown()), daemon=True).start()
srv.serve_forever()
EOF

# start_server VAR PORTFILE COMMAND...: runs it in the background (killed on exit, by pid), waits for
# its port and sets VAR to it (not in a $(...) subshell, whose on_exit would be lost)
start_server() {
    local var=$1 pf=$2; shift 2
    timeout -k 5 300 "$@" >/dev/null 2>&1 &
    on_exit "kill $! 2>/dev/null"
    for _ in $(seq 100); do [ -s "$pf" ] && break; sleep 0.1; done
    printf -v "$var" '%s' "$(cat "$pf" 2>/dev/null)"
}

start_server NOCOND "$T/nocond.port" /usr/bin/python3 "$T/nocond.py" "$T/nocond.port"
start_server STRICT "$T/strict.port" /usr/bin/python3 "$ATTACK_DIR/../servers/strict_s3.py" --port-file "$T/strict.port" \
    --buckets ndstest --access-key ATTACKAK --secret-key 'attack/SECRET+key'

if [ -z "$NOCOND" ] || [ -z "$STRICT" ]; then
    echo "SKIP: the test servers did not start (python3)"; finish; exit
fi

# ---- a server without create-only writes (Swift-like) ----
export AWS_ENDPOINT_URL_S3=http://127.0.0.1:$NOCOND
nds log 's3://ndstest/ck/|versioned:'
refused "ndstore log of a versioned store on a server without create-only writes" \
    "versioned kvstore: its base s3://ndstest/ck/ lacks atomic create-only writes"
expect_err "HTTP 501 NotImplemented" "the refusal says what the server answered"
expect_err "use a server that does" "the refusal says what to do"
nds create 's3://ndstest/ck/|versioned:m/a/|zarr3:' --shape 8,8 --chunks 4,4 --dtype uint16
refused "ndstore create through |versioned: on that server" "lacks atomic create-only writes"
check '[ "$(curl -s "http://127.0.0.1:$NOCOND/__objects")" = 0 ]' "nothing left on the server after the refusals"

# ---- "conditional_writes": "off" on a server that has them (the strict double) ----
export AWS_ENDPOINT_URL_S3=http://127.0.0.1:$STRICT
arr() { # arr EXTRA-BASE-MEMBERS EXTRA-STORE-MEMBERS: the zarr v3 array m/a/ of the versioned store ck/
    printf '{"driver":"zarr3","kvstore":{"driver":"versioned","path":"m/a/","base":{"driver":"s3","bucket":"ndstest","path":"ck/"%s}%s}}' "$1" "$2"
}
/usr/bin/python3 -c "import numpy as np; np.save('$T/a.npy', np.arange(64, dtype='<u2').reshape(8, 8))"
nds create "$(arr '' '')" --shape 8,8 --chunks 4,4 --dtype uint16
succeeded "ndstore create through a versioned store (auto: create-only writes found)"
nds write "$(arr '' '')" -i "$T/a.npy"
succeeded "ndstore write through it"
nds write "$(arr ',"conditional_writes":"off"' '')" -i "$T/a.npy"
refused "ndstore write through a base with conditional_writes off" '"conditional_writes": "off"'
expect_err 'set "auto"' "the refusal says what to set"
expect_err "s3://ndstest/ck/" "the refusal names the base"
nds read "$(arr ',"conditional_writes":"off"' ',"version":2')" -o "$T/back.npy"
succeeded "a pinned (read-only) version opens through a base with conditional_writes off"
check '/usr/bin/python3 -c "import sys, numpy as np; sys.exit(0 if (np.load(\"$T/back.npy\") == np.load(\"$T/a.npy\")).all() else 1)"' \
    "the pinned version reads back what was written"
nds log 's3://ndstest/ck/|versioned:'
succeeded "ndstore log of the store (auto)"
check '[ "$(printf "%s\n" "$OUT" | grep -c "^version ")" -eq 2 ]' "two versions, none added by the refused write"

finish
