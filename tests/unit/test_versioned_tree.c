/* The versioned store's copy-on-write B+tree (drivers/versioned_tree.c) over an in-memory node
 * table.
 *
 * The table's io deep-copies each stored node and hands out refs whose offset is the table index,
 * so every version ever built stays readable (persistence) and the tests can count loads and
 * stores, walk the tree directly to check its invariants, and compare with a sorted reference
 * array. The test does not use versioned_format.c: it has its own copy, free and size helpers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/error.h"
#include "support_check.h"
#include "../../drivers/versioned_internal.h"

/* ---- entries and nodes (test-local: versioned_format.c is not part of this suite) ------------ */

static void entry_clone(vs_entry *out, const vs_entry *e) {
    *out = *e;
    out->key = strdup(e->key);
    out->data = NULL;
    if (e->is_inline && e->len > 0) {
        out->data = malloc(e->len);
        memcpy(out->data, e->data, e->len);
    }
}

static void entry_free(vs_entry *e) {
    free(e->key);
    free(e->data);
}

static vs_node *node_clone(const vs_node *n) {
    vs_node *c = calloc(1, sizeof *c);
    c->level = n->level;
    c->n = n->n;
    if (n->level == 0) {
        c->entries = calloc(n->n + 1, sizeof *c->entries);
        for (size_t i = 0; i < n->n; i++) entry_clone(&c->entries[i], &n->entries[i]);
    } else {
        c->children = calloc(n->n + 1, sizeof *c->children);
        for (size_t i = 0; i < n->n; i++) {
            c->children[i] = n->children[i];
            c->children[i].first_key = strdup(n->children[i].first_key);
        }
    }
    return c;
}

static void node_free(vs_node *n) {
    if (!n) return;
    for (size_t i = 0; i < n->n; i++) {
        if (n->level == 0)
            entry_free(&n->entries[i]);
        else
            free(n->children[i].first_key);
    }
    free(n->entries);
    free(n->children);
    free(n);
}

static size_t payload_size(const vs_node *n) {
    size_t s = VS_NODE_PAYLOAD_HEAD;
    for (size_t i = 0; i < n->n; i++)
        s += n->level == 0 ? vs_entry_encoded_size(&n->entries[i])
                           : vs_child_encoded_size(&n->children[i]);
    return s;
}

/* ---- the in-memory io ------------------------------------------------------------------------ */

typedef struct sup_rec {
    vs_ref ref;
    bool is_node;
} sup_rec;

typedef struct mem_io {
    vs_node **nodes;
    size_t n, cap;
    size_t loads, stores, live, max_live;
    bool lenient; /* load does not assert the level (the tree must catch it) */
    long fail_load_after, fail_store_after; /* > 0: that many succeed, then NDS_EIO; 0: never */
    sup_rec *sup;
    size_t nsup, capsup;
} mem_io;

static int mem_load(void *ctx, const vs_ref *ref, unsigned level, const vs_node **node) {
    mem_io *m = ctx;
    if (m->fail_load_after > 0 && --m->fail_load_after == 0) {
        m->fail_load_after = 1; /* keeps failing */
        return nds_err(NDS_EIO, "test: load fails");
    }
    ck_assert_uint_lt(ref->offset, m->n);
    const vs_node *nd = m->nodes[ref->offset];
    if (!m->lenient) ck_assert_uint_eq(nd->level, level);
    m->loads++;
    if (++m->live > m->max_live) m->max_live = m->live;
    *node = nd;
    return 0;
}

static void mem_release(void *ctx, const vs_node *node) {
    mem_io *m = ctx;
    ck_assert_ptr_nonnull(node);
    ck_assert_uint_gt(m->live, 0);
    m->live--;
}

static int mem_store(void *ctx, const vs_node *node, vs_ref *ref) {
    mem_io *m = ctx;
    if (m->fail_store_after > 0 && --m->fail_store_after == 0) {
        m->fail_store_after = 1;
        return nds_err(NDS_EIO, "test: store fails");
    }
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 1024;
        m->nodes = realloc(m->nodes, m->cap * sizeof *m->nodes);
    }
    /* Keys strictly increasing inside every stored node. */
    for (size_t i = 1; i < node->n; i++) {
        const char *a = node->level ? node->children[i - 1].first_key : node->entries[i - 1].key;
        const char *b = node->level ? node->children[i].first_key : node->entries[i].key;
        ck_assert_int_lt(strcmp(a, b), 0);
    }
    memset(ref, 0, sizeof *ref);
    ref->offset = m->n;
    ref->length = payload_size(node) + 16;
    m->nodes[m->n++] = node_clone(node);
    m->stores++;
    return 0;
}

static void mem_superseded(void *ctx, const vs_ref *ref, bool is_node) {
    mem_io *m = ctx;
    if (m->nsup == m->capsup) {
        m->capsup = m->capsup ? 2 * m->capsup : 256;
        m->sup = realloc(m->sup, m->capsup * sizeof *m->sup);
    }
    m->sup[m->nsup++] = (sup_rec){*ref, is_node};
}

static vs_tree_io mem_io_make(mem_io *m) {
    memset(m, 0, sizeof *m);
    return (vs_tree_io){mem_load, mem_release, mem_store, mem_superseded, m};
}

static void mem_io_free(mem_io *m) {
    for (size_t i = 0; i < m->n; i++) node_free(m->nodes[i]);
    free(m->nodes);
    free(m->sup);
}

static void counters_reset(mem_io *m) {
    m->loads = m->stores = m->max_live = 0;
    m->nsup = 0;
}

/* ---- the reference model --------------------------------------------------------------------- */

typedef struct model {
    vs_entry *e; /* sorted by key, owned */
    size_t n, cap;
} model;

