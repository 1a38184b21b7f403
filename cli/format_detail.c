/* Format-specific detail of an open array, for `ndstore info` (text and the "details" member of
 * --json) and the one-line summaries of `ndstore ls`.
 *
 * Built from the public API only: the format's metadata document (nds_array_metadata), the spec
 * that reopens the array (nds_array_spec: it names the open precomputed scale) and the grid
 * getters. The details object per format (nds_array_format): zarr    {compressor, filters, order,
 * dimension_separator} zarr3   {codecs, chunk_key_encoding {name, separator}, dimension_names,
 *            sharding {chunk_shape, chunks_per_shard, index_location, index_codecs, codecs} when
 * sharded} n5      {compression, block_size, and axes, units, resolution, pixelResolution,
 *            downsamplingFactors when the attributes have them}
 *   neuroglancer_precomputed {type, data_type, num_channels, scale_key (the open scale),
 *            scales [{key, size, voxel_offset, resolution, chunk_sizes, encoding,
 *            compressed_segmentation_block_size (when present), sharding (null when unsharded),
 * open}]} Other formats get {}. Omits: validation (the library validated the document when it
 * opened the array; a member missing here is left out or shown as its default). Threading: none.
 * Ownership: cli_details returns a new reference; text goes to caller buffers.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"

/* ---- small JSON helpers
 * ---------------------------------------------------------------------------- */

/* Member key of o (borrowed), NULL when o is not an object or has no such member. */
static json_object *get(json_object *o, const char *key) {
    json_object *v = NULL;
    if (!o || !json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v))
        return NULL;
    return v;
}

/* Entries of an array; 0 for anything else (json-c asserts on a non-array). */
static size_t arr_len(json_object *v) {
    return json_object_is_type(v, json_type_array) ? json_object_array_length(v) : 0;
}

static const char *str_or(json_object *v, const char *dflt) {
    return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : dflt;
}

/* Adds a new reference to v (JSON null when v is NULL). */
static void add_ref(json_object *dst, const char *key, json_object *v) {
    json_object_object_add(dst, key, json_object_get(v));
}

/* A bounded text buffer: appends never overflow, the text is cut at cap - 1. */
typedef struct text {
    char *p;
    size_t cap, len;
} text;

static void put(text *t, const char *fmt, ...) CLI_PRINTF(2, 3);
static void put(text *t, const char *fmt, ...) {
    if (t->len + 1 >= t->cap) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->p + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    if (n > 0) t->len = t->len + (size_t)n < t->cap ? t->len + (size_t)n : t->cap - 1;
}

/* v as one line of JSON with a space after ',' and ':' ({"id": "zstd", "level": 1}, [8, 8, 4]). */
static void render(text *t, json_object *v) {
    if (json_object_is_type(v, json_type_array)) {
        put(t, "[");
        for (size_t i = 0; i < arr_len(v); i++) {
            put(t, i ? ", " : "");
            render(t, json_object_array_get_idx(v, i));
        }
        put(t, "]");
    } else if (json_object_is_type(v, json_type_object)) {
        bool first = true;
        put(t, "{");
        json_object_object_foreach(v, key, val) {
            put(t, "%s\"%s\": ", first ? "" : ", ", key);
            render(t, val);
            first = false;
        }
        put(t, "}");
    } else {
        put(t, "%s",
            json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN |
                                                  JSON_C_TO_STRING_NOSLASHESCAPE));
    }
}

/* A zarr v3 codec list as "bytes(endian=little) | crc32c". */
static void render_codecs(text *t, json_object *codecs) {
    for (size_t i = 0; i < arr_len(codecs); i++) {
        json_object *c = json_object_array_get_idx(codecs, i);
        json_object *cfg = get(c, "configuration");
        put(t, "%s%s", i ? " | " : "",
            str_or(json_object_is_type(c, json_type_string) ? c : get(c, "name"), "?"));
        if (!json_object_is_type(cfg, json_type_object) || json_object_object_length(cfg) == 0)
            continue;
        bool first = true;
        put(t, "(");
        json_object_object_foreach(cfg, key, val) {
            put(t, "%s%s=", first ? "" : ", ", key);
            if (json_object_is_type(val, json_type_string))
                put(t, "%s", json_object_get_string(val));
            else
                render(t, val);
            first = false;
        }
        put(t, ")");
    }
}

