/* Array reads: the chunks a box touches are loaded on the thread pool (in place for uncompressed
 * chunks, through the cache, in part where the codec allows, in runs along the last dimension) and
 * copied into the caller's buffer. Each thread holds one chunk at a time (a read run: up to 2 MiB
 * of them). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "internal/array_internal.h"
#include "internal/array_io.h"
#include "internal/chunk_cache.h"
#include "internal/context_internal.h"
#include "internal/dtype_util.h"
#include "internal/error.h"
#include "internal/format_util.h"
#include "internal/kvstore_internal.h"
#include "internal/strided.h"
#include "internal/txn_internal.h"
#include "internal/util.h"

/* Copies a selection from its place in a canonical chunk into the caller's buffer (bypassing the
 * cache when the buffer is larger than it). */
static void copy_out(const io_call *c, const chunk_sel *s, const uint8_t *from,
                     const int64_t *from_stride) {
    const nds_array *a = c->a;
    if (c->stream)
        nds_strided_copy_streaming(a->meta.rank, s->extent, a->elem, sel_buffer(c, s),
                                   c->buf_stride, from, from_stride);
    else
        nds_strided_copy(a->meta.rank, s->extent, a->elem, sel_buffer(c, s), c->buf_stride, from,
                         from_stride);
}

/* Copies the selection of a canonical chunk into the caller's buffer. */
static void scatter(const io_call *c, const chunk_sel *s, const uint8_t *chunk) {
    copy_out(c, s, chunk + sel_chunk_offset(c, s), c->chunk_stride);
}

/* Fills the selection of a chunk that is missing with the fill value. */
static void fill_selection(const io_call *c, const chunk_sel *s) {
    const nds_array *a = c->a;
    nds_strided_fill(a->meta.rank, s->extent, a->elem, sel_buffer(c, s), c->buf_stride,
                     a->meta.fill_value);
}

/* The error of an uncompressed chunk whose stored size is not the chunk's: found bytes (or, when
 * a ranged read fell short, found or fewer). */
