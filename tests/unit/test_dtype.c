/* Element types, half precision, byte swapping, fill values in JSON, and error texts. */
#include <math.h>
#include <string.h>
#include "support_check.h"
#include "internal/dtype_util.h"
#include "internal/error.h"
#include "internal/json_util.h"

START_TEST(names_and_sizes) {
    for (int t = NDS_BOOL; t < NDS_DTYPE_COUNT; t++) {
        bool fixed_string = t == NDS_BYTES_FIXED || t == NDS_UCS4_FIXED; /* no width in a name */
        bool vlen = nds_dtype_is_vlen((nds_dtype)t); /* formats create them from their metadata */
        ck_assert_int_eq(nds_dtype_from_name(nds_dtype_name((nds_dtype)t)),
                         fixed_string || vlen ? NDS_DTYPE_INVALID : t);
        if (vlen)
            ck_assert_uint_eq(nds_dtype_size((nds_dtype)t), 0);
        else
            ck_assert_uint_gt(nds_dtype_size((nds_dtype)t), 0);
    }
    ck_assert_uint_eq(nds_dtype_size(NDS_COMPLEX128), 16);
    ck_assert_uint_eq(nds_dtype_swap_unit(NDS_COMPLEX128), 8);
    ck_assert_int_eq(nds_dtype_from_name("uint128"), NDS_DTYPE_INVALID);
}
END_TEST

START_TEST(half_conversions) {
    float values[] = {0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f, 5.9604645e-08f, 0.333251953125f};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++)
        ck_assert_float_eq(nds_half_to_float(nds_float_to_half(values[i])), values[i]);
    ck_assert_uint_eq(nds_float_to_half(1.0f), 0x3c00);
    ck_assert_uint_eq(nds_float_to_half(INFINITY), 0x7c00);
    ck_assert(isnan(nds_half_to_float(nds_float_to_half(NAN))));
    ck_assert_uint_eq(nds_float_to_half(1e6f), 0x7c00); /* overflow to infinity */
    ck_assert_uint_eq(nds_float_to_bf16(1.0f), 0x3f80);
    ck_assert_float_eq(nds_bf16_to_float(0x4049), 3.140625f);
    ck_assert(isnan(nds_bf16_to_float(nds_float_to_bf16(NAN))));
}
END_TEST

