/* The shared HTTP layer of the s3, gcs and http kvstore drivers (libcurl).
 *
 * One client per driver instance: a curl multi handle driven by the client's own I/O thread, a shared
 * connection cache and DNS cache, and a concurrency limit (requests beyond it wait in a queue). Any thread
 * may call nds_http_perform at once; each call blocks until its request is done. nds_http_perform_many runs a
 * batch concurrently (the S3/GCS batch path). Retries with exponential backoff and jitter on 429, 5xx,
 * connection resets and timeouts live here too, so every driver behaves the same.
 *
 * Network access in tests is to 127.0.0.1 only; the client itself does not restrict hosts.
 */
#ifndef NDS_DRIVERS_HTTP_MULTI_H
#define NDS_DRIVERS_HTTP_MULTI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
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
    long timeout_ms;               /* whole-transfer timeout; 0 = the client's default (60 s) */
    uint64_t max_response_bytes;   /* a larger body is an error (NDS_ELIMIT); 0 = no limit */
} nds_http_request;

/** One response; dispose with nds_http_response_dispose. */
typedef struct nds_http_response {
    long status;                   /* HTTP status, 0 when no response arrived */
    nds_buf body;                  /* response body */
    char *headers;                 /* raw header block of the final response, NUL-terminated */
    int curl_code;                 /* CURLcode of the transfer (0 = OK) */
    int attempts;                  /* tries made (retries + 1) */
} nds_http_response;

/** Retry policy: tries at most max_attempts times while retryable(resp) says so. */
typedef struct nds_http_retry {
    int max_attempts;              /* >= 1; default 8 */
    long base_delay_ms;            /* first backoff ceiling; default 50; doubles, with full jitter */
    long max_delay_ms;             /* cap of the ceiling; default 5000 */
} nds_http_retry;
#define NDS_HTTP_RETRY_DEFAULT {8, 50, 5000}

/** Creates a client with at most max_concurrency transfers at once (0 = 32). */
int nds_http_client_new(nds_http_client **out, int max_concurrency);
/** Stops the I/O thread and frees. Accepts NULL. No call may be running. */
void nds_http_client_free(nds_http_client *c);

/**
 * Performs req (with retries per policy; NULL = no retry) and fills *resp. Returns 0 when a response was
 * received (whatever its status) and NDS_ENETWORK / NDS_ETIMEOUT (cause NDS_CAUSE_CURL) when none was, after
 * the last try. A request body is re-sent on every retry. Any thread.
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

#endif
