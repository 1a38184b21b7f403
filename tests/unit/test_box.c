/* Boxes and NumPy-style region strings. */
#include <string.h>
#include "support_check.h"

static const uint64_t shape3[3] = {100, 200, 10};

START_TEST(full_and_counts) {
    nds_box b;
    nds_box_full(&b, 3, shape3);
    ck_assert_uint_eq(nds_box_count(&b), 200000);
    ck_assert_uint_eq(nds_box_extent(&b, 1), 200);
    NDS_OK(nds_box_check(&b, 3, shape3));
}
END_TEST

START_TEST(parse_slices_steps_and_integers) {
    nds_box b;
    NDS_OK(nds_box_parse(&b, "[0:50, 100:200:3, 7]", 3, shape3));
    ck_assert_uint_eq(b.start[0], 0);
    ck_assert_uint_eq(b.stop[0], 50);
    ck_assert_uint_eq(b.step[1], 3);
    ck_assert_uint_eq(nds_box_extent(&b, 1), 34);
    ck_assert_uint_eq(b.start[2], 7);
    ck_assert_uint_eq(b.stop[2], 8);
    ck_assert_uint_eq(b.dropped, 1u << 2);
    char text[128];
    nds_box_format(&b, text, sizeof text);
    ck_assert_str_eq(text, "[0:50, 100:200:3, 7]");
}
END_TEST

START_TEST(parse_negative_and_ellipsis) {
    nds_box b;
    NDS_OK(nds_box_parse(&b, "-10:, ...", 3, shape3));
    ck_assert_uint_eq(b.start[0], 90);
    ck_assert_uint_eq(b.stop[0], 100);
    ck_assert_uint_eq(b.stop[1], 200);
    ck_assert_uint_eq(b.stop[2], 10);
    NDS_OK(nds_box_parse(&b, "[..., -1]", 3, shape3));
    ck_assert_uint_eq(b.start[2], 9);
    ck_assert_uint_eq(b.stop[1], 200);
    NDS_OK(nds_box_parse(&b, "", 3, shape3));
    ck_assert_uint_eq(nds_box_count(&b), 200000);
    NDS_OK(nds_box_parse(&b, "[:-1, 5:2]", 3, shape3)); /* empty slice like numpy */
    ck_assert_uint_eq(b.stop[0], 99);
    ck_assert_uint_eq(nds_box_extent(&b, 1), 0);
}
END_TEST

START_TEST(parse_errors) {
    nds_box b;
    ck_assert_int_eq(nds_box_parse(&b, "[100]", 3, shape3), NDS_ERANGE);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "dimension 0"));
    ck_assert_int_eq(nds_box_parse(&b, "[-101]", 3, shape3), NDS_ERANGE);
    ck_assert_int_eq(nds_box_parse(&b, "[1,2,3,4]", 3, shape3), NDS_EINVAL);
    ck_assert_int_eq(nds_box_parse(&b, "[0:1:0]", 3, shape3), NDS_EINVAL);
    ck_assert_int_eq(nds_box_parse(&b, "[0:1:-1]", 3, shape3), NDS_EINVAL);
    ck_assert_int_eq(nds_box_parse(&b, "[a]", 3, shape3), NDS_EINVAL);
    ck_assert_int_eq(nds_box_parse(&b, "[1:2:3:4]", 3, shape3), NDS_EINVAL);
    ck_assert_int_eq(nds_box_parse(&b, "[..., ...]", 3, shape3), NDS_EINVAL);
    ck_assert_int_eq(nds_box_parse(&b, "[0:1", 3, shape3), NDS_EINVAL);
    ck_assert_int_eq(nds_box_parse(&b, "[1,,2]", 3, shape3), NDS_EINVAL);
    ck_assert_int_eq(nds_box_parse(&b, "[99999999999999999999999]", 3, shape3), NDS_EINVAL);
}
END_TEST

/* A domain [1984, 2048) x [-16, 16) x [0, 10): numbers are domain coordinates where the origin is
 * not 0 (negative ones too), 0-based NumPy rules where it is. */
