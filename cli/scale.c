/* --scale INDEX|KEY|RESOLUTION, shared by every command that opens an array (read, write, info,
 * verify, attrs, cp's source): the spec that opens one scale of
 * - a neuroglancer precomputed volume: the volume is opened once (at the scale its spec names,
 *   else scale 0) to read its "scales", the one named is found, and the spec that reopens the
 *   volume (nds_array_spec) gets "scale_metadata": {"key": KEY}, so the format opens it as any
 *   spec naming a scale;
 * - an OME-Zarr multiscale group (a URL or path whose zarr.json, or zarr v2 .zattrs, holds
 *   "multiscales", under "ome" in OME-Zarr 0.5): the first multiscale's datasets are the scales
 *   (KEY: a dataset's "path"; RESOLUTION: its "scale" transformation, every axis in the stored
 *   order), and the spec is the group's kvstore with the dataset's path.
 * Any other array is refused. The group's documents are read by ome.c (shared with info's and
 * --units' physical frame and with the groups downsample and cp --ome write). Omits: OME-Zarr
 * groups given as JSON specs, multiscales after the first, transformations other than a dataset's
 * own "scale" (for choosing by resolution).
 * Threading: none. Ownership: the spec returned is malloc'd (free).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "ome.h"

#define PRECOMPUTED "neuroglancer_precomputed"

#define MAX_AXES 32 /* NDS_MAX_RANK and then some: a resolution longer than any array's rank */

/* The scales --scale chooses among: precomputed "scales" (key, resolution) or OME-Zarr "datasets"
 * (path, the "scale" transformation). */
typedef struct scale_list {
    json_object *items;   /* the array (borrowed) */
    const char *key_name; /* "key" or "path" */
    bool ome;             /* resolution from coordinateTransformations */
} scale_list;

/* "8,8,40" (or "[8, 8, 40]") into res (at most MAX_AXES finite numbers above 0): their count, or
 * -1. */
static int parse_resolution(const char *text, double *res) {
    const char *p = text + strspn(text, " [");
    for (int i = 0; i < MAX_AXES; i++) {
        char *end;
        errno = 0;
        res[i] = strtod(p, &end);
        if (end == p || errno != 0 || !isfinite(res[i]) || res[i] <= 0)
            return -1;
        p = end + strspn(end, " ");
        if (*p != ',')
            return strcmp(p, "]") == 0 || *p == '\0' ? i + 1 : -1;
        p++;
        p += strspn(p, " ");
    }
    return -1;
}

/* The numbers of a JSON array into res: their count (at most MAX_AXES), or -1 (also when one is
 * not a number). */
static int json_numbers(json_object *r, double *res) {
    if (!json_object_is_type(r, json_type_array) || json_object_array_length(r) > MAX_AXES)
        return -1;
    int n = (int)json_object_array_length(r);
    for (int i = 0; i < n; i++) {
        json_object *v = json_object_array_get_idx(r, (size_t)i);
        if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
            return -1;
        res[i] = json_object_get_double(v);
    }
    return n;
}

/* Scale i's resolution into res: the count of its numbers, or -1 when it has none. */
static int scale_resolution(const scale_list *l, size_t i, double *res) {
    json_object *s = json_object_array_get_idx(l->items, i), *r = NULL, *t = NULL;
    if (!l->ome)
        return json_object_object_get_ex(s, "resolution", &r) ? json_numbers(r, res) : -1;
    if (!json_object_object_get_ex(s, "coordinateTransformations", &t) ||
        !json_object_is_type(t, json_type_array))
        return -1;
    for (size_t k = 0; k < json_object_array_length(t); k++) {
        json_object *tk = json_object_array_get_idx(t, k), *type = NULL;
        if (json_object_object_get_ex(tk, "type", &type) &&
            json_object_is_type(type, json_type_string) &&
            strcmp(json_object_get_string(type), "scale") == 0 &&
            json_object_object_get_ex(tk, "scale", &r))
            return json_numbers(r, res);
    }
    return -1;
}

static const char *scale_key(const scale_list *l, size_t i) {
    json_object *k = NULL;
    return json_object_object_get_ex(json_object_array_get_idx(l->items, i), l->key_name, &k) &&
                   json_object_is_type(k, json_type_string)
               ? json_object_get_string(k)
               : NULL;
}

/* The index of the scale text names (digits: an index; with commas: a resolution; else a key),
 * or -1. */
