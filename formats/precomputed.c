/* The neuroglancer precomputed format driver ("neuroglancer_precomputed", URL
 * "|neuroglancer-precomputed:"): one scale of a multiscale volume as a 4-d array
 * [x, y, z, channel], with raw, jpeg, png and compressed_segmentation chunk encodings, unsharded or
 * neuroglancer_uint64_sharded_v1.
 *
 * The array's kvstore is the volume's directory (where `info` lives); chunk keys carry the scale's
 * key ("8_8_8/0-64_0-64_0-64", "8_8_8/0a.shard"). Array index i along x is voxel
 * voxel_offset[0] + i. On disk a chunk is clipped at the volume's upper edge and stored x fastest
 * (Fortran order over [x, y, z, channel]); decode pads it to the full chunk with 0 (precomputed has
 * no fill value) and encode clips it. Sharded scales have one of two layouts:
 * - SHARD_BOX: when every shard file holds one aligned box of chunks (identity hash with
 *   preshift + minishard + shard bits covering the chunk grid's Morton bits, or shard_bits 0 with
 *   any hash) and that box is at most 1 GiB in memory, the core's storage chunk is the shard's box
 *   (one read-modify-write of the shard per write call, the shard decoded and re-encoded whole)
 *   and its read grid is the precomputed chunk, read through byte ranges (read_chunk);
 * - SHARD_HASHED: otherwise (murmurhash3 with several shards, identity shard numbers that wrap,
 *   boxes above 1 GiB) a shard is not a region of the array. The core's chunk is the precomputed
 *   chunk and the array is grouped (nds_array_meta.grouped): a write call groups its chunks by
 *   shard file (group_key), and per shard the core decodes only partly written chunks
 *   (group_read_chunk), encodes the chunks it writes (encode_chunk) and has group_encode rebuild
 *   the shard with every other chunk's stored bytes copied verbatim; one conditional write per
 *   shard. Writes inside a transaction are refused by the core. Reads are as in SHARD_BOX.
 * Omits: resize (precomputed bounds are fixed, as in TensorStore), attributes (none in the format),
 * groups, the second and later "chunk_sizes" of a scale for writing (writes go to the chosen one);
 * for SHARD_HASHED, chunk keys (a chunk has none of its own: statistics and verify see no chunks).
 *
 * This file holds the vtable, open and create, chunk keys and the grouped-write hooks; the chunk
 * encodings and shard boxes (stored bytes <-> canonical chunks), with the per-thread scratch and
 * the shard of a chunk both files need, are in precomputed_chunk.c, which never calls back here.
 *
 * Threading: an instance is immutable after open; decode/encode/read_chunk run on many threads and
 * use per-thread scratch buffers. Ownership: the instance owns the info document and its parse.
 */
#include <stdio.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "precomputed_instance.h"
#include "ndstore/array.h"
#include "ndstore/sys/format.h"
#include "internal/error.h"
#include "internal/format_util.h"
#include "internal/json_util.h"
#include "internal/util.h"

#define OPEN_ATTEMPTS 8
/* Largest shard box written as one storage chunk; bigger ones use the hashed layout. */
#define SHARD_BOX_MAX_BYTES (UINT64_C(1) << 30)
/* Bound on chunks listed in one minishard index. */
#define MAX_MINISHARD_ENTRIES (UINT64_C(1) << 26)

/* ---- chunk keys ------------------------------------------------------------------------------ */

/* "x0-x1_y0-y1_z0-z1" of chunk g, in voxel coordinates (voxel_offset added). */
static int unsharded_key(const precomputed *p, const uint64_t *g, char *buf, size_t cap) {
    int64_t lo[3], hi[3];
    uint64_t e[3];
    nds_pc_chunk_extent(p, g, e);
    for (int d = 0; d < 3; d++) {
        lo[d] = p->s.voxel_offset[d] + (int64_t)(g[d] * p->chunk[d]);
        hi[d] = lo[d] + (int64_t)e[d];
    }
    int n = snprintf(buf, cap, "%s/%lld-%lld_%lld-%lld_%lld-%lld", p->s.key, (long long)lo[0],
                     (long long)hi[0], (long long)lo[1], (long long)hi[1], (long long)lo[2],
                     (long long)hi[2]);
    return n > 0 && (size_t)n < cap
               ? 0
               : nds_err(NDS_ERANGE, "neuroglancer_precomputed: chunk key too long");
}

