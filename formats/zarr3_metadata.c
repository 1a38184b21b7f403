/* zarr v3 metadata: strict zarr.json parsing, fill values, spec requests (TensorStore "metadata"
 * and "schema"), checks of an existing array against a spec, and printing.
 *
 * Implements the array metadata of the zarr v3 core specification: the core data types (bool,
 * int8..uint64, float16/32/64, complex64/128) plus bfloat16 and the registry's extension types
 * (float8 family, float4_e2m1fn, int4/uint4/int2/uint2, numpy.datetime64/timedelta64 with unit and
 * scale_factor, complex_float32/64 aliases); the "regular" chunk grid; the "default" and "v2" chunk
 * key encodings (objects or bare names); fill values including "NaN", "Infinity", "-Infinity",
 * "NaT" and "0x..." bit patterns; attributes and dimension_names (null: none). Leniencies, as
 * zarrita and zarr-python read: a null fill_value reads as zero; a codecs list without an
 * array-to-bytes codec gets a little-endian bytes codec. Omits: other chunk grids, key encodings
 * and data types, storage transformers, the pre-1.0 drafts (each NDS_EUNSUPPORTED naming it);
 * integers beyond 64 bits are NDS_EFORMAT naming the member; unknown members are
 * refused unless they are objects with "must_understand": false, as the specification requires.
 *
 * Threading: reentrant. Ownership: see zarr3_metadata.h.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zarr3_metadata.h"
#include "zarr3_shard.h"
#include "internal/codec_spec.h"
#include "internal/dtype_util.h"
#include "internal/error.h"
#include "internal/format_util.h"
#include "internal/json_util.h"
#include "internal/util.h"

/* Chunk size the default chunk shape aims at. */
#define DEFAULT_CHUNK_BYTES (UINT64_C(1) << 20)

/* Private request keys (never zarr.json members: they contain spaces). */
#define REQ_CHUNK "schema chunk"
#define REQ_WRITE_CHUNK "schema write_chunk"
#define REQ_READ_CHUNK "schema read_chunk"
#define REQ_CODEC "schema codec"

static bool eq(const char *a, const char *b) { return strcmp(a, b) == 0; }

/* ---- fill values ----------------------------------------------------------------------------- */

int nds_zarr3_fill_parse(nds_dtype t, const json_object *v, const char *doc, uint8_t *out) {
    if (nds_dtype_is_vlen(t)) return nds_vlen_fill_from_json(t, v, doc, out);
    if ((t == NDS_COMPLEX64 || t == NDS_COMPLEX128) && json_object_is_type(v, json_type_array)) {
        nds_dtype part = t == NDS_COMPLEX64 ? NDS_FLOAT32 : NDS_FLOAT64;
        size_t half = nds_dtype_size(part);
        uint8_t re[NDS_DTYPE_MAX_SIZE], im[NDS_DTYPE_MAX_SIZE];
        if (json_object_array_length(v) != 2)
            return nds_err(NDS_EFORMAT, "%s: complex fill_value must be [real, imaginary]", doc);
        int rc = nds_fill_from_json(part, json_object_array_get_idx(v, 0), doc, re);
        if (!rc) rc = nds_fill_from_json(part, json_object_array_get_idx(v, 1), doc, im);
        if (rc) return rc;
        memset(out, 0, NDS_DTYPE_MAX_SIZE);
        memcpy(out, re, half);
        memcpy(out + half, im, half);
        return 0;
    }
    return nds_fill_from_json(t, v, doc, out);
}

static bool is_float(nds_dtype t) { return nds_dtype_is_float(t); }

static double float_value(nds_dtype t, const uint8_t *p) {
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

/* 1 when text reads back as exactly the element at p. */
static bool round_trips(nds_dtype t, const char *text, const uint8_t *p) {
    uint8_t back[NDS_DTYPE_MAX_SIZE] = {0};
    json_object *num = json_object_new_double(strtod(text, NULL));
    bool ok = num && nds_fill_from_json(t, num, "", back) == 0 &&
              memcmp(back, p, nds_dtype_size(t)) == 0;
    json_object_put(num);
    return ok;
}

/* A finite float element as the shortest decimal that reads back as the same element. */
static json_object *float_json(nds_dtype t, const uint8_t *p) {
    double d = float_value(t, p);
    char s[48];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(s, sizeof s, "%.*g", prec, d);
        if (round_trips(t, s, p)) break;
    }
    if (!strpbrk(s, ".eE")) strncat(s, ".0", sizeof s - strlen(s) - 1);
    return json_object_new_double_s(d, s);
}

/* One float element: number, "Infinity", "NaN" (the canonical NaN) or "0x..." (other NaNs). */
static json_object *real_json(nds_dtype t, const uint8_t *p) {
    double d = float_value(t, p);
    size_t size = nds_dtype_size(t);
    if (isinf(d)) return json_object_new_string(d > 0 ? "Infinity" : "-Infinity");
    if (!isnan(d)) return float_json(t, p);
    uint8_t canon[NDS_DTYPE_MAX_SIZE];
    json_object *nan = json_object_new_string("NaN");
    nds_fill_from_json(t, nan, "", canon);
    json_object_put(nan);
    if (memcmp(canon, p, size) == 0) return json_object_new_string("NaN");
    uint64_t bits = 0;
    memcpy(&bits, p, size); /* little-endian host: the integer image of the element */
    char hex[24];
    snprintf(hex, sizeof hex, "0x%0*llx", (int)(2 * size), (unsigned long long)bits);
    return json_object_new_string(hex);
}

json_object *nds_zarr3_fill_json(nds_dtype t, const uint8_t *fill) {
    if (nds_dtype_is_vlen(t)) return nds_vlen_fill_to_json(t, fill);
    if (is_float(t)) return real_json(t, fill);
    if (t == NDS_DATETIME64 || t == NDS_TIMEDELTA64) {
        int64_t v;
        memcpy(&v, fill, 8);
        if (v == INT64_MIN) return json_object_new_string("NaT");
    }
    if (t == NDS_COMPLEX64 || t == NDS_COMPLEX128) {
        nds_dtype part = t == NDS_COMPLEX64 ? NDS_FLOAT32 : NDS_FLOAT64;
        json_object *a = json_object_new_array();
        if (!a) return NULL;
        json_object_array_add(a, real_json(part, fill));
        json_object_array_add(a, real_json(part, fill + nds_dtype_size(part)));
        return a;
    }
    return nds_fill_to_json(t, fill);
}

