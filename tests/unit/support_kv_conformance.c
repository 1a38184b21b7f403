/* The kvstore contract suite: every driver must pass these through the public API (DESIGN.md
 * section 2).
 *
 * Each test is a Check loop test whose loop index selects the registered URL maker, so one process
 * can hold the suite for several drivers. Keys, values and generations are checked exactly; the
 * concurrency test proves that read + conditional write + retry loses no update.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ndstore/sys/kv_driver.h"
#include "internal/kvstore_internal.h"
#include "support_check.h"
#include "support_kv_conformance.h"

#define MAX_MAKERS 8

static nds_kv_url_fn g_makers[MAX_MAKERS];
static int g_maker_count;

/* ---- helpers (also used by driver-specific tests) ---- */

static nds_kvstore *open_url(const char *url) {
    nds_kvstore *kv = NULL;
    NDS_OK(nds_kvstore_open(&kv, url, NULL));
    ck_assert_ptr_nonnull(kv);
    return kv;
}

/* A new empty store of the driver under test (_i of the loop test). */
static nds_kvstore *open_fresh(int i) {
    return open_url(g_makers[i]());
}

char *nds_kv_test_get(nds_kvstore *kv, const char *key, nds_generation *gen) {
    nds_read_result r;
    NDS_OK(nds_kvstore_read(kv, key, NULL, &r));
    if (gen)
        *gen = r.generation;
    if (r.state == NDS_READ_MISSING) {
        ck_assert_int_eq(r.generation.kind, NDS_GEN_ABSENT);
        nds_read_result_dispose(&r);
        return NULL;
    }
    ck_assert_int_eq(r.state, NDS_READ_VALUE);
    ck_assert_int_eq(r.generation.kind, NDS_GEN_VALUE);
    char *s = malloc(r.value.len + 1);
    ck_assert_ptr_nonnull(s);
    if (r.value.len)
        memcpy(s, r.value.data, r.value.len);
    s[r.value.len] = '\0';
    nds_read_result_dispose(&r);
    return s;
}

nds_kvstore *nds_kv_test_open(const char *fmt, ...) {
    char spec[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(spec, sizeof spec, fmt, ap);
    va_end(ap);
    nds_kvstore *kv = NULL;
    NDS_OK(nds_kvstore_open(&kv, spec, NULL));
    return kv;
}

int nds_kv_test_open_status(const char *spec) {
    nds_kvstore *kv = NULL;
    int rc = nds_kvstore_open(&kv, spec, NULL);
    nds_kvstore_free(kv);
    return rc;
}

nds_generation nds_kv_test_put(nds_kvstore *kv, const char *key, const char *value) {
    nds_generation g = {NDS_GEN_NONE, {0}};
    NDS_OK(nds_kvstore_write(kv, key, value, strlen(value), NULL, &g));
    ck_assert_int_eq(g.kind, NDS_GEN_VALUE);
    return g;
}

typedef struct listing {
    char **items;
    size_t n, cap;
} listing;

static int list_collect(void *ctx, const char *key, uint64_t size) {
    listing *l = ctx;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        l->items = realloc(l->items, l->cap * sizeof *l->items);
        ck_assert_ptr_nonnull(l->items);
    }
    char *item = NULL;
    ck_assert_int_ge(asprintf(&item, "%s=%llu", key, (unsigned long long)size), 0);
    l->items[l->n++] = item;
    return 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorts l's items and joins them with ','; frees them. */
static char *listing_join(listing *l) {
    if (l->n)
        qsort(l->items, l->n, sizeof *l->items, cmp_str);
    size_t total = 1;
    for (size_t i = 0; i < l->n; i++)
        total += strlen(l->items[i]) + 1;
    char *out = calloc(1, total);
    ck_assert_ptr_nonnull(out);
    for (size_t i = 0; i < l->n; i++) {
        if (i)
            strcat(out, ",");
        strcat(out, l->items[i]);
        free(l->items[i]);
    }
    free(l->items);
    return out;
}

char *nds_kv_test_list(nds_kvstore *kv, const char *prefix) {
    listing l = {0};
    NDS_OK(nds_kvstore_list(kv, prefix, list_collect, &l));
    return listing_join(&l);
}

int nds_kv_test_increment(nds_kvstore *kv, const char *key) {
    for (int conflicts = 0;; conflicts++) {
        nds_generation gen;
        char *cur = nds_kv_test_get(kv, key, &gen);
        long n = cur ? strtol(cur, NULL, 10) : 0;
        free(cur);
        char next[32];
        snprintf(next, sizeof next, "%ld", n + 1);
        nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
        wo.if_equal = gen; /* ABSENT when missing: create-only */
        int rc = nds_kvstore_write(kv, key, next, strlen(next), &wo, NULL);
        if (rc == 0)
            return conflicts;
        ck_assert_msg(rc == NDS_ECONFLICT, "increment of %s: %d (%s)", key, rc,
                      nds_error_last()->message);
    }
}

/* One read + conditional write increment without Check assertions (for forked children):
 * 0, or a status > 0 after printing the error. *value and *gen (may be NULL) get what it wrote. */
static int increment_quietly(nds_kvstore *kv, const char *key, long *value, nds_generation *gen) {
    for (;;) {
        nds_read_result r;
        int rc = nds_kvstore_read(kv, key, NULL, &r);
        if (rc) return fprintf(stderr, "read %s: %s\n", key, nds_error_last()->message), 3;
        char next[32];
        long n = 0;
        if (r.state == NDS_READ_VALUE) {
            char cur[32];
            snprintf(cur, sizeof cur, "%.*s", (int)r.value.len, (const char *)r.value.data);
            n = strtol(cur, NULL, 10);
        }
        nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
        wo.if_equal = r.generation; /* ABSENT when missing: create-only */
        nds_read_result_dispose(&r);
        int len = snprintf(next, sizeof next, "%ld", n + 1);
        rc = nds_kvstore_write(kv, key, next, (size_t)len, &wo, gen);
        if (rc == 0) {
            if (value) *value = n + 1;
            return 0;
        }
        if (rc != NDS_ECONFLICT)
            return fprintf(stderr, "write %s: %s\n", key, nds_error_last()->message), 4;
    }
}

void nds_kv_test_processes_increment(const char *url, int procs, int rounds) {
    pid_t pids[64];
    ck_assert_int_le(procs, 64);
    for (int p = 0; p < procs; p++) {
        if ((pids[p] = fork()) == 0) {
            nds_kvstore *kv = NULL;
            if (nds_kvstore_open(&kv, url, NULL)) _exit(2);
            int rc = 0;
            for (int i = 0; i < rounds && !rc; i++)
                rc = increment_quietly(kv, "counter", NULL, NULL);
            nds_kvstore_free(kv);
            _exit(rc);
        }
    }
    for (int p = 0; p < procs; p++) {
        int status;
        waitpid(pids[p], &status, 0);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "process %d failed (status %d; its message above)", p, status);
    }
    nds_kvstore *kv = NULL;
    NDS_OK(nds_kvstore_open(&kv, url, NULL)); /* a new handle: sees every process's commits */
    char expected[32];
    snprintf(expected, sizeof expected, "%d", procs * rounds);
    char *v = nds_kv_test_get(kv, "counter", NULL);
    ck_assert_msg(v && strcmp(v, expected) == 0, "counter %s, expected %s", v ? v : "missing",
                  expected);
    free(v);
    nds_kvstore_free(kv);
}

