#!/usr/bin/python3
"""strict_s3.py: a small, strict S3 TEST DOUBLE for ndstore's tests (Python 3 standard library only).

It is not an S3 server for anything but tests. It exists for what no S3 server available here does: If-Match
and If-None-Match applied atomically (as AWS S3 does; Ceph RGW's If-Match is not atomic, Swift's s3api answers
501), and fault injection. It never replaces the real servers (Ceph RGW, Swift s3api) for what they can check.

Implements, path-style (/bucket/key) and virtual-hosted (Host: bucket.localhost:port):
  GET (Range: a-b, a-, -n; If-None-Match -> 304; If-Match -> 412), HEAD, PUT (If-None-Match: *, If-Match with
  the ETag quoted or bare; x-amz-content-sha256 and Content-MD5 checked), DELETE (If-Match), ListObjectsV2
  (prefix, continuation-token, max-keys, encoding-type=url; --max-keys caps pages to exercise pagination),
  multipart upload (initiate, upload part, complete with If-None-Match / If-Match, abort; 5 MiB minimum part
  size but for the last), SigV4 verification (403 SignatureDoesNotMatch), Date and Last-Modified headers.
  Every check-and-apply runs under one lock, so conditional writes are atomic.
Control endpoints (not S3; no auth; 127.0.0.1 only):
  POST /__faults   body {"rules": [{"method": "PUT", "key": "regex", "action": A, "count": N, "delay_ms": D}]}
                   A = "503" (refuse, nothing applied), "reset" (close the connection, nothing applied),
                   "reset_after" (apply, then close without answering), "500_after" (apply, then answer 500),
                   "slow" (sleep delay_ms, then serve), "truncate" (GET: send half the body, then close),
                   hostile: "stall" (read the request, answer nothing for delay_ms, at most 120 s, then
                   close), "endless" (200 without a length, then bytes until the client leaves, at most
                   64 GiB), "endless_error" (the same with status 404), "huge_length" (200 announcing
                   Content-Length 10^12, a few bytes, then close), "repeat_token" (a listing: the page
                   is truncated and its NextContinuationToken is the token asked with, or "t0").
                   A rule fires for the first `count` requests it matches (default 1).
  GET  /__stats    {"requests": {...per method}, "faults_fired": N, "objects": {bucket: {key: size}},
                   "uploads": number of multipart uploads in progress}
  POST /__reset    drops every object, upload and rule (buckets stay)
Usage: strict_s3.py [--port 0] [--port-file F] [--buckets a,b] [--access-key AK --secret-key SK]
                    [--allow-anonymous] [--max-keys N]
Prints "strict_s3 listening on 127.0.0.1:PORT" (and writes PORT to --port-file) once ready.
"""
import argparse
import datetime
import email.utils
import hashlib
import hmac
import json
import re
import socket
import sys
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MIN_PART = 5 << 20
SERVER_NAME = "ndstore-strict-s3 (test double)"


class Store:
    def __init__(self, buckets):
        self.lock = threading.Lock()
        self.buckets = {b: {} for b in buckets}   # bucket -> key -> (bytes, etag, mtime, {x-amz-meta-*})
        self.uploads = {}                          # upload id -> (bucket, key, {part: (bytes, etag)}, meta)
        self.rules = []
        self.requests = {}
        self.faults_fired = 0

    def take_fault(self, method, key):
        with self.lock:
            self.requests[method] = self.requests.get(method, 0) + 1
            for r in self.rules:
                if r["left"] > 0 and r.get("method", method) == method and re.search(r.get("key", ""), key):
                    r["left"] -= 1
                    self.faults_fired += 1
                    return r
        return None


STORE = None
ARGS = None


def http_date(t):
    return email.utils.formatdate(t, usegmt=True)


def xml_escape(s):
    return (s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
            .replace("'", "&apos;"))


def md5_etag(data):
    return hashlib.md5(data).hexdigest()


def bare(etag):
    etag = etag.strip()
    return etag[1:-1] if len(etag) >= 2 and etag[0] == '"' and etag[-1] == '"' else etag


