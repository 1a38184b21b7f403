/* Strided N-d copies. Dimensions are first simplified: size-1 dimensions dropped, and a dimension
 * merged into the next-inner one when it is contiguous over it in both layouts; the innermost run,
 * when contiguous in both, becomes one memcpy. */
#include <pthread.h>
#include <string.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "internal/strided.h"
#include "ndstore/box.h"

typedef struct layout {
    size_t rank;
    uint64_t extent[NDS_MAX_RANK + 1];
    int64_t dst[NDS_MAX_RANK + 1];
    int64_t src[NDS_MAX_RANK + 1];
} layout;

static void simplify(layout *l, size_t rank, const uint64_t *extent, const int64_t *dst,
                     const int64_t *src) {
    l->rank = 0;
    for (size_t d = 0; d < rank; d++) {
        if (extent[d] == 1) continue;
        size_t r = l->rank;
        if (r > 0 && l->dst[r - 1] == dst[d] * (int64_t)extent[d] &&
            l->src[r - 1] == src[d] * (int64_t)extent[d]) {
            /* outer dimension r-1 steps exactly over all of d: merge */
            l->extent[r - 1] *= extent[d];
            l->dst[r - 1] = dst[d];
            l->src[r - 1] = src[d];
            continue;
        }
        l->extent[r] = extent[d];
        l->dst[r] = dst[d];
        l->src[r] = src[d];
        l->rank++;
    }
}

/* A contiguous run of n bytes. Runs of a chunk row (tens to hundreds of bytes) are copied in
 * fixed 32-byte steps the compiler turns into vector moves: a libc memcpy call per short row costs
 * more than the copy (measured: 3.0 GB/s through memcpy vs 4.7 GB/s here for 128-byte rows). Long
 * runs go to memcpy only when both ends are 64-byte aligned: glibc copies them with `rep movsb`,
 * which on this project's AMD machines runs at under half speed into a destination off a cache
 * line (4 KiB rows into a malloc'd buffer, 16 bytes into its page: 2.0 GB/s through memcpy, 4.9
 * here; aligned, both 5.0-5.4). */
static inline void copy_run(uint8_t *dst, const uint8_t *src, size_t n) {
    if (n < 32 || (n >= 512 && (((uintptr_t)dst | (uintptr_t)src) & 63) == 0)) {
        memcpy(dst, src, n);
        return;
    }
    size_t i = 0;
    for (; i + 32 <= n; i += 32) memcpy(dst + i, src + i, 32);
    if (i < n) memcpy(dst + n - 32, src + n - 32, 32); /* overlaps bytes already copied: same values */
}

#if defined(__SSE2__)
/* One 64-byte line to a line-aligned destination with non-temporal stores. */
static inline void stream_line(uint8_t *d, const uint8_t *s) {
    __m128i a = _mm_loadu_si128((const __m128i *)s);
    __m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
    __m128i e = _mm_loadu_si128((const __m128i *)(s + 48));
    _mm_stream_si128((__m128i *)d, a);
    _mm_stream_si128((__m128i *)(d + 16), b);
    _mm_stream_si128((__m128i *)(d + 32), c);
    _mm_stream_si128((__m128i *)(d + 48), e);
}

/* Non-temporal stores are weakly ordered: fenced before a copy returns, so that whoever learns of
 * its end (the pool's join) sees every byte. */
static void stream_fence(void) { _mm_sfence(); }
#else
static inline void stream_line(uint8_t *d, const uint8_t *s) { memcpy(d, s, 64); }
static void stream_fence(void) {}
#endif

/* A run copied with non-temporal stores for the whole cache lines it covers (its partial first
 * and last lines with ordinary ones: a partial line streamed costs a read of the line in memory).
 * Ordinary stores read each destination line into the cache before writing it; a destination
 * larger than the cache gains nothing from that and pays for it in memory bandwidth (measured on
 * this project's AMD VM: a blosc chunk's decode and copy into a 512 MiB array, 2 threads, 5.5 ->
 * 7.8 GB/s into a cache-line-aligned array, 4.9 -> 6.5 GB/s 16 bytes off one). */
static void stream_run(uint8_t *dst, const uint8_t *src, size_t n) {
    size_t head = (size_t)(-(uintptr_t)dst & 63);
    if (n < head + 64) {
        copy_run(dst, src, n);
        return;
    }
    copy_run(dst, src, head);
    size_t lines = (n - head) / 64;
    uint8_t *d = dst + head;
    const uint8_t *s = src + head;
    for (size_t i = 0; i < lines; i++, d += 64, s += 64) stream_line(d, s);
    copy_run(d, s, n - head - lines * 64);
}

static void run_copy(bool stream, uint8_t *dst, const uint8_t *src, size_t n) {
    if (stream)
        stream_run(dst, src, n);
    else
        copy_run(dst, src, n);
}

