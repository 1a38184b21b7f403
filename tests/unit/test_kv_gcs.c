/* The gcs and http kvstore drivers against tests/servers/strict_gcs.py (a GCS JSON-API test double
 * on 127.0.0.1): the kvstore conformance suite on gcs, then what only these drivers promise: URLs
 * and printed specs, errors that name key, status and reason, retried writes that land once (503s,
 * resets, slow and truncated answers), an outcome that cannot be known reported as such, concurrent
 * writers under faults, and the read-only http driver (ranges, ETag revalidation, read-only
 * errors).
 *
 * The server is started here unless $STORAGE_EMULATOR_HOST names one already running (the
 * integration script does that); the fault tests then need its /_test/ control endpoints, so it
 * must be strict_gcs.py.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ndstore/sys/kv_driver.h"
#include "support_check.h"
#include "support_kv_conformance.h"
#include "internal/util.h"
#include "support_strict_gcs.h"

#define BUCKET "ndstest"

static nds_test_gcs g_server;
static const char *g_endpoint;
static char *g_static_dir;

/* A fresh prefix per call (and per forked test child). */
static const char *gcs_url(void) {
    static int n;
    static char urls[16][96];
    char *u = urls[n++ % 16];
    snprintf(u, 96, "gs://" BUCKET "/t%ld-%d/", (long)getpid(), n);
    return u;
}

/* The versioned adapter over a fresh gcs prefix (create-only: ifGenerationMatch=0). */
static const char *versioned_gcs_url(void) {
    static int n;
    static char urls[16][128];
    char *u = urls[n++ % 16];
    snprintf(u, 128, "gs://" BUCKET "/v%ld-%d/|versioned:", (long)getpid(), n);
    return u;
}

static nds_kvstore *open_spec(const char *spec) {
    nds_kvstore *kv = NULL;
    NDS_OK(nds_kvstore_open(&kv, spec, NULL));
    return kv;
}

/* A store whose requests time out after timeout and retry at most retries times. */
static nds_kvstore *open_tuned(const char *timeout, int retries) {
    char spec[512];
    const char *url = gcs_url();
    snprintf(spec, sizeof spec,
             "{\"driver\":\"gcs\",\"bucket\":\"" BUCKET "\",\"path\":\"%s\",\"endpoint\":\"%s\","
             "\"gcs_request_timeout\":\"%s\",\"gcs_request_retries\":{\"max_retries\":%d,"
             "\"initial_delay\":\"10ms\",\"max_delay\":\"50ms\"}}",
             strchr(url + 5, '/') + 1, g_endpoint, timeout, retries);
    return open_spec(spec);
}

static void set_faults(const char *rules) {
    ck_assert_int_eq(nds_test_gcs_faults(g_endpoint, rules), 0);
}

/* A store with the given extra spec members (",\"gcs_stall_timeout\":1"). */
static nds_kvstore *open_with(const char *extra) {
    char spec[512];
    const char *url = gcs_url();
    snprintf(spec, sizeof spec,
             "{\"driver\":\"gcs\",\"bucket\":\"" BUCKET "\",\"path\":\"%s\",\"endpoint\":\"%s\"%s}",
             strchr(url + 5, '/') + 1, g_endpoint, extra);
    return open_spec(spec);
}

/* ---- URLs, specs, errors ---- */

