/* The "s3" kvstore driver: objects of one bucket of an S3-compatible server (URL
 * s3://bucket/prefix/).
 *
 * Implements: GET (byte ranges, suffix ranges, If-None-Match revalidation -> UNCHANGED), HEAD, PUT
 * (multipart above a threshold, parts sent concurrently, aborted on failure), DELETE, ListObjectsV2
 * with pagination, delete_range (list + concurrent deletes), SigV4 signing (aws_sigv4.c),
 * path-style and virtual-hosted addressing, retries with backoff (http_multi.c). Generation = ETag
 * without quotes; absent = ABSENT. Conditional writes go through s3_cond.c, which decides per
 * endpoint whether the server's If-Match can be trusted, whether only If-None-Match: * can (then
 * every mutation runs under a lease object), or nothing (conditional writes refused unless
 * "conditional_writes": "off"). Omits: a multi-key commit (S3 has none), requester-pays, SSE-C,
 * presigned URLs.
 *
 * Threading: internally synchronised (the store is immutable after open but for the
 * conditional-write decision, set once under a mutex; the HTTP client takes any number of callers).
 * Ownership: read results own a malloc'd copy of the response body.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "s3_internal.h"
#include "s3_xml.h"
#include "aws_sigv4.h"
#include "internal/error.h"
#include "internal/json_util.h"
#include "internal/util.h"

#define DEFAULT_MULTIPART_THRESHOLD (64ull << 20)
#define DEFAULT_PART_SIZE (16ull << 20)
#define MIN_PART_SIZE (5ull << 20)
#define MAX_PARTS 10000u
#define RANGE_NOT_SATISFIABLE 1 /* read_once's signal: a 416, settled by a HEAD */

/* ---- spec and URL ---- */

static int s3_parse_url(const char *rest, struct json_object *spec) {
    const char *slash = strchr(rest, '/');
    size_t blen = slash ? (size_t)(slash - rest) : strlen(rest);
    if (blen == 0) return nds_err(NDS_EINVAL, "s3: url needs a bucket: s3://bucket/path/");
    json_object *b = json_object_new_string_len(rest, (int)blen);
    json_object *p = json_object_new_string(slash ? slash + 1 : "");
    if (!b || !p || json_object_object_add(spec, "bucket", b) != 0) {
        json_object_put(b);
        json_object_put(p);
        return nds_err(NDS_ENOMEM, "s3: out of memory parsing url");
    }
    if (json_object_object_add(spec, "path", p) != 0)
        return nds_err(NDS_ENOMEM, "s3: out of memory parsing url");
    return 0;
}

static const char *const known_members[] = {"driver",
                                            "path",
                                            "bucket",
                                            "endpoint",
                                            "aws_region",
                                            "addressing_style",
                                            "aws_credentials",
                                            "conditional_writes",
                                            "concurrency",
                                            "multipart_threshold",
                                            "multipart_part_size",
                                            "lease_seconds",
                                            "lease_wait_seconds",
                                            "max_attempts",
                                            "request_timeout_seconds",
                                            "max_response_bytes",
                                            "request_deadline",
                                            "stall_timeout",
                                            "unsigned_payload",
                                            "conditional_writes_detected",
                                            "conditional_writes_reason",
                                            "context"};

static int check_members(const json_object *spec) {
    json_object_object_foreach((json_object *)spec, k, v) {
        (void)v;
        bool ok = false;
        for (size_t i = 0; i < sizeof known_members / sizeof known_members[0] && !ok; i++)
            ok = strcmp(k, known_members[i]) == 0;
        if (!ok)
            return nds_err(NDS_EINVAL, "s3 spec: unknown member \"%s\"%s", k,
                           strstr(k, "key") || strstr(k, "secret") || strstr(k, "token")
                               ? " (credentials are never accepted in a spec: use the environment "
                                 "or ~/.aws/credentials)"
                               : "");
    }
    return 0;
}

static bool valid_bucket(const char *b) {
    size_t n = strlen(b);
    if (n < 1 || n > 255) return false;
    for (const char *p = b; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '-' || *p == '_'))
            return false;
    return true;
}