/* ---- members --------------------------------------------------------------------------------- */

/* Parse state: the struct being filled plus what only the final checks need. */
typedef struct parsed {
    nds_zarr3_meta m;
    size_t chunk_rank;
    const json_object *codecs; /* borrowed from the document; the chain is built last */
    bool have_fill;
} parsed;

/* The "zarr_format" of the pre-1.0 zarr v3 drafts (a URL, not a number). */
#define DRAFT_FORMAT_PREFIX "https://purl.org/zarr/spec/protocol/core/"

static int parse_format(const json_object *v, const char *doc, void *state) {
    (void)state;
    if (json_object_is_type(v, json_type_string) &&
        strncmp(json_object_get_string((json_object *)v), DRAFT_FORMAT_PREFIX,
                strlen(DRAFT_FORMAT_PREFIX)) == 0)
        return nds_err(NDS_EUNSUPPORTED, "%s: \"zarr_format\" \"%.80s\" is a pre-1.0 draft of zarr v3, "
                                         "which ndstore does not read (only zarr v3.0, "
                                         "\"zarr_format\": 3)", doc,
                       json_object_get_string((json_object *)v));
    if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) != 3)
        return nds_err(NDS_EFORMAT, "%s: \"zarr_format\" must be 3", doc);
    return 0;
}

static int parse_node_type(const json_object *v, const char *doc, void *state) {
    (void)state;
    const char *s =
        json_object_is_type(v, json_type_string) ? json_object_get_string((json_object *)v) : "";
    if (eq(s, "group"))
        return nds_err(NDS_EFORMAT, "%s: describes a group, not an array", doc);
    if (!eq(s, "array"))
        return nds_err(NDS_EFORMAT, "%s: \"node_type\" must be \"array\" or \"group\"", doc);
    return 0;
}

/* NDS_EFORMAT naming list[i] when an entry of the list v did not fit 64 bits (json-c clamps). */
static int list_fits(const json_object *v, const char *name, const char *doc) {
    for (size_t i = 0; json_object_is_type(v, json_type_array) && i < json_object_array_length(v);
         i++) {
        int rc = nds_json_check_fits(json_object_array_get_idx(v, i), doc, name);
        if (rc) return rc;
    }
    return 0;
}

/* Wraps v as the single member of an object so nds_z3_u64_list can read it. */
static int u64_member(const json_object *v, const char *name, uint64_t min, const char *doc,
                      uint64_t *out, size_t *n) {
    int rc = list_fits(v, name, doc);
    if (rc) return rc;
    json_object *holder = json_object_new_object();
    if (!holder) return nds_err(NDS_ENOMEM, "%s: out of memory", doc);
    json_object_object_add(holder, name, json_object_get((json_object *)v));
    rc = nds_z3_u64_list(holder, name, min, doc, out, n);
    json_object_put(holder);
    return rc;
}

static int parse_shape(const json_object *v, const char *doc, void *state) {
    parsed *p = state;
    return u64_member(v, "shape", 0, doc, p->m.shape, &p->m.rank);
}

/* The "name" of an extension object ({"name": ...}) for messages, or "?". */
static const char *ext_name(const json_object *v) {
    json_object *n;
    if (json_object_is_type(v, json_type_string)) return json_object_get_string((json_object *)v);
    if (json_object_object_get_ex(v, "name", &n) && json_object_is_type(n, json_type_string))
        return json_object_get_string(n);
    return "?";
}

/* The NumPy time units the registry's numpy.datetime64 / numpy.timedelta64 allow. */
static bool time_unit_valid(const char *u) {
    return nds_time_unit_known(u, strlen(u)) || eq(u, "μs") || eq(u, "generic");
}

/* {"name": "numpy.datetime64", "configuration": {"unit": "ns", "scale_factor": 1}} (also the
 * registry's earlier bare "datetime64"), and the timedelta64 twin. */
static int parse_time_type(const json_object *v, const char *name, const char *doc, parsed *p) {
    json_object *cfg = NULL, *unit = NULL;
    int64_t scale = 0;
    json_object_object_foreach((json_object *)v, key, val) {
        if (eq(key, "configuration")) cfg = val;
        else if (!eq(key, "name") && !eq(key, "must_understand"))
            return nds_err(NDS_EFORMAT, "%s: data_type \"%s\": member \"%.40s\" is not valid",
                           doc, name, key);
    }
    if (!json_object_is_type(cfg, json_type_object) ||
        !json_object_object_get_ex(cfg, "unit", &unit) || !json_object_is_type(unit, json_type_string))
        return nds_err(NDS_EFORMAT, "%s: data_type \"%s\" needs a configuration with \"unit\" and "
                                    "\"scale_factor\"", doc, name);
    json_object_object_foreach(cfg, ckey, cval) {
        (void)cval;
        if (!eq(ckey, "unit") && !eq(ckey, "scale_factor"))
            return nds_err(NDS_EFORMAT, "%s: data_type \"%s\": configuration member \"%.40s\" is "
                                        "not valid", doc, name, ckey);
    }
    int rc = nds_json_get_int(cfg, "scale_factor", false, 1, INT32_MAX, doc, &scale);
    if (rc) return rc;
    const char *u = json_object_get_string(unit);
    if (!time_unit_valid(u))
        return nds_err(NDS_EFORMAT, "%s: data_type \"%s\": unit \"%.20s\" is not a NumPy time unit",
                       doc, name, u);
    p->m.dtype = strstr(name, "datetime64") ? NDS_DATETIME64 : NDS_TIMEDELTA64;
    snprintf(p->m.time_unit, sizeof p->m.time_unit, "%s", eq(u, "μs") ? "us" : u);
    p->m.time_scale = (uint32_t)scale;
    return 0;
}

/* {"name": "fixed_length_utf32" | "null_terminated_bytes", "configuration": {"length_bytes": n}}
 * (zarr-extensions registry; zarr-python 3): NumPy's U<n/4> / S<n>, n bytes per element, 1 to
 * NDS_ELEM_MAX_SIZE (a multiple of 4 for UTF-32). */
