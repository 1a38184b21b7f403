/* The lmdb kvstore driver: the shared contract suite, then what only lmdb promises: its URL and spec
 * forms, the all-or-nothing multi-key commit (through the vtable), generations that survive reopening
 * and never repeat, automatic map growth (within this process, with other threads, and after another
 * process grew it), multi-process conditional writes, commits killed with SIGKILL, stale reader slots
 * of killed processes, zero-copy reads that outlive later writes, LMDB errors mapped to statuses, and
 * staged writes (stage / publish / discard: one write transaction per batch, each value with its own
 * condition; array writes through them). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <lmdb.h>

#include "ndstore/sys/kv_driver.h"
#include "support_check.h"
#include "support_format.h"
#include "support_kv_conformance.h"

extern const nds_kv_driver nds_kv_driver_lmdb;

/* An unconditional write of len bytes of value through the driver's vtable. */
static int lm_put(void *st, const char *key, const char *value, size_t len, nds_generation *gen) {
    static const nds_write_options none = NDS_WRITE_OPTIONS_INIT;
    nds_generation ignored;
    struct iovec one = {(void *)value, len};
    return nds_kv_driver_lmdb.write(st, key, &one, 1, &none, gen ? gen : &ignored);
}

/* ---- stores ---- */

static char *g_dirs[64];
static int g_dir_count;
static pid_t g_owner; /* only the test process removes its directories (children _exit) */

static void remove_dirs(void) {
    if (getpid() != g_owner)
        return;
    for (int i = 0; i < g_dir_count; i++) {
        nds_test_rmtree(g_dirs[i]);
        free(g_dirs[i]);
    }
    g_dir_count = 0;
}

/* A new temporary directory, removed when the (forked) test process exits. */
static const char *temp_dir(void) {
    if (g_dir_count == 0) {
        g_owner = getpid();
        atexit(remove_dirs);
    }
    ck_assert_int_lt(g_dir_count, 64);
    char *d = nds_test_tmpdir();
    ck_assert_ptr_nonnull(d);
    g_dirs[g_dir_count++] = d;
    return d;
}

/* "<new temp dir>/<name>" (malloc'd, kept until exit by the caller or leaked in a test). */
static char *new_env(const char *name) {
    char *p = NULL;
    ck_assert_int_ge(asprintf(&p, "%s/%s", temp_dir(), name), 0);
    return p;
}

/* The conformance suite's stores: URLs whose path names the environment then a prefix. */
static const char *conformance_url(void) {
    static char *urls[16];
    static int n;
    ck_assert_int_lt(n, 16);
    char *env = new_env("c.lmdb");
    ck_assert_int_ge(asprintf(&urls[n], "lmdb://%s/p/", env), 0);
    free(env);
    return urls[n++];
}

static nds_kvstore *open_store(const char *spec) {
    nds_kvstore *kv = NULL;
    NDS_OK(nds_kvstore_open(&kv, spec, NULL));
    return kv;
}

/* A JSON spec for env with extra members (e.g. ",\"map_size\":65536"). */
static char *spec_of(const char *env, const char *path, const char *extra) {
    char *s = NULL;
    ck_assert_int_ge(asprintf(&s, "{\"driver\":\"lmdb\",\"env\":\"%s\",\"path\":\"%s\"%s}", env,
                              path, extra ? extra : ""), 0);
    return s;
}

/* A new environment <temp dir>/name, its JSON spec (path and extra as for spec_of) and a handle
 * opened on that spec; store_close frees all three. */
typedef struct store {
    char *env, *spec;
    nds_kvstore *kv;
} store;

static store store_new(const char *name, const char *path, const char *extra) {
    store s = {new_env(name), NULL, NULL};
    s.spec = spec_of(s.env, path, extra);
    s.kv = open_store(s.spec);
    return s;
}

static void store_close(store *s) {
    nds_kvstore_free(s->kv);
    free(s->spec);
    free(s->env);
}

static void assert_value(nds_kvstore *kv, const char *key, const char *expected) {
    char *v = nds_kv_test_get(kv, key, NULL);
    if (!expected)
        ck_assert_msg(v == NULL, "%s: expected missing, got \"%s\"", key, v ? v : "");
    else
        ck_assert_msg(v && strcmp(v, expected) == 0, "%s: expected \"%s\", got \"%s\"", key,
                      expected, v ? v : "(missing)");
    free(v);
}

/* Asserts that key holds exactly want[0..len). */
static void assert_bytes(nds_kvstore *kv, const char *key, const uint8_t *want, size_t len) {
    nds_read_result r;
    NDS_OK(nds_kvstore_read(kv, key, NULL, &r));
    ck_assert_msg(r.state == NDS_READ_VALUE && r.value.len == len, "%s: %zu bytes, want %zu", key,
                  r.value.len, len);
    ck_assert_msg(memcmp(r.value.data, want, len) == 0, "%s: bytes differ", key);
    nds_read_result_dispose(&r);
}

/* Asserts that rc is NDS_ELIMIT with a message naming needle. */
static void assert_limit(int rc, const char *needle) {
    const char *msg = nds_error_last()->message;
    ck_assert_msg(rc == NDS_ELIMIT, "expected NDS_ELIMIT, got %d (%s)", rc, msg);
    ck_assert_msg(strstr(msg, needle) != NULL, "message \"%s\" lacks \"%s\"", msg, needle);
}

/* Waits for child pid and asserts it exited with status 0. */
static void wait_ok(pid_t pid) {
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d: status %d", (int)pid,
                  status);
}

/* Asserts the sorted "key=size" listing of prefix. */
static void assert_list(nds_kvstore *kv, const char *prefix, const char *expected) {
    char *got = nds_kv_test_list(kv, prefix);
    ck_assert_msg(strcmp(got, expected) == 0, "list \"%s\": got \"%s\", expected \"%s\"", prefix,
                  got, expected);
    free(got);
}

/* A deterministic pattern value of n bytes for (seed). */
static uint8_t *pattern(size_t n, unsigned seed) {
    uint8_t *p = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)((i * 2654435761u + seed * 40503u) >> 11);
    return p;
}

/* 1 when p lies in a file mapping of this process whose path ends in suffix. */
static bool in_mapping_of(const void *p, const char *suffix) {
    FILE *f = fopen("/proc/self/maps", "r");
    ck_assert_ptr_nonnull(f);
    char line[1024];
    bool found = false;
    uintptr_t a = (uintptr_t)p;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char path[768] = "";
        if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %767s", &lo, &hi, path) < 2)
            continue;
        size_t n = strlen(path), m = strlen(suffix);
        found = a >= lo && a < hi && n >= m && strcmp(path + n - m, suffix) == 0;
    }
    fclose(f);
    return found;
}

/* ---- URL and spec forms ---- */

START_TEST(url_names_env_then_prefix) {
    char *env = new_env("sub/dir/u.lmdb"); /* directories created on demand */
    char *url = NULL, *spec = NULL;
    ck_assert_int_ge(asprintf(&url, "lmdb://%s/arr/", env), 0);
    nds_kvstore *kv = open_store(url);
    ck_assert_str_eq(nds_kvstore_url(kv), url);
    nds_kv_test_put(kv, "c/0.0", "chunk");
    NDS_OK(nds_kvstore_spec(kv, &spec));
    json_object *j = json_tokener_parse(spec);
    ck_assert_ptr_nonnull(j);
    json_object *m;
    ck_assert(json_object_object_get_ex(j, "env", &m));
    ck_assert_str_eq(json_object_get_string(m), env);
    json_object_put(j);
    nds_free(spec);
    /* The JSON form with an env-relative path names the same stored keys; its URL is the same. */
    spec = spec_of(env, "arr/", NULL);
    nds_kvstore *rel = open_store(spec);
    ck_assert_str_eq(nds_kvstore_url(rel), url);
    assert_value(rel, "c/0.0", "chunk");
    free(spec);
    /* An env given only through an absolute path. */
    ck_assert_int_ge(asprintf(&spec, "{\"driver\":\"lmdb\",\"path\":\"%s/\"}", env), 0);
    nds_kvstore *root = open_store(spec);
    assert_list(root, "", "arr/c/0.0=5");
    free(spec);
    /* A URL ending at the environment is its root. */
    free(url);
    ck_assert_int_ge(asprintf(&url, "lmdb://%s", env), 0);
    nds_kvstore *top = open_store(url);
    ck_assert_str_eq(nds_kvstore_path(top) + strlen(nds_kvstore_path(top)) - 7, "u.lmdb/");
    assert_value(top, "arr/c/0.0", "chunk");
    nds_kvstore_free(top);
    nds_kvstore_free(root);
    nds_kvstore_free(rel);
    nds_kvstore_free(kv);
    free(url);
    free(env);
}
END_TEST

