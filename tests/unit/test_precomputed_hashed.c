/* Writes to neuroglancer precomputed scales whose shard files are not boxes of the chunk grid
 * (formats/precomputed.c SHARD_HASHED: murmurhash3_x86_128 with several shards, identity shard
 * numbers that wrap, shard boxes above 1 GiB), grouped per shard by lib/array_group.c:
 * - exact bytes against a shard encoder written here from sharded.md;
 * - round trips over both hashes, raw / gzip minishard indexes and data, raw and
 *   compressed_segmentation chunks, stepped partial writes; every shard file parses, holds only its
 *   own chunks, in id order per minishard, with the declared encodings;
 * - partial writes into shards another writer made keep the other chunks' stored bytes verbatim;
 * - chunks written all zero leave their shard, and a shard left empty is deleted;
 * - writers in several threads and several processes on chunks sharing shards lose nothing;
 * - a competing writer between our read and our write makes the shard's update start over, and
 *   both writers' chunks survive;
 * - corrupt shards fail writes with NDS_ECORRUPT naming the file and are left untouched;
 * - writes in a transaction are refused up front (the transaction stays usable).
 * Through the public API on memory:// and file:// stores; the shard module to inspect files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <pthread.h>
#include <unistd.h>

#include <zlib.h>

#include "support_check.h"
#include "support_format.h"
#include "ndstore/sys/kv_driver.h"
#include "../../formats/precomputed_shard.h"

extern const nds_kv_driver nds_kv_driver_memory;

/* ---- helpers --------------------------------------------------------------------------------- */

static const char *last_message(void) { return nds_error_last()->message; }

/* A scale "1_1_1" of dtype with channels, size and chunk (x, y, z), sharded as s, at url. */
static int open_hashed(nds_array **a, const char *url, const char *dtype, int channels,
                       const uint64_t *size, const uint64_t *chunk, const nds_pc_sharding *s,
                       const char *encoding) {
    return open_spec(
        a,
        "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"%s\",\"create\":true,\"open\":true,"
        "\"multiscale_metadata\":{\"data_type\":\"%s\",\"num_channels\":%d},\"scale_metadata\":{"
        "\"size\":[%llu,%llu,%llu],\"chunk_size\":[%llu,%llu,%llu],%s,\"sharding\":{\"@type\":"
        "\"neuroglancer_uint64_sharded_v1\",\"preshift_bits\":%u,\"minishard_bits\":%u,"
        "\"shard_bits\":%u,\"hash\":\"%s\",\"minishard_index_encoding\":\"%s\","
        "\"data_encoding\":\"%s\"}}}",
        url, dtype, channels, (unsigned long long)size[0], (unsigned long long)size[1],
        (unsigned long long)size[2], (unsigned long long)chunk[0], (unsigned long long)chunk[1],
        (unsigned long long)chunk[2], encoding, s->preshift_bits, s->minishard_bits, s->shard_bits,
        s->murmur ? "murmurhash3_x86_128" : "identity", s->index_gzip ? "gzip" : "raw",
        s->data_gzip ? "gzip" : "raw");
}

static nds_pc_sharding sharding(const char *hash, unsigned pre, unsigned mini, unsigned shard,
                                bool igz, bool dgz) {
    return (nds_pc_sharding){true, pre, mini, shard, hash[0] == 'm', igz, dgz};
}

static void box_of(nds_box *b, const char *text, const uint64_t *shape) {
    NDS_OK(nds_box_parse(b, text, 4, shape));
}

/* Element (x, y, z, c) of the test volumes (never 0), C order over [x, y, z, c]. */
static uint16_t pattern(uint64_t x, uint64_t y, uint64_t z, uint64_t c) {
    return (uint16_t)(1 + ((x * 7 + y * 13 + z * 31 + c * 101) ^ (x * y)) % 60000);
}

static uint16_t *pattern_volume(const uint64_t *shape) {
    uint16_t *v = malloc(shape[0] * shape[1] * shape[2] * shape[3] * 2);
    size_t i = 0;
    for (uint64_t x = 0; x < shape[0]; x++)
        for (uint64_t y = 0; y < shape[1]; y++)
            for (uint64_t z = 0; z < shape[2]; z++)
                for (uint64_t c = 0; c < shape[3]; c++) v[i++] = pattern(x, y, z, c);
    return v;
}

static int count_fn(void *ctx, const char *key, uint64_t size) {
    (void)size;
    *(int *)ctx += strstr(key, ".shard") != NULL;
    return 0;
}

/* Shard files under url + "1_1_1/". */
static int count_shards(const char *url) {
    nds_kvstore *kv;
    int n = 0;
    NDS_OK(nds_kvstore_open(&kv, url, NULL));
    NDS_OK(nds_kvstore_list(kv, "1_1_1/", count_fn, &n));
    nds_kvstore_free(kv);
    return n;
}

static void shard_key(const nds_pc_sharding *s, uint64_t shard, char *key, size_t cap) {
    NDS_OK(nds_pc_shard_key("1_1_1", s, shard, key, cap));
}

static uint64_t shard_of(const nds_pc_sharding *s, uint64_t id, uint64_t *mini) {
    uint64_t sh, mi;
    nds_pc_shard_of(s, id, &sh, &mi);
    if (mini) *mini = mi;
    return sh;
}

/* gzip of in at a zlib level, malloc'd. */
static uint8_t *gz(const uint8_t *in, size_t len, int level, size_t *out_len) {
    z_stream z;
    memset(&z, 0, sizeof z);
    ck_assert_int_eq(deflateInit2(&z, level, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY), Z_OK);
    size_t cap = deflateBound(&z, (uLong)len) + 64;
    uint8_t *out = malloc(cap);
    z.next_in = (Bytef *)in, z.avail_in = (uInt)len;
    z.next_out = out, z.avail_out = (uInt)cap;
    ck_assert_int_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
    *out_len = z.total_out;
    deflateEnd(&z);
    return out;
}

