/* libFuzzer harness for zarr v3 shards (sharding_indexed): the first input byte picks one of a few
 * sharded arrays (index at the end or the start, with or without crc32c, compressed or raw inner
 * chunks, nested sharding), the rest is the stored bytes of shard c/0/0.
 *
 * Decodes the whole shard through the format vtable and reads every inner chunk on its own with
 * read_chunk (byte-range reads of the index and of the chunk). Invariants: nothing crashes or
 * reads out of bounds; when the whole shard decodes, every inner chunk read alone succeeds and
 * equals the same elements of the whole; a shard that decodes re-encodes to one that decodes to
 * the same elements; a partial write of a box (update_chunk, the box drawn from the input's
 * length) over a shard that decodes gives one that decodes to the old elements with the box's
 * new ones (over one that does not, it may fail or keep the parts it does not touch, but never
 * crashes). Threading: single-threaded, as libFuzzer runs it. Ownership: everything is freed per
 * input.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "fuzz_format.h"
#include "internal/strided.h"

extern const nds_format nds_format_zarr3;
#define F nds_format_zarr3

#define BYTES_LE "{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}}"
#define CRC "{\"name\":\"crc32c\"}"

/* Array documents: shape [8, 6] (one shard of [8, 6] split into inner chunks), several codecs. */
static const char *const docs[] = {
    /* index at the end with crc32c, zstd inner chunks (what ndstore writes by default) */
    "[{\"name\":\"sharding_indexed\",\"configuration\":{\"chunk_shape\":[4,3],\"codecs\":["
    BYTES_LE ",{\"name\":\"zstd\",\"configuration\":{\"level\":1}}],\"index_codecs\":[" BYTES_LE
    "," CRC "],\"index_location\":\"end\"}}]",
    /* index at the start, no crc, raw inner chunks */
    "[{\"name\":\"sharding_indexed\",\"configuration\":{\"chunk_shape\":[2,3],\"codecs\":["
    BYTES_LE "],\"index_codecs\":[" BYTES_LE "],\"index_location\":\"start\"}}]",
    /* crc32c on inner chunks too, big-endian index */
    "[{\"name\":\"sharding_indexed\",\"configuration\":{\"chunk_shape\":[8,2],\"codecs\":["
    BYTES_LE "," CRC "],\"index_codecs\":[{\"name\":\"bytes\",\"configuration\":{\"endian\":"
    "\"big\"}}," CRC "]}}]",
    /* nested: inner chunks are shards themselves */
    "[{\"name\":\"sharding_indexed\",\"configuration\":{\"chunk_shape\":[4,6],\"codecs\":["
    "{\"name\":\"sharding_indexed\",\"configuration\":{\"chunk_shape\":[2,3],\"codecs\":["
    BYTES_LE "],\"index_codecs\":[" BYTES_LE "]}}],\"index_codecs\":[" BYTES_LE "," CRC "]}}]",
    /* gzip inner chunks, transposed index */
    "[{\"name\":\"sharding_indexed\",\"configuration\":{\"chunk_shape\":[1,6],\"codecs\":["
    BYTES_LE ",{\"name\":\"gzip\",\"configuration\":{\"level\":1}}],\"index_codecs\":["
    "{\"name\":\"transpose\",\"configuration\":{\"order\":[2,1,0]}}," BYTES_LE "]}}]",
};
#define DOC_COUNT (sizeof docs / sizeof docs[0])

static int open_array(nds_kvstore *kv, size_t which, void **st, nds_array_meta *meta) {
    char text[4096];
    snprintf(text, sizeof text,
             "{\"zarr_format\":3,\"node_type\":\"array\",\"shape\":[8,6],\"data_type\":\"int16\","
             "\"chunk_grid\":{\"name\":\"regular\",\"configuration\":{\"chunk_shape\":[8,6]}},"
             "\"chunk_key_encoding\":{\"name\":\"default\"},\"fill_value\":-3,\"codecs\":%s}",
             docs[which]);
    return fuzz_open_document(&F, kv, "zarr.json", text, st, meta);
}

/* Every inner chunk read alone: when the whole shard decoded (whole != NULL), each must succeed
 * and equal its part of the whole. */
