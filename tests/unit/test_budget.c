/* The memory budget (lib/budget.c) and the pool's parallel-for under it (lib/pool.c): never more
 * than the budget held at once, counted; a request larger than the budget runs alone; waiters
 * served in arrival order; nested parallel-fors under one budget do not deadlock; and the peak
 * memory of 8 concurrent full reads on one context stays under the budget plus a fixed overhead.
 * Every test that could hang runs under alarm(): a deadlock fails with SIGALRM, not a CI timeout.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "support_check.h"
#include "support_format.h"
#include "internal/budget.h"
#include "internal/error.h"
#include "internal/context_internal.h"
#include "internal/pool.h"

#define GUARD_SECONDS 60 /* far above what any test here takes: only a deadlock reaches it */

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* What the holders of a budget hold at once, counted by themselves. */
typedef struct holders {
    nds_budget *b;
    atomic_size_t now, peak;
    atomic_size_t tasks;
    size_t bytes; /* per task, for the pool tests */
    nds_pool *pool;
} holders;

static void hold(holders *h, size_t bytes) {
    size_t now = atomic_fetch_add(&h->now, bytes) + bytes;
    size_t peak = atomic_load(&h->peak);
    while (now > peak && !atomic_compare_exchange_weak(&h->peak, &peak, now)) {
    }
}

static void unhold(holders *h, size_t bytes) { atomic_fetch_sub(&h->now, bytes); }

/* Fresh holders of tasks of bytes each, with a budget and a pool of threads. */
static void holders_init(holders *h, size_t bytes, size_t budget, int threads) {
    memset(h, 0, sizeof *h);
    h->bytes = bytes;
    NDS_OK(nds_budget_new(&h->b, budget));
    if (threads) NDS_OK(nds_pool_new(&h->pool, threads));
}

static void holders_free(holders *h) {
    nds_pool_free(h->pool);
    nds_budget_free(h->b);
}

static void *acquire_loop(void *arg) {
    holders *h = arg;
    unsigned seed = (unsigned)(uintptr_t)pthread_self();
    for (int k = 0; k < 2000; k++) {
        size_t bytes = 1 + (size_t)rand_r(&seed) % 40;
        ck_assert(nds_budget_acquire(h->b, bytes, NULL, NULL));
        ck_assert_uint_eq(nds_budget_held(), bytes);
        hold(h, bytes);
        if (k % 64 == 0) sleep_us(50);
        unhold(h, bytes);
        nds_budget_release(h->b, bytes);
    }
    ck_assert_uint_eq(nds_budget_held(), 0);
    return NULL;
}

START_TEST(many_threads_never_hold_more_than_the_budget) {
    alarm(GUARD_SECONDS);
    static holders h;
    holders_init(&h, 0, 100, 0);
    pthread_t t[8];
    for (int i = 0; i < 8; i++) ck_assert_int_eq(pthread_create(&t[i], NULL, acquire_loop, &h), 0);
    for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
    ck_assert_uint_le(atomic_load(&h.peak), 100);
    ck_assert_uint_gt(atomic_load(&h.peak), 40); /* several held at once: it is not a mutex */
    ck_assert_uint_eq(nds_budget_in_use(h.b), 0);
    holders_free(&h);
}
END_TEST

typedef struct request {
    nds_budget *b;
    size_t bytes;
    atomic_int state;  /* 0 waiting, 1 holding, 2 done */
    atomic_int *order; /* the next place in the order of arrival at "holding" */
    int place;
    atomic_int release; /* set to let the holder go */
} request;

static void *request_thread(void *arg) {
    request *r = arg;
    ck_assert(nds_budget_acquire(r->b, r->bytes, NULL, NULL));
    r->place = atomic_fetch_add(r->order, 1);
    atomic_store(&r->state, 1);
    while (!atomic_load(&r->release)) sleep_us(200);
    nds_budget_release(r->b, r->bytes);
    atomic_store(&r->state, 2);
    return NULL;
}

static void wait_state(request *r, int state) {
    while (atomic_load(&r->state) != state) sleep_us(200);
}

/* A request larger than the whole budget waits until nothing else is held, then runs alone; one
 * that arrived after it waits behind it even though it would fit (arrival order). */
