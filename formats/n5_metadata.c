/* N5 metadata: strict parsing of a dataset's attributes.json members, N5 "compression" objects to
 * and from ndstore codec configurations, spec requests (TensorStore "metadata" / "schema") and
 * checks of an existing dataset against a spec.
 *
 * Implements the dataset attributes of the N5 specification (dimensions, blockSize, dataType,
 * compression; the legacy "compressionType" string of N5 0.x is read as that type with default
 * parameters) and the compression parameters of N5 core (raw, gzip with useZlib, bzip2, xz) and
 * of the n5-blosc and n5-zstandard plugins. Omits: N5's lz4 (Java's LZ4Block stream framing),
 * rank-0 datasets and the "object" data type (NDS_EUNSUPPORTED naming them). Members of a stored
 * "compression" that ndstore does not know (n5-blosc's "nthreads", n5-zstandard's tuning knobs)
 * are ignored when reading, since none of them changes how a block decodes; in a spec they are
 * errors, since there they are most likely typos. Threading: reentrant, no shared state.
 * Ownership: documented per function in n5_metadata.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "n5_metadata.h"
#include "ndstore/errors.h"
#include "internal/codec_spec.h"
#include "internal/error.h"
#include "internal/format_util.h"
#include "internal/json_util.h"
#include "internal/util.h"

/* Block size the default blockSize aims at. */
#define DEFAULT_BLOCK_BYTES (UINT64_C(1) << 20)
/* Java N5 keeps block dimensions in an int. */
#define MAX_BLOCK_DIM INT32_MAX
/* Java N5 keeps dimensions in a long. */
#define MAX_DIMENSION INT64_MAX

/* ---- compression ----------------------------------------------------------------------------- */

typedef enum param_kind { P_INT, P_BOOL, P_STRING } param_kind;

/* One parameter of an N5 compression type. */
typedef struct param {
    const char *name;    /* N5 member name */
    param_kind kind;     /* JSON type */
    int64_t min, max;    /* range of a P_INT */
    int64_t def;         /* default of a P_INT or P_BOOL */
    const char *def_str; /* default of a P_STRING */
    const char *member;  /* member of the ndstore codec config it becomes; NULL = none */
} param;

#define MAX_PARAMS 4

/* One N5 compression type. Defaults are those of the Java implementations (N5 core, n5-blosc,
 * n5-zstandard), which is what a missing member means to them. */
typedef struct ctype {
    const char *type;             /* N5 "type" */
    const char *codec;            /* ndstore codec, NULL for raw */
    size_t nparams;               /* entries of params */
    param params[MAX_PARAMS];     /* parameters, in the order they are written */
    const char *ignored;          /* a member Java writes that has no effect on the bytes */
} ctype;

static const ctype ctypes[] = {
    {"raw", NULL, 0, {{0}}, NULL},
    {"gzip", "gzip", 2,
     {{"level", P_INT, -1, 9, -1, NULL, "level"}, {"useZlib", P_BOOL, 0, 1, 0, NULL, NULL}}, NULL},
    {"bzip2", "bz2", 1, {{"blockSize", P_INT, 1, 9, 9, NULL, "level"}}, NULL},
    {"xz", "xz", 1, {{"preset", P_INT, 0, 9, 6, NULL, "preset"}}, NULL},
    {"blosc", "blosc", 4,
     {{"cname", P_STRING, 0, 0, 0, "blosclz", "cname"},
      {"clevel", P_INT, 0, 9, 6, NULL, "clevel"},
      {"shuffle", P_INT, -1, 2, 0, NULL, "shuffle"},
      {"blocksize", P_INT, 0, INT32_MAX, 0, NULL, "blocksize"}},
     "nthreads"},
    {"zstd", "zstd", 1, {{"level", P_INT, -131072, 22, 3, NULL, "level"}}, NULL},
};
#define CTYPE_COUNT (sizeof ctypes / sizeof ctypes[0])

static const ctype *ctype_find(const char *type) {
    for (size_t i = 0; i < CTYPE_COUNT; i++)
        if (strcmp(ctypes[i].type, type) == 0) return &ctypes[i];
    return NULL;
}

static int unknown_type(const char *type, const char *doc) {
    if (strcmp(type, "lz4") == 0)
        return nds_err(NDS_EUNSUPPORTED,
                       "%s: compression \"lz4\" is not supported (N5's lz4 is Java's LZ4Block "
                       "stream format, which ndstore does not implement)",
                       doc);
    return nds_err(NDS_EUNSUPPORTED,
                   "%s: compression type \"%.40s\" is not supported (ndstore has raw, gzip, bzip2, "
                   "xz, blosc and zstd)",
                   doc, type);
}

