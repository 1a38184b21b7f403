/* ndstore status codes and the thread-local last error.
 *
 * Every function that can fail returns an int: 0 (NDS_OK) on success or a negative NDS_E* code. The detail
 * (a one-line message with context, and the original cause such as an errno or a zstd code) is kept per
 * thread and read with nds_error_last(). The code list lives in errors.def (an X-macro), so the enum and
 * nds_strerror() cannot drift. (STYLE.md puts errors.def in lib/; it is here because this public header
 * needs it, and an installed header cannot include a file that is not installed.)
 */
#ifndef NDSTORE_ERRORS_H
#define NDSTORE_ERRORS_H

#include <stddef.h>
#include "ndstore/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Status codes. NDS_OK is 0; every error is negative. */
typedef enum nds_status {
#define NDS_ERR(name, value, text) NDS_##name = (value),
#include "ndstore/errors.def"
#undef NDS_ERR
} nds_status;

/** What kind of foreign code nds_error.cause holds. */
typedef enum nds_cause_kind {
    NDS_CAUSE_NONE = 0,
    NDS_CAUSE_ERRNO,  /**< a POSIX errno value */
    NDS_CAUSE_ZSTD,   /**< a zstd error code (ZSTD_getErrorCode) */
    NDS_CAUSE_ZLIB,   /**< a zlib / libdeflate result code */
    NDS_CAUSE_BLOSC,  /**< a blosc return value */
    NDS_CAUSE_CURL,   /**< a CURLcode */
    NDS_CAUSE_HTTP,   /**< an HTTP status */
    NDS_CAUSE_MDB,    /**< an LMDB return code */
    NDS_CAUSE_JSON,   /**< a json-c tokener error */
    NDS_CAUSE_OTHER   /**< another library's code, named in the message */
} nds_cause_kind;

/** The last error of the calling thread. */
typedef struct nds_error {
    int code;                 /**< the nds_status returned */
    const char *message;      /**< one lower-case line with context; never NULL ("" when none) */
    nds_cause_kind cause_kind;/**< what cause holds */
    long cause;               /**< the original foreign code, or 0 */
} nds_error;

/** Static text for a status code ("unknown error" for codes not in the list). Any thread. */
NDS_API const char *nds_strerror(int code);

/** The calling thread's last error. Borrowed: valid until the next ndstore call on this thread. */
NDS_API const nds_error *nds_error_last(void);

/** Clears the calling thread's last error. */
NDS_API void nds_error_clear(void);

/**
 * Hides the secrets of every URL in text, in place, so that no message, report or log line
 * repeats them: the userinfo of "scheme://user:password@host/" becomes "***", and so does the
 * value of each credential query parameter (X-Amz-Signature, X-Amz-Credential,
 * X-Amz-Security-Token, X-Goog-Signature, access_token, token, sig, signature, key, password, ...;
 * names matched without case and after percent-decoding, also behind an encoded "%3F"/"%26").
 * Everything else is left as it is. Every message of nds_error_last() and every kvstore URL
 * (nds_kvstore_url) has been through it already; applications call it on text of their own that
 * may hold a URL. cap is the size of text's buffer (text stays NUL-terminated within it).
 * Returns the number of secrets hidden. Any thread.
 */
NDS_API int nds_redact_secrets(char *text, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
