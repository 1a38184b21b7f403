/* Fixed thread pool with a blocking parallel-for. Workers take whole jobs from a queue; within a
 * job every participating thread (the caller included) claims indices from an atomic counter, so
 * the number of chunks in flight is bounded by the number of threads, and, for a job with a memory
 * budget, by the budget: each thread takes a task's bytes before claiming an index and gives them
 * back after it. Lock order: pool->mu, then nothing; a budget's lock is never taken under
 * pool->mu. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal/budget.h"
#include "internal/error.h"
#include "internal/pool.h"
#include "internal/scratch.h"

#ifdef __GLIBC__
#include <malloc.h> /* malloc_trim */
#endif

typedef struct job {
    nds_task_fn fn;
    void *ctx;
    size_t n;
    atomic_size_t next;    /* next index to claim */
    atomic_int failed;     /* set by the first failing task */
    size_t helpers_wanted; /* workers that may still join */
    size_t active;         /* threads inside run_job (under pool->mu) */
    nds_budget *budget;    /* NULL: tasks run without one */
    size_t task_bytes;     /* what one task holds of budget */
    size_t keep;           /* buffer bytes a thread may keep between tasks: its share of budget */
    pthread_mutex_t err_mu;
    nds_error_saved err; /* first error, valid when failed */
    struct job *next_job;
} job;

struct nds_pool {
    pthread_mutex_t mu;
    pthread_cond_t work; /* a job was queued, or shutdown */
    pthread_cond_t done; /* a thread left a job */
    job *queue;          /* jobs that still want helpers */
    int threads;
    int waiting; /* workers that have reached their wait for work (see nds_pool_new) */
    int shutdown;
    pthread_t *tid;
    pid_t pid; /* of the creator: a forked child has none of its workers, and may have inherited mu
                  locked by one of them (a worker finishing a job while the parent forked) */
};

/* Whether a job needs no more threads: every index is claimed, or a task failed. A thread
 * waiting for budget gives up then (its caller may hold the budget it waits for: see
 * nds_pool_for_budget). */
static bool job_over(void *arg) {
    job *j = arg;
    return atomic_load(&j->failed) || atomic_load(&j->next) >= j->n;
}

static void record_failure(job *j, int rc) {
    pthread_mutex_lock(&j->err_mu);
    if (!atomic_load(&j->failed)) {
        nds_error_save(&j->err, rc);
        atomic_store(&j->failed, 1);
    }
    pthread_mutex_unlock(&j->err_mu);
}

enum { KEEP_PARTS = 16 };          /* see keep_bytes */
#define TRIM_MIN ((size_t)1 << 20) /* freed bytes worth a malloc_trim */

static _Thread_local int tasks_running; /* tasks of any job this thread is inside */

/* After a task under a budget: the thread's reusable buffers (internal/scratch.h, e.g.
 * a decoded chunk) beyond keep bytes are freed and, with glibc, handed back to the system when
 * large (its per-thread arenas would otherwise keep them, so memory would follow the threads, not
 * the budget; small ones are reused from its bins anyway). */
static void trim_scratch(size_t keep) {
    size_t freed = 0;
    for (int slot = 0; slot < NDS_SCRATCH_SLOTS; slot++) {
        nds_buf *b = nds_scratch_buf(slot);
        if (b && b->cap > keep) {
            freed += b->cap;
            nds_buf_dispose(b);
        }
    }
#ifdef __GLIBC__
    if (freed >= TRIM_MIN) malloc_trim(0);
#else
    (void)freed;
#endif
}

/* Buffer bytes a thread may keep between tasks under a budget of total bytes shared by a pool of
 * threads. Kept buffers are memory the budget does not see, on every thread that ran a task (the
 * application's calling threads too, however many): each keeps at most its share of the budget,
 * and at most a sixteenth of it, so up to 16 such threads keep at most the budget. */
static size_t keep_bytes(size_t total, size_t threads) {
    size_t share = total / threads;
    return share < total / KEEP_PARTS ? share : total / KEEP_PARTS;
}

/* Claims and runs tasks until none is left. With budget (non-NULL), each task's bytes are taken
 * before its index is claimed, so a thread that waits holds no index the others could run. */
static void run_job(job *j, nds_budget *budget) {
    for (;;) {
        if (atomic_load(&j->failed)) return;
        if (budget && !nds_budget_acquire(budget, j->task_bytes, job_over, j)) return;
        size_t i = atomic_fetch_add(&j->next, 1);
        tasks_running++;
        int rc = i < j->n ? j->fn(j->ctx, i) : 0;
        tasks_running--;
        if (budget) {
            /* Not inside another task: that one may still use its buffers. */
            if (tasks_running == 0) trim_scratch(j->keep);
            nds_budget_release(budget, j->task_bytes);
        }
        if (i >= j->n) return;
        if (rc != 0) {
            record_failure(j, rc);
            return;
        }
    }
}

