/* The s3 kvstore driver (drivers/kv_s3.c and friends).
 *
 * Server: NDS_S3_TEST_ENDPOINT (with NDS_S3_TEST_BUCKET, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
 * and NDS_S3_TEST_EXPECT = full | create_only | none, what "auto" must decide there) names a
 * running server, as tests/integration/s3_test.sh does for Ceph RGW and Swift. Without it, this
 * program starts the project's strict S3 test double (tests/servers/strict_s3.py, Python standard
 * library) on 127.0.0.1 and stops it at the end; the fault-injection tests run only against the
 * double (they need its control endpoint). When neither is possible (no /usr/bin/python3) the
 * server tests are reported as skipped on stderr, and only the offline tests run.
 *
 * Offline: URL and spec parsing, secrets refused in specs, credentials from profiles, printed specs
 * and error messages free of secrets, the XML reader, HTTP helpers. Server: the kvstore conformance
 * suite; the decision of "auto"; multipart; odd keys; the lease lock (broken when its holder is
 * dead, waited for when alive); bad credentials; and, on the double, 503s, resets before and after
 * a change is applied, slow answers and truncated bodies: writes land once or fail with an error
 * naming the key, the status and the server's code, and no partial object is ever visible.
 * A create-only write in create_only mode skips the lease. The versioned adapter over the server:
 * refused at open, saying why, where create-only writes are missing (Swift) or turned off
 * ("conditional_writes": "off"); its head hint written without the lease (with a commit's cost
 * printed); with NDS_S3_TEST_VERSIONED=1 also the kvstore conformance suite on
 * "s3://.../|versioned:" and 8 processes x 10 rounds committing a shared counter and keys of their
 * own, every version read back (nds_kv_test_versioned_processes).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "../../drivers/http_multi.h"
#include "../../drivers/s3_internal.h"
#include "../../drivers/s3_xml.h"
#include "internal/util.h"
#include "support_check.h"
#include "support_kv_conformance.h"

extern const nds_kv_driver nds_kv_driver_s3;

static const char *g_bucket; /* bucket of the server under test */
static const char *g_expect; /* what auto must decide there */
static bool g_strict;        /* the test double: fault tests on */
static char g_run[32];       /* per-run key prefix */
static char g_control[128];  /* the double's base URL */

/* ---- helpers ---- */

/* Test strings kept reachable until exit (URLs must outlive the suite's handles); a global root, so
 * LeakSanitizer does not count them. */
static char *g_kept[512];
static int g_nkept;

static char *keep(char *p) {
    if (g_nkept < 512) g_kept[g_nkept++] = p;
    return p;
}

static const char *make_url(void) {
    static int n;
    char *url = NULL;
    ck_assert_int_ge(asprintf(&url, "s3://%s/%s/%d-%d/", g_bucket, g_run, (int)getpid(), n++), 0);
    return keep(url); /* valid until exit, as the suite requires */
}

/* A JSON spec for a fresh prefix with extra members ("" or ",\"k\":v..."). */
static const char *spec_with(const char *extra) {
    static int n;
    char *spec = NULL;
    ck_assert_int_ge(asprintf(&spec,
                              "{\"driver\":\"s3\",\"bucket\":\"%s\",\"path\":\"%s/s%d-%d/\"%s}",
                              g_bucket, g_run, (int)getpid(), n++, extra),
                     0);
    return keep(spec);
}

static nds_kvstore *open_spec(const char *spec) {
    nds_kvstore *kv = NULL;
    NDS_OK(nds_kvstore_open(&kv, spec, NULL));
    return kv;
}

__attribute__((noinline)) static char *printed_spec(nds_kvstore *kv) {
    char *s = NULL;
    NDS_OK(nds_kvstore_spec(kv, &s));
    return s;
}

static void assert_no_secrets(const char *text) {
    const char *sk = getenv("AWS_SECRET_ACCESS_KEY"), *ak = getenv("AWS_ACCESS_KEY_ID");
    if (sk && *sk) ck_assert_msg(!strstr(text, sk), "secret key in: %s", text);
    if (ak && strlen(ak) > 3) ck_assert_msg(!strstr(text, ak), "access key in: %s", text);
}

/* Sends a control request to the test double. */
static char *control(const char *method, const char *path, const char *body) {
    nds_http_client *c = NULL;
    NDS_OK(nds_http_client_new(&c, 2));
    char url[256];
    snprintf(url, sizeof url, "%s%s", g_control, path);
    nds_http_request req = {method, url, NULL, 0, (const uint8_t *)body, body ? strlen(body) : 0,
                            10000,  0};
    nds_http_response resp;
    NDS_OK(nds_http_perform(c, &req, NULL, &resp));
    ck_assert_int_eq(resp.status, 200);
    nds_buf_append(&resp.body, "", 1);
    char *out = strdup((const char *)resp.body.data);
    nds_http_response_dispose(&resp);
    nds_http_client_free(c);
    return out;
}

static void faults(const char *rules_json) { free(control("POST", "/__faults", rules_json)); }

/* The double's stats as JSON; *size_of gets the stored size of key (-1 when absent). */
static json_object *stats(void) {
    char *s = control("GET", "/__stats", NULL);
    json_object *o = json_tokener_parse(s);
    free(s);
    ck_assert_ptr_nonnull(o);
    return o;
}

static long long stored_size(const char *full_key) {
    json_object *o = stats(), *objs, *b, *v;
    long long n = -1;
    if (json_object_object_get_ex(o, "objects", &objs) &&
        json_object_object_get_ex(objs, g_bucket, &b) && json_object_object_get_ex(b, full_key, &v))
        n = json_object_get_int64(v);
    json_object_put(o);
    return n;
}

static int uploads_in_progress(void) {
    json_object *o = stats(), *v;
    int n = json_object_object_get_ex(o, "uploads", &v) ? json_object_get_int(v) : -1;
    json_object_put(o);
    return n;
}

static char *full_key(nds_kvstore *kv, const char *key) {
    char *k = NULL;
    ck_assert_int_ge(asprintf(&k, "%s%s", nds_kvstore_path(kv), key), 0);
    return k;
}

static void put_str(nds_kvstore *kv, const char *key, const char *v, const nds_generation *cond,
                    int want) {
    nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
    if (cond) wo.if_equal = *cond;
    int rc = nds_kvstore_write(kv, key, v, strlen(v), &wo, NULL);
    ck_assert_msg(rc == want, "write %s: %d (%s), wanted %d", key, rc, nds_error_last()->message,
                  want);
}

static void assert_value(nds_kvstore *kv, const char *key, const char *want) {
    char *v = nds_kv_test_get(kv, key, NULL);
    if (!want)
        ck_assert_ptr_null(v);
    else
        ck_assert_msg(v && strcmp(v, want) == 0, "%s = %s, wanted %s", key, v ? v : "(missing)",
                      want);
    free(v);
}

/* Opens the raw driver instance of spec, to plant objects the driver would refuse (lease objects).
 */
static s3_store *raw_store(const char *spec) {
    json_object *o = json_tokener_parse(spec);
    void *st = NULL;
    NDS_OK(nds_kv_driver_s3.open(&st, o));
    json_object_put(o);
    return st;
}

static void raw_put(s3_store *s, const char *key, const char *body) {
    nds_http_response resp;
    s3_call put = {.method = "PUT", .key = key, .body = (const uint8_t *)body, .len = strlen(body)};
    NDS_OK(s3_send(s, &put, NULL, 0, &resp));
    ck_assert_int_eq(resp.status, 200);
    nds_http_response_dispose(&resp);
}

