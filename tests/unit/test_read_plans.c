/* The read pipeline as an engine, not per format: every plan (internal/read_pipeline.h) forced
 * over every format and store layout, on full, partial, stepped, single-element and edge boxes of
 * arrays with missing chunks, against the elements written. A plan that cannot read a layout must
 * say so (NDS_EUNSUPPORTED naming the plan); the table pins which plans each layout takes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support_check.h"
#include "support_format.h"
#include "internal/read_pipeline.h"

#define BIT(p) (1u << (p))
#define ALL_BUT_GRID_STORED (BIT(NDS_READ_PLAN_DECODE) | BIT(NDS_READ_PLAN_WHOLE) | \
                             BIT(NDS_READ_PLAN_CACHED))

/* One layout: a spec (printf format taking the kvstore URL), whether it lives in files (reads
 * into place, by planes, in part from the store) or in memory, and the plans it must take. */
typedef struct layout {
    const char *name;
    const char *spec;
    int in_files;
    unsigned plans; /* the forced plans that read it (AUTO always does) */
} layout;

#define ZARR2(shape, chunks, compressor)                                                         \
    "{\"driver\":\"zarr\",\"kvstore\":\"%s\",\"create\":true,\"metadata\":{\"shape\":" shape      \
    ",\"chunks\":" chunks ",\"dtype\":\"<u2\",\"fill_value\":0,\"compressor\":" compressor "}}"
#define BLOSC "{\"id\":\"blosc\",\"cname\":\"lz4\",\"clevel\":5,\"shuffle\":1,\"blocksize\":512}"
#define ZSTD "{\"id\":\"zstd\",\"level\":1}"
#define ZARR3_SHARDED                                                                            \
    "{\"driver\":\"zarr3\",\"kvstore\":\"%s\",\"create\":true,\"metadata\":{\"zarr_format\":3,"   \
    "\"node_type\":\"array\",\"shape\":[37,45,150],\"data_type\":\"uint16\",\"chunk_grid\":"     \
    "{\"name\":\"regular\",\"configuration\":{\"chunk_shape\":[16,32,64]}},"                     \
    "\"chunk_key_encoding\":{\"name\":\"default\"},\"fill_value\":0,\"codecs\":[{\"name\":"      \
    "\"sharding_indexed\",\"configuration\":{\"chunk_shape\":[8,16,32],\"codecs\":[{\"name\":"    \
    "\"bytes\",\"configuration\":{\"endian\":\"little\"}},{\"name\":\"zstd\",\"configuration\":" \
    "{\"level\":1,\"checksum\":false}}],\"index_codecs\":[{\"name\":\"bytes\",\"configuration\":" \
    "{\"endian\":\"little\"}},{\"name\":\"crc32c\"}]}}]}}"
#define ZARR3_PLAIN                                                                              \
    "{\"driver\":\"zarr3\",\"kvstore\":\"%s\",\"create\":true,\"metadata\":{\"zarr_format\":3,"   \
    "\"node_type\":\"array\",\"shape\":[37,45,150],\"data_type\":\"uint16\",\"chunk_grid\":"     \
    "{\"name\":\"regular\",\"configuration\":{\"chunk_shape\":[8,16,32]}},"                      \
    "\"chunk_key_encoding\":{\"name\":\"default\"},\"fill_value\":0,\"codecs\":[{\"name\":"      \
    "\"bytes\",\"configuration\":{\"endian\":\"big\"}},{\"name\":\"blosc\",\"configuration\":"   \
    "{\"cname\":\"lz4\",\"clevel\":5,\"shuffle\":\"shuffle\",\"typesize\":2,\"blocksize\":256}}]}}"
#define N5_GZIP                                                                                  \
    "{\"driver\":\"n5\",\"kvstore\":\"%s\",\"create\":true,\"metadata\":{\"dimensions\":"        \
    "[150,45,37],\"blockSize\":[32,16,8],\"dataType\":\"uint16\",\"compression\":{\"type\":"     \
    "\"gzip\",\"level\":1}}}"
