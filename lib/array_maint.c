/* Whole-array maintenance: resize (with chunk clean-up), stored-chunk statistics, verify. These
 * list the array's keys and map them back to chunk cells with the format's parse_chunk_key. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/array_internal.h"
#include "internal/chunk_update.h"
#include "internal/context_internal.h"
#include "internal/dtype_util.h"
#include "internal/error.h"
#include "internal/strided.h"
#include "internal/util.h"

/* The chunk keys stored under the array, with their cells and sizes. */
typedef struct chunk_list {
    nds_array *a;
    char **keys;
    uint64_t *cells; /* rank entries per key */
    uint64_t *sizes;
    size_t n, cap;
} chunk_list;

static int grow_list(chunk_list *l) {
    size_t cap = l->cap ? l->cap * 2 : 256, rank = l->a->meta.rank ? l->a->meta.rank : 1;
    char **k = realloc(l->keys, cap * sizeof *k);
    if (k) l->keys = k;
    uint64_t *c = k ? realloc(l->cells, cap * rank * sizeof *c) : NULL;
    if (c) l->cells = c;
    uint64_t *s = c ? realloc(l->sizes, cap * sizeof *s) : NULL;
    if (s) l->sizes = s;
    if (!s) return nds_err(NDS_ENOMEM, "out of memory listing chunks");
    l->cap = cap;
    return 0;
}

static int collect_chunk(void *ctx, const char *key, uint64_t size) {
    chunk_list *l = ctx;
    uint64_t cell[NDS_MAX_RANK];
    if (!l->a->format->parse_chunk_key(l->a->state, key, cell)) return 0;
    if (l->n == l->cap && grow_list(l)) return NDS_ENOMEM;
    if (!(l->keys[l->n] = nds_strdup(key)))
        return nds_err(NDS_ENOMEM, "out of memory listing chunks");
    size_t rank = l->a->meta.rank ? l->a->meta.rank : 1;
    memcpy(l->cells + l->n * rank, cell, rank * sizeof *cell);
    l->sizes[l->n++] = size;
    return 0;
}

static void chunk_list_dispose(chunk_list *l) {
    for (size_t i = 0; i < l->n; i++) free(l->keys[i]);
    free(l->keys);
    free(l->cells);
    free(l->sizes);
}

static int list_chunks(nds_array *a, chunk_list *l) {
    memset(l, 0, sizeof *l);
    l->a = a;
    int rc = nds_kvstore_list(a->kv, "", collect_chunk, l);
    if (rc) {
        chunk_list_dispose(l);
        memset(l, 0, sizeof *l);
    }
    return rc;
}

static const uint64_t *list_cell(const chunk_list *l, size_t i) {
    return l->cells + i * (l->a->meta.rank ? l->a->meta.rank : 1);
}

static int group_stats(nds_array *a, nds_array_stats *out);

int nds_array_stats_get(nds_array *a, nds_array_stats *out) {
    if (a->meta.grouped) return group_stats(a, out);
    chunk_list l;
    pthread_rwlock_rdlock(&a->meta_lock);
    uint64_t total = 1;
    for (size_t d = 0; d < a->meta.rank; d++)
        total *= nds_ceil_div(a->meta.shape[d], a->meta.chunk_shape[d]);
    int rc = list_chunks(a, &l);
    pthread_rwlock_unlock(&a->meta_lock);
    if (rc) return rc;
    memset(out, 0, sizeof *out);
    out->chunks_total = total;
    out->chunks_stored = l.n;
    for (size_t i = 0; i < l.n; i++) out->bytes_stored += l.sizes[i] == UINT64_MAX ? 0 : l.sizes[i];
    chunk_list_dispose(&l);
    return 0;
}

/* ---- verify ---- */

typedef struct verify_call {
    nds_array *a;
    chunk_list *list;
    nds_error_saved *errors; /* per chunk; code 0 = good */
} verify_call;

