/* Interface for kvstore driver authors (the model is SQLite's VFS: a versioned struct of methods).
 *
 * The core owns the key prefix: a driver receives full keys (prefix + relative key) and never sees a
 * relative one. A driver instance (state) must be internally synchronised: every method may be called from
 * many threads at once. Errors are reported with the internal nds_err* helpers (message + cause) and
 * returned as NDS_E* codes; each driver maps its foreign codes in one function.
 */
#ifndef NDSTORE_SYS_KV_DRIVER_H
#define NDSTORE_SYS_KV_DRIVER_H

#include <sys/uio.h>

#include "ndstore/kvstore.h"

#ifdef __cplusplus
extern "C" {
#endif

struct json_object;

/* 2 added stage/publish/discard; 3 added read_into; 4 added read_ranges. Drivers built for an
 * older version still register (without those). */
#define NDS_KV_DRIVER_VERSION 4

/** One byte range of a value for read_ranges: len bytes from offset, into dst. */
typedef struct nds_byte_range {
    uint64_t offset;
    size_t len;
    uint8_t *dst;
} nds_byte_range;

/** One write of a multi-key commit. */
typedef struct nds_kv_op {
    const char *key;           /**< full key */
    const uint8_t *data;       /**< value, or NULL to delete */
    size_t len;
    nds_generation if_equal;   /**< condition (NONE = unconditional) */
    nds_generation new_generation; /**< set by commit on success */
} nds_kv_op;

/** A value written by a driver's stage method where no reader sees it yet (driver-defined). */
typedef struct nds_kv_staged nds_kv_staged;

/** One write of a publish: its condition in, its outcome out. */
typedef struct nds_kv_publish {
    nds_generation if_equal;       /**< condition (NONE = unconditional) */
    nds_generation new_generation; /**< set when status is 0 */
    int status;                    /**< 0 applied, NDS_ECONFLICT, or the error that stopped it */
} nds_kv_publish;

/** A value a prepared set keeps for its committer only, never committed as a key (the elements and
 *  mask of a chunk written in part, merged into the chunk at commit). */
typedef struct nds_kv_side {
    const char *name;
    const uint8_t *data;
    size_t len;
} nds_kv_side;

/** Values up to this size come back with their bytes from prepared_read (metadata documents). */
#define NDS_KV_PREPARED_SMALL ((size_t)64 << 10)

/** One write of a prepared set, as prepared_read returns it. */
typedef struct nds_kv_prepared_op {
    const char *key;         /**< full key */
    int is_delete;
    const uint8_t *data;     /**< the value when len <= NDS_KV_PREPARED_SMALL, else NULL */
    size_t len;
    nds_generation if_equal; /**< its condition */
} nds_kv_prepared_op;

/** A prepared set read back (prepared_read); released with prepared_dispose. */
typedef struct nds_kv_prepared {
    nds_kv_prepared_op *ops;
    size_t nops;
    nds_kv_side *side;
    size_t nside;
    void *internal; /**< the driver's */
} nds_kv_prepared;

typedef struct nds_kv_driver {
    /** NDS_KV_DRIVER_VERSION; checked at registration. Members are only appended. */
    uint32_t version;
    /** Spec "driver" value: "file", "memory". */
    const char *name;
    /** URL scheme ("file" for file://...), or NULL when the driver has no URL form. */
    const char *url_scheme;
    /** NDS_KV_CAP_* bits. */
    uint32_t capabilities;
    /**
     * Fills spec (a JSON object) from the part of a URL after "scheme://", e.g. "/d/a/" for file:///d/a/.
     * Must set "path" (the key prefix) and any driver members (a bucket). NULL if url_scheme is NULL,
     * except for an adapter (NDS_KV_CAP_ADAPTER): it receives the REST of its "|NAME:REST" segment.
     */
    int (*parse_url)(const char *rest, struct json_object *spec);
    /** Opens an instance from the kvstore spec (its "path" is handled by the core and may be ignored). */
    int (*open)(void **state, const struct json_object *spec);
    /** Closes an instance. Accepts NULL. */
    void (*close)(void *state);
    /** Writes the URL prefix that precedes a path ("file://", "memory://", "s3://bucket/") into buf. */
    void (*url_base)(void *state, char *buf, size_t cap);
    /** Adds the driver's members (never credentials) to a spec object being printed. May be NULL. */
    int (*to_json)(void *state, struct json_object *spec);
    /** Reads a full key; see nds_kvstore_read. */
    int (*read)(void *state, const char *key, const nds_read_options *opts, nds_read_result *out);
    /** Writes (data != NULL) or deletes (data == NULL) a full key; see nds_kvstore_write. */
    int (*write)(void *state, const char *key, const uint8_t *data, size_t len,
                 const nds_write_options *opts, nds_generation *new_gen);
    /** Lists full keys starting with prefix; fn receives full keys. */
    int (*list)(void *state, const char *prefix, nds_list_fn fn, void *ctx);
    /** Deletes full keys in [begin, end) (end "" = unbounded). May be NULL: the core lists and deletes. */
    int (*delete_range)(void *state, const char *begin, const char *end);
    /** All-or-nothing multi-key conditional commit. NULL when not supported. */
    int (*commit)(void *state, nds_kv_op *ops, size_t n);
    /* ---- version 2 ---- */
    /**
     * Optional, all three or none: writes whose durability is paid once for many keys (file: one
     * sync of many temp files and one fsync per directory, instead of both per key).
     * stage stores a value for a full key where no reader can see it (nothing the key's readers
     * or its generation notice) and returns a token for it.
     * publish makes the n staged values durable together, then applies each in order exactly as
     * write(key, value, {if_equal}) would, setting results[i]; every token is consumed whatever
     * happens. When every value is applied or conflicted it returns 0; on any other failure it
     * returns that error (message set), and results[i].status tells, per value, 0 (applied and
     * durable), NDS_ECONFLICT, or an error (not applied).
     * discard drops a staged value that will not be published.
     */
    int (*stage)(void *state, const char *key, const uint8_t *data, size_t len,
                 nds_kv_staged **out);
    int (*publish)(void *state, nds_kv_staged **staged, nds_kv_publish *results, size_t n);
    void (*discard)(void *state, nds_kv_staged *staged);
    /* ---- version 3 ---- */
    /**
     * Optional: reads bytes [offset, offset + the iov lengths' sum) of a full key's value straight
     * into the caller's buffers (a value stored as it is used lands in place, with no copy in
     * between). out gets state (VALUE or MISSING), generation and total_size as read sets them, and
     * no value. A value too short for the span is NDS_ERANGE. The buffers are untouched for a
     * missing key and undefined after an error.
     */
    int (*read_into)(void *state, const char *key, uint64_t offset, const struct iovec *iov,
                     size_t iovcnt, nds_read_result *out);
    /* ---- version 4 ---- */
    /**
     * Optional: read_into for several ranges of one value, all from one stored version with one
     * lookup of the key (the parts of a value a region needs, where one span from the first to
     * the last would read several times the bytes). out as for read_into; a range past the
     * value's end is NDS_ERANGE, with out's total_size still the value's size.
     */
    int (*read_ranges)(void *state, const char *key, const nds_byte_range *ranges, size_t n,
                       nds_read_result *out);
    /* ---- optional, all four or none (no version change: NULL = not provided) ---- */
    /**
     * Prepared commits (two-phase, across processes: the versioned adapter). prepare writes ops
     * (full keys, with their conditions) and side values where no reader sees them and names them
     * with a token (NUL-terminated text, at most cap bytes). prepared_read reads a set back.
     * commit_prepared publishes the sets tokens[0..n) plus extra[0..nextra) (full keys; extra wins
     * over a set's write of the same key) all or nothing, applying the sets in token order; a
     * condition that fails is NDS_ECONFLICT (nothing written); a set already published is
     * NDS_EINVAL. message and metadata (JSON object text) describe the commit; either may be NULL.
     */
    int (*prepare)(void *state, const nds_kv_op *ops, size_t n, const nds_kv_side *side,
                   size_t m, char *token, size_t cap);
    int (*prepared_read)(void *state, const char *token, nds_kv_prepared *out);
    void (*prepared_dispose)(void *state, nds_kv_prepared *p);
    int (*commit_prepared)(void *state, const char *const *tokens, size_t n, nds_kv_op *extra,
                           size_t nextra, const char *message, const char *metadata);
    /* ---- optional, each on its own (no version change: NULL = not provided) ---- */
    /**
     * This instance's NDS_KV_CAP_* bits, where they depend on its spec or on what its server
     * turned out to do (s3: with "conditional_writes": "off", or on a server without create-only
     * writes, conditional writes are not atomic). NULL: the static capabilities hold. With
     * detect_key (a full key the caller is about to write near) an instance that has not found
     * out yet does so now: it may send requests, and writes only next to that key. Without it,
     * what is not found out yet is reported as the static bits. why (cap bytes; may be NULL)
     * gets one line: what the bits rest on, and for a missing bit what the user can do.
     */
    int (*instance_capabilities)(void *state, const char *detect_key, uint32_t *caps, char *why,
                                 size_t cap);
    /**
     * An unconditional, best-effort write of a full key that nobody writes conditionally (a hint
     * such as the versioned store's "head"): the driver may skip what orders unconditional writes
     * against conditional writers of the same key (s3 in create_only mode: the key's lease, three
     * extra requests). NULL: write is used.
     */
    int (*write_hint)(void *state, const char *key, const uint8_t *data, size_t len);
    /**
     * write of a value given in pieces: the value is iov[0..iovcnt) back to back (iovcnt >= 1),
     * with write's conditions, durability and results. The driver writes the pieces where they
     * are (writev), so a large value built of parts is never gathered into one buffer. NULL: the
     * core gathers the pieces and calls write.
     */
    int (*write_iov)(void *state, const char *key, const struct iovec *iov, size_t iovcnt,
                     const nds_write_options *opts, nds_generation *new_gen);
} nds_kv_driver;

/** Registers a driver (replacing one of the same name). @return 0, or NDS_EINVAL on a bad version */
NDS_API int nds_kv_driver_register(const nds_kv_driver *driver);

/** Sets g to a value generation with the given text (truncated to fit). */
NDS_API void nds_generation_set(nds_generation *g, const char *value);
/** 1 when a and b denote the same generation (NONE never equals anything), else 0. */
NDS_API int nds_generation_equal(const nds_generation *a, const nds_generation *b);
/**
 * Checks a write condition against the current generation: 1 when if_equal is NONE, or equals current
 * (ABSENT matches a missing key, i.e. current->kind == NDS_GEN_ABSENT).
 */
NDS_API int nds_generation_satisfies(const nds_generation *if_equal, const nds_generation *current);
/** Makes b own a malloc'd copy of data[0..len). @return 0 or NDS_ENOMEM */
NDS_API int nds_bytes_copy(nds_bytes *b, const void *data, size_t len);
/** Makes b own malloc'd memory p (freed with free()). */
NDS_API void nds_bytes_take(nds_bytes *b, uint8_t *p, size_t len);
/**
 * Resolves a byte range against a value of size total: sets *off and *len (clamped to the value).
 * @return 0, or NDS_ERANGE when the range starts beyond the end
 */
NDS_API int nds_byte_range_resolve(const nds_read_options *opts, uint64_t total, uint64_t *off, uint64_t *len);

#ifdef __cplusplus
}
#endif
#endif
