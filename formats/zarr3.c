/* The zarr v3 format driver: zarr.json metadata (arrays and groups, attributes inside it), chunk
 * keys ("default" and "v2" encodings), the codec pipeline, and sharded arrays.
 *
 * A sharded array (codecs = [sharding_indexed]) tells the core its shard shape as the chunk shape
 * (the unit of storage and of writes: one read-modify-write per shard per write call) and its
 * inner chunk shape as the read chunk shape; reads then go through read_chunk, which fetches the
 * shard index and the inner chunk with byte-range reads (zarr3_shard.c). Metadata parsing and spec
 * handling live in zarr3_metadata.c, codecs in zarr3_codecs.c, consolidated metadata in
 * zarr_consolidated.c. Omits: implicit groups, and the zarr v3 features listed in docs/formats.md.
 *
 * Threading: an instance is immutable after open except through resize / set_attributes, which
 * the core serialises; decode_chunk, encode_chunk and read_chunk run on many threads at once (the
 * index cache has its own lock). Ownership: the instance owns its metadata document, codec chain
 * and index cache; the kvstore is borrowed for each call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zarr3_metadata.h"
#include "zarr3_shard.h"
#include "zarr_consolidated.h"
#include "ndstore/sys/format.h"
#include "ndstore/array.h"
#include "internal/error.h"
#include "internal/format_util.h"
#include "internal/json_util.h"
#include "internal/util.h"

#define META_KEY "zarr.json"
/* Rounds of create-or-open when other processes create and delete the array at the same time. */
#define OPEN_ATTEMPTS 8
/* Rounds of read-modify-conditional-write of zarr.json (resize, attributes) before giving up. */
#define RMW_ATTEMPTS 12

typedef struct zarr3 {
    nds_zarr3_meta m;          /* the parsed zarr.json (with its codec chain) */
    json_object *doc;          /* zarr.json as stored (unknown members included), owned */
    nds_z3_index_cache *cache; /* decoded shard indexes, for read_chunk */
    char url[512];             /* the array's kvstore URL, for messages */
    char doc_name[600];        /* "zarr3: zarr.json of <url>" */
    bool from_snapshot;        /* opened from consolidated metadata: attributes from doc too */
} zarr3;

/* ---- instance -------------------------------------------------------------------------------- */

static void zarr3_reset(zarr3 *z) {
    nds_zarr3_meta_dispose(&z->m);
    json_object_put(z->doc);
    z->doc = NULL;
}

static void zarr3_close(void *state) {
    zarr3 *z = state;
    if (!z) return;
    zarr3_reset(z);
    nds_z3_index_cache_free(z->cache);
    free(z);
}

/* Makes doc (ownership taken, even on error) the instance's metadata. */
static int zarr3_load(zarr3 *z, json_object *doc, const char *name) {
    zarr3_reset(z);
    nds_zarr3_meta m;
    int rc = nds_zarr3_meta_parse(doc, name, &m);
    if (rc) {
        json_object_put(doc);
        return rc;
    }
    z->m = m;
    z->doc = doc;
    return 0;
}

static void zarr3_fill_meta(const zarr3 *z, nds_array_meta *meta) {
    memset(meta, 0, sizeof *meta);
    meta->rank = z->m.rank;
    memcpy(meta->shape, z->m.shape, sizeof meta->shape);
    memcpy(meta->chunk_shape, z->m.chunks, sizeof meta->chunk_shape);
    meta->dtype = z->m.dtype;
    meta->elem_size = z->m.itemsize; /* fixed-width strings; 0 otherwise */
    memcpy(meta->fill_value, z->m.fill, sizeof z->m.fill);
    meta->stored_canonical = nds_z3_chain_is_identity(z->m.chain);
    meta->decode_caps = nds_z3_chain_decode_caps(z->m.chain);
    const nds_z3_shard *s = nds_z3_chain_shard(z->m.chain);
    if (s && s->count > 1 && z->m.rank > 0) /* reads by inner chunk */
        memcpy(meta->read_chunk_shape, s->chunk, sizeof meta->read_chunk_shape);
}

/* Parses stored zarr.json text into a new object (NULL "null" documents are not objects). */
static int parse_doc(const nds_bytes *text, const char *name, json_object **out) {
    int rc = nds_json_parse((const char *)text->data, text->len, name, out);
    if (rc == 0 && !json_object_is_type(*out, json_type_object)) {
        json_object_put(*out);
        *out = NULL;
        rc = nds_err(NDS_EFORMAT, "%s: expected a json object", name);
    }
    return rc;
}

/* ---- open ------------------------------------------------------------------------------------ */

