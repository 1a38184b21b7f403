/* Versioned stores: the history of a kvstore opened through the "versioned" adapter
 * ("file:///ckpt/|versioned:", docs/versioned-format.md).
 *
 * Every write through such a handle is a commit, and every commit is a new version: a write of one
 * key, a batch of an array write, or a whole atomic transaction (nds_txn_commit) as one version.
 * Readers of a version see all of it or nothing of it. A handle sees the latest version when it is
 * opened, then each version its own commits make; nds_versioned_refresh moves it to the latest.
 * "...|versioned:@N/" or "@TAG/" opens a version read-only.
 */
#ifndef NDSTORE_VERSIONED_H
#define NDSTORE_VERSIONED_H

#include <stdint.h>
#include "ndstore/kvstore.h"

#ifdef __cplusplus
extern "C" {
#endif

/** One version as its commit records it (strings borrowed for the callback). */
typedef struct nds_version_info {
    uint64_t version;     /**< 1, 2, ... */
    int64_t time_ns;      /**< the committer's wall clock, ns since the epoch */
    const char *message;  /**< or NULL */
    const char *metadata; /**< JSON object text, or NULL */
    uint64_t keys;        /**< keys in this version */
} nds_version_info;

/** Called once per version by nds_versioned_log; a non-zero return stops the log and is returned. */
typedef int (*nds_version_fn)(void *ctx, const nds_version_info *info);

/**
 * The version kv sees (0: the empty store before the first commit).
 * @return 0, or NDS_EINVAL when kv is not a versioned store
 */
NDS_API int nds_versioned_current(nds_kvstore *kv, uint64_t *version);
/** Moves kv's view to the latest version (a pinned handle stays where it is) and returns it. */
NDS_API int nds_versioned_refresh(nds_kvstore *kv, uint64_t *version);
/** Calls fn for the versions from newest (0: the latest) down to 1, newest first. */
NDS_API int nds_versioned_log(nds_kvstore *kv, uint64_t newest, nds_version_fn fn, void *ctx);
/**
 * Names version (0: the version kv sees) with tag name, which never moves: NDS_ECONFLICT when the
 * tag exists, NDS_EINVAL for a bad name (1-128 of A-Z a-z 0-9 . _ -, not all digits, not "latest"),
 * NDS_ENOTFOUND for a version that does not exist.
 */
NDS_API int nds_versioned_tag(nds_kvstore *kv, const char *name, uint64_t version);

/** Called once per tag by nds_versioned_tags (name borrowed for the call); a non-zero return
 *  stops the listing and is returned. */
typedef int (*nds_tag_fn)(void *ctx, const char *name, uint64_t version);
/**
 * Calls fn for every tag of the store kv is on, in name order, with the version it names. Cost: one
 * listing of the store's tags/ and one read per tag. @return 0, fn's non-zero return, NDS_EINVAL
 * when kv is not a versioned store, or the error of a tag that cannot be read (NDS_ECORRUPT naming
 * it). Thread: any; fn runs on the calling thread.
 */
NDS_API int nds_versioned_tags(nds_kvstore *kv, nds_tag_fn fn, void *ctx);
/** How a key differs between two versions. */
typedef enum nds_diff_kind {
    NDS_DIFF_ADDED,   /**< in the second version only */
    NDS_DIFF_REMOVED, /**< in the first version only */
    NDS_DIFF_CHANGED  /**< in both, written again in between (even with the same bytes) */
} nds_diff_kind;

/** Called once per differing key by nds_versioned_diff; key is relative to the handle's path and
 *  borrowed for the call. A non-zero return stops the diff and is returned. */
typedef int (*nds_diff_fn)(void *ctx, const char *key, nds_diff_kind kind);

/**
 * Calls fn, in key order, for every key under kv's path that differs between versions a and b (0
 * for either: the version kv sees; a may be newer than b, which reports the way back). A key is
 * changed when it was written between the two versions, whatever the bytes. The cost follows what
 * changed, not the size of the versions: subtrees both versions share are not read.
 * Thread: any (the handle is internally synchronised); fn runs on the calling thread.
 * @return 0, fn's non-zero return, NDS_EINVAL when kv is not a versioned store, NDS_ENOTFOUND for
 * a version that does not exist, or a read error (NDS_ECORRUPT naming the index object)
 */
NDS_API int nds_versioned_diff(nds_kvstore *kv, uint64_t a, uint64_t b, nds_diff_fn fn,
                               void *ctx);

#define NDS_GC_OPTIONS_VERSION 1
/** What nds_versioned_gc keeps. Start from NDS_GC_OPTIONS_INIT; give keep_last or older_than_ms
 *  (or both: a version either keeps is kept). The latest version and tagged versions are always kept. */
typedef struct nds_gc_options {
    int version;
    uint64_t keep_last;    /**< keep the newest N versions (0: not this rule) */
    int64_t older_than_ms; /**< keep versions committed less than this ago (-1: not this rule) */
    int64_t grace_ms;      /**< never delete what became garbage less than this ago, nor an
                                unreferenced object seen by a run less than this ago (a writer may
                                be about to commit it); default 6 hours */
    int dry_run;           /**< count, delete nothing (and write no gc state) */
    int full_scan;         /**< read the whole history and list every object, as when no gc
                                state exists (finds objects of writers whose clocks lag by more
                                than an hour; deletes the same as an incremental run otherwise) */
} nds_gc_options;
#define NDS_GC_OPTIONS_INIT {NDS_GC_OPTIONS_VERSION, 0, -1, 6 * 3600 * 1000, 0, 0}

/** What a collection did. */
typedef struct nds_gc_result {
    uint64_t versions_kept;      /**< versions whose objects are all kept (latest - collected) */
    uint64_t versions_collected; /**< versions some of whose objects this or an earlier run
                                      deleted: they stay in the log but can no longer be read */
    uint64_t objects_deleted;    /**< deleted by this run (a killed run's deletions that this run
                                      finished are not counted again) */
    uint64_t bytes_deleted;      /**< of those, as far as a listing showed their size */
    uint64_t objects_pending;    /**< unreferenced objects waiting for the grace period, deleted
                                      by a later run if still unreferenced */
    uint64_t commits_read;       /**< commit objects read (each with its superseded list) */
    uint64_t keys_listed;        /**< keys the run's listings of data/, index/, prepared/ returned */
    int full_scan;               /**< 1 when the run read the whole history (note says why) */
    char note[320];              /**< why a full scan ran ("" otherwise): no gc state yet, a state
                                      that does not decode (named), or full_scan asked */
} nds_gc_result;

/**
 * Deletes what no kept version references: objects whose every item later versions superseded,
 * when no kept version lies between their creation and that, and the objects of writers that never
 * committed (killed, lost races, prepared parts never committed), in two runs at least grace_ms
 * apart. Versions not kept stay in the log but can no longer be read; tagging one is refused.
 * Cost: a run reads the newest gc state (one object, about 73 bytes per object still referenced),
 * the commits made since the run that wrote it (one read each plus one for its superseded list),
 * the tags, and lists only the object names made since that run (names start with their creation
 * time; an hour of margin), so it costs what changed and what it deletes, not the size of the
 * history. Without a readable state (the first run, a corrupt one: result->note says which) it
 * reads every commit and lists every object, and deletes the same. Writes one new state object
 * create-only: of two concurrent runs one fails with NDS_ECONFLICT, having deleted nothing new.
 * Thread: any. @return 0, NDS_EINVAL (no keep rule), NDS_ECONFLICT (another run), or a store error
 */
NDS_API int nds_versioned_gc(nds_kvstore *kv, const nds_gc_options *opts, nds_gc_result *out);

#ifdef __cplusplus
}
#endif
#endif
