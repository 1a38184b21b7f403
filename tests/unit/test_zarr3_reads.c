/* The zarr v3 read paths (lib/array_read.c through formats/zarr3*.c): regions of blosc chunks
 * decoded and read block by block, whole blosc chunks handed over a block at a time, sharded
 * arrays read in runs of inner chunks; against the values written, on memory:// and file://
 * stores. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support_check.h"
#include "support_format.h"

/* A new uint16 array of a bytes + blosc-lz4 chain on store t: memory:// (t 0, 1) or file:// under
 * dir (t 2, 3), the bytes codec little-endian for even t and big-endian for odd. */
static nds_array *blosc_array_on(int t, const char *dir, const char *name, const char *shape,
                                 const char *chunks, int blocksize) {
    char url[160], codecs[256];
    if (t < 2)
        snprintf(url, sizeof url, "memory://%s/%d/", name, t);
    else
        snprintf(url, sizeof url, "file://%s/%d/", dir, t);
    snprintf(codecs, sizeof codecs,
             "[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"%s\"}},{\"name\":\"blosc\","
             "\"configuration\":{\"cname\":\"lz4\",\"clevel\":5,\"shuffle\":\"shuffle\","
             "\"typesize\":2,\"blocksize\":%d}}]",
             t % 2 ? "big" : "little", blocksize);
    nds_array *a;
    NDS_OK(open_spec(&a, "{\"driver\":\"zarr3\",\"kvstore\":\"%s\",\"metadata\":%s,"
                         "\"create\":true}",
                     url, zarr3_array_doc(shape, "uint16", chunks, "0", codecs)));
    return a;
}

/* Regions of blosc chunks decode only the blocks that hold them (decode_chunk_part; on file://
 * reading only those blocks' stored bytes, read_chunk_part), with either byte order of the bytes
 * codec. */
START_TEST(blosc_partial_reads) {
    enum { X = 40, Y = 50, Z = 300 };
    uint16_t *v = malloc(sizeof(uint16_t) * X * Y * Z);
    for (size_t i = 0; i < (size_t)X * Y * Z; i++) v[i] = (uint16_t)(i * 5 + i / 77);
    char dir[] = "/tmp/nds-zarr3-part-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    for (int t = 0; t < 4; t++) {
        nds_array *a = blosc_array_on(t, dir, "part", "[40,50,300]", "[16,20,256]", 4096);
        write_all(a, v);
        uint64_t shape[3] = {X, Y, Z};
        assert_random_boxes_u16(a, v, shape, 60, t % 2 ? "big" : "little");
        nds_array_free(a);
    }
    nds_test_rmtree(dir);
    free(v);
}
END_TEST

/* Whole chunks of a bytes + blosc-lz4 chain are decoded a block at a time, each block copied into
 * the output while it is in the cache (decode_chunk_pieces): full reads of arrays with 12
 * chunks along their rows (too many for a run), edge chunks in every dimension, blocks of 64 KiB
 * and a short last one, both byte orders, on memory:// and file://. */
START_TEST(whole_chunks_read_in_pieces) {
    enum { X = 30, Y = 45, Z = 1000 };
    uint16_t *v = malloc(sizeof(uint16_t) * X * Y * Z), *out = malloc(sizeof(uint16_t) * X * Y * Z);
    for (size_t i = 0; i < (size_t)X * Y * Z; i++) v[i] = (uint16_t)(i * 3 + i / 91);
    char dir[] = "/tmp/nds-zarr3-pieces-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    for (int t = 0; t < 4; t++) {
        nds_array *a = blosc_array_on(t, dir, "pieces", "[30,45,1000]", "[20,20,90]", 1000);
        write_all(a, v);
        memset(out, 0, sizeof(uint16_t) * X * Y * Z);
        read_all(a, out);
        ck_assert_msg(memcmp(out, v, sizeof(uint16_t) * X * Y * Z) == 0, "store %d: full read", t);
        nds_array_free(a);
    }
    nds_test_rmtree(dir);
    free(v);
    free(out);
}
END_TEST

/* Sharded arrays read through their inner-chunk grid, in runs along the last dimension (4 inner
 * chunks of a shard per task): full reads and random boxes against the values written, with one
 * shard missing (fill value) and partial shards at the edges. */
START_TEST(sharded_reads_in_runs) {
    enum { X = 20, Y = 18, Z = 60 };
    uint16_t *v = malloc(sizeof(uint16_t) * X * Y * Z), *out = malloc(sizeof(uint16_t) * X * Y * Z);
    for (size_t i = 0; i < (size_t)X * Y * Z; i++) v[i] = (uint16_t)(i * 3 + i / 60);
    nds_array *a = zarr3_in_memory(
        "runs/sharded",
        zarr3_array_doc("[20,18,60]", "uint16", "[8,8,64]", "7",
                  "[{\"name\":\"sharding_indexed\",\"configuration\":{\"chunk_shape\":[4,4,16],"
                  "\"codecs\":[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}},"
                  "{\"name\":\"zstd\",\"configuration\":{\"level\":1,\"checksum\":false}}],"
                  "\"index_codecs\":[{\"name\":\"bytes\",\"configuration\":{\"endian\":"
                  "\"little\"}},{\"name\":\"crc32c\"}]}}]"));
    write_all(a, v);
    nds_kvstore *kv;
    NDS_OK(nds_kvstore_open(&kv, "memory://runs/sharded/", NULL));
    NDS_OK(nds_kvstore_delete(kv, "c/1/0/0", NULL));
    nds_kvstore_free(kv);
    uint64_t shape[3] = {X, Y, Z}, lo[3] = {8, 0, 0}, hi[3] = {16, 8, Z};
    set_box_u16(v, shape, lo, hi, 7); /* the missing shard c/1/0/0 */
    read_all(a, out);
    ck_assert_int_eq(memcmp(out, v, sizeof(uint16_t) * X * Y * Z), 0);
    assert_random_boxes_u16(a, v, shape, 60, "sharded");
    nds_array_free(a);
    free(v);
    free(out);
}
END_TEST

int main(void) {
    Suite *s = suite_create("zarr3_reads");
    TCase *tc = tcase_create("zarr3_reads");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, blosc_partial_reads);
    tcase_add_test(tc, whole_chunks_read_in_pieces);
    tcase_add_test(tc, sharded_reads_in_runs);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
