/* The "lmdb" kvstore driver: keys in one LMDB environment (a directory holding data.mdb and
 * lock.mdb).
 *
 * Implements read (conditions, byte ranges, zero-copy for values above LM_COPY_MAX bytes), write
 * and delete checked inside one write transaction, list by prefix (cursor seeks), delete_range and
 * the all-or-nothing multi-key commit in one write transaction each, and staged writes (stage
 * copies a value to the heap; publish applies a batch of them, each with its own condition, in one
 * write transaction: one commit and one sync per batch). Omits: nested transactions,
 * read-only environments, environments on network filesystems (LMDB's locks need a local one).
 *
 * Layout: two named databases. "data" maps the env-relative key to an 8-byte big-endian generation
 * number followed by the value; "meta" holds "generation" (the last number handed out, bumped in
 * the same write transaction that stores a value, so a key deleted and created again never repeats
 * one) and "env_id" (8 random bytes chosen at creation). A generation reads
 * "<number>.<env_id hex>", so an environment deleted and created again does not repeat the old
 * one's generations either.
 *
 * Keys: a full key that starts with "<env>/" is taken relative to the environment, so the URL form
 * lmdb:///d/x.lmdb/a/ (path "/d/x.lmdb/a/") and the spec {"env":"/d/x.lmdb","path":"a/"} name the
 * same stored keys ("a/..."); any other full key is stored as it is.
 *
 * Threading: internally synchronised. Instances on one environment share one MDB_env through the
 * process-wide table of lmdb_env.h, which also grows the map (on MDB_MAP_FULL) once no transaction
 * or zero-copy read of this process uses it. Processes are coordinated by LMDB's own lock file;
 * readers never block writers.
 *
 * Files: this one (spec, read, write, commit, stage and publish, the driver table) and
 * lmdb_list.c (list, delete_range), both above lmdb_txn.c (fork check, keys, write transactions);
 * lmdb_internal.h holds what they share. Corrupt files: every
 * LMDB call that reads pages runs under nds_lmdb_guarded (lmdb_env.h), and values are checked to
 * lie in the file before they are copied or handed out.
 *
 * Ownership: a zero-copy read result holds its read transaction (and a reference on the
 * environment) until nds_read_result_dispose; smaller values are copied and hold nothing.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>
#include <lmdb.h>

#include "ndstore/sys/buf.h"
#include "ndstore/sys/kv_driver.h"
#include "internal/error.h"
#include "internal/json_util.h"
#include "internal/util.h"
#include "lmdb_internal.h"

#define LM_COPY_MAX 4096                  /* values (ranges) up to this are copied, not pinned */
#define LM_MIN_MAP (UINT64_C(64) << 10)   /* smallest map_size accepted */
#define LM_DEFAULT_MAP (UINT64_C(1) << 30)
#define LM_DEFAULT_MAX_MAP (UINT64_C(1) << 40)

/** A zero-copy read: the transaction whose snapshot the bytes live in. */
typedef struct lm_pin {
    nds_lmdb_env *e;
    MDB_txn *txn;
} lm_pin;

/* ---- keys, values, generations ---- */

static int lm_key(const lm_state *s, const char *full, MDB_val *k) {
    const char *rel = nds_lmdb_rel(s, full);
    size_t n = strlen(rel);
    if (n == 0)
        return nds_err(NDS_EINVAL, "lmdb: empty key \"%s\" in %s", full, s->env_text);
    if (n > (size_t)s->e->max_key)
        return nds_err(NDS_EINVAL, "lmdb: key %s is longer than %d bytes", rel, s->e->max_key);
    *k = (MDB_val){n, (void *)rel};
    return 0;
}

static uint64_t lm_be64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

static void lm_put_be64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static void lm_gen(const nds_lmdb_env *e, uint64_t n, nds_generation *g) {
    char text[48];
    snprintf(text, sizeof text, "%llu.%016llx", (unsigned long long)n,
             (unsigned long long)e->env_id);
    nds_generation_set(g, text);
}

