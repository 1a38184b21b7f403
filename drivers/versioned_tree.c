/* The versioned store's index: a copy-on-write B+tree over immutable nodes (versioned_internal.h).
 *
 * What: lookup of one key, listing of a key range in order, a batch update that builds the next
 * version's tree from the previous one, and a diff of two versions' trees (at the end of the file). Nodes are reached only through a vs_tree_io (load, release,
 * store, superseded), so the tree knows nothing of objects, envelopes or caches.
 *
 * How: an inner node's child i holds the keys in [first_key_i, first_key_{i+1}); the first child's
 * first key is the smallest key of its subtree (a tree from another writer may have "" there, which
 * reads the same). A batch (keys strictly increasing) descends once: each node takes the ops in its
 * range, leaves merge them with their entries, inner nodes recurse into the children that got ops
 * and rebuild themselves from what came back (zero, one or several nodes per child). Only nodes on
 * paths to changed keys are rewritten; every other subtree is shared with the previous version, and
 * a batch that changes nothing in a subtree stores nothing for it. A rebuilt node whose payload
 * would exceed VS_NODE_TARGET is cut into runs of about equal bytes, each under the target (an
 * item larger than the target would get a node of its own, but keys of at most VS_KEY_MAX bytes
 * and inline values of at most VS_INLINE_MAX, both checked, keep every item under 5 KiB). New nodes
 * are stored bottom-up (children first). An inner node left with one child is not stored at once:
 * it travels up as that child plus a count of "wraps" (one-child levels above it), stored by the
 * parent only if the parent keeps other children. So a root left with one child is replaced by that
 * child without ever storing the useless node; when the root comes back as several nodes, levels
 * are added on top until one remains.
 *
 * Superseded: every old node a batch replaces, and every non-inline value a put replaced (by
 * another reference) or a delete removed, is reported to io->superseded once the batch has
 * succeeded (the list is kept until then, so a failed batch reports nothing).
 *
 * Omits: merging or rebalancing underfull nodes. Deletes only shrink nodes, and a node left empty
 * vanishes, as does a one-child root. That is acceptable because correctness never depends on fill
 * (lookups and lists only follow key ranges), and heights only grow by splits: a level is added
 * only when the root overflows VS_NODE_TARGET (more than 15 children, keys being at most
 * VS_KEY_MAX bytes), so a tree is never deeper than its largest key count made it and lookups stay
 * O(log n) of that peak. Merging would rewrite siblings the batch did not touch, adding writes to
 * every commit that deletes.
 *
 * Errors: a node whose level is not the one its parent implies, or an inner node without children,
 * is NDS_ECORRUPT naming the node ("versioned index: node at <hex>:<offset> has level 3, expected
 * 1"); bad batches are NDS_EINVAL. After a failed apply the nodes already stored are unreferenced
 * garbage of an uncommitted batch (the caller discards the index object).
 *
 * Threading: reentrant; the io's functions are called from the calling thread only.
 * Ownership: loaded nodes are released on every path; nodes passed to io->store are built from
 * borrowed items (keys and values of loaded nodes and of the ops) and freed after the call;
 * lookup's out gets a deep copy (vs_entry_dispose); list's callback sees entries valid during the
 * call only. Memory held at once: the loaded nodes of the current path, the borrowed item array of
 * the node being rebuilt, and per level the small descriptors (first key, ref, key count) of the
 * new nodes. Recursion depth is at most the root's level + 1 <= VS_MAX_LEVEL + 1.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "versioned_internal.h"
#include "internal/error.h"
#include "internal/util.h"

/* ---- errors and loading ---------------------------------------------------------------------- */

static void id_hex(const vs_id *id, char out[VS_ID_HEX]) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < VS_ID_SIZE; i++) {
        out[2 * i] = digits[id->b[i] >> 4];
        out[2 * i + 1] = digits[id->b[i] & 15];
    }
    out[2 * VS_ID_SIZE] = '\0';
}

/* NDS_ECORRUPT naming the node: "versioned index: node at <hex>:<offset> <what>". */
static int corrupt_node(const vs_ref *ref, const char *what) {
    char hex[VS_ID_HEX];
    id_hex(&ref->object, hex);
    return nds_err(NDS_ECORRUPT, "versioned index: node at %s:%llu %s", hex,
                   (unsigned long long)ref->offset, what);
}