/* Element-wise copies specialised by size so the compiler emits plain loads and stores. */
#define COPY_TYPED(T)                                                                              \
    for (uint64_t i = 0; i < n; i++) {                                                             \
        T v;                                                                                       \
        memcpy(&v, src + (int64_t)i * ss, sizeof(T));                                              \
        memcpy(dst + (int64_t)i * ds, &v, sizeof(T));                                              \
    }

static void copy_inner(uint64_t n, size_t elem, uint8_t *dst, int64_t ds, const uint8_t *src,
                       int64_t ss, bool stream) {
    if (ds == (int64_t)elem && ss == (int64_t)elem) {
        if (stream)
            stream_run(dst, src, n * elem);
        else
            memcpy(dst, src, n * elem);
        return;
    }
    switch (elem) {
    case 1: COPY_TYPED(uint8_t) break;
    case 2: COPY_TYPED(uint16_t) break;
    case 4: COPY_TYPED(uint32_t) break;
    case 8: COPY_TYPED(uint64_t) break;
    default:
        for (uint64_t i = 0; i < n; i++) memcpy(dst + (int64_t)i * ds, src + (int64_t)i * ss, elem);
    }
}

/* The last two levels when the innermost is contiguous in both layouts: rows of bytes. */
static void copy_rows(const layout *l, size_t d, size_t row_bytes, uint8_t *dst, const uint8_t *src,
                      bool stream) {
    for (uint64_t i = 0; i < l->extent[d]; i++)
        run_copy(stream, dst + (int64_t)i * l->dst[d], src + (int64_t)i * l->src[d], row_bytes);
}

static void copy_level(const layout *l, size_t d, size_t elem, uint8_t *dst, const uint8_t *src,
                       bool stream) {
    size_t last = l->rank - 1;
    if (d == last) {
        copy_inner(l->extent[d], elem, dst, l->dst[d], src, l->src[d], stream);
        return;
    }
    if (d + 1 == last && l->dst[last] == (int64_t)elem && l->src[last] == (int64_t)elem) {
        copy_rows(l, d, l->extent[last] * elem, dst, src, stream);
        return;
    }
    for (uint64_t i = 0; i < l->extent[d]; i++)
        copy_level(l, d + 1, elem, dst + (int64_t)i * l->dst[d], src + (int64_t)i * l->src[d],
                   stream);
}

/* Simplifies the layout of a copy into *l; false when it copies nothing (an extent is 0). */
static bool copy_layout(layout *l, size_t rank, const uint64_t *extent, const int64_t *dst_stride,
                        const int64_t *src_stride) {
    for (size_t d = 0; d < rank; d++)
        if (extent[d] == 0) return false;
    simplify(l, rank, extent, dst_stride, src_stride);
    return true;
}

/* The copy of a simplified layout, with non-temporal stores when stream is set. */
static void copy_simplified(const layout *l, size_t elem, uint8_t *dst, const uint8_t *src,
                            bool stream) {
    if (l->rank == 0) {
        memcpy(dst, src, elem);
        return;
    }
    copy_level(l, 0, elem, dst, src, stream);
    if (stream) stream_fence();
}

void nds_strided_copy(size_t rank, const uint64_t *extent, size_t elem, uint8_t *dst,
                      const int64_t *dst_stride, const uint8_t *src, const int64_t *src_stride) {
    layout l;
    if (copy_layout(&l, rank, extent, dst_stride, src_stride))
        copy_simplified(&l, elem, dst, src, false);
}

void nds_strided_copy_streaming(size_t rank, const uint64_t *extent, size_t elem, uint8_t *dst,
                                const int64_t *dst_stride, const uint8_t *src,
                                const int64_t *src_stride) {
    layout l;
    if (copy_layout(&l, rank, extent, dst_stride, src_stride))
        copy_simplified(&l, elem, dst, src, true);
}

static size_t last_level_cache;
static pthread_once_t last_level_once = PTHREAD_ONCE_INIT;

/* The last-level cache's size (glibc asks the CPU; 32 MiB when it cannot tell). */
static void last_level_measure(void) {
    long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (llc <= 0) llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
    last_level_cache = llc > 0 ? (size_t)llc : (size_t)32 << 20;
}

size_t nds_stream_threshold(void) {
    pthread_once(&last_level_once, last_level_measure);
    return last_level_cache;
}

/* One outer index of nds_strided_copy_rows: row i of every piece, side by side. */
static void copy_piece_rows(size_t pieces, int64_t doff, int64_t soff, uint8_t *const *dst,
                            const uint8_t *const *src, const size_t *row_bytes, bool stream) {
    for (size_t j = 0; j < pieces; j++)
        run_copy(stream, dst[j] + doff, src[j] + soff, row_bytes[j]);
}

