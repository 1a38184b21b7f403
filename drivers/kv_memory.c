/* The "memory" kvstore driver: one process-wide ordered store (a skip list keyed by full key).
 *
 * Implements read (with conditions, a byte range, or ranges copied into the caller's buffers), write
 * (of pieces, copied once into the stored value), delete, list by prefix, delete_range
 * and an all-or-nothing multi-key commit. Omits persistence: the data lives until the process
 * exits, and is shared by every instance, so two opens of memory://x/ in one process see the same
 * keys (the core's path prefix keeps different paths apart).
 *
 * Generations: each stored version gets a number from one global monotonic counter, so a key
 * deleted and created again never repeats a generation.
 *
 * Threading: internally synchronised by one mutex. Critical sections are short: values and nodes
 * are allocated and copied before taking it and freed after releasing it; list copies the matching
 * keys under the lock and calls the callback without it. Values are immutable and reference
 * counted, so a read hands out the stored bytes without copying them (the nds_bytes release drops
 * the reference).
 *
 * Ownership: the store owns nodes and values; a read result owns one reference to the value it
 * points to.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "ndstore/sys/kv_driver.h"
#include "internal/error.h"
#include "internal/util.h"

/* Enough levels for ~16M keys at p = 1/2 before searches degrade. */
#define MEM_MAX_HEIGHT 24

/** One immutable stored value; shared by the store and by read results. */
typedef struct mem_value {
    atomic_size_t refs;
    size_t len;
    uint8_t data[];
} mem_value;

/** A skip list node: one key and its current version. */
typedef struct mem_node {
    char *key;
    mem_value *value;
    uint64_t gen; /* from g_mem.counter; never 0 */
    int height; /* levels this node is linked on, 1..MEM_MAX_HEIGHT */
    struct mem_node *next[]; /* next[i]: following node on level i */
} mem_node;

/* The process-wide store. Every member is guarded by mu. */
static struct {
    pthread_mutex_t mu;
    mem_node *head[MEM_MAX_HEIGHT]; /* first node on each level */
    uint64_t counter; /* last generation handed out */
} g_mem = {PTHREAD_MUTEX_INITIALIZER, {0}, 0};

/* Any non-NULL pointer serves as the instance state: all instances share g_mem. */
static int g_mem_instance;

/* ---- values and nodes ---- */

/* A value of len bytes, not filled in yet; NULL when out of memory. */
static mem_value *mem_value_alloc(size_t len) {
    if (len > SIZE_MAX - sizeof(mem_value))
        return NULL;
    mem_value *v = malloc(sizeof *v + len);
    if (!v)
        return NULL;
    atomic_init(&v->refs, 1);
    v->len = len;
    return v;
}

static mem_value *mem_value_new(const uint8_t *data, size_t len) {
    mem_value *v = mem_value_alloc(len);
    if (v && len)
        memcpy(v->data, data, len);
    return v;
}

/* A value of the pieces iov[0..iovcnt) back to back, copied once; NULL when out of memory. */
static mem_value *mem_value_from_iov(const struct iovec *iov, size_t iovcnt) {
    size_t len = 0;
    for (size_t i = 0; i < iovcnt; i++) {
        if (iov[i].iov_len > SIZE_MAX - len)
            return NULL;
        len += iov[i].iov_len;
    }
    mem_value *v = mem_value_alloc(len);
    for (size_t i = 0, at = 0; v && i < iovcnt; at += iov[i].iov_len, i++)
        if (iov[i].iov_len)
            memcpy(v->data + at, iov[i].iov_base, iov[i].iov_len);
    return v;
}

static void mem_value_unref(mem_value *v) {
    if (v && atomic_fetch_sub_explicit(&v->refs, 1, memory_order_acq_rel) == 1)
        free(v);
}

/* nds_bytes release callback of a read result. */
static void mem_value_release(void *ctx, const uint8_t *data) {
    (void)data;
    mem_value_unref(ctx);
}

static int mem_random_height(void) {
    uint64_t r = nds_random_u64();
    int h = 1;
    while (h < MEM_MAX_HEIGHT && (r & 1)) {
        h++;
        r >>= 1;
    }
    return h;
}

/* A node (not yet linked) with a copy of key and a random height; NULL on allocation failure. */
static mem_node *mem_node_new(const char *key) {
    int h = mem_random_height();
    mem_node *n = calloc(1, sizeof *n + (size_t)h * sizeof n->next[0]);
    if (!n)
        return NULL;
    n->key = nds_strdup(key);
    if (!n->key) {
        free(n);
        return NULL;
    }
    n->height = h;
    return n;
}

