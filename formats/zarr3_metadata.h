/* zarr v3 metadata (zarr.json): strict parsing of array documents into a typed struct with its
 * codec chain, building the document to create from a TensorStore-style spec ("metadata" and
 * "schema"), checking an existing array against a spec, fill values in JSON, and printing.
 *
 * Private to formats/zarr3*.c. All functions are reentrant; a nds_zarr3_meta is owned by its
 * caller and immutable once parsed.
 */
#ifndef NDS_FORMATS_ZARR3_METADATA_H
#define NDS_FORMATS_ZARR3_METADATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

#include "zarr3_codecs.h"
#include "ndstore/box.h"
#include "ndstore/dtype.h"
#include "ndstore/sys/buf.h"

/** The parsed array zarr.json. */
typedef struct nds_zarr3_meta {
    size_t rank;                      /**< dimensions (0 allowed) */
    uint64_t shape[NDS_MAX_RANK];     /**< "shape" */
    uint64_t chunks[NDS_MAX_RANK];    /**< "chunk_grid" regular chunk_shape (each >= 1) */
    nds_dtype dtype;                  /**< "data_type" */
    char time_unit[8];                /**< datetime64/timedelta64: NumPy unit ("ns"; "us" for "μs") */
    uint32_t time_scale;              /**< datetime64/timedelta64: "scale_factor" (>= 1) */
    size_t itemsize; /**< fixed_length_utf32 / null_terminated_bytes: "length_bytes"; else 0 */
    uint8_t fill[NDS_ELEM_MAX_SIZE]; /**< "fill_value", host byte order (string / bytes: the
                                        * form of format.h, a uint32 length and the bytes) */
    bool v2_keys;                     /**< "chunk_key_encoding" is "v2" (else "default") */
    char separator;                   /**< its separator, '/' or '.' */
    nds_z3_chain *chain;              /**< "codecs" for one chunk, owned */
} nds_zarr3_meta;

/** What a zarr.json is: "array", "group", or NULL when it says neither (or is not an object). */
const char *nds_zarr3_node_type(const json_object *doc);

/**
 * Parses an array zarr.json strictly: every required member (zarr_format 3, node_type "array",
 * shape, data_type, chunk_grid, chunk_key_encoding, fill_value, codecs) present and valid;
 * attributes, dimension_names and an empty storage_transformers accepted; any other member must
 * be an object with "must_understand": false (then ignored). doc names the document in messages.
 * @return 0; NDS_EFORMAT naming the member; NDS_EUNSUPPORTED naming an unsupported data type,
 *         chunk grid, key encoding, codec or extension; NDS_ELIMIT. On error m needs no dispose.
 */
int nds_zarr3_meta_parse(const json_object *doc_json, const char *doc, nds_zarr3_meta *m);
/** Frees the chain. Accepts a zeroed struct. */
void nds_zarr3_meta_dispose(nds_zarr3_meta *m);

/** Parses a fill value of dtype (numbers, booleans, "NaN", "Infinity", "-Infinity", "0x..." bit
 *  patterns, [re, im] pairs whose parts may be any of those). */
int nds_zarr3_fill_parse(nds_dtype dtype, const json_object *v, const char *doc, uint8_t *out);
/** A fill value as zarr v3 JSON: shortest round-tripping numbers, "NaN" for the canonical NaN and
 *  "0x..." for any other NaN payload, "Infinity", "-Infinity", [re, im] for complex. */
json_object *nds_zarr3_fill_json(nds_dtype dtype, const uint8_t *fill);

/**
 * Collects what a spec asks for into a new object *out: members of spec "metadata" (zarr.json
 * members, a whole zarr.json included), then "schema" (dtype, domain.shape, domain.labels,
 * chunk_layout chunk / write_chunk / read_chunk shapes, fill_value, codec) and a top-level
 * "dtype" where "metadata" says nothing. Chunk layout and compact codec strings are kept under
 * private keys for nds_zarr3_request_complete.
 * @return 0, or NDS_EINVAL / NDS_EUNSUPPORTED naming the bad spec member
 */
int nds_zarr3_request_from_spec(const json_object *spec, const char *where, json_object **out);
/**
 * Builds the whole, normalised zarr.json to create from a request: shape and data_type required;
 * chunk grid from "chunk_grid" or the schema's chunk layout (a read chunk differing from the write
 * chunk makes a sharded array: write chunk = shard, read chunk = inner chunk) or about 1 MiB
 * chunks; codecs from "codecs" or bytes + the schema codec (default zstd level 1), wrapped in
 * sharding_indexed (index: bytes little + crc32c, at the end) when sharded; fill_value 0; key
 * encoding "default" with "/". The result is validated with nds_zarr3_meta_parse.
 * @return 0 with *out a new object; NDS_EINVAL naming what is missing; or a parse error
 */
int nds_zarr3_request_complete(const json_object *req, const char *where, json_object **out);
/**
 * Checks every member of a request against a stored array (m parsed from doc_json).
 * @return 0, or NDS_EMISMATCH naming the first member that differs
 */
int nds_zarr3_meta_check(const nds_zarr3_meta *m, const json_object *doc_json,
                         const json_object *req, const char *where);


#endif