/* In strict mode, every member must be "type", a parameter, or the type's ignored member. */
static int check_members(const ctype *t, const json_object *c, const char *doc) {
    json_object_object_foreach((json_object *)c, key, val) {
        (void)val;
        bool ok = strcmp(key, "type") == 0 || (t->ignored && strcmp(key, t->ignored) == 0);
        for (size_t i = 0; i < t->nparams && !ok; i++) ok = strcmp(key, t->params[i].name) == 0;
        if (!ok)
            return nds_err(NDS_EFORMAT, "%s: \"%.40s\" is not a parameter of compression \"%s\"",
                           doc, key, t->type);
    }
    return 0;
}

/* Reads one parameter (its default when absent) as a new JSON value into *out. */
static int param_value(const param *p, const json_object *c, const char *doc, json_object **out) {
    int rc = 0;
    if (p->kind == P_INT) {
        int64_t v = p->def;
        rc = nds_json_get_int(c, p->name, true, p->min, p->max, doc, &v);
        *out = json_object_new_int64(v);
    } else if (p->kind == P_BOOL) {
        bool v = p->def != 0;
        rc = nds_json_get_bool(c, p->name, true, doc, &v);
        *out = json_object_new_boolean(v);
    } else {
        const char *v = p->def_str;
        rc = nds_json_get_string(c, p->name, true, doc, &v);
        *out = json_object_new_string(v);
    }
    if (rc) {
        json_object_put(*out);
        *out = NULL;
    }
    return rc;
}

/* Fills norm (the N5 object) and cfg (the codec config, may be NULL) from c. */
static int compression_fill(const ctype *t, const json_object *c, const char *doc,
                            json_object *norm, json_object *cfg) {
    for (size_t i = 0; i < t->nparams; i++) {
        const param *p = &t->params[i];
        json_object *v;
        int rc = param_value(p, c, doc, &v);
        if (rc) return rc;
        if (cfg && p->member) json_object_object_add(cfg, p->member, json_object_get(v));
        /* N5's gzip with useZlib is the zlib wrapper: a different ndstore codec. */
        if (cfg && strcmp(p->name, "useZlib") == 0 && json_object_get_boolean(v))
            json_object_object_add(cfg, "id", json_object_new_string("zlib"));
        json_object_object_add(norm, p->name, v);
    }
    return 0;
}

int nds_n5_compression_parse(const json_object *c, bool strict, const char *doc,
                             json_object **norm, json_object **config) {
    if (norm) *norm = NULL;
    if (config) *config = NULL;
    json_object *type;
    if (!json_object_is_type(c, json_type_object) || !json_object_object_get_ex(c, "type", &type) ||
        !json_object_is_type(type, json_type_string))
        return nds_err(NDS_EFORMAT, "%s: \"compression\" must be an object with a string \"type\"",
                       doc);
    const ctype *t = ctype_find(json_object_get_string(type));
    if (!t) return unknown_type(json_object_get_string(type), doc);
    char where[700];
    snprintf(where, sizeof where, "%s: compression \"%s\"", doc, t->type);
    int rc = strict ? check_members(t, c, where) : 0;
    if (rc) return rc;
    json_object *n = json_object_new_object(), *cfg = NULL;
    if (!n) return nds_err(NDS_ENOMEM, "n5: out of memory");
    json_object_object_add(n, "type", json_object_new_string(t->type));
    if (t->codec) {
        cfg = json_object_new_object();
        json_object_object_add(cfg, "id", json_object_new_string(t->codec));
    }
    rc = compression_fill(t, c, where, n, cfg);
    if (rc == 0 && norm) *norm = json_object_get(n);
    if (rc == 0 && config) *config = json_object_get(cfg);
    json_object_put(n);
    json_object_put(cfg);
    return rc;
}

/* ---- dataset members ------------------------------------------------------------------------- */

static const char *const reserved[] = {"dimensions", "blockSize", "dataType",
                                       "compression", "compressionType", "n5"};

bool nds_n5_is_reserved(const char *key) {
    for (size_t i = 0; i < sizeof reserved / sizeof reserved[0]; i++)
        if (strcmp(key, reserved[i]) == 0) return true;
    return false;
}

bool nds_n5_is_dataset(const json_object *doc) {
    return json_object_is_type(doc, json_type_object) &&
           (json_object_object_get_ex(doc, "dimensions", NULL) ||
            json_object_object_get_ex(doc, "dataType", NULL));
}