/* Sets endpoint, scheme_host, host and base_path from the spec. */
static int s3_addressing(s3_store *s, const json_object *spec) {
    const char *endpoint = NULL, *style = NULL;
    int rc = nds_json_get_string(spec, "endpoint", true, "s3 spec", &endpoint);
    if (!rc) rc = nds_json_get_string(spec, "addressing_style", true, "s3 spec", &style);
    if (rc) return s3_spec_error(rc);
    if (style && strcmp(style, "path") != 0 && strcmp(style, "virtual") != 0)
        return nds_err(NDS_EINVAL,
                       "s3 spec: addressing_style must be \"path\" or \"virtual\", not \"%s\"",
                       style);
    bool from_spec = endpoint != NULL;
    if (!endpoint) endpoint = getenv("AWS_ENDPOINT_URL_S3");
    if (!endpoint || !*endpoint) endpoint = getenv("AWS_ENDPOINT_URL");
    if (endpoint && !*endpoint) endpoint = NULL;
    if (endpoint) {
        const char *hp = strstr(endpoint, "://");
        if (!hp || (strncmp(endpoint, "http://", 7) != 0 && strncmp(endpoint, "https://", 8) != 0))
            return nds_err(NDS_EINVAL, "s3 spec: endpoint must start with http:// or https://");
        if (strchr(hp + 3, '@'))
            return nds_err(NDS_EINVAL, "s3 spec: endpoint may not hold user:password (credentials "
                                       "come from the environment)");
        s->endpoint_given = from_spec ? nds_strdup(endpoint) : NULL;
        s->endpoint = nds_strdup(endpoint);
    } else {
        s->endpoint = nds_asprintf("https://s3.%s.amazonaws.com", s->region);
    }
    if (!s->endpoint || (from_spec && !s->endpoint_given))
        return nds_err(NDS_ENOMEM, "s3: out of memory");
    size_t n = strlen(s->endpoint);
    while (n > 0 && s->endpoint[n - 1] == '/') s->endpoint[--n] = '\0';
    const char *scheme_end = strstr(s->endpoint, "://") + 3;
    if (strchr(scheme_end, '/') || !*scheme_end)
        return nds_err(NDS_EINVAL,
                       "s3 spec: endpoint \"%s\" must be scheme://host[:port] without a path",
                       s->endpoint);
    /* virtual-hosted by default on AWS (path-style is deprecated there), path-style elsewhere;
     * dotted bucket names stay path-style on https, where they would break the certificate's
     * wildcard */
    s->virtual_hosted =
        style ? strcmp(style, "virtual") == 0
              : !endpoint && !(strchr(s->bucket, '.') && strncmp(s->endpoint, "https", 5) == 0);
    size_t slen = (size_t)(scheme_end - s->endpoint);
    if (s->virtual_hosted) {
        s->host = nds_asprintf("%s.%s", s->bucket, scheme_end);
        s->scheme_host = nds_asprintf("%.*s%s", (int)slen, s->endpoint, s->host ? s->host : "");
        s->base_path = nds_strdup("");
    } else {
        s->host = nds_strdup(scheme_end);
        s->scheme_host = nds_strdup(s->endpoint);
        s->base_path = nds_asprintf("/%s", s->bucket);
    }
    return s->host && s->scheme_host && s->base_path ? 0 : nds_err(NDS_ENOMEM, "s3: out of memory");
}

static int get_cond_mode(const json_object *spec, int *out) {
    const char *m = "auto";
    int rc = nds_json_get_string(spec, "conditional_writes", true, "s3 spec", &m);
    if (rc) return s3_spec_error(rc);
    if (strcmp(m, "auto") == 0)
        *out = S3_COND_UNKNOWN;
    else if (strcmp(m, "on") == 0)
        *out = S3_COND_FULL;
    else if (strcmp(m, "create_only") == 0)
        *out = S3_COND_LEASE;
    else if (strcmp(m, "off") == 0)
        *out = S3_COND_OFF;
    else
        return nds_err(
            NDS_EINVAL,
            "s3 spec: conditional_writes must be auto, on, create_only or off, not \"%s\"", m);
    return 0;
}

