/* libFuzzer harness for the zarr v2 format driver: arbitrary bytes as `.zarray`, optionally
 * followed by the separator "\0CHUNK\0" and the stored bytes of chunk 0 (0.0..., or "0" for rank
 * 0).
 *
 * Through a memory kvstore: opens the array through the format vtable, prints its metadata, checks
 * that chunk keys parse back, decodes the chunk and, when it decodes, checks that encode + decode
 * gives the same chunk. The same bytes, when they are a JSON object, are also used as the spec's
 * "metadata" to create an array, which must then reopen. Invariant violations trap; errors are
 * expected. Threading: single-threaded, as libFuzzer runs it. Ownership: everything is freed per
 * input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "ndstore/ndstore.h"
#include "ndstore/sys/format.h"
#include "fuzz_format.h"
#include "../formats/codecs/vlen.h"

extern const nds_format nds_format_zarr2;

/* Chunks above this are not decoded: the fuzzer would spend its time in malloc and memset. */
#define FUZZ_MAX_CHUNK (4u << 20)

static const char SEPARATOR[] = "\0CHUNK\0";
#define SEPARATOR_LEN (sizeof SEPARATOR - 1)

/* An object array's chunk: the compressor, then the element list (lib/array_vlen.c's steps), and
 * the list encoded back must decode the same. */
static void exercise_vlen(void *st, const nds_array_meta *meta, const uint8_t *chunk, size_t len) {
    uint64_t cell[NDS_MAX_RANK] = {0}, count = 1;
    for (size_t d = 0; d < meta->rank; d++) count *= meta->chunk_shape[d];
    nds_buf raw = {0}, list = {0}, enc = {0};
    nds_vlen_list l;
    if (nds_format_zarr2.decode_vlen(st, cell, chunk, len, &raw) == 0 &&
        nds_vlen_decode(raw.data, raw.len, count, meta->dtype == NDS_STRING, &l) == 0) {
        if (nds_vlen_encode(l.offsets, l.data, l.count, meta->dtype == NDS_STRING, &list) == 0 &&
            nds_format_zarr2.encode_vlen(st, cell, list.data, list.len, &enc) == 0) {
            nds_buf back = {0};
            check(nds_format_zarr2.decode_vlen(st, cell, enc.data, enc.len, &back) == 0 &&
                  back.len == list.len && memcmp(back.data, list.data, list.len) == 0);
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
static void exercise_chunk(void *st, const nds_array_meta *meta, const uint8_t *chunk, size_t len,
                           int lossy) {
    size_t n = meta->elem_size ? meta->elem_size : nds_dtype_size(meta->dtype); /* |S12: 12 */
    for (size_t d = 0; d < meta->rank; d++) {
        if (meta->chunk_shape[d] > FUZZ_MAX_CHUNK || n * meta->chunk_shape[d] > FUZZ_MAX_CHUNK)
            return;
        n *= meta->chunk_shape[d];
    }
    uint64_t cell[NDS_MAX_RANK] = {0};
    uint8_t *a = malloc(n ? n : 1), *b = malloc(n ? n : 1);
    nds_buf enc = {0};
    if (a && b && fuzz_decode(&nds_format_zarr2, st, cell, chunk, len, a, n) == 0 &&
        nds_format_zarr2.encode_chunk(st, cell, a, &enc) == 0) {
        check(fuzz_decode(&nds_format_zarr2, st, cell, enc.data, enc.len, b, n) == 0);
        check(lossy || memcmp(a, b, n) == 0);
    }
    nds_buf_dispose(&enc);
    free(a);
    free(b);
}

static void exercise_open(nds_kvstore *kv, const uint8_t *chunk, size_t chunk_len, int has_chunk) {
    void *st = NULL;
    nds_array_meta meta;
    if (nds_format_zarr2.open(kv, NULL, NDS_OPEN_EXISTING, &st, &meta) != 0) return;
    json_object *doc = NULL;
    int lossy = 0;
    if (nds_format_zarr2.metadata_json(st, &doc) == 0) lossy = fuzz_doc_is_lossy(doc);
    json_object_put(doc);
    char desc[256], key[1024];
    nds_format_zarr2.describe_codec(st, desc, sizeof desc);
    uint64_t cell[NDS_MAX_RANK] = {0}, back[NDS_MAX_RANK];
    int empty = 0;
    for (size_t d = 0; d < meta.rank; d++) empty |= meta.shape[d] == 0;
    if (nds_format_zarr2.chunk_key(st, cell, key, sizeof key) == 0) {
        check(nds_format_zarr2.parse_chunk_key(st, key, back) == !empty);
        if (has_chunk && !empty && nds_dtype_is_vlen(meta.dtype))
            exercise_vlen(st, &meta, chunk, chunk_len);
        else if (has_chunk && !empty)
            exercise_chunk(st, &meta, chunk, chunk_len, lossy);
    }
    /* Rewrites .zarray through the resize path (same shape) and reopens nothing: state stays valid.
     */
    nds_array_meta after;
    if (nds_format_zarr2.resize(st, kv, meta.shape, &after) == 0) check(after.rank == meta.rank);
    nds_format_zarr2.close(st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const fuzz_format_case c = {
        &nds_format_zarr2, ".zarray",     "memory://fuzz/zarr2/", "memory://fuzz/zarr2-create/",
        SEPARATOR,         SEPARATOR_LEN, exercise_open};
    fuzz_format_input(&c, data, size);
    return 0;
}
