/* The zarr v2 read paths (lib/array_read.c through formats/zarr2.c): blosc regions decoded and
 * read block by block, a chunk replaced between a region's reads, runs of chunks along rows,
 * streaming copies into outputs past the cache, uncompressed chunks read into place or plane by
 * plane, whole blosc chunks a block at a time; against the values written, on memory:// and file:// stores. */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support_check.h"
#include "support_format.h"
#include "internal/strided.h"
#include "internal/read_pipeline.h"
#include "ndstore/sys/kv_driver.h"

extern const nds_kv_driver nds_kv_driver_memory;

/* Regions of blosc chunks decode only the blocks that hold them (decode_chunk_part), and on
 * file:// read only those blocks' stored bytes (read_chunk_part): random boxes with steps, little-
 * and big-endian, against the array written; on file:// a missing chunk reads as fill and a cut
 * short one is corrupt, named. */
START_TEST(blosc_partial_reads) {
    static const char *const dtypes[] = {"<u2", ">u2"};
    enum { X = 40, Y = 50, Z = 300 };
    uint64_t shape[3] = {X, Y, Z};
    uint16_t *v = malloc(sizeof(uint16_t) * X * Y * Z);
    char dir[] = "/tmp/nds-zarr2-part-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    for (int t = 0; t < 4; t++) {
        for (size_t i = 0; i < (size_t)X * Y * Z; i++) v[i] = (uint16_t)(i * 7 + i / 300);
        char url[128];
        if (t < 2)
            snprintf(url, sizeof url, "memory://part/%d/", t);
        else
            snprintf(url, sizeof url, "file://%s/%d/", dir, t);
        nds_array *a;
        NDS_OK(open_spec(&a,
                         "{\"driver\":\"zarr\",\"kvstore\":\"%s\",\"metadata\":{\"shape\":[%d,%d,%d],"
                         "\"chunks\":[16,20,256],\"dtype\":\"%s\",\"fill_value\":3,\"compressor\":"
                         "{\"id\":\"blosc\",\"cname\":\"lz4\",\"clevel\":5,\"shuffle\":1,"
                         "\"blocksize\":4096}},\"create\":true}",
                         url, X, Y, Z, dtypes[t % 2]));
        write_all(a, v);
        assert_random_boxes_u16(a, v, shape, 60, dtypes[t % 2]);
        if (t >= 2) {
            char path[160];
            snprintf(path, sizeof path, "%s/%d/1.1.0", dir, t);
            ck_assert_int_eq(unlink(path), 0);
            uint64_t lo[3] = {16, 20, 0}, hi[3] = {32, 40, 256};
            set_box_u16(v, shape, lo, hi, 3);
            assert_random_boxes_u16(a, v, shape, 30, "missing chunk");
            snprintf(path, sizeof path, "%s/%d/0.0.0", dir, t);
            ck_assert_int_eq(truncate(path, 2000), 0);
            nds_box box;
            NDS_OK(nds_box_parse(&box, "[2:5, 3:9, 100:200]", 3, shape));
            uint16_t out[3 * 6 * 100];
            EXPECT_ERR(nds_array_read(a, &box, out, NULL), NDS_ECORRUPT, "0.0.0");
        }
        nds_array_free(a);
    }
    nds_test_rmtree(dir);
    free(v);
}
END_TEST

/* A region read from file:// reads a chunk's header and block index, then its blocks: a chunk
 * replaced between the two reads must not mix versions. One thread rewrites a chunk, alternating
 * two contents whose blocks lie at different places, while this one reads regions of it; every
 * region read is one version or the other, whole. */
typedef struct rewriter {
    nds_array *a;
    const uint16_t *versions[2];
    volatile int stop;
} rewriter;

static void *rewrite_chunk(void *p) {
    rewriter *w = p;
    for (int i = 0; !w->stop; i++) write_all(w->a, w->versions[i % 2]);
    return NULL;
}

