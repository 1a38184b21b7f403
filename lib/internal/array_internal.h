/* The array object shared by lib/array.c (open, metadata, attributes), lib/array_read.c and
 * lib/array_io.c (read, write) and lib/array_maint.c (resize, stats, verify). */
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
/** Writes the key of cell into buf; on failure the error names the cell. */
int nds_array_chunk_key(const nds_array *a, const uint64_t *cell, char *buf, size_t cap);
/** Reads chunk cell into chunk (canonical form); missing chunks come back as fill with *present =
 * 0. gen (may be NULL) receives the generation read. With use_cache, a cached decode is used when
 * the store confirms (conditional read) that the chunk has not changed, and decodes are cached. */
int nds_array_load_chunk(nds_array *a, const uint64_t *cell, const char *key, uint8_t *chunk,
                         int *present, nds_generation *gen, bool use_cache);

/** Encodes a merged canonical chunk for storage into out, or sets *all_fill (then out is untouched:
 *  the chunk is to be deleted). */
int nds_array_encode_for_store(nds_array *a, const uint64_t *cell, const char *key,
                               const uint8_t *chunk, nds_buf *out, int *all_fill);
/** The bytes to store for a merged canonical chunk: the chunk itself where the array stores chunks
 *  canonically (meta.stored_canonical: no copy), else its encoding in enc; or *all_fill (nothing to
 *  store: the chunk is to be deleted). *bytes lives as long as chunk or enc. */
int nds_array_stored_bytes(nds_array *a, const uint64_t *cell, const char *key,
                           const uint8_t *chunk, nds_buf *enc, const uint8_t **bytes, size_t *len,
                           int *all_fill);

/** Changes chunk cell under its in-process lock with the optimistic protocol: load (unless whole is
 * set, meaning merge overwrites every element), merge(ctx, chunk), store conditionally, retry on
 * conflict. A chunk left all fill is deleted. changed: the box (chunk coordinates) outside which
 * merge changes nothing, so the format may keep the stored encoding there
 * (nds_format.update_chunk); NULL when unknown. */
typedef void (*nds_merge_fn)(void *ctx, const uint64_t *cell, uint8_t *chunk);
int nds_array_update_chunk(nds_array *a, const uint64_t *cell, int whole, const nds_box *changed,
                           nds_merge_fn merge, void *ctx);
struct nds_write_batch;
/** As nds_array_update_chunk, but the merged chunk is staged and added to batch under index (the
 * batch's redo rewrites it by index when its publish conflicts; a delete is done at once). Only
 * for a->kv that can stage (nds_kvstore_can_stage). */
int nds_array_stage_update(nds_array *a, const uint64_t *cell, size_t index, int whole,
                           const nds_box *changed, nds_merge_fn merge, void *ctx,
                           struct nds_write_batch *batch);

/* ---- variable-length arrays (lib/array_vlen.c) ---- */

/** The update of a variable-length chunk (nds_dtype_is_vlen) inside the core's update protocol:
 *  decodes old[0..old_len) (NULL: not stored, every element the fill) into its element list,
 *  calls merge(merge_ctx, chunk) with chunk pointing to that list (an nds_vlen_list of
 *  formats/codecs/vlen.h, which merge replaces), and encodes the result into out, or sets
 *  *all_fill. Errors carry no chunk name (the caller adds it). */
int nds_array_vlen_update(nds_array *a, const uint64_t *cell, const uint8_t *old, size_t old_len,
                          void (*merge)(void *ctx, uint8_t *chunk), void *merge_ctx, nds_buf *out,
                          int *all_fill);
/** NDS_EINVAL naming a (a variable-length array) and the calls that move its elements. */
int nds_array_vlen_refusal(const nds_array *a, const char *what);
/** Resets the elements of variable-length chunk cell beyond a->meta.shape to fill (resize). */
int nds_array_vlen_clear_beyond(nds_array *a, const uint64_t *cell);
/** Decodes stored chunk key (cell) of a variable-length array, checking it (verify). */
int nds_array_vlen_check_chunk(nds_array *a, const uint64_t *cell, const char *key);

/* ---- grouped writes (meta.grouped: objects holding several chunks that are not a box) ---- */

/** A write call of lib/array_io.c (the box, the caller's buffer, the chunks it iterates). */
struct io_call;
/** How many chunk-grid cells the call iterates (some may select nothing: see nds_io_call_cell). */
size_t nds_io_call_cells(const struct io_call *c);
/** Cell i of the call: its grid coordinates, and *whole = the call writes every element of it that
 *  lies inside the array. false when the call selects nothing in it (a stepped box). */
bool nds_io_call_cell(const struct io_call *c, size_t i, uint64_t *cell, int *whole);
/** Copies the call's elements of chunk cell from the caller's buffer into chunk (canonical). */
void nds_io_call_merge(const struct io_call *c, const uint64_t *cell, uint8_t *chunk);
/** Waits before redoing a conditional write that conflicted for the (attempt + 1)-th time:
 *  exponential backoff with jitter, the same as chunk updates. false, without waiting, once the
 *  attempts are used up. */
bool nds_array_backoff(int attempt);

/** Writes call c to grouped array a (lib/array_group.c): one read-modify-write per storage object
 *  touched, on up to threads threads (0 = the pool's). */
int nds_array_write_groups(nds_array *a, const struct io_call *c, size_t threads);
/** NDS_EUNSUPPORTED naming grouped array a: its writes cannot be staged in a transaction. */
int nds_array_group_txn_refusal(const nds_array *a);

#endif
