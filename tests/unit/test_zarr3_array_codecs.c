/* Unit tests for the zarr v3 array-to-array codecs of issue 20 (bitround, numcodecs.delta,
 * .fixedscaleoffset, .quantize, .astype, .packbits) and the numcodecs checksums and shuffle in a v3
 * chain (formats/zarr3_codecs.c over formats/codecs/array_codecs.c).
 *
 * Covers: stored chunks equal to numcodecs' encoding (bytes computed once with Debian's numcodecs
 * 0.11 and kept here); round trips through nds_array; what the bytes codec sees (the array codecs'
 * output type: endianness applies to it); corrupt adler32/fletcher32 chunks refused naming the
 * chunk and the codec; refusals (transpose together with them, sharding after them, bitround on
 * bools).
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support_check.h"
#include "support_format.h"

#define BYTES_LE "{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}}"
#define BYTES_BE "{\"name\":\"bytes\",\"configuration\":{\"endian\":\"big\"}}"

/* numcodecs 0.11: Delta(dtype='<i4', astype='<i2').encode(np.array([100, 103, 99, 99], '<i4'))
 * is 64 00 03 00 fc ff 00 00; FixedScaleOffset(offset=1000, scale=10, dtype='<f8', astype='u1')
 * .encode([1000.0, 1000.25, 1000.35, 1025.5]) is 00 02 04 ff (1000.25 -> 2.5 -> 2: half to even).
 */
START_TEST(stored_bytes_are_numcodecs) {
    nds_array *a = zarr3_in_memory(
        "ac/delta", zarr3_array_doc("[4]", "int32", "[4]", "0",
                                    "[{\"name\":\"numcodecs.delta\",\"configuration\":{\"dtype\":"
                                    "\"<i4\",\"astype\":\"<i2\"}}," BYTES_LE "]"));
    int32_t in[4] = {100, 103, 99, 99}, out[4];
    write_all(a, in);
    size_t len = 0;
    uint8_t *raw = get_raw("memory://ac/delta/", "c/0", &len);
    ck_assert_uint_eq(len, 8);
    ck_assert_mem_eq(raw, "\x64\x00\x03\x00\xfc\xff\x00\x00", 8);
    free(raw);
    read_all(a, out);
    ck_assert_mem_eq(out, in, sizeof in);
    char desc[256];
    nds_array_codec_description(a, desc, sizeof desc);
    ck_assert_str_eq(desc, "numcodecs.delta(astype=<i2, dtype=<i4) | bytes(endian=little)");
    nds_array_free(a);

    a = zarr3_in_memory(
        "ac/fso", zarr3_array_doc("[4]", "float64", "[4]", "0",
                                  "[{\"name\":\"numcodecs.fixedscaleoffset\",\"configuration\":{"
                                  "\"offset\":1000,\"scale\":10,\"dtype\":\"<f8\",\"astype\":"
                                  "\"|u1\"}},\"bytes\"]"));
    double f[4] = {1000.0, 1000.25, 1000.35, 1025.5}, g[4];
    write_all(a, f);
    raw = get_raw("memory://ac/fso/", "c/0", &len);
    ck_assert_uint_eq(len, 4);
    ck_assert_mem_eq(raw, "\x00\x02\x04\xff", 4);
    free(raw);
    read_all(a, g);
    ck_assert(g[0] == 1000.0 && g[1] == 1000.2 && g[2] == 1000.4 && g[3] == 1025.5);
    nds_array_free(a);
}
END_TEST

/* The bytes codec's endianness applies to what the array codecs produce (int16 here). */
START_TEST(bytes_sees_encoded_type) {
    nds_array *a = zarr3_in_memory(
        "ac/be", zarr3_array_doc("[3]", "float32", "[3]", "0",
                                 "[{\"name\":\"numcodecs.astype\",\"configuration\":{"
                                 "\"encode_dtype\":\"<i2\",\"decode_dtype\":\"<f4\"}}," BYTES_BE
                                 ",{\"name\":\"numcodecs.fletcher32\"}]"));
    float in[3] = {1.9f, -2.5f, 258.0f}, out[3];
    write_all(a, in);
    size_t len = 0;
    uint8_t *raw = get_raw("memory://ac/be/", "c/0", &len);
    ck_assert_uint_eq(len, 6 + 4);
    ck_assert_mem_eq(raw, "\x00\x01\xff\xfe\x01\x02", 6); /* 1, -2, 258 big-endian */
    raw[1] ^= 1;
    put_raw("memory://ac/be/", "c/0", raw, len);
    free(raw);
    nds_box box;
    nds_box_full(&box, 1, (const uint64_t[]){3});
    EXPECT_ERR(nds_array_read(a, &box, out, NULL), NDS_ECORRUPT, "fletcher32 mismatch");
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "c/0"));
    nds_array_free(a);
}
END_TEST

