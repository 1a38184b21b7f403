/* Fill values in JSON, as zarr writes them: numbers, booleans, null, "NaN", "Infinity",
 * "-Infinity", "0x..." bit patterns (zarr v3) and [re, im] pairs for complex types. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal/dtype_util.h"
#include "internal/error.h"
#include "internal/json_util.h"

static bool is_float(nds_dtype t) { return nds_dtype_is_float(t); }

static double load_float(nds_dtype t, const uint8_t *p);

/* Stores a double as one element of float type t; -1 when a small float cannot hold it. */
static int store_float(nds_dtype t, double d, uint8_t *out) {
    if (nds_dtype_is_small_float(t)) return nds_small_float_store(t, d, out);
    if (t == NDS_FLOAT64) {
        memcpy(out, &d, 8);
    } else if (t == NDS_FLOAT32) {
        float f = (float)d;
        memcpy(out, &f, 4);
    } else {
        uint16_t h = t == NDS_FLOAT16 ? nds_float_to_half((float)d) : nds_float_to_bf16((float)d);
        memcpy(out, &h, 2);
    }
    return 0;
}

/* The error of a number the dtype cannot hold (it would become infinite), naming it as written. */
static int out_of_range(const json_object *v, nds_dtype t, const char *doc) {
    return nds_err(NDS_EFORMAT,
                   "%s: fill_value %s is out of range for %s (write \"Infinity\" for infinity)",
                   doc, json_object_to_json_string_ext((json_object *)v, JSON_C_TO_STRING_PLAIN),
                   nds_dtype_name(t));
}

/* Stores real value d parsed from v as one element of float type t: a number that only fits as
 * infinity (1e400, or 1e39 for float32) is an error; "Infinity" and "NaN" spelled so stay. */
static int store_real(nds_dtype t, const json_object *v, double d, const char *doc, uint8_t *out) {
    if (store_float(t, d, out) != 0)
        return nds_err(NDS_EFORMAT, "%s: fill_value %s cannot be held by %s (%s)", doc,
                       json_object_to_json_string_ext((json_object *)v, JSON_C_TO_STRING_PLAIN),
                       nds_dtype_name(t),
                       isnan(d)   ? "it has no NaN"
                       : isinf(d) ? "it has no infinity"
                                  : "out of range");
    bool spelled = json_object_is_type(v, json_type_string);
    double stored = load_float(t, out);
    return !spelled && isinf(stored) ? out_of_range(v, t, doc) : 0;
}

/* A real number from JSON: number or one of the special strings. */
static int parse_real(const json_object *v, const char *doc, double *out) {
    if (nds_json_int_overflowed(v)) { /* json-c clamped it: read the literal itself */
        *out = strtod(json_object_get_userdata((json_object *)v), NULL);
        return 0;
    }
    if (json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int)) {
        *out = json_object_get_double(v);
        return 0;
    }
    if (json_object_is_type(v, json_type_string)) {
        const char *s = json_object_get_string((json_object *)v);
        if (strcmp(s, "NaN") == 0)
            *out = NAN;
        else if (strcmp(s, "Infinity") == 0)
            *out = INFINITY;
        else if (strcmp(s, "-Infinity") == 0)
            *out = -INFINITY;
        else
            return nds_err(NDS_EFORMAT, "%s: fill_value \"%s\" is not a number", doc, s);
        return 0;
    }
    return nds_err(NDS_EFORMAT, "%s: fill_value must be a number", doc);
}

/* "0x..." raw bit pattern of exactly size bytes (big-endian hex digits, as zarr v3 writes). */
static int parse_hex(const char *s, size_t size, const char *doc, uint8_t *out) {
    size_t digits = strlen(s + 2);
    if (digits == 0 || digits > 2 * size)
        return nds_err(NDS_EFORMAT, "%s: fill_value \"%s\" does not fit %zu bytes", doc, s, size);
    uint64_t v = 0;
    for (const char *p = s + 2; *p; p++) {
        int d = (*p >= '0' && *p <= '9')   ? *p - '0'
                : (*p >= 'a' && *p <= 'f') ? *p - 'a' + 10
                : (*p >= 'A' && *p <= 'F') ? *p - 'A' + 10
                                           : -1;
        if (d < 0) return nds_err(NDS_EFORMAT, "%s: fill_value \"%s\" is not hexadecimal", doc, s);
        v = (v << 4) | (uint64_t)d;
    }
    memcpy(out, &v, size); /* little-endian host assumed for the integer image; size <= 8 */
    if (nds_host_is_big_endian()) memcpy(out, (uint8_t *)&v + 8 - size, size);
    return 0;
}