START_TEST(bad_urls_and_specs) {
    nds_kvstore *kv = NULL;
    ck_assert_int_eq(nds_kvstore_open(&kv, "lmdb:///tmp/no-env-here/x/", NULL), NDS_EINVAL);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, ".lmdb"));
    ck_assert_int_eq(nds_kvstore_open(&kv, "{\"driver\":\"lmdb\",\"path\":\"a/\"}", NULL),
                     NDS_EINVAL);
    char *env = new_env("s.lmdb");
    const char *bad[] = {",\"map_size\":1024", ",\"map_size\":\"big\"", ",\"nosync\":3",
                         ",\"max_readers\":0", ",\"max_map_size\":1048576,\"map_size\":2097152"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *spec = spec_of(env, "", bad[i]);
        ck_assert_msg(nds_kvstore_open(&kv, spec, NULL) == NDS_EINVAL, "accepted %s", spec);
        free(spec);
    }
    /* A file where the environment directory should be. */
    char *file = new_env("f.lmdb");
    FILE *f = fopen(file, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    char *spec = spec_of(file, "", NULL);
    ck_assert_int_ne(nds_kvstore_open(&kv, spec, NULL), 0);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "lmdb:"));
    free(spec);
    free(file);
    free(env);
}
END_TEST

START_TEST(lmdb_errors_are_mapped) {
    /* Not an LMDB file: MDB_INVALID becomes NDS_ECORRUPT with the MDB code as cause. */
    char *env = new_env("junk.lmdb");
    ck_assert_int_eq(mkdir(env, 0777), 0);
    char *data = NULL;
    ck_assert_int_ge(asprintf(&data, "%s/data.mdb", env), 0);
    uint8_t *junk = pattern(65536, 7);
    FILE *f = fopen(data, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(junk, 1, 65536, f), 65536);
    fclose(f);
    char *spec = spec_of(env, "", NULL);
    nds_kvstore *kv = NULL;
    ck_assert_int_eq(nds_kvstore_open(&kv, spec, NULL), NDS_ECORRUPT);
    ck_assert_int_eq(nds_error_last()->cause_kind, NDS_CAUSE_MDB);
    ck_assert_int_eq(nds_error_last()->cause, MDB_INVALID);
    free(spec);
    /* Keys LMDB cannot hold. */
    char *good = new_env("k.lmdb");
    spec = spec_of(good, "", NULL);
    kv = open_store(spec);
    char key[600];
    memset(key, 'k', sizeof key - 1);
    key[sizeof key - 1] = '\0';
    ck_assert_int_eq(nds_kvstore_write(kv, key, "v", 1, NULL, NULL), NDS_EINVAL);
    ck_assert_int_eq(nds_kvstore_write(kv, "", "v", 1, NULL, NULL), NDS_EINVAL);
    nds_read_result r;
    ck_assert_int_eq(nds_kvstore_read(kv, key, NULL, &r), NDS_EINVAL);
    assert_list(kv, key, ""); /* no key can start with it */
    nds_kvstore_free(kv);
    free(spec);
    free(good);
    free(junk);
    free(data);
    free(env);
}
END_TEST

/* ---- generations ---- */

START_TEST(generations_never_repeat) {
    store s = store_new("g.lmdb", "", NULL);
    nds_generation g1 = nds_kv_test_put(s.kv, "k", "same");
    NDS_OK(nds_kvstore_delete(s.kv, "k", NULL));
    nds_generation g2 = nds_kv_test_put(s.kv, "k", "same");
    ck_assert(!nds_generation_equal(&g1, &g2));
    nds_kvstore_free(s.kv);
    /* The counter is stored: after reopening, the generation is kept and new ones are new. */
    s.kv = open_store(s.spec);
    nds_generation now;
    free(nds_kv_test_get(s.kv, "k", &now));
    ck_assert(nds_generation_equal(&now, &g2));
    nds_generation g3 = nds_kv_test_put(s.kv, "k", "same");
    ck_assert(!nds_generation_equal(&g3, &g1) && !nds_generation_equal(&g3, &g2));
    nds_kvstore_free(s.kv);
    /* A re-created environment has a new id, so its first generations differ from the old ones. */
    nds_test_rmtree(s.env);
    s.kv = open_store(s.spec);
    nds_generation fresh = nds_kv_test_put(s.kv, "k", "same");
    ck_assert(!nds_generation_equal(&fresh, &g1));
    nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
    wo.if_equal = g1;
    ck_assert_int_eq(nds_kvstore_write(s.kv, "k", "x", 1, &wo, NULL), NDS_ECONFLICT);
    store_close(&s);
}
END_TEST

/* ---- commit through the vtable ---- */

/* A driver instance (through the vtable) on env, with extra spec members as for spec_of. */
static void *open_driver_with(const char *env, const char *extra) {
    char *spec = spec_of(env, "", extra);
    json_object *j = json_tokener_parse(spec);
    ck_assert_ptr_nonnull(j);
    void *state = NULL;
    NDS_OK(nds_kv_driver_lmdb.open(&state, j));
    json_object_put(j);
    free(spec);
    return state;
}

static void *open_driver(const char *env) {
    return open_driver_with(env, NULL);
}

static nds_kv_op op_of(const char *key, const char *value, nds_generation cond) {
    nds_kv_op op = {key, (const uint8_t *)value, value ? strlen(value) : 0, cond,
                    {NDS_GEN_NONE, {0}}};
    return op;
}

/* The value of key read through the vtable, or NULL; *gen gets its generation. */
static char *vt_get(void *state, const char *key, nds_generation *gen) {
    nds_read_options o = NDS_READ_OPTIONS_INIT;
    nds_read_result r;
    NDS_OK(nds_kv_driver_lmdb.read(state, key, &o, NULL, 0, &r));
    if (gen)
        *gen = r.generation;
    char *s = r.state == NDS_READ_VALUE ? strndup((const char *)r.value.data, r.value.len) : NULL;
    nds_read_result_dispose(&r);
    return s;
}