START_TEST(url_spec_and_capabilities) {
    nds_kvstore *kv = open_spec("gs://" BUCKET "/a/b/");
    ck_assert_str_eq(nds_kvstore_url(kv), "gs://" BUCKET "/a/b/");
    ck_assert_str_eq(nds_kvstore_path(kv), "a/b/");
    uint32_t caps = nds_kvstore_capabilities(kv);
    ck_assert(caps & NDS_KV_CAP_ATOMIC_CONDITIONAL_WRITE);
    ck_assert(caps & NDS_KV_CAP_BYTE_RANGE);
    ck_assert(!(caps & NDS_KV_CAP_READ_ONLY));
    char *spec = NULL;
    NDS_OK(nds_kvstore_spec(kv, &spec));
    ck_assert_ptr_nonnull(strstr(spec, "\"driver\":\"gcs\""));
    ck_assert_ptr_nonnull(strstr(spec, "\"bucket\":\"" BUCKET "\""));
    ck_assert_ptr_nonnull(
        strstr(spec, "\"path\":\"a\\/b\\/\"") ? spec : strstr(spec, "\"path\":\"a/b/\""));
    ck_assert_ptr_nonnull(strstr(spec, g_endpoint + 7)); /* the emulator endpoint, so it reopens */
    nds_kvstore *again = open_spec(spec);
    ck_assert_str_eq(nds_kvstore_url(again), "gs://" BUCKET "/a/b/");
    nds_free(spec);
    nds_kvstore_free(again);
    nds_kvstore_free(kv);
}
END_TEST

static void expect_open_error(const char *spec, int code, const char *needle, const char *secret) {
    nds_kvstore *kv = NULL;
    int rc = nds_kvstore_open(&kv, spec, NULL);
    ck_assert_msg(rc == code, "%s: %d (%s)", spec, rc, nds_error_last()->message);
    ck_assert_msg(strstr(nds_error_last()->message, needle), "%s: \"%s\" lacks \"%s\"", spec,
                  nds_error_last()->message, needle);
    if (secret) ck_assert_ptr_null(strstr(nds_error_last()->message, secret));
    ck_assert_ptr_null(kv);
}

START_TEST(bad_specs_and_urls) {
    expect_open_error("gs://Bad_Bucket/x/", NDS_EINVAL, "bucket name", NULL);
    expect_open_error("gs://ab/x/", NDS_EINVAL, "bucket name", NULL);
    expect_open_error("{\"driver\":\"gcs\",\"bucket\":\"bkt\",\"bucekt\":1}", NDS_EINVAL, "bucekt",
                      NULL);
    expect_open_error("{\"driver\":\"gcs\"}", NDS_EFORMAT, "bucket", NULL);
    expect_open_error(
        "{\"driver\":\"gcs\",\"bucket\":\"bkt\",\"endpoint\":\"http://u:hunter2@127.0.0.1:1\"}",
        NDS_EINVAL, "endpoint", "hunter2");
    expect_open_error("{\"driver\":\"gcs\",\"bucket\":\"bkt\",\"endpoint\":\"ftp://x\"}",
                      NDS_EINVAL, "endpoint", NULL);
    expect_open_error("{\"driver\":\"gcs\",\"bucket\":\"bkt\",\"credentials\":\"mine\"}",
                      NDS_EINVAL, "credentials", NULL);
    expect_open_error("{\"driver\":\"gcs\",\"bucket\":\"bkt\",\"credentials\":{\"key_file\":\"/"
                      "nonexistent/k.json\"}}",
                      NDS_ENOTFOUND, "/nonexistent/k.json", NULL);
    expect_open_error("{\"driver\":\"gcs\",\"bucket\":\"bkt\",\"gcs_request_timeout\":\"soon\"}",
                      NDS_EINVAL, "gcs_request_timeout", NULL);
    expect_open_error("{\"driver\":\"gcs\",\"bucket\":\"bkt\",\"gcs_request_concurrency\":0}",
                      NDS_EFORMAT, "gcs_request_concurrency", NULL);
    expect_open_error(
        "{\"driver\":\"gcs\",\"bucket\":\"bkt\",\"gcs_request_retries\":{\"tries\":3}}", NDS_EINVAL,
        "tries", NULL);
}
END_TEST

START_TEST(errors_name_key_status_and_reason) {
    nds_kvstore *kv = open_spec("gs://no-such-bucket/p/");
    int rc = nds_kvstore_write(kv, "k/1", "x", 1, NULL, NULL);
    ck_assert_int_eq(rc, NDS_ENOTFOUND);
    const nds_error *e = nds_error_last();
    ck_assert_msg(strstr(e->message, "gs://no-such-bucket/p/k/1") &&
                      strstr(e->message, "HTTP 404") && strstr(e->message, "notFound") &&
                      strstr(e->message, "bucket does not exist"),
                  "%s", e->message);
    ck_assert_int_eq(e->cause_kind, NDS_CAUSE_HTTP);
    ck_assert_int_eq(e->cause, 404);
    ck_assert_int_eq(nds_kvstore_list(kv, "", NULL, NULL), NDS_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "listing of gs://no-such-bucket/p/"));
    nds_kvstore_free(kv);
}
END_TEST

