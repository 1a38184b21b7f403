/* neuroglancer precomputed: stored bytes <-> canonical chunks. One precomputed chunk in its
 * encoding (raw Fortran-order bytes, jpeg, png, compressed_segmentation; clipped at the volume's
 * upper edge, 0 past it), and a shard box's whole shard file (every chunk decoded into its place,
 * or every non-zero chunk encoded and the shard built), and what the driver shares with them
 * (per-thread scratch, the shard of a chunk). Kept apart from the driver (precomputed.c), which
 * decides which of these a storage chunk is and is the only one of the two to call the other.
 * Threading: per-thread scratch only.
 */
#include <stdlib.h>
#include <string.h>

#include "precomputed_instance.h"
#include "codecs/codec_image.h"
#include "codecs/compressed_segmentation.h"
#include "internal/dtype_util.h"
#include "internal/error.h"
#include "internal/format_util.h"
#include "internal/strided.h"
#include "internal/util.h"

/* ---- per-thread scratch ---------------------------------------------------------------------- */

/* The calling thread's scratch buffer `slot` (0..2: the core's FORMAT slots), emptied, with room
 * for n bytes; NULL when out of memory. The core holds its own slots (the chunk, the encoded bytes)
 * while calling the format, so these never alias what the core passes in. */
nds_buf *nds_pc_scratch(int slot, size_t n) {
    if (!nds_scratch(NDS_SCRATCH_FORMAT0 + slot, n ? n : 1)) return NULL;
    nds_buf *b = nds_scratch_buf(NDS_SCRATCH_FORMAT0 + slot);
    b->len = 0;
    return b;
}

/* Frees big scratch buffers so an idle pool thread does not pin a shard's worth of memory. */
void nds_pc_scratch_trim(void) {
    for (int i = 0; i < 3; i++) nds_scratch_trim(NDS_SCRATCH_FORMAT0 + i);
}

int nds_pc_no_memory(void) {
    return nds_err(NDS_ENOMEM, "neuroglancer_precomputed: out of memory");
}

/* ---- shards of chunks ---------------------------------------------------------------------- */

/* The shard holding precomputed chunk g (grid coordinates). */
uint64_t nds_pc_chunk_shard(const precomputed *p, const uint64_t *g) {
    uint64_t shard, mini;
    nds_pc_shard_of(&p->s.sharding, nds_pc_morton(&p->grid, g), &shard, &mini);
    return shard;
}

/* The shard holding shard-box cell (in units of shard boxes). */
uint64_t nds_pc_box_shard(const precomputed *p, const uint64_t *cell) {
    uint64_t g[3] = {cell[0] << p->box[0], cell[1] << p->box[1], cell[2] << p->box[2]};
    return nds_pc_chunk_shard(p, g);
}

/* ---- one precomputed chunk ------------------------------------------------------------------- */

/* Extent of chunk g inside the volume: the chunk clipped at the upper edge. */
void nds_pc_chunk_extent(const precomputed *p, const uint64_t *g, uint64_t *e) {
    for (int d = 0; d < 3; d++) e[d] = nds_min_u64(p->chunk[d], p->s.size[d] - g[d] * p->chunk[d]);
}

/* Byte strides of the canonical chunk (C order over [x, y, z, channel]) in the order x, y, z, c. */
static void canonical_strides(const precomputed *p, int64_t *st) {
    uint64_t shape[4] = {p->chunk[0], p->chunk[1], p->chunk[2], p->nc};
    nds_c_strides(4, shape, p->elem, st);
}

/* Byte strides of a dense clipped chunk e stored Fortran order over [x, y, z, c] (raw on disk). */
static void fortran_strides(const precomputed *p, const uint64_t *e, int64_t *st) {
    uint64_t shape[4] = {e[0], e[1], e[2], p->nc};
    nds_f_strides(4, shape, p->elem, st);
}

/* Byte strides of an image's pixels: (z, y, x, c) C order, channels interleaved. */
static void image_strides(const precomputed *p, const uint64_t *e, int64_t *st) {
    st[3] = (int64_t)p->elem;
    st[0] = st[3] * (int64_t)p->nc;
    st[1] = st[0] * (int64_t)e[0];
    st[2] = st[1] * (int64_t)e[1];
}

static bool clipped(const precomputed *p, const uint64_t *e) {
    return e[0] != p->chunk[0] || e[1] != p->chunk[1] || e[2] != p->chunk[2];
}

