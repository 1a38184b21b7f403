/* neuroglancer precomputed: what a TensorStore-style spec asks for (nds_pc_request_from_spec): its
 * "metadata", "multiscale_metadata", "scale_metadata", "scale_index" and "schema" members turned
 * into partial multiscale and scale members in the info's own spelling, so that matching
 * (precomputed_match.c) and creation (precomputed_create.c) read one shape of request.
 * Schema "dimension_units" ([x, y, z, channel]: lengths, then null or "") sets the scale's
 * "resolution" (in nm).
 * Threading: reentrant. Ownership: a request belongs to its caller (nds_pc_request_dispose).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "precomputed_members.h"
#include "internal/error.h"
#include "internal/format_util.h"

static const char *const multiscale_names[] = {"@type", "type", "data_type", "num_channels"};
const char *const nds_pc_scale_names[10] = {
    "key",          "size",       "voxel_offset",
    "chunk_size",   "resolution", "encoding",
    "jpeg_quality", "png_level",  "compressed_segmentation_block_size",
    "sharding"};

bool nds_pc_in_list(const char *k, const char *const *names, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(k, names[i]) == 0) return true;
    return false;
}

/* Sets obj[name] = v (consumed) unless obj has it already: explicit metadata wins over schema. */
static void put(json_object *obj, const char *name, json_object *v) {
    if (json_object_object_get_ex(obj, name, NULL))
        json_object_put(v);
    else
        json_object_object_add(obj, name, v);
}

/* Members of a spec object: multiscale ones (when allowed), scale ones, and in a flat "metadata" a
 * one-entry "chunk_sizes" as "chunk_size". */
static int add_members(nds_pc_request *r, const json_object *src, const char *member, bool multi,
                       bool scale, const char *where) {
    if (!json_object_is_type(src, json_type_object))
        return nds_err(NDS_EINVAL,
                       "neuroglancer_precomputed: spec for %s: \"%s\" must be an object", where,
                       member);
    json_object_object_foreach((json_object *)src, key, val) {
        if (multi && nds_pc_in_list(key, multiscale_names, 4)) {
            json_object_object_add(r->multiscale, key, json_object_get(val));
        } else if (scale && nds_pc_in_list(key, nds_pc_scale_names, 10)) {
            json_object_object_add(r->scale, key, json_object_get(val));
        } else if (multi && scale && strcmp(key, "chunk_sizes") == 0 &&
                   json_object_is_type(val, json_type_array) &&
                   json_object_array_length(val) == 1) {
            json_object_object_add(r->scale, "chunk_size",
                                   json_object_get(json_object_array_get_idx(val, 0)));
        } else {
            return nds_err(NDS_EINVAL,
                           "neuroglancer_precomputed: spec for %s: unknown %s member \"%.40s\"",
                           where, member, key);
        }
    }
    return 0;
}

/* An array of 4 integers (x, y, z, channel) from a schema {"shape": [...]}-like member. */
static int quad(const json_object *v, const char *name, int64_t min, const char *where,
                int64_t *out) {
    if (!json_object_is_type(v, json_type_array) || json_object_array_length(v) != 4)
        return nds_err(NDS_EINVAL,
                       "neuroglancer_precomputed: spec for %s: schema \"%s\" must have 4 "
                       "entries [x, y, z, channel]",
                       where, name);
    for (size_t i = 0; i < 4; i++)
        if (!nds_pc_as_int(json_object_array_get_idx(v, i), &out[i]) || out[i] < min)
            return nds_err(NDS_EINVAL,
                           "neuroglancer_precomputed: spec for %s: schema \"%s\"[%zu] must be "
                           "an integer >= %lld",
                           where, name, i, (long long)min);
    return 0;
}

json_object *nds_pc_triple_json(const int64_t *v) {
    json_object *a = json_object_new_array();
    for (int i = 0; i < 3; i++) json_object_array_add(a, json_object_new_int64(v[i]));
    return a;
}

static int unsupported(const char *where, const char *what, const char *key) {
    return nds_err(NDS_EUNSUPPORTED,
                   "neuroglancer_precomputed: spec for %s: schema \"%s%.40s\" is not "
                   "supported",
                   where, what, key);
}

/* schema "domain": shape / inclusive_min / exclusive_max / labels. */
static int domain_member(const char *key, const json_object *val, const char *where,
                         int64_t q[3][4], bool *has) {
    static const char *const names[] = {"shape", "inclusive_min", "exclusive_max"};
    for (int i = 0; i < 3; i++) {
        if (strcmp(key, names[i]) != 0) continue;
        char full[64];
        snprintf(full, sizeof full, "domain.%s", names[i]);
        has[i] = true;
        return quad(val, full, i == 0 ? 0 : -NDS_PC_OFFSET_MAX, where, q[i]);
    }
    return strcmp(key, "labels") == 0 ? 0 : unsupported(where, "domain.", key);
}