/* Conditional writes travel as multipart bodies: values that look like multipart must survive. */
START_TEST(multipart_values_roundtrip) {
    nds_kvstore *kv = open_spec(gcs_url());
    const char tricky[] =
        "\r\n--nds_0123\r\nContent-Type: application/json\r\n\r\n{\"name\":\"evil\"}\r\n--\r\n";
    nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
    wo.if_equal.kind = NDS_GEN_ABSENT;
    nds_generation g;
    NDS_OK(nds_kvstore_write(kv, "weird key/ü +&?#%", tricky, sizeof tricky, &wo, &g));
    nds_read_result r;
    NDS_OK(nds_kvstore_read(kv, "weird key/ü +&?#%", NULL, &r));
    ck_assert_uint_eq(r.value.len, sizeof tricky);
    ck_assert(memcmp(r.value.data, tricky, sizeof tricky) == 0);
    ck_assert(nds_generation_equal(&r.generation, &g));
    nds_read_result_dispose(&r);
    char *list = nds_kv_test_list(kv, "weird"), want[64];
    snprintf(want, sizeof want, "weird key/ü +&?#%%=%zu", sizeof tricky);
    ck_assert_str_eq(list, want);
    free(list);
    nds_kvstore_free(kv);
}
END_TEST

/* ---- faults: writes land once or fail cleanly ---- */

static void assert_value(nds_kvstore *kv, const char *key, const char *want, nds_generation *gen) {
    nds_generation g;
    char *v = nds_kv_test_get(kv, key, &g);
    if (!want)
        ck_assert_ptr_null(v);
    else
        ck_assert_str_eq(v ? v : "(missing)", want);
    if (gen) ck_assert(nds_generation_equal(&g, gen));
    free(v);
}

