/* The downsampling kernel of `ndstore downsample` (cli/downsample_kernel.c, compiled into this
 * suite): every method on known blocks worked by hand, odd edges (partial blocks), the rounding and
 * tie rules, extreme values, NaN, rows reduced in parts, refusals. */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "support_check.h"
#include "../../cli/downsample_kernel.h"

/* Reduces a whole block; asserts success. */
static void reduce(nds_dtype t, cli_ds_method m, bool sparse, size_t rank, const uint64_t *shape,
                   const uint64_t *factors, const void *in, void *out) {
    uint64_t os[NDS_MAX_RANK];
    cli_ds_out_shape(rank, shape, factors, os);
    cli_ds_block b = {t, nds_dtype_size(t), m, sparse, rank, shape, factors, in, out};
    ck_assert_int_eq(cli_ds_reduce(&b, 0, os[0]), 0);
}

START_TEST(out_shape_is_ceil) {
    uint64_t in[3] = {5, 4, 1}, f[3] = {2, 4, 3}, out[3];
    cli_ds_out_shape(3, in, f, out);
    ck_assert_uint_eq(out[0], 3);
    ck_assert_uint_eq(out[1], 1);
    ck_assert_uint_eq(out[2], 1);
}
END_TEST

/* 3 x 5 uint8 by 2 x 2: blocks 2x2, 2x2, 2x1 / 1x2, 1x2, 1x1 (the odd edges reduce what they have).
 */
START_TEST(odd_edges_every_method) {
    const uint8_t in[15] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    uint64_t shape[2] = {3, 5}, f[2] = {2, 2};
    uint8_t out[6];
    reduce(NDS_UINT8, CLI_DS_MEAN, false, 2, shape, f, in, out);
    /* means: 4, 6, 7.5 -> 8 / 11.5 -> 12, 13.5 -> 14, 15 */
    const uint8_t mean[6] = {4, 6, 8, 12, 14, 15};
    ck_assert_mem_eq(out, mean, 6);
    reduce(NDS_UINT8, CLI_DS_MIN, false, 2, shape, f, in, out);
    const uint8_t mn[6] = {1, 3, 5, 11, 13, 15};
    ck_assert_mem_eq(out, mn, 6);
    reduce(NDS_UINT8, CLI_DS_MAX, false, 2, shape, f, in, out);
    const uint8_t mx[6] = {7, 9, 10, 12, 14, 15};
    ck_assert_mem_eq(out, mx, 6);
    reduce(NDS_UINT8, CLI_DS_STRIDE, false, 2, shape, f, in, out);
    const uint8_t st[6] = {1, 3, 5, 11, 13, 15};
    ck_assert_mem_eq(out, st, 6);
}
END_TEST

START_TEST(mean_rounds_halves_away_from_zero) {
    const int16_t in[6] = {-1, -2, 1, 2, -3, 4}; /* -1.5, 1.5, 0.5 */
    uint64_t shape[1] = {6}, f[1] = {2};
    int16_t out[3];
    reduce(NDS_INT16, CLI_DS_MEAN, false, 1, shape, f, in, out);
    ck_assert_int_eq(out[0], -2);
    ck_assert_int_eq(out[1], 2);
    ck_assert_int_eq(out[2], 1);
    const int32_t third[3] = {1, 1, 2}; /* 4/3 = 1.33 -> 1 */
    int32_t o1;
    uint64_t s3[1] = {3}, f3[1] = {3};
    reduce(NDS_INT32, CLI_DS_MEAN, false, 1, s3, f3, third, &o1);
    ck_assert_int_eq(o1, 1);
}
END_TEST