static size_t model_lower_bound(const model *md, const char *key) {
    size_t lo = 0, hi = md->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(md->e[mid].key, key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static const vs_entry *model_find(const model *md, const char *key) {
    size_t i = model_lower_bound(md, key);
    return i < md->n && strcmp(md->e[i].key, key) == 0 ? &md->e[i] : NULL;
}

/* Merges sorted ops into the model (a new array: linear in the model's size). */
static void model_apply(model *md, const vs_op *ops, size_t n) {
    vs_entry *e = malloc((md->n + n + 1) * sizeof *e);
    size_t i = 0, j = 0, k = 0;
    while (i < md->n || j < n) {
        int cmp = i == md->n ? 1 : j == n ? -1 : strcmp(md->e[i].key, ops[j].key);
        if (cmp < 0) {
            e[k++] = md->e[i++];
            continue;
        }
        if (cmp == 0) entry_free(&md->e[i++]);
        if (!ops[j].is_delete) entry_clone(&e[k++], ops[j].entry);
        j++;
    }
    free(md->e);
    md->e = e;
    md->n = k;
    md->cap = md->n + n + 1;
}

static void model_free(model *md) {
    for (size_t i = 0; i < md->n; i++) entry_free(&md->e[i]);
    free(md->e);
}

/* Field by field: structs have padding, which memcmp would compare. */
static bool ref_eq(const vs_ref *x, const vs_ref *y) {
    return memcmp(x->object.b, y->object.b, VS_ID_SIZE) == 0 && x->offset == y->offset &&
           x->length == y->length && x->crc == y->crc;
}

static bool root_eq(const vs_root *x, const vs_root *y) {
    if (x->empty != y->empty || x->keys != y->keys) return false;
    return x->empty || (x->level == y->level && ref_eq(&x->ref, &y->ref));
}

static bool entry_same(const vs_entry *x, const vs_entry *y) {
    if (strcmp(x->key, y->key) || x->version != y->version || x->is_inline != y->is_inline)
        return false;
    if (!x->is_inline) return ref_eq(&x->value, &y->value);
    return x->len == y->len && (x->len == 0 || memcmp(x->data, y->data, x->len) == 0);
}

/* ---- batches --------------------------------------------------------------------------------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15u;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

typedef struct batch {
    vs_op *ops;
    vs_entry *entries; /* owned, one per op (a delete's holds only its key) */
    size_t n;
} batch;

static void batch_dispose(batch *b) {
    for (size_t i = 0; i < b->n; i++) entry_free(&b->entries[i]);
    free(b->ops);
    free(b->entries);
    *b = (batch){0};
}

static char *random_key(size_t max_len) {
    size_t len = 1 + rnd() % max_len;
    char *k = malloc(len + 1);
    for (size_t i = 0; i < len; i++) k[i] = (char)('a' + rnd() % 26);
    k[len] = '\0';
    return k;
}

/* A value: inline bytes (lengths 0..100) or a reference to a random object. */
static void random_value(vs_entry *e, uint64_t version) {
    e->version = version;
    e->is_inline = rnd() % 2;
    if (e->is_inline) {
        e->len = rnd() % 101;
        e->data = e->len ? malloc(e->len) : NULL;
        for (size_t i = 0; i < e->len; i++) e->data[i] = (uint8_t)rnd();
    } else {
        for (size_t i = 0; i < VS_ID_SIZE; i++) e->value.object.b[i] = (uint8_t)rnd();
        e->value.object.b[0] |= 1; /* never the node table's all-zero id */
        e->value.offset = rnd() % 1000000;
        e->value.length = 1 + rnd() % 100000;
        e->value.crc = (uint32_t)rnd();
    }
}

static int key_cmp(const void *x, const void *y) {
    return strcmp(*(char *const *)x, *(char *const *)y);
}

/* Builds a batch from keys (owned, consumed): sorted, duplicates dropped; a key is deleted with
 * probability del_pct percent, else put with a fresh value. */
static batch batch_from_keys(char **keys, size_t n, unsigned del_pct, uint64_t version) {
    qsort(keys, n, sizeof *keys, key_cmp);
    batch b = {calloc(n + 1, sizeof(vs_op)), calloc(n + 1, sizeof(vs_entry)), 0};
    for (size_t i = 0; i < n; i++) {
        if (b.n > 0 && strcmp(b.ops[b.n - 1].key, keys[i]) == 0) {
            free(keys[i]);
            continue;
        }
        vs_op *op = &b.ops[b.n++];
        vs_entry *e = &b.entries[b.n - 1];
        e->key = keys[i];
        op->key = e->key;
        op->is_delete = rnd() % 100 < del_pct;
        if (op->is_delete) continue;
        random_value(e, version);
        op->entry = e;
    }
    free(keys);
    return b;
}

/* ---- checking the tree directly -------------------------------------------------------------- */

/* Walks the subtree at ref without the io: levels, key order, ranges [lo, hi) (hi NULL: none),
 * sizes, key counts and first keys. Returns the keys in the subtree; *first gets its first key. */
static uint64_t walk(const mem_io *m, const vs_ref *ref, unsigned level, const char *lo,
                     const char *hi, const char **first) {
    ck_assert_uint_lt(ref->offset, m->n);
    const vs_node *nd = m->nodes[ref->offset];
    ck_assert_uint_eq(nd->level, level);
    ck_assert_uint_ge(nd->n, 1);
    if (nd->n > 1) ck_assert_uint_le(payload_size(nd), VS_NODE_TARGET);
    if (level == 0) {
        for (size_t i = 0; i < nd->n; i++) {
            const char *k = nd->entries[i].key;
            if (i > 0) ck_assert_int_lt(strcmp(nd->entries[i - 1].key, k), 0);
            if (lo) ck_assert_int_ge(strcmp(k, lo), 0);
            if (hi) ck_assert_int_lt(strcmp(k, hi), 0);
        }
        *first = nd->entries[0].key;
        return nd->n;
    }
    uint64_t keys = 0;
    for (size_t i = 0; i < nd->n; i++) {
        const vs_child *c = &nd->children[i];
        if (i > 0) ck_assert_int_lt(strcmp(nd->children[i - 1].first_key, c->first_key), 0);
        if (lo) ck_assert_int_ge(strcmp(c->first_key, lo), 0);
        const char *chi = i + 1 < nd->n ? nd->children[i + 1].first_key : hi;
        const char *cfirst;
        uint64_t k = walk(m, &c->ref, level - 1, c->first_key, chi, &cfirst);
        ck_assert_uint_eq(k, c->keys);
        ck_assert_str_eq(cfirst, c->first_key); /* first keys are real, child 0's too */
        keys += k;
    }
    *first = nd->children[0].first_key;
    return keys;
}

static void check_structure(const mem_io *m, const vs_root *r, const model *md) {
    ck_assert_uint_eq(r->keys, md->n);
    ck_assert(r->empty == (md->n == 0));
    if (r->empty) return;
    const char *first;
    ck_assert_uint_eq(walk(m, &r->ref, r->level, NULL, NULL, &first), md->n);
    ck_assert_str_eq(first, md->e[0].key);
    if (r->level > 0) ck_assert_uint_ge(m->nodes[r->ref.offset]->n, 2); /* root collapsed */
}

/* The node table indexes on key's path (descending as the tree does; child 0 for smaller keys). */
static size_t path_of(const mem_io *m, const vs_root *r, const char *key, size_t *path) {
    size_t depth = 0;
    vs_ref ref = r->ref;
    for (unsigned level = r->level;; level--) {
        const vs_node *nd = m->nodes[ref.offset];
        path[depth++] = ref.offset;
        if (level == 0) return depth;
        size_t c = 0;
        while (c + 1 < nd->n && strcmp(nd->children[c + 1].first_key, key) <= 0) c++;
        ref = nd->children[c].ref;
    }
}

static void check_lookups(const vs_tree_io *io, const mem_io *m, const vs_root *r, const model *md,
                          size_t absent) {
    for (size_t i = 0; i < md->n; i++) {
        vs_entry got;
        bool found;
        NDS_OK(vs_tree_lookup(io, r, md->e[i].key, &got, &found));
        ck_assert_msg(found, "key %zu \"%s\" not found", i, md->e[i].key);
        ck_assert(entry_same(&got, &md->e[i]));
        entry_free(&got);
    }
    for (size_t i = 0; i < absent; i++) {
        char *k = random_key(300);
        if (i % 3 == 0) k[0] = '0'; /* before every key */
        if (i % 3 == 1) k[0] = '~'; /* after every key */
        vs_entry got;
        bool found;
        NDS_OK(vs_tree_lookup(io, r, k, &got, &found));
        ck_assert(found == (model_find(md, k) != NULL));
        if (found) entry_free(&got);
        free(k);
    }
    ck_assert_uint_eq(m->live, 0);
}

typedef struct collected {
    vs_entry *e;
    size_t n, cap;
} collected;

static int collect(void *ctx, const vs_entry *e) {
    collected *c = ctx;
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        c->e = realloc(c->e, c->cap * sizeof *c->e);
    }
    entry_clone(&c->e[c->n++], e);
    return 0;
}

