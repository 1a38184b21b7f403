#!/usr/bin/env python3
"""strict_gcs.py: a TEST DOUBLE of the Google Cloud Storage JSON API, for ndstore's tests only.

It is not a storage server and never stands in for one outside tests: it keeps objects in memory, listens on
127.0.0.1 only, and implements just what ndstore's gcs and http drivers use, strictly (unknown query parameters
and malformed headers are refused with 400, as a stricter-than-real server finds client bugs sooner):

  GET    /storage/v1/b/B/o/NAME?alt=media      media download; Range (a-b, a-, -n); 206/416
  GET    /storage/v1/b/B/o/NAME                object metadata (JSON)
  GET    /storage/v1/b/B/o?prefix=&pageToken=  list, paginated (--page-size)
  POST   /upload/storage/v1/b/B/o?uploadType=media|multipart&name=NAME
  DELETE /storage/v1/b/B/o/NAME
  with ifGenerationMatch (0 = must not exist) / ifGenerationNotMatch (304 on reads), checked and applied
  atomically under one lock, and generations from one counter (never reused, also across delete + create).

  POST   /token                                 OAuth2 token endpoint: jwt-bearer (RS256 JWT assertion; the
                                                signature is verified with --public-key, in pure Python) and
                                                refresh_token grants
  GET    /computeMetadata/v1/instance/service-accounts/default/token   metadata server (Metadata-Flavor)
  GET    /files/PATH  (and HEAD)                static files from --static DIR with ETag, Range, If-None-Match

Test control (JSON): GET /_test/stats, POST /_test/reset, POST /_test/revoke_tokens, GET /_test/last_assertion,
POST /_test/faults with
  {"rules": [{"method": "POST", "path": "regex", "kind": K, "count": N, "every": E, "delay": S}]}
where K is one of 503 (answered before doing anything), 503_after (the request takes effect, then 503),
503_after_clobber (an upload takes effect, "another writer" overwrites the object, then 503),
429, reset (connection reset before doing anything), reset_after (takes effect, then reset), slow (sleeps
"delay" seconds, then handles the request normally even if the client gave up), truncate (a full
Content-Length but half the body, then the connection closes); and hostile kinds, bounded in time and bytes:
stall (reads the request, answers nothing for "delay" seconds, at most 120, then closes), endless (200 without
a length, then bytes until the client leaves, at most 64 GiB), huge_length (200 announcing a Content-Length of
10^12, a few bytes, then close), repeat_token (a listing answers with the pageToken it was asked with, or
"dDA" on the first page, and no items). A rule fires on every E-th request that matches
its method and path ("every": E, default 1) until it has fired N times ("count": N, default 1); when several
rules match, the first that fires wins.

With --require-auth every storage request needs "Authorization: Bearer T" for a token this server issued
and that has not expired (401 otherwise). Standard library only (Debian's python3).

usage: strict_gcs.py [--port N] [--port-file F] --bucket B [--bucket B2] [--public-key PEM] [--static DIR]
                     [--page-size N] [--token-lifetime S] [--require-auth]
"""
import argparse
import base64
import hashlib
import json
import os
import re
import secrets
import socket
import struct
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

KNOWN_PARAMS = {
    "alt", "ifGenerationMatch", "ifGenerationNotMatch", "ifMetagenerationMatch", "ifMetagenerationNotMatch",
    "fields", "prefix", "pageToken", "maxResults", "uploadType", "name", "userProject", "projection",
}
JWT_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"


class HttpError(Exception):
    def __init__(self, status, reason, message):
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message


