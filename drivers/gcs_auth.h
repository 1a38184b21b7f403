/* OAuth2 access tokens for the gcs kvstore driver.
 *
 * Sources, chosen once when the auth object is made (no network then):
 *   - a JSON key file: "service_account" (an RS256-signed JWT, signed with OpenSSL EVP, exchanged
 * at the key's token_uri) or "authorized_user" (a refresh token, as gcloud's application default
 * credentials);
 *   - the default chain: GOOGLE_APPLICATION_CREDENTIALS, then gcloud's
 * application_default_credentials.json, then the metadata server (when GCE_METADATA_HOST is set or
 * the machine says it is a Google VM), then anonymous;
 *   - anonymous (no Authorization header).
 * Tokens are cached and refreshed before they expire (and after a 401, via
 * nds_gcs_auth_invalidate).
 *
 * Secrets (private keys, refresh tokens, access tokens) never appear in error messages, and are
 * wiped from memory when freed. Threading: an auth object is internally synchronised (one mutex,
 * held across a token refresh so that concurrent requests wait for one refresh instead of each
 * making their own).
 */
#ifndef NDS_DRIVERS_GCS_AUTH_H
#define NDS_DRIVERS_GCS_AUTH_H

#include <stdint.h>
#include "http_multi.h"

typedef struct nds_gcs_auth nds_gcs_auth;

/** Where credentials come from. */
typedef enum nds_gcs_cred_source {
    NDS_GCS_CRED_DEFAULT = 0, /**< the default chain (see above) */
    NDS_GCS_CRED_ANONYMOUS,   /**< no credentials */
    NDS_GCS_CRED_KEY_FILE,    /**< the JSON key file key_file */
    NDS_GCS_CRED_METADATA     /**< the metadata server at metadata_host */
} nds_gcs_cred_source;

/** Transport for token requests: fills *resp like nds_http_perform (status, body). */
typedef int (*nds_gcs_fetch_fn)(void *ctx, const nds_http_request *req, nds_http_response *resp);

/** What nds_gcs_auth_new needs. Strings are copied. */
typedef struct nds_gcs_auth_config {
    nds_gcs_cred_source source;
    const char *key_file;      /**< KEY_FILE: path of the JSON key */
    const char *metadata_host; /**< METADATA: "host:port" of the metadata server; DEFAULT: overrides
                                    $GCE_METADATA_HOST */
    const char *scope;         /**< OAuth2 scope; NULL = devstorage.read_write */
    int64_t refresh_margin_s;  /**< refresh this long before expiry (capped at half the lifetime); 0
                                  = 300 */
    nds_gcs_fetch_fn fetch;    /**< token transport (required unless anonymous) */
    void *fetch_ctx;
    int64_t (*now)(void); /**< clock in seconds; NULL = time() */
} nds_gcs_auth_config;

struct json_object;
/**
 * Reads a spec's "credentials" member into cfg (source, key_file, metadata_host; strings borrowed
 * from v): "default", "anonymous", {"key_file": path} or {"metadata_host": "host:port"}. NDS_EINVAL
 * otherwise.
 */
int nds_gcs_auth_config_parse(const struct json_object *v, nds_gcs_auth_config *cfg);
/** Makes an auth object; reads and checks a key file now. NDS_EINVAL / NDS_EFORMAT / NDS_ENOTFOUND
 * naming the file (never its contents), NDS_EUNSUPPORTED for other credential types. */
int nds_gcs_auth_new(nds_gcs_auth **out, const nds_gcs_auth_config *cfg);
/** Frees (wiping secrets). Accepts NULL. */
void nds_gcs_auth_free(nds_gcs_auth *a);
/** "anonymous", "service_account", "authorized_user" or "metadata": the source chosen. */
const char *nds_gcs_auth_kind(const nds_gcs_auth *a);
/**
 * The Authorization header line for a request ("Authorization: Bearer ..."), malloc'd into *out, or
 * NULL when anonymous. Fetches or refreshes the token when needed. Free with
 * nds_gcs_auth_header_free. Errors (NDS_EPERM for a refused grant, NDS_ENETWORK, NDS_EFORMAT for a
 * bad token response) name the token endpoint and status, never a secret.
 */
int nds_gcs_auth_header(nds_gcs_auth *a, char **out);
/** Wipes and frees a header from nds_gcs_auth_header. Accepts NULL. */
void nds_gcs_auth_header_free(char *header);
/** Drops the cached token (after a 401), so the next nds_gcs_auth_header fetches a new one. */
void nds_gcs_auth_invalidate(nds_gcs_auth *a);
/** How many tokens were fetched so far (for tests). */
int nds_gcs_auth_fetch_count(nds_gcs_auth *a);

/* ---- JWT pieces, exposed for tests ---- */

/** Base64url without padding of data[0..len); malloc'd. */
char *nds_gcs_base64url(const uint8_t *data, size_t len);
/**
 * Builds and signs a service-account JWT assertion: header {"alg":"RS256","typ":"JWT"[,"kid"]},
 * claims
 * {"iss","scope","aud","iat","exp"} with exp = iat + 3600. pem is a PKCS#8 or PKCS#1 RSA private
 * key.
 * @param out receives the malloc'd "header.claims.signature" text
 */
int nds_gcs_jwt_sign(const char *pem, const char *kid, const char *iss, const char *scope,
                     const char *aud, int64_t iat, char **out);

#endif
