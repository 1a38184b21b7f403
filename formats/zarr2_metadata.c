/* zarr v2 metadata: strict .zarray parsing, spec requests (TensorStore "metadata" / "schema"),
 * checks of an existing array against a spec, and zarr-python-style JSON printing.
 *
 * Implements the array metadata of the zarr v2 storage specification for the numeric NumPy types
 * (plus TensorStore's "bfloat16"), NumPy datetimes with a unit ("<M8[ns]", as int64 counts) and
 * fixed-width strings ("|S12", "<U3": docs/internals/strings.md).
 * Omits: structured, void and unitless datetime dtypes, object dtypes other than the vlen-utf8 /
 * vlen-bytes object arrays (variable-length strings and bytes), and filters other than
 * those formats/codecs/array_codecs.h implements (each rejected with NDS_EUNSUPPORTED naming it).
 * Unknown .zarray members are ignored
 * (zarr-python does the same); unknown spec "metadata" members are errors, since there they are
 * most likely typos. Threading: reentrant, no shared state. Ownership: documented per function in
 * zarr2_metadata.h.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zarr2_metadata.h"
#include "codecs/array_codecs.h"
#include "ndstore/sys/codec.h"
#include "internal/codec_spec.h"
#include "internal/dtype_util.h"
#include "internal/error.h"
#include "internal/json_util.h"
#include "internal/format_util.h"
#include "internal/util.h"

/* Chunk size the default chunk shape aims at. */
#define DEFAULT_CHUNK_BYTES (UINT64_C(1) << 20)
/* Nesting bound of the printer: far above any sane document, far below the stack's limit. */

/* ---- dtypes ---------------------------------------------------------------------------------- */

/* Kind letter and size after the byte-order character, and the ndstore type. */
static const struct {
    const char *code;
    nds_dtype type;
} dtype_codes[] = {
    {"b1", NDS_BOOL},      {"i1", NDS_INT8},        {"u1", NDS_UINT8},   {"i2", NDS_INT16},
    {"i4", NDS_INT32},     {"i8", NDS_INT64},       {"u2", NDS_UINT16},  {"u4", NDS_UINT32},
    {"u8", NDS_UINT64},    {"f2", NDS_FLOAT16},     {"f4", NDS_FLOAT32}, {"f8", NDS_FLOAT64},
    {"c8", NDS_COMPLEX64}, {"c16", NDS_COMPLEX128},
};
#define DTYPE_CODE_COUNT (sizeof dtype_codes / sizeof dtype_codes[0])

void nds_zarr2_dtype_string(const nds_zarr2_meta *m, char *buf, size_t cap) {
    if (nds_dtype_is_vlen(m->dtype)) { /* the filter says which (vlen-utf8 / vlen-bytes) */
        snprintf(buf, cap, "|O");
        return;
    }
    if (nds_dtype_is_fixed_string(m->dtype)) {
        bool bytes = m->dtype == NDS_BYTES_FIXED;
        snprintf(buf, cap, "%c%c%zu", bytes ? '|' : m->byte_order, bytes ? 'S' : 'U',
                 m->itemsize / nds_dtype_size(m->dtype));
        return;
    }
    if (m->dtype == NDS_BFLOAT16) {
        snprintf(buf, cap, "bfloat16");
        return;
    }
    if (m->dtype == NDS_DATETIME64 || m->dtype == NDS_TIMEDELTA64) {
        snprintf(buf, cap, "%c%c8[%s]", m->byte_order, m->dtype == NDS_DATETIME64 ? 'M' : 'm',
                 m->time_unit);
        return;
    }
    for (size_t i = 0; i < DTYPE_CODE_COUNT; i++)
        if (dtype_codes[i].type == m->dtype) {
            snprintf(buf, cap, "%c%s", m->itemsize == 1 ? '|' : m->byte_order, dtype_codes[i].code);
            return;
        }
    snprintf(buf, cap, "invalid");
}

/* 1 when t has a zarr v2 typestring of its own (datetimes need their unit besides). */
static bool has_typestring(nds_dtype t) {
    for (size_t i = 0; i < DTYPE_CODE_COUNT; i++)
        if (dtype_codes[i].type == t) return true;
    return t == NDS_BFLOAT16;
}

/* What an unsupported NumPy kind letter stands for, for the error message; NULL if not a kind. */
static const char *unsupported_kind(char kind) {
    switch (kind) {
    case 'S':
    case 'a': return "byte strings";
    case 'U': return "unicode strings";
    case 'O': return "python objects";
    case 'V': return "void or structured elements";
    case 'M':
    case 'm': return "datetimes without a unit";
    case 'b':
    case 'i':
    case 'u':
    case 'f':
    case 'c': return "this element size";
    default: return NULL;
    }
}

