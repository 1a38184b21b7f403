/* OME-Zarr metadata for the command line: see ome.h. Reads OME-NGFF 0.4 (zarr v2 .zattrs, or
 * zarr.json attributes) and 0.5 (zarr.json attributes "ome"); writes 0.5. Omits: multiscales after
 * the first, transformations other than scale and translation (a "path" to a transformation file,
 * affine ones), time units. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "ome.h"

#define GROUP_DOC_MAX ((int64_t)16 << 20) /* a group's metadata is small; bounds a hostile one */
#define GROUP_LEVELS 3                    /* a dataset's path has at most this many parts */

/* ---- units ---- */

/* OME's lengths (UDUNITS-2 names, as OME-NGFF lists them) that ndstore's units express: the short
 * name (nds_unit_metres knows it) and how many of it one OME unit is. */
static const struct {
    const char *ome, *name;
    double factor;
} unit_table[] = {
    {"picometer", "pm", 1},  {"angstrom", "pm", 100}, {"nanometer", "nm", 1},
    {"micrometer", "um", 1}, {"millimeter", "mm", 1}, {"centimeter", "cm", 1},
    {"decimeter", "cm", 10}, {"meter", "m", 1},       {"kilometer", "m", 1000},
};
#define N_UNITS (sizeof unit_table / sizeof unit_table[0])

const char *cli_ome_unit_short(const char *ome, double *factor) {
    *factor = 1;
    for (size_t i = 0; ome && i < N_UNITS; i++)
        if (strcmp(ome, unit_table[i].ome) == 0) {
            *factor = unit_table[i].factor;
            return unit_table[i].name;
        }
    /* a short name ("nm", as some writers put it) is taken as it is */
    return ome && nds_unit_metres(ome) > 0 ? ome : NULL;
}

const char *cli_ome_unit_long(const char *name) {
    if (name && strcmp(name, "\xc2\xb5m") == 0) name = "um";
    for (size_t i = 0; name && i < N_UNITS; i++)
        if (unit_table[i].factor == 1 && strcmp(name, unit_table[i].name) == 0)
            return unit_table[i].ome;
    return NULL;
}

/* ---- reading groups ---- */

json_object *cli_ome_read_json(nds_kvstore *kv, const char *key) {
    nds_read_options o = NDS_READ_OPTIONS_INIT;
    o.byte_length = GROUP_DOC_MAX;
    nds_read_result r;
    if (nds_kvstore_read(kv, key, &o, &r) != 0) return NULL;
    json_object *doc = NULL;
    if (r.state == NDS_READ_VALUE && r.value.len < (size_t)GROUP_DOC_MAX) {
        json_tokener *tok = json_tokener_new();
        doc = tok ? json_tokener_parse_ex(tok, (const char *)r.value.data, (int)r.value.len) : NULL;
        json_tokener_free(tok);
    }
    nds_read_result_dispose(&r);
    return doc;
}

json_object *cli_ome_multiscale(json_object *attrs) {
    json_object *ome = NULL, *ms = NULL, *ds = NULL;
    if (json_object_object_get_ex(attrs, "ome", &ome) && json_object_is_type(ome, json_type_object))
        attrs = ome;
    if (!json_object_object_get_ex(attrs, "multiscales", &ms) ||
        !json_object_is_type(ms, json_type_array) || json_object_array_length(ms) == 0)
        return NULL;
    json_object *first = json_object_array_get_idx(ms, 0);
    if (!json_object_object_get_ex(first, "datasets", &ds) ||
        !json_object_is_type(ds, json_type_array))
        return NULL;
    return first;
}

void cli_ome_find_group(nds_kvstore *kv, json_object **doc, json_object **ms, const char **format) {
    json_object *attrs = NULL;
    *ms = NULL;
    if ((*doc = cli_ome_read_json(kv, "zarr.json")) &&
        json_object_object_get_ex(*doc, "attributes", &attrs))
        *ms = cli_ome_multiscale(attrs);
    *format = "zarr3";
    if (*ms) return;
    json_object_put(*doc);
    *doc = cli_ome_read_json(kv, ".zattrs");
    *ms = *doc ? cli_ome_multiscale(*doc) : NULL;
    *format = "zarr";
    if (!*ms) {
        json_object_put(*doc);
        *doc = NULL;
    }
}

/* ---- a dataset's physical frame ---- */