static int schema_domain(nds_pc_request *r, const json_object *v, const char *where) {
    int64_t q[3][4] = {{0}}; /* shape, inclusive_min, exclusive_max */
    bool has[3] = {false, false, false};
    if (!json_object_is_type(v, json_type_object)) return unsupported(where, "domain", "");
    json_object_object_foreach((json_object *)v, key, val) {
        int rc = domain_member(key, val, where, q, has);
        if (rc) return rc;
    }
    if (q[1][3] != 0)
        return nds_err(NDS_EINVAL,
                       "neuroglancer_precomputed: spec for %s: the channel dimension starts "
                       "at 0",
                       where);
    if (has[2] && !has[0]) {
        for (int i = 0; i < 4; i++) q[0][i] = q[2][i] - q[1][i];
        has[0] = true;
    }
    if (has[1]) put(r->scale, "voxel_offset", nds_pc_triple_json(q[1]));
    if (has[0]) {
        put(r->scale, "size", nds_pc_triple_json(q[0]));
        put(r->multiscale, "num_channels", json_object_new_int64(q[0][3]));
    }
    return 0;
}

/* One chunk_layout grid {"shape": [x, y, z, c]}; *set receives x, y, z. */
static int layout_grid(const json_object *v, const char *name, const char *where, int64_t *xyz,
                       bool *set) {
    char full[64];
    snprintf(full, sizeof full, "chunk_layout.%s", name);
    if (!json_object_is_type(v, json_type_object)) return unsupported(where, full, "");
    json_object_object_foreach((json_object *)v, key, val) {
        if (strcmp(key, "shape") != 0) return unsupported(where, full, key);
        int64_t q[4];
        int rc = quad(val, full, 0, where, q);
        if (rc) return rc;
        memcpy(xyz, q, 3 * sizeof *xyz);
        *set = true;
    }
    return 0;
}

static int schema_chunk_layout(nds_pc_request *r, const json_object *v, const char *where) {
    if (!json_object_is_type(v, json_type_object)) return unsupported(where, "chunk_layout", "");
    json_object_object_foreach((json_object *)v, key, val) {
        int64_t xyz[3];
        bool set = false;
        int rc = 0;
        if (strcmp(key, "chunk") == 0 || strcmp(key, "read_chunk") == 0) {
            if (!(rc = layout_grid(val, key, where, xyz, &set)) && set)
                put(r->scale, "chunk_size", nds_pc_triple_json(xyz));
        } else if (strcmp(key, "write_chunk") == 0) {
            if (!(rc = layout_grid(val, key, where, xyz, &set)) && set) {
                r->has_write_chunk = true;
                for (int i = 0; i < 3; i++) r->write_chunk[i] = (uint64_t)xyz[i];
            }
        } else if (strcmp(key, "codec_chunk") == 0) {
            if (!(rc = layout_grid(val, key, where, xyz, &set)) && set)
                put(r->scale, "compressed_segmentation_block_size", nds_pc_triple_json(xyz));
        } else if (strcmp(key, "grid_origin") != 0 && strcmp(key, "inner_order") != 0) {
            rc = unsupported(where, "chunk_layout.", key);
        }
        if (rc) return rc;
    }
    return 0;
}

/* ndstore's compact codec string for precomputed: raw | none | jpeg[:Q] | png[:L] |
 * compressed_segmentation[:B | :BX:BY:BZ]. */
static int schema_codec_string(nds_pc_request *r, const char *s, const char *where) {
    const char *colon = strchr(s, ':');
    size_t n = colon ? (size_t)(colon - s) : strlen(s);
    long long a[3] = {0, 0, 0};
    int got = colon ? sscanf(colon + 1, "%lld:%lld:%lld", &a[0], &a[1], &a[2]) : 0;
    const char *enc = NULL, *param = NULL;
    if ((n == 3 && !strncmp(s, "raw", 3)) || (n == 4 && !strncmp(s, "none", 4)))
        enc = "raw";
    else if (n == 4 && !strncmp(s, "jpeg", 4))
        enc = "jpeg", param = "jpeg_quality";
    else if (n == 3 && !strncmp(s, "png", 3))
        enc = "png", param = "png_level";
    else if (n == 23 && !strncmp(s, "compressed_segmentation", 23))
        enc = "compressed_segmentation";
    bool ok = enc && (!colon || (param && got == 1) ||
                      (!param && strcmp(enc, "raw") && (got == 1 || got == 3)));
    if (!ok)
        return nds_err(NDS_EUNSUPPORTED,
                       "neuroglancer_precomputed: spec for %s: codec \"%.40s\" is not a "
                       "precomputed encoding (raw, jpeg[:quality], png[:level], "
                       "compressed_segmentation[:b | :bx:by:bz])",
                       where, s);
    put(r->scale, "encoding", json_object_new_string(enc));
    if (colon && param) put(r->scale, param, json_object_new_int64(a[0]));
    if (colon && !param) {
        int64_t b[3] = {a[0], got == 3 ? a[1] : a[0], got == 3 ? a[2] : a[0]};
        put(r->scale, "compressed_segmentation_block_size", nds_pc_triple_json(b));
    }
    return 0;
}

