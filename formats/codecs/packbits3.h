/* The zarr v3 "packbits" array-to-bytes codec (zarr-extensions codecs/packbits): each element's
 * bits first_bit..last_bit (of each component: complex types have two) packed into one bit
 * sequence, element after element, with optionally one byte recording the padding bit count.
 *
 * Bit order (docs/codecs.md says why): bit j of the sequence is bit j % 8 (least significant
 * first) of byte j / 8, and an element's bits enter the sequence from its least significant bit;
 * a component wider than a byte is read as its little-endian value (as the "bytes" codec).
 *
 * Private to formats/. A parsed codec is a plain value: encode and decode may run on any thread.
 */
#ifndef NDS_FORMATS_PACKBITS3_H
#define NDS_FORMATS_PACKBITS3_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "ndstore/dtype.h"

typedef enum { NDS_PB_PAD_NONE, NDS_PB_PAD_FIRST, NDS_PB_PAD_LAST } nds_pb_padding;

typedef struct nds_packbits3 {
    nds_dtype dtype;
    nds_pb_padding padding;
    unsigned first_bit, last_bit; /* per component, 0 .. component bits - 1 */
    unsigned comp_bits;           /* N: value bits of one component */
    unsigned comp_bytes;          /* bytes of one component in memory */
    unsigned ncomp;               /* 2 for complex types, else 1 */
    int first_given, last_given;  /* written back into the configuration only when given */
} nds_packbits3;

/** Parses configuration cfg (NULL: all defaults) for elements of type t. NDS_EFORMAT naming dp
 *  and the member for a bad member; NDS_EUNSUPPORTED naming the type for one the codec does not
 *  list (docs/codecs.md). */
int nds_packbits3_parse(const json_object *cfg, nds_dtype t, const char *dp, nds_packbits3 *out);
/** Encoded size of n elements (the packed bits rounded up to bytes, plus the padding byte). */
uint64_t nds_packbits3_encoded_size(const nds_packbits3 *p, uint64_t n);
/** Packs n elements in[0 .. n * element size) into out[0 .. nds_packbits3_encoded_size). */
void nds_packbits3_encode(const nds_packbits3 *p, const uint8_t *in, size_t n, uint8_t *out);
/** Unpacks in[0..len) into n elements. A length other than the encoded size, a padding byte
 *  other than the padding, or padding bits that are not zero: NDS_ECORRUPT saying which. */
int nds_packbits3_decode(const nds_packbits3 *p, const uint8_t *in, size_t len, size_t n,
                         uint8_t *out);
/** The normalised configuration object (new reference), NULL when out of memory. */
json_object *nds_packbits3_config_json(const nds_packbits3 *p);

#endif
