/* Error helpers for driver, codec and format authors: set the calling thread's last error
 * (nds_error_last, ndstore/errors.h) and return the code in one expression:
 *
 *   return nds_err(NDS_EINVAL, "mine: key %s: too long", key);
 *
 * Messages are one lower-case line with context; nds_err_prefix adds context in front of a message
 * a lower layer set, so layers compose "zarr: chunk 0.1 of file:///d/a/: zstd: corrupted block".
 * The message is bounded (longer text is cut) and credentials in URLs are redacted
 * (nds_redact_secrets). Every function here is thread-safe: the last error is per thread.
 */
#ifndef NDSTORE_SYS_ERROR_H
#define NDSTORE_SYS_ERROR_H

#include "ndstore/errors.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define NDS_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define NDS_PRINTF(a, b)
#endif

/** Sets the last error: code, a printf-formatted message, no cause. @return code */
NDS_API int nds_err(int code, const char *fmt, ...) NDS_PRINTF(2, 3);
/** Sets the last error with a foreign cause (kind: what cause holds, e.g. NDS_CAUSE_ERRNO, an HTTP
 *  status). @return code */
NDS_API int nds_err_cause(int code, nds_cause_kind kind, long cause, const char *fmt, ...)
    NDS_PRINTF(4, 5);
/**
 * Sets the last error from errno value err: the message gets ": strerror(err)" appended, the cause
 * is err. @return the mapped code: ENOENT/ENOTDIR -> NDS_ENOTFOUND, EEXIST -> NDS_EEXIST,
 * EACCES/EPERM -> NDS_EPERM, ENOMEM -> NDS_ENOMEM, ENOSPC/EDQUOT/EFBIG -> NDS_ELIMIT, EROFS ->
 * NDS_EREADONLY, ETIMEDOUT -> NDS_ETIMEOUT, else NDS_EIO
 */
NDS_API int nds_err_errno(int err, const char *fmt, ...) NDS_PRINTF(2, 3);
/**
 * Prepends "<formatted>: " to the current message, keeping its cause when the current error has
 * this code; when no message is set for code, the message becomes "<formatted>: nds_strerror(code)".
 * @return code
 */
NDS_API int nds_err_prefix(int code, const char *fmt, ...) NDS_PRINTF(2, 3);

#ifdef __cplusplus
}
#endif
#endif
