/* Grouped writes: arrays whose storage objects each hold several chunks that are not a box of the
 * chunk grid (nds_array_meta.grouped; neuroglancer precomputed hashed shards). A write call's
 * chunks are grouped by the key of the object holding them (nds_format.group_key), and each object
 * is read-modify-written once per call, one task per object on the pool: under the object's
 * in-process lock, read it and its generation; rebuild each chunk the call touches (from the
 * caller's buffer alone when the call covers it, else decoded from the object first with
 * group_read_chunk, then merged); encode it (chunks left all fill become removals); have the format
 * build the new object (group_encode), which keeps every other chunk's stored bytes verbatim; write
 * it conditional on the generation read, or delete it when it holds no chunk any more. On
 * NDS_ECONFLICT (another writer changed the object in between) the whole object is redone with the
 * backoff of lib/chunk_update.c, so concurrent writers of different chunks of one object both land.
 *
 * Omits: transactions (a write inside one is refused up front: staged chunks are overlaid on reads
 * through whole storage chunks, which these arrays do not have) and the chunk cache (their reads go
 * through nds_format.read_chunk, which bypasses it, so no cached chunk can go stale).
 *
 * Threading: called under the array's meta_lock (shared); tasks run on the context's pool, each
 * holding one object's old and new bytes and the encoded bytes of its touched chunks. Ownership:
 * everything allocated here is freed before the call returns.
 */
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
#include "internal/util.h"

/* One chunk of the call: its index in the call's iteration and its object's key. */
typedef struct member {
    size_t index;
    size_t key_at;   /* offset of the key in the call's key arena */
    const char *key; /* the key, once the arena stops growing */
} member;

typedef struct group_call {
    nds_array *a;
    const struct io_call *io;
    member *m;      /* sorted by key: a group is a run of equal keys */
    size_t *starts; /* group g is m[starts[g] .. starts[g + 1]) */
    size_t ngroups;
} group_call;

/* The update of one object (its buffers reused across attempts). */
typedef struct group_work {
    const group_call *gc;
    const member *m; /* the group's members */
    size_t n;
    uint64_t *cells;           /* n x rank */
    nds_group_update *updates; /* n */
    nds_buf encoded;           /* the updates' bytes, back to back */
    size_t *offs;              /* n: where each update's bytes start in encoded */
    nds_buf out;               /* the new object */
} group_work;

int nds_array_group_txn_refusal(const nds_array *a) {
    return nds_err(NDS_EUNSUPPORTED,
                   "%s: %s: several chunks of this array share each storage object and do not "
                   "form a box of its grid (hashed shards), so its writes cannot be staged in a "
                   "transaction; write without one",
                   a->format->name, nds_kvstore_url(a->kv));
}

/* "[1,2,0,0] in <key>" for messages about one chunk ("chunk [1,2,0,0] in 8_8_8/0a.shard"). */
static void chunk_label(const nds_array *a, const char *key, const uint64_t *cell, char *buf,
                        size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (size_t d = 0; d < a->meta.rank && n < cap; d++)
        n +=
            (size_t)snprintf(buf + n, cap - n, "%s%llu", d ? "," : "", (unsigned long long)cell[d]);
    if (n < cap) snprintf(buf + n, cap - n, "] in %s", key);
}

/* ---- the write call's cells ---- */

/* Cell i of the call: its grid coordinates and what of it the call selects; false when it selects
 * nothing there (a stepped box). */
static bool call_cell(const io_call *c, size_t i, uint64_t *cell, chunk_sel *s) {
    grid_cell(&c->grid, i, cell);
    return select_in_chunk(&c->a->meta, c->grid_shape, c->box, cell, s);
}

/* ---- grouping ---- */

static int cmp_member(const void *x, const void *y) {
    const member *p = x, *q = y;
    int c = strcmp(p->key, q->key);
    return c ? c : (p->index > q->index) - (p->index < q->index);
}