static void swap_if_big_endian(const precomputed *p, uint8_t *data, size_t n) {
    if (p->elem > 1 && nds_host_is_big_endian()) nds_byteswap(data, n / p->elem, p->elem);
}

/* Image width and height for n = e0 * e1 * e2 pixels (rows are runs of x): x*y by z when it fits
 * the format, else x by y*z. */
static int image_dims(const uint64_t *e, uint64_t max, uint32_t *w, uint32_t *h) {
    if (e[0] * e[1] <= max && e[2] <= max)
        *w = (uint32_t)(e[0] * e[1]), *h = (uint32_t)e[2];
    else if (e[0] <= max && e[1] * e[2] <= max)
        *w = (uint32_t)e[0], *h = (uint32_t)(e[1] * e[2]);
    else
        return nds_err(NDS_ELIMIT, "a %llux%llux%llu chunk does not fit an image's dimensions",
                       (unsigned long long)e[0], (unsigned long long)e[1],
                       (unsigned long long)e[2]);
    return 0;
}

static int decode_image(const precomputed *p, const uint64_t *e, const uint8_t *data, size_t len,
                        uint8_t *out) {
    uint64_t pixels = e[0] * e[1] * e[2], extent[4] = {e[0], e[1], e[2], p->nc};
    nds_buf *img = nds_pc_scratch(1, (size_t)(pixels * p->nc * p->elem));
    if (!img) return nds_pc_no_memory();
    int rc = p->s.encoding == NDS_PC_JPEG
                 ? nds_jpeg_decode(data, len, pixels, (int)p->nc, img->data)
                 : nds_png_decode(data, len, pixels, (int)p->nc, (int)p->elem, img->data);
    int64_t src[4], dst[4];
    image_strides(p, e, src);
    canonical_strides(p, dst);
    if (!rc) nds_strided_copy(4, extent, p->elem, out, dst, img->data, src);
    return rc;
}

static int decode_raw(const precomputed *p, const uint64_t *e, const uint8_t *data, size_t len,
                      uint8_t *out) {
    uint64_t extent[4] = {e[0], e[1], e[2], p->nc};
    size_t want = (size_t)(e[0] * e[1] * e[2] * p->nc * p->elem);
    if (len != want)
        return nds_err(NDS_ECORRUPT, "raw chunk: expected %zu bytes, found %zu", want, len);
    int64_t src[4], dst[4];
    fortran_strides(p, e, src);
    canonical_strides(p, dst);
    nds_strided_copy(4, extent, p->elem, out, dst, data, src);
    swap_if_big_endian(p, out, p->chunk_bytes);
    return 0;
}

/* Decodes the stored bytes of chunk g (grid coordinates) into a canonical chunk. */
int nds_pc_decode_one(const precomputed *p, const uint64_t *g, const uint8_t *data, size_t len,
                      uint8_t *out) {
    uint64_t e[3];
    nds_pc_chunk_extent(p, g, e);
    if (clipped(p, e)) memset(out, 0, p->chunk_bytes); /* no fill value: 0 past the edge */
    if (p->s.encoding == NDS_PC_RAW) return decode_raw(p, e, data, len, out);
    if (p->s.encoding != NDS_PC_CSEG) return decode_image(p, e, data, len, out);
    int64_t st[4];
    canonical_strides(p, st);
    for (int d = 0; d < 4; d++) st[d] /= (int64_t)p->elem;
    nds_cseg_volume v = {p->elem, e, p->nc, p->s.cseg_block, st};
    return nds_cseg_decode(data, len, &v, out);
}

static int encode_image(const precomputed *p, const uint64_t *e, const uint8_t *chunk,
                        nds_buf *out) {
    uint64_t pixels = e[0] * e[1] * e[2], extent[4] = {e[0], e[1], e[2], p->nc};
    uint32_t w = 0, h = 0;
    int rc = image_dims(e, p->s.encoding == NDS_PC_JPEG ? NDS_JPEG_MAX_DIM : 0x7fffffffu, &w, &h);
    if (rc) return rc;
    nds_buf *img = nds_pc_scratch(1, (size_t)(pixels * p->nc * p->elem));
    if (!img) return nds_pc_no_memory();
    int64_t src[4], dst[4];
    canonical_strides(p, src);
    image_strides(p, e, dst);
    nds_strided_copy(4, extent, p->elem, img->data, dst, chunk, src);
    if (p->s.encoding == NDS_PC_JPEG)
        return nds_jpeg_encode(img->data, w, h, (int)p->nc, p->s.jpeg_quality, out);
    return nds_png_encode(img->data, w, h, (int)p->nc, (int)p->elem, p->s.png_level, out);
}