/* ---- offline ---- */

START_TEST(url_and_spec) {
    nds_kvstore *kv = NULL;
    NDS_OK(nds_kvstore_open(&kv, "s3://my-bucket/a/b/", NULL));
    ck_assert_str_eq(nds_kvstore_url(kv), "s3://my-bucket/a/b/");
    ck_assert_str_eq(nds_kvstore_path(kv), "a/b/");
    char *spec = printed_spec(kv);
    ck_assert_ptr_nonnull(strstr(spec, "\"bucket\":\"my-bucket\""));
    ck_assert_ptr_nonnull(strstr(spec, "\"conditional_writes_detected\":\"not probed yet\""));
    assert_no_secrets(spec);
    free(spec);
    nds_kvstore_free(kv);
    ck_assert_int_eq(nds_kvstore_open(&kv, "s3:///x/", NULL), NDS_EINVAL);
    const char *bad[] = {
        "{\"driver\":\"s3\",\"bucket\":\"b\",\"aws_secret_access_key\":\"x\"}",
        "{\"driver\":\"s3\",\"bucket\":\"b\",\"bogus\":1}",
        "{\"driver\":\"s3\",\"bucket\":\"b\",\"endpoint\":\"http://u:p@127.0.0.1:1\"}",
        "{\"driver\":\"s3\",\"bucket\":\"b\",\"endpoint\":\"ftp://127.0.0.1:1\"}",
        "{\"driver\":\"s3\",\"bucket\":\"b\",\"conditional_writes\":\"maybe\"}",
        "{\"driver\":\"s3\",\"bucket\":\"b\",\"multipart_part_size\":1000}",
        "{\"driver\":\"s3\",\"bucket\":\"b\",\"aws_credentials\":{\"type\":\"profile\",\"secret\":"
        "\"x\"}}",
        "{\"driver\":\"s3\",\"bucket\":\"b/c\"}",
        "{\"driver\":\"s3\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = nds_kvstore_open(&kv, bad[i], NULL);
        ck_assert_msg(rc == NDS_EINVAL, "%s: %d (%s)", bad[i], rc, nds_error_last()->message);
        ck_assert_ptr_null(strstr(nds_error_last()->message, "\"x\""));
    }
    ck_assert_msg(strstr(nds_error_last()->message, "bucket") != NULL, "%s",
                  nds_error_last()->message);
}
END_TEST

/* Credentials from a profile file: used, never printed, never in an error. */
START_TEST(profile_credentials_never_shown) {
    char *dir = nds_test_tmpdir(), *file = NULL;
    ck_assert_int_ge(asprintf(&file, "%s/credentials", dir), 0);
    FILE *f = fopen(file, "w");
    fprintf(
        f,
        "[default]\naws_access_key_id = DEFAULTAK\naws_secret_access_key = DEFAULTSECRETzzz\n\n"
        "[profile other]\naws_access_key_id=OTHERAKID\naws_secret_access_key = OTHER/SECRET+key\n"
        "aws_session_token = TOKENtokenTOKEN\n");
    fclose(f);
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    unsetenv("AWS_ENDPOINT_URL_S3");
    setenv("AWS_SHARED_CREDENTIALS_FILE", file, 1);
    setenv("AWS_PROFILE", "other", 1);
    const char *spec =
        "{\"driver\":\"s3\",\"bucket\":\"b\",\"path\":\"p/\",\"endpoint\":\"http://127.0.0.1:1\","
        "\"max_attempts\":2}";
    s3_store *s = raw_store(spec);
    ck_assert_str_eq(s->creds.access_key, "OTHERAKID");
    ck_assert_str_eq(s->creds.secret_key, "OTHER/SECRET+key");
    ck_assert_str_eq(s->creds.session_token, "TOKENtokenTOKEN");
    nds_kv_driver_s3.close(s);
    nds_kvstore *kv = open_spec(spec);
    char *printed = printed_spec(kv);
    ck_assert_ptr_null(strstr(printed, "OTHER"));
    ck_assert_ptr_null(strstr(printed, "TOKEN"));
    free(printed);
    nds_read_result r;
    int rc = nds_kvstore_read(kv, "k", NULL, &r);
    ck_assert_int_eq(rc, NDS_ENETWORK);
    const nds_error *e = nds_error_last();
    ck_assert_int_eq(e->cause_kind, NDS_CAUSE_CURL);
    ck_assert_ptr_nonnull(strstr(e->message, "p/k"));
    ck_assert_ptr_nonnull(strstr(e->message, "2 attempts"));
    ck_assert_ptr_null(strstr(e->message, "SECRET"));
    ck_assert_ptr_null(strstr(e->message, "TOKEN"));
    nds_kvstore_free(kv);
    setenv("AWS_PROFILE", "missing", 1);
    ck_assert_int_eq(nds_kvstore_open(&kv, spec, NULL), NDS_ENOTFOUND);
    ck_assert_ptr_null(strstr(nds_error_last()->message, "SECRET"));
    unsetenv("AWS_PROFILE");
    unlink(file);
    nds_test_rmtree(dir);
    free(file);
    free(dir);
}
END_TEST

static int count_keys(void *ctx, const char *key, uint64_t size) {
    (void)key;
    (void)size;
    (*(int *)ctx)++;
    return 0;
}

START_TEST(xml_reader) {
    const char *page =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListBucketResult xmlns=\"x\"><Name>b</Name>"
        "<IsTruncated>true</IsTruncated><Contents><Key>a%2Fb+c%26%C3%A9</Key><Size>12</Size>"
        "</Contents><!-- c --><Contents><Key>z</Key><Size>0</Size><ETag>&quot;e&quot;</ETag>"
        "</Contents><NextContinuationToken>t&amp;1</NextContinuationToken></ListBucketResult>";
    nds_s3_list_page p;
    NDS_OK(nds_s3_parse_list(page, strlen(page), true, &p));
    ck_assert_uint_eq(p.n, 2);
    ck_assert_str_eq(p.keys[0], "a/b c&\xc3\xa9");
    ck_assert_uint_eq(p.sizes[0], 12);
    ck_assert_str_eq(p.keys[1], "z");
    ck_assert(p.truncated);
    ck_assert_str_eq(p.next_token, "t&1");
    nds_s3_list_page_dispose(&p);
    const char *bad[] = {
        "<ListBucketResult><Contents><Key>a</Contents></ListBucketResult>",
        "<ListBucketResult><Contents><Key>a</Key><Size>-1</Size></Contents></ListBucketResult>",
        "<!DOCTYPE x [<!ENTITY a \"b\">]><ListBucketResult/>",
        "<ListBucketResult>&bogus;</ListBucketResult>",
        "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
        "<ListBucketResult></ListBucketResult><x/>",
        "",
        "<a",
        "text"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = nds_s3_parse_list(bad[i], strlen(bad[i]), true, &p);
        ck_assert_msg(rc == NDS_EFORMAT, "%s: %d", bad[i], rc);
        nds_s3_list_page_dispose(&p);
    }
    const char *err =
        "<Error><Code>NoSuchKey</Code><Message>The key &lt;x&gt; does not exist</Message></Error>";
    char code[32], msg[64];
    ck_assert(nds_s3_parse_error(err, strlen(err), code, sizeof code, msg, sizeof msg));
    ck_assert_str_eq(code, "NoSuchKey");
    ck_assert_str_eq(msg, "The key <x> does not exist");
    ck_assert(!nds_s3_parse_error("<Error><Code>", 13, code, sizeof code, msg, sizeof msg));
    char *id;
    const char *init = "<InitiateMultipartUploadResult><UploadId>2~x&#x41;&#66;</UploadId></"
                       "InitiateMultipartUploadResult>";
    NDS_OK(nds_s3_parse_upload_id(init, strlen(init), &id));
    ck_assert_str_eq(id, "2~xAB");
    free(id);
}
END_TEST

