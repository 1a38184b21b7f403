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
    [NDS_FLOAT8_E4M3] = {"float8_e4m3", 1},
    [NDS_FLOAT8_E5M2] = {"float8_e5m2", 1},
    [NDS_FLOAT8_E4M3FN] = {"float8_e4m3fn", 1},
    [NDS_FLOAT8_E4M3FNUZ] = {"float8_e4m3fnuz", 1},
    [NDS_FLOAT8_E5M2FNUZ] = {"float8_e5m2fnuz", 1},
    [NDS_FLOAT8_E4M3B11FNUZ] = {"float8_e4m3b11fnuz", 1},
    [NDS_FLOAT8_E8M0FNU] = {"float8_e8m0fnu", 1},
    [NDS_INT4] = {"int4", 1},
    [NDS_UINT4] = {"uint4", 1},
    [NDS_INT2] = {"int2", 1},
    [NDS_UINT2] = {"uint2", 1},
    [NDS_FLOAT4_E2M1FN] = {"float4_e2m1fn", 1},
    [NDS_DATETIME64] = {"datetime64", 8},
    [NDS_TIMEDELTA64] = {"timedelta64", 8},
    /* Fixed-width strings: the size is the unit; the array gives the width. */
    [NDS_BYTES_FIXED] = {"null_terminated_bytes", 1},
    [NDS_UCS4_FIXED] = {"fixed_length_utf32", 4},
    /* Variable-length: no size (dtype.h). */
    [NDS_STRING] = {"string", 0},
    [NDS_BYTES_VLEN] = {"bytes", 0},
};

size_t nds_dtype_size(nds_dtype t) {
    return (t > NDS_DTYPE_INVALID && t < NDS_DTYPE_COUNT) ? dtype_table[t].size : 0;
}

const char *nds_dtype_name(nds_dtype t) {
    return (t > NDS_DTYPE_INVALID && t < NDS_DTYPE_COUNT) ? dtype_table[t].name : "invalid";
}

nds_dtype nds_dtype_from_name(const char *name) {
    if (!name) return NDS_DTYPE_INVALID;
    /* The registry's names for the core complex types (zarrs writes them). */
    if (strcmp(name, "complex_float32") == 0) return NDS_COMPLEX64;
    if (strcmp(name, "complex_float64") == 0) return NDS_COMPLEX128;
    for (int t = NDS_BOOL; t < NDS_DTYPE_COUNT; t++)
        if (strcmp(name, dtype_table[t].name) == 0 && !nds_dtype_is_fixed_string((nds_dtype)t) &&
            !nds_dtype_is_vlen((nds_dtype)t))
            return (nds_dtype)t;
    return NDS_DTYPE_INVALID;
}

bool nds_dtype_is_fixed_string(nds_dtype t) { return t == NDS_BYTES_FIXED || t == NDS_UCS4_FIXED; }

int nds_dtype_is_vlen(nds_dtype t) { return t == NDS_STRING || t == NDS_BYTES_VLEN; }

/* ---- small floats (float8 family, float4_e2m1fn) ----------------------------------------------
 * Bit layouts from the zarr v3 data type registry (zarr-extensions data-types/<name>). */

typedef enum nan_kind {
    NAN_IEEE,     /* all-ones exponent: zero mantissa is infinity, any other a NaN */
    NAN_ALL_ONES, /* only S.1111.111 (e4m3fn); no infinity */
    NAN_NEG_ZERO, /* only 0x80, the pattern of -0 ("fnuz": no negative zero, no infinity) */
    NAN_FF,       /* only 0xff (e8m0fnu, unsigned, no zero) */
    NAN_NONE,     /* neither NaN nor infinity (float4_e2m1fn) */
} nan_kind;

typedef struct small_float {
    unsigned bits, exp_bits, man_bits;
    int bias;
    nan_kind nan;
    uint8_t canonical_nan; /* the pattern "NaN" stands for (registry); unused for NAN_NONE */
} small_float;

