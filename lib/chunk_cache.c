/* Decoded-chunk cache (internal/chunk_cache.h): 16 shards, each a hash table plus an LRU list under
 * its own mutex; the byte budget is split evenly between shards. Buffers of evicted entries are
 * kept in a small pool and handed to the next entries: a fresh multi-MiB allocation costs a page
 * fault per 4 KiB (about 1 GB/s here), more than decoding into memory that is already mapped. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "internal/chunk_cache.h"
#include "internal/error.h"

#define SHARDS 16
#define BUCKETS 1024
/* Recycled buffers kept: at most this many, and at most 1/POOL_SHARE of the capacity in bytes. */
#define POOL_MAX 16
#define POOL_SHARE 8

struct nds_cache_entry {
    nds_chunk_cache *cache;
    char *url;
    uint8_t *data;
    size_t len;
    nds_generation gen;
    size_t refs; /* the table's reference + readers'; guarded by the shard mutex */
    int in_table;
    nds_cache_entry *hnext;       /* bucket chain */
    nds_cache_entry *prev, *next; /* LRU list, most recent first */
};

typedef struct shard {
    pthread_mutex_t mu;
    nds_cache_entry *buckets[BUCKETS];
    nds_cache_entry *head, *tail;
    size_t bytes, capacity;
} shard;

typedef struct buffer_pool {
    pthread_mutex_t mu; /* a leaf: taken with or without a shard mutex, never the other way round */
    uint8_t *buf[POOL_MAX];
    size_t len[POOL_MAX];
    size_t count, bytes, max_bytes;
} buffer_pool;

struct nds_chunk_cache {
    shard shards[SHARDS];
    buffer_pool pool;
};

static uint64_t hash_url(const char *s) {
    uint64_t h = 1469598103934665603ull;
    while (*s) h = (h ^ (uint8_t)*s++) * 1099511628211ull;
    return h;
}

int nds_chunk_cache_new(nds_chunk_cache **out, size_t capacity) {
    *out = NULL;
    if (capacity == 0) return 0;
    nds_chunk_cache *c = calloc(1, sizeof *c);
    if (!c) return nds_err(NDS_ENOMEM, "out of memory creating the chunk cache");
    for (int i = 0; i < SHARDS; i++) {
        pthread_mutex_init(&c->shards[i].mu, NULL);
        c->shards[i].capacity = capacity / SHARDS;
    }
    pthread_mutex_init(&c->pool.mu, NULL);
    c->pool.max_bytes = capacity / POOL_SHARE;
    *out = c;
    return 0;
}

uint8_t *nds_cache_buffer(nds_chunk_cache *c, size_t len) {
    buffer_pool *p = &c->pool;
    uint8_t *b = NULL;
    pthread_mutex_lock(&p->mu);
    for (size_t i = p->count; i-- > 0;) {
        if (p->len[i] != len) continue;
        b = p->buf[i];
        p->bytes -= len;
        p->buf[i] = p->buf[--p->count];
        p->len[i] = p->len[p->count];
        break;
    }
    pthread_mutex_unlock(&p->mu);
    return b ? b : malloc(len ? len : 1);
}

void nds_cache_buffer_free(nds_chunk_cache *c, uint8_t *buf, size_t len) {
    buffer_pool *p = &c->pool;
    pthread_mutex_lock(&p->mu);
    while (p->count > 0 && (p->count == POOL_MAX || p->bytes + len > p->max_bytes)) {
        free(p->buf[0]); /* full: drop the oldest */
        p->bytes -= p->len[0];
        p->count--;
        memmove(p->buf, p->buf + 1, p->count * sizeof p->buf[0]);
        memmove(p->len, p->len + 1, p->count * sizeof p->len[0]);
    }
    if (len <= p->max_bytes) {
        p->buf[p->count] = buf;
        p->len[p->count++] = len;
        p->bytes += len;
        buf = NULL;
    }
    pthread_mutex_unlock(&p->mu);
    free(buf);
}

static void entry_free(nds_cache_entry *e) {
    free(e->url);
    if (e->data) nds_cache_buffer_free(e->cache, e->data, e->len);
    free(e);
}

static void unref(nds_cache_entry *e) {
    if (--e->refs == 0) entry_free(e);
}

/* Removes e from the table and LRU list (caller holds the shard mutex). */
static void detach(shard *s, nds_cache_entry *e, uint64_t h) {
    nds_cache_entry **p = &s->buckets[h % BUCKETS];
    while (*p != e) p = &(*p)->hnext;
    *p = e->hnext;
    if (e->prev)
        e->prev->next = e->next;
    else
        s->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        s->tail = e->prev;
    s->bytes -= e->len;
    e->in_table = 0;
    unref(e);
}