/* schema "codec": a compact string, or {"driver":"neuroglancer_precomputed","encoding":...,...}. */
static int schema_codec(nds_pc_request *r, const json_object *v, const char *where) {
    if (json_object_is_type(v, json_type_string))
        return schema_codec_string(r, json_object_get_string((json_object *)v), where);
    if (!json_object_is_type(v, json_type_object)) return unsupported(where, "codec", "");
    json_object_object_foreach((json_object *)v, key, val) {
        if (strcmp(key, "encoding") == 0 || strcmp(key, "jpeg_quality") == 0 ||
            strcmp(key, "png_level") == 0) {
            put(r->scale, key, json_object_get(val));
        } else if (strcmp(key, "shard_data_encoding") == 0) {
            const char *s = json_object_get_string(val);
            if (!json_object_is_type(val, json_type_string) ||
                (strcmp(s, "raw") && strcmp(s, "gzip")))
                return nds_err(NDS_EINVAL,
                               "neuroglancer_precomputed: spec for %s: codec "
                               "\"shard_data_encoding\" must be \"raw\" or \"gzip\"",
                               where);
            if (r->shard_data_gzip < 0) r->shard_data_gzip = strcmp(s, "gzip") == 0;
        } else if (strcmp(key, "driver") == 0) {
            const char *d = json_object_get_string(val);
            if (!d ||
                (strcmp(d, "neuroglancer_precomputed") && strcmp(d, "neuroglancer-precomputed")))
                return nds_err(NDS_EINVAL,
                               "neuroglancer_precomputed: spec for %s: codec \"driver\" must "
                               "be \"neuroglancer_precomputed\"",
                               where);
        } else {
            return unsupported(where, "codec.", key);
        }
    }
    return 0;
}

static int schema_dtype(nds_pc_request *r, const json_object *v, const char *where) {
    const char *s =
        json_object_is_type(v, json_type_string) ? json_object_get_string((json_object *)v) : "";
    nds_dtype t = nds_dtype_from_name(s);
    if (t == NDS_DTYPE_INVALID)
        return nds_err(NDS_EINVAL,
                       "neuroglancer_precomputed: spec for %s: unknown \"dtype\" \"%.40s\"", where,
                       s);
    if (!nds_pc_dtype_name(t))
        return nds_err(NDS_EUNSUPPORTED,
                       "neuroglancer_precomputed: spec for %s: dtype %s is not supported by "
                       "the precomputed format (uint8, int8, uint16, int16, uint32, "
                       "int32, uint64, float32)",
                       where, s);
    put(r->multiscale, "data_type", json_object_new_string(nds_pc_dtype_name(t)));
    return 0;
}

static int schema_fill(const json_object *v, const char *where) {
    int64_t x;
    bool zero = !v || (json_object_is_type(v, json_type_boolean) && !json_object_get_boolean(v)) ||
                (json_object_is_type(v, json_type_double) && json_object_get_double(v) == 0) ||
                (nds_pc_as_int(v, &x) && x == 0);
    return zero ? 0
                : nds_err(NDS_EUNSUPPORTED,
                          "neuroglancer_precomputed: spec for %s: fill value %.40s: "
                          "the precomputed format has no fill value (always 0)",
                          where, json_object_to_json_string((json_object *)v));
}

/* schema "dimension_units": x, y and z lengths (converted to nm: the scale's resolution), the
 * channel null or dimensionless. */
