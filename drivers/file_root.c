/* The file driver's store root: every path it opens, creates, renames or removes is resolved
 * beneath the root directory, and no symbolic link below the root is followed.
 *
 * The root is the directory named by the spec's path (the path itself when it ends in '/' or
 * names a directory at open, else its directory part), resolved at open (or, when it does not
 * exist yet, when a write makes it): links in the root's own path are followed (a root that is
 * itself a symlink is fine), links below it never are. Paths
 * below the root are resolved with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) from a
 * descriptor of the root; where the kernel has no openat2 (before 5.6, or a seccomp filter refusing
 * it) by a walk that opens one component at a time with O_NOFOLLOW. Both refuse the same paths: a
 * key with a ".." segment, or one whose path meets a symbolic link (ELOOP).
 *
 * The root descriptor is opened once; when the directory it names has been removed (another process
 * deleted the store and made it again), the next lookup that finds nothing opens the path again.
 * Replaced descriptors stay open until the store is closed, since other threads may be using them.
 * So an open file store holds one descriptor (O_PATH) of its root, counted in RLIMIT_NOFILE.
 *
 * Threading: internally synchronised (the descriptor is an atomic, replaced under a mutex).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal/error.h"
#include "internal/util.h"
#include "file_internal.h"

/* Whether openat2 works here: 0 unknown, 1 yes, -1 no (checked walk). Per process. */
static atomic_int g_openat2_ok;

static int root_fd(file_root *r, bool create);

/* ---- setup ---- */

static bool is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Reads NDS_FILE_RESOLVE ("walk" forces the checked walk: a test hook). */
static int resolve_mode_from_env(bool *walk) {
    const char *v = getenv("NDS_FILE_RESOLVE");
    *walk = v && strcmp(v, "walk") == 0;
    if (v && *v && !*walk && strcmp(v, "auto") != 0)
        return nds_err(NDS_EINVAL, "file: NDS_FILE_RESOLVE must be auto or walk, not \"%s\"", v);
    return 0;
}

int nds_file_root_init(file_root *r, const char *path) {
    memset(r, 0, sizeof *r);
    atomic_init(&r->fd, -1);
    pthread_mutex_init(&r->mu, NULL);
    int rc = resolve_mode_from_env(&r->walk);
    if (rc != 0)
        return rc;
    size_t n = strlen(path);
    if (n && path[n - 1] != '/' && is_dir(path))
        r->prefix = nds_asprintf("%s/", path);
    else {
        const char *slash = strrchr(path, '/');
        r->prefix = strndup(path, slash ? (size_t)(slash - path) + 1 : 0);
    }
    if (!r->prefix)
        return nds_err(NDS_ENOMEM, "file: out of memory opening %s", path);
    r->prefix_len = strlen(r->prefix);
    size_t d = r->prefix_len;
    while (d > 1 && r->prefix[d - 1] == '/')
        d--;
    char cwd[4096] = "";
    if (r->prefix[0] != '/' && !getcwd(cwd, sizeof cwd))
        return nds_err_errno(errno, "file: cannot resolve relative path %s", path);
    r->dir = d == 0 ? nds_strdup(cwd)
             : cwd[0] ? nds_asprintf("%s/%.*s", cwd, (int)d, r->prefix)
                      : strndup(r->prefix, d);
    if (!r->dir)
        return nds_err(NDS_ENOMEM, "file: out of memory opening %s", path);
    (void)root_fd(r, false); /* resolved now when it exists; else when a write makes it */
    return 0;
}

void nds_file_root_dispose(file_root *r) {
    int fd = atomic_load(&r->fd);
    if (fd >= 0)
        close(fd);
    for (size_t i = 0; i < r->n_retired; i++)
        close(r->retired[i]);
    free(r->retired);
    free(r->prefix);
    free(r->dir);
    pthread_mutex_destroy(&r->mu);
}

/* ---- the root descriptor ---- */

/* mkdir -p of the root's own path (links in it followed: the user named it), each directory made
 * durable in its parent. @return 0 or an errno */
static int mkdir_root_path(char *dir) {
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        char *slash = strrchr(dir, '/');
        if (errno != ENOENT || !slash || slash == dir)
            return errno;
        *slash = '\0';
        int err = mkdir_root_path(dir);
        *slash = '/';
        if (err != 0)
            return err;
        if (mkdir(dir, 0777) != 0 && errno != EEXIST)
            return errno;
    }
    char *slash = strrchr(dir, '/');
    if (!slash)
        return 0;
    *slash = '\0';
    int pfd = open(slash == dir ? "/" : dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    *slash = '/';
    if (pfd >= 0) {
        fsync(pfd);
        close(pfd);
    }
    return 0;
}

