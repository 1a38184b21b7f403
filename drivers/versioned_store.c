/* The versioned store's engine: head discovery, reads through a node cache, and commits.
 *
 * Head: commits are "commits/<20 digits>", version 1 upward with no gap (commit v + 1 is written
 * create-only after commit v was read, and commits are never deleted). The latest version is found
 * from the "head" hint (written after each commit, best effort, possibly stale) by probing the
 * versions after it: doubling steps, then a binary search between the last present and the first
 * missing one. A hint naming a missing commit is ignored (probing starts at 0).
 *
 * Commit: the values go into data objects first, then, per attempt, the tree of the version built
 * on is updated copy-on-write, its new nodes go into one new index object, and the commit object
 * of the next version is written create-only. Losing that race deletes the attempt's index object,
 * finds the new head, re-checks the conditions there and tries again; the data objects are reused.
 * Nothing a reader can see changes until the commit object exists, and then all of it does.
 *
 * Threading: commits of one store are serialised by commit_mu (two would race for the same version
 * anyway); reads take no lock but the cache's. Ownership: the store owns its base reference and its
 * cache; cached nodes are shared, counted and freed when evicted unused.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "versioned_store.h"
#include "internal/context_internal.h"
#include "internal/crc32c.h"
#include "internal/kvstore_internal.h"
#include "internal/error.h"
#include "internal/pool.h"
#include "internal/util.h"

#define CACHE_BUCKETS 4096
#define CACHE_BYTES_DEFAULT ((size_t)64 << 20)
/* Commit attempts lost to other writers before giving up (each retry follows a new head, so a
 * writer only loses while others keep winning). */
#define COMMIT_ATTEMPTS_MAX 10000

/* ---- node cache ---------------------------------------------------------------------------------- */

typedef struct cache_entry {
    vs_id object;
    uint64_t offset;
    vs_node *node;
    size_t bytes;
    int refs;
    struct cache_entry *by_key, *by_node; /* hash chains */
    struct cache_entry *newer, *older;    /* LRU list */
} cache_entry;

typedef struct node_cache {
    pthread_mutex_t mu;
    cache_entry *keys[CACHE_BUCKETS], *nodes[CACHE_BUCKETS];
    cache_entry *newest, *oldest;
    size_t bytes, cap;
} node_cache;

struct vs_store {
    nds_kvstore *base;
    char *url;
    pthread_mutex_t commit_mu;
    pthread_mutex_t head_mu;
    uint64_t known_head; /* highest version seen to exist */
    vs_snapshot last_commit; /* the newest version vs_store_commit made here (under commit_mu) */
    node_cache cache;
};

static size_t key_bucket(const vs_id *object, uint64_t offset) {
    uint64_t h = 1469598103934665603ull ^ offset;
    for (int i = 0; i < VS_ID_SIZE; i++) h = (h ^ object->b[i]) * 1099511628211ull;
    return (size_t)(h % CACHE_BUCKETS);
}

static size_t node_bucket(const vs_node *n) {
    return (size_t)(((uintptr_t)n >> 4) * 11400714819323198485ull >> 40) % CACHE_BUCKETS;
}

static void lru_unlink(node_cache *c, cache_entry *e) {
    if (e->newer) e->newer->older = e->older;
    else c->newest = e->older;
    if (e->older) e->older->newer = e->newer;
    else c->oldest = e->newer;
    e->newer = e->older = NULL;
}

static void lru_push(node_cache *c, cache_entry *e) {
    e->older = c->newest;
    e->newer = NULL;
    if (c->newest) c->newest->newer = e;
    c->newest = e;
    if (!c->oldest) c->oldest = e;
}

static void chain_remove(cache_entry **head, cache_entry *e, bool by_key) {
    for (cache_entry **p = head; *p; p = by_key ? &(*p)->by_key : &(*p)->by_node)
        if (*p == e) {
            *p = by_key ? e->by_key : e->by_node;
            return;
        }
}

/* Drops unused entries, oldest first, until the cache is within its bound. */
static void cache_trim(node_cache *c) {
    cache_entry *e = c->oldest;
    while (c->bytes > c->cap && e) {
        cache_entry *next = e->newer;
        if (e->refs == 0) {
            lru_unlink(c, e);
            chain_remove(&c->keys[key_bucket(&e->object, e->offset)], e, true);
            chain_remove(&c->nodes[node_bucket(e->node)], e, false);
            c->bytes -= e->bytes;
            vs_node_free(e->node);
            free(e);
        }
        e = next;
    }
}

static cache_entry *cache_find(node_cache *c, const vs_ref *ref) {
    for (cache_entry *e = c->keys[key_bucket(&ref->object, ref->offset)]; e; e = e->by_key)
        if (e->offset == ref->offset && memcmp(&e->object, &ref->object, sizeof e->object) == 0)
            return e;
    return NULL;
}

/* Takes a use of the cached node at ref, or inserts node (then owned by the cache; a node another
 * thread inserted first wins and node is freed). */
static const vs_node *cache_take(node_cache *c, const vs_ref *ref, vs_node *node) {
    pthread_mutex_lock(&c->mu);
    cache_entry *e = cache_find(c, ref);
    if (!e && node && (e = calloc(1, sizeof *e))) {
        e->object = ref->object;
        e->offset = ref->offset;
        e->node = node;
        e->bytes = ref->length + sizeof *e;
        e->by_key = c->keys[key_bucket(&ref->object, ref->offset)];
        c->keys[key_bucket(&ref->object, ref->offset)] = e;
        e->by_node = c->nodes[node_bucket(node)];
        c->nodes[node_bucket(node)] = e;
        c->bytes += e->bytes;
        lru_push(c, e);
        node = NULL;
    } else if (e) {
        lru_unlink(c, e);
        lru_push(c, e);
    }
    const vs_node *found = NULL;
    if (e) {
        e->refs++;
        found = e->node;
        cache_trim(c);
    }
    pthread_mutex_unlock(&c->mu);
    vs_node_free(node); /* lost the race, or out of memory for the entry */
    return found;
}

