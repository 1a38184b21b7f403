/* zarr v2 metadata that other tools write (issue 20): integers beyond 64 bits refused naming the
 * member, and the NumPy datetime64/timedelta64 typestrings ("<M8[ns]", "<m8[s]") read and written
 * as int64 with their unit. Through the public API on memory://. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support_check.h"
#include "support_format.h"

/* Stores a .zarray with the given shape, dtype and fill (JSON text) and opens it. */
static int open_zarray(const char *path, const char *shape, const char *dtype, const char *fill,
                       nds_array **a) {
    char url[128], doc[1024];
    snprintf(url, sizeof url, "memory://%s/", path);
    snprintf(doc, sizeof doc,
             "{\"zarr_format\":2,\"shape\":%s,\"chunks\":[2],\"dtype\":\"%s\",\"compressor\":null,"
             "\"fill_value\":%s,\"order\":\"C\",\"filters\":null}",
             shape, dtype, fill);
    put_text(url, ".zarray", doc);
    return open_spec(a, "{\"driver\":\"zarr\",\"kvstore\":\"%s\"}", url);
}

START_TEST(integers_beyond_64_bits) {
    nds_array *a;
    EXPECT_ERR(open_zarray("b1", "[18446744073709551616]", "|u1", "0", &a), NDS_EFORMAT,
               "\"shape\" 18446744073709551616 does not fit 64 bits");
    EXPECT_ERR(open_zarray("b2", "[4]", "<u8", "18446744073709551616", &a), NDS_EFORMAT,
               "\"fill_value\" 18446744073709551616 does not fit 64 bits");
    EXPECT_ERR(open_zarray("b3", "[4]", "<i8", "-9223372036854775809", &a), NDS_EFORMAT,
               "\"fill_value\" -9223372036854775809 does not fit 64 bits");
    NDS_OK(open_zarray("b4", "[4]", "<u8", "18446744073709551615", &a));
    uint8_t fill[NDS_DTYPE_MAX_SIZE];
    uint64_t u;
    nds_array_fill_value(a, fill);
    memcpy(&u, fill, 8);
    ck_assert_uint_eq(u, UINT64_MAX);
    nds_array_free(a);
}
END_TEST


START_TEST(datetime_typestrings) {
    nds_array *a;
    NDS_OK(open_zarray("m8", "[4]", "<M8[ns]", "-9223372036854775808", &a));
    ck_assert_int_eq(nds_array_dtype(a), NDS_DATETIME64);
    int64_t out[4];
    read_all(a, out);
    ck_assert(out[0] == INT64_MIN); /* NaT */
    const int64_t in[4] = {0, 1, INT64_MIN, 1700000000000000000LL};
    write_all(a, in);
    read_all(a, out);
    ck_assert_mem_eq(out, in, sizeof in);
    char *meta = NULL;
    NDS_OK(nds_array_metadata(a, &meta));
    ck_assert_msg(strstr(meta, "\"<M8[ns]\"") != NULL, "%s", meta);
    nds_free(meta);
    nds_array_free(a);
    /* big-endian timedelta with a multiplier: stored swapped, read in host order */
    NDS_OK(open_zarray("m8b", "[2]", ">m8[10s]", "0", &a));
    ck_assert_int_eq(nds_array_dtype(a), NDS_TIMEDELTA64);
    const int64_t two[2] = {1, -2};
    int64_t back[2];
    write_all(a, two);
    read_all(a, back);
    ck_assert_mem_eq(back, two, sizeof two);
    uint8_t *chunk = get_raw("memory://m8b/", "0", NULL);
    ck_assert_uint_eq(chunk[7], 1);
    ck_assert_uint_eq(chunk[0], 0);
    free(chunk);
    NDS_OK(nds_array_metadata(a, &meta));
    ck_assert_msg(strstr(meta, "\">m8[10s]\"") != NULL, "%s", meta);
    nds_free(meta);
    nds_array_free(a);
    EXPECT_ERR(open_zarray("m8c", "[2]", "<M8[fortnight]", "0", &a), NDS_EFORMAT,
               "not a NumPy time unit");
    EXPECT_ERR(open_zarray("m8d", "[2]", "<M8", "0", &a), NDS_EUNSUPPORTED,
               "datetimes without a unit");
}
END_TEST

START_TEST(types_without_typestrings) {
    nds_array *a;
    EXPECT_ERR(open_spec(&a, "{\"driver\":\"zarr\",\"kvstore\":\"memory://nt/\",\"create\":true,"
                             "\"schema\":{\"dtype\":\"float8_e4m3fn\",\"domain\":{\"shape\":[4]}}}"),
               NDS_EUNSUPPORTED, "has no zarr v2 (NumPy) typestring");
    EXPECT_ERR(open_spec(&a, "{\"driver\":\"zarr\",\"kvstore\":\"memory://nt2/\",\"create\":true,"
                             "\"schema\":{\"dtype\":\"int4\",\"domain\":{\"shape\":[4]}}}"),
               NDS_EUNSUPPORTED, "has no zarr v2 (NumPy) typestring");
}
END_TEST

int main(void) {
    Suite *s = suite_create("zarr2_dtypes");
    TCase *tc = tcase_create("zarr2_dtypes");
    tcase_add_test(tc, integers_beyond_64_bits);
    tcase_add_test(tc, datetime_typestrings);
    tcase_add_test(tc, types_without_typestrings);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