/* NumPy's datetime64/timedelta64 typestrings: "<M8[ns]", ">m8[s]", "<M8[10ms]". */
static int parse_time_string(const char *s, const char *doc, nds_zarr2_meta *m) {
    size_t len = strlen(s);
    char unit[8];
    uint32_t scale;
    if (strcmp(s + 2, "8") == 0) /* NumPy's generic datetime: no unit to count in */
        return nds_err(NDS_EUNSUPPORTED, "%s: dtype \"%.40s\" is not supported (datetimes without a "
                                         "unit)", doc, s);
    if ((s[0] != '<' && s[0] != '>') || strncmp(s + 2, "8[", 2) != 0 || s[len - 1] != ']' ||
        len - 5 >= sizeof m->time_unit)
        return nds_err(NDS_EFORMAT, "%s: \"dtype\" \"%.40s\" is not a numpy datetime typestring "
                                    "(e.g. \"<M8[ns]\")", doc, s);
    if (!nds_time_unit_parse(s + 4, len - 5, unit, sizeof unit, &scale))
        return nds_err(NDS_EFORMAT, "%s: \"dtype\" \"%.40s\": not a NumPy time unit", doc, s);
    m->dtype = s[1] == 'M' ? NDS_DATETIME64 : NDS_TIMEDELTA64;
    m->itemsize = 8;
    m->byte_order = s[0];
    memcpy(m->time_unit, s + 4, len - 5);
    m->time_unit[len - 5] = '\0';
    return 0;
}

/* NumPy's fixed-width strings: "|S12" (12 bytes; '<' and '>' also accepted, stored back as '|'),
 * "<U3" / ">U3" (3 code points of 4 bytes; '|' too, as little-endian). The width is 1 or more
 * digits without a leading zero, at most NDS_ELEM_MAX_SIZE bytes in all. */
static int parse_string_dtype(const char *s, const char *doc, nds_zarr2_meta *m) {
    nds_dtype t = s[1] == 'S' ? NDS_BYTES_FIXED : NDS_UCS4_FIXED;
    size_t unit = nds_dtype_size(t), n = 0, i = 2;
    for (; s[i] >= '0' && s[i] <= '9'; i++) /* saturates: any width past the limit is refused */
        n = n > NDS_ELEM_MAX_SIZE ? n : n * 10 + (size_t)(s[i] - '0');
    if (i == 2 || s[i] != '\0' || s[2] == '0')
        return nds_err(NDS_EFORMAT, "%s: \"dtype\" \"%.40s\" is not a numpy string typestring "
                                    "(e.g. \"|S12\", \"<U3\")", doc, s);
    if (n > NDS_ELEM_MAX_SIZE / unit)
        return nds_err(NDS_EUNSUPPORTED, "%s: dtype \"%.40s\" is not supported (elements wider than "
                                         "%d bytes)", doc, s, NDS_ELEM_MAX_SIZE);
    m->dtype = t;
    m->itemsize = n * unit;
    m->byte_order = t == NDS_BYTES_FIXED ? '|' : s[0] == '>' ? '>' : '<';
    return 0;
}

static int parse_dtype_string(const char *s, const char *doc, nds_zarr2_meta *m) {
    if (strcmp(s, "|O") == 0) { /* objects: vlen-utf8 / vlen-bytes, as "filters" says */
        m->dtype = NDS_BYTES_VLEN; /* until parse_finish reads the filter */
        m->byte_order = '|';
        m->itemsize = 0;
        return 0;
    }
    if ((s[0] == '<' || s[0] == '>') && (s[1] == 'M' || s[1] == 'm'))
        return parse_time_string(s, doc, m);
    if ((s[0] == '<' || s[0] == '>' || s[0] == '|') && (s[1] == 'S' || s[1] == 'U'))
        return parse_string_dtype(s, doc, m);
    if (strcmp(s, "bfloat16") == 0) { /* TensorStore's spelling; always little-endian */
        m->dtype = NDS_BFLOAT16;
        m->byte_order = '<';
        m->itemsize = 2;
        return 0;
    }
    if (s[0] == '<' || s[0] == '>' || s[0] == '|') {
        for (size_t i = 0; i < DTYPE_CODE_COUNT; i++) {
            if (strcmp(s + 1, dtype_codes[i].code) != 0) continue;
            m->dtype = dtype_codes[i].type;
            m->itemsize = nds_dtype_size(m->dtype);
            if (m->itemsize > 1 && s[0] == '|')
                return nds_err(NDS_EFORMAT,
                               "%s: \"dtype\" \"%s\": '|' (no byte order) is only valid for "
                               "1-byte types",
                               doc, s);
            m->byte_order = m->itemsize == 1 ? '|' : s[0];
            return 0;
        }
    }
    const char *what = (s[0] == '<' || s[0] == '>' || s[0] == '|' || s[0] == '=') && s[1]
                           ? unsupported_kind(s[1])
                           : NULL;
    if (what)
        return nds_err(NDS_EUNSUPPORTED,
                       "%s: dtype \"%.40s\" is not supported (%s); ndstore supports bool, "
                       "integers, floats and complex numbers",
                       doc, s, what);
    return nds_err(NDS_EFORMAT, "%s: \"dtype\" \"%.40s\" is not a numpy type string", doc, s);
}

/* ---- members --------------------------------------------------------------------------------- */

/* Parse state: the struct being filled plus what only the final checks need. */
typedef struct parsed {
    nds_zarr2_meta m;
    size_t chunk_rank; /* entries of "chunks" (checked against the shape's rank at the end) */
} parsed;