START_TEST(http_helpers) {
    char *e = nds_http_escape("a b/c+d~é", true);
    ck_assert_str_eq(e, "a%20b/c%2Bd~%C3%A9");
    free(e);
    e = nds_http_escape("a/b", false);
    ck_assert_str_eq(e, "a%2Fb");
    free(e);
    nds_http_response r = {0};
    r.headers = strdup("HTTP/1.1 200 OK\r\nETag:  \"abc\" \r\ncontent-length: 5\r\n\r\n");
    char v[16];
    ck_assert(nds_http_header(&r, "etag", v, sizeof v));
    ck_assert_str_eq(v, "\"abc\"");
    ck_assert(nds_http_header(&r, "Content-Length", v, sizeof v));
    ck_assert_str_eq(v, "5");
    ck_assert(!nds_http_header(&r, "range", v, sizeof v));
    r.status = 503;
    ck_assert(nds_http_retryable(&r));
    r.status = 501;
    ck_assert(!nds_http_retryable(&r));
    r.status = 429;
    ck_assert(nds_http_retryable(&r));
    r.status = 404;
    ck_assert(!nds_http_retryable(&r));
    nds_http_response_dispose(&r);
    /* nothing listens on port 1: an error after the last try, naming the URL without its query */
    nds_http_client *c = NULL;
    NDS_OK(nds_http_client_new(&c, 4));
    nds_http_request reqs[3];
    for (int i = 0; i < 3; i++)
        reqs[i] = (nds_http_request){
            "GET", "http://127.0.0.1:1/x?token=SECRETQ", NULL, 0, NULL, 0, 2000, 0};
    nds_http_response resps[3];
    int rcs[3];
    nds_http_retry p = {3, 1, 5};
    nds_http_perform_many(c, reqs, &p, resps, rcs, 3);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(rcs[i], NDS_ENETWORK);
        ck_assert_int_eq(resps[i].attempts, 3);
        nds_http_response_dispose(&resps[i]);
    }
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "http://127.0.0.1:1/x"));
    ck_assert_ptr_null(strstr(nds_error_last()->message, "SECRETQ"));
    nds_http_client_free(c);
}
END_TEST

/* Credential files that are no regular file, or too large, fail at once (they hung: fgets on
 * /dev/zero never ends, opening a FIFO waits for a writer). */
START_TEST(credential_files_bounded) {
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    unsetenv("AWS_PROFILE");
    char *dir = nds_test_tmpdir(), *fifo = NULL, *huge = NULL;
    ck_assert_int_ge(asprintf(&fifo, "%s/fifo", dir), 0);
    ck_assert_int_ge(asprintf(&huge, "%s/huge", dir), 0);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    FILE *f = fopen(huge, "w");
    ck_assert_int_eq(ftruncate(fileno(f), 2 << 20), 0);
    fclose(f);
    const char *spec = "{\"driver\":\"s3\",\"bucket\":\"b\",\"endpoint\":\"http://127.0.0.1:1\"}";
    const char *files[] = {"/dev/zero", fifo, huge};
    const int codes[] = {NDS_EINVAL, NDS_EINVAL, NDS_ELIMIT};
    const char *says[] = {"not a regular file", "not a regular file", "larger than 1048576"};
    for (int i = 0; i < 3; i++) {
        setenv("AWS_SHARED_CREDENTIALS_FILE", files[i], 1);
        nds_kvstore *kv = NULL;
        uint64_t t0 = nds_now_ns();
        int rc = nds_kvstore_open(&kv, spec, NULL);
        const char *m = nds_error_last()->message;
        ck_assert_msg(rc == codes[i] && strstr(m, says[i]) && strstr(m, files[i]), "%s: %d %s",
                      files[i], rc, m);
        ck_assert(nds_now_ns() - t0 < 2000000000ull);
    }
    unsetenv("AWS_SHARED_CREDENTIALS_FILE");
    unlink(fifo);
    unlink(huge);
    nds_test_rmtree(dir);
    free(fifo), free(huge), free(dir);
}
END_TEST

/* Bad bounds in the environment or the spec are refused, naming what. */
START_TEST(bounds_refused_when_bad) {
    const char *base = "{\"driver\":\"s3\",\"bucket\":\"b\",\"endpoint\":\"http://127.0.0.1:1\"";
    const char *members[] = {",\"max_response_bytes\":12}", ",\"request_deadline\":\"soon\"}",
                             ",\"stall_timeout\":\"10ms\"}", ",\"request_deadline\":0}"};
    const char *names[] = {"max_response_bytes", "request_deadline", "stall_timeout",
                           "request_deadline"};
    nds_kvstore *kv = NULL;
    for (int i = 0; i < 4; i++) {
        char spec[256];
        snprintf(spec, sizeof spec, "%s%s", base, members[i]);
        int rc = nds_kvstore_open(&kv, spec, NULL);
        ck_assert_msg(rc == NDS_EINVAL && strstr(nds_error_last()->message, names[i]), "%s: %d %s",
                      spec, rc, nds_error_last()->message);
    }
    const char *vars[] = {"NDS_HTTP_MAX_RESPONSE_BYTES", "NDS_HTTP_DEADLINE",
                          "NDS_HTTP_STALL_TIMEOUT"};
    const char *bad[] = {"lots", "-3s", "0.1s"};
    char spec[256];
    snprintf(spec, sizeof spec, "%s}", base);
    for (int i = 0; i < 3; i++) {
        setenv(vars[i], bad[i], 1);
        int rc = nds_kvstore_open(&kv, spec, NULL);
        ck_assert_msg(rc == NDS_EINVAL && strstr(nds_error_last()->message, vars[i]), "%s: %d %s",
                      vars[i], rc, nds_error_last()->message);
        unsetenv(vars[i]);
    }
    setenv("NDS_HTTP_MAX_RESPONSE_BYTES", "64M", 1);
    setenv("NDS_HTTP_DEADLINE", "1500ms", 1);
    NDS_OK(nds_kvstore_open(&kv, spec, NULL));
    nds_kvstore_free(kv);
    unsetenv("NDS_HTTP_MAX_RESPONSE_BYTES");
    unsetenv("NDS_HTTP_DEADLINE");
}
END_TEST

/* ---- against a server ---- */

START_TEST(auto_decision_recorded) {
    nds_kvstore *kv = open_spec(make_url());
    put_str(kv, "k", "v", NULL, 0);
    char *spec = printed_spec(kv);
    char want[64];
    snprintf(want, sizeof want, "\"conditional_writes_detected\":\"%s\"", g_expect);
    ck_assert_msg(strstr(spec, want) != NULL, "%s not in %s", want, spec);
    ck_assert_ptr_nonnull(strstr(spec, "\"conditional_writes_reason\""));
    ck_assert_ptr_nonnull(strstr(spec, "\"endpoint\""));
    assert_no_secrets(spec);
    const char *shown = strstr(spec, "\"conditional_writes_detected\"");
    fprintf(stderr, "s3 auto decision: %s\n", shown ? shown : spec);
    free(spec);
    /* the probe leaves nothing behind */
    char *all = nds_kv_test_list(kv, "");
    ck_assert_str_eq(all, "k=1");
    free(all);
    nds_kvstore_free(kv);
}
END_TEST