/* The N5 data types; each N5 name is also the ndstore name. */
static const nds_dtype n5_dtypes[] = {NDS_UINT8, NDS_UINT16, NDS_UINT32, NDS_UINT64, NDS_INT8,
                                      NDS_INT16, NDS_INT32,  NDS_INT64,  NDS_FLOAT32, NDS_FLOAT64};

static nds_dtype dtype_of(const char *name) {
    nds_dtype t = nds_dtype_from_name(name);
    for (size_t i = 0; i < sizeof n5_dtypes / sizeof n5_dtypes[0]; i++)
        if (n5_dtypes[i] == t) return t;
    return NDS_DTYPE_INVALID;
}

static int parse_dtype(const json_object *doc_json, const char *doc, nds_n5_meta *m) {
    const char *name = NULL;
    int rc = nds_json_get_string(doc_json, "dataType", false, doc, &name);
    if (rc) return rc;
    m->dtype = dtype_of(name);
    if (m->dtype != NDS_DTYPE_INVALID) {
        m->itemsize = nds_dtype_size(m->dtype);
        return 0;
    }
    return nds_err(NDS_EUNSUPPORTED,
                   "%s: \"dataType\" \"%.40s\" is not supported (N5 data types are uint8, uint16, "
                   "uint32, uint64, int8, int16, int32, int64, float32 and float64)",
                   doc, name);
}

/* "dimensions" or "blockSize": an array of integers in [min, max], rank 1 to NDS_MAX_RANK. */
static int parse_dims(const json_object *doc_json, const char *key, uint64_t min, uint64_t max,
                      const char *doc, uint64_t *out, size_t *n) {
    json_object *v = NULL;
    if (json_object_object_get_ex(doc_json, key, &v) && json_object_is_type(v, json_type_array)) {
        size_t len = json_object_array_length(v);
        if (len > NDS_MAX_RANK)
            return nds_err(NDS_ELIMIT, "%s: \"%s\" has %zu dimensions; ndstore supports at most %d",
                           doc, key, len, NDS_MAX_RANK);
        if (len == 0)
            return nds_err(NDS_EUNSUPPORTED, "%s: \"%s\" is empty; rank-0 datasets are not "
                           "supported", doc, key);
    }
    int rc = nds_json_get_u64_array(doc_json, key, doc, max, out, NDS_MAX_RANK, n);
    for (size_t i = 0; rc == 0 && i < *n; i++)
        if (out[i] < min)
            rc = nds_err(NDS_EFORMAT, "%s: \"%s\"[%zu] must be at least %llu", doc, key, i,
                         (unsigned long long)min);
    return rc;
}

/* The legacy (N5 0.x) "compressionType": "gzip" means {"type": "gzip"} with default parameters. */
static int parse_compression(const json_object *doc_json, const char *doc, nds_n5_meta *m) {
    json_object *c = NULL, *legacy = NULL;
    if (!json_object_object_get_ex(doc_json, "compression", &c) &&
        json_object_object_get_ex(doc_json, "compressionType", &legacy) &&
        json_object_is_type(legacy, json_type_string)) {
        json_object *tmp = json_object_new_object();
        json_object_object_add(tmp, "type", json_object_get(legacy));
        int rc = nds_n5_compression_parse(tmp, false, doc, &m->compression, &m->codec_config);
        json_object_put(tmp);
        return rc;
    }
    if (!c) return nds_err(NDS_EFORMAT, "%s: missing member \"compression\"", doc);
    return nds_n5_compression_parse(c, false, doc, &m->compression, &m->codec_config);
}

/* Sizes: the shape's element count fits 64 bits; a block fits N5's 2^31 bytes. */
static int check_sizes(const char *doc, nds_n5_meta *m) {
    uint64_t n, bytes;
    if (!nds_product_u64(m->shape, m->rank, &n))
        return nds_err(NDS_ELIMIT, "%s: \"dimensions\" has more than 2^64 elements", doc);
    if (!nds_product_u64(m->block, m->rank, &n) || !nds_mul_u64(n, m->itemsize, &bytes) ||
        bytes > NDS_N5_MAX_BLOCK_BYTES)
        return nds_err(NDS_ELIMIT, "%s: \"blockSize\" makes blocks larger than 2^31 bytes, N5's "
                       "limit", doc);
    m->block_nbytes = (size_t)bytes;
    return 0;
}