static void collected_free(collected *c) {
    for (size_t i = 0; i < c->n; i++) entry_free(&c->e[i]);
    free(c->e);
}

static void check_list(const vs_tree_io *io, const vs_root *r, const model *md, const char *begin,
                       const char *end) {
    collected got = {0};
    NDS_OK(vs_tree_list(io, r, begin, end, collect, &got));
    size_t i = model_lower_bound(md, begin);
    size_t stop = end[0] ? model_lower_bound(md, end) : md->n;
    if (stop < i) stop = i;
    ck_assert_uint_eq(got.n, stop - i);
    for (size_t j = 0; j < got.n; j++) ck_assert(entry_same(&got.e[j], &md->e[i + j]));
    collected_free(&got);
}

static void check_random_lists(const vs_tree_io *io, const vs_root *r, const model *md, int count) {
    check_list(io, r, md, "", "");
    for (int t = 0; t < count; t++) {
        char *a = random_key(4), *b = random_key(4);
        if (md->n && t % 2) {
            free(a);
            a = strdup(md->e[rnd() % md->n].key);
        }
        if (strcmp(a, b) > 0) {
            char *x = a;
            a = b;
            b = x;
        }
        check_list(io, r, md, a, t % 5 == 0 ? "" : b);
        check_list(io, r, md, b, a); /* empty: begin after end */
        free(a);
        free(b);
    }
}

static vs_root apply_ok(const vs_tree_io *io, const vs_root *r, const batch *b) {
    vs_root out;
    NDS_OK(vs_tree_apply(io, r, b->ops, b->n, &out));
    return out;
}

/* ---- tests ----------------------------------------------------------------------------------- */

/* A batch of up to n random ops: new keys, replaces and deletes of existing keys, deletes of
 * missing keys. */
static batch random_batch(const model *md, size_t n, uint64_t version) {
    char **keys = malloc(n * sizeof *keys);
    for (size_t i = 0; i < n; i++) {
        unsigned dice = rnd() % 100;
        keys[i] = md->n && dice < 50 ? strdup(md->e[rnd() % md->n].key) : random_key(300);
    }
    return batch_from_keys(keys, n, 25, version);
}

static int sup_cmp(const void *x, const void *y) {
    const sup_rec *a = x, *b = y;
    if (a->is_node != b->is_node) return a->is_node ? 1 : -1;
    int c = memcmp(a->ref.object.b, b->ref.object.b, VS_ID_SIZE);
    if (c) return c;
    return a->ref.offset < b->ref.offset ? -1 : a->ref.offset > b->ref.offset;
}

/* Distinct nodes on the paths to keys (sorted table indexes into nodes). */
static size_t distinct_path_nodes(const mem_io *m, const vs_root *r, const vs_op *ops, size_t n,
                                  size_t *nodes) {
    size_t count = 0, path[VS_MAX_LEVEL + 1];
    for (size_t i = 0; i < n; i++) {
        size_t d = path_of(m, r, ops[i].key, path);
        for (size_t j = 0; j < d; j++) {
            bool seen = false;
            for (size_t k = 0; k < count && !seen; k++) seen = nodes[k] == path[j];
            if (!seen) nodes[count++] = path[j];
        }
    }
    return count;
}

/* A batch must report superseded exactly the old nodes on the paths to the keys it changes (puts
 * of other values, deletes of present keys) and the non-inline values it replaced or deleted; a
 * root that lost levels may add the old one-child nodes it collapsed through. before: the model
 * before the batch. */
static void check_superseded(const mem_io *m, const vs_root *old, const vs_root *now,
                             const model *before, const batch *b) {
    sup_rec *want = malloc((b->n * (VS_MAX_LEVEL + 2) + 1) * sizeof *want);
    vs_op *changed = malloc((b->n + 1) * sizeof *changed);
    size_t nwant = 0, nchanged = 0;
    for (size_t i = 0; i < b->n; i++) {
        const vs_op *op = &b->ops[i];
        const vs_entry *e = model_find(before, op->key);
        if (op->is_delete ? !e : e && entry_same(e, op->entry)) continue;
        changed[nchanged++] = *op;
        bool kept = e && !op->is_delete && !op->entry->is_inline && !e->is_inline &&
                    ref_eq(&e->value, &op->entry->value);
        if (e && !e->is_inline && !kept) want[nwant++] = (sup_rec){e->value, false};
    }
    if (!old->empty) {
        size_t *nodes = malloc((nchanged * (VS_MAX_LEVEL + 1) + 1) * sizeof *nodes);
        size_t count = distinct_path_nodes(m, old, changed, nchanged, nodes);
        for (size_t i = 0; i < count; i++) want[nwant++] = (sup_rec){{.offset = nodes[i]}, true};
        free(nodes);
    }
    sup_rec *got = malloc((m->nsup + 1) * sizeof *got);
    if (m->nsup) memcpy(got, m->sup, m->nsup * sizeof *got);
    qsort(got, m->nsup, sizeof *got, sup_cmp);
    qsort(want, nwant, sizeof *want, sup_cmp);
    size_t i = 0, j = 0, extra = 0;
    while (i < m->nsup || j < nwant) {
        int c = i == m->nsup ? 1 : j == nwant ? -1 : sup_cmp(&got[i], &want[j]);
        if (c == 0) {
            i++, j++;
            continue;
        }
        const sup_rec *x = c < 0 ? &got[i] : &want[j];
        ck_assert_msg(c < 0, "superseded %s at offset %llu not reported",
                      x->is_node ? "node" : "value", (unsigned long long)x->ref.offset);
        ck_assert_msg(x->is_node && !now->empty && now->level < old->level,
                      "superseded %s at offset %llu was not on a changed path",
                      x->is_node ? "node" : "value", (unsigned long long)x->ref.offset);
        extra++;
        i++;
    }
    free(got);
    free(want);
    free(changed);
}