/* What the frame is read from, and where notes about it point. */
typedef struct ome_source {
    const char *group; /* the group's URL */
    const char *path;  /* the dataset's path in it */
    size_t rank;
} ome_source;

static void note(const ome_source *s, const char *what) {
    fprintf(stderr, "ndstore: note: OME-Zarr group %s, dataset \"%s\": %s\n", s->group, s->path,
            what);
}

/* The numbers of list (rank of them, each finite, and above 0 when positive) into out; false (a
 * note said why) otherwise. */
static bool numbers(const ome_source *s, json_object *list, const char *what, bool positive,
                    double *out) {
    char msg[256];
    if (!json_object_is_type(list, json_type_array) || json_object_array_length(list) != s->rank) {
        snprintf(msg, sizeof msg, "%s is not a list of %zu numbers (one per dimension): ignored",
                 what, s->rank);
        note(s, msg);
        return false;
    }
    for (size_t d = 0; d < s->rank; d++) {
        json_object *v = json_object_array_get_idx(list, d);
        bool number =
            json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int);
        out[d] = number ? json_object_get_double(v) : NAN;
        if (!isfinite(out[d]) || (positive && !(out[d] > 0)) || fabs(out[d]) > 1e300) {
            snprintf(msg, sizeof msg, "%s[%zu] is not a %snumber: %s ignored", what, d,
                     positive ? "positive " : "", what);
            note(s, msg);
            return false;
        }
    }
    return true;
}

/* The scale and translation of a coordinateTransformations list (either may be absent: scale 1,
 * translation 0). false when the list is unusable (noted). */
static bool transforms(const ome_source *s, bool present, json_object *list, const char *where,
                       double *scale, double *translation) {
    for (size_t d = 0; d < s->rank; d++) scale[d] = 1, translation[d] = 0;
    if (!present) return true;
    if (!json_object_is_type(list, json_type_array)) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s coordinateTransformations is not a list: ignored", where);
        note(s, msg);
        return false;
    }
    for (size_t k = 0; k < json_object_array_length(list); k++) {
        json_object *t = json_object_array_get_idx(list, k), *type = NULL, *v = NULL;
        const char *name = json_object_object_get_ex(t, "type", &type) &&
                                   json_object_is_type(type, json_type_string)
                               ? json_object_get_string(type)
                               : "";
        char what[96];
        snprintf(what, sizeof what, "%s %s", where, name);
        if (strcmp(name, "scale") == 0 || strcmp(name, "translation") == 0) {
            bool is_scale = name[0] == 's';
            double tmp[NDS_MAX_RANK];
            if (!json_object_object_get_ex(t, name, &v) || !numbers(s, v, what, is_scale, tmp))
                return false;
            for (size_t d = 0; d < s->rank; d++) {
                if (is_scale)
                    scale[d] *= tmp[d], translation[d] *= tmp[d];
                else
                    translation[d] += tmp[d];
            }
        } else if (strcmp(name, "identity") != 0) {
            char msg[200];
            snprintf(msg, sizeof msg,
                     "%s transformation \"%.40s\" is not scale or translation: "
                     "the physical frame is ignored",
                     where, name);
            note(s, msg);
            return false;
        }
    }
    return true;
}

/* The axes' units into units (size 1 per voxel before the scale; 0 where none), false when the
 * axes are unusable (noted). */
static bool axis_units(const ome_source *s, json_object *ms, nds_unit *units, double *factor) {
    json_object *axes = NULL;
    char msg[256];
    if (!json_object_object_get_ex(ms, "axes", &axes) ||
        !json_object_is_type(axes, json_type_array) || json_object_array_length(axes) != s->rank) {
        snprintf(msg, sizeof msg,
                 "its multiscale's axes are not a list of %zu axes (one per "
                 "dimension): no physical units",
                 s->rank);
        note(s, msg);
        return false;
    }
    bool any = false;
    for (size_t d = 0; d < s->rank; d++) {
        json_object *ax = json_object_array_get_idx(axes, d), *u = NULL;
        memset(&units[d], 0, sizeof units[d]);
        factor[d] = 1;
        if (!json_object_object_get_ex(ax, "unit", &u) || json_object_is_type(u, json_type_null))
            continue; /* an axis without a unit (a channel) */
        const char *name =
            json_object_is_type(u, json_type_string) ? json_object_get_string(u) : NULL;
        const char *shrt = cli_ome_unit_short(name, &factor[d]);
        if (!shrt) {
            snprintf(msg, sizeof msg,
                     "axis %zu's unit %.60s is not a length ndstore converts "
                     "(nanometer, micrometer, ...): that axis has no physical "
                     "unit",
                     d, name ? name : json_object_to_json_string(u));
            note(s, msg);
            continue;
        }
        units[d].size = 1;
        snprintf(units[d].name, sizeof units[d].name, "%s", shrt);
        any = true;
    }
    return any;
}

