/* Garbage collection of versioned stores (nds_versioned_gc): what is kept stays readable and exact,
 * what is not is deleted and says so, objects of writers that never committed go only after two runs
 * a grace period apart, and collection racing committing processes never deletes what the latest
 * version references. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support_check.h"
#include "support_kv_conformance.h"

static char *g_dir;

static void remove_dir(void) {
    if (g_dir) nds_test_rmtree(g_dir);
}

static char *new_base(void) {
    g_dir = nds_test_tmpdir();
    atexit(remove_dir);
    char *url = NULL;
    ck_assert_int_ge(asprintf(&url, "file://%s/", g_dir), 0);
    return url;
}

static nds_kvstore *open_versioned(const char *base, const char *at) {
    char spec[1024];
    snprintf(spec, sizeof spec, "%s|versioned:%s", base, at);
    nds_kvstore *kv = NULL;
    NDS_OK(nds_kvstore_open(&kv, spec, NULL));
    return kv;
}

/* A value of 2000 bytes (kept in data objects, not inline) that names key and round. */
static void value_of(char *buf, const char *key, int round) {
    memset(buf, 'a' + round % 26, 2000);
    snprintf(buf, 64, "%s@%d;", key, round);
}

static void put_round(nds_kvstore *kv, int round, int keys) {
    char key[32], value[2000];
    for (int k = 0; k < keys; k++) {
        snprintf(key, sizeof key, "k%d", k);
        value_of(value, key, round);
        NDS_OK(nds_kvstore_write(kv, key, value, sizeof value, NULL, NULL));
    }
}

/* Every key of kv holds round's value. */
static void check_round(nds_kvstore *kv, int round, int keys) {
    char key[32], want[2000];
    for (int k = 0; k < keys; k++) {
        snprintf(key, sizeof key, "k%d", k);
        value_of(want, key, round);
        nds_read_result r;
        NDS_OK(nds_kvstore_read(kv, key, NULL, &r));
        ck_assert_int_eq(r.state, NDS_READ_VALUE);
        ck_assert_uint_eq(r.value.len, sizeof want);
        ck_assert_int_eq(memcmp(r.value.data, want, sizeof want), 0);
        nds_read_result_dispose(&r);
    }
}

static int read_status(const char *base, const char *at, const char *key) {
    nds_kvstore *kv = open_versioned(base, at);
    nds_read_result r;
    int rc = nds_kvstore_read(kv, key, NULL, &r);
    if (!rc) nds_read_result_dispose(&r);
    nds_kvstore_free(kv);
    return rc;
}

/* 6 versions (one key each round: 3 keys x 2 rounds): keep the last 2 and a tag. */
START_TEST(gc_keeps_latest_tags_and_recent) {
    char *base = new_base();
    nds_kvstore *kv = open_versioned(base, "");
    put_round(kv, 0, 3); /* versions 1-3 */
    NDS_OK(nds_versioned_tag(kv, "round0", 0));
    put_round(kv, 1, 3); /* versions 4-6 */
    nds_gc_options o = NDS_GC_OPTIONS_INIT;
    o.keep_last = 2;
    o.grace_ms = 0;
    nds_gc_result r;
    NDS_OK(nds_versioned_gc(kv, &o, &r));
    ck_assert_uint_eq(r.versions_kept, 3); /* 5, 6 and the tagged 3 */
    ck_assert_uint_eq(r.versions_collected, 3);
    ck_assert_uint_gt(r.objects_deleted, 0);
    check_round(kv, 1, 3); /* the latest is whole */
    nds_kvstore *tagged = open_versioned(base, "@round0/");
    check_round(tagged, 0, 3);
    nds_kvstore_free(tagged);
    ck_assert_int_eq(read_status(base, "@5/", "k1"), 0);
    /* Version 1 and 4 are gone: reading them says so. */
    ck_assert_int_eq(read_status(base, "@4/", "k0"), NDS_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "collected"));
    /* A second run finds nothing more. */
    nds_gc_result again;
    NDS_OK(nds_versioned_gc(kv, &o, &again));
    ck_assert_uint_eq(again.objects_deleted, 0);
    /* Without a rule, gc refuses. */
    nds_gc_options none = NDS_GC_OPTIONS_INIT;
    ck_assert_int_eq(nds_versioned_gc(kv, &none, &r), NDS_EINVAL);
    nds_kvstore_free(kv);
    free(base);
}
END_TEST

static int count_objects(void *ctx, const char *key, uint64_t size) {
    (void)key, (void)size;
    (*(int *)ctx)++;
    return 0;
}

static int objects_under(const char *base, const char *prefix) {
    nds_kvstore *b = NULL;
    NDS_OK(nds_kvstore_open(&b, base, NULL));
    int n = 0;
    NDS_OK(nds_kvstore_list(b, prefix, count_objects, &n));
    nds_kvstore_free(b);
    return n;
}

/* A prepared part never committed leaves a prepared set and a data object: the first run only
 * records them, a run after the grace period deletes them; within the grace period they stay. */
