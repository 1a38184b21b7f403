/* Transactions: chunks staged in memory (elements + written mask), reads overlaid, and the two
 * commits: isolated (the per-chunk optimistic protocol, chunk by chunk) and atomic (one multi-key
 * conditional commit of the driver, retried as a whole on conflict). See include/ndstore/txn.h for
 * the guarantees. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/array_internal.h"
#include "internal/chunk_update.h"
#include "internal/context_internal.h"
#include "internal/dtype_util.h"
#include "internal/error.h"
#include "internal/kvstore_internal.h"
#include "internal/strided.h"
#include "internal/txn_internal.h"
#include "internal/util.h"
#include "internal/write_batch.h"

#define TXN_BUCKETS 4096
#define TXN_DEFAULT_LIMIT ((size_t)1 << 30)
/* Whole-transaction retries of an atomic commit on conflict (each with backoff). */
#define ATOMIC_RETRY_MAX 200

typedef enum txn_state { TXN_OPEN, TXN_COMMITTING, TXN_DONE, TXN_POISONED } txn_state;

/* A staged raw key write. */
typedef struct txn_key {
    nds_kvstore *kv; /* own reference */
    char *key;       /* relative to kv */
    char *id;        /* kv's URL + key: one staged entry per stored key */
    uint8_t *data;
    size_t len;
    bool deleted;              /* staged delete */
    nds_generation if_equal;   /* condition on the stored key, re-checked at commit (NONE: none) */
    nds_generation staged_gen; /* what reads inside the transaction see */
    bool settled; /* the store already holds exactly this value (another process created the same
                     metadata): left out of the commit, not a conflict */
    struct txn_key *next;
    struct txn_key *by_id; /* hash chain of key_buckets */
} txn_key;

struct nds_txn {
    pthread_mutex_t mu; /* guards buckets, counts, memory, state */
    nds_txn_mode mode;
    txn_state state;
    size_t memory, limit;
    nds_txn_chunk **buckets; /* hash of (array, key) */
    size_t nchunks;
    txn_key *keys, **keys_tail;
    txn_key **key_buckets; /* keys by id hash: staging many keys stays linear */
};

static size_t chunk_hash(const void *a, const char *key) {
    uint64_t h = 1469598103934665603ull ^ (uint64_t)(uintptr_t)a;
    while (*key) h = (h ^ (uint8_t)*key++) * 1099511628211ull;
    return (size_t)(h % TXN_BUCKETS);
}

int nds_txn_begin(nds_txn **out, const nds_txn_options *opts) {
    nds_txn *t = calloc(1, sizeof *t);
    if (t) t->buckets = calloc(TXN_BUCKETS, sizeof *t->buckets);
    if (t) t->key_buckets = calloc(TXN_BUCKETS, sizeof *t->key_buckets);
    if (!t || !t->buckets || !t->key_buckets) {
        if (t) free(t->buckets), free(t->key_buckets);
        free(t);
        return nds_err(NDS_ENOMEM, "out of memory starting a transaction");
    }
    t->mode = opts ? opts->mode : NDS_TXN_ISOLATED;
    if (t->mode != NDS_TXN_ISOLATED && t->mode != NDS_TXN_ATOMIC) {
        free(t->buckets);
        free(t->key_buckets);
        free(t);
        return nds_err(NDS_EINVAL, "transaction mode %d is neither isolated nor atomic",
                       (int)opts->mode);
    }
    t->limit = opts && opts->memory_limit ? opts->memory_limit : TXN_DEFAULT_LIMIT;
    t->keys_tail = &t->keys;
    pthread_mutex_init(&t->mu, NULL);
    *out = t;
    return 0;
}

static void discard(nds_txn *t) {
    for (size_t b = 0; b < TXN_BUCKETS; b++)
        while (t->buckets[b]) {
            nds_txn_chunk *c = t->buckets[b];
            t->buckets[b] = c->next;
            free(c->key), free(c->data), free(c->mask), free(c);
        }
    while (t->keys) {
        txn_key *k = t->keys;
        t->keys = k->next;
        nds_kvstore_free(k->kv);
        free(k->key), free(k->id), free(k->data), free(k);
    }
    t->keys_tail = &t->keys;
    memset(t->key_buckets, 0, TXN_BUCKETS * sizeof *t->key_buckets);
    t->nchunks = 0;
    t->memory = 0;
}

void nds_txn_abort(nds_txn *t) {
    pthread_mutex_lock(&t->mu);
    discard(t);
    t->state = TXN_DONE;
    pthread_mutex_unlock(&t->mu);
}

void nds_txn_free(nds_txn *t) {
    if (!t) return;
    discard(t);
    pthread_mutex_destroy(&t->mu);
    free(t->buckets);
    free(t->key_buckets);
    free(t);
}

