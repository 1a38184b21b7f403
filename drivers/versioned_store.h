/* The versioned store's engine under the kv driver (drivers/versioned_store.c): finding the head
 * version, reading a version's keys through a node cache, and committing a batch as the next
 * version with one create-only write (docs/versioned-format.md).
 *
 * Threading: a vs_store is internally synchronised; commits through one store run one at a time.
 * Ownership: the store holds a reference to its base handle.
 */
#ifndef NDS_DRIVERS_VERSIONED_STORE_H
#define NDS_DRIVERS_VERSIONED_STORE_H

#include "ndstore/sys/kv_driver.h"
#include "ndstore/versioned.h"
#include "versioned_internal.h"

typedef struct vs_store vs_store;

/** One version's view: its number (0: the empty store before the first commit) and its tree. */
typedef struct vs_snapshot {
    uint64_t version;
    vs_root root;
} vs_snapshot;

/** Opens the engine on base (a reference is taken); url names the store in messages. */
int vs_store_open(vs_store **out, nds_kvstore *base, const char *url);
void vs_store_free(vs_store *s);
const char *vs_store_url(const vs_store *s);

/** The latest version, found from the head hint and probes of the commits after it. */
int vs_store_latest(vs_store *s, vs_snapshot *out);
/** Version v (NDS_ENOTFOUND when it was never committed). */
int vs_store_version(vs_store *s, uint64_t v, vs_snapshot *out);
/** The version a tag names (NDS_ENOTFOUND for an unknown tag). */
int vs_store_tag(vs_store *s, const char *tag, uint64_t *version);
/** Called by vs_store_tags once per tag; non-zero stops the listing and is returned. */
typedef int (*vs_tag_fn)(void *ctx, const char *name, uint64_t version);
/** Calls fn for every tag of the store, by name (versioned_tags.c). An unreadable tag is an
 *  error naming it; keys under tags/ that are not tag names are skipped. */
int vs_store_tags(vs_store *s, vs_tag_fn fn, void *ctx);
/** Creates tag name for version v (create-only: NDS_ECONFLICT when the tag exists). */
int vs_store_tag_create(vs_store *s, const char *name, uint64_t v);
/** Reads commit object v (for log). */
int vs_store_commit_info(vs_store *s, uint64_t v, vs_commit *out);

/** The generation text of a key written by version v. */
void vs_generation(uint64_t v, nds_generation *g);

/** Finds key in snap. */
int vs_store_lookup(vs_store *s, const vs_snapshot *snap, const char *key, vs_entry *out,
                    bool *found);
/** Reads bytes [offset, offset + len) of e's value, checked against its checksums; key and
 *  version name it in errors. */
int vs_store_read_value(vs_store *s, const vs_entry *e, uint64_t offset, uint64_t len,
                        nds_bytes *out);
/** Reads bytes [offset, offset + the iov lengths) of e's value straight into iov when the range
 *  covers whole checksum blocks and the base can (read_into), else through a buffer; checked
 *  against the value's checksums either way. */
int vs_store_read_into(vs_store *s, const vs_entry *e, uint64_t offset, const struct iovec *iov,
                       size_t iovcnt);
/** Lists snap's keys in [begin, end) ("" end: no bound) in key order. */
int vs_store_list(vs_store *s, const vs_snapshot *snap, const char *begin, const char *end,
                  vs_entry_fn fn, void *ctx);
/** The keys in [begin, end) ("" end: no bound) whose entries differ between a and b, in key
 *  order (vs_tree_diff_range: shared subtrees are skipped unread). */
int vs_store_diff(vs_store *s, const vs_snapshot *a, const vs_snapshot *b, const char *begin,
                  const char *end, vs_diff_fn fn, void *ctx);

/** One change of a commit: a put (data) or a delete, under a condition. */
typedef struct vs_write {
    const char *key;
    const uint8_t *data;
    size_t len;
    bool is_delete;
    nds_generation if_equal; /**< NONE, ABSENT, or a generation from vs_generation */
    const vs_ref *ref;       /**< a value already stored (a prepared set's): data unused */
    int status;              /**< out: 0 applied, NDS_ECONFLICT (condition failed) */
} vs_write;

