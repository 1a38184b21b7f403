/* Exclusive per-key locks for the file kvstore driver (drivers/kv_file.c).
 *
 * A key's lock is named "<key>.__lock" in the key's directory, which the caller has open: every
 * lock file is made, inspected, renamed and removed relative to that descriptor, never by a path
 * that could lead out of the store. Four mechanisms, tried in this order by
 * NDS_FILE_LOCK_AUTO (each falls back to the next when the filesystem refuses it):
 *   dir   - flock(LOCK_EX) on the key's directory itself: no lock file at all. It excludes every
 *           writer of that directory, but only for a lock's short section (a stat and a rename, which
 *           the kernel serialises per directory anyway). Creating and unlinking a lock file per
 *           write cost two inode allocations' worth of work, under the directory's lock, per chunk:
 *           on ext4 a third of a write's CPU time (docs/performance.md);
 *   ofd   - an open-file-description lock (fcntl F_OFD_SETLKW) on the lock file: excludes other
 *           threads and processes alike;
 *   flock - flock(LOCK_EX) on the lock file, also per open file description;
 *   excl  - creating the lock file exclusively: a fully written temp file is hard-linked to the
 *           path (or, where links are refused, the path is created with O_EXCL). It holds one line
 *           "pid=<pid> host=<hostname> boot=<boot id>\n". A lock file whose owner is gone (same
 *           host and boot, no such pid), or whose mtime is more than NDS_FILE_LOCK_STALE_S seconds
 *           away from now (in the past, or in the future: no live holder stamps one there), is
 *           stolen. A waiter gives up after NDS_FILE_LOCK_WAIT_S seconds with NDS_ETIMEOUT and a
 *           message naming the lock file.
 * With dir, the lock is on the caller's descriptor of the directory, and the caller works in that
 * directory through the same descriptor, so a directory removed and made again meanwhile cannot
 * mislead it. With ofd and flock the holder unlinks the lock file while still holding
 * the lock, and an acquirer checks, once locked, that the path still names the inode it locked
 * (else it retries): the standard pattern that makes removing lock files safe. Every process using
 * one store must use the same mechanism; the environment variable NDS_FILE_LOCK ("dir", "ofd",
 * "flock", "excl"; unset or "auto" = auto), read when a file kvstore is opened, forces one (a test
 * hook, and a way out on odd filesystems).
 *
 * Threading: a nds_file_lock is used by one thread; the mode word is shared by a driver instance
 * and only ever downgraded (atomically) when a mechanism turns out to be unsupported.
 */
#ifndef NDS_DRIVERS_FILE_LOCK_H
#define NDS_DRIVERS_FILE_LOCK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <sys/types.h>

/** Lock file mechanisms (values of the shared mode word). */
enum {
    NDS_FILE_LOCK_DIR = 0,
    NDS_FILE_LOCK_OFD = 1,
    NDS_FILE_LOCK_FLOCK = 2,
    NDS_FILE_LOCK_EXCL = 3,
    NDS_FILE_LOCK_AUTO = NDS_FILE_LOCK_DIR /* auto starts at dir and downgrades on refusal */
};

/** Age after which an O_EXCL lock file is considered abandoned whatever its owner record says (a
 *  lock file dated further than this in the future is abandoned too). */
#define NDS_FILE_LOCK_STALE_S 30
/** Longest wait for an O_EXCL lock file: a lock is held for a stat and a rename, and an abandoned
 *  one is stolen within NDS_FILE_LOCK_STALE_S, so a wait this long means it cannot be taken. */
#define NDS_FILE_LOCK_WAIT_S 120

/** A held lock. */
typedef struct nds_file_lock {
    int fd; /**< the open lock file, or the caller's directory with dir (-1 when not held) */
    dev_t dev; /**< identity of the locked file, to unlink only our own */
    ino_t ino;
    int on_dir; /**< 1 when fd is the key's directory (dir: nothing to unlink nor close) */
} nds_file_lock;

/**
 * Reads NDS_FILE_LOCK. @return the mode (NDS_FILE_LOCK_*), or -1 for an unknown value (the caller
 * reports it as NDS_EINVAL).
 */
int nds_file_lock_mode_from_env(void);

/**
 * Takes the exclusive lock name (a "<key>.__lock" file) in the directory open as dirfd (O_RDONLY),
 * waiting while another holder has it (with excl, at most NDS_FILE_LOCK_WAIT_S seconds). path is
 * the lock file's full path, for messages. *mode is the instance's mechanism; it is downgraded when
 * the filesystem refuses the current one.
 * @return 0; NDS_ENOTFOUND (no message set) when the directory has been removed; or an error
 */
int nds_file_lock_acquire(nds_file_lock *lk, int dirfd, const char *name, const char *path,
                          atomic_int *mode);

/** Unlinks name from dirfd (when it is still our lock file) and releases the lock. Accepts a lock
 *  not held. */
void nds_file_lock_release(nds_file_lock *lk, int dirfd, const char *name);

/** Test hook: overrides NDS_FILE_LOCK_STALE_S and NDS_FILE_LOCK_WAIT_S for this process. */
void nds_file_lock_set_limits(int stale_s, int wait_s);

#endif
