/* What the core knows of a kvstore handle beyond the public API. */
#ifndef NDS_INTERNAL_KVSTORE_H
#define NDS_INTERNAL_KVSTORE_H

#include <json-c/json.h>
#include "ndstore/kvstore.h"

/** Opens a kvstore from a parsed spec object ({"driver":..., "path":...}). */
int nds_kvstore_open_json(nds_kvstore **out, const json_object *spec, nds_context *ctx);
/** Parses a kvstore URL ("file:///d/a/", "memory://x/", or a bare path) into a new spec object. */
int nds_kvstore_url_to_spec(const char *url, json_object **out);
/** The spec as a new JSON object (credentials never included). */
int nds_kvstore_spec_json(const nds_kvstore *kv, json_object **out);
/** The context of the handle (never NULL). */
nds_context *nds_kvstore_context(const nds_kvstore *kv);

#endif