typedef struct vs_commit_options {
    bool all_or_nothing;  /**< one failed condition fails the whole commit (NDS_ECONFLICT) */
    const char *message;  /**< may be NULL */
    const char *metadata; /**< JSON object text, may be NULL */
    const vs_id *tokens;  /**< prepared sets this commit publishes (recorded in the commit) */
    size_t ntokens;
} vs_commit_options;

/**
 * Commits w[0..n) as the version after *snap (refreshed and retried when another writer took that
 * version; conditions are checked against the version the commit builds on). On success *snap is
 * the new version (or, when every write was a conflict or changed nothing, the version checked).
 * @return 0 (statuses say which writes applied), NDS_ECONFLICT (all_or_nothing and a condition
 * failed: nothing written), or an error
 */
int vs_store_commit(vs_store *s, vs_snapshot *snap, vs_write *w, size_t n,
                    const vs_commit_options *o);

/** Writes n values into new data objects (create-only, about VS_DATA_OBJECT_MAX each); refs[i]
 *  gets where value i is, *objects (malloc'd) the objects written with their item counts. */
int vs_store_write_values(vs_store *s, const uint8_t *const *data, const size_t *len, size_t n,
                          vs_ref *refs, vs_object_count **objects, size_t *nobjects);
/** The base kvstore (borrowed). */
nds_kvstore *vs_store_base(vs_store *s);

/* ---- prepared sets (versioned_prepared.c) ---- */

/** A value a prepared set keeps for its committer (never committed as a key). */
typedef struct vs_side_value {
    const char *name;
    const uint8_t *data;
    size_t len;
} vs_side_value;

/** Writes ops (puts and deletes with their conditions; status and ref unused) and side values
 *  where no reader sees them, as a prepared set built on base_version; token gets its name. */
int vs_store_prepare(vs_store *s, uint64_t base_version, const vs_write *ops, size_t n,
                     const vs_side_value *side, size_t m, char token[VS_ID_HEX]);
/** Loads the prepared set token names. NDS_ENOTFOUND when there is none. */
int vs_store_prepared_load(vs_store *s, const char *token, vs_prepared *out);
/**
 * Commits the prepared sets tokens[0..n) and the writes extra[0..nextra) (which win over the sets'
 * writes of the same key) as one version, all or nothing, on the latest version (*snap becomes the
 * new one). Sets are applied in token order; keys several sets write under a condition must have
 * equal values; a conditioned put whose value is already stored is left out. NDS_EINVAL for a set
 * an earlier commit published; NDS_ECONFLICT when a condition fails (nothing written).
 */
int vs_store_commit_prepared(vs_store *s, vs_snapshot *snap, const char *const *tokens, size_t n,
                             const vs_write *extra, size_t nextra, const vs_commit_options *o);

/* versioned_gc_read.c */
/** Whether the newest readable gc state says version v is collected (some of its objects deleted;
 *  versioned_gc.c). Taggers ask after writing their tag: see the order in versioned_gc.c. */
int vs_gc_version_collected(vs_store *s, uint64_t v, bool *collected);
/** The gc states' sequence numbers, newest first (*seqs malloc'd: the caller frees it). */
int vs_gc_states_list(vs_store *s, uint64_t **seqs, size_t *n);
/** Reads and decodes state seq into *out. A missing or corrupt state is NDS_ECORRUPT (the caller
 *  falls back); other errors (I/O) are returned as they are. */
int vs_gc_state_read(vs_store *s, uint64_t seq, vs_gc_state *out);
/** A gc run (nds_versioned_gc, include/ndstore/versioned.h) on s. (versioned_gc.c) */
int vs_gc_run(vs_store *s, const nds_gc_options *opts, nds_gc_result *result);

/** The engine behind a versioned store handle and the version the handle sees; NULL (message
 *  set, NDS_EINVAL) when kv is not a versioned store. (kv_versioned.c) */
vs_store *vs_store_of(nds_kvstore *kv, vs_snapshot *view);

#endif