START_TEST(retried_writes_land_once) {
    nds_kvstore *kv = open_tuned("2s", 5);
    struct {
        const char *rules;
        bool conditional;
    } cases[] = {
        {"[{\"method\":\"POST\",\"kind\":\"503\",\"count\":2}]", false},
        {"[{\"method\":\"POST\",\"kind\":\"503\",\"count\":2}]", true},
        {"[{\"method\":\"POST\",\"kind\":\"429\",\"count\":1}]", true},
        {"[{\"method\":\"POST\",\"kind\":\"503_after\",\"count\":1}]", true},
        {"[{\"method\":\"POST\",\"kind\":\"reset\",\"count\":1}]", true},
        {"[{\"method\":\"POST\",\"kind\":\"reset_after\",\"count\":2}]", true},
        {"[{\"method\":\"POST\",\"kind\":\"truncate\",\"count\":1}]", true},
        {"[{\"method\":\"POST\",\"kind\":\"503_after\",\"count\":1}]", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char key[16], value[32];
        snprintf(key, sizeof key, "k%zu", i);
        snprintf(value, sizeof value, "value %zu", i);
        nds_generation before = nds_kv_test_put(kv, key, "old");
        long uploads = nds_test_gcs_stat(g_endpoint, "uploads");
        set_faults(cases[i].rules);
        nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
        if (cases[i].conditional) wo.if_equal = before;
        nds_generation g;
        NDS_OK(nds_kvstore_write(kv, key, value, strlen(value), &wo, &g));
        assert_value(kv, key, value, &g); /* the generation returned is the one stored */
        long landed = nds_test_gcs_stat(g_endpoint, "uploads") - uploads;
        /* Conditional: exactly once (a retry after a landed try meets 412 and recognises its write
         * id). Unconditional: at most once per try, always the same bytes. */
        if (cases[i].conditional)
            ck_assert_msg(landed == 1, "case %zu landed %ld times", i, landed);
        else
            ck_assert_int_ge(landed, 1);
        ck_assert_int_eq(nds_test_gcs_stat(g_endpoint, "faults_fired") > 0, 1);
    }
    set_faults("[]");
    nds_kvstore_free(kv);
}
END_TEST

/* A slow answer: the client gives up, retries, and the slow try lands later (or is refused by its
 * condition). */
START_TEST(slow_answers_time_out_and_retry) {
    nds_kvstore *kv = open_tuned("700ms", 4);
    set_faults("[{\"method\":\"POST\",\"kind\":\"slow\",\"delay\":1.5,\"count\":1}]");
    nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
    wo.if_equal.kind = NDS_GEN_ABSENT;
    nds_generation g;
    NDS_OK(nds_kvstore_write(kv, "slow", "once", 4, &wo, &g));
    sleep(2); /* let the slow try finish: its create-only condition must refuse it */
    assert_value(kv, "slow", "once", &g);
    set_faults("[{\"method\":\"GET\",\"kind\":\"slow\",\"delay\":1.5,\"count\":1}]");
    assert_value(kv, "slow", "once", &g);
    nds_kvstore_free(kv);
}
END_TEST

START_TEST(truncated_reads_retry) {
    nds_kvstore *kv = open_tuned("5s", 3);
    char big[4000];
    for (size_t i = 0; i < sizeof big; i++) big[i] = (char)('a' + i % 26);
    NDS_OK(nds_kvstore_write(kv, "big", big, sizeof big, NULL, NULL));
    set_faults("[{\"method\":\"GET\",\"kind\":\"truncate\",\"count\":2}]");
    nds_read_result r;
    NDS_OK(nds_kvstore_read(kv, "big", NULL, &r));
    ck_assert_uint_eq(r.value.len, sizeof big);
    ck_assert(memcmp(r.value.data, big, sizeof big) == 0);
    nds_read_result_dispose(&r);
    nds_kvstore_free(kv);
}
END_TEST

START_TEST(persistent_failure_fails_cleanly) {
    nds_kvstore *kv = open_tuned("2s", 2);
    set_faults("[{\"method\":\"POST\",\"kind\":\"503\",\"count\":3}]");
    int rc = nds_kvstore_write(kv, "never", "x", 1, NULL, NULL);
    ck_assert_int_eq(rc, NDS_EIO);
    const char *m = nds_error_last()->message;
    ck_assert_msg(strstr(m, "/never") && strstr(m, "HTTP 503") && strstr(m, "after 3 tries") &&
                      strstr(m, "backendError"),
                  "%s", m);
    assert_value(kv, "never", NULL, NULL); /* nothing visible */
    /* libcurl itself retries a request once when a reused connection dies before answering: plenty
     * of resets. */
    set_faults("[{\"method\":\"POST\",\"kind\":\"reset\",\"count\":20}]");
    rc = nds_kvstore_write(kv, "never", "x", 1, NULL, NULL);
    ck_assert_int_eq(rc, NDS_ENETWORK);
    assert_value(kv, "never", NULL, NULL);
    set_faults("[]");
    nds_kvstore_free(kv);
}
END_TEST

/* Our try landed, its answer was lost, and another writer replaced it before the retry: the outcome
 * of the lost try cannot be known, and the write must say so instead of claiming success or a plain
 * conflict. */
START_TEST(lost_answer_then_other_writer_is_unknown) {
    nds_kvstore *kv = open_tuned("2s", 3);
    nds_generation g0 = nds_kv_test_put(kv, "c", "0");
    set_faults("[{\"method\":\"POST\",\"kind\":\"503_after_clobber\",\"count\":1}]");
    nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
    wo.if_equal = g0;
    int rc = nds_kvstore_write(kv, "c", "1", 1, &wo, NULL);
    ck_assert_int_eq(rc, NDS_EIO);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "outcome unknown"));
    assert_value(kv, "c", "clobbered", NULL);
    nds_kvstore_free(kv);
}
END_TEST