/* Prints "label:      value" with the value column where info's other lines have it. */
static void line(FILE *out, const char *label, const char *value) {
    fprintf(out, "%-12s %s\n", label, value);
}

static void line_json(FILE *out, const char *label, json_object *v) {
    char buf[2048];
    text t = {buf, sizeof buf, 0};
    buf[0] = '\0';
    render(&t, v);
    line(out, label, buf);
}

/* ---- zarr v2
 * ------------------------------------------------------------------------------------- */

static json_object *zarr2_details(json_object *meta) {
    json_object *d = json_object_new_object();
    add_ref(d, "compressor", get(meta, "compressor"));
    add_ref(d, "filters", get(meta, "filters"));
    json_object_object_add(d, "order", json_object_new_string(str_or(get(meta, "order"), "C")));
    json_object_object_add(d, "dimension_separator",
                           json_object_new_string(str_or(get(meta, "dimension_separator"), ".")));
    return d;
}

/* The key of chunk (0, ..., 0): "c/0/0" (prefix "c") or "0.0" (no prefix). */
static void example_key(text *t, size_t rank, const char *prefix, const char *sep) {
    put(t, "%s", prefix);
    for (size_t d = 0; d < rank; d++) put(t, "%s0", d == 0 && !prefix[0] ? "" : sep);
    if (rank == 0 && !prefix[0]) put(t, "0");
}

static void zarr2_print(nds_array *a, json_object *d, FILE *out) {
    json_object *comp = get(d, "compressor"), *filters = get(d, "filters");
    const char *sep = str_or(get(d, "dimension_separator"), ".");
    if (comp)
        line_json(out, "compressor:", comp);
    else
        line(out, "compressor:", "none");
    if (filters && arr_len(filters) > 0)
        line_json(out, "filters:", filters);
    else
        line(out, "filters:", "none");
    line(out, "order:", str_or(get(d, "order"), "C"));
    char buf[256];
    text t = {buf, sizeof buf, 0};
    put(&t, "separator \"%s\" (", sep);
    example_key(&t, nds_array_rank(a), "", sep);
    put(&t, ")");
    line(out, "chunk keys:", buf);
}

/* ---- zarr v3
 * ------------------------------------------------------------------------------------- */

static const char *codec_name(json_object *c) {
    return str_or(json_object_is_type(c, json_type_string) ? c : get(c, "name"), "");
}

/* The sharding_indexed entry of a codec list, or NULL. */
static json_object *sharding_codec(json_object *codecs) {
    for (size_t i = 0; codecs && i < arr_len(codecs); i++) {
        json_object *c = json_object_array_get_idx(codecs, i);
        if (strcmp(codec_name(c), "sharding_indexed") == 0) return c;
    }
    return NULL;
}

static json_object *z3_sharding(json_object *meta, json_object *shard_codec) {
    json_object *cfg = get(shard_codec, "configuration"), *inner = get(cfg, "chunk_shape");
    json_object *outer = get(get(get(meta, "chunk_grid"), "configuration"), "chunk_shape");
    json_object *s = json_object_new_object(), *per = json_object_new_array();
    size_t n = inner ? arr_len(inner) : 0;
    for (size_t i = 0; outer && n == arr_len(outer) && i < n; i++) {
        uint64_t o = (uint64_t)json_object_get_int64(json_object_array_get_idx(outer, i));
        uint64_t c = (uint64_t)json_object_get_int64(json_object_array_get_idx(inner, i));
        json_object_array_add(per, json_object_new_uint64(c ? o / c : 0));
    }
    add_ref(s, "chunk_shape", inner);
    json_object_object_add(s, "chunks_per_shard", per);
    json_object_object_add(s, "index_location",
                           json_object_new_string(str_or(get(cfg, "index_location"), "end")));
    add_ref(s, "index_codecs", get(cfg, "index_codecs"));
    add_ref(s, "codecs", get(cfg, "codecs"));
    return s;
}

