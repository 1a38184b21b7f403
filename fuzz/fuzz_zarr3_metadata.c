/* libFuzzer harness for the zarr v3 format driver: arbitrary bytes as zarr.json, optionally
 * followed by the separator "\0CHUNK\0" and the stored bytes of chunk 0 (a shard when sharded).
 *
 * Through a memory kvstore: opens the array through the format vtable, prints its metadata and
 * codec description, checks that chunk keys parse back, decodes the chunk and, when it decodes,
 * checks that encode + decode gives the same chunk and (sharded arrays) that reading inner chunk
 * 0 on its own gives the same elements. The same bytes, when they are a JSON object, are also used
 * as the spec's "metadata" to create an array, which must then reopen. Invariant violations trap;
 * errors are expected. Threading: single-threaded, as libFuzzer runs it. Ownership: everything is
 * freed per input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "ndstore/ndstore.h"
#include "ndstore/sys/format.h"
#include "fuzz_format.h"
#include "internal/strided.h"
#include "../formats/codecs/vlen.h"

extern const nds_format nds_format_zarr3;
#define F nds_format_zarr3

/* Chunks above this are not decoded: the fuzzer would spend its time in malloc and memset. */
#define FUZZ_MAX_CHUNK (4u << 20)

static const char SEPARATOR[] = "\0CHUNK\0";
#define SEPARATOR_LEN (sizeof SEPARATOR - 1)

/* Bytes per element: the array's (fixed-width strings), else the dtype's. */
static size_t elem_bytes(const nds_array_meta *meta) {
    return meta->elem_size ? meta->elem_size : nds_dtype_size(meta->dtype);
}

/* Bytes of a chunk of shape (rank entries), 0 when above FUZZ_MAX_CHUNK (and for the
 * variable-length types, which have no dense chunk: exercise_vlen). */
static size_t chunk_bytes(const nds_array_meta *meta, const uint64_t *shape) {
    size_t n = elem_bytes(meta);
    for (size_t d = 0; d < meta->rank; d++) {
        if (shape[d] > FUZZ_MAX_CHUNK || n * shape[d] > FUZZ_MAX_CHUNK) return 0;
        n *= shape[d];
    }
    return n;
}

/* Inner chunk 0 read by itself equals the corner of the whole decoded shard. */
static void exercise_inner(void *st, nds_kvstore *kv, const nds_array_meta *meta,
                           const uint8_t *shard) {
    size_t n = chunk_bytes(meta, meta->read_chunk_shape), elem = elem_bytes(meta);
    uint64_t cell[NDS_MAX_RANK] = {0};
    int64_t stride[NDS_MAX_RANK];
    uint8_t *inner = n ? malloc(n) : NULL;
    int present = 0;
    nds_c_strides(meta->rank, meta->chunk_shape, elem, stride);
    if (inner && F.read_chunk(st, kv, cell, inner, &present) == 0 && present) {
        /* row by row: the last dimension is contiguous in both */
        size_t row = elem * meta->read_chunk_shape[meta->rank - 1], rows = n / row;
        for (size_t r = 0; r < rows; r++) {
            size_t off = 0, rest = r;
            for (size_t d = meta->rank - 1; d-- > 0;) {
                off += (rest % meta->read_chunk_shape[d]) * (size_t)stride[d];
                rest /= meta->read_chunk_shape[d];
            }
            check(memcmp(inner + r * row, shard + off, row) == 0);
        }
    }
    free(inner);
}

/* A string / bytes chunk: the codecs after vlen-utf8 / vlen-bytes, then the element list
 * (what lib/array_vlen.c does), and the list encoded back must decode the same. */
static void exercise_vlen(void *st, const nds_array_meta *meta, const uint8_t *chunk, size_t len) {
    uint64_t cell[NDS_MAX_RANK] = {0}, count = 1;
    for (size_t d = 0; d < meta->rank; d++) count *= meta->chunk_shape[d];
    nds_buf raw = {0}, list = {0}, enc = {0};
    nds_vlen_list l;
    if (F.decode_vlen(st, cell, chunk, len, &raw) == 0 &&
        nds_vlen_decode(raw.data, raw.len, count, meta->dtype == NDS_STRING, &l) == 0) {
        if (nds_vlen_encode(l.offsets, l.data, l.count, meta->dtype == NDS_STRING, &list) == 0 &&
            F.encode_vlen(st, cell, list.data, list.len, &enc) == 0) {
            nds_buf back = {0};
            check(F.decode_vlen(st, cell, enc.data, enc.len, &back) == 0 && back.len == list.len &&
                  memcmp(back.data, list.data, list.len) == 0);
            nds_buf_dispose(&back);
        }
        nds_vlen_list_dispose(&l);
    }
    nds_buf_dispose(&raw);
    nds_buf_dispose(&list);
    nds_buf_dispose(&enc);
}

/* Decodes chunk 0, then encodes and decodes it again: the chunk must survive the round trip
 * (unless a lossy codec may change it: then the round trip must only succeed). */
static void exercise_chunk(void *st, nds_kvstore *kv, const nds_array_meta *meta,
                           const uint8_t *chunk, size_t len, int lossy) {
    size_t n = chunk_bytes(meta, meta->chunk_shape);
    if (n == 0) return;
    uint64_t cell[NDS_MAX_RANK] = {0};
    uint8_t *a = malloc(n), *b = malloc(n);
    nds_buf enc = {0};
    if (a && b && fuzz_decode(&F, st, cell, chunk, len, a, n) == 0) {
        if (meta->read_chunk_shape[0]) exercise_inner(st, kv, meta, a);
        if (F.encode_chunk(st, cell, a, &enc) == 0) {
            check(fuzz_decode(&F, st, cell, enc.data, enc.len, b, n) == 0);
            check(lossy || memcmp(a, b, n) == 0);
        }
    }
    nds_buf_dispose(&enc);
    free(a);
    free(b);
}

static void exercise_open(nds_kvstore *kv, const uint8_t *chunk, size_t chunk_len, int has_chunk) {
    void *st = NULL;
    nds_array_meta meta;
    if (F.open(kv, NULL, NDS_OPEN_EXISTING, &st, &meta) != 0) return;
    json_object *doc = NULL;
    int lossy = 0;
    if (F.metadata_json(st, &doc) == 0) lossy = fuzz_doc_is_lossy(doc);
    json_object_put(doc);
    char desc[512], key[1024];
    F.describe_codec(st, desc, sizeof desc);
    uint64_t cell[NDS_MAX_RANK] = {0}, back[NDS_MAX_RANK];
    int empty = 0;
    for (size_t d = 0; d < meta.rank; d++) empty |= meta.shape[d] == 0;
    if (F.chunk_key(st, cell, key, sizeof key) == 0) {
        check(F.parse_chunk_key(st, key, back) == !empty);
        if (has_chunk && !empty && nds_dtype_is_vlen(meta.dtype))
            exercise_vlen(st, &meta, chunk, chunk_len);
        else if (has_chunk && !empty && nds_kvstore_write(kv, key, chunk, chunk_len, NULL, NULL) == 0)
            exercise_chunk(st, kv, &meta, chunk, chunk_len, lossy);
    }
    nds_array_meta after;
    if (F.resize(st, kv, meta.shape, &after) == 0) check(after.rank == meta.rank);
    F.close(st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const fuzz_format_case c = {
        &F,        "zarr.json",   "memory://fuzz/zarr3/", "memory://fuzz/zarr3-create/",
        SEPARATOR, SEPARATOR_LEN, exercise_open};
    fuzz_format_input(&c, data, size);
    return 0;
}