START_TEST(partial_reads_see_one_version) {
    enum { N = 64 * 64 };
    char dir[] = "/tmp/nds-zarr2-replace-XXXXXX", url[128];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(url, sizeof url, "file://%s/", dir);
    uint16_t *one = malloc(2 * N), *two = malloc(2 * N), out[20 * 30];
    for (size_t i = 0; i < N; i++) {
        one[i] = (uint16_t)i;                  /* compresses well */
        two[i] = (uint16_t)(i * 2654435761u >> 7); /* hardly */
    }
    nds_array *a, *w;
    const char *spec = "{\"driver\":\"zarr\",\"kvstore\":\"%s\",\"metadata\":{\"shape\":[64,64],"
                       "\"chunks\":[64,64],\"dtype\":\"<u2\",\"compressor\":{\"id\":\"blosc\","
                       "\"cname\":\"lz4\",\"clevel\":5,\"shuffle\":1,\"blocksize\":1024}},"
                       "\"create\":true}";
    NDS_OK(open_spec(&w, spec, url));
    write_all(w, one);
    NDS_OK(nds_array_open(&a, url, NULL));
    rewriter rw = {w, {one, two}, 0};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, rewrite_chunk, &rw), 0);
    nds_box box;
    uint64_t shape[2] = {64, 64};
    NDS_OK(nds_box_parse(&box, "[30:50, 20:50]", 2, shape));
    for (int k = 0; k < 400; k++) {
        NDS_OK(nds_array_read(a, &box, out, NULL));
        const uint16_t *want = out[0] == one[30 * 64 + 20] ? one : two;
        for (size_t i = 0; i < 20; i++)
            ck_assert_msg(memcmp(out + i * 30, want + (30 + i) * 64 + 20, 2 * 30) == 0,
                          "read %d: row %zu mixes versions", k, 30 + i);
    }
    rw.stop = 1;
    pthread_join(th, NULL);
    nds_array_free(a);
    nds_array_free(w);
    nds_test_rmtree(dir);
    free(one);
    free(two);
}
END_TEST

/* Reads whose box spans a few chunks along the last dimension decode them together and write
 * whole output rows (lib/array_read.c read_run): full reads and random boxes (with and without
 * steps) against the values written, with chunks missing in the middle of runs (fill value),
 * partial edge chunks, whole and partial (blosc, zstd) decodes; a corrupt chunk in a run is an error
 * that names it. */
START_TEST(reads_in_runs_along_rows) {
    static const char *const compressors[] = {
        "{\"id\":\"zstd\",\"level\":1}",
        "{\"id\":\"blosc\",\"cname\":\"lz4\",\"clevel\":5,\"shuffle\":1,\"blocksize\":1024}"};
    static const char *const missing[] = {"0.0.0", "2.3.1", "5.5.4", "3.0.2"};
    enum { X = 24, Y = 30, Z = 200 };
    uint64_t shape[3] = {X, Y, Z};
    uint16_t *v = malloc(sizeof(uint16_t) * X * Y * Z), *out = malloc(sizeof(uint16_t) * X * Y * Z);
    for (int t = 0; t < 2; t++) {
        for (size_t i = 0; i < (size_t)X * Y * Z; i++) v[i] = (uint16_t)(i * 13 + i / 200);
        char path[32], url[64], meta[384];
        snprintf(path, sizeof path, "runs/%d", t);
        snprintf(url, sizeof url, "memory://%s/", path);
        snprintf(meta, sizeof meta,
                 "\"shape\":[%d,%d,%d],\"chunks\":[4,5,48],\"dtype\":\"<u2\",\"fill_value\":9,"
                 "\"compressor\":%s",
                 X, Y, Z, compressors[t]);
        nds_array *a = zarr2_in_memory(path, meta);
        write_all(a, v);
        nds_kvstore *kv;
        NDS_OK(nds_kvstore_open(&kv, url, NULL));
        for (size_t m = 0; m < sizeof missing / sizeof *missing; m++) {
            unsigned cx, cy, cz;
            sscanf(missing[m], "%u.%u.%u", &cx, &cy, &cz);
            NDS_OK(nds_kvstore_delete(kv, missing[m], NULL));
            uint64_t lo[3] = {cx * 4, cy * 5, cz * 48}, hi[3] = {lo[0] + 4, lo[1] + 5, lo[2] + 48};
            set_box_u16(v, shape, lo, hi, 9);
        }
        read_all(a, out);
        ck_assert_msg(memcmp(out, v, sizeof(uint16_t) * X * Y * Z) == 0, "%s: full read",
                      compressors[t]);
        assert_random_boxes_u16(a, v, shape, 80, compressors[t]);
        NDS_OK(nds_kvstore_write(kv, "4.2.3", "garbage", 7, NULL, NULL));
        nds_box box;
        nds_box_full(&box, 3, shape);
        EXPECT_ERR(nds_array_read(a, &box, out, NULL), NDS_ECORRUPT, "4.2.3");
        nds_kvstore_free(kv);
        nds_array_free(a);
    }
    free(v);
    free(out);
}
END_TEST

