/* Unit tests for the zarr v3 "packbits" array-to-bytes codec (zarr-extensions codecs/packbits,
 * formats/codecs/packbits3.c through formats/zarr3_codecs.c) and bitround on integers.
 *
 * No client installed here writes either (zarrita from npm and zarr-python 2.13 have neither), so
 * the stored bytes below are golden vectors worked out by hand from the registry's text: the
 * bit sequence least significant bit first within each byte, an element's bits from its least
 * significant one, the padding byte first or last (docs/codecs.md, "packbits"). Covers: bool,
 * int4, uint2, float4_e2m1fn, int16 with first_bit/last_bit (sign extension), uint16 and complex64
 * whole; the three padding encodings; inside sharding_indexed; a short, a long, a wrong padding
 * byte and non-zero padding bits refused (NDS_ECORRUPT naming the chunk); bad configurations.
 * bitround on uint32, uint8 and int8 (values worked out from the extension's text).
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support_check.h"
#include "support_format.h"

static char codecs_buf[512];

/* The codecs list [packbits with configuration cfg (JSON object text, or NULL)]. */
static const char *pb(const char *cfg) {
    if (cfg)
        snprintf(codecs_buf, sizeof codecs_buf, "[{\"name\":\"packbits\",\"configuration\":%s}]",
                 cfg);
    else
        snprintf(codecs_buf, sizeof codecs_buf, "[{\"name\":\"packbits\"}]");
    return codecs_buf;
}

/* Writes in (n elements of elem bytes) to a one-chunk array, checks the stored chunk against want
 * (len bytes) and that reading gives back expect (in when NULL). */
static void check_golden(const char *path, const char *dtype, const char *fill, const char *cfg,
                         const void *in, size_t n, size_t elem, const char *want, size_t len,
                         const void *expect) {
    char shape[32], url[96];
    snprintf(shape, sizeof shape, "[%zu]", n);
    snprintf(url, sizeof url, "memory://%s/", path);
    nds_array *a = zarr3_in_memory(path, zarr3_array_doc(shape, dtype, shape, fill, pb(cfg)));
    write_all(a, in);
    size_t got = 0;
    uint8_t *raw = get_raw(url, "c/0", &got);
    ck_assert_ptr_nonnull(raw);
    ck_assert_uint_eq(got, len);
    ck_assert_mem_eq(raw, want, len);
    free(raw);
    uint8_t *out = malloc(n * elem);
    read_all(a, out);
    ck_assert_mem_eq(out, expect ? expect : in, n * elem);
    free(out);
    nds_array_free(a);
}

START_TEST(golden_vectors) {
    /* bool, 11 elements, first_byte: 1 0 1 1 0 0 0 1 | 1 1 0 -> 0x8d, 0x03, 5 padding bits first
     * (numcodecs' PackBits, most significant bit first, gives 05 b1 c0). */
    const uint8_t b[11] = {1, 0, 1, 1, 0, 0, 0, 1, 1, 1, 0};
    check_golden("pb/bool", "bool", "false", "{\"padding_encoding\":\"first_byte\"}", b, 11, 1,
                 "\x05\x8d\x03", 3, NULL);
    /* int4 -1 2 -8 7 0, no padding byte (the default): nibbles f 2 | 8 7 | 0 -> 2f 78 00. */
    const int8_t i4[5] = {-1, 2, -8, 7, 0};
    check_golden("pb/int4", "int4", "0", NULL, i4, 5, 1, "\x2f\x78\x00", 3, NULL);
    /* uint2 3 0 1 2 | 1, last_byte: 11 00 01 10 from bit 0 up -> 0x93, then 0x01, then 6. */
    const uint8_t u2[5] = {3, 0, 1, 2, 1};
    check_golden("pb/uint2", "uint2", "0", "{\"padding_encoding\":\"last_byte\"}", u2, 5, 1,
                 "\x93\x01\x06", 3, NULL);
    /* float4_e2m1fn codes 1 (0.5) and 15 (-6): f1. */
    const uint8_t f4[2] = {0x1, 0xf};
    check_golden("pb/f4", "float4_e2m1fn", "0", "{\"padding_encoding\":\"none\"}", f4, 2, 1, "\xf1",
                 1, NULL);
    /* int16 bits 4..11: 0x0123 -> 0x12 (low bits dropped: reads 0x0120), -16 (0xfff0) -> 0xff,
     * which reads back sign-extended from bit 11. */
    const int16_t i16[2] = {0x0123, -16}, i16_back[2] = {0x0120, -16};
    check_golden("pb/i16", "int16", "0", "{\"first_bit\":4,\"last_bit\":11}", i16, 2, 2, "\x12\xff",
                 2, i16_back);
    /* uint16 whole: its little-endian bytes, as the bytes codec stores them. */
    const uint16_t u16[2] = {0x1234, 0xabcd};
    check_golden("pb/u16", "uint16", "0", NULL, u16, 2, 2, "\x34\x12\xcd\xab", 4, NULL);
    /* complex64 whole: two little-endian float32 components. */
    const float c64[2] = {1.0f, -2.0f};
    check_golden("pb/c64", "complex64", "[0.0, 0.0]", NULL, c64, 1, 8,
                 "\x00\x00\x80\x3f\x00\x00\x00\xc0", 8, NULL);
}
END_TEST