static int corrupt_level(const vs_ref *ref, unsigned got, unsigned want) {
    char what[64];
    snprintf(what, sizeof what, "has level %u, expected %u", got, want);
    return corrupt_node(ref, what);
}

/* Loads a node and checks what the tree relies on: the level its parent implies and, for an inner
 * node, at least one child (the decoder checks the encoding; a cache or test io may not). */
static int load_node(const vs_tree_io *io, const vs_ref *ref, unsigned level, const vs_node **out) {
    const vs_node *node = NULL;
    int rc = io->load(io->ctx, ref, level, &node);
    if (rc) return rc;
    if (node->level != level) {
        unsigned got = node->level;
        io->release(io->ctx, node);
        return corrupt_level(ref, got, level);
    }
    if (level > 0 && node->n == 0) {
        io->release(io->ctx, node);
        return corrupt_node(ref, "is an inner node without children");
    }
    *out = node;
    return 0;
}

static int check_root(const vs_root *root) {
    if (!root->empty && root->level > VS_MAX_LEVEL) {
        char what[64];
        snprintf(what, sizeof what, "has level %u, more than %d", root->level, VS_MAX_LEVEL);
        return corrupt_node(&root->ref, what);
    }
    return 0;
}

/* ---- searching inside a node ----------------------------------------------------------------- */

/* First entry whose key is >= key. */
static size_t entry_lower_bound(const vs_node *leaf, const char *key) {
    size_t lo = 0, hi = leaf->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(leaf->entries[mid].key, key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The child whose range holds key: the last one whose first key is <= key. *before is set when key
 * precedes every child (absent for a lookup; an update gives it to child 0). */
static size_t child_index(const vs_node *inner, const char *key, bool *before) {
    size_t lo = 0, hi = inner->n; /* count of children with first_key <= key, found in [lo, hi] */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(inner->children[mid].first_key, key) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *before = lo == 0;
    return lo == 0 ? 0 : lo - 1;
}

/* ---- lookup and list ------------------------------------------------------------------------- */

/* A deep copy (vs_entry_copy is versioned_format.c's; the tree does not depend on that file). */
static int entry_clone(vs_entry *out, const vs_entry *e) {
    vs_entry c = *e;
    c.data = NULL;
    c.key = nds_strdup(e->key);
    if (!c.key) return nds_err(NDS_ENOMEM, "versioned index: out of memory copying an entry");
    if (e->is_inline && e->len > 0) {
        c.data = malloc(e->len);
        if (!c.data) {
            free(c.key);
            return nds_err(NDS_ENOMEM, "versioned index: out of memory copying an entry");
        }
        memcpy(c.data, e->data, e->len);
    }
    *out = c;
    return 0;
}

int vs_tree_lookup(const vs_tree_io *io, const vs_root *root, const char *key, vs_entry *out,
                   bool *found) {
    *found = false;
    int rc = check_root(root);
    if (rc || root->empty) return rc;
    vs_ref ref = root->ref;
    for (unsigned level = root->level;; level--) {
        const vs_node *node;
        rc = load_node(io, &ref, level, &node);
        if (rc) return rc;
        if (level == 0) {
            size_t i = entry_lower_bound(node, key);
            if (i < node->n && strcmp(node->entries[i].key, key) == 0) {
                rc = entry_clone(out, &node->entries[i]);
                *found = rc == 0;
            }
            io->release(io->ctx, node);
            return rc;
        }
        bool before;
        size_t c = child_index(node, key, &before);
        ref = node->children[c].ref;
        io->release(io->ctx, node);
        if (before) return 0;
    }
}

typedef struct list_args {
    const vs_tree_io *io;
    const char *begin, *end; /* end "" = no bound */
    vs_entry_fn fn;
    void *ctx;
} list_args;

static bool before_end(const list_args *l, const char *key) {
    return l->end[0] == '\0' || strcmp(key, l->end) < 0;
}

static int list_node(const list_args *l, const vs_ref *ref, unsigned level) {
    const vs_node *node;
    int rc = load_node(l->io, ref, level, &node);
    if (rc) return rc;
    if (level == 0) {
        for (size_t i = entry_lower_bound(node, l->begin); i < node->n && rc == 0; i++) {
            if (!before_end(l, node->entries[i].key)) break;
            rc = l->fn(l->ctx, &node->entries[i]);
        }
    } else {
        bool before;
        /* Children before the one holding begin cannot hold keys >= begin; children whose first
         * key is >= end cannot hold keys < end. */
        for (size_t c = child_index(node, l->begin, &before); c < node->n && rc == 0; c++) {
            if (!before_end(l, node->children[c].first_key)) break;
            rc = list_node(l, &node->children[c].ref, level - 1);
        }
    }
    l->io->release(l->io->ctx, node);
    return rc;
}

int vs_tree_list(const vs_tree_io *io, const vs_root *root, const char *begin, const char *end,
                 vs_entry_fn fn, void *ctx) {
    list_args l = {io, begin ? begin : "", end ? end : "", fn, ctx};
    int rc = check_root(root);
    if (rc || root->empty) return rc;
    if (l.end[0] != '\0' && strcmp(l.begin, l.end) >= 0) return 0;
    return list_node(&l, &root->ref, root->level);
}

/* ---- apply: bookkeeping ---------------------------------------------------------------------- */

/** A node of the rebuilt tree, as its parent will reference it. */
typedef struct built {
    vs_child c;     /**< c.ref is the node at (this result's level - wraps) */
    unsigned wraps; /**< one-child inner levels above c.ref not yet stored */
    bool owned;     /**< c.first_key is malloc'd (else borrowed from a loaded node) */
    bool fresh;     /**< c.ref was stored by this batch */
} built;

typedef struct built_list {
    built *v;
    size_t n, cap;
} built_list;

typedef struct dropped {
    vs_ref ref;
    bool is_node;
} dropped;

typedef struct apply_ctx {
    const vs_tree_io *io;
    dropped *drops; /* reported to io->superseded when the batch succeeds */
    size_t ndrops, capdrops;
} apply_ctx;

static int grow(void **v, size_t *cap, size_t need, size_t item) {
    if (need <= *cap) return 0;
    size_t cap2 = *cap ? *cap * 2 : 16;
    while (cap2 < need) cap2 *= 2;
    size_t bytes;
    if (!nds_mul_size(cap2, item, &bytes))
        return nds_err(NDS_ENOMEM, "versioned index: too many items");
    void *p = realloc(*v, bytes);
    if (!p) return nds_err(NDS_ENOMEM, "versioned index: out of memory");
    *v = p;
    *cap = cap2;
    return 0;
}

static int built_push(built_list *l, built b) {
    int rc = grow((void **)&l->v, &l->cap, l->n + 1, sizeof *l->v);
    if (rc) return rc;
    l->v[l->n++] = b;
    return 0;
}

static int built_push_old(built_list *l, const vs_child *c) {
    return built_push(l, (built){.c = *c});
}

static void built_list_dispose(built_list *l) {
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].owned) free(l->v[i].c.first_key);
    free(l->v);
    *l = (built_list){0};
}