static long find_scale(const scale_list *l, const char *text) {
    size_t n = json_object_array_length(l->items);
    if (text[0] && strspn(text, "0123456789") == strlen(text)) {
        errno = 0;
        unsigned long long i = strtoull(text, NULL, 10);
        return errno == 0 && i < n ? (long)i : -1;
    }
    double want[MAX_AXES], have[MAX_AXES];
    bool by_resolution = strchr(text, ',') != NULL;
    int nwant = by_resolution ? parse_resolution(text, want) : 0;
    if (nwant < 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (by_resolution ? scale_resolution(l, i, have) == nwant &&
                                memcmp(have, want, (size_t)nwant * sizeof *have) == 0
                          : scale_key(l, i) && strcmp(scale_key(l, i), text) == 0)
            return (long)i;
    }
    return -1;
}

/* "0 (8_8_40, resolution 8,8,40), 1 (...)" into buf: what --scale can name. */
static void list_scales(const scale_list *l, char *buf, size_t cap) {
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < json_object_array_length(l->items) && used < cap; i++) {
        double r[MAX_AXES];
        int nr = scale_resolution(l, i, r);
        int n = snprintf(buf + used, cap - used, "%s%zu (%s, resolution ", i ? ", " : "", i,
                         scale_key(l, i) ? scale_key(l, i) : "?");
        used += n > 0 ? (size_t)n : 0;
        for (int k = 0; k < nr && used < cap; k++) {
            n = snprintf(buf + used, cap - used, "%s%g", k ? "," : "", r[k]);
            used += n > 0 ? (size_t)n : 0;
        }
        if (used < cap) {
            n = snprintf(buf + used, cap - used, nr < 0 ? "none)" : ")");
            used += n > 0 ? (size_t)n : 0;
        }
    }
}

/* The index of the scale text names in l, or CLI_FAIL (printed: the scales there). */
static int choose_scale(const scale_list *l, const char *text, const char *url, size_t *index) {
    long i = find_scale(l, text);
    if (i < 0) {
        char list[2048];
        list_scales(l, list, sizeof list);
        return cli_fail("--scale %s: no such scale in %s (give an index, a %s or a resolution "
                        "x,y,z); its scales: %s", text, url, l->key_name, list);
    }
    if (!scale_key(l, (size_t)i))
        return cli_fail("--scale %s: scale %ld of %s has no %s", text, i, url, l->key_name);
    *index = (size_t)i;
    return CLI_OK;
}

/* The scales array of a's metadata (info), into *doc (the caller puts it); CLI_FAIL printed. */
static int volume_scales(nds_array *a, json_object **doc, json_object **scales) {
    char *text = NULL;
    nds_error_clear();
    int st = nds_array_metadata(a, &text);
    if (st != 0)
        return cli_fail_nds(st, "--scale");
    *doc = json_tokener_parse(text);
    nds_free(text);
    if (!*doc || !json_object_object_get_ex(*doc, "scales", scales) ||
        !json_object_is_type(*scales, json_type_array))
        return cli_fail("--scale: %s: the volume's info has no \"scales\" list",
                        nds_kvstore_url(nds_array_kvstore(a)));
    return CLI_OK;
}

/* a's spec with "scale_metadata": {"key": key} (and no "scale_index"), as text into *out. */
static int spec_at_key(nds_array *a, const char *key, char **out) {
    char *text = NULL;
    nds_error_clear();
    int st = nds_array_spec(a, &text);
    if (st != 0)
        return cli_fail_nds(st, "--scale");
    json_object *spec = json_tokener_parse(text), *sm = json_object_new_object();
    nds_free(text);
    if (!spec || !sm) {
        json_object_put(spec);
        json_object_put(sm);
        return cli_fail("--scale: the volume's spec does not parse");
    }
    json_object_object_add(sm, "key", json_object_new_string(key));
    json_object_object_add(spec, "scale_metadata", sm);
    json_object_object_del(spec, "scale_index");
    const char *s = json_object_to_json_string_ext(spec, JSON_C_TO_STRING_PLAIN |
                                                             JSON_C_TO_STRING_NOSLASHESCAPE);
    *out = s ? strdup(s) : NULL;
    json_object_put(spec);
    return *out ? CLI_OK : cli_fail("out of memory");
}

