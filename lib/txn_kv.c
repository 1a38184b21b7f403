/* The staging kvstore of a transaction: an array opened inside a transaction sees the store through
 * it. Reads return the transaction's staged value of a key, else the store's; writes and deletes
 * are staged in the transaction. A conditional write is checked against what the transaction sees
 * at once (so creating metadata that exists fails now, as it would outside a transaction) and its
 * condition on the store is re-checked by the commit. Listing merges staged keys into the store's.
 * Internally synchronised through the transaction's lock; lives in lib/ because it is part of the
 * transaction machinery, not a storage driver. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/error.h"
#include "internal/kvstore_internal.h"
#include "internal/txn_internal.h"
#include "internal/util.h"

typedef struct txn_kv {
    nds_txn *t;
    nds_kvstore *base; /* the store, with the array's path (own reference) */
    nds_kvstore
        *root; /* the same instance with path "": full keys are relative to it (own reference) */
} txn_kv;

static const nds_kv_driver txn_kv_driver;

static void tk_close(void *state) {
    txn_kv *s = state;
    if (!s) return;
    nds_kvstore_free(s->base);
    nds_kvstore_free(s->root);
    free(s);
}

static void tk_url_base(void *state, char *buf, size_t cap) {
    txn_kv *s = state;
    snprintf(buf, cap, "%s", nds_kvstore_url(s->root));
}

/* A staged value as a read result, honouring the read's conditions and byte range. */
static int read_staged(nds_bytes *value, bool deleted, const nds_generation *gen,
                       const nds_read_options *o, nds_read_result *out) {
    out->generation = deleted ? (nds_generation){NDS_GEN_ABSENT, {0}} : *gen;
    if (deleted) {
        out->state = NDS_READ_MISSING;
        return 0;
    }
    if (o->if_equal.kind != NDS_GEN_NONE && !nds_generation_equal(&o->if_equal, gen)) {
        out->state = NDS_READ_ABORTED;
        return 0;
    }
    if (o->if_not_equal.kind != NDS_GEN_NONE && nds_generation_equal(&o->if_not_equal, gen)) {
        out->state = NDS_READ_UNCHANGED;
        return 0;
    }
    uint64_t off, len;
    int rc = nds_byte_range_resolve(o, value->len, &off, &len);
    if (rc) return rc;
    out->state = NDS_READ_VALUE;
    out->total_size = value->len;
    return nds_bytes_copy(&out->value, value->data + off, (size_t)len);
}

static int tk_read_value(void *state, const char *key, const nds_read_options *o,
                         nds_read_result *out) {
    txn_kv *s = state;
    if (nds_txn_committing(s->t)) return nds_kvstore_read(s->root, key, o, out);
    bool found = false, deleted = false;
    nds_bytes value = {0};
    nds_generation gen;
    int rc = nds_txn_key_lookup(s->t, s->root, key, &found, &value, &deleted, &gen);
    if (rc == 0 && found)
        rc = read_staged(&value, deleted, &gen, o, out);
    else if (rc == 0)
        rc = nds_kvstore_read(s->root, key, o, out);
    nds_bytes_release(&value);
    return rc;
}

/* Ranges: copied from the value the transaction sees (kv_driver.h read). */
static int tk_read(void *state, const char *key, const nds_read_options *o,
                   const nds_byte_range *ranges, size_t n, nds_read_result *out) {
    if (n == 0) return tk_read_value(state, key, o, out);
    return nds_kv_read_ranges_span(tk_read_value, state, key, o, ranges, n, out);
}

/* The generation the transaction sees for key: staged, else stored. */
static int visible_generation(txn_kv *s, const char *key, bool *staged, nds_generation *gen) {
    bool deleted = false;
    int rc = nds_txn_key_lookup(s->t, s->root, key, staged, NULL, &deleted, gen);
    if (rc || *staged) {
        if (deleted) *gen = (nds_generation){NDS_GEN_ABSENT, {0}};
        return rc;
    }
    nds_read_options ro = NDS_READ_OPTIONS_INIT;
    ro.byte_length = 0;
    nds_read_result r;
    rc = nds_kvstore_read(s->root, key, &ro, &r);
    if (rc == 0) *gen = r.generation;
    nds_read_result_dispose(&r);
    return rc;
}