static int drop(apply_ctx *a, const vs_ref *ref, bool is_node) {
    if (!a->io->superseded) return 0;
    int rc = grow((void **)&a->drops, &a->capdrops, a->ndrops + 1, sizeof *a->drops);
    if (rc) return rc;
    a->drops[a->ndrops++] = (dropped){*ref, is_node};
    return 0;
}

static bool same_ref(const vs_ref *x, const vs_ref *y) {
    return memcmp(x->object.b, y->object.b, VS_ID_SIZE) == 0 && x->offset == y->offset &&
           x->length == y->length && x->crc == y->crc;
}

static bool entry_equal(const vs_entry *x, const vs_entry *y) {
    if (x->version != y->version || x->is_inline != y->is_inline) return false;
    if (!x->is_inline) return same_ref(&x->value, &y->value);
    return x->len == y->len && (x->len == 0 || memcmp(x->data, y->data, x->len) == 0);
}

/* The old entry's stored value, unless the replacement (NULL for a delete) still references it. */
static int drop_value(apply_ctx *a, const vs_entry *old, const vs_entry *replacement) {
    if (old->is_inline) return 0;
    if (replacement && !replacement->is_inline && same_ref(&old->value, &replacement->value))
        return 0;
    return drop(a, &old->value, false);
}

/* ---- apply: cutting and storing nodes -------------------------------------------------------- */

static size_t item_size(const vs_node *n, size_t i) {
    return n->level == 0 ? vs_entry_encoded_size(&n->entries[i])
                         : vs_child_encoded_size(&n->children[i]);
}