/* Numeric options with their bounds. */
static int s3_options(s3_store *s, const json_object *spec) {
    int64_t conc = 32, thr = (int64_t)DEFAULT_MULTIPART_THRESHOLD,
            part = (int64_t)DEFAULT_PART_SIZE;
    int64_t lease = 30, wait = -1, attempts = 8, timeout = 60;
    const char *doc = "s3 spec";
    int rc = nds_json_get_int(spec, "concurrency", true, 1, 1024, doc, &conc);
    if (!rc)
        rc = nds_json_get_int(spec, "multipart_threshold", true, (int64_t)MIN_PART_SIZE, 5ll << 30,
                              doc, &thr);
    if (!rc)
        rc = nds_json_get_int(spec, "multipart_part_size", true, (int64_t)MIN_PART_SIZE, 5ll << 30,
                              doc, &part);
    if (!rc) rc = nds_json_get_int(spec, "lease_seconds", true, 2, 3600, doc, &lease);
    if (!rc) rc = nds_json_get_int(spec, "lease_wait_seconds", true, 1, 86400, doc, &wait);
    if (!rc) rc = nds_json_get_int(spec, "max_attempts", true, 1, 100, doc, &attempts);
    if (!rc) rc = nds_json_get_int(spec, "request_timeout_seconds", true, 1, 86400, doc, &timeout);
    if (!rc) rc = nds_json_get_bool(spec, "unsigned_payload", true, doc, &s->unsigned_payload);
    if (rc) return s3_spec_error(rc);
    if ((rc = nds_http_limits_init(&s->limits, "")) ||
        (rc = nds_http_limits_parse(&s->limits, spec, "s3")))
        return rc;
    s->concurrency = (int)conc;
    s->multipart_threshold = (uint64_t)thr;
    s->part_size = (uint64_t)part;
    s->lease_ms = (long)lease * 1000;
    s->lease_wait_ms =
        wait > 0 ? (long)wait * 1000 : 2 * s->lease_ms + 10000; /* outlive one dead holder */
    s->retry = (nds_http_retry)NDS_HTTP_RETRY_DEFAULT;
    s->retry.max_attempts = (int)attempts;
    s->timeout_ms = (long)timeout * 1000;
    return 0;
}

static void s3_close(void *state) {
    s3_store *s = state;
    if (!s) return;
    nds_http_client_free(s->http);
    s3_creds_free(&s->creds);
    free(s->bucket);
    free(s->endpoint);
    free(s->endpoint_given);
    free(s->scheme_host);
    free(s->host);
    free(s->base_path);
    free(s->region);
    pthread_mutex_destroy(&s->probe_mu);
    free(s);
}

static int s3_open_fill(s3_store *s, const json_object *spec) {
    const char *bucket = NULL, *region = NULL;
    int rc = check_members(spec);
    if (!rc) rc = nds_json_get_string(spec, "bucket", false, "s3 spec", &bucket);
    if (!rc) rc = nds_json_get_string(spec, "aws_region", true, "s3 spec", &region);
    if (rc) return s3_spec_error(rc);
    if (!valid_bucket(bucket))
        return nds_err(NDS_EINVAL, "s3 spec: bad bucket name \"%.80s\"", bucket);
    if (!region) region = getenv("AWS_REGION");
    if (!region || !*region) region = getenv("AWS_DEFAULT_REGION");
    if (!region || !*region) region = "us-east-1";
    s->bucket = nds_strdup(bucket);
    s->region = nds_strdup(region);
    if (!s->bucket || !s->region) return nds_err(NDS_ENOMEM, "s3: out of memory");
    if ((rc = s3_options(s, spec)) || (rc = get_cond_mode(spec, &s->cond_requested)) ||
        (rc = s3_addressing(s, spec)))
        return rc;
    json_object *creds = NULL;
    json_object_object_get_ex(spec, "aws_credentials", &creds);
    if ((rc = s3_creds_load(&s->creds, creds))) return rc;
    if ((rc = nds_http_client_new(&s->http, s->concurrency))) return rc;
    nds_http_client_set_limits(s->http, &s->limits);
    return 0;
}

static int s3_open(void **state, const struct json_object *spec) {
    s3_store *s = calloc(1, sizeof *s);
    if (!s) return nds_err(NDS_ENOMEM, "s3: out of memory opening kvstore");
    pthread_mutex_init(&s->probe_mu, NULL);
    int rc = s3_open_fill(s, spec);
    if (rc) {
        s3_close(s);
        return rc;
    }
    *state = s;
    return 0;
}

static void s3_url_base(void *state, char *buf, size_t cap) {
    s3_store *s = state;
    snprintf(buf, cap, "s3://%s/", s->bucket);
}

