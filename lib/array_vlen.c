/* Variable-length arrays (dtype.h string / bytes; docs/internals/strings.md): reads and writes as
 * offsets + bytes. A chunk is its element list (formats/codecs/vlen.h), decoded whole; the format
 * only runs the codecs after the vlen one (nds_format.decode_vlen / encode_vlen). Writes go through
 * the core's chunk update protocol (lib/chunk_update.c: lock, read, merge, conditional write,
 * retry) with update_list as the change's stored-form update; the merge then sees the chunk's
 * element list instead of a dense chunk. Reads decode each chunk once
 * on the thread pool, then copy the selected elements into one buffer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../formats/codecs/vlen.h"
#include "internal/array_internal.h"
#include "internal/array_io.h"
#include "internal/chunk_update.h"
#include "internal/context_internal.h"
#include "internal/dtype_util.h"
#include "internal/error.h"
#include "internal/pool.h"
#include "internal/util.h"

/* "No element": a chunk index the write does not set (merge map). */
#define NOT_SET UINT64_MAX

int nds_array_vlen_refusal(const nds_array *a, const char *what) {
    return nds_err(NDS_EINVAL,
                   "%s %s: %s elements have variable length: use nds_array_read_vlen / "
                   "nds_array_write_vlen (offsets + bytes)",
                   what, nds_kvstore_url(a->kv), nds_dtype_name(a->meta.dtype));
}

/* ---- the fill element (format.h: a uint32 length, then the bytes; UINT32_MAX: none) ---- */

typedef struct vlen_fill {
    const uint8_t *bytes;
    size_t len;
    bool none; /* no fill element: reads as empty, chunks never count as all fill */
} vlen_fill;

static vlen_fill fill_of(const nds_array *a) {
    uint32_t n;
    memcpy(&n, a->meta.fill_value, 4);
    vlen_fill f = {a->meta.fill_value + 4, n, n == UINT32_MAX};
    if (f.none || f.len > NDS_ELEM_MAX_SIZE - 4) f.len = 0;
    return f;
}

static bool is_utf8(const nds_array *a) { return a->meta.dtype == NDS_STRING; }

/* ---- element lists ---- */

/* Where element j of a list comes from: sets *p and *n. */
typedef void (*elem_fn)(void *ctx, uint64_t j, const uint8_t **p, size_t *n);

/* Builds a list of count elements from get (two passes: lengths, then bytes). */
static int list_build(uint64_t count, elem_fn get, void *ctx, nds_vlen_list *out) {
    memset(out, 0, sizeof *out);
    out->offsets = malloc((size_t)(count + 1) * sizeof *out->offsets);
    if (!out->offsets) return nds_err(NDS_ENOMEM, "out of memory for %llu elements",
                                      (unsigned long long)count);
    uint64_t total = 0;
    for (uint64_t j = 0; j < count; j++) {
        const uint8_t *p;
        size_t n;
        get(ctx, j, &p, &n);
        out->offsets[j] = total;
        total += n; /* each element is in memory: the sum fits */
    }
    out->offsets[count] = total;
    if (!(out->data = malloc(total ? (size_t)total : 1))) {
        nds_vlen_list_dispose(out);
        return nds_err(NDS_ENOMEM, "out of memory for %llu bytes of elements",
                       (unsigned long long)total);
    }
    for (uint64_t j = 0; j < count; j++) {
        const uint8_t *p;
        size_t n;
        get(ctx, j, &p, &n);
        if (n) memcpy(out->data + out->offsets[j], p, n);
    }
    out->count = count;
    return 0;
}

static void list_elem(const nds_vlen_list *l, uint64_t j, const uint8_t **p, size_t *n) {
    *p = l->data + l->offsets[j];
    *n = (size_t)(l->offsets[j + 1] - l->offsets[j]);
}

static void fill_elem(void *ctx, uint64_t j, const uint8_t **p, size_t *n) {
    const vlen_fill *f = ctx;
    (void)j;
    *p = f->bytes;
    *n = f->len;
}

/* Decodes a chunk's stored bytes into its element list: the format's codecs, then the list,
 * checked against the chunk's element count (and UTF-8 for strings). */
static int decode_stored(nds_array *a, const uint64_t *cell, const uint8_t *data, size_t len,
                         nds_vlen_list *out) {
    nds_buf raw = {0};
    memset(out, 0, sizeof *out);
    int rc = a->format->decode_vlen(a->state, cell, data, len, &raw);
    if (!rc) rc = nds_vlen_decode(raw.data, raw.len, a->chunk_elems, is_utf8(a), out);
    nds_buf_dispose(&raw);
    return rc;
}

