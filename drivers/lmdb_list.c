/* The lmdb kvstore driver's list and delete_range (see kv_lmdb.c for the driver, lmdb_internal.h
 * for what the two files share).
 *
 * Lists run in batches of LM_LIST_BATCH keys, each in its own read transaction under a guard
 * (lmdb_env.h), so no transaction is held while the caller's function runs. Every key a cursor
 * walk yields is checked (inside the map, not longer than a key can be, after the previous one):
 * a damaged B-tree that loops back cannot make a listing run forever.
 * Threading: as the driver (internally synchronised).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ndstore/sys/buf.h"
#include "internal/error.h"
#include "internal/util.h"
#include "lmdb_internal.h"

/* Keys copied out of one read transaction: NUL-terminated full keys, plus value sizes. */
typedef struct lm_batch {
    nds_buf text;
    uint64_t sizes[LM_LIST_BATCH];
    size_t n;
} lm_batch;

/* Positions c at the first key >= from (> from when after), or the first key when from is "". */
static int lm_seek(MDB_cursor *c, const char *from, bool after, MDB_val *k, MDB_val *v) {
    *k = (MDB_val){strlen(from), (void *)from};
    int rc = mdb_cursor_get(c, k, v, k->mv_size ? MDB_SET_RANGE : MDB_FIRST);
    if (rc == 0 && after && nds_lmdb_cmp(k, from) == 0)
        rc = mdb_cursor_get(c, k, v, MDB_NEXT);
    return rc;
}

/* One batch of a listing (fn of a guard: a corrupt page ends it with the guard's error). */
typedef struct lm_list_call {
    lm_state *s;
    MDB_txn *txn;
    MDB_cursor *cur; /* NULL until opened */
    const char *pre, *rel, *from;
    size_t pre_len;
    bool after;
    lm_batch *b;
} lm_list_call;

static int lm_mv_cmp(const MDB_val *x, const MDB_val *y) {
    size_t m = x->mv_size < y->mv_size ? x->mv_size : y->mv_size;
    int c = memcmp(x->mv_data, y->mv_data, m);
    return c ? c : (x->mv_size > y->mv_size) - (x->mv_size < y->mv_size);
}

/* A key a cursor walk found: inside the map, no longer than a key can be, and after the previous
 * one (or `from`). A B-tree walk yields strictly increasing keys; a damaged one that loops back
 * (a page pointing to an earlier page) breaks the order, so checking it bounds every listing by
 * the keys the file holds instead of looping forever. */
static int lm_list_key(const lm_list_call *c, const MDB_val *k, const MDB_val *prev) {
    nds_lmdb_env *e = c->s->e;
    int rc = nds_lmdb_check_val(e, k, false, "listed key");
    if (rc == 0 && k->mv_size > (size_t)e->max_key)
        rc = nds_err(NDS_ECORRUPT, "lmdb: list \"%s\" in %s: data.mdb is corrupt: a key of %zu "
                     "bytes (at most %d)", c->rel, e->canon, k->mv_size, e->max_key);
    int order = rc ? 0 : lm_mv_cmp(k, prev);
    int shown = (int)(prev->mv_size > 200 ? 200 : prev->mv_size);
    if (rc == 0 && (order < 0 || (order == 0 && (prev->mv_data != c->from || c->after))))
        rc = nds_err(NDS_ECORRUPT, "lmdb: list \"%s\" in %s: data.mdb is corrupt: keys out of "
                     "order after %.*s", c->rel, e->canon, shown, (const char *)prev->mv_data);
    return rc;
}

static int lm_list_fn(void *arg) {
    lm_list_call *c = arg;
    lm_batch *b = c->b;
    size_t rlen = strlen(c->rel);
    MDB_val k, v, prev = {strlen(c->from), (void *)c->from};
    /* mdb_stat first: it reads the database's record (a page a damaged file may fault on) with a
     * cursor on the stack, so the cursor mdb_cursor_open allocates is never cut short unowned. */
    MDB_stat st;
    int rc = 0, mrc = mdb_stat(c->txn, c->s->e->data, &st);
    if (mrc == 0)
        mrc = mdb_cursor_open(c->txn, c->s->e->data, &c->cur);
    if (mrc == 0)
        mrc = lm_seek(c->cur, c->from, c->after, &k, &v);
    for (; mrc == 0 && rc == 0 && b->n < LM_LIST_BATCH;
         mrc = mdb_cursor_get(c->cur, &k, &v, MDB_NEXT)) {
        if ((rc = lm_list_key(c, &k, &prev)) != 0)
            break;
        if (k.mv_size < rlen || memcmp(k.mv_data, c->rel, rlen) != 0)
            break;
        if (nds_buf_append(&b->text, c->pre, c->pre_len) ||
            nds_buf_append(&b->text, k.mv_data, k.mv_size) || nds_buf_append(&b->text, "", 1))
            rc = nds_err(NDS_ENOMEM, "lmdb: out of memory listing %s", c->rel);
        b->sizes[b->n++] = v.mv_size >= LM_HDR ? v.mv_size - LM_HDR : 0;
        prev = k;
    }
    if (mrc != 0 && mrc != MDB_NOTFOUND && rc == 0)
        rc = nds_lmdb_err(mrc, "list %s in %s", c->rel, c->s->e->canon);
    return rc;
}

