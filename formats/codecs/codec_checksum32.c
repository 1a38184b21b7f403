/* The numcodecs 32-bit checksum codecs "crc32", "adler32" and "fletcher32" (zarr v2 filters or
 * compressors; zarr v3 "numcodecs.crc32", ".adler32", ".fletcher32"): encode adds the checksum of
 * the data as 4 little-endian bytes, decode verifies and strips it (NDS_ECORRUPT "<id> mismatch").
 *
 * Layouts, as numcodecs writes them: crc32 (zlib's CRC-32, computed by libdeflate) and adler32
 * (Adler-32 as zlib computes it) sit before the data by default (numcodecs' Checksum32, "location":
 * "start"; numcodecs >= 0.14 also writes "end"); fletcher32 (HDF5's Fletcher-32 over big-endian
 * 16-bit words, an odd last byte as the high byte of a word) always follows the data. Config: "id",
 * and "location" for crc32 and adler32.
 *
 * Threading: instances are immutable. Ownership: encode grows the caller's nds_buf; decode writes
 * only out[0..out_cap).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <libdeflate.h>

#include "ndstore/sys/codec.h"
#include "internal/error.h"
#include "internal/util.h"

typedef struct ck_state {
    const char *id;
    bool at_end; /* the checksum follows the data */
} ck_state;

/* Adler-32 (RFC 1950, zlib's adler32 from its initial value 1), reduced mod 65521 every 5552
 * bytes, the most that cannot overflow 32 bits. */
static uint32_t adler32_of(const uint8_t *p, size_t n) {
    uint32_t a = 1, b = 0;
    while (n) {
        size_t t = n > 5552 ? 5552 : n;
        n -= t;
        for (; t; t--) {
            a += *p++;
            b += a;
        }
        a %= 65521;
        b %= 65521;
    }
    return b << 16 | a;
}

/* HDF5's Fletcher-32: sums of big-endian 16-bit words, reduced mod 65535 every 360 words. */
static uint32_t nds_fletcher32(const uint8_t *p, size_t n) {
    uint32_t sum1 = 0, sum2 = 0;
    size_t words = n / 2;
    while (words) {
        size_t t = words > 360 ? 360 : words;
        words -= t;
        for (; t; t--, p += 2) {
            sum1 += (uint32_t)p[0] << 8 | p[1];
            sum2 += sum1;
        }
        sum1 = (sum1 & 0xffff) + (sum1 >> 16);
        sum2 = (sum2 & 0xffff) + (sum2 >> 16);
    }
    if (n % 2) {
        sum1 += (uint32_t)p[0] << 8;
        sum2 += sum1;
        sum1 = (sum1 & 0xffff) + (sum1 >> 16);
        sum2 = (sum2 & 0xffff) + (sum2 >> 16);
    }
    sum1 = (sum1 & 0xffff) + (sum1 >> 16);
    sum2 = (sum2 & 0xffff) + (sum2 >> 16);
    return sum2 << 16 | sum1;
}

static uint32_t checksum_of(const ck_state *s, const uint8_t *p, size_t n) {
    if (s->id[0] == 'c') return libdeflate_crc32(0, p, n); /* zlib's CRC-32 */
    return s->id[0] == 'a' ? adler32_of(p, n) : nds_fletcher32(p, n);
}

static int ck_create(void **state, const struct json_object *config, const char *id,
                     bool location_allowed, bool dflt_end) {
    bool at_end = dflt_end;
    if (config && !json_object_is_type(config, json_type_object))
        return nds_err(NDS_EFORMAT, "%s config: expected a json object", id);
    if (config) {
        json_object_object_foreach((json_object *)config, key, val) {
            if (strcmp(key, "id") == 0) continue;
            if (!location_allowed || strcmp(key, "location") != 0)
                return nds_err(NDS_EFORMAT, "%s config: unknown member \"%.40s\"", id, key);
            const char *loc =
                json_object_is_type(val, json_type_string) ? json_object_get_string(val) : "";
            if (strcmp(loc, "start") != 0 && strcmp(loc, "end") != 0)
                return nds_err(NDS_EFORMAT, "%s config: \"location\" must be \"start\" or \"end\"",
                               id);
            at_end = loc[0] == 'e';
        }
    }
    ck_state *s = malloc(sizeof *s);
    if (!s) return nds_err(NDS_ENOMEM, "%s: out of memory", id);
    s->id = id;
    s->at_end = at_end;
    *state = s;
    return 0;
}

