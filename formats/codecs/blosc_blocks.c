/* Decoding c-blosc 1.x chunks one block at a time: see blosc_blocks.h.
 *
 * The chunk format (c-blosc's README_CHUNK_FORMAT): a 16-byte header (format version, compressor
 * version, flags, typesize, then little-endian nbytes, blocksize, cbytes), one little-endian
 * 32-bit start per block (from the chunk's first byte), and per block its splits, each a 32-bit
 * compressed size and that many bytes (a size equal to the split's decoded size: stored as is).
 * A block is split into one stream per byte of the type, except the short last block, chunks
 * flagged "do not split", and (for chunks written before that flag) types wider than 16 bytes or
 * blocks of fewer than 128 elements: the rule c-blosc's decoder applies.
 */
#include "blosc_blocks.h"

#include <stdbool.h>
#include <string.h>

#include <lz4.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "internal/error.h"
#include "internal/format_util.h"
#include "internal/util.h"

#define HEADER 16
#define FORMAT_VERSION 2
#define LZ4_VERSION 1 /* the compressor format version c-blosc writes and accepts for lz4 */
#define FLAG_SHUFFLE 0x01
#define FLAG_MEMCPYED 0x02
#define FLAG_BITSHUFFLE 0x04
#define FLAG_RESERVED 0x08
#define FLAG_DONT_SPLIT 0x10
#define COMPRESSOR_LZ4 1 /* lz4 and lz4hc: the top three bits of the flags */
#define MAX_SPLITS 16
#define MIN_SPLIT_ELEMENTS 128
/* Larger blocks no longer stay in the cache while they are copied out: c-blosc decodes those
 * whole, without the unshuffle pass this adds. */
#define BLOCK_MAX ((size_t)1 << 20)

typedef struct chunk_layout {
    const uint8_t *in;
    size_t cbytes, nbytes, blocksize, nblocks, typesize;
    size_t first, last; /* the blocks to decode */
    uint8_t flags;
} chunk_layout;

/* Block k's decoded size: blocksize, or what is left for the last one. */
static size_t block_bytes(const chunk_layout *c, size_t k) {
    return k + 1 < c->nblocks ? c->blocksize : c->nbytes - k * c->blocksize;
}

/* How many streams c-blosc stored block k in. */
static size_t block_splits(const chunk_layout *c, size_t k) {
    size_t bytes = block_bytes(c, k);
    bool short_last = bytes != c->blocksize;
    bool split = !(c->flags & FLAG_DONT_SPLIT) && c->typesize <= MAX_SPLITS &&
                 bytes / c->typesize >= MIN_SPLIT_ELEMENTS && !short_last;
    return split ? c->typesize : 1;
}

/* Whether block k's splits lie inside the chunk after its block index, and divide it evenly. */
static bool block_in_place(const chunk_layout *c, size_t k) {
    size_t splits = block_splits(c, k), off = nds_load_le32(c->in + HEADER + 4 * k);
    if (block_bytes(c, k) % splits || off < HEADER + 4 * c->nblocks || off > c->cbytes)
        return false;
    for (size_t j = 0; j < splits; j++) {
        if (c->cbytes - off < 4) return false;
        size_t size = nds_load_le32(c->in + off);
        off += 4;
        if (size > c->cbytes - off) return false;
        off += size;
    }
    return true;
}

/* Reads the header and checks the places of the blocks holding bytes [begin, end) (of a chunk
 * decoding to out_len bytes); false for chunks this decoder leaves to c-blosc. */
static bool read_layout(const uint8_t *in, size_t len, size_t out_len, size_t begin, size_t end,
                        chunk_layout *c) {
    if (len < HEADER) return false;
    *c = (chunk_layout){.in = in,
                        .flags = in[2],
                        .typesize = in[3],
                        .nbytes = nds_load_le32(in + 4),
                        .blocksize = nds_load_le32(in + 8),
                        .cbytes = nds_load_le32(in + 12)};
    if (in[0] != FORMAT_VERSION || in[1] != LZ4_VERSION || c->flags >> 5 != COMPRESSOR_LZ4 ||
        (c->flags & (FLAG_MEMCPYED | FLAG_BITSHUFFLE | FLAG_RESERVED)) || c->typesize == 0 ||
        c->nbytes != out_len || c->nbytes == 0 || c->blocksize == 0 ||
        c->blocksize > c->nbytes || c->blocksize > BLOCK_MAX || c->cbytes > len)
        return false;
    c->nblocks = c->nbytes / c->blocksize + (c->nbytes % c->blocksize != 0);
    if (HEADER + 4 * c->nblocks > c->cbytes || begin >= end || end > c->nbytes) return false;
    c->first = begin / c->blocksize;
    c->last = (end - 1) / c->blocksize;
    for (size_t k = c->first; k <= c->last; k++)
        if (!block_in_place(c, k)) return false;
    return true;
}