/* The frame of dataset path of the multiscale ms into out; false when it has none. */
static bool dataset_frame(const ome_source *s, json_object *ms, cli_physical *out) {
    json_object *datasets = NULL, *ds = NULL, *ct = NULL;
    json_object_object_get_ex(ms, "datasets", &datasets);
    for (size_t i = 0; !ds && i < json_object_array_length(datasets); i++) {
        json_object *p = NULL, *e = json_object_array_get_idx(datasets, i);
        if (json_object_object_get_ex(e, "path", &p) && json_object_is_type(p, json_type_string) &&
            strcmp(json_object_get_string(p), s->path) == 0)
            ds = e;
    }
    if (!ds) return false; /* an array beside the multiscale's datasets: not one of them */
    nds_unit units[NDS_MAX_RANK];
    double factor[NDS_MAX_RANK], scale[NDS_MAX_RANK], trans[NDS_MAX_RANK], gscale[NDS_MAX_RANK],
        gtrans[NDS_MAX_RANK];
    if (!axis_units(s, ms, units, factor)) return false;
    if (!json_object_object_get_ex(ds, "coordinateTransformations", &ct)) {
        note(s, "the dataset has no coordinateTransformations (OME-NGFF requires a scale): no "
                "physical units");
        return false;
    }
    json_object *group_ct = NULL;
    bool group_has = json_object_object_get_ex(ms, "coordinateTransformations", &group_ct);
    if (!transforms(s, true, ct, "the dataset's", scale, trans) ||
        !transforms(s, group_has, group_ct, "the multiscale's", gscale, gtrans))
        return false;
    for (size_t d = 0; d < s->rank; d++) {
        if (units[d].size == 0) continue;
        out->units[d] = units[d];
        out->units[d].size = scale[d] * gscale[d] * factor[d];
        out->offset[d] = (trans[d] * gscale[d] + gtrans[d]) * factor[d];
    }
    out->from_ome = true;
    return true;
}

/* The URL one level above url (a directory URL ending in '/') into up, and the last part into
 * part; false at the top, or for a URL with adapters ("|") after its path. */
static bool parent_url(const char *url, char *up, size_t cap, char *part, size_t pcap) {
    size_t n = strlen(url);
    const char *scheme = strstr(url, "://");
    if (!scheme || strchr(url, '|') || n + 1 > cap) return false;
    memcpy(up, url, n + 1);
    while (n && up[n - 1] == '/') up[--n] = '\0';
    char *slash = strrchr(up, '/');
    if (!slash || slash < scheme + 3 || slash <= scheme + 2) return false;
    snprintf(part, pcap, "%s", slash + 1);
    slash[1] = '\0';
    return part[0] != '\0' && strlen(up) > (size_t)(scheme + 3 - url);
}

/* The group's frame for array a (a zarr dataset), into out; nothing when there is none. */
static void ome_frame(nds_array *a, cli_physical *out) {
    const char *fmt = nds_array_format(a);
    if (strcmp(fmt, "zarr3") != 0 && strcmp(fmt, "zarr") != 0) return;
    char url[4096], up[4096], part[1024], path[4096] = "";
    snprintf(url, sizeof url, "%s", nds_kvstore_url(nds_array_kvstore(a)));
    for (int level = 0; level < GROUP_LEVELS; level++) {
        if (!parent_url(url, up, sizeof up, part, sizeof part)) return;
        size_t np = strlen(part), nq = strlen(path);
        if (np + nq + 2 > sizeof path) return;
        memmove(path + np + (nq ? 1 : 0), path, nq + 1); /* path = part "/" path */
        memcpy(path, part, np);
        if (nq) path[np] = '/';
        snprintf(url, sizeof url, "%s", up);
        nds_kvstore *kv = NULL;
        json_object *doc = NULL, *ms = NULL;
        const char *zarr = NULL;
        bool found = false;
        if (nds_kvstore_open(&kv, up, NULL) == 0) {
            cli_ome_find_group(kv, &doc, &ms, &zarr);
            if (ms) {
                ome_source s = {up, path, out->rank};
                found = true;
                dataset_frame(&s, ms, out);
            }
        }
        json_object_put(doc);
        nds_kvstore_free(kv);
        nds_error_clear();
        if (found) return;
    }
}

