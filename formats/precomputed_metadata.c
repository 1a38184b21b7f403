/* neuroglancer precomputed metadata: the `info` document, spec requests, scale selection, checks
 * and creation documents (see precomputed_metadata.h and docs/formats.md).
 *
 * Parsing is strict where the specification is (required members, types, "compressed_segmentation_
 * block_size" if and only if the encoding is compressed_segmentation, one chunk size when sharded)
 * and lenient where real volumes are (unknown members ignored, "encoding" and "data_type" compared
 * case-insensitively). Errors name the member, the scale and the document.
 * Omits: the "mesh", "skeletons" and "segment_properties" sub-formats (their members are kept, not
 * read); schema "dimension_units" (use scale "resolution").
 * Threading: reentrant. Ownership: parsed structs and requests belong to the caller.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "precomputed_metadata.h"
#include "internal/error.h"
#include "internal/json_util.h"
#include "internal/util.h"

#define DOC_MAX 700
/* Largest voxel_offset magnitude, so offset + size never overflows an int64 chunk key. */
#define OFFSET_MAX (INT64_C(1) << 62)
#define DEFAULT_CHUNK 64
#define DEFAULT_JPEG_QUALITY 75
#define DEFAULT_PNG_LEVEL 6

static const struct {
    const char *name;
    nds_dtype type;
} dtypes[] = {
    {"uint8", NDS_UINT8},   {"int8", NDS_INT8},   {"uint16", NDS_UINT16}, {"int16", NDS_INT16},
    {"uint32", NDS_UINT32}, {"int32", NDS_INT32}, {"uint64", NDS_UINT64}, {"float32", NDS_FLOAT32},
};

static const char *const encodings[] = {"raw", "jpeg", "png", "compressed_segmentation"};

const char *nds_pc_encoding_name(nds_pc_encoding e) { return encodings[e]; }

const char *nds_pc_dtype_name(nds_dtype t) {
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (dtypes[i].type == t) return dtypes[i].name;
    return NULL;
}

/* ---- small JSON readers ---------------------------------------------------------------------- */

/* An integer value (json int, or a double holding an exact integer). */
static bool as_int(const json_object *v, int64_t *out) {
    if (json_object_is_type(v, json_type_int)) {
        *out = json_object_get_int64(v);
        return !(*out == INT64_MAX && json_object_get_uint64(v) > (uint64_t)INT64_MAX);
    }
    if (!json_object_is_type(v, json_type_double)) return false;
    double d = json_object_get_double(v);
    if (!isfinite(d) || d != floor(d) || fabs(d) > 9.2e18) return false;
    *out = (int64_t)d;
    return true;
}

/* v must be an array of exactly 3 integers in [min, max]. */
static int triple_int(const json_object *v, const char *name, int64_t min, int64_t max,
                      const char *doc, int64_t *out) {
    if (!json_object_is_type(v, json_type_array) || json_object_array_length(v) != 3)
        return nds_err(NDS_EFORMAT, "%s: \"%s\" must be an array of 3 integers [x, y, z]", doc,
                       name);
    for (size_t i = 0; i < 3; i++) {
        if (!as_int(json_object_array_get_idx(v, i), &out[i]))
            return nds_err(NDS_EFORMAT, "%s: \"%s\"[%zu] must be an integer", doc, name, i);
        if (out[i] < min || out[i] > max)
            return nds_err(NDS_EFORMAT, "%s: \"%s\"[%zu] is %lld, outside [%lld, %lld]", doc, name,
                           i, (long long)out[i], (long long)min, (long long)max);
    }
    return 0;
}

static int triple_u64(const json_object *v, const char *name, int64_t min, const char *doc,
                      uint64_t *out) {
    int64_t t[3];
    int rc = triple_int(v, name, min, INT64_C(1) << 53, doc, t);
    for (int i = 0; i < 3 && !rc; i++) out[i] = (uint64_t)t[i];
    return rc;
}

static int triple_positive(const json_object *v, const char *name, const char *doc, double *out) {
    if (!json_object_is_type(v, json_type_array) || json_object_array_length(v) != 3)
        return nds_err(NDS_EFORMAT, "%s: \"%s\" must be an array of 3 numbers [x, y, z]", doc,
                       name);
    for (size_t i = 0; i < 3; i++) {
        json_object *e = json_object_array_get_idx(v, i);
        if (!json_object_is_type(e, json_type_int) && !json_object_is_type(e, json_type_double))
            return nds_err(NDS_EFORMAT, "%s: \"%s\"[%zu] must be a number", doc, name, i);
        out[i] = json_object_get_double(e);
        if (!isfinite(out[i]) || out[i] <= 0)
            return nds_err(NDS_EFORMAT, "%s: \"%s\"[%zu] must be a positive number", doc, name, i);
    }
    return 0;
}

