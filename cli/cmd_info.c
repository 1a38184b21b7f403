/* `ndstore info SPEC [--json]`: an array's format, shape, dtype, chunks, codec, fill value, stored
 * chunks and bytes, user attributes, then the format's own detail (format_detail.c: zarr
 * compressor, filters, order, key separator; zarr3 key encoding, dimension names, shard layout and
 * index; N5 compression, block size, axes/units/resolution; precomputed volume type and every
 * scale); --json prints the same as one JSON object (the detail as "details", plus the format's
 * metadata document and the spec that reopens the array).
 * --consolidated (the default for a http(s)://, s3:// or gs:// URL) opens the array with
 * "consolidated": true: from the consolidated metadata of an ancestor group when there is one
 * (docs/formats.md), a read-only snapshot; --no-consolidated reads the array's own metadata.
 * Otherwise (a local store, text output) a last line says when an ancestor's consolidated copy
 * describes the array differently from its own metadata (a stale copy).
 * Omits: per-chunk listings (use `ndstore ls`).
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "ome.h"
#include "strings_io.h"
#include "npy.h"

static const char usage[] =
    "ndstore info SPEC [--json] [--consolidated | --no-consolidated] [--scale S]";

static const char help[] =
    "usage: ndstore info SPEC [--json] [--consolidated | --no-consolidated] [--scale S]\n"
    "\n"
    "Show an array's format, shape, dtype, chunk shape, codec, fill value, stored chunks and bytes, and\n"
    "attributes, then what its format adds: zarr compressor, filters, order and key separator;\n"
    "zarr3 key encoding, dimension names, chunks per shard and the shard index; N5 compression,\n"
    "block size and axes/units/resolution; precomputed volume type, channels and every scale\n"
    "(* marks the open one).\n"
    "SPEC is JSON text, @file.json, or a URL (a bare path is detected from its metadata).\n"
    "\n"
    "  --json       print one JSON object (members: url, format, shape, dtype, chunks, shards and\n"
    "               chunks_per_shard when sharded, codec, fill_value, chunks_stored,\n"
    "               chunks_total, bytes_stored, attributes, details (the format's own, as\n"
    "               above), metadata, spec)\n"
    "  -c, --consolidated     open the array from the consolidated metadata of the nearest\n"
    "               ancestor group that has it (zarr .zmetadata, zarr3 consolidated_metadata;\n"
    "               one read per level searched), falling back to its own metadata; the default\n"
    "               for http(s)://, s3:// and gs:// URLs\n"
    "  -C, --no-consolidated  read the array's own metadata\n"
    "  --scale S    the scale of a precomputed volume to show: its index in scales (0),\n"
    "               its key (8_8_40) or its resolution (8,8,40)\n"
    "  -h, --help   show this help\n";

static const struct option options[] = {
    {"json", no_argument, NULL, 'j'},
    {"consolidated", no_argument, NULL, 'c'},
    {"no-consolidated", no_argument, NULL, 'C'},
    CLI_SCALE_OPTION,
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static json_object *u64_array(size_t n, const uint64_t *v) {
    json_object *arr = json_object_new_array();
    for (size_t i = 0; i < n; i++)
        json_object_array_add(arr, json_object_new_uint64(v[i]));
    return arr;
}

/* What info reports, gathered once for both outputs. */
typedef struct info {
    size_t rank;
    uint64_t shape[NDS_MAX_RANK], chunks[NDS_MAX_RANK];
    int64_t origin[NDS_MAX_RANK]; /* the domain is [origin, origin + shape) */
    nds_unit units[NDS_MAX_RANK]; /* physical size of an index step (size 0: none) */
    double at[NDS_MAX_RANK];      /* where index 0 is, in units[d] (an OME-Zarr translation) */
    bool units_from_ome;          /* the units are the OME-Zarr group's */
    uint64_t inner[NDS_MAX_RANK]; /* read chunks: differ from chunks only for sharded arrays */
    bool sharded;
    bool no_stats; /* stored counts unknown: the store cannot list, or the format cannot see
                    * inside its objects (hashed shards) */
    char no_stats_why[512]; /* the library's message saying which */
    nds_dtype dtype;
    char dtype_label[48]; /* the dtype name, with the unit for datetimes: "datetime64[ns]"; the
                           * NumPy typestring for fixed-width strings: "|S12" */
    size_t elem;          /* bytes per element */
    uint8_t fill[NDS_ELEM_MAX_SIZE];
    char codec[256];
    nds_array_stats stats;
    char *attrs;     /* JSON text, nds_free */
    char *metadata;  /* JSON text, nds_free */
    char *spec;      /* JSON text, nds_free */
    json_object *details; /* the format's own members (cli_details) */
    json_object *vlen_fill; /* string / bytes arrays: the fill element as JSON; else NULL */
} info;

