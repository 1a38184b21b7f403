/* The "http" kvstore driver: read-only access to values served over plain HTTP(S)
 * (http://host/path/ and https://host/path/), for public volumes and arrays served by any web
 * server.
 *
 * Implements GET with byte ranges (a server that ignores Range and sends the whole value is fine:
 * the range is cut here), HEAD for existence checks and zero-length reads, and revalidation with
 * If-None-Match. Generations come from the server's validators: the ETag when there is one, else
 * Last-Modified with the size ("lm:<date>/<size>", as exact as the server's one-second clock), else
 * none: then every read gets a generation of its own, so a cache never takes a stale value for a
 * fresh one. Omits writes, deletes and listing: a web server offers none of them, so they fail with
 * NDS_EREADONLY (writes, deletes) and NDS_EUNSUPPORTED (listing). Also omits content decoding:
 * bytes are as served.
 *
 * Spec: {"driver": "http", "base_url": "https://host[:port][/base]", "path": "/a/",
 *        "headers": ["Name: value"], "http_request_concurrency": N,
 *        "http_request_retries": {"max_retries": N}, "http_request_timeout": "30s",
 *        "http_max_response_bytes": N, "http_request_deadline": "60s",
 *        "http_stall_timeout": "15s"}.
 * "headers" may carry credentials (an Authorization header), so a printed spec leaves them out.
 *
 * Threading: internally synchronised (the HTTP client is; the rest is immutable after open).
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "ndstore/sys/kv_driver.h"
#include "http_multi.h"
#include "internal/error.h"
#include "internal/json_util.h"
#include "internal/util.h"

#define HTTP_MAX_HEADERS 16

typedef struct http_state {
    char *base_url;                  /* scheme://authority[/base], no trailing '/' */
    char *headers[HTTP_MAX_HEADERS]; /* the spec's extra request headers */
    size_t nheaders;
    nds_http_client *http;
    nds_http_retry retry;
    long timeout_ms;
} http_state;

/* Numbers the generations of values served without validators. */
static atomic_uint_fast64_t g_unvalidated;

/* ---- requests ---- */

/* The URL of a full key: base_url + "/" + the key, percent-encoded but for its slashes. */
static char *key_url(const http_state *s, const char *key) {
    char *ek = nds_http_escape(key, true);
    char *url = ek ? nds_asprintf("%s%s%s", s->base_url, key[0] == '/' ? "" : "/", ek) : NULL;
    free(ek);
    return url;
}

/* Sends method to key's URL with the spec's headers plus extra (may be NULL). */
static int http_send(http_state *s, const char *method, const char *key, const char *extra,
                     nds_http_response *resp) {
    const char *hdrs[HTTP_MAX_HEADERS + 1];
    size_t n = 0;
    if (extra) hdrs[n++] = extra;
    for (size_t i = 0; i < s->nheaders; i++) hdrs[n++] = s->headers[i];
    char *url = key_url(s, key);
    memset(resp, 0, sizeof *resp);
    if (!url) return nds_err(NDS_ENOMEM, "http: out of memory");
    nds_http_request req = {method, url, hdrs, n, NULL, 0, s->timeout_ms, 0};
    int rc = nds_http_perform(s->http, &req, &s->retry, resp);
    if (rc) rc = nds_err_prefix(rc, "http: read of %s", url);
    free(url);
    return rc;
}

static int http_status_error(const http_state *s, const char *key, const nds_http_response *r) {
    int code = r->status == 401 || r->status == 403 ? NDS_EPERM
               : r->status == 400                   ? NDS_EINVAL
                                                    : NDS_EIO;
    const char *why = r->status >= 300 && r->status < 400 ? " (redirects are not followed)" : "";
    return nds_err_cause(code, NDS_CAUSE_HTTP, r->status, "http: read of %s%s%s: HTTP %ld%s",
                         s->base_url, key[0] == '/' ? "" : "/", key, r->status, why);
}

/* The generation of a response: its ETag, else Last-Modified and size, else one of its own. */
static void response_generation(const nds_http_response *r, uint64_t size, nds_generation *g) {
    char v[256], text[NDS_GENERATION_MAX + 32];
    if (nds_http_header(r, "ETag", v, sizeof v) && v[0] && strlen(v) < NDS_GENERATION_MAX) {
        nds_generation_set(g, v);
        return;
    }
    if (nds_http_header(r, "Last-Modified", v, sizeof v) && v[0] && strlen(v) < 60)
        snprintf(text, sizeof text, "lm:%.60s/%" PRIu64, v, size);
    else
        snprintf(text, sizeof text, "nv:%" PRIu64,
                 (uint64_t)atomic_fetch_add(&g_unvalidated, 1) + 1);
    nds_generation_set(g, text);
}