/* A read whose output is larger than the last-level cache copies with non-temporal stores: runs
 * of chunks along rows (blosc), whole chunks scattered (zstd) and uncompressed chunks copied from
 * their stored values all land where they belong, with missing chunks filled, into a buffer on a
 * cache line and one 16 bytes off it. */
START_TEST(reads_past_the_cache_stream) {
    static const char *const layouts[] = {
        "\"chunks\":[8,16,64],\"compressor\":{\"id\":\"blosc\",\"cname\":\"lz4\",\"clevel\":1,"
        "\"shuffle\":1}",
        "\"chunks\":[8,16,256],\"compressor\":{\"id\":\"zstd\",\"level\":1}",
        "\"chunks\":[8,16,256],\"compressor\":null"};
    enum { Y = 64, Z = 256 };
    size_t x = nds_stream_threshold() / (Y * Z * 2) + 3, n = x * Y * Z; /* past the threshold */
    uint64_t shape[3] = {x, Y, Z};
    uint16_t *v = malloc(n * 2), *base = aligned_alloc(64, n * 2 + 64);
    for (size_t t = 0; t < sizeof layouts / sizeof *layouts; t++) {
        for (size_t i = 0; i < n; i++) v[i] = (uint16_t)(i * 7 + i / 1000);
        char path[32], url[64], meta[384];
        snprintf(path, sizeof path, "stream/%zu", t);
        snprintf(url, sizeof url, "memory://%s/", path);
        snprintf(meta, sizeof meta, "\"shape\":[%zu,%d,%d],\"dtype\":\"<u2\",\"fill_value\":5,%s", x,
                 Y, Z, layouts[t]);
        nds_array *a = zarr2_in_memory(path, meta);
        write_all(a, v);
        nds_kvstore *kv;
        NDS_OK(nds_kvstore_open(&kv, url, NULL));
        /* A chunk missing (filled): for the runs, one between two others along the row. */
        NDS_OK(nds_kvstore_delete(kv, t == 0 ? "3.1.1" : "3.1.0", NULL));
        uint64_t lo[3] = {24, 16, t == 0 ? 64 : 0}, hi[3] = {32, 32, t == 0 ? 128 : 256};
        set_box_u16(v, shape, lo, hi, 5);
        for (size_t off = 0; off <= 8; off += 8) {
            memset(base, 0, n * 2 + 64);
            nds_box box;
            nds_box_full(&box, 3, shape);
            NDS_OK(nds_array_read(a, &box, base + off, NULL));
            ck_assert_msg(memcmp(base + off, v, n * 2) == 0, "layout %zu, offset %zu", t, off * 2);
        }
        nds_kvstore_free(kv);
        nds_array_free(a);
    }
    free(v);
    free(base);
}
END_TEST

/* Uncompressed chunks on file:// with rows of 2 KiB are read straight into the output (read_into):
 * full and partial reads equal what was written (edge chunks, whose stored rows run past the array,
 * take the copying path); a missing chunk reads as fill, a short or long chunk file is corrupt. */