/* Where runs end: each run's bytes stay under the target, and run boundaries fall where the running
 * byte count crosses k equal shares (an item goes to the share holding its middle), so the runs are
 * about equal (a run closes early only if an item would overflow the target). ends gets up to n
 * entries; returns the number of runs (0 for no items). */
static size_t cut_runs(const vs_node *all, size_t *ends) {
    const uint64_t cap = VS_NODE_TARGET - VS_NODE_PAYLOAD_HEAD;
    uint64_t total = 0;
    for (size_t i = 0; i < all->n; i++) total += item_size(all, i);
    /* Shares of at most 7/8 of the target, so a share plus the item straddling its end still fits
     * (items are at most a few KiB but for oversized inline values). */
    uint64_t k = total <= cap ? 1 : nds_ceil_div(total, cap / 8 * 7);
    uint64_t share_bytes = total ? nds_ceil_div(total, k) : 1;
    uint64_t before = 0, cur = 0, share = 0;
    size_t runs = 0;
    for (size_t i = 0; i < all->n; i++) {
        uint64_t s = item_size(all, i);
        uint64_t my_share = nds_min_u64(k - 1, (before + s / 2) / share_bytes);
        if (cur > 0 && (cur + s > cap || my_share != share)) {
            ends[runs++] = i;
            cur = 0;
        }
        if (cur == 0) share = my_share;
        cur += s;
        before += s;
    }
    if (all->n > 0) ends[runs++] = all->n;
    return runs;
}

static uint64_t run_keys(const vs_node *run) {
    if (run->level == 0) return run->n;
    uint64_t keys = 0;
    for (size_t i = 0; i < run->n; i++) keys += run->children[i].keys;
    return keys;
}

/* Stores all's items (borrowed) as one or more nodes of its level and appends them to out. */
static int store_runs(apply_ctx *a, const vs_node *all, built_list *out) {
    if (all->n == 0) return 0;
    size_t *ends = malloc(all->n * sizeof *ends);
    if (!ends) return nds_err(NDS_ENOMEM, "versioned index: out of memory");
    size_t runs = cut_runs(all, ends), start = 0;
    int rc = 0;
    for (size_t r = 0; r < runs && rc == 0; start = ends[r++]) {
        vs_node run = {.level = all->level, .n = ends[r] - start};
        if (all->level == 0)
            run.entries = all->entries + start;
        else
            run.children = all->children + start;
        built b = {.owned = true, .fresh = true};
        b.c.keys = run_keys(&run);
        rc = a->io->store(a->io->ctx, &run, &b.c.ref);
        if (rc) break;
        b.c.first_key =
            nds_strdup(all->level == 0 ? run.entries[0].key : run.children[0].first_key);
        if (!b.c.first_key)
            rc = nds_err(NDS_ENOMEM, "versioned index: out of memory");
        else if ((rc = built_push(out, b)) != 0)
            free(b.c.first_key);
    }
    free(ends);
    return rc;
}

/* Stores the one-child levels a result of the given level carries (it is about to get siblings). */
static int store_wraps(apply_ctx *a, built *b, unsigned level) {
    for (; b->wraps > 0; b->wraps--) {
        vs_node wrapper = {.level = (uint8_t)(level - b->wraps + 1), .n = 1, .children = &b->c};
        vs_ref ref;
        int rc = a->io->store(a->io->ctx, &wrapper, &ref);
        if (rc) return rc;
        b->c.ref = ref;
        b->fresh = true;
    }
    return 0;
}

/* Builds an inner node of the given level from kids (its children, in order) and appends the result
 * to out: nothing for no kids; the single kid one wrap higher; else the stored node(s). */