size_t nds_txn_memory(const nds_txn *t) {
    nds_txn *m = (nds_txn *)t;
    pthread_mutex_lock(&m->mu);
    size_t n = t->memory;
    pthread_mutex_unlock(&m->mu);
    return n;
}

bool nds_txn_committing(nds_txn *t) {
    pthread_mutex_lock(&t->mu);
    bool c = t->state == TXN_COMMITTING;
    pthread_mutex_unlock(&t->mu);
    return c;
}

int nds_txn_check_open(const nds_txn *t) {
    if (t->state == TXN_OPEN) return 0;
    return nds_err(NDS_EPOISONED, t->state == TXN_DONE
                                      ? "transaction already committed or aborted"
                                      : "transaction failed earlier; only abort is allowed");
}

void nds_txn_poison(nds_txn *t) {
    pthread_mutex_lock(&t->mu);
    if (t->state == TXN_OPEN) t->state = TXN_POISONED;
    pthread_mutex_unlock(&t->mu);
}

/* Reserves bytes against the limit; the caller holds t->mu. */
static int reserve(nds_txn *t, size_t bytes) {
    if (bytes > t->limit - t->memory) {
        t->state = TXN_POISONED;
        return nds_err(
            NDS_ELIMIT,
            "transaction outgrew its memory limit of %zu bytes (holds %zu, needs %zu more)",
            t->limit, t->memory, bytes);
    }
    t->memory += bytes;
    return 0;
}

/* Gives c its own element and mask buffers (owned: data + mask, reserved in t's memory). */
static int own_buffers(nds_txn *t, nds_txn_chunk *c) {
    const nds_array *a = c->a;
    int rc = reserve(t, a->chunk_bytes + a->chunk_elems);
    if (rc) return rc;
    c->data = malloc(a->chunk_bytes);
    c->mask = calloc(a->chunk_elems, 1);
    if (c->data && c->mask) return 0;
    free(c->data), free(c->mask);
    c->data = c->mask = NULL;
    t->memory -= a->chunk_bytes + a->chunk_elems;
    return nds_err(NDS_ENOMEM, "out of memory staging chunk %s", c->key);
}

/* A new staged chunk, with its own buffers unless it is to be staged by reference. */
static nds_txn_chunk *new_chunk(nds_txn *t, nds_array *a, const uint64_t *cell, const char *key,
                                bool owned, int *rc) {
    nds_txn_chunk *c = calloc(1, sizeof *c);
    if (c) c->key = nds_strdup(key);
    if (!c || !c->key) {
        if (c) free(c->key);
        free(c);
        *rc = nds_err(NDS_ENOMEM, "out of memory staging chunk %s", key);
        return NULL;
    }
    c->a = a;
    memcpy(c->cell, cell, a->meta.rank * sizeof *cell);
    /* c->data is not filled: only elements the mask marks written are ever read (overlay, a chunk
     * written whole), so a chunk written whole pays no fill pass; partial_payload fills the rest
     * before storing the chunk. */
    if (owned && (*rc = own_buffers(t, c))) {
        free(c->key), free(c);
        return NULL;
    }
    return c;
}

/* A chunk staged by reference, copied into buffers of its own so that a write can change it. */
static int own_reference(nds_txn *t, nds_txn_chunk *c) {
    int rc = own_buffers(t, c);
    if (rc) return rc;
    memcpy(c->data, c->ref, c->a->chunk_bytes);
    memset(c->mask, 1, c->a->chunk_elems);
    c->ref = NULL;
    return 0;
}

/* The staged chunk for (a, key) (caller holds t->mu), created when create is set. */
static nds_txn_chunk *find_chunk(nds_txn *t, nds_array *a, const uint64_t *cell, const char *key,
                                 bool create, bool owned, int *rc) {
    size_t b = chunk_hash(a, key);
    nds_txn_chunk *c = t->buckets[b];
    while (c && (c->a != a || strcmp(c->key, key) != 0)) c = c->next;
    if (!c && create && (c = new_chunk(t, a, cell, key, owned, rc)) != NULL) {
        c->next = t->buckets[b];
        t->buckets[b] = c;
        t->nchunks++;
    }
    return c;
}

nds_txn_chunk *nds_txn_chunk_get(nds_txn *t, nds_array *a, const uint64_t *cell, const char *key,
                                 bool create, int *rc) {
    *rc = 0;
    pthread_mutex_lock(&t->mu);
    nds_txn_chunk *c = find_chunk(t, a, cell, key, create, true, rc);
    if (c && create && c->ref && (*rc = own_reference(t, c))) c = NULL;
    pthread_mutex_unlock(&t->mu);
    return c;
}

