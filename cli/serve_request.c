/* `ndstore serve`: one HTTP request answered from the store (serve.h).
 *
 * GET and HEAD read the key the path names: 200 with the value, or 206 with one byte range read by
 * the kvstore's ranged read (never the whole value), 416 when the range is outside it, 404 when the
 * key is missing, 400 for a path that is not a key inside the store, 500 (or 502/504 for a remote
 * store that failed or timed out) when the store fails. OPTIONS answers a CORS preflight; every
 * other method is 405: the server is read-only. Every response allows any origin, so a viewer
 * served from another port (neuroglancer) can read it, 404s included.
 *
 * A body is read in blocks of SERVE_BLOCK_BYTES, each a ranged read conditional on the generation
 * the first block came from: a value replaced while it streams ends the response with an error
 * (the client sees a short body) instead of mixing two values.
 * Every 200 and 206 has the value's generation as its ETag; a Range under an If-Range naming
 * another stands only when it matches.
 * Omits: multipart ranges (a request for several is answered 200 with the whole value, as RFC 9110
 * allows), If-None-Match and If-Modified-Since (always 200), directory listings, compression.
 * Threading: called on the daemon's pool threads; each request's state is its own.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "cli.h"
#include "serve.h"

/* What one request did, for its log line. */
typedef struct serve_req {
    double start;           /* cli_now() when it arrived */
    char method[16];
    char path[256];         /* as sent, non-printable bytes escaped, cut to fit */
    unsigned status;
    uint64_t bytes;         /* body bytes the response holds (0 for HEAD) */
    char note[320];         /* for the log: why it failed, the range sent, or the Range ignored */
} serve_req;

/* The body of a 200 or 206 response: [start, start + len) of key's value, at generation gen. */
typedef struct serve_body {
    nds_kvstore *kv;        /* a reference of its own */
    char *key;
    nds_generation gen;
    uint64_t start, len;
    uint64_t total;         /* the whole value's size */
    nds_read_result block;  /* the block read last: the value's bytes from block_off */
    uint64_t block_off;
} serve_body;

/* ---- paths ---- */

static int hex_digit(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Percent-decodes path into out (room for strlen(path) + 1). NULL, or why it is refused. */
static const char *percent_decode(const char *path, char *out) {
    size_t n = 0;
    for (const char *p = path; *p; p++) {
        if (*p != '%') {
            out[n++] = *p;
            continue;
        }
        int hi = hex_digit(p[1]), lo = hi < 0 ? -1 : hex_digit(p[2]);
        if (hi < 0 || lo < 0)
            return "a '%' that is not followed by two hex digits";
        if (hi == 0 && lo == 0)
            return "a NUL byte (%00)";
        out[n++] = (char)(hi * 16 + lo);
        p += 2;
    }
    out[n] = '\0';
    return NULL;
}

/* Why key (decoded, leading '/' removed) is not a key inside the store, or NULL. */
static const char *key_refusal(const char *key) {
    if (key[0] == '/')
        return "an absolute path (a key never starts with '/')";
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
        if (*p == '\\')
            return "a backslash";
        if (*p < 0x20 || *p == 0x7f)
            return "a control character";
    }
    for (const char *s = key; *s;) {
        size_t n = strcspn(s, "/");
        if (n == 0)
            return "an empty path segment ('//')";
        if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
            return "a '.' or '..' segment";
        s += n;
        if (*s == '/')
            s++;
    }
    return NULL;
}

serve_path_status serve_key_from_path(const char *path, char *key, const char **why) {
    if (strlen(path) > SERVE_PATH_MAX) {
        *why = "the path is too long";
        return SERVE_PATH_TOO_LONG;
    }
    if (path[0] != '/') {
        *why = "the path does not start with '/'";
        return SERVE_PATH_BAD;
    }
    if ((*why = percent_decode(path + 1, key)) != NULL || (*why = key_refusal(key)) != NULL)
        return SERVE_PATH_BAD;
    size_t n = strlen(key);
    if (n == 0 || key[n - 1] == '/')
        memcpy(key + n, "index.html", sizeof "index.html"); /* a directory's page */
    return SERVE_PATH_OK;
}

size_t serve_keep_escapes(void *cls, struct MHD_Connection *conn, char *s) {
    (void)cls;
    (void)conn;
    return strlen(s);
}

/* ---- ranges ---- */