START_TEST(commit_all_or_nothing) {
    char *env = new_env("t.lmdb");
    void *st = open_driver(env);
    const nds_generation none = {NDS_GEN_NONE, {0}}, absent = {NDS_GEN_ABSENT, {0}};
    nds_kv_op first[] = {op_of("a", "1", absent), op_of("b", "2", absent),
                         op_of("c", "3", none)};
    NDS_OK(nds_kv_driver_lmdb.commit(st, first, 3));
    nds_generation ga, gb, gc;
    char *v = vt_get(st, "a", &ga);
    ck_assert_str_eq(v, "1");
    free(v);
    free(vt_get(st, "b", &gb));
    free(vt_get(st, "c", &gc));
    ck_assert(nds_generation_equal(&ga, &first[0].new_generation));
    ck_assert(nds_generation_equal(&gc, &first[2].new_generation));
    /* The second op's condition fails: nothing is applied, not even the first op. */
    nds_kv_op second[] = {op_of("a", "10", ga), op_of("b", "20", ga), op_of("d", "40", absent),
                          op_of("c", NULL, gc)};
    ck_assert_int_eq(nds_kv_driver_lmdb.commit(st, second, 4), NDS_ECONFLICT);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, " b "));
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(second[i].new_generation.kind, NDS_GEN_NONE);
    nds_generation now;
    v = vt_get(st, "a", &now);
    ck_assert_str_eq(v, "1");
    ck_assert(nds_generation_equal(&now, &ga));
    free(v);
    ck_assert_ptr_null(vt_get(st, "d", NULL));
    v = vt_get(st, "c", NULL);
    ck_assert_str_eq(v, "3");
    free(v);
    /* With the right conditions it all lands, deletes included; a handle on the env sees it. */
    second[1].if_equal = gb;
    NDS_OK(nds_kv_driver_lmdb.commit(st, second, 4));
    ck_assert_int_eq(second[3].new_generation.kind, NDS_GEN_ABSENT);
    char *spec = spec_of(env, "", NULL);
    nds_kvstore *kv = open_store(spec);
    assert_list(kv, "", "a=2,b=2,d=2");
    nds_kvstore_free(kv);
    /* A key twice, or an empty commit. */
    nds_kv_op twice[] = {op_of("x", "1", none), op_of("x", "2", none)};
    ck_assert_int_eq(nds_kv_driver_lmdb.commit(st, twice, 2), NDS_EINVAL);
    ck_assert_ptr_null(vt_get(st, "x", NULL));
    NDS_OK(nds_kv_driver_lmdb.commit(st, NULL, 0));
    nds_kv_driver_lmdb.close(st);
    free(spec);
    free(env);
}
END_TEST

/* ---- map growth ---- */

START_TEST(map_grows_from_tiny) {
    store s = store_new("m.lmdb", "", ",\"map_size\":65536,\"nosync\":true");
    enum { SMALL = 40, MB = 1 << 20 };
    for (unsigned i = 0; i < SMALL; i++) { /* 40 x 1 MB, then one 10 MB value: 50 MB */
        uint8_t *p = pattern(MB, i);
        char key[16];
        snprintf(key, sizeof key, "v/%02u", i);
        NDS_OK(nds_kvstore_write(s.kv, key, p, MB, NULL, NULL));
        free(p);
    }
    uint8_t *big = pattern(10 * MB, 99);
    NDS_OK(nds_kvstore_write(s.kv, "big", big, 10 * MB, NULL, NULL));
    nds_kvstore_free(s.kv);
    s.kv = open_store(s.spec); /* reopened: data and map both persist */
    for (unsigned i = 0; i < SMALL; i++) {
        uint8_t *p = pattern(MB, i);
        char key[16];
        snprintf(key, sizeof key, "v/%02u", i);
        assert_bytes(s.kv, key, p, MB);
        free(p);
    }
    assert_bytes(s.kv, "big", big, 10 * MB);
    free(big);
    store_close(&s);
}
END_TEST

START_TEST(map_growth_stops_at_max) {
    store s = store_new("x.lmdb", "", ",\"map_size\":262144,\"max_map_size\":1048576");
    uint8_t *p = pattern(2 << 20, 1);
    assert_limit(nds_kvstore_write(s.kv, "too/big", p, 2 << 20, NULL, NULL), "max_map_size");
    assert_value(s.kv, "too/big", NULL);
    NDS_OK(nds_kvstore_write(s.kv, "fits", p, 300000, NULL, NULL)); /* still usable */
    free(p);
    store_close(&s);
}
END_TEST

/* Threads write growing data while others hold and release zero-copy reads. */
typedef struct grow_job {
    nds_kvstore *kv;
    int id;
    atomic_int *stop;
    const uint8_t *seed; /* what readers expect */
    int rc;
} grow_job;

static void *grow_writer(void *arg) {
    grow_job *j = arg;
    for (int i = 0; i < 12 && j->rc == 0; i++) {
        uint8_t *p = pattern(512 << 10, (unsigned)(j->id * 100 + i));
        char key[32];
        snprintf(key, sizeof key, "w%d/%02d", j->id, i);
        j->rc = nds_kvstore_write(j->kv, key, p, 512 << 10, NULL, NULL);
        free(p);
    }
    return NULL;
}

static void *grow_reader(void *arg) {
    grow_job *j = arg;
    while (!atomic_load(j->stop) && j->rc == 0) {
        nds_read_result r;
        j->rc = nds_kvstore_read(j->kv, "seed", NULL, &r);
        if (j->rc == 0 && (r.state != NDS_READ_VALUE || r.value.len != 100000))
            j->rc = -100;
        usleep(200); /* hold the pinned bytes a moment, then check them: a remap would unmap them */
        if (j->rc == 0 && memcmp(r.value.data, j->seed, 100000) != 0)
            j->rc = -101;
        nds_read_result_dispose(&r);
    }
    return NULL;
}

START_TEST(map_grows_under_concurrent_readers) {
    store s = store_new("c.lmdb", "", ",\"map_size\":262144,\"nosync\":true");
    uint8_t *seed = pattern(100000, 5);
    NDS_OK(nds_kvstore_write(s.kv, "seed", seed, 100000, NULL, NULL));
    atomic_int stop = 0;
    enum { W = 3, R = 3 };
    grow_job jobs[W + R];
    pthread_t tid[W + R];
    for (int t = 0; t < W + R; t++) {
        jobs[t] = (grow_job){s.kv, t, &stop, seed, 0};
        ck_assert_int_eq(pthread_create(&tid[t], NULL, t < W ? grow_writer : grow_reader, &jobs[t]),
                         0);
    }
    for (int t = 0; t < W; t++)
        pthread_join(tid[t], NULL);
    atomic_store(&stop, 1);
    for (int t = W; t < W + R; t++)
        pthread_join(tid[t], NULL);
    for (int t = 0; t < W + R; t++)
        ck_assert_msg(jobs[t].rc == 0, "thread %d: %d (%s)", t, jobs[t].rc,
                      nds_error_last()->message);
    char *all = nds_kv_test_list(s.kv, "w1/");
    ck_assert_ptr_nonnull(strstr(all, "w1/11=524288"));
    free(all);
    free(seed);
    store_close(&s);
}
END_TEST

/* A read result this thread still holds pins the map: growth waits, then fails with a clear error. */
START_TEST(own_pinned_read_blocks_growth) {
    store s = store_new("p.lmdb", "", ",\"map_size\":262144,\"nosync\":true");
    uint8_t *p = pattern(1 << 20, 3);
    NDS_OK(nds_kvstore_write(s.kv, "held", p, 100000, NULL, NULL));
    nds_read_result r;
    NDS_OK(nds_kvstore_read(s.kv, "held", NULL, &r));
    assert_limit(nds_kvstore_write(s.kv, "more", p, 1 << 20, NULL, NULL), "dispose");
    ck_assert(memcmp(r.value.data, p, 100000) == 0);
    nds_read_result_dispose(&r);
    NDS_OK(nds_kvstore_write(s.kv, "more", p, 1 << 20, NULL, NULL));
    free(p);
    store_close(&s);
}
END_TEST

/* Another process grows the map and fills it; this process adopts the new size on its next read. */
START_TEST(map_grown_by_another_process) {
    store s = store_new("o.lmdb", "", ",\"map_size\":262144,\"nosync\":true");
    nds_kv_test_put(s.kv, "mine", "here");
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        nds_kvstore *c = NULL;
        int rc = nds_kvstore_open(&c, s.spec, NULL);
        uint8_t *p = pattern(8 << 20, 9);
        for (int i = 0; rc == 0 && i < 4; i++) {
            char key[16];
            snprintf(key, sizeof key, "theirs/%d", i);
            rc = nds_kvstore_write(c, key, p, 8 << 20, NULL, NULL);
        }
        _exit(rc == 0 ? 0 : 1);
    }
    wait_ok(pid);
    uint8_t *p = pattern(8 << 20, 9);
    assert_bytes(s.kv, "theirs/3", p, 8 << 20);
    nds_kv_test_put(s.kv, "mine", "still");
    assert_value(s.kv, "mine", "still");
    free(p);
    store_close(&s);
}
END_TEST

/* ---- processes ---- */