static int parse_fixed_string_type(const json_object *v, const char *name, const char *doc,
                                   parsed *p) {
    json_object *cfg = NULL;
    int64_t n = 0;
    json_object_object_foreach((json_object *)v, key, val) {
        if (eq(key, "configuration")) cfg = val;
        else if (!eq(key, "name") && !eq(key, "must_understand"))
            return nds_err(NDS_EFORMAT, "%s: data_type \"%s\": member \"%.40s\" is not valid",
                           doc, name, key);
    }
    if (!json_object_is_type(cfg, json_type_object))
        return nds_err(NDS_EFORMAT, "%s: data_type \"%s\" needs a configuration with "
                                    "\"length_bytes\"", doc, name);
    json_object_object_foreach(cfg, ckey, cval) {
        (void)cval;
        if (!eq(ckey, "length_bytes"))
            return nds_err(NDS_EFORMAT, "%s: data_type \"%s\": configuration member \"%.40s\" is "
                                        "not valid", doc, name, ckey);
    }
    int rc = nds_json_get_int(cfg, "length_bytes", false, 0, INT64_MAX, doc, &n);
    if (rc) return rc;
    bool utf32 = name[0] == 'f';
    if (utf32 && n % 4 != 0)
        return nds_err(NDS_EFORMAT, "%s: data_type \"%s\": \"length_bytes\" %lld is not a "
                                    "multiple of 4", doc, name, (long long)n);
    if (n == 0 || n > NDS_ELEM_MAX_SIZE)
        return nds_err(NDS_EUNSUPPORTED, "%s: data_type \"%s\": \"length_bytes\" %lld is not "
                                         "supported (1 to %d bytes)", doc, name, (long long)n,
                       NDS_ELEM_MAX_SIZE);
    p->m.dtype = utf32 ? NDS_UCS4_FIXED : NDS_BYTES_FIXED;
    p->m.itemsize = (size_t)n;
    return 0;
}

/* {"name": ..., "configuration": {"length_bytes": n}} of a fixed-width string array. */
static json_object *fixed_string_type(nds_dtype t, size_t n) {
    json_object *cfg = json_object_new_object();
    json_object_object_add(cfg, "length_bytes", json_object_new_int64((int64_t)n));
    json_object *o = json_object_new_object();
    json_object_object_add(o, "name", json_object_new_string(nds_dtype_name(t)));
    json_object_object_add(o, "configuration", cfg);
    return o;
}

/* The fill value of m as JSON: fixed-width strings need their width (a string: text for UTF-32,
 * base64 for bytes, trailing NULs dropped). */
static json_object *fill_json_of(const nds_zarr3_meta *m) {
    if (nds_dtype_is_fixed_string(m->dtype))
        return nds_string_fill_to_json(m->dtype, m->itemsize, m->fill);
    return nds_zarr3_fill_json(m->dtype, m->fill);
}

/* The bytes of m->fill that hold its value. */
static size_t fill_bytes(const nds_zarr3_meta *m) {
    uint32_t n;
    if (!nds_dtype_is_vlen(m->dtype)) return m->itemsize ? m->itemsize : nds_dtype_size(m->dtype);
    memcpy(&n, m->fill, 4);
    return 4 + (n == UINT32_MAX ? 0 : n);
}

static int parse_data_type(const json_object *v, const char *doc, void *state) {
    parsed *p = state;
    if (json_object_is_type(v, json_type_object)) {
        const char *name = ext_name(v);
        if (eq(name, "numpy.datetime64") || eq(name, "numpy.timedelta64") ||
            eq(name, "datetime64") || eq(name, "timedelta64"))
            return parse_time_type(v, name, doc, p);
        if (eq(name, "fixed_length_utf32") || eq(name, "null_terminated_bytes"))
            return parse_fixed_string_type(v, name, doc, p);
        return nds_err(NDS_EUNSUPPORTED, "%s: data_type \"%.60s\" is not supported", doc, name);
    }
    if (!json_object_is_type(v, json_type_string))
        return nds_err(NDS_EFORMAT, "%s: \"data_type\" must be a string", doc);
    const char *s = json_object_get_string((json_object *)v);
    p->m.dtype = nds_dtype_from_name(s);
    if (eq(s, "string")) /* variable-length (registry; zarr-python 3 spells bytes the long way) */
        p->m.dtype = NDS_STRING;
    else if (eq(s, "bytes") || eq(s, "variable_length_bytes"))
        p->m.dtype = NDS_BYTES_VLEN;
    if (p->m.dtype == NDS_DATETIME64 || p->m.dtype == NDS_TIMEDELTA64) /* needs its unit */
        return nds_err(NDS_EFORMAT, "%s: data_type \"%s\" needs a configuration with its unit "
                                    "({\"name\": \"numpy.%s\", \"configuration\": {\"unit\": ..., "
                                    "\"scale_factor\": ...}})", doc, s, s);
    if (p->m.dtype == NDS_DTYPE_INVALID)
        return nds_err(NDS_EUNSUPPORTED,
                       "%s: data_type \"%.60s\" is not supported; ndstore supports bool, int2 to "
                       "uint64, float16/32/64, bfloat16, the float8 family, float4_e2m1fn, "
                       "complex64/128, numpy.datetime64/timedelta64, string and bytes",
                       doc, s);
    return 0;
}

/* {"name": ..., "configuration": {...}} with nothing else but "must_understand". */
static int named_config(const json_object *v, const char *member, const char *doc,
                        const char **name, json_object **config) {
    *config = NULL;
    *name = NULL;
    if (!json_object_is_type(v, json_type_object))
        return nds_err(NDS_EFORMAT, "%s: \"%s\" must be an object", doc, member);
    json_object_object_foreach((json_object *)v, key, val) {
        if (eq(key, "name") && json_object_is_type(val, json_type_string))
            *name = json_object_get_string(val);
        else if (eq(key, "configuration") && json_object_is_type(val, json_type_object))
            *config = val;
        else if (!eq(key, "must_understand"))
            return nds_err(NDS_EFORMAT, "%s: \"%s\": member \"%.40s\" is not valid here", doc,
                           member, key);
    }
    if (!*name) return nds_err(NDS_EFORMAT, "%s: \"%s\" needs a string \"name\"", doc, member);
    return 0;
}