static bool list_all_fill(const nds_array *a, const nds_vlen_list *l) {
    vlen_fill f = fill_of(a);
    if (f.none) return false;
    for (uint64_t j = 0; j < l->count; j++) {
        const uint8_t *p;
        size_t n;
        list_elem(l, j, &p, &n);
        if (n != f.len || (n && memcmp(p, f.bytes, n) != 0)) return false;
    }
    return true;
}

/* The update of a variable-length chunk inside the core's update protocol (nds_stored_update_fn):
 * decodes old[0..old_len) (NULL: not stored, every element the fill) into its element list, has
 * the change's merge replace that list (its chunk argument points to the nds_vlen_list), and
 * encodes the result into out, or sets *all_fill. */
static int update_list(nds_array *a, const nds_chunk_change *ch, const uint8_t *old,
                       size_t old_len, nds_buf *out, int *all_fill) {
    const uint64_t *cell = ch->cell;
    nds_vlen_list l;
    vlen_fill f = fill_of(a);
    int rc = old ? decode_stored(a, cell, old, old_len, &l)
                 : list_build(a->chunk_elems, fill_elem, &f, &l);
    if (rc) return rc;
    ch->merge(ch->ctx, cell, (uint8_t *)&l);
    if (l.count != a->chunk_elems || !l.offsets) { /* the merge ran out of memory */
        nds_vlen_list_dispose(&l);
        return nds_err(NDS_ENOMEM, "out of memory merging a chunk");
    }
    *all_fill = list_all_fill(a, &l);
    if (!*all_fill) {
        nds_buf raw = {0};
        rc = nds_vlen_encode(l.offsets, l.data, l.count, is_utf8(a), &raw);
        out->len = 0;
        if (!rc) rc = a->format->encode_vlen(a->state, cell, raw.data, raw.len, out);
        nds_buf_dispose(&raw);
    }
    nds_vlen_list_dispose(&l);
    return rc;
}

/* ---- selections: which chunk element each selected region element is ---- */

/* The selection s of chunk cell as pairs: region[k] (index in the call's region, C order) and
 * in_chunk[k] (index in the chunk, C order), k < *n, in C order of the selection. */
static void sel_pairs(const io_call *c, const chunk_sel *s, uint64_t *region, uint64_t *in_chunk,
                      size_t *n) {
    size_t rank = c->box->rank;
    uint64_t ext[NDS_MAX_RANK] = {0}, idx[NDS_MAX_RANK] = {0};
    int64_t rs[NDS_MAX_RANK], cs[NDS_MAX_RANK];
    for (size_t d = 0; d < rank; d++) ext[d] = nds_box_extent(c->box, d);
    nds_c_strides(rank, ext, 1, rs);
    nds_c_strides(rank, c->grid_shape, 1, cs);
    uint64_t total = 1;
    for (size_t d = 0; d < rank; d++) total *= s->extent[d];
    for (uint64_t k = 0; k < total; k++) {
        uint64_t r = 0, ch = 0;
        for (size_t d = 0; d < rank; d++) {
            r += (s->in_box[d] + idx[d]) * (uint64_t)rs[d];
            ch += (s->in_chunk[d] + idx[d] * c->box->step[d]) * (uint64_t)cs[d];
        }
        region[k] = r;
        in_chunk[k] = ch;
        for (size_t d = rank; d-- > 0;) { /* odometer */
            if (++idx[d] < s->extent[d]) break;
            idx[d] = 0;
        }
    }
    *n = (size_t)total;
}

/* Pairs of cell's selection into two arrays of chunk_elems entries, malloc'd (*region first). */
static int pairs_of(const io_call *c, const chunk_sel *s, uint64_t **region, uint64_t **in_chunk,
                    size_t *n) {
    size_t cap = c->a->chunk_elems ? c->a->chunk_elems : 1;
    *region = malloc(2 * cap * sizeof **region);
    if (!*region) return nds_err(NDS_ENOMEM, "out of memory");
    *in_chunk = *region + cap;
    sel_pairs(c, s, *region, *in_chunk, n);
    return 0;
}

/* ---- read ---- */

typedef struct vlen_read {
    io_call c;
    nds_vlen_list *lists; /* per grid cell: its decoded list; offsets NULL when not stored */
    uint64_t *offsets;    /* the result: lengths at [i + 1] after the first pass */
    uint8_t *data;
    vlen_fill fill;
} vlen_read;

