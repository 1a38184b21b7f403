/* Array codecs (array_codecs.h): numcodecs' Delta, FixedScaleOffset, Quantize, BitRound, PackBits
 * and AsType over typed buffers, and registry codecs as byte stages, chained for zarr v2 filters
 * and zarr v3 array-to-array codecs.
 *
 * Arithmetic follows NumPy as numcodecs drives it (NumPy 1.x value-based casting): a float array
 * with a Python scalar computes in the array's precision (float32 stays float32), np.around rounds
 * half to even, integer arithmetic wraps in the array's type when the scalar fits it, integer
 * true division is float64, float-to-integer casts truncate toward zero. Delta's decode adds each
 * encoded element cast to the decoded type, in that type (np.cumsum with out=); for bools np.diff
 * is "!=" and the sum is "or", so a bool delta does not give its input back (numcodecs neither).
 * Casts of values out of an integer type's range are unspecified in NumPy; here they give the
 * type's minimum (x86's result for 64-bit) after truncation.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array_codecs.h"
#include "ndstore/sys/codec.h"
#include "internal/dtype_util.h"
#include "internal/error.h"
#include "internal/json_util.h"
#include "internal/util.h"

#define MAX_STAGES 16
/* Largest output of one stage: the chunk limit of the formats (2 GiB). */
#define MAX_STAGE_BYTES ((size_t)1 << 31)

typedef enum {
    ST_DELTA,
    ST_FSO,
    ST_QUANTIZE,
    ST_BITROUND,
    ST_PACKBITS,
    ST_ASTYPE,
    ST_BYTES
} st_kind;

typedef struct stage {
    st_kind kind;
    nds_np_dtype in, out;       /* element types seen on encode: input, output */
    size_t in_bytes, out_bytes; /* sizes for this chain's chunk */
    double offset, scale;       /* fixedscaleoffset */
    bool off_int, scale_int;    /* ... given as JSON integers (integer arithmetic applies) */
    int64_t ioffset, iscale;
    int64_t digits;         /* quantize */
    int64_t keepbits;       /* bitround */
    const nds_codec *codec; /* byte stage */
    void *state;
    json_object *config; /* normalised numcodecs config, owned */
} stage;

struct nds_filter_chain {
    size_t n;
    stage st[MAX_STAGES];
};

/* ---- element types --------------------------------------------------------------------------- */

static bool host_big(void) {
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 0;
}

int nds_np_dtype_parse(const char *s, const char *doc, const char *member, nds_np_dtype *out) {
    static const struct {
        const char *name, *code;
    } names[] = {{"bool", "b1"},   {"int8", "i1"},    {"uint8", "u1"},   {"int16", "i2"},
                 {"uint16", "u2"}, {"int32", "i4"},   {"uint32", "u4"},  {"int64", "i8"},
                 {"uint64", "u8"}, {"float16", "f2"}, {"float32", "f4"}, {"float64", "f8"}};
    const char *p = s;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(s, names[i].name) == 0) p = names[i].code;
    char order = '=';
    if (*p == '<' || *p == '>' || *p == '|' || *p == '=') order = *p++;
    char kind = p[0];
    int size = 0;
    for (const char *q = p + 1; *q >= '0' && *q <= '9' && size < 100; q++)
        size = size * 10 + (*q - '0');
    bool ok =
        p[1] && strspn(p + 1, "0123456789") == strlen(p + 1) &&
        ((kind == 'b' && size == 1) ||
         ((kind == 'i' || kind == 'u') && (size == 1 || size == 2 || size == 4 || size == 8)) ||
         (kind == 'f' && (size == 2 || size == 4 || size == 8)));
    if (!ok)
        return nds_err(NDS_EUNSUPPORTED,
                       "%s: \"%s\" \"%.40s\" is not a supported NumPy type (bool, integers, "
                       "float16/32/64)",
                       doc, member, s);
    out->kind = kind;
    out->size = (uint8_t)size;
    out->big = size > 1 && (order == '>' || (order == '=' && host_big()));
    return 0;
}

