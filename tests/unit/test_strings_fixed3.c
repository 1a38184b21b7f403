/* zarr v3 fixed-width strings (issue 20): the registry's fixed_length_utf32 ({"length_bytes": n},
 * fill a string) and zarr-python 3's null_terminated_bytes (fill base64), elements of n bytes
 * through the codec chain and through sharding_indexed (whose inner chunks are sized by the
 * array's element size, not the dtype's unit); the stored bytes follow from the registry (UTF-32
 * code points in the bytes codec's byte order, NUL-padded). Through the public API on memory://. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support_check.h"
#include "support_format.h"

/* A zarr.json with an object data_type (zarr3_array_doc quotes a name). */
static const char *doc_with_type(const char *shape, const char *data_type, const char *chunks,
                                 const char *fill, const char *codecs) {
    static char doc[4096];
    snprintf(doc, sizeof doc,
             "{\"zarr_format\":3,\"node_type\":\"array\",\"shape\":%s,\"data_type\":%s,"
             "\"chunk_grid\":{\"name\":\"regular\",\"configuration\":{\"chunk_shape\":%s}},"
             "\"chunk_key_encoding\":{\"name\":\"default\"},\"fill_value\":%s,\"codecs\":%s}",
             shape, data_type, chunks, fill, codecs);
    return doc;
}

#define LE "{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}}"
#define UTF32(n) "{\"name\":\"fixed_length_utf32\",\"configuration\":{\"length_bytes\":" #n "}}"
#define BYTES(n) "{\"name\":\"null_terminated_bytes\",\"configuration\":{\"length_bytes\":" #n "}}"

/* n code points of text (ASCII or the 2-byte é) as host-order uint32, NUL-padded to width. */
static void ucs4(const char *text, uint32_t *out, size_t width) {
    memset(out, 0, width * 4);
    for (size_t i = 0, k = 0; text[i] && k < width; k++) {
        if ((uint8_t)text[i] == 0xc3) {
            out[k] = 0xc0 | ((uint8_t)text[i + 1] & 0x3f);
            i += 2;
        } else {
            out[k] = (uint8_t)text[i++];
        }
    }
}

START_TEST(utf32_round_trip_and_layout) {
    nds_array *a = zarr3_in_memory(
        "u", doc_with_type("[3]", UTF32(12), "[2]", "\"ab\"",
                           "[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"big\"}}]"));
    ck_assert_int_eq(nds_array_dtype(a), NDS_UCS4_FIXED);
    ck_assert_uint_eq(nds_array_dtype_size(a), 12);
    uint32_t fill[3], want[3], out[9];
    nds_array_fill_element(a, fill);
    ucs4("ab", want, 3);
    ck_assert_mem_eq(fill, want, 12);
    uint32_t in[9];
    ucs4("x", in, 3);
    ucs4("\xc3\xa9t\xc3\xa9", in + 3, 3);
    ucs4("abc", in + 6, 3);
    write_all(a, in);
    read_all(a, out);
    ck_assert_mem_eq(out, in, sizeof in);
    size_t len;
    uint8_t *chunk = get_raw("memory://u/", "c/0", &len); /* UTF-32BE, NUL-padded */
    static const uint8_t be[24] = {0, 0, 0, 'x', 0, 0, 0, 0, 0, 0, 0, 0,
                                   0, 0, 0, 0xe9, 0, 0, 0, 't', 0, 0, 0, 0xe9};
    ck_assert_uint_eq(len, 24);
    ck_assert_mem_eq(chunk, be, 24);
    free(chunk);
    char *meta = NULL;
    NDS_OK(nds_array_metadata(a, &meta));
    ck_assert_msg(strstr(meta, UTF32(12)) && strstr(meta, "\"fill_value\":\"ab\""), "%s", meta);
    nds_free(meta);
    nds_array_free(a);
}
END_TEST

START_TEST(null_terminated_bytes_zstd) {
    nds_array *a = zarr3_in_memory(
        "b", doc_with_type("[4]", BYTES(5), "[3]", "\"eno=\"", /* b"zz" */
                           "[\"bytes\",{\"name\":\"zstd\",\"configuration\":{\"level\":1}}]"));
    ck_assert_int_eq(nds_array_dtype(a), NDS_BYTES_FIXED);
    uint8_t out[20], in[20] = "hello\0\0\0\0\0a\0b\0\0five!";
    read_all(a, out);
    for (int i = 0; i < 4; i++) ck_assert_mem_eq(out + 5 * i, "zz\0\0\0", 5);
    write_all(a, in);
    read_all(a, out);
    ck_assert_mem_eq(out, in, 20);
    nds_array_free(a);
}
END_TEST