static const small_float *small_float_of(nds_dtype t) {
    static const small_float e4m3 = {8, 4, 3, 7, NAN_IEEE, 0x7c};
    static const small_float e5m2 = {8, 5, 2, 15, NAN_IEEE, 0x7e};
    static const small_float e4m3fn = {8, 4, 3, 7, NAN_ALL_ONES, 0x7f};
    static const small_float e4m3fnuz = {8, 4, 3, 8, NAN_NEG_ZERO, 0x80};
    static const small_float e5m2fnuz = {8, 5, 2, 16, NAN_NEG_ZERO, 0x80};
    static const small_float e4m3b11 = {8, 4, 3, 11, NAN_NEG_ZERO, 0x80};
    static const small_float e8m0 = {8, 8, 0, 127, NAN_FF, 0xff};
    static const small_float e2m1 = {4, 2, 1, 1, NAN_NONE, 0};
    switch (t) {
    case NDS_FLOAT8_E4M3: return &e4m3;
    case NDS_FLOAT8_E5M2: return &e5m2;
    case NDS_FLOAT8_E4M3FN: return &e4m3fn;
    case NDS_FLOAT8_E4M3FNUZ: return &e4m3fnuz;
    case NDS_FLOAT8_E5M2FNUZ: return &e5m2fnuz;
    case NDS_FLOAT8_E4M3B11FNUZ: return &e4m3b11;
    case NDS_FLOAT8_E8M0FNU: return &e8m0;
    case NDS_FLOAT4_E2M1FN: return &e2m1;
    default: return NULL;
    }
}

bool nds_dtype_is_small_float(nds_dtype t) { return small_float_of(t) != NULL; }

static bool is_signed(const small_float *f) { return f->nan != NAN_FF; }

static double small_decode(const small_float *f, unsigned code) {
    unsigned sign_bit = 1u << (f->bits - 1), emax = (1u << f->exp_bits) - 1;
    unsigned e = (code >> f->man_bits) & emax, m = code & ((1u << f->man_bits) - 1);
    if (f->nan == NAN_FF) return code == 0xff ? NAN : ldexp(1.0, (int)code - f->bias);
    if (f->nan == NAN_NEG_ZERO && code == sign_bit) return NAN;
    if (f->nan == NAN_ALL_ONES && (code & ~sign_bit) == sign_bit - 1) return NAN;
    if (f->nan == NAN_IEEE && e == emax) return m ? NAN : (code & sign_bit ? -INFINITY : INFINITY);
    double v = e == 0 ? ldexp(m, 1 - f->bias - (int)f->man_bits)
                      : ldexp(m + (1u << f->man_bits), (int)e - f->bias - (int)f->man_bits);
    return code & sign_bit ? -v : v;
}

/* The largest finite magnitude and its pattern. */
static unsigned small_max(const small_float *f, double *max) {
    unsigned top = is_signed(f) ? (1u << (f->bits - 1)) - 1 : (1u << f->bits) - 1;
    for (unsigned c = top;; c--) {
        double v = small_decode(f, c);
        if (isfinite(v)) {
            *max = v;
            return c;
        }
    }
}

/* |d| (finite, > 0) to the nearest magnitude pattern, ties to the even pattern; -1 when it rounds
 * beyond the largest finite value (to infinity in IEEE terms). */
static int small_round_magnitude(const small_float *f, double d) {
    double max;
    unsigned max_code = small_max(f, &max);
    double below = max_code > 0 ? small_decode(f, max_code - 1) : 0;
    double beyond = max + (max - below); /* where the next pattern would be */
    int best = -1;
    double best_err = fabs(beyond - d);
    for (unsigned c = 0; c <= max_code; c++) {
        double err = fabs(small_decode(f, c) - d);
        if (err < best_err || (err == best_err && best >= 0 && (c & 1) == 0 && (best & 1))) {
            best = (int)c;
            best_err = err;
        }
    }
    return best;
}

int nds_small_float_store(nds_dtype t, double d, uint8_t *out) {
    const small_float *f = small_float_of(t);
    unsigned sign_bit = 1u << (f->bits - 1);
    if (isnan(d)) {
        if (f->nan == NAN_NONE) return -1;
        *out = f->canonical_nan;
        return 0;
    }
    if (isinf(d)) {
        if (f->nan != NAN_IEEE) return -1;
        *out = (uint8_t)(((1u << f->exp_bits) - 1) << f->man_bits | (d < 0 ? sign_bit : 0));
        return 0;
    }
    if (d == 0) {
        if (f->nan == NAN_FF) return -1; /* no zero */
        *out = signbit(d) && f->nan != NAN_NEG_ZERO ? (uint8_t)sign_bit : 0;
        return 0;
    }
    if (d < 0 && !is_signed(f)) return -1;
    int mag = small_round_magnitude(f, fabs(d));
    if (mag < 0) {
        if (f->nan != NAN_IEEE) return -1;
        return nds_small_float_store(t, d < 0 ? -INFINITY : INFINITY, out);
    }
    bool negative = d < 0 && !(mag == 0 && f->nan == NAN_NEG_ZERO); /* no -0 in fnuz */
    *out = (uint8_t)((unsigned)mag | (negative ? sign_bit : 0));
    return 0;
}

