/* What the lmdb kvstore driver's files share: drivers/kv_lmdb.c (spec, read, write, commit,
 * stage and publish, the driver table) and drivers/lmdb_list.c (list and delete_range) both call
 * drivers/lmdb_txn.c (fork check, stored keys, write transactions), which calls lmdb_env.c (the
 * environment table, the map and the guard against corrupt files). Calls run one way. */
#ifndef NDS_DRIVERS_LMDB_INTERNAL_H
#define NDS_DRIVERS_LMDB_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include <lmdb.h>

#include "ndstore/sys/kv_driver.h"
#include "lmdb_env.h"

#define LM_HDR 8           /* generation number in front of each value */
#define LM_LIST_BATCH 1024 /* keys copied per read transaction while listing */

/** One instance (nds_kvstore_open of an lmdb spec). */
typedef struct lm_state {
    nds_lmdb_env *e;
    char *env_text;  /* the environment as the spec names it, without trailing '/' */
    char *strip;     /* env_text + "/": full keys starting with it are env-relative */
    size_t strip_len;
    char *url_base;  /* "lmdb://" (absolute paths) or "lmdb://<env>/" (env-relative paths) */
} lm_state;

/* Work done inside one write transaction: returns an LMDB code (the transaction is aborted unless
 * 0) and sets *status to an NDS code when it decides to abort on its own (a failed condition). */
typedef int (*lm_txn_fn)(lm_state *s, MDB_txn *txn, void *ctx, int *status);

/* lmdb_txn.c */
/** NDS_EUNSUPPORTED when the instance was opened by the parent of a fork (LMDB forbids its use). */
int nds_lmdb_check_process(const lm_state *s);
/** The stored key for a full key (env-relative when it starts with "<env>/"). */
const char *nds_lmdb_rel(const lm_state *s, const char *full);
/** memcmp order then length: LMDB's own key order (= strcmp order for strings). */
int nds_lmdb_cmp(const MDB_val *k, const char *s);
/** Runs fn in a write transaction under a guard and commits it; grows the map and starts over on
 *  MDB_MAP_FULL. op and key name the work in errors. */
int nds_lmdb_write_txn(lm_state *s, lm_txn_fn fn, void *ctx, const char *op, const char *key);

/* lmdb_list.c: the driver's list and delete_range methods. */
int nds_lmdb_list(void *state, const char *prefix, nds_list_fn fn, void *ctx);
int nds_lmdb_delete_range(void *state, const char *begin, const char *end);

#endif
