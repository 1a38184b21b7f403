/* Writes and deletes of the s3 driver, per conditional-write mode (s3_cond.c decides the mode):
 *   full         the condition rides on the request: If-None-Match: * (ABSENT) or If-Match: <ETag>;
 *   create_only  a create-only write (condition ABSENT) is sent directly with If-None-Match: *, as
 *                in full mode: the probe showed the server refuses the second of two such PUTs, so
 *                the server itself decides who creates the key, and a lease would add round trips
 *                and nothing else. That holds because every other writer of the key that checks
 *                "absent" sends the header too (the leased path below also sets it), and a racing
 *                unconditional PUT lands before or after, as on any store. Every other mutation
 *                (If-Match writes, conditional deletes, and unconditional ones, so they cannot slip
 *                between a leased writer's check and its PUT) runs under the key's lease: HEAD,
 *                compare, PUT/DELETE, release; it is sent only while the lease is surely held. A
 *                delete "only if absent" changes nothing: a HEAD decides it, without the lease;
 *   none         unconditional writes only; a conditional one fails before anything is sent;
 *   off          the condition is checked by a HEAD just before the mutation (not atomic).
 * A hint (write_hint: a key nobody writes conditionally, the versioned store's "head") is one plain
 * PUT in every mode: in create_only mode the lease only orders unconditional writes against
 * conditional writers of the same key, and a hint has none.
 * Values above multipart_threshold go up as a multipart upload: parts first (concurrently, before
 * any lease is taken), then CompleteMultipartUpload is the mutation; any failure aborts the upload.
 * Full mode sends If-None-Match: * on CompleteMultipartUpload. Servers in create_only mode need not
 * honour it there (Ceph RGW 16.2 ignores it: measured), so a create-only value up to S3's 5 GiB
 * single-PUT limit goes up as one PUT with the header whatever its size; only a larger one keeps
 * the lease and the HEAD before its CompleteMultipartUpload, and a create-only writer of the same
 * key that does not take the lease can land between the two (docs/drivers.md).
 *
 * A retried conditional request can be refused because its own earlier try landed (the response was
 * lost): a 412 after more than one try is settled by a HEAD, and the write counts as done when the
 * object now has the ETag our bytes produce (MD5, or the multipart MD5-of-MD5s). A value identical
 * to ours written by someone else is indistinguishable, and as good.
 *
 * Threading: any thread (state is per call). Ownership: data is borrowed for the call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "s3_internal.h"
#include "s3_xml.h"
#include "aws_sigv4.h"
#include "ndstore/sys/buf.h"
#include "internal/error.h"
#include "internal/util.h"

/* A multipart upload in progress. */
typedef struct mp_upload {
    char *upload_id;
    char *query_id; /* "uploadId=<escaped>" */
    char **etags;   /* per part, as the server sent them (quoted) */
    size_t nparts;
    size_t part;    /* bytes of every part but the last */
    nds_buf complete_xml; /* CompleteMultipartUpload body */
} mp_upload;

/* The final request of a write or delete. */
typedef struct mutation {
    const char *key;
    const uint8_t *data; /* NULL: delete */
    size_t len;
    mp_upload *mp;                         /* non-NULL: complete this upload instead of a PUT */
    char cond[NDS_GENERATION_MAX + 32];    /* "If-Match: ..." or "If-None-Match: *" or "" */
    char expected_etag[64];                /* the ETag our bytes get */
    char token[17];                        /* stored as S3_GEN_META: makes the generation unique */
    char meta[64];                         /* the S3_GEN_META header line */
    char expected_gen[NDS_GENERATION_MAX]; /* ETag#token: settles ambiguous retries exactly */
} mutation;

/* ---- multipart ---- */

static void mp_free(mp_upload *m) {
    free(m->upload_id);
    free(m->query_id);
    for (size_t i = 0; m->etags && i < m->nparts; i++) free(m->etags[i]);
    free(m->etags);
    nds_buf_dispose(&m->complete_xml);
    memset(m, 0, sizeof *m);
}

