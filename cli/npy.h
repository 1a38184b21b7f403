/* NumPy interchange for the command line: .npy files (format version 1.0 written; 1.0, 2.0 and 3.0 read),
 * element values as NumPy prints them, and element values as JSON. Plain functions, no state. */
#ifndef NDS_CLI_NPY_H
#define NDS_CLI_NPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <json-c/json.h>
#include "ndstore/ndstore.h"

/** Largest .npy header accepted (numpy itself refuses more than 10000 bytes by default). */
#define CLI_NPY_MAX_HEADER 65536

/** What a .npy header says. */
typedef struct cli_npy_header {
    nds_dtype dtype;
    bool swap;                    /**< the data's byte order differs from the host's */
    bool fortran_order;           /**< data is in Fortran order (first dimension fastest) */
    size_t rank;
    uint64_t shape[NDS_MAX_RANK];
    uint64_t count;               /**< elements */
    uint64_t data_bytes;          /**< count * itemsize */
    char descr[16];               /**< the descr as written ("<u2") */
    size_t itemsize;              /**< bytes per element ("|S12": 12, "<U3": 12) */
} cli_npy_header;

/** The .npy descr of dtype in host byte order ("<u2", "|b1"); for types NumPy lacks the byte they
 *  are in memory ('|u1' for the float8 family, float4_e2m1fn, uint4, uint2; '|i1' for int4, int2);
 *  NULL for bfloat16 (numpy has none) and for datetimes (they need a unit: cli_npy_descr_unit). */
const char *cli_npy_descr(nds_dtype t);
/** cli_npy_descr, and for datetime64/timedelta64 "<M8[unit]" / "<m8[unit]" (unit as NumPy writes
 *  it in brackets, "ns" or "10s"; NULL when unit is empty); for the fixed-width strings unit is the
 *  width (cli_dtype_detail): "|S12", "<U3" in host order. A static buffer. */
const char *cli_npy_descr_unit(nds_dtype t, const char *unit);
/** 1 when a .npy file with header h holds elements of t (unit: the array's time unit, or NULL):
 *  its own descr, or the byte descr cli_npy_descr gives for a type NumPy lacks. */
bool cli_npy_holds(const cli_npy_header *h, nds_dtype t, const char *unit);
/** What the dtype alone does not say, into buf: the time unit of a datetime array (cli_time_unit),
 *  the width in units of a fixed-width string array ("12" for "|S12", "3" for "<U3"); false (buf
 *  empty) for other arrays. The `unit` argument of the functions above. */
bool cli_dtype_detail(nds_array *a, char *buf, size_t cap);
/** The NumPy typestring a fixed-width string array is shown as ("|S12", "<U3"), into buf; false
 *  for other arrays. */
bool cli_string_typestring(nds_array *a, char *buf, size_t cap);
/** A fixed-width string element (size bytes) as NumPy prints it, trailing NULs dropped: b'ab\x00c'
 *  for bytes, 'qé' for unicode (other characters escaped as \xNN / \U0001f600 when not printable
 *  or not code points). */
void cli_format_string(nds_dtype t, const void *elem, size_t size, char *buf, size_t cap);
/** 1 when name looks like "datetime64[ns]" / "timedelta64[10s]" (the format checks the unit). */
bool cli_is_time_dtype(const char *name);
/** The time unit of a datetime64/timedelta64 array, from its metadata ("ns", "10s" for a scale
 *  factor of 10) into buf; false (buf empty) for other arrays or when the metadata does not say. */
bool cli_time_unit(nds_array *a, char *buf, size_t cap);
/** Writes a version 1.0 header for C-order data of dtype (unit: for datetimes, else NULL) and
 *  shape. 0, or -1 with a message in err. */
int cli_npy_write_header(FILE *f, nds_dtype t, const char *unit, size_t rank, const uint64_t *shape,
                         char *err, size_t cap);
/** Reads and checks a header (version 1.0, 2.0 or 3.0), leaving f at the data. 0, or -1 (message). */
int cli_npy_read_header(FILE *f, cli_npy_header *h, char *err, size_t cap);

/** Reverses the byte order of n units of unit bytes each. */
void cli_byteswap(void *data, size_t n_units, size_t unit);
/** Bytes the byte order applies to: the element size, or half of it for complex types. */
size_t cli_swap_unit(nds_dtype t);
/** Reorders a Fortran-order block of shape into C order (dst and src do not overlap). */
void cli_fortran_to_c(size_t rank, const uint64_t *shape, size_t elem, uint8_t *dst, const uint8_t *src);

/** Formats one element as NumPy prints it ("7", "1.5", "2.", "nan", "True", "1.+2.j"). */
void cli_format_element(nds_dtype t, const void *elem, char *buf, size_t cap);
/** Prints a C-order block of shape as NumPy's str() does: nested brackets, aligned columns. */
void cli_print_array(FILE *out, nds_dtype t, const void *data, size_t rank, const uint64_t *shape);
/** cli_print_array for elements of elem bytes (the fixed-width strings: nds_array_dtype_size),
 *  which print as cli_format_string does (a string longer than a cell ends in "..."). */
void cli_print_array_sized(FILE *out, nds_dtype t, size_t elem, const void *data, size_t rank,
                           const uint64_t *shape);
/** One element as a new JSON value (numbers; "NaN"/"Infinity" strings; [re, im] for complex). */
json_object *cli_element_to_json(nds_dtype t, const void *elem);
/** IEEE half and bfloat16 bit patterns to double (exact). */
double cli_half_to_double(uint16_t h);
double cli_bf16_to_double(uint16_t h);

#endif
