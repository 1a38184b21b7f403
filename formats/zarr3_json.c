/* JSON helpers shared by the zarr v3 files (zarr3_metadata.c, zarr3_shard.c): kept in a file of
 * their own below both, so that neither calls the other or the codec chain for them. Thread-safe:
 * no state. */
#include <stdint.h>

#include <json-c/json.h>

#include "zarr3_codecs.h"
#include "ndstore/box.h"
#include "internal/error.h"

int nds_z3_u64_list(const json_object *obj, const char *name, uint64_t min, const char *dp,
                    uint64_t *out, size_t *n) {
    json_object *v;
    const char *what = min ? "positive" : "non-negative";
    if (!json_object_object_get_ex(obj, name, &v))
        return nds_err(NDS_EFORMAT, "%s: missing member \"%s\"", dp, name);
    if (!json_object_is_type(v, json_type_array))
        return nds_err(NDS_EFORMAT, "%s: \"%s\" must be an array of %s integers", dp, name, what);
    size_t len = json_object_array_length(v);
    if (len > NDS_MAX_RANK)
        return nds_err(NDS_ELIMIT, "%s: \"%s\" has %zu dimensions; ndstore supports at most %d", dp,
                       name, len, NDS_MAX_RANK);
    for (size_t i = 0; i < len; i++) {
        json_object *e = json_object_array_get_idx(v, i);
        if (!json_object_is_type(e, json_type_int) || json_object_get_int64(e) < 0 ||
            json_object_get_uint64(e) < min)
            return nds_err(NDS_EFORMAT, "%s: \"%s\" must be an array of %s integers", dp, name,
                           what);
        out[i] = json_object_get_uint64(e);
    }
    *n = len;
    return 0;
}