/* The configuration written back into zarr.json keeps what was given, padding named. */
START_TEST(config_json) {
    nds_array *a = zarr3_in_memory(
        "pb/cfg", zarr3_array_doc("[4]", "int8", "[4]", "0", pb("{\"last_bit\":3}")));
    nds_array_free(a);
    json_object *doc = get_json("memory://pb/cfg/", "zarr.json"), *codecs, *c0;
    ck_assert(json_object_object_get_ex(doc, "codecs", &codecs));
    c0 = json_object_array_get_idx(codecs, 0);
    ck_assert_str_eq(member_str(c0, "name"), "\"packbits\"");
    json_object *cfg = json_object_object_get(c0, "configuration");
    ck_assert_str_eq(member_str(cfg, "padding_encoding"), "\"none\"");
    ck_assert_str_eq(member_str(cfg, "last_bit"), "3");
    ck_assert_str_eq(member_str(cfg, "first_bit"), "absent");
    json_object_put(doc);
}
END_TEST

/* packbits as the inner codec of sharding_indexed: two inner chunks of 8 bools, a byte each. */
START_TEST(inside_sharding) {
    nds_array *a = zarr3_in_memory(
        "pb/shard",
        zarr3_array_doc("[16]", "bool", "[16]", "false",
                        "[{\"name\":\"sharding_indexed\",\"configuration\":{\"chunk_shape\":[8],"
                        "\"codecs\":[{\"name\":\"packbits\",\"configuration\":{"
                        "\"padding_encoding\":\"first_byte\"}}],\"index_codecs\":[{\"name\":"
                        "\"bytes\",\"configuration\":{\"endian\":\"little\"}},{\"name\":"
                        "\"crc32c\"}]}}]"));
    uint8_t in[16] = {1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}, out[16];
    write_all(a, in);
    size_t len = 0;
    uint8_t *raw = get_raw("memory://pb/shard/", "c/0", &len);
    ck_assert_uint_eq(len, 2 + 2 + 2 * 16 + 4); /* two inner chunks, index, crc32c */
    ck_assert_mem_eq(raw, "\x00\x03\x00\x80", 4);
    free(raw);
    read_all(a, out);
    ck_assert_mem_eq(out, in, sizeof in);
    nds_array_free(a);
}
END_TEST

/* packbits after transpose and before zstd: the round trip gives the array back, and the
 * stored bytes are zstd's frame of the transposed elements' nibbles. */
