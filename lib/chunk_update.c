/* The optimistic update of one chunk (see internal/chunk_update.h), and the chunk access both it
 * and the read path use (chunk keys, loads through the cache, encodings for storage).
 *
 * One update is one chunk_update: the caller's change, the chunk's key, this thread's scratch
 * chunk, where the result goes (written, or staged for a batch) and, per attempt, the generation
 * read. Each step takes it instead of a dozen arguments:
 *   run_update   key, scratch, lock; hands a staged value to the batch once unlocked
 *   run_locked   attempts with backoff until no conflict
 *   attempt      read (unless whole), merge, store, under the generation read
 *   update_stored_form / merge_decoded   the format merges in its stored encoding (update_chunk,
 *                or the change's update_stored), else the chunk is decoded and merged
 *   store_chunk / store_bytes   encode; conditional write, stage, or delete when all fill
 * Threading: any thread; one update holds one chunk lock and one scratch chunk at a time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/array_io.h"
#include "internal/chunk_cache.h"
#include "internal/chunk_update.h"
#include "internal/context_internal.h"
#include "internal/dtype_util.h"
#include "internal/error.h"
#include "internal/format_util.h"
#include "internal/kvstore_internal.h"
#include "internal/util.h"
#include "internal/write_batch.h"

/* Conflict retries: exponential backoff from 1 ms to 256 ms with jitter, for at most this many
 * tries. */
#define RETRY_MAX 2000

/* ---- chunk access (also the read path's) ---- */

int nds_array_chunk_key(const nds_array *a, const uint64_t *cell, char *buf, size_t cap) {
    int rc = a->format->chunk_key(a->state, cell, buf, cap);
    return rc ? nds_err_prefix(rc, "%s: chunk key of %s", a->format->name, nds_kvstore_url(a->kv))
              : 0;
}

/* The error of a chunk's read or decode, and of its store (a conflict is left bare: the caller
 * retries). */
static int chunk_error(const nds_array *a, const char *key, int rc) {
    return nds_err_prefix(rc, "%s: chunk %s of %s", a->format->name, key, nds_kvstore_url(a->kv));
}

static int store_error(const nds_array *a, const char *key, int rc) {
    if (rc == 0 || rc == NDS_ECONFLICT) return rc;
    return nds_err_prefix(rc, "%s: writing chunk %s of %s", a->format->name, key,
                          nds_kvstore_url(a->kv));
}

int nds_array_load_chunk(nds_array *a, const uint64_t *cell, const char *key, uint8_t *chunk,
                         int *present, nds_generation *gen, bool use_cache) {
    nds_chunk_cache *cache = use_cache ? nds_context_cache(a->ctx) : NULL;
    char url[KEY_MAX + 512];
    nds_cache_entry *hit = NULL;
    nds_read_options ro = NDS_READ_OPTIONS_INIT;
    if (cache) {
        cache_url(a, key, url, sizeof url);
        if ((hit = nds_cache_get(cache, url)) != NULL) ro.if_not_equal = *nds_cache_generation(hit);
    }
    nds_read_result r;
    int rc = nds_kvstore_read(a->kv, key, &ro, &r);
    if (rc) {
        nds_cache_release(cache, hit);
        return chunk_error(a, key, rc);
    }
    if (gen) *gen = r.generation;
    *present = r.state == NDS_READ_VALUE || r.state == NDS_READ_UNCHANGED;
    if (r.state == NDS_READ_UNCHANGED)
        memcpy(chunk, nds_cache_data(hit), a->chunk_bytes);
    else if (*present)
        rc = nds_format_decode_whole(a->format, a->state, cell, r.value.data, r.value.len, chunk,
                                     a->chunk_bytes);
    else
        nds_fill_elements(chunk, a->chunk_elems, a->elem, a->meta.fill_value);
    nds_cache_release(cache, hit);
    if (cache && r.state == NDS_READ_VALUE && rc == 0)
        nds_cache_put(cache, url, chunk, a->chunk_bytes, &r.generation);
    else if (cache && r.state != NDS_READ_UNCHANGED)
        nds_cache_forget(cache, url);
    nds_read_result_dispose(&r);
    return rc ? chunk_error(a, key, rc) : 0;
}

