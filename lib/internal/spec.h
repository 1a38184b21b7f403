/* Array specs: JSON text, "@file.json", or URLs ("file:///d/a|zarr:", a bare path) into one JSON
 * shape. */
#ifndef NDS_INTERNAL_SPEC_H
#define NDS_INTERNAL_SPEC_H

#include <json-c/json.h>

/**
 * Parses spec text into a new JSON object with at least "kvstore" (an object); "driver" is absent
 * when the format must be detected from the stored metadata.
 */
int nds_spec_parse(const char *text, json_object **out);
/** Open mode bits from the spec's "open", "create", "delete_existing" members (default: open only).
 */
int nds_spec_mode(const json_object *spec, unsigned *mode);

#endif
