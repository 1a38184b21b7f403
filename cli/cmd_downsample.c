/* `ndstore downsample SRC DST --factors 2,2,1 [--levels N] [--method mean|mode|min|max|stride]`:
 * builds a multiscale volume (issue 21).
 *
 * Level 0 is SRC copied into DST by `ndstore cp` (so the copy streams within the budget as cp
 * does), except when DST is SRC's own precomputed volume: then the new scales are added beside
 * SRC's. Level k is level k-1 as stored, reduced by the factors (downsample_kernel.c): a cascade,
 * as igneous builds its mips. DST is
 *  - neuroglancer precomputed: each level a new scale of the same info, its key named after its
 *    resolution (the parent's times the factors), size ceil(size / factor), voxel_offset
 *    floor(offset / factor), chunk size, encoding (and its parameters) and sharding the parent's
 *    unless --chunks / --codec say otherwise;
 *  - zarr v3: an OME-Zarr 0.5 image: arrays "0", "1", ... in the group DST, whose zarr.json gets
 *    attributes.ome.multiscales (axes, and per level a coordinateTransformations scale).
 * Each level streams: its output is cut into slabs of whole output chunks (so no chunk is written
 * twice); a slab's input box (the slab times the factors, clipped) is read, reduced by --jobs
 * threads over the slab's first dimension, and written. Memory: half the budget for the slabs
 * (input and output), half for the library's chunks in flight. Omits: resuming an interrupted
 * pyramid, zarr v2 and N5 pyramids, OME-Zarr 0.4 (zarr v2).
 */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "downsample_kernel.h"
#include "ome.h"

static const char usage[] =
    "ndstore downsample SRC DST --factors F,.. [--levels N] [--method mean|mode|min|max|stride] "
    "[--sparse] [--chunks N,..] [--codec C] [--jobs N] [--memory-budget B] [--delete-existing]";

static const char help[] =
    "usage: ndstore downsample SRC DST --factors F,.. [options]\n"
    "\n"
    "Build a multiscale volume (a pyramid) from SRC: level 0 is SRC, level k is level k-1 reduced\n"
    "by the factors. DST is 'KVSTORE|neuroglancer-precomputed:' (each level a scale of one info;\n"
    "SRC's own precomputed volume gets its new scales in place) or 'KVSTORE|zarr3:' (an OME-Zarr\n"
    "0.5 multiscales group with arrays 0, 1, ...).\n"
    "\n"
    "  -f, --factors F,..      factor per dimension, e.g. 2,2,1 (precomputed: x,y,z; the channel\n"
    "                          dimension is never downsampled)\n"
    "  -n, --levels N          levels to add (default: until the factored dimensions fit one "
    "chunk)\n"
    "  -m, --method M          mean (images: rounded to nearest, halves away from zero), mode\n"
    "                          (segmentation: the most frequent label, ties to the smallest), "
    "min,\n"
    "                          max, stride (every F-th element). Default: mode for a precomputed\n"
    "                          segmentation, mean otherwise\n"
    "      --sparse            mode: 0 is background, chosen only when a block is all 0\n"
    "      --chunks N,..       chunk shape of the new levels (default: the parent's)\n"
    "      --codec C           codec of the new levels (default: the parent's)\n"
    "  -j, --jobs N            threads (default: the number of cores)\n"
    "      --memory-budget B   memory for slabs and chunks in flight (default 256M)\n"
    "      --delete-existing   replace arrays already at DST\n"
    "  -h, --help              show this help\n"
    "\n"
    "Example: ndstore downsample 'file:///v/|neuroglancer-precomputed:' "
    "'file:///v/|neuroglancer-precomputed:' \\\n"
    "           --factors 2,2,1 --levels 3 --method mode\n";

enum { OPT_CHUNKS = 256, OPT_CODEC, OPT_BUDGET, OPT_DELETE, OPT_SPARSE };