static void put64le(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* ---- a shard encoder from sharded.md --------------------------------------------------------- */

/* One chunk of a shard, its bytes already in the shard's data_encoding. */
typedef struct tchunk {
    uint64_t id;
    uint8_t *data;
    size_t len;
} tchunk;

static int cmp_tchunk(const void *a, const void *b) {
    uint64_t x = ((const tchunk *)a)->id, y = ((const tchunk *)b)->id;
    return (x > y) - (x < y);
}

/* The shard file of chunks (all of one shard): the shard index, then per minishard its chunks in
 * id order and its [3, n] index (gzip level 6 when index_gzip); empty minishards are empty ranges
 * at the current end. malloc'd. */
static uint8_t *spec_shard(const nds_pc_sharding *s, tchunk *c, size_t n, size_t *len) {
    qsort(c, n, sizeof *c, cmp_tchunk);
    size_t index_end = (size_t)16 << s->minishard_bits, cap = index_end + 64;
    for (size_t i = 0; i < n; i++) cap += c[i].len + 24 + 64;
    uint8_t *f = calloc(1, cap);
    size_t at = index_end;
    for (uint64_t m = 0; m < ((uint64_t)1 << s->minishard_bits); m++) {
        uint8_t ix[24 * 64];
        size_t k = 0, cnt = 0;
        uint64_t prev_id = 0, prev_end = index_end;
        for (size_t i = 0; i < n; i++) {
            uint64_t mi;
            shard_of(s, c[i].id, &mi);
            cnt += mi == m;
        }
        ck_assert_uint_le(cnt, 64);
        for (size_t i = 0; i < n; i++) {
            uint64_t mi;
            shard_of(s, c[i].id, &mi);
            if (mi != m) continue;
            put64le(ix + 8 * k, c[i].id - prev_id);
            put64le(ix + 8 * (cnt + k), at - prev_end);
            put64le(ix + 8 * (2 * cnt + k), c[i].len);
            memcpy(f + at, c[i].data, c[i].len);
            at += c[i].len;
            prev_id = c[i].id, prev_end = at, k++;
        }
        size_t start = at - index_end, ilen = 24 * cnt;
        uint8_t *enc = s->index_gzip && cnt ? gz(ix, ilen, 6, &ilen) : NULL;
        memcpy(f + at, enc ? enc : ix, ilen);
        free(enc);
        at += cnt ? ilen : 0;
        put64le(f + 16 * m, start), put64le(f + 16 * m + 8, at - index_end);
    }
    *len = at;
    return f;
}

/* ---- exact bytes ----------------------------------------------------------------------------- */

/* A 4 x 2 x 1 uint8 volume of 1-voxel chunks (ids 0..7) over 2 murmurhash3 shards of 2
 * minishards: each shard file equals the one the encoder above builds; chunk 5 is zero and absent.
 */
START_TEST(exact_bytes_murmur) {
    nds_pc_sharding s = sharding("murmurhash3_x86_128", 0, 1, 1, false, false);
    uint64_t size[3] = {4, 2, 1}, chunk[3] = {1, 1, 1};
    nds_array *a;
    NDS_OK(
        open_hashed(&a, "memory://h_exact/", "uint8", 1, size, chunk, &s, "\"encoding\":\"raw\""));
    uint64_t cs[4];
    nds_array_chunk_shape(a, cs);
    ck_assert(cs[0] == 1 && cs[1] == 1 && cs[2] == 1); /* the precomputed chunk, not a shard box */
    nds_pc_grid g;
    nds_pc_grid_init(&g, size, chunk);
    uint8_t in[8], value[8];
    for (uint64_t x = 0; x < 4; x++)
        for (uint64_t y = 0; y < 2; y++) {
            uint64_t cell[3] = {x, y, 0}, id = nds_pc_morton(&g, cell);
            value[id] = id == 5 ? 0 : (uint8_t)(0xa0 + id);
            in[x * 2 + y] = value[id];
        }
    write_all(a, in);
    for (uint64_t sh = 0; sh < 2; sh++) {
        tchunk c[8];
        size_t n = 0, len, got_len;
        for (uint64_t id = 0; id < 8; id++)
            if (value[id] && shard_of(&s, id, NULL) == sh) c[n++] = (tchunk){id, &value[id], 1};
        uint8_t *want = spec_shard(&s, c, n, &len);
        char key[64];
        shard_key(&s, sh, key, sizeof key);
        uint8_t *got = get_raw("memory://h_exact/", key, &got_len);
        ck_assert_msg(got != NULL, "shard %s missing", key);
        ck_assert_uint_eq(got_len, len);
        ck_assert_msg(memcmp(got, want, len) == 0, "shard %s differs from sharded.md's layout",
                      key);
        free(got);
        free(want);
    }
    uint8_t out[8];
    read_all(a, out);
    ck_assert(memcmp(in, out, 8) == 0);
    nds_array_free(a);
}
END_TEST

/* ---- round trips ----------------------------------------------------------------------------- */

/* Every shard file of the volume parses as its shard's, lists chunks in id order per minishard, and
 * uses the declared encodings; returns the number of chunks stored. */
static size_t check_shards(const char *url, const nds_pc_sharding *s) {
    size_t total = 0;
    for (uint64_t sh = 0; sh < ((uint64_t)1 << s->shard_bits); sh++) {
        char key[64];
        size_t len;
        shard_key(s, sh, key, sizeof key);
        uint8_t *f = get_raw(url, key, &len);
        if (!f) continue;
        nds_pc_chunk_ref *refs;
        size_t n;
        NDS_OK(nds_pc_shard_parse(s, sh, f, len, 1 << 20, &refs, &n));
        ck_assert_uint_ge(n, 1); /* empty shards are deleted */
        for (size_t i = 0; i < n; i++) {
            uint64_t mi, pm;
            shard_of(s, refs[i].id, &mi);
            if (i > 0 && (shard_of(s, refs[i - 1].id, &pm), pm == mi))
                ck_assert_uint_gt(refs[i].id, refs[i - 1].id);
            if (s->data_gzip) ck_assert(f[refs[i].start] == 0x1f && f[refs[i].start + 1] == 0x8b);
        }
        for (uint64_t m = 0; s->index_gzip && m < ((uint64_t)1 << s->minishard_bits); m++) {
            uint64_t a = 0, b = 0;
            for (int k = 7; k >= 0; k--) a = a << 8 | f[16 * m + k], b = b << 8 | f[16 * m + 8 + k];
            size_t at = (size_t)(16 << s->minishard_bits) + (size_t)a;
            if (a != b) ck_assert(f[at] == 0x1f && f[at + 1] == 0x8b);
        }
        total += n;
        free(refs);
        free(f);
    }
    return total;
}

typedef struct hcase {
    const char *hash;
    unsigned pre, mini, shard;
    bool igz, dgz;
} hcase;

START_TEST(roundtrip_hashed_layouts) {
    static const hcase cases[] = {
        {"murmurhash3_x86_128", 0, 2, 3, false, false},
        {"murmurhash3_x86_128", 1, 1, 2, true, false},
        {"murmurhash3_x86_128", 0, 0, 4, false, true},
        {"murmurhash3_x86_128", 2, 3, 1, true, true},
        {"identity", 0, 1, 2, true, true},
        {"identity", 1, 2, 1, false, true},
        {"identity", 0, 0, 3, true, false},
    };
    static const char *const encodings[] = {"\"encoding\":\"raw\"",
                                            "\"encoding\":\"compressed_segmentation\","
                                            "\"compressed_segmentation_block_size\":[4,4,2]"};
    uint64_t size[3] = {37, 29, 11}, chunk[3] = {8, 8, 4}, shape[4] = {37, 29, 11, 2};
    size_t n = 37 * 29 * 11 * 2;
    for (size_t e = 0; e < 2; e++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            const hcase *c = &cases[i];
            nds_pc_sharding s = sharding(c->hash, c->pre, c->mini, c->shard, c->igz, c->dgz);
            char url[64];
            snprintf(url, sizeof url, "memory://h_rt_%zu_%zu/", e, i);
            nds_array *a;
            NDS_OK(open_hashed(&a, url, "uint32", 2, size, chunk, &s, encodings[e]));
            uint32_t *in = malloc(n * 4), *out = malloc(n * 4);
            uint16_t *p = pattern_volume(shape);
            for (size_t k = 0; k < n; k++) in[k] = e ? p[k] % 5 : p[k] * 65537u;
            free(p);
            write_all(a, in);
            read_all(a, out);
            ck_assert_msg(memcmp(in, out, n * 4) == 0, "case %zu/%zu", e, i);
            ck_assert_uint_eq(check_shards(url, &s), 5 * 4 * 3);
            if (c->shard >= 2) ck_assert_int_ge(count_shards(url), 2);
            nds_box part;
            box_of(&part, "[3:20:2, 5:6, 2:9, 1]", shape);
            uint32_t ones[9 * 7];
            for (size_t k = 0; k < 63; k++) ones[k] = 0xabcdef00u + (uint32_t)k;
            NDS_OK(nds_array_write(a, &part, ones, NULL));
            for (size_t k = 0, x = 3; x < 20; x += 2)
                for (size_t z = 2; z < 9; z++, k++) in[((x * 29 + 5) * 11 + z) * 2 + 1] = ones[k];
            read_all(a, out);
            ck_assert_msg(memcmp(in, out, n * 4) == 0, "case %zu/%zu after a partial write", e, i);
            check_shards(url, &s);
            nds_array_free(a);
            NDS_OK(
                open_spec(&a, "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"%s\"}", url));
            memset(out, 0, n * 4);
            read_all(a, out);
            ck_assert(memcmp(in, out, n * 4) == 0);
            nds_array_free(a);
            free(in);
            free(out);
        }
}
END_TEST

/* A shard box above 1 GiB (identity hash, 6 minishard bits: the whole 8 x 4 x 2 grid of 32 MiB
 * chunks in shard 0) is written as a hashed layout, chunk by chunk. */
START_TEST(huge_shard_box_is_grouped) {
    nds_pc_sharding s = sharding("identity", 0, 6, 1, false, true);
    uint64_t size[3] = {4096, 2048, 256}, chunk[3] = {512, 512, 128},
             shape[4] = {4096, 2048, 256, 1};
    nds_array *a;
    NDS_OK(
        open_hashed(&a, "memory://h_huge/", "uint8", 1, size, chunk, &s, "\"encoding\":\"raw\""));
    uint64_t cs[4];
    nds_array_chunk_shape(a, cs);
    ck_assert(cs[0] == 512 && cs[1] == 512 && cs[2] == 128 && cs[3] == 1);
    nds_box one;
    box_of(&one, "[600:602, 6, 7, 0]", shape);
    uint8_t v[2] = {42, 43}, back[2];
    NDS_OK(nds_array_write(a, &one, v, NULL));
    NDS_OK(nds_array_read(a, &one, back, NULL));
    ck_assert(back[0] == 42 && back[1] == 43);
    ck_assert_int_eq(count_shards("memory://h_huge/"), 1);
    ck_assert_uint_eq(check_shards("memory://h_huge/", &s), 1);
    nds_array_free(a);
}
END_TEST

/* ---- partial writes keep other chunks' bytes ---------------------------------------------------
 */

/* The stored bytes of chunk id (NULL when absent), malloc'd. */
static uint8_t *stored_chunk(const char *url, const nds_pc_sharding *s, uint64_t id, size_t *len) {
    char key[64];
    size_t flen;
    shard_key(s, shard_of(s, id, NULL), key, sizeof key);
    uint8_t *f = get_raw(url, key, &flen);
    if (!f) return NULL;
    nds_pc_chunk_ref ref;
    NDS_OK(nds_pc_shard_find(s, f, flen, id, 1 << 20, &ref));
    uint8_t *out = NULL;
    if (ref.end) {
        *len = (size_t)(ref.end - ref.start);
        out = malloc(*len + 1);
        memcpy(out, f + ref.start, *len);
    }
    free(f);
    return out;
}

/* Another writer's shards (data gzip'd at level 1, where ndstore uses 6): a write of part of some
 * chunks leaves every other chunk's bytes exactly as that writer stored them. */
START_TEST(partial_write_keeps_other_chunks) {
    const char *url = "memory://h_keep/";
    nds_pc_sharding s = sharding("murmurhash3_x86_128", 0, 2, 2, true, true);
    uint64_t size[3] = {32, 24, 8}, chunk[3] = {8, 8, 4}, shape[4] = {32, 24, 8, 1};
    nds_array *a;
    NDS_OK(open_hashed(&a, url, "uint16", 1, size, chunk, &s, "\"encoding\":\"raw\""));
    nds_pc_grid g;
    nds_pc_grid_init(&g, size, chunk);
    uint16_t *vol = pattern_volume(shape);
    tchunk c[4][24];
    size_t nc[4] = {0};
    for (uint64_t cx = 0; cx < 4; cx++)
        for (uint64_t cy = 0; cy < 3; cy++)
            for (uint64_t cz = 0; cz < 2; cz++) {
                uint16_t raw[8 * 8 * 4]; /* x fastest */
                for (uint64_t z = 0; z < 4; z++)
                    for (uint64_t y = 0; y < 8; y++)
                        for (uint64_t x = 0; x < 8; x++)
                            raw[x + 8 * (y + 8 * z)] =
                                vol[((cx * 8 + x) * 24 + cy * 8 + y) * 8 + cz * 4 + z];
                uint64_t cell[3] = {cx, cy, cz}, id = nds_pc_morton(&g, cell),
                         sh = shard_of(&s, id, NULL);
                tchunk *t = &c[sh][nc[sh]++];
                t->id = id;
                t->data = gz((uint8_t *)raw, sizeof raw, 1, &t->len);
            }
    for (uint64_t sh = 0; sh < 4; sh++) {
        size_t len;
        char key[64];
        uint8_t *f = spec_shard(&s, c[sh], nc[sh], &len);
        shard_key(&s, sh, key, sizeof key);
        if (nc[sh]) put_raw(url, key, f, len);
        free(f);
    }
    /* Part of chunks (1..2, 1, 0..1) and one whole chunk (3, 2, 1). */
    nds_box part, whole_chunk;
    box_of(&part, "[12:20:3, 9:15, 1:7, 0]", shape);
    box_of(&whole_chunk, "[24:32, 16:24, 4:8, 0]", shape);
    uint16_t a1[3 * 6 * 6], a2[8 * 8 * 4];
    for (size_t k = 0; k < sizeof a1 / 2; k++) a1[k] = (uint16_t)(50000 + k);
    for (size_t k = 0; k < sizeof a2 / 2; k++) a2[k] = (uint16_t)(40000 + k);
    NDS_OK(nds_array_write(a, &part, a1, NULL));
    NDS_OK(nds_array_write(a, &whole_chunk, a2, NULL));
    size_t k = 0;
    for (uint64_t x = 12; x < 20; x += 3)
        for (uint64_t y = 9; y < 15; y++)
            for (uint64_t z = 1; z < 7; z++) vol[(x * 24 + y) * 8 + z] = a1[k++];
    k = 0;
    for (uint64_t x = 24; x < 32; x++)
        for (uint64_t y = 16; y < 24; y++)
            for (uint64_t z = 4; z < 8; z++) vol[(x * 24 + y) * 8 + z] = a2[k++];
    uint16_t *out = malloc(32 * 24 * 8 * 2);
    read_all(a, out);
    ck_assert(memcmp(out, vol, 32 * 24 * 8 * 2) == 0);
    size_t kept = 0, changed = 0, distinct = 0;
    for (uint64_t sh = 0; sh < 4; sh++)
        for (size_t i = 0; i < nc[sh]; i++) {
            uint64_t cell[3];
            nds_pc_morton_cell(&g, c[sh][i].id, cell);
            bool touched = (cell[0] >= 1 && cell[0] <= 2 && cell[1] == 1 && cell[2] <= 1) ||
                           (cell[0] == 3 && cell[1] == 2 && cell[2] == 1);
            size_t len = 0;
            uint8_t *now = stored_chunk(url, &s, c[sh][i].id, &len);
            ck_assert(now != NULL);
            bool same = len == c[sh][i].len && memcmp(now, c[sh][i].data, len) == 0;
            ck_assert_msg(same != touched, "chunk %llu (%s)", (unsigned long long)c[sh][i].id,
                          touched ? "written, unchanged" : "untouched, rewritten");
            kept += same, changed += !same;
            nds_buf six = {0}, plain = {0}; /* would ndstore's own gzip have made other bytes? */
            NDS_OK(nds_pc_gunzip(c[sh][i].data, c[sh][i].len, 1 << 20, &plain));
            NDS_OK(nds_pc_gzip(plain.data, plain.len, &six));
            distinct += six.len != c[sh][i].len || memcmp(six.data, c[sh][i].data, six.len) != 0;
            nds_buf_dispose(&six), nds_buf_dispose(&plain);
            free(now);
            free(c[sh][i].data);
        }
    ck_assert_uint_eq(changed, 5);
    ck_assert_uint_eq(kept, 24 - 5);
    ck_assert_uint_ge(distinct, 20); /* so "kept" means copied, not re-encoded */
    check_shards(url, &s);
    free(out);
    free(vol);
    nds_array_free(a);
}
END_TEST

/* ---- zero chunks and empty shards ------------------------------------------------------------ */

START_TEST(zero_chunks_removed_empty_shards_deleted) {
    const char *url = "memory://h_zero/";
    nds_pc_sharding s = sharding("murmurhash3_x86_128", 1, 1, 3, true, false);
    uint64_t size[3] = {32, 24, 8}, chunk[3] = {8, 8, 4}, shape[4] = {32, 24, 8, 1};
    nds_array *a;
    NDS_OK(open_hashed(&a, url, "uint16", 1, size, chunk, &s, "\"encoding\":\"raw\""));
    uint16_t *zeros = calloc(32 * 24 * 8, 2), *vol = pattern_volume(shape);
    write_all(a, zeros); /* nothing to store: no shard file appears */
    ck_assert_int_eq(count_shards(url), 0);
    write_all(a, vol);
    int shards = count_shards(url);
    ck_assert_int_ge(shards, 3);
    ck_assert_uint_eq(check_shards(url, &s), 24);
    /* Zero chunks (0, 0..2, 0) whole and part of chunk (1, 0, 0): the first leave their shards. */
    nds_box b;
    box_of(&b, "[0:10, 0:24, 0:4, 0]", shape);
    NDS_OK(nds_array_write(a, &b, zeros, NULL));
    nds_pc_grid g;
    nds_pc_grid_init(&g, size, chunk);
    for (uint64_t gy = 0; gy < 3; gy++) {
        size_t len;
        uint64_t cell[3] = {0, gy, 0}, cell1[3] = {1, gy, 0};
        ck_assert_ptr_null(stored_chunk(url, &s, nds_pc_morton(&g, cell), &len));
        uint8_t *p = stored_chunk(url, &s, nds_pc_morton(&g, cell1), &len);
        ck_assert_ptr_nonnull(p);
        free(p);
    }
    ck_assert_uint_eq(check_shards(url, &s), 21);
    uint16_t *out = malloc(32 * 24 * 8 * 2);
    read_all(a, out);
    for (uint64_t x = 0; x < 10; x++)
        for (uint64_t y = 0; y < 24; y++)
            for (uint64_t z = 0; z < 4; z++) vol[(x * 24 + y) * 8 + z] = 0;
    ck_assert(memcmp(out, vol, 32 * 24 * 8 * 2) == 0);
    write_all(a, zeros); /* every chunk zero: every shard file deleted */
    ck_assert_int_eq(count_shards(url), 0);
    read_all(a, out);
    ck_assert(memcmp(out, zeros, 32 * 24 * 8 * 2) == 0);
    free(out), free(zeros), free(vol);
    nds_array_free(a);
}
END_TEST

/* ---- concurrent writers ---------------------------------------------------------------------- */

#define CONC_ROUNDS 20
#define CONC_WRITERS 8
/* 8 chunks along x (4 x 8 x 8 voxels, 2 channels), hashed into 2 shards. */
#define CONC_SPEC                                                                                  \
    "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"%s\",\"create\":true,\"open\":true,"   \
    "\"multiscale_metadata\":{\"data_type\":\"uint16\",\"num_channels\":2},\"scale_metadata\":{"   \
    "\"size\":[32,8,8],\"chunk_size\":[4,8,8],\"sharding\":{\"@type\":"                            \
    "\"neuroglancer_uint64_sharded_v1\",\"preshift_bits\":0,\"minishard_bits\":1,\"shard_bits\":"  \
    "1,"                                                                                           \
    "\"hash\":\"murmurhash3_x86_128\",\"data_encoding\":\"gzip\"}}}"

/* Writer w, with its own handle: its own chunk w each round, whole in odd rounds and in two
 * partial writes in even ones, so every round leaves w * 1000 + round in it. Every writer's
 * chunk shares a shard with three or so others. */
static int conc_writer(const char *url, int w) {
    nds_array *a;
    int rc = open_spec(&a, CONC_SPEC, url);
    uint64_t shape[4] = {32, 8, 8, 2};
    uint16_t v[4 * 8 * 8 * 2];
    for (int round = 0; round < CONC_ROUNDS && !rc; round++) {
        char region[64];
        nds_box b;
        for (size_t i = 0; i < sizeof v / 2; i++) v[i] = (uint16_t)(w * 1000 + round);
        snprintf(region, sizeof region, "[%d:%d, :, %s]", w * 4, w * 4 + 4,
                 round % 2 ? ":" : "0:4");
        if (!(rc = nds_box_parse(&b, region, 4, shape))) rc = nds_array_write(a, &b, v, NULL);
        if (!rc && round % 2 == 0) {
            snprintf(region, sizeof region, "[%d:%d, :, 4:8]", w * 4, w * 4 + 4);
            if (!(rc = nds_box_parse(&b, region, 4, shape))) rc = nds_array_write(a, &b, v, NULL);
        }
    }
    nds_array_free(a);
    return rc;
}

typedef struct conc_arg {
    const char *url;
    int w, rc;
} conc_arg;

static void *conc_thread(void *p) {
    conc_arg *c = p;
    c->rc = conc_writer(c->url, c->w);
    return NULL;
}

static void conc_check(const char *url) {
    nds_array *a;
    NDS_OK(open_spec(&a, CONC_SPEC, url));
    uint16_t out[32 * 8 * 8 * 2];
    read_all(a, out);
    for (size_t i = 0; i < sizeof out / 2; i++)
        ck_assert_msg(out[i] == (i / (8 * 8 * 2 * 4)) * 1000 + CONC_ROUNDS - 1,
                      "element %zu is %u: an update was lost", i, out[i]);
    nds_array_free(a);
}

START_TEST(concurrent_threads) {
    const char *url = "memory://h_conc/";
    pthread_t t[CONC_WRITERS];
    conc_arg c[CONC_WRITERS];
    for (int i = 0; i < CONC_WRITERS; i++) {
        c[i] = (conc_arg){url, i, 0};
        ck_assert_int_eq(pthread_create(&t[i], NULL, conc_thread, &c[i]), 0);
    }
    for (int i = 0; i < CONC_WRITERS; i++) {
        pthread_join(t[i], NULL);
        ck_assert_msg(c[i].rc == 0, "writer %d: %d", i, c[i].rc);
    }
    conc_check(url);
    ck_assert_int_eq(count_shards(url), 2);
}
END_TEST

/* The same with processes on a file store. The test process opens nothing before the children
 * are done (no thread pool crosses fork). */
START_TEST(concurrent_processes) {
    char *dir = nds_test_tmpdir(), url[1200];
    snprintf(url, sizeof url, "file://%s/v/", dir);
    pid_t pid[CONC_WRITERS];
    fflush(NULL);
    for (int i = 0; i < CONC_WRITERS; i++) {
        pid[i] = fork();
        if (pid[i] == 0) {
            alarm(60);
            int rc = conc_writer(url, i);
            if (rc) fprintf(stderr, "writer %d: %s\n", i, last_message());
            _exit(rc ? 1 : 0);
        }
        ck_assert_int_gt(pid[i], 0);
    }
    for (int i = 0; i < CONC_WRITERS; i++) {
        int status;
        while (waitpid(pid[i], &status, 0) < 0 && errno == EINTR) {
        }
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer process %d failed", i);
    }
    conc_check(url);
    ck_assert_int_eq(count_shards(url), 2);
    nds_test_rmtree(dir);
    free(dir);
}
END_TEST

/* ---- a competing writer between read and write ----------------------------------------------- */

/* A kvstore over the memory store where, before a conditional write of a shard file, another
 * writer (race_left times) stores chunk race_id into that shard first, so the write conflicts. */
static int race_left;
static uint64_t race_id;
static nds_pc_sharding race_s;

static int rc_parse_url(const char *rest, json_object *spec) {
    return nds_kv_driver_memory.parse_url(rest, spec);
}
static int rc_open(void **state, const json_object *spec) {
    return nds_kv_driver_memory.open(state, spec);
}
static void rc_close(void *state) { nds_kv_driver_memory.close(state); }
static void rc_url_base(void *state, char *buf, size_t cap) {
    (void)state, snprintf(buf, cap, "pcrace://");
}
static int rc_read(void *s, const char *key, const nds_read_options *o,
                   const nds_byte_range *ranges, size_t n, nds_read_result *out) {
    return nds_kv_driver_memory.read(s, key, o, ranges, n, out);
}
static int rc_list(void *s, const char *prefix, nds_list_fn fn, void *ctx) {
    return nds_kv_driver_memory.list(s, prefix, fn, ctx);
}

/* The competitor: chunk race_id (64 bytes of 0x5a, a raw 4^3 uint8 chunk) into the stored shard. */
static void compete(void *s, const char *key) {
    nds_read_result r;
    NDS_OK(nds_kv_driver_memory.read(s, key, NULL, NULL, 0, &r));
    bool have = r.state == NDS_READ_VALUE;
    uint8_t bytes[64];
    memset(bytes, 0x5a, sizeof bytes);
    nds_pc_shard_chunk c = {race_id, bytes, sizeof bytes};
    nds_buf f = {0};
    nds_pc_changes changes = {&c, 1};
    NDS_OK(nds_pc_shard_update(&race_s, shard_of(&race_s, race_id, NULL),
                               have ? r.value.data : NULL, have ? r.value.len : 0, 1 << 20,
                               &changes, &f));
    struct iovec shard = {f.data, f.len};
    NDS_OK(nds_kv_driver_memory.write(s, key, &shard, 1, NULL, NULL));
    nds_buf_dispose(&f);
    nds_read_result_dispose(&r);
}

static int rc_write(void *s, const char *key, const struct iovec *iov, size_t iovcnt,
                    const nds_write_options *o, nds_generation *gen) {
    if (o && o->if_equal.kind != NDS_GEN_NONE && strstr(key, ".shard") && race_left > 0) {
        race_left--;
        compete(s, key);
    }
    return nds_kv_driver_memory.write(s, key, iov, iovcnt, o, gen);
}

static const nds_kv_driver race_driver = {
    .version = NDS_KV_DRIVER_VERSION,
    .name = "pcrace",
    .url_scheme = "pcrace",
    .capabilities = NDS_KV_CAP_ATOMIC_CONDITIONAL_WRITE,
    .parse_url = rc_parse_url,
    .open = rc_open,
    .close = rc_close,
    .url_base = rc_url_base,
    .read = rc_read,
    .write = rc_write,
    .list = rc_list,
};

/* Our write of chunk A (in part, then whole) and the competitor's chunk B of the same shard: each
 * conflict makes the shard's update start over from what the competitor stored; both survive. */
START_TEST(racing_writer_retries) {
    NDS_OK(nds_kv_driver_register(&race_driver));
    race_s = sharding("murmurhash3_x86_128", 0, 0, 1, false, false);
    uint64_t size[3] = {8, 8, 8}, chunk[3] = {4, 4, 4}, shape[4] = {8, 8, 8, 1};
    nds_array *a;
    NDS_OK(open_hashed(&a, "pcrace://race/v/", "uint8", 1, size, chunk, &race_s,
                       "\"encoding\":\"raw\""));
    nds_pc_grid g;
    nds_pc_grid_init(&g, size, chunk);
    uint64_t ida = 0, cell_a[3], cell_b[3];
    for (race_id = 1; shard_of(&race_s, race_id, NULL) != shard_of(&race_s, ida, NULL); race_id++) {
    }
    ck_assert_uint_lt(race_id, 8);
    nds_pc_morton_cell(&g, ida, cell_a);
    nds_pc_morton_cell(&g, race_id, cell_b);
    char region[64];
    nds_box one, whole_a;
    snprintf(region, sizeof region, "[%llu, %llu, %llu, 0]", (unsigned long long)cell_a[0] * 4 + 1,
             (unsigned long long)cell_a[1] * 4 + 2, (unsigned long long)cell_a[2] * 4 + 3);
    box_of(&one, region, shape);
    uint8_t v = 7;
    race_left = 2; /* two conflicts in a row: the third attempt lands */
    NDS_OK(nds_array_write(a, &one, &v, NULL));
    ck_assert_int_eq(race_left, 0);
    uint8_t vol[512];
    read_all(a, vol);
    for (uint64_t x = 0; x < 8; x++)
        for (uint64_t y = 0; y < 8; y++)
            for (uint64_t z = 0; z < 8; z++) {
                bool in_b = x / 4 == cell_b[0] && y / 4 == cell_b[1] && z / 4 == cell_b[2];
                bool is_v =
                    x == cell_a[0] * 4 + 1 && y == cell_a[1] * 4 + 2 && z == cell_a[2] * 4 + 3;
                ck_assert_uint_eq(vol[(x * 8 + y) * 8 + z], in_b ? 0x5a : is_v ? 7 : 0);
            }
    /* A whole-chunk write of A races too, and keeps B. */
    snprintf(region, sizeof region, "[%llu:%llu, %llu:%llu, %llu:%llu, 0]",
             (unsigned long long)cell_a[0] * 4, (unsigned long long)cell_a[0] * 4 + 4,
             (unsigned long long)cell_a[1] * 4, (unsigned long long)cell_a[1] * 4 + 4,
             (unsigned long long)cell_a[2] * 4, (unsigned long long)cell_a[2] * 4 + 4);
    box_of(&whole_a, region, shape);
    uint8_t nine[64];
    memset(nine, 9, sizeof nine);
    race_left = 1;
    NDS_OK(nds_array_write(a, &whole_a, nine, NULL));
    ck_assert_int_eq(race_left, 0);
    read_all(a, vol);
    for (uint64_t i = 0; i < 512; i++) {
        uint64_t x = i / 64, y = i / 8 % 8, z = i % 8;
        bool in_b = x / 4 == cell_b[0] && y / 4 == cell_b[1] && z / 4 == cell_b[2];
        bool in_a = x / 4 == cell_a[0] && y / 4 == cell_a[1] && z / 4 == cell_a[2];
        ck_assert_uint_eq(vol[i], in_b ? 0x5a : in_a ? 9 : 0);
    }
    nds_array_free(a);
}
END_TEST

/* ---- corrupt shards -------------------------------------------------------------------------- */

typedef enum damage { TRUNCATE, END_FAR, START_AFTER_END, END_ODD, CHUNK_TOO_LONG } damage;

/* Damages chunk 0's entries in shard file f (len bytes; *len may shrink). */
static void damage_shard(const nds_pc_sharding *s, damage d, uint8_t *f, size_t *len) {
    uint64_t mi, a = 0, b = 0;
    shard_of(s, 0, &mi);
    for (int k = 7; k >= 0; k--) a = a << 8 | f[16 * mi + k], b = b << 8 | f[16 * mi + 8 + k];
    size_t index_end = (size_t)16 << s->minishard_bits, n = (size_t)(b - a) / 24;
    if (d == TRUNCATE) *len = 10;
    if (d == END_FAR) put64le(f + 16 * mi + 8, 5000);
    if (d == START_AFTER_END) put64le(f + 16 * mi, b + 1);
    if (d == END_ODD) put64le(f + 16 * mi + 8, a + 23);
    if (d == CHUNK_TOO_LONG) /* chunk 0 has the smallest id: first in its minishard index */
        put64le(f + index_end + a + 16 * n, 900);
}

START_TEST(corrupt_shards_refused) {
    static const struct {
        damage d;
        const char *what, *msg;
    } cases[] = {
        {TRUNCATE, "shorter than its index", "shorter than its 32-byte shard index"},
        {END_FAR, "index entry past the end", "past the end of the shard"},
        {START_AFTER_END, "reversed index entry", "reversed"},
        {END_ODD, "index not a multiple of 24", "multiple of 24"},
        {CHUNK_TOO_LONG, "chunk past the end", "past the end"},
    };
    nds_pc_sharding s = sharding("murmurhash3_x86_128", 0, 1, 1, false, false);
    uint64_t size[3] = {8, 8, 8}, chunk[3] = {4, 4, 4}, shape[4] = {8, 8, 8, 1};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char url[64], key[64];
        snprintf(url, sizeof url, "memory://h_bad%zu/", i);
        nds_array *a;
        NDS_OK(open_hashed(&a, url, "uint8", 1, size, chunk, &s, "\"encoding\":\"raw\""));
        uint8_t vol[512];
        memset(vol, 3, sizeof vol);
        write_all(a, vol);
        /* Chunk 0's shard, corrupted. */
        shard_key(&s, shard_of(&s, 0, NULL), key, sizeof key);
        size_t len;
        uint8_t *f = get_raw(url, key, &len);
        ck_assert_ptr_nonnull(f);
        damage_shard(&s, cases[i].d, f, &len);
        put_raw(url, key, f, len);
        nds_box one, whole_chunk;
        box_of(&one, "[1, 1, 1, 0]", shape);
        box_of(&whole_chunk, "[0:4, 0:4, 0:4, 0]", shape);
        uint8_t v = 9, many[64] = {0};
        EXPECT_ERR(nds_array_write(a, &one, &v, NULL), NDS_ECORRUPT, cases[i].msg);
        ck_assert_msg(strstr(last_message(), key), "%s: %s", cases[i].what, last_message());
        EXPECT_ERR(nds_array_write(a, &whole_chunk, many, NULL), NDS_ECORRUPT, key);
        uint8_t out;
        EXPECT_ERR(nds_array_read(a, &one, &out, NULL), NDS_ECORRUPT, key);
        size_t after_len;
        uint8_t *after = get_raw(url, key, &after_len);
        ck_assert_msg(after_len == len && memcmp(after, f, len) == 0, "%s: the file changed",
                      cases[i].what);
        free(after);
        free(f);
        nds_array_free(a);
    }
}
END_TEST