static int open_existing(zarr3 *z, json_object *doc, const json_object *req) {
    int rc = zarr3_load(z, doc, z->doc_name);
    return rc ? rc : nds_zarr3_meta_check(&z->m, z->doc, req, z->url);
}

/* Creates the array with a create-only write; NDS_ECONFLICT when another writer was first. The
 * whole document is built and validated before anything is written. */
static int create_new(zarr3 *z, nds_kvstore *kv, const json_object *req) {
    json_object *doc = NULL;
    int rc = nds_zarr3_request_complete(req, z->url, &doc);
    if (rc == 0) rc = zarr3_load(z, doc, z->doc_name);
    nds_generation absent = {.kind = NDS_GEN_ABSENT};
    if (rc == 0)
        rc = nds_format_write_json(kv, META_KEY, z->doc, &nds_json_style_zarr3, &absent, "zarr3",
                                   z->url);
    return rc;
}

/* What is found at the path decides: an array opens (or is EEXIST for create-only), a group is
 * never an array. */
static int open_found(zarr3 *z, const nds_bytes *text, const json_object *req, unsigned mode) {
    json_object *doc;
    int rc = parse_doc(text, z->doc_name, &doc);
    if (rc) return rc;
    const char *type = nds_zarr3_node_type(doc);
    if (type && type[0] == 'g') {
        json_object_put(doc);
        if (mode & NDS_OPEN_CREATE)
            return nds_err(NDS_EEXIST,
                           "zarr3: cannot create an array at %s: a group exists "
                           "there (zarr.json)",
                           z->url);
        return nds_err(NDS_ENOTFOUND, "zarr3: no array at %s: zarr.json describes a group", z->url);
    }
    if (!(mode & NDS_OPEN_EXISTING)) {
        json_object_put(doc);
        return nds_err(NDS_EEXIST, "zarr3: an array already exists at %s (zarr.json)", z->url);
    }
    return open_existing(z, doc, req);
}

static int open_or_create(zarr3 *z, nds_kvstore *kv, const json_object *req, unsigned mode) {
    if (!(mode & (NDS_OPEN_EXISTING | NDS_OPEN_CREATE))) mode |= NDS_OPEN_EXISTING;
    for (int attempt = 0; attempt < OPEN_ATTEMPTS; attempt++) {
        nds_read_result r;
        bool found = false;
        int rc = nds_format_read_key(kv, META_KEY, "zarr3", z->url, &r, &found);
        if (rc) return rc;
        if (found) {
            rc = open_found(z, &r.value, req, mode);
            nds_read_result_dispose(&r);
            return rc;
        }
        if (!(mode & NDS_OPEN_CREATE))
            return nds_err(NDS_ENOTFOUND, "zarr3: no array at %s (zarr.json not found)", z->url);
        rc = create_new(z, kv, req);
        if (rc != NDS_ECONFLICT) return rc;
        zarr3_reset(z); /* another writer created it first: open what it wrote */
    }
    return nds_err(NDS_ECONFLICT,
                   "zarr3: zarr.json of %s kept appearing and disappearing while "
                   "opening",
                   z->url);
}

/* With "consolidated": true, opens from the consolidated copy (zarr_consolidated.h); *done stays
 * false when there is none for this array, or its entry does not load or match the spec (stale):
 * the array's own zarr.json decides then. */
static int open_consolidated(zarr3 *z, nds_kvstore *kv, const json_object *spec,
                             const json_object *req, unsigned mode, bool *done) {
    nds_zc_entry found;
    char name[sizeof z->doc_name];
    int rc = nds_zc_open_entry(kv, spec, mode, NDS_ZC_V3, &found, name, sizeof name);
    json_object *doc = found.doc;
    if (rc || !doc) return rc;
    if (nds_zarr3_node_type(doc) && nds_zarr3_node_type(doc)[0] == 'a') {
        rc = zarr3_load(z, doc, name);
        if (rc == 0) rc = nds_zarr3_meta_check(&z->m, z->doc, req, z->url);
    } else {
        json_object_put(doc); /* a group: the own key gives the error */
        rc = NDS_ENOTFOUND;
    }
    if (rc) {
        zarr3_reset(z);
        nds_error_clear();
        return 0;
    }
    z->from_snapshot = true;
    *done = true;
    return 0;
}