START_TEST(gc_collects_unreferenced_objects_in_two_runs) {
    char *base = new_base();
    nds_kvstore *kv = open_versioned(base, "");
    put_round(kv, 0, 1);
    nds_txn *t;
    NDS_OK(nds_txn_begin(&t, NULL));
    char value[2000];
    value_of(value, "orphan", 0);
    NDS_OK(nds_txn_write_key(t, kv, "orphan", value, sizeof value));
    char *token = NULL;
    NDS_OK(nds_txn_prepare(t, &token));
    nds_txn_free(t);
    ck_assert_int_eq(objects_under(base, "prepared/"), 1);
    int data_before = objects_under(base, "data/");
    nds_gc_options o = NDS_GC_OPTIONS_INIT;
    o.keep_last = 1;
    o.grace_ms = 3600 * 1000;
    nds_gc_result r;
    NDS_OK(nds_versioned_gc(kv, &o, &r));
    ck_assert_uint_eq(r.objects_pending, 2); /* the prepared set and its data object */
    NDS_OK(nds_versioned_gc(kv, &o, &r)); /* within the grace period: nothing goes */
    ck_assert_int_eq(objects_under(base, "prepared/"), 1);
    o.grace_ms = 0;
    usleep(2000);
    NDS_OK(nds_versioned_gc(kv, &o, &r));
    ck_assert_uint_eq(r.objects_deleted, 2);
    ck_assert_int_eq(objects_under(base, "prepared/"), 0);
    ck_assert_int_eq(objects_under(base, "data/"), data_before - 1);
    check_round(kv, 0, 1);
    /* The collected part can no longer be committed. */
    ck_assert_int_eq(nds_txn_commit_prepared(kv, (const char *const *)&token, 1, NULL, NULL),
                     NDS_ENOTFOUND);
    nds_free(token);
    nds_kvstore_free(kv);
    free(base);
}
END_TEST

/* 4 processes keep committing (3 of 8 keys per version, so objects die a part at a time) while gc
 * runs again and again (grace 1 s): no writer fails, and the latest version reads back whole. */
START_TEST(gc_racing_writers_keeps_what_versions_reference) {
    char *base = new_base();
    enum { WRITERS = 4, KEYS = 8 };
    pid_t pids[WRITERS];
    for (int w = 0; w < WRITERS; w++) {
        if ((pids[w] = fork()) == 0) {
            /* The first round commits all 8 keys in one transaction (one data object of 8
             * values); later rounds rewrite keys 0-2 only, so that object stays partly referenced
             * (keys 3-7) for good while the others die whole. */
            nds_kvstore *kv = open_versioned(base, "");
            char key[32], value[2000];
            nds_txn_options to = NDS_TXN_OPTIONS_INIT;
            to.mode = NDS_TXN_ATOMIC;
            for (int round = 0;; round++) {
                nds_txn *t;
                int rc = nds_txn_begin(&t, &to);
                for (int j = 0; !rc && j < (round ? 3 : KEYS); j++) {
                    snprintf(key, sizeof key, "w%d/k%d", w, round ? j : j % KEYS);
                    value_of(value, key, round);
                    rc = nds_txn_write_key(t, kv, key, value, sizeof value);
                }
                if (!rc) rc = nds_txn_commit(t);
                nds_txn_free(t);
                if (rc) {
                    fprintf(stderr, "writer %d: %s\n", w, nds_error_last()->message);
                    _exit(3);
                }
            }
        }
    }
    nds_kvstore *kv = open_versioned(base, "");
    nds_gc_options o = NDS_GC_OPTIONS_INIT;
    o.keep_last = 1;
    o.grace_ms = 1000;
    uint64_t deleted = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        nds_gc_result r;
        NDS_OK(nds_versioned_gc(kv, &o, &r));
        deleted += r.objects_deleted;
        usleep(100000);
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while (t.tv_sec - t0.tv_sec < 4);
    for (int w = 0; w < WRITERS; w++) {
        kill(pids[w], SIGKILL);
        int status;
        waitpid(pids[w], &status, 0);
        ck_assert_msg(WIFSIGNALED(status), "writer %d stopped by itself (status %d)", w, status);
    }
    ck_assert_uint_gt(deleted, 0);
    nds_kvstore_free(kv);
    kv = open_versioned(base, ""); /* the latest version, after the writers */
    char key[32];
    for (int w = 0; w < WRITERS; w++)
        for (int k = 0; k < KEYS; k++) {
            snprintf(key, sizeof key, "w%d/k%d", w, k);
            nds_read_result r;
            NDS_OK(nds_kvstore_read(kv, key, NULL, &r)); /* present, checksums good */
            if (r.state == NDS_READ_VALUE) {
                ck_assert_uint_eq(r.value.len, 2000);
                ck_assert_int_eq(strncmp((const char *)r.value.data, key, strlen(key)), 0);
            }
            nds_read_result_dispose(&r);
        }
    fprintf(stderr, "gc race: %" PRIu64 " objects deleted while 4 processes committed\n", deleted);
    nds_kvstore_free(kv);
    free(base);
}
END_TEST

int main(void) {
    Suite *s = suite_create("versioned_gc");
    TCase *tc = tcase_create("gc");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, gc_keeps_latest_tags_and_recent);
    tcase_add_test(tc, gc_collects_unreferenced_objects_in_two_runs);
    tcase_add_test(tc, gc_racing_writers_keeps_what_versions_reference);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