/* Encodes canonical chunk g (clipped to the volume) into out (appending). */
int nds_pc_encode_one(const precomputed *p, const uint64_t *g, const uint8_t *chunk, nds_buf *out) {
    uint64_t e[3], extent[4];
    nds_pc_chunk_extent(p, g, e);
    int64_t st[4];
    canonical_strides(p, st);
    if (p->s.encoding == NDS_PC_CSEG) {
        for (int d = 0; d < 4; d++) st[d] /= (int64_t)p->elem;
        return nds_cseg_encode(chunk, p->elem, e, st, p->nc, p->s.cseg_block, out);
    }
    if (p->s.encoding != NDS_PC_RAW) {
        nds_buf *img = nds_pc_scratch(2, 0);
        if (!img) return nds_pc_no_memory();
        int rc = encode_image(p, e, chunk, img);
        if (!rc && nds_buf_append(out, img->data, img->len)) rc = nds_pc_no_memory();
        return rc;
    }
    size_t n = (size_t)(e[0] * e[1] * e[2] * p->nc * p->elem);
    if (nds_buf_reserve(out, out->len + n)) return nds_pc_no_memory();
    int64_t dst[4];
    fortran_strides(p, e, dst);
    memcpy(extent, e, sizeof e);
    extent[3] = p->nc;
    nds_strided_copy(4, extent, p->elem, out->data + out->len, dst, chunk, st);
    swap_if_big_endian(p, out->data + out->len, n);
    out->len += n;
    return 0;
}

/* ---- shard boxes ----------------------------------------------------------------------------- */

/* Grid range of the chunks of shard-box cell: [first[d], first[d] + count[d]). */
static void box_range(const precomputed *p, const uint64_t *cell, uint64_t *first,
                      uint64_t *count) {
    for (int d = 0; d < 3; d++) {
        first[d] = cell[d] << p->box[d];
        count[d] = first[d] < p->grid.grid[d]
                       ? nds_min_u64(UINT64_C(1) << p->box[d], p->grid.grid[d] - first[d])
                       : 0;
    }
}

/* Strides of the shard box's canonical buffer, and the byte offset of chunk g inside it. */
static int64_t box_offset(const precomputed *p, const uint64_t *first, const uint64_t *g,
                          int64_t *st) {
    uint64_t shape[4] = {p->chunk[0] << p->box[0], p->chunk[1] << p->box[1],
                         p->chunk[2] << p->box[2], p->nc};
    nds_c_strides(4, shape, p->elem, st);
    int64_t off = 0;
    for (int d = 0; d < 3; d++) off += (int64_t)((g[d] - first[d]) * p->chunk[d]) * st[d];
    return off;
}

/* Decodes one chunk of a parsed shard into its place in the box buffer out. */
static int place_chunk(const precomputed *p, const uint64_t *first, const uint64_t *count,
                       const nds_pc_chunk_ref *ref, const uint8_t *data, uint8_t *out) {
    uint64_t g[3], extent[4] = {p->chunk[0], p->chunk[1], p->chunk[2], p->nc};
    nds_pc_morton_cell(&p->grid, ref->id, g);
    bool outside =
        p->grid.total < 64 && (ref->id >> p->grid.total) != 0; /* beyond the grid's bits */
    for (int d = 0; d < 3; d++) outside = outside || g[d] < first[d] || g[d] >= first[d] + count[d];
    if (outside)
        return nds_err(NDS_ECORRUPT, "chunk id %llu is not a chunk of this shard",
                       (unsigned long long)ref->id);
    nds_buf *raw = nds_pc_scratch(2, 0), *sub = nds_pc_scratch(0, p->chunk_bytes);
    if (!raw || !sub) return nds_pc_no_memory();
    int rc = nds_pc_chunk_data(&p->s.sharding, data + ref->start, (size_t)(ref->end - ref->start),
                               4 * p->chunk_bytes + (1u << 20), raw);
    if (!rc) rc = nds_pc_decode_one(p, g, raw->data, raw->len, sub->data);
    if (rc) return nds_err_prefix(rc, "chunk %llu", (unsigned long long)ref->id);
    int64_t box_st[4], sub_st[4];
    int64_t off = box_offset(p, first, g, box_st);
    canonical_strides(p, sub_st);
    nds_strided_copy(4, extent, p->elem, out + off, box_st, sub->data, sub_st);
    return 0;
}

