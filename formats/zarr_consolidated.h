/* Consolidated metadata of zarr hierarchies (issue 20): zarr v2 `.zmetadata` as zarr-python's
 * consolidate_metadata writes it, and zarr v3 "consolidated_metadata" inline in a group's zarr.json
 * as zarr-python 3 writes it. Shared by formats/zarr2.c and formats/zarr3.c: parsing and checking,
 * finding the consolidated copy that covers an array (its ancestors, nearest first), and building
 * it by listing a hierarchy. A consolidated copy is a snapshot: the formats use it only when the
 * spec asks ("consolidated": true) and only for read-only handles (see docs/formats.md).
 */
#ifndef NDS_FORMATS_ZARR_CONSOLIDATED_H
#define NDS_FORMATS_ZARR_CONSOLIDATED_H

#include <stdbool.h>
#include <stddef.h>
#include <json-c/json.h>
#include "ndstore/kvstore.h"

/* Largest consolidated document read (bytes): a bigger one is refused, not parsed. */
#define NDS_ZC_MAX_BYTES ((size_t)256 << 20)
/* Most entries a consolidated document may hold. */
#define NDS_ZC_MAX_ENTRIES 1000000u

typedef enum nds_zc_layout {
    NDS_ZC_V2, /* .zmetadata: {"zarr_consolidated_format": 1, "metadata": {"a/.zarray": {...}}} */
    NDS_ZC_V3  /* zarr.json: {"consolidated_metadata": {"kind": "inline", "metadata": {"a": {...}}}} */
} nds_zc_layout;

/** The key that holds layout's consolidated copy (".zmetadata" or "zarr.json"). */
const char *nds_zc_key(nds_zc_layout layout);

/**
 * Checks a parsed consolidated document and sets *entries (borrowed from doc) to its map of
 * relative path -> metadata document. v3: doc is a group's zarr.json; *entries = NULL (and 0) when
 * it has no consolidated metadata (or is not a group). Errors (NDS_EFORMAT / NDS_EUNSUPPORTED /
 * NDS_ELIMIT) name name and the member or entry at fault.
 */
int nds_zc_entries(nds_zc_layout layout, const json_object *doc, const char *name,
                   json_object **entries);

/** Reads and checks the consolidated copy at kv's key (nds_zc_key): *doc (owned) and *entries
 *  (borrowed from it; NULL for a v3 node without one). *found = false when the key is missing. */
int nds_zc_read(nds_kvstore *kv, nds_zc_layout layout, bool *found, json_object **doc,
                json_object **entries);

/** The consolidated copy that covers an array: the group's URL, its document and the array's
 *  path relative to the group ("a/b", no trailing '/'). */
typedef struct nds_zc_found {
    json_object *doc;     /* owned */
    json_object *entries; /* borrowed from doc */
    char *rel;            /* owned */
    char group_url[512];  /* for messages */
} nds_zc_found;

/**
 * Looks for consolidated metadata covering the array at kv's path: reads the parent's key, then
 * each further ancestor's up to the store's root, and stops at the first consolidated copy (one
 * read per level; an array directly under its consolidated group costs one). NDS_ENOTFOUND (no
 * message set) when none, or when a level may not be read (NDS_EPERM: the search ends there);
 * other errors reading or checking a copy that is there are returned.
 */
int nds_zc_find(nds_kvstore *kv, nds_zc_layout layout, nds_zc_found *out);
void nds_zc_found_dispose(nds_zc_found *f);

/** The consolidated document of the array's member: v2 name ".zarray" / ".zattrs"; v3 NULL (the
 *  array's zarr.json). NULL when the copy has no such entry. Borrowed. */
json_object *nds_zc_lookup(const nds_zc_found *f, const char *name);

/** What nds_zc_open_entry found (both owned by the caller). */
typedef struct nds_zc_entry {
    json_object *doc;   /**< the array's metadata document, or NULL */
    json_object *attrs; /**< v2: its attributes ({} when the copy holds no .zattrs); v3: NULL */
} nds_zc_entry;

/**
 * The open hook of zarr2.c / zarr3.c. When spec asks ("consolidated": true) and mode does not
 * create: the consolidated copy of the array's metadata (v2: its ".zarray" entry; v3: its node's
 * entry) deep-copied into out->doc, doc_name (cap bytes) naming where it came from, and for v2
 * out->attrs. out->doc = NULL and 0 when not asked, or when no copy covers the array or the copy
 * has no entry for it: the caller reads the array's own key. Errors of a copy that is there but
 * malformed are returned.
 */
int nds_zc_open_entry(nds_kvstore *kv, const json_object *spec, unsigned mode,
                      nds_zc_layout layout, nds_zc_entry *out, char *doc_name, size_t cap);

/**
 * Builds the consolidated copy of the hierarchy under kv (a group) by listing it and reading
 * every metadata document, and writes it (v2: .zmetadata, replaced; v3: into the group's
 * zarr.json, conditional on the generation read). *count (may be NULL) gets the number of
 * documents consolidated.
 */
int nds_zc_consolidate(nds_kvstore *kv, nds_zc_layout layout, size_t *count);

#endif