START_TEST(uncompressed_reads_into_place) {
    enum { X = 10, Y = 1536 };
    char dir[] = "/tmp/nds-zarr2-into-XXXXXX", url[128], path[160];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(url, sizeof url, "file://%s/", dir);
    nds_array *a;
    NDS_OK(open_spec(&a, "{\"driver\":\"zarr\",\"kvstore\":\"%s\",\"metadata\":{\"shape\":[%d,%d],"
                         "\"chunks\":[4,512],\"dtype\":\"<f4\",\"compressor\":null,\"fill_value\":-1},"
                         "\"create\":true}", url, X, Y));
    /* Rows go straight into place only into a buffer whose rows start on cache lines: out is one,
     * out + 4 (16 bytes further, where malloc puts large blocks) is read and copied. */
    float *v = malloc(sizeof(float) * X * Y), *base = aligned_alloc(64, sizeof(float) * (X * Y + 16));
    float *out = base;
    for (size_t i = 0; i < (size_t)X * Y; i++) v[i] = (float)i * 0.5f;
    write_all(a, v);
    read_all(a, out);
    ck_assert_int_eq(memcmp(out, v, sizeof(float) * X * Y), 0);
    read_all(a, base + 4);
    ck_assert_int_eq(memcmp(base + 4, v, sizeof(float) * X * Y), 0);
    nds_box box;
    uint64_t shape[2] = {X, Y};
    NDS_OK(nds_box_parse(&box, "[3:9, 100:1400]", 2, shape));
    NDS_OK(nds_array_read(a, &box, out, NULL));
    for (size_t i = 0; i < 6; i++)
        for (size_t j = 0; j < 1300; j++) ck_assert(out[i * 1300 + j] == v[(3 + i) * Y + 100 + j]);
    snprintf(path, sizeof path, "%s/1.1", dir); /* rows 4..7, columns 512..1023 */
    ck_assert_int_eq(unlink(path), 0);
    read_all(a, out);
    for (size_t i = 0; i < X; i++)
        for (size_t j = 0; j < Y; j++) {
            bool gone = i >= 4 && i < 8 && j >= 512 && j < 1024;
            ck_assert(out[i * Y + j] == (gone ? -1.0f : v[i * Y + j]));
        }
    nds_box_full(&box, 2, shape);
    nds_test_write_file(path, v, 100); /* a chunk file cut short */
    EXPECT_ERR(nds_array_read(a, &box, out, NULL), NDS_ECORRUPT, "1.1");
    nds_test_write_file(path, v, 4 * 512 * 4 + 1); /* and one too long */
    EXPECT_ERR(nds_array_read(a, &box, out, NULL), NDS_ECORRUPT, "expected 8192 bytes, found 8193");
    nds_array_free(a);
    nds_kvstore *kv;
    NDS_OK(nds_kvstore_open(&kv, url, NULL));
    NDS_OK(nds_kvstore_delete_range(kv, "", ""));
    nds_kvstore_free(kv);
    rmdir(dir);
    free(v);
    free(base);
}
END_TEST

/* Uncompressed chunks on file:// whose planes are larger than a region's rows in them are read
 * one plane's span at a time (read_ranges), the rows between left unread: random boxes (with and
 * without steps) and one box of a few rows per plane against the values written; a missing chunk
 * reads as fill, a short or long chunk file is corrupt, named. */
START_TEST(uncompressed_regions_read_by_plane) {
    enum { X = 24, Y = 128, Z = 256 };
    char dir[] = "/tmp/nds-zarr2-planes-XXXXXX", url[128], path[160];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(url, sizeof url, "file://%s/", dir);
    nds_array *a;
    NDS_OK(open_spec(&a, "{\"driver\":\"zarr\",\"kvstore\":\"%s\",\"metadata\":{\"shape\":[%d,%d,%d],"
                         "\"chunks\":[8,64,128],\"dtype\":\"<u2\",\"compressor\":null,"
                         "\"fill_value\":4},\"create\":true}",
                     url, X, Y, Z));
    uint64_t shape[3] = {X, Y, Z};
    uint16_t *v = malloc(sizeof(uint16_t) * X * Y * Z), out[5 * 10 * 95];
    for (size_t i = 0; i < (size_t)X * Y * Z; i++) v[i] = (uint16_t)(i * 11 + i / 256);
    write_all(a, v);
    assert_random_boxes_u16(a, v, shape, 80, "planes");
    nds_box box;
    NDS_OK(nds_box_parse(&box, "[2:7, 70:80, 140:235]", 3, shape)); /* 10 rows of 16 KiB planes */
    NDS_OK(nds_array_read(a, &box, out, NULL));
    for (size_t i = 0; i < 5; i++)
        for (size_t j = 0; j < 10; j++)
            ck_assert_int_eq(memcmp(out + (i * 10 + j) * 95, v + ((2 + i) * Y + 70 + j) * Z + 140,
                                    2 * 95), 0);
    snprintf(path, sizeof path, "%s/0.1.1", dir);
    ck_assert_int_eq(unlink(path), 0);
    uint64_t lo[3] = {0, 64, 128}, hi[3] = {8, 128, 256};
    set_box_u16(v, shape, lo, hi, 4);
    NDS_OK(nds_array_read(a, &box, out, NULL));
    ck_assert_int_eq(out[0], 4);
    assert_random_boxes_u16(a, v, shape, 30, "planes, a chunk missing");
    nds_test_write_file(path, v, 1000); /* a chunk file cut short */
    EXPECT_ERR(nds_array_read(a, &box, out, NULL), NDS_ECORRUPT, "0.1.1");
    EXPECT_ERR(nds_array_read(a, &box, out, NULL), NDS_ECORRUPT, "found 1000");
    nds_test_write_file(path, v, 8 * 64 * 128 * 2 + 1); /* and one too long */
    EXPECT_ERR(nds_array_read(a, &box, out, NULL), NDS_ECORRUPT, "expected 131072 bytes, found 131073");
    nds_array_free(a);
    nds_test_rmtree(dir);
    free(v);
}
END_TEST