START_TEST(random_batches_match_reference) {
    mem_io m;
    vs_tree_io io = mem_io_make(&m);
    model md = {0};
    vs_root r = {.empty = true};
    unsigned max_level = 0;
    for (int round = 0; round < 24; round++) {
        batch b = random_batch(&md, 1 + rnd() % 2000, (uint64_t)round + 1);
        counters_reset(&m);
        vs_root prev = r;
        r = apply_ok(&io, &r, &b);
        ck_assert_uint_le(m.max_live, prev.level + 1u); /* only the current path is held */
        check_superseded(&m, &prev, &r, &md, &b);
        model_apply(&md, b.ops, b.n);
        batch_dispose(&b);
        check_structure(&m, &r, &md);
        check_lookups(&io, &m, &r, &md, 200);
        check_random_lists(&io, &r, &md, 20);
        if (r.level > max_level) max_level = r.level;
    }
    ck_assert_uint_ge(max_level, 1); /* inner nodes were exercised */
    model_free(&md);
    mem_io_free(&m);
}
END_TEST

/* Keys of 200 bytes: "k" + padding + 8 digits of i * 10, so consecutive new keys fit between. */
static char *big_key(uint64_t i) {
    char *k = malloc(201);
    memset(k, 'p', 200);
    k[0] = 'k';
    snprintf(k + 191, 10, "%09llu", (unsigned long long)i);
    return k;
}

static batch put_batch(uint64_t first, size_t n, uint64_t step, uint64_t version) {
    char **keys = malloc(n * sizeof *keys);
    for (size_t i = 0; i < n; i++) keys[i] = big_key(first + i * step);
    return batch_from_keys(keys, n, 0, version);
}

static vs_root build_big(const vs_tree_io *io, model *md, size_t total) {
    vs_root r = {.empty = true};
    for (size_t done = 0; done < total; done += 10000) {
        batch b = put_batch(done * 10, 10000, 10, 1);
        r = apply_ok(io, &r, &b);
        model_apply(md, b.ops, b.n);
        batch_dispose(&b);
    }
    return r;
}

START_TEST(hundred_thousand_keys_log_loads) {
    mem_io m;
    vs_tree_io io = mem_io_make(&m);
    model md = {0};
    vs_root r = build_big(&io, &md, 100000);
    check_structure(&m, &r, &md);
    ck_assert_uint_ge(r.level, 2);
    /* Every lookup of a present key loads exactly one node per level. */
    for (int t = 0; t < 2000; t++) {
        counters_reset(&m);
        vs_entry got;
        bool found;
        NDS_OK(vs_tree_lookup(&io, &r, md.e[rnd() % md.n].key, &got, &found));
        ck_assert(found);
        entry_free(&got);
        ck_assert_uint_eq(m.loads, r.level + 1u);
    }
    /* A narrow list loads at most two paths. */
    counters_reset(&m);
    check_list(&io, &r, &md, md.e[5000].key, md.e[5010].key);
    ck_assert_uint_le(m.loads, 2u * (r.level + 1u));

    /* 1,000 random new keys: new nodes only on the touched paths (each may split in two). */
    char **keys = malloc(1000 * sizeof *keys);
    for (size_t i = 0; i < 1000; i++) keys[i] = big_key((rnd() % 100000) * 10 + 5);
    batch b = batch_from_keys(keys, 1000, 0, 2);
    size_t *touched = malloc(1000 * (VS_MAX_LEVEL + 1) * sizeof *touched);
    size_t ntouched = distinct_path_nodes(&m, &r, b.ops, b.n, touched);
    counters_reset(&m);
    vs_root r2 = apply_ok(&io, &r, &b);
    ck_assert_uint_le(m.stores, 1000u * (r.level + 1u));
    ck_assert_uint_le(m.stores, 2 * ntouched + 1);
    ck_assert_uint_le(m.max_live, r.level + 1u); /* only the current path is held */
    ck_assert_uint_eq(m.nsup, ntouched);         /* no value refs: puts of new keys */
    model_apply(&md, b.ops, b.n);
    batch_dispose(&b);
    free(touched);
    check_structure(&m, &r2, &md);

    /* 1,000 consecutive new keys: one path, a few dozen nodes. */
    b = put_batch(1000000, 1000, 1, 3); /* after every key */
    counters_reset(&m);
    vs_root r3 = apply_ok(&io, &r2, &b);
    ck_assert_uint_le(m.stores, 24);
    model_apply(&md, b.ops, b.n);
    batch_dispose(&b);
    check_structure(&m, &r3, &md);
    check_lookups(&io, &m, &r3, &md, 100);
    model_free(&md);
    mem_io_free(&m);
}
END_TEST