/* A list of unsigned integers (json ints only: zarr-python never writes 4.0 for a shape). */
static int parse_u64_list(const json_object *v, const char *doc, const char *name, uint64_t min,
                          uint64_t *out, size_t *n) {
    const char *what = min ? "positive" : "non-negative";
    if (!json_object_is_type(v, json_type_array))
        return nds_err(NDS_EFORMAT, "%s: \"%s\" must be an array of %s integers", doc, name, what);
    size_t len = json_object_array_length(v);
    if (len > NDS_MAX_RANK)
        return nds_err(NDS_ELIMIT, "%s: \"%s\" has %zu dimensions; ndstore supports at most %d",
                       doc, name, len, NDS_MAX_RANK);
    for (size_t i = 0; i < len; i++) {
        json_object *e = json_object_array_get_idx(v, i);
        int rc = nds_json_check_fits(e, doc, name);
        if (rc) return rc;
        if (!json_object_is_type(e, json_type_int) || json_object_get_int64(e) < 0 ||
            json_object_get_uint64(e) < min)
            return nds_err(NDS_EFORMAT, "%s: \"%s\" must be an array of %s integers", doc, name,
                           what);
        out[i] = json_object_get_uint64(e);
    }
    *n = len;
    return 0;
}

static int parse_format(const json_object *v, const char *doc, void *state) {
    (void)state;
    if (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) != 2)
        return nds_err(NDS_EFORMAT, "%s: \"zarr_format\" must be 2", doc);
    return 0;
}

static int parse_shape(const json_object *v, const char *doc, void *state) {
    parsed *p = state;
    return parse_u64_list(v, doc, "shape", 0, p->m.shape, &p->m.rank);
}

static int parse_chunks(const json_object *v, const char *doc, void *state) {
    parsed *p = state;
    return parse_u64_list(v, doc, "chunks", 1, p->m.chunks, &p->chunk_rank);
}

static int parse_dtype(const json_object *v, const char *doc, void *state) {
    parsed *p = state;
    if (json_object_is_type(v, json_type_array)) {
        const char *text = json_object_to_json_string_ext((json_object *)v, JSON_C_TO_STRING_PLAIN);
        return nds_err(NDS_EUNSUPPORTED, "%s: structured dtype %.80s is not supported", doc, text);
    }
    if (!json_object_is_type(v, json_type_string))
        return nds_err(NDS_EFORMAT, "%s: \"dtype\" must be a string", doc);
    return parse_dtype_string(json_object_get_string((json_object *)v), doc, &p->m);
}

/* The fill of an object array, in the form nds_array_meta holds it (format.h): a string is the
 * fill element (its UTF-8 bytes); null, and the 0 zarr-python 2.13 writes when given none, mean
 * no fill element (missing elements read as empty). */
static int parse_vlen_fill(const json_object *v, const char *doc, nds_zarr2_meta *m) {
    uint32_t n = UINT32_MAX;
    if (json_object_is_type(v, json_type_string)) {
        size_t len = (size_t)json_object_get_string_len(v);
        if (len > NDS_ELEM_MAX_SIZE - 4)
            return nds_err(NDS_EUNSUPPORTED, "%s: \"fill_value\" is a string of %zu bytes; "
                                             "ndstore supports at most %d", doc, len,
                           NDS_ELEM_MAX_SIZE - 4);
        n = (uint32_t)len;
        memcpy(m->fill + 4, json_object_get_string((json_object *)v), len);
    } else if (!json_object_is_type(v, json_type_null) &&
               !(json_object_is_type(v, json_type_int) && json_object_get_int64(v) == 0)) {
        return nds_err(NDS_EFORMAT, "%s: \"fill_value\" of an object array must be a string, "
                                    "null or 0", doc);
    }
    memcpy(m->fill, &n, 4);
    return 0;
}

static int parse_fill(const json_object *v, const char *doc, void *state) {
    parsed *p = state;
    p->m.fill_null = json_object_is_type(v, json_type_null);
    memset(p->m.fill, 0, sizeof p->m.fill);
    if (nds_dtype_is_vlen(p->m.dtype)) return parse_vlen_fill(v, doc, &p->m);
    if (nds_dtype_is_fixed_string(p->m.dtype))
        return nds_string_fill_from_json(p->m.dtype, p->m.itemsize, v, doc, p->m.fill);
    return nds_fill_from_json(p->m.dtype, v, doc, p->m.fill);
}

static int parse_order(const json_object *v, const char *doc, void *state) {
    parsed *p = state;
    const char *s =
        json_object_is_type(v, json_type_string) ? json_object_get_string((json_object *)v) : "";
    if (strcmp(s, "C") != 0 && strcmp(s, "F") != 0)
        return nds_err(NDS_EFORMAT, "%s: \"order\" must be \"C\" or \"F\"", doc);
    p->m.fortran = s[0] == 'F';
    return 0;
}

/* The compressor is borrowed from the document while parsing; nds_zarr2_meta_parse takes a
 * reference. */
static int parse_compressor(const json_object *v, const char *doc, void *state) {
    parsed *p = state;
    p->m.compressor = NULL;
    if (json_object_is_type(v, json_type_null)) return 0;
    json_object *id;
    if (!json_object_is_type(v, json_type_object) || !json_object_object_get_ex(v, "id", &id) ||
        !json_object_is_type(id, json_type_string))
        return nds_err(NDS_EFORMAT,
                       "%s: \"compressor\" must be null or an object with a string \"id\"", doc);
    const char *name = json_object_get_string(id);
    if (!nds_codec_find(name))
        return nds_err(NDS_EUNSUPPORTED, "%s: compressor \"%.40s\" is not supported", doc, name);
    p->m.compressor = (json_object *)v;
    return 0;
}

