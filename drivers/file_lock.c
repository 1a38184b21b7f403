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

/* NDS_FILE_LOCK_STALE_S and NDS_FILE_LOCK_WAIT_S, unless a test changed them. */
static atomic_int g_stale_s = NDS_FILE_LOCK_STALE_S, g_wait_s = NDS_FILE_LOCK_WAIT_S;

void nds_file_lock_set_limits(int stale_s, int wait_s) {
    atomic_store(&g_stale_s, stale_s);
    atomic_store(&g_wait_s, wait_s);
}

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

/* Unlinks name from dirfd if it still names the file (dev, ino). */
static void unlink_if_same(int dirfd, const char *name, dev_t dev, ino_t ino) {
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == dev &&
        st.st_ino == ino)
        unlinkat(dirfd, name, 0);
}

/* One attempt with ofd or flock.
 * @return 0 locked, 1 retry (file replaced or mode downgraded), or an error */
static int lock_fd_attempt(nds_file_lock *lk, int dirfd, const char *name, const char *path,
                           atomic_int *mode, int m) {
    int fd = openat(dirfd, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
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
            unlink_if_same(dirfd, name, mine.st_dev, mine.st_ino);
        close(fd);
        atomic_compare_exchange_strong(mode, &m, m + 1);
        return 1;
    }
    /* The previous holder may have unlinked the file between our open and our lock: then we hold a
     * lock on an orphan and must start over with the file now at the path. */
    if (fstatat(dirfd, name, &now, AT_SYMLINK_NOFOLLOW) != 0 || !same_file(&mine, &now)) {
        close(fd);
        return 1;
    }
    lk->fd = fd;
    lk->dev = mine.st_dev;
    lk->ino = mine.st_ino;
    return 0;
}

/* ---- dir: flock on the key's directory ---- */

/* One attempt with dir: flock of the caller's descriptor of the directory (its own open file
 * description, so it excludes other threads of this process too). The caller then works in that
 * directory through the same descriptor, so no check of the directory's path is needed.
 * @return 0 locked, 1 retry (mode downgraded), or an error */
static int lock_dir_attempt(nds_file_lock *lk, int dirfd, const char *path, atomic_int *mode,
                            int m) {
    int err = lock_fd(dirfd, NDS_FILE_LOCK_FLOCK);
    if (err != 0 && lock_unsupported(err)) {
        atomic_compare_exchange_strong(mode, &m, m + 1);
        return 1;
    }
    if (err != 0)
        return lock_errno(err, "take", path);
    lk->fd = dirfd;
    lk->on_dir = 1;
    return 0;
}

/* ---- O_EXCL lock files ---- */

/* 1 when the lock file open as fd (status st) is abandoned. An mtime far in the future is no
 * live holder's (it stamps the file as it makes it): judged by the distance from now either way,
 * so neither a clock step nor a hostile timestamp makes a lock file last forever. */
static bool excl_is_stale(int fd, const struct stat *st) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    long long age = (long long)now.tv_sec - (long long)st->st_mtim.tv_sec;
    int stale_s = atomic_load(&g_stale_s);
    if (age > stale_s || age < -stale_s)
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

/* Removes the stale lock file known as (dev, ino) from name in dirfd. It is renamed aside first, so
 * that of several processes stealing it at once only one removes it, and none removes a fresh lock
 * file made in the meantime (one taken by mistake is put back). */