/* A string member compared case-insensitively with names[0..n); *out = its index. */
static int choice(const json_object *obj, const char *key, bool optional, const char *const *names,
                  size_t n, const char *doc, int *out) {
    const char *s = NULL;
    int rc = nds_json_get_string(obj, key, optional, doc, &s);
    if (rc || !s) return rc;
    for (size_t i = 0; i < n; i++)
        if (strcasecmp(s, names[i]) == 0) {
            *out = (int)i;
            return 0;
        }
    return nds_err(NDS_EFORMAT, "%s: \"%s\" \"%.40s\" is not one of the allowed values", doc, key,
                   s);
}

/* ---- sharding -------------------------------------------------------------------------------- */

static const char *const hashes[] = {"identity", "murmurhash3_x86_128"};
static const char *const shard_encodings[] = {"raw", "gzip"};

static int parse_sharding(const json_object *v, const char *doc, nds_pc_sharding *s) {
    memset(s, 0, sizeof *s);
    if (!v) return 0; /* null: unsharded */
    if (!json_object_is_type(v, json_type_object))
        return nds_err(NDS_EFORMAT, "%s: \"sharding\" must be an object or null", doc);
    char d[DOC_MAX];
    snprintf(d, sizeof d, "%s: sharding", doc);
    const char *type = NULL;
    int64_t pre = 0, mini = 0, shard = 0;
    int hash = 0, ienc = 0, denc = 0;
    int rc = nds_json_get_string(v, "@type", false, d, &type);
    if (!rc && strcmp(type, "neuroglancer_uint64_sharded_v1") != 0)
        rc = nds_err(NDS_EUNSUPPORTED,
                     "%s: \"@type\" \"%.60s\" is not supported (only "
                     "\"neuroglancer_uint64_sharded_v1\")",
                     d, type);
    if (!rc) rc = nds_json_get_int(v, "preshift_bits", false, 0, 64, d, &pre);
    if (!rc) rc = nds_json_get_int(v, "minishard_bits", false, 0, 32, d, &mini);
    if (!rc) rc = nds_json_get_int(v, "shard_bits", false, 0, 64, d, &shard);
    if (!rc) rc = choice(v, "hash", false, hashes, 2, d, &hash);
    if (!rc) rc = choice(v, "minishard_index_encoding", true, shard_encodings, 2, d, &ienc);
    if (!rc) rc = choice(v, "data_encoding", true, shard_encodings, 2, d, &denc);
    if (!rc && mini + shard > 64)
        rc = nds_err(NDS_EFORMAT, "%s: minishard_bits + shard_bits is %lld, above 64", d,
                     (long long)(mini + shard));
    if (rc) return rc;
    *s = (nds_pc_sharding){true,      (unsigned)pre, (unsigned)mini, (unsigned)shard,
                           hash == 1, ienc == 1,     denc == 1};
    return 0;
}

/* ---- scales ---------------------------------------------------------------------------------- */

