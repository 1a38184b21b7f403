/* Transactions: writes to one or more arrays (and raw keys) staged in memory and committed together.
 *
 * Inside a transaction, array writes (nds_io_options.txn) are staged per chunk: the written elements and a
 * mask of which elements were written. Reads through the same transaction see its staged writes over what
 * is stored; nobody else sees them before commit.
 *
 * - NDS_TXN_ISOLATED: commit applies each staged chunk with the per-chunk optimistic protocol (read the
 *   stored chunk and its generation, merge the staged elements, write only if the generation is unchanged,
 *   else retry). No update is lost and no chunk is torn, but a crash mid-commit can leave some chunks
 *   committed and others not.
 * - NDS_TXN_ATOMIC: commit writes every staged chunk and key of every array in one multi-key conditional
 *   commit of the kvstore driver (memory, lmdb): all become visible, or none. Every chunk is conditional on
 *   the generation read, so a concurrent change makes the commit re-read, re-merge and retry. On a driver
 *   without multi-key commit (file), or when the writes span several stores, commit fails before writing
 *   anything, saying why.
 *
 * Arrays opened inside a transaction (nds_open_options.txn) see the store through it: creating their
 * metadata, resize, attribute changes and all their writes are staged too, so one atomic transaction can
 * create a whole checkpoint (several arrays, their chunks and a marker) that appears all at once. Staged
 * metadata writes keep their conditions (create-only, if_equal): the commit re-checks them, and a metadata
 * key someone else changed meanwhile fails the commit with NDS_ECONFLICT (nothing written in atomic mode).
 *
 * A transaction is used by one thread at a time (its array writes may still run on the pool). The arrays
 * and kvstores it touches must stay open until it is committed, aborted or freed. After a failed commit or
 * a failed staging call the transaction is poisoned: every call but abort/free returns NDS_EPOISONED.
 */
#ifndef NDSTORE_TXN_H
#define NDSTORE_TXN_H

#include <stddef.h>
#include "ndstore/version.h"
#include "ndstore/kvstore.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nds_txn nds_txn;

typedef enum nds_txn_mode {
    NDS_TXN_ISOLATED = 1, /**< per-chunk isolated commit */
    NDS_TXN_ATOMIC = 2    /**< all-or-nothing commit (driver multi-key commit) */
} nds_txn_mode;

#define NDS_TXN_OPTIONS_VERSION 1
/** Options of nds_txn_begin. Start from NDS_TXN_OPTIONS_INIT. */
typedef struct nds_txn_options {
    int version;
    nds_txn_mode mode;
    size_t memory_limit; /**< bytes the staged data may take; 0 = 1 GiB. Exceeding it is NDS_ELIMIT. */
} nds_txn_options;
#define NDS_TXN_OPTIONS_INIT {NDS_TXN_OPTIONS_VERSION, NDS_TXN_ISOLATED, 0}

/** Starts a transaction. opts may be NULL (isolated, 1 GiB). Free with nds_txn_free. */
NDS_API int nds_txn_begin(nds_txn **out, const nds_txn_options *opts);
/**
 * Commits every staged write. @return 0; NDS_EUNSUPPORTED (atomic on a store without multi-key commit, or
 * across stores: nothing written); NDS_ECONFLICT (still conflicting after the retries: nothing written in
 * atomic mode); NDS_EPOISONED; or the storage error. Afterwards the transaction accepts only free.
 */
NDS_API int nds_txn_commit(nds_txn *t);
/** Discards every staged write. Afterwards the transaction accepts only free. */
NDS_API void nds_txn_abort(nds_txn *t);
/** Aborts (if still open) and frees. Accepts NULL. */
NDS_API void nds_txn_free(nds_txn *t);
/** Bytes of staged data held now. */
NDS_API size_t nds_txn_memory(const nds_txn *t);
/** Stages a raw key write (e.g. a commit marker), applied with the transaction's commit (unconditional). */
NDS_API int nds_txn_write_key(nds_txn *t, nds_kvstore *kv, const char *key, const void *data, size_t len);

/**
 * Prepares the transaction instead of committing it, on a versioned store (URL|versioned:): every
 * staged write is stored where no reader sees it (chunks written whole are encoded; chunks written
 * in part keep their elements and mask, to be merged at commit) and *token (malloc'd text, free
 * with nds_free) names the prepared part. Nothing is visible until nds_txn_commit_prepared commits
 * it. Afterwards the transaction accepts only free. NDS_EUNSUPPORTED on other stores.
 */
NDS_API int nds_txn_prepare(nds_txn *t, char **token);
/**
 * Commits prepared parts (tokens from any processes, nds_txn_prepare) as one version of the
 * versioned store kv is on: readers see every part or none. Parts are applied in token order; the
 * chunks several parts wrote in part are merged element by element onto the chunk as the version
 * holds it (so no part's elements are lost, whatever the order); arrays several parts created
 * identically are created once. message and metadata (JSON object text) are recorded with the
 * version; either may be NULL. @return 0; NDS_EINVAL for a token already committed or unknown
 * (NDS_ENOTFOUND); NDS_ECONFLICT when a part's condition (e.g. an array created differently) fails
 * (nothing written); or the storage error.
 */
NDS_API int nds_txn_commit_prepared(nds_kvstore *kv, const char *const *tokens, size_t n,
                                    const char *message, const char *metadata);

#ifdef __cplusplus
}
#endif
#endif
