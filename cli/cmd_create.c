/* `ndstore create SPEC [--shape ..] [--chunks ..] [--dtype T] [--codec C] [--fill V] [--delete-existing]`
 *
 * Builds a spec with "create": true and the options in its "schema" (cli_spec_build), opens it (the mode
 * comes from the spec), and prints one line describing what was created.
 * Omits: attributes (use `ndstore attrs --set` afterwards).
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "npy.h"
#include "strings_io.h"

static const char usage[] =
    "ndstore create SPEC [--shape N,..] [--chunks N,..] [--dtype T] [--codec C] [--fill V] "
    "[--delete-existing]";

static const char help[] =
    "usage: ndstore create SPEC [options]\n"
    "\n"
    "Create an array. SPEC is JSON text, @file.json, or a URL: file:///d/a.zarr|zarr:, memory://x|zarr:,\n"
    "or a bare path (zarr). Options go into the spec's \"schema\" and override what it holds.\n"
    "\n"
    "  --shape N,..        array shape, e.g. 1000,2000\n"
    "  --chunks N,..       chunk shape, e.g. 100,200\n"
    "  --dtype T           bool, int8..int64, uint8..uint64, float16, bfloat16, float32, float64,\n"
    "                      complex64, complex128; zarr v3 also float8_e4m3, float8_e5m2,\n"
    "                      float8_e4m3fn, float8_e4m3fnuz, float8_e5m2fnuz, float8_e4m3b11fnuz,\n"
    "                      float8_e8m0fnu, float4_e2m1fn, int4, uint4, int2, uint2;\n"
    "                      datetime64[unit], timedelta64[unit] (unit as NumPy's: ns, s, 10s, ...);\n"
    "                      strings: \"<U5\" / \"|S8\" (NumPy fixed-width; zarr v2), string and\n"
    "                      bytes (variable length; zarr v2 as |O vlen-utf8 / vlen-bytes, zarr v3)\n"
    "  --codec C           none, zstd[:level], blosc[:cname[:clevel[:shuffle]]], gzip[:level],\n"
    "                      zlib[:level], bz2[:level], lz4[:acceleration]\n"
    "  --fill V            fill value: a number, true/false, NaN, Infinity, [re, im]\n"
    "  --delete-existing   delete an array already there instead of failing\n"
    "  -h, --help          show this help\n"
    "\n"
    "Example: ndstore create /tmp/a.zarr --shape 1000,1000 --chunks 100,100 --dtype uint16 --codec zstd:3\n";

enum { OPT_SHAPE = 256, OPT_CHUNKS, OPT_DTYPE, OPT_CODEC, OPT_FILL, OPT_DELETE };

static const struct option options[] = {
    {"shape", required_argument, NULL, OPT_SHAPE},
    {"chunks", required_argument, NULL, OPT_CHUNKS},
    {"dtype", required_argument, NULL, OPT_DTYPE},
    {"codec", required_argument, NULL, OPT_CODEC},
    {"fill", required_argument, NULL, OPT_FILL},
    {"delete-existing", no_argument, NULL, OPT_DELETE},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* A string dtype as the schema takes it into buf: NumPy's fixed-width typestrings ("<U5", ">U5",
 * "|S8"; "U5" and "S8" get NumPy's default order mark), or "string" / "bytes". NULL if arg is
 * none; the format checks the width and refuses what it cannot store, naming itself. */
static const char *string_dtype(const char *arg, char *buf, size_t cap) {
    if (strcmp(arg, "string") == 0 || strcmp(arg, "bytes") == 0) return arg;
    const char *p = strchr("<>|", arg[0]) && arg[0] ? arg + 1 : arg;
    if ((p[0] != 'S' && p[0] != 'U') || p[1] < '0' || p[1] > '9' ||
        strspn(p + 1, "0123456789") != strlen(p + 1))
        return NULL;
    snprintf(buf, cap, "%c%s", p != arg ? arg[0] : p[0] == 'S' ? '|' : '<', p);
    return buf;
}