/* Where a shuffled block's byte streams are: stream j (byte j of every element) at start[j],
 * count bytes long; the bytes past the block's whole elements at rest. */
typedef struct block_streams {
    const uint8_t *start[256];
    const uint8_t *rest;
    size_t count;
} block_streams;

/* ---- unshuffle ---- */

/* Elements [from, count) of any type, one byte at a time. */
static void unshuffle_tail(size_t typesize, const block_streams *bs, size_t from, uint8_t *dst) {
    for (size_t i = from; i < bs->count; i++)
        for (size_t j = 0; j < typesize; j++) dst[i * typesize + j] = bs->start[j][i];
}

#if defined(__SSE2__)
static __m128i load16(const uint8_t *p) { return _mm_loadu_si128((const __m128i *)p); }

/* 16 elements at a time: interleaving the streams' bytes, then pairs of them, then quads. */
static size_t unshuffle2(const block_streams *bs, uint8_t *dst) {
    size_t i = 0;
    for (; i + 16 <= bs->count; i += 16) {
        __m128i a = load16(bs->start[0] + i), b = load16(bs->start[1] + i);
        _mm_storeu_si128((__m128i *)(dst + 2 * i), _mm_unpacklo_epi8(a, b));
        _mm_storeu_si128((__m128i *)(dst + 2 * i + 16), _mm_unpackhi_epi8(a, b));
    }
    return i;
}

static size_t unshuffle4(const block_streams *bs, uint8_t *dst) {
    size_t i = 0;
    for (; i + 16 <= bs->count; i += 16) {
        __m128i s[4], p[4];
        for (int j = 0; j < 4; j++) s[j] = load16(bs->start[j] + i);
        p[0] = _mm_unpacklo_epi8(s[0], s[1]);
        p[1] = _mm_unpackhi_epi8(s[0], s[1]);
        p[2] = _mm_unpacklo_epi8(s[2], s[3]);
        p[3] = _mm_unpackhi_epi8(s[2], s[3]);
        __m128i *out = (__m128i *)(dst + 4 * i);
        _mm_storeu_si128(out, _mm_unpacklo_epi16(p[0], p[2]));
        _mm_storeu_si128(out + 1, _mm_unpackhi_epi16(p[0], p[2]));
        _mm_storeu_si128(out + 2, _mm_unpacklo_epi16(p[1], p[3]));
        _mm_storeu_si128(out + 3, _mm_unpackhi_epi16(p[1], p[3]));
    }
    return i;
}

static size_t unshuffle8(const block_streams *bs, uint8_t *dst) {
    size_t i = 0;
    for (; i + 16 <= bs->count; i += 16) {
        __m128i s[8], p[8], q[8];
        for (int j = 0; j < 8; j++) s[j] = load16(bs->start[j] + i);
        for (int j = 0; j < 4; j++) { /* bytes of streams 2j, 2j+1: elements 0-7, 8-15 */
            p[j] = _mm_unpacklo_epi8(s[2 * j], s[2 * j + 1]);
            p[j + 4] = _mm_unpackhi_epi8(s[2 * j], s[2 * j + 1]);
        }
        for (int h = 0; h < 2; h++) { /* quads of streams 0-3 and 4-7, for each half */
            q[4 * h] = _mm_unpacklo_epi16(p[4 * h], p[4 * h + 1]);
            q[4 * h + 1] = _mm_unpackhi_epi16(p[4 * h], p[4 * h + 1]);
            q[4 * h + 2] = _mm_unpacklo_epi16(p[4 * h + 2], p[4 * h + 3]);
            q[4 * h + 3] = _mm_unpackhi_epi16(p[4 * h + 2], p[4 * h + 3]);
        }
        __m128i *out = (__m128i *)(dst + 8 * i);
        for (int h = 0; h < 2; h++)
            for (int g = 0; g < 2; g++) {
                __m128i lo = q[4 * h + g], hi = q[4 * h + 2 + g];
                _mm_storeu_si128(out++, _mm_unpacklo_epi32(lo, hi));
                _mm_storeu_si128(out++, _mm_unpackhi_epi32(lo, hi));
            }
    }
    return i;
}
#endif

/* c-blosc's byte unshuffle of a block of n bytes: byte j of element i is stream j's byte i; the
 * bytes past the whole elements are copied as they are. */