START_TEST(larger_than_the_budget_runs_alone_in_arrival_order) {
    alarm(GUARD_SECONDS);
    nds_budget *b;
    NDS_OK(nds_budget_new(&b, 100));
    atomic_int order = 0;
    static request small, big, later;
    small = (request){b, 30, 0, &order, -1, 0};
    big = (request){b, 250, 0, &order, -1, 0};
    later = (request){b, 10, 0, &order, -1, 0};
    pthread_t ts, tb, tl;
    pthread_create(&ts, NULL, request_thread, &small);
    wait_state(&small, 1);
    pthread_create(&tb, NULL, request_thread, &big);
    sleep_us(50000);
    ck_assert_int_eq(atomic_load(&big.state), 0); /* 30 held: 250 must wait */
    pthread_create(&tl, NULL, request_thread, &later);
    sleep_us(50000);
    ck_assert_int_eq(atomic_load(&later.state), 0); /* fits, but queued behind the big one */
    atomic_store(&small.release, 1);
    wait_state(&big, 1);
    ck_assert_uint_eq(nds_budget_in_use(b), 250);
    sleep_us(50000);
    ck_assert_int_eq(atomic_load(&later.state), 0); /* the big one runs alone */
    atomic_store(&big.release, 1);
    atomic_store(&later.release, 1);
    pthread_join(ts, NULL), pthread_join(tb, NULL), pthread_join(tl, NULL);
    ck_assert_int_eq(big.place, 1);
    ck_assert_int_eq(later.place, 2);
    ck_assert_uint_eq(nds_budget_in_use(b), 0);
    nds_budget_free(b);
}
END_TEST

static bool flag_set(void *arg) { return atomic_load((atomic_int *)arg) != 0; }

typedef struct giver {
    nds_budget *b;
    atomic_int flag;
    atomic_int result; /* -1 running, 0 gave up, 1 took */
} giver;

static void *give_up_thread(void *arg) {
    giver *g = arg;
    atomic_store(&g->result, nds_budget_acquire(g->b, 10, flag_set, &g->flag) ? 1 : 0);
    return NULL;
}

/* A waiter gives up when its give_up turns true and it is woken, taking nothing. */
START_TEST(a_waiter_gives_up_when_told) {
    alarm(GUARD_SECONDS);
    static giver g;
    NDS_OK(nds_budget_new(&g.b, 10));
    atomic_store(&g.result, -1);
    ck_assert(nds_budget_acquire(g.b, 10, NULL, NULL));
    pthread_t t;
    pthread_create(&t, NULL, give_up_thread, &g);
    sleep_us(50000);
    ck_assert_int_eq(atomic_load(&g.result), -1);
    atomic_store(&g.flag, 1);
    nds_budget_wake(g.b);
    pthread_join(t, NULL);
    ck_assert_int_eq(atomic_load(&g.result), 0);
    ck_assert_uint_eq(nds_budget_in_use(g.b), 10); /* only the first holder's */
    nds_budget_release(g.b, 10);
    nds_budget_free(g.b);
}
END_TEST

static int counted_task(void *ctx, size_t i) {
    holders *h = ctx;
    (void)i;
    hold(h, h->bytes);
    sleep_us(300);
    unhold(h, h->bytes);
    atomic_fetch_add(&h->tasks, 1);
    return 0;
}

typedef struct caller {
    holders *h;
    size_t n;
} caller;

static void *pool_caller(void *arg) {
    caller *c = arg;
    NDS_OK(nds_pool_for_budget(c->h->pool, c->h->b, c->h->bytes, c->n, 0, counted_task, c->h));
    return NULL;
}

/* Four concurrent parallel-fors on one 7-thread pool share a budget of 3 tasks: never more than 3
 * run at once (without the budget, up to 11 would). */
START_TEST(concurrent_calls_share_the_budget) {
    alarm(GUARD_SECONDS);
    static holders h;
    holders_init(&h, 1000, 3000, 7);
    caller c = {&h, 60};
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, pool_caller, &c);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    ck_assert_uint_eq(atomic_load(&h.tasks), 240);
    ck_assert_uint_le(atomic_load(&h.peak), 3000);
    ck_assert_uint_eq(atomic_load(&h.peak), 3000); /* and the budget is used */
    ck_assert_uint_eq(nds_budget_in_use(h.b), 0);
    holders_free(&h);
}
END_TEST

/* Tasks larger than the whole budget run one at a time, and all run. */
START_TEST(tasks_larger_than_the_budget_run_one_at_a_time) {
    alarm(GUARD_SECONDS);
    static holders h;
    holders_init(&h, 5000, 3000, 3);
    caller c = {&h, 20};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, pool_caller, &c);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    ck_assert_uint_eq(atomic_load(&h.tasks), 40);
    ck_assert_uint_eq(atomic_load(&h.peak), 5000);
    holders_free(&h);
}
END_TEST

