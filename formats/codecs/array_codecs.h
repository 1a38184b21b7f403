/* Array codecs shared by zarr v2 "filters" and zarr v3 array-to-array codecs: numcodecs' Delta,
 * FixedScaleOffset, Quantize, BitRound, PackBits and AsType over typed buffers, plus the
 * bytes-level numcodecs filters of the codec registry (shuffle, adler32, fletcher32, and any other
 * registry codec) as stages of the same chain.
 *
 * A chain is built for a fixed decoded size (one chunk), so every stage's input and output size is
 * known when it is parsed; decoding checks each size and reports NDS_ECORRUPT naming the stage.
 * Element types are NumPy typestrings ("<i2", "|u1", ">f8"); in zarr v3 (in-memory arrays) the
 * byte order is the host's.
 *
 * Private to formats/. A chain is immutable once built: encode and decode may run on many threads
 * at once (per-call buffers). Ownership: the chain owns its stages; nds_filter_chain_free.
 */
#ifndef NDS_FORMATS_ARRAY_CODECS_H
#define NDS_FORMATS_ARRAY_CODECS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "ndstore/dtype.h"
#include "ndstore/sys/buf.h"

/** A NumPy element type: kind 'b' (bool), 'i', 'u' or 'f'; size in bytes; stored byte order. */
typedef struct nds_np_dtype {
    char kind;
    uint8_t size;
    bool big; /**< big-endian (false for 1-byte types) */
} nds_np_dtype;

/** Parses a typestring ("<f8", "|u1", "i2", "float32"): 0 or NDS_EFORMAT naming doc/member. */
int nds_np_dtype_parse(const char *s, const char *doc, const char *member, nds_np_dtype *out);
/** The ndstore type of t (host byte order assumed by the caller), or NDS_DTYPE_INVALID. */
nds_dtype nds_np_dtype_to_nds(nds_np_dtype t);
/** t for an ndstore type in the given byte order; false for types NumPy kinds here do not cover. */
bool nds_np_dtype_of(nds_dtype d, bool big, nds_np_dtype *t);

typedef struct nds_filter_chain nds_filter_chain;

/**
 * Builds a chain from a list of numcodecs configs ({"id": ..., ...}, applied in order on encode)
 * for a decoded buffer of nbytes bytes whose elements are `in` (the array's stored type). doc
 * names the document, where the member ("filters"). host_order: every typestring of the configs
 * means the host's byte order (zarr v3 arrays in memory). Unknown ids: NDS_EUNSUPPORTED naming the
 * id; bad configs: NDS_EFORMAT naming the member.
 */
int nds_filter_chain_parse(const json_object *list, nds_np_dtype in, size_t nbytes, bool host_order,
                           const char *doc, const char *where, nds_filter_chain **out);
void nds_filter_chain_free(nds_filter_chain *c);
/** Whether a numcodecs id can be a stage (the config is checked by nds_filter_chain_parse). */
bool nds_filter_id_supported(const char *id);
/** Bytes the chain's encode produces (the input of the compressor). */
size_t nds_filter_chain_encoded_size(const nds_filter_chain *c);
/** The element type after the last stage (what a zarr v3 bytes codec sees). */
nds_np_dtype nds_filter_chain_encoded_dtype(const nds_filter_chain *c);
/** Encodes in[0..nbytes) into out (replaced). */
int nds_filter_chain_encode(const nds_filter_chain *c, const uint8_t *in, nds_buf *out);
/** Decodes in[0..len) (len must be the encoded size) into out[0..nbytes). NDS_ECORRUPT naming
 *  the stage on a size or checksum mismatch. */
int nds_filter_chain_decode(const nds_filter_chain *c, const uint8_t *in, size_t len, uint8_t *out);

#endif
