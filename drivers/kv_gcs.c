/* The "gcs" kvstore driver: Google Cloud Storage through its JSON API (gs://bucket/prefix/).
 *
 * Implements reads (alt=media with Range; object metadata for existence checks and zero-length
 * reads), writes (media upload; multipart upload carrying a write id for conditional writes),
 * deletes, listing with pagination and a concurrent delete_range. Generations are object
 * generations; conditions map to ifGenerationMatch (0 = must not exist) and ifGenerationNotMatch,
 * which GCS checks atomically. Omits resumable uploads (a value is sent in one request), object
 * versioning, and a multi-key commit.
 *
 * Retries (429, 5xx, resets, timeouts) happen in the shared HTTP layer. A retried conditional write
 * can meet its own earlier try: the write id in the object's metadata tells "my write landed"
 * (success) from "another writer's" (then the outcome of the lost try is unknown, and the write
 * fails with NDS_EIO saying so).
 *
 * Threading: an instance is internally synchronised (the HTTP client and the auth object are; the
 * rest is immutable after open). Credentials and tokens never appear in errors or in printed specs:
 * the spec names a key file by path only, and tokens live in gcs_auth. The spec's members are
 * parsed in gcs_spec.c (gcs_internal.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <openssl/rand.h>

#include "ndstore/sys/kv_driver.h"
#include "gcs_auth.h"
#include "gcs_internal.h"
#include "http_multi.h"
#include "internal/error.h"
#include "internal/json_util.h"
#include "internal/util.h"

#define GCS_WRITE_ID "ndsWriteId"
#define GCS_DELETE_BATCH 64

/* What an object's metadata says. */
typedef struct gcs_meta {
    bool found;
    nds_generation gen;
    uint64_t size;
    char write_id[40];
} gcs_meta;

/* ---- requests ---- */

/* The URL of the bucket's object collection (key NULL) or of one object, with a query (may be "").
 */
static char *gcs_url(const gcs_state *s, bool upload, const char *key, const char *query) {
    char *ek = key ? nds_http_escape(key, false) : NULL;
    if (key && !ek) return NULL;
    const char *sep = query[0] || s->user_project ? "?" : "";
    char *url = nds_asprintf("%s%s/storage/v1/b/%s/o%s%s%s%s%s%s", s->endpoint,
                             upload ? "/upload" : "", s->bucket, key ? "/" : "", key ? ek : "", sep,
                             query, query[0] && s->user_project ? "&" : "",
                             s->user_project ? s->user_project : "");
    free(ek);
    return url;
}

/* Sends one request with the Authorization header (retrying once with a fresh token after a 401).
 */
static int gcs_send(gcs_state *s, nds_http_request *req, nds_http_response *resp) {
    const char *hdrs[8];
    size_t n0 = req->nheaders;
    memset(resp, 0, sizeof *resp);
    for (int pass = 0;; pass++) {
        char *auth = NULL;
        int rc = nds_gcs_auth_header(s->auth, &auth);
        if (rc) return rc;
        size_t n = 0;
        if (auth) hdrs[n++] = auth;
        for (size_t i = 0; i < n0 && n < 8; i++) hdrs[n++] = req->headers[i];
        nds_http_request r = *req;
        r.headers = hdrs;
        r.nheaders = n;
        r.timeout_ms = s->timeout_ms;
        rc = nds_http_perform(s->http, &r, &s->retry, resp);
        nds_gcs_auth_header_free(auth);
        if (rc || resp->status != 401 || !auth || pass > 0) return rc;
        nds_gcs_auth_invalidate(s->auth);
        nds_http_response_dispose(resp);
    }
}

/* Copies a printable, bounded piece of a string into buf (for messages). */
static void printable(char *buf, size_t cap, const char *s) {
    snprintf(buf, cap, "%s", s ? s : "");
    for (char *p = buf; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e) *p = '?';
}

/* The NDS_E* code for an HTTP status: the driver's one mapping. */
static int gcs_code(long status) {
    switch (status) {
    case 400: return NDS_EINVAL;
    case 401:
    case 403: return NDS_EPERM;
    case 404: return NDS_ENOTFOUND;
    case 412: return NDS_ECONFLICT;
    case 416: return NDS_ERANGE;
    default: return NDS_EIO;
    }
}

/* An error for an unexpected status, naming the operation, key, status and GCS's reason and
 * message. */
