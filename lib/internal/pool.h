/* A fixed thread pool with a blocking parallel-for; the calling thread takes part, so nesting
 * cannot deadlock (a nested call just runs on fewer threads). A parallel-for may run under a memory
 * budget (internal/budget.h): each task holds its bytes while it runs. Internally synchronised. */
#ifndef NDS_INTERNAL_POOL_H
#define NDS_INTERNAL_POOL_H

#include <stddef.h>

#include "internal/budget.h"

typedef struct nds_pool nds_pool;

/** Creates a pool of threads workers (>= 0; 0 = run everything on the caller). */
int nds_pool_new(nds_pool **out, int threads);
/** Joins the workers and frees. Accepts NULL. */
void nds_pool_free(nds_pool *p);

/** One task of a parallel-for: index i of n. Returns 0 or an NDS_E* code (with the last error set).
 */
typedef int (*nds_task_fn)(void *ctx, size_t i);
/**
 * Runs fn(ctx, i) for i in [0, n) on up to max_parallel threads (0 = all), the caller included, and
 * returns when all have finished. After the first failure no new index starts; the first error
 * (code and message) is returned on the calling thread.
 */
int nds_pool_for(nds_pool *p, size_t n, size_t max_parallel, nds_task_fn fn, void *ctx);
/**
 * nds_pool_for under budget (NULL = none): every task holds task_bytes of it while it runs (the
 * call's estimate of one task's chunk bytes: decoded, stored and encoded), and waits for them
 * before it starts, so the tasks of every call sharing the budget hold at most its total (one task
 * larger than the whole budget runs alone). Nesting: a thread that holds budget runs the tasks it
 * takes of a nested call under what it holds, without waiting; the pool's other threads joining
 * that call wait for their own, and give up the wait when the call has no task left for them.
 * After each task, a thread not inside another task keeps at most min(budget / threads,
 * budget / 16) of its scratch buffers (internal/format_util.h) and frees the rest: kept buffers
 * are memory the budget does not see. A forked child runs without the budget (its parent's tasks
 * hold part of it).
 */
int nds_pool_for_budget(nds_pool *p, nds_budget *budget, size_t task_bytes, size_t n,
                        size_t max_parallel, nds_task_fn fn, void *ctx);

#endif
