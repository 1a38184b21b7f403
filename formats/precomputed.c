/* The neuroglancer precomputed format driver ("neuroglancer_precomputed", URL
 * "|neuroglancer-precomputed:"): one scale of a multiscale volume as a 4-d array
 * [x, y, z, channel], with raw, jpeg, png and compressed_segmentation chunk encodings, unsharded or
 * neuroglancer_uint64_sharded_v1.
 *
 * The array's kvstore is the volume's directory (where `info` lives); chunk keys carry the scale's
 * key ("8_8_8/0-64_0-64_0-64", "8_8_8/0a.shard"). Array index i along x is voxel
 * voxel_offset[0] + i. On disk a chunk is clipped at the volume's upper edge and stored x fastest
 * (Fortran order over [x, y, z, channel]); decode pads it to the full chunk with 0 (precomputed has
 * no fill value) and encode clips it. Sharded scales have one of two layouts:
 * - SHARD_BOX: when every shard file holds one aligned box of chunks (identity hash with
 *   preshift + minishard + shard bits covering the chunk grid's Morton bits, or shard_bits 0 with
 *   any hash) and that box is at most 1 GiB in memory, the core's storage chunk is the shard's box
 *   (one read-modify-write of the shard per write call, the shard decoded and re-encoded whole)
 *   and its read grid is the precomputed chunk, read through byte ranges (read_chunk);
 * - SHARD_HASHED: otherwise (murmurhash3 with several shards, identity shard numbers that wrap,
 *   boxes above 1 GiB) a shard is not a region of the array. The core's chunk is the precomputed
 *   chunk and the array is grouped (nds_array_meta.grouped): a write call groups its chunks by
 *   shard file (group_key), and per shard the core decodes only partly written chunks
 *   (group_read_chunk), encodes the chunks it writes (encode_chunk) and has group_encode rebuild
 *   the shard with every other chunk's stored bytes copied verbatim; one conditional write per
 *   shard. Writes inside a transaction are refused by the core. Reads are as in SHARD_BOX.
 * Omits: resize (precomputed bounds are fixed, as in TensorStore), attributes (none in the format),
 * groups, the second and later "chunk_sizes" of a scale for writing (writes go to the chosen one);
 * for SHARD_HASHED, chunk keys (a chunk has none of its own: statistics and verify see no chunks).
 *
 * Threading: an instance is immutable after open; decode/encode/read_chunk run on many threads and
 * use per-thread scratch buffers. Ownership: the instance owns the info document and its parse.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "precomputed_metadata.h"
#include "precomputed_shard.h"
#include "codecs/codec_image.h"
#include "codecs/compressed_segmentation.h"
#include "ndstore/array.h"
#include "ndstore/sys/format.h"
#include "internal/dtype_util.h"
#include "internal/error.h"
#include "internal/format_util.h"
#include "internal/json_util.h"
#include "internal/strided.h"
#include "internal/util.h"

#define OPEN_ATTEMPTS 8
/* Largest shard box written as one storage chunk; bigger ones use the hashed layout. */
#define SHARD_BOX_MAX_BYTES (UINT64_C(1) << 30)
/* Bound on chunks listed in one minishard index. */
#define MAX_MINISHARD_ENTRIES (UINT64_C(1) << 26)

typedef enum layout { UNSHARDED, SHARD_BOX, SHARD_HASHED } layout;

typedef struct precomputed {
    json_object *doc;  /* the info as stored, owned */
    nds_pc_info info;  /* its parse, owned */
    nds_pc_scale s;    /* the open scale, encoding parameters from the spec applied */
    uint64_t chunk[3]; /* the chunk size in use */
    uint64_t nc;       /* channels */
    nds_dtype dtype;
    size_t elem;        /* bytes per element */
    size_t chunk_bytes; /* canonical bytes of one precomputed chunk */
    nds_pc_grid grid;   /* chunk grid and Morton layout */
    layout layout;
    unsigned box[3];      /* SHARD_BOX: a shard spans 2^box[d] chunks in dimension d */
    uint64_t max_entries; /* bound on one minishard index */
    char url[512];
    char doc_name[600]; /* "neuroglancer_precomputed: info of <url>" */
} precomputed;

/* ---- per-thread scratch ---------------------------------------------------------------------- */

/* The calling thread's scratch buffer `slot` (0..2: the core's FORMAT slots), emptied, with room
 * for n bytes; NULL when out of memory. The core holds its own slots (the chunk, the encoded bytes)
 * while calling the format, so these never alias what the core passes in. */
static nds_buf *scratch(int slot, size_t n) {
    if (!nds_scratch(NDS_SCRATCH_FORMAT0 + slot, n ? n : 1)) return NULL;
    nds_buf *b = nds_scratch_buf(NDS_SCRATCH_FORMAT0 + slot);
    b->len = 0;
    return b;
}

