/* The versioned kvstore adapter: the kvstore contract over memory and file bases, history and
 * pinned versions, all-or-nothing commits, racing writers (threads with their own handles, and
 * processes), corrupt objects, a stale or hostile head hint, and arrays with atomic transactions
 * on a file base. Tags and versions opened at a time: test_versioned_history.c. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support_check.h"
#include "support_kv_conformance.h"
#include "../../drivers/versioned_store.h"
#include "internal/kvstore_internal.h"

static char *g_dirs[64];
static int g_ndirs;

static void remove_dirs(void) {
    for (int i = 0; i < g_ndirs; i++) {
        nds_test_rmtree(g_dirs[i]);
        free(g_dirs[i]);
    }
    g_ndirs = 0;
}

static const char *temp_dir(void) {
    if (g_ndirs == 0) atexit(remove_dirs);
    ck_assert_int_lt(g_ndirs, 64);
    g_dirs[g_ndirs] = nds_test_tmpdir();
    return g_dirs[g_ndirs++];
}

static const char *keep(char *s) {
    static char *kept[256];
    static int n;
    ck_assert_int_lt(n, 256);
    return kept[n++] = s;
}

static const char *memory_base(void) {
    static int n;
    char *url = NULL;
    ck_assert_int_ge(asprintf(&url, "memory://versioned-%d-%d/", (int)getpid(), ++n), 0);
    return keep(url);
}

static const char *file_base(void) {
    char *url = NULL;
    ck_assert_int_ge(asprintf(&url, "file://%s/", temp_dir()), 0);
    return keep(url);
}

static const char *versioned_memory_url(void) {
    char *url = NULL;
    ck_assert_int_ge(asprintf(&url, "%s|versioned:", memory_base()), 0);
    return keep(url);
}

static const char *versioned_file_url(void) {
    char *url = NULL;
    ck_assert_int_ge(asprintf(&url, "%s|versioned:", file_base()), 0);
    return keep(url);
}

static const char *versioned_lmdb_url(void) {
    char *url = NULL;
    ck_assert_int_ge(asprintf(&url, "lmdb://%s/c.lmdb/p/|versioned:", temp_dir()), 0);
    return keep(url);
}

/* The latest version of the store at base, read through the engine. */
static uint64_t latest_version(const char *base) {
    nds_kvstore *b = nds_kv_test_open("%s", base);
    vs_store *s;
    NDS_OK(vs_store_open(&s, b, base));
    vs_snapshot snap;
    NDS_OK(vs_store_latest(s, &snap));
    vs_store_free(s);
    nds_kvstore_free(b);
    return snap.version;
}

START_TEST(history_and_pinned_versions) {
    const char *base = memory_base();
    nds_kvstore *kv = nds_kv_test_open("%s|versioned:", base);
    nds_kv_test_put(kv, "k", "one");   /* version 1 */
    nds_kv_test_put(kv, "k", "two");   /* 2 */
    NDS_OK(nds_kvstore_delete(kv, "k", NULL)); /* 3 */
    nds_kv_test_put(kv, "other", "x"); /* 4 */
    ck_assert_uint_eq(latest_version(base), 4);
    const char *want[] = {NULL, "one", "two", NULL, NULL};
    for (int v = 0; v <= 4; v++) {
        nds_kvstore *at = nds_kv_test_open("%s|versioned:@%d/", base, v);
        char *got = nds_kv_test_get(at, "k", NULL);
        if (want[v]) ck_assert_str_eq(got, want[v]);
        else ck_assert_ptr_null(got);
        free(got);
        ck_assert_int_eq(nds_kvstore_write(at, "k", "x", 1, NULL, NULL), NDS_EREADONLY);
        ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "read-only"));
        nds_kvstore_free(at);
    }
    char spec[512];
    snprintf(spec, sizeof spec, "%s|versioned:@5/", base);
    ck_assert_int_eq(nds_kv_test_open_status(spec), NDS_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "version 5 does not exist"));
    /* A handle's generation is the version that wrote the value. */
    nds_generation g;
    free(nds_kv_test_get(kv, "other", &g));
    ck_assert_str_eq(g.value, "v4");
    nds_kvstore_free(kv);
}
END_TEST

START_TEST(commit_is_all_or_nothing) {
    const char *base = memory_base();
    nds_kvstore *kv = nds_kv_test_open("%s|versioned:", base);
    nds_generation g = nds_kv_test_put(kv, "a", "1"); /* version 1 */
    nds_kv_test_put(kv, "a", "2");                     /* 2: g is stale now */
    nds_kv_op ops[2] = {{"b", (const uint8_t *)"new", 3, {NDS_GEN_ABSENT, {0}}, {0}},
                        {"a", (const uint8_t *)"3", 1, g, {0}}};
    nds_kvstore *kvs[2] = {kv, kv};
    ck_assert_int_eq(nds_kvstore_commit(kvs, ops, 2), NDS_ECONFLICT);
    ck_assert_uint_eq(latest_version(base), 2);
    char *b = nds_kv_test_get(kv, "b", NULL);
    ck_assert_ptr_null(b);
    /* With the right generation both land in one version. */
    free(nds_kv_test_get(kv, "a", &g));
    ops[1].if_equal = g;
    NDS_OK(nds_kvstore_commit(kvs, ops, 2));
    ck_assert_uint_eq(latest_version(base), 3);
    ck_assert_str_eq(ops[0].new_generation.value, "v3");
    char *a = nds_kv_test_get(kv, "a", NULL);
    ck_assert_str_eq(a, "3");
    free(a);
    nds_kvstore_free(kv);
}
END_TEST

typedef struct racer {
    const char *url;
    int rounds;
} racer;

static void *race(void *arg) {
    racer *r = arg;
    nds_kvstore *kv = NULL; /* a handle (and engine) of its own, as another process has */
    NDS_OK(nds_kvstore_open(&kv, r->url, NULL));
    for (int i = 0; i < r->rounds; i++) nds_kv_test_increment(kv, "counter");
    nds_kvstore_free(kv);
    return NULL;
}

/* Every version from 1 to latest exists and the counter grows by at most one per version. */
static void check_history(const char *base, long final) {
    uint64_t latest = latest_version(base);
    long previous = 0;
    for (uint64_t v = 1; v <= latest; v++) {
        nds_kvstore *at = nds_kv_test_open("%s|versioned:@%" PRIu64 "/", base, v);
        char *c = nds_kv_test_get(at, "counter", NULL);
        long value = c ? atol(c) : 0;
        ck_assert_int_ge(value, previous);
        ck_assert_int_le(value, previous + 1);
        previous = value;
        free(c);
        nds_kvstore_free(at);
    }
    ck_assert_int_eq(previous, final);
}

START_TEST(racing_handles_lose_nothing) {
    const char *base = _i ? file_base() : memory_base();
    char *url = NULL;
    ck_assert_int_ge(asprintf(&url, "%s|versioned:", base), 0);
    enum { THREADS = 4, ROUNDS = 40 };
    pthread_t t[THREADS];
    racer r = {url, ROUNDS};
    for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, race, &r);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    nds_kvstore *kv = nds_kv_test_open("%s", url);
    char *c = nds_kv_test_get(kv, "counter", NULL);
    ck_assert_str_eq(c, "160");
    free(c);
    nds_kvstore_free(kv);
    check_history(base, THREADS * ROUNDS);
    free(url);
}
END_TEST

START_TEST(processes_commit_without_losing_any) {
    const char *base = file_base();
    char url[1024];
    snprintf(url, sizeof url, "%s|versioned:", base);
    enum { PROCS = 8, ROUNDS = 15 };
    pid_t pids[PROCS];
    for (int p = 0; p < PROCS; p++) {
        if ((pids[p] = fork()) == 0) {
            nds_kvstore *kv = NULL;
            if (nds_kvstore_open(&kv, url, NULL)) _exit(2);
            for (int i = 0; i < ROUNDS; i++) {
                nds_kv_test_increment(kv, "counter");
                char key[64], value[64];
                snprintf(key, sizeof key, "own/%d/%d", p, i);
                snprintf(value, sizeof value, "%d-%d", p, i);
                if (nds_kvstore_write(kv, key, value, strlen(value), NULL, NULL)) _exit(3);
            }
            nds_kvstore_free(kv);
            _exit(0);
        }
    }
    for (int p = 0; p < PROCS; p++) {
        int status;
        waitpid(pids[p], &status, 0);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer %d failed", p);
    }
    nds_kvstore *kv = nds_kv_test_open("%s", url);
    char *c = nds_kv_test_get(kv, "counter", NULL);
    ck_assert_int_eq(atol(c), PROCS * ROUNDS);
    free(c);
    for (int p = 0; p < PROCS; p++)
        for (int i = 0; i < ROUNDS; i++) {
            char key[64], want[64];
            snprintf(key, sizeof key, "own/%d/%d", p, i);
            snprintf(want, sizeof want, "%d-%d", p, i);
            char *got = nds_kv_test_get(kv, key, NULL);
            ck_assert_str_eq(got, want);
            free(got);
        }
    nds_kvstore_free(kv);
    ck_assert_uint_eq(latest_version(base), 2 * PROCS * ROUNDS);
    check_history(base, PROCS * ROUNDS);
}
END_TEST

