/* Exclusive per-key lock files for the file kvstore driver; see file_lock.h for the protocol.
 *
 * Omits shared (reader) locks: readers never lock, since values are replaced by rename, never
 * modified. Threading: any thread; the only shared state is the instance's mode word and a
 * once-initialised record of this host's name and boot id. Residual risk of the excl mechanism
 * (documented in docs/kvstores.md): stealing a stale lock is a rename aside followed by an identity
 * check, and a lock taken by mistake is put back, but a third acquirer landing in that microsecond
 * window can proceed alongside its owner.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "file_lock.h"
#include "file_sync.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ndstore/errors.h"
#include "internal/error.h"
#include "internal/util.h"

/* Longest wait between two O_EXCL attempts. */
#define EXCL_MAX_DELAY_NS (20 * 1000 * 1000ull)

/* This host's identity for O_EXCL owner records, read once. */
static struct {
    pthread_once_t once;
    char host[256];
    char boot[64];
} g_ident = {PTHREAD_ONCE_INIT, "", ""};

static void ident_init(void) {
    if (gethostname(g_ident.host, sizeof g_ident.host - 1) != 0)
        g_ident.host[0] = '\0';
    /* Spaces would break the record's parsing. */
    for (char *p = g_ident.host; *p; p++)
        if (*p == ' ' || *p == '\n')
            *p = '_';
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
    if (f) {
        if (!fgets(g_ident.boot, sizeof g_ident.boot, f))
            g_ident.boot[0] = '\0';
        g_ident.boot[strcspn(g_ident.boot, "\n ")] = '\0';
        fclose(f);
    }
}

int nds_file_lock_mode_from_env(void) {
    const char *v = getenv("NDS_FILE_LOCK");
    if (!v || !*v || strcmp(v, "auto") == 0 || strcmp(v, "dir") == 0)
        return NDS_FILE_LOCK_DIR;
    if (strcmp(v, "ofd") == 0)
        return NDS_FILE_LOCK_OFD;
    if (strcmp(v, "flock") == 0)
        return NDS_FILE_LOCK_FLOCK;
    if (strcmp(v, "excl") == 0)
        return NDS_FILE_LOCK_EXCL;
    return -1;
}

static int lock_errno(int err, const char *what, const char *path) {
    return nds_err_errno(err, "file: %s lock %s", what, path);
}

/* errno values with which a filesystem says it has no such lock. */
static bool lock_unsupported(int err) {
    return err == EINVAL || err == ENOLCK || err == EOPNOTSUPP || err == ENOSYS;
}

/* Blocks until fd holds an exclusive lock of the given mechanism. @return 0 or an errno */
static int lock_fd(int fd, int mode) {
    for (;;) {
        int r;
        if (mode == NDS_FILE_LOCK_OFD) {
            struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
            r = fcntl(fd, F_OFD_SETLKW, &fl);
        } else {
            r = flock(fd, LOCK_EX);
        }
        if (r == 0)
            return 0;
        if (errno != EINTR)
            return errno;
    }
}

static bool same_file(const struct stat *a, const struct stat *b) {
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* Unlinks path if it still names the file (dev, ino). */
static void unlink_if_same(const char *path, dev_t dev, ino_t ino) {
    struct stat st;
    if (stat(path, &st) == 0 && st.st_dev == dev && st.st_ino == ino)
        unlink(path);
}

/* One attempt with ofd or flock.
 * @return 0 locked, 1 retry (file replaced or mode downgraded), or an error */
static int lock_fd_attempt(nds_file_lock *lk, const char *path, atomic_int *mode, int m) {
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) {
        if (errno == EINTR)
            return 1;
        if (errno == ENOENT || errno == ENOTDIR)
            return NDS_ENOTFOUND;
        return lock_errno(errno, "open", path);
    }
    struct stat mine, now;
    int err = lock_fd(fd, m);
    if (err == 0 && fstat(fd, &mine) != 0)
        err = errno;
    if (err != 0) {
        if (!lock_unsupported(err)) {
            close(fd);
            return lock_errno(err, "take", path);
        }
        /* Remove the empty file so the next mechanism (perhaps O_EXCL) does not mistake it for a
         * lock. */
        if (fstat(fd, &mine) == 0)
            unlink_if_same(path, mine.st_dev, mine.st_ino);
        close(fd);
        atomic_compare_exchange_strong(mode, &m, m + 1);
        return 1;
    }
    /* The previous holder may have unlinked the file between our open and our lock: then we hold a
     * lock on an orphan and must start over with the file now at the path. */
    if (stat(path, &now) != 0 || !same_file(&mine, &now)) {
        close(fd);
        return 1;
    }
    lk->fd = fd;
    lk->dev = mine.st_dev;
    lk->ino = mine.st_ino;
    return 0;
}