START_TEST(parse_domain_coordinates) {
    static const int64_t origin[3] = {1984, -16, 0};
    static const uint64_t shape[3] = {64, 32, 10};
    nds_box b;
    NDS_OK(nds_box_parse_domain(&b, "[2000:2010, -16, -1]", 3, origin, shape));
    ck_assert_uint_eq(b.start[0], 16);
    ck_assert_uint_eq(b.stop[0], 26);
    ck_assert_uint_eq(b.start[1], 0); /* -16 is the first index, not counted from the end */
    ck_assert_uint_eq(b.start[2], 9); /* origin 0: -1 is the last */
    NDS_OK(nds_box_parse_domain(&b, "[:2048, 15]", 3, origin, shape));
    ck_assert_uint_eq(b.start[0], 0);
    ck_assert_uint_eq(b.stop[0], 64);
    ck_assert_uint_eq(b.start[1], 31);
    NDS_OK(nds_box_parse_domain(&b, "[1984:2048:8]", 3, origin, shape));
    ck_assert_uint_eq(nds_box_extent(&b, 0), 8);
    const char *outside[] = {"[10]", "[2048]", "[1983:2000]", "[2000:2049]", "[0, 16]", "[0, -17]",
                             "[-9223372036854775807]"};
    for (size_t i = 0; i < sizeof outside / sizeof *outside; i++) {
        ck_assert_int_eq(nds_box_parse_domain(&b, outside[i], 3, origin, shape), NDS_ERANGE);
        ck_assert_msg(strstr(nds_error_last()->message, "outside the domain"), "%s: %s", outside[i],
                      nds_error_last()->message);
    }
    ck_assert_int_eq(nds_box_parse_domain(&b, "[10]", 3, origin, shape), NDS_ERANGE);
    ck_assert_str_eq(nds_error_last()->message,
                     "region dimension 0: 10 is outside the domain [1984, 2048)");
    NDS_OK(nds_box_parse_domain(&b, "[-1]", 3, NULL, shape3)); /* NULL: nds_box_parse */
    ck_assert_uint_eq(b.start[0], 99);
}
END_TEST

START_TEST(check_rejects_outside) {
    nds_box b;
    nds_box_full(&b, 3, shape3);
    b.stop[1] = 201;
    ck_assert_int_eq(nds_box_check(&b, 3, shape3), NDS_ERANGE);
    ck_assert_int_eq(nds_box_check(&b, 2, shape3), NDS_ERANGE);
}
END_TEST

START_TEST(parse_extreme_indices) {
    /* Extents past 2^63 and the most negative index: unsigned arithmetic, no overflow. */
    const uint64_t huge[2] = {UINT64_MAX, UINT64_C(1) << 63};
    nds_box b;
    NDS_OK(nds_box_parse(&b, "[-1, -9223372036854775808]", 2, huge));
    ck_assert_uint_eq(b.start[0], UINT64_MAX - 1);
    ck_assert_uint_eq(b.start[1], 0);
    NDS_OK(nds_box_parse(&b, "[9223372036854775807, 5:-1:9223372036854775807]", 2, huge));
    ck_assert_uint_eq(b.start[0], INT64_MAX);
    ck_assert_uint_eq(b.stop[1], (UINT64_C(1) << 63) - 1);
    ck_assert_uint_eq(nds_box_extent(&b, 1), 1);
    ck_assert_int_eq(nds_box_parse(&b, "[-9223372036854775808, 0]", 2, shape3), NDS_ERANGE);
    ck_assert_int_eq(nds_box_parse(&b, "[99999999999999999999]", 3, shape3), NDS_EINVAL);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "out of range"));
    ck_assert_int_eq(nds_box_parse(&b, "[0:5:-99999999999999999999]", 3, shape3), NDS_EINVAL);
}
END_TEST

START_TEST(rank_zero) {
    nds_box b;
    NDS_OK(nds_box_parse(&b, "[]", 0, NULL));
    ck_assert_uint_eq(nds_box_count(&b), 1);
    NDS_OK(nds_box_parse(&b, "...", 0, NULL));
}
END_TEST

int main(void) {
    Suite *s = suite_create("box");
    TCase *tc = tcase_create("box");
    tcase_add_test(tc, full_and_counts);
    tcase_add_test(tc, parse_slices_steps_and_integers);
    tcase_add_test(tc, parse_negative_and_ellipsis);
    tcase_add_test(tc, parse_errors);
    tcase_add_test(tc, parse_domain_coordinates);
    tcase_add_test(tc, check_rejects_outside);
    tcase_add_test(tc, rank_zero);
    tcase_add_test(tc, parse_extreme_indices);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