/* In a forked child: n increments of "counter" on a store of its own. */
static int child_increments(const char *url, int n) {
    nds_kvstore *kv = NULL;
    if (nds_kvstore_open(&kv, url, NULL) != 0)
        return 2;
    for (int i = 0; i < n; i++)
        nds_kv_test_increment(kv, "counter");
    nds_kvstore_free(kv);
    return 0;
}

/* 4 processes x 200 conditional increments of one key: none lost. Without fsyncs ("nosync"): what
 * is tested is LMDB's writer lock and our conditions across processes; 1600 fsyncs only made it
 * slow (20-40 s under ASan). It used to hang now and then under ASan: a child forked while the
 * parent's new pool threads were still starting inherited ASan's allocator lock held (lib/pool.c now
 * returns only once its workers wait). */
START_TEST(multiprocess_counter) {
    enum { PROCS = 4, EACH = 200 };
    char *env = new_env("mp.lmdb");
    char *url = spec_of(env, "n/", ",\"nosync\":true");
    /* The parent has the environment open across fork(): children must open their own. */
    nds_kvstore *kv = open_store(url);
    nds_kv_test_put(kv, "other", "x");
    pid_t pids[PROCS];
    for (int p = 0; p < PROCS; p++) {
        pids[p] = fork();
        ck_assert_int_ge(pids[p], 0);
        if (pids[p] == 0)
            _exit(child_increments(url, EACH));
    }
    for (int p = 0; p < PROCS; p++)
        wait_ok(pids[p]);
    assert_value(kv, "counter", "800");
    nds_kvstore_free(kv);
    free(url);
    free(env);
}
END_TEST

START_TEST(handle_inherited_through_fork_is_refused) {
    store s = store_new("f.lmdb", "", NULL);
    nds_kv_test_put(s.kv, "k", "v");
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        nds_read_result r;
        int rc = nds_kvstore_read(s.kv, "k", NULL, &r);
        int rc2 = nds_kvstore_write(s.kv, "k", "w", 1, NULL, NULL);
        _exit(rc == NDS_EUNSUPPORTED && rc2 == NDS_EUNSUPPORTED ? 0 : 1);
    }
    wait_ok(pid);
    assert_value(s.kv, "k", "v");
    store_close(&s);
}
END_TEST

enum { CRASH_KEYS = 16, CRASH_VALUE = 24 << 10 };

/* A value of a crash round: "<round>:" then filler of CRASH_VALUE bytes. */
static uint8_t *crash_value(int round) {
    uint8_t *p = pattern(CRASH_VALUE, (unsigned)round);
    int n = snprintf((char *)p, 16, "%08d:", round);
    (void)n;
    return p;
}

/* Child: commits all CRASH_KEYS at round 1, 2, ... (each conditional on what it read) until killed;
 * signals the parent through fd after its first commit. */
static void crash_committer(const char *env, int fd) {
    void *st = NULL;
    char *spec = spec_of(env, "", NULL);
    json_object *j = json_tokener_parse(spec);
    if (!j || nds_kv_driver_lmdb.open(&st, j) != 0)
        _exit(2);
    char keys[CRASH_KEYS][16];
    for (int round = 1;; round++) {
        nds_kv_op ops[CRASH_KEYS];
        uint8_t *v = crash_value(round);
        for (int k = 0; k < CRASH_KEYS; k++) {
            snprintf(keys[k], sizeof keys[k], "k/%02d", k);
            nds_read_options o = NDS_READ_OPTIONS_INIT;
            nds_read_result r;
            if (nds_kv_driver_lmdb.read(st, keys[k], &o, NULL, 0, &r) != 0)
                _exit(3);
            ops[k] = (nds_kv_op){keys[k], v, CRASH_VALUE, r.generation, {NDS_GEN_NONE, {0}}};
            nds_read_result_dispose(&r);
        }
        if (nds_kv_driver_lmdb.commit(st, ops, CRASH_KEYS) != 0)
            _exit(4);
        free(v);
        if (round == 1 && write(fd, "x", 1) != 1)
            _exit(5);
    }
}

/* Every key holds the same round (or none does); returns it. */
static int check_crash_state(void *st) {
    int round = -1;
    for (int k = 0; k < CRASH_KEYS; k++) {
        char key[16];
        snprintf(key, sizeof key, "k/%02d", k);
        nds_read_options o = NDS_READ_OPTIONS_INIT;
        nds_read_result r;
        NDS_OK(nds_kv_driver_lmdb.read(st, key, &o, NULL, 0, &r));
        ck_assert_int_eq(r.state, NDS_READ_VALUE);
        ck_assert_uint_eq(r.value.len, CRASH_VALUE);
        int got = atoi((const char *)r.value.data);
        uint8_t *want = crash_value(got);
        ck_assert_msg(memcmp(r.value.data, want, CRASH_VALUE) == 0, "key %d torn", k);
        free(want);
        nds_read_result_dispose(&r);
        if (round < 0)
            round = got;
        ck_assert_msg(got == round, "key %d at round %d, key 0 at round %d", k, got, round);
    }
    return round;
}

START_TEST(sigkill_during_commits) {
    char *env = new_env("k.lmdb");
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    void *st = NULL;
    for (int kill_no = 0; kill_no < 10; kill_no++) {
        int fds[2];
        ck_assert_int_eq(pipe(fds), 0);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            close(fds[0]);
            crash_committer(env, fds[1]);
        }
        close(fds[1]);
        char c;
        ck_assert_int_eq(read(fds[0], &c, 1), 1); /* one commit done */
        close(fds[0]);
        usleep((useconds_t)(rand() % 40000));
        ck_assert_int_eq(kill(pid, SIGKILL), 0);
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFSIGNALED(status), "committer exited with %d", status);
        if (!st)
            st = open_driver(env);
        int round = check_crash_state(st);
        ck_assert_int_ge(round, 1);
        /* The dead writer's lock and reader slots do not block the next commit. */
        nds_kv_op op = op_of("after", "crash", (nds_generation){NDS_GEN_NONE, {0}});
        NDS_OK(nds_kv_driver_lmdb.commit(st, &op, 1));
    }
    nds_kv_driver_lmdb.close(st);
    /* A fresh process opens the environment and finds it consistent. */
    pid_t pid = fork();
    if (pid == 0) {
        void *fresh = open_driver(env);
        check_crash_state(fresh);
        nds_kv_driver_lmdb.close(fresh);
        _exit(0);
    }
    wait_ok(pid);
    free(env);
}
END_TEST

/* Child: holds as many zero-copy reads as it can get, reports the count, waits to be killed. */
static void reader_hog(const char *spec, int fd) {
    nds_kvstore *kv = NULL;
    if (nds_kvstore_open(&kv, spec, NULL) != 0)
        _exit(2);
    nds_read_result r[64];
    unsigned char n = 0;
    while (n < 64 && nds_kvstore_read(kv, "big", NULL, &r[n]) == 0)
        n++;
    if (nds_error_last()->code != NDS_ELIMIT || write(fd, &n, 1) != 1)
        _exit(3);
    pause();
    _exit(0);
}

START_TEST(stale_reader_slots_are_cleared) {
    store s = store_new("r.lmdb", "", ",\"max_readers\":4");
    uint8_t *p = pattern(50000, 2);
    NDS_OK(nds_kvstore_write(s.kv, "big", p, 50000, NULL, NULL));
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        reader_hog(s.spec, fds[1]);
    close(fds[1]); /* a child that dies before reporting gives EOF, not a hang */
    unsigned char held = 0;
    ck_assert_int_eq(read(fds[0], &held, 1), 1);
    ck_assert_uint_ge(held, 4);
    /* Every slot is taken by a live process: a read waits, then fails. */
    nds_read_result r[64];
    assert_limit(nds_kvstore_read(s.kv, "big", NULL, &r[0]), "max_readers");
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
    /* Its slots are reclaimed (mdb_reader_check on MDB_READERS_FULL): all of them are ours now. */
    for (unsigned i = 0; i < held; i++) {
        NDS_OK(nds_kvstore_read(s.kv, "big", NULL, &r[i]));
        ck_assert(memcmp(r[i].value.data, p, 50000) == 0);
    }
    for (unsigned i = 0; i < held; i++)
        nds_read_result_dispose(&r[i]);
    free(p);
    store_close(&s);
}
END_TEST

