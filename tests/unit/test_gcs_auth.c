/* OAuth2 for the gcs driver (drivers/gcs_auth.c): base64url, RS256 JWT assertions checked with the
 * `openssl` command against the public key of a key pair made here with `openssl genpkey`, key
 * files and their errors, the default credential chain, token caching and refresh (a fake transport
 * and clock), and, end to end, a gcs kvstore against strict_gcs.py requiring tokens
 * (service-account JWTs whose signature the server verifies, the metadata server, a revoked token
 * refreshed after a 401). Secrets never appear in errors or specs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "../../drivers/gcs_auth.h"
#include "ndstore/sys/buf.h"
#include "support_check.h"
#include "support_strict_gcs.h"

static char *g_dir;           /* temporary directory with the keys */
static char g_key[512];       /* RSA private key (PEM), made by openssl genpkey */
static char g_pub[512];       /* its public key */
static nds_test_gcs g_server; /* strict_gcs.py --require-auth --public-key g_pub */

/* ---- helpers ---- */

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    char *buf = calloc(1, 1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void spit(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    fclose(f);
}

static char *path_in(const char *name) {
    char *p = NULL;
    ck_assert_int_ge(asprintf(&p, "%s/%s", g_dir, name), 0);
    return p;
}

/* Writes a JSON key file from a JSON object (which it frees); returns its path. */
static char *key_file(const char *name, json_object *doc) {
    char *p = path_in(name);
    const char *text = json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN);
    spit(p, text, strlen(text));
    json_object_put(doc);
    return p;
}

/* A service-account key file for the test key, with token_uri. */
static char *service_account_file(const char *name, const char *token_uri) {
    json_object *d = json_object_new_object();
    char *pem = slurp(g_key);
    json_object_object_add(d, "type", json_object_new_string("service_account"));
    json_object_object_add(d, "project_id", json_object_new_string("proj"));
    json_object_object_add(d, "private_key_id", json_object_new_string("kid-123"));
    json_object_object_add(d, "private_key", json_object_new_string(pem));
    json_object_object_add(d, "client_email",
                           json_object_new_string("robot@proj.iam.gserviceaccount.com"));
    json_object_object_add(d, "token_uri", json_object_new_string(token_uri));
    free(pem);
    return key_file(name, d);
}

static size_t b64url_decode(const char *in, size_t n, uint8_t *out) {
    static const char *abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        const char *p = strchr(abc, in[i]);
        ck_assert_msg(p && in[i], "not base64url: %c", in[i]);
        acc = acc << 6 | (uint32_t)(p - abc);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (uint8_t)(acc >> bits);
        }
    }
    return o;
}

/* Decodes one JWT segment into a JSON object. */
static json_object *jwt_part(const char *seg, size_t n) {
    uint8_t buf[4096];
    size_t len = b64url_decode(seg, n, buf);
    buf[len] = '\0';
    json_object *o = json_tokener_parse((const char *)buf);
    ck_assert_ptr_nonnull(o);
    return o;
}

static const char *member(json_object *o, const char *name) {
    json_object *v;
    ck_assert_msg(json_object_object_get_ex(o, name, &v), "no member %s", name);
    return json_object_get_string(v);
}

/* 0 when `openssl dgst -sha256 -verify` accepts the JWT's signature over its first two segments. */
static int openssl_verify(const char *jwt) {
    const char *dot2 = strrchr(jwt, '.');
    uint8_t sig[1024];
    size_t siglen = b64url_decode(dot2 + 1, strlen(dot2 + 1), sig);
    char *in = path_in("input.txt"), *sg = path_in("sig.bin"), *cmd = NULL;
    spit(in, jwt, (size_t)(dot2 - jwt));
    spit(sg, sig, siglen);
    ck_assert_int_ge(asprintf(&cmd,
                              "openssl dgst -sha256 -verify %s -signature %s %s >/dev/null 2>&1",
                              g_pub, sg, in),
                     0);
    int rc = system(cmd);
    free(in), free(sg), free(cmd);
    return rc;
}

/* ---- base64url and JWTs ---- */