/* Sharded: 8-byte elements (UTF-32, 2 code points) in inner chunks of 2 inside shards of 4. Before
 * the shard sized elements by the array, an inner chunk was taken for 2 x 4 bytes. */
START_TEST(sharded_elements_are_the_arrays_width) {
    nds_array *a = zarr3_in_memory(
        "s", doc_with_type("[8]", UTF32(8), "[4]", "\"\"",
                           "[{\"name\":\"sharding_indexed\",\"configuration\":{\"chunk_shape\":[2],"
                           "\"codecs\":[" LE "],\"index_codecs\":[" LE "]}}]"));
    uint32_t in[16], out[16];
    for (int i = 0; i < 8; i++) ucs4(i % 2 ? "q" : "\xc3\xa9x", in + 2 * i, 2);
    write_all(a, in);
    read_all(a, out);
    ck_assert_mem_eq(out, in, sizeof in);
    size_t len;
    uint8_t *shard = get_raw("memory://s/", "c/1", &len);
    ck_assert_uint_eq(len, 2 * 16 + 2 * 16); /* two inner chunks of 16 bytes, then the index */
    ck_assert_mem_eq(shard, in + 8, 32);
    free(shard);
    nds_box one = {.rank = 1, .start = {5}, .stop = {6}, .step = {1}};
    uint32_t z[2] = {'z', 'z'}, got[2];
    NDS_OK(nds_array_write(a, &one, z, NULL)); /* a partial write: the shard's update path */
    NDS_OK(nds_array_read(a, &one, got, NULL)); /* a read of one inner chunk */
    ck_assert_mem_eq(got, z, 8);
    read_all(a, out);
    memcpy(in + 10, z, 8);
    ck_assert_mem_eq(out, in, sizeof in);
    nds_array_free(a);
}
END_TEST

START_TEST(hostile_widths) {
    nds_array *a;
    static const struct {
        const char *type, *fill;
        int code;
        const char *message;
    } cases[] = {
        {UTF32(0), "\"\"", NDS_EUNSUPPORTED, "\"length_bytes\" 0 is not supported"},
        {BYTES(4097), "\"\"", NDS_EUNSUPPORTED, "\"length_bytes\" 4097 is not supported"},
        {UTF32(6), "\"\"", NDS_EFORMAT, "not a multiple of 4"},
        {UTF32(-4), "\"\"", NDS_EFORMAT, "length_bytes"},
        {"{\"name\":\"fixed_length_utf32\"}", "\"\"", NDS_EFORMAT, "needs a configuration"},
        {"{\"name\":\"null_terminated_bytes\",\"configuration\":{\"length_bytes\":2,\"x\":1}}",
         "\"\"", NDS_EFORMAT, "configuration member \"x\""},
        {UTF32(4), "\"toolong\"", NDS_EFORMAT, "longer than the dtype's width"},
        {BYTES(2), "\"not base64\"", NDS_EFORMAT, "is not base64"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char url[64];
        snprintf(url, sizeof url, "memory://h%zu/", i);
        EXPECT_ERR(open_spec(&a, "{\"driver\":\"zarr3\",\"kvstore\":\"%s\",\"create\":true,"
                                 "\"metadata\":%s}",
                             url, doc_with_type("[4]", cases[i].type, "[2]", cases[i].fill, "[\"bytes\"]")),
                   cases[i].code, cases[i].message);
    }
    /* a spec dtype "<U5" names the registry type; the width limit holds there too */
    NDS_OK(open_spec(&a, "{\"driver\":\"zarr3\",\"kvstore\":\"memory://t/\",\"create\":true,"
                         "\"schema\":{\"dtype\":\"<U5\",\"domain\":{\"shape\":[4]}}}"));
    ck_assert_uint_eq(nds_array_dtype_size(a), 20);
    nds_array_free(a);
    EXPECT_ERR(open_spec(&a, "{\"driver\":\"zarr3\",\"kvstore\":\"memory://t2/\",\"create\":true,"
                             "\"schema\":{\"dtype\":\"|S5000\",\"domain\":{\"shape\":[4]}}}"),
               NDS_EUNSUPPORTED, "wider than 4096");
}
END_TEST

int main(void) {
    Suite *s = suite_create("strings_fixed3");
    TCase *tc = tcase_create("strings_fixed3");
    tcase_add_test(tc, utf32_round_trip_and_layout);
    tcase_add_test(tc, null_terminated_bytes_zstd);
    tcase_add_test(tc, sharded_elements_are_the_arrays_width);
    tcase_add_test(tc, hostile_widths);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