static int adler_create(void **state, const struct json_object *config, size_t elem_size) {
    (void)elem_size;
    return ck_create(state, config, "adler32", true, false);
}

static int crc32_create(void **state, const struct json_object *config, size_t elem_size) {
    (void)elem_size;
    return ck_create(state, config, "crc32", true, false);
}

static int fletcher_create(void **state, const struct json_object *config, size_t elem_size) {
    (void)elem_size;
    return ck_create(state, config, "fletcher32", false, true);
}

static void ck_destroy(void *state) { free(state); }

static int ck_encode(void *state, const uint8_t *in, size_t len, nds_buf *out) {
    const ck_state *s = state;
    if (len > SIZE_MAX - 4) return nds_err(NDS_ELIMIT, "%s: input too large", s->id);
    if (nds_buf_reserve(out, len + 4) != 0) return nds_err(NDS_ENOMEM, "%s: out of memory", s->id);
    uint8_t *data = out->data + (s->at_end ? 0 : 4);
    if (len) memcpy(data, in, len);
    nds_store_le32(out->data + (s->at_end ? len : 0), checksum_of(s, in, len));
    out->len = len + 4;
    return 0;
}

static int ck_decode_whole(void *state, const uint8_t *in, size_t len, uint8_t *out, size_t out_cap,
                           size_t *out_len) {
    const ck_state *s = state;
    if (len < 4)
        return nds_err(NDS_ECORRUPT, "%s: %zu bytes is too short to hold a checksum", s->id, len);
    size_t n = len - 4;
    const uint8_t *data = in + (s->at_end ? 0 : 4);
    uint32_t stored = nds_load_le32(in + (s->at_end ? n : 0));
    uint32_t actual = checksum_of(s, data, n);
    if (stored != actual)
        return nds_err(NDS_ECORRUPT, "%s mismatch (stored %08x, computed %08x)", s->id, stored,
                       actual);
    if (n > out_cap)
        return nds_err(NDS_ECORRUPT, "%s: decoded data exceeds the %zu bytes expected", s->id,
                       out_cap);
    if (n) memcpy(out, data, n);
    *out_len = n;
    return 0;
}

static int ck_config_json(void *state, struct json_object **out) {
    const ck_state *s = state;
    *out = json_object_new_object();
    if (!*out) return nds_err(NDS_ENOMEM, "%s: out of memory", s->id);
    json_object_object_add(*out, "id", json_object_new_string(s->id));
    /* numcodecs before 0.14 knows no "location": say it only when it is not the default. */
    if (s->id[0] != 'f' && s->at_end)
        json_object_object_add(*out, "location", json_object_new_string("end"));
    return 0;
}

extern const nds_codec nds_codec_adler32, nds_codec_fletcher32, nds_codec_crc32;

/* The codec an instance belongs to (the three share their functions). */
static const nds_codec *ck_codec(const ck_state *s) {
    if (s->id[0] == 'a') return &nds_codec_adler32;
    return s->id[0] == 'f' ? &nds_codec_fletcher32 : &nds_codec_crc32;
}

/* Parts, readers and pieces: the generic fallback over the whole decode. */
static int ck_decode(void *state, nds_decode_request *req) {
    return nds_codec_decode_fallback(ck_codec(state), state, req, ck_decode_whole);
}

const nds_codec nds_codec_adler32 = {
    .version = NDS_CODEC_VERSION,
    .name = "adler32",
    .create = adler_create,
    .destroy = ck_destroy,
    .encode = ck_encode,
    .decode = ck_decode,
    .config_json = ck_config_json,
};

const nds_codec nds_codec_fletcher32 = {
    .version = NDS_CODEC_VERSION,
    .name = "fletcher32",
    .create = fletcher_create,
    .destroy = ck_destroy,
    .encode = ck_encode,
    .decode = ck_decode,
    .config_json = ck_config_json,
};

const nds_codec nds_codec_crc32 = {
    .version = NDS_CODEC_VERSION,
    .name = "crc32",
    .create = crc32_create,
    .destroy = ck_destroy,
    .encode = ck_encode,
    .decode = ck_decode,
    .config_json = ck_config_json,
};