/* ---- zero-copy reads ---- */

START_TEST(zero_copy_read_outlives_writes) {
    store s = store_new("z.lmdb", "d/", ",\"nosync\":true");
    enum { N = 1 << 20 };
    uint8_t *orig = pattern(N, 11);
    NDS_OK(nds_kvstore_write(s.kv, "v", orig, N, NULL, NULL));
    nds_kv_test_put(s.kv, "small", "tiny");
    nds_read_result big, small, range;
    NDS_OK(nds_kvstore_read(s.kv, "v", NULL, &big));
    NDS_OK(nds_kvstore_read(s.kv, "small", NULL, &small));
    nds_read_options o = NDS_READ_OPTIONS_INIT;
    o.byte_start = 4096;
    o.byte_length = 65536;
    NDS_OK(nds_kvstore_read(s.kv, "v", &o, &range));
    /* Large values point into the map; small ones are copied. */
    ck_assert(in_mapping_of(big.value.data, "/data.mdb"));
    ck_assert(in_mapping_of(range.value.data, "/data.mdb"));
    ck_assert(!in_mapping_of(small.value.data, "/data.mdb"));
    ck_assert_ptr_eq(range.value.data, big.value.data + 4096);
    /* Overwrite, delete, churn pages and close the handle: the snapshot stays intact. */
    for (unsigned i = 0; i < 10; i++) {
        uint8_t *other = pattern(N, 100 + i);
        NDS_OK(nds_kvstore_write(s.kv, "v", other, N, NULL, NULL));
        NDS_OK(nds_kvstore_write(s.kv, "churn", other, N, NULL, NULL));
        free(other);
    }
    NDS_OK(nds_kvstore_delete(s.kv, "v", NULL));
    NDS_OK(nds_kvstore_delete_range(s.kv, "", ""));
    nds_kvstore_free(s.kv);
    ck_assert_uint_eq(big.value.len, N);
    ck_assert(memcmp(big.value.data, orig, N) == 0);
    ck_assert(memcmp(range.value.data, orig + 4096, 65536) == 0);
    ck_assert(memcmp(small.value.data, "tiny", 4) == 0);
    nds_read_result_dispose(&range);
    nds_read_result_dispose(&small);
    nds_read_result_dispose(&big); /* the last reference: closes the environment */
    s.kv = open_store(s.spec);
    assert_value(s.kv, "v", NULL);
    free(orig);
    store_close(&s);
}
END_TEST

/* ---- key mapping ---- */

START_TEST(env_relative_ranges) {
    char *env = new_env("d.lmdb");
    char *url = NULL, *spec = spec_of(env, "", NULL);
    ck_assert_int_ge(asprintf(&url, "lmdb://%s/", env), 0);
    nds_kvstore *abs = open_store(url), *rel = open_store(spec);
    const char *keys[] = {"a/1", "a/2", "b/1", "c"};
    for (int i = 0; i < 4; i++)
        nds_kv_test_put(abs, keys[i], "v");
    assert_list(rel, "", "a/1=1,a/2=1,b/1=1,c=1");
    assert_list(abs, "a/", "a/1=1,a/2=1");
    NDS_OK(nds_kvstore_delete_range(abs, "a/2", "c")); /* both bounds env-relative */
    assert_list(rel, "", "a/1=1,c=1");
    NDS_OK(nds_kvstore_delete_range(abs, "", "")); /* the whole env: end beyond every key */
    assert_list(rel, "", "");
    nds_kvstore_free(abs);
    nds_kvstore_free(rel);
    free(url);
    free(spec);
    free(env);
}
END_TEST

START_TEST(list_spans_batches) {
    store s = store_new("l.lmdb", "", ",\"nosync\":true");
    void *st = open_driver(s.env);
    enum { N = 2500 };
    nds_kv_op *ops = calloc(N, sizeof *ops);
    char (*keys)[16] = calloc(N, 16);
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], 16, "l/%05d", i);
        ops[i] = op_of(keys[i], "v", (nds_generation){NDS_GEN_ABSENT, {0}});
    }
    NDS_OK(nds_kv_driver_lmdb.commit(st, ops, N));
    nds_kv_test_put(s.kv, "l0", "after the prefix");
    char *all = nds_kv_test_list(s.kv, "l/");
    size_t entries = 1;
    for (char *c = all; *c; c++)
        entries += *c == ',';
    ck_assert_uint_eq(entries, N);
    ck_assert_ptr_nonnull(strstr(all, "l/01023=1,l/01024=1,l/01025=1"));
    ck_assert_ptr_nonnull(strstr(all, "l/02499=1"));
    free(all);
    nds_kv_driver_lmdb.close(st);
    free(ops);
    free(keys);
    store_close(&s);
}
END_TEST

/* ---- staged writes: stage, then publish a batch in one write transaction ---- */

static const nds_generation g_none = {NDS_GEN_NONE, {0}}, g_absent = {NDS_GEN_ABSENT, {0}};

/* The counter part of an lmdb generation ("<n>.<env id>"). */
static unsigned long long gen_number(const nds_generation *g) {
    ck_assert_int_eq(g->kind, NDS_GEN_VALUE);
    return strtoull(g->value, NULL, 10);
}

static nds_kv_staged *stage_of(void *st, const char *key, const void *data, size_t len) {
    nds_kv_staged *t = NULL;
    NDS_OK(nds_kv_driver_lmdb.stage(st, key, data, len, &t));
    ck_assert_ptr_nonnull(t);
    return t;
}

/* Stages keys[i] = values[i] (strings) and publishes them with conditions conds[i].
 * @return publish's status; res[] gets the outcomes */
static int publish_strings(void *st, const char *const *keys, const char *const *values,
                           const nds_generation *conds, size_t n, nds_kv_publish *res) {
    nds_kv_staged *staged[16];
    ck_assert_uint_le(n, 16);
    for (size_t i = 0; i < n; i++) {
        staged[i] = stage_of(st, keys[i], values[i], strlen(values[i]));
        res[i] = (nds_kv_publish){conds[i], g_none, -1};
    }
    return nds_kv_driver_lmdb.publish(st, staged, res, n);
}

/* Asserts key holds value (NULL: missing) with generation gen (when not NULL). */
static void assert_vt(void *st, const char *key, const char *value, const nds_generation *gen) {
    nds_generation now;
    char *v = vt_get(st, key, &now);
    if (!value)
        ck_assert_msg(v == NULL, "%s: expected missing, got \"%s\"", key, v ? v : "");
    else
        ck_assert_msg(v && strcmp(v, value) == 0, "%s: expected \"%s\", got \"%s\"", key, value,
                      v ? v : "(missing)");
    if (gen)
        ck_assert_msg(nds_generation_equal(&now, gen), "%s: generation %s, want %s", key,
                      now.value, gen->value);
    free(v);
}

/* Many values, small and large (zero-copy reads), staged then published at once: nothing shows
 * before the publish; after it every value reads back with the generation publish returned, the
 * generations taken in order. The 64 KiB map must grow during the publish, which then starts over
 * and still lands every value once. */
