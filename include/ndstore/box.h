/* Boxes: per-dimension start/stop/step selections of an array, and NumPy-style region strings. */
#ifndef NDSTORE_BOX_H
#define NDSTORE_BOX_H

#include <stddef.h>
#include <stdint.h>
#include "ndstore/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Largest supported rank. */
#define NDS_MAX_RANK 32

/**
 * A selection: in dimension d the indices start[d], start[d]+step[d], ... below stop[d] (step >= 1).
 * An integer index in a region string ("7") gives start=7, stop=8, step=1 and sets bit d of dropped, which
 * only tells writers of files (.npy) to leave that dimension out of the shape; the data layout is the same.
 * Plain value type.
 */
typedef struct nds_box {
    size_t rank;
    uint64_t start[NDS_MAX_RANK];
    uint64_t stop[NDS_MAX_RANK];
    uint64_t step[NDS_MAX_RANK];
    uint64_t dropped; /**< bit d set: dimension d was selected by an integer index */
} nds_box;

/** The physical size of one index step along a dimension: `size` `name`s (8 "nm"); size 0 = unknown. */
typedef struct nds_unit {
    double size;
    char name[8];
} nds_unit;

/** Metres per `name` ("pm", "nm", "um" or "\u00b5m", "mm", "cm", "m"); 0 for any other name. */
NDS_API double nds_unit_metres(const char *name);

/** Sets *box to the whole of shape. rank <= NDS_MAX_RANK. */
NDS_API void nds_box_full(nds_box *box, size_t rank, const uint64_t *shape);
/**
 * Parses a NumPy-style region: "[0:512, 100:200:2, 7, ...]", brackets optional, negative indices count from
 * the end, "..." fills the remaining dimensions, missing trailing dimensions are whole. Steps must be >= 1.
 * @return 0, or NDS_EINVAL / NDS_ERANGE with a message naming the offending dimension
 */
NDS_API int nds_box_parse(nds_box *box, const char *region, size_t rank, const uint64_t *shape);
/**
 * nds_box_parse in the coordinates of a domain [origin, origin + shape) (nds_array_origin): in a dimension
 * whose origin is not 0, numbers are domain coordinates (negative ones too: nothing counts from the end)
 * and an index or slice bound outside the domain is NDS_ERANGE naming the dimension and the domain; in a
 * dimension whose origin is 0 the rules are nds_box_parse's. The box is relative to the origin, as the
 * array calls take boxes. origin NULL: every origin 0.
 */
NDS_API int nds_box_parse_domain(nds_box *box, const char *region, size_t rank, const int64_t *origin,
                                 const uint64_t *shape);
/** Number of selected indices in dimension d. */
NDS_API uint64_t nds_box_extent(const nds_box *box, size_t d);
/** Number of selected elements; 0 on overflow or an empty box. */
NDS_API uint64_t nds_box_count(const nds_box *box);
/** Checks that box lies inside shape. @return 0 or NDS_ERANGE naming the dimension */
NDS_API int nds_box_check(const nds_box *box, size_t rank, const uint64_t *shape);
/** Formats box as "[a:b:c, ...]" into buf (always NUL-terminated). */
NDS_API void nds_box_format(const nds_box *box, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