static int parse_chunk_grid(const json_object *v, const char *doc, void *state) {
    parsed *p = state;
    const char *name;
    json_object *cfg;
    int rc = named_config(v, "chunk_grid", doc, &name, &cfg);
    if (rc) return rc;
    if (!eq(name, "regular"))
        return nds_err(NDS_EUNSUPPORTED, "%s: chunk_grid \"%.60s\" is not supported (only "
                                         "\"regular\")", doc, name);
    if (!cfg) return nds_err(NDS_EFORMAT, "%s: \"chunk_grid\" needs a \"configuration\"", doc);
    json_object_object_foreach(cfg, key, val) {
        (void)val;
        if (!eq(key, "chunk_shape"))
            return nds_err(NDS_EFORMAT, "%s: \"chunk_grid\": unknown configuration member "
                                        "\"%.40s\"", doc, key);
    }
    char dp[700];
    NDS_Z3_PRINT(dp, "%s: \"chunk_grid\" configuration", doc);
    json_object *cs;
    if (json_object_object_get_ex(cfg, "chunk_shape", &cs) && (rc = list_fits(cs, "chunk_shape", dp)))
        return rc;
    return nds_z3_u64_list(cfg, "chunk_shape", 1, dp, p->m.chunks, &p->chunk_rank);
}

static int parse_key_encoding(const json_object *v, const char *doc, void *state) {
    parsed *p = state;
    const char *name, *sep = NULL;
    json_object *cfg = NULL;
    int rc = 0;
    if (json_object_is_type(v, json_type_string)) /* a bare name, as codecs may be given */
        name = json_object_get_string((json_object *)v);
    else
        rc = named_config(v, "chunk_key_encoding", doc, &name, &cfg);
    if (rc) return rc;
    if (!eq(name, "default") && !eq(name, "v2"))
        return nds_err(NDS_EUNSUPPORTED, "%s: chunk_key_encoding \"%.60s\" is not supported "
                                         "(only \"default\" and \"v2\")", doc, name);
    p->m.v2_keys = eq(name, "v2");
    p->m.separator = p->m.v2_keys ? '.' : '/';
    if (!cfg) return 0;
    json_object_object_foreach(cfg, key, val) {
        if (!eq(key, "separator") || !json_object_is_type(val, json_type_string))
            return nds_err(NDS_EFORMAT, "%s: \"chunk_key_encoding\": configuration member "
                                        "\"%.40s\" is not valid", doc, key);
        sep = json_object_get_string(val);
    }
    if (sep && !eq(sep, "/") && !eq(sep, "."))
        return nds_err(NDS_EFORMAT, "%s: chunk_key_encoding \"separator\" must be \"/\" or \".\"",
                       doc);
    if (sep) p->m.separator = sep[0];
    return 0;
}

static int parse_fill(const json_object *v, const char *doc, void *state) {
    parsed *p = state;
    p->have_fill = true;
    if (nds_dtype_is_fixed_string(p->m.dtype)) /* as zarr v2: text, or base64 for bytes */
        return nds_string_fill_from_json(p->m.dtype, p->m.itemsize, v, doc, p->m.fill);
    return nds_zarr3_fill_parse(p->m.dtype, v, doc, p->m.fill);
}

static int parse_codecs(const json_object *v, const char *doc, void *state) {
    parsed *p = state;
    if (!json_object_is_type(v, json_type_array))
        return nds_err(NDS_EFORMAT, "%s: \"codecs\" must be an array", doc);
    p->codecs = v;
    return 0;
}

static int parse_attributes(const json_object *v, const char *doc, void *state) {
    (void)state;
    if (!json_object_is_type(v, json_type_object))
        return nds_err(NDS_EFORMAT, "%s: \"attributes\" must be an object", doc);
    return 0;
}

static int parse_dim_names(const json_object *v, const char *doc, void *state) {
    parsed *p = state;
    if (v == NULL) return 0; /* null (zarrita and zarr-python 3 write it): no names */
    bool ok = json_object_is_type(v, json_type_array) &&
              json_object_array_length(v) == p->m.rank;
    for (size_t i = 0; ok && i < json_object_array_length(v); i++) {
        json_object *e = json_object_array_get_idx(v, i);
        ok = e == NULL || json_object_is_type(e, json_type_string);
    }
    if (!ok)
        return nds_err(NDS_EFORMAT, "%s: \"dimension_names\" must be an array of %zu strings or "
                                    "nulls", doc, p->m.rank);
    return 0;
}

static int parse_transformers(const json_object *v, const char *doc, void *state) {
    (void)state;
    if (!json_object_is_type(v, json_type_array))
        return nds_err(NDS_EFORMAT, "%s: \"storage_transformers\" must be an array", doc);
    if (json_object_array_length(v) > 0)
        return nds_err(NDS_EUNSUPPORTED, "%s: storage transformer \"%.60s\" is not supported",
                       doc, ext_name(json_object_array_get_idx(v, 0)));
    return 0;
}

/* The members, in the order they are parsed: shape and data_type before what depends on them. */
static const nds_doc_member members[] = {
    {"zarr_format", parse_format, true},
    {"node_type", parse_node_type, true},
    {"shape", parse_shape, true},
    {"data_type", parse_data_type, true},
    {"chunk_grid", parse_chunk_grid, true},
    {"chunk_key_encoding", parse_key_encoding, true},
    {"fill_value", parse_fill, true},
    {"codecs", parse_codecs, true},
    {"attributes", parse_attributes, false},
    {"dimension_names", parse_dim_names, false},
    {"storage_transformers", parse_transformers, false},
};
#define MEMBER_COUNT (sizeof members / sizeof members[0])

static bool is_member(const char *key) { return nds_doc_member_known(members, MEMBER_COUNT, key); }

/* An extension member that may be ignored: an object with "must_understand": false. */
static bool ignorable(const json_object *v) {
    json_object *mu;
    return json_object_is_type(v, json_type_object) &&
           json_object_object_get_ex(v, "must_understand", &mu) &&
           json_object_is_type(mu, json_type_boolean) && !json_object_get_boolean(mu);
}

/* A member of the spec or an extension that may be ignored. */
static bool known_member(const char *key, const json_object *v) {
    return is_member(key) || ignorable(v);
}

static int check_unknown(const json_object *doc_json, const char *doc) {
    json_object_object_foreach((json_object *)doc_json, key, val) {
        if (!known_member(key, val))
            return nds_err(NDS_EUNSUPPORTED,
                           "%s: unknown member \"%.60s\" (an extension ndstore does not "
                           "understand, and its must_understand is not false)",
                           doc, key);
    }
    return 0;
}

