/* A checkpoint as a training job writes one, without PyTorch: 4 writer processes each own a block of
 * rows of every tensor of a model-shaped set (row splits fall inside chunks), create the arrays and
 * write their rows in one transaction each and prepare it; one process commits the 4 parts as one
 * version; then 3 reader processes (another process count) each restore a third of every tensor and
 * check every value. Also: 8 processes committing through an lmdb base lose no increment. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support_check.h"
#include "support_kv_conformance.h"

typedef struct tensor {
    const char *name;
    nds_dtype dtype;
    const char *dtype_name;
    uint64_t rows, cols; /* cols 0: a vector */
    uint64_t chunk_rows, chunk_cols;
} tensor;

/* Row counts are not multiples of 4 writers x chunk rows: splits fall inside chunks. */
static const tensor model[] = {
    {"embed/w", NDS_FLOAT32, "float32", 100, 32, 16, 16},
    {"layer0/w", NDS_FLOAT32, "float32", 96, 64, 32, 32},
    {"layer0/b", NDS_FLOAT32, "float32", 96, 0, 40, 0},
    {"layer1/w", NDS_INT64, "int64", 58, 48, 16, 24},
    {"head/w", NDS_UINT16, "uint16", 10, 100, 4, 64},
};
enum { TENSORS = sizeof model / sizeof *model, WRITERS = 4, READERS = 3 };

static double expected(size_t t, uint64_t i, uint64_t j) {
    /* Distinct per element, exact in every dtype of the model (uint16 included). */
    return (double)(((t + 1) * 7919 + i * 131 + j) % 60000) /
           (model[t].dtype == NDS_FLOAT32 ? 8.0 : 1.0);
}

static size_t elem_size(nds_dtype d) { return d == NDS_UINT16 ? 2 : d == NDS_INT64 ? 8 : 4; }

static void store(nds_dtype d, void *buf, size_t k, double v) {
    if (d == NDS_FLOAT32) ((float *)buf)[k] = (float)v;
    else if (d == NDS_INT64) ((int64_t *)buf)[k] = (int64_t)v;
    else ((uint16_t *)buf)[k] = (uint16_t)v;
}

static double load(nds_dtype d, const void *buf, size_t k) {
    if (d == NDS_FLOAT32) return ((const float *)buf)[k];
    if (d == NDS_INT64) return (double)((const int64_t *)buf)[k];
    return ((const uint16_t *)buf)[k];
}

/* Rows [first, last) of the part of n parts numbered p. */
static void part_rows(uint64_t rows, int p, int n, uint64_t *first, uint64_t *last) {
    *first = rows * (uint64_t)p / (uint64_t)n;
    *last = rows * (uint64_t)(p + 1) / (uint64_t)n;
}

static int open_tensor(const char *base, size_t t, nds_txn *txn, nds_array **out) {
    const tensor *m = &model[t];
    char spec[2048];
    if (m->cols)
        snprintf(spec, sizeof spec,
                 "{\"driver\":\"zarr3\",\"kvstore\":\"%s|versioned:ckpt/%s/\",\"create\":true,"
                 "\"open\":true,\"schema\":{\"dtype\":\"%s\",\"domain\":{\"shape\":[%" PRIu64
                 ",%" PRIu64 "]},\"chunk_layout\":{\"chunk\":{\"shape\":[%" PRIu64 ",%" PRIu64
                 "]}},\"codec\":\"zstd:1\"}}",
                 base, m->name, m->dtype_name, m->rows, m->cols, m->chunk_rows, m->chunk_cols);
    else
        snprintf(spec, sizeof spec,
                 "{\"driver\":\"zarr3\",\"kvstore\":\"%s|versioned:ckpt/%s/\",\"create\":true,"
                 "\"open\":true,\"schema\":{\"dtype\":\"%s\",\"domain\":{\"shape\":[%" PRIu64
                 "]},\"chunk_layout\":{\"chunk\":{\"shape\":[%" PRIu64 "]}}}}",
                 base, m->name, m->dtype_name, m->rows, m->chunk_rows);
    nds_open_options o = NDS_OPEN_OPTIONS_INIT;
    o.txn = txn;
    return nds_array_open(out, spec, &o);
}

static nds_box rows_box(size_t t, uint64_t first, uint64_t last) {
    const tensor *m = &model[t];
    if (m->cols) return (nds_box){2, {first, 0}, {last, m->cols}, {1, 1}, 0};
    return (nds_box){1, {first}, {last}, {1}, 0};
}

