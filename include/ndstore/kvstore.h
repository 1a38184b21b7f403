/* Key-value stores: the storage layer under every array.
 *
 * A kvstore handle is a driver instance (file, memory, ...) plus a key prefix (the spec's "path"). Keys passed
 * to these functions are relative to that prefix. Handles are reference counted and internally synchronised:
 * any thread may use one handle at once. Every stored value has a generation, an opaque short string that
 * changes whenever the value does; conditional reads and writes compare generations (DESIGN.md section 2).
 */
#ifndef NDSTORE_KVSTORE_H
#define NDSTORE_KVSTORE_H

#include <stddef.h>
#include <stdint.h>
#include "ndstore/version.h"
#include "ndstore/errors.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct nds_kvstore nds_kvstore;
typedef struct nds_context nds_context;

/** Longest generation string, including its terminating NUL. */
#define NDS_GENERATION_MAX 96

/** What a generation denotes. */
typedef enum nds_generation_kind {
    NDS_GEN_NONE = 0, /**< no generation: as a condition, "no condition" */
    NDS_GEN_ABSENT,   /**< the key does not exist: as if_equal, a create-only write */
    NDS_GEN_VALUE     /**< one stored version, named by value */
} nds_generation_kind;

/** One stored version of one key. Plain value type; copy freely. */
typedef struct nds_generation {
    nds_generation_kind kind;
    char value[NDS_GENERATION_MAX]; /**< NUL-terminated; meaningful only when kind == NDS_GEN_VALUE */
} nds_generation;

/** Bytes handed across the driver boundary. release (may be NULL) frees them; data may be read-only. */
typedef struct nds_bytes {
    const uint8_t *data;
    size_t len;
    void (*release)(void *release_ctx, const uint8_t *data);
    void *release_ctx;
} nds_bytes;

/** Releases b's storage and zeroes it. Accepts a zeroed struct. */
NDS_API void nds_bytes_release(nds_bytes *b);

/** Driver capability bits (nds_kvstore_capabilities). */
enum {
    NDS_KV_CAP_ATOMIC_CONDITIONAL_WRITE = 1u << 0, /**< if_equal writes are atomic */
    NDS_KV_CAP_ATOMIC_COMMIT = 1u << 1,            /**< multi-key commit is all-or-nothing */
    NDS_KV_CAP_BYTE_RANGE = 1u << 2,               /**< byte-range reads without reading the whole value */
    NDS_KV_CAP_READ_ONLY = 1u << 3,                /**< writes fail with NDS_EREADONLY */
    NDS_KV_CAP_LOCAL = 1u << 4, /**< reads come from memory or the page cache, never wait on a network */
    NDS_KV_CAP_STAGES_IN_MEMORY = 1u << 5, /**< stage holds values in memory until publish (lmdb) */
    /** The driver stacks on a base kvstore given as its spec member "base" (a spec object or a URL
     *  string). Its URL form is a pipeline segment "|NAME:REST" after the base's URL
     *  ("memory://x/|faulty:p/"); its parse_url (may be NULL: then REST must be empty) receives REST
     *  and fills the spec's members ("path" at least, when REST gives one). The base's path is taken
     *  as a directory (a '/' is appended when missing). Its url_base gives what precedes the path:
     *  the base's nds_kvstore_url followed by "|NAME:", so a handle's URL parses back to the same
     *  store. */
    NDS_KV_CAP_ADAPTER = 1u << 6,
    /** Reads see one version of the store at a time (the versioned adapter), shared by every
     *  handle a process has open on it: the latest when the first was opened, then each version
     *  the process commits, and the latest again after one of its conditional writes fails (or
     *  nds_versioned_refresh). Other processes' later commits are not seen before that, so a
     *  reader never mixes two versions. */
    NDS_KV_CAP_SNAPSHOT = 1u << 7,
    /** Reading byte ranges straight into the caller's buffers costs no more than reading the
     *  value (a local file's preadv): the core then reads chunks in place. */
    NDS_KV_CAP_READ_INTO = 1u << 8
};

#define NDS_READ_OPTIONS_VERSION 1
/** Options of nds_kvstore_read. Start from NDS_READ_OPTIONS_INIT. */
typedef struct nds_read_options {
    int version;
    nds_generation if_equal;     /**< read only if the stored generation equals this (else ABORTED) */
    nds_generation if_not_equal; /**< if the stored generation equals this, return UNCHANGED without bytes */
    int64_t byte_start;          /**< first byte; negative = that many bytes from the end (suffix) */
    int64_t byte_length;         /**< bytes to read; -1 = to the end */
} nds_read_options;
#define NDS_READ_OPTIONS_INIT {NDS_READ_OPTIONS_VERSION, {NDS_GEN_NONE, {0}}, {NDS_GEN_NONE, {0}}, 0, -1}

