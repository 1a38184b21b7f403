/* The downsampling kernel of `ndstore downsample` (issue 21): a C-order block reduced by integer
 * factors per dimension, each output element from the input elements of its block
 * [o*f, min((o+1)*f, n)) per dimension, so partial blocks at odd edges reduce the elements they
 * have (never padding). Pure functions: no I/O, no allocation beyond what a call frees, any thread.
 *
 * Kept in cli/ rather than lib/: the command line uses only the public API, and the kernel is no
 * part of the storage engine's contract (making it public would commit the library's ABI to it);
 * tests/unit/test_downsample.c compiles it directly.
 *
 * Methods (what igneous/tinybrain do, with the choices they leave open fixed here):
 *  - mean: the average; integers rounded to nearest, halves away from zero (computed exactly in
 *    128-bit integers); floats summed in double and stored in the dtype (NaN propagates).
 *  - mode: the most frequent value; a tie goes to the smallest value. Zero counts like any label
 *    (igneous's default, sparse=False); with sparse, zeros are background: the mode of the non-zero
 *    values, 0 only when the whole block is 0 (igneous's sparse=True). Integer dtypes only.
 *  - min, max: as NumPy's min/max (NaN propagates for floats).
 *  - stride: the block's first element (input index o*f): plain decimation, any dtype.
 */
#ifndef NDS_CLI_DOWNSAMPLE_KERNEL_H
#define NDS_CLI_DOWNSAMPLE_KERNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "ndstore/ndstore.h"

typedef enum cli_ds_method {
    CLI_DS_MEAN,
    CLI_DS_MODE,
    CLI_DS_MIN,
    CLI_DS_MAX,
    CLI_DS_STRIDE
} cli_ds_method;

/** The method named name ("mean", "mode", "min", "max", "stride"); false for other names. */
bool cli_ds_method_parse(const char *name, cli_ds_method *m);
const char *cli_ds_method_name(cli_ds_method m);
/** NULL when method m works on dtype t, else why not (a static message). */
const char *cli_ds_unsupported(cli_ds_method m, nds_dtype t);
/** ceil(n / f) per dimension. */
void cli_ds_out_shape(size_t rank, const uint64_t *in_shape, const uint64_t *factors,
                      uint64_t *out_shape);

/** What one call reduces. */
typedef struct cli_ds_block {
    nds_dtype dtype;
    size_t elem; /**< bytes per element (nds_dtype_size; stride: any size) */
    cli_ds_method method;
    bool sparse; /**< mode: zeros are background */
    size_t rank;
    const uint64_t *in_shape; /**< the input block's shape */
    const uint64_t *factors;  /**< >= 1 each */
    const void *in;           /**< C order */
    void *out;                /**< C order, shape cli_ds_out_shape */
} cli_ds_block;

/** Reduces output rows [row0, row1) of dimension 0 (all of it: 0, out_shape[0]); calls on disjoint
 *  rows may run at once. 0, or -1 when the method does not support the dtype or out of memory. */
int cli_ds_reduce(const cli_ds_block *b, uint64_t row0, uint64_t row1);

#endif