static void read_inner_chunks(void *st, nds_kvstore *kv, const nds_array_meta *m,
                              const uint8_t *whole) {
    uint64_t grid[2] = {m->chunk_shape[0] / m->read_chunk_shape[0],
                        m->chunk_shape[1] / m->read_chunk_shape[1]};
    size_t n = 2 * m->read_chunk_shape[0] * m->read_chunk_shape[1];
    int64_t in_stride[2], sh_stride[2];
    nds_c_strides(2, m->read_chunk_shape, 2, in_stride);
    nds_c_strides(2, m->chunk_shape, 2, sh_stride);
    uint8_t *inner = malloc(n), *part = malloc(n);
    for (uint64_t r = 0; inner && part && r < grid[0]; r++)
        for (uint64_t c = 0; c < grid[1]; c++) {
            uint64_t cell[2] = {r, c};
            int present = 0;
            int rc = F.read_chunk(st, kv, cell, inner, &present);
            if (!whole) continue;
            check(rc == 0);
            const uint8_t *src = whole + r * m->read_chunk_shape[0] * (size_t)sh_stride[0] +
                                 c * m->read_chunk_shape[1] * (size_t)sh_stride[1];
            nds_strided_copy(2, m->read_chunk_shape, 2, part, in_stride, src, sh_stride);
            if (!present) continue; /* empty inner chunk: the whole holds fill there */
            check(memcmp(inner, part, n) == 0);
        }
    free(inner);
    free(part);
}

/* The merge of the partial write: element (r, c) of the box gets r * 6 + c + 100. */
static void merge_box(void *ctx, uint8_t *chunk) {
    const nds_box *b = ctx;
    for (uint64_t r = b->start[0]; r < b->stop[0]; r += b->step[0])
        for (uint64_t c = b->start[1]; c < b->stop[1]; c += b->step[1]) {
            int16_t v = (int16_t)(r * 6 + c + 100);
            memcpy(chunk + 2 * (r * 6 + c), &v, 2);
        }
}

/* A partial write of a box drawn from len over the stored shard (whole: its decoded elements, or
 * NULL when it does not decode). */
static void update_part(void *st, const uint8_t *shard, size_t len, const uint8_t *whole) {
    nds_box box = {.rank = 2};
    box.start[0] = len % 8;
    box.stop[0] = box.start[0] + 1 + (len / 8) % (8 - box.start[0]);
    box.start[1] = (len / 64) % 6;
    box.stop[1] = box.start[1] + 1 + (len / 384) % (6 - box.start[1]);
    box.step[0] = 1 + (len / 2304) % 2;
    box.step[1] = 1;
    uint64_t cell[2] = {0, 0};
    uint8_t chunk[96], want[96], got[96];
    memset(chunk, 0x55, sizeof chunk); /* what the format neither decodes nor encodes */
    nds_buf out = {0};
    nds_update_request u = {.cell = cell, .old = shard, .old_len = len, .changed = &box,
                            .merge = merge_box, .merge_ctx = &box, .chunk = chunk, .out = &out};
    int rc = F.update_chunk(st, &u);
    int all_fill = u.all_fill;
    if (rc == 0 && whole) {
        memcpy(want, whole, sizeof want);
        merge_box(&box, want);
        if (all_fill) {
            for (size_t i = 0; i < 48; i++) check(want[2 * i] == 0xfd && want[2 * i + 1] == 0xff);
        } else {
            check(fuzz_decode(&F, st, cell, out.data, out.len, got, 96) == 0);
            check(memcmp(want, got, sizeof want) == 0);
        }
    }
    nds_buf_dispose(&out);
}

static void exercise(nds_kvstore *kv, size_t which, const uint8_t *shard, size_t len) {
    void *st = NULL;
    nds_array_meta m;
    if (open_array(kv, which, &st, &m) != 0) return;
    if (nds_kvstore_write(kv, "c/0/0", shard, len, NULL, NULL) == 0) {
        uint64_t cell[2] = {0, 0};
        uint8_t a[96], b[96];
        int ok = fuzz_decode(&F, st, cell, shard, len, a, 96) == 0;
        if (m.read_chunk_shape[0]) read_inner_chunks(st, kv, &m, ok ? a : NULL);
        nds_buf enc = {0};
        if (ok && F.encode_chunk(st, cell, a, &enc) == 0) {
            check(fuzz_decode(&F, st, cell, enc.data, enc.len, b, 96) == 0);
            check(memcmp(a, b, sizeof a) == 0);
        }
        nds_buf_dispose(&enc);
        update_part(st, shard, len, ok ? a : NULL);
    }
    F.close(st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > (1u << 16)) return 0;
    nds_kvstore *kv = NULL;
    if (nds_kvstore_open(&kv, "memory://fuzz/zarr3-shard/", NULL) != 0) return 0;
    exercise(kv, data[0] % DOC_COUNT, data + 1, size - 1);
    nds_kvstore_delete_range(kv, "", "");
    nds_kvstore_free(kv);
    return 0;
}