/* A scale key: a relative "/"-separated path without empty, "." or ".." components. */
static int check_key(const char *key, const char *doc) {
    size_t n = strlen(key);
    if (n == 0 || n > NDS_PC_MAX_KEY)
        return nds_err(NDS_EFORMAT, "%s: \"key\" must be 1 to %d characters", doc, NDS_PC_MAX_KEY);
    for (const char *p = key; *p;) {
        const char *e = strchr(p, '/');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == 0 || (len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
            return nds_err(NDS_EUNSUPPORTED,
                           "%s: \"key\" \"%.60s\" has an empty, \".\" or \"..\" "
                           "component; ndstore needs a key inside the volume",
                           doc, key);
        p += len + (e != NULL);
        if (e && !*p)
            return nds_err(NDS_EFORMAT, "%s: \"key\" \"%.60s\" ends with \"/\"", doc, key);
    }
    return 0;
}

static int parse_chunk_sizes(const json_object *scale, const char *doc, nds_pc_scale *s) {
    json_object *v;
    int rc = nds_json_member(scale, "chunk_sizes", doc, &v);
    if (rc) return rc;
    size_t n = json_object_is_type(v, json_type_array) ? json_object_array_length(v) : 0;
    if (n == 0 || n > 8)
        return nds_err(NDS_EFORMAT,
                       "%s: \"chunk_sizes\" must be an array of 1 to 8 [x, y, z] arrays", doc);
    for (size_t i = 0; i < n && !rc; i++) {
        char name[32];
        snprintf(name, sizeof name, "chunk_sizes[%zu]", i);
        rc = triple_u64(json_object_array_get_idx(v, i), name, 1, doc, s->chunk_sizes[i]);
    }
    s->nchunk = n;
    return rc;
}

/* Bits of compressed Morton code the chunk grid of chunk size c needs. */
static unsigned morton_bits(const uint64_t *size, const uint64_t *c) {
    unsigned total = 0;
    for (int d = 0; d < 3; d++) {
        uint64_t g = nds_ceil_div(size[d], c[d]);
        total += g > 1 ? 64 - (unsigned)__builtin_clzll(g - 1) : 0;
    }
    return total;
}

/* Limits that depend on the data type and channels: chunk bytes, encodings, sharded grids. */
static int check_scale_limits(const nds_pc_scale *s, nds_dtype t, uint64_t nc, const char *doc) {
    uint64_t n, vox;
    if (!nds_product_u64(s->size, 3, &vox) || !nds_mul_u64(vox, nc, &vox))
        return nds_err(NDS_ELIMIT, "%s: \"size\" times num_channels exceeds 2^64 elements", doc);
    for (size_t i = 0; i < s->nchunk; i++)
        if (!nds_product_u64(s->chunk_sizes[i], 3, &n) ||
            !nds_mul_u64(n, nc * nds_dtype_size(t), &n) || n > NDS_PC_MAX_CHUNK_BYTES)
            return nds_err(NDS_ELIMIT,
                           "%s: \"chunk_sizes\"[%zu] makes chunks larger than 2 GiB, "
                           "ndstore's limit",
                           doc, i);
    if (s->encoding == NDS_PC_JPEG && (t != NDS_UINT8 || (nc != 1 && nc != 3)))
        return nds_err(NDS_EFORMAT,
                       "%s: \"jpeg\" encoding needs data_type uint8 and 1 or 3 channels", doc);
    if (s->encoding == NDS_PC_PNG && ((t != NDS_UINT8 && t != NDS_UINT16) || nc > 4))
        return nds_err(NDS_EFORMAT,
                       "%s: \"png\" encoding needs data_type uint8 or uint16 and 1 to 4 "
                       "channels",
                       doc);
    if (s->encoding == NDS_PC_CSEG && t != NDS_UINT32 && t != NDS_UINT64)
        return nds_err(NDS_EFORMAT,
                       "%s: \"compressed_segmentation\" encoding needs data_type uint32 or "
                       "uint64",
                       doc);
    if (s->sharding.present && s->nchunk != 1)
        return nds_err(NDS_EFORMAT,
                       "%s: a sharded scale must have exactly one \"chunk_sizes\" entry", doc);
    if (s->sharding.present && morton_bits(s->size, s->chunk_sizes[0]) > 64)
        return nds_err(NDS_ELIMIT,
                       "%s: the chunk grid needs more than 64 bits of compressed morton code", doc);
    return 0;
}

/* "compressed_segmentation_block_size": if and only if the encoding is compressed_segmentation. */
static int parse_block(const json_object *scale, const char *doc, nds_pc_scale *s) {
    json_object *v;
    bool has = json_object_object_get_ex(scale, "compressed_segmentation_block_size", &v);
    if (s->encoding != NDS_PC_CSEG) {
        return has ? nds_err(NDS_EFORMAT,
                             "%s: \"compressed_segmentation_block_size\" is only allowed "
                             "with \"compressed_segmentation\" encoding",
                             doc)
                   : 0;
    }
    if (!has)
        return nds_err(NDS_EFORMAT, "%s: missing member \"compressed_segmentation_block_size\"",
                       doc);
    int rc = triple_u64(v, "compressed_segmentation_block_size", 1, doc, s->cseg_block);
    uint64_t n;
    if (!rc && (!nds_product_u64(s->cseg_block, 3, &n) || n > (UINT64_C(1) << 31)))
        rc = nds_err(NDS_ELIMIT, "%s: \"compressed_segmentation_block_size\" above 2^31 elements",
                     doc);
    return rc;
}

static int parse_geometry(const json_object *scale, const char *doc, nds_pc_scale *s) {
    json_object *v;
    const char *key = NULL;
    int64_t off[3] = {0, 0, 0};
    int rc = nds_json_get_string(scale, "key", false, doc, &key);
    if (!rc) rc = check_key(key, doc);
    if (!rc) snprintf(s->key, sizeof s->key, "%s", key);
    if (!rc && !(rc = nds_json_member(scale, "size", doc, &v)))
        rc = triple_u64(v, "size", 0, doc, s->size);
    if (!rc && !(rc = nds_json_member(scale, "resolution", doc, &v)))
        rc = triple_positive(v, "resolution", doc, s->resolution);
    if (!rc && json_object_object_get_ex(scale, "voxel_offset", &v))
        rc = triple_int(v, "voxel_offset", -OFFSET_MAX, OFFSET_MAX, doc, off);
    for (int d = 0; d < 3; d++) s->voxel_offset[d] = off[d];
    if (!rc) rc = parse_chunk_sizes(scale, doc, s);
    return rc;
}

static int parse_scale(const json_object *scale, const nds_pc_info *m, size_t i,
                       const char *info_doc, nds_pc_scale *s) {
    char doc[DOC_MAX];
    snprintf(doc, sizeof doc, "%s: scales[%zu]", info_doc, i);
    memset(s, 0, sizeof *s);
    if (!json_object_is_type(scale, json_type_object))
        return nds_err(NDS_EFORMAT, "%s: expected a json object", doc);
    int enc = 0;
    int64_t q = DEFAULT_JPEG_QUALITY, lvl = DEFAULT_PNG_LEVEL;
    json_object *sh = NULL;
    int rc = parse_geometry(scale, doc, s);
    if (!rc) {
        const char *e = NULL;
        rc = nds_json_get_string(scale, "encoding", false, doc, &e);
        if (!rc && choice(scale, "encoding", false, encodings, 4, doc, &enc) != 0)
            rc = nds_err(NDS_EUNSUPPORTED,
                         "%s: \"encoding\" \"%.40s\" is not supported (raw, jpeg, png, "
                         "compressed_segmentation)",
                         doc, e);
    }
    s->encoding = (nds_pc_encoding)enc;
    if (!rc) rc = nds_json_get_int(scale, "jpeg_quality", true, 0, 100, doc, &q);
    if (!rc) rc = nds_json_get_int(scale, "png_level", true, 0, 9, doc, &lvl);
    s->jpeg_quality = (int)q;
    s->png_level = (int)lvl;
    if (!rc) rc = parse_block(scale, doc, s);
    if (!rc && json_object_object_get_ex(scale, "sharding", &sh))
        rc = parse_sharding(sh, doc, &s->sharding);
    if (!rc) rc = check_scale_limits(s, m->dtype, m->num_channels, doc);
    return rc;
}

/* ---- info ------------------------------------------------------------------------------------ */

static int parse_dtype(const json_object *info, const char *doc, nds_dtype *out) {
    const char *s = NULL;
    int rc = nds_json_get_string(info, "data_type", false, doc, &s);
    if (rc) return rc;
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (strcasecmp(s, dtypes[i].name) == 0) {
            *out = dtypes[i].type;
            return 0;
        }
    return nds_err(NDS_EUNSUPPORTED,
                   "%s: \"data_type\" \"%.40s\" is not supported (uint8, int8, uint16, "
                   "int16, uint32, int32, uint64, float32)",
                   doc, s);
}

static int parse_multiscale(const json_object *info, const char *doc, nds_pc_info *m) {
    static const char *const types[] = {"image", "segmentation"};
    const char *at = NULL;
    int type = 0;
    int64_t nc = 0;
    if (!json_object_is_type(info, json_type_object))
        return nds_err(NDS_EFORMAT, "%s: expected a json object", doc);
    int rc = nds_json_get_string(info, "@type", true, doc, &at);
    if (!rc && at && strcmp(at, "neuroglancer_multiscale_volume") != 0)
        rc = nds_err(NDS_EFORMAT, "%s: \"@type\" must be \"neuroglancer_multiscale_volume\"", doc);
    if (!rc) rc = choice(info, "type", false, types, 2, doc, &type);
    if (!rc) rc = parse_dtype(info, doc, &m->dtype);
    if (!rc) rc = nds_json_get_int(info, "num_channels", false, 1, INT64_C(1) << 24, doc, &nc);
    m->segmentation = type == 1;
    m->num_channels = (uint64_t)nc;
    return rc;
}

int nds_pc_info_parse(const json_object *info, const char *doc, nds_pc_info *m) {
    memset(m, 0, sizeof *m);
    json_object *scales;
    int rc = parse_multiscale(info, doc, m);
    if (!rc) rc = nds_json_member(info, "scales", doc, &scales);
    size_t n = rc                                             ? 0
               : json_object_is_type(scales, json_type_array) ? json_object_array_length(scales)
                                                              : 0;
    if (!rc && (n == 0 || n > 64))
        rc = nds_err(NDS_EFORMAT, "%s: \"scales\" must be an array of 1 to 64 scales", doc);
    if (!rc && !(m->scales = calloc(n, sizeof *m->scales)))
        rc = nds_err(NDS_ENOMEM, "out of memory");
    for (size_t i = 0; i < n && !rc; i++)
        rc = parse_scale(json_object_array_get_idx(scales, i), m, i, doc, &m->scales[i]);
    for (size_t i = 0; i < n && !rc; i++)
        for (size_t j = 0; j < i && !rc; j++)
            if (strcmp(m->scales[i].key, m->scales[j].key) == 0)
                rc = nds_err(NDS_EFORMAT,
                             "%s: scales[%zu] and scales[%zu] have the same \"key\" \"%s\"", doc, j,
                             i, m->scales[i].key);
    m->nscales = n;
    if (rc) nds_pc_info_dispose(m);
    return rc;
}

void nds_pc_info_dispose(nds_pc_info *m) {
    free(m->scales);
    memset(m, 0, sizeof *m);
}

/* ---- spec requests --------------------------------------------------------------------------- */

static const char *const multiscale_names[] = {"@type", "type", "data_type", "num_channels"};
static const char *const scale_names[] = {
    "key",          "size",       "voxel_offset",
    "chunk_size",   "resolution", "encoding",
    "jpeg_quality", "png_level",  "compressed_segmentation_block_size",
    "sharding"};

static bool in_list(const char *k, const char *const *names, size_t n) {
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
        if (multi && in_list(key, multiscale_names, 4)) {
            json_object_object_add(r->multiscale, key, json_object_get(val));
        } else if (scale && in_list(key, scale_names, 10)) {
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
        if (!as_int(json_object_array_get_idx(v, i), &out[i]) || out[i] < min)
            return nds_err(NDS_EINVAL,
                           "neuroglancer_precomputed: spec for %s: schema \"%s\"[%zu] must be "
                           "an integer >= %lld",
                           where, name, i, (long long)min);
    return 0;
}

static json_object *triple_json(const int64_t *v) {
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
        return quad(val, full, i == 0 ? 0 : -OFFSET_MAX, where, q[i]);
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
    if (has[1]) put(r->scale, "voxel_offset", triple_json(q[1]));
    if (has[0]) {
        put(r->scale, "size", triple_json(q[0]));
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
                put(r->scale, "chunk_size", triple_json(xyz));
        } else if (strcmp(key, "write_chunk") == 0) {
            if (!(rc = layout_grid(val, key, where, xyz, &set)) && set) {
                r->has_write_chunk = true;
                for (int i = 0; i < 3; i++) r->write_chunk[i] = (uint64_t)xyz[i];
            }
        } else if (strcmp(key, "codec_chunk") == 0) {
            if (!(rc = layout_grid(val, key, where, xyz, &set)) && set)
                put(r->scale, "compressed_segmentation_block_size", triple_json(xyz));
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
        put(r->scale, "compressed_segmentation_block_size", triple_json(b));
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
                (as_int(v, &x) && x == 0);
    return zero ? 0
                : nds_err(NDS_EUNSUPPORTED,
                          "neuroglancer_precomputed: spec for %s: fill value %.40s: "
                          "the precomputed format has no fill value (always 0)",
                          where, json_object_to_json_string((json_object *)v));
}

static int schema_member(nds_pc_request *r, const char *key, const json_object *v,
                         const char *where) {
    int64_t rank;
    if (strcmp(key, "dtype") == 0) return schema_dtype(r, v, where);
    if (strcmp(key, "domain") == 0) return schema_domain(r, v, where);
    if (strcmp(key, "chunk_layout") == 0) return schema_chunk_layout(r, v, where);
    if (strcmp(key, "codec") == 0) return schema_codec(r, v, where);
    if (strcmp(key, "fill_value") == 0) return schema_fill(v, where);
    if (strcmp(key, "rank") == 0)
        return as_int(v, &rank) && rank == 4 ? 0
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
        if (!as_int(v, &i) || i < 0)
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

/* ---- scale selection ------------------------------------------------------------------------- */

/* "<x>_<y>_<z>" from a resolution, as TensorStore names new scales ("8_8_40", "4.5_4.5_40"). */
static void key_from_resolution(const double *res, char *buf, size_t cap) {
    size_t used = 0;
    for (int d = 0; d < 3 && used < cap; d++) {
        int n = res[d] == floor(res[d]) && fabs(res[d]) < 1e15
                    ? snprintf(buf + used, cap - used, "%s%lld", d ? "_" : "", (long long)res[d])
                    : snprintf(buf + used, cap - used, "%s%g", d ? "_" : "", res[d]);
        used += n > 0 ? (size_t)n : 0;
    }
}

static bool same_resolution(const double *a, const double *b) {
    return a[0] == b[0] && a[1] == b[1] && a[2] == b[2];
}

/* The scale a request's "key" / "resolution" names, or (creating with a size) the default key. */
static int find_scale(const nds_pc_info *info, const nds_pc_request *req, bool create,
                      const char *doc, size_t *index, bool *found) {
    json_object *v;
    char key[NDS_PC_MAX_KEY + 1] = "";
    double res[3];
    *found = false;
    *index = info->nscales;
    if (json_object_object_get_ex(req->scale, "key", &v)) {
        snprintf(key, sizeof key, "%s", json_object_get_string(v));
    } else if (json_object_object_get_ex(req->scale, "resolution", &v)) {
        int rc = triple_positive(v, "scale_metadata.resolution", doc, res);
        for (size_t i = 0; i < info->nscales && !rc && !*found; i++)
            if (same_resolution(info->scales[i].resolution, res)) *found = true, *index = i;
        return rc;
    } else if (create && json_object_object_get_ex(req->scale, "size", NULL)) {
        snprintf(key, sizeof key, "1_1_1");
    } else {
        *found = true;
        *index = 0;
        return 0;
    }
    for (size_t i = 0; i < info->nscales && !*found; i++)
        if (strcmp(info->scales[i].key, key) == 0) *found = true, *index = i;
    return 0;
}

int nds_pc_select_scale(const nds_pc_info *info, const nds_pc_request *req, bool create,
                        const char *doc, size_t *index, bool *found) {
    if (!req->has_scale_index) return find_scale(info, req, create, doc, index, found);
    *index = (size_t)req->scale_index;
    *found = req->scale_index < info->nscales;
    if (req->scale_index > info->nscales || (!*found && !create))
        return nds_err(NDS_ENOTFOUND, "%s: no scale_index %llu (the volume has %zu scales)", doc,
                       (unsigned long long)req->scale_index, info->nscales);
    return 0;
}

/* ---- checks against an existing volume ------------------------------------------------------- */

static void fmt_u3(char *buf, size_t cap, const uint64_t *v) {
    snprintf(buf, cap, "[%llu,%llu,%llu]", (unsigned long long)v[0], (unsigned long long)v[1],
             (unsigned long long)v[2]);
}

static void fmt_i3(char *buf, size_t cap, const int64_t *v) {
    snprintf(buf, cap, "[%lld,%lld,%lld]", (long long)v[0], (long long)v[1], (long long)v[2]);
}

static int mismatch(const char *doc, const char *member, const char *stored, const char *asked) {
    return nds_err(NDS_EMISMATCH, "%s: \"%s\" is %s, the spec asks for %s", doc, member, stored,
                   asked);
}

static int check_u3(const char *doc, const char *member, const uint64_t *stored,
                    const uint64_t *asked) {
    if (!memcmp(stored, asked, 3 * sizeof *stored)) return 0;
    char a[80], b[80];
    fmt_u3(a, sizeof a, stored);
    fmt_u3(b, sizeof b, asked);
    return mismatch(doc, member, a, b);
}

static bool sharding_equal(const nds_pc_sharding *a, const nds_pc_sharding *b) {
    return a->present == b->present &&
           (!a->present ||
            (a->preshift_bits == b->preshift_bits && a->minishard_bits == b->minishard_bits &&
             a->shard_bits == b->shard_bits && a->murmur == b->murmur &&
             a->index_gzip == b->index_gzip && a->data_gzip == b->data_gzip));
}

/* Parses what a request asks of one scale member into a temporary scale and compares it. */
static int check_scale_member(const nds_pc_scale *s, const char *key, const json_object *v,
                              const char *doc, size_t *chunk) {
    nds_pc_scale t;
    memset(&t, 0, sizeof t);
    char a[80], b[80];
    int rc = 0, enc = 0;
    if (strcmp(key, "key") == 0) {
        const char *k = json_object_get_string((json_object *)v);
        return k && !strcmp(k, s->key) ? 0 : mismatch(doc, "key", s->key, k ? k : "a non-string");
    }
    if (strcmp(key, "size") == 0)
        return (rc = triple_u64(v, key, 0, doc, t.size)) ? rc : check_u3(doc, key, s->size, t.size);
    if (strcmp(key, "compressed_segmentation_block_size") == 0)
        return (rc = triple_u64(v, key, 1, doc, t.cseg_block))
                   ? rc
                   : check_u3(doc, key, s->cseg_block, t.cseg_block);
    if (strcmp(key, "voxel_offset") == 0) {
        if ((rc = triple_int(v, key, -OFFSET_MAX, OFFSET_MAX, doc, t.voxel_offset))) return rc;
        if (!memcmp(s->voxel_offset, t.voxel_offset, sizeof t.voxel_offset)) return 0;
        fmt_i3(a, sizeof a, s->voxel_offset);
        fmt_i3(b, sizeof b, t.voxel_offset);
        return mismatch(doc, key, a, b);
    }
    if (strcmp(key, "resolution") == 0) {
        if ((rc = triple_positive(v, key, doc, t.resolution))) return rc;
        if (same_resolution(s->resolution, t.resolution)) return 0;
        snprintf(a, sizeof a, "[%g,%g,%g]", s->resolution[0], s->resolution[1], s->resolution[2]);
        snprintf(b, sizeof b, "[%g,%g,%g]", t.resolution[0], t.resolution[1], t.resolution[2]);
        return mismatch(doc, key, a, b);
    }
    if (strcmp(key, "chunk_size") == 0) {
        if ((rc = triple_u64(v, key, 1, doc, t.size))) return rc;
        for (size_t i = 0; i < s->nchunk; i++)
            if (!memcmp(s->chunk_sizes[i], t.size, sizeof t.size)) return *chunk = i, 0;
        fmt_u3(a, sizeof a, t.size);
        return nds_err(NDS_EMISMATCH,
                       "%s: \"chunk_sizes\" has no entry %s, which the spec asks for", doc, a);
    }
    if (strcmp(key, "encoding") == 0) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "encoding", json_object_get((json_object *)v));
        rc = choice(o, "encoding", false, encodings, 4, doc, &enc);
        json_object_put(o);
        if (rc || enc == (int)s->encoding) return rc;
        return mismatch(doc, key, encodings[s->encoding], encodings[enc]);
    }
    if (strcmp(key, "sharding") == 0) {
        if ((rc = parse_sharding(v, doc, &t.sharding))) return rc;
        return sharding_equal(&s->sharding, &t.sharding)
                   ? 0
                   : nds_err(NDS_EMISMATCH, "%s: \"sharding\" differs from what the spec asks for",
                             doc);
    }
    return 0; /* jpeg_quality, png_level: encoding parameters, not constraints */
}

static int check_multiscale(const nds_pc_info *info, const json_object *want, const char *doc) {
    nds_pc_info t;
    memset(&t, 0, sizeof t);
    json_object *v;
    int rc = 0;
    char a[32], b[32];
    if (json_object_object_get_ex(want, "type", &v)) {
        const char *s = json_object_get_string(v);
        const char *have = info->segmentation ? "segmentation" : "image";
        if (!s || strcasecmp(s, have)) return mismatch(doc, "type", have, s ? s : "a non-string");
    }
    if (json_object_object_get_ex(want, "data_type", NULL)) {
        if ((rc = parse_dtype(want, doc, &t.dtype))) return rc;
        if (t.dtype != info->dtype)
            return mismatch(doc, "data_type", nds_pc_dtype_name(info->dtype),
                            nds_pc_dtype_name(t.dtype));
    }
    int64_t nc = (int64_t)info->num_channels;
    if ((rc = nds_json_get_int(want, "num_channels", true, 1, INT64_C(1) << 24, doc, &nc)))
        return rc;
    if ((uint64_t)nc != info->num_channels) {
        snprintf(a, sizeof a, "%llu", (unsigned long long)info->num_channels);
        snprintf(b, sizeof b, "%lld", (long long)nc);
        return mismatch(doc, "num_channels", a, b);
    }
    return 0;
}

/* A whole info in the spec: its multiscale members and every scale it lists (by key) must match. */
static int check_whole(const nds_pc_info *info, const json_object *want, const char *doc) {
    int rc = check_multiscale(info, want, doc);
    json_object *scales = NULL;
    json_object_object_get_ex(want, "scales", &scales);
    size_t n = json_object_is_type(scales, json_type_array) ? json_object_array_length(scales) : 0;
    for (size_t i = 0; i < n && !rc; i++) {
        json_object *w = json_object_array_get_idx(scales, i), *k = NULL;
        const char *key =
            json_object_object_get_ex(w, "key", &k) ? json_object_get_string(k) : NULL;
        size_t j = 0, chunk = 0;
        while (j < info->nscales && (!key || strcmp(info->scales[j].key, key))) j++;
        if (j == info->nscales)
            return nds_err(NDS_EMISMATCH, "%s: no scale \"%.60s\", which the spec's metadata lists",
                           doc, key ? key : "(no key)");
        char d[DOC_MAX];
        snprintf(d, sizeof d, "%s: scales[%zu]", doc, j);
        json_object_object_foreach(w, mk, mv) {
            if (!strcmp(mk, "chunk_sizes") && json_object_is_type(mv, json_type_array) &&
                json_object_array_length(mv) == 1)
                rc = check_scale_member(&info->scales[j], "chunk_size",
                                        json_object_array_get_idx(mv, 0), d, &chunk);
            else if (in_list(mk, scale_names, 10))
                rc = check_scale_member(&info->scales[j], mk, mv, d, &chunk);
            if (rc) break;
        }
    }
    return rc;
}

int nds_pc_check(const nds_pc_info *info, size_t index, const nds_pc_request *req, const char *doc,
                 size_t *chunk) {
    char d[DOC_MAX];
    snprintf(d, sizeof d, "%s: scales[%zu]", doc, index);
    *chunk = 0;
    int rc = check_multiscale(info, req->multiscale, doc);
    if (!rc && req->info) rc = check_whole(info, req->info, doc);
    json_object_object_foreach(req->scale, key, val) {
        if (rc) break;
        rc = check_scale_member(&info->scales[index], key, val, d, chunk);
    }
    return rc;
}

void nds_pc_apply_overrides(const nds_pc_request *req, nds_pc_scale *s) {
    json_object *v;
    int64_t x;
    if (json_object_object_get_ex(req->scale, "jpeg_quality", &v) && as_int(v, &x) && x >= 0 &&
        x <= 100)
        s->jpeg_quality = (int)x;
    if (json_object_object_get_ex(req->scale, "png_level", &v) && as_int(v, &x) && x >= 0 && x <= 9)
        s->png_level = (int)x;
}

/* ---- creation -------------------------------------------------------------------------------- */

static json_object *copy_or(const json_object *obj, const char *key, json_object *dflt) {
    json_object *v;
    if (json_object_object_get_ex(obj, key, &v)) {
        json_object_put(dflt);
        return json_object_get(v);
    }
    return dflt;
}

static json_object *u3_json(const uint64_t *v) {
    json_object *a = json_object_new_array();
    for (int i = 0; i < 3; i++) json_object_array_add(a, json_object_new_int64((int64_t)v[i]));
    return a;
}

/* Default chunk: 64 voxels per dimension, clipped to the size (at least 1). */
static json_object *default_chunk(const json_object *size) {
    uint64_t c[3];
    for (size_t i = 0; i < 3; i++) {
        int64_t s = 0;
        as_int(json_object_array_get_idx(size, i), &s);
        c[i] = s < 1 ? 1 : s < DEFAULT_CHUNK ? (uint64_t)s : DEFAULT_CHUNK;
    }
    json_object *outer = json_object_new_array();
    json_object_array_add(outer, u3_json(c));
    return outer;
}

/* "sharding" for a new scale: as asked, with the schema codec's shard_data_encoding applied. */
static json_object *new_sharding(const nds_pc_request *req) {
    json_object *v = NULL, *copy = NULL;
    if (!json_object_object_get_ex(req->scale, "sharding", &v) || !v) return NULL;
    if (json_object_deep_copy(v, &copy, NULL) != 0) return NULL;
    if (req->shard_data_gzip >= 0 && json_object_is_type(copy, json_type_object))
        json_object_object_add(copy, "data_encoding",
                               json_object_new_string(req->shard_data_gzip ? "gzip" : "raw"));
    return copy;
}

static int new_scale_key(const nds_pc_request *req, const json_object *res, const char *where,
                         json_object **out) {
    json_object *v;
    if (json_object_object_get_ex(req->scale, "key", &v)) {
        *out = json_object_get(v);
        return 0;
    }
    double r[3];
    char d[DOC_MAX], key[NDS_PC_MAX_KEY + 1] = "";
    snprintf(d, sizeof d, "neuroglancer_precomputed: spec for %s: scale_metadata", where);
    int rc = triple_positive(res, "resolution", d, r);
    if (rc) return rc;
    key_from_resolution(r, key, sizeof key);
    *out = json_object_new_string(key);
    return 0;
}

/* "encoding" (default raw), the compressed_segmentation block (default 8^3) and encoding
 * parameters. */
static void add_encoding(const nds_pc_request *req, json_object *s) {
    json_object *v, *enc = copy_or(req->scale, "encoding", json_object_new_string("raw"));
    json_object_object_add(s, "encoding", enc);
    const char *e = json_object_get_string(enc);
    if (e && strcasecmp(e, "compressed_segmentation") == 0) {
        uint64_t eight[3] = {8, 8, 8};
        json_object_object_add(
            s, "compressed_segmentation_block_size",
            copy_or(req->scale, "compressed_segmentation_block_size", u3_json(eight)));
    } else if (json_object_object_get_ex(req->scale, "compressed_segmentation_block_size", &v)) {
        json_object_object_add(s, "compressed_segmentation_block_size", json_object_get(v));
    }
    if (json_object_object_get_ex(req->scale, "jpeg_quality", &v))
        json_object_object_add(s, "jpeg_quality", json_object_get(v));
    if (json_object_object_get_ex(req->scale, "png_level", &v))
        json_object_object_add(s, "png_level", json_object_get(v));
}

int nds_pc_new_scale(const nds_pc_request *req, const char *where, json_object **out) {
    json_object *size, *key = NULL, *res;
    *out = NULL;
    if (!json_object_object_get_ex(req->scale, "size", &size) ||
        !json_object_is_type(size, json_type_array) || json_object_array_length(size) != 3)
        return nds_err(NDS_EINVAL,
                       "neuroglancer_precomputed: spec for %s: cannot create a scale without a "
                       "size (give scale_metadata.size [x, y, z] or schema.domain.shape "
                       "[x, y, z, channels])",
                       where);
    res = copy_or(req->scale, "resolution", NULL);
    if (!res) {
        res = json_object_new_array();
        for (int i = 0; i < 3; i++) json_object_array_add(res, json_object_new_double(1.0));
    }
    int rc = new_scale_key(req, res, where, &key);
    if (rc) {
        json_object_put(res);
        return rc;
    }
    json_object *s = json_object_new_object(), *v;
    json_object_object_add(s, "key", key);
    json_object_object_add(s, "size", json_object_get(size));
    json_object_object_add(s, "resolution", res);
    int64_t zero[3] = {0, 0, 0};
    json_object_object_add(s, "voxel_offset",
                           copy_or(req->scale, "voxel_offset", triple_json(zero)));
    json_object *chunk = NULL;
    if (json_object_object_get_ex(req->scale, "chunk_size", &v)) {
        chunk = json_object_new_array();
        json_object_array_add(chunk, json_object_get(v));
    }
    json_object_object_add(s, "chunk_sizes", chunk ? chunk : default_chunk(size));
    add_encoding(req, s);
    json_object *sh = new_sharding(req);
    if (sh) json_object_object_add(s, "sharding", sh);
    *out = s;
    return 0;
}

int nds_pc_new_info(const nds_pc_request *req, const char *where, json_object **out) {
    *out = NULL;
    if (req->info) {
        if (json_object_deep_copy(req->info, out, NULL) != 0)
            return nds_err(NDS_ENOMEM, "out of memory");
        return 0;
    }
    json_object *dt, *enc;
    if (!json_object_object_get_ex(req->multiscale, "data_type", &dt))
        return nds_err(NDS_EINVAL,
                       "neuroglancer_precomputed: spec for %s: cannot create a volume without a "
                       "data type (give multiscale_metadata.data_type or schema.dtype)",
                       where);
    const char *e =
        json_object_object_get_ex(req->scale, "encoding", &enc) ? json_object_get_string(enc) : "";
    bool seg = e && strcasecmp(e, "compressed_segmentation") == 0;
    json_object *info = json_object_new_object(), *scale = NULL, *scales = json_object_new_array();
    json_object_object_add(info, "@type", json_object_new_string("neuroglancer_multiscale_volume"));
    json_object_object_add(
        info, "type",
        copy_or(req->multiscale, "type", json_object_new_string(seg ? "segmentation" : "image")));
    json_object_object_add(info, "data_type", json_object_get(dt));
    json_object_object_add(info, "num_channels",
                           copy_or(req->multiscale, "num_channels", json_object_new_int(1)));
    json_object_object_add(info, "scales", scales);
    int rc = nds_pc_new_scale(req, where, &scale);
    if (rc) {
        json_object_put(info);
        return rc;
    }
    json_object_array_add(scales, scale);
    *out = info;
    return 0;
}
