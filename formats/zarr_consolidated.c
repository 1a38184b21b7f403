/* Consolidated metadata of zarr hierarchies: see zarr_consolidated.h and docs/formats.md
 * ("Consolidated metadata"). Layouts follow zarr-python: v2 consolidate_metadata writes
 * {"zarr_consolidated_format": 1, "metadata": {"<path>/.zarray": {...}, ".zgroup": {...}}} to the
 * group's .zmetadata; zarr-python 3 writes {"kind": "inline", "must_understand": false,
 * "metadata": {"<path>": <that node's zarr.json>}} as the group zarr.json's
 * "consolidated_metadata" member. Every document is checked whole before any entry is used, so a
 * malformed copy is an error naming its key, never a partial view.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zarr_consolidated.h"
#include "ndstore/array.h"
#include "internal/error.h"
#include "internal/format_util.h"
#include "internal/json_util.h"
#include "internal/kvstore_internal.h"
#include "internal/util.h"

/* Rounds of read-modify-conditional-write of a v3 group's zarr.json. */
#define CONSOLIDATE_ATTEMPTS 8

const char *nds_zc_key(nds_zc_layout layout) {
    return layout == NDS_ZC_V2 ? ".zmetadata" : "zarr.json";
}

/* A path inside the group: relative, no "." / ".." / empty segments (a copy naming "../x" would
 * describe something outside the group it was found in). */
static bool is_inner_path(const char *p) {
    if (p[0] == '/' || strlen(p) > 4096) return false;
    for (const char *s = p; *s;) {
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
            return false;
        if (!e) break;
        s = e + 1;
        if (!*s) return false; /* trailing '/' */
    }
    return true;
}

/* v2 entry names: a metadata document's key. zarr-python consolidates exactly these three. */
static bool is_v2_meta_key(const char *key) {
    const char *slash = strrchr(key, '/'), *base = slash ? slash + 1 : key;
    return strcmp(base, ".zarray") == 0 || strcmp(base, ".zattrs") == 0 ||
           strcmp(base, ".zgroup") == 0;
}

/* Every entry of map: an inner path (v2: ending in a metadata key) naming a JSON object. */
static int check_map(nds_zc_layout layout, json_object *map, const char *name, const char *where) {
    if (!json_object_is_type(map, json_type_object))
        return nds_err(NDS_EFORMAT, "%s: \"%s\" must be an object", name, where);
    if ((size_t)json_object_object_length(map) > NDS_ZC_MAX_ENTRIES)
        return nds_err(NDS_ELIMIT, "%s: \"%s\" has %d entries, more than the %u allowed", name,
                       where, json_object_object_length(map), NDS_ZC_MAX_ENTRIES);
    json_object_object_foreach(map, key, val) {
        bool ok_name = layout == NDS_ZC_V2 ? is_inner_path(key) && is_v2_meta_key(key)
                                           : is_inner_path(key);
        if (!ok_name)
            return nds_err(NDS_EFORMAT, "%s: \"%s\" entry \"%.200s\" is not %s", name, where, key,
                           layout == NDS_ZC_V2
                               ? "a .zarray, .zattrs or .zgroup key inside the group"
                               : "a path inside the group");
        if (!json_object_is_type(val, json_type_object))
            return nds_err(NDS_EFORMAT, "%s: \"%s\" entry \"%.200s\" must be an object", name,
                           where, key);
        if (layout == NDS_ZC_V3) {
            json_object *t;
            const char *type = json_object_object_get_ex(val, "node_type", &t) &&
                                       json_object_is_type(t, json_type_string)
                                   ? json_object_get_string(t)
                                   : "";
            if (strcmp(type, "array") != 0 && strcmp(type, "group") != 0)
                return nds_err(NDS_EFORMAT,
                               "%s: \"%s\" entry \"%.200s\": \"node_type\" must be \"array\" or "
                               "\"group\"",
                               name, where, key);
        }
    }
    return 0;
}

static int v2_entries(const json_object *doc, const char *name, json_object **entries) {
    json_object *v;
    if (!json_object_is_type(doc, json_type_object))
        return nds_err(NDS_EFORMAT, "%s: expected a json object", name);
    if (!json_object_object_get_ex(doc, "zarr_consolidated_format", &v))
        return nds_err(NDS_EFORMAT, "%s: missing member \"zarr_consolidated_format\"", name);
    if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) != 1)
        return nds_err(NDS_EUNSUPPORTED,
                       "%s: \"zarr_consolidated_format\" is %.40s; ndstore reads format 1", name,
                       json_object_to_json_string(v));
    if (!json_object_object_get_ex(doc, "metadata", &v))
        return nds_err(NDS_EFORMAT, "%s: missing member \"metadata\"", name);
    int rc = check_map(NDS_ZC_V2, v, name, "metadata");
    if (!rc) *entries = v;
    return rc;
}