/* The object codecs ndstore reads: 1 vlen-utf8, 2 vlen-bytes, else 0. */
static int vlen_filter(const char *id) {
    return strcmp(id, "vlen-utf8") == 0 ? 1 : strcmp(id, "vlen-bytes") == 0 ? 2 : 0;
}

static const char *filter_id(const json_object *filters, size_t i) {
    json_object *id = NULL;
    json_object_object_get_ex(json_object_array_get_idx(filters, i), "id", &id);
    return json_object_get_string(id);
}

/* An object array ("|O") is a variable-length array when its first filter is vlen-utf8 or
 * vlen-bytes (numcodecs' object codec, which zarr-python 2.13 puts first) and no other follows;
 * a vlen filter on any other dtype is an error. */
static int check_object_filters(const char *doc, nds_zarr2_meta *m) {
    size_t n = m->filters ? json_object_array_length(m->filters) : 0;
    for (size_t i = nds_dtype_is_vlen(m->dtype) ? 1 : 0; i < n; i++)
        if (vlen_filter(filter_id(m->filters, i)))
            return nds_err(NDS_EFORMAT, "%s: filter \"%s\" (\"filters\"[%zu]) needs dtype \"|O\" "
                                        "and must come first", doc, filter_id(m->filters, i), i);
    if (!nds_dtype_is_vlen(m->dtype)) return 0;
    int kind = n ? vlen_filter(filter_id(m->filters, 0)) : 0;
    if (!kind)
        return nds_err(NDS_EUNSUPPORTED, "%s: dtype \"|O\" (python objects) with %s%s%s is not "
                                         "supported; ndstore reads object arrays of the vlen-utf8 "
                                         "and vlen-bytes filters", doc, n ? "filter \"" : "no object codec",
                       n ? filter_id(m->filters, 0) : "", n ? "\"" : "");
    if (n > 1)
        return nds_err(NDS_EUNSUPPORTED, "%s: filter \"%s\" after \"%s\" is not supported", doc,
                       filter_id(m->filters, 1), filter_id(m->filters, 0));
    if (m->fortran)
        return nds_err(NDS_EUNSUPPORTED, "%s: object arrays in order \"F\" are not supported", doc);
    m->dtype = kind == 1 ? NDS_STRING : NDS_BYTES_VLEN;
    return 0;
}

/* Each filter must name an id ndstore implements (formats/codecs/array_codecs.h); its
 * configuration is checked when the chain is built for the chunk (zarr2.c). Borrowed like the
 * compressor. */
static int parse_filters(const json_object *v, const char *doc, void *state) {
    parsed *p = state;
    p->m.filters = NULL;
    if (json_object_is_type(v, json_type_null)) return 0;
    if (!json_object_is_type(v, json_type_array))
        return nds_err(NDS_EFORMAT, "%s: \"filters\" must be null or an array", doc);
    size_t n = json_object_array_length(v);
    for (size_t i = 0; i < n; i++) {
        json_object *f = json_object_array_get_idx(v, i), *id = NULL;
        if (!json_object_object_get_ex(f, "id", &id) || !json_object_is_type(id, json_type_string))
            return nds_err(NDS_EFORMAT,
                           "%s: \"filters\"[%zu] must be an object with a string \"id\"", doc, i);
        if (!nds_filter_id_supported(json_object_get_string(id)) &&
            !vlen_filter(json_object_get_string(id)))
            return nds_err(NDS_EUNSUPPORTED, "%s: filter \"%.40s\" is not supported", doc,
                           json_object_get_string(id));
    }
    if (n) p->m.filters = (json_object *)v;
    return 0;
}

static int parse_separator(const json_object *v, const char *doc, void *state) {
    parsed *p = state;
    const char *s =
        json_object_is_type(v, json_type_string) ? json_object_get_string((json_object *)v) : "";
    if (strcmp(s, ".") != 0 && strcmp(s, "/") != 0)
        return nds_err(NDS_EFORMAT, "%s: \"dimension_separator\" must be \".\" or \"/\"", doc);
    p->m.separator = s[0];
    return 0;
}

/* The members, in the order they are parsed: dtype before fill_value, which depends on it. */
static const nds_doc_member members[] = {
    {"zarr_format", parse_format, true},
    {"shape", parse_shape, true},
    {"chunks", parse_chunks, true},
    {"dtype", parse_dtype, true},
    {"fill_value", parse_fill, true},
    {"order", parse_order, true},
    {"compressor", parse_compressor, true},
    {"filters", parse_filters, true},
    {"dimension_separator", parse_separator, false},
};
#define MEMBER_COUNT (sizeof members / sizeof members[0])

/* A member of .zarray, whatever its value v (nds_spec_members.known). */
static bool is_member(const char *name, const json_object *v) {
    (void)v;
    return nds_doc_member_known(members, MEMBER_COUNT, name);
}