/* A cursor over the rows of pieces that follow each other in the destination: one row of bytes
 * made of several sources. */
typedef struct joined_row {
    const uint8_t *const *src;
    const size_t *len;
    int64_t soff;
    size_t piece, at; /* the next byte: piece's source row at offset at */
} joined_row;

/* Copies the next n bytes of the joined row to dst (ordinary stores). */
static void joined_take(joined_row *r, uint8_t *dst, size_t n) {
    while (n > 0) {
        size_t m = r->len[r->piece] - r->at;
        if (m > n) m = n;
        memcpy(dst, r->src[r->piece] + r->soff + r->at, m);
        dst += m;
        n -= m;
        if ((r->at += m) == r->len[r->piece]) r->piece++, r->at = 0;
    }
}

/* Row i of pieces that join up in the destination, streamed as one run of total bytes, so that
 * every whole cache line is streamed, also a line across two pieces. The row is put together on
 * the stack, a few lines at a time, and streamed from there. (Streamed piece by piece, rows of
 * 128 bytes 16 bytes off a line leave half the lines to ordinary stores: slower than not
 * streaming. A line across pieces put together alone and streamed at once stalls on the stores
 * just made: 5.7 GB/s against 20 for whole segments.) */
static void stream_joined_row(uint8_t *dst, const uint8_t *const *src, int64_t soff,
                              const size_t *row_bytes, size_t total) {
    enum { SEGMENT = 2048 };
    _Alignas(64) uint8_t seg[SEGMENT];
    joined_row r = {src, row_bytes, soff, 0, 0};
    for (size_t done = 0; done < total;) {
        size_t n = total - done;
        if (n > SEGMENT) /* end on a destination line, so only the row's ends are partial lines */
            n = SEGMENT - (size_t)((uintptr_t)(dst + done + SEGMENT) & 63);
        joined_take(&r, seg, n);
        stream_run(dst + done, seg, n);
        done += n;
    }
}

/* The bytes of one row of all pieces when each starts in dst where the previous ends; 0 when
 * they do not join up. */
static size_t joined_bytes(size_t pieces, uint8_t *const *dst, const size_t *row_bytes) {
    size_t total = 0;
    for (size_t j = 0; j < pieces; j++) {
        if (j > 0 && dst[j] != dst[j - 1] + row_bytes[j - 1]) return 0;
        total += row_bytes[j];
    }
    return total;
}

void nds_strided_copy_rows(const nds_strided_layout *outer, size_t pieces, uint8_t *const *dst,
                           const uint8_t *const *src, const size_t *row_bytes, bool stream) {
    size_t rank = outer->rank;
    const uint64_t *extent = outer->extent;
    const int64_t *dst_stride = outer->dst_stride, *src_stride = outer->src_stride;
    uint64_t idx[NDS_MAX_RANK] = {0};
    for (size_t d = 0; d < rank; d++)
        if (extent[d] == 0) return;
    int64_t doff = 0, soff = 0;
    size_t joined = stream ? joined_bytes(pieces, dst, row_bytes) : 0;
    for (;;) {
        if (joined)
            stream_joined_row(dst[0] + doff, src, soff, row_bytes, joined);
        else
            copy_piece_rows(pieces, doff, soff, dst, src, row_bytes, stream);
        size_t d = rank;
        while (d-- > 0) { /* odometer: the innermost outer index moves fastest */
            doff += dst_stride[d];
            soff += src_stride[d];
            if (++idx[d] < extent[d]) break;
            doff -= dst_stride[d] * (int64_t)extent[d];
            soff -= src_stride[d] * (int64_t)extent[d];
            idx[d] = 0;
        }
        if (d == (size_t)-1) break;
    }
    if (stream) stream_fence();
}

void nds_strided_fill(size_t rank, const uint64_t *extent, size_t elem, uint8_t *dst,
                      const int64_t *dst_stride, const uint8_t *value) {
    for (size_t d = 0; d < rank; d++)
        if (extent[d] == 0) return;
    /* A zero source stride in every dimension repeats value. */
    int64_t zero[NDS_MAX_RANK] = {0};
    layout l;
    simplify(&l, rank, extent, dst_stride, zero);
    if (l.rank == 0) {
        memcpy(dst, value, elem);
        return;
    }
    copy_level(&l, 0, elem, dst, value, false);
}

void nds_c_strides(size_t rank, const uint64_t *shape, size_t elem, int64_t *stride) {
    int64_t s = (int64_t)elem;
    for (size_t d = rank; d-- > 0;) {
        stride[d] = s;
        s *= (int64_t)shape[d];
    }
}

void nds_f_strides(size_t rank, const uint64_t *shape, size_t elem, int64_t *stride) {
    int64_t s = (int64_t)elem;
    for (size_t d = 0; d < rank; d++) {
        stride[d] = s;
        s *= (int64_t)shape[d];
    }
}
