/* The zarr v3 codec pipeline: a "codecs" list parsed against the array it encodes (shape, data
 * type, fill value) into a chain of array-to-array codecs (transpose), one array-to-bytes codec
 * (bytes, or sharding_indexed with its own nested chains), and bytes-to-bytes codecs (gzip, zstd,
 * blosc, crc32c, numcodecs.*) run through the codec registry.
 *
 * A chain decodes stored bytes into the canonical form of its array (C order, host byte order)
 * and encodes it back. Private to formats/zarr3*.c. A chain is immutable once parsed: decode and
 * encode may run on many threads at once (per-call buffers only). Ownership: a chain owns its
 * codec instances and nested chains; nds_z3_chain_free frees them.
 */
#ifndef NDS_FORMATS_ZARR3_CODECS_H
#define NDS_FORMATS_ZARR3_CODECS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <json-c/json.h>

#include "ndstore/box.h"
#include "ndstore/dtype.h"
#include "ndstore/sys/buf.h"
#include "ndstore/sys/codec.h"
#include "ndstore/sys/format.h"

/** Largest canonical chunk (or shard, or inner chunk) a chain accepts: 2 GiB. */
#define NDS_Z3_MAX_CHUNK_BYTES (UINT64_C(1) << 31)
/** Most bytes-to-bytes codecs in one chain. */
#define NDS_Z3_MAX_BB 8
/** Deepest nesting of sharding_indexed codecs. */
#define NDS_Z3_MAX_DEPTH 4
/** Most inner chunks in one shard (the index is 16 bytes per inner chunk: 64 MiB at most). */
#define NDS_Z3_MAX_SHARD_CHUNKS (UINT64_C(1) << 22)

/** snprintf into the array buf, marking a truncated result with '~' (for messages and paths). */
#define NDS_Z3_PRINT(buf, ...)                                                                    \
    do {                                                                                          \
        if (snprintf(buf, sizeof buf, __VA_ARGS__) >= (int)sizeof buf) buf[sizeof buf - 2] = '~'; \
    } while (0)

/** The array a chain encodes. */
typedef struct nds_z3_array {
    size_t rank;
    uint64_t shape[NDS_MAX_RANK];
    nds_dtype dtype;
    size_t elem_size;                /**< bytes per element when the dtype does not say (the
                                      *   fixed-width strings); 0 = nds_dtype_size(dtype) */
    uint8_t fill[NDS_ELEM_MAX_SIZE]; /**< one element, host byte order */
} nds_z3_array;

/** Bytes per element of arr: its elem_size, else nds_dtype_size of its dtype. */
static inline size_t nds_z3_elem_size(const nds_z3_array *arr) {
    return arr->elem_size ? arr->elem_size : nds_dtype_size(arr->dtype);
}

typedef struct nds_z3_chain nds_z3_chain;
typedef struct nds_z3_shard nds_z3_shard;

/**
 * Parses a codecs list (a JSON array of {"name", "configuration"} objects or bare name strings)
 * for arr. doc names the document in messages ("zarr3: zarr.json of memory://x/"), where the
 * member ("codecs", "codecs[0].configuration.codecs"); depth is the sharding nesting (0 at top).
 * A list without an array-to-bytes codec gets an implicit {"name":"bytes","endian":"little"}, as
 * zarrita and zarr-python do.
 * @return 0; NDS_EFORMAT naming the bad member; NDS_EUNSUPPORTED naming an unknown codec;
 *         NDS_ELIMIT for sizes beyond the limits above
 */
int nds_z3_chain_parse(const json_object *codecs, const nds_z3_array *arr, const char *doc,
                       const char *where, int depth, nds_z3_chain **out);
/** Frees a chain. Accepts NULL. */
void nds_z3_chain_free(nds_z3_chain *c);
/** The array the chain encodes. */
const nds_z3_array *nds_z3_chain_array(const nds_z3_chain *c);