/* Whole chunks of blosc-lz4 arrays are decoded a block at a time, each block copied into the
 * output while it is in the cache (decode_chunk_pieces): blocks that end inside rows, edge
 * chunks in every dimension, both byte orders, element sizes 1 to 8, ranks 1 to 3, compressed
 * and stored (incompressible) streams, on memory:// and file://, for the full array and a box
 * starting one chunk in; blosclz chunks (decoded whole by c-blosc) alike. A block whose lz4
 * stream is damaged is an error naming the chunk and the block. */
typedef struct piece_layout {
    const char *dtype, *cname;
    size_t item, rank;
    uint64_t shape[3], chunks[3];
    int blocksize;
} piece_layout;

/* Bytes that compress in the first half of the array and do not in the second. */
static void fill_half_smooth(uint8_t *v, size_t n) {
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        v[i] = i < n / 2 ? (uint8_t)(i / 61) : (uint8_t)x;
    }
}

/* The box [start, shape) of v into out. */
static void expected_tail(const piece_layout *l, const uint64_t *start, const uint8_t *v,
                          uint8_t *out) {
    uint64_t ext[3];
    int64_t vs[3], os[3];
    for (size_t d = 0; d < l->rank; d++) ext[d] = l->shape[d] - start[d];
    nds_c_strides(l->rank, l->shape, l->item, vs);
    nds_c_strides(l->rank, ext, l->item, os);
    size_t off = 0;
    for (size_t d = 0; d < l->rank; d++) off += start[d] * (size_t)vs[d];
    nds_strided_copy(l->rank, ext, l->item, out, os, v + off, vs);
}

static void assert_reads_in_pieces(const piece_layout *l, const char *url) {
    size_t n = l->item, rank = l->rank;
    for (size_t d = 0; d < rank; d++) n *= l->shape[d];
    uint8_t *v = malloc(n), *out = malloc(n), *want = malloc(n);
    fill_half_smooth(v, n);
    char shape[64] = "", chunks[64] = "";
    for (size_t d = 0; d < rank; d++) {
        snprintf(shape + strlen(shape), 20, "%s%llu", d ? "," : "", (unsigned long long)l->shape[d]);
        snprintf(chunks + strlen(chunks), 20, "%s%llu", d ? "," : "", (unsigned long long)l->chunks[d]);
    }
    nds_array *a;
    NDS_OK(open_spec(&a,
                     "{\"driver\":\"zarr\",\"kvstore\":\"%s\",\"metadata\":{\"shape\":[%s],"
                     "\"chunks\":[%s],\"dtype\":\"%s\",\"fill_value\":0,\"compressor\":"
                     "{\"id\":\"blosc\",\"cname\":\"%s\",\"clevel\":5,\"shuffle\":1,"
                     "\"blocksize\":%d}},\"create\":true}",
                     url, shape, chunks, l->dtype, l->cname, l->blocksize));
    write_all(a, v);
    read_all(a, out);
    ck_assert_msg(memcmp(out, v, n) == 0, "%s %s %s: full read", url, l->dtype, l->cname);
    nds_box box;
    nds_box_full(&box, rank, l->shape);
    for (size_t d = 0; d < rank; d++) box.start[d] = l->chunks[d];
    size_t tail = l->item;
    for (size_t d = 0; d < rank; d++) tail *= l->shape[d] - box.start[d];
    expected_tail(l, box.start, v, want);
    NDS_OK(nds_array_read(a, &box, out, NULL));
    ck_assert_msg(memcmp(out, want, tail) == 0, "%s %s %s: a box one chunk in", url, l->dtype,
                  l->cname);
    nds_array_free(a);
    free(v);
    free(out);
    free(want);
}