/* Applies one option to the schema; CLI_USAGE (printed) for a bad value. */
static int apply_option(int c, const char *arg, cli_schema *s, bool *delete_existing) {
    static char typestring[32];
    char err[256];
    switch (c) {
    case OPT_SHAPE:
        if (cli_parse_u64_list(arg, s->shape, NDS_MAX_RANK, &s->shape_rank, err, sizeof err) != 0)
            return cli_usage(usage, "--shape: %s", err);
        return CLI_OK;
    case OPT_CHUNKS:
        if (cli_parse_u64_list(arg, s->chunks, NDS_MAX_RANK, &s->chunk_rank, err, sizeof err) != 0)
            return cli_usage(usage, "--chunks: %s", err);
        return CLI_OK;
    case OPT_DTYPE:
        /* datetime64[unit] / timedelta64[unit]: the format checks the unit */
        if (string_dtype(arg, typestring, sizeof typestring)) {
            s->dtype = string_dtype(arg, typestring, sizeof typestring);
            return CLI_OK;
        }
        if (nds_dtype_from_name(arg) == NDS_DTYPE_INVALID && !cli_is_time_dtype(arg))
            return cli_usage(usage, "--dtype: unknown dtype '%s'", arg);
        s->dtype = arg;
        return CLI_OK;
    case OPT_CODEC:
        s->codec = arg;
        return CLI_OK;
    case OPT_FILL:
        json_object_put(s->fill);
        s->fill = NULL;
        if (cli_fill_parse(arg, &s->fill) != 0)
            return cli_usage(usage, "--fill: not a value: '%s'", arg);
        return CLI_OK;
    default:
        *delete_existing = true;
        return CLI_OK;
    }
}

static int create_and_report(const char *spec_text) {
    nds_array *a = NULL;
    int rc = cli_open_array(spec_text, NULL, 0, &a);
    if (rc != CLI_OK)
        return rc;
    uint64_t shape[NDS_MAX_RANK], chunks[NDS_MAX_RANK], shards[NDS_MAX_RANK];
    char s1[NDS_MAX_RANK * 24], s2[NDS_MAX_RANK * 24], s3[NDS_MAX_RANK * 24 + 16] = "";
    size_t rank = nds_array_rank(a);
    nds_array_shape(a, shape);
    nds_array_read_chunk_shape(a, chunks);
    nds_array_chunk_shape(a, shards);
    cli_format_list(s1, sizeof s1, rank, shape);
    cli_format_list(s2, sizeof s2, rank, chunks);
    if (memcmp(chunks, shards, rank * sizeof chunks[0]) != 0) {
        memcpy(s3, ", shards ", 10);
        cli_format_list(s3 + 9, sizeof s3 - 9, rank, shards);
    }
    char dtype[64]; /* strings: "<U5", "string (|O vlen-utf8)" */
    if (nds_dtype_is_vlen(nds_array_dtype(a)))
        cli_vlen_label(a, dtype, sizeof dtype);
    else if (!cli_string_typestring(a, dtype, sizeof dtype))
        snprintf(dtype, sizeof dtype, "%s", nds_dtype_name(nds_array_dtype(a)));
    printf("created %s array %s: shape %s, chunks %s%s, %s\n", nds_array_format(a),
           nds_kvstore_url(nds_array_kvstore(a)), s1, s2, s3, dtype);
    nds_array_free(a);
    return CLI_OK;
}

int cli_cmd_create(int argc, char **argv) {
    cli_schema schema;
    memset(&schema, 0, sizeof schema);
    bool delete_existing = false;
    int c, rc = CLI_OK;
    cli_getopt_reset();
    while (rc == CLI_OK && (c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        if (c == 'h')
            rc = -1;
        else if (c == '?' || c == ':')
            rc = cli_bad_option(usage, argv, c);
        else
            rc = apply_option(c, optarg, &schema, &delete_existing);
    }
    if (rc == -1) {
        json_object_put(schema.fill);
        return cli_help(help);
    }
    if (rc == CLI_OK && argc - optind != 1)
        rc = cli_usage(usage, argc - optind == 0 ? "missing SPEC" : "too many arguments");
    if (rc == CLI_OK)
        rc = cli_require_spec("SPEC", argv[optind]);
    char *spec = NULL;
    if (rc == CLI_OK)
        rc = cli_spec_build(argv[optind], &schema, NULL, delete_existing, &spec);
    if (rc == CLI_OK)
        rc = create_and_report(spec);
    free(spec);
    json_object_put(schema.fill);
    return rc;
}
