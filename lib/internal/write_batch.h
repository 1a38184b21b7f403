/* Staged chunk writes of one array write call, published together (lib/write_batch.c).
 *
 * On a kvstore that can stage (kv_driver.h: stage/publish), the chunks of a write are encoded and
 * staged by the pool's threads, then published in batches of up to NDS_WRITE_BATCH_MAX: the
 * durability cost (file: fsyncs of data and directory) is paid once per batch instead of once per
 * chunk. Each chunk keeps its own condition (the generation it was merged with); a chunk whose
 * publish conflicts is written again through the one-key path (redo), which re-reads and re-merges,
 * so no update is lost. The thread that fills a batch publishes it, outside any chunk lock, while
 * the others go on encoding.
 *
 * Threading: add may be called from many threads at once; init, finish and dispose by the call's
 * thread only. Memory: the batches being filled and published. A store that holds staged values
 * in memory (NDS_KV_CAP_STAGES_IN_MEMORY; lmdb: heap copies, then the transaction's dirty pages)
 * has its batches also published once they reach NDS_WRITE_BATCH_BYTES (measured on lmdb, 256
 * MiB of 64^3 uint16 chunks: peak RSS 439 MiB with 64-value batches, 324 with 8 MiB ones, 277
 * with one transaction per chunk); a file store's staged values are temporary files, and its
 * batches stay whole (one directory fsync each).
 */
#ifndef NDS_INTERNAL_WRITE_BATCH_H
#define NDS_INTERNAL_WRITE_BATCH_H

#include <pthread.h>
#include <stddef.h>

#include "ndstore/kvstore.h"
#include "ndstore/sys/kv_driver.h"

#define NDS_WRITE_BATCH_MAX 64
#define NDS_WRITE_BATCH_BYTES ((size_t)8 << 20)

typedef struct nds_write_batch_part nds_write_batch_part;

/** Writes one chunk again by the one-key path after its publish conflicted. */
typedef int (*nds_redo_fn)(void *ctx, size_t cell_index);

typedef struct nds_write_batch {
    nds_kvstore *kv;             /**< where the values are staged (borrowed) */
    size_t max_bytes;            /**< publish at this many staged bytes (SIZE_MAX: no limit) */
    pthread_mutex_t mu;          /**< guards filling */
    nds_write_batch_part *filling; /**< the batch being filled, or NULL */
    nds_redo_fn redo;            /**< rewrites a conflicted chunk */
    void *redo_ctx;
} nds_write_batch;

void nds_write_batch_init(nds_write_batch *b, nds_kvstore *kv, nds_redo_fn redo, void *redo_ctx);
/**
 * Adds a staged value of bytes bytes (ownership passes to the batch, also on failure) with the
 * condition it was merged under; publishes the batch when it is full (NDS_WRITE_BATCH_MAX values
 * or NDS_WRITE_BATCH_BYTES bytes). @return 0, or the error of that publish (a chunk that failed,
 * or a redo that failed)
 */
int nds_write_batch_add(nds_write_batch *b, nds_kv_staged *staged, size_t bytes,
                        const nds_generation *if_equal, size_t cell_index);
/** Publishes what is left. @return 0 or the first error */
int nds_write_batch_finish(nds_write_batch *b);
/** Discards anything staged and not published (after a failed call), and frees. */
void nds_write_batch_dispose(nds_write_batch *b);

#endif
