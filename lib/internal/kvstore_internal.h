/* What the core knows of a kvstore handle beyond the public API. */
#ifndef NDS_INTERNAL_KVSTORE_H
#define NDS_INTERNAL_KVSTORE_H

#include <stdbool.h>

#include <json-c/json.h>
#include "ndstore/kvstore.h"
#include "ndstore/sys/kv_driver.h"

/** Opens a kvstore from a parsed spec object ({"driver":..., "path":...}). */
int nds_kvstore_open_json(nds_kvstore **out, const json_object *spec, nds_context *ctx);
/**
 * Parses a kvstore URL BASEURL(|ADAPTER:REST)* into a new spec object: BASEURL is "file:///d/a/",
 * "memory://x/" or a bare path; each "|ADAPTER:REST" names a driver with NDS_KV_CAP_ADAPTER and
 * becomes {"driver":ADAPTER,"base":<the spec so far, its path made to end in '/'>} filled by the
 * adapter's parse_url(REST). Anything else after a '|' is NDS_EINVAL naming it and the url.
 */
int nds_kvstore_url_to_spec(const char *url, json_object **out);
/**
 * Splits an array URL KVURL(|ADAPTER:REST)*[|FORMAT:]: *kv_len receives the length of the kvstore
 * URL (every segment up to the last adapter), format (cap bytes) the format's name, or "" when the
 * last segment is an adapter or there is none. A non-adapter before the last segment, a format with
 * text after its ':', or a malformed segment is NDS_EINVAL, a last segment that is neither an
 * adapter nor a format NDS_ENOTFOUND, each naming it and the url. format is the format's name
 * also when the segment gives its URL scheme or an alias (nds_format_alias). The kvstore URL
 * itself is parsed by nds_kvstore_url_to_spec.
 */
int nds_url_split(const char *url, size_t *kv_len, char *format, size_t cap);
/** The spec as a new JSON object (credentials never included). */
int nds_kvstore_spec_json(const nds_kvstore *kv, json_object **out);
/**
 * Commits ops all-or-nothing through the driver's multi-key commit. kvs[i] is the handle of op i,
 * whose key is relative to it; every handle must be on one store (one driver instance, or instances
 * with equal specs). NDS_EUNSUPPORTED, before anything is written, when the driver has no multi-key
 * commit or the handles are on different stores. ops[i].new_generation is set on success.
 */
int nds_kvstore_commit(nds_kvstore *const *kvs, nds_kv_op *ops, size_t n);
/** A handle (with path) on a driver instance made in code (e.g. a transaction's staging wrapper); the
 *  handle owns state (driver->close runs when the last handle goes, and on failure here). */
int nds_kvstore_wrap(nds_kvstore **out, const nds_kv_driver *driver, void *state, nds_context *ctx,
                     const char *path);
/** A new handle on kv's driver instance with the given path (not joined: replaced). */
int nds_kvstore_with_path(nds_kvstore **out, nds_kvstore *kv, const char *path);
/** kv's driver state when kv's driver is driver, else NULL. */
void *nds_kvstore_driver_state(const nds_kvstore *kv, const nds_kv_driver *driver);
/** kv's NDS_KV_CAP_* bits as nds_kvstore_capabilities gives them, but found out now where they
 *  depend on what the store's server does (kv_driver.h instance_capabilities; key, relative to kv,
 *  is where the caller is about to write). why (cap bytes) gets what they rest on ("" when the
 *  driver's static bits hold). */
int nds_kvstore_capabilities_detect(nds_kvstore *kv, const char *key, uint32_t *caps, char *why,
                                    size_t cap);
/** An unconditional best-effort write of a key nobody writes conditionally (kv_driver.h
 *  write_hint; write where the driver has none). */
int nds_kvstore_write_hint(nds_kvstore *kv, const char *key, const void *data, size_t len);
/** nds_kvstore_write of the value iov[0..iovcnt) back to back (kv_driver.h write: the driver
 *  writes the pieces where they are, or gathers them). iovcnt 0 writes an empty value. */
