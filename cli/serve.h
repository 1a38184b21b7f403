/* `ndstore serve`: what the command (cmd_serve.c) and its request handler (serve_request.c) share.
 *
 * The HTTP protocol is libmicrohttpd's: it parses requests, frames responses (Content-Length, HEAD
 * without a body) and runs the thread pool. serve_request.c turns a request into kvstore reads.
 * Threading: serve_answer and serve_completed run on the daemon's pool threads, many at once; the
 * serve_site they share is read-only once the daemon runs (its kvstore handle is internally
 * synchronised).
 */
#ifndef NDS_CLI_SERVE_H
#define NDS_CLI_SERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <microhttpd.h>
#include "ndstore/ndstore.h"

/** Bytes a body reads from the store at a time: a full GET of a large object streams in blocks of
 *  this size (each one ranged read), so memory stays at one block per connection being answered. */
#define SERVE_BLOCK_BYTES ((size_t)1 << 20)
/** The send buffer libmicrohttpd allocates per response (it copies from the block into it). */
#define SERVE_SEND_BYTES ((size_t)64 << 10)
/** Longest URL path accepted (bytes, as sent); longer ones get 414. */
#define SERVE_PATH_MAX 4096

/** What every request reads: the store served. */
typedef struct serve_site {
    nds_kvstore *kv; /**< borrowed: the command owns it and frees it after the daemon stopped */
    bool remote;     /**< not NDS_KV_CAP_LOCAL: its I/O errors are an upstream server's (502) */
} serve_site;

/** libmicrohttpd's access handler (cls is the serve_site). Answers GET, HEAD and OPTIONS; every
 *  other method gets 405. */
enum MHD_Result serve_answer(void *cls, struct MHD_Connection *conn, const char *url,
                             const char *method, const char *version, const char *upload_data,
                             size_t *upload_data_size, void **req_cls);
/** libmicrohttpd's completion callback (cls is the serve_site): prints the request's log line on
 *  stderr and frees its state. */
void serve_completed(void *cls, struct MHD_Connection *conn, void **req_cls,
                     enum MHD_RequestTerminationCode toe);
/** An unescape callback that leaves the path as sent: serve_answer percent-decodes it itself, so a
 *  %00 is refused rather than cutting the key short. Returns strlen(s). */
size_t serve_keep_escapes(void *cls, struct MHD_Connection *conn, char *s);

/** Outcome of serve_key_from_path. */
typedef enum serve_path_status {
    SERVE_PATH_OK = 0,
    SERVE_PATH_BAD,     /**< not a key inside the store: 400 */
    SERVE_PATH_TOO_LONG /**< longer than SERVE_PATH_MAX: 414 */
} serve_path_status;

/** The key a URL path names: the path percent-decoded, less its leading '/'; a path ending in '/'
 *  (or "/" itself) names its "index.html". Refused (why gets a short reason): no leading '/', a bad
 *  or %00 escape, control characters, backslashes, empty, "." and ".." segments, and a key that
 *  would start with '/' ("//etc"). key has room for SERVE_PATH_MAX + 11 bytes. */
serve_path_status serve_key_from_path(const char *path, char *key, const char **why);

/** A parsed Range header. */
typedef enum serve_range_kind {
    SERVE_RANGE_NONE = 0, /**< no header, or one that is ignored (malformed or several ranges) */
    SERVE_RANGE_FROM,     /**< bytes=first- or bytes=first-last */
    SERVE_RANGE_SUFFIX    /**< bytes=-count */
} serve_range_kind;

typedef struct serve_range {
    serve_range_kind kind;
    uint64_t first; /**< FROM: first byte */
    uint64_t last;  /**< FROM: last byte (inclusive), UINT64_MAX when open */
    uint64_t count; /**< SUFFIX: bytes from the end */
} serve_range;

/** Parses a Range header value (NULL = none). Malformed values and lists of several ranges are
 *  ignored (kind NONE: the whole value is served, as RFC 9110 allows). */
serve_range serve_range_parse(const char *value);

#endif