static const struct option options[] = {
    {"factors", required_argument, NULL, 'f'},
    {"levels", required_argument, NULL, 'n'},
    {"method", required_argument, NULL, 'm'},
    {"sparse", no_argument, NULL, OPT_SPARSE},
    {"chunks", required_argument, NULL, OPT_CHUNKS},
    {"codec", required_argument, NULL, OPT_CODEC},
    {"jobs", required_argument, NULL, 'j'},
    {"memory-budget", required_argument, NULL, OPT_BUDGET},
    {"delete-existing", no_argument, NULL, OPT_DELETE},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* A block of more values than this would need a scratch array larger than any sane factor asks. */
#define MAX_BLOCK ((uint64_t)1 << 26)
#define MAX_LEVELS 32

typedef struct ds_args {
    const char *src, *dst;
    uint64_t factors[NDS_MAX_RANK];
    size_t nfactors;
    long levels; /* 0: by the chunk rule */
    cli_ds_method method;
    bool method_given, sparse, delete_existing;
    const char *chunks_text, *codec;
    uint64_t chunks[NDS_MAX_RANK];
    size_t nchunks;
    long jobs;
    uint64_t budget;
} ds_args;

static int parse_option(int c, char **argv, ds_args *a) {
    char err[256];
    switch (c) {
    case 'f':
        if (cli_parse_u64_list(optarg, a->factors, NDS_MAX_RANK, &a->nfactors, err, sizeof err) !=
            0)
            return cli_usage(usage, "--factors: %s", err);
        return CLI_OK;
    case 'n':
        if (cli_parse_long(optarg, 1, MAX_LEVELS, &a->levels) != 0)
            return cli_usage(usage, "--levels: expected 1..%d, got '%s'", MAX_LEVELS, optarg);
        return CLI_OK;
    case 'm':
        if (!cli_ds_method_parse(optarg, &a->method))
            return cli_usage(usage, "--method: expected mean, mode, min, max or stride, got '%s'",
                             optarg);
        a->method_given = true;
        return CLI_OK;
    case OPT_SPARSE: a->sparse = true; return CLI_OK;
    case OPT_CHUNKS:
        a->chunks_text = optarg;
        if (cli_parse_u64_list(optarg, a->chunks, NDS_MAX_RANK, &a->nchunks, err, sizeof err) != 0)
            return cli_usage(usage, "--chunks: %s", err);
        return CLI_OK;
    case OPT_CODEC: a->codec = optarg; return CLI_OK;
    case 'j':
        if (cli_parse_long(optarg, 1, 1024, &a->jobs) != 0)
            return cli_usage(usage, "--jobs: expected 1..1024, got '%s'", optarg);
        return CLI_OK;
    case OPT_BUDGET:
        if (cli_parse_size(optarg, &a->budget) != 0 || a->budget < 2)
            return cli_usage(usage, "--memory-budget: not a size: '%s'", optarg);
        return CLI_OK;
    case OPT_DELETE: a->delete_existing = true; return CLI_OK;
    case 'h': return -1;
    default: return cli_bad_option(usage, argv, c);
    }
}

/* Parses argv; returns CLI_OK, CLI_USAGE (printed), or -1 for --help. */
static int parse_args(int argc, char **argv, ds_args *a) {
    memset(a, 0, sizeof *a);
    a->budget = CLI_DEFAULT_BUDGET;
    int c, rc = CLI_OK;
    cli_getopt_reset();
    while (rc == CLI_OK && (c = getopt_long(argc, argv, ":hf:n:m:j:", options, NULL)) != -1)
        rc = parse_option(c, argv, a);
    if (rc != CLI_OK) return rc;
    if (argc - optind != 2)
        return cli_usage(usage, argc - optind < 2 ? "missing SRC or DST" : "too many arguments");
    if (a->nfactors == 0) return cli_usage(usage, "--factors is required (e.g. --factors 2,2,1)");
    if (a->sparse && a->method_given && a->method != CLI_DS_MODE)
        return cli_usage(usage, "--sparse applies to --method mode only");
    a->src = argv[optind];
    a->dst = argv[optind + 1];
    int rc2 = cli_require_spec("SRC", a->src);
    return rc2 == CLI_OK ? cli_require_spec("DST", a->dst) : rc2;
}

/* ---- what the pyramid is ---- */

typedef enum { DST_PRECOMPUTED, DST_ZARR3 } dst_kind;

typedef struct pyramid {
    dst_kind kind;
    char kv[4096]; /* DST's kvstore URL */
    bool in_place; /* DST is SRC's own precomputed volume */
    size_t rank;
    uint64_t factors[NDS_MAX_RANK];
    int levels; /* levels added after level 0 */
    uint64_t src_shape[NDS_MAX_RANK];
    cli_ds_method method;
    bool sparse;
    nds_dtype dtype;
    json_object *src_info;      /* SRC's precomputed info (NULL for other formats) */
    json_object *src_scale;     /* SRC's open scale in src_info (borrowed) */
    double scale[NDS_MAX_RANK]; /* level 0's physical size of a voxel per dimension */
    const char *axis_names[NDS_MAX_RANK];
    char names[NDS_MAX_RANK][64]; /* the source's dimension names (axis_names points here) */
    bool nanometers;              /* precomputed: resolutions are nm */
} pyramid;

/* DST's kvstore and kind, from a URL "KVSTORE|zarr3:" or "KVSTORE|neuroglancer-precomputed:". */
static int parse_dst(const char *dst, pyramid *p) {
    char format[64];
    if (dst[strspn(dst, " \t\r\n")] == '{')
        return cli_fail(
            "DST: give a URL ending in |zarr3: or |neuroglancer-precomputed: (a JSON spec "
            "cannot name several arrays)");
    int rc = cli_kvstore_url(dst, p->kv, sizeof p->kv, format, sizeof format);
    if (rc != CLI_OK) return rc;
    for (char *c = format; *c; c++) *c = *c == '-' ? '_' : *c;
    if (strcmp(format, "zarr3") == 0)
        p->kind = DST_ZARR3;
    else if (strcmp(format, "neuroglancer_precomputed") == 0)
        p->kind = DST_PRECOMPUTED;
    else
        return cli_fail("DST %s: a pyramid is written as neuroglancer precomputed scales "
                        "(|neuroglancer-precomputed:) or an OME-Zarr group (|zarr3:), not '%s'",
                        dst, format[0] ? format : "zarr");
    return CLI_OK;
}

static const char *member_string(json_object *o, const char *key) {
    json_object *v;
    return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
               ? json_object_get_string(v)
               : "";
}

/* SRC's precomputed info and the scale it has open (by the key in its spec). */
static int load_src_scale(nds_array *src, pyramid *p) {
    if (strcmp(nds_array_format(src), "neuroglancer_precomputed") != 0) return CLI_OK;
    char *meta = NULL, *spec = NULL;
    int st = nds_array_metadata(src, &meta);
    if (st == 0) st = nds_array_spec(src, &spec);
    json_object *s = spec ? json_tokener_parse(spec) : NULL, *sm = NULL, *scales = NULL;
    p->src_info = meta ? json_tokener_parse(meta) : NULL;
    nds_free(meta);
    nds_free(spec);
    const char *key =
        json_object_object_get_ex(s, "scale_metadata", &sm) ? member_string(sm, "key") : "";
    json_object_object_get_ex(p->src_info, "scales", &scales);
    for (size_t i = 0; key[0] && i < json_object_array_length(scales); i++) {
        json_object *sc = json_object_array_get_idx(scales, i);
        if (strcmp(member_string(sc, "key"), key) == 0) p->src_scale = sc;
    }
    json_object_put(s);
    if (!p->src_scale)
        return st ? cli_fail_nds(st, "downsample")
                  : cli_fail("%s: the open scale is not in its info",
                             nds_kvstore_url(nds_array_kvstore(src)));
    return CLI_OK;
}

static double triple_at(json_object *o, const char *key, size_t i, double dflt) {
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_array))
        return dflt;
    json_object *e = json_object_array_get_idx(v, i);
    return e ? json_object_get_double(e) : dflt;
}