int nds_pc_decode_box(const precomputed *p, const uint64_t *cell, const uint8_t *data, size_t len,
                      uint8_t *out, size_t out_bytes) {
    uint64_t first[3], count[3];
    box_range(p, cell, first, count);
    nds_pc_chunk_ref *refs;
    size_t n;
    int rc = nds_pc_shard_parse(&p->s.sharding, nds_pc_box_shard(p, cell), data, len,
                                p->max_entries, &refs, &n);
    memset(out, 0, out_bytes);
    for (size_t i = 0; i < n && !rc; i++) rc = place_chunk(p, first, count, &refs[i], data, out);
    free(refs);
    nds_pc_scratch_trim();
    return rc;
}

/* What a write of box `changed` (box-buffer coordinates) does to chunk g of the shard box: leaves
 * it alone (the box's bounds do not reach it), overwrites all of it, or changes part of it (its
 * old elements are needed). A chunk clipped at the volume's edge is never overwritten whole (the
 * box stays inside the volume): it is decoded, so its part past the edge holds zeros when the
 * encode asks whether the chunk is all zero. */
typedef enum chunk_fate { CHUNK_KEPT, CHUNK_COVERED, CHUNK_PARTIAL } chunk_fate;

static chunk_fate fate_of(const precomputed *p, const uint64_t *first, const uint64_t *g,
                          const nds_box *changed) {
    bool covered = changed->step[3] == 1 && changed->start[3] == 0 && changed->stop[3] >= p->nc;
    for (int d = 0; d < 3; d++) {
        uint64_t lo = (g[d] - first[d]) * p->chunk[d], hi = lo + p->chunk[d];
        if (changed->stop[d] <= lo || changed->start[d] >= hi) return CHUNK_KEPT;
        if (changed->step[d] != 1 || changed->start[d] > lo || changed->stop[d] < hi)
            covered = false;
    }
    return covered ? CHUNK_COVERED : CHUNK_PARTIAL;
}

/* A box's chunks encoded one after another into `all`: id and length in chunks, the offset in
 * `all` in offs (pointers are set once `all` stops growing; SIZE_MAX: a removal). */
typedef struct box_chunks {
    nds_buf all;
    nds_pc_shard_chunk *chunks;
    size_t *offs;
    size_t n;
} box_chunks;

/* Encodes the chunks of the box into out: every non-zero chunk, or with changed only those its
 * bounds reach, a zero one as a removal. */
static int encode_box_chunks(const precomputed *p, const uint64_t *first, const uint64_t *count,
                             const uint8_t *box, const nds_box *changed, box_chunks *out) {
    nds_buf *all = &out->all;
    nds_pc_shard_chunk *chunks = out->chunks;
    size_t *offs = out->offs, *n = &out->n;
    uint64_t extent[4] = {p->chunk[0], p->chunk[1], p->chunk[2], p->nc}, g[3];
    uint8_t zero[NDS_DTYPE_MAX_SIZE] = {0};
    int64_t box_st[4], sub_st[4];
    canonical_strides(p, sub_st);
    nds_buf *sub = nds_pc_scratch(0, p->chunk_bytes);
    if (!sub) return nds_pc_no_memory();
    *n = 0;
    for (g[2] = first[2]; g[2] < first[2] + count[2]; g[2]++)
        for (g[1] = first[1]; g[1] < first[1] + count[1]; g[1]++)
            for (g[0] = first[0]; g[0] < first[0] + count[0]; g[0]++) {
                if (changed && fate_of(p, first, g, changed) == CHUNK_KEPT) continue;
                int64_t off = box_offset(p, first, g, box_st);
                nds_strided_copy(4, extent, p->elem, sub->data, sub_st, box + off, box_st);
                uint64_t id = nds_pc_morton(&p->grid, g);
                size_t at = SIZE_MAX; /* a removal */
                if (!nds_all_equal(sub->data, p->chunk_bytes / p->elem, p->elem, zero)) {
                    at = all->len;
                    int rc = nds_pc_encode_one(p, g, sub->data, all);
                    if (rc)
                        return nds_err_prefix(rc, "chunk %llu,%llu,%llu", (unsigned long long)g[0],
                                              (unsigned long long)g[1], (unsigned long long)g[2]);
                } else if (!changed) {
                    continue; /* a new shard leaves zero chunks out */
                }
                chunks[*n] = (nds_pc_shard_chunk){id, NULL, at == SIZE_MAX ? 0 : all->len - at};
                offs[(*n)++] = at;
            }
    return 0;
}