/* ---- dir: flock on the key's directory ---- */

/* One attempt with dir. @return 0 locked, 1 retry (directory replaced or mode downgraded), or an
 * error */
static int lock_dir_attempt(nds_file_lock *lk, const char *path, atomic_int *mode, int m) {
    char *dir = nds_file_dir_of(path);
    if (!dir)
        return nds_err(NDS_ENOMEM, "file: out of memory locking %s", path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;
    struct stat mine, now;
    if (fd < 0) {
        rc = errno == EINTR                       ? 1
             : errno == ENOENT || errno == ENOTDIR ? NDS_ENOTFOUND
                                                   : lock_errno(errno, "open directory to", path);
    } else {
        int err = lock_fd(fd, NDS_FILE_LOCK_FLOCK);
        if (err == 0 && fstat(fd, &mine) != 0)
            err = errno;
        if (err != 0 && lock_unsupported(err))
            atomic_compare_exchange_strong(mode, &m, m + 1);
        rc = err == 0 ? 0 : lock_unsupported(err) ? 1 : lock_errno(err, "take", path);
        /* Removed (and perhaps made again) between our open and our lock: start over. */
        if (rc == 0 && (stat(dir, &now) != 0 || !same_file(&mine, &now)))
            rc = 1;
    }
    free(dir);
    if (rc != 0) {
        if (fd >= 0)
            close(fd);
        return rc;
    }
    lk->fd = fd;
    lk->dev = mine.st_dev;
    lk->ino = mine.st_ino;
    lk->on_dir = 1;
    return 0;
}

/* ---- O_EXCL lock files ---- */

/* 1 when the lock file open as fd (status st) is abandoned. */
static bool excl_is_stale(int fd, const struct stat *st) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    if (now.tv_sec - st->st_mtim.tv_sec > NDS_FILE_LOCK_STALE_S)
        return true;
    char rec[512], host[256], boot[64];
    ssize_t n = pread(fd, rec, sizeof rec - 1, 0);
    if (n <= 0)
        return false; /* being written, or unreadable: only age decides */
    rec[n] = '\0';
    int pid;
    if (sscanf(rec, "pid=%d host=%255s boot=%63s", &pid, host, boot) != 3 || pid <= 0)
        return false;
    pthread_once(&g_ident.once, ident_init);
    /* The pid means something only on this host in this boot. */
    if (strcmp(host, g_ident.host) != 0 || strcmp(boot, g_ident.boot) != 0)
        return false;
    return kill(pid, 0) != 0 && errno == ESRCH;
}

/* Removes the stale lock file known as (dev, ino) from path. It is renamed aside first, so that of
 * several processes stealing it at once only one removes it, and none removes a fresh lock file
 * made in the meantime (one taken by mistake is put back). */
static void excl_steal(const char *path, dev_t dev, ino_t ino) {
    char *aside = nds_asprintf("%s.__tmp.%d.%016llx", path, (int)getpid(),
                               (unsigned long long)nds_random_u64());
    if (!aside)
        return;
    struct stat st;
    if (rename(path, aside) == 0 && stat(aside, &st) == 0) {
        if (st.st_dev != dev || st.st_ino != ino) {
            if (renameat2(AT_FDCWD, aside, AT_FDCWD, path, RENAME_NOREPLACE) == 0) {
                free(aside);
                return;
            }
            if (link(aside, path) != 0) { /* a new lock exists already: nothing better to do */
            }
        }
        unlink(aside);
    }
    free(aside);
}