/* Level 0's voxel size and the axes' names (cli_ome_axis_names): a precomputed SRC's resolution
 * (nm) on x, y, z; otherwise 1. */
static void describe_axes(nds_array *src, pyramid *p) {
    p->rank = nds_array_rank(src);
    cli_ome_axis_names(src, p->names);
    for (size_t d = 0; d < p->rank; d++) {
        p->scale[d] = 1.0;
        p->axis_names[d] = p->names[d];
    }
    if (p->src_scale) {
        p->nanometers = true;
        for (size_t d = 0; d < 3; d++) p->scale[d] = triple_at(p->src_scale, "resolution", d, 1.0);
    }
}

/* Default levels: until every factored dimension of the last level fits in one of SRC's chunks. */
static int default_levels(const pyramid *p, const uint64_t *shape, const uint64_t *chunks) {
    uint64_t s[NDS_MAX_RANK];
    memcpy(s, shape, p->rank * sizeof s[0]);
    int n = 0;
    for (;;) {
        bool fits = true;
        for (size_t d = 0; d < p->rank; d++)
            fits = fits && (p->factors[d] == 1 || s[d] <= chunks[d]);
        if ((fits && n > 0) || n == MAX_LEVELS) return n;
        cli_ds_out_shape(p->rank, s, p->factors, s);
        n++;
    }
}