static int pc_chunk_key(void *state, const uint64_t *cell, char *buf, size_t cap) {
    const precomputed *p = state;
    if (p->layout == UNSHARDED) return unsharded_key(p, cell, buf, cap);
    if (p->layout == SHARD_BOX)
        return nds_pc_shard_key(p->s.key, &p->s.sharding, nds_pc_box_shard(p, cell), buf, cap);
    return nds_err(NDS_EINTERNAL,
                   "neuroglancer_precomputed: chunks of scale \"%s\" live in hashed shard files "
                   "and have no key of their own",
                   p->s.key);
}

/* A signed decimal as chunk_key writes it (no '+', no leading zeros). */
static const char *parse_dec(const char *s, int64_t *out) {
    bool neg = *s == '-';
    const char *q = s + neg;
    if (*q < '0' || *q > '9' || (q[0] == '0' && q[1] >= '0' && q[1] <= '9') || (neg && q[0] == '0'))
        return NULL;
    uint64_t v = 0;
    for (; *q >= '0' && *q <= '9'; q++)
        if (!nds_mul_u64(v, 10, &v) || !nds_add_u64(v, (uint64_t)(*q - '0'), &v) ||
            v > (uint64_t)INT64_MAX)
            return NULL;
    *out = neg ? -(int64_t)v : (int64_t)v;
    return q;
}

static int parse_unsharded(const precomputed *p, const char *name, uint64_t *cell) {
    for (int d = 0; d < 3; d++) {
        int64_t lo, hi;
        if (!(name = parse_dec(name, &lo)) || *name++ != '-' || !(name = parse_dec(name, &hi)))
            return 0;
        if (*name++ != (d < 2 ? '_' : '\0')) return 0;
        int64_t rel;
        if (__builtin_sub_overflow(lo, p->s.voxel_offset[d], &rel) || rel < 0 ||
            (uint64_t)rel % p->chunk[d] || (uint64_t)rel / p->chunk[d] >= p->grid.grid[d])
            return 0;
        cell[d] = (uint64_t)rel / p->chunk[d];
    }
    cell[3] = 0; /* the ends (x1, ...) are checked by comparing with chunk_key's result */
    return 1;
}

static int parse_shard_name(const precomputed *p, const char *name, uint64_t *cell) {
    uint64_t shard = 0, g[3];
    size_t digits = 0;
    for (; (name[digits] >= '0' && name[digits] <= '9') ||
           (name[digits] >= 'a' && name[digits] <= 'f');
         digits++) {
        if (digits >= 16) return 0;
        shard = shard << 4 |
                (uint64_t)(name[digits] <= '9' ? name[digits] - '0' : name[digits] - 'a' + 10);
    }
    if (digits == 0 || strcmp(name + digits, ".shard") != 0) return 0;
    unsigned k = p->s.sharding.preshift_bits + p->s.sharding.minishard_bits;
    if (k > p->grid.total) k = p->grid.total;
    unsigned rest = p->grid.total - k; /* bits of a shard number */
    if (rest < 64 && (shard >> rest) != 0) return 0;
    nds_pc_morton_cell(&p->grid, k < 64 ? shard << k : 0, g);
    for (int d = 0; d < 3; d++) {
        if (g[d] >= p->grid.grid[d]) return 0;
        cell[d] = g[d] >> p->box[d];
    }
    cell[3] = 0;
    return 1;
}