/* Checks that need several members: ranks agree, sizes stay within limits. */
static int parse_finish(const char *doc, parsed *p) {
    nds_zarr2_meta *m = &p->m;
    if (p->chunk_rank != m->rank)
        return nds_err(NDS_EFORMAT, "%s: \"chunks\" has %zu entries but \"shape\" has %zu", doc,
                       p->chunk_rank, m->rank);
    uint64_t n;
    int rc = check_object_filters(doc, m);
    if (rc) return rc;
    if (!nds_product_u64(m->shape, m->rank, &n))
        return nds_err(NDS_ELIMIT, "%s: \"shape\" has more than 2^64 elements", doc);
    /* (an object array's chunk is counted at 1 byte per element: its elements' bytes are only
     * bounded when decoded, formats/zarr2.c) */
    if (!nds_product_u64(m->chunks, m->rank, &n) ||
        !nds_mul_u64(n, m->itemsize ? m->itemsize : 1, &n) ||
        n > NDS_ZARR2_MAX_CHUNK_BYTES)
        return nds_err(NDS_ELIMIT, "%s: \"chunks\" makes chunks larger than 2 GiB, ndstore's limit",
                       doc);
    m->chunk_nbytes = (size_t)n;
    return 0;
}

int nds_zarr2_meta_parse(const json_object *doc_json, const char *doc, nds_zarr2_meta *m) {
    memset(m, 0, sizeof *m);
    if (!json_object_is_type(doc_json, json_type_object))
        return nds_err(NDS_EFORMAT, "%s: expected a json object", doc);
    parsed p;
    memset(&p, 0, sizeof p);
    p.m.separator = '.';
    int rc = nds_doc_members_parse(doc_json, doc, members, MEMBER_COUNT, &p);
    if (!rc) rc = parse_finish(doc, &p);
    if (rc) return rc;
    *m = p.m;
    if (m->compressor) json_object_get(m->compressor);
    if (m->filters) json_object_get(m->filters);
    return 0;
}

void nds_zarr2_meta_dispose(nds_zarr2_meta *m) {
    json_object_put(m->compressor);
    m->compressor = NULL;
    json_object_put(m->filters);
    m->filters = NULL;
}

static json_object *u64_array(const uint64_t *v, size_t n) {
    json_object *a = json_object_new_array();
    for (size_t i = 0; a && i < n; i++) json_object_array_add(a, json_object_new_uint64(v[i]));
    return a;
}

static json_object *json_copy(const json_object *v) {
    json_object *out = NULL;
    if (v && json_object_deep_copy((json_object *)v, &out, NULL) != 0) return NULL;
    return out;
}

static json_object *fill_json(const nds_zarr2_meta *m) {
    if (nds_dtype_is_vlen(m->dtype)) { /* parse_vlen_fill: a string, or 0 for none */
        uint32_t n;
        memcpy(&n, m->fill, 4);
        return n == UINT32_MAX ? json_object_new_int(0)
                               : json_object_new_string_len((const char *)m->fill + 4, (int)n);
    }
    if (nds_dtype_is_fixed_string(m->dtype))
        return nds_string_fill_to_json(m->dtype, m->itemsize, m->fill);
    return nds_fill_to_json(m->dtype, m->fill);
}

json_object *nds_zarr2_meta_to_json(const nds_zarr2_meta *m) {
    char dtype[16], sep[2] = {m->separator, 0};
    nds_zarr2_dtype_string(m, dtype, sizeof dtype);
    json_object *o = json_object_new_object();
    if (!o) return NULL;
    json_object_object_add(o, "chunks", u64_array(m->chunks, m->rank));
    json_object_object_add(o, "compressor", json_copy(m->compressor));
    json_object_object_add(o, "dimension_separator", json_object_new_string(sep));
    json_object_object_add(o, "dtype", json_object_new_string(dtype));
    json_object_object_add(o, "fill_value", m->fill_null ? NULL : fill_json(m));
    json_object_object_add(o, "filters", json_copy(m->filters));
    json_object_object_add(o, "order", json_object_new_string(m->fortran ? "F" : "C"));
    json_object_object_add(o, "shape", u64_array(m->shape, m->rank));
    json_object_object_add(o, "zarr_format", json_object_new_int(2));
    return o;
}

/* ---- compressors ----------------------------------------------------------------------------- */

int nds_zarr2_compressor_normalize(const json_object *config, size_t itemsize, const char *doc,
                                   json_object **out) {
    *out = NULL;
    if (!config || json_object_is_type(config, json_type_null)) return 0;
    json_object *id;
    if (!json_object_is_type(config, json_type_object) ||
        !json_object_object_get_ex(config, "id", &id) || !json_object_is_type(id, json_type_string))
        return nds_err(NDS_EFORMAT,
                       "%s: \"compressor\" must be null or an object with a string \"id\"", doc);
    const nds_codec *codec = nds_codec_find(json_object_get_string(id));
    if (!codec)
        return nds_err(NDS_EUNSUPPORTED, "%s: compressor \"%.40s\" is not supported", doc,
                       json_object_get_string(id));
    void *state = NULL;
    int rc = codec->create(&state, config, itemsize);
    if (rc) return nds_err_prefix(rc, "%s: compressor", doc);
    rc = codec->config_json(state, out);
    codec->destroy(state);
    return rc ? nds_err_prefix(rc, "%s: compressor", doc) : 0;
}

/* ---- spec requests --------------------------------------------------------------------------- */

static int put_member(json_object *req, const char *name, json_object *v, bool own) {
    if (json_object_object_get_ex(req, name, NULL)) { /* "metadata" wins over "schema" */
        if (own) json_object_put(v);
        return 0;
    }
    json_object_object_add(req, name, own ? v : json_object_get(v));
    return 0;
}

