/* What the core knows of a context beyond the public API. */
#ifndef NDS_INTERNAL_CONTEXT_H
#define NDS_INTERNAL_CONTEXT_H

#include "ndstore/context.h"
#include "internal/budget.h"
#include "internal/pool.h"

/** The context's thread pool (ctx NULL = default). */
nds_pool *nds_context_pool(nds_context *ctx);
/** The size in bytes of the context's memory budget (ctx NULL = default). */
size_t nds_context_memory_budget(nds_context *ctx);
/** The context's memory budget, shared by every call on it (ctx NULL = default; NULL when the
 *  default context could not be made): pass it to nds_pool_for_budget. */
nds_budget *nds_context_budget(nds_context *ctx);
/** The context's decoded-chunk cache, NULL when caching is off (ctx NULL = default). */
struct nds_chunk_cache *nds_context_cache(nds_context *ctx);
/** Threads a read from a NDS_KV_CAP_LOCAL store uses by default (ctx NULL = default). */
int nds_context_local_read_threads(nds_context *ctx);
/** ctx, or the default context when ctx is NULL. */
nds_context *nds_context_resolve(nds_context *ctx);

#endif