static int parse_finish(const char *doc, parsed *p) {
    nds_zarr3_meta *m = &p->m;
    uint64_t n;
    if (p->chunk_rank != m->rank)
        return nds_err(NDS_EFORMAT, "%s: \"chunk_grid\" chunk_shape has %zu entries but \"shape\" "
                                    "has %zu", doc, p->chunk_rank, m->rank);
    if (!nds_product_u64(m->shape, m->rank, &n))
        return nds_err(NDS_ELIMIT, "%s: \"shape\" has more than 2^64 elements", doc);
    nds_z3_array arr = {.rank = m->rank, .dtype = m->dtype, .elem_size = m->itemsize};
    memcpy(arr.shape, m->chunks, sizeof arr.shape);
    memcpy(arr.fill, m->fill, sizeof arr.fill);
    return nds_z3_chain_parse(p->codecs, &arr, doc, "codecs", 0, &m->chain);
}

int nds_zarr3_meta_parse(const json_object *doc_json, const char *doc, nds_zarr3_meta *m) {
    memset(m, 0, sizeof *m);
    if (!json_object_is_type(doc_json, json_type_object))
        return nds_err(NDS_EFORMAT, "%s: expected a json object", doc);
    parsed p;
    memset(&p, 0, sizeof p);
    int rc = nds_doc_members_parse(doc_json, doc, members, MEMBER_COUNT, &p);
    if (rc) return rc;
    rc = check_unknown(doc_json, doc);
    if (!rc) rc = parse_finish(doc, &p);
    if (rc) {
        nds_z3_chain_free(p.m.chain);
        return rc;
    }
    *m = p.m;
    return 0;
}

void nds_zarr3_meta_dispose(nds_zarr3_meta *m) {
    nds_z3_chain_free(m->chain);
    m->chain = NULL;
}

const char *nds_zarr3_node_type(const json_object *doc) {
    json_object *v;
    if (!json_object_is_type(doc, json_type_object) ||
        !json_object_object_get_ex(doc, "node_type", &v) ||
        !json_object_is_type(v, json_type_string))
        return NULL;
    const char *s = json_object_get_string(v);
    return eq(s, "array") ? "array" : eq(s, "group") ? "group" : NULL;
}

/* ---- spec requests --------------------------------------------------------------------------- */

static void put_member(json_object *req, const char *name, json_object *v, bool own) {
    if (json_object_object_get_ex(req, name, NULL)) { /* "metadata" wins over "schema" */
        if (own) json_object_put(v);
        return;
    }
    json_object_object_add(req, name, own ? v : json_object_get(v));
}

static json_object *named(const char *name, json_object *config);

/* {"name": "numpy.datetime64", "configuration": {"unit": "ns", "scale_factor": 1}}. */
static json_object *time_data_type(nds_dtype t, const char *unit, uint32_t scale) {
    json_object *cfg = json_object_new_object();
    json_object_object_add(cfg, "unit", json_object_new_string(unit));
    json_object_object_add(cfg, "scale_factor", json_object_new_int64(scale));
    return named(t == NDS_DATETIME64 ? "numpy.datetime64" : "numpy.timedelta64", cfg);
}

/* A NumPy fixed-width typestring ("<U5": 5 code points; "|S8": 8 bytes) as the registry's
 * fixed_length_utf32 / null_terminated_bytes (the width in bytes; byte order is the bytes
 * codec's). The width's limits are checked where the data type is parsed. */
static int schema_fixed_string(json_object *req, const char *name, const char *where) {
    char *end = NULL;
    errno = 0;
    unsigned long long n = strtoull(name + 2, &end, 10);
    if (name[2] < '0' || name[2] > '9' || *end || errno || n > NDS_ELEM_MAX_SIZE)
        return nds_err(n > NDS_ELEM_MAX_SIZE ? NDS_EUNSUPPORTED : NDS_EINVAL,
                       "zarr3: spec for %s: dtype \"%.40s\": %s", where, name,
                       n > NDS_ELEM_MAX_SIZE ? "elements wider than 4096 bytes are not supported"
                                             : "not a NumPy string typestring (\"<U5\", \"|S8\")");
    nds_dtype t = name[1] == 'U' ? NDS_UCS4_FIXED : NDS_BYTES_FIXED;
    put_member(req, "data_type", fixed_string_type(t, (size_t)n * nds_dtype_size(t)), true);
    return 0;
}

static int schema_dtype(json_object *req, const json_object *v, const char *where) {
    const char *name =
        json_object_is_type(v, json_type_string) ? json_object_get_string((json_object *)v) : "";
    char unit[8];
    uint32_t scale;
    nds_dtype timed = nds_dtype_with_unit(name, unit, sizeof unit, &scale); /* "datetime64[ns]" */
    if (timed != NDS_DTYPE_INVALID) {
        put_member(req, "data_type", time_data_type(timed, unit, scale), true);
        return 0;
    }
    bool vlen = eq(name, "string") || eq(name, "bytes"); /* variable-length (issue 20) */
    if (!vlen && (name[0] == '<' || name[0] == '>' || name[0] == '|') &&
        (name[1] == 'S' || name[1] == 'U')) /* NumPy fixed width: the registry's types */
        return schema_fixed_string(req, name, where);
    if (nds_dtype_from_name(name) == NDS_DTYPE_INVALID && !vlen)
        return nds_err(NDS_EINVAL, "zarr3: spec for %s: unknown \"dtype\" \"%.40s\"", where, name);
    put_member(req, "data_type", (json_object *)v, false);
    return 0;
}

static int schema_domain(json_object *req, const json_object *v, const char *where) {
    if (!json_object_is_type(v, json_type_object))
        return nds_err(NDS_EINVAL, "zarr3: spec for %s: \"domain\" must be an object", where);
    json_object_object_foreach((json_object *)v, key, val) {
        if (eq(key, "shape")) put_member(req, "shape", val, false);
        else if (eq(key, "labels")) put_member(req, "dimension_names", val, false);
        else
            return nds_err(NDS_EUNSUPPORTED,
                           "zarr3: spec for %s: \"domain.%.40s\" is not supported", where, key);
    }
    return 0;
}

