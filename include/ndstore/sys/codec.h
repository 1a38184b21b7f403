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

/* 2 added decode_part; 3 added decode_part_read; 4 added decode_pieces. Codecs built for an older
 * version still register (without the later members). */
#define NDS_CODEC_VERSION 4

/**
 * Reads parts of one stored value for decode_part_read: len bytes from offset into dst, and the
 * value's whole stored size into *value_len. Returns 0; NDS_ERANGE when the value ends before
 * offset + len; NDS_ENOTFOUND (no message) when the value does not exist; NDS_ECONFLICT (no
 * message) when it is no longer the version an earlier read of this reader saw; or an I/O error.
 * Every read of one reader sees the same stored version.
 */
typedef struct nds_part_reader {
    int (*read)(void *arg, uint64_t offset, size_t len, uint8_t *dst, uint64_t *value_len);
    void *arg;
} nds_part_reader;

/**
 * Receives a decoded value piece by piece (decode_pieces): bytes [offset, offset + len) of it in
 * data, which the receiver may change (a format swaps bytes there) and which is valid only during
 * the call. Pieces come in order and cover the value once. A nonzero return stops the decode and
 * is returned by it.
 */
typedef int (*nds_piece_sink)(void *arg, size_t offset, uint8_t *data, size_t len);

typedef struct nds_codec {
    /** NDS_CODEC_VERSION; checked at registration. Members are only appended. */
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
    /** Encodes in[0..len) into out (out->len is set to the encoded size; out may be grown). */
    int (*encode)(void *state, const uint8_t *in, size_t len, nds_buf *out);
    /**
     * Decodes in[0..len) into out[0..out_cap) and sets *out_len. A result that would exceed out_cap, or
     * corrupt or truncated input, is NDS_ECORRUPT with a message (never a crash, never a write past out_cap).
     */
    int (*decode)(void *state, const uint8_t *in, size_t len, uint8_t *out, size_t out_cap, size_t *out_len);
    /** The full configuration with defaults filled in, as a new JSON object including "id". */
    int (*config_json)(void *state, struct json_object **out);
    /* ---- version 2 ---- */
    /**
     * Optional (NULL: whole values only): decodes part of a value whose decoded size is exactly
     * out_len, filling at least out[begin..end) (and never writing outside out[0..out_len)), for
     * codecs that can do so without decoding it all (blosc: only the blocks holding the range).
     * Corrupt input, or a decoded size other than out_len: NDS_ECORRUPT as for decode.
     */
    int (*decode_part)(void *state, const uint8_t *in, size_t len, uint8_t *out, size_t out_len,
                       size_t begin, size_t end);
    /* ---- version 3 ---- */
    /**
     * Optional (NULL: decode_part reads the whole value): decode_part for a value in a store that
     * can read part of it, reading through r only the stored bytes the range needs (blosc: its
     * header, block index and the blocks holding the range). Errors of r other than NDS_ERANGE
     * (the value is shorter than it says: NDS_ECORRUPT) are returned as they are. Returns
     * NDS_EUNSUPPORTED (no message) when this value is better read whole (the caller then reads it
     * and calls decode_part, which reports any damage).
     */
    int (*decode_part_read)(void *state, const nds_part_reader *r, uint8_t *out, size_t out_len,
                            size_t begin, size_t end);
    /* ---- version 4 ---- */
    /**
     * Optional (NULL: whole values only): decodes in[0..len), whose decoded size must be out_len,
     * a piece at a time into the codec's own cache-sized buffers, handing each piece to sink
     * (blosc: one block at a time), so that the caller can copy it where it belongs while it is
     * still in the cache instead of decoding the whole value first and copying it afterwards.
     * Every piece starts at a multiple of align (the caller's element size, so that it can swap
     * bytes piece by piece). Returns NDS_EUNSUPPORTED (no message) before any piece when this
     * value is better decoded whole or its pieces would not be aligned (the caller then calls
     * decode, which reports any damage). Damage found after the first piece is NDS_ECORRUPT with
     * a message, as for decode.
     */
    int (*decode_pieces)(void *state, const uint8_t *in, size_t len, size_t out_len,
                         size_t align, nds_piece_sink sink, void *arg);
} nds_codec;

/** Registers a codec (replacing one of the same name). @return 0, or NDS_EINVAL on a bad version */
NDS_API int nds_codec_register(const nds_codec *codec);
/** Finds a codec by name; NULL when unknown. The pointer is valid for the process's lifetime. */
NDS_API const nds_codec *nds_codec_find(const char *name);

#ifdef __cplusplus
}
#endif
#endif
