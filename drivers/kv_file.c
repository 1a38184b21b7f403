/* The "file" kvstore driver: each key is a file path (the core passes spec path + relative key).
 *
 * Every path is resolved beneath the store root (drivers/file_root.c) and no symbolic link below
 * the root is followed: reads and writes through one fail with NDS_EUNSUPPORTED naming the link,
 * and list does not report it, so list, read and write agree on what the store holds. Temp files of
 * dead writers are removed only by delete_range, a write (read-only calls never unlink anything).
 *
 * Implements read (conditions, byte ranges via pread), atomic conditional write and delete
 * (drivers/file_write.c, with stage and publish), list by prefix (a directory walk) and
 * delete_range (list + delete + removal of directories left empty).
 * Omits a multi-key commit (commit = NULL): a crash between two renames would leave half a batch.
 *
 * Generation: "<dev>.<ino>.<mtime_ns>.<size>" in hex, from one fstat of the file read. A value is
 * never modified in place: a write goes to "<key>.__tmp.<pid>.<random>" in the same directory, is
 * fsynced, renamed over the key, and the directory is fsynced; missing parent directories are
 * created (and their parents fsynced). Every write and delete holds the key's exclusive lock
 * (file_lock.h: by default a flock of its directory) while it re-checks the generation and renames
 * or unlinks, so an unconditional write cannot slip between a conditional writer's check and its
 * rename. Two-phase writes (stage, publish) split this: stage writes the temp file and starts its
 * writeback; publish fsyncs a batch of them, renames each under its lock and condition, and fsyncs
 * each directory once. Under that
 * lock a new version's mtime is made later than the one it replaces, so a recycled inode of the
 * same size never repeats an older generation of the key. Readers never lock: open, fstat, pread.
 * list hides lock and temp files; such names are refused as keys. Every file operation goes
 * through a descriptor of the key's directory (rename, unlink, lock files, directory fsyncs).
 *
 * Threading: internally synchronised (the instance holds only the lock mechanism word). Ownership:
 * read results own a malloc'd buffer.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "ndstore/sys/kv_driver.h"
#include "internal/error.h"
#include "internal/util.h"
#include "file_lock.h"
#include "file_readbuf.h"
#include "file_internal.h"
#include "file_sync.h"

/* ---- spec ---- */

/* A relative path (a bare "a.zarr") is made absolute against the working directory, so the printed URL
 * (file:///abs/a.zarr/) reopens the same place and "a.zarr" is never read as a host name. */
static int file_parse_url(const char *rest, struct json_object *spec) {
    char *abs = NULL;
    while (rest[0] == '.' && rest[1] == '/') rest += 2;
    if (strcmp(rest, ".") == 0) rest = "";
    if (rest[0] != '/') {
        char cwd[4096];
        if (!getcwd(cwd, sizeof cwd)) return nds_err_errno(errno, "file: cannot resolve relative path %s", rest);
        abs = nds_asprintf("%s%s%s", cwd, strcmp(cwd, "/") == 0 ? "" : "/", rest);
        if (!abs) return nds_err(NDS_ENOMEM, "file: out of memory parsing url");
        rest = abs;
    }
    json_object *path = json_object_new_string(rest);
    free(abs);
    if (!path || json_object_object_add(spec, "path", path) != 0) {
        json_object_put(path);
        return nds_err(NDS_ENOMEM, "file: out of memory parsing url");
    }
    return 0;
}

static int file_open(void **state, const struct json_object *spec) {
    json_object *path_obj = NULL;
    const char *path = spec && json_object_object_get_ex(spec, "path", &path_obj)
                           ? json_object_get_string(path_obj)
                           : "";
    int mode = nds_file_lock_mode_from_env();
    if (mode < 0)
        return nds_err(NDS_EINVAL,
                       "file: NDS_FILE_LOCK must be auto, ofd, flock or excl, not \"%s\"",
                       getenv("NDS_FILE_LOCK"));
    file_state *s = calloc(1, sizeof *s);
    if (!s)
        return nds_err(NDS_ENOMEM, "file: out of memory opening kvstore");
    atomic_init(&s->lock_mode, mode);
    int rc = nds_file_root_init(&s->root, path ? path : "");
    if (rc != 0) {
        nds_file_root_dispose(&s->root);
        free(s);
        return rc;
    }
    *state = s;
    return 0;
}