/* ---- stats and verify see the chunks inside shards ------------------------------------------- */

typedef struct bad_list {
    char keys[8][64];
    char messages[8][256];
    int n;
} bad_list;

static int note_bad(void *ctx, const char *key, int status, const char *message) {
    bad_list *b = ctx;
    ck_assert_int_eq(status, NDS_ECORRUPT);
    if (b->n < 8) {
        snprintf(b->keys[b->n], sizeof b->keys[0], "%s", key);
        snprintf(b->messages[b->n], sizeof b->messages[0], "%s", message);
    }
    b->n++;
    return 0;
}

static uint64_t stored_bytes_fn_total;
static int sum_sizes_fn(void *ctx, const char *key, uint64_t size) {
    (void)ctx;
    if (strstr(key, ".shard")) stored_bytes_fn_total += size;
    return 0;
}

/* Every chunk of a hashed volume is counted by stats and decoded by verify (both used to see
 * none: 0 chunks stored, 0 checked). 64 chunks written, 13 of them all zero (not stored). */
START_TEST(stats_and_verify_see_hashed_chunks) {
    nds_pc_sharding s = sharding("murmurhash3_x86_128", 1, 2, 2, true, true);
    uint64_t size[3] = {16, 16, 16}, chunk[3] = {4, 4, 4}, shape[4] = {16, 16, 16, 1};
    nds_array *a;
    NDS_OK(open_hashed(&a, "memory://h_stats/", "uint16", 1, size, chunk, &s,
                       "\"encoding\":\"raw\""));
    uint16_t *vol = pattern_volume(shape);
    for (uint64_t i = 0; i < 16 * 16 * 16; i++) /* chunks whose x index is 0 and z index 3: zero */
        if ((i / 256) / 4 == 0 && (i % 16) / 4 == 3) vol[i] = 0;
    write_all(a, vol);
    free(vol);
    nds_array_stats st;
    NDS_OK(nds_array_stats_get(a, &st));
    ck_assert_uint_eq(st.chunks_total, 64);
    ck_assert_uint_eq(st.chunks_stored, 60);
    nds_kvstore *kv;
    NDS_OK(nds_kvstore_open(&kv, "memory://h_stats/", NULL));
    NDS_OK(nds_kvstore_list(kv, "1_1_1/", sum_sizes_fn, NULL));
    nds_kvstore_free(kv);
    ck_assert_uint_eq(st.bytes_stored, stored_bytes_fn_total);
    uint64_t checked = 0, bad = 1;
    bad_list b = {0};
    NDS_OK(nds_array_verify(a, note_bad, &b, &checked, &bad));
    ck_assert_uint_eq(checked, 60);
    ck_assert_uint_eq(bad, 0);
    ck_assert_int_eq(b.n, 0);
    nds_array_free(a);
}
END_TEST