/* ---- many processes committing to a versioned store ---- */

/* One commit a process made: the version it became, the key and the value. */
typedef struct vcommit {
    unsigned long long version;
    char key[64], value[64];
} vcommit;

/* The version of a versioned store's generation "v<N>" (0 when it is not one). */
static unsigned long long generation_version(const nds_generation *g) {
    return g->kind == NDS_GEN_VALUE && g->value[0] == 'v' ? strtoull(g->value + 1, NULL, 10) : 0;
}

/* Child p: rounds x (an increment of "counter", a write of "own/<p>/<i>"), each commit recorded
 * in rec as "VERSION KEY VALUE". Exit status 0, or > 0 after printing the error. */
static int commit_rounds(const char *url, int p, int rounds, FILE *rec) {
    nds_kvstore *kv = NULL;
    if (nds_kvstore_open(&kv, url, NULL))
        return fprintf(stderr, "process %d: open: %s\n", p, nds_error_last()->message), 2;
    int rc = 0;
    for (int i = 0; i < rounds && !rc; i++) {
        long n = 0;
        nds_generation g;
        if ((rc = increment_quietly(kv, "counter", &n, &g)))
            break;
        fprintf(rec, "%llu counter %ld\n", generation_version(&g), n);
        char key[64], value[64];
        snprintf(key, sizeof key, "own/%d/%03d", p, i);
        int len = snprintf(value, sizeof value, "%d-%d", p, i);
        if (nds_kvstore_write(kv, key, value, (size_t)len, NULL, &g)) {
            fprintf(stderr, "process %d: write %s: %s\n", p, key, nds_error_last()->message);
            rc = 5;
        } else {
            fprintf(rec, "%llu %s %s\n", generation_version(&g), key, value);
        }
    }
    nds_kvstore_free(kv);
    return rc || fflush(rec) ? (rc ? rc : 6) : 0;
}

/* Reads the records of every process into by_version[1..total]; each version exactly once. */
static void read_records(FILE **rec, int procs, vcommit *by_version, unsigned long long total) {
    for (int p = 0; p < procs; p++) {
        rewind(rec[p]);
        vcommit c;
        while (fscanf(rec[p], "%llu %63s %63s", &c.version, c.key, c.value) == 3) {
            ck_assert_msg(c.version >= 1 && c.version <= total,
                          "process %d committed %s as version %llu, outside 1..%llu", p, c.key,
                          c.version, total);
            ck_assert_msg(by_version[c.version].version == 0,
                          "version %llu made twice (%s and %s)", c.version,
                          by_version[c.version].key, c.key);
            by_version[c.version] = c;
        }
        fclose(rec[p]);
    }
}

/* Version v opened on its own holds exactly what the commits 1..v wrote: the key committed at v
 * with its value and generation, the counter's value then, and exactly the keys (and sizes)
 * written so far. */
static void check_version(const char *url, const vcommit *by_version, unsigned long long v) {
    char *at = NULL;
    ck_assert_int_ge(asprintf(&at, "%s@%llu/", url, v), 0);
    nds_kvstore *kv = open_url(at);
    const vcommit *c = &by_version[v];
    nds_generation g;
    char *got = nds_kv_test_get(kv, c->key, &g);
    ck_assert_msg(got && strcmp(got, c->value) == 0, "version %llu: %s = %s, committed %s", v,
                  c->key, got ? got : "(missing)", c->value);
    ck_assert_msg(generation_version(&g) == v, "version %llu: %s has generation %s", v, c->key,
                  g.value);
    free(got);
    listing want = {0};
    const char *counter = NULL;
    for (unsigned long long u = 1; u <= v; u++)
        if (strcmp(by_version[u].key, "counter") == 0)
            counter = by_version[u].value;
        else
            list_collect(&want, by_version[u].key, strlen(by_version[u].value));
    if (counter)
        list_collect(&want, "counter", strlen(counter));
    char *want_list = listing_join(&want), *have = nds_kv_test_list(kv, "");
    ck_assert_msg(strcmp(have, want_list) == 0, "version %llu lists %s, committed %s", v, have,
                  want_list);
    got = counter ? nds_kv_test_get(kv, "counter", NULL) : NULL;
    ck_assert_msg(!counter || (got && strcmp(got, counter) == 0),
                  "version %llu: counter = %s, committed %s", v, got ? got : "(missing)", counter);
    free(got);
    free(want_list);
    free(have);
    nds_kvstore_free(kv);
    free(at);
}