class Store:
    """Buckets of objects; every check-and-apply happens under one lock, so preconditions are atomic."""

    def __init__(self, buckets):
        self.lock = threading.Lock()
        self.buckets = {b: {} for b in buckets}
        self.counter = 1700000000000000
        self.stats = {"requests": 0, "uploads": 0, "tokens_issued": 0, "faults_fired": 0, "deletes": 0}

    def bucket(self, name):
        if name not in self.buckets:
            raise HttpError(404, "notFound", "The specified bucket does not exist.")
        return self.buckets[name]

    @staticmethod
    def check(obj, params):
        """Raises 412 / 304 as GCS does when a precondition fails (obj None = missing)."""
        m = params.get("ifGenerationMatch")
        if m is not None:
            want = int(m)
            have = obj["generation"] if obj else 0
            if want != have:
                if obj is None and want != 0 and params.get("_read"):
                    raise HttpError(404, "notFound", "No such object.")
                raise HttpError(412, "conditionNotMet", "At least one of the pre-conditions you specified did not hold.")
        nm = params.get("ifGenerationNotMatch")
        if nm is not None and obj is not None and int(nm) == obj["generation"]:
            raise HttpError(304, "notModified", "not modified")

    def put(self, bucket, name, data, params, metadata):
        with self.lock:
            objs = self.bucket(bucket)
            self.check(objs.get(name), params)
            self.counter += 1
            obj = {"name": name, "data": data, "generation": self.counter, "metageneration": 1,
                   "metadata": metadata, "updated": time.time()}
            objs[name] = obj
            self.stats["uploads"] += 1
            return obj

    def get(self, bucket, name, params):
        with self.lock:
            obj = self.bucket(bucket).get(name)
            self.check(obj, dict(params, _read=True))
            if obj is None:
                raise HttpError(404, "notFound", "No such object: %s/%s" % (bucket, name))
            return obj

    def delete(self, bucket, name, params):
        with self.lock:
            objs = self.bucket(bucket)
            obj = objs.get(name)
            if obj is None:
                raise HttpError(404, "notFound", "No such object: %s/%s" % (bucket, name))
            self.check(obj, params)
            del objs[name]
            self.stats["deletes"] += 1

    def list(self, bucket, prefix, start_after, limit):
        with self.lock:
            names = sorted(n for n in self.bucket(bucket) if n.startswith(prefix) and n > start_after)
            page = [self.buckets[bucket][n] for n in names[:limit]]
            return page, len(names) > limit


def object_json(bucket, obj):
    data = obj["data"]
    out = {
        "kind": "storage#object", "id": "%s/%s/%d" % (bucket, obj["name"], obj["generation"]),
        "name": obj["name"], "bucket": bucket, "generation": str(obj["generation"]),
        "metageneration": str(obj["metageneration"]), "size": str(len(data)),
        "md5Hash": base64.b64encode(hashlib.md5(data).digest()).decode(),
        "contentType": "application/octet-stream",
        "updated": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(obj["updated"])),
    }
    if obj["metadata"]:
        out["metadata"] = obj["metadata"]
    return out


def parse_range(header, size):
    """(start, end_inclusive) of a single "bytes=" range, or None for the whole; raises 416 / 400."""
    if header is None:
        return None
    m = re.fullmatch(r"bytes=(\d*)-(\d*)", header.strip())
    if not m or (m.group(1) == "" and m.group(2) == ""):
        raise HttpError(400, "invalid", "malformed Range header: %r" % header)
    a, b = m.group(1), m.group(2)
    if a == "":
        n = int(b)
        if n == 0 or size == 0:
            raise HttpError(416, "requestedRangeNotSatisfiable", "The requested range cannot be satisfied.")
        return (max(0, size - n), size - 1)
    start = int(a)
    end = int(b) if b else size - 1
    if b and end < start:
        raise HttpError(400, "invalid", "malformed Range header: %r" % header)
    if start >= size:
        raise HttpError(416, "requestedRangeNotSatisfiable", "The requested range cannot be satisfied.")
    return (start, min(end, size - 1))


# ---- RS256 verification in pure Python (PKCS#1 v1.5 with SHA-256) ----

def der_read(buf, pos):
    """One DER TLV at pos: (tag, value, next_pos)."""
    tag = buf[pos]
    ln = buf[pos + 1]
    pos += 2
    if ln & 0x80:
        k = ln & 0x7F
        ln = int.from_bytes(buf[pos:pos + k], "big")
        pos += k
    return tag, buf[pos:pos + ln], pos + ln


def rsa_public_key(pem):
    """(n, e) from a PEM SubjectPublicKeyInfo ("BEGIN PUBLIC KEY")."""
    body = "".join(l for l in pem.splitlines() if l and not l.startswith("-----"))
    der = base64.b64decode(body)
    _, spki, _ = der_read(der, 0)
    _, _, pos = der_read(spki, 0)  # AlgorithmIdentifier
    tag, bitstr, _ = der_read(spki, pos)
    if tag != 0x03:
        raise ValueError("not a SubjectPublicKeyInfo")
    _, rsakey, _ = der_read(bitstr[1:], 0)
    _, n, pos = der_read(rsakey, 0)
    _, e, _ = der_read(rsakey, pos)
    return int.from_bytes(n, "big"), int.from_bytes(e, "big")