static int s3_to_json(void *state, struct json_object *spec) {
    s3_store *s = state;
    s3_cond_decision d = {0};
    pthread_mutex_lock(&s->probe_mu);
    if (atomic_load(&s->cond_ready)) d = s->decision;
    pthread_mutex_unlock(&s->probe_mu);
    /* where the store really is, so a printed spec reopens it without the environment */
    if (!json_object_object_get_ex(spec, "endpoint", NULL))
        json_object_object_add(spec, "endpoint", json_object_new_string(s->endpoint));
    if (!json_object_object_get_ex(spec, "aws_region", NULL))
        json_object_object_add(spec, "aws_region", json_object_new_string(s->region));
    json_object_object_add(spec, "conditional_writes_detected",
                           json_object_new_string(s3_cond_mode_name(d.mode)));
    if (d.reason[0])
        json_object_object_add(spec, "conditional_writes_reason", json_object_new_string(d.reason));
    else
        json_object_object_del(spec, "conditional_writes_reason");
    return 0;
}

static int check_key(const char *key, const char *op) {
    if (!key[0]) return nds_err(NDS_EINVAL, "s3: %s: empty key", op);
    if (strlen(key) > 1024) return nds_err(NDS_EINVAL, "s3: %s: key longer than 1024 bytes", op);
    if (s3_reserved_key(key))
        return nds_err(
            NDS_EINVAL,
            "s3: %s %s: names containing \".__lock\" or \".__ndstore_probe.\" are reserved", op,
            key);
    return 0;
}

/* ---- read ---- */

static nds_read_state read_state(const nds_read_options *o, const nds_generation *cur) {
    if (o->if_equal.kind != NDS_GEN_NONE && !nds_generation_equal(&o->if_equal, cur))
        return NDS_READ_ABORTED;
    if (nds_generation_equal(&o->if_not_equal, cur)) return NDS_READ_UNCHANGED;
    return cur->kind == NDS_GEN_ABSENT ? NDS_READ_MISSING : NDS_READ_VALUE;
}

/* The Range header for o, or "" when the whole value is wanted. */
static void range_header(const nds_read_options *o, char *buf, size_t cap) {
    buf[0] = '\0';
    if (o->byte_start < 0)
        snprintf(buf, cap, "Range: bytes=-%llu", (unsigned long long)(-(o->byte_start + 1)) + 1);
    else if (o->byte_length > 0)
        snprintf(buf, cap, "Range: bytes=%lld-%lld", (long long)o->byte_start,
                 (long long)(o->byte_start + o->byte_length - 1));
    else if (o->byte_start > 0 && o->byte_length < 0)
        snprintf(buf, cap, "Range: bytes=%lld-", (long long)o->byte_start);
}

/* Total size from "Content-Range: bytes a-b/total" (UINT64_MAX when unknown). */
static uint64_t content_range_total(const nds_http_response *resp) {
    char v[128];
    if (!nds_http_header(resp, "content-range", v, sizeof v)) return UINT64_MAX;
    const char *slash = strchr(v, '/');
    return slash && slash[1] != '*' ? strtoull(slash + 1, NULL, 10) : UINT64_MAX;
}

/* Copies the part of the response body that o asks for into out->value. */
static int take_body(const nds_http_response *resp, const nds_read_options *o, const char *key,
                     nds_read_result *out) {
    const uint8_t *p = resp->body.data;
    uint64_t off = 0, len = resp->body.len;
    if (resp->status == 206) {
        out->total_size = content_range_total(resp);
        if (o->byte_start < 0 && o->byte_length >= 0 && (uint64_t)o->byte_length < len)
            len = (uint64_t)o->byte_length;
    } else { /* 200: the whole value (a server may ignore Range): slice it here */
        out->total_size = resp->body.len;
        if (nds_byte_range_resolve(o, resp->body.len, &off, &len) != 0)
            return nds_err_prefix(NDS_ERANGE, "s3: read %s", key);
    }
    if (out->total_size == UINT64_MAX) out->total_size = len;
    return nds_bytes_copy(&out->value, p ? p + off : (const uint8_t *)"", (size_t)len)
               ? nds_err(NDS_ENOMEM, "s3: out of memory")
               : 0;
}