/* rank positive finite numbers of a member; false when absent or anything else. */
static bool unit_sizes(const json_object *v, size_t rank, double *out) {
    if (!json_object_is_type(v, json_type_array) || json_object_array_length(v) != rank)
        return false;
    for (size_t d = 0; d < rank; d++) {
        json_object *e = json_object_array_get_idx(v, d);
        if (!json_object_is_type(e, json_type_double) && !json_object_is_type(e, json_type_int))
            return false;
        out[d] = json_object_get_double(e);
        if (!(out[d] > 0) || out[d] > 1e300) return false;
    }
    return true;
}

/* The physical units the conventions of other N5 tools write: "resolution" + "units" (TensorStore,
 * BigDataViewer) or "pixelResolution": {"dimensions", "unit"} (n5-viewer). They are attributes, not
 * N5 itself: one that does not fit (wrong length, a name over 7 bytes) leaves the units unknown. */
static void parse_units(const json_object *doc, nds_n5_meta *m) {
    double size[NDS_MAX_RANK];
    json_object *res, *names, *pr, *unit;
    const char *one = NULL;
    if (json_object_object_get_ex(doc, "resolution", &res) &&
        json_object_object_get_ex(doc, "units", &names)) {
        if (!unit_sizes(res, m->rank, size) || !json_object_is_type(names, json_type_array) ||
            json_object_array_length(names) != m->rank)
            return;
    } else if (json_object_object_get_ex(doc, "pixelResolution", &pr) &&
               json_object_object_get_ex(pr, "dimensions", &res) &&
               json_object_object_get_ex(pr, "unit", &unit) &&
               json_object_is_type(unit, json_type_string) && unit_sizes(res, m->rank, size)) {
        names = NULL;
        one = json_object_get_string(unit);
    } else {
        return;
    }
    nds_unit u[NDS_MAX_RANK];
    for (size_t d = 0; d < m->rank; d++) {
        json_object *e = names ? json_object_array_get_idx(names, d) : NULL;
        const char *name = names ? (json_object_is_type(e, json_type_string)
                                        ? json_object_get_string(e) : NULL)
                                 : one;
        if (!name || strlen(name) >= sizeof u[d].name) return;
        u[d].size = name[0] ? size[d] : 0; /* "": dimensionless, no physical unit */
        snprintf(u[d].name, sizeof u[d].name, "%s", name);
    }
    memcpy(m->units, u, m->rank * sizeof *u);
}

int nds_n5_meta_parse(const json_object *doc_json, const char *doc, nds_n5_meta *m) {
    memset(m, 0, sizeof *m);
    if (!json_object_is_type(doc_json, json_type_object))
        return nds_err(NDS_EFORMAT, "%s: expected a json object", doc);
    size_t nblock = 0;
    int rc = parse_dims(doc_json, "dimensions", 0, MAX_DIMENSION, doc, m->shape, &m->rank);
    if (rc == 0) rc = parse_dims(doc_json, "blockSize", 1, MAX_BLOCK_DIM, doc, m->block, &nblock);
    if (rc == 0 && nblock != m->rank)
        rc = nds_err(NDS_EFORMAT, "%s: \"blockSize\" has %zu entries but \"dimensions\" has %zu",
                     doc, nblock, m->rank);
    if (rc == 0) rc = parse_dtype(doc_json, doc, m);
    if (rc == 0) rc = check_sizes(doc, m);
    if (rc == 0) rc = parse_compression(doc_json, doc, m);
    if (rc == 0) parse_units(doc_json, m);
    if (rc) nds_n5_meta_dispose(m);
    return rc;
}

void nds_n5_meta_dispose(nds_n5_meta *m) {
    json_object_put(m->compression);
    json_object_put(m->codec_config);
    m->compression = NULL;
    m->codec_config = NULL;
}

/* ---- spec requests --------------------------------------------------------------------------- */

/* req[name] = v (a new reference taken when !own) unless "metadata" already set it. */
static void put_member(json_object *req, const char *name, json_object *v, bool own) {
    if (json_object_object_get_ex(req, name, NULL)) {
        if (own) json_object_put(v);
        return;
    }
    json_object_object_add(req, name, own ? v : json_object_get(v));
}

static int schema_dtype(json_object *req, const json_object *v, const char *where) {
    const char *name =
        json_object_is_type(v, json_type_string) ? json_object_get_string((json_object *)v) : "";
    if (nds_dtype_from_name(name) == NDS_DTYPE_INVALID)
        return nds_err(NDS_EINVAL, "n5: spec for %s: unknown \"dtype\" \"%.40s\"", where, name);
    if (dtype_of(name) == NDS_DTYPE_INVALID)
        return nds_err(NDS_EUNSUPPORTED,
                       "n5: spec for %s: dtype \"%s\" is not supported by N5 (uint8..uint64, "
                       "int8..int64, float32, float64)",
                       where, name);
    put_member(req, "dataType", (json_object *)v, false);
    return 0;
}

