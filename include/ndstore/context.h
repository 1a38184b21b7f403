/* A context holds what arrays and kvstores share: the thread pool and limits. Internally synchronised. */
#ifndef NDSTORE_CONTEXT_H
#define NDSTORE_CONTEXT_H

#include <stddef.h>
#include "ndstore/version.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nds_context nds_context;

#define NDS_CONTEXT_OPTIONS_VERSION 1 /* cache_bytes was appended without a bump: 0.x, unreleased */
/** Options of nds_context_new. Start from NDS_CONTEXT_OPTIONS_INIT. */
typedef struct nds_context_options {
    int version;
    int threads;            /**< threads for a call's chunk tasks (codec, copy, I/O); 0 = 2 x online cores,
                                 except reads from local stores (memory, file, lmdb): 1 x online cores */
    size_t memory_budget;   /**< bytes of chunks in flight across all calls on this context; a chunk task
                                 waits for its share rather than allocate past it (docs/guarantees.md,
                                 "Memory budget"); 0 = default (256 MiB) */
    size_t cache_bytes;     /**< decoded-chunk cache shared by the context's arrays; 0 = no cache. Hits are
                                 revalidated against the store (a cheap conditional read), never stale. */
} nds_context_options;
#define NDS_CONTEXT_OPTIONS_INIT {NDS_CONTEXT_OPTIONS_VERSION, 0, 0, 0}

/** Creates a context. opts may be NULL. Free with nds_context_free after every user of it is freed. */
NDS_API int nds_context_new(nds_context **out, const nds_context_options *opts);
/** Frees a context. Accepts NULL. Must not be the default context. */
NDS_API void nds_context_free(nds_context *ctx);
/** The process-wide default context, created on first use, never freed. Any thread. */
NDS_API nds_context *nds_context_default(void);
/** Number of worker threads of ctx (NULL = default). */
NDS_API int nds_context_threads(nds_context *ctx);

#ifdef __cplusplus
}
#endif
#endif