/* The generation of a stored value v (found) or ABSENT. NDS_ECORRUPT on a value too short. */
static int lm_gen_of(const nds_lmdb_env *e, const MDB_val *v, bool found, nds_generation *g) {
    if (!found) {
        g->kind = NDS_GEN_ABSENT;
        g->value[0] = '\0';
        return 0;
    }
    if (v->mv_size < LM_HDR)
        return nds_err(NDS_ECORRUPT, "lmdb: value in %s is %zu bytes, shorter than its header",
                       e->canon, v->mv_size);
    lm_gen(e, lm_be64(v->mv_data), g);
    return 0;
}

/* ---- spec ---- */

/* Length of the environment part of path: up to and including its first component ending in
 * ".lmdb"; 0 when there is none. */
static size_t lm_env_len(const char *path) {
    for (const char *c = path; *c;) {
        const char *end = strchr(c, '/');
        size_t n = end ? (size_t)(end - c) : strlen(c);
        if (n >= 5 && memcmp(c + n - 5, ".lmdb", 5) == 0)
            return (size_t)(c - path) + n;
        c += n + (end != NULL);
    }
    return 0;
}

static int lm_parse_url(const char *rest, struct json_object *spec) {
    size_t n = lm_env_len(rest);
    if (n == 0)
        return nds_err(NDS_EINVAL, "lmdb: url path \"%s\" names no environment: one component "
                       "must end in .lmdb (lmdb:///d/db.lmdb/prefix/)", rest);
    char *env = nds_asprintf("%.*s", (int)n, rest);
    char *path = nds_asprintf("%s%s", rest, rest[n] ? "" : "/");
    json_object *je = env ? json_object_new_string(env) : NULL;
    json_object *jp = path ? json_object_new_string(path) : NULL;
    free(env);
    free(path);
    if (!je || !jp) {
        json_object_put(je);
        json_object_put(jp);
        return nds_err(NDS_ENOMEM, "lmdb: out of memory parsing url");
    }
    json_object_object_add(spec, "env", je);
    json_object_object_add(spec, "path", jp);
    return 0;
}

/* Re-codes the json helper's error (NDS_EFORMAT, for documents) as a bad spec. */
static int lm_spec_err(void) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", nds_error_last()->message);
    return nds_err(NDS_EINVAL, "%s", msg);
}

/* An integer option in [min, max]; NDS_EINVAL naming it otherwise. */
static int lm_opt_int(const json_object *spec, const char *name, int64_t min, int64_t max,
                      int64_t *out) {
    if (nds_json_get_int(spec, name, true, min, max, "lmdb kvstore spec", out) == 0)
        return 0;
    return lm_spec_err();
}

static int lm_options_parse(const json_object *spec, nds_lmdb_options *o) {
    int64_t map = (int64_t)LM_DEFAULT_MAP, max_map = (int64_t)LM_DEFAULT_MAX_MAP;
    int64_t limit = SIZE_MAX > INT64_MAX ? INT64_MAX : (int64_t)SIZE_MAX;
    o->max_readers = 126;
    o->nosync = false;
    int rc = lm_opt_int(spec, "max_map_size", (int64_t)LM_MIN_MAP, limit, &max_map);
    if (rc == 0)
        rc = lm_opt_int(spec, "map_size", (int64_t)LM_MIN_MAP, max_map, &map);
    if (rc == 0)
        rc = lm_opt_int(spec, "max_readers", 1, 1 << 20, &o->max_readers);
    if (rc == 0 && nds_json_get_bool(spec, "nosync", true, "lmdb kvstore spec", &o->nosync) != 0)
        rc = lm_spec_err();
    o->map_size = (uint64_t)(map < max_map ? map : max_map);
    o->max_map = (uint64_t)max_map;
    return rc;
}

/* The environment named by the spec: "env", else derived from an absolute "path". */
static int lm_spec_env(const json_object *spec, char **out) {
    const char *env = NULL, *path = "";
    int rc = nds_json_get_string(spec, "env", true, "lmdb kvstore spec", &env);
    if (rc == 0)
        rc = nds_json_get_string(spec, "path", true, "lmdb kvstore spec", &path);
    if (rc)
        return lm_spec_err();
    size_t n = env ? strlen(env) : lm_env_len(path);
    if (!env)
        env = path;
    while (n > 1 && env[n - 1] == '/')
        n--;
    if (n == 0)
        return nds_err(NDS_EINVAL, "lmdb: spec needs \"env\" (the environment directory) or a "
                       "\"path\" with a component ending in .lmdb");
    *out = nds_asprintf("%.*s", (int)n, env);
    return *out ? 0 : nds_err(NDS_ENOMEM, "lmdb: out of memory");
}