/* Copies up to LM_LIST_BATCH keys starting with rel (from `from` on) as pre + key. */
static int lm_list_batch(lm_state *s, const char *pre, size_t pre_len, const char *rel,
                         const char *from, bool after, lm_batch *b) {
    lm_list_call c = {s, NULL, NULL, pre, rel, from, pre_len, after, b};
    size_t seen;
    int rc = nds_lmdb_txn_begin(s->e, MDB_RDONLY, &c.txn, &seen);
    if (rc)
        return rc;
    b->n = 0;
    b->text.len = 0;
    rc = nds_lmdb_guarded(s->e, lm_list_fn, &c, "list");
    if (c.cur)
        mdb_cursor_close(c.cur);
    mdb_txn_abort(c.txn);
    nds_lmdb_use_end(s->e);
    return rc;
}

/* Lists in batches so no transaction is held while fn runs (fn may write to this store). */
int nds_lmdb_list(void *state, const char *prefix, nds_list_fn fn, void *ctx) {
    lm_state *s = state;
    const char *rel = nds_lmdb_rel(s, prefix);
    size_t pre_len = (size_t)(rel - prefix);
    int rc = nds_lmdb_check_process(s);
    if (rc || strlen(rel) > (size_t)s->e->max_key)
        return rc; /* no stored key can start with a prefix that long */
    lm_batch *b = calloc(1, sizeof *b);
    char *from = nds_strdup(rel);
    if (!b || !from)
        rc = nds_err(NDS_ENOMEM, "lmdb: out of memory listing %s", prefix);
    for (bool after = false; rc == 0; after = true) {
        if ((rc = lm_list_batch(s, prefix, pre_len, rel, from, after, b)) != 0)
            break;
        const char *key = (const char *)b->text.data, *last = NULL;
        for (size_t i = 0; rc == 0 && i < b->n; key += strlen(key) + 1, i++)
            rc = fn(ctx, last = key, b->sizes[i]);
        if (rc || b->n < LM_LIST_BATCH)
            break;
        free(from);
        if (!(from = nds_strdup(last + pre_len))) /* the next batch starts after the last key */
            rc = nds_err(NDS_ENOMEM, "lmdb: out of memory listing %s", prefix);
    }
    if (b)
        nds_buf_dispose(&b->text);
    free(b);
    free(from);
    return rc;
}

typedef struct lm_range {
    const char *begin, *end; /* stored keys; end "" = unbounded */
} lm_range;

static int lm_delete_range_fn(lm_state *s, MDB_txn *txn, void *ctx, int *status) {
    (void)status;
    const lm_range *r = ctx;
    MDB_cursor *c = NULL;
    MDB_val k, v;
    int rc = mdb_cursor_open(txn, s->e->data, &c);
    /* Re-seek after each delete: everything in [begin, k) is gone, so the seek finds the next. */
    while (rc == 0 && (rc = lm_seek(c, r->begin, false, &k, &v)) == 0) {
        if (r->end[0] && nds_lmdb_cmp(&k, r->end) >= 0)
            break;
        rc = mdb_cursor_del(c, 0);
    }
    if (c)
        mdb_cursor_close(c);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

/* Deletes [begin, end) of full keys in one write transaction. A range of env-relative keys is
 * mapped to stored keys; an end beyond every "<env>/" key becomes unbounded. */
int nds_lmdb_delete_range(void *state, const char *begin, const char *end) {
    lm_state *s = state;
    lm_range r = {nds_lmdb_rel(s, begin), end};
    if (r.begin != begin && end[0]) {
        if (strncmp(end, s->strip, s->strip_len) == 0)
            r.end = end + s->strip_len;
        else if (strcmp(end, s->strip) > 0)
            r.end = "";
        else
            return nds_lmdb_check_process(s); /* end <= "<env>/" <= begin: empty */
    }
    if (r.end[0] && strcmp(r.begin, r.end) >= 0)
        return nds_lmdb_check_process(s);
    if (strlen(r.begin) > (size_t)s->e->max_key)
        return nds_err(NDS_EINVAL, "lmdb: delete_range begin %s longer than %d bytes", begin,
                       s->e->max_key);
    return nds_lmdb_write_txn(s, lm_delete_range_fn, &r, "delete_range from", begin);
}
