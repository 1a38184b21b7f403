/* The place step of the read pipeline (internal/read_pipeline.h): canonical bytes of a chunk's
 * selection copied into the caller's buffer, whether they come as one view, a piece at a time, or
 * straight from the store into the rows they land in. Copies into an output larger than the
 * last-level cache bypass the cache (c->stream). */
#include <string.h>
#include <sys/uio.h>

#include "internal/read_pipeline.h"
#include "internal/strided.h"

static void copy_box(const io_call *c, const nds_strided_layout *box, size_t elem, uint8_t *dst,
                     const uint8_t *src) {
    if (c->stream)
        nds_strided_copy_streaming(box->rank, box->extent, elem, dst, box->dst_stride, src,
                                   box->src_stride);
    else
        nds_strided_copy(box->rank, box->extent, elem, dst, box->dst_stride, src,
                         box->src_stride);
}

void read_place_view(const read_job *j) {
    const io_call *c = j->c;
    nds_strided_layout box = {c->a->meta.rank, j->s.extent, c->buf_stride, j->from_stride};
    copy_box(c, &box, c->a->elem, sel_buffer(c, &j->s), j->from);
}

void read_place_fill(const io_call *c, const chunk_sel *s) {
    const nds_array *a = c->a;
    nds_strided_fill(a->meta.rank, s->extent, a->elem, sel_buffer(c, s), c->buf_stride,
                     a->meta.fill_value);
}

/* ---- a whole chunk a piece at a time ---- */

/* The chunk is seen as a grid of bytes (its last dimension counted in bytes): unit[d] bytes per
 * index of dimension d, shape[d] indexes, of which the selection holds [0, held[d]) (a whole
 * selection starts at the chunk's origin). */
void read_piece_target_init(read_piece_target *t, const io_call *c, const chunk_sel *s) {
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
static void copy_piece_box(const read_piece_target *t, const uint8_t *data, uint64_t offset,
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
    nds_strided_layout box = {rank, extent, dst_stride, src_stride};
    copy_box(c, &box, 1, dst, data + (start - offset));
}

/* Copies chunk bytes [offset, offset + len) into the selection, as the few boxes that range is
 * made of: from its start up to whole rows, planes, ... (coarser and coarser), then down again to
 * its end. */
int read_place_piece(void *arg, size_t offset, uint8_t *data, size_t len) {
    const read_piece_target *t = arg;
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

/* ---- straight from the store into place ---- */

size_t read_row_places(const io_call *c, const chunk_sel *s, struct iovec *iov) {
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

/* The kernel copies into a destination off a cache line at under half speed (measured: 2.2 GB/s
 * at a page offset of 16, where malloc puts large blocks, against 6.0-6.8 aligned; a read and a
 * copy of our own manage 4.9): reads into place only where every row starts on one. */
bool read_rows_aligned(const io_call *c, const chunk_sel *s) {
    uintptr_t align = (uintptr_t)sel_buffer(c, s);
    for (size_t d = 0; d + 1 < c->a->meta.rank; d++) align |= (uintptr_t)c->buf_stride[d];
    return (align & 63) == 0;
}