/* Factors, method and levels checked against SRC. */
static int plan_pyramid(nds_array *src, const ds_args *a, pyramid *p) {
    p->rank = nds_array_rank(src);
    p->dtype = nds_array_dtype(src);
    size_t n = a->nfactors;
    memcpy(p->factors, a->factors, n * sizeof a->factors[0]);
    if ((p->src_scale || p->kind == DST_PRECOMPUTED) && p->rank == 4 && n == 3)
        p->factors[n++] = 1; /* precomputed x,y,z: the channel is not downsampled */
    if (n != p->rank)
        return cli_fail("--factors has %zu values; %s has %zu dimensions", a->nfactors, a->src,
                        p->rank);
    uint64_t block = 1;
    bool any = false;
    for (size_t d = 0; d < p->rank; d++) {
        if (p->factors[d] == 0)
            return cli_fail("--factors: dimension %zu: a factor is at least 1", d);
        any = any || p->factors[d] > 1;
        block = p->factors[d] > MAX_BLOCK ? MAX_BLOCK + 1 : block * p->factors[d];
        if (block > MAX_BLOCK)
            return cli_fail("--factors: a block of more than %" PRIu64 " elements is not supported",
                            MAX_BLOCK);
    }
    if (!any) return cli_fail("--factors: every factor is 1: nothing to downsample");
    if (p->kind == DST_PRECOMPUTED && p->rank == 4 && p->factors[3] != 1)
        return cli_fail(
            "--factors: a precomputed volume's channel dimension is not downsampled (give x,y,z)");
    if (p->kind == DST_ZARR3 && (p->rank < 2 || p->rank > 5))
        return cli_fail("an OME-Zarr image has 2 to 5 dimensions; %s has %zu", a->src, p->rank);
    bool segmentation =
        p->src_info && strcmp(member_string(p->src_info, "type"), "segmentation") == 0;
    p->method = a->method_given ? a->method : segmentation ? CLI_DS_MODE : CLI_DS_MEAN;
    p->sparse = a->sparse;
    if (p->sparse && p->method != CLI_DS_MODE)
        return cli_fail("--sparse applies to --method mode only");
    const char *why = cli_ds_unsupported(p->method, p->dtype);
    if (why)
        return cli_fail("--method %s: %s; %s is %s", cli_ds_method_name(p->method), why, a->src,
                        nds_dtype_name(p->dtype));
    uint64_t shape[NDS_MAX_RANK], chunks[NDS_MAX_RANK];
    nds_array_shape(src, shape);
    nds_array_shape(src, p->src_shape);
    nds_array_read_chunk_shape(src, chunks);
    p->levels = a->levels ? (int)a->levels : default_levels(p, shape, chunks);
    for (int k = 1; k <= p->levels; k++) { /* a level of one voxel would only repeat itself */
        bool single = true;
        for (size_t d = 0; d < p->rank; d++)
            single = single && (p->factors[d] == 1 || shape[d] <= 1);
        if (single) {
            char s[NDS_MAX_RANK * 24];
            cli_format_list(s, sizeof s, p->rank, shape);
            return cli_fail("--levels %d: level %d is already %s, one voxel in every downsampled "
                            "dimension: give --levels %d at most",
                            p->levels, k - 1, s, k - 1);
        }
        cli_ds_out_shape(p->rank, shape, p->factors, shape);
    }
    return CLI_OK;
}

/* ---- specs ---- */

static json_object *u64_json(size_t n, const uint64_t *v) {
    json_object *arr = json_object_new_array();
    for (size_t i = 0; i < n; i++) json_object_array_add(arr, json_object_new_uint64(v[i]));
    return arr;
}

static json_object *f64_json(size_t n, const double *v) {
    json_object *arr = json_object_new_array();
    for (size_t i = 0; i < n; i++) {
        double x = v[i];
        json_object_array_add(arr, x == floor(x) && fabs(x) < 1e15
                                       ? json_object_new_int64((int64_t)x)
                                       : json_object_new_double(x));
    }
    return arr;
}

/* The JSON text of obj (consumed), malloc'd. */
static char *take_text(json_object *obj) {
    const char *t = json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN |
                                                            JSON_C_TO_STRING_NOSLASHESCAPE);
    char *s = t ? strdup(t) : NULL;
    json_object_put(obj);
    return s;
}

static void copy_member(json_object *to, json_object *from, const char *key) {
    json_object *v;
    if (json_object_object_get_ex(from, key, &v))
        json_object_object_add(to, key, json_object_get(v));
}

/* The array spec of a level: zarr3 "<kv>" path "<level>"; precomputed the scale of resolution res.
 */
static json_object *level_spec(const pyramid *p, int level, const double *res) {
    json_object *s = json_object_new_object();
    json_object_object_add(
        s, "driver",
        json_object_new_string(p->kind == DST_ZARR3 ? "zarr3" : "neuroglancer_precomputed"));
    json_object_object_add(s, "kvstore", json_object_new_string(p->kv));
    if (p->kind == DST_ZARR3) {
        char path[16];
        snprintf(path, sizeof path, "%d", level);
        json_object_object_add(s, "path", json_object_new_string(path));
    } else {
        json_object *sm = json_object_new_object();
        json_object_object_add(sm, "resolution", f64_json(3, res));
        json_object_object_add(s, "scale_metadata", sm);
    }
    return s;
}