static int schema_units(nds_pc_request *r, const json_object *v, const char *where) {
    char what[600];
    snprintf(what, sizeof what, "neuroglancer_precomputed: spec for %s: schema dimension_units",
             where);
    if (!json_object_is_type(v, json_type_array) || json_object_array_length(v) != 4)
        return nds_err(NDS_EINVAL, "%s: expected 4 entries [x, y, z, channel]", what);
    json_object *res = json_object_new_array();
    int rc = 0;
    for (size_t i = 0; !rc && i < 4; i++) {
        json_object *e = json_object_array_get_idx(v, i);
        nds_unit u = {0, ""};
        if (e && !json_object_is_type(e, json_type_string))
            rc = nds_err(NDS_EINVAL, "%s[%zu]: expected a string or null", what, i);
        else if (e)
            rc = nds_unit_parse(json_object_get_string(e), what, &u);
        double metres = u.size > 0 ? nds_unit_metres(u.name) : 0;
        if (!rc && i < 3 && metres == 0)
            rc = nds_err(NDS_EINVAL, "%s[%zu]: x, y and z need a length (e.g. \"8nm\"), not %s",
                         what, i, e ? json_object_get_string(e) : "null");
        else if (!rc && i == 3 && u.name[0])
            rc = nds_err(NDS_EINVAL, "%s[3]: the channel has no unit (null or \"\")", what);
        else if (!rc && i < 3)
            {
            char text[32]; /* 15 digits: 0.04 stays 0.04, 0.04 um is 40 nm, not 40.000000000000006 */
            double value = u.size * metres / 1e-9;
            snprintf(text, sizeof text, "%.15g", value);
            json_object_array_add(res, json_object_new_double_s(strtod(text, NULL), text));
        }
    }
    if (rc) json_object_put(res);
    else put(r->scale, "resolution", res);
    return rc;
}

static int schema_member(nds_pc_request *r, const char *key, const json_object *v,
                         const char *where) {
    int64_t rank;
    if (strcmp(key, "dtype") == 0) return schema_dtype(r, v, where);
    if (strcmp(key, "domain") == 0) return schema_domain(r, v, where);
    if (strcmp(key, "chunk_layout") == 0) return schema_chunk_layout(r, v, where);
    if (strcmp(key, "codec") == 0) return schema_codec(r, v, where);
    if (strcmp(key, "fill_value") == 0) return schema_fill(v, where);
    if (strcmp(key, "dimension_units") == 0) return schema_units(r, v, where);
    if (strcmp(key, "rank") == 0)
        return nds_pc_as_int(v, &rank) && rank == 4
                   ? 0
                   : nds_err(NDS_EINVAL,
                             "neuroglancer_precomputed: spec for "
                             "%s: rank must be 4 (x, y, z, channel)",
                             where);
    return unsupported(where, "", key);
}

static int request_build(nds_pc_request *r, const json_object *spec, const char *where) {
    json_object *v;
    int rc = 0;
    if (json_object_object_get_ex(spec, "metadata", &v)) {
        if (json_object_object_get_ex(v, "scales", NULL))
            r->info = json_object_get(v);
        else
            rc = add_members(r, v, "metadata", true, true, where);
    }
    if (!rc && json_object_object_get_ex(spec, "multiscale_metadata", &v))
        rc = add_members(r, v, "multiscale_metadata", true, false, where);
    if (!rc && json_object_object_get_ex(spec, "scale_metadata", &v))
        rc = add_members(r, v, "scale_metadata", false, true, where);
    if (!rc && json_object_object_get_ex(spec, "scale_index", &v)) {
        int64_t i;
        if (!nds_pc_as_int(v, &i) || i < 0)
            rc = nds_err(NDS_EINVAL,
                         "neuroglancer_precomputed: spec for %s: \"scale_index\" must be an "
                         "integer >= 0",
                         where);
        r->has_scale_index = true;
        r->scale_index = (uint64_t)i;
    }
    if (!rc && json_object_object_get_ex(spec, "schema", &v)) {
        if (!json_object_is_type(v, json_type_object)) return unsupported(where, "", "");
        json_object_object_foreach(v, key, val) {
            if ((rc = schema_member(r, key, val, where))) break;
        }
    }
    if (!rc && json_object_object_get_ex(spec, "dtype", &v)) rc = schema_dtype(r, v, where);
    return rc;
}

int nds_pc_request_from_spec(const json_object *spec, const char *where, nds_pc_request *out) {
    memset(out, 0, sizeof *out);
    out->shard_data_gzip = -1;
    out->multiscale = json_object_new_object();
    out->scale = json_object_new_object();
    if (!out->multiscale || !out->scale) {
        nds_pc_request_dispose(out);
        return nds_err(NDS_ENOMEM, "out of memory");
    }
    if (!spec) return 0;
    if (!json_object_is_type(spec, json_type_object)) {
        nds_pc_request_dispose(out);
        return nds_err(NDS_EINVAL, "neuroglancer_precomputed: spec for %s: expected a json object",
                       where);
    }
    int rc = request_build(out, spec, where);
    if (rc) nds_pc_request_dispose(out);
    return rc;
}

void nds_pc_request_dispose(nds_pc_request *r) {
    json_object_put(r->info);
    json_object_put(r->multiscale);
    json_object_put(r->scale);
    memset(r, 0, sizeof *r);
    r->shard_data_gzip = -1;
}