START_TEST(stage_then_publish_many) {
    enum { N = 100 };
    char *env = new_env("s.lmdb");
    void *st = open_driver_with(env, ",\"map_size\":65536");
    store view = {NULL, spec_of(env, "", NULL), NULL};
    view.kv = open_store(view.spec);
    nds_kv_staged *staged[N];
    nds_kv_publish res[N];
    uint8_t *vals[N];
    char keys[N][16];
    for (unsigned i = 0; i < N; i++) {
        size_t len = i % 2 ? 9000 : 10 + i;
        vals[i] = pattern(len, i);
        snprintf(keys[i], sizeof keys[i], "s/%03u", i);
        staged[i] = stage_of(st, keys[i], vals[i], len);
        res[i] = (nds_kv_publish){g_none, g_none, -1};
    }
    assert_list(view.kv, "", ""); /* staged is not stored */
    ck_assert_ptr_null(vt_get(st, keys[0], NULL));
    NDS_OK(nds_kv_driver_lmdb.publish(st, staged, res, N));
    unsigned long long prev = 0;
    for (unsigned i = 0; i < N; i++) {
        ck_assert_int_eq(res[i].status, 0);
        ck_assert_uint_gt(gen_number(&res[i].new_generation), prev); /* applied in order */
        prev = gen_number(&res[i].new_generation);
        nds_read_result r;
        NDS_OK(nds_kvstore_read(view.kv, keys[i], NULL, &r));
        ck_assert(nds_generation_equal(&r.generation, &res[i].new_generation));
        nds_read_result_dispose(&r);
        assert_bytes(view.kv, keys[i], vals[i], i % 2 ? 9000 : 10 + i);
        free(vals[i]);
    }
    store_close(&view);
    nds_kv_driver_lmdb.close(st);
    free(env);
}
END_TEST

/* Each value keeps its own condition, checked in order as write() would: a match, a stale
 * generation, unconditional, must-not-exist on a missing and on an existing key, the same key
 * twice (the second sees the first), another key's generation. Only the failed ones are skipped. */
START_TEST(publish_checks_each_condition) {
    char *env = new_env("c.lmdb");
    void *st = open_driver(env);
    nds_generation ga, gb0, gb1, ge;
    NDS_OK(lm_put(st, "a", "a0", 2, &ga));
    NDS_OK(lm_put(st, "b", "b0", 2, &gb0));
    NDS_OK(lm_put(st, "b", "b1", 2, &gb1));
    NDS_OK(lm_put(st, "e", "e0", 2, &ge));
    const char *keys[] = {"a", "b", "c", "d", "e", "x", "x", "f"};
    const char *vals[] = {"a1", "b2", "c1", "d1", "e1", "x1", "x2", "f1"};
    const nds_generation conds[] = {ga, gb0, g_none, g_absent, g_absent, g_absent, g_absent, ga};
    const int want[] = {0, NDS_ECONFLICT, 0, 0, NDS_ECONFLICT, 0, NDS_ECONFLICT, NDS_ECONFLICT};
    nds_kv_publish res[8];
    NDS_OK(publish_strings(st, keys, vals, conds, 8, res));
    for (int i = 0; i < 8; i++) {
        ck_assert_msg(res[i].status == want[i], "value %d: status %d, want %d", i, res[i].status,
                      want[i]);
        ck_assert_int_eq(res[i].new_generation.kind, want[i] ? NDS_GEN_NONE : NDS_GEN_VALUE);
    }
    assert_vt(st, "a", "a1", &res[0].new_generation);
    assert_vt(st, "b", "b1", &gb1); /* stale: left as it was */
    assert_vt(st, "c", "c1", &res[2].new_generation);
    assert_vt(st, "d", "d1", &res[3].new_generation);
    assert_vt(st, "e", "e0", &ge);
    assert_vt(st, "x", "x1", &res[5].new_generation);
    assert_vt(st, "f", NULL, NULL);
    nds_kv_driver_lmdb.close(st);
    free(env);
}
END_TEST

/* A discarded value never reaches the store: not its key, not an overwrite, not the counter. */
START_TEST(discard_leaves_nothing) {
    char *env = new_env("d.lmdb");
    void *st = open_driver(env);
    nds_generation g1, g3;
    NDS_OK(lm_put(st, "k1", "one", 3, &g1));
    nds_kv_driver_lmdb.discard(st, stage_of(st, "k2", "two", 3));
    nds_kv_driver_lmdb.discard(st, stage_of(st, "k1", "new", 3));
    NDS_OK(lm_put(st, "k3", "three", 5, &g3));
    assert_vt(st, "k1", "one", &g1);
    assert_vt(st, "k2", NULL, NULL);
    ck_assert_uint_eq(gen_number(&g3), gen_number(&g1) + 1);
    nds_kv_driver_lmdb.close(st);
    free(env);
}
END_TEST

/* A batch that cannot commit (the map is at max_map_size) applies nothing: every value but the
 * conflicted one gets the error, publish names the store, and the store stays usable. */
START_TEST(failed_publish_applies_nothing) {
    char *env = new_env("f.lmdb");
    void *st = open_driver_with(env, ",\"map_size\":65536,\"max_map_size\":65536");
    NDS_OK(lm_put(st, "keep", "k", 1, NULL));
    uint8_t *big = pattern(40000, 3);
    nds_kv_staged *staged[4] = {stage_of(st, "small", "s", 1), stage_of(st, "keep", "x", 1),
                                stage_of(st, "big1", big, 40000), stage_of(st, "big2", big, 40000)};
    nds_kv_publish res[4];
    for (int i = 0; i < 4; i++)
        res[i] = (nds_kv_publish){i == 1 ? g_absent : g_none, g_none, -1};
    assert_limit(nds_kv_driver_lmdb.publish(st, staged, res, 4), "f.lmdb");
    const int want[] = {NDS_ELIMIT, NDS_ECONFLICT, NDS_ELIMIT, NDS_ELIMIT};
    for (int i = 0; i < 4; i++) {
        ck_assert_msg(res[i].status == want[i], "value %d: status %d", i, res[i].status);
        ck_assert_int_eq(res[i].new_generation.kind, NDS_GEN_NONE);
    }
    assert_vt(st, "small", NULL, NULL);
    assert_vt(st, "big1", NULL, NULL);
    assert_vt(st, "keep", "k", NULL);
    const char *keys[] = {"small"}, *vals[] = {"s"};
    nds_kv_publish ok;
    NDS_OK(publish_strings(st, keys, vals, &g_none, 1, &ok));
    assert_vt(st, "small", "s", &ok.new_generation);
    free(big);
    nds_kv_driver_lmdb.close(st);
    free(env);
}
END_TEST

/* The id of env's last committed write transaction, read in a child with its own MDB_env (a second
 * one in this process would drop the first one's locks when closed). */
static unsigned long long last_txnid(const char *env) {
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        MDB_env *e = NULL;
        MDB_envinfo info;
        unsigned long long id = 0;
        if (mdb_env_create(&e) == 0 && mdb_env_set_maxdbs(e, 4) == 0 &&
            mdb_env_open(e, env, MDB_RDONLY, 0) == 0 && mdb_env_info(e, &info) == 0)
            id = info.me_last_txnid;
        _exit(write(fds[1], &id, sizeof id) == (ssize_t)sizeof id && id ? 0 : 1);
    }
    close(fds[1]);
    unsigned long long id = 0;
    ck_assert_int_eq(read(fds[0], &id, sizeof id), (ssize_t)sizeof id);
    close(fds[0]);
    wait_ok(pid);
    return id;
}

/* A zarr array write of 100 chunks goes through stage/publish: a couple of write transactions
 * (batches of up to 64 chunks), not one per chunk, and the array reads back as written. */
START_TEST(array_write_publishes_in_batches) {
    char *env = new_env("z.lmdb");
    nds_array *a;
    NDS_OK(open_spec(&a, "{\"driver\":\"zarr\",\"kvstore\":\"lmdb://%s/arr/\",\"metadata\":"
                         "{\"shape\":[100,100],\"chunks\":[10,10],\"dtype\":\"<u2\","
                         "\"compressor\":null},\"create\":true}", env));
    uint16_t *in = malloc(100 * 100 * sizeof *in), *out = calloc(100 * 100, sizeof *out);
    ck_assert(in && out);
    for (int i = 0; i < 100 * 100; i++)
        in[i] = (uint16_t)(i * 7 + 1);
    unsigned long long before = last_txnid(env);
    write_all(a, in);
    unsigned long long txns = last_txnid(env) - before;
    ck_assert_msg(txns >= 2 && txns <= 4, "100 chunks took %llu write transactions", txns);
    read_all(a, out);
    ck_assert(memcmp(in, out, 100 * 100 * sizeof *in) == 0);
    nds_array_free(a);
    free(in);
    free(out);
    free(env);
}
END_TEST

