/* Transactions: staging, read-your-writes, isolation from others until commit, abort, atomic commits across
 * arrays (memory store), refusal on stores without multi-key commit, conflicts, memory limit, poisoning. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support_check.h"

static nds_array *make(const char *url_base, const char *name) {
    char spec[2048];
    snprintf(spec, sizeof spec,
             "{\"driver\":\"zarr\",\"kvstore\":\"%s%s/\",\"create\":true,\"delete_existing\":true,"
             "\"schema\":{\"dtype\":\"uint16\",\"domain\":{\"shape\":[8,8]},"
             "\"chunk_layout\":{\"chunk\":{\"shape\":[4,4]}},\"codec\":\"zstd:1\"}}",
             url_base, name);
    nds_array *a = NULL;
    NDS_OK(nds_array_open(&a, spec, NULL));
    return a;
}

static void write_box(nds_array *a, const char *region, uint16_t value, nds_txn *txn) {
    uint64_t shape[2] = {8, 8};
    nds_box b;
    NDS_OK(nds_box_parse(&b, region, 2, shape));
    uint64_t n = nds_box_count(&b);
    uint16_t *buf = malloc(n * 2);
    for (uint64_t i = 0; i < n; i++) buf[i] = value;
    nds_io_options o = NDS_IO_OPTIONS_INIT;
    o.txn = txn;
    NDS_OK(nds_array_write(a, &b, buf, &o));
    free(buf);
}

static uint16_t at(nds_array *a, uint64_t i, uint64_t j, nds_txn *txn) {
    nds_box b = {2, {i, j}, {i + 1, j + 1}, {1, 1}, 0};
    uint16_t v = 0;
    nds_io_options o = NDS_IO_OPTIONS_INIT;
    o.txn = txn;
    NDS_OK(nds_array_read(a, &b, &v, &o));
    return v;
}

static uint64_t stored_chunks(nds_array *a) {
    nds_array_stats st;
    NDS_OK(nds_array_stats_get(a, &st));
    return st.chunks_stored;
}

START_TEST(isolated_read_your_writes_then_commit) {
    nds_array *a = make("memory://", "t-iso");
    write_box(a, "[0:8, 0:8]", 1, NULL);
    nds_txn *t;
    NDS_OK(nds_txn_begin(&t, NULL));
    write_box(a, "[2:6, 3]", 7, t);
    ck_assert_uint_eq(at(a, 2, 3, t), 7); /* the transaction sees its write */
    ck_assert_uint_eq(at(a, 2, 3, NULL), 1); /* nobody else does */
    ck_assert_uint_eq(at(a, 1, 3, t), 1); /* unstaged elements read through */
    ck_assert_uint_gt(nds_txn_memory(t), 0);
    NDS_OK(nds_txn_commit(t));
    ck_assert_uint_eq(at(a, 5, 3, NULL), 7);
    ck_assert_uint_eq(at(a, 5, 4, NULL), 1);
    ck_assert_int_eq(nds_txn_commit(t), NDS_EPOISONED); /* done: only free */
    nds_txn_free(t);
    nds_array_free(a);
}
END_TEST

START_TEST(abort_discards) {
    nds_array *a = make("memory://", "t-abort");
    nds_txn *t;
    NDS_OK(nds_txn_begin(&t, NULL));
    write_box(a, "[0:8, 0:8]", 9, t);
    nds_txn_abort(t);
    ck_assert_uint_eq(stored_chunks(a), 0);
    ck_assert_uint_eq(nds_txn_memory(t), 0);
    nds_txn_free(t);
    nds_array_free(a);
}
END_TEST

