/* Garbage collection of versioned stores (nds_versioned_gc): what is kept stays readable and exact,
 * what is not is deleted and says so, objects of writers that never committed go only after two
 * runs a grace period apart, collection racing committing processes (and other collections) never
 * deletes what a version references, an incremental run deletes exactly what a full scan would,
 * runs killed at random points leave a store the next run finishes, a corrupt gc state falls back
 * to a full scan, and a collected version cannot be tagged. */
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
#include "internal/kvstore_internal.h"
#include "internal/util.h"
#include "../../drivers/versioned_internal.h"

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
    char *spec = NULL;
    ck_assert_int_ge(asprintf(&spec, "%s|versioned:%s", base, at), 0);
    nds_kvstore *kv = NULL;
    NDS_OK(nds_kvstore_open(&kv, spec, NULL));
    free(spec);
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
    NDS_OK(nds_versioned_gc(kv, &o, &r));    /* within the grace period: nothing goes */
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

/* Every key wN/kK of kv is present, 2000 bytes, and names itself. */
static void check_latest_whole(nds_kvstore *kv, int writers, int keys) {
    char key[32];
    for (int w = 0; w < writers; w++)
        for (int k = 0; k < keys; k++) {
            snprintf(key, sizeof key, "w%d/k%d", w, k);
            nds_read_result r;
            NDS_OK(nds_kvstore_read(kv, key, NULL, &r));
            ck_assert_int_eq(r.state, NDS_READ_VALUE);
            ck_assert_uint_eq(r.value.len, 2000);
            ck_assert_int_eq(strncmp((const char *)r.value.data, key, strlen(key)), 0);
            nds_read_result_dispose(&r);
        }
}

/* Reads every key of the latest version again and again (a new handle each time, read 100 ms after
 * it is opened); exits 3 on a read error or a wrong value (a version's object deleted under it). */
static void reader_loop(const char *base, int writers, int keys) {
    char key[32];
    for (;;) {
        nds_kvstore *kv = NULL;
        char spec[1100];
        snprintf(spec, sizeof spec, "%s|versioned:", base);
        if (nds_kvstore_open(&kv, spec, NULL)) _exit(2);
        usleep(100000); /* holds its version while newer ones supersede it (within the grace) */
        for (int w = 0; w < writers; w++)
            for (int k = 0; k < keys; k++) {
                snprintf(key, sizeof key, "w%d/k%d", w, k);
                nds_read_result r;
                if (nds_kvstore_read(kv, key, NULL, &r)) {
                    fprintf(stderr, "reader: %s\n", nds_error_last()->message);
                    _exit(3);
                }
                bool bad = r.state == NDS_READ_VALUE &&
                           (r.value.len != 2000 ||
                            strncmp((const char *)r.value.data, key, strlen(key)) != 0);
                nds_read_result_dispose(&r);
                if (bad) _exit(4);
            }
        nds_kvstore_free(kv);
    }
}

/* Runs gc (keep the latest, grace 1.5 s) again and again; a run that loses the race for its
 * state to the other collector is fine (NDS_ECONFLICT). Exits 3 on any other failure. */
static void collector_loop(const char *base) {
    nds_kvstore *kv = NULL;
    char spec[1100];
    snprintf(spec, sizeof spec, "%s|versioned:", base);
    if (nds_kvstore_open(&kv, spec, NULL)) _exit(2);
    nds_gc_options o = NDS_GC_OPTIONS_INIT;
    o.keep_last = 1;
    o.grace_ms = 1500;
    for (;;) {
        nds_gc_result r;
        int rc = nds_versioned_gc(kv, &o, &r);
        if (rc && rc != NDS_ECONFLICT) {
            fprintf(stderr, "collector: %s\n", nds_error_last()->message);
            _exit(3);
        }
        usleep(20000);
    }
}

/* 4 processes keep committing (3 of 8 keys per version, so objects die a part at a time) while two
 * collector processes and this one run gc again and again (keep the latest, grace 1.5 s) and two
 * reader processes read the latest version whole again and again: no writer, reader or collector
 * fails (a collector may lose a run to the other: NDS_ECONFLICT), and the latest version reads
 * back whole. Without the grace period (dead objects deleted at once), readers and writers find
 * objects of the version they are reading deleted under them. */