static int finish_inner(apply_ctx *a, unsigned level, built_list *kids, built_list *out) {
    if (kids->n == 0) return 0;
    if (kids->n == 1) {
        built b = kids->v[0];
        if (b.owned) {
            kids->v[0].owned = false; /* moved to out */
        } else {
            b.c.first_key = nds_strdup(b.c.first_key);
            if (!b.c.first_key) return nds_err(NDS_ENOMEM, "versioned index: out of memory");
            b.owned = true;
        }
        b.wraps++;
        int rc = built_push(out, b);
        if (rc) free(b.c.first_key);
        return rc;
    }
    vs_child *children = malloc(kids->n * sizeof *children);
    if (!children) return nds_err(NDS_ENOMEM, "versioned index: out of memory");
    int rc = 0;
    for (size_t i = 0; i < kids->n && rc == 0; i++) {
        rc = store_wraps(a, &kids->v[i], level - 1);
        children[i] = kids->v[i].c;
    }
    if (rc == 0) {
        vs_node all = {.level = (uint8_t)level, .n = kids->n, .children = children};
        rc = store_runs(a, &all, out);
    }
    free(children);
    return rc;
}

/* ---- apply: the recursion -------------------------------------------------------------------- */

static int apply_node(apply_ctx *a, const vs_ref *ref, unsigned level, const vs_op *ops, size_t n,
                      built_list *out, bool *changed);

/* Merges a leaf's entries (none for an empty tree: leaf NULL) with ops. */
static int apply_leaf(apply_ctx *a, const vs_ref *ref, const vs_node *leaf, const vs_op *ops,
                      size_t n, built_list *out, bool *changed) {
    size_t old_n = leaf ? leaf->n : 0, i = 0, j = 0, k = 0;
    const vs_entry *old = leaf ? leaf->entries : NULL;
    vs_entry *merged = malloc((old_n + n) * sizeof *merged);
    if (!merged) return nds_err(NDS_ENOMEM, "versioned index: out of memory");
    bool ch = false;
    int rc = 0;
    while ((i < old_n || j < n) && rc == 0) {
        int cmp = i == old_n ? 1 : j == n ? -1 : strcmp(old[i].key, ops[j].key);
        if (cmp < 0) {
            merged[k++] = old[i++];
        } else if (cmp > 0) {
            if (!ops[j].is_delete) merged[k++] = *ops[j].entry;
            ch = ch || !ops[j].is_delete;
            j++;
        } else if (!ops[j].is_delete && entry_equal(&old[i], ops[j].entry)) {
            merged[k++] = old[i++];
            j++;
        } else {
            rc = drop_value(a, &old[i], ops[j].is_delete ? NULL : ops[j].entry);
            if (!ops[j].is_delete) merged[k++] = *ops[j].entry;
            ch = true;
            i++, j++;
        }
    }
    if (rc == 0 && ch && ref) rc = drop(a, ref, true);
    if (rc == 0 && ch) {
        vs_node all = {.level = 0, .n = k, .entries = merged};
        rc = store_runs(a, &all, out);
    }
    free(merged);
    *changed = rc == 0 && ch;
    return rc;
}

/* First op in ops[j, n) whose key is >= key. */
static size_t op_lower_bound(const vs_op *ops, size_t j, size_t n, const char *key) {
    while (j < n) {
        size_t mid = j + (n - j) / 2;
        if (strcmp(ops[mid].key, key) < 0)
            j = mid + 1;
        else
            n = mid;
    }
    return j;
}

/* Gives each child the ops in its range, recurses into those that got some, and rebuilds the node
 * from the unchanged children and what the changed ones came back as. */
static int apply_inner(apply_ctx *a, const vs_ref *ref, const vs_node *node, const vs_op *ops,
                       size_t n, built_list *out, bool *changed) {
    built_list kids = {0};
    bool any = false;
    size_t next = 0; /* first old child not yet in kids */
    int rc = 0;
    for (size_t j = 0; j < n && rc == 0;) {
        bool before, ch = false;
        size_t c = child_index(node, ops[j].key, &before);
        size_t end =
            c + 1 < node->n ? op_lower_bound(ops, j, n, node->children[c + 1].first_key) : n;
        if (c < next || end <= j) {
            rc = corrupt_node(ref, "has children out of key order");
            break;
        }
        for (; next < c && rc == 0; next++) rc = built_push_old(&kids, &node->children[next]);
        if (rc == 0)
            rc = apply_node(a, &node->children[c].ref, node->level - 1u, ops + j, end - j, &kids,
                            &ch);
        if (rc == 0 && !ch) rc = built_push_old(&kids, &node->children[c]);
        any = any || ch;
        next = c + 1;
        j = end;
    }
    for (; rc == 0 && any && next < node->n; next++)
        rc = built_push_old(&kids, &node->children[next]);
    if (rc == 0 && any) rc = drop(a, ref, true);
    if (rc == 0 && any) rc = finish_inner(a, node->level, &kids, out);
    built_list_dispose(&kids);
    *changed = rc == 0 && any;
    return rc;
}

