/* What the read side (lib/array_read.c) and the write side (lib/array_io.c, lib/array_group.c,
 * lib/array_vlen.c, lib/chunk_update.c) of the array engine share: the chunk grid a box touches, what of the box lies in each chunk, and the state of one
 * read or write call (io_call). */
#ifndef NDS_INTERNAL_ARRAY_IO_H
#define NDS_INTERNAL_ARRAY_IO_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "internal/array_internal.h"
#include "internal/error.h"
#include "internal/kvstore_internal.h"
#include "internal/strided.h"
#include "internal/util.h"
#include "internal/write_batch.h"

#define KEY_MAX 512

/* The cache key of a chunk: its full URL. */
static inline void cache_url(const nds_array *a, const char *key, char *buf, size_t cap) {
    snprintf(buf, cap, "%s%s", nds_kvstore_url(a->kv), key);
}

/* ---- chunk grid iteration ---- */

/* The chunks a box touches. In dimension d either every chunk from first[d] to first[d] + count[d]
 * - 1 holds selected indices (the step is below the chunk size), or, when the step is at least the
 * chunk size (sparse), each selected index lies in a chunk of its own: count[d] = the box's extent
 * and the k-th is the chunk of start + k * step. So count[d] never exceeds the box's extent, and
 * the total is bounded by its element count (checked to fit by io_call_init), however large the
 * steps and the gaps between selected chunks. */
typedef struct grid_range {
    size_t rank;
    uint64_t first[NDS_MAX_RANK], count[NDS_MAX_RANK];
    uint64_t start[NDS_MAX_RANK], step[NDS_MAX_RANK], grid[NDS_MAX_RANK]; /* sparse dimensions */
    bool sparse[NDS_MAX_RANK];
    uint64_t total;
} grid_range;

/* grid: the chunk shape of the grid iterated (the storage chunks, or the finer read chunks). box
 * is normalised (io_box_normalise): its last selected index is stop - 1. */
static inline void grid_range_of(size_t rank, const uint64_t *grid, const nds_box *box,
                                 grid_range *g) {
    g->rank = rank;
    g->total = 1;
    for (size_t d = 0; d < rank; d++) {
        uint64_t ext = nds_box_extent(box, d);
        if (ext == 0) {
            g->total = 0;
            return;
        }
        g->sparse[d] = box->step[d] >= grid[d];
        g->start[d] = box->start[d];
        g->step[d] = box->step[d];
        g->grid[d] = grid[d];
        g->first[d] = box->start[d] / grid[d];
        g->count[d] = g->sparse[d] ? ext : (box->stop[d] - 1) / grid[d] - g->first[d] + 1;
        g->total *= g->count[d]; /* count[d] <= ext: bounded by the box's element count */
    }
}

static inline void grid_cell(const grid_range *g, size_t i, uint64_t *cell) {
    for (size_t d = g->rank; d-- > 0;) {
        uint64_t k = i % g->count[d];
        /* start + k * step <= the box's last index: no overflow */
        cell[d] = g->sparse[d] ? (g->start[d] + k * g->step[d]) / g->grid[d] : g->first[d] + k;
        i /= g->count[d];
    }
}

/* What of a box lies in one chunk: per dimension the first selected index inside the chunk (as an
 * offset in the chunk), its position in the box (0-based), and how many are selected. */
typedef struct chunk_sel {
    uint64_t in_chunk[NDS_MAX_RANK], in_box[NDS_MAX_RANK], extent[NDS_MAX_RANK];
    int whole; /* the selection is every element of the chunk that lies inside the array */
} chunk_sel;