/* A read that returns no bytes (length 0, or a 416): HEAD, then the range decides. */
static int read_empty(s3_store *s, const char *key, const nds_read_options *o,
                      nds_read_result *out) {
    nds_http_response resp;
    int rc = s3_send(s, &(s3_call){.method = "HEAD", .key = key}, NULL, 0, &resp);
    if (rc == 0) {
        if (resp.status == 200)
            s3_generation(&resp, &out->generation);
        else if (s3_missing_key(&resp))
            s3_gen_absent(&out->generation);
        else
            rc = s3_status_error(s, &resp, "HEAD", key);
    }
    if (rc == 0 && (out->state = read_state(o, &out->generation)) == NDS_READ_VALUE) {
        char cl[32] = "0";
        nds_http_header(&resp, "content-length", cl, sizeof cl);
        uint64_t total = strtoull(cl, NULL, 10), off, len;
        out->total_size = total;
        if (nds_byte_range_resolve(o, total, &off, &len) != 0)
            rc = nds_err_prefix(NDS_ERANGE, "s3: read %s", key);
        else if (len > 0 && o->byte_length != 0)
            rc = NDS_ECONFLICT; /* changed since the GET: read again */
        else
            rc = nds_bytes_copy(&out->value, "", 0);
    }
    nds_http_response_dispose(&resp);
    return rc;
}

static int read_once(s3_store *s, const char *key, const nds_read_options *o,
                     nds_read_result *out) {
    char range[96], inm[NDS_GENERATION_MAX + 32];
    const char *hdrs[2];
    size_t nh = 0;
    range_header(o, range, sizeof range);
    if (range[0]) hdrs[nh++] = range;
    if (o->if_not_equal.kind == NDS_GEN_VALUE) {
        char etag[NDS_GENERATION_MAX];
        s3_gen_etag(&o->if_not_equal, etag, sizeof etag);
        snprintf(inm, sizeof inm, "If-None-Match: \"%s\"", etag);
        hdrs[nh++] = inm;
    }
    nds_http_response resp;
    s3_call get = {.method = "GET", .key = key, .extra = hdrs, .nextra = nh};
    int rc = s3_send(s, &get, NULL, 0, &resp);
    if (rc == 0) {
        if (resp.status == 200 || resp.status == 206)
            s3_generation(&resp, &out->generation);
        else if (resp.status == 304)
            out->generation = o->if_not_equal;
        else if (s3_missing_key(&resp))
            s3_gen_absent(&out->generation);
        else if (resp.status == 416)
            rc = RANGE_NOT_SATISFIABLE;
        else
            rc = s3_status_error(s, &resp, "GET", key);
    }
    if (rc == 0 && (out->state = read_state(o, &out->generation)) == NDS_READ_VALUE)
        rc = take_body(&resp, o, key, out);
    nds_http_response_dispose(&resp);
    return rc;
}

static int s3_read_value(void *state, const char *key, const nds_read_options *o,
                         nds_read_result *out) {
    s3_store *s = state;
    memset(out, 0, sizeof *out);
    int rc = check_key(key, "read");
    for (int attempt = 0; rc == 0 && attempt < 4; attempt++) {
        rc = o->byte_length == 0 ? read_empty(s, key, o, out) : read_once(s, key, o, out);
        if (rc == RANGE_NOT_SATISFIABLE) rc = read_empty(s, key, o, out);
        if (rc != NDS_ECONFLICT) return rc;
        nds_read_result_dispose(out);
        memset(out, 0, sizeof *out);
        rc = 0;
    }
    return rc ? rc : nds_err(NDS_EIO, "s3: read %s: the object kept changing", key);
}

/* ---- list and delete_range ---- */

/* One ListObjectsV2 page (at most NDS_HTTP_LISTING_MAX bytes) after token (NULL: the first). */
static int list_page(s3_store *s, const char *eprefix, const char *prefix, const char *token,
                     nds_s3_list_page *page) {
    char *etok = token ? nds_http_escape(token, false) : NULL;
    char *q = nds_asprintf("list-type=2&encoding-type=url&prefix=%s%s%s", eprefix,
                           etok ? "&continuation-token=" : "", etok ? etok : "");
    free(etok);
    s3_req r;
    nds_http_response resp = {0};
    int rc = q ? s3_req_build(s, &r, &(s3_call){.method = "GET", .query = q})
               : nds_err(NDS_ENOMEM, "s3: out of memory");
    free(q);
    if (rc) return rc;
    r.http.max_response_bytes = NDS_HTTP_LISTING_MAX;
    rc = nds_http_perform(s->http, &r.http, &s->retry, &resp);
    s3_req_dispose(&r);
    if (rc)
        rc = nds_err_prefix(rc, "s3: list s3://%s/%s", s->bucket, prefix);
    else if (resp.status != 200)
        rc = s3_status_error(s, &resp, "list", prefix);
    else
        rc = nds_s3_parse_list((const char *)resp.body.data, resp.body.len, true, page);
    nds_http_response_dispose(&resp);
    return rc;
}