START_TEST(atomic_across_arrays_and_marker) {
    nds_array *a = make("memory://", "ckpt/a"), *b = make("memory://", "ckpt/b");
    nds_kvstore *root;
    NDS_OK(nds_kvstore_open(&root, "memory://ckpt/", NULL));
    nds_txn_options o = NDS_TXN_OPTIONS_INIT;
    o.mode = NDS_TXN_ATOMIC;
    nds_txn *t;
    NDS_OK(nds_txn_begin(&t, &o));
    write_box(a, "[0:8, 0:5]", 3, t);
    write_box(b, "[1:3, :]", 4, t);
    NDS_OK(nds_txn_write_key(t, root, "COMMITTED", "step 1", 6));
    ck_assert_uint_eq(stored_chunks(a) + stored_chunks(b), 0);
    NDS_OK(nds_txn_commit(t));
    ck_assert_uint_eq(stored_chunks(a), 4);
    ck_assert_uint_eq(stored_chunks(b), 2);
    ck_assert_uint_eq(at(a, 7, 4, NULL), 3);
    ck_assert_uint_eq(at(b, 2, 7, NULL), 4);
    nds_read_result r;
    NDS_OK(nds_kvstore_read(root, "COMMITTED", NULL, &r));
    ck_assert_int_eq(r.state, NDS_READ_VALUE);
    nds_read_result_dispose(&r);
    nds_txn_free(t);
    nds_kvstore_free(root);
    nds_array_free(a);
    nds_array_free(b);
}
END_TEST

START_TEST(atomic_refused_on_file_before_writing) {
    char *dir = nds_test_tmpdir(), base[600];
    snprintf(base, sizeof base, "file://%s/", dir);
    nds_array *a = make(base, "f");
    nds_txn_options o = NDS_TXN_OPTIONS_INIT;
    o.mode = NDS_TXN_ATOMIC;
    nds_txn *t;
    NDS_OK(nds_txn_begin(&t, &o));
    write_box(a, "[0:8, 0:8]", 5, t);
    ck_assert_int_eq(nds_txn_commit(t), NDS_EUNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "multi-key commit"));
    ck_assert_uint_eq(stored_chunks(a), 0);
    nds_txn_free(t);
    nds_array_free(a);
    nds_test_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(atomic_refused_across_stores) {
    char *dir = nds_test_tmpdir(), base[600];
    snprintf(base, sizeof base, "file://%s/", dir);
    nds_array *a = make("memory://", "mixed"), *f = make(base, "g");
    nds_txn_options o = NDS_TXN_OPTIONS_INIT;
    o.mode = NDS_TXN_ATOMIC;
    nds_txn *t;
    NDS_OK(nds_txn_begin(&t, &o));
    write_box(a, "[0, 0]", 5, t);
    write_box(f, "[0, 0]", 5, t);
    ck_assert_int_eq(nds_txn_commit(t), NDS_EUNSUPPORTED);
    ck_assert_uint_eq(stored_chunks(a) + stored_chunks(f), 0);
    nds_txn_free(t);
    nds_array_free(a);
    nds_array_free(f);
    nds_test_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(commit_merges_concurrent_changes) {
    /* Another writer changes other elements of the staged chunks between staging and commit: both modes
     * re-read and merge, so neither update is lost. */
    for (int mode = NDS_TXN_ISOLATED; mode <= NDS_TXN_ATOMIC; mode++) {
        nds_array *a = make("memory://", mode == NDS_TXN_ATOMIC ? "merge-a" : "merge-i");
        nds_txn_options o = NDS_TXN_OPTIONS_INIT;
        o.mode = (nds_txn_mode)mode;
        nds_txn *t;
        NDS_OK(nds_txn_begin(&t, &o));
        write_box(a, "[0:8, 0:4]", 11, t);
        write_box(a, "[0:8, 4:8]", 22, NULL);
        NDS_OK(nds_txn_commit(t));
        ck_assert_uint_eq(at(a, 6, 1, NULL), 11);
        ck_assert_uint_eq(at(a, 6, 6, NULL), 22);
        nds_txn_free(t);
        nds_array_free(a);
    }
}
END_TEST

START_TEST(memory_limit_poisons) {
    nds_array *a = make("memory://", "limit");
    nds_txn_options o = NDS_TXN_OPTIONS_INIT;
    o.memory_limit = 100; /* less than one staged chunk (4x4x2 + mask) */
    nds_txn *t;
    NDS_OK(nds_txn_begin(&t, &o));
    uint64_t shape[2] = {8, 8};
    nds_box b;
    NDS_OK(nds_box_parse(&b, "[0:8, 0:8]", 2, shape));
    uint16_t buf[64] = {0};
    nds_io_options io = NDS_IO_OPTIONS_INIT;
    io.txn = t;
    ck_assert_int_eq(nds_array_write(a, &b, buf, &io), NDS_ELIMIT);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "memory limit"));
    ck_assert_int_eq(nds_array_write(a, &b, buf, &io), NDS_EPOISONED);
    ck_assert_int_eq(nds_txn_commit(t), NDS_EPOISONED);
    nds_txn_abort(t);
    nds_txn_free(t);
    ck_assert_uint_eq(stored_chunks(a), 0);
    nds_array_free(a);
}
END_TEST