static int pc_parse_chunk_key(void *state, const char *key, uint64_t *cell) {
    const precomputed *p = state;
    size_t n = strlen(p->s.key);
    if (p->layout == SHARD_HASHED || strncmp(key, p->s.key, n) != 0 || key[n] != '/') return 0;
    int ok = p->layout == UNSHARDED ? parse_unsharded(p, key + n + 1, cell)
                                    : parse_shard_name(p, key + n + 1, cell);
    char again[NDS_PC_MAX_KEY + 128];
    /* The key must be exactly the one chunk_key writes (digit count, clipped ends). */
    return ok && pc_chunk_key(state, cell, again, sizeof again) == 0 && strcmp(again, key) == 0;
}

/* ---- vtable: chunk codec --------------------------------------------------------------------- */

/* A storage chunk: one precomputed chunk (unsharded, and hashed shards, whose chunk data this is
 * before data_encoding), or a shard box's whole shard file. */
static int decode_whole(void *state, const uint64_t *cell, const uint8_t *data, size_t len,
                        uint8_t *out) {
    const precomputed *p = state;
    if (p->layout != SHARD_BOX) return nds_pc_decode_one(p, cell, data, len, out);
    size_t bytes = p->chunk_bytes << (p->box[0] + p->box[1] + p->box[2]);
    return nds_pc_decode_box(p, cell, data, len, out, bytes);
}

/* Whole decodes only (the encodings are images and segmentations, not byte streams). */
static int pc_decode_chunk(void *state, const uint64_t *cell, nds_decode_request *rq) {
    return nds_format_decode_fallback(state, cell, rq, decode_whole);
}

static int pc_encode_chunk(void *state, const uint64_t *cell, const uint8_t *chunk, nds_buf *out) {
    const precomputed *p = state;
    out->len = 0;
    if (p->layout != SHARD_BOX) return nds_pc_encode_one(p, cell, chunk, out);
    return nds_pc_encode_box(p, cell, chunk, out);
}

/* A write to part of a shard box: only the chunks it reaches are decoded (those it changes in
 * part) and encoded; the others keep their stored bytes. */
static int pc_update_chunk(void *state, nds_update_request *u) {
    const precomputed *p = state;
    if (p->layout != SHARD_BOX) return NDS_EUNSUPPORTED;
    u->out->len = 0;
    return nds_pc_update_box(p, u);
}

/* ---- vtable: hashed shards (grouped writes) -------------------------------------------------- */

static int pc_group_key(void *state, const uint64_t *cell, char *buf, size_t cap) {
    const precomputed *p = state;
    if (p->layout != SHARD_HASHED)
        return nds_err(NDS_EINTERNAL, "neuroglancer_precomputed: scale \"%s\" is not grouped",
                       p->s.key);
    return nds_pc_shard_key(p->s.key, &p->s.sharding, nds_pc_chunk_shard(p, cell), buf, cap);
}

/* Chunk cell out of its shard file's bytes: minishard lookup, data_encoding undone, decoded. */
static int pc_group_read_chunk(void *state, const uint8_t *obj, size_t len, const uint64_t *cell,
                               uint8_t *out, int *present) {
    const precomputed *p = state;
    uint64_t id = nds_pc_morton(&p->grid, cell);
    nds_pc_chunk_ref ref;
    nds_buf *raw = nds_pc_scratch(2, 0);
    *present = 0;
    int rc = raw ? nds_pc_shard_find(&p->s.sharding, obj, len, id, p->max_entries, &ref)
                 : nds_pc_no_memory();
    if (!rc && ref.end != 0)
        rc = nds_pc_chunk_data(&p->s.sharding, obj + ref.start, (size_t)(ref.end - ref.start),
                               4 * p->chunk_bytes + (1u << 20), raw);
    if (!rc && ref.end != 0 && !(rc = nds_pc_decode_one(p, cell, raw->data, raw->len, out)))
        *present = 1;
    nds_pc_scratch_trim();
    return rc ? nds_err_prefix(rc, "chunk %llu", (unsigned long long)id) : 0;
}

