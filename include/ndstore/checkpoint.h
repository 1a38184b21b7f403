/* Checkpoint commit markers: how many writers (processes, hosts) tell readers that a set of arrays is
 * complete. Every writer writes its part; when all have finished, one of them (the coordinator) writes the
 * marker, last. A reader that finds the marker knows every array it names is complete; without it the
 * checkpoint is partial, whatever chunks are present. The marker is written create-only, so it can never be
 * written twice or overwritten.
 *
 * The marker is the key "<name>.checkpoint.json" under a kvstore prefix (the checkpoint's directory),
 * holding {"checkpoint": name, "arrays": [paths relative to that prefix], "created": unix seconds,
 * "ndstore": version}.
 */
#ifndef NDSTORE_CHECKPOINT_H
#define NDSTORE_CHECKPOINT_H

#include <stddef.h>
#include "ndstore/version.h"
#include "ndstore/context.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Writes the marker of checkpoint name under the kvstore kvstore_spec (URL or JSON), after checking that
 * each of the n arrays (paths relative to the kvstore, e.g. "layer1/w") opens.
 * @return 0; NDS_EEXIST when the marker exists already; NDS_ENOTFOUND naming an array that does not open;
 *         NDS_EINVAL for a name with '/' or an empty name
 */
NDS_API int nds_checkpoint_mark(const char *kvstore_spec, const char *name, const char *const *arrays, size_t n,
                                nds_context *ctx);

/**
 * Looks for the marker. *complete = 1 when present (then *marker_json, if not NULL, receives its text,
 * malloc'd: nds_free), 0 when absent. @return 0 or a storage / format error (a marker that is not valid
 * JSON is NDS_ECORRUPT)
 */
NDS_API int nds_checkpoint_status(const char *kvstore_spec, const char *name, int *complete, char **marker_json,
                                  nds_context *ctx);

#ifdef __cplusplus
}
#endif
#endif