void nds_chunk_cache_free(nds_chunk_cache *c) {
    if (!c) return;
    for (int i = 0; i < SHARDS; i++) {
        shard *s = &c->shards[i];
        while (s->head) detach(s, s->head, hash_url(s->head->url));
        pthread_mutex_destroy(&s->mu);
    }
    for (size_t i = 0; i < c->pool.count; i++) free(c->pool.buf[i]);
    pthread_mutex_destroy(&c->pool.mu);
    free(c);
}

static nds_cache_entry *find(shard *s, const char *url, uint64_t h) {
    nds_cache_entry *e = s->buckets[h % BUCKETS];
    while (e && strcmp(e->url, url) != 0) e = e->hnext;
    return e;
}

static void to_front(shard *s, nds_cache_entry *e) {
    if (s->head == e) return;
    e->prev->next = e->next; /* e is not the head, so it has a prev */
    if (e->next)
        e->next->prev = e->prev;
    else
        s->tail = e->prev;
    e->prev = NULL;
    e->next = s->head;
    s->head->prev = e;
    s->head = e;
}

nds_cache_entry *nds_cache_get(nds_chunk_cache *c, const char *url) {
    if (!c) return NULL;
    uint64_t h = hash_url(url);
    shard *s = &c->shards[h % SHARDS];
    pthread_mutex_lock(&s->mu);
    nds_cache_entry *e = find(s, url, h);
    if (e) {
        e->refs++;
        to_front(s, e);
    }
    pthread_mutex_unlock(&s->mu);
    return e;
}

void nds_cache_release(nds_chunk_cache *c, nds_cache_entry *e) {
    if (!c || !e) return;
    shard *s = &c->shards[hash_url(e->url) % SHARDS];
    pthread_mutex_lock(&s->mu);
    unref(e);
    pthread_mutex_unlock(&s->mu);
}

const uint8_t *nds_cache_data(const nds_cache_entry *e) { return e->data; }
const nds_generation *nds_cache_generation(const nds_cache_entry *e) { return &e->gen; }

void nds_cache_forget(nds_chunk_cache *c, const char *url) {
    if (!c) return;
    uint64_t h = hash_url(url);
    shard *s = &c->shards[h % SHARDS];
    pthread_mutex_lock(&s->mu);
    nds_cache_entry *e = find(s, url, h);
    if (e) detach(s, e, h);
    pthread_mutex_unlock(&s->mu);
}

void nds_cache_put(nds_chunk_cache *c, const char *url, const uint8_t *data, size_t len,
                   const nds_generation *gen) {
    if (!c) return;
    uint8_t *copy = nds_cache_buffer(c, len);
    if (copy) memcpy(copy, data, len); /* copied before taking any lock */
    nds_cache_put_owned(c, url, copy, len, gen);
}

void nds_cache_put_owned(nds_chunk_cache *c, const char *url, uint8_t *data, size_t len,
                         const nds_generation *gen) {
    if (!c) return;
    uint64_t h = hash_url(url);
    shard *s = &c->shards[h % SHARDS];
    nds_cache_entry *e = NULL;
    /* Too big to be worth it, not a stored value, or out of memory: drop any stale copy. */
    bool keep = data && gen->kind == NDS_GEN_VALUE && len <= s->capacity / 2 + 1;
    if (keep && (e = calloc(1, sizeof *e)) != NULL) e->url = strdup(url);
    if (!keep || !e || !e->url) {
        if (e) free(e);
        if (data) nds_cache_buffer_free(c, data, len);
        nds_cache_forget(c, url);
        return;
    }
    e->cache = c;
    e->data = data;
    e->len = len;
    e->gen = *gen;
    e->refs = 1;
    e->in_table = 1;
    pthread_mutex_lock(&s->mu);
    nds_cache_entry *old = find(s, url, h);
    if (old) detach(s, old, h);
    while (s->tail && s->bytes + len > s->capacity) detach(s, s->tail, hash_url(s->tail->url));
    e->hnext = s->buckets[h % BUCKETS];
    s->buckets[h % BUCKETS] = e;
    e->next = s->head;
    if (s->head) s->head->prev = e;
    s->head = e;
    if (!s->tail) s->tail = e;
    s->bytes += len;
    pthread_mutex_unlock(&s->mu);
}
