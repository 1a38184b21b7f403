/* Element data types. In memory an element is always in the host's byte order; formats convert on disk. */
#ifndef NDSTORE_DTYPE_H
#define NDSTORE_DTYPE_H

#include <stddef.h>
#include "ndstore/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Element types. Names (nds_dtype_name) follow TensorStore and the zarr v3 data type registry:
 * "uint16", "float32", "complex64", "float8_e4m3fn", "int4" ... Values never change; new types are
 * appended before NDS_DTYPE_COUNT.
 *
 * In memory (what nds_array_read fills and nds_array_write takes):
 * - The float8 types and float8_e8m0fnu: one byte holding the 8-bit pattern of the registry
 *   (e.g. float8_e4m3fn 1.0 is 0x38).
 * - int4, int2: one element per byte, the value sign-extended (an int8 in [-8, 7] / [-2, 1]).
 *   uint4, uint2: one element per byte, the value zero-extended (a uint8 in [0, 15] / [0, 3]).
 *   float4_e2m1fn: one byte whose low 4 bits are the pattern 0bSEEM, upper bits zero. Reads
 *   normalise the bits the zarr v3 "bytes" codec leaves arbitrary; writes store the byte given
 *   (only its low bits are the value).
 * - datetime64, timedelta64: an int64 counting the array's unit (kept in its metadata, e.g.
 *   "ns" for datetime64[ns]), INT64_MIN being NaT, as NumPy holds them.
 * - null_terminated_bytes, fixed_length_utf32: fixed-width strings (NumPy "|S<n>", "<U<n>"). The
 *   width is per array: an element is n units of nds_dtype_size bytes (1; 4 = one code point),
 *   nds_array_dtype_size(a) bytes in all. In memory an element is its raw units: "|S<n>" n bytes
 *   NUL-padded, "<U<n>" n code points as host-order uint32, NUL-padded. nds_dtype_from_name does
 *   not return these two (a name alone has no width): formats create them from their own
 *   typestrings.
 * - string, bytes (NDS_STRING, NDS_BYTES_VLEN): variable-length elements (zarr v3 "string" /
 *   "bytes", zarr v2 "|O" with the vlen-utf8 / vlen-bytes filter). They have no size
 *   (nds_dtype_size 0) and no dense form: nds_array_read / nds_array_write refuse them, and
 *   nds_array_read_vlen / nds_array_write_vlen (array.h) move them as offsets + bytes. A string
 *   element is valid UTF-8. nds_dtype_from_name does not return these two either (formats create
 *   them from their own metadata).
 */
typedef enum nds_dtype {
    NDS_DTYPE_INVALID = 0,
    NDS_BOOL,
    NDS_INT8, NDS_INT16, NDS_INT32, NDS_INT64,
    NDS_UINT8, NDS_UINT16, NDS_UINT32, NDS_UINT64,
    NDS_FLOAT16, NDS_BFLOAT16, NDS_FLOAT32, NDS_FLOAT64,
    NDS_COMPLEX64, NDS_COMPLEX128,
    /* Appended for the zarr v3 extension data types (issue 20). */
    NDS_FLOAT8_E4M3, NDS_FLOAT8_E5M2, NDS_FLOAT8_E4M3FN, NDS_FLOAT8_E4M3FNUZ,
    NDS_FLOAT8_E5M2FNUZ, NDS_FLOAT8_E4M3B11FNUZ, NDS_FLOAT8_E8M0FNU,
    NDS_INT4, NDS_UINT4, NDS_INT2, NDS_UINT2, NDS_FLOAT4_E2M1FN,
    NDS_DATETIME64, NDS_TIMEDELTA64,
    /* Appended for fixed-width strings (issue 20): see above. */
    NDS_BYTES_FIXED, NDS_UCS4_FIXED,
    /* Appended for variable-length strings (issue 20): see nds_dtype_is_vlen. */
    NDS_STRING, NDS_BYTES_VLEN,
    NDS_DTYPE_COUNT
} nds_dtype;

/** Largest element size in bytes of the types whose size the dtype alone gives (complex128). */
#define NDS_DTYPE_MAX_SIZE 16
/** Largest element size of any array, fixed-width strings included ("|S4096", "<U1024"). */
#define NDS_ELEM_MAX_SIZE 4096

/** Bytes per element in memory (1 for the sub-byte types, see above; for the fixed-width strings
 *  the unit, 1 or 4, of which an element holds n); 0 for NDS_DTYPE_INVALID. */
NDS_API size_t nds_dtype_size(nds_dtype t);
/** Static name ("uint16"), or "invalid". */
NDS_API const char *nds_dtype_name(nds_dtype t);
/** Parses a name from nds_dtype_name (also "complex_float32" / "complex_float64", the registry's
 *  aliases of complex64 / complex128); NDS_DTYPE_INVALID when unknown and for the fixed-width
 *  string types (their name alone has no width). */
NDS_API nds_dtype nds_dtype_from_name(const char *name);
/** One element of a real floating type (float16/32/64, bfloat16, the float8 family, float4_e2m1fn:
 *  elem in memory form, host order) as a double in *out (NaN and infinities included).
 *  @return 0; NDS_EINVAL for other types (*out untouched). Any thread. */
NDS_API int nds_dtype_to_double(nds_dtype t, const void *elem, double *out);
/** 1 for the variable-length types (NDS_STRING, NDS_BYTES_VLEN), else 0. Any thread. */
NDS_API int nds_dtype_is_vlen(nds_dtype t);
/** Size of the unit that byte order applies to: the element size, or half of it for complex types. */
NDS_API size_t nds_dtype_swap_unit(nds_dtype t);

#ifdef __cplusplus
}
#endif
#endif