/* Parses decimal digits at *p (at least one) into *v; advances *p. false on none or overflow. */
static bool parse_u64(const char **p, uint64_t *v) {
    const char *s = *p;
    uint64_t x = 0;
    if (*s < '0' || *s > '9')
        return false;
    for (; *s >= '0' && *s <= '9'; s++)
        if (__builtin_mul_overflow(x, 10, &x) ||
            __builtin_add_overflow(x, (uint64_t)(*s - '0'), &x))
            return false;
    *p = s;
    *v = x;
    return true;
}

serve_range serve_range_parse(const char *value) {
    serve_range r = {SERVE_RANGE_NONE, 0, 0, 0};
    if (!value || strncmp(value, "bytes=", 6) != 0)
        return r;
    const char *p = value + 6;
    p += strspn(p, " \t");
    serve_range got = {SERVE_RANGE_FROM, 0, UINT64_MAX, 0};
    if (*p == '-') {
        p++;
        got.kind = SERVE_RANGE_SUFFIX;
        if (!parse_u64(&p, &got.count))
            return r;
    } else {
        if (!parse_u64(&p, &got.first) || *p++ != '-')
            return r;
        if (*p >= '0' && *p <= '9' && (!parse_u64(&p, &got.last) || got.last < got.first))
            return r;
    }
    p += strspn(p, " \t");
    return *p == '\0' ? got : r; /* "," (several ranges) or anything else: ignored */
}

/* ---- responses ---- */

/* Copies s into out (cap bytes) with bytes outside printable ASCII as %XX: a log line stays one
 * line whatever the client sent. */
static void copy_printable(char *out, size_t cap, const char *s) {
    size_t n = 0;
    for (; *s && n + 4 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c > 0x20 && c < 0x7f)
            out[n++] = (char)c;
        else
            n += (size_t)snprintf(out + n, cap - n, "%%%02X", c);
    }
    out[n] = '\0';
}

static const struct {
    const char *ext;
    const char *type;
} content_types[] = {
    {".html", "text/html; charset=utf-8"}, {".htm", "text/html; charset=utf-8"},
    {".js", "text/javascript"},            {".mjs", "text/javascript"},
    {".css", "text/css"},                  {".json", "application/json"},
    {".map", "application/json"},          {".wasm", "application/wasm"},
    {".png", "image/png"},                 {".jpg", "image/jpeg"},
    {".jpeg", "image/jpeg"},               {".gif", "image/gif"},
    {".svg", "image/svg+xml"},             {".ico", "image/x-icon"},
    {".txt", "text/plain; charset=utf-8"}, {".tif", "image/tiff"},
    {".tiff", "image/tiff"},               {".npy", "application/octet-stream"},
};

/* The Content-Type of key, by its extension: application/octet-stream when not obvious (chunks,
 * shards, a precomputed "info" or a zarr ".zarray" document). */
static const char *content_type(const char *key) {
    const char *slash = strrchr(key, '/'), *base = slash ? slash + 1 : key;
    const char *dot = strrchr(base, '.');
    if (dot && dot != base)
        for (size_t i = 0; i < sizeof content_types / sizeof content_types[0]; i++)
            if (strcasecmp(dot, content_types[i].ext) == 0)
                return content_types[i].type;
    return "application/octet-stream";
}

/* The headers every response carries: any origin may read it (a viewer on another port). */
static void add_common_headers(struct MHD_Response *resp) {
    MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
    MHD_add_response_header(resp, "Access-Control-Expose-Headers",
                            "Content-Length, Content-Range, Content-Type, Accept-Ranges, ETag");
    MHD_add_response_header(resp, "Accept-Ranges", "bytes");
}

static enum MHD_Result queue(struct MHD_Connection *conn, serve_req *req, unsigned status,
                             struct MHD_Response *resp) {
    if (!resp)
        return MHD_NO; /* out of memory: libmicrohttpd closes the connection */
    add_common_headers(resp);
    req->status = status;
    enum MHD_Result r = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    return r;
}

/* A short text response ("404 not found: a/b\n"); why goes to the log too. */
static enum MHD_Result queue_text(struct MHD_Connection *conn, serve_req *req, unsigned status,
                                  const char *text) {
    char body[512];
    snprintf(body, sizeof body, "%u %s\n", status, text);
    snprintf(req->note, sizeof req->note, "%s", text);
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_COPY);
    if (resp)
        MHD_add_response_header(resp, "Content-Type", "text/plain; charset=utf-8");
    req->bytes = strlen(body);
    return queue(conn, req, status, resp);
}

/* ---- bodies ---- */