static void mem_node_free(mem_node *n) {
    if (!n)
        return;
    mem_value_unref(n->value);
    free(n->key);
    free(n);
}

/* ---- skip list (caller holds g_mem.mu) ---- */

/* Returns the first node with key >= key. When prev is not NULL, prev[i] receives the next-array
 * whose slot i points at that position on level i (a node's next or the head), for linking and
 * unlinking. */
static mem_node *mem_seek(const char *key, mem_node ***prev) {
    mem_node **links = g_mem.head;
    for (int i = MEM_MAX_HEIGHT - 1; i >= 0; i--) {
        while (links[i] && strcmp(links[i]->key, key) < 0)
            links = links[i]->next;
        if (prev)
            prev[i] = links;
    }
    return links[0];
}

static void mem_link(mem_node *n, mem_node ***prev) {
    for (int i = 0; i < n->height; i++) {
        n->next[i] = prev[i][i];
        prev[i][i] = n;
    }
}

/* Unlinks n, which must be the node mem_seek returned with prev. */
static void mem_unlink(mem_node *n, mem_node ***prev) {
    for (int i = 0; i < n->height; i++)
        prev[i][i] = n->next[i];
}

/* The node holding exactly key, or NULL. */
static mem_node *mem_find(const char *key, mem_node ***prev) {
    mem_node *n = mem_seek(key, prev);
    return n && strcmp(n->key, key) == 0 ? n : NULL;
}

static void mem_gen_of(const mem_node *n, nds_generation *g) {
    if (!n) {
        g->kind = NDS_GEN_ABSENT;
        g->value[0] = '\0';
        return;
    }
    char text[32];
    snprintf(text, sizeof text, "%llu", (unsigned long long)n->gen);
    nds_generation_set(g, text);
}

/* ---- spec ---- */

static int mem_parse_url(const char *rest, struct json_object *spec) {
    json_object *path = json_object_new_string(rest);
    if (!path || json_object_object_add(spec, "path", path) != 0) {
        json_object_put(path);
        return nds_err(NDS_ENOMEM, "memory: out of memory parsing url");
    }
    return 0;
}

static int mem_open(void **state, const struct json_object *spec) {
    (void)spec;
    *state = &g_mem_instance;
    return 0;
}

static void mem_close(void *state) {
    (void)state;
}

static void mem_url_base(void *state, char *buf, size_t cap) {
    (void)state;
    snprintf(buf, cap, "memory://");
}

/* ---- read ---- */

/* Applies the read conditions and the byte range to a snapshot (value ref owned by the caller,
 * moved into out when bytes are returned). */
static int mem_read_finish(const char *key, mem_value *v, const nds_read_options *opts,
                           nds_read_result *out) {
    if (opts && opts->if_equal.kind != NDS_GEN_NONE &&
        !nds_generation_equal(&opts->if_equal, &out->generation)) {
        out->state = NDS_READ_ABORTED;
    } else if (opts && nds_generation_equal(&opts->if_not_equal, &out->generation)) {
        out->state = NDS_READ_UNCHANGED;
    } else if (!v) {
        out->state = NDS_READ_MISSING;
    } else {
        uint64_t off = 0, len = v->len;
        if (opts && nds_byte_range_resolve(opts, v->len, &off, &len) != 0) {
            mem_value_unref(v);
            return nds_err_prefix(NDS_ERANGE, "memory: read %s", key);
        }
        out->state = NDS_READ_VALUE;
        out->value.data = v->data + off;
        out->value.len = (size_t)len;
        out->value.release = mem_value_release;
        out->value.release_ctx = v;
        return 0;
    }
    mem_value_unref(v);
    return 0;
}