/* The size of the value a GET answer is about: from Content-Range on a 206, else the body's. */
static uint64_t response_total(const nds_http_response *r) {
    char cr[128];
    const char *slash;
    uint64_t total = r->body.len;
    if (r->status == 206 && nds_http_header(r, "Content-Range", cr, sizeof cr) &&
        (slash = strchr(cr, '/')))
        sscanf(slash + 1, "%" SCNu64, &total);
    return total;
}

/* Whether a generation is an ETag the server can compare in If-None-Match. */
static bool is_etag(const nds_generation *g) {
    return g->kind == NDS_GEN_VALUE && (g->value[0] == '"' || strncmp(g->value, "W/\"", 3) == 0);
}

/* ---- reads ---- */

/* Applies the read's conditions once the generation is known; true when the bytes are wanted. */
static bool conditions_pass(const nds_read_options *o, nds_read_result *out) {
    if (!nds_generation_satisfies(&o->if_equal, &out->generation))
        out->state = NDS_READ_ABORTED;
    else if (nds_generation_equal(&o->if_not_equal, &out->generation))
        out->state = NDS_READ_UNCHANGED;
    else
        return true;
    return false;
}

static void missing(const nds_read_options *o, nds_read_result *out) {
    out->generation.kind = NDS_GEN_ABSENT;
    out->state = o->if_equal.kind == NDS_GEN_VALUE ? NDS_READ_ABORTED : NDS_READ_MISSING;
}

/* What a HEAD's answer means for the read. */
static int head_result(http_state *s, const char *key, const nds_read_options *o,
                       nds_http_response *resp, nds_read_result *out) {
    char cl[32];
    uint64_t size = 0, off, len;
    if (resp->status == 404 || resp->status == 410) {
        missing(o, out);
        return 0;
    }
    if (resp->status != 200) return http_status_error(s, key, resp);
    if (!nds_http_header(resp, "Content-Length", cl, sizeof cl) ||
        sscanf(cl, "%" SCNu64, &size) != 1)
        return nds_err(NDS_EIO, "http: read of %s%s: HEAD answer lacks Content-Length", s->base_url,
                       key);
    response_generation(resp, size, &out->generation);
    out->total_size = size;
    if (!conditions_pass(o, out)) return 0;
    out->state = NDS_READ_VALUE;
    int rc = nds_byte_range_resolve(o, size, &off, &len);
    if (rc) return nds_err_prefix(rc, "http: read of %s%s", s->base_url, key);
    if (len > 0 && o->byte_length != 0) /* a 416 said the start was past the end; now it is not */
        return nds_err(NDS_EIO, "http: read of %s%s: the value changed while it was read",
                       s->base_url, key);
    return 0;
}

/* A HEAD: existence checks, zero-length reads, and starts at or past the end (after a 416). */
static int read_head(http_state *s, const char *key, const nds_read_options *o,
                     nds_read_result *out) {
    nds_http_response resp;
    int rc = http_send(s, "HEAD", key, NULL, &resp);
    if (!rc) rc = head_result(s, key, o, &resp, out);
    nds_http_response_dispose(&resp);
    return rc;
}

/* The Range header for o, or "" for the whole value (byte_length 0 never gets here). */
static void range_header(const nds_read_options *o, char *buf, size_t cap) {
    buf[0] = '\0';
    if (o->byte_start < 0) /* a suffix: the last -byte_start bytes */
        snprintf(buf, cap, "Range: bytes=-%" PRIu64, (uint64_t)0 - (uint64_t)o->byte_start);
    else if (o->byte_length >= 0 && o->byte_length <= INT64_MAX - o->byte_start)
        snprintf(buf, cap, "Range: bytes=%" PRId64 "-%" PRId64, o->byte_start,
                 o->byte_start + o->byte_length - 1);
    else if (o->byte_start > 0) /* to the end */
        snprintf(buf, cap, "Range: bytes=%" PRId64 "-", o->byte_start);
}