static json_object *zarr3_details(json_object *meta) {
    json_object *d = json_object_new_object(), *cke = get(meta, "chunk_key_encoding");
    const char *name = str_or(get(cke, "name"), "default");
    const char *sep =
        str_or(get(get(cke, "configuration"), "separator"), strcmp(name, "v2") == 0 ? "." : "/");
    json_object *k = json_object_new_object();
    json_object_object_add(k, "name", json_object_new_string(name));
    json_object_object_add(k, "separator", json_object_new_string(sep));
    add_ref(d, "codecs", get(meta, "codecs"));
    json_object_object_add(d, "chunk_key_encoding", k);
    add_ref(d, "dimension_names", get(meta, "dimension_names"));
    json_object *sh = sharding_codec(get(meta, "codecs"));
    if (sh) json_object_object_add(d, "sharding", z3_sharding(meta, sh));
    return d;
}

static void zarr3_print(nds_array *a, json_object *d, FILE *out) {
    char buf[2048];
    text t = {buf, sizeof buf, 0};
    json_object *k = get(d, "chunk_key_encoding"), *names = get(d, "dimension_names");
    const char *name = str_or(get(k, "name"), "default"), *sep = str_or(get(k, "separator"), "/");
    put(&t, "%s, separator \"%s\" (", name, sep);
    example_key(&t, nds_array_rank(a), strcmp(name, "default") == 0 ? "c" : "", sep);
    put(&t, ")");
    line(out, "chunk keys:", buf);
    if (names) line_json(out, "dim names:", names);
    json_object *sh = get(d, "sharding");
    if (!sh) return;
    t.len = 0;
    render(&t, get(sh, "chunks_per_shard"));
    put(&t, " inner chunks of ");
    render(&t, get(sh, "chunk_shape"));
    line(out, "per shard:", buf);
    t.len = 0;
    put(&t, "at the %s, ", str_or(get(sh, "index_location"), "end"));
    render_codecs(&t, get(sh, "index_codecs"));
    line(out, "shard index:", buf);
    t.len = 0;
    render_codecs(&t, get(sh, "codecs"));
    line(out, "inner codec:", buf);
}

/* ---- N5
 * ------------------------------------------------------------------------------------------ */

/* Attributes that describe the grid's physical meaning, shown when present. */
static const char *const n5_spatial[] = {"axes", "units", "resolution", "pixelResolution",
                                         "downsamplingFactors"};
#define N_N5_SPATIAL (sizeof n5_spatial / sizeof n5_spatial[0])

/* attrs: the user attributes (nds_array_get_attributes), where N5 keeps the spatial members. */
static json_object *n5_details(json_object *meta, json_object *attrs) {
    json_object *d = json_object_new_object();
    add_ref(d, "compression", get(meta, "compression"));
    add_ref(d, "block_size", get(meta, "blockSize"));
    for (size_t i = 0; i < N_N5_SPATIAL; i++)
        if (get(attrs, n5_spatial[i])) add_ref(d, n5_spatial[i], get(attrs, n5_spatial[i]));
    return d;
}

static void n5_print(json_object *d, FILE *out) {
    line_json(out, "compression:", get(d, "compression"));
    line_json(out, "block size:", get(d, "block_size"));
    for (size_t i = 0; i < N_N5_SPATIAL; i++) {
        char label[32];
        snprintf(label, sizeof label, "%s:", n5_spatial[i]);
        if (get(d, n5_spatial[i])) line_json(out, label, get(d, n5_spatial[i]));
    }
}

/* ---- neuroglancer precomputed
 * -------------------------------------------------------------------- */

static json_object *pc_scale(json_object *s, const char *open_key) {
    static const char *const copied[] = {"key",
                                         "size",
                                         "voxel_offset",
                                         "resolution",
                                         "chunk_sizes",
                                         "encoding",
                                         "compressed_segmentation_block_size"};
    json_object *o = json_object_new_object();
    for (size_t i = 0; i < sizeof copied / sizeof copied[0]; i++) {
        json_object *v = get(s, copied[i]);
        if (!v && strcmp(copied[i], "voxel_offset") == 0) {
            v = json_object_new_array();
            for (int d = 0; d < 3; d++) json_object_array_add(v, json_object_new_int(0));
            json_object_object_add(o, copied[i], v);
        } else if (v) {
            add_ref(o, copied[i], v);
        }
    }
    add_ref(o, "sharding", get(s, "sharding"));
    const char *key = str_or(get(s, "key"), "");
    json_object_object_add(o, "open",
                           json_object_new_boolean(open_key && strcmp(key, open_key) == 0));
    return o;
}