START_TEST(gc_racing_writers_keeps_what_versions_reference) {
    char *base = new_base();
    enum { WRITERS = 4, KEYS = 8, READERS = 2, COLLECTORS = 2 };
    pid_t pids[WRITERS + READERS + COLLECTORS];
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
                    snprintf(key, sizeof key, "w%d/k%d", w, j);
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
    usleep(300000); /* every writer's first round is in */
    for (int i = 0; i < READERS; i++)
        if ((pids[WRITERS + i] = fork()) == 0) reader_loop(base, WRITERS, KEYS);
    for (int i = 0; i < COLLECTORS; i++)
        if ((pids[WRITERS + READERS + i] = fork()) == 0) collector_loop(base);
    nds_kvstore *kv = open_versioned(base, "");
    nds_gc_options o = NDS_GC_OPTIONS_INIT;
    o.keep_last = 1;
    o.grace_ms = 1500;
    uint64_t deleted = 0, runs = 0, conflicts = 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        nds_gc_result r;
        int rc = nds_versioned_gc(kv, &o, &r);
        if (rc == NDS_ECONFLICT)
            conflicts++;
        else
            NDS_OK(rc);
        deleted += r.objects_deleted;
        runs++;
        usleep(50000);
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while (t.tv_sec - t0.tv_sec < 6);
    for (int p = 0; p < WRITERS + READERS + COLLECTORS; p++) {
        int status = 0;
        pid_t got = waitpid(pids[p], &status, WNOHANG);
        if (got == 0) {
            kill(pids[p], SIGKILL);
            waitpid(pids[p], &status, 0);
        }
        ck_assert_msg(got == 0 && WIFSIGNALED(status),
                      "process %d (%s) stopped by itself (status %d)", p,
                      p < WRITERS             ? "writer"
                      : p < WRITERS + READERS ? "reader"
                                              : "collector",
                      status);
    }
    ck_assert_uint_gt(deleted, 0);
    nds_kvstore_free(kv);
    kv = open_versioned(base, ""); /* the latest version, after the writers */
    check_latest_whole(kv, WRITERS, KEYS);
    /* A complete run after the race finds the store consistent: a full scan deletes nothing more
     * than the orphans it waits for. */
    o.grace_ms = 0;
    nds_gc_result r, full;
    NDS_OK(nds_versioned_gc(kv, &o, &r));
    nds_gc_options f = o;
    f.full_scan = 1;
    f.dry_run = 1;
    NDS_OK(nds_versioned_gc(kv, &f, &full));
    ck_assert_uint_eq(full.objects_deleted, r.objects_pending);
    check_latest_whole(kv, WRITERS, KEYS);
    fprintf(stderr,
            "gc race: %" PRIu64 " objects deleted in %" PRIu64 " runs here (%" PRIu64
            " lost to another collector) while 4 processes committed and 2 read\n",
            deleted, runs, conflicts);
    nds_kvstore_free(kv);
    free(base);
}
END_TEST

/* ---- random histories with a model of every version ------------------------------------------ */

enum { HKEYS = 12, HMAX = 700 };

/* A store built by one writer, and what each of its versions holds: per key, the version whose
 * commit wrote the value (0: absent). Values are a function of (key, writing version). */
typedef struct history {
    char *dir;       /* the store's directory */
    char url[1100];  /* file://dir/ */
    nds_kvstore *kv; /* latest, writable */
    unsigned rng;
    uint64_t latest;
    uint16_t writer[HMAX + 1][HKEYS];
    bool tagged[HMAX + 1];
    bool dropped[HMAX + 1]; /* a gc run did not keep version v: it may be collected */
    int ntags;
    double gap_after[HMAX + 1]; /* wall ms when version v's commit returned */
    double start_ms[HMAX + 1];  /* wall ms when version v's commit began */
} history;

static unsigned next_rand(history *h) {
    h->rng = h->rng * 1103515245u + 12345u;
    return (h->rng >> 8) & 0xffffff;
}

static double wall_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static double mono_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* The value key k holds when version w wrote it: inline (<= 512 bytes) or in a data object. */
static size_t hvalue(int k, unsigned w, uint8_t *out) {
    size_t len = (k * 7 + w) % 3 == 0 ? 40 + (w * 13 + (unsigned)k) % 300
                                      : 600 + (w * 17 + (unsigned)k * 31) % 3000;
    for (size_t i = 0; i < len; i++) out[i] = (uint8_t)(w * 31 + (unsigned)k * 7 + i * 3);
    return len;
}

static void hkey(int k, char out[16]) { snprintf(out, 16, "key%02d", k); }

static void history_open(history *h, unsigned seed) {
    memset(h, 0, sizeof *h);
    h->dir = nds_test_tmpdir();
    snprintf(h->url, sizeof h->url, "file://%s/", h->dir);
    h->kv = open_versioned(h->url, "");
    h->rng = seed * 2654435761u + 1;
}

static void history_close(history *h) {
    nds_kvstore_free(h->kv);
    nds_test_rmtree(h->dir);
    free(h->dir);
}

/* One commit of 1-4 keys (puts, or deletes of present keys): version latest + 1. */
static void history_commit(history *h) {
    ck_assert_int_lt(h->latest, HMAX);
    uint64_t v = h->latest + 1;
    memcpy(h->writer[v], h->writer[v - 1], sizeof h->writer[v]);
    int n = 1 + (int)(next_rand(h) % 4), first = (int)(next_rand(h) % HKEYS);
    static uint8_t values[4][4096];
    char keys[4][16];
    nds_kv_op ops[4];
    nds_kvstore *kvs[4];
    for (int i = 0; i < n; i++) {
        int k = (first + i * 5) % HKEYS;
        hkey(k, keys[i]);
        kvs[i] = h->kv;
        if (h->writer[v - 1][k] && next_rand(h) % 5 == 0) {
            ops[i] = (nds_kv_op){keys[i], NULL, 0, {NDS_GEN_NONE, {0}}, {0}};
            h->writer[v][k] = 0;
        } else {
            size_t len = hvalue(k, (unsigned)v, values[i]);
            ops[i] = (nds_kv_op){keys[i], values[i], len, {NDS_GEN_NONE, {0}}, {0}};
            h->writer[v][k] = (uint16_t)v;
        }
    }
    h->start_ms[v] = wall_ms();
    NDS_OK(nds_kvstore_commit(kvs, ops, (size_t)n));
    h->latest = v;
    h->gap_after[v] = wall_ms();
}

/* A prepared part that is never committed: a prepared set and a data object nobody lists. */
static void history_orphan(history *h) {
    nds_txn *t;
    NDS_OK(nds_txn_begin(&t, NULL));
    uint8_t value[4096];
    size_t len = hvalue(0, 9999, value);
    NDS_OK(nds_txn_write_key(t, h->kv, "orphan", value, len));
    char *token = NULL;
    NDS_OK(nds_txn_prepare(t, &token));
    nds_free(token);
    nds_txn_free(t);
}