static inline bool select_in_chunk(const nds_array_meta *m, const uint64_t *grid,
                                   const nds_box *box, const uint64_t *cell, chunk_sel *s) {
    s->whole = 1;
    for (size_t d = 0; d < m->rank; d++) {
        uint64_t c0 = cell[d] * grid[d]; /* < the shape: cell is a chunk of the array */
        uint64_t c1 = grid[d] > UINT64_MAX - c0 ? UINT64_MAX : c0 + grid[d];
        uint64_t hi = nds_min_u64(c1, box->stop[d]), lo = nds_max_u64(c0, box->start[d]);
        if (lo >= hi) return false;
        /* lo < stop, and the box is normalised (stop - 1 is selected): i0 <= stop - 1 */
        uint64_t k0 = nds_ceil_div(lo - box->start[d], box->step[d]);
        uint64_t i0 = box->start[d] + k0 * box->step[d];
        if (i0 >= hi) return false;
        s->in_chunk[d] = i0 - c0;
        s->in_box[d] = k0;
        s->extent[d] = nds_ceil_div(hi - i0, box->step[d]);
        uint64_t inside = nds_min_u64(c1, m->shape[d]) - c0;
        if (box->step[d] != 1 || s->in_chunk[d] != 0 || s->extent[d] != inside) s->whole = 0;
    }
    return true;
}

/* The state of one read or write call. The box is the caller's, checked and normalised. */
typedef struct io_call {
    nds_array *a;
    const nds_box *box;         /* = &norm */
    nds_box norm;               /* the caller's box, normalised (io_box_normalise) */
    const uint64_t *grid_shape; /* chunk shape of the grid iterated */
    size_t grid_bytes;          /* canonical bytes of one chunk of that grid */
    grid_range grid;
    uint8_t *buf;           /* caller's buffer (read: destination; write: source, not modified) */
    nds_txn *txn;           /* staging / overlay transaction, or NULL */
    bool by_ref;            /* write in a transaction: stage whole chunks by reference into buf */
    nds_write_batch *batch; /* write: chunks staged and published in batches, or NULL */
    int64_t buf_stride[NDS_MAX_RANK];   /* byte strides of the box's dense buffer */
    int64_t chunk_unit[NDS_MAX_RANK];   /* byte strides of the canonical chunk */
    int64_t chunk_stride[NDS_MAX_RANK]; /* chunk_unit x box step (see stepped_stride) */
    size_t run;  /* read: chunks one task decodes and copies (all those along the last dimension) */
    bool stream; /* read: copies into buf bypass the cache (buf is larger than the cache) */
} io_call;

/* The stride of a dimension of a chunk stepped through with step: unit x step when the step is
 * below the chunk's extent there; otherwise one selected index at most lies in any chunk, the
 * stride is never multiplied by more than 0, and unit stands for it (unit x step need not fit). */
static inline int64_t stepped_stride(int64_t unit, uint64_t step, uint64_t extent) {
    return step < extent ? unit * (int64_t)step : unit; /* < unit x extent: fits */
}

/* Checks box against a's shape and normalises it into *out: in each dimension stop becomes one
 * past the last selected index, and a dimension selecting one index (however large its step) gets
 * step 1, so that nothing downstream multiplies by a step that selects nothing more. The box's
 * bytes must fit a buffer (int64 byte offsets): else NDS_ERANGE naming the region. what: "read
 * of" / "write to". */
static inline int io_box_normalise(const nds_array *a, const nds_box *box, nds_box *out,
                                   const char *what) {
    int rc = nds_box_check(box, a->meta.rank, a->meta.shape);
    if (rc) return nds_err_prefix(rc, "%s %s", what, nds_kvstore_url(a->kv));
    *out = *box;
    uint64_t bytes = a->elem;
    bool fits = true;
    for (size_t d = 0; d < box->rank; d++) {
        uint64_t ext = nds_box_extent(box, d);
        if (ext <= 1) out->step[d] = 1;
        out->stop[d] = ext == 0 ? box->start[d] : box->start[d] + (ext - 1) * out->step[d] + 1;
        fits = fits && nds_mul_u64(bytes, ext, &bytes);
    }
    if (fits && bytes <= (uint64_t)INT64_MAX && bytes <= SIZE_MAX) return 0;
    char text[NDS_MAX_RANK * 64];
    nds_box_format(box, text, sizeof text);
    return nds_err(NDS_ERANGE, "%s %s: region %s holds more than 2^63 bytes of %zu-byte elements",
                   what, nds_kvstore_url(a->kv), text, a->elem);
}