START_TEST(copy_on_write_shares_and_supersedes) {
    mem_io m;
    vs_tree_io io = mem_io_make(&m);
    model md = {0};
    vs_root r = {.empty = true};
    for (int round = 0; round < 10; round++) {
        batch b = random_batch(&md, 2000, 1);
        for (size_t i = 0; i < b.n; i++) b.ops[i].is_delete = false; /* puts only */
        for (size_t i = 0; i < b.n; i++)
            if (!b.ops[i].entry) {
                random_value(&b.entries[i], 1);
                b.ops[i].entry = &b.entries[i];
            }
        r = apply_ok(&io, &r, &b);
        model_apply(&md, b.ops, b.n);
        batch_dispose(&b);
    }
    ck_assert_uint_ge(r.level, 1);
    model old = {0};
    vs_op *all = calloc(md.n + 1, sizeof *all);
    ck_assert_ptr_nonnull(all);
    for (size_t i = 0; i < md.n; i++) all[i] = (vs_op){md.e[i].key, false, &md.e[i]};
    model_apply(&old, all, md.n);
    free(all);

    /* A batch of same-size replaces (no split), deletes of existing keys (non-inline values among
     * them), one delete of a missing key. */
    size_t nops = 0, cap = 64;
    vs_op *ops = calloc(cap, sizeof *ops);
    vs_entry *repl = calloc(cap, sizeof *repl); /* owned copies: keys of the ops too */
    size_t values = 0;                          /* non-inline values replaced or deleted */
    for (size_t i = 7; i < md.n && nops < cap - 1; i += md.n / 40 + 1) {
        const vs_entry *e = &md.e[i];
        entry_clone(&repl[nops], e);
        if (nops % 2 == 0) {
            /* Same size: an inline value of the same length, or another ref. */
            repl[nops].version = 99;
            if (!e->is_inline) repl[nops].value.offset += 1;
            ops[nops] = (vs_op){repl[nops].key, false, &repl[nops]};
        } else {
            ops[nops] = (vs_op){repl[nops].key, true, NULL};
        }
        values += !e->is_inline;
        nops++;
    }
    char missing[] = "~~missing";
    ops[nops++] = (vs_op){missing, true, NULL};
    size_t *touched = malloc(cap * (VS_MAX_LEVEL + 1) * sizeof *touched);
    size_t ntouched = distinct_path_nodes(&m, &r, ops, nops - 1, touched);
    counters_reset(&m);
    vs_root r2 = apply_ok(&io, &r, &(batch){ops, NULL, nops});
    /* Shared: the new nodes are exactly the rewritten paths (no splits: sizes did not grow). */
    ck_assert_uint_eq(m.stores, ntouched);
    /* Superseded: the old path nodes and the replaced and deleted values, nothing else. */
    ck_assert_uint_ge(values, 5);
    ck_assert_uint_eq(m.nsup, ntouched + values);
    check_superseded(&m, &r, &r2, &old, &(batch){ops, NULL, nops});
    model_apply(&md, ops, nops);
    check_structure(&m, &r2, &md);
    check_lookups(&io, &m, &r2, &md, 50);
    /* Persistence: the old root still reads every old value. */
    check_structure(&m, &r, &old);
    check_lookups(&io, &m, &r, &old, 50);
    check_list(&io, &r, &old, "", "");
    free(ops);
    for (size_t i = 0; i < cap; i++) entry_free(&repl[i]);
    free(repl);
    free(touched);
    model_free(&old);
    model_free(&md);
    mem_io_free(&m);
}
END_TEST

START_TEST(no_change_stores_nothing) {
    mem_io m;
    vs_tree_io io = mem_io_make(&m);
    model md = {0};
    vs_root r = build_big(&io, &md, 30000);
    ck_assert_uint_ge(r.level, 1);
    /* Deletes of missing keys, and a put of a value equal to the stored one. */
    vs_op ops[3] = {{"a", true, NULL}, {md.e[100].key, false, &md.e[100]}, {"zzz", true, NULL}};
    counters_reset(&m);
    vs_root out;
    NDS_OK(vs_tree_apply(&io, &r, ops, 3, &out));
    ck_assert_uint_eq(m.stores, 0);
    ck_assert_uint_eq(m.nsup, 0);
    ck_assert(root_eq(&out, &r));
    /* An empty batch, and deletes on an empty tree. */
    NDS_OK(vs_tree_apply(&io, &r, NULL, 0, &out));
    ck_assert(root_eq(&out, &r));
    vs_root empty = {.empty = true};
    NDS_OK(vs_tree_apply(&io, &empty, ops, 1, &out));
    ck_assert(out.empty);
    ck_assert_uint_eq(m.stores, 0);
    model_free(&md);
    mem_io_free(&m);
}
END_TEST

static batch delete_batch(const model *md, size_t from, size_t to) {
    char **keys = malloc((to - from) * sizeof *keys);
    for (size_t i = from; i < to; i++) keys[i - from] = strdup(md->e[i].key);
    return batch_from_keys(keys, to - from, 100, 0);
}

START_TEST(delete_everything_and_collapse) {
    mem_io m;
    vs_tree_io io = mem_io_make(&m);
    model md = {0};
    vs_root r = build_big(&io, &md, 30000);
    ck_assert_uint_ge(r.level, 1);
    /* Delete all but the first 100 keys: the root collapses to one leaf. */
    batch b = delete_batch(&md, 100, md.n);
    r = apply_ok(&io, &r, &b);
    model_apply(&md, b.ops, b.n);
    batch_dispose(&b);
    ck_assert_uint_eq(r.level, 0);
    check_structure(&m, &r, &md);
    check_lookups(&io, &m, &r, &md, 20);
    /* Delete the rest: an empty tree, every node superseded. */
    b = delete_batch(&md, 0, md.n);
    counters_reset(&m);
    vs_root e = apply_ok(&io, &r, &b);
    model_apply(&md, b.ops, b.n);
    batch_dispose(&b);
    ck_assert(e.empty);
    ck_assert_uint_eq(e.keys, 0);
    ck_assert_uint_eq(m.stores, 0);
    size_t nodes_superseded = 0;
    for (size_t i = 0; i < m.nsup; i++) {
        if (!m.sup[i].is_node) continue;
        nodes_superseded++;
        ck_assert_uint_eq(m.sup[i].ref.offset, r.ref.offset);
    }
    ck_assert_uint_eq(nodes_superseded, 1);
    check_lookups(&io, &m, &e, &md, 5);
    check_list(&io, &e, &md, "", "");
    model_free(&md);
    mem_io_free(&m);
}
END_TEST

/* An inner node left with one child is stored as such only when its parent keeps other children;
 * a root left with one such child collapses to the grandchild. */
