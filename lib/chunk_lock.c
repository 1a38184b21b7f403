/* Per-chunk in-process locks (see internal/chunk_lock.h). Lock order: table mutex is never held
 * while waiting for an entry's mutex. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "internal/chunk_lock.h"
#include "internal/error.h"

#define NBUCKETS 1024

struct nds_chunk_lock_entry {
    pthread_mutex_t mu;
    size_t refs;                /* holders + waiters; guarded by the table mutex */
    nds_chunk_lock_entry *next; /* bucket chain */
    char key[];
};

static size_t hash_key(const char *s) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    while (*s) h = (h ^ (uint8_t)*s++) * 1099511628211ull;
    return (size_t)h;
}

int nds_chunk_locks_init(nds_chunk_locks *t) {
    pthread_mutex_init(&t->mu, NULL);
    t->nbuckets = NBUCKETS;
    t->buckets = calloc(NBUCKETS, sizeof *t->buckets);
    return t->buckets ? 0 : nds_err(NDS_ENOMEM, "out of memory");
}

void nds_chunk_locks_dispose(nds_chunk_locks *t) {
    for (size_t i = 0; t->buckets && i < t->nbuckets; i++)
        while (t->buckets[i]) {
            nds_chunk_lock_entry *e = t->buckets[i];
            t->buckets[i] = e->next;
            pthread_mutex_destroy(&e->mu);
            free(e);
        }
    free(t->buckets);
    t->buckets = NULL;
    pthread_mutex_destroy(&t->mu);
}

nds_chunk_lock_entry *nds_chunk_lock(nds_chunk_locks *t, const char *key) {
    size_t b = hash_key(key) % t->nbuckets;
    pthread_mutex_lock(&t->mu);
    nds_chunk_lock_entry *e = t->buckets[b];
    while (e && strcmp(e->key, key) != 0) e = e->next;
    if (!e) {
        size_t n = strlen(key) + 1;
        e = malloc(sizeof *e + n);
        if (!e) {
            pthread_mutex_unlock(&t->mu);
            nds_err(NDS_ENOMEM, "out of memory");
            return NULL;
        }
        pthread_mutex_init(&e->mu, NULL);
        e->refs = 0;
        memcpy(e->key, key, n);
        e->next = t->buckets[b];
        t->buckets[b] = e;
    }
    e->refs++;
    pthread_mutex_unlock(&t->mu);
    pthread_mutex_lock(&e->mu);
    return e;
}

void nds_chunk_unlock(nds_chunk_locks *t, nds_chunk_lock_entry *e) {
    pthread_mutex_unlock(&e->mu);
    pthread_mutex_lock(&t->mu);
    if (--e->refs == 0) {
        nds_chunk_lock_entry **p = &t->buckets[hash_key(e->key) % t->nbuckets];
        while (*p != e) p = &(*p)->next;
        *p = e->next;
        pthread_mutex_destroy(&e->mu);
        free(e);
    }
    pthread_mutex_unlock(&t->mu);
}