/* {"shape": [...]}: the only part of a schema domain or chunk layout N5 can express. */
static int schema_shape(json_object *req, const json_object *v, const char *member,
                        const char *dest, const char *where) {
    json_object *shape = NULL;
    if (!json_object_is_type(v, json_type_object))
        return nds_err(NDS_EINVAL, "n5: spec for %s: \"%s\" must be an object", where, member);
    json_object_object_foreach((json_object *)v, key, val) {
        if (strcmp(key, "shape") != 0)
            return nds_err(NDS_EUNSUPPORTED, "n5: spec for %s: \"%s.%s\" is not supported",
                           where, member, key);
        shape = val;
    }
    if (shape) put_member(req, dest, shape, false);
    return 0;
}

static int schema_chunk_layout(json_object *req, const json_object *v, const char *where) {
    if (!json_object_is_type(v, json_type_object))
        return nds_err(NDS_EINVAL, "n5: spec for %s: \"chunk_layout\" must be an object", where);
    json_object_object_foreach((json_object *)v, key, val) {
        /* N5 has one block shape, so read, write and plain chunk constraints all name it. */
        if (strcmp(key, "chunk") != 0 && strcmp(key, "write_chunk") != 0 &&
            strcmp(key, "read_chunk") != 0)
            return nds_err(NDS_EUNSUPPORTED, "n5: spec for %s: \"chunk_layout.%s\" is not "
                           "supported", where, key);
        int rc = schema_shape(req, val, key, "blockSize", where);
        if (rc) return rc;
    }
    return 0;
}

/* N5 has no fill value: blocks that are missing read as zero. */
static int schema_fill(const json_object *v, const char *where) {
    bool zero = json_object_is_type(v, json_type_null) ||
                ((json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double))
                 && json_object_get_double((json_object *)v) == 0.0) ||
                (json_object_is_type(v, json_type_boolean) && !json_object_get_boolean(v));
    if (zero) return 0;
    return nds_err(NDS_EUNSUPPORTED,
                   "n5: spec for %s: fill value %.40s is not supported (N5 has no fill value; "
                   "missing blocks read as 0)",
                   where, json_object_to_json_string_ext((json_object *)v, JSON_C_TO_STRING_PLAIN));
}

/* A numcodecs-style config (from a compact codec string) as an N5 compression object. */
static int compression_from_codec(const json_object *cfg, const char *where, json_object **out) {
    *out = json_object_new_object();
    if (!cfg) {
        json_object_object_add(*out, "type", json_object_new_string("raw"));
        return 0;
    }
    const char *id = json_object_get_string(json_object_object_get(cfg, "id"));
    const ctype *t = NULL;
    bool zlib = strcmp(id, "zlib") == 0;
    for (size_t i = 0; i < CTYPE_COUNT && !t; i++)
        if (ctypes[i].codec && strcmp(ctypes[i].codec, zlib ? "gzip" : id) == 0) t = &ctypes[i];
    if (!t) {
        json_object_put(*out);
        *out = NULL;
        return nds_err(NDS_EUNSUPPORTED,
                       "n5: spec for %s: codec \"%s\" has no N5 equivalent (N5 has raw, gzip, "
                       "zlib, bz2, xz, blosc and zstd)",
                       where, id);
    }
    json_object_object_add(*out, "type", json_object_new_string(t->type));
    for (size_t i = 0; i < t->nparams; i++) {
        const param *p = &t->params[i];
        json_object *v = p->member ? json_object_object_get(cfg, p->member) : NULL;
        if (v) json_object_object_add(*out, p->name, json_object_get(v));
    }
    if (strcmp(t->type, "gzip") == 0)
        json_object_object_add(*out, "useZlib", json_object_new_boolean(zlib));
    return 0;
}

/* "codec": a compact codec string ("gzip:1") or TensorStore's {"driver":"n5","compression":{..}}.
 */
static int schema_codec(json_object *req, const json_object *v, const char *where) {
    if (json_object_is_type(v, json_type_string)) {
        json_object *cfg = NULL, *c = NULL;
        int rc = nds_codec_spec_parse(json_object_get_string((json_object *)v), &cfg);
        if (rc) return nds_err_prefix(rc, "n5: spec for %s: \"codec\"", where);
        rc = compression_from_codec(cfg, where, &c);
        json_object_put(cfg);
        if (rc == 0) put_member(req, "compression", c, true);
        return rc;
    }
    if (!json_object_is_type(v, json_type_object))
        return nds_err(NDS_EINVAL, "n5: spec for %s: \"codec\" must be a string or an object",
                       where);
    json_object_object_foreach((json_object *)v, key, val) {
        if (strcmp(key, "compression") == 0)
            put_member(req, key, val, false);
        else if (strcmp(key, "driver") != 0)
            return nds_err(NDS_EUNSUPPORTED, "n5: spec for %s: \"codec.%s\" is not supported",
                           where, key);
    }
    return 0;
}