static int v3_entries(const json_object *doc, const char *name, json_object **entries) {
    json_object *cm, *v;
    if (!json_object_is_type(doc, json_type_object))
        return nds_err(NDS_EFORMAT, "%s: expected a json object", name);
    if (!json_object_object_get_ex(doc, "node_type", &v) ||
        !json_object_is_type(v, json_type_string) || strcmp(json_object_get_string(v), "group"))
        return 0; /* an array (or not a node): no consolidated metadata here */
    if (!json_object_object_get_ex(doc, "consolidated_metadata", &cm) || !cm)
        return 0; /* absent or null: none */
    if (!json_object_is_type(cm, json_type_object))
        return nds_err(NDS_EFORMAT, "%s: \"consolidated_metadata\" must be an object or null",
                       name);
    if (!json_object_object_get_ex(cm, "kind", &v) || !json_object_is_type(v, json_type_string))
        return nds_err(NDS_EFORMAT, "%s: \"consolidated_metadata\": \"kind\" must be a string",
                       name);
    if (strcmp(json_object_get_string(v), "inline") != 0)
        return nds_err(NDS_EUNSUPPORTED,
                       "%s: \"consolidated_metadata\": kind \"%.40s\" is not supported (only "
                       "\"inline\")",
                       name, json_object_get_string(v));
    if (json_object_object_get_ex(cm, "must_understand", &v) &&
        !json_object_is_type(v, json_type_boolean))
        return nds_err(NDS_EFORMAT,
                       "%s: \"consolidated_metadata\": \"must_understand\" must be a boolean", name);
    if (!json_object_object_get_ex(cm, "metadata", &v))
        return nds_err(NDS_EFORMAT, "%s: \"consolidated_metadata\": missing member \"metadata\"",
                       name);
    int rc = check_map(NDS_ZC_V3, v, name, "consolidated_metadata.metadata");
    if (!rc) *entries = v;
    return rc;
}

int nds_zc_entries(nds_zc_layout layout, const json_object *doc, const char *name,
                   json_object **entries) {
    *entries = NULL;
    return layout == NDS_ZC_V2 ? v2_entries(doc, name, entries) : v3_entries(doc, name, entries);
}

int nds_zc_read(nds_kvstore *kv, nds_zc_layout layout, bool *found, json_object **doc,
                json_object **entries) {
    const char *key = nds_zc_key(layout), *url = nds_kvstore_url(kv);
    const char *who = layout == NDS_ZC_V2 ? "zarr" : "zarr3";
    nds_read_result r;
    *doc = NULL;
    *entries = NULL;
    /* At most one byte past the limit is read: a huge copy is refused without being held. */
    nds_read_options o = NDS_READ_OPTIONS_INIT;
    o.byte_length = (int64_t)NDS_ZC_MAX_BYTES + 1;
    int rc = nds_kvstore_read(kv, key, &o, &r);
    if (rc) return nds_err_prefix(rc, "%s: reading %s of %s", who, key, url);
    *found = r.state == NDS_READ_VALUE;
    if (!*found) {
        nds_read_result_dispose(&r);
        return 0;
    }
    char name[700];
    snprintf(name, sizeof name, "%s: %s of %s", who, key, url);
    if (r.value.len > NDS_ZC_MAX_BYTES || r.total_size > NDS_ZC_MAX_BYTES)
        rc = nds_err(NDS_ELIMIT, "%s: %llu bytes, more than the %zu read as consolidated metadata",
                     name, (unsigned long long)(r.total_size > r.value.len ? r.total_size
                                                                           : r.value.len),
                     NDS_ZC_MAX_BYTES);
    else
        rc = nds_json_parse((const char *)r.value.data, r.value.len, name, doc);
    nds_read_result_dispose(&r);
    if (!rc) rc = nds_zc_entries(layout, *doc, name, entries);
    if (rc) {
        json_object_put(*doc);
        *doc = NULL;
        *entries = NULL;
    }
    return rc;
}

void nds_zc_found_dispose(nds_zc_found *f) {
    json_object_put(f->doc);
    free(f->rel);
    memset(f, 0, sizeof *f);
}