START_TEST(base64url_vectors) {
    struct {
        const char *in;
        size_t n;
        const char *out;
    } v[] = {{"", 0, ""},
             {"f", 1, "Zg"},
             {"fo", 2, "Zm8"},
             {"foo", 3, "Zm9v"},
             {"foob", 4, "Zm9vYg"},
             {"\xfb\xff", 2, "-_8"},
             {"\x00\x3e\x3f", 3, "AD4_"}};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        char *s = nds_gcs_base64url((const uint8_t *)v[i].in, v[i].n);
        ck_assert_str_eq(s, v[i].out);
        free(s);
    }
}
END_TEST

START_TEST(jwt_verifies_with_openssl) {
    char *pem = slurp(g_key), *jwt = NULL;
    NDS_OK(nds_gcs_jwt_sign(pem, "kid-123", "robot@proj.iam.gserviceaccount.com",
                            "https://www.googleapis.com/auth/devstorage.read_write",
                            "https://oauth2.example/token", 1700000000, &jwt));
    const char *d1 = strchr(jwt, '.'), *d2 = strrchr(jwt, '.');
    ck_assert(d1 && d2 && d1 < d2);
    json_object *h = jwt_part(jwt, (size_t)(d1 - jwt)),
                *c = jwt_part(d1 + 1, (size_t)(d2 - d1 - 1));
    ck_assert_str_eq(member(h, "alg"), "RS256");
    ck_assert_str_eq(member(h, "typ"), "JWT");
    ck_assert_str_eq(member(h, "kid"), "kid-123");
    ck_assert_str_eq(member(c, "iss"), "robot@proj.iam.gserviceaccount.com");
    ck_assert_str_eq(member(c, "scope"), "https://www.googleapis.com/auth/devstorage.read_write");
    ck_assert_str_eq(member(c, "aud"), "https://oauth2.example/token");
    ck_assert_str_eq(member(c, "iat"), "1700000000");
    ck_assert_str_eq(member(c, "exp"), "1700003600");
    ck_assert_ptr_null(strstr(jwt, "=")); /* unpadded */
    ck_assert_int_eq(openssl_verify(jwt), 0);
    /* A changed claim no longer verifies. */
    char *forged = strdup(jwt);
    forged[d1 - jwt + 5] = forged[d1 - jwt + 5] == 'A' ? 'B' : 'A';
    ck_assert_int_ne(openssl_verify(forged), 0);
    json_object_put(h);
    json_object_put(c);
    free(forged), free(jwt), free(pem);
}
END_TEST

START_TEST(jwt_refuses_bad_keys) {
    char *ec = path_in("ec.pem"), *enc = path_in("enc.pem"), *cmd = NULL, *jwt = NULL;
    ck_assert_int_ge(
        asprintf(&cmd,
                 "openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out %s "
                 "2>/dev/null && openssl pkey -in %s -aes256 -passout pass:pw -out %s 2>/dev/null",
                 ec, g_key, enc),
        0);
    ck_assert_int_eq(system(cmd), 0);
    const char *paths[] = {ec, enc};
    for (int i = 0; i < 2; i++) {
        char *pem = slurp(paths[i]);
        ck_assert_int_eq(nds_gcs_jwt_sign(pem, NULL, "a", "s", "u", 1, &jwt), NDS_EINVAL);
        ck_assert_ptr_null(jwt);
        ck_assert_ptr_null(strstr(nds_error_last()->message, "BEGIN"));
        free(pem);
    }
    ck_assert_int_eq(nds_gcs_jwt_sign("not a key", NULL, "a", "s", "u", 1, &jwt), NDS_EINVAL);
    free(ec), free(enc), free(cmd);
}
END_TEST

/* ---- key files and the default chain ---- */

static int no_fetch(void *ctx, const nds_http_request *req, nds_http_response *resp) {
    (void)ctx, (void)req, (void)resp;
    ck_abort_msg("no token request expected");
    return 0;
}

static int auth_new(nds_gcs_auth **a, nds_gcs_cred_source src, const char *file, const char *host) {
    nds_gcs_auth_config cfg = {src, file, host, NULL, 0, no_fetch, NULL, NULL};
    return nds_gcs_auth_new(a, &cfg);
}