def sigv4_key(secret, date, region, service):
    k = hmac.new(("AWS4" + secret).encode(), date.encode(), hashlib.sha256).digest()
    for part in (region, service, "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    return k


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in separate writes: no 40 ms delayed-ACK stalls
    server_version = SERVER_NAME
    sys_version = ""

    def log_message(self, fmt, *args):
        pass

    # ---- plumbing ----
    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        data = b""
        while len(data) < n:
            chunk = self.rfile.read(n - len(data))
            if not chunk:
                break
            data += chunk
        return data

    def send(self, status, body=b"", headers=None, head=False):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Date", http_date(time.time()))
        if status != 304:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and not head and status != 304:
            self.wfile.write(body)

    def error(self, status, code, message, head=False):
        body = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code><Message>%s</Message>"
                "<RequestId>%s</RequestId></Error>" % (code, xml_escape(message), uuid.uuid4().hex)).encode()
        self.send(status, b"" if head else body, {"Content-Type": "application/xml"}, head)

    def reset(self):
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def hostile(self, action, rule):
        """The hostile faults: bounded in time and bytes, so a client that never gives up still ends."""
        self.close_connection = True
        if action == "stall":
            time.sleep(min(rule.get("delay_ms", 60000), 120000) / 1000.0)
            return self.reset()
        status = 404 if action == "endless_error" else 200
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        if action == "huge_length":
            self.send_header("Content-Length", str(10 ** 12))
        self.send_header("Connection", "close")
        self.end_headers()
        block = b"x" * 65536
        try:
            for _ in range(1 if action == "huge_length" else 1 << 20):
                self.wfile.write(block)
        except OSError:
            pass
        return self.reset()

    def split(self):
        """(bucket, key, query dict, raw path, raw query) of the request."""
        raw_path, _, raw_query = self.path.partition("?")
        host = self.headers.get("Host", "")
        hostname = host.rsplit(":", 1)[0]
        path = urllib.parse.unquote(raw_path)
        if hostname.endswith(".localhost"):
            bucket, key = hostname[: -len(".localhost")], path[1:]
        else:
            bucket, _, key = path[1:].partition("/")
        query = dict(urllib.parse.parse_qsl(raw_query, keep_blank_values=True))
        return bucket, key, query, raw_path, raw_query

    def check_auth(self, raw_path, raw_query, body):
        auth = self.headers.get("Authorization")
        if not auth:
            return ARGS.allow_anonymous or not ARGS.access_key
        m = re.match(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, "
                     r"SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$", auth)
        if not m or m.group(1) != ARGS.access_key:
            return False
        _, date, region, service, signed, sig = m.groups()
        payload = self.headers.get("x-amz-content-sha256", "")
        if payload != "UNSIGNED-PAYLOAD" and payload != hashlib.sha256(body).hexdigest():
            return "sha"
        pairs = sorted(p.partition("=")[::2] for p in raw_query.split("&")) if raw_query else []
        canon_q = "&".join("%s=%s" % kv for kv in pairs)
        lines = []
        for name in signed.split(";"):
            vals = self.headers.get_all(name) or []
            lines.append("%s:%s" % (name, ",".join(" ".join(v.split()) for v in vals)))
        cr = "\n".join([self.command, raw_path, canon_q, "\n".join(lines) + "\n", signed, payload])
        amz_date = self.headers.get("x-amz-date", "")
        sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, "%s/%s/%s/aws4_request" % (date, region, service),
                         hashlib.sha256(cr.encode()).hexdigest()])
        want = hmac.new(sigv4_key(ARGS.secret_key, date, region, service), sts.encode(), hashlib.sha256).hexdigest()
        return hmac.compare_digest(want, sig)

    # ---- dispatch ----
    def handle_any(self):
        if self.path.startswith("/__"):
            return self.control()
        body = self.read_body() if self.command in ("PUT", "POST") else b""
        bucket, key, query, raw_path, raw_query = self.split()
        ok = self.check_auth(raw_path, raw_query, body)
        head = self.command == "HEAD"
        if ok == "sha":
            return self.error(400, "XAmzContentSHA256Mismatch", "payload hash mismatch", head)
        if not ok:
            return self.error(403, "SignatureDoesNotMatch", "The request signature we calculated does not match "
                              "the signature you provided.", head)
        rule = STORE.take_fault(self.command, key)
        action = rule["action"] if rule else None
        if action == "slow":
            time.sleep(rule.get("delay_ms", 1000) / 1000.0)
        if action in ("stall", "endless", "endless_error", "huge_length"):
            return self.hostile(action, rule)
        if action == "503":
            return self.error(503, "SlowDown", "Please reduce your request rate (injected).", head)
        if action == "reset":
            return self.reset()
        if bucket not in STORE.buckets:
            return self.error(404, "NoSuchBucket", "The specified bucket does not exist.", head)
        self.fault_after = action
        self.truncate = action == "truncate"
        return self.route(bucket, key, query, body)

    def route(self, bucket, key, query, body):
        c = self.command
        if not key:
            if c == "GET" and query.get("list-type") == "2":
                return self.list_v2(bucket, query)
            if c in ("GET", "HEAD"):
                return self.error(400, "InvalidRequest", "only ListObjectsV2 (list-type=2) is implemented")
            return self.error(405, "MethodNotAllowed", "bucket operations are not implemented")
        if c == "POST" and "uploads" in query:
            return self.mp_initiate(bucket, key)
        if c == "POST" and "uploadId" in query:
            return self.mp_complete(bucket, key, query["uploadId"], body)
        if c == "PUT" and "uploadId" in query:
            return self.mp_part(bucket, key, query, body)
        if c == "DELETE" and "uploadId" in query:
            return self.mp_abort(query["uploadId"])
        if c in ("GET", "HEAD"):
            return self.get(bucket, key, c == "HEAD")
        if c == "PUT":
            return self.put(bucket, key, body)
        if c == "DELETE":
            return self.delete(bucket, key)
        return self.error(405, "MethodNotAllowed", "method not allowed")

    def answer_mutation(self, status, headers=None, body=b""):
        """Answers an applied mutation, unless a fault says to drop or spoil the answer."""
        if self.fault_after == "reset_after":
            return self.reset()
        if self.fault_after == "500_after":
            return self.error(500, "InternalError", "injected after the change was applied")
        return self.send(status, body, headers)

    def handle_quietly(self):
        try:
            self.handle_any()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (a limit, a timeout): nothing to answer

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_quietly

    # ---- objects ----
    def precondition(self, current):
        """None when the If-Match / If-None-Match headers hold for current ((data, etag, mtime) or None),
        else (status, code)."""
        im, inm = self.headers.get("If-Match"), self.headers.get("If-None-Match")
        if inm is not None and inm.strip() == "*" and current is not None:
            return 412, "PreconditionFailed"
        if im is not None:
            if current is None:
                return 404, "NoSuchKey"
            if bare(im) != current[1] and im.strip() != "*":
                return 412, "PreconditionFailed"
        return None

    def object_headers(self, obj):
        h = {"ETag": '"%s"' % obj[1], "Last-Modified": http_date(obj[2]),
             "Content-Type": "application/octet-stream", "Accept-Ranges": "bytes"}
        h.update(obj[3])
        return h

    def user_meta(self):
        return {k.lower(): v for k, v in self.headers.items() if k.lower().startswith("x-amz-meta-")}

    def get(self, bucket, key, head):
        with STORE.lock:
            obj = STORE.buckets[bucket].get(key)
        if obj is None:
            return self.error(404, "NoSuchKey", "The specified key does not exist.", head)
        data, etag = obj[0], obj[1]
        im, inm = self.headers.get("If-Match"), self.headers.get("If-None-Match")
        if im is not None and bare(im) != etag and im.strip() != "*":
            return self.error(412, "PreconditionFailed", "If-Match failed", head)
        if inm is not None and (inm.strip() == "*" or etag in [bare(x) for x in inm.split(",")]):
            return self.send(304, b"", {"ETag": '"%s"' % etag}, head)
        hdrs = self.object_headers(obj)
        rng = self.headers.get("Range")
        status, body = 200, data
        if rng:
            m = re.fullmatch(r"bytes=(\d*)-(\d*)", rng.strip())
            if not m or (m.group(1) == "" and m.group(2) == ""):
                return self.error(400, "InvalidArgument", "bad Range", head)
            n = len(data)
            if m.group(1) == "":
                start, end = max(0, n - int(m.group(2))), n - 1
            else:
                start = int(m.group(1))
                end = min(int(m.group(2)), n - 1) if m.group(2) else n - 1
            if start >= n or (m.group(1) == "" and n == 0) or end < start:
                hdrs2 = {"Content-Range": "bytes */%d" % n}
                return self.send(416, b"", hdrs2, head) if head else self.error(416, "InvalidRange",
                                                                                 "The requested range is not satisfiable")
            status, body = 206, data[start:end + 1]
            hdrs["Content-Range"] = "bytes %d-%d/%d" % (start, end, n)
        if self.truncate and not head and len(body) > 1:
            self.send_response(status)
            for k, v in hdrs.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            return self.reset()
        return self.send(status, body, hdrs, head)

    def put(self, bucket, key, body):
        md5 = self.headers.get("Content-MD5")
        if md5 is not None:
            import base64
            if base64.b64encode(hashlib.md5(body).digest()).decode() != md5.strip():
                return self.error(400, "BadDigest", "Content-MD5 mismatch")
        with STORE.lock:
            objs = STORE.buckets[bucket]
            bad = self.precondition(objs.get(key))
            if bad:
                return self.error(bad[0], bad[1], "At least one of the pre-conditions you specified did not hold")
            obj = (body, md5_etag(body), time.time(), self.user_meta())
            objs[key] = obj
        return self.answer_mutation(200, {"ETag": '"%s"' % obj[1]})

    def delete(self, bucket, key):
        with STORE.lock:
            objs = STORE.buckets[bucket]
            if self.headers.get("If-Match") is not None:
                bad = self.precondition(objs.get(key))
                if bad:
                    return self.error(bad[0], bad[1], "At least one of the pre-conditions you specified did not hold")
            objs.pop(key, None)
        return self.answer_mutation(204)

    # ---- listing ----
    def list_v2(self, bucket, q):
        prefix = q.get("prefix", "")
        max_keys = min(int(q.get("max-keys", "1000") or 1000), 1000)
        if ARGS.max_keys:
            max_keys = min(max_keys, ARGS.max_keys)
        after = q.get("continuation-token") or q.get("start-after") or ""
        url = q.get("encoding-type") == "url"
        with STORE.lock:
            keys = sorted((k, len(v[0]), v[1], v[2]) for k, v in STORE.buckets[bucket].items()
                          if k.startswith(prefix) and k > after)
        page, more = keys[:max_keys], len(keys) > max_keys
        repeat = getattr(self, "fault_after", None) == "repeat_token"
        if repeat:
            more = True
        enc = (lambda s: urllib.parse.quote_plus(s, safe="/")) if url else (lambda s: s)
        out = ['<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://s3.amazonaws.com/doc/'
               '2006-03-01/"><Name>%s</Name><Prefix>%s</Prefix><KeyCount>%d</KeyCount><MaxKeys>%d</MaxKeys>'
               '<IsTruncated>%s</IsTruncated>' % (bucket, xml_escape(enc(prefix)), len(page), max_keys,
                                                 "true" if more else "false")]
        if url:
            out.append("<EncodingType>url</EncodingType>")
        for k, size, etag, mtime in page:
            out.append("<Contents><Key>%s</Key><LastModified>%s</LastModified><ETag>&quot;%s&quot;</ETag>"
                       "<Size>%d</Size><StorageClass>STANDARD</StorageClass></Contents>" % (
                           xml_escape(enc(k)), datetime.datetime.utcfromtimestamp(mtime).strftime(
                               "%Y-%m-%dT%H:%M:%S.000Z"), etag, size))
        if repeat:
            out.append("<NextContinuationToken>%s</NextContinuationToken>" % xml_escape(
                q.get("continuation-token") or "t0"))
        elif more:
            out.append("<NextContinuationToken>%s</NextContinuationToken>" % xml_escape(page[-1][0]))
        out.append("</ListBucketResult>")
        self.send(200, "".join(out).encode(), {"Content-Type": "application/xml"})

    # ---- multipart ----
    def mp_initiate(self, bucket, key):
        uid = uuid.uuid4().hex
        with STORE.lock:
            STORE.uploads[uid] = (bucket, key, {}, self.user_meta())
        body = ('<?xml version="1.0" encoding="UTF-8"?>\n<InitiateMultipartUploadResult><Bucket>%s</Bucket>'
                '<Key>%s</Key><UploadId>%s</UploadId></InitiateMultipartUploadResult>' % (
                    bucket, xml_escape(key), uid)).encode()
        self.send(200, body, {"Content-Type": "application/xml"})

    def mp_part(self, bucket, key, q, body):
        try:
            n = int(q.get("partNumber", ""))
        except ValueError:
            n = 0
        if not 1 <= n <= 10000:
            return self.error(400, "InvalidArgument", "partNumber must be 1..10000")
        with STORE.lock:
            up = STORE.uploads.get(q["uploadId"])
            if not up or up[0] != bucket or up[1] != key:
                return self.error(404, "NoSuchUpload", "The specified upload does not exist.")
            up[2][n] = (body, md5_etag(body))
        self.answer_mutation(200, {"ETag": '"%s"' % md5_etag(body)})

    def mp_complete(self, bucket, key, uid, body):
        parts = re.findall(rb"<Part>\s*<PartNumber>(\d+)</PartNumber>\s*<ETag>([^<]*)</ETag>\s*</Part>", body)
        with STORE.lock:
            up = STORE.uploads.get(uid)
            if not up or up[0] != bucket or up[1] != key:
                return self.error(404, "NoSuchUpload", "The specified upload does not exist.")
            if not parts:
                return self.error(400, "MalformedXML", "no parts")
            nums = [int(p[0]) for p in parts]
            if nums != sorted(set(nums)):
                return self.error(400, "InvalidPartOrder", "parts must be in ascending order")
            data, md5s = [], b""
            for i, (num, etag) in enumerate(parts):
                have = up[2].get(int(num))
                tag = bare(etag.decode().replace("&quot;", '"'))
                if not have or have[1] != tag:
                    return self.error(400, "InvalidPart", "part %s missing or its ETag differs" % num.decode())
                if i + 1 < len(parts) and len(have[0]) < MIN_PART:
                    return self.error(400, "EntityTooSmall", "part %s is smaller than 5 MiB" % num.decode())
                data.append(have[0])
                md5s += hashlib.md5(have[0]).digest()
            objs = STORE.buckets[bucket]
            bad = self.precondition(objs.get(key))
            if bad:
                return self.error(bad[0], bad[1], "At least one of the pre-conditions you specified did not hold")
            etag = "%s-%d" % (hashlib.md5(md5s).hexdigest(), len(parts))
            objs[key] = (b"".join(data), etag, time.time(), up[3])
            del STORE.uploads[uid]
        out = ('<?xml version="1.0" encoding="UTF-8"?>\n<CompleteMultipartUploadResult><Bucket>%s</Bucket>'
               '<Key>%s</Key><ETag>&quot;%s&quot;</ETag></CompleteMultipartUploadResult>' % (
                   bucket, xml_escape(key), etag)).encode()
        self.answer_mutation(200, {"Content-Type": "application/xml"}, out)

    def mp_abort(self, uid):
        with STORE.lock:
            STORE.uploads.pop(uid, None)
        self.send(204)

    # ---- control ----
    def control(self):
        if self.command == "GET" and self.path == "/__stats":
            with STORE.lock:
                stats = {"requests": STORE.requests, "faults_fired": STORE.faults_fired,
                         "objects": {b: {k: len(v[0]) for k, v in o.items()} for b, o in STORE.buckets.items()},
                         "etags": {b: {k: v[1] for k, v in o.items()} for b, o in STORE.buckets.items()},
                         "uploads": len(STORE.uploads)}
            return self.send(200, json.dumps(stats).encode(), {"Content-Type": "application/json"})
        body = self.read_body()
        if self.command == "POST" and self.path == "/__faults":
            rules = json.loads(body or b"{}").get("rules", [])
            with STORE.lock:
                STORE.rules = [dict(r, left=int(r.get("count", 1))) for r in rules]
            return self.send(200, b"{}")
        if self.command == "POST" and self.path == "/__reset":
            with STORE.lock:
                for b in STORE.buckets:
                    STORE.buckets[b] = {}
                STORE.uploads.clear()
                STORE.rules = []
                STORE.requests = {}
                STORE.faults_fired = 0
            return self.send(200, b"{}")
        return self.send(404, b"")


def main():
    global STORE, ARGS
    p = argparse.ArgumentParser(description="strict S3 test double (tests only)")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--port-file")
    p.add_argument("--buckets", default="test")
    p.add_argument("--access-key", default="")
    p.add_argument("--secret-key", default="")
    p.add_argument("--allow-anonymous", action="store_true")
    p.add_argument("--max-keys", type=int, default=0)
    ARGS = p.parse_args()
    STORE = Store([b for b in ARGS.buckets.split(",") if b])
    ThreadingHTTPServer.daemon_threads = True
    ThreadingHTTPServer.request_queue_size = 128
    srv = ThreadingHTTPServer(("127.0.0.1", ARGS.port), Handler)
    port = srv.server_address[1]
    if ARGS.port_file:
        with open(ARGS.port_file + ".tmp", "w") as f:
            f.write(str(port))
        import os
        os.replace(ARGS.port_file + ".tmp", ARGS.port_file)
    print("strict_s3 listening on 127.0.0.1:%d" % port, flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