static void cache_release(node_cache *c, const vs_node *node) {
    if (!node) return;
    pthread_mutex_lock(&c->mu);
    for (cache_entry *e = c->nodes[node_bucket(node)]; e; e = e->by_node)
        if (e->node == node) {
            e->refs--;
            break;
        }
    cache_trim(c);
    pthread_mutex_unlock(&c->mu);
}

static void cache_dispose(node_cache *c) {
    for (cache_entry *e = c->oldest, *next; e; e = next) {
        next = e->newer;
        vs_node_free(e->node);
        free(e);
    }
    pthread_mutex_destroy(&c->mu);
}

/* ---- reading objects --------------------------------------------------------------------------- */

/* Reads [offset, offset + len) of base key; a missing object or fewer bytes is corrupt. where
 * (naming the store and what is read) starts every message. */
static int read_object_range(vs_store *s, const char *key, uint64_t offset, uint64_t len,
                             const char *where, nds_read_result *r) {
    nds_read_options ro = NDS_READ_OPTIONS_INIT;
    ro.byte_start = (int64_t)offset;
    ro.byte_length = (int64_t)len;
    int rc = nds_kvstore_read(s->base, key, &ro, r);
    if (rc == NDS_ERANGE || (!rc && r->state == NDS_READ_VALUE && r->value.len != len)) {
        if (!rc) nds_read_result_dispose(r);
        return nds_err(NDS_ECORRUPT,
                       "%s: object %s is shorter than the %" PRIu64 " bytes at %" PRIu64
                       " it should hold",
                       where, key, len, offset);
    }
    if (rc) return nds_err_prefix(rc, "%s: reading %s", where, key);
    if (r->state == NDS_READ_MISSING)
        return nds_err(NDS_ECORRUPT,
                       "%s: object %s is missing (collected with its version by gc, lost, or "
                       "deleted while still referenced)",
                       where, key);
    return 0;
}

static int load_node(vs_store *s, const vs_ref *ref, unsigned level, const vs_node **out) {
    cache_entry *hit;
    pthread_mutex_lock(&s->cache.mu);
    hit = cache_find(&s->cache, ref);
    pthread_mutex_unlock(&s->cache.mu);
    if (hit && (*out = cache_take(&s->cache, ref, NULL))) {
        if ((*out)->level == level) return 0;
        cache_release(&s->cache, *out);
        return nds_err(NDS_ECORRUPT, "versioned store %s: index node has level %u, expected %u",
                       s->url, (unsigned)(*out)->level, level);
    }
    char key[VS_OBJECT_KEY_MAX], where[VS_OBJECT_KEY_MAX + 600];
    vs_object_key(VS_INDEX_PREFIX, &ref->object, key);
    snprintf(where, sizeof where, "versioned store %s: index object %s at %" PRIu64, s->url, key,
             ref->offset);
    if (ref->length < VS_HEADER_SIZE || ref->length > VS_ENVELOPE_MAX)
        return nds_err(NDS_ECORRUPT, "%s: node length %" PRIu64 " is impossible", where,
                       ref->length);
    nds_read_result r;
    int rc = read_object_range(s, key, ref->offset, ref->length, where, &r);
    if (rc) return rc;
    vs_node *node = NULL;
    rc = vs_node_decode(r.value.data, r.value.len, ref->crc, level, where, &node);
    nds_read_result_dispose(&r);
    if (rc) return rc;
    *out = cache_take(&s->cache, ref, node);
    return *out ? 0 : nds_err(NDS_ENOMEM, "versioned store %s: out of memory", s->url);
}

static int io_load(void *ctx, const vs_ref *ref, unsigned level, const vs_node **node) {
    return load_node(ctx, ref, level, node);
}

static void io_release(void *ctx, const vs_node *node) {
    cache_release(&((vs_store *)ctx)->cache, node);
}

static vs_tree_io read_io(vs_store *s) {
    return (vs_tree_io){io_load, io_release, NULL, NULL, s};
}

/* ---- open, names ------------------------------------------------------------------------------------ */

int vs_store_open(vs_store **out, nds_kvstore *base, const char *url) {
    vs_store *s = calloc(1, sizeof *s);
    if (!s || !(s->url = nds_strdup(url))) {
        free(s);
        return nds_err(NDS_ENOMEM, "versioned store: out of memory");
    }
    s->base = nds_kvstore_ref(base);
    pthread_mutex_init(&s->commit_mu, NULL);
    pthread_mutex_init(&s->head_mu, NULL);
    pthread_mutex_init(&s->cache.mu, NULL);
    s->cache.cap = CACHE_BYTES_DEFAULT;
    *out = s;
    return 0;
}

void vs_store_free(vs_store *s) {
    if (!s) return;
    cache_dispose(&s->cache);
    pthread_mutex_destroy(&s->commit_mu);
    pthread_mutex_destroy(&s->head_mu);
    nds_kvstore_free(s->base);
    free(s->url);
    free(s);
}

const char *vs_store_url(const vs_store *s) { return s->url; }

void vs_generation(uint64_t v, nds_generation *g) {
    g->kind = NDS_GEN_VALUE;
    snprintf(g->value, sizeof g->value, "v%" PRIu64, v);
}

/* ---- head ------------------------------------------------------------------------------------------ */

/* Reads commit v; *found false when it does not exist. */
static int read_commit(vs_store *s, uint64_t v, vs_commit *c, bool *found) {
    char key[VS_OBJECT_KEY_MAX], where[VS_OBJECT_KEY_MAX + 600];
    vs_commit_key(v, key);
    nds_read_result r;
    int rc = nds_kvstore_read(s->base, key, NULL, &r);
    if (rc) return nds_err_prefix(rc, "versioned store %s: reading %s", s->url, key);
    *found = r.state == NDS_READ_VALUE;
    if (*found) {
        snprintf(where, sizeof where, "versioned store %s: commit %s", s->url, key);
        rc = vs_commit_decode(r.value.data, r.value.len, v, where, c);
    }
    nds_read_result_dispose(&r);
    return rc;
}

