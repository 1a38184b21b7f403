/* Arrays: open or create from a spec, read and write boxes, resize, attributes, stored-chunk statistics.
 *
 * An open array is internally synchronised: many threads may read and write it at once. Writes are isolated
 * per chunk (read the chunk and its generation, merge, write only if the generation is unchanged, else
 * retry), so concurrent writers in this or other processes never lose each other's elements.
 * In-memory buffers are dense, C order (last dimension fastest), host byte order, of the array's dtype.
 */
#ifndef NDSTORE_ARRAY_H
#define NDSTORE_ARRAY_H

#include <stddef.h>
#include <stdint.h>
#include "ndstore/version.h"
#include "ndstore/errors.h"
#include "ndstore/dtype.h"
#include "ndstore/box.h"
#include "ndstore/kvstore.h"
#include "ndstore/context.h"
#include "ndstore/txn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nds_array nds_array;

/** Open mode bits (also taken from the spec's "open", "create", "delete_existing" members). */
enum {
    NDS_OPEN_EXISTING = 1u << 0, /**< open an existing array */
    NDS_OPEN_CREATE = 1u << 1,   /**< create it when missing (create-only metadata write) */
    NDS_OPEN_DELETE_EXISTING = 1u << 2 /**< delete what is there first, then create */
};

#define NDS_OPEN_OPTIONS_VERSION 2
/** Options of nds_array_open. Start from NDS_OPEN_OPTIONS_INIT. */
typedef struct nds_open_options {
    int version;        /**< NDS_OPEN_OPTIONS_VERSION; txn is read only when version >= 2 */
    nds_context *ctx;   /**< NULL = default context */
    unsigned mode;      /**< NDS_OPEN_* bits; 0 = take them from the spec (default: open only) */
    nds_txn *txn;       /**< (version 2) open inside this transaction: creating the metadata, resize,
                             attributes and every write of the array are staged in it and committed with
                             it; reads see them. The transaction must outlive the array. NULL = none. */
} nds_open_options;
#define NDS_OPEN_OPTIONS_INIT {NDS_OPEN_OPTIONS_VERSION, NULL, 0, NULL}

/**
 * Opens (or creates) an array. spec is JSON text in TensorStore's shape
 * ({"driver":"zarr","kvstore":{...},"metadata":{...},"create":true,"open":true}), "@file.json", or a URL
 * ("file:///d/a.zarr|zarr:", "memory://x/|zarr:", "file:///d/|faulty:|zarr3:" with a kvstore adapter,
 * or a bare local path whose format is detected from its metadata file: nds_spec_url_split). opts may
 * be NULL.
 * @return 0; NDS_ENOTFOUND (no array and create not asked); NDS_EEXIST (create only, array exists);
 *         NDS_EMISMATCH (exists but differs from the spec's metadata); NDS_EFORMAT (bad metadata)
 */
NDS_API int nds_array_open(nds_array **out, const char *spec, const nds_open_options *opts);
/**
 * Splits an array URL the way nds_array_open reads it: KVURL(|ADAPTER:REST)*|FORMAT:, where KVURL is a
 * kvstore URL or a bare path and each |ADAPTER:REST a kvstore adapter stacked on what precedes it
 * ("file:///d/|versioned:|zarr3:", "memory://x/|faulty:p/"). The kvstore URL is every segment up to the
 * last adapter; a last segment that is not an adapter is the format (nothing may follow its ':').
 * Only the pipeline's shape is checked; the kvstore URL is parsed when opened (nds_kvstore_open).
 * @param kvstore_url receives the kvstore URL (malloc'd; free with nds_free)
 * @param format receives the format's name (malloc'd; free with nds_free), or NULL when the URL names
 *        none (nds_array_open detects it, or creates zarr)
 * @return 0, NDS_EINVAL (a malformed segment, a non-adapter before the last segment, text after the
 *         format's ':'), NDS_ENOTFOUND (a last segment that is neither an adapter nor a registered
 *         format), NDS_ENOMEM; the message names the segment and the URL. Any thread.
 */
