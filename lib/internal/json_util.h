/* json-c helpers that report errors naming the member and the document.
 * doc is a short description for messages, e.g. "zarr: .zarray of file:///d/a/". */
#ifndef NDS_INTERNAL_JSON_UTIL_H
#define NDS_INTERNAL_JSON_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>
#include "ndstore/sys/buf.h"

/** Parses text[0..len) (need not be NUL-terminated) into *out. NDS_EFORMAT "doc: invalid json: ..."
 *  An integer literal beyond int64/uint64 (which json-c clamps) is marked: nds_json_int_overflowed
 *  is 1 for it (readers of numbers refuse it), and serialising it (json_object_to_json_string*,
 *  nds_json_print, after json_object_deep_copy too) writes the literal as it was, digit for digit,
 *  so documents passed through never change such numbers. */
int nds_json_parse(const char *text, size_t len, const char *doc, json_object **out);
/** 1 when v is an integer whose literal in the parsed text did not fit 64 bits (json-c clamped it);
 *  only values from nds_json_parse are marked. */
bool nds_json_int_overflowed(const json_object *v);
/** NDS_EFORMAT "doc: "member" <literal> does not fit 64 bits" when nds_json_int_overflowed(v). */
int nds_json_check_fits(const json_object *v, const char *doc, const char *member);
/** A required member of obj (must be a JSON object). NDS_EFORMAT naming it when missing. */
int nds_json_member(const json_object *obj, const char *key, const char *doc, json_object **out);
/** Reads an integer member into *out (>= min, <= max). Missing: NDS_EFORMAT unless optional (then
 * *out is left alone and 0 returned). Non-integer or out of range: NDS_EFORMAT naming it. */
int nds_json_get_int(const json_object *obj, const char *key, bool optional, int64_t min,
                     int64_t max, const char *doc, int64_t *out);
/** Reads a string member; *out is borrowed from obj. Missing and optional: *out unchanged, 0
 * returned. */
int nds_json_get_string(const json_object *obj, const char *key, bool optional, const char *doc,
                        const char **out);
/** Reads a boolean member. Missing and optional: *out unchanged, 0 returned. */
int nds_json_get_bool(const json_object *obj, const char *key, bool optional, const char *doc,
                      bool *out);
/** Reads an array of non-negative integers (each <= max) into out[0..*n); *n <= cap else
 * NDS_EFORMAT. */
int nds_json_get_u64_array(const json_object *obj, const char *key, const char *doc, uint64_t max,
                           uint64_t *out, size_t cap, size_t *n);
/** Duration text: "250ms", "1.5s", "2m", or (bare_seconds) a plain number of seconds, into
 *  milliseconds (0 to one day); false when malformed. Spec members and environment variables. */
bool nds_duration_ms(const char *text, bool bare_seconds, long *out);
/** A duration spec member v (named member, for messages prefixed "who: "): "250ms", "1.5s", "2m", or a
 *  number of seconds; into milliseconds, 0 .. 1 day. NDS_EINVAL naming the member otherwise. */
int nds_json_duration_ms(json_object *v, const char *who, const char *member, long *out);
/** Serialises obj as compact text; malloc'd (free with free). NULL on failure. */
char *nds_json_to_string(const json_object *obj, bool pretty);
/** How nds_json_print lays a document out. */
typedef struct nds_json_style {
    int indent;              /* spaces per level */
    bool sort_keys;          /* object members in sorted order (else insertion order) */
    bool flat_scalar_arrays; /* arrays holding no containers on one line: [1, 2] */
    bool python_scalars; /* Python's json.dumps scalars: repr(float), NaN/Infinity, ensure_ascii */
    bool trailing_newline;
} nds_json_style;
/** zarr-python v2's style (json.dumps(indent=4, sort_keys=True, ensure_ascii=True)). */
extern const nds_json_style nds_json_style_python;
/** zarr v3's style as zarrita writes it (2 spaces, insertion order, flat scalar arrays, final
 * newline). */
extern const nds_json_style nds_json_style_zarr3;
/** Prints v into out (replacing its contents) in the given style. */
int nds_json_print(const json_object *v, const nds_json_style *style, nds_buf *out);

/** 1 when a and b are equal JSON values (objects compared member by member, any order). */
bool nds_json_equal(const json_object *a, const json_object *b);

#endif
