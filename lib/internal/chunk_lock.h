/* Per-chunk in-process locks: a table of mutexes keyed by chunk key, created on demand and freed
 * when unused, so different chunks never wait on each other (no striping) and the same chunk
 * serialises. Internally synchronised; the table mutex is held only to find or drop an entry. */
#ifndef NDS_INTERNAL_CHUNK_LOCK_H
#define NDS_INTERNAL_CHUNK_LOCK_H

#include <pthread.h>
#include <stddef.h>

typedef struct nds_chunk_lock_entry nds_chunk_lock_entry;

typedef struct nds_chunk_locks {
    pthread_mutex_t mu;
    nds_chunk_lock_entry **buckets;
    size_t nbuckets;
} nds_chunk_locks;

int nds_chunk_locks_init(nds_chunk_locks *t);
void nds_chunk_locks_dispose(nds_chunk_locks *t);
/** Locks key's mutex (creating it); returns the entry to pass to unlock, or NULL with NDS_ENOMEM.
 */
nds_chunk_lock_entry *nds_chunk_lock(nds_chunk_locks *t, const char *key);
void nds_chunk_unlock(nds_chunk_locks *t, nds_chunk_lock_entry *e);

#endif