/* Deletes under faults: a retried delete that already landed is a success. */
START_TEST(retried_deletes) {
    nds_kvstore *kv = open_tuned("2s", 3);
    nds_generation g = nds_kv_test_put(kv, "d", "x");
    set_faults("[{\"method\":\"DELETE\",\"kind\":\"503_after\",\"count\":1}]");
    nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
    wo.if_equal = g;
    NDS_OK(nds_kvstore_delete(kv, "d", &wo));
    assert_value(kv, "d", NULL, NULL);
    nds_kvstore_free(kv);
}
END_TEST

typedef struct writer {
    const char *url;
    int ok, unknown;
} writer;

/* Increments "counter" 25 times; an "outcome unknown" failure counts apart (it may or may not have
 * landed). */
static void *increment_under_faults(void *arg) {
    writer *w = arg;
    nds_kvstore *kv = open_spec(w->url);
    for (int i = 0; i < 25;) {
        nds_generation g;
        char *cur = nds_kv_test_get(kv, "counter", &g), next[32];
        snprintf(next, sizeof next, "%ld", cur ? strtol(cur, NULL, 10) + 1 : 1);
        free(cur);
        nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
        wo.if_equal = g;
        int rc = nds_kvstore_write(kv, "counter", next, strlen(next), &wo, NULL);
        if (rc == NDS_ECONFLICT) continue;
        ck_assert_msg(rc == 0 || rc == NDS_EIO, "%d: %s", rc, nds_error_last()->message);
        if (rc == 0)
            w->ok++;
        else
            w->unknown++;
        i++;
    }
    nds_kvstore_free(kv);
    return NULL;
}

START_TEST(concurrent_writers_under_faults) {
    char spec[512];
    const char *url = gcs_url();
    snprintf(spec, sizeof spec,
             "{\"driver\":\"gcs\",\"bucket\":\"" BUCKET "\",\"path\":\"%s\",\"endpoint\":\"%s\","
             "\"gcs_request_retries\":{\"max_retries\":10,\"initial_delay\":\"5ms\",\"max_delay\":"
             "\"40ms\"}}",
             strchr(url + 5, '/') + 1, g_endpoint);
    set_faults("[{\"method\":\"POST\",\"kind\":\"503_after\",\"count\":15},"
               "{\"method\":\"POST\",\"kind\":\"503\",\"count\":15},"
               "{\"method\":\"GET\",\"kind\":\"reset\",\"count\":15}]");
    enum { W = 4 };
    writer ws[W];
    pthread_t t[W];
    for (int i = 0; i < W; i++) {
        ws[i] = (writer){spec, 0, 0};
        ck_assert_int_eq(pthread_create(&t[i], NULL, increment_under_faults, &ws[i]), 0);
    }
    int ok = 0, unknown = 0;
    for (int i = 0; i < W; i++) {
        pthread_join(t[i], NULL);
        ok += ws[i].ok;
        unknown += ws[i].unknown;
    }
    set_faults("[]");
    nds_kvstore *kv = open_spec(spec);
    char *v = nds_kv_test_get(kv, "counter", NULL);
    long final = v ? strtol(v, NULL, 10) : 0;
    free(v);
    /* No update lost, none applied twice: every success is in, and at most the unknown ones
     * besides. */
    ck_assert_msg(final >= ok && final <= ok + unknown, "counter %ld, %d ok, %d unknown", final, ok,
                  unknown);
    nds_kvstore_free(kv);
}
END_TEST

/* ---- http (read-only) ---- */

static char *http_url(const char *dir) {
    char *u = NULL;
    ck_assert_int_ge(asprintf(&u, "%s/files/%s/", g_endpoint, dir), 0);
    return u;
}

static void write_file(const char *dir, const char *name, const char *text) {
    char *path = NULL;
    ck_assert_int_ge(asprintf(&path, "%s/%s", dir, name), 0);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    free(path);
}

