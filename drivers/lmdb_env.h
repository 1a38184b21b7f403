/* The process-wide table of open LMDB environments, and their memory maps, for the lmdb kvstore
 * driver (drivers/kv_lmdb.c).
 *
 * LMDB allows one MDB_env per environment per process (a second one would drop the first one's
 * fcntl locks when closed), so every kvstore instance on a directory shares one refcounted
 * nds_lmdb_env, found by the directory's realpath. An environment opened by a process is never
 * used or closed by a child it forks: the child opens its own.
 *
 * The map: mdb_env_set_mapsize munmaps and maps again, so it may only run while no transaction of
 * this process uses the map. Every transaction and every outstanding zero-copy read is a "user"
 * (nds_lmdb_txn_begin ... nds_lmdb_use_end); a resize stops new users, waits up to 5 s for the
 * current ones to leave, remaps, and lets them in again. Resizes happen on MDB_MAP_FULL (doubling,
 * up to max_map) and on MDB_MAP_RESIZED (adopting the size another process set).
 *
 * Errors: nds_lmdb_err is the one place LMDB codes become NDS_E* statuses (cause NDS_CAUSE_MDB).
 * Threading: every function may be called from any thread.
 */
#ifndef NDS_DRIVERS_LMDB_ENV_H
#define NDS_DRIVERS_LMDB_ENV_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <lmdb.h>

#include "internal/error.h"

/** One open environment of this process, shared by every instance on it. */
typedef struct nds_lmdb_env {
    struct nds_lmdb_env *next; /* g_envs list (g_mu) */
    char *canon;         /* realpath of the directory: the table key */
    pid_t pid;           /* process that opened it; a forked child never touches it */
    int refs;            /* instances + outstanding zero-copy reads (g_mu) */
    MDB_env *env;
    MDB_dbi data, meta;
    uint64_t env_id;
    int max_key;         /* mdb_env_get_maxkeysize */
    size_t max_map;      /* immutable: growth stops here */
    pthread_mutex_t mu;  /* guards the members below */
    pthread_cond_t cv;   /* signalled when active drops to 0 or a resize ends */
    size_t map_size;     /* current map size of this process */
    int active;          /* transactions + zero-copy reads of this process using the map */
    bool resizing;       /* a resize waits for active == 0: new users wait for it */
} nds_lmdb_env;

typedef struct nds_lmdb_options {
    uint64_t map_size, max_map;
    int64_t max_readers;
    bool nosync;
} nds_lmdb_options;

/** Sets "lmdb: <formatted>: <mdb_strerror(rc)>" with rc as an NDS_CAUSE_MDB cause.
 *  @return the status rc maps to */
int nds_lmdb_err(int rc, const char *fmt, ...) NDS_PRINTF(2, 3);

/** Finds the environment at dir (creating the directory on demand) or opens it with o, and takes a
 *  reference. The first opener in a process sets the options; later opens share it as it is.
 *  Stale reader slots of dead processes are cleared on opening. @return 0 or an NDS_E* status */
int nds_lmdb_env_acquire(const char *dir, const nds_lmdb_options *o, nds_lmdb_env **out);
/** Takes one more reference (for a zero-copy read outliving its kvstore). */
void nds_lmdb_env_ref(nds_lmdb_env *e);
/** Drops a reference; the last one closes the environment. */
void nds_lmdb_env_release(nds_lmdb_env *e);

/** Begins a transaction (flags: MDB_RDONLY or 0) as a user of the map; *seen receives the map size
 *  it runs with. Adopts a map grown by another process; on MDB_READERS_FULL clears slots of dead
 *  processes and waits up to 1 s for a free one. On success end the transaction, then call
 *  nds_lmdb_use_end. @return 0 or an NDS_E* status */
int nds_lmdb_txn_begin(nds_lmdb_env *e, unsigned flags, MDB_txn **txn, size_t *seen);
/** Ends one use of the map (after the transaction ended). */
void nds_lmdb_use_end(nds_lmdb_env *e);
/** Doubles the map after MDB_MAP_FULL in a transaction that ran with map size seen (nothing to do
 *  when another thread already resized it). @return 0 (retry), or NDS_ELIMIT at max_map or when
 *  reads of this process kept holding the map */
int nds_lmdb_grow(nds_lmdb_env *e, size_t seen);

#endif