static int commit_present(vs_store *s, uint64_t v, bool *present) {
    vs_commit c;
    int rc = read_commit(s, v, &c, present);
    if (!rc && *present) vs_commit_dispose(&c);
    return rc;
}

/* The hint's version, or 0 when it is missing or unreadable (a hint is only a starting point). */
static uint64_t read_hint(vs_store *s) {
    nds_read_result r;
    if (nds_kvstore_read(s->base, VS_HEAD_HINT, NULL, &r) != 0) return 0;
    uint64_t v = 0;
    if (r.state == NDS_READ_VALUE && r.value.len > 0 && r.value.len < 21) {
        char text[24];
        memcpy(text, r.value.data, r.value.len);
        text[r.value.len] = '\0';
        char *end;
        unsigned long long parsed = strtoull(text, &end, 10);
        if (*end == '\0' || *end == '\n') v = parsed;
    }
    nds_read_result_dispose(&r);
    return v;
}

/* The last present version after known (which is present, or 0): doubling probes, then a binary
 * search between the last present and the first missing. */
static int probe_forward(vs_store *s, uint64_t known, uint64_t *head) {
    uint64_t lo = known, step = 1, hi = 0;
    for (;;) {
        bool present;
        if (lo > UINT64_MAX - step)
            return nds_err(NDS_ECORRUPT, "versioned store %s: version numbers overflow", s->url);
        int rc = commit_present(s, lo + step, &present);
        if (rc) return rc;
        if (!present) {
            hi = lo + step;
            break;
        }
        lo += step;
        step *= 2;
    }
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        bool present;
        int rc = commit_present(s, mid, &present);
        if (rc) return rc;
        if (present) lo = mid;
        else hi = mid;
    }
    *head = lo;
    return 0;
}

static void note_head(vs_store *s, uint64_t v) {
    pthread_mutex_lock(&s->head_mu);
    if (v > s->known_head) s->known_head = v;
    pthread_mutex_unlock(&s->head_mu);
}

int vs_store_version(vs_store *s, uint64_t v, vs_snapshot *out) {
    out->version = v;
    out->root = (vs_root){.empty = true};
    if (v == 0) return 0;
    vs_commit c;
    bool found;
    int rc = read_commit(s, v, &c, &found);
    if (rc) return rc;
    if (!found)
        return nds_err(NDS_ENOTFOUND, "versioned store %s: version %" PRIu64 " does not exist",
                       s->url, v);
    out->root = c.root;
    vs_commit_dispose(&c);
    note_head(s, v);
    return 0;
}

int vs_store_latest(vs_store *s, vs_snapshot *out) {
    pthread_mutex_lock(&s->head_mu);
    uint64_t start = s->known_head;
    pthread_mutex_unlock(&s->head_mu);
    uint64_t hint = read_hint(s);
    if (hint > start) {
        bool present;
        int rc = commit_present(s, hint, &present);
        if (rc) return rc;
        if (present) start = hint; /* else a hint from a lost or foreign write: ignore it */
    }
    uint64_t head = 0;
    int rc = probe_forward(s, start, &head);
    return rc ? rc : vs_store_version(s, head, out);
}

int vs_store_commit_info(vs_store *s, uint64_t v, vs_commit *out) {
    bool found;
    int rc = read_commit(s, v, out, &found);
    if (!rc && !found)
        rc = nds_err(NDS_ENOTFOUND, "versioned store %s: version %" PRIu64 " does not exist",
                     s->url, v);
    return rc;
}

/* ---- tags ------------------------------------------------------------------------------------------- */

static int64_t wall_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int vs_store_tag(vs_store *s, const char *tag, uint64_t *version) {
    if (!vs_tag_name_valid(tag))
        return nds_err(NDS_EINVAL, "versioned store %s: \"%s\" is not a valid tag name", s->url,
                       tag);
    char *key = nds_asprintf("%s%s", VS_TAG_PREFIX, tag);
    if (!key) return nds_err(NDS_ENOMEM, "out of memory");
    nds_read_result r;
    int rc = nds_kvstore_read(s->base, key, NULL, &r);
    if (!rc && r.state != NDS_READ_VALUE)
        rc = nds_err(NDS_ENOTFOUND, "versioned store %s: no tag \"%s\"", s->url, tag);
    else if (!rc) {
        char where[700];
        snprintf(where, sizeof where, "versioned store %s: tag %s", s->url, key);
        rc = vs_tag_decode(r.value.data, r.value.len, where, version);
    }
    if (r.state == NDS_READ_VALUE) nds_read_result_dispose(&r);
    free(key);
    return rc;
}

/* ---- reads ------------------------------------------------------------------------------------------- */

int vs_store_lookup(vs_store *s, const vs_snapshot *snap, const char *key, vs_entry *out,
                    bool *found) {
    vs_tree_io io = read_io(s);
    return vs_tree_lookup(&io, &snap->root, key, out, found);
}

int vs_store_list(vs_store *s, const vs_snapshot *snap, const char *begin, const char *end,
                  vs_entry_fn fn, void *ctx) {
    vs_tree_io io = read_io(s);
    return vs_tree_list(&io, &snap->root, begin, end, fn, ctx);
}

int vs_store_diff(vs_store *s, const vs_snapshot *a, const vs_snapshot *b, const char *begin,
                  const char *end, vs_diff_fn fn, void *ctx) {
    vs_tree_io io = read_io(s);
    return vs_tree_diff_range(&io, &a->root, &b->root, begin, end, fn, ctx);
}

static void free_release(void *ctx, const uint8_t *data) {
    (void)ctx;
    free((void *)data);
}