static void lm_close(void *state) {
    lm_state *s = state;
    if (!s)
        return;
    if (s->e)
        nds_lmdb_env_release(s->e);
    free(s->env_text);
    free(s->strip);
    free(s->url_base);
    free(s);
}

static int lm_open(void **state, const struct json_object *spec) {
    nds_lmdb_options o;
    const char *path = "";
    lm_state *s = calloc(1, sizeof *s);
    if (!s)
        return nds_err(NDS_ENOMEM, "lmdb: out of memory");
    int rc = lm_options_parse(spec, &o);
    if (rc == 0)
        rc = lm_spec_env(spec, &s->env_text);
    if (rc == 0) {
        nds_json_get_string(spec, "path", true, "lmdb kvstore spec", &path);
        s->strip = nds_asprintf("%s/", s->env_text);
        s->strip_len = s->strip ? strlen(s->strip) : 0;
        bool absolute = s->strip && strncmp(path, s->strip, s->strip_len) == 0;
        s->url_base = nds_asprintf("lmdb://%s", absolute ? "" : s->strip);
        if (!s->strip || !s->url_base)
            rc = nds_err(NDS_ENOMEM, "lmdb: out of memory");
    }
    if (rc == 0)
        rc = nds_lmdb_env_acquire(s->env_text, &o, &s->e);
    if (rc) {
        lm_close(s);
        return rc;
    }
    *state = s;
    return 0;
}

static void lm_url_base(void *state, char *buf, size_t cap) {
    snprintf(buf, cap, "%s", ((lm_state *)state)->url_base);
}

static int lm_to_json(void *state, struct json_object *spec) {
    json_object *env = json_object_new_string(((lm_state *)state)->env_text);
    if (!env)
        return nds_err(NDS_ENOMEM, "lmdb: out of memory");
    json_object_object_add(spec, "env", env);
    return 0;
}

/* ---- read ---- */

static void lm_pin_release(void *ctx, const uint8_t *data) {
    (void)data;
    lm_pin *p = ctx;
    if (p->e->pid == getpid()) { /* a forked child must not touch the parent's transaction */
        mdb_txn_abort(p->txn);
        nds_lmdb_use_end(p->e);
    }
    nds_lmdb_env_release(p->e);
    free(p);
}

/* Hands out v's bytes [off, off+len): copied when small, else pinned with txn (which it then owns).
 * @return 1 when txn was taken, 0 when the caller still ends it, or an error */
static int lm_read_bytes(lm_state *s, MDB_txn *txn, const uint8_t *data, size_t len,
                         nds_bytes *out, const char *key) {
    /* Inside data.mdb as last seen: neither the copy nor the caller's use of a pin can fault
     * unless the file shrank since (then the guard catches the copy). */
    MDB_val span = {len, (void *)data};
    int rc = nds_lmdb_check_val(s->e, &span, true, key);
    if (rc)
        return rc;
    if (len <= LM_COPY_MAX) {
        uint8_t *copy = malloc(len ? len : 1);
        if (!copy)
            return nds_err(NDS_ENOMEM, "lmdb: out of memory reading %s", key);
        nds_bytes_take(out, copy, len); /* owned by out first: a fault in the copy leaks nothing */
        memcpy(copy, data, len);
        return 0;
    }
    lm_pin *p = malloc(sizeof *p);
    if (!p)
        return nds_err(NDS_ENOMEM, "lmdb: out of memory");
    nds_lmdb_env_ref(s->e);
    *p = (lm_pin){s->e, txn};
    *out = (nds_bytes){data, len, lm_pin_release, p};
    return 1;
}

/* Copies the ranges out of the mapped value (inside the read's guard and transaction). */
static int lm_copy_ranges(lm_state *s, const MDB_val *v, const nds_byte_range *ranges, size_t n,
                          const char *key, uint64_t total) {
    MDB_val span = {(size_t)total, (uint8_t *)v->mv_data + LM_HDR};
    int rc = nds_lmdb_check_val(s->e, &span, true, key);
    return rc ? rc : nds_byte_ranges_copy(ranges, n, span.mv_data, total, key);
}