void nds_kv_test_versioned_processes(const char *url, int procs, int rounds) {
    size_t n = strlen(url), tail = strlen("|versioned:");
    ck_assert_msg(n >= tail && strcmp(url + n - tail, "|versioned:") == 0,
                  "%s: a versioned store's url ending in |versioned:", url);
    ck_assert_int_le(procs, 64);
    pid_t pids[64];
    FILE *rec[64];
    for (int p = 0; p < procs; p++) {
        ck_assert_ptr_nonnull(rec[p] = tmpfile());
        fflush(NULL); /* nothing buffered is written twice by the children */
        if ((pids[p] = fork()) == 0)
            _exit(commit_rounds(url, p, rounds, rec[p]));
    }
    for (int p = 0; p < procs; p++) {
        int status;
        waitpid(pids[p], &status, 0);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "process %d failed (status %d; its message above)", p, status);
    }
    unsigned long long total = 2ull * (unsigned long long)procs * (unsigned long long)rounds;
    vcommit *by_version = calloc(total + 1, sizeof *by_version);
    ck_assert_ptr_nonnull(by_version);
    read_records(rec, procs, by_version, total);
    for (unsigned long long v = 1; v <= total; v++)
        ck_assert_msg(by_version[v].version == v, "version %llu: no process made it", v);
    char *after_url = NULL; /* and no version after them */
    ck_assert_int_ge(asprintf(&after_url, "%s@%llu/", url, total + 1), 0);
    nds_kvstore *after = NULL;
    int rc = nds_kvstore_open(&after, after_url, NULL);
    ck_assert_msg(rc == NDS_ENOTFOUND, "opening version %llu, after the %llu committed: %d (%s)",
                  total + 1, total, rc, rc ? nds_error_last()->message : "it exists");
    free(after_url);
    for (unsigned long long v = 1; v <= total; v++)
        check_version(url, by_version, v);
    free(by_version);
}

static void assert_value(nds_kvstore *kv, const char *key, const char *expected) {
    char *v = nds_kv_test_get(kv, key, NULL);
    if (!expected) {
        ck_assert_msg(v == NULL, "%s: expected missing, got \"%s\"", key, v ? v : "");
    } else {
        ck_assert_msg(v != NULL, "%s: expected \"%s\", got missing", key, expected);
        ck_assert_str_eq(v, expected);
    }
    free(v);
}

static void assert_list(nds_kvstore *kv, const char *prefix, const char *expected) {
    char *got = nds_kv_test_list(kv, prefix);
    ck_assert_msg(strcmp(got, expected) == 0, "list \"%s\": got \"%s\", expected \"%s\"", prefix,
                  got, expected);
    free(got);
}

/* Reads with options; returns the state and copies the bytes into a malloc'd string in *bytes. */
static nds_read_state read_opts(nds_kvstore *kv, const char *key, const nds_read_options *o,
                                char **bytes, nds_generation *gen, uint64_t *total) {
    nds_read_result r;
    NDS_OK(nds_kvstore_read(kv, key, o, &r));
    if (bytes) {
        *bytes = calloc(1, r.value.len + 1);
        if (r.value.len)
            memcpy(*bytes, r.value.data, r.value.len);
    }
    if (gen)
        *gen = r.generation;
    if (total)
        *total = r.total_size;
    if (r.state != NDS_READ_VALUE)
        ck_assert_uint_eq(r.value.len, 0);
    nds_read_state st = r.state;
    nds_read_result_dispose(&r);
    return st;
}

/* ---- basic reads and writes ---- */

START_TEST(open_url_and_capabilities) {
    const char *url = g_makers[_i]();
    nds_kvstore *kv = open_url(url);
    ck_assert_str_eq(nds_kvstore_url(kv), url);
    uint32_t caps = nds_kvstore_capabilities(kv);
    ck_assert(caps & NDS_KV_CAP_ATOMIC_CONDITIONAL_WRITE); /* the suite writes conditionally */
    ck_assert(!(caps & NDS_KV_CAP_READ_ONLY));
    /* The URL ends with the handle's prefix (after a bucket or environment, for drivers with one),
     * and the spec names it. */
    const char *sep = strstr(url, "://"), *path = nds_kvstore_path(kv);
    size_t rest = strlen(sep + 3), n = strlen(path);
    ck_assert_uint_le(n, rest);
    ck_assert_str_eq(sep + 3 + rest - n, path);
    char *spec = NULL;
    NDS_OK(nds_kvstore_spec(kv, &spec));
    ck_assert_ptr_nonnull(strstr(spec, "\"path\""));
    nds_free(spec);
    nds_kvstore_free(kv);
}
END_TEST

START_TEST(read_missing_key) {
    nds_kvstore *kv = open_fresh(_i);
    nds_read_result r;
    NDS_OK(nds_kvstore_read(kv, "nothing", NULL, &r));
    ck_assert_int_eq(r.state, NDS_READ_MISSING);
    ck_assert_int_eq(r.generation.kind, NDS_GEN_ABSENT);
    ck_assert_uint_eq(r.value.len, 0);
    nds_read_result_dispose(&r);
    nds_kvstore_free(kv);
}
END_TEST

