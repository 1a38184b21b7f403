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


/* A zarr.json of shape [4], chunks [2], for data_type (JSON text) and fill (JSON text). */
static const char *typed_doc(const char *dtype, const char *fill) {
    return doc_of("[4]", dtype, fill, "");
}

START_TEST(float8_round_trip) {
    nds_array *a;
    NDS_OK(open_doc("f8", typed_doc("\"float8_e4m3fn\"", "\"NaN\""), &a));
    ck_assert_int_eq(nds_array_dtype(a), NDS_FLOAT8_E4M3FN);
    uint8_t fillv[NDS_DTYPE_MAX_SIZE], out[4];
    nds_array_fill_value(a, fillv);
    ck_assert_uint_eq(fillv[0], 0x7f); /* the registry's NaN for e4m3fn */
    read_all(a, out);
    for (int i = 0; i < 4; i++) ck_assert_uint_eq(out[i], 0x7f);
    const uint8_t in[4] = {0x38, 0x7e, 0xfe, 0x00}; /* 1.0, 448, -448, 0 */
    write_all(a, in);
    read_all(a, out);
    ck_assert_mem_eq(out, in, 4);
    nds_array_free(a);
    size_t len = 0;
    uint8_t *chunk = get_raw("memory://f8/", "c/1", &len);
    ck_assert_uint_eq(len, 2); /* one byte per element, as the bytes codec stores them */
    ck_assert_uint_eq(chunk[0], 0xfe);
    free(chunk);
    EXPECT_ERR(open_doc("f8b", typed_doc("\"float8_e4m3fn\"", "\"Infinity\""), &a), NDS_EFORMAT,
               "has no infinity");
    NDS_OK(open_doc("f8c", typed_doc("\"float8_e5m2\"", "\"-Infinity\""), &a));
    nds_array_fill_value(a, fillv);
    ck_assert_uint_eq(fillv[0], 0xfc);
    nds_array_free(a);
}
END_TEST

START_TEST(subbyte_integers) {
    nds_array *a;
    NDS_OK(open_doc("i4", typed_doc("\"int4\"", "-8"), &a));
    int8_t out[4];
    read_all(a, out);
    for (int i = 0; i < 4; i++) ck_assert_int_eq(out[i], -8);
    const int8_t in[4] = {-8, 7, -1, 0};
    write_all(a, in);
    read_all(a, out);
    ck_assert_mem_eq(out, in, 4);
    uint8_t *chunk = get_raw("memory://i4/", "c/0", NULL);
    ck_assert_uint_eq(chunk[0], 0xf8); /* one per byte, sign-extended as written */
    ck_assert_uint_eq(chunk[1], 0x07);
    free(chunk);
    /* Another writer may leave the upper bits anything (the registry's bytes encoding): a read
     * sign-extends the low 4 bits. */
    const uint8_t junk[2] = {0x37, 0xaf};
    put_raw("memory://i4/", "c/1", junk, 2);
    read_all(a, out);
    ck_assert_int_eq(out[2], 7);
    ck_assert_int_eq(out[3], -1);
    nds_array_free(a);
    NDS_OK(open_doc("u2", typed_doc("\"uint2\"", "3"), &a));
    const uint8_t u2junk[2] = {0xfd, 0x02};
    put_raw("memory://u2/", "c/0", u2junk, 2);
    uint8_t u[4];
    read_all(a, u);
    ck_assert_uint_eq(u[0], 1);
    ck_assert_uint_eq(u[1], 2);
    ck_assert_uint_eq(u[2], 3);
    nds_array_free(a);
    EXPECT_ERR(open_doc("i4b", typed_doc("\"int4\"", "8"), &a), NDS_EFORMAT,
               "fill_value out of range for int4");
    EXPECT_ERR(open_doc("u4b", typed_doc("\"uint4\"", "16"), &a), NDS_EFORMAT,
               "fill_value out of range for uint4");
}
END_TEST

#define DT64(unit, scale)                                                                        \
    "{\"name\":\"numpy.datetime64\",\"configuration\":{\"unit\":\"" unit "\",\"scale_factor\":" scale \
    "}}"