/* A read inside its transaction (fn of a guard: a corrupt page ends it with the guard's error). */
typedef struct lm_read_call {
    lm_state *s;
    MDB_txn *txn;
    const char *key;
    MDB_val k;
    const nds_read_options *o;
    const nds_byte_range *ranges; /* read's n > 0 form: copied from the mapped value */
    size_t n;
    nds_read_result *out;
} lm_read_call;

/* Applies conditions and range to the value found (or not) inside c's txn. Same outcome as a
 * single atomic read: the whole decision sees one snapshot. */
static int lm_read_in(lm_read_call *c, const MDB_val *v, bool found) {
    lm_state *s = c->s;
    const nds_read_options *o = c->o;
    nds_read_result *out = c->out;
    const char *key = c->key;
    int rc = lm_gen_of(s->e, v, found, &out->generation);
    if (rc)
        return rc;
    out->total_size = found ? v->mv_size - LM_HDR : 0;
    if (o->if_equal.kind != NDS_GEN_NONE && !nds_generation_equal(&o->if_equal, &out->generation))
        out->state = NDS_READ_ABORTED;
    else if (nds_generation_equal(&o->if_not_equal, &out->generation))
        out->state = NDS_READ_UNCHANGED;
    else if (!found)
        out->state = NDS_READ_MISSING;
    else if (c->n > 0) {
        out->state = NDS_READ_VALUE;
        return lm_copy_ranges(s, v, c->ranges, c->n, key, out->total_size);
    } else {
        uint64_t off, len;
        if ((rc = nds_byte_range_resolve(o, out->total_size, &off, &len)) != 0)
            return nds_err_prefix(rc, "lmdb: read %s", key);
        out->state = NDS_READ_VALUE;
        return lm_read_bytes(s, c->txn, (const uint8_t *)v->mv_data + LM_HDR + off, (size_t)len,
                             &out->value, key);
    }
    return 0;
}

static int lm_read_fn(void *arg) {
    lm_read_call *c = arg;
    MDB_val v;
    int mrc = mdb_get(c->txn, c->s->e->data, &c->k, &v);
    if (mrc != 0 && mrc != MDB_NOTFOUND)
        return nds_lmdb_err(mrc, "read %s in %s", c->key, c->s->e->canon);
    int rc = mrc == 0 ? nds_lmdb_check_val(c->s->e, &v, false, c->key) : 0;
    return rc ? rc : lm_read_in(c, &v, mrc == 0);
}

static int lm_read(void *state, const char *key, const nds_read_options *opts,
                   const nds_byte_range *ranges, size_t n, nds_read_result *out) {
    static const nds_read_options defaults = NDS_READ_OPTIONS_INIT;
    lm_state *s = state;
    memset(out, 0, sizeof *out);
    lm_read_call c = {s, NULL, key, {0, NULL}, opts ? opts : &defaults, ranges, n, out};
    size_t seen;
    int rc = nds_lmdb_check_process(s);
    if (rc == 0)
        rc = lm_key(s, key, &c.k);
    if (rc == 0)
        rc = nds_lmdb_txn_begin(s->e, MDB_RDONLY, &c.txn, &seen);
    if (rc)
        return rc;
    MDB_txn *txn = c.txn;
    rc = nds_lmdb_guarded(s->e, lm_read_fn, &c, "read");
    if (rc == 1) /* the result holds the transaction */
        return 0;
    mdb_txn_abort(txn);
    nds_lmdb_use_end(s->e);
    if (rc) {
        uint64_t total = out->total_size; /* still told for a range past the end */
        nds_read_result_dispose(out); /* a copy a fault cut short */
        memset(out, 0, sizeof *out);
        if (rc == NDS_ERANGE)
            out->total_size = total;
    }
    return rc;
}

/* ---- write transactions ---- */


/* The generation counter of a write transaction: read once, bumped per stored value, saved once. */
typedef struct lm_counter {
    uint64_t next;
    bool loaded, dirty;
} lm_counter;

