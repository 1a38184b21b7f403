/* Writes and deletes of the file kvstore driver (the layout, locking and durability rules are in
 * drivers/kv_file.c's header): a value goes to a temp file next to its key, is fsynced and renamed
 * over the key under the key's lock when its condition still holds, and the directory is fsynced.
 * Two-phase writes split this: stage writes a temp file and starts its writeback; publish fsyncs a
 * batch of them back to back, renames each under its lock and condition, and fsyncs each directory
 * once. Everything after the key's directory is found (beneath the store root, file_root.c) goes
 * through one descriptor of that directory: temp file, stat, lock, rename, unlink, fsync.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "ndstore/sys/kv_driver.h"
#include "internal/error.h"
#include "internal/util.h"
#include "file_internal.h"
#include "file_lock.h"
#include "file_sync.h"

/* The current generation of name in dirfd (key, for messages) by fstatat: ABSENT when missing or
 * a directory; a symbolic link is refused (the store follows none). @return 0 or error */
static int file_stat_gen(file_state *s, int dirfd, const char *name, const char *key,
                         const char *op, nds_generation *g, struct stat *st) {
    if (fstatat(dirfd, name, st, AT_SYMLINK_NOFOLLOW) != 0) {
        if (errno != ENOENT && errno != ENOTDIR)
            return nds_file_err(errno, "stat", key);
        nds_file_gen_absent(g);
        return 0;
    }
    if (S_ISLNK(st->st_mode))
        return nds_file_path_err(&s->root, ELOOP, op, key);
    if (S_ISDIR(st->st_mode))
        nds_file_gen_absent(g);
    else
        nds_file_gen(st, g);
    return 0;
}

/* fsyncs the directory holding key, open as dirfd, so a rename or unlink in it is durable
 * (concurrent callers share one fsync: file_sync.h). @return 0 or an errno */
static int file_sync_parent_of(const char *key, int dirfd) {
    char *dir = nds_file_dir_of(key);
    if (!dir)
        return ENOMEM;
    int err = nds_file_sync_dir(dir, dirfd);
    free(dir);
    return err;
}

/* A new temp file's place: the key's directory (made when missing) and the temp file's name. */
typedef struct temp_file {
    int dirfd;        /* the key's directory */
    const char *name; /* the key's last component (inside the key) */
    char *tmp;        /* the temp file's name in dirfd */
    int fd;           /* the temp file, open for writing */
} temp_file;

static void temp_close(temp_file *t, bool unlink_tmp) {
    if (t->fd >= 0)
        close(t->fd);
    if (unlink_tmp && t->tmp && t->dirfd >= 0)
        unlinkat(t->dirfd, t->tmp, 0);
    if (t->dirfd >= 0)
        close(t->dirfd);
    free(t->tmp);
    *t = (temp_file){-1, NULL, NULL, -1};
}

/* Creates a new temp file next to key (creating parent directories). @return 0 or error */
static int file_create_temp(file_state *s, const char *key, temp_file *t) {
    *t = (temp_file){-1, NULL, NULL, -1};
    int err = 0;
    /* A concurrent delete_range may remove a directory we just made: retry a few times. */
    for (int attempt = 0; attempt < 16; attempt++) {
        int rc = nds_file_parent(s, key, "write", true, &t->dirfd, &t->name);
        if (rc != 0)
            return rc;
        t->tmp = nds_asprintf("%s%s%d.%016llx", t->name, TMP_MARK, (int)getpid(),
                              (unsigned long long)nds_random_u64());
        if (!t->tmp) {
            temp_close(t, false);
            return nds_err(NDS_ENOMEM, "file: write %s: out of memory", key);
        }
        t->fd = openat(t->dirfd, t->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                       0666);
        if (t->fd >= 0)
            return 0;
        err = errno;
        temp_close(t, false);
        if (err != EINTR && err != EEXIST && err != ENOENT) /* ENOENT: the directory was removed */
            break;
    }
    return nds_file_err(err, "create temp file for", key);
}

/* Writes all of iov[0..n) to fd, back to back (not synced). @return 0 or an errno */
static int file_writev_all(int fd, const struct iovec *iov, size_t n) {
    struct iovec cur[64];
    while (n > 0) {
        size_t k = n < 64 ? n : 64; /* within IOV_MAX */
        memcpy(cur, iov, k * sizeof *cur);
        size_t first = 0;
        while (first < k) {
            ssize_t w = writev(fd, cur + first, (int)(k - first));
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0)
                return errno;
            size_t done = (size_t)w;
            while (first < k && done >= cur[first].iov_len)
                done -= cur[first++].iov_len;
            if (first < k) {
                cur[first].iov_base = (uint8_t *)cur[first].iov_base + done;
                cur[first].iov_len -= done;
            }
            if (w == 0 && first < k)
                return EIO;
        }
        iov += k;
        n -= k;
    }
    return 0;
}

