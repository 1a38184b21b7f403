/* Strided N-d copies that collapse contiguous runs into memcpy. */
#ifndef NDS_INTERNAL_STRIDED_H
#define NDS_INTERNAL_STRIDED_H

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
/** Fills an N-d strided block with one element value (elem bytes). */
void nds_strided_fill(size_t rank, const uint64_t *extent, size_t elem, uint8_t *dst,
                      const int64_t *dst_stride, const uint8_t *value);
/** C-order byte strides of a dense array of shape (rank entries) with elem-byte elements. */
void nds_c_strides(size_t rank, const uint64_t *shape, size_t elem, int64_t *stride);
/** Fortran-order (first dimension fastest) byte strides. */
void nds_f_strides(size_t rank, const uint64_t *shape, size_t elem, int64_t *stride);

#endif