NDS_API int nds_spec_url_split(const char *url, char **kvstore_url, char **format);
/** Closes an array. Accepts NULL. No call on it may be running. */
NDS_API void nds_array_free(nds_array *a);

/** Rank (number of dimensions). */
NDS_API size_t nds_array_rank(const nds_array *a);
/** Copies the current shape (rank entries) into shape. */
NDS_API void nds_array_shape(const nds_array *a, uint64_t *shape);
/** origin[0..rank): where the array's domain starts, per dimension: the domain is [origin, origin +
 *  shape) (neuroglancer precomputed: the scale's voxel_offset; 0 for zarr and N5). The boxes of the
 *  array calls are relative to it (box index 0 is domain coordinate origin); nds_box_parse_domain
 *  reads regions given in domain coordinates. */
NDS_API void nds_array_origin(const nds_array *a, int64_t *origin);
/** units[0..rank): the physical size of one index step in each dimension and its unit ("nm"), as the
 *  format's metadata says (precomputed: the scale's resolution, in nm, for x, y and z); size 0 where
 *  none is known. */
NDS_API void nds_array_units(const nds_array *a, nds_unit *units);
/** Copies the chunk shape (rank entries) into chunks. */
NDS_API void nds_array_chunk_shape(const nds_array *a, uint64_t *chunks);
/** Copies the read chunk shape (rank entries) into chunks: for a sharded array (zarr v3 sharding_indexed,
 *  sharded precomputed) the inner chunk, read on its own by byte ranges, while nds_array_chunk_shape gives
 *  the shard (the unit of storage and of writes). For other arrays both are the same. */
NDS_API void nds_array_read_chunk_shape(const nds_array *a, uint64_t *chunks);
/** Element type. */
NDS_API nds_dtype nds_array_dtype(const nds_array *a);
/** Copies the fill value (one element, host byte order) into out (NDS_DTYPE_MAX_SIZE bytes; for a
 *  fixed-width string array, wider, its first NDS_DTYPE_MAX_SIZE bytes: see nds_array_fill_element). */
NDS_API void nds_array_fill_value(const nds_array *a, void *out);
/** Format driver name ("zarr"), static. */
NDS_API const char *nds_array_format(const nds_array *a);
/** Describes the chunk codec ("blosc(cname=lz4, clevel=5, shuffle=1)", "none") into buf. */
NDS_API void nds_array_codec_description(const nds_array *a, char *buf, size_t cap);
/** The array's kvstore, borrowed for the array's lifetime. */
NDS_API nds_kvstore *nds_array_kvstore(const nds_array *a);
/** The spec that reopens this array, as JSON text; malloc'd (nds_free). */
NDS_API int nds_array_spec(const nds_array *a, char **out);
/** The format's metadata document (e.g. the .zarray) as JSON text; malloc'd (nds_free). */
NDS_API int nds_array_metadata(const nds_array *a, char **out);

#define NDS_IO_OPTIONS_VERSION 2
/** Options of nds_array_read / nds_array_write. Start from NDS_IO_OPTIONS_INIT. */
typedef struct nds_io_options {
    int version;  /**< NDS_IO_OPTIONS_VERSION; members after threads are read only when version >= 2 */
    int threads;  /**< parallelism of this call; 0 = the context's */
    nds_txn *txn; /**< (version 2) stage writes in / read through this transaction; NULL = none */
} nds_io_options;
#define NDS_IO_OPTIONS_INIT {NDS_IO_OPTIONS_VERSION, 0, NULL}

/** Reads box into out (nds_box_count(box) elements, dense, C order). Missing chunks read as fill.
 *  opts may be NULL. @return 0, NDS_ERANGE (box outside the array), or the error of the first bad chunk */
