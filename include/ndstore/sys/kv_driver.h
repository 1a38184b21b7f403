/* Interface for kvstore driver authors (the model is SQLite's VFS: a versioned struct of methods).
 *
 * The core owns the key prefix: a driver receives full keys (prefix + relative key) and never sees a
 * relative one. A driver instance (state) must be internally synchronised: every method may be called from
 * many threads at once. Errors are reported with the nds_err* helpers of ndstore/sys/error.h
 * (message + cause) and returned as NDS_E* codes; each driver maps its foreign codes in one function.
 *
 * The struct: identity, then the required methods (open, close, url_base, read, write, list), then
 * optional ones, each NULL when not provided. One read method reads a whole value, a byte range, or
 * several ranges into the caller's buffers; one write method takes the value as pieces (iovecs)
 * and deletes when given none (iov NULL).
 */
#ifndef NDSTORE_SYS_KV_DRIVER_H
#define NDSTORE_SYS_KV_DRIVER_H

#include <sys/uio.h>

#include "ndstore/kvstore.h"
#include "ndstore/sys/error.h"

#ifdef __cplusplus
extern "C" {
#endif

struct json_object;

/* The interface's version. It changes at releases only, never per optimisation: a member that
 * is not needed is NULL ("not provided"), so new optional members need no new version within a
 * release. Registration refuses any other version. */
#define NDS_KV_DRIVER_VERSION 1

/** One byte range of a value for read: len bytes from offset, into the caller's buffer dst. */
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
    /* ---- identity ---- */
    /** NDS_KV_DRIVER_VERSION; registration refuses any other value. */
    uint32_t version;
    /** Spec "driver" value: "file", "memory". */
    const char *name;
    /** URL scheme ("file" for file://...), or NULL when the driver has no URL form. */
    const char *url_scheme;
    /** NDS_KV_CAP_* bits (nds_kvstore_capabilities; instance_capabilities may refine them). */
    uint32_t capabilities;

    /* ---- required ---- */
    /** Opens an instance from the kvstore spec (its "path" is handled by the core and may be ignored). */
    int (*open)(void **state, const struct json_object *spec);
    /** Closes an instance. Accepts NULL. */
    void (*close)(void *state);
    /** Writes the URL prefix that precedes a path ("file://", "memory://", "s3://bucket/") into buf. */
    void (*url_base)(void *state, char *buf, size_t cap);
    /**
     * Reads a full key: the one read method, in two forms.
     * n == 0 (ranges may be NULL): the value, or the byte range opts->byte_start/byte_length of it,
     * comes back in out->value as nds_kvstore_read describes (state, generation, total_size).
     * n > 0: bytes ranges[i].offset .. + ranges[i].len of the value land in ranges[i].dst, all from
     * one stored version with one lookup of the key; opts' byte range is ignored. out gets state,
     * generation and total_size, never a value. A range past the value's end is NDS_ERANGE, with
     * out->total_size still the value's size. dst buffers are untouched unless the state is
     * NDS_READ_VALUE, and undefined after an error.
     * Both forms: opts (never NULL) conditions apply (if_equal: NDS_READ_ABORTED, if_not_equal:
     * NDS_READ_UNCHANGED); a missing key is NDS_READ_MISSING with an absent generation.
     * nds_kv_read_ranges_span implements n > 0 on top of the n == 0 form.
     */
    int (*read)(void *state, const char *key, const nds_read_options *opts,
                const nds_byte_range *ranges, size_t n, nds_read_result *out);
    /**
     * Writes or deletes a full key: the value is iov[0..iovcnt) back to back (iovcnt 0, or pieces
     * of length 0, store an empty value); iov == NULL deletes the key. opts (never NULL) gives the
     * condition (if_equal; NDS_ECONFLICT when it fails, nothing changed); *new_gen (never NULL)
     * gets the new generation (absent after a delete). The driver writes the pieces where they are
     * (writev) or gathers them (nds_iov_gather); see nds_kvstore_write.
     */
    int (*write)(void *state, const char *key, const struct iovec *iov, size_t iovcnt,
                 const nds_write_options *opts, nds_generation *new_gen);
    /** Lists full keys starting with prefix; fn receives full keys. */
    int (*list)(void *state, const char *prefix, nds_list_fn fn, void *ctx);

    /* ---- optional, each on its own (NULL = not provided) ---- */
    /**
     * Fills spec (a JSON object) from the part of a URL after "scheme://", e.g. "/d/a/" for
     * file:///d/a/. Must set "path" (the key prefix) and any driver members (a bucket). An adapter
     * (NDS_KV_CAP_ADAPTER) receives the REST of its "|NAME:REST" segment. NULL = not provided: no
     * URL form (an adapter without it takes nothing after its ':').
     */
    int (*parse_url)(const char *rest, struct json_object *spec);
    /** Adds the driver's members (never credentials) to a spec object being printed. NULL = not
     *  provided: the spec as opened is printed. */
    int (*to_json)(void *state, struct json_object *spec);
    /** Deletes full keys in [begin, end) (end "" = unbounded). NULL = not provided: the core lists
     *  and deletes. */
    int (*delete_range)(void *state, const char *begin, const char *end);
    /** All-or-nothing multi-key conditional commit. NULL = not provided (NDS_EUNSUPPORTED). */
    int (*commit)(void *state, nds_kv_op *ops, size_t n);
    /**
     * This instance's NDS_KV_CAP_* bits, where they depend on its spec or on what its server
     * turned out to do (s3: with "conditional_writes": "off", or on a server without create-only
     * writes, conditional writes are not atomic). With detect_key (a full key the caller is about
     * to write near) an instance that has not found out yet does so now: it may send requests, and
     * writes only next to that key. Without it, what is not found out yet is reported as the
     * static bits. why (cap bytes; may be NULL) gets one line: what the bits rest on, and for a
     * missing bit what the user can do. NULL = not provided: the static capabilities hold.
     */
    int (*instance_capabilities)(void *state, const char *detect_key, uint32_t *caps, char *why,
                                 size_t cap);
    /**
     * An unconditional, best-effort write of a full key that nobody writes conditionally (a hint
     * such as the versioned store's "head"): the driver may skip what orders unconditional writes
     * against conditional writers of the same key (s3 in create_only mode: the key's lease, three
     * extra requests). NULL = not provided: write is used.
     */
    int (*write_hint)(void *state, const char *key, const uint8_t *data, size_t len);

    /* ---- optional, all three or none (NULL = not provided; registration checks) ---- */
    /**
     * Writes whose durability is paid once for many keys (file: one sync of many temp files and
     * one fsync per directory, instead of both per key).
     * stage stores a value for a full key where no reader can see it (nothing the key's readers
     * or its generation notice) and returns a token for it.
     * publish makes the n staged values durable together, then applies each in order exactly as
     * write(key, value, {if_equal}) would, setting results[i]; every token is consumed whatever
     * happens. When every value is applied or conflicted it returns 0; on any other failure it
     * returns that error (message set), and results[i].status tells, per value, 0 (applied and
     * durable), NDS_ECONFLICT, or an error (not applied).
     */
    int (*stage)(void *state, const char *key, const uint8_t *data, size_t len,
                 nds_kv_staged **out);
    /** See stage. */
    int (*publish)(void *state, nds_kv_staged **staged, nds_kv_publish *results, size_t n);
    /** Drops a staged value that will not be published. */
    void (*discard)(void *state, nds_kv_staged *staged);

    /* ---- optional, all four or none (NULL = not provided; registration checks) ---- */
    /**
     * Prepared commits (two-phase, across processes: the versioned adapter). prepare writes ops
     * (full keys, with their conditions) and side values where no reader sees them and names them
     * with a token (NUL-terminated text, at most cap bytes).
     */
    int (*prepare)(void *state, const nds_kv_op *ops, size_t n, const nds_kv_side *side,
                   size_t m, char *token, size_t cap);
    /** Reads a prepared set back (keys are full keys); released with prepared_dispose. */
    int (*prepared_read)(void *state, const char *token, nds_kv_prepared *out);
    /** Releases what prepared_read returned. */
    void (*prepared_dispose)(void *state, nds_kv_prepared *p);
    /**
     * Publishes the sets tokens[0..n) plus extra[0..nextra) (full keys; extra wins over a set's
     * write of the same key) all or nothing, applying the sets in token order; a condition that
     * fails is NDS_ECONFLICT (nothing written); a set already published is NDS_EINVAL. message
     * and metadata (JSON object text) describe the commit; either may be NULL.
     */
    int (*commit_prepared)(void *state, const char *const *tokens, size_t n, nds_kv_op *extra,
                           size_t nextra, const char *message, const char *metadata);
} nds_kv_driver;

