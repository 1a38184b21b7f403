/* Unit tests for the array codecs and numcodecs filters (formats/codecs/array_codecs.c) and the
 * registry codecs adler32, fletcher32 and shuffle.
 *
 * Covers: golden vectors (filter_vectors.inc: inputs, encodings and decodings computed once by
 * Debian's numcodecs 0.11 with tests/unit/filter_vectors.py and kept here as bytes; fletcher32's
 * from the HDF5 algorithm as described, since numcodecs 0.11 lacks it): our encode gives numcodecs'
 * bytes and our decode of numcodecs' bytes gives numcodecs' values; lossless round trips;
 * corrupt checksums and wrong sizes refused (NDS_ECORRUPT naming the codec); bad configs refused
 * naming the member or the id; and, when /usr/bin/python3 has numcodecs, the vectors file matches
 * a fresh run of the generator.
 */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "ndstore/errors.h"
#include "ndstore/sys/codec.h"
#include "support_check.h"
#include "../../formats/codecs/array_codecs.h"

typedef struct vector {
    const char *name, *dtype, *filters;
    const char *in;
    size_t in_len;
    const char *enc;
    size_t enc_len;
    const char *dec;
    size_t dec_len;
} vector;

static const vector vectors[] = {
#include "filter_vectors.inc"
};
#define VECTOR_COUNT (sizeof vectors / sizeof vectors[0])

static nds_filter_chain *chain_for(const char *dtype, const char *filters, size_t nbytes) {
    nds_np_dtype t;
    NDS_OK(nds_np_dtype_parse(dtype, "test", "dtype", &t));
    json_object *list = json_tokener_parse(filters);
    ck_assert_ptr_nonnull(list);
    nds_filter_chain *c = NULL;
    NDS_OK(nds_filter_chain_parse(list, t, nbytes, false, "test", "filters", &c));
    json_object_put(list);
    return c;
}

/* Parsing filters must fail with code and a message containing text. */
static void parse_fails(const char *dtype, const char *filters, size_t nbytes, int code,
                        const char *text) {
    nds_np_dtype t;
    NDS_OK(nds_np_dtype_parse(dtype, "test", "dtype", &t));
    json_object *list = json_tokener_parse(filters);
    ck_assert_ptr_nonnull(list);
    nds_filter_chain *c = NULL;
    int rc = nds_filter_chain_parse(list, t, nbytes, false, "test", "filters", &c);
    json_object_put(list);
    ck_assert_msg(rc == code, "%s: expected %d, got %d (%s)", filters, code, rc,
                  nds_error_last()->message);
    ck_assert_msg(strstr(nds_error_last()->message, text), "%s: message \"%s\" lacks \"%s\"",
                  filters, nds_error_last()->message, text);
    ck_assert_ptr_null(c);
}

static void assert_bytes(const char *what, const char *name, const uint8_t *got, size_t got_len,
                         const char *want, size_t want_len) {
    ck_assert_msg(got_len == want_len, "%s %s: %zu bytes, want %zu", name, what, got_len, want_len);
    for (size_t i = 0; i < want_len; i++)
        ck_assert_msg(got[i] == (uint8_t)want[i], "%s %s: byte %zu is %02x, want %02x", name, what,
                      i, got[i], (uint8_t)want[i]);
}

START_TEST(test_golden_encode) {
    const vector *v = &vectors[_i];
    nds_filter_chain *c = chain_for(v->dtype, v->filters, v->in_len);
    ck_assert_uint_eq(nds_filter_chain_encoded_size(c), v->enc_len);
    nds_buf out = {0};
    NDS_OK(nds_filter_chain_encode(c, (const uint8_t *)v->in, &out));
    assert_bytes("encode", v->name, out.data, out.len, v->enc, v->enc_len);
    nds_buf_dispose(&out);
    nds_filter_chain_free(c);
}
END_TEST

START_TEST(test_golden_decode) {
    const vector *v = &vectors[_i];
    nds_filter_chain *c = chain_for(v->dtype, v->filters, v->in_len);
    uint8_t *out = malloc(v->dec_len + 1);
    NDS_OK(nds_filter_chain_decode(c, (const uint8_t *)v->enc, v->enc_len, out));
    assert_bytes("decode", v->name, out, v->in_len, v->dec, v->dec_len);
    free(out);
    nds_filter_chain_free(c);
}
END_TEST

