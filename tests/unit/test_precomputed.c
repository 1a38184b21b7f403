/* The neuroglancer precomputed format (formats/precomputed*.c) and its codecs: MurmurHash3 and
 * compressed Morton codes against published vectors, compressed_segmentation (hand-built bytes, the
 * FIB-25 fixture bit-exact, corrupt input), jpeg and png chunks, info parsing and spec handling
 * (multiscale creation, scale selection, mismatches), chunk keys with voxel offsets and edge
 * chunks. The sharded format is tested in test_precomputed_shard.c (its hashed writes in
 * test_precomputed_hashed.c). Mostly through the public API on memory:// stores; the format's
 * modules directly where it does not reach. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "support_check.h"
#include "support_format.h"
#include "support_precomputed.h"
#include "ndstore/sys/format.h"
#include "../../formats/precomputed_metadata.h"
#include "../../formats/precomputed_shard.h"
#include "../../formats/codecs/compressed_segmentation.h"
#include "../../formats/codecs/codec_image.h"

extern const nds_format nds_format_precomputed;

/* ---- helpers --------------------------------------------------------------------------------- */

/* The 64^3 uint64 FIB-25 segmentation cube (x fastest), malloc'd. */
static uint64_t *load_fixture(void) {
    char dir[1024], path[1200];
    nds_test_fixtures_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/compressed_segmentation/64x64x64-raw-uint64-segmentation.dat",
             dir);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s (set NDS_FIXTURES)", path);
    uint64_t *v = malloc(64 * 64 * 64 * 8);
    ck_assert_uint_eq(fread(v, 8, 64 * 64 * 64, f), 64 * 64 * 64);
    fclose(f);
    return v;
}

/* ---- hashes and chunk ids -------------------------------------------------------------------- */

/* Vectors published with TensorStore's MurmurHash3_x86_128Hash64Bits test (computed with pymmh3):
 * the 8 little-endian bytes of a key, seeds 0, 1, 2; h1 and h2 (h3 == h4 == h2 here). */
START_TEST(murmurhash_vectors) {
    static const struct {
        uint64_t key;
        uint32_t seed, h1, h2;
    } v[] = {
        {0, 0, 0xe028ae41, 0x4772b084},  {0, 1, 0x5ad58a7e, 0x54337108},
        {0, 2, 0x64010da2, 0x62e8bc17},  {1, 0, 0x16d4ce9a, 0xe8bd67d6},
        {1, 1, 0x4b7ab8c6, 0xeb555955},  {1, 2, 0xeb2301be, 0x48e12494},
        {42, 0, 0x5119f47a, 0xc20b94f9}, {42, 1, 0xd6b51bca, 0xa25ad86b},
        {42, 2, 0x2d83d9c7, 0x082115eb},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        uint8_t b[8];
        uint32_t h[4];
        for (int k = 0; k < 8; k++) b[k] = (uint8_t)(v[i].key >> (8 * k));
        nds_murmurhash3_x86_128(b, 8, v[i].seed, h);
        ck_assert_uint_eq(h[0], v[i].h1);
        ck_assert_uint_eq(h[1], v[i].h2);
        ck_assert_uint_eq(h[2], v[i].h2);
        ck_assert_uint_eq(h[3], v[i].h2);
        if (v[i].seed == 0)
            ck_assert_uint_eq(nds_pc_murmur_u64(v[i].key), (uint64_t)v[i].h2 << 32 | v[i].h1);
    }
    /* A longer input (two blocks and a tail): the reference implementation's value. */
    uint32_t h[4];
    nds_murmurhash3_x86_128("The quick brown fox jumps over the lazy dog", 43, 0, h);
    ck_assert_uint_eq(h[0], 0x2f1583c3);
    ck_assert_uint_eq(h[1], 0xecee2c67);
    ck_assert_uint_eq(h[2], 0x5d7bf66c);
    ck_assert_uint_eq(h[3], 0xe5e91d2c);
}
END_TEST

/* The worked example of a VNC sharded volume: sizes 42943 x 56068 x 82276 in 64^3 chunks (10, 10
 * and 11 Morton bits), block (335, 438, 1024) -> 0x434522d9; preshift 9, minishard 6, shard 16 bits
 * -> shard 0x868a, minishard 0x11. */
START_TEST(compressed_morton) {
    uint64_t size[3] = {42943, 56068, 82276}, chunk[3] = {64, 64, 64}, cell[3] = {335, 438, 1024},
             back[3];
    nds_pc_grid g;
    nds_pc_grid_init(&g, size, chunk);
    ck_assert_uint_eq(g.bits[0], 10);
    ck_assert_uint_eq(g.bits[1], 10);
    ck_assert_uint_eq(g.bits[2], 11);
    uint64_t id = nds_pc_morton(&g, cell);
    ck_assert_uint_eq(id, 0x434522d9);
    nds_pc_morton_cell(&g, id, back);
    ck_assert(memcmp(back, cell, sizeof cell) == 0);
    nds_pc_sharding s = {true, 9, 6, 16, false, true, true};
    uint64_t shard, mini;
    nds_pc_shard_of(&s, id, &shard, &mini);
    ck_assert_uint_eq(shard, 0x868a);
    ck_assert_uint_eq(mini, 0x11);
    char key[64];
    NDS_OK(nds_pc_shard_key("8_8_8", &s, shard, key, sizeof key));
    ck_assert_str_eq(key, "8_8_8/868a.shard");
    /* Dimensions of one chunk take no bits; every id round-trips on a small uneven grid. */
    uint64_t s2[3] = {5, 1, 3}, c2[3] = {1, 1, 1};
    nds_pc_grid_init(&g, s2, c2);
    ck_assert_uint_eq(g.total, 3 + 0 + 2);
    for (uint64_t x = 0; x < 5; x++)
        for (uint64_t z = 0; z < 3; z++) {
            uint64_t c[3] = {x, 0, z};
            nds_pc_morton_cell(&g, nds_pc_morton(&g, c), back);
            ck_assert(memcmp(back, c, sizeof c) == 0);
        }
    /* Bits in order x0, z0, x1, z1, x2: x = 0b101, z = 0b10 -> 1 + 8 + 16. */
    uint64_t c[3] = {5, 0, 2};
    ck_assert_uint_eq(nds_pc_morton(&g, c), 25);
}
END_TEST

