/* NumPy interchange: .npy headers, byte order, Fortran-to-C reordering, and element values printed the way
 * NumPy prints them (also as JSON).
 *
 * .npy (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html): magic "\x93NUMPY", version
 * bytes, a little-endian header length (2 bytes in 1.0, 4 in 2.0/3.0), then a Python dict literal
 * {'descr': '<u2', 'fortran_order': False, 'shape': (3, 4), } padded with spaces to a multiple of 64 bytes
 * and ended by '\n'. We write 1.0 in host byte order; we read 1.0-3.0, any byte order, either order.
 * Types NumPy lacks are written as the bytes they are in memory: the float8 family and float4_e2m1fn
 * as '|u1' (their bit patterns), int4/int2 as '|i1', uint4/uint2 as '|u1'; datetime64/timedelta64
 * as '<M8[unit]' / '<m8[unit]' with the array's unit, so NumPy reads them as datetimes; fixed-width
 * strings as '|S<n>' / '<U<n>' (host order) with the array's width.
 * Omits: structured and object dtypes, and bfloat16, which has no NumPy descr (callers refuse it).
 * Bad input: the header length is checked against CLI_NPY_MAX_HEADER before anything is allocated, and
 * shape products are overflow-checked. Threading: none (pure functions).
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "npy.h"

static bool host_big_endian(void) {
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 0;
}

/* NumPy kind and size of each dtype; kind 0 = none. */
static const struct { char kind; unsigned size; } npy_types[NDS_DTYPE_COUNT] = {
    [NDS_BOOL] = {'b', 1}, [NDS_INT8] = {'i', 1}, [NDS_INT16] = {'i', 2}, [NDS_INT32] = {'i', 4},
    [NDS_INT64] = {'i', 8}, [NDS_UINT8] = {'u', 1}, [NDS_UINT16] = {'u', 2}, [NDS_UINT32] = {'u', 4},
    [NDS_UINT64] = {'u', 8}, [NDS_FLOAT16] = {'f', 2}, [NDS_FLOAT32] = {'f', 4},
    [NDS_FLOAT64] = {'f', 8}, [NDS_COMPLEX64] = {'c', 8}, [NDS_COMPLEX128] = {'c', 16},
};

/* The NumPy type a .npy file holds an element of t as: itself where NumPy has it, else the byte it
 * is in memory (dtype.h): float8 and float4 patterns as uint8, int4/int2 as int8 (sign-extended),
 * uint4/uint2 as uint8. Datetimes are their own type (with a unit: cli_npy_descr_unit). */
static nds_dtype storage_type(nds_dtype t) {
    switch (t) {
    case NDS_FLOAT8_E4M3: case NDS_FLOAT8_E5M2: case NDS_FLOAT8_E4M3FN: case NDS_FLOAT8_E4M3FNUZ:
    case NDS_FLOAT8_E5M2FNUZ: case NDS_FLOAT8_E4M3B11FNUZ: case NDS_FLOAT8_E8M0FNU:
    case NDS_FLOAT4_E2M1FN: case NDS_UINT4: case NDS_UINT2: return NDS_UINT8;
    case NDS_INT4: case NDS_INT2: return NDS_INT8;
    default: return t;
    }
}

/* Units ('12' in "|S12") of a string descr after its kind letter; 0 when malformed. */
static size_t width_of(const char *digits) {
    char *end;
    unsigned long n = digits[0] >= '1' && digits[0] <= '9' ? strtoul(digits, &end, 10) : 0;
    return n && *end == '\0' && n <= NDS_ELEM_MAX_SIZE ? (size_t)n : 0;
}

const char *cli_npy_descr_unit(nds_dtype t, const char *unit) {
    static char buf[32];
    if (t == NDS_BYTES_FIXED || t == NDS_UCS4_FIXED) {
        if (!unit || !width_of(unit))
            return NULL;
        snprintf(buf, sizeof buf, "%c%c%s", t == NDS_BYTES_FIXED ? '|' : host_big_endian() ? '>' : '<',
                 t == NDS_BYTES_FIXED ? 'S' : 'U', unit);
        return buf;
    }
    if (t != NDS_DATETIME64 && t != NDS_TIMEDELTA64)
        return cli_npy_descr(t);
    if (!unit || !unit[0] || strlen(unit) > 12)
        return NULL;
    snprintf(buf, sizeof buf, "%c%c8[%s]", host_big_endian() ? '>' : '<',
             t == NDS_DATETIME64 ? 'M' : 'm', unit);
    return buf;
}