static int tk_write_value(void *state, const char *key, const uint8_t *data, size_t len,
                          const nds_write_options *o, nds_generation *new_gen) {
    txn_kv *s = state;
    if (nds_txn_committing(s->t)) /* the commit applying staged chunks: straight to the store */
        return data ? nds_kvstore_write(s->root, key, data, len, o, new_gen)
                    : nds_kvstore_delete(s->root, key, o);
    bool staged = false;
    nds_generation now = {NDS_GEN_NONE, {0}};
    if (o->if_equal.kind != NDS_GEN_NONE) {
        int rc = visible_generation(s, key, &staged, &now);
        if (rc) return rc;
        if (!nds_generation_satisfies(&o->if_equal, &now))
            return nds_err(NDS_ECONFLICT, "%s%s: condition failed inside the transaction",
                           nds_kvstore_url(s->root), key);
    }
    /* A key first staged here keeps the caller's condition for the commit's re-check on the store.
     */
    const nds_generation *cond = staged ? NULL : &o->if_equal;
    nds_txn_value value = {data, data ? len : 0, data == NULL};
    return nds_txn_stage_key(s->t, s->root, key, &value, cond, new_gen);
}

/* kv_driver.h write: the pieces gathered into the one value the transaction stages. */
static int tk_write(void *state, const char *key, const struct iovec *iov, size_t iovcnt,
                    const nds_write_options *o, nds_generation *new_gen) {
    return nds_kv_write_gathered(state, key, iov, iovcnt, o, new_gen, tk_write_value);
}

/* Listing: the store's keys that are not staged, then the staged ones. */
typedef struct merge_ctx {
    txn_kv *s;
    nds_list_fn fn;
    void *ctx;
} merge_ctx;

static int emit_unstaged(void *c, const char *key, uint64_t size) {
    merge_ctx *m = c;
    bool found = false, deleted = false;
    nds_generation gen;
    int rc = nds_txn_key_lookup(m->s->t, m->s->root, key, &found, NULL, &deleted, &gen);
    return rc ? rc : found ? 0 : m->fn(m->ctx, key, size);
}

static int tk_list(void *state, const char *prefix, nds_list_fn fn, void *ctx) {
    txn_kv *s = state;
    if (nds_txn_committing(s->t)) return nds_kvstore_list(s->root, prefix, fn, ctx);
    merge_ctx m = {s, fn, ctx};
    int rc = nds_kvstore_list(s->root, prefix, emit_unstaged, &m);
    return rc ? rc : nds_txn_key_each(s->t, s->root, prefix, fn, ctx);
}

static const nds_kv_driver txn_kv_driver = {
    .version = NDS_KV_DRIVER_VERSION,
    .name = "txn-staging",
    .url_scheme = NULL,
    .capabilities = NDS_KV_CAP_ATOMIC_CONDITIONAL_WRITE | NDS_KV_CAP_BYTE_RANGE,
    .close = tk_close,
    .url_base = tk_url_base,
    .read = tk_read,
    .write = tk_write,
    .list = tk_list,
};

int nds_txn_kvstore(nds_kvstore **out, nds_txn *t, nds_kvstore *base) {
    txn_kv *s = calloc(1, sizeof *s);
    if (!s) return nds_err(NDS_ENOMEM, "out of memory");
    s->t = t;
    s->base = nds_kvstore_ref(base);
    int rc = nds_kvstore_with_path(&s->root, base, "");
    if (rc) {
        tk_close(s);
        return rc;
    }
    return nds_kvstore_wrap(out, &txn_kv_driver, s, nds_kvstore_context(base),
                            nds_kvstore_path(base));
}