static json_object *pc_details(json_object *meta, json_object *spec) {
    json_object *d = json_object_new_object(), *scales = json_object_new_array();
    const char *open_key = str_or(get(get(spec, "scale_metadata"), "key"), NULL);
    add_ref(d, "type", get(meta, "type"));
    add_ref(d, "data_type", get(meta, "data_type"));
    add_ref(d, "num_channels", get(meta, "num_channels"));
    add_ref(d, "scale_key", get(get(spec, "scale_metadata"), "key"));
    json_object *in = get(meta, "scales");
    for (size_t i = 0; in && i < arr_len(in); i++)
        json_object_array_add(scales, pc_scale(json_object_array_get_idx(in, i), open_key));
    json_object_object_add(d, "scales", scales);
    return d;
}

/* "sharded(hash=identity, preshift_bits=2, ...)" as describe_codec words it, or "unsharded". */
static void pc_sharding_text(text *t, json_object *sh) {
    if (!sh || !json_object_is_type(sh, json_type_object)) {
        put(t, "unsharded");
        return;
    }
    put(t,
        "sharded(hash=%s, preshift_bits=%" PRId64 ", minishard_bits=%" PRId64
        ", shard_bits=%" PRId64 ", minishard_index=%s, data=%s)",
        str_or(get(sh, "hash"), "?"), json_object_get_int64(get(sh, "preshift_bits")),
        json_object_get_int64(get(sh, "minishard_bits")),
        json_object_get_int64(get(sh, "shard_bits")),
        str_or(get(sh, "minishard_index_encoding"), "raw"),
        str_or(get(sh, "data_encoding"), "raw"));
}

/* The columns of one scale's row in info's table. */
enum { PC_COLS = 9 };

/* "nm [15872, 16384) x [-128, 128) x [4000, 4320)": a scale's bounds in physical units. */
static void pc_physical(text *t, json_object *s) {
    json_object *size = get(s, "size"), *off = get(s, "voxel_offset"), *res = get(s, "resolution");
    if (!size || !res || arr_len(size) != 3 || arr_len(res) != 3 || (off && arr_len(off) != 3))
        return;
    put(t, "nm");
    for (size_t d = 0; d < 3; d++) {
        double r = json_object_get_double(json_object_array_get_idx(res, d));
        double o = off ? (double)json_object_get_int64(json_object_array_get_idx(off, d)) : 0;
        double n = (double)json_object_get_int64(json_object_array_get_idx(size, d));
        put(t, "%s[%.10g, %.10g)", d ? " x " : " ", o * r, (o + n) * r);
    }
}

static void pc_row(json_object *s, size_t index, char cols[PC_COLS][512]) {
    text t[PC_COLS];
    for (int c = 0; c < PC_COLS; c++) {
        t[c] = (text){cols[c], sizeof cols[c], 0};
        cols[c][0] = '\0';
    }
    put(&t[0], "%s %zu", json_object_get_boolean(get(s, "open")) ? "*" : " ", index);
    put(&t[1], "%s", str_or(get(s, "key"), "?"));
    static const char *const label[] = {"size", "offset", "resolution"};
    static const char *const member[] = {"size", "voxel_offset", "resolution"};
    for (int c = 0; c < 3; c++) {
        put(&t[2 + c], "%s ", label[c]);
        render(&t[2 + c], get(s, member[c]));
    }
    json_object *cs = get(s, "chunk_sizes");
    put(&t[5], "chunk%s ", cs && arr_len(cs) > 1 ? "s" : "");
    for (size_t i = 0; cs && i < arr_len(cs); i++) {
        put(&t[5], i ? " " : "");
        render(&t[5], json_object_array_get_idx(cs, i));
    }
    put(&t[6], "%s", str_or(get(s, "encoding"), "?"));
    if (get(s, "compressed_segmentation_block_size")) {
        put(&t[6], " block ");
        render(&t[6], get(s, "compressed_segmentation_block_size"));
    }
    pc_sharding_text(&t[7], get(s, "sharding"));
    pc_physical(&t[8], s);
}

