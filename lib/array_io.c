/* Array writes: the per-chunk optimistic write protocol (read chunk + generation, merge,
 * conditional write, retry) on the thread pool, staged in batches where the store can, and the
 * chunk loads both sides use. Reads are in lib/array_read.c. Each thread holds one chunk at a time,
 * so a call's memory is (threads x chunk) plus the caller's buffer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/array_internal.h"
#include "internal/array_io.h"
#include "internal/chunk_cache.h"
#include "internal/context_internal.h"
#include "internal/dtype_util.h"
#include "internal/error.h"
#include "internal/format_util.h"
#include "internal/kvstore_internal.h"
#include "internal/txn_internal.h"
#include "internal/strided.h"
#include "internal/util.h"
#include "internal/write_batch.h"

/* Conflict retries: exponential backoff from 1 ms to 256 ms with jitter, for at most this many
 * tries. */
#define RETRY_MAX 2000

int nds_array_chunk_key(const nds_array *a, const uint64_t *cell, char *buf, size_t cap) {
    int rc = a->format->chunk_key(a->state, cell, buf, cap);
    return rc ? nds_err_prefix(rc, "%s: chunk key of %s", a->format->name, nds_kvstore_url(a->kv))
              : 0;
}

int nds_array_load_chunk(nds_array *a, const uint64_t *cell, const char *key, uint8_t *chunk,
                         int *present, nds_generation *gen, bool use_cache) {
    nds_chunk_cache *cache = use_cache ? nds_context_cache(a->ctx) : NULL;
    char url[KEY_MAX + 512];
    nds_cache_entry *hit = NULL;
    nds_read_options ro = NDS_READ_OPTIONS_INIT;
    if (cache) {
        cache_url(a, key, url, sizeof url);
        if ((hit = nds_cache_get(cache, url)) != NULL) ro.if_not_equal = *nds_cache_generation(hit);
    }
    nds_read_result r;
    int rc = nds_kvstore_read(a->kv, key, &ro, &r);
    if (rc) {
        nds_cache_release(cache, hit);
        return nds_err_prefix(rc, "%s: chunk %s of %s", a->format->name, key,
                              nds_kvstore_url(a->kv));
    }
    if (gen) *gen = r.generation;
    *present = r.state == NDS_READ_VALUE || r.state == NDS_READ_UNCHANGED;
    if (r.state == NDS_READ_UNCHANGED)
        memcpy(chunk, nds_cache_data(hit), a->chunk_bytes);
    else if (*present)
        rc = a->format->decode_chunk(a->state, cell, r.value.data, r.value.len, chunk);
    else
        nds_fill_elements(chunk, a->chunk_elems, a->elem, a->meta.fill_value);
    nds_cache_release(cache, hit);
    if (cache && r.state == NDS_READ_VALUE && rc == 0)
        nds_cache_put(cache, url, chunk, a->chunk_bytes, &r.generation);
    else if (cache && r.state != NDS_READ_UNCHANGED)
        nds_cache_forget(cache, url);
    nds_read_result_dispose(&r);
    if (rc)
        return nds_err_prefix(rc, "%s: chunk %s of %s", a->format->name, key,
                              nds_kvstore_url(a->kv));
    return 0;
}

/* ---- write ---- */

static void backoff(int attempt) {
    uint64_t ceiling = (uint64_t)1000000 << (attempt < 8 ? attempt : 8); /* 1 ms .. 256 ms */
    nds_sleep_ns(ceiling / 2 + nds_random_u64() % (ceiling / 2 + 1));
}

int nds_array_encode_for_store(nds_array *a, const uint64_t *cell, const char *key,
                               const uint8_t *chunk, nds_buf *out, int *all_fill) {
    *all_fill = nds_all_equal(chunk, a->chunk_elems, a->elem, a->meta.fill_value);
    if (*all_fill) return 0;
    out->len = 0;
    int rc = a->format->encode_chunk(a->state, cell, chunk, out);
    return rc ? nds_err_prefix(rc, "%s: encoding chunk %s of %s", a->format->name, key,
                               nds_kvstore_url(a->kv))
              : 0;
}

/* A chunk staged by update_locked, its size and the condition it must be published under. */
typedef struct staged_chunk {
    nds_kv_staged *value; /* NULL when nothing was staged (a delete, done at once) */
    size_t bytes;
    nds_generation cond;
} staged_chunk;

/* Writes a chunk's encoded bytes, or deletes it when all_fill; both under cond. With sc non-NULL
 * a value is staged instead of written (sc->value set; the caller publishes it under cond);
 * deletes are never staged. chunk: the canonical chunk written, which the cache then holds; NULL
 * when the caller has none (the cache forgets the chunk). */
