/* libFuzzer harness for the N5 format driver: attributes.json documents and block headers.
 *
 * Two input shapes:
 *  - "#" then a byte selecting one of a few fixed datasets (raw, gzip, xz, blosc, zstd, bzip2;
 *    ranks 1 to 3), then the bytes of block 0/0/..: the block decoder alone, with the fuzzer's
 *    effort on the header and payload checks;
 *  - anything else: arbitrary bytes as attributes.json, optionally followed by the separator
 *    "\0BLOCK\0" and the bytes of block 0/0/.. . The dataset is opened through the format vtable
 *    on a memory kvstore; its metadata is printed, block keys must parse back, the block is
 *    decoded, attributes are read and rewritten, and resize rewrites attributes.json. The same
 *    bytes, when they are a JSON object, are used as the spec's "metadata" to create a dataset,
 *    which must then reopen.
 * Whenever a block decodes, encoding it and decoding the result must give the same elements inside
 * the dataset (outside it the encoder clips, so they may differ). Invariant violations trap;
 * errors are expected. Threading: single-threaded, as libFuzzer runs it. Ownership: everything is
 * freed per input.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "ndstore/ndstore.h"
#include "ndstore/sys/format.h"
#include "fuzz_format.h"

extern const nds_format nds_format_n5;

/* Blocks above this are not decoded: the fuzzer would spend its time in malloc and memset. */
#define FUZZ_MAX_BLOCK (4u << 20)

static const char SEPARATOR[] = "\0BLOCK\0";
#define SEPARATOR_LEN (sizeof SEPARATOR - 1)

/* The datasets block-only inputs decode against. */
static const char *const FIXED_DOCS[] = {
    "{\"dimensions\":[5,4],\"blockSize\":[3,2],\"dataType\":\"uint16\",\"compression\":"
    "{\"type\":\"raw\"}}",
    "{\"dimensions\":[5,4],\"blockSize\":[3,2],\"dataType\":\"uint16\",\"compression\":"
    "{\"type\":\"gzip\"}}",
    "{\"dimensions\":[7],\"blockSize\":[8],\"dataType\":\"float64\",\"compression\":"
    "{\"type\":\"xz\"}}",
    "{\"dimensions\":[3,3,3],\"blockSize\":[2,2,2],\"dataType\":\"int32\",\"compression\":"
    "{\"type\":\"blosc\",\"cname\":\"lz4\",\"clevel\":5,\"shuffle\":1}}",
    "{\"dimensions\":[9,2],\"blockSize\":[4,4],\"dataType\":\"uint8\",\"compression\":"
    "{\"type\":\"zstd\"}}",
    "{\"dimensions\":[4,4],\"blockSize\":[4,4],\"dataType\":\"int64\",\"compression\":"
    "{\"type\":\"bzip2\",\"blockSize\":1}}",
    "{\"dimensions\":[4,4],\"blockSize\":[2,2],\"dataType\":\"uint16\",\"compression\":"
    "{\"type\":\"gzip\",\"useZlib\":true}}",
};
#define FIXED_COUNT (sizeof FIXED_DOCS / sizeof FIXED_DOCS[0])

/* 1 when elements a and b of two canonical blocks agree inside the dataset part of block 0. */
static int same_inside(const nds_array_meta *m, const uint8_t *a, const uint8_t *b, size_t elem) {
    uint64_t idx[NDS_MAX_RANK] = {0}, ext[NDS_MAX_RANK];
    for (size_t d = 0; d < m->rank; d++)
        ext[d] = m->shape[d] < m->chunk_shape[d] ? m->shape[d] : m->chunk_shape[d];
    for (size_t off = 0;; off += elem) { /* C order over the full block */
        int inside = 1;
        for (size_t d = 0; d < m->rank; d++) inside &= idx[d] < ext[d];
        if (inside && memcmp(a + off, b + off, elem) != 0) return 0;
        size_t d = m->rank;
        while (d > 0 && ++idx[d - 1] == m->chunk_shape[d - 1]) idx[--d] = 0;
        if (d == 0) return 1;
    }
}

