/* A cache of decoded chunks, shared by the arrays of one context, bounded in bytes (LRU eviction).
 *
 * Entries are keyed by the chunk's full URL (kvstore URL + key) and carry the generation they were
 * decoded from; a reader revalidates with a conditional read (if_not_equal = that generation), so a
 * hit never serves data another writer has replaced. Internally synchronised (sharded mutexes);
 * entries are reference counted so copies out of an entry happen outside any lock.
 */
#ifndef NDS_INTERNAL_CHUNK_CACHE_H
#define NDS_INTERNAL_CHUNK_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include "ndstore/kvstore.h"

typedef struct nds_chunk_cache nds_chunk_cache;
typedef struct nds_cache_entry nds_cache_entry;

/** A cache of at most capacity bytes; NULL with capacity 0 (caching off). */
int nds_chunk_cache_new(nds_chunk_cache **out, size_t capacity);
void nds_chunk_cache_free(nds_chunk_cache *c);
/** The entry for url (referenced: release with nds_cache_release), or NULL. */
nds_cache_entry *nds_cache_get(nds_chunk_cache *c, const char *url);
void nds_cache_release(nds_chunk_cache *c, nds_cache_entry *e);
/** The entry's decoded bytes and the generation they came from. */
const uint8_t *nds_cache_data(const nds_cache_entry *e);
const nds_generation *nds_cache_generation(const nds_cache_entry *e);
/** Stores a copy of data[0..len) for url at generation gen (replacing any entry); best effort: a
 * chunk larger than half a shard (1/32 of the capacity), or an allocation failure, just leaves it
 * uncached. */
void nds_cache_put(nds_chunk_cache *c, const char *url, const uint8_t *data, size_t len,
                   const nds_generation *gen);
/** As nds_cache_put, taking ownership of data, which must come from nds_cache_buffer (decode straight
 *  into it: no copy). data NULL just drops any entry for url. */
void nds_cache_put_owned(nds_chunk_cache *c, const char *url, uint8_t *data, size_t len,
                         const nds_generation *gen);
/** A buffer of len bytes for nds_cache_put_owned: a recycled one of an evicted entry when there is
 *  one (already mapped: no page faults), else malloc'd. NULL when out of memory. */
uint8_t *nds_cache_buffer(nds_chunk_cache *c, size_t len);
/** Gives back a buffer from nds_cache_buffer that was not put (kept for reuse or freed). */
void nds_cache_buffer_free(nds_chunk_cache *c, uint8_t *buf, size_t len);
/** Drops the entry for url, if any. */
void nds_cache_forget(nds_chunk_cache *c, const char *url);

#endif