nds_dtype nds_np_dtype_to_nds(nds_np_dtype t) {
    char s[8];
    snprintf(s, sizeof s, "%c%u", t.kind, t.size);
    static const struct {
        const char *code;
        nds_dtype d;
    } map[] = {{"b1", NDS_BOOL},   {"i1", NDS_INT8},    {"u1", NDS_UINT8},   {"i2", NDS_INT16},
               {"u2", NDS_UINT16}, {"i4", NDS_INT32},   {"u4", NDS_UINT32},  {"i8", NDS_INT64},
               {"u8", NDS_UINT64}, {"f2", NDS_FLOAT16}, {"f4", NDS_FLOAT32}, {"f8", NDS_FLOAT64}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (strcmp(s, map[i].code) == 0) return map[i].d;
    return NDS_DTYPE_INVALID;
}

bool nds_np_dtype_of(nds_dtype d, bool big, nds_np_dtype *t) {
    for (char k = 0; k < 4; k++) {
        const char kinds[] = "biuf";
        for (uint8_t size = 1; size <= 8; size *= 2) {
            nds_np_dtype c = {kinds[(int)k], size, big && size > 1};
            if (nds_np_dtype_to_nds(c) == d) {
                *t = c;
                return true;
            }
        }
    }
    return false;
}

/* ---- element access -------------------------------------------------------------------------- */

/* An element's bits as an unsigned integer: memcpy in the host's byte order (the common case,
 * and what zarr v3 always has), byte by byte otherwise. */
static uint64_t load_bits(nds_np_dtype t, const uint8_t *p) {
    if (t.big == host_big() || t.size == 1) {
        uint8_t u8;
        uint16_t u16;
        uint32_t u32;
        uint64_t u64;
        switch (t.size) {
        case 1: memcpy(&u8, p, 1); return u8;
        case 2: memcpy(&u16, p, 2); return u16;
        case 4: memcpy(&u32, p, 4); return u32;
        default: memcpy(&u64, p, 8); return u64;
        }
    }
    uint64_t v = 0;
    for (unsigned i = 0; i < t.size; i++) v = v << 8 | p[t.big ? i : t.size - 1 - i];
    return v;
}

static void store_bits(nds_np_dtype t, uint8_t *p, uint64_t v) {
    if (t.big == host_big() || t.size == 1) {
        uint8_t u8 = (uint8_t)v;
        uint16_t u16 = (uint16_t)v;
        uint32_t u32 = (uint32_t)v;
        switch (t.size) {
        case 1: memcpy(p, &u8, 1); return;
        case 2: memcpy(p, &u16, 2); return;
        case 4: memcpy(p, &u32, 4); return;
        default: memcpy(p, &v, 8); return;
        }
    }
    for (unsigned i = 0; i < t.size; i++, v >>= 8) p[t.big ? t.size - 1 - i : i] = (uint8_t)v;
}

static uint64_t size_mask(unsigned size) {
    return size >= 8 ? UINT64_MAX : (UINT64_C(1) << (8 * size)) - 1;
}

/* An integer or bool element's value (u8 above 2^63 wraps: NumPy would promote it). */
static int64_t int_value(nds_np_dtype t, uint64_t bits) {
    if (t.kind == 'b') return bits != 0;
    if (t.kind == 'u' || t.size == 8) return (int64_t)bits;
    uint64_t sign = UINT64_C(1) << (8 * t.size - 1);
    return (int64_t)((bits ^ sign) - sign);
}

static double to_double(nds_np_dtype t, uint64_t bits) {
    if (t.kind != 'f') return t.kind == 'u' ? (double)bits : (double)int_value(t, bits);
    if (t.size == 2) return nds_half_to_float((uint16_t)bits);
    if (t.size == 4) {
        uint32_t b = (uint32_t)bits;
        float f;
        memcpy(&f, &b, 4);
        return f;
    }
    double d;
    memcpy(&d, &bits, 8);
    return d;
}

/* x rounded to the precision of float type t (float64: unchanged). */
static double round_to(nds_np_dtype t, double x) {
    if (t.kind != 'f' || t.size == 8) return x;
    if (t.size == 4) return (float)x;
    return nds_half_to_float(nds_float_to_half((float)x));
}

/* A value cast to t as NumPy's astype does (floats to integers truncate toward zero). */
static uint64_t from_double(nds_np_dtype t, double x) {
    if (t.kind == 'b') return x != 0;
    if (t.kind == 'f') {
        if (t.size == 2) return nds_float_to_half((float)x);
        if (t.size == 4) {
            float f = (float)x;
            uint32_t b;
            memcpy(&b, &f, 4);
            return b;
        }
        uint64_t b;
        memcpy(&b, &x, 8);
        return b;
    }
    if (t.kind == 'u' && t.size == 8 && x >= 0 && x < 18446744073709551616.0) return (uint64_t)x;
    if (!(x > -9223372036854775808.0 - 1.0 && x < 9223372036854775808.0))
        return (UINT64_C(1) << 63) & size_mask(t.size); /* NaN or out of range */
    return (uint64_t)(int64_t)x & size_mask(t.size);
}

static uint64_t from_int(nds_np_dtype t, int64_t v) {
    if (t.kind == 'b') return v != 0;
    if (t.kind == 'f') return from_double(t, (double)v);
    return (uint64_t)v & size_mask(t.size);
}

/* One element converted from type a to type b (NumPy astype). */
static uint64_t cast_bits(nds_np_dtype a, nds_np_dtype b, uint64_t bits) {
    if (a.kind == 'f') return from_double(b, to_double(a, bits));
    if (a.kind == 'u' && a.size == 8 && b.kind == 'f') return from_double(b, (double)bits);
    return from_int(b, int_value(a, bits));
}

/* An integer result wrapped to integer type t (its value again). */
static int64_t wrap_to(nds_np_dtype t, int64_t v) {
    return int_value(t, (uint64_t)v & size_mask(t.size));
}

static bool fits(nds_np_dtype t, int64_t v) {
    if (t.kind == 'b') return false; /* bool with an integer scalar computes in int64 */
    if (t.size == 8) return t.kind == 'i' || v >= 0;
    int64_t lo = t.kind == 'u' ? 0 : -(INT64_C(1) << (8 * t.size - 1));
    int64_t hi =
        t.kind == 'u' ? (INT64_C(1) << (8 * t.size)) - 1 : (INT64_C(1) << (8 * t.size - 1)) - 1;
    return v >= lo && v <= hi;
}

/* ---- the codecs, one element at a time ------------------------------------------------------- */

static uint64_t fso_encode_one(const stage *s, uint64_t bits) {
    nds_np_dtype d = s->in;
    if (d.kind == 'f') {
        double a = round_to(d, to_double(d, bits) - round_to(d, s->offset));
        a = round_to(d, a * round_to(d, s->scale));
        return from_double(s->out, nearbyint(a));
    }
    /* Integer array: integer arithmetic (wrapping in the array's type when the scalar fits it)
     * until a float scalar makes it float64. */
    int64_t v = int_value(d, bits);
    if (!s->off_int) {
        double a = ((double)v - s->offset) * s->scale;
        return from_double(s->out, nearbyint(a));
    }
    v = (int64_t)((uint64_t)v - (uint64_t)s->ioffset);
    bool narrow = fits(d, s->ioffset);
    if (narrow) v = wrap_to(d, v);
    if (!s->scale_int) return from_double(s->out, nearbyint((double)v * s->scale));
    v = (int64_t)((uint64_t)v * (uint64_t)s->iscale);
    if (narrow && fits(d, s->iscale)) v = wrap_to(d, v);
    return from_int(s->out, v);
}

static uint64_t fso_decode_one(const stage *s, uint64_t bits) {
    nds_np_dtype a = s->out; /* the encoded type */
    nds_np_dtype prec = a.kind == 'f' ? a : (nds_np_dtype){'f', 8, false};
    double x = round_to(prec, to_double(a, bits) / round_to(prec, s->scale));
    x = round_to(prec, x + round_to(prec, s->offset));
    return from_double(s->in, x);
}

/* numcodecs Quantize's scale: 2^bits, bits = ceil(log2(10^-exp)), exp = log10(10^-digits)
 * rounded away from zero, with Python's math.log(x, base) = log(x) / log(base). */
static double quantize_scale(int64_t digits) {
    double precision = pow(10.0, (double)-digits);
    double e = log(precision) / log(10.0);
    double exp = e < 0 ? floor(e) : ceil(e);
    double bits = ceil(log(pow(10.0, -exp)) / log(2.0));
    return pow(2.0, bits);
}

static uint64_t quantize_one(const stage *s, uint64_t bits, double scale) {
    nds_np_dtype d = s->in;
    double a = nearbyint(round_to(d, round_to(d, scale) * to_double(d, bits)));
    return from_double(s->out, round_to(d, a / round_to(d, scale)));
}

/* The zarr v3 bitround extension on integers: keepbits bits from the most significant set bit of
 * the element's bits (two's complement for signed types, so a negative value's is the sign bit),
 * rounded half to even like the floats, saturating at all ones (as zarrs, the extension's
 * maintainer's implementation, does; the text says only "rounds the remaining bits to zero"). */
static uint64_t bitround_int(const stage *s, uint64_t bits) {
    uint64_t all = size_mask(s->in.size);
    bits &= all;
    unsigned maxbits = bits ? 64 - (unsigned)__builtin_clzll(bits) : 0;
    if ((uint64_t)s->keepbits >= maxbits) return bits;
    unsigned maskbits = maxbits - (unsigned)s->keepbits;
    uint64_t add = ((bits >> maskbits) & 1) + ((UINT64_C(1) << (maskbits - 1)) - 1);
    uint64_t sum = bits > all - add ? all : bits + add;
    return sum & ~((UINT64_C(1) << maskbits) - 1);
}

/* numcodecs BitRound: keep keepbits mantissa bits, rounding half to even, on the integer view. */
static uint64_t bitround_one(const stage *s, uint64_t bits) {
    if (s->in.kind != 'f') return bitround_int(s, bits);
    unsigned mant = s->in.size == 2 ? 10 : s->in.size == 4 ? 23 : 52;
    unsigned maskbits = mant - (unsigned)s->keepbits;
    if (maskbits == 0) return bits;
    uint64_t mask = ~((UINT64_C(1) << maskbits) - 1);
    uint64_t half_quantum1 = (UINT64_C(1) << (maskbits - 1)) - 1;
    bits += ((bits >> maskbits) & 1) + half_quantum1;
    return bits & mask & size_mask(s->in.size);
}

/* ---- stages over buffers --------------------------------------------------------------------- */

static size_t count_of(const stage *s) { return s->in_bytes / s->in.size; }

static void packbits_encode(const stage *s, const uint8_t *in, uint8_t *out) {
    size_t n = s->in_bytes;
    memset(out, 0, s->out_bytes);
    out[0] = (uint8_t)((8 - n % 8) % 8);
    for (size_t i = 0; i < n; i++)
        if (in[i]) out[1 + i / 8] |= (uint8_t)(0x80 >> (i % 8));
}

static int packbits_decode(const stage *s, const uint8_t *in, uint8_t *out) {
    size_t n = s->in_bytes;
    if (in[0] != (8 - n % 8) % 8)
        return nds_err(NDS_ECORRUPT,
                       "packbits: %u padding bits recorded, %zu expected for %zu "
                       "elements",
                       in[0], (8 - n % 8) % 8, n);
    for (size_t i = 0; i < n; i++) out[i] = (in[1 + i / 8] >> (7 - i % 8)) & 1;
    return 0;
}

static void encode_elements(const stage *s, const uint8_t *in, uint8_t *out) {
    size_t n = count_of(s), is = s->in.size, os = s->out.size;
    double qscale = s->kind == ST_QUANTIZE ? quantize_scale(s->digits) : 0;
    uint64_t prev = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t b = load_bits(s->in, in + i * is), r;
        switch (s->kind) {
        case ST_DELTA:
            if (i == 0) {
                r = cast_bits(s->in, s->out, b);
            } else if (s->in.kind == 'f') {
                r = from_double(s->out,
                                round_to(s->in, to_double(s->in, b) - to_double(s->in, prev)));
            } else {
                int64_t diff =
                    (int64_t)((uint64_t)int_value(s->in, b) - (uint64_t)int_value(s->in, prev));
                r = s->in.kind == 'b' ? from_int(s->out, b != prev)
                                      : from_int(s->out, wrap_to(s->in, diff));
            }
            prev = b;
            break;
        case ST_FSO: r = fso_encode_one(s, b); break;
        case ST_QUANTIZE: r = quantize_one(s, b, qscale); break;
        case ST_BITROUND: r = bitround_one(s, b); break;
        default: r = cast_bits(s->in, s->out, b); break; /* astype */
        }
        store_bits(s->out, out + i * os, r);
    }
}