/* Tags version v; a version gc collected refuses (and then must not be one the model keeps). */
static int history_tag(history *h, uint64_t v) {
    char name[32];
    snprintf(name, sizeof name, "t%d", h->ntags++);
    int rc = nds_versioned_tag(h->kv, name, v);
    if (rc == 0)
        h->tagged[v] = true;
    else {
        ck_assert_int_eq(rc, NDS_EINVAL);
        char want[64];
        snprintf(want, sizeof want, "version %" PRIu64 " was collected", v);
        ck_assert_msg(strstr(nds_error_last()->message, want), "%s", nds_error_last()->message);
    }
    return rc;
}

/* Version v reads back exactly what the model says. */
static void history_check_version(history *h, uint64_t v) {
    char at[32];
    snprintf(at, sizeof at, "@%" PRIu64 "/", v);
    nds_kvstore *kv = open_versioned(h->url, at);
    uint8_t want[4096];
    for (int k = 0; k < HKEYS; k++) {
        char key[16];
        hkey(k, key);
        nds_read_result r;
        int rc = nds_kvstore_read(kv, key, NULL, &r);
        ck_assert_msg(rc == 0, "version %" PRIu64 " key %s: %s", v, key, nds_error_last()->message);
        if (!h->writer[v][k]) {
            ck_assert_msg(r.state == NDS_READ_MISSING, "version %" PRIu64 " has %s", v, key);
            continue;
        }
        ck_assert_msg(r.state == NDS_READ_VALUE, "version %" PRIu64 " lost %s", v, key);
        size_t len = hvalue(k, h->writer[v][k], want);
        ck_assert_uint_eq(r.value.len, len);
        ck_assert_int_eq(memcmp(r.value.data, want, len), 0);
        nds_read_result_dispose(&r);
    }
    nds_kvstore_free(kv);
}

/* Whether o keeps version v (at gc time: latest as given, older_than as a cutoff in wall ms). */
static bool rule_keeps(const history *h, const nds_gc_options *o, uint64_t latest, double cutoff_ms,
                       uint64_t v) {
    return v == latest || (o->keep_last && v + o->keep_last > latest) || h->tagged[v] ||
           (o->older_than_ms >= 0 && h->start_ms[v] > cutoff_ms);
}

/* Every version the last gc run (options o, latest then, cutoff) kept and no earlier run dropped,
 * every tagged version, and every later one, reads back exactly. */
static void history_check_kept(history *h, const nds_gc_options *o, uint64_t latest_then,
                               double cutoff_ms) {
    for (uint64_t v = 1; v <= h->latest; v++) {
        bool kept = v > latest_then || rule_keeps(h, o, latest_then, cutoff_ms, v);
        if (!kept) h->dropped[v] = true;
        if (h->tagged[v] || (kept && !h->dropped[v])) {
            history_check_version(h, v);
        }
    }
}

typedef struct key_list {
    char **keys;
    size_t n;
} key_list;

static int collect_key(void *ctx, const char *key, uint64_t size) {
    (void)size;
    key_list *l = ctx;
    l->keys = realloc(l->keys, (l->n + 1) * sizeof *l->keys);
    l->keys[l->n++] = strdup(key);
    return 0;
}

static int by_string(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The store's data, index and prepared objects, sorted. */
static key_list store_objects(const char *url) {
    nds_kvstore *b = NULL;
    NDS_OK(nds_kvstore_open(&b, url, NULL));
    key_list l = {0};
    NDS_OK(nds_kvstore_list(b, "data/", collect_key, &l));
    NDS_OK(nds_kvstore_list(b, "index/", collect_key, &l));
    NDS_OK(nds_kvstore_list(b, "prepared/", collect_key, &l));
    nds_kvstore_free(b);
    qsort(l.keys, l.n, sizeof *l.keys, by_string);
    return l;
}

static void key_list_free(key_list *l) {
    for (size_t i = 0; i < l->n; i++) free(l->keys[i]);
    free(l->keys);
}

static void copy_dir(const char *from, const char *to) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -a '%s' '%s'", to, from, to);
    ck_assert_int_eq(system(cmd), 0);
}

/* Random keep options: keep_last 1-6, sometimes older_than with its cutoff in a gap between one
 * commit's return and the next one's start (so the runs compared, a few ms apart, draw it alike);
 * *cutoff_ms gets it. */
static nds_gc_options random_options(history *h, double *cutoff_ms) {
    nds_gc_options o = NDS_GC_OPTIONS_INIT;
    o.grace_ms = 0;
    o.keep_last = 1 + next_rand(h) % 6;
    *cutoff_ms = 0;
    if (next_rand(h) % 3 == 0) {
        uint64_t v = 1 + next_rand(h) % h->latest; /* versions after v are kept */
        if (v < h->latest && h->start_ms[v + 1] - h->gap_after[v] >= 60) {
            *cutoff_ms = (h->gap_after[v] + h->start_ms[v + 1]) / 2;
            o.older_than_ms = (int64_t)(wall_ms() - *cutoff_ms);
            if (next_rand(h) % 2) o.keep_last = 0;
        }
    }
    return o;
}

static bool key_listed(const key_list *l, const char *key) {
    return bsearch(&key, l->keys, l->n, sizeof *l->keys, by_string) != NULL;
}

/* Seeded histories (commits, overwrites, deletes, tags, abandoned prepared parts, gaps in time)
 * with incremental runs between; at each checkpoint the store is copied and the incremental run on
 * the original must delete exactly what a full scan (nds_gc_options.full_scan) deletes on the copy
 * (a full scan reads the superseded lists of collected versions from gc/superseded/), and every
 * kept version reads back exactly. */