/* Lossless filters give the input back (and the decode of our encode equals numcodecs'). */
START_TEST(test_roundtrip) {
    const vector *v = &vectors[_i];
    nds_filter_chain *c = chain_for(v->dtype, v->filters, v->in_len);
    nds_buf enc = {0};
    NDS_OK(nds_filter_chain_encode(c, (const uint8_t *)v->in, &enc));
    uint8_t *out = malloc(v->in_len + 1);
    NDS_OK(nds_filter_chain_decode(c, enc.data, enc.len, out));
    assert_bytes("decode(encode)", v->name, out, v->in_len, v->dec, v->dec_len);
    free(out);
    nds_buf_dispose(&enc);
    nds_filter_chain_free(c);
}
END_TEST

/* A checksum that does not match is NDS_ECORRUPT naming the codec; so is a wrong size. */
START_TEST(test_corrupt_checksums) {
    static const char *const ids[] = {"adler32", "fletcher32", "crc32"};
    const char *id = ids[_i];
    char filters[64];
    snprintf(filters, sizeof filters, "[{\"id\":\"%s\"}]", id);
    uint8_t data[37];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)(i * 7 + 1);
    nds_filter_chain *c = chain_for("|u1", filters, sizeof data);
    nds_buf enc = {0};
    NDS_OK(nds_filter_chain_encode(c, data, &enc));
    uint8_t out[sizeof data];
    for (size_t pos = 0; pos < enc.len; pos += 5) {
        enc.data[pos] ^= 0x10;
        int rc = nds_filter_chain_decode(c, enc.data, enc.len, out);
        ck_assert_msg(rc == NDS_ECORRUPT, "%s: flipped byte %zu accepted", id, pos);
        ck_assert_msg(strstr(nds_error_last()->message, id) &&
                          strstr(nds_error_last()->message, "mismatch"),
                      "%s: message \"%s\"", id, nds_error_last()->message);
        enc.data[pos] ^= 0x10;
    }
    NDS_OK(nds_filter_chain_decode(c, enc.data, enc.len, out));
    ck_assert_int_eq(nds_filter_chain_decode(c, enc.data, enc.len - 1, out), NDS_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "expected 41 encoded bytes"));
    /* The registry codec alone (zarr v3 numcodecs.<id>, v2 compressor) refuses too. */
    const nds_codec *codec = nds_codec_find(id);
    ck_assert_ptr_nonnull(codec);
    void *st = NULL;
    NDS_OK(codec->create(&st, NULL, 1));
    size_t got = 0;
    enc.data[3] ^= 1;
    ck_assert_int_eq(nds_codec_decode(codec, st, enc.data, enc.len, out, sizeof out, &got),
                     NDS_ECORRUPT);
    ck_assert_int_eq(nds_codec_decode(codec, st, enc.data, 3, out, sizeof out, &got), NDS_ECORRUPT);
    codec->destroy(st);
    nds_buf_dispose(&enc);
    nds_filter_chain_free(c);
}
END_TEST

/* adler32 with "location": "end" (numcodecs >= 0.14) puts the checksum after the data. */
START_TEST(test_adler32_location) {
    const uint8_t data[] = "Wikipedia"; /* Adler-32 0x11e60398, RFC 1950's worked example */
    nds_filter_chain *c = chain_for("|u1", "[{\"id\":\"adler32\",\"location\":\"end\"}]", 9);
    nds_buf enc = {0};
    NDS_OK(nds_filter_chain_encode(c, data, &enc));
    ck_assert_uint_eq(enc.len, 13);
    ck_assert_mem_eq(enc.data, data, 9);
    ck_assert_mem_eq(enc.data + 9, "\x98\x03\xe6\x11", 4);
    nds_buf_dispose(&enc);
    nds_filter_chain_free(c);
    parse_fails("|u1", "[{\"id\":\"adler32\",\"location\":\"middle\"}]", 9, NDS_EFORMAT,
                "\"location\" must be \"start\" or \"end\"");
}
END_TEST

START_TEST(test_packbits_corrupt) {
    nds_filter_chain *c = chain_for("|b1", "[{\"id\":\"packbits\"}]", 13);
    uint8_t enc[3] = {2, 0xff, 0xff}, out[13];
    ck_assert_int_eq(nds_filter_chain_decode(c, enc, 3, out), NDS_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "padding bits"));
    ck_assert_int_eq(nds_filter_chain_decode(c, enc, 2, out), NDS_ECORRUPT);
    enc[0] = 3;
    NDS_OK(nds_filter_chain_decode(c, enc, 3, out));
    for (size_t i = 0; i < 13; i++) ck_assert_uint_eq(out[i], 1);
    nds_filter_chain_free(c);
}
END_TEST

