/* How the versioned store writes (the fast path for checkpoint saves): values written in pieces
 * (the kv driver's write_iov, writev on file://, gathered for drivers without it), data objects
 * written from the callers' buffers byte for byte as the buffer-built object was, split at
 * VS_DATA_OBJECT_MAX, and prepared parts whose chunks are encoded in parallel (whole and partial
 * chunks of several arrays, committed and read back). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <json-c/json.h>

#include "support_check.h"
#include "support_kv_conformance.h"
#include "../../drivers/versioned_store.h"
#include "internal/kvstore_internal.h"
#include "internal/util.h"

static char *g_dir;

static void remove_dir(void) {
    if (g_dir) nds_test_rmtree(g_dir);
    free(g_dir);
}

/* A fresh file:// base URL under one temp dir (removed at exit). */
static const char *file_base(void) {
    static int n;
    static char url[2][1024];
    if (!g_dir) {
        g_dir = nds_test_tmpdir();
        atexit(remove_dir);
    }
    char *u = url[n % 2];
    snprintf(u, 1024, "file://%s/b%d/", g_dir, n++);
    return u;
}

static void fill_pattern(uint8_t *p, size_t n, unsigned seed) {
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (uint8_t)(x >> 16);
    }
}

/* 200 pieces (some empty, more than one writev's 64) written as one value, on kv. */
static void check_pieces(nds_kvstore *kv) {
    enum { PIECES = 200 };
    struct iovec iov[PIECES];
    uint8_t *whole = malloc(PIECES * 300), *at = whole;
    for (size_t i = 0; i < PIECES; i++) {
        size_t len = i % 7 == 3 ? 0 : (i * 37) % 300;
        fill_pattern(at, len, (unsigned)i);
        iov[i] = (struct iovec){at, len};
        at += len;
    }
    size_t total = (size_t)(at - whole);
    nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
    wo.if_equal.kind = NDS_GEN_ABSENT;
    nds_generation gen = {NDS_GEN_NONE, {0}};
    NDS_OK(nds_kvstore_write_iov(kv, "dir/value", iov, PIECES, &wo, &gen));
    ck_assert_int_eq(gen.kind, NDS_GEN_VALUE);
    nds_read_result r;
    NDS_OK(nds_kvstore_read(kv, "dir/value", NULL, &r));
    ck_assert_int_eq(r.state, NDS_READ_VALUE);
    ck_assert_uint_eq(r.value.len, total);
    ck_assert(memcmp(r.value.data, whole, total) == 0);
    ck_assert(nds_generation_equal(&r.generation, &gen));
    nds_read_result_dispose(&r);
    /* create-only again: refused, the value unchanged */
    struct iovec other = {(void *)"x", 1};
    ck_assert_int_eq(nds_kvstore_write_iov(kv, "dir/value", &other, 1, &wo, NULL), NDS_ECONFLICT);
    NDS_OK(nds_kvstore_read(kv, "dir/value", NULL, &r));
    ck_assert_uint_eq(r.value.len, total);
    nds_read_result_dispose(&r);
    free(whole);
}

START_TEST(write_iov_in_pieces) {
    nds_kvstore *file = nds_kv_test_open("%s", file_base());
    check_pieces(file); /* the file driver's write_iov (writev) */
    nds_kvstore_free(file);
    char mem[128];
    snprintf(mem, sizeof mem, "memory://vwrite-%d/", (int)getpid());
    nds_kvstore *memory = nds_kv_test_open("%s", mem);
    check_pieces(memory); /* no write_iov: gathered, then write */
    nds_kvstore_free(memory);
}
END_TEST

/* The data object the writer stores is the one vs_data_begin + vs_value_append + vs_data_finish
 * build (the format did not change), and every value reads back through its ref. */