/* The root's descriptor, opened (and with create, made) on first use. @return fd or -errno */
static int root_fd(file_root *r, bool create) {
    int fd = atomic_load(&r->fd);
    if (fd >= 0)
        return fd;
    pthread_mutex_lock(&r->mu);
    fd = atomic_load(&r->fd);
    if (fd < 0) {
        fd = open(r->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT && create) {
            int err = mkdir_root_path(r->dir);
            fd = err ? -1 : open(r->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
            if (err)
                errno = err;
        }
        fd = fd >= 0 ? fd : -errno;
        if (fd >= 0)
            atomic_store(&r->fd, fd);
    }
    pthread_mutex_unlock(&r->mu);
    return fd;
}

/* After a lookup found nothing: when the root directory fd names was removed, forgets fd so the
 * next lookup opens the root's path again. @return true when the caller should look up again */
static bool root_replaced(file_root *r, int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_nlink != 0)
        return false;
    pthread_mutex_lock(&r->mu);
    bool mine = atomic_load(&r->fd) == fd;
    int *grown = mine ? realloc(r->retired, (r->n_retired + 1) * sizeof *grown) : NULL;
    if (grown) {
        r->retired = grown;
        r->retired[r->n_retired++] = fd; /* still in use by other threads: closed at dispose */
        atomic_store(&r->fd, -1);
    }
    pthread_mutex_unlock(&r->mu);
    return mine ? grown != NULL : true;
}

/* ---- lookups beneath the root ---- */

static long openat2_raw(int dirfd, const char *rel, int flags, mode_t mode) {
    struct open_how how = {.flags = (uint64_t)flags, .mode = flags & O_CREAT ? mode : 0,
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS};
    return syscall(SYS_openat2, dirfd, rel, &how, sizeof how);
}

/* 1 when openat2 can be used, probing once per process. */
static bool have_openat2(int rootfd) {
    int ok = atomic_load(&g_openat2_ok);
    if (ok == 0) {
        long fd = openat2_raw(rootfd, ".", O_PATH | O_CLOEXEC, 0);
        ok = fd >= 0 || (errno != ENOSYS && errno != EPERM) ? 1 : -1;
        if (fd >= 0)
            close((int)fd);
        atomic_store(&g_openat2_ok, ok);
    }
    return ok > 0;
}

/* Opens the component name in dirfd without following a link: ELOOP for a link, as openat2 says. */
static int open_component(int dirfd, const char *name, int flags, mode_t mode) {
    int fd = openat(dirfd, name, flags | O_NOFOLLOW, mode);
    if (fd >= 0 || (errno != ENOTDIR && errno != ELOOP))
        return fd >= 0 ? fd : -errno;
    int err = errno;
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
        err = ELOOP;
    return -err;
}

/* The checked walk: each directory of rel opened with O_NOFOLLOW, then the last component. */
static int walk_open(int rootfd, const char *rel, int flags, mode_t mode) {
    int cur = rootfd;
    const char *p = rel;
    for (;;) {
        while (*p == '/')
            p++;
        const char *end = strchr(p, '/');
        const char *next = end;
        while (next && *next == '/')
            next++;
        if (!end || !*next) { /* the last component (perhaps followed by slashes) */
            char *last = strndup(*p ? p : ".", end ? (size_t)(end - p) : strlen(*p ? p : "."));
            int fd = last ? open_component(cur, last, flags | (end ? O_DIRECTORY : 0), mode)
                          : -ENOMEM;
            free(last);
            if (cur != rootfd)
                close(cur);
            return fd;
        }
        char *name = strndup(p, (size_t)(end - p));
        int fd = name ? open_component(cur, name, O_PATH | O_CLOEXEC, 0) : -ENOMEM;
        free(name);
        struct stat st;
        /* O_PATH | O_NOFOLLOW opens a link itself: refused, as openat2 refuses it. */
        int bad = fd < 0                   ? 0
                  : fstat(fd, &st) != 0    ? errno
                  : S_ISLNK(st.st_mode)    ? ELOOP
                  : !S_ISDIR(st.st_mode)   ? ENOTDIR
                                           : 0;
        if (bad) {
            close(fd);
            fd = -bad;
        }
        if (cur != rootfd)
            close(cur);
        if (fd < 0)
            return fd;
        cur = fd;
        p = next;
    }
}

/* One lookup of rel from the root descriptor. @return fd or -errno */
static int open_beneath_once(file_root *r, int rootfd, const char *rel, int flags, mode_t mode) {
    if (!*rel)
        rel = ".";
    if (r->walk || !have_openat2(rootfd))
        return walk_open(rootfd, rel, flags, mode);
    for (int attempt = 0;; attempt++) {
        long fd = openat2_raw(rootfd, rel, flags, mode);
        if (fd >= 0)
            return (int)fd;
        /* EAGAIN: a rename raced the lookup (the kernel cannot prove it stayed beneath). */
        if ((errno != EAGAIN && errno != EINTR) || attempt == 16)
            return -errno;
    }
}

int nds_file_open_beneath(file_root *r, const char *rel, int flags, mode_t mode) {
    for (int attempt = 0;; attempt++) {
        int rootfd = root_fd(r, (flags & O_CREAT) != 0);
        if (rootfd < 0)
            return rootfd;
        int fd = open_beneath_once(r, rootfd, rel, flags | O_CLOEXEC, mode);
        if (fd != -ENOENT || attempt > 0 || !root_replaced(r, rootfd))
            return fd;
    }
}

/* mkdirat of component [start, end) of path under its parent path[0, start), made durable in
 * the parent. @return 0 (made, or there already) or an errno */