START_TEST(one_child_levels) {
    mem_io m;
    vs_tree_io io = mem_io_make(&m);
    model md = {0};
    vs_root r = build_big(&io, &md, 100000);
    ck_assert_uint_eq(r.level, 2);
    const vs_node *root = m.nodes[r.ref.offset];
    ck_assert_uint_ge(root->n, 2);
    const vs_node *a = m.nodes[root->children[0].ref.offset];
    size_t keep = a->children[0].keys, leaf = a->children[0].ref.offset;
    size_t a_end = model_lower_bound(&md, root->children[1].first_key);
    batch b = delete_batch(&md, keep, a_end);
    r = apply_ok(&io, &r, &b);
    model_apply(&md, b.ops, b.n);
    batch_dispose(&b);
    check_structure(&m, &r, &md);
    ck_assert_uint_eq(r.level, 2);
    const vs_node *wrapper = m.nodes[m.nodes[r.ref.offset]->children[0].ref.offset];
    size_t wrapper_at = m.nodes[r.ref.offset]->children[0].ref.offset;
    ck_assert_uint_eq(wrapper->n, 1);
    ck_assert_uint_eq(wrapper->children[0].ref.offset, leaf); /* the leaf is shared */

    /* Everything after that leaf: the root collapses through the old one-child node. */
    b = delete_batch(&md, keep, md.n);
    counters_reset(&m);
    r = apply_ok(&io, &r, &b);
    model_apply(&md, b.ops, b.n);
    batch_dispose(&b);
    ck_assert_uint_eq(r.level, 0);
    ck_assert_uint_eq(r.ref.offset, leaf);
    ck_assert_uint_eq(m.stores, 0);
    bool wrapper_superseded = false, leaf_superseded = false;
    for (size_t i = 0; i < m.nsup; i++) {
        wrapper_superseded |= m.sup[i].is_node && m.sup[i].ref.offset == wrapper_at;
        leaf_superseded |= m.sup[i].is_node && m.sup[i].ref.offset == leaf;
    }
    ck_assert(wrapper_superseded && !leaf_superseded);
    check_structure(&m, &r, &md);
    check_lookups(&io, &m, &r, &md, 20);
    model_free(&md);
    mem_io_free(&m);
}
END_TEST

/* A whole tree deleted in one batch, from a deeper tree, in pieces from the middle. */
START_TEST(deletes_in_pieces) {
    mem_io m;
    vs_tree_io io = mem_io_make(&m);
    model md = {0};
    vs_root r = build_big(&io, &md, 40000);
    while (md.n > 0) {
        size_t from = md.n > 3000 ? rnd() % (md.n - 3000) : 0;
        size_t to = from + (md.n - from < 3000 ? md.n - from : 3000);
        batch b = delete_batch(&md, from, to);
        r = apply_ok(&io, &r, &b);
        model_apply(&md, b.ops, b.n);
        batch_dispose(&b);
        check_structure(&m, &r, &md);
    }
    ck_assert(r.empty);
    model_free(&md);
    mem_io_free(&m);
}
END_TEST

START_TEST(corrupt_levels_and_empty_inner) {
    mem_io m;
    vs_tree_io io = mem_io_make(&m);
    model md = {0};
    vs_root r = build_big(&io, &md, 30000);
    ck_assert_uint_ge(r.level, 1);
    m.lenient = true;
    /* A leaf claiming level 3 where the root's child (level r.level - 1) is expected. */
    vs_node *root = m.nodes[r.ref.offset];
    size_t child = root->children[1].ref.offset;
    uint8_t saved = m.nodes[child]->level;
    m.nodes[child]->level = 3;
    char want[128];
    snprintf(want, sizeof want, "node at %032d:%zu has level 3, expected %u", 0, child,
             r.level - 1u);
    vs_entry got;
    bool found;
    /* A key of that child: its first key. */
    const char *k = root->children[1].first_key;
    ck_assert_int_eq(vs_tree_lookup(&io, &r, k, &got, &found), NDS_ECORRUPT);
    ck_assert_msg(strstr(nds_error_last()->message, want), "%s", nds_error_last()->message);
    collected c = {0};
    ck_assert_int_eq(vs_tree_list(&io, &r, "", "", collect, &c), NDS_ECORRUPT);
    collected_free(&c);
    vs_entry put = md.e[0];
    put.key = (char *)k;
    vs_op op = {k, false, &put};
    vs_root out = {0};
    counters_reset(&m);
    ck_assert_int_eq(vs_tree_apply(&io, &r, &op, 1, &out), NDS_ECORRUPT);
    ck_assert_uint_eq(m.nsup, 0); /* a failed batch reports nothing */
    ck_assert_uint_eq(m.live, 0);
    m.nodes[child]->level = saved;

    /* An inner node without children. */
    size_t n_saved = root->n;
    root->n = 0;
    ck_assert_int_eq(vs_tree_lookup(&io, &r, k, &got, &found), NDS_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "inner node without children"));
    ck_assert_int_eq(vs_tree_apply(&io, &r, &op, 1, &out), NDS_ECORRUPT);
    ck_assert_uint_eq(m.live, 0);
    root->n = n_saved;

    /* A root deeper than the format allows. */
    vs_root deep = r;
    deep.level = VS_MAX_LEVEL + 1;
    ck_assert_int_eq(vs_tree_lookup(&io, &deep, k, &got, &found), NDS_ECORRUPT);
    ck_assert_int_eq(vs_tree_apply(&io, &deep, &op, 1, &out), NDS_ECORRUPT);
    model_free(&md);
    mem_io_free(&m);
}
END_TEST

/* A load or store failing at any point of a batch: the error comes back, every loaded node is
 * released, nothing is reported superseded, nothing leaks (ASan). */
START_TEST(io_failures_clean_up) {
    mem_io m;
    vs_tree_io io = mem_io_make(&m);
    model md = {0};
    vs_root r = build_big(&io, &md, 30000);
    for (long after = 1; after <= 40; after += after < 8 ? 1 : 8) {
        for (int which = 0; which < 2; which++) {
            char **keys = malloc(3000 * sizeof *keys);
            for (size_t i = 0; i < 3000; i++) keys[i] = big_key((rnd() % 40000) * 10 + 5);
            batch b = batch_from_keys(keys, 3000, 10, 2);
            counters_reset(&m);
            if (which)
                m.fail_store_after = after;
            else
                m.fail_load_after = after;
            vs_root out = {0};
            ck_assert_int_eq(vs_tree_apply(&io, &r, b.ops, b.n, &out), NDS_EIO);
            ck_assert_uint_eq(m.live, 0);
            ck_assert_uint_eq(m.nsup, 0);
            m.fail_store_after = m.fail_load_after = 0;
            batch_dispose(&b);
        }
    }
    check_lookups(&io, &m, &r, &md, 10); /* the old tree is untouched */
    model_free(&md);
    mem_io_free(&m);
}
END_TEST