/* Cuts the requested part out of a 200 (whole value) or 206 (ranged) body into out. */
static int take_body(const char *key, const nds_read_options *o, nds_http_response *resp,
                     nds_read_result *out) {
    uint64_t off = 0, len = resp->body.len, total = resp->body.len, a, b;
    char cr[128];
    if (resp->status == 206) {
        if (!nds_http_header(resp, "Content-Range", cr, sizeof cr) ||
            sscanf(cr, "bytes %" SCNu64 "-%" SCNu64 "/%" SCNu64, &a, &b, &total) != 3 || b < a ||
            b >= total || b - a + 1 != resp->body.len ||
            (o->byte_start >= 0 && a != (uint64_t)o->byte_start))
            return nds_err(NDS_EIO, "http: read of %s: partial response with a bad Content-Range",
                           key);
        if (o->byte_start < 0 && o->byte_length >= 0 && (uint64_t)o->byte_length < len)
            len = (uint64_t)o->byte_length;
    } else {
        int rc = nds_byte_range_resolve(o, total, &off, &len); /* the server sent it all */
        if (rc) return nds_err_prefix(rc, "http: read of %s", key);
    }
    out->state = NDS_READ_VALUE;
    out->total_size = total;
    if (len > 0) {
        if (off) memmove(resp->body.data, resp->body.data + off, (size_t)len);
        nds_bytes_take(&out->value, resp->body.data, (size_t)len);
        resp->body = (nds_buf){0};
    }
    return 0;
}

/* What a GET's answer means for the read; *head when a HEAD must settle it (416). */
static int get_result(http_state *s, const char *key, const nds_read_options *o,
                      nds_http_response *resp, nds_read_result *out, bool *head) {
    switch (resp->status) {
    case 200:
    case 206:
        response_generation(resp, response_total(resp), &out->generation);
        return conditions_pass(o, out) ? take_body(key, o, resp, out) : 0;
    case 304:
        out->generation = o->if_not_equal;
        out->state = NDS_READ_UNCHANGED;
        return 0;
    case 404:
    case 410: missing(o, out); return 0;
    case 416: *head = true; return 0;
    default: return http_status_error(s, key, resp);
    }
}

static int read_get(http_state *s, const char *key, const nds_read_options *o, nds_read_result *out,
                    bool *head) {
    char range[80], inm[NDS_GENERATION_MAX + 32];
    range_header(o, range, sizeof range);
    /* If-None-Match only on whole reads: a 304 to a ranged request is as good, but some servers
     * mishandle it. */
    snprintf(inm, sizeof inm, "If-None-Match: %s", o->if_not_equal.value);
    const char *extra = range[0] ? range : is_etag(&o->if_not_equal) ? inm : NULL;
    nds_http_response resp;
    int rc = http_send(s, "GET", key, extra, &resp);
    if (!rc) rc = get_result(s, key, o, &resp, out, head);
    nds_http_response_dispose(&resp);
    return rc;
}

static int http_read_value(void *state, const char *key, const nds_read_options *o,
                           nds_read_result *out) {
    http_state *s = state;
    bool head = o->if_equal.kind == NDS_GEN_ABSENT || o->byte_length == 0;
    if (!head) {
        int rc = read_get(s, key, o, out, &head);
        if (rc || !head) return rc;
    }
    return read_head(s, key, o, out);
}

/* Ranges: one ranged GET from the first range's start to the last one's end, copied into the
 * caller's buffers (one request, whatever the number of ranges). */
static int http_read(void *state, const char *key, const nds_read_options *o,
                     const nds_byte_range *ranges, size_t n, nds_read_result *out) {
    if (n == 0) return http_read_value(state, key, o, out);
    return nds_kv_read_ranges_span(http_read_value, state, key, o, ranges, n, out);
}

static int http_write(void *state, const char *key, const struct iovec *iov, size_t iovcnt,
                      const nds_write_options *o, nds_generation *new_gen) {
    (void)iovcnt, (void)o, (void)new_gen;
    http_state *s = state;
    return nds_err(NDS_EREADONLY, "http: %s of %s/%s: the http kvstore is read-only",
                   iov ? "write" : "delete", s->base_url, key[0] == '/' ? key + 1 : key);
}

static int http_list(void *state, const char *prefix, nds_list_fn fn, void *ctx) {
    http_state *s = state;
    return nds_err(NDS_EUNSUPPORTED,
                   "http: cannot list %s/%s: a web server offers no listing (the http kvstore is "
                   "read-only: open arrays by their metadata)",
                   s->base_url, prefix[0] == '/' ? prefix + 1 : prefix);
}