/* The object keys of the call's non-empty cells, written back to back into arena. */
static int collect(group_call *gc, nds_buf *arena, size_t *n) {
    nds_array *a = gc->a;
    size_t total = gc->io->grid.total;
    uint64_t cell[NDS_MAX_RANK];
    char key[KEY_MAX];
    chunk_sel s;
    *n = 0;
    for (size_t i = 0; i < total; i++) {
        if (!call_cell(gc->io, i, cell, &s)) continue;
        int rc = a->format->group_key(a->state, cell, key, sizeof key);
        if (rc)
            return nds_err_prefix(rc, "%s: storage object of a chunk of %s", a->format->name,
                                  nds_kvstore_url(a->kv));
        gc->m[*n] = (member){i, arena->len, NULL};
        if (nds_buf_append(arena, key, strlen(key) + 1))
            return nds_err(NDS_ENOMEM, "out of memory grouping a write");
        ++*n;
    }
    return 0;
}

/* Sorts the members by key and finds the runs. */
static int group(group_call *gc, const nds_buf *arena, size_t n) {
    for (size_t k = 0; k < n; k++) gc->m[k].key = (const char *)arena->data + gc->m[k].key_at;
    qsort(gc->m, n, sizeof *gc->m, cmp_member);
    gc->starts = malloc((n + 1) * sizeof *gc->starts);
    if (!gc->starts) return nds_err(NDS_ENOMEM, "out of memory grouping a write");
    gc->ngroups = 0;
    for (size_t k = 0; k < n; k++)
        if (k == 0 || strcmp(gc->m[k].key, gc->m[k - 1].key) != 0) gc->starts[gc->ngroups++] = k;
    gc->starts[gc->ngroups] = n;
    return 0;
}

/* ---- one object ---- */

/* Rebuilds member k's chunk (stored chunk decoded when the call writes only part of it, merged
 * with the caller's elements) and encodes it into the work's update k. */
static int rebuild_chunk(group_work *w, size_t k, const uint8_t *obj, size_t len, uint8_t *chunk) {
    nds_array *a = w->gc->a;
    uint64_t *cell = w->cells + k * a->meta.rank;
    char label[KEY_MAX + 128];
    int present = 0, rc = 0, all_fill;
    chunk_sel s;
    call_cell(w->gc->io, w->m[k].index, cell, &s); /* selects something: it was collected */
    chunk_label(a, w->m[k].key, cell, label, sizeof label);
    if (!s.whole && obj) rc = a->format->group_read_chunk(a->state, obj, len, cell, chunk, &present);
    if (rc)
        return nds_err_prefix(rc, "%s: chunk %s of %s", a->format->name, label,
                              nds_kvstore_url(a->kv));
    if (!present) nds_fill_elements(chunk, a->chunk_elems, a->elem, a->meta.fill_value);
    io_call_merge(w->gc->io, &s, chunk);
    nds_buf *enc = nds_scratch_buf(NDS_SCRATCH_ENCODED);
    if (!enc) return nds_err(NDS_ENOMEM, "out of memory");
    if ((rc = nds_array_encode_for_store(a, cell, label, chunk, enc, &all_fill))) return rc;
    /* The bytes' address is set once every update is in (w->encoded may move as it grows). */
    w->updates[k] = (nds_group_update){cell, NULL, all_fill ? 0 : enc->len};
    w->offs[k] = all_fill ? SIZE_MAX : w->encoded.len; /* SIZE_MAX: a removal */
    if (!all_fill && nds_buf_append(&w->encoded, enc->data, enc->len))
        return nds_err(NDS_ENOMEM, "out of memory encoding chunk %s", label);
    return 0;
}

/* Writes the new object conditional on cond (deletes it when empty); unchanged bytes are not
 * rewritten. */
static int store_object(nds_array *a, const char *key, const nds_buf *out, const uint8_t *obj,
                        size_t len, const nds_generation *cond) {
    nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
    wo.if_equal = *cond;
    if (out->len == 0) return obj ? nds_kvstore_delete(a->kv, key, &wo) : 0;
    if (obj && out->len == len && memcmp(out->data, obj, len) == 0) return 0;
    return nds_kvstore_write(a->kv, key, out->data, out->len, &wo, NULL);
}