static int write_part(const char *base, const char *dir, int p) {
    nds_txn_options to = NDS_TXN_OPTIONS_INIT;
    to.mode = NDS_TXN_ATOMIC;
    nds_txn *txn;
    if (nds_txn_begin(&txn, &to)) return 2;
    nds_array *arrays[TENSORS] = {0};
    nds_io_options io = NDS_IO_OPTIONS_INIT;
    io.txn = txn;
    int rc = 0;
    for (size_t t = 0; !rc && t < TENSORS; t++) {
        const tensor *m = &model[t];
        uint64_t first, last, cols = m->cols ? m->cols : 1;
        part_rows(m->rows, p, WRITERS, &first, &last);
        uint8_t *buf = malloc((last - first) * cols * elem_size(m->dtype) + 1);
        for (uint64_t i = first; i < last; i++)
            for (uint64_t j = 0; j < cols; j++)
                store(m->dtype, buf, (i - first) * cols + j, expected(t, i, j));
        nds_box b = rows_box(t, first, last);
        rc = open_tensor(base, t, txn, &arrays[t]);
        if (!rc) rc = nds_array_write(arrays[t], &b, buf, &io);
        free(buf);
    }
    char *token = NULL;
    if (!rc) rc = nds_txn_prepare(txn, &token);
    for (size_t t = 0; t < TENSORS; t++) nds_array_free(arrays[t]);
    nds_txn_free(txn);
    if (rc) {
        fprintf(stderr, "writer %d: %s\n", p, nds_error_last()->message);
        return 3;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/token%d", dir, p);
    nds_test_write_file(path, token, strlen(token));
    nds_free(token);
    return 0;
}

/* Reader r of READERS restores its third of every tensor; returns the number of wrong values. */
static int read_part(const char *base, int r) {
    int wrong = 0;
    for (size_t t = 0; t < TENSORS; t++) {
        const tensor *m = &model[t];
        char spec[4096];
        snprintf(spec, sizeof spec, "%s|versioned:ckpt/%s/|zarr3:", base, m->name);
        nds_array *a;
        if (nds_array_open(&a, spec, NULL)) return 1000;
        uint64_t first, last, cols = m->cols ? m->cols : 1;
        part_rows(m->rows, r, READERS, &first, &last);
        uint8_t *buf = malloc((last - first) * cols * elem_size(m->dtype) + 1);
        nds_box b = rows_box(t, first, last);
        if (nds_array_read(a, &b, buf, NULL)) wrong += 1000;
        for (uint64_t i = first; !wrong && i < last; i++)
            for (uint64_t j = 0; j < cols; j++)
                if (load(m->dtype, buf, (i - first) * cols + j) != expected(t, i, j)) {
                    if (!wrong++)
                        fprintf(stderr, "reader %d: %s[%" PRIu64 ", %" PRIu64 "] = %g, not %g\n", r,
                                m->name, i, j, load(m->dtype, buf, (i - first) * cols + j),
                                expected(t, i, j));
                }
        free(buf);
        nds_array_free(a);
    }
    return wrong;
}

static void wait_all(pid_t *pids, int n, const char *what) {
    for (int p = 0; p < n; p++) {
        int status;
        waitpid(pids[p], &status, 0);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s %d: status %d", what, p,
                      status);
    }
}

START_TEST(model_checkpoint_from_4_writers_restored_by_3_readers) {
    char *dir = nds_test_tmpdir(), base[1024];
    snprintf(base, sizeof base, "file://%s/store/", dir);
    pid_t pids[WRITERS];
    for (int p = 0; p < WRITERS; p++)
        if ((pids[p] = fork()) == 0) _exit(write_part(base, dir, p));
    wait_all(pids, WRITERS, "writer");
    char *tokens[WRITERS];
    for (int p = 0; p < WRITERS; p++) {
        char path[1200], buf[128] = {0};
        snprintf(path, sizeof path, "%s/token%d", dir, p);
        FILE *f = fopen(path, "r");
        ck_assert_ptr_nonnull(f);
        ck_assert_int_gt(fread(buf, 1, sizeof buf - 1, f), 0);
        fclose(f);
        tokens[p] = strdup(buf);
    }
    char url[1100];
    snprintf(url, sizeof url, "%s|versioned:", base);
    nds_kvstore *kv;
    NDS_OK(nds_kvstore_open(&kv, url, NULL));
    NDS_OK(nds_txn_commit_prepared(kv, (const char *const *)tokens, WRITERS, "step 1", NULL));
    uint64_t v;
    NDS_OK(nds_versioned_current(kv, &v));
    ck_assert_uint_eq(v, 1); /* the whole checkpoint is one version */
    nds_kvstore_free(kv);
    pid_t readers[READERS];
    for (int r = 0; r < READERS; r++)
        if ((readers[r] = fork()) == 0) _exit(read_part(base, r) ? 4 : 0);
    wait_all(readers, READERS, "reader");
    for (int p = 0; p < WRITERS; p++) free(tokens[p]);
    nds_test_rmtree(dir);
    free(dir);
}
END_TEST

/* 8 processes x 20 increments of one counter through a versioned lmdb store. */
START_TEST(lmdb_base_loses_no_increment) {
    char *dir = nds_test_tmpdir(), url[1024];
    snprintf(url, sizeof url, "lmdb://%s/v.lmdb/|versioned:", dir);
    nds_kv_test_processes_increment(url, 8, 20);
    nds_test_rmtree(dir);
    free(dir);
}
END_TEST

int main(void) {
    Suite *s = suite_create("versioned_checkpoint");
    TCase *tc = tcase_create("checkpoint");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, model_checkpoint_from_4_writers_restored_by_3_readers);
    tcase_add_test(tc, lmdb_base_loses_no_increment);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
