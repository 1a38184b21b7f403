/* JSON printing in the exact styles the formats' reference implementations write, so documents
 * ndstore writes diff cleanly against theirs: zarr-python v2 (4-space indent, sorted keys, Python's
 * repr of floats, ensure_ascii escaping) and zarr v3 / zarrita (2-space indent, insertion order,
 * arrays of scalars on one line). One printer, configured by nds_json_style. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/error.h"
#include "internal/json_util.h"

/* Nesting bound of the printer: far above any sane document, far below the stack's limit. */
#define PRINT_MAX_DEPTH 256

const nds_json_style nds_json_style_python = {4, true, false, true, false};
const nds_json_style nds_json_style_zarr3 = {2, false, true, false, true};

static int put_bytes(nds_buf *b, const char *s, size_t n) { return nds_buf_append(b, s, n); }
static int put_text(nds_buf *b, const char *s) { return put_bytes(b, s, strlen(s)); }

static int indent(nds_buf *b, const nds_json_style *st, int depth) {
    int rc = put_text(b, "\n");
    for (int i = 0; rc == 0 && i < depth * st->indent; i++) rc = put_text(b, " ");
    return rc;
}

/* Decodes one UTF-8 sequence at s[0..n); returns its length, or 0 when invalid. */
static size_t utf8_decode(const unsigned char *s, size_t n, uint32_t *cp) {
    size_t len = s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc0 ? 2 : 0;
    if (len == 0 || len > n || s[0] >= 0xf8) return 0;
    uint32_t c = s[0] & (0x3f >> (len - 1));
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        c = (c << 6) | (s[i] & 0x3f);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < min[len] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return 0;
    *cp = c;
    return len;
}

/* The two-character escape of c, or NULL. */
static const char *short_escape(unsigned char c) {
    switch (c) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    case '\b': return "\\b";
    case '\f': return "\\f";
    default: return NULL;
    }
}

/* Python's ensure_ascii escaping: everything outside ' '..'~' as \uXXXX (surrogate pairs above the
 * BMP). Invalid UTF-8 bytes are written as the Latin-1 character of the same value rather than
 * failing the whole write. */
static int print_string(nds_buf *b, const char *s, size_t n) {
    int rc = put_text(b, "\"");
    for (size_t i = 0; rc == 0 && i < n;) {
        unsigned char c = (unsigned char)s[i];
        uint32_t cp = c;
        size_t len = c >= 0x80 ? utf8_decode((const unsigned char *)s + i, n - i, &cp) : 1;
        i += len ? len : 1;
        char esc[16];
        int k = 0;
        if (short_escape(c))
            rc = put_text(b, short_escape(c));
        else if (cp >= 0x20 && cp < 0x7f)
            rc = put_bytes(b, (const char *)&c, 1);
        else if (cp < 0x10000)
            k = snprintf(esc, sizeof esc, "\\u%04x", cp);
        else
            k = snprintf(esc, sizeof esc, "\\u%04x\\u%04x", 0xd800 + ((cp - 0x10000) >> 10),
                         0xdc00 + ((cp - 0x10000) & 0x3ff));
        if (k > 0) rc = put_bytes(b, esc, (size_t)k);
    }
    return rc ? rc : put_text(b, "\"");
}

/* Python's repr(float): the shortest digits that read back exactly; exponent form when the decimal
 * exponent is below -4 or above 16; otherwise fixed with at least one digit after the point. */
static int print_double(nds_buf *b, double d) {
    if (isnan(d)) return put_text(b, "NaN");
    if (isinf(d)) return put_text(b, d > 0 ? "Infinity" : "-Infinity");
    char e[40];
    for (int prec = 0; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec, d);
        if (strtod(e, NULL) == d) break;
    }
    char digits[24], out[64];
    size_t nd = 0;
    const char *p = e + (e[0] == '-');
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9') digits[nd++] = *p;
    digits[nd] = 0;
    int decpt = atoi(p + 1) + 1; /* value = 0.DIGITS x 10^decpt */
    const char *sign = signbit(d) ? "-" : "";
    int n = 0, exp10 = decpt - 1;
    if (decpt <= -4 || decpt > 16) {
        n = snprintf(out, sizeof out, "%s%c%s%se%c%02d", sign, digits[0], nd > 1 ? "." : "",
                     digits + 1, exp10 < 0 ? '-' : '+', abs(exp10));
    } else if (decpt <= 0) { /* 0.000DIGITS */
        n = snprintf(out, sizeof out, "%s0.", sign);
        for (int i = 0; i < -decpt; i++) out[n++] = '0';
        n += snprintf(out + n, sizeof out - (size_t)n, "%s", digits);
    } else if ((size_t)decpt >= nd) { /* DIGITS000.0 */
        n = snprintf(out, sizeof out, "%s%s", sign, digits);
        for (size_t i = nd; i < (size_t)decpt; i++) out[n++] = '0';
        n += snprintf(out + n, sizeof out - (size_t)n, ".0");
    } else {
        n = snprintf(out, sizeof out, "%s%.*s.%s", sign, decpt, digits, digits + decpt);
    }
    (void)n;
    return put_text(b, out);
}

