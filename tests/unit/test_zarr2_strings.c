/* zarr v2 fixed-width strings (issue 20): NumPy "|S<n>" and "<U<n>" / ">U<n>" typestrings read and
 * written as raw elements of nds_array_dtype_size bytes, fill values as zarr-python 2.13 writes
 * them (base64 for bytes, the text for unicode), and clear refusals of malformed ones. Through the
 * public API on memory://. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support_check.h"
#include "support_format.h"

/* Stores a .zarray (shape [4], chunks [2], no compressor) and opens it. */
static int open_strings(const char *path, const char *dtype, const char *fill, nds_array **a) {
    char url[128], doc[1024];
    snprintf(url, sizeof url, "memory://%s/", path);
    snprintf(doc, sizeof doc,
             "{\"zarr_format\":2,\"shape\":[4],\"chunks\":[2],\"dtype\":\"%s\",\"compressor\":null,"
             "\"fill_value\":%s,\"order\":\"C\",\"filters\":null}",
             dtype, fill);
    put_text(url, ".zarray", doc);
    return open_spec(a, "{\"driver\":\"zarr\",\"kvstore\":\"%s\"}", url);
}

/* nds_array_metadata's text (compact JSON) contains text. */
static void expect_metadata(nds_array *a, const char *text) {
    char *meta = NULL;
    NDS_OK(nds_array_metadata(a, &meta));
    ck_assert_msg(strstr(meta, text) != NULL, "%s lacks %s", meta, text);
    nds_free(meta);
}

/* Resizes a to n elements, which rewrites .zarray as zarr-python prints it, and checks that the
 * stored text contains text. */
static void expect_rewritten(nds_array *a, const char *url, uint64_t n, const char *text) {
    NDS_OK(nds_array_resize(a, &n));
    char *doc = get_raw(url, ".zarray", NULL);
    ck_assert_msg(strstr(doc, text) != NULL, "%s lacks %s", doc, text);
    free(doc);
}

START_TEST(byte_strings) {
    nds_array *a;
    NDS_OK(open_strings("s6", "|S6", "\"YWI=\"", &a)); /* b"ab", as zarr-python writes it */
    ck_assert_int_eq(nds_array_dtype(a), NDS_BYTES_FIXED);
    ck_assert_uint_eq(nds_array_dtype_size(a), 6);
    uint8_t fill[6], out[24];
    nds_array_fill_element(a, fill);
    ck_assert_mem_eq(fill, "ab\0\0\0\0", 6);
    read_all(a, out);
    for (int i = 0; i < 4; i++) ck_assert_mem_eq(out + 6 * i, "ab\0\0\0\0", 6);
    const uint8_t in[24] = "hello\0x\0\0\0\0\0\0\1zzzzab\0\0\0\0";
    write_all(a, in);
    read_all(a, out);
    ck_assert_mem_eq(out, in, 24);
    size_t len = 0;
    uint8_t *chunk = get_raw("memory://s6/", "0", &len); /* stored as the raw 12 bytes */
    ck_assert_uint_eq(len, 12);
    ck_assert_mem_eq(chunk, in, 12);
    free(chunk);
    expect_metadata(a, "\"dtype\":\"|S6\"");
    expect_rewritten(a, "memory://s6/", 5, "\"fill_value\": \"YWI=\"");
    expect_rewritten(a, "memory://s6/", 5, "\"dtype\": \"|S6\"");
    uint8_t five[30];
    read_all(a, five);
    ck_assert_mem_eq(five, in, 24);
    ck_assert_mem_eq(five + 24, "ab\0\0\0\0", 6);
    nds_array_free(a);
    NDS_OK(open_strings("s3", "|S3", "\"MA==\"", &a)); /* fill_value=0 in zarr-python: b"0" */
    nds_array_fill_element(a, fill);
    ck_assert_mem_eq(fill, "0\0\0", 3);
    nds_array_free(a);
    NDS_OK(open_strings("s3n", "|S3", "null", &a));
    nds_array_fill_element(a, fill);
    ck_assert_mem_eq(fill, "\0\0\0", 3);
    expect_metadata(a, "\"fill_value\":null");
    nds_array_free(a);
}
END_TEST