START_TEST(http_reads_ranges_and_revalidates) {
    char *dir = NULL;
    ck_assert_int_ge(asprintf(&dir, "%s/h%d", g_static_dir, (int)getpid()), 0);
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    write_file(dir, "v", "0123456789");
    char name[32];
    snprintf(name, sizeof name, "h%d", (int)getpid());
    char *url = http_url(name);
    nds_kvstore *kv = open_spec(url);
    ck_assert_str_eq(nds_kvstore_url(kv), url);
    ck_assert(nds_kvstore_capabilities(kv) & NDS_KV_CAP_READ_ONLY);
    nds_generation g;
    char *v = nds_kv_test_get(kv, "v", &g);
    ck_assert_str_eq(v, "0123456789");
    free(v);
    ck_assert_int_eq(g.value[0], '"'); /* the ETag */
    nds_read_options o = NDS_READ_OPTIONS_INIT;
    o.byte_start = -4;
    o.byte_length = 2;
    nds_read_result r;
    NDS_OK(nds_kvstore_read(kv, "v", &o, &r));
    ck_assert_uint_eq(r.value.len, 2);
    ck_assert(memcmp(r.value.data, "67", 2) == 0);
    ck_assert_uint_eq(r.total_size, 10);
    nds_read_result_dispose(&r);
    o = (nds_read_options)NDS_READ_OPTIONS_INIT;
    o.byte_start = 10;
    NDS_OK(nds_kvstore_read(kv, "v", &o, &r)); /* 416, then HEAD: at the end is an empty value */
    ck_assert_int_eq(r.state, NDS_READ_VALUE);
    ck_assert_uint_eq(r.value.len, 0);
    nds_read_result_dispose(&r);
    o.byte_start = 11;
    ck_assert_int_eq(nds_kvstore_read(kv, "v", &o, &r), NDS_ERANGE);
    o = (nds_read_options)NDS_READ_OPTIONS_INIT;
    o.if_not_equal = g;
    NDS_OK(nds_kvstore_read(kv, "v", &o, &r));
    ck_assert_int_eq(r.state, NDS_READ_UNCHANGED);
    nds_read_result_dispose(&r);
    write_file(dir, "v", "changed");
    NDS_OK(nds_kvstore_read(kv, "v", &o, &r));
    ck_assert_int_eq(r.state, NDS_READ_VALUE);
    ck_assert_uint_eq(r.value.len, 7);
    ck_assert(!nds_generation_equal(&r.generation, &g));
    nds_read_result_dispose(&r);
    NDS_OK(nds_kvstore_read(kv, "missing", NULL, &r));
    ck_assert_int_eq(r.state, NDS_READ_MISSING);
    nds_read_result_dispose(&r);
    nds_kvstore_free(kv);
    nds_test_rmtree(dir);
    free(dir);
    free(url);
}
END_TEST

START_TEST(http_is_read_only) {
    char *url = http_url("ro");
    nds_kvstore *kv = open_spec(url);
    ck_assert_int_eq(nds_kvstore_write(kv, "k", "x", 1, NULL, NULL), NDS_EREADONLY);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "read-only"));
    ck_assert_int_eq(nds_kvstore_delete(kv, "k", NULL), NDS_EREADONLY);
    ck_assert_int_eq(nds_kvstore_delete_range(kv, "", ""), NDS_EREADONLY);
    ck_assert_int_eq(nds_kvstore_list(kv, "", NULL, NULL), NDS_EUNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "read-only"));
    nds_kvstore_free(kv);
    free(url);
}
END_TEST

