/* OAuth2 for the gcs kvstore driver: key files, the default credential chain, the metadata server,
 * token caching (see gcs_auth.h).
 *
 * Implements the service-account JWT bearer grant (RFC 7523, RS256 via OpenSSL EVP), the
 * refresh-token grant of gcloud's "authorized_user" files, and the GCE metadata server's token
 * endpoint. Omits external-account (workload identity federation) and impersonated credentials:
 * those files are refused with NDS_EUNSUPPORTED.
 *
 * Threading: one mutex guards the cached token; it is held across a refresh so concurrent callers
 * share one. Ownership: the object owns copies of every secret and wipes them (OPENSSL_cleanse)
 * before freeing; request bodies and token responses are wiped too.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <json-c/json.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "gcs_auth.h"
#include "internal/error.h"
#include "internal/json_util.h"
#include "internal/util.h"

#define GCS_DEFAULT_SCOPE "https://www.googleapis.com/auth/devstorage.read_write"
#define GCS_DEFAULT_TOKEN_URI "https://oauth2.googleapis.com/token"
#define GCS_JWT_LIFETIME 3600
#define GCS_KEY_FILE_MAX (1 << 20)
#define GCS_TOKEN_MAX 8192

typedef enum { AUTH_ANON, AUTH_SERVICE_ACCOUNT, AUTH_USER, AUTH_METADATA } auth_kind;

struct nds_gcs_auth {
    pthread_mutex_t mu; /* guards token, expires_at, lifetime, fetches */
    auth_kind kind;
    char *source;    /* where the credentials came from, for messages (a path, never a secret) */
    char *token_uri; /* service account / user: where grants go; metadata: the token URL */
    char *client_email, *private_key, *private_key_id; /* service account */
    char *client_id, *client_secret, *refresh_token;   /* authorized user */
    char *scope;
    int64_t margin;
    nds_gcs_fetch_fn fetch;
    void *fetch_ctx;
    int64_t (*now)(void);
    char *token; /* cached access token, or NULL */
    int64_t expires_at, lifetime;
    int fetches;
};

/* ---- small helpers ---- */

static void secret_free(char *s) {
    if (s) {
        OPENSSL_cleanse(s, strlen(s));
        free(s);
    }
}

static int64_t default_now(void) { return (int64_t)time(NULL); }

char *nds_gcs_base64url(const uint8_t *data, size_t len) {
    if (len > (SIZE_MAX / 4) - 3) return NULL;
    char *out = malloc(4 * ((len + 2) / 3) + 1);
    if (!out) return NULL;
    int n = EVP_EncodeBlock((unsigned char *)out, data, (int)len);
    while (n > 0 && out[n - 1] == '=') n--;
    out[n] = '\0';
    for (char *p = out; *p; p++) *p = *p == '+' ? '-' : *p == '/' ? '_' : *p;
    return out;
}

/* Base64url of a JSON object's compact text (no "\/" escapes, as JWT consumers expect). */
static char *json_b64(json_object *obj) {
    const char *text = json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN |
                                                               JSON_C_TO_STRING_NOSLASHESCAPE);
    return text ? nds_gcs_base64url((const uint8_t *)text, strlen(text)) : NULL;
}

/* PEM password callback: keys with a passphrase are refused instead of prompting on a terminal. */
static int no_password(char *buf, int size, int rwflag, void *u) {
    (void)buf, (void)size, (void)rwflag, (void)u;
    return -1;
}

static EVP_PKEY *load_rsa_key(const char *pem) {
    BIO *bio = BIO_new_mem_buf(pem, -1);
    EVP_PKEY *key = bio ? PEM_read_bio_PrivateKey(bio, NULL, no_password, NULL) : NULL;
    BIO_free(bio);
    if (key && EVP_PKEY_get_base_id(key) != EVP_PKEY_RSA) {
        EVP_PKEY_free(key);
        key = NULL;
    }
    ERR_clear_error();
    return key;
}