static int verify_task(void *ctx, size_t i) {
    verify_call *v = ctx;
    if (nds_dtype_is_vlen(v->a->meta.dtype)) { /* no dense chunk: its element list */
        int rc = nds_array_vlen_check_chunk(v->a, list_cell(v->list, i), v->list->keys[i]);
        if (rc == NDS_ENOMEM) return rc;
        v->errors[i].code = rc;
        if (rc) nds_error_save(&v->errors[i], rc);
        return 0;
    }
    uint8_t *chunk = nds_scratch(NDS_SCRATCH_CHUNK, v->a->chunk_bytes);
    /* Uncached: verify must decode the stored bytes themselves. */
    int present, rc = chunk ? nds_array_load_chunk(v->a, list_cell(v->list, i), v->list->keys[i],
                                                   chunk, &present, NULL, false)
                            : NDS_ENOMEM;
    if (rc == NDS_ENOMEM) return rc; /* a resource failure stops the check; bad data does not */
    v->errors[i].code = rc;
    if (rc) nds_error_save(&v->errors[i], rc);
    return 0;
}

static int group_verify(nds_array *a, nds_verify_fn fn, void *ctx, uint64_t *checked,
                        uint64_t *bad);

int nds_array_verify(nds_array *a, nds_verify_fn fn, void *ctx, uint64_t *checked, uint64_t *bad) {
    if (a->meta.grouped) return group_verify(a, fn, ctx, checked, bad);
    chunk_list l;
    pthread_rwlock_rdlock(&a->meta_lock);
    int rc = list_chunks(a, &l);
    verify_call v = {a, &l, NULL};
    if (!rc && !(v.errors = calloc(l.n ? l.n : 1, sizeof *v.errors)))
        rc = nds_err(NDS_ENOMEM, "out of memory");
    if (!rc) rc = nds_pool_for(nds_context_pool(a->ctx), l.n, 0, verify_task, &v);
    pthread_rwlock_unlock(&a->meta_lock);
    uint64_t nbad = 0;
    for (size_t i = 0; !rc && i < l.n; i++) {
        if (v.errors[i].code == 0) continue;
        nbad++;
        if (fn && fn(ctx, l.keys[i], v.errors[i].code, v.errors[i].message)) break;
    }
    if (checked) *checked = rc ? 0 : l.n;
    if (bad) *bad = nbad;
    free(v.errors);
    chunk_list_dispose(&l);
    return rc;
}

/* ---- grouped arrays: the chunks inside each object (hashed shards) ---- */

/* The objects stored under a grouped array (group_parse_key), their sizes in the list. */
static int collect_object(void *ctx, const char *key, uint64_t size) {
    chunk_list *l = ctx;
    if (!l->a->format->group_parse_key(l->a->state, key)) return 0;
    if (l->n == l->cap && grow_list(l)) return NDS_ENOMEM;
    if (!(l->keys[l->n] = nds_strdup(key)))
        return nds_err(NDS_ENOMEM, "out of memory listing objects");
    l->sizes[l->n++] = size;
    return 0;
}

/* Lists the objects; NDS_EUNSUPPORTED (saying what is not seen) when the format cannot. */
static int list_objects(nds_array *a, chunk_list *l) {
    memset(l, 0, sizeof *l);
    l->a = a;
    const nds_format *f = a->format;
    if (!f->group_parse_key || !f->group_list)
        return nds_err(NDS_EUNSUPPORTED, "%s: the chunks of this %s array live in objects its "
                       "format cannot list: they are neither counted nor checked",
                       nds_kvstore_url(a->kv), f->name);
    int rc = nds_kvstore_list(a->kv, "", collect_object, l);
    if (rc) {
        chunk_list_dispose(l);
        memset(l, 0, sizeof *l);
    }
    return rc;
}

/* One object's visit: its chunks counted and, for verify, decoded. */
typedef struct object_visit {
    nds_array *a;
    const uint8_t *obj;
    size_t len;
    uint8_t *chunk;   /* decode buffer; NULL: only count */
    uint64_t chunks;  /* chunks the object lists */
    uint64_t bad;     /* of them, chunks that failed to decode (or 1 for an object that fails) */
    nds_error_saved *first; /* the first failure */
} object_visit;

static int visit_chunk(void *ctx, const uint64_t *cell) {
    object_visit *v = ctx;
    v->chunks++;
    if (!v->chunk) return 0;
    int present = 0;
    int rc = v->a->format->group_read_chunk(v->a->state, v->obj, v->len, cell, v->chunk, &present);
    if (rc == NDS_ENOMEM) return rc;
    if (rc == 0 && !present)
        rc = nds_err(NDS_ECORRUPT, "a chunk its index lists cannot be found in it");
    if (rc && v->bad++ == 0) nds_error_save(v->first, rc);
    return 0;
}

