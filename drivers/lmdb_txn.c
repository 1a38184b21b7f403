/* What both files of the lmdb driver (kv_lmdb.c, lmdb_list.c) call, below them: the fork check,
 * stored keys and their order, and the write transaction runner (grows the map on MDB_MAP_FULL).
 * Calls only lmdb_env.c. Thread-safe: each call uses its own transaction. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <lmdb.h>

#include "internal/error.h"
#include "lmdb_internal.h"

/* NDS_EUNSUPPORTED when the instance was opened by the parent of a fork (LMDB forbids its use). */
int nds_lmdb_check_process(const lm_state *s) {
    if (s->e->pid == getpid())
        return 0;
    return nds_err(NDS_EUNSUPPORTED, "lmdb: kvstore on %s was opened before fork(); open it again "
                   "in this process", s->env_text);
}

/* The stored key for a full key (env-relative when it starts with "<env>/"). */
const char *nds_lmdb_rel(const lm_state *s, const char *full) {
    return strncmp(full, s->strip, s->strip_len) == 0 ? full + s->strip_len : full;
}

/* memcmp order then length: LMDB's own key order (= strcmp order for strings). */
int nds_lmdb_cmp(const MDB_val *k, const char *s) {
    size_t n = strlen(s), m = k->mv_size < n ? k->mv_size : n;
    int c = memcmp(k->mv_data, s, m);
    return c ? c : (k->mv_size > n) - (k->mv_size < n);
}

/* One attempt of nds_lmdb_write_txn: fn, then commit or abort (fn of a guard). */
typedef struct lm_write_call {
    lm_state *s;
    MDB_txn *txn; /* NULL once ended */
    lm_txn_fn fn;
    void *ctx;
    int status, mrc;
} lm_write_call;

static int lm_write_body(void *arg) {
    lm_write_call *w = arg;
    w->mrc = w->fn(w->s, w->txn, w->ctx, &w->status);
    if (w->mrc == 0 && w->status == 0)
        w->mrc = mdb_txn_commit(w->txn);
    else
        mdb_txn_abort(w->txn);
    w->txn = NULL;
    return 0;
}

/* Runs fn in a write transaction and commits it; grows the map and starts over on MDB_MAP_FULL.
 * A damaged page met on the way aborts the transaction and leaves the environment broken. */
int nds_lmdb_write_txn(lm_state *s, lm_txn_fn fn, void *ctx, const char *op, const char *key) {
    int rc = nds_lmdb_check_process(s);
    for (int attempt = 0; rc == 0; attempt++) {
        lm_write_call w = {s, NULL, fn, ctx, 0, 0};
        size_t seen;
        if ((rc = nds_lmdb_txn_begin(s->e, 0, &w.txn, &seen)) != 0)
            break;
        char what[300];
        snprintf(what, sizeof what, "%s %s", op, key);
        if ((rc = nds_lmdb_guarded(s->e, lm_write_body, &w, what)) != 0) {
            if (w.txn)
                mdb_txn_abort(w.txn); /* cut short: only release it */
            nds_lmdb_mark_broken(s->e);
            nds_lmdb_use_end(s->e);
            return rc;
        }
        int status = w.status, mrc = w.mrc;
        nds_lmdb_use_end(s->e);
        if (mrc == MDB_MAP_FULL && attempt < 64)
            rc = nds_lmdb_grow(s->e, seen);
        else if (mrc != 0)
            return nds_lmdb_err(mrc, "%s %s in %s", op, key, s->e->canon);
        else
            return status;
    }
    return rc;
}