/* Reads and decodes chunk cell into *l (left zeroed when it is not stored). */
static int load_list(nds_array *a, const uint64_t *cell, nds_vlen_list *l) {
    char key[KEY_MAX];
    nds_read_result r;
    memset(l, 0, sizeof *l);
    int rc = nds_array_chunk_key(a, cell, key, sizeof key);
    if (rc) return rc;
    if ((rc = nds_kvstore_read(a->kv, key, NULL, &r)) == 0) {
        if (r.state == NDS_READ_VALUE) rc = decode_stored(a, cell, r.value.data, r.value.len, l);
        nds_read_result_dispose(&r);
    }
    return rc ? nds_err_prefix(rc, "%s: chunk %s of %s", a->format->name, key,
                               nds_kvstore_url(a->kv))
              : 0;
}

static void read_elem(const vlen_read *v, const nds_vlen_list *l, uint64_t j, const uint8_t **p,
                      size_t *n) {
    if (l->offsets)
        list_elem(l, j, p, n);
    else
        fill_elem((void *)&v->fill, j, p, n);
}

/* Pass 1 (per cell): decode the chunk, note the lengths of the selected elements. */
static int read_lengths(void *ctx, size_t i) {
    vlen_read *v = ctx;
    uint64_t cell[NDS_MAX_RANK], *region = NULL, *in_chunk = NULL;
    chunk_sel s;
    size_t n = 0;
    grid_cell(&v->c.grid, i, cell);
    if (!select_in_chunk(&v->c.a->meta, v->c.grid_shape, v->c.box, cell, &s)) return 0;
    int rc = load_list(v->c.a, cell, &v->lists[i]);
    if (!rc) rc = pairs_of(&v->c, &s, &region, &in_chunk, &n);
    if (rc) return rc;
    for (size_t k = 0; k < n; k++) {
        const uint8_t *p;
        size_t len;
        read_elem(v, &v->lists[i], in_chunk[k], &p, &len);
        v->offsets[region[k] + 1] = len;
    }
    free(region);
    return 0;
}

/* Pass 2 (per cell): copy the selected elements into place; the list is then freed. */
static int read_copy(void *ctx, size_t i) {
    vlen_read *v = ctx;
    uint64_t cell[NDS_MAX_RANK], *region = NULL, *in_chunk = NULL;
    chunk_sel s;
    size_t n = 0;
    grid_cell(&v->c.grid, i, cell);
    if (!select_in_chunk(&v->c.a->meta, v->c.grid_shape, v->c.box, cell, &s)) return 0;
    int rc = pairs_of(&v->c, &s, &region, &in_chunk, &n);
    if (rc) return rc;
    for (size_t k = 0; k < n; k++) {
        const uint8_t *p;
        size_t len;
        read_elem(v, &v->lists[i], in_chunk[k], &p, &len);
        if (len) memcpy(v->data + v->offsets[region[k]], p, len);
    }
    free(region);
    nds_vlen_list_dispose(&v->lists[i]);
    return 0;
}

/* Offsets from the lengths pass 1 left at [i + 1]; NDS_ELIMIT past what memory can hold. */
static int sum_lengths(vlen_read *v, uint64_t count) {
    v->offsets[0] = 0;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t next = v->offsets[i] + v->offsets[i + 1];
        if (next < v->offsets[i] || next > SIZE_MAX / 2)
            return nds_err(NDS_ELIMIT, "read of %s: the region's elements hold more bytes than "
                                       "memory can", nds_kvstore_url(v->c.a->kv));
        v->offsets[i + 1] = next;
    }
    return 0;
}

static int read_vlen_locked(nds_array *a, const nds_box *box, vlen_read *v, size_t threads) {
    int rc = io_call_init(&v->c, a, box, NULL, false, "read of");
    if (rc) return rc;
    uint64_t count = nds_box_count(box);
    nds_pool *pool = nds_context_pool(a->ctx);
    v->fill = fill_of(a);
    v->offsets = calloc((size_t)count + 1, sizeof *v->offsets);
    v->lists = calloc(v->c.grid.total ? (size_t)v->c.grid.total : 1, sizeof *v->lists);
    if (!v->offsets || !v->lists)
        return nds_err(NDS_ENOMEM, "read of %s: out of memory for %llu elements",
                       nds_kvstore_url(a->kv), (unsigned long long)count);
    rc = nds_pool_for(pool, v->c.grid.total, threads, read_lengths, v);
    if (!rc) rc = sum_lengths(v, count);
    if (!rc && !(v->data = malloc(v->offsets[count] ? (size_t)v->offsets[count] : 1)))
        rc = nds_err(NDS_ENOMEM, "read of %s: out of memory for %llu bytes",
                     nds_kvstore_url(a->kv), (unsigned long long)v->offsets[count]);
    if (!rc) rc = nds_pool_for(pool, v->c.grid.total, threads, read_copy, v);
    return rc;
}