START_TEST(whole_chunks_read_in_pieces) {
    /* c-blosc 1.21 keeps a forced blocksize of 128 and makes 1000 into 65536 for chunks over
     * 64 KiB (and ignores it for smaller ones): 128 gives many blocks too small to split, 1000
     * blocks of 64 KiB split by byte (ending inside rows) and short last blocks. Every array has
     * more chunks along its rows than a run takes. */
    static const piece_layout layouts[] = {
        {"<u2", "lz4", 2, 3, {20, 25, 710}, {7, 9, 70}, 128},
        {"<u2", "lz4", 2, 3, {45, 70, 1150}, {20, 30, 100}, 1000},
        {">u2", "lz4", 2, 3, {45, 70, 1150}, {20, 30, 100}, 1000},
        {"<f8", "lz4", 8, 2, {130, 5000}, {64, 512}, 1000},
        {">f8", "lz4", 8, 2, {130, 5000}, {64, 512}, 1000},
        {">i4", "lz4hc", 4, 2, {50, 3000}, {16, 256}, 128},
        {"|u1", "lz4", 1, 1, {100000}, {9999}, 0},
        {"<u2", "blosclz", 2, 3, {45, 70, 1150}, {20, 30, 100}, 1000},
    };
    char dir[] = "/tmp/nds-zarr2-pieces-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    for (size_t i = 0; i < sizeof layouts / sizeof *layouts; i++) {
        char url[128];
        snprintf(url, sizeof url, "memory://pieces/%zu/", i);
        assert_reads_in_pieces(&layouts[i], url);
        snprintf(url, sizeof url, "file://%s/%zu/", dir, i);
        assert_reads_in_pieces(&layouts[i], url);
    }
    /* Damage block 1 of chunk 0.0.0 of the second array (in its compressible half), after
     * block 0 went out. */
    char url[128];
    snprintf(url, sizeof url, "file://%s/1/", dir);
    size_t len;
    uint8_t *raw = get_raw(url, "0.0.0", &len);
    size_t block1 = (size_t)raw[20] | (size_t)raw[21] << 8 | (size_t)raw[22] << 16;
    ck_assert_uint_lt(block1 + 20, len);
    memset(raw + block1 + 4, 0xff, 16);
    put_raw(url, "0.0.0", raw, len);
    free(raw);
    nds_array *a;
    NDS_OK(nds_array_open(&a, url, NULL));
    uint64_t shape[3] = {45, 70, 1150};
    uint16_t *out = malloc(sizeof(uint16_t) * 45 * 70 * 1150);
    nds_box box;
    nds_box_full(&box, 3, shape);
    EXPECT_ERR(nds_array_read(a, &box, out, NULL), NDS_ECORRUPT, "chunk 0.0.0");
    EXPECT_ERR(nds_array_read(a, &box, out, NULL), NDS_ECORRUPT, "of block 1 (of 2)");
    nds_array_free(a);
    free(out);
    nds_test_rmtree(dir);
}
END_TEST

/* ---- a store that counts its reads ---- */

/* "counting": memory://'s keys, reading into buffers (NDS_KV_CAP_READ_INTO, as file:// does), and
 * counting every read of a value. */
static int counted_reads;

static int counting_parse_url(const char *rest, json_object *spec) {
    return nds_kv_driver_memory.parse_url(rest, spec);
}
static int counting_open(void **state, const json_object *spec) {
    return nds_kv_driver_memory.open(state, spec);
}
static void counting_close(void *state) { nds_kv_driver_memory.close(state); }
static void counting_url_base(void *state, char *buf, size_t cap) {
    (void)state, snprintf(buf, cap, "counting://");
}
static int counting_read(void *s, const char *key, const nds_read_options *o,
                         const nds_byte_range *ranges, size_t n, nds_read_result *out) {
    __atomic_add_fetch(&counted_reads, 1, __ATOMIC_SEQ_CST);
    return nds_kv_driver_memory.read(s, key, o, ranges, n, out);
}
static int counting_write(void *s, const char *key, const struct iovec *iov, size_t iovcnt,
                          const nds_write_options *o, nds_generation *gen) {
    return nds_kv_driver_memory.write(s, key, iov, iovcnt, o, gen);
}
static int counting_list(void *s, const char *prefix, nds_list_fn fn, void *ctx) {
    return nds_kv_driver_memory.list(s, prefix, fn, ctx);
}

