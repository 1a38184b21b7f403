/* Interface for array format authors (zarr v2, zarr v3, N5, neuroglancer precomputed).
 *
 * A format owns the metadata document, chunk keys, and the chunk codec pipeline. The core owns everything
 * else: region iteration, the per-chunk read-merge-conditional-write protocol, threads, fill handling.
 * Between the two, a chunk travels in canonical form: the full chunk shape (edge chunks too), C order (last
 * dimension fastest), host byte order. A format whose storage differs (F order, big-endian, clipped edge
 * blocks) converts in decode_chunk / encode_chunk.
 *
 * A format instance (state) is immutable after open except through resize / set_attributes, which the core
 * serialises; decode_chunk and encode_chunk run on many threads at once.
 */
#ifndef NDSTORE_SYS_FORMAT_H
#define NDSTORE_SYS_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include "ndstore/dtype.h"
#include "ndstore/box.h"
#include "ndstore/kvstore.h"
#include "ndstore/sys/buf.h"
#include "ndstore/sys/codec.h"

#ifdef __cplusplus
extern "C" {
#endif

struct json_object;

/* Version 1. Versions change at releases only; a member added between releases is appended and
 * optional (NULL = not provided, so a format that leaves it out keeps its behaviour).
 * Registration refuses any other version. */
#define NDS_FORMAT_VERSION 1

/** The grid a format describes; filled by open and resize (the core zeroes it before open, so a
 *  member a format does not set keeps its default). */
typedef struct nds_array_meta {
    size_t rank;
    uint64_t shape[NDS_MAX_RANK];
    uint64_t chunk_shape[NDS_MAX_RANK];
    nds_dtype dtype;
    uint8_t fill_value[NDS_ELEM_MAX_SIZE]; /**< one element, host byte order */
    /**
     * Optional finer grid for reads (all 0 = reads use chunk_shape). Sharded formats set chunk_shape to the
     * shard (the unit of storage and of writes: one read-modify-write per shard per write call) and this
     * to the inner chunk, which the core then reads one by one through nds_format.read_chunk. Each entry
     * must divide the chunk_shape entry.
     */
    uint64_t read_chunk_shape[NDS_MAX_RANK];
    /**
     * Nonzero when one storage object holds several chunks that are not a box of the grid (hashed
     * shards): see "Storage objects" at nds_format. 0 (the default) otherwise.
     */
    int grouped;
    /**
     * 1 when a stored chunk's bytes are exactly its canonical form (no compression, C order, host byte
     * order, the full chunk shape): the core then copies reads straight out of the stored bytes and
     * writes its chunk buffer as it is, skipping decode_chunk / encode_chunk and their copies. The
     * stored length is still checked (NDS_ECORRUPT naming the chunk). 0 (the default) otherwise.
     */
    int stored_canonical;
    /**
     * Bytes per element when the dtype alone does not say (the fixed-width strings of dtype.h:
     * n units of nds_dtype_size; at most NDS_ELEM_MAX_SIZE); 0 (the default) means
     * nds_dtype_size(dtype).
     */
    size_t elem_size;
    /**
     * Where the array's domain starts in each dimension: index i of the core's boxes is domain
     * coordinate origin[d] + i (precomputed: the scale's voxel_offset). 0 (the default) for formats
     * whose domains start at 0. Shown and parsed by the command line; the core's boxes stay 0-based.
     */
    int64_t origin[NDS_MAX_RANK];
    /**
     * The physical size of one index step per dimension, and its unit (precomputed: the scale's
     * resolution in "nm" for x, y, z); size 0 (the default) = none known.
     */
    nds_unit units[NDS_MAX_RANK];
    /**
     * What this array's decode_chunk does better than a whole decode: NDS_DECODE_* bits (codec.h;
     * most formats pass on their codec's nds_codec.decode_caps where the chunk's bytes are the
     * codec's decoded bytes). The core sends decode_chunk a request through a reader only with
     * NDS_DECODE_READER, into a sink only with NDS_DECODE_PIECES (otherwise it reads the value
     * whole, and decodes into a buffer), and asks for a part only where NDS_DECODE_PART or
     * NDS_DECODE_READER saves work. 0 (the default): whole decodes in memory.
     */
    unsigned decode_caps;
} nds_array_meta;

/** One chunk change of a grouped write (nds_format.group_encode). */
typedef struct nds_group_update {
    const uint64_t *cell; /**< the chunk (grid coordinates, rank entries) */
    const uint8_t *data;  /**< its new stored bytes, as encode_chunk made them; NULL: remove it */
    size_t len;           /**< bytes at data */
} nds_group_update;

/**
 * A read-modify-write of a chunk that a write changes only in part (nds_format.update_chunk).
 * The core fills the inputs; the format sets out's contents and all_fill.
 */
typedef struct nds_update_request {
    const uint64_t *cell;  /**< the chunk (grid coordinates) */
    const uint8_t *old;    /**< its stored bytes old[0..old_len); NULL: not stored (all fill) */
    size_t old_len;        /**< bytes at old */
    const nds_box *changed; /**< the box (chunk coordinates, steps included) merge overwrites */
    /** Overwrites the changed box of a canonical chunk; called exactly once. */
    void (*merge)(void *ctx, uint8_t *chunk);
    void *merge_ctx;       /**< merge's first argument */
    uint8_t *chunk;        /**< a canonical chunk buffer of the core's, for the format's use */
    nds_buf *out;          /**< receives the new stored bytes (contents replaced) */
    int all_fill;          /**< set by the format: 1 when nothing but the fill value remains */
} nds_update_request;

/**
 * An array format. Required members are marked so; every other member is optional, NULL meaning
 * "not provided" (the core then does without it or refuses what needs it, as each says).
 *
 * Storage objects. A storage object is one stored value (a key, relative to the array). Each
 * holds one or more chunks of the grid, in one of three ways, and the members that describe it
 * follow from the way:
 * - One chunk per object (zarr v2, N5, unsharded zarr v3 and precomputed): chunk_key names it,
 *   decode_chunk / encode_chunk convert it. Nothing else is needed.
 * - A box of chunks per object (zarr v3 shards, precomputed shard boxes): the object is the
 *   storage chunk (chunk_shape) and the grid's chunks are its inner chunks
 *   (meta.read_chunk_shape). read_chunk reads one inner chunk out of its object (required then);
 *   update_chunk may rewrite only the inner chunks a write reaches (optional: without it, or when
 *   it declines, the object is decoded, merged and encoded whole).
 * - Chunks not a box of the grid per object (meta.grouped: hashed neuroglancer shards): chunk_key
 *   names a chunk but is not used for I/O; reads go through read_chunk (meta.read_chunk_shape set
 *   to chunk_shape); group_key names a chunk's object and group_encode / group_read_chunk rebuild
 *   it and read a chunk out of its bytes (all three required then);
 *   group_parse_key / group_list let stats and verify see the chunks inside objects (optional,
 *   together: without them both refuse grouped arrays, NDS_EUNSUPPORTED). The core groups a
 *   write call's chunks by object, and per object: reads it with its generation, decodes the
 *   chunks it writes only in part (group_read_chunk), merges, encodes each chunk (encode_chunk;
 *   chunks left all fill become removals), has the format build the new object (group_encode)
 *   and writes it conditional on the generation read (deletes it when empty), redoing the whole
 *   object on NDS_ECONFLICT. Writes inside a transaction are refused (NDS_EUNSUPPORTED).
 *
 * Threading: an instance (state) is immutable after open except through resize / set_attributes,
 * which the core serialises; every member taking state but those two runs on many threads at once.
 */
typedef struct nds_format {
    /* ---- identity (required but for url_scheme and metadata_key) ---- */
    /** NDS_FORMAT_VERSION; checked at registration. */
    uint32_t version;
    /** Spec "driver" value ("zarr"). Required. */
    const char *name;
    /** URL scheme after '|' ("zarr" in "file:///d/a|zarr:"); NULL: none. */
    const char *url_scheme;
    /** Key of the array metadata document relative to the array (".zarray"); used to detect the
     *  format and to see the metadata change. NULL: not detected, never checked. */
    const char *metadata_key;

    /* ---- an array's life (required) ---- */
    /**
     * Opens or creates the array under kv (whose prefix is the array's path).
     * spec is the whole array spec (its "metadata" member, when present, is what to create or what an
     * existing array must match); mode is NDS_OPEN_* bits, delete_existing already done by the core.
     * Creation must be a create-only write (if_equal ABSENT) of the metadata; a loser of that race opens
     * what the winner wrote and checks it against the spec (NDS_EMISMATCH naming the member that differs).
     */
    int (*open)(nds_kvstore *kv, const struct json_object *spec, unsigned mode, void **state,
                nds_array_meta *meta);
    /** Frees an instance. Accepts NULL. */
    void (*close)(void *state);
    /** The current metadata document as a new JSON object. */
    int (*metadata_json)(void *state, struct json_object **out);
    /** User attributes as a new JSON object ({} when none). */
    int (*get_attributes)(void *state, nds_kvstore *kv, struct json_object **out);
    /** Replaces the user attributes. */
    int (*set_attributes)(void *state, nds_kvstore *kv, const struct json_object *attrs);

    /* ---- chunks (required) ---- */
    /** Writes the key of chunk cell (grid coordinates, rank entries) relative to the array into buf. */
    int (*chunk_key)(void *state, const uint64_t *cell, char *buf, size_t cap);
    /** Parses a key relative to the array back into a cell: 1 when it is a chunk key, else 0. */
    int (*parse_chunk_key)(void *state, const char *key, uint64_t *cell);
    /**
     * The one chunk decode: bytes [req->begin, req->end) of the canonical chunk of cell (the full
     * chunk shape, C order, host byte order; req->cap is its size in bytes, set by the core) from
     * the stored bytes, in memory (req->in) or through a part reader (req->reader), into a buffer
     * (req->dst, cap bytes) or a piece sink (req->sink), as codec.h's nds_decode_request says,
     * which also says what comes out right and what may hold anything. The core asks through a
     * reader or into a sink only where meta.decode_caps says the format does them; a part may be
     * asked of any format, which may decode the whole chunk for it. Sets req->out_len.
     * Corrupt or truncated input: NDS_ECORRUPT with a message (the core adds the key and URL); a
     * reader's NDS_ENOTFOUND and NDS_ECONFLICT come back as they are.
     */
    int (*decode_chunk)(void *state, const uint64_t *cell, nds_decode_request *req);
    /** Encodes a canonical chunk into out (out->len set). */
    int (*encode_chunk)(void *state, const uint64_t *cell, const uint8_t *chunk, nds_buf *out);

    /* ---- optional: the array's metadata and hierarchy ---- */
    /** Describes the chunk encoding for `ndstore info` ("blosc(lz4, clevel 5, shuffle)"), into buf. */
    void (*describe_codec)(void *state, char *buf, size_t cap);
    /** Rewrites the metadata with a new shape and updates meta. Chunk deletion is the core's job.
     *  NULL when the format cannot resize: the core then refuses before touching any chunk. */
    int (*resize)(void *state, nds_kvstore *kv, const uint64_t *new_shape, nds_array_meta *meta);
    /** Adds the members that select this array inside its metadata to a spec being printed
     *  (precomputed: {"scale_metadata":{"key":...}}), so nds_array_spec reopens the same array. */
    int (*spec_json)(void *state, struct json_object *spec);
    /** Creates a group at kv's prefix; an existing group is left alone. NULL when groups are unsupported. */
    int (*create_group)(nds_kvstore *kv);
    /**
     * Builds the consolidated metadata of the hierarchy under kv (a group's prefix) by listing it,
     * and writes it (zarr: .zmetadata; zarr3: inline in the group's zarr.json); *count (may be
     * NULL) gets the documents consolidated. NULL when the format has none: a spec with
     * "consolidated": true is then refused. A format that has it reads the spec's "consolidated"
     * member in open (issue 20; docs/formats.md).
     */
    int (*consolidate)(nds_kvstore *kv, size_t *count);

    /* ---- optional: storage objects holding a box of chunks (see above) ---- */
    /**
     * Required when meta.read_chunk_shape is set: reads one chunk of the read grid (cell in
     * read-chunk units) straight from kv into out (canonical form of the read-chunk shape), e.g. an
     * inner chunk of a shard through byte-range reads of the shard's index and data. Sets
     * *present = 0 and leaves out alone when that chunk is not stored.
     */
    int (*read_chunk)(void *state, nds_kvstore *kv, const uint64_t *cell, uint8_t *out, int *present);
    /**
     * The read-modify-write of a chunk that a write changes only in part (u: see
     * nds_update_request), done by the format so that it can skip what the write leaves alone (zarr
     * v3 shards: inner chunks the write does not reach are neither decoded nor encoded again,
     * their stored bytes are copied). The format puts the old elements into u->chunk wherever it
     * will encode them and merge does not overwrite them, calls u->merge exactly once, and encodes
     * the result into u->out, or sets u->all_fill when nothing but the fill value remains (the
     * core then deletes the chunk). Elements of u->chunk the format neither decodes nor encodes
     * may hold anything. Returns NDS_EUNSUPPORTED (no message) without calling merge when this
     * array cannot: the core then decodes old, merges and calls encode_chunk.
     */
    int (*update_chunk)(void *state, nds_update_request *u);

    /* ---- optional: grouped storage objects (meta.grouped; see above) ---- */
    /** The key, relative to the array, of the object that holds chunk cell, into buf. */
    int (*group_key)(void *state, const uint64_t *cell, char *buf, size_t cap);
    /**
     * Decodes chunk cell from the stored bytes obj[0..len) of its object into out (canonical form).
     * Sets *present = 0 and leaves out alone when the object does not hold that chunk. Corrupt
     * input: NDS_ECORRUPT with a message (the core adds the object's key and URL).
     */
    int (*group_read_chunk)(void *state, const uint8_t *obj, size_t len, const uint64_t *cell,
                            uint8_t *out, int *present);
    /**
     * Builds an object's new bytes into out (contents replaced) from its stored bytes obj[0..len)
     * (obj NULL when it does not exist) and n updates of distinct chunks it holds. Every other
     * chunk keeps its stored bytes verbatim (never decoded and re-encoded). out->len == 0 means
     * the object holds no chunk any more (the core deletes it). Corrupt obj: NDS_ECORRUPT,
     * nothing built.
     */
    int (*group_encode)(void *state, const uint8_t *obj, size_t len,
                        const nds_group_update *updates, size_t n, nds_buf *out);
    /** 1 when key (relative to the array) names one of the array's objects (a shard file of the
     *  open scale), else 0. Goes with group_list. */
    int (*group_parse_key)(void *state, const char *key);
    /**
     * Calls fn(ctx, cell) for every chunk the object key holds, from its stored bytes
     * obj[0..len), after checking the whole object's layout (indexes, byte ranges, chunks that
     * belong to it and to the grid). Stops at fn's first non-zero return. Corrupt obj:
     * NDS_ECORRUPT with a message, fn not called. Goes with group_parse_key.
     */
    int (*group_list)(void *state, const char *key, const uint8_t *obj, size_t len,
                      int (*fn)(void *ctx, const uint64_t *cell), void *ctx);

    /* ---- optional: variable-length arrays ----
     * meta.dtype a type of nds_dtype_is_vlen (string, bytes). Such an array has no canonical
     * chunk: the core moves a chunk as its element list in the layout of the vlen-utf8 /
     * vlen-bytes codecs (u32 little-endian count, then per element in C order a u32 little-endian
     * byte length and the bytes), and checks, decodes, merges and encodes the list itself
     * (lib/array_vlen.c). decode_chunk / encode_chunk / update_chunk / read_chunk are never called
     * for it. meta.fill_value holds the fill element as a host-order uint32 length and its bytes
     * (at most NDS_ELEM_MAX_SIZE - 4), or length UINT32_MAX for "no fill element" (zarr v2 null:
     * missing elements read as empty, and chunks are never deleted as all fill). A format that
     * opens such an array must have both members below (issue 20).
     */
    /** The stored bytes of chunk cell through every codec after the vlen one, decoded into out
     *  (replacing its contents): the element list. Corrupt input: NDS_ECORRUPT with a message. */
    int (*decode_vlen)(void *state, const uint64_t *cell, const uint8_t *data, size_t len,
                       nds_buf *out);
    /** The element list list[0..len) encoded through those codecs into out (replaced). */
    int (*encode_vlen)(void *state, const uint64_t *cell, const uint8_t *list, size_t len,
                       nds_buf *out);
} nds_format;

/** A format's decode of a whole chunk from its stored bytes in[0..len) into out (the canonical
 *  chunk): what a format that cannot do parts, readers or pieces writes, and hands to
 *  nds_format_decode_fallback. */
typedef int (*nds_chunk_decode_whole_fn)(void *state, const uint64_t *cell, const uint8_t *in,
                                         size_t len, uint8_t *out);

/**
 * The generic chunk decode built on a format's whole decode, for decode_chunk to call with what it
 * does not do itself: a reader's value is read whole (into a per-thread buffer) and decoded; a part
 * into req->dst is the whole chunk decoded there; a sink gets the whole chunk, decoded into a
 * per-thread buffer, as one piece. Sets req->out_len (req->cap on success). Errors as
 * decode_chunk says. Any thread; nothing is kept past the call.
 */
NDS_API int nds_format_decode_fallback(void *state, const uint64_t *cell, nds_decode_request *req,
                                       nds_chunk_decode_whole_fn whole);

/** Registers a format (replacing one of the same name). @return 0, or NDS_EINVAL "format
 *  registration: ..." when format is NULL, unnamed, of another version than NDS_FORMAT_VERSION,
 *  lacks a required member, or has only some of members that go together (group_key /
 *  group_read_chunk / group_encode; group_parse_key / group_list; decode_vlen / encode_vlen) */
NDS_API int nds_format_register(const nds_format *format);
/** Finds a format by name or URL scheme; NULL when unknown. */
NDS_API const nds_format *nds_format_find(const char *name);
/** Calls fn for each registered format, the built-in ones first, then in registration order; stops
 *  at and returns fn's first non-zero value. @return 0 or fn's value */
NDS_API int nds_format_each(int (*fn)(void *ctx, const nds_format *f), void *ctx);

#ifdef __cplusplus
}
#endif
#endif