static int gcs_status_error(const gcs_state *s, const char *op, const char *key,
                            const nds_http_response *r) {
    json_object *doc = NULL, *err, *errs, *v;
    const char *reason = "", *msg = "";
    if (r->body.len &&
        nds_json_parse((const char *)r->body.data, r->body.len, "gcs error", &doc) == 0 && doc &&
        json_object_object_get_ex(doc, "error", &err) &&
        json_object_is_type(err, json_type_object)) {
        if (json_object_object_get_ex(err, "message", &v)) msg = json_object_get_string(v);
        if (json_object_object_get_ex(err, "errors", &errs) &&
            json_object_is_type(errs, json_type_array) && json_object_array_length(errs) > 0 &&
            json_object_object_get_ex(json_object_array_get_idx(errs, 0), "reason", &v))
            reason = json_object_get_string(v);
    }
    char why[256], tries[320] = "";
    printable(why, sizeof why, reason[0] || msg[0] ? "" : "no error details");
    if (reason[0] || msg[0]) {
        char a[48], b[160];
        printable(a, sizeof a, reason);
        printable(b, sizeof b, msg);
        snprintf(why, sizeof why, "%s%s%s", a, a[0] && b[0] ? ": " : "", b);
    }
    if (r->attempts > 1) /* the tries, why each was retried, and the deadline if it ended them */
        snprintf(tries, sizeof tries, " after %d tries%s%s%s", r->attempts,
                 r->deadline_hit ? ", stopped by the deadline" : "", r->retries[0] ? " (" : "",
                 r->retries[0] ? r->retries : "");
    if (r->retries[0]) snprintf(tries + strlen(tries), sizeof tries - strlen(tries), ")");
    json_object_put(doc);
    return nds_err_cause(gcs_code(r->status), NDS_CAUSE_HTTP, r->status,
                         "gcs: %s gs://%s/%s: HTTP %ld%s (%s)", op, s->bucket, key, r->status,
                         tries, why);
}

/* A generation from GCS (decimal digits only). */
static bool parse_generation(const char *text, nds_generation *g) {
    size_t n = strlen(text);
    if (n == 0 || n >= 24 || strspn(text, "0123456789") != n) return false;
    nds_generation_set(g, text);
    return true;
}

/* Whether a condition's generation can be a GCS generation at all. */
static bool is_gcs_generation(const nds_generation *g) {
    nds_generation tmp;
    return g->kind == NDS_GEN_VALUE && parse_generation(g->value, &tmp);
}

/* Parses an object resource: generation, size, our write id. */
static int parse_object(const gcs_state *s, const char *key, const nds_buf *body, gcs_meta *m) {
    json_object *doc = NULL, *v, *md;
    int rc = nds_json_parse((const char *)body->data, body->len, "gcs: object resource", &doc);
    const char *gen = "", *size = "";
    if (!rc && json_object_object_get_ex(doc, "generation", &v)) gen = json_object_get_string(v);
    if (!rc && json_object_object_get_ex(doc, "size", &v)) size = json_object_get_string(v);
    if (!rc && json_object_object_get_ex(doc, "metadata", &md) &&
        json_object_object_get_ex(md, GCS_WRITE_ID, &v))
        snprintf(m->write_id, sizeof m->write_id, "%s", json_object_get_string(v));
    char *end = NULL;
    m->size = size[0] ? strtoull(size, &end, 10) : 0;
    if (!rc && (!parse_generation(gen, &m->gen) || (size[0] && *end)))
        rc = nds_err(NDS_EIO, "gcs: object resource of gs://%s/%s lacks a valid generation or size",
                     s->bucket, key);
    m->found = rc == 0;
    json_object_put(doc);
    return rc;
}

/* Fetches an object's metadata (found = false when it does not exist). */
static int gcs_meta_get(gcs_state *s, const char *key, gcs_meta *m) {
    memset(m, 0, sizeof *m);
    char *url = gcs_url(s, false, key, "fields=generation%2Csize%2Cmetadata");
    if (!url) return nds_err(NDS_ENOMEM, "gcs: out of memory");
    nds_http_request req = {"GET", url, NULL, 0, NULL, 0, 0, NDS_HTTP_DOCUMENT_MAX};
    nds_http_response resp;
    int rc = gcs_send(s, &req, &resp);
    free(url);
    if (rc) return nds_err_prefix(rc, "gcs: metadata of gs://%s/%s", s->bucket, key);
    if (resp.status == 200)
        rc = parse_object(s, key, &resp.body, m);
    else if (resp.status != 404)
        rc = gcs_status_error(s, "metadata of", key, &resp);
    nds_http_response_dispose(&resp);
    return rc;
}