/**
 * Registers a driver (replacing one of the same name). driver must stay valid while registered
 * (a static const table). Thread-safe.
 * @return 0, or NDS_EINVAL (message set) when it has no name, its version is not
 * NDS_KV_DRIVER_VERSION, or an all-or-none group (stage..., prepare...) is partly set
 */
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

/** The n == 0 form of a driver's read (kv_driver.h read), for nds_kv_read_ranges_span. */
typedef int (*nds_kv_read_value_fn)(void *state, const char *key, const nds_read_options *opts,
                                    nds_read_result *out);
/**
 * The n > 0 form of read built on the n == 0 form: one read_value of the span from the first
 * range's start to the last one's end (opts' conditions kept), then each range copied into its
 * dst. For a driver whose reads cost a request (one ranged GET covers all the ranges) or that
 * holds values in memory. out as read's n > 0 form describes (NDS_ERANGE when the value ends
 * before a range does, with out->total_size set).
 */
NDS_API int nds_kv_read_ranges_span(nds_kv_read_value_fn read_value, void *state, const char *key,
                                    const nds_read_options *opts, const nds_byte_range *ranges,
                                    size_t n, nds_read_result *out);
/**
 * Copies ranges[0..n) out of a value of total bytes held at data into their dst buffers.
 * @return 0, or NDS_ERANGE (message set, naming key) when a range reaches past total
 */