int nds_array_encode_for_store(nds_array *a, const uint64_t *cell, const char *key,
                               const uint8_t *chunk, nds_buf *out, int *all_fill) {
    *all_fill = nds_all_equal(chunk, a->chunk_elems, a->elem, a->meta.fill_value);
    if (*all_fill) return 0;
    out->len = 0;
    int rc = a->format->encode_chunk(a->state, cell, chunk, out);
    return rc ? nds_err_prefix(rc, "%s: encoding chunk %s of %s", a->format->name, key,
                               nds_kvstore_url(a->kv))
              : 0;
}

int nds_array_stored_bytes(nds_array *a, const uint64_t *cell, const char *key,
                           const uint8_t *chunk, nds_buf *enc, nds_stored_chunk *out) {
    out->bytes = chunk; /* canonical storage: the chunk buffer is what is stored */
    out->len = a->chunk_bytes;
    if (a->meta.stored_canonical) {
        out->all_fill = nds_all_equal(chunk, a->chunk_elems, a->elem, a->meta.fill_value);
        return 0;
    }
    int rc = nds_array_encode_for_store(a, cell, key, chunk, enc, &out->all_fill);
    out->bytes = enc->data;
    out->len = enc->len;
    return rc;
}

/* ---- the protocol ---- */

static void backoff(int attempt) {
    uint64_t ceiling = (uint64_t)1000000 << (attempt < 8 ? attempt : 8); /* 1 ms .. 256 ms */
    nds_sleep_ns(ceiling / 2 + nds_random_u64() % (ceiling / 2 + 1));
}

bool nds_array_backoff(int attempt) {
    if (attempt + 1 >= RETRY_MAX) return false;
    backoff(attempt);
    return true;
}

/* One chunk's update. */
typedef struct chunk_update {
    nds_array *a;
    const nds_chunk_change *ch;
    char key[KEY_MAX];
    uint8_t *chunk;              /* this thread's scratch chunk (canonical layout) */
    struct nds_write_batch *batch; /* staged for this batch under index; NULL: written at once */
    size_t index;
    /* per attempt */
    nds_generation cond;     /* the generation read: the store's condition */
    nds_kv_staged *staged;   /* the value staged (NULL: none, or a delete done at once) */
    size_t staged_bytes;
} chunk_update;

/* Writes s's bytes, or deletes the chunk when all fill; both under u->cond. With a batch the value
 * is staged instead (u->staged; the batch publishes it under u->cond); deletes are never staged.
 * chunk: the canonical chunk written, which the cache then holds; NULL when there is none (the
 * cache forgets the chunk). */
static int store_bytes(chunk_update *u, const nds_stored_chunk *s, int was_present,
                       const uint8_t *chunk) {
    nds_array *a = u->a;
    nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
    wo.if_equal = u->cond;
    nds_chunk_cache *cache = nds_context_cache(a->ctx);
    char url[KEY_MAX + 512];
    int rc;
    if (cache) cache_url(a, u->key, url, sizeof url);
    if (s->all_fill) {
        if (!was_present && u->cond.kind != NDS_GEN_NONE) return 0; /* still missing */
        rc = nds_kvstore_delete(a->kv, u->key, &wo);
        if (cache) nds_cache_forget(cache, url);
        return rc;
    }
    if (u->batch) { /* a cached copy goes stale when the batch is published */
        if (cache) nds_cache_forget(cache, url);
        u->staged_bytes = s->len;
        return nds_kvstore_stage(a->kv, u->key, s->bytes, s->len, &u->staged);
    }
    nds_generation written = {NDS_GEN_NONE, {0}};
    rc = nds_kvstore_write(a->kv, u->key, s->bytes, s->len, &wo, &written);
    if (cache && rc == 0 && chunk)
        nds_cache_put(cache, url, chunk, a->chunk_bytes, &written);
    else if (cache)
        nds_cache_forget(cache, url);
    return rc;
}