#define PRECOMPUTED(encoding, sharding)                                                          \
    "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"%s\",\"create\":true,"               \
    "\"multiscale_metadata\":{\"data_type\":\"uint16\",\"num_channels\":1},\"scale_metadata\":"  \
    "{\"size\":[37,45,20],\"chunk_size\":[8,16,8],\"encoding\":\"" encoding "\"" sharding "}}"
#define BOX_SHARDS                                                                               \
    ",\"sharding\":{\"@type\":\"neuroglancer_uint64_sharded_v1\",\"preshift_bits\":3,"           \
    "\"minishard_bits\":0,\"shard_bits\":0,\"hash\":\"identity\",\"minishard_index_encoding\":"  \
    "\"raw\",\"data_encoding\":\"gzip\"}"

static const layout LAYOUTS[] = {
    {"zarr2 raw, files", ZARR2("[37,45,150]", "[8,16,32]", "null"), 1,
     ALL_BUT_GRID_STORED | BIT(NDS_READ_PLAN_STORED)},
    {"zarr2 raw, memory", ZARR2("[37,45,150]", "[8,16,32]", "null"), 0,
     ALL_BUT_GRID_STORED | BIT(NDS_READ_PLAN_STORED)},
    /* Rows of 1 KiB, output rows on cache lines and planes of 32 KiB: reads into place and by
     * planes. */
    {"zarr2 raw long rows, files", ZARR2("[9,70,1088]", "[4,32,512]", "null"), 1,
     ALL_BUT_GRID_STORED | BIT(NDS_READ_PLAN_STORED)},
    {"zarr2 blosc, files", ZARR2("[37,45,150]", "[8,16,32]", BLOSC), 1, ALL_BUT_GRID_STORED},
    {"zarr2 blosc long rows, memory", ZARR2("[9,70,1088]", "[4,32,512]", BLOSC), 0,
     ALL_BUT_GRID_STORED},
    {"zarr2 zstd, memory", ZARR2("[37,45,150]", "[8,16,32]", ZSTD), 0, ALL_BUT_GRID_STORED},
    {"zarr3 blosc big-endian, files", ZARR3_PLAIN, 1, ALL_BUT_GRID_STORED},
    {"zarr3 sharded, files", ZARR3_SHARDED, 1, ALL_BUT_GRID_STORED | BIT(NDS_READ_PLAN_GRID)},
    {"zarr3 sharded, memory", ZARR3_SHARDED, 0, ALL_BUT_GRID_STORED | BIT(NDS_READ_PLAN_GRID)},
    {"n5 gzip, memory", N5_GZIP, 0, ALL_BUT_GRID_STORED},
    {"precomputed raw, memory", PRECOMPUTED("raw", ""), 0, ALL_BUT_GRID_STORED},
    {"precomputed raw, box shards", PRECOMPUTED("raw", BOX_SHARDS), 0,
     ALL_BUT_GRID_STORED | BIT(NDS_READ_PLAN_GRID)},
};
#define NLAYOUTS (sizeof LAYOUTS / sizeof LAYOUTS[0])

/* An array under test: the handle, one opened with a cache, the elements it holds (C order). */
typedef struct subject {
    nds_array *a, *cached;
    nds_context *cache_ctx;
    size_t rank;
    uint64_t shape[NDS_MAX_RANK];
    uint16_t *want;
    size_t n;
    char url[512];
} subject;

static char *tmp;

/* The 3-d box [lo, hi) with steps 1. */
static nds_box box3(uint64_t x0, uint64_t y0, uint64_t z0, uint64_t x1, uint64_t y1, uint64_t z1) {
    nds_box b;
    memset(&b, 0, sizeof b);
    uint64_t lo[3] = {x0, y0, z0}, hi[3] = {x1, y1, z1};
    b.rank = 3;
    for (size_t d = 0; d < 3; d++) {
        b.start[d] = lo[d];
        b.stop[d] = hi[d];
        b.step[d] = 1;
    }
    return b;
}

/* The layout's array with a pattern written to a box that leaves chunks missing on every side
 * (they read as the fill value, 0). */