/* Shard boxes: identity hash with enough bits gives boxes; hashed or wrapping shards do not. */
START_TEST(shard_boxes) {
    uint64_t size[3] = {256, 256, 256},
             chunk[3] = {32, 32, 32}; /* 8^3 chunks: 3 bits each, 9 total */
    nds_pc_grid g;
    nds_pc_grid_init(&g, size, chunk);
    unsigned n[3];
    nds_pc_sharding s = {true, 2, 2, 5, false, false, false}; /* k = 4: x2 y1 z1 */
    ck_assert(nds_pc_shard_box(&s, &g, n));
    ck_assert_uint_eq(n[0], 2);
    ck_assert_uint_eq(n[1], 1);
    ck_assert_uint_eq(n[2], 1);
    s.shard_bits = 4; /* 2 + 2 + 4 < 9: shard numbers wrap */
    ck_assert(!nds_pc_shard_box(&s, &g, n));
    s.shard_bits = 5;
    s.murmur = true;
    ck_assert(!nds_pc_shard_box(&s, &g, n));
    nds_pc_sharding all = {true, 20, 3, 0, false, false, false}; /* everything in shard 0 */
    ck_assert(nds_pc_shard_box(&all, &g, n));
    ck_assert_uint_eq(n[0] + n[1] + n[2], 9);
    nds_pc_sharding hashed_one = {true, 0,     2,    0,
                                  true, false, false}; /* hashed, but one shard file */
    ck_assert(nds_pc_shard_box(&hashed_one, &g, n));
    ck_assert(n[0] == 3 && n[1] == 3 && n[2] == 3);
}
END_TEST

/* ---- compressed_segmentation ----------------------------------------------------------------- */

static void le32s(uint8_t *out, const uint32_t *w, size_t n) {
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 4; k++) out[4 * i + k] = (uint8_t)(w[i] >> (8 * k));
}

/* A 2x2x1 uint32 volume {5, 7, 5, 7} in one 2x2x1 block, byte by byte as the format describes it.
 */
START_TEST(cseg_exact_bytes) {
    uint32_t in[4] = {5, 7, 5, 7}, out[4] = {0};
    uint64_t vol[3] = {2, 2, 1}, block[3] = {2, 2, 1};
    int64_t st[4] = {1, 2, 4, 4};
    nds_buf enc = {0};
    NDS_OK(nds_cseg_encode(in, 4, vol, st, 1, block, &enc));
    /* channel offset 1; header: table at word 3 (from the channel start), 1 bit; values at word 2;
     * values 0,1,0,1 -> 0b1010; table 5, 7. */
    uint32_t words[] = {1, 3u | 1u << 24, 2, 0xa, 5, 7};
    uint8_t want[sizeof words];
    le32s(want, words, 6);
    ck_assert_uint_eq(enc.len, sizeof want);
    ck_assert(memcmp(enc.data, want, sizeof want) == 0);
    NDS_OK(nds_cseg_decode(enc.data, enc.len, &(nds_cseg_volume){4, vol, 1, block, st}, out));
    ck_assert(memcmp(in, out, sizeof in) == 0);
    /* One distinct value: 0 bits, no value words; identical tables are shared between blocks. */
    uint32_t same[4] = {9, 9, 9, 9};
    uint64_t b1[3] = {1, 1, 1};
    enc.len = 0;
    NDS_OK(nds_cseg_encode(same, 4, vol, st, 1, b1, &enc));
    ck_assert_uint_eq(enc.len, 4 * (1 + 4 * 2 + 1)); /* offset, 4 headers, one shared table */
    nds_buf_dispose(&enc);
}
END_TEST

/* The FIB-25 cube round-trips bit-exactly for several block sizes (uint64, and as uint32). */
START_TEST(cseg_fixture_roundtrip) {
    uint64_t *v = load_fixture(), *back = malloc(64 * 64 * 64 * 8);
    uint64_t vol[3] = {64, 64, 64};
    int64_t st[4] = {1, 64, 4096, 0};
    static const uint64_t blocks[][3] = {{8, 8, 8},    {4, 4, 4}, {16, 16, 16},
                                         {64, 64, 64}, {3, 5, 7}, {1, 2, 64}};
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++) {
        nds_buf enc = {0};
        NDS_OK(nds_cseg_encode(v, 8, vol, st, 1, blocks[i], &enc));
        memset(back, 0xee, 64 * 64 * 64 * 8);
        nds_cseg_volume geom = {8, vol, 1, blocks[i], st};
        NDS_OK(nds_cseg_decode(enc.data, enc.len, &geom, back));
        ck_assert_msg(memcmp(v, back, 64 * 64 * 64 * 8) == 0, "block %zu", i);
        if (i == 0) ck_assert_uint_eq(enc.len, 71348); /* reported in docs/formats.md */
        nds_buf_dispose(&enc);
    }
    uint32_t *v32 = malloc(64 * 64 * 64 * 4), *b32 = malloc(64 * 64 * 64 * 4);
    for (size_t i = 0; i < 64 * 64 * 64; i++) v32[i] = (uint32_t)v[i];
    nds_buf enc = {0};
    uint64_t b8[3] = {8, 8, 8},
             part[3] = {61, 50, 37}; /* a clipped sub-volume, strides of the cube */
    NDS_OK(nds_cseg_encode(v32, 4, part, st, 1, b8, &enc));
    memset(b32, 0, 64 * 64 * 64 * 4);
    NDS_OK(nds_cseg_decode(enc.data, enc.len, &(nds_cseg_volume){4, part, 1, b8, st}, b32));
    for (uint64_t z = 0; z < 37; z++)
        for (uint64_t y = 0; y < 50; y++)
            for (uint64_t x = 0; x < 61; x++)
                ck_assert_uint_eq(b32[x + 64 * y + 4096 * z], v32[x + 64 * y + 4096 * z]);
    nds_buf_dispose(&enc);
    free(v32);
    free(b32);
    free(v);
    free(back);
}
END_TEST