/* Frees big scratch buffers so an idle pool thread does not pin a shard's worth of memory. */
static void scratch_trim(void) {
    for (int i = 0; i < 3; i++) nds_scratch_trim(NDS_SCRATCH_FORMAT0 + i);
}

static int no_memory(void) {
    return nds_err(NDS_ENOMEM, "neuroglancer_precomputed: out of memory");
}

/* ---- one precomputed chunk ------------------------------------------------------------------- */

/* Extent of chunk g inside the volume: the chunk clipped at the upper edge. */
static void chunk_extent(const precomputed *p, const uint64_t *g, uint64_t *e) {
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
    nds_buf *img = scratch(1, (size_t)(pixels * p->nc * p->elem));
    if (!img) return no_memory();
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
static int decode_one(const precomputed *p, const uint64_t *g, const uint8_t *data, size_t len,
                      uint8_t *out) {
    uint64_t e[3];
    chunk_extent(p, g, e);
    if (clipped(p, e)) memset(out, 0, p->chunk_bytes); /* no fill value: 0 past the edge */
    if (p->s.encoding == NDS_PC_RAW) return decode_raw(p, e, data, len, out);
    if (p->s.encoding != NDS_PC_CSEG) return decode_image(p, e, data, len, out);
    int64_t st[4];
    canonical_strides(p, st);
    for (int d = 0; d < 4; d++) st[d] /= (int64_t)p->elem;
    return nds_cseg_decode(data, len, p->elem, e, p->nc, p->s.cseg_block, out, st);
}

static int encode_image(const precomputed *p, const uint64_t *e, const uint8_t *chunk,
                        nds_buf *out) {
    uint64_t pixels = e[0] * e[1] * e[2], extent[4] = {e[0], e[1], e[2], p->nc};
    uint32_t w = 0, h = 0;
    int rc = image_dims(e, p->s.encoding == NDS_PC_JPEG ? NDS_JPEG_MAX_DIM : 0x7fffffffu, &w, &h);
    if (rc) return rc;
    nds_buf *img = scratch(1, (size_t)(pixels * p->nc * p->elem));
    if (!img) return no_memory();
    int64_t src[4], dst[4];
    canonical_strides(p, src);
    image_strides(p, e, dst);
    nds_strided_copy(4, extent, p->elem, img->data, dst, chunk, src);
    if (p->s.encoding == NDS_PC_JPEG)
        return nds_jpeg_encode(img->data, w, h, (int)p->nc, p->s.jpeg_quality, out);
    return nds_png_encode(img->data, w, h, (int)p->nc, (int)p->elem, p->s.png_level, out);
}

/* Encodes canonical chunk g (clipped to the volume) into out (appending). */
static int encode_one(const precomputed *p, const uint64_t *g, const uint8_t *chunk, nds_buf *out) {
    uint64_t e[3], extent[4];
    chunk_extent(p, g, e);
    int64_t st[4];
    canonical_strides(p, st);
    if (p->s.encoding == NDS_PC_CSEG) {
        for (int d = 0; d < 4; d++) st[d] /= (int64_t)p->elem;
        return nds_cseg_encode(chunk, p->elem, e, st, p->nc, p->s.cseg_block, out);
    }
    if (p->s.encoding != NDS_PC_RAW) {
        nds_buf *img = scratch(2, 0);
        if (!img) return no_memory();
        int rc = encode_image(p, e, chunk, img);
        if (!rc && nds_buf_append(out, img->data, img->len)) rc = no_memory();
        return rc;
    }
    size_t n = (size_t)(e[0] * e[1] * e[2] * p->nc * p->elem);
    if (nds_buf_reserve(out, out->len + n)) return no_memory();
    int64_t dst[4];
    fortran_strides(p, e, dst);
    memcpy(extent, e, sizeof e);
    extent[3] = p->nc;
    nds_strided_copy(4, extent, p->elem, out->data + out->len, dst, chunk, st);
    swap_if_big_endian(p, out->data + out->len, n);
    out->len += n;
    return 0;
}

/* ---- chunk keys ------------------------------------------------------------------------------ */

/* "x0-x1_y0-y1_z0-z1" of chunk g, in voxel coordinates (voxel_offset added). */
static int unsharded_key(const precomputed *p, const uint64_t *g, char *buf, size_t cap) {
    int64_t lo[3], hi[3];
    uint64_t e[3];
    chunk_extent(p, g, e);
    for (int d = 0; d < 3; d++) {
        lo[d] = p->s.voxel_offset[d] + (int64_t)(g[d] * p->chunk[d]);
        hi[d] = lo[d] + (int64_t)e[d];
    }
    int n = snprintf(buf, cap, "%s/%lld-%lld_%lld-%lld_%lld-%lld", p->s.key, (long long)lo[0],
                     (long long)hi[0], (long long)lo[1], (long long)hi[1], (long long)lo[2],
                     (long long)hi[2]);
    return n > 0 && (size_t)n < cap
               ? 0
               : nds_err(NDS_ERANGE, "neuroglancer_precomputed: chunk key too long");
}

/* The shard holding precomputed chunk g (grid coordinates). */
static uint64_t chunk_shard(const precomputed *p, const uint64_t *g) {
    uint64_t shard, mini;
    nds_pc_shard_of(&p->s.sharding, nds_pc_morton(&p->grid, g), &shard, &mini);
    return shard;
}

/* The shard holding shard-box cell (in units of shard boxes). */
static uint64_t box_shard(const precomputed *p, const uint64_t *cell) {
    uint64_t g[3] = {cell[0] << p->box[0], cell[1] << p->box[1], cell[2] << p->box[2]};
    return chunk_shard(p, g);
}

static int pc_chunk_key(void *state, const uint64_t *cell, char *buf, size_t cap) {
    const precomputed *p = state;
    if (p->layout == UNSHARDED) return unsharded_key(p, cell, buf, cap);
    if (p->layout == SHARD_BOX)
        return nds_pc_shard_key(p->s.key, &p->s.sharding, box_shard(p, cell), buf, cap);
    return nds_err(NDS_EINTERNAL,
                   "neuroglancer_precomputed: chunks of scale \"%s\" live in hashed shard files "
                   "and have no key of their own",
                   p->s.key);
}

/* A signed decimal as chunk_key writes it (no '+', no leading zeros). */
static const char *parse_dec(const char *s, int64_t *out) {
    bool neg = *s == '-';
    const char *q = s + neg;
    if (*q < '0' || *q > '9' || (q[0] == '0' && q[1] >= '0' && q[1] <= '9') || (neg && q[0] == '0'))
        return NULL;
    uint64_t v = 0;
    for (; *q >= '0' && *q <= '9'; q++)
        if (!nds_mul_u64(v, 10, &v) || !nds_add_u64(v, (uint64_t)(*q - '0'), &v) ||
            v > (uint64_t)INT64_MAX)
            return NULL;
    *out = neg ? -(int64_t)v : (int64_t)v;
    return q;
}

static int parse_unsharded(const precomputed *p, const char *name, uint64_t *cell) {
    for (int d = 0; d < 3; d++) {
        int64_t lo, hi;
        if (!(name = parse_dec(name, &lo)) || *name++ != '-' || !(name = parse_dec(name, &hi)))
            return 0;
        if (*name++ != (d < 2 ? '_' : '\0')) return 0;
        int64_t rel;
        if (__builtin_sub_overflow(lo, p->s.voxel_offset[d], &rel) || rel < 0 ||
            (uint64_t)rel % p->chunk[d] || (uint64_t)rel / p->chunk[d] >= p->grid.grid[d])
            return 0;
        cell[d] = (uint64_t)rel / p->chunk[d];
    }
    cell[3] = 0; /* the ends (x1, ...) are checked by comparing with chunk_key's result */
    return 1;
}

static int parse_shard_name(const precomputed *p, const char *name, uint64_t *cell) {
    uint64_t shard = 0, g[3];
    size_t digits = 0;
    for (; (name[digits] >= '0' && name[digits] <= '9') ||
           (name[digits] >= 'a' && name[digits] <= 'f');
         digits++) {
        if (digits >= 16) return 0;
        shard = shard << 4 |
                (uint64_t)(name[digits] <= '9' ? name[digits] - '0' : name[digits] - 'a' + 10);
    }
    if (digits == 0 || strcmp(name + digits, ".shard") != 0) return 0;
    unsigned k = p->s.sharding.preshift_bits + p->s.sharding.minishard_bits;
    if (k > p->grid.total) k = p->grid.total;
    unsigned rest = p->grid.total - k; /* bits of a shard number */
    if (rest < 64 && (shard >> rest) != 0) return 0;
    nds_pc_morton_cell(&p->grid, k < 64 ? shard << k : 0, g);
    for (int d = 0; d < 3; d++) {
        if (g[d] >= p->grid.grid[d]) return 0;
        cell[d] = g[d] >> p->box[d];
    }
    cell[3] = 0;
    return 1;
}

static int pc_parse_chunk_key(void *state, const char *key, uint64_t *cell) {
    const precomputed *p = state;
    size_t n = strlen(p->s.key);
    if (p->layout == SHARD_HASHED || strncmp(key, p->s.key, n) != 0 || key[n] != '/') return 0;
    int ok = p->layout == UNSHARDED ? parse_unsharded(p, key + n + 1, cell)
                                    : parse_shard_name(p, key + n + 1, cell);
    char again[NDS_PC_MAX_KEY + 128];
    /* The key must be exactly the one chunk_key writes (digit count, clipped ends). */
    return ok && pc_chunk_key(state, cell, again, sizeof again) == 0 && strcmp(again, key) == 0;
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
    nds_buf *raw = scratch(2, 0), *sub = scratch(0, p->chunk_bytes);
    if (!raw || !sub) return no_memory();
    int rc = nds_pc_chunk_data(&p->s.sharding, data + ref->start, (size_t)(ref->end - ref->start),
                               4 * p->chunk_bytes + (1u << 20), raw);
    if (!rc) rc = decode_one(p, g, raw->data, raw->len, sub->data);
    if (rc) return nds_err_prefix(rc, "chunk %llu", (unsigned long long)ref->id);
    int64_t box_st[4], sub_st[4];
    int64_t off = box_offset(p, first, g, box_st);
    canonical_strides(p, sub_st);
    nds_strided_copy(4, extent, p->elem, out + off, box_st, sub->data, sub_st);
    return 0;
}

static int decode_box(const precomputed *p, const uint64_t *cell, const uint8_t *data, size_t len,
                      uint8_t *out, size_t out_bytes) {
    uint64_t first[3], count[3];
    box_range(p, cell, first, count);
    nds_pc_chunk_ref *refs;
    size_t n;
    int rc = nds_pc_shard_parse(&p->s.sharding, box_shard(p, cell), data, len, p->max_entries,
                                &refs, &n);
    memset(out, 0, out_bytes);
    for (size_t i = 0; i < n && !rc; i++) rc = place_chunk(p, first, count, &refs[i], data, out);
    free(refs);
    scratch_trim();
    return rc;
}

/* Encodes every non-zero chunk of the box into `all`, recording id and length in chunks and the
 * offset in `all` in offs (pointers are set once `all` stops growing). */
static int encode_box_chunks(const precomputed *p, const uint64_t *first, const uint64_t *count,
                             const uint8_t *box, nds_buf *all, nds_pc_shard_chunk *chunks,
                             size_t *offs, size_t *n) {
    uint64_t extent[4] = {p->chunk[0], p->chunk[1], p->chunk[2], p->nc}, g[3];
    uint8_t zero[NDS_DTYPE_MAX_SIZE] = {0};
    int64_t box_st[4], sub_st[4];
    canonical_strides(p, sub_st);
    nds_buf *sub = scratch(0, p->chunk_bytes);
    if (!sub) return no_memory();
    *n = 0;
    for (g[2] = first[2]; g[2] < first[2] + count[2]; g[2]++)
        for (g[1] = first[1]; g[1] < first[1] + count[1]; g[1]++)
            for (g[0] = first[0]; g[0] < first[0] + count[0]; g[0]++) {
                int64_t off = box_offset(p, first, g, box_st);
                nds_strided_copy(4, extent, p->elem, sub->data, sub_st, box + off, box_st);
                if (nds_all_equal(sub->data, p->chunk_bytes / p->elem, p->elem, zero)) continue;
                size_t at = all->len;
                int rc = encode_one(p, g, sub->data, all);
                if (rc)
                    return nds_err_prefix(rc, "chunk %llu,%llu,%llu", (unsigned long long)g[0],
                                          (unsigned long long)g[1], (unsigned long long)g[2]);
                chunks[*n] = (nds_pc_shard_chunk){nds_pc_morton(&p->grid, g), NULL, all->len - at};
                offs[(*n)++] = at;
            }
    return 0;
}

static int encode_box(const precomputed *p, const uint64_t *cell, const uint8_t *box,
                      nds_buf *out) {
    uint64_t first[3], count[3];
    box_range(p, cell, first, count);
    size_t max = (size_t)(count[0] * count[1] * count[2]), n = 0;
    nds_pc_shard_chunk *chunks = malloc((max ? max : 1) * sizeof *chunks);
    size_t *offs = malloc((max ? max : 1) * sizeof *offs);
    nds_buf all = {0};
    int rc = chunks && offs ? encode_box_chunks(p, first, count, box, &all, chunks, offs, &n)
                            : no_memory();
    for (size_t i = 0; i < n && !rc; i++) chunks[i].data = all.data + offs[i];
    if (!rc) rc = nds_pc_shard_build(&p->s.sharding, chunks, n, out);
    free(chunks);
    free(offs);
    nds_buf_dispose(&all);
    scratch_trim();
    return rc;
}

/* ---- vtable: chunk codec --------------------------------------------------------------------- */

/* A storage chunk: one precomputed chunk (unsharded, and hashed shards, whose chunk data this is
 * before data_encoding), or a shard box's whole shard file. */
static int pc_decode_chunk(void *state, const uint64_t *cell, const uint8_t *data, size_t len,
                           uint8_t *out) {
    const precomputed *p = state;
    if (p->layout != SHARD_BOX) return decode_one(p, cell, data, len, out);
    size_t bytes = p->chunk_bytes << (p->box[0] + p->box[1] + p->box[2]);
    return decode_box(p, cell, data, len, out, bytes);
}

static int pc_encode_chunk(void *state, const uint64_t *cell, const uint8_t *chunk, nds_buf *out) {
    const precomputed *p = state;
    out->len = 0;
    if (p->layout != SHARD_BOX) return encode_one(p, cell, chunk, out);
    return encode_box(p, cell, chunk, out);
}

/* ---- vtable: hashed shards (grouped writes) -------------------------------------------------- */

static int pc_group_key(void *state, const uint64_t *cell, char *buf, size_t cap) {
    const precomputed *p = state;
    if (p->layout != SHARD_HASHED)
        return nds_err(NDS_EINTERNAL, "neuroglancer_precomputed: scale \"%s\" is not grouped",
                       p->s.key);
    return nds_pc_shard_key(p->s.key, &p->s.sharding, chunk_shard(p, cell), buf, cap);
}

/* Chunk cell out of its shard file's bytes: minishard lookup, data_encoding undone, decoded. */
static int pc_group_read_chunk(void *state, const uint8_t *obj, size_t len, const uint64_t *cell,
                               uint8_t *out, int *present) {
    const precomputed *p = state;
    uint64_t id = nds_pc_morton(&p->grid, cell);
    nds_pc_chunk_ref ref;
    nds_buf *raw = scratch(2, 0);
    *present = 0;
    int rc =
        raw ? nds_pc_shard_find(&p->s.sharding, obj, len, id, p->max_entries, &ref) : no_memory();
    if (!rc && ref.end != 0)
        rc = nds_pc_chunk_data(&p->s.sharding, obj + ref.start, (size_t)(ref.end - ref.start),
                               4 * p->chunk_bytes + (1u << 20), raw);
    if (!rc && ref.end != 0 && !(rc = decode_one(p, cell, raw->data, raw->len, out))) *present = 1;
    scratch_trim();
    return rc ? nds_err_prefix(rc, "chunk %llu", (unsigned long long)id) : 0;
}

/* The shard file rebuilt with the updated chunks; the others' stored bytes are copied verbatim. */
static int pc_group_encode(void *state, const uint8_t *obj, size_t len,
                           const nds_group_update *updates, size_t n, nds_buf *out) {
    const precomputed *p = state;
    nds_pc_shard_chunk *c = malloc((n ? n : 1) * sizeof *c);
    if (!c) return no_memory();
    for (size_t k = 0; k < n; k++)
        c[k] = (nds_pc_shard_chunk){nds_pc_morton(&p->grid, updates[k].cell), updates[k].data,
                                    updates[k].len};
    uint64_t shard = n ? chunk_shard(p, updates[0].cell) : 0;
    int rc = nds_pc_shard_update(&p->s.sharding, shard, obj, len, p->max_entries, c, n, out);
    free(c);
    return rc;
}

/* One precomputed chunk straight from the store: its shard through byte ranges, or its own key. */
static int pc_read_chunk(void *state, nds_kvstore *kv, const uint64_t *cell, uint8_t *out,
                         int *present) {
    const precomputed *p = state;
    size_t limit = 4 * p->chunk_bytes + (1u << 20);
    nds_buf *data = scratch(2, 0);
    if (!data) return no_memory();
    int rc;
    *present = 0;
    if (p->layout != UNSHARDED) {
        uint64_t id = nds_pc_morton(&p->grid, cell);
        rc = nds_pc_shard_read(kv, p->s.key, &p->s.sharding, id, p->max_entries, limit, data,
                               present);
    } else {
        char key[NDS_PC_MAX_KEY + 128];
        nds_read_result r;
        if ((rc = unsharded_key(p, cell, key, sizeof key)) ||
            (rc = nds_kvstore_read(kv, key, NULL, &r)))
            return rc;
        *present = r.state == NDS_READ_VALUE;
        if (*present && nds_buf_append(data, r.value.data, r.value.len)) rc = no_memory();
        nds_read_result_dispose(&r);
    }
    if (!rc && *present) rc = decode_one(p, cell, data->data, data->len, out);
    if (rc)
        rc = nds_err_prefix(rc, "chunk %llu,%llu,%llu", (unsigned long long)cell[0],
                            (unsigned long long)cell[1], (unsigned long long)cell[2]);
    scratch_trim();
    return rc;
}

/* ---- instance -------------------------------------------------------------------------------- */

static void pc_close(void *state) {
    precomputed *p = state;
    if (!p) return;
    json_object_put(p->doc);
    nds_pc_info_dispose(&p->info);
    free(p);
}

/* How a sharded scale maps onto the core's grid (see the file comment). */
static void choose_layout(precomputed *p) {
    const nds_pc_sharding *sh = &p->s.sharding;
    p->layout = UNSHARDED;
    if (!sh->present) return;
    p->layout = SHARD_HASHED;
    if (!nds_pc_shard_box(sh, &p->grid, p->box)) return; /* hashed or wrapping shard numbers */
    unsigned b = p->box[0] + p->box[1] + p->box[2];
    if (b <= 32 && ((uint64_t)p->chunk_bytes << b) <= SHARD_BOX_MAX_BYTES) p->layout = SHARD_BOX;
}

/* Makes scale `index` (chunk size `chunk`) of the parsed info the open one. Takes doc and info. */
static void load(precomputed *p, json_object *doc, nds_pc_info *info, size_t index, size_t chunk,
                 const nds_pc_request *req) {
    p->doc = doc;
    p->info = *info;
    p->s = info->scales[index];
    nds_pc_apply_overrides(req, &p->s);
    memcpy(p->chunk, p->s.chunk_sizes[chunk], sizeof p->chunk);
    p->nc = info->num_channels;
    p->dtype = info->dtype;
    p->elem = nds_dtype_size(p->dtype);
    p->chunk_bytes =
        (size_t)(p->chunk[0] * p->chunk[1] * p->chunk[2] * p->nc * p->elem); /* <= 2 GiB */
    nds_pc_grid_init(&p->grid, p->s.size, p->chunk);
    uint64_t total;
    if (!nds_product_u64(p->grid.grid, 3, &total)) total = MAX_MINISHARD_ENTRIES;
    p->max_entries = total && total < MAX_MINISHARD_ENTRIES ? total : MAX_MINISHARD_ENTRIES;
    choose_layout(p);
}

static void fill_meta(const precomputed *p, nds_array_meta *meta) {
    memset(meta, 0, sizeof *meta);
    meta->rank = 4;
    meta->dtype = p->dtype;
    for (int d = 0; d < 3; d++) {
        meta->shape[d] = p->s.size[d];
        meta->chunk_shape[d] = p->layout == SHARD_BOX ? p->chunk[d] << p->box[d] : p->chunk[d];
        if (p->layout != UNSHARDED) meta->read_chunk_shape[d] = p->chunk[d];
    }
    meta->shape[3] = meta->chunk_shape[3] = p->nc;
    if (p->layout != UNSHARDED) meta->read_chunk_shape[3] = p->nc;
    meta->grouped = p->layout == SHARD_HASHED;
}

/* The spec's chunk_layout.write_chunk must be the storage chunk (the shard box when sharded). */
static int check_write_chunk(const precomputed *p, const nds_pc_request *req) {
    if (!req->has_write_chunk) return 0;
    nds_array_meta m;
    fill_meta(p, &m);
    if (!memcmp(m.chunk_shape, req->write_chunk, 3 * sizeof m.chunk_shape[0])) return 0;
    return nds_err(NDS_EMISMATCH,
                   "%s: the write chunk is [%llu,%llu,%llu], the spec asks for [%llu,%llu,%llu]",
                   p->doc_name, (unsigned long long)m.chunk_shape[0],
                   (unsigned long long)m.chunk_shape[1], (unsigned long long)m.chunk_shape[2],
                   (unsigned long long)req->write_chunk[0], (unsigned long long)req->write_chunk[1],
                   (unsigned long long)req->write_chunk[2]);
}

/* Reads key; *found is 0 when it is missing. On success with *found, r must be disposed. */
static int read_key(nds_kvstore *kv, const char *key, const char *url, nds_read_result *r,
                    bool *found) {
    memset(r, 0, sizeof *r);
    int rc = nds_kvstore_read(kv, key, NULL, r);
    if (rc) return nds_err_prefix(rc, "neuroglancer_precomputed: reading %s of %s", key, url);
    *found = r->state == NDS_READ_VALUE;
    if (!*found) nds_read_result_dispose(r);
    return 0;
}

static int write_info(nds_kvstore *kv, const json_object *doc, const nds_generation *if_equal,
                      const char *url) {
    char *text = nds_json_to_string(doc, false);
    if (!text) return no_memory();
    nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
    wo.if_equal = *if_equal;
    int rc = nds_kvstore_write(kv, "info", text, strlen(text), &wo, NULL);
    free(text);
    if (rc && rc != NDS_ECONFLICT)
        rc = nds_err_prefix(rc, "neuroglancer_precomputed: writing info of %s", url);
    return rc;
}

/* ---- open ------------------------------------------------------------------------------------ */

/* Parses doc (ownership taken) and opens the scale the request names in it, checking the request.
 */
static int open_doc(precomputed *p, json_object *doc, const nds_pc_request *req, unsigned mode,
                    bool *missing, size_t *missing_index) {
    nds_pc_info info;
    size_t index = 0, chunk = 0;
    bool found = false;
    int rc = nds_pc_info_parse(doc, p->doc_name, &info);
    if (rc) {
        json_object_put(doc);
        return rc;
    }
    rc =
        nds_pc_select_scale(&info, req, (mode & NDS_OPEN_CREATE) != 0, p->doc_name, &index, &found);
    if (!rc && !found) {
        *missing = true;
        *missing_index = index;
    } else if (!rc) {
        rc = nds_pc_check(&info, index, req, p->doc_name, &chunk);
    }
    if (rc || !found) {
        nds_pc_info_dispose(&info);
        json_object_put(doc);
        return rc;
    }
    load(p, doc, &info, index, chunk, req);
    return check_write_chunk(p, req);
}

/* Adds the requested scale to the stored info (conditional on its generation); NDS_ECONFLICT to
 * retry. */
static int add_scale(precomputed *p, nds_kvstore *kv, json_object *doc, const nds_generation *gen,
                     const nds_pc_request *req) {
    json_object *scale, *scales;
    int rc = nds_pc_new_scale(req, p->url, &scale);
    if (rc) return rc;
    json_object_object_get_ex(doc, "scales", &scales);
    json_object_array_add(scales, scale);
    json_object *copy = NULL;
    if (json_object_deep_copy(doc, &copy, NULL) != 0) return no_memory();
    bool missing = false;
    size_t at;
    rc =
        open_doc(p, copy, req, NDS_OPEN_EXISTING, &missing, &at); /* validates the whole new info */
    if (!rc && missing)
        rc = nds_err(NDS_EINTERNAL, "neuroglancer_precomputed: the new scale is not selected");
    if (!rc) rc = write_info(kv, doc, gen, p->url);
    return rc;
}

/* Creates the whole volume (create-only write of info); NDS_ECONFLICT when another writer was
 * first. */
static int create_volume(precomputed *p, nds_kvstore *kv, const nds_pc_request *req) {
    json_object *doc, *copy = NULL;
    int rc = nds_pc_new_info(req, p->url, &doc);
    if (rc) return rc;
    if (json_object_deep_copy(doc, &copy, NULL) != 0) {
        json_object_put(doc);
        return no_memory();
    }
    bool missing = false;
    size_t at;
    rc = open_doc(p, copy, req, NDS_OPEN_EXISTING, &missing, &at);
    if (!rc && missing)
        rc = nds_err(NDS_ENOTFOUND, "%s: the spec selects a scale the new info does not have",
                     p->doc_name);
    nds_generation absent = {NDS_GEN_ABSENT, {0}};
    if (!rc) rc = write_info(kv, doc, &absent, p->url);
    json_object_put(doc);
    return rc;
}

/* One round of open-or-create; NDS_ECONFLICT when the info changed under us. */
static int open_round(precomputed *p, nds_kvstore *kv, const nds_pc_request *req, unsigned mode) {
    nds_read_result r;
    bool found = false, missing = false;
    size_t at;
    int rc = read_key(kv, "info", p->url, &r, &found);
    if (rc) return rc;
    if (!found) {
        if (!(mode & NDS_OPEN_CREATE))
            return nds_err(NDS_ENOTFOUND,
                           "neuroglancer_precomputed: no volume at %s (info not found)", p->url);
        return create_volume(p, kv, req);
    }
    json_object *doc = NULL, *keep = NULL;
    rc = nds_json_parse((const char *)r.value.data, r.value.len, p->doc_name, &doc);
    if (!rc && json_object_deep_copy(doc, &keep, NULL) != 0) rc = no_memory();
    if (!rc)
        rc = open_doc(p, doc, req, mode, &missing, &at);
    else
        json_object_put(doc);
    if (!rc && !missing && !(mode & NDS_OPEN_EXISTING))
        rc = nds_err(NDS_EEXIST, "neuroglancer_precomputed: scale \"%s\" already exists at %s",
                     p->s.key, p->url);
    if (!rc && missing && !(mode & NDS_OPEN_CREATE))
        rc = nds_err(NDS_ENOTFOUND, "%s: the scale the spec asks for does not exist", p->doc_name);
    if (!rc && missing) rc = add_scale(p, kv, keep, &r.generation, req);
    json_object_put(keep);
    nds_read_result_dispose(&r);
    return rc;
}

static int pc_open(nds_kvstore *kv, const json_object *spec, unsigned mode, void **state,
                   nds_array_meta *meta) {
    *state = NULL;
    precomputed *p = calloc(1, sizeof *p);
    if (!p) return no_memory();
    snprintf(p->url, sizeof p->url, "%s", nds_kvstore_url(kv));
    snprintf(p->doc_name, sizeof p->doc_name, "neuroglancer_precomputed: info of %s", p->url);
    if (!(mode & (NDS_OPEN_EXISTING | NDS_OPEN_CREATE))) mode |= NDS_OPEN_EXISTING;
    nds_pc_request req;
    int rc = nds_pc_request_from_spec(spec, p->url, &req);
    for (int attempt = 0; !rc && attempt < OPEN_ATTEMPTS; attempt++) {
        rc = open_round(p, kv, &req, mode);
        if (rc != NDS_ECONFLICT) break;
        json_object_put(p->doc); /* another writer changed the info between our read and write */
        nds_pc_info_dispose(&p->info);
        p->doc = NULL;
        if (attempt + 1 < OPEN_ATTEMPTS) rc = 0;
    }
    if (rc == NDS_ECONFLICT)
        rc = nds_err(NDS_ECONFLICT, "%s: kept changing while opening", p->doc_name);
    nds_pc_request_dispose(&req);
    if (rc) {
        pc_close(p);
        return rc;
    }
    fill_meta(p, meta);
    *state = p;
    return 0;
}

/* ---- metadata, attributes, description ------------------------------------------------------- */

static int pc_metadata_json(void *state, json_object **out) {
    const precomputed *p = state;
    *out = NULL;
    return json_object_deep_copy(p->doc, out, NULL) == 0 ? 0 : no_memory();
}

static int pc_get_attributes(void *state, nds_kvstore *kv, json_object **out) {
    (void)state;
    (void)kv;
    *out = json_object_new_object();
    return *out ? 0 : no_memory();
}

static int pc_set_attributes(void *state, nds_kvstore *kv, const json_object *attrs) {
    const precomputed *p = state;
    (void)kv;
    (void)attrs;
    return nds_err(NDS_EUNSUPPORTED,
                   "neuroglancer_precomputed: %s: the precomputed format has no user "
                   "attributes",
                   p->url);
}

/* "scale 8_8_8: compressed_segmentation(block=8,8,8), sharded(identity, preshift=9, ...)". */
static void pc_describe_codec(void *state, char *buf, size_t cap) {
    const precomputed *p = state;
    const nds_pc_scale *s = &p->s;
    char enc[96];
    if (s->encoding == NDS_PC_JPEG)
        snprintf(enc, sizeof enc, "jpeg(quality=%d)", s->jpeg_quality);
    else if (s->encoding == NDS_PC_PNG)
        snprintf(enc, sizeof enc, "png(level=%d)", s->png_level);
    else if (s->encoding == NDS_PC_CSEG)
        snprintf(enc, sizeof enc, "compressed_segmentation(block=%llu,%llu,%llu)",
                 (unsigned long long)s->cseg_block[0], (unsigned long long)s->cseg_block[1],
                 (unsigned long long)s->cseg_block[2]);
    else
        snprintf(enc, sizeof enc, "raw");
    const nds_pc_sharding *sh = &s->sharding;
    if (!sh->present) {
        snprintf(buf, cap, "scale %s: %s", s->key, enc);
        return;
    }
    snprintf(buf, cap,
             "scale %s: %s, sharded(hash=%s, preshift_bits=%u, minishard_bits=%u, shard_bits=%u, "
             "minishard_index=%s, data=%s)",
             s->key, enc, sh->murmur ? "murmurhash3_x86_128" : "identity", sh->preshift_bits,
             sh->minishard_bits, sh->shard_bits, sh->index_gzip ? "gzip" : "raw",
             sh->data_gzip ? "gzip" : "raw");
}

/* The open scale, by key, so a printed spec reopens this scale and not scale 0. */
static int pc_spec_json(void *state, json_object *spec) {
    const precomputed *p = state;
    json_object *sm = json_object_new_object();
    if (!sm || json_object_object_add(sm, "key", json_object_new_string(p->s.key)) != 0 ||
        json_object_object_add(spec, "scale_metadata", sm) != 0) {
        json_object_put(sm);
        return nds_err(NDS_ENOMEM, "neuroglancer_precomputed: out of memory printing a spec");
    }
    return 0;
}

const nds_format nds_format_precomputed = {
    .version = NDS_FORMAT_VERSION,
    .name = "neuroglancer_precomputed",
    .url_scheme = "neuroglancer-precomputed",
    .metadata_key = "info",
    .open = pc_open,
    .close = pc_close,
    .chunk_key = pc_chunk_key,
    .parse_chunk_key = pc_parse_chunk_key,
    .decode_chunk = pc_decode_chunk,
    .encode_chunk = pc_encode_chunk,
    .metadata_json = pc_metadata_json,
    .resize = NULL, /* bounds are fixed in info: the core refuses before touching chunks */
    .spec_json = pc_spec_json,
    .get_attributes = pc_get_attributes,
    .set_attributes = pc_set_attributes,
    .create_group = NULL,
    .describe_codec = pc_describe_codec,
    .read_chunk = pc_read_chunk,
    .group_key = pc_group_key,
    .group_read_chunk = pc_group_read_chunk,
    .group_encode = pc_group_encode,
};