static int schema_chunk_layout(json_object *req, const json_object *v, const char *where) {
    if (!json_object_is_type(v, json_type_object))
        return nds_err(NDS_EINVAL, "zarr3: spec for %s: \"chunk_layout\" must be an object", where);
    json_object_object_foreach((json_object *)v, key, val) {
        const char *dest = eq(key, "chunk") ? REQ_CHUNK : eq(key, "write_chunk") ? REQ_WRITE_CHUNK
                           : eq(key, "read_chunk") ? REQ_READ_CHUNK : NULL;
        json_object *shape = NULL;
        if (!dest)
            return nds_err(NDS_EUNSUPPORTED, "zarr3: spec for %s: \"chunk_layout.%.40s\" is not "
                                             "supported", where, key);
        json_object_object_foreach(val, k2, v2) {
            if (!eq(k2, "shape"))
                return nds_err(NDS_EUNSUPPORTED, "zarr3: spec for %s: \"chunk_layout.%s.%.40s\" "
                                                 "is not supported", where, key, k2);
            shape = v2;
        }
        if (!json_object_is_type(val, json_type_object))
            return nds_err(NDS_EINVAL, "zarr3: spec for %s: \"chunk_layout.%s\" must be an object",
                           where, key);
        if (shape) put_member(req, dest, shape, false);
    }
    return 0;
}

/* "codec": a compact string ("zstd:3", "none") or {"driver":"zarr3","codecs":[...]}. */
static int schema_codec(json_object *req, const json_object *v, const char *where) {
    if (json_object_is_type(v, json_type_string)) {
        json_object *config = NULL;
        int rc = nds_codec_spec_parse(json_object_get_string((json_object *)v), &config);
        if (rc) return nds_err_prefix(rc, "zarr3: spec for %s: \"codec\"", where);
        put_member(req, REQ_CODEC, config, true); /* NULL (json null) for "none" */
        return 0;
    }
    if (!json_object_is_type(v, json_type_object))
        return nds_err(NDS_EINVAL, "zarr3: spec for %s: \"codec\" must be a string or an object",
                       where);
    json_object_object_foreach((json_object *)v, key, val) {
        if (eq(key, "codecs")) put_member(req, "codecs", val, false);
        else if (!eq(key, "driver"))
            return nds_err(NDS_EUNSUPPORTED, "zarr3: spec for %s: \"codec.%.40s\" is not supported",
                           where, key);
    }
    return 0;
}

static int schema_member(json_object *req, const char *key, const json_object *v,
                         const char *where) {
    if (eq(key, "dtype")) return schema_dtype(req, v, where);
    if (eq(key, "domain")) return schema_domain(req, v, where);
    if (eq(key, "chunk_layout")) return schema_chunk_layout(req, v, where);
    if (eq(key, "codec")) return schema_codec(req, v, where);
    if (eq(key, "fill_value")) {
        put_member(req, "fill_value", (json_object *)v, false);
        return 0;
    }
    if (eq(key, "rank")) return 0; /* implied by the shape */
    return nds_err(NDS_EUNSUPPORTED, "zarr3: spec for %s: schema member \"%.40s\" is not supported",
                   where, key);
}

int nds_zarr3_request_from_spec(const json_object *spec, const char *where, json_object **out) {
    static const nds_spec_members m = {"zarr3", known_member, schema_member};
    return nds_format_request_from_spec(spec, where, &m, out);
}

/* ---- completing a request into a document ---------------------------------------------------- */

static json_object *u64_array(const uint64_t *v, size_t n) {
    json_object *a = json_object_new_array();
    for (size_t i = 0; a && i < n; i++) json_object_array_add(a, json_object_new_uint64(v[i]));
    return a;
}

static json_object *named(const char *name, json_object *config) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "name", json_object_new_string(name));
    if (config) json_object_object_add(o, "configuration", config);
    return o;
}

static json_object *bytes_codec(void) {
    json_object *cfg = json_object_new_object();
    json_object_object_add(cfg, "endian", json_object_new_string("little"));
    return named("bytes", cfg);
}

/* The chunk layout a request asks for: shard (write) shape and, when sharded, the inner shape. */
typedef struct layout {
    size_t rank;
    uint64_t write[NDS_MAX_RANK], read[NDS_MAX_RANK];
    bool sharded;
} layout;

static int layout_shape(const json_object *req, const char *key, const char *doc, size_t rank,
                        uint64_t *out, bool *found) {
    json_object *v;
    size_t n = 0;
    *found = json_object_object_get_ex(req, key, &v);
    if (!*found) return 0;
    int rc = u64_member(v, "chunk shape", 1, doc, out, &n);
    if (!rc && n != rank)
        rc = nds_err(NDS_EINVAL, "%s: chunk_layout \"%s\" has %zu entries, the shape %zu", doc,
                     key + 7, n, rank);
    return rc;
}

static int layout_of(const json_object *req, const char *doc, size_t rank, const uint64_t *shape,
                     nds_dtype dtype, size_t itemsize, layout *l) {
    uint64_t chunk[NDS_MAX_RANK];
    bool has_c, has_w, has_r;
    l->rank = rank;
    int rc = layout_shape(req, REQ_CHUNK, doc, rank, chunk, &has_c);
    if (!rc) rc = layout_shape(req, REQ_WRITE_CHUNK, doc, rank, l->write, &has_w);
    if (!rc) rc = layout_shape(req, REQ_READ_CHUNK, doc, rank, l->read, &has_r);
    if (rc) return rc;
    if (!has_w && has_c) memcpy(l->write, chunk, sizeof chunk);
    if (!has_r && has_w && has_c) { /* "chunk" is the read chunk when a write chunk is given */
        memcpy(l->read, chunk, sizeof chunk);
        has_r = true;
    }
    if (!has_w && !has_c) {
        if (has_r) memcpy(l->write, l->read, sizeof l->read);
        else
            nds_default_chunks(rank, shape,
                               nds_dtype_is_vlen(dtype) ? 16 : itemsize ? itemsize : nds_dtype_size(dtype),
                               DEFAULT_CHUNK_BYTES, l->write); /* (vlen strings: guessed at 16 bytes) */
    }
    l->sharded = has_r && memcmp(l->read, l->write, rank * sizeof l->read[0]) != 0;
    for (size_t d = 0; l->sharded && d < rank; d++)
        if (l->write[d] % l->read[d] != 0)
            return nds_err(NDS_EINVAL, "%s: read chunk %llu does not divide write chunk (shard) "
                                       "%llu in dimension %zu", doc,
                           (unsigned long long)l->read[d], (unsigned long long)l->write[d], d);
    return 0;
}