static int zarr3_open(nds_kvstore *kv, const json_object *spec, unsigned mode, void **state,
                      nds_array_meta *meta) {
    *state = NULL;
    zarr3 *z = calloc(1, sizeof *z);
    if (!z) return nds_err(NDS_ENOMEM, "zarr3: out of memory");
    snprintf(z->url, sizeof z->url, "%s", nds_kvstore_url(kv));
    snprintf(z->doc_name, sizeof z->doc_name, "zarr3: zarr.json of %s", z->url);
    json_object *req = NULL;
    int rc = nds_z3_index_cache_new(&z->cache);
    bool done = false;
    if (rc == 0) rc = nds_zarr3_request_from_spec(spec, z->url, &req);
    if (rc == 0) rc = open_consolidated(z, kv, spec, req, mode, &done);
    if (rc == 0 && !done) rc = open_or_create(z, kv, req, mode);
    json_object_put(req);
    if (rc) {
        zarr3_close(z);
        return rc;
    }
    zarr3_fill_meta(z, meta);
    *state = z;
    return 0;
}

/* ---- chunk keys ------------------------------------------------------------------------------ */

/* default: "c" then "/i" per dimension ("c" alone at rank 0); v2: indices joined ("0" at rank 0).
 */
static int zarr3_chunk_key(void *state, const uint64_t *cell, char *buf, size_t cap) {
    const zarr3 *z = state;
    return nds_chunk_key_format(buf, cap, z->m.v2_keys ? "" : "c", z->m.separator, cell, z->m.rank);
}

static int zarr3_parse_chunk_key(void *state, const char *key, uint64_t *cell) {
    const zarr3 *z = state;
    uint64_t grid[NDS_MAX_RANK];
    for (size_t d = 0; d < z->m.rank; d++) grid[d] = nds_ceil_div(z->m.shape[d], z->m.chunks[d]);
    return nds_chunk_key_parse(key, z->m.v2_keys ? "" : "c", z->m.separator, grid, z->m.rank, cell);
}

/* ---- chunks ---------------------------------------------------------------------------------- */

/* The whole chunk from its stored bytes, in memory. */
static int decode_whole(void *state, const uint64_t *cell, const uint8_t *data, size_t len,
                        uint8_t *out) {
    const zarr3 *z = state;
    (void)cell;
    return nds_z3_chain_decode(z->m.chain, data, len, out);
}

/* A part, a reader and pieces by the chain's one codec where its decoded bytes are the chunk's
 * (blosc, zstd); the rest (and whole decodes, whose size must be exactly the chunk's) whole. */
static int zarr3_decode_chunk(void *state, const uint64_t *cell, nds_decode_request *rq) {
    const zarr3 *z = state;
    bool whole = !rq->reader && !rq->sink && rq->end == SIZE_MAX;
    if (whole || !nds_z3_chain_decodes_parts(z->m.chain))
        return nds_format_decode_fallback(state, cell, rq, decode_whole);
    return nds_z3_chain_decode_request(z->m.chain, rq);
}

static int zarr3_encode_chunk(void *state, const uint64_t *cell, const uint8_t *chunk,
                              nds_buf *out) {
    const zarr3 *z = state;
    (void)cell;
    return nds_z3_chain_encode(z->m.chain, chunk, out);
}

/* string / bytes arrays: the codecs after vlen-utf8 / vlen-bytes (the core does the lists). */
static int zarr3_decode_vlen(void *state, const uint64_t *cell, const uint8_t *data, size_t len,
                             nds_buf *out) {
    const zarr3 *z = state;
    (void)cell;
    return nds_z3_chain_decode_vlen(z->m.chain, data, len, out);
}

static int zarr3_encode_vlen(void *state, const uint64_t *cell, const uint8_t *list, size_t len,
                             nds_buf *out) {
    const zarr3 *z = state;
    (void)cell;
    return nds_z3_chain_encode_vlen(z->m.chain, list, len, out);
}

static int zarr3_update_chunk(void *state, nds_update_request *u) {
    const zarr3 *z = state;
    return nds_z3_chain_update(z->m.chain, u);
}

/* cell is in inner-chunk units: the shard holding it, and its place (C order) in the shard. */
static int zarr3_read_chunk(void *state, nds_kvstore *kv, const uint64_t *cell, uint8_t *out,
                            int *present) {
    zarr3 *z = state;
    const nds_z3_shard *s = nds_z3_chain_shard(z->m.chain);
    uint64_t shard_cell[NDS_MAX_RANK], i = 0;
    char key[512];
    *present = 0;
    if (!s) return nds_err(NDS_EINTERNAL, "zarr3: %s is not sharded", z->url);
    for (size_t d = 0; d < z->m.rank; d++) {
        shard_cell[d] = cell[d] / s->grid[d];
        i = i * s->grid[d] + cell[d] % s->grid[d];
    }
    int rc = zarr3_chunk_key(z, shard_cell, key, sizeof key);
    return rc ? rc : nds_z3_shard_read(s, z->cache, kv, key, i, out, present);
}

