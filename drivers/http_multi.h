/* The shared HTTP layer of the s3, gcs and http kvstore drivers (libcurl).
 *
 * One client per driver instance: a curl multi handle driven by the client's own I/O thread, a shared
 * connection cache and DNS cache, and a concurrency limit (requests beyond it wait in a queue). Any thread
 * may call nds_http_perform at once; each call blocks until its request is done. nds_http_perform_many runs a
 * batch concurrently (the S3/GCS batch path). Retries with exponential backoff and jitter on 429, 5xx,
 * connection resets and timeouts live here too, so every driver behaves the same.
 *
 * Bounds (nds_http_limits): every response body has a size limit (the client's, or a smaller one
 * the request asks for); a try that moves less than 1 byte/s for the stall time is cut; and an
 * operation (a request with all its retries) has a deadline. Each is a spec member of the driver
 * and an environment variable, so no wait and no allocation is left unbounded. The limits' parsing,
 * credential files and the listing-progress check live in http_bounds.c.
 *
 * Network access in tests is to 127.0.0.1 only; the client itself does not restrict hosts.
 */
#ifndef NDS_DRIVERS_HTTP_MULTI_H
#define NDS_DRIVERS_HTTP_MULTI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "ndstore/sys/buf.h"

typedef struct nds_http_client nds_http_client;

/** One request. Everything is borrowed for the duration of the call. */
typedef struct nds_http_request {
    const char *method;            /* "GET", "PUT", "HEAD", "DELETE", "POST" */
    const char *url;               /* full URL, already escaped */
    const char *const *headers;    /* "Name: value" lines */
    size_t nheaders;
    const uint8_t *body;           /* request body (PUT/POST), may be NULL */
    size_t body_len;
    long timeout_ms;               /* one try's timeout; 0 = the client's default (60 s) */
    uint64_t max_response_bytes;   /* a larger body is an error (NDS_ELIMIT); 0 = the client's
                                      limit; never more than the client's limit */
} nds_http_request;

/** One response; dispose with nds_http_response_dispose. */
typedef struct nds_http_response {
    long status;                   /* HTTP status, 0 when no response arrived */
    nds_buf body;                  /* response body */
    char *headers;                 /* raw header block of the final response, NUL-terminated */
    int curl_code;                 /* CURLcode of the transfer (0 = OK) */
    int attempts;                  /* tries made (retries + 1) */
    bool body_cut;                 /* an error status's body was cut at NDS_HTTP_ERROR_BODY_MAX */
    bool deadline_hit;             /* retries were stopped by the operation's deadline */
    char retries[256];             /* why each retry happened ("try 1: HTTP 503; ..."), or "" */
} nds_http_response;

/** Bodies of error statuses (>= 300) are kept up to this many bytes; the rest is not read. */
#define NDS_HTTP_ERROR_BODY_MAX (64u << 10)
/** A response's header block larger than this fails the try (NDS_ELIMIT). */
#define NDS_HTTP_HEADER_MAX (256u << 10)
/** A response that is a small document (an upload's result, object metadata, a token) larger than
 * this fails. */
#define NDS_HTTP_DOCUMENT_MAX (1u << 20)
/** A listing page larger than this fails (S3 and GCS pages of 1000 keys are a few MiB at most). */
#define NDS_HTTP_LISTING_MAX (16u << 20)

/** The bounds of a client (see the file comment). */
typedef struct nds_http_limits {
    uint64_t max_response_bytes; /* largest body accepted; default 4 GiB */
    long deadline_ms;            /* an operation with its retries; default 60 s */
    long stall_ms;               /* a try moving < 1 byte/s this long is cut; default 15 s */
    bool deadline_given;         /* set explicitly (else it grows to a longer per-try timeout) */
    char member_prefix[8];       /* the driver's spec member prefix ("gcs_"), for messages */
} nds_http_limits;
#define NDS_HTTP_LIMITS_DEFAULT {4ull << 30, 60000L, 15000L, false, ""}

/** Retry policy: tries at most max_attempts times while retryable(resp) says so. */
typedef struct nds_http_retry {
    int max_attempts;              /* >= 1; default 8 */
    long base_delay_ms;            /* first backoff ceiling; default 50; doubles, with full jitter */
    long max_delay_ms;             /* cap of the ceiling; default 5000 */
} nds_http_retry;
#define NDS_HTTP_RETRY_DEFAULT {8, 50, 5000}