/* Inspects the existing lock file at path and steals it when abandoned. @return 0 or an errno */
static int excl_check(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : errno;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return e;
    }
    bool stale = excl_is_stale(fd, &st);
    close(fd);
    if (stale)
        excl_steal(path, st.st_dev, st.st_ino);
    return 0;
}

/* Writes the owner record into a lock file being created. @return 0 or an errno */
static int excl_write_record(int fd) {
    pthread_once(&g_ident.once, ident_init);
    char rec[400];
    int n = snprintf(rec, sizeof rec, "pid=%d host=%s boot=%s\n", (int)getpid(),
                     g_ident.host[0] ? g_ident.host : "-", g_ident.boot[0] ? g_ident.boot : "-");
    return write(fd, rec, (size_t)n) == n ? 0 : (errno ? errno : EIO);
}

static bool link_unsupported(int err) {
    return err == EPERM || err == EOPNOTSUPP || err == ENOSYS || err == EMLINK || err == EXDEV;
}

/* Publishes a lock file complete with its record: written under a temp name, then hard-linked to
 * path (which fails if path exists), so a crash never leaves a lock file without an owner. Where
 * hard links are refused, falls back to O_EXCL creation of path itself, then the record.
 * @return the open fd, -EEXIST when another holder has it, or another -errno */
static int excl_create(const char *path) {
    char *tmp = nds_asprintf("%s.__tmp.%d.%016llx", path, (int)getpid(),
                             (unsigned long long)nds_random_u64());
    if (!tmp)
        return -ENOMEM;
    int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    int err = fd < 0 ? errno : excl_write_record(fd);
    if (err == 0 && link(tmp, path) != 0)
        err = errno;
    if (fd >= 0)
        unlink(tmp);
    free(tmp);
    if (err == 0)
        return fd;
    if (fd >= 0)
        close(fd);
    if (!link_unsupported(err))
        return -err;
    fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0)
        return -errno;
    if ((err = excl_write_record(fd)) != 0) {
        unlink(path);
        close(fd);
        return -err;
    }
    return fd;
}

static int lock_excl(nds_file_lock *lk, const char *path) {
    uint64_t delay = 50 * 1000;
    for (;;) {
        int fd = excl_create(path);
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) == 0) {
            lk->fd = fd;
            lk->dev = st.st_dev;
            lk->ino = st.st_ino;
            return 0;
        }
        if (fd >= 0) { /* cannot identify our own lock file: give it up */
            int err = errno;
            unlink(path);
            close(fd);
            return lock_errno(err, "stat", path);
        }
        if (fd == -EINTR)
            continue;
        if (fd == -ENOENT || fd == -ENOTDIR)
            return NDS_ENOTFOUND;
        if (fd != -EEXIST)
            return lock_errno(-fd, "create", path);
        int err = excl_check(path);
        if (err != 0)
            return lock_errno(err, "inspect", path);
        /* Jittered exponential backoff while a live holder has it. */
        nds_sleep_ns(delay / 2 + nds_random_u64() % delay);
        delay = nds_min_u64(delay * 2, EXCL_MAX_DELAY_NS);
    }
}

int nds_file_lock_acquire(nds_file_lock *lk, const char *path, atomic_int *mode) {
    lk->fd = -1;
    lk->on_dir = 0;
    for (;;) {
        int m = atomic_load(mode);
        if (m >= NDS_FILE_LOCK_EXCL)
            return lock_excl(lk, path);
        int rc = m == NDS_FILE_LOCK_DIR ? lock_dir_attempt(lk, path, mode, m)
                                        : lock_fd_attempt(lk, path, mode, m);
        if (rc != 1)
            return rc;
    }
}

void nds_file_lock_release(nds_file_lock *lk, const char *path) {
    if (lk->fd < 0)
        return;
    /* Unlinking while still holding the lock: acquirers re-check the path's inode after locking. */
    if (!lk->on_dir)
        unlink_if_same(path, lk->dev, lk->ino);
    close(lk->fd);
    lk->fd = -1;
}