static void subject_make(subject *t, size_t li, const char *tag) {
    const layout *l = &LAYOUTS[li];
    if (l->in_files)
        snprintf(t->url, sizeof t->url, "file://%s/%s%zu/", tmp, tag, li);
    else
        snprintf(t->url, sizeof t->url, "memory://read_plans_%s%zu/", tag, li);
    NDS_OK(open_spec(&t->a, l->spec, t->url));
    t->rank = nds_array_rank(t->a);
    nds_array_shape(t->a, t->shape);
    t->n = 1;
    for (size_t d = 0; d < t->rank; d++) t->n *= t->shape[d];
    t->want = calloc(t->n, 2);
    nds_box w;
    memset(&w, 0, sizeof w);
    w.rank = t->rank;
    for (size_t d = 0; d < t->rank; d++) {
        w.start[d] = t->shape[d] > 2 ? t->shape[d] / 5 : 0;
        w.stop[d] = t->shape[d] > 2 ? t->shape[d] - t->shape[d] / 6 : t->shape[d];
        w.step[d] = 1;
    }
    uint16_t *in = malloc(nds_box_count(&w) * 2);
    size_t k = 0;
    for (size_t i = 0; i < t->n; i++) { /* C order: the box's elements come in its order */
        size_t rest = i;
        int inside = 1;
        for (size_t d = t->rank; d-- > 0;) {
            uint64_t x = rest % t->shape[d];
            rest /= t->shape[d];
            inside = inside && x >= w.start[d] && x < w.stop[d];
        }
        if (inside) t->want[i] = in[k++] = (uint16_t)(1 + i * 7 % 65521);
    }
    NDS_OK(nds_array_write(t->a, &w, in, NULL));
    free(in);
    nds_context_options co = NDS_CONTEXT_OPTIONS_INIT;
    co.cache_bytes = 8 << 20;
    NDS_OK(nds_context_new(&t->cache_ctx, &co));
    nds_open_options oo = NDS_OPEN_OPTIONS_INIT;
    oo.ctx = t->cache_ctx;
    char *spec;
    NDS_OK(nds_array_spec(t->a, &spec));
    NDS_OK(nds_array_open(&t->cached, spec, &oo));
    nds_free(spec);
}

static void subject_free(subject *t) {
    nds_array_free(t->a);
    nds_array_free(t->cached);
    nds_context_free(t->cache_ctx);
    free(t->want);
}

/* The boxes read: whole, a middle part crossing chunks, stepped, one element, the far corner,
 * and a thin one (one row of ten elements in each plane: read by planes where stored canonically
 * in files). */
static size_t boxes_of(const subject *t, nds_box *boxes) {
    size_t n = 0;
    nds_box_full(&boxes[n++], t->rank, t->shape);
    for (int kind = 0; kind < 5; kind++) {
        nds_box *b = &boxes[n++];
        memset(b, 0, sizeof *b);
        b->rank = t->rank;
        for (size_t d = 0; d < t->rank; d++) {
            uint64_t s = t->shape[d];
            uint64_t thin = d + 2 < t->rank ? s - 1 : d + 2 == t->rank ? s / 3 + 1 : s / 3 + 10;
            uint64_t lo[5] = {s / 7, s / 3, s / 2, s > 3 ? s - 3 : 0, s > 2 ? s / 3 : 0};
            uint64_t hi[5] = {s - s / 4, s, s / 2 + 1, s, thin < s ? thin : s};
            uint64_t step[5] = {1, d % 2 ? 3 : 2, 1, 1, 1};
            b->start[d] = lo[kind];
            b->stop[d] = hi[kind] > lo[kind] ? hi[kind] : lo[kind] + 1;
            b->step[d] = step[kind];
        }
    }
    return n;
}