static int cmp_keys(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int print_value(nds_buf *b, const nds_json_style *st, const json_object *v, int depth);

/* The object's keys, sorted when the style asks; malloc'd (NULL with n == 0 or on failure). */
static const char **object_keys(const json_object *v, bool sort, size_t *n) {
    *n = (size_t)json_object_object_length(v);
    const char **keys = *n ? malloc(*n * sizeof *keys) : NULL;
    size_t k = 0;
    if (keys) {
        json_object_object_foreach((json_object *)v, key, val) {
            (void)val;
            keys[k++] = key;
        }
        if (sort) qsort(keys, *n, sizeof *keys, cmp_keys);
    }
    return keys;
}

static int print_key(nds_buf *b, const nds_json_style *st, const char *key) {
    if (st->python_scalars) return print_string(b, key, strlen(key));
    json_object *k = json_object_new_string(key);
    int rc = k ? put_text(b, json_object_to_json_string_ext(k, JSON_C_TO_STRING_NOSLASHESCAPE))
               : nds_err(NDS_ENOMEM, "out of memory printing json");
    json_object_put(k);
    return rc;
}

static int print_object(nds_buf *b, const nds_json_style *st, const json_object *v, int depth) {
    size_t n;
    const char **keys = object_keys(v, st->sort_keys, &n);
    if (n == 0) return put_text(b, "{}");
    if (!keys) return nds_err(NDS_ENOMEM, "out of memory printing json");
    int rc = put_text(b, "{");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        json_object *val = NULL;
        json_object_object_get_ex(v, keys[i], &val);
        if ((rc = i ? put_text(b, ",") : 0) == 0 && (rc = indent(b, st, depth + 1)) == 0 &&
            (rc = print_key(b, st, keys[i])) == 0 && (rc = put_text(b, ": ")) == 0)
            rc = print_value(b, st, val, depth + 1);
    }
    free(keys);
    if (rc == 0) rc = indent(b, st, depth);
    return rc ? rc : put_text(b, "}");
}

static bool is_container(const json_object *v) {
    return json_object_is_type(v, json_type_object) || json_object_is_type(v, json_type_array);
}

static int print_array(nds_buf *b, const nds_json_style *st, const json_object *v, int depth) {
    size_t n = json_object_array_length(v);
    if (n == 0) return put_text(b, "[]");
    bool flat = st->flat_scalar_arrays;
    for (size_t i = 0; i < n && flat; i++) flat = !is_container(json_object_array_get_idx(v, i));
    int rc = put_text(b, "[");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (i) rc = put_text(b, flat ? ", " : ",");
        if (rc == 0 && !flat) rc = indent(b, st, depth + 1);
        if (rc == 0) rc = print_value(b, st, json_object_array_get_idx(v, i), depth + 1);
    }
    if (rc == 0 && !flat) rc = indent(b, st, depth);
    return rc ? rc : put_text(b, "]");
}

static int print_scalar(nds_buf *b, const nds_json_style *st, const json_object *v) {
    if (!st->python_scalars)
        return put_text(
            b, json_object_to_json_string_ext((json_object *)v, JSON_C_TO_STRING_NOSLASHESCAPE));
    switch (json_object_get_type(v)) {
    case json_type_null: return put_text(b, "null");
    case json_type_boolean: return put_text(b, json_object_get_boolean(v) ? "true" : "false");
    case json_type_double: return print_double(b, json_object_get_double(v));
    case json_type_string:
        return print_string(b, json_object_get_string((json_object *)v),
                            (size_t)json_object_get_string_len(v));
    default:
        return put_text(b,
                        json_object_to_json_string_ext((json_object *)v, JSON_C_TO_STRING_PLAIN));
    }
}

static int print_value(nds_buf *b, const nds_json_style *st, const json_object *v, int depth) {
    if (depth > PRINT_MAX_DEPTH)
        return nds_err(NDS_ELIMIT, "json nested deeper than %d levels", PRINT_MAX_DEPTH);
    if (json_object_is_type(v, json_type_object)) return print_object(b, st, v, depth);
    if (json_object_is_type(v, json_type_array)) return print_array(b, st, v, depth);
    return print_scalar(b, st, v);
}

int nds_json_print(const json_object *v, const nds_json_style *st, nds_buf *out) {
    out->len = 0;
    int rc = print_value(out, st, v, 0);
    if (rc == 0 && st->trailing_newline) rc = put_text(out, "\n");
    return rc == NDS_ENOMEM ? nds_err(NDS_ENOMEM, "out of memory printing json") : rc;
}