/* Corrupt input: every truncation and a set of broken headers are NDS_ECORRUPT, never a crash. */
START_TEST(cseg_corrupt) {
    uint64_t *v = load_fixture(), *back = malloc(64 * 64 * 64 * 8);
    uint64_t vol[3] = {16, 16, 16}, block[3] = {8, 8, 8};
    int64_t st[4] = {1, 64, 4096, 0};
    nds_buf enc = {0};
    NDS_OK(nds_cseg_encode(v, 8, vol, st, 1, block, &enc));
    for (size_t n = 0; n < enc.len; n += 1 + n / 16) {
        int rc = nds_cseg_decode(enc.data, n, &(nds_cseg_volume){8, vol, 1, block, st}, back);
        ck_assert_msg(rc == NDS_ECORRUPT, "truncated to %zu: %d", n, rc);
    }
    uint8_t *bad = malloc(enc.len);
    struct {
        size_t at;
        uint8_t value;
        const char *msg;
    } cases[] = {
        {3, 0xff, "channel 0 starts"},                            /* channel offset past the end */
        {7, 3, "3-bit indices"},                                  /* bit width not a power of two */
        {7, 64, "64-bit indices"},     {8, 0xff, "past the end"}, /* values offset past the end */
        {6, 0xff, "lookup table"},                                /* table offset past the end */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(bad, enc.data, enc.len);
        bad[cases[i].at] = cases[i].value;
        if (cases[i].at == 8) bad[9] = bad[10] = 0xff;
        nds_cseg_volume geom = {8, vol, 1, block, st};
        ck_assert_int_eq(nds_cseg_decode(bad, enc.len, &geom, back), NDS_ECORRUPT);
        ck_assert_msg(strstr(last_message(), cases[i].msg), "%s", last_message());
    }
    /* An index past its table: the table offset points at the last 8 bytes, bits stay. */
    memcpy(bad, enc.data, enc.len);
    uint32_t words = (uint32_t)(enc.len / 4 - 2 - 1);
    bad[4] = (uint8_t)words, bad[5] = (uint8_t)(words >> 8), bad[6] = (uint8_t)(words >> 16);
    int rc = nds_cseg_decode(bad, enc.len, &(nds_cseg_volume){8, vol, 1, block, st}, back);
    ck_assert(rc == 0 || rc == NDS_ECORRUPT);
    nds_buf_dispose(&enc);
    free(bad);
    free(v);
    free(back);
}
END_TEST

/* ---- volumes: raw, keys, offsets, scales ----------------------------------------------------- */

/* A raw uint16 two-channel scale with a (negative) voxel offset: keys in voxel coordinates, edge
 * chunks clipped on disk, bytes x fastest and little-endian; reads and partial writes. */
START_TEST(raw_keys_and_layout) {
    nds_array *a;
    NDS_OK(open_spec(
        &a, "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"memory://pc_raw/\"," MS_U16
            ",\"scale_metadata\":{\"size\":[10,7,5],\"voxel_offset\":[-3,100,0],"
            "\"chunk_size\":[4,4,4],\"resolution\":[8,8,40]},\"create\":true}"));
    ck_assert_uint_eq(nds_array_rank(a), 4);
    uint64_t shape[4], chunks[4];
    nds_array_shape(a, shape);
    nds_array_chunk_shape(a, chunks);
    ck_assert(shape[0] == 10 && shape[1] == 7 && shape[2] == 5 && shape[3] == 2);
    ck_assert(chunks[0] == 4 && chunks[1] == 4 && chunks[2] == 4 && chunks[3] == 2);
    nds_box box;
    whole(a, &box);
    size_t n = 10 * 7 * 5 * 2;
    uint16_t *in = malloc(n * 2), *out = malloc(n * 2);
    fill_pattern((uint8_t *)in, shape, 2, 0xffff);
    NDS_OK(nds_array_write(a, &box, in, NULL));
    NDS_OK(nds_array_read(a, &box, out, NULL));
    ck_assert(memcmp(in, out, n * 2) == 0);
    /* 3 x 2 x 2 chunks; the corner chunk covers x [5, 7) (voxels 8..9 of the array), y [104, 107).
     */
    ck_assert_int_eq(count_keys("memory://pc_raw/", "8_8_40/"), 12);
    size_t len;
    uint8_t *c = get_raw("memory://pc_raw/", "8_8_40/5-7_104-107_4-5", &len);
    ck_assert_ptr_nonnull(c);
    ck_assert_uint_eq(len, 2 * 3 * 1 * 2 * 2);
    /* Element (x, y, z, c) of the chunk at ((x + ex*(y + ey*(z + ez*c))) * 2. */
    for (uint64_t ch = 0; ch < 2; ch++)
        for (uint64_t y = 0; y < 3; y++)
            for (uint64_t x = 0; x < 2; x++) {
                size_t at = (size_t)(x + 2 * (y + 3 * (0 + 1 * ch))) * 2;
                uint16_t v = (uint16_t)(c[at] | c[at + 1] << 8);
                ck_assert_uint_eq(v, (uint16_t)pattern(8 + x, 4 + y, 4, ch));
            }
    free(c);
    ck_assert_ptr_nonnull(c = get_raw("memory://pc_raw/", "8_8_40/-3-1_100-104_0-4", &len));
    ck_assert_uint_eq(len, 4 * 4 * 4 * 2 * 2);
    free(c);
    /* A strided partial write lands; a chunk written all zeros is deleted. */
    nds_box part;
    NDS_OK(nds_box_parse(&part, "[0:4, 0:4, 0:4, :]", 4, shape));
    uint16_t zeros[4 * 4 * 4 * 2] = {0};
    NDS_OK(nds_array_write(a, &part, zeros, NULL));
    ck_assert_ptr_null(get_raw("memory://pc_raw/", "8_8_40/-3-1_100-104_0-4", &len));
    NDS_OK(nds_array_read(a, &box, out, NULL));
    for (uint64_t x = 0; x < 10; x++)
        for (uint64_t y = 0; y < 7; y++)
            for (uint64_t z = 0; z < 5; z++)
                for (uint64_t ch = 0; ch < 2; ch++) {
                    size_t i = (size_t)(((x * 7 + y) * 5 + z) * 2 + ch);
                    uint16_t want = x < 4 && y < 4 && z < 4 ? 0 : (uint16_t)pattern(x, y, z, ch);
                    ck_assert_uint_eq(out[i], want);
                }
    /* Chunk keys parse back (including negative offsets) and nothing else does. */
    void *st;
    nds_array_meta meta;
    nds_kvstore *kv;
    NDS_OK(nds_kvstore_open(&kv, "memory://pc_raw/", NULL));
    NDS_OK(nds_format_precomputed.open(kv, NULL, NDS_OPEN_EXISTING, &st, &meta));
    uint64_t cell[4];
    ck_assert(nds_format_precomputed.parse_chunk_key(st, "8_8_40/-3-1_100-104_0-4", cell));
    ck_assert(cell[0] == 0 && cell[1] == 0 && cell[2] == 0 && cell[3] == 0);
    ck_assert(nds_format_precomputed.parse_chunk_key(st, "8_8_40/5-7_104-107_4-5", cell));
    ck_assert(cell[0] == 2 && cell[1] == 1 && cell[2] == 1);
    static const char *const not_keys[] = {"info",
                                           "8_8_40/5-8_104-107_4-5",
                                           "8_8_40/05-7_104-107_4-5",
                                           "8_8_40/0-4_100-104_0-4",
                                           "8_8_40/9-13_100-104_0-4",
                                           "8_8_40/-3-1_100-104_0-4x",
                                           "x/-3-1_100-104_0-4",
                                           "8_8_40/"};
    for (size_t i = 0; i < sizeof not_keys / sizeof not_keys[0]; i++)
        ck_assert_msg(!nds_format_precomputed.parse_chunk_key(st, not_keys[i], cell), "%s",
                      not_keys[i]);
    nds_format_precomputed.close(st);
    nds_kvstore_free(kv);
    nds_array_stats stats;
    NDS_OK(nds_array_stats_get(a, &stats));
    ck_assert_uint_eq(stats.chunks_total, 12);
    ck_assert_uint_eq(stats.chunks_stored, 11);
    uint64_t checked, bad;
    NDS_OK(nds_array_verify(a, NULL, NULL, &checked, &bad));
    ck_assert_uint_eq(checked, 11);
    ck_assert_uint_eq(bad, 0);
    free(in);
    free(out);
    nds_array_free(a);
}
END_TEST

