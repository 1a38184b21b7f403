/* The zarr v3 extension data types (issue 20): float8 family, float4_e2m1fn, int4/uint4/int2/uint2,
 * datetime64/timedelta64. Golden vectors derived from the registry's bit layouts (sign, exponent
 * bits, bias, NaN encoding), every pattern round-tripped, rounding to nearest even, the in-memory
 * normalisation of sub-byte types, and fill values in JSON. */
#include <math.h>
#include <string.h>
#include "support_check.h"
#include "internal/dtype_util.h"
#include "internal/json_util.h"

static uint8_t to_small(nds_dtype t, double d) {
    uint8_t b = 0xaa;
    ck_assert_msg(nds_small_float_store(t, d, &b) == 0, "%s cannot hold %g", nds_dtype_name(t), d);
    return b;
}

static bool refused(nds_dtype t, double d) {
    uint8_t b = 0;
    return nds_small_float_store(t, d, &b) == -1;
}

START_TEST(names_sizes_aliases) {
    ck_assert_int_eq(nds_dtype_from_name("float8_e4m3fn"), NDS_FLOAT8_E4M3FN);
    ck_assert_int_eq(nds_dtype_from_name("float8_e4m3b11fnuz"), NDS_FLOAT8_E4M3B11FNUZ);
    ck_assert_int_eq(nds_dtype_from_name("float8_e8m0fnu"), NDS_FLOAT8_E8M0FNU);
    ck_assert_int_eq(nds_dtype_from_name("int4"), NDS_INT4);
    ck_assert_int_eq(nds_dtype_from_name("uint2"), NDS_UINT2);
    ck_assert_int_eq(nds_dtype_from_name("float4_e2m1fn"), NDS_FLOAT4_E2M1FN);
    ck_assert_int_eq(nds_dtype_from_name("complex_float32"), NDS_COMPLEX64);
    ck_assert_int_eq(nds_dtype_from_name("complex_float64"), NDS_COMPLEX128);
    ck_assert_uint_eq(nds_dtype_size(NDS_INT4), 1);
    ck_assert_uint_eq(nds_dtype_size(NDS_FLOAT8_E5M2), 1);
    ck_assert_uint_eq(nds_dtype_size(NDS_DATETIME64), 8);
    ck_assert_uint_eq(nds_dtype_swap_unit(NDS_TIMEDELTA64), 8);
    ck_assert_uint_eq(nds_dtype_value_bits(NDS_INT2), 2);
    /* Existing values never move (the enum is public). */
    ck_assert_int_eq(NDS_COMPLEX128, 15);
    ck_assert_int_eq(NDS_FLOAT8_E4M3, 16);
}
END_TEST