static void file_close(void *state) {
    file_state *s = state;
    nds_file_root_dispose(&s->root);
    free(s);
}

static void file_url_base(void *state, char *buf, size_t cap) {
    (void)state;
    snprintf(buf, cap, "file://");
}

/* ---- read ---- */

/* The outcome of a read's conditions given the current generation. */
static nds_read_state file_read_state(const nds_read_options *opts, const nds_generation *cur) {
    if (opts && opts->if_equal.kind != NDS_GEN_NONE && !nds_generation_equal(&opts->if_equal, cur))
        return NDS_READ_ABORTED;
    if (opts && nds_generation_equal(&opts->if_not_equal, cur))
        return NDS_READ_UNCHANGED;
    return cur->kind == NDS_GEN_ABSENT ? NDS_READ_MISSING : NDS_READ_VALUE;
}

/* Reads len bytes at off of the open value into a buffer owned by out (the thread's reusable one
 * when free: file_readbuf.h). */
static int file_pread_value(int fd, const char *key, uint64_t off, uint64_t len,
                            nds_read_result *out) {
    if (len > SIZE_MAX - 1)
        return nds_err(NDS_ELIMIT, "file: read %s: %llu bytes do not fit in memory", key,
                       (unsigned long long)len);
    nds_bytes value;
    uint8_t *buf = nds_file_readbuf_take((size_t)len, &value);
    if (!buf)
        return nds_err(NDS_ENOMEM, "file: read %s: out of memory for %llu bytes", key,
                       (unsigned long long)len);
    size_t done = 0;
    while (done < len) {
        ssize_t n = pread(fd, buf + done, (size_t)len - done, (off_t)(off + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            nds_bytes_release(&value);
            if (n == 0)
                return nds_err(NDS_EIO, "file: read %s: file shrank while reading", key);
            return nds_file_err(errno, "read", key);
        }
        done += (size_t)n;
    }
    out->value = value;
    return 0;
}

/* Opens key's value for reading: *fd (-1 when there is none), out->generation and total_size.
 * A missing key or a directory is ABSENT; a fifo, socket or device is an error. The one place
 * both forms of read look a value up, so both report the same generations. */
static int file_open_value(file_state *s, const char *key, int *fd, nds_read_result *out) {
    memset(out, 0, sizeof *out);
    *fd = -1;
    const char *rel;
    int rc = nds_file_check_key(key, "read");
    if (rc == 0)
        rc = nds_file_rel(&s->root, key, "read", &rel);
    if (rc != 0)
        return rc;
    /* O_NONBLOCK: never hang on a fifo */
    int f = nds_file_open_beneath(&s->root, rel, O_RDONLY | O_NONBLOCK, 0);
    struct stat st;
    if (f < 0) {
        if (f != -ENOENT && f != -ENOTDIR)
            return nds_file_path_err(&s->root, -f, "read", key);
        nds_file_gen_absent(&out->generation);
        return 0;
    }
    if (fstat(f, &st) != 0)
        rc = nds_file_err(errno, "stat", key);
    else if (S_ISDIR(st.st_mode))
        nds_file_gen_absent(&out->generation);
    else if (!S_ISREG(st.st_mode))
        rc = nds_err(NDS_EIO, "file: read %s: not a regular file", key);
    else {
        nds_file_gen(&st, &out->generation);
        out->total_size = (uint64_t)st.st_size;
    }
    if (rc == 0 && out->generation.kind == NDS_GEN_VALUE)
        *fd = f;
    else
        close(f);
    return rc;
}

/* preadv of all of iov (n entries, copied: a short read advances into an entry) from off, at most
 * IOV_MAX entries per call. @return 0, NDS_ERANGE when the file ends first, or the read error */
static int file_preadv_all(int fd, const char *key, uint64_t off, const struct iovec *iov,
                           size_t n) {
    struct iovec *left = malloc((n ? n : 1) * sizeof *left);
    if (!left)
        return nds_err(NDS_ENOMEM, "file: read %s: out of memory", key);
    memcpy(left, iov, n * sizeof *left);
    int rc = 0;
    for (size_t i = 0; rc == 0;) {
        while (i < n && left[i].iov_len == 0)
            i++;
        if (i == n)
            break;
        ssize_t got = preadv(fd, left + i, (int)(n - i < IOV_MAX ? n - i : IOV_MAX), (off_t)off);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            rc = nds_file_err(errno, "read", key);
        else if (got == 0)
            rc = nds_err(NDS_ERANGE, "file: read %s: value ends at %llu, before the span read",
                         key, (unsigned long long)off);
        off += got > 0 ? (uint64_t)got : 0;
        for (size_t done = got > 0 ? (size_t)got : 0; done > 0; i++) { /* skip what was filled */
            size_t take = done < left[i].iov_len ? done : left[i].iov_len;
            left[i].iov_base = (uint8_t *)left[i].iov_base + take;
            left[i].iov_len -= take;
            done -= take;
            if (left[i].iov_len > 0)
                break;
        }
    }
    free(left);
    return rc;
}

/* Reads the ranges from their first to their last (none past total): runs of ranges that follow
 * each other read as one preadv. */
static int read_ranges_from(int fd, const char *key, const nds_byte_range *ranges, size_t n,
                            uint64_t total) {
    for (size_t i = 0; i < n; i++)
        if (ranges[i].offset > total || ranges[i].len > total - ranges[i].offset)
            return nds_err(NDS_ERANGE, "file: read %s: %zu bytes at %llu, past its %llu", key,
                           ranges[i].len, (unsigned long long)ranges[i].offset,
                           (unsigned long long)total);
    struct iovec *iov = malloc(n * sizeof *iov);
    if (!iov)
        return nds_err(NDS_ENOMEM, "file: read %s: out of memory", key);
    int rc = 0;
    for (size_t i = 0, run; rc == 0 && i < n; i += run) {
        uint64_t end = ranges[i].offset;
        for (run = 0; i + run < n && ranges[i + run].offset == end; run++) {
            iov[run] = (struct iovec){ranges[i + run].dst, ranges[i + run].len};
            end += ranges[i + run].len;
        }
        rc = file_preadv_all(fd, key, ranges[i].offset, iov, run);
    }
    free(iov);
    return rc;
}

static int file_read_value(void *state, const char *key, const nds_read_options *opts,
                     nds_read_result *out) {
    int fd;
    int rc = file_open_value(state, key, &fd, out);
    if (rc == 0)
        out->state = file_read_state(opts, &out->generation);
    if (rc == 0 && out->state == NDS_READ_VALUE) {
        uint64_t off = 0, len = out->total_size;
        if (opts && nds_byte_range_resolve(opts, out->total_size, &off, &len) != 0)
            rc = nds_err_prefix(NDS_ERANGE, "file: read %s", key);
        else
            rc = file_pread_value(fd, key, off, len, out);
    }
    if (fd >= 0)
        close(fd);
    return rc;
}

/* The ranges from one open of the value, so all from one version of it. */
static int file_read(void *state, const char *key, const nds_read_options *opts,
                     const nds_byte_range *ranges, size_t n, nds_read_result *out) {
    if (n == 0)
        return file_read_value(state, key, opts, out);
    int fd;
    int rc = file_open_value(state, key, &fd, out);
    if (rc == 0)
        out->state = file_read_state(opts, &out->generation);
    if (rc == 0 && out->state == NDS_READ_VALUE)
        rc = read_ranges_from(fd, key, ranges, n, out->total_size);
    if (fd >= 0)
        close(fd);
    return rc;
}

/* ---- list ---- */

/* State of one listing walk. */
typedef struct file_walk {
    const char *prefix;
    size_t prefix_len;
    nds_list_fn fn;
    void *ctx;
    char *path; /* key being built: a directory part followed by an entry name */
    size_t cap;
    bool reap;  /* remove abandoned temp files met on the way (delete_range only) */
} file_walk;

static int walk_reserve(file_walk *w, size_t need) {
    if (need <= w->cap)
        return 0;
    size_t cap = w->cap ? w->cap : 256;
    while (cap < need)
        cap *= 2;
    char *p = realloc(w->path, cap);
    if (!p)
        return nds_err(NDS_ENOMEM, "file: out of memory listing %s", w->prefix);
    w->path = p;
    w->cap = cap;
    return 0;
}

static int walk_dir(file_walk *w, size_t len, int fd);

/* Descends into the directory name of d, whose key prefix is w->path[0..len) + '/'. */
static int walk_subdir(file_walk *w, DIR *d, const char *name, size_t len) {
    int rc = walk_reserve(w, len + 2);
    if (rc != 0)
        return rc;
    w->path[len] = '/';
    w->path[len + 1] = '\0';
    if (len + 1 <= w->prefix_len && w->prefix[len] != '/')
        return 0;
    /* O_NOFOLLOW: a directory replaced by a link since the fstatat is skipped, not followed. */
    int fd = openat(dirfd(d), name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT || errno == ENOTDIR || errno == ELOOP
                   ? 0
                   : nds_file_err(errno, "list", w->path);
    return walk_dir(w, len + 1, fd);
}

/* Handles the entry whose key is w->path[0..len): emit a regular file, descend into a directory.
 * Symbolic links are neither: the store follows none (read and write refuse them too). */
static int walk_entry(file_walk *w, DIR *d, const char *name, size_t len) {
    size_t cmp = len < w->prefix_len ? len : w->prefix_len;
    if (strncmp(w->path, w->prefix, cmp) != 0)
        return 0; /* cannot start, nor lead to, the prefix */
    struct stat st;
    if (fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return errno == ENOENT ? 0 : nds_file_err(errno, "stat", w->path);
    if (S_ISDIR(st.st_mode))
        return walk_subdir(w, d, name, len);
    if (!S_ISREG(st.st_mode) || len < w->prefix_len)
        return 0;
    return w->fn(w->ctx, w->path, (uint64_t)st.st_size);
}

/* Temp files of writers that died before renaming them would pile up forever: delete_range removes
 * those in ndstore's exact naming whose writer is gone (its pid does not exist and the file is a
 * minute old) or that are an hour old whatever the pid says (another host's writer, or a reused
 * pid). A live writer renames its temp file within seconds, so neither rule can remove one in use;
 * files merely containing ".__tmp." are the user's and are left alone. */
#define TMP_DEAD_AGE_S 60
#define TMP_MAX_AGE_S 3600

static void reap_stale_temp(int dirfd, const char *name) {
    long pid;
    struct stat st;
    if (!nds_file_temp_name(name, &pid) || fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode))
        return;
    time_t age = time(NULL) - st.st_mtim.tv_sec;
    bool dead = pid <= INT_MAX && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
    if ((dead && age >= TMP_DEAD_AGE_S) || age >= TMP_MAX_AGE_S)
        unlinkat(dirfd, name, 0);
}

/* Walks the directory open as fd (taken over) whose key prefix is w->path[0..len). */
static int walk_dir(file_walk *w, size_t len, int fd) {
    DIR *d = fdopendir(fd);
    if (!d) {
        int err = errno;
        close(fd);
        return nds_file_err(err, "list", w->path);
    }
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (errno = 0, e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (nds_file_reserved_name(e->d_name)) {
            if (w->reap)
                reap_stale_temp(dirfd(d), e->d_name);
            continue;
        }
        size_t n = strlen(e->d_name);
        rc = walk_reserve(w, len + n + 2);
        if (rc != 0)
            break;
        memcpy(w->path + len, e->d_name, n + 1);
        rc = walk_entry(w, d, e->d_name, len + n);
    }
    if (rc == 0 && !e && errno != 0)
        rc = nds_file_err(errno, "list", w->path);
    closedir(d);
    return rc;
}

/* Lists the keys starting with prefix, beneath the root only: a prefix shorter than the root's (a
 * handle whose path lacks its final '/') lists the root. */
static int file_walk_prefix(file_state *s, const char *prefix, bool reap, nds_list_fn fn,
                            void *ctx) {
    const file_root *r = &s->root;
    size_t n = strlen(prefix);
    file_walk w = {prefix, n, fn, ctx, NULL, 0, reap};
    size_t dir_len; /* the directory part of the key prefix to start from */
    if (n <= r->prefix_len && strncmp(prefix, r->prefix, n) == 0) {
        dir_len = r->prefix_len;
    } else if (strncmp(prefix, r->prefix, r->prefix_len) == 0) {
        const char *slash = strrchr(prefix, '/');
        dir_len = (size_t)(slash - prefix) + 1;
    } else {
        return nds_err(NDS_EINVAL, "file: list %s: outside the store %s", prefix, r->dir);
    }
    const char *start = dir_len == r->prefix_len ? r->prefix : prefix;
    int rc = walk_reserve(&w, dir_len + 1);
    if (rc != 0)
        return rc;
    memcpy(w.path, start, dir_len);
    w.path[dir_len] = '\0';
    const char *rel;
    rc = nds_file_rel(r, w.path, "list", &rel);
    int fd = rc == 0 ? nds_file_open_beneath(&s->root, rel, O_RDONLY | O_DIRECTORY, 0) : -1;
    if (rc == 0 && fd >= 0)
        rc = walk_dir(&w, dir_len, fd);
    else if (rc == 0 && fd != -ENOENT && fd != -ENOTDIR)
        rc = nds_file_path_err(&s->root, -fd, "list", w.path);
    free(w.path);
    return rc;
}

static int file_list(void *state, const char *prefix, nds_list_fn fn, void *ctx) {
    return file_walk_prefix(state, prefix, false, fn, ctx);
}

/* ---- delete_range ---- */

/* Keys collected by a listing for delete_range. */
typedef struct key_vec {
    const char *begin, *end;
    char **keys;
    size_t n, cap;
} key_vec;

static int collect_in_range(void *ctx, const char *key, uint64_t size) {
    (void)size;
    key_vec *v = ctx;
    if (strcmp(key, v->begin) < 0 || (v->end[0] && strcmp(key, v->end) >= 0))
        return 0;
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 64;
        char **k = realloc(v->keys, cap * sizeof *k);
        if (!k)
            return nds_err(NDS_ENOMEM, "file: out of memory in delete_range");
        v->keys = k;
        v->cap = cap;
    }
    if (!(v->keys[v->n] = nds_strdup(key)))
        return nds_err(NDS_ENOMEM, "file: out of memory in delete_range");
    v->n++;
    return 0;
}

/* 1 when directory dir, as the key prefix "dir/", lies in [begin, end): only such directories are
 * removed, so a range never removes a directory that could hold keys outside it. */
static bool dir_in_range(const char *dir, const char *begin, const char *end) {
    char *as_key = nds_asprintf("%s/", dir);
    bool in = as_key && strcmp(as_key, begin) >= 0 && (!end[0] || strcmp(as_key, end) < 0);
    free(as_key);
    return in;
}

/* rmdir of the directory rel (below the root, never the root itself) through its parent's
 * descriptor. @return true when it was removed */
static bool remove_dir_beneath(file_root *r, const char *rel) {
    const char *slash = strrchr(rel, '/');
    char *parent = strndup(rel, slash ? (size_t)(slash - rel) : 0);
    int pfd = parent ? nds_file_open_beneath(r, parent, O_PATH | O_DIRECTORY, 0) : -1;
    bool removed = pfd >= 0 && unlinkat(pfd, slash ? slash + 1 : rel, AT_REMOVEDIR) == 0;
    if (pfd >= 0)
        close(pfd);
    free(parent);
    return removed;
}

/* Removes the directories of key left empty, walking up while they lie in the range, and never
 * the store's root: the store's directory stays where its user made it. */
static void prune_dirs(file_state *s, const char *key, const char *begin, const char *end) {
    size_t root_len = s->root.prefix_len;
    char *dir = nds_file_dir_of(key);
    while (dir && strlen(dir) >= root_len && dir_in_range(dir, begin, end) &&
           remove_dir_beneath(&s->root, dir + root_len)) {
        char *up = nds_file_dir_of(dir);
        free(dir);
        dir = up;
    }
    free(dir);
}

/* Deletes the collected keys, then fsyncs their directories and prunes the empty ones. */
static int delete_keys(file_state *s, key_vec *v) {
    int rc = 0;
    char *synced = NULL; /* last directory fsynced: keys of one directory come together */
    for (size_t i = 0; i < v->n && rc == 0; i++) {
        int dirfd;
        rc = nds_file_remove(s, v->keys[i], NULL, &dirfd);
        char *dir = dirfd >= 0 ? nds_file_dir_of(v->keys[i]) : NULL;
        if (dir && (!synced || strcmp(dir, synced) != 0)) {
            int err = nds_file_sync_dir(dir, dirfd);
            if (err != 0)
                rc = nds_file_err(err, "sync directory", dir);
            free(synced);
            synced = dir;
        } else {
            free(dir);
        }
        if (dirfd >= 0)
            close(dirfd);
    }
    free(synced);
    for (size_t i = 0; i < v->n; i++)
        prune_dirs(s, v->keys[i], v->begin, v->end);
    return rc;
}

static int file_delete_range(void *state, const char *begin, const char *end) {
    size_t cp = 0;
    if (end[0]) {
        if (strcmp(begin, end) >= 0)
            return 0;
        while (begin[cp] && begin[cp] == end[cp])
            cp++;
    } else if (begin[0] == '/') {
        /* [begin, "") with an absolute begin spans the whole filesystem: the core bounds a handle's
         * ranges by its prefix, so this is a caller bug, refused rather than obeyed. */
        return nds_err(NDS_EINVAL, "file: delete_range from %s has no end", begin);
    }
    /* Only keys starting with the common prefix of begin and end can be in range (all for ""). */
    char *prefix = malloc(cp + 1);
    if (!prefix)
        return nds_err(NDS_ENOMEM, "file: out of memory in delete_range");
    memcpy(prefix, begin, cp);
    prefix[cp] = '\0';
    key_vec v = {begin, end, NULL, 0, 0};
    int rc = file_walk_prefix(state, prefix, true, collect_in_range, &v);
    if (rc == 0)
        rc = delete_keys(state, &v);
    for (size_t i = 0; i < v.n; i++)
        free(v.keys[i]);
    free(v.keys);
    free(prefix);
    return rc;
}

const nds_kv_driver nds_kv_driver_file = {
    .version = NDS_KV_DRIVER_VERSION,
    .name = "file",
    .url_scheme = "file",
    .capabilities = NDS_KV_CAP_ATOMIC_CONDITIONAL_WRITE | NDS_KV_CAP_BYTE_RANGE | NDS_KV_CAP_LOCAL |
                    NDS_KV_CAP_READ_INTO,
    .parse_url = file_parse_url,
    .open = file_open,
    .close = file_close,
    .url_base = file_url_base,
    .to_json = NULL,
    .read = file_read,
    .write = nds_file_write,
    .list = file_list,
    .delete_range = file_delete_range,
    .commit = NULL,
    .stage = nds_file_stage,
    .publish = nds_file_publish,
    .discard = nds_file_discard,
};