bool cli_npy_holds(const cli_npy_header *h, nds_dtype t, const char *unit) {
    if (t == NDS_BYTES_FIXED || t == NDS_UCS4_FIXED)
        return h->dtype == t && unit && h->itemsize == width_of(unit) * nds_dtype_size(t);
    if (t == NDS_DATETIME64 || t == NDS_TIMEDELTA64) {
        const char *open = strchr(h->descr, '[');
        size_t n = unit ? strlen(unit) : 0;
        return h->dtype == t && open && n && strncmp(open + 1, unit, n) == 0 &&
               strcmp(open + 1 + n, "]") == 0;
    }
    return h->dtype == storage_type(t);
}

/* The unit inside "<M8[ns]" (zarr v2 dtype). */
static bool unit_of_typestring(const char *s, char *buf, size_t cap) {
    const char *open = strchr(s, '['), *close = strchr(s, ']');
    if (!open || !close || close <= open + 1 || (size_t)(close - open) > cap)
        return false;
    snprintf(buf, cap, "%.*s", (int)(close - open - 1), open + 1);
    return true;
}

/* The unit of a zarr v3 {"name": "numpy.datetime64", "configuration": {"unit", "scale_factor"}}. */
static bool unit_of_config(json_object *dt, char *buf, size_t cap) {
    json_object *cfg, *unit, *scale;
    if (!json_object_object_get_ex(dt, "configuration", &cfg) ||
        !json_object_object_get_ex(cfg, "unit", &unit) || !json_object_is_type(unit, json_type_string))
        return false;
    int64_t k = json_object_object_get_ex(cfg, "scale_factor", &scale) ? json_object_get_int64(scale) : 1;
    const char *u = strcmp(json_object_get_string(unit), "μs") == 0 ? "us" : json_object_get_string(unit);
    if (k > 1)
        snprintf(buf, cap, "%" PRId64 "%s", k, u);
    else
        snprintf(buf, cap, "%s", u);
    return true;
}

bool cli_is_time_dtype(const char *name) {
    size_t n = strlen(name);
    return (strncmp(name, "datetime64[", 11) == 0 || strncmp(name, "timedelta64[", 12) == 0) &&
           n > 13 && name[n - 1] == ']';
}

bool cli_time_unit(nds_array *a, char *buf, size_t cap) {
    buf[0] = '\0';
    nds_dtype t = nds_array_dtype(a);
    char *text = NULL;
    if ((t != NDS_DATETIME64 && t != NDS_TIMEDELTA64) || nds_array_metadata(a, &text) != 0)
        return false;
    json_object *doc = json_tokener_parse(text), *v;
    nds_free(text);
    bool ok = false;
    if (json_object_object_get_ex(doc, "data_type", &v) && json_object_is_type(v, json_type_object))
        ok = unit_of_config(v, buf, cap);
    else if (json_object_object_get_ex(doc, "dtype", &v) && json_object_is_type(v, json_type_string))
        ok = unit_of_typestring(json_object_get_string(v), buf, cap);
    json_object_put(doc);
    if (!ok)
        buf[0] = '\0';
    return ok;
}

bool cli_dtype_detail(nds_array *a, char *buf, size_t cap) {
    nds_dtype t = nds_array_dtype(a);
    if (t != NDS_BYTES_FIXED && t != NDS_UCS4_FIXED)
        return cli_time_unit(a, buf, cap);
    snprintf(buf, cap, "%zu", nds_array_dtype_size(a) / nds_dtype_size(t));
    return true;
}

bool cli_string_typestring(nds_array *a, char *buf, size_t cap) {
    char width[24], *text = NULL;
    nds_dtype t = nds_array_dtype(a);
    if ((t != NDS_BYTES_FIXED && t != NDS_UCS4_FIXED) || !cli_dtype_detail(a, width, sizeof width))
        return false;
    snprintf(buf, cap, "%s", cli_npy_descr_unit(t, width));
    /* The stored typestring when the metadata has one (zarr v2 ">U13" keeps its byte order). */
    json_object *doc = nds_array_metadata(a, &text) == 0 ? json_tokener_parse(text) : NULL, *v;
    nds_free(text);
    if (json_object_object_get_ex(doc, "dtype", &v) && json_object_is_type(v, json_type_string))
        snprintf(buf, cap, "%s", json_object_get_string(v));
    json_object_put(doc);
    return true;
}