START_TEST(test_bad_configs) {
    parse_fails("<i2", "[{\"id\":\"vlen-utf8\"}]", 8, NDS_EUNSUPPORTED,
                "filters[0]: filter \"vlen-utf8\" is not supported");
    parse_fails("<i2", "[{\"id\":\"zlib\",\"level\":1}]", 8, NDS_EUNSUPPORTED, "\"zlib\"");
    parse_fails("<i2", "[{\"id\":\"delta\"}]", 8, NDS_EFORMAT, "missing member \"dtype\"");
    parse_fails("<i2", "[{\"id\":\"delta\",\"dtype\":\"<i2\",\"nope\":1}]", 8, NDS_EFORMAT,
                "unknown configuration member \"nope\"");
    parse_fails("<i2", "[{\"id\":\"delta\",\"dtype\":\"<U4\"}]", 8, NDS_EUNSUPPORTED,
                "\"dtype\" \"<U4\" is not a supported NumPy type");
    parse_fails("<i2", "[{\"id\":\"delta\",\"dtype\":\"<i8\"}]", 6, NDS_EFORMAT,
                "6 bytes are not a whole number of 8-byte elements");
    parse_fails("<i2", "[{\"id\":\"bitround\",\"keepbits\":3}]", 8, NDS_EUNSUPPORTED,
                "bitround needs float16/32/64 data");
    parse_fails("<f4", "[{\"id\":\"bitround\",\"keepbits\":24}]", 8, NDS_EFORMAT, "keepbits");
    parse_fails(">f4", "[{\"id\":\"bitround\",\"keepbits\":3}]", 8, NDS_EUNSUPPORTED, "big-endian");
    parse_fails("<i2", "[{\"id\":\"packbits\"}]", 8, NDS_EUNSUPPORTED, "1-byte (bool)");
    parse_fails("<f8", "[{\"id\":\"quantize\",\"digits\":2,\"dtype\":\"<i8\"}]", 8, NDS_EFORMAT,
                "only floating point");
    parse_fails("<f8",
                "[{\"id\":\"fixedscaleoffset\",\"scale\":\"x\",\"offset\":0,"
                "\"dtype\":\"<f8\"}]",
                8, NDS_EFORMAT, "\"scale\" must be a number");
    parse_fails("<f8", "[{\"id\":\"astype\",\"encode_dtype\":\"<f4\"}]", 8, NDS_EFORMAT,
                "missing member \"decode_dtype\"");
    parse_fails("<f8", "[5]", 8, NDS_EFORMAT, "filters[0]: expected a codec object");
    parse_fails("<u4", "[{\"id\":\"shuffle\",\"elementsize\":-1}]", 8, NDS_EFORMAT, "elementsize");
    parse_fails("|i1", "[{\"id\":\"astype\",\"encode_dtype\":\"<i8\",\"decode_dtype\":\"|i1\"}]",
                (size_t)1 << 29, NDS_ELIMIT, "more than 2 GiB");
}
END_TEST

/* The vectors file is what numcodecs computes today (skipped without numcodecs). */
START_TEST(test_vectors_current) {
    if (system("/usr/bin/python3 -c 'import numcodecs' 2>/dev/null") != 0) {
        fprintf(stderr, "test_codecs_filters: numcodecs not importable; vectors not re-checked\n");
        return;
    }
    const char *src = __FILE__;
    const char *slash = strrchr(src, '/');
    int dirlen = slash ? (int)(slash - src) : 1;
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 '%.*s/filter_vectors.py' | cmp -s - '%.*s/filter_vectors.inc'",
             dirlen, slash ? src : ".", dirlen, slash ? src : ".");
    ck_assert_msg(system(cmd) == 0, "filter_vectors.inc differs from numcodecs' output: %s", cmd);
}
END_TEST

static Suite *filters_suite(void) {
    Suite *s = suite_create("codecs_filters");
    TCase *tc = tcase_create("golden");
    tcase_add_loop_test(tc, test_golden_encode, 0, VECTOR_COUNT);
    tcase_add_loop_test(tc, test_golden_decode, 0, VECTOR_COUNT);
    tcase_add_loop_test(tc, test_roundtrip, 0, VECTOR_COUNT);
    tcase_add_test(tc, test_vectors_current);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_add_loop_test(tc, test_corrupt_checksums, 0, 3);
    tcase_add_test(tc, test_adler32_location);
    tcase_add_test(tc, test_packbits_corrupt);
    tcase_add_test(tc, test_bad_configs);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return nds_test_run(filters_suite()) ? EXIT_FAILURE : EXIT_SUCCESS; }