static int gather(nds_array *a, info *in) {
    memset(in, 0, sizeof *in);
    in->rank = nds_array_rank(a);
    nds_array_shape(a, in->shape);
    nds_array_origin(a, in->origin);
    cli_physical phys; /* the array's own units, else its OME-Zarr group's */
    cli_physical_of(a, false, &phys);
    memcpy(in->units, phys.units, sizeof in->units);
    memcpy(in->at, phys.offset, sizeof in->at);
    in->units_from_ome = phys.from_ome;
    nds_array_chunk_shape(a, in->chunks);
    nds_array_read_chunk_shape(a, in->inner);
    in->sharded = memcmp(in->chunks, in->inner, in->rank * sizeof in->inner[0]) != 0;
    in->dtype = nds_array_dtype(a);
    char unit[16];
    in->elem = nds_array_dtype_size(a);
    if (nds_dtype_is_vlen(in->dtype)) { /* "string (|O vlen-utf8)" */
        cli_vlen_label(a, in->dtype_label, sizeof in->dtype_label);
        in->vlen_fill = cli_vlen_fill_json(a);
    } else if (cli_string_typestring(a, in->dtype_label, sizeof in->dtype_label))
        ; /* "|S12", "<U3" */
    else if (cli_time_unit(a, unit, sizeof unit))
        snprintf(in->dtype_label, sizeof in->dtype_label, "%s[%s]", nds_dtype_name(in->dtype), unit);
    else
        snprintf(in->dtype_label, sizeof in->dtype_label, "%s", nds_dtype_name(in->dtype));
    nds_array_fill_element(a, in->fill);
    nds_array_codec_description(a, in->codec, sizeof in->codec);
    int rc = nds_array_stats_get(a, &in->stats);
    if (rc == NDS_EUNSUPPORTED) { /* a store that cannot list (plain http): no counts, the rest stands */
        in->no_stats = true;
        snprintf(in->no_stats_why, sizeof in->no_stats_why, "%s", nds_error_last()->message);
        rc = 0;
    }
    if (rc == 0)
        rc = nds_array_get_attributes(a, &in->attrs);
    if (rc == 0)
        rc = nds_array_metadata(a, &in->metadata);
    if (rc == 0)
        rc = nds_array_spec(a, &in->spec);
    if (rc != 0)
        return cli_fail_nds(rc, "info");
    rc = cli_details(a, &in->details);
    return rc == 0 ? CLI_OK : cli_fail_nds(rc, "info");
}

/* Inner chunks in one shard. */
static uint64_t per_shard(const info *in) {
    uint64_t n = 1;
    for (size_t d = 0; d < in->rank; d++) n *= in->chunks[d] / in->inner[d];
    return n;
}

static void info_dispose(info *in) {
    nds_free(in->attrs);
    nds_free(in->metadata);
    nds_free(in->spec);
    json_object_put(in->details);
    json_object_put(in->vlen_fill);
}

/* Parsed JSON text (big integers kept: cli_json_parse_exact), or the text as a string when it
 * does not parse (never expected). */
static json_object *json_or_string(const char *text) {
    json_object *o = cli_json_parse_exact(text);
    return o ? o : json_object_new_string(text ? text : "");
}

static bool is_string(nds_dtype t) { return t == NDS_BYTES_FIXED || t == NDS_UCS4_FIXED; }

/* The fill value as JSON: a number (cli_element_to_json), or for a fixed-width string the text as
 * NumPy prints it ("b'ab'", "'q'"), which JSON can hold whatever the bytes. */
static json_object *fill_json(const info *in) {
    if (in->vlen_fill) return json_object_get(in->vlen_fill); /* a JSON string (base64: bytes) */
    if (!is_string(in->dtype))
        return cli_element_to_json(in->dtype, in->fill);
    char text[256];
    cli_format_string(in->dtype, in->fill, in->elem, text, sizeof text);
    return json_object_new_string(text);
}