/* ---- reads ---- */

/* Hands the bytes body[off..off+len) to out (taking the buffer). */
static void take_bytes(nds_read_result *out, nds_http_response *resp, size_t off, size_t len) {
    if (len == 0) return;
    if (off) memmove(resp->body.data, resp->body.data + off, len);
    nds_bytes_take(&out->value, resp->body.data, len);
    resp->body.data = NULL;
    resp->body.len = resp->body.cap = 0;
}

/* A read answered from the object's metadata: existence checks, zero-length ranges, past-the-end
 * starts. Sets *again when the object has grown since a 416 (the caller reads again). */
static int read_from_meta(gcs_state *s, const char *key, const nds_read_options *o,
                          nds_read_result *out, bool *again) {
    gcs_meta m;
    int rc = gcs_meta_get(s, key, &m);
    if (rc) return rc;
    if (!m.found) {
        out->generation.kind = NDS_GEN_ABSENT;
        out->state = o->if_equal.kind == NDS_GEN_VALUE ? NDS_READ_ABORTED : NDS_READ_MISSING;
        return 0;
    }
    out->generation = m.gen;
    out->total_size = m.size;
    if (!nds_generation_satisfies(&o->if_equal, &m.gen)) {
        out->state = NDS_READ_ABORTED;
    } else if (nds_generation_equal(&o->if_not_equal, &m.gen)) {
        out->state = NDS_READ_UNCHANGED;
    } else {
        uint64_t off, len;
        if ((rc = nds_byte_range_resolve(o, m.size, &off, &len)))
            return nds_err_prefix(rc, "gcs: read of gs://%s/%s", s->bucket, key);
        *again = len > 0 && o->byte_length != 0;
        out->state = NDS_READ_VALUE;
    }
    return 0;
}

/* The Range header for o, or "" for the whole value. byte_length 0 never gets here. */
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

/* Places a 200 or 206 body into out: the requested part, with the total size. */
static int media_body(gcs_state *s, const char *key, const nds_read_options *o,
                      nds_http_response *resp, nds_read_result *out) {
    uint64_t off = 0, len = resp->body.len, total = resp->body.len, a, b;
    char cr[128];
    if (resp->status == 200) {
        int rc = nds_byte_range_resolve(o, total, &off, &len); /* the server sent it all */
        if (rc) return nds_err_prefix(rc, "gcs: read of gs://%s/%s", s->bucket, key);
    } else if (!nds_http_header(resp, "Content-Range", cr, sizeof cr) ||
               sscanf(cr, "bytes %" SCNu64 "-%" SCNu64 "/%" SCNu64, &a, &b, &total) != 3 || b < a ||
               b - a + 1 != resp->body.len || b >= total ||
               (o->byte_start >= 0 && a != (uint64_t)o->byte_start)) {
        return nds_err(
            NDS_EIO,
            "gcs: read of gs://%s/%s: partial response with a bad Content-Range or body length",
            s->bucket, key);
    } else if (o->byte_start < 0 && o->byte_length >= 0 && (uint64_t)o->byte_length < len) {
        len = (uint64_t)o->byte_length; /* a suffix range, then a length */
    }
    out->state = NDS_READ_VALUE;
    out->total_size = total;
    take_bytes(out, resp, (size_t)off, (size_t)len);
    return 0;
}