/* The spec member whose "path" is the array's: the top level's, or when that is empty (an adapter
 * over a base store: "file:///d/a/|faulty:") the innermost base's. */
static bool has_path(json_object *node) {
    json_object *v;
    return json_object_object_get_ex(node, "path", &v) && json_object_is_type(v, json_type_string) &&
           json_object_get_string_len(v) > 0;
}

static json_object *path_node(json_object *spec) {
    json_object *node = spec, *base;
    while (!has_path(node)) {
        if (!json_object_object_get_ex(node, "base", &base) ||
            !json_object_is_type(base, json_type_object))
            break;
        node = base;
    }
    return node;
}

/* Reads the copy at ancestor path[0..anc) through a new handle on the same store opened there
 * (not kv's instance: a file store's root is the directory it was opened at). */
static int try_level(nds_kvstore *kv, json_object *spec, json_object *node, nds_zc_layout layout,
                     const char *path, size_t anc, nds_zc_found *out) {
    char *dir = nds_asprintf("%.*s", (int)anc, path);
    nds_kvstore *g = NULL;
    int rc = dir ? 0 : nds_err(NDS_ENOMEM, "out of memory");
    if (!rc) {
        json_object_object_add(node, "path", json_object_new_string(dir));
        rc = nds_kvstore_open_json(&g, spec, nds_kvstore_context(kv));
    }
    free(dir);
    bool found = false;
    if (!rc) rc = nds_zc_read(g, layout, &found, &out->doc, &out->entries);
    if (!rc && out->entries) {
        size_t n = strlen(path + anc);
        while (n && path[anc + n - 1] == '/') n--;
        out->rel = nds_asprintf("%.*s", (int)n, path + anc);
        snprintf(out->group_url, sizeof out->group_url, "%s", nds_kvstore_url(g));
        if (!out->rel) rc = nds_err(NDS_ENOMEM, "out of memory");
    }
    nds_kvstore_free(g);
    if (!rc && !out->entries) {
        json_object_put(out->doc);
        out->doc = NULL;
        return NDS_ENOTFOUND;
    }
    return rc;
}

/* Tries each ancestor of path (parent first) up to the store's root ("" or "/"). */
static int find_up(nds_kvstore *kv, json_object *spec, json_object *node, nds_zc_layout layout,
                   const char *path, nds_zc_found *out) {
    size_t n = strlen(path), top = path[0] == '/' ? 1 : 0;
    while (n > top && path[n - 1] == '/') n--; /* the array's own directory is not searched */
    while (n > top) {
        while (n > top && path[n - 1] != '/') n--; /* n: length of the parent, '/' included */
        int rc = try_level(kv, spec, node, layout, path, n, out);
        if (rc == NDS_EPERM) { /* a level the caller may not read (a bucket's root): none above */
            nds_error_clear();
            return NDS_ENOTFOUND;
        }
        if (rc != NDS_ENOTFOUND) return rc;
        while (n > top && path[n - 1] == '/') n--;
    }
    return NDS_ENOTFOUND;
}

int nds_zc_find(nds_kvstore *kv, nds_zc_layout layout, nds_zc_found *out) {
    memset(out, 0, sizeof *out);
    json_object *spec = NULL, *v;
    int rc = nds_kvstore_spec_json(kv, &spec);
    if (rc) return rc;
    json_object *node = path_node(spec);
    char *path = json_object_object_get_ex(node, "path", &v) && json_object_is_type(v, json_type_string)
                     ? strdup(json_object_get_string(v))
                     : strdup("");
    rc = path ? find_up(kv, spec, node, layout, path, out) : nds_err(NDS_ENOMEM, "out of memory");
    if (rc) nds_zc_found_dispose(out);
    free(path);
    json_object_put(spec);
    return rc;
}

json_object *nds_zc_lookup(const nds_zc_found *f, const char *name) {
    char *key = name ? nds_asprintf("%s%s%s", f->rel, f->rel[0] ? "/" : "", name)
                     : nds_asprintf("%s", f->rel);
    json_object *v = NULL;
    if (key && !json_object_object_get_ex(f->entries, key, &v)) v = NULL;
    free(key);
    return v;
}

