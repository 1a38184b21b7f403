/* neuroglancer precomputed: a spec's request matched against a stored info: the scale it selects
 * ("scale_index", scale "key", "resolution", else scale 0), whether the volume has every member
 * the request gives (NDS_EMISMATCH naming the first that differs), and the encoding parameters it
 * overrides for this open. Kept apart from creation (precomputed_create.c), which builds documents
 * rather than reading them. Threading: reentrant; nothing is allocated that outlives a call.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "precomputed_members.h"
#include "internal/error.h"
#include "internal/json_util.h"

/* ---- scale selection ------------------------------------------------------------------------- */

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
        int rc = nds_pc_triple_positive(v, "scale_metadata.resolution", doc, res);
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
        return (rc = nds_pc_triple_u64(v, key, 0, doc, t.size))
                   ? rc
                   : check_u3(doc, key, s->size, t.size);
    if (strcmp(key, "compressed_segmentation_block_size") == 0)
        return (rc = nds_pc_triple_u64(v, key, 1, doc, t.cseg_block))
                   ? rc
                   : check_u3(doc, key, s->cseg_block, t.cseg_block);
    if (strcmp(key, "voxel_offset") == 0) {
        if ((rc = nds_pc_triple_int(v, key, -NDS_PC_OFFSET_MAX, NDS_PC_OFFSET_MAX, doc,
                                    t.voxel_offset)))
            return rc;
        if (!memcmp(s->voxel_offset, t.voxel_offset, sizeof t.voxel_offset)) return 0;
        fmt_i3(a, sizeof a, s->voxel_offset);
        fmt_i3(b, sizeof b, t.voxel_offset);
        return mismatch(doc, key, a, b);
    }
    if (strcmp(key, "resolution") == 0) {
        if ((rc = nds_pc_triple_positive(v, key, doc, t.resolution))) return rc;
        if (same_resolution(s->resolution, t.resolution)) return 0;
        snprintf(a, sizeof a, "[%g,%g,%g]", s->resolution[0], s->resolution[1], s->resolution[2]);
        snprintf(b, sizeof b, "[%g,%g,%g]", t.resolution[0], t.resolution[1], t.resolution[2]);
        return mismatch(doc, key, a, b);
    }
    if (strcmp(key, "chunk_size") == 0) {
        if ((rc = nds_pc_triple_u64(v, key, 1, doc, t.size))) return rc;
        for (size_t i = 0; i < s->nchunk; i++)
            if (!memcmp(s->chunk_sizes[i], t.size, sizeof t.size)) return *chunk = i, 0;
        fmt_u3(a, sizeof a, t.size);
        return nds_err(NDS_EMISMATCH,
                       "%s: \"chunk_sizes\" has no entry %s, which the spec asks for", doc, a);
    }
    if (strcmp(key, "encoding") == 0) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "encoding", json_object_get((json_object *)v));
        rc = nds_pc_choice(o, "encoding", false, nds_pc_encodings, 4, doc, &enc);
        json_object_put(o);
        if (rc || enc == (int)s->encoding) return rc;
        return mismatch(doc, key, nds_pc_encodings[s->encoding], nds_pc_encodings[enc]);
    }
    if (strcmp(key, "sharding") == 0) {
        if ((rc = nds_pc_parse_sharding(v, doc, &t.sharding))) return rc;
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
        if ((rc = nds_pc_parse_dtype(want, doc, &t.dtype))) return rc;
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
        char d[NDS_PC_DOC_MAX];
        snprintf(d, sizeof d, "%s: scales[%zu]", doc, j);
        json_object_object_foreach(w, mk, mv) {
            if (!strcmp(mk, "chunk_sizes") && json_object_is_type(mv, json_type_array) &&
                json_object_array_length(mv) == 1)
                rc = check_scale_member(&info->scales[j], "chunk_size",
                                        json_object_array_get_idx(mv, 0), d, &chunk);
            else if (nds_pc_in_list(mk, nds_pc_scale_names, 10))
                rc = check_scale_member(&info->scales[j], mk, mv, d, &chunk);
            if (rc) break;
        }
    }
    return rc;
}

int nds_pc_check(const nds_pc_info *info, size_t index, const nds_pc_request *req, const char *doc,
                 size_t *chunk) {
    char d[NDS_PC_DOC_MAX];
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
    if (json_object_object_get_ex(req->scale, "jpeg_quality", &v) && nds_pc_as_int(v, &x) &&
        x >= 0 && x <= 100)
        s->jpeg_quality = (int)x;
    if (json_object_object_get_ex(req->scale, "png_level", &v) && nds_pc_as_int(v, &x) && x >= 0 &&
        x <= 9)
        s->png_level = (int)x;
}
