/* What the s3 driver's files share: the store instance, signed requests, error mapping, credentials
 * and the conditional-write machinery (probe, lease lock). Not a public interface. Calls run one
 * way, from the driver down to the requests:
 *
 * kv_s3.c      the driver (spec, URL, read, list, delete_range, the driver table)
 * s3_write.c   writes and deletes per conditional-write mode, multipart uploads
 * s3_cond.c    conditional writes: the "auto" probe (once per process per endpoint), the lease lock
 * s3_creds.c   credentials: environment, ~/.aws/credentials profiles, anonymous
 * s3_request.c signed requests, sending, status errors, ETag generations, HEAD, spec errors
 * s3_xml.c     the XML documents
 */
#ifndef NDS_DRIVERS_S3_INTERNAL_H
#define NDS_DRIVERS_S3_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "ndstore/sys/kv_driver.h"
#include "http_multi.h"

/** Credentials. Never printed, never put in a spec or a message. */
typedef struct s3_creds {
    bool anonymous;
    char *access_key, *secret_key, *session_token; /* malloc'd; wiped on free */
    char source[64]; /* "environment", "profile default", "anonymous": for messages */
} s3_creds;

/** How conditional writes are carried out (the decided mode). */
typedef enum s3_cond_mode {
    S3_COND_UNKNOWN = 0, /* auto, not probed yet */
    S3_COND_FULL,  /* If-Match and If-None-Match: * on the request itself (atomic on the server) */
    S3_COND_LEASE, /* only If-None-Match: * is trusted: every mutation runs under a lease object */
    S3_COND_NONE,  /* nothing conditional works: conditional writes refused */
    S3_COND_OFF    /* user chose "off": conditions checked by a HEAD first, not atomic */
} s3_cond_mode;

/** What a probe (or the user) decided for an endpoint. */
typedef struct s3_cond_decision {
    s3_cond_mode mode;
    bool etag_unquoted; /* If-Match wants the bare ETag (Ceph RGW) */
    char reason[512];   /* one line: what was observed */
} s3_cond_decision;

/** One s3 store instance. Immutable after open except the decision (under probe_mu). */
typedef struct s3_store {
    char *bucket;
    char *endpoint;       /* "http://127.0.0.1:7480", no trailing slash; as given, or AWS's */
    char *endpoint_given; /* spec "endpoint" or NULL */
    char *scheme_host; /* "http://127.0.0.1:7480" or "https://bucket.s3.us-east-1.amazonaws.com" */
    char *host;        /* Host header value */
    char *base_path;   /* "/bucket" (path-style) or "" (virtual-hosted) */
    char *region;
    bool virtual_hosted;
    bool unsigned_payload; /* x-amz-content-sha256: UNSIGNED-PAYLOAD on https */
    s3_creds creds;
    nds_http_client *http;
    int concurrency;
    nds_http_retry retry;
    long timeout_ms;
    nds_http_limits limits; /* response size, stall and deadline bounds (spec and environment) */
    uint64_t multipart_threshold, part_size;
    int cond_requested; /* S3_COND_UNKNOWN for "auto", else the mode asked for */
    long lease_ms;      /* lease lifetime */
    long lease_wait_ms; /* how long a writer waits for a held lease */
    pthread_mutex_t probe_mu;
    atomic_int cond_ready; /* 1 once decision is set */
    s3_cond_decision decision;
} s3_store;

/** A request's signed pieces, owned. */
typedef struct s3_req {
    char *url;
    char *hdr[16];
    size_t nhdr;
    nds_http_request http;
} s3_req;

/** What a request asks of the store, everything borrowed (zero members: none). */
typedef struct s3_call {
    const char *method;        /**< "GET", "PUT", ... */
    const char *key;           /**< NULL addresses the bucket */
    const char *query;         /**< already encoded, without '?'; may be NULL */
    const char *const *extra;  /**< additional "Name: value" headers (signed) */
    size_t nextra;
    const uint8_t *body;       /**< borrowed until the request is done; may be NULL */
    size_t len;
} s3_call;

