/* Strided N-d copies. Dimensions are first simplified: size-1 dimensions dropped, and a dimension
 * merged into the next-inner one when it is contiguous over it in both layouts; the innermost run,
 * when contiguous in both, becomes one memcpy. */
#include <string.h>

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

/* Element-wise copies specialised by size so the compiler emits plain loads and stores. */
#define COPY_TYPED(T)                                                                              \
    for (uint64_t i = 0; i < n; i++) {                                                             \
        T v;                                                                                       \
        memcpy(&v, src + (int64_t)i * ss, sizeof(T));                                              \
        memcpy(dst + (int64_t)i * ds, &v, sizeof(T));                                              \
    }

static void copy_inner(uint64_t n, size_t elem, uint8_t *dst, int64_t ds, const uint8_t *src,
                       int64_t ss) {
    if (ds == (int64_t)elem && ss == (int64_t)elem) {
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

/* The last two levels when the innermost is contiguous in both layouts: rows of bytes. */
static void copy_rows(const layout *l, size_t d, size_t row_bytes, uint8_t *dst, const uint8_t *src) {
    for (uint64_t i = 0; i < l->extent[d]; i++)
        copy_run(dst + (int64_t)i * l->dst[d], src + (int64_t)i * l->src[d], row_bytes);
}

static void copy_level(const layout *l, size_t d, size_t elem, uint8_t *dst, const uint8_t *src) {
    size_t last = l->rank - 1;
    if (d == last) {
        copy_inner(l->extent[d], elem, dst, l->dst[d], src, l->src[d]);
        return;
    }
    if (d + 1 == last && l->dst[last] == (int64_t)elem && l->src[last] == (int64_t)elem) {
        copy_rows(l, d, l->extent[last] * elem, dst, src);
        return;
    }
    for (uint64_t i = 0; i < l->extent[d]; i++)
        copy_level(l, d + 1, elem, dst + (int64_t)i * l->dst[d], src + (int64_t)i * l->src[d]);
}

void nds_strided_copy(size_t rank, const uint64_t *extent, size_t elem, uint8_t *dst,
                      const int64_t *dst_stride, const uint8_t *src, const int64_t *src_stride) {
    for (size_t d = 0; d < rank; d++)
        if (extent[d] == 0) return;
    layout l;
    simplify(&l, rank, extent, dst_stride, src_stride);
    if (l.rank == 0) {
        memcpy(dst, src, elem);
        return;
    }
    copy_level(&l, 0, elem, dst, src);
}

/* One outer index of nds_strided_copy_rows: row i of every piece, side by side. */
static void copy_piece_rows(size_t pieces, int64_t doff, int64_t soff, uint8_t *const *dst,
                            const uint8_t *const *src, const size_t *row_bytes) {
    for (size_t j = 0; j < pieces; j++) copy_run(dst[j] + doff, src[j] + soff, row_bytes[j]);
}

void nds_strided_copy_rows(size_t rank, const uint64_t *extent, const int64_t *dst_stride,
                           const int64_t *src_stride, size_t pieces, uint8_t *const *dst,
                           const uint8_t *const *src, const size_t *row_bytes) {
    uint64_t idx[NDS_MAX_RANK] = {0};
    for (size_t d = 0; d < rank; d++)
        if (extent[d] == 0) return;
    int64_t doff = 0, soff = 0;
    for (;;) {
        copy_piece_rows(pieces, doff, soff, dst, src, row_bytes);
        size_t d = rank;
        while (d-- > 0) { /* odometer: the innermost outer index moves fastest */
            doff += dst_stride[d];
            soff += src_stride[d];
            if (++idx[d] < extent[d]) break;
            doff -= dst_stride[d] * (int64_t)extent[d];
            soff -= src_stride[d] * (int64_t)extent[d];
            idx[d] = 0;
        }
        if (d == (size_t)-1) return;
    }
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
    copy_level(&l, 0, elem, dst, value);
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