/* The spec of scale text of the open volume a. */
static int spec_of_scale(nds_array *a, const char *text, char **out) {
    const char *url = nds_kvstore_url(nds_array_kvstore(a));
    if (strcmp(nds_array_format(a), PRECOMPUTED) != 0)
        return cli_fail("--scale %s: %s is a %s array: only neuroglancer precomputed volumes and "
                        "OME-Zarr multiscale groups have scales", text, url, nds_array_format(a));
    json_object *doc = NULL;
    scale_list l = {NULL, "key", false};
    size_t i = 0;
    int rc = volume_scales(a, &doc, &l.items);
    if (rc == CLI_OK)
        rc = choose_scale(&l, text, url, &i);
    if (rc == CLI_OK)
        rc = spec_at_key(a, scale_key(&l, i), out);
    json_object_put(doc);
    return rc;
}

/* ---- OME-Zarr multiscale groups ---- */

/* {"driver": format, "kvstore": kvurl, "path": path} as text into *out. */
static int dataset_spec(const char *kvurl, const char *format, const char *path, char **out) {
    json_object *spec = json_object_new_object();
    if (!spec)
        return cli_fail("out of memory");
    json_object_object_add(spec, "driver", json_object_new_string(format));
    json_object_object_add(spec, "kvstore", json_object_new_string(kvurl));
    json_object_object_add(spec, "path", json_object_new_string(path));
    const char *s = json_object_to_json_string_ext(spec, JSON_C_TO_STRING_PLAIN |
                                                             JSON_C_TO_STRING_NOSLASHESCAPE);
    *out = s ? strdup(s) : NULL;
    json_object_put(spec);
    return *out ? CLI_OK : cli_fail("out of memory");
}

/* When url (not JSON, not @file) names an OME-Zarr multiscale group: *is_group, and the spec of
 * the dataset text names (or CLI_FAIL printed). Otherwise *is_group = false and CLI_OK. */
static int ome_scale_spec(const char *url, const char *text, bool *is_group, char **out) {
    *is_group = false;
    const char *p = url + strspn(url, " \t\r\n");
    char *kvurl = NULL, *format = NULL, *dir = NULL;
    nds_kvstore *kv = NULL;
    if (*p == '{' || *p == '@' || nds_spec_url_split(url, &kvurl, &format) != 0)
        return CLI_OK;
    size_t n = strlen(kvurl);
    dir = malloc(n + 2);
    if (dir)
        snprintf(dir, n + 2, "%s%s", kvurl, n && kvurl[n - 1] == '/' ? "" : "/");
    json_object *doc = NULL, *ms = NULL, *datasets = NULL;
    const char *zarr = NULL;
    if (dir && nds_kvstore_open(&kv, dir, NULL) == 0)
        cli_ome_find_group(kv, &doc, &ms, &zarr);
    json_object_object_get_ex(ms, "datasets", &datasets);
    int rc = CLI_OK;
    bool other_format = format && strcmp(format, "zarr") != 0 && strcmp(format, "zarr3") != 0;
    if (datasets && !other_format) {
        *is_group = true;
        scale_list l = {datasets, "path", true};
        size_t i = 0;
        rc = choose_scale(&l, text, url, &i);
        if (rc == CLI_OK)
            rc = dataset_spec(dir, format ? format : zarr, scale_key(&l, i), out);
    }
    json_object_put(doc);
    nds_kvstore_free(kv);
    nds_free(kvurl);
    nds_free(format);
    free(dir);
    nds_error_clear();
    return rc;
}

int cli_scale_spec(const char *spec, const char *scale, char **out) {
    *out = NULL;
    if (!scale)
        return CLI_OK;
    if (scale[strspn(scale, " \t")] == '\0')
        return cli_fail("--scale is empty: give an index (0), a key (8_8_40) or a resolution "
                        "(8,8,40)");
    nds_array *a = NULL;
    nds_open_options o = NDS_OPEN_OPTIONS_INIT;
    nds_error_clear();
    int st = nds_array_open(&a, spec, &o);
    if (st == 0) {
        int rc = spec_of_scale(a, scale, out);
        nds_array_free(a);
        return rc;
    }
    /* No array there: an OME-Zarr group, or the open's own error. */
    char why[1024];
    snprintf(why, sizeof why, "%s", nds_error_last()->message);
    bool is_group = false;
    int rc = st == NDS_ENOTFOUND ? ome_scale_spec(spec, scale, &is_group, out) : CLI_OK;
    if (is_group)
        return rc;
    return why[0] ? cli_fail("%s", why) : cli_fail("%s: %s", spec, nds_strerror(st));
}