NDS_API int nds_array_read(nds_array *a, const nds_box *box, void *out, const nds_io_options *opts);
/** Writes in (dense, C order) to box. Each touched chunk is committed by itself, isolated; a chunk left
 *  all fill is deleted. opts may be NULL. On error some chunks may have been written, each whole. */
NDS_API int nds_array_write(nds_array *a, const nds_box *box, const void *in, const nds_io_options *opts);
/**
 * nds_array_write inside a transaction (opts->txn, or the array opened in one), without copying what
 * it need not: every chunk the box covers whole and that lies in `in` as the chunk itself (C order,
 * no step: e.g. a box of whole rows of chunks) is staged as a reference into `in`; other chunks are
 * copied as by nds_array_write. So a transaction can stage data as large as the caller holds, with no
 * second copy and none of it counted in its memory limit; where chunks are stored uncompressed
 * (zarr without codecs), prepare and commit write them straight from `in`.
 * `in` must stay valid and unchanged until the transaction is committed, prepared or freed.
 * @return as nds_array_write; NDS_EINVAL outside a transaction
 */
NDS_API int nds_array_write_ref(nds_array *a, const nds_box *box, const void *in,
                                const nds_io_options *opts);
/** Changes the shape (same rank). Chunks wholly outside the new shape are deleted; elements of kept edge
 *  chunks beyond it are reset to fill, so growing again shows fill there. */
NDS_API int nds_array_resize(nds_array *a, const uint64_t *new_shape);

/** User attributes as JSON object text ("{}" when none); malloc'd (nds_free). */
NDS_API int nds_array_get_attributes(nds_array *a, char **out);
/** Replaces the user attributes with json_object_text (must be a JSON object). */
NDS_API int nds_array_set_attributes(nds_array *a, const char *json_object_text);

/** Stored-data statistics (nds_array_stats). */
typedef struct nds_array_stats {
    uint64_t chunks_total;  /**< chunks in the grid */
    uint64_t chunks_stored; /**< chunk keys present in the store */
    uint64_t bytes_stored;  /**< their total size (as the store reports) */
} nds_array_stats;
/** Lists the store to count stored chunks and bytes. */
NDS_API int nds_array_stats_get(nds_array *a, nds_array_stats *out);

/** Called by nds_array_verify for each chunk that fails to decode: key relative to the array, the status
 *  and the message. Return non-zero to stop. */
typedef int (*nds_verify_fn)(void *ctx, const char *key, int status, const char *message);
/** Decodes every stored chunk; calls fn for each bad one. *bad (may be NULL) receives their number.
 *  @return 0 when the check ran (even with bad chunks), or the error that stopped it */
NDS_API int nds_array_verify(nds_array *a, nds_verify_fn fn, void *ctx, uint64_t *checked, uint64_t *bad);

/**
 * Creates a group of the given format ("zarr") at path inside a store (kvstore_spec: URL or JSON; path
 * relative to it, "" for the store root), and with parents non-zero also at every ancestor of path inside
 * the store, the store root included (as zarr-python does). Existing groups are left as they are; an array
 * where a group should be is NDS_EEXIST.
 */
NDS_API int nds_group_create(const char *kvstore_spec, const char *path, const char *format, int parents,
                             nds_context *ctx);

/**
 * Writes the consolidated metadata of the group at path inside a store (kvstore_spec: URL or JSON;
 * path relative to it, "" for the store root), built by listing the hierarchy below it and reading
 * every metadata document: format "zarr" (NULL too) writes .zmetadata as zarr-python's
 * consolidate_metadata does ({"zarr_consolidated_format": 1, "metadata": {...}}, replacing one
 * that is there); "zarr3" writes "consolidated_metadata" inline into the group's zarr.json as
 * zarr-python 3 does (a conditional write; other members kept). The copy is a snapshot: later
 * metadata changes below the group leave it stale until this runs again (docs/formats.md).
 * *count (may be NULL) receives the number of documents consolidated.
 * @return 0; NDS_ENOTFOUND when there is no group at path; NDS_EUNSUPPORTED when the store cannot
 * list or the format has no consolidated metadata; a store's or a document's error otherwise,
 * naming the key. Any thread.
 */
