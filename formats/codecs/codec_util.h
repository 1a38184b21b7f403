/* Helpers shared by the byte codecs in formats/codecs/: configs made of one integer member
 * (bz2 "level", xz "preset"), and decoding concatenated streams the way Python's bz2 and lzma
 * modules do (which numcodecs and zarr-python use).
 *
 * Private to formats/codecs/. Reentrant: no state beyond the arguments. Errors come back as
 * NDS_E* codes with a message naming the codec.
 */
#ifndef NDS_FORMATS_CODEC_UTIL_H
#define NDS_FORMATS_CODEC_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

/** The state of a codec configured by one integer member: immutable, freed with free(). */
typedef struct nds_int_config {
    int64_t value;
} nds_int_config;

/**
 * Creates the state of codec `name` from config: NULL, or an object with at most "id" and member
 * (an integer in [min, max]; dflt when absent). NDS_EFORMAT "<name> config: ..." naming the member
 * otherwise, NDS_ENOMEM.
 */
int nds_int_config_create(void **state, const json_object *config, const char *name,
                          const char *member, int64_t min, int64_t max, int64_t dflt);
/** The config of state as {"id": name, member: value}. */
int nds_int_config_json(const void *state, const char *name, const char *member, json_object **out);

/** What decoding one stream found. */
typedef struct nds_stream_result {
    size_t used;     /**< input bytes consumed */
    size_t produced; /**< output bytes written */
    long lib_rc;     /**< the library's last result, for messages and as the error's cause */
    bool overflow;   /**< out of output room with input left: more data than expected */
    bool not_stream; /**< the bytes do not start a valid stream (dropped after a complete one) */
    uint64_t mem;    /**< decoder memory the stream asked for, when that was the failure */
} nds_stream_result;

/** Decodes one stream from in[0..len) into out[0..cap), filling r (zeroed by the caller): 0 at the
 * stream's end, NDS_ECORRUPT without a message otherwise (the caller decides whether it is one). */
typedef int (*nds_stream_decode_fn)(const uint8_t *in, size_t len, uint8_t *out, size_t cap,
                                    nds_stream_result *r);
/** Sets the message for a stream that failed at byte `at` of the input; returns the error code. */
typedef int (*nds_stream_fail_fn)(const nds_stream_result *r, size_t out_cap, size_t at);

/**
 * Decodes in[0..len) as concatenated streams into out[0..out_cap) (out may be NULL when out_cap is
 * 0), as Python's bz2.decompress and lzma.decompress do: the streams' data are joined; once one
 * stream has decoded, bytes that do not start a valid stream (r.not_stream) end the input; any
 * other failure is an error, reported through fail. *out_len gets the bytes written.
 */
int nds_decode_streams(const uint8_t *in, size_t len, uint8_t *out, size_t out_cap, size_t *out_len,
                       nds_stream_decode_fn decode_one, nds_stream_fail_fn fail);

#endif