static void unlink_job(nds_pool *p, job *j) {
    for (job **q = &p->queue; *q; q = &(*q)->next_job)
        if (*q == j) {
            *q = j->next_job;
            return;
        }
}

static void *worker(void *arg) {
    nds_pool *p = arg;
    pthread_mutex_lock(&p->mu);
    p->waiting++;
    pthread_cond_broadcast(&p->done);
    for (;;) {
        while (!p->queue && !p->shutdown) pthread_cond_wait(&p->work, &p->mu);
        if (p->shutdown) break;
        job *j = p->queue;
        if (--j->helpers_wanted == 0) unlink_job(p, j);
        j->active++;
        pthread_mutex_unlock(&p->mu);
        run_job(j, j->budget); /* a worker holds no budget between jobs */
        pthread_mutex_lock(&p->mu);
        j->active--;
        pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int nds_pool_new(nds_pool **out, int threads) {
    nds_pool *p = calloc(1, sizeof *p);
    if (!p) return nds_err(NDS_ENOMEM, "out of memory creating the thread pool");
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    p->tid = calloc(threads > 0 ? (size_t)threads : 1, sizeof *p->tid);
    if (!p->tid) {
        free(p);
        return nds_err(NDS_ENOMEM, "out of memory creating the thread pool");
    }
    p->pid = getpid();
    for (int i = 0; i < threads; i++) {
        if (pthread_create(&p->tid[i], NULL, worker, p) != 0) break;
        p->threads++;
    }
    /* Return only once every worker waits for work, touching nothing: a process may then fork()
     * safely (no worker is half-way through its start, e.g. inside an allocator that has no fork
     * handler, as AddressSanitizer's: a child inherited its lock held and hung). */
    pthread_mutex_lock(&p->mu);
    while (p->waiting < p->threads) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
    *out = p;
    return 0;
}

void nds_pool_free(nds_pool *p) {
    if (!p) return;
    if (p->pid != getpid()) { /* a forked child: the workers (and maybe mu) are the parent's */
        free(p->tid);
        free(p);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->shutdown = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->threads; i++) pthread_join(p->tid[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    free(p->tid);
    free(p);
}

int nds_pool_for(nds_pool *p, size_t n, size_t max_parallel, nds_task_fn fn, void *ctx) {
    return nds_pool_for_budget(p, NULL, 0, n, max_parallel, fn, ctx);
}

int nds_pool_for_budget(nds_pool *p, nds_budget *budget, size_t task_bytes, size_t n,
                        size_t max_parallel, nds_task_fn fn, void *ctx) {
    if (n == 0) return 0;
    job j;
    memset(&j, 0, sizeof j);
    j.fn = fn;
    j.ctx = ctx;
    j.n = n;
    atomic_init(&j.next, 0);
    atomic_init(&j.failed, 0);
    pthread_mutex_init(&j.err_mu, NULL);
    /* In a forked child the caller does all the work, touching nothing of the pool, nor of the
     * budget: the parent's tasks hold part of it and will never give it back here. */
    bool own = p && p->pid == getpid();
    j.budget = own ? budget : NULL;
    j.task_bytes = task_bytes;
    j.keep = budget ? keep_bytes(nds_budget_total(budget), own ? (size_t)p->threads + 1 : 1) : 0;
    size_t helpers = own ? (size_t)p->threads : 0;
    if (max_parallel > 0 && helpers > max_parallel - 1) helpers = max_parallel - 1;
    if (helpers > n - 1) helpers = n - 1;
    if (helpers > 0) {
        pthread_mutex_lock(&p->mu);
        j.helpers_wanted = helpers;
        j.next_job = p->queue;
        p->queue = &j;
        pthread_cond_broadcast(&p->work);
        pthread_mutex_unlock(&p->mu);
    }
    /* A caller that holds budget already (a task running a nested parallel-for) runs its share
     * under what it holds: waiting for more could wait for itself. Helpers still take their own. */
    run_job(&j, nds_budget_held() > 0 ? NULL : j.budget);
    if (j.budget) nds_budget_wake(j.budget); /* helpers waiting for budget: the job is over */
    if (helpers > 0) {
        pthread_mutex_lock(&p->mu);
        if (j.helpers_wanted > 0) unlink_job(p, &j); /* no one else may join now */
        j.helpers_wanted = 0;
        while (j.active > 0) pthread_cond_wait(&p->done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
    pthread_mutex_destroy(&j.err_mu);
    return atomic_load(&j.failed) ? nds_error_restore(&j.err) : 0;
}