static void mp_abort(s3_store *s, const char *key, mp_upload *m) {
    nds_http_response resp;
    s3_call abort_req = {.method = "DELETE", .key = key, .query = m->query_id};
    if (m->query_id && s3_send(s, &abort_req, NULL, 0, &resp) == 0)
        nds_http_response_dispose(&resp);
}

/* Part i's bytes. */
static void mp_part(const s3_store *s, size_t len, size_t i, size_t nparts, size_t part,
                    size_t *off, size_t *n) {
    (void)s;
    *off = i * part;
    *n = i + 1 == nparts ? len - *off : part;
}

/* The multipart ETag S3 computes: hex MD5 of the parts' binary MD5s, "-", the part count. */
static void mp_expected_etag(const uint8_t *data, size_t len, size_t nparts, size_t part, char *out,
                             size_t cap) {
    unsigned char *md5s = malloc(nparts * 16), md[16];
    unsigned int n;
    if (!md5s) {
        out[0] = '\0';
        return;
    }
    for (size_t i = 0; i < nparts; i++) {
        size_t off = i * part, plen = i + 1 == nparts ? len - off : part;
        EVP_Digest(data + off, plen, md5s + 16 * i, &n, EVP_md5(), NULL);
    }
    EVP_Digest(md5s, nparts * 16, md, &n, EVP_md5(), NULL);
    free(md5s);
    char hex[33];
    for (int i = 0; i < 16; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
    snprintf(out, cap, "%s-%zu", hex, nparts);
}

static int mp_initiate(s3_store *s, const char *key, const char *meta, mp_upload *m) {
    nds_http_response resp;
    const char *hdrs[1] = {meta};
    s3_call post = {.method = "POST", .key = key, .query = "uploads", .extra = hdrs, .nextra = 1};
    int rc = s3_send(s, &post, NULL, 0, &resp);
    if (rc == 0 && resp.status != 200)
        rc = s3_status_error(s, &resp, "initiate multipart upload of", key);
    if (rc == 0)
        rc = nds_s3_parse_upload_id((const char *)resp.body.data, resp.body.len, &m->upload_id);
    nds_http_response_dispose(&resp);
    char *eid = rc == 0 ? nds_http_escape(m->upload_id, false) : NULL;
    if (rc == 0 && !(m->query_id = eid ? nds_asprintf("uploadId=%s", eid) : NULL))
        rc = nds_err(NDS_ENOMEM, "s3: out of memory");
    free(eid);
    return rc;
}

/* Sends parts [first, first + n) concurrently; records their ETags. */
static int mp_send_parts(s3_store *s, const char *key, const uint8_t *data, size_t len,
                         mp_upload *m, size_t first, size_t n) {
    s3_req *reqs = calloc(n, sizeof *reqs);
    nds_http_request *hr = calloc(n, sizeof *hr);
    nds_http_response *resps = calloc(n, sizeof *resps);
    int *rcs = calloc(n, sizeof *rcs),
        rc = reqs && hr && resps && rcs ? 0 : nds_err(NDS_ENOMEM, "s3: out of memory");
    size_t built = 0;
    for (; rc == 0 && built < n; built++) {
        size_t i = first + built, off, plen;
        mp_part(s, len, i, m->nparts, m->part, &off, &plen);
        char *q = nds_asprintf("partNumber=%zu&%s", i + 1, m->query_id);
        s3_call put = {.method = "PUT", .key = key, .query = q, .body = data + off, .len = plen};
        rc = q ? s3_req_build(s, &reqs[built], &put) : nds_err(NDS_ENOMEM, "s3: out of memory");
        free(q);
        if (rc == 0) hr[built] = reqs[built].http;
    }
    if (rc == 0) nds_http_perform_many(s->http, hr, &s->retry, resps, rcs, n);
    for (size_t j = 0; rc == 0 && j < n; j++) {
        char etag[128];
        if (rcs[j])
            rc = nds_err_prefix(rcs[j], "s3: upload part %zu of s3://%s/%s", first + j + 1,
                                s->bucket, key);
        else if (resps[j].status != 200)
            rc = s3_status_error(s, &resps[j], "upload part of", key);
        else if (!nds_http_header(&resps[j], "etag", etag, sizeof etag))
            rc = nds_err(NDS_EIO, "s3: part of %s has no ETag", key);
        else if (!(m->etags[first + j] = nds_strdup(etag)))
            rc = nds_err(NDS_ENOMEM, "s3: out of memory");
    }
    for (size_t j = 0; j < built && reqs; j++) s3_req_dispose(&reqs[j]);
    for (size_t j = 0; j < n && resps; j++) nds_http_response_dispose(&resps[j]);
    free(reqs);
    free(hr);
    free(resps);
    free(rcs);
    return rc;
}

static int mp_build_complete(mp_upload *m) {
    int rc = nds_buf_append(&m->complete_xml, "<CompleteMultipartUpload>", 25);
    for (size_t i = 0; rc == 0 && i < m->nparts; i++) {
        char head[64];
        int n = snprintf(head, sizeof head, "<Part><PartNumber>%zu</PartNumber><ETag>", i + 1);
        rc = nds_buf_append(&m->complete_xml, head, (size_t)n);
        if (rc == 0) rc = nds_xml_escape_append(&m->complete_xml, m->etags[i]);
        if (rc == 0) rc = nds_buf_append(&m->complete_xml, "</ETag></Part>", 14);
    }
    if (rc == 0) rc = nds_buf_append(&m->complete_xml, "</CompleteMultipartUpload>", 26);
    return rc ? nds_err(NDS_ENOMEM, "s3: out of memory") : 0;
}

/* Initiates the upload and sends every part (nothing visible yet). On failure the upload is
 * aborted. */
static int mp_start(s3_store *s, const char *key, const uint8_t *data, size_t len, mutation *mu,
                    mp_upload *m) {
    size_t part = (size_t)s->part_size;
    if (len / part >= 10000) part = len / 9999 + 1; /* S3 allows 10,000 parts */
    m->nparts = (len + part - 1) / part;
    m->part = part;
    m->etags = calloc(m->nparts, sizeof *m->etags);
    int rc = m->etags ? mp_initiate(s, key, mu->meta, m) : nds_err(NDS_ENOMEM, "s3: out of memory");
    for (size_t i = 0; rc == 0 && i < m->nparts; i += (size_t)s->concurrency) {
        size_t n = m->nparts - i < (size_t)s->concurrency ? m->nparts - i : (size_t)s->concurrency;
        rc = mp_send_parts(s, key, data, len, m, i, n);
    }
    if (rc == 0) rc = mp_build_complete(m);
    if (rc) mp_abort(s, key, m);
    mp_expected_etag(data, len, m->nparts, part, mu->expected_etag, sizeof mu->expected_etag);
    snprintf(mu->expected_gen, sizeof mu->expected_gen, "%s%c%s", mu->expected_etag, S3_GEN_SEP,
             mu->token);
    mu->mp = m;
    return rc;
}

/* ---- the mutation request ---- */

/* Sends m once through policy. Sets *status (0 when no response) and *attempts; a response's ETag
 * goes to gen. @return 0 when a response arrived, else the transport error */
static int mutation_send(s3_store *s, const mutation *m, const nds_http_retry *policy,
                         long timeout_ms, long *status, int *attempts, nds_generation *gen) {
    const char *hdrs[2];
    size_t nh = 0;
    if (m->cond[0]) hdrs[nh++] = m->cond;
    nds_http_response resp;
    int rc;
    if (m->mp) {
        s3_call complete = {"POST", m->key, m->mp->query_id, hdrs, nh, m->mp->complete_xml.data,
                            m->mp->complete_xml.len};
        rc = s3_send(s, &complete, policy, timeout_ms, &resp);
    } else {
        if (m->data) hdrs[nh++] = m->meta;
        s3_call put_or_delete = {m->data ? "PUT" : "DELETE", m->key, NULL, hdrs, nh, m->data,
                                 m->len};
        rc = s3_send(s, &put_or_delete, policy, timeout_ms, &resp);
    }
    *status = resp.status;
    *attempts = resp.attempts;
    if (rc) return rc;
    char code[64], msg[8];
    /* CompleteMultipartUpload may answer 200 with an <Error> body */
    if (m->mp && resp.status == 200 &&
        nds_s3_parse_error((const char *)resp.body.data, resp.body.len, code, sizeof code, msg,
                           sizeof msg))
        *status = strcmp(code, "PreconditionFailed") == 0 ? 412 : 500;
    if (*status >= 200 && *status < 300) {
        nds_generation etag = {NDS_GEN_NONE, {0}};
        char text[NDS_GENERATION_MAX];
        if (!m->data && !m->mp) {
            gen->kind = NDS_GEN_ABSENT;
        } else if (s3_etag_generation(&resp, &etag) ||
                   (m->mp &&
                    nds_xml_find((const char *)resp.body.data, resp.body.len,
                                 "CompleteMultipartUploadResult/ETag", text, sizeof text) &&
                    text[0])) {
            if (etag.kind != NDS_GEN_VALUE) { /* from the XML: strip the quotes */
                size_t n = strlen(text);
                if (n >= 2 && text[0] == '"') text[n - 1] = '\0';
                nds_generation_set(&etag, text[0] == '"' ? text + 1 : text);
            }
            snprintf(text, sizeof text, "%.60s%c%s", etag.value, S3_GEN_SEP, m->token);
            nds_generation_set(gen, text);
        } else { /* Ceph RGW answers an empty <ETag>: S3's formula, which it follows, gives it */
            nds_generation_set(gen, m->expected_gen);
        }
    } else if (!(*status == 412 || *status == 409 || *status == 404)) {
        rc = s3_status_error(s, &resp,
                             m->mp     ? "complete multipart upload of"
                             : m->data ? "PUT"
                                       : "DELETE",
                             m->key);
    }
    nds_http_response_dispose(&resp);
    return rc;
}

/* Interprets a refused mutation: a conflict, or our own earlier try. libcurl itself silently
 * resends a request whose reused connection died before any answer, so a refusal can follow our own
 * landed write even when we saw one attempt: every refusal is settled by a HEAD against the unique
 * generation we wrote. */
static int settle_refusal(s3_store *s, const mutation *m, long status, int attempts,
                          nds_generation *gen) {
    bool is_delete = !m->data && !m->mp;
    if (status == 404 && !m->cond[0] && is_delete) { /* an unconditional delete of nothing */
        gen->kind = NDS_GEN_ABSENT;
        return 0;
    }
    if (!is_delete) {
        nds_generation now;
        int rc = s3_head(s, m->key, &now, NULL, 0);
        if (rc) return rc;
        if (now.kind == NDS_GEN_VALUE && strcmp(now.value, m->expected_gen) == 0)
            return *gen = now, 0;
        /* A try whose answer we know was lost may have landed and been replaced since: calling
         * that a conflict would have the caller apply its update twice. */
        if (attempts > 1)
            return nds_err_cause(NDS_EIO, NDS_CAUSE_HTTP, status,
                                 "s3: write s3://%s/%s: an earlier try's answer was lost and the "
                                 "object has changed since (HTTP %ld): outcome unknown",
                                 s->bucket, m->key, status);
    } /* a refused conditional delete cannot be told from our own landed one: a conflict, so the
       * caller re-reads (and finds the key gone if it was ours) */
    if (status == 404 && m->mp)
        return nds_err(NDS_EIO, "s3: multipart upload of s3://%s/%s vanished", s->bucket, m->key);
    return nds_err_cause(NDS_ECONFLICT, NDS_CAUSE_HTTP, status,
                         "s3: %s s3://%s/%s: condition failed (HTTP %ld)",
                         is_delete ? "delete" : "write", s->bucket, m->key, status);
}

/* Sends m with the store's retries and settles its outcome. */
static int mutate(s3_store *s, const mutation *m, nds_generation *gen) {
    long status;
    int attempts;
    int rc = mutation_send(s, m, NULL, 0, &status, &attempts, gen);
    if (rc == 0 && (status == 412 || status == 409 || status == 404))
        rc = settle_refusal(s, m, status, attempts, gen);
    return rc;
}

/* Sends m under lease l: single tries, each bounded by the time left, so nothing is sent late. */
static int mutate_leased(s3_store *s, const mutation *m, const s3_lease *l, nds_generation *gen) {
    nds_http_retry once = {1, 0, 0};
    int rc = 0, total = 0;
    long status = 0;
    for (int i = 0; i < s->retry.max_attempts; i++) {
        long left = s3_lease_remaining_ms(l);
        if (left <= 0)
            return nds_err(
                NDS_ETIMEOUT,
                "s3: %s s3://%s/%s: the lease ran out before the request could be sent%s",
                m->data || m->mp ? "write" : "delete", s->bucket, m->key,
                total ? " again (an earlier try may have landed)" : "; nothing was written");
        int attempts = 0;
        status = 0;
        rc = mutation_send(s, m, &once, left < s->timeout_ms ? left : s->timeout_ms, &status,
                           &attempts, gen);
        total += attempts;
        bool retry = rc == NDS_ENETWORK || rc == NDS_ETIMEOUT ||
                     (rc != 0 && (status == 429 || (status >= 500 && status != 501)));
        if (!retry) break;
        nds_sleep_ns((1 + nds_random_u64() % (uint64_t)(20 << (i < 6 ? i : 6))) * 1000000ull);
    }
    if (rc == 0 && (status == 412 || status == 409 || status == 404))
        rc = settle_refusal(s, m, status, total, gen);
    return rc;
}

/* ---- per mode ---- */

/* Checks cond against the key's current generation (by HEAD). */
static int check_by_head(s3_store *s, const char *key, const nds_generation *cond, bool is_delete) {
    nds_generation cur;
    int rc = s3_head(s, key, &cur, NULL, 0);
    if (rc == 0 && !nds_generation_satisfies(cond, &cur))
        rc = nds_err(NDS_ECONFLICT, "s3: %s s3://%s/%s: generation changed",
                     is_delete ? "delete" : "write", s->bucket, key);
    return rc;
}

static int write_full(s3_store *s, mutation *m, const nds_generation *cond,
                      const s3_cond_decision *d, nds_generation *gen) {
    if (cond->kind == NDS_GEN_ABSENT && !m->data &&
        !m->mp) /* delete only if absent: nothing to do, or a conflict */
        return check_by_head(s, m->key, cond, true);
    if (cond->kind == NDS_GEN_ABSENT)
        snprintf(m->cond, sizeof m->cond, "If-None-Match: *");
    else if (cond->kind == NDS_GEN_VALUE) {
        char etag[NDS_GENERATION_MAX]; /* the server compares ETags: identical bytes pass,
                                          harmlessly */
        s3_gen_etag(cond, etag, sizeof etag);
        snprintf(m->cond, sizeof m->cond, d->etag_unquoted ? "If-Match: %s" : "If-Match: \"%s\"",
                 etag);
    }
    return mutate(s, m, gen);
}

static int write_leased(s3_store *s, mutation *m, const nds_generation *cond, nds_generation *gen) {
    /* a create-only writer that skips the lease may land between our HEAD and PUT: the header makes
     * the server refuse ours then (a multipart completion may ignore it: see the header comment) */
    if (cond->kind == NDS_GEN_ABSENT && (m->data || m->mp))
        snprintf(m->cond, sizeof m->cond, "If-None-Match: *");
    s3_lease l;
    int rc = s3_lease_acquire(s, m->key, &l);
    if (rc) return rc;
    if (cond->kind != NDS_GEN_NONE) rc = check_by_head(s, m->key, cond, !m->data && !m->mp);
    if (rc == 0) rc = mutate_leased(s, m, &l, gen);
    s3_lease_release(s, &l);
    return rc;
}

static int refuse(const s3_store *s, const mutation *m, const nds_generation *cond,
                  const s3_cond_decision *d) {
    if (cond->kind == NDS_GEN_ABSENT) /* what a versioned store's commits are made of: say so */
        return nds_err(NDS_EUNSUPPORTED,
                       "s3: %s s3://%s/%s needs create-only writes (If-None-Match: *), which %s "
                       "does not provide (%s); nothing was written. A versioned store cannot run "
                       "on it (create-only writes decide its commits); a plain store can, with "
                       "\"conditional_writes\": \"off\" (unsafe with concurrent writers)",
                       m->data ? "write" : "delete", s->bucket, m->key, s->endpoint, d->reason);
    return nds_err(
        NDS_EUNSUPPORTED,
        "s3: %s s3://%s/%s: conditional writes are not available on %s (%s); nothing was written. "
        "Set \"conditional_writes\": \"off\" to write without them (unsafe with concurrent "
        "writers)",
        m->data ? "write" : "delete", s->bucket, m->key, s->endpoint, d->reason);
}

/* S3's limit for one PUT (5 GiB). */
#define S3_SINGLE_PUT_MAX (5ull << 30)

/* true when a lease-mode write needs no lease: a create-only write the server decides by itself
 * (one PUT with If-None-Match: *), or a delete "only if absent" (a HEAD decides it). */
static bool lease_not_needed(const nds_generation *cond, const uint8_t *data, size_t len) {
    return cond->kind == NDS_GEN_ABSENT && (!data || len <= S3_SINGLE_PUT_MAX);
}

/* A mutation of key with its unique token and the ETag and generation our bytes get. */
static void mutation_init(mutation *m, const char *key, const uint8_t *data, size_t len) {
    *m = (mutation){.key = key, .data = data, .len = len};
    snprintf(m->token, sizeof m->token, "%016llx", (unsigned long long)nds_random_u64());
    snprintf(m->meta, sizeof m->meta, "%s: %s", S3_GEN_META, m->token);
    if (data) nds_md5_hex(data, len, m->expected_etag);
    snprintf(m->expected_gen, sizeof m->expected_gen, "%s%c%s", m->expected_etag, S3_GEN_SEP,
             m->token);
}

/* A hint has no conditional writer to be ordered against, so no mode needs more than the PUT (a
 * value above the multipart threshold, never a hint in practice, takes the ordinary path). */
int s3_write_hint(void *state, const char *key, const uint8_t *data, size_t len) {
    s3_store *s = state;
    nds_generation gen;
    if (len > s->multipart_threshold) {
        nds_write_options o = NDS_WRITE_OPTIONS_INIT;
        return s3_write(state, key, data, len, &o, &gen);
    }
    mutation m;
    mutation_init(&m, key, data, len);
    return mutate(s, &m, &gen);
}

int s3_write(void *state, const char *key, const uint8_t *data, size_t len,
             const nds_write_options *opts, nds_generation *new_gen) {
    s3_store *s = state;
    s3_cond_decision d;
    int rc = s3_cond_decide(s, key, &d);
    if (rc) return rc;
    const nds_generation *cond = &opts->if_equal;
    mutation m;
    mutation_init(&m, key, data, len);
    if (d.mode == S3_COND_NONE && cond->kind != NDS_GEN_NONE) return refuse(s, &m, cond, &d);
    mp_upload mp = {0};
    bool direct = d.mode == S3_COND_LEASE && lease_not_needed(cond, data, len);
    if (data && len > s->multipart_threshold && !direct &&
        (rc = mp_start(s, key, data, len, &m, &mp)) != 0) {
        mp_free(&mp);
        return rc;
    }
    nds_generation gen = {NDS_GEN_NONE, {0}};
    if (d.mode == S3_COND_FULL || direct)
        rc = write_full(s, &m, cond, &d, &gen);
    else if (d.mode == S3_COND_LEASE)
        rc = write_leased(s, &m, cond, &gen);
    else {
        if (d.mode == S3_COND_OFF && cond->kind != NDS_GEN_NONE)
            rc = check_by_head(s, key, cond, !data);
        if (rc == 0) rc = mutate(s, &m, &gen);
    }
    if (rc && m.mp) mp_abort(s, key, &mp);
    mp_free(&mp);
    if (rc == 0) *new_gen = gen;
    return rc;
}