/* Large values are written in pieces of WRITEBACK_PIECE bytes, each handed to writeback as soon as
 * it is written (sync_file_range WRITE: asynchronous), so the disk writes piece k while the copy of
 * piece k + 1 runs and the final fsync waits for the last piece and the journal, not the whole value
 * (RocksDB's bytes_per_sync). Values below WRITEBACK_MIN go in one writev. */
#define WRITEBACK_PIECE ((size_t)8 << 20)
#define WRITEBACK_MIN ((size_t)16 << 20)

/* Writes iov[0..n) to fd in pieces of about WRITEBACK_PIECE, starting each piece's writeback.
 * @return 0 or an errno */
static int file_writev_pipelined(int fd, const struct iovec *iov, size_t n) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) total += iov[i].iov_len;
    if (total < WRITEBACK_MIN) return file_writev_all(fd, iov, n);
    struct iovec piece[64];
    size_t np = 0, bytes = 0, i = 0, used = 0; /* used: bytes of iov[i] already in pieces */
    off_t at = 0;
    while (i < n) {
        size_t take = iov[i].iov_len - used;
        if (take > WRITEBACK_PIECE - bytes) take = WRITEBACK_PIECE - bytes;
        piece[np++] = (struct iovec){(uint8_t *)iov[i].iov_base + used, take};
        bytes += take;
        used += take;
        if (used == iov[i].iov_len) i++, used = 0;
        if (bytes < WRITEBACK_PIECE && np < 64 && i < n) continue;
        int err = file_writev_all(fd, piece, np);
        if (err) return err;
        (void)sync_file_range(fd, at, (off_t)bytes, SYNC_FILE_RANGE_WRITE); /* a hint: fsync decides */
        at += (off_t)bytes;
        np = 0, bytes = 0;
    }
    return 0;
}

/* Writes all of data to fd (not synced). @return 0 or an errno */
static int file_write_all(int fd, const uint8_t *data, size_t len) {
    struct iovec one = {(void *)data, len};
    return file_writev_all(fd, &one, 1);
}

static bool mtime_after(const struct stat *a, const struct stat *b) {
    return a->st_mtim.tv_sec > b->st_mtim.tv_sec ||
           (a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec > b->st_mtim.tv_nsec);
}

/* Makes the new version's mtime later than the current one's (cur), in the smallest step the
 * filesystem keeps (1 ns, 1 us, 1 ms, 1 s), so generations of a key never repeat. Updates *st. */
static int file_bump_mtime(int fd, struct stat *st, const struct stat *cur) {
    for (long step = 1; !mtime_after(st, cur) && step <= 1000000000L; step *= 1000) {
        struct timespec ts[2] = {{0, UTIME_OMIT}, cur->st_mtim};
        ts[1].tv_nsec += step;
        if (ts[1].tv_nsec >= 1000000000L) {
            ts[1].tv_sec += ts[1].tv_nsec / 1000000000L;
            ts[1].tv_nsec %= 1000000000L;
        }
        if (futimens(fd, ts) != 0 || fstat(fd, st) != 0)
            return errno;
    }
    return 0;
}

/* The locked part of a write: re-check the condition, stamp, rename. Returns with the lock held. */
static int file_commit_temp(file_state *s, const char *key, const temp_file *t,
                            const nds_write_options *opts, nds_generation *new_gen) {
    struct stat cur, st;
    nds_generation cur_gen;
    int rc = file_stat_gen(s, t->dirfd, t->name, key, "write", &cur_gen, &cur);
    if (rc != 0)
        return rc;
    if (opts && !nds_generation_satisfies(&opts->if_equal, &cur_gen))
        return nds_err(NDS_ECONFLICT, "file: write %s: generation changed", key);
    int err = fstat(t->fd, &st) != 0 ? errno : 0;
    if (err == 0 && cur_gen.kind == NDS_GEN_VALUE)
        err = file_bump_mtime(t->fd, &st, &cur);
    if (err != 0)
        return nds_file_err(err, "stamp temp file for", key);
    if (renameat(t->dirfd, t->tmp, t->dirfd, t->name) != 0)
        return nds_file_err(errno, "rename onto", key);
    nds_file_gen(&st, new_gen);
    return 0;
}