int nds_array_read_vlen(nds_array *a, const nds_box *box, uint64_t **offsets, uint8_t **data,
                        const nds_io_options *opts) {
    *offsets = NULL;
    *data = NULL;
    if (!nds_dtype_is_vlen(a->meta.dtype))
        return nds_err(NDS_EINVAL, "read of %s: nds_array_read_vlen reads string and bytes "
                                   "arrays, not %s (use nds_array_read)",
                       nds_kvstore_url(a->kv), nds_dtype_name(a->meta.dtype));
    vlen_read v;
    memset(&v, 0, sizeof v);
    pthread_rwlock_rdlock(&a->meta_lock);
    int rc = read_vlen_locked(a, box, &v, call_threads(opts));
    for (size_t i = 0; v.lists && i < v.c.grid.total; i++) nds_vlen_list_dispose(&v.lists[i]);
    pthread_rwlock_unlock(&a->meta_lock);
    free(v.lists);
    if (rc) {
        nds_array_vlen_free(v.offsets, v.data);
        return rc;
    }
    *offsets = v.offsets;
    *data = v.data;
    return 0;
}

size_t nds_array_vlen_fill(const nds_array *a, const uint8_t **bytes) {
    vlen_fill f = fill_of(a);
    *bytes = f.bytes;
    return nds_dtype_is_vlen(a->meta.dtype) ? f.len : 0;
}

void nds_array_vlen_free(uint64_t *offsets, uint8_t *data) {
    free(offsets);
    free(data);
}

/* ---- write ---- */

typedef struct vlen_write {
    io_call c;
    const uint64_t *offsets;
    const uint8_t *data;
} vlen_write;

/* The merge of one chunk: its list rebuilt with the region's elements where the write sets them. */
typedef struct vlen_merge {
    const vlen_write *w;
    const chunk_sel *sel;
    const nds_vlen_list *old;
    uint64_t *map; /* per chunk element: the region element written there, or NOT_SET */
} vlen_merge;

static void merged_elem(void *ctx, uint64_t j, const uint8_t **p, size_t *n) {
    const vlen_merge *m = ctx;
    uint64_t r = m->map[j];
    if (r == NOT_SET) {
        list_elem(m->old, j, p, n);
    } else {
        *p = m->w->data + m->w->offsets[r];
        *n = (size_t)(m->w->offsets[r + 1] - m->w->offsets[r]);
    }
}

static void merge_elements(void *ctx, const uint64_t *cell, uint8_t *chunk) {
    vlen_merge *m = ctx;
    nds_vlen_list *l = (nds_vlen_list *)chunk, merged;
    uint64_t *region = NULL, *in_chunk = NULL;
    size_t n = 0, elems = m->w->c.a->chunk_elems;
    (void)cell;
    int rc = pairs_of(&m->w->c, m->sel, &region, &in_chunk, &n);
    if (!rc && !(m->map = malloc((elems ? elems : 1) * sizeof *m->map))) {
        free(region);
        rc = NDS_ENOMEM;
    }
    if (rc) {
        nds_vlen_list_dispose(l); /* update_list reports it */
        return;
    }
    for (size_t j = 0; j < elems; j++) m->map[j] = NOT_SET;
    for (size_t k = 0; k < n; k++) m->map[in_chunk[k]] = region[k];
    free(region);
    m->old = l;
    rc = list_build(elems, merged_elem, m, &merged);
    free(m->map);
    nds_vlen_list_dispose(l);
    if (rc == 0) *l = merged;
}

static int write_cell(void *ctx, size_t i) {
    const vlen_write *w = ctx;
    uint64_t cell[NDS_MAX_RANK];
    chunk_sel s;
    grid_cell(&w->c.grid, i, cell);
    if (!select_in_chunk(&w->c.a->meta, w->c.grid_shape, w->c.box, cell, &s)) return 0;
    nds_box changed; /* what of the chunk the merge overwrites */
    sel_changed_box(&w->c, &s, &changed);
    vlen_merge m = {w, &s, NULL, NULL};
    nds_chunk_change ch = {cell, 0, &changed, merge_elements, &m, update_list};
    return nds_chunk_update(w->c.a, &ch);
}

