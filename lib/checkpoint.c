/* Checkpoint commit markers (include/ndstore/checkpoint.h). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ndstore/array.h"
#include "ndstore/checkpoint.h"
#include "internal/error.h"
#include "internal/json_util.h"
#include "internal/util.h"

#define MARKER_SUFFIX ".checkpoint.json"

static int marker_key(const char *name, char **out) {
    if (!name || !name[0] || strchr(name, '/'))
        return nds_err(NDS_EINVAL, "checkpoint name \"%s\" must be non-empty and without '/'",
                       name ? name : "");
    *out = nds_asprintf("%s%s", name, MARKER_SUFFIX);
    return *out ? 0 : nds_err(NDS_ENOMEM, "out of memory");
}

/* Opens kvstore_spec as a directory (its path ending in '/'). */
static int open_dir(const char *kvstore_spec, nds_context *ctx, nds_kvstore **out) {
    nds_kvstore *kv;
    int rc = nds_kvstore_open(&kv, kvstore_spec, ctx);
    if (rc) return rc;
    const char *p = nds_kvstore_path(kv);
    size_t n = strlen(p);
    if (n == 0 || p[n - 1] == '/') {
        *out = kv;
        return 0;
    }
    rc = nds_kvstore_sub(out, kv, "/");
    nds_kvstore_free(kv);
    return rc;
}

static int check_array(nds_kvstore *dir, const char *path, nds_context *ctx) {
    char *spec = NULL;
    int rc = nds_kvstore_spec(dir, &spec);
    json_object *obj = NULL;
    if (!rc) rc = nds_json_parse(spec, strlen(spec), "kvstore spec", &obj);
    nds_free(spec);
    if (rc) return rc;
    json_object *top = json_object_new_object();
    json_object_object_add(top, "kvstore", obj);
    json_object_object_add(top, "path", json_object_new_string(path));
    char *text = nds_json_to_string(top, false);
    json_object_put(top);
    nds_open_options o = NDS_OPEN_OPTIONS_INIT;
    o.ctx = ctx;
    nds_array *a = NULL;
    rc = text ? nds_array_open(&a, text, &o) : nds_err(NDS_ENOMEM, "out of memory");
    free(text);
    nds_array_free(a);
    return rc ? nds_err_prefix(rc, "checkpoint array \"%s\"", path) : 0;
}

static char *marker_text(const char *name, const char *const *arrays, size_t n) {
    json_object *m = json_object_new_object(), *list = json_object_new_array();
    for (size_t i = 0; i < n; i++) json_object_array_add(list, json_object_new_string(arrays[i]));
    json_object_object_add(m, "checkpoint", json_object_new_string(name));
    json_object_object_add(m, "arrays", list);
    json_object_object_add(m, "created", json_object_new_int64((int64_t)time(NULL)));
    json_object_object_add(m, "ndstore", json_object_new_string(nds_version()));
    char *text = nds_json_to_string(m, true);
    json_object_put(m);
    return text;
}

int nds_checkpoint_mark(const char *kvstore_spec, const char *name, const char *const *arrays,
                        size_t n, nds_context *ctx) {
    char *key = NULL, *text = NULL;
    nds_kvstore *dir = NULL;
    int rc = marker_key(name, &key);
    if (!rc) rc = open_dir(kvstore_spec, ctx, &dir);
    for (size_t i = 0; !rc && i < n; i++) rc = check_array(dir, arrays[i], ctx);
    if (!rc && !(text = marker_text(name, arrays, n))) rc = nds_err(NDS_ENOMEM, "out of memory");
    if (!rc) {
        nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
        wo.if_equal.kind = NDS_GEN_ABSENT; /* create-only: a checkpoint is marked once */
        rc = nds_kvstore_write(dir, key, text, strlen(text), &wo, NULL);
        if (rc == NDS_ECONFLICT)
            rc = nds_err(NDS_EEXIST, "checkpoint \"%s\" at %s is already marked complete", name,
                         nds_kvstore_url(dir));
    }
    free(key);
    free(text);
    nds_kvstore_free(dir);
    return rc;
}

int nds_checkpoint_status(const char *kvstore_spec, const char *name, int *complete,
                          char **marker_json, nds_context *ctx) {
    char *key = NULL;
    nds_kvstore *dir = NULL;
    nds_read_result r = {0};
    *complete = 0;
    if (marker_json) *marker_json = NULL;
    int rc = marker_key(name, &key);
    if (!rc) rc = open_dir(kvstore_spec, ctx, &dir);
    if (!rc) rc = nds_kvstore_read(dir, key, NULL, &r);
    if (!rc && r.state == NDS_READ_VALUE) {
        json_object *m = NULL;
        if (nds_json_parse((const char *)r.value.data, r.value.len, key, &m) != 0 ||
            !json_object_is_type(m, json_type_object))
            rc = nds_err(NDS_ECORRUPT, "checkpoint marker %s%s is not a json object",
                         nds_kvstore_url(dir), key);
        json_object_put(m);
        if (!rc && marker_json &&
            !(*marker_json = strndup((const char *)r.value.data, r.value.len)))
            rc = nds_err(NDS_ENOMEM, "out of memory");
        *complete = rc == 0;
    }
    nds_read_result_dispose(&r);
    nds_kvstore_free(dir);
    free(key);
    return rc;
}