/* ---- metadata, resize, attributes ------------------------------------------------------------ */

static int zarr3_metadata_json(void *state, json_object **out) {
    const zarr3 *z = state;
    *out = NULL;
    if (json_object_deep_copy(z->doc, out, NULL) != 0)
        return nds_err(NDS_ENOMEM, "zarr3: out of memory");
    return 0;
}

/* 1 when a and b are the same document apart from "shape" and "attributes". */
static bool same_but(const json_object *a, const json_object *b) {
    bool eq = json_object_object_length(a) == json_object_object_length(b);
    json_object_object_foreach((json_object *)a, key, val) {
        json_object *other = NULL;
        if (!eq) break;
        if (strcmp(key, "shape") == 0 || strcmp(key, "attributes") == 0) continue;
        eq = json_object_object_get_ex(b, key, &other) && json_object_equal(val, other);
    }
    return eq;
}

/* One change of the stored document: read it, check nobody changed more than attributes since
 * we opened, let edit change the copy, re-validate, write it conditionally. NDS_ECONFLICT to
 * retry. On success z->doc and z->m are the new document. */
typedef int (*edit_fn)(json_object *doc, const void *arg);

static int rmw_once(zarr3 *z, nds_kvstore *kv, edit_fn edit, const void *arg) {
    nds_read_result r;
    bool found = false;
    int rc = nds_format_read_key(kv, META_KEY, "zarr3", z->url, &r, &found);
    if (rc) return rc;
    if (!found) return nds_err(NDS_ENOTFOUND, "%s: disappeared", z->doc_name);
    json_object *doc = NULL;
    nds_zarr3_meta next = {0};
    rc = parse_doc(&r.value, z->doc_name, &doc);
    if (rc == 0 && !same_but(doc, z->doc))
        rc = nds_err(NDS_EMISMATCH,
                     "%s: changed by another writer since it was opened; reopen "
                     "the array",
                     z->doc_name);
    if (rc == 0) rc = edit(doc, arg);
    if (rc == 0) rc = nds_zarr3_meta_parse(doc, z->doc_name, &next);
    if (rc == 0)
        rc = nds_format_write_json(kv, META_KEY, doc, &nds_json_style_zarr3, &r.generation, "zarr3",
                                   z->url);
    if (rc == 0) {
        zarr3_reset(z);
        z->m = next;
        z->doc = doc;
    } else {
        nds_zarr3_meta_dispose(&next);
        json_object_put(doc);
    }
    nds_read_result_dispose(&r);
    return rc;
}

static int rmw(zarr3 *z, nds_kvstore *kv, edit_fn edit, const void *arg, const char *what) {
    int rc = NDS_ECONFLICT;
    for (int attempt = 0; attempt < RMW_ATTEMPTS && rc == NDS_ECONFLICT; attempt++) {
        if (attempt)
            nds_sleep_ns((UINT64_C(1) << (attempt < 8 ? attempt : 8)) * 1000000 +
                         nds_random_u64() % 1000000);
        rc = rmw_once(z, kv, edit, arg);
    }
    if (rc == NDS_ECONFLICT)
        return nds_err(NDS_ECONFLICT, "%s: kept changing during %s; gave up after %d attempts",
                       z->doc_name, what, RMW_ATTEMPTS);
    return rc;
}

typedef struct shape_arg {
    size_t rank;
    const uint64_t *shape;
} shape_arg;

static int set_shape(json_object *doc, const void *arg) {
    const shape_arg *a = arg;
    json_object *shape = json_object_new_array();
    if (!shape) return nds_err(NDS_ENOMEM, "zarr3: out of memory");
    for (size_t d = 0; d < a->rank; d++)
        json_object_array_add(shape, json_object_new_uint64(a->shape[d]));
    json_object_object_add(doc, "shape", shape);
    return 0;
}

static int zarr3_resize(void *state, nds_kvstore *kv, const uint64_t *new_shape,
                        nds_array_meta *meta) {
    zarr3 *z = state;
    shape_arg a = {z->m.rank, new_shape};
    int rc = rmw(z, kv, set_shape, &a, "resize");
    if (rc == 0) zarr3_fill_meta(z, meta);
    return rc;
}