START_TEST(data_object_bytes_as_built) {
    const char *url = file_base();
    nds_kvstore *base = nds_kv_test_open("%s", url);
    vs_store *s;
    NDS_OK(vs_store_open(&s, base, url));
    /* one block, exactly one block, a block and 3 bytes (a table), 3 blocks, tiny, empty */
    const size_t lens[] = {700, (size_t)VS_BLOCK_SIZE, (size_t)VS_BLOCK_SIZE + 3,
                           3 * (size_t)VS_BLOCK_SIZE, 5, 0};
    enum { N = sizeof lens / sizeof *lens };
    uint8_t *values[N];
    const uint8_t *data[N];
    for (size_t i = 0; i < N; i++) {
        values[i] = malloc(lens[i] + 1);
        fill_pattern(values[i], lens[i], (unsigned)(i + 10));
        data[i] = values[i];
    }
    vs_ref refs[N];
    vs_object_count *objects = NULL;
    size_t nobjects = 0;
    NDS_OK(vs_store_write_values(s, data, lens, N, refs, &objects, &nobjects));
    ck_assert_uint_eq(nobjects, 1);
    ck_assert_uint_eq(objects[0].items, N);

    nds_buf expect = {0};
    NDS_OK(vs_data_begin(&expect));
    for (size_t i = 0; i < N; i++) {
        ck_assert_uint_eq(refs[i].offset, expect.len);
        ck_assert_uint_eq(refs[i].length, lens[i]);
        uint32_t crc;
        NDS_OK(vs_value_append(&expect, data[i], lens[i], &crc));
        ck_assert_uint_eq(refs[i].crc, crc);
        ck_assert(memcmp(&refs[i].object, &objects[0].object, VS_ID_SIZE) == 0);
    }
    vs_data_finish(&expect);
    char key[VS_OBJECT_KEY_MAX];
    vs_object_key(VS_DATA_PREFIX, &objects[0].object, key);
    nds_read_result r;
    NDS_OK(nds_kvstore_read(base, key, NULL, &r));
    ck_assert_int_eq(r.state, NDS_READ_VALUE);
    ck_assert_uint_eq(r.value.len, expect.len);
    ck_assert(memcmp(r.value.data, expect.data, expect.len) == 0);
    nds_read_result_dispose(&r);

    for (size_t i = 0; i < N; i++) { /* read back through the engine, checksums checked */
        vs_entry e = {.key = "k", .value = refs[i]};
        nds_bytes b;
        NDS_OK(vs_store_read_value(s, &e, 0, lens[i], &b));
        ck_assert_uint_eq(b.len, lens[i]);
        ck_assert(lens[i] == 0 || memcmp(b.data, values[i], lens[i]) == 0);
        nds_bytes_release(&b);
        free(values[i]);
    }
    nds_buf_dispose(&expect);
    free(objects);
    vs_store_free(s);
    nds_kvstore_free(base);
}
END_TEST

/* Values past VS_DATA_OBJECT_MAX start a new object; each object's values read back. */
START_TEST(data_objects_split_at_max) {
    const char *url = file_base();
    nds_kvstore *base = nds_kv_test_open("%s", url);
    vs_store *s;
    NDS_OK(vs_store_open(&s, base, url));
    enum { N = 5 };
    size_t lens[N];
    const uint8_t *data[N];
    uint8_t *values[N];
    for (size_t i = 0; i < N; i++) {
        lens[i] = VS_DATA_OBJECT_MAX / 3 + i * 1000;
        values[i] = malloc(lens[i]);
        fill_pattern(values[i], lens[i], (unsigned)(i + 50));
        data[i] = values[i];
    }
    vs_ref refs[N];
    vs_object_count *objects = NULL;
    size_t nobjects = 0;
    NDS_OK(vs_store_write_values(s, data, lens, N, refs, &objects, &nobjects));
    ck_assert_uint_eq(nobjects, 3); /* 2 + 2 + 1 values of about a third each */
    ck_assert_uint_eq(objects[0].items + objects[1].items + objects[2].items, N);
    ck_assert(memcmp(&refs[0].object, &refs[1].object, VS_ID_SIZE) == 0);
    ck_assert(memcmp(&refs[1].object, &refs[2].object, VS_ID_SIZE) != 0);
    ck_assert_uint_eq(refs[2].offset, VS_HEADER_SIZE); /* first value of its object */
    for (size_t i = 0; i < N; i++) {
        vs_entry e = {.key = "k", .value = refs[i]};
        nds_bytes b;
        NDS_OK(vs_store_read_value(s, &e, 0, lens[i], &b));
        ck_assert(memcmp(b.data, values[i], lens[i]) == 0);
        nds_bytes_release(&b);
        free(values[i]);
    }
    free(objects);
    vs_store_free(s);
    nds_kvstore_free(base);
}
END_TEST