/* Stores the merged u->chunk: deleted when all fill, else encoded and written (or staged); its
 * errors are prefixed by store_error. */
static int store_chunk(chunk_update *u, int was_present) {
    nds_buf *enc = nds_scratch_buf(NDS_SCRATCH_ENCODED);
    if (!enc) return nds_err(NDS_ENOMEM, "out of memory");
    nds_stored_chunk s;
    int rc = nds_array_stored_bytes(u->a, u->ch->cell, u->key, u->chunk, enc, &s);
    return rc ? rc : store_bytes(u, &s, was_present, u->chunk);
}

/* Decodes a chunk's stored bytes (fill when not stored), merges and stores it: the write path of
 * a format that declines update_chunk, from the bytes already read. */
static int merge_decoded(chunk_update *u, const uint8_t *stored, size_t len) {
    nds_array *a = u->a;
    const nds_chunk_change *ch = u->ch;
    int rc = stored ? nds_format_decode_whole(a->format, a->state, ch->cell, stored, len,
                                              u->chunk, a->chunk_bytes)
                    : 0;
    if (rc) return chunk_error(a, u->key, rc);
    if (!stored) nds_fill_elements(u->chunk, a->chunk_elems, a->elem, a->meta.fill_value);
    ch->merge(ch->ctx, ch->cell, u->chunk);
    return store_error(a, u->key, store_chunk(u, stored != NULL));
}

/* The change's merge as the format's update_chunk calls it. */
static void merge_for_format(void *ctx, uint8_t *chunk) {
    const nds_chunk_change *ch = ctx;
    ch->merge(ch->ctx, ch->cell, chunk);
}

/* The format's (or the change's) merge in the stored encoding, into enc. */
static int merge_stored(chunk_update *u, const uint8_t *stored, size_t len, nds_buf *enc,
                        int *all_fill) {
    nds_array *a = u->a;
    const nds_chunk_change *ch = u->ch;
    enc->len = 0;
    if (ch->update_stored) return ch->update_stored(a, ch, stored, len, enc, all_fill);
    nds_update_request fu = {.cell = ch->cell, .old = stored, .old_len = len,
                           .changed = ch->changed, .merge = merge_for_format,
                           .merge_ctx = (void *)ch, .chunk = u->chunk, .out = enc};
    int rc = a->format->update_chunk(a->state, &fu);
    *all_fill = fu.all_fill;
    return rc;
}

/* A write to part of a chunk, done in its stored form so that the format skips what the write
 * leaves alone: the stored bytes are read past the cache (a cached chunk has none) and handed over
 * with the box the merge changes. A format that declines (NDS_EUNSUPPORTED) gets the chunk decoded
 * instead; a chunk with no dense form cannot be. */
static int update_stored_form(chunk_update *u) {
    nds_array *a = u->a;
    nds_read_result old;
    int rc = nds_kvstore_read(a->kv, u->key, NULL, &old);
    if (rc) return chunk_error(a, u->key, rc);
    u->cond = old.generation;
    const uint8_t *stored = old.state == NDS_READ_VALUE ? old.value.data : NULL;
    size_t len = stored ? old.value.len : 0;
    nds_stored_chunk s = {NULL, 0, 0};
    nds_buf *enc = nds_scratch_buf(NDS_SCRATCH_ENCODED);
    rc = enc ? merge_stored(u, stored, len, enc, &s.all_fill)
             : nds_err(NDS_ENOMEM, "out of memory");
    if (rc == 0) {
        s.bytes = enc->data, s.len = enc->len;
        rc = store_error(a, u->key, store_bytes(u, &s, stored != NULL, NULL));
    } else if (rc == NDS_EUNSUPPORTED && !u->ch->update_stored) {
        rc = merge_decoded(u, stored, len);
    } else {
        rc = chunk_error(a, u->key, rc);
    }
    nds_read_result_dispose(&old);
    return rc;
}