/* 64-bit sums do not overflow: they are summed in 128 bits. */
START_TEST(mean_of_extremes_is_exact) {
    const uint64_t u[2] = {UINT64_MAX, UINT64_MAX - 1};
    const int64_t s[4] = {INT64_MIN, INT64_MIN + 1, INT64_MAX, INT64_MAX};
    uint64_t shape[1] = {2}, f[1] = {2}, uo;
    reduce(NDS_UINT64, CLI_DS_MEAN, false, 1, shape, f, u, &uo);
    ck_assert_uint_eq(uo, UINT64_MAX); /* MAX - 0.5, away from zero */
    int64_t so[2];
    uint64_t s4[1] = {4};
    reduce(NDS_INT64, CLI_DS_MEAN, false, 1, s4, f, s, so);
    ck_assert(so[0] == INT64_MIN); /* MIN + 0.5, away from zero */
    ck_assert(so[1] == INT64_MAX);
    const uint32_t big[4] = {UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX - 1};
    uint32_t bo;
    uint64_t f4[1] = {4};
    reduce(NDS_UINT32, CLI_DS_MEAN, false, 1, s4, f4, big, &bo);
    ck_assert_uint_eq(bo, UINT32_MAX); /* MAX - 0.25 */
}
END_TEST

START_TEST(mode_ties_go_to_the_smallest) {
    const uint64_t in[12] = {7, 3, 7, 3, 9, 9, 1, 2, 5, 6, 7, 8};
    uint64_t shape[1] = {12}, f[1] = {4}, out[3];
    reduce(NDS_UINT64, CLI_DS_MODE, false, 1, shape, f, in, out);
    ck_assert_uint_eq(out[0], 3); /* 3 and 7 twice each */
    ck_assert_uint_eq(out[1], 9);
    ck_assert_uint_eq(out[2], 5); /* all once: the smallest */
    const int8_t neg[4] = {-5, 4, 4, -5};
    int8_t no;
    uint64_t s4[1] = {4};
    reduce(NDS_INT8, CLI_DS_MODE, false, 1, s4, f, neg, &no);
    ck_assert_int_eq(no, -5);
}
END_TEST

START_TEST(mode_zero_counts_unless_sparse) {
    const uint32_t in[12] = {0, 0, 0, 5, 0, 0, 0, 0, 0, 2, 2, 0};
    uint64_t shape[1] = {12}, f[1] = {4};
    uint32_t dense[3], sparse[3];
    reduce(NDS_UINT32, CLI_DS_MODE, false, 1, shape, f, in, dense);
    reduce(NDS_UINT32, CLI_DS_MODE, true, 1, shape, f, in, sparse);
    ck_assert_uint_eq(dense[0], 0);
    ck_assert_uint_eq(sparse[0], 5); /* background ignored */
    ck_assert_uint_eq(sparse[1], 0); /* all background */
    ck_assert_uint_eq(dense[2], 0);  /* 0 and 2 twice each: the smallest */
    ck_assert_uint_eq(sparse[2], 2);
}
END_TEST

/* A block of more than 64 values is sorted with qsort: the same answer. */
START_TEST(mode_of_a_large_block) {
    uint16_t in[5 * 5 * 5];
    for (int i = 0; i < 125; i++) in[i] = (uint16_t)(i % 7 == 0 ? 42 : 1000 + i);
    uint64_t shape[3] = {5, 5, 5}, f[3] = {5, 5, 5};
    uint16_t out;
    reduce(NDS_UINT16, CLI_DS_MODE, false, 3, shape, f, in, &out);
    ck_assert_uint_eq(out, 42);
}
END_TEST