START_TEST(multipart_upload) {
    const char *spec =
        spec_with(",\"multipart_threshold\":5242880,\"multipart_part_size\":5242880");
    nds_kvstore *kv = open_spec(spec);
    size_t n = (12u << 20) + 123;
    uint8_t *data = malloc(n);
    for (size_t i = 0; i < n; i++) data[i] = (uint8_t)(i * 2654435761u >> 11);
    nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
    wo.if_equal.kind = NDS_GEN_ABSENT;
    nds_generation g;
    NDS_OK(nds_kvstore_write(kv, "big", data, n, &wo, &g));
    /* create-only: a multipart upload where If-None-Match is trusted on its completion (full),
     * else one PUT (create_only mode: Ceph RGW ignores the header on a completion) */
    bool full = strcmp(g_expect, "full") == 0;
    ck_assert_msg((strstr(g.value, "-3#") != NULL) == full, "generation %s: %s", g.value,
                  full ? "not a 3-part upload's" : "a multipart upload's");
    nds_read_result r;
    NDS_OK(nds_kvstore_read(kv, "big", NULL, &r));
    ck_assert_uint_eq(r.value.len, n);
    ck_assert(memcmp(r.value.data, data, n) == 0);
    ck_assert(nds_generation_equal(&r.generation, &g));
    nds_read_result_dispose(&r);
    nds_read_options o = NDS_READ_OPTIONS_INIT;
    o.byte_start = (5 << 20) - 10;
    o.byte_length = 20;
    NDS_OK(nds_kvstore_read(kv, "big", &o, &r));
    ck_assert_uint_eq(r.value.len, 20);
    ck_assert(memcmp(r.value.data, data + o.byte_start, 20) == 0);
    ck_assert_uint_eq(r.total_size, n);
    nds_read_result_dispose(&r);
    ck_assert_int_eq(nds_kvstore_write(kv, "big", data, n, &wo, NULL),
                     NDS_ECONFLICT); /* aborted, nothing lost */
    wo.if_equal = g;
    data[0] ^= 1;
    NDS_OK(nds_kvstore_write(kv, "big", data, n, &wo, &g));
    ck_assert_msg(strstr(g.value, "-3#") != NULL, "generation %s is not a 3-part upload's",
                  g.value);
    if (g_strict) ck_assert_int_eq(uploads_in_progress(), 0);
    free(data);
    nds_kvstore_free(kv);
}
END_TEST

START_TEST(odd_keys) {
    nds_kvstore *kv = open_spec(make_url());
    const char *keys[] = {"sp ace/a+b=c&d~e", "\xc3\xa9t\xc3\xa9/x.y", "q?x#y", "p%20q",
                          "semi;colon,comma"};
    for (size_t i = 0; i < 5; i++) put_str(kv, keys[i], keys[i], NULL, 0);
    for (size_t i = 0; i < 5; i++) assert_value(kv, keys[i], keys[i]);
    int n = 0;
    NDS_OK(nds_kvstore_list(kv, "", count_keys, &n));
    ck_assert_int_eq(n, 5);
    char *l = nds_kv_test_list(kv, "sp ace/");
    ck_assert_str_eq(l, "sp ace/a+b=c&d~e=16");
    free(l);
    ck_assert_int_eq(nds_kvstore_write(kv, "x.__lock", "v", 1, NULL, NULL), NDS_EINVAL);
    nds_kvstore_free(kv);
}
END_TEST

/* A dead writer's lease is broken after it expires; a live one is waited for, then reported. */
START_TEST(lease_lock) {
    if (strcmp(g_expect, "none") == 0) return;
    const char *spec = spec_with(",\"conditional_writes\":\"create_only\",\"lease_seconds\":2");
    nds_kvstore *kv = open_spec(spec);
    s3_store *raw = raw_store(spec);
    char *lock = full_key(kv, "k.__lock");
    raw_put(raw, lock, "{\"owner\":\"dead-writer\",\"lease_ms\":2000}");
    uint64_t t0 = nds_now_ns();
    /* unconditional, so it takes the lease (a create-only write would not) */
    put_str(kv, "k", "after the dead one", NULL, 0);
    double secs = (double)(nds_now_ns() - t0) / 1e9;
    ck_assert_msg(secs > 2.0 && secs < 20.0, "lease broken after %.1f s", secs);
    assert_value(kv, "k", "after the dead one");
    char *all = nds_kv_test_list(kv, "");
    ck_assert_str_eq(all, "k=18"); /* lease objects and claims are hidden */
    free(all);
    /* a live lease (long expiry): the writer waits lease_wait_seconds, then says who holds it */
    const char *spec2 =
        spec_with(",\"conditional_writes\":\"create_only\",\"lease_wait_seconds\":1");
    nds_kvstore *kv2 = open_spec(spec2);
    char *lock2 = full_key(kv2, "k.__lock");
    raw_put(raw, lock2, "{\"owner\":\"live-writer\",\"lease_ms\":600000}");
    int rc = nds_kvstore_write(kv2, "k", "x", 1, NULL, NULL);
    ck_assert_int_eq(rc, NDS_ETIMEOUT);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "live-writer"));
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, ".__lock"));
    assert_value(kv2, "k", NULL);
    nds_kv_driver_s3.close(raw);
    nds_kvstore_free(kv);
    nds_kvstore_free(kv2);
    free(lock);
    free(lock2);
}
END_TEST

/* In create_only mode a create-only write is one PUT with If-None-Match: *, without the lease:
 * it goes through while another writer holds the key's lease, also above the multipart threshold,
 * and the server refuses a second one. Writes that compare a generation still wait for the lease.
 */
START_TEST(create_only_skips_the_lease) {
    const char *spec = spec_with(",\"conditional_writes\":\"create_only\",\"lease_wait_seconds\":1,"
                                 "\"multipart_threshold\":5242880");
    nds_kvstore *kv = open_spec(spec);
    s3_store *raw = raw_store(spec);
    char *lock = full_key(kv, "k.__lock"), *big_lock = full_key(kv, "big.__lock");
    raw_put(raw, lock, "{\"owner\":\"live-writer\",\"lease_ms\":600000}");
    raw_put(raw, big_lock, "{\"owner\":\"live-writer\",\"lease_ms\":600000}");
    nds_generation absent = {NDS_GEN_ABSENT, {0}}, g;
    uint64_t t0 = nds_now_ns();
    put_str(kv, "k", "first", &absent, 0);
    put_str(kv, "k", "second", &absent, NDS_ECONFLICT);
    double secs = (double)(nds_now_ns() - t0) / 1e9;
    ck_assert_msg(secs < 1.0, "create-only writes took %.1f s: they waited for the lease", secs);
    assert_value(kv, "k", "first");
    free(nds_kv_test_get(kv, "k", &g));
    put_str(kv, "k", "third", &g, NDS_ETIMEOUT); /* If-Match: under the lease */
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "live-writer"));
    put_str(kv, "k", "fourth", NULL, NDS_ETIMEOUT); /* unconditional: under the lease */
    assert_value(kv, "k", "first");
    size_t n = (6u << 20) + 5;
    uint8_t *data = malloc(n);
    for (size_t i = 0; i < n; i++) data[i] = (uint8_t)(i * 2654435761u >> 13);
    nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
    wo.if_equal.kind = NDS_GEN_ABSENT;
    int rc = nds_kvstore_write(kv, "big", data, n, &wo, &g);
    ck_assert_msg(rc == 0, "large create-only write: %d (%s)", rc, nds_error_last()->message);
    ck_assert_msg(strchr(g.value, '-') == NULL, "generation %s: a multipart upload", g.value);
    ck_assert_int_eq(nds_kvstore_write(kv, "big", data, n, &wo, NULL), NDS_ECONFLICT);
    nds_read_result r;
    NDS_OK(nds_kvstore_read(kv, "big", NULL, &r));
    ck_assert(r.value.len == n && memcmp(r.value.data, data, n) == 0);
    nds_read_result_dispose(&r);
    free(data);
    nds_kv_driver_s3.close(raw);
    nds_kvstore_free(kv);
    free(lock);
    free(big_lock);
}
END_TEST