int nds_txn_stage_ref(nds_txn *t, nds_array *a, const uint64_t *cell, const char *key,
                      const uint8_t *elements) {
    int rc = 0;
    pthread_mutex_lock(&t->mu);
    nds_txn_chunk *c = find_chunk(t, a, cell, key, true, false, &rc);
    if (c && c->data) { /* written before, now overwritten whole: its copy is not needed */
        free(c->data), free(c->mask);
        c->data = c->mask = NULL;
        t->memory -= a->chunk_bytes + a->chunk_elems;
    }
    if (c) c->ref = elements;
    pthread_mutex_unlock(&t->mu);
    return rc;
}

bool nds_txn_touches(nds_txn *t, const nds_array *a) {
    bool hit = false;
    pthread_mutex_lock(&t->mu);
    for (size_t b = 0; b < TXN_BUCKETS && !hit; b++)
        for (nds_txn_chunk *c = t->buckets[b]; c && !hit; c = c->next) hit = c->a == a;
    pthread_mutex_unlock(&t->mu);
    return hit;
}

/* Calls fn(ctx, start, stop) for each run [start, stop) of mask bytes equal to value (0 or 1). */
static void mask_runs(const uint8_t *mask, size_t n, int value,
                      void (*fn)(void *ctx, size_t start, size_t stop), void *ctx) {
    for (size_t i = 0; i < n;) {
        const uint8_t *first = memchr(mask + i, value, n - i);
        if (!first) return;
        size_t start = (size_t)(first - mask);
        const uint8_t *stop = memchr(first, !value, n - start);
        i = stop ? (size_t)(stop - mask) : n;
        fn(ctx, start, i);
    }
}

typedef struct overlay_call {
    const nds_txn_chunk *c;
    uint8_t *chunk;
    size_t elem;
} overlay_call;

static void copy_run(void *ctx, size_t start, size_t stop) {
    const overlay_call *o = ctx;
    memcpy(o->chunk + start * o->elem, o->c->data + start * o->elem, (stop - start) * o->elem);
}

/* Copies runs of written elements (mask bytes are 0 or 1): a chunk written whole is one memcpy. */
void nds_txn_overlay(const nds_txn_chunk *c, uint8_t *chunk, size_t elems, size_t elem) {
    if (c->ref) {
        memcpy(chunk, c->ref, elems * elem);
        return;
    }
    overlay_call o = {c, chunk, elem};
    mask_runs(c->mask, elems, 1, copy_run, &o);
}

static size_t key_hash(const char *id) {
    uint64_t h = 1469598103934665603ull;
    while (*id) h = (h ^ (uint8_t)*id++) * 1099511628211ull;
    return (size_t)(h % TXN_BUCKETS);
}

static txn_key *find_key(nds_txn *t, const char *id) {
    for (txn_key *k = t->key_buckets[key_hash(id)]; k; k = k->by_id)
        if (strcmp(k->id, id) == 0) return k;
    return NULL;
}

/* Replaces k's bytes (t->mu held). */
static int set_key_value(nds_txn *t, txn_key *k, const nds_txn_value *value) {
    size_t len = value->len;
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy) return nds_err(NDS_ENOMEM, "out of memory staging key %s", k->key);
    int rc = reserve(t, len);
    if (rc) {
        free(copy);
        return rc;
    }
    if (len) memcpy(copy, value->data, len);
    t->memory -= k->len;
    free(k->data);
    k->data = copy;
    k->len = value->deleted ? 0 : len;
    k->deleted = value->deleted;
    static atomic_ulong counter;
    char gen[48];
    snprintf(gen, sizeof gen, "txn-staged-%lu", (unsigned long)atomic_fetch_add(&counter, 1));
    nds_generation_set(&k->staged_gen, gen);
    return 0;
}

int nds_txn_stage_key(nds_txn *t, nds_kvstore *kv, const char *key, const nds_txn_value *value,
                      const nds_generation *if_equal, nds_generation *staged) {
    int rc = nds_txn_check_open(t);
    char *id = rc ? NULL : nds_asprintf("%s%s", nds_kvstore_url(kv), key);
    if (rc || !id) return rc ? rc : nds_err(NDS_ENOMEM, "out of memory");
    pthread_mutex_lock(&t->mu);
    txn_key *k = find_key(t, id);
    bool fresh = !k;
    if (fresh && (k = calloc(1, sizeof *k)) != NULL) {
        k->key = nds_strdup(key);
        k->id = id;
        id = NULL;
        if (if_equal) k->if_equal = *if_equal;
    }
    if (!k || !k->key) rc = nds_err(NDS_ENOMEM, "out of memory staging key %s", key);
    if (!rc) rc = set_key_value(t, k, value);
    if (!rc && fresh) {
        k->kv = nds_kvstore_ref(kv);
        *t->keys_tail = k;
        t->keys_tail = &k->next;
        k->by_id = t->key_buckets[key_hash(k->id)];
        t->key_buckets[key_hash(k->id)] = k;
    } else if (rc && fresh && k) {
        free(k->key), free(k->id), free(k->data), free(k);
    }
    if (!rc && staged) *staged = k->staged_gen;
    pthread_mutex_unlock(&t->mu);
    free(id);
    return rc;
}

