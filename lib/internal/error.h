/* Error helpers: the exported ones (ndstore/sys/error.h) plus what only the core uses (saving an
 * error to carry it across threads). They set the thread-local last error and return the code in
 * one expression.
 *   return nds_err(NDS_EFORMAT, "zarr: .zarray of %s: member \"shape\" must be an array", url);
 * Messages are one lower-case line. nds_err_prefix adds context in front of the message already
 * set, so layers compose "zarr: chunk 0.1 of file:///d/a/: zstd: corrupted block detected". */
#ifndef NDS_INTERNAL_ERROR_H
#define NDS_INTERNAL_ERROR_H

#include <stddef.h>
#include "ndstore/sys/error.h" /* nds_err, nds_err_cause, nds_err_errno, nds_err_prefix (exported) */

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