/* Calls fn for every key under prefix (reserved keys too when raw). A server whose pages do not
 * move forward (nds_list_progress) is an error, not an endless loop. */
static int list_keys(s3_store *s, const char *prefix, bool raw, nds_list_fn fn, void *ctx) {
    char *eprefix = nds_http_escape(prefix, false);
    char *what = nds_asprintf("s3: list s3://%s/%s", s->bucket, prefix);
    nds_list_progress progress = {0};
    int rc = eprefix && what ? 0 : nds_err(NDS_ENOMEM, "s3: out of memory");
    for (bool more = true; rc == 0 && more;) {
        nds_s3_list_page page;
        if ((rc = list_page(s, eprefix, prefix, progress.last_token, &page))) break;
        for (size_t i = 0; i < page.n && rc == 0; i++) {
            rc = nds_list_progress_key(&progress, page.keys[i], what);
            if (!rc && (raw || !s3_reserved_key(page.keys[i])))
                rc = fn(ctx, page.keys[i], page.sizes[i]);
        }
        more = page.truncated;
        const char *next = more ? page.next_token : NULL;
        if (!rc) rc = nds_list_progress_page(&progress, page.n, next, what);
        nds_s3_list_page_dispose(&page);
    }
    nds_list_progress_dispose(&progress);
    free(what);
    free(eprefix);
    return rc;
}

static int s3_list(void *state, const char *prefix, nds_list_fn fn, void *ctx) {
    return list_keys(state, prefix, false, fn, ctx);
}

typedef struct key_vec {
    const char *begin, *end;
    char **keys;
    size_t n, cap;
} key_vec;

static int collect_in_range(void *ctx, const char *key, uint64_t size) {
    (void)size;
    key_vec *v = ctx;
    if (strcmp(key, v->begin) < 0 || (v->end[0] && strcmp(key, v->end) >= 0)) return 0;
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        char **k = realloc(v->keys, cap * sizeof *k);
        if (!k) return nds_err(NDS_ENOMEM, "s3: out of memory");
        v->keys = k;
        v->cap = cap;
    }
    return (v->keys[v->n] = nds_strdup(key)) ? (v->n++, 0)
                                             : nds_err(NDS_ENOMEM, "s3: out of memory");
}

/* Deletes keys[0..n) concurrently, at most the store's concurrency per batch. */
static int delete_batch(s3_store *s, char **keys, size_t n) {
    s3_req *reqs = calloc(n, sizeof *reqs);
    nds_http_request *hr = calloc(n, sizeof *hr);
    nds_http_response *resps = calloc(n, sizeof *resps);
    int *rcs = calloc(n, sizeof *rcs),
        rc = reqs && hr && resps && rcs ? 0 : nds_err(NDS_ENOMEM, "s3: out of memory");
    size_t built = 0;
    for (; rc == 0 && built < n; built++) {
        rc = s3_req_build(s, &reqs[built], &(s3_call){.method = "DELETE", .key = keys[built]});
        if (rc == 0) hr[built] = reqs[built].http;
    }
    if (rc == 0) nds_http_perform_many(s->http, hr, &s->retry, resps, rcs, n);
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (rcs[i])
            rc = nds_err_prefix(rcs[i], "s3: delete s3://%s/%s", s->bucket, keys[i]);
        else if (resps[i].status >= 300 && resps[i].status != 404)
            rc = s3_status_error(s, &resps[i], "delete", keys[i]);
    }
    for (size_t i = 0; i < built && reqs; i++) s3_req_dispose(&reqs[i]);
    for (size_t i = 0; i < n && resps; i++) nds_http_response_dispose(&resps[i]);
    free(reqs);
    free(hr);
    free(resps);
    free(rcs);
    return rc;
}

/* Lists the range (lease and probe objects included, so nothing of ours is left behind) and deletes
 * every key concurrently. Not isolated from concurrent writers, like the core's fallback. */