/* RS256 signature of input, base64url-encoded into *out. */
static int rs256(EVP_PKEY *key, const char *input, char **out) {
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    size_t siglen = 0;
    unsigned char *sig = NULL;
    int ok = md && EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key) == 1 &&
             EVP_DigestSign(md, NULL, &siglen, (const unsigned char *)input, strlen(input)) == 1 &&
             (sig = malloc(siglen)) != NULL &&
             EVP_DigestSign(md, sig, &siglen, (const unsigned char *)input, strlen(input)) == 1;
    EVP_MD_CTX_free(md);
    ERR_clear_error();
    *out = ok ? nds_gcs_base64url(sig, siglen) : NULL;
    free(sig);
    if (!ok) return nds_err(NDS_EINTERNAL, "gcs: signing the jwt assertion failed (openssl)");
    return *out ? 0 : nds_err(NDS_ENOMEM, "gcs: out of memory");
}

int nds_gcs_jwt_sign(const char *pem, const char *kid, const char *iss, const char *scope,
                     const char *aud, int64_t iat, char **out) {
    *out = NULL;
    EVP_PKEY *key = load_rsa_key(pem);
    if (!key)
        return nds_err(NDS_EINVAL, "gcs: private_key is not an unencrypted PEM RSA private key");
    json_object *h = json_object_new_object(), *c = json_object_new_object();
    json_object_object_add(h, "alg", json_object_new_string("RS256"));
    json_object_object_add(h, "typ", json_object_new_string("JWT"));
    if (kid && kid[0]) json_object_object_add(h, "kid", json_object_new_string(kid));
    json_object_object_add(c, "iss", json_object_new_string(iss));
    json_object_object_add(c, "scope", json_object_new_string(scope));
    json_object_object_add(c, "aud", json_object_new_string(aud));
    json_object_object_add(c, "iat", json_object_new_int64(iat));
    json_object_object_add(c, "exp", json_object_new_int64(iat + GCS_JWT_LIFETIME));
    char *hb = json_b64(h), *cb = json_b64(c), *input = NULL, *sig = NULL;
    json_object_put(h);
    json_object_put(c);
    int rc = hb && cb && (input = nds_asprintf("%s.%s", hb, cb))
                 ? 0
                 : nds_err(NDS_ENOMEM, "gcs: out of memory");
    if (!rc) rc = rs256(key, input, &sig);
    if (!rc && !(*out = nds_asprintf("%s.%s", input, sig)))
        rc = nds_err(NDS_ENOMEM, "gcs: out of memory");
    EVP_PKEY_free(key);
    free(hb), free(cb), free(input), free(sig);
    return rc;
}

/* ---- key files ---- */

/* Reads a key file: a regular file of at most GCS_KEY_FILE_MAX bytes, opened without blocking (a
 * FIFO or a device fails at once). */
static int read_small_file(const char *path, char **text, size_t *len) {
    return nds_read_secret_file(path, GCS_KEY_FILE_MAX, "gcs: credentials file", text, len);
}

/* Copies a string member (required unless def given); wipes nothing: the caller wipes the document.
 */
static int key_member(json_object *doc, const char *name, const char *def, const char *path,
                      char **out) {
    json_object *v;
    if (!json_object_object_get_ex(doc, name, &v) || !json_object_is_type(v, json_type_string) ||
        json_object_get_string_len(v) == 0) {
        if (def) return (*out = nds_strdup(def)) ? 0 : nds_err(NDS_ENOMEM, "gcs: out of memory");
        return nds_err(NDS_EFORMAT,
                       "gcs: credentials file %s: member \"%s\" must be a non-empty string", path,
                       name);
    }
    return (*out = nds_strdup(json_object_get_string(v)))
               ? 0
               : nds_err(NDS_ENOMEM, "gcs: out of memory");
}

/* Wipes every string in a parsed key document before it is freed. */
static void wipe_json(json_object *doc) {
    json_object_object_foreach(doc, k, v) {
        (void)k;
        if (json_object_is_type(v, json_type_string))
            OPENSSL_cleanse((char *)json_object_get_string(v),
                            (size_t)json_object_get_string_len(v));
    }
}