/* The base key of the only object under prefix ("data/", "index/"). */
static char *only_object(nds_kvstore *b, const char *prefix) {
    char *list = nds_kv_test_list(b, prefix);
    ck_assert_msg(strchr(list, ',') == NULL, "one object expected under %s: %s", prefix, list);
    *strchr(list, '=') = '\0';
    return list;
}

/* Rewrites base key with byte at flips XOR 0x40 (objects are immutable to the store, not to an
 * attacker). */
static void flip_byte(nds_kvstore *b, const char *key, size_t at) {
    nds_read_result r;
    NDS_OK(nds_kvstore_read(b, key, NULL, &r));
    ck_assert_uint_lt(at, r.value.len);
    uint8_t *copy = malloc(r.value.len);
    memcpy(copy, r.value.data, r.value.len);
    copy[at] ^= 0x40;
    NDS_OK(nds_kvstore_write(b, key, copy, r.value.len, NULL, NULL));
    free(copy);
    nds_read_result_dispose(&r);
}

static int read_status(nds_kvstore *kv, const char *key, int64_t start, int64_t len) {
    nds_read_options o = NDS_READ_OPTIONS_INIT;
    o.byte_start = start;
    o.byte_length = len;
    nds_read_result r;
    int rc = nds_kvstore_read(kv, key, &o, &r);
    if (!rc) nds_read_result_dispose(&r);
    return rc;
}

START_TEST(corrupt_values_are_caught_block_by_block) {
    const char *base = memory_base();
    nds_kvstore *kv = nds_kv_test_open("%s|versioned:", base), *b = nds_kv_test_open("%s", base);
    size_t n = 3 * (1u << 20) + 12345; /* four blocks */
    uint8_t *big = malloc(n);
    for (size_t i = 0; i < n; i++) big[i] = (uint8_t)(i * 7 + (i >> 12));
    NDS_OK(nds_kvstore_write(kv, "big", big, n, NULL, NULL));
    /* Ranges come back exactly, across block boundaries too. */
    nds_read_options o = NDS_READ_OPTIONS_INIT;
    o.byte_start = (1 << 20) - 5;
    o.byte_length = (1 << 20) + 10;
    nds_read_result r;
    NDS_OK(nds_kvstore_read(kv, "big", &o, &r));
    ck_assert_uint_eq(r.value.len, (1u << 20) + 10);
    ck_assert_int_eq(memcmp(r.value.data, big + (1 << 20) - 5, r.value.len), 0);
    ck_assert_uint_eq(r.total_size, n);
    nds_read_result_dispose(&r);
    char *data = only_object(b, "data/");
    flip_byte(b, data, 16 + (2u << 20) + 100); /* inside block 2 */
    ck_assert_int_eq(read_status(kv, "big", 0, -1), NDS_ECORRUPT);
    const char *msg = nds_error_last()->message;
    ck_assert_msg(strstr(msg, "key big") && strstr(msg, "data/"), "%s", msg);
    ck_assert_int_eq(read_status(kv, "big", (2 << 20) + 50, 100), NDS_ECORRUPT);
    NDS_OK(read_status(kv, "big", 0, 1 << 20));          /* block 0 is intact */
    NDS_OK(read_status(kv, "big", (3 << 20) + 1, 1000)); /* and block 3 */
    free(data);
    free(big);
    nds_kvstore_free(kv);
    nds_kvstore_free(b);
}
END_TEST


/* read_into: whole blocks land in the caller's buffers and are checked there; other ranges go
 * through a buffer; a corrupt block is an error either way. */
START_TEST(read_into_checks_blocks_in_place) {
    const char *base = _i ? memory_base() : file_base();
    nds_kvstore *kv = nds_kv_test_open("%s|versioned:", base), *b = nds_kv_test_open("%s", base);
    size_t n = 3 * (1u << 20) + 777;
    uint8_t *big = malloc(n), *got = malloc(n);
    for (size_t i = 0; i < n; i++) big[i] = (uint8_t)(i * 13 + (i >> 9));
    NDS_OK(nds_kvstore_write(kv, "big", big, n, NULL, NULL));
    NDS_OK(nds_kvstore_write(kv, "small", big, 100, NULL, NULL));
    ck_assert(nds_kvstore_can_read_into(kv));
    const uint64_t ranges[][2] = {{0, 3 * (1u << 20) + 777}, {1u << 20, 2u << 20}, {5, 1000},
                                  {(3u << 20), 777}, {(1u << 20) - 3, 10}};
    for (size_t r = 0; r < sizeof ranges / sizeof *ranges; r++) {
        size_t half = (size_t)ranges[r][1] / 2;
        struct iovec iov[2] = {{got, half}, {got + half, (size_t)ranges[r][1] - half}};
        nds_read_result res;
        NDS_OK(nds_kvstore_read_into(kv, "big", ranges[r][0], iov, 2, &res));
        ck_assert_int_eq(res.state, NDS_READ_VALUE);
        ck_assert_uint_eq(res.total_size, n);
        ck_assert_int_eq(memcmp(got, big + ranges[r][0], (size_t)ranges[r][1]), 0);
    }
    struct iovec one = {got, 100};
    nds_read_result res;
    NDS_OK(nds_kvstore_read_into(kv, "small", 0, &one, 1, &res));
    ck_assert_int_eq(memcmp(got, big, 100), 0);
    struct iovec past = {got, 10};
    ck_assert_int_eq(nds_kvstore_read_into(kv, "small", 95, &past, 1, &res), NDS_ERANGE);
    NDS_OK(nds_kvstore_read_into(kv, "missing", 0, &past, 1, &res));
    ck_assert_int_eq(res.state, NDS_READ_MISSING);
    char *data = only_object(b, "data/");
    flip_byte(b, data, 16 + (1u << 20) + 5); /* block 1 */
    struct iovec all = {got, n};
    ck_assert_int_eq(nds_kvstore_read_into(kv, "big", 0, &all, 1, &res), NDS_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "block 1"));
    struct iovec block2 = {got, 1u << 20};
    NDS_OK(nds_kvstore_read_into(kv, "big", 2u << 20, &block2, 1, &res));
    free(data);
    free(big);
    free(got);
    nds_kvstore_free(kv);
    nds_kvstore_free(b);
}
END_TEST

START_TEST(corrupt_index_and_commit_are_errors) {
    const char *base = memory_base();
    nds_kvstore *kv = nds_kv_test_open("%s|versioned:", base), *b = nds_kv_test_open("%s", base);
    nds_kv_test_put(kv, "key", "value");
    nds_kvstore_free(kv);
    char *index = only_object(b, "index/");
    flip_byte(b, index, 30);
    kv = nds_kv_test_open("%s|versioned:", base);
    ck_assert_int_eq(read_status(kv, "key", 0, -1), NDS_ECORRUPT);
    ck_assert_msg(strstr(nds_error_last()->message, index), "%s", nds_error_last()->message);
    nds_kvstore_free(kv);
    flip_byte(b, "commits/00000000000000000001", 40);
    char spec[512];
    snprintf(spec, sizeof spec, "%s|versioned:", base);
    ck_assert_int_eq(nds_kv_test_open_status(spec), NDS_ECORRUPT);
    ck_assert_msg(strstr(nds_error_last()->message, "commits/00000000000000000001"), "%s",
                  nds_error_last()->message);
    free(index);
    nds_kvstore_free(b);
}
END_TEST

