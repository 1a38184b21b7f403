/* zarr v3 metadata that other tools write (issue 20): integers beyond 64 bits refused naming the
 * member, "dimension_names": null, a bare chunk_key_encoding name, the pre-1.0 draft refused, and
 * the extension data types (float8 family, int4/int2, float4, numpy.datetime64/timedelta64,
 * complex_float32/64): names, fill values and round trips. Through the public API on memory://. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support_check.h"
#include "support_format.h"

/* Stores doc as memory://<path>/zarr.json and opens it; *a is NULL on failure. */
static int open_doc(const char *path, const char *doc, nds_array **a) {
    char url[128];
    snprintf(url, sizeof url, "memory://%s/", path);
    put_text(url, "zarr.json", doc);
    return open_spec(a, "{\"driver\":\"zarr3\",\"kvstore\":\"%s\"}", url);
}

#define BYTES_LE "{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}}"

/* A zarr.json with the members given as text. */
static const char *doc_of(const char *shape, const char *dtype, const char *fill,
                          const char *extra) {
    static char doc[4096];
    snprintf(doc, sizeof doc,
             "{\"zarr_format\":3,\"node_type\":\"array\",\"shape\":%s,\"data_type\":%s,"
             "\"chunk_grid\":{\"name\":\"regular\",\"configuration\":{\"chunk_shape\":[2]}},"
             "\"chunk_key_encoding\":{\"name\":\"default\"},\"fill_value\":%s,"
             "\"codecs\":[" BYTES_LE "]%s}",
             shape, dtype, fill, extra);
    return doc;
}

START_TEST(integers_beyond_64_bits) {
    nds_array *a;
    EXPECT_ERR(open_doc("big1", doc_of("[18446744073709551616]", "\"uint8\"", "0", ""), &a),
               NDS_EFORMAT, "\"shape\" 18446744073709551616 does not fit 64 bits");
    EXPECT_ERR(open_doc("big2", doc_of("[4]", "\"uint64\"", "18446744073709551616", ""), &a),
               NDS_EFORMAT, "\"fill_value\" 18446744073709551616 does not fit 64 bits");
    EXPECT_ERR(open_doc("big3", doc_of("[4]", "\"int64\"", "-9223372036854775809", ""), &a),
               NDS_EFORMAT, "\"fill_value\" -9223372036854775809 does not fit 64 bits");
    EXPECT_ERR(open_doc("big4", doc_of("[4]", "\"uint64\"", "1e20", ""), &a), NDS_EFORMAT,
               "fill_value out of range for uint64");
    /* The bounds themselves are values, not clamps. */
    NDS_OK(open_doc("big5", doc_of("[4]", "\"uint64\"", "18446744073709551615", ""), &a));
    uint8_t fill[NDS_DTYPE_MAX_SIZE];
    uint64_t u;
    nds_array_fill_value(a, fill);
    memcpy(&u, fill, 8);
    ck_assert_uint_eq(u, UINT64_MAX);
    nds_array_free(a);
    NDS_OK(open_doc("big6", doc_of("[4]", "\"int64\"", "-9223372036854775808", ""), &a));
    int64_t s;
    nds_array_fill_value(a, fill);
    memcpy(&s, fill, 8);
    ck_assert(s == INT64_MIN);
    nds_array_free(a);
    /* A float fill written as a long integer reads as that number, not as a clamped 2^64. */
    NDS_OK(open_doc("big7", doc_of("[4]", "\"float64\"", "100000000000000000000000000000", ""),
                    &a));
    double d;
    nds_array_fill_value(a, fill);
    memcpy(&d, fill, 8);
    ck_assert(d == 1e29);
    nds_array_free(a);
    /* A big integer in the attributes is not the array's business: it opens. */
    NDS_OK(open_doc("big8", doc_of("[4]", "\"uint8\"", "0",
                                   ",\"attributes\":{\"n\":123456789012345678901234567890}"),
                    &a));
    nds_array_free(a);
}
END_TEST

START_TEST(dimension_names_null) {
    nds_array *a;
    NDS_OK(open_doc("dn1", doc_of("[4]", "\"uint8\"", "0", ",\"dimension_names\":null"), &a));
    nds_array_free(a);
    NDS_OK(open_doc("dn2", doc_of("[4]", "\"uint8\"", "0", ",\"dimension_names\":[null]"), &a));
    nds_array_free(a);
    EXPECT_ERR(open_doc("dn3", doc_of("[4]", "\"uint8\"", "0", ",\"dimension_names\":5"), &a),
               NDS_EFORMAT, "\"dimension_names\" must be");
}
END_TEST

START_TEST(key_encoding_bare_name) {
    static const char *const fmt =
        "{\"zarr_format\":3,\"node_type\":\"array\",\"shape\":[4],\"data_type\":\"uint8\","
        "\"chunk_grid\":{\"name\":\"regular\",\"configuration\":{\"chunk_shape\":[2]}},"
        "\"chunk_key_encoding\":%s,\"fill_value\":0,\"codecs\":[" BYTES_LE "]}";
    char doc[1024];
    nds_array *a;
    uint8_t v[4] = {1, 2, 3, 4};
    snprintf(doc, sizeof doc, fmt, "\"default\"");
    NDS_OK(open_doc("ke1", doc, &a));
    write_all(a, v);
    nds_array_free(a);
    void *chunk = get_raw("memory://ke1/", "c/1", NULL);
    ck_assert_msg(chunk != NULL, "\"default\" keys are c/1");
    free(chunk);
    snprintf(doc, sizeof doc, fmt, "\"v2\"");
    NDS_OK(open_doc("ke2", doc, &a));
    write_all(a, v);
    nds_array_free(a);
    chunk = get_raw("memory://ke2/", "1", NULL);
    ck_assert_msg(chunk != NULL, "\"v2\" keys are 1");
    free(chunk);
    snprintf(doc, sizeof doc, fmt, "\"hashed\"");
    EXPECT_ERR(open_doc("ke3", doc, &a), NDS_EUNSUPPORTED, "chunk_key_encoding \"hashed\"");
}
END_TEST

START_TEST(pre_1_0_draft_refused) {
    nds_array *a;
    EXPECT_ERR(open_doc("draft",
                        "{\"zarr_format\":\"https://purl.org/zarr/spec/protocol/core/3.0\","
                        "\"metadata_encoding\":\"https://purl.org/zarr/spec/protocol/core/3.0\","
                        "\"metadata_key_suffix\":\".json\",\"extensions\":[]}",
                        &a),
               NDS_EUNSUPPORTED, "pre-1.0 draft of zarr v3, which ndstore does not read");
}
END_TEST

int main(void) {
    Suite *s = suite_create("zarr3_dtypes");
    TCase *tc = tcase_create("zarr3_dtypes");
    tcase_add_test(tc, integers_beyond_64_bits);
    tcase_add_test(tc, dimension_names_null);
    tcase_add_test(tc, key_encoding_bare_name);
    tcase_add_test(tc, pre_1_0_draft_refused);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