typedef struct group_call {
    nds_array *a;
    chunk_list *list;
    bool decode;
    uint64_t *chunks, *bad; /* per object */
    nds_error_saved *errors; /* per object: the first failure; code 0 = good */
} group_call;

/* Reads object i whole and visits its chunks. A resource failure stops the call; bad data (an
 * object that does not parse, a chunk that does not decode, a failed read) is recorded. */
static int group_task(void *ctx, size_t i) {
    group_call *g = ctx;
    const char *key = g->list->keys[i];
    nds_read_result r;
    object_visit v = {g->a, NULL, 0, NULL, 0, 0, &g->errors[i]};
    if (g->decode && !(v.chunk = nds_scratch(NDS_SCRATCH_CHUNK, g->a->chunk_bytes)))
        return NDS_ENOMEM;
    int rc = nds_kvstore_read(g->a->kv, key, NULL, &r);
    if (rc == 0 && r.state == NDS_READ_VALUE) {
        v.obj = r.value.data;
        v.len = r.value.len;
        rc = g->a->format->group_list(g->a->state, key, v.obj, v.len, visit_chunk, &v);
    }
    nds_read_result_dispose(&r);
    if (rc == NDS_ENOMEM) return rc;
    if (rc) {
        v.bad = v.bad ? v.bad : 1;
        nds_error_save(&g->errors[i], rc);
    }
    g->chunks[i] = v.chunks;
    g->bad[i] = v.bad;
    return 0;
}

/* Lists the objects and visits each (decode: verify) on the pool. */
static int group_run(nds_array *a, bool decode, chunk_list *l, group_call *g) {
    pthread_rwlock_rdlock(&a->meta_lock);
    int rc = list_objects(a, l);
    size_t n = l->n ? l->n : 1;
    *g = (group_call){a, l, decode, calloc(n, sizeof *g->chunks), calloc(n, sizeof *g->bad),
                      calloc(n, sizeof *g->errors)};
    if (!rc && (!g->chunks || !g->bad || !g->errors)) rc = nds_err(NDS_ENOMEM, "out of memory");
    if (!rc) rc = nds_pool_for(nds_context_pool(a->ctx), l->n, 0, group_task, g);
    pthread_rwlock_unlock(&a->meta_lock);
    return rc;
}

static void group_dispose(chunk_list *l, group_call *g) {
    free(g->chunks);
    free(g->bad);
    free(g->errors);
    chunk_list_dispose(l);
}

/* Chunks counted inside every object (each read whole and its indexes parsed); bytes are the
 * objects' sizes. A corrupt object fails the call with its error, naming it. */
static int group_stats(nds_array *a, nds_array_stats *out) {
    chunk_list l;
    group_call g;
    int rc = group_run(a, false, &l, &g);
    memset(out, 0, sizeof *out);
    out->chunks_total = 1;
    for (size_t d = 0; d < a->meta.rank; d++)
        out->chunks_total *= nds_ceil_div(a->meta.shape[d], a->meta.chunk_shape[d]);
    for (size_t i = 0; !rc && i < l.n; i++) {
        if (g.errors[i].code) {
            nds_error_restore(&g.errors[i]);
            rc = nds_err_prefix(g.errors[i].code, "%s: %s", nds_kvstore_url(a->kv), l.keys[i]);
        }
        out->chunks_stored += g.chunks[i];
        out->bytes_stored += l.sizes[i] == UINT64_MAX ? 0 : l.sizes[i];
    }
    group_dispose(&l, &g);
    return rc;
}

/* Every chunk of every object decoded; fn is called once per bad object (its first failure, and
 * how many more chunks of it failed). *bad counts bad chunks, and an object that does not parse as
 * one. */