static void decode_elements(const stage *s, const uint8_t *in, uint8_t *out) {
    size_t n = count_of(s), is = s->in.size, os = s->out.size;
    uint64_t acc = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t b = load_bits(s->out, in + i * os), r;
        switch (s->kind) {
        case ST_DELTA: {
            uint64_t e = cast_bits(s->out, s->in, b);
            if (i == 0)
                r = e;
            else if (s->in.kind == 'f')
                r = from_double(s->in, to_double(s->in, acc) + to_double(s->in, e));
            else if (s->in.kind == 'b')
                r = acc || e;
            else
                r = (acc + e) & size_mask(s->in.size);
            acc = r;
            break;
        }
        case ST_FSO: r = fso_decode_one(s, b); break;
        case ST_BITROUND: r = b; break;
        default: r = cast_bits(s->out, s->in, b); break; /* quantize, astype */
        }
        store_bits(s->in, out + i * is, r);
    }
}

static int stage_encode(const stage *s, const uint8_t *in, nds_buf *out) {
    if (s->kind == ST_BYTES) {
        out->len = 0;
        int rc = s->codec->encode(s->state, in, s->in_bytes, out);
        if (rc == 0 && out->len != s->out_bytes)
            rc = nds_err(NDS_EINTERNAL, "%s: encoded %zu bytes, expected %zu", s->codec->name,
                         out->len, s->out_bytes);
        return rc;
    }
    if (nds_buf_reserve(out, s->out_bytes ? s->out_bytes : 1) != 0)
        return nds_err(NDS_ENOMEM, "filters: out of memory");
    if (s->kind == ST_PACKBITS)
        packbits_encode(s, in, out->data);
    else
        encode_elements(s, in, out->data);
    out->len = s->out_bytes;
    return 0;
}