START_TEST(float8_golden_vectors) {
    /* float8_e4m3fn: bias 7, no infinity, NaN S.1111.111 */
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E4M3FN, 1.0), 0x38);
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E4M3FN, 0.5), 0x30);
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E4M3FN, 448), 0x7e);
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E4M3FN, -448), 0xfe);
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E4M3FN, NAN), 0x7f);
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E4M3FN, ldexp(1, -9)), 0x01); /* smallest subnormal */
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E4M3FN, -0.0), 0x80);
    ck_assert(refused(NDS_FLOAT8_E4M3FN, INFINITY));
    ck_assert(refused(NDS_FLOAT8_E4M3FN, 464)); /* halfway past 448: would round beyond */
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E4M3FN, 460), 0x7e);
    ck_assert(isnan(nds_small_float_load(NDS_FLOAT8_E4M3FN, 0xff)));
    ck_assert(nds_small_float_load(NDS_FLOAT8_E4M3FN, 0x7e) == 448);
    /* ties to even: 1.0625 between 0x38 and 0x39, 1.1875 between 0x39 and 0x3a */
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E4M3FN, 1.0625), 0x38);
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E4M3FN, 1.1875), 0x3a);
    /* float8_e4m3: IEEE-like, bias 7, max 240, infinity 0x78, "NaN" is 0x7c */
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E4M3, 1.0), 0x38);
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E4M3, 240), 0x77);
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E4M3, INFINITY), 0x78);
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E4M3, -INFINITY), 0xf8);
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E4M3, 1e6), 0x78); /* overflow rounds to infinity */
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E4M3, NAN), 0x7c);
    /* float8_e5m2: bias 15, max 57344, infinity 0x7c, "NaN" is 0x7e */
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E5M2, 1.0), 0x3c);
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E5M2, 57344), 0x7b);
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E5M2, INFINITY), 0x7c);
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E5M2, NAN), 0x7e);
    /* fnuz: NaN is 0x80, no negative zero, no infinity */
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E4M3FNUZ, 1.0), 0x40);
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E4M3FNUZ, 240), 0x7f);
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E4M3FNUZ, NAN), 0x80);
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E4M3FNUZ, -0.0), 0x00);
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E4M3FNUZ, -1e-30), 0x00); /* rounds to 0, not NaN */
    ck_assert(refused(NDS_FLOAT8_E4M3FNUZ, INFINITY));
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E5M2FNUZ, 1.0), 0x40);
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E5M2FNUZ, 57344), 0x7f);
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E4M3B11FNUZ, 1.0), 0x58);
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E4M3B11FNUZ, 30), 0x7f);
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E4M3B11FNUZ, NAN), 0x80);
    /* float8_e8m0fnu: unsigned powers of two, bias 127, NaN 0xff, no zero */
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E8M0FNU, 1.0), 0x7f);
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E8M0FNU, 2.0), 0x80);
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E8M0FNU, ldexp(1, -127)), 0x00);
    ck_assert_uint_eq(to_small(NDS_FLOAT8_E8M0FNU, NAN), 0xff);
    ck_assert(refused(NDS_FLOAT8_E8M0FNU, 0.0));
    ck_assert(refused(NDS_FLOAT8_E8M0FNU, -1.0));
    /* float4_e2m1fn: 0bSEEM, bias 1, values 0 0.5 1 1.5 2 3 4 6, no NaN or infinity */
    ck_assert_uint_eq(to_small(NDS_FLOAT4_E2M1FN, 1.0), 0x2);
    ck_assert_uint_eq(to_small(NDS_FLOAT4_E2M1FN, 0.5), 0x1);
    ck_assert_uint_eq(to_small(NDS_FLOAT4_E2M1FN, 6.0), 0x7);
    ck_assert_uint_eq(to_small(NDS_FLOAT4_E2M1FN, -6.0), 0xf);
    ck_assert_uint_eq(to_small(NDS_FLOAT4_E2M1FN, 5.0), 0x6); /* tie 4|6: even pattern 0x6 (4) */
    ck_assert(refused(NDS_FLOAT4_E2M1FN, NAN));
    ck_assert(refused(NDS_FLOAT4_E2M1FN, 7.0));
    ck_assert(nds_small_float_load(NDS_FLOAT4_E2M1FN, 0xf7) == 6.0); /* upper bits ignored */
}
END_TEST

/* Every finite pattern reads back as itself; every NaN pattern reads as NaN. */
START_TEST(every_pattern_round_trips) {
    for (int t = NDS_FLOAT8_E4M3; t <= NDS_FLOAT4_E2M1FN; t++) {
        if (!nds_dtype_is_small_float((nds_dtype)t)) continue;
        unsigned n = t == NDS_FLOAT4_E2M1FN ? 16 : 256;
        for (unsigned c = 0; c < n; c++) {
            double d = nds_small_float_load((nds_dtype)t, (uint8_t)c);
            if (isnan(d)) continue;
            uint8_t back = 0;
            ck_assert_int_eq(nds_small_float_store((nds_dtype)t, d, &back), 0);
            ck_assert_msg(back == c, "%s: 0x%02x -> %g -> 0x%02x", nds_dtype_name((nds_dtype)t), c,
                          d, back);
        }
    }
}
END_TEST