/* The shard file rebuilt with the updated chunks; the others' stored bytes are copied verbatim. */
static int pc_group_encode(void *state, const uint8_t *obj, size_t len,
                           const nds_group_update *updates, size_t n, nds_buf *out) {
    const precomputed *p = state;
    nds_pc_shard_chunk *c = malloc((n ? n : 1) * sizeof *c);
    if (!c) return nds_pc_no_memory();
    for (size_t k = 0; k < n; k++)
        c[k] = (nds_pc_shard_chunk){nds_pc_morton(&p->grid, updates[k].cell), updates[k].data,
                                    updates[k].len};
    uint64_t shard = n ? nds_pc_chunk_shard(p, updates[0].cell) : 0;
    nds_pc_changes changes = {c, n};
    int rc = nds_pc_shard_update(&p->s.sharding, shard, obj, len, p->max_entries, &changes, out);
    free(c);
    return rc;
}

/* 1 when key is "<scale key>/<shard>.shard" with exactly the digits nds_pc_shard_key writes and a
 * shard number below 2^shard_bits: a hashed shard file of the open scale. */
static int pc_group_parse_key(void *state, const char *key) {
    const precomputed *p = state;
    size_t n = strlen(p->s.key);
    if (p->layout != SHARD_HASHED || strncmp(key, p->s.key, n) != 0 || key[n] != '/') return 0;
    char *end;
    errno = 0;
    unsigned long long shard = strtoull(key + n + 1, &end, 16);
    char again[NDS_PC_MAX_KEY + 128];
    return errno == 0 && end != key + n + 1 && strcmp(end, ".shard") == 0 &&
           (p->s.sharding.shard_bits >= 64 || shard >> p->s.sharding.shard_bits == 0) &&
           nds_pc_shard_key(p->s.key, &p->s.sharding, shard, again, sizeof again) == 0 &&
           strcmp(again, key) == 0;
}

/* Every chunk of a hashed shard file: the whole file parsed (shard index, every minishard index,
 * no overlapping ranges, each chunk in this shard and minishard), each chunk id inside the grid. */
static int pc_group_list(void *state, const char *key, const uint8_t *obj, size_t len,
                         int (*fn)(void *ctx, const uint64_t *cell), void *ctx) {
    const precomputed *p = state;
    const char *name = strrchr(key, '/');
    uint64_t shard = strtoull(name ? name + 1 : key, NULL, 16), cell[4] = {0};
    nds_pc_chunk_ref *refs = NULL;
    size_t n = 0;
    int rc = nds_pc_shard_parse(&p->s.sharding, shard, obj, len, p->max_entries, &refs, &n);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (p->grid.total < 64 && refs[i].id >> p->grid.total != 0)
            rc = nds_err(NDS_ECORRUPT, "chunk id %llu lies outside the grid of scale \"%s\"",
                         (unsigned long long)refs[i].id, p->s.key);
        if (rc == 0) nds_pc_morton_cell(&p->grid, refs[i].id, cell);
        for (int d = 0; rc == 0 && d < 3; d++)
            if (cell[d] >= p->grid.grid[d])
                rc = nds_err(NDS_ECORRUPT, "chunk id %llu lies outside the grid of scale \"%s\"",
                             (unsigned long long)refs[i].id, p->s.key);
        if (rc == 0) rc = fn(ctx, cell);
    }
    free(refs);
    return rc;
}

/* One precomputed chunk straight from the store: its shard through byte ranges, or its own key. */
static int pc_read_chunk(void *state, nds_kvstore *kv, const uint64_t *cell, uint8_t *out,
                         int *present) {
    const precomputed *p = state;
    size_t limit = 4 * p->chunk_bytes + (1u << 20);
    nds_buf *data = nds_pc_scratch(2, 0);
    if (!data) return nds_pc_no_memory();
    int rc;
    *present = 0;
    if (p->layout != UNSHARDED) {
        uint64_t id = nds_pc_morton(&p->grid, cell);
        nds_pc_limits limits = {p->max_entries, limit};
        rc = nds_pc_shard_read(kv, p->s.key, &p->s.sharding, id, &limits, data, present);
    } else {
        char key[NDS_PC_MAX_KEY + 128];
        nds_read_result r;
        if ((rc = unsharded_key(p, cell, key, sizeof key)) ||
            (rc = nds_kvstore_read(kv, key, NULL, &r)))
            return rc;
        *present = r.state == NDS_READ_VALUE;
        if (*present && nds_buf_append(data, r.value.data, r.value.len)) rc = nds_pc_no_memory();
        nds_read_result_dispose(&r);
    }
    if (!rc && *present) rc = nds_pc_decode_one(p, cell, data->data, data->len, out);
    if (rc)
        rc = nds_err_prefix(rc, "chunk %llu,%llu,%llu", (unsigned long long)cell[0],
                            (unsigned long long)cell[1], (unsigned long long)cell[2]);
    nds_pc_scratch_trim();
    return rc;
}

