/* The downsampling kernel (downsample_kernel.h). Each output element gathers its block's values
 * into a scratch array (an odometer over the block, clipped at the input's edges), then a reducer
 * of the dtype's C type turns them into one value. The reducers are generated per type by a macro;
 * stride needs no reducer (it copies the block's first element, any dtype).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "downsample_kernel.h"

__extension__ typedef __int128 ds_i128;
__extension__ typedef unsigned __int128 ds_u128;

static const char *const method_names[] = {"mean", "mode", "min", "max", "stride"};

bool cli_ds_method_parse(const char *name, cli_ds_method *m) {
    for (size_t i = 0; i < sizeof method_names / sizeof method_names[0]; i++)
        if (strcmp(name, method_names[i]) == 0) {
            *m = (cli_ds_method)i;
            return true;
        }
    return false;
}

const char *cli_ds_method_name(cli_ds_method m) { return method_names[m]; }

static bool is_int(nds_dtype t) {
    return t == NDS_INT8 || t == NDS_INT16 || t == NDS_INT32 || t == NDS_INT64 || t == NDS_UINT8 ||
           t == NDS_UINT16 || t == NDS_UINT32 || t == NDS_UINT64;
}

const char *cli_ds_unsupported(cli_ds_method m, nds_dtype t) {
    if (m == CLI_DS_STRIDE) return NULL;
    if (m == CLI_DS_MODE)
        return is_int(t) ? NULL : "mode needs integer labels (int8..int64, uint8..uint64)";
    return is_int(t) || t == NDS_FLOAT32 || t == NDS_FLOAT64
               ? NULL
               : "mean, min and max need integers (int8..int64, uint8..uint64), float32 or float64";
}

void cli_ds_out_shape(size_t rank, const uint64_t *in_shape, const uint64_t *factors,
                      uint64_t *out_shape) {
    for (size_t d = 0; d < rank; d++)
        out_shape[d] = in_shape[d] / factors[d] + (in_shape[d] % factors[d] != 0);
}

/* ---- reducers: n >= 1 values of one block into *out ---- */

/* Integer mean rounded to nearest, halves away from zero, exactly: sums of up to 32-bit values
 * in 64 bits, of 64-bit values in 128 bits (the command caps a block at 2^26 values). */
#define MEAN_INT(T, ACC)                                                                           \
    static T mean_##T(const T *v, size_t n) {                                                      \
        ACC s = 0;                                                                                 \
        for (size_t i = 0; i < n; i++) s += (ACC)v[i];                                             \
        ACC half = (ACC)(n / 2), cnt = (ACC)n;                                                     \
        return (T)(s >= 0 ? (s + half) / cnt : -((-s + half) / cnt));                              \
    }
#define MEAN_FLOAT(T)                                                                              \
    static T mean_##T(const T *v, size_t n) {                                                      \
        double s = 0;                                                                              \
        for (size_t i = 0; i < n; i++) s += (double)v[i];                                          \
        return (T)(s / (double)n);                                                                 \
    }

/* min / max as NumPy's: a NaN anywhere gives NaN (v != v is false for every integer). */
#define MINMAX(T)                                                                                  \
    static T min_##T(const T *v, size_t n) {                                                       \
        T m = v[0];                                                                                \
        for (size_t i = 0; i < n; i++) {                                                           \
            if (v[i] != v[i]) return v[i];                                                         \
            if (v[i] < m) m = v[i];                                                                \
        }                                                                                          \
        return m;                                                                                  \
    }                                                                                              \
    static T max_##T(const T *v, size_t n) {                                                       \
        T m = v[0];                                                                                \
        for (size_t i = 0; i < n; i++) {                                                           \
            if (v[i] != v[i]) return v[i];                                                         \
            if (v[i] > m) m = v[i];                                                                \
        }                                                                                          \
        return m;                                                                                  \
    }

/* Mode: sorted (insertion sort for the usual 8 or 64 values, qsort beyond), the longest run; the
 * first longest run is the smallest value. sparse: zeros skipped unless all are zero. v is
 * scratch: sorted in place. */
