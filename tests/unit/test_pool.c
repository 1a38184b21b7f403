/* The thread pool's parallel-for: every index once, errors carried to the caller, nesting. */
#include <stdatomic.h>
#include <string.h>
#include "support_check.h"
#include "internal/error.h"
#include "internal/pool.h"

typedef struct counts {
    atomic_int hits[1000];
    nds_pool *pool;
} counts;

static int count_task(void *ctx, size_t i) {
    atomic_fetch_add(&((counts *)ctx)->hits[i], 1);
    return 0;
}

START_TEST(every_index_once) {
    nds_pool *p;
    NDS_OK(nds_pool_new(&p, 3));
    static counts c;
    memset(&c, 0, sizeof c);
    for (int round = 0; round < 20; round++) NDS_OK(nds_pool_for(p, 1000, 0, count_task, &c));
    for (int i = 0; i < 1000; i++) ck_assert_int_eq(atomic_load(&c.hits[i]), 20);
    nds_pool_free(p);
}
END_TEST

static int fail_task(void *ctx, size_t i) {
    (void)ctx;
    return i == 37 ? nds_err(NDS_ECORRUPT, "task %zu went wrong", i) : 0;
}

START_TEST(first_error_reaches_caller) {
    nds_pool *p;
    NDS_OK(nds_pool_new(&p, 2));
    nds_error_clear();
    ck_assert_int_eq(nds_pool_for(p, 100, 0, fail_task, NULL), NDS_ECORRUPT);
    ck_assert_str_eq(nds_error_last()->message, "task 37 went wrong");
    nds_pool_free(p);
}
END_TEST

static int nested_task(void *ctx, size_t i) {
    counts *c = ctx;
    (void)i;
    return nds_pool_for(c->pool, 10, 0, count_task, c);
}

START_TEST(nesting_does_not_deadlock) {
    static counts c;
    memset(&c, 0, sizeof c);
    NDS_OK(nds_pool_new(&c.pool, 2));
    NDS_OK(nds_pool_for(c.pool, 50, 0, nested_task, &c));
    for (int i = 0; i < 10; i++) ck_assert_int_eq(atomic_load(&c.hits[i]), 50);
    nds_pool_free(c.pool);
}
END_TEST

START_TEST(zero_workers_runs_on_caller) {
    nds_pool *p;
    NDS_OK(nds_pool_new(&p, 0));
    static counts c;
    memset(&c, 0, sizeof c);
    NDS_OK(nds_pool_for(p, 5, 0, count_task, &c));
    ck_assert_int_eq(atomic_load(&c.hits[4]), 1);
    nds_pool_free(p);
}
END_TEST

int main(void) {
    Suite *s = suite_create("pool");
    TCase *tc = tcase_create("pool");
    tcase_add_test(tc, every_index_once);
    tcase_add_test(tc, first_error_reaches_caller);
    tcase_add_test(tc, nesting_does_not_deadlock);
    tcase_add_test(tc, zero_workers_runs_on_caller);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