static int make_dir_at(file_root *r, char *path, size_t start, size_t end) {
    char saved_start = start ? path[start - 1] : '\0', saved_end = path[end];
    path[end] = '\0';
    if (start)
        path[start - 1] = '\0';
    int pfd = nds_file_open_beneath(r, start ? path : "", O_RDONLY | O_DIRECTORY, 0), err = 0;
    if (start)
        path[start - 1] = saved_start;
    if (pfd < 0)
        err = -pfd;
    else if (mkdirat(pfd, path + start, 0777) == 0)
        err = fsync(pfd) == 0 || errno == EINVAL ? 0 : errno;
    else if (errno != EEXIST)
        err = errno;
    if (pfd >= 0)
        close(pfd);
    path[end] = saved_end;
    return err;
}

/* Makes the missing directories of rel_dir (relative to the root), outermost first, each made
 * durable in its parent. @return 0 or an errno */
static int make_dirs_beneath(file_root *r, const char *rel_dir) {
    char *path = nds_strdup(rel_dir);
    if (!path)
        return ENOMEM;
    int err = 0;
    for (size_t start = 0, i = 0; !err; i++) {
        if (path[i] != '/' && path[i] != '\0')
            continue;
        if (i > start)
            err = make_dir_at(r, path, start, i);
        if (path[i] == '\0')
            break;
        start = i + 1;
    }
    free(path);
    return err;
}

int nds_file_open_dir(file_root *r, const char *rel_dir, bool create) {
    int fd = nds_file_open_beneath(r, rel_dir, O_RDONLY | O_DIRECTORY, 0);
    /* A concurrent delete_range may remove a directory just made (it prunes empty ones): again. */
    for (int attempt = 0; fd == -ENOENT && create && attempt < 16; attempt++) {
        /* The root first: the directories beneath it are made relative to it. */
        if ((fd = root_fd(r, true)) < 0)
            return fd;
        int err = *rel_dir ? make_dirs_beneath(r, rel_dir) : 0;
        if (err != 0 && err != ENOENT)
            return -err;
        fd = nds_file_open_beneath(r, rel_dir, O_RDONLY | O_DIRECTORY, 0);
    }
    return fd;
}

/* ---- keys ---- */

int nds_file_rel(const file_root *r, const char *key, const char *op, const char **rel) {
    if (strncmp(key, r->prefix, r->prefix_len) != 0)
        return nds_err(NDS_EINVAL, "file: %s %s: outside the store %s", op, key, r->dir);
    const char *p = key + r->prefix_len;
    for (const char *s = p; (s = strstr(s, "..")) != NULL; s += 2)
        if ((s == p || s[-1] == '/') && (s[2] == '/' || s[2] == '\0'))
            return nds_err(NDS_EINVAL, "file: %s %s: a \"..\" segment would leave the store", op,
                           key);
    *rel = p;
    return 0;
}

int nds_file_path_err(file_root *r, int err, const char *what, const char *key) {
    if (err != ELOOP && err != EXDEV)
        return nds_file_err(err, what, key);
    /* Name the first link on the path: every component before it is a real directory. */
    const char *rel = strncmp(key, r->prefix, r->prefix_len) == 0 ? key + r->prefix_len : "";
    int rootfd = atomic_load(&r->fd);
    size_t n = strlen(rel);
    for (size_t i = 1; rootfd >= 0 && i <= n; i++) {
        if (rel[i] != '/' && rel[i] != '\0')
            continue;
        char *part = strndup(rel, i);
        struct stat st;
        bool link = part && fstatat(rootfd, part, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                    S_ISLNK(st.st_mode);
        free(part);
        if (link)
            return nds_err_cause(NDS_EUNSUPPORTED, NDS_CAUSE_ERRNO, err,
                                 "file: %s %s: %.*s%.*s is a symbolic link, and a file store "
                                 "follows none below its root %s",
                                 what, key, (int)r->prefix_len, r->prefix, (int)i, rel, r->dir);
    }
    return nds_err_cause(NDS_EUNSUPPORTED, NDS_CAUSE_ERRNO, err,
                         "file: %s %s: the path meets a symbolic link or leaves the store %s, "
                         "which a file store does not follow",
                         what, key, r->dir);
}

int nds_file_parent(file_state *s, const char *key, const char *op, bool create, int *dirfd,
                    const char **name) {
    const char *rel;
    *dirfd = -1;
    int rc = nds_file_rel(&s->root, key, op, &rel);
    if (rc != 0)
        return rc;
    const char *slash = strrchr(rel, '/');
    *name = slash ? slash + 1 : rel;
    char *dir = strndup(rel, slash ? (size_t)(slash - rel) : 0);
    if (!dir)
        return nds_err(NDS_ENOMEM, "file: %s %s: out of memory", op, key);
    int fd = nds_file_open_dir(&s->root, dir, create);
    free(dir);
    if (fd >= 0)
        *dirfd = fd;
    else if (create || (fd != -ENOENT && fd != -ENOTDIR))
        return nds_file_path_err(&s->root, -fd, op, key);
    return 0;
}