/** Decodes in[0..len) into out (the canonical bytes of the chain's array). Corrupt input: ECORRUPT. */
int nds_z3_chain_decode(const nds_z3_chain *c, const uint8_t *in, size_t len, uint8_t *out);
/** 1 when the chain is one bytes-to-bytes codec straight over the bytes of the canonical order
 *  (no transpose, no checksum over all): its decoded bytes [begin, end) are the chunk's, so a
 *  part, a reader and pieces go to that codec (nds_z3_chain_decode_request). */
int nds_z3_chain_decodes_parts(const nds_z3_chain *c);
/** What that codec does itself (codec.h NDS_DECODE_*) when nds_z3_chain_decodes_parts, else 0:
 *  the array's nds_array_meta.decode_caps. */
unsigned nds_z3_chain_decode_caps(const nds_z3_chain *c);
/** Decodes as rq asks (format.h decode_chunk) with the chain's one codec, the chunk's bytes put
 *  into the host's order. Only for a chain of nds_z3_chain_decodes_parts. */
int nds_z3_chain_decode_request(const nds_z3_chain *c, nds_decode_request *rq);
/** For a chain whose array-to-bytes codec is vlen-utf8 / vlen-bytes (data_type string / bytes):
 *  decodes the stored bytes through the codecs after it into out (replaced): the element list,
 *  which the core checks (format.h decode_vlen). */
int nds_z3_chain_decode_vlen(const nds_z3_chain *c, const uint8_t *in, size_t len, nds_buf *out);
/** Encodes an element list through the codecs after vlen-utf8 / vlen-bytes into out (replaced). */
int nds_z3_chain_encode_vlen(const nds_z3_chain *c, const uint8_t *list, size_t len,
                             nds_buf *out);
/** Encodes a canonical array into out (replacing its contents; out->len set). */
int nds_z3_chain_encode(const nds_z3_chain *c, const uint8_t *chunk, nds_buf *out);
/** The read-modify-write of a chunk that a write changes only inside u->changed (see
 *  nds_format.update_chunk), for a chain of sharding_indexed alone (nds_z3_shard_update); any
 *  other chain: NDS_EUNSUPPORTED (no message, merge not called). */
int nds_z3_chain_update(const nds_z3_chain *c, nds_update_request *u);

/** The normalised codecs list (every default written out) as a new JSON array. */
int nds_z3_chain_to_json(const nds_z3_chain *c, json_object **out);
/** The sharding codec when the chain is exactly [sharding_indexed], else NULL (borrowed). */
const nds_z3_shard *nds_z3_chain_shard(const nds_z3_chain *c);
/** 1 when encoded bytes are the canonical bytes themselves (bytes in host order, nothing else). */
int nds_z3_chain_is_identity(const nds_z3_chain *c);
/** 1 with *size set when the encoded size is fixed (bytes, transpose, crc32c only), else 0. */
int nds_z3_chain_fixed_size(const nds_z3_chain *c, uint64_t *size);
/** "bytes(endian=little) | zstd(checksum=false, level=1)" (nested for sharding) into buf. */
void nds_z3_chain_describe(const nds_z3_chain *c, char *buf, size_t cap);

/** Translates a numcodecs-style config ({"id":"zstd","level":3}, from a compact codec string)
 *  into a zarr v3 codec object for elements of elem_size bytes, as a new object. */
int nds_z3_codec_from_numcodecs(const json_object *config, size_t elem_size, const char *doc,
                                json_object **out);

/** Parses member name of obj, a JSON array of at most NDS_MAX_RANK integers each >= min (JSON
 *  integers only), into out[0..*n). dp prefixes messages. NDS_EFORMAT / NDS_ELIMIT naming it.
 *  (zarr3_json.c, below both its callers.) */
int nds_z3_u64_list(const json_object *obj, const char *name, uint64_t min, const char *dp,
                    uint64_t *out, size_t *n);


#endif