/* A TensorStore dtype name as a zarr v2 typestring (little-endian, as TensorStore creates them). */
/* A format-neutral dtype ("uint16") constrains the type, not the byte order, so it is kept under
 * its own name in the request: request_complete turns it into a little-endian typestring (as
 * TensorStore creates them) and meta_check compares only the type. */
#define SCHEMA_DTYPE "schema dtype"

/* A schema dtype naming strings: a NumPy typestring of fixed-width strings ("<U5", "|S8"), or
 * "string" / "bytes" (variable length: "|O" with the vlen-utf8 / vlen-bytes filter). These carry
 * their width or codec, so they go into the request as its "dtype" (and "filters"). 1 when name is
 * one (*rc set), else 0. */
static int schema_string_dtype(json_object *req, const char *name, const char *where, int *rc) {
    bool vlen = strcmp(name, "string") == 0 || strcmp(name, "bytes") == 0;
    bool fixed = (name[0] == '<' || name[0] == '>' || name[0] == '|') &&
                 (name[1] == 'S' || name[1] == 'U');
    *rc = 0;
    if (!vlen && !fixed) return 0;
    if (fixed) {
        nds_zarr2_meta m;
        char doc[600];
        snprintf(doc, sizeof doc, "zarr: spec for %s", where);
        memset(&m, 0, sizeof m);
        if ((*rc = parse_string_dtype(name, doc, &m)) == 0)
            put_member(req, "dtype", json_object_new_string(name), true);
        return 1;
    }
    put_member(req, "dtype", json_object_new_string("|O"), true);
    json_object *filter = json_object_new_object(), *list = json_object_new_array();
    json_object_object_add(filter, "id", json_object_new_string(name[0] == 's' ? "vlen-utf8"
                                                                                : "vlen-bytes"));
    json_object_array_add(list, filter);
    put_member(req, "filters", list, true);
    return 1;
}

static int schema_dtype(json_object *req, const json_object *v, const char *where) {
    const char *name =
        json_object_is_type(v, json_type_string) ? json_object_get_string((json_object *)v) : "";
    char unit[8];
    uint32_t scale;
    int rc;
    if (schema_string_dtype(req, name, where, &rc)) return rc;
    nds_dtype t = nds_dtype_from_name(name);
    if (t == NDS_DTYPE_INVALID && nds_dtype_with_unit(name, unit, sizeof unit, &scale) != NDS_DTYPE_INVALID) {
        if (json_object_object_get_ex(req, "dtype", NULL)) return 0; /* "metadata" wins */
        return put_member(req, SCHEMA_DTYPE, (json_object *)v, false); /* "datetime64[ns]" */
    }
    if (t == NDS_DTYPE_INVALID)
        return nds_err(NDS_EINVAL, "zarr: spec for %s: unknown \"dtype\" \"%.40s\"", where, name);
    if (json_object_object_get_ex(req, "dtype", NULL)) return 0; /* "metadata" wins */
    if (!has_typestring(t))
        return nds_err(NDS_EUNSUPPORTED,
                       "zarr: spec for %s: dtype \"%s\" has no zarr v2 (NumPy) typestring%s", where,
                       name,
                       t == NDS_DATETIME64 || t == NDS_TIMEDELTA64
                           ? "; give the unit in \"metadata\": {\"dtype\": \"<M8[ns]\"}"
                           : "; zarr v3 (driver \"zarr3\") stores it");
    return put_member(req, SCHEMA_DTYPE, (json_object *)v, false);
}

/* The zarr v2 typestring of a format-neutral dtype name (already validated). */
static json_object *typestring_of(const json_object *name) {
    const char *s = json_object_get_string((json_object *)name);
    nds_zarr2_meta m = {.dtype = nds_dtype_from_name(s), .byte_order = '<'};
    char unit[8];
    uint32_t scale;
    m.dtype = m.dtype ? m.dtype : nds_dtype_with_unit(s, unit, sizeof unit, &scale);
    if (m.dtype == NDS_DATETIME64 || m.dtype == NDS_TIMEDELTA64) /* the bracket as given: "10s" */
        snprintf(m.time_unit, sizeof m.time_unit, "%.*s", (int)(strlen(strchr(s, '[')) - 2),
                 strchr(s, '[') + 1);
    m.itemsize = nds_dtype_size(m.dtype);
    char typestring[32];
    nds_zarr2_dtype_string(&m, typestring, sizeof typestring);
    return json_object_new_string(typestring);
}

/* {"shape": [...]}: the only part of a schema "domain" or chunk layout ndstore understands. */
static int schema_shape(json_object *req, const json_object *v, const char *member,
                        const char *dest, const char *where) {
    json_object *shape = NULL;
    if (!json_object_is_type(v, json_type_object))
        return nds_err(NDS_EINVAL, "zarr: spec for %s: \"%s\" must be an object", where, member);
    json_object_object_foreach((json_object *)v, key, val) {
        if (strcmp(key, "shape") != 0)
            return nds_err(NDS_EUNSUPPORTED, "zarr: spec for %s: \"%s.%s\" is not supported", where,
                           member, key);
        shape = val;
    }
    return shape ? put_member(req, dest, shape, false) : 0;
}