static void pc_print(json_object *d, FILE *out) {
    char buf[256];
    int64_t nc = json_object_get_int64(get(d, "num_channels"));
    snprintf(buf, sizeof buf, "%s, %s, %" PRId64 " channel%s", str_or(get(d, "type"), "?"),
             str_or(get(d, "data_type"), "?"), nc, nc == 1 ? "" : "s");
    line(out, "volume:", buf);
    json_object *scales = get(d, "scales");
    size_t n = scales ? arr_len(scales) : 0;
    snprintf(buf, sizeof buf, "%zu (* = this array)", n);
    line(out, "scales:", buf);
    char(*rows)[PC_COLS][512] = n ? calloc(n, sizeof *rows) : NULL; /* aligned: two passes */
    size_t width[PC_COLS] = {0};
    if (!rows) return;
    for (size_t i = 0; i < n; i++) {
        pc_row(json_object_array_get_idx(scales, i), i, rows[i]);
        for (int c = 0; c < PC_COLS; c++)
            width[c] = strlen(rows[i][c]) > width[c] ? strlen(rows[i][c]) : width[c];
    }
    for (size_t i = 0; i < n; i++) {
        fprintf(out, " ");
        for (int c = 0; c + 1 < PC_COLS; c++) fprintf(out, " %-*s ", (int)width[c], rows[i][c]);
        fprintf(out, " %s\n", rows[i][PC_COLS - 1]);
    }
    free(rows);
}

/* ---- entry points
 * -------------------------------------------------------------------------------- */

static json_object *parse_or_null(int rc, char *textp) {
    json_object *o = rc == 0 && textp ? json_tokener_parse(textp) : NULL;
    nds_free(textp);
    return o;
}

static json_object *details_of(const char *fmt, json_object *meta, json_object *spec,
                               json_object *attrs) {
    if (strcmp(fmt, "zarr") == 0) return zarr2_details(meta);
    if (strcmp(fmt, "zarr3") == 0) return zarr3_details(meta);
    if (strcmp(fmt, "n5") == 0) return n5_details(meta, attrs);
    if (strcmp(fmt, "neuroglancer_precomputed") == 0) return pc_details(meta, spec);
    return json_object_new_object();
}

int cli_details(nds_array *a, json_object **out) {
    char *mtext = NULL, *stext = NULL, *atext = NULL;
    *out = NULL;
    nds_error_clear();
    int rc = nds_array_metadata(a, &mtext);
    json_object *meta = parse_or_null(rc, mtext), *spec = NULL, *attrs = NULL;
    if (rc == 0) rc = nds_array_spec(a, &stext);
    spec = parse_or_null(rc, stext);
    if (rc == 0) rc = nds_array_get_attributes(a, &atext);
    attrs = parse_or_null(rc, atext);
    if (rc == 0 && (!meta || !spec))
        rc = NDS_EFORMAT; /* the library printed something json-c cannot read: never expected */
    if (rc == 0) *out = details_of(nds_array_format(a), meta, spec, attrs);
    json_object_put(meta);
    json_object_put(spec);
    json_object_put(attrs);
    return rc;
}

void cli_details_print(nds_array *a, json_object *details, FILE *out) {
    const char *fmt = nds_array_format(a);
    if (strcmp(fmt, "zarr") == 0)
        zarr2_print(a, details, out);
    else if (strcmp(fmt, "zarr3") == 0)
        zarr3_print(a, details, out);
    else if (strcmp(fmt, "n5") == 0)
        n5_print(details, out);
    else if (strcmp(fmt, "neuroglancer_precomputed") == 0)
        pc_print(details, out);
}