START_TEST(write_then_read) {
    nds_kvstore *kv = open_fresh(_i);
    nds_generation g = nds_kv_test_put(kv, "k", "hello");
    ck_assert_uint_gt(strlen(g.value), 0);
    ck_assert_uint_lt(strlen(g.value), NDS_GENERATION_MAX);
    nds_generation rg;
    uint64_t total = 0;
    char *v = NULL;
    ck_assert_int_eq(read_opts(kv, "k", NULL, &v, &rg, &total), NDS_READ_VALUE);
    ck_assert_str_eq(v, "hello");
    ck_assert_uint_eq(total, 5);
    ck_assert(nds_generation_equal(&g, &rg));
    free(v);
    nds_kvstore_free(kv);
}
END_TEST

START_TEST(overwrite_changes_generation) {
    nds_kvstore *kv = open_fresh(_i);
    enum { N = 20 };
    nds_generation gens[N];
    for (int i = 0; i < N; i++) {
        /* Same size each time, often the same bytes: the generation must still change. */
        char value[8];
        snprintf(value, sizeof value, "v%03d", i % 2);
        gens[i] = nds_kv_test_put(kv, "same", value);
        for (int j = 0; j < i; j++)
            ck_assert_msg(!nds_generation_equal(&gens[i], &gens[j]),
                          "write %d repeats generation of %d", i, j);
        nds_generation now;
        char *got = nds_kv_test_get(kv, "same", &now);
        ck_assert_str_eq(got, value);
        ck_assert(nds_generation_equal(&now, &gens[i]));
        free(got);
    }
    nds_kvstore_free(kv);
}
END_TEST

START_TEST(delete_key) {
    nds_kvstore *kv = open_fresh(_i);
    nds_kv_test_put(kv, "d", "x");
    NDS_OK(nds_kvstore_delete(kv, "d", NULL));
    assert_value(kv, "d", NULL);
    NDS_OK(nds_kvstore_delete(kv, "d", NULL)); /* deleting a missing key succeeds */
    NDS_OK(nds_kvstore_delete(kv, "never/was", NULL));
    nds_kv_test_put(kv, "d", "again");
    assert_value(kv, "d", "again");
    nds_kvstore_free(kv);
}
END_TEST

START_TEST(empty_value) {
    nds_kvstore *kv = open_fresh(_i);
    nds_generation g;
    NDS_OK(nds_kvstore_write(kv, "empty", "", 0, NULL, &g));
    ck_assert_int_eq(g.kind, NDS_GEN_VALUE);
    nds_read_result r;
    NDS_OK(nds_kvstore_read(kv, "empty", NULL, &r));
    ck_assert_int_eq(r.state, NDS_READ_VALUE); /* present, not missing */
    ck_assert_uint_eq(r.value.len, 0);
    ck_assert(nds_generation_equal(&r.generation, &g));
    nds_read_result_dispose(&r);
    NDS_OK(nds_kvstore_write(kv, "null", NULL, 0, NULL, NULL));
    assert_list(kv, "", "empty=0,null=0");
    nds_kvstore_free(kv);
}
END_TEST

START_TEST(large_value) {
    nds_kvstore *kv = open_fresh(_i);
    size_t n = 1 << 20;
    uint8_t *data = malloc(n);
    for (size_t i = 0; i < n; i++)
        data[i] = (uint8_t)(i * 2654435761u >> 13);
    NDS_OK(nds_kvstore_write(kv, "big/value", data, n, NULL, NULL));
    nds_read_result r;
    NDS_OK(nds_kvstore_read(kv, "big/value", NULL, &r));
    ck_assert_int_eq(r.state, NDS_READ_VALUE);
    ck_assert_uint_eq(r.value.len, n);
    ck_assert(memcmp(r.value.data, data, n) == 0);
    nds_read_result_dispose(&r);
    nds_read_options o = NDS_READ_OPTIONS_INIT;
    o.byte_start = 500000;
    o.byte_length = 70000;
    NDS_OK(nds_kvstore_read(kv, "big/value", &o, &r));
    ck_assert_uint_eq(r.value.len, 70000);
    ck_assert_uint_eq(r.total_size, n);
    ck_assert(memcmp(r.value.data, data + 500000, 70000) == 0);
    nds_read_result_dispose(&r);
    assert_list(kv, "big/", "big/value=1048576");
    free(data);
    nds_kvstore_free(kv);
}
END_TEST

/* ---- conditions ---- */

START_TEST(create_only_write) {
    nds_kvstore *kv = open_fresh(_i);
    nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
    wo.if_equal.kind = NDS_GEN_ABSENT;
    nds_generation g;
    NDS_OK(nds_kvstore_write(kv, "c", "first", 5, &wo, &g));
    ck_assert_int_eq(g.kind, NDS_GEN_VALUE);
    ck_assert_int_eq(nds_kvstore_write(kv, "c", "second", 6, &wo, NULL), NDS_ECONFLICT);
    ck_assert_int_eq(nds_error_last()->code, NDS_ECONFLICT);
    assert_value(kv, "c", "first");
    nds_generation now;
    free(nds_kv_test_get(kv, "c", &now));
    ck_assert(nds_generation_equal(&now, &g)); /* the failed write changed nothing */
    NDS_OK(nds_kvstore_delete(kv, "c", NULL));
    NDS_OK(nds_kvstore_write(kv, "c", "third", 5, &wo, NULL)); /* absent again: create-only works */
    assert_value(kv, "c", "third");
    nds_kvstore_free(kv);
}
END_TEST