START_TEST(byteswap_units) {
    uint8_t b[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    nds_byteswap(b, 2, 4);
    uint8_t want[8] = {4, 3, 2, 1, 8, 7, 6, 5};
    ck_assert_mem_eq(b, want, 8);
    uint8_t c[3] = {1, 2, 3};
    nds_byteswap(c, 1, 3);
    ck_assert_uint_eq(c[0], 3);
}
END_TEST

static int fill(nds_dtype t, const char *json, uint8_t *out) {
    json_object *v = NULL;
    int rc = nds_json_parse(json, strlen(json), "test", &v);
    if (rc == 0) rc = nds_fill_from_json(t, v, "test", out);
    json_object_put(v);
    return rc;
}

START_TEST(fill_values_from_json) {
    uint8_t out[16];
    double d;
    float f;
    NDS_OK(fill(NDS_FLOAT64, "\"NaN\"", out));
    memcpy(&d, out, 8);
    ck_assert(isnan(d));
    NDS_OK(fill(NDS_FLOAT32, "\"-Infinity\"", out));
    memcpy(&f, out, 4);
    ck_assert(isinf(f) && f < 0);
    NDS_OK(fill(NDS_INT16, "-32768", out));
    ck_assert_int_eq(*(int16_t *)out, -32768);
    ck_assert_int_eq(fill(NDS_INT16, "32768", out), NDS_EFORMAT);
    ck_assert_int_eq(fill(NDS_UINT8, "-1", out), NDS_EFORMAT);
    ck_assert_int_eq(fill(NDS_UINT8, "1.5", out), NDS_EFORMAT);
    NDS_OK(fill(NDS_UINT64, "18446744073709551615", out));
    ck_assert(*(uint64_t *)out == UINT64_MAX);
    NDS_OK(fill(NDS_BOOL, "true", out));
    ck_assert_uint_eq(out[0], 1);
    NDS_OK(fill(NDS_UINT32, "null", out));
    ck_assert_uint_eq(*(uint32_t *)out, 0);
    NDS_OK(fill(NDS_COMPLEX64, "[1.5, \"NaN\"]", out));
    memcpy(&f, out, 4);
    ck_assert_float_eq(f, 1.5f);
    NDS_OK(fill(NDS_FLOAT32, "\"0x7fc00000\"", out));
    ck_assert_uint_eq(*(uint32_t *)out, 0x7fc00000u);
    ck_assert_int_eq(fill(NDS_FLOAT32, "\"abc\"", out), NDS_EFORMAT);
    ck_assert_int_eq(fill(NDS_INT8, "\"0x123\"", out), NDS_EFORMAT);
    ck_assert_int_eq(fill(NDS_FLOAT16, "{}", out), NDS_EFORMAT);
    /* Out of range for the dtype: an error naming the value, not a silent Infinity. */
    static const struct {
        nds_dtype t;
        const char *json, *named;
    } too_big[] = {{NDS_FLOAT32, "1e400", "fill_value 1e400 is out of range for float32"},
                   {NDS_FLOAT32, "-1e39", "fill_value -1e39 is out of range for float32"},
                   {NDS_FLOAT64, "1e400", "fill_value 1e400 is out of range for float64"},
                   {NDS_FLOAT16, "70000", "fill_value 70000 is out of range for float16"},
                   {NDS_BFLOAT16, "1e39", "out of range for bfloat16"},
                   {NDS_COMPLEX64, "[1, 1e39]", "fill_value 1e39 is out of range for float32"},
                   {NDS_COMPLEX64, "1e39", "fill_value 1e39 is out of range for float32"}};
    for (size_t i = 0; i < sizeof too_big / sizeof too_big[0]; i++) {
        ck_assert_int_eq(fill(too_big[i].t, too_big[i].json, out), NDS_EFORMAT);
        ck_assert_msg(strstr(nds_error_last()->message, too_big[i].named), "%s: %s",
                      too_big[i].json, nds_error_last()->message);
    }
    NDS_OK(fill(NDS_FLOAT32, "3.4028234e38", out)); /* FLT_MAX, and the largest half */
    memcpy(&f, out, 4);
    ck_assert(!isinf(f));
    NDS_OK(fill(NDS_FLOAT16, "65504", out));
    NDS_OK(fill(NDS_FLOAT32, "\"Infinity\"", out));
    memcpy(&f, out, 4);
    ck_assert(isinf(f) && f > 0);
    NDS_OK(fill(NDS_FLOAT32, "1e-50", out)); /* underflow rounds to 0, as NumPy's does */
}
END_TEST

START_TEST(fill_values_round_trip) {
    const char *cases[][2] = {{"float64", "\"NaN\""}, {"float32", "\"Infinity\""}, {"int64", "-5"},
                              {"uint64", "18446744073709551615"}, {"bool", "false"}, {"float64", "0.25"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t out[16], again[16];
        nds_dtype t = nds_dtype_from_name(cases[i][0]);
        NDS_OK(fill(t, cases[i][1], out));
        json_object *j = nds_fill_to_json(t, out);
        ck_assert_ptr_nonnull(j);
        NDS_OK(nds_fill_from_json(t, j, "test", again));
        ck_assert_mem_eq(out, again, nds_dtype_size(t));
        json_object_put(j);
    }
}
END_TEST

START_TEST(all_equal_and_fill) {
    uint8_t buf[64];
    uint32_t v = 0x01020304;
    nds_fill_elements(buf, 16, 4, (uint8_t *)&v);
    ck_assert(nds_all_equal(buf, 16, 4, (uint8_t *)&v));
    buf[63] ^= 1;
    ck_assert(!nds_all_equal(buf, 16, 4, (uint8_t *)&v));
}
END_TEST

START_TEST(errors_carry_context) {
    ck_assert_str_eq(nds_strerror(NDS_ECONFLICT), "condition failed: the stored generation changed");
    ck_assert_str_eq(nds_strerror(-999), "unknown error");
    nds_err_cause(NDS_ECORRUPT, NDS_CAUSE_ZSTD, 20, "zstd: corrupted block detected");
    nds_err_prefix(NDS_ECORRUPT, "zarr: chunk %s of %s", "0.1", "file:///d/a/");
    const nds_error *e = nds_error_last();
    ck_assert_str_eq(e->message, "zarr: chunk 0.1 of file:///d/a/: zstd: corrupted block detected");
    ck_assert_int_eq(e->cause_kind, NDS_CAUSE_ZSTD);
    ck_assert_int_eq(e->cause, 20);
    ck_assert_int_eq(nds_err_errno(2, "open %s", "/x"), NDS_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "open /x: "));
}
END_TEST

START_TEST(json_helpers_name_members) {
    json_object *o;
    const char *text = "{\"a\": [1, 2, -3], \"b\": \"x\"}";
    NDS_OK(nds_json_parse(text, strlen(text), "doc", &o));
    uint64_t v[4];
    size_t n;
    ck_assert_int_eq(nds_json_get_u64_array(o, "a", "doc", 100, v, 4, &n), NDS_EFORMAT);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "\"a\"[2]"));
    int64_t i;
    ck_assert_int_eq(nds_json_get_int(o, "b", false, 0, 10, "doc", &i), NDS_EFORMAT);
    json_object_put(o);
    ck_assert_int_eq(nds_json_parse("{\"a\":", 5, "doc", &o), NDS_EFORMAT);
    ck_assert_int_eq(nds_json_parse("{} x", 4, "doc", &o), NDS_EFORMAT);
    char deep[200];
    memset(deep, '[', sizeof deep);
    ck_assert_int_eq(nds_json_parse(deep, sizeof deep, "doc", &o), NDS_EFORMAT);
}
END_TEST

int main(void) {
    Suite *s = suite_create("dtype");
    TCase *tc = tcase_create("dtype");
    tcase_add_test(tc, names_and_sizes);
    tcase_add_test(tc, half_conversions);
    tcase_add_test(tc, byteswap_units);
    tcase_add_test(tc, fill_values_from_json);
    tcase_add_test(tc, fill_values_round_trip);
    tcase_add_test(tc, all_equal_and_fill);
    tcase_add_test(tc, errors_carry_context);
    tcase_add_test(tc, json_helpers_name_members);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