START_TEST(bad_credentials) {
    const char *sk = getenv("AWS_SECRET_ACCESS_KEY");
    char *wrong = NULL;
    ck_assert_int_ge(asprintf(&wrong, "%sWRONG", sk ? sk : ""), 0);
    setenv("AWS_SECRET_ACCESS_KEY", wrong, 1);
    nds_kvstore *kv = open_spec(make_url());
    nds_read_result r;
    int rc = nds_kvstore_read(kv, "k", NULL, &r);
    ck_assert_msg(rc == NDS_EPERM, "%d %s", rc, nds_error_last()->message);
    const nds_error *e = nds_error_last();
    ck_assert_int_eq(e->cause_kind, NDS_CAUSE_HTTP);
    ck_assert_int_eq(e->cause, 403);
    ck_assert_ptr_nonnull(strstr(e->message, "HTTP 403"));
    ck_assert_ptr_nonnull(strstr(e->message, "/k"));
    ck_assert_ptr_null(strstr(e->message, wrong));
    nds_kvstore_free(kv);
    kv = open_spec(spec_with(",\"aws_credentials\":{\"type\":\"anonymous\"}"));
    int wrc = nds_kvstore_write(kv, "k", "v", 1, NULL, NULL);
    /* refused; Swift s3api says 400 without a code, the others 403 */
    ck_assert_msg(wrc == NDS_EPERM ||
                      (wrc == NDS_EINVAL && strstr(nds_error_last()->message, "HTTP 400")),
                  "anonymous write: %d (%s)", wrc, nds_error_last()->message);
    nds_kvstore_free(kv);
    free(wrong);
}
END_TEST

/* A server that refuses conditional writes (Swift s3api): refused with a reason unless "off". */
START_TEST(conditional_refused_unless_off) {
    nds_kvstore *kv = open_spec(make_url());
    put_str(kv, "plain", "v", NULL, 0);
    nds_generation absent = {NDS_GEN_ABSENT, {0}};
    put_str(kv, "c", "v", &absent, NDS_EUNSUPPORTED);
    const char *m = nds_error_last()->message;
    ck_assert_ptr_nonnull(strstr(m, "conditional_writes"));
    ck_assert_ptr_nonnull(strstr(m, "nothing was written"));
    assert_value(kv, "c", NULL);
    nds_kvstore_free(kv);
    kv = open_spec(spec_with(",\"conditional_writes\":\"off\""));
    put_str(kv, "c", "v1", &absent, 0);
    put_str(kv, "c", "v2", &absent, NDS_ECONFLICT); /* checked, though not atomically */
    assert_value(kv, "c", "v1");
    nds_kvstore_free(kv);
}
END_TEST

/* ---- the versioned adapter over this server ---- */

static const char *make_versioned_url(void) {
    static int n;
    char *url = NULL;
    ck_assert_int_ge(
        asprintf(&url, "s3://%s/%s/v%d-%d/|versioned:", g_bucket, g_run, (int)getpid(), n++), 0);
    return keep(url);
}

/* A versioned store over this server, as a spec whose base has the extra members ("" or
 * ",\"k\":v..."); *base_path gets the base's path. */
static const char *versioned_spec(const char *extra, const char **base_path) {
    static int n;
    char *path = NULL, *spec = NULL;
    ck_assert_int_ge(asprintf(&path, "%s/vs%d-%d/", g_run, (int)getpid(), n++), 0);
    ck_assert_int_ge(asprintf(&spec,
                              "{\"driver\":\"versioned\",\"base\":{\"driver\":\"s3\",\"bucket\":"
                              "\"%s\",\"path\":\"%s\"%s}}",
                              g_bucket, path, extra),
                     0);
    if (base_path) *base_path = keep(path);
    else free(path);
    return keep(spec);
}

/* The plain s3 store under a versioned spec's base path. */
static nds_kvstore *open_base_of(const char *base_path) {
    char *url = NULL;
    ck_assert_int_ge(asprintf(&url, "s3://%s/%s", g_bucket, base_path), 0);
    return open_spec(keep(url));
}

/* 8 processes x 10 rounds, each an increment of a shared counter and a write of the process's own
 * key, through |versioned:: no commit lost, and every version reads back exactly what was committed
 * in it (nds_kv_test_versioned_processes). */
START_TEST(versioned_eight_processes_disjoint_and_overlapping) {
    uint64_t t0 = nds_now_ns();
    nds_kv_test_versioned_processes(make_versioned_url(), 8, 10);
    fprintf(stderr, "s3 versioned: 8 processes x 10 rounds (160 versions, each read back): %.1f s\n",
            (double)(nds_now_ns() - t0) / 1e9);
}
END_TEST

/* A base without create-only writes (Swift's s3api) is refused at open, before anything is
 * written, saying what it lacks and why; nothing of the store is left. */
START_TEST(versioned_refused_without_create_only) {
    const char *url = make_versioned_url();
    nds_kvstore *kv = NULL;
    int rc = nds_kvstore_open(&kv, url, NULL);
    const char *m = nds_error_last()->message;
    ck_assert_msg(rc == NDS_EUNSUPPORTED, "open: %d (%s)", rc, rc ? m : "opened");
    ck_assert_msg(strstr(m, "lacks atomic create-only writes") && strstr(m, "If-None-Match") &&
                      strstr(m, "501") && strstr(m, g_run),
                  "%s", m);
    ck_assert_ptr_null(kv);
    char *plain = NULL;
    ck_assert_int_ge(asprintf(&plain, "%.*s", (int)(strstr(url, "|versioned:") - url), url), 0);
    kv = open_spec(keep(plain));
    char *all = nds_kv_test_list(kv, "");
    ck_assert_str_eq(all, ""); /* no object of the store was left */
    free(all);
    nds_kvstore_free(kv);
}
END_TEST

/* "conditional_writes": "off" on the base makes conditions a HEAD, not atomic: a store that
 * commits is refused at open saying so and what to set; one pinned to a version (read-only) is
 * not. */