/* A shard of garbage and a shard with one chunk's data damaged: verify names both files (the
 * garbage one by what is wrong with its index) and still checks the chunks of the others; stats
 * fails naming the garbage shard instead of counting around it. */
START_TEST(verify_names_garbage_shards) {
    nds_pc_sharding s = sharding("murmurhash3_x86_128", 0, 1, 1, false, true);
    uint64_t size[3] = {8, 8, 8}, chunk[3] = {4, 4, 4}, shape[4] = {8, 8, 8, 1};
    const char *url = "memory://h_garbage/";
    nds_array *a;
    NDS_OK(open_hashed(&a, url, "uint16", 1, size, chunk, &s, "\"encoding\":\"raw\""));
    uint16_t *vol = pattern_volume(shape);
    write_all(a, vol);
    free(vol);
    char k0[64], k1[64];
    shard_key(&s, 0, k0, sizeof k0);
    shard_key(&s, 1, k1, sizeof k1);
    ck_assert_int_eq(count_shards(url), 2);
    uint8_t garbage[200];
    for (size_t i = 0; i < sizeof garbage; i++) garbage[i] = (uint8_t)(i * 97 + 13);
    put_raw(url, k0, garbage, sizeof garbage);
    size_t len;
    uint8_t *f = get_raw(url, k1, &len);
    ck_assert_ptr_nonnull(f);
    f[len - 60] ^= 0xff; /* inside the last minishard's chunk data (gzip'd): fails to decode */
    put_raw(url, k1, f, len);
    free(f);
    uint64_t checked = 0, bad = 0;
    bad_list b = {0};
    NDS_OK(nds_array_verify(a, note_bad, &b, &checked, &bad));
    ck_assert_int_eq(b.n, 2);
    ck_assert_str_eq(b.keys[0], k0);
    ck_assert_msg(strstr(b.messages[0], "shard"), "%s", b.messages[0]);
    ck_assert_str_eq(b.keys[1], k1);
    ck_assert_msg(strstr(b.messages[1], "chunk"), "%s", b.messages[1]);
    ck_assert_uint_ge(bad, 2);
    ck_assert_uint_gt(checked, 1); /* the chunks of the damaged but readable shard */
    nds_array_stats st;
    EXPECT_ERR(nds_array_stats_get(a, &st), NDS_ECORRUPT, k0);
    nds_array_free(a);
}
END_TEST