/* Whether out holds box's elements of t. */
static void assert_box(const subject *t, const nds_box *box, const uint16_t *out,
                       const char *what) {
    uint64_t idx[NDS_MAX_RANK] = {0};
    size_t count = nds_box_count(box);
    for (size_t k = 0; k < count; k++) {
        size_t flat = 0;
        for (size_t d = 0; d < t->rank; d++)
            flat = flat * t->shape[d] + box->start[d] + idx[d] * box->step[d];
        ck_assert_msg(out[k] == t->want[flat], "%s: element %zu: got %u, want %u", what, k,
                      out[k], t->want[flat]);
        for (size_t d = t->rank; d-- > 0;) {
            if (box->start[d] + ++idx[d] * box->step[d] < box->stop[d]) break;
            idx[d] = 0;
        }
    }
}

/* Reads every box with plan (and runs) on a, into a 64-byte aligned buffer (reads into place
 * need it). */
static void check_plan(const subject *t, size_t li, nds_array *a, nds_read_plan plan,
                       nds_read_runs runs) {
    nds_box boxes[8];
    size_t nb = boxes_of(t, boxes);
    for (size_t b = 0; b < nb; b++) {
        size_t bytes = (nds_box_count(&boxes[b]) * 2 + 63) / 64 * 64;
        uint16_t *out = aligned_alloc(64, bytes);
        memset(out, 0xAB, bytes);
        char what[256];
        snprintf(what, sizeof what, "%s, plan %s, runs %d, box %zu", LAYOUTS[li].name,
                 nds_read_plan_name(plan), (int)runs, b);
        int rc = nds_array_read_with_plan(a, &boxes[b], out, NULL, plan, runs);
        if (plan == NDS_READ_PLAN_AUTO || (LAYOUTS[li].plans & BIT(plan))) {
            ck_assert_msg(rc == 0, "%s: %s", what, nds_error_last()->message);
            assert_box(t, &boxes[b], out, what);
        } else {
            ck_assert_msg(rc == NDS_EUNSUPPORTED, "%s: read (%d) where a refusal was due", what,
                          rc);
            ck_assert_msg(strstr(nds_error_last()->message, nds_read_plan_name(plan)),
                          "%s: message %s", what, nds_error_last()->message);
        }
        free(out);
    }
}

START_TEST(every_plan_reads_every_layout) {
    size_t li = (size_t)_i;
    subject t;
    subject_make(&t, li, "every");
    for (int p = NDS_READ_PLAN_AUTO; p < NDS_READ_PLAN_COUNT; p++)
        for (int runs = NDS_READ_RUNS_AUTO; runs <= NDS_READ_RUNS_ON; runs++)
            check_plan(&t, li, p == NDS_READ_PLAN_CACHED ? t.cached : t.a, (nds_read_plan)p,
                       (nds_read_runs)runs);
    check_plan(&t, li, t.cached, NDS_READ_PLAN_AUTO, NDS_READ_RUNS_AUTO);
    /* A second cached pass: the hits are revalidated, not decoded again. */
    check_plan(&t, li, t.cached, NDS_READ_PLAN_CACHED, NDS_READ_RUNS_AUTO);
    subject_free(&t);
}
END_TEST

/* Reads inside a transaction see its staged elements over the stored chunks: the whole plan
 * overlays them; the plans that cannot are refused, never read past the staged elements. */
START_TEST(transactions_overlay_with_the_whole_plan) {
    subject t;
    subject_make(&t, 0, "txn");
    nds_txn *txn;
    NDS_OK(nds_txn_begin(&txn, NULL));
    nds_io_options io = NDS_IO_OPTIONS_INIT;
    io.txn = txn;
    nds_box w = box3(1, 2, 3, 20, 30, 140);
    size_t n = nds_box_count(&w);
    uint16_t *in = malloc(n * 2);
    for (size_t i = 0; i < n; i++) in[i] = (uint16_t)(50000 + i % 1000);
    NDS_OK(nds_array_write(t.a, &w, in, &io));
    size_t k = 0;
    for (uint64_t x = 1; x < 20; x++)
        for (uint64_t y = 2; y < 30; y++)
            for (uint64_t z = 3; z < 140; z++) t.want[(x * 45 + y) * 150 + z] = in[k++];
    nds_box boxes[8];
    size_t nb = boxes_of(&t, boxes);
    for (int p = NDS_READ_PLAN_AUTO; p < NDS_READ_PLAN_COUNT; p++) {
        for (size_t b = 0; b < nb; b++) {
            uint16_t *out = malloc(nds_box_count(&boxes[b]) * 2);
            int rc = nds_array_read_with_plan(t.a, &boxes[b], out, &io, (nds_read_plan)p,
                                              NDS_READ_RUNS_AUTO);
            if (p == NDS_READ_PLAN_AUTO || p == NDS_READ_PLAN_WHOLE) {
                ck_assert_msg(rc == 0, "plan %s: %s", nds_read_plan_name(p),
                              nds_error_last()->message);
                assert_box(&t, &boxes[b], out, nds_read_plan_name(p));
            } else {
                ck_assert_int_eq(rc, NDS_EUNSUPPORTED);
                ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "staged"));
            }
            free(out);
        }
    }
    nds_txn_abort(txn);
    nds_txn_free(txn);
    free(in);
    subject_free(&t);
}
END_TEST

