/* Strided copies: against a naive element-by-element reference, over random shapes and strides. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "support_check.h"
#include "internal/strided.h"

/* Reference: element by element through an index vector. */
static void naive_copy(size_t rank, const uint64_t *ext, size_t elem, uint8_t *dst, const int64_t *ds,
                       const uint8_t *src, const int64_t *ss) {
    uint64_t idx[NDS_MAX_RANK] = {0}, total = 1;
    for (size_t d = 0; d < rank; d++) total *= ext[d];
    for (uint64_t n = 0; n < total; n++) {
        int64_t a = 0, b = 0;
        for (size_t d = 0; d < rank; d++) a += (int64_t)idx[d] * ds[d], b += (int64_t)idx[d] * ss[d];
        memcpy(dst + a, src + b, elem);
        for (size_t d = rank; d-- > 0;)
            if (++idx[d] < ext[d]) break;
            else idx[d] = 0;
    }
}

START_TEST(random_layouts_match_reference) {
    srand(42);
    for (int iter = 0; iter < 300; iter++) {
        size_t rank = 1 + (size_t)rand() % 4, elem = (size_t[]){1, 2, 4, 8, 16}[rand() % 5];
        uint64_t ext[4], full[4];
        int64_t ss[4], ds[4], step[4];
        for (size_t d = 0; d < rank; d++) {
            ext[d] = 1 + (uint64_t)rand() % 6;
            step[d] = 1 + rand() % 3;
            full[d] = ext[d] * (uint64_t)step[d] + (uint64_t)(rand() % 3);
        }
        nds_c_strides(rank, full, elem, ss);
        for (size_t d = 0; d < rank; d++) ss[d] *= step[d];
        if (iter % 2) nds_f_strides(rank, ext, elem, ds);
        else nds_c_strides(rank, ext, elem, ds);
        size_t src_bytes = elem, dst_bytes = elem;
        for (size_t d = 0; d < rank; d++) src_bytes *= full[d], dst_bytes *= ext[d];
        uint8_t *src = malloc(src_bytes), *a = calloc(1, dst_bytes), *b = calloc(1, dst_bytes);
        for (size_t i = 0; i < src_bytes; i++) src[i] = (uint8_t)rand();
        nds_strided_copy(rank, ext, elem, a, ds, src, ss);
        naive_copy(rank, ext, elem, b, ds, src, ss);
        ck_assert_mem_eq(a, b, dst_bytes);
        memset(a, 0, dst_bytes);
        nds_strided_copy_streaming(rank, ext, elem, a, ds, src, ss);
        ck_assert_mem_eq(a, b, dst_bytes);
        free(src), free(a), free(b);
    }
}
END_TEST

/* Sub-blocks whose rows are contiguous but not mergeable, of every row length from 1 to 600 bytes:
 * covers the short-row path (32-byte steps with an overlapping tail) and the memcpy path; the
 * streaming copy at every offset from a cache line (partial first and last lines, whole lines
 * between), with the bytes around each row left untouched. */
START_TEST(rows_of_every_length) {
    srand(7);
    for (uint64_t row = 1; row <= 600; row++) {
        size_t shift = (size_t)row % 64;
        uint64_t ext[3] = {3, 4, row}, full[3] = {5, 6, row + 1 + (uint64_t)(rand() % 40)};
        int64_t ss[3], ds[3];
        nds_c_strides(3, full, 1, ss);
        nds_c_strides(3, full, 1, ds);
        size_t bytes = (size_t)(full[0] * full[1] * full[2]);
        uint8_t *src = malloc(bytes), *a = calloc(1, bytes), *b = calloc(1, bytes);
        for (size_t i = 0; i < bytes; i++) src[i] = (uint8_t)rand();
        nds_strided_copy(3, ext, 1, a + 1, ds, src + 2, ss);
        naive_copy(3, ext, 1, b + 1, ds, src + 2, ss);
        ck_assert_mem_eq(a, b, bytes);
        size_t cap = (bytes + 127) / 64 * 64;
        uint8_t *c = aligned_alloc(64, cap), *d = aligned_alloc(64, cap);
        memset(c, 0, cap);
        memset(d, 0, cap);
        nds_strided_copy_streaming(3, ext, 1, c + shift, ds, src + 2, ss);
        naive_copy(3, ext, 1, d + shift, ds, src + 2, ss);
        ck_assert_msg(memcmp(c, d, cap) == 0, "streamed rows of %llu bytes at offset %zu",
                      (unsigned long long)row, shift);
        free(c), free(d);
        free(src), free(a), free(b);
    }
}
END_TEST

/* Pieces side by side in an output row (the chunks of a run along the last dimension): every
 * piece lands where a copy of each alone would put it, for 0 to 3 outer dimensions, 1 to 8 pieces
 * and rows of 1 to 700 bytes; bytes between and around the pieces stay untouched. Streamed too,
 * at every offset from a cache line, with pieces that join up (one streamed row, longer than the
 * 2 KiB it is put together in) and pieces with gaps between them. */