/* Takes key's lock (in its directory dirfd, as name + LOCK_SUFFIX). */
static int file_lock_key(file_state *s, const char *key, int dirfd, const char *name,
                         nds_file_lock *lk, char **lock_name) {
    *lk = (nds_file_lock){-1, 0, 0, 0};
    char *lock_path = nds_asprintf("%s%s", key, LOCK_SUFFIX);
    *lock_name = nds_asprintf("%s%s", name, LOCK_SUFFIX);
    int rc = lock_path && *lock_name
                 ? nds_file_lock_acquire(lk, dirfd, *lock_name, lock_path, &s->lock_mode)
                 : nds_err(NDS_ENOMEM, "file: lock %s: out of memory", key);
    free(lock_path);
    return rc;
}

static void file_unlock_key(nds_file_lock *lk, int dirfd, char *lock_name) {
    if (lock_name)
        nds_file_lock_release(lk, dirfd, lock_name);
    free(lock_name);
}

/* Renames a fully written and synced temp file over key under the key's lock, if the key still
 * satisfies opts. The directory is not synced (the caller does). */
static int file_apply_temp(file_state *s, const char *key, const temp_file *t,
                           const nds_write_options *opts, nds_generation *new_gen) {
    nds_file_lock lk;
    char *lock_name;
    int rc = file_lock_key(s, key, t->dirfd, t->name, &lk, &lock_name);
    if (rc == NDS_ENOTFOUND)
        rc = nds_err(NDS_EIO, "file: write %s: directory vanished", key);
    if (rc == 0)
        rc = file_commit_temp(s, key, t, opts, new_gen);
    file_unlock_key(&lk, t->dirfd, lock_name);
    return rc;
}

static int file_put(file_state *s, const char *key, const struct iovec *iov, size_t iovcnt,
                    const nds_write_options *opts, nds_generation *new_gen) {
    temp_file t;
    int rc = file_create_temp(s, key, &t);
    if (rc != 0)
        return rc;
    int err = file_writev_pipelined(t.fd, iov, iovcnt);
    if (err == 0 && fsync(t.fd) != 0)
        err = errno;
    rc = err ? nds_file_err(err, "write temp file for", key) : 0;
    nds_generation gen;
    if (rc == 0)
        rc = file_apply_temp(s, key, &t, opts, &gen);
    if (rc == 0 && (err = file_sync_parent_of(key, t.dirfd)) != 0)
        rc = nds_file_err(err, "sync directory of", key);
    temp_close(&t, rc != 0); /* after a successful rename the temp name is gone */
    if (rc == 0 && new_gen)
        *new_gen = gen;
    return rc;
}

/* ---- two-phase writes: stage many, then sync and publish them together ---- */

/** A staged value: its temp file, written but not yet synced nor renamed. */
struct nds_kv_staged {
    temp_file t;
    char *key;
};

static void staged_free(nds_kv_staged *st, bool unlink_tmp) {
    temp_close(&st->t, unlink_tmp);
    free(st->key);
    free(st);
}

int nds_file_stage(void *state, const char *key, const uint8_t *data, size_t len,
                      nds_kv_staged **out) {
    *out = NULL;
    int rc = nds_file_check_key(key, "write");
    if (rc != 0)
        return rc;
    nds_kv_staged *st = calloc(1, sizeof *st);
    if (!st || !(st->key = nds_strdup(key))) {
        free(st);
        return nds_err(NDS_ENOMEM, "file: write %s: out of memory", key);
    }
    st->t = (temp_file){-1, NULL, NULL, -1};
    rc = file_create_temp(state, st->key, &st->t);
    if (rc != 0) {
        staged_free(st, false);
        return rc;
    }
    int err = file_write_all(st->t.fd, data, len);
    if (err != 0) {
        rc = nds_file_err(err, "write temp file for", key);
        staged_free(st, true);
        return rc;
    }
    /* Start the writeback now: the data goes to disk while the caller stages more, so publish's
     * fsync mostly waits for the journal commit. Failures surface there. */
    (void)sync_file_range(st->t.fd, 0, 0, SYNC_FILE_RANGE_WRITE);
    *out = st;
    return 0;
}

void nds_file_discard(void *state, nds_kv_staged *st) {
    (void)state;
    staged_free(st, true);
}

/* fsyncs every directory holding a key applied (status 0), once each; a failure turns the status
 * of the keys in that directory into the error. @return 0 or the first error */