/* One alt=media GET. Sets *fallback on 416 (answer from metadata instead). */
static int read_media(gcs_state *s, const char *key, const nds_read_options *o,
                      nds_read_result *out, bool *fallback) {
    char query[256], range[80], gen[40];
    bool eq = o->if_equal.kind == NDS_GEN_VALUE, ne = is_gcs_generation(&o->if_not_equal);
    snprintf(query, sizeof query, "alt=media%s%s%s%s", eq ? "&ifGenerationMatch=" : "",
             eq ? o->if_equal.value : "", ne ? "&ifGenerationNotMatch=" : "",
             ne ? o->if_not_equal.value : "");
    range_header(o, range, sizeof range);
    const char *hdrs[] = {range};
    char *url = gcs_url(s, false, key, query);
    if (!url) return nds_err(NDS_ENOMEM, "gcs: out of memory");
    nds_http_request req = {"GET", url, hdrs, range[0] ? 1 : 0, NULL, 0, 0, 0};
    nds_http_response resp;
    int rc = gcs_send(s, &req, &resp);
    free(url);
    if (rc) return nds_err_prefix(rc, "gcs: read of gs://%s/%s", s->bucket, key);
    if (resp.status == 200 || resp.status == 206) {
        if (!nds_http_header(&resp, "x-goog-generation", gen, sizeof gen) ||
            !parse_generation(gen, &out->generation))
            rc = nds_err(NDS_EIO, "gcs: read of gs://%s/%s: response lacks x-goog-generation",
                         s->bucket, key);
        else
            rc = media_body(s, key, o, &resp, out);
    } else if (resp.status == 304) {
        out->state = NDS_READ_UNCHANGED;
        out->generation = o->if_not_equal;
    } else if (resp.status == 404) {
        out->state = o->if_equal.kind == NDS_GEN_VALUE ? NDS_READ_ABORTED : NDS_READ_MISSING;
        out->generation.kind = NDS_GEN_ABSENT;
    } else if (resp.status == 412) {
        out->state = NDS_READ_ABORTED;
    } else if (resp.status == 416) {
        *fallback = true;
    } else {
        rc = gcs_status_error(s, "read of", key, &resp);
    }
    nds_http_response_dispose(&resp);
    return rc;
}

static int gcs_read_value(void *state, const char *key, const nds_read_options *o,
                          nds_read_result *out) {
    gcs_state *s = state;
    if (o->if_equal.kind == NDS_GEN_VALUE && !is_gcs_generation(&o->if_equal)) {
        out->state = NDS_READ_ABORTED; /* no GCS object has that generation */
        return 0;
    }
    bool meta = o->if_equal.kind == NDS_GEN_ABSENT || o->byte_length == 0;
    for (int tries = 0; tries < 4; tries++) {
        bool again = false, fallback = false;
        int rc =
            meta ? read_from_meta(s, key, o, out, &again) : read_media(s, key, o, out, &fallback);
        if (rc || (!again && !fallback)) return rc;
        meta = fallback; /* 416: the start is at or past the end; metadata tells which */
    }
    return nds_err(NDS_EIO, "gcs: read of gs://%s/%s: the object keeps changing size", s->bucket,
                   key);
}

/* ---- writes and deletes ---- */

static int random_hex(char *buf, size_t nbytes) {
    unsigned char raw[32];
    if (nbytes > sizeof raw || RAND_bytes(raw, (int)nbytes) != 1)
        return nds_err(NDS_EINTERNAL, "gcs: no random bytes for a write id");
    for (size_t i = 0; i < nbytes; i++) sprintf(buf + 2 * i, "%02x", raw[i]);
    return 0;
}

/* A multipart/related body: JSON metadata {"name", "metadata": {write id}} then the value. */
static int multipart_body(const char *key, const char *write_id, const uint8_t *data, size_t len,
                          char *boundary, nds_buf *body) {
    int rc;
    do { /* a boundary must not occur in the value */
        memcpy(boundary, "nds_", 4);
        if ((rc = random_hex(boundary + 4, 16))) return rc;
    } while (len >= 36 && memmem(data, len, boundary, 36));
    json_object *meta = json_object_new_object(), *md = json_object_new_object();
    json_object_object_add(meta, "name", json_object_new_string(key));
    json_object_object_add(md, GCS_WRITE_ID, json_object_new_string(write_id));
    json_object_object_add(meta, "metadata", md);
    char *head = nds_asprintf(
        "--%s\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n%s\r\n--%s\r\n"
        "Content-Type: application/octet-stream\r\n\r\n",
        boundary, json_object_to_json_string_ext(meta, JSON_C_TO_STRING_PLAIN), boundary);
    char *tail = nds_asprintf("\r\n--%s--\r\n", boundary);
    json_object_put(meta);
    rc = head && tail ? 0 : NDS_ENOMEM;
    if (!rc) rc = nds_buf_append(body, head, strlen(head));
    if (!rc) rc = nds_buf_append(body, data, len);
    if (!rc) rc = nds_buf_append(body, tail, strlen(tail));
    free(head);
    free(tail);
    return rc ? nds_err(NDS_ENOMEM, "gcs: out of memory building an upload of %zu bytes", len) : 0;
}