START_TEST(gc_incremental_equals_full_scan) {
    int checkpoints = 0, incremental = 0;
    uint64_t deleted_total = 0;
    for (unsigned seed = 1; seed <= 6; seed++) {
        history h;
        history_open(&h, seed);
        char *copy_dir_path = nds_test_tmpdir();
        char copy_url[1100];
        snprintf(copy_url, sizeof copy_url, "file://%s/", copy_dir_path);
        for (int step = 0; step < 14; step++) {
            int commits = 2 + (int)(next_rand(&h) % 8);
            for (int c = 0; c < commits; c++) {
                if (next_rand(&h) % 6 == 0) usleep(80000); /* a gap older_than can cut at */
                history_commit(&h);
                if (next_rand(&h) % 12 == 0) history_tag(&h, 1 + next_rand(&h) % h.latest);
                if (next_rand(&h) % 15 == 0) history_orphan(&h);
            }
            double cutoff;
            nds_gc_options o;
            nds_gc_result ri, rf;
            if (step % 3 != 2) { /* an incremental run only */
                o = random_options(&h, &cutoff);
                NDS_OK(nds_versioned_gc(h.kv, &o, &ri));
                ck_assert_int_eq(ri.full_scan, step == 0);
                incremental += !ri.full_scan;
                deleted_total += ri.objects_deleted;
                history_check_kept(&h, &o, h.latest, cutoff);
                continue;
            }
            copy_dir(h.dir, copy_dir_path);
            key_list before = store_objects(h.url);
            o = random_options(&h, &cutoff); /* after the copy: both runs draw the cutoff alike */
            NDS_OK(nds_versioned_gc(h.kv, &o, &ri));
            nds_kvstore *copy = open_versioned(copy_url, "");
            nds_gc_options of = o;
            of.full_scan = 1;
            if (o.older_than_ms >= 0) of.older_than_ms = (int64_t)(wall_ms() - cutoff);
            NDS_OK(nds_versioned_gc(copy, &of, &rf));
            nds_kvstore_free(copy);
            ck_assert_int_eq(ri.full_scan, 0);
            ck_assert_int_eq(rf.full_scan, 1);
            ck_assert_uint_eq(ri.objects_pending, rf.objects_pending);
            ck_assert_uint_lt(ri.commits_read, rf.commits_read);
            key_list a = store_objects(h.url), b = store_objects(copy_url);
            size_t deleted_full = 0;
            for (size_t i = 0; i < before.n; i++) {
                bool kept_incremental = key_listed(&a, before.keys[i]);
                bool kept_full = key_listed(&b, before.keys[i]);
                ck_assert_msg(kept_incremental == kept_full,
                              "seed %u step %d: %s is %s by the incremental run, %s by a full scan",
                              seed, step, before.keys[i], kept_incremental ? "kept" : "deleted",
                              kept_full ? "kept" : "deleted");
                deleted_full += !kept_full;
            }
            ck_assert_uint_eq(ri.objects_deleted, deleted_full);
            ck_assert_uint_eq(ri.objects_deleted, before.n - a.n);
            ck_assert_uint_eq(a.n, b.n);
            ck_assert_uint_eq(ri.objects_deleted, rf.objects_deleted);
            ck_assert_uint_eq(ri.versions_collected, rf.versions_collected);
            key_list_free(&before);
            key_list_free(&a);
            key_list_free(&b);
            checkpoints++;
            deleted_total += ri.objects_deleted;
            history_check_kept(&h, &o, h.latest, cutoff);
        }
        nds_test_rmtree(copy_dir_path);
        free(copy_dir_path);
        history_close(&h);
    }
    ck_assert_uint_gt(deleted_total, 0);
    fprintf(stderr,
            "incremental vs full: %d checkpoints equal, %d incremental runs, %" PRIu64
            " objects deleted\n",
            checkpoints, incremental, deleted_total);
}
END_TEST

/* A second run reads only the commits made since the first, and one with nothing new reads none. */
START_TEST(gc_second_run_reads_only_new_commits) {
    history h;
    history_open(&h, 77);
    for (int i = 0; i < 40; i++) history_commit(&h);
    nds_gc_options o = NDS_GC_OPTIONS_INIT;
    o.keep_last = 3;
    o.grace_ms = 0;
    nds_gc_result r;
    NDS_OK(nds_versioned_gc(h.kv, &o, &r));
    ck_assert_int_eq(r.full_scan, 1);
    ck_assert_ptr_nonnull(strstr(r.note, "no gc state"));
    ck_assert_uint_eq(r.commits_read, 40);
    for (int i = 0; i < 5; i++) history_commit(&h);
    NDS_OK(nds_versioned_gc(h.kv, &o, &r));
    ck_assert_int_eq(r.full_scan, 0);
    ck_assert_str_eq(r.note, "");
    ck_assert_uint_eq(r.commits_read, 5);
    NDS_OK(nds_versioned_gc(h.kv, &o, &r));
    ck_assert_uint_eq(r.commits_read, 0);
    ck_assert_uint_eq(r.objects_deleted, 0);
    /* Only the newest state and the one before it remain. */
    ck_assert_int_eq(objects_under(h.url, "gc/state/"), 2);
    history_check_kept(&h, &o, h.latest, 0);
    history_close(&h);
}
END_TEST

/* An incremental run lists only the names made since the previous run (less an hour): an orphan
 * named now is found, one whose name says 1970 (a writer whose clock lags by decades, or a name
 * from before names carried their time) is left to a full scan, which finds it. */