/* ---- instance -------------------------------------------------------------------------------- */

static void pc_close(void *state) {
    precomputed *p = state;
    if (!p) return;
    json_object_put(p->doc);
    nds_pc_info_dispose(&p->info);
    free(p);
}

/* How a sharded scale maps onto the core's grid (see the file comment). */
static void choose_layout(precomputed *p) {
    const nds_pc_sharding *sh = &p->s.sharding;
    p->layout = UNSHARDED;
    if (!sh->present) return;
    p->layout = SHARD_HASHED;
    if (!nds_pc_shard_box(sh, &p->grid, p->box)) return; /* hashed or wrapping shard numbers */
    unsigned b = p->box[0] + p->box[1] + p->box[2];
    if (b <= 32 && ((uint64_t)p->chunk_bytes << b) <= SHARD_BOX_MAX_BYTES) p->layout = SHARD_BOX;
}

/* Makes scale `index` (chunk size `chunk`) of the parsed info the open one. Takes doc and info. */
static void load(precomputed *p, json_object *doc, nds_pc_info *info, size_t index, size_t chunk,
                 const nds_pc_request *req) {
    p->doc = doc;
    p->info = *info;
    p->s = info->scales[index];
    nds_pc_apply_overrides(req, &p->s);
    memcpy(p->chunk, p->s.chunk_sizes[chunk], sizeof p->chunk);
    p->nc = info->num_channels;
    p->dtype = info->dtype;
    p->elem = nds_dtype_size(p->dtype);
    p->chunk_bytes =
        (size_t)(p->chunk[0] * p->chunk[1] * p->chunk[2] * p->nc * p->elem); /* <= 2 GiB */
    nds_pc_grid_init(&p->grid, p->s.size, p->chunk);
    uint64_t total;
    if (!nds_product_u64(p->grid.grid, 3, &total)) total = MAX_MINISHARD_ENTRIES;
    p->max_entries = total && total < MAX_MINISHARD_ENTRIES ? total : MAX_MINISHARD_ENTRIES;
    choose_layout(p);
}

static void fill_meta(const precomputed *p, nds_array_meta *meta) {
    memset(meta, 0, sizeof *meta);
    meta->rank = 4;
    meta->dtype = p->dtype;
    for (int d = 0; d < 3; d++) {
        meta->shape[d] = p->s.size[d];
        meta->origin[d] = p->s.voxel_offset[d];
        meta->units[d] = (nds_unit){p->s.resolution[d], "nm"};
        meta->chunk_shape[d] = p->layout == SHARD_BOX ? p->chunk[d] << p->box[d] : p->chunk[d];
        if (p->layout != UNSHARDED) meta->read_chunk_shape[d] = p->chunk[d];
    }
    meta->shape[3] = meta->chunk_shape[3] = p->nc;
    if (p->layout != UNSHARDED) meta->read_chunk_shape[3] = p->nc;
    meta->grouped = p->layout == SHARD_HASHED;
}