static void expect_key_error(json_object *doc, int code, const char *needle) {
    char *p = key_file("bad.json", doc);
    nds_gcs_auth *a = NULL;
    ck_assert_int_eq(auth_new(&a, NDS_GCS_CRED_KEY_FILE, p, NULL), code);
    const char *m = nds_error_last()->message;
    ck_assert_msg(strstr(m, needle) && strstr(m, p), "%s", m);
    ck_assert_ptr_null(strstr(m, "SECRETMARKER"));
    ck_assert_ptr_null(a);
    free(p);
}

START_TEST(key_file_errors) {
    json_object *d = json_object_new_object();
    json_object_object_add(d, "type", json_object_new_string("service_account"));
    json_object_object_add(d, "private_key",
                           json_object_new_string("-----BEGIN PRIVATE KEY-----\nSECRETMARKER\n"));
    expect_key_error(json_object_get(d), NDS_EFORMAT, "client_email");
    json_object_object_add(d, "client_email", json_object_new_string("r@p"));
    expect_key_error(d, NDS_EFORMAT, "private_key is not");
    d = json_object_new_object();
    json_object_object_add(d, "type", json_object_new_string("external_account"));
    json_object_object_add(d, "secret", json_object_new_string("SECRETMARKER"));
    expect_key_error(d, NDS_EUNSUPPORTED, "external_account");
    d = json_object_new_object();
    json_object_object_add(d, "type", json_object_new_string("authorized_user"));
    json_object_object_add(d, "client_secret", json_object_new_string("SECRETMARKER"));
    expect_key_error(d, NDS_EFORMAT, "client_id");
    char *p = path_in("garbage.json");
    spit(p, "{\"type\": \"service_account\", SECRETMARKER", 40);
    nds_gcs_auth *a = NULL;
    ck_assert_int_eq(auth_new(&a, NDS_GCS_CRED_KEY_FILE, p, NULL), NDS_EFORMAT);
    ck_assert_ptr_null(strstr(nds_error_last()->message, "SECRETMARKER"));
    ck_assert_int_eq(auth_new(&a, NDS_GCS_CRED_KEY_FILE, "/nonexistent/key.json", NULL),
                     NDS_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "/nonexistent/key.json"));
    free(p);
}
END_TEST

/* A key file that is a FIFO (opening it waited for a writer forever), a device or 2 MiB fails at
 * once, naming the file. */
START_TEST(key_file_must_be_small_regular_file) {
    char *fifo = path_in("fifo.json"), *huge = path_in("huge.json");
    unlink(fifo);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    FILE *f = fopen(huge, "w");
    ck_assert_int_eq(ftruncate(fileno(f), 2 << 20), 0);
    fclose(f);
    const char *files[] = {fifo, "/dev/zero", huge};
    const int codes[] = {NDS_EINVAL, NDS_EINVAL, NDS_ELIMIT};
    for (int i = 0; i < 3; i++) {
        nds_gcs_auth *a = NULL;
        ck_assert_int_eq(auth_new(&a, NDS_GCS_CRED_KEY_FILE, files[i], NULL), codes[i]);
        ck_assert_msg(strstr(nds_error_last()->message, files[i]), "%s",
                      nds_error_last()->message);
    }
    setenv("GOOGLE_APPLICATION_CREDENTIALS", fifo, 1);
    nds_gcs_auth *a = NULL;
    ck_assert_int_eq(auth_new(&a, NDS_GCS_CRED_DEFAULT, NULL, NULL), NDS_EINVAL);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "GOOGLE_APPLICATION_CREDENTIALS"));
    unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
    unlink(fifo);
    unlink(huge);
    free(fifo), free(huge);
}
END_TEST