/* After a retried conditional upload met 412: did an earlier try of ours land? */
static int resolve_retried_write(gcs_state *s, const char *key, const char *write_id,
                                 nds_generation *new_gen, const nds_http_response *resp) {
    gcs_meta m;
    int rc = gcs_meta_get(s, key, &m);
    if (rc) return rc;
    if (m.found && strcmp(m.write_id, write_id) == 0) {
        *new_gen = m.gen;
        return 0;
    }
    return nds_err_cause(NDS_EIO, NDS_CAUSE_HTTP, 412,
                         "gcs: write of gs://%s/%s: outcome unknown: a try got no "
                         "answer, and after %d tries the object has another writer's version",
                         s->bucket, key, resp->attempts);
}

/* An upload's request as upload_request builds it. */
typedef struct gcs_upload {
    char write_id[33]; /* a conditional write's id in the object's metadata; "" for media */
    char ctype[96];    /* the Content-Type header line */
    nds_buf mp;        /* the multipart body; empty for media (the value goes as it is) */
    char *url;         /* malloc'd */
} gcs_upload;

/* The URL, Content-Type and body of an upload into up (zeroed by the caller; its mp and url freed
 * by the caller, also after an error): media for unconditional writes; multipart, carrying a write
 * id in the object's metadata, for conditional ones (so a retry can recognise its own earlier
 * try). */
static int upload_request(gcs_state *s, const char *key, const uint8_t *data, size_t len,
                          const nds_write_options *o, gcs_upload *up) {
    char boundary[40], query[256];
    if (o->if_equal.kind == NDS_GEN_NONE) {
        char *ek = nds_http_escape(key, false);
        char *q = ek ? nds_asprintf("uploadType=media&name=%s", ek) : NULL;
        up->url = q ? gcs_url(s, true, NULL, q) : NULL;
        free(ek), free(q);
        snprintf(up->ctype, sizeof up->ctype, "Content-Type: application/octet-stream");
        return up->url ? 0 : nds_err(NDS_ENOMEM, "gcs: out of memory");
    }
    int rc = random_hex(up->write_id, 16);
    if (!rc) rc = multipart_body(key, up->write_id, data, len, boundary, &up->mp);
    if (rc) return rc;
    snprintf(up->ctype, sizeof up->ctype, "Content-Type: multipart/related; boundary=%s",
             boundary);
    snprintf(query, sizeof query, "uploadType=multipart&ifGenerationMatch=%s",
             o->if_equal.kind == NDS_GEN_ABSENT ? "0" : o->if_equal.value);
    up->url = gcs_url(s, true, NULL, query);
    return up->url ? 0 : nds_err(NDS_ENOMEM, "gcs: out of memory");
}

/* What an upload's answer means. */
static int upload_result(gcs_state *s, const char *key, const char *write_id,
                         const nds_http_response *resp, nds_generation *new_gen) {
    gcs_meta m;
    if (resp->status == 200) {
        int rc = parse_object(s, key, &resp->body, &m);
        *new_gen = m.gen;
        return rc;
    }
    if (resp->status == 412 && resp->attempts > 1)
        return resolve_retried_write(s, key, write_id, new_gen, resp);
    if (resp->status == 412)
        return nds_err_cause(
            NDS_ECONFLICT, NDS_CAUSE_HTTP, 412,
            "gcs: write of gs://%s/%s: condition failed: the stored generation changed", s->bucket,
            key);
    return gcs_status_error(s, "write of", key, resp);
}

static int upload(gcs_state *s, const char *key, const uint8_t *data, size_t len,
                  const nds_write_options *o, nds_generation *new_gen) {
    gcs_upload up = {0};
    int rc = upload_request(s, key, data, len, o, &up);
    if (!rc) {
        const char *hdrs[] = {up.ctype};
        bool multipart = up.mp.data != NULL;
        nds_http_request req = {"POST", up.url, hdrs, 1, multipart ? up.mp.data : data,
                                multipart ? up.mp.len : len, 0, NDS_HTTP_DOCUMENT_MAX};
        nds_http_response resp;
        rc = gcs_send(s, &req, &resp);
        if (rc)
            rc = nds_err_prefix(rc, "gcs: write of gs://%s/%s", s->bucket, key);
        else
            rc = upload_result(s, key, up.write_id, &resp, new_gen);
        nds_http_response_dispose(&resp);
    }
    nds_buf_dispose(&up.mp);
    free(up.url);
    return rc;
}