static int load_service_account(nds_gcs_auth *a, json_object *doc, const char *path) {
    int rc = key_member(doc, "client_email", NULL, path, &a->client_email);
    if (!rc) rc = key_member(doc, "private_key", NULL, path, &a->private_key);
    if (!rc) rc = key_member(doc, "private_key_id", "", path, &a->private_key_id);
    if (!rc) rc = key_member(doc, "token_uri", GCS_DEFAULT_TOKEN_URI, path, &a->token_uri);
    if (!rc) {
        EVP_PKEY *key = load_rsa_key(a->private_key);
        if (!key)
            rc = nds_err(NDS_EFORMAT,
                         "gcs: credentials file %s: private_key is not an unencrypted PEM RSA key",
                         path);
        EVP_PKEY_free(key);
    }
    a->kind = AUTH_SERVICE_ACCOUNT;
    return rc;
}

static int load_user(nds_gcs_auth *a, json_object *doc, const char *path) {
    int rc = key_member(doc, "client_id", NULL, path, &a->client_id);
    if (!rc) rc = key_member(doc, "client_secret", NULL, path, &a->client_secret);
    if (!rc) rc = key_member(doc, "refresh_token", NULL, path, &a->refresh_token);
    if (!rc) rc = key_member(doc, "token_uri", GCS_DEFAULT_TOKEN_URI, path, &a->token_uri);
    a->kind = AUTH_USER;
    return rc;
}

static int load_key_file(nds_gcs_auth *a, const char *path) {
    char *text = NULL;
    size_t len = 0;
    json_object *doc = NULL;
    char doc_name[600];
    snprintf(doc_name, sizeof doc_name, "gcs: credentials file %s", path);
    int rc = read_small_file(path, &text, &len);
    if (!rc) rc = nds_json_parse(text, len, doc_name, &doc);
    if (text) OPENSSL_cleanse(text, len), free(text);
    const char *type = NULL;
    if (!rc && !json_object_is_type(doc, json_type_object))
        rc = nds_err(NDS_EFORMAT, "%s: not a JSON object", doc_name);
    if (!rc) rc = nds_json_get_string(doc, "type", false, doc_name, &type);
    if (!rc && strcmp(type, "service_account") == 0)
        rc = load_service_account(a, doc, path);
    else if (!rc && strcmp(type, "authorized_user") == 0)
        rc = load_user(a, doc, path);
    else if (!rc)
        rc = nds_err(NDS_EUNSUPPORTED,
                     "%s: credential type \"%.40s\" is not supported (service_account and "
                     "authorized_user are)",
                     doc_name, type);
    if (doc && json_object_is_type(doc, json_type_object)) wipe_json(doc);
    json_object_put(doc);
    if (!rc && !(a->source = nds_strdup(path))) rc = nds_err(NDS_ENOMEM, "gcs: out of memory");
    return rc;
}

/* Whether this machine is a Google Compute Engine VM (what Google's own libraries check first, so
 * that no request goes to the metadata address elsewhere). */
static bool on_gce(void) {
    char name[64] = "";
    FILE *f = fopen("/sys/class/dmi/id/product_name", "r");
    if (!f) return false;
    bool yes = fgets(name, sizeof name, f) && strncmp(name, "Google", 6) == 0;
    fclose(f);
    return yes;
}

static int use_metadata(nds_gcs_auth *a, const char *host) {
    a->kind = AUTH_METADATA;
    a->token_uri =
        nds_asprintf("http://%s/computeMetadata/v1/instance/service-accounts/default/token", host);
    a->source = nds_asprintf("the metadata server at %s", host);
    return a->token_uri && a->source ? 0 : nds_err(NDS_ENOMEM, "gcs: out of memory");
}

/* The default chain: GOOGLE_APPLICATION_CREDENTIALS, gcloud's file, the metadata server, anonymous.
 */
