/* The neuroglancer sharded format (formats/precomputed_shard.c) through the precomputed driver:
 * exact bytes of a hand-built shard, every hash / encoding option written and read back, writes
 * to part of a shard box (only the chunks they reach decoded and encoded, the rest kept unread),
 * hashed volumes read (their writes: test_precomputed_hashed.c), corrupt shard files refused with
 * clear errors, the shard gzip encoding against zlib, and concurrent writers. Split from
 * test_precomputed.c, which keeps the unsharded format, the codecs and info handling. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "support_check.h"
#include "support_format.h"
#include "support_precomputed.h"
#include "ndstore/sys/format.h"
#include "../../formats/precomputed_metadata.h"
#include "../../formats/precomputed_shard.h"

/* ---- sharded format -------------------------------------------------------------------------- */

static void put64le(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

#define TINY_SHARDED                                                                               \
    "\"multiscale_metadata\":{\"data_type\":\"uint8\",\"num_channels\":1},\"scale_metadata\":{"    \
    "\"size\":[2,1,1],\"chunk_size\":[1,1,1],\"sharding\":{\"@type\":\"neuroglancer_uint64_"       \
    "sharded_v1\","                                                                                \
    "\"preshift_bits\":0,\"minishard_bits\":1,\"shard_bits\":0,\"hash\":\"identity\"}}"

/* The shard file of a two-chunk volume, byte by byte as sharded.md describes it. */
static void tiny_shard(uint8_t *f) {
    memset(f, 0, 82);
    put64le(f + 0, 1), put64le(f + 8, 25);    /* minishard 0 index at [32 + 1, 32 + 25) */
    put64le(f + 16, 26), put64le(f + 24, 50); /* minishard 1 index at [32 + 26, 32 + 50) */
    f[32] = 0xaa;                             /* chunk 0 */
    put64le(f + 33, 0), put64le(f + 41, 0), put64le(f + 49, 1);  /* id 0, offset 0, size 1 */
    f[57] = 0xbb;                                                /* chunk 1 */
    put64le(f + 58, 1), put64le(f + 66, 25), put64le(f + 74, 1); /* id 1, offset 25, size 1 */
}

START_TEST(shard_exact_bytes) {
    nds_array *a;
    NDS_OK(open_spec(&a,
                     "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"memory://pc_tiny/\","
                     "\"create\":true," TINY_SHARDED "}"));
    uint64_t chunks[4];
    nds_array_chunk_shape(a, chunks);
    ck_assert_uint_eq(chunks[0], 2); /* one shard box: both chunks */
    nds_box box;
    whole(a, &box);
    uint8_t in[2] = {0xaa, 0xbb}, out[2];
    NDS_OK(nds_array_write(a, &box, in, NULL));
    size_t len;
    uint8_t *f = get_raw("memory://pc_tiny/", "1_1_1/0.shard", &len), want[82];
    tiny_shard(want);
    ck_assert_uint_eq(len, 82);
    ck_assert(memcmp(f, want, 82) == 0);
    free(f);
    NDS_OK(nds_array_read(a, &box, out, NULL));
    ck_assert(out[0] == 0xaa && out[1] == 0xbb);
    nds_array_free(a);
}
END_TEST

typedef struct shard_case {
    unsigned pre, mini, shard;
    const char *index_enc, *data_enc, *hash;
} shard_case;

/* Every writable layout (identity hash with shards that are boxes; any hash with a single shard
 * file) and encoding option: written whole, read back, partly rewritten, verified. */
START_TEST(shard_roundtrip) {
    static const shard_case cases[] = {
        {0, 0, 7, "raw", "raw", "identity"},
        {1, 2, 4, "gzip", "raw", "identity"},
        {2, 1, 6, "raw", "gzip", "identity"},
        {0, 3, 10, "gzip", "gzip", "identity"},
        {4, 0, 3, "gzip", "gzip", "identity"},
        {7, 2, 0, "raw", "gzip", "identity"},
        {3, 3, 1, "raw", "raw", "identity"},
        {0, 3, 0, "gzip", "raw", "murmurhash3_x86_128"},
        {2, 2, 0, "raw", "gzip", "murmurhash3_x86_128"},
        {1, 0, 0, "gzip", "gzip", "murmurhash3_x86_128"},
    };
    static const char *const encodings[] = {"\"encoding\":\"raw\"",
                                            "\"encoding\":\"compressed_segmentation\","
                                            "\"compressed_segmentation_block_size\":[4,4,2]"};
    for (size_t e = 0; e < 2; e++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            const shard_case *c = &cases[i];
            char url[64];
            snprintf(url, sizeof url, "memory://pc_sh_%zu_%zu/", e, i);
            nds_array *a;
            NDS_OK(open_spec(
                &a,
                "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"%s\",\"create\":true,"
                "\"multiscale_metadata\":{\"data_type\":\"uint32\",\"num_channels\":2},"
                "\"scale_metadata\":{\"size\":[37,29,11],\"chunk_size\":[8,8,4],%s,"
                "\"sharding\":{\"@type\":\"neuroglancer_uint64_sharded_v1\",\"preshift_bits\":%u,"
                "\"minishard_bits\":%u,\"shard_bits\":%u,\"hash\":\"%s\","
                "\"minishard_index_encoding\":\"%s\",\"data_encoding\":\"%s\"}}}",
                url, encodings[e], c->pre, c->mini, c->shard, c->hash, c->index_enc, c->data_enc));
            nds_box box;
            whole(a, &box);
            uint64_t shape[4] = {37, 29, 11, 2};
            size_t n = 37 * 29 * 11 * 2;
            uint32_t *in = malloc(n * 4), *out = malloc(n * 4);
            fill_pattern((uint8_t *)in, shape, 4, 0xffffffff);
            NDS_OK(nds_array_write(a, &box, in, NULL));
            NDS_OK(nds_array_read(a, &box, out, NULL));
            ck_assert_msg(memcmp(in, out, n * 4) == 0, "case %zu/%zu", e, i);
            nds_box part;
            NDS_OK(nds_box_parse(&part, "[3:20:2, 5:6, 2:9, 1]", 4, shape));
            uint32_t ones[9 * 1 * 7];
            for (size_t k = 0; k < 63; k++) ones[k] = 0xabcdef00u + (uint32_t)k;
            NDS_OK(nds_array_write(a, &part, ones, NULL));
            NDS_OK(nds_array_read(a, &box, out, NULL));
            for (size_t k = 0, x = 3; x < 20; x += 2)
                for (size_t z = 2; z < 9; z++, k++) in[((x * 29 + 5) * 11 + z) * 2 + 1] = ones[k];
            ck_assert_msg(memcmp(in, out, n * 4) == 0, "case %zu/%zu after a partial write", e, i);
            uint64_t checked, bad;
            NDS_OK(nds_array_verify(a, NULL, NULL, &checked, &bad));
            ck_assert_uint_eq(bad, 0);
            ck_assert_uint_eq(checked, (uint64_t)count_keys(url, "1_1_1/"));
            ck_assert_uint_ge(checked, 1);
            nds_array_free(a);
            NDS_OK(
                open_spec(&a, "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"%s\"}", url));
            memset(out, 0, n * 4);
            NDS_OK(nds_array_read(a, &box, out, NULL));
            ck_assert(memcmp(in, out, n * 4) == 0);
            nds_array_free(a);
            free(in);
            free(out);
        }
}
END_TEST

/* The one shard file under scale key 1_1_1/ of url, into *key (cap bytes). */
static int first_key_fn(void *ctx, const char *key, uint64_t size) {
    (void)size;
    snprintf(ctx, 256, "%s", key);
    return 0;
}

/* A write to part of a shard box decodes only the chunks it changes in part and encodes only the
 * chunks its bounds reach; the others keep their stored bytes, unread. Seen through a chunk whose
 * stored gzip bytes are made corrupt: writes that do not reach it, or that cover it whole,
 * succeed (the second replaces it); a write that changes it in part fails naming it. Reads equal
 * a model after every write that succeeds, and a box left all 0 deletes the shard. */
START_TEST(shard_box_partial_writes) {
    enum { X = 16, Y = 16, Z = 8 };
    const char *url = "memory://pc_boxpart/";
    nds_array *a;
    NDS_OK(open_spec(&a,
                     "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"%s\",\"create\":true,"
                     "\"multiscale_metadata\":{\"data_type\":\"uint16\",\"num_channels\":1},"
                     "\"scale_metadata\":{\"size\":[16,16,8],\"chunk_size\":[8,8,4],"
                     "\"encoding\":\"raw\",\"sharding\":{\"@type\":"
                     "\"neuroglancer_uint64_sharded_v1\",\"preshift_bits\":3,\"minishard_bits\":0,"
                     "\"shard_bits\":0,\"hash\":\"identity\",\"minishard_index_encoding\":\"raw\","
                     "\"data_encoding\":\"gzip\"}}}",
                     url));
    uint64_t shape[4] = {X, Y, Z, 1};
    uint16_t v[X * Y * Z], out[X * Y * Z], box[X * Y * Z];
    for (size_t i = 0; i < X * Y * Z; i++) v[i] = (uint16_t)(1 + i * 5);
    nds_box all;
    whole(a, &all);
    NDS_OK(nds_array_write(a, &all, v, NULL));
    /* Corrupt the crc32 of chunk (1, 1, 1) (x 8-15, y 8-15, z 4-7): Morton id 7. */
    char key[256] = "", full[300];
    nds_kvstore *kv;
    NDS_OK(nds_kvstore_open(&kv, url, NULL));
    NDS_OK(nds_kvstore_list(kv, "1_1_1/", first_key_fn, key));
    ck_assert_msg(key[0] != 0, "no shard file");
    snprintf(full, sizeof full, "%s", key);
    size_t len;
    uint8_t *f = get_raw(url, full, &len);
    nds_pc_sharding sh = {true, 3, 0, 0, false, false, true};
    nds_pc_chunk_ref *refs;
    size_t n;
    NDS_OK(nds_pc_shard_parse(&sh, 0, f, len, 1u << 20, &refs, &n));
    ck_assert_uint_eq(n, 8);
    for (size_t i = 0; i < n; i++)
        if (refs[i].id == 7) f[refs[i].end - 8] ^= 0x5a; /* the gzip member's crc32 */
    free(refs);
    NDS_OK(nds_kvstore_write(kv, full, f, len, NULL, NULL));
    free(f);
    const struct {
        const char *region;
        int fails; /* the write changes the corrupt chunk in part */
    } w[] = {
        {"[1:3, 2:7, 0:4, :]", 0},    /* inside chunk (0, 0, 0) */
        {"[0:8:3, 8:16, 4:8, :]", 0}, /* chunk (0, 1, 1), strided */
        {"[6:10, 6:10, 2:6, :]", 1},  /* reaches all 8 chunks, (1, 1, 1) in part */
        {"[8:16, 8:16, 4:8, :]", 0},  /* covers (1, 1, 1) whole: replaced, never read */
        {"[9:12, 8:16, 4:8, :]", 0},  /* now (1, 1, 1) reads again */
    };
    for (size_t k = 0; k < sizeof w / sizeof *w; k++) {
        nds_box b;
        NDS_OK(nds_box_parse(&b, w[k].region, 4, shape));
        size_t m = 0;
        for (uint64_t x = b.start[0]; x < b.stop[0]; x += b.step[0])
            for (uint64_t y = b.start[1]; y < b.stop[1]; y += b.step[1])
                for (uint64_t z = b.start[2]; z < b.stop[2]; z += b.step[2]) {
                    box[m] = (uint16_t)(1000 + k * 100 + m);
                    if (!w[k].fails) v[(x * Y + y) * Z + z] = box[m];
                    m++;
                }
        if (w[k].fails) {
            EXPECT_ERR(nds_array_write(a, &b, box, NULL), NDS_ECORRUPT, "chunk 7");
            continue;
        }
        NDS_OK(nds_array_write(a, &b, box, NULL));
        if (k < 3) { /* the corrupt chunk is still there, as it was */
            nds_box c;
            NDS_OK(nds_box_parse(&c, "[8:16, 8:16, 4:8, :]", 4, shape));
            EXPECT_ERR(nds_array_read(a, &c, out, NULL), NDS_ECORRUPT, "chunk 1,1,1");
            NDS_OK(nds_box_parse(&c, "[0:8, :, :, :]", 4, shape));
            NDS_OK(nds_array_read(a, &c, out, NULL));
            ck_assert_msg(memcmp(out, v, sizeof out / 2) == 0, "after write %s", w[k].region);
        } else {
            NDS_OK(nds_array_read(a, &all, out, NULL));
            ck_assert_msg(memcmp(out, v, sizeof out) == 0, "after write %s", w[k].region);
        }
    }
    memset(box, 0, sizeof box); /* zero in two partial writes: the shard goes */
    nds_box b;
    NDS_OK(nds_box_parse(&b, "[0:16, 0:16, 0:4, :]", 4, shape));
    NDS_OK(nds_array_write(a, &b, box, NULL));
    ck_assert_int_eq(count_keys(url, "1_1_1/"), 1);
    NDS_OK(nds_box_parse(&b, "[0:16, 0:16, 4:8, :]", 4, shape));
    NDS_OK(nds_array_write(a, &b, box, NULL));
    ck_assert_int_eq(count_keys(url, "1_1_1/"), 0);
    nds_kvstore_free(kv);
    nds_array_free(a);
}
END_TEST

/* A chunk clipped at the volume's edge that a partial write leaves all zero inside the volume
 * leaves its shard (its part past the edge is never taken for data). */
START_TEST(shard_box_edge_chunk_zeroed) {
    const char *url = "memory://pc_boxedge/";
    nds_array *a;
    NDS_OK(open_spec(&a,
                     "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"%s\",\"create\":true,"
                     "\"multiscale_metadata\":{\"data_type\":\"uint16\",\"num_channels\":1},"
                     "\"scale_metadata\":{\"size\":[12,16,8],\"chunk_size\":[8,8,4],"
                     "\"encoding\":\"raw\",\"sharding\":{\"@type\":"
                     "\"neuroglancer_uint64_sharded_v1\",\"preshift_bits\":3,\"minishard_bits\":0,"
                     "\"shard_bits\":0,\"hash\":\"identity\",\"minishard_index_encoding\":\"raw\","
                     "\"data_encoding\":\"raw\"}}}",
                     url));
    uint64_t shape[4] = {12, 16, 8, 1};
    uint16_t v[12 * 16 * 8];
    for (size_t i = 0; i < sizeof v / 2; i++) v[i] = (uint16_t)(7 + i);
    nds_box all, edge;
    whole(a, &all);
    NDS_OK(nds_array_write(a, &all, v, NULL));
    /* Leave non-zero bytes in this thread's chunk buffer (a one-task write runs on the calling
     * thread), where the shard box's part past the edge would be taken from if it were not
     * decoded. */
    nds_array *other;
    NDS_OK(open_spec(&other, "{\"driver\":\"zarr\",\"kvstore\":\"memory://pc_boxedge_other/\","
                             "\"metadata\":{\"shape\":[8192],\"chunks\":[8192],\"dtype\":\"<u2\","
                             "\"compressor\":null},\"create\":true}"));
    uint16_t ones[8192];
    for (size_t i = 0; i < 8192; i++) ones[i] = 0xaaaa;
    nds_box ob;
    whole(other, &ob);
    NDS_OK(nds_array_write(other, &ob, ones, NULL));
    nds_array_free(other);
    memset(v, 0, sizeof v);
    NDS_OK(nds_box_parse(&edge, "[8:12, 0:8, 0:4, :]", 4, shape)); /* chunk (1, 0, 0), clipped */
    NDS_OK(nds_array_write(a, &edge, v, NULL));
    char key[256] = "";
    nds_kvstore *kv;
    NDS_OK(nds_kvstore_open(&kv, url, NULL));
    NDS_OK(nds_kvstore_list(kv, "1_1_1/", first_key_fn, key));
    size_t len, n;
    uint8_t *f = get_raw(url, key, &len);
    nds_pc_sharding sh = {true, 3, 0, 0, false, false, false};
    nds_pc_chunk_ref *refs;
    NDS_OK(nds_pc_shard_parse(&sh, 0, f, len, 1u << 20, &refs, &n));
    ck_assert_uint_eq(n, 7);
    for (size_t i = 0; i < n; i++) ck_assert_uint_ne(refs[i].id, 1); /* Morton id of (1, 0, 0) */
    free(refs);
    free(f);
    nds_kvstore_free(kv);
    nds_array_free(a);
}
END_TEST

/* Writes a volume's chunks (raw, uint16, 1 channel) into shard files directly, as another writer
 * would, for shardings the driver only reads. */
static void write_shards_by_hand(const char *url, const nds_pc_sharding *s, const uint64_t *size,
                                 const uint64_t *chunk, const uint16_t *vol) {
    nds_pc_grid g;
    nds_pc_grid_init(&g, size, chunk);
    size_t total = (size_t)(g.grid[0] * g.grid[1] * g.grid[2]), k = 0;
    nds_pc_shard_chunk *all = calloc(total, sizeof *all);
    uint64_t *shards = calloc(total, sizeof *shards);
    for (uint64_t gz = 0; gz < g.grid[2]; gz++)
        for (uint64_t gy = 0; gy < g.grid[1]; gy++)
            for (uint64_t gx = 0; gx < g.grid[0]; gx++, k++) {
                uint64_t cell[3] = {gx, gy, gz}, e[3], mini;
                for (int d = 0; d < 3; d++)
                    e[d] = size[d] - cell[d] * chunk[d] < chunk[d] ? size[d] - cell[d] * chunk[d]
                                                                   : chunk[d];
                uint16_t *buf = malloc(e[0] * e[1] * e[2] * 2);
                for (uint64_t z = 0; z < e[2]; z++)
                    for (uint64_t y = 0; y < e[1]; y++)
                        for (uint64_t x = 0; x < e[0]; x++) {
                            uint64_t X = gx * chunk[0] + x, Y = gy * chunk[1] + y,
                                     Z = gz * chunk[2] + z;
                            buf[x + e[0] * (y + e[1] * z)] = vol[(X * size[1] + Y) * size[2] + Z];
                        }
                all[k] = (nds_pc_shard_chunk){nds_pc_morton(&g, cell), (uint8_t *)buf,
                                              e[0] * e[1] * e[2] * 2};
                nds_pc_shard_of(s, all[k].id, &shards[k], &mini);
            }
    nds_pc_shard_chunk *group = calloc(total, sizeof *group);
    for (size_t i = 0; i < total; i++) {
        bool first = true;
        for (size_t j = 0; j < i; j++) first = first && shards[j] != shards[i];
        if (!first) continue;
        size_t m = 0;
        for (size_t j = 0; j < total; j++)
            if (shards[j] == shards[i]) group[m++] = all[j];
        nds_buf f = {0};
        char key[128];
        NDS_OK(nds_pc_shard_build(s, group, m, &f));
        NDS_OK(nds_pc_shard_key("1_1_1", s, shards[i], key, sizeof key));
        put_raw(url, key, f.data, f.len);
        nds_buf_dispose(&f);
    }
    for (size_t i = 0; i < total; i++) free((void *)all[i].data);
    free(all);
    free(group);
    free(shards);
}

/* Hashed (murmurhash3) and wrapping shard layouts written by another writer read back; writing
 * the same volume over them leaves every shard file byte for byte as it was (more in
 * test_precomputed_hashed.c). */
START_TEST(shard_hashed_layouts_read) {
    static const struct {
        const char *hash;
        unsigned pre, mini, shard;
        bool gz;
    } cases[] = {
        {"murmurhash3_x86_128", 0, 2, 3, false},
        {"murmurhash3_x86_128", 2, 1, 2, true},
        {"identity", 0, 1, 2, true},
    };
    uint64_t size[3] = {30, 17, 9}, chunk[3] = {4, 4, 4}, shape[4] = {30, 17, 9, 1};
    size_t n = 30 * 17 * 9;
    uint16_t *vol = malloc(n * 2), *out = malloc(n * 2);
    fill_pattern((uint8_t *)vol, shape, 2, 0xffff);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char url[64];
        snprintf(url, sizeof url, "memory://pc_ro%zu/", i);
        nds_array *a;
        NDS_OK(open_spec(
            &a,
            "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"%s\",\"create\":true,"
            "\"schema\":{\"dtype\":\"uint16\",\"domain\":{\"shape\":[30,17,9,1]},"
            "\"chunk_layout\":{\"chunk\":{\"shape\":[4,4,4,1]}}},\"scale_metadata\":{\"sharding\":"
            "{\"@type\":\"neuroglancer_uint64_sharded_v1\",\"preshift_bits\":%u,\"minishard_bits\":"
            "%u,"
            "\"shard_bits\":%u,\"hash\":\"%s\",\"minishard_index_encoding\":\"%s\","
            "\"data_encoding\":\"%s\"}}}",
            url, cases[i].pre, cases[i].mini, cases[i].shard, cases[i].hash,
            cases[i].gz ? "gzip" : "raw", cases[i].gz ? "gzip" : "raw"));
        nds_pc_sharding s = {
            true,        cases[i].pre, cases[i].mini, cases[i].shard, cases[i].hash[0] == 'm',
            cases[i].gz, cases[i].gz};
        write_shards_by_hand(url, &s, size, chunk, vol);
        nds_box box;
        whole(a, &box);
        NDS_OK(nds_array_read(a, &box, out, NULL));
        ck_assert_msg(memcmp(vol, out, n * 2) == 0, "case %zu", i);
        uint64_t shards = (uint64_t)1 << cases[i].shard;
        uint8_t *before[8] = {0};
        size_t lens[8] = {0};
        for (uint64_t sh = 0; sh < shards; sh++) {
            char key[64];
            NDS_OK(nds_pc_shard_key("1_1_1", &s, sh, key, sizeof key));
            before[sh] = get_raw(url, key, &lens[sh]);
        }
        NDS_OK(nds_array_write(a, &box, vol, NULL));
        for (uint64_t sh = 0; sh < shards; sh++) {
            char key[64];
            size_t len = 0;
            NDS_OK(nds_pc_shard_key("1_1_1", &s, sh, key, sizeof key));
            uint8_t *after = get_raw(url, key, &len);
            ck_assert_msg((before[sh] == NULL) == (after == NULL), "case %zu shard %s", i, key);
            ck_assert(!after || (len == lens[sh] && memcmp(after, before[sh], len) == 0));
            free(after);
            free(before[sh]);
        }
        nds_array_free(a);
    }
    free(vol);
    free(out);
}
END_TEST