int nds_txn_write_key(nds_txn *t, nds_kvstore *kv, const char *key, const void *data, size_t len) {
    nds_txn_value value = {data, len, false};
    return nds_txn_stage_key(t, kv, key, &value, NULL, NULL);
}

int nds_txn_key_lookup(nds_txn *t, nds_kvstore *kv, const char *key, bool *found, nds_bytes *value,
                       bool *deleted, nds_generation *gen) {
    char *id = nds_asprintf("%s%s", nds_kvstore_url(kv), key);
    if (!id) return nds_err(NDS_ENOMEM, "out of memory");
    int rc = 0;
    pthread_mutex_lock(&t->mu);
    txn_key *k = find_key(t, id);
    *found = k != NULL;
    if (k) {
        *deleted = k->deleted;
        *gen = k->staged_gen;
        if (value && !k->deleted) rc = nds_bytes_copy(value, k->data, k->len);
    }
    pthread_mutex_unlock(&t->mu);
    free(id);
    return rc;
}

int nds_txn_key_each(nds_txn *t, nds_kvstore *kv, const char *prefix, nds_list_fn fn, void *ctx) {
    const char *url = nds_kvstore_url(kv);
    size_t ul = strlen(url), pl = strlen(prefix);
    int rc = 0;
    pthread_mutex_lock(&t->mu); /* fn must not call back into the transaction */
    for (txn_key *k = t->keys; k && !rc; k = k->next)
        if (!k->deleted && strncmp(k->id, url, ul) == 0 && strncmp(k->id + ul, prefix, pl) == 0)
            rc = fn(ctx, k->id + ul, k->len);
    pthread_mutex_unlock(&t->mu);
    return rc;
}

/* ---- commit ---- */

/* The staged chunks as a flat array, for the pool. */
static nds_txn_chunk **chunk_list(nds_txn *t) {
    nds_txn_chunk **v = malloc((t->nchunks ? t->nchunks : 1) * sizeof *v);
    size_t n = 0;
    for (size_t b = 0; v && b < TXN_BUCKETS; b++)
        for (nds_txn_chunk *c = t->buckets[b]; c; c = c->next) v[n++] = c;
    return v;
}

static void fill_run(void *ctx, size_t start, size_t stop) {
    nds_txn_chunk *c = ctx;
    const nds_array *a = c->a;
    nds_fill_elements(c->data + start * a->elem, stop - start, a->elem, a->meta.fill_value);
}

/* Sets the elements of c the mask marks unwritten to the fill value (staged chunks are not filled
 * when created). */
static void fill_unwritten(nds_txn_chunk *c) {
    if (c->ref) return; /* every element written */
    mask_runs(c->mask, c->a->chunk_elems, 0, fill_run, c);
}

static bool all_marked(const uint8_t *mask, size_t n) {
    return n == 0 || (mask[0] && (n == 1 || memcmp(mask, mask + 1, n - 1) == 0));
}

/* Whether every element of c that lies inside the array is written: then the chunk is written
 * whole, and an edge chunk's padding (never read) is stored as fill. */
static bool every_element_written(const nds_txn_chunk *c) {
    if (c->ref) return true;
    const nds_array *a = c->a;
    size_t rank = a->meta.rank;
    uint64_t inside[NDS_MAX_RANK], rows = 1;
    bool edge = false;
    for (size_t d = 0; d < rank; d++) {
        uint64_t start = c->cell[d] * a->meta.chunk_shape[d];
        inside[d] = nds_min_u64(a->meta.chunk_shape[d], a->meta.shape[d] - start);
        edge |= inside[d] != a->meta.chunk_shape[d];
        if (d + 1 < rank) rows *= inside[d];
    }
    if (!edge || rank == 0) return all_marked(c->mask, a->chunk_elems);
    int64_t stride[NDS_MAX_RANK]; /* in elements */
    nds_c_strides(rank, a->meta.chunk_shape, 1, stride);
    for (uint64_t r = 0; r < rows; r++) { /* each row of the last dimension inside the array */
        uint64_t at = 0, rest = r;
        for (size_t d = rank - 1; d-- > 0;) {
            at += (rest % inside[d]) * (uint64_t)stride[d];
            rest /= inside[d];
        }
        if (!all_marked(c->mask + at, (size_t)inside[rank - 1])) return false;
    }
    return true;
}

