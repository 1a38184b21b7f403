/* Fixed thread pool with a blocking parallel-for. Workers take whole jobs from a queue; within a
 * job every participating thread (the caller included) claims indices from an atomic counter, so
 * the number of chunks in flight is bounded by the number of threads. Lock order: pool->mu, then
 * nothing. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal/error.h"
#include "internal/pool.h"

typedef struct job {
    nds_task_fn fn;
    void *ctx;
    size_t n;
    atomic_size_t next;    /* next index to claim */
    atomic_int failed;     /* set by the first failing task */
    size_t helpers_wanted; /* workers that may still join */
    size_t active;         /* threads inside run_job (under pool->mu) */
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

static void run_job(job *j) {
    for (;;) {
        if (atomic_load(&j->failed)) return;
        size_t i = atomic_fetch_add(&j->next, 1);
        if (i >= j->n) return;
        int rc = j->fn(j->ctx, i);
        if (rc != 0) {
            pthread_mutex_lock(&j->err_mu);
            if (!atomic_load(&j->failed)) {
                nds_error_save(&j->err, rc);
                atomic_store(&j->failed, 1);
            }
            pthread_mutex_unlock(&j->err_mu);
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
        run_job(j);
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
    if (n == 0) return 0;
    job j;
    memset(&j, 0, sizeof j);
    j.fn = fn;
    j.ctx = ctx;
    j.n = n;
    atomic_init(&j.next, 0);
    atomic_init(&j.failed, 0);
    pthread_mutex_init(&j.err_mu, NULL);
    /* In a forked child the caller does all the work, touching nothing of the pool. */
    size_t helpers = p && p->pid == getpid() ? (size_t)p->threads : 0;
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
    run_job(&j);
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