typedef struct verify_msg {
    char text[1024];
} verify_msg;

static int keep_message(void *ctx, const char *key, int status, const char *message) {
    (void)key, (void)status;
    snprintf(((verify_msg *)ctx)->text, sizeof((verify_msg *)ctx)->text, "%s", message);
    return 0;
}

/* Corrupt shard files: both read paths (byte ranges for reads, the whole shard for writes and
 * verify) give NDS_ECORRUPT with a message saying what is wrong, never a crash. */
START_TEST(shard_corrupt) {
    static const struct {
        const char *what;
        size_t at, value_at; /* put64le(f + at, value) */
        uint64_t value;
        size_t len; /* file length (82 = whole) */
        const char *read_msg, *verify_msg;
    } cases[] = {
        {"truncated to 20 bytes", 0, 0, 1, 20, "past the end",
         "shorter than its 32-byte shard index"},
        {"truncated in chunk 1", 0, 0, 1, 70, "past the end", "past the end"},
        {"index entry past the end", 8, 0, 1000, 82, "past the end", "past the end"},
        {"reversed index entry", 0, 0, 30, 82, "reversed", "reversed"},
        {"index not a multiple of 24", 8, 0, 24, 82, "multiple of 24", "multiple of 24"},
        {"chunk size past the end", 49, 0, 1000, 82, "past the end", "past the end"},
        {"offset overflow", 41, 0, UINT64_MAX - 5, 82, "overflows", "overflows"},
        {"overlapping chunks", 66, 0, 0, 82, NULL, "overlap"}, /* chunk 1 -> chunk 0's byte */
        {"chunk in the wrong minishard", 33, 0, 1, 82, NULL, "belongs to shard 0 minishard 1"},
    };
    uint8_t f[82];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char url[64];
        snprintf(url, sizeof url, "memory://pc_bad%zu/", i);
        nds_array *a;
        NDS_OK(open_spec(&a,
                         "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"%s\",\"create\":"
                         "true," TINY_SHARDED "}",
                         url));
        tiny_shard(f);
        put64le(f + cases[i].at, cases[i].value);
        put_raw(url, "1_1_1/0.shard", f, cases[i].len);
        nds_box box;
        whole(a, &box);
        uint8_t out[2];
        int rc = nds_array_read(a, &box, out, NULL);
        if (cases[i].read_msg) {
            ck_assert_msg(rc == NDS_ECORRUPT, "%s: read gave %d (%s)", cases[i].what, rc,
                          last_message());
            ck_assert_msg(strstr(last_message(), cases[i].read_msg), "%s: %s", cases[i].what,
                          last_message());
            ck_assert_msg(strstr(last_message(), "1_1_1/0.shard"), "%s: %s", cases[i].what,
                          last_message());
        }
        verify_msg m = {""};
        uint64_t checked, bad;
        NDS_OK(nds_array_verify(a, keep_message, &m, &checked, &bad));
        ck_assert_msg(bad == 1, "%s: verify found %llu bad", cases[i].what,
                      (unsigned long long)bad);
        ck_assert_msg(strstr(m.text, cases[i].verify_msg), "%s: %s", cases[i].what, m.text);
        /* A partial write must not overwrite a shard it cannot read. */
        nds_box one;
        NDS_OK(nds_box_parse(&one, "[0:1]", 4, box.stop));
        uint8_t v = 7;
        ck_assert_int_eq(nds_array_write(a, &one, &v, NULL), NDS_ECORRUPT);
        nds_array_free(a);
    }
    /* gzip'd indexes that are not gzip, and a gzip bomb beyond the chunk size. */
    nds_pc_sharding s = {true, 0, 1, 0, false, true, true};
    nds_pc_refs refs;
    ck_assert_int_eq(
        nds_pc_minishard_decode(&s, (const uint8_t *)"not gzip at all", 15, 32, 100, 10, &refs),
        NDS_ECORRUPT);
    ck_assert(strstr(last_message(), "gzip"));
    uint8_t *zeros = calloc(1 << 20, 1);
    nds_buf z = {0}, o = {0};
    NDS_OK(nds_pc_gzip(zeros, 1 << 20, &z));
    ck_assert_int_eq(nds_pc_gunzip(z.data, z.len, 4096, &o), NDS_ECORRUPT);
    ck_assert(strstr(last_message(), "more than 4096 bytes"));
    ck_assert_int_eq(nds_pc_gunzip(z.data, z.len - 3, 1 << 20, &o), NDS_ECORRUPT);
    NDS_OK(nds_pc_gunzip(z.data, z.len, 1 << 20, &o));
    ck_assert_uint_eq(o.len, 1 << 20);
    /* Duplicate ids in one minishard. */
    uint8_t dup[48] = {0};
    put64le(dup + 0, 3), put64le(dup + 8, 0), put64le(dup + 16, 0), put64le(dup + 24, 0);
    put64le(dup + 32, 1), put64le(dup + 40, 1);
    s.index_gzip = false;
    ck_assert_int_eq(nds_pc_minishard_decode(&s, dup, 48, 32, 100, 10, &refs), NDS_ECORRUPT);
    ck_assert(strstr(last_message(), "twice"));
    free(zeros);
    nds_buf_dispose(&z);
    nds_buf_dispose(&o);
}
END_TEST