/* The default codecs: bytes + the schema codec (zstd level 1 by default), sharded if asked. */
static int default_codecs(const json_object *req, const layout *l, nds_dtype dtype,
                          const char *doc, json_object **out) {
    json_object *list = json_object_new_array(), *nc = NULL, *codec = NULL;
    /* variable-length types have their own array-to-bytes codec (zarr-extensions registry) */
    json_object_array_add(list, dtype == NDS_STRING       ? named("vlen-utf8", NULL)
                                : dtype == NDS_BYTES_VLEN ? named("vlen-bytes", NULL)
                                                          : bytes_codec());
    bool given = json_object_object_get_ex(req, REQ_CODEC, &nc);
    int rc = 0;
    if (!given) {
        nc = json_object_new_object();
        json_object_object_add(nc, "id", json_object_new_string("zstd"));
        json_object_object_add(nc, "level", json_object_new_int(1));
    }
    if (nc) rc = nds_z3_codec_from_numcodecs(nc, nds_dtype_is_vlen(dtype) ? 1 : nds_dtype_size(dtype), doc, &codec);
    if (!given) json_object_put(nc);
    if (codec) json_object_array_add(list, codec);
    if (!rc && l->sharded) {
        json_object *cfg = json_object_new_object(), *ix = json_object_new_array();
        json_object_object_add(cfg, "chunk_shape", u64_array(l->read, l->rank));
        json_object_object_add(cfg, "codecs", list);
        json_object_array_add(ix, bytes_codec());
        json_object_array_add(ix, named("crc32c", NULL));
        json_object_object_add(cfg, "index_codecs", ix);
        json_object_object_add(cfg, "index_location", json_object_new_string("end"));
        list = json_object_new_array();
        json_object_array_add(list, named("sharding_indexed", cfg));
    }
    if (rc) json_object_put(list);
    else *out = list;
    return rc;
}

/* Copies member name of src into dst when present. */
static void copy_member(json_object *dst, const json_object *src, const char *name) {
    json_object *v;
    if (json_object_object_get_ex(src, name, &v))
        json_object_object_add(dst, name, json_object_get(v));
}

/* The request with every default filled in (not yet normalised). */
static int complete(const json_object *req, const char *doc, json_object *full) {
    json_object *v;
    parsed p;
    memset(&p, 0, sizeof p);
    if (!json_object_object_get_ex(req, "shape", &v))
        return nds_err(NDS_EINVAL, "%s: cannot create an array without a shape (give \"metadata\": "
                                   "{\"shape\": [...]} or \"schema\": {\"domain\": {\"shape\": "
                                   "[...]}})", doc);
    int rc = parse_shape(v, doc, &p);
    if (rc) return rc;
    if (!json_object_object_get_ex(req, "data_type", &v))
        return nds_err(NDS_EINVAL, "%s: cannot create an array without a data type (give "
                                   "\"metadata\": {\"data_type\": \"uint16\"} or \"schema\": "
                                   "{\"dtype\": \"uint16\"})", doc);
    if ((rc = parse_data_type(v, doc, &p))) return rc;
    json_object_object_foreach((json_object *)req, key, val) {
        if (!strchr(key, ' ')) json_object_object_add(full, key, json_object_get(val));
    }
    layout l;
    if (!json_object_object_get_ex(req, "chunk_grid", NULL)) {
        if ((rc = layout_of(req, doc, p.m.rank, p.m.shape, p.m.dtype, p.m.itemsize, &l))) return rc;
        json_object *cfg = json_object_new_object();
        json_object_object_add(cfg, "chunk_shape", u64_array(l.write, l.rank));
        json_object_object_add(full, "chunk_grid", named("regular", cfg));
    } else {
        memset(&l, 0, sizeof l);
    }
    if (!json_object_object_get_ex(req, "codecs", NULL)) {
        json_object *codecs = NULL;
        if ((rc = default_codecs(req, &l, p.m.dtype, doc, &codecs))) return rc;
        json_object_object_add(full, "codecs", codecs);
    }
    if (!json_object_object_get_ex(full, "fill_value", NULL))
        json_object_object_add(full, "fill_value", fill_json_of(&p.m));
    if (!json_object_object_get_ex(full, "chunk_key_encoding", NULL)) {
        json_object *cfg = json_object_new_object();
        json_object_object_add(cfg, "separator", json_object_new_string("/"));
        json_object_object_add(full, "chunk_key_encoding", named("default", cfg));
    }
    return 0;
}

/* The normalised document of a parsed array, in zarr-python's member order; extension members
 * and attributes / dimension_names are taken from src. */
static int normalized(const nds_zarr3_meta *m, const json_object *src, json_object **out) {
    json_object *d = json_object_new_object(), *codecs = NULL, *cfg = json_object_new_object();
    int rc = d && cfg ? nds_z3_chain_to_json(m->chain, &codecs) : NDS_ENOMEM;
    if (rc) {
        json_object_put(d);
        json_object_put(cfg);
        return rc == NDS_ENOMEM ? nds_err(NDS_ENOMEM, "zarr3: out of memory") : rc;
    }
    json_object_object_add(d, "zarr_format", json_object_new_int(3));
    json_object_object_add(d, "node_type", json_object_new_string("array"));
    json_object_object_add(d, "shape", u64_array(m->shape, m->rank));
    json_object_object_add(d, "data_type",
                           m->dtype == NDS_DATETIME64 || m->dtype == NDS_TIMEDELTA64
                               ? time_data_type(m->dtype, m->time_unit, m->time_scale)
                           : nds_dtype_is_fixed_string(m->dtype)
                               ? fixed_string_type(m->dtype, m->itemsize)
                               : json_object_new_string(nds_dtype_name(m->dtype)));
    json_object *grid = json_object_new_object();
    json_object_object_add(grid, "chunk_shape", u64_array(m->chunks, m->rank));
    json_object_object_add(d, "chunk_grid", named("regular", grid));
    char sep[2] = {m->separator, 0};
    json_object_object_add(cfg, "separator", json_object_new_string(sep));
    json_object_object_add(d, "chunk_key_encoding", named(m->v2_keys ? "v2" : "default", cfg));
    json_object_object_add(d, "fill_value", fill_json_of(m));
    json_object_object_add(d, "codecs", codecs);
    json_object *attrs;
    if (json_object_object_get_ex(src, "attributes", &attrs)) copy_member(d, src, "attributes");
    else json_object_object_add(d, "attributes", json_object_new_object());
    copy_member(d, src, "dimension_names");
    json_object_object_foreach((json_object *)src, key, val) {
        if (!is_member(key)) json_object_object_add(d, key, json_object_get(val));
    }
    *out = d;
    return 0;
}