START_TEST(gc_incremental_lists_only_recent_names) {
    history h;
    history_open(&h, 8);
    for (int i = 0; i < 5; i++) history_commit(&h);
    nds_gc_options o = NDS_GC_OPTIONS_INIT;
    o.keep_last = 1;
    o.grace_ms = 3600 * 1000;
    nds_gc_result r;
    NDS_OK(nds_versioned_gc(h.kv, &o, &r));
    ck_assert_int_eq(r.full_scan, 1);
    uint64_t listed_full = r.keys_listed;
    nds_kvstore *b = NULL;
    NDS_OK(nds_kvstore_open(&b, h.url, NULL));
    vs_id fresh, old;
    NDS_OK(vs_id_random(&fresh));
    old = fresh;
    memset(old.b, 0, VS_ID_TIME_BYTES);
    old.b[VS_ID_TIME_BYTES - 1] = 1; /* 1 ms after the epoch */
    char key[VS_OBJECT_KEY_MAX];
    vs_object_key(VS_DATA_PREFIX, &fresh, key);
    NDS_OK(nds_kvstore_write(b, key, "fresh", 5, NULL, NULL));
    vs_object_key(VS_DATA_PREFIX, &old, key);
    NDS_OK(nds_kvstore_write(b, key, "old", 3, NULL, NULL));
    nds_kvstore_free(b);
    NDS_OK(nds_versioned_gc(h.kv, &o, &r));
    ck_assert_int_eq(r.full_scan, 0);
    ck_assert_uint_eq(r.objects_pending, 1);
    ck_assert_uint_eq(r.keys_listed, listed_full + 1); /* every name is recent here, but "old" */
    o.full_scan = 1;
    o.dry_run = 1;
    NDS_OK(nds_versioned_gc(h.kv, &o, &r));
    ck_assert_uint_eq(r.objects_pending, 2);
    history_close(&h);
}
END_TEST

/* Tagging a version gc collected fails naming it; a kept version still takes tags. */
START_TEST(gc_tag_of_collected_version_fails) {
    history h;
    history_open(&h, 5);
    for (int i = 0; i < 12; i++) history_commit(&h);
    nds_gc_options o = NDS_GC_OPTIONS_INIT;
    o.keep_last = 2;
    o.grace_ms = 0;
    nds_gc_result r;
    NDS_OK(nds_versioned_gc(h.kv, &o, &r));
    ck_assert_uint_gt(r.versions_collected, 0);
    /* Version 1's root was superseded by version 2: its index object is gone. */
    ck_assert_int_eq(history_tag(&h, 1), NDS_EINVAL);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "cannot be tagged"));
    ck_assert_int_eq(objects_under(h.url, "tags/"), 0); /* nothing left behind */
    NDS_OK(history_tag(&h, h.latest - 1));
    history_check_version(&h, h.latest - 1);
    history_close(&h);
}
END_TEST

/* Writes bytes over base key (the file behind it) to model a damaged state object. */
static void damage_state(const char *dir, uint64_t seq, const char *how) {
    char path[1200];
    snprintf(path, sizeof path, "%s/gc/state/%020" PRIu64, dir, seq);
    FILE *f = fopen(path, "r+b");
    ck_assert_ptr_nonnull(f);
    if (strcmp(how, "truncate") == 0) {
        ck_assert_int_eq(ftruncate(fileno(f), 40), 0);
    } else if (strcmp(how, "flip") == 0) {
        fseek(f, 30, SEEK_SET);
        int c = fgetc(f);
        fseek(f, 30, SEEK_SET);
        fputc(c ^ 0x5a, f);
    } else { /* garbage */
        ck_assert_int_eq(ftruncate(fileno(f), 0), 0);
        fputs("not a state at all", f);
    }
    fclose(f);
}

/* The same run on a copy of h's store at copy_dir; *out gets the objects it leaves. */
static nds_gc_result run_on_copy(history *h, const char *dir, const nds_gc_options *o) {
    char url[1100];
    snprintf(url, sizeof url, "file://%s/", dir);
    nds_kvstore *kv = open_versioned(url, "");
    nds_gc_result r;
    NDS_OK(nds_versioned_gc(kv, o, &r));
    nds_kvstore_free(kv);
    (void)h;
    return r;
}

static void check_kept_at(history *h, const char *dir, const nds_gc_options *o) {
    char saved[sizeof h->url];
    memcpy(saved, h->url, sizeof saved);
    snprintf(h->url, sizeof h->url, "file://%s/", dir);
    history_check_kept(h, o, h->latest, 0);
    memcpy(h->url, saved, sizeof saved);
}

/* A truncated, bit-flipped or foreign newest state: the run names it and starts from the state
 * before it, deleting what a run from a good newest state deletes. With every state damaged it
 * reads the whole history, says so, keeps every kept version exact and deletes no object the good
 * run keeps (it may keep more: deaths recorded only in collected index objects are unknown to it).
 * The next run is incremental again. */