/* Sets up call c over box (checked and normalised first: NDS_ERANGE naming the region). fine:
 * iterate the read-chunk grid (when the format has one) instead of the storage chunks. */
static inline int io_call_init(io_call *c, nds_array *a, const nds_box *box, const void *buf,
                               bool fine, const char *what) {
    uint64_t ext[NDS_MAX_RANK];
    int rc = io_box_normalise(a, box, &c->norm, what);
    if (rc) return rc;
    box = c->box = &c->norm;
    c->a = a;
    c->buf = (uint8_t *)buf;
    c->txn = NULL;
    c->by_ref = false;
    c->batch = NULL;
    c->run = 1;
    c->stream = false;
    c->grid_shape = fine ? a->meta.read_chunk_shape : a->meta.chunk_shape;
    c->grid_bytes = fine ? a->read_chunk_bytes : a->chunk_bytes;
    for (size_t d = 0; d < box->rank; d++) ext[d] = nds_box_extent(box, d);
    nds_c_strides(box->rank, ext, a->elem, c->buf_stride);
    nds_c_strides(box->rank, c->grid_shape, a->elem, c->chunk_unit);
    for (size_t d = 0; d < box->rank; d++)
        c->chunk_stride[d] = stepped_stride(c->chunk_unit[d], box->step[d], c->grid_shape[d]);
    grid_range_of(box->rank, c->grid_shape, box, &c->grid);
    return 0;
}

/* Where the selection of a chunk starts in the caller's buffer, and its byte offset in the chunk.
 */
static inline uint8_t *sel_buffer(const io_call *c, const chunk_sel *s) {
    int64_t bo = 0;
    for (size_t d = 0; d < c->box->rank; d++) bo += (int64_t)s->in_box[d] * c->buf_stride[d];
    return c->buf + bo;
}

static inline int64_t sel_chunk_offset(const io_call *c, const chunk_sel *s) {
    int64_t co = 0;
    for (size_t d = 0; d < c->box->rank; d++) co += (int64_t)s->in_chunk[d] * c->chunk_unit[d];
    return co;
}

static inline void sel_pointers(const io_call *c, const chunk_sel *s, uint8_t *chunk, uint8_t **bp,
                                uint8_t **cp) {
    *bp = sel_buffer(c, s);
    *cp = chunk + sel_chunk_offset(c, s);
}

/* Copies the caller's elements of selection s (of a write call) into chunk (canonical layout). */
static inline void io_call_merge(const io_call *c, const chunk_sel *s, uint8_t *chunk) {
    uint8_t *bp, *cp;
    sel_pointers(c, s, chunk, &bp, &cp);
    nds_strided_copy(c->box->rank, s->extent, c->a->elem, cp, c->chunk_stride, bp, c->buf_stride);
}

/* The box of its chunk (chunk coordinates) that selection s of a write call overwrites. */
static inline void sel_changed_box(const io_call *c, const chunk_sel *s, nds_box *changed) {
    changed->rank = c->box->rank;
    changed->dropped = 0;
    for (size_t d = 0; d < changed->rank; d++) {
        changed->start[d] = s->in_chunk[d];
        changed->stop[d] = s->in_chunk[d] + (s->extent[d] - 1) * c->box->step[d] + 1;
        changed->step[d] = c->box->step[d];
    }
}

/* Whether a chunk reaches past the array's shape (its stored rows are longer than the array's). */
static inline bool chunk_crosses_edge(const nds_array *a, const uint64_t *cell) {
    for (size_t d = 0; d < a->meta.rank; d++)
        if ((cell[d] + 1) * a->meta.chunk_shape[d] > a->meta.shape[d]) return true;
    return false;
}

static inline size_t call_threads(const nds_io_options *opts) {
    return opts && opts->threads > 0 ? (size_t)opts->threads : 0;
}

/* The transaction of a call: the options', else the one the array was opened in. */
static inline nds_txn *call_txn(const nds_array *a, const nds_io_options *opts) {
    nds_txn *t = opts && opts->version >= 2 ? opts->txn : NULL;
    return t ? t : a->txn;
}

#endif
