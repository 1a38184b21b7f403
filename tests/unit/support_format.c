/* Helpers shared by the format suites (support_format.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "support_format.h"

int open_spec(nds_array **a, const char *fmt, ...) {
    static char spec[16384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(spec, sizeof spec, fmt, ap);
    va_end(ap);
    *a = NULL;
    return nds_array_open(a, spec, NULL);
}

void put_raw(const char *url, const char *key, const void *data, size_t len) {
    nds_kvstore *kv;
    NDS_OK(nds_kvstore_open(&kv, url, NULL));
    NDS_OK(nds_kvstore_write(kv, key, data, len, NULL, NULL));
    nds_kvstore_free(kv);
}

void put_text(const char *url, const char *key, const char *text) { put_raw(url, key, text, strlen(text)); }

void *get_raw(const char *url, const char *key, size_t *len) {
    nds_kvstore *kv;
    nds_read_result r;
    NDS_OK(nds_kvstore_open(&kv, url, NULL));
    NDS_OK(nds_kvstore_read(kv, key, NULL, &r));
    char *out = NULL;
    if (r.state == NDS_READ_VALUE) {
        out = malloc(r.value.len + 1);
        ck_assert_ptr_nonnull(out);
        memcpy(out, r.value.data, r.value.len);
        out[r.value.len] = 0;
        if (len) *len = r.value.len;
    }
    nds_read_result_dispose(&r);
    nds_kvstore_free(kv);
    return out;
}

json_object *get_json(const char *url, const char *key) {
    char *text = get_raw(url, key, NULL);
    ck_assert_msg(text != NULL, "%s%s missing", url, key);
    json_object *o = json_tokener_parse(text);
    ck_assert_msg(o != NULL, "%s%s is not json: %s", url, key, text);
    free(text);
    return o;
}

const char *member_str(json_object *o, const char *key) {
    json_object *v = NULL;
    if (!json_object_object_get_ex(o, key, &v)) return "absent";
    return json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

/* The whole of a's current shape as a box. */
static void whole_box(nds_array *a, nds_box *box) {
    uint64_t shape[NDS_MAX_RANK];
    nds_array_shape(a, shape);
    nds_box_full(box, nds_array_rank(a), shape);
}

void read_all(nds_array *a, void *out) {
    nds_box box;
    whole_box(a, &box);
    NDS_OK(nds_array_read(a, &box, out, NULL));
}

void write_all(nds_array *a, const void *in) {
    nds_box box;
    whole_box(a, &box);
    NDS_OK(nds_array_write(a, &box, in, NULL));
}