START_TEST(subbyte_normalise) {
    uint8_t v[4] = {0xf7, 0x0f, 0x08, 0x80};
    nds_dtype_normalize(NDS_INT4, v, 4);
    ck_assert_int_eq((int8_t)v[0], 7);
    ck_assert_int_eq((int8_t)v[1], -1);
    ck_assert_int_eq((int8_t)v[2], -8);
    ck_assert_int_eq((int8_t)v[3], 0);
    uint8_t u[3] = {0xf7, 0xff, 0x03};
    nds_dtype_normalize(NDS_UINT4, u, 3);
    ck_assert_uint_eq(u[0], 7);
    ck_assert_uint_eq(u[1], 15);
    uint8_t i2[3] = {0xfe, 0x01, 0x02};
    nds_dtype_normalize(NDS_INT2, i2, 3);
    ck_assert_int_eq((int8_t)i2[0], -2);
    ck_assert_int_eq((int8_t)i2[1], 1);
    ck_assert_int_eq((int8_t)i2[2], -2);
    uint8_t u2 = 0xff;
    nds_dtype_normalize(NDS_UINT2, &u2, 1);
    ck_assert_uint_eq(u2, 3);
    uint8_t keep = 0xff; /* other types are left alone */
    nds_dtype_normalize(NDS_UINT8, &keep, 1);
    ck_assert_uint_eq(keep, 0xff);
}
END_TEST

/* Parses text as a fill value of t; the return code. */
static int fill(nds_dtype t, const char *text, uint8_t *out) {
    json_object *v = NULL;
    ck_assert_int_eq(nds_json_parse(text, strlen(text), "t", &v), 0);
    int rc = nds_fill_from_json(t, v, "doc", out);
    json_object_put(v);
    return rc;
}

START_TEST(fill_values) {
    uint8_t b[NDS_DTYPE_MAX_SIZE];
    ck_assert_int_eq(fill(NDS_FLOAT8_E4M3FN, "1.0", b), 0);
    ck_assert_uint_eq(b[0], 0x38);
    ck_assert_int_eq(fill(NDS_FLOAT8_E4M3FN, "\"NaN\"", b), 0);
    ck_assert_uint_eq(b[0], 0x7f);
    ck_assert_int_eq(fill(NDS_FLOAT8_E4M3FN, "\"0x7e\"", b), 0);
    ck_assert_uint_eq(b[0], 0x7e);
    ck_assert_int_eq(fill(NDS_FLOAT8_E4M3FN, "\"Infinity\"", b), NDS_EFORMAT);
    ck_assert(strstr(nds_error_last()->message, "float8_e4m3fn") != NULL);
    ck_assert(strstr(nds_error_last()->message, "no infinity") != NULL);
    ck_assert_int_eq(fill(NDS_FLOAT8_E4M3FN, "1000", b), NDS_EFORMAT);
    ck_assert_int_eq(fill(NDS_FLOAT8_E5M2, "\"-Infinity\"", b), 0);
    ck_assert_uint_eq(b[0], 0xfc);
    ck_assert_int_eq(fill(NDS_FLOAT8_E5M2, "1e6", b), NDS_EFORMAT); /* a number, not "Infinity" */
    ck_assert_int_eq(fill(NDS_FLOAT8_E4M3FNUZ, "\"NaN\"", b), 0);
    ck_assert_uint_eq(b[0], 0x80);
    ck_assert_int_eq(fill(NDS_FLOAT4_E2M1FN, "\"NaN\"", b), NDS_EFORMAT);
    ck_assert_int_eq(fill(NDS_FLOAT4_E2M1FN, "-1.5", b), 0);
    ck_assert_uint_eq(b[0], 0xb);
    ck_assert_int_eq(fill(NDS_INT4, "-8", b), 0);
    ck_assert_uint_eq(b[0], 0xf8);
    ck_assert_int_eq(fill(NDS_INT4, "8", b), NDS_EFORMAT);
    ck_assert_int_eq(fill(NDS_INT4, "\"0xf\"", b), 0);
    ck_assert_int_eq((int8_t)b[0], -1);
    ck_assert_int_eq(fill(NDS_UINT4, "15", b), 0);
    ck_assert_int_eq(fill(NDS_UINT4, "16", b), NDS_EFORMAT);
    ck_assert_int_eq(fill(NDS_INT2, "-2", b), 0);
    ck_assert_int_eq(fill(NDS_INT2, "2", b), NDS_EFORMAT);
    ck_assert_int_eq(fill(NDS_UINT2, "3", b), 0);
    ck_assert_int_eq(fill(NDS_UINT2, "-1", b), NDS_EFORMAT);
    int64_t t64;
    ck_assert_int_eq(fill(NDS_DATETIME64, "\"NaT\"", b), 0);
    memcpy(&t64, b, 8);
    ck_assert(t64 == INT64_MIN);
    ck_assert_int_eq(fill(NDS_TIMEDELTA64, "-5", b), 0);
    memcpy(&t64, b, 8);
    ck_assert(t64 == -5);
    ck_assert_int_eq(fill(NDS_DATETIME64, "\"yesterday\"", b), NDS_EFORMAT);
    /* printed back */
    uint8_t e = 0x38;
    json_object *j = nds_fill_to_json(NDS_FLOAT8_E4M3FN, &e);
    ck_assert(json_object_get_double(j) == 1.0);
    json_object_put(j);
    uint8_t i4 = 0xf8;
    j = nds_fill_to_json(NDS_INT4, &i4);
    ck_assert_int_eq(json_object_get_int64(j), -8);
    json_object_put(j);
}
END_TEST