START_TEST(head_hint_is_only_a_hint) {
    const char *base = memory_base();
    nds_kvstore *kv = nds_kv_test_open("%s|versioned:", base), *b = nds_kv_test_open("%s", base);
    for (int i = 0; i < 37; i++) nds_kv_test_put(kv, "k", "x");
    ck_assert_uint_eq(latest_version(base), 37);
    const char *hints[] = {"3", "0", "garbage", "99999999", "18446744073709551615", ""};
    for (size_t i = 0; i < sizeof hints / sizeof *hints; i++) {
        nds_kv_test_put(b, "head", hints[i]);
        ck_assert_uint_eq(latest_version(base), 37);
    }
    NDS_OK(nds_kvstore_delete(b, "head", NULL));
    ck_assert_uint_eq(latest_version(base), 37);
    nds_kvstore_free(kv);
    nds_kvstore_free(b);
}
END_TEST

START_TEST(bad_specs_are_refused) {
    ck_assert_int_eq(nds_kv_test_open_status("{\"driver\":\"versioned\"}"), NDS_EINVAL);
    ck_assert_int_eq(nds_kv_test_open_status("{\"driver\":\"versioned\",\"base\":\"memory://x/\",\"bogus\":1}"),
                     NDS_EINVAL);
    ck_assert_int_eq(nds_kv_test_open_status("{\"driver\":\"versioned\",\"base\":\"memory://x/\","
                                 "\"version\":1,\"tag\":\"t\"}"),
                     NDS_EINVAL);
    ck_assert_int_eq(nds_kv_test_open_status("{\"driver\":\"versioned\",\"base\":\"memory://x/\","
                                 "\"version\":-1}"),
                     NDS_EINVAL);
    ck_assert_int_eq(nds_kv_test_open_status("memory://x/|versioned:@/"), NDS_EINVAL);
}
END_TEST

/* Two zarr arrays written in one atomic transaction on a file base: one version, both or none. */
START_TEST(atomic_transaction_on_a_file_base) {
    const char *base = file_base();
    char spec[2048];
    nds_array *arrays[2];
    for (int i = 0; i < 2; i++) {
        snprintf(spec, sizeof spec,
                 "{\"driver\":\"zarr3\",\"kvstore\":\"%s|versioned:a%d/\",\"create\":true,"
                 "\"schema\":{\"dtype\":\"uint16\",\"domain\":{\"shape\":[64,64]},"
                 "\"chunk_layout\":{\"chunk\":{\"shape\":[16,16]}},\"codec\":\"zstd:1\"}}",
                 base, i);
        NDS_OK(nds_array_open(&arrays[i], spec, NULL));
    }
    uint64_t before = latest_version(base);
    nds_txn *t;
    NDS_OK(nds_txn_begin(&t, &(nds_txn_options){NDS_TXN_OPTIONS_VERSION, NDS_TXN_ATOMIC, 0}));
    uint16_t *buf = malloc(64 * 64 * 2);
    for (int i = 0; i < 64 * 64; i++) buf[i] = (uint16_t)(i * 3);
    nds_box all = {2, {0, 0}, {64, 64}, {1, 1}, 0};
    nds_io_options o = NDS_IO_OPTIONS_INIT;
    o.txn = t;
    for (int i = 0; i < 2; i++) NDS_OK(nds_array_write(arrays[i], &all, buf, &o));
    ck_assert_uint_eq(latest_version(base), before); /* nothing visible before the commit */
    NDS_OK(nds_txn_commit(t));
    nds_txn_free(t);
    ck_assert_uint_eq(latest_version(base), before + 1);
    uint16_t *back = malloc(64 * 64 * 2);
    for (int i = 0; i < 2; i++) {
        nds_array_free(arrays[i]);
        snprintf(spec, sizeof spec, "%s|versioned:a%d/|zarr3:", base, i);
        NDS_OK(nds_array_open(&arrays[i], spec, NULL));
        NDS_OK(nds_array_read(arrays[i], &all, back, NULL));
        ck_assert_int_eq(memcmp(back, buf, 64 * 64 * 2), 0);
        nds_array_free(arrays[i]);
    }
    free(buf);
    free(back);
}
END_TEST


/* The checkpoint recipe on a versioned file store: 4 processes each create (create + open) the same
 * two arrays inside one atomic transaction, write their rows (splits inside chunks) and commit.
 * Every process succeeds, every row lands, each commit is one version. */
static int recipe_process(const char *base, int p) {
    nds_txn_options o = NDS_TXN_OPTIONS_INIT;
    o.mode = NDS_TXN_ATOMIC;
    nds_txn *t;
    if (nds_txn_begin(&t, &o)) return 2;
    uint16_t rows[8 * 48];
    for (int i = 0; i < 8 * 48; i++) rows[i] = (uint16_t)(p * 1000 + i);
    nds_open_options oo = NDS_OPEN_OPTIONS_INIT;
    oo.txn = t;
    nds_io_options io = NDS_IO_OPTIONS_INIT;
    io.txn = t;
    nds_array *arrays[2]; /* open until the commit (txn.h) */
    for (int k = 0; k < 2; k++) {
        char spec[2048];
        snprintf(spec, sizeof spec,
                 "{\"driver\":\"zarr3\",\"kvstore\":\"%s|versioned:layer%d/\",\"create\":true,"
                 "\"open\":true,\"schema\":{\"dtype\":\"uint16\",\"domain\":{\"shape\":[32,48]},"
                 "\"chunk_layout\":{\"chunk\":{\"shape\":[16,16]}},\"codec\":\"zstd:1\"}}",
                 base, k);
        if (nds_array_open(&arrays[k], spec, &oo)) return 3;
        nds_box b = {2, {(uint64_t)p * 8, 0}, {(uint64_t)p * 8 + 8, 48}, {1, 1}, 0};
        if (nds_array_write(arrays[k], &b, rows, &io)) return 4;
    }
    int rc = nds_txn_commit(t);
    for (int k = 0; k < 2; k++) nds_array_free(arrays[k]);
    if (rc) fprintf(stderr, "process %d: %s\n", p, nds_error_last()->message);
    nds_txn_free(t);
    return rc ? 5 : 0;
}

START_TEST(checkpoint_recipe_from_four_processes) {
    const char *base = file_base();
    enum { PROCS = 4 };
    pid_t pids[PROCS];
    for (int p = 0; p < PROCS; p++)
        if ((pids[p] = fork()) == 0) _exit(recipe_process(base, p));
    for (int p = 0; p < PROCS; p++) {
        int status;
        waitpid(pids[p], &status, 0);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "process %d: status %d", p,
                      status);
    }
    ck_assert_uint_eq(latest_version(base), PROCS);
    for (int k = 0; k < 2; k++) {
        char spec[1024];
        snprintf(spec, sizeof spec, "%s|versioned:layer%d/|zarr3:", base, k);
        nds_array *a;
        NDS_OK(nds_array_open(&a, spec, NULL));
        uint16_t all[32 * 48];
        nds_box b = {2, {0, 0}, {32, 48}, {1, 1}, 0};
        NDS_OK(nds_array_read(a, &b, all, NULL));
        for (int i = 0; i < 32 * 48; i++)
            ck_assert_uint_eq(all[i], (uint16_t)((i / 48 / 8) * 1000 + i % (8 * 48)));
        nds_array_free(a);
    }
}
END_TEST

/* ---- prepared parts (one version from many processes) ---- */

/* A process's part: creates (create + open) arrays layer0 and layer1 of [32, 48] in [16, 16] chunks
 * inside one transaction, writes rows [8p, 8p + 8) (row splits inside chunks) and prepares; the
 * token goes to dir/token<p>. */