void cli_physical_of(nds_array *a, bool remote_too, cli_physical *out) {
    memset(out, 0, sizeof *out);
    out->rank = nds_array_rank(a);
    nds_array_units(a, out->units);
    for (size_t d = 0; d < out->rank; d++)
        if (out->units[d].size > 0) return;
    if (remote_too || (nds_kvstore_capabilities(nds_array_kvstore(a)) & NDS_KV_CAP_LOCAL))
        ome_frame(a, out);
}

/* ---- writing groups ---- */

static const char *member_string(json_object *o, const char *key) {
    json_object *v;
    return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
               ? json_object_get_string(v)
               : "";
}

void cli_ome_axis_names(nds_array *src, char names[][64]) {
    static const char *const defaults[] = {"t", "c", "z", "y", "x"};
    static const char *const pc[] = {"x", "y", "z", "c"};
    size_t rank = nds_array_rank(src);
    const char *fmt = nds_array_format(src);
    for (size_t d = 0; d < rank; d++)
        snprintf(names[d], 64, "%s", rank <= 5 ? defaults[5 - rank + d] : "");
    if (strcmp(fmt, "neuroglancer_precomputed") == 0 && rank == 4) {
        for (size_t d = 0; d < 4; d++) snprintf(names[d], 64, "%s", pc[d]);
        return;
    }
    char *text = NULL;
    json_object *doc = NULL, *list = NULL;
    if (strcmp(fmt, "zarr3") == 0 && nds_array_metadata(src, &text) == 0) {
        doc = json_tokener_parse(text);
        json_object_object_get_ex(doc, "dimension_names", &list);
    } else if (strcmp(fmt, "n5") == 0 && nds_array_get_attributes(src, &text) == 0) {
        doc = json_tokener_parse(text);
        json_object_object_get_ex(doc, "axes", &list);
    }
    nds_free(text);
    nds_error_clear();
    bool all = json_object_is_type(list, json_type_array) && json_object_array_length(list) == rank;
    for (size_t d = 0; all && d < rank; d++) {
        json_object *e = json_object_array_get_idx(list, d);
        all = json_object_is_type(e, json_type_string) && json_object_get_string_len(e) > 0 &&
              json_object_get_string_len(e) < 64;
    }
    for (size_t d = 0; all && d < rank; d++)
        snprintf(names[d], 64, "%s", json_object_get_string(json_object_array_get_idx(list, d)));
    json_object_put(doc);
}

static const char *axis_type(const char *name) {
    if (strcmp(name, "t") == 0) return "time";
    if (strcmp(name, "c") == 0) return "channel";
    if (strcmp(name, "x") == 0 || strcmp(name, "y") == 0 || strcmp(name, "z") == 0) return "space";
    return NULL;
}

json_object *cli_ome_multiscale_new(size_t rank, char names[][64], const char *const *units) {
    json_object *axes = json_object_new_array(), *ms = json_object_new_object();
    for (size_t d = 0; d < rank; d++) {
        json_object *ax = json_object_new_object();
        const char *ome = units && units[d] ? cli_ome_unit_long(units[d]) : NULL;
        const char *type = axis_type(names[d]);
        if (!type && ome) type = "space";
        json_object_object_add(ax, "name", json_object_new_string(names[d]));
        if (type) json_object_object_add(ax, "type", json_object_new_string(type));
        if (ome) json_object_object_add(ax, "unit", json_object_new_string(ome));
        json_object_array_add(axes, ax);
    }
    json_object_object_add(ms, "axes", axes);
    json_object_object_add(ms, "datasets", json_object_new_array());
    return ms;
}

static json_object *f64_json(size_t n, const double *v) {
    json_object *a = json_object_new_array();
    for (size_t i = 0; i < n; i++)
        json_object_array_add(a, v[i] == floor(v[i]) && fabs(v[i]) < 9e15
                                     ? json_object_new_int64((int64_t)v[i])
                                     : json_object_new_double(v[i]));
    return a;
}