START_TEST(conditional_write) {
    nds_kvstore *kv = open_fresh(_i);
    nds_generation g1 = nds_kv_test_put(kv, "w", "one");
    nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
    wo.if_equal = g1;
    nds_generation g2;
    NDS_OK(nds_kvstore_write(kv, "w", "two", 3, &wo, &g2));
    ck_assert(!nds_generation_equal(&g1, &g2));
    /* g1 is stale now. */
    ck_assert_int_eq(nds_kvstore_write(kv, "w", "three", 5, &wo, NULL), NDS_ECONFLICT);
    assert_value(kv, "w", "two");
    /* A value condition on a missing key fails too. */
    ck_assert_int_eq(nds_kvstore_write(kv, "other", "x", 1, &wo, NULL), NDS_ECONFLICT);
    assert_value(kv, "other", NULL);
    wo.if_equal = g2;
    NDS_OK(nds_kvstore_write(kv, "w", "three", 5, &wo, NULL));
    assert_value(kv, "w", "three");
    nds_kvstore_free(kv);
}
END_TEST

START_TEST(conditional_delete) {
    nds_kvstore *kv = open_fresh(_i);
    nds_generation g1 = nds_kv_test_put(kv, "d", "one");
    nds_generation g2 = nds_kv_test_put(kv, "d", "two");
    nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
    wo.if_equal = g1;
    ck_assert_int_eq(nds_kvstore_delete(kv, "d", &wo), NDS_ECONFLICT);
    assert_value(kv, "d", "two");
    wo.if_equal.kind = NDS_GEN_ABSENT;
    ck_assert_int_eq(nds_kvstore_delete(kv, "d", &wo), NDS_ECONFLICT);
    assert_value(kv, "d", "two");
    wo.if_equal = g2;
    NDS_OK(nds_kvstore_delete(kv, "d", &wo));
    assert_value(kv, "d", NULL);
    ck_assert_int_eq(nds_kvstore_delete(kv, "d", &wo),
                     NDS_ECONFLICT); /* gone: g2 no longer holds */
    wo.if_equal.kind = NDS_GEN_ABSENT;
    NDS_OK(nds_kvstore_delete(kv, "d", &wo)); /* absent, as required */
    nds_kvstore_free(kv);
}
END_TEST

START_TEST(read_if_not_equal) {
    nds_kvstore *kv = open_fresh(_i);
    nds_generation g1 = nds_kv_test_put(kv, "r", "one");
    nds_read_options o = NDS_READ_OPTIONS_INIT;
    o.if_not_equal = g1;
    nds_generation got;
    char *bytes = NULL;
    ck_assert_int_eq(read_opts(kv, "r", &o, &bytes, &got, NULL), NDS_READ_UNCHANGED);
    ck_assert_str_eq(bytes, "");
    ck_assert(nds_generation_equal(&got, &g1));
    free(bytes);
    nds_kv_test_put(kv, "r", "two");
    ck_assert_int_eq(read_opts(kv, "r", &o, &bytes, &got, NULL), NDS_READ_VALUE);
    ck_assert_str_eq(bytes, "two");
    ck_assert(!nds_generation_equal(&got, &g1));
    free(bytes);
    /* A missing key read with if_not_equal = a value generation is just missing. */
    ck_assert_int_eq(read_opts(kv, "none", &o, NULL, &got, NULL), NDS_READ_MISSING);
    ck_assert_int_eq(got.kind, NDS_GEN_ABSENT);
    nds_kvstore_free(kv);
}
END_TEST

START_TEST(read_if_equal) {
    nds_kvstore *kv = open_fresh(_i);
    nds_generation g1 = nds_kv_test_put(kv, "r", "one");
    nds_generation g2 = nds_kv_test_put(kv, "r", "two");
    nds_read_options o = NDS_READ_OPTIONS_INIT;
    o.if_equal = g1;
    char *bytes = NULL;
    ck_assert_int_eq(read_opts(kv, "r", &o, &bytes, NULL, NULL), NDS_READ_ABORTED);
    ck_assert_str_eq(bytes, "");
    free(bytes);
    o.if_equal = g2;
    ck_assert_int_eq(read_opts(kv, "r", &o, &bytes, NULL, NULL), NDS_READ_VALUE);
    ck_assert_str_eq(bytes, "two");
    free(bytes);
    ck_assert_int_eq(read_opts(kv, "none", &o, NULL, NULL, NULL), NDS_READ_ABORTED);
    o.if_equal.kind = NDS_GEN_ABSENT;
    ck_assert_int_eq(read_opts(kv, "none", &o, NULL, NULL, NULL), NDS_READ_MISSING);
    ck_assert_int_eq(read_opts(kv, "r", &o, NULL, NULL, NULL), NDS_READ_ABORTED);
    nds_kvstore_free(kv);
}
END_TEST

/* ---- byte ranges ---- */

static void assert_range(nds_kvstore *kv, int64_t start, int64_t len, const char *expected) {
    nds_read_options o = NDS_READ_OPTIONS_INIT;
    o.byte_start = start;
    o.byte_length = len;
    char *bytes = NULL;
    uint64_t total = 0;
    ck_assert_int_eq(read_opts(kv, "range", &o, &bytes, NULL, &total), NDS_READ_VALUE);
    ck_assert_msg(strcmp(bytes, expected) == 0, "range %lld+%lld: got \"%s\", expected \"%s\"",
                  (long long)start, (long long)len, bytes, expected);
    ck_assert_uint_eq(total, 10);
    free(bytes);
}

START_TEST(byte_ranges) {
    nds_kvstore *kv = open_fresh(_i);
    nds_generation g = nds_kv_test_put(kv, "range", "0123456789");
    assert_range(kv, 0, -1, "0123456789");
    assert_range(kv, 2, 3, "234");
    assert_range(kv, 7, -1, "789");
    assert_range(kv, 8, 100, "89"); /* clamped to the end */
    assert_range(kv, 10, -1, ""); /* at the end: empty */
    assert_range(kv, 4, 0, "");
    assert_range(kv, -3, -1, "789"); /* suffix */
    assert_range(kv, -4, 2, "67");
    assert_range(kv, -10, -1, "0123456789");
    nds_read_options o = NDS_READ_OPTIONS_INIT;
    o.byte_start = 11;
    nds_read_result r;
    ck_assert_int_eq(nds_kvstore_read(kv, "range", &o, &r), NDS_ERANGE);
    nds_read_result_dispose(&r);
    /* Conditions still apply to ranged reads; a missing key is missing whatever the range. */
    o.byte_start = 1;
    o.if_not_equal = g;
    ck_assert_int_eq(read_opts(kv, "range", &o, NULL, NULL, NULL), NDS_READ_UNCHANGED);
    o.byte_start = 50;
    o.if_not_equal.kind = NDS_GEN_NONE;
    ck_assert_int_eq(read_opts(kv, "nothing", &o, NULL, NULL, NULL), NDS_READ_MISSING);
    nds_kvstore_free(kv);
}
END_TEST