static int prepare_part(const char *base, const char *dir, int p) {
    nds_txn_options o = NDS_TXN_OPTIONS_INIT;
    o.mode = NDS_TXN_ATOMIC;
    nds_txn *t;
    if (nds_txn_begin(&t, &o)) return 2;
    uint16_t rows[8 * 48];
    for (int i = 0; i < 8 * 48; i++) rows[i] = (uint16_t)(p * 1000 + i);
    nds_open_options oo = NDS_OPEN_OPTIONS_INIT;
    oo.txn = t;
    nds_io_options io = NDS_IO_OPTIONS_INIT;
    io.txn = t;
    nds_array *arrays[2];
    for (int k = 0; k < 2; k++) {
        char spec[2048];
        snprintf(spec, sizeof spec,
                 "{\"driver\":\"zarr3\",\"kvstore\":\"%s|versioned:layer%d/\",\"create\":true,"
                 "\"open\":true,\"schema\":{\"dtype\":\"uint16\",\"domain\":{\"shape\":[32,48]},"
                 "\"chunk_layout\":{\"chunk\":{\"shape\":[16,16]}},\"codec\":\"zstd:1\"}}",
                 base, k);
        if (nds_array_open(&arrays[k], spec, &oo)) return 3;
        nds_box b = {2, {(uint64_t)p * 8, 0}, {(uint64_t)p * 8 + 8, 48}, {1, 1}, 0};
        if (nds_array_write(arrays[k], &b, rows, &io)) return 4;
    }
    char *token = NULL;
    int rc = nds_txn_prepare(t, &token);
    for (int k = 0; k < 2; k++) nds_array_free(arrays[k]);
    nds_txn_free(t);
    if (rc) {
        fprintf(stderr, "prepare %d: %s\n", p, nds_error_last()->message);
        return 5;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/token%d", dir, p);
    nds_test_write_file(path, token, strlen(token));
    nds_free(token);
    return 0;
}

/* Runs n parts in processes; tokens[p] gets part p's token (malloc'd). */
static void prepare_parts(const char *base, int n, char **tokens) {
    const char *dir = temp_dir();
    pid_t pids[8];
    for (int p = 0; p < n; p++)
        if ((pids[p] = fork()) == 0) _exit(prepare_part(base, dir, p));
    for (int p = 0; p < n; p++) {
        int status;
        waitpid(pids[p], &status, 0);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "part %d: status %d", p,
                      status);
        char path[1024], buf[128] = {0};
        snprintf(path, sizeof path, "%s/token%d", dir, p);
        FILE *f = fopen(path, "r");
        ck_assert_ptr_nonnull(f);
        ck_assert_int_gt(fread(buf, 1, sizeof buf - 1, f), 0);
        fclose(f);
        tokens[p] = strdup(buf);
    }
}

/* Rows [0, 8 * parts) of both layers hold every part's values (then fill up to extra_from). */
static void check_layers(const char *base, int parts, int extra_from) {
    for (int k = 0; k < 2; k++) {
        char spec[1024];
        snprintf(spec, sizeof spec, "%s|versioned:layer%d/|zarr3:", base, k);
        nds_array *a;
        NDS_OK(nds_array_open(&a, spec, NULL));
        uint16_t all[32 * 48];
        nds_box b = {2, {0, 0}, {32, 48}, {1, 1}, 0};
        NDS_OK(nds_array_read(a, &b, all, NULL));
        for (int i = 0; i < 8 * parts * 48; i++)
            ck_assert_msg(all[i] == (uint16_t)((i / 48 / 8) * 1000 + i % (8 * 48)),
                          "layer%d element %d: %u", k, i, all[i]);
        for (int i = 8 * parts * 48; i < extra_from * 48; i++) ck_assert_uint_eq(all[i], 0);
        nds_array_free(a);
    }
}

START_TEST(prepared_parts_commit_as_one_version) {
    const char *base = file_base();
    char *tokens[4];
    prepare_parts(base, 4, tokens);
    ck_assert_uint_eq(latest_version(base), 0); /* nothing visible before the commit */
    nds_kvstore *kv = nds_kv_test_open("%s|versioned:", base);
    const char *order[4] = {tokens[2], tokens[0], tokens[3], tokens[1]}; /* any order */
    NDS_OK(nds_txn_commit_prepared(kv, order, 4, "step 100", "{\"step\":100}"));
    ck_assert_uint_eq(latest_version(base), 1); /* arrays, chunks: one version */
    check_layers(base, 4, 32);
    /* A part is published once. */
    ck_assert_int_eq(nds_txn_commit_prepared(kv, order, 1, NULL, NULL), NDS_EINVAL);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "already committed in version 1"));
    ck_assert_int_eq(nds_txn_commit_prepared(kv, (const char *const[]){"0123"}, 1, NULL, NULL),
                     NDS_EINVAL);
    for (int p = 0; p < 4; p++) free(tokens[p]);
    nds_kvstore_free(kv);
}
END_TEST

/* Parts merge onto the chunk as the version holds it at commit: a plain write after the prepare,
 * into other rows of the same chunks, is kept; parts never committed leave nothing visible. */
START_TEST(prepared_parts_merge_onto_later_writes) {
    const char *base = file_base();
    char *tokens[3];
    prepare_parts(base, 3, tokens); /* rows 0-23; rows 16-31 share chunks with part 2 */
    nds_kvstore *kv = nds_kv_test_open("%s|versioned:", base);
    NDS_OK(nds_txn_commit_prepared(kv, (const char *const *)tokens, 2, NULL, NULL)); /* parts 0, 1 */
    check_layers(base, 2, 16);
    char spec[1024];
    snprintf(spec, sizeof spec, "%s|versioned:layer0/|zarr3:", base);
    nds_array *a;
    NDS_OK(nds_array_open(&a, spec, NULL));
    uint16_t later[8 * 48];
    for (int i = 0; i < 8 * 48; i++) later[i] = 7;
    nds_box rows = {2, {24, 0}, {32, 48}, {1, 1}, 0};
    NDS_OK(nds_array_write(a, &rows, later, NULL)); /* after part 2 was prepared */
    NDS_OK(nds_txn_commit_prepared(kv, (const char *const *)tokens + 2, 1, NULL, NULL));
    uint16_t back[8 * 48];
    NDS_OK(nds_array_read(a, &rows, back, NULL));
    for (int i = 0; i < 8 * 48; i++) ck_assert_uint_eq(back[i], 7);
    nds_array_free(a);
    check_layers(base, 3, 24);
    for (int p = 0; p < 3; p++) free(tokens[p]);
    nds_kvstore_free(kv);
}
END_TEST

/* ---- crashes ---- */

enum { GROUP_KEYS = 5 };

/* A child's endless commits: GROUP_KEYS keys of its group, one value per commit, some values long
 * enough for data objects. */
static void commit_forever(const char *url, int child) {
    nds_kvstore *kv = NULL;
    if (nds_kvstore_open(&kv, url, NULL)) _exit(2);
    char keys[GROUP_KEYS][64], value[2048];
    nds_kv_op ops[GROUP_KEYS];
    nds_kvstore *kvs[GROUP_KEYS];
    for (unsigned long n = 1;; n++) {
        int len = snprintf(value, sizeof value, "%d-%lu-", child, n);
        size_t padded = n % 3 ? (size_t)len : 600 + n % 1000; /* inline, or in a data object */
        memset(value + len, 'x', padded - (size_t)len);
        for (int k = 0; k < GROUP_KEYS; k++) {
            snprintf(keys[k], sizeof keys[k], "g/%d/%d", child, k);
            ops[k] = (nds_kv_op){keys[k], (const uint8_t *)value, padded, {NDS_GEN_NONE, {0}}, {0}};
            kvs[k] = kv;
        }
        int rc = nds_kvstore_commit(kvs, ops, GROUP_KEYS);
        if (rc && rc != NDS_ECONFLICT) _exit(3);
    }
}

typedef struct group_check {
    int mismatches, keys;
} group_check;

static int check_group_key(void *ctx, const char *key, uint64_t size) {
    (void)size;
    group_check *g = ctx;
    g->keys++;
    int child, k;
    if (sscanf(key, "g/%d/%d", &child, &k) != 2 || child < 0 || child >= 40) g->mismatches++;
    (void)k;
    return 0;
}

/* Every group in version v holds one value in all its keys, and every value reads back. */
static void check_version_whole(const char *base, uint64_t v) {
    nds_kvstore *kv = nds_kv_test_open("%s|versioned:@%" PRIu64 "/", base, v);
    group_check g = {0};
    NDS_OK(nds_kvstore_list(kv, "g/", check_group_key, &g));
    ck_assert_int_eq(g.mismatches, 0);
    ck_assert_int_eq(g.keys % GROUP_KEYS, 0);
    for (int child = 0; child < 40; child++) {
        char *first = NULL;
        for (int k = 0; k < GROUP_KEYS; k++) {
            char key[64];
            snprintf(key, sizeof key, "g/%d/%d", child, k);
            char *value = nds_kv_test_get(kv, key, NULL);
            if (k == 0) first = value;
            else {
                ck_assert_msg((first == NULL) == (value == NULL),
                              "version %" PRIu64 ": group %d is torn", v, child);
                if (value) ck_assert_msg(strcmp(first, value) == 0,
                                         "version %" PRIu64 ": group %d is torn", v, child);
                free(value);
            }
        }
        free(first);
    }
    nds_kvstore_free(kv);
}