/* ---- prepared parts: chunks encoded in parallel ---- */

enum { ROWS = 200, COLS = 96, CHUNK_ROWS = 16, CHUNK_COLS = 32, ARRAYS = 3, PARTS = 3 };

static float value_at(int a, uint64_t i, uint64_t j) {
    return (float)(a * 100000 + (int)(i * COLS + j)) * 0.5f;
}

static nds_array *open_array(const char *store, int a, nds_txn *txn, const char *codec) {
    char spec[2048];
    snprintf(spec, sizeof spec,
             "{\"driver\":\"zarr3\",\"kvstore\":\"%sa%d/\",\"create\":true,\"open\":true,"
             "\"schema\":{\"dtype\":\"float32\",\"domain\":{\"shape\":[%d,%d]},"
             "\"chunk_layout\":{\"chunk\":{\"shape\":[%d,%d]}},\"codec\":\"%s\"}}",
             store, a, ROWS, COLS, CHUNK_ROWS, CHUNK_COLS, codec);
    nds_open_options o = NDS_OPEN_OPTIONS_INIT;
    o.txn = txn;
    nds_array *arr = NULL;
    NDS_OK(nds_array_open(&arr, spec, &o));
    return arr;
}

/* Part p writes rows [ROWS p / PARTS, ROWS (p+1) / PARTS) of every array: 66 or 67 rows, so most
 * chunks are whole and the ones at the splits are partial, shared with the next part. */
static char *prepare_part(const char *store, int p, const char *codec) {
    nds_txn_options to = NDS_TXN_OPTIONS_INIT;
    to.mode = NDS_TXN_ATOMIC;
    nds_txn *txn;
    NDS_OK(nds_txn_begin(&txn, &to));
    nds_io_options io = NDS_IO_OPTIONS_INIT;
    io.txn = txn;
    uint64_t first = (uint64_t)ROWS * p / PARTS, last = (uint64_t)ROWS * (p + 1) / PARTS;
    float *buf = malloc((last - first) * COLS * sizeof *buf);
    nds_array *arrays[ARRAYS];
    for (int a = 0; a < ARRAYS; a++) {
        arrays[a] = open_array(store, a, txn, codec);
        for (uint64_t i = first; i < last; i++)
            for (uint64_t j = 0; j < COLS; j++) buf[(i - first) * COLS + j] = value_at(a, i, j);
        nds_box b = {2, {first, 0}, {last, COLS}, {1, 1}, 0};
        NDS_OK(nds_array_write(arrays[a], &b, buf, &io));
    }
    char *token = NULL;
    NDS_OK(nds_txn_prepare(txn, &token));
    for (int a = 0; a < ARRAYS; a++) nds_array_free(arrays[a]);
    nds_txn_free(txn);
    free(buf);
    return token;
}

static void check_parts(const char *codec) {
    char store[1200];
    snprintf(store, sizeof store, "%s|versioned:", file_base());
    char *tokens[PARTS];
    for (int p = 0; p < PARTS; p++) tokens[p] = prepare_part(store, p, codec);
    nds_kvstore *kv = nds_kv_test_open("%s", store);
    NDS_OK(nds_txn_commit_prepared(kv, (const char *const *)tokens, PARTS, "parts", NULL));
    nds_kvstore_free(kv);
    float *buf = malloc((size_t)ROWS * COLS * sizeof *buf);
    for (int a = 0; a < ARRAYS; a++) {
        nds_array *arr = open_array(store, a, NULL, codec);
        nds_box all = {2, {0, 0}, {ROWS, COLS}, {1, 1}, 0};
        NDS_OK(nds_array_read(arr, &all, buf, NULL));
        for (uint64_t i = 0; i < ROWS; i++)
            for (uint64_t j = 0; j < COLS; j++)
                ck_assert_msg(buf[i * COLS + j] == value_at(a, i, j),
                              "array %d [%" PRIu64 ",%" PRIu64 "]: %g, expected %g", a, i, j,
                              (double)buf[i * COLS + j], (double)value_at(a, i, j));
        nds_array_free(arr);
    }
    free(buf);
    for (int p = 0; p < PARTS; p++) nds_free(tokens[p]);
}