/* Reads blocks [first, last] of e's value (with its table when it has one) and checks them. */
static int read_blocks(vs_store *s, const vs_entry *e, uint64_t first, uint64_t last,
                       const char *key, const char *where, nds_read_result *blocks) {
    uint64_t len = e->value.length, table_len = vs_value_table_size(len);
    uint8_t *table = NULL;
    int rc = 0;
    if (table_len) {
        nds_read_result t;
        rc = read_object_range(s, key, e->value.offset + len, table_len, where, &t);
        if (rc) return rc;
        rc = vs_value_table_verify(t.value.data, len, e->value.crc, where);
        if (!rc && !(table = malloc(table_len))) rc = nds_err(NDS_ENOMEM, "out of memory");
        if (!rc) memcpy(table, t.value.data, table_len);
        nds_read_result_dispose(&t);
        if (rc) {
            free(table);
            return rc;
        }
    }
    uint64_t from = first * VS_BLOCK_SIZE, to = (last + 1) * VS_BLOCK_SIZE;
    if (to > len) to = len;
    rc = read_object_range(s, key, e->value.offset + from, to - from, where, blocks);
    if (!rc) {
        rc = vs_value_blocks_verify(blocks->value.data, len, first, last - first + 1, table,
                                    e->value.crc, where);
        if (rc) nds_read_result_dispose(blocks);
    }
    free(table);
    return rc;
}

int vs_store_read_value(vs_store *s, const vs_entry *e, uint64_t offset, uint64_t len,
                        nds_bytes *out) {
    *out = (nds_bytes){0};
    if (e->is_inline) return nds_bytes_copy(out, e->data + offset, len);
    if (len == 0) return 0;
    char key[VS_OBJECT_KEY_MAX], where[VS_OBJECT_KEY_MAX + VS_KEY_MAX + 600];
    vs_object_key(VS_DATA_PREFIX, &e->value.object, key);
    snprintf(where, sizeof where, "versioned store %s: key %s of version %" PRIu64 " (in %s)",
             s->url, e->key, e->version, key);
    uint64_t first = offset / VS_BLOCK_SIZE, last = (offset + len - 1) / VS_BLOCK_SIZE;
    nds_read_result blocks;
    int rc = read_blocks(s, e, first, last, key, where, &blocks);
    if (rc) return rc;
    uint64_t skip = offset - first * VS_BLOCK_SIZE;
    if (skip == 0 && blocks.value.len == len) {
        *out = blocks.value; /* the whole read is the answer: hand it over */
        blocks.value = (nds_bytes){0};
    } else {
        uint8_t *p = malloc(len ? len : 1);
        if (!p) rc = nds_err(NDS_ENOMEM, "out of memory");
        else {
            memcpy(p, blocks.value.data + skip, len);
            *out = (nds_bytes){p, len, free_release, NULL};
        }
    }
    nds_read_result_dispose(&blocks);
    return rc;
}


/* Checks the bytes in iov (blocks first.. of a value of value_len bytes, back to back) against
 * the value's block table (NULL for a one-block value: then against crc). */
static int verify_iov_blocks(const struct iovec *iov, size_t iovcnt, uint64_t first,
                             uint64_t value_len, const uint8_t *table, uint32_t crc,
                             const char *where) {
    uint64_t block = first, left_in_block = 0;
    uint32_t run = 0;
    for (size_t i = 0; i < iovcnt; i++) {
        const uint8_t *p = iov[i].iov_base;
        size_t n = iov[i].iov_len;
        while (n > 0) {
            if (left_in_block == 0) {
                uint64_t start = block * VS_BLOCK_SIZE;
                left_in_block = value_len - start < VS_BLOCK_SIZE ? value_len - start : VS_BLOCK_SIZE;
                run = 0;
            }
            size_t take = n < left_in_block ? n : (size_t)left_in_block;
            run = nds_crc32c_extend(run, p, take);
            p += take, n -= take, left_in_block -= take;
            if (left_in_block == 0) {
                uint32_t want = table ? nds_load_le32(table + 4 * block) : crc;
                if (run != want)
                    return nds_err(NDS_ECORRUPT,
                                   "%s: block %" PRIu64 " checksum mismatch (stored 0x%08x, "
                                   "computed 0x%08x)",
                                   where, block, want, run);
                block++;
            }
        }
    }
    return 0;
}

/* Copies bytes into iov. */
static void copy_to_iov(const uint8_t *p, const struct iovec *iov, size_t iovcnt) {
    for (size_t i = 0; i < iovcnt; p += iov[i].iov_len, i++) memcpy(iov[i].iov_base, p, iov[i].iov_len);
}

int vs_store_read_into(vs_store *s, const vs_entry *e, uint64_t offset, const struct iovec *iov,
                       size_t iovcnt) {
    uint64_t len = 0;
    for (size_t i = 0; i < iovcnt; i++) len += iov[i].iov_len;
    if (len == 0) return 0;
    uint64_t vlen = e->is_inline ? e->len : e->value.length;
    uint64_t first = offset / VS_BLOCK_SIZE, last = (offset + len - 1) / VS_BLOCK_SIZE;
    uint64_t end = (last + 1) * VS_BLOCK_SIZE < vlen ? (last + 1) * VS_BLOCK_SIZE : vlen;
    bool whole_blocks = offset == first * VS_BLOCK_SIZE && offset + len == end;
    if (e->is_inline || !whole_blocks || !nds_kvstore_can_read_into(s->base)) {
        nds_bytes b; /* through a buffer: inline, or a range that splits a block */
        int rc = vs_store_read_value(s, e, offset, len, &b);
        if (!rc) copy_to_iov(b.data, iov, iovcnt);
        nds_bytes_release(&b);
        return rc;
    }
    char key[VS_OBJECT_KEY_MAX], where[VS_OBJECT_KEY_MAX + VS_KEY_MAX + 600];
    vs_object_key(VS_DATA_PREFIX, &e->value.object, key);
    snprintf(where, sizeof where, "versioned store %s: key %s of version %" PRIu64 " (in %s)",
             s->url, e->key, e->version, key);
    uint64_t table_len = vs_value_table_size(vlen);
    nds_read_result t = {0}, r = {0};
    int rc = table_len ? read_object_range(s, key, e->value.offset + vlen, table_len, where, &t) : 0;
    if (!rc && table_len) rc = vs_value_table_verify(t.value.data, vlen, e->value.crc, where);
    if (!rc) rc = nds_kvstore_read_into(s->base, key, e->value.offset + offset, iov, iovcnt, &r);
    if (rc == NDS_ERANGE || (!rc && r.state != NDS_READ_VALUE))
        rc = nds_err(NDS_ECORRUPT, "%s: the data object is missing or shorter than the value",
                     where);
    if (!rc)
        rc = verify_iov_blocks(iov, iovcnt, first, vlen, table_len ? t.value.data : NULL,
                               e->value.crc, where);
    if (table_len) nds_read_result_dispose(&t);
    return rc;
}