/* Damage aimed at one part of a shard file of raw minishard indexes and gzip'd chunks: the shard
 * index (its first used entry runs past the end), a minishard index (its first chunk's size made
 * huge), a chunk's data (a byte inside its gzip stream), and the file cut in half. */
enum shard_damage { DAMAGE_SHARD_INDEX, DAMAGE_MINISHARD_INDEX, DAMAGE_CHUNK, DAMAGE_TRUNCATED };

static uint64_t get64le(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static void damage_part(uint8_t *f, size_t *len, enum shard_damage kind, unsigned minishard_bits) {
    size_t index_len = (size_t)16 << minishard_bits, m = 0;
    while (m + 1 < ((size_t)1 << minishard_bits) && get64le(f + 16 * m + 8) == get64le(f + 16 * m))
        m++; /* the first minishard that holds chunks */
    uint64_t start = get64le(f + 16 * m), end = get64le(f + 16 * m + 8), n = (end - start) / 24;
    ck_assert_uint_gt(n, 0);
    switch (kind) {
    case DAMAGE_SHARD_INDEX: put64le(f + 16 * m + 8, *len + 4096); break;
    case DAMAGE_MINISHARD_INDEX: put64le(f + index_len + start + 16 * n, UINT64_C(1) << 40); break;
    case DAMAGE_CHUNK: f[index_len + 20] ^= 0xff; break; /* chunks come first after the index */
    case DAMAGE_TRUNCATED: *len /= 2; break;
    }
}

/* Each kind of damage to one of two shards (issue 21): verify reports that shard once, by key,
 * saying what is wrong, returns 0 and still checks the other shard's chunks; stats fails naming
 * the shard when its indexes do not parse, and counts every chunk when only a chunk's data is bad.
 * The intact volume's counts are the chunks written. */
START_TEST(verify_reports_each_part_of_a_shard) {
    static const char *says[] = {"shard index entry", "runs past the end of the shard", "gzip",
                                 "past the end of the shard"};
    nds_pc_sharding s = sharding("murmurhash3_x86_128", 0, 1, 1, false, true);
    uint64_t size[3] = {8, 8, 8}, chunk[3] = {4, 4, 4}, shape[4] = {8, 8, 8, 1};
    for (int kind = DAMAGE_SHARD_INDEX; kind <= DAMAGE_TRUNCATED; kind++) {
        char url[64], k0[64];
        snprintf(url, sizeof url, "memory://h_part%d/", kind);
        nds_array *a;
        NDS_OK(open_hashed(&a, url, "uint16", 1, size, chunk, &s, "\"encoding\":\"raw\""));
        uint16_t *vol = pattern_volume(shape);
        write_all(a, vol);
        free(vol);
        uint64_t checked = 0, bad = 1;
        NDS_OK(nds_array_verify(a, NULL, NULL, &checked, &bad));
        ck_assert_uint_eq(checked, 8);
        ck_assert_uint_eq(bad, 0);
        shard_key(&s, 0, k0, sizeof k0);
        size_t len;
        uint8_t *f = get_raw(url, k0, &len);
        ck_assert_ptr_nonnull(f);
        damage_part(f, &len, (enum shard_damage)kind, s.minishard_bits);
        put_raw(url, k0, f, len);
        free(f);
        bad_list b = {0};
        NDS_OK(nds_array_verify(a, note_bad, &b, &checked, &bad));
        ck_assert_int_eq(b.n, 1);
        ck_assert_str_eq(b.keys[0], k0);
        ck_assert_msg(strstr(b.messages[0], says[kind]), "damage %d: %s", kind, b.messages[0]);
        ck_assert_uint_ge(bad, 1);
        ck_assert_uint_ge(checked, 2); /* the other shard's chunks, and the bad one */
        nds_array_stats st;
        if (kind == DAMAGE_CHUNK) {
            NDS_OK(nds_array_stats_get(a, &st));
            ck_assert_uint_eq(st.chunks_stored, 8);
        } else {
            EXPECT_ERR(nds_array_stats_get(a, &st), NDS_ECORRUPT, k0);
        }
        nds_array_free(a);
    }
}
END_TEST

/* ---- transactions ---------------------------------------------------------------------------- */

START_TEST(transactions_refused) {
    nds_pc_sharding s = sharding("murmurhash3_x86_128", 0, 1, 2, false, false);
    uint64_t size[3] = {8, 8, 8}, chunk[3] = {4, 4, 4}, shape[4] = {8, 8, 8, 1};
    nds_array *a;
    NDS_OK(open_hashed(&a, "memory://h_txn/", "uint8", 1, size, chunk, &s, "\"encoding\":\"raw\""));
    uint8_t vol[512], out[512];
    memset(vol, 4, sizeof vol);
    write_all(a, vol);
    nds_txn *t;
    NDS_OK(nds_txn_begin(&t, NULL));
    nds_io_options o = NDS_IO_OPTIONS_INIT;
    o.txn = t;
    nds_box one;
    box_of(&one, "[1, 1, 1, 0]", shape);
    uint8_t v = 9;
    EXPECT_ERR(nds_array_write(a, &one, &v, &o), NDS_EUNSUPPORTED, "memory://h_txn/");
    ck_assert(strstr(last_message(), "transaction"));
    nds_box all;
    box_of(&all, "[:, :, :, :]", shape);
    NDS_OK(nds_array_read(a, &all, out, &o)); /* the transaction is still usable */
    ck_assert(memcmp(out, vol, 512) == 0);
    NDS_OK(nds_txn_commit(t));
    nds_txn_free(t);
    nds_array_free(a);
    /* Opened inside a transaction: the same. */
    NDS_OK(nds_txn_begin(&t, NULL));
    nds_open_options oo = NDS_OPEN_OPTIONS_INIT;
    oo.txn = t;
    NDS_OK(nds_array_open(
        &a, "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"memory://h_txn/\"}", &oo));
    EXPECT_ERR(nds_array_write(a, &one, &v, NULL), NDS_EUNSUPPORTED, "transaction");
    NDS_OK(nds_array_read(a, &all, out, NULL));
    ck_assert(memcmp(out, vol, 512) == 0);
    nds_array_free(a);
    NDS_OK(nds_txn_commit(t));
    nds_txn_free(t);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("precomputed_hashed");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, exact_bytes_murmur);
    tcase_add_test(tc, roundtrip_hashed_layouts);
    tcase_add_test(tc, huge_shard_box_is_grouped);
    tcase_add_test(tc, partial_write_keeps_other_chunks);
    tcase_add_test(tc, zero_chunks_removed_empty_shards_deleted);
    tcase_add_test(tc, concurrent_threads);
    tcase_add_test(tc, concurrent_processes);
    tcase_add_test(tc, racing_writer_retries);
    tcase_add_test(tc, corrupt_shards_refused);
    tcase_add_test(tc, transactions_refused);
    tcase_add_test(tc, stats_and_verify_see_hashed_chunks);
    tcase_add_test(tc, verify_names_garbage_shards);
    tcase_add_test(tc, verify_reports_each_part_of_a_shard);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return nds_test_run(suite()); }