START_TEST(default_chain) {
    nds_gcs_auth *a = NULL;
    char *empty = path_in("empty-home"), *gcloud = path_in("gcloud"), *adc = NULL;
    mkdir(empty, 0700);
    mkdir(gcloud, 0700);
    unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
    unsetenv("CLOUDSDK_CONFIG");
    unsetenv("GCE_METADATA_HOST");
    setenv("HOME", empty, 1);
    NDS_OK(auth_new(&a, NDS_GCS_CRED_DEFAULT, NULL, NULL));
    ck_assert_str_eq(nds_gcs_auth_kind(a), "anonymous");
    char *h = (char *)"x";
    NDS_OK(nds_gcs_auth_header(a, &h));
    ck_assert_ptr_null(h); /* anonymous: no Authorization header */
    nds_gcs_auth_free(a);
    setenv("GCE_METADATA_HOST", "127.0.0.1:9", 1);
    NDS_OK(auth_new(&a, NDS_GCS_CRED_DEFAULT, NULL, NULL));
    ck_assert_str_eq(nds_gcs_auth_kind(a), "metadata");
    nds_gcs_auth_free(a);
    json_object *d = json_object_new_object();
    json_object_object_add(d, "type", json_object_new_string("authorized_user"));
    json_object_object_add(d, "client_id", json_object_new_string("cid"));
    json_object_object_add(d, "client_secret", json_object_new_string("cs"));
    json_object_object_add(d, "refresh_token", json_object_new_string("rt"));
    ck_assert_int_ge(asprintf(&adc, "gcloud/application_default_credentials.json"), 0);
    free(key_file(adc, d));
    setenv("CLOUDSDK_CONFIG", gcloud, 1);
    NDS_OK(auth_new(&a, NDS_GCS_CRED_DEFAULT, NULL, NULL));
    ck_assert_str_eq(nds_gcs_auth_kind(a), "authorized_user");
    nds_gcs_auth_free(a);
    char *sa = service_account_file("sa.json", "http://127.0.0.1:9/token");
    setenv("GOOGLE_APPLICATION_CREDENTIALS", sa, 1);
    NDS_OK(auth_new(&a, NDS_GCS_CRED_DEFAULT, NULL, NULL));
    ck_assert_str_eq(nds_gcs_auth_kind(a), "service_account");
    nds_gcs_auth_free(a);
    setenv("GOOGLE_APPLICATION_CREDENTIALS", "/nonexistent/sa.json", 1);
    ck_assert_int_eq(auth_new(&a, NDS_GCS_CRED_DEFAULT, NULL, NULL), NDS_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "GOOGLE_APPLICATION_CREDENTIALS"));
    free(empty), free(gcloud), free(adc), free(sa);
}
END_TEST

/* ---- token requests, caching, refresh (fake transport and clock) ---- */

static int64_t g_now = 1700000000;
static int64_t fake_now(void) { return g_now; }

typedef struct fake_server {
    int calls;
    long status;      /* status to answer */
    const char *body; /* body to answer; NULL = a fresh token "tok-<calls>" */
    char last_method[8];
    char last_url[256];
    char last_headers[256];
    char *last_body;
} fake_server;

static int fake_fetch(void *ctx, const nds_http_request *req, nds_http_response *resp) {
    fake_server *f = ctx;
    f->calls++;
    snprintf(f->last_method, sizeof f->last_method, "%s", req->method);
    snprintf(f->last_url, sizeof f->last_url, "%s", req->url);
    f->last_headers[0] = '\0';
    for (size_t i = 0; i < req->nheaders; i++) {
        strncat(f->last_headers, req->headers[i],
                sizeof f->last_headers - strlen(f->last_headers) - 2);
        strcat(f->last_headers, "|");
    }
    free(f->last_body);
    f->last_body = req->body ? strndup((const char *)req->body, req->body_len) : NULL;
    memset(resp, 0, sizeof *resp);
    resp->status = f->status;
    resp->attempts = 1;
    char tok[96];
    snprintf(tok, sizeof tok,
             "{\"access_token\":\"tok-%d\",\"expires_in\":3600,\"token_type\":\"Bearer\"}",
             f->calls);
    const char *b = f->body ? f->body : tok;
    ck_assert_int_eq(nds_buf_append(&resp->body, b, strlen(b)), 0);
    return 0;
}

static nds_gcs_auth *fake_auth(fake_server *f, nds_gcs_cred_source src, const char *file,
                               const char *host) {
    nds_gcs_auth_config cfg = {src, file, host, NULL, 0, fake_fetch, f, fake_now};
    nds_gcs_auth *a = NULL;
    NDS_OK(nds_gcs_auth_new(&a, &cfg));
    return a;
}