#define MODE(T)                                                                                    \
    static int cmp_##T(const void *a, const void *b) {                                             \
        T x = *(const T *)a, y = *(const T *)b;                                                    \
        return (x > y) - (x < y);                                                                  \
    }                                                                                              \
    static T mode_##T(T *v, size_t n, bool sparse) {                                               \
        if (n > 64) {                                                                              \
            qsort(v, n, sizeof *v, cmp_##T);                                                       \
        } else {                                                                                   \
            for (size_t i = 1; i < n; i++) {                                                       \
                T x = v[i];                                                                        \
                size_t j = i;                                                                      \
                for (; j > 0 && v[j - 1] > x; j--) v[j] = v[j - 1];                                \
                v[j] = x;                                                                          \
            }                                                                                      \
        }                                                                                          \
        T best = 0;                                                                                \
        size_t best_run = 0;                                                                       \
        for (size_t i = 0; i < n;) {                                                               \
            size_t j = i + 1;                                                                      \
            while (j < n && v[j] == v[i]) j++;                                                     \
            if (j - i > best_run && !(sparse && v[i] == 0)) best = v[i], best_run = j - i;         \
            i = j;                                                                                 \
        }                                                                                          \
        return best; /* sparse and all zero: 0 */                                                  \
    }

typedef float f32;
typedef double f64;
MEAN_INT(int8_t, int64_t)
MEAN_INT(int16_t, int64_t)
MEAN_INT(int32_t, int64_t)
MEAN_INT(int64_t, ds_i128)
MEAN_INT(uint8_t, int64_t)
MEAN_INT(uint16_t, int64_t)
MEAN_INT(uint32_t, int64_t)
MEAN_INT(uint64_t, ds_i128)
MEAN_FLOAT(f32)
MEAN_FLOAT(f64)
MINMAX(int8_t)
MINMAX(int16_t)
MINMAX(int32_t)
MINMAX(int64_t)
MINMAX(uint8_t)
MINMAX(uint16_t)
MINMAX(uint32_t)
MINMAX(uint64_t)
MINMAX(f32)
MINMAX(f64)
MODE(int8_t)
MODE(int16_t)
MODE(int32_t)
MODE(int64_t)
MODE(uint8_t)
MODE(uint16_t)
MODE(uint32_t)
MODE(uint64_t)

/* One block's values (scratch, n of them) into out, by method: the dispatch of one type. */
#define REDUCE_CASE(T, NDS, HAS_MODE)                                                              \
    case NDS: {                                                                                    \
        T *v = scratch, r;                                                                         \
        if (m == CLI_DS_MEAN)                                                                      \
            r = mean_##T(v, n);                                                                    \
        else if (m == CLI_DS_MIN)                                                                  \
            r = min_##T(v, n);                                                                     \
        else if (m == CLI_DS_MAX)                                                                  \
            r = max_##T(v, n);                                                                     \
        else                                                                                       \
            HAS_MODE(T)                                                                            \
        memcpy(out, &r, sizeof r);                                                                 \
        return;                                                                                    \
    }
#define WITH_MODE(T) r = mode_##T(v, n, sparse);
#define NO_MODE(T) r = v[0];

static void reduce_values(nds_dtype t, cli_ds_method m, bool sparse, void *scratch, size_t n,
                          void *out) {
    switch (t) {
        REDUCE_CASE(int8_t, NDS_INT8, WITH_MODE)
        REDUCE_CASE(int16_t, NDS_INT16, WITH_MODE)
        REDUCE_CASE(int32_t, NDS_INT32, WITH_MODE)
        REDUCE_CASE(int64_t, NDS_INT64, WITH_MODE)
        REDUCE_CASE(uint8_t, NDS_UINT8, WITH_MODE)
        REDUCE_CASE(uint16_t, NDS_UINT16, WITH_MODE)
        REDUCE_CASE(uint32_t, NDS_UINT32, WITH_MODE)
        REDUCE_CASE(uint64_t, NDS_UINT64, WITH_MODE)
        REDUCE_CASE(f32, NDS_FLOAT32, NO_MODE) /* cli_ds_unsupported keeps mode off floats */
        REDUCE_CASE(f64, NDS_FLOAT64, NO_MODE)
    default: return;
    }
}