static void merge_staged(void *ctx, const uint64_t *cell, uint8_t *chunk) {
    const nds_txn_chunk *c = ctx;
    (void)cell;
    nds_txn_overlay(c, chunk, c->a->chunk_elems, c->a->elem);
}

typedef struct commit_call {
    nds_txn *t;
    nds_txn_chunk **chunks;
    nds_kv_op *ops;    /* atomic: one per chunk, then one per raw key */
    nds_buf *encoded;  /* atomic: the bytes of each chunk op */
    nds_kvstore **kvs; /* atomic: the handle of each op */
} commit_call;

/* The chunks of one array in an isolated commit: cc->chunks[first ..]. */
typedef struct array_chunks {
    commit_call *cc;
    size_t first;
    nds_write_batch *batch; /* NULL: written one by one */
} array_chunks;

/* The change a staged chunk makes to its stored chunk. */
static nds_chunk_change staged_change(nds_txn_chunk *c) {
    return (nds_chunk_change){c->cell, every_element_written(c), NULL, merge_staged, c, NULL};
}

static int isolated_update(nds_txn_chunk *c) {
    nds_chunk_change ch = staged_change(c);
    return nds_chunk_update(c->a, &ch);
}

static int isolated_task(void *ctx, size_t i) {
    array_chunks *g = ctx;
    nds_txn_chunk *c = g->cc->chunks[g->first + i];
    nds_chunk_change ch = staged_change(c);
    int rc = g->batch ? nds_chunk_update_staged(c->a, &ch, g->batch, i) : isolated_update(c);
    nds_scratch_trim(NDS_SCRATCH_CHUNK); /* do not pin huge chunks per thread */
    return rc;
}

/* A chunk whose batched publish conflicted: re-read, re-merged and written on its own. */
static int isolated_redo(void *ctx, size_t i) {
    array_chunks *g = ctx;
    return isolated_update(g->cc->chunks[g->first + i]);
}

/* Commits the n chunks of one array from cc->chunks[first]: staged and published in batches where
 * its store can stage (as nds_array_write does: one durability cost per batch), else one
 * conditional write each. The array's metadata stays unchanged meanwhile (read lock). */
static int commit_array_chunks(commit_call *cc, size_t first, size_t n) {
    nds_array *a = cc->chunks[first]->a;
    array_chunks g = {cc, first, NULL};
    nds_write_batch batch;
    pthread_rwlock_rdlock(&a->meta_lock);
    if (nds_kvstore_can_stage(a->kv)) {
        nds_write_batch_init(&batch, a->kv, isolated_redo, &g);
        g.batch = &batch;
    }
    int rc = nds_pool_for_budget(nds_context_pool(NULL), nds_context_budget(NULL),
                                 2 * a->chunk_bytes, n, 0, isolated_task, &g);
    if (g.batch && !rc) rc = nds_write_batch_finish(&batch);
    if (g.batch) nds_write_batch_dispose(&batch);
    pthread_rwlock_unlock(&a->meta_lock);
    return rc;
}

static int by_array(const void *x, const void *y) {
    uintptr_t a = (uintptr_t)(*(nds_txn_chunk *const *)x)->a;
    uintptr_t b = (uintptr_t)(*(nds_txn_chunk *const *)y)->a;
    return a < b ? -1 : a > b;
}

/* Each staged chunk by the per-chunk protocol, array by array; then the raw keys, one by one. */
/* Whether k's condition holds on the store now, and whether the store holds exactly k's value. */
static int key_state(txn_key *k, bool *holds, bool *same) {
    nds_read_result r;
    int rc = nds_kvstore_read(k->kv, k->key, NULL, &r);
    if (rc) return rc;
    *holds = nds_generation_satisfies(&k->if_equal, &r.generation);
    *same = !k->deleted && r.state == NDS_READ_VALUE && r.value.len == k->len &&
            (k->len == 0 || memcmp(r.value.data, k->data, k->len) == 0);
    nds_read_result_dispose(&r);
    return 0;
}

static int commit_isolated(nds_txn *t, commit_call *cc) {
    int rc = 0;
    qsort(cc->chunks, t->nchunks, sizeof *cc->chunks, by_array);
    for (size_t first = 0, n; first < t->nchunks && !rc; first += n) {
        for (n = 1; first + n < t->nchunks && cc->chunks[first + n]->a == cc->chunks[first]->a;) n++;
        rc = commit_array_chunks(cc, first, n);
    }
    for (txn_key *k = t->keys; k && !rc; k = k->next) {
        nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
        wo.if_equal = k->if_equal;
        rc = k->deleted ? nds_kvstore_delete(k->kv, k->key, &wo)
                        : nds_kvstore_write(k->kv, k->key, k->data, k->len, &wo, NULL);
        bool holds, same;
        if (rc == NDS_ECONFLICT && key_state(k, &holds, &same) == 0 && same)
            rc = 0; /* someone stored exactly this value (the same array created twice) */
        if (rc)
            rc = nds_err_prefix(rc, "transaction commit: key %s of %s", k->key,
                                nds_kvstore_url(k->kv));
    }
    return rc;
}