/* Applies ops (all inside this node's range) to the node at ref (NULL: the empty tree's missing
 * leaf). Appends the node's replacement to out when something changed; *changed says whether. */
static int apply_node(apply_ctx *a, const vs_ref *ref, unsigned level, const vs_op *ops, size_t n,
                      built_list *out, bool *changed) {
    *changed = false;
    if (!ref) return apply_leaf(a, NULL, NULL, ops, n, out, changed);
    const vs_node *node;
    int rc = load_node(a->io, ref, level, &node);
    if (rc) return rc;
    rc = level == 0 ? apply_leaf(a, ref, node, ops, n, out, changed)
                    : apply_inner(a, ref, node, ops, n, out, changed);
    a->io->release(a->io->ctx, node);
    return rc;
}

/* ---- apply: the root ------------------------------------------------------------------------- */

static int check_ops(const vs_op *ops, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const vs_op *op = &ops[i];
        if (!op->key) return nds_err(NDS_EINVAL, "versioned index: batch op %zu has no key", i);
        if (strlen(op->key) > VS_KEY_MAX)
            return nds_err(NDS_EINVAL, "versioned index: key \"%.64s...\" is longer than %d bytes",
                           op->key, VS_KEY_MAX);
        if (!op->is_delete && (!op->entry || !op->entry->key || strcmp(op->entry->key, op->key)))
            return nds_err(NDS_EINVAL, "versioned index: put of \"%.200s\" without its entry",
                           op->key);
        /* The decoder refuses larger inline values: a node holding one could never be read. */
        if (!op->is_delete && op->entry->is_inline && op->entry->len > VS_INLINE_MAX)
            return nds_err(NDS_EINVAL,
                           "versioned index: inline value of %zu bytes for \"%.200s\" (at most %d)",
                           op->entry->len, op->key, VS_INLINE_MAX);
        if (i > 0 && strcmp(ops[i - 1].key, op->key) >= 0)
            return nds_err(NDS_EINVAL,
                           "versioned index: batch keys must be strictly increasing: "
                           "\"%.200s\" follows \"%.200s\"",
                           op->key, ops[i - 1].key);
    }
    return 0;
}

/* Adds levels on top of several root-level results until one remains. */
static int add_levels(apply_ctx *a, built_list *top, unsigned *level) {
    while (top->n > 1) {
        if (*level + 1 > VS_MAX_LEVEL)
            return nds_err(NDS_ELIMIT, "versioned index: the tree would be deeper than %d levels",
                           VS_MAX_LEVEL);
        built_list up = {0};
        int rc = finish_inner(a, *level + 1, top, &up);
        built_list_dispose(top);
        *top = up;
        if (rc) return rc;
        ++*level;
    }
    return 0;
}

/* A root inner node with one child is replaced by the child (repeat). Only old nodes can be such a
 * root here (the batch never stores one), so each is superseded. */
static int collapse_root(apply_ctx *a, vs_root *r) {
    while (r->level > 0) {
        const vs_node *node;
        int rc = load_node(a->io, &r->ref, r->level, &node);
        if (rc) return rc;
        bool single = node->n == 1;
        vs_child c = node->children[0];
        a->io->release(a->io->ctx, node);
        if (!single) return 0;
        if ((rc = drop(a, &r->ref, true)) != 0) return rc;
        r->ref = c.ref;
        r->level--;
    }
    return 0;
}

/* The new root from the root level's results (the old root level is level). */
static int make_root(apply_ctx *a, built_list *top, unsigned level, vs_root *out) {
    int rc = add_levels(a, top, &level);
    if (rc) return rc;
    vs_root r = {.empty = top->n == 0};
    if (top->n == 0) {
        *out = r;
        return 0;
    }
    const built *b = &top->v[0];
    r.ref = b->c.ref;
    r.level = (uint8_t)(level - b->wraps);
    r.keys = b->c.keys;
    if (!b->fresh && (rc = collapse_root(a, &r)) != 0) return rc;
    *out = r;
    return 0;
}