SHA256_PREFIX = bytes.fromhex("3031300d060960864801650304020105000420")


def rs256_verify(key, message, sig):
    n, e = key
    k = (n.bit_length() + 7) // 8
    if len(sig) != k:
        return False
    em = pow(int.from_bytes(sig, "big"), e, n).to_bytes(k, "big")
    t = SHA256_PREFIX + hashlib.sha256(message).digest()
    return em == b"\x00\x01" + b"\xff" * (k - len(t) - 3) + b"\x00" + t


def b64url_decode(s):
    if not re.fullmatch(r"[A-Za-z0-9_-]*", s):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


class App:
    def __init__(self, args):
        self.args = args
        self.store = Store(args.bucket)
        self.public_key = rsa_public_key(open(args.public_key).read()) if args.public_key else None
        self.tokens = {}
        self.faults = []
        self.fault_lock = threading.Lock()
        self.last_assertion = None

    # ---- faults ----
    def take_fault(self, method, path):
        """The first rule that fires for this request: a rule matches its method and path regex, and fires on
        every "every"-th match (default 1) until its count is spent."""
        with self.fault_lock:
            fired = None
            for rule in self.faults:
                if rule["count"] > 0 and rule.get("method", method) == method and re.search(rule.get("path", ""), path):
                    rule["seen"] += 1
                    if fired is None and rule["seen"] % int(rule.get("every", 1)) == 0:
                        rule["count"] -= 1
                        fired = rule
            if fired:
                self.store.stats["faults_fired"] += 1
            return fired

    # ---- auth ----
    def issue_token(self):
        token = "ya29.test-" + secrets.token_hex(24)
        with self.store.lock:
            self.tokens[token] = time.time() + self.args.token_lifetime
            self.store.stats["tokens_issued"] += 1
        return {"access_token": token, "expires_in": self.args.token_lifetime, "token_type": "Bearer"}

    def check_auth(self, headers):
        if not self.args.require_auth:
            return
        h = headers.get("Authorization", "")
        if not h.startswith("Bearer "):
            raise HttpError(401, "required", "Anonymous caller does not have storage.objects access.")
        with self.store.lock:
            exp = self.tokens.get(h[7:])
        if exp is None or exp < time.time():
            raise HttpError(401, "authError", "Invalid Credentials")

    def token_endpoint(self, headers, body, token_url):
        if headers.get("Content-Type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
            raise HttpError(400, "invalid_request", "token requests must be form-encoded")
        form = dict(urllib.parse.parse_qsl(body.decode(), strict_parsing=True, keep_blank_values=True))
        grant = form.get("grant_type")
        if grant == JWT_GRANT:
            self.check_assertion(form.get("assertion", ""), token_url)
        elif grant == "refresh_token":
            if not all(form.get(k) for k in ("client_id", "client_secret", "refresh_token")):
                raise HttpError(400, "invalid_request", "refresh_token grant needs client_id, client_secret, refresh_token")
        else:
            raise HttpError(400, "unsupported_grant_type", "grant_type %r" % grant)
        return self.issue_token()

    def check_assertion(self, jwt, token_url):
        parts = jwt.split(".")
        if len(parts) != 3:
            raise HttpError(400, "invalid_grant", "assertion is not a JWT")
        try:
            header = json.loads(b64url_decode(parts[0]))
            claims = json.loads(b64url_decode(parts[1]))
            sig = b64url_decode(parts[2])
        except ValueError:
            raise HttpError(400, "invalid_grant", "assertion parts are not base64url JSON")
        if header.get("alg") != "RS256" or header.get("typ") != "JWT":
            raise HttpError(400, "invalid_grant", "JWT header must say alg RS256, typ JWT")
        for k in ("iss", "scope", "aud", "iat", "exp"):
            if k not in claims:
                raise HttpError(400, "invalid_grant", "JWT claim %s missing" % k)
        now = time.time()
        if claims["aud"] != token_url:
            raise HttpError(400, "invalid_grant", "JWT aud %r is not %r" % (claims["aud"], token_url))
        if not (claims["iat"] - 300 <= now <= claims["exp"] + 300) or claims["exp"] - claims["iat"] > 3600:
            raise HttpError(400, "invalid_grant", "JWT iat/exp out of range")
        if self.public_key and not rs256_verify(self.public_key, (parts[0] + "." + parts[1]).encode(), sig):
            raise HttpError(400, "invalid_grant", "Invalid JWT Signature.")
        self.last_assertion = jwt


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "strict_gcs/1"
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall

    def log_message(self, fmt, *args):
        if self.server.app.args.verbose:
            sys.stderr.write("strict_gcs: " + (fmt % args) + "\n")

    # Every method funnels through here: read the body, pick a fault, route, answer.
    def handle_any(self):
        app = self.server.app
        with app.store.lock:
            app.store.stats["requests"] += 1
        url = urllib.parse.urlsplit(self.path)
        length = self.headers.get("Content-Length")
        body = self.rfile.read(int(length)) if length else b""
        fault = None if url.path.startswith("/_test/") else app.take_fault(self.command, url.path)
        if fault and fault["kind"] in ("503", "429", "reset"):
            return self.fail_early(fault)
        if fault and fault["kind"] == "slow":
            time.sleep(float(fault.get("delay", 2)))
        if fault and fault["kind"] in ("stall", "endless", "huge_length"):
            return self.hostile(fault)
        if fault and fault["kind"] == "repeat_token":
            token = urllib.parse.parse_qs(url.query).get("pageToken", ["dDA"])[0]
            return self.send(200, {"Content-Type": "application/json"},
                             json.dumps({"kind": "storage#objects", "nextPageToken": token}).encode())
        try:
            status, headers, payload = self.route(app, url, body)
        except HttpError as e:
            status, headers, payload = self.error_response(e)
        if fault and fault["kind"] == "503_after_clobber" and status == 200 and "/upload/" in url.path:
            # Another writer overwrites the object between the lost answer and the client's retry.
            done = json.loads(payload)
            app.store.put(done["bucket"], done["name"], b"clobbered", {}, {})
        if fault and fault["kind"] in ("503_after", "503_after_clobber"):
            return self.send(503, {"Content-Type": "application/json"}, self.error_body(503, "backendError", "Backend Error"))
        if fault and fault["kind"] == "reset_after":
            return self.reset()
        if fault and fault["kind"] == "truncate":
            return self.send(status, headers, payload, truncate=True)
        self.send(status, headers, payload)

    def handle_quietly(self):
        try:
            self.handle_any()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (a timeout): nothing to answer

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = handle_quietly

    def hostile(self, fault):
        self.close_connection = True
        if fault["kind"] == "stall":
            time.sleep(min(float(fault.get("delay", 60)), 120))
            return self.reset()
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("x-goog-generation", "1")
        if fault["kind"] == "huge_length":
            self.send_header("Content-Length", str(10 ** 12))
        self.send_header("Connection", "close")
        self.end_headers()
        block = b"x" * 65536
        for _ in range(1 if fault["kind"] == "huge_length" else 1 << 20):
            self.wfile.write(block)
        self.wfile.flush()

    def fail_early(self, fault):
        if fault["kind"] == "reset":
            return self.reset()
        code = int(fault["kind"])
        reason = "rateLimitExceeded" if code == 429 else "backendError"
        self.send(code, {"Content-Type": "application/json"}, self.error_body(code, reason, "injected fault"))

    def reset(self):
        # SO_LINGER 0 turns close() into a TCP reset: the client sees "connection reset", no response.
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self.connection.close()

    @staticmethod
    def error_body(code, reason, message):
        return json.dumps({"error": {"code": code, "message": message,
                                     "errors": [{"message": message, "domain": "global", "reason": reason}]}}).encode()

    def error_response(self, e):
        if e.status == 304:
            return 304, {}, b""
        if self.path.startswith("/token"):
            return e.status, {"Content-Type": "application/json"}, json.dumps(
                {"error": e.reason, "error_description": e.message}).encode()
        return e.status, {"Content-Type": "application/json"}, self.error_body(e.status, e.reason, e.message)

    def send(self, status, headers, payload, truncate=False):
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        if status != 304:
            self.send_header("Content-Length", str(len(payload)))
        if truncate:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD" and status != 304:
            self.wfile.write(payload[:len(payload) // 2] if truncate else payload)
        if truncate:
            self.wfile.flush()
            self.close_connection = True

    # ---- routing ----
    def route(self, app, url, body):
        path = url.path
        if path.startswith("/_test/"):
            return self.control(app, path, body)
        if path == "/token":
            if self.command != "POST":
                raise HttpError(405, "invalid_request", "POST only")
            host = self.headers.get("Host", "")
            return 200, {"Content-Type": "application/json"}, json.dumps(
                app.token_endpoint(self.headers, body, "http://%s/token" % host)).encode()
        if path == "/computeMetadata/v1/instance/service-accounts/default/token":
            if self.headers.get("Metadata-Flavor") != "Google":
                raise HttpError(403, "forbidden", "Metadata-Flavor: Google header required")
            return 200, {"Content-Type": "application/json", "Metadata-Flavor": "Google"}, json.dumps(
                app.issue_token()).encode()
        if path.startswith("/files/") and app.args.static:
            return self.static_file(app, urllib.parse.unquote(path[len("/files/"):]))
        params = self.params(url.query)
        app.check_auth(self.headers)
        m = re.fullmatch(r"/upload/storage/v1/b/([^/]+)/o", path)
        if m and self.command == "POST":
            return self.upload(app, urllib.parse.unquote(m.group(1)), params, body)
        m = re.fullmatch(r"/storage/v1/b/([^/]+)/o", path)
        if m and self.command == "GET":
            return self.list_objects(app, urllib.parse.unquote(m.group(1)), params)
        m = re.fullmatch(r"/storage/v1/b/([^/]+)/o/(.+)", path)
        if m:
            bucket, name = urllib.parse.unquote(m.group(1)), urllib.parse.unquote(m.group(2))
            if self.command == "GET":
                return self.get_object(app, bucket, name, params)
            if self.command == "DELETE":
                app.store.delete(bucket, name, params)
                return 204, {}, b""
        raise HttpError(404, "notFound", "Not Found: %s %s" % (self.command, path))

    @staticmethod
    def params(query):
        params = {}
        for k, v in urllib.parse.parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query)):
            if k not in KNOWN_PARAMS:
                raise HttpError(400, "invalidParameter", "unknown query parameter %r" % k)
            if k in params:
                raise HttpError(400, "invalidParameter", "repeated query parameter %r" % k)
            if k.startswith("if") and not re.fullmatch(r"\d+", v):
                raise HttpError(400, "invalid", "Invalid argument: %s=%r" % (k, v))
            params[k] = v
        return params

    def control(self, app, path, body):
        if path == "/_test/stats":
            return 200, {"Content-Type": "application/json"}, json.dumps(app.store.stats).encode()
        if path == "/_test/reset" and self.command == "POST":
            with app.store.lock:
                for b in app.store.buckets:
                    app.store.buckets[b] = {}
            with app.fault_lock:
                app.faults = []
            return 200, {}, b""
        if path == "/_test/faults" and self.command == "POST":
            rules = json.loads(body or b"{}").get("rules", [])
            with app.fault_lock:
                app.faults = [dict(r, count=int(r.get("count", 1)), seen=0) for r in rules]
            return 200, {}, b""
        if path == "/_test/revoke_tokens" and self.command == "POST":
            with app.store.lock:
                app.tokens.clear()
            return 200, {}, b""
        if path == "/_test/last_assertion":
            return 200, {"Content-Type": "application/jwt"}, (app.last_assertion or "").encode()
        if path == "/_test/object" and self.command == "GET":
            q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(self.path).query))
            obj = app.store.get(q["bucket"], q["name"], {})
            return 200, {"Content-Type": "application/json"}, json.dumps(object_json(q["bucket"], obj)).encode()
        raise HttpError(404, "notFound", "no such control endpoint")

    def upload(self, app, bucket, params, body):
        kind = params.get("uploadType")
        metadata = {}
        if kind == "media":
            name = params.get("name")
            data = body
        elif kind == "multipart":
            meta, data = self.multipart(body)
            name = params.get("name") or meta.get("name")
            metadata = meta.get("metadata") or {}
            if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
                raise HttpError(400, "invalid", "metadata must map strings to strings")
        else:
            raise HttpError(400, "invalid", "uploadType must be media or multipart (got %r)" % kind)
        if not name or len(name.encode()) > 1024 or "\r" in name or "\n" in name:
            raise HttpError(400, "invalid", "Required parameter: name (1..1024 bytes, no CR/LF)")
        if self.headers.get("Content-Length") is None:
            raise HttpError(411, "required", "Content-Length required")
        obj = app.store.put(bucket, name, data, params, metadata)
        return 200, {"Content-Type": "application/json"}, json.dumps(object_json(bucket, obj)).encode()

    def multipart(self, body):
        ctype = self.headers.get("Content-Type", "")
        m = re.fullmatch(r'multipart/related;\s*boundary="?([^";]+)"?', ctype.strip())
        if not m:
            raise HttpError(400, "invalid", "multipart upload needs Content-Type multipart/related; boundary=")
        delim = b"--" + m.group(1).encode()
        parts = body.split(delim)
        # ["", part1, part2, "--\r\n"]: exactly two parts and a closing delimiter.
        if len(parts) != 4 or parts[0] != b"" or parts[3] not in (b"--", b"--\r\n"):
            raise HttpError(400, "invalid", "multipart body must hold exactly two parts")
        out = []
        for p in parts[1:3]:
            if not p.startswith(b"\r\n") or not p.endswith(b"\r\n") or b"\r\n\r\n" not in p:
                raise HttpError(400, "invalid", "malformed multipart part")
            head, content = p[2:-2].split(b"\r\n\r\n", 1)
            out.append((head.decode("latin-1").lower(), content))
        if "application/json" not in out[0][0]:
            raise HttpError(400, "invalid", "the first multipart part must be application/json metadata")
        try:
            meta = json.loads(out[0][1])
        except ValueError:
            raise HttpError(400, "parseError", "metadata part is not JSON")
        return meta, out[1][1]

    def get_object(self, app, bucket, name, params):
        obj = app.store.get(bucket, name, params)
        alt = params.get("alt", "json")
        if alt == "json":
            return 200, {"Content-Type": "application/json"}, json.dumps(object_json(bucket, obj)).encode()
        if alt != "media":
            raise HttpError(400, "invalid", "alt must be json or media")
        data = obj["data"]
        headers = {"Content-Type": "application/octet-stream", "x-goog-generation": str(obj["generation"]),
                   "x-goog-metageneration": "1", "x-goog-stored-content-length": str(len(data)),
                   "ETag": '"%s"' % hashlib.md5(data).hexdigest()}
        r = parse_range(self.headers.get("Range"), len(data))
        if r is None:
            return 200, headers, data
        headers["Content-Range"] = "bytes %d-%d/%d" % (r[0], r[1], len(data))
        return 206, headers, data[r[0]:r[1] + 1]

    def list_objects(self, app, bucket, params):
        prefix = params.get("prefix", "")
        start_after = ""
        if params.get("pageToken"):
            try:
                start_after = b64url_decode(params["pageToken"]).decode()
            except ValueError:
                raise HttpError(400, "invalid", "Invalid pageToken")
        limit = min(int(params.get("maxResults", 1000)), app.args.page_size)
        page, more = app.store.list(bucket, prefix, start_after, limit)
        out = {"kind": "storage#objects", "items": [object_json(bucket, o) for o in page]}
        if not out["items"]:
            del out["items"]  # as GCS: no "items" member when nothing matched
        if more:
            out["nextPageToken"] = base64.urlsafe_b64encode(page[-1]["name"].encode()).decode().rstrip("=")
        return 200, {"Content-Type": "application/json"}, json.dumps(out).encode()

    def static_file(self, app, rel):
        root = os.path.realpath(app.args.static)
        path = os.path.realpath(os.path.join(root, rel))
        if not path.startswith(root + os.sep) or not os.path.isfile(path):
            raise HttpError(404, "notFound", "no such file")
        data = open(path, "rb").read()
        etag = '"%s"' % hashlib.sha256(data).hexdigest()[:32]
        headers = {"ETag": etag, "Content-Type": "application/octet-stream", "Accept-Ranges": "bytes"}
        if self.headers.get("If-None-Match") == etag:
            return 304, headers, b""
        r = parse_range(self.headers.get("Range"), len(data)) if self.command == "GET" else None
        if r is None:
            return 200, headers, data
        headers["Content-Range"] = "bytes %d-%d/%d" % (r[0], r[1], len(data))
        return 206, headers, data[r[0]:r[1] + 1]


def main():
    ap = argparse.ArgumentParser(description="strict GCS JSON API test double (127.0.0.1 only)")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--bucket", action="append", default=[])
    ap.add_argument("--public-key")
    ap.add_argument("--static")
    ap.add_argument("--page-size", type=int, default=1000)
    ap.add_argument("--token-lifetime", type=int, default=3600)
    ap.add_argument("--require-auth", action="store_true")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    server.handle_error = lambda request, address: None  # a dropped client is not news in a fault test
    server.app = App(args)
    port = server.server_address[1]
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.rename(tmp, args.port_file)
    print("strict_gcs listening on 127.0.0.1:%d" % port, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