/* Appends one character of a string element as Python's repr shows it. */
static void put_char(char *buf, size_t cap, size_t *len, uint32_t c, bool bytes) {
    char tmp[16];
    if (c == '\\' || c == '\'')
        snprintf(tmp, sizeof tmp, "\\%c", (char)c);
    else if (c >= 0x20 && c < 0x7f)
        snprintf(tmp, sizeof tmp, "%c", (char)c);
    else if (c < 0x100 && (bytes || c < 0xa0))
        snprintf(tmp, sizeof tmp, "\\x%02x", (unsigned)c);
    else if (c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        snprintf(tmp, sizeof tmp, "\\U%08x", (unsigned)c);
    else if (c < 0x800)
        snprintf(tmp, sizeof tmp, "%c%c", (char)(0xc0 | c >> 6), (char)(0x80 | (c & 0x3f)));
    else if (c < 0x10000)
        snprintf(tmp, sizeof tmp, "%c%c%c", (char)(0xe0 | c >> 12), (char)(0x80 | ((c >> 6) & 0x3f)),
                 (char)(0x80 | (c & 0x3f)));
    else
        snprintf(tmp, sizeof tmp, "%c%c%c%c", (char)(0xf0 | c >> 18), (char)(0x80 | ((c >> 12) & 0x3f)),
                 (char)(0x80 | ((c >> 6) & 0x3f)), (char)(0x80 | (c & 0x3f)));
    size_t n = strlen(tmp);
    if (*len + n + 1 < cap) {
        memcpy(buf + *len, tmp, n + 1);
        *len += n;
    } else if (*len + 4 <= cap) { /* no room: say so once, never cut silently */
        memcpy(buf + *len, "...", 4);
        *len += 3;
        *len = cap; /* nothing more fits */
    }
}

void cli_format_string(nds_dtype t, const void *elem, size_t size, char *buf, size_t cap) {
    const uint8_t *p = elem;
    bool bytes = t == NDS_BYTES_FIXED;
    size_t unit = bytes ? 1 : 4, n = size / unit, len = 0;
    uint32_t c = 0;
    for (; n > 0; n--) { /* trailing NULs are padding */
        memcpy(&c, p + (n - 1) * unit, unit);
        if (c)
            break;
    }
    if (cap < 8)
        return;
    len = (size_t)snprintf(buf, cap, "%s'", bytes ? "b" : "");
    size_t room = cap - 2; /* the closing quote and NUL */
    for (size_t i = 0; i < n && len < room; i++) {
        c = 0;
        memcpy(&c, p + i * unit, unit);
        put_char(buf, room, &len, c, bytes);
    }
    len = strlen(buf);
    buf[len++] = '\'';
    buf[len] = '\0';
}

const char *cli_npy_descr(nds_dtype t) {
    static char table[NDS_DTYPE_COUNT][8];
    if ((int)t <= 0 || t >= NDS_DTYPE_COUNT)
        return NULL;
    t = storage_type(t);
    if (npy_types[t].kind == 0)
        return NULL;
    if (table[t][0] == '\0') {
        char order = npy_types[t].size == 1 ? '|' : host_big_endian() ? '>' : '<';
        snprintf(table[t], sizeof table[t], "%c%c%u", order, npy_types[t].kind, npy_types[t].size);
    }
    return table[t];
}

int cli_npy_write_header(FILE *f, nds_dtype t, const char *unit, size_t rank, const uint64_t *shape,
                         char *err, size_t cap) {
    const char *descr = cli_npy_descr_unit(t, unit);
    if (!descr) {
        snprintf(err, cap, "%s has no .npy dtype (use --raw)", nds_dtype_name(t));
        return -1;
    }
    char tuple[NDS_MAX_RANK * 24 + 8], dict[NDS_MAX_RANK * 24 + 128];
    cli_format_tuple(tuple, sizeof tuple, rank, shape);
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr,
                     tuple);
    /* 10 bytes of preamble + dict + padding + '\n' is a multiple of 64, as numpy writes it. */
    size_t total = 10 + (size_t)n + 1;
    size_t pad = (64 - total % 64) % 64;
    size_t hlen = (size_t)n + pad + 1;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff),
                             (unsigned char)(hlen >> 8)};
    fwrite(pre, 1, sizeof pre, f);
    fwrite(dict, 1, (size_t)n, f);
    for (size_t i = 0; i < pad; i++)
        fputc(' ', f);
    fputc('\n', f);
    if (ferror(f)) {
        snprintf(err, cap, "write error");
        return -1;
    }
    return 0;
}