/* schema "dimension_units" ["4nm", ...] as TensorStore writes them: "resolution" + "units". */
static int schema_units(json_object *req, const json_object *v, const char *where) {
    char what[600];
    snprintf(what, sizeof what, "n5: spec for %s: schema dimension_units", where);
    if (!json_object_is_type(v, json_type_array))
        return nds_err(NDS_EINVAL, "%s: expected an array", what);
    json_object *res = json_object_new_array(), *names = json_object_new_array();
    int rc = 0;
    for (size_t i = 0; !rc && i < json_object_array_length(v); i++) {
        json_object *e = json_object_array_get_idx(v, i);
        nds_unit u = {1, ""}; /* null: dimensionless ("units" has an entry for every dimension) */
        if (e && !json_object_is_type(e, json_type_string))
            rc = nds_err(NDS_EINVAL, "%s[%zu]: expected a string or null", what, i);
        else if (e)
            rc = nds_unit_parse(json_object_get_string(e), what, &u);
        if (!rc) {
            {
            char text[32]; /* 15 digits: 0.04 stays 0.04, 0.04 um is 40 nm, not 40.000000000000006 */
            double value = u.size;
            snprintf(text, sizeof text, "%.15g", value);
            json_object_array_add(res, json_object_new_double_s(strtod(text, NULL), text));
        }
            json_object_array_add(names, json_object_new_string(u.name));
        }
    }
    if (!rc) {
        put_member(req, "resolution", res, true);
        put_member(req, "units", names, true);
    } else {
        json_object_put(res), json_object_put(names);
    }
    return rc;
}

static int schema_member(json_object *req, const char *key, const json_object *v,
                         const char *where) {
    if (strcmp(key, "dimension_units") == 0) return schema_units(req, v, where);
    if (strcmp(key, "dtype") == 0) return schema_dtype(req, v, where);
    if (strcmp(key, "domain") == 0) return schema_shape(req, v, "domain", "dimensions", where);
    if (strcmp(key, "chunk_layout") == 0) return schema_chunk_layout(req, v, where);
    if (strcmp(key, "fill_value") == 0) return schema_fill(v, where);
    if (strcmp(key, "codec") == 0) return schema_codec(req, v, where);
    if (strcmp(key, "rank") == 0) return 0; /* implied by the shape; checked through it */
    return nds_err(NDS_EUNSUPPORTED, "n5: spec for %s: schema member \"%.40s\" is not supported",
                   where, key);
}

static int request_build(json_object *req, const json_object *spec, const char *where) {
    json_object *v;
    if (json_object_object_get_ex(spec, "metadata", &v)) {
        if (!json_object_is_type(v, json_type_object))
            return nds_err(NDS_EINVAL, "n5: spec for %s: \"metadata\" must be an object", where);
        json_object_object_foreach(v, key, val) {
            json_object_object_add(req, key, json_object_get(val));
        }
    }
    if (json_object_object_get_ex(spec, "schema", &v)) {
        if (!json_object_is_type(v, json_type_object))
            return nds_err(NDS_EINVAL, "n5: spec for %s: \"schema\" must be an object", where);
        json_object_object_foreach(v, key, val) {
            int rc = schema_member(req, key, val, where);
            if (rc) return rc;
        }
    }
    /* TensorStore also accepts the dtype at the top level of the spec. */
    if (json_object_object_get_ex(spec, "dtype", &v)) return schema_dtype(req, v, where);
    return 0;
}

int nds_n5_request_from_spec(const json_object *spec, const char *where, json_object **out) {
    *out = json_object_new_object();
    if (!*out) return nds_err(NDS_ENOMEM, "n5: out of memory");
    if (!spec) return 0;
    int rc = json_object_is_type(spec, json_type_object)
                 ? request_build(*out, spec, where)
                 : nds_err(NDS_EINVAL, "n5: spec for %s: expected a json object", where);
    if (rc) {
        json_object_put(*out);
        *out = NULL;
    }
    return rc;
}

/* About DEFAULT_BLOCK_BYTES per block: start from the whole shape and halve the longest
 * dimension. */