START_TEST(with_transpose_and_zstd) {
    nds_array *a = zarr3_in_memory(
        "pb/tz", zarr3_array_doc("[3,5]", "int4", "[3,5]", "0",
                                 "[{\"name\":\"transpose\",\"configuration\":{\"order\":[1,0]}},"
                                 "{\"name\":\"packbits\"},{\"name\":\"zstd\",\"configuration\":"
                                 "{\"level\":1}}]"));
    int8_t in[15], out[15];
    for (int i = 0; i < 15; i++) in[i] = (int8_t)(i % 16 - 8);
    write_all(a, in);
    read_all(a, out);
    ck_assert_mem_eq(out, in, sizeof in);
    nds_array_free(a);
}
END_TEST

/* Stored chunk c/0 of memory://pb/bad/ (bool [11], first_byte) replaced by raw; the read must
 * fail NDS_ECORRUPT naming the chunk and saying text. */
static void expect_corrupt(const void *raw, size_t len, const char *text) {
    nds_array *a = NULL;
    ck_assert_int_eq(open_spec(&a, "{\"driver\":\"zarr3\",\"kvstore\":\"memory://pb/bad/\"}"), 0);
    put_raw("memory://pb/bad/", "c/0", raw, len);
    uint8_t out[11];
    nds_box box;
    nds_box_full(&box, 1, (const uint64_t[]){11});
    EXPECT_ERR(nds_array_read(a, &box, out, NULL), NDS_ECORRUPT, text);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "c/0"));
    nds_array_free(a);
}

START_TEST(corrupt_payloads) {
    nds_array *a =
        zarr3_in_memory("pb/bad", zarr3_array_doc("[11]", "bool", "[11]", "false",
                                                  pb("{\"padding_encoding\":\"first_byte\"}")));
    nds_array_free(a);
    expect_corrupt("\x05\x8d", 2, "expected 3 encoded bytes, found 2");
    expect_corrupt("\x05\x8d\x03\x00", 4, "expected 3 encoded bytes, found 4");
    expect_corrupt("", 0, "expected 3 encoded bytes, found 0");
    expect_corrupt("\x04\x8d\x03", 3, "4 padding bits recorded, 5 expected");
    expect_corrupt("\x05\x8d\x83", 3, "padding bits of the last byte are not zero");
}
END_TEST

/* bitround on integers (zarr v3 extension): keepbits bits from the most significant set bit,
 * rounded half to even, saturating. Worked out from the extension's text: uint32 keepbits 3:
 * 1664 = 0b110_10000000 -> 0b110 << 8 = 1536 (below half); 1685 = 0b110_10010101 -> 0b111 << 8 =
 * 1792 (above half); 1280 = 0b101_00000000 stays; 0xffffffff would carry past 32 bits and
 * saturates to 0b111 << 29. uint8 keepbits 3: 15 = 0b1111 -> 0b1000_0 = 16 (a tie, rounded to the
 * even 0b100); 89 = 0b1011001 -> 0b110 << 4 = 96. int8 keepbits 3: -3 = 0xfd, whose most
 * significant set bit is the sign bit -> 0xe0 = -32; 5 -> 5 (3 bits). Decoding is the identity. */