static int lm_counter_take(lm_state *s, MDB_txn *txn, lm_counter *c, uint64_t *out) {
    if (!c->loaded) {
        MDB_val k = {10, "generation"}, v;
        int rc = mdb_get(txn, s->e->meta, &k, &v);
        if (rc && rc != MDB_NOTFOUND)
            return rc;
        c->next = rc == 0 && v.mv_size == 8 ? lm_be64(v.mv_data) : 0;
        c->loaded = true;
    }
    *out = ++c->next;
    c->dirty = true;
    return 0;
}

static int lm_counter_save(lm_state *s, MDB_txn *txn, const lm_counter *c) {
    if (!c->dirty)
        return 0;
    uint8_t buf[8];
    lm_put_be64(buf, c->next);
    MDB_val k = {10, "generation"}, v = {8, buf};
    return mdb_put(txn, s->e->meta, &k, &v, 0);
}

/* A write transaction under way: the store, LMDB's transaction and its generation counter. */
typedef struct lm_wtxn {
    lm_state *s;
    MDB_txn *txn;
    lm_counter counter;
} lm_wtxn;

/* One write (data != NULL) or delete of a stored key, conditional on if_equal. *ok = false (and
 * nothing changed) when the condition fails. @return an LMDB code; *status for corrupt values */
static int lm_apply(lm_wtxn *w, const nds_kv_op *op, MDB_val *k, nds_generation *gen, bool *ok,
                    int *status) {
    lm_state *s = w->s;
    MDB_txn *txn = w->txn;
    MDB_val v;
    int rc = mdb_get(txn, s->e->data, k, &v);
    if (rc && rc != MDB_NOTFOUND)
        return rc;
    nds_generation cur;
    if ((*status = lm_gen_of(s->e, &v, rc == 0, &cur)) != 0)
        return 0;
    if (!(*ok = nds_generation_satisfies(&op->if_equal, &cur)))
        return 0;
    if (!op->data) {
        lm_gen_of(s->e, NULL, false, gen);
        return rc == 0 ? mdb_del(txn, s->e->data, k, NULL) : 0;
    }
    uint64_t n;
    if ((rc = lm_counter_take(s, txn, &w->counter, &n)) != 0)
        return rc;
    v.mv_size = op->len + LM_HDR;
    if ((rc = mdb_put(txn, s->e->data, k, &v, MDB_RESERVE)) != 0)
        return rc;
    lm_put_be64(v.mv_data, n);
    if (op->len)
        memcpy((uint8_t *)v.mv_data + LM_HDR, op->data, op->len);
    lm_gen(s->e, n, gen);
    return 0;
}

/* A single write or delete: lm_apply + the counter, failing with NDS_ECONFLICT. */
static int lm_write_fn(lm_state *s, MDB_txn *txn, void *ctx, int *status) {
    nds_kv_op *op = ctx;
    MDB_val k;
    lm_key(s, op->key, &k); /* checked by lm_write */
    lm_wtxn w = {s, txn, {0}};
    bool ok = true;
    int rc = lm_apply(&w, op, &k, &op->new_generation, &ok, status);
    if (rc == 0 && *status == 0 && !ok)
        *status = nds_err(NDS_ECONFLICT, "lmdb: %s %s: generation changed",
                          op->data ? "write" : "delete", op->key);
    return rc || *status ? rc : lm_counter_save(s, txn, &w.counter);
}

static int lm_write_value(void *state, const char *key, const uint8_t *data, size_t len,
                          const nds_write_options *opts, nds_generation *new_gen) {
    lm_state *s = state;
    MDB_val k;
    int rc = lm_key(s, key, &k);
    if (rc)
        return rc;
    if (data && len > SIZE_MAX - LM_HDR)
        return nds_err(NDS_ELIMIT, "lmdb: value of %s too large", key);
    nds_kv_op op = {key, data, len, {NDS_GEN_NONE, {0}}, {NDS_GEN_NONE, {0}}};
    if (opts)
        op.if_equal = opts->if_equal;
    rc = nds_lmdb_write_txn(s, lm_write_fn, &op, data ? "write" : "delete", key);
    if (rc == 0 && new_gen)
        *new_gen = op.new_generation;
    return rc;
}

/* The pieces are gathered (one copy when there are several) and stored in one transaction. */
static int lm_write(void *state, const char *key, const struct iovec *iov, size_t iovcnt,
                    const nds_write_options *opts, nds_generation *new_gen) {
    return nds_kv_write_gathered(state, key, iov, iovcnt, opts, new_gen, lm_write_value);
}