/* ---- header dict parsing: a small scanner for the one dict shape numpy writes ---- */

typedef struct scan {
    const char *p;
    char *err;
    size_t cap;
} scan;

static void skip_ws(scan *s) {
    while (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')
        s->p++;
}

static int scan_fail(scan *s, const char *what) {
    snprintf(s->err, s->cap, "bad .npy header: %s", what);
    return -1;
}

static int scan_string(scan *s, char *out, size_t cap) {
    char q = *s->p;
    if (q != '\'' && q != '"')
        return scan_fail(s, "expected a string");
    const char *end = strchr(s->p + 1, q);
    if (!end || (size_t)(end - s->p - 1) >= cap)
        return scan_fail(s, "unterminated or overlong string");
    memcpy(out, s->p + 1, (size_t)(end - s->p - 1));
    out[end - s->p - 1] = '\0';
    s->p = end + 1;
    return 0;
}

static int scan_bool(scan *s, bool *out) {
    if (strncmp(s->p, "True", 4) == 0) {
        *out = true;
        s->p += 4;
    } else if (strncmp(s->p, "False", 5) == 0) {
        *out = false;
        s->p += 5;
    } else {
        return scan_fail(s, "fortran_order must be True or False");
    }
    return 0;
}

static int scan_shape(scan *s, cli_npy_header *h) {
    if (*s->p != '(')
        return scan_fail(s, "shape must be a tuple");
    s->p++;
    h->rank = 0;
    for (;;) {
        skip_ws(s);
        if (*s->p == ')')
            break;
        if (*s->p < '0' || *s->p > '9')
            return scan_fail(s, "shape must hold non-negative integers");
        uint64_t v = 0;
        while (*s->p >= '0' && *s->p <= '9') {
            if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, (uint64_t)(*s->p - '0'), &v))
                return scan_fail(s, "shape value too large");
            s->p++;
        }
        if (*s->p == 'L') /* Python 2 longs */
            s->p++;
        if (h->rank == NDS_MAX_RANK)
            return scan_fail(s, "too many dimensions");
        h->shape[h->rank++] = v;
        skip_ws(s);
        if (*s->p == ',')
            s->p++;
        else if (*s->p != ')')
            return scan_fail(s, "expected ',' or ')' in shape");
    }
    s->p++;
    return 0;
}

static int scan_member(scan *s, cli_npy_header *h, unsigned *seen) {
    char key[32];
    if (scan_string(s, key, sizeof key) != 0)
        return -1;
    skip_ws(s);
    if (*s->p++ != ':')
        return scan_fail(s, "expected ':'");
    skip_ws(s);
    if (strcmp(key, "descr") == 0) {
        if (*s->p == '[')
            return scan_fail(s, "structured dtypes are not supported");
        *seen |= 1;
        return scan_string(s, h->descr, sizeof h->descr);
    }
    if (strcmp(key, "fortran_order") == 0) {
        *seen |= 2;
        return scan_bool(s, &h->fortran_order);
    }
    if (strcmp(key, "shape") == 0) {
        *seen |= 4;
        return scan_shape(s, h);
    }
    snprintf(s->err, s->cap, "bad .npy header: unexpected key '%s'", key);
    return -1;
}

static int scan_dict(scan *s, cli_npy_header *h) {
    unsigned seen = 0;
    skip_ws(s);
    if (*s->p++ != '{')
        return scan_fail(s, "expected '{'");
    for (;;) {
        skip_ws(s);
        if (*s->p == '}')
            break;
        if (scan_member(s, h, &seen) != 0)
            return -1;
        skip_ws(s);
        if (*s->p == ',')
            s->p++;
        else if (*s->p != '}')
            return scan_fail(s, "expected ',' or '}'");
    }
    s->p++;
    skip_ws(s);
    if (*s->p != '\0')
        return scan_fail(s, "text after the dict");
    if (seen != 7)
        return scan_fail(s, "descr, fortran_order and shape are all required");
    return 0;
}