static int resolve_default(nds_gcs_auth *a, const nds_gcs_auth_config *cfg) {
    const char *env = getenv("GOOGLE_APPLICATION_CREDENTIALS");
    if (env && env[0]) {
        int rc = load_key_file(a, env);
        return rc ? nds_err_prefix(rc, "GOOGLE_APPLICATION_CREDENTIALS") : 0;
    }
    const char *dir = getenv("CLOUDSDK_CONFIG"), *home = getenv("HOME");
    char *well_known =
        dir && dir[0] ? nds_asprintf("%s/application_default_credentials.json", dir)
        : home && home[0]
            ? nds_asprintf("%s/.config/gcloud/application_default_credentials.json", home)
            : NULL;
    struct stat st;
    if (well_known && stat(well_known, &st) == 0) {
        int rc = load_key_file(a, well_known);
        free(well_known);
        return rc;
    }
    free(well_known);
    const char *host = cfg->metadata_host ? cfg->metadata_host : getenv("GCE_METADATA_HOST");
    if (host && host[0]) return use_metadata(a, host);
    if (on_gce()) return use_metadata(a, "metadata.google.internal");
    a->kind = AUTH_ANON;
    return 0;
}

static int resolve_source(nds_gcs_auth *a, const nds_gcs_auth_config *cfg) {
    switch (cfg->source) {
    case NDS_GCS_CRED_KEY_FILE:
        return cfg->key_file ? load_key_file(a, cfg->key_file)
                             : nds_err(NDS_EINVAL, "gcs: a key file credential needs a path");
    case NDS_GCS_CRED_METADATA:
        return cfg->metadata_host && cfg->metadata_host[0]
                   ? use_metadata(a, cfg->metadata_host)
                   : nds_err(NDS_EINVAL, "gcs: a metadata server credential needs a host");
    case NDS_GCS_CRED_DEFAULT: return resolve_default(a, cfg);
    default: a->kind = AUTH_ANON; return 0;
    }
}

int nds_gcs_auth_new(nds_gcs_auth **out, const nds_gcs_auth_config *cfg) {
    *out = NULL;
    nds_gcs_auth *a = calloc(1, sizeof *a);
    if (!a) return nds_err(NDS_ENOMEM, "gcs: out of memory");
    pthread_mutex_init(&a->mu, NULL);
    a->fetch = cfg->fetch;
    a->fetch_ctx = cfg->fetch_ctx;
    a->now = cfg->now ? cfg->now : default_now;
    a->margin = cfg->refresh_margin_s > 0 ? cfg->refresh_margin_s : 300;
    a->scope = nds_strdup(cfg->scope ? cfg->scope : GCS_DEFAULT_SCOPE);
    int rc = a->scope ? resolve_source(a, cfg) : nds_err(NDS_ENOMEM, "gcs: out of memory");
    if (!rc && a->kind != AUTH_ANON && !a->fetch)
        rc = nds_err(NDS_EINVAL, "gcs: credentials need a transport for token requests");
    if (rc) {
        nds_gcs_auth_free(a);
        return rc;
    }
    *out = a;
    return 0;
}

void nds_gcs_auth_free(nds_gcs_auth *a) {
    if (!a) return;
    pthread_mutex_destroy(&a->mu);
    free(a->source), free(a->token_uri), free(a->client_email), free(a->private_key_id),
        free(a->scope);
    free(a->client_id);
    secret_free(a->private_key);
    secret_free(a->client_secret);
    secret_free(a->refresh_token);
    secret_free(a->token);
    free(a);
}

const char *nds_gcs_auth_kind(const nds_gcs_auth *a) {
    static const char *const names[] = {"anonymous", "service_account", "authorized_user",
                                        "metadata"};
    return names[a->kind];
}

/* ---- token requests ---- */