/* Every element is checked before anything is written. */
static int check_elements(const nds_array *a, const uint64_t *offsets, const uint8_t *data,
                          uint64_t count) {
    for (uint64_t i = 0; i < count; i++) {
        uint64_t n = offsets[i + 1] - offsets[i];
        if (offsets[i + 1] < offsets[i] || n > UINT32_MAX)
            return nds_err(NDS_EINVAL, "write to %s: element %llu: offsets decrease or it is "
                                       "longer than 2^32-1 bytes",
                           nds_kvstore_url(a->kv), (unsigned long long)i);
        if (is_utf8(a) && !nds_utf8_valid(data + offsets[i], (size_t)n))
            return nds_err(NDS_EINVAL, "write to %s: element %llu is not valid UTF-8",
                           nds_kvstore_url(a->kv), (unsigned long long)i);
    }
    return 0;
}

int nds_array_write_vlen(nds_array *a, const nds_box *box, const uint64_t *offsets,
                         const uint8_t *data, const nds_io_options *opts) {
    if (!nds_dtype_is_vlen(a->meta.dtype))
        return nds_err(NDS_EINVAL, "write to %s: nds_array_write_vlen writes string and bytes "
                                   "arrays, not %s (use nds_array_write)",
                       nds_kvstore_url(a->kv), nds_dtype_name(a->meta.dtype));
    if (call_txn(a, opts))
        return nds_err(NDS_EUNSUPPORTED, "write to %s: %s arrays cannot be written inside a "
                                         "transaction",
                       nds_kvstore_url(a->kv), nds_dtype_name(a->meta.dtype));
    int rc = nds_array_check_stale(a, "write to");
    if (rc) return rc;
    pthread_rwlock_rdlock(&a->meta_lock);
    vlen_write w = {.offsets = offsets, .data = data};
    rc = io_call_init(&w.c, a, box, NULL, false, "write to");
    if (!rc) rc = check_elements(a, offsets, data, nds_box_count(box));
    if (!rc)
        rc = nds_pool_for(nds_context_pool(a->ctx), w.c.grid.total, call_threads(opts),
                          write_cell, &w);
    if (!rc) rc = nds_array_check_metadata(a, "write to");
    pthread_rwlock_unlock(&a->meta_lock);
    return rc;
}

/* ---- resize and verify ---- */

/* Elements of a chunk beyond the array's shape become the fill element. */
typedef struct clear_beyond {
    const nds_array *a;
    const uint64_t *cell;
    const nds_vlen_list *old;
    vlen_fill fill;
} clear_beyond;

static void kept_or_fill(void *ctx, uint64_t j, const uint8_t **p, size_t *n) {
    const clear_beyond *c = ctx;
    const nds_array_meta *m = &c->a->meta;
    uint64_t rest = j;
    bool beyond = false;
    for (size_t d = m->rank; d-- > 0;) {
        uint64_t at = c->cell[d] * m->chunk_shape[d] + rest % m->chunk_shape[d];
        beyond = beyond || at >= m->shape[d];
        rest /= m->chunk_shape[d];
    }
    if (beyond)
        fill_elem((void *)&c->fill, j, p, n);
    else
        list_elem(c->old, j, p, n);
}

static void merge_clear_beyond(void *ctx, const uint64_t *cell, uint8_t *chunk) {
    clear_beyond *c = ctx;
    nds_vlen_list *l = (nds_vlen_list *)chunk, merged;
    c->cell = cell;
    c->old = l;
    int rc = list_build(l->count, kept_or_fill, c, &merged);
    nds_vlen_list_dispose(l);
    if (rc == 0) *l = merged;
}

int nds_array_vlen_clear_beyond(nds_array *a, const uint64_t *cell) {
    clear_beyond c = {a, cell, NULL, fill_of(a)};
    nds_chunk_change ch = {cell, 0, NULL, merge_clear_beyond, &c, update_list};
    return nds_chunk_update(a, &ch);
}

int nds_array_vlen_check_chunk(nds_array *a, const uint64_t *cell, const char *key) {
    nds_read_result r;
    nds_vlen_list l;
    int rc = nds_kvstore_read(a->kv, key, NULL, &r);
    if (rc) return rc;
    if (r.state == NDS_READ_VALUE) rc = decode_stored(a, cell, r.value.data, r.value.len, &l);
    if (r.state == NDS_READ_VALUE && !rc) nds_vlen_list_dispose(&l);
    nds_read_result_dispose(&r);
    return rc;
}