static int nested_outer(void *ctx, size_t i) {
    holders *h = ctx;
    (void)i;
    ck_assert_uint_eq(nds_budget_held(), h->bytes); /* this task's bytes */
    return nds_pool_for_budget(h->pool, h->b, h->bytes, 20, 0, counted_task, h);
}

/* Every outer task holds the whole budget and runs a nested parallel-for under the same budget:
 * the calling thread runs the nested tasks under what it holds; the pool's other threads that
 * join wait for budget and give up when the nested call is done, so nothing waits for itself. */
START_TEST(nested_calls_under_one_budget_do_not_deadlock) {
    alarm(GUARD_SECONDS);
    static holders h;
    holders_init(&h, 1000, 1000, 3);
    for (int round = 0; round < 20; round++)
        NDS_OK(nds_pool_for_budget(h.pool, h.b, h.bytes, 8, 0, nested_outer, &h));
    ck_assert_uint_eq(atomic_load(&h.tasks), 20 * 8 * 20);
    ck_assert_uint_eq(nds_budget_in_use(h.b), 0);
    ck_assert_uint_eq(nds_budget_held(), 0);
    holders_free(&h);
}
END_TEST

/* The same from several threads at once, with room for two outer tasks: nested helpers then do
 * find budget, and may hold it while the other outer task waits. */
START_TEST(concurrent_nested_calls_do_not_deadlock) {
    alarm(GUARD_SECONDS);
    static holders h;
    holders_init(&h, 1000, 2500, 5);
    pthread_t t[3];
    caller c = {&h, 6};
    for (int i = 0; i < 3; i++) pthread_create(&t[i], NULL, pool_caller, &c);
    for (int round = 0; round < 10; round++)
        NDS_OK(nds_pool_for_budget(h.pool, h.b, h.bytes, 6, 0, nested_outer, &h));
    for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
    ck_assert_uint_eq(atomic_load(&h.tasks), 3 * 6 + 10 * 6 * 20);
    ck_assert_uint_eq(nds_budget_in_use(h.b), 0);
    holders_free(&h);
}
END_TEST

/* A failing task under a budget: the error reaches the caller and every byte comes back. */
static int fail_some(void *ctx, size_t i) {
    (void)ctx;
    return i == 5 ? nds_err(NDS_ECORRUPT, "task %zu went wrong", i) : 0;
}

START_TEST(a_failure_gives_the_budget_back) {
    alarm(GUARD_SECONDS);
    nds_budget *b;
    nds_pool *p;
    NDS_OK(nds_budget_new(&b, 100));
    NDS_OK(nds_pool_new(&p, 3));
    ck_assert_int_eq(nds_pool_for_budget(p, b, 40, 50, 0, fail_some, NULL), NDS_ECORRUPT);
    ck_assert_str_eq(nds_error_last()->message, "task 5 went wrong");
    ck_assert_uint_eq(nds_budget_in_use(b), 0);
    nds_pool_free(p);
    nds_budget_free(b);
}
END_TEST

/* ---- every call still runs under a budget smaller than one chunk ---- */

/* Writes 64 x 64 elements into the array spec creates (in txn, committed, when not NULL), then
 * reads them back through url, both on ctx. */
static void round_trip(const char *spec, const char *url, nds_context *ctx, nds_txn *txn) {
    nds_open_options o = NDS_OPEN_OPTIONS_INIT;
    o.ctx = ctx;
    o.txn = txn;
    nds_array *a;
    NDS_OK(nds_array_open(&a, spec, &o));
    static uint16_t in[64 * 64], out[64 * 64];
    for (size_t i = 0; i < 64 * 64; i++) in[i] = (uint16_t)(i * 7);
    nds_box box;
    nds_box_full(&box, 2, (uint64_t[]){64, 64});
    NDS_OK(nds_array_write(a, &box, in, NULL));
    if (txn) NDS_OK(nds_txn_commit(txn)); /* while the array is open: it must outlive the commit */
    nds_array_free(a);
    o.txn = NULL;
    NDS_OK(nds_array_open(&a, url, &o));
    memset(out, 0, sizeof out);
    NDS_OK(nds_array_read(a, &box, out, NULL));
    ck_assert(memcmp(in, out, sizeof in) == 0);
    nds_array_free(a);
}

