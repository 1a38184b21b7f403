/* libFuzzer harness for writes to part of a neuroglancer precomputed shard box (update_chunk): the
 * first input byte picks the sharding (bit 0 gzip data, bit 1 gzip minishard indexes, bit 2 two
 * minishards instead of one), the rest is the stored shard file of a 16x16x8 uint16 volume in 8x8x4
 * chunks held in one shard.
 *
 * Decodes the whole shard through the format vtable, then writes a box (drawn from the input's
 * length) over it with update_chunk. Invariants: nothing crashes or reads out of bounds; when the
 * whole shard decodes, the partial write succeeds and gives a shard that decodes to the old
 * elements with the box's new ones (or, when it reports the shard empty, to all zeros). Over a
 * shard that does not decode, the write may fail or keep the chunks it does not reach. Threading:
 * single-threaded, as libFuzzer runs it. Ownership: everything is freed per input.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_format.h"

extern const nds_format nds_format_precomputed;
#define F nds_format_precomputed

enum { X = 16, Y = 16, Z = 8, BYTES = X * Y * Z * 2 };

static int open_volume(nds_kvstore *kv, unsigned config, void **st, nds_array_meta *meta) {
    char info[1024];
    snprintf(info, sizeof info,
             "{\"@type\":\"neuroglancer_multiscale_volume\",\"type\":\"image\",\"data_type\":"
             "\"uint16\",\"num_channels\":1,\"scales\":[{\"key\":\"s0\",\"size\":[16,16,8],"
             "\"resolution\":[1,1,1],\"voxel_offset\":[0,0,0],\"chunk_sizes\":[[8,8,4]],"
             "\"encoding\":\"raw\",\"sharding\":{\"@type\":\"neuroglancer_uint64_sharded_v1\","
             "\"preshift_bits\":%u,\"minishard_bits\":%u,\"shard_bits\":0,\"hash\":\"identity\","
             "\"minishard_index_encoding\":\"%s\",\"data_encoding\":\"%s\"}}]}",
             config & 4 ? 2u : 3u, config & 4 ? 1u : 0u, config & 2 ? "gzip" : "raw",
             config & 1 ? "gzip" : "raw");
    return fuzz_open_document(&F, kv, "info", info, st, meta);
}

/* The merge of the partial write: element (x, y, z) of the box gets x * 97 + y * 7 + z + 1. */
static void merge_box(void *ctx, uint8_t *chunk) {
    const nds_box *b = ctx;
    for (uint64_t x = b->start[0]; x < b->stop[0]; x += b->step[0])
        for (uint64_t y = b->start[1]; y < b->stop[1]; y += b->step[1])
            for (uint64_t z = b->start[2]; z < b->stop[2]; z += b->step[2]) {
                uint16_t v = (uint16_t)(x * 97 + y * 7 + z + 1);
                memcpy(chunk + 2 * ((x * Y + y) * Z + z), &v, 2);
            }
}

/* A box inside the volume drawn from n. */
static void draw_box(size_t n, nds_box *b) {
    static const uint64_t shape[3] = {X, Y, Z};
    memset(b, 0, sizeof *b);
    b->rank = 4;
    for (int d = 0; d < 3; d++) {
        b->start[d] = n % shape[d];
        n /= shape[d];
        b->stop[d] = b->start[d] + 1 + n % (shape[d] - b->start[d]);
        n /= shape[d];
        b->step[d] = 1;
    }
    b->step[0] = 1 + n % 2;
    b->stop[3] = b->step[3] = 1;
}

static void exercise(nds_kvstore *kv, unsigned config, const uint8_t *shard, size_t len) {
    void *st = NULL;
    nds_array_meta m;
    if (open_volume(kv, config, &st, &m) != 0) return;
    uint64_t cell[4] = {0, 0, 0, 0};
    uint8_t *whole = malloc(BYTES), *chunk = malloc(BYTES), *got = malloc(BYTES);
    if (whole && chunk && got) {
        int ok = fuzz_decode(&F, st, cell, shard, len, whole, BYTES) == 0;
        nds_box box;
        draw_box(len, &box);
        memset(chunk, 0x5a, BYTES); /* what the format neither decodes nor encodes */
        nds_buf out = {0};
        nds_update_request u = {.cell = cell, .old = shard, .old_len = len, .changed = &box,
                                .merge = merge_box, .merge_ctx = &box, .chunk = chunk, .out = &out};
        int rc = F.update_chunk(st, &u);
        int all_fill = u.all_fill;
        if (ok) {
            check(rc == 0);
            merge_box(&box, whole);
            if (all_fill) {
                for (size_t i = 0; i < BYTES; i++) check(whole[i] == 0);
            } else {
                check(fuzz_decode(&F, st, cell, out.data, out.len, got, BYTES) == 0);
                check(memcmp(whole, got, BYTES) == 0);
            }
        }
        nds_buf_dispose(&out);
    }
    free(whole);
    free(chunk);
    free(got);
    F.close(st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > (1u << 16)) return 0;
    nds_kvstore *kv = NULL;
    if (nds_kvstore_open(&kv, "memory://fuzz/precomputed-box/", NULL) != 0) return 0;
    exercise(kv, data[0] & 7, data + 1, size - 1);
    nds_kvstore_delete_range(kv, "", "");
    nds_kvstore_free(kv);
    return 0;
}