static void print_json(nds_array *a, const info *in, FILE *out) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "url", json_object_new_string(nds_kvstore_url(nds_array_kvstore(a))));
    json_object_object_add(o, "format", json_object_new_string(nds_array_format(a)));
    json_object_object_add(o, "shape", u64_array(in->rank, in->shape));
    json_object *origin = json_object_new_array();
    for (size_t d = 0; d < in->rank; d++)
        json_object_array_add(origin, json_object_new_int64(in->origin[d]));
    json_object_object_add(o, "origin", origin);
    json_object *units = json_object_new_array();
    for (size_t d = 0; d < in->rank; d++) {
        json_object *u = NULL;
        if (in->units[d].size > 0) {
            u = json_object_new_object();
            json_object_object_add(u, "size", json_object_new_double(in->units[d].size));
            json_object_object_add(u, "unit", json_object_new_string(in->units[d].name));
            if (in->at[d] != 0)
                json_object_object_add(u, "offset", json_object_new_double(in->at[d]));
        }
        json_object_array_add(units, u);
    }
    json_object_object_add(o, "units", units);
    if (in->units_from_ome)
        json_object_object_add(o, "units_from", json_object_new_string("ome-zarr group"));
    json_object_object_add(o, "dtype", json_object_new_string(in->dtype_label));
    json_object_object_add(o, "chunks", u64_array(in->rank, in->inner));
    if (in->sharded) {
        json_object_object_add(o, "shards", u64_array(in->rank, in->chunks));
        json_object_object_add(o, "chunks_per_shard", json_object_new_uint64(per_shard(in)));
    }
    json_object_object_add(o, "codec", json_object_new_string(in->codec));
    json_object_object_add(o, "fill_value", fill_json(in));
    if (!in->no_stats) {
        json_object_object_add(o, "chunks_stored", json_object_new_uint64(in->stats.chunks_stored));
        json_object_object_add(o, "chunks_total", json_object_new_uint64(in->stats.chunks_total));
        json_object_object_add(o, "bytes_stored", json_object_new_uint64(in->stats.bytes_stored));
    }
    json_object_object_add(o, "attributes", json_or_string(in->attrs));
    json_object_object_add(o, "details", json_object_get(in->details));
    json_object_object_add(o, "metadata", json_or_string(in->metadata));
    json_object_object_add(o, "spec", json_or_string(in->spec));
    fprintf(out, "%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY |
                                                              JSON_C_TO_STRING_SPACED |
                                                              JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
}

/* "domain:      [1984, 2048) x [0, 64) x ...": the coordinates regions are given in; where the
 * format gives physical units, the domain's physical bounds and the voxel size too. */
static void print_domain(const info *in, FILE *out) {
    fprintf(out, "domain:      ");
    for (size_t d = 0; d < in->rank; d++)
        fprintf(out, "%s[%" PRId64 ", %" PRId64 ")", d ? " x " : "", in->origin[d],
                in->origin[d] + (int64_t)in->shape[d]);
    fprintf(out, "%s\n", in->rank ? "" : "[] (a scalar)");
    bool physical = false;
    for (size_t d = 0; d < in->rank; d++) physical |= in->units[d].size > 0;
    if (!physical) return;
    fprintf(out, "physical:    ");
    for (size_t d = 0; d < in->rank; d++) {
        const nds_unit *u = &in->units[d];
        if (u->size > 0)
            fprintf(out, "%s[%.10g, %.10g) %s", d ? " x " : "",
                    in->at[d] + (double)in->origin[d] * u->size,
                    in->at[d] + (double)(in->origin[d] + (int64_t)in->shape[d]) * u->size,
                    u->name);
        else
            fprintf(out, "%s-", d ? " x " : "");
    }
    fprintf(out, "\nvoxel:       ");
    for (size_t d = 0; d < in->rank; d++) {
        if (in->units[d].size > 0)
            fprintf(out, "%s%.10g %s", d ? " x " : "", in->units[d].size, in->units[d].name);
        else
            fprintf(out, "%s-", d ? " x " : "");
    }
    fprintf(out, "%s\n", in->units_from_ome ? " (from the OME-Zarr group)" : "");
}

