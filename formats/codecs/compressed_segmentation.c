/* Neuroglancer compressed_segmentation encoding (see compressed_segmentation.h and
 * docs/formats.md).
 *
 * Layout (all words little-endian uint32): one offset per channel (in words from the start of the
 * encoded chunk), then per channel, from that offset: gx*gy*gz block headers of two words (word 0:
 * lookup table offset in its low 24 bits and the bit width 0/1/2/4/8/16/32 in its high 8 bits; word
 * 1: offset of the packed indices; both in words from the channel's start), then the packed indices
 * and lookup tables (sorted distinct labels, 4 or 8 bytes each). Index i of a block sits at bit
 * bits*i of its packed words, i = x + bx*(y + by*z); positions past the volume's edge encode 0.
 *
 * Omits: nothing of the format. Decoding checks every offset against the input length and every
 * index against the bytes left for its table (the format does not record table lengths).
 * Threading: reentrant. Ownership: encode appends to the caller's nds_buf; decode writes only the
 * volume's elements of out.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "compressed_segmentation.h"
#include "internal/error.h"
#include "internal/util.h"

#define TABLE_OFFSET_LIMIT (UINT32_C(1) << 24)

static uint64_t get_label(const uint8_t *p, size_t elem) {
    return elem == 8 ? nds_load_le64(p) : nds_load_le32(p);
}

/* A label of the input, in host order. */
static uint64_t load(const void *base, size_t elem, int64_t off) {
    if (elem == 8) {
        uint64_t v;
        memcpy(&v, (const uint8_t *)base + off * 8, 8);
        return v;
    }
    uint32_t v;
    memcpy(&v, (const uint8_t *)base + off * 4, 4);
    return v;
}

