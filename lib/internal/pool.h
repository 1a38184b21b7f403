/* A fixed thread pool with a blocking parallel-for; the calling thread takes part, so nesting
 * cannot deadlock (a nested call just runs on fewer threads). Internally synchronised. */
#ifndef NDS_INTERNAL_POOL_H
#define NDS_INTERNAL_POOL_H

#include <stddef.h>

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

#endif