static void default_block(size_t rank, const uint64_t *shape, size_t itemsize, uint64_t *block) {
    uint64_t target = DEFAULT_BLOCK_BYTES / itemsize;
    for (size_t d = 0; d < rank; d++)
        block[d] = shape[d] == 0 ? 1 : shape[d] > MAX_BLOCK_DIM ? MAX_BLOCK_DIM : shape[d];
    for (;;) {
        uint64_t n;
        if (nds_product_u64(block, rank, &n) && n <= target) return;
        size_t longest = 0;
        for (size_t d = 1; d < rank; d++)
            if (block[d] > block[longest]) longest = d;
        block[longest] = nds_ceil_div(block[longest], 2);
    }
}

static json_object *u64_array(const uint64_t *v, size_t n) {
    json_object *a = json_object_new_array();
    for (size_t i = 0; a && i < n; i++) json_object_array_add(a, json_object_new_uint64(v[i]));
    return a;
}

/* The compression a request member asks for, as a new object: "compression" itself, or the
 * legacy "compressionType" string as {"type": ...}; NULL when req has no such member. */
static json_object *requested_compression(const json_object *req, const char *key) {
    json_object *v;
    if (!json_object_object_get_ex(req, key, &v)) return NULL;
    if (strcmp(key, "compression") == 0) return json_object_get(v);
    json_object *c = json_object_new_object();
    json_object_object_add(c, "type", json_object_get(v));
    return c;
}

/* The compression to create: the request's, normalised, or the default: gzip, which every N5
 * implementation reads (blosc and zstd are plugins in Java), at level 1: fast, and most of
 * level 6's ratio. */
static int create_compression(const json_object *req, const char *doc, json_object **out) {
    json_object *c = requested_compression(req, "compression");
    if (!c) c = requested_compression(req, "compressionType");
    if (c) {
        int rc = nds_n5_compression_parse(c, true, doc, out, NULL);
        json_object_put(c);
        return rc;
    }
    *out = json_object_new_object();
    json_object_object_add(*out, "type", json_object_new_string("gzip"));
    json_object_object_add(*out, "level", json_object_new_int(1));
    json_object_object_add(*out, "useZlib", json_object_new_boolean(false));
    return 0;
}

/* Adds the dataset members of req (with defaults) to out, in N5's customary order, as plain
 * integers and strings whatever the request's spelling (4.0 is written 4). */
static int complete_dataset(const json_object *req, const char *doc, json_object *out) {
    if (!json_object_object_get_ex(req, "dimensions", NULL))
        return nds_err(NDS_EINVAL,
                       "%s: cannot create a dataset without dimensions (give \"metadata\": "
                       "{\"dimensions\": [...]} or \"schema\": {\"domain\": {\"shape\": [...]}})",
                       doc);
    if (!json_object_object_get_ex(req, "dataType", NULL))
        return nds_err(NDS_EINVAL,
                       "%s: cannot create a dataset without a data type (give \"metadata\": "
                       "{\"dataType\": \"uint16\"} or \"schema\": {\"dtype\": \"uint16\"})",
                       doc);
    nds_n5_meta m = {0};
    size_t nblock = 0;
    int rc = parse_dims(req, "dimensions", 0, MAX_DIMENSION, doc, m.shape, &m.rank);
    if (rc == 0) rc = parse_dtype(req, doc, &m);
    if (rc == 0 && json_object_object_get_ex(req, "blockSize", NULL))
        rc = parse_dims(req, "blockSize", 1, MAX_BLOCK_DIM, doc, m.block, &nblock);
    else if (rc == 0) {
        nblock = m.rank;
        default_block(m.rank, m.shape, m.itemsize, m.block);
    }
    json_object *comp = NULL;
    if (rc == 0) rc = create_compression(req, doc, &comp);
    if (rc) return rc;
    json_object_object_add(out, "dimensions", u64_array(m.shape, m.rank));
    json_object_object_add(out, "blockSize", u64_array(m.block, nblock));
    json_object_object_add(out, "dataType", json_object_new_string(nds_dtype_name(m.dtype)));
    json_object_object_add(out, "compression", comp);
    return 0;
}

int nds_n5_request_complete(const json_object *req, const char *where, json_object **out) {
    char doc[600];
    snprintf(doc, sizeof doc, "n5: spec for %s", where);
    *out = json_object_new_object();
    if (!*out) return nds_err(NDS_ENOMEM, "n5: out of memory");
    int rc = complete_dataset(req, doc, *out);
    if (rc == 0) {
        json_object *v;
        json_object_object_add(*out, "n5",
                               json_object_object_get_ex(req, "n5", &v)
                                   ? json_object_get(v)
                                   : json_object_new_string(NDS_N5_VERSION));
        json_object_object_foreach((json_object *)req, key, val)
            if (!nds_n5_is_reserved(key)) json_object_object_add(*out, key, json_object_get(val));
        nds_n5_meta m;
        rc = nds_n5_meta_parse(*out, doc, &m); /* the whole document, before anything is written */
        nds_n5_meta_dispose(&m);
    }
    if (rc) {
        json_object_put(*out);
        *out = NULL;
    }
    return rc;
}