/* The elements of a chunk staged whole: borrowed, or its own copy. */
static const uint8_t *whole_elements(const nds_txn_chunk *c) { return c->ref ? c->ref : c->data; }

/* Atomic: read + merge + encode one chunk into its op, conditional on the generation read. A
 * chunk written whole is stored from its staged elements (no copy where storage is canonical);
 * one written in part is merged in this thread's scratch chunk, so its stored bytes are copied
 * out of it (the scratch is reused by the next task). */
static int prepare_task(void *ctx, size_t i) {
    commit_call *cc = ctx;
    nds_txn_chunk *c = cc->chunks[i];
    nds_array *a = c->a;
    nds_kv_op *op = &cc->ops[i];
    uint8_t *chunk = NULL;
    nds_stored_chunk s = {NULL, 0, 0};
    int present = 1, rc = 0;
    op->if_equal.kind = NDS_GEN_NONE;
    pthread_rwlock_rdlock(&a->meta_lock);
    if (every_element_written(c)) {
        fill_unwritten(c); /* an edge chunk's padding */
        rc = nds_array_stored_bytes(a, c->cell, c->key, whole_elements(c), &cc->encoded[i], &s);
    } else if (!(chunk = nds_scratch(NDS_SCRATCH_CHUNK, a->chunk_bytes))) {
        rc = nds_err(NDS_ENOMEM, "out of memory");
    } else if (!(rc = nds_array_load_chunk(a, c->cell, c->key, chunk, &present, &op->if_equal,
                                           true))) {
        nds_txn_overlay(c, chunk, a->chunk_elems, a->elem);
        rc = nds_array_stored_bytes(a, c->cell, c->key, chunk, &cc->encoded[i], &s);
        if (!rc && !s.all_fill && s.bytes == chunk) {
            cc->encoded[i].len = 0;
            if (nds_buf_append(&cc->encoded[i], chunk, s.len)) rc = nds_err(NDS_ENOMEM, "out of memory");
            s.bytes = cc->encoded[i].data;
        }
    }
    pthread_rwlock_unlock(&a->meta_lock);
    if (rc) return rc;
    op->key = c->key;
    op->data = s.all_fill ? NULL : s.bytes; /* all fill: delete (a no-op on a missing key) */
    op->len = s.all_fill ? 0 : s.len;
    cc->kvs[i] = a->store; /* past a staging wrapper, to the store itself */
    return 0;
}

static int commit_atomic_once(nds_txn *t, commit_call *cc) {
    int rc = nds_pool_for_budget(nds_context_pool(NULL), nds_context_budget(NULL),
                                 2 * (t->memory / (t->nchunks ? t->nchunks : 1)), t->nchunks, 0,
                                 prepare_task, cc);
    size_t n = t->nchunks;
    for (txn_key *k = t->keys; k; k = k->next) {
        if (k->settled) continue;
        cc->ops[n] = (nds_kv_op){
            k->key, k->deleted ? NULL : k->data, k->len, k->if_equal, {NDS_GEN_NONE, {0}}};
        cc->kvs[n++] = k->kv;
    }
    return rc ? rc : nds_kvstore_commit(cc->kvs, cc->ops, n);
}

/* After a conflicting atomic commit: a staged key whose condition no longer holds (metadata someone
 * else changed) cannot be re-merged like a chunk, so the transaction fails instead of retrying,
 * unless the store now holds exactly the staged value (several processes creating the same array):
 * then the key is settled and left out. */
static int check_key_conditions(nds_txn *t) {
    for (txn_key *k = t->keys; k; k = k->next) {
        if (k->if_equal.kind == NDS_GEN_NONE || k->settled) continue;
        bool holds, same;
        int rc = key_state(k, &holds, &same);
        if (rc) return rc;
        if (!holds && same) k->settled = true;
        else if (!holds)
            return nds_err(NDS_ECONFLICT,
                           "transaction: %s%s changed since the transaction read it; nothing was "
                           "written",
                           nds_kvstore_url(k->kv), k->key);
    }
    return 0;
}

static int commit_atomic(nds_txn *t, commit_call *cc) {
    for (int attempt = 0;; attempt++) {
        int rc = commit_atomic_once(t, cc);
        if (rc != NDS_ECONFLICT) return rc;
        if ((rc = check_key_conditions(t)) != 0) return rc;
        if (attempt + 1 >= ATOMIC_RETRY_MAX)
            return nds_err(NDS_ECONFLICT,
                           "atomic transaction still conflicting after %d attempts; nothing was "
                           "written",
                           ATOMIC_RETRY_MAX);
        nds_array_backoff(attempt); /* the chunk updates' (their limit is above this one) */
    }
}