static int group_verify(nds_array *a, nds_verify_fn fn, void *ctx, uint64_t *checked,
                        uint64_t *bad) {
    chunk_list l;
    group_call g;
    int rc = group_run(a, true, &l, &g);
    uint64_t nchecked = 0, nbad = 0;
    bool stopped = false;
    for (size_t i = 0; !rc && i < l.n; i++) {
        nchecked += g.chunks[i] ? g.chunks[i] : g.bad[i]; /* an unreadable object: one */
        nbad += g.bad[i];
        if (!g.errors[i].code || stopped) continue;
        char msg[sizeof g.errors[i].message + 64];
        snprintf(msg, sizeof msg, g.bad[i] > 1 ? "%s (and %llu more bad chunks in it)" : "%s",
                 g.errors[i].message, (unsigned long long)(g.bad[i] - 1));
        stopped = fn && fn(ctx, l.keys[i], g.errors[i].code, msg);
    }
    if (checked) *checked = rc ? 0 : nchecked;
    if (bad) *bad = nbad;
    group_dispose(&l, &g);
    return rc;
}

/* ---- resize ---- */

/* Resets the elements of a kept edge chunk that lie beyond a->meta.shape (the shape kept) to
 * fill. */
static void fill_beyond(void *ctx, const uint64_t *cell, uint8_t *chunk) {
    nds_array *a = ctx;
    const nds_array_meta *m = &a->meta;
    int64_t stride[NDS_MAX_RANK];
    nds_c_strides(m->rank, m->chunk_shape, a->elem, stride);
    for (size_t d = 0; d < m->rank; d++) {
        uint64_t c0 = cell[d] * m->chunk_shape[d];
        if (c0 + m->chunk_shape[d] <= m->shape[d]) continue;
        uint64_t ext[NDS_MAX_RANK];
        memcpy(ext, m->chunk_shape, m->rank * sizeof *ext);
        uint64_t keep = m->shape[d] - c0;
        ext[d] = m->chunk_shape[d] - keep;
        nds_strided_fill(m->rank, ext, a->elem, chunk + (int64_t)keep * stride[d], stride,
                         m->fill_value);
    }
}

/* a->meta.shape is the kept shape (old and new shape's minimum) while the tasks run. */
typedef struct resize_call {
    nds_array *a;
    chunk_list *list;
    const uint64_t *old_shape, *new_shape;
} resize_call;

/* Clears one stored chunk against the kept shape: deleted when it lies outside it, its part
 * beyond it reset to fill when it straddles the kept shape's edge in a dimension that changes. */
static int resize_task(void *ctx, size_t i) {
    resize_call *r = ctx;
    nds_array *a = r->a;
    const uint64_t *cell = list_cell(r->list, i);
    bool outside = false, edge = false;
    for (size_t d = 0; d < a->meta.rank; d++) {
        uint64_t c0 = cell[d] * a->meta.chunk_shape[d];
        outside = outside || c0 >= a->meta.shape[d];
        bool changes = r->new_shape[d] != r->old_shape[d];
        edge = edge || (changes && c0 + a->meta.chunk_shape[d] > a->meta.shape[d]);
    }
    if (outside) {
        int rc = nds_kvstore_delete(a->kv, r->list->keys[i], NULL);
        return rc ? nds_err_prefix(rc, "resize of %s: deleting chunk %s", nds_kvstore_url(a->kv),
                                   r->list->keys[i])
                  : 0;
    }
    if (edge && nds_dtype_is_vlen(a->meta.dtype)) return nds_array_vlen_clear_beyond(a, cell);
    nds_chunk_change ch = {cell, 0, NULL, fill_beyond, a, NULL};
    return edge ? nds_chunk_update(a, &ch) : 0;
}

/* The chunks a grow newly exposes: cells inside the new grid and outside the kept one (the old
 * and new shapes' minimum). Formats parse only keys inside their current grid, so a listing does
 * not find these: they are deleted by key. The cells form rank disjoint boxes: box d holds the
 * cells inside the kept grid in dimensions before d, beyond it in d, anywhere in the new grid
 * after d. */
#define EXPOSED_MAX (UINT64_C(1) << 16) /* more: not deleted by key (docs/guarantees.md) */

typedef struct exposed_cells {
    nds_array *a;
    size_t rank;
    uint64_t kept[NDS_MAX_RANK], grown[NDS_MAX_RANK]; /* grid extents */
    uint64_t box_cells[NDS_MAX_RANK];                 /* cells of box d */
} exposed_cells;

