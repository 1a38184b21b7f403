/* AWS Signature Version 4 (aws_sigv4.h): canonical request, string to sign, signing key,
 * Authorization.
 *
 * Follows botocore's S3SigV4Auth step by step (the reference the unit test compares with): the path
 * as sent, the query pairs sorted as (name, value) byte strings, headers lower-cased, grouped by
 * name (values joined by ','), values trimmed with runs of whitespace collapsed, names sorted.
 * Omits presigning and streaming (aws-chunked) signatures.
 *
 * Threading: pure functions. Ownership: the canonical request is malloc'd for the caller; the HMAC
 * intermediates hold key material and are wiped before return.
 */
#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/crypto.h>

#include "aws_sigv4.h"
#include "ndstore/sys/buf.h"
#include "internal/error.h"

static void to_hex(const unsigned char *p, size_t n, char *out) {
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex[p[i] >> 4];
        out[2 * i + 1] = hex[p[i] & 15];
    }
    out[2 * n] = '\0';
}

void nds_sha256_hex(const void *data, size_t len, char out[65]) {
    unsigned char md[32];
    unsigned int n = 0;
    EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
    to_hex(md, 32, out);
}

void nds_md5_hex(const void *data, size_t len, char out[33]) {
    unsigned char md[16];
    unsigned int n = 0;
    EVP_Digest(data, len, md, &n, EVP_md5(), NULL);
    to_hex(md, 16, out);
}

void nds_md5_base64(const void *data, size_t len, char out[25]) {
    unsigned char md[16];
    unsigned int n = 0;
    EVP_Digest(data, len, md, &n, EVP_md5(), NULL);
    EVP_EncodeBlock((unsigned char *)out, md, 16); /* 24 chars + NUL */
}

void nds_sigv4_amz_date(long long t, char out[17]) {
    time_t tt = (time_t)t;
    struct tm tm;
    gmtime_r(&tt, &tm);
    strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

/* ---- canonical headers ---- */

typedef struct hdr {
    char *name;  /* lower-case, malloc'd */
    char *value; /* trimmed, runs of whitespace collapsed, malloc'd */
} hdr;

static int hdr_cmp(const void *a, const void *b) {
    return strcmp(((const hdr *)a)->name, ((const hdr *)b)->name);
}

/* Splits "Name: value" into a canonical (name, value) pair. @return 0, NDS_EINVAL or NDS_ENOMEM */
static int hdr_parse(const char *line, hdr *h) {
    const char *colon = strchr(line, ':');
    if (!colon || colon == line) return NDS_EINVAL;
    size_t nlen = (size_t)(colon - line);
    while (nlen > 0 && isspace((unsigned char)line[nlen - 1])) nlen--;
    h->name = malloc(nlen + 1);
    h->value = malloc(strlen(colon) + 1);
    if (!h->name || !h->value) return NDS_ENOMEM;
    for (size_t i = 0; i < nlen; i++) h->name[i] = (char)tolower((unsigned char)line[i]);
    h->name[nlen] = '\0';
    char *o = h->value;
    bool pending_space = false;
    for (const char *p = colon + 1; *p; p++) {
        if (isspace((unsigned char)*p)) {
            pending_space = o != h->value;
            continue;
        }
        if (pending_space) *o++ = ' ';
        pending_space = false;
        *o++ = *p;
    }
    *o = '\0';
    return 0;
}

static bool hdr_unsigned(const char *name) {
    return strcmp(name, "expect") == 0 || strcmp(name, "user-agent") == 0 ||
           strcmp(name, "x-amzn-trace-id") == 0 || strcmp(name, "authorization") == 0;
}

/* Appends "name:v1,v2\n" lines to canon and "name;name" to signed_list. */
static int append_headers(hdr *hs, size_t n, nds_buf *canon, nds_buf *signed_list) {
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        bool first_of_name = i == 0 || strcmp(hs[i].name, hs[i - 1].name) != 0;
        bool last_of_name = i + 1 == n || strcmp(hs[i].name, hs[i + 1].name) != 0;
        if (first_of_name) {
            if (signed_list->len) rc |= nds_buf_append(signed_list, ";", 1);
            rc |= nds_buf_append(signed_list, hs[i].name, strlen(hs[i].name));
            rc |= nds_buf_append(canon, hs[i].name, strlen(hs[i].name));
            rc |= nds_buf_append(canon, ":", 1);
        } else {
            rc |= nds_buf_append(canon, ",", 1);
        }
        rc |= nds_buf_append(canon, hs[i].value, strlen(hs[i].value));
        if (last_of_name) rc |= nds_buf_append(canon, "\n", 1);
    }
    return rc ? NDS_ENOMEM : 0;
}