static int count_key(void *ctx, const char *key, uint64_t size) {
    (void)key, (void)size;
    (*(int *)ctx)++;
    return 0;
}

/* Objects under prefix that no commit lists: what killed writers left (garbage). */
static int unreferenced_objects(const char *base, const char *prefix, vs_object_kind kind) {
    nds_kvstore *b = nds_kv_test_open("%s", base);
    vs_store *s;
    NDS_OK(vs_store_open(&s, b, base));
    vs_snapshot snap;
    NDS_OK(vs_store_latest(s, &snap));
    int stored = 0, referenced = 0;
    NDS_OK(nds_kvstore_list(b, prefix, count_key, &stored));
    for (uint64_t v = 1; v <= snap.version; v++) {
        vs_commit c;
        NDS_OK(vs_store_commit_info(s, v, &c));
        for (size_t i = 0; i < c.nobjects; i++) referenced += c.objects[i].kind == kind;
        vs_commit_dispose(&c);
    }
    vs_store_free(s);
    nds_kvstore_free(b);
    return stored - referenced;
}

/* 40 rounds of 5 committing processes killed with SIGKILL at random moments (200 kills): every
 * version is whole, nothing it references is missing, and the next writer commits at once. */
START_TEST(sigkilled_writers_leave_whole_versions) {
    const char *base = file_base();
    char url[1024];
    snprintf(url, sizeof url, "%s|versioned:", base);
    enum { ROUNDS = 40, CHILDREN = 5 };
    int kills = 0;
    srandom((unsigned)getpid());
    for (int round = 0; round < ROUNDS; round++) {
        pid_t pids[CHILDREN];
        for (int c = 0; c < CHILDREN; c++)
            if ((pids[c] = fork()) == 0) commit_forever(url, round % 8 * CHILDREN + c);
        usleep((useconds_t)(5000 + random() % 40000));
        for (int c = 0; c < CHILDREN; c++) {
            kill(pids[c], SIGKILL);
            int status;
            waitpid(pids[c], &status, 0);
            ck_assert_msg(WIFSIGNALED(status), "writer exited by itself: %d", status);
            kills++;
        }
        uint64_t latest = latest_version(base);
        check_version_whole(base, latest);
        /* The next writer goes ahead at once: nothing of a dead writer holds it up. */
        nds_kvstore *kv = nds_kv_test_open("%s", url);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        nds_kv_test_put(kv, "after", "x");
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
        ck_assert_msg(s < 5.0, "a commit after the kills took %.1f s", s);
        nds_kvstore_free(kv);
    }
    ck_assert_int_eq(kills, ROUNDS * CHILDREN);
    uint64_t latest = latest_version(base);
    /* The children committed between the kills (so kills landed among commits, not before). */
    ck_assert_msg(latest >= 3 * ROUNDS, "only %" PRIu64 " versions", latest);
    /* Some kills landed between a commit's first object and its commit object. */
    int orphans = unreferenced_objects(base, "index/", VS_OBJECT_INDEX) +
                  unreferenced_objects(base, "data/", VS_OBJECT_DATA);
    ck_assert_int_gt(orphans, 0);
    fprintf(stderr, "sigkill test: %d kills, %" PRIu64 " versions, %d objects of unfinished commits\n",
            kills, latest, orphans);
    for (uint64_t v = 1; v <= latest; v += 1 + latest / 300) check_version_whole(base, v);
    check_version_whole(base, latest);
}
END_TEST

/* Collects nds_versioned_diff's calls as "+key", "-key", "Mkey" joined by spaces. */
typedef struct diff_text {
    char text[512];
    int stop_at; /* > 0: return 5 at that call */
    int calls;
} diff_text;

static int diff_to_text(void *ctx, const char *key, nds_diff_kind kind) {
    diff_text *d = ctx;
    size_t used = strlen(d->text);
    snprintf(d->text + used, sizeof d->text - used, "%s%c%s", used ? " " : "",
             kind == NDS_DIFF_ADDED ? '+' : kind == NDS_DIFF_REMOVED ? '-' : 'M', key);
    return ++d->calls == d->stop_at ? 5 : 0;
}

static const char *diff_of(nds_kvstore *kv, uint64_t a, uint64_t b) {
    static diff_text d;
    memset(&d, 0, sizeof d);
    NDS_OK(nds_versioned_diff(kv, a, b, diff_to_text, &d));
    return d.text;
}

/* Keys added, rewritten (same bytes too) and removed between versions, through a handle whose path
 * narrows the diff (keys next to the path, "model" and "model0/z", stay out), both ways. */
START_TEST(diff_between_versions_under_a_path) {
    const char *base = memory_base();
    nds_kvstore *kv = nds_kv_test_open("%s|versioned:", base);
    nds_kv_test_put(kv, "model/a", "1");          /* 1 */
    nds_kv_test_put(kv, "model/b", "2");          /* 2 */
    nds_kv_test_put(kv, "other/x", "x");          /* 3 */
    nds_kv_test_put(kv, "model/a", "1");          /* 4: the same bytes again */
    NDS_OK(nds_kvstore_delete(kv, "model/b", NULL)); /* 5 */
    nds_kv_test_put(kv, "model/c/d", "3");        /* 6 */
    nds_kv_test_put(kv, "model", "m");            /* 7 */
    nds_kv_test_put(kv, "model0/z", "z");         /* 8 */
    nds_kvstore *sub = nds_kv_test_open("%s|versioned:model/", base);
    ck_assert_str_eq(diff_of(sub, 3, 8), "Ma -b +c/d");
    ck_assert_str_eq(diff_of(sub, 8, 3), "Ma +b -c/d");
    ck_assert_str_eq(diff_of(sub, 2, 0), "Ma -b +c/d"); /* 0: the version the handle sees */
    ck_assert_str_eq(diff_of(sub, 4, 5), "-b");
    ck_assert_str_eq(diff_of(sub, 6, 8), "");
    ck_assert_str_eq(diff_of(sub, 0, 0), "");
    ck_assert_str_eq(diff_of(kv, 6, 8), "+model +model0/z");
    ck_assert_str_eq(diff_of(kv, 2, 3), "+other/x");
    /* A pinned handle's own version is its 0. */
    nds_kvstore *at = nds_kv_test_open("%s|versioned:@1/model/", base);
    ck_assert_str_eq(diff_of(at, 0, 6), "Ma +c/d");
    nds_kvstore_free(at);
    /* fn's non-zero return stops the diff; bad versions and plain stores are errors. */
    diff_text d = {.stop_at = 1};
    ck_assert_int_eq(nds_versioned_diff(sub, 3, 8, diff_to_text, &d), 5);
    ck_assert_str_eq(d.text, "Ma");
    ck_assert_int_eq(nds_versioned_diff(sub, 3, 99, diff_to_text, &d), NDS_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "version 99 does not exist"));
    nds_kvstore *plain = nds_kv_test_open("%s", base);
    ck_assert_int_eq(nds_versioned_diff(plain, 1, 2, diff_to_text, &d), NDS_EINVAL);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "not a versioned store"));
    nds_kvstore_free(plain);
    nds_kvstore_free(sub);
    nds_kvstore_free(kv);
}
END_TEST

/* ---- SIGKILLs during prepare and commit_prepared ---- */

enum { KILL_PARTS = 4, KILL_ROUNDS = 44 };

/* The value round r's part p writes into each of its rows (0 is the fill: no round). */
static uint16_t round_value(int round, int part) { return (uint16_t)((round + 1) * 8 + part); }

static double monotonic_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static double g_child_start; /* monotonic_s() when this child began */

static double seconds_since(const struct timespec *t0) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* When a child is killed: by a SIGKILL timer of its own, armed at its start or when its prepare or
 * commit begins (so the kill lands at a random point of that work, however late the parent would
 * notice it began), or by the parent once its work is done (after). */
typedef enum kill_when { KILL_AT_START, KILL_IN_WORK, KILL_AFTER } kill_when;

typedef struct kill_plan {
    kill_when when;
    double delay; /* seconds from where the timer is armed */
} kill_plan;