static void dispose_call(commit_call *cc, size_t nchunks) {
    for (size_t i = 0; cc->encoded && i < nchunks; i++) nds_buf_dispose(&cc->encoded[i]);
    free(cc->chunks), free(cc->ops), free(cc->encoded), free(cc->kvs);
}

int nds_txn_commit(nds_txn *t) {
    int rc = nds_txn_check_open(t);
    if (rc) return rc;
    size_t nkeys = 0;
    for (txn_key *k = t->keys; k; k = k->next) nkeys++;
    size_t nops = t->nchunks + nkeys;
    commit_call cc = {t, chunk_list(t), calloc(nops ? nops : 1, sizeof(nds_kv_op)),
                      calloc(t->nchunks ? t->nchunks : 1, sizeof(nds_buf)),
                      calloc(nops ? nops : 1, sizeof(nds_kvstore *))};
    pthread_mutex_lock(&t->mu);
    t->state = TXN_COMMITTING; /* staging handles now pass writes through to their stores */
    pthread_mutex_unlock(&t->mu);
    if (!cc.chunks || !cc.ops || !cc.encoded || !cc.kvs)
        rc = nds_err(NDS_ENOMEM, "out of memory committing");
    else if (t->mode == NDS_TXN_ATOMIC)
        rc = commit_atomic(t, &cc);
    else
        rc = commit_isolated(t, &cc);
    dispose_call(&cc, t->nchunks);
    pthread_mutex_lock(&t->mu);
    t->state = rc ? TXN_POISONED : TXN_DONE;
    if (!rc) discard(t);
    pthread_mutex_unlock(&t->mu);
    return rc;
}

/* ---- prepare (a part of a version committed by nds_txn_commit_prepared) ---- */

/* The store every staged chunk and key is on (the first one's; the driver checks the rest). */
static nds_kvstore *prepare_store(nds_txn *t, nds_txn_chunk **chunks) {
    if (t->nchunks) return chunks[0]->a->store;
    return t->keys ? t->keys->kv : NULL;
}

/* A chunk written in part, for the committer: [u32 header length][header JSON][mask][elements]
 * (unwritten elements hold the fill value). */
static int partial_payload(nds_txn_chunk *c, nds_buf *out) {
    const nds_array *a = c->a;
    fill_unwritten(c);
    json_object *h = json_object_new_object(), *cell = json_object_new_array();
    json_object_object_add(h, "array", json_object_new_string(nds_kvstore_path(a->store)));
    json_object_object_add(h, "format", json_object_new_string(a->format->name));
    json_object_object_add(h, "key", json_object_new_string(c->key));
    for (size_t d = 0; d < a->meta.rank; d++)
        json_object_array_add(cell, json_object_new_int64((int64_t)c->cell[d]));
    json_object_object_add(h, "cell", cell);
    json_object_object_add(h, "elems", json_object_new_int64((int64_t)a->chunk_elems));
    json_object_object_add(h, "elem", json_object_new_int64((int64_t)a->elem));
    const char *text = json_object_to_json_string_ext(h, JSON_C_TO_STRING_PLAIN);
    uint8_t len[4];
    nds_store_le32(len, (uint32_t)strlen(text));
    int rc = nds_buf_append(out, len, 4);
    if (!rc) rc = nds_buf_append(out, text, strlen(text));
    if (!rc) rc = nds_buf_append(out, c->mask, a->chunk_elems);
    if (!rc) rc = nds_buf_append(out, c->data, a->chunk_bytes);
    json_object_put(h);
    return rc ? nds_err(NDS_ENOMEM, "out of memory preparing %s", c->key) : 0;
}

/* Chunks written whole become puts (encoded now; stored as staged where storage is canonical),
 * chunks written in part side values. */
static int prepare_chunk(nds_txn_chunk *c, nds_kv_op *op, nds_kvstore **kv, nds_buf *enc,
                         bool *whole) {
    nds_array *a = c->a;
    *whole = every_element_written(c);
    if (!*whole) return partial_payload(c, enc);
    fill_unwritten(c); /* an edge chunk's padding */
    nds_stored_chunk s = {NULL, 0, 0};
    pthread_rwlock_rdlock(&a->meta_lock);
    int rc = nds_array_stored_bytes(a, c->cell, c->key, whole_elements(c), enc, &s);
    pthread_rwlock_unlock(&a->meta_lock);
    *op = (nds_kv_op){c->key, s.all_fill ? NULL : s.bytes, s.all_fill ? 0 : s.len,
                      {NDS_GEN_NONE, {0}}, {NDS_GEN_NONE, {0}}};
    *kv = a->store;
    return rc;
}

