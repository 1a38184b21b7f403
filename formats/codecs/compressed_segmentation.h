/* Neuroglancer's compressed_segmentation encoding of uint32 / uint64 label volumes (multi-channel
 * form, as the precomputed format stores it): per channel a grid of blocks, each a lookup table of
 * the distinct labels plus 0..32-bit indices into it.
 *
 * Private to formats/ (used by formats/precomputed.c and the fuzz harness). Reentrant: no state.
 */
#ifndef NDS_FORMATS_COMPRESSED_SEGMENTATION_H
#define NDS_FORMATS_COMPRESSED_SEGMENTATION_H

#include <stddef.h>
#include <stdint.h>

#include "ndstore/sys/buf.h"

/**
 * Encodes nchan channels of a vol[0] x vol[1] x vol[2] (x, y, z) volume of elem-byte labels (4 or
 * 8, host byte order) read from in with element strides stride[0..2] (x, y, z) and stride[3]
 * (channel), with blocks of block[0..2]. Appends to out (which may hold bytes already: offsets are
 * relative to where this call starts). The output is byte-identical to neuroglancer's and
 * TensorStore's encoders: channel offset table, then per channel the block headers followed, block
 * by block in x-fastest order, by the packed indices and (unless an identical one was already
 * written for this channel) the lookup table.
 * @return 0; NDS_EINVAL for a bad elem / zero block; NDS_ELIMIT when a lookup table offset would
 * not fit the format's 24 bits; NDS_ENOMEM
 */
int nds_cseg_encode(const void *in, size_t elem, const uint64_t vol[3], const int64_t stride[4],
                    size_t nchan, const uint64_t block[3], nds_buf *out);

/** A volume in memory as nds_cseg_decode writes it (all borrowed for the call). */
typedef struct nds_cseg_volume {
    size_t elem;            /**< bytes per label: 4 or 8 */
    const uint64_t *vol;    /**< its extent in x, y, z (3 entries) */
    size_t nchan;           /**< channels */
    const uint64_t *block;  /**< the encoding's block shape (3 entries) */
    const int64_t *stride;  /**< element strides for x, y, z, channel (4 entries) */
} nds_cseg_volume;

/**
 * Decodes data[0..len) (the whole encoded chunk) into out, writing only the v->vol[0] x vol[1] x
 * vol[2] x nchan elements at element strides v->stride[0..3] (x, y, z, channel), in host byte
 * order.
 * Every offset, bit width and table index is checked against len: corrupt or truncated input is
 * NDS_ECORRUPT with a message ("compressed_segmentation: ..."), never a read outside data.
 */
int nds_cseg_decode(const uint8_t *data, size_t len, const nds_cseg_volume *v, void *out);

#endif