double nds_small_float_load(nds_dtype t, uint8_t code) {
    const small_float *f = small_float_of(t);
    return small_decode(f, code & ((1u << f->bits) - 1));
}

/* ---- sub-byte integers ------------------------------------------------------------------------ */

unsigned nds_dtype_value_bits(nds_dtype t) {
    switch (t) {
    case NDS_INT4:
    case NDS_UINT4:
    case NDS_FLOAT4_E2M1FN: return 4;
    case NDS_INT2:
    case NDS_UINT2: return 2;
    default: return (unsigned)nds_dtype_size(t) * 8;
    }
}

bool nds_dtype_is_subbyte(nds_dtype t) { return t != NDS_DTYPE_INVALID && nds_dtype_value_bits(t) < 8; }

void nds_dtype_normalize(nds_dtype t, uint8_t *data, size_t n) {
    if (!nds_dtype_is_subbyte(t)) return;
    unsigned bits = nds_dtype_value_bits(t), shift = 8 - bits;
    if (t == NDS_INT4 || t == NDS_INT2) {
        for (size_t i = 0; i < n; i++)
            data[i] = (uint8_t)(int8_t)((int8_t)(uint8_t)(data[i] << shift) >> shift);
    } else {
        uint8_t mask = (uint8_t)((1u << bits) - 1);
        for (size_t i = 0; i < n; i++) data[i] &= mask;
    }
}

size_t nds_dtype_swap_unit(nds_dtype t) {
    size_t s = nds_dtype_size(t);
    return (t == NDS_COMPLEX64 || t == NDS_COMPLEX128) ? s / 2 : s;
}

bool nds_dtype_is_float(nds_dtype t) {
    return t == NDS_FLOAT16 || t == NDS_BFLOAT16 || t == NDS_FLOAT32 || t == NDS_FLOAT64 ||
           nds_dtype_is_small_float(t);
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

int nds_dtype_to_double(nds_dtype t, const void *elem, double *out) {
    const uint8_t *p = elem;
    uint16_t h;
    float f;
    switch (t) {
    case NDS_FLOAT64: memcpy(out, p, 8); return 0;
    case NDS_FLOAT32: memcpy(&f, p, 4); *out = f; return 0;
    case NDS_FLOAT16: memcpy(&h, p, 2); *out = nds_half_to_float(h); return 0;
    case NDS_BFLOAT16: memcpy(&h, p, 2); *out = nds_bf16_to_float(h); return 0;
    default:
        if (!nds_dtype_is_small_float(t)) return NDS_EINVAL;
        *out = nds_small_float_load(t, p[0]);
        return 0;
    }
}

/* ---- datetime units ---------------------------------------------------------------------------- */

bool nds_time_unit_known(const char *unit, size_t len) {
    static const char *const units[] = {"Y",  "M",  "W",  "D",  "h",  "m",  "s",
                                        "ms", "us", "ns", "ps", "fs", "as", NULL};
    for (size_t i = 0; units[i]; i++)
        if (strlen(units[i]) == len && strncmp(unit, units[i], len) == 0) return true;
    return false;
}

bool nds_time_unit_parse(const char *text, size_t len, char *unit, size_t cap, uint32_t *scale) {
    size_t digits = 0;
    uint64_t k = 0;
    while (digits < len && text[digits] >= '0' && text[digits] <= '9' && k <= INT32_MAX)
        k = k * 10 + (uint64_t)(text[digits++] - '0');
    if (digits == 0) k = 1;
    if ((digits && text[0] == '0') || k < 1 || k > INT32_MAX || len - digits + 1 > cap ||
        !nds_time_unit_known(text + digits, len - digits))
        return false;
    memcpy(unit, text + digits, len - digits);
    unit[len - digits] = '\0';
    *scale = (uint32_t)k;
    return true;
}

nds_dtype nds_dtype_with_unit(const char *name, char *unit, size_t cap, uint32_t *scale) {
    static const struct {
        const char *prefix;
        nds_dtype t;
    } kinds[] = {{"datetime64[", NDS_DATETIME64}, {"timedelta64[", NDS_TIMEDELTA64}};
    size_t n = name ? strlen(name) : 0;
    for (size_t i = 0; i < 2; i++) {
        size_t p = strlen(kinds[i].prefix);
        if (n > p + 1 && strncmp(name, kinds[i].prefix, p) == 0 && name[n - 1] == ']' &&
            nds_time_unit_parse(name + p, n - p - 1, unit, cap, scale))
            return kinds[i].t;
    }
    return NDS_DTYPE_INVALID;
}

/* ---- fixed-width strings: fill values as zarr-python 2.13 writes them -------------------------- */

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int b64_value(char c) {
    const char *p = c ? strchr(b64_alphabet, c) : NULL;
    return p ? (int)(p - b64_alphabet) : -1;
}

/* Strict standard base64 (padded, as Python's b64encode writes) into out (cap bytes); the decoded
 * length, or -1 when malformed or longer than cap. */
static long b64_decode(const char *s, uint8_t *out, size_t cap) {
    size_t len = strlen(s), n = 0;
    if (len % 4) return -1;
    for (size_t i = 0; i < len; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            v[k] = b64_value(s[i + k]);
            bool padding = s[i + k] == '=' && i + 4 == len && k >= 2;
            if (padding) pad++, v[k] = 0;
            if (v[k] < 0 || (pad && !padding)) return -1;
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        for (int k = 0; k < 3 - pad; k++) {
            if (n == cap) return -1;
            out[n++] = (uint8_t)(w >> (16 - 8 * k));
        }
    }
    return (long)n;
}

static char *b64_encode(const uint8_t *data, size_t n) {
    char *out = malloc((n + 2) / 3 * 4 + 1), *p = out;
    if (!out) return NULL;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t w = (uint32_t)data[i] << 16 | (i + 1 < n ? (uint32_t)data[i + 1] << 8 : 0) |
                     (i + 2 < n ? data[i + 2] : 0);
        for (size_t k = 0; k < 4; k++)
            *p++ = k <= n - i ? b64_alphabet[(w >> (18 - 6 * k)) & 63] : '=';
    }
    *p = '\0';
    return out;
}

