/* AWS Signature Version 4 for S3 requests (header authentication), with OpenSSL's SHA-256 and HMAC.
 *
 * Implements the canonical request, the string to sign, the signing key and the Authorization
 * header as botocore's S3SigV4Auth computes them (checked against botocore in
 * tests/unit/test_sigv4.c): the path is signed as sent (S3 does not normalise or double-encode it),
 * the query is sorted by encoded name then value, every header given is signed (names lower-cased,
 * values trimmed with inner runs of spaces collapsed). Omits presigned URLs, chunked (streaming)
 * payload signing and SigV4a.
 *
 * Threading: pure functions, any thread. Ownership: inputs are borrowed; outputs go to caller
 * buffers.
 */
#ifndef NDS_DRIVERS_AWS_SIGV4_H
#define NDS_DRIVERS_AWS_SIGV4_H

#include <stddef.h>

/** Hex SHA-256 of the empty string: the payload hash of a GET, HEAD or DELETE. */
#define NDS_SIGV4_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
/** Payload hash that leaves the body unsigned (still sent as x-amz-content-sha256). */
#define NDS_SIGV4_UNSIGNED "UNSIGNED-PAYLOAD"

/** What one request signature covers. Every string is borrowed. */
typedef struct nds_sigv4_request {
    const char *method; /* "GET" */
    const char *path;   /* URI-encoded absolute path as sent: "/bucket/a%20b" */
    const char *query; /* URI-encoded query as sent without '?' ("list-type=2&prefix=a"), or NULL */
    const char *const *headers; /* "Name: value" lines to sign; must include Host, x-amz-date and
                                 * x-amz-content-sha256 (and x-amz-security-token with a session) */
    size_t nheaders;
    const char *payload_hash; /* hex SHA-256 of the body, or NDS_SIGV4_UNSIGNED */
    const char *amz_date;     /* "20240102T030405Z", the same as the x-amz-date header */
    const char *region;       /* "us-east-1" */
    const char *service;      /* "s3" */
    const char *access_key;
    const char *secret_key;
} nds_sigv4_request;

/** Lower-case hex SHA-256 of data[0..len) into out (65 bytes with the NUL). */
void nds_sha256_hex(const void *data, size_t len, char out[65]);
/** Base64 of the MD5 of data[0..len) into out (25 bytes with the NUL): a Content-MD5 value. */
void nds_md5_base64(const void *data, size_t len, char out[25]);
/** Lower-case hex MD5 of data[0..len) into out (33 bytes with the NUL): a single-part S3 ETag. */
void nds_md5_hex(const void *data, size_t len, char out[33]);

/**
 * The canonical request of r, malloc'd (free with free()); NULL when out of memory or a header line
 * has no colon. Exposed for tests and debugging.
 */
char *nds_sigv4_canonical_request(const nds_sigv4_request *r);

/**
 * Signs r: writes the Authorization header's value ("AWS4-HMAC-SHA256 Credential=...,
 * SignedHeaders=..., Signature=...") into out. @return 0, NDS_EINVAL (bad header line, short
 * amz_date), NDS_ELIMIT (cap too small) or NDS_ENOMEM. The secret key never appears in out or in
 * any error message.
 */
int nds_sigv4_authorization(const nds_sigv4_request *r, char *out, size_t cap);

/** The "YYYYMMDDTHHMMSSZ" form of Unix time t (UTC) into out (17 bytes with the NUL). */
void nds_sigv4_amz_date(long long t, char out[17]);

#endif
