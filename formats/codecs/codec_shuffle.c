/* The numcodecs "shuffle" codec (zarr v2 filter, zarr v3 "numcodecs.shuffle"): the bytes of
 * elements of "elementsize" bytes regrouped by position (all first bytes, then all second bytes,
 * ...), as numcodecs' Shuffle does. elementsize <= 1 copies. The data must be a whole number of
 * elements (numcodecs raises otherwise; here NDS_EFORMAT on encode, NDS_ECORRUPT on decode).
 * Config: "id", "elementsize" (default 4, numcodecs' default).
 *
 * Threading: instances are immutable. Ownership: encode grows the caller's nds_buf.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec_util.h"
#include "ndstore/sys/codec.h"
#include "internal/error.h"

static int shuf_create(void **state, const struct json_object *config, size_t elem_size) {
    (void)elem_size;
    return nds_int_config_create(state, config, "shuffle", "elementsize", 0, 1 << 20, 4);
}

static void shuf_destroy(void *state) { free(state); }

/* dst[j*count + i] = src[i*es + j] (forward) or its inverse. */
static void shuffle_bytes(const uint8_t *src, uint8_t *dst, size_t len, size_t es, bool forward) {
    size_t count = len / es;
    for (size_t i = 0; i < count; i++)
        for (size_t j = 0; j < es; j++) {
            if (forward)
                dst[j * count + i] = src[i * es + j];
            else
                dst[i * es + j] = src[j * count + i];
        }
}

static size_t elementsize(const void *state) {
    return (size_t)((const nds_int_config *)state)->value;
}

static int shuf_encode(void *state, const uint8_t *in, size_t len, nds_buf *out) {
    size_t es = elementsize(state);
    if (es > 1 && len % es)
        return nds_err(NDS_EFORMAT, "shuffle: %zu bytes is not a whole number of %zu-byte elements",
                       len, es);
    if (nds_buf_reserve(out, len ? len : 1) != 0)
        return nds_err(NDS_ENOMEM, "shuffle: out of memory");
    if (es > 1)
        shuffle_bytes(in, out->data, len, es, true);
    else if (len)
        memcpy(out->data, in, len);
    out->len = len;
    return 0;
}

static int shuf_decode_whole(void *state, const uint8_t *in, size_t len, uint8_t *out,
                             size_t out_cap, size_t *out_len) {
    size_t es = elementsize(state);
    if (es > 1 && len % es)
        return nds_err(NDS_ECORRUPT,
                       "shuffle: %zu bytes is not a whole number of %zu-byte elements", len, es);
    if (len > out_cap)
        return nds_err(NDS_ECORRUPT, "shuffle: decoded data exceeds the %zu bytes expected",
                       out_cap);
    if (es > 1)
        shuffle_bytes(in, out, len, es, false);
    else if (len)
        memcpy(out, in, len);
    *out_len = len;
    return 0;
}

static int shuf_config_json(void *state, struct json_object **out) {
    return nds_int_config_json(state, "shuffle", "elementsize", out);
}

extern const nds_codec nds_codec_shuffle;

/* Parts, readers and pieces: the generic fallback over the whole decode. */
static int shuf_decode(void *state, nds_decode_request *req) {
    return nds_codec_decode_fallback(&nds_codec_shuffle, state, req, shuf_decode_whole);
}

const nds_codec nds_codec_shuffle = {
    .version = NDS_CODEC_VERSION,
    .name = "shuffle",
    .create = shuf_create,
    .destroy = shuf_destroy,
    .encode = shuf_encode,
    .decode = shuf_decode,
    .config_json = shuf_config_json,
};