/* ---- checks against an existing dataset ------------------------------------------------------ */

static int mismatch(const json_object *have, const json_object *asked, const char *name,
                    const char *where) {
    char *h = have ? nds_strdup(json_object_to_json_string_ext((json_object *)have,
                                                               JSON_C_TO_STRING_PLAIN))
                   : NULL;
    const char *w = json_object_to_json_string_ext((json_object *)asked, JSON_C_TO_STRING_PLAIN);
    int rc = nds_err(NDS_EMISMATCH,
                     "n5: attributes.json of %s: \"%s\" is %.200s, the spec asks for %.200s", where,
                     name, have ? (h ? h : "?") : "absent", w);
    free(h);
    return rc;
}

static bool dims_equal(const uint64_t *a, size_t na, const uint64_t *b, size_t nb) {
    return na == nb && memcmp(a, b, na * sizeof *a) == 0;
}

/* v as it reads back once written: json-c's printing can change a value's type ("0E" parses as a
 * double and prints as 0), so requested attributes are compared in their stored form. */
static int as_stored(const json_object *v, const char *doc, json_object **out) {
    char *text = nds_json_to_string(v, false);
    if (!text) return nds_err(NDS_ENOMEM, "n5: out of memory");
    int rc = nds_json_parse(text, strlen(text), doc, out);
    free(text);
    return rc;
}

/* Compares one requested member with the stored dataset; *eq set on success. */
static int member_equal(const nds_n5_meta *m, const json_object *doc_json, const char *key,
                        const json_object *asked, const char *doc, bool *eq) {
    uint64_t v[NDS_MAX_RANK];
    size_t n = 0;
    int rc = 0;
    json_object *tmp = json_object_new_object(), *norm = NULL;
    json_object_object_add(tmp, key, json_object_get((json_object *)asked));
    if (strcmp(key, "dimensions") == 0) {
        rc = parse_dims(tmp, key, 0, MAX_DIMENSION, doc, v, &n);
        *eq = rc == 0 && dims_equal(v, n, m->shape, m->rank);
    } else if (strcmp(key, "blockSize") == 0) {
        rc = parse_dims(tmp, key, 1, MAX_BLOCK_DIM, doc, v, &n);
        *eq = rc == 0 && dims_equal(v, n, m->block, m->rank);
    } else if (strcmp(key, "dataType") == 0) {
        nds_n5_meta x = {0};
        rc = parse_dtype(tmp, doc, &x);
        *eq = rc == 0 && x.dtype == m->dtype;
    } else if (strcmp(key, "compression") == 0 || strcmp(key, "compressionType") == 0) {
        json_object *c = requested_compression(tmp, key);
        rc = nds_n5_compression_parse(c, true, doc, &norm, NULL);
        *eq = rc == 0 && nds_json_equal(norm, m->compression);
        json_object_put(c);
    } else {
        json_object *have = NULL, *stored = NULL;
        rc = as_stored(asked, doc, &stored);
        *eq = rc == 0 && json_object_object_get_ex(doc_json, key, &have) &&
              nds_json_equal(have, stored);
        json_object_put(stored);
    }
    json_object_put(norm);
    json_object_put(tmp);
    return rc;
}

int nds_n5_meta_check(const nds_n5_meta *m, const json_object *doc_json, const json_object *req,
                      const char *where) {
    char doc[600];
    snprintf(doc, sizeof doc, "n5: spec for %s", where);
    json_object_object_foreach((json_object *)req, key, val) {
        /* Creation takes "compression" over the legacy "compressionType": so does the check. */
        if (strcmp(key, "compressionType") == 0 &&
            json_object_object_get_ex(req, "compression", NULL))
            continue;
        bool eq = false;
        int rc = member_equal(m, doc_json, key, val, doc, &eq);
        if (rc) return rc;
        if (eq) continue;
        json_object *have = NULL;
        if (strcmp(key, "compression") == 0 || strcmp(key, "compressionType") == 0)
            have = m->compression;
        else
            json_object_object_get_ex(doc_json, key, &have);
        return mismatch(have, val, key, where);
    }
    return 0;
}