typedef struct racer {
    nds_array *a;
    int id;
    nds_txn_mode mode;
} racer;

/* Each racer owns column id of every chunk and commits one transaction per round. */
static void *race(void *p) {
    racer *r = p;
    for (int round = 0; round < 25; round++) {
        nds_txn_options o = NDS_TXN_OPTIONS_INIT;
        o.mode = r->mode;
        nds_txn *t;
        if (nds_txn_begin(&t, &o)) return (void *)1;
        char region[32];
        snprintf(region, sizeof region, "[:, %d::4]", r->id);
        write_box(r->a, region, (uint16_t)(r->id * 100 + round), t);
        int rc = nds_txn_commit(t);
        nds_txn_free(t);
        if (rc) return (void *)2;
    }
    return NULL;
}

START_TEST(concurrent_transactions_lose_nothing) {
    for (int mode = NDS_TXN_ISOLATED; mode <= NDS_TXN_ATOMIC; mode++) {
        nds_array *a = make("memory://", mode == NDS_TXN_ATOMIC ? "race-a" : "race-i");
        nds_array *b = NULL; /* a second handle: separate in-process lock tables */
        NDS_OK(nds_array_open(&b, mode == NDS_TXN_ATOMIC ? "memory://race-a/" : "memory://race-i/", NULL));
        pthread_t th[4];
        racer r[4];
        for (int i = 0; i < 4; i++) {
            r[i] = (racer){i % 2 ? a : b, i, (nds_txn_mode)mode};
            pthread_create(&th[i], NULL, race, &r[i]);
        }
        for (int i = 0; i < 4; i++) {
            void *res;
            pthread_join(th[i], &res);
            ck_assert_ptr_null(res);
        }
        for (uint64_t i = 0; i < 8; i++)
            for (uint64_t j = 0; j < 8; j++) ck_assert_uint_eq(at(a, i, j, NULL), (j % 4) * 100 + 24);
        nds_array_free(a);
        nds_array_free(b);
    }
}
END_TEST

/* Opens (creating) a zarr array inside txn. */
static nds_array *make_in(nds_txn *txn, const char *url_base, const char *name, int rows) {
    char spec[2048];
    snprintf(spec, sizeof spec,
             "{\"driver\":\"zarr\",\"kvstore\":\"%s%s/\",\"create\":true,"
             "\"schema\":{\"dtype\":\"uint16\",\"domain\":{\"shape\":[%d,8]},"
             "\"chunk_layout\":{\"chunk\":{\"shape\":[4,4]}},\"codec\":\"zstd:1\"}}",
             url_base, name, rows);
    nds_open_options o = NDS_OPEN_OPTIONS_INIT;
    o.txn = txn;
    nds_array *a = NULL;
    NDS_OK(nds_array_open(&a, spec, &o));
    return a;
}

static int open_rc(const char *url) {
    nds_array *a = NULL;
    int rc = nds_array_open(&a, url, NULL);
    nds_array_free(a);
    return rc;
}