/* nds_json_parse marks integers json-c clamped, and only those: strings, -Infinity and big doubles
 * do not shift the count. */
START_TEST(json_marks_clamped_integers) {
    static const char text[] = "{\"s\": \"x\\\"18446744073709551616\", \"a\": -Infinity, "
                               "\"d\": 1e400, \"b\": [18446744073709551615, 18446744073709551616, "
                               "-9223372036854775809, -5, 7]}";
    json_object *o = NULL, *b;
    ck_assert_int_eq(nds_json_parse(text, strlen(text), "t", &o), 0);
    ck_assert(json_object_object_get_ex(o, "b", &b));
    ck_assert(!nds_json_int_overflowed(json_object_array_get_idx(b, 0)));
    ck_assert(nds_json_int_overflowed(json_object_array_get_idx(b, 1)));
    ck_assert(nds_json_int_overflowed(json_object_array_get_idx(b, 2)));
    ck_assert(!nds_json_int_overflowed(json_object_array_get_idx(b, 3)));
    ck_assert_int_eq(nds_json_check_fits(json_object_array_get_idx(b, 2), "doc", "m"), NDS_EFORMAT);
    ck_assert_str_eq(nds_error_last()->message, "doc: \"m\" -9223372036854775809 does not fit 64 bits");
    json_object_put(o);
    /* A member given twice (json-c keeps one) cannot be lined up: refused, not guessed. */
    static const char twice[] = "{\"a\": 1, \"a\": 2, \"b\": 99999999999999999999}";
    ck_assert_int_eq(nds_json_parse(twice, strlen(twice), "t", &o), NDS_EFORMAT);
    ck_assert(strstr(nds_error_last()->message, "does not fit 64 bits") != NULL);
}
END_TEST

int main(void) {
    Suite *s = suite_create("dtype_ml");
    TCase *tc = tcase_create("dtype_ml");
    tcase_add_test(tc, names_sizes_aliases);
    tcase_add_test(tc, float8_golden_vectors);
    tcase_add_test(tc, every_pattern_round_trips);
    tcase_add_test(tc, subbyte_normalise);
    tcase_add_test(tc, fill_values);
    tcase_add_test(tc, json_marks_clamped_integers);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