static const nds_kv_driver counting_driver = {
    .version = NDS_KV_DRIVER_VERSION,
    .name = "counting",
    .url_scheme = "counting",
    .capabilities = NDS_KV_CAP_ATOMIC_CONDITIONAL_WRITE | NDS_KV_CAP_BYTE_RANGE |
                    NDS_KV_CAP_READ_INTO,
    .parse_url = counting_parse_url,
    .open = counting_open,
    .close = counting_close,
    .url_base = counting_url_base,
    .read = counting_read,
    .write = counting_write,
    .list = counting_list,
};

/* A region inside one chunk, read by the decode plan from a store that reads into buffers: a
 * compressor that reads parts of a value (blosc: header, block index, the blocks) goes through a
 * reader, one that cannot (zstd, gzip) has its value read once, whole - never a probe first
 * (format.h nds_array_meta.decode_caps). The elements are right either way. */
START_TEST(part_reads_read_as_the_codec_can) {
    static const char *const compressors[] = {
        "{\"id\":\"zstd\",\"level\":1}", "{\"id\":\"gzip\",\"level\":1}",
        "{\"id\":\"blosc\",\"cname\":\"lz4\",\"clevel\":5,\"shuffle\":1,\"blocksize\":1024}"};
    enum { N = 32 };
    uint64_t shape[3] = {N, N, N};
    uint16_t *v = malloc(sizeof(uint16_t) * N * N * N);
    ck_assert_ptr_nonnull(v);
    for (size_t i = 0; i < (size_t)N * N * N; i++) v[i] = (uint16_t)(i * 7 + i / 300);
    NDS_OK(nds_kv_driver_register(&counting_driver));
    for (int c = 0; c < 3; c++) {
        nds_array *a;
        NDS_OK(open_spec(&a,
                         "{\"driver\":\"zarr\",\"kvstore\":\"counting://cnt/%d/\",\"metadata\":"
                         "{\"shape\":[%d,%d,%d],\"chunks\":[%d,%d,%d],\"dtype\":\"<u2\","
                         "\"fill_value\":0,\"compressor\":%s},\"create\":true}",
                         c, N, N, N, N, N, N, compressors[c]));
        write_all(a, v);
        nds_box box;
        NDS_OK(nds_box_parse(&box, "[20:22, 5:9, 3:30]", 3, shape));
        uint16_t out[2 * 4 * 27];
        __atomic_store_n(&counted_reads, 0, __ATOMIC_SEQ_CST);
        NDS_OK(nds_array_read_with_plan(a, &box, out, NULL, NDS_READ_PLAN_DECODE,
                                        NDS_READ_RUNS_OFF));
        int reads = __atomic_load_n(&counted_reads, __ATOMIC_SEQ_CST);
        if (c < 2)
            ck_assert_msg(reads == 1, "%s: %d reads of one chunk, want 1", compressors[c], reads);
        else
            ck_assert_msg(reads >= 3, "blosc: %d reads, want the header, index and blocks", reads);
        size_t k = 0;
        for (size_t x = 20; x < 22; x++)
            for (size_t y = 5; y < 9; y++)
                for (size_t z = 3; z < 30; z++, k++)
                    ck_assert_uint_eq(out[k], v[(x * N + y) * N + z]);
        nds_array_free(a);
    }
    free(v);
}
END_TEST

int main(void) {
    Suite *s = suite_create("zarr2_reads");
    TCase *tc = tcase_create("zarr2_reads");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, blosc_partial_reads);
    tcase_add_test(tc, partial_reads_see_one_version);
    tcase_add_test(tc, reads_in_runs_along_rows);
    tcase_add_test(tc, reads_past_the_cache_stream);
    tcase_add_test(tc, uncompressed_reads_into_place);
    tcase_add_test(tc, uncompressed_regions_read_by_plane);
    tcase_add_test(tc, whole_chunks_read_in_pieces);
    tcase_add_test(tc, part_reads_read_as_the_codec_can);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