static int schema_chunk_layout(json_object *req, const json_object *v, const char *where) {
    if (!json_object_is_type(v, json_type_object))
        return nds_err(NDS_EINVAL, "zarr: spec for %s: \"chunk_layout\" must be an object", where);
    json_object_object_foreach((json_object *)v, key, val) {
        /* zarr v2 has one chunk shape, so read, write and plain chunk constraints all name it. */
        if (strcmp(key, "chunk") != 0 && strcmp(key, "write_chunk") != 0 &&
            strcmp(key, "read_chunk") != 0)
            return nds_err(NDS_EUNSUPPORTED,
                           "zarr: spec for %s: \"chunk_layout.%s\" is not supported", where, key);
        int rc = schema_shape(req, val, key, "chunks", where);
        if (rc) return rc;
    }
    return 0;
}

/* "codec": ndstore's compact string ("zstd:3"), or TensorStore's
 * {"driver":"zarr","compressor":...}. */
static int schema_codec(json_object *req, const json_object *v, const char *where) {
    if (json_object_is_type(v, json_type_string)) {
        json_object *config = NULL;
        int rc = nds_codec_spec_parse(json_object_get_string((json_object *)v), &config);
        if (rc) return nds_err_prefix(rc, "zarr: spec for %s: \"codec\"", where);
        return put_member(req, "compressor", config, true);
    }
    if (!json_object_is_type(v, json_type_object))
        return nds_err(NDS_EINVAL, "zarr: spec for %s: \"codec\" must be a string or an object",
                       where);
    json_object_object_foreach((json_object *)v, key, val) {
        if (strcmp(key, "compressor") == 0 || strcmp(key, "filters") == 0)
            put_member(req, key, val, false);
        else if (strcmp(key, "driver") != 0)
            return nds_err(NDS_EUNSUPPORTED, "zarr: spec for %s: \"codec.%s\" is not supported",
                           where, key);
    }
    return 0;
}

static int schema_member(json_object *req, const char *key, const json_object *v,
                         const char *where) {
    if (strcmp(key, "dtype") == 0) return schema_dtype(req, v, where);
    if (strcmp(key, "domain") == 0) return schema_shape(req, v, "domain", "shape", where);
    if (strcmp(key, "chunk_layout") == 0) return schema_chunk_layout(req, v, where);
    if (strcmp(key, "fill_value") == 0)
        return put_member(req, "fill_value", (json_object *)v, false);
    if (strcmp(key, "codec") == 0) return schema_codec(req, v, where);
    if (strcmp(key, "rank") == 0) return 0; /* implied by the shape; checked through it */
    return nds_err(NDS_EUNSUPPORTED, "zarr: spec for %s: schema member \"%.40s\" is not supported",
                   where, key);
}

int nds_zarr2_request_from_spec(const json_object *spec, const char *where, json_object **out) {
    static const nds_spec_members m = {"zarr", is_member, schema_member};
    return nds_format_request_from_spec(spec, where, &m, out);
}

static void add_default(json_object *req, const char *name, json_object *v) {
    if (!json_object_object_get_ex(req, name, NULL))
        json_object_object_add(req, name, v);
    else
        json_object_put(v);
}

int nds_zarr2_request_complete(json_object *req, const char *where) {
    char doc[600];
    snprintf(doc, sizeof doc, "zarr: spec for %s", where);
    json_object *shape, *dtype, *neutral;
    if (!json_object_object_get_ex(req, "dtype", NULL) &&
        json_object_object_get_ex(req, SCHEMA_DTYPE, &neutral))
        json_object_object_add(req, "dtype", typestring_of(neutral));
    if (!json_object_object_get_ex(req, "shape", &shape))
        return nds_err(NDS_EINVAL,
                       "%s: cannot create an array without a shape (give \"metadata\": "
                       "{\"shape\": [...]} or \"schema\": {\"domain\": {\"shape\": [...]}})",
                       doc);
    if (!json_object_object_get_ex(req, "dtype", &dtype))
        return nds_err(NDS_EINVAL,
                       "%s: cannot create an array without a dtype (give \"metadata\": "
                       "{\"dtype\": \"<u2\"} or \"schema\": {\"dtype\": \"uint16\"})",
                       doc);
    parsed p;
    memset(&p, 0, sizeof p);
    int rc = parse_shape(shape, doc, &p);
    if (rc == 0) rc = parse_dtype(dtype, doc, &p);
    if (rc) return rc;
    if (!json_object_object_get_ex(req, "chunks", NULL)) {
        /* (object arrays: guessed at 16 bytes per element) */
        nds_default_chunks(p.m.rank, p.m.shape, p.m.itemsize ? p.m.itemsize : 16,
                           DEFAULT_CHUNK_BYTES, p.m.chunks);
        json_object_object_add(req, "chunks", u64_array(p.m.chunks, p.m.rank));
    }
    json_object *zstd = json_object_new_object();
    json_object_object_add(zstd, "id", json_object_new_string("zstd"));
    json_object_object_add(zstd, "level", json_object_new_int(1));
    add_default(req, "compressor", zstd);
    add_default(req, "zarr_format", json_object_new_int(2));
    add_default(req, "order", json_object_new_string("C"));
    add_default(req, "fill_value", fill_json(&p.m)); /* zero (empty strings), not null */
    if (nds_dtype_is_vlen(p.m.dtype)) { /* "|O" alone: strings, as zarr-python's dtype=str */
        json_object *vlen = json_object_new_object(), *list = json_object_new_array();
        json_object_object_add(vlen, "id", json_object_new_string("vlen-utf8"));
        json_object_array_add(list, vlen);
        add_default(req, "filters", list);
    }
    add_default(req, "filters", NULL);
    add_default(req, "dimension_separator", json_object_new_string("."));
    return 0;
}