START_TEST(copy_rows_places_every_piece) {
    srand(11);
    for (int iter = 0; iter < 800; iter++) {
        bool stream = iter % 2, joined = iter % 4 < 2;
        size_t shift = (size_t)rand() % 64;
        size_t rank = (size_t)rand() % 4, pieces = 1 + (size_t)rand() % 8;
        uint64_t outer[3], total = 1;
        size_t row[8], at[8], width = shift; /* the first piece's offset from a line */
        for (size_t d = 0; d < rank; d++) total *= outer[d] = 1 + (uint64_t)rand() % 5;
        for (size_t j = 0; j < pieces; j++) {
            row[j] = 1 + (size_t)rand() % (rand() % 4 ? 200 : 700);
            at[j] = width + (joined ? 0 : (size_t)rand() % 3); /* a gap of 0-2 bytes */
            width = at[j] + row[j];
        }
        int64_t ds[3], ss[3];
        uint64_t dfull[4], sfull[4]; /* row-major: outer dimensions, then the row's bytes */
        for (size_t d = 0; d < rank; d++) dfull[d] = sfull[d] = outer[d] + (uint64_t)(rand() % 2);
        dfull[rank] = width + 64;
        sfull[rank] = 708; /* rows of up to 700 bytes, each piece from up to 7 bytes in */
        int64_t dst4[4], src4[4];
        nds_c_strides(rank + 1, dfull, 1, dst4);
        nds_c_strides(rank + 1, sfull, 1, src4);
        memcpy(ds, dst4, rank * sizeof *ds);
        memcpy(ss, src4, rank * sizeof *ss);
        size_t dbytes = (size_t)(dst4[0] * (int64_t)dfull[0]), sbytes = (size_t)(src4[0] * (int64_t)sfull[0]);
        size_t cap = (dbytes + 63) / 64 * 64; /* out on a cache line, so shift is its offset */
        uint8_t *out = aligned_alloc(64, cap), *want = aligned_alloc(64, cap), *dst[8];
        memset(out, 0, cap);
        memset(want, 0, cap);
        const uint8_t *src[8];
        uint8_t *in[8];
        for (size_t j = 0; j < pieces; j++) {
            in[j] = malloc(sbytes);
            for (size_t i = 0; i < sbytes; i++) in[j][i] = (uint8_t)rand();
            src[j] = in[j] + j; /* each piece from its own source, at its own offset */
            dst[j] = out + at[j];
            uint64_t ext[4];
            memcpy(ext, outer, rank * sizeof *ext);
            ext[rank] = row[j];
            naive_copy(rank + 1, ext, 1, want + at[j], dst4, in[j] + j, src4);
        }
        nds_strided_layout rows = {rank, outer, ds, ss};
        nds_strided_copy_rows(&rows, pieces, dst, src, row, stream);
        ck_assert_msg(memcmp(out, want, dbytes) == 0,
                      "iteration %d (rank %zu, %zu pieces, %llu rows, stream %d, offset %zu)", iter,
                      rank, pieces, (unsigned long long)total, stream, shift);
        for (size_t j = 0; j < pieces; j++) free(in[j]);
        free(out), free(want);
    }
}
END_TEST

START_TEST(fill_sets_only_the_block) {
    uint16_t buf[4][5];
    memset(buf, 0, sizeof buf);
    uint64_t ext[2] = {2, 3};
    int64_t stride[2] = {10, 2};
    uint16_t v = 0xabcd;
    nds_strided_fill(2, ext, 2, (uint8_t *)&buf[1][1], stride, (const uint8_t *)&v);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 5; j++) {
            int inside = i >= 1 && i < 3 && j >= 1 && j < 4;
            ck_assert_uint_eq(buf[i][j], inside ? 0xabcd : 0);
        }
}
END_TEST

START_TEST(zero_extent_and_rank_zero) {
    uint8_t a = 1, b = 2;
    uint64_t ext[1] = {0};
    int64_t s[1] = {1};
    nds_strided_copy(1, ext, 1, &a, s, &b, s);
    ck_assert_uint_eq(a, 1);
    nds_strided_copy(0, NULL, 1, &a, NULL, &b, NULL);
    ck_assert_uint_eq(a, 2);
}
END_TEST

int main(void) {
    Suite *s = suite_create("strided");
    TCase *tc = tcase_create("strided");
    tcase_add_test(tc, random_layouts_match_reference);
    tcase_add_test(tc, rows_of_every_length);
    tcase_add_test(tc, copy_rows_places_every_piece);
    tcase_add_test(tc, fill_sets_only_the_block);
    tcase_add_test(tc, zero_extent_and_rank_zero);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
