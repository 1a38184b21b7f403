/* The array object shared by lib/array.c (open, metadata, attributes), lib/array_read.c and
 * lib/array_io.c (read, write), lib/chunk_update.c (the update of one chunk) and lib/array_maint.c
 * (resize, stats, verify). */
#ifndef NDS_INTERNAL_ARRAY_H
#define NDS_INTERNAL_ARRAY_H

#include <pthread.h>
#include <stdbool.h>
#include <json-c/json.h>

#include "ndstore/array.h"
#include "ndstore/sys/format.h"
#include "internal/chunk_lock.h"
#include "internal/format_util.h"

struct nds_array {
    const nds_format *format; /* immutable */
    void *state;              /* the format's instance */
    nds_kvstore *kv;          /* the array's prefix */
    nds_kvstore *store;       /* the store itself: kv, or (opened in a transaction, kv its staging
                                 handle) the store under it; borrowed from kv */
    nds_context *ctx;
    pthread_rwlock_t meta_lock; /* readers: I/O calls; writer: resize / set_attributes */
    nds_array_meta meta;        /* guarded by meta_lock */
    size_t elem;                /* bytes per element */
    size_t chunk_elems;         /* elements per chunk */
    size_t chunk_bytes;         /* bytes per canonical chunk */
    size_t read_chunk_bytes;    /* bytes per canonical read chunk; 0 when reads use whole chunks */
    nds_chunk_locks locks;      /* per-chunk in-process locks */
    nds_txn *txn;               /* opened inside this transaction (kv is its staging handle), or NULL */
    /* The generation of the metadata key this handle's meta was read from (or is older than), or
     * kind NONE when unknown (a transaction, a store without generations): then not checked.
     * Guarded by meta_lock (written under the write lock). A write compares it after committing
     * (nds_array_check_metadata), so that a write racing a resize never reports success for
     * chunks outside the shape. */
    nds_generation meta_gen;
    int meta_stale; /* set (atomically) once a check found the metadata changed */
    bool snapshot;  /* opened with "consolidated": true: read-only (nds_array_check_stale) */
};

/** Reads the generation of a's metadata key into *gen (kind NONE when the format has none). */
int nds_array_metadata_generation(nds_array *a, nds_generation *gen);
/** NDS_ECONFLICT naming a when its metadata key no longer has a->meta_gen (resized or changed by
 *  another handle or process; what: "write to", "resize of", ...), and marks the handle stale;
 *  0 when unchanged or not checked. Caller holds meta_lock. */
int nds_array_check_metadata(nds_array *a, const char *what);
/** NDS_ECONFLICT when an earlier check found a's metadata changed (nothing is read). */
int nds_array_check_stale(const nds_array *a, const char *what);
/** Records the generation of a's metadata after this handle changed it (caller holds meta_lock
 *  for writing). */
void nds_array_metadata_changed(nds_array *a);

/** Fills the derived sizes of a from a->meta; NDS_ELIMIT when a chunk does not fit in memory. */
int nds_array_derive_sizes(nds_array *a);

/* ---- chunk access (lib/chunk_update.c; the updates themselves: internal/chunk_update.h) ---- */

/** Writes the key of cell into buf; on failure the error names the cell. */
int nds_array_chunk_key(const nds_array *a, const uint64_t *cell, char *buf, size_t cap);
/** Reads chunk cell into chunk (canonical form); missing chunks come back as fill with *present =
 * 0. gen (may be NULL) receives the generation read. With use_cache, a cached decode is used when
 * the store confirms (conditional read) that the chunk has not changed, and decodes are cached. */
int nds_array_load_chunk(nds_array *a, const uint64_t *cell, const char *key, uint8_t *chunk,
                         int *present, nds_generation *gen, bool use_cache);

/* ---- variable-length arrays (lib/array_vlen.c) ---- */

/** NDS_EINVAL naming a (a variable-length array) and the calls that move its elements. */
int nds_array_vlen_refusal(const nds_array *a, const char *what);
/** Resets the elements of variable-length chunk cell beyond a->meta.shape to fill (resize). */
int nds_array_vlen_clear_beyond(nds_array *a, const uint64_t *cell);
/** Decodes stored chunk key (cell) of a variable-length array, checking it (verify). */
int nds_array_vlen_check_chunk(nds_array *a, const uint64_t *cell, const char *key);

/* ---- grouped writes (meta.grouped: objects holding several chunks that are not a box) ---- */

/** A write call of lib/array_io.c (internal/array_io.h). */
struct io_call;
/** Writes call c to grouped array a (lib/array_group.c): one read-modify-write per storage object
 *  touched, on up to threads threads (0 = the pool's). */
int nds_array_write_groups(nds_array *a, const struct io_call *c, size_t threads);
/** NDS_EUNSUPPORTED naming grouped array a: its writes cannot be staged in a transaction. */
int nds_array_group_txn_refusal(const nds_array *a);

#endif
