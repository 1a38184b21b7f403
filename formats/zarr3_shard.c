/* The zarr v3 sharding_indexed codec: configuration parsing, whole-shard decode and encode, the
 * shard index (decode and validation), and reads of one inner chunk straight from a kvstore.
 *
 * Implements sharding_indexed v1.0 of the zarr v3 specification: inner chunk_shape dividing the
 * shard shape, nested "codecs" (sharding inside sharding included, up to NDS_Z3_MAX_DEPTH),
 * fixed-size "index_codecs" (bytes, transpose, crc32c), index_location "start" or "end", empty
 * inner chunks as offset = nbytes = 2^64-1. Validation of an index is complete: every entry lies
 * inside the shard and clear of the index, and no two overlap (identical ranges excepted), so a
 * hostile index can neither crash us nor make us read or allocate beyond the shard. A write that
 * changes part of a shard (nds_z3_shard_update) decodes only the inner chunks it changes in part
 * and encodes only those it reaches; the others keep their stored bytes. Omits: partial reads
 * when codecs follow sharding_indexed in the chain.
 *
 * Layering: below the codec chain (zarr3_codecs.c), whose operations it gets as callbacks
 * (nds_z3_chain_ops) since chains and sharding codecs nest in each other; it calls nothing there.
 *
 * Threading: a parsed codec is immutable; the index cache has one mutex, held only to look up,
 * store or drop an entry (never across I/O or decoding). Ownership: the codec owns its nested
 * chains; the cache owns its keys and decoded indexes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zarr3_shard.h"
#include "internal/dtype_util.h"
#include "internal/error.h"
#include "internal/json_util.h"
#include "internal/strided.h"
#include "internal/util.h"

/* Shards whose decoded index is cached (per array). */
#define CACHE_SLOTS 16
/* Only indexes up to this size are cached (256 Ki inner chunks). */
#define CACHE_MAX_BYTES ((size_t)4 << 20)
/* Rounds of index + chunk reads when the shard keeps changing in between. */
#define READ_ATTEMPTS 16
/* An empty inner chunk: offset and nbytes both 2^64-1. */
#define EMPTY UINT64_MAX

/* ---- configuration --------------------------------------------------------------------------- */

static int shard_limits(const json_object *config, const nds_z3_array *arr, const char *dp,
                        int depth) {
    static const char *const allowed[] = {"chunk_shape", "codecs", "index_codecs",
                                          "index_location"};
    if (!json_object_is_type(config, json_type_object))
        return nds_err(NDS_EFORMAT, "%s: sharding_indexed needs a \"configuration\" object", dp);
    json_object_object_foreach((json_object *)config, key, val) {
        (void)val;
        bool ok = false;
        for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
            ok = ok || strcmp(key, allowed[i]) == 0;
        if (!ok)
            return nds_err(NDS_EFORMAT, "%s: unknown configuration member \"%.40s\"", dp, key);
    }
    if (depth + 1 > NDS_Z3_MAX_DEPTH)
        return nds_err(NDS_ELIMIT, "%s: sharding nested more than %d levels deep", dp,
                       NDS_Z3_MAX_DEPTH);
    if (arr->rank >= NDS_MAX_RANK)
        return nds_err(NDS_ELIMIT, "%s: sharding supports at most %d dimensions", dp,
                       NDS_MAX_RANK - 1);
    return 0;
}