/** Creates a client with at most max_concurrency transfers at once (0 = 32). */
int nds_http_client_new(nds_http_client **out, int max_concurrency);
/** Sets the client's bounds (before its first request). */
void nds_http_client_set_limits(nds_http_client *c, const nds_http_limits *l);
/** Stops the I/O thread and frees. Accepts NULL. No call may be running. */
void nds_http_client_free(nds_http_client *c);

/**
 * Performs req (with retries per policy; NULL = no retry) and fills *resp. Returns 0 when a response was
 * received (whatever its status) and NDS_ENETWORK / NDS_ETIMEOUT (cause NDS_CAUSE_CURL) when none was, after
 * the last try, or NDS_ELIMIT past a size limit; then resp holds no body or headers (attempts, curl_code
 * and retries stay). A request body is re-sent on every retry. Any thread.
 */
int nds_http_perform(nds_http_client *c, const nds_http_request *req, const nds_http_retry *policy,
                     nds_http_response *resp);
/** Performs n requests concurrently (each with retries); rcs[i] as nds_http_perform would return. */
void nds_http_perform_many(nds_http_client *c, const nds_http_request *reqs, const nds_http_retry *policy,
                           nds_http_response *resps, int *rcs, size_t n);
/** Whether a response should be retried by default: no response (reset, timeout), 429, or 5xx except 501. */
bool nds_http_retryable(const nds_http_response *resp);
/** The value of header name (case-insensitive) into buf, trimmed; false when absent. */
bool nds_http_header(const nds_http_response *resp, const char *name, char *buf, size_t cap);
/** Frees what resp holds and zeroes it. */
void nds_http_response_dispose(nds_http_response *resp);
/** Percent-encodes s for a URL path (keeping '/' when keep_slash) into a malloc'd string. */
char *nds_http_escape(const char *s, bool keep_slash);

/* ---- http_bounds.c ---- */

/** The defaults, then the environment: NDS_HTTP_MAX_RESPONSE_BYTES (bytes, suffix k/M/G/T for
 *  KiB...), NDS_HTTP_DEADLINE and NDS_HTTP_STALL_TIMEOUT (durations: "500ms", "2s", "1m" or
 *  seconds). NDS_EINVAL naming the variable for a bad value. */
int nds_http_limits_init(nds_http_limits *l, const char *member_prefix);
/** Spec members <prefix>max_response_bytes (integer), <prefix>request_deadline and
 *  <prefix>stall_timeout (durations) over l; who names the driver in messages. */
int nds_http_limits_parse(nds_http_limits *l, const json_object *spec, const char *who);
/** The progress of a paginated listing (S3, GCS): both list keys in byte order, so each key must
 *  come after the one before, and a page's continuation token must differ from the one that asked
 *  for it; at most NDS_LIST_EMPTY_PAGES_MAX truncated pages in a row may be empty. A server that
 *  breaks these would make the listing loop forever. Zero-initialise; dispose when done. */
typedef struct nds_list_progress {
    char *last_key;   /* the last key seen, malloc'd */
    char *last_token; /* the token sent for the current page, malloc'd, or NULL (first page) */
    int empty_run;    /* truncated empty pages in a row */
    long pages;       /* pages seen */
} nds_list_progress;
#define NDS_LIST_EMPTY_PAGES_MAX 100
/** Checks one listed key (in order). what names the listing in messages ("s3: list s3://b/p/").
 *  NDS_EIO when it does not come after the previous one. */
int nds_list_progress_key(nds_list_progress *p, const char *key, const char *what);
/** Checks the end of a page of nkeys keys whose next token is next (NULL at the end) and makes it
 *  the token of the next page. NDS_EIO for a repeated token or too many empty pages. */
int nds_list_progress_page(nds_list_progress *p, size_t nkeys, const char *next, const char *what);
void nds_list_progress_dispose(nds_list_progress *p);
/** Reads a small credential file into a NUL-terminated malloc'd buffer: it must be a regular file
 *  of at most max bytes (opened with O_NONBLOCK, checked with fstat before any read, so a FIFO or a
 *  device fails at once instead of hanging). who prefixes messages ("gcs: credentials file").
 *  NDS_ENOTFOUND when it does not exist. The caller wipes and frees *text. */
int nds_read_secret_file(const char *path, size_t max, const char *who, char **text, size_t *len);

#endif