NDS_API int nds_group_consolidate(const char *kvstore_spec, const char *path, const char *format,
                                  size_t *count, nds_context *ctx);

/** Bytes per element of the array: nds_dtype_size of its dtype, except for the fixed-width string
 *  types (dtype.h), whose width is per array ("|S12": 12, "<U3": 12). Buffers of nds_array_read /
 *  nds_array_write hold this many bytes per element. Any thread. */
NDS_API size_t nds_array_dtype_size(const nds_array *a);
/** Copies the whole fill value (nds_array_dtype_size(a) bytes, host order) into out; unlike
 *  nds_array_fill_value, which copies NDS_DTYPE_MAX_SIZE bytes, it suits the fixed-width strings.
 *  Any thread. */
NDS_API void nds_array_fill_element(const nds_array *a, void *out);

/*
 * Variable-length arrays (dtype.h: string, bytes; issue 20). Their elements have no fixed size, so
 * they move as offsets + bytes: element i of a region (C order) is data[offsets[i] ..
 * offsets[i + 1]). nds_array_read / nds_array_write refuse these arrays (NDS_EINVAL naming these
 * calls), and these calls refuse every other array. A chunk is decoded whole; a write to part of a
 * chunk reads it, replaces its elements and writes it conditionally, as for any chunk, so
 * concurrent writers of other elements of the same chunk are never lost. Writes inside a
 * transaction are refused (NDS_EUNSUPPORTED); reads in one see the store, not staged writes.
 */
/**
 * Reads box of a variable-length array. *offsets receives nds_box_count(box) + 1 offsets (the first
 * 0, the last the total length), *data the elements' bytes one after the other (never NULL, even
 * when empty); free both with nds_array_vlen_free. Missing chunks read as the fill element (empty
 * when the array has none). String elements are valid UTF-8: a stored element that is not, like a
 * stored list whose element count or lengths do not fit the chunk, is NDS_ECORRUPT naming the
 * chunk. opts may be NULL.
 * @return 0; NDS_EINVAL (not a variable-length array); NDS_ERANGE (box outside the array); the
 *         error of the first bad chunk. On error *offsets and *data are NULL.
 */
NDS_API int nds_array_read_vlen(nds_array *a, const nds_box *box, uint64_t **offsets,
                                uint8_t **data, const nds_io_options *opts);
/**
 * Writes the nds_box_count(box) elements given by offsets (count + 1 entries, non-decreasing) and
 * data to box. Each touched chunk is committed by itself, isolated; a chunk left all fill is
 * deleted. Nothing is written when an element is refused: one longer than 2^32-1 bytes, offsets
 * that decrease, or (string arrays) bytes that are not valid UTF-8 (NDS_EINVAL naming the
 * element's index in the region). opts may be NULL.
 * @return 0; NDS_EINVAL; NDS_ERANGE; NDS_EUNSUPPORTED (inside a transaction); a chunk's error.
 */
NDS_API int nds_array_write_vlen(nds_array *a, const nds_box *box, const uint64_t *offsets,
                                 const uint8_t *data, const nds_io_options *opts);
/** The fill element of a variable-length array: its length, *bytes (borrowed for the array's
 *  lifetime) its bytes. An array without one (zarr v2 fill_value null or 0) gives the empty
 *  element, which is what missing elements read as. 0 for other arrays. Any thread. */
NDS_API size_t nds_array_vlen_fill(const nds_array *a, const uint8_t **bytes);
/** Frees what nds_array_read_vlen returned. Accepts NULL. */
NDS_API void nds_array_vlen_free(uint64_t *offsets, uint8_t *data);

#ifdef __cplusplus
}
#endif
#endif