static int sync_applied_dirs(nds_kv_staged **staged, nds_kv_publish *res, size_t n) {
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        if (res[i].status != 0)
            continue;
        const char *key = staged[i]->key;
        size_t n = nds_file_dir_len(key);
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = res[j].status == 0 && nds_file_dir_len(staged[j]->key) == n &&
                   memcmp(staged[j]->key, key, n) == 0;
        int err = seen ? 0 : file_sync_parent_of(key, staged[i]->t.dirfd);
        if (err == 0)
            continue;
        res[i].status = nds_file_err(err, "sync directory of", staged[i]->key);
        rc = rc ? rc : res[i].status;
    }
    return rc;
}

/* The data of every staged file is made durable first (one fsync each, issued back to back so
 * the filesystem commits them together), then each is renamed under its key's lock, then each
 * directory is fsynced once. A crash at any point leaves every key old or new. */
int nds_file_publish(void *state, nds_kv_staged **staged, nds_kv_publish *res, size_t n) {
    file_state *s = state;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        if (fsync(staged[i]->t.fd) != 0)
            rc = nds_file_err(errno, "sync temp file for", staged[i]->key);
    for (size_t i = 0; i < n; i++) {
        nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
        wo.if_equal = res[i].if_equal;
        res[i].status = rc ? rc
                           : file_apply_temp(s, staged[i]->key, &staged[i]->t, &wo,
                                             &res[i].new_generation);
        if (res[i].status != 0 && res[i].status != NDS_ECONFLICT && rc == 0)
            rc = res[i].status;
    }
    int err = sync_applied_dirs(staged, res, n);
    rc = rc ? rc : err;
    for (size_t i = 0; i < n; i++)
        staged_free(staged[i], res[i].status != 0);
    return rc;
}

/* Deletes key under its lock when it satisfies opts. *dirfd is the key's directory when a file
 * was unlinked (its fsync and close are the caller's), else -1. */
int nds_file_remove(file_state *s, const char *key, const nds_write_options *opts, int *dirfd) {
    *dirfd = -1;
    struct stat st;
    nds_generation cur;
    const char *name;
    int dfd, rc = nds_file_parent(s, key, "delete", false, &dfd, &name);
    if (rc != 0)
        return rc;
    if (dfd < 0)
        nds_file_gen_absent(&cur);
    else
        rc = file_stat_gen(s, dfd, name, key, "delete", &cur, &st);
    /* Absent now: the delete takes effect at this stat, no lock needed. */
    if (rc != 0 || cur.kind == NDS_GEN_ABSENT) {
        if (rc == 0 && opts && !nds_generation_satisfies(&opts->if_equal, &cur))
            rc = nds_err(NDS_ECONFLICT, "file: delete %s: generation changed", key);
        if (dfd >= 0)
            close(dfd);
        return rc;
    }
    nds_file_lock lk;
    char *lock_name;
    rc = file_lock_key(s, key, dfd, name, &lk, &lock_name);
    if (rc == NDS_ENOTFOUND) { /* the directory went away: the key with it */
        rc = 0;
        nds_file_gen_absent(&cur);
    } else if (rc == 0) {
        rc = file_stat_gen(s, dfd, name, key, "delete", &cur, &st);
    }
    if (rc == 0 && opts && !nds_generation_satisfies(&opts->if_equal, &cur))
        rc = nds_err(NDS_ECONFLICT, "file: delete %s: generation changed", key);
    bool removed = false;
    if (rc == 0 && cur.kind == NDS_GEN_VALUE) {
        if (unlinkat(dfd, name, 0) == 0)
            removed = true;
        else if (errno != ENOENT)
            rc = nds_file_err(errno, "delete", key);
    }
    file_unlock_key(&lk, dfd, lock_name);
    if (removed)
        *dirfd = dfd;
    else
        close(dfd);
    return rc;
}

int nds_file_write(void *state, const char *key, const struct iovec *iov, size_t iovcnt,
                   const nds_write_options *opts, nds_generation *new_gen) {
    int rc = nds_file_check_key(key, iov ? "write" : "delete");
    if (rc != 0)
        return rc;
    if (iov)
        return file_put(state, key, iov, iovcnt, opts, new_gen);
    int dirfd;
    rc = nds_file_remove(state, key, opts, &dirfd);
    int err = dirfd >= 0 ? file_sync_parent_of(key, dirfd) : 0;
    if (dirfd >= 0)
        close(dirfd);
    if (err != 0)
        rc = nds_file_err(err, "sync directory of", key);
    if (rc == 0 && new_gen)
        nds_file_gen_absent(new_gen);
    return rc;
}
