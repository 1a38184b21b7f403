/* What the file kvstore driver's files share: drivers/kv_file.c (spec, read, list, delete_range,
 * the driver table), drivers/file_write.c (write, delete, stage and publish),
 * drivers/file_root.c (the store root: every path resolved beneath it, no link below it followed)
 * and drivers/file_util.c (names, key checks, generations, errno mapping). Calls run one way:
 * kv_file.c -> file_write.c -> file_root.c -> file_util.c (kv_file.c also calls the lower two). */
#ifndef NDS_DRIVERS_FILE_INTERNAL_H
#define NDS_DRIVERS_FILE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "ndstore/sys/kv_driver.h"

/* Temp files are "<key>.__tmp.<pid>.<16 hex digits>"; lock files (ofd / flock / excl mechanisms)
 * "<key>.__lock". Both are hidden from list and refused as keys. */
#define TMP_MARK ".__tmp."
#define LOCK_SUFFIX ".__lock"

/** The directory a file store lives in (drivers/file_root.c). */
typedef struct file_root {
    char *prefix;      /* keys start with it: the spec path's directory part, '/' at the end */
    size_t prefix_len;
    char *dir;         /* the root directory's absolute path, as the user named it */
    pthread_mutex_t mu; /* serialises opening fd and retiring replaced ones */
    atomic_int fd;     /* O_PATH descriptor of dir, -1 until first used */
    int *retired;      /* descriptors of root directories removed while open: closed at dispose */
    size_t n_retired;
    bool walk;         /* NDS_FILE_RESOLVE=walk: the checked walk even where openat2 exists */
} file_root;

/** A file kvstore instance. */
typedef struct file_state {
    atomic_int lock_mode; /* NDS_FILE_LOCK_*; downgraded when the filesystem refuses a mechanism */
    file_root root;
} file_state;

/* file_root.c */
/** Sets r up for the spec path (nothing is opened yet). @return 0 or an error (message set) */
int nds_file_root_init(file_root *r, const char *path);
void nds_file_root_dispose(file_root *r);
/** *rel = key relative to the root; NDS_EINVAL when key lies outside it or has a ".." segment. */
int nds_file_rel(const file_root *r, const char *key, const char *op, const char **rel);
/** open of rel ("" = the root) beneath the root, following no link. With O_CREAT a missing root
 *  is made. @return fd, or -errno (ELOOP: a link on the path; ENOENT also when the root is
 *  missing) */
int nds_file_open_beneath(file_root *r, const char *rel, int flags, mode_t mode);
/** The directory rel_dir beneath the root, opened O_RDONLY (for flock, fsync, *at calls); with
 *  create, missing directories are made (each fsynced in its parent). @return fd or -errno */
int nds_file_open_dir(file_root *r, const char *rel_dir, bool create);
/** nds_file_err for a path error of key, naming the link when err is ELOOP (NDS_EUNSUPPORTED). */
int nds_file_path_err(file_root *r, int err, const char *what, const char *key);
/** Opens the directory holding key (beneath the root; made when create) as *dirfd, with *name the
 *  key's last component. *dirfd = -1 (and 0) when it does not exist and create is false.
 *  @return 0 or an error (message set, naming key and op) */
int nds_file_parent(file_state *s, const char *key, const char *op, bool create, int *dirfd,
                    const char **name);


/* file_util.c (below every other file of the driver) */
/** The one place errno becomes a status: "file: <what> <path>: <strerror>". */
int nds_file_err(int err, const char *what, const char *path);
bool nds_file_ends_with(const char *s, const char *suffix);
/** Whether a directory entry name is reserved (contains the temp mark or ends as a lock file). */
bool nds_file_reserved_name(const char *name);
/** Whether name is exactly a temp file ndstore makes: "<key>.__tmp.<pid>.<16 hex digits>";
 *  *pid is the pid in it. */
bool nds_file_temp_name(const char *name, long *pid);
/** NDS_EINVAL unless key names a file that is not one of ours; op names the operation. */
int nds_file_check_key(const char *key, const char *op);
/** The generation of a file from its stat. */
void nds_file_gen(const struct stat *st, nds_generation *g);
void nds_file_gen_absent(nds_generation *g);

/* file_write.c: the driver's write, stage, publish and discard methods, and the locked delete
 * that delete_range uses too (*dirfd: the key's directory when a file was unlinked, else -1; its
 * fsync and close are the caller's). */
/** The driver's write (kv_driver.h): the pieces written to the temp file with writev; iov NULL
 *  deletes. */
int nds_file_write(void *state, const char *key, const struct iovec *iov, size_t iovcnt,
                   const nds_write_options *opts, nds_generation *new_gen);
int nds_file_stage(void *state, const char *key, const uint8_t *data, size_t len,
                   nds_kv_staged **out);
int nds_file_publish(void *state, nds_kv_staged **staged, nds_kv_publish *res, size_t n);
void nds_file_discard(void *state, nds_kv_staged *st);
int nds_file_remove(file_state *s, const char *key, const nds_write_options *opts, int *dirfd);

#endif