/* ---- commit ---- */

typedef struct lm_commit_ctx {
    nds_kv_op *ops;
    MDB_val *keys;
    size_t n;
} lm_commit_ctx;

static int lm_val_cmp(const void *a, const void *b) {
    const MDB_val *x = *(const MDB_val *const *)a, *y = *(const MDB_val *const *)b;
    size_t m = x->mv_size < y->mv_size ? x->mv_size : y->mv_size;
    int c = memcmp(x->mv_data, y->mv_data, m);
    return c ? c : (x->mv_size > y->mv_size) - (x->mv_size < y->mv_size);
}

/* Stored keys of the ops into keys[]; NDS_EINVAL for a bad key or one that appears twice (the
 * conditions are all checked against the state before the commit, ill-defined for two writes). */
static int lm_commit_keys(lm_state *s, nds_kv_op *ops, size_t n, MDB_val *keys) {
    const MDB_val **sorted = malloc((n ? n : 1) * sizeof *sorted);
    if (!sorted)
        return nds_err(NDS_ENOMEM, "lmdb: out of memory in commit");
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        sorted[i] = &keys[i];
        rc = lm_key(s, ops[i].key, &keys[i]);
        if (rc == 0 && ops[i].data && ops[i].len > SIZE_MAX - LM_HDR)
            rc = nds_err(NDS_ELIMIT, "lmdb: value of %s too large", ops[i].key);
    }
    if (rc == 0)
        qsort(sorted, n, sizeof *sorted, lm_val_cmp);
    for (size_t i = 1; i < n && rc == 0; i++) {
        if (lm_val_cmp(&sorted[i - 1], &sorted[i]) == 0)
            rc = nds_err(NDS_EINVAL, "lmdb: commit writes key %.*s twice",
                         (int)sorted[i]->mv_size, (const char *)sorted[i]->mv_data);
    }
    free(sorted);
    return rc;
}

static int lm_commit_fn(lm_state *s, MDB_txn *txn, void *ctx, int *status) {
    lm_commit_ctx *c = ctx;
    lm_wtxn w = {s, txn, {0}};
    for (size_t i = 0; i < c->n; i++) {
        bool ok = true;
        int rc = lm_apply(&w, &c->ops[i], &c->keys[i], &c->ops[i].new_generation, &ok, status);
        if (rc || *status)
            return rc;
        if (!ok) {
            *status = nds_err(NDS_ECONFLICT, "lmdb: commit: generation of %s changed",
                              c->ops[i].key);
            return 0;
        }
    }
    return lm_counter_save(s, txn, &w.counter);
}

/* Checks every op's condition and applies every op in one write transaction: all or nothing. */
static int lm_commit(void *state, nds_kv_op *ops, size_t n) {
    lm_state *s = state;
    lm_commit_ctx c = {ops, calloc(n ? n : 1, sizeof(MDB_val)), n};
    if (!c.keys)
        return nds_err(NDS_ENOMEM, "lmdb: out of memory in commit");
    int rc = lm_commit_keys(s, ops, n, c.keys);
    if (rc == 0)
        rc = nds_lmdb_write_txn(s, lm_commit_fn, &c, "commit", n ? ops[0].key : "(empty)");
    for (size_t i = 0; rc != 0 && i < n; i++)
        ops[i].new_generation.kind = NDS_GEN_NONE; /* nothing was applied */
    free(c.keys);
    return rc;
}

/* ---- staged writes (two-phase: stage many, publish them in one transaction) ---- */

/** A staged value: heap copies of the value and its full key. Nothing is in the store until
 *  publish, so discarding is just freeing. */
struct nds_kv_staged {
    const char *key; /* points after the value, in the same allocation */
    size_t len;
    uint8_t data[];
};

