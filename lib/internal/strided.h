/* Strided N-d copies that collapse contiguous runs into memcpy. */
#ifndef NDS_INTERNAL_STRIDED_H
#define NDS_INTERNAL_STRIDED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/**
 * Copies an N-d block of extent[0..rank) elements of elem bytes from src to dst, where moving one
 * index in dimension d moves src_stride[d] / dst_stride[d] bytes. Dimensions that are contiguous in
 * both are merged, so a block contiguous in both layouts is a single memcpy. rank 0 copies one
 * element.
 */
void nds_strided_copy(size_t rank, const uint64_t *extent, size_t elem, uint8_t *dst,
                      const int64_t *dst_stride, const uint8_t *src, const int64_t *src_stride);
/**
 * nds_strided_copy with non-temporal stores (x86-64; ordinary stores elsewhere) for the whole
 * cache lines of each run: for a destination too large to stay in the cache (see
 * nds_stream_threshold), whose lines ordinary stores would first read from memory. Nothing of
 * the destination is left in the cache. Every store is visible to other threads on return.
 */
void nds_strided_copy_streaming(size_t rank, const uint64_t *extent, size_t elem, uint8_t *dst,
                                const int64_t *dst_stride, const uint8_t *src,
                                const int64_t *src_stride);
/** The destination size in bytes from which streaming copies pay: the last-level cache's size. */
size_t nds_stream_threshold(void);
/** The layout of an N-d block in a destination and a source: extent[0..rank) indices, one index of
 *  dimension d moving dst_stride[d] bytes in the destination and src_stride[d] in the source. */
typedef struct nds_strided_layout {
    size_t rank;
    const uint64_t *extent;
    const int64_t *dst_stride;
    const int64_t *src_stride;
} nds_strided_layout;
/**
 * Copies several pieces that share one layout of rows: for every index of the outer dimensions
 * (outer, its strides common to all pieces), the row of row_bytes[j] contiguous bytes of piece j,
 * from src[j] + offset to dst[j] + offset, for j in 0..pieces-1 before the next index. Pieces side
 * by side in dst (the chunks along the last dimension of an array) are then written one whole
 * destination row at a time, which the memory system takes about twice as fast as one piece after
 * the other when rows are short. outer->rank 0 copies one row of each piece. stream: non-temporal stores, as nds_strided_copy_streaming.
 */
void nds_strided_copy_rows(const nds_strided_layout *outer, size_t pieces, uint8_t *const *dst,
                           const uint8_t *const *src, const size_t *row_bytes, bool stream);
/** Fills an N-d strided block with one element value (elem bytes). */
void nds_strided_fill(size_t rank, const uint64_t *extent, size_t elem, uint8_t *dst,
                      const int64_t *dst_stride, const uint8_t *value);
/** C-order byte strides of a dense array of shape (rank entries) with elem-byte elements. */
void nds_c_strides(size_t rank, const uint64_t *shape, size_t elem, int64_t *stride);
/** Fortran-order (first dimension fastest) byte strides. */
void nds_f_strides(size_t rank, const uint64_t *shape, size_t elem, int64_t *stride);

#endif