START_TEST(versioned_refused_when_conditional_writes_off) {
    const char *base_path;
    const char *spec = versioned_spec("", &base_path);
    nds_kvstore *kv = open_spec(spec);
    nds_kv_test_put(kv, "k", "v1");
    nds_kvstore_free(kv);
    char *off = NULL;
    ck_assert_int_ge(asprintf(&off,
                              "{\"driver\":\"versioned\",\"base\":{\"driver\":\"s3\",\"bucket\":"
                              "\"%s\",\"path\":\"%s\",\"conditional_writes\":\"off\"}%s}",
                              g_bucket, base_path, "%s"),
                     0);
    char *latest = NULL, *pinned = NULL;
    ck_assert_int_ge(asprintf(&latest, off, ""), 0);
    ck_assert_int_ge(asprintf(&pinned, off, ",\"version\":1"), 0);
    kv = NULL;
    int rc = nds_kvstore_open(&kv, latest, NULL);
    const char *m = nds_error_last()->message;
    ck_assert_msg(rc == NDS_EUNSUPPORTED, "open: %d (%s)", rc, rc ? m : "opened");
    ck_assert_msg(strstr(m, "lacks atomic create-only writes") &&
                      strstr(m, "\"conditional_writes\": \"off\"") && strstr(m, "\"auto\"") &&
                      strstr(m, base_path),
                  "%s", m);
    kv = open_spec(pinned);
    assert_value(kv, "k", "v1");
    nds_kvstore_free(kv);
    free(off);
    free(latest);
    free(pinned);
}
END_TEST

/* Requests of each method the double has served (0 elsewhere). */
static void request_counts(long long out[4]) {
    static const char *const methods[4] = {"GET", "PUT", "HEAD", "DELETE"};
    memset(out, 0, 4 * sizeof *out);
    if (!g_strict) return;
    json_object *o = stats(), *req, *v;
    for (int i = 0; i < 4; i++)
        if (json_object_object_get_ex(o, "requests", &req) &&
            json_object_object_get_ex(req, methods[i], &v))
            out[i] = json_object_get_int64(v);
    json_object_put(o);
}

/* The head hint is a plain PUT, never under the lease, in create_only mode (where unconditional
 * writes take the key's lease): commits go through while someone holds the hint's lease, and the
 * hint follows them. Prints a commit's cost (requests on the double; latency everywhere). */
START_TEST(versioned_hint_skips_the_lease) {
    if (strcmp(g_expect, "none") == 0) return;
    const char *base_path;
    const char *spec = versioned_spec(
        ",\"conditional_writes\":\"create_only\",\"lease_wait_seconds\":1", &base_path);
    nds_kvstore *base = open_base_of(base_path), *kv = open_spec(spec);
    nds_kv_test_put(kv, "k", "first"); /* the probe is done */
    /* what a commit costs (printed before the check, so the cost with a lease shows too) */
    enum { COMMITS = 50 };
    long long before[4], after[4];
    request_counts(before);
    uint64_t t0 = nds_now_ns();
    for (int i = 0; i < COMMITS; i++) {
        char v[16];
        snprintf(v, sizeof v, "%d", i);
        nds_kv_test_put(kv, "k", v);
    }
    double ms = (double)(nds_now_ns() - t0) / 1e6 / COMMITS;
    request_counts(after);
    double per[4];
    for (int i = 0; i < 4; i++) per[i] = (double)(after[i] - before[i]) / COMMITS;
    fprintf(stderr,
            "s3 versioned commit (create_only mode, %d commits of one key): %.1f ms each%s",
            COMMITS, ms, g_strict ? "" : "\n");
    if (g_strict) {
        fprintf(stderr, "; requests per commit: GET %.1f, PUT %.1f, HEAD %.1f, DELETE %.1f\n",
                per[0], per[1], per[2], per[3]);
        ck_assert_msg(per[3] == 0 && per[1] <= 3,
                      "a commit sent %.1f PUTs and %.1f DELETEs: a lease was taken", per[1],
                      per[3]);
    }
    assert_value(base, "head", "51\n");
    /* someone holds the hint's lease: commits do not wait for it, and the hint follows them */
    s3_store *raw = raw_store(spec_with(""));
    char *lock = full_key(base, "head.__lock");
    raw_put(raw, lock, "{\"owner\":\"live-writer\",\"lease_ms\":600000}");
    t0 = nds_now_ns();
    for (int i = 0; i < 3; i++) nds_kv_test_put(kv, "k", "v");
    double secs = (double)(nds_now_ns() - t0) / 1e9;
    ck_assert_msg(secs < 1.0, "3 commits took %.1f s: the hint waited for its lease", secs);
    assert_value(base, "head", "54\n");
    nds_kvstore_free(kv);
    nds_kvstore_free(base);
    nds_kv_driver_s3.close(raw);
    free(lock);
}
END_TEST

/* ---- faults (the test double only) ---- */

START_TEST(fault_503_then_success) {
    nds_kvstore *kv = open_spec(make_url());
    put_str(kv, "warm", "x", NULL, 0); /* probe done */
    faults("{\"rules\":[{\"method\":\"PUT\",\"key\":\"/f1$\",\"action\":\"503\",\"count\":3}]}");
    put_str(kv, "f1", "value", NULL, 0);
    assert_value(kv, "f1", "value");
    faults("{\"rules\":[{\"method\":\"GET\",\"key\":\"/f1$\",\"action\":\"reset\",\"count\":2}]}");
    assert_value(kv, "f1", "value");
    nds_kvstore_free(kv);
}
END_TEST

/* The change is applied but the answer is lost: the retry is refused by its own earlier try, and
 * the driver recognises its bytes. The value is there once. */
START_TEST(fault_answer_lost_after_apply) {
    for (int leased = 0; leased < 2; leased++) {
        nds_kvstore *kv =
            open_spec(spec_with(leased ? ",\"conditional_writes\":\"create_only\"" : ""));
        put_str(kv, "warm", "x", NULL, 0);
        nds_generation absent = {NDS_GEN_ABSENT, {0}}, g;
        faults("{\"rules\":[{\"method\":\"PUT\",\"key\":\"/"
               "f2$\",\"action\":\"reset_after\",\"count\":1}]}");
        put_str(kv, "f2", "created", &absent, 0);
        put_str(kv, "f2", "again", &absent, NDS_ECONFLICT);
        free(nds_kv_test_get(kv, "f2", &g));
        faults("{\"rules\":[{\"method\":\"PUT\",\"key\":\"/"
               "f2$\",\"action\":\"500_after\",\"count\":1}]}");
        put_str(kv, "f2", "updated", &g, 0);
        assert_value(kv, "f2", "updated");
        char *k = full_key(kv, "f2.__lock");
        ck_assert_int_eq(stored_size(k), -1); /* the lease was released */
        free(k);
        nds_kvstore_free(kv);
    }
}
END_TEST

START_TEST(fault_truncated_and_slow) {
    nds_kvstore *kv = open_spec(spec_with(",\"request_timeout_seconds\":1"));
    size_t n = 200000;
    char *v = malloc(n + 1);
    for (size_t i = 0; i < n; i++) v[i] = (char)('a' + i % 26);
    v[n] = '\0';
    put_str(kv, "f4", v, NULL, 0);
    faults(
        "{\"rules\":[{\"method\":\"GET\",\"key\":\"/f4$\",\"action\":\"truncate\",\"count\":2}]}");
    assert_value(kv, "f4", v);
    faults("{\"rules\":[{\"method\":\"PUT\",\"key\":\"/"
           "f5$\",\"action\":\"slow\",\"delay_ms\":2500,\"count\":1}]}");
    put_str(kv, "f5", "slow", NULL, 0);
    assert_value(kv, "f5", "slow");
    free(v);
    nds_kvstore_free(kv);
}
END_TEST