/* ---- ranges into the caller's buffers (kv_driver.h read, n > 0) ---- */

#define RANGE_BUF 8 /* bytes of the buffer ranges_into_buffers reads into, its NUL included */

/* Reads ranges of key into buf (RANGE_BUF bytes, fresh '.' each time) under o; returns the
 * state. */
static nds_read_state read_ranges(nds_kvstore *kv, const char *key, const nds_read_options *o,
                                  nds_byte_range *ranges, size_t n, char *buf,
                                  nds_read_result *r) {
    memset(buf, '.', RANGE_BUF - 1);
    buf[RANGE_BUF - 1] = '\0';
    for (size_t i = 0, at = 0; i < n; at += ranges[i].len, i++) ranges[i].dst = (uint8_t *)buf + at;
    NDS_OK(nds_kvstore_read_ranges_if(kv, key, o, ranges, n, r));
    ck_assert_ptr_null(r->value.data); /* the bytes went to the buffers, none to out */
    return r->state;
}

START_TEST(ranges_into_buffers) {
    nds_kvstore *kv = open_fresh(_i);
    nds_generation g = nds_kv_test_put(kv, "v", "0123456789");
    nds_byte_range ranges[3] = {{8, 2, NULL}, {0, 3, NULL}, {4, 0, NULL}};
    char buf[RANGE_BUF];
    nds_read_result r;
    ck_assert_int_eq(read_ranges(kv, "v", NULL, ranges, 3, buf, &r), NDS_READ_VALUE);
    ck_assert_str_eq(buf, "89012..");
    ck_assert_uint_eq(r.total_size, 10);
    ck_assert(nds_generation_equal(&r.generation, &g));
    /* The conditions hold for the ranges form too; the buffers stay untouched. */
    nds_read_options o = NDS_READ_OPTIONS_INIT;
    o.if_not_equal = g;
    ck_assert_int_eq(read_ranges(kv, "v", &o, ranges, 3, buf, &r), NDS_READ_UNCHANGED);
    ck_assert_str_eq(buf, ".......");
    o = (nds_read_options)NDS_READ_OPTIONS_INIT;
    o.if_equal.kind = NDS_GEN_ABSENT;
    ck_assert_int_eq(read_ranges(kv, "v", &o, ranges, 3, buf, &r), NDS_READ_ABORTED);
    ck_assert_str_eq(buf, ".......");
    ck_assert_int_eq(read_ranges(kv, "gone", NULL, ranges, 3, buf, &r),
                     NDS_READ_MISSING);
    ck_assert_str_eq(buf, ".......");
    /* A range past the end: NDS_ERANGE, the value's size still told. */
    nds_byte_range past[2] = {{0, 1, (uint8_t *)buf}, {9, 2, (uint8_t *)buf + 1}};
    ck_assert_int_eq(nds_kvstore_read_ranges(kv, "v", past, 2, &r), NDS_ERANGE);
    ck_assert_uint_eq(r.total_size, 10);
    /* read_into: pieces that follow each other, from an offset. */
    char a[3] = {0}, b[4] = {0};
    struct iovec iov[2] = {{a, 2}, {b, 3}};
    NDS_OK(nds_kvstore_read_into(kv, "v", 3, iov, 2, &r));
    ck_assert_int_eq(r.state, NDS_READ_VALUE);
    ck_assert_str_eq(a, "34");
    ck_assert_str_eq(b, "567");
    ck_assert_int_eq(nds_kvstore_read_into(kv, "v", 7, iov, 2, &r), NDS_ERANGE);
    /* No pieces: still no value handed out, only state and size. */
    NDS_OK(nds_kvstore_read_into(kv, "v", 3, iov, 0, &r));
    ck_assert_int_eq(r.state, NDS_READ_VALUE);
    ck_assert_ptr_null(r.value.data);
    NDS_OK(nds_kvstore_read_ranges(kv, "v", NULL, 0, &r));
    ck_assert_ptr_null(r.value.data);
    ck_assert_uint_eq(r.total_size, 10);
    nds_kvstore_free(kv);
}
END_TEST

/* The one write method takes the value in pieces; no pieces is an empty value, not a delete. */
START_TEST(write_in_pieces) {
    nds_kvstore *kv = open_fresh(_i);
    struct iovec iov[3] = {{"abc", 3}, {"", 0}, {"defg", 4}};
    nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
    wo.if_equal.kind = NDS_GEN_ABSENT;
    nds_generation g;
    NDS_OK(nds_kvstore_write_iov(kv, "p", iov, 3, &wo, &g));
    nds_generation now;
    char *v = nds_kv_test_get(kv, "p", &now);
    ck_assert_str_eq(v, "abcdefg");
    ck_assert(nds_generation_equal(&g, &now));
    free(v);
    ck_assert_int_eq(nds_kvstore_write_iov(kv, "p", iov, 1, &wo, NULL), NDS_ECONFLICT);
    NDS_OK(nds_kvstore_write_iov(kv, "p", iov, 0, NULL, NULL));
    assert_value(kv, "p", "");
    nds_kvstore_free(kv);
}
END_TEST