static void body_free(void *cls) {
    serve_body *b = cls;
    nds_read_result_dispose(&b->block);
    nds_kvstore_free(b->kv);
    free(b->key);
    free(b);
}

/* Bytes a read of a body [start, start + len) asks for at abs: the rest, at most one block. */
static uint64_t block_want(uint64_t start, uint64_t len, uint64_t abs) {
    uint64_t rest = start + len - abs;
    return rest < SERVE_BLOCK_BYTES ? rest : SERVE_BLOCK_BYTES;
}

/* Why a read of want bytes did not give them, or NULL when it did (r read without error). A read
 * shorter than asked, not at the value's end, is the store failing (a dropped connection): the
 * library treats it so (array_read.c), and so does serve, rather than send a short body. */
static const char *short_read(const nds_read_result *r, uint64_t want, char *buf, size_t cap) {
    if (r->state == NDS_READ_ABORTED)
        return "the value changed while it was sent";
    if (r->state != NDS_READ_VALUE)
        return "the key was deleted while it was sent";
    if (r->value.len == want)
        return NULL;
    snprintf(buf, cap, "the store returned %zu bytes of the %" PRIu64 " asked for", r->value.len,
             want);
    return buf;
}

/* Reads the block of the value that holds byte abs (at the body's generation). 0, or -1 with the
 * reason on stderr: the response then ends short, and the client sees it did. */
static int body_fill(serve_body *b, uint64_t abs) {
    nds_read_result_dispose(&b->block);
    uint64_t want = block_want(b->start, b->len, abs);
    nds_read_options o = NDS_READ_OPTIONS_INIT;
    o.if_equal = b->gen;
    o.byte_start = (int64_t)abs;
    o.byte_length = (int64_t)want;
    nds_error_clear();
    int rc = nds_kvstore_read(b->kv, b->key, &o, &b->block);
    char buf[128];
    const char *why = rc ? NULL : short_read(&b->block, want, buf, sizeof buf);
    if (rc != 0 || why) {
        const nds_error *e = nds_error_last();
        fprintf(stderr, "ndstore serve: %s: reading bytes from %" PRIu64 " failed: %s\n", b->key,
                abs, why ? why : e && e->message[0] ? e->message : nds_strerror(rc));
        nds_read_result_dispose(&b->block);
        return -1;
    }
    b->block_off = abs;
    return 0;
}

/* libmicrohttpd's content reader: copies body bytes from pos (relative to the body's start). */
static ssize_t body_read(void *cls, uint64_t pos, char *buf, size_t max) {
    serve_body *b = cls;
    if (pos >= b->len)
        return MHD_CONTENT_READER_END_OF_STREAM;
    uint64_t abs = b->start + pos;
    const nds_bytes *v = &b->block.value;
    if (!v->data || abs < b->block_off || abs >= b->block_off + v->len) {
        if (body_fill(b, abs) != 0)
            return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    uint64_t avail = b->block_off + v->len - abs;
    size_t n = avail < max ? (size_t)avail : max;
    memcpy(buf, v->data + (abs - b->block_off), n);
    return (ssize_t)n;
}

/* ---- GET and HEAD ---- */

/* The ETag of a generation ("\"<generation>\""), or false when it has none that fits an ETag. A
 * generation changes whenever the value does, so it is a strong validator: clients (and ndstore's
 * own http kvstore, reading from another serve) get stable generations from it. */
static bool etag_of(const nds_generation *g, char *buf, size_t cap) {
    if (g->kind != NDS_GEN_VALUE || !g->value[0] || strlen(g->value) + 3 > cap)
        return false;
    for (const unsigned char *p = (const unsigned char *)g->value; *p; p++)
        if (*p <= 0x20 || *p >= 0x7f || *p == '"' || *p == '\\')
            return false;
    snprintf(buf, cap, "\"%s\"", g->value);
    return true;
}

/* Whether the request's If-Range (RFC 9110 13.1.5) lets its Range stand: no If-Range, or one equal
 * to the value's ETag. A date never matches (no Last-Modified is sent), nor does another ETag: the
 * whole value is then sent, so a client resuming a download never joins two values. */
static bool if_range_holds(struct MHD_Connection *conn, const nds_generation *g) {
    const char *want = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "If-Range");
    char etag[NDS_GENERATION_MAX + 3];
    return !want || (etag_of(g, etag, sizeof etag) && strcmp(want, etag) == 0);
}