/* ---- checks against an existing array -------------------------------------------------------- */

/* The bytes of m->fill that hold its fill value. */
static size_t fill_bytes(const nds_zarr2_meta *m) {
    if (!nds_dtype_is_vlen(m->dtype)) return m->itemsize;
    uint32_t n;
    memcpy(&n, m->fill, 4);
    return 4 + (n == UINT32_MAX ? 0 : n);
}

/* 1 when member i has the same value in a and b. */
static int member_equal(size_t i, const parsed *a, const nds_zarr2_meta *b, const char *doc,
                        bool *eq) {
    const nds_zarr2_meta *x = &a->m;
    const char *name = members[i].name;
    if (strcmp(name, "shape") == 0)
        *eq = x->rank == b->rank && memcmp(x->shape, b->shape, b->rank * sizeof b->shape[0]) == 0;
    else if (strcmp(name, "chunks") == 0)
        *eq = a->chunk_rank == b->rank &&
              memcmp(x->chunks, b->chunks, b->rank * sizeof b->chunks[0]) == 0;
    else if (strcmp(name, "dtype") == 0)
        *eq = (x->dtype == b->dtype || (nds_dtype_is_vlen(x->dtype) && nds_dtype_is_vlen(b->dtype))) &&
              x->byte_order == b->byte_order &&
              x->itemsize == b->itemsize; /* the width of "|S5" and "|S6"; "filters" says
                                           * which object array */
    else if (strcmp(name, "fill_value") == 0)
        *eq = x->fill_null == b->fill_null && memcmp(x->fill, b->fill, fill_bytes(b)) == 0;
    else if (strcmp(name, "order") == 0)
        *eq = x->fortran == b->fortran;
    else if (strcmp(name, "dimension_separator") == 0)
        *eq = x->separator == b->separator;
    else if (strcmp(name, "compressor") == 0) {
        json_object *na = NULL, *nb = NULL;
        int rc = nds_zarr2_compressor_normalize(x->compressor, b->itemsize, doc, &na);
        if (rc == 0) rc = nds_zarr2_compressor_normalize(b->compressor, b->itemsize, doc, &nb);
        *eq = rc == 0 && (na == nb || (na && nb && json_object_equal(na, nb)));
        json_object_put(na);
        json_object_put(nb);
        return rc;
    } else if (strcmp(name, "filters") == 0) {
        *eq = x->filters == b->filters ||
              (x->filters && b->filters && json_object_equal(x->filters, b->filters));
    } else
        *eq = true; /* zarr_format has one accepted value */
    return 0;
}

static int mismatch(const nds_zarr2_meta *stored, const json_object *asked, const char *name,
                    const char *where) {
    json_object *canon = nds_zarr2_meta_to_json(stored), *have = NULL;
    json_object_object_get_ex(canon, name, &have);
    char *h = nds_strdup(json_object_to_json_string_ext(have, JSON_C_TO_STRING_PLAIN));
    const char *w = json_object_to_json_string_ext((json_object *)asked, JSON_C_TO_STRING_PLAIN);
    int rc =
        nds_err(NDS_EMISMATCH, "zarr: .zarray of %s: \"%s\" is %.200s, the spec asks for %.200s",
                where, name, h ? h : "?", w);
    free(h);
    json_object_put(canon);
    return rc;
}

/* A format-neutral dtype name ("uint16", "datetime64[ns]") names the stored type (and unit). */
static bool same_type(const json_object *neutral, const nds_zarr2_meta *stored) {
    json_object *ts = typestring_of(neutral);
    nds_zarr2_meta asked;
    memset(&asked, 0, sizeof asked);
    bool same = parse_dtype_string(json_object_get_string(ts), "", &asked) == 0 &&
                asked.dtype == stored->dtype && strcmp(asked.time_unit, stored->time_unit) == 0;
    json_object_put(ts);
    return same;
}

int nds_zarr2_meta_check(const nds_zarr2_meta *stored, const json_object *req, const char *where) {
    char doc[600];
    snprintf(doc, sizeof doc, "zarr: spec for %s", where);
    parsed p = {.m = *stored, .chunk_rank = stored->rank};
    for (size_t i = 0; i < MEMBER_COUNT; i++) {
        json_object *v;
        if (!json_object_object_get_ex(req, members[i].name, &v)) continue;
        int rc = members[i].parse(v, doc, &p);
        bool eq = false;
        if (rc == 0) rc = member_equal(i, &p, stored, doc, &eq);
        if (rc) return rc;
        if (!eq) return mismatch(stored, v, members[i].name, where);
    }
    json_object *neutral;
    if (json_object_object_get_ex(req, SCHEMA_DTYPE, &neutral) && !same_type(neutral, stored))
        return mismatch(stored, neutral, "dtype", where);
    return 0;
}