/* The members of a precomputed scale that a new scale takes from its parent: the encoding's
 * (unless --codec names another) and the sharding. */
static void carry_encoding(json_object *to, json_object *parent_scale, bool codec_given) {
    static const char *const encoding[] = {"encoding", "compressed_segmentation_block_size",
                                           "jpeg_quality", "png_level"};
    for (size_t i = 0; !codec_given && i < sizeof encoding / sizeof encoding[0]; i++)
        copy_member(to, parent_scale, encoding[i]);
    copy_member(to, parent_scale, "sharding");
}

/* Level 0's spec for cp: SRC's voxel grid, encoding and type carried into a precomputed DST (its
 * --chunks, x,y,z, as the schema's chunk with the channels whole); the axes' names as zarr v3
 * dimension names. */
static char *level0_spec(const pyramid *p, const ds_args *a, const uint64_t *src_shape) {
    json_object *s = level_spec(p, 0, p->scale);
    if (p->kind == DST_ZARR3) {
        json_object *schema = json_object_new_object(), *domain = json_object_new_object();
        json_object *labels = json_object_new_array();
        for (size_t d = 0; d < p->rank; d++)
            json_object_array_add(labels, json_object_new_string(p->axis_names[d]));
        json_object_object_add(domain, "labels", labels);
        json_object_object_add(schema, "domain", domain);
        json_object_object_add(s, "schema", schema);
        return take_text(s);
    }
    json_object *sm = NULL, *mm = json_object_new_object();
    json_object_object_get_ex(s, "scale_metadata", &sm);
    bool seg = p->method == CLI_DS_MODE;
    if (p->src_info) {
        seg = strcmp(member_string(p->src_info, "type"), "segmentation") == 0;
        copy_member(sm, p->src_scale, "voxel_offset");
        carry_encoding(sm, p->src_scale, a->codec != NULL);
    }
    if (a->nchunks == 3) {
        uint64_t chunk[4] = {a->chunks[0], a->chunks[1], a->chunks[2], src_shape[3]};
        json_object *schema = json_object_new_object(), *layout = json_object_new_object();
        json_object *c = json_object_new_object();
        json_object_object_add(c, "shape", u64_json(4, chunk));
        json_object_object_add(layout, "chunk", c);
        json_object_object_add(schema, "chunk_layout", layout);
        json_object_object_add(s, "schema", schema);
    }
    json_object_object_add(mm, "type", json_object_new_string(seg ? "segmentation" : "image"));
    json_object_object_add(s, "multiscale_metadata", mm);
    return take_text(s);
}

/* The scale metadata of precomputed level k+1 from its parent's (in the info parent_info). */
static json_object *child_scale(const pyramid *p, json_object *parent_scale, const uint64_t *size,
                                const uint64_t *chunk, const double *res, bool codec_given) {
    json_object *sm = json_object_new_object();
    int64_t off[3];
    for (size_t d = 0; d < 3; d++) {
        int64_t o = (int64_t)triple_at(parent_scale, "voxel_offset", d, 0),
                f = (int64_t)p->factors[d];
        off[d] = o >= 0 ? o / f : -((-o + f - 1) / f); /* floor */
    }
    json_object *offj = json_object_new_array();
    for (size_t d = 0; d < 3; d++) json_object_array_add(offj, json_object_new_int64(off[d]));
    json_object_object_add(sm, "resolution", f64_json(3, res));
    json_object_object_add(sm, "size", u64_json(3, size));
    json_object_object_add(sm, "voxel_offset", offj);
    json_object_object_add(sm, "chunk_size", u64_json(3, chunk));
    carry_encoding(sm, parent_scale, codec_given);
    return sm;
}

/* The parent's open scale in its info (a new reference; NULL when not found). */
static json_object *open_scale(nds_array *a, json_object **info) {
    pyramid tmp;
    memset(&tmp, 0, sizeof tmp);
    *info = NULL;
    if (load_src_scale(a, &tmp) != CLI_OK) {
        json_object_put(tmp.src_info);
        return NULL;
    }
    *info = tmp.src_info;
    return tmp.src_scale;
}

