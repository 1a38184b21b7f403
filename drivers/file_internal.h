/* What the file kvstore driver's two files share: drivers/kv_file.c (spec, read, list,
 * delete_range, the driver table) and drivers/file_write.c (write, delete, stage and publish).
 * Names, key checks and generations are defined once, in kv_file.c. */
#ifndef NDS_DRIVERS_FILE_INTERNAL_H
#define NDS_DRIVERS_FILE_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <sys/stat.h>

#include "ndstore/sys/kv_driver.h"

/* Temp files are "<key>.__tmp.<pid>.<random>"; lock files (ofd / flock / excl mechanisms)
 * "<key>.__lock". Both are hidden from list and refused as keys. */
#define TMP_MARK ".__tmp."
#define LOCK_SUFFIX ".__lock"

/** A file kvstore instance. */
typedef struct file_state {
    atomic_int lock_mode; /* NDS_FILE_LOCK_*; downgraded when the filesystem refuses a mechanism */
} file_state;

/** The one place errno becomes a status: "file: <what> <path>: <strerror>". */
int nds_file_err(int err, const char *what, const char *path);
bool nds_file_ends_with(const char *s, const char *suffix);
/** Whether a directory entry name is one of ours (lock or temp file). */
bool nds_file_reserved_name(const char *name);
/** NDS_EINVAL unless key names a file that is not one of ours; op names the operation. */
int nds_file_check_key(const char *key, const char *op);
/** The generation of a file from its stat. */
void nds_file_gen(const struct stat *st, nds_generation *g);
void nds_file_gen_absent(nds_generation *g);

/* file_write.c: the driver's write, stage, publish and discard methods, and the locked delete
 * that delete_range uses too (*removed: a file was unlinked; its directory fsync is the caller's). */
int nds_file_write(void *state, const char *key, const uint8_t *data, size_t len,
                   const nds_write_options *opts, nds_generation *new_gen);
int nds_file_stage(void *state, const char *key, const uint8_t *data, size_t len,
                   nds_kv_staged **out);
int nds_file_publish(void *state, nds_kv_staged **staged, nds_kv_publish *res, size_t n);
void nds_file_discard(void *state, nds_kv_staged *st);
int nds_file_remove(file_state *s, const char *key, const nds_write_options *opts, bool *removed);

#endif
