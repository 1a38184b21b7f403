/* The vlen-utf8 / vlen-bytes chunk lists (formats/codecs/vlen.c, issue 20): the byte layout of the
 * zarr-extensions registry and numcodecs (golden vectors: the chunks zarr-python 2.13 wrote for
 * ['ab', ''] and ['é', '']), round trips, and hostile payloads (counts and lengths past the end,
 * huge counts, trailing bytes, bad UTF-8) refused with NDS_ECORRUPT saying which. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "ndstore/errors.h"
#include "support_check.h"
#include "support_format.h"
#include "../../formats/codecs/vlen.h"

static const uint8_t zarr_python_ab[] = {2, 0, 0, 0, 2, 0, 0, 0, 'a', 'b', 0, 0, 0, 0};
static const uint8_t zarr_python_e_acute[] = {2, 0, 0, 0, 2, 0, 0, 0, 0xc3, 0xa9, 0, 0, 0, 0};

START_TEST(golden_vectors) {
    nds_vlen_list l;
    NDS_OK(nds_vlen_decode(zarr_python_ab, sizeof zarr_python_ab, 2, true, &l));
    ck_assert_uint_eq(l.count, 2);
    ck_assert_uint_eq(l.offsets[0], 0);
    ck_assert_uint_eq(l.offsets[1], 2);
    ck_assert_uint_eq(l.offsets[2], 2);
    ck_assert_mem_eq(l.data, "ab", 2);
    nds_buf out = {0};
    NDS_OK(nds_vlen_encode(l.offsets, l.data, l.count, true, &out));
    ck_assert_uint_eq(out.len, sizeof zarr_python_ab);
    ck_assert_mem_eq(out.data, zarr_python_ab, sizeof zarr_python_ab);
    nds_buf_dispose(&out);
    nds_vlen_list_dispose(&l);
    NDS_OK(nds_vlen_decode(zarr_python_e_acute, sizeof zarr_python_e_acute, 2, true, &l));
    ck_assert_mem_eq(l.data, "\xc3\xa9", 2);
    nds_vlen_list_dispose(&l);
    static const uint8_t empty[] = {0, 0, 0, 0};
    NDS_OK(nds_vlen_decode(empty, 4, 0, false, &l));
    ck_assert_uint_eq(l.count, 0);
    ck_assert_uint_eq(l.offsets[0], 0);
    nds_vlen_list_dispose(&l);
}
END_TEST

START_TEST(bytes_round_trip) {
    const uint8_t data[] = "x\0yzzz\xff";
    const uint64_t offsets[] = {0, 2, 2, 6, 7};
    nds_buf out = {0};
    NDS_OK(nds_vlen_encode(offsets, data, 4, false, &out));
    ck_assert_uint_eq(out.len, 4 + 4 * 4 + 7);
    nds_vlen_list l;
    NDS_OK(nds_vlen_decode(out.data, out.len, 4, false, &l));
    ck_assert_mem_eq(l.offsets, offsets, sizeof offsets);
    ck_assert_mem_eq(l.data, data, 7);
    nds_vlen_list_dispose(&l);
    /* the \xff element is not UTF-8: vlen-utf8 refuses it both ways */
    EXPECT_ERR(nds_vlen_decode(out.data, out.len, 4, true, &l), NDS_ECORRUPT,
               "element 3 is not valid UTF-8");
    ck_assert_ptr_null(l.offsets);
    nds_buf_dispose(&out);
    EXPECT_ERR(nds_vlen_encode(offsets, data, 4, true, &out), NDS_EINVAL,
               "element 3 is not valid UTF-8");
    nds_buf_dispose(&out);
    const uint64_t backwards[] = {0, 3, 1};
    EXPECT_ERR(nds_vlen_encode(backwards, data, 2, false, &out), NDS_EINVAL, "offsets decrease");
    nds_buf_dispose(&out);
}
END_TEST

START_TEST(hostile_payloads) {
    nds_vlen_list l;
    static const uint8_t three[] = {1, 0, 0};
    EXPECT_ERR(nds_vlen_decode(three, 3, 1, false, &l), NDS_ECORRUPT, "fewer than the 4");
    static const uint8_t huge_count[] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0};
    EXPECT_ERR(nds_vlen_decode(huge_count, 8, 0xffffffffu, false, &l), NDS_ECORRUPT,
               "4294967295 elements cannot fit in 8 bytes");
    EXPECT_ERR(nds_vlen_decode(huge_count, 8, 1, false, &l), NDS_ECORRUPT,
               "4294967295 elements stored, the chunk has 1");
    static const uint8_t long_item[] = {1, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f, 'a'};
    EXPECT_ERR(nds_vlen_decode(long_item, sizeof long_item, 1, false, &l), NDS_ECORRUPT,
               "element 0: length 2147483647 runs past the end (1 bytes left)");
    static const uint8_t cut_header[] = {2, 0, 0, 0, 4, 0, 0, 0, 1, 2, 3, 4, 1, 0};
    EXPECT_ERR(nds_vlen_decode(cut_header, sizeof cut_header, 2, false, &l), NDS_ECORRUPT,
               "element 1: its length header is past the end");
    static const uint8_t trailing[] = {1, 0, 0, 0, 1, 0, 0, 0, 'a', 'b'};
    EXPECT_ERR(nds_vlen_decode(trailing, sizeof trailing, 1, false, &l), NDS_ECORRUPT,
               "1 bytes after the last of 1 elements");
    static const uint8_t overlong[] = {1, 0, 0, 0, 2, 0, 0, 0, 0xc0, 0x80};
    EXPECT_ERR(nds_vlen_decode(overlong, sizeof overlong, 1, true, &l), NDS_ECORRUPT,
               "not valid UTF-8");
    static const uint8_t surrogate[] = {1, 0, 0, 0, 3, 0, 0, 0, 0xed, 0xa0, 0x80};
    EXPECT_ERR(nds_vlen_decode(surrogate, sizeof surrogate, 1, true, &l), NDS_ECORRUPT,
               "not valid UTF-8");
}
END_TEST

int main(void) {
    Suite *s = suite_create("vlen_codec");
    TCase *tc = tcase_create("vlen_codec");
    tcase_add_test(tc, golden_vectors);
    tcase_add_test(tc, bytes_round_trip);
    tcase_add_test(tc, hostile_payloads);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