/* "chunk_shape": the inner chunk, dividing the shard in every dimension. */
static int parse_grid(nds_z3_shard *s, const json_object *config, const char *dp) {
    size_t n = 0;
    int rc = nds_z3_u64_list(config, "chunk_shape", 1, dp, s->chunk, &n);
    if (rc) return rc;
    if (n != s->shard.rank)
        return nds_err(NDS_EFORMAT, "%s: \"chunk_shape\" has %zu entries but the shard has %zu "
                                    "dimensions", dp, n, s->shard.rank);
    s->count = 1;
    for (size_t d = 0; d < n; d++) {
        if (s->shard.shape[d] % s->chunk[d] != 0)
            return nds_err(NDS_EFORMAT,
                           "%s: \"chunk_shape\"[%zu] = %llu does not divide the shard shape %llu",
                           dp, d, (unsigned long long)s->chunk[d],
                           (unsigned long long)s->shard.shape[d]);
        s->grid[d] = s->shard.shape[d] / s->chunk[d];
        s->count *= s->grid[d]; /* <= the shard's element count, which fits */
    }
    if (s->count > NDS_Z3_MAX_SHARD_CHUNKS)
        return nds_err(NDS_ELIMIT, "%s: %llu inner chunks per shard; ndstore supports at most %llu",
                       dp, (unsigned long long)s->count,
                       (unsigned long long)NDS_Z3_MAX_SHARD_CHUNKS);
    s->inner_nbytes = s->elem;
    for (size_t d = 0; d < n; d++) s->inner_nbytes *= (size_t)s->chunk[d];
    return 0;
}

/* "codecs" and "index_codecs": the nested chains. */
static int parse_chains(nds_z3_shard *s, const json_object *config, const char *doc,
                        const char *where, const char *dp, int depth) {
    json_object *codecs, *index;
    char sub[320];
    if (!json_object_object_get_ex(config, "codecs", &codecs))
        return nds_err(NDS_EFORMAT, "%s: missing member \"codecs\"", dp);
    if (!json_object_object_get_ex(config, "index_codecs", &index))
        return nds_err(NDS_EFORMAT, "%s: missing member \"index_codecs\"", dp);
    nds_z3_array inner = s->shard, ix = {.rank = s->shard.rank + 1, .dtype = NDS_UINT64};
    memcpy(inner.shape, s->chunk, sizeof inner.shape);
    memcpy(ix.shape, s->grid, s->shard.rank * sizeof ix.shape[0]);
    ix.shape[s->shard.rank] = 2;
    NDS_Z3_PRINT(sub, "%s.codecs", where);
    int rc = s->ops->parse(codecs, &inner, doc, sub, depth + 1, &s->inner);
    NDS_Z3_PRINT(sub, "%s.index_codecs", where);
    if (!rc) rc = s->ops->parse(index, &ix, doc, sub, depth + 1, &s->index);
    uint64_t size = 0;
    if (!rc && !s->ops->fixed_size(s->index, &size))
        rc = nds_err(NDS_EFORMAT, "%s: \"index_codecs\" must have a fixed encoded size (only "
                                  "bytes, transpose and crc32c)", dp);
    s->index_nbytes = (size_t)size;
    return rc;
}