START_TEST(prepared_parts_whole_and_partial_chunks) {
    check_parts("none");
    check_parts("zstd:1");
}
END_TEST

/* A chunk written in part is stored for the committer whole, with its mask: its unwritten
 * elements hold the fill value (staged chunks are not filled when created, so the prepare fills
 * them; without that they would hold whatever the allocator left, 0xbe under ASan). */
START_TEST(partial_chunk_side_value_holds_fill) {
    char store[1200];
    snprintf(store, sizeof store, "%s|versioned:", file_base());
    nds_txn_options to = NDS_TXN_OPTIONS_INIT;
    to.mode = NDS_TXN_ATOMIC;
    nds_txn *txn;
    NDS_OK(nds_txn_begin(&txn, &to));
    nds_array *arr = open_array(store, 0, txn, "none");
    nds_io_options io = NDS_IO_OPTIONS_INIT;
    io.txn = txn;
    float rows[5 * COLS];
    for (size_t k = 0; k < 5 * COLS; k++) rows[k] = 1.5f + (float)k;
    nds_box b = {2, {3, 0}, {8, COLS}, {1, 1}, 0}; /* rows 3..7 of the first row of chunks */
    NDS_OK(nds_array_write(arr, &b, rows, &io));
    char *token = NULL;
    NDS_OK(nds_txn_prepare(txn, &token));
    nds_array_free(arr);
    nds_txn_free(txn);

    nds_kvstore *kv = nds_kv_test_open("%s", store);
    nds_kv_prepared set;
    NDS_OK(nds_kvstore_prepared_read(kv, token, &set));
    ck_assert_uint_eq(set.nside, COLS / CHUNK_COLS); /* one partial chunk per column of chunks */
    for (size_t i = 0; i < set.nside; i++) {
        const nds_kv_side *side = &set.side[i];
        size_t elems = CHUNK_ROWS * CHUNK_COLS, hlen = nds_load_le32(side->data);
        ck_assert_uint_eq(side->len, 4 + hlen + elems + elems * sizeof(float));
        const uint8_t *mask = side->data + 4 + hlen;
        const uint8_t *values = mask + elems;
        for (size_t e = 0; e < elems; e++) {
            size_t r = e / CHUNK_COLS;
            float v;
            memcpy(&v, values + e * sizeof v, sizeof v);
            ck_assert_int_eq(mask[e], r >= 3 && r < 8);
            if (!mask[e])
                ck_assert_msg(v == 0.0f, "side value %zu: unwritten element %zu holds %g", i, e,
                              (double)v);
        }
    }
    nds_kvstore_prepared_dispose(kv, &set);
    nds_kvstore_free(kv);
    nds_free(token);
}
END_TEST

/* A prepare frees each staged chunk once it is encoded; when the prepare then fails (here: a
 * plain file:// store has no prepared commits) the transaction is poisoned: reads through it are
 * refused, abort and free release the rest. */
START_TEST(failed_prepare_leaves_poisoned_transaction) {
    char store[1200];
    snprintf(store, sizeof store, "%s", file_base());
    nds_txn_options to = NDS_TXN_OPTIONS_INIT;
    to.mode = NDS_TXN_ATOMIC;
    nds_txn *txn;
    NDS_OK(nds_txn_begin(&txn, &to));
    nds_array *arr = open_array(store, 0, txn, "none");
    nds_io_options io = NDS_IO_OPTIONS_INIT;
    io.txn = txn;
    float *buf = calloc((size_t)ROWS * COLS, sizeof *buf);
    nds_box all = {2, {0, 0}, {ROWS, COLS}, {1, 1}, 0};
    NDS_OK(nds_array_write(arr, &all, buf, &io));
    char *token = NULL;
    ck_assert_int_ne(nds_txn_prepare(txn, &token), 0);
    ck_assert_ptr_null(token);
    ck_assert_int_eq(nds_array_read(arr, &all, buf, &io), NDS_EPOISONED);
    nds_txn_abort(txn);
    nds_array_free(arr);
    nds_txn_free(txn);
    free(buf);
}
END_TEST