/* Checks the key now, so that publish only meets failures of the store itself. */
static int lm_stage(void *state, const char *key, const uint8_t *data, size_t len,
                    nds_kv_staged **out) {
    lm_state *s = state;
    MDB_val k;
    *out = NULL;
    int rc = nds_lmdb_check_process(s);
    if (rc == 0)
        rc = lm_key(s, key, &k);
    if (rc)
        return rc;
    size_t klen = strlen(key) + 1;
    if (len > SIZE_MAX - LM_HDR - klen - sizeof(nds_kv_staged))
        return nds_err(NDS_ELIMIT, "lmdb: value of %s too large", key);
    nds_kv_staged *t = malloc(sizeof *t + len + klen);
    if (!t)
        return nds_err(NDS_ENOMEM, "lmdb: out of memory staging %s", key);
    if (len)
        memcpy(t->data, data, len);
    t->key = memcpy(t->data + len, key, klen);
    t->len = len;
    *out = t;
    return 0;
}

static void lm_discard(void *state, nds_kv_staged *staged) {
    (void)state;
    free(staged);
}

typedef struct lm_publish_ctx {
    nds_kv_staged **staged;
    nds_kv_publish *res;
    size_t n;
    int err; /* first value that failed on its own (a corrupt stored value), else 0 */
} lm_publish_ctx;

/* Applies each value in order as lm_write_fn would, but a failed condition (or a corrupt stored
 * value) skips only that value: the transaction still commits the others. Runs again from the
 * start after a map growth, so it sets every result each time. */
static int lm_publish_fn(lm_state *s, MDB_txn *txn, void *ctx, int *status) {
    (void)status;
    lm_publish_ctx *p = ctx;
    lm_wtxn w = {s, txn, {0}};
    p->err = 0;
    for (size_t i = 0; i < p->n; i++) /* outcomes of this attempt only */
        p->res[i].status = 0;
    for (size_t i = 0; i < p->n; i++) {
        const nds_kv_staged *t = p->staged[i];
        nds_kv_publish *r = &p->res[i];
        nds_kv_op op = {t->key, t->data, t->len, r->if_equal, {NDS_GEN_NONE, {0}}};
        MDB_val k;
        bool ok = true;
        lm_key(s, t->key, &k); /* checked by lm_stage */
        r->new_generation.kind = NDS_GEN_NONE;
        int mrc = lm_apply(&w, &op, &k, &r->new_generation, &ok, &r->status);
        if (mrc)
            return mrc;
        if (r->status == 0 && !ok)
            r->status = NDS_ECONFLICT;
        if (r->status != 0 && r->status != NDS_ECONFLICT && p->err == 0)
            p->err = r->status;
    }
    return lm_counter_save(s, txn, &w.counter);
}

/* One write transaction (one commit, one sync) for the n values, instead of one per value. When
 * it cannot commit, nothing was applied: every value but the conflicted ones gets the error. */
static int lm_publish(void *state, nds_kv_staged **staged, nds_kv_publish *res, size_t n) {
    lm_state *s = state;
    lm_publish_ctx p = {staged, res, n, 0};
    char what[64];
    snprintf(what, sizeof what, "publish %zu values from", n);
    for (size_t i = 0; i < n; i++) /* stays so when no transaction even starts */
        res[i].status = 0;
    int rc = n ? nds_lmdb_write_txn(s, lm_publish_fn, &p, what, staged[0]->key) : 0;
    for (size_t i = 0; i < n; i++) {
        if (rc && res[i].status != NDS_ECONFLICT) {
            res[i].status = rc;
            res[i].new_generation.kind = NDS_GEN_NONE;
        }
        free(staged[i]);
    }
    return rc ? rc : p.err;
}

const nds_kv_driver nds_kv_driver_lmdb = {
    .version = NDS_KV_DRIVER_VERSION,
    .name = "lmdb",
    .url_scheme = "lmdb",
    .capabilities = NDS_KV_CAP_ATOMIC_CONDITIONAL_WRITE | NDS_KV_CAP_ATOMIC_COMMIT |
                    NDS_KV_CAP_BYTE_RANGE | NDS_KV_CAP_LOCAL | NDS_KV_CAP_STAGES_IN_MEMORY,
    .parse_url = lm_parse_url,
    .open = lm_open,
    .close = lm_close,
    .url_base = lm_url_base,
    .to_json = lm_to_json,
    .read = lm_read,
    .write = lm_write,
    .list = nds_lmdb_list,
    .delete_range = nds_lmdb_delete_range,
    .commit = lm_commit,
    .stage = lm_stage,
    .publish = lm_publish,
    .discard = lm_discard,
};