/* ---- s3_request.c ---- */
/** Builds and signs the request c describes into r. */
int s3_req_build(s3_store *s, s3_req *r, const s3_call *c);
void s3_req_dispose(s3_req *r);
/** Builds, sends (with policy, NULL = the store's retries; timeout_ms 0 = the store's) and
 *  disposes one request. @return as nds_http_perform, with the error message naming op and key */
int s3_send(s3_store *s, const s3_call *c, const nds_http_retry *policy, long timeout_ms,
            nds_http_response *resp);
/** The error for an unexpected HTTP status: names op, s3://bucket/key, status, the server's error
 * code and message; cause NDS_CAUSE_HTTP. */
int s3_status_error(const s3_store *s, const nds_http_response *resp, const char *op,
                    const char *key);
/* A generation is "<ETag>#<token>": the ETag without quotes, and the random token each write stores
 * in the object's metadata (S3_GEN_META), so that rewriting identical bytes (same ETag) still
 * changes the generation. Objects written by other tools have no token: their generation is the
 * bare ETag. Conditions sent to the server carry the ETag part only. */
#define S3_GEN_META "x-amz-meta-ndstore-g"
#define S3_GEN_SEP '#'
/** The object's ETag (quotes stripped) from a response. false when it has none. */
bool s3_etag_generation(const nds_http_response *resp, nds_generation *g);
/** The generation of the object a GET/HEAD/PUT response describes (ETag#token, or a Last-Modified
 * stand-in). */
void s3_generation(const nds_http_response *resp, nds_generation *g);
/** The ETag part of a generation into out. */
void s3_gen_etag(const nds_generation *g, char *out, size_t cap);
/** Sets g to the absent generation. */
void s3_gen_absent(nds_generation *g);
/** Whether a 404 response is of a missing key (NoSuchKey, or no body for HEAD), not bucket. */
bool s3_missing_key(const nds_http_response *resp);
/** HEAD of key: its generation (ABSENT when missing). */
int s3_head(s3_store *s, const char *key, nds_generation *g, const nds_http_retry *policy,
            long timeout_ms);
/** A spec error (json_util's NDS_EFORMAT) as NDS_EINVAL, keeping its message. */
int s3_spec_error(int rc);
/** Removes secrets from a message in place (defence in depth). */
void s3_redact(const s3_store *s, char *msg);

/* ---- s3_write.c ---- */
/** The driver's write method (data NULL = delete), after the key was checked. */
int s3_write(void *state, const char *key, const uint8_t *data, size_t len,
             const nds_write_options *opts, nds_generation *new_gen);

/** The driver's write_hint method (kv_driver.h), after the key was checked: one plain PUT in
 *  every mode (never the lease). */
int s3_write_hint(void *state, const char *key, const uint8_t *data, size_t len);

/* ---- s3_creds.c ---- */
/** Resolves credentials from the spec's "aws_credentials" (may be NULL), the environment and
 *  ~/.aws/credentials. */
int s3_creds_load(s3_creds *c, const struct json_object *spec_creds);
void s3_creds_free(s3_creds *c);

/* ---- s3_cond.c ---- */
/** The decided mode (probing the endpoint first when "auto" and not yet probed). */
int s3_cond_decide(s3_store *s, const char *key_hint, s3_cond_decision *out);
/** The decision's mode as spec text ("full", "create_only", "none", "off", "not probed yet"). */
const char *s3_cond_mode_name(s3_cond_mode m);

/** A held lease on one key. */
typedef struct s3_lease {
    char *lock_key;
    char token[33];
    uint64_t deadline_ns; /* mutations must be sent before this (monotonic) */
} s3_lease;
/** Acquires the lease of key (waiting, breaking an expired one). NDS_ETIMEOUT after lease_wait_ms.
 */
int s3_lease_acquire(s3_store *s, const char *key, s3_lease *l);
/** Milliseconds left to send mutations under l; 0 when expired. */
long s3_lease_remaining_ms(const s3_lease *l);
/** Releases l (only while it is surely still ours) and frees it. */
void s3_lease_release(s3_store *s, s3_lease *l);
/** true when key is one of the driver's own objects (lease, break claim, probe): hidden from list.
 */
bool s3_reserved_key(const char *key);

#endif