/* The base's calls of a kind so far, from the faulty wrapper's counters. */
static uint64_t base_calls(nds_kvstore *kv, const char *kind) {
    char *text;
    NDS_OK(nds_kvstore_spec(kv, &text));
    json_object *o = json_tokener_parse(text), *m, *v;
    ck_assert_ptr_nonnull(o);
    ck_assert(json_object_object_get_ex(o, "calls", &m) && json_object_object_get_ex(m, kind, &v));
    uint64_t n = (uint64_t)json_object_get_int64(v);
    json_object_put(o);
    nds_free(text);
    return n;
}

/* Threads committing through one store with views that predate each other's commits (the array
 * engine publishes its batches from its pool threads) build on the store's own newest commit
 * instead of losing a race to it: a commit from a stale view writes its index, its commit and the
 * head hint, and nothing else (it wrote an index object, a losing commit attempt, deleted the
 * index and wrote both again: 5 writes and 1 delete). */
START_TEST(commit_from_stale_view_builds_on_own_newest) {
    char url[256];
    snprintf(url, sizeof url, "{\"driver\":\"faulty\",\"base\":\"memory://vw-stale-%d/\"}",
             (int)getpid());
    nds_kvstore *kv = nds_kv_test_open("%s", url);
    vs_store *s;
    NDS_OK(vs_store_open(&s, kv, "stale"));
    vs_snapshot start, a, b;
    NDS_OK(vs_store_latest(s, &start));
    a = b = start;
    vs_commit_options o = {.all_or_nothing = true};
    vs_write w1 = {.key = "k1", .data = (const uint8_t *)"one", .len = 3};
    NDS_OK(vs_store_commit(s, &a, &w1, 1, &o));
    ck_assert_uint_eq(a.version, start.version + 1);
    uint64_t writes = base_calls(kv, "write"), deletes = base_calls(kv, "delete");
    vs_write w2 = {.key = "k2", .data = (const uint8_t *)"two", .len = 3};
    NDS_OK(vs_store_commit(s, &b, &w2, 1, &o)); /* b: the view before the first commit */
    ck_assert_uint_eq(b.version, start.version + 2);
    ck_assert_uint_eq(base_calls(kv, "write") - writes, 3); /* index, commit, head hint */
    ck_assert_uint_eq(base_calls(kv, "delete") - deletes, 0);
    /* the new version holds both keys; a condition on a key the stale view read still fails */
    vs_entry e;
    bool found;
    NDS_OK(vs_store_lookup(s, &b, "k1", &e, &found));
    ck_assert(found);
    vs_entry_dispose(&e);
    NDS_OK(vs_store_lookup(s, &b, "k2", &e, &found));
    ck_assert(found);
    vs_entry_dispose(&e);
    vs_snapshot c = start;
    vs_write w3 = {.key = "k1", .data = (const uint8_t *)"three", .len = 5};
    w3.if_equal.kind = NDS_GEN_ABSENT; /* what the stale view saw */
    ck_assert_int_eq(vs_store_commit(s, &c, &w3, 1, &o), NDS_ECONFLICT);
    vs_store_free(s);
    nds_kvstore_free(kv);
}
END_TEST

int main(void) {
    Suite *s = suite_create("versioned_write");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, write_iov_in_pieces);
    tcase_add_test(tc, data_object_bytes_as_built);
    tcase_add_test(tc, data_objects_split_at_max);
    tcase_add_test(tc, prepared_parts_whole_and_partial_chunks);
    tcase_add_test(tc, partial_chunk_side_value_holds_fill);
    tcase_add_test(tc, failed_prepare_leaves_poisoned_transaction);
    tcase_add_test(tc, commit_from_stale_view_builds_on_own_newest);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