/* The spec's chunk_layout.write_chunk must be the storage chunk (the shard box when sharded). */
static int check_write_chunk(const precomputed *p, const nds_pc_request *req) {
    if (!req->has_write_chunk) return 0;
    nds_array_meta m;
    fill_meta(p, &m);
    if (!memcmp(m.chunk_shape, req->write_chunk, 3 * sizeof m.chunk_shape[0])) return 0;
    return nds_err(NDS_EMISMATCH,
                   "%s: the write chunk is [%llu,%llu,%llu], the spec asks for [%llu,%llu,%llu]",
                   p->doc_name, (unsigned long long)m.chunk_shape[0],
                   (unsigned long long)m.chunk_shape[1], (unsigned long long)m.chunk_shape[2],
                   (unsigned long long)req->write_chunk[0], (unsigned long long)req->write_chunk[1],
                   (unsigned long long)req->write_chunk[2]);
}

/* Reads key; *found is 0 when it is missing. On success with *found, r must be disposed. */
static int read_key(nds_kvstore *kv, const char *key, const char *url, nds_read_result *r,
                    bool *found) {
    memset(r, 0, sizeof *r);
    int rc = nds_kvstore_read(kv, key, NULL, r);
    if (rc) return nds_err_prefix(rc, "neuroglancer_precomputed: reading %s of %s", key, url);
    *found = r->state == NDS_READ_VALUE;
    if (!*found) nds_read_result_dispose(r);
    return 0;
}

static int write_info(nds_kvstore *kv, const json_object *doc, const nds_generation *if_equal,
                      const char *url) {
    char *text = nds_json_to_string(doc, false);
    if (!text) return nds_pc_no_memory();
    nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
    wo.if_equal = *if_equal;
    int rc = nds_kvstore_write(kv, "info", text, strlen(text), &wo, NULL);
    free(text);
    if (rc && rc != NDS_ECONFLICT)
        rc = nds_err_prefix(rc, "neuroglancer_precomputed: writing info of %s", url);
    return rc;
}

/* ---- open ------------------------------------------------------------------------------------ */

/* Parses doc (ownership taken) and opens the scale the request names in it, checking the request.
 */
static int open_doc(precomputed *p, json_object *doc, const nds_pc_request *req, unsigned mode,
                    bool *missing, size_t *missing_index) {
    nds_pc_info info;
    size_t index = 0, chunk = 0;
    bool found = false;
    int rc = nds_pc_info_parse(doc, p->doc_name, &info);
    if (rc) {
        json_object_put(doc);
        return rc;
    }
    rc =
        nds_pc_select_scale(&info, req, (mode & NDS_OPEN_CREATE) != 0, p->doc_name, &index, &found);
    if (!rc && !found) {
        *missing = true;
        *missing_index = index;
    } else if (!rc) {
        rc = nds_pc_check(&info, index, req, p->doc_name, &chunk);
    }
    if (rc || !found) {
        nds_pc_info_dispose(&info);
        json_object_put(doc);
        return rc;
    }
    load(p, doc, &info, index, chunk, req);
    return check_write_chunk(p, req);
}

/* Adds the requested scale to the stored info (conditional on its generation); NDS_ECONFLICT to
 * retry. */
static int add_scale(precomputed *p, nds_kvstore *kv, json_object *doc, const nds_generation *gen,
                     const nds_pc_request *req) {
    json_object *scale, *scales;
    int rc = nds_pc_new_scale(req, p->url, &scale);
    if (rc) return rc;
    json_object_object_get_ex(doc, "scales", &scales);
    json_object_array_add(scales, scale);
    json_object *copy = NULL;
    if (json_object_deep_copy(doc, &copy, NULL) != 0) return nds_pc_no_memory();
    bool missing = false;
    size_t at;
    rc =
        open_doc(p, copy, req, NDS_OPEN_EXISTING, &missing, &at); /* validates the whole new info */
    if (!rc && missing)
        rc = nds_err(NDS_EINTERNAL, "neuroglancer_precomputed: the new scale is not selected");
    if (!rc) rc = write_info(kv, doc, gen, p->url);
    return rc;
}

/* Creates the whole volume (create-only write of info); NDS_ECONFLICT when another writer was
 * first. */