START_TEST(bitround_integers) {
    nds_array *a = zarr3_in_memory(
        "br/u32",
        zarr3_array_doc("[6]", "uint32", "[6]", "0",
                        "[{\"name\":\"bitround\",\"configuration\":{\"keepbits\":3}},"
                        "{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}}]"));
    const uint32_t in[6] = {0, 1024, 1280, 1664, 1685, 4294967295u},
                   want[6] = {0, 1024, 1280, 1536, 1792, 3758096384u};
    uint32_t out[6];
    write_all(a, in);
    read_all(a, out);
    ck_assert_mem_eq(out, want, sizeof want);
    size_t len = 0;
    uint8_t *raw = get_raw("memory://br/u32/", "c/0", &len);
    ck_assert_uint_eq(len, sizeof want);
    ck_assert_mem_eq(raw + 12, "\x00\x06\x00\x00", 4); /* 1536 little-endian */
    free(raw);
    nds_array_free(a);

    a = zarr3_in_memory("br/u8", zarr3_array_doc("[5]", "uint8", "[5]", "0",
                                                 "[{\"name\":\"numcodecs.bitround\","
                                                 "\"configuration\":{\"keepbits\":3}}]"));
    const uint8_t u8[5] = {7, 15, 89, 128, 255}, u8_want[5] = {7, 16, 96, 128, 224};
    uint8_t u8_out[5];
    write_all(a, u8);
    read_all(a, u8_out);
    ck_assert_mem_eq(u8_out, u8_want, 5);
    nds_array_free(a);

    a = zarr3_in_memory("br/i8", zarr3_array_doc("[3]", "int8", "[3]", "0",
                                                 "[{\"name\":\"bitround\","
                                                 "\"configuration\":{\"keepbits\":3}}]"));
    const int8_t i8[3] = {-3, 5, -128}, i8_want[3] = {-32, 5, -128};
    int8_t i8_out[3];
    write_all(a, i8);
    read_all(a, i8_out);
    ck_assert_mem_eq(i8_out, i8_want, 3);
    nds_array_free(a);
}
END_TEST

START_TEST(bad_configurations) {
    EXPECT_ERR(zarr3_create_status("pb/r1", zarr3_array_doc("[4]", "bool", "[4]", "false",
                                                   pb("{\"padding_encoding\":\"middle\"}"))),
               NDS_EFORMAT, "\"padding_encoding\" must be");
    EXPECT_ERR(
        zarr3_create_status("pb/r2",
                            zarr3_array_doc("[4]", "int4", "[4]", "0", pb("{\"last_bit\":4}"))),
        NDS_EFORMAT, "last_bit");
    EXPECT_ERR(zarr3_create_status("pb/r3", zarr3_array_doc("[4]", "int16", "[4]", "0",
                                                   pb("{\"first_bit\":5,\"last_bit\":4}"))),
               NDS_EFORMAT, "\"last_bit\" (4) is less than \"first_bit\" (5)");
    EXPECT_ERR(zarr3_create_status("pb/r4",
                                   zarr3_array_doc("[4]", "float16", "[4]", "0", pb(NULL))),
               NDS_EUNSUPPORTED, "packbits does not support data type \"float16\"");
    EXPECT_ERR(zarr3_create_status("pb/r5", zarr3_array_doc("[4]", "bool", "[4]", "false",
                                                   pb("{\"bit_order\":\"msb\"}"))),
               NDS_EFORMAT, "unknown configuration member \"bit_order\"");
    EXPECT_ERR(zarr3_create_status("br/r1", zarr3_array_doc("[4]", "int16", "[4]", "0",
                                                   "[{\"name\":\"bitround\",\"configuration\":"
                                                   "{\"keepbits\":0}}]")),
               NDS_EFORMAT, "keepbits");
    EXPECT_ERR(zarr3_create_status("br/r2", zarr3_array_doc("[4]", "int16", "[4]", "0",
                                                   "[{\"name\":\"bitround\",\"configuration\":"
                                                   "{\"keepbits\":17}}]")),
               NDS_EFORMAT, "keepbits");
    EXPECT_ERR(zarr3_create_status("pb/r6", zarr3_array_doc("[4]", "bool", "[4]", "false",
                                                   "[{\"name\":\"packbits\"},\"bytes\"]")),
               NDS_EFORMAT, "a second array-to-bytes codec");
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("zarr3_packbits");
    TCase *tc = tcase_create("packbits");
    tcase_add_test(tc, golden_vectors);
    tcase_add_test(tc, config_json);
    tcase_add_test(tc, inside_sharding);
    tcase_add_test(tc, with_transpose_and_zstd);
    tcase_add_test(tc, corrupt_payloads);
    tcase_add_test(tc, bad_configurations);
    tcase_add_test(tc, bitround_integers);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return nds_test_run(suite()) ? EXIT_FAILURE : EXIT_SUCCESS; }