/* Batches of staged lmdb values are also bounded by bytes (the driver stages in memory): 24
 * uncompressed chunks of 1 MiB take at least three publishes of at most 8 MiB, not one of 24. */
START_TEST(array_write_batches_are_bounded_by_bytes) {
    char *env = new_env("b.lmdb");
    nds_array *a;
    NDS_OK(open_spec(&a, "{\"driver\":\"zarr\",\"kvstore\":\"lmdb://%s/arr/\",\"metadata\":"
                         "{\"shape\":[24,1024,1024],\"chunks\":[1,1024,1024],\"dtype\":\"|u1\","
                         "\"compressor\":null},\"create\":true}", env));
    size_t n = (size_t)24 << 20;
    uint8_t *in = malloc(n), *out = malloc(n);
    ck_assert(in && out);
    for (size_t i = 0; i < n; i++) in[i] = (uint8_t)(i * 7 + i / 4093 + 1);
    unsigned long long before = last_txnid(env);
    write_all(a, in);
    unsigned long long txns = last_txnid(env) - before;
    ck_assert_msg(txns >= 3 && txns <= 12, "24 chunks of 1 MiB took %llu write transactions", txns);
    read_all(a, out);
    ck_assert(memcmp(in, out, n) == 0);
    nds_array_free(a);
    free(in);
    free(out);
    free(env);
}
END_TEST

/* "lmdbrace": the lmdb driver, except that a competitor (g_race, one shot) writes right before the
 * next publish, and publish's outcomes are counted. */
static void (*g_race)(void);
static int g_race_conflicts;
static nds_array *g_rival;

static int race_publish(void *st, nds_kv_staged **staged, nds_kv_publish *res, size_t n) {
    void (*compete)(void) = g_race;
    g_race = NULL;
    if (compete)
        compete();
    int rc = nds_kv_driver_lmdb.publish(st, staged, res, n);
    for (size_t i = 0; i < n; i++)
        g_race_conflicts += res[i].status == NDS_ECONFLICT;
    return rc;
}

static void race_register(void) {
    static nds_kv_driver d;
    d = nds_kv_driver_lmdb;
    d.name = "lmdbrace";
    d.url_scheme = "lmdbrace";
    d.publish = race_publish;
    NDS_OK(nds_kv_driver_register(&d));
}

/* The rival writes the second half of the chunk while our batch waits to publish. */
static void rival_writes_second_half(void) { write_twos_to_second_half(g_rival); }

/* Our staged chunk was merged with the old value; the rival changed it before the publish. The
 * publish must refuse our value (ECONFLICT), so the core re-reads and re-merges: both halves
 * survive. A publish that ignored the condition would lose the rival's half. */
START_TEST(array_write_conflict_in_publish_is_redone) {
    race_register();
    char *env = new_env("r.lmdb");
    nds_array *a;
    NDS_OK(open_spec(&a, "{\"driver\":\"zarr\",\"kvstore\":\"lmdbrace://%s/a/\",\"metadata\":"
                         "{\"shape\":[8],\"chunks\":[8],\"dtype\":\"<u2\",\"compressor\":null},"
                         "\"create\":true}", env));
    uint16_t init[8] = {9, 9, 9, 9, 9, 9, 9, 9}, ones[4] = {1, 1, 1, 1}, got[8];
    write_all(a, init);
    NDS_OK(open_spec(&g_rival, "lmdbrace://%s/a/|zarr:", env)); /* its own chunk locks */
    g_race = rival_writes_second_half;
    g_race_conflicts = 0;
    nds_box box;
    uint64_t shape[1] = {8};
    NDS_OK(nds_box_parse(&box, "[0:4]", 1, shape));
    NDS_OK(nds_array_write(a, &box, ones, NULL));
    ck_assert_ptr_null(g_race); /* the rival ran */
    read_all(a, got);
    for (int i = 0; i < 8; i++)
        ck_assert_msg(got[i] == (i < 4 ? 1 : 2), "element %d is %d: an update was lost", i, got[i]);
    ck_assert_int_eq(g_race_conflicts, 1); /* ours, refused by publish, then redone */
    nds_array_free(g_rival);
    nds_array_free(a);
    free(env);
}
END_TEST

/* ---- corrupt files ---- */

/* A store of 300 keys, small values and 6000-byte ones (overflow pages); returns its data.mdb. */
static uint8_t *corrupt_source(size_t *len) {
    char *env = new_env("src.lmdb"), *spec = spec_of(env, "", NULL), *path = NULL;
    nds_kvstore *kv = open_store(spec);
    for (unsigned i = 0; i < 300; i++) {
        char key[32];
        size_t n = i % 10 == 0 ? 6000 : 20 + i % 200;
        uint8_t *v = pattern(n, i);
        snprintf(key, sizeof key, "k/%04u", i);
        NDS_OK(nds_kvstore_write(kv, key, v, n, NULL, NULL));
        free(v);
    }
    nds_kvstore_free(kv);
    ck_assert_int_ge(asprintf(&path, "%s/data.mdb", env), 0);
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    rewind(f);
    uint8_t *d = malloc(*len);
    ck_assert_ptr_nonnull(d);
    ck_assert_uint_eq(fread(d, 1, *len, f), *len);
    fclose(f);
    free(path);
    free(spec);
    free(env);
    return d;
}

static int count_key(void *ctx, const char *key, uint64_t size) {
    (void)key, (void)size;
    ++*(int *)ctx;
    return 0;
}

/* Writes into a damaged file, in a child process: each ends with an error or done, never a crash.
 * A write transaction that a guard cuts short leaks the pages LMDB had allocated for it (and
 * leaves the environment refusing writes): the child exits with _exit, past the leak check. */
static void probe_writes(const char *spec) {
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        nds_kvstore *kv = NULL;
        int rc = nds_kvstore_open(&kv, spec, NULL);
        bool ok = rc <= 0;
        if (rc == 0)
            ok = nds_kvstore_write(kv, "k/new", "x", 1, NULL, NULL) <= 0 &&
                 nds_kvstore_delete(kv, "k/0001", NULL) <= 0 &&
                 nds_kvstore_delete_range(kv, "k/0100", "k/0120") <= 0;
        _exit(ok ? 0 : 1);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writes into a damaged copy: "
                  "status %d", status);
}

/* Opens an environment holding data[0..len), lists it, reads every key it was built with, then
 * writes, deletes and deletes a range (probe_writes). Every call must return (0 or an NDS_E* status: a signal, an abort or a hang fails the test).
 * @return how many calls failed with NDS_ECORRUPT */
static int probe_copy(const uint8_t *data, size_t len) {
    static const char *base; /* one temporary directory for every copy, each removed after */
    char *env = NULL, *path = NULL;
    if (!base)
        base = temp_dir();
    ck_assert_int_ge(asprintf(&env, "%s/bad.lmdb", base), 0);
    char *spec = spec_of(env, "", NULL);
    ck_assert_int_eq(mkdir(env, 0777), 0);
    ck_assert_int_ge(asprintf(&path, "%s/data.mdb", env), 0);
    nds_test_write_file(path, data, len);
    nds_kvstore *kv = NULL;
    int corrupt = 0, rc = nds_kvstore_open(&kv, spec, NULL), keys = 0;
    ck_assert_int_le(rc, 0);
    corrupt += rc == NDS_ECORRUPT;
    if (rc == 0) {
        rc = nds_kvstore_list(kv, "", count_key, &keys);
        ck_assert_int_le(rc, 0);
        corrupt += rc == NDS_ECORRUPT;
        for (unsigned i = 0; i < 300; i++) {
            char key[32];
            nds_read_result r;
            snprintf(key, sizeof key, "k/%04u", i);
            rc = nds_kvstore_read(kv, key, NULL, &r);
            ck_assert_int_le(rc, 0);
            corrupt += rc == NDS_ECORRUPT;
            if (rc == 0)
                nds_read_result_dispose(&r);
        }
        nds_kvstore_free(kv);
        probe_writes(spec);
    }
    nds_test_rmtree(env);
    free(env);
    free(path);
    free(spec);
    return corrupt;
}