int nds_kvstore_write_iov(nds_kvstore *kv, const char *key, const struct iovec *iov, size_t iovcnt,
                          const nds_write_options *opts, nds_generation *new_gen);
/** The context of the handle (never NULL). */
nds_context *nds_kvstore_context(const nds_kvstore *kv);

/** Whether kv's driver offers prepared commits (kv_driver.h prepare). */
bool nds_kvstore_can_prepare(const nds_kvstore *kv);
/** Writes through several handles: ops[i], its key relative to kvs[i], for i < n (keys are made
 *  full for the driver and given back relative, so ops is changed in between). */
typedef struct nds_kv_ops_across {
    nds_kvstore *const *kvs; /**< the handle of each op */
    nds_kv_op *ops;
    size_t n;
} nds_kv_ops_across;
/** Prepares writes (all on store's store) and side values side[0..m); token (cap bytes) gets the
 *  set's name. NDS_EUNSUPPORTED when the driver has no prepared commits. */
int nds_kvstore_prepare(nds_kvstore *store, const nds_kv_ops_across *writes,
                        const nds_kv_side *side, size_t m, char *token, size_t cap);
/** Reads a prepared set (keys are full keys); release with nds_kvstore_prepared_dispose. */
int nds_kvstore_prepared_read(nds_kvstore *kv, const char *token, nds_kv_prepared *out);
void nds_kvstore_prepared_dispose(nds_kvstore *kv, nds_kv_prepared *p);
/** Commits prepared sets tokens[0..n) plus the extra writes (all on store's store) as one
 *  version; message and metadata (JSON object text) describe it, either may be NULL. */
int nds_kvstore_commit_prepared(nds_kvstore *store, const char *const *tokens, size_t n,
                                const nds_kv_ops_across *extra, const char *message,
                                const char *metadata);
/** Whether the handle's driver offers two-phase writes (stage + publish, kv_driver.h). */
bool nds_kvstore_can_stage(const nds_kvstore *kv);
/** Whether reading into the caller's buffers is cheap on kv (NDS_KV_CAP_READ_INTO: a local
 *  file's preadv); every driver can, through kv_driver.h read's n > 0 form. */
bool nds_kvstore_can_read_into(const nds_kvstore *kv);
/** Reads bytes [offset, offset + the iov lengths' sum) of a key relative to kv into iov (kv_driver.h
 *  read with contiguous ranges): out gets state, generation and total_size, no value; a value too
 *  short for the span is NDS_ERANGE; iov is untouched for a missing key. */
int nds_kvstore_read_into(nds_kvstore *kv, const char *key, uint64_t offset, const struct iovec *iov,
                          size_t iovcnt, nds_read_result *out);
/** The same as nds_kvstore_can_read_into (one capability bit covers both). */
bool nds_kvstore_can_read_ranges(const nds_kvstore *kv);
/** kv_driver.h read's n > 0 form for a key relative to kv, without conditions (n == 0 too: state,
 *  generation and size, never a value). */
int nds_kvstore_read_ranges(nds_kvstore *kv, const char *key, const nds_byte_range *ranges,
                            size_t n, nds_read_result *out);
/** kv_driver.h read for a key relative to kv, both forms, with opts' conditions (NULL: none). */
int nds_kvstore_read_ranges_if(nds_kvstore *kv, const char *key, const nds_read_options *opts,
                               const nds_byte_range *ranges, size_t n, nds_read_result *out);
/** Stages a value for key (relative to the handle) where no reader sees it. Only when
 *  nds_kvstore_can_stage. */
int nds_kvstore_stage(nds_kvstore *kv, const char *key, const void *data, size_t len,
                      nds_kv_staged **out);
/** Publishes staged values (all from this handle's driver instance): see kv_driver.h. */
int nds_kvstore_publish(nds_kvstore *kv, nds_kv_staged **staged, nds_kv_publish *results,
                        size_t n);
/** Drops a staged value (NULL is ignored). */
void nds_kvstore_discard(nds_kvstore *kv, nds_kv_staged *staged);

#endif
