/* Array reads and writes: chunk-grid iteration over a box, chunks decoded and copied on the thread
 * pool, and the per-chunk optimistic write protocol (read chunk + generation, merge, conditional
 * write, retry). Each thread holds one chunk at a time (a read run: up to 2 MiB of them), so a
 * call's memory is (threads x chunk) plus the caller's buffer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "internal/array_internal.h"
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

#define KEY_MAX 512
/* Conflict retries: exponential backoff from 1 ms to 256 ms with jitter, for at most this many
 * tries. */
#define RETRY_MAX 2000

int nds_array_chunk_key(const nds_array *a, const uint64_t *cell, char *buf, size_t cap) {
    int rc = a->format->chunk_key(a->state, cell, buf, cap);
    return rc ? nds_err_prefix(rc, "%s: chunk key of %s", a->format->name, nds_kvstore_url(a->kv))
              : 0;
}

/* The cache key of a chunk: its full URL. */
static void cache_url(const nds_array *a, const char *key, char *buf, size_t cap) {
    snprintf(buf, cap, "%s%s", nds_kvstore_url(a->kv), key);
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

/* ---- chunk grid iteration ---- */

/* The chunks a box touches: first[d] .. first[d] + count[d] - 1 in each dimension. */
typedef struct grid_range {
    size_t rank;
    uint64_t first[NDS_MAX_RANK], count[NDS_MAX_RANK];
    uint64_t total;
} grid_range;

/* grid: the chunk shape of the grid iterated (the storage chunks, or the finer read chunks). */
static void grid_range_of(size_t rank, const uint64_t *grid, const nds_box *box, grid_range *g) {
    g->rank = rank;
    g->total = 1;
    for (size_t d = 0; d < rank; d++) {
        uint64_t ext = nds_box_extent(box, d);
        if (ext == 0) {
            g->total = 0;
            return;
        }
        uint64_t last = box->start[d] + (ext - 1) * box->step[d];
        g->first[d] = box->start[d] / grid[d];
        g->count[d] = last / grid[d] - g->first[d] + 1;
        g->total *= g->count[d]; /* bounded by the element count of the box, which fits */
    }
}

static void grid_cell(const grid_range *g, size_t i, uint64_t *cell) {
    for (size_t d = g->rank; d-- > 0;) {
        cell[d] = g->first[d] + i % g->count[d];
        i /= g->count[d];
    }
}

/* What of a box lies in one chunk: per dimension the first selected index inside the chunk (as an
 * offset in the chunk), its position in the box (0-based), and how many are selected. */
typedef struct chunk_sel {
    uint64_t in_chunk[NDS_MAX_RANK], in_box[NDS_MAX_RANK], extent[NDS_MAX_RANK];
    int whole; /* the selection is every element of the chunk that lies inside the array */
} chunk_sel;

static bool select_in_chunk(const nds_array_meta *m, const uint64_t *grid, const nds_box *box,
                            const uint64_t *cell, chunk_sel *s) {
    s->whole = 1;
    for (size_t d = 0; d < m->rank; d++) {
        uint64_t c0 = cell[d] * grid[d], c1 = c0 + grid[d];
        uint64_t hi = nds_min_u64(c1, box->stop[d]), lo = nds_max_u64(c0, box->start[d]);
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

/* Byte strides of the box's dense buffer and of the canonical chunk stepped by the box's steps. */
typedef struct io_call {
    nds_array *a;
    const nds_box *box;
    const uint64_t *grid_shape; /* chunk shape of the grid iterated */
    size_t grid_bytes;          /* canonical bytes of one chunk of that grid */
    grid_range grid;
    uint8_t *buf; /* caller's buffer (read: destination; write: source, not modified) */
    nds_txn *txn; /* staging / overlay transaction, or NULL */
    nds_write_batch *batch; /* write: chunks staged and published in batches, or NULL */
    int64_t buf_stride[NDS_MAX_RANK];
    int64_t chunk_stride[NDS_MAX_RANK]; /* canonical chunk strides x box step */
    size_t run; /* read: chunks one task decodes and copies (all those along the last dimension) */
} io_call;

/* fine: iterate the read-chunk grid (when the format has one) instead of the storage chunks. */
static void io_call_init(io_call *c, nds_array *a, const nds_box *box, const void *buf, bool fine) {
    uint64_t ext[NDS_MAX_RANK];
    c->a = a;
    c->box = box;
    c->buf = (uint8_t *)buf;
    c->txn = NULL;
    c->batch = NULL;
    c->run = 1;
    c->grid_shape = fine ? a->meta.read_chunk_shape : a->meta.chunk_shape;
    c->grid_bytes = fine ? a->read_chunk_bytes : a->chunk_bytes;
    for (size_t d = 0; d < box->rank; d++) ext[d] = nds_box_extent(box, d);
    nds_c_strides(box->rank, ext, a->elem, c->buf_stride);
    nds_c_strides(box->rank, c->grid_shape, a->elem, c->chunk_stride);
    for (size_t d = 0; d < box->rank; d++) c->chunk_stride[d] *= (int64_t)box->step[d];
    grid_range_of(box->rank, c->grid_shape, box, &c->grid);
}

/* Where the selection of a chunk starts in the caller's buffer, and its byte offset in the chunk.
 */
static uint8_t *sel_buffer(const io_call *c, const chunk_sel *s) {
    int64_t bo = 0;
    for (size_t d = 0; d < c->box->rank; d++) bo += (int64_t)s->in_box[d] * c->buf_stride[d];
    return c->buf + bo;
}

static int64_t sel_chunk_offset(const io_call *c, const chunk_sel *s) {
    int64_t co = 0;
    for (size_t d = 0; d < c->box->rank; d++)
        co += (int64_t)s->in_chunk[d] * (c->chunk_stride[d] / (int64_t)c->box->step[d]);
    return co;
}

static void sel_pointers(const io_call *c, const chunk_sel *s, uint8_t *chunk, uint8_t **bp,
                         uint8_t **cp) {
    *bp = sel_buffer(c, s);
    *cp = chunk + sel_chunk_offset(c, s);
}

/* Copies the selection of a canonical chunk into the caller's buffer. */
static void scatter(const io_call *c, const chunk_sel *s, const uint8_t *chunk) {
    const nds_array *a = c->a;
    nds_strided_copy(a->meta.rank, s->extent, a->elem, sel_buffer(c, s), c->buf_stride,
                     chunk + sel_chunk_offset(c, s), c->chunk_stride);
}

/* ---- read ---- */

/* Reads through a transaction see its staged elements over the stored chunk. */
static int overlay_staged(io_call *c, const uint64_t *cell, uint8_t *chunk, int *present) {
    char key[KEY_MAX];
    int rc = nds_array_chunk_key(c->a, cell, key, sizeof key);
    nds_txn_chunk *staged = rc ? NULL : nds_txn_chunk_get(c->txn, c->a, cell, key, false, &rc);
    if (rc || !staged) return rc;
    if (!*present) nds_fill_elements(chunk, c->a->chunk_elems, c->a->elem, c->a->meta.fill_value);
    nds_txn_overlay(staged, chunk, c->a->chunk_elems, c->a->elem);
    *present = 1;
    return 0;
}

/* Loads one chunk of the read grid: a read chunk through the format, or a whole storage chunk. */
static int load_for_read(io_call *c, const uint64_t *cell, uint8_t *chunk, int *present) {
    nds_array *a = c->a;
    if (c->grid_shape == a->meta.read_chunk_shape) {
        int rc = a->format->read_chunk(a->state, a->kv, cell, chunk, present);
        return rc ? nds_err_prefix(rc, "%s: read of %s", a->format->name, nds_kvstore_url(a->kv))
                  : 0;
    }
    char key[KEY_MAX];
    int rc = nds_array_chunk_key(a, cell, key, sizeof key);
    return rc ? rc : nds_array_load_chunk(a, cell, key, chunk, present, NULL, true);
}

/* The bytes [*lo, *hi) of a canonical chunk that hold a selection: from its first element to its
 * last (the selection's extents step through the chunk with the box's steps). */
static void sel_byte_span(const io_call *c, const chunk_sel *s, uint64_t *lo, uint64_t *hi) {
    int64_t first = sel_chunk_offset(c, s), last = first;
    for (size_t d = 0; d < c->box->rank; d++) last += (int64_t)(s->extent[d] - 1) * c->chunk_stride[d];
    *lo = (uint64_t)first;
    *hi = (uint64_t)last + c->a->elem;
}

/* Chunk rows at least this long are read straight into the caller's buffer (read_into); shorter
 * ones cost more as scattered reads than one read and a copy. */
#define READ_INTO_MIN_ROW 1024

static bool chunk_crosses_edge(const nds_array *a, const uint64_t *cell);

/* Whether a canonical chunk can be read straight into place: read whole (so every stored byte has
 * its place in the caller's buffer: not an edge chunk, whose stored rows run past the array), by a
 * driver that can (file), with rows long enough to be worth a scattered read and 64-byte aligned. */
static bool reads_into_place(const io_call *c, const uint64_t *cell, const chunk_sel *s) {
    const nds_array *a = c->a;
    if (!s->whole || chunk_crosses_edge(a, cell) || !nds_kvstore_can_read_into(a->kv) ||
        a->meta.chunk_shape[a->meta.rank - 1] * a->elem < READ_INTO_MIN_ROW)
        return false;
    /* The kernel copies into a destination off a cache line at under half speed (measured: 2.2
     * GB/s at a page offset of 16, where malloc puts large blocks, against 6.0-6.8 aligned; a
     * read and a copy of our own manage 4.9): only rows that all start on one. */
    uintptr_t align = (uintptr_t)sel_buffer(c, s);
    for (size_t d = 0; d + 1 < a->meta.rank; d++) align |= (uintptr_t)c->buf_stride[d];
    return (align & 63) == 0;
}

/* The places of a whole chunk's rows in the caller's buffer, in stored (C) order; rows that follow
 * each other there too are merged. @return the number of entries */
static size_t chunk_row_places(const io_call *c, const chunk_sel *s, struct iovec *iov) {
    const nds_array *a = c->a;
    size_t last = a->meta.rank - 1, row = a->meta.chunk_shape[last] * a->elem, n = 0;
    size_t rows = a->chunk_elems / a->meta.chunk_shape[last];
    uint64_t idx[NDS_MAX_RANK] = {0};
    uint8_t *base = sel_buffer(c, s);
    int64_t off = 0;
    for (size_t r = 0; r < rows; r++) {
        uint8_t *p = base + off;
        if (n > 0 && (uint8_t *)iov[n - 1].iov_base + iov[n - 1].iov_len == p)
            iov[n - 1].iov_len += row;
        else
            iov[n++] = (struct iovec){p, row};
        for (size_t d = last; d-- > 0;) { /* next row: odometer over the outer dimensions */
            off += c->buf_stride[d];
            if (++idx[d] < a->meta.chunk_shape[d]) break;
            off -= c->buf_stride[d] * (int64_t)a->meta.chunk_shape[d];
            idx[d] = 0;
        }
    }
    return n;
}

/* Reads a whole canonical chunk straight into the caller's buffer: one scattered read, no copy. */
static int read_into_place(io_call *c, const uint64_t *cell, const chunk_sel *s) {
    nds_array *a = c->a;
    char key[KEY_MAX];
    nds_read_result r;
    int rc = nds_array_chunk_key(a, cell, key, sizeof key);
    if (rc) return rc;
    size_t rows = a->chunk_elems / a->meta.chunk_shape[a->meta.rank - 1];
    struct iovec *iov = malloc(rows * sizeof *iov);
    if (!iov) return nds_err(NDS_ENOMEM, "out of memory");
    rc = nds_kvstore_read_into(a->kv, key, 0, iov, chunk_row_places(c, s, iov), &r);
    free(iov);
    if (rc == NDS_ERANGE || (!rc && r.state == NDS_READ_VALUE && r.total_size != a->chunk_bytes))
        rc = nds_err(NDS_ECORRUPT, "%s: chunk %s of %s: expected %zu bytes, found %llu",
                     a->format->name, key, nds_kvstore_url(a->kv), a->chunk_bytes,
                     (unsigned long long)r.total_size);
    else if (rc)
        rc = nds_err_prefix(rc, "%s: chunk %s of %s", a->format->name, key, nds_kvstore_url(a->kv));
    else if (r.state != NDS_READ_VALUE)
        nds_strided_fill(a->meta.rank, s->extent, a->elem, sel_buffer(c, s), c->buf_stride,
                         a->meta.fill_value);
    return rc;
}

/* Reads a chunk whose stored bytes are its canonical form: copied straight from the stored value
 * into the caller's buffer, with no decode and no chunk buffer. Only the span of bytes holding
 * the selection is read (a region straddling chunks needs a fraction of each). */
static int read_in_place(io_call *c, const uint64_t *cell, const chunk_sel *s) {
    if (reads_into_place(c, cell, s)) return read_into_place(c, cell, s);
    nds_array *a = c->a;
    char key[KEY_MAX];
    nds_read_result r;
    uint64_t lo, hi;
    sel_byte_span(c, s, &lo, &hi);
    nds_read_options ro = NDS_READ_OPTIONS_INIT;
    ro.byte_start = (int64_t)lo;
    ro.byte_length = (int64_t)(hi - lo);
    int rc = nds_array_chunk_key(a, cell, key, sizeof key);
    if (rc) return rc;
    if ((rc = nds_kvstore_read(a->kv, key, &ro, &r)) == NDS_ERANGE) /* shorter than the span */
        return nds_err(NDS_ECORRUPT, "%s: chunk %s of %s: expected %zu bytes, found %llu or fewer",
                       a->format->name, key, nds_kvstore_url(a->kv), a->chunk_bytes,
                       (unsigned long long)lo);
    if (rc)
        return nds_err_prefix(rc, "%s: chunk %s of %s", a->format->name, key,
                              nds_kvstore_url(a->kv));
    uint8_t *bp = sel_buffer(c, s);
    if (r.state != NDS_READ_VALUE)
        nds_strided_fill(a->meta.rank, s->extent, a->elem, bp, c->buf_stride, a->meta.fill_value);
    else if (r.total_size != a->chunk_bytes || r.value.len != hi - lo)
        rc = nds_err(NDS_ECORRUPT, "%s: chunk %s of %s: expected %zu bytes, found %llu",
                     a->format->name, key, nds_kvstore_url(a->kv), a->chunk_bytes,
                     (unsigned long long)r.total_size);
    else
        nds_strided_copy(a->meta.rank, s->extent, a->elem, bp, c->buf_stride, r.value.data,
                         c->chunk_stride);
    nds_read_result_dispose(&r);
    return rc;
}

/* Reads a storage chunk through the cache: a hit still valid is copied straight out of the cache
 * entry; a miss is decoded into a buffer that then becomes the entry (no copy into the cache). */
static int read_cached(io_call *c, const uint64_t *cell, const chunk_sel *s,
                       nds_chunk_cache *cache) {
    nds_array *a = c->a;
    char key[KEY_MAX], url[KEY_MAX + 512];
    int rc = nds_array_chunk_key(a, cell, key, sizeof key);
    if (rc) return rc;
    cache_url(a, key, url, sizeof url);
    nds_cache_entry *hit = nds_cache_get(cache, url);
    nds_read_options ro = NDS_READ_OPTIONS_INIT;
    if (hit) ro.if_not_equal = *nds_cache_generation(hit);
    nds_read_result r;
    if ((rc = nds_kvstore_read(a->kv, key, &ro, &r))) {
        nds_cache_release(cache, hit);
        return nds_err_prefix(rc, "%s: chunk %s of %s", a->format->name, key,
                              nds_kvstore_url(a->kv));
    }
    const uint8_t *data = NULL;
    uint8_t *fresh = NULL;
    if (r.state == NDS_READ_UNCHANGED) {
        data = nds_cache_data(hit);
    } else if (r.state == NDS_READ_VALUE) {
        if (!(fresh = nds_cache_buffer(cache, a->chunk_bytes)))
            rc = nds_err(NDS_ENOMEM, "out of memory");
        if (!rc) rc = a->format->decode_chunk(a->state, cell, r.value.data, r.value.len, fresh);
        data = fresh;
    }
    if (!rc && data)
        scatter(c, s, data);
    else if (!rc)
        nds_strided_fill(a->meta.rank, s->extent, a->elem, sel_buffer(c, s), c->buf_stride,
                         a->meta.fill_value);
    nds_cache_release(cache, hit);
    if (fresh) /* the new entry (a failed decode or a missing chunk drops the stale one) */
        nds_cache_put_owned(cache, url, rc ? NULL : fresh, a->chunk_bytes, &r.generation);
    if (fresh && rc)
        nds_cache_buffer_free(cache, fresh, a->chunk_bytes);
    else if (r.state != NDS_READ_UNCHANGED && !fresh)
        nds_cache_forget(cache, url);
    nds_read_result_dispose(&r);
    return rc ? nds_err_prefix(rc, "%s: chunk %s of %s", a->format->name, key,
                               nds_kvstore_url(a->kv))
              : 0;
}

/* Whether a read can copy straight from stored values: canonical storage, the storage grid, no
 * staged chunks to overlay, and no cache to fill, or a local store (a cached canonical chunk saves
 * only a read from the page cache, and filling the cache costs a copy of the whole chunk). */
static bool reads_in_place(const io_call *c) {
    return c->a->meta.stored_canonical && c->grid_shape == c->a->meta.chunk_shape && !c->txn &&
           (!nds_context_cache(c->a->ctx) ||
            (nds_kvstore_capabilities(c->a->kv) & NDS_KV_CAP_LOCAL));
}

/* Whether the part of a chunk a selection needs can be decoded alone: a format that can (blosc
 * chunks of zarr v2: only the blocks holding it), the storage grid, nothing to overlay, no cache
 * to fill with whole chunks, and a selection that is not the whole chunk. */
static bool reads_part(const io_call *c, const chunk_sel *s) {
    const nds_format *f = c->a->format;
    return f->version >= 2 && f->decode_chunk_part && !s->whole &&
           c->grid_shape == c->a->meta.chunk_shape && !c->txn && !nds_context_cache(c->a->ctx);
}

/* Decodes the part of a chunk a selection needs: only the bytes [lo, hi) holding it are decoded
 * into chunk (all of it when the format's pipeline cannot decode a part). */
static int load_part(io_call *c, const uint64_t *cell, const chunk_sel *s, uint8_t *chunk,
                     int *present) {
    nds_array *a = c->a;
    char key[KEY_MAX];
    nds_read_result r;
    uint64_t lo, hi;
    sel_byte_span(c, s, &lo, &hi);
    int rc = nds_array_chunk_key(a, cell, key, sizeof key);
    if (rc || (rc = nds_kvstore_read(a->kv, key, NULL, &r)))
        return rc ? nds_err_prefix(rc, "%s: chunk %s of %s", a->format->name, key,
                                   nds_kvstore_url(a->kv))
                  : rc;
    *present = r.state == NDS_READ_VALUE;
    if (*present) {
        rc = a->format->decode_chunk_part(a->state, cell, r.value.data, r.value.len, chunk, lo, hi);
        if (rc == NDS_EUNSUPPORTED)
            rc = a->format->decode_chunk(a->state, cell, r.value.data, r.value.len, chunk);
    }
    nds_read_result_dispose(&r);
    return rc ? nds_err_prefix(rc, "%s: chunk %s of %s", a->format->name, key,
                               nds_kvstore_url(a->kv))
              : 0;
}

/* Loads what a read needs of one chunk of its grid into chunk: the part of it the selection
 * covers when the format can decode a part, else all of it. */
static int load_selection(io_call *c, const uint64_t *cell, const chunk_sel *s, uint8_t *chunk,
                          int *present) {
    if (reads_part(c, s)) return load_part(c, cell, s, chunk, present);
    int rc = load_for_read(c, cell, chunk, present);
    if (!rc && c->txn) rc = overlay_staged(c, cell, chunk, present);
    return rc;
}

/* ---- runs of chunks along the last dimension ---- */

/* A task decodes at most this many chunks at once, and at most RUN_BUDGET bytes of them. Runs of
 * two 4 MiB chunks measured 1.04x (zstd, gzip) to 1.19x (blosc) faster, at 8 MiB more per thread:
 * not taken, to keep a read within its memory bound of (cores x 2) chunks. */
#define RUN_MAX 8
#define RUN_BUDGET ((size_t)2 << 20)

/* How many chunks along the last dimension one read task takes. A chunk's rows land in the
 * output as pieces of longer rows (a 64^3 uint16 chunk of a 256-wide array: 4096 rows of 128
 * bytes, a quarter of an output row each). When the few chunks a box spans along its last
 * dimension fit one task, the task decodes them all and writes whole output rows, one after the
 * other: measured 1.1x (zstd) to 1.26x (blosc) faster full reads than chunk after chunk (runs
 * that cover part of the rows measured no faster: docs/performance.md). Only for whole-chunk
 * decodes (no cache, no transaction overlay, not stored uncompressed) of rows stepped by 1, within
 * the memory allowed per task, and when the runs leave work for every thread. */
static size_t read_run_length(const io_call *c, size_t threads) {
    const nds_array *a = c->a;
    size_t last = a->meta.rank - 1;
    if (a->meta.rank < 2 || c->box->step[last] != 1 || c->txn || nds_context_cache(a->ctx) ||
        a->meta.stored_canonical)
        return 1;
    uint64_t k = c->grid.count[last];
    if (k < 2 || k > RUN_MAX) return 1;
    if (k * c->grid_bytes > RUN_BUDGET) return 1;
    return c->grid.total / k >= 4 * threads ? (size_t)k : 1;
}

/* Decodes the chunks of a run into consecutive chunk buffers, then copies them out one output row
 * at a time. A chunk that is missing is filled in the output at once and left out of the copy. */
static int read_run(io_call *c, size_t t) {
    nds_array *a = c->a;
    size_t first = t * c->run, n = c->run, pieces = 0, last = a->meta.rank - 1;
    uint8_t *chunks = nds_scratch(NDS_SCRATCH_CHUNK, n * c->grid_bytes);
    if (!chunks) return NDS_ENOMEM;
    uint8_t *dst[RUN_MAX];
    const uint8_t *src[RUN_MAX];
    size_t row_bytes[RUN_MAX];
    chunk_sel s0;
    int rc = 0;
    for (size_t j = 0; j < n && !rc; j++) {
        uint64_t cell[NDS_MAX_RANK];
        chunk_sel s;
        int present;
        grid_cell(&c->grid, first + j, cell);
        if (!select_in_chunk(&a->meta, c->grid_shape, c->box, cell, &s)) continue;
        uint8_t *chunk = chunks + pieces * c->grid_bytes;
        if ((rc = load_selection(c, cell, &s, chunk, &present))) break;
        if (!present) {
            nds_strided_fill(a->meta.rank, s.extent, a->elem, sel_buffer(c, &s), c->buf_stride,
                             a->meta.fill_value);
            continue;
        }
        s0 = s;
        dst[pieces] = sel_buffer(c, &s);
        src[pieces] = chunk + sel_chunk_offset(c, &s);
        row_bytes[pieces++] = s.extent[last] * a->elem;
    }
    if (!rc && pieces)
        nds_strided_copy_rows(last, s0.extent, c->buf_stride, c->chunk_stride, pieces, dst, src,
                              row_bytes);
    nds_scratch_trim(NDS_SCRATCH_CHUNK);
    return rc;
}

static int read_task(void *ctx, size_t i) {
    io_call *c = ctx;
    nds_array *a = c->a;
    uint64_t cell[NDS_MAX_RANK];
    chunk_sel s;
    if (c->run > 1) return read_run(c, i);
    grid_cell(&c->grid, i, cell);
    if (!select_in_chunk(&a->meta, c->grid_shape, c->box, cell, &s)) return 0;
    if (reads_in_place(c)) return read_in_place(c, cell, &s);
    nds_chunk_cache *cache = nds_context_cache(a->ctx);
    if (cache && c->grid_shape == a->meta.chunk_shape && !c->txn)
        return read_cached(c, cell, &s, cache);
    uint8_t *chunk = nds_scratch(NDS_SCRATCH_CHUNK, c->grid_bytes);
    if (!chunk) return NDS_ENOMEM;
    int present, rc = load_selection(c, cell, &s, chunk, &present);
    if (!rc && present)
        scatter(c, &s, chunk);
    else if (!rc)
        nds_strided_fill(a->meta.rank, s.extent, a->elem, sel_buffer(c, &s), c->buf_stride,
                         a->meta.fill_value);
    nds_scratch_trim(NDS_SCRATCH_CHUNK); /* do not pin huge chunks per thread */
    return rc;
}

static size_t call_threads(const nds_io_options *opts) {
    return opts && opts->threads > 0 ? (size_t)opts->threads : 0;
}

/* The transaction of a call: the options', else the one the array was opened in. */
static nds_txn *call_txn(const nds_array *a, const nds_io_options *opts) {
    nds_txn *t = opts && opts->version >= 2 ? opts->txn : NULL;
    return t ? t : a->txn;
}

int nds_array_read(nds_array *a, const nds_box *box, void *out, const nds_io_options *opts) {
    pthread_rwlock_rdlock(&a->meta_lock);
    int rc = nds_box_check(box, a->meta.rank, a->meta.shape);
    if (rc) rc = nds_err_prefix(rc, "read of %s", nds_kvstore_url(a->kv));
    nds_txn *txn = call_txn(a, opts);
    if (!rc && txn) rc = nds_txn_check_open(txn);
    io_call c;
    if (!rc) {
        /* Staged chunks are whole storage chunks: overlaying them needs the storage grid. */
        bool staged = txn && nds_txn_touches(txn, a);
        io_call_init(&c, a, box, out, a->read_chunk_bytes != 0 && !staged);
        c.txn = staged ? txn : NULL;
        size_t threads = call_threads(opts);
        if (threads == 0 && (nds_kvstore_capabilities(a->kv) & NDS_KV_CAP_LOCAL))
            threads = (size_t)nds_context_local_read_threads(a->ctx);
        c.run = read_run_length(&c, threads ? threads : (size_t)nds_context_threads(a->ctx));
        rc = nds_pool_for(nds_context_pool(a->ctx), c.grid.total / c.run, threads, read_task, &c);
    }
    pthread_rwlock_unlock(&a->meta_lock);
    return rc;
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

/* Stores a merged chunk: deleted when all fill, else encoded and written; both under if_equal.
 * With staged non-NULL a value is staged instead of written (*staged set; the caller publishes it
 * under cond); deletes are never staged. */
static int store_chunk(nds_array *a, const uint64_t *cell, const char *key, const uint8_t *chunk,
                       const nds_generation *cond, int was_present, nds_kv_staged **staged) {
    nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
    wo.if_equal = *cond;
    nds_buf *enc = nds_scratch_buf(NDS_SCRATCH_ENCODED);
    if (!enc) return nds_err(NDS_ENOMEM, "out of memory");
    int all_fill, rc = 0;
    const uint8_t *bytes = chunk; /* canonical storage: the chunk buffer is what is stored */
    size_t len = a->chunk_bytes;
    if (a->meta.stored_canonical) {
        all_fill = nds_all_equal(chunk, a->chunk_elems, a->elem, a->meta.fill_value);
    } else {
        rc = nds_array_encode_for_store(a, cell, key, chunk, enc, &all_fill);
        bytes = enc->data;
        len = enc->len;
    }
    if (rc) return rc;
    nds_chunk_cache *cache = nds_context_cache(a->ctx);
    char url[KEY_MAX + 512];
    if (cache) cache_url(a, key, url, sizeof url);
    if (all_fill) {
        if (!was_present && cond->kind != NDS_GEN_NONE) return 0; /* still missing: nothing to do */
        rc = nds_kvstore_delete(a->kv, key, &wo);
        if (cache) nds_cache_forget(cache, url);
        return rc;
    }
    if (staged) { /* a cached copy goes stale when the batch is published */
        if (cache) nds_cache_forget(cache, url);
        return nds_kvstore_stage(a->kv, key, bytes, len, staged);
    }
    nds_generation written = {NDS_GEN_NONE, {0}};
    rc = nds_kvstore_write(a->kv, key, bytes, len, &wo, &written);
    if (cache && rc == 0)
        nds_cache_put(cache, url, chunk, a->chunk_bytes, &written);
    else if (cache)
        nds_cache_forget(cache, url);
    return rc;
}

static bool chunk_crosses_edge(const nds_array *a, const uint64_t *cell) {
    for (size_t d = 0; d < a->meta.rank; d++)
        if ((cell[d] + 1) * a->meta.chunk_shape[d] > a->meta.shape[d]) return true;
    return false;
}

/* A chunk staged by update_locked and the condition it must be published under. */
typedef struct staged_chunk {
    nds_kv_staged *value; /* NULL when nothing was staged (a delete, done at once) */
    nds_generation cond;
} staged_chunk;

/* Read (unless whole), merge, store; retried on conflict. With sc, a value is staged, not
 * written. */
static int update_locked(nds_array *a, const uint64_t *cell, const char *key, int whole,
                         nds_merge_fn merge, void *ctx, uint8_t *chunk, staged_chunk *sc) {
    for (int attempt = 0;; attempt++) {
        nds_generation cond = {NDS_GEN_NONE, {0}};
        int present = 1, rc = 0;
        /* A whole write overwrites every element inside the array; only an edge chunk's part beyond
         * the array's shape needs the fill value first. */
        if (!whole)
            rc = nds_array_load_chunk(a, cell, key, chunk, &present, &cond, true);
        else if (chunk_crosses_edge(a, cell))
            nds_fill_elements(chunk, a->chunk_elems, a->elem, a->meta.fill_value);
        if (rc) return rc;
        merge(ctx, cell, chunk);
        rc = store_chunk(a, cell, key, chunk, &cond, present, sc ? &sc->value : NULL);
        if (sc) sc->cond = cond;
        if (rc != NDS_ECONFLICT) {
            if (rc)
                rc = nds_err_prefix(rc, "%s: writing chunk %s of %s", a->format->name, key,
                                    nds_kvstore_url(a->kv));
            return rc;
        }
        if (attempt + 1 >= RETRY_MAX)
            return nds_err(NDS_ECONFLICT, "%s: chunk %s of %s: still conflicting after %d attempts",
                           a->format->name, key, nds_kvstore_url(a->kv), RETRY_MAX);
        backoff(attempt);
    }
}

/* Runs update_locked under the chunk's in-process lock (sc: stage instead of writing). */
static int update_chunk(nds_array *a, const uint64_t *cell, int whole, nds_merge_fn merge,
                        void *ctx, staged_chunk *sc) {
    char key[KEY_MAX];
    int rc = nds_array_chunk_key(a, cell, key, sizeof key);
    if (rc) return rc;
    uint8_t *chunk = nds_scratch(NDS_SCRATCH_CHUNK, a->chunk_bytes);
    if (!chunk) return NDS_ENOMEM;
    nds_chunk_lock_entry *lock = nds_chunk_lock(&a->locks, key);
    if (!lock) return NDS_ENOMEM;
    rc = update_locked(a, cell, key, whole, merge, ctx, chunk, sc);
    nds_chunk_unlock(&a->locks, lock);
    return rc;
}

int nds_array_update_chunk(nds_array *a, const uint64_t *cell, int whole, nds_merge_fn merge,
                           void *ctx) {
    return update_chunk(a, cell, whole, merge, ctx, NULL);
}

/* Stages one chunk of a batched write, then hands it to the batch after the chunk's lock is
 * released (the batch may publish, and a conflicted chunk's redo takes its lock: never while
 * holding another). */
int nds_array_stage_update(nds_array *a, const uint64_t *cell, size_t index, int whole,
                           nds_merge_fn merge, void *ctx, nds_write_batch *batch) {
    staged_chunk sc = {NULL, {NDS_GEN_NONE, {0}}};
    int rc = update_chunk(a, cell, whole, merge, ctx, &sc);
    if (rc || !sc.value) return rc;
    return nds_write_batch_add(batch, sc.value, &sc.cond, index);
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

/* A write inside a transaction: copy into the staged chunk and mark the elements written. */
static int stage_write(io_call *c, const uint64_t *cell, const chunk_sel *s) {
    nds_array *a = c->a;
    char key[KEY_MAX];
    int rc = nds_array_chunk_key(a, cell, key, sizeof key);
    nds_txn_chunk *staged = rc ? NULL : nds_txn_chunk_get(c->txn, a, cell, key, true, &rc);
    if (rc) return rc;
    write_merge w = {c, s};
    merge_from_buffer(&w, cell, staged->data);
    int64_t mask_stride[NDS_MAX_RANK];
    int64_t off = 0;
    nds_c_strides(a->meta.rank, a->meta.chunk_shape, 1, mask_stride);
    for (size_t d = 0; d < a->meta.rank; d++) {
        off += (int64_t)s->in_chunk[d] * mask_stride[d];
        mask_stride[d] *= (int64_t)c->box->step[d];
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
    return batch ? nds_array_stage_update(c->a, cell, i, s.whole, merge_from_buffer, &w, batch)
                 : nds_array_update_chunk(c->a, cell, s.whole, merge_from_buffer, &w);
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

int nds_array_write(nds_array *a, const nds_box *box, const void *in, const nds_io_options *opts) {
    pthread_rwlock_rdlock(&a->meta_lock);
    int rc = nds_box_check(box, a->meta.rank, a->meta.shape);
    if (rc) rc = nds_err_prefix(rc, "write to %s", nds_kvstore_url(a->kv));
    nds_txn *txn = call_txn(a, opts);
    if (!rc && txn) rc = nds_txn_check_open(txn);
    if (!rc && txn && a->meta.grouped) rc = nds_array_group_txn_refusal(a); /* nothing staged */
    io_call c;
    if (!rc) {
        io_call_init(&c, a, box, in, false);
        c.txn = txn;
        rc = a->meta.grouped ? nds_array_write_groups(a, &c, call_threads(opts)) /* array_group.c */
                             : write_chunks(&c, call_threads(opts));
        if (rc && txn) nds_txn_poison(txn);
    }
    pthread_rwlock_unlock(&a->meta_lock);
    return rc;
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