/* Arms a SIGKILL of this process in delay seconds (a high-resolution timer). */
static void arm_sigkill(double delay) {
    timer_t id;
    struct sigevent ev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGKILL};
    long ns = (long)(delay * 1e9) + 1; /* 0 would disarm */
    struct itimerspec it = {.it_value = {ns / 1000000000, ns % 1000000000}};
    if (timer_create(CLOCK_MONOTONIC, &ev, &id) || timer_settime(id, 0, &it, NULL)) _exit(10);
}

static bool file_exists(const char *dir, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

/* Writes dir/name whole or not at all (a kill between leaves only the temporary). */
static void write_marker(const char *dir, const char *name, const char *text) {
    char tmp[1024], path[1024];
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(tmp, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0 || rename(tmp, path) != 0) _exit(9);
}

/* Marks dir/name with the seconds since this child began. */
static void mark_time(const char *dir, const char *name) {
    char now[32];
    snprintf(now, sizeof now, "%.9f", monotonic_s() - g_child_start);
    write_marker(dir, name, now);
}

/* The time marker dir/name holds. */
static double marker_time(const char *dir, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    double t = 0;
    ck_assert_int_eq(fscanf(f, "%lf", &t), 1);
    fclose(f);
    return t;
}

/* Reads dir/name (a token) into out[VS_ID_HEX]; false when it is not there. */
static bool read_marker(const char *dir, const char *name, char *out) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t n = fread(out, 1, VS_ID_HEX - 1, f);
    out[n] = '\0';
    fclose(f);
    return n == VS_ID_HEX - 1;
}

/* A round's part: as prepare_part (arrays created in the part, rows [8p, 8p + 8) of layer0 and
 * layer1, splits inside chunks) with round_value(round, p) in every element. Marks
 * "preparing<p>" before nds_txn_prepare, then "token<p>" (the token) and "prepared<p>" after it
 * (mark_time); then waits to be killed. */
static void prepare_round_part(const char *base, const char *dir, int round, int p,
                               kill_plan plan) {
    g_child_start = monotonic_s();
    if (plan.when == KILL_AT_START) arm_sigkill(plan.delay);
    nds_txn_options o = NDS_TXN_OPTIONS_INIT;
    o.mode = NDS_TXN_ATOMIC;
    nds_txn *t;
    if (nds_txn_begin(&t, &o)) _exit(2);
    uint16_t rows[8 * 48];
    for (int i = 0; i < 8 * 48; i++) rows[i] = round_value(round, p);
    nds_open_options oo = NDS_OPEN_OPTIONS_INIT;
    oo.txn = t;
    nds_io_options io = NDS_IO_OPTIONS_INIT;
    io.txn = t;
    nds_array *arrays[2];
    for (int k = 0; k < 2; k++) {
        char spec[2048];
        snprintf(spec, sizeof spec,
                 "{\"driver\":\"zarr3\",\"kvstore\":\"%s|versioned:layer%d/\",\"create\":true,"
                 "\"open\":true,\"schema\":{\"dtype\":\"uint16\",\"domain\":{\"shape\":[32,48]},"
                 "\"chunk_layout\":{\"chunk\":{\"shape\":[16,16]}},\"codec\":\"zstd:1\"}}",
                 base, k);
        if (nds_array_open(&arrays[k], spec, &oo)) _exit(3);
        nds_box b = {2, {(uint64_t)p * 8, 0}, {(uint64_t)p * 8 + 8, 48}, {1, 1}, 0};
        if (nds_array_write(arrays[k], &b, rows, &io)) _exit(4);
    }
    char name[32], *token = NULL;
    snprintf(name, sizeof name, "preparing%d", p);
    mark_time(dir, name);
    if (plan.when == KILL_IN_WORK) arm_sigkill(plan.delay);
    if (nds_txn_prepare(t, &token)) {
        fprintf(stderr, "prepare %d: %s\n", p, nds_error_last()->message);
        _exit(5);
    }
    snprintf(name, sizeof name, "token%d", p);
    write_marker(dir, name, token);
    snprintf(name, sizeof name, "prepared%d", p);
    mark_time(dir, name);
    for (;;) pause();
}

/* The round's committer: waits for every part's token, marks "committing", commits them in a
 * rotated order, marks "committed" (mark_time), then waits to be killed. */
static void commit_round(const char *url, const char *dir, unsigned seed, kill_plan plan) {
    g_child_start = monotonic_s();
    char tokens[KILL_PARTS][VS_ID_HEX];
    for (int p = 0; p < KILL_PARTS; p++) {
        char name[32];
        snprintf(name, sizeof name, "token%d", p);
        while (!read_marker(dir, name, tokens[p])) usleep(200);
    }
    const char *order[KILL_PARTS];
    for (int p = 0; p < KILL_PARTS; p++) order[p] = tokens[(p + seed) % KILL_PARTS];
    nds_kvstore *kv = NULL;
    if (nds_kvstore_open(&kv, url, NULL)) _exit(6);
    mark_time(dir, "committing");
    if (plan.when == KILL_IN_WORK) arm_sigkill(plan.delay);
    if (nds_txn_commit_prepared(kv, order, KILL_PARTS, "round", NULL)) {
        fprintf(stderr, "commit: %s\n", nds_error_last()->message);
        _exit(7);
    }
    mark_time(dir, "committed");
    for (;;) pause();
}

/* A writer that does not coordinate with the round: plain commits of key "noise" until killed, so
 * the committer races for each version number it takes. */
static void commit_noise(const char *url) {
    nds_kvstore *kv = NULL;
    if (nds_kvstore_open(&kv, url, NULL)) _exit(11);
    for (unsigned long n = 0;; n++) {
        char value[32];
        int len = snprintf(value, sizeof value, "%lu", n);
        nds_kv_op op = {"noise", (const uint8_t *)value, (size_t)len, {NDS_GEN_NONE, {0}}, {0}};
        int rc = nds_kvstore_commit(&kv, &op, 1);
        if (rc && rc != NDS_ECONFLICT) _exit(12);
        usleep(500);
    }
}

/* Reaps pid, killing it first unless it is dead already; it must have died of SIGKILL (its own
 * timer's or ours: it never exits by itself). */
static void kill_child(pid_t pid, const char *who) {
    int status;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == 0) {
        kill(pid, SIGKILL);
        r = waitpid(pid, &status, 0);
    }
    ck_assert_int_eq(r, pid);
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "%s: status %d", who, status);
}

/* Waits until pid died (its timer fired) or dir/done exists (its work is over). */
static void wait_dead_or(pid_t pid, const char *dir, const char *done, const char *who) {
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        siginfo_t info = {0};
        ck_assert_int_eq(waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT), 0);
        if (info.si_pid == pid || file_exists(dir, done)) return;
        ck_assert_msg(seconds_since(&t0) < 60, "%s neither died nor finished in 60 s", who);
        usleep(200);
    }
}

/* The tokens every round's parts left, and the round each belongs to. */
typedef struct token_log {
    char token[KILL_ROUNDS * KILL_PARTS][VS_ID_HEX];
    int round[KILL_ROUNDS * KILL_PARTS];
    int committed[KILL_ROUNDS * KILL_PARTS]; /* in how many versions */
    int n;
} token_log;

static int token_index(const token_log *tl, const vs_id *id) {
    char hex[VS_ID_HEX];
    vs_id_hex(id, hex);
    for (int i = 0; i < tl->n; i++)
        if (strcmp(tl->token[i], hex) == 0) return i;
    return -1;
}

/* Every element of rows [0, 32) of both layers in version v holds round's values (round -1: the
 * arrays do not exist yet). */
static void check_round_rows(const char *base, uint64_t v, int round) {
    for (int k = 0; k < 2; k++) {
        char spec[1024];
        snprintf(spec, sizeof spec, "%s|versioned:@%" PRIu64 "/layer%d/|zarr3:", base, v, k);
        nds_array *a = NULL;
        int rc = nds_array_open(&a, spec, NULL);
        if (round < 0) {
            ck_assert_msg(rc == NDS_ENOTFOUND, "version %" PRIu64 ": layer%d exists (rc %d)", v, k,
                          rc);
            continue;
        }
        NDS_OK(rc);
        uint16_t all[32 * 48];
        nds_box b = {2, {0, 0}, {32, 48}, {1, 1}, 0};
        NDS_OK(nds_array_read(a, &b, all, NULL));
        for (int i = 0; i < 32 * 48; i++)
            ck_assert_msg(all[i] == round_value(round, i / 48 / 8),
                          "version %" PRIu64 " layer%d row %d: %u, not round %d's %u: torn", v, k,
                          i / 48, all[i], round, round_value(round, i / 48 / 8));
        nds_array_free(a);
    }
}