/* ---- commits ----------------------------------------------------------------------------------------- */

/* One commit attempt's new index object and what it superseded. */
typedef struct attempt {
    vs_store *s;
    vs_id index_id;
    nds_buf index;
    uint64_t nodes;
    vs_superseded *sup;
    size_t nsup, capsup;
    int rc;             /* first failure of a callback that cannot return one */
    vs_root root;       /* the new version's tree, once built */
    bool has_sup;       /* the index object holds a superseded list (nsup > 0) ... */
    vs_ref sup_ref;     /* ... at this place in it */
} attempt;

static int attempt_load(void *ctx, const vs_ref *ref, unsigned level, const vs_node **node) {
    return load_node(((attempt *)ctx)->s, ref, level, node);
}

static void attempt_release(void *ctx, const vs_node *node) {
    cache_release(&((attempt *)ctx)->s->cache, node);
}

static int attempt_store(void *ctx, const vs_node *node, vs_ref *ref) {
    attempt *a = ctx;
    size_t len;
    ref->object = a->index_id;
    ref->offset = a->index.len;
    int rc = vs_node_encode(node, &a->index, &len, &ref->crc);
    ref->length = len;
    if (!rc) a->nodes++;
    return rc;
}

static void attempt_superseded(void *ctx, const vs_ref *ref, bool is_node) {
    attempt *a = ctx;
    vs_object_kind kind = is_node ? VS_OBJECT_INDEX : VS_OBJECT_DATA;
    for (size_t i = 0; i < a->nsup; i++)
        if (a->sup[i].kind == kind && memcmp(&a->sup[i].object, &ref->object, VS_ID_SIZE) == 0) {
            a->sup[i].items++;
            return;
        }
    if (a->nsup == a->capsup) {
        size_t cap = a->capsup ? 2 * a->capsup : 16;
        vs_superseded *grown = realloc(a->sup, cap * sizeof *grown);
        if (!grown) {
            if (!a->rc) a->rc = nds_err(NDS_ENOMEM, "out of memory");
            return;
        }
        a->sup = grown;
        a->capsup = cap;
    }
    a->sup[a->nsup++] = (vs_superseded){ref->object, kind, 1};
}

static void attempt_dispose(attempt *a) {
    nds_buf_dispose(&a->index);
    free(a->sup);
}

/* A commit's writes in key order, with where each value went. */
typedef struct batch {
    vs_write *w;
    size_t n;
    size_t *order;        /* indices of w in key order */
    vs_entry *entries;    /* per w: the entry a put installs (version set per attempt) */
} batch;

static int by_key(const void *x, const void *y, void *ctx) {
    const vs_write *w = ctx;
    return strcmp(w[*(const size_t *)x].key, w[*(const size_t *)y].key);
}

static int check_keys(vs_store *s, batch *b) {
    for (size_t i = 0; i < b->n; i++) {
        size_t len = strlen(b->w[i].key);
        if (len == 0 || len > VS_KEY_MAX)
            return nds_err(NDS_EINVAL,
                           "versioned store %s: key \"%.64s\" must have 1 to %d bytes", s->url,
                           b->w[i].key, VS_KEY_MAX);
        b->order[i] = i;
    }
    qsort_r(b->order, b->n, sizeof *b->order, by_key, b->w);
    for (size_t i = 1; i < b->n; i++)
        if (strcmp(b->w[b->order[i - 1]].key, b->w[b->order[i]].key) == 0)
            return nds_err(NDS_EINVAL, "versioned store %s: key %s appears twice in one commit",
                           s->url, b->w[b->order[i]].key);
    return 0;
}

static int write_create_only(vs_store *s, const char *key, const nds_buf *b) {
    nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
    wo.if_equal.kind = NDS_GEN_ABSENT;
    return nds_kvstore_write(s->base, key, b->data, b->len, &wo, NULL);
}

/* Counts one more item of object id (kind) in *objects, adding it when new. */
static int count_object(vs_object_count **objects, size_t *n, const vs_id *id, vs_object_kind kind,
                        uint64_t items) {
    for (size_t i = 0; i < *n; i++)
        if ((*objects)[i].kind == kind && memcmp(&(*objects)[i].object, id, VS_ID_SIZE) == 0) {
            (*objects)[i].items += items;
            return 0;
        }
    vs_object_count *grown = realloc(*objects, (*n + 1) * sizeof *grown);
    if (!grown) return nds_err(NDS_ENOMEM, "out of memory");
    *objects = grown;
    grown[(*n)++] = (vs_object_count){*id, kind, items};
    return 0;
}

/* Packs values into data objects of about VS_DATA_OBJECT_MAX, each written create-only under a
 * fresh name. The objects are planned first (which values go where), then written in parallel on
 * the context's pool: each task computes its values' checksums and writes its object as pieces
 * (header, then each value where the caller holds it and its block table) through the base's
 * write_iov, so a value's bytes are copied once, by the kernel into the file, and the objects'
 * copies and fsyncs overlap. The caller's values stay valid until vs_data_write returns. */