/* Maps a descr ("<u2", ">f8", "|b1", "=i4") to a dtype and whether its bytes need swapping. */
static int parse_descr(cli_npy_header *h, char *err, size_t cap) {
    const char *d = h->descr;
    char order = '=';
    if (*d == '<' || *d == '>' || *d == '|' || *d == '=')
        order = *d++;
    char kind = *d++;
    char *end;
    unsigned long size = strtoul(d, &end, 10);
    h->dtype = NDS_DTYPE_INVALID;
    if ((kind == 'M' || kind == 'm') && size == 8 && *end == '[' && strchr(end, ']')) {
        h->dtype = kind == 'M' ? NDS_DATETIME64 : NDS_TIMEDELTA64; /* the unit stays in descr */
        end = strchr(end, ']') + 1;
    }
    /* Only NumPy's own types: '|u1' is uint8 (cli_npy_holds says what else it may hold). */
    for (int t = 1; *end == '\0' && t <= NDS_COMPLEX128; t++)
        if (npy_types[t].kind == kind && npy_types[t].size == size)
            h->dtype = (nds_dtype)t;
    size_t unit = nds_dtype_size(h->dtype);
    if ((kind == 'S' || kind == 'U') && width_of(d)) { /* fixed-width strings: '|S12', '<U3' */
        h->dtype = kind == 'S' ? NDS_BYTES_FIXED : NDS_UCS4_FIXED;
        unit = nds_dtype_size(h->dtype);
        size *= unit;
    }
    if (h->dtype == NDS_DTYPE_INVALID || size > NDS_ELEM_MAX_SIZE) {
        snprintf(err, cap, "unsupported .npy dtype '%s'", h->descr);
        return -1;
    }
    h->itemsize = h->dtype == NDS_DATETIME64 || h->dtype == NDS_TIMEDELTA64 ? 8 : size;
    bool big = order == '>' || (order != '<' && host_big_endian());
    h->swap = unit > 1 && big != host_big_endian();
    return 0;
}

static int read_exact(FILE *f, void *buf, size_t n) {
    return fread(buf, 1, n, f) == n ? 0 : -1;
}

int cli_npy_read_header(FILE *f, cli_npy_header *h, char *err, size_t cap) {
    memset(h, 0, sizeof *h);
    unsigned char pre[12];
    if (read_exact(f, pre, 8) != 0 || memcmp(pre, "\x93NUMPY", 6) != 0) {
        snprintf(err, cap, "not a .npy file (bad magic)");
        return -1;
    }
    uint32_t hlen;
    if (pre[6] == 1 && read_exact(f, pre + 8, 2) == 0) {
        hlen = (uint32_t)pre[8] | (uint32_t)pre[9] << 8;
    } else if ((pre[6] == 2 || pre[6] == 3) && read_exact(f, pre + 8, 4) == 0) {
        hlen = (uint32_t)pre[8] | (uint32_t)pre[9] << 8 | (uint32_t)pre[10] << 16 | (uint32_t)pre[11] << 24;
    } else {
        snprintf(err, cap, "unsupported .npy version %u.%u or truncated header", pre[6], pre[7]);
        return -1;
    }
    if (hlen > CLI_NPY_MAX_HEADER) {
        snprintf(err, cap, ".npy header of %" PRIu32 " bytes is larger than %d", hlen, CLI_NPY_MAX_HEADER);
        return -1;
    }
    char *text = malloc((size_t)hlen + 1);
    if (!text || read_exact(f, text, hlen) != 0) {
        snprintf(err, cap, text ? "truncated .npy header" : "out of memory");
        free(text);
        return -1;
    }
    text[hlen] = '\0';
    scan s = {text, err, cap};
    int rc = scan_dict(&s, h);
    free(text);
    if (rc != 0 || parse_descr(h, err, cap) != 0)
        return -1;
    uint64_t count = 1;
    for (size_t d = 0; d < h->rank; d++)
        if (__builtin_mul_overflow(count, h->shape[d], &count))
            count = UINT64_MAX;
    if (count == UINT64_MAX ||
        __builtin_mul_overflow(count, (uint64_t)h->itemsize, &h->data_bytes)) {
        snprintf(err, cap, ".npy shape is too large");
        return -1;
    }
    h->count = count;
    return 0;
}

