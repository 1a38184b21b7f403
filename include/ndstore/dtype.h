/* Element data types. In memory an element is always in the host's byte order; formats convert on disk. */
#ifndef NDSTORE_DTYPE_H
#define NDSTORE_DTYPE_H

#include <stddef.h>
#include "ndstore/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Element types. Names (nds_dtype_name) follow TensorStore: "uint16", "float32", "complex64" ... */
typedef enum nds_dtype {
    NDS_DTYPE_INVALID = 0,
    NDS_BOOL,
    NDS_INT8, NDS_INT16, NDS_INT32, NDS_INT64,
    NDS_UINT8, NDS_UINT16, NDS_UINT32, NDS_UINT64,
    NDS_FLOAT16, NDS_BFLOAT16, NDS_FLOAT32, NDS_FLOAT64,
    NDS_COMPLEX64, NDS_COMPLEX128,
    NDS_DTYPE_COUNT
} nds_dtype;

/** Largest element size in bytes (complex128). */
#define NDS_DTYPE_MAX_SIZE 16

/** Bytes per element; 0 for NDS_DTYPE_INVALID. */
NDS_API size_t nds_dtype_size(nds_dtype t);
/** Static name ("uint16"), or "invalid". */
NDS_API const char *nds_dtype_name(nds_dtype t);
/** Parses a name from nds_dtype_name; NDS_DTYPE_INVALID when unknown. */
NDS_API nds_dtype nds_dtype_from_name(const char *name);
/** Size of the unit that byte order applies to: the element size, or half of it for complex types. */
NDS_API size_t nds_dtype_swap_unit(nds_dtype t);

#ifdef __cplusplus
}
#endif
#endif