START_TEST(datetime64) {
    nds_array *a;
    NDS_OK(open_doc("dt", typed_doc(DT64("ns", "1"), "\"NaT\""), &a));
    ck_assert_int_eq(nds_array_dtype(a), NDS_DATETIME64);
    int64_t out[4];
    read_all(a, out);
    ck_assert(out[0] == INT64_MIN && out[3] == INT64_MIN);
    const int64_t in[4] = {0, 1700000000000000000LL, INT64_MIN, -1};
    write_all(a, in);
    read_all(a, out);
    ck_assert_mem_eq(out, in, sizeof in);
    char *meta = NULL;
    NDS_OK(nds_array_metadata(a, &meta));
    ck_assert_msg(strstr(meta, "numpy.datetime64") && strstr(meta, "\"ns\""), "%s", meta);
    nds_free(meta);
    nds_array_free(a);
    NDS_OK(open_doc("td", typed_doc("{\"name\":\"numpy.timedelta64\",\"configuration\":"
                                    "{\"unit\":\"s\",\"scale_factor\":10}}",
                                    "-9223372036854775808"),
                    &a));
    ck_assert_int_eq(nds_array_dtype(a), NDS_TIMEDELTA64);
    nds_array_free(a);
    EXPECT_ERR(open_doc("dt2", typed_doc("\"datetime64\"", "0"), &a), NDS_EFORMAT,
               "needs a configuration with its unit");
    EXPECT_ERR(open_doc("dt3", typed_doc(DT64("fortnight", "1"), "0"), &a), NDS_EFORMAT,
               "unit \"fortnight\" is not a NumPy time unit");
    EXPECT_ERR(open_doc("dt4", typed_doc(DT64("s", "0"), "0"), &a), NDS_EFORMAT,
               "\"scale_factor\" is 0");
    EXPECT_ERR(open_doc("dt5", typed_doc(DT64("s", "1"), "\"yesterday\""), &a), NDS_EFORMAT,
               "fill_value");
}
END_TEST

START_TEST(complex_float_aliases) {
    nds_array *a;
    NDS_OK(open_doc("cf32", typed_doc("\"complex_float32\"", "[1.0, 2.0]"), &a));
    ck_assert_int_eq(nds_array_dtype(a), NDS_COMPLEX64);
    float f[2];
    uint8_t fillv[NDS_DTYPE_MAX_SIZE];
    nds_array_fill_value(a, fillv);
    memcpy(f, fillv, 8);
    ck_assert(f[0] == 1.0f && f[1] == 2.0f);
    nds_array_free(a);
    NDS_OK(open_doc("cf64", typed_doc("\"complex_float64\"", "[0.0, 0.0]"), &a));
    ck_assert_int_eq(nds_array_dtype(a), NDS_COMPLEX128);
    nds_array_free(a);
}
END_TEST


/* "datetime64[ns]" as a schema dtype (the name info prints) creates the array with its unit; an
 * open that asks for another unit is a mismatch. For zarr v2 and v3 alike (loop index). */
static const struct {
    const char *format, *stored, *mismatch;
} unit_cases[] = {
    {"zarr", "\"<m8[10s]\"", "\"dtype\" is \"<m8[10s]\""},
    {"zarr3", "\"numpy.timedelta64\"", "\"data_type\""},
};