/* ---- spec ---- */

/* Every spec member the driver knows, space-separated. */
static const char http_members[] = " driver path base_url headers http_request_concurrency "
                                   "http_request_retries http_request_timeout "
                                   "http_max_response_bytes http_request_deadline "
                                   "http_stall_timeout context ";

/* "base_url": http(s)://authority[/base], without user:password, query or fragment. */
static int parse_base_url(http_state *s, json_object *spec) {
    const char *u = NULL;
    int rc = nds_json_get_string(spec, "base_url", false, "http: spec", &u);
    if (rc) return rc;
    const char *host = strncmp(u, "https://", 8) == 0  ? u + 8
                       : strncmp(u, "http://", 7) == 0 ? u + 7
                                                       : NULL;
    size_t authority = host ? strcspn(host, "/") : 0;
    if (!host || authority == 0 || memchr(host, '@', authority) || strpbrk(u, "?# \t\r\n"))
        return nds_err(NDS_EINVAL,
                       "http: spec member \"base_url\" must be an http:// or https:// URL without "
                       "credentials, query or fragment");
    size_t n = strlen(u);
    while (n > 0 && u[n - 1] == '/') n--;
    s->base_url = nds_asprintf("%.*s", (int)n, u);
    return s->base_url ? 0 : nds_err(NDS_ENOMEM, "http: out of memory");
}

/* "headers": ["Name: value", ...] (no line breaks). */
static int parse_headers(http_state *s, json_object *spec) {
    json_object *v;
    if (!json_object_object_get_ex(spec, "headers", &v)) return 0;
    size_t n = json_object_is_type(v, json_type_array) ? json_object_array_length(v) : SIZE_MAX;
    if (n > HTTP_MAX_HEADERS)
        return nds_err(NDS_EINVAL,
                       "http: spec member \"headers\" must be an array of at most %d strings",
                       HTTP_MAX_HEADERS);
    for (size_t i = 0; i < n; i++) {
        json_object *h = json_object_array_get_idx(v, i);
        const char *t = json_object_get_string(h);
        if (!json_object_is_type(h, json_type_string) || !strchr(t, ':') || t[0] == ':' ||
            strpbrk(t, "\r\n"))
            return nds_err(NDS_EINVAL,
                           "http: spec member \"headers\": item %zu is not a \"Name: value\" line",
                           i);
        if (!(s->headers[s->nheaders++] = nds_strdup(t)))
            return nds_err(NDS_ENOMEM, "http: out of memory");
    }
    return 0;
}

/* A duration member (json_util.h): "250ms", "1.5s", "2m" or seconds, into milliseconds. */
static int duration_ms(json_object *v, const char *member, long *out) {
    return nds_json_duration_ms(v, "http", member, out);
}

/* The request options: concurrency, retries ({"max_retries": N}) and the per-request timeout. */
static int parse_requests(http_state *s, json_object *spec, int64_t *concurrency) {
    json_object *v;
    int64_t retries = s->retry.max_attempts - 1;
    int rc = 0;
    if (json_object_object_get_ex(spec, "http_request_concurrency", &v)) {
        bool obj = json_object_is_type(v, json_type_object); /* TensorStore's {"limit": N} form */
        rc = nds_json_get_int(obj ? v : spec, obj ? "limit" : "http_request_concurrency", false, 1,
                              1024, "http: spec member \"http_request_concurrency\"", concurrency);
    }
    if (!rc && json_object_object_get_ex(spec, "http_request_retries", &v))
        rc = nds_json_get_int(v, "max_retries", false, 0, 100,
                              "http: spec member \"http_request_retries\"", &retries);
    s->retry.max_attempts = (int)retries + 1;
    if (!rc && json_object_object_get_ex(spec, "http_request_timeout", &v))
        rc = duration_ms(v, "http_request_timeout", &s->timeout_ms);
    return rc;
}

static void http_close(void *state) {
    http_state *s = state;
    if (!s) return;
    nds_http_client_free(s->http);
    for (size_t i = 0; i < s->nheaders; i++) free(s->headers[i]);
    free(s->base_url);
    free(s);
}