static void unshuffle(size_t typesize, size_t n, const block_streams *bs, uint8_t *dst) {
    size_t done = 0;
#if defined(__SSE2__)
    if (typesize == 2) done = unshuffle2(bs, dst);
    if (typesize == 4) done = unshuffle4(bs, dst);
    if (typesize == 8) done = unshuffle8(bs, dst);
#endif
    unshuffle_tail(typesize, bs, done, dst);
    memcpy(dst + bs->count * typesize, bs->rest, n - bs->count * typesize);
}

/* ---- blocks ---- */

/* Decodes block k's splits one after the other into dst (block_in_place checked their places).
 * A split stored as is stays where it is when the block is shuffled (the unshuffle reads it
 * there: half the streams of noisy data are), and is copied into dst otherwise. */
static int decode_block(const chunk_layout *c, size_t k, bool shuffled, uint8_t *dst,
                        block_streams *bs) {
    size_t bytes = block_bytes(c, k), splits = block_splits(c, k), part = bytes / splits;
    size_t off = nds_load_le32(c->in + HEADER + 4 * k);
    for (size_t j = 0; j < splits; j++) {
        size_t size = nds_load_le32(c->in + off);
        const uint8_t *src = c->in + off + 4;
        off += 4 + size;
        bs->start[j] = dst + j * part;
        if (size == part && shuffled) {
            bs->start[j] = src;
        } else if (size == part) {
            memcpy(dst + j * part, src, part);
        } else {
            int got = LZ4_decompress_safe((const char *)src, (char *)dst + j * part, (int)size,
                                          (int)part);
            if (got != (int)part)
                return nds_err_cause(NDS_ECORRUPT, NDS_CAUSE_BLOSC, got,
                                     "blosc: corrupt chunk: stream %zu of block %zu (of %zu) "
                                     "does not decode to %zu bytes (lz4 returned %d)",
                                     j, k, c->nblocks, part, got);
        }
    }
    /* One stream per byte of the type, or one holding them all one after the other. */
    bs->count = bytes / c->typesize;
    for (size_t j = splits; j < c->typesize; j++) bs->start[j] = bs->start[0] + j * bs->count;
    bs->rest = bs->start[0] + (splits == 1 ? bs->count * c->typesize : 0);
    return 0;
}

/* Decodes every block of c: into its place in out when out is not NULL (shuffled blocks
 * unshuffled straight there, others decoded there), else into a block buffer handed to sink. */
static int decode_blocks(const chunk_layout *c, uint8_t *out, nds_piece_sink sink, void *arg) {
    bool shuffled = (c->flags & FLAG_SHUFFLE) && c->typesize > 1;
    /* The streams of a shuffled block, and the block itself when it has no place in out. */
    size_t buffers = (shuffled ? 1 : 0) + (out ? 0 : 1);
    uint8_t *buf = buffers ? nds_scratch(NDS_SCRATCH_BLOCKS, buffers * c->blocksize) : NULL;
    if (buffers && !buf) return NDS_ENOMEM;
    uint8_t *block = shuffled ? buf + c->blocksize : buf; /* when out is NULL */
    block_streams bs = {.count = 0};
    int rc = 0;
    for (size_t k = c->first; k <= c->last && !rc; k++) {
        size_t bytes = block_bytes(c, k);
        uint8_t *place = out ? out + k * c->blocksize : block;
        rc = decode_block(c, k, shuffled, shuffled ? buf : place, &bs);
        if (!rc && shuffled) unshuffle(c->typesize, bytes, &bs, place);
        if (!rc && !out) rc = sink(arg, k * c->blocksize, place, bytes);
    }
    return rc;
}

int nds_blosc_decode_blocks(const uint8_t *in, size_t len, size_t out_len, size_t align,
                            nds_piece_sink sink, void *arg) {
    chunk_layout c;
    if (!read_layout(in, len, out_len, 0, out_len, &c) || align == 0 || c.blocksize % align)
        return NDS_EUNSUPPORTED;
    return decode_blocks(&c, NULL, sink, arg);
}

int nds_blosc_decode_into(const uint8_t *in, size_t len, uint8_t *out, size_t out_len) {
    return nds_blosc_decode_range(in, len, out, out_len, 0, out_len);
}

int nds_blosc_decode_range(const uint8_t *in, size_t len, uint8_t *out, size_t out_len,
                           size_t begin, size_t end) {
    chunk_layout c;
    if (!read_layout(in, len, out_len, begin, end, &c)) return NDS_EUNSUPPORTED;
    return decode_blocks(&c, out, NULL, NULL);
}