static int parse_integer(nds_dtype t, const json_object *v, const char *doc, uint8_t *out) {
    size_t size = nds_dtype_size(t);
    bool is_signed = (t >= NDS_INT8 && t <= NDS_INT64) || t == NDS_INT4 || t == NDS_INT2 ||
                     t == NDS_DATETIME64 || t == NDS_TIMEDELTA64;
    int rc = nds_json_check_fits(v, doc, "fill_value");
    if (rc) return rc;
    if (!json_object_is_type(v, json_type_int)) {
        if (!json_object_is_type(v, json_type_double) ||
            json_object_get_double(v) != floor(json_object_get_double(v)))
            return nds_err(NDS_EFORMAT, "%s: fill_value must be an integer for %s", doc,
                           nds_dtype_name(t));
        /* json-c clamps a double converted to a 64-bit integer: check the range as a double. */
        double d = json_object_get_double(v);
        if (is_signed ? (d < -0x1p63 || d >= 0x1p63) : (d < 0 || d >= 0x1p64))
            return nds_err(NDS_EFORMAT, "%s: fill_value out of range for %s", doc,
                           nds_dtype_name(t));
    }
    unsigned bits = nds_dtype_value_bits(t);
    if (is_signed) {
        int64_t x = json_object_get_int64(v);
        int64_t lo = bits == 64 ? INT64_MIN : -(INT64_C(1) << (bits - 1));
        int64_t hi = bits == 64 ? INT64_MAX : (INT64_C(1) << (bits - 1)) - 1;
        if (x < lo || x > hi ||
            (json_object_is_type(v, json_type_int) && x == INT64_MAX &&
             json_object_get_uint64(v) > (uint64_t)INT64_MAX))
            return nds_err(NDS_EFORMAT, "%s: fill_value out of range for %s", doc,
                           nds_dtype_name(t));
        memcpy(out, &x, size);
    } else {
        if (json_object_get_int64(v) < 0)
            return nds_err(NDS_EFORMAT, "%s: fill_value out of range for %s", doc,
                           nds_dtype_name(t));
        uint64_t x = json_object_get_uint64(v);
        if (bits < 64 && x >> bits)
            return nds_err(NDS_EFORMAT, "%s: fill_value out of range for %s", doc,
                           nds_dtype_name(t));
        memcpy(out, &x, size);
    }
    if (nds_host_is_big_endian())
        return nds_err(NDS_EUNSUPPORTED, "big-endian hosts are not supported");
    return 0;
}

static int parse_complex(nds_dtype t, const json_object *v, const char *doc, uint8_t *out) {
    nds_dtype part = t == NDS_COMPLEX64 ? NDS_FLOAT32 : NDS_FLOAT64;
    size_t half = nds_dtype_size(part);
    double re, im = 0;
    int rc;
    if (json_object_is_type(v, json_type_array)) {
        if (json_object_array_length(v) != 2)
            return nds_err(NDS_EFORMAT, "%s: complex fill_value must be [real, imaginary]", doc);
        if ((rc = parse_real(json_object_array_get_idx(v, 0), doc, &re))) return rc;
        if ((rc = parse_real(json_object_array_get_idx(v, 1), doc, &im))) return rc;
    } else if ((rc = parse_real(v, doc, &re))) {
        return rc;
    }
    const json_object *re_v = v, *im_v = NULL;
    if (json_object_is_type(v, json_type_array)) {
        re_v = json_object_array_get_idx(v, 0);
        im_v = json_object_array_get_idx(v, 1);
    }
    if ((rc = store_real(part, re_v, re, doc, out))) return rc;
    if (im_v) return store_real(part, im_v, im, doc, out + half);
    return store_float(part, im, out + half);
}