/* A damaged chunk is an error naming it under every plan that decodes it. */
START_TEST(every_plan_names_a_damaged_chunk) {
    subject t;
    subject_make(&t, 3, "damaged"); /* zarr2 blosc in files */
    put_raw(t.url, "3.1.2", "not blosc at all", 16);
    nds_box box = box3(24, 16, 64, 32, 32, 96);
    uint16_t out[8 * 16 * 32];
    for (int p = NDS_READ_PLAN_DECODE; p < NDS_READ_PLAN_COUNT; p++) {
        if (p == NDS_READ_PLAN_GRID) continue;
        int rc = nds_array_read_with_plan(p == NDS_READ_PLAN_CACHED ? t.cached : t.a, &box, out,
                                          NULL, (nds_read_plan)p, NDS_READ_RUNS_OFF);
        ck_assert_msg(rc == NDS_ECORRUPT, "plan %s: %d", nds_read_plan_name(p), rc);
        ck_assert_msg(strstr(nds_error_last()->message, "3.1.2"), "plan %s: %s",
                      nds_read_plan_name(p), nds_error_last()->message);
    }
    subject_free(&t);
}
END_TEST

/* A canonical chunk stored with the wrong size is an error under the stored plan, whichever way
 * it reads (into place, by planes, by span). */
START_TEST(stored_plan_checks_sizes) {
    subject t;
    subject_make(&t, 2, "sizes"); /* zarr2 raw long rows in files */
    put_raw(t.url, "1.1.1", "short", 5);
    nds_box boxes[3] = {box3(4, 32, 512, 8, 64, 1024), /* whole: into place */
                        box3(4, 40, 600, 8, 41, 610),  /* planes */
                        box3(5, 40, 600, 6, 41, 610)}; /* span */
    for (size_t b = 0; b < 3; b++) {
        uint16_t *out = aligned_alloc(64, 4 * 32 * 512 * 2);
        int rc = nds_array_read_with_plan(t.a, &boxes[b], out, NULL, NDS_READ_PLAN_STORED,
                                          NDS_READ_RUNS_OFF);
        ck_assert_msg(rc == NDS_ECORRUPT, "box %zu: %d", b, rc);
        const char *m = nds_error_last()->message;
        ck_assert_msg(strstr(m, "1.1.1") && strstr(m, "expected 131072 bytes"), "%s", m);
        /* Into place and by planes the store reports the value's size; a span falls short. */
        ck_assert_msg(b < 2 ? strstr(m, "found 5") && !strstr(m, "or fewer")
                            : strstr(m, "or fewer") != NULL,
                      "box %zu: %s", b, m);
        free(out);
    }
    subject_free(&t);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("read_plans");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, every_plan_reads_every_layout, 0, (int)NLAYOUTS);
    tcase_add_test(tc, transactions_overlay_with_the_whole_plan);
    tcase_add_test(tc, every_plan_names_a_damaged_chunk);
    tcase_add_test(tc, stored_plan_checks_sizes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    tmp = nds_test_tmpdir();
    int rc = nds_test_run(suite());
    nds_test_rmtree(tmp);
    free(tmp);
    return rc;
}