/* read's n == 0 form: the stored bytes themselves, not copied (out holds a reference). */
static int mem_read_value(void *state, const char *key, const nds_read_options *opts,
                          nds_read_result *out) {
    (void)state;
    memset(out, 0, sizeof *out);
    mem_value *v = NULL;
    pthread_mutex_lock(&g_mem.mu);
    mem_node *n = mem_find(key, NULL);
    mem_gen_of(n, &out->generation);
    if (n) {
        v = n->value;
        atomic_fetch_add_explicit(&v->refs, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&g_mem.mu);
    out->total_size = v ? v->len : 0;
    return mem_read_finish(key, v, opts, out);
}

/* The ranges are copied from one referenced version of the value, looked up once. */
static int mem_read(void *state, const char *key, const nds_read_options *opts,
                    const nds_byte_range *ranges, size_t n, nds_read_result *out) {
    if (n == 0)
        return mem_read_value(state, key, opts, out);
    return nds_kv_read_ranges_span(mem_read_value, state, key, opts, ranges, n, out);
}

/* ---- write ---- */

/* Applies one prepared write under the lock: replaces, inserts (consuming *spare) or deletes.
 * Returns the displaced value or node for the caller to free after unlocking. */
static void mem_apply(const char *key, mem_value *value, mem_node **spare, nds_generation *new_gen,
                      mem_value **old_value, mem_node **old_node) {
    mem_node **prev[MEM_MAX_HEIGHT];
    mem_node *n = mem_find(key, prev);
    if (!value) {
        if (n)
            mem_unlink(n, prev);
        *old_node = n;
        mem_gen_of(NULL, new_gen);
        return;
    }
    if (!n) {
        n = *spare;
        *spare = NULL;
        mem_link(n, prev);
    } else {
        *old_value = n->value;
    }
    n->value = value;
    n->gen = ++g_mem.counter;
    mem_gen_of(n, new_gen);
}

static int mem_write(void *state, const char *key, const struct iovec *iov, size_t iovcnt,
                     const nds_write_options *opts, nds_generation *new_gen) {
    (void)state;
    mem_value *value = NULL;
    mem_node *spare = NULL, *old_node = NULL;
    mem_value *old_value = NULL;
    const bool data = iov != NULL; /* NULL: a delete */
    if (data) {
        value = mem_value_from_iov(iov, iovcnt);
        spare = mem_node_new(key);
        if (!value || !spare) {
            mem_value_unref(value);
            mem_node_free(spare);
            return nds_err(NDS_ENOMEM, "memory: out of memory writing %s", key);
        }
    }
    nds_generation cur, gen;
    pthread_mutex_lock(&g_mem.mu);
    mem_gen_of(mem_find(key, NULL), &cur);
    bool ok = !opts || nds_generation_satisfies(&opts->if_equal, &cur);
    if (ok)
        mem_apply(key, value, &spare, &gen, &old_value, &old_node);
    pthread_mutex_unlock(&g_mem.mu);
    mem_node_free(spare);
    mem_node_free(old_node);
    mem_value_unref(old_value);
    if (!ok) {
        mem_value_unref(value);
        return nds_err(NDS_ECONFLICT, "memory: %s %s: generation changed",
                       data ? "write" : "delete", key);
    }
    if (new_gen)
        *new_gen = gen;
    return 0;
}

/* ---- list and delete_range ---- */

/* Keys copied out under the lock: one buffer of NUL-terminated keys, plus sizes. */
typedef struct mem_listing {
    char *text;
    size_t text_len, text_cap;
    uint64_t *sizes;
    size_t n, cap;
} mem_listing;

static bool mem_listing_add(mem_listing *l, const char *key, uint64_t size) {
    size_t klen = strlen(key) + 1;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        uint64_t *s = realloc(l->sizes, cap * sizeof *s);
        if (!s)
            return false;
        l->sizes = s;
        l->cap = cap;
    }
    if (l->text_cap - l->text_len < klen) {
        size_t cap = l->text_cap ? l->text_cap * 2 : 4096;
        while (cap - l->text_len < klen)
            cap *= 2;
        char *t = realloc(l->text, cap);
        if (!t)
            return false;
        l->text = t;
        l->text_cap = cap;
    }
    memcpy(l->text + l->text_len, key, klen);
    l->text_len += klen;
    l->sizes[l->n++] = size;
    return true;
}

static int mem_list(void *state, const char *prefix, nds_list_fn fn, void *ctx) {
    (void)state;
    mem_listing l = {0};
    size_t plen = strlen(prefix);
    bool ok = true;
    pthread_mutex_lock(&g_mem.mu);
    for (mem_node *n = mem_seek(prefix, NULL); n && strncmp(n->key, prefix, plen) == 0;
         n = n->next[0]) {
        if (!(ok = mem_listing_add(&l, n->key, n->value->len)))
            break;
    }
    pthread_mutex_unlock(&g_mem.mu);
    int rc = ok ? 0 : nds_err(NDS_ENOMEM, "memory: out of memory listing %s", prefix);
    const char *key = l.text;
    for (size_t i = 0; rc == 0 && i < l.n; i++) {
        rc = fn(ctx, key, l.sizes[i]);
        key += strlen(key) + 1;
    }
    free(l.text);
    free(l.sizes);
    return rc;
}