static void expect_header(nds_gcs_auth *a, const char *want) {
    char *h = NULL;
    NDS_OK(nds_gcs_auth_header(a, &h));
    ck_assert_str_eq(h, want);
    nds_gcs_auth_header_free(h);
}

START_TEST(service_account_tokens_cached_and_refreshed) {
    fake_server f = {0, 200, NULL, "", "", "", NULL};
    char *sa = service_account_file("sa.json", "https://oauth2.example/token");
    nds_gcs_auth *a = fake_auth(&f, NDS_GCS_CRED_KEY_FILE, sa, NULL);
    ck_assert_int_eq(f.calls, 0); /* no network when made */
    expect_header(a, "Authorization: Bearer tok-1");
    ck_assert_str_eq(f.last_method, "POST");
    ck_assert_str_eq(f.last_url, "https://oauth2.example/token");
    ck_assert_ptr_nonnull(
        strstr(f.last_headers, "Content-Type: application/x-www-form-urlencoded"));
    const char *prefix =
        "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=";
    ck_assert_int_eq(strncmp(f.last_body, prefix, strlen(prefix)), 0);
    const char *jwt = f.last_body + strlen(prefix);
    ck_assert_int_eq(openssl_verify(jwt), 0);
    const char *d1 = strchr(jwt, '.');
    json_object *c = jwt_part(d1 + 1, (size_t)(strrchr(jwt, '.') - d1 - 1));
    ck_assert_str_eq(member(c, "aud"), "https://oauth2.example/token");
    ck_assert_str_eq(member(c, "iat"), "1700000000");
    json_object_put(c);
    for (int i = 0; i < 10; i++) expect_header(a, "Authorization: Bearer tok-1");
    ck_assert_int_eq(f.calls, 1);
    g_now += 3600 - 301; /* still more than the 300 s margin left */
    expect_header(a, "Authorization: Bearer tok-1");
    g_now += 1; /* now within it: refreshed before it expires */
    expect_header(a, "Authorization: Bearer tok-2");
    ck_assert_int_eq(nds_gcs_auth_fetch_count(a), 2);
    nds_gcs_auth_invalidate(a); /* after a 401 */
    expect_header(a, "Authorization: Bearer tok-3");
    nds_gcs_auth_free(a);
    free(f.last_body);
    free(sa);
}
END_TEST

static void expect_token_error(const char *body, long status, int code, const char *needle) {
    fake_server f = {0, status, body, "", "", "", NULL};
    char *sa = service_account_file("sa.json", "https://oauth2.example/token");
    nds_gcs_auth *a = fake_auth(&f, NDS_GCS_CRED_KEY_FILE, sa, NULL);
    char *h = NULL;
    ck_assert_int_eq(nds_gcs_auth_header(a, &h), code);
    ck_assert_ptr_null(h);
    const char *m = nds_error_last()->message;
    ck_assert_msg(strstr(m, needle) && strstr(m, "oauth2.example/token"), "%s", m);
    ck_assert_ptr_null(strstr(m, "eyJ")); /* no JWT */
    ck_assert_ptr_null(strstr(m, "SECRET"));
    nds_gcs_auth_free(a);
    free(f.last_body);
    free(sa);
}

START_TEST(token_errors) {
    expect_token_error("{\"error\":\"invalid_grant\",\"error_description\":\"SECRET detail\"}", 400,
                       NDS_EPERM, "HTTP 400 (invalid_grant)");
    expect_token_error("<html>SECRET</html>", 503, NDS_EIO, "HTTP 503");
    expect_token_error("{\"access_token\":\"a b\",\"expires_in\":10}", 200, NDS_EFORMAT,
                       "well-formed");
    expect_token_error("{\"access_token\":\"SECRET\\r\\nX-Evil: 1\",\"expires_in\":10}", 200,
                       NDS_EFORMAT, "well-formed");
    expect_token_error("{\"access_token\":\"SECRETtok\"}", 200, NDS_EFORMAT,
                       "well-formed access_token and expires_in");
    expect_token_error("{\"access_token\":\"SECRETtok\",\"expires_in\":-5}", 200, NDS_EFORMAT,
                       "well-formed access_token and expires_in");
    expect_token_error("not json SECRET", 200, NDS_EFORMAT, "access_token");
}
END_TEST