static int stage_decode(const stage *s, const uint8_t *in, size_t len, uint8_t *out) {
    const char *name = json_object_get_string(json_object_object_get(s->config, "id"));
    if (len != s->out_bytes)
        return nds_err(NDS_ECORRUPT, "%s: expected %zu encoded bytes, found %zu", name,
                       s->out_bytes, len);
    if (s->kind == ST_BYTES) {
        size_t got = 0;
        int rc = nds_codec_decode(s->codec, s->state, in, len, out, s->in_bytes, &got);
        if (rc == 0 && got != s->in_bytes)
            rc = nds_err(NDS_ECORRUPT, "%s: expected %zu bytes after decoding, found %zu", name,
                         s->in_bytes, got);
        return rc;
    }
    if (s->kind == ST_PACKBITS) return packbits_decode(s, in, out);
    decode_elements(s, in, out);
    return 0;
}

/* ---- parsing --------------------------------------------------------------------------------- */

static int check_keys(const json_object *cfg, const char *const *allowed, const char *dp) {
    json_object_object_foreach((json_object *)cfg, key, val) {
        (void)val;
        bool ok = strcmp(key, "id") == 0;
        for (size_t i = 0; allowed[i] && !ok; i++) ok = strcmp(key, allowed[i]) == 0;
        if (!ok) return nds_err(NDS_EFORMAT, "%s: unknown configuration member \"%.40s\"", dp, key);
    }
    return 0;
}