static int store_encoded(nds_array *a, const char *key, const uint8_t *bytes, size_t len,
                         int all_fill, const nds_generation *cond, int was_present,
                         const uint8_t *chunk, staged_chunk *sc) {
    nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
    wo.if_equal = *cond;
    nds_chunk_cache *cache = nds_context_cache(a->ctx);
    char url[KEY_MAX + 512];
    int rc;
    if (cache) cache_url(a, key, url, sizeof url);
    if (all_fill) {
        if (!was_present && cond->kind != NDS_GEN_NONE) return 0; /* still missing: nothing to do */
        rc = nds_kvstore_delete(a->kv, key, &wo);
        if (cache) nds_cache_forget(cache, url);
        return rc;
    }
    if (sc) { /* a cached copy goes stale when the batch is published */
        if (cache) nds_cache_forget(cache, url);
        sc->bytes = len;
        return nds_kvstore_stage(a->kv, key, bytes, len, &sc->value);
    }
    nds_generation written = {NDS_GEN_NONE, {0}};
    rc = nds_kvstore_write(a->kv, key, bytes, len, &wo, &written);
    if (cache && rc == 0 && chunk)
        nds_cache_put(cache, url, chunk, a->chunk_bytes, &written);
    else if (cache)
        nds_cache_forget(cache, url);
    return rc;
}

int nds_array_stored_bytes(nds_array *a, const uint64_t *cell, const char *key,
                           const uint8_t *chunk, nds_buf *enc, const uint8_t **bytes, size_t *len,
                           int *all_fill) {
    *bytes = chunk; /* canonical storage: the chunk buffer is what is stored */
    *len = a->chunk_bytes;
    if (a->meta.stored_canonical) {
        *all_fill = nds_all_equal(chunk, a->chunk_elems, a->elem, a->meta.fill_value);
        return 0;
    }
    int rc = nds_array_encode_for_store(a, cell, key, chunk, enc, all_fill);
    *bytes = enc->data;
    *len = enc->len;
    return rc;
}

/* Stores a merged chunk: deleted when all fill, else encoded and written (see store_encoded). */
static int store_chunk(nds_array *a, const uint64_t *cell, const char *key, const uint8_t *chunk,
                       const nds_generation *cond, int was_present, staged_chunk *sc) {
    nds_buf *enc = nds_scratch_buf(NDS_SCRATCH_ENCODED);
    if (!enc) return nds_err(NDS_ENOMEM, "out of memory");
    const uint8_t *bytes;
    size_t len;
    int all_fill, rc = nds_array_stored_bytes(a, cell, key, chunk, enc, &bytes, &len, &all_fill);
    return rc ? rc : store_encoded(a, key, bytes, len, all_fill, cond, was_present, chunk, sc);
}

/* The core's merge as the format's update_chunk calls it. */
typedef struct format_merge {
    nds_merge_fn merge;
    void *ctx;
    const uint64_t *cell;
} format_merge;

static void merge_for_format(void *ctx, uint8_t *chunk) {
    const format_merge *m = ctx;
    m->merge(m->ctx, m->cell, chunk);
}

/* The error of a chunk's read or decode before a write, and of its store (a conflict is left
 * bare: the caller retries). */
static int chunk_error(const nds_array *a, const char *key, int rc) {
    return nds_err_prefix(rc, "%s: chunk %s of %s", a->format->name, key, nds_kvstore_url(a->kv));
}

static int store_error(const nds_array *a, const char *key, int rc) {
    if (rc == 0 || rc == NDS_ECONFLICT) return rc;
    return nds_err_prefix(rc, "%s: writing chunk %s of %s", a->format->name, key,
                          nds_kvstore_url(a->kv));
}

/* Decodes a chunk's stored bytes (fill when not stored), merges and stores it: the write path of
 * a format that declines update_chunk, from the bytes already read. */
static int merge_decoded(nds_array *a, const uint64_t *cell, const char *key,
                         const uint8_t *stored, size_t len, nds_merge_fn merge, void *ctx,
                         uint8_t *chunk, const nds_generation *cond, staged_chunk *sc) {
    int rc = stored ? a->format->decode_chunk(a->state, cell, stored, len, chunk) : 0;
    if (rc) return chunk_error(a, key, rc);
    if (!stored) nds_fill_elements(chunk, a->chunk_elems, a->elem, a->meta.fill_value);
    merge(ctx, cell, chunk);
    return store_error(a, key, store_chunk(a, cell, key, chunk, cond, stored != NULL, sc));
}