/* The status of a failed read, and its text for the client (the details go to the log only: they
 * may name the server's paths). An I/O error of a store that is not local (s3, gcs, http, or an
 * adapter such as versioned, whose base the public API does not show) is its server's: 502. */
static unsigned store_error_status(int rc, bool remote, const char **text) {
    switch (rc) {
    case NDS_ENOTFOUND: *text = "not found"; return MHD_HTTP_NOT_FOUND;
    case NDS_EINVAL: *text = "not a key of this store"; return MHD_HTTP_BAD_REQUEST;
    case NDS_EPERM: *text = "permission denied by the store"; return MHD_HTTP_FORBIDDEN;
    case NDS_ETIMEOUT: *text = "the store's server timed out"; return MHD_HTTP_GATEWAY_TIMEOUT;
    case NDS_ENETWORK: *text = "the store's server failed"; return MHD_HTTP_BAD_GATEWAY;
    case NDS_EIO:
        if (remote) {
            *text = "the store's server failed";
            return MHD_HTTP_BAD_GATEWAY;
        }
        /* fall through */
    default: *text = "the store failed to read this key"; return MHD_HTTP_INTERNAL_SERVER_ERROR;
    }
}

/* The store's message about the read that failed last on this thread, into buf. */
static void store_message(int rc, char *buf, size_t cap) {
    const nds_error *e = nds_error_last();
    snprintf(buf, cap, "%s", e && e->message[0] ? e->message : nds_strerror(rc));
}

/* A failed read: the client gets the kind of failure, the log line what the store said (detail). */
static enum MHD_Result queue_store_error(struct MHD_Connection *conn, serve_req *req,
                                         const serve_site *site, int rc, const char *detail) {
    const char *text;
    unsigned status = store_error_status(rc, site->remote, &text);
    char body[200];
    snprintf(body, sizeof body, "%s (%s)", text, nds_strerror(rc));
    enum MHD_Result r = queue_text(conn, req, status, body);
    snprintf(req->note, sizeof req->note, "%s", detail);
    return r;
}

static enum MHD_Result queue_unsatisfiable(struct MHD_Connection *conn, serve_req *req,
                                           uint64_t total) {
    char body[128], range[48];
    snprintf(body, sizeof body, "416 range not satisfiable: the value holds %" PRIu64 " bytes\n",
             total);
    snprintf(range, sizeof range, "bytes */%" PRIu64, total);
    snprintf(req->note, sizeof req->note, "range outside %" PRIu64 " bytes", total);
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_COPY);
    if (resp) {
        MHD_add_response_header(resp, "Content-Range", range);
        MHD_add_response_header(resp, "Content-Type", "text/plain; charset=utf-8");
    }
    req->bytes = strlen(body);
    return queue(conn, req, MHD_HTTP_RANGE_NOT_SATISFIABLE, resp);
}

/* Resolves range against a value of total bytes into [*start, *start + *len). false: 416. */
static bool range_resolve(const serve_range *r, uint64_t total, uint64_t *start, uint64_t *len) {
    switch (r->kind) {
    case SERVE_RANGE_FROM:
        if (r->first >= total)
            return false;
        *start = r->first;
        *len = (r->last < total - 1 ? r->last : total - 1) - r->first + 1;
        return true;
    case SERVE_RANGE_SUFFIX:
        if (r->count == 0 || total == 0)
            return false;
        *len = r->count < total ? r->count : total;
        *start = total - *len;
        return true;
    default:
        *start = 0;
        *len = total;
        return true;
    }
}

/* The first read of a GET or HEAD: the value's size and generation, and for a GET the first block
 * of what is asked (so a small value is read once). A range that starts past the end is not an
 * error here (the caller answers 416); any other failure is, its message in why. */
static int probe(nds_kvstore *kv, const char *key, const serve_range *r, bool head,
                 nds_read_result *out, char *why, size_t why_cap) {
    nds_read_options o = NDS_READ_OPTIONS_INIT;
    if (r->kind == SERVE_RANGE_FROM && r->first <= INT64_MAX)
        o.byte_start = (int64_t)r->first;
    else if (r->kind == SERVE_RANGE_SUFFIX && r->count > 0 && r->count <= INT64_MAX)
        o.byte_start = -(int64_t)r->count;
    uint64_t want = SERVE_BLOCK_BYTES;
    if (r->kind == SERVE_RANGE_FROM && r->last - r->first < want)
        want = r->last - r->first + 1;
    o.byte_length = head ? 0 : (int64_t)want;
    nds_error_clear();
    int rc = nds_kvstore_read(kv, key, &o, out);
    if (rc != NDS_ERANGE || r->kind != SERVE_RANGE_FROM) {
        if (rc != 0)
            store_message(rc, why, why_cap);
        return rc;
    }
    /* Perhaps the range starts past the end: read nothing, to learn the size for the 416. A
     * range inside the value that failed all the same is the store's failure (a truncated
     * object), never a 416. */
    store_message(rc, why, why_cap);
    nds_read_result_dispose(out);
    o.byte_start = 0;
    o.byte_length = 0;
    nds_error_clear();
    int again = nds_kvstore_read(kv, key, &o, out);
    if (again != 0 || out->state != NDS_READ_VALUE || r->first < out->total_size)
        return again != 0 ? (store_message(again, why, why_cap), again) : rc;
    return 0;
}