int nds_zarr3_request_complete(const json_object *req, const char *where, json_object **out) {
    char doc[600];
    snprintf(doc, sizeof doc, "zarr3: spec for %s", where);
    *out = NULL;
    json_object *full = json_object_new_object();
    if (!full) return nds_err(NDS_ENOMEM, "zarr3: out of memory");
    json_object_object_add(full, "zarr_format", json_object_new_int(3));
    json_object_object_add(full, "node_type", json_object_new_string("array"));
    nds_zarr3_meta m;
    int rc = complete(req, doc, full);
    if (!rc) rc = nds_zarr3_meta_parse(full, doc, &m);
    if (!rc) {
        rc = normalized(&m, full, out);
        nds_zarr3_meta_dispose(&m);
    }
    json_object_put(full);
    return rc;
}

/* ---- checks against an existing array -------------------------------------------------------- */

static int mismatch(const json_object *have, const char *name, const json_object *asked,
                    const char *where) {
    char *h =
        nds_strdup(json_object_to_json_string_ext((json_object *)have, JSON_C_TO_STRING_PLAIN));
    const char *w = json_object_to_json_string_ext((json_object *)asked, JSON_C_TO_STRING_PLAIN);
    int rc = nds_err(NDS_EMISMATCH, "zarr3: zarr.json of %s: \"%s\" is %.200s, the spec asks for "
                                    "%.200s", where, name, h ? h : "?", w);
    free(h);
    return rc;
}

static bool same_u64(const uint64_t *a, size_t na, const uint64_t *b, size_t nb) {
    return na == nb && memcmp(a, b, na * sizeof a[0]) == 0;
}

/* The codecs a request asks for, normalised for m's array, equal to the stored ones? */
static int same_codecs(const nds_zarr3_meta *m, const json_object *v, const char *doc, bool *same) {
    nds_z3_chain *c = NULL;
    json_object *a = NULL, *b = NULL;
    int rc = nds_z3_chain_parse(v, nds_z3_chain_array(m->chain), doc, "codecs", 0, &c);
    if (!rc) rc = nds_z3_chain_to_json(c, &a);
    if (!rc) rc = nds_z3_chain_to_json(m->chain, &b);
    *same = !rc && json_object_equal(a, b);
    json_object_put(a);
    json_object_put(b);
    nds_z3_chain_free(c);
    return rc;
}

/* Compares one request member with the stored array; *same = false on a difference. */
static int check_member(const nds_zarr3_meta *m, const json_object *req, const char *key,
                        const json_object *v, const char *doc, bool *same) {
    parsed p;
    memset(&p, 0, sizeof p);
    p.m.rank = m->rank;
    p.m.dtype = m->dtype;
    int rc = 0;
    *same = true;
    if (eq(key, "zarr_format")) {
        rc = parse_format(v, doc, &p);
    } else if (eq(key, "node_type")) {
        rc = parse_node_type(v, doc, &p);
    } else if (eq(key, "shape")) {
        rc = parse_shape(v, doc, &p);
        *same = same_u64(p.m.shape, p.m.rank, m->shape, m->rank);
    } else if (eq(key, "data_type")) {
        rc = parse_data_type(v, doc, &p);
        *same = p.m.dtype == m->dtype && eq(p.m.time_unit, m->time_unit) &&
                p.m.time_scale == m->time_scale && /* datetimes: the unit too */
                p.m.itemsize == m->itemsize;       /* fixed-width strings: the width */
    } else if (eq(key, "chunk_grid")) {
        rc = parse_chunk_grid(v, doc, &p);
        *same = same_u64(p.m.chunks, p.chunk_rank, m->chunks, m->rank);
    } else if (eq(key, "chunk_key_encoding")) {
        rc = parse_key_encoding(v, doc, &p);
        *same = p.m.v2_keys == m->v2_keys && p.m.separator == m->separator;
    } else if (eq(key, "fill_value")) {
        p.m.dtype = m->dtype;
        p.m.itemsize = m->itemsize;
        rc = parse_fill(v, doc, &p);
        *same = memcmp(p.m.fill, m->fill, fill_bytes(m)) == 0;
    } else if (eq(key, "codecs")) {
        rc = same_codecs(m, v, doc, same);
    } else if (eq(key, REQ_WRITE_CHUNK) || eq(key, REQ_READ_CHUNK) ||
               (eq(key, REQ_CHUNK) && !json_object_object_get_ex(req, REQ_WRITE_CHUNK, NULL) &&
                !json_object_object_get_ex(req, REQ_READ_CHUNK, NULL))) {
        size_t n = 0;
        const nds_z3_shard *s = nds_z3_chain_shard(m->chain);
        rc = u64_member(v, "chunk shape", 1, doc, p.m.chunks, &n);
        bool outer = same_u64(p.m.chunks, n, m->chunks, m->rank);
        bool inner = s ? same_u64(p.m.chunks, n, s->chunk, m->rank) : outer;
        *same = eq(key, REQ_WRITE_CHUNK) ? outer : eq(key, REQ_READ_CHUNK) ? inner : outer || inner;
    }
    return rc;
}

int nds_zarr3_meta_check(const nds_zarr3_meta *m, const json_object *doc_json,
                         const json_object *req, const char *where) {
    char doc[600];
    snprintf(doc, sizeof doc, "zarr3: spec for %s", where);
    json_object_object_foreach((json_object *)req, key, val) {
        bool same = true;
        int rc = check_member(m, req, key, val, doc, &same);
        if (!rc && eq(key, "dimension_names")) {
            json_object *have = NULL;
            json_object_object_get_ex(doc_json, key, &have);
            same = json_object_equal(have, val);
        }
        if (rc) return rc;
        if (same) continue;
        if (strchr(key, ' ')) { /* a schema chunk layout: name the stored shape */
            const nds_z3_shard *s = nds_z3_chain_shard(m->chain);
            const uint64_t *shape = eq(key, REQ_READ_CHUNK) && s ? s->chunk : m->chunks;
            json_object *have = u64_array(shape, m->rank);
            rc = mismatch(have, key + 7, val, where);
            json_object_put(have);
            return rc;
        }
        json_object *have = NULL;
        json_object_object_get_ex(doc_json, key, &have);
        return mismatch(have, key, val, where);
    }
    return 0;
}