START_TEST(gc_corrupt_state_falls_back) {
    static const char *const hows[] = {"truncate", "flip", "garbage"};
    for (int i = 0; i < 3; i++) {
        history h;
        history_open(&h, 30 + (unsigned)i);
        nds_gc_options o = NDS_GC_OPTIONS_INIT;
        o.keep_last = 4;
        o.grace_ms = 0;
        nds_gc_result r;
        for (int run = 0; run < 2; run++) { /* states 1 and 2 */
            for (int c = 0; c < 12; c++) history_commit(&h);
            NDS_OK(nds_versioned_gc(h.kv, &o, &r));
        }
        for (int c = 0; c < 10; c++) history_commit(&h);
        char *good = nds_test_tmpdir(), *worst = nds_test_tmpdir(), good_url[1100];
        snprintf(good_url, sizeof good_url, "file://%s/", good);
        copy_dir(h.dir, good);
        copy_dir(h.dir, worst);
        nds_gc_result rg = run_on_copy(&h, good, &o);
        ck_assert_uint_gt(rg.objects_deleted, 0);
        damage_state(h.dir, 2, hows[i]);
        NDS_OK(nds_versioned_gc(h.kv, &o, &r));
        ck_assert_int_eq(r.full_scan, 0);
        ck_assert_msg(strstr(r.note, "gc/state/00000000000000000002") &&
                          strstr(r.note, "started from the state before"),
                      "%s: note %s", hows[i], r.note);
        key_list a = store_objects(h.url), b = store_objects(good_url);
        ck_assert_uint_eq(a.n, b.n);
        for (size_t k = 0; k < a.n; k++) ck_assert_str_eq(a.keys[k], b.keys[k]);
        key_list_free(&a);
        history_check_kept(&h, &o, h.latest, 0);
        /* Every state damaged: a full scan. */
        damage_state(worst, 1, hows[i]);
        damage_state(worst, 2, hows[(i + 1) % 3]);
        nds_gc_result rw = run_on_copy(&h, worst, &o);
        ck_assert_int_eq(rw.full_scan, 1);
        ck_assert_msg(strstr(rw.note, "gc/state/00000000000000000002") &&
                          strstr(rw.note, "whole history"),
                      "%s: note %s", hows[i], rw.note);
        char worst_url[1100];
        snprintf(worst_url, sizeof worst_url, "file://%s/", worst);
        key_list w = store_objects(worst_url);
        for (size_t k = 0; k < b.n; k++)
            ck_assert_msg(key_listed(&w, b.keys[k]), "a full scan deleted %s", b.keys[k]);
        key_list_free(&w);
        key_list_free(&b);
        check_kept_at(&h, worst, &o);
        history_commit(&h);
        NDS_OK(nds_versioned_gc(h.kv, &o, &r));
        ck_assert_int_eq(r.full_scan, 0);
        ck_assert_uint_eq(r.commits_read, 1);
        nds_test_rmtree(good);
        nds_test_rmtree(worst);
        free(good);
        free(worst);
        history_close(&h);
    }
}
END_TEST

/* A tag gc cannot read could name any version: gc stops with a message naming it and deletes
 * nothing; a key under tags/ that is not a tag name of ours keeps nothing and stops nothing. */
START_TEST(gc_stops_at_an_unreadable_tag) {
    history h;
    history_open(&h, 12);
    for (int i = 0; i < 8; i++) history_commit(&h);
    nds_kvstore *b = NULL;
    NDS_OK(nds_kvstore_open(&b, h.url, NULL));
    NDS_OK(nds_kvstore_write(b, "tags/broken", "not a tag", 9, NULL, NULL));
    NDS_OK(nds_kvstore_write(b, "tags/12345", "x", 1, NULL, NULL)); /* all digits: not a name */
    key_list before = store_objects(h.url);
    nds_gc_options o = NDS_GC_OPTIONS_INIT;
    o.keep_last = 1;
    o.grace_ms = 0;
    nds_gc_result r;
    ck_assert_int_eq(nds_versioned_gc(h.kv, &o, &r), NDS_ECORRUPT);
    ck_assert_msg(strstr(nds_error_last()->message, "gc stops") &&
                      strstr(nds_error_last()->message, "tags/broken"),
                  "%s", nds_error_last()->message);
    key_list after = store_objects(h.url);
    ck_assert_uint_eq(after.n, before.n);
    key_list_free(&after);
    NDS_OK(nds_kvstore_delete(b, "tags/broken", NULL));
    NDS_OK(nds_versioned_gc(h.kv, &o, &r));
    ck_assert_uint_gt(r.objects_deleted, 0);
    nds_kvstore_free(b);
    key_list_free(&before);
    history_close(&h);
}
END_TEST

typedef struct tag_names {
    nds_kvstore *kv;
    history *h;
    int checked;
} tag_names;

static int check_tagged_version(void *ctx, const char *key, uint64_t size) {
    (void)size;
    tag_names *t = ctx;
    uint64_t v = 0;
    nds_kvstore *kv = NULL;
    char at[200];
    snprintf(at, sizeof at, "@%s/", key + strlen("tags/"));
    kv = open_versioned(t->h->url, at);
    NDS_OK(nds_versioned_current(kv, &v));
    nds_kvstore_free(kv);
    history_check_version(t->h, v);
    t->checked++;
    return 0;
}

/* A process tags random recent versions (some collected, some not) as fast as it can while this one
 * commits and runs gc (keep the last 2, grace 0) again and again: every tag that exists afterwards
 * names a version that reads back exactly (a tag either lands before gc decides, and keeps its
 * version, or is refused or withdrawn), and a full scan then finds nothing leaked. */