typedef struct dw_object {
    vs_id id;
    size_t first, count; /* its values */
} dw_object;

typedef struct data_write {
    vs_store *s;
    const uint8_t *const *data;
    const size_t *len;
    vs_ref *const *refs; /* per value: where its ref goes */
    dw_object *objects;
    size_t nobjects;
} data_write;

/* Assigns the values to objects in order: a new one when the next value would take the current
 * one past VS_DATA_OBJECT_MAX. */
static int dw_plan(data_write *d, size_t n) {
    d->objects = calloc(n + 1, sizeof *d->objects);
    if (!d->objects) return nds_err(NDS_ENOMEM, "out of memory");
    uint64_t used = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t stored = d->len[i] + vs_value_table_size(d->len[i]);
        dw_object *cur = d->nobjects ? &d->objects[d->nobjects - 1] : NULL;
        if (!cur || used + stored > VS_DATA_OBJECT_MAX) {
            cur = &d->objects[d->nobjects++];
            cur->first = i;
            used = 0;
            int rc = vs_id_random(&cur->id);
            if (rc) return rc;
        }
        /* A data object's payload length is a u32, so what it holds stays below 4 GiB. */
        if (VS_HEADER_SIZE + used + stored > (uint64_t)UINT32_MAX)
            return nds_err(NDS_ELIMIT,
                           "versioned: a value of %zu bytes does not fit in a data object (at "
                           "most 4 GiB with its block table)",
                           d->len[i]);
        cur->count++;
        used += stored;
    }
    return 0;
}

/* ---- crc32c of a concatenation from the parts' crcs (zlib's crc32_combine, for CRC-32C) ---- */

#define VS_CRC32C_POLY 0x82F63B78u /* reflected */

/* a * b modulo the polynomial (bit 31 is x^0). */
static uint32_t crc_multmodp(uint32_t a, uint32_t b) {
    uint32_t m = (uint32_t)1 << 31, p = 0;
    for (;;) {
        if (a & m) {
            p ^= b;
            if ((a & (m - 1)) == 0) break;
        }
        m >>= 1;
        b = b & 1 ? (b >> 1) ^ VS_CRC32C_POLY : b >> 1;
    }
    return p;
}

/* The crc32c of A followed by B, from crc(A), crc(B) and B's length. */
static uint32_t crc_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
    uint32_t p = (uint32_t)1 << 31, sq = (uint32_t)1 << 30; /* x^0, x^1 */
    for (int k = 0; k < 3; k++) sq = crc_multmodp(sq, sq);    /* x^8: one byte */
    for (; len_b; len_b >>= 1, sq = crc_multmodp(sq, sq))
        if (len_b & 1) p = crc_multmodp(sq, p);
    return crc_multmodp(p, crc_a) ^ crc_b;
}

/* One object's values: their tables and crcs, computed in parallel (one pass over each value). */
typedef struct object_values {
    const data_write *d;
    const dw_object *obj;
    uint8_t *tables;
    size_t *table_at; /* per value of obj: its table's offset in tables */
    uint32_t *crc;    /* per value: the crc32c of its bytes */
} object_values;

static int value_checksums(void *ctx, size_t k) {
    object_values *ov = ctx;
    size_t i = ov->obj->first + k, vlen = ov->d->len[i];
    uint8_t *t = ov->tables + ov->table_at[k];
    vs_ref *ref = ov->d->refs[i];
    vs_value_table(ov->d->data[i], vlen, t, &ref->crc);
    uint64_t table = vs_value_table_size(vlen);
    if (table == 0) {
        ov->crc[k] = ref->crc; /* one block: the ref's crc is the value's */
        return 0;
    }
    uint32_t crc = 0;
    for (uint64_t b = 0; b < table / 4; b++)
        crc = crc_combine(crc, nds_load_le32(t + 4 * b),
                          nds_min_u64(VS_BLOCK_SIZE, vlen - b * VS_BLOCK_SIZE));
    ov->crc[k] = crc;
    return 0;
}

/* Writes object o: its values' tables and refs, then the pieces in one create-only write. */
static int dw_write_object(void *ctx, size_t o) {
    data_write *d = ctx;
    const dw_object *obj = &d->objects[o];
    object_values ov = {d, obj, NULL, calloc(obj->count + 1, sizeof(size_t)),
                        calloc(obj->count + 1, sizeof(uint32_t))};
    size_t tables = 0;
    for (size_t k = 0; ov.table_at && k < obj->count; k++) {
        ov.table_at[k] = tables;
        tables += (size_t)vs_value_table_size(d->len[obj->first + k]);
    }
    uint8_t header[VS_HEADER_SIZE];
    ov.tables = malloc(tables + 1);
    struct iovec *iov = malloc((1 + 2 * obj->count) * sizeof *iov);
    int rc = ov.tables && ov.table_at && ov.crc && iov ? 0 : nds_err(NDS_ENOMEM, "out of memory");
    if (!rc) rc = nds_pool_for(nds_context_pool(NULL), obj->count, 0, value_checksums, &ov);
    size_t n = 1;
    uint64_t len = 0; /* payload bytes so far */
    uint32_t crc = 0; /* their crc32c */
    for (size_t k = 0; !rc && k < obj->count; k++) {
        size_t i = obj->first + k, vlen = d->len[i], tlen = (size_t)vs_value_table_size(vlen);
        uint8_t *t = ov.tables + ov.table_at[k];
        vs_ref *ref = d->refs[i];
        ref->object = obj->id;
        ref->offset = VS_HEADER_SIZE + len;
        ref->length = vlen;
        crc = nds_crc32c_extend(crc_combine(crc, ov.crc[k], vlen), t, tlen);
        if (vlen) iov[n++] = (struct iovec){(void *)d->data[i], vlen};
        if (tlen) iov[n++] = (struct iovec){t, tlen};
        len += vlen + tlen;
    }
    char key[VS_OBJECT_KEY_MAX];
    vs_object_key(VS_DATA_PREFIX, &obj->id, key);
    if (!rc) {
        vs_data_header(header, (uint32_t)len, crc);
        iov[0] = (struct iovec){header, sizeof header};
        nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
        wo.if_equal.kind = NDS_GEN_ABSENT;
        rc = nds_kvstore_write_iov(d->s->base, key, iov, n, &wo, NULL);
        if (rc) rc = nds_err_prefix(rc, "versioned store %s: writing %s", d->s->url, key);
    }
    free(ov.tables), free(ov.table_at), free(ov.crc), free(iov);
    return rc;
}