/* A whole checkpoint in one atomic transaction: two arrays created, written, and a marker; nothing is
 * visible before commit, everything after. */
static void atomic_checkpoint(const char *base, const char *tag) {
    char a_url[600], b_url[600], root[600];
    snprintf(a_url, sizeof a_url, "%s%s-a/", base, tag);
    snprintf(b_url, sizeof b_url, "%s%s-b/", base, tag);
    snprintf(root, sizeof root, "%s", base);
    nds_txn_options o = NDS_TXN_OPTIONS_INIT;
    o.mode = NDS_TXN_ATOMIC;
    nds_txn *t;
    NDS_OK(nds_txn_begin(&t, &o));
    char name[64];
    snprintf(name, sizeof name, "%s-a", tag);
    nds_array *a = make_in(t, base, name, 8);
    snprintf(name, sizeof name, "%s-b", tag);
    nds_array *b = make_in(t, base, name, 8);
    write_box(a, "[0:8, 0:8]", 5, NULL); /* staged: the array was opened in t */
    write_box(b, "[2:3, :]", 6, NULL);
    NDS_OK(nds_array_set_attributes(a, "{\"step\": 7}"));
    nds_kvstore *kv;
    NDS_OK(nds_kvstore_open(&kv, root, NULL));
    snprintf(name, sizeof name, "%s.done", tag);
    NDS_OK(nds_txn_write_key(t, kv, name, "1", 1));
    ck_assert_uint_eq(at(a, 3, 3, NULL), 5); /* visible inside */
    ck_assert_int_eq(open_rc(a_url), NDS_ENOTFOUND); /* invisible outside */
    ck_assert_int_eq(open_rc(b_url), NDS_ENOTFOUND);
    NDS_OK(nds_txn_commit(t));
    nds_array *a2 = NULL, *b2 = NULL;
    NDS_OK(nds_array_open(&a2, a_url, NULL));
    NDS_OK(nds_array_open(&b2, b_url, NULL));
    ck_assert_uint_eq(at(a2, 7, 7, NULL), 5);
    ck_assert_uint_eq(at(b2, 2, 5, NULL), 6);
    ck_assert_uint_eq(at(b2, 3, 5, NULL), 0);
    char *attrs;
    NDS_OK(nds_array_get_attributes(a2, &attrs));
    ck_assert_str_eq(attrs, "{\"step\":7}");
    nds_free(attrs);
    nds_read_result r;
    NDS_OK(nds_kvstore_read(kv, name, NULL, &r));
    ck_assert_int_eq(r.state, NDS_READ_VALUE);
    nds_read_result_dispose(&r);
    nds_array_free(a), nds_array_free(b), nds_array_free(a2), nds_array_free(b2);
    nds_kvstore_free(kv);
    nds_txn_free(t);
}

START_TEST(atomic_checkpoint_creates_arrays_memory) { atomic_checkpoint("memory://", "ck-mem"); }
END_TEST

START_TEST(atomic_checkpoint_creates_arrays_lmdb) {
    char *dir = nds_test_tmpdir(), base[700];
    snprintf(base, sizeof base, "lmdb://%s/c.lmdb/", dir);
    atomic_checkpoint(base, "ck");
    nds_test_rmtree(dir);
    free(dir);
}
END_TEST

START_TEST(abort_discards_created_arrays) {
    nds_txn *t;
    NDS_OK(nds_txn_begin(&t, NULL));
    nds_array *a = make_in(t, "memory://", "aborted", 8);
    write_box(a, "[0:8, 0:8]", 5, NULL);
    nds_array_free(a);
    nds_txn_abort(t);
    nds_txn_free(t);
    ck_assert_int_eq(open_rc("memory://aborted/"), NDS_ENOTFOUND);
}
END_TEST

