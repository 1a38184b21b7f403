/* What the gcs driver's files share: the store instance and the spec parsing that fills it. Not a
 * public interface.
 *
 * kv_gcs.c    the driver (requests, read, write, list, delete_range, open, URLs)
 * gcs_spec.c  the spec members (bucket, endpoint, credentials, limits, retries, timeouts)
 * gcs_auth.c  OAuth2 credentials and tokens (gcs_auth.h)
 */
#ifndef NDS_DRIVERS_GCS_INTERNAL_H
#define NDS_DRIVERS_GCS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include <json-c/json.h>

#include "gcs_auth.h"
#include "http_multi.h"

/** One gcs store instance. Immutable after open (the HTTP client and auth object are internally
 * synchronised). */
typedef struct gcs_state {
    char *bucket;       /* bucket name */
    char *endpoint;     /* base URL, no trailing '/' */
    char *user_project; /* escaped userProject, or NULL */
    nds_http_client *http;
    nds_http_retry retry;
    long timeout_ms;        /* per request; 0 = the HTTP layer's default */
    bool endpoint_from_env; /* the endpoint came from $STORAGE_EMULATOR_HOST */
    nds_gcs_auth *auth;
} gcs_state;

/* ---- gcs_spec.c ---- */
/** True for a valid bucket name b[0..n): 3..222 of [a-z0-9._-], starting and ending with a letter
 * or digit. */
bool nds_gcs_bucket_ok(const char *b, size_t n);
/** Fills s (zeroed) from spec: bucket, endpoint, HTTP client, credentials and the rest. NDS_EINVAL
 * naming the member for a bad or unknown one. On error s holds what was set so far: free it with
 * the driver's close. */
int nds_gcs_options(gcs_state *s, const json_object *spec);

#endif