/* Creates level k (k >= 1) of shape out from its parent. */
static int create_level(const pyramid *p, const ds_args *a, nds_array *parent, int k,
                        const uint64_t *out, nds_context *ctx, nds_array **level) {
    json_object *s = NULL;
    double res[3];
    if (p->kind == DST_ZARR3) {
        char *meta = NULL;
        int st = nds_array_metadata(parent, &meta);
        if (st != 0) return cli_fail_nds(st, "downsample");
        json_object *doc = json_tokener_parse(meta);
        nds_free(meta);
        json_object_object_add(doc, "shape", u64_json(p->rank, out));
        s = level_spec(p, k, NULL); /* --chunks and --codec are level 0's already (cp) */
        json_object_object_add(s, "metadata", doc);
    } else {
        json_object *info = NULL, *ps = open_scale(parent, &info);
        if (!ps) {
            json_object_put(info);
            return CLI_FAIL;
        }
        uint64_t chunk[NDS_MAX_RANK];
        nds_array_read_chunk_shape(parent, chunk);
        if (a->nchunks >= 3) memcpy(chunk, a->chunks, 3 * sizeof chunk[0]);
        for (size_t d = 0; d < 3; d++)
            res[d] = triple_at(ps, "resolution", d, 1.0) * (double)p->factors[d];
        s = level_spec(p, k, res);
        json_object_object_add(s, "scale_metadata",
                               child_scale(p, ps, out, chunk, res, a->codec != NULL));
        json_object_put(info);
        if (a->codec) {
            json_object *schema = json_object_new_object();
            json_object_object_add(schema, "codec", json_object_new_string(a->codec));
            json_object_object_add(s, "schema", schema);
        }
    }
    json_object_object_add(s, "create", json_object_new_boolean(1));
    if (p->kind ==
        DST_PRECOMPUTED) /* a scale made before (a run again) is opened, checked, rewritten */
        json_object_object_add(s, "open", json_object_new_boolean(1));
    if (a->delete_existing && p->kind == DST_ZARR3)
        json_object_object_add(s, "delete_existing", json_object_new_boolean(1));
    char *text = take_text(s);
    if (!text) return cli_fail("out of memory");
    int rc = cli_open_array(text, ctx, 0, level);
    free(text);
    return rc;
}

/* ---- the reduction, slab by slab ---- */

typedef struct reduce_job {
    cli_ds_block block;
    uint64_t row0, row1;
    int rc;
} reduce_job;

static void *reduce_main(void *arg) {
    reduce_job *j = arg;
    j->rc = cli_ds_reduce(&j->block, j->row0, j->row1);
    return NULL;
}

/* Reduces b on up to threads threads, each a run of output rows of dimension 0. */
static int reduce_parallel(const cli_ds_block *b, uint64_t rows, int threads) {
    if (threads > 64) threads = 64;
    if ((uint64_t)threads > rows) threads = (int)rows;
    reduce_job jobs[64];
    pthread_t tid[64];
    bool started[64] = {false};
    int rc = 0;
    for (int t = 0; t < threads; t++) {
        jobs[t] = (reduce_job){*b, rows * (uint64_t)t / (uint64_t)threads,
                               rows * (uint64_t)(t + 1) / (uint64_t)threads, 0};
        started[t] = t < threads - 1 && pthread_create(&tid[t], NULL, reduce_main, &jobs[t]) == 0;
        if (!started[t])
            reduce_main(&jobs[t]); /* the last run (or one no thread could take) on this thread */
    }
    for (int t = 0; t < threads; t++) {
        if (started[t]) pthread_join(tid[t], NULL);
        rc = rc ? rc : jobs[t].rc;
    }
    return rc == 0 ? CLI_OK : cli_fail("downsample: out of memory reducing a slab");
}