static int s3_delete_range(void *state, const char *begin, const char *end) {
    s3_store *s = state;
    size_t cp = 0;
    if (end[0]) {
        if (strcmp(begin, end) >= 0) return 0;
        while (begin[cp] && begin[cp] == end[cp]) cp++;
    }
    char *prefix = malloc(cp + 1);
    if (!prefix) return nds_err(NDS_ENOMEM, "s3: out of memory");
    memcpy(prefix, begin, cp);
    prefix[cp] = '\0';
    key_vec v = {begin, end, NULL, 0, 0};
    int rc = list_keys(s, prefix, true, collect_in_range, &v);
    for (size_t i = 0; rc == 0 && i < v.n; i += (size_t)s->concurrency)
        rc = delete_batch(s, v.keys + i,
                          v.n - i < (size_t)s->concurrency ? v.n - i : (size_t)s->concurrency);
    for (size_t i = 0; i < v.n; i++) free(v.keys[i]);
    free(v.keys);
    free(prefix);
    return rc;
}

/* ---- write: s3_write.c ---- */

/* Ranges: one ranged GET from the first range's start to the last one's end, copied into the
 * caller's buffers (one request, whatever the number of ranges). */
static int s3_read(void *state, const char *key, const nds_read_options *o,
                   const nds_byte_range *ranges, size_t n, nds_read_result *out) {
    if (n == 0) return s3_read_value(state, key, o, out);
    return nds_kv_read_ranges_span(s3_read_value, state, key, o, ranges, n, out);
}

/* The pieces are gathered into one body (a PUT needs its length and checksum up front). */
static int s3_write_entry(void *state, const char *key, const struct iovec *iov, size_t iovcnt,
                          const nds_write_options *opts, nds_generation *new_gen) {
    int rc = check_key(key, iov ? "write" : "delete");
    return rc ? rc : nds_kv_write_gathered(state, key, iov, iovcnt, opts, new_gen, s3_write);
}

static int s3_write_hint_entry(void *state, const char *key, const uint8_t *data, size_t len) {
    int rc = check_key(key, "write");
    return rc ? rc : s3_write_hint(state, key, data, len);
}

/* What this instance's writes are, once known: the decided conditional-write mode. "off" is known
 * at open; "auto" (and "on", "create_only") after the probe, which detect_key runs now. Until then
 * the static bits stand. */
static int s3_instance_caps(void *state, const char *detect_key, uint32_t *caps, char *why,
                            size_t cap) {
    s3_store *s = state;
    s3_cond_decision d = {0};
    if (detect_key || s->cond_requested == S3_COND_OFF) { /* "off" decides without a request */
        int rc = s3_cond_decide(s, detect_key ? detect_key : "", &d);
        if (rc) return rc;
    } else {
        pthread_mutex_lock(&s->probe_mu);
        if (atomic_load(&s->cond_ready)) d = s->decision;
        pthread_mutex_unlock(&s->probe_mu);
    }
    bool atomic = d.mode == S3_COND_UNKNOWN || d.mode == S3_COND_FULL || d.mode == S3_COND_LEASE;
    *caps = NDS_KV_CAP_BYTE_RANGE | (atomic ? NDS_KV_CAP_ATOMIC_CONDITIONAL_WRITE : 0);
    if (!why || !cap) return 0;
    if (d.mode == S3_COND_OFF)
        snprintf(why, cap,
                 "\"conditional_writes\": \"off\" (conditions checked by a HEAD, not atomic): "
                 "remove it or set \"auto\" (the default), which finds what %s supports",
                 s->endpoint);
    else if (d.mode == S3_COND_NONE)
        snprintf(why, cap,
                 "%s does not provide create-only writes (If-None-Match: *): %s; use a server "
                 "that does (AWS S3, Ceph RGW, MinIO), GCS or a file system",
                 s->endpoint, d.reason);
    else
        snprintf(why, cap, "conditional writes \"%s\"%s%s", s3_cond_mode_name(d.mode),
                 d.reason[0] ? ": " : "", d.reason);
    return 0;
}

const nds_kv_driver nds_kv_driver_s3 = {
    .version = NDS_KV_DRIVER_VERSION,
    .name = "s3",
    .url_scheme = "s3",
    .capabilities = NDS_KV_CAP_ATOMIC_CONDITIONAL_WRITE | NDS_KV_CAP_BYTE_RANGE,
    .parse_url = s3_parse_url,
    .open = s3_open,
    .close = s3_close,
    .url_base = s3_url_base,
    .to_json = s3_to_json,
    .read = s3_read,
    .write = s3_write_entry,
    .list = s3_list,
    .delete_range = s3_delete_range,
    .commit = NULL,
    .instance_capabilities = s3_instance_caps,
    .write_hint = s3_write_hint_entry,
};