/* The form body of a grant (malloc'd; holds secrets: the caller wipes it). */
static int grant_body(nds_gcs_auth *a, char **body) {
    *body = NULL;
    if (a->kind == AUTH_METADATA) return 0;
    if (a->kind == AUTH_SERVICE_ACCOUNT) {
        char *jwt = NULL;
        int rc = nds_gcs_jwt_sign(a->private_key, a->private_key_id, a->client_email, a->scope,
                                  a->token_uri, a->now(), &jwt);
        if (rc) return nds_err_prefix(rc, "gcs: credentials file %s", a->source);
        /* A JWT is base64url and dots: nothing in it needs form escaping. */
        *body = nds_asprintf(
            "grant_type=urn%%3Aietf%%3Aparams%%3Aoauth%%3Agrant-type%%3Ajwt-bearer&assertion=%s",
            jwt);
        secret_free(jwt);
    } else {
        char *id = nds_http_escape(a->client_id, false),
             *secret = nds_http_escape(a->client_secret, false);
        char *refresh = nds_http_escape(a->refresh_token, false);
        if (id && secret && refresh)
            *body = nds_asprintf(
                "grant_type=refresh_token&client_id=%s&client_secret=%s&refresh_token=%s", id,
                secret, refresh);
        free(id);
        secret_free(secret);
        secret_free(refresh);
    }
    return *body ? 0 : nds_err(NDS_ENOMEM, "gcs: out of memory");
}

/* A response body as a JSON object, or NULL (the body is not JSON: its text is never put in a
 * message). */
static json_object *body_json(const nds_buf *body) {
    json_object *doc = NULL;
    if (nds_json_parse((const char *)body->data, body->len, "gcs: token response", &doc) != 0)
        return NULL;
    if (doc && !json_object_is_type(doc, json_type_object)) {
        json_object_put(doc);
        doc = NULL;
    }
    return doc;
}

/* The "error" member of an OAuth2 error response, sanitised for a message ("" when none). */
static void oauth_error(const nds_buf *body, char *buf, size_t cap) {
    buf[0] = '\0';
    json_object *doc = body_json(body);
    json_object *e;
    if (doc && json_object_object_get_ex(doc, "error", &e) &&
        json_object_is_type(e, json_type_string))
        snprintf(buf, cap, " (%.60s)", json_object_get_string(e));
    for (char *p = buf; *p; p++)
        if (*p < 0x20 || *p > 0x7e) *p = '?';
    json_object_put(doc);
}

/* Whether an access token can go into a header line: 1..GCS_TOKEN_MAX printable characters, no
 * spaces. */
static bool token_ok(const char *tok) {
    size_t n = strlen(tok);
    for (size_t i = 0; i < n; i++)
        if (tok[i] <= 0x20 || tok[i] > 0x7e) return false;
    return n > 0 && n <= GCS_TOKEN_MAX;
}

/* Parses {"access_token":..., "expires_in":...} into a->token. */
static int take_token(nds_gcs_auth *a, const nds_buf *body) {
    json_object *doc = body_json(body), *t = NULL, *e = NULL;
    bool ok = doc && json_object_object_get_ex(doc, "access_token", &t) &&
              json_object_is_type(t, json_type_string) &&
              json_object_object_get_ex(doc, "expires_in", &e) &&
              json_object_is_type(e, json_type_int);
    int64_t life = ok ? json_object_get_int64(e) : 0;
    ok = ok && token_ok(json_object_get_string(t)) && life > 0 && life <= 7 * 86400;
    int rc = 0;
    if (!ok) {
        rc = nds_err(NDS_EFORMAT,
                     "gcs: token response from %s lacks a well-formed access_token and expires_in",
                     a->token_uri);
    } else {
        secret_free(a->token);
        a->token = nds_strdup(json_object_get_string(t));
        a->lifetime = life;
        a->expires_at = a->now() + life;
        if (!a->token) rc = nds_err(NDS_ENOMEM, "gcs: out of memory");
    }
    if (doc) wipe_json(doc);
    json_object_put(doc);
    return rc;
}