static void print_text(nds_array *a, const info *in, FILE *out) {
    char buf[NDS_MAX_RANK * 24], fill[96];
    fprintf(out, "url:         %s\n", nds_kvstore_url(nds_array_kvstore(a)));
    fprintf(out, "format:      %s\n", nds_array_format(a));
    cli_format_list(buf, sizeof buf, in->rank, in->shape);
    fprintf(out, "shape:       %s\n", buf);
    print_domain(in, out);
    fprintf(out, "dtype:       %s\n", in->dtype_label);
    cli_format_list(buf, sizeof buf, in->rank, in->inner);
    fprintf(out, "chunks:      %s\n", buf);
    if (in->sharded) {
        cli_format_list(buf, sizeof buf, in->rank, in->chunks);
        fprintf(out, "shards:      %s (%" PRIu64 " chunks each)\n", buf, per_shard(in));
    }
    fprintf(out, "codec:       %s\n", in->codec);
    if (in->vlen_fill)
        snprintf(fill, sizeof fill, "%.90s",
                 json_object_to_json_string_ext(in->vlen_fill, JSON_C_TO_STRING_PLAIN |
                                                                   JSON_C_TO_STRING_NOSLASHESCAPE));
    else if (is_string(in->dtype))
        cli_format_string(in->dtype, in->fill, in->elem, fill, sizeof fill);
    else
        cli_format_element(in->dtype, in->fill, fill, sizeof fill);
    fprintf(out, "fill value:  %s\n", fill);
    if (in->no_stats)
        fprintf(out, "stored:      unknown (%s)\n",
                in->no_stats_why[0] ? in->no_stats_why : "the store cannot list its keys");
    else
        fprintf(out, "stored:      %" PRIu64 " of %" PRIu64 " %s, %" PRIu64 " bytes\n",
                in->stats.chunks_stored, in->stats.chunks_total, in->sharded ? "shards" : "chunks",
                in->stats.bytes_stored);
    json_object *attrs = cli_json_parse_exact(in->attrs);
    bool empty = !attrs || (json_object_is_type(attrs, json_type_object) &&
                            json_object_object_length(attrs) == 0);
    fprintf(out, "attributes:  %s\n",
            !empty ? json_object_to_json_string_ext(attrs, JSON_C_TO_STRING_SPACED |
                                                               JSON_C_TO_STRING_NOSLASHESCAPE)
                   : (attrs || !in->attrs ? "{}" : in->attrs));
    json_object_put(attrs);
    cli_details_print(a, in->details, out);
}

int cli_info_print(nds_array *a, bool as_json, FILE *out) {
    info in;
    int rc = gather(a, &in);
    if (rc == CLI_OK) {
        if (as_json)
            print_json(a, &in, out);
        else
            print_text(a, &in, out);
    }
    info_dispose(&in);
    return rc;
}

/* Remote stores, where each metadata read is a request. */
static bool is_remote(const char *url) {
    static const char *const schemes[] = {"http://", "https://", "s3://", "gs://"};
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++)
        if (strncmp(url, schemes[i], strlen(schemes[i])) == 0)
            return true;
    return false;
}

/* SPEC (JSON text or a URL; @file is left as it is) with "consolidated": true added, unless it
 * says otherwise; asked < 0: only for a remote URL. *out is NULL when SPEC stays as it is. */
static int consolidated_spec(const char *text, int asked, char **out) {
    *out = NULL;
    json_object *spec = NULL;
    char url[4096], fmt[64];
    if (text[0] == '@' || asked == 0)
        return CLI_OK;
    if (text[strspn(text, " \t\r\n")] == '{') {
        if (asked < 0 || cli_json_parse(text, "SPEC", &spec) != CLI_OK)
            return asked < 0 ? CLI_OK : CLI_FAIL;
    } else {
        if (cli_kvstore_url(text, url, sizeof url, fmt, sizeof fmt) != CLI_OK)
            return CLI_FAIL;
        if (asked < 0 && !is_remote(url))
            return CLI_OK;
        spec = json_object_new_object();
        json_object_object_add(spec, "kvstore", json_object_new_string(url));
        if (fmt[0])
            json_object_object_add(spec, "driver", json_object_new_string(fmt));
    }
    if (json_object_is_type(spec, json_type_object) &&
        !json_object_object_get_ex(spec, "consolidated", NULL))
        json_object_object_add(spec, "consolidated", json_object_new_boolean(1));
    *out = strdup(json_object_to_json_string_ext(spec, JSON_C_TO_STRING_PLAIN));
    json_object_put(spec);
    return *out ? CLI_OK : cli_fail("out of memory");
}