/* ---- gathering ---- */

static void copy_elem(uint8_t *dst, const uint8_t *src, size_t elem) {
    switch (elem) {
    case 1: *dst = *src; return;
    case 2: memcpy(dst, src, 2); return;
    case 4: memcpy(dst, src, 4); return;
    case 8: memcpy(dst, src, 8); return;
    default: memcpy(dst, src, elem);
    }
}

/* The values of the block whose first input index is first[] and extent ext[], into scratch;
 * returns their count. */
static size_t gather(const cli_ds_block *b, const uint64_t *stride, const uint64_t *first,
                     const uint64_t *ext, uint8_t *scratch) {
    size_t rank = b->rank, n = 0;
    uint64_t idx[NDS_MAX_RANK] = {0}, base = 0;
    for (size_t d = 0; d < rank; d++) base += first[d] * stride[d];
    const uint8_t *in = b->in;
    for (;;) {
        uint64_t off = base;
        for (size_t d = 0; d < rank; d++) off += idx[d] * stride[d];
        /* the last dimension's run is contiguous */
        uint64_t run = ext[rank - 1];
        for (uint64_t k = 0; k < run; k++, n++)
            copy_elem(scratch + n * b->elem, in + (off + k) * b->elem, b->elem);
        size_t d = rank - 1;
        while (d > 0) {
            d--;
            if (++idx[d] < ext[d]) break;
            idx[d] = 0;
            if (d == 0) return n;
        }
        if (rank == 1) return n;
    }
}

int cli_ds_reduce(const cli_ds_block *b, uint64_t row0, uint64_t row1) {
    if (cli_ds_unsupported(b->method, b->dtype) || b->rank == 0 || b->rank > NDS_MAX_RANK)
        return -1;
    size_t rank = b->rank;
    uint64_t out_shape[NDS_MAX_RANK], stride[NDS_MAX_RANK], block = 1;
    cli_ds_out_shape(rank, b->in_shape, b->factors, out_shape);
    stride[rank - 1] = 1;
    for (size_t d = rank - 1; d > 0; d--) stride[d - 1] = stride[d] * b->in_shape[d];
    for (size_t d = 0; d < rank; d++) {
        if (out_shape[d] == 0) return 0;
        block *= b->factors[d] < b->in_shape[d] ? b->factors[d] : b->in_shape[d];
    }
    uint8_t *scratch = b->method == CLI_DS_STRIDE ? NULL : malloc(block * b->elem);
    if (b->method != CLI_DS_STRIDE && !scratch) return -1;
    uint64_t o[NDS_MAX_RANK] = {0}, out_index = row0;
    o[0] = row0;
    for (size_t d = 1; d < rank; d++) out_index *= out_shape[d];
    uint8_t *out = (uint8_t *)b->out + out_index * b->elem;
    const uint8_t *in = b->in;
    while (o[0] < row1) {
        uint64_t first[NDS_MAX_RANK], ext[NDS_MAX_RANK];
        for (size_t d = 0; d < rank; d++) {
            first[d] = o[d] * b->factors[d];
            ext[d] = b->in_shape[d] - first[d] < b->factors[d] ? b->in_shape[d] - first[d]
                                                               : b->factors[d];
        }
        if (b->method == CLI_DS_STRIDE) {
            uint64_t off = 0;
            for (size_t d = 0; d < rank; d++) off += first[d] * stride[d];
            copy_elem(out, in + off * b->elem, b->elem);
        } else {
            size_t n = gather(b, stride, first, ext, scratch);
            reduce_values(b->dtype, b->method, b->sparse, scratch, n, out);
        }
        out += b->elem;
        for (size_t d = rank; d-- > 0;) { /* next output index, C order */
            if (++o[d] < out_shape[d] || d == 0) break;
            o[d] = 0;
        }
    }
    free(scratch);
    return 0;
}