START_TEST(unsorted_or_duplicate_ops) {
    mem_io m;
    vs_tree_io io = mem_io_make(&m);
    vs_entry a = {.key = "a", .is_inline = true}, b = {.key = "b", .is_inline = true};
    vs_root r = {.empty = true}, out;
    vs_op unsorted[2] = {{"b", false, &b}, {"a", false, &a}};
    ck_assert_int_eq(vs_tree_apply(&io, &r, unsorted, 2, &out), NDS_EINVAL);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "strictly increasing"));
    vs_op dup[2] = {{"a", false, &a}, {"a", true, NULL}};
    ck_assert_int_eq(vs_tree_apply(&io, &r, dup, 2, &out), NDS_EINVAL);
    vs_op wrong_key[1] = {{"b", false, &a}};
    ck_assert_int_eq(vs_tree_apply(&io, &r, wrong_key, 1, &out), NDS_EINVAL);
    vs_op no_entry[1] = {{"a", false, NULL}};
    ck_assert_int_eq(vs_tree_apply(&io, &r, no_entry, 1, &out), NDS_EINVAL);
    char *long_key = malloc(VS_KEY_MAX + 2);
    memset(long_key, 'x', VS_KEY_MAX + 1);
    long_key[VS_KEY_MAX + 1] = '\0';
    vs_entry long_entry = {.key = long_key, .is_inline = true};
    vs_op too_long[1] = {{long_key, false, &long_entry}};
    ck_assert_int_eq(vs_tree_apply(&io, &r, too_long, 1, &out), NDS_EINVAL);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "longer than 4096 bytes"));
    free(long_key);
    ck_assert_uint_eq(m.stores, 0);
    vs_op ok[2] = {{"a", false, &a}, {"b", false, &b}};
    NDS_OK(vs_tree_apply(&io, &r, ok, 2, &out));
    ck_assert_uint_eq(out.keys, 2);
    mem_io_free(&m);
}
END_TEST

/* The largest items (keys of VS_KEY_MAX bytes, inline values of VS_INLINE_MAX) split leaves and
 * inner nodes alike under the target; a larger inline value is refused (no decoder could read it);
 * splits keep nodes about equal. */
START_TEST(big_items_and_even_splits) {
    mem_io m;
    vs_tree_io io = mem_io_make(&m);
    model md = {0};
    enum { N = 240 };
    static uint8_t data[VS_INLINE_MAX + 1];
    vs_entry *e = calloc(N, sizeof *e);
    vs_op *ops = calloc(N, sizeof *ops);
    for (size_t i = 0; i < N; i++) {
        e[i].key = malloc(VS_KEY_MAX + 1);
        memset(e[i].key, 'k', VS_KEY_MAX);
        snprintf(e[i].key + VS_KEY_MAX - 4, 5, "%04zu", i);
        e[i] = (vs_entry){.key = e[i].key, .is_inline = true, .data = data, .len = VS_INLINE_MAX};
        ops[i] = (vs_op){e[i].key, false, &e[i]};
    }
    vs_root r = apply_ok(&io, &(vs_root){.empty = true}, &(batch){ops, NULL, N});
    model_apply(&md, ops, N);
    ck_assert_uint_eq(r.level, 2); /* 4 KiB first keys: about 15 children per inner node */
    check_structure(&m, &r, &md);
    check_lookups(&io, &m, &r, &md, 10);
    e[0].len = VS_INLINE_MAX + 1;
    vs_root out;
    ck_assert_int_eq(vs_tree_apply(&io, &r, ops, 1, &out), NDS_EINVAL);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "inline value of 513 bytes"));
    for (size_t i = 0; i < N; i++) free(e[i].key);
    free(e);
    free(ops);
    model_free(&md);

    /* 10,000 small keys in one batch: leaves within 25% of each other's size (but the last). */
    model md2 = {0};
    batch b = put_batch(0, 10000, 1, 1);
    vs_root r2 = apply_ok(&io, &(vs_root){.empty = true}, &b);
    model_apply(&md2, b.ops, b.n);
    batch_dispose(&b);
    check_structure(&m, &r2, &md2);
    const vs_node *root = m.nodes[r2.ref.offset];
    size_t lo = SIZE_MAX, hi = 0;
    for (size_t i = 0; i < root->n; i++) {
        size_t s = payload_size(m.nodes[root->children[i].ref.offset]);
        if (s < lo) lo = s;
        if (s > hi) hi = s;
    }
    ck_assert_uint_le(hi, VS_NODE_TARGET);
    ck_assert_uint_ge(lo * 4, hi * 3);
    model_free(&md2);
    mem_io_free(&m);
}
END_TEST

/* ---- diff ------------------------------------------------------------------------------------ */

/* One reported change: old and new versions (0 for a missing side). */
typedef struct change {
    char *key;
    uint64_t old_v, new_v;
    bool has_old, has_new;
} change;

typedef struct changes {
    change *v;
    size_t n, cap;
    size_t stop_after; /* > 0: the callback returns 7 at that call */
} changes;

static void changes_push(changes *c, const char *key, const vs_entry *o, const vs_entry *n) {
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        c->v = realloc(c->v, c->cap * sizeof *c->v);
    }
    c->v[c->n++] = (change){strdup(key), o ? o->version : 0, n ? n->version : 0, o != NULL,
                            n != NULL};
}

static int collect_change(void *ctx, const char *key, const vs_entry *o, const vs_entry *n) {
    changes *c = ctx;
    ck_assert(o || n);
    if (o) ck_assert_str_eq(o->key, key);
    if (n) ck_assert_str_eq(n->key, key);
    changes_push(c, key, o, n);
    return c->stop_after && c->n == c->stop_after ? 7 : 0;
}

static void changes_free(changes *c) {
    for (size_t i = 0; i < c->n; i++) free(c->v[i].key);
    free(c->v);
    *c = (changes){0};
}

/* The reference diff of two models, restricted to [begin, end). */
static changes model_diff(const model *a, const model *b, const char *begin, const char *end) {
    changes want = {0};
    size_t i = model_lower_bound(a, begin), j = model_lower_bound(b, begin);
    while (i < a->n || j < b->n) {
        int cmp = i == a->n ? 1 : j == b->n ? -1 : strcmp(a->e[i].key, b->e[j].key);
        const char *key = cmp <= 0 ? a->e[i].key : b->e[j].key;
        if (end[0] && strcmp(key, end) >= 0) break;
        if (cmp < 0)
            changes_push(&want, key, &a->e[i], NULL);
        else if (cmp > 0)
            changes_push(&want, key, NULL, &b->e[j]);
        else if (a->e[i].version != b->e[j].version)
            changes_push(&want, key, &a->e[i], &b->e[j]);
        i += cmp <= 0;
        j += cmp >= 0;
    }
    return want;
}

static void check_diff(const vs_tree_io *io, const mem_io *m, const vs_root *ra, const model *a,
                       const vs_root *rb, const model *b, const char *begin, const char *end) {
    changes got = {0}, want = model_diff(a, b, begin, end);
    NDS_OK(vs_tree_diff_range(io, ra, rb, begin, end, collect_change, &got));
    ck_assert_uint_eq(m->live, 0);
    ck_assert_uint_eq(got.n, want.n);
    for (size_t i = 0; i < got.n; i++) {
        const change *g = &got.v[i], *w = &want.v[i];
        ck_assert_str_eq(g->key, w->key);
        ck_assert(g->has_old == w->has_old && g->has_new == w->has_new);
        ck_assert_uint_eq(g->old_v, w->old_v);
        ck_assert_uint_eq(g->new_v, w->new_v);
    }
    changes_free(&got);
    changes_free(&want);
}

