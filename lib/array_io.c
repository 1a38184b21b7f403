/* Array writes (nds_array_write, nds_array_write_ref): a box becomes one update per chunk it
 * touches, run on the thread pool by lib/chunk_update.c (the optimistic protocol), staged and
 * published in batches where the store can stage; inside a transaction the chunks are staged in
 * it instead (lib/txn.c); grouped arrays go to lib/array_group.c. Reads are in lib/array_read.c.
 * Each thread holds one chunk at a time, so a call's memory is (threads x chunk) plus the caller's
 * buffer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/array_internal.h"
#include "internal/array_io.h"
#include "internal/chunk_update.h"
#include "internal/context_internal.h"
#include "internal/dtype_util.h"
#include "internal/error.h"
#include "internal/format_util.h"
#include "internal/kvstore_internal.h"
#include "internal/txn_internal.h"
#include "internal/strided.h"
#include "internal/util.h"
#include "internal/write_batch.h"

/* The merge of a write: copy the box's elements of this chunk from the caller's buffer. */
typedef struct write_merge {
    const io_call *call;
    const chunk_sel *sel;
} write_merge;

static void merge_from_buffer(void *ctx, const uint64_t *cell, uint8_t *chunk) {
    const write_merge *w = ctx;
    (void)cell;
    io_call_merge(w->call, w->sel, chunk);
}

/* Whether the selection is the whole chunk (not cut by the array's edge) and lies in the caller's
 * buffer as the canonical chunk would: the buffer's bytes from its first element are the chunk. */
static bool buffer_holds_chunk(const io_call *c, const chunk_sel *s) {
    const nds_array *a = c->a;
    for (size_t d = 0; d < a->meta.rank; d++) {
        if (s->in_chunk[d] != 0 || s->extent[d] != a->meta.chunk_shape[d]) return false;
        if (s->extent[d] > 1 && (c->box->step[d] != 1 || c->buf_stride[d] != c->chunk_unit[d]))
            return false;
    }
    return true;
}

/* A write inside a transaction: copy into the staged chunk and mark the elements written, or
 * (nds_array_write_ref) stage a whole chunk by reference into the caller's buffer. */
static int stage_write(io_call *c, const uint64_t *cell, const chunk_sel *s) {
    nds_array *a = c->a;
    char key[KEY_MAX];
    int rc = nds_array_chunk_key(a, cell, key, sizeof key);
    if (!rc && c->by_ref && buffer_holds_chunk(c, s))
        return nds_txn_stage_ref(c->txn, a, cell, key, sel_buffer(c, s));
    nds_txn_chunk *staged = rc ? NULL : nds_txn_chunk_get(c->txn, a, cell, key, true, &rc);
    if (rc) return rc;
    io_call_merge(c, s, staged->data);
    int64_t mask_stride[NDS_MAX_RANK];
    int64_t off = 0;
    nds_c_strides(a->meta.rank, a->meta.chunk_shape, 1, mask_stride);
    for (size_t d = 0; d < a->meta.rank; d++) {
        off += (int64_t)s->in_chunk[d] * mask_stride[d];
        mask_stride[d] = stepped_stride(mask_stride[d], c->box->step[d], a->meta.chunk_shape[d]);
    }
    static const uint8_t one = 1;
    nds_strided_fill(a->meta.rank, s->extent, 1, staged->mask + off, mask_stride, &one);
    return 0;
}

/* Writes cell i of the call: staged in the transaction, staged into batch, or (batch NULL) by the
 * one-chunk path. */
static int write_cell(io_call *c, size_t i, nds_write_batch *batch) {
    uint64_t cell[NDS_MAX_RANK];
    chunk_sel s;
    grid_cell(&c->grid, i, cell);
    if (!select_in_chunk(&c->a->meta, c->grid_shape, c->box, cell, &s)) return 0;
    if (c->txn) return stage_write(c, cell, &s);
    write_merge w = {c, &s};
    nds_box changed; /* what of the chunk the merge overwrites */
    sel_changed_box(c, &s, &changed);
    nds_chunk_change ch = {cell, s.whole, &changed, merge_from_buffer, &w, NULL};
    return batch ? nds_chunk_update_staged(c->a, &ch, batch, i) : nds_chunk_update(c->a, &ch);
}

static int write_task(void *ctx, size_t i) {
    io_call *c = ctx;
    int rc = write_cell(c, i, c->batch);
    nds_scratch_trim(NDS_SCRATCH_CHUNK); /* do not pin huge chunks per thread */
    return rc;
}

/* A chunk whose batched publish conflicted: written again by the one-chunk path (re-read,
 * re-merge). */
static int redo_chunk(void *ctx, size_t i) { return write_cell(ctx, i, NULL); }

/* Runs the chunk writes of a call: staged and published in batches where the store can stage,
 * else one conditional write per chunk. */
static int write_chunks(io_call *c, size_t threads) {
    nds_pool *pool = nds_context_pool(c->a->ctx);
    if (c->txn || !nds_kvstore_can_stage(c->a->kv))
        return nds_pool_for_budget(pool, nds_context_budget(c->a->ctx), 2 * c->grid_bytes,
                                   c->grid.total, threads, write_task, c);
    nds_write_batch batch;
    nds_write_batch_init(&batch, c->a->kv, redo_chunk, c);
    c->batch = &batch;
    int rc = nds_pool_for_budget(pool, nds_context_budget(c->a->ctx), 2 * c->grid_bytes,
                                 c->grid.total, threads, write_task, c);
    if (!rc) rc = nds_write_batch_finish(&batch);
    nds_write_batch_dispose(&batch);
    c->batch = NULL;
    return rc;
}

/* nds_array_write, and (by_ref) nds_array_write_ref. */
static int write_call(nds_array *a, const nds_box *box, const void *in, const nds_io_options *opts,
                      bool by_ref) {
    if (nds_dtype_is_vlen(a->meta.dtype)) return nds_array_vlen_refusal(a, "write to");
    pthread_rwlock_rdlock(&a->meta_lock);
    io_call c;
    int rc = io_call_init(&c, a, box, in, false, "write to");
    nds_txn *txn = call_txn(a, opts);
    if (!rc && by_ref && !txn)
        rc = nds_err(NDS_EINVAL, "write by reference to %s: only inside a transaction (the "
                                 "transaction keeps the caller's buffer)",
                     nds_kvstore_url(a->kv));
    if (!rc && txn) rc = nds_txn_check_open(txn);
    if (!rc && txn && a->meta.grouped) rc = nds_array_group_txn_refusal(a); /* nothing staged */
    /* nothing written; a consolidated snapshot is refused in a transaction too */
    if (!rc && (!txn || a->snapshot)) rc = nds_array_check_stale(a, "write to");
    if (!rc) {
        c.txn = txn;
        c.by_ref = by_ref;
        rc = a->meta.grouped ? nds_array_write_groups(a, &c, call_threads(opts)) /* array_group.c */
                             : write_chunks(&c, call_threads(opts));
        if (rc && txn) nds_txn_poison(txn);
        /* A resize by another handle or process during the write may have cut away chunks it
         * committed (or be about to clear them): then the write must not report success. */
        if (!rc && !txn) rc = nds_array_check_metadata(a, "write to");
    }
    pthread_rwlock_unlock(&a->meta_lock);
    return rc;
}

int nds_array_write(nds_array *a, const nds_box *box, const void *in, const nds_io_options *opts) {
    return write_call(a, box, in, opts, false);
}

int nds_array_write_ref(nds_array *a, const nds_box *box, const void *in,
                        const nds_io_options *opts) {
    return write_call(a, box, in, opts, true);
}