START_TEST(http_specs_hide_headers) {
    char spec[512];
    snprintf(spec, sizeof spec,
             "{\"driver\":\"http\",\"base_url\":\"%s/files\",\"path\":\"/x/\","
             "\"headers\":[\"Authorization: Bearer s3cr3t-token\"]}",
             g_endpoint);
    nds_kvstore *kv = open_spec(spec);
    char *printed = NULL;
    NDS_OK(nds_kvstore_spec(kv, &printed));
    ck_assert_ptr_null(strstr(printed, "s3cr3t"));
    ck_assert_ptr_nonnull(strstr(printed, "base_url"));
    nds_free(printed);
    nds_kvstore_free(kv);
    /* https:// URLs open the same driver; the spec names "http". */
    kv = open_spec("https://example.invalid/a%20b/");
    ck_assert_str_eq(nds_kvstore_path(kv), "/a b/");
    NDS_OK(nds_kvstore_spec(kv, &printed));
    ck_assert_ptr_nonnull(strstr(printed, "\"driver\":\"http\""));
    ck_assert_ptr_nonnull(strstr(printed, "https:"));
    nds_free(printed);
    nds_kvstore_free(kv);
    expect_open_error(
        "{\"driver\":\"http\",\"base_url\":\"http://h/\",\"headers\":[\"bad\\r\\nX: y\"]}",
        NDS_EINVAL, "headers", NULL);
    expect_open_error("http://u:pw@host/x/", NDS_EINVAL, "credentials", NULL);
}
END_TEST

/* ---- hostile servers ---- */

static int count_key(void *ctx, const char *key, uint64_t size) {
    (void)key, (void)size;
    ++*(int *)ctx;
    return 0;
}

/* An endless body and a huge Content-Length fail with NDS_ELIMIT, quickly, naming the limit. */
START_TEST(hostile_bodies_bounded) {
    nds_kvstore *kv = open_with(",\"gcs_max_response_bytes\":1048576");
    NDS_OK(nds_kvstore_write(kv, "hb", "small", 5, NULL, NULL));
    uint64_t t0 = nds_now_ns();
    nds_read_result r;
    set_faults("[{\"method\":\"GET\",\"path\":\"hb$\",\"kind\":\"endless\"}]");
    ck_assert_int_eq(nds_kvstore_read(kv, "hb", NULL, &r), NDS_ELIMIT);
    const char *m = nds_error_last()->message;
    ck_assert_msg(strstr(m, "hb") && strstr(m, "larger than 1048576 bytes") &&
                      strstr(m, "gcs_max_response_bytes"),
                  "%s", m);
    set_faults("[{\"method\":\"GET\",\"path\":\"hb$\",\"kind\":\"huge_length\"}]");
    ck_assert_int_eq(nds_kvstore_read(kv, "hb", NULL, &r), NDS_ELIMIT);
    ck_assert_msg(strstr(nds_error_last()->message, "Content-Length: 1000000000000"), "%s",
                  nds_error_last()->message);
    ck_assert(nds_now_ns() - t0 < 10000000000ull);
    set_faults("[]");
    NDS_OK(nds_kvstore_read(kv, "hb", NULL, &r));
    ck_assert_uint_eq(r.value.len, 5);
    nds_read_result_dispose(&r);
    nds_kvstore_free(kv);
}
END_TEST

/* A listing answered with the page token it asked with: an error, not an endless loop. */
START_TEST(hostile_listing_repeats_token) {
    nds_kvstore *kv = open_with("");
    NDS_OK(nds_kvstore_write(kv, "k", "v", 1, NULL, NULL));
    set_faults("[{\"method\":\"GET\",\"path\":\"/o$\",\"kind\":\"repeat_token\","
               "\"count\":1000000}]");
    int n = 0;
    int rc = nds_kvstore_list(kv, "", count_key, &n);
    const char *m = nds_error_last()->message;
    ck_assert_msg(rc == NDS_EIO && strstr(m, "continuation token") && strstr(m, "gs://"), "%d %s",
                  rc, m);
    set_faults("[]");
    nds_kvstore_free(kv);
}
END_TEST