/* A budget of one byte: every chunk task is larger than the whole budget, so each runs alone;
 * reads, writes, grouped (sharded) writes and a transaction's commit (which runs on the default
 * context, here given the same one-byte budget) all complete, with the right elements. */
START_TEST(a_budget_smaller_than_a_chunk_runs_every_call) {
    alarm(GUARD_SECONDS);
    setenv("NDS_MEMORY_BUDGET", "1", 1); /* the default context: made in this (forked) test */
    ck_assert_uint_eq(nds_context_memory_budget(NULL), 1);
    nds_context_options co = NDS_CONTEXT_OPTIONS_INIT;
    co.threads = 4;
    co.memory_budget = 1;
    nds_context *ctx;
    NDS_OK(nds_context_new(&ctx, &co));
    round_trip("{\"driver\":\"zarr\",\"kvstore\":\"memory://tiny_v2/\",\"create\":true,"
               "\"metadata\":{\"shape\":[64,64],\"chunks\":[8,8],\"dtype\":\"<u2\","
               "\"compressor\":{\"id\":\"zstd\",\"level\":1},\"fill_value\":0}}",
               "memory://tiny_v2/|zarr:", ctx, NULL);
    char spec[2048];
    snprintf(spec, sizeof spec,
             "{\"driver\":\"zarr3\",\"kvstore\":\"memory://tiny_v3/\",\"create\":true,"
             "\"metadata\":%s}",
             zarr3_array_doc("[64,64]", "uint16", "[32,32]", "0",
                             "[{\"name\":\"sharding_indexed\",\"configuration\":{"
                             "\"chunk_shape\":[8,8],\"codecs\":[{\"name\":\"bytes\","
                             "\"configuration\":{\"endian\":\"little\"}}],\"index_codecs\":["
                             "{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}}]}}]"));
    round_trip(spec, "memory://tiny_v3/|zarr3:", ctx, NULL);
    nds_txn *t;
    NDS_OK(nds_txn_begin(&t, NULL));
    round_trip("{\"driver\":\"zarr\",\"kvstore\":\"memory://tiny_txn/\",\"create\":true,"
               "\"metadata\":{\"shape\":[64,64],\"chunks\":[8,8],\"dtype\":\"<u2\","
               "\"compressor\":{\"id\":\"zstd\",\"level\":1},\"fill_value\":0}}",
               "memory://tiny_txn/|zarr:", NULL, t);
    nds_txn_free(t);
    ck_assert_uint_eq(nds_budget_in_use(nds_context_budget(ctx)), 0);
    ck_assert_uint_eq(nds_budget_in_use(nds_context_budget(NULL)), 0);
    nds_context_free(ctx);
}
END_TEST

/* ---- peak memory of concurrent reads ---- */

/* AddressSanitizer's quarantine and allocator keep freed memory: its peak says nothing of ours. */
#if defined(__SANITIZE_ADDRESS__)
#define PEAK_MEASURABLE 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PEAK_MEASURABLE 0
#endif
#endif
#ifndef PEAK_MEASURABLE
#define PEAK_MEASURABLE 1
#endif

#define READERS 8
#define CHUNK_MIB 8
#define ARRAY_CHUNKS 4

/* A /proc/self/status value in bytes ("VmHWM", "VmRSS"). */
static size_t status_bytes(const char *name) {
    FILE *f = fopen("/proc/self/status", "r");
    ck_assert_ptr_nonnull(f);
    char line[256];
    size_t kib = 0, n = strlen(name);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, name, n) == 0 && line[n] == ':') kib = strtoull(line + n + 1, NULL, 10);
    fclose(f);
    ck_assert_uint_gt(kib, 0);
    return kib << 10;
}

/* Resets VmHWM to the current RSS (Linux >= 4.0); false where that is not allowed. */
static bool reset_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return false;
    bool ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

typedef struct reader {
    nds_array *a;
    uint8_t *out;
    const nds_box *box;
} reader;

static void *full_read(void *arg) {
    reader *r = arg;
    NDS_OK(nds_array_read(r->a, r->box, r->out, NULL));
    return NULL;
}

