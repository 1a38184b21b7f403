/* The s3 driver's requests, below every other file of the driver (nothing here calls them back):
 * building and signing a request (SigV4: aws_sigv4.c), sending it with the store's retries
 * (http_multi.c), mapping an unexpected status to an error, generations from ETags, HEAD, and the
 * spec error mapping. Callers: kv_s3.c, s3_write.c, s3_cond.c, s3_creds.c.
 *
 * Threading: stateless but for the store, which is immutable here. Ownership: a built request owns
 * its URL and headers until s3_req_dispose.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "s3_internal.h"
#include "s3_xml.h"
#include "aws_sigv4.h"
#include "internal/error.h"
#include "internal/json_util.h"
#include "internal/util.h"

/* ---- requests ---- */

static int add_hdr(s3_req *r, char *line) {
    if (!line) return nds_err(NDS_ENOMEM, "s3: out of memory");
    if (r->nhdr == sizeof r->hdr / sizeof r->hdr[0]) {
        free(line);
        return nds_err(NDS_EINTERNAL, "s3: too many request headers");
    }
    r->hdr[r->nhdr++] = line;
    return 0;
}

void s3_req_dispose(s3_req *r) {
    free(r->url);
    for (size_t i = 0; i < r->nhdr; i++) free(r->hdr[i]);
    memset(r, 0, sizeof *r);
}

/* Adds Authorization for the headers so far. */
static int sign_req(s3_store *s, s3_req *r, const char *method, const char *path, const char *query,
                    const char *hash, const char *date) {
    nds_sigv4_request sr = {method,
                            path,
                            query,
                            (const char *const *)r->hdr,
                            r->nhdr,
                            hash,
                            date,
                            s->region,
                            "s3",
                            s->creds.access_key,
                            s->creds.secret_key};
    char auth[2048];
    int rc = nds_sigv4_authorization(&sr, auth, sizeof auth);
    return rc ? rc : add_hdr(r, nds_asprintf("Authorization: %s", auth));
}

int s3_req_build(s3_store *s, s3_req *r, const s3_call *c) {
    const char *method = c->method, *key = c->key, *query = c->query;
    const uint8_t *body = c->body;
    size_t len = c->len;
    memset(r, 0, sizeof *r);
    char *ekey = key ? nds_http_escape(key, true) : NULL;
    if (key && !ekey) return nds_err(NDS_ENOMEM, "s3: out of memory");
    char *path =
        key ? nds_asprintf("%s/%s", s->base_path, ekey) : nds_asprintf("%s/", s->base_path);
    free(ekey);
    if (!path) return nds_err(NDS_ENOMEM, "s3: out of memory");
    if (key == NULL && s->base_path[0])
        path[strlen(path) - 1] = '\0'; /* "/bucket", not "/bucket/" */
    r->url = nds_asprintf("%s%s%s%s", s->scheme_host, path, query && *query ? "?" : "",
                          query ? query : "");
    char hash[65], date[17];
    if (s->unsigned_payload && strncmp(s->scheme_host, "https:", 6) == 0)
        snprintf(hash, sizeof hash, "%s", NDS_SIGV4_UNSIGNED);
    else if (body && len)
        nds_sha256_hex(body, len, hash);
    else
        snprintf(hash, sizeof hash, "%s", NDS_SIGV4_EMPTY_SHA256);
    nds_sigv4_amz_date((long long)time(NULL), date);
    int rc = r->url ? 0 : nds_err(NDS_ENOMEM, "s3: out of memory");
    if (!rc) rc = add_hdr(r, nds_asprintf("Host: %s", s->host));
    if (!rc) rc = add_hdr(r, nds_asprintf("x-amz-date: %s", date));
    if (!rc) rc = add_hdr(r, nds_asprintf("x-amz-content-sha256: %s", hash));
    if (!rc && s->creds.session_token)
        rc = add_hdr(r, nds_asprintf("x-amz-security-token: %s", s->creds.session_token));
    for (size_t i = 0; !rc && i < c->nextra; i++) rc = add_hdr(r, nds_strdup(c->extra[i]));
    if (!rc && !s->creds.anonymous) rc = sign_req(s, r, method, path, query, hash, date);
    free(path);
    if (rc) {
        s3_req_dispose(r);
        return rc;
    }
    /* only a GET returns a value; every other answer is a small XML document (or nothing) */
    uint64_t max = strcmp(method, "GET") == 0 ? 0 : NDS_HTTP_DOCUMENT_MAX;
    r->http = (nds_http_request){
        method, r->url, (const char *const *)r->hdr, r->nhdr, body, len, s->timeout_ms, max};
    return 0;
}

void s3_redact(const s3_store *s, char *msg) {
    const char *secrets[] = {s->creds.secret_key, s->creds.session_token};
    for (size_t i = 0; i < 2; i++) {
        size_t n = secrets[i] ? strlen(secrets[i]) : 0;
        if (n < 4) continue;
        for (char *p = strstr(msg, secrets[i]); p; p = strstr(p, secrets[i])) memset(p, '*', n);
    }
}