/* zlib's deflate into a gzip (wbits 31) or zlib (wbits 15) wrapper, with a file name in the gzip
 * header when name is given: an encoder independent of ndstore's. */
static void zlib_deflate(const uint8_t *in, size_t len, int wbits, char *name, nds_buf *out) {
    z_stream z;
    memset(&z, 0, sizeof z);
    ck_assert_int_eq(deflateInit2(&z, 9, Z_DEFLATED, wbits, 8, Z_DEFAULT_STRATEGY), Z_OK);
    gz_header h;
    memset(&h, 0, sizeof h);
    h.name = (Bytef *)name;
    if (name) ck_assert_int_eq(deflateSetHeader(&z, &h), Z_OK);
    out->len = 0;
    NDS_OK(nds_buf_reserve(out, deflateBound(&z, (uLong)len) + 64));
    z.next_in = (Bytef *)in, z.avail_in = (uInt)len;
    z.next_out = out->data, z.avail_out = (uInt)out->cap;
    ck_assert_int_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
    out->len = z.total_out;
    deflateEnd(&z);
}

static void set_le32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* The sharded format's gzip (the registry's gzip codec): plain RFC 1952 streams appended after
 * what out holds, which zlib reads in gzip-only mode; zlib's gzip (header name, level 9) read
 * back; zlib-wrapped streams, forged trailers, a second member with data and trailing bytes refused
 * as NDS_ECORRUPT with a message, without sizing anything by a forged trailer. */