static int gcs_delete(gcs_state *s, const char *key, const nds_write_options *o,
                      nds_generation *new_gen) {
    new_gen->kind = NDS_GEN_ABSENT;
    if (o->if_equal.kind == NDS_GEN_ABSENT) { /* "delete if absent": only a check */
        gcs_meta m;
        int rc = gcs_meta_get(s, key, &m);
        if (rc || !m.found) return rc;
        return nds_err(NDS_ECONFLICT, "gcs: delete of gs://%s/%s: condition failed: the key exists",
                       s->bucket, key);
    }
    char query[256] = "";
    if (o->if_equal.kind == NDS_GEN_VALUE)
        snprintf(query, sizeof query, "ifGenerationMatch=%s", o->if_equal.value);
    char *url = gcs_url(s, false, key, query);
    if (!url) return nds_err(NDS_ENOMEM, "gcs: out of memory");
    nds_http_request req = {"DELETE", url, NULL, 0, NULL, 0, 0, NDS_HTTP_DOCUMENT_MAX};
    nds_http_response resp;
    int rc = gcs_send(s, &req, &resp);
    free(url);
    if (rc) return nds_err_prefix(rc, "gcs: delete of gs://%s/%s", s->bucket, key);
    bool conditional = o->if_equal.kind == NDS_GEN_VALUE;
    /* 404 after a retry: our earlier try deleted it. 404 on the first try of a conditional delete:
     * the generation no longer exists, so the condition failed. */
    if (resp.status == 200 || resp.status == 204 ||
        (resp.status == 404 && (!conditional || resp.attempts > 1)))
        rc = 0;
    else if (resp.status == 404 || resp.status == 412)
        rc = nds_err_cause(
            NDS_ECONFLICT, NDS_CAUSE_HTTP, resp.status,
            "gcs: delete of gs://%s/%s: condition failed: the stored generation changed", s->bucket,
            key);
    else
        rc = gcs_status_error(s, "delete of", key, &resp);
    nds_http_response_dispose(&resp);
    return rc;
}

/* Ranges: one ranged GET from the first range's start to the last one's end, copied into the
 * caller's buffers (one request, whatever the number of ranges). */
static int gcs_read(void *state, const char *key, const nds_read_options *o,
                    const nds_byte_range *ranges, size_t n, nds_read_result *out) {
    if (n == 0) return gcs_read_value(state, key, o, out);
    return nds_kv_read_ranges_span(gcs_read_value, state, key, o, ranges, n, out);
}

static int gcs_write_value(void *state, const char *key, const uint8_t *data, size_t len,
                           const nds_write_options *o, nds_generation *new_gen) {
    gcs_state *s = state;
    if (o->if_equal.kind == NDS_GEN_VALUE && !is_gcs_generation(&o->if_equal))
        return nds_err(NDS_ECONFLICT,
                       "gcs: %s of gs://%s/%s: condition failed: \"%.40s\" is no gcs generation",
                       data ? "write" : "delete", s->bucket, key, o->if_equal.value);
    return data ? upload(s, key, data, len, o, new_gen) : gcs_delete(s, key, o, new_gen);
}

/* The pieces are gathered into one upload body. */
static int gcs_write(void *state, const char *key, const struct iovec *iov, size_t iovcnt,
                     const nds_write_options *o, nds_generation *new_gen) {
    return nds_kv_write_gathered(state, key, iov, iovcnt, o, new_gen, gcs_write_value);
}

/* ---- listing ---- */

/* A listing under way: the keys under prefix handed to fn(ctx, ...), its progress page by page
 * (what names it in messages). */
typedef struct gcs_listing {
    const char *prefix;
    nds_list_fn fn;
    void *ctx;
    nds_list_progress progress;
    const char *what;
} gcs_listing;

/* Calls fn for each item of one page, checking that the listing moves forward; sets *token to the
 * next page's token (malloc'd) or NULL. */
