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
 * Corrupt files: LMDB trusts data.mdb. A file shorter than its meta pages say gives SIGBUS when a
 * page past its end is touched, a damaged page can make LMDB read past the page (SIGBUS, or SIGSEGV
 * past the map) or fail one of its assertions (which abort()s). So: the size is checked against
 * the meta pages on opening (nds_lmdb_check_size); every LMDB call that reads pages runs inside
 * nds_lmdb_guarded, which turns such a fault or assertion on its thread into NDS_ECORRUPT; and the
 * driver checks what LMDB hands out (values inside the map, keys of a listing strictly increasing)
 * before using it. See nds_lmdb_guarded for what a caught fault leaves behind.
 *
 * Errors: nds_lmdb_err is the one place LMDB codes become NDS_E* statuses (cause NDS_CAUSE_MDB).
 * Threading: every function may be called from any thread.
 */
#ifndef NDS_DRIVERS_LMDB_ENV_H
#define NDS_DRIVERS_LMDB_ENV_H

#include <pthread.h>
#include <stdatomic.h>
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
    const char *map_addr; /* where the map starts (also read, unlocked, by the fault handler) */
    _Atomic uint64_t file_size; /* data.mdb's size as last seen (nds_lmdb_check_val) */
    int active;          /* transactions + zero-copy reads of this process using the map */
    bool resizing;       /* a resize waits for active == 0: new users wait for it */
    bool broken;         /* a write transaction met corruption: no more writes (see guarded) */
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

/**
 * Runs fn(arg) so that a SIGBUS on the map, a SIGSEGV just past it (or near NULL, where a damaged
 * node flag sends LMDB), or a failed LMDB assertion on
 * this thread while it runs ends fn early instead of the process: the thread jumps back here
 * (siglongjmp) and the call returns NDS_ECORRUPT ("lmdb: <what> in <env>: data.mdb is corrupt:
 * ..."). Faults elsewhere, or on other threads, go to the handler that was installed before.
 *
 * What a caught fault leaves: fn's frames are abandoned mid-way, so fn must keep everything it
 * must release (transaction, cursor) where its caller finds it, and the caller may only release
 * them (mdb_cursor_close, mdb_txn_abort) and never call into that transaction again. A read-only
 * transaction holds no lock while LMDB reads pages and reading changes no shared state, so that is
 * all it takes. A write transaction may have been cut in the middle of updating LMDB's own
 * structures: after the abort the caller marks the environment broken (nds_lmdb_mark_broken) and
 * it takes no more writes in this process (NDS_ECORRUPT); reads go on. Guards nest.
 * @return fn's result or NDS_ECORRUPT
 */
int nds_lmdb_guarded(nds_lmdb_env *e, int (*fn)(void *arg), void *arg, const char *what);
/** After a write transaction was cut short by a guard: refuse further writes. */
void nds_lmdb_mark_broken(nds_lmdb_env *e);

/** NDS_ECORRUPT when data.mdb is shorter than (last page + 1) * page size of its newest meta page
 *  (a truncated file, whose missing pages would raise SIGBUS). @return 0 or NDS_ECORRUPT */
int nds_lmdb_check_size(nds_lmdb_env *e);

/** 0 when v (returned by a read of this process) lies inside the map and, when file_too, inside
 *  data.mdb (for bytes handed to the caller, read outside any guard; the size is looked up again
 *  only when v reaches past the size last seen, so a file truncated while open is caught by the
 *  guard, not here); NDS_ECORRUPT naming key otherwise. */
int nds_lmdb_check_val(nds_lmdb_env *e, const MDB_val *v, bool file_too, const char *key);

#endif