/* The shard file of a box from its canonical buffer: with changed, only the chunks its bounds
 * reach are encoded and the others keep their bytes in old (refs: its parsed chunks; none when
 * old is NULL), else every chunk is. */
static int build_box(const precomputed *p, const uint64_t *cell, const uint8_t *box,
                     const nds_box *changed, const uint8_t *old, const nds_pc_refs *refs,
                     nds_buf *out) {
    uint64_t first[3], count[3];
    box_range(p, cell, first, count);
    size_t max = (size_t)(count[0] * count[1] * count[2]);
    box_chunks bc = {{0}, malloc((max ? max : 1) * sizeof *bc.chunks),
                     malloc((max ? max : 1) * sizeof *bc.offs), 0};
    int rc = bc.chunks && bc.offs ? encode_box_chunks(p, first, count, box, changed, &bc)
                                  : nds_pc_no_memory();
    for (size_t i = 0; i < bc.n && !rc; i++)
        bc.chunks[i].data = bc.offs[i] == SIZE_MAX ? NULL : bc.all.data + bc.offs[i];
    nds_pc_changes changes = {bc.chunks, bc.n};
    if (!rc && changed)
        rc = nds_pc_shard_update_parsed(&p->s.sharding, nds_pc_box_shard(p, cell), old, refs,
                                        &changes, out);
    else if (!rc)
        rc = nds_pc_shard_build(&p->s.sharding, bc.chunks, bc.n, out);
    free(bc.chunks);
    free(bc.offs);
    nds_buf_dispose(&bc.all);
    nds_pc_scratch_trim();
    return rc;
}

int nds_pc_encode_box(const precomputed *p, const uint64_t *cell, const uint8_t *box,
                      nds_buf *out) {
    return build_box(p, cell, box, NULL, NULL, &(nds_pc_refs){NULL, 0, 0}, out);
}

/* Puts into the box buffer the old elements of the chunks a write changes in part: zero, then
 * each such chunk the old shard (refs[0..n): its parsed chunks) holds decoded into its place (a
 * chunk id outside the box is refused, as a whole decode refuses it). */
static int decode_partial(const precomputed *p, const uint64_t *cell, const uint8_t *old,
                          const nds_pc_chunk_ref *refs, size_t n, const nds_box *changed,
                          uint8_t *box) {
    uint64_t first[3], count[3], g[3], extent[4] = {p->chunk[0], p->chunk[1], p->chunk[2], p->nc};
    uint8_t zero[NDS_DTYPE_MAX_SIZE] = {0};
    int64_t box_st[4];
    box_range(p, cell, first, count);
    for (g[2] = first[2]; g[2] < first[2] + count[2]; g[2]++)
        for (g[1] = first[1]; g[1] < first[1] + count[1]; g[1]++)
            for (g[0] = first[0]; g[0] < first[0] + count[0]; g[0]++)
                if (fate_of(p, first, g, changed) == CHUNK_PARTIAL)
                    nds_strided_fill(4, extent, p->elem, box + box_offset(p, first, g, box_st),
                                     box_st, zero);
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        nds_pc_morton_cell(&p->grid, refs[i].id, g);
        bool inside = true;
        for (int d = 0; d < 3; d++)
            inside = inside && g[d] >= first[d] && g[d] < first[d] + count[d];
        if (!inside || fate_of(p, first, g, changed) == CHUNK_PARTIAL)
            rc = place_chunk(p, first, count, &refs[i], old, box);
    }
    return rc;
}

int nds_pc_update_box(const precomputed *p, nds_update_request *u) {
    nds_pc_refs refs = {NULL, 0, 0};
    const uint64_t *cell = u->cell;
    int rc = u->old ? nds_pc_shard_parse(&p->s.sharding, nds_pc_box_shard(p, cell), u->old,
                                         u->old_len, p->max_entries, &refs.v, &refs.n)
                    : 0;
    if (!rc) rc = decode_partial(p, cell, u->old, refs.v, refs.n, u->changed, u->chunk);
    if (!rc) {
        u->merge(u->merge_ctx, u->chunk);
        rc = build_box(p, cell, u->chunk, u->changed, u->old, &refs, u->out);
    }
    free(refs.v);
    nds_pc_scratch_trim();
    u->all_fill = !rc && u->out->len == 0;
    return rc;
}