/* Canonical header block (with its trailing blank line's newline) and the signed-header list. */
static int canonical_headers(const nds_sigv4_request *r, nds_buf *canon, nds_buf *signed_list) {
    hdr *hs = calloc(r->nheaders ? r->nheaders : 1, sizeof *hs);
    if (!hs) return NDS_ENOMEM;
    size_t n = 0;
    int rc = 0;
    for (size_t i = 0; i < r->nheaders && rc == 0; i++) {
        rc = hdr_parse(r->headers[i], &hs[n]);
        if (rc == 0 && hdr_unsigned(hs[n].name)) {
            free(hs[n].name);
            free(hs[n].value);
            hs[n].name = hs[n].value = NULL;
        } else {
            n++;
        }
    }
    if (rc == 0) {
        /* a stable order for equal names keeps their values in the order given, as botocore does */
        for (size_t i = 1; i < n; i++)
            for (size_t j = i; j > 0 && hdr_cmp(&hs[j - 1], &hs[j]) > 0; j--) {
                hdr t = hs[j];
                hs[j] = hs[j - 1];
                hs[j - 1] = t;
            }
        rc = append_headers(hs, n, canon, signed_list);
    }
    for (size_t i = 0; i <= n && i < r->nheaders; i++) {
        free(hs[i].name);
        free(hs[i].value);
    }
    free(hs);
    return rc;
}

/* ---- canonical query ---- */

typedef struct qpair {
    const char *k, *v;
    size_t klen, vlen;
} qpair;

static int qpair_cmp(const void *a, const void *b) {
    const qpair *x = a, *y = b;
    size_t n = x->klen < y->klen ? x->klen : y->klen;
    int c = memcmp(x->k, y->k, n);
    if (c || x->klen != y->klen) return c ? c : (x->klen < y->klen ? -1 : 1);
    n = x->vlen < y->vlen ? x->vlen : y->vlen;
    c = memcmp(x->v, y->v, n);
    return c ? c : (x->vlen < y->vlen ? -1 : x->vlen > y->vlen);
}

/* "b=2&a=1&uploads" -> "a=1&b=2&uploads=" */
static int canonical_query(const char *q, nds_buf *out) {
    if (!q || !*q) return 0;
    size_t n = 1;
    for (const char *p = q; *p; p++) n += *p == '&';
    qpair *ps = calloc(n, sizeof *ps);
    if (!ps) return NDS_ENOMEM;
    size_t m = 0;
    for (const char *p = q; m < n; m++) {
        const char *end = strchr(p, '&');
        if (!end) end = p + strlen(p);
        const char *eq = memchr(p, '=', (size_t)(end - p));
        ps[m].k = p;
        ps[m].klen = eq ? (size_t)(eq - p) : (size_t)(end - p);
        ps[m].v = eq ? eq + 1 : end;
        ps[m].vlen = (size_t)(end - ps[m].v);
        p = *end ? end + 1 : end;
    }
    qsort(ps, m, sizeof *ps, qpair_cmp);
    int rc = 0;
    for (size_t i = 0; i < m; i++) {
        if (i) rc |= nds_buf_append(out, "&", 1);
        rc |= nds_buf_append(out, ps[i].k, ps[i].klen);
        rc |= nds_buf_append(out, "=", 1);
        rc |= nds_buf_append(out, ps[i].v, ps[i].vlen);
    }
    free(ps);
    return rc ? NDS_ENOMEM : 0;
}

/* ---- canonical request ---- */