/* Writes values data[i] (len[i] bytes) into new data objects; *refs[i] gets where value i is,
 * *objects (may be NULL; malloc'd) the objects written with their item counts. */
static int vs_data_write(vs_store *s, const uint8_t *const *data, const size_t *len,
                         vs_ref *const *refs, size_t n, vs_object_count **objects,
                         size_t *nobjects) {
    data_write d = {s, data, len, refs, NULL, 0};
    int rc = dw_plan(&d, n);
    if (!rc) rc = nds_pool_for(nds_context_pool(NULL), d.nobjects, 0, dw_write_object, &d);
    for (size_t o = 0; !rc && objects && o < d.nobjects; o++)
        rc = count_object(objects, nobjects, &d.objects[o].id, VS_OBJECT_DATA, d.objects[o].count);
    free(d.objects);
    return rc;
}

int vs_store_write_values(vs_store *s, const uint8_t *const *data, const size_t *len, size_t n,
                          vs_ref *refs, vs_object_count **objects, size_t *nobjects) {
    *objects = NULL;
    *nobjects = 0;
    vs_ref **where = calloc(n + 1, sizeof *where);
    if (!where) return nds_err(NDS_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) where[i] = &refs[i];
    int rc = vs_data_write(s, data, len, where, n, objects, nobjects);
    free(where);
    return rc;
}

/* Fills each put's entry: values up to VS_INLINE_MAX inline (pointing into the caller's bytes),
 * prepared values where they are, the others into new data objects. */
static int write_values(vs_store *s, batch *b) {
    const uint8_t **data = calloc(b->n + 1, sizeof *data);
    size_t *len = calloc(b->n + 1, sizeof *len), n = 0;
    vs_ref **where = calloc(b->n + 1, sizeof *where);
    int rc = data && len && where ? 0 : nds_err(NDS_ENOMEM, "out of memory");
    for (size_t k = 0; k < b->n && !rc; k++) {
        vs_write *w = &b->w[b->order[k]];
        vs_entry *e = &b->entries[b->order[k]];
        if (w->is_delete) continue;
        e->key = (char *)w->key;
        if (w->ref) {
            e->value = *w->ref;
        } else if (w->len <= VS_INLINE_MAX) {
            e->is_inline = true;
            e->data = (uint8_t *)w->data;
            e->len = w->len;
        } else {
            data[n] = w->data, len[n] = w->len, where[n++] = &e->value;
        }
    }
    if (!rc && n) rc = vs_data_write(s, data, len, where, n, NULL, NULL);
    free(data), free(len), free(where);
    return rc;
}

/* Sets each write's status against snap: NDS_ECONFLICT where its condition fails. *conflicts
 * counts them. */
static int check_conditions(vs_store *s, const vs_snapshot *snap, batch *b, size_t *conflicts) {
    *conflicts = 0;
    for (size_t i = 0; i < b->n; i++) {
        vs_write *w = &b->w[i];
        w->status = 0;
        if (w->if_equal.kind == NDS_GEN_NONE) continue;
        vs_entry found_entry;
        bool found;
        int rc = vs_store_lookup(s, snap, w->key, &found_entry, &found);
        if (rc) return rc;
        nds_generation current = {NDS_GEN_ABSENT, {0}};
        if (found) {
            vs_generation(found_entry.version, &current);
            vs_entry_dispose(&found_entry);
        }
        if (!nds_generation_satisfies(&w->if_equal, &current)) {
            w->status = NDS_ECONFLICT;
            (*conflicts)++;
        }
    }
    return 0;
}

/* The ops of the writes that apply, in key order, with entries stamped with version v. */
static size_t make_ops(batch *b, uint64_t v, vs_op *ops) {
    size_t n = 0;
    for (size_t k = 0; k < b->n; k++) {
        size_t i = b->order[k];
        if (b->w[i].status) continue;
        b->entries[i].version = v;
        ops[n++] = (vs_op){b->w[i].key, b->w[i].is_delete, &b->entries[i]};
    }
    return n;
}

/* The commit document of the version a built on parent (its tree, index object and superseded
 * list), for ops. */
static int encode_commit(const vs_op *ops, size_t nops, const attempt *a,
                         const vs_snapshot *parent, const vs_commit_options *o, nds_buf *out) {
    vs_commit c = {.version = parent->version + 1,
                   .parent = parent->version,
                   .time_ns = wall_ns(),
                   .message = (char *)o->message,
                   .metadata = (char *)o->metadata,
                   .root = a->root,
                   .has_superseded = a->has_sup,
                   .tokens = (vs_id *)o->tokens,
                   .ntokens = o->ntokens};
    if (a->has_sup) c.superseded = a->sup_ref;
    /* The data objects this version references values in (counted from the writes that apply, so
     * a value whose condition failed is not counted), and the new index object (its superseded
     * list dies with it). */
    int rc = 0;
    for (size_t i = 0; !rc && i < nops; i++)
        if (!ops[i].is_delete && !ops[i].entry->is_inline)
            rc = count_object(&c.objects, &c.nobjects, &ops[i].entry->value.object,
                              VS_OBJECT_DATA, 1);
    if (!rc && a->index.len)
        rc = count_object(&c.objects, &c.nobjects, &a->index_id, VS_OBJECT_INDEX, a->nodes);
    if (!rc) rc = vs_commit_encode(&c, out);
    free(c.objects);
    return rc;
}