/* host: the typestring means the host's byte order whatever it says (zarr v3). */
static int get_dtype(const json_object *cfg, const char *member, bool optional, bool host,
                     const char *dp, nds_np_dtype *out) {
    const char *s = NULL;
    int rc = nds_json_get_string(cfg, member, optional, dp, &s);
    if (rc || !s) return rc;
    rc = nds_np_dtype_parse(s, dp, member, out);
    if (!rc && host) out->big = out->size > 1 && host_big();
    return rc;
}

static int get_number(const json_object *cfg, const char *member, const char *dp, double *d,
                      bool *is_int, int64_t *i) {
    json_object *v;
    if (!json_object_object_get_ex(cfg, member, &v))
        return nds_err(NDS_EFORMAT, "%s: missing member \"%s\"", dp, member);
    if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_double))
        return nds_err(NDS_EFORMAT, "%s: \"%s\" must be a number", dp, member);
    *is_int = json_object_is_type(v, json_type_int);
    *i = json_object_get_int64(v);
    *d = json_object_get_double(v);
    if (*is_int && (*i == INT64_MAX || *i == INT64_MIN))
        return nds_err(NDS_EUNSUPPORTED, "%s: \"%s\" is beyond 64-bit integers", dp, member);
    return 0;
}

static int parse_typed(stage *s, const char *id, const json_object *cfg, bool host,
                       const char *dp) {
    static const char *const delta_keys[] = {"dtype", "astype", NULL};
    static const char *const fso_keys[] = {"offset", "scale", "dtype", "astype", NULL};
    static const char *const q_keys[] = {"digits", "dtype", "astype", NULL};
    static const char *const astype_keys[] = {"encode_dtype", "decode_dtype", NULL};
    bool fso = strcmp(id, "fixedscaleoffset") == 0, q = strcmp(id, "quantize") == 0;
    if (strcmp(id, "astype") == 0) {
        s->kind = ST_ASTYPE;
        int rc = check_keys(cfg, astype_keys, dp);
        if (!rc) rc = get_dtype(cfg, "decode_dtype", false, host, dp, &s->in);
        if (!rc) rc = get_dtype(cfg, "encode_dtype", false, host, dp, &s->out);
        return rc;
    }
    s->kind = fso ? ST_FSO : q ? ST_QUANTIZE : ST_DELTA;
    int rc = check_keys(cfg, fso ? fso_keys : q ? q_keys : delta_keys, dp);
    if (!rc) rc = get_dtype(cfg, "dtype", false, host, dp, &s->in);
    s->out = s->in;
    if (!rc) rc = get_dtype(cfg, "astype", true, host, dp, &s->out);
    if (!rc && fso) rc = get_number(cfg, "offset", dp, &s->offset, &s->off_int, &s->ioffset);
    if (!rc && fso) rc = get_number(cfg, "scale", dp, &s->scale, &s->scale_int, &s->iscale);
    if (!rc && q) rc = nds_json_get_int(cfg, "digits", false, -300, 300, dp, &s->digits);
    if (!rc && q && (s->in.kind != 'f' || s->out.kind != 'f'))
        rc = nds_err(NDS_EFORMAT, "%s: quantize supports only floating point types", dp);
    return rc;
}

