/* The optimistic update of one chunk (lib/chunk_update.c), the one place that changes a stored
 * chunk: lock it in-process, read it and its generation, merge the caller's change (in the format's
 * stored form, or decoded), encode it, write it conditional on the generation read (or stage it in
 * a batch, or delete it when it is left all fill), and on NDS_ECONFLICT redo it all after a backoff.
 * Writes (lib/array_io.c, lib/array_vlen.c), resizes (lib/array_maint.c) and isolated transaction
 * commits (lib/txn.c) call it; grouped writes (lib/array_group.c) and atomic or prepared commits
 * use its encoding and backoff. It calls nothing of theirs: callers describe their change as an
 * nds_chunk_change, callbacks included. */
#ifndef NDS_INTERNAL_CHUNK_UPDATE_H
#define NDS_INTERNAL_CHUNK_UPDATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "internal/array_internal.h"

struct nds_write_batch;

/** Changes a canonical chunk (or, for a chunk in stored form, what the update hands over). */
typedef void (*nds_merge_fn)(void *ctx, const uint64_t *cell, uint8_t *chunk);

struct nds_chunk_change;
/** The update of a chunk that has no dense form (variable-length arrays: lib/array_vlen.c): from
 * its stored bytes old[0..old_len) (NULL: not stored), apply change->merge and encode the result
 * into out, or set *all_fill (then it is deleted). Errors carry no chunk name (the caller adds it).
 */
typedef int (*nds_stored_update_fn)(nds_array *a, const struct nds_chunk_change *change,
                                    const uint8_t *old, size_t old_len, nds_buf *out,
                                    int *all_fill);

/** What a caller changes in one chunk. */
typedef struct nds_chunk_change {
    const uint64_t *cell;   /**< the chunk's grid coordinates */
    int whole;              /**< merge overwrites every element inside the array: nothing is read */
    const nds_box *changed; /**< the box (chunk coordinates) outside which merge changes nothing,
                                 so the format may keep the stored encoding there; NULL: unknown */
    nds_merge_fn merge;     /**< applies the change (called once per attempt) */
    void *ctx;              /**< merge's */
    nds_stored_update_fn update_stored; /**< NULL for dense chunks; required for vlen arrays */
} nds_chunk_change;

/** Applies change to its chunk of a with the optimistic protocol above. A chunk left all fill is
 *  deleted. Errors name the chunk. */
int nds_chunk_update(nds_array *a, const nds_chunk_change *change);
/** As nds_chunk_update, but the merged chunk is staged and added to batch under index (the batch's
 *  redo rewrites it by index when its publish conflicts; a delete is done at once). The batch is
 *  handed the value after the chunk's lock is released: it may publish, and a conflicted chunk's
 *  redo takes its lock. Only for a->kv that can stage (nds_kvstore_can_stage). */
int nds_chunk_update_staged(nds_array *a, const nds_chunk_change *change,
                            struct nds_write_batch *batch, size_t index);

/** The bytes to store for a merged canonical chunk (nds_array_stored_bytes). */
typedef struct nds_stored_chunk {
    const uint8_t *bytes; /**< lives as long as the chunk or the encoding buffer */
    size_t len;
    int all_fill; /**< nothing to store (bytes unset): the chunk is to be deleted */
} nds_stored_chunk;

/** Encodes a merged canonical chunk for storage into out, or sets *all_fill (then out is untouched:
 *  the chunk is to be deleted). key names the chunk in errors. */
int nds_array_encode_for_store(nds_array *a, const uint64_t *cell, const char *key,
                               const uint8_t *chunk, nds_buf *out, int *all_fill);
/** The bytes to store for a merged canonical chunk: the chunk itself where the array stores chunks
 *  canonically (meta.stored_canonical: no copy), else its encoding in enc; or all fill. */
int nds_array_stored_bytes(nds_array *a, const uint64_t *cell, const char *key,
                           const uint8_t *chunk, nds_buf *enc, nds_stored_chunk *out);

/** Waits before redoing a conditional write that conflicted for the (attempt + 1)-th time:
 *  exponential backoff with jitter, the same as chunk updates. false, without waiting, once the
 *  attempts are used up. */
bool nds_array_backoff(int attempt);

#endif
