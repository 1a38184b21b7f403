/* Writes staged by reference (nds_array_write_ref) and chunks written whole up to the array's edge:
 * no copy and no memory counted for whole contiguous chunks, copies where a chunk is not, a later
 * copying write into a referenced chunk leaving the caller's buffer alone, prepare and commit
 * writing from the caller's buffer, and an edge chunk written whole (inside the array) committed
 * without reading the stored chunk. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support_check.h"

/* An uncompressed uint16 zarr v2 array of shape rows x 8 in chunks of crows x ccols. */
static nds_array *make(const char *kvstore, uint64_t rows, uint64_t crows, uint64_t ccols,
                       nds_txn *txn) {
    char spec[2048];
    snprintf(spec, sizeof spec,
             "{\"driver\":\"zarr\",\"kvstore\":\"%s\",\"create\":true,\"open\":true,"
             "\"schema\":{\"dtype\":\"uint16\",\"domain\":{\"shape\":[%llu,8]},\"fill_value\":3,"
             "\"chunk_layout\":{\"chunk\":{\"shape\":[%llu,%llu]}},\"codec\":\"none\"}}",
             kvstore, (unsigned long long)rows, (unsigned long long)crows,
             (unsigned long long)ccols);
    nds_open_options oo = NDS_OPEN_OPTIONS_INIT;
    oo.txn = txn;
    nds_array *a = NULL;
    NDS_OK(nds_array_open(&a, spec, &oo));
    return a;
}

static nds_txn *begin(nds_txn_mode mode) {
    nds_txn_options o = NDS_TXN_OPTIONS_INIT;
    o.mode = mode;
    nds_txn *t;
    NDS_OK(nds_txn_begin(&t, &o));
    return t;
}

static nds_box rows_box(uint64_t from, uint64_t to) {
    return (nds_box){2, {from, 0}, {to, 8}, {1, 1}, 0};
}

static int write_in(nds_array *a, nds_box b, const uint16_t *buf, nds_txn *t, bool by_ref) {
    nds_io_options o = NDS_IO_OPTIONS_INIT;
    o.txn = t;
    return by_ref ? nds_array_write_ref(a, &b, buf, &o) : nds_array_write(a, &b, buf, &o);
}

/* Every element of rows [from, to) equals want(i) for its index i in the box. */
static void check_rows(nds_array *a, uint64_t from, uint64_t to, nds_txn *t,
                       uint16_t (*want)(size_t)) {
    size_t n = (size_t)(to - from) * 8;
    uint16_t *got = calloc(n, 2);
    nds_box b = rows_box(from, to);
    nds_io_options o = NDS_IO_OPTIONS_INIT;
    o.txn = t;
    NDS_OK(nds_array_read(a, &b, got, &o));
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == want(i), "element %zu: %u, want %u", i, got[i], want(i));
    free(got);
}

static uint16_t counting(size_t i) { return (uint16_t)(100 + i); }

static uint16_t *counted(size_t n) {
    uint16_t *buf = malloc(n * 2);
    for (size_t i = 0; i < n; i++) buf[i] = counting(i);
    return buf;
}

START_TEST(whole_contiguous_chunks_are_referenced) {
    nds_txn *t = begin(NDS_TXN_ISOLATED);
    nds_array *a = make("memory://ref1/", 8, 2, 8, NULL);
    uint16_t *buf = counted(32);
    NDS_OK(write_in(a, rows_box(0, 4), buf, t, true));
    ck_assert_uint_eq(nds_txn_memory(t), 0); /* two chunks of whole rows: referenced */
    check_rows(a, 0, 4, t, counting);        /* read your writes */
    NDS_OK(nds_txn_commit(t));
    check_rows(a, 0, 4, NULL, counting);
    nds_txn_free(t);
    nds_array_free(a);
    free(buf);
}
END_TEST

START_TEST(chunks_not_contiguous_are_copied) {
    nds_txn *t = begin(NDS_TXN_ISOLATED);
    nds_array *a = make("memory://ref2/", 8, 4, 4, NULL); /* a chunk's rows are cut by the box */
    uint16_t *buf = counted(32);
    NDS_OK(write_in(a, rows_box(0, 4), buf, t, true));
    ck_assert_uint_gt(nds_txn_memory(t), 0);
    memset(buf, 0, 64); /* copied: the caller may change its buffer */
    NDS_OK(nds_txn_commit(t));
    check_rows(a, 0, 4, NULL, counting);
    nds_txn_free(t);
    nds_array_free(a);
    free(buf);
}
END_TEST

static uint16_t five_with_nines(size_t i) { return i >= 11 && i < 13 ? 9 : 5; }

START_TEST(a_copying_write_into_a_referenced_chunk_leaves_the_buffer_alone) {
    nds_txn *t = begin(NDS_TXN_ATOMIC);
    nds_array *a = make("memory://ref3/", 8, 2, 8, NULL);
    uint16_t fives[16], nines[2] = {9, 9};
    for (int i = 0; i < 16; i++) fives[i] = 5;
    NDS_OK(write_in(a, rows_box(0, 2), fives, t, true));
    nds_box b = {2, {1, 3}, {2, 5}, {1, 1}, 0};
    nds_io_options o = NDS_IO_OPTIONS_INIT;
    o.txn = t;
    NDS_OK(nds_array_write(a, &b, nines, &o)); /* into the referenced chunk: now a copy */
    ck_assert_uint_gt(nds_txn_memory(t), 0);
    for (int i = 0; i < 16; i++) ck_assert_uint_eq(fives[i], 5);
    check_rows(a, 0, 2, t, five_with_nines);
    NDS_OK(nds_txn_commit(t));
    check_rows(a, 0, 2, NULL, five_with_nines);
    nds_txn_free(t);
    nds_array_free(a);
}
END_TEST