/* One read-modify-write of the object; NDS_ECONFLICT when it changed since it was read. */
static int update_object(group_work *w) {
    nds_array *a = w->gc->a;
    const char *key = w->m[0].key;
    nds_read_result r;
    int rc = nds_kvstore_read(a->kv, key, NULL, &r);
    if (rc)
        return nds_err_prefix(rc, "%s: reading %s of %s", a->format->name, key,
                              nds_kvstore_url(a->kv));
    const uint8_t *obj = r.state == NDS_READ_VALUE ? r.value.data : NULL;
    size_t len = obj ? r.value.len : 0;
    uint8_t *chunk = nds_scratch(NDS_SCRATCH_CHUNK, a->chunk_bytes);
    rc = chunk ? 0 : NDS_ENOMEM;
    w->encoded.len = 0;
    for (size_t k = 0; k < w->n && !rc; k++) rc = rebuild_chunk(w, k, obj, len, chunk);
    for (size_t k = 0; k < w->n && !rc; k++)
        if (w->offs[k] != SIZE_MAX) w->updates[k].data = w->encoded.data + w->offs[k];
    if (!rc && (rc = a->format->group_encode(a->state, obj, len, w->updates, w->n, &w->out)))
        rc = nds_err_prefix(rc, "%s: %s of %s", a->format->name, key, nds_kvstore_url(a->kv));
    if (!rc && (rc = store_object(a, key, &w->out, obj, len, &r.generation)) != 0 &&
        rc != NDS_ECONFLICT)
        rc = nds_err_prefix(rc, "%s: writing %s of %s", a->format->name, key,
                            nds_kvstore_url(a->kv));
    nds_read_result_dispose(&r);
    return rc;
}

/* The optimistic protocol on one object, under its in-process lock. */
static int update_locked(group_work *w) {
    nds_array *a = w->gc->a;
    for (int attempt = 0;; attempt++) {
        int rc = update_object(w);
        if (rc != NDS_ECONFLICT) return rc;
        if (!nds_array_backoff(attempt))
            return nds_err(NDS_ECONFLICT, "%s: %s of %s: still conflicting after %d attempts",
                           a->format->name, w->m[0].key, nds_kvstore_url(a->kv), attempt + 1);
    }
}

static int group_task(void *ctx, size_t g) {
    const group_call *gc = ctx;
    nds_array *a = gc->a;
    group_work w;
    memset(&w, 0, sizeof w);
    w.gc = gc;
    w.m = gc->m + gc->starts[g];
    w.n = gc->starts[g + 1] - gc->starts[g];
    w.cells = malloc(w.n * a->meta.rank * sizeof *w.cells + 1);
    w.updates = malloc(w.n * sizeof *w.updates);
    w.offs = malloc(w.n * sizeof *w.offs);
    int rc = w.cells && w.updates && w.offs ? 0 : nds_err(NDS_ENOMEM, "out of memory");
    nds_chunk_lock_entry *lock = rc ? NULL : nds_chunk_lock(&a->locks, w.m[0].key);
    if (!rc && !lock) rc = NDS_ENOMEM;
    if (!rc) {
        rc = update_locked(&w);
        nds_chunk_unlock(&a->locks, lock);
    }
    free(w.cells), free(w.updates), free(w.offs);
    nds_buf_dispose(&w.encoded);
    nds_buf_dispose(&w.out);
    nds_scratch_trim(NDS_SCRATCH_CHUNK); /* do not pin huge chunks per thread */
    nds_scratch_trim(NDS_SCRATCH_ENCODED);
    return rc;
}

int nds_array_write_groups(nds_array *a, const struct io_call *c, size_t threads) {
    const nds_format *f = a->format;
    if (!f->group_key || !f->group_read_chunk || !f->group_encode)
        return nds_err(NDS_EINTERNAL, "%s: %s: grouped storage without the format's group methods",
                       f->name, nds_kvstore_url(a->kv));
    size_t total = c->grid.total, n = 0;
    uint64_t bytes;
    bool fits = nds_mul_u64(total ? total : 1, sizeof(member), &bytes) && bytes <= SIZE_MAX;
    group_call gc = {a, c, fits ? malloc((size_t)bytes) : NULL, NULL, 0};
    nds_buf arena = {0};
    int rc =
        gc.m ? collect(&gc, &arena, &n) : nds_err(NDS_ENOMEM, "out of memory grouping a write");
    if (!rc) rc = group(&gc, &arena, n);
    if (!rc)
        rc = nds_pool_for_budget(nds_context_pool(a->ctx), nds_context_budget(a->ctx),
                                 a->chunk_bytes * (2 + n / (gc.ngroups ? gc.ngroups : 1)),
                                 gc.ngroups, threads, group_task, &gc);
    free(gc.m);
    free(gc.starts);
    nds_buf_dispose(&arena);
    return rc;
}