/* Whether a write to part of a chunk is merged in its stored form. */
static bool updates_stored_form(const chunk_update *u) {
    const nds_array *a = u->a;
    if (u->ch->update_stored) return true; /* no dense form */
    return u->ch->changed && a->format->update_chunk &&
           !a->meta.stored_canonical;
}

/* One attempt: read (unless whole), merge, store, under the generation read (u->cond). Errors
 * carry their prefix; a conflict is bare. */
static int attempt(chunk_update *u) {
    nds_array *a = u->a;
    const nds_chunk_change *ch = u->ch;
    int present = 1, rc;
    u->cond = (nds_generation){NDS_GEN_NONE, {0}};
    if (!ch->whole && updates_stored_form(u)) return update_stored_form(u);
    /* A whole write overwrites every element inside the array; only an edge chunk's part beyond
     * the array's shape needs the fill value first. */
    if (!ch->whole &&
        (rc = nds_array_load_chunk(a, ch->cell, u->key, u->chunk, &present, &u->cond, true)))
        return rc;
    if (ch->whole && chunk_crosses_edge(a, ch->cell))
        nds_fill_elements(u->chunk, a->chunk_elems, a->elem, a->meta.fill_value);
    ch->merge(ch->ctx, ch->cell, u->chunk);
    return store_error(a, u->key, store_chunk(u, present));
}

/* Attempts until one does not conflict (at most RETRY_MAX, with backoff). */
static int run_locked(chunk_update *u) {
    for (int i = 0;; i++) {
        int rc = attempt(u);
        if (rc != NDS_ECONFLICT) return rc;
        if (!nds_array_backoff(i))
            return nds_err(NDS_ECONFLICT, "%s: chunk %s of %s: still conflicting after %d attempts",
                           u->a->format->name, u->key, nds_kvstore_url(u->a->kv), RETRY_MAX);
    }
}

/* Runs the update under the chunk's in-process lock; a value staged is handed to the batch after
 * the lock is released (the batch may publish, and a conflicted chunk's redo takes its lock:
 * never while holding another). */
static int run_update(chunk_update *u) {
    nds_array *a = u->a;
    if (nds_dtype_is_vlen(a->meta.dtype) && !u->ch->update_stored)
        return nds_err(NDS_EINTERNAL, "%s: %s: a variable-length chunk updated without its "
                                      "element-list merge",
                       a->format->name, nds_kvstore_url(a->kv));
    int rc = nds_array_chunk_key(a, u->ch->cell, u->key, sizeof u->key);
    if (rc) return rc;
    /* (variable-length arrays have no dense chunk: chunk_bytes 0) */
    u->chunk = nds_scratch(NDS_SCRATCH_CHUNK, a->chunk_bytes ? a->chunk_bytes : 1);
    if (!u->chunk) return NDS_ENOMEM;
    nds_chunk_lock_entry *lock = nds_chunk_lock(&a->locks, u->key);
    if (!lock) return NDS_ENOMEM;
    rc = run_locked(u);
    nds_chunk_unlock(&a->locks, lock);
    if (rc || !u->staged) return rc;
    return nds_write_batch_add(u->batch, u->staged, u->staged_bytes, &u->cond, u->index);
}

int nds_chunk_update(nds_array *a, const nds_chunk_change *change) {
    chunk_update u = {.a = a, .ch = change};
    return run_update(&u);
}

int nds_chunk_update_staged(nds_array *a, const nds_chunk_change *change,
                            struct nds_write_batch *batch, size_t index) {
    chunk_update u = {.a = a, .ch = change, .batch = batch, .index = index};
    return run_update(&u);
}