/* Several scales: created one by one, opened by index, key, resolution; the info lists them all. */
START_TEST(multiscale) {
    nds_array *a, *b;
    const char *base = "\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"memory://pc_ms/\"";
    NDS_OK(open_spec(&a,
                     "{%s," MS_U16
                     ",\"scale_metadata\":{\"size\":[64,64,16],\"resolution\":[4,4,40],"
                     "\"chunk_size\":[32,32,16]},\"create\":true}",
                     base));
    NDS_OK(open_spec(
        &b,
        "{%s,\"scale_metadata\":{\"key\":\"half\",\"size\":[32,32,16],\"resolution\":[8,8,40],"
        "\"chunk_size\":[16,16,16],\"encoding\":\"png\"},\"create\":true}",
        base));
    char *info = (char *)get_raw("memory://pc_ms/", "info", NULL);
    json_object *doc = json_tokener_parse(info);
    json_object *scales = json_object_object_get(doc, "scales");
    ck_assert_uint_eq(json_object_array_length(scales), 2);
    ck_assert_str_eq(
        json_object_get_string(json_object_object_get(json_object_array_get_idx(scales, 0), "key")),
        "4_4_40");
    ck_assert_str_eq(json_object_get_string(json_object_object_get(doc, "@type")),
                     "neuroglancer_multiscale_volume");
    json_object_put(doc);
    free(info);
    nds_box box;
    whole(b, &box);
    uint16_t v[32 * 32 * 16 * 2];
    uint64_t shape[4] = {32, 32, 16, 2};
    fill_pattern((uint8_t *)v, shape, 2, 0xffff);
    NDS_OK(nds_array_write(b, &box, v, NULL));
    nds_array_free(a);
    nds_array_free(b);
    static const char *const selectors[] = {"\"scale_index\":1",
                                            "\"scale_metadata\":{\"key\":\"half\"}",
                                            "\"scale_metadata\":{\"resolution\":[8,8,40]}"};
    for (size_t i = 0; i < 3; i++) {
        NDS_OK(open_spec(&a, "{%s,%s}", base, selectors[i]));
        uint16_t got[32 * 32 * 16 * 2];
        whole(a, &box);
        ck_assert_uint_eq(box.stop[0], 32);
        NDS_OK(nds_array_read(a, &box, got, NULL));
        ck_assert(memcmp(got, v, sizeof v) == 0);
        char desc[256];
        nds_array_codec_description(a, desc, sizeof desc);
        ck_assert_str_eq(desc, "scale half: png(level=6)");
        char *spec; /* the printed spec reopens this scale, not scale 0 */
        NDS_OK(nds_array_spec(a, &spec));
        nds_array *again;
        NDS_OK(nds_array_open(&again, spec, NULL));
        whole(again, &box);
        ck_assert_uint_eq(box.stop[0], 32);
        nds_array_free(again);
        nds_free(spec);
        nds_array_free(a);
    }
    NDS_OK(open_spec(&a, "{%s}", base)); /* no selector: scale 0 */
    whole(a, &box);
    ck_assert_uint_eq(box.stop[0], 64);
    nds_array_free(a);
    NDS_OK(open_spec(&a, "memory://pc_ms/")); /* format detected from info */
    ck_assert_str_eq(nds_array_format(a), "neuroglancer_precomputed");
    nds_array_free(a);
    NDS_OK(open_spec(&a, "memory://pc_ms/|neuroglancer-precomputed:"));
    nds_array_free(a);
}
END_TEST