/* Whether two JSON texts hold the same value (members in any order). */
static bool same_json(const char *x, const char *y) {
    json_object *a = json_tokener_parse(x), *b = json_tokener_parse(y);
    bool same = a && b && json_object_equal(a, b);
    json_object_put(a);
    json_object_put(b);
    return same;
}

/* After an info of a's own metadata (text): when an ancestor group's consolidated copy describes
 * the array differently, says so (the copy is stale). Opening from the copy costs one read per
 * directory level; an array no copy lists opens from its own metadata again, the same document. */
static void note_stale_copy(nds_array *a, FILE *out) {
    char *spec = NULL, *own = NULL, *theirs = NULL;
    nds_array *c = NULL;
    json_object *s = NULL;
    if (nds_array_spec(a, &spec) == 0 && (s = json_tokener_parse(spec)) != NULL) {
        json_object_object_add(s, "consolidated", json_object_new_boolean(1));
        nds_open_options o = NDS_OPEN_OPTIONS_INIT;
        o.mode = NDS_OPEN_EXISTING;
        if (nds_array_open(&c, json_object_to_json_string(s), &o) == 0 &&
            nds_array_metadata(a, &own) == 0 && nds_array_metadata(c, &theirs) == 0 &&
            !same_json(own, theirs))
            fprintf(out, "consolidated: an ancestor group's consolidated metadata describes this "
                         "array differently (stale: `ndstore group consolidate` refreshes it)\n");
    }
    nds_error_clear(); /* no copy, or one that does not open: nothing to say here */
    json_object_put(s);
    nds_array_free(c);
    nds_free(spec);
    nds_free(own);
    nds_free(theirs);
}

/* Opens text, or consolidated (text with "consolidated": true) when not NULL. The automatic
 * consolidated open of a remote URL (asked < 0) falls back to the array's own metadata when its
 * format has no consolidated metadata (precomputed, N5): `info precomputed://https://host/vol`
 * must work as `info file:///vol` does. */
static int open_for_info(const char *text, const char *consolidated, int asked, nds_array **out) {
    if (!consolidated || asked >= 0)
        return cli_open_array(consolidated ? consolidated : text, NULL, 0, out);
    nds_open_options o = NDS_OPEN_OPTIONS_INIT;
    nds_error_clear();
    int st = nds_array_open(out, consolidated, &o);
    if (st == NDS_EUNSUPPORTED)
        return cli_open_array(text, NULL, 0, out);
    return st == 0 ? CLI_OK : cli_fail_nds(st, text);
}

int cli_cmd_info(int argc, char **argv) {
    bool as_json = false;
    int consolidated = -1, c;
    const char *scale = NULL;
    cli_getopt_reset();
    while ((c = getopt_long(argc, argv, ":hjcC", options, NULL)) != -1) {
        if (c == 'h')
            return cli_help(help);
        if (c == 'c' || c == 'C')
            consolidated = c == 'c';
        else if (c == 'j')
            as_json = true;
        else if (c == CLI_OPT_SCALE)
            scale = optarg;
        else
            return cli_bad_option(usage, argv, c);
    }
    if (argc - optind != 1)
        return cli_usage(usage, argc - optind == 0 ? "missing SPEC" : "too many arguments");
    nds_array *a = NULL;
    char *spec = NULL, *scaled = NULL;
    int rc = cli_require_spec("SPEC", argv[optind]);
    if (rc == CLI_OK)
        rc = cli_scale_spec(argv[optind], scale, &scaled); /* a scale's spec is JSON: kept as is */
    const char *text = scaled ? scaled : argv[optind];
    if (rc == CLI_OK && !scaled)
        rc = consolidated_spec(text, consolidated, &spec);
    if (rc == CLI_OK)
        rc = open_for_info(text, spec, consolidated, &a);
    if (rc == CLI_OK)
        rc = cli_info_print(a, as_json, stdout);
    if (rc == CLI_OK && !spec && !as_json && consolidated != 0 &&
        !is_remote(nds_kvstore_url(nds_array_kvstore(a))))
        note_stale_copy(a, stdout); /* read from its own metadata: compare with a copy */
    nds_array_free(a);
    free(spec);
    free(scaled);
    return rc;
}