int nds_zc_open_entry(nds_kvstore *kv, const json_object *spec, unsigned mode,
                      nds_zc_layout layout, nds_zc_entry *out, char *doc_name, size_t cap) {
    bool asked = false;
    json_object **doc = &out->doc, **attrs = layout == NDS_ZC_V2 ? &out->attrs : NULL;
    out->doc = out->attrs = NULL;
    int rc = nds_json_get_bool(spec, "consolidated", true, "spec", &asked);
    if (rc || !asked || (mode & NDS_OPEN_CREATE)) return rc;
    nds_zc_found f;
    rc = nds_zc_find(kv, layout, &f);
    if (rc) return rc == NDS_ENOTFOUND ? 0 : rc;
    json_object *entry = nds_zc_lookup(&f, layout == NDS_ZC_V2 ? ".zarray" : NULL);
    json_object *attr_entry = layout == NDS_ZC_V2 ? nds_zc_lookup(&f, ".zattrs") : NULL;
    if (entry && json_object_deep_copy(entry, doc, NULL) != 0) rc = NDS_ENOMEM;
    if (!rc && *doc && attrs)
        *attrs = attr_entry && json_object_deep_copy(attr_entry, attrs, NULL) == 0
                     ? *attrs
                     : json_object_new_object();
    if (!rc && *doc && attrs && !*attrs) rc = NDS_ENOMEM;
    if (rc) {
        json_object_put(*doc);
        *doc = NULL;
        rc = nds_err(NDS_ENOMEM, "out of memory");
    } else if (*doc) {
        snprintf(doc_name, cap, "%s: consolidated metadata of %s (%s of %s)",
                 layout == NDS_ZC_V2 ? "zarr" : "zarr3", nds_kvstore_url(kv), nds_zc_key(layout),
                 f.group_url);
    }
    nds_zc_found_dispose(&f);
    return rc;
}

/* ---- building ------------------------------------------------------------------------------ */

typedef struct key_list {
    char **v;
    size_t n, cap;
    nds_zc_layout layout;
    int error;
} key_list;