START_TEST(shard_gzip) {
    uint8_t data[5000];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)(i * 7 % 251 < 100 ? 0 : i);
    nds_buf z = {0}, o = {0}, y = {0};
    NDS_OK(nds_buf_append(&z, "prefix", 6));
    NDS_OK(nds_pc_gzip(data, sizeof data, &z));
    ck_assert(memcmp(z.data, "prefix", 6) == 0);
    ck_assert(z.data[6] == 0x1f && z.data[7] == 0x8b && z.data[8] == 8); /* gzip, deflate */
    uLongf n = sizeof data;
    uint8_t back[sizeof data];
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    ck_assert_int_eq(inflateInit2(&zs, 31), Z_OK); /* gzip only */
    zs.next_in = z.data + 6, zs.avail_in = (uInt)(z.len - 6);
    zs.next_out = back, zs.avail_out = (uInt)n;
    ck_assert_int_eq(inflate(&zs, Z_FINISH), Z_STREAM_END);
    ck_assert_uint_eq(zs.total_out, sizeof data);
    ck_assert_uint_eq(zs.avail_in, 0);
    inflateEnd(&zs);
    ck_assert(memcmp(back, data, sizeof data) == 0);
    NDS_OK(nds_pc_gunzip(z.data + 6, z.len - 6, sizeof data, &o));
    ck_assert(o.len == sizeof data && memcmp(o.data, data, sizeof data) == 0);
    /* Exactly at the limit, and one byte below it. */
    ck_assert_int_eq(nds_pc_gunzip(z.data + 6, z.len - 6, sizeof data - 1, &o), NDS_ECORRUPT);
    ck_assert(strstr(last_message(), "more than 4999 bytes"));
    /* zlib's gzip with a file name in the header. */
    zlib_deflate(data, sizeof data, 31, "chunk.raw", &y);
    NDS_OK(nds_pc_gunzip(y.data, y.len, sizeof data, &o));
    ck_assert(o.len == sizeof data && memcmp(o.data, data, sizeof data) == 0);
    /* A zlib stream is not gzip. */
    zlib_deflate(data, sizeof data, 15, NULL, &y);
    ck_assert_int_eq(nds_pc_gunzip(y.data, y.len, sizeof data, &o), NDS_ECORRUPT);
    ck_assert(strstr(last_message(), "not a gzip stream"));
    /* Forged trailers: far beyond what the stream can hold (limit or not), a little more, less. */
    zlib_deflate(data, sizeof data, 31, NULL, &y);
    set_le32(y.data + y.len - 4, 0xfffffff0u);
    ck_assert_int_eq(nds_pc_gunzip(y.data, y.len, SIZE_MAX, &o), NDS_ECORRUPT);
    ck_assert(strstr(last_message(), "trailer says 4294967280 bytes"));
    set_le32(y.data + y.len - 4, sizeof data + 1);
    ck_assert_int_eq(nds_pc_gunzip(y.data, y.len, 1 << 20, &o), NDS_ECORRUPT);
    set_le32(y.data + y.len - 4, sizeof data - 1);
    ck_assert_int_eq(nds_pc_gunzip(y.data, y.len, 1 << 20, &o), NDS_ECORRUPT);
    ck_assert(strstr(last_message(), "gzip"));
    /* Two members with data; trailing bytes; truncated; empty and tiny inputs. */
    zlib_deflate(data, sizeof data, 31, NULL, &y);
    size_t one = y.len;
    NDS_OK(nds_buf_append(&y, y.data, one));
    ck_assert_int_eq(nds_pc_gunzip(y.data, y.len, 1 << 20, &o), NDS_ECORRUPT);
    y.len = one;
    NDS_OK(nds_buf_append(&y, "junk", 4));
    ck_assert_int_eq(nds_pc_gunzip(y.data, y.len, 1 << 20, &o), NDS_ECORRUPT);
    ck_assert_int_eq(nds_pc_gunzip(y.data, one - 5, 1 << 20, &o), NDS_ECORRUPT);
    ck_assert_int_eq(nds_pc_gunzip(y.data, 0, 1 << 20, &o), NDS_ECORRUPT);
    ck_assert_int_eq(nds_pc_gunzip(y.data, 3, 1 << 20, &o), NDS_ECORRUPT);
    /* Nothing in, an empty member out. */
    z.len = 0;
    NDS_OK(nds_pc_gzip(data, 0, &z));
    NDS_OK(nds_pc_gunzip(z.data, z.len, 0, &o));
    ck_assert_uint_eq(o.len, 0);
    nds_buf_dispose(&z);
    nds_buf_dispose(&o);
    nds_buf_dispose(&y);
}
END_TEST

