/* N5 metadata (attributes.json): strict parsing of a dataset's members into a typed struct, the
 * translation of N5 "compression" objects to ndstore codec configurations and back, building the
 * document to create from a TensorStore-style spec ("metadata" and "schema"), and checking an
 * existing dataset against a spec.
 *
 * Private to formats/n5*.c. All functions are reentrant; a nds_n5_meta is owned by its caller and
 * is immutable once parsed.
 */
#ifndef NDS_FORMATS_N5_METADATA_H
#define NDS_FORMATS_N5_METADATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

#include "ndstore/box.h"
#include "ndstore/dtype.h"

/** Largest block N5 allows (the specification's 2^31 bytes). */
#define NDS_N5_MAX_BLOCK_BYTES (UINT64_C(1) << 31)
/** The "n5" version ndstore writes (what zarr-python writes; every N5 reader accepts it). */
#define NDS_N5_VERSION "2.0.0"

/** The parsed dataset members of an attributes.json. */
typedef struct nds_n5_meta {
    size_t rank;                  /**< number of dimensions, 1 to NDS_MAX_RANK */
    uint64_t shape[NDS_MAX_RANK]; /**< "dimensions", in attributes.json order */
    uint64_t block[NDS_MAX_RANK]; /**< "blockSize", each 1 to INT32_MAX */
    nds_dtype dtype;              /**< "dataType" */
    size_t itemsize;              /**< bytes per element */
    size_t block_nbytes;          /**< bytes of a full block, <= NDS_N5_MAX_BLOCK_BYTES */
    json_object *compression;     /**< owned: "compression" normalised (every member, defaults in) */
    json_object *codec_config;    /**< owned: the ndstore codec config, NULL for "raw" */
    nds_unit units[NDS_MAX_RANK]; /**< "resolution" + "units" (TensorStore, BigDataViewer) or
                                       "pixelResolution" {"dimensions", "unit"}; size 0: none */
} nds_n5_meta;

/** 1 when doc (an attributes.json object) describes a dataset ("dimensions" or "dataType"). */
bool nds_n5_is_dataset(const json_object *doc);
/** 1 when key is a member N5 reserves (dimensions, blockSize, dataType, compression,
 *  compressionType, n5): not a user attribute. */
bool nds_n5_is_reserved(const char *key);

/**
 * Parses the dataset members of an attributes.json object into m. Other members are attributes
 * and are not looked at. doc names the document in messages ("n5: attributes.json of <url>").
 * @return 0; NDS_EFORMAT naming the member; NDS_EUNSUPPORTED for data types, compressions or a
 * rank ndstore does not implement (naming them); NDS_ELIMIT for a rank above 32, a block above
 * 2^31 bytes or a shape above 2^64 elements. On error m holds nothing that needs disposing.
 */
int nds_n5_meta_parse(const json_object *doc_json, const char *doc, nds_n5_meta *m);
/** Drops the owned objects. Accepts a zeroed struct. */
void nds_n5_meta_dispose(nds_n5_meta *m);

/**
 * Parses an N5 "compression" object. strict (for specs) refuses members the type does not have;
 * otherwise (for stored documents) they are ignored. *norm receives the normalised N5 object
 * (type first, every parameter with its default filled in) and *config the ndstore codec
 * configuration (NULL for raw); either out pointer may be NULL.
 * @return 0, NDS_EFORMAT naming the bad member, or NDS_EUNSUPPORTED for an unknown or
 * unimplemented type (lz4)
 */
int nds_n5_compression_parse(const json_object *c, bool strict, const char *doc,
                             json_object **norm, json_object **config);

/**
 * Collects what a spec asks for as a partial attributes.json in *out (new object, maybe empty):
 * the members of spec "metadata" (N5 names; members other than the dataset's are attributes to
 * store), then what "schema" gives (dtype, domain.shape, chunk_layout chunk shape, fill_value,
 * codec) where "metadata" has none, then a top-level "dtype".
 * @return 0, or NDS_EINVAL / NDS_EUNSUPPORTED naming the bad spec member
 */
int nds_n5_request_from_spec(const json_object *spec, const char *where, json_object **out);
/**
 * Builds the whole attributes.json to create from a request, into *out (new object): members in
 * the order dimensions, blockSize, dataType, compression, n5, then the request's attributes.
 * Defaults: blockSize about 1 MiB per block, compression gzip level 1, n5 NDS_N5_VERSION. The
 * compression is written normalised. "dimensions" and "dataType" are required.
 * @return 0, NDS_EINVAL naming what is missing, or the parse error of a bad member
 */
int nds_n5_request_complete(const json_object *req, const char *where, json_object **out);
/**
 * Checks every member of a request against a stored dataset (parsed as m, document doc).
 * @return 0; NDS_EMISMATCH naming the first member that differs; or a parse error of the request
 */
int nds_n5_meta_check(const nds_n5_meta *m, const json_object *doc, const json_object *req,
                      const char *where);

#endif
