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
