/* Shared by the format fuzz harnesses (zarr v2, zarr v3, N5, precomputed). An input is a metadata
 * document, optionally followed by a separator and the bytes of one chunk. The document is stored
 * under its key in a memory kvstore and the harness's open_fn exercises what opens; then the
 * document is used as the spec's "metadata" to create an array, which must open again. The shard
 * harnesses (zarr v3 shards, precomputed shard boxes) use only check and fuzz_open_document.
 * Header-only (static inline, so a harness may use part of it): each harness is its own program. */
#ifndef NDS_FUZZ_FORMAT_H
#define NDS_FUZZ_FORMAT_H

#include <stdint.h>
#include <string.h>
#include <json-c/json.h>

#include "ndstore/ndstore.h"
#include "ndstore/sys/format.h"
#include "internal/format_util.h"

static inline void check(int ok) {
    if (!ok) __builtin_trap();
}

/* A whole decode of stored bytes in[0..len) into out (the canonical chunk, n bytes) through the
 * format's one decode (format.h decode_chunk). */
static inline int fuzz_decode(const nds_format *f, void *st, const uint64_t *cell,
                              const uint8_t *in, size_t len, uint8_t *out, size_t n) {
    return nds_format_decode_whole(f, st, cell, in, len, out, n);
}

/* Stores a metadata document under key and opens the array it describes through the format. */
static inline int fuzz_open_document(const nds_format *f, nds_kvstore *kv, const char *key,
                                     const char *doc, void **st, nds_array_meta *meta) {
    if (nds_kvstore_write(kv, key, doc, strlen(doc), NULL, NULL) != 0) return -1;
    return f->open(kv, NULL, NDS_OPEN_EXISTING, st, meta);
}

/* The document as spec "metadata": what the format creates must open again. */
static inline void fuzz_create_reopen(const nds_format *f, const char *url, const uint8_t *data,
                               size_t size) {
    json_tokener *tok = json_tokener_new_ex(32);
    json_object *meta = tok ? json_tokener_parse_ex(tok, (const char *)data, (int)size) : NULL;
    json_tokener_free(tok);
    if (!json_object_is_type(meta, json_type_object)) {
        json_object_put(meta);
        return;
    }
    json_object *spec = json_object_new_object();
    json_object_object_add(spec, "metadata", meta);
    nds_kvstore *kv = NULL;
    if (nds_kvstore_open(&kv, url, NULL) == 0) {
        void *st = NULL;
        nds_array_meta m;
        if (f->open(kv, spec, NDS_OPEN_CREATE, &st, &m) == 0) {
            f->close(st);
            st = NULL;
            check(f->open(kv, spec, NDS_OPEN_EXISTING, &st, &m) == 0);
            f->close(st);
        }
        nds_kvstore_delete_range(kv, "", "");
        nds_kvstore_free(kv);
    }
    json_object_put(spec);
}

/* Exercises one stored document (and chunk) through the format; has_chunk: a separator was present.
 */
typedef void (*fuzz_open_fn)(nds_kvstore *kv, const uint8_t *chunk, size_t chunk_len,
                             int has_chunk);

/* Whether a metadata document names a lossy codec or filter (issue 20): decoding arbitrary stored
 * bytes and encoding them again need not give those bytes back (bitround rounds what decode passed
 * through unrounded; quantize, fixedscaleoffset, astype and delta may narrow), so the harnesses
 * check only that the round trip succeeds. */
static inline int fuzz_doc_is_lossy(const json_object *doc) {
    static const char *const names[] = {"\"bitround\"", "quantize", "fixedscaleoffset",
                                        "astype", "delta"};
    const char *text = json_object_to_json_string_ext((json_object *)doc, JSON_C_TO_STRING_PLAIN);
    for (size_t i = 0; text && i < sizeof names / sizeof names[0]; i++)
        if (strstr(text, names[i])) return 1;
    return 0;
}

typedef struct fuzz_format_case {
    const nds_format *format;
    const char *metadata_key; /* "zarr.json" */
    const char *url;          /* memory:// store for the stored document */
    const char *create_url;   /* memory:// store for the create-and-reopen check */
    const char *separator;    /* between document and chunk, NUL bytes included */
    size_t separator_len;
    fuzz_open_fn open_fn;
} fuzz_format_case;

static inline int fuzz_format_input(const fuzz_format_case *c, const uint8_t *data, size_t size) {
    if (size > (1u << 20)) return 0;
    const uint8_t *sep = memmem(data, size, c->separator, c->separator_len);
    size_t meta_len = sep ? (size_t)(sep - data) : size;
    const uint8_t *chunk = sep ? sep + c->separator_len : NULL;
    size_t chunk_len = sep ? size - meta_len - c->separator_len : 0;
    nds_kvstore *kv = NULL;
    if (nds_kvstore_open(&kv, c->url, NULL) != 0) return 0;
    if (nds_kvstore_write(kv, c->metadata_key, data, meta_len, NULL, NULL) == 0) {
        c->open_fn(kv, chunk ? chunk : (const uint8_t *)"", chunk_len, sep != NULL);
        nds_kvstore_delete_range(kv, "", "");
    }
    nds_kvstore_free(kv);
    fuzz_create_reopen(c->format, c->create_url, data, meta_len);
    return 0;
}

#endif
