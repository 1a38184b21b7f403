/* zarr v2 metadata (.zarray): strict parsing into a typed struct, building the document to create
 * from a TensorStore-style spec ("metadata" and "schema"), checking an existing array against a
 * spec, and printing JSON the way zarr-python does (indent 4, sorted keys, ASCII only, Python float
 * repr).
 *
 * Private to formats/zarr2*.c. All functions are reentrant; a nds_zarr2_meta is owned by its caller
 * and is immutable once parsed (one thread at a time while it is being parsed).
 */
#ifndef NDS_FORMATS_ZARR2_METADATA_H
#define NDS_FORMATS_ZARR2_METADATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

#include "ndstore/box.h"
#include "ndstore/dtype.h"
#include "ndstore/sys/buf.h"

/** Largest decoded chunk we accept: 2 GiB. */
#define NDS_ZARR2_MAX_CHUNK_BYTES (UINT64_C(1) << 31)

/** The parsed .zarray. */
typedef struct nds_zarr2_meta {
    size_t rank;                      /**< number of dimensions (0 allowed) */
    uint64_t shape[NDS_MAX_RANK];     /**< "shape" */
    uint64_t chunks[NDS_MAX_RANK];    /**< "chunks", each >= 1 */
    nds_dtype dtype;                  /**< element type from "dtype" */
    char byte_order;                  /**< stored byte order: '<', '>' or '|' (1-byte types) */
    char time_unit[16]; /**< datetime64/timedelta64 ("<M8[ns]"): the bracketed unit, "ns", "10s" */
    size_t itemsize;                  /**< bytes per element ("|S12": 12, "<U3": 12) */
    bool fortran;                     /**< "order" is "F" */
    char separator;                   /**< "dimension_separator": '.' or '/' */
    bool fill_null;                   /**< "fill_value" is null (reads as zero) */
    uint8_t fill[NDS_ELEM_MAX_SIZE]; /**< fill value, host byte order (zero when null) */
    json_object *compressor; /**< owned reference to the "compressor" config, NULL for null */
    size_t chunk_nbytes;     /**< product of chunks x itemsize, <= NDS_ZARR2_MAX_CHUNK_BYTES */
    json_object *filters;    /**< owned reference to a non-empty "filters" list, NULL otherwise */
} nds_zarr2_meta;

/**
 * Parses a whole .zarray document strictly into m (every member but "dimension_separator" is
 * required; unknown members are ignored, as zarr-python does). doc names the document in messages
 * ("zarr: .zarray of file:///d/a/").
 * @return 0; NDS_EFORMAT naming the member; NDS_EUNSUPPORTED for dtypes, compressors or filters
 * ndstore does not implement (naming them); NDS_ELIMIT when a chunk exceeds 2 GiB. On error m holds
 * nothing that needs disposing.
 */
int nds_zarr2_meta_parse(const json_object *doc_json, const char *doc, nds_zarr2_meta *m);
/** Drops the compressor and filters references. Accepts a zeroed struct. */
void nds_zarr2_meta_dispose(nds_zarr2_meta *m);
/** The canonical .zarray document for m (fill_value null when m->fill_null), as a new object. */
json_object *nds_zarr2_meta_to_json(const nds_zarr2_meta *m);
/** The zarr v2 dtype string of m ("<u2", "|b1", "bfloat16") into buf (at least 16 bytes). */
void nds_zarr2_dtype_string(const nds_zarr2_meta *m, char *buf, size_t cap);

/**
 * Collects what a spec asks for, as a partial .zarray document in *out (new object, maybe empty):
 * the members of spec "metadata" (TensorStore zarr driver names), then those "schema" gives
 * ("domain.shape", "chunk_layout.chunk.shape", "fill_value", "codec") where "metadata" has none. A
 * schema or top-level "dtype" ("uint16") is kept apart, under "schema dtype", because it constrains
 * the type but not the byte order.
 * @return 0, or NDS_EINVAL / NDS_EUNSUPPORTED naming the bad spec member
 */
int nds_zarr2_request_from_spec(const json_object *spec, const char *where, json_object **out);
/**
 * Completes a request into a whole document to create: zarr_format 2, chunks of about 1 MiB clipped
 * to the shape, compressor zstd level 1, order "C", fill_value 0, filters null, dimension_separator
 * ".". "shape" and "dtype" must be present. @return 0 or NDS_EINVAL naming what is missing
 */
int nds_zarr2_request_complete(json_object *req, const char *where);
/**
 * Checks every member of a (partial) request against a stored, parsed .zarray.
 * @return 0; NDS_EMISMATCH naming the first member that differs; or a parse error of the request
 */
int nds_zarr2_meta_check(const nds_zarr2_meta *stored, const json_object *req, const char *doc);
/**
 * The normalised configuration of a compressor (the codec's config_json, defaults filled in), as a
 * new object; *out is NULL for a null compressor. itemsize is the array's element size.
 * @return 0, NDS_EUNSUPPORTED for an unknown codec id, or the codec's error (prefixed with doc)
 */
int nds_zarr2_compressor_normalize(const json_object *config, size_t itemsize, const char *doc,
                                   json_object **out);


#endif
