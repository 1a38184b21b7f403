/* OME-Zarr (OME-NGFF 0.4 and 0.5) metadata for the command line (issue 21): reading a dataset's
 * physical frame from the multiscale group around it, and writing a group's "multiscales".
 *
 * The library opens a dataset of an OME-Zarr group as the plain zarr array it is (its own metadata
 * holds no units); the physical frame lives in the parent group's attributes. Reading it would make
 * the zarr formats read a node above the array they open, so the command line does it instead:
 * cli_physical_of looks at the array's kvstore URL, and the group one to three levels above it.
 * Threading: none. Ownership: as each function says.
 */
#ifndef NDS_CLI_OME_H
#define NDS_CLI_OME_H

#include "cli.h"

/** Where an array sits in physical space, per dimension: one index step is units[d] (size 0: no
 *  physical unit), and domain coordinate 0 is at offset[d] units[d].name. */
typedef struct cli_physical {
    size_t rank;
    nds_unit units[NDS_MAX_RANK];
    double offset[NDS_MAX_RANK];
    bool from_ome; /* the frame is the OME-Zarr group's (the array's own metadata has none) */
} cli_physical;

/** The physical frame of a: the array's own units (nds_array_units, offset 0) when it has any,
 *  else, for a zarr dataset of an OME-Zarr multiscale group, the group's axes units times the
 *  dataset's scale, and its translation. What the group says that cannot be used (an unknown
 *  unit, a list of the wrong length, a value that is not a positive finite number) is ignored,
 *  with a note on stderr naming it. Never fails: no frame is all sizes 0. Reads up to six small
 *  documents (zarr.json and .zattrs, one to three levels up) from the array's store; on a store
 *  that is not local (http, s3, gcs) only when remote_too: info, whose remote opens cost two
 *  requests from consolidated metadata, does not spend six more looking for a group. */
void cli_physical_of(nds_array *a, bool remote_too, cli_physical *out);

/** The short unit name ("nm") of an OME axis unit ("nanometer"), and in *factor the short units per
 *  OME unit ("angstrom": "pm", 100); NULL for a unit ndstore does not convert. */
const char *cli_ome_unit_short(const char *ome, double *factor);
/** The OME axis unit ("nanometer") of a short unit name ("nm"); NULL when there is none. */
const char *cli_ome_unit_long(const char *name);

/** The JSON document at key of kv (at most 16 MiB), or NULL when missing or not JSON. */
json_object *cli_ome_read_json(nds_kvstore *kv, const char *key);
/** The first multiscale of a group's attributes (under "ome" in OME-Zarr 0.5), when it has a
 *  "datasets" list; else NULL. Borrowed from attrs. */
json_object *cli_ome_multiscale(json_object *attrs);
/** The group document under kv with an OME-Zarr multiscale (zarr.json attributes, then zarr v2
 *  .zattrs): *doc (put by the caller; NULL when none), *ms in it, *format "zarr3" or "zarr". */
void cli_ome_find_group(nds_kvstore *kv, json_object **doc, json_object **ms, const char **format);

/** Axis names for an OME multiscale of src's dimensions into names: a precomputed volume's x, y, z,
 *  c; a zarr v3 array's dimension_names; an N5 array's "axes" attribute; else OME's t, c, z, y, x
 *  from the right ("" beyond five). */
void cli_ome_axis_names(nds_array *src, char names[][64]);
/** A new multiscale object {"axes": [...], "datasets": []}: each axis its name, its type (space:
 *  x, y, z and any axis with a unit; time: t; channel: c) and its OME unit where units[d] is a
 *  length ndstore knows ("nm" -> "nanometer"). New object: the caller owns it. */
json_object *cli_ome_multiscale_new(size_t rank, char names[][64], const char *const *units);
/** Appends dataset path with its scale (and translation, unless NULL) to ms's datasets. */
void cli_ome_add_dataset(json_object *ms, const char *path, size_t rank, const double *scale,
                         const double *translation);
/** Before anything is written: the zarr v3 group at kvurl (a directory URL), or nothing there; an
 *  array (or any other zarr.json) is refused. CLI_OK, or CLI_FAIL (printed). */
int cli_ome_check_group(const char *kvurl, nds_context *ctx);
/** Writes the group zarr.json at kvurl with attributes.ome = {"version": "0.5", "multiscales":
 *  [ms]} (ms taken), keeping a group's other attributes. CLI_OK, or CLI_FAIL (printed). */
int cli_ome_write_group(const char *kvurl, nds_context *ctx, json_object *ms);

#endif