int vs_tree_apply(const vs_tree_io *io, const vs_root *root, const vs_op *ops, size_t n,
                  vs_root *out) {
    int rc = check_ops(ops, n);
    if (rc == 0) rc = check_root(root);
    if (rc) return rc;
    apply_ctx a = {.io = io};
    built_list top = {0};
    bool changed = false;
    unsigned level = root->empty ? 0 : root->level;
    if (n > 0) rc = apply_node(&a, root->empty ? NULL : &root->ref, level, ops, n, &top, &changed);
    vs_root r = *root;
    if (rc == 0 && changed) rc = make_root(&a, &top, level, &r);
    built_list_dispose(&top);
    if (rc == 0) {
        for (size_t i = 0; i < a.ndrops; i++)
            io->superseded(io->ctx, &a.drops[i].ref, a.drops[i].is_node);
        *out = r;
    }
    free(a.drops);
    return rc;
}

/* ---- diff ------------------------------------------------------------------------------------ */

/* Two versions are compared by walking both trees in key order at once, each side a cursor: the
 * path of loaded nodes from its root down to the item it is at (a child subtree or a leaf entry).
 * When both sides are at the same child (same object and offset) the subtree is identical and both
 * skip it unread; otherwise the side whose item starts first is opened (the higher one on a tie,
 * so a subtree shared at different depths is met at the same place on both sides), and entries are
 * compared when both sides are at one. Copy-on-write trees share every subtree a batch did not
 * touch, so the loads are the nodes on the paths to changed keys, on both sides, plus the roots.
 * A child's first key is only used as a lower bound of its keys (child 0's may be ""), so a tree
 * with loose first keys still diffs correctly, just with more loads. */

typedef struct diff_frame {
    const vs_node *node;
    size_t i; /* the item the cursor is at */
} diff_frame;

typedef struct diff_cursor {
    const vs_tree_io *io;
    const char *begin, *end; /* the range [begin, end) ("" end: no bound) */
    bool at_root;            /* the root is the current item (not yet opened or skipped) */
    vs_ref root_ref;
    unsigned root_level;
    size_t depth;
    diff_frame frames[VS_MAX_LEVEL + 1];
} diff_cursor;

/* What a cursor is at: an entry, or a subtree (ref, level) whose keys are all >= lo. */
typedef struct diff_item {
    const vs_entry *entry; /* NULL for a subtree */
    const vs_ref *ref;
    unsigned level;
    const char *lo;
} diff_item;

static void cursor_init(diff_cursor *c, const vs_tree_io *io, const vs_root *root,
                        const char *begin, const char *end) {
    c->io = io;
    c->begin = begin;
    c->end = end;
    c->at_root = !root->empty;
    c->root_ref = root->ref;
    c->root_level = root->empty ? 0 : root->level;
    c->depth = 0;
}

static void cursor_close(diff_cursor *c) {
    while (c->depth > 0) c->io->release(c->io->ctx, c->frames[--c->depth].node);
}

/* Pops finished nodes, moving their parents past them. */
static void cursor_settle(diff_cursor *c) {
    while (c->depth > 0 && c->frames[c->depth - 1].i >= c->frames[c->depth - 1].node->n) {
        c->io->release(c->io->ctx, c->frames[--c->depth].node);
        if (c->depth > 0) c->frames[c->depth - 1].i++;
    }
}

/* The current item; false at the end of the range. Items come in key order, so the first one at or
 * past end ends the walk. */
static bool cursor_item(const diff_cursor *c, diff_item *it) {
    if (c->at_root) {
        *it = (diff_item){NULL, &c->root_ref, c->root_level, ""};
    } else if (c->depth == 0) {
        return false;
    } else {
        const diff_frame *f = &c->frames[c->depth - 1];
        if (f->node->level == 0) {
            const vs_entry *e = &f->node->entries[f->i];
            *it = (diff_item){e, NULL, 0, e->key};
        } else {
            const vs_child *ch = &f->node->children[f->i];
            *it = (diff_item){NULL, &ch->ref, f->node->level - 1u, ch->first_key};
        }
    }
    return c->end[0] == '\0' || strcmp(it->lo, c->end) < 0;
}

static void cursor_next(diff_cursor *c) {
    if (c->at_root) {
        c->at_root = false;
        return;
    }
    c->frames[c->depth - 1].i++;
    cursor_settle(c);
}

