/* The "lz4" codec: numcodecs.lz4.LZ4's framing, a 4-byte little-endian uncompressed size followed
 * by one raw LZ4 block (not the LZ4 frame format).
 *
 * Config (numcodecs names): {"acceleration": any 32-bit int, default 1}. As in numcodecs (which
 * passes it straight to LZ4_compress_fast), values below 1 act as 1 and values above 65537 as
 * 65537; the configured value is kept for config_json. Limits: LZ4 blocks hold at most
 * LZ4_MAX_INPUT_SIZE (about 1.97 GiB); larger input is NDS_ELIMIT. Decode checks the declared size
 * against out_cap and against the size actually decoded. Omits: the LZ4 frame format and LZ4HC.
 *
 * Threading: an instance is immutable; LZ4_compress_fast keeps its state on the stack, and
 * LZ4_decompress_safe needs none, so there is nothing to cache. Ownership: encode grows the
 * caller's nds_buf; decode writes only out[0..out_cap).
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <lz4.h>
#include <json-c/json.h>

#include "ndstore/sys/codec.h"
#include "internal/error.h"
#include "internal/json_util.h"
#include "internal/util.h"

#define DOC "lz4 config"
#define HEADER 4

typedef struct lz4_state {
    int acceleration; /* as configured */
} lz4_state;

static int lz4_create(void **state, const struct json_object *config, size_t elem_size) {
    (void)elem_size;
    int64_t accel = 1;
    if (config) {
        if (!json_object_is_type(config, json_type_object))
            return nds_err(NDS_EFORMAT, DOC ": expected a json object");
        json_object_object_foreach((json_object *)config, key, val) {
            (void)val;
            if (strcmp(key, "id") && strcmp(key, "acceleration"))
                return nds_err(NDS_EFORMAT, DOC ": unknown member \"%s\"", key);
        }
        int rc = nds_json_get_int(config, "acceleration", true, INT_MIN, INT_MAX, DOC, &accel);
        if (rc) return rc;
    }
    lz4_state *s = malloc(sizeof *s);
    if (!s) return nds_err(NDS_ENOMEM, "lz4: out of memory");
    s->acceleration = (int)accel;
    *state = s;
    return 0;
}

static void lz4_destroy(void *state) { free(state); }

static int lz4_encode(void *state, const uint8_t *in, size_t len, nds_buf *out) {
    const lz4_state *s = state;
    if (len > LZ4_MAX_INPUT_SIZE)
        return nds_err(NDS_ELIMIT, "lz4: chunk of %zu bytes exceeds lz4's limit of %d bytes", len,
                       LZ4_MAX_INPUT_SIZE);
    int bound = LZ4_compressBound((int)len);
    int rc = nds_buf_reserve(out, HEADER + (size_t)bound);
    if (rc) return rc;
    uint8_t *p = out->data;
    nds_store_le32(p, (uint32_t)len);
    static const char empty[1];
    int n = LZ4_compress_fast(len ? (const char *)in : empty, (char *)p + HEADER, (int)len, bound,
                              s->acceleration);
    if (n <= 0) return nds_err(NDS_EINTERNAL, "lz4: compression failed");
    out->len = HEADER + (size_t)n;
    return 0;
}

static int lz4_decode_whole(void *state, const uint8_t *in, size_t len, uint8_t *out,
                            size_t out_cap, size_t *out_len) {
    (void)state;
    if (len < HEADER)
        return nds_err(NDS_ECORRUPT, "lz4: truncated header (%zu bytes, need %d)", len, HEADER);
    uint32_t n = nds_load_le32(in);
    if (n > out_cap)
        return nds_err(NDS_ECORRUPT, "lz4: header declares %u bytes, more than the %zu expected", n,
                       out_cap);
    if (n > INT_MAX || len - HEADER > INT_MAX)
        return nds_err(NDS_ECORRUPT, "lz4: block too large (%u bytes declared, %zu present)", n,
                       len - HEADER);
    uint8_t dummy;
    int got = LZ4_decompress_safe((const char *)in + HEADER, (char *)(n ? out : &dummy),
                                  (int)(len - HEADER), (int)n);
    if (got < 0)
        return nds_err_cause(NDS_ECORRUPT, NDS_CAUSE_OTHER, got, "lz4: corrupt or truncated block");
    if ((uint32_t)got != n)
        return nds_err(NDS_ECORRUPT, "lz4: block decoded to %d bytes, header declares %u", got, n);
    *out_len = n;
    return 0;
}

static int lz4_config_json(void *state, struct json_object **out) {
    const lz4_state *s = state;
    json_object *o = json_object_new_object();
    if (!o) return nds_err(NDS_ENOMEM, "lz4: out of memory");
    json_object_object_add(o, "id", json_object_new_string("lz4"));
    json_object_object_add(o, "acceleration", json_object_new_int(s->acceleration));
    *out = o;
    return 0;
}

extern const nds_codec nds_codec_lz4;

/* Parts, readers and pieces: the generic fallback over the whole decode. */
static int lz4_decode(void *state, nds_decode_request *req) {
    return nds_codec_decode_fallback(&nds_codec_lz4, state, req, lz4_decode_whole);
}

const nds_codec nds_codec_lz4 = {
    .version = NDS_CODEC_VERSION,
    .name = "lz4",
    .create = lz4_create,
    .destroy = lz4_destroy,
    .encode = lz4_encode,
    .decode = lz4_decode,
    .config_json = lz4_config_json,
};