/* The size a byte stage adds; false for registry codecs whose output size varies. */
static bool byte_stage_growth(const char *id, size_t *grow) {
    *grow = strcmp(id, "shuffle") == 0 ? 0 : 4;
    return strcmp(id, "shuffle") == 0 || strcmp(id, "adler32") == 0 ||
           strcmp(id, "fletcher32") == 0 || strcmp(id, "crc32") == 0 || strcmp(id, "crc32c") == 0;
}

static int parse_stage(stage *s, const json_object *cfg, nds_np_dtype in, size_t in_bytes,
                       bool host, const char *dp) {
    static const char *const br_keys[] = {"keepbits", NULL};
    static const char *const none[] = {NULL};
    const char *id = NULL;
    if (!json_object_is_type(cfg, json_type_object))
        return nds_err(NDS_EFORMAT, "%s: expected a codec object with an \"id\"", dp);
    int rc = nds_json_get_string(cfg, "id", false, dp, &id);
    if (rc) return rc;
    s->in = s->out = in;
    size_t grow;
    if (strcmp(id, "bitround") == 0) {
        s->kind = ST_BITROUND;
        rc = check_keys(cfg, br_keys, dp);
        /* Integers: the zarr v3 extension's (host order); numcodecs (zarr v2) has floats only. */
        bool ints = host && (in.kind == 'i' || in.kind == 'u');
        if (!rc && in.kind != 'f' && !ints)
            rc = nds_err(NDS_EUNSUPPORTED,
                         host ? "%s: bitround needs integer or float16/32/64 data"
                              : "%s: bitround needs float16/32/64 data",
                         dp);
        if (!rc && in.big) /* numcodecs fails on them (its table knows only native names) */
            rc = nds_err(NDS_EUNSUPPORTED, "%s: bitround of big-endian data is not supported", dp);
        unsigned mant = ints ? 8u * in.size : in.size == 2 ? 10 : in.size == 4 ? 23 : 52;
        if (!rc) /* the extension wants at least 1 for integers; numcodecs allows 0 for floats */
            rc = nds_json_get_int(cfg, "keepbits", false, ints ? 1 : 0, mant, dp, &s->keepbits);
    } else if (strcmp(id, "packbits") == 0) {
        s->kind = ST_PACKBITS;
        rc = check_keys(cfg, none, dp);
        if (!rc && in.size != 1)
            rc = nds_err(NDS_EUNSUPPORTED, "%s: packbits needs 1-byte (bool) elements", dp);
        s->out = (nds_np_dtype){'u', 1, false};
    } else if (strcmp(id, "delta") == 0 || strcmp(id, "fixedscaleoffset") == 0 ||
               strcmp(id, "quantize") == 0 || strcmp(id, "astype") == 0) {
        rc = parse_typed(s, id, cfg, host, dp);
    } else if (byte_stage_growth(id, &grow) && nds_codec_find(id)) {
        s->kind = ST_BYTES;
        s->codec = nds_codec_find(id);
        rc = s->codec->create(&s->state, cfg, in.size);
        if (rc) return nds_err_prefix(rc, "%s", dp);
        if (grow) s->out = (nds_np_dtype){'u', 1, false};
        s->in_bytes = in_bytes;
        s->out_bytes = in_bytes + grow;
        return s->codec->config_json(s->state, &s->config);
    } else {
        return nds_err(NDS_EUNSUPPORTED, "%s: filter \"%.40s\" is not supported", dp, id);
    }
    if (rc) return rc;
    if (in_bytes % s->in.size)
        return nds_err(NDS_EFORMAT, "%s: %zu bytes are not a whole number of %u-byte elements", dp,
                       in_bytes, s->in.size);
    s->in_bytes = in_bytes;
    s->out_bytes = s->kind == ST_PACKBITS ? in_bytes / 8 + (in_bytes % 8 != 0) + 1
                                          : in_bytes / s->in.size * s->out.size;
    if (s->out_bytes > MAX_STAGE_BYTES) /* a widening astype of a big chunk */
        return nds_err(NDS_ELIMIT, "%s: encodes a chunk into %zu bytes, more than 2 GiB", dp,
                       s->out_bytes);
    return json_object_deep_copy((json_object *)cfg, &s->config, NULL) == 0
               ? 0
               : nds_err(NDS_ENOMEM, "%s: out of memory", dp);
}