static int create_volume(precomputed *p, nds_kvstore *kv, const nds_pc_request *req) {
    json_object *doc, *copy = NULL;
    int rc = nds_pc_new_info(req, p->url, &doc);
    if (rc) return rc;
    if (json_object_deep_copy(doc, &copy, NULL) != 0) {
        json_object_put(doc);
        return nds_pc_no_memory();
    }
    bool missing = false;
    size_t at;
    rc = open_doc(p, copy, req, NDS_OPEN_EXISTING, &missing, &at);
    if (!rc && missing)
        rc = nds_err(NDS_ENOTFOUND, "%s: the spec selects a scale the new info does not have",
                     p->doc_name);
    nds_generation absent = {NDS_GEN_ABSENT, {0}};
    if (!rc) rc = write_info(kv, doc, &absent, p->url);
    json_object_put(doc);
    return rc;
}

/* One round of open-or-create; NDS_ECONFLICT when the info changed under us. */
static int open_round(precomputed *p, nds_kvstore *kv, const nds_pc_request *req, unsigned mode) {
    nds_read_result r;
    bool found = false, missing = false;
    size_t at;
    int rc = read_key(kv, "info", p->url, &r, &found);
    if (rc) return rc;
    if (!found) {
        if (!(mode & NDS_OPEN_CREATE))
            return nds_err(NDS_ENOTFOUND,
                           "neuroglancer_precomputed: no volume at %s (info not found)", p->url);
        return create_volume(p, kv, req);
    }
    json_object *doc = NULL, *keep = NULL;
    rc = nds_json_parse((const char *)r.value.data, r.value.len, p->doc_name, &doc);
    if (!rc && json_object_deep_copy(doc, &keep, NULL) != 0) rc = nds_pc_no_memory();
    if (!rc)
        rc = open_doc(p, doc, req, mode, &missing, &at);
    else
        json_object_put(doc);
    if (!rc && !missing && !(mode & NDS_OPEN_EXISTING))
        rc = nds_err(NDS_EEXIST, "neuroglancer_precomputed: scale \"%s\" already exists at %s",
                     p->s.key, p->url);
    if (!rc && missing && !(mode & NDS_OPEN_CREATE))
        rc = nds_err(NDS_ENOTFOUND, "%s: the scale the spec asks for does not exist", p->doc_name);
    if (!rc && missing) rc = add_scale(p, kv, keep, &r.generation, req);
    json_object_put(keep);
    nds_read_result_dispose(&r);
    return rc;
}

static int pc_open(nds_kvstore *kv, const json_object *spec, unsigned mode, void **state,
                   nds_array_meta *meta) {
    *state = NULL;
    precomputed *p = calloc(1, sizeof *p);
    if (!p) return nds_pc_no_memory();
    snprintf(p->url, sizeof p->url, "%s", nds_kvstore_url(kv));
    snprintf(p->doc_name, sizeof p->doc_name, "neuroglancer_precomputed: info of %s", p->url);
    if (!(mode & (NDS_OPEN_EXISTING | NDS_OPEN_CREATE))) mode |= NDS_OPEN_EXISTING;
    nds_pc_request req;
    int rc = nds_pc_request_from_spec(spec, p->url, &req);
    for (int attempt = 0; !rc && attempt < OPEN_ATTEMPTS; attempt++) {
        rc = open_round(p, kv, &req, mode);
        if (rc != NDS_ECONFLICT) break;
        json_object_put(p->doc); /* another writer changed the info between our read and write */
        nds_pc_info_dispose(&p->info);
        p->doc = NULL;
        if (attempt + 1 < OPEN_ATTEMPTS) rc = 0;
    }
    if (rc == NDS_ECONFLICT)
        rc = nds_err(NDS_ECONFLICT, "%s: kept changing while opening", p->doc_name);
    nds_pc_request_dispose(&req);
    if (rc) {
        pc_close(p);
        return rc;
    }
    fill_meta(p, meta);
    *state = p;
    return 0;
}

/* ---- metadata, attributes, description ------------------------------------------------------- */