static int wrong_size(const nds_array *a, const char *key, uint64_t found, bool or_fewer) {
    return nds_err(NDS_ECORRUPT, "%s: chunk %s of %s: expected %zu bytes, found %llu%s",
                   a->format->name, key, nds_kvstore_url(a->kv), a->chunk_bytes,
                   (unsigned long long)found, or_fewer ? " or fewer" : "");
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


/* Whether a canonical chunk can be read straight into place (never at rank 0: rows are along the
 * last dimension): read whole (so every stored byte has
 * its place in the caller's buffer: not an edge chunk, whose stored rows run past the array), by a
 * driver that can (file), with rows long enough to be worth a scattered read and 64-byte
 * aligned. */
static bool reads_into_place(const io_call *c, const uint64_t *cell, const chunk_sel *s) {
    const nds_array *a = c->a;
    if (a->meta.rank == 0 || !s->whole || chunk_crosses_edge(a, cell) ||
        !nds_kvstore_can_read_into(a->kv) ||
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
        rc = wrong_size(a, key, r.total_size, false);
    else if (rc)
        rc = nds_err_prefix(rc, "%s: chunk %s of %s", a->format->name, key, nds_kvstore_url(a->kv));
    else if (r.state != NDS_READ_VALUE)
        fill_selection(c, s);
    return rc;
}

/* ---- canonical chunks read plane by plane ---- */

/* A range read plane by plane must save at least this many bytes over the one span from the
 * selection's first byte to its last, to pay for its system call (measured: one pread costs
 * about what the kernel's copy of 8 KiB does; 64^3 uint16 chunks, whose planes are 8 KiB, gained
 * nothing from it, 128^3 ones 1.27-1.43x); at most RANGES_MAX of them. */
#define RANGE_MIN_SAVING 8192
#define RANGES_MAX 4096

/* Whether reading a canonical chunk's selection one plane (its last two dimensions) at a time
 * pays over one span: sets *planes and each plane's span *plane_bytes. */
static bool plane_ranges_pay(const io_call *c, const chunk_sel *s, size_t *planes,
                             uint64_t *plane_bytes) {
    size_t rank = c->box->rank;
    if (rank < 3 || !nds_kvstore_can_read_ranges(c->a->kv)) return false;
    uint64_t n = 1, lo, hi;
    for (size_t d = 0; d + 2 < rank; d++) n *= s->extent[d];
    *plane_bytes = (s->extent[rank - 2] - 1) * (uint64_t)c->chunk_stride[rank - 2] +
                   (s->extent[rank - 1] - 1) * (uint64_t)c->chunk_stride[rank - 1] + c->a->elem;
    sel_byte_span(c, s, &lo, &hi);
    *planes = (size_t)n;
    return n > 1 && n <= RANGES_MAX && hi - lo >= n * (*plane_bytes + RANGE_MIN_SAVING);
}

/* Reads the selection's planes into one buffer, one after the other, and copies them out: the
 * stored bytes between planes (rows of the chunk the selection does not reach) are not read. */
static int read_planes(io_call *c, const chunk_sel *s, const char *key, size_t planes,
                       uint64_t plane_bytes) {
    nds_array *a = c->a;
    size_t rank = c->box->rank;
    uint8_t *buf = nds_scratch(NDS_SCRATCH_CHUNK, planes * plane_bytes);
    nds_byte_range *ranges = malloc(planes * sizeof *ranges);
    if (!buf || !ranges) {
        free(ranges);
        return nds_err(NDS_ENOMEM, "out of memory");
    }
    uint64_t idx[NDS_MAX_RANK] = {0};
    int64_t off = sel_chunk_offset(c, s), packed[NDS_MAX_RANK];
    for (size_t p = 0; p < planes; p++) { /* odometer over the plane dimensions */
        ranges[p] = (nds_byte_range){(uint64_t)off, plane_bytes, buf + p * plane_bytes};
        for (size_t d = rank - 2; d-- > 0;) {
            off += c->chunk_stride[d];
            if (++idx[d] < s->extent[d]) break;
            off -= c->chunk_stride[d] * (int64_t)s->extent[d];
            idx[d] = 0;
        }
    }
    nds_read_result r;
    int rc = nds_kvstore_read_ranges(a->kv, key, ranges, planes, &r);
    free(ranges);
    /* The driver reports the value's size with a range past its end too. */
    if (rc == NDS_ERANGE || (!rc && r.state == NDS_READ_VALUE && r.total_size != a->chunk_bytes))
        rc = wrong_size(a, key, r.total_size, false);
    else if (rc)
        rc = nds_err_prefix(rc, "%s: chunk %s of %s", a->format->name, key,
                            nds_kvstore_url(a->kv));
    else if (r.state != NDS_READ_VALUE)
        fill_selection(c, s);
    else {
        packed[rank - 1] = c->chunk_stride[rank - 1];
        packed[rank - 2] = c->chunk_stride[rank - 2];
        packed[rank - 3] = (int64_t)plane_bytes;
        for (size_t d = rank - 3; d-- > 0;) packed[d] = packed[d + 1] * (int64_t)s->extent[d + 1];
        copy_out(c, s, buf, packed);
    }
    nds_scratch_trim(NDS_SCRATCH_CHUNK); /* do not pin huge chunks per thread */
    return rc;
}

/* Reads a chunk whose stored bytes are its canonical form: copied straight from the stored value
 * into the caller's buffer, with no decode and no chunk buffer. Only the span of bytes holding
 * the selection is read (a region straddling chunks needs a fraction of each), or, where the
 * store reads several ranges at once and it pays, only each plane's span. */
static int read_in_place(io_call *c, const uint64_t *cell, const chunk_sel *s) {
    if (reads_into_place(c, cell, s)) return read_into_place(c, cell, s);
    size_t planes;
    uint64_t plane_bytes;
    if (plane_ranges_pay(c, s, &planes, &plane_bytes)) {
        char key[KEY_MAX];
        int rc = nds_array_chunk_key(c->a, cell, key, sizeof key);
        return rc ? rc : read_planes(c, s, key, planes, plane_bytes);
    }
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
        return wrong_size(a, key, lo, true);
    if (rc)
        return nds_err_prefix(rc, "%s: chunk %s of %s", a->format->name, key,
                              nds_kvstore_url(a->kv));
    if (r.state != NDS_READ_VALUE)
        fill_selection(c, s);
    else if (r.total_size != a->chunk_bytes || r.value.len != hi - lo)
        rc = wrong_size(a, key, r.total_size, false);
    else
        copy_out(c, s, r.value.data, c->chunk_stride);
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
        fill_selection(c, s);
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

/* Whether the part of a chunk a selection needs can be decoded alone: a format that can (zarr v2
 * and v3 with blosc: only the blocks holding it; zstd: the frame up to it), the storage grid,
 * nothing to overlay, no cache to fill with whole chunks, and a selection that is not the whole
 * chunk. */
static bool reads_part(const io_call *c, const chunk_sel *s) {
    const nds_format *f = c->a->format;
    return f->version >= 2 && f->decode_chunk_part && !s->whole &&
           c->grid_shape == c->a->meta.chunk_shape && !c->txn && !nds_context_cache(c->a->ctx);
}

/* Reads parts of one stored value (codec.h nds_part_reader) straight into the reader's buffers,
 * all from the version the first read saw. */
typedef struct part_source {
    nds_kvstore *kv;
    const char *key;
    nds_generation seen; /* NDS_GEN_NONE until the first read */
} part_source;

static int read_value_part(void *arg, uint64_t offset, size_t len, uint8_t *dst,
                           uint64_t *value_len) {
    part_source *p = arg;
    struct iovec iov = {dst, len};
    nds_read_result r;
    int rc = nds_kvstore_read_into(p->kv, p->key, offset, &iov, 1, &r);
    bool first = p->seen.kind == NDS_GEN_NONE;
    /* Later reads stay within the size the first one reported: a value shorter now is another
     * version. */
    if (rc == NDS_ERANGE && !first) return NDS_ECONFLICT;
    if (rc) return rc;
    if (r.state != NDS_READ_VALUE) return first ? NDS_ENOTFOUND : NDS_ECONFLICT;
    if (!first && !nds_generation_equal(&p->seen, &r.generation)) return NDS_ECONFLICT;
    p->seen = r.generation;
    *value_len = r.total_size;
    return 0;
}

/* Decodes bytes [lo, hi) of a chunk reading only the stored bytes they need, from a store that
 * reads into place (file). NDS_EUNSUPPORTED (no message): read the value whole instead, as when
 * it changed between two reads (NDS_ECONFLICT). */
static int read_part_in_place(io_call *c, const uint64_t *cell, const char *key, uint8_t *chunk,
                              uint64_t lo, uint64_t hi, int *present) {
    const nds_format *f = c->a->format;
    if (f->version < 4 || !f->read_chunk_part || !nds_kvstore_can_read_into(c->a->kv))
        return NDS_EUNSUPPORTED;
    part_source src = {c->a->kv, key, {NDS_GEN_NONE, {0}}};
    nds_part_reader r = {read_value_part, &src};
    int rc = f->read_chunk_part(c->a->state, cell, &r, chunk, lo, hi);
    *present = rc != NDS_ENOTFOUND;
    if (rc == NDS_ENOTFOUND) return 0;
    return rc == NDS_ECONFLICT ? NDS_EUNSUPPORTED : rc;
}

/* Decodes the part of a chunk a selection needs: only the bytes [lo, hi) holding it are decoded
 * into chunk (all of it when the format's pipeline cannot decode a part), reading only the
 * stored bytes they need where the store and the codec allow. */
static int load_part(io_call *c, const uint64_t *cell, const chunk_sel *s, uint8_t *chunk,
                     int *present) {
    nds_array *a = c->a;
    char key[KEY_MAX];
    nds_read_result r;
    uint64_t lo, hi;
    sel_byte_span(c, s, &lo, &hi);
    int rc = nds_array_chunk_key(a, cell, key, sizeof key);
    if (rc) return rc;
    rc = read_part_in_place(c, cell, key, chunk, lo, hi, present);
    if (rc == NDS_EUNSUPPORTED && !(rc = nds_kvstore_read(a->kv, key, NULL, &r))) {
        *present = r.state == NDS_READ_VALUE;
        if (*present) {
            rc = a->format->decode_chunk_part(a->state, cell, r.value.data, r.value.len, chunk,
                                              lo, hi);
            if (rc == NDS_EUNSUPPORTED)
                rc = a->format->decode_chunk(a->state, cell, r.value.data, r.value.len, chunk);
        }
        nds_read_result_dispose(&r);
    }
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

/* ---- whole chunks a piece at a time ---- */

/* Whether a chunk can be read a piece at a time: a format that hands its decoded bytes over in
 * pieces (zarr v2 and v3 with blosc: a block at a time), the whole chunk, the storage grid,
 * nothing to overlay and no cache to fill with whole chunks. Pieces are cut along the last
 * dimension: a rank-0 array has none. */
static bool reads_pieces(const io_call *c, const chunk_sel *s) {
    const nds_format *f = c->a->format;
    return f->version >= 5 && f->decode_chunk_pieces && s->whole && c->a->meta.rank > 0 &&
           c->grid_shape == c->a->meta.chunk_shape && !c->txn && !nds_context_cache(c->a->ctx);
}

/* Where the pieces of one chunk go. The chunk is seen as a grid of bytes (its last dimension
 * counted in bytes): unit[d] bytes per index of dimension d, shape[d] indexes, of which the
 * selection holds [0, held[d]) (a whole selection starts at the chunk's origin). */
typedef struct piece_target {
    const io_call *c;
    uint8_t *dst; /* the selection's first byte in the caller's buffer */
    uint64_t unit[NDS_MAX_RANK], shape[NDS_MAX_RANK], held[NDS_MAX_RANK];
} piece_target;

static void piece_target_init(piece_target *t, const io_call *c, const chunk_sel *s) {
    size_t rank = c->a->meta.rank, last = rank - 1;
    t->c = c;
    t->dst = sel_buffer(c, s);
    for (size_t d = 0; d < rank; d++) {
        t->unit[d] = d == last ? 1 : (uint64_t)c->chunk_stride[d];
        t->shape[d] = c->grid_shape[d] * (d == last ? c->a->elem : 1);
        t->held[d] = s->extent[d] * (d == last ? c->a->elem : 1);
    }
}

/* Copies, of the chunk bytes from pos (indexes fixed in the dimensions before d, count indexes of
 * dimension d, everything after it), what lies in the selection; data holds the chunk's bytes
 * from offset. */
static void copy_piece_box(const piece_target *t, const uint8_t *data, uint64_t offset,
                           uint64_t pos, size_t d, uint64_t count) {
    const io_call *c = t->c;
    size_t rank = c->a->meta.rank, last = rank - 1;
    uint64_t extent[NDS_MAX_RANK], start = 0;
    int64_t src_stride[NDS_MAX_RANK], dst_stride[NDS_MAX_RANK];
    uint8_t *dst = t->dst;
    for (size_t k = 0; k < rank; k++) {
        uint64_t lo = k <= d ? pos / t->unit[k] % t->shape[k] : 0;
        uint64_t hi = k < d ? lo + 1 : k == d ? lo + count : t->shape[k];
        if (hi > t->held[k]) hi = t->held[k];
        if (lo >= hi) return; /* outside the array (an edge chunk) */
        extent[k] = hi - lo;
        start += lo * t->unit[k];
        src_stride[k] = (int64_t)t->unit[k];
        dst_stride[k] = k == last ? 1 : c->buf_stride[k];
        dst += (int64_t)lo * dst_stride[k];
    }
    const uint8_t *src = data + (start - offset);
    if (c->stream)
        nds_strided_copy_streaming(rank, extent, 1, dst, dst_stride, src, src_stride);
    else
        nds_strided_copy(rank, extent, 1, dst, dst_stride, src, src_stride);
}

/* nds_piece_sink: copies chunk bytes [offset, offset + len) into the selection, as the few boxes
 * that range is made of: from its start up to whole rows, planes, ... (coarser and coarser),
 * then down again to its end. */
static int copy_piece(void *arg, size_t offset, uint8_t *data, size_t len) {
    const piece_target *t = arg;
    size_t d = t->c->a->meta.rank - 1;
    uint64_t pos = offset, end = (uint64_t)offset + len;
    for (; d > 0; d--) { /* pos is a multiple of unit[d] here */
        uint64_t next = (pos + t->unit[d - 1] - 1) / t->unit[d - 1] * t->unit[d - 1];
        if (next > end) break; /* the rest lies within one index of dimension d - 1 */
        if (next > pos) copy_piece_box(t, data, offset, pos, d, (next - pos) / t->unit[d]);
        pos = next;
    }
    for (; pos < end; d++) {
        uint64_t count = (end - pos) / t->unit[d];
        if (count) copy_piece_box(t, data, offset, pos, d, count);
        pos += count * t->unit[d];
    }
    return 0;
}

/* Decodes a stored chunk whole and copies its selection out (the format could not hand it over
 * in pieces). */
static int decode_and_scatter(io_call *c, const uint64_t *cell, const chunk_sel *s,
                              const nds_bytes *value) {
    nds_array *a = c->a;
    uint8_t *chunk = nds_scratch(NDS_SCRATCH_CHUNK, c->grid_bytes);
    if (!chunk) return NDS_ENOMEM;
    int rc = a->format->decode_chunk(a->state, cell, value->data, value->len, chunk);
    if (!rc) scatter(c, s, chunk);
    nds_scratch_trim(NDS_SCRATCH_CHUNK);
    return rc;
}

/* Reads a whole chunk a piece at a time, each piece copied into the caller's buffer while it is
 * in the cache: no decoded chunk in between, which for chunks larger than the cache saves a pass
 * over memory (and the chunk buffer). */
static int read_pieces(io_call *c, const uint64_t *cell, const chunk_sel *s) {
    nds_array *a = c->a;
    char key[KEY_MAX];
    nds_read_result r;
    int rc = nds_array_chunk_key(a, cell, key, sizeof key);
    if (rc) return rc;
    if (!(rc = nds_kvstore_read(a->kv, key, NULL, &r))) {
        if (r.state != NDS_READ_VALUE) {
            fill_selection(c, s);
        } else {
            piece_target t;
            piece_target_init(&t, c, s);
            rc = a->format->decode_chunk_pieces(a->state, cell, r.value.data, r.value.len,
                                                copy_piece, &t);
            if (rc == NDS_EUNSUPPORTED) rc = decode_and_scatter(c, cell, s, &r.value);
        }
        nds_read_result_dispose(&r);
    }
    return rc ? nds_err_prefix(rc, "%s: chunk %s of %s", a->format->name, key,
                               nds_kvstore_url(a->kv))
              : 0;
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
            fill_selection(c, &s);
            continue;
        }
        s0 = s;
        dst[pieces] = sel_buffer(c, &s);
        src[pieces] = chunk + sel_chunk_offset(c, &s);
        row_bytes[pieces++] = s.extent[last] * a->elem;
    }
    if (!rc && pieces)
        nds_strided_copy_rows(last, s0.extent, c->buf_stride, c->chunk_stride, pieces, dst, src,
                              row_bytes, c->stream);
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
    if (reads_pieces(c, &s)) return read_pieces(c, cell, &s);
    uint8_t *chunk = nds_scratch(NDS_SCRATCH_CHUNK, c->grid_bytes);
    if (!chunk) return NDS_ENOMEM;
    int present, rc = load_selection(c, cell, &s, chunk, &present);
    if (!rc && present)
        scatter(c, &s, chunk);
    else if (!rc)
        fill_selection(c, &s);
    nds_scratch_trim(NDS_SCRATCH_CHUNK); /* do not pin huge chunks per thread */
    return rc;
}

int nds_array_read(nds_array *a, const nds_box *box, void *out, const nds_io_options *opts) {
    if (nds_dtype_is_vlen(a->meta.dtype)) return nds_array_vlen_refusal(a, "read of");
    pthread_rwlock_rdlock(&a->meta_lock);
    nds_txn *txn = call_txn(a, opts);
    /* Staged chunks are whole storage chunks: overlaying them needs the storage grid. */
    bool staged = txn && nds_txn_touches(txn, a);
    io_call c;
    int rc = io_call_init(&c, a, box, out, a->read_chunk_bytes != 0 && !staged, "read of");
    if (!rc && txn) rc = nds_txn_check_open(txn);
    if (!rc) {
        c.txn = staged ? txn : NULL;
        c.stream = nds_box_count(box) * a->elem >= nds_stream_threshold();
        size_t threads = call_threads(opts);
        if (threads == 0 && (nds_kvstore_capabilities(a->kv) & NDS_KV_CAP_LOCAL))
            threads = (size_t)nds_context_local_read_threads(a->ctx);
        c.run = read_run_length(&c, threads ? threads : (size_t)nds_context_threads(a->ctx));
        rc = nds_pool_for_budget(nds_context_pool(a->ctx), nds_context_budget(a->ctx),
                                 c.grid_bytes * (c.run + 1), c.grid.total / c.run, threads,
                                 read_task, &c);
    }
    pthread_rwlock_unlock(&a->meta_lock);
    return rc;
}