/* Failing after the last try: a clear error, nothing visible. */
START_TEST(fault_persistent_errors) {
    const char *spec = spec_with(
        ",\"max_attempts\":3,\"multipart_threshold\":5242880,\"multipart_part_size\":5242880");
    nds_kvstore *kv = open_spec(spec);
    put_str(kv, "warm", "x", NULL, 0);
    faults("{\"rules\":[{\"method\":\"PUT\",\"key\":\"/f6$\",\"action\":\"503\",\"count\":100}]}");
    put_str(kv, "f6", "never", NULL, NDS_EIO);
    const nds_error *e = nds_error_last();
    ck_assert_int_eq(e->cause_kind, NDS_CAUSE_HTTP);
    ck_assert_int_eq(e->cause, 503);
    ck_assert_ptr_nonnull(strstr(e->message, "/f6"));
    ck_assert_ptr_nonnull(strstr(e->message, "HTTP 503 SlowDown"));
    ck_assert_ptr_nonnull(strstr(e->message, "after 3 attempts"));
    ck_assert_ptr_nonnull(strstr(e->message, "try 1: HTTP 503; try 2: HTTP 503"));
    assert_no_secrets(e->message);
    assert_value(kv, "f6", NULL);
    size_t n = 11u << 20;
    uint8_t *big = calloc(1, n);
    faults("{\"rules\":[{\"method\":\"PUT\",\"key\":\"/f7$\",\"action\":\"503\",\"count\":100}]}");
    ck_assert_int_eq(nds_kvstore_write(kv, "f7", big, n, NULL, NULL), NDS_EIO);
    ck_assert_int_eq(uploads_in_progress(), 0); /* aborted */
    assert_value(kv, "f7", NULL);
    free(big);
    nds_kvstore_free(kv);
}
END_TEST

START_TEST(virtual_hosted_addressing) {
    const char *port = strrchr(g_control, ':') + 1;
    char extra[200];
    snprintf(extra, sizeof extra,
             ",\"endpoint\":\"http://localhost:%s\",\"addressing_style\":\"virtual\"", port);
    nds_kvstore *kv = open_spec(spec_with(extra));
    put_str(kv, "vh", "virtual", NULL, 0);
    assert_value(kv, "vh", "virtual");
    char *l = nds_kv_test_list(kv, "");
    ck_assert_str_eq(l, "vh=7");
    free(l);
    nds_kvstore_free(kv);
}
END_TEST

/* Hostile answers: an endless body and a huge Content-Length fail with NDS_ELIMIT naming the key
 * and the limit, quickly and without buffering past it; an endless error body is cut at 64 KiB. */
START_TEST(hostile_bodies_bounded) {
    nds_kvstore *kv = open_spec(spec_with(",\"max_response_bytes\":1048576"));
    put_str(kv, "h1", "small", NULL, 0);
    uint64_t t0 = nds_now_ns();
    nds_read_result r;
    faults("{\"rules\":[{\"method\":\"GET\",\"key\":\"/h1$\",\"action\":\"endless\"}]}");
    ck_assert_int_eq(nds_kvstore_read(kv, "h1", NULL, &r), NDS_ELIMIT);
    const char *m = nds_error_last()->message;
    ck_assert_msg(strstr(m, "/h1") && strstr(m, "larger than 1048576 bytes") &&
                      strstr(m, "max_response_bytes") && strstr(m, "NDS_HTTP_MAX_RESPONSE_BYTES"),
                  "%s", m);
    assert_no_secrets(m);
    faults("{\"rules\":[{\"method\":\"GET\",\"key\":\"/h1$\",\"action\":\"huge_length\"}]}");
    ck_assert_int_eq(nds_kvstore_read(kv, "h1", NULL, &r), NDS_ELIMIT);
    m = nds_error_last()->message;
    ck_assert_msg(strstr(m, "Content-Length: 1000000000000"), "%s", m);
    faults(
        "{\"rules\":[{\"method\":\"GET\",\"key\":\"/h1$\",\"action\":\"endless_error\"}]}");
    NDS_OK(nds_kvstore_read(kv, "h1", NULL, &r)); /* a 404 whose body never ends: missing */
    ck_assert_int_eq(r.state, NDS_READ_MISSING);
    nds_read_result_dispose(&r);
    /* a real value over the limit: refused from its Content-Length */
    size_t n = 2u << 20;
    char *big = malloc(n + 1);
    memset(big, 'b', n);
    big[n] = '\0';
    put_str(kv, "h2", big, NULL, 0);
    ck_assert_int_eq(nds_kvstore_read(kv, "h2", NULL, &r), NDS_ELIMIT);
    ck_assert_msg(strstr(nds_error_last()->message, "Content-Length: 2097152"), "%s",
                  nds_error_last()->message);
    free(big);
    ck_assert_msg(nds_now_ns() - t0 < 10000000000ull, "took %.1f s",
                  (double)(nds_now_ns() - t0) / 1e9);
    assert_value(kv, "h1", "small");
    nds_kvstore_free(kv);
    /* an answer to a PUT is a small document, whatever the store's limit */
    kv = open_spec(spec_with(""));
    faults("{\"rules\":[{\"method\":\"PUT\",\"key\":\"/h3$\",\"action\":\"endless\"}]}");
    ck_assert_int_eq(nds_kvstore_write(kv, "h3", "v", 1, NULL, NULL), NDS_ELIMIT);
    ck_assert_msg(strstr(nds_error_last()->message, "larger than 1048576 bytes (the limit of this"),
                  "%s", nds_error_last()->message);
    faults("{\"rules\":[]}");
    nds_kvstore_free(kv);
}
END_TEST

/* A server that answers every page with the continuation token it was given: an error, not an
 * endless loop (it made 1,363 requests in 60 s). */
START_TEST(hostile_listing_repeats_token) {
    nds_kvstore *kv = open_spec(spec_with(""));
    put_str(kv, "l1", "x", NULL, 0);
    faults("{\"rules\":[{\"method\":\"GET\",\"key\":\"^$\",\"action\":\"repeat_token\","
           "\"count\":1000000}]}");
    int n = 0;
    int rc = nds_kvstore_list(kv, "", count_keys, &n);
    const char *m = nds_error_last()->message;
    ck_assert_msg(rc == NDS_EIO && strstr(m, "continuation token") && strstr(m, "s3://test/"),
                  "%d %s", rc, m);
    faults("{\"rules\":[]}");
    nds_kvstore_free(kv);
}
END_TEST

/* A server that accepts and never answers: each try is cut by the stall time, and the operation by
 * its deadline, with a message naming the URL, the tries, the time and why each retry happened. */
START_TEST(hostile_stall_meets_deadline) {
    nds_kvstore *kv = open_spec(spec_with(",\"stall_timeout\":1,\"request_deadline\":\"3s\""));
    put_str(kv, "st", "v", NULL, 0);
    faults("{\"rules\":[{\"method\":\"GET\",\"key\":\"/st$\",\"action\":\"stall\","
           "\"delay_ms\":20000,\"count\":100}]}");
    uint64_t t0 = nds_now_ns();
    nds_read_result r;
    ck_assert_int_eq(nds_kvstore_read(kv, "st", NULL, &r), NDS_ETIMEOUT);
    double took = (double)(nds_now_ns() - t0) / 1e9;
    const char *m = nds_error_last()->message;
    ck_assert_msg(took > 2.5 && took < 6, "took %.1f s: %s", took, m);
    ck_assert_msg(strstr(m, "/st") && strstr(m, "attempts in") &&
                      strstr(m, "deadline of 3.0 s") && strstr(m, "try 1: Operation too slow"),
                  "%s", m);
    nds_kvstore_free(kv);
    /* 503 for ever with 100 tries allowed: the deadline ends the retries, and says so */
    kv = open_spec(spec_with(",\"max_attempts\":100,\"request_deadline\":\"1500ms\""));
    faults("{\"rules\":[{\"method\":\"GET\",\"key\":\"/st$\",\"action\":\"503\","
           "\"count\":1000}]}");
    t0 = nds_now_ns();
    ck_assert_int_eq(nds_kvstore_read(kv, "st", NULL, &r), NDS_EIO);
    took = (double)(nds_now_ns() - t0) / 1e9;
    m = nds_error_last()->message;
    ck_assert_msg(took < 4 && strstr(m, "stopped by the deadline") && strstr(m, "HTTP 503"),
                  "took %.1f s: %s", took, m);
    faults("{\"rules\":[]}");
    nds_kvstore_free(kv);
}
END_TEST