/* Builds the next version on snap and tries to publish it. Returns NDS_ECONFLICT when another
 * writer published that version first (the attempt's index object is deleted again). */
static int try_commit(vs_store *s, batch *b, vs_op *ops, size_t nops, vs_snapshot *snap,
                      const vs_commit_options *o) {
    attempt a = {.s = s};
    vs_tree_io io = {attempt_load, attempt_release, attempt_store, attempt_superseded, &a};
    char index_key[VS_OBJECT_KEY_MAX], commit_key[VS_OBJECT_KEY_MAX];
    nds_buf commit = {0};
    int rc = vs_id_random(&a.index_id);
    if (!rc) rc = vs_tree_apply(&io, &snap->root, ops, nops, &a.root);
    if (!rc) rc = a.rc;
    a.has_sup = !rc && a.nsup > 0;
    if (a.has_sup) {
        size_t len;
        a.sup_ref = (vs_ref){a.index_id, a.index.len, 0, 0};
        rc = vs_superseded_encode(a.sup, a.nsup, &a.index, &len, &a.sup_ref.crc);
        a.sup_ref.length = len;
    }
    vs_object_key(VS_INDEX_PREFIX, &a.index_id, index_key);
    if (!rc && a.index.len) {
        rc = write_create_only(s, index_key, &a.index);
        if (rc) rc = nds_err_prefix(rc, "versioned store %s: writing %s", s->url, index_key);
    }
    if (!rc) rc = encode_commit(ops, nops, &a, snap, o, &commit);
    if (!rc) {
        vs_commit_key(snap->version + 1, commit_key);
        rc = write_create_only(s, commit_key, &commit);
        if (rc == NDS_ECONFLICT && a.index.len) (void)nds_kvstore_delete(s->base, index_key, NULL);
        else if (rc) rc = nds_err_prefix(rc, "versioned store %s: writing %s", s->url, commit_key);
    }
    if (!rc) {
        snap->version++;
        snap->root = a.root;
        note_head(s, snap->version);
        char text[24];
        int len = snprintf(text, sizeof text, "%" PRIu64 "\n", snap->version);
        /* a hint, never trusted (readers probe past it): no ordering against anyone (on s3 in
         * create_only mode, no lease), and a failure is only a staler hint */
        (void)nds_kvstore_write_hint(s->base, VS_HEAD_HINT, text, (size_t)len);
    }
    nds_buf_dispose(&commit);
    attempt_dispose(&a);
    return rc;
}

static void backoff(int attempt_no) {
    uint64_t ceiling = (uint64_t)100000 << (attempt_no < 10 ? attempt_no : 10); /* 0.1 ms up */
    nds_sleep_ns(nds_random_u64() % (ceiling + 1));
}

/* The commit loop: conditions checked against the version built on (after a failed condition,
 * against the latest version too), then try_commit, following the head until one attempt wins. */
static int commit_loop(vs_store *s, batch *b, vs_snapshot *snap, const vs_commit_options *o,
                       vs_op *ops) {
    bool fresh = false;
    for (int attempt_no = 0;; attempt_no++) {
        size_t conflicts;
        int rc = check_conditions(s, snap, b, &conflicts);
        if (!rc && conflicts && !fresh) {
            rc = vs_store_latest(s, snap); /* the caller may have read a newer version */
            fresh = true;
            if (!rc) continue;
        }
        if (rc) return rc;
        if (conflicts && o->all_or_nothing)
            return nds_err(NDS_ECONFLICT,
                           "versioned store %s: a key changed since it was read (version %" PRIu64
                           "); nothing was committed",
                           s->url, snap->version);
        size_t nops = make_ops(b, snap->version + 1, ops);
        if (nops == 0) return 0;
        rc = try_commit(s, b, ops, nops, snap, o);
        if (rc != NDS_ECONFLICT) return rc;
        if (attempt_no + 1 >= COMMIT_ATTEMPTS_MAX)
            return nds_err(NDS_ECONFLICT,
                           "versioned store %s: gave up after losing %d commit races", s->url,
                           COMMIT_ATTEMPTS_MAX);
        backoff(attempt_no);
        if ((rc = vs_store_latest(s, snap))) return rc;
        fresh = true;
    }
}

int vs_store_commit(vs_store *s, vs_snapshot *snap, vs_write *w, size_t n,
                    const vs_commit_options *o) {
    if (n == 0) return 0;
    batch b = {w, n, calloc(n, sizeof(size_t)), calloc(n, sizeof(vs_entry))};
    vs_op *ops = calloc(n, sizeof *ops);
    int rc = (!b.order || !b.entries || !ops) ? nds_err(NDS_ENOMEM, "out of memory") : 0;
    if (!rc) rc = check_keys(s, &b);
    if (!rc) {
        pthread_mutex_lock(&s->commit_mu);
        /* Several threads commit through one store (the array engine publishes its batches from
         * its pool threads): a caller whose view predates a commit made here meanwhile starts from
         * that commit instead of losing a race to it (an index object written, fsynced and deleted
         * again, a commit attempt and a refresh). Conditions are checked against the version built
         * on either way, as after a lost race. */
        if (s->last_commit.version > snap->version) *snap = s->last_commit;
        rc = write_values(s, &b);
        if (!rc) rc = commit_loop(s, &b, snap, o, ops);
        if (!rc && snap->version > s->last_commit.version) s->last_commit = *snap;
        pthread_mutex_unlock(&s->commit_mu);
    }
    free(b.order);
    free(b.entries);
    free(ops);
    return rc;
}

nds_kvstore *vs_store_base(vs_store *s) { return s->base; }