/* A write to part of a chunk, done by the format (nds_format.update_chunk) so that it skips what
 * the write leaves alone: the stored bytes are read past the cache (a cached chunk has none) and
 * handed over with the box the merge changes. */
static int update_in_format(nds_array *a, const uint64_t *cell, const char *key,
                            const nds_box *changed, nds_merge_fn merge, void *ctx, uint8_t *chunk,
                            nds_generation *cond, staged_chunk *sc) {
    nds_read_result old;
    int rc = nds_kvstore_read(a->kv, key, NULL, &old);
    if (rc) return chunk_error(a, key, rc);
    *cond = old.generation;
    const uint8_t *stored = old.state == NDS_READ_VALUE ? old.value.data : NULL;
    size_t len = stored ? old.value.len : 0;
    int all_fill = 0;
    bool vlen = nds_dtype_is_vlen(a->meta.dtype);
    format_merge fm = {merge, ctx, cell};
    nds_buf *enc = nds_scratch_buf(NDS_SCRATCH_ENCODED);
    if (!enc) rc = nds_err(NDS_ENOMEM, "out of memory");
    if (!rc) {
        enc->len = 0;
        /* A variable-length chunk is merged as its element list (lib/array_vlen.c). */
        rc = vlen ? nds_array_vlen_update(a, cell, stored, len, merge_for_format, &fm, enc, &all_fill)
                  : a->format->update_chunk(a->state, cell, stored, len, changed,
                                            merge_for_format, &fm, chunk, enc, &all_fill);
    }
    if (rc == 0)
        rc = store_error(a, key, store_encoded(a, key, enc->data, enc->len, all_fill, cond,
                                               stored != NULL, NULL, sc));
    else if (rc == NDS_EUNSUPPORTED && !vlen)
        rc = merge_decoded(a, cell, key, stored, len, merge, ctx, chunk, cond, sc);
    else
        rc = chunk_error(a, key, rc);
    nds_read_result_dispose(&old);
    return rc;
}

/* Whether a write to part of a chunk goes through the format's update_chunk. */
static bool updates_in_format(const nds_array *a, const nds_box *changed) {
    if (nds_dtype_is_vlen(a->meta.dtype)) return true; /* never decoded into a dense chunk */
    return changed && a->format->version >= 3 && a->format->update_chunk &&
           !a->meta.stored_canonical;
}

/* One attempt of a chunk's update: read (unless whole), merge, store, under the generation read
 * (*cond). Errors carry their prefix; a conflict is bare. */
static int update_once(nds_array *a, const uint64_t *cell, const char *key, int whole,
                       const nds_box *changed, nds_merge_fn merge, void *ctx, uint8_t *chunk,
                       nds_generation *cond, staged_chunk *sc) {
    int present = 1, rc;
    if (!whole && updates_in_format(a, changed))
        return update_in_format(a, cell, key, changed, merge, ctx, chunk, cond, sc);
    /* A whole write overwrites every element inside the array; only an edge chunk's part beyond
     * the array's shape needs the fill value first. */
    if (!whole && (rc = nds_array_load_chunk(a, cell, key, chunk, &present, cond, true)))
        return rc;
    if (whole && chunk_crosses_edge(a, cell))
        nds_fill_elements(chunk, a->chunk_elems, a->elem, a->meta.fill_value);
    merge(ctx, cell, chunk);
    return store_error(a, key, store_chunk(a, cell, key, chunk, cond, present, sc));
}

/* Read (unless whole), merge, store; retried on conflict. With sc, a value is staged, not
 * written. changed: the box of the chunk the merge changes (NULL: unknown). */
static int update_locked(nds_array *a, const uint64_t *cell, const char *key, int whole,
                         const nds_box *changed, nds_merge_fn merge, void *ctx, uint8_t *chunk,
                         staged_chunk *sc) {
    for (int attempt = 0;; attempt++) {
        nds_generation cond = {NDS_GEN_NONE, {0}};
        int rc = update_once(a, cell, key, whole, changed, merge, ctx, chunk, &cond, sc);
        if (sc) sc->cond = cond;
        if (rc != NDS_ECONFLICT) return rc;
        if (attempt + 1 >= RETRY_MAX)
            return nds_err(NDS_ECONFLICT, "%s: chunk %s of %s: still conflicting after %d attempts",
                           a->format->name, key, nds_kvstore_url(a->kv), RETRY_MAX);
        backoff(attempt);
    }
}