START_TEST(unicode_strings) {
    nds_array *a;
    NDS_OK(open_strings("u3", ">U3", "\"q\\u00e9\"", &a));
    ck_assert_int_eq(nds_array_dtype(a), NDS_UCS4_FIXED);
    ck_assert_uint_eq(nds_array_dtype_size(a), 12);
    uint32_t fill[3], out[12];
    nds_array_fill_element(a, fill);
    ck_assert_uint_eq(fill[0], 'q');
    ck_assert_uint_eq(fill[1], 0xe9);
    ck_assert_uint_eq(fill[2], 0);
    read_all(a, out);
    ck_assert_uint_eq(out[10], 0xe9);
    const uint32_t in[12] = {'a', 'b', 0, 0x1f600, 0, 0, 'x', 'y', 'z', 0, 0, 0};
    write_all(a, in);
    read_all(a, out);
    ck_assert_mem_eq(out, in, sizeof in);
    uint8_t *chunk = get_raw("memory://u3/", "0", NULL); /* big-endian code points */
    ck_assert_uint_eq(chunk[3], 'a');
    ck_assert_uint_eq(chunk[0], 0);
    ck_assert_uint_eq(chunk[13], 0x01);
    ck_assert_uint_eq(chunk[14], 0xf6);
    free(chunk);
    expect_metadata(a, "\"dtype\":\">U3\"");
    expect_rewritten(a, "memory://u3/", 4, "\"dtype\": \">U3\"");
    expect_rewritten(a, "memory://u3/", 4, "\"fill_value\": \"q\\u00e9\"");
    nds_array_free(a);
    NDS_OK(open_strings("u2", "<U2", "\"0\"", &a));
    uint32_t two[2];
    nds_array_fill_element(a, two);
    ck_assert_uint_eq(two[0], '0');
    ck_assert_uint_eq(two[1], 0);
    expect_metadata(a, "\"dtype\":\"<U2\"");
    nds_array_free(a);
}
END_TEST

START_TEST(malformed_strings) {
    nds_array *a;
    EXPECT_ERR(open_strings("e1", "|S0", "null", &a), NDS_EFORMAT, "not a numpy string typestring");
    EXPECT_ERR(open_strings("e2", "|S", "null", &a), NDS_EFORMAT, "not a numpy string typestring");
    EXPECT_ERR(open_strings("e3", "<U2x", "null", &a), NDS_EFORMAT, "not a numpy string typestring");
    EXPECT_ERR(open_strings("e4", "|S99999999999999999999999", "null", &a), NDS_EUNSUPPORTED,
               "elements wider than 4096 bytes");
    EXPECT_ERR(open_strings("e5", "<U1025", "null", &a), NDS_EUNSUPPORTED,
               "elements wider than 4096 bytes");
    EXPECT_ERR(open_strings("e6", "|S2", "\"YWJj\"", &a), NDS_EFORMAT,
               "\"fill_value\" \"YWJj\" is not base64 of at most 2 bytes");
    EXPECT_ERR(open_strings("e7", "|S2", "\"Y!==\"", &a), NDS_EFORMAT, "is not base64");
    EXPECT_ERR(open_strings("e8", "|S2", "0", &a), NDS_EFORMAT, "must be a string or null");
    EXPECT_ERR(open_strings("e9", "<U1", "\"ab\"", &a), NDS_EFORMAT, "longer than the dtype's width");
    EXPECT_ERR(open_strings("e10", "<U1", "1", &a), NDS_EFORMAT, "must be a string or null");
    /* a chunk of the wrong length is corrupt, naming the chunk */
    NDS_OK(open_strings("e11", "|S3", "null", &a));
    put_text("memory://e11/", "0", "abcd");
    uint8_t out[12];
    nds_box box;
    nds_box_full(&box, 1, (uint64_t[]){4});
    EXPECT_ERR(nds_array_read(a, &box, out, NULL), NDS_ECORRUPT, "0");
    nds_array_free(a);
}
END_TEST

/* The string types have no name a schema could give (the name has no width), so other formats
 * never see them. */
START_TEST(names_do_not_create_strings) {
    ck_assert_int_eq(nds_dtype_from_name("null_terminated_bytes"), NDS_DTYPE_INVALID);
    ck_assert_int_eq(nds_dtype_from_name("fixed_length_utf32"), NDS_DTYPE_INVALID);
    ck_assert_str_eq(nds_dtype_name(NDS_UCS4_FIXED), "fixed_length_utf32");
    ck_assert_uint_eq(nds_dtype_size(NDS_UCS4_FIXED), 4);
    nds_array *a;
    NDS_OK(open_spec(&a, "{\"driver\":\"zarr\",\"kvstore\":\"memory://cr/\",\"create\":true,"
                         "\"metadata\":{\"dtype\":\"<U5\",\"shape\":[3]}}"));
    ck_assert_uint_eq(nds_array_dtype_size(a), 20);
    expect_metadata(a, "\"fill_value\":\"\"");
    nds_array_free(a);
    /* an existing array of another width is a mismatch, not the same type */
    NDS_OK(open_spec(&a, "{\"driver\":\"zarr\",\"kvstore\":\"memory://cr/\",\"open\":true,"
                         "\"metadata\":{\"dtype\":\"<U5\"}}"));
    nds_array_free(a);
    EXPECT_ERR(open_spec(&a, "{\"driver\":\"zarr\",\"kvstore\":\"memory://cr/\",\"open\":true,"
                             "\"metadata\":{\"dtype\":\"<U4\"}}"),
               NDS_EMISMATCH, "\"dtype\" is \"<U5\"");
}
END_TEST

int main(void) {
    Suite *s = suite_create("zarr2_strings");
    TCase *tc = tcase_create("zarr2_strings");
    tcase_add_test(tc, byte_strings);
    tcase_add_test(tc, unicode_strings);
    tcase_add_test(tc, malformed_strings);
    tcase_add_test(tc, names_do_not_create_strings);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