/* Opening semantics and their errors. */
START_TEST(open_errors) {
    nds_array *a;
    const char *base = "\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"memory://pc_err/\"";
    ck_assert_int_eq(open_spec(&a, "{%s}", base), NDS_ENOTFOUND);
    ck_assert(strstr(last_message(), "info not found"));
    ck_assert_int_eq(
        open_spec(&a, "{%s,\"create\":true,\"scale_metadata\":{\"size\":[4,4,4]}}", base),
        NDS_EINVAL);
    ck_assert(strstr(last_message(), "data type"));
    ck_assert_int_eq(
        open_spec(&a, "{%s,\"create\":true,\"multiscale_metadata\":{\"data_type\":\"uint8\"}}",
                  base),
        NDS_EINVAL);
    ck_assert(strstr(last_message(), "without a size"));
    NDS_OK(open_spec(
        &a,
        "{%s,\"create\":true,\"multiscale_metadata\":{\"data_type\":\"uint8\",\"num_channels\":1},"
        "\"scale_metadata\":{\"size\":[4,4,4]}}",
        base));
    nds_array_free(a);
    /* create only, exists */
    ck_assert_int_eq(
        open_spec(&a, "{%s,\"create\":true,\"scale_metadata\":{\"size\":[4,4,4]}}", base),
        NDS_EEXIST);
    /* mismatches name the member */
    ck_assert_int_eq(open_spec(&a, "{%s,\"scale_metadata\":{\"size\":[4,4,5]}}", base),
                     NDS_EMISMATCH);
    ck_assert(strstr(last_message(), "\"size\" is [4,4,4], the spec asks for [4,4,5]"));
    ck_assert_int_eq(open_spec(&a, "{%s,\"multiscale_metadata\":{\"data_type\":\"uint16\"}}", base),
                     NDS_EMISMATCH);
    ck_assert(strstr(last_message(), "data_type"));
    ck_assert_int_eq(open_spec(&a, "{%s,\"schema\":{\"dtype\":\"int8\"}}", base), NDS_EMISMATCH);
    ck_assert_int_eq(open_spec(&a, "{%s,\"scale_metadata\":{\"encoding\":\"jpeg\"}}", base),
                     NDS_EMISMATCH);
    ck_assert_int_eq(open_spec(&a, "{%s,\"scale_metadata\":{\"chunk_size\":[2,2,2]}}", base),
                     NDS_EMISMATCH);
    ck_assert_int_eq(open_spec(&a, "{%s,\"schema\":{\"domain\":{\"shape\":[4,4,4,2]}}}", base),
                     NDS_EMISMATCH);
    ck_assert(strstr(last_message(), "num_channels"));
    ck_assert_int_eq(open_spec(&a, "{%s,\"scale_index\":3}", base), NDS_ENOTFOUND);
    ck_assert_int_eq(open_spec(&a, "{%s,\"scale_metadata\":{\"key\":\"nope\"}}", base),
                     NDS_ENOTFOUND);
    ck_assert_int_eq(open_spec(&a, "{%s,\"scale_metadata\":{\"chunk\":[1,1,1]}}", base),
                     NDS_EINVAL);
    ck_assert(strstr(last_message(), "unknown scale_metadata member \"chunk\""));
    ck_assert_int_eq(open_spec(&a, "{%s,\"schema\":{\"fill_value\":3}}", base), NDS_EUNSUPPORTED);
    ck_assert(strstr(last_message(), "no fill value"));
    ck_assert_int_eq(open_spec(&a, "{%s,\"schema\":{\"codec\":\"zstd:3\"}}", base),
                     NDS_EUNSUPPORTED);
    ck_assert(strstr(last_message(), "not a precomputed encoding"));
    NDS_OK(
        open_spec(&a, "{%s,\"schema\":{\"fill_value\":0,\"rank\":4,\"dtype\":\"uint8\"}}", base));
    uint64_t shape[4] = {5, 4, 4, 1};
    ck_assert_int_eq(nds_array_resize(a, shape), NDS_EUNSUPPORTED);
    ck_assert_int_eq(nds_array_set_attributes(a, "{}"), NDS_EUNSUPPORTED);
    char *attrs;
    NDS_OK(nds_array_get_attributes(a, &attrs));
    ck_assert_str_eq(attrs, "{}");
    nds_free(attrs);
    nds_array_free(a);
    /* Encodings must fit the data type. */
    ck_assert_int_eq(
        open_spec(&a, "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"memory://pc_err2/\","
                      "\"create\":true,\"schema\":{\"dtype\":\"uint16\",\"codec\":\"jpeg\","
                      "\"domain\":{\"shape\":[8,8,8,1]}}}"),
        NDS_EFORMAT);
    ck_assert(strstr(last_message(), "jpeg"));
    ck_assert_int_eq(
        open_spec(
            &a,
            "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"memory://pc_err2/\","
            "\"create\":true,\"schema\":{\"dtype\":\"float64\",\"domain\":{\"shape\":[8,8,8,1]}}}"),
        NDS_EUNSUPPORTED);
    ck_assert_ptr_null(get_raw("memory://pc_err2/", "info", NULL)); /* nothing written */
}
END_TEST

/* ---- image encodings ------------------------------------------------------------------------- */

/* Smooth uint8 images survive jpeg within a small error, 1 and 3 channels, edge chunks included. */
START_TEST(jpeg_chunks) {
    for (int nc = 1; nc <= 3; nc += 2) {
        nds_array *a;
        NDS_OK(open_spec(
            &a,
            "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"memory://pc_jpeg%d/\","
            "\"create\":true,\"multiscale_metadata\":{\"data_type\":\"uint8\",\"num_channels\":%d},"
            "\"scale_metadata\":{\"size\":[40,33,9],\"chunk_size\":[16,16,8],"
            "\"encoding\":\"jpeg\",\"jpeg_quality\":95}}",
            nc, nc));
        nds_box box;
        whole(a, &box);
        size_t n = 40 * 33 * 9 * (size_t)nc;
        uint8_t *in = malloc(n), *out = malloc(n);
        size_t i = 0;
        for (int x = 0; x < 40; x++)
            for (int y = 0; y < 33; y++)
                for (int z = 0; z < 9; z++)
                    for (int c = 0; c < nc; c++)
                        in[i++] = (uint8_t)(60 + x * 2 + y + z * 3 + c * 20);
        NDS_OK(nds_array_write(a, &box, in, NULL));
        NDS_OK(nds_array_read(a, &box, out, NULL));
        int worst = 0;
        for (i = 0; i < n; i++)
            worst = abs((int)in[i] - (int)out[i]) > worst ? abs((int)in[i] - (int)out[i]) : worst;
        ck_assert_msg(worst <= 6, "jpeg error %d with %d channels", worst, nc);
        char url[64];
        snprintf(url, sizeof url, "memory://pc_jpeg%d/", nc);
        size_t len;
        uint8_t *c = get_raw(url, "1_1_1/32-40_32-33_8-9", &len);
        ck_assert_ptr_nonnull(c);
        ck_assert(c[0] == 0xff && c[1] == 0xd8);
        free(c);
        free(in);
        free(out);
        nds_array_free(a);
    }
    /* A jpeg of the wrong size or channel count is refused clearly. */
    uint8_t px[12] = {0};
    nds_buf enc = {0};
    NDS_OK(nds_jpeg_encode(px, 4, 3, 1, 75, &enc));
    uint8_t out[36];
    ck_assert_int_eq(nds_jpeg_decode(enc.data, enc.len, 13, 1, out), NDS_ECORRUPT);
    ck_assert(strstr(last_message(), "pixels"));
    ck_assert_int_eq(nds_jpeg_decode(enc.data, enc.len, 12, 3, out), NDS_ECORRUPT);
    ck_assert(strstr(last_message(), "components"));
    ck_assert_int_eq(nds_jpeg_decode(enc.data, enc.len / 2, 12, 1, out), NDS_ECORRUPT);
    ck_assert_int_eq(nds_jpeg_decode((const uint8_t *)"junk", 4, 12, 1, out), NDS_ECORRUPT);
    nds_buf_dispose(&enc);
}
END_TEST