static nds_array *open_in(nds_context *ctx, bool create) {
    char spec[512];
    snprintf(spec, sizeof spec,
             "{\"driver\":\"zarr\",\"kvstore\":\"memory://budget_rss/\",%s\"metadata\":{"
             "\"shape\":[%d,1024,2048],\"chunks\":[%d,1024,2048],\"dtype\":\"|u1\","
             "\"compressor\":{\"id\":\"zstd\",\"level\":1},\"fill_value\":0}}",
             create ? "\"create\":true," : "", CHUNK_MIB / 2 * ARRAY_CHUNKS, CHUNK_MIB / 2);
    nds_open_options o = NDS_OPEN_OPTIONS_INIT;
    o.ctx = ctx;
    nds_array *a;
    NDS_OK(nds_array_open(&a, spec, &o));
    return a;
}

/* 8 threads read a whole array of 8 MiB zstd chunks at once on one context of 4 threads (8 callers
 * plus 3 workers: up to 11 chunks decoding, 88 MiB and more, without a budget). With a budget of
 * 24 MiB (one task's estimate: 16 MiB), the peak memory beyond the outputs stays under the budget
 * plus a fixed overhead. Without the budget (the library before it) this measured 100+ MiB. */
START_TEST(concurrent_reads_peak_under_the_budget) {
    alarm(GUARD_SECONDS);
    if (!reset_peak()) return; /* no /proc/self/clear_refs: nothing to measure against */
    const size_t budget = (size_t)24 << 20, overhead = (size_t)24 << 20;
    const size_t bytes = (size_t)CHUNK_MIB * ARRAY_CHUNKS << 20;
    nds_array *w = open_in(NULL, true);
    uint8_t *data = malloc(bytes);
    ck_assert_ptr_nonnull(data);
    for (size_t i = 0; i < bytes; i++) data[i] = (uint8_t)(i * 2654435761u >> 13) & 7;
    nds_box box;
    nds_box_full(&box, 3, (uint64_t[]){CHUNK_MIB / 2 * ARRAY_CHUNKS, 1024, 2048});
    NDS_OK(nds_array_write(w, &box, data, NULL));
    nds_array_free(w);

    nds_context_options co = NDS_CONTEXT_OPTIONS_INIT;
    co.threads = 4;
    co.memory_budget = budget;
    nds_context *ctx;
    NDS_OK(nds_context_new(&ctx, &co));
    nds_array *a = open_in(ctx, false);
    reader r[READERS];
    for (int i = 0; i < READERS; i++) {
        r[i] = (reader){a, malloc(bytes), &box};
        ck_assert_ptr_nonnull(r[i].out);
        memset(r[i].out, 0xff, bytes); /* the outputs are resident before the peak is reset */
    }
    ck_assert(reset_peak());
    size_t before = status_bytes("VmRSS");
    pthread_t t[READERS];
    for (int i = 0; i < READERS; i++) pthread_create(&t[i], NULL, full_read, &r[i]);
    for (int i = 0; i < READERS; i++) pthread_join(t[i], NULL);
    size_t peak = status_bytes("VmHWM") - before;
    for (int i = 0; i < READERS; i++) {
        ck_assert(memcmp(r[i].out, data, bytes) == 0);
        free(r[i].out);
    }
    fprintf(stderr, "8 concurrent full reads: peak %zu MiB beyond the outputs, budget %zu MiB%s\n",
            peak >> 20, budget >> 20,
            PEAK_MEASURABLE ? "" : " (not checked under AddressSanitizer)");
    ck_assert_msg(!PEAK_MEASURABLE || peak <= budget + overhead,
                  "peak %zu MiB above the outputs, over the budget %zu MiB + %zu MiB", peak >> 20,
                  budget >> 20, overhead >> 20);
    nds_array_free(a);
    nds_context_free(ctx);
    free(data);
}
END_TEST

int main(void) {
    Suite *s = suite_create("budget");
    TCase *tc = tcase_create("budget");
    tcase_add_test(tc, many_threads_never_hold_more_than_the_budget);
    tcase_add_test(tc, larger_than_the_budget_runs_alone_in_arrival_order);
    tcase_add_test(tc, a_waiter_gives_up_when_told);
    tcase_add_test(tc, concurrent_calls_share_the_budget);
    tcase_add_test(tc, tasks_larger_than_the_budget_run_one_at_a_time);
    tcase_add_test(tc, nested_calls_under_one_budget_do_not_deadlock);
    tcase_add_test(tc, concurrent_nested_calls_do_not_deadlock);
    tcase_add_test(tc, a_failure_gives_the_budget_back);
    tcase_add_test(tc, a_budget_smaller_than_a_chunk_runs_every_call);
    tcase_add_test(tc, concurrent_reads_peak_under_the_budget);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
