/* Element helpers shared by formats: byte swapping, half-precision conversion, fill values in JSON.
 */
#ifndef NDS_INTERNAL_DTYPE_UTIL_H
#define NDS_INTERNAL_DTYPE_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>
#include "ndstore/dtype.h"

/** Reverses the byte order of n units of unit bytes each (unit 1: no-op). */
void nds_byteswap(void *data, size_t n_units, size_t unit);
/** nds_byteswap of the whole units of data that overlap bytes [begin, end) (a decoded part of a
 *  chunk whose units start at data). */
void nds_byteswap_span(uint8_t *data, size_t begin, size_t end, size_t unit);
/** 1 on a big-endian host. */
static inline bool nds_host_is_big_endian(void) {
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 0;
}
/** IEEE half <-> float; bfloat16 <-> float (round to nearest even). */
float nds_half_to_float(uint16_t h);
uint16_t nds_float_to_half(float f);
float nds_bf16_to_float(uint16_t h);
uint16_t nds_float_to_bf16(float f);

/** 1 for the real floating types: float16/32/64, bfloat16, the float8 family, float4_e2m1fn. */
bool nds_dtype_is_float(nds_dtype t);
/** 1 for the float8 family and float4_e2m1fn (one byte in memory, converted through a table). */
bool nds_dtype_is_small_float(nds_dtype t);
/** A small float's pattern (low bits of code) as a double (NaN and infinities included). */
double nds_small_float_load(nds_dtype t, uint8_t code);
/** d as small float t, rounded to nearest, ties to even; NaN as the registry's "NaN" pattern.
 *  -1 (out untouched) when t cannot hold it: NaN or infinity where the type has none, a finite
 *  value that rounds past the largest finite one where there is no infinity, 0 or negative for
 *  float8_e8m0fnu. */
int nds_small_float_store(nds_dtype t, double d, uint8_t *out);
/** The fill value of a variable-length array (string, bytes) from zarr v3 JSON into out
 *  (NDS_ELEM_MAX_SIZE bytes, the form of format.h: a host-order uint32 length, then the bytes):
 *  string takes a JSON string, bytes a base64 string (as zarr-python 3 writes it) or an array of
 *  byte values; null is the empty element. NDS_EFORMAT naming fill_value, NDS_EUNSUPPORTED past
 *  NDS_ELEM_MAX_SIZE - 4 bytes. */
int nds_vlen_fill_from_json(nds_dtype t, const json_object *v, const char *doc, uint8_t *out);
/** The JSON of such a fill value (a string; base64 for bytes), as a new object. */
json_object *nds_vlen_fill_to_json(nds_dtype t, const uint8_t *fill);
/** 1 for NDS_BYTES_FIXED and NDS_UCS4_FIXED (width per array, dtype.h). */
bool nds_dtype_is_fixed_string(nds_dtype t);
/** A fixed-width string fill value (as zarr-python 2.13 writes it) into out, one element of size
 *  bytes, host order, NUL-padded: null is all zero; NDS_BYTES_FIXED takes a base64 string of at
 *  most size bytes, NDS_UCS4_FIXED a string of at most size / 4 code points. NDS_EFORMAT naming
 *  doc and "fill_value" otherwise. */
int nds_string_fill_from_json(nds_dtype t, size_t size, const json_object *v, const char *doc,
                              uint8_t *out);
/** The JSON of a fixed-width string fill, trailing NULs dropped (as NumPy and zarr-python 2.13
 *  do): base64 for NDS_BYTES_FIXED, the text for NDS_UCS4_FIXED (a code point that is not
 *  Unicode is written as U+FFFD). NULL when out of memory. */
json_object *nds_string_fill_to_json(nds_dtype t, size_t size, const uint8_t *value);
/** 1 when s[0..len) is valid UTF-8 (no overlong forms, surrogates or code points past U+10FFFF). */
bool nds_utf8_valid(const uint8_t *s, size_t len);
/** Bits of the value: 4 for int4/uint4/float4_e2m1fn, 2 for int2/uint2, else 8 * size. */
unsigned nds_dtype_value_bits(nds_dtype t);
/** 1 for the types stored one per byte with fewer value bits (int4, uint4, int2, uint2, float4). */
bool nds_dtype_is_subbyte(nds_dtype t);
/** Puts n elements of a sub-byte type in their in-memory form (dtype.h): int4/int2 sign-extended
 *  from their low bits, the others masked to them. Other types: no-op. */
void nds_dtype_normalize(nds_dtype t, uint8_t *data, size_t n);

/** 1 when unit[0..len) is one of NumPy's time units (Y M W D h m s ms us ns ps fs as). */
bool nds_time_unit_known(const char *unit, size_t len);
/** text[0..len) as NumPy writes a unit in brackets: an optional multiplier (1 .. 2^31-1, no leading
 *  zero) and a known unit ("10s", "ns"); the unit into unit (cap bytes) and the multiplier into
 *  *scale (1 when absent). false when malformed. */
bool nds_time_unit_parse(const char *text, size_t len, char *unit, size_t cap, uint32_t *scale);
/** "datetime64[ns]" / "timedelta64[10s]" (the names `ndstore info` prints, accepted as a schema
 *  dtype): the type, unit and multiplier; NDS_DTYPE_INVALID for anything else. */
nds_dtype nds_dtype_with_unit(const char *name, char *unit, size_t cap, uint32_t *scale);

/**
 * Parses a fill value for dtype from JSON into out (one element, host order): numbers, booleans,
 * null (zero), "NaN", "Infinity", "-Infinity", "0x..." hex bit patterns (as zarr v3 writes), and
 * for complex types a [re, im] array. Integers must fit the type. NDS_EFORMAT naming doc on
 * anything else.
 */
int nds_fill_from_json(nds_dtype t, const json_object *v, const char *doc, uint8_t *out);
/** Prints a fill value as JSON the way zarr v2 does (NaN/Infinity as strings, complex as [re, im]).
 */
json_object *nds_fill_to_json(nds_dtype t, const uint8_t *value);
/** 1 when all n elements of data (elem bytes each) equal the element value (bitwise). */
bool nds_all_equal(const uint8_t *data, size_t n, size_t elem, const uint8_t *value);
/** Sets n elements of data (elem bytes each) to value. */
void nds_fill_elements(uint8_t *data, size_t n, size_t elem, const uint8_t *value);

#endif