/* ---- keys and listing ---- */

START_TEST(keys_with_slashes) {
    nds_kvstore *kv = open_fresh(_i);
    nds_kv_test_put(kv, "a/b/c", "abc");
    nds_kv_test_put(kv, "a/b/d", "abd!");
    nds_kv_test_put(kv, "a/e", "ae");
    nds_kv_test_put(kv, "0.1.2", "dots");
    assert_value(kv, "a/b/c", "abc");
    assert_value(kv, "a/b/d", "abd!");
    assert_value(kv, "a/e", "ae");
    assert_value(kv, "0.1.2", "dots");
    assert_value(kv, "a/b", NULL); /* a "directory" is not a key */
    assert_value(kv, "a/b/c/d", NULL);
    NDS_OK(nds_kvstore_delete(kv, "a/b/c", NULL));
    assert_value(kv, "a/b/c", NULL);
    assert_value(kv, "a/b/d", "abd!");
    assert_list(kv, "", "0.1.2=4,a/b/d=4,a/e=2");
    nds_kvstore_free(kv);
}
END_TEST

START_TEST(list_by_prefix) {
    nds_kvstore *kv = open_fresh(_i);
    assert_list(kv, "", "");
    /* No key is also a "directory" of another: file stores cannot hold both "a" and "a/1". */
    const char *keys[] = {"a0", "ab", "a/1", "a/2/x", "b/1", "bc", "c/d/e/f"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        nds_kv_test_put(kv, keys[i], keys[i]);
    assert_list(kv, "", "a/1=3,a/2/x=5,a0=2,ab=2,b/1=3,bc=2,c/d/e/f=7");
    assert_list(kv, "a", "a/1=3,a/2/x=5,a0=2,ab=2");
    assert_list(kv, "a/", "a/1=3,a/2/x=5");
    assert_list(kv, "a/2", "a/2/x=5");
    assert_list(kv, "b", "b/1=3,bc=2");
    assert_list(kv, "c/d/", "c/d/e/f=7");
    assert_list(kv, "c/d/e/f", "c/d/e/f=7");
    assert_list(kv, "zzz", "");
    assert_list(kv, "c/x/", "");
    nds_kvstore_free(kv);
}
END_TEST

static int stop_after_one(void *ctx, const char *key, uint64_t size) {
    (void)key, (void)size;
    ++*(int *)ctx;
    return 42;
}

START_TEST(list_callback_stops) {
    nds_kvstore *kv = open_fresh(_i);
    nds_kv_test_put(kv, "x/1", "1");
    nds_kv_test_put(kv, "x/2", "2");
    nds_kv_test_put(kv, "x/3", "3");
    int calls = 0;
    ck_assert_int_eq(nds_kvstore_list(kv, "x/", stop_after_one, &calls), 42);
    ck_assert_int_eq(calls, 1);
    nds_kvstore_free(kv);
}
END_TEST

START_TEST(list_many_keys) {
    nds_kvstore *kv = open_fresh(_i);
    enum { N = 1000 };
    for (int i = 0; i < N; i++) {
        char key[32];
        snprintf(key, sizeof key, "m/%02d/%05d", i % 10, i);
        NDS_OK(nds_kvstore_write(kv, key, "v", 1, NULL, NULL));
    }
    char *all = nds_kv_test_list(kv, "m/");
    size_t entries = 0;
    for (char *p = all; *p; p++)
        entries += *p == ',';
    ck_assert_uint_eq(entries + 1, N);
    free(all);
    char *some = nds_kv_test_list(kv, "m/03/");
    entries = 0;
    for (char *p = some; *p; p++)
        entries += *p == ',';
    ck_assert_uint_eq(entries + 1, N / 10);
    ck_assert_ptr_nonnull(strstr(some, "m/03/00003=1"));
    free(some);
    nds_kvstore_free(kv);
}
END_TEST

/* ---- delete_range ---- */

static void put_keys(nds_kvstore *kv, const char *const *keys, size_t n) {
    for (size_t i = 0; i < n; i++)
        nds_kv_test_put(kv, keys[i], "v");
}

START_TEST(delete_range_bounds) {
    nds_kvstore *kv = open_fresh(_i);
    const char *keys[] = {"a", "b", "b0/1", "b0/2/x", "ba", "c", "c0/1", "d"};
    put_keys(kv, keys, sizeof keys / sizeof keys[0]);
    NDS_OK(nds_kvstore_delete_range(kv, "b", "c")); /* begin inclusive, end exclusive */
    assert_list(kv, "", "a=1,c0/1=1,c=1,d=1");
    NDS_OK(nds_kvstore_delete_range(kv, "c0/", "d"));
    assert_list(kv, "", "a=1,c=1,d=1");
    NDS_OK(nds_kvstore_delete_range(kv, "d", "a")); /* empty range */
    NDS_OK(nds_kvstore_delete_range(kv, "c", "c"));
    assert_list(kv, "", "a=1,c=1,d=1");
    NDS_OK(nds_kvstore_delete_range(kv, "x", "z")); /* nothing there */
    nds_kv_test_put(kv, "c0/9/9", "v"); /* the store still works where keys were removed */
    assert_value(kv, "c0/9/9", "v");
    nds_kvstore_free(kv);
}
END_TEST

/* An unbounded range stays inside the handle's prefix: a sibling store's keys survive. */
START_TEST(delete_range_unbounded) {
    nds_kvstore *base = open_fresh(_i), *a = NULL, *b = NULL;
    NDS_OK(nds_kvstore_sub(&a, base, "a/"));
    NDS_OK(nds_kvstore_sub(&b, base, "b/"));
    const char *keys[] = {"k1", "k2", "m/1", "z"};
    put_keys(a, keys, 4);
    put_keys(b, keys, 4);
    NDS_OK(nds_kvstore_delete_range(a, "k2", ""));
    assert_list(a, "", "k1=1");
    assert_list(b, "", "k1=1,k2=1,m/1=1,z=1");
    NDS_OK(nds_kvstore_delete_range(a, "", ""));
    assert_list(a, "", "");
    assert_list(base, "", "b/k1=1,b/k2=1,b/m/1=1,b/z=1");
    nds_kvstore_free(a);
    nds_kvstore_free(b);
    nds_kvstore_free(base);
}
END_TEST

/* ---- handles ---- */

START_TEST(handles_share_and_isolate) {
    const char *url = g_makers[_i]();
    nds_kvstore *one = open_url(url), *two = open_url(url), *other = open_fresh(_i);
    /* A snapshot store's handle sees others' writes only once it is opened again. */
    bool snapshot = nds_kvstore_capabilities(one) & NDS_KV_CAP_SNAPSHOT;
    nds_generation g = nds_kv_test_put(one, "shared", "s");
    nds_generation g2;
    if (snapshot) {
        nds_kvstore_free(two);
        two = open_url(url);
    }
    char *v = nds_kv_test_get(two, "shared", &g2);
    ck_assert_str_eq(v, "s");
    ck_assert(nds_generation_equal(&g, &g2));
    free(v);
    assert_value(other, "shared", NULL);
    nds_kvstore *sub = NULL;
    NDS_OK(nds_kvstore_sub(&sub, one, "deep/er/"));
    nds_kv_test_put(sub, "k", "sub");
    if (snapshot) {
        nds_kvstore_free(two);
        two = open_url(url);
    }
    assert_value(two, "deep/er/k", "sub");
    const char *sub_path = nds_kvstore_path(sub);
    ck_assert_uint_ge(strlen(sub_path), 8);
    ck_assert_str_eq(sub_path + strlen(sub_path) - 8, "deep/er/");
    assert_list(one, "deep/", "deep/er/k=3");
    assert_list(sub, "", "k=3");
    nds_kvstore_free(sub);
    nds_kvstore_free(one);
    nds_kvstore_free(two);
    nds_kvstore_free(other);
}
END_TEST

/* ---- concurrency ---- */

typedef struct counter_job {
    nds_kvstore *kv; /* shared handle, or NULL to open url */
    const char *url;
    int increments;
    int conflicts;
} counter_job;

static void *counter_thread(void *arg) {
    counter_job *job = arg;
    nds_kvstore *kv = job->kv ? job->kv : open_url(job->url);
    for (int i = 0; i < job->increments; i++)
        job->conflicts += nds_kv_test_increment(kv, "counter");
    if (!job->kv)
        nds_kvstore_free(kv);
    return NULL;
}

START_TEST(concurrent_counter_no_lost_update) {
    enum { THREADS = 4, EACH = 100 };
    const char *url = g_makers[_i]();
    nds_kvstore *kv = open_url(url);
    counter_job jobs[THREADS];
    pthread_t tid[THREADS];
    for (int t = 0; t < THREADS; t++) {
        /* Half share one handle, half open their own: both must exclude each other. */
        jobs[t] = (counter_job){t % 2 ? kv : NULL, url, EACH, 0};
        ck_assert_int_eq(pthread_create(&tid[t], NULL, counter_thread, &jobs[t]), 0);
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(tid[t], NULL);
    char expected[16];
    snprintf(expected, sizeof expected, "%d", THREADS * EACH);
    if (nds_kvstore_capabilities(kv) & NDS_KV_CAP_SNAPSHOT) { /* see the others' commits */
        nds_kvstore_free(kv);
        kv = open_url(url);
    }
    assert_value(kv, "counter", expected);
    nds_kvstore_free(kv);
}
END_TEST

TCase *nds_kv_conformance_tcase(const char *name, nds_kv_url_fn make_url) {
    if (g_maker_count == MAX_MAKERS)
        return NULL;
    int i = g_maker_count;
    g_makers[g_maker_count++] = make_url;
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, open_url_and_capabilities, i, i + 1);
    tcase_add_loop_test(tc, read_missing_key, i, i + 1);
    tcase_add_loop_test(tc, write_then_read, i, i + 1);
    tcase_add_loop_test(tc, overwrite_changes_generation, i, i + 1);
    tcase_add_loop_test(tc, delete_key, i, i + 1);
    tcase_add_loop_test(tc, empty_value, i, i + 1);
    tcase_add_loop_test(tc, large_value, i, i + 1);
    tcase_add_loop_test(tc, create_only_write, i, i + 1);
    tcase_add_loop_test(tc, conditional_write, i, i + 1);
    tcase_add_loop_test(tc, conditional_delete, i, i + 1);
    tcase_add_loop_test(tc, read_if_not_equal, i, i + 1);
    tcase_add_loop_test(tc, read_if_equal, i, i + 1);
    tcase_add_loop_test(tc, byte_ranges, i, i + 1);
    tcase_add_loop_test(tc, ranges_into_buffers, i, i + 1);
    tcase_add_loop_test(tc, write_in_pieces, i, i + 1);
    tcase_add_loop_test(tc, keys_with_slashes, i, i + 1);
    tcase_add_loop_test(tc, list_by_prefix, i, i + 1);
    tcase_add_loop_test(tc, list_callback_stops, i, i + 1);
    tcase_add_loop_test(tc, list_many_keys, i, i + 1);
    tcase_add_loop_test(tc, delete_range_bounds, i, i + 1);
    tcase_add_loop_test(tc, delete_range_unbounded, i, i + 1);
    tcase_add_loop_test(tc, handles_share_and_isolate, i, i + 1);
    tcase_add_loop_test(tc, concurrent_counter_no_lost_update, i, i + 1);
    return tc;
}