/* Writers of different chunks of one shard, each with its own handle, never lose each other's
 * chunks: every write is a read-modify-write of the shard conditional on its generation. */
typedef struct writer_arg {
    int index;
    int rc;
} writer_arg;

#define CONCURRENT_SPEC                                                                            \
    "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"memory://pc_conc/\"," MS_U16 ","       \
    "\"scale_metadata\":{\"size\":[16,8,8],\"chunk_size\":[4,8,8],\"sharding\":{\"@type\":"        \
    "\"neuroglancer_uint64_sharded_v1\",\"preshift_bits\":0,\"minishard_bits\":1,\"shard_bits\":"  \
    "0,"                                                                                           \
    "\"hash\":\"identity\",\"data_encoding\":\"gzip\"}},\"create\":true,\"open\":true}"

static void *writer(void *p) {
    writer_arg *w = p;
    nds_array *a;
    if ((w->rc = nds_array_open(&a, CONCURRENT_SPEC, NULL))) return NULL;
    uint64_t shape[4] = {16, 8, 8, 2};
    nds_box box;
    char region[64];
    snprintf(region, sizeof region, "[%d:%d]", w->index * 4, w->index * 4 + 4);
    if (!(w->rc = nds_box_parse(&box, region, 4, shape))) {
        uint16_t v[4 * 8 * 8 * 2];
        for (int round = 0; round < 20 && !w->rc; round++) {
            for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
                v[i] = (uint16_t)(w->index * 1000 + round);
            w->rc = nds_array_write(a, &box, v, NULL);
        }
    }
    nds_array_free(a);
    return NULL;
}