NDS_API int nds_byte_ranges_copy(const nds_byte_range *ranges, size_t n, const uint8_t *data,
                                 uint64_t total, const char *key);
/**
 * The value iov[0..iovcnt) of a write as one buffer: *data is the piece itself when there is at
 * most one (*owned NULL), else a malloc'd gathering of them that *owned holds (free() it).
 * @return 0 or NDS_ENOMEM (message set)
 */
NDS_API int nds_iov_gather(const struct iovec *iov, size_t iovcnt, const uint8_t **data,
                           size_t *len, uint8_t **owned);

/** A driver's write of one value held in one buffer (data NULL: a delete), as the driver's write
 *  member is for pieces. */
typedef int (*nds_kv_value_write_fn)(void *state, const char *key, const uint8_t *data, size_t len,
                                     const nds_write_options *opts, nds_generation *new_gen);
/**
 * The driver write member for a store that takes a value in one buffer: iov NULL passes the
 * delete on (data NULL), else the pieces gathered (nds_iov_gather: no copy for one piece) go to
 * write_value, and the gathering is freed after it.
 * @return write_value's result, or NDS_ENOMEM / NDS_ELIMIT from the gathering
 */
NDS_API int nds_kv_write_gathered(void *state, const char *key, const struct iovec *iov,
                                  size_t iovcnt, const nds_write_options *opts,
                                  nds_generation *new_gen, nds_kv_value_write_fn write_value);

#ifdef __cplusplus
}
#endif
#endif