static int zarr3_get_attributes(void *state, nds_kvstore *kv, json_object **out) {
    const zarr3 *z = state;
    nds_read_result r;
    bool found = false;
    json_object *doc = NULL, *attrs = NULL;
    *out = NULL;
    int rc = 0;
    if (z->from_snapshot) { /* a consolidated snapshot: its copy, no read (a deep copy: readers
                             * share z->doc across threads) */
        if (json_object_deep_copy(z->doc, &doc, NULL) != 0)
            return nds_err(NDS_ENOMEM, "zarr3: out of memory");
    } else {
        rc = nds_format_read_key(kv, META_KEY, "zarr3", z->url, &r,
                                 &found); /* fresh: others may have changed them */
        if (rc) return rc;
        if (!found) return nds_err(NDS_ENOTFOUND, "%s: disappeared", z->doc_name);
        rc = parse_doc(&r.value, z->doc_name, &doc);
        nds_read_result_dispose(&r);
        if (rc) return rc;
    }
    if (json_object_object_get_ex(doc, "attributes", &attrs) &&
        !json_object_is_type(attrs, json_type_object))
        rc = nds_err(NDS_EFORMAT, "%s: \"attributes\" must be an object", z->doc_name);
    else if (attrs)
        *out = json_object_get(attrs);
    else
        *out = json_object_new_object();
    json_object_put(doc);
    return rc ? rc : (*out ? 0 : nds_err(NDS_ENOMEM, "zarr3: out of memory"));
}

static int set_attrs(json_object *doc, const void *arg) {
    json_object *copy = NULL;
    if (json_object_deep_copy((json_object *)arg, &copy, NULL) != 0)
        return nds_err(NDS_ENOMEM, "zarr3: out of memory");
    json_object_object_add(doc, "attributes", copy);
    return 0;
}

static int zarr3_set_attributes(void *state, nds_kvstore *kv, const json_object *attrs) {
    zarr3 *z = state;
    if (!json_object_is_type(attrs, json_type_object))
        return nds_err(NDS_EINVAL, "zarr3: attributes of %s must be a json object", z->url);
    return rmw(z, kv, set_attrs, attrs, "setting attributes");
}

static int zarr3_consolidate(nds_kvstore *kv, size_t *count) {
    return nds_zc_consolidate(kv, NDS_ZC_V3, count);
}

/* ---- groups, description --------------------------------------------------------------------- */

static int zarr3_create_group(nds_kvstore *kv) {
    const char *url = nds_kvstore_url(kv);
    nds_read_result r;
    bool found = false;
    int rc = nds_format_read_key(kv, META_KEY, "zarr3", url, &r, &found);
    if (rc) return rc;
    if (found) {
        json_object *doc = NULL;
        char name[600];
        snprintf(name, sizeof name, "zarr3: zarr.json of %s", url);
        rc = parse_doc(&r.value, name, &doc);
        const char *type = rc ? NULL : nds_zarr3_node_type(doc);
        json_object_put(doc);
        nds_read_result_dispose(&r);
        if (rc || (type && type[0] == 'g')) return rc; /* an existing group is left as it is */
        return nds_err(NDS_EEXIST,
                       "zarr3: cannot create a group at %s: an array exists there "
                       "(zarr.json)",
                       url);
    }
    json_object *doc = json_object_new_object();
    json_object_object_add(doc, "zarr_format", json_object_new_int(3));
    json_object_object_add(doc, "node_type", json_object_new_string("group"));
    json_object_object_add(doc, "attributes", json_object_new_object());
    nds_generation absent = {.kind = NDS_GEN_ABSENT};
    rc = nds_format_write_json(kv, META_KEY, doc, &nds_json_style_zarr3, &absent, "zarr3", url);
    json_object_put(doc);
    return rc == NDS_ECONFLICT ? 0 : rc; /* created meanwhile by someone else */
}

static void zarr3_describe_codec(void *state, char *buf, size_t cap) {
    const zarr3 *z = state;
    nds_z3_chain_describe(z->m.chain, buf, cap);
}

const nds_format nds_format_zarr3 = {
    .version = NDS_FORMAT_VERSION,
    .name = "zarr3",
    .url_scheme = "zarr3",
    .metadata_key = META_KEY,
    .open = zarr3_open,
    .close = zarr3_close,
    .chunk_key = zarr3_chunk_key,
    .parse_chunk_key = zarr3_parse_chunk_key,
    .decode_chunk = zarr3_decode_chunk,
    .update_chunk = zarr3_update_chunk,
    .encode_chunk = zarr3_encode_chunk,
    .metadata_json = zarr3_metadata_json,
    .resize = zarr3_resize,
    .get_attributes = zarr3_get_attributes,
    .set_attributes = zarr3_set_attributes,
    .create_group = zarr3_create_group,
    .describe_codec = zarr3_describe_codec,
    .read_chunk = zarr3_read_chunk,
    .consolidate = zarr3_consolidate,
    .decode_vlen = zarr3_decode_vlen,
    .encode_vlen = zarr3_encode_vlen,
};
