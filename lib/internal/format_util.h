/* Helpers every format needs the same way: chunk keys made of decimal grid indices, metadata
 * documents read, written and parsed member by member, specs turned into creation requests,
 * default chunk shapes and codec instances from metadata configs; the per-thread scratch buffers
 * (internal/scratch.h) come with it. Thread-safe: no shared state. */
#ifndef NDS_INTERNAL_FORMAT_UTIL_H
#define NDS_INTERNAL_FORMAT_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include "ndstore/box.h"
#include "ndstore/kvstore.h"
#include "ndstore/sys/buf.h"
#include "ndstore/sys/codec.h"
#include "ndstore/sys/format.h"
#include "internal/json_util.h"
#include "internal/scratch.h" /* the formats' scratch slots */

/**
 * Writes a chunk key into buf: prefix, then the rank indices of cell, each preceded by sep except
 * the first when prefix is empty ("0.1" for zarr v2, "c/0/1" for zarr v3 with prefix "c"). Rank 0
 * with an empty prefix is "0", zarr's convention. NDS_ERANGE when it does not fit in cap.
 */
int nds_chunk_key_format(char *buf, size_t cap, const char *prefix, char sep, const uint64_t *cell,
                         size_t rank);
/**
 * The inverse: 1 (and cell filled) when key is exactly what nds_chunk_key_format writes for some
 * cell whose every index d is below grid[d] (decimal, no leading zeros, no sign); else 0.
 */
int nds_chunk_key_parse(const char *key, const char *prefix, char sep, const uint64_t *grid,
                        size_t rank, uint64_t *cell);

/** Reads key (a metadata document): *found = false when it is missing (r is then empty); else r
 * holds it and must be disposed. Errors read "<who>: reading <key> of <url>: ...". */
int nds_format_read_key(nds_kvstore *kv, const char *key, const char *who, const char *url,
                        nds_read_result *r, bool *found);
/** Writes doc under key, printed in style, conditional on if_equal (NULL: unconditional).
 * NDS_ECONFLICT comes back as it is (the caller retries or reports); other errors read "<who>:
 * writing <key> of <url>". */
int nds_format_write_json(nds_kvstore *kv, const char *key, const json_object *doc,
                          const nds_json_style *style, const nds_generation *if_equal,
                          const char *who, const char *url);

/** A codec instance for config (numcodecs style: its "id" names the codec) and elem_size-byte
 * elements; *codec and *state are set only on success. NDS_EUNSUPPORTED "<doc>: <what> needs codec
 * \"<id>\", not registered" when no codec has that id; the codec's own errors are prefixed
 * "<doc>: <what>". */
int nds_format_codec_new(const json_object *config, size_t elem_size, const char *doc,
                         const char *what, const nds_codec **codec, void **state);
/** Decodes in[0..len) with codec c into out, which must come out exactly n bytes long;
 * NDS_ECORRUPT "<codec>: expected n bytes after decompression, found m" when it does not. */
int nds_codec_decode_exact(const nds_codec *c, void *state, const uint8_t *in, size_t len,
                           uint8_t *out, size_t n);
/** Decodes in[0..len) with codec c into out (replaced) when the decoded size is not known, only
 * bounded (variable-length chunks): into a buffer that starts at 4 x len (at least 64 KiB) and
 * grows x4 up to bound while the codec fails (codecs report a short buffer and corrupt input
 * alike, so corrupt input grows the buffer to the bound before its error comes out). */
int nds_codec_decode_grow(const nds_codec *c, void *state, const uint8_t *in, size_t len,
                          uint64_t bound, nds_buf *out);
/** Decodes a chunk's stored value with codec c as req asks (a part, through a reader, into a
 * sink: codec.h), its decoded size exactly n (req->cap is set to n), putting the bytes decoded
 * into the host's byte order in units of swap_unit (0 or 1: stored in the host's order): the
 * range of dst, or each piece before the sink sees it. An empty range decodes nothing. */
int nds_codec_decode_chunk(const nds_codec *c, void *state, nds_decode_request *req, size_t n,
                           size_t swap_unit);

/** Decodes chunk cell's stored bytes in[0..len) whole into out (the canonical chunk, n bytes)
 *  with format f's decode_chunk (instance state). @return 0 or decode_chunk's error */
int nds_format_decode_whole(const nds_format *f, void *state, const uint64_t *cell,
                            const uint8_t *in, size_t len, uint8_t *out, size_t n);

/** A default chunk shape for an array of rank dims of shape and itemsize-byte elements: about
 * target_bytes per chunk (at least one element), from the whole shape (a zero-length dimension
 * counts as 1) with the longest dimension halved until it fits. */
void nds_default_chunks(size_t rank, const uint64_t *shape, size_t itemsize, uint64_t target_bytes,
                        uint64_t *chunks);

/** One member of a metadata document: its name, its parser (given the member's value and the
 * caller's parse state) and whether a document must have it. */
typedef struct nds_doc_member {
    const char *name;
    int (*parse)(const json_object *v, const char *doc, void *state);
    bool required;
} nds_doc_member;

/** Parses the members of doc_json (a JSON object) that members[0..n) name, in table order (so a
 * parser may use what earlier ones stored in state). NDS_EFORMAT "<doc>: missing member \"<name>\""
 * for an absent required member; a parser's error comes back as it is. Members the table does not
 * name are the caller's business. */
int nds_doc_members_parse(const json_object *doc_json, const char *doc,
                          const nds_doc_member *members, size_t n, void *state);
/** Whether name is one of members[0..n). */
bool nds_doc_member_known(const nds_doc_member *members, size_t n, const char *name);

/** What a format does with the members of a spec while nds_format_request_from_spec builds a
 * request (a JSON object of metadata members) from it. */
typedef struct nds_spec_members {
    const char *who; /**< the format's name, which starts messages ("zarr", "zarr3") */
    /** Whether key (with value v) may stand in the spec's "metadata"; NULL: any member may. */
    bool (*known)(const char *key, const json_object *v);
    /** Adds what "schema" member key (value v) asks for to req; also given a top-level "dtype"
     * (TensorStore accepts it there). Errors name where. */
    int (*schema)(json_object *req, const char *key, const json_object *v, const char *where);
} nds_spec_members;

/** A new request from spec (NULL: an empty one): the "metadata" members copied as they are, the
 * "schema" members and a top-level "dtype" through m->schema. NDS_EINVAL when spec, "metadata" or
 * "schema" is not an object or a metadata member is not known; messages read "<who>: spec for
 * <where>: ...". *out is NULL after an error. */
int nds_format_request_from_spec(const json_object *spec, const char *where,
                                 const nds_spec_members *m, json_object **out);

/** Parses a unit as TensorStore writes dimension_units: "8nm" (size 8, name "nm"), "nm" (size 1),
 *  "" (dimensionless). NDS_EINVAL naming what otherwise. */
int nds_unit_parse(const char *text, const char *what, nds_unit *out);

#endif