/* Fetches a new token (a->mu held). */
static int refresh(nds_gcs_auth *a) {
    char *body = NULL;
    int rc = grant_body(a, &body);
    if (rc) return rc;
    const char *form[] = {"Content-Type: application/x-www-form-urlencoded"};
    const char *meta[] = {"Metadata-Flavor: Google"};
    nds_http_request req = {body ? "POST" : "GET",
                            a->token_uri,
                            body ? form : meta,
                            1,
                            (const uint8_t *)body,
                            body ? strlen(body) : 0,
                            30000,
                            NDS_HTTP_DOCUMENT_MAX};
    nds_http_response resp;
    memset(&resp, 0, sizeof resp);
    rc = a->fetch(a->fetch_ctx, &req, &resp);
    secret_free(body);
    a->fetches++;
    if (rc) {
        rc = nds_err_prefix(rc, "gcs: token request to %s", a->token_uri);
    } else if (resp.status != 200) {
        char why[80];
        oauth_error(&resp.body, why, sizeof why);
        rc = nds_err_cause(resp.status >= 400 && resp.status < 500 ? NDS_EPERM : NDS_EIO,
                           NDS_CAUSE_HTTP, resp.status,
                           "gcs: token request to %s (credentials from %s): HTTP %ld%s",
                           a->token_uri, a->source, resp.status, why);
    } else {
        rc = take_token(a, &resp.body);
    }
    if (resp.body.data) OPENSSL_cleanse(resp.body.data, resp.body.len);
    nds_http_response_dispose(&resp);
    return rc;
}

int nds_gcs_auth_header(nds_gcs_auth *a, char **out) {
    *out = NULL;
    if (a->kind == AUTH_ANON) return 0;
    pthread_mutex_lock(&a->mu);
    int64_t margin = a->margin < a->lifetime / 2 ? a->margin : a->lifetime / 2;
    int rc = 0;
    if (!a->token || a->now() >= a->expires_at - margin) rc = refresh(a);
    if (!rc && !(*out = nds_asprintf("Authorization: Bearer %s", a->token)))
        rc = nds_err(NDS_ENOMEM, "gcs: out of memory");
    pthread_mutex_unlock(&a->mu);
    return rc;
}

void nds_gcs_auth_header_free(char *header) { secret_free(header); }

void nds_gcs_auth_invalidate(nds_gcs_auth *a) {
    pthread_mutex_lock(&a->mu);
    secret_free(a->token);
    a->token = NULL;
    pthread_mutex_unlock(&a->mu);
}

int nds_gcs_auth_fetch_count(nds_gcs_auth *a) {
    pthread_mutex_lock(&a->mu);
    int n = a->fetches;
    pthread_mutex_unlock(&a->mu);
    return n;
}

/* ---- the spec's "credentials" member ---- */

int nds_gcs_auth_config_parse(const json_object *cv, nds_gcs_auth_config *cfg) {
    json_object *v = (json_object *)cv, *f;
    const char *t = json_object_get_string(v);
    if (json_object_is_type(v, json_type_string) && strcmp(t, "default") == 0) return 0;
    if (json_object_is_type(v, json_type_string) && strcmp(t, "anonymous") == 0) {
        cfg->source = NDS_GCS_CRED_ANONYMOUS;
        return 0;
    }
    if (json_object_is_type(v, json_type_object) && json_object_object_length(v) == 1) {
        if (json_object_object_get_ex(v, "key_file", &f) &&
            json_object_is_type(f, json_type_string)) {
            cfg->source = NDS_GCS_CRED_KEY_FILE;
            cfg->key_file = json_object_get_string(f);
            return 0;
        }
        if (json_object_object_get_ex(v, "metadata_host", &f) &&
            json_object_is_type(f, json_type_string)) {
            cfg->source = NDS_GCS_CRED_METADATA;
            cfg->metadata_host = json_object_get_string(f);
            return 0;
        }
    }
    return nds_err(NDS_EINVAL,
                   "gcs: spec member \"credentials\" must be \"default\", \"anonymous\", "
                   "{\"key_file\": path} or {\"metadata_host\": \"host:port\"}");
}