/* png is lossless: uint8 and uint16 with 1 to 4 channels round-trip exactly. */
START_TEST(png_chunks) {
    for (int t = 0; t < 2; t++)
        for (int nc = 1; nc <= 4; nc++) {
            nds_array *a;
            NDS_OK(open_spec(
                &a,
                "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"memory://pc_png%d%d/\","
                "\"create\":true,\"schema\":{\"dtype\":\"%s\",\"domain\":{\"shape\":[21,18,5,%d]},"
                "\"chunk_layout\":{\"chunk\":{\"shape\":[8,8,4,%d]}},\"codec\":\"png:%d\"}}",
                t, nc, t ? "uint16" : "uint8", nc, nc, nc * 2));
            nds_box box;
            whole(a, &box);
            size_t elem = t ? 2 : 1, n = 21 * 18 * 5 * (size_t)nc * elem;
            uint8_t *in = malloc(n), *out = malloc(n);
            uint64_t shape[4] = {21, 18, 5, (uint64_t)nc};
            fill_pattern(in, shape, elem, t ? 0xffff : 0xff);
            NDS_OK(nds_array_write(a, &box, in, NULL));
            NDS_OK(nds_array_read(a, &box, out, NULL));
            ck_assert_msg(memcmp(in, out, n) == 0, "png %zu-byte, %d channels", elem, nc);
            char url[64];
            snprintf(url, sizeof url, "memory://pc_png%d%d/", t, nc);
            uint8_t *c = get_raw(url, "1_1_1/16-21_16-18_4-5", NULL);
            ck_assert_ptr_nonnull(c);
            ck_assert(memcmp(c, "\x89PNG\r\n\x1a\n", 8) == 0);
            free(c);
            free(in);
            free(out);
            nds_array_free(a);
        }
    uint8_t px[24] = {1, 2, 3};
    nds_buf enc = {0};
    NDS_OK(nds_png_encode(px, 6, 2, 1, 2, 6, &enc));
    uint8_t out[48];
    ck_assert_int_eq(nds_png_decode(enc.data, enc.len, 12, 1, 1, out),
                     NDS_ECORRUPT); /* 16-bit, asked 8 */
    ck_assert(strstr(last_message(), "16-bit"));
    ck_assert_int_eq(nds_png_decode(enc.data, enc.len, 12, 2, 2, out), NDS_ECORRUPT);
    ck_assert_int_eq(nds_png_decode(enc.data, enc.len, 11, 1, 2, out), NDS_ECORRUPT);
    for (size_t cut = 0; cut < enc.len; cut += 3)
        ck_assert_int_eq(nds_png_decode(enc.data, cut, 12, 1, 2, out), NDS_ECORRUPT);
    NDS_OK(nds_png_decode(enc.data, enc.len, 12, 1, 2, out));
    nds_buf_dispose(&enc);
}
END_TEST

/* compressed_segmentation chunks through the format: the FIB-25 cube is stored exactly as the codec
 * encodes it and reads back bit-exactly; uint32 volumes with edge chunks and two channels too. */
START_TEST(cseg_chunks) {
    uint64_t *v = load_fixture();
    nds_array *a;
    NDS_OK(open_spec(
        &a,
        "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"memory://pc_cseg/\","
        "\"create\":true,\"multiscale_metadata\":{\"data_type\":\"uint64\",\"num_channels\":1},"
        "\"scale_metadata\":{\"size\":[64,64,64],\"chunk_size\":[64,64,64],\"resolution\":[8,8,8],"
        "\"encoding\":\"compressed_segmentation\",\"compressed_segmentation_block_size\":[8,8,8]}"
        "}"));
    /* The array is [x, y, z, c] in C order: transpose the x-fastest fixture. */
    uint64_t *c_order = malloc(64 * 64 * 64 * 8), *back = malloc(64 * 64 * 64 * 8);
    for (size_t x = 0; x < 64; x++)
        for (size_t y = 0; y < 64; y++)
            for (size_t z = 0; z < 64; z++)
                c_order[(x * 64 + y) * 64 + z] = v[x + 64 * (y + 64 * z)];
    nds_box box;
    whole(a, &box);
    NDS_OK(nds_array_write(a, &box, c_order, NULL));
    NDS_OK(nds_array_read(a, &box, back, NULL));
    ck_assert(memcmp(c_order, back, 64 * 64 * 64 * 8) == 0);
    size_t len;
    uint8_t *stored = get_raw("memory://pc_cseg/", "8_8_8/0-64_0-64_0-64", &len);
    nds_buf enc = {0};
    uint64_t vol[3] = {64, 64, 64}, block[3] = {8, 8, 8};
    int64_t st[4] = {1, 64, 4096, 0};
    NDS_OK(nds_cseg_encode(v, 8, vol, st, 1, block, &enc));
    ck_assert_uint_eq(len, enc.len);
    ck_assert_uint_eq(len, 71348);
    ck_assert(memcmp(stored, enc.data, len) == 0);
    char info[512];
    nds_array_codec_description(a, info, sizeof info);
    ck_assert_str_eq(info, "scale 8_8_8: compressed_segmentation(block=8,8,8)");
    nds_array_free(a);
    nds_buf_dispose(&enc);
    free(stored);
    /* uint32, two channels, uneven size and block (TensorStore allows a segmentation with 2
     * channels). */
    NDS_OK(open_spec(
        &a, "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"memory://pc_cseg32/\","
            "\"create\":true,\"schema\":{\"dtype\":\"uint32\",\"domain\":{\"shape\":[50,41,23,2]},"
            "\"chunk_layout\":{\"chunk\":{\"shape\":[32,32,16,2]}},"
            "\"codec\":\"compressed_segmentation:5:3:7\"}}"));
    whole(a, &box);
    size_t n = 50 * 41 * 23 * 2;
    uint32_t *in = malloc(n * 4), *out = malloc(n * 4);
    for (size_t i = 0; i < n; i++) in[i] = (uint32_t)(v[i % (64 * 64 * 64)] ^ (i % 2 ? 0x5555 : 0));
    NDS_OK(nds_array_write(a, &box, in, NULL));
    NDS_OK(nds_array_read(a, &box, out, NULL));
    ck_assert(memcmp(in, out, n * 4) == 0);
    nds_array_free(a);
    free(in);
    free(out);
    free(v);
    free(c_order);
    free(back);
}
END_TEST

/* ---- info validation ------------------------------------------------------------------------- */

#define SCALE_OK                                                                                   \
    "\"key\":\"s\",\"size\":[10,10,10],\"resolution\":[1,1,1],\"chunk_sizes\":[[4,4,4]]"

/* Hostile or malformed info documents: each refused with the expected code and a message naming
 * the member. */