START_TEST(gc_racing_taggers_never_leave_a_tag_on_a_collected_version) {
    history h;
    history_open(&h, 21);
    for (int i = 0; i < 20; i++) history_commit(&h);
    pid_t pid = fork();
    if (pid == 0) {
        nds_kvstore *kv = NULL;
        char spec[1200];
        snprintf(spec, sizeof spec, "%s|versioned:", h.url);
        if (nds_kvstore_open(&kv, spec, NULL)) _exit(2);
        for (unsigned n = 0;; n++) {
            uint64_t latest = 0;
            if (nds_versioned_refresh(kv, &latest)) _exit(3);
            char name[32];
            snprintf(name, sizeof name, "race%u", n);
            int rc = nds_versioned_tag(kv, name, latest - (n * 7919u) % 12);
            if (rc && rc != NDS_EINVAL) _exit(4);
        }
    }
    nds_gc_options o = NDS_GC_OPTIONS_INIT;
    o.keep_last = 2;
    o.grace_ms = 0;
    double t0 = mono_ms();
    int runs = 0;
    while (mono_ms() - t0 < 4000) {
        history_commit(&h);
        nds_gc_result r;
        NDS_OK(nds_versioned_gc(h.kv, &o, &r));
        runs++;
    }
    int status;
    kill(pid, SIGKILL);
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFSIGNALED(status), "tagger stopped by itself (status %d)", status);
    nds_kvstore *b = NULL;
    NDS_OK(nds_kvstore_open(&b, h.url, NULL));
    tag_names t = {b, &h, 0};
    NDS_OK(nds_kvstore_list(b, "tags/", check_tagged_version, &t));
    nds_kvstore_free(b);
    nds_gc_result r, full;
    NDS_OK(nds_versioned_gc(h.kv, &o, &r));
    nds_gc_options f = o;
    f.full_scan = 1;
    f.dry_run = 1;
    NDS_OK(nds_versioned_gc(h.kv, &f, &full));
    ck_assert_uint_eq(full.objects_deleted, 0);
    ck_assert_int_gt(t.checked, 0);
    fprintf(stderr, "gc vs taggers: %d gc runs, %d tags left, each reads exactly\n", runs,
            t.checked);
    history_close(&h);
}
END_TEST

/* ---- the state codec ------------------------------------------------------------------------- */

/* A state with one of everything encodes, decodes to the same, and re-encodes to the same bytes;
 * every damaged form is NDS_ECORRUPT with a message naming where, never a crash; a state the
 * decoder would refuse is not written (NDS_EINVAL). */
START_TEST(gc_state_codec_round_trips_and_refuses_damage) {
    vs_gc_range ranges[2] = {{1, 3}, {6, 6}};
    vs_gc_object objects[2] = {{{{1}}, VS_OBJECT_DATA, 2, 0, 8, 3, 1000, 0, 4096},
                               {{{2}}, VS_OBJECT_INDEX, 4, 7, 3, 3, 2000, 3000, UINT64_MAX}};
    vs_gc_orphan orphans[2] = {{{{3}}, VS_GC_ORPHAN_PREPARED, 500, 77},
                               {{{4}}, VS_GC_ORPHAN_DATA, 400, UINT64_MAX}};
    vs_gc_state st = {.seq = 5,
                      .version = 9,
                      .time_ns = 123456789,
                      .flags = 0,
                      .collected = ranges,
                      .ncollected = 2,
                      .objects = objects,
                      .nobjects = 1,
                      .deleting = objects + 1,
                      .ndeleting = 1,
                      .pending = orphans,
                      .npending = 1,
                      .doomed = orphans + 1,
                      .ndoomed = 1};
    nds_buf b = {0}, again = {0};
    NDS_OK(vs_gc_state_encode(&st, &b));
    vs_gc_state d;
    NDS_OK(vs_gc_state_decode(b.data, b.len, 5, "state", &d));
    ck_assert_uint_eq(d.version, 9);
    ck_assert_uint_eq(d.nobjects, 1);
    ck_assert_uint_eq(d.objects[0].superseded, 3);
    ck_assert_uint_eq(d.deleting[0].dead_at, 7);
    ck_assert_int_eq(d.pending[0].kind, VS_GC_ORPHAN_PREPARED);
    ck_assert(vs_gc_state_collected(&d, 2) && vs_gc_state_collected(&d, 6));
    ck_assert(!vs_gc_state_collected(&d, 4) && !vs_gc_state_collected(&d, 7));
    NDS_OK(vs_gc_state_encode(&d, &again));
    ck_assert_uint_eq(again.len, b.len);
    ck_assert_int_eq(memcmp(again.data, b.data, b.len), 0);
    vs_gc_state_dispose(&d);
    /* The wrong sequence number, every truncation, a flipped byte. */
    ck_assert_int_eq(vs_gc_state_decode(b.data, b.len, 6, "state", &d), NDS_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "not 6"));
    for (size_t n = 0; n < b.len; n++)
        ck_assert_int_eq(vs_gc_state_decode(b.data, n, 0, "state", &d), NDS_ECORRUPT);
    b.data[40] ^= 1;
    ck_assert_int_eq(vs_gc_state_decode(b.data, b.len, 0, "state", &d), NDS_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "checksum"));
    /* A valid envelope around a payload that claims 2^60 objects. */
    uint8_t payload[28 + 8 + 8] = {0};
    nds_store_le64(payload, 1);
    nds_store_le64(payload + 28 + 8, (uint64_t)1 << 60);
    nds_buf bad = {0};
    NDS_OK(vs_envelope_append(&bad, VS_KIND_GC_STATE, payload, sizeof payload, NULL));
    ck_assert_int_eq(vs_gc_state_decode(bad.data, bad.len, 0, "state", &d), NDS_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "tracked objects"));
    /* Unsorted ranges and an object dead before it was made are refused, written or read. */
    ranges[1] = (vs_gc_range){2, 2};
    ck_assert_int_eq(vs_gc_state_encode(&st, &again), NDS_EINVAL);
    ranges[1] = (vs_gc_range){6, 6};
    objects[1].dead_at = 4;
    ck_assert_int_eq(vs_gc_state_encode(&st, &again), NDS_EINVAL);
    nds_buf_dispose(&b);
    nds_buf_dispose(&again);
    nds_buf_dispose(&bad);
}
END_TEST

/* ---- SIGKILLs during gc ---------------------------------------------------------------------- */