START_TEST(schema_dtype_with_unit) {
    const char *format = unit_cases[_i].format;
    nds_array *a;
    NDS_OK(open_spec(&a, "{\"driver\":\"%s\",\"kvstore\":\"memory://su/\",\"create\":true,"
                         "\"schema\":{\"dtype\":\"timedelta64[10s]\",\"domain\":{\"shape\":[4]},"
                         "\"fill_value\":-9223372036854775808}}", format));
    ck_assert_int_eq(nds_array_dtype(a), NDS_TIMEDELTA64);
    int64_t out[4];
    read_all(a, out);
    ck_assert(out[0] == INT64_MIN);
    char *meta = NULL;
    NDS_OK(nds_array_metadata(a, &meta));
    ck_assert_msg(strstr(meta, unit_cases[_i].stored) != NULL, "%s", meta);
    nds_free(meta);
    nds_array_free(a);
    NDS_OK(open_spec(&a, "{\"driver\":\"%s\",\"kvstore\":\"memory://su/\",\"open\":true,"
                         "\"create\":true,\"schema\":{\"dtype\":\"timedelta64[10s]\"}}", format));
    nds_array_free(a);
    EXPECT_ERR(open_spec(&a, "{\"driver\":\"%s\",\"kvstore\":\"memory://su/\",\"open\":true,"
                             "\"create\":true,\"schema\":{\"dtype\":\"timedelta64[s]\"}}", format),
               NDS_EMISMATCH, unit_cases[_i].mismatch);
    EXPECT_ERR(open_spec(&a, "{\"driver\":\"%s\",\"kvstore\":\"memory://su2/\",\"create\":true,"
                             "\"schema\":{\"dtype\":\"datetime64[fortnight]\",\"domain\":{\"shape\":[4]}}}",
                         format),
               NDS_EINVAL, "unknown \"dtype\"");
}
END_TEST

/* Sharded int4: inner chunks are decoded whole (normalised), never read as raw byte ranges. */
START_TEST(subbyte_sharded) {
    nds_array *a;
    NDS_OK(open_doc("si4",
                    "{\"zarr_format\":3,\"node_type\":\"array\",\"shape\":[8],\"data_type\":\"int4\","
                    "\"chunk_grid\":{\"name\":\"regular\",\"configuration\":{\"chunk_shape\":[8]}},"
                    "\"chunk_key_encoding\":{\"name\":\"default\"},\"fill_value\":0,"
                    "\"codecs\":[{\"name\":\"sharding_indexed\",\"configuration\":{\"chunk_shape\":[2],"
                    "\"codecs\":[" BYTES_LE "],\"index_codecs\":[" BYTES_LE ",{\"name\":\"crc32c\"}],"
                    "\"index_location\":\"end\"}}]}",
                    &a));
    const int8_t in[8] = {-8, -7, -1, 0, 1, 6, 7, -2};
    int8_t out[8];
    write_all(a, in);
    read_all(a, out);
    ck_assert_mem_eq(out, in, 8);
    /* Junk upper bits in the stored shard (inner chunk 0 is its first 2 bytes; the index's crc
     * covers only the index) still read as the low 4 bits. */
    size_t len = 0;
    uint8_t *shard = get_raw("memory://si4/", "c/0", &len);
    ck_assert_uint_ge(len, 2);
    shard[0] = 0x53; /* low bits 3 */
    shard[1] = 0xaf; /* low bits 0xf: -1 */
    put_raw("memory://si4/", "c/0", shard, len);
    free(shard);
    uint64_t shape[1];
    nds_array_shape(a, shape);
    nds_box box;
    NDS_OK(nds_box_parse(&box, "[0:3]", 1, shape));
    NDS_OK(nds_array_read(a, &box, out, NULL));
    ck_assert_int_eq(out[0], 3);
    ck_assert_int_eq(out[1], -1);
    ck_assert_int_eq(out[2], -1);
    nds_array_free(a);
}
END_TEST

int main(void) {
    Suite *s = suite_create("zarr3_dtypes");
    TCase *tc = tcase_create("zarr3_dtypes");
    tcase_add_test(tc, integers_beyond_64_bits);
    tcase_add_test(tc, dimension_names_null);
    tcase_add_test(tc, key_encoding_bare_name);
    tcase_add_test(tc, pre_1_0_draft_refused);
    tcase_add_test(tc, float8_round_trip);
    tcase_add_test(tc, subbyte_integers);
    tcase_add_test(tc, datetime64);
    tcase_add_test(tc, complex_float_aliases);
    tcase_add_loop_test(tc, schema_dtype_with_unit, 0, 2);
    tcase_add_test(tc, subbyte_sharded);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