int s3_send(s3_store *s, const s3_call *c, const nds_http_retry *policy, long timeout_ms,
            nds_http_response *resp) {
    s3_req r;
    memset(resp, 0, sizeof *resp);
    int rc = s3_req_build(s, &r, c);
    if (rc) return rc;
    if (timeout_ms > 0) r.http.timeout_ms = timeout_ms;
    rc = nds_http_perform(s->http, &r.http, policy ? policy : &s->retry, resp);
    s3_req_dispose(&r);
    if (rc)
        rc = nds_err_prefix(rc, "s3: %s s3://%s/%s", c->method, s->bucket, c->key ? c->key : "");
    return rc;
}

/* The one place an HTTP status becomes an NDS code. */
static int status_code(long status) {
    switch (status) {
    case 404: return NDS_ENOTFOUND;
    case 401:
    case 403: return NDS_EPERM;
    case 409:
    case 412: return NDS_ECONFLICT;
    case 416: return NDS_ERANGE;
    case 400:
    case 301:
    case 307: return NDS_EINVAL;
    case 501: return NDS_EUNSUPPORTED;
    default: return NDS_EIO;
    }
}

int s3_status_error(const s3_store *s, const nds_http_response *resp, const char *op,
                    const char *key) {
    char code[128], msg[512], text[1400];
    nds_s3_parse_error((const char *)resp->body.data, resp->body.len, code, sizeof code, msg,
                       sizeof msg);
    snprintf(text, sizeof text, "s3: %s s3://%s/%s: HTTP %ld%s%s%s%s%s", op, s->bucket,
             key ? key : "", resp->status, code[0] ? " " : "", code, msg[0] ? ": " : "", msg,
             resp->status == 301 || resp->status == 307 ? " (wrong region or endpoint?)" : "");
    if (resp->attempts > 1) /* the tries, why each was retried, and the deadline if it ended them */
        snprintf(text + strlen(text), sizeof text - strlen(text), " (after %d attempts%s%s%s)",
                 resp->attempts, resp->deadline_hit ? ", stopped by the deadline" : "",
                 resp->retries[0] ? ": " : "", resp->retries);
    s3_redact(s, text);
    return nds_err_cause(status_code(resp->status), NDS_CAUSE_HTTP, resp->status, "%s", text);
}

bool s3_etag_generation(const nds_http_response *resp, nds_generation *g) {
    char v[NDS_GENERATION_MAX + 8];
    if (!nds_http_header(resp, "etag", v, sizeof v) || !v[0]) return false;
    char *p = v;
    if (strncmp(p, "W/", 2) == 0) p += 2;
    size_t n = strlen(p);
    if (n >= 2 && p[0] == '"' && p[n - 1] == '"') {
        p[n - 1] = '\0';
        p++;
    }
    nds_generation_set(g, p);
    return true;
}

/* An object without an ETag still needs a generation: Last-Modified and size stand in for it. */
void s3_generation(const nds_http_response *resp, nds_generation *g) {
    if (s3_etag_generation(resp, g)) {
        char token[40];
        bool hex = nds_http_header(resp, S3_GEN_META, token, sizeof token) && token[0] &&
                   strlen(token) <= 32;
        for (const char *p = token; hex && *p; p++)
            hex = (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f');
        size_t n = strlen(g->value);
        if (hex && strchr(g->value, S3_GEN_SEP) == NULL && n + 1 + strlen(token) < sizeof g->value)
            snprintf(g->value + n, sizeof g->value - n, "%c%s", S3_GEN_SEP, token);
        return;
    }
    char lm[64] = "", cl[32] = "";
    nds_http_header(resp, "last-modified", lm, sizeof lm);
    nds_http_header(resp, "content-length", cl, sizeof cl);
    char v[NDS_GENERATION_MAX];
    snprintf(v, sizeof v, "lm:%.60s:%.20s", lm, cl);
    nds_generation_set(g, v);
}

void s3_gen_etag(const nds_generation *g, char *out, size_t cap) {
    const char *sep = strchr(g->value, S3_GEN_SEP);
    size_t n = sep ? (size_t)(sep - g->value) : strlen(g->value);
    snprintf(out, cap, "%.*s", (int)n, g->value);
}

void s3_gen_absent(nds_generation *g) {
    g->kind = NDS_GEN_ABSENT;
    g->value[0] = '\0';
}

/* 404 of a key (NoSuchKey, or no body for HEAD) as opposed to a missing bucket. */
bool s3_missing_key(const nds_http_response *resp) {
    if (resp->status != 404) return false;
    char code[64], msg[8];
    nds_s3_parse_error((const char *)resp->body.data, resp->body.len, code, sizeof code, msg,
                       sizeof msg);
    return strcmp(code, "NoSuchBucket") != 0;
}

int s3_head(s3_store *s, const char *key, nds_generation *g, const nds_http_retry *policy,
            long timeout_ms) {
    nds_http_response resp;
    int rc = s3_send(s, &(s3_call){.method = "HEAD", .key = key}, policy, timeout_ms, &resp);
    if (rc == 0) {
        if (resp.status == 200)
            s3_generation(&resp, g);
        else if (s3_missing_key(&resp))
            s3_gen_absent(g);
        else
            rc = s3_status_error(s, &resp, "HEAD", key);
    }
    nds_http_response_dispose(&resp);
    return rc;
}

/* ---- spec errors ---- */

int s3_spec_error(int rc) {
    if (rc != NDS_EFORMAT) return rc;
    nds_error_saved e;
    nds_error_save(&e, rc);
    e.code = NDS_EINVAL;
    return nds_error_restore(&e);
}
