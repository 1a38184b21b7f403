/* Variable-length element lists as the vlen-utf8 / vlen-bytes codecs store a chunk (zarr v3
 * registry, zarr-extensions codecs/vlen-*; numcodecs VLenUTF8 / VLenBytes for zarr v2 object
 * arrays): a u32 little-endian element count, then per element, in C order, a u32 little-endian
 * byte length and the bytes. In memory a list is offsets (count + 1 entries, offsets[0] = 0,
 * non-decreasing) into one byte buffer, the form nds_array_read_vlen will fill (docs/internals/
 * strings.md). Reentrant; no shared state.
 */
#ifndef NDS_FORMATS_CODECS_VLEN_H
#define NDS_FORMATS_CODECS_VLEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ndstore/sys/buf.h"

/** A decoded chunk: element i is data[offsets[i] .. offsets[i + 1]). Owned (nds_vlen_list_dispose). */
typedef struct nds_vlen_list {
    uint64_t count;    /**< elements */
    uint64_t *offsets; /**< count + 1 entries, malloc'd */
    uint8_t *data;     /**< offsets[count] bytes, malloc'd (never NULL after a decode) */
} nds_vlen_list;

/**
 * Decodes a stored chunk of expected elements. utf8: every element must be valid UTF-8 (vlen-utf8).
 * Nothing is allocated before it is checked against the bytes present: a count above what len can
 * hold, a length past the end, bytes after the last element, a count other than expected are
 * NDS_ECORRUPT saying which (the caller adds the chunk), never a read past in[len).
 * @return 0 (out filled), NDS_ECORRUPT, NDS_ENOMEM; out is zeroed on error.
 */
int nds_vlen_decode(const uint8_t *in, size_t len, uint64_t expected, bool utf8, nds_vlen_list *out);
/**
 * Encodes count elements (offsets: count + 1 entries into data) into out (appended). utf8: refuses
 * an element that is not valid UTF-8 (NDS_EINVAL naming it). An element or a count beyond 2^32-1,
 * or offsets that decrease, are NDS_EINVAL.
 * @return 0, NDS_EINVAL, NDS_ENOMEM
 */
int nds_vlen_encode(const uint64_t *offsets, const uint8_t *data, uint64_t count, bool utf8,
                    nds_buf *out);
/** Frees a list and zeroes it. Accepts a zeroed list. */
void nds_vlen_list_dispose(nds_vlen_list *l);

#endif
