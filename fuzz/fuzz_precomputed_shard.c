/* libFuzzer harness for the neuroglancer_uint64_sharded_v1 shard index and minishard index parsers.
 *
 * Input: byte 0 picks the sharding (bits 0-1 minishard_bits 0..3, bit 2 murmurhash3, bit 3 gzip
 * minishard indexes, bit 4 gzip data, bits 5-7 preshift_bits 0..7; shard_bits is 2), byte 1 the
 * shard number (0..3); the rest is a shard file. The file goes through the whole-shard parser, each
 * shard index entry's minishard index through the minishard parser, and the byte-range reader (from
 * a memory kvstore) for chunk ids 0..15. When the whole shard parses, its chunks are rebuilt into a
 * new shard that must parse back to the same ids and bytes. Invariant violations trap; errors are
 * expected. Threading: single-threaded. Ownership: everything is freed per input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ndstore/ndstore.h"
#include "../formats/precomputed_shard.h"

#define MAX_ENTRIES 4096
#define DATA_LIMIT (1u << 20)

static void check(int ok) {
    if (!ok) __builtin_trap();
}

static uint64_t get64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* Each shard index entry's bytes through the minishard parser on its own. */
static void minishards(const nds_pc_sharding *s, const uint8_t *f, size_t len) {
    uint64_t index_end = (uint64_t)16 << s->minishard_bits;
    for (uint64_t m = 0; m < ((uint64_t)1 << s->minishard_bits) && 16 * m + 16 <= len; m++) {
        uint64_t a = get64(f + 16 * m), b = get64(f + 16 * m + 8);
        if (a > b || b > len || index_end + b > len) continue;
        nds_pc_refs refs = {NULL, 0, 0};
        if (nds_pc_minishard_decode(s, f + index_end + a, (size_t)(b - a), index_end, len,
                                    MAX_ENTRIES, &refs) == 0)
            for (size_t i = 0; i < refs.n; i++)
                check(refs.v[i].start <= refs.v[i].end && refs.v[i].end <= len);
        free(refs.v);
    }
}

/* A parsed shard rebuilt from its chunks parses back to the same chunks. */
static void rebuild(const nds_pc_sharding *s, uint64_t shard, const uint8_t *f,
                    const nds_pc_chunk_ref *refs, size_t n) {
    nds_pc_shard_chunk *c = calloc(n ? n : 1, sizeof *c);
    nds_buf *data = calloc(n ? n : 1, sizeof *data);
    size_t ok = 0;
    for (size_t i = 0; c && data && i < n; i++) {
        if (nds_pc_chunk_data(s, f + refs[i].start, (size_t)(refs[i].end - refs[i].start),
                              DATA_LIMIT, &data[ok]) != 0)
            continue;
        c[ok] = (nds_pc_shard_chunk){refs[i].id, data[ok].data, data[ok].len};
        ok++;
    }
    nds_buf out = {0};
    if (c && data && nds_pc_shard_build(s, c, ok, &out) == 0) {
        nds_pc_chunk_ref *back = NULL;
        size_t m = 0;
        check(nds_pc_shard_parse(s, shard, out.data, out.len, MAX_ENTRIES, &back, &m) == 0);
        check(m == ok);
        free(back);
    }
    nds_buf_dispose(&out);
    for (size_t i = 0; data && i < n; i++) nds_buf_dispose(&data[i]);
    free(data);
    free(c);
}

static void read_ranges(const nds_pc_sharding *s, uint64_t shard, const uint8_t *f, size_t len) {
    nds_kvstore *kv = NULL;
    char key[64];
    if (nds_kvstore_open(&kv, "memory://fuzz/shard/", NULL) != 0) return;
    if (nds_pc_shard_key("s", s, shard, key, sizeof key) == 0 &&
        nds_kvstore_write(kv, key, f, len, NULL, NULL) == 0)
        for (uint64_t id = 0; id < 16; id++) {
            nds_buf out = {0};
            int present = 0;
            uint64_t sh, mi;
            nds_pc_shard_of(s, id, &sh, &mi);
            if (sh == shard &&
                nds_pc_shard_read(kv, "s", s, id, &(nds_pc_limits){MAX_ENTRIES, DATA_LIMIT}, &out,
                                  &present) == 0)
                check(!present || out.len <= DATA_LIMIT);
            nds_buf_dispose(&out);
        }
    nds_kvstore_delete_range(kv, "", "");
    nds_kvstore_free(kv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2 || size > (1u << 20)) return 0;
    nds_pc_sharding s = {true,
                         (unsigned)(data[0] >> 5),
                         data[0] & 3u,
                         2,
                         (data[0] & 4) != 0,
                         (data[0] & 8) != 0,
                         (data[0] & 16) != 0};
    uint64_t shard = data[1] & 3u;
    const uint8_t *f = data + 2;
    size_t len = size - 2;
    nds_pc_chunk_ref *refs = NULL;
    size_t n = 0;
    if (nds_pc_shard_parse(&s, shard, f, len, MAX_ENTRIES, &refs, &n) == 0) {
        for (size_t i = 0; i < n; i++)
            check(refs[i].start >= 16u << s.minishard_bits && refs[i].end <= len);
        rebuild(&s, shard, f, refs, n);
    }
    free(refs);
    minishards(&s, f, len);
    read_ranges(&s, shard, f, len);
    return 0;
}