/* The bytes a read answers with: [start, start + len) of the value, as a 206 (partial) or a 200,
 * the body left out for a HEAD. */
typedef struct serve_span {
    uint64_t start, len;
    bool partial, head;
} serve_span;

/* A 200 or 206 whose body is span's bytes of the value probe read (its first block, held in
 * *first, is handed over; the value holds first->total_size bytes). */
static enum MHD_Result queue_value(struct MHD_Connection *conn, serve_req *req,
                                   const serve_site *site, const char *key, nds_read_result *first,
                                   const serve_span *span) {
    uint64_t start = span->start, len = span->len;
    bool partial = span->partial, head = span->head;
    serve_body *b = calloc(1, sizeof *b);
    char *k = strdup(key);
    if (!b || !k) {
        free(b);
        free(k);
        return queue_text(conn, req, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    }
    *b = (serve_body){nds_kvstore_ref(site->kv), k, first->generation, start, len,
                      first->total_size, *first, start};
    memset(first, 0, sizeof *first); /* b owns the block now */
    if (head)
        nds_read_result_dispose(&b->block);
    struct MHD_Response *resp =
        MHD_create_response_from_callback(len, SERVE_SEND_BYTES, body_read, b, body_free);
    if (!resp) {
        body_free(b);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", content_type(key));
    char etag[NDS_GENERATION_MAX + 3];
    if (etag_of(&b->gen, etag, sizeof etag))
        MHD_add_response_header(resp, "ETag", etag);
    if (partial) {
        char range[96];
        snprintf(range, sizeof range, "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, start,
                 start + len - 1, b->total);
        MHD_add_response_header(resp, "Content-Range", range);
        snprintf(req->note, sizeof req->note, "%s", range); /* the log says which bytes */
    }
    req->bytes = head ? 0 : len;
    return queue(conn, req, partial ? MHD_HTTP_PARTIAL_CONTENT : MHD_HTTP_OK, resp);
}

static enum MHD_Result answer_read(struct MHD_Connection *conn, serve_req *req,
                                   const serve_site *site, const char *key, bool head) {
    const char *range_text = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Range");
    serve_range r = serve_range_parse(range_text);
    if (range_text && r.kind == SERVE_RANGE_NONE) { /* the log says a Range came, and was ignored */
        char shown[128];
        copy_printable(shown, sizeof shown, range_text);
        snprintf(req->note, sizeof req->note, "Range ignored: %s", shown);
    }
    nds_read_result first;
    char why[320];
    int rc = probe(site->kv, key, &r, head, &first, why, sizeof why);
    if (rc == 0 && first.state == NDS_READ_VALUE && r.kind != SERVE_RANGE_NONE &&
        !if_range_holds(conn, &first.generation)) {
        r.kind = SERVE_RANGE_NONE; /* the value changed since the client's copy: all of it */
        nds_read_result_dispose(&first);
        rc = probe(site->kv, key, &r, head, &first, why, sizeof why);
    }
    if (rc != 0) {
        nds_read_result_dispose(&first);
        return queue_store_error(conn, req, site, rc, why);
    }
    if (first.state != NDS_READ_VALUE) {
        nds_read_result_dispose(&first);
        return queue_text(conn, req, MHD_HTTP_NOT_FOUND, "not found");
    }
    uint64_t total = first.total_size, start, len;
    if (!range_resolve(&r, total, &start, &len)) {
        nds_read_result_dispose(&first);
        return queue_unsatisfiable(conn, req, total);
    }
    const char *short_why =
        head ? NULL : short_read(&first, block_want(start, len, start), why, sizeof why);
    if (short_why) {
        nds_read_result_dispose(&first);
        return queue_store_error(conn, req, site, NDS_EIO, short_why);
    }
    serve_span span = {start, len, r.kind != SERVE_RANGE_NONE, head};
    return queue_value(conn, req, site, key, &first, &span);
}

/* ---- the handler ---- */

static enum MHD_Result answer_options(struct MHD_Connection *conn, serve_req *req) {
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    if (resp) {
        const char *asked =
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Access-Control-Request-Headers");
        MHD_add_response_header(resp, "Allow", "GET, HEAD, OPTIONS");
        MHD_add_response_header(resp, "Access-Control-Allow-Methods", "GET, HEAD, OPTIONS");
        MHD_add_response_header(resp, "Access-Control-Allow-Headers", asked ? asked : "Range");
        MHD_add_response_header(resp, "Access-Control-Max-Age", "86400");
    }
    return queue(conn, req, MHD_HTTP_NO_CONTENT, resp);
}

static enum MHD_Result answer_not_allowed(struct MHD_Connection *conn, serve_req *req) {
    char body[160];
    snprintf(body, sizeof body, "405 %s is not allowed: ndstore serve is read-only (GET, HEAD, "
             "OPTIONS)\n", req->method);
    snprintf(req->note, sizeof req->note, "read-only");
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_COPY);
    if (resp) {
        MHD_add_response_header(resp, "Allow", "GET, HEAD, OPTIONS");
        MHD_add_response_header(resp, "Content-Type", "text/plain; charset=utf-8");
    }
    req->bytes = strlen(body);
    return queue(conn, req, MHD_HTTP_METHOD_NOT_ALLOWED, resp);
}

static enum MHD_Result answer(struct MHD_Connection *conn, serve_req *req, const serve_site *site,
                              const char *url) {
    bool get = strcmp(req->method, "GET") == 0, head = strcmp(req->method, "HEAD") == 0;
    if (strcmp(req->method, "OPTIONS") == 0)
        return answer_options(conn, req);
    if (!get && !head)
        return answer_not_allowed(conn, req);
    char key[SERVE_PATH_MAX + 16];
    const char *why = NULL;
    serve_path_status st = serve_key_from_path(url, key, &why);
    if (st == SERVE_PATH_TOO_LONG)
        return queue_text(conn, req, MHD_HTTP_URI_TOO_LONG, why);
    if (st != SERVE_PATH_OK) {
        char text[160];
        snprintf(text, sizeof text, "not a key inside the store: %s", why);
        return queue_text(conn, req, MHD_HTTP_BAD_REQUEST, text);
    }
    return answer_read(conn, req, site, key, head);
}

/* GET, HEAD and OPTIONS: the methods answered after the request is read whole. */
static bool readable_method(const char *method) {
    return strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0 ||
           strcmp(method, "OPTIONS") == 0;
}

enum MHD_Result serve_answer(void *cls, struct MHD_Connection *conn, const char *url,
                             const char *method, const char *version, const char *upload_data,
                             size_t *upload_data_size, void **req_cls) {
    (void)version;
    (void)upload_data;
    serve_req *req = *req_cls;
    if (!req) {
        if (!(req = calloc(1, sizeof *req)))
            return MHD_NO;
        *req_cls = req;
        req->start = cli_now();
        copy_printable(req->method, sizeof req->method, method);
        copy_printable(req->path, sizeof req->path, url);
        /* A write is refused at once, its body never read (the connection then closes). A read is
         * answered on the next call, once the request is read whole: a response queued earlier
         * makes libmicrohttpd close the connection, and clients lose keep-alive. */
        return readable_method(method) ? MHD_YES : answer(conn, req, cls, url);
    }
    if (*upload_data_size != 0 || req->status != 0) {
        *upload_data_size = 0; /* a body (a GET may carry one): dropped */
        return MHD_YES;
    }
    return answer(conn, req, cls, url);
}

void serve_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                     enum MHD_RequestTerminationCode toe) {
    (void)cls;
    (void)conn;
    serve_req *req = *req_cls;
    if (!req)
        return;
    *req_cls = NULL;
    /* One fprintf per line: stdio locks stderr for it, so concurrent requests' lines never mix. */
    double ms = (cli_now() - req->start) * 1e3;
    const char *cut = toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection ended early)";
    fprintf(stderr, "%s %s %u %" PRIu64 " %.1fms%s%s%s\n", req->method, req->path, req->status,
            req->bytes, ms, req->note[0] ? ": " : "", req->note, cut);
    free(req);
}
