/* The "crc32c" codec (zarr v3): encode appends the CRC-32C (Castagnoli) of the data as 4
 * little-endian bytes; decode checks and strips it ("crc32c mismatch" on failure). The checksum
 * itself is lib/crc32c.c. Config: {} (an "id" member is accepted and ignored; nothing else is).
 *
 * Threading: instances are stateless. Ownership: encode grows the caller's nds_buf; decode writes
 * only out[0..out_cap).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "ndstore/sys/codec.h"
#include "internal/crc32c.h"
#include "internal/error.h"
#include "internal/util.h"

/* ---- codec vtable ---------------------------------------------------------------------------- */

static int crc_create(void **state, const struct json_object *config, size_t elem_size) {
    (void)elem_size;
    if (config && !json_object_is_type(config, json_type_object))
        return nds_err(NDS_EFORMAT, "crc32c config: expected a json object");
    if (config) {
        json_object_object_foreach((json_object *)config, key, val) {
            (void)val;
            if (strcmp(key, "id") != 0)
                return nds_err(NDS_EFORMAT, "crc32c config: unknown member \"%s\"", key);
        }
    }
    *state = NULL; /* stateless */
    return 0;
}

static void crc_destroy(void *state) { (void)state; }

static int crc_encode(void *state, const uint8_t *in, size_t len, nds_buf *out) {
    (void)state;
    if (len > SIZE_MAX - 4) return nds_err(NDS_ELIMIT, "crc32c: input too large");
    if (nds_buf_reserve(out, len + 4) != 0) return nds_err(NDS_ENOMEM, "crc32c: out of memory");
    if (len) memcpy(out->data, in, len);
    uint32_t c = nds_crc32c(in, len);
    nds_store_le32(out->data + len, c);
    out->len = len + 4;
    return 0;
}

static int crc_decode_whole(void *state, const uint8_t *in, size_t len, uint8_t *out,
                            size_t out_cap, size_t *out_len) {
    (void)state;
    if (len < 4)
        return nds_err(NDS_ECORRUPT, "crc32c: %zu bytes is too short to hold a checksum", len);
    size_t n = len - 4;
    uint32_t stored = nds_load_le32(in + n);
    uint32_t actual = nds_crc32c(in, n);
    if (stored != actual)
        return nds_err(NDS_ECORRUPT, "crc32c mismatch (stored %08x, computed %08x)", stored,
                       actual);
    if (n > out_cap)
        return nds_err(NDS_ECORRUPT, "crc32c: decoded data exceeds the %zu bytes expected",
                       out_cap);
    if (n) memcpy(out, in, n);
    *out_len = n;
    return 0;
}

static int crc_config_json(void *state, struct json_object **out) {
    (void)state;
    *out = json_object_new_object();
    if (!*out) return nds_err(NDS_ENOMEM, "crc32c: out of memory");
    json_object_object_add(*out, "id", json_object_new_string("crc32c"));
    return 0;
}

extern const nds_codec nds_codec_crc32c;

/* Parts, readers and pieces: the generic fallback over the whole decode. */
static int crc_decode(void *state, nds_decode_request *req) {
    return nds_codec_decode_fallback(&nds_codec_crc32c, state, req, crc_decode_whole);
}

const nds_codec nds_codec_crc32c = {
    .version = NDS_CODEC_VERSION,
    .name = "crc32c",
    .create = crc_create,
    .destroy = crc_destroy,
    .encode = crc_encode,
    .decode = crc_decode,
    .config_json = crc_config_json,
};