/* One UTF-8 sequence at s (len bytes left) into *cp; its length, or 0 when invalid (overlong,
 * surrogate, beyond U+10FFFF, truncated). */
static size_t utf8_next(const uint8_t *s, size_t len, uint32_t *cp) {
    static const uint32_t min_of[4] = {0, 0x80, 0x800, 0x10000};
    size_t n = s[0] < 0x80 ? 1 : (s[0] >> 5) == 6 ? 2 : (s[0] >> 4) == 14 ? 3 : (s[0] >> 3) == 30 ? 4 : 0;
    if (n == 0 || n > len) return 0;
    uint32_t c = n == 1 ? s[0] : s[0] & (0x7fu >> n);
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        c = c << 6 | (s[i] & 0x3f);
    }
    if (c < min_of[n - 1] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return 0;
    *cp = c;
    return n;
}

bool nds_utf8_valid(const uint8_t *s, size_t len) {
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t k = utf8_next(s + i, len - i, &cp);
        if (k == 0) return false;
        i += k;
    }
    return true;
}

static size_t utf8_put(uint32_t c, char *out) {
    if (c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) c = 0xfffd;
    if (c < 0x80) return out[0] = (char)c, 1;
    if (c < 0x800) return out[0] = (char)(0xc0 | c >> 6), out[1] = (char)(0x80 | (c & 0x3f)), 2;
    if (c < 0x10000) {
        out[0] = (char)(0xe0 | c >> 12);
        out[1] = (char)(0x80 | ((c >> 6) & 0x3f));
        out[2] = (char)(0x80 | (c & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | c >> 18);
    out[1] = (char)(0x80 | ((c >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((c >> 6) & 0x3f));
    out[3] = (char)(0x80 | (c & 0x3f));
    return 4;
}

int nds_string_fill_from_json(nds_dtype t, size_t size, const json_object *v, const char *doc,
                              uint8_t *out) {
    memset(out, 0, size);
    if (v == NULL || json_object_is_type(v, json_type_null)) return 0;
    if (!json_object_is_type(v, json_type_string))
        return nds_err(NDS_EFORMAT, "%s: \"fill_value\" of a %s array must be a string or null",
                       doc, t == NDS_BYTES_FIXED ? "byte string (base64)" : "unicode string");
    const char *s = json_object_get_string((json_object *)v);
    size_t len = (size_t)json_object_get_string_len(v);
    if (t == NDS_BYTES_FIXED) {
        if (strlen(s) != len || b64_decode(s, out, size) < 0)
            return nds_err(NDS_EFORMAT, "%s: \"fill_value\" \"%.40s\" is not base64 of at most %zu "
                                        "bytes", doc, s, size);
        return 0;
    }
    size_t n = 0;
    for (size_t i = 0; i < len; n++) {
        uint32_t cp;
        size_t k = utf8_next((const uint8_t *)s + i, len - i, &cp);
        if (k == 0 || n == size / 4)
            return nds_err(NDS_EFORMAT, "%s: \"fill_value\" \"%.40s\" is %s", doc, s,
                           k == 0 ? "not valid UTF-8" : "longer than the dtype's width");
        memcpy(out + 4 * n, &cp, 4);
        i += k;
    }
    return 0;
}

json_object *nds_string_fill_to_json(nds_dtype t, size_t size, const uint8_t *value) {
    size_t unit = nds_dtype_size(t), n = size / unit;
    while (n > 0) { /* drop trailing NUL units, as NumPy does when it reads the element */
        bool nul = true;
        for (size_t k = 0; k < unit; k++) nul = nul && value[(n - 1) * unit + k] == 0;
        if (!nul) break;
        n--;
    }
    char *text = t == NDS_BYTES_FIXED ? b64_encode(value, n) : malloc(4 * n + 1);
    if (!text) return NULL;
    if (t == NDS_UCS4_FIXED) {
        size_t len = 0;
        for (size_t i = 0; i < n; i++) {
            uint32_t cp;
            memcpy(&cp, value + 4 * i, 4);
            len += utf8_put(cp, text + len);
        }
        text[len] = '\0';
    }
    json_object *o = json_object_new_string(text);
    free(text);
    return o;
}

/* ---- variable-length fill values (zarr v3 string / bytes) ---- */

/* A fill given as an array of byte values ([104, 105]). */
static int byte_list_fill(const json_object *v, const char *doc, uint8_t *bytes, size_t cap,
                          size_t *n) {
    *n = json_object_array_length(v);
    if (*n > cap)
        return nds_err(NDS_EUNSUPPORTED, "%s: \"fill_value\" holds %zu bytes; ndstore supports "
                                         "at most %zu", doc, *n, cap);
    for (size_t i = 0; i < *n; i++) {
        json_object *e = json_object_array_get_idx(v, i);
        int64_t b = json_object_is_type(e, json_type_int) ? json_object_get_int64(e) : -1;
        if (b < 0 || b > 255)
            return nds_err(NDS_EFORMAT, "%s: \"fill_value\"[%zu] must be a byte value (0 to "
                                        "255)", doc, i);
        bytes[i] = (uint8_t)b;
    }
    return 0;
}

int nds_vlen_fill_from_json(nds_dtype t, const json_object *v, const char *doc, uint8_t *out) {
    size_t cap = NDS_ELEM_MAX_SIZE - 4, n = 0;
    uint8_t *bytes = out + 4;
    int rc = 0;
    memset(out, 0, NDS_ELEM_MAX_SIZE);
    if (json_object_is_type(v, json_type_null)) return 0;
    if (t == NDS_BYTES_VLEN && json_object_is_type(v, json_type_array)) {
        rc = byte_list_fill(v, doc, bytes, cap, &n);
    } else if (json_object_is_type(v, json_type_string)) {
        const char *s = json_object_get_string((json_object *)v);
        size_t len = (size_t)json_object_get_string_len(v);
        long got = t == NDS_STRING ? (long)len : b64_decode(s, bytes, cap);
        if (t == NDS_STRING && len <= cap) memcpy(bytes, s, len);
        if (len > cap * 2 || (t == NDS_STRING && len > cap))
            rc = nds_err(NDS_EUNSUPPORTED, "%s: \"fill_value\" is longer than %zu bytes, "
                                           "ndstore's limit", doc, cap);
        else if (got < 0 || strlen(s) != len || (t == NDS_STRING && !nds_utf8_valid(bytes, len)))
            rc = nds_err(NDS_EFORMAT, "%s: \"fill_value\" \"%.40s\" is not %s", doc, s,
                         t == NDS_STRING ? "valid UTF-8 text" : "base64 of at most 4092 bytes");
        n = got < 0 ? 0 : (size_t)got;
    } else {
        rc = nds_err(NDS_EFORMAT, "%s: \"fill_value\" of a %s array must be %s", doc,
                     nds_dtype_name(t),
                     t == NDS_STRING ? "a string" : "a base64 string or an array of byte values");
    }
    uint32_t len32 = (uint32_t)n;
    memcpy(out, &len32, 4);
    return rc;
}

json_object *nds_vlen_fill_to_json(nds_dtype t, const uint8_t *fill) {
    uint32_t n;
    memcpy(&n, fill, 4);
    if (n > NDS_ELEM_MAX_SIZE - 4) n = 0; /* UINT32_MAX: no fill element, written as empty */
    if (t == NDS_STRING) return json_object_new_string_len((const char *)fill + 4, (int)n);
    char *text = b64_encode(fill + 4, n);
    json_object *o = text ? json_object_new_string(text) : NULL;
    free(text);
    return o;
}