static int mem_delete_range(void *state, const char *begin, const char *end) {
    (void)state;
    mem_node *dead = NULL;
    mem_node **prev[MEM_MAX_HEIGHT];
    pthread_mutex_lock(&g_mem.mu);
    for (;;) {
        mem_node *n = mem_seek(begin, prev);
        if (!n || (end[0] && strcmp(n->key, end) >= 0))
            break;
        mem_unlink(n, prev);
        n->next[0] = dead; /* chain the unlinked nodes to free them after unlocking */
        dead = n;
    }
    pthread_mutex_unlock(&g_mem.mu);
    while (dead) {
        mem_node *next = dead->next[0];
        mem_node_free(dead);
        dead = next;
    }
    return 0;
}

/* ---- commit ---- */

/* What one op needs prepared before the lock: its value and a node in case the key is new. */
typedef struct mem_prepared {
    mem_value *value;
    mem_node *spare;
    mem_value *old_value;
    mem_node *old_node;
} mem_prepared;

static int mem_key_cmp(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* NDS_EINVAL when a key appears twice: the ops' conditions are all checked against the state before
 * the commit, which is ill-defined for two writes of one key. */
static int mem_check_unique(const nds_kv_op *ops, size_t n) {
    const char **keys = malloc((n ? n : 1) * sizeof *keys);
    if (!keys)
        return nds_err(NDS_ENOMEM, "memory: out of memory in commit");
    for (size_t i = 0; i < n; i++)
        keys[i] = ops[i].key;
    qsort(keys, n, sizeof *keys, mem_key_cmp);
    int rc = 0;
    for (size_t i = 1; i < n && rc == 0; i++) {
        if (strcmp(keys[i - 1], keys[i]) == 0)
            rc = nds_err(NDS_EINVAL, "memory: commit writes key %s twice", keys[i]);
    }
    free(keys);
    return rc;
}

static void mem_prepared_free(mem_prepared *p, size_t n, bool keep_values) {
    for (size_t i = 0; i < n; i++) {
        if (!keep_values)
            mem_value_unref(p[i].value);
        mem_node_free(p[i].spare);
        mem_node_free(p[i].old_node);
        mem_value_unref(p[i].old_value);
    }
    free(p);
}

static int mem_prepare(const nds_kv_op *ops, size_t n, mem_prepared **out) {
    mem_prepared *p = calloc(n ? n : 1, sizeof *p);
    if (!p)
        return nds_err(NDS_ENOMEM, "memory: out of memory in commit");
    for (size_t i = 0; i < n; i++) {
        if (!ops[i].data)
            continue;
        p[i].value = mem_value_new(ops[i].data, ops[i].len);
        p[i].spare = mem_node_new(ops[i].key);
        if (!p[i].value || !p[i].spare) {
            mem_prepared_free(p, i + 1, false);
            return nds_err(NDS_ENOMEM, "memory: out of memory in commit of %s", ops[i].key);
        }
    }
    *out = p;
    return 0;
}

/* Checks every condition, then applies every op, all under the lock: nothing is applied if any
 * fails. */
static int mem_commit(void *state, nds_kv_op *ops, size_t n) {
    (void)state;
    mem_prepared *p = NULL;
    int rc = mem_check_unique(ops, n);
    if (rc == 0)
        rc = mem_prepare(ops, n, &p);
    if (rc != 0)
        return rc;
    size_t failed = n;
    pthread_mutex_lock(&g_mem.mu);
    for (size_t i = 0; i < n && failed == n; i++) {
        nds_generation cur;
        mem_gen_of(mem_find(ops[i].key, NULL), &cur);
        if (!nds_generation_satisfies(&ops[i].if_equal, &cur))
            failed = i;
    }
    for (size_t i = 0; i < n && failed == n; i++) {
        mem_apply(ops[i].key, p[i].value, &p[i].spare, &ops[i].new_generation, &p[i].old_value,
                  &p[i].old_node);
    }
    pthread_mutex_unlock(&g_mem.mu);
    mem_prepared_free(p, n, failed == n);
    if (failed < n)
        return nds_err(NDS_ECONFLICT, "memory: commit: generation of %s changed", ops[failed].key);
    return 0;
}

const nds_kv_driver nds_kv_driver_memory = {
    .version = NDS_KV_DRIVER_VERSION,
    .name = "memory",
    .url_scheme = "memory",
    .capabilities = NDS_KV_CAP_ATOMIC_CONDITIONAL_WRITE | NDS_KV_CAP_ATOMIC_COMMIT |
                    NDS_KV_CAP_BYTE_RANGE | NDS_KV_CAP_LOCAL,
    .parse_url = mem_parse_url,
    .open = mem_open,
    .close = mem_close,
    .url_base = mem_url_base,
    .to_json = NULL,
    .read = mem_read,
    .write = mem_write,
    .list = mem_list,
    .delete_range = mem_delete_range,
    .commit = mem_commit,
};