static model model_copy(const model *md) {
    model c = {calloc(md->n + 1, sizeof *c.e), md->n, md->n + 1};
    for (size_t i = 0; i < md->n; i++) entry_clone(&c.e[i], &md->e[i]);
    return c;
}

/* Random versions (heights from one leaf up, deletes included): every pair, both ways and with
 * itself and the empty tree, diffs like the models; so do random ranges; fn's return stops it. */
START_TEST(diff_matches_reference) {
    mem_io m;
    vs_tree_io io = mem_io_make(&m);
    enum { VERSIONS = 14 };
    model md[VERSIONS + 1] = {{0}};
    vs_root r[VERSIONS + 1] = {{.empty = true}};
    unsigned max_level = 0;
    for (int v = 1; v <= VERSIONS; v++) {
        /* Big batches first (heights grow), then small ones (little changes between versions). */
        size_t n = v <= 6 ? 1 + rnd() % 3000 : 1 + rnd() % 40;
        batch b = random_batch(&md[v - 1], n, (uint64_t)v);
        r[v] = apply_ok(&io, &r[v - 1], &b);
        md[v] = model_copy(&md[v - 1]);
        model_apply(&md[v], b.ops, b.n);
        batch_dispose(&b);
        if (r[v].level > max_level) max_level = r[v].level;
    }
    ck_assert_uint_ge(max_level, 1);
    for (int x = 0; x <= VERSIONS; x++) {
        for (int y = 0; y <= VERSIONS; y++) {
            check_diff(&io, &m, &r[x], &md[x], &r[y], &md[y], "", "");
            char *lo = random_key(3), *hi = random_key(3);
            if (strcmp(lo, hi) > 0) {
                char *t = lo;
                lo = hi;
                hi = t;
            }
            check_diff(&io, &m, &r[x], &md[x], &r[y], &md[y], lo, y % 3 ? hi : "");
            check_diff(&io, &m, &r[x], &md[x], &r[y], &md[y], hi, lo); /* empty range */
            free(lo);
            free(hi);
        }
    }
    /* A non-zero return of fn stops the walk and is returned. */
    changes got = {.stop_after = 3};
    ck_assert_int_eq(vs_tree_diff(&io, &r[0], &r[VERSIONS], collect_change, &got), 7);
    ck_assert_uint_eq(got.n, 3);
    ck_assert_uint_eq(m.live, 0);
    changes_free(&got);
    for (int v = 0; v <= VERSIONS; v++) model_free(&md[v]);
    mem_io_free(&m);
}
END_TEST

/* k changed keys among 100,000: the diff loads the paths to them on both sides and the roots, at
 * most 2 * k * (level + 1) + 2 nodes; identical versions load at most the roots. A value rewritten
 * with the same bytes is a change. */
START_TEST(diff_loads_follow_changes) {
    mem_io m;
    vs_tree_io io = mem_io_make(&m);
    model md = {0};
    vs_root r = build_big(&io, &md, 100000);
    ck_assert_uint_ge(r.level, 2);
    counters_reset(&m);
    check_diff(&io, &m, &r, &md, &r, &md, "", "");
    ck_assert_uint_le(m.loads, 2);
    static const size_t ks[] = {1, 2, 5, 10, 30, 100};
    for (size_t t = 0; t < sizeof ks / sizeof *ks; t++) {
        size_t k = ks[t];
        char **keys = malloc(k * sizeof *keys);
        for (size_t i = 0; i < k; i++) /* an existing key, or a new one between two */
            keys[i] = big_key((rnd() % 100000) * 10 + (i % 2 ? 5 : 0));
        batch b = batch_from_keys(keys, k, 30, (uint64_t)t + 2);
        vs_root r2 = apply_ok(&io, &r, &b);
        model md2 = model_copy(&md);
        model_apply(&md2, b.ops, b.n);
        batch_dispose(&b);
        unsigned level = r.level > r2.level ? r.level : r2.level;
        counters_reset(&m);
        check_diff(&io, &m, &r, &md, &r2, &md2, "", "");
        ck_assert_uint_le(m.loads, 2 * k * (level + 1u) + 2);
        counters_reset(&m);
        check_diff(&io, &m, &r2, &md2, &r, &md, "", "");
        ck_assert_uint_le(m.loads, 2 * k * (level + 1u) + 2);
        counters_reset(&m);
        check_diff(&io, &m, &r2, &md2, &r2, &md2, "", "");
        ck_assert_uint_le(m.loads, 2);
        model_free(&md2);
    }
    /* The same bytes under a new version. */
    vs_entry same;
    entry_clone(&same, &md.e[500]);
    same.version = 99;
    vs_op op = {same.key, false, &same};
    vs_root r3;
    NDS_OK(vs_tree_apply(&io, &r, &op, 1, &r3));
    changes got = {0};
    NDS_OK(vs_tree_diff(&io, &r, &r3, collect_change, &got));
    ck_assert_uint_eq(got.n, 1);
    ck_assert_str_eq(got.v[0].key, same.key);
    ck_assert(got.v[0].has_old && got.v[0].has_new);
    ck_assert_uint_eq(got.v[0].new_v, 99);
    changes_free(&got);
    entry_free(&same);
    model_free(&md);
    mem_io_free(&m);
}
END_TEST

/* One case per test, so CK_RUN_CASE can pick one. */
static void add(Suite *s, const char *name, const TTest *test) {
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test);
    suite_add_tcase(s, tc);
}

int main(void) {
    Suite *s = suite_create("versioned_tree");
    add(s, "random", random_batches_match_reference);
    add(s, "big", hundred_thousand_keys_log_loads);
    add(s, "cow", copy_on_write_shares_and_supersedes);
    add(s, "nochange", no_change_stores_nothing);
    add(s, "delete_all", delete_everything_and_collapse);
    add(s, "pieces", deletes_in_pieces);
    add(s, "one_child", one_child_levels);
    add(s, "corrupt", corrupt_levels_and_empty_inner);
    add(s, "ops", unsorted_or_duplicate_ops);
    add(s, "io_failures", io_failures_clean_up);
    add(s, "splits", big_items_and_even_splits);
    add(s, "diff", diff_matches_reference);
    add(s, "diff_loads", diff_loads_follow_changes);
    return nds_test_run(s);
}