/* Products saturate: a saturated size is refused by the allocation, never wrapped to a small one. */
static uint64_t sat_mul(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

static uint64_t box_elems(size_t rank, const uint64_t *shape) {
    uint64_t n = 1;
    for (size_t d = 0; d < rank; d++) n = sat_mul(n, shape[d]);
    return n;
}

/* Level = parent reduced, in slabs of whole level chunks. */
static int fill_level(const pyramid *p, nds_array *parent, nds_array *level, uint64_t budget,
                      int threads, int k) {
    size_t rank = p->rank, elem = nds_array_dtype_size(parent);
    uint64_t in_shape[NDS_MAX_RANK], out_shape[NDS_MAX_RANK], chunks[NDS_MAX_RANK], count, bytes;
    nds_array_shape(parent, in_shape);
    nds_array_shape(level, out_shape);
    nds_array_chunk_shape(level, chunks);
    uint64_t block = box_elems(rank, p->factors);
    nds_box box;
    nds_box_full(&box, rank, out_shape);
    int rc = cli_box_count(&box, elem, &count, &bytes);
    if (rc != CLI_OK || count == 0) return rc;
    /* An output slab and its input (up to block times larger) share half the budget. Slabs are runs
     * of whole level chunks, unless one chunk's input alone exceeds that: then slabs of any shape
     * within it, each chunk written in parts (read, modified, written back by the library). */
    uint64_t slab_budget = budget / 2 / (block + 1), chunk_bytes = sat_mul(box_elems(rank, chunks), elem);
    cli_tiler t;
    cli_tiler_init(&t, &box, elem, slab_budget, chunk_bytes > slab_budget ? NULL : chunks);
    uint64_t out_cap = t.max_tile_bytes, in_cap = sat_mul(out_cap, block);
    uint8_t *in = cli_slab_alloc(in_cap), *out = cli_slab_alloc(out_cap);
    if (!in || !out)
        rc =
            cli_fail("out of memory (slabs of %" PRIu64 " and %" PRIu64 " bytes)", in_cap, out_cap);
    nds_io_options io = NDS_IO_OPTIONS_INIT;
    io.threads = threads;
    char label[32];
    snprintf(label, sizeof label, "level %d", k);
    cli_progress bar;
    cli_progress_begin(&bar, label, bytes);
    nds_box sub, src;
    uint64_t n, done = 0;
    while (rc == CLI_OK && cli_tiler_next(&t, &sub, &n)) {
        uint64_t sub_in[NDS_MAX_RANK];
        src = sub;
        for (size_t d = 0; d < rank; d++) {
            src.start[d] = sub.start[d] * p->factors[d];
            src.stop[d] = sub.stop[d] * p->factors[d] < in_shape[d] ? sub.stop[d] * p->factors[d]
                                                                    : in_shape[d];
            src.step[d] = 1;
            sub_in[d] = src.stop[d] - src.start[d];
        }
        int st = nds_array_read(parent, &src, in, &io);
        if (st != 0) {
            rc = cli_fail_nds(st, "downsample: read");
            break;
        }
        cli_ds_block b = {p->dtype, elem, p->method, p->sparse, rank, sub_in, p->factors, in, out};
        rc = reduce_parallel(&b, sub.stop[0] - sub.start[0], threads);
        if (rc == CLI_OK && (st = nds_array_write(level, &sub, out, &io)) != 0)
            rc = cli_fail_nds(st, "downsample: write");
        done += n * elem;
        cli_progress_update(&bar, done);
    }
    cli_progress_end(&bar);
    free(in);
    free(out);
    return rc;
}

/* DST's kvstore as a directory (its URL need not end in '/'): keys are joined below it. */
static int open_dst_dir(const pyramid *p, nds_context *ctx, nds_kvstore **out) {
    nds_kvstore *kv = NULL;
    *out = NULL;
    int st = nds_kvstore_open(&kv, p->kv, ctx);
    if (st == 0) st = nds_kvstore_sub(out, kv, "./"); /* "./": the prefix as a directory */
    nds_kvstore_free(kv);
    return st;
}

/* ---- OME-Zarr (ome.c writes the group) ---- */

/* The group's multiscale: the axes and, per level, its path and scale (level 0's voxel size times
 * the factors to the level's power). */
static json_object *ome_multiscale(const pyramid *p) {
    const char *units[NDS_MAX_RANK] = {NULL};
    for (size_t d = 0; d < p->rank; d++)
        units[d] = p->nanometers && d < 3 ? "nm" : NULL; /* precomputed: x, y, z in nm */
    json_object *ms = cli_ome_multiscale_new(p->rank, (char (*)[64])p->names, units);
    double scale[NDS_MAX_RANK];
    memcpy(scale, p->scale, sizeof scale);
    for (int k = 0; k <= p->levels; k++) {
        char path[16];
        snprintf(path, sizeof path, "%d", k);
        cli_ome_add_dataset(ms, path, p->rank, scale, NULL);
        for (size_t d = 0; d < p->rank; d++) scale[d] *= (double)p->factors[d];
    }
    json_object *meta = json_object_new_object();
    json_object_object_add(ms, "type", json_object_new_string(cli_ds_method_name(p->method)));
    json_object_object_add(
        meta, "description",
        json_object_new_string("ndstore downsample: level k is level k-1 reduced by the factors"));
    json_object_object_add(meta, "method", json_object_new_string(cli_ds_method_name(p->method)));
    json_object_object_add(meta, "factors", u64_json(p->rank, p->factors));
    if (p->method == CLI_DS_MODE)
        json_object_object_add(meta, "sparse", json_object_new_boolean(p->sparse));
    json_object_object_add(ms, "metadata", meta);
    return ms;
}

/* Before anything is written: an OME-Zarr DST must be a group or nothing. */
static int check_group(const pyramid *p, nds_context *ctx) {
    return p->kind == DST_ZARR3 ? cli_ome_check_group(p->kv, ctx) : CLI_OK;
}

/* ---- the command ---- */

/* Level 0: SRC copied by cp into DST (or SRC itself, in place), opened in ctx. */
static int level0(const pyramid *p, const ds_args *a, nds_context *ctx, nds_array **out) {
    char *spec = level0_spec(p, a, p->src_shape);
    if (!spec) return cli_fail("out of memory");
    int rc = CLI_OK;
    if (!p->in_place) {
        char budget[32], jobs[16];
        snprintf(budget, sizeof budget, "%" PRIu64, a->budget);
        snprintf(jobs, sizeof jobs, "%ld", a->jobs);
        char *argv[16] = {"cp", (char *)a->src, spec, "--memory-budget", budget};
        int argc = 5;
        if (a->jobs) argv[argc++] = "--jobs", argv[argc++] = jobs;
        if (a->chunks_text &&
            !(p->kind == DST_PRECOMPUTED && a->nchunks == 3)) /* else in the spec */
            argv[argc++] = "--chunks", argv[argc++] = (char *)a->chunks_text;
        if (a->codec) argv[argc++] = "--codec", argv[argc++] = (char *)a->codec;
        if (a->delete_existing) argv[argc++] = "--delete-existing";
        rc = cli_cmd_cp(argc, argv);
    }
    if (rc == CLI_OK) {
        json_object *s = level_spec(p, 0, p->scale);
        char *text = take_text(s);
        rc = p->in_place ? cli_open_array(a->src, ctx, NDS_OPEN_EXISTING, out)
                         : cli_open_array(text, ctx, NDS_OPEN_EXISTING, out);
        free(text);
    }
    free(spec);
    return rc;
}

static void print_level(nds_array *a, int k) {
    uint64_t shape[NDS_MAX_RANK];
    char s[NDS_MAX_RANK * 24], codec[256];
    nds_array_shape(a, shape);
    cli_format_list(s, sizeof s, nds_array_rank(a), shape);
    nds_array_codec_description(a, codec, sizeof codec);
    printf("level %d: shape %s%s%s\n", k, s, codec[0] ? ", " : "", codec);
}

static int build(const pyramid *p, const ds_args *a, nds_context *ctx) {
    nds_array *parent = NULL;
    int rc = level0(p, a, ctx, &parent);
    if (rc == CLI_OK) print_level(parent, 0);
    int threads = nds_context_threads(ctx);
    for (int k = 1; rc == CLI_OK && k <= p->levels; k++) {
        uint64_t shape[NDS_MAX_RANK], out[NDS_MAX_RANK];
        nds_array_shape(parent, shape);
        cli_ds_out_shape(p->rank, shape, p->factors, out);
        nds_array *level = NULL;
        rc = create_level(p, a, parent, k, out, ctx, &level);
        if (rc == CLI_OK) rc = fill_level(p, parent, level, a->budget, threads, k);
        if (rc == CLI_OK) print_level(level, k);
        nds_array_free(parent);
        parent = level;
    }
    nds_array_free(parent);
    if (rc == CLI_OK && p->kind == DST_ZARR3) rc = cli_ome_write_group(p->kv, ctx, ome_multiscale(p));
    return rc;
}

/* DST is SRC's own precomputed volume (the same kvstore, once both are opened). */
static bool same_volume(nds_array *src, const pyramid *p, nds_context *ctx) {
    if (p->kind != DST_PRECOMPUTED || !p->src_scale) return false;
    nds_kvstore *kv = NULL;
    if (open_dst_dir(p, ctx, &kv) != 0) return false;
    bool same = strcmp(nds_kvstore_url(kv), nds_kvstore_url(nds_array_kvstore(src))) == 0;
    nds_kvstore_free(kv);
    return same;
}

int cli_cmd_downsample(int argc, char **argv) {
    ds_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != CLI_OK) return rc == -1 ? cli_help(help) : rc;
    pyramid p;
    memset(&p, 0, sizeof p);
    rc = parse_dst(a.dst, &p);
    nds_context *ctx = NULL;
    nds_array *src = NULL;
    if (rc == CLI_OK) rc = cli_context_new(a.budget, (int)a.jobs, &ctx);
    if (rc == CLI_OK) rc = cli_open_array(a.src, ctx, NDS_OPEN_EXISTING, &src);
    if (rc == CLI_OK) rc = load_src_scale(src, &p);
    if (rc == CLI_OK) {
        describe_axes(src, &p);
        rc = plan_pyramid(src, &a, &p);
    }
    if (rc == CLI_OK) rc = check_group(&p, ctx);
    if (rc == CLI_OK) {
        p.in_place = same_volume(src, &p, ctx);
        nds_array_free(src); /* cp and the levels open what they need */
        src = NULL;
        rc = build(&p, &a, ctx);
    }
    nds_array_free(src);
    json_object_put(p.src_info);
    nds_context_free(ctx);
    return rc;
}