int nds_filter_chain_parse(const json_object *list, nds_np_dtype in, size_t nbytes, bool host_order,
                           const char *doc, const char *where, nds_filter_chain **out) {
    *out = NULL;
    if (!json_object_is_type(list, json_type_array))
        return nds_err(NDS_EFORMAT, "%s: \"%s\" must be an array", doc, where);
    size_t n = json_object_array_length(list);
    if (n > MAX_STAGES)
        return nds_err(NDS_ELIMIT, "%s: \"%s\" has %zu entries; ndstore supports at most %d", doc,
                       where, n, MAX_STAGES);
    nds_filter_chain *c = calloc(1, sizeof *c);
    if (!c) return nds_err(NDS_ENOMEM, "%s: out of memory", doc);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char dp[700];
        snprintf(dp, sizeof dp, "%s: %s[%zu]", doc, where, i);
        rc = parse_stage(&c->st[i], json_object_array_get_idx(list, i), in, nbytes, host_order, dp);
        c->n = i + 1;
        in = c->st[i].out;
        nbytes = c->st[i].out_bytes;
    }
    if (rc) {
        nds_filter_chain_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

void nds_filter_chain_free(nds_filter_chain *c) {
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) {
        if (c->st[i].codec && c->st[i].state) c->st[i].codec->destroy(c->st[i].state);
        json_object_put(c->st[i].config);
    }
    free(c);
}