size_t cli_swap_unit(nds_dtype t) {
    size_t size = nds_dtype_size(t);
    return t == NDS_COMPLEX64 || t == NDS_COMPLEX128 ? size / 2 : size;
}

void cli_byteswap(void *data, size_t n_units, size_t unit) {
    uint8_t *p = data;
    if (unit < 2)
        return;
    for (size_t i = 0; i < n_units; i++, p += unit)
        for (size_t a = 0, b = unit - 1; a < b; a++, b--) {
            uint8_t t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}

void cli_fortran_to_c(size_t rank, const uint64_t *shape, size_t elem, uint8_t *dst, const uint8_t *src) {
    uint64_t fstride[NDS_MAX_RANK], idx[NDS_MAX_RANK] = {0}, count = 1;
    for (size_t d = 0; d < rank; d++) {
        fstride[d] = d == 0 ? elem : fstride[d - 1] * shape[d - 1];
        count *= shape[d];
    }
    uint64_t off = 0;
    /* Walk the destination in C order, tracking the source offset with Fortran strides. */
    for (uint64_t n = 0; n < count; n++) {
        memcpy(dst + n * elem, src + off, elem);
        for (size_t d = rank; d-- > 0;) {
            off += fstride[d];
            if (++idx[d] < shape[d])
                break;
            off -= shape[d] * fstride[d];
            idx[d] = 0;
        }
    }
}

/* ---- element values ---- */

double cli_half_to_double(uint16_t h) {
    int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    double v;
    if (exp == 0)
        v = ldexp(mant, -24);
    else if (exp == 31)
        v = mant ? NAN : INFINITY;
    else
        v = ldexp(mant | 0x400, exp - 25);
    return sign ? -v : v;
}

double cli_bf16_to_double(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* float -> IEEE half, round to nearest even (used to find the shortest text that reads back). */
static uint16_t float_to_half(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffff;
    if (ax >= 0x7f800000)
        return sign | 0x7c00 | (ax > 0x7f800000 ? 0x200 : 0);
    if (ax >= 0x477ff000) /* 65520 and up round to infinity */
        return sign | 0x7c00;
    if (ax < 0x38800000) { /* below 2^-14: a half subnormal, in units of 2^-24 */
        float a;
        memcpy(&a, &ax, sizeof a);
        return sign | (uint16_t)rintf(a * 16777216.0f);
    }
    uint32_t h = (((ax >> 23) - 112) << 10) | ((ax & 0x7fffff) >> 13);
    uint32_t rem = ax & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
        h++;
    return sign | (uint16_t)h;
}

static uint16_t float_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((x >> 16) | 0x40);
    return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

/* Does text read back as the element bits? */
static bool reads_back(nds_dtype t, const char *text, double v) {
    double r = strtod(text, NULL);
    switch (t) {
    case NDS_FLOAT16: return float_to_half((float)r) == float_to_half((float)v);
    case NDS_BFLOAT16: return float_to_bf16((float)r) == float_to_bf16((float)v);
    case NDS_FLOAT32: case NDS_COMPLEX64: return (float)r == (float)v;
    default: return r == v;
    }
}

/* Shortest round-trip text ("0.1", "1e+20"), as repr() gives. */
static void shortest(nds_dtype t, double v, char *buf, size_t cap) {
    if (isnan(v)) {
        snprintf(buf, cap, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, cap, v < 0 ? "-inf" : "inf");
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, v);
        if (reads_back(t, buf, v))
            return;
    }
}

/* NumPy marks floats with a '.': "2." and "1.e+20". */
static void numpy_float(nds_dtype t, double v, char *buf, size_t cap) {
    char tmp[32]; /* the longest double is 24 characters: -1.7976931348623157e+308 */
    shortest(t, v, tmp, sizeof tmp);
    char *e = strchr(tmp, 'e');
    if (strchr(tmp, '.') || strchr(tmp, 'n'))
        snprintf(buf, cap, "%s", tmp);
    else if (e)
        snprintf(buf, cap, "%.*s.%s", (int)(e - tmp), tmp, e);
    else
        snprintf(buf, cap, "%s.", tmp);
}

/* The element as a double pair (imaginary 0 for real types); false for non-float types. */
static bool float_parts(nds_dtype t, const void *elem, double *re, double *im) {
    uint16_t h;
    float f[2];
    double d[2];
    *im = 0;
    switch (t) {
    case NDS_FLOAT16: memcpy(&h, elem, 2); *re = cli_half_to_double(h); return true;
    case NDS_BFLOAT16: memcpy(&h, elem, 2); *re = cli_bf16_to_double(h); return true;
    case NDS_FLOAT32: memcpy(f, elem, 4); *re = f[0]; return true;
    case NDS_FLOAT64: memcpy(d, elem, 8); *re = d[0]; return true;
    case NDS_COMPLEX64: memcpy(f, elem, 8); *re = f[0]; *im = f[1]; return true;
    case NDS_COMPLEX128: memcpy(d, elem, 16); *re = d[0]; *im = d[1]; return true;
    default: return nds_dtype_to_double(t, elem, re) == 0; /* the float8 family and float4 */
    }
}

/* Integer and bool elements widened: *is_signed tells which of the two holds the value. */
static void int_parts(nds_dtype t, const void *elem, int64_t *s, uint64_t *u, bool *is_signed) {
    int8_t i8; int16_t i16; int32_t i32; uint8_t u8; uint16_t u16; uint32_t u32;
    *is_signed = true;
    switch (t) {
    case NDS_INT8: memcpy(&i8, elem, 1); *s = i8; break;
    case NDS_INT16: memcpy(&i16, elem, 2); *s = i16; break;
    case NDS_INT32: memcpy(&i32, elem, 4); *s = i32; break;
    case NDS_INT64: case NDS_DATETIME64: case NDS_TIMEDELTA64: memcpy(s, elem, 8); break;
    case NDS_INT4: case NDS_INT2: memcpy(&i8, elem, 1); *s = i8; break;
    case NDS_UINT4: case NDS_UINT2: memcpy(&u8, elem, 1); *u = u8; *is_signed = false; break;
    case NDS_BOOL: case NDS_UINT8: memcpy(&u8, elem, 1); *u = u8; *is_signed = false; break;
    case NDS_UINT16: memcpy(&u16, elem, 2); *u = u16; *is_signed = false; break;
    case NDS_UINT32: memcpy(&u32, elem, 4); *u = u32; *is_signed = false; break;
    default: memcpy(u, elem, 8); *is_signed = false; break;
    }
}

void cli_format_element(nds_dtype t, const void *elem, char *buf, size_t cap) {
    double re, im;
    if (float_parts(t, elem, &re, &im)) {
        char a[40], b[40];
        numpy_float(t, re, a, sizeof a);
        if (t != NDS_COMPLEX64 && t != NDS_COMPLEX128) {
            snprintf(buf, cap, "%s", a);
            return;
        }
        numpy_float(t, im, b, sizeof b);
        snprintf(buf, cap, "%s%s%sj", a, b[0] == '-' ? "" : "+", b);
        return;
    }
    int64_t s = 0;
    uint64_t u = 0;
    bool is_signed;
    int_parts(t, elem, &s, &u, &is_signed);
    if (t == NDS_BOOL)
        snprintf(buf, cap, "%s", u ? "True" : "False");
    else if ((t == NDS_DATETIME64 || t == NDS_TIMEDELTA64) && s == INT64_MIN)
        snprintf(buf, cap, "NaT");
    else if (is_signed)
        snprintf(buf, cap, "%" PRId64, s);
    else
        snprintf(buf, cap, "%" PRIu64, u);
}

static json_object *double_json(nds_dtype t, double v) {
    if (isnan(v))
        return json_object_new_string("NaN");
    if (isinf(v))
        return json_object_new_string(v < 0 ? "-Infinity" : "Infinity");
    char text[32];
    shortest(t, v, text, sizeof text);
    return json_object_new_double_s(v, text);
}

json_object *cli_element_to_json(nds_dtype t, const void *elem) {
    double re, im;
    if (float_parts(t, elem, &re, &im)) {
        if (t != NDS_COMPLEX64 && t != NDS_COMPLEX128)
            return double_json(t, re);
        json_object *arr = json_object_new_array();
        json_object_array_add(arr, double_json(t, re));
        json_object_array_add(arr, double_json(t, im));
        return arr;
    }
    int64_t s = 0;
    uint64_t u = 0;
    bool is_signed;
    int_parts(t, elem, &s, &u, &is_signed);
    if (t == NDS_BOOL)
        return json_object_new_boolean(u != 0);
    if ((t == NDS_DATETIME64 || t == NDS_TIMEDELTA64) && s == INT64_MIN)
        return json_object_new_string("NaT");
    return is_signed ? json_object_new_int64(s) : json_object_new_uint64(u);
}

/* ---- printing like numpy's str() ---- */

typedef struct printer {
    FILE *out;
    size_t rank;
    const uint64_t *shape;
    char **text;   /* one string per element, C order */
    int width;     /* widest element: columns are right-aligned to it */
    size_t next;   /* next element to print */
} printer;

static void print_level(printer *pr, size_t depth) {
    fputc('[', pr->out);
    for (uint64_t i = 0; i < pr->shape[depth]; i++) {
        if (depth + 1 == pr->rank) {
            fprintf(pr->out, "%s%*s", i ? " " : "", pr->width, pr->text[pr->next++]);
            continue;
        }
        /* Between sub-arrays: one newline per remaining level, then indent under the bracket. */
        if (i) {
            for (size_t k = 0; k + depth + 1 < pr->rank; k++)
                fputc('\n', pr->out);
            for (size_t k = 0; k <= depth; k++)
                fputc(' ', pr->out);
        }
        print_level(pr, depth + 1);
    }
    fputc(']', pr->out);
}

/* Real floats in positional notation line up on the decimal point, as numpy does ("-1.  " over
 * " 0.25"); nan and inf are right-aligned to the column. */
static void align_points(char (*cells)[96], uint64_t count) {
    int left = 0, right = 0;
    for (uint64_t i = 0; i < count; i++) {
        if (strchr(cells[i], 'e'))
            return; /* scientific notation: leave as is */
        const char *dot = strchr(cells[i], '.');
        if (!dot)
            continue;
        int l = (int)(dot - cells[i]), r = (int)strlen(dot + 1);
        left = l > left ? l : left;
        right = r > right ? r : right;
    }
    for (uint64_t i = 0; i < count; i++) {
        char tmp[96];
        const char *dot = strchr(cells[i], '.');
        if (dot)
            snprintf(tmp, sizeof tmp, "%*.*s.%-*s", left, (int)(dot - cells[i]), cells[i], right, dot + 1);
        else
            snprintf(tmp, sizeof tmp, "%*s", left + 1 + right, cells[i]);
        memcpy(cells[i], tmp, sizeof tmp);
    }
}

void cli_print_array(FILE *out, nds_dtype t, const void *data, size_t rank, const uint64_t *shape) {
    cli_print_array_sized(out, t, nds_dtype_size(t), data, rank, shape);
}

void cli_print_array_sized(FILE *out, nds_dtype t, size_t elem, const void *data, size_t rank,
                           const uint64_t *shape) {
    bool string = t == NDS_BYTES_FIXED || t == NDS_UCS4_FIXED;
    uint64_t count = 1;
    for (size_t d = 0; d < rank; d++)
        count *= shape[d];
    if (count == 0) {
        fputs("[]\n", out);
        return;
    }
    char (*cells)[96] = calloc(count, sizeof *cells);
    char **text = calloc(count, sizeof *text);
    if (!cells || !text) {
        free(cells);
        free(text);
        fputs("(out of memory)\n", out);
        return;
    }
    for (uint64_t i = 0; i < count; i++)
        if (string)
            cli_format_string(t, (const uint8_t *)data + i * elem, elem, cells[i], sizeof cells[i]);
        else
            cli_format_element(t, (const uint8_t *)data + i * elem, cells[i], sizeof cells[i]);
    if (t == NDS_FLOAT16 || t == NDS_BFLOAT16 || t == NDS_FLOAT32 || t == NDS_FLOAT64)
        align_points(cells, count);
    int width = 0;
    for (uint64_t i = 0; i < count; i++) {
        text[i] = cells[i];
        int w = (int)strlen(cells[i]);
        width = w > width ? w : width;
    }
    if (rank == 0) {
        fprintf(out, "%s\n", text[0]);
    } else {
        printer pr = {out, rank, shape, text, width, 0};
        print_level(&pr, 0);
        fputc('\n', out);
    }
    free(text);
    free(cells);
}