START_TEST(authorized_user_and_metadata_requests) {
    fake_server f = {0, 200, NULL, "", "", "", NULL};
    json_object *d = json_object_new_object();
    json_object_object_add(d, "type", json_object_new_string("authorized_user"));
    json_object_object_add(d, "client_id", json_object_new_string("id.apps"));
    json_object_object_add(d, "client_secret", json_object_new_string("s/e+c&r=t"));
    json_object_object_add(d, "refresh_token", json_object_new_string("1//rt"));
    char *p = key_file("user.json", d);
    nds_gcs_auth *a = fake_auth(&f, NDS_GCS_CRED_KEY_FILE, p, NULL);
    ck_assert_str_eq(nds_gcs_auth_kind(a), "authorized_user");
    expect_header(a, "Authorization: Bearer tok-1");
    ck_assert_str_eq(f.last_url, "https://oauth2.googleapis.com/token"); /* the default token_uri */
    ck_assert_str_eq(f.last_body,
                     "grant_type=refresh_token&client_id=id.apps&client_secret=s%2Fe%2Bc%26r%3Dt"
                     "&refresh_token=1%2F%2Frt");
    nds_gcs_auth_free(a);
    a = fake_auth(&f, NDS_GCS_CRED_METADATA, NULL, "127.0.0.1:8999");
    expect_header(a, "Authorization: Bearer tok-2");
    ck_assert_str_eq(f.last_method, "GET");
    ck_assert_str_eq(
        f.last_url,
        "http://127.0.0.1:8999/computeMetadata/v1/instance/service-accounts/default/token");
    ck_assert_str_eq(f.last_headers, "Metadata-Flavor: Google|");
    ck_assert_ptr_null(f.last_body);
    nds_gcs_auth_free(a);
    free(f.last_body);
    free(p);
}
END_TEST

/* ---- end to end: a gcs kvstore against strict_gcs.py --require-auth ---- */

static nds_kvstore *open_with(const char *credentials) {
    char spec[1024];
    snprintf(spec, sizeof spec,
             "{\"driver\":\"gcs\",\"bucket\":\"authb\",\"path\":\"p%d/\",\"endpoint\":\"%s\","
             "\"credentials\":%s}",
             (int)getpid(), g_server.endpoint, credentials);
    nds_kvstore *kv = NULL;
    NDS_OK(nds_kvstore_open(&kv, spec, NULL));
    return kv;
}

static void assert_no_secret(const char *text) {
    ck_assert_msg(!strstr(text, "ya29.") && !strstr(text, "PRIVATE KEY") && !strstr(text, "eyJ"),
                  "%s", text);
}

START_TEST(service_account_end_to_end) {
    char *token_uri = NULL, *sa = NULL, *creds = NULL;
    ck_assert_int_ge(asprintf(&token_uri, "%s/token", g_server.endpoint), 0);
    sa = service_account_file("e2e.json", token_uri);
    ck_assert_int_ge(asprintf(&creds, "{\"key_file\":\"%s\"}", sa), 0);
    long issued = nds_test_gcs_stat(g_server.endpoint, "tokens_issued");
    nds_kvstore *kv = open_with(creds);
    for (int i = 0; i < 20; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        NDS_OK(nds_kvstore_write(kv, key, "v", 1, NULL, NULL));
        nds_read_result r;
        NDS_OK(nds_kvstore_read(kv, key, NULL, &r));
        ck_assert_int_eq(r.state, NDS_READ_VALUE);
        nds_read_result_dispose(&r);
    }
    /* One token for all 40 requests: the server verified its JWT's signature with the public key.
     */
    ck_assert_int_eq(nds_test_gcs_stat(g_server.endpoint, "tokens_issued") - issued, 1);
    long status;
    char *jwt =
        nds_test_gcs_control(g_server.endpoint, "GET", "/_test/last_assertion", NULL, &status);
    ck_assert_int_eq(openssl_verify(jwt), 0);
    free(jwt);
    /* A revoked token: 401, a new token, and the request succeeds. */
    free(nds_test_gcs_control(g_server.endpoint, "POST", "/_test/revoke_tokens", "", &status));
    NDS_OK(nds_kvstore_write(kv, "after", "v", 1, NULL, NULL));
    ck_assert_int_eq(nds_test_gcs_stat(g_server.endpoint, "tokens_issued") - issued, 2);
    char *spec = NULL;
    NDS_OK(nds_kvstore_spec(kv, &spec));
    assert_no_secret(spec);
    ck_assert_ptr_nonnull(strstr(spec, "key_file"));
    nds_free(spec);
    nds_kvstore_free(kv);
    free(token_uri), free(sa), free(creds);
}
END_TEST