static void arm_sigkill_us(long us) {
    timer_t id;
    struct sigevent ev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGKILL};
    long ns = us * 1000 + 1; /* 0 would disarm */
    struct itimerspec it = {.it_value = {ns / 1000000000, ns % 1000000000}};
    if (timer_create(CLOCK_MONOTONIC, &ev, &id) || timer_settime(id, 0, &it, NULL)) _exit(10);
}

static uint64_t newest_state(const char *dir) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "ls '%s/gc/state' 2>/dev/null | sort | tail -1", dir);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    unsigned long long seq = 0;
    if (fscanf(p, "%llu", &seq) != 1) seq = 0;
    pclose(p);
    return seq;
}

/* At least 100 gc runs killed with SIGKILL at random points (a timer of 0 to about one run's
 * duration, armed as the child starts), between commits, tags and abandoned prepared parts. After
 * each kill: every version the killed run would keep reads back exactly, a commit goes through at
 * once, a complete run succeeds, after it a full scan finds nothing more to delete than the
 * orphans waiting for their grace period (nothing leaked), and the kept versions read exactly. */
START_TEST(gc_sigkilled_runs_leave_a_store_the_next_run_finishes) {
    history h;
    history_open(&h, 99);
    for (int i = 0; i < 30; i++) history_commit(&h);
    nds_gc_options o = NDS_GC_OPTIONS_INIT;
    o.keep_last = 3;
    o.grace_ms = 0;
    nds_gc_result r;
    NDS_OK(nds_versioned_gc(h.kv, &o, &r));
    double run_ms = 5;
    int during = 0, after = 0, before_state = 0, after_state = 0, iterations = 0;
    while (during < 110 && iterations < 400) {
        iterations++;
        for (int c = 0; c < 2; c++) history_commit(&h);
        if (next_rand(&h) % 10 == 0) history_tag(&h, h.latest - next_rand(&h) % 3);
        if (next_rand(&h) % 8 == 0) history_orphan(&h);
        uint64_t latest_then = h.latest, state_before = newest_state(h.dir);
        long delay_us = (long)(next_rand(&h) % (unsigned)(run_ms * 1500 + 1));
        int done[2];
        ck_assert_int_eq(pipe(done), 0);
        pid_t pid = fork();
        if (pid == 0) {
            arm_sigkill_us(delay_us);
            nds_kvstore *kv = NULL;
            char spec[1200];
            snprintf(spec, sizeof spec, "%s|versioned:", h.url);
            if (nds_kvstore_open(&kv, spec, NULL)) _exit(2);
            nds_gc_result cr;
            if (nds_versioned_gc(kv, &o, &cr)) _exit(3);
            if (write(done[1], "x", 1) != 1) _exit(4);
            for (;;) pause();
        }
        close(done[1]);
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "gc child: status %d",
                      status);
        char byte;
        bool finished = read(done[0], &byte, 1) == 1;
        close(done[0]);
        finished ? after++ : during++;
        if (!finished) newest_state(h.dir) > state_before ? after_state++ : before_state++;
        history_check_kept(&h, &o, latest_then, 0);
        double t0 = mono_ms();
        history_commit(&h);
        ck_assert_msg(mono_ms() - t0 < 1000, "a commit after a killed gc took %.0f ms",
                      mono_ms() - t0);
        t0 = mono_ms();
        NDS_OK(nds_versioned_gc(h.kv, &o, &r));
        run_ms = mono_ms() - t0;
        nds_gc_options full = o;
        full.full_scan = 1;
        full.dry_run = 1;
        nds_gc_result fr;
        NDS_OK(nds_versioned_gc(h.kv, &full, &fr));
        ck_assert_msg(fr.objects_deleted == r.objects_pending,
                      "after kill %d: a full scan would delete %" PRIu64 " objects, %" PRIu64
                      " orphans were pending",
                      during + after, fr.objects_deleted, r.objects_pending);
        history_check_kept(&h, &o, h.latest, 0);
    }
    ck_assert_int_ge(during, 100);
    fprintf(stderr,
            "gc sigkill test: %d kills during gc (%d before its state was written, %d after), %d "
            "after it finished, %" PRIu64 " versions\n",
            during, before_state, after_state, after, h.latest);
    ck_assert_int_ge(before_state, 5);
    ck_assert_int_ge(after_state, 5);
    history_close(&h);
}
END_TEST

int main(void) {
    Suite *s = suite_create("versioned_gc");
    TCase *tc = tcase_create("gc");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, gc_keeps_latest_tags_and_recent);
    tcase_add_test(tc, gc_collects_unreferenced_objects_in_two_runs);
    tcase_add_test(tc, gc_second_run_reads_only_new_commits);
    tcase_add_test(tc, gc_incremental_lists_only_recent_names);
    tcase_add_test(tc, gc_tag_of_collected_version_fails);
    tcase_add_test(tc, gc_corrupt_state_falls_back);
    tcase_add_test(tc, gc_state_codec_round_trips_and_refuses_damage);
    tcase_add_test(tc, gc_stops_at_an_unreadable_tag);
    tcase_add_test(tc, gc_incremental_equals_full_scan);
    suite_add_tcase(s, tc);
    TCase *race = tcase_create("race");
    tcase_set_timeout(race, 300);
    tcase_add_test(race, gc_racing_writers_keeps_what_versions_reference);
    tcase_add_test(race, gc_racing_taggers_never_leave_a_tag_on_a_collected_version);
    suite_add_tcase(s, race);
    TCase *kill = tcase_create("kill");
    tcase_set_timeout(kill, 600);
    tcase_add_test(kill, gc_sigkilled_runs_leave_a_store_the_next_run_finishes);
    suite_add_tcase(s, kill);
    return nds_test_run(s);
}