int nds_z3_shard_parse(const json_object *config, const nds_z3_array *arr, const char *doc,
                       const char *where, int depth, const nds_z3_chain_ops *ops,
                       nds_z3_shard **out) {
    char dp[960];
    NDS_Z3_PRINT(dp, "%s: %s", doc, where);
    *out = NULL;
    int rc = shard_limits(config, arr, dp, depth);
    if (rc) return rc;
    nds_z3_shard *s = calloc(1, sizeof *s);
    if (!s) return nds_err(NDS_ENOMEM, "%s: out of memory", dp);
    s->ops = ops;
    s->shard = *arr;
    s->elem = nds_z3_elem_size(arr); /* fixed-width strings: the array's width */
    const char *loc = "end";
    rc = parse_grid(s, config, dp);
    if (!rc) rc = parse_chains(s, config, doc, where, dp, depth);
    if (!rc) rc = nds_json_get_string(config, "index_location", true, dp, &loc);
    if (!rc && strcmp(loc, "start") != 0 && strcmp(loc, "end") != 0)
        rc = nds_err(NDS_EFORMAT, "%s: \"index_location\" must be \"start\" or \"end\"", dp);
    s->index_at_start = loc[0] == 's';
    if (rc) {
        nds_z3_shard_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void nds_z3_shard_free(nds_z3_shard *s) {
    if (!s) return;
    if (s->ops) {
        s->ops->free(s->inner);
        s->ops->free(s->index);
    }
    free(s);
}

int nds_z3_shard_config_json(const nds_z3_shard *s, json_object **out) {
    json_object *cfg = json_object_new_object(), *shape = json_object_new_array();
    json_object *codecs = NULL, *index = NULL;
    int rc = cfg && shape ? 0 : nds_err(NDS_ENOMEM, "zarr3: out of memory");
    for (size_t d = 0; !rc && d < s->shard.rank; d++)
        json_object_array_add(shape, json_object_new_uint64(s->chunk[d]));
    if (!rc) rc = s->ops->to_json(s->inner, &codecs);
    if (!rc) rc = s->ops->to_json(s->index, &index);
    if (rc) {
        json_object_put(cfg);
        json_object_put(shape);
        json_object_put(codecs);
        return rc;
    }
    json_object_object_add(cfg, "chunk_shape", shape);
    json_object_object_add(cfg, "codecs", codecs);
    json_object_object_add(cfg, "index_codecs", index);
    json_object_object_add(cfg, "index_location",
                           json_object_new_string(s->index_at_start ? "start" : "end"));
    *out = cfg;
    return 0;
}

/* ---- inner chunk geometry -------------------------------------------------------------------- */

static void inner_coords(const nds_z3_shard *s, uint64_t i, uint64_t *coord) {
    for (size_t d = s->shard.rank; d-- > 0;) {
        coord[d] = i % s->grid[d];
        i /= s->grid[d];
    }
}

void nds_z3_shard_inner_name(const nds_z3_shard *s, uint64_t i, char *buf, size_t cap) {
    uint64_t coord[NDS_MAX_RANK];
    size_t used = 0;
    inner_coords(s, i, coord);
    if (cap == 0) return;
    used = (size_t)snprintf(buf, cap, "[");
    for (size_t d = 0; d < s->shard.rank && used < cap; d++) {
        int n = snprintf(buf + used, cap - used, "%s%llu", d ? ", " : "",
                         (unsigned long long)coord[d]);
        used += n > 0 ? (size_t)n : 0;
    }
    if (used < cap) snprintf(buf + used, cap - used, "]");
}

/* Byte offset of inner chunk i's first element in the canonical shard. */
static size_t inner_offset(const nds_z3_shard *s, uint64_t i, const int64_t *shard_stride) {
    uint64_t coord[NDS_MAX_RANK];
    size_t off = 0;
    inner_coords(s, i, coord);
    for (size_t d = 0; d < s->shard.rank; d++)
        off += (size_t)(coord[d] * s->chunk[d]) * (size_t)shard_stride[d];
    return off;
}

/* ---- index ----------------------------------------------------------------------------------- */

typedef struct range {
    uint64_t off, end, i;
} range;

static int cmp_range(const void *a, const void *b) {
    const range *x = a, *y = b;
    if (x->off != y->off) return x->off < y->off ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* Checks entry i against the shard's size and the index's place. */
static int check_entry(const nds_z3_shard *s, uint64_t i, uint64_t off, uint64_t nb,
                       uint64_t total) {
    char name[200];
    uint64_t end;
    if (off == EMPTY && nb == EMPTY) return 0;
    nds_z3_shard_inner_name(s, i, name, sizeof name);
    if (!nds_add_u64(off, nb, &end) || end > total)
        return nds_err(NDS_ECORRUPT,
                       "inner chunk %s (offset %llu, nbytes %llu) lies past the end of the shard "
                       "(%llu bytes)",
                       name, (unsigned long long)off, (unsigned long long)nb,
                       (unsigned long long)total);
    uint64_t ix0 = s->index_at_start ? 0 : total - s->index_nbytes;
    uint64_t ix1 = ix0 + s->index_nbytes;
    if (nb > 0 && off < ix1 && end > ix0)
        return nds_err(NDS_ECORRUPT,
                       "inner chunk %s (offset %llu, nbytes %llu) overlaps the shard index "
                       "(bytes %llu to %llu)",
                       name, (unsigned long long)off, (unsigned long long)nb,
                       (unsigned long long)ix0, (unsigned long long)ix1);
    return 0;
}

/* No two non-empty ranges overlap, unless they are the very same range. */
static int check_overlaps(const nds_z3_shard *s, const uint64_t *e) {
    range *r = malloc((size_t)s->count * sizeof *r);
    if (!r) return nds_err(NDS_ENOMEM, "zarr3: out of memory checking a shard index");
    size_t n = 0;
    for (uint64_t i = 0; i < s->count; i++)
        if (e[2 * i] != EMPTY && e[2 * i + 1] > 0)
            r[n++] = (range){e[2 * i], e[2 * i] + e[2 * i + 1], i};
    qsort(r, n, sizeof *r, cmp_range);
    int rc = 0;
    uint64_t max_end = 0;
    for (size_t k = 0; k < n && !rc; k++) {
        bool same = k > 0 && r[k].off == r[k - 1].off && r[k].end == r[k - 1].end;
        if (k > 0 && !same && r[k].off < max_end) {
            char a[200], b[200];
            nds_z3_shard_inner_name(s, r[k - 1].i, a, sizeof a);
            nds_z3_shard_inner_name(s, r[k].i, b, sizeof b);
            rc = nds_err(NDS_ECORRUPT, "inner chunks %s and %s overlap (bytes %llu to %llu and "
                                       "%llu to %llu)", a, b, (unsigned long long)r[k - 1].off,
                         (unsigned long long)r[k - 1].end, (unsigned long long)r[k].off,
                         (unsigned long long)r[k].end);
        }
        max_end = nds_max_u64(max_end, r[k].end);
    }
    free(r);
    return rc;
}

int nds_z3_shard_index_parse(const nds_z3_shard *s, const uint8_t *bytes, size_t len,
                             uint64_t total, uint64_t *entries) {
    if (len != s->index_nbytes || total < s->index_nbytes)
        return nds_err(NDS_ECORRUPT, "shard of %llu bytes is too short for its %zu-byte index",
                       (unsigned long long)total, s->index_nbytes);
    int rc = s->ops->decode(s->index, bytes, len, (uint8_t *)entries);
    if (rc) return nds_err_prefix(rc, "shard index");
    for (uint64_t i = 0; i < s->count && !rc; i++)
        rc = check_entry(s, i, entries[2 * i], entries[2 * i + 1], total);
    return rc ? rc : check_overlaps(s, entries);
}

/* A new array for a decoded index, or NULL with NDS_ENOMEM set. */
static uint64_t *entries_new(const nds_z3_shard *s) {
    uint64_t *e = malloc((size_t)s->count * 2 * sizeof *e);
    if (!e) nds_err(NDS_ENOMEM, "zarr3: out of memory for a shard index of %llu entries",
                    (unsigned long long)s->count);
    return e;
}

/* What a write of a box does to inner chunk i: leaves it alone (the box's bounds do not reach
 * it), overwrites every element of it, or changes part of it (its old elements are needed). */
typedef enum inner_fate { INNER_KEPT, INNER_COVERED, INNER_PARTIAL } inner_fate;

static inner_fate fate_of(const nds_z3_shard *s, uint64_t i, const nds_box *box) {
    uint64_t coord[NDS_MAX_RANK];
    bool covered = true;
    inner_coords(s, i, coord);
    for (size_t d = 0; d < s->shard.rank; d++) {
        uint64_t lo = coord[d] * s->chunk[d], hi = lo + s->chunk[d];
        if (box->stop[d] <= lo || box->start[d] >= hi) return INNER_KEPT;
        if (box->step[d] != 1 || box->start[d] > lo || box->stop[d] < hi) covered = false;
    }
    return covered ? INNER_COVERED : INNER_PARTIAL;
}

/* ---- whole shards ---------------------------------------------------------------------------- */

/* Decodes inner chunk i (bytes p[0..nb)) into the shard at dst. */
static int decode_one(const nds_z3_shard *s, uint64_t i, const uint8_t *p, size_t nb,
                      uint8_t *inner, uint8_t *dst, const int64_t *shard_stride) {
    int64_t inner_stride[NDS_MAX_RANK];
    int rc = s->ops->decode(s->inner, p, nb, inner);
    if (rc) {
        char name[200];
        nds_z3_shard_inner_name(s, i, name, sizeof name);
        return nds_err_prefix(rc, "inner chunk %s", name);
    }
    nds_c_strides(s->shard.rank, s->chunk, s->elem, inner_stride);
    nds_strided_copy(s->shard.rank, s->chunk, s->elem, dst, shard_stride, inner, inner_stride);
    return 0;
}

/* The decoded, validated index of a whole stored shard in[0..len) into *e (malloc'd). */
static int read_shard_index(const nds_z3_shard *s, const uint8_t *in, size_t len, uint64_t **e) {
    if (len < s->index_nbytes)
        return nds_err(NDS_ECORRUPT, "shard of %zu bytes is too short for its %zu-byte index",
                       len, s->index_nbytes);
    if (!(*e = entries_new(s))) return NDS_ENOMEM;
    const uint8_t *ix = s->index_at_start ? in : in + len - s->index_nbytes;
    int rc = nds_z3_shard_index_parse(s, ix, s->index_nbytes, len, *e);
    if (rc) {
        free(*e);
        *e = NULL;
    }
    return rc;
}

/* Decodes the inner chunks of a stored shard (in, e its index; e NULL: none stored, all fill) into
 * their places in the canonical shard out: every one, or with changed only those it changes in
 * part. */
static int decode_inner_chunks(const nds_z3_shard *s, const uint8_t *in, const uint64_t *e,
                               const nds_box *changed, uint8_t *out) {
    int64_t stride[NDS_MAX_RANK];
    nds_c_strides(s->shard.rank, s->shard.shape, s->elem, stride);
    uint8_t *inner = malloc(s->inner_nbytes);
    int rc = inner ? 0 : nds_err(NDS_ENOMEM, "zarr3: out of memory decoding a shard");
    for (uint64_t i = 0; !rc && i < s->count; i++) {
        if (changed && fate_of(s, i, changed) != INNER_PARTIAL) continue;
        uint8_t *dst = out + inner_offset(s, i, stride);
        if (!e || e[2 * i] == EMPTY)
            nds_strided_fill(s->shard.rank, s->chunk, s->elem, dst, stride, s->shard.fill);
        else
            rc = decode_one(s, i, in + e[2 * i], (size_t)e[2 * i + 1], inner, dst, stride);
    }
    free(inner);
    return rc;
}

int nds_z3_shard_decode(const nds_z3_shard *s, const uint8_t *in, size_t len, uint8_t *out) {
    uint64_t *e = NULL;
    int rc = read_shard_index(s, in, len, &e);
    if (!rc) rc = decode_inner_chunks(s, in, e, NULL, out);
    free(e);
    return rc;
}

/* Appends the encoding of inner chunk i (unless it is all fill) and sets its index entry. */
static int encode_one(const nds_z3_shard *s, uint64_t i, const uint8_t *chunk, uint8_t *inner,
                      nds_buf *tmp, nds_buf *out, uint64_t *e) {
    int64_t shard_stride[NDS_MAX_RANK], inner_stride[NDS_MAX_RANK];
    nds_c_strides(s->shard.rank, s->shard.shape, s->elem, shard_stride);
    nds_c_strides(s->shard.rank, s->chunk, s->elem, inner_stride);
    nds_strided_copy(s->shard.rank, s->chunk, s->elem, inner, inner_stride,
                     chunk + inner_offset(s, i, shard_stride), shard_stride);
    e[2 * i] = e[2 * i + 1] = EMPTY;
    if (nds_all_equal(inner, s->inner_nbytes / s->elem, s->elem, s->shard.fill)) return 0;
    tmp->len = 0;
    int rc = s->ops->encode(s->inner, inner, tmp);
    if (rc == 0) {
        e[2 * i] = out->len;
        e[2 * i + 1] = tmp->len;
        rc = nds_buf_append(out, tmp->data, tmp->len);
    }
    return rc;
}

/* Encodes the index entries and puts them in front of or after the chunks. */
static int put_index(const nds_z3_shard *s, const uint64_t *e, nds_buf *out) {
    nds_buf ib = {0};
    int rc = s->ops->encode(s->index, (const uint8_t *)e, &ib);
    if (rc == 0 && ib.len != s->index_nbytes)
        rc = nds_err(NDS_EINTERNAL, "zarr3: shard index encoded to %zu bytes, expected %zu",
                     ib.len, s->index_nbytes);
    if (rc == 0 && s->index_at_start) memcpy(out->data, ib.data, ib.len);
    else if (rc == 0) rc = nds_buf_append(out, ib.data, ib.len);
    nds_buf_dispose(&ib);
    return rc;
}

/* Appends inner chunk i's stored bytes from the old shard (old_e its decoded index; NULL when
 * there is no old shard) unchanged and sets its index entry. */
static int keep_one(uint64_t i, const uint8_t *old, const uint64_t *old_e, nds_buf *out,
                    uint64_t *e) {
    e[2 * i] = e[2 * i + 1] = EMPTY;
    if (!old_e || old_e[2 * i] == EMPTY) return 0;
    e[2 * i] = out->len;
    e[2 * i + 1] = old_e[2 * i + 1];
    return nds_buf_append(out, old + old_e[2 * i], (size_t)old_e[2 * i + 1]);
}

/* Encodes a shard; with changed, the inner chunks it does not reach keep their bytes from old
 * (old_e its decoded index, NULL when there is none). *stored: the inner chunks stored. */
static int encode_shard(const nds_z3_shard *s, const uint8_t *chunk, const uint8_t *old,
                        const uint64_t *old_e, const nds_box *changed, nds_buf *out,
                        uint64_t *stored) {
    nds_buf tmp = {0};
    uint64_t *e = entries_new(s);
    uint8_t *inner = e ? malloc(s->inner_nbytes) : NULL;
    int rc = inner ? 0 : nds_err(NDS_ENOMEM, "zarr3: out of memory encoding a shard");
    out->len = 0;
    if (!rc && s->index_at_start) { /* room for the index, filled in last */
        rc = nds_buf_reserve(out, s->index_nbytes);
        if (!rc) memset(out->data, 0, s->index_nbytes);
        out->len = s->index_nbytes;
    }
    *stored = 0;
    for (uint64_t i = 0; !rc && i < s->count; i++) {
        rc = changed && fate_of(s, i, changed) == INNER_KEPT
                 ? keep_one(i, old, old_e, out, e)
                 : encode_one(s, i, chunk, inner, &tmp, out, e);
        *stored += !rc && e[2 * i] != EMPTY;
    }
    if (!rc) rc = put_index(s, e, out);
    free(inner);
    free(e);
    nds_buf_dispose(&tmp);
    return rc == NDS_ENOMEM ? nds_err(NDS_ENOMEM, "zarr3: out of memory encoding a shard") : rc;
}

int nds_z3_shard_encode(const nds_z3_shard *s, const uint8_t *chunk, nds_buf *out) {
    uint64_t stored;
    return encode_shard(s, chunk, NULL, NULL, NULL, out, &stored);
}

int nds_z3_shard_update(const nds_z3_shard *s, nds_update_request *u) {
    uint64_t *old_e = NULL, stored = 0;
    int rc = u->old ? read_shard_index(s, u->old, u->old_len, &old_e) : 0;
    /* the old elements where the merge does not overwrite them and the encode reads them */
    if (!rc) rc = decode_inner_chunks(s, u->old, old_e, u->changed, u->chunk);
    if (!rc) {
        u->merge(u->merge_ctx, u->chunk);
        rc = encode_shard(s, u->chunk, u->old, old_e, u->changed, u->out, &stored);
    }
    u->all_fill = !rc && stored == 0;
    free(old_e);
    return rc;
}

/* ---- the index cache ------------------------------------------------------------------------- */

typedef struct cache_slot {
    char *key;          /* shard key, NULL when free */
    nds_generation gen; /* generation the index was read from */
    uint64_t *entries;  /* decoded, validated index */
    uint64_t stamp;     /* last use, for replacement */
} cache_slot;

struct nds_z3_index_cache {
    pthread_mutex_t mu;
    cache_slot slot[CACHE_SLOTS];
    uint64_t clock;
};

int nds_z3_index_cache_new(nds_z3_index_cache **out) {
    *out = calloc(1, sizeof **out);
    if (!*out) return nds_err(NDS_ENOMEM, "zarr3: out of memory");
    pthread_mutex_init(&(*out)->mu, NULL);
    return 0;
}

static void slot_clear(cache_slot *sl) {
    free(sl->key);
    free(sl->entries);
    memset(sl, 0, sizeof *sl);
}

void nds_z3_index_cache_free(nds_z3_index_cache *c) {
    if (!c) return;
    for (size_t k = 0; k < CACHE_SLOTS; k++) slot_clear(&c->slot[k]);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* Where inner chunk i of a shard is, as far as one reading of its index knows. */
typedef struct located {
    enum { SHARD_MISSING, INNER_EMPTY, INNER_DATA } state;
    bool fresh;         /* the index was read just now (not from the cache) */
    nds_generation gen; /* the generation the index belongs to */
    uint64_t off, nb;
} located;

static void locate_from(const uint64_t *e, uint64_t i, located *l) {
    l->off = e[2 * i];
    l->nb = e[2 * i + 1];
    l->state = l->off == EMPTY ? INNER_EMPTY : INNER_DATA;
}

static bool cache_get(nds_z3_index_cache *c, const char *key, uint64_t i, located *l) {
    bool hit = false;
    pthread_mutex_lock(&c->mu);
    for (size_t k = 0; k < CACHE_SLOTS && !hit; k++) {
        cache_slot *sl = &c->slot[k];
        if (!sl->key || strcmp(sl->key, key) != 0) continue;
        hit = true;
        sl->stamp = ++c->clock;
        l->gen = sl->gen;
        l->fresh = false;
        locate_from(sl->entries, i, l);
    }
    pthread_mutex_unlock(&c->mu);
    return hit;
}

/* Keeps entries (ownership taken) for key at gen, replacing the least recently used slot. */
static void cache_put(nds_z3_index_cache *c, const nds_z3_shard *s, const char *key,
                      const nds_generation *gen, uint64_t *entries) {
    char *k = NULL;
    if (gen->kind != NDS_GEN_VALUE || s->count * 16 > CACHE_MAX_BYTES || !(k = nds_strdup(key))) {
        free(entries);
        return;
    }
    pthread_mutex_lock(&c->mu);
    cache_slot *victim = &c->slot[0];
    for (size_t j = 0; j < CACHE_SLOTS; j++) {
        cache_slot *sl = &c->slot[j];
        if (sl->key && strcmp(sl->key, key) == 0) { victim = sl; break; }
        if (sl->stamp < victim->stamp) victim = sl;
    }
    slot_clear(victim);
    *victim = (cache_slot){k, *gen, entries, ++c->clock};
    pthread_mutex_unlock(&c->mu);
}

static void cache_drop(nds_z3_index_cache *c, const char *key) {
    pthread_mutex_lock(&c->mu);
    for (size_t k = 0; k < CACHE_SLOTS; k++)
        if (c->slot[k].key && strcmp(c->slot[k].key, key) == 0) slot_clear(&c->slot[k]);
    pthread_mutex_unlock(&c->mu);
}

/* ---- reading one inner chunk ----------------------------------------------------------------- */

/* Reads and validates the index of the shard under key (a suffix read when it is at the end). */
static int read_index(const nds_z3_shard *s, nds_z3_index_cache *c, nds_kvstore *kv,
                      const char *key, uint64_t i, located *l) {
    nds_read_options o = NDS_READ_OPTIONS_INIT;
    nds_read_result r;
    o.byte_start = s->index_at_start ? 0 : -(int64_t)s->index_nbytes;
    o.byte_length = (int64_t)s->index_nbytes;
    int rc = nds_kvstore_read(kv, key, &o, &r);
    if (rc) return nds_err_prefix(rc, "shard %s: reading its index", key);
    l->state = SHARD_MISSING;
    if (r.state != NDS_READ_VALUE) {
        nds_read_result_dispose(&r);
        return 0;
    }
    uint64_t *e = entries_new(s);
    rc = e ? nds_z3_shard_index_parse(s, r.value.data, r.value.len, r.total_size, e) : NDS_ENOMEM;
    if (rc == 0) {
        l->gen = r.generation;
        l->fresh = true;
        locate_from(e, i, l);
        cache_put(c, s, key, &r.generation, e);
    } else {
        free(e);
        if (rc != NDS_ENOMEM) rc = nds_err_prefix(rc, "shard %s", key);
    }
    nds_read_result_dispose(&r);
    return rc;
}

/* Reads the located bytes on condition that the shard is still l->gen: 1 when it changed. */
static int read_located(const nds_z3_shard *s, nds_kvstore *kv, const char *key, uint64_t i,
                        const located *l, uint8_t *out, int *present) {
    char name[200];
    nds_read_options o = NDS_READ_OPTIONS_INIT;
    nds_read_result r;
    nds_z3_shard_inner_name(s, i, name, sizeof name);
    o.if_equal = l->gen;
    o.byte_start = l->state == INNER_DATA ? (int64_t)l->off : 0; /* off < total: validated */
    o.byte_length = l->state == INNER_DATA ? (int64_t)l->nb : 0;
    int rc = nds_kvstore_read(kv, key, &o, &r);
    if (rc) return nds_err_prefix(rc, "shard %s: inner chunk %s", key, name);
    if (r.state != NDS_READ_VALUE) rc = 1; /* changed or deleted since the index was read */
    else if (l->state == INNER_DATA && r.value.len != l->nb)
        rc = nds_err(NDS_ECORRUPT, "shard %s: inner chunk %s: read %zu of its %llu bytes", key,
                     name, r.value.len, (unsigned long long)l->nb);
    else if (l->state == INNER_DATA) {
        rc = s->ops->decode(s->inner, r.value.data, r.value.len, out);
        if (rc) rc = nds_err_prefix(rc, "shard %s: inner chunk %s", key, name);
        *present = rc == 0;
    }
    nds_read_result_dispose(&r);
    return rc;
}

int nds_z3_shard_read(const nds_z3_shard *s, nds_z3_index_cache *cache, nds_kvstore *kv,
                      const char *key, uint64_t i, uint8_t *out, int *present) {
    *present = 0;
    for (int attempt = 0; attempt < READ_ATTEMPTS; attempt++) {
        located l = {0};
        int rc = cache_get(cache, key, i, &l) ? 0 : read_index(s, cache, kv, key, i, &l);
        if (rc || l.state == SHARD_MISSING || (l.state == INNER_EMPTY && l.fresh)) return rc;
        rc = read_located(s, kv, key, i, &l, out, present);
        if (rc != 1) return rc;
        cache_drop(cache, key);
    }
    char name[200];
    nds_z3_shard_inner_name(s, i, name, sizeof name);
    return nds_err(NDS_ECONFLICT, "shard %s changed %d times while reading inner chunk %s", key,
                   READ_ATTEMPTS, name);
}
