/* libFuzzer harness for the neuroglancer precomputed format driver: arbitrary bytes as `info`,
 * optionally followed by the separator "\0CHUNK\0" and the stored bytes of the first chunk (or
 * shard) of scale 0.
 *
 * Through a memory kvstore: opens the volume through the format vtable, prints its metadata and
 * codec description, checks that the first chunk key parses back to its cell, decodes the stored
 * bytes and, when they decode, checks that encode + decode gives the same chunk (jpeg excepted:
 * lossy). The same bytes, when they are a JSON object, are also used as the spec's "metadata" to
 * create a volume, which must then reopen. Invariant violations trap; errors are expected.
 * Threading: single-threaded, as libFuzzer runs it. Ownership: everything is freed per input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "ndstore/ndstore.h"
#include "ndstore/sys/format.h"
#include "fuzz_format.h"

extern const nds_format nds_format_precomputed;

/* Chunks above this are not decoded: the fuzzer would spend its time in malloc and memset. */
#define FUZZ_MAX_CHUNK (4u << 20)

static const char SEPARATOR[] = "\0CHUNK\0";
#define SEPARATOR_LEN (sizeof SEPARATOR - 1)

static size_t chunk_bytes(const nds_array_meta *meta) {
    size_t n = nds_dtype_size(meta->dtype);
    for (size_t d = 0; d < meta->rank; d++) {
        if (meta->chunk_shape[d] > FUZZ_MAX_CHUNK || n * meta->chunk_shape[d] > FUZZ_MAX_CHUNK)
            return 0;
        n *= meta->chunk_shape[d];
    }
    return n;
}

/* Decodes the first chunk, then encodes and decodes it again: the chunk must survive the round trip
 * (except through jpeg, which is lossy, where decoding again must merely succeed). */
static void exercise_chunk(void *st, const nds_array_meta *meta, const uint8_t *chunk, size_t len,
                           int lossy) {
    size_t n = chunk_bytes(meta);
    if (n == 0) return;
    uint64_t cell[NDS_MAX_RANK] = {0};
    uint8_t *a = malloc(n), *b = malloc(n);
    nds_buf enc = {0};
    if (a && b && fuzz_decode(&nds_format_precomputed, st, cell, chunk, len, a, n) == 0 &&
        nds_format_precomputed.encode_chunk(st, cell, a, &enc) == 0) {
        check(fuzz_decode(&nds_format_precomputed, st, cell, enc.data, enc.len, b, n) == 0);
        check(lossy || memcmp(a, b, n) == 0);
    }
    nds_buf_dispose(&enc);
    free(a);
    free(b);
}

static void exercise_open(nds_kvstore *kv, const uint8_t *chunk, size_t chunk_len, int has_chunk) {
    void *st = NULL;
    nds_array_meta meta;
    if (nds_format_precomputed.open(kv, NULL, NDS_OPEN_EXISTING, &st, &meta) != 0) return;
    json_object *doc = NULL;
    if (nds_format_precomputed.metadata_json(st, &doc) == 0) json_object_put(doc);
    char desc[512], key[1024];
    nds_format_precomputed.describe_codec(st, desc, sizeof desc);
    uint64_t cell[NDS_MAX_RANK] = {0}, back[NDS_MAX_RANK];
    int empty = 0;
    for (size_t d = 0; d < meta.rank; d++) empty |= meta.shape[d] == 0;
    if (!empty && nds_format_precomputed.chunk_key(st, cell, key, sizeof key) == 0) {
        check(nds_format_precomputed.parse_chunk_key(st, key, back) == 1);
        check(memcmp(back, cell, meta.rank * sizeof cell[0]) == 0);
        if (has_chunk) {
            nds_kvstore_write(kv, key, chunk, chunk_len, NULL, NULL);
            exercise_chunk(st, &meta, chunk, chunk_len, strstr(desc, "jpeg") != NULL);
        }
    }
    /* The read path (byte ranges for sharded scales) must cope with whatever is stored. */
    if (meta.read_chunk_shape[0] && chunk_bytes(&meta)) {
        uint8_t *out = malloc(chunk_bytes(&meta));
        int present;
        if (out) nds_format_precomputed.read_chunk(st, kv, cell, out, &present);
        free(out);
    }
    nds_format_precomputed.close(st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const fuzz_format_case c = {&nds_format_precomputed,
                                       "info",
                                       "memory://fuzz/pc/",
                                       "memory://fuzz/pc-create/",
                                       SEPARATOR,
                                       SEPARATOR_LEN,
                                       exercise_open};
    fuzz_format_input(&c, data, size);
    return 0;
}