/* Runs update_locked under the chunk's in-process lock (sc: stage instead of writing). */
static int update_chunk(nds_array *a, const uint64_t *cell, int whole, const nds_box *changed,
                        nds_merge_fn merge, void *ctx, staged_chunk *sc) {
    char key[KEY_MAX];
    int rc = nds_array_chunk_key(a, cell, key, sizeof key);
    if (rc) return rc;
    /* (variable-length arrays have no dense chunk: chunk_bytes 0) */
    uint8_t *chunk = nds_scratch(NDS_SCRATCH_CHUNK, a->chunk_bytes ? a->chunk_bytes : 1);
    if (!chunk) return NDS_ENOMEM;
    nds_chunk_lock_entry *lock = nds_chunk_lock(&a->locks, key);
    if (!lock) return NDS_ENOMEM;
    rc = update_locked(a, cell, key, whole, changed, merge, ctx, chunk, sc);
    nds_chunk_unlock(&a->locks, lock);
    return rc;
}

int nds_array_update_chunk(nds_array *a, const uint64_t *cell, int whole, const nds_box *changed,
                           nds_merge_fn merge, void *ctx) {
    return update_chunk(a, cell, whole, changed, merge, ctx, NULL);
}

/* Stages one chunk of a batched write, then hands it to the batch after the chunk's lock is
 * released (the batch may publish, and a conflicted chunk's redo takes its lock: never while
 * holding another). */
int nds_array_stage_update(nds_array *a, const uint64_t *cell, size_t index, int whole,
                           const nds_box *changed, nds_merge_fn merge, void *ctx,
                           nds_write_batch *batch) {
    staged_chunk sc = {NULL, 0, {NDS_GEN_NONE, {0}}};
    int rc = update_chunk(a, cell, whole, changed, merge, ctx, &sc);
    if (rc || !sc.value) return rc;
    return nds_write_batch_add(batch, sc.value, sc.bytes, &sc.cond, index);
}

/* The merge of a write: copy the box's elements of this chunk from the caller's buffer. */
typedef struct write_merge {
    const io_call *call;
    const chunk_sel *sel;
} write_merge;

static void merge_from_buffer(void *ctx, const uint64_t *cell, uint8_t *chunk) {
    const write_merge *w = ctx;
    const io_call *c = w->call;
    uint8_t *bp, *cp;
    sel_pointers(c, w->sel, chunk, &bp, &cp);
    nds_strided_copy(c->box->rank, w->sel->extent, c->a->elem, cp, c->chunk_stride, bp,
                     c->buf_stride);
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
    write_merge w = {c, s};
    merge_from_buffer(&w, cell, staged->data);
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
    changed.rank = c->box->rank;
    for (size_t d = 0; d < changed.rank; d++) {
        changed.start[d] = s.in_chunk[d];
        changed.stop[d] = s.in_chunk[d] + (s.extent[d] - 1) * c->box->step[d] + 1;
        changed.step[d] = c->box->step[d];
    }
    changed.dropped = 0;
    return batch ? nds_array_stage_update(c->a, cell, i, s.whole, &changed, merge_from_buffer, &w,
                                          batch)
                 : nds_array_update_chunk(c->a, cell, s.whole, &changed, merge_from_buffer, &w);
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
        return nds_pool_for(pool, c->grid.total, threads, write_task, c);
    nds_write_batch batch;
    nds_write_batch_init(&batch, c->a->kv, redo_chunk, c);
    c->batch = &batch;
    int rc = nds_pool_for(pool, c->grid.total, threads, write_task, c);
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

/* ---- what grouped writes (array_group.c) use of a write call ---- */

size_t nds_io_call_cells(const struct io_call *c) { return c->grid.total; }

bool nds_io_call_cell(const struct io_call *c, size_t i, uint64_t *cell, int *whole) {
    chunk_sel s;
    grid_cell(&c->grid, i, cell);
    if (!select_in_chunk(&c->a->meta, c->grid_shape, c->box, cell, &s)) return false;
    *whole = s.whole;
    return true;
}

void nds_io_call_merge(const struct io_call *c, const uint64_t *cell, uint8_t *chunk) {
    chunk_sel s;
    if (!select_in_chunk(&c->a->meta, c->grid_shape, c->box, cell, &s)) return;
    write_merge w = {c, &s};
    merge_from_buffer(&w, cell, chunk);
}

bool nds_array_backoff(int attempt) {
    if (attempt + 1 >= RETRY_MAX) return false;
    backoff(attempt);
    return true;
}