static int pc_metadata_json(void *state, json_object **out) {
    const precomputed *p = state;
    *out = NULL;
    return json_object_deep_copy(p->doc, out, NULL) == 0 ? 0 : nds_pc_no_memory();
}

static int pc_get_attributes(void *state, nds_kvstore *kv, json_object **out) {
    (void)state;
    (void)kv;
    *out = json_object_new_object();
    return *out ? 0 : nds_pc_no_memory();
}

static int pc_set_attributes(void *state, nds_kvstore *kv, const json_object *attrs) {
    const precomputed *p = state;
    (void)kv;
    (void)attrs;
    return nds_err(NDS_EUNSUPPORTED,
                   "neuroglancer_precomputed: %s: the precomputed format has no user "
                   "attributes",
                   p->url);
}

/* "scale 8_8_8: compressed_segmentation(block=8,8,8), sharded(identity, preshift=9, ...)". */
static void pc_describe_codec(void *state, char *buf, size_t cap) {
    const precomputed *p = state;
    const nds_pc_scale *s = &p->s;
    char enc[96];
    if (s->encoding == NDS_PC_JPEG)
        snprintf(enc, sizeof enc, "jpeg(quality=%d)", s->jpeg_quality);
    else if (s->encoding == NDS_PC_PNG)
        snprintf(enc, sizeof enc, "png(level=%d)", s->png_level);
    else if (s->encoding == NDS_PC_CSEG)
        snprintf(enc, sizeof enc, "compressed_segmentation(block=%llu,%llu,%llu)",
                 (unsigned long long)s->cseg_block[0], (unsigned long long)s->cseg_block[1],
                 (unsigned long long)s->cseg_block[2]);
    else
        snprintf(enc, sizeof enc, "raw");
    const nds_pc_sharding *sh = &s->sharding;
    if (!sh->present) {
        snprintf(buf, cap, "scale %s: %s", s->key, enc);
        return;
    }
    snprintf(buf, cap,
             "scale %s: %s, sharded(hash=%s, preshift_bits=%u, minishard_bits=%u, shard_bits=%u, "
             "minishard_index=%s, data=%s)",
             s->key, enc, sh->murmur ? "murmurhash3_x86_128" : "identity", sh->preshift_bits,
             sh->minishard_bits, sh->shard_bits, sh->index_gzip ? "gzip" : "raw",
             sh->data_gzip ? "gzip" : "raw");
}

/* The open scale, by key, so a printed spec reopens this scale and not scale 0. */
static int pc_spec_json(void *state, json_object *spec) {
    const precomputed *p = state;
    json_object *sm = json_object_new_object();
    if (!sm || json_object_object_add(sm, "key", json_object_new_string(p->s.key)) != 0 ||
        json_object_object_add(spec, "scale_metadata", sm) != 0) {
        json_object_put(sm);
        return nds_err(NDS_ENOMEM, "neuroglancer_precomputed: out of memory printing a spec");
    }
    return 0;
}

const nds_format nds_format_precomputed = {
    .version = NDS_FORMAT_VERSION,
    .name = "neuroglancer_precomputed",
    .url_scheme = "neuroglancer-precomputed",
    .metadata_key = "info",
    .open = pc_open,
    .close = pc_close,
    .chunk_key = pc_chunk_key,
    .parse_chunk_key = pc_parse_chunk_key,
    .decode_chunk = pc_decode_chunk,
    .encode_chunk = pc_encode_chunk,
    .metadata_json = pc_metadata_json,
    .resize = NULL, /* bounds are fixed in info: the core refuses before touching chunks */
    .spec_json = pc_spec_json,
    .get_attributes = pc_get_attributes,
    .set_attributes = pc_set_attributes,
    .create_group = NULL,
    .describe_codec = pc_describe_codec,
    .read_chunk = pc_read_chunk,
    .group_key = pc_group_key,
    .group_read_chunk = pc_group_read_chunk,
    .group_encode = pc_group_encode,
    .update_chunk = pc_update_chunk,
    .group_parse_key = pc_group_parse_key,
    .group_list = pc_group_list,
};
