/* neuroglancer precomputed: the documents a new volume or a new scale starts from
 * (nds_pc_new_info, nds_pc_new_scale), built from a spec's request with defaults filled in
 * (resolution [1, 1, 1], a key named after the resolution, chunk 64 clipped to the size, raw
 * encoding). The opener validates the result by parsing it (precomputed_metadata.c) before writing.
 * Threading: reentrant. Ownership: the returned json objects belong to the caller.
 */
#include <math.h>
#include <stdio.h>
#include <strings.h>

#include "precomputed_members.h"
#include "internal/error.h"

#define DEFAULT_CHUNK 64

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
        nds_pc_as_int(json_object_array_get_idx(size, i), &s);
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
    char d[NDS_PC_DOC_MAX], key[NDS_PC_MAX_KEY + 1] = "";
    snprintf(d, sizeof d, "neuroglancer_precomputed: spec for %s: scale_metadata", where);
    int rc = nds_pc_triple_positive(res, "resolution", d, r);
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
                           copy_or(req->scale, "voxel_offset", nds_pc_triple_json(zero)));
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
