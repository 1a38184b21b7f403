/* Readers of precomputed info members and the member-name tables, shared by the four files that
 * handle the info: precomputed_metadata.c (parsing an info, where the readers live),
 * precomputed_request.c (what a spec asks for), precomputed_match.c (a request against a stored
 * volume) and precomputed_create.c (new documents).
 *
 * Private to formats/precomputed*.c. Reentrant. Errors are NDS_EFORMAT naming the member and doc.
 */
#ifndef NDS_FORMATS_PRECOMPUTED_MEMBERS_H
#define NDS_FORMATS_PRECOMPUTED_MEMBERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

#include "precomputed_metadata.h"

/** Room for a document name with a member path ("<doc>: scales[3]: sharding"). */
#define NDS_PC_DOC_MAX 700
/** Largest voxel_offset magnitude, so offset + size never overflows an int64 chunk key. */
#define NDS_PC_OFFSET_MAX (INT64_C(1) << 62)

/** The info spellings of the encodings, indexed by nds_pc_encoding. */
extern const char *const nds_pc_encodings[4];
/** The scale members a spec may give (info names; "chunk_size" for one "chunk_sizes" entry). */
extern const char *const nds_pc_scale_names[10];

/** Whether k is one of names[0..n). */
bool nds_pc_in_list(const char *k, const char *const *names, size_t n);

/** An integer value (json int, or a double holding an exact integer); false otherwise. */
bool nds_pc_as_int(const json_object *v, int64_t *out);
/** v must be an array of exactly 3 integers in [min, max]; name is the member, for messages. */
int nds_pc_triple_int(const json_object *v, const char *name, int64_t min, int64_t max,
                      const char *doc, int64_t *out);
/** As nds_pc_triple_int, for values in [min, 2^53]. */
int nds_pc_triple_u64(const json_object *v, const char *name, int64_t min, const char *doc,
                      uint64_t *out);
/** v must be an array of exactly 3 finite numbers above 0. */
int nds_pc_triple_positive(const json_object *v, const char *name, const char *doc, double *out);
/** String member key of obj compared case-insensitively with names[0..n); *out = its index (left
 * alone when optional and absent). */
int nds_pc_choice(const json_object *obj, const char *key, bool optional, const char *const *names,
                  size_t n, const char *doc, int *out);
/** A "sharding" member (NULL or json null: unsharded). */
int nds_pc_parse_sharding(const json_object *v, const char *doc, nds_pc_sharding *s);
/** The "data_type" member of info; NDS_EUNSUPPORTED for types precomputed has no name for. */
int nds_pc_parse_dtype(const json_object *info, const char *doc, nds_dtype *out);
/** A new json array [v[0], v[1], v[2]]. */
json_object *nds_pc_triple_json(const int64_t *v);

#endif