static int list_page(gcs_state *s, gcs_listing *l, const nds_buf *body, char **token) {
    const char *prefix = l->prefix, *what = l->what;
    nds_list_progress *progress = &l->progress;
    json_object *doc = NULL, *items = NULL, *v;
    int rc = nds_json_parse((const char *)body->data, body->len, "gcs: object listing", &doc);
    if (!rc && json_object_object_get_ex(doc, "nextPageToken", &v) &&
        json_object_get_string_len(v) > 0)
        *token = nds_strdup(json_object_get_string(v));
    if (!rc) json_object_object_get_ex(doc, "items", &items);
    size_t n =
        items && json_object_is_type(items, json_type_array) ? json_object_array_length(items) : 0;
    for (size_t i = 0; !rc && i < n; i++) {
        json_object *it = json_object_array_get_idx(items, i), *name, *size;
        if (!json_object_object_get_ex(it, "name", &name) ||
            !json_object_is_type(name, json_type_string)) {
            rc = nds_err(NDS_EIO, "gcs: listing of gs://%s/%s: an item lacks a name", s->bucket,
                         prefix);
            break;
        }
        const char *key = json_object_get_string(name), *sz = "";
        if ((rc = nds_list_progress_key(progress, key, what))) break;
        if (strncmp(key, prefix, strlen(prefix)) != 0) continue; /* not ours: never hand it on */
        if (json_object_object_get_ex(it, "size", &size)) sz = json_object_get_string(size);
        char *end = NULL;
        uint64_t bytes = strtoull(sz, &end, 10);
        rc = l->fn(l->ctx, key, sz[0] && !*end ? bytes : UINT64_MAX);
    }
    if (!rc) rc = nds_list_progress_page(progress, n, *token, what);
    json_object_put(doc);
    return rc;
}

static int gcs_list(void *state, const char *prefix, nds_list_fn fn, void *ctx) {
    gcs_state *s = state;
    char *ep = nds_http_escape(prefix, false), *token = NULL;
    char *what = nds_asprintf("gcs: listing of gs://%s/%s", s->bucket, prefix);
    gcs_listing listing = {prefix, fn, ctx, {0}, what};
    int rc = ep && what ? 0 : nds_err(NDS_ENOMEM, "gcs: out of memory");
    while (!rc) {
        char *et = token ? nds_http_escape(token, false) : NULL;
        char *q = nds_asprintf(
            "prefix=%s&maxResults=1000&fields=items(name%%2Csize)%%2CnextPageToken%s%s", ep,
            et ? "&pageToken=" : "", et ? et : "");
        char *url = q ? gcs_url(s, false, NULL, q) : NULL;
        free(q), free(et), free(token);
        token = NULL;
        if (!url) rc = nds_err(NDS_ENOMEM, "gcs: out of memory");
        nds_http_request req = {"GET", url, NULL, 0, NULL, 0, 0, NDS_HTTP_LISTING_MAX};
        nds_http_response resp = {0};
        if (!rc && (rc = gcs_send(s, &req, &resp)))
            rc = nds_err_prefix(rc, "gcs: listing of gs://%s/%s", s->bucket, prefix);
        else if (!rc && resp.status != 200)
            rc = gcs_status_error(s, "listing of", prefix, &resp);
        else if (!rc)
            rc = list_page(s, &listing, &resp.body, &token);
        nds_http_response_dispose(&resp);
        free(url);
        if (!token) break;
    }
    free(token);
    free(ep);
    free(what);
    nds_list_progress_dispose(&listing.progress);
    return rc;
}

/* ---- delete_range: list, then delete in concurrent batches ---- */

typedef struct key_batch {
    char **keys;
    size_t n, cap;
    const char *begin, *end;
} key_batch;

static int collect_range(void *c, const char *key, uint64_t size) {
    key_batch *b = c;
    (void)size;
    if (strcmp(key, b->begin) < 0 || (b->end[0] && strcmp(key, b->end) >= 0)) return 0;
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        char **k = realloc(b->keys, cap * sizeof *k);
        if (!k) return nds_err(NDS_ENOMEM, "gcs: out of memory listing keys");
        b->keys = k;
        b->cap = cap;
    }
    return (b->keys[b->n] = nds_strdup(key)) ? (b->n++, 0)
                                             : nds_err(NDS_ENOMEM, "gcs: out of memory");
}