/* A server that never answers: cut by the stall time and the deadline, with a message. */
START_TEST(hostile_stall_meets_deadline) {
    nds_kvstore *kv = open_with(",\"gcs_stall_timeout\":\"1s\",\"gcs_request_deadline\":\"3s\"");
    NDS_OK(nds_kvstore_write(kv, "st", "v", 1, NULL, NULL));
    set_faults("[{\"method\":\"GET\",\"path\":\"st$\",\"kind\":\"stall\",\"delay\":20,"
               "\"count\":100}]");
    uint64_t t0 = nds_now_ns();
    nds_read_result r;
    ck_assert_int_eq(nds_kvstore_read(kv, "st", NULL, &r), NDS_ETIMEOUT);
    double took = (double)(nds_now_ns() - t0) / 1e9;
    const char *m = nds_error_last()->message;
    ck_assert_msg(took > 2.5 && took < 6, "took %.1f s: %s", took, m);
    ck_assert_msg(strstr(m, "deadline of 3.0 s") && strstr(m, "gcs_request_deadline") &&
                      strstr(m, "try 1: Operation too slow"),
                  "%s", m);
    set_faults("[]");
    nds_kvstore_free(kv);
}
END_TEST


/* 4 processes x 10 increments of one counter through the versioned adapter on gcs. */
START_TEST(versioned_processes_lose_no_increment) {
    nds_kv_test_processes_increment(versioned_gcs_url(), 4, 10);
}
END_TEST

static Suite *gcs_suite(void) {
    Suite *s = suite_create("kv_gcs");
    suite_add_tcase(s, nds_kv_conformance_tcase("gcs", gcs_url));
    suite_add_tcase(s, nds_kv_conformance_tcase("versioned-gcs", versioned_gcs_url));
    TCase *tc = tcase_create("gcs");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, url_spec_and_capabilities);
    tcase_add_test(tc, bad_specs_and_urls);
    tcase_add_test(tc, errors_name_key_status_and_reason);
    tcase_add_test(tc, multipart_values_roundtrip);
    tcase_add_test(tc, versioned_processes_lose_no_increment);
    suite_add_tcase(s, tc);
    /* Fault rules are server-wide: these run one at a time (Check runs tests in order). */
    TCase *faults = tcase_create("faults");
    tcase_set_timeout(faults, 120);
    tcase_add_test(faults, retried_writes_land_once);
    tcase_add_test(faults, slow_answers_time_out_and_retry);
    tcase_add_test(faults, truncated_reads_retry);
    tcase_add_test(faults, persistent_failure_fails_cleanly);
    tcase_add_test(faults, lost_answer_then_other_writer_is_unknown);
    tcase_add_test(faults, retried_deletes);
    tcase_add_test(faults, concurrent_writers_under_faults);
    tcase_add_test(faults, hostile_bodies_bounded);
    tcase_add_test(faults, hostile_listing_repeats_token);
    tcase_add_test(faults, hostile_stall_meets_deadline);
    suite_add_tcase(s, faults);
    TCase *http = tcase_create("http");
    tcase_add_test(http, http_reads_ranges_and_revalidates);
    tcase_add_test(http, http_is_read_only);
    tcase_add_test(http, http_specs_hide_headers);
    suite_add_tcase(s, http);
    return s;
}

int main(void) {
    const char *env = getenv("STORAGE_EMULATOR_HOST"), *dir = getenv("NDS_TEST_GCS_STATIC");
    if (env &&
        env[0]) { /* a strict_gcs.py the caller started, serving --static $NDS_TEST_GCS_STATIC */
        if (!dir || !dir[0]) {
            fprintf(stderr, "test_kv_gcs: STORAGE_EMULATOR_HOST needs NDS_TEST_GCS_STATIC (its "
                            "--static dir)\n");
            return 1;
        }
        g_endpoint = env;
        g_static_dir = strdup(dir);
    } else {
        g_static_dir = nds_test_tmpdir();
        const char *args[] = {"--bucket", BUCKET,       "--page-size", "50",
                              "--static", g_static_dir, NULL};
        if (nds_test_gcs_start(&g_server, args) != 0) return 1;
        setenv("STORAGE_EMULATOR_HOST", g_server.endpoint, 1);
        g_endpoint = g_server.endpoint;
    }
    int rc = nds_test_run(gcs_suite());
    if (g_server.pid) nds_test_rmtree(g_static_dir);
    nds_test_gcs_stop(&g_server);
    free(g_static_dir);
    return rc;
}