/* The stored encoding in a word or two ("zstd", "blosc+crc32c", "raw") for ls. */
static void z3_short_codec(text *t, json_object *codecs, bool *any) {
    for (size_t i = 0; codecs && i < arr_len(codecs); i++) {
        json_object *c = json_object_array_get_idx(codecs, i);
        const char *name = codec_name(c);
        if (strcmp(name, "sharding_indexed") == 0)
            z3_short_codec(t, get(get(c, "configuration"), "codecs"), any);
        else if (strcmp(name, "bytes") != 0 && strcmp(name, "transpose") != 0) {
            put(t, "%s%s", *any ? "+" : "", name);
            *any = true;
        }
    }
}

static json_object *pc_open_scale(json_object *d) {
    json_object *scales = get(d, "scales");
    for (size_t i = 0; scales && i < arr_len(scales); i++)
        if (json_object_get_boolean(get(json_object_array_get_idx(scales, i), "open")))
            return json_object_array_get_idx(scales, i);
    return NULL;
}

static void short_codec(text *t, const char *fmt, json_object *d) {
    bool any = false;
    if (strcmp(fmt, "zarr") == 0) {
        json_object *filters = get(d, "filters");
        put(t, "%s", str_or(get(get(d, "compressor"), "id"), "raw"));
        if (filters && arr_len(filters) > 0) put(t, " with filters");
    } else if (strcmp(fmt, "zarr3") == 0) {
        z3_short_codec(t, get(d, "codecs"), &any);
        if (!any) put(t, "raw");
    } else if (strcmp(fmt, "n5") == 0) {
        put(t, "%s", str_or(get(get(d, "compression"), "type"), "?"));
    } else if (strcmp(fmt, "neuroglancer_precomputed") == 0) {
        put(t, "%s", str_or(get(pc_open_scale(d), "encoding"), "?"));
    }
}

void cli_details_summary(nds_array *a, json_object *d, char *buf, size_t cap) {
    text t = {buf, cap, 0};
    char list[NDS_MAX_RANK * 24];
    const char *fmt = nds_array_format(a);
    size_t rank = nds_array_rank(a);
    uint64_t shape[NDS_MAX_RANK], chunks[NDS_MAX_RANK], inner[NDS_MAX_RANK];
    nds_array_shape(a, shape);
    nds_array_chunk_shape(a, chunks);
    nds_array_read_chunk_shape(a, inner);
    buf[0] = '\0';
    if (strcmp(fmt, "neuroglancer_precomputed") ==
        0) { /* "2 scales [8_8_8, 16_16_16]; 8_8_8: ..." */
        json_object *scales = get(d, "scales");
        size_t n = arr_len(scales);
        put(&t, "%zu scale%s [", n, n == 1 ? "" : "s");
        for (size_t i = 0; i < n; i++)
            put(&t, "%s%s", i ? ", " : "",
                str_or(get(json_object_array_get_idx(scales, i), "key"), "?"));
        put(&t, "]; %s: ", str_or(get(pc_open_scale(d), "key"), "?"));
    }
    cli_format_list(list, sizeof list, rank, shape);
    put(&t, "%s %s", nds_dtype_name(nds_array_dtype(a)), list);
    int64_t origin[NDS_MAX_RANK];
    nds_array_origin(a, origin);
    bool offset = false;
    for (size_t d = 0; d < rank; d++) offset |= origin[d] != 0;
    for (size_t d = 0; offset && d < rank; d++) /* " at [1984, -16, 100, 0]": the domain's start */
        put(&t, "%s%" PRId64 "%s", d ? ", " : " at [", origin[d], d + 1 == rank ? "]" : "");
    cli_format_list(list, sizeof list, rank, inner);
    put(&t, ", chunks %s", list);
    json_object *pc_sharding = get(pc_open_scale(d), "sharding");
    if (memcmp(chunks, inner, rank * sizeof chunks[0]) != 0) {
        put(&t, ", sharded ");
        for (size_t i = 0; i < rank; i++) put(&t, "%s%" PRIu64, i ? "x" : "", chunks[i] / inner[i]);
        put(&t, " per shard");
    } else if (pc_sharding) { /* shards that are not boxes of the grid (hashed) */
        put(&t, ", sharded (hash %s)", str_or(get(pc_sharding, "hash"), "?"));
    }
    put(&t, ", ");
    short_codec(&t, fmt, d);
}