/* Deletes keys[0..n) concurrently (n <= GCS_DELETE_BATCH); a missing key is fine. */
static int delete_batch(gcs_state *s, char **keys, size_t n) {
    nds_http_request reqs[GCS_DELETE_BATCH];
    nds_http_response resps[GCS_DELETE_BATCH];
    int rcs[GCS_DELETE_BATCH];
    char *urls[GCS_DELETE_BATCH] = {0}, *auth = NULL;
    int rc = nds_gcs_auth_header(s->auth, &auth);
    const char *hdrs[] = {auth};
    for (size_t i = 0; !rc && i < n; i++) {
        if (!(urls[i] = gcs_url(s, false, keys[i], "")))
            rc = nds_err(NDS_ENOMEM, "gcs: out of memory");
        reqs[i] = (nds_http_request){"DELETE", urls[i], hdrs,          auth ? 1 : 0,
                                     NULL,     0,       s->timeout_ms, NDS_HTTP_DOCUMENT_MAX};
    }
    memset(resps, 0, sizeof resps);
    if (!rc) nds_http_perform_many(s->http, reqs, &s->retry, resps, rcs, n);
    for (size_t i = 0; i < n; i++) {
        if (!rc && rcs[i])
            rc = nds_err_prefix(rcs[i], "gcs: delete of gs://%s/%s", s->bucket, keys[i]);
        long st = resps[i].status;
        if (!rc && !rcs[i] && st != 200 && st != 204 && st != 404)
            rc = gcs_status_error(s, "delete of", keys[i], &resps[i]);
        nds_http_response_dispose(&resps[i]);
        free(urls[i]);
    }
    nds_gcs_auth_header_free(auth);
    return rc;
}

static int gcs_delete_range(void *state, const char *begin, const char *end) {
    gcs_state *s = state;
    size_t common = 0;
    while (end[0] && begin[common] && begin[common] == end[common]) common++;
    char *prefix = nds_asprintf("%.*s", (int)common, begin);
    key_batch b = {NULL, 0, 0, begin, end};
    int rc =
        prefix ? gcs_list(s, prefix, collect_range, &b) : nds_err(NDS_ENOMEM, "gcs: out of memory");
    for (size_t i = 0; !rc && i < b.n; i += GCS_DELETE_BATCH)
        rc = delete_batch(s, b.keys + i, b.n - i < GCS_DELETE_BATCH ? b.n - i : GCS_DELETE_BATCH);
    for (size_t i = 0; i < b.n; i++) free(b.keys[i]);
    free(b.keys);
    free(prefix);
    return rc;
}

/* ---- open, close, URLs ---- */

static void gcs_close(void *state) {
    gcs_state *s = state;
    if (!s) return;
    nds_http_client_free(s->http);
    nds_gcs_auth_free(s->auth);
    free(s->bucket), free(s->endpoint), free(s->user_project);
    free(s);
}

static int gcs_open(void **state, const json_object *spec) {
    gcs_state *s = calloc(1, sizeof *s);
    if (!s) return nds_err(NDS_ENOMEM, "gcs: out of memory");
    int rc = nds_gcs_options(s, spec);
    if (rc) {
        gcs_close(s);
        return rc;
    }
    *state = s;
    return 0;
}

static int gcs_parse_url(const char *rest, json_object *spec) {
    const char *slash = strchr(rest, '/');
    size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
    if (!nds_gcs_bucket_ok(rest, n))
        return nds_err(NDS_EINVAL, "gcs: \"%.*s\" is not a bucket name (gs://bucket/path/)",
                       (int)(n > 80 ? 80 : n), rest);
    if (strpbrk(rest, "?#"))
        return nds_err(NDS_EINVAL, "gcs: a gs:// url takes no query or fragment");
    json_object_object_add(spec, "bucket", json_object_new_string_len(rest, (int)n));
    json_object_object_add(spec, "path", json_object_new_string(slash ? slash + 1 : ""));
    return 0;
}

static void gcs_url_base(void *state, char *buf, size_t cap) {
    snprintf(buf, cap, "gs://%s/", ((gcs_state *)state)->bucket);
}

/* A printed spec names an endpoint taken from the environment, so it reopens the same store.
 * (Credentials are never in a spec: at most a key file's path.) */
static int gcs_to_json(void *state, json_object *spec) {
    gcs_state *s = state;
    if (s->endpoint_from_env && !json_object_object_get_ex(spec, "endpoint", NULL))
        json_object_object_add(spec, "endpoint", json_object_new_string(s->endpoint));
    return 0;
}

const nds_kv_driver nds_kv_driver_gcs = {
    .version = NDS_KV_DRIVER_VERSION,
    .name = "gcs",
    .url_scheme = "gs",
    .capabilities = NDS_KV_CAP_ATOMIC_CONDITIONAL_WRITE | NDS_KV_CAP_BYTE_RANGE,
    .parse_url = gcs_parse_url,
    .open = gcs_open,
    .close = gcs_close,
    .url_base = gcs_url_base,
    .to_json = gcs_to_json,
    .read = gcs_read,
    .write = gcs_write,
    .list = gcs_list,
    .delete_range = gcs_delete_range,
    .commit = NULL,
};