static uint16_t sevens(size_t i) { return (void)i, 7; }

START_TEST(a_reference_replaces_a_staged_copy) {
    nds_txn *t = begin(NDS_TXN_ISOLATED);
    nds_array *a = make("memory://ref4/", 8, 2, 8, NULL);
    uint16_t one = 1, seven[16];
    for (int i = 0; i < 16; i++) seven[i] = 7;
    nds_box b = {2, {0, 0}, {1, 1}, {1, 1}, 0};
    nds_io_options o = NDS_IO_OPTIONS_INIT;
    o.txn = t;
    NDS_OK(nds_array_write(a, &b, &one, &o));
    ck_assert_uint_gt(nds_txn_memory(t), 0);
    NDS_OK(write_in(a, rows_box(0, 2), seven, t, true));
    ck_assert_uint_eq(nds_txn_memory(t), 0); /* the copy is dropped */
    NDS_OK(nds_txn_commit(t));
    check_rows(a, 0, 2, NULL, sevens);
    nds_txn_free(t);
    nds_array_free(a);
}
END_TEST

START_TEST(outside_a_transaction_is_refused) {
    nds_array *a = make("memory://ref5/", 8, 2, 8, NULL);
    uint16_t buf[16] = {0};
    ck_assert_int_eq(write_in(a, rows_box(0, 2), buf, NULL, true), NDS_EINVAL);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "only inside a transaction"));
    nds_array_free(a);
}
END_TEST

/* Prepared on a versioned store, the buffer freed, then committed: prepare wrote the data. */
START_TEST(prepare_writes_from_the_buffer) {
    nds_txn *t = begin(NDS_TXN_ATOMIC);
    nds_array *a = make("memory://ref6/|versioned:w/", 6, 2, 8, t);
    uint16_t *buf = counted(48);
    NDS_OK(write_in(a, rows_box(0, 6), buf, t, true));
    char *token = NULL;
    NDS_OK(nds_txn_prepare(t, &token));
    free(buf); /* ASan: nothing reads it after the prepare */
    nds_array_free(a);
    nds_txn_free(t);
    nds_kvstore *kv;
    NDS_OK(nds_kvstore_open(&kv, "memory://ref6/|versioned:", NULL));
    NDS_OK(nds_txn_commit_prepared(kv, (const char *const[]){token}, 1, NULL, NULL));
    nds_free(token);
    nds_kvstore_free(kv);
    nds_array *b = make("memory://ref6/|versioned:w/", 6, 2, 8, NULL);
    check_rows(b, 0, 6, NULL, counting);
    nds_array_free(b);
}
END_TEST

/* An array of 6 rows in chunks of 4: chunk 1 holds rows 4 and 5 and two rows of padding. Writing
 * rows 4-5 writes it whole: committed without reading what is stored (here garbage), its padding
 * stored as the fill value. */
static void edge_chunk_written_whole(const char *store, bool prepared) {
    char url[256];
    snprintf(url, sizeof url, "%s%s", store, prepared ? "|versioned:e/" : "e/");
    nds_array *a = make(url, 6, 4, 8, NULL);
    nds_kvstore *kv;
    NDS_OK(nds_kvstore_open(&kv, url, NULL));
    NDS_OK(nds_kvstore_write(kv, "1.0", "garbage", 7, NULL, NULL));
    nds_txn *t = begin(NDS_TXN_ATOMIC);
    uint16_t *buf = counted(16);
    NDS_OK(write_in(a, rows_box(4, 6), buf, t, false));
    if (prepared) {
        char *token = NULL;
        NDS_OK(nds_txn_prepare(t, &token));
        nds_kvstore *root;
        NDS_OK(nds_kvstore_open(&root, store, NULL));
        char base[256];
        snprintf(base, sizeof base, "%s|versioned:", store);
        nds_kvstore *vs;
        NDS_OK(nds_kvstore_open(&vs, base, NULL));
        NDS_OK(nds_txn_commit_prepared(vs, (const char *const[]){token}, 1, NULL, NULL));
        nds_kvstore_free(vs), nds_kvstore_free(root), nds_free(token);
    } else {
        NDS_OK(nds_txn_commit(t));
    }
    check_rows(a, 4, 6, NULL, counting);
    nds_read_result r;
    NDS_OK(nds_kvstore_read(kv, "1.0", NULL, &r));
    ck_assert_uint_eq(r.value.len, 4 * 8 * 2);
    for (size_t i = 16; i < 32; i++) /* the padding rows */
        ck_assert_uint_eq(((const uint16_t *)r.value.data)[i], 3);
    nds_read_result_dispose(&r);
    nds_txn_free(t);
    nds_kvstore_free(kv);
    nds_array_free(a);
    free(buf);
}

START_TEST(edge_chunk_written_whole_atomic) { edge_chunk_written_whole("memory://edge1/", false); }
END_TEST

START_TEST(edge_chunk_written_whole_prepared) {
    edge_chunk_written_whole("memory://edge2/", true);
}
END_TEST

int main(void) {
    Suite *s = suite_create("txn_ref");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, whole_contiguous_chunks_are_referenced);
    tcase_add_test(tc, chunks_not_contiguous_are_copied);
    tcase_add_test(tc, a_copying_write_into_a_referenced_chunk_leaves_the_buffer_alone);
    tcase_add_test(tc, a_reference_replaces_a_staged_copy);
    tcase_add_test(tc, outside_a_transaction_is_refused);
    tcase_add_test(tc, prepare_writes_from_the_buffer);
    tcase_add_test(tc, edge_chunk_written_whole_atomic);
    tcase_add_test(tc, edge_chunk_written_whole_prepared);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
