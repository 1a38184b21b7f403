/* Element types: sizes, names, byte swapping, half-precision conversion, and fill values in JSON.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal/dtype_util.h"
#include "internal/error.h"

typedef struct dtype_info {
    const char *name;
    size_t size;
} dtype_info;

/* Indexed by nds_dtype. */
static const dtype_info dtype_table[NDS_DTYPE_COUNT] = {
    [NDS_DTYPE_INVALID] = {"invalid", 0},
    [NDS_BOOL] = {"bool", 1},
    [NDS_INT8] = {"int8", 1},
    [NDS_INT16] = {"int16", 2},
    [NDS_INT32] = {"int32", 4},
    [NDS_INT64] = {"int64", 8},
    [NDS_UINT8] = {"uint8", 1},
    [NDS_UINT16] = {"uint16", 2},
    [NDS_UINT32] = {"uint32", 4},
    [NDS_UINT64] = {"uint64", 8},
    [NDS_FLOAT16] = {"float16", 2},
    [NDS_BFLOAT16] = {"bfloat16", 2},
    [NDS_FLOAT32] = {"float32", 4},
    [NDS_FLOAT64] = {"float64", 8},
    [NDS_COMPLEX64] = {"complex64", 8},
    [NDS_COMPLEX128] = {"complex128", 16},
};

size_t nds_dtype_size(nds_dtype t) {
    return (t > NDS_DTYPE_INVALID && t < NDS_DTYPE_COUNT) ? dtype_table[t].size : 0;
}

const char *nds_dtype_name(nds_dtype t) {
    return (t > NDS_DTYPE_INVALID && t < NDS_DTYPE_COUNT) ? dtype_table[t].name : "invalid";
}

nds_dtype nds_dtype_from_name(const char *name) {
    for (int t = NDS_BOOL; t < NDS_DTYPE_COUNT; t++)
        if (name && strcmp(name, dtype_table[t].name) == 0) return (nds_dtype)t;
    return NDS_DTYPE_INVALID;
}

size_t nds_dtype_swap_unit(nds_dtype t) {
    size_t s = nds_dtype_size(t);
    return (t == NDS_COMPLEX64 || t == NDS_COMPLEX128) ? s / 2 : s;
}

void nds_byteswap(void *data, size_t n, size_t unit) {
    uint8_t *p = data;
    switch (unit) {
    case 2:
        for (size_t i = 0; i < n; i++) {
            uint16_t v;
            memcpy(&v, p + 2 * i, 2);
            v = __builtin_bswap16(v);
            memcpy(p + 2 * i, &v, 2);
        }
        break;
    case 4:
        for (size_t i = 0; i < n; i++) {
            uint32_t v;
            memcpy(&v, p + 4 * i, 4);
            v = __builtin_bswap32(v);
            memcpy(p + 4 * i, &v, 4);
        }
        break;
    case 8:
        for (size_t i = 0; i < n; i++) {
            uint64_t v;
            memcpy(&v, p + 8 * i, 8);
            v = __builtin_bswap64(v);
            memcpy(p + 8 * i, &v, 8);
        }
        break;
    default:
        for (size_t i = 0; i < n && unit > 1; i++)
            for (size_t a = 0, b = unit - 1; a < b; a++, b--) {
                uint8_t t = p[i * unit + a];
                p[i * unit + a] = p[i * unit + b];
                p[i * unit + b] = t;
            }
    }
}

void nds_byteswap_span(uint8_t *data, size_t begin, size_t end, size_t unit) {
    size_t lo = begin / unit * unit, hi = (end + unit - 1) / unit * unit;
    if (hi > lo) nds_byteswap(data + lo, (hi - lo) / unit, unit);
}

float nds_half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (mant << 13);
    } else if (mant == 0) {
        bits = sign;
    } else { /* subnormal: normalise */
        int e = -1;
        do {
            e++;
            mant <<= 1;
        } while ((mant & 0x400) == 0);
        bits = sign | ((uint32_t)(112 - e) << 23) | ((mant & 0x3ff) << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t nds_float_to_half(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t exp = (x >> 23) & 0xff, mant = x & 0x7fffff;
    if (exp == 0xff) return sign | 0x7c00 | (mant ? 0x200 | (uint16_t)(mant >> 13) : 0);
    int e = (int)exp - 127 + 15;
    if (e >= 0x1f) return sign | 0x7c00;
    if (e <= 0) {
        if (e < -10) return sign;
        mant |= 0x800000;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t half = mant >> shift, rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return sign | (uint16_t)half;
    }
    uint32_t half = ((uint32_t)e << 10) | (mant >> 13), rem = mant & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1)))
        half++; /* may carry into the exponent: correct */
    return sign | (uint16_t)half;
}

float nds_bf16_to_float(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t nds_float_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40); /* keep NaN a NaN */
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

bool nds_all_equal(const uint8_t *data, size_t n, size_t elem, const uint8_t *value) {
    if (n == 0) return true;
    if (memcmp(data, value, elem) != 0) return false;
    /* data[0] equals value, so comparing data with itself shifted by one element checks the rest.
     */
    return memcmp(data, data + elem, (n - 1) * elem) == 0;
}

void nds_fill_elements(uint8_t *data, size_t n, size_t elem, const uint8_t *value) {
    bool zero = true;
    for (size_t i = 0; i < elem; i++) zero = zero && value[i] == 0;
    if (zero || elem == 1) {
        memset(data, value[0], n * elem);
        return;
    }
    if (n == 0) return;
    memcpy(data, value, elem);
    size_t done = 1; /* double the filled prefix each step */
    while (done < n) {
        size_t k = done < n - done ? done : n - done;
        memcpy(data + done * elem, data, k * elem);
        done += k;
    }
}