static int check_visible_key(void *ctx, const char *key, uint64_t size) {
    (void)size;
    bool ok = strcmp(key, "after") == 0 || strcmp(key, "noise") == 0 ||
              strncmp(key, "layer0/", 7) == 0 || strncmp(key, "layer1/", 7) == 0;
    if (!ok) (*(int *)ctx)++;
    return 0;
}

/* Versions (from, to]: a commit of parts lists exactly one round's KILL_PARTS tokens, each token
 * in one version only, and holds that round's rows whole; other versions keep the rows as they
 * were. *round is the round the rows hold at version from (updated). */
static void check_new_versions(const char *base, token_log *tl, uint64_t from, uint64_t to,
                               int *round) {
    nds_kvstore *b = nds_kv_test_open("%s", base);
    vs_store *s;
    NDS_OK(vs_store_open(&s, b, base));
    for (uint64_t v = from + 1; v <= to; v++) {
        vs_commit c;
        NDS_OK(vs_store_commit_info(s, v, &c));
        if (c.ntokens) {
            ck_assert_uint_eq(c.ntokens, KILL_PARTS);
            int r = -1;
            for (size_t i = 0; i < c.ntokens; i++) {
                int t = token_index(tl, &c.tokens[i]);
                ck_assert_msg(t >= 0, "version %" PRIu64 " publishes a token no part wrote", v);
                ck_assert_msg(++tl->committed[t] == 1,
                              "token %s committed twice (version %" PRIu64 ")", tl->token[t], v);
                ck_assert_msg(r < 0 || r == tl->round[t], "version %" PRIu64 " mixes rounds", v);
                r = tl->round[t];
            }
            *round = r;
        }
        vs_commit_dispose(&c);
        check_round_rows(base, v, *round);
    }
    vs_store_free(s);
    nds_kvstore_free(b);
    nds_kvstore *kv = nds_kv_test_open("%s|versioned:", base);
    int strays = 0;
    NDS_OK(nds_kvstore_list(kv, "", check_visible_key, &strays));
    ck_assert_int_eq(strays, 0); /* nothing a killed process wrote shows as a key */
    nds_kvstore_free(kv);
}

/* What the kills hit. */
typedef struct kill_tally {
    int kills, prepare_before, prepare_inside, prepare_after;
    int commit_before, commit_inside, commit_after;
    int recommitted, refused_again;
} kill_tally;

/* Seconds a part spends before its prepare and in it, and a commit_prepared's (running means
 * over the rounds that let them finish). */
typedef struct kill_timing {
    double before_prepare, prepare, commit;
    int prepares, commits;
} kill_timing;

static double random_fraction(void) { return (double)(random() % 1000) / 1000.0; }

static void mean_in(double *mean, int *n, double x) {
    *mean = (*mean * *n + x) / (*n + 1);
    ++*n;
}

/* A kill: one in four at a random moment before the work (or, for the committer, as soon as it
 * could begin), the others a random time into it of up to stretch times its usual length (so some
 * land after it). */
static kill_plan plan_kill(double before, double work, double stretch) {
    if (random() % 4 == 0) return (kill_plan){KILL_AT_START, before * random_fraction()};
    return (kill_plan){KILL_IN_WORK, stretch * work * random_fraction()};
}

static bool all_tokens(const char *dir) {
    for (int p = 0; p < KILL_PARTS; p++) {
        char name[32];
        snprintf(name, sizeof name, "token%d", p);
        if (!file_exists(dir, name)) return false;
    }
    return true;
}

/* Where the part's kill landed, by its markers. */
static void tally_part(const char *dir, int p, kill_tally *k) {
    char name[32];
    snprintf(name, sizeof name, "token%d", p);
    bool after = file_exists(dir, name);
    snprintf(name, sizeof name, "preparing%d", p);
    bool inside = file_exists(dir, name);
    k->prepare_after += after;
    k->prepare_inside += inside && !after;
    k->prepare_before += !inside;
}

/* Records how long the parts' prepares took (all finished). */
static void time_prepares(const char *dir, kill_timing *tm) {
    for (int p = 0; p < KILL_PARTS; p++) {
        char name[32];
        snprintf(name, sizeof name, "preparing%d", p);
        double from = marker_time(dir, name);
        snprintf(name, sizeof name, "prepared%d", p);
        int n = tm->prepares;
        mean_in(&tm->before_prepare, &n, from);
        mean_in(&tm->prepare, &tm->prepares, marker_time(dir, name) - from);
    }
}

/* One round: KILL_PARTS preparers, a committer and an uncoordinated writer, all killed. Even rounds
 * kill the parts at random moments before or inside their prepares (the committer, waiting for
 * tokens, after); odd rounds let the parts finish and kill the committer before or inside its
 * commit. Round 0 measures. Returns the round's directory (its markers and tokens). */
static const char *kill_round(const char *base, const char *url, int round, kill_timing *tm,
                              kill_tally *k) {
    const char *dir = temp_dir();
    bool kill_parts = round % 2 == 0 && round > 0, kill_committer = round % 2 == 1;
    pid_t parts[KILL_PARTS], committer;
    kill_plan none = {KILL_AFTER, 0}, cplan = none;
    bool commit_at_once = false; /* the parent kills the committer once the tokens are there */
    if (kill_committer) {
        cplan = plan_kill(1, tm->commit, 1.6); /* commits vary more: they race */
        commit_at_once = cplan.when == KILL_AT_START;
        if (commit_at_once) cplan = none;
    }
    pid_t noise = fork();
    if (noise == 0) commit_noise(url);
    if ((committer = fork()) == 0) commit_round(url, dir, (unsigned)round, cplan);
    for (int p = 0; p < KILL_PARTS; p++) {
        kill_plan plan = kill_parts ? plan_kill(tm->before_prepare, tm->prepare, 1.3) : none;
        if ((parts[p] = fork()) == 0) prepare_round_part(base, dir, round, p, plan);
    }
    for (int p = 0; p < KILL_PARTS; p++) {
        char name[32];
        snprintf(name, sizeof name, "prepared%d", p);
        wait_dead_or(parts[p], dir, name, "a part");
    }
    if (!kill_parts) time_prepares(dir, tm);
    if (kill_parts) {
        for (int p = 0; p < KILL_PARTS; p++) {
            kill_child(parts[p], "a part");
            tally_part(dir, p, k);
        }
    }
    if (!commit_at_once && !(kill_parts && !all_tokens(dir)))
        wait_dead_or(committer, dir, "committed", "the committer");
    bool committing = file_exists(dir, "committing"), committed = file_exists(dir, "committed");
    if (committed) /* a running mean: kills in the rounds after land at a random point of it */
        mean_in(&tm->commit, &tm->commits,
                marker_time(dir, "committed") - marker_time(dir, "committing"));
    kill_child(committer, "the committer");
    if (kill_committer) {
        k->commit_after += committed;
        k->commit_inside += committing && !committed;
        k->commit_before += !committing;
    }
    if (!kill_parts) {
        for (int p = 0; p < KILL_PARTS; p++) kill_child(parts[p], "a part");
        k->prepare_after += KILL_PARTS;
    }
    kill_child(noise, "the uncoordinated writer");
    k->kills += KILL_PARTS + 2;
    return dir;
}

/* Object keys (data/ or index/) some commit or prepared set lists. */
typedef struct listed_objects {
    char (*keys)[VS_OBJECT_KEY_MAX];
    size_t n, cap;
    vs_store *s;
    int orphans, sets;
} listed_objects;

static void list_object(listed_objects *l, const vs_object_count *o) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 256;
        l->keys = realloc(l->keys, l->cap * sizeof *l->keys);
        ck_assert_ptr_nonnull(l->keys);
    }
    vs_object_key(o->kind == VS_OBJECT_DATA ? VS_DATA_PREFIX : VS_INDEX_PREFIX, &o->object,
                  l->keys[l->n++]);
}

static int list_set_objects(void *ctx, const char *key, uint64_t size) {
    (void)size;
    listed_objects *l = ctx;
    vs_prepared p;
    NDS_OK(vs_store_prepared_load(l->s, key + strlen(VS_PREPARED_PREFIX), &p)); /* whole */
    l->sets++;
    for (size_t i = 0; i < p.nobjects; i++) list_object(l, &p.objects[i]);
    vs_prepared_dispose(&p);
    return 0;
}