static int collect_key(void *ctx, const char *key, uint64_t size) {
    key_list *l = ctx;
    (void)size;
    const char *slash = strrchr(key, '/'), *base = slash ? slash + 1 : key;
    bool wanted = l->layout == NDS_ZC_V2 ? is_v2_meta_key(key)
                                         : strcmp(base, "zarr.json") == 0 && slash;
    if (!wanted) return 0;
    if (l->n == NDS_ZC_MAX_ENTRIES) {
        l->error = nds_err(NDS_ELIMIT, "more than %u metadata documents to consolidate",
                           NDS_ZC_MAX_ENTRIES);
        return 1;
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        char **v = realloc(l->v, cap * sizeof *v);
        if (!v) {
            l->error = nds_err(NDS_ENOMEM, "out of memory");
            return 1;
        }
        l->v = v;
        l->cap = cap;
    }
    if (!(l->v[l->n] = strdup(key))) {
        l->error = nds_err(NDS_ENOMEM, "out of memory");
        return 1;
    }
    l->n++;
    return 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void key_list_dispose(key_list *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
}

/* Reads key as a JSON object. */
static int read_doc(nds_kvstore *kv, const char *key, const char *who, json_object **out) {
    nds_read_result r;
    bool found = false;
    *out = NULL;
    int rc = nds_format_read_key(kv, key, who, nds_kvstore_url(kv), &r, &found);
    if (rc) return rc;
    if (!found) return NDS_ENOTFOUND; /* deleted since it was listed */
    char name[700];
    snprintf(name, sizeof name, "%s: %s of %s", who, key, nds_kvstore_url(kv));
    rc = nds_json_parse((const char *)r.value.data, r.value.len, name, out);
    nds_read_result_dispose(&r);
    if (!rc && !json_object_is_type(*out, json_type_object)) {
        json_object_put(*out);
        *out = NULL;
        rc = nds_err(NDS_EFORMAT, "%s: expected a json object", name);
    }
    return rc;
}

/* The map of every metadata document below kv (v3: keyed by the node's path; the group's own
 * zarr.json is not an entry). */
static int build_map(nds_kvstore *kv, nds_zc_layout layout, json_object **map) {
    const char *who = layout == NDS_ZC_V2 ? "zarr" : "zarr3";
    key_list l = {.layout = layout};
    int rc = nds_kvstore_list(kv, "", collect_key, &l);
    if (l.error) rc = l.error;
    if (rc) rc = nds_err_prefix(rc, "%s: listing %s to consolidate it", who, nds_kvstore_url(kv));
    if (!rc && l.n > 1) qsort(l.v, l.n, sizeof *l.v, cmp_str);
    *map = rc ? NULL : json_object_new_object();
    for (size_t i = 0; !rc && i < l.n; i++) {
        json_object *doc;
        rc = read_doc(kv, l.v[i], who, &doc);
        if (rc == NDS_ENOTFOUND) { /* gone since listed */
            rc = 0;
            continue;
        }
        if (rc) break;
        if (layout == NDS_ZC_V2) {
            json_object_object_add(*map, l.v[i], doc);
        } else {
            json_object_object_del(doc, "consolidated_metadata"); /* nested copies: not kept */
            l.v[i][strlen(l.v[i]) - strlen("/zarr.json")] = '\0';
            json_object_object_add(*map, l.v[i], doc);
        }
    }
    key_list_dispose(&l);
    if (rc) {
        json_object_put(*map);
        *map = NULL;
    }
    return rc;
}

static int consolidate_v2(nds_kvstore *kv, size_t *count) {
    const char *url = nds_kvstore_url(kv);
    json_object *map = NULL;
    int rc = build_map(kv, NDS_ZC_V2, &map);
    if (rc) return rc;
    if (!json_object_object_get_ex(map, ".zgroup", NULL)) {
        json_object_put(map);
        return nds_err(NDS_ENOTFOUND,
                       "zarr: no group at %s (.zgroup not found): consolidated metadata belongs "
                       "to a group (create it with `ndstore group`)",
                       url);
    }
    if (count) *count = (size_t)json_object_object_length(map);
    json_object *doc = json_object_new_object();
    json_object_object_add(doc, "metadata", map);
    json_object_object_add(doc, "zarr_consolidated_format", json_object_new_int(1));
    rc = nds_format_write_json(kv, ".zmetadata", doc, &nds_json_style_python, NULL, "zarr", url);
    json_object_put(doc);
    return rc;
}

/* One read-modify-conditional-write of the group's zarr.json; NDS_ECONFLICT to retry. */
static int consolidate_v3_once(nds_kvstore *kv, json_object *map) {
    const char *url = nds_kvstore_url(kv);
    nds_read_result r;
    bool found = false;
    int rc = nds_format_read_key(kv, "zarr.json", "zarr3", url, &r, &found);
    if (rc) return rc;
    if (!found)
        return nds_err(NDS_ENOTFOUND,
                       "zarr3: no group at %s (zarr.json not found): consolidated metadata "
                       "belongs to a group (create it with `ndstore group --format zarr3`)",
                       url);
    char name[700];
    snprintf(name, sizeof name, "zarr3: zarr.json of %s", url);
    json_object *doc = NULL, *t;
    rc = nds_json_parse((const char *)r.value.data, r.value.len, name, &doc);
    if (!rc && (!json_object_is_type(doc, json_type_object) ||
                !json_object_object_get_ex(doc, "node_type", &t) ||
                strcmp(json_object_get_string(t), "group") != 0))
        rc = nds_err(NDS_EINVAL, "%s: not a group; consolidated metadata belongs to a group", name);
    if (!rc) {
        json_object *cm = json_object_new_object(), *copy = NULL;
        json_object_deep_copy(map, &copy, NULL);
        json_object_object_add(cm, "kind", json_object_new_string("inline"));
        json_object_object_add(cm, "must_understand", json_object_new_boolean(0));
        json_object_object_add(cm, "metadata", copy);
        json_object_object_add(doc, "consolidated_metadata", cm);
        rc = copy ? nds_format_write_json(kv, "zarr.json", doc, &nds_json_style_zarr3,
                                          &r.generation, "zarr3", url)
                  : nds_err(NDS_ENOMEM, "zarr3: out of memory");
    }
    json_object_put(doc);
    nds_read_result_dispose(&r);
    return rc;
}

static int consolidate_v3(nds_kvstore *kv, size_t *count) {
    json_object *map = NULL;
    int rc = build_map(kv, NDS_ZC_V3, &map);
    if (rc) return rc;
    if (count) *count = (size_t)json_object_object_length(map);
    for (int attempt = 0; attempt < CONSOLIDATE_ATTEMPTS; attempt++)
        if ((rc = consolidate_v3_once(kv, map)) != NDS_ECONFLICT) break;
    if (rc == NDS_ECONFLICT)
        rc = nds_err(NDS_ECONFLICT, "zarr3: zarr.json of %s kept changing while consolidating",
                     nds_kvstore_url(kv));
    json_object_put(map);
    return rc;
}

int nds_zc_consolidate(nds_kvstore *kv, nds_zc_layout layout, size_t *count) {
    if (count) *count = 0;
    return layout == NDS_ZC_V2 ? consolidate_v2(kv, count) : consolidate_v3(kv, count);
}
