/* Exclusive per-key locks for the file kvstore driver (drivers/kv_file.c).
 *
 * A key's lock is named by the path "<key>.__lock". Four mechanisms, tried in this order by
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
 *           host and boot, no such pid), or that is older than NDS_FILE_LOCK_STALE_S seconds, is
 *           stolen.
 * With dir, an acquirer checks once locked that the directory path still names the directory it
 * locked (else it retries). With ofd and flock the holder unlinks the lock file while still holding
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

/** Age after which an O_EXCL lock file is considered abandoned whatever its owner record says. */
#define NDS_FILE_LOCK_STALE_S 30

/** A held lock. */
typedef struct nds_file_lock {
    int fd; /**< the open lock file, or directory with dir (-1 when not held) */
    dev_t dev; /**< identity of the locked file, to unlink only our own */
    ino_t ino;
    int on_dir; /**< 1 when fd is the key's directory (dir: nothing to unlink) */
} nds_file_lock;

/**
 * Reads NDS_FILE_LOCK. @return the mode (NDS_FILE_LOCK_*), or -1 for an unknown value (the caller
 * reports it as NDS_EINVAL).
 */
int nds_file_lock_mode_from_env(void);

/**
 * Takes the exclusive lock at path (a "<key>.__lock" file), waiting as long as another holder
 * has it. *mode is the instance's mechanism; it is downgraded when the filesystem refuses the
 * current one.
 * @return 0; NDS_ENOTFOUND (no message set) when path's directory does not exist; or an error
 */
int nds_file_lock_acquire(nds_file_lock *lk, const char *path, atomic_int *mode);

/** Unlinks path (when it is still our lock file) and releases the lock. Accepts a lock not held. */
void nds_file_lock_release(nds_file_lock *lk, const char *path);

#endif