START_TEST(metadata_and_anonymous_end_to_end) {
    char creds[128];
    snprintf(creds, sizeof creds, "{\"metadata_host\":\"127.0.0.1:%d\"}", g_server.port);
    nds_kvstore *kv = open_with(creds);
    NDS_OK(nds_kvstore_write(kv, "m", "v", 1, NULL, NULL));
    nds_kvstore_free(kv);
    kv = open_with("\"anonymous\"");
    ck_assert_int_eq(nds_kvstore_write(kv, "m", "v", 1, NULL, NULL), NDS_EPERM);
    const char *m = nds_error_last()->message;
    ck_assert_msg(strstr(m, "HTTP 401") && strstr(m, "/m") && strstr(m, "required"), "%s", m);
    assert_no_secret(m);
    nds_kvstore_free(kv);
    /* A key whose token endpoint refuses it: the error names the endpoint and the OAuth2 error
     * only. */
    char *token_uri = NULL, *creds2 = NULL;
    ck_assert_int_ge(asprintf(&token_uri, "%s/token?wrong=1", g_server.endpoint), 0);
    char *sa = service_account_file("wrong.json", token_uri);
    ck_assert_int_ge(asprintf(&creds2, "{\"key_file\":\"%s\"}", sa), 0);
    kv = open_with(creds2);
    nds_read_result r;
    ck_assert_int_eq(nds_kvstore_read(kv, "m", NULL, &r), NDS_EPERM);
    m = nds_error_last()->message;
    ck_assert_msg(strstr(m, "token request") && strstr(m, "HTTP 400") && strstr(m, "invalid_grant"),
                  "%s", m);
    assert_no_secret(m);
    nds_kvstore_free(kv);
    free(token_uri), free(sa), free(creds2);
}
END_TEST

static Suite *auth_suite(void) {
    Suite *s = suite_create("gcs_auth");
    TCase *tc = tcase_create("jwt");
    tcase_add_test(tc, base64url_vectors);
    tcase_add_test(tc, jwt_verifies_with_openssl);
    tcase_add_test(tc, jwt_refuses_bad_keys);
    suite_add_tcase(s, tc);
    tc = tcase_create("credentials");
    tcase_add_test(tc, key_file_errors);
    tcase_add_test(tc, key_file_must_be_small_regular_file);
    tcase_add_test(tc, default_chain);
    tcase_add_test(tc, service_account_tokens_cached_and_refreshed);
    tcase_add_test(tc, token_errors);
    tcase_add_test(tc, authorized_user_and_metadata_requests);
    suite_add_tcase(s, tc);
    tc = tcase_create("end_to_end");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, service_account_end_to_end);
    tcase_add_test(tc, metadata_and_anonymous_end_to_end);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    g_dir = nds_test_tmpdir();
    snprintf(g_key, sizeof g_key, "%s/key.pem", g_dir);
    snprintf(g_pub, sizeof g_pub, "%s/pub.pem", g_dir);
    char *cmd = NULL;
    if (!g_dir ||
        asprintf(&cmd,
                 "openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out %s 2>/dev/null"
                 " && openssl pkey -in %s -pubout -out %s 2>/dev/null",
                 g_key, g_key, g_pub) < 0 ||
        system(cmd) != 0) {
        fprintf(stderr, "test_gcs_auth: openssl genpkey failed\n");
        return 1;
    }
    free(cmd);
    const char *args[] = {"--bucket", "authb", "--require-auth", "--public-key", g_pub, NULL};
    if (nds_test_gcs_start(&g_server, args) != 0) return 1;
    int rc = nds_test_run(auth_suite());
    nds_test_gcs_stop(&g_server);
    nds_test_rmtree(g_dir);
    free(g_dir);
    return rc;
}