static uint64_t box_extent(const exposed_cells *e, size_t box, size_t d) {
    return d < box ? e->kept[d] : d == box ? e->grown[d] - e->kept[d] : e->grown[d];
}

static int delete_exposed(void *ctx, size_t i) {
    const exposed_cells *e = ctx;
    size_t box = 0;
    uint64_t cell[NDS_MAX_RANK], k = i;
    while (k >= e->box_cells[box]) k -= e->box_cells[box++];
    for (size_t d = e->rank; d-- > 0;) {
        uint64_t n = box_extent(e, box, d);
        cell[d] = k % n + (d == box ? e->kept[d] : 0);
        k /= n;
    }
    char key[512];
    int rc = nds_array_chunk_key(e->a, cell, key, sizeof key);
    if (!rc) rc = nds_kvstore_delete(e->a->kv, key, NULL);
    return rc ? nds_err_prefix(rc, "resize of %s: clearing chunk %s", nds_kvstore_url(e->a->kv),
                               key)
              : 0;
}

/* Deletes the chunks a grow to new_shape exposes (a->meta.shape: the kept shape), when there are
 * at most EXPOSED_MAX of them. */
static int clear_exposed(nds_array *a, const uint64_t *new_shape) {
    exposed_cells e = {.a = a, .rank = a->meta.rank};
    uint64_t total = 0;
    for (size_t d = 0; d < e.rank; d++) {
        e.kept[d] = nds_ceil_div(a->meta.shape[d], a->meta.chunk_shape[d]);
        e.grown[d] = nds_ceil_div(new_shape[d], a->meta.chunk_shape[d]);
    }
    for (size_t box = 0; box < e.rank; box++) {
        uint64_t n = 1;
        for (size_t d = 0; d < e.rank && n; d++)
            if (!nds_mul_u64(n, box_extent(&e, box, d), &n)) return 0;
        e.box_cells[box] = n;
        if (!nds_add_u64(total, n, &total) || total > EXPOSED_MAX) return 0;
    }
    return nds_pool_for(nds_context_pool(a->ctx), (size_t)total, 0, delete_exposed, &e);
}

/* Clears, before a resize publishes new_shape, every stored element outside the shape kept (the
 * minimum of the old and the new): a shrink's cut part, and on a grow what it newly exposes
 * (chunks a racing writer or an interrupted shrink left beyond the old shape). */
static int clear_outside_kept(nds_array *a, const uint64_t *new_shape) {
    nds_array_meta old = a->meta;
    bool changes = false;
    for (size_t d = 0; d < old.rank; d++) {
        changes = changes || new_shape[d] != old.shape[d];
        a->meta.shape[d] = nds_min_u64(old.shape[d], new_shape[d]);
    }
    chunk_list l;
    int rc = changes ? list_chunks(a, &l) : 0;
    if (!rc && changes) {
        resize_call r = {a, &l, old.shape, new_shape};
        rc = nds_pool_for(nds_context_pool(a->ctx), l.n, 0, resize_task, &r);
        chunk_list_dispose(&l);
    }
    if (!rc && changes) rc = clear_exposed(a, new_shape);
    a->meta = old;
    return rc;
}

int nds_array_resize(nds_array *a, const uint64_t *new_shape) {
    /* Refuse before any clean-up: a format that cannot resize must not lose chunks first. */
    if (!a->format->resize)
        return nds_err(NDS_EUNSUPPORTED, "%s: %s arrays cannot be resized", nds_kvstore_url(a->kv),
                       a->format->name);
    int snap = nds_array_check_stale(a, "resize of"); /* consolidated snapshots are read-only */
    if (snap) return snap;
    pthread_rwlock_wrlock(&a->meta_lock);
    nds_array_meta old = a->meta;
    /* Clean up first, then publish: a crash in between loses only data the caller was removing,
     * and leaves nothing stale that the new shape (or a later grow) would expose. The format's
     * resize re-reads the metadata and refuses a document changed beyond its shape. */
    int rc = clear_outside_kept(a, new_shape);
    if (!rc) rc = a->format->resize(a->state, a->kv, new_shape, &a->meta);
    if (rc)
        a->meta = old;
    else
        nds_array_metadata_changed(a); /* the format's resize refreshed meta */
    pthread_rwlock_unlock(&a->meta_lock);
    return rc;
}
