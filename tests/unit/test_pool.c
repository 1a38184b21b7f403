/* The thread pool's parallel-for: every index once, errors carried to the caller, nesting. */
#include <stdatomic.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
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


static int tiny(void *ctx, size_t i) {
    (void)i;
    atomic_fetch_add((atomic_size_t *)ctx, 1);
    return 0;
}

typedef struct busy {
    nds_pool *pool;
    atomic_int stop;
} busy;

static void *keep_busy(void *arg) {
    busy *b = arg;
    atomic_size_t n;
    atomic_init(&n, 0);
    while (!atomic_load(&b->stop)) nds_pool_for(b->pool, 64, 0, tiny, &n);
    return NULL;
}

/* A child forked while the pool's workers are busy (one may hold the pool's mutex at that instant)
 * can still use the pool: it runs the work itself. 300 forks; a child that hangs is killed after
 * 2 s and fails the test (before the fix a child hung within the first forks). */
START_TEST(forked_child_uses_the_pool_alone) {
    busy b = {0};
    NDS_OK(nds_pool_new(&b.pool, 2));
    atomic_init(&b.stop, 0);
    pthread_t t;
    pthread_create(&t, NULL, keep_busy, &b);
    int hung = 0;
    for (int k = 0; k < 300; k++) {
        pid_t pid = fork();
        if (pid == 0) {
            atomic_size_t n;
            atomic_init(&n, 0);
            int rc = nds_pool_for(b.pool, 100, 0, tiny, &n);
            _exit(rc == 0 && atomic_load(&n) == 100 ? 0 : 1);
        }
        int status = 0;
        struct timespec t0, now;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        while (waitpid(pid, &status, WNOHANG) == 0) {
            clock_gettime(CLOCK_MONOTONIC, &now);
            if (now.tv_sec - t0.tv_sec > 2) {
                kill(pid, SIGKILL);
                waitpid(pid, &status, 0);
                hung++;
                break;
            }
            usleep(200);
        }
        if (!hung) ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d", k);
        if (hung) break;
    }
    atomic_store(&b.stop, 1);
    pthread_join(t, NULL);
    nds_pool_free(b.pool);
    ck_assert_msg(hung == 0, "a forked child hung in the pool");
}
END_TEST

int main(void) {
    Suite *s = suite_create("pool");
    TCase *tc = tcase_create("pool");
    tcase_add_test(tc, every_index_once);
    tcase_add_test(tc, first_error_reaches_caller);
    tcase_add_test(tc, nesting_does_not_deadlock);
    tcase_add_test(tc, zero_workers_runs_on_caller);
    tcase_add_test(tc, forked_child_uses_the_pool_alone);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