START_TEST(info_validation) {
    static const struct {
        const char *info;
        int code;
        const char *msg;
    } cases[] = {
        {"[]", NDS_EFORMAT, "expected a json object"},
        {"{\"type\":\"image\",\"data_type\":\"uint8\",\"num_channels\":1}", NDS_EFORMAT,
         "missing member \"scales\""},
        {"{\"type\":\"image\",\"data_type\":\"uint8\",\"num_channels\":1,\"scales\":[]}",
         NDS_EFORMAT, "1 to 64 scales"},
        {"{\"data_type\":\"uint8\",\"num_channels\":1,\"scales\":[{" SCALE_OK
         ",\"encoding\":\"raw\"}]}",
         NDS_EFORMAT, "missing member \"type\""},
        {"{\"type\":\"volume\",\"data_type\":\"uint8\",\"num_channels\":1,\"scales\":[{" SCALE_OK
         ",\"encoding\":\"raw\"}]}",
         NDS_EFORMAT, "\"type\""},
        {"{\"type\":\"image\",\"data_type\":\"int64\",\"num_channels\":1,\"scales\":[{" SCALE_OK
         ",\"encoding\":\"raw\"}]}",
         NDS_EUNSUPPORTED, "\"data_type\" \"int64\" is not supported"},
        {"{\"type\":\"image\",\"data_type\":\"uint8\",\"num_channels\":0,\"scales\":[{" SCALE_OK
         ",\"encoding\":\"raw\"}]}",
         NDS_EFORMAT, "\"num_channels\""},
        {"{\"@type\":\"x\",\"type\":\"image\",\"data_type\":\"uint8\",\"num_channels\":1,"
         "\"scales\":[{" SCALE_OK ",\"encoding\":\"raw\"}]}",
         NDS_EFORMAT, "\"@type\""},
        {"{\"type\":\"image\",\"data_type\":\"uint8\",\"num_channels\":1,\"scales\":[{" SCALE_OK
         ",\"encoding\":\"zfpc\"}]}",
         NDS_EUNSUPPORTED, "\"encoding\" \"zfpc\" is not supported"},
        {"{\"type\":\"image\",\"data_type\":\"uint8\",\"num_channels\":1,\"scales\":[{\"key\":"
         "\"s\",\"size\":[10,10],"
         "\"resolution\":[1,1,1],\"chunk_sizes\":[[4,4,4]],\"encoding\":\"raw\"}]}",
         NDS_EFORMAT, "scales[0]: \"size\""},
        {"{\"type\":\"image\",\"data_type\":\"uint8\",\"num_channels\":1,\"scales\":[{\"key\":"
         "\"s\",\"size\":[10,10,10],"
         "\"resolution\":[1,0,1],\"chunk_sizes\":[[4,4,4]],\"encoding\":\"raw\"}]}",
         NDS_EFORMAT, "\"resolution\"[1]"},
        {"{\"type\":\"image\",\"data_type\":\"uint8\",\"num_channels\":1,\"scales\":[{\"key\":"
         "\"s\",\"size\":[10,10,10],"
         "\"resolution\":[1,1,1],\"chunk_sizes\":[[4,0,4]],\"encoding\":\"raw\"}]}",
         NDS_EFORMAT, "chunk_sizes[0]"},
        {"{\"type\":\"image\",\"data_type\":\"uint8\",\"num_channels\":1,\"scales\":[{\"key\":"
         "\"s\",\"size\":[10,10,10],"
         "\"resolution\":[1,1,1],\"chunk_sizes\":[[4096,4096,4096]],\"encoding\":\"raw\"}]}",
         NDS_ELIMIT, "2 GiB"},
        {"{\"type\":\"image\",\"data_type\":\"uint8\",\"num_channels\":1,\"scales\":[{\"key\":\"../"
         "up\",\"size\":[10,10,10],"
         "\"resolution\":[1,1,1],\"chunk_sizes\":[[4,4,4]],\"encoding\":\"raw\"}]}",
         NDS_EUNSUPPORTED, "\"..\""},
        {"{\"type\":\"image\",\"data_type\":\"uint8\",\"num_channels\":1,\"scales\":[{" SCALE_OK
         ",\"encoding\":\"raw\"},{" SCALE_OK ",\"encoding\":\"raw\"}]}",
         NDS_EFORMAT, "same \"key\""},
        {"{\"type\":\"image\",\"data_type\":\"uint8\",\"num_channels\":1,\"scales\":[{" SCALE_OK
         ",\"encoding\":\"compressed_segmentation\"}]}",
         NDS_EFORMAT, "compressed_segmentation_block_size"},
        {"{\"type\":\"image\",\"data_type\":\"uint32\",\"num_channels\":1,\"scales\":[{" SCALE_OK
         ",\"encoding\":\"raw\",\"compressed_segmentation_block_size\":[8,8,8]}]}",
         NDS_EFORMAT, "only allowed"},
        {"{\"type\":\"image\",\"data_type\":\"uint8\",\"num_channels\":4,\"scales\":[{" SCALE_OK
         ",\"encoding\":\"jpeg\"}]}",
         NDS_EFORMAT, "1 or 3 channels"},
        {"{\"type\":\"image\",\"data_type\":\"uint8\",\"num_channels\":1,\"scales\":[{" SCALE_OK
         ",\"encoding\":\"raw\","
         "\"voxel_offset\":[0,0,1e30]}]}",
         NDS_EFORMAT, "\"voxel_offset\"[2]"},
        {"{\"type\":\"image\",\"data_type\":\"uint8\",\"num_channels\":1,\"scales\":[{" SCALE_OK
         ",\"encoding\":\"raw\","
         "\"sharding\":{\"@type\":\"neuroglancer_uint64_sharded_v1\",\"preshift_bits\":0,"
         "\"minishard_bits\":40,"
         "\"shard_bits\":0,\"hash\":\"identity\"}}]}",
         NDS_EFORMAT, "\"minishard_bits\""},
        {"{\"type\":\"image\",\"data_type\":\"uint8\",\"num_channels\":1,\"scales\":[{" SCALE_OK
         ",\"encoding\":\"raw\","
         "\"sharding\":{\"@type\":\"neuroglancer_uint64_sharded_v1\",\"preshift_bits\":0,"
         "\"minishard_bits\":1,"
         "\"shard_bits\":0,\"hash\":\"sha1\"}}]}",
         NDS_EFORMAT, "\"hash\""},
        {"{\"type\":\"image\",\"data_type\":\"uint8\",\"num_channels\":1,\"scales\":[{" SCALE_OK
         ",\"encoding\":\"raw\","
         "\"sharding\":{\"@type\":\"neuroglancer_uint64_sharded_v2\"}}]}",
         NDS_EUNSUPPORTED, "@type"},
        {"{\"type\":\"image\",\"data_type\":\"uint8\",\"num_channels\":1,\"scales\":[{\"key\":"
         "\"s\",\"size\":[10,10,10],"
         "\"resolution\":[1,1,1],\"chunk_sizes\":[[4,4,4],[2,2,2]],\"encoding\":\"raw\","
         "\"sharding\":{\"@type\":"
         "\"neuroglancer_uint64_sharded_v1\",\"preshift_bits\":0,\"minishard_bits\":1,\"shard_"
         "bits\":0,"
         "\"hash\":\"identity\"}}]}",
         NDS_EFORMAT, "exactly one"},
        {"{\"type\":\"image\",\"data_type\":\"uint8\",\"num_channels\":1,\"scales\":[{\"key\":"
         "\"s\",\"size\":[2097153,"
         "2097153,2097153],\"resolution\":[1,1,1],\"chunk_sizes\":[[1,1,1]],\"encoding\":\"raw\","
         "\"sharding\":{\"@type\":\"neuroglancer_uint64_sharded_v1\",\"preshift_bits\":0,"
         "\"minishard_bits\":1,"
         "\"shard_bits\":0,\"hash\":\"identity\"}}]}",
         NDS_ELIMIT, "64 bits"},
        {"{\"type\":\"image\",", NDS_EFORMAT, "invalid json"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char url[64];
        snprintf(url, sizeof url, "memory://pc_info%zu/", i);
        put_raw(url, "info", cases[i].info, strlen(cases[i].info));
        nds_array *a;
        int rc = open_spec(&a, "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"%s\"}", url);
        ck_assert_msg(rc == cases[i].code, "case %zu: %d (%s)", i, rc, last_message());
        ck_assert_msg(strstr(last_message(), cases[i].msg), "case %zu: %s", i, last_message());
        ck_assert_msg(strstr(last_message(), "info of memory://"), "case %zu: %s", i,
                      last_message());
    }
    /* Unknown members are kept; data_type and encoding compare case-insensitively. */
    const char *ok =
        "{\"type\":\"segmentation\",\"data_type\":\"UINT64\",\"num_channels\":1,\"mesh\":\"mesh\","
        "\"scales\":[{" SCALE_OK ",\"encoding\":\"Raw\",\"extra\":1}]}";
    put_raw("memory://pc_info_ok/", "info", ok, strlen(ok));
    nds_array *a;
    NDS_OK(open_spec(&a, "memory://pc_info_ok/|neuroglancer_precomputed:"));
    ck_assert_int_eq(nds_array_dtype(a), NDS_UINT64);
    char *meta;
    NDS_OK(nds_array_metadata(a, &meta));
    ck_assert(strstr(meta, "\"mesh\""));
    nds_free(meta);
    nds_array_free(a);
}
END_TEST

/* Creating from a whole info ("metadata"), and from one flat object mixing multiscale and scale
 * members; schema write_chunk must match the shard box. */
START_TEST(create_from_metadata) {
    const char *info =
        "{\"@type\":\"neuroglancer_multiscale_volume\",\"type\":\"image\",\"data_type\":\"uint8\","
        "\"num_channels\":1,\"scales\":[{\"key\":\"a\",\"size\":[8,8,8],\"resolution\":[2,2,2],"
        "\"chunk_sizes\":[[4,4,4]],\"encoding\":\"raw\"},{\"key\":\"b\",\"size\":[4,4,4],"
        "\"resolution\":[4,4,4],\"chunk_sizes\":[[4,4,4]],\"encoding\":\"raw\"}]}";
    nds_array *a;
    NDS_OK(open_spec(&a,
                     "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"memory://pc_meta/\","
                     "\"create\":true,\"scale_index\":1,\"metadata\":%s}",
                     info));
    nds_box box;
    whole(a, &box);
    ck_assert_uint_eq(box.stop[0], 4);
    nds_array_free(a);
    /* Reopening with the same metadata matches; a different one does not. */
    NDS_OK(open_spec(&a,
                     "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"memory://pc_meta/\","
                     "\"metadata\":%s}",
                     info));
    nds_array_free(a);
    ck_assert_int_eq(
        open_spec(&a, "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"memory://pc_meta/\","
                      "\"metadata\":{\"data_type\":\"uint8\",\"scales\":[{\"key\":\"b\",\"size\":["
                      "4,4,5]}]}}"),
        NDS_EMISMATCH);
    NDS_OK(open_spec(
        &a, "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"memory://pc_flat/"
            "\",\"create\":true,"
            "\"metadata\":{\"data_type\":\"uint32\",\"num_channels\":1,\"size\":[64,64,64],"
            "\"chunk_sizes\":[[16,16,16]],\"encoding\":\"compressed_segmentation\",\"sharding\":{"
            "\"@type\":"
            "\"neuroglancer_uint64_sharded_v1\",\"preshift_bits\":3,\"minishard_bits\":0,\"shard_"
            "bits\":3,"
            "\"hash\":\"identity\"}},\"schema\":{\"chunk_layout\":{\"write_chunk\":{\"shape\":[32,"
            "32,32,1]}}}}"));
    char *meta;
    NDS_OK(nds_array_metadata(a, &meta));
    ck_assert(strstr(meta, "\"segmentation\""));
    ck_assert(strstr(meta, "\"compressed_segmentation_block_size\":[8,8,8]") ||
              strstr(meta, "\"compressed_segmentation_block_size\": [ 8, 8, 8 ]"));
    nds_free(meta);
    uint64_t chunks[4];
    nds_array_chunk_shape(a, chunks);
    ck_assert(chunks[0] == 32 && chunks[1] == 32 && chunks[2] == 32 && chunks[3] == 1);
    nds_array_free(a);
    ck_assert_int_eq(
        open_spec(&a, "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"memory://pc_flat/\","
                      "\"schema\":{\"chunk_layout\":{\"write_chunk\":{\"shape\":[16,16,16,1]}}}}"),
        NDS_EMISMATCH);
    ck_assert(strstr(last_message(), "write chunk"));
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("precomputed");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, murmurhash_vectors);
    tcase_add_test(tc, compressed_morton);
    tcase_add_test(tc, shard_boxes);
    tcase_add_test(tc, cseg_exact_bytes);
    tcase_add_test(tc, cseg_fixture_roundtrip);
    tcase_add_test(tc, cseg_corrupt);
    tcase_add_test(tc, raw_keys_and_layout);
    tcase_add_test(tc, multiscale);
    tcase_add_test(tc, open_errors);
    tcase_add_test(tc, jpeg_chunks);
    tcase_add_test(tc, png_chunks);
    tcase_add_test(tc, cseg_chunks);
    tcase_add_test(tc, info_validation);
    tcase_add_test(tc, create_from_metadata);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return nds_test_run(suite()); }