/* A truncated data.mdb is refused on opening, naming the truncation (it used to raise SIGBUS on
 * the first read of a page past the end). */
START_TEST(corrupt_copies_truncated) {
    size_t len;
    uint8_t *d = corrupt_source(&len);
    const size_t cuts[] = {8192, 12288, len / 2, len - 4096, len - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        char *env = new_env("t.lmdb"), *path = NULL, *spec = spec_of(env, "", NULL);
        ck_assert_int_eq(mkdir(env, 0777), 0);
        ck_assert_int_ge(asprintf(&path, "%s/data.mdb", env), 0);
        nds_test_write_file(path, d, cuts[i]);
        nds_kvstore *kv = NULL;
        ck_assert_int_eq(nds_kvstore_open(&kv, spec, NULL), NDS_ECORRUPT);
        ck_assert_msg(strstr(nds_error_last()->message, "truncated"), "cut at %zu: %s", cuts[i],
                      nds_error_last()->message);
        free(path);
        free(spec);
        free(env);
    }
    free(d);
}
END_TEST

/* Every page header zeroed, then set to 0xff, one page at a time: each open, list and read ends
 * with the data or an error (zeroed headers used to fail an LMDB assertion, which abort()s; 0xff
 * ones made listings loop forever). Some must be reported as corruption. */
START_TEST(corrupt_copies_page_headers) {
    size_t len;
    uint8_t *d = corrupt_source(&len), *c = malloc(len);
    ck_assert_ptr_nonnull(c);
    int corrupt = 0;
    for (size_t page = 2; page < len / 4096; page++) {
        for (int fill = 0; fill < 2; fill++) {
            memcpy(c, d, len);
            memset(c + page * 4096, fill ? 0xff : 0, 16);
            corrupt += probe_copy(c, len);
        }
    }
    ck_assert_int_gt(corrupt, 0);
    free(c);
    free(d);
}
END_TEST

/* 200 seeds of 1-16 random bit flips anywhere in the file: no signal, abort or hang. */
START_TEST(corrupt_copies_random_flips) {
    size_t len;
    uint8_t *d = corrupt_source(&len), *c = malloc(len);
    ck_assert_ptr_nonnull(c);
    int corrupt = 0;
    for (unsigned seed = 1; seed <= 200; seed++) {
        uint64_t x = seed * UINT64_C(0x9E3779B97F4A7C15);
        memcpy(c, d, len);
        for (unsigned flips = 1 + seed % 16; flips > 0; flips--) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            c[(x >> 8) % len] ^= (uint8_t)(1u << (x & 7));
        }
        corrupt += probe_copy(c, len);
    }
    ck_assert_int_gt(corrupt, 0);
    free(c);
    free(d);
}
END_TEST

/* data.mdb cut to its first 5 pages while the environment is open (a file shrunk under a running
 * process): the reads that touch pages past the new end raise SIGBUS, which the guard turns into
 * NDS_ECORRUPT; the process lives on and nothing leaks. */
START_TEST(truncated_while_open_is_an_error) {
    char *env = new_env("w.lmdb"), *spec = spec_of(env, "", NULL), *path = NULL;
    nds_kvstore *kv = open_store(spec);
    for (unsigned i = 0; i < 200; i++) {
        char key[32];
        size_t n = i % 4 == 0 ? 6000 : 300;
        uint8_t *v = pattern(n, i);
        snprintf(key, sizeof key, "k/%04u", i);
        NDS_OK(nds_kvstore_write(kv, key, v, n, NULL, NULL));
        free(v);
    }
    ck_assert_int_ge(asprintf(&path, "%s/data.mdb", env), 0);
    ck_assert_int_eq(truncate(path, 5 * 4096), 0);
    int corrupt = 0, keys = 0;
    for (unsigned i = 0; i < 200; i++) {
        char key[32];
        nds_read_result r;
        snprintf(key, sizeof key, "k/%04u", i);
        int rc = nds_kvstore_read(kv, key, NULL, &r);
        ck_assert_msg(rc == 0 || rc == NDS_ECORRUPT, "%s: %d", key, rc);
        if (rc == 0)
            nds_read_result_dispose(&r);
        else
            corrupt++;
    }
    int rc = nds_kvstore_list(kv, "", count_key, &keys);
    ck_assert_msg(rc == 0 || rc == NDS_ECORRUPT, "list: %d", rc);
    ck_assert_int_gt(corrupt, 0);
    ck_assert_msg(strstr(nds_error_last()->message, "corrupt"), "%s", nds_error_last()->message);
    nds_kvstore_free(kv);
    free(path);
    free(spec);
    free(env);
}
END_TEST

static void own_sigbus(int sig) {
    (void)sig;
}

/* The driver's fault handler is there while an environment is open, and the handler installed
 * before it is back once the last one closes. */
START_TEST(fault_handler_is_restored) {
    struct sigaction mine, now;
    memset(&mine, 0, sizeof mine);
    mine.sa_handler = own_sigbus;
    ck_assert_int_eq(sigaction(SIGBUS, &mine, NULL), 0);
    char *env = new_env("h.lmdb"), *spec = spec_of(env, "", NULL);
    nds_kvstore *kv = open_store(spec);
    ck_assert_int_eq(sigaction(SIGBUS, NULL, &now), 0);
    ck_assert(now.sa_handler != own_sigbus);
    nds_kvstore_free(kv);
    ck_assert_int_eq(sigaction(SIGBUS, NULL, &now), 0);
    ck_assert(!(now.sa_flags & SA_SIGINFO) && now.sa_handler == own_sigbus);
    free(spec);
    free(env);
}
END_TEST

int main(void) {
    Suite *s = suite_create("kvstore_lmdb");
    suite_add_tcase(s, nds_kv_conformance_tcase("lmdb", conformance_url));

    TCase *tc = tcase_create("lmdb");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, url_names_env_then_prefix);
    tcase_add_test(tc, bad_urls_and_specs);
    tcase_add_test(tc, lmdb_errors_are_mapped);
    tcase_add_test(tc, generations_never_repeat);
    tcase_add_test(tc, commit_all_or_nothing);
    tcase_add_test(tc, map_grows_from_tiny);
    tcase_add_test(tc, map_growth_stops_at_max);
    tcase_add_test(tc, map_grows_under_concurrent_readers);
    tcase_add_test(tc, own_pinned_read_blocks_growth);
    tcase_add_test(tc, map_grown_by_another_process);
    tcase_add_test(tc, multiprocess_counter);
    tcase_add_test(tc, handle_inherited_through_fork_is_refused);
    tcase_add_test(tc, sigkill_during_commits);
    tcase_add_test(tc, stale_reader_slots_are_cleared);
    tcase_add_test(tc, zero_copy_read_outlives_writes);
    tcase_add_test(tc, env_relative_ranges);
    tcase_add_test(tc, list_spans_batches);
    tcase_add_test(tc, stage_then_publish_many);
    tcase_add_test(tc, array_write_batches_are_bounded_by_bytes);
    tcase_add_test(tc, publish_checks_each_condition);
    tcase_add_test(tc, discard_leaves_nothing);
    tcase_add_test(tc, failed_publish_applies_nothing);
    tcase_add_test(tc, array_write_publishes_in_batches);
    tcase_add_test(tc, array_write_conflict_in_publish_is_redone);
    tcase_add_test(tc, corrupt_copies_truncated);
    tcase_add_test(tc, corrupt_copies_page_headers);
    tcase_add_test(tc, corrupt_copies_random_flips);
    tcase_add_test(tc, truncated_while_open_is_an_error);
    tcase_add_test(tc, fault_handler_is_restored);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