/* ---- the test double's lifetime ---- */

static pid_t g_server;

/* Starts strict_s3.py next to this file's tests/ tree; false when it cannot run here. */
static bool start_double(void) {
    if (access("/usr/bin/python3", X_OK) != 0) return false;
    const char *src = __FILE__;
    const char *slash = strrchr(src, '/');
    char script[4096], portfile[256];
    snprintf(script, sizeof script, "%.*s/../servers/strict_s3.py", slash ? (int)(slash - src) : 1,
             slash ? src : ".");
    snprintf(portfile, sizeof portfile, "/tmp/nds-strict-s3-%d.port", (int)getpid());
    unlink(portfile);
    char ak[40], sk[40];
    snprintf(ak, sizeof ak, "AKTEST%08x", (unsigned)(nds_random_u64() & 0xffffffffu));
    snprintf(sk, sizeof sk, "SK/%016llx+x", (unsigned long long)nds_random_u64());
    g_server = fork();
    if (g_server == 0) {
        freopen("/dev/null", "w", stdout);
        execl("/usr/bin/python3", "python3", script, "--port-file", portfile, "--buckets", "test",
              "--access-key", ak, "--secret-key", sk, "--max-keys", "7", (char *)NULL);
        _exit(127);
    }
    int port = 0;
    for (int i = 0; i < 200 && port == 0; i++) {
        FILE *f = fopen(portfile, "r");
        if (f && fscanf(f, "%d", &port) != 1) port = 0;
        if (f) fclose(f);
        if (!port) usleep(50000);
    }
    unlink(portfile);
    if (!port) return false;
    snprintf(g_control, sizeof g_control, "http://127.0.0.1:%d", port);
    setenv("AWS_ENDPOINT_URL_S3", g_control, 1);
    setenv("AWS_ACCESS_KEY_ID", ak, 1);
    setenv("AWS_SECRET_ACCESS_KEY", sk, 1);
    unsetenv("AWS_SESSION_TOKEN");
    g_bucket = "test";
    g_expect = "full";
    g_strict = true;
    return true;
}

static void stop_double(void) {
    if (g_server > 0) {
        kill(g_server, SIGTERM);
        waitpid(g_server, NULL, 0);
    }
}

int main(void) {
    snprintf(g_run, sizeof g_run, "ndstest-%08x", (unsigned)(nds_random_u64() & 0xffffffffu));
    const char *endpoint = getenv("NDS_S3_TEST_ENDPOINT");
    bool server = false;
    if (endpoint && *endpoint) {
        setenv("AWS_ENDPOINT_URL_S3", endpoint, 1);
        g_bucket = getenv("NDS_S3_TEST_BUCKET") ? getenv("NDS_S3_TEST_BUCKET") : "test";
        g_expect = getenv("NDS_S3_TEST_EXPECT") ? getenv("NDS_S3_TEST_EXPECT") : "create_only";
        server = true;
    } else {
        unsetenv("AWS_ENDPOINT_URL_S3");
        server = start_double();
    }
    Suite *s = suite_create("kv_s3");
    TCase *off = tcase_create("offline");
    tcase_add_test(off, url_and_spec);
    tcase_add_test(off, profile_credentials_never_shown);
    tcase_add_test(off, xml_reader);
    tcase_add_test(off, http_helpers);
    suite_add_tcase(s, off);
    TCase *bounded = tcase_create("bounded offline");
    tcase_set_timeout(bounded, 20);
    tcase_add_test(bounded, credential_files_bounded);
    tcase_add_test(bounded, bounds_refused_when_bad);
    suite_add_tcase(s, bounded);
    if (server) {
        fprintf(stderr, "test_kv_s3: server %s, bucket %s, expecting \"%s\"%s\n",
                getenv("AWS_ENDPOINT_URL_S3"), g_bucket, g_expect,
                g_strict ? " (strict test double)" : "");
        if (strcmp(g_expect, "none") != 0)
            suite_add_tcase(s, nds_kv_conformance_tcase("s3 conformance", make_url));
        TCase *tc = tcase_create("s3");
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, auto_decision_recorded);
        tcase_add_test(tc, odd_keys);
        tcase_add_test(tc, bad_credentials);
        if (strcmp(g_expect, "none") == 0) {
            tcase_add_test(tc, conditional_refused_unless_off);
            tcase_add_test(tc, versioned_refused_without_create_only);
        } else {
            tcase_add_test(tc, multipart_upload);
            tcase_add_test(tc, lease_lock);
            tcase_add_test(tc, create_only_skips_the_lease);
            tcase_add_test(tc, versioned_refused_when_conditional_writes_off);
            tcase_add_test(tc, versioned_hint_skips_the_lease);
        }
        if (g_strict) {
            tcase_add_test(tc, fault_503_then_success);
            tcase_add_test(tc, fault_answer_lost_after_apply);
            tcase_add_test(tc, fault_truncated_and_slow);
            tcase_add_test(tc, fault_persistent_errors);
            tcase_add_test(tc, virtual_hosted_addressing);
            tcase_add_test(tc, hostile_bodies_bounded);
            tcase_add_test(tc, hostile_listing_repeats_token);
            tcase_add_test(tc, hostile_stall_meets_deadline);
        }
        suite_add_tcase(s, tc);
        /* the versioned adapter over this server (minutes on Ceph RGW: only when asked; its
         * refusals and the hint are also in "s3", for a run without the servers' script) */
        const char *versioned = getenv("NDS_S3_TEST_VERSIONED");
        if (versioned && strcmp(versioned, "1") == 0) {
            TCase *vc = tcase_create("s3 versioned");
            tcase_set_timeout(vc, 600);
            if (strcmp(g_expect, "none") == 0) {
                tcase_add_test(vc, versioned_refused_without_create_only);
            } else {
                TCase *conf =
                    nds_kv_conformance_tcase("s3 versioned conformance", make_versioned_url);
                tcase_set_timeout(conf, 600); /* 400 increments, each a version, on Ceph RGW */
                suite_add_tcase(s, conf);
                tcase_add_test(vc, versioned_refused_when_conditional_writes_off);
                tcase_add_test(vc, versioned_hint_skips_the_lease);
                tcase_add_test(vc, versioned_eight_processes_disjoint_and_overlapping);
            }
            suite_add_tcase(s, vc);
        }
    } else {
        fprintf(
            stderr,
            "test_kv_s3: server tests SKIPPED (no NDS_S3_TEST_ENDPOINT and no /usr/bin/python3 for "
            "the strict test double)\n");
    }
    int rc = nds_test_run(s);
    stop_double();
    return rc;
}