/* Loads the subtree the cursor is at and moves to its first item that can hold keys >= begin. */
static int cursor_open(diff_cursor *c, const diff_item *it) {
    const vs_node *node;
    int rc = load_node(c->io, it->ref, it->level, &node);
    if (rc) return rc;
    if (c->depth == VS_MAX_LEVEL + 1) { /* unreachable: levels fall by one from a checked root */
        c->io->release(c->io->ctx, node);
        return corrupt_node(it->ref, "is deeper than the tree can be");
    }
    c->at_root = false;
    bool before;
    size_t first = node->level == 0 ? entry_lower_bound(node, c->begin)
                                    : child_index(node, c->begin, &before);
    c->frames[c->depth++] = (diff_frame){node, first};
    cursor_settle(c);
    return 0;
}

typedef struct diff_args {
    diff_cursor a, b;
    vs_diff_fn fn;
    void *ctx;
} diff_args;

static bool same_node(const diff_item *x, const diff_item *y) {
    return !x->entry && !y->entry && x->level == y->level && x->ref->offset == y->ref->offset &&
           memcmp(x->ref->object.b, y->ref->object.b, VS_ID_SIZE) == 0;
}

/* One side alone at an item the other side lacks (or may lack: the side opens its subtree). */
static int diff_one_side(diff_args *d, diff_cursor *c, const diff_item *it, bool is_old) {
    if (!it->entry) return cursor_open(c, it);
    int rc = is_old ? d->fn(d->ctx, it->entry->key, it->entry, NULL)
                    : d->fn(d->ctx, it->entry->key, NULL, it->entry);
    cursor_next(c);
    return rc;
}

/* Both sides at entries. */
static int diff_entries(diff_args *d, const diff_item *x, const diff_item *y) {
    int cmp = strcmp(x->entry->key, y->entry->key);
    if (cmp < 0) return diff_one_side(d, &d->a, x, true);
    if (cmp > 0) return diff_one_side(d, &d->b, y, false);
    int rc = 0;
    if (x->entry->version != y->entry->version)
        rc = d->fn(d->ctx, x->entry->key, x->entry, y->entry);
    cursor_next(&d->a);
    cursor_next(&d->b);
    return rc;
}

/* One step of the walk; *done at the end of both sides. */
static int diff_step(diff_args *d, bool *done) {
    diff_item x, y;
    bool hx = cursor_item(&d->a, &x), hy = cursor_item(&d->b, &y);
    *done = !hx && !hy;
    if (*done) return 0;
    if (!hy) return diff_one_side(d, &d->a, &x, true);
    if (!hx) return diff_one_side(d, &d->b, &y, false);
    if (same_node(&x, &y)) {
        cursor_next(&d->a);
        cursor_next(&d->b);
        return 0;
    }
    if (x.entry && y.entry) return diff_entries(d, &x, &y);
    int cmp = strcmp(x.lo, y.lo);
    /* An entry before a subtree's lower bound is in no later item of the other side. */
    if (x.entry) return cmp < 0 ? diff_one_side(d, &d->a, &x, true) : cursor_open(&d->b, &y);
    if (y.entry) return cmp > 0 ? diff_one_side(d, &d->b, &y, false) : cursor_open(&d->a, &x);
    bool open_a = cmp < 0 || (cmp == 0 && x.level >= y.level);
    return open_a ? cursor_open(&d->a, &x) : cursor_open(&d->b, &y);
}

int vs_tree_diff_range(const vs_tree_io *io, const vs_root *a, const vs_root *b,
                       const char *begin, const char *end, vs_diff_fn fn, void *ctx) {
    int rc = check_root(a);
    if (rc == 0) rc = check_root(b);
    if (rc) return rc;
    begin = begin ? begin : "";
    end = end ? end : "";
    if (end[0] != '\0' && strcmp(begin, end) >= 0) return 0;
    diff_args d = {.fn = fn, .ctx = ctx};
    cursor_init(&d.a, io, a, begin, end);
    cursor_init(&d.b, io, b, begin, end);
    for (bool done = false; rc == 0 && !done;) rc = diff_step(&d, &done);
    cursor_close(&d.a);
    cursor_close(&d.b);
    return rc;
}

int vs_tree_diff(const vs_tree_io *io, const vs_root *a, const vs_root *b, vs_diff_fn fn,
                 void *ctx) {
    return vs_tree_diff_range(io, a, b, "", "", fn, ctx);
}