static void store(void *base, size_t elem, int64_t off, uint64_t v) {
    if (elem == 8) {
        memcpy((uint8_t *)base + off * 8, &v, 8);
    } else {
        uint32_t w = (uint32_t)v;
        memcpy((uint8_t *)base + off * 4, &w, 4);
    }
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Smallest of 0, 1, 2, 4, 8, 16, 32 bits that can index n distinct values. */
static unsigned bits_for(size_t n) {
    unsigned b = 0;
    while (b < 32 && ((uint64_t)1 << b) < n) b = b ? b * 2 : 1;
    return b;
}

/* ---- encoder --------------------------------------------------------------------------------- */

/* Lookup tables already written for the current channel: content hash -> word offset, so blocks
 * with the same distinct labels share one table (as neuroglancer's encoder does). */
typedef struct table_entry {
    uint64_t hash;
    uint32_t offset; /* words from the channel start */
    uint32_t count;  /* labels in the table; 0 marks an empty slot */
} table_entry;

typedef struct encoder {
    nds_buf *out;
    size_t base; /* byte offset of the channel's start in out */
    size_t elem;
    uint64_t block[3];
    size_t nblock;  /* elements per block */
    uint64_t *vals; /* this block's labels (positions inside the volume) */
    uint64_t *uniq; /* sorted distinct labels */
    table_entry *tables;
    size_t ntables, cap;
} encoder;

static uint64_t hash_table(const uint64_t *v, size_t n) {
    uint64_t h = 0x9e3779b97f4a7c15u ^ n;
    for (size_t i = 0; i < n; i++) h = (h ^ v[i]) * 0x100000001b3u + (h >> 29);
    return h;
}

static bool table_matches(const encoder *e, const table_entry *t, const uint64_t *v, size_t n) {
    if (t->count != n) return false;
    const uint8_t *p = e->out->data + e->base + (size_t)t->offset * 4;
    for (size_t i = 0; i < n; i++)
        if (get_label(p + i * e->elem, e->elem) != v[i]) return false;
    return true;
}

static int tables_grow(encoder *e) {
    size_t cap = e->cap ? e->cap * 2 : 64;
    table_entry *t = calloc(cap, sizeof *t);
    if (!t) return nds_err(NDS_ENOMEM, "compressed_segmentation: out of memory");
    for (size_t i = 0; i < e->cap; i++) {
        if (!e->tables[i].count) continue;
        size_t j = e->tables[i].hash & (cap - 1);
        while (t[j].count) j = (j + 1) & (cap - 1);
        t[j] = e->tables[i];
    }
    free(e->tables);
    e->tables = t;
    e->cap = cap;
    return 0;
}

/* Appends n bytes of zeros to out; *at receives their offset. */
static int append_zeros(nds_buf *out, size_t n, size_t *at) {
    if (nds_buf_reserve(out, out->len + n) != 0)
        return nds_err(NDS_ENOMEM, "compressed_segmentation: out of memory");
    *at = out->len;
    memset(out->data + out->len, 0, n);
    out->len += n;
    return 0;
}

/* The word offset of a lookup table holding uniq[0..n): an identical earlier one, or a new one. */
static int emit_table(encoder *e, size_t n, uint32_t *offset) {
    if ((e->ntables + 1) * 2 > e->cap && tables_grow(e)) return NDS_ENOMEM;
    uint64_t h = hash_table(e->uniq, n);
    size_t j = h & (e->cap - 1);
    for (; e->tables[j].count; j = (j + 1) & (e->cap - 1)) {
        if (e->tables[j].hash == h && table_matches(e, &e->tables[j], e->uniq, n)) {
            *offset = e->tables[j].offset;
            return 0;
        }
    }
    size_t words = (e->out->len - e->base) / 4, at = 0;
    if (words >= TABLE_OFFSET_LIMIT)
        return nds_err(NDS_ELIMIT, "compressed_segmentation: encoded channel exceeds the format's "
                                   "24-bit lookup table offsets; use smaller chunks");
    int rc = append_zeros(e->out, n * e->elem, &at);
    if (rc) return rc;
    for (size_t i = 0; i < n; i++) {
        uint8_t *label = e->out->data + at + i * e->elem;
        if (e->elem == 8)
            nds_store_le64(label, e->uniq[i]);
        else
            nds_store_le32(label, (uint32_t)e->uniq[i]);
    }
    e->tables[j] = (table_entry){h, (uint32_t)words, (uint32_t)n};
    e->ntables++;
    *offset = (uint32_t)words;
    return 0;
}

/* Block extent inside the volume, per dimension. */
static void block_extent(const encoder *e, const uint64_t *vol, const uint64_t *origin,
                         uint64_t *ext) {
    for (int d = 0; d < 3; d++) ext[d] = nds_min_u64(e->block[d], vol[d] - origin[d]);
}

/* Gathers the block's labels into e->vals (x fastest) and their sorted distinct set into e->uniq.
 */
static size_t gather(encoder *e, const void *in, const int64_t *stride, const uint64_t *origin,
                     const uint64_t *ext) {
    size_t n = 0;
    for (uint64_t z = 0; z < ext[2]; z++)
        for (uint64_t y = 0; y < ext[1]; y++)
            for (uint64_t x = 0; x < ext[0]; x++) {
                int64_t off = (int64_t)(origin[0] + x) * stride[0] +
                              (int64_t)(origin[1] + y) * stride[1] +
                              (int64_t)(origin[2] + z) * stride[2];
                e->vals[n++] = load(in, e->elem, off);
            }
    memcpy(e->uniq, e->vals, n * sizeof *e->uniq);
    qsort(e->uniq, n, sizeof *e->uniq, cmp_u64);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (u == 0 || e->uniq[u - 1] != e->uniq[i]) e->uniq[u++] = e->uniq[i];
    return u;
}

static uint32_t index_of(const uint64_t *uniq, size_t n, uint64_t v) {
    size_t lo = 0, hi = n;
    while (lo + 1 < hi) {
        size_t mid = (lo + hi) / 2;
        if (uniq[mid] <= v)
            lo = mid;
        else
            hi = mid;
    }
    return (uint32_t)lo;
}

/* Encodes one block: packed indices, then its table; fills the two header words at hdr. */
static int encode_block(encoder *e, const void *in, const int64_t *stride, const uint64_t *vol,
                        const uint64_t *origin, size_t hdr) {
    uint64_t ext[3];
    block_extent(e, vol, origin, ext);
    size_t nuniq = gather(e, in, stride, origin, ext);
    unsigned bits = bits_for(nuniq);
    size_t words = (size_t)(((uint64_t)bits * e->nblock + 31) / 32), at = 0;
    size_t values_off = (e->out->len - e->base) / 4;
    if (values_off > UINT32_MAX)
        return nds_err(NDS_ELIMIT, "compressed_segmentation: encoded channel above 16 GiB");
    int rc = append_zeros(e->out, words * 4, &at);
    if (rc) return rc;
    size_t i = 0;
    for (uint64_t z = 0; bits && z < ext[2]; z++)
        for (uint64_t y = 0; y < ext[1]; y++)
            for (uint64_t x = 0; x < ext[0]; x++) {
                uint64_t pos = (uint64_t)bits * (x + e->block[0] * (y + e->block[1] * z));
                uint8_t *w = e->out->data + at + (pos / 32) * 4;
                nds_store_le32(w, nds_load_le32(w) | index_of(e->uniq, nuniq, e->vals[i++])
                                                         << (pos % 32));
            }
    uint32_t table = 0;
    if ((rc = emit_table(e, nuniq, &table))) return rc;
    nds_store_le32(e->out->data + hdr, table | (uint32_t)bits << 24);
    nds_store_le32(e->out->data + hdr + 4, (uint32_t)values_off);
    return 0;
}

static int encode_channel(encoder *e, const void *in, const int64_t *stride, const uint64_t *vol) {
    uint64_t grid[3], nblocks = 1;
    for (int d = 0; d < 3; d++) {
        grid[d] = nds_ceil_div(vol[d], e->block[d]);
        if (!nds_mul_u64(nblocks, grid[d], &nblocks) || nblocks > SIZE_MAX / 16)
            return nds_err(NDS_ELIMIT, "compressed_segmentation: too many blocks");
    }
    size_t hdr = 0;
    e->base = e->out->len;
    e->ntables = 0;
    if (e->tables) memset(e->tables, 0, e->cap * sizeof *e->tables);
    int rc = append_zeros(e->out, (size_t)nblocks * 8, &hdr);
    size_t b = 0;
    for (uint64_t z = 0; z < grid[2] && !rc; z++)
        for (uint64_t y = 0; y < grid[1] && !rc; y++)
            for (uint64_t x = 0; x < grid[0] && !rc; x++, b++) {
                uint64_t origin[3] = {x * e->block[0], y * e->block[1], z * e->block[2]};
                rc = encode_block(e, in, stride, vol, origin, hdr + b * 8);
            }
    return rc;
}

static int encoder_init(encoder *e, nds_buf *out, size_t elem, const uint64_t *block) {
    memset(e, 0, sizeof *e);
    e->out = out;
    e->elem = elem;
    uint64_t n = 1;
    for (int d = 0; d < 3; d++) {
        if (block[d] == 0) return nds_err(NDS_EINVAL, "compressed_segmentation: block size 0");
        e->block[d] = block[d];
        if (!nds_mul_u64(n, block[d], &n) || n > (UINT64_C(1) << 31))
            return nds_err(NDS_ELIMIT, "compressed_segmentation: blocks above 2^31 elements");
    }
    e->nblock = (size_t)n;
    e->vals = malloc(n * sizeof *e->vals);
    e->uniq = malloc(n * sizeof *e->uniq);
    if (!e->vals || !e->uniq) return nds_err(NDS_ENOMEM, "compressed_segmentation: out of memory");
    return 0;
}

int nds_cseg_encode(const void *in, size_t elem, const uint64_t vol[3], const int64_t stride[4],
                    size_t nchan, const uint64_t block[3], nds_buf *out) {
    if (elem != 4 && elem != 8)
        return nds_err(NDS_EINVAL, "compressed_segmentation: labels must be uint32 or uint64");
    encoder e;
    int rc = encoder_init(&e, out, elem, block);
    size_t start = out->len, at = 0;
    if (!rc) rc = append_zeros(out, nchan * 4, &at);
    for (size_t c = 0; c < nchan && !rc; c++) {
        size_t words = (out->len - start) / 4;
        if (words > UINT32_MAX) {
            rc = nds_err(NDS_ELIMIT, "compressed_segmentation: encoded chunk above 16 GiB");
            break;
        }
        nds_store_le32(out->data + at + c * 4, (uint32_t)words);
        rc = encode_channel(&e, (const uint8_t *)in + (int64_t)c * stride[3] * (int64_t)elem,
                            stride, vol);
    }
    free(e.vals);
    free(e.uniq);
    free(e.tables);
    if (rc) out->len = start;
    return rc;
}

/* ---- decoder --------------------------------------------------------------------------------- */

typedef struct decoder {
    const uint8_t *data;
    size_t len, elem;
    uint64_t block[3], nblock;
    void *out;
    const int64_t *stride;
} decoder;

/* Decodes the block at origin of the channel starting at byte chan, whose header is at hdr. */
static int decode_block(const decoder *k, size_t chan, size_t hdr, const uint64_t *vol,
                        const uint64_t *origin, int64_t chan_off) {
    uint32_t h0 = nds_load_le32(k->data + hdr), h1 = nds_load_le32(k->data + hdr + 4);
    unsigned bits = h0 >> 24;
    if (bits > 32 || (bits & (bits - 1)) != 0)
        return nds_err(NDS_ECORRUPT,
                       "compressed_segmentation: block header at byte %zu has %u-bit "
                       "indices (must be 0, 1, 2, 4, 8, 16 or 32)",
                       hdr, bits);
    uint64_t vstart = chan + (uint64_t)h1 * 4, vbytes = (bits * k->nblock + 31) / 32 * 4;
    uint64_t tstart = chan + (uint64_t)(h0 & 0xffffff) * 4;
    if (vstart > k->len || vbytes > k->len - vstart)
        return nds_err(NDS_ECORRUPT,
                       "compressed_segmentation: block indices at byte %llu run past "
                       "the end (%zu bytes)",
                       (unsigned long long)vstart, k->len);
    if (tstart >= k->len)
        return nds_err(NDS_ECORRUPT,
                       "compressed_segmentation: lookup table at byte %llu is past "
                       "the end (%zu bytes)",
                       (unsigned long long)tstart, k->len);
    uint64_t tcount = (k->len - tstart) / k->elem,
             mask = bits == 32 ? UINT32_MAX : (1u << bits) - 1;
    uint64_t ext[3];
    for (int d = 0; d < 3; d++) ext[d] = nds_min_u64(k->block[d], vol[d] - origin[d]);
    for (uint64_t z = 0; z < ext[2]; z++)
        for (uint64_t y = 0; y < ext[1]; y++)
            for (uint64_t x = 0; x < ext[0]; x++) {
                uint64_t pos = bits * (x + k->block[0] * (y + k->block[1] * z)), idx = 0;
                if (bits)
                    idx = (nds_load_le32(k->data + vstart + pos / 32 * 4) >> (pos % 32)) & mask;
                if (idx >= tcount)
                    return nds_err(NDS_ECORRUPT,
                                   "compressed_segmentation: index %llu past the end "
                                   "of the lookup table at byte %llu",
                                   (unsigned long long)idx, (unsigned long long)tstart);
                int64_t off = chan_off + (int64_t)(origin[0] + x) * k->stride[0] +
                              (int64_t)(origin[1] + y) * k->stride[1] +
                              (int64_t)(origin[2] + z) * k->stride[2];
                store(k->out, k->elem, off, get_label(k->data + tstart + idx * k->elem, k->elem));
            }
    return 0;
}

static int decode_channel(const decoder *k, size_t chan, const uint64_t *vol, int64_t chan_off) {
    uint64_t grid[3], nblocks = 1;
    for (int d = 0; d < 3; d++) {
        grid[d] = nds_ceil_div(vol[d], k->block[d]);
        if (!nds_mul_u64(nblocks, grid[d], &nblocks))
            return nds_err(NDS_ECORRUPT, "compressed_segmentation: too many blocks");
    }
    if (nblocks > (k->len - chan) / 8)
        return nds_err(NDS_ECORRUPT,
                       "compressed_segmentation: %llu block headers at byte %zu run "
                       "past the end (%zu bytes)",
                       (unsigned long long)nblocks, chan, k->len);
    size_t b = 0;
    for (uint64_t z = 0; z < grid[2]; z++)
        for (uint64_t y = 0; y < grid[1]; y++)
            for (uint64_t x = 0; x < grid[0]; x++, b++) {
                uint64_t origin[3] = {x * k->block[0], y * k->block[1], z * k->block[2]};
                int rc = decode_block(k, chan, chan + b * 8, vol, origin, chan_off);
                if (rc) return rc;
            }
    return 0;
}

int nds_cseg_decode(const uint8_t *data, size_t len, const nds_cseg_volume *v, void *out) {
    size_t elem = v->elem, nchan = v->nchan;
    const uint64_t *vol = v->vol, *block = v->block;
    const int64_t *stride = v->stride;
    if (elem != 4 && elem != 8)
        return nds_err(NDS_EINVAL, "compressed_segmentation: labels must be uint32 or uint64");
    decoder k = {data, len, elem, {block[0], block[1], block[2]}, 1, out, stride};
    for (int d = 0; d < 3; d++)
        if (block[d] == 0 || !nds_mul_u64(k.nblock, block[d], &k.nblock) ||
            k.nblock > (UINT64_C(1) << 31))
            return nds_err(NDS_EINVAL, "compressed_segmentation: invalid block size");
    if (nchan > len / 4)
        return nds_err(NDS_ECORRUPT,
                       "compressed_segmentation: %zu bytes cannot hold the offsets "
                       "of %zu channels",
                       len, nchan);
    for (size_t c = 0; c < nchan; c++) {
        uint64_t chan = (uint64_t)nds_load_le32(data + c * 4) * 4;
        if (chan > len)
            return nds_err(NDS_ECORRUPT,
                           "compressed_segmentation: channel %zu starts at byte %llu, "
                           "past the end (%zu bytes)",
                           c, (unsigned long long)chan, len);
        int rc = decode_channel(&k, (size_t)chan, vol, (int64_t)c * stride[3]);
        if (rc) return rc;
    }
    return 0;
}