/* Every staged chunk prepared at once on the context's pool: encoding is most of a prepare's CPU.
 * Every encoded chunk lives until the driver's prepare; each staged one is freed once encoded. */
typedef struct prepare_call {
    nds_txn_chunk **chunks;
    nds_kv_op *ops;    /* per chunk: its put when written whole */
    nds_kvstore **kvs; /* per chunk */
    nds_buf *enc;      /* per chunk: encoded chunk, or the side value of a partial one */
    bool *whole;       /* per chunk */
} prepare_call;

/* Once encoded, a staged chunk's elements are not needed again (a prepare ends the transaction
 * either way: done, or poisoned and only aborted), so they are freed at once: a prepare then holds
 * about one copy of the data instead of two, and the encodings reuse the freed memory. A chunk
 * stored as staged (canonical storage) keeps its elements until the transaction ends. */
static int prepare_chunk_task(void *ctx, size_t i) {
    prepare_call *p = ctx;
    nds_txn_chunk *c = p->chunks[i];
    int rc = prepare_chunk(c, &p->ops[i], &p->kvs[i], &p->enc[i], &p->whole[i]);
    if (!p->whole[i] || p->ops[i].data != c->data) {
        free(c->data), free(c->mask);
        c->data = c->mask = NULL;
    }
    return rc;
}

static int prepare_all(nds_txn *t, nds_txn_chunk **chunks, nds_buf *enc, char *token, size_t cap) {
    size_t nkeys = 0, nops = 0, nside = 0, n = t->nchunks;
    for (txn_key *k = t->keys; k; k = k->next) nkeys++;
    nds_kv_op *ops = calloc(n + nkeys + 1, sizeof *ops);
    nds_kvstore **kvs = calloc(n + nkeys + 1, sizeof *kvs);
    nds_kv_side *side = calloc(n + 1, sizeof *side);
    char (*names)[32] = calloc(n + 1, sizeof *names);
    prepare_call p = {chunks, calloc(n + 1, sizeof *p.ops), calloc(n + 1, sizeof *p.kvs), enc,
                      calloc(n + 1, sizeof *p.whole)};
    int rc = ops && kvs && side && names && p.ops && p.kvs && p.whole
                 ? 0
                 : nds_err(NDS_ENOMEM, "out of memory");
    for (txn_key *k = t->keys; !rc && k; k = k->next, nops++) {
        ops[nops] = (nds_kv_op){k->key, k->deleted ? NULL : k->data, k->len, k->if_equal,
                                {NDS_GEN_NONE, {0}}};
        kvs[nops] = k->kv;
    }
    if (!rc)
        rc = nds_pool_for_budget(nds_context_pool(NULL), nds_context_budget(NULL),
                                 2 * (t->memory / (n ? n : 1)), n, 0, prepare_chunk_task, &p);
    for (size_t i = 0; !rc && i < n; i++) {
        if (p.whole[i]) {
            ops[nops] = p.ops[i];
            kvs[nops++] = p.kvs[i];
            continue;
        }
        snprintf(names[nside], sizeof names[nside], "chunk/%zu", nside);
        side[nside] = (nds_kv_side){names[nside], enc[i].data, enc[i].len};
        nside++;
    }
    nds_kvstore *store = prepare_store(t, chunks);
    if (!rc && !store) rc = nds_err(NDS_EINVAL, "transaction: nothing staged to prepare");
    nds_kv_ops_across writes = {kvs, ops, nops};
    if (!rc) rc = nds_kvstore_prepare(store, &writes, side, nside, token, cap);
    free(ops), free(kvs), free(side), free(names), free(p.ops), free(p.kvs), free(p.whole);
    return rc;
}

int nds_txn_prepare(nds_txn *t, char **token) {
    int rc = nds_txn_check_open(t);
    if (rc) return rc;
    nds_txn_chunk **chunks = chunk_list(t);
    nds_buf *enc = calloc(t->nchunks + 1, sizeof *enc);
    char text[128] = "";
    pthread_mutex_lock(&t->mu);
    t->state = TXN_COMMITTING;
    pthread_mutex_unlock(&t->mu);
    rc = chunks && enc ? prepare_all(t, chunks, enc, text, sizeof text)
                       : nds_err(NDS_ENOMEM, "out of memory preparing");
    if (!rc && !(*token = nds_strdup(text))) rc = nds_err(NDS_ENOMEM, "out of memory");
    for (size_t i = 0; enc && i < t->nchunks; i++) nds_buf_dispose(&enc[i]);
    free(enc);
    free(chunks);
    pthread_mutex_lock(&t->mu);
    t->state = rc ? TXN_POISONED : TXN_DONE;
    if (!rc) discard(t);
    pthread_mutex_unlock(&t->mu);
    return rc;
}