static int http_open(void **state, const json_object *cspec) {
    json_object *spec = (json_object *)cspec;
    json_object_object_foreach(spec, key, val) {
        (void)val;
        char word[80];
        snprintf(word, sizeof word, " %.70s ", key);
        if (strchr(key, ' ') || !strstr(http_members, word))
            return nds_err(NDS_EINVAL, "http: unknown spec member \"%.60s\"", key);
    }
    http_state *s = calloc(1, sizeof *s);
    if (!s) return nds_err(NDS_ENOMEM, "http: out of memory");
    s->retry = (nds_http_retry)NDS_HTTP_RETRY_DEFAULT;
    int64_t concurrency = 32;
    int rc = parse_base_url(s, spec);
    if (!rc) rc = parse_headers(s, spec);
    if (!rc) rc = parse_requests(s, spec, &concurrency);
    nds_http_limits limits;
    if (!rc) rc = nds_http_limits_init(&limits, "http_");
    if (!rc) rc = nds_http_limits_parse(&limits, spec, "http");
    if (!rc) rc = nds_http_client_new(&s->http, (int)concurrency);
    if (!rc) nds_http_client_set_limits(s->http, &limits);
    if (rc) {
        http_close(s);
        return rc;
    }
    *state = s;
    return 0;
}

static int hex_digit(char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* Decodes %XX escapes of a URL path (a key is kept unescaped and escaped again per request). %00
 * and malformed escapes stay as they are. */
static char *unescape_path(const char *p) {
    char *out = malloc(strlen(p) + 1), *q = out;
    if (!out) return NULL;
    for (; *p; p++) {
        int hi = p[0] == '%' ? hex_digit(p[1]) : -1, lo = hi >= 0 ? hex_digit(p[2]) : -1;
        if (lo >= 0 && (hi | lo)) {
            *q++ = (char)(hi << 4 | lo);
            p += 2;
        } else {
            *q++ = *p;
        }
    }
    *q = '\0';
    return out;
}

/* "host[:port]/a/b/" after the scheme: base_url scheme://host[:port], path "/a/b/". */
static int parse_url_scheme(const char *scheme, const char *rest, json_object *spec) {
    size_t authority = strcspn(rest, "/");
    if (authority == 0 || memchr(rest, '@', authority) || strpbrk(rest, "?# \t\r\n"))
        return nds_err(
            NDS_EINVAL,
            "http: \"%s://%.200s\" needs a host, and takes no credentials, query or fragment",
            scheme, rest);
    char *base = nds_asprintf("%s://%.*s", scheme, (int)authority, rest),
         *path = unescape_path(rest + authority);
    if (base && path) {
        json_object_object_add(spec, "driver", json_object_new_string("http"));
        json_object_object_add(spec, "base_url", json_object_new_string(base));
        json_object_object_add(spec, "path", json_object_new_string(path));
    }
    int rc = base && path ? 0 : nds_err(NDS_ENOMEM, "http: out of memory");
    free(base);
    free(path);
    return rc;
}

static int http_parse_url(const char *rest, json_object *spec) {
    return parse_url_scheme("http", rest, spec);
}
static int https_parse_url(const char *rest, json_object *spec) {
    return parse_url_scheme("https", rest, spec);
}

static void http_url_base(void *state, char *buf, size_t cap) {
    snprintf(buf, cap, "%s", ((http_state *)state)->base_url);
}

/* A printed spec never carries the extra headers: they may hold credentials. */
static int http_to_json(void *state, json_object *spec) {
    (void)state;
    json_object_object_del(spec, "headers");
    return 0;
}

#define HTTP_DRIVER(sym, name_, scheme, parse)                                                     \
    const nds_kv_driver sym = {                                                                    \
        .version = NDS_KV_DRIVER_VERSION,                                                          \
        .name = name_,                                                                             \
        .url_scheme = scheme,                                                                      \
        .capabilities = NDS_KV_CAP_READ_ONLY | NDS_KV_CAP_BYTE_RANGE,                              \
        .parse_url = parse,                                                                        \
        .open = http_open,                                                                         \
        .close = http_close,                                                                       \
        .url_base = http_url_base,                                                                 \
        .to_json = http_to_json,                                                                   \
        .read = http_read,                                                                         \
        .write = http_write,                                                                       \
        .list = http_list,                                                                         \
        .delete_range = NULL,                                                                      \
        .commit = NULL,                                                                            \
    }

/* One driver; two vtables because the registry maps one URL scheme to one driver. The "https" one
 * exists for https:// URLs: its parse_url writes "driver": "http", so specs always name "http". */
HTTP_DRIVER(nds_kv_driver_http, "http", "http", http_parse_url);
HTTP_DRIVER(nds_kv_driver_https, "https", "https", https_parse_url);