void cli_ome_add_dataset(json_object *ms, const char *path, size_t rank, const double *scale,
                         const double *translation) {
    json_object *datasets = NULL, *ds = json_object_new_object(), *ct = json_object_new_array(),
                *sc = json_object_new_object();
    json_object_object_get_ex(ms, "datasets", &datasets);
    json_object_object_add(sc, "type", json_object_new_string("scale"));
    json_object_object_add(sc, "scale", f64_json(rank, scale));
    json_object_array_add(ct, sc);
    if (translation) {
        json_object *tr = json_object_new_object();
        json_object_object_add(tr, "type", json_object_new_string("translation"));
        json_object_object_add(tr, "translation", f64_json(rank, translation));
        json_object_array_add(ct, tr);
    }
    json_object_object_add(ds, "path", json_object_new_string(path));
    json_object_object_add(ds, "coordinateTransformations", ct);
    json_object_array_add(datasets, ds);
}

/* The group's kvstore as a directory (its URL need not end in '/'): keys are joined below it. */
static int open_dir(const char *kvurl, nds_context *ctx, nds_kvstore **out) {
    nds_kvstore *kv = NULL;
    *out = NULL;
    int st = nds_kvstore_open(&kv, kvurl, ctx);
    if (st == 0) st = nds_kvstore_sub(out, kv, "./"); /* "./": the prefix as a directory */
    nds_kvstore_free(kv);
    return st;
}

/* The group zarr.json at kvurl: *doc the stored group's document, or a new one when there is
 * none; an array's (or anything else) is refused. *kv receives the group's kvstore (free it). */
static int read_group(const char *kvurl, nds_context *ctx, nds_kvstore **kv, json_object **doc) {
    *doc = NULL;
    int st = open_dir(kvurl, ctx, kv);
    if (st != 0) return cli_fail_nds(st, kvurl);
    nds_read_result r;
    memset(&r, 0, sizeof r);
    int rc = CLI_OK;
    st = nds_kvstore_read(*kv, "zarr.json", NULL, &r);
    if (st == 0 && r.state == NDS_READ_VALUE) {
        json_tokener *tok = json_tokener_new();
        *doc =
            tok ? json_tokener_parse_ex(tok, (const char *)r.value.data, (int)r.value.len) : NULL;
        json_tokener_free(tok);
        if (!json_object_is_type(*doc, json_type_object) ||
            strcmp(member_string(*doc, "node_type"), "group") != 0)
            rc = cli_fail("%s: zarr.json is not a zarr v3 group's: an OME-Zarr image is a group "
                          "(refused, nothing written)",
                          nds_kvstore_url(*kv));
    } else if (st != 0) {
        rc = cli_fail_nds(st, "zarr.json");
    }
    nds_read_result_dispose(&r);
    if (rc == CLI_OK && !*doc) {
        *doc = json_object_new_object();
        json_object_object_add(*doc, "zarr_format", json_object_new_int(3));
        json_object_object_add(*doc, "node_type", json_object_new_string("group"));
    }
    return rc;
}

int cli_ome_check_group(const char *kvurl, nds_context *ctx) {
    nds_kvstore *kv = NULL;
    json_object *doc = NULL;
    int rc = read_group(kvurl, ctx, &kv, &doc);
    json_object_put(doc);
    nds_kvstore_free(kv);
    return rc;
}

int cli_ome_write_group(const char *kvurl, nds_context *ctx, json_object *ms) {
    nds_kvstore *kv = NULL;
    json_object *doc = NULL, *attrs = NULL;
    int rc = read_group(kvurl, ctx, &kv, &doc);
    if (rc == CLI_OK) {
        if (!json_object_object_get_ex(doc, "attributes", &attrs) ||
            !json_object_is_type(attrs, json_type_object)) {
            attrs = json_object_new_object();
            json_object_object_add(doc, "attributes", attrs);
        }
        json_object *list = json_object_new_array(), *ome = json_object_new_object();
        json_object_array_add(list, ms);
        ms = NULL;
        json_object_object_add(ome, "version", json_object_new_string("0.5"));
        json_object_object_add(ome, "multiscales", list);
        json_object_object_add(attrs, "ome", ome);
        const char *text =
            json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                                    JSON_C_TO_STRING_NOSLASHESCAPE);
        int st = nds_kvstore_write(kv, "zarr.json", text, strlen(text), NULL, NULL);
        if (st != 0) rc = cli_fail_nds(st, "zarr.json");
    }
    json_object_put(ms);
    json_object_put(doc);
    nds_kvstore_free(kv);
    return rc;
}