size_t nds_filter_chain_encoded_size(const nds_filter_chain *c) {
    return c->st[c->n - 1].out_bytes;
}

nds_np_dtype nds_filter_chain_encoded_dtype(const nds_filter_chain *c) {
    return c->st[c->n - 1].out;
}

int nds_filter_chain_encode(const nds_filter_chain *c, const uint8_t *in, nds_buf *out) {
    nds_buf t[2] = {{0}, {0}};
    const uint8_t *cur = in;
    int rc = 0;
    for (size_t k = 0; rc == 0 && k < c->n; k++) {
        nds_buf *dst = k + 1 == c->n ? out : &t[k & 1];
        rc = stage_encode(&c->st[k], cur, dst);
        cur = dst->data;
    }
    nds_buf_dispose(&t[0]);
    nds_buf_dispose(&t[1]);
    return rc;
}

int nds_filter_chain_decode(const nds_filter_chain *c, const uint8_t *in, size_t len,
                            uint8_t *out) {
    uint8_t *t[2] = {NULL, NULL};
    const uint8_t *cur = in;
    int rc = 0;
    for (size_t k = c->n; rc == 0 && k-- > 0;) {
        const stage *s = &c->st[k];
        uint8_t *dst = out;
        if (k > 0 && !(dst = t[k & 1] = malloc(s->in_bytes ? s->in_bytes : 1)))
            rc = nds_err(NDS_ENOMEM, "filters: out of memory");
        if (!rc) rc = stage_decode(s, cur, len, dst);
        if (k + 1 < c->n) free(t[(k + 1) & 1]), t[(k + 1) & 1] = NULL;
        cur = dst;
        len = s->in_bytes;
    }
    free(t[0]);
    free(t[1]);
    return rc;
}

bool nds_filter_id_supported(const char *id) {
    static const char *const ids[] = {
        "delta",   "fixedscaleoffset", "quantize",   "bitround", "packbits", "astype",
        "shuffle", "adler32",          "fletcher32", "crc32",    "crc32c"};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        if (strcmp(id, ids[i]) == 0) return true;
    return false;
}
