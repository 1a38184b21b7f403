/* Interface for codec authors: a bytes-to-bytes transform (compressor) registered by name.
 *
 * A codec instance (state) is created from its JSON configuration and is then immutable: encode and decode
 * may run on many threads at once on the same instance, so per-call scratch (e.g. a ZSTD_CCtx) must be
 * per-call or thread-local. Configurations use numcodecs' member names ({"id":"blosc","cname":"lz4",...});
 * formats with other spellings (zarr v3) translate before calling create.
 */
#ifndef NDSTORE_SYS_CODEC_H
#define NDSTORE_SYS_CODEC_H

#include <stddef.h>
#include <stdint.h>
#include "ndstore/version.h"
#include "ndstore/sys/buf.h"

#ifdef __cplusplus
extern "C" {
#endif

struct json_object;

/* Version 1. Versions change at releases only; a member added between releases is appended and
 * optional (NULL = not provided). Registration refuses any other version. */
#define NDS_CODEC_VERSION 1

/**
 * Reads parts of one stored value (a decode request's reader): len bytes from offset into dst,
 * and the value's whole stored size into *value_len.
 * Returns 0; NDS_ERANGE when the value ends before offset + len; NDS_ENOTFOUND (no message) when
 * the value does not exist; NDS_ECONFLICT (no message) when it is no longer the version an
 * earlier read of this reader saw; or an I/O error. Every read of one reader sees the same
 * stored version.
 */
typedef struct nds_part_reader {
    int (*read)(void *arg, uint64_t offset, size_t len, uint8_t *dst, uint64_t *value_len);
    void *arg;
} nds_part_reader;

/**
 * Receives a decoded value piece by piece (a decode request's sink): bytes [offset, offset + len)
 * of it in data, which the receiver may change (a format swaps bytes there) and which is valid
 * only during the call. Pieces come in order and do not overlap. A nonzero return stops the
 * decode and is returned by it.
 */
typedef int (*nds_piece_sink)(void *arg, size_t offset, uint8_t *data, size_t len);

/**
 * One decode: bytes [begin, end) of the decoded value, from an input given either in memory (in)
 * or through a part reader (reader), into either a caller buffer (dst) or a piece sink (sink).
 * Start from NDS_DECODE_REQUEST_INIT (the whole value) and set one input and one output. The
 * caller fills every member but out_len; the codec only sets out_len. Members are only appended
 * (the library that calls a codec is never older than the codec: registration checks it).
 *
 * What the codec guarantees:
 * - The decoded value is at most cap bytes (more: NDS_ECORRUPT); a part (end != SIZE_MAX) or a
 *   sink decode may insist on exactly cap bytes (another size: NDS_ECORRUPT). Corrupt or cut-short
 *   input is NDS_ECORRUPT with a message; never a crash, never a write outside dst[0..cap).
 * - Into dst: bytes [begin, min(end, out_len)) come out right; the bytes of dst outside them
 *   may hold anything (a codec decodes whole blocks, or the whole value, around the range).
 *   zstd and the others decode straight into dst, with no copy.
 * - Into sink: pieces in order that together hold at least [begin, min(end, out_len)) (a codec
 *   that decodes block by block hands each block while it is in the cache; the others hand the
 *   whole value as one piece). Every piece starts at a multiple of align (the element size, so
 *   that a receiver can swap bytes piece by piece). Damage found after a piece was handed over
 *   is NDS_ECORRUPT like any other.
 * - Through reader: only the stored bytes the range needs are read where the codec can tell them
 *   (blosc: header, block index, the blocks holding the range), else the whole value. A reader
 *   error comes back as it is, except NDS_ERANGE (the value is shorter than it says):
 *   NDS_ECORRUPT.
 */
typedef struct nds_decode_request {
    /* input: exactly one of in and reader */
    const uint8_t *in;             /**< the encoded value in[0..in_len), or NULL */
    size_t in_len;                 /**< its length in bytes */
    const nds_part_reader *reader; /**< the encoded value read in parts, or NULL */
    /* the range */
    size_t begin; /**< first byte of the decoded value wanted (0: from the start) */
    size_t end;   /**< one past the last byte wanted; SIZE_MAX: to the end (a whole decode) */
    size_t cap;   /**< the decoded size's bound (dst's capacity); see above */
    /* output: exactly one of dst and sink */
    uint8_t *dst;        /**< dst[0..cap), or NULL (with cap 0 and no sink: an empty value) */
    nds_piece_sink sink; /**< receives the pieces, or NULL */
    void *sink_arg;      /**< sink's first argument */
    size_t align;        /**< pieces start at multiples of it (0 or 1: anywhere) */
    /* result */
    size_t out_len; /**< set by decode: the decoded value's size */
} nds_decode_request;

/** What a decode does itself rather than through the generic fallback (nds_codec.decode_caps,
 *  nds_array_meta.decode_caps): bits. */
#define NDS_DECODE_PART 1u   /**< a part of a value in memory costs less than the whole */
#define NDS_DECODE_READER 2u /**< through a reader, reads only the stored bytes a part needs */
#define NDS_DECODE_PIECES 4u /**< into a sink, hands pieces over with no whole value in between */

/** A whole decode with no input or output set yet. */
#define NDS_DECODE_REQUEST_INIT                                                                    \
    { NULL, 0, NULL, 0, SIZE_MAX, 0, NULL, NULL, NULL, 0, 0 }

/** A codec's decode of a whole in-memory value into out[0..cap), setting *out_len: what a codec
 *  that cannot do parts, readers or pieces writes, and hands to nds_codec_decode_fallback. */
typedef int (*nds_decode_whole_fn)(void *state, const uint8_t *in, size_t len, uint8_t *out,
                                   size_t cap, size_t *out_len);

typedef struct nds_codec {
    /** NDS_CODEC_VERSION; checked at registration. */
    uint32_t version;
    /** Registry name, the numcodecs id: "zstd", "blosc", "gzip", "zlib", "bz2", "lz4". */
    const char *name;
    /**
     * Creates an instance. config is the JSON object (its "id" member may be present and is ignored);
     * elem_size is the array's element size (blosc's typesize default).
     * @return 0, or NDS_EFORMAT with a message naming the bad member
     */
    int (*create)(void **state, const struct json_object *config, size_t elem_size);
    /** Frees an instance. Accepts NULL. */
    void (*destroy)(void *state);
    /** The full configuration with defaults filled in, as a new JSON object including "id". */
    int (*config_json)(void *state, struct json_object **out);
    /** Encodes in[0..len) into out (out->len is set to the encoded size; out may be grown). */
    int (*encode)(void *state, const uint8_t *in, size_t len, nds_buf *out);
    /**
     * Decodes as req asks (see nds_decode_request for what is guaranteed) and sets req->out_len.
     * What the codec cannot do itself (a part, a reader, pieces) it leaves to
     * nds_codec_decode_fallback, so every codec takes every request.
     */
    int (*decode)(void *state, nds_decode_request *req);
    /** NDS_DECODE_* bits: what decode does itself, for callers that choose how to read a value
     *  (a format passes them on in nds_array_meta.decode_caps). 0: everything through the
     *  fallback. Optional (appended after version 1's first members). */
    unsigned decode_caps;
} nds_codec;

/**
 * The generic decode for what a codec does not do itself, built on its whole decode: a reader's
 * value is read whole (into a per-thread buffer) and then decoded as if given in memory; a part
 * into dst is the whole value decoded into dst (its size must then be exactly cap); a sink gets
 * the whole value, decoded into a per-thread buffer, as one piece (its size must be exactly cap).
 * c is the calling codec: a value read whole goes through c->decode in memory (so a part is still
 * decoded in part where c can), and messages name c. The per-thread buffers are reused across
 * calls (a big one is freed after the call); nothing is kept past it. Sets req->out_len. Errors as
 * nds_decode_request says. Any thread.
 */
NDS_API int nds_codec_decode_fallback(const nds_codec *c, void *state, nds_decode_request *req,
                                      nds_decode_whole_fn whole);

/**
 * The common call: decodes the whole value in[0..len) with codec c (instance state) into
 * out[0..cap) and sets *out_len. @return 0 or the codec's error (NDS_ECORRUPT with a message)
 */
NDS_API int nds_codec_decode(const nds_codec *c, void *state, const uint8_t *in, size_t len,
                             uint8_t *out, size_t cap, size_t *out_len);

/** Registers a codec (replacing one of the same name). @return 0, or NDS_EINVAL "codec
 *  registration: ..." when codec is NULL, unnamed, lacks a required member or is of another
 *  version than NDS_CODEC_VERSION */
NDS_API int nds_codec_register(const nds_codec *codec);
/** Finds a codec by name; NULL when unknown. The pointer is valid for the process's lifetime. */
NDS_API const nds_codec *nds_codec_find(const char *name);

#ifdef __cplusplus
}
#endif
#endif
