/* libFuzzer harness for consolidated metadata (formats/zarr_consolidated.c): arbitrary bytes as a
 * zarr v2 .zmetadata and as a zarr v3 group zarr.json, parsed and checked (nds_zc_entries), then
 * used to open the array "a" below them with "consolidated": true through the public API (the copy,
 * or the fallback to the array's own metadata, which is absent here). Invariants: a checked copy's
 * entries are objects under inner paths; an open that succeeds gives a handle whose metadata prints
 * and which refuses writes (a read-only snapshot). Errors are expected; crashes, leaks and traps
 * are not. Single-threaded; everything is freed per input.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "ndstore/ndstore.h"
#include "../formats/zarr_consolidated.h"

static void check(int ok) {
    if (!ok) __builtin_trap();
}

/* A key that passed the check: relative, without empty, "." or ".." segments. */
static int inner_key(const char *k) {
    if (k[0] == '/' || k[0] == '\0') return 0;
    for (const char *s = k; *s;) {
        size_t n = strcspn(s, "/");
        if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.')) return 0;
        s += n;
        if (*s == '/' && !*++s) return 0;
    }
    return 1;
}

/* Parses and checks doc as layout's copy; every entry must then be an object. */
static void exercise_parse(nds_zc_layout layout, const uint8_t *data, size_t size) {
    json_tokener *tok = json_tokener_new_ex(64);
    json_object *doc = tok ? json_tokener_parse_ex(tok, (const char *)data, (int)size) : NULL;
    json_tokener_free(tok);
    json_object *entries = NULL;
    if (doc && nds_zc_entries(layout, doc, "fuzz", &entries) == 0 && entries) {
        json_object_object_foreach(entries, key, val) {
            check(inner_key(key));
            check(json_object_is_type(val, json_type_object));
        }
    }
    json_object_put(doc);
}

/* Stores the bytes under key at url's root and opens url's array "a" from them. */
static void exercise_open(const char *driver, const char *url, const char *key,
                          const uint8_t *data, size_t size) {
    nds_kvstore *kv = NULL;
    if (nds_kvstore_open(&kv, url, NULL) != 0) return;
    if (nds_kvstore_write(kv, key, data, size, NULL, NULL) == 0) {
        char spec[256];
        snprintf(spec, sizeof spec, "{\"driver\":\"%s\",\"kvstore\":\"%sa/\",\"consolidated\":true}",
                 driver, url);
        nds_array *a = NULL;
        if (nds_array_open(&a, spec, NULL) == 0) {
            char *text = NULL;
            check(nds_array_metadata(a, &text) == 0);
            nds_free(text);
            check(nds_array_set_attributes(a, "{}") == NDS_EINVAL);
            nds_array_free(a);
        }
    }
    nds_kvstore_delete_range(kv, "", "");
    nds_kvstore_free(kv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 20)) return 0;
    exercise_parse(NDS_ZC_V2, data, size);
    exercise_parse(NDS_ZC_V3, data, size);
    exercise_open("zarr", "memory://fuzz-consolidated/v2/", ".zmetadata", data, size);
    exercise_open("zarr3", "memory://fuzz-consolidated/v3/", "zarr.json", data, size);
    nds_error_clear();
    return 0;
}