static int count_unlisted(void *ctx, const char *key, uint64_t size) {
    (void)size;
    listed_objects *l = ctx;
    size_t i = 0;
    while (i < l->n && strcmp(l->keys[i], key) != 0) i++;
    l->orphans += i == l->n;
    return 0;
}

/* Objects under prefix that neither a commit nor a prepared set lists: a killed process wrote
 * them in the middle of a prepare (before its set) or of a commit (before its commit object).
 * *sets: the prepared sets stored (each must load). */
static int objects_of_unfinished_work(const char *base, const char *prefix, int *sets) {
    nds_kvstore *b = nds_kv_test_open("%s", base);
    listed_objects l = {0};
    NDS_OK(vs_store_open(&l.s, b, base));
    vs_snapshot snap;
    NDS_OK(vs_store_latest(l.s, &snap));
    for (uint64_t v = 1; v <= snap.version; v++) {
        vs_commit c;
        NDS_OK(vs_store_commit_info(l.s, v, &c));
        for (size_t i = 0; i < c.nobjects; i++) list_object(&l, &c.objects[i]);
        vs_commit_dispose(&c);
    }
    NDS_OK(nds_kvstore_list(b, VS_PREPARED_PREFIX, list_set_objects, &l));
    NDS_OK(nds_kvstore_list(b, prefix, count_unlisted, &l));
    vs_store_free(l.s);
    nds_kvstore_free(b);
    free(l.keys);
    *sets = l.sets;
    return l.orphans;
}

/* Registers the tokens round's parts left in dir; true when every part left one (*tokens). */
static bool round_tokens(token_log *tl, const char *dir, int round, const char **tokens) {
    int found = 0;
    for (int p = 0; p < KILL_PARTS; p++) {
        char name[32];
        snprintf(name, sizeof name, "token%d", p);
        if (!read_marker(dir, name, tl->token[tl->n])) continue;
        tl->round[tl->n] = round;
        tokens[found++] = tl->token[tl->n++];
    }
    return found == KILL_PARTS;
}

/* A new committer after the kills: commits the round's tokens if the killed one did not publish
 * them, else is refused (a set is published once). */
static void commit_again(const char *url, const char *dir, const char **tokens, kill_tally *k) {
    nds_kvstore *kv = nds_kv_test_open("%s", url);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = nds_txn_commit_prepared(kv, tokens, KILL_PARTS, "again", NULL);
    ck_assert_msg(seconds_since(&t0) < 5.0, "committing again took %.1f s", seconds_since(&t0));
    if (rc == 0) {
        ck_assert_msg(!file_exists(dir, "committed"), "a committed round was committed again");
        k->recommitted++;
    } else {
        ck_assert_msg(rc == NDS_EINVAL && strstr(nds_error_last()->message, "already committed"),
                      "committing again: rc %d: %s", rc, nds_error_last()->message);
        k->refused_again++;
    }
    nds_kvstore_free(kv);
}

/* 44 rounds of 4 preparing processes, a committer and an uncoordinated writer racing it, all 264
 * killed with SIGKILL at random moments: inside prepares (even rounds) and inside commits (odd
 * rounds). After each round every
 * new version is whole (a commit of parts holds all of one round's parts, nothing of another, each
 * token once), the next writer goes ahead at once, and a new committer publishes the round's
 * tokens if the killed one had not (or is refused if it had). */
START_TEST(sigkilled_prepare_and_commit) {
    const char *base = file_base();
    char url[1024];
    snprintf(url, sizeof url, "%s|versioned:", base);
    static token_log tl;
    memset(&tl, 0, sizeof tl);
    kill_tally k = {0};
    kill_timing tm = {0};
    int rows_round = -1, whole_rounds = 0;
    uint64_t checked = 0;
    srandom((unsigned)getpid());
    for (int round = 0; round < KILL_ROUNDS; round++) {
        const char *dir = kill_round(base, url, round, &tm, &k);
        /* The next writer goes ahead at once: nothing of a dead process holds it up. */
        nds_kvstore *kv = nds_kv_test_open("%s", url);
        struct timespec t0;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        nds_kv_test_put(kv, "after", "x");
        ck_assert_msg(seconds_since(&t0) < 5.0, "a commit after the kills took %.1f s",
                      seconds_since(&t0));
        nds_kvstore_free(kv);
        const char *tokens[KILL_PARTS];
        if (round_tokens(&tl, dir, round, tokens)) {
            commit_again(url, dir, tokens, &k);
            whole_rounds++;
        }
        uint64_t latest = latest_version(base);
        check_new_versions(base, &tl, checked, latest, &rows_round);
        checked = latest;
    }
    /* Every token of a round whose parts all prepared is in exactly one version; the others in
     * none. */
    int committed = 0;
    for (int t = 0; t < tl.n; t++) {
        int parts = 0;
        for (int u = 0; u < tl.n; u++) parts += tl.round[u] == tl.round[t];
        ck_assert_int_eq(tl.committed[t], parts == KILL_PARTS);
        committed += tl.committed[t];
    }
    int sets;
    int data_orphans = objects_of_unfinished_work(base, VS_DATA_PREFIX, &sets);
    int index_orphans = objects_of_unfinished_work(base, VS_INDEX_PREFIX, &sets);
    int never_committed = sets - committed;
    fprintf(stderr,
            "sigkill prepare/commit: %d kills (prepare: %d before, %d inside, %d after; commit: "
            "%d before, %d inside, %d after); %d whole rounds (%d committed again, %d refused "
            "again); %d prepared sets never committed; unfinished work left %d data and %d "
            "index objects (prepare %.4f s after %.4f s, commit %.4f s)\n",
            k.kills, k.prepare_before, k.prepare_inside, k.prepare_after, k.commit_before,
            k.commit_inside, k.commit_after, whole_rounds, k.recommitted, k.refused_again,
            never_committed, data_orphans, index_orphans, tm.prepare, tm.before_prepare, tm.commit);
    ck_assert_int_ge(k.kills, 200);
    ck_assert_int_gt(k.prepare_inside, 0);
    ck_assert_int_gt(k.commit_inside, 0);
    ck_assert_int_gt(k.recommitted, 0); /* commits killed before publishing, finished by another */
    ck_assert_int_gt(k.refused_again, 0);              /* published commits are never repeated */
    ck_assert_int_gt(never_committed, 0);              /* parts of rounds a kill left incomplete */
    ck_assert_int_gt(data_orphans + index_orphans, 0); /* kills between objects of one piece */
}
END_TEST

int main(void) {
    Suite *s = suite_create("versioned");
    suite_add_tcase(s, nds_kv_conformance_tcase("versioned-memory", versioned_memory_url));
    suite_add_tcase(s, nds_kv_conformance_tcase("versioned-file", versioned_file_url));
    suite_add_tcase(s, nds_kv_conformance_tcase("versioned-lmdb", versioned_lmdb_url));
    TCase *tc = tcase_create("versioned");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, history_and_pinned_versions);
    tcase_add_test(tc, commit_is_all_or_nothing);
    tcase_add_loop_test(tc, racing_handles_lose_nothing, 0, 2);
    tcase_add_test(tc, processes_commit_without_losing_any);
    tcase_add_test(tc, corrupt_values_are_caught_block_by_block);
    tcase_add_loop_test(tc, read_into_checks_blocks_in_place, 0, 2);
    tcase_add_test(tc, corrupt_index_and_commit_are_errors);
    tcase_add_test(tc, head_hint_is_only_a_hint);
    tcase_add_test(tc, bad_specs_are_refused);
    tcase_add_test(tc, atomic_transaction_on_a_file_base);
    tcase_add_test(tc, checkpoint_recipe_from_four_processes);
    tcase_add_test(tc, prepared_parts_commit_as_one_version);
    tcase_add_test(tc, prepared_parts_merge_onto_later_writes);
    tcase_add_test(tc, sigkilled_writers_leave_whole_versions);
    tcase_add_test(tc, diff_between_versions_under_a_path);
    suite_add_tcase(s, tc);
    TCase *kills = tcase_create("prepare-kills"); /* CK_RUN_CASE=prepare-kills runs it alone */
    tcase_set_timeout(kills, 600);
    tcase_add_test(kills, sigkilled_prepare_and_commit);
    suite_add_tcase(s, kills);
    return nds_test_run(s);
}