static void excl_steal(int dirfd, const char *name, dev_t dev, ino_t ino) {
    char *aside = nds_asprintf("%s.__tmp.%d.%016llx", name, (int)getpid(),
                               (unsigned long long)nds_random_u64());
    if (!aside)
        return;
    struct stat st;
    if (renameat(dirfd, name, dirfd, aside) == 0 &&
        fstatat(dirfd, aside, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (st.st_dev != dev || st.st_ino != ino) {
            if (renameat2(dirfd, aside, dirfd, name, RENAME_NOREPLACE) == 0) {
                free(aside);
                return;
            }
            if (linkat(dirfd, aside, dirfd, name, 0) != 0) { /* a new lock exists already */
            }
        }
        unlinkat(dirfd, aside, 0);
    }
    free(aside);
}

/* Inspects the existing lock file name in dirfd and steals it when abandoned.
 * @return 0 or an errno */
static int excl_check(int dirfd, const char *name) {
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    struct stat st;
    if (fd < 0 && errno == ELOOP) { /* a link is no one's lock: moved aside, not followed */
        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
            excl_steal(dirfd, name, st.st_dev, st.st_ino);
        return 0;
    }
    if (fd < 0)
        return errno == ENOENT ? 0 : errno;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return e;
    }
    bool stale = excl_is_stale(fd, &st);
    close(fd);
    if (stale)
        excl_steal(dirfd, name, st.st_dev, st.st_ino);
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
static int excl_create(int dirfd, const char *name) {
    char *tmp = nds_asprintf("%s.__tmp.%d.%016llx", name, (int)getpid(),
                             (unsigned long long)nds_random_u64());
    if (!tmp)
        return -ENOMEM;
    int fd = openat(dirfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    int err = fd < 0 ? errno : excl_write_record(fd);
    if (err == 0 && linkat(dirfd, tmp, dirfd, name, 0) != 0)
        err = errno;
    if (fd >= 0)
        unlinkat(dirfd, tmp, 0);
    free(tmp);
    if (err == 0)
        return fd;
    if (fd >= 0)
        close(fd);
    if (!link_unsupported(err))
        return -err;
    fd = openat(dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0)
        return -errno;
    if ((err = excl_write_record(fd)) != 0) {
        unlinkat(dirfd, name, 0);
        close(fd);
        return -err;
    }
    return fd;
}

/* The error of a wait for an excl lock file that went on too long, quoting its owner record. */
static int excl_timeout(int dirfd, const char *name, const char *path, int waited_s) {
    char rec[128] = "";
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    ssize_t n = fd >= 0 ? pread(fd, rec, sizeof rec - 1, 0) : -1;
    if (fd >= 0)
        close(fd);
    rec[n > 0 ? n : 0] = '\0';
    rec[strcspn(rec, "\n")] = '\0';
    for (char *p = rec; *p; p++)
        if ((unsigned char)*p < ' ' || *p == '"')
            *p = '?';
    return nds_err(NDS_ETIMEOUT,
                   "file: lock %s: still held after %d s (owner record \"%s\"); remove the file "
                   "if no ndstore process is writing this store",
                   path, waited_s, rec);
}

static int lock_excl(nds_file_lock *lk, int dirfd, const char *name, const char *path) {
    uint64_t delay = 50 * 1000;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int fd = excl_create(dirfd, name);
        struct stat st;
        if (fd >= 0 && fstat(fd, &st) == 0) {
            lk->fd = fd;
            lk->dev = st.st_dev;
            lk->ino = st.st_ino;
            return 0;
        }
        if (fd >= 0) { /* cannot identify our own lock file: give it up */
            int err = errno;
            unlinkat(dirfd, name, 0);
            close(fd);
            return lock_errno(err, "stat", path);
        }
        if (fd == -EINTR)
            continue;
        if (fd == -ENOENT || fd == -ENOTDIR)
            return NDS_ENOTFOUND;
        if (fd != -EEXIST)
            return lock_errno(-fd, "create", path);
        int err = excl_check(dirfd, name);
        if (err != 0)
            return lock_errno(err, "inspect", path);
        clock_gettime(CLOCK_MONOTONIC, &now);
        int wait_s = atomic_load(&g_wait_s);
        if (now.tv_sec - t0.tv_sec >= wait_s)
            return excl_timeout(dirfd, name, path, wait_s);
        /* Jittered exponential backoff while a live holder has it. */
        nds_sleep_ns(delay / 2 + nds_random_u64() % delay);
        delay = nds_min_u64(delay * 2, EXCL_MAX_DELAY_NS);
    }
}

int nds_file_lock_acquire(nds_file_lock *lk, int dirfd, const char *name, const char *path,
                          atomic_int *mode) {
    lk->fd = -1;
    lk->on_dir = 0;
    for (;;) {
        int m = atomic_load(mode);
        if (m >= NDS_FILE_LOCK_EXCL)
            return lock_excl(lk, dirfd, name, path);
        int rc = m == NDS_FILE_LOCK_DIR ? lock_dir_attempt(lk, dirfd, path, mode, m)
                                        : lock_fd_attempt(lk, dirfd, name, path, mode, m);
        if (rc != 1)
            return rc;
    }
}

void nds_file_lock_release(nds_file_lock *lk, int dirfd, const char *name) {
    if (lk->fd < 0)
        return;
    if (lk->on_dir) { /* the caller's descriptor: unlock, the caller closes it */
        flock(lk->fd, LOCK_UN);
        lk->fd = -1;
        return;
    }
    /* Unlinking while still holding the lock: acquirers re-check the name's inode after locking. */
    unlink_if_same(dirfd, name, lk->dev, lk->ino);
    close(lk->fd);
    lk->fd = -1;
}
