/* neuroglancer precomputed metadata: strict parsing of the `info` document (multiscale members,
 * scales, sharding specifications; precomputed_metadata.c), what a TensorStore-style spec asks for
 * ("metadata", "multiscale_metadata", "scale_metadata", "scale_index", "schema";
 * precomputed_request.c), scale selection and checks of an existing volume against a spec
 * (precomputed_match.c), and building the documents to create (precomputed_create.c).
 *
 * Private to formats/precomputed*.c. All functions are reentrant; a parsed nds_pc_info is owned by
 * its caller and immutable once parsed.
 */
#ifndef NDS_FORMATS_PRECOMPUTED_METADATA_H
#define NDS_FORMATS_PRECOMPUTED_METADATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

#include "ndstore/dtype.h"

/** Largest canonical chunk (x * y * z * channels * element size): the core's limit, 2 GiB. */
#define NDS_PC_MAX_CHUNK_BYTES (UINT64_C(1) << 31)
/** Longest scale key. */
#define NDS_PC_MAX_KEY 256

typedef enum nds_pc_encoding { NDS_PC_RAW, NDS_PC_JPEG, NDS_PC_PNG, NDS_PC_CSEG } nds_pc_encoding;

/** A "sharding" member (neuroglancer_uint64_sharded_v1). */
typedef struct nds_pc_sharding {
    bool present;            /**< false: the unsharded format */
    unsigned preshift_bits;  /**< 0..64 */
    unsigned minishard_bits; /**< 0..32 */
    unsigned shard_bits;     /**< 0..64, minishard_bits + shard_bits <= 64 */
    bool murmur;             /**< hash "murmurhash3_x86_128", else "identity" */
    bool index_gzip;         /**< minishard_index_encoding "gzip", else "raw" */
    bool data_gzip;          /**< data_encoding "gzip", else "raw" */
} nds_pc_sharding;

/** One element of "scales". */
typedef struct nds_pc_scale {
    char key[NDS_PC_MAX_KEY + 1]; /**< "key": relative path, no "." / ".." / empty components */
    uint64_t size[3];             /**< "size" (x, y, z) */
    int64_t voxel_offset[3];      /**< "voxel_offset", default 0 */
    double resolution[3];         /**< "resolution" in nm, each > 0 */
    size_t nchunk;                /**< entries of "chunk_sizes" (1..8) */
    uint64_t chunk_sizes[8][3];   /**< "chunk_sizes" */
    nds_pc_encoding encoding;     /**< "encoding" */
    int jpeg_quality;             /**< "jpeg_quality" (ndstore/TensorStore extension), default 75 */
    int png_level;                /**< "png_level" (ndstore extension), default 6 */
    uint64_t cseg_block[3];       /**< "compressed_segmentation_block_size" (cseg only) */
    nds_pc_sharding sharding;     /**< "sharding" */
} nds_pc_scale;

/** The parsed info. */
typedef struct nds_pc_info {
    bool segmentation;     /**< "type": "segmentation", else "image" */
    nds_dtype dtype;       /**< "data_type" */
    uint64_t num_channels; /**< "num_channels" >= 1 */
    size_t nscales;
    nds_pc_scale *scales; /**< malloc'd */
} nds_pc_info;

/**
 * Parses a whole info document strictly into m. doc names the document in messages
 * ("neuroglancer_precomputed: info of file:///d/v/"). Unknown members are ignored (and kept by
 * writers, which edit the document rather than rebuild it).
 * @return 0; NDS_EFORMAT naming the member (and the scale: "scales[1].chunk_sizes");
 * NDS_EUNSUPPORTED for data types or encodings ndstore does not implement; NDS_ELIMIT for chunks
 * above 2 GiB or volumes whose chunk grid needs more than 64 bits of compressed Morton code
 * (sharded). On error m holds nothing to dispose.
 */
int nds_pc_info_parse(const json_object *info, const char *doc, nds_pc_info *m);
void nds_pc_info_dispose(nds_pc_info *m);

/** The info spelling of a data type ("uint8"); NULL when precomputed has no such type. */
const char *nds_pc_dtype_name(nds_dtype t);

/** What a spec asks for (nds_pc_request_from_spec). Members are owned. */
typedef struct nds_pc_request {
    json_object *info;       /**< "metadata" given as a whole info (it has "scales"), else NULL */
    json_object *multiscale; /**< partial multiscale members: type, data_type, num_channels */
    json_object *scale;      /**< partial scale members, TensorStore's scale_metadata names */
    bool has_scale_index;
    uint64_t scale_index; /**< "scale_index" */
    int shard_data_gzip;  /**< schema codec "shard_data_encoding": -1 unset, 0 raw, 1 gzip */
    bool has_write_chunk;
    uint64_t write_chunk[3]; /**< schema chunk_layout.write_chunk.shape (x, y, z) */
} nds_pc_request;

/**
 * Collects the spec's requests: "metadata" (a whole info, or one flat object mixing multiscale and
 * scale members), "multiscale_metadata", "scale_metadata", "scale_index", then "schema" (dtype,
 * domain.shape [x, y, z, channels], chunk_layout.chunk / read_chunk / write_chunk shapes, codec,
 * fill_value which must be 0) and a top-level "dtype" where the others say nothing.
 * @return 0, or NDS_EINVAL / NDS_EUNSUPPORTED naming the spec member
 */
int nds_pc_request_from_spec(const json_object *spec, const char *where, nds_pc_request *out);
void nds_pc_request_dispose(nds_pc_request *r);

/**
 * Chooses the scale a request names in an existing info: "scale_index", else scale "key", else
 * scale "resolution", else scale 0. *found is false when it names a scale that does not exist yet
 * (*index is then where a new one would go). @return 0, or NDS_ENOTFOUND / NDS_EINVAL naming it
 */
int nds_pc_select_scale(const nds_pc_info *info, const nds_pc_request *req, bool create,
                        const char *doc, size_t *index, bool *found);

/**
 * Checks an existing volume and its scale `index` against every member the request gives (encoding
 * parameters excepted); *chunk receives which of the scale's "chunk_sizes" to use (the requested
 * "chunk_size", else 0).
 * @return 0, or NDS_EMISMATCH naming the first member that differs (stored vs asked)
 */
int nds_pc_check(const nds_pc_info *info, size_t index, const nds_pc_request *req, const char *doc,
                 size_t *chunk);

/** Applies a request's encoding parameters (scale "jpeg_quality", "png_level") to s. */
void nds_pc_apply_overrides(const nds_pc_request *req, nds_pc_scale *s);

/**
 * Builds a new scale object (info spelling: "chunk_sizes", defaults filled in: resolution [1, 1,
 * 1], key "<x>_<y>_<z>" of the resolution, voxel_offset 0, chunk 64 per dimension clipped to the
 * size, encoding raw, compressed_segmentation block [8, 8, 8], unsharded). The result is validated
 * by parsing the info it goes into. @return 0, or NDS_EINVAL naming what is missing
 */
int nds_pc_new_scale(const nds_pc_request *req, const char *where, json_object **out);
/**
 * Builds a whole new info for the request: its "metadata" info as given, or the multiscale members
 * (defaults: "@type", type "image" / "segmentation" for compressed_segmentation, num_channels 1)
 * and one scale from nds_pc_new_scale. @return 0, or NDS_EINVAL naming what is missing
 */
int nds_pc_new_info(const nds_pc_request *req, const char *where, json_object **out);

#endif