START_TEST(shard_concurrent_writers) {
    pthread_t t[4];
    writer_arg w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (writer_arg){i, 0};
        ck_assert_int_eq(pthread_create(&t[i], NULL, writer, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        ck_assert_msg(w[i].rc == 0, "writer %d: %d", i, w[i].rc);
    }
    nds_array *a;
    NDS_OK(nds_array_open(&a, CONCURRENT_SPEC, NULL));
    nds_box box;
    whole(a, &box);
    uint16_t out[16 * 8 * 8 * 2];
    NDS_OK(nds_array_read(a, &box, out, NULL));
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++)
        ck_assert_uint_eq(out[i], (i / (8 * 8 * 2 * 4)) * 1000 + 19);
    ck_assert_int_eq(count_keys("memory://pc_conc/", "1_1_1/"), 1);
    nds_array_free(a);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("precomputed_shard");
    TCase *tc = tcase_create("shard");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, shard_exact_bytes);
    tcase_add_test(tc, shard_roundtrip);
    tcase_add_test(tc, shard_box_partial_writes);
    tcase_add_test(tc, shard_box_edge_chunk_zeroed);
    tcase_add_test(tc, shard_hashed_layouts_read);
    tcase_add_test(tc, shard_corrupt);
    tcase_add_test(tc, shard_gzip);
    tcase_add_test(tc, shard_concurrent_writers);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return nds_test_run(suite()); }