static int build_canonical(const nds_sigv4_request *r, nds_buf *cr, nds_buf *signed_list) {
    nds_buf hb = {0};
    int rc = 0;
    const char *path = r->path && *r->path ? r->path : "/";
    rc |= nds_buf_append(cr, r->method, strlen(r->method));
    rc |= nds_buf_append(cr, "\n", 1);
    rc |= nds_buf_append(cr, path, strlen(path));
    rc |= nds_buf_append(cr, "\n", 1);
    if (rc == 0) rc = canonical_query(r->query, cr);
    if (rc == 0) rc = nds_buf_append(cr, "\n", 1);
    if (rc == 0) rc = canonical_headers(r, &hb, signed_list);
    if (rc == 0) rc = nds_buf_append(cr, hb.data ? (const char *)hb.data : "", hb.len);
    if (rc == 0) rc = nds_buf_append(cr, "\n", 1);
    if (rc == 0) rc = nds_buf_append(cr, signed_list->data, signed_list->len);
    if (rc == 0) rc = nds_buf_append(cr, "\n", 1);
    if (rc == 0) rc = nds_buf_append(cr, r->payload_hash, strlen(r->payload_hash));
    if (rc == 0) rc = nds_buf_append(cr, "", 1); /* NUL */
    if (rc == 0) rc = nds_buf_append(signed_list, "", 1);
    nds_buf_dispose(&hb);
    return rc ? (rc == NDS_EINVAL ? NDS_EINVAL : NDS_ENOMEM) : 0;
}

char *nds_sigv4_canonical_request(const nds_sigv4_request *r) {
    nds_buf cr = {0}, sl = {0};
    int rc = build_canonical(r, &cr, &sl);
    nds_buf_dispose(&sl);
    if (rc != 0) {
        nds_buf_dispose(&cr);
        return NULL;
    }
    return (char *)cr.data;
}

/* ---- signature ---- */

static void hmac(const void *key, size_t klen, const char *msg, unsigned char out[32]) {
    unsigned int n = 32;
    HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg, strlen(msg), out, &n);
}

/* Hex signature of string_to_sign with the key derived from secret, date, region and service. */
static int sign(const nds_sigv4_request *r, const char *date8, const char *sts, char sig_hex[65]) {
    size_t slen = strlen(r->secret_key);
    char *k = malloc(slen + 5);
    if (!k) return NDS_ENOMEM;
    memcpy(k, "AWS4", 4);
    memcpy(k + 4, r->secret_key, slen + 1);
    unsigned char kd[32], kr[32], ks[32], kk[32], sig[32];
    hmac(k, slen + 4, date8, kd);
    hmac(kd, 32, r->region, kr);
    hmac(kr, 32, r->service, ks);
    hmac(ks, 32, "aws4_request", kk);
    hmac(kk, 32, sts, sig);
    to_hex(sig, 32, sig_hex);
    OPENSSL_cleanse(k, slen + 4);
    OPENSSL_cleanse(kd, 32);
    OPENSSL_cleanse(kr, 32);
    OPENSSL_cleanse(ks, 32);
    OPENSSL_cleanse(kk, 32);
    free(k);
    return 0;
}

int nds_sigv4_authorization(const nds_sigv4_request *r, char *out, size_t cap) {
    if (!r->amz_date || strlen(r->amz_date) != 16)
        return nds_err(NDS_EINVAL, "sigv4: x-amz-date must look like 20240102T030405Z");
    nds_buf cr = {0}, sl = {0};
    int rc = build_canonical(r, &cr, &sl);
    if (rc != 0) {
        nds_buf_dispose(&cr);
        nds_buf_dispose(&sl);
        return rc == NDS_EINVAL ? nds_err(rc, "sigv4: a header line to sign has no ':'")
                                : nds_err(rc, "sigv4: out of memory");
    }
    char date8[9], cr_hash[65], scope[256], sig[65];
    memcpy(date8, r->amz_date, 8);
    date8[8] = '\0';
    nds_sha256_hex(cr.data, cr.len - 1, cr_hash);
    snprintf(scope, sizeof scope, "%s/%s/%s/aws4_request", date8, r->region, r->service);
    char *sts = malloc(strlen(scope) + 128);
    rc = sts ? 0 : NDS_ENOMEM;
    if (rc == 0) {
        sprintf(sts, "AWS4-HMAC-SHA256\n%s\n%s\n%s", r->amz_date, scope, cr_hash);
        rc = sign(r, date8, sts, sig);
    }
    if (rc == 0) {
        int n =
            snprintf(out, cap, "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s",
                     r->access_key, scope, (const char *)sl.data, sig);
        if (n < 0 || (size_t)n >= cap)
            rc = nds_err(NDS_ELIMIT, "sigv4: authorization header too long");
    } else {
        rc = nds_err(rc, "sigv4: out of memory");
    }
    free(sts);
    nds_buf_dispose(&cr);
    nds_buf_dispose(&sl);
    return rc;
}