/** Outcome of a read. */
typedef enum nds_read_state {
    NDS_READ_VALUE = 0, /**< value holds the bytes (of the requested range) */
    NDS_READ_MISSING,   /**< the key does not exist; generation.kind == NDS_GEN_ABSENT */
    NDS_READ_UNCHANGED, /**< if_not_equal matched: no bytes */
    NDS_READ_ABORTED    /**< if_equal did not match: no bytes */
} nds_read_state;

/** Result of nds_kvstore_read; release with nds_read_result_dispose. */
typedef struct nds_read_result {
    nds_read_state state;
    nds_bytes value;           /**< owned by the result */
    nds_generation generation; /**< generation of what was read (or found) */
    uint64_t total_size;       /**< size of the whole stored value when known (ranged reads), else value.len */
} nds_read_result;

/** Releases the bytes of r. Accepts a zeroed struct. */
NDS_API void nds_read_result_dispose(nds_read_result *r);

#define NDS_WRITE_OPTIONS_VERSION 1
/** Options of nds_kvstore_write / nds_kvstore_delete. Start from NDS_WRITE_OPTIONS_INIT. */
typedef struct nds_write_options {
    int version;
    nds_generation if_equal; /**< write only if the stored generation equals this; ABSENT = create-only */
} nds_write_options;
#define NDS_WRITE_OPTIONS_INIT {NDS_WRITE_OPTIONS_VERSION, {NDS_GEN_NONE, {0}}}

/** Called once per key by nds_kvstore_list; key is relative to the handle's prefix and borrowed for the
 *  call. size is the value's size, or UINT64_MAX when not cheap to know. A non-zero return stops the listing
 *  and is returned by nds_kvstore_list. */
typedef int (*nds_list_fn)(void *ctx, const char *key, uint64_t size);

/**
 * Opens a kvstore from a spec: JSON text ({"driver":"file","path":"/d/a/"}) or a URL ("file:///d/a/",
 * "memory://x/", or a bare local path, taken as a file URL), followed by any kvstore adapters
 * ("memory://x/|faulty:p/": NDS_KV_CAP_ADAPTER).
 * @param out receives a new handle (free with nds_kvstore_free)
 * @param ctx context, or NULL for the default
 * @return 0, NDS_EINVAL (bad spec), NDS_ENOTFOUND (unknown driver), or the driver's error
 */
NDS_API int nds_kvstore_open(nds_kvstore **out, const char *spec, nds_context *ctx);
/** Drops a reference. Accepts NULL. */
NDS_API void nds_kvstore_free(nds_kvstore *kv);
/** Adds a reference; returns kv. */
NDS_API nds_kvstore *nds_kvstore_ref(nds_kvstore *kv);
/** A new handle on the same driver instance with the prefix joined with path ("a/b/"), as a directory:
 * empty and "." components are dropped, ".." removes the one before it, and a ".." that would climb
 * above the prefix is refused (NDS_EINVAL). */
NDS_API int nds_kvstore_sub(nds_kvstore **out, nds_kvstore *kv, const char *path);
/** The handle's URL ("file:///d/a/") for messages, with any credential in it shown as "***"
 * (nds_redact_secrets); borrowed for the handle's lifetime. */
NDS_API const char *nds_kvstore_url(const nds_kvstore *kv);
/** The key prefix ("" or ending in "/" when it names a directory), borrowed for the handle's lifetime. */
NDS_API const char *nds_kvstore_path(const nds_kvstore *kv);
/** The spec as JSON text; *out is malloc'd (free with nds_free). Credentials are never included. */
NDS_API int nds_kvstore_spec(const nds_kvstore *kv, char **out);
/** NDS_KV_CAP_* bits of the driver. */
NDS_API uint32_t nds_kvstore_capabilities(const nds_kvstore *kv);

/** Reads key. opts may be NULL. On success *out must be disposed. */
NDS_API int nds_kvstore_read(nds_kvstore *kv, const char *key, const nds_read_options *opts,
                             nds_read_result *out);
/** Writes key = data[0..len). opts may be NULL. new_gen (may be NULL) receives the written generation.
 *  @return 0, NDS_ECONFLICT when if_equal did not hold (nothing written), or an I/O error */
NDS_API int nds_kvstore_write(nds_kvstore *kv, const char *key, const void *data, size_t len,
                              const nds_write_options *opts, nds_generation *new_gen);
/** Deletes key (deleting a missing key succeeds unless if_equal says otherwise). */
NDS_API int nds_kvstore_delete(nds_kvstore *kv, const char *key, const nds_write_options *opts);
/** Lists the keys that start with prefix, in no particular order. */
NDS_API int nds_kvstore_list(nds_kvstore *kv, const char *prefix, nds_list_fn fn, void *ctx);
/** Deletes every key k with begin <= k < end (end "" = no upper bound). */
NDS_API int nds_kvstore_delete_range(nds_kvstore *kv, const char *begin, const char *end);

/** Frees memory that ndstore returned as malloc'd (spec strings and the like). Accepts NULL. */
NDS_API void nds_free(void *p);

#ifdef __cplusplus
}
#endif
#endif