int nds_fill_from_json(nds_dtype t, const json_object *v, const char *doc, uint8_t *out) {
    size_t size = nds_dtype_size(t);
    memset(out, 0, NDS_DTYPE_MAX_SIZE);
    if (v == NULL || json_object_is_type(v, json_type_null)) return 0;
    if (json_object_is_type(v, json_type_string)) {
        const char *s = json_object_get_string((json_object *)v);
        if (strncmp(s, "0x", 2) == 0 && size <= 8) {
            int rc = parse_hex(s, size, doc, out);
            nds_dtype_normalize(t, out, 1); /* int4 "0xf" is -1 */
            return rc;
        }
    }
    if (t == NDS_BOOL) {
        if (json_object_is_type(v, json_type_boolean))
            out[0] = json_object_get_boolean(v) ? 1 : 0;
        else if (json_object_is_type(v, json_type_int) &&
                 (json_object_get_int64(v) & ~INT64_C(1)) == 0)
            out[0] = (uint8_t)json_object_get_int64(v);
        else
            return nds_err(NDS_EFORMAT, "%s: fill_value must be true or false for bool", doc);
        return 0;
    }
    if (is_float(t)) {
        double d;
        int rc = parse_real(v, doc, &d);
        return rc ? rc : store_real(t, v, d, doc, out);
    }
    if (t == NDS_COMPLEX64 || t == NDS_COMPLEX128) return parse_complex(t, v, doc, out);
    if ((t == NDS_DATETIME64 || t == NDS_TIMEDELTA64) && json_object_is_type(v, json_type_string) &&
        strcmp(json_object_get_string((json_object *)v), "NaT") == 0) {
        int64_t nat = INT64_MIN; /* NumPy's Not a Time */
        memcpy(out, &nat, 8);
        return 0;
    }
    return parse_integer(t, v, doc, out);
}

static json_object *real_to_json(double d) {
    if (isnan(d)) return json_object_new_string("NaN");
    if (isinf(d)) return json_object_new_string(d > 0 ? "Infinity" : "-Infinity");
    return json_object_new_double(d);
}

static double load_float(nds_dtype t, const uint8_t *p) {
    if (nds_dtype_is_small_float(t)) return nds_small_float_load(t, p[0]);
    if (t == NDS_FLOAT64) {
        double d;
        memcpy(&d, p, 8);
        return d;
    }
    if (t == NDS_FLOAT32) {
        float f;
        memcpy(&f, p, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, p, 2);
    return t == NDS_FLOAT16 ? nds_half_to_float(h) : nds_bf16_to_float(h);
}

json_object *nds_fill_to_json(nds_dtype t, const uint8_t *value) {
    if (is_float(t)) return real_to_json(load_float(t, value));
    switch (t) {
    case NDS_BOOL: return json_object_new_boolean(value[0] != 0);
    case NDS_INT8: return json_object_new_int64(*(const int8_t *)value);
    case NDS_UINT8: return json_object_new_int64(value[0]);
    case NDS_INT4:
    case NDS_INT2: return json_object_new_int64(*(const int8_t *)value);
    case NDS_UINT4:
    case NDS_UINT2: return json_object_new_int64(value[0]);
    case NDS_COMPLEX64:
    case NDS_COMPLEX128: {
        nds_dtype part = t == NDS_COMPLEX64 ? NDS_FLOAT32 : NDS_FLOAT64;
        json_object *a = json_object_new_array();
        json_object_array_add(a, real_to_json(load_float(part, value)));
        json_object_array_add(a, real_to_json(load_float(part, value + nds_dtype_size(part))));
        return a;
    }
    default: break;
    }
    int64_t s = 0;
    uint64_t u = 0;
    size_t size = nds_dtype_size(t);
    memcpy(&u, value, size);
    switch (t) {
    case NDS_INT16: {
        int16_t x;
        memcpy(&x, value, 2);
        s = x;
        break;
    }
    case NDS_INT32: {
        int32_t x;
        memcpy(&x, value, 4);
        s = x;
        break;
    }
    case NDS_INT64:
    case NDS_DATETIME64:
    case NDS_TIMEDELTA64: memcpy(&s, value, 8); break;
    default: return json_object_new_uint64(u);
    }
    return json_object_new_int64(s);
}