/* bitround then shuffle and adler32: lossy as numcodecs (keepbits 1 rounds 1.25 to 1.0, 1.75 to
 * 2.0: half to even), checksum verified. */
START_TEST(bitround_shuffle_adler32) {
    nds_array *a = zarr3_in_memory(
        "ac/br",
        zarr3_array_doc("[4]", "float32", "[4]", "0",
                        "[{\"name\":\"bitround\",\"configuration\":{\"keepbits\":1}}," BYTES_LE
                        ",{\"name\":\"numcodecs.shuffle\",\"configuration\":{"
                        "\"elementsize\":4}},{\"name\":\"numcodecs.adler32\"}]"));
    float in[4] = {1.25f, 1.75f, -1.25f, 3.0f}, out[4];
    write_all(a, in);
    read_all(a, out);
    ck_assert(out[0] == 1.0f && out[1] == 2.0f && out[2] == -1.0f && out[3] == 3.0f);
    size_t len = 0;
    uint8_t *raw = get_raw("memory://ac/br/", "c/0", &len);
    ck_assert_uint_eq(len, 16 + 4);
    raw[len - 1] ^= 0x80;
    put_raw("memory://ac/br/", "c/0", raw, len);
    free(raw);
    nds_box box;
    nds_box_full(&box, 1, (const uint64_t[]){4});
    EXPECT_ERR(nds_array_read(a, &box, out, NULL), NDS_ECORRUPT, "adler32 mismatch");
    nds_array_free(a);
}
END_TEST

START_TEST(packbits_bool) {
    nds_array *a =
        zarr3_in_memory("ac/pb", zarr3_array_doc("[11]", "bool", "[11]", "false",
                                                 "[{\"name\":\"numcodecs.packbits\"},\"bytes\"]"));
    uint8_t in[11] = {1, 0, 1, 1, 0, 0, 0, 1, 1, 1, 0}, out[11];
    write_all(a, in);
    size_t len = 0;
    uint8_t *raw = get_raw("memory://ac/pb/", "c/0", &len);
    ck_assert_uint_eq(len, 3);
    ck_assert_mem_eq(raw, "\x05\xb1\xc0", 3); /* 5 padding bits, 10110001, 110 */
    free(raw);
    read_all(a, out);
    ck_assert_mem_eq(out, in, sizeof in);
    nds_array_free(a);
}
END_TEST

START_TEST(refusals) {
    EXPECT_ERR(zarr3_create_status("ac/r1",
                          zarr3_array_doc("[4,4]", "int32", "[2,2]", "0",
                                          "[{\"name\":\"transpose\",\"configuration\":{"
                                          "\"order\":[1,0]}},{\"name\":\"numcodecs.delta\","
                                          "\"configuration\":{\"dtype\":\"<i4\"}}," BYTES_LE "]")),
               NDS_EUNSUPPORTED, "together with transpose");
    EXPECT_ERR(zarr3_create_status("ac/r2", zarr3_array_doc("[4]", "bool", "[4]", "false",
                                                   "[{\"name\":\"bitround\",\"configuration\":{"
                                                   "\"keepbits\":3}},\"bytes\"]")),
               NDS_EUNSUPPORTED, "bitround needs integer or float16/32/64 data");
    EXPECT_ERR(
        zarr3_create_status("ac/r3",
                   zarr3_array_doc("[4]", "int32", "[4]", "0",
                                   "[{\"name\":\"numcodecs.delta\",\"configuration\":{"
                                   "\"dtype\":\"<i4\"}},{\"name\":\"sharding_indexed\","
                                   "\"configuration\":{\"chunk_shape\":[2],\"codecs\":[" BYTES_LE
                                   "],\"index_codecs\":[" BYTES_LE "]}}]")),
        NDS_EUNSUPPORTED, "sharding_indexed after an array-to-array codec");
    EXPECT_ERR(zarr3_create_status("ac/r4", zarr3_array_doc("[4]", "int32", "[4]", "0",
                                                   "[" BYTES_LE ",{\"name\":\"numcodecs.delta\","
                                                   "\"configuration\":{\"dtype\":\"<i4\"}}]")),
               NDS_EFORMAT, "must come before the array-to-bytes codec");
    EXPECT_ERR(zarr3_create_status("ac/r5", zarr3_array_doc("[4]", "float16", "[4]", "0",
                                                   "[{\"name\":\"packbits\"}]")),
               NDS_EUNSUPPORTED, "packbits does not support data type \"float16\"");
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("zarr3_array_codecs");
    TCase *tc = tcase_create("codecs");
    tcase_add_test(tc, stored_bytes_are_numcodecs);
    tcase_add_test(tc, bytes_sees_encoded_type);
    tcase_add_test(tc, bitround_shuffle_adler32);
    tcase_add_test(tc, packbits_bool);
    tcase_add_test(tc, refusals);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return nds_test_run(suite()) ? EXIT_FAILURE : EXIT_SUCCESS; }