/* Decodes block 0; when it decodes, encode + decode must keep the elements inside the dataset. */
static void exercise_block(void *st, const nds_array_meta *m, const uint8_t *blk, size_t len) {
    size_t elem = nds_dtype_size(m->dtype), n = elem;
    for (size_t d = 0; d < m->rank; d++) {
        if (m->shape[d] == 0 || m->chunk_shape[d] > FUZZ_MAX_BLOCK) return;
        n *= m->chunk_shape[d];
        if (n > FUZZ_MAX_BLOCK) return;
    }
    uint64_t cell[NDS_MAX_RANK] = {0};
    uint8_t *a = malloc(n), *b = malloc(n);
    nds_buf enc = {0};
    if (a && b && fuzz_decode(&nds_format_n5, st, cell, blk, len, a, n) == 0) {
        check(nds_format_n5.encode_chunk(st, cell, a, &enc) == 0);
        check(fuzz_decode(&nds_format_n5, st, cell, enc.data, enc.len, b, n) == 0);
        check(same_inside(m, a, b, elem));
    }
    nds_buf_dispose(&enc);
    free(a);
    free(b);
}

static void exercise_open(nds_kvstore *kv, const uint8_t *blk, size_t blk_len, int has_block) {
    void *st = NULL;
    nds_array_meta meta;
    if (nds_format_n5.open(kv, NULL, NDS_OPEN_EXISTING, &st, &meta) != 0) return;
    json_object *doc = NULL;
    if (nds_format_n5.metadata_json(st, &doc) == 0) json_object_put(doc);
    char desc[256], key[1024];
    nds_format_n5.describe_codec(st, desc, sizeof desc);
    uint64_t cell[NDS_MAX_RANK] = {0}, back[NDS_MAX_RANK];
    int empty = 0;
    for (size_t d = 0; d < meta.rank; d++) empty |= meta.shape[d] == 0;
    if (nds_format_n5.chunk_key(st, cell, key, sizeof key) == 0) {
        check(nds_format_n5.parse_chunk_key(st, key, back) == !empty);
        if (has_block && !empty) exercise_block(st, &meta, blk, blk_len);
    }
    json_object *attrs = NULL;
    if (nds_format_n5.get_attributes(st, kv, &attrs) == 0) {
        check(nds_format_n5.set_attributes(st, kv, attrs) == 0);
        json_object_put(attrs);
    }
    nds_array_meta after;
    if (nds_format_n5.resize(st, kv, meta.shape, &after) == 0) check(after.rank == meta.rank);
    nds_format_n5.close(st);
}

/* "#", a dataset selector, then a block. */
static void block_only(const uint8_t *data, size_t size) {
    if (size < 2) return;
    const char *doc = FIXED_DOCS[data[1] % FIXED_COUNT];
    nds_kvstore *kv = NULL;
    if (nds_kvstore_open(&kv, "memory://fuzz/n5-block/", NULL) != 0) return;
    void *st = NULL;
    nds_array_meta meta;
    if (nds_kvstore_write(kv, "attributes.json", doc, strlen(doc), NULL, NULL) == 0) {
        check(nds_format_n5.open(kv, NULL, NDS_OPEN_EXISTING, &st, &meta) == 0);
        exercise_block(st, &meta, data + 2, size - 2);
        nds_format_n5.close(st);
    }
    nds_kvstore_delete_range(kv, "", "");
    nds_kvstore_free(kv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 20)) return 0;
    if (size > 0 && data[0] == '#') {
        block_only(data, size);
        return 0;
    }
    static const fuzz_format_case c = {
        &nds_format_n5, "attributes.json", "memory://fuzz/n5/", "memory://fuzz/n5-create/",
        SEPARATOR,      SEPARATOR_LEN,     exercise_open};
    fuzz_format_input(&c, data, size);
    return 0;
}