START_TEST(metadata_conflict_fails_whole_commit) {
    nds_txn_options o = NDS_TXN_OPTIONS_INIT;
    o.mode = NDS_TXN_ATOMIC;
    nds_txn *t;
    NDS_OK(nds_txn_begin(&t, &o));
    nds_array *a = make_in(t, "memory://", "raced", 12);
    write_box(a, "[0:8, 0:8]", 5, NULL);
    nds_array *other = make("memory://", "raced"); /* someone else creates another one first */
    ck_assert_int_eq(nds_txn_commit(t), NDS_ECONFLICT);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, ".zarray"));
    ck_assert_uint_eq(stored_chunks(other), 0); /* none of the transaction's chunks landed */
    nds_array_free(a);
    nds_array_free(other);
    nds_txn_free(t);
}
END_TEST

/* Several processes creating the same array (the checkpoint recipe) do not conflict: the one whose
 * metadata landed second finds exactly its own bytes there, leaves them, and commits its chunks. */
START_TEST(identical_create_is_not_a_conflict) {
    for (int mode = 0; mode < 2; mode++) {
        nds_txn_options o = NDS_TXN_OPTIONS_INIT;
        o.mode = mode ? NDS_TXN_ATOMIC : NDS_TXN_ISOLATED;
        nds_txn *t;
        NDS_OK(nds_txn_begin(&t, &o));
        const char *name = mode ? "twice-atomic" : "twice-isolated";
        nds_array *a = make_in(t, "memory://", name, 8);
        write_box(a, "[0:2, 0:8]", 5, t);
        nds_array *other = make("memory://", name); /* the same array, created first */
        write_box(other, "[4:8, 0:8]", 7, NULL);
        NDS_OK(nds_txn_commit(t));
        ck_assert_uint_eq(at(other, 1, 3, NULL), 5); /* the transaction's rows landed */
        ck_assert_uint_eq(at(other, 5, 3, NULL), 7); /* and the other's stayed */
        nds_array_free(a);
        nds_array_free(other);
        nds_txn_free(t);
    }
}
END_TEST

START_TEST(isolated_commit_creates_and_resizes) {
    nds_txn *t;
    NDS_OK(nds_txn_begin(&t, NULL));
    nds_array *a = make_in(t, "memory://", "iso-create", 8);
    write_box(a, "[0:8, 0:8]", 9, NULL);
    uint64_t bigger[2] = {12, 8};
    NDS_OK(nds_array_resize(a, bigger));
    ck_assert_int_eq(open_rc("memory://iso-create/"), NDS_ENOTFOUND);
    NDS_OK(nds_txn_commit(t));
    nds_array *b = NULL;
    NDS_OK(nds_array_open(&b, "memory://iso-create/", NULL));
    uint64_t shape[2];
    nds_array_shape(b, shape);
    ck_assert_uint_eq(shape[0], 12);
    ck_assert_uint_eq(at(b, 7, 7, NULL), 9);
    nds_array_free(a);
    nds_array_free(b);
    nds_txn_free(t);
}
END_TEST

int main(void) {
    Suite *s = suite_create("txn");
    TCase *tc = tcase_create("txn");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, isolated_read_your_writes_then_commit);
    tcase_add_test(tc, abort_discards);
    tcase_add_test(tc, atomic_across_arrays_and_marker);
    tcase_add_test(tc, atomic_refused_on_file_before_writing);
    tcase_add_test(tc, atomic_refused_across_stores);
    tcase_add_test(tc, commit_merges_concurrent_changes);
    tcase_add_test(tc, memory_limit_poisons);
    tcase_add_test(tc, concurrent_transactions_lose_nothing);
    tcase_add_test(tc, atomic_checkpoint_creates_arrays_memory);
    tcase_add_test(tc, atomic_checkpoint_creates_arrays_lmdb);
    tcase_add_test(tc, abort_discards_created_arrays);
    tcase_add_test(tc, metadata_conflict_fails_whole_commit);
    tcase_add_test(tc, identical_create_is_not_a_conflict);
    tcase_add_test(tc, isolated_commit_creates_and_resizes);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
