/* Internal error helpers: set the thread-local last error and return the code in one expression.
 *   return nds_err(NDS_EFORMAT, "zarr: .zarray of %s: member \"shape\" must be an array", url);
 * Messages are one lower-case line. nds_err_prefix adds context in front of the message already
 * set, so layers compose "zarr: chunk 0.1 of file:///d/a/: zstd: corrupted block detected". */
#ifndef NDS_INTERNAL_ERROR_H
#define NDS_INTERNAL_ERROR_H

#include <stddef.h>
#include "ndstore/errors.h"

#if defined(__GNUC__)
#define NDS_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define NDS_PRINTF(a, b)
#endif

/** Sets the last error (code, formatted message, no cause); returns code. */
int nds_err(int code, const char *fmt, ...) NDS_PRINTF(2, 3);
/** Sets the last error with a foreign cause; returns code. */
int nds_err_cause(int code, nds_cause_kind kind, long cause, const char *fmt, ...) NDS_PRINTF(4, 5);
/** Sets the last error from errno (message gets ": strerror(errno)" appended); returns the mapped
 * code (ENOENT -> NDS_ENOTFOUND, EEXIST -> NDS_EEXIST, EACCES/EPERM -> NDS_EPERM, ENOMEM ->
 * NDS_ENOMEM, ENOSPC/EDQUOT -> NDS_ELIMIT, EROFS -> NDS_EREADONLY, else NDS_EIO). */
int nds_err_errno(int err, const char *fmt, ...) NDS_PRINTF(2, 3);
/** Prepends "<formatted>: " to the current message (keeping the cause); returns code. If no message
 * is set for code, uses nds_strerror(code). */
int nds_err_prefix(int code, const char *fmt, ...) NDS_PRINTF(2, 3);

/** A saved error, to carry a worker thread's error to the calling thread. */
typedef struct nds_error_saved {
    int code;
    nds_cause_kind cause_kind;
    long cause;
    char message[1024];
} nds_error_saved;
/** Copies the calling thread's last error into s (with code, which may differ from the stored one).
 */
void nds_error_save(nds_error_saved *s, int code);
/** Makes s the calling thread's last error; returns s->code. */
int nds_error_restore(const nds_error_saved *s);

#endif
