/* neuroglancer precomputed metadata: parsing the `info` document (see precomputed_metadata.h and
 * docs/formats.md), and the member readers the other metadata files share (precomputed_members.h).
 * What a spec asks for is precomputed_request.c; matching it against a stored volume,
 * precomputed_match.c; the documents a new volume or scale starts from, precomputed_create.c.
 *
 * Parsing is strict where the specification is (required members, types, "compressed_segmentation_
 * block_size" if and only if the encoding is compressed_segmentation, one chunk size when sharded)
 * and lenient where real volumes are (unknown members ignored, "encoding" and "data_type" compared
 * case-insensitively). Errors name the member, the scale and the document.
 * Omits: the "mesh", "skeletons" and "segment_properties" sub-formats (their members are kept, not
 * read).
 * Threading: reentrant. Ownership: parsed structs belong to the caller.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "precomputed_members.h"
#include "internal/error.h"
#include "internal/json_util.h"
#include "internal/util.h"

#define DEFAULT_JPEG_QUALITY 75
#define DEFAULT_PNG_LEVEL 6

static const struct {
    const char *name;
    nds_dtype type;
} dtypes[] = {
    {"uint8", NDS_UINT8},   {"int8", NDS_INT8},   {"uint16", NDS_UINT16}, {"int16", NDS_INT16},
    {"uint32", NDS_UINT32}, {"int32", NDS_INT32}, {"uint64", NDS_UINT64}, {"float32", NDS_FLOAT32},
};

const char *const nds_pc_encodings[4] = {"raw", "jpeg", "png", "compressed_segmentation"};


const char *nds_pc_dtype_name(nds_dtype t) {
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (dtypes[i].type == t) return dtypes[i].name;
    return NULL;
}

/* ---- small JSON readers ---------------------------------------------------------------------- */

/* An integer value (json int, or a double holding an exact integer). */
bool nds_pc_as_int(const json_object *v, int64_t *out) {
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
int nds_pc_triple_int(const json_object *v, const char *name, int64_t min, int64_t max,
                      const char *doc, int64_t *out) {
    if (!json_object_is_type(v, json_type_array) || json_object_array_length(v) != 3)
        return nds_err(NDS_EFORMAT, "%s: \"%s\" must be an array of 3 integers [x, y, z]", doc,
                       name);
    for (size_t i = 0; i < 3; i++) {
        if (!nds_pc_as_int(json_object_array_get_idx(v, i), &out[i]))
            return nds_err(NDS_EFORMAT, "%s: \"%s\"[%zu] must be an integer", doc, name, i);
        if (out[i] < min || out[i] > max)
            return nds_err(NDS_EFORMAT, "%s: \"%s\"[%zu] is %lld, outside [%lld, %lld]", doc, name,
                           i, (long long)out[i], (long long)min, (long long)max);
    }
    return 0;
}

int nds_pc_triple_u64(const json_object *v, const char *name, int64_t min, const char *doc,
                      uint64_t *out) {
    int64_t t[3];
    int rc = nds_pc_triple_int(v, name, min, INT64_C(1) << 53, doc, t);
    for (int i = 0; i < 3 && !rc; i++) out[i] = (uint64_t)t[i];
    return rc;
}

int nds_pc_triple_positive(const json_object *v, const char *name, const char *doc, double *out) {
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
int nds_pc_choice(const json_object *obj, const char *key, bool optional, const char *const *names,
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

int nds_pc_parse_sharding(const json_object *v, const char *doc, nds_pc_sharding *s) {
    memset(s, 0, sizeof *s);
    if (!v) return 0; /* null: unsharded */
    if (!json_object_is_type(v, json_type_object))
        return nds_err(NDS_EFORMAT, "%s: \"sharding\" must be an object or null", doc);
    char d[NDS_PC_DOC_MAX];
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
    if (!rc) rc = nds_pc_choice(v, "hash", false, hashes, 2, d, &hash);
    if (!rc) rc = nds_pc_choice(v, "minishard_index_encoding", true, shard_encodings, 2, d, &ienc);
    if (!rc) rc = nds_pc_choice(v, "data_encoding", true, shard_encodings, 2, d, &denc);
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
        rc = nds_pc_triple_u64(json_object_array_get_idx(v, i), name, 1, doc, s->chunk_sizes[i]);
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
    int rc = nds_pc_triple_u64(v, "compressed_segmentation_block_size", 1, doc, s->cseg_block);
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
        rc = nds_pc_triple_u64(v, "size", 0, doc, s->size);
    if (!rc && !(rc = nds_json_member(scale, "resolution", doc, &v)))
        rc = nds_pc_triple_positive(v, "resolution", doc, s->resolution);
    if (!rc && json_object_object_get_ex(scale, "voxel_offset", &v))
        rc = nds_pc_triple_int(v, "voxel_offset", -NDS_PC_OFFSET_MAX, NDS_PC_OFFSET_MAX, doc, off);
    for (int d = 0; d < 3; d++) s->voxel_offset[d] = off[d];
    if (!rc) rc = parse_chunk_sizes(scale, doc, s);
    return rc;
}

static int parse_scale(const json_object *scale, const nds_pc_info *m, size_t i,
                       const char *info_doc, nds_pc_scale *s) {
    char doc[NDS_PC_DOC_MAX];
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
        if (!rc && nds_pc_choice(scale, "encoding", false, nds_pc_encodings, 4, doc, &enc) != 0)
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
        rc = nds_pc_parse_sharding(sh, doc, &s->sharding);
    if (!rc) rc = check_scale_limits(s, m->dtype, m->num_channels, doc);
    return rc;
}

/* ---- info ------------------------------------------------------------------------------------ */

int nds_pc_parse_dtype(const json_object *info, const char *doc, nds_dtype *out) {
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
    if (!rc) rc = nds_pc_choice(info, "type", false, types, 2, doc, &type);
    if (!rc) rc = nds_pc_parse_dtype(info, doc, &m->dtype);
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