START_TEST(floats_mean_min_max_nan) {
    const float in[6] = {1.5f, 2.0f, NAN, 1.0f, -0.5f, -1.5f};
    uint64_t shape[1] = {6}, f[1] = {2};
    float out[3];
    reduce(NDS_FLOAT32, CLI_DS_MEAN, false, 1, shape, f, in, out);
    ck_assert(out[0] == 1.75f && isnan(out[1]) && out[2] == -1.0f);
    reduce(NDS_FLOAT32, CLI_DS_MIN, false, 1, shape, f, in, out);
    ck_assert(out[0] == 1.5f && isnan(out[1]) && out[2] == -1.5f);
    reduce(NDS_FLOAT32, CLI_DS_MAX, false, 1, shape, f, in, out);
    ck_assert(out[0] == 2.0f && isnan(out[1]) && out[2] == -0.5f);
    const double d[3] = {0.1, 0.2, 0.3};
    double dm;
    uint64_t s3[1] = {3}, f3[1] = {3};
    reduce(NDS_FLOAT64, CLI_DS_MEAN, false, 1, s3, f3, d, &dm);
    ck_assert(dm == (0.1 + 0.2 + 0.3) / 3);
}
END_TEST

/* Rows reduced in parts (as the command's threads do) give the whole answer. */
START_TEST(rows_in_parts) {
    uint16_t in[7 * 6 * 5];
    for (int i = 0; i < 7 * 6 * 5; i++) in[i] = (uint16_t)(i * 37 % 101);
    uint64_t shape[3] = {7, 6, 5}, f[3] = {2, 3, 2}, os[3];
    cli_ds_out_shape(3, shape, f, os);
    uint16_t whole[4 * 2 * 3], parts[4 * 2 * 3];
    reduce(NDS_UINT16, CLI_DS_MEAN, false, 3, shape, f, in, whole);
    cli_ds_block b = {NDS_UINT16, 2, CLI_DS_MEAN, false, 3, shape, f, in, parts};
    ck_assert_int_eq(cli_ds_reduce(&b, 0, 1), 0);
    ck_assert_int_eq(cli_ds_reduce(&b, 1, 3), 0);
    ck_assert_int_eq(cli_ds_reduce(&b, 3, 4), 0);
    ck_assert_mem_eq(whole, parts, sizeof whole);
    /* and one element by hand: output (3, 1, 2) is input [6, 3:6, 4] (an edge in dims 0 and 2) */
    unsigned sum = 0;
    for (int y = 3; y < 6; y++) sum += in[6 * 30 + y * 5 + 4];
    ck_assert_uint_eq(whole[3 * 6 + 1 * 3 + 2], (sum + 1) / 3);
}
END_TEST

START_TEST(refusals) {
    cli_ds_method m;
    ck_assert(cli_ds_method_parse("mode", &m) && m == CLI_DS_MODE);
    ck_assert(!cli_ds_method_parse("median", &m));
    ck_assert_ptr_nonnull(cli_ds_unsupported(CLI_DS_MODE, NDS_FLOAT32));
    ck_assert_ptr_nonnull(cli_ds_unsupported(CLI_DS_MEAN, NDS_BOOL));
    ck_assert_ptr_null(cli_ds_unsupported(CLI_DS_STRIDE, NDS_COMPLEX64));
    float in[2] = {1, 2}, out;
    uint64_t shape[1] = {2}, f[1] = {2};
    cli_ds_block b = {NDS_FLOAT32, 4, CLI_DS_MODE, false, 1, shape, f, in, &out};
    ck_assert_int_eq(cli_ds_reduce(&b, 0, 1), -1);
}
END_TEST

int main(void) {
    Suite *s = suite_create("downsample");
    TCase *tc = tcase_create("kernel");
    tcase_add_test(tc, out_shape_is_ceil);
    tcase_add_test(tc, odd_edges_every_method);
    tcase_add_test(tc, mean_rounds_halves_away_from_zero);
    tcase_add_test(tc, mean_of_extremes_is_exact);
    tcase_add_test(tc, mode_ties_go_to_the_smallest);
    tcase_add_test(tc, mode_zero_counts_unless_sparse);
    tcase_add_test(tc, mode_of_a_large_block);
    tcase_add_test(tc, floats_mean_min_max_nan);
    tcase_add_test(tc, rows_in_parts);
    tcase_add_test(tc, refusals);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
