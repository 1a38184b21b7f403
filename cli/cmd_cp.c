/* `ndstore cp SRC DST [--jobs N] [--chunks ..] [--codec ..] [--fill V] [--memory-budget B]`: copies any
 * array into a new array, in any format and store.
 *
 * The destination's dtype, shape, chunk shape (the source's read chunk: the inner chunk of a
 * sharded source) and fill value come from the source unless DST's "schema" or "metadata" or the
 * options say otherwise; its codec is the destination format's default unless --codec or the schema
 * names one. Any format to any format: the array model (shape, dtype, C-order elements) is the same
 * for all, so the copy itself is format-blind; what a format cannot hold (a dtype, a rank, a fill
 * value) is refused when the destination is created, before anything is written.
 * The copy streams by slabs aligned to the destination's chunk grid (each a run of whole
 * destination chunks, so no destination chunk is written twice): a slab is read from SRC into one
 * buffer, then written to DST. The memory budget covers the slab and the library's chunk tasks in
 * flight, each counted for what it really holds (plan_copy: up to three copies of the largest
 * object it handles, a whole shard for a sharded destination); the thread count is cut to what
 * fits, and the arrays are reopened in a context of that many threads, since every pool thread
 * keeps its chunk buffers between calls. So memory stays near the budget whatever the array's and
 * the shard's size; when one task and one chunk exceed the budget, the copy still runs, on one
 * thread. Threading: one thread here; the library's pool does the chunk work.
 * A destination overlapping the source is refused before it is opened (see "overlap" below).
 * Physical metadata: the source's origin and units (its own, or an OME-Zarr dataset's group's:
 * cli_physical_of) go into a destination that holds them (carry_domain); with --ome, DST is an
 * OME-Zarr 0.5 group whose dataset "0" is the copy and whose multiscales keep them (carry_ome).
 * Omits: dtype conversion, resuming an interrupted copy.
 */
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "strings_io.h"
#include "npy.h"
#include "ome.h"

static const char usage[] =
    "ndstore cp SRC DST [--jobs N] [--chunks N,..] [--codec C] [--fill V] [--memory-budget BYTES] "
    "[--delete-existing] [--scale S] [--ome]";

static const char help[] =
    "usage: ndstore cp SRC DST [options]\n"
    "\n"
    "Copy an array into a new array. SRC is any array spec or URL; DST is a URL or JSON spec for the\n"
    "new array in any format (file:///d/b.zarr|zarr:, |zarr3:, |n5:, |neuroglancer-precomputed:,\n"
    "a bare path, {\"driver\":...}). The destination's dtype, shape, chunks (a sharded source's\n"
    "inner chunks) and fill value are the source's unless overridden; its codec is the format's\n"
    "default unless --codec is given. Shards are asked for in DST's spec (zarr3: schema\n"
    "chunk_layout write_chunk; precomputed: scale_metadata sharding). A DST that overlaps SRC (the\n"
    "same place, inside it or containing it) is refused, before anything is deleted.\n"
    "\n"
    "  -j, --jobs N            threads for decoding and encoding (default: two per core;\n"
    "                          fewer when the memory budget holds fewer chunks in flight)\n"
    "      --chunks N,..       destination chunk shape\n"
    "      --codec C           destination codec: none, zstd[:level], blosc[:cname[:clevel[:shuffle]]],\n"
    "                          gzip[:level], zlib[:level], bz2[:level], lz4[:acceleration]\n"
    "      --fill V            destination fill value\n"
    "      --memory-budget B   memory for the slab and the chunks in flight, e.g. 64M or 2G\n"
    "                          (default 256M)\n"
    "      --delete-existing   replace an array already at DST\n"
    "      --scale S           the scale of SRC, a precomputed volume: its index in scales\n"
    "                          (0), its key (8_8_40) or its resolution (8,8,40)\n"
    "      --ome               DST (a zarr v3 URL) is an OME-Zarr 0.5 group: the array is its\n"
    "                          dataset \"0\", and the group's multiscales keep SRC's axes, units,\n"
    "                          voxel size (scale) and place (translation)\n"
    "  -h, --help              show this help\n"
    "\n"
    "Example: ndstore cp /data/a.zarr 'file:///data/b.zarr|zarr:' --chunks 128,128 --codec zstd:5 -j 8\n";

enum { OPT_CHUNKS = 256, OPT_CODEC, OPT_FILL, OPT_BUDGET, OPT_DELETE, OPT_OME };

static const struct option options[] = {
    {"jobs", required_argument, NULL, 'j'},
    {"chunks", required_argument, NULL, OPT_CHUNKS},
    {"codec", required_argument, NULL, OPT_CODEC},
    {"fill", required_argument, NULL, OPT_FILL},
    {"memory-budget", required_argument, NULL, OPT_BUDGET},
    {"delete-existing", no_argument, NULL, OPT_DELETE},
    {"ome", no_argument, NULL, OPT_OME},
    CLI_SCALE_OPTION,
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

typedef struct cp_args {
    const char *src, *dst;
    const char *scale; /* --scale (of SRC), or NULL */
    char *scaled_src;  /* the spec of that scale, which src then points at (owned) */
    long jobs;
    uint64_t budget;
    bool delete_existing;
    cli_schema over;   /* --chunks, --codec, --fill */
    bool ome;          /* --ome: dst is the group's dataset 0 */
    char *ome_group;   /* --ome: the group's kvstore URL (owned) */
    char *ome_dst;     /* --ome: the URL of dataset 0, which dst then points at (owned) */
} cp_args;

static int parse_option(int c, char **argv, cp_args *ca) {
    char err[256];
    switch (c) {
    case 'j':
        if (cli_parse_long(optarg, 1, 1024, &ca->jobs) != 0)
            return cli_usage(usage, "--jobs: expected 1..1024, got '%s'", optarg);
        return CLI_OK;
    case OPT_CHUNKS:
        if (cli_parse_u64_list(optarg, ca->over.chunks, NDS_MAX_RANK, &ca->over.chunk_rank, err,
                               sizeof err) != 0)
            return cli_usage(usage, "--chunks: %s", err);
        return CLI_OK;
    case OPT_CODEC: ca->over.codec = optarg; return CLI_OK;
    case OPT_FILL:
        json_object_put(ca->over.fill);
        ca->over.fill = NULL;
        if (cli_fill_parse(optarg, &ca->over.fill) != 0)
            return cli_usage(usage, "--fill: not a value: '%s'", optarg);
        return CLI_OK;
    case OPT_BUDGET:
        if (cli_parse_size(optarg, &ca->budget) != 0 || ca->budget < 2)
            return cli_usage(usage, "--memory-budget: not a size: '%s'", optarg);
        return CLI_OK;
    case OPT_DELETE: ca->delete_existing = true; return CLI_OK;
    case OPT_OME: ca->ome = true; return CLI_OK;
    case CLI_OPT_SCALE: ca->scale = optarg; return CLI_OK;
    case 'h': return -1;
    default: return cli_bad_option(usage, argv, c);
    }
}

/* --ome: DST (a zarr v3 URL, or a path) names the group; the array is its dataset "0". */
static int ome_destination(cp_args *ca) {
    char kv[4096], format[64];
    if (ca->dst[strspn(ca->dst, " \t\r\n")] == '{')
        return cli_usage(usage, "--ome: give DST as a URL ending in |zarr3: (the OME-Zarr group), "
                                "not a JSON spec");
    if (cli_kvstore_url(ca->dst, kv, sizeof kv, format, sizeof format) != CLI_OK)
        return CLI_FAIL;
    if (format[0] && strcmp(format, "zarr3") != 0)
        return cli_usage(usage, "--ome: DST %s is a %s URL: an OME-Zarr 0.5 group is zarr v3 "
                                "(end it in |zarr3:)", ca->dst, format);
    size_t n = strlen(kv);
    while (n > 1 && kv[n - 1] == '/') kv[--n] = '\0';
    ca->ome_group = strdup(kv);
    ca->ome_dst = malloc(n + 16);
    if (!ca->ome_group || !ca->ome_dst) return cli_fail("out of memory");
    snprintf(ca->ome_dst, n + 16, "%s/0|zarr3:", kv);
    ca->dst = ca->ome_dst;
    return CLI_OK;
}

/* Parses argv; returns CLI_OK, CLI_USAGE (printed), or -1 for --help. */
static int parse_args(int argc, char **argv, cp_args *ca) {
    ca->budget = CLI_DEFAULT_BUDGET;
    int c, rc = CLI_OK;
    cli_getopt_reset();
    while (rc == CLI_OK && (c = getopt_long(argc, argv, ":hj:", options, NULL)) != -1)
        rc = parse_option(c, argv, ca);
    if (rc != CLI_OK)
        return rc;
    if (argc - optind != 2)
        return cli_usage(usage, argc - optind < 2 ? "missing SRC or DST" : "too many arguments");
    ca->src = argv[optind];
    ca->dst = argv[optind + 1];
    int rc2 = cli_require_spec("SRC", ca->src);
    if (rc2 == CLI_OK)
        rc2 = cli_require_spec("DST", ca->dst);
    if (rc2 == CLI_OK)
        rc2 = cli_scale_spec(ca->src, ca->scale, &ca->scaled_src);
    if (rc2 == CLI_OK && ca->scaled_src)
        ca->src = ca->scaled_src;
    if (rc2 == CLI_OK && ca->ome)
        rc2 = ome_destination(ca);
    return rc2;
}

/* ---- overlap of source and destination ----
 *
 * A copy into its own source is never meaningful, and with --delete-existing the destination's
 * keys are deleted before the source is read: a destination that is an ancestor of the source
 * (cp /d/p/a.zarr /d/p) empties the source and everything beside it, one inside the source
 * (cp a.zarr a.zarr/c) deletes part of it. So every copy whose two locations overlap, equal or
 * one inside the other, is refused before the destination is opened, with or without
 * --delete-existing. Locations are compared as a namespace (the driver and what names its store:
 * the file system, an s3/gcs endpoint and bucket, an lmdb environment, the spec of any other
 * driver) plus a key path; symlinks and "."/".." are resolved first. Two specs of one store that
 * are spelled differently (an s3 endpoint by two host names) are not recognised. */

typedef struct store_loc {
    char space[PATH_MAX + 256];  /* "file", "memory", "s3 <endpoint> <bucket>", ... */
    char path[PATH_MAX + 8];     /* key path: components without "." and "..", ending in '/' */
    char adapters[256];          /* kvstore adapters over the base store, outermost last: "faulty|" */
    char base_path[PATH_MAX + 8]; /* the base store's key path (path, when no adapter) */
} store_loc;

/* Appends path's components to out (a path ending in '/'), dropping empty and "." ones; ".."
 * removes the last one (never the leading '/'). false when out overflows. */
static bool append_components(char *out, size_t cap, const char *path) {
    for (const char *p = path; *p;) {
        size_t len = strcspn(p, "/"), n = strlen(out);
        if (len == 2 && p[0] == '.' && p[1] == '.') {
            if (n > 1)
                out[n - 1] = '\0';
            char *slash = strrchr(out, '/');
            if (slash)
                slash[1] = '\0';
            else
                out[0] = '\0';
        } else if (len > 0 && !(len == 1 && p[0] == '.')) {
            if (n + len + 2 > cap)
                return false;
            memcpy(out + n, p, len);
            memcpy(out + n + len, "/", 2);
        }
        p += len + (p[len] == '/');
    }
    return true;
}

/* A local path resolved as the kernel would: the realpath of its longest existing ancestor, then
 * the rest of its components; ends in '/'. false when it cannot be resolved. */
static bool resolve_local(const char *path, char *out, size_t cap) {
    char real[PATH_MAX], parent[PATH_MAX];
    if (realpath(path[0] ? path : "/", real))
        return snprintf(out, cap, "%s%s", real, strcmp(real, "/") ? "/" : "") < (int)cap;
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    size_t s = n;
    while (s > 0 && path[s - 1] != '/')
        s--;
    if (s == 0 || s >= sizeof parent) /* relative: file kvstores hold absolute paths */
        return false;
    memcpy(parent, path, s);
    parent[s] = '\0';
    char name[PATH_MAX];
    snprintf(name, sizeof name, "%.*s", (int)(n - s), path + s);
    return resolve_local(parent, out, cap) && append_components(out, cap, name);
}

static const char *member(json_object *o, const char *key) {
    json_object *v;
    return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
               ? json_object_get_string(v)
               : "";
}

/* An lmdb store: the environment (resolved) is the namespace; the key path is the spec's path
 * less the environment when it is absolute. */
static bool lmdb_loc(json_object *spec, const char *path, store_loc *loc) {
    char env[PATH_MAX];
    const char *e = member(spec, "env");
    if (e[0])
        snprintf(env, sizeof env, "%s", e);
    else { /* derived from the path: up to the first component ending in ".lmdb" */
        const char *end = strstr(path, ".lmdb");
        while (end && end[5] != '/' && end[5] != '\0')
            end = strstr(end + 5, ".lmdb");
        if (!end)
            return false;
        snprintf(env, sizeof env, "%.*s", (int)(end + 5 - path), path);
    }
    size_t n = strlen(env);
    while (n > 1 && env[n - 1] == '/')
        env[--n] = '\0';
    if (strncmp(path, env, n) == 0 && (path[n] == '/' || path[n] == '\0'))
        path += n;
    char real[PATH_MAX + 8];
    if (!resolve_local(env, real, sizeof real))
        return false;
    snprintf(loc->space, sizeof loc->space, "lmdb %s", real);
    loc->path[0] = '/', loc->path[1] = '\0';
    return append_components(loc->path, sizeof loc->path, path);
}

static bool store_location(const nds_kvstore *kv, const char *extra, store_loc *loc);

/* An adapter's store (NDS_KV_CAP_ADAPTER: faulty, versioned): its base store's location, the
 * adapter's name added to the chain, its path joined to the base's (spec holds "base" and "path"). */
static bool adapter_location(json_object *spec, const char *path, store_loc *loc) {
    json_object *b = NULL;
    if (!json_object_object_get_ex(spec, "base", &b))
        return false;
    const char *text = json_object_is_type(b, json_type_string)
                           ? json_object_get_string(b)
                           : json_object_to_json_string_ext(b, JSON_C_TO_STRING_PLAIN);
    nds_kvstore *base = NULL;
    nds_error_clear();
    if (nds_kvstore_open(&base, text, NULL) != 0)
        return false;
    bool ok = store_location(base, "", loc);
    nds_kvstore_free(base);
    size_t n = strlen(loc->adapters);
    int w = snprintf(loc->adapters + n, sizeof loc->adapters - n, "%s|", member(spec, "driver"));
    return ok && w > 0 && (size_t)w < sizeof loc->adapters - n &&
           append_components(loc->path, sizeof loc->path, path);
}

/* The namespace and key path of a store that is not an adapter (spec: its printed spec). */
static bool base_location(json_object *spec, const char *path, store_loc *loc) {
    const char *driver = member(spec, "driver");
    loc->path[0] = '/', loc->path[1] = '\0';
    if (strcmp(driver, "file") == 0) {
        snprintf(loc->space, sizeof loc->space, "file");
        return resolve_local(path, loc->path, sizeof loc->path);
    }
    if (strcmp(driver, "lmdb") == 0)
        return lmdb_loc(spec, path, loc);
    if (strcmp(driver, "memory") == 0) {
        snprintf(loc->space, sizeof loc->space, "memory");
    } else if (strcmp(driver, "s3") == 0 || strcmp(driver, "gcs") == 0) {
        snprintf(loc->space, sizeof loc->space, "%s %s %s", driver, member(spec, "endpoint"),
                 member(spec, "bucket"));
    } else { /* any other driver: the same store is the same spec (path aside) */
        json_object *copy = NULL;
        json_object_deep_copy(spec, &copy, NULL);
        if (!copy)
            return false;
        json_object_object_del(copy, "path");
        snprintf(loc->space, sizeof loc->space, "%s",
                 json_object_to_json_string_ext(copy, JSON_C_TO_STRING_PLAIN));
        json_object_put(copy);
    }
    return append_components(loc->path, sizeof loc->path, path);
}

/* The location of an open kvstore, plus extra (a spec's top-level "path", may be ""). */
static bool store_location(const nds_kvstore *kv, const char *extra, store_loc *loc) {
    char *text = NULL;
    if (nds_kvstore_spec(kv, &text) != 0)
        return false;
    json_object *spec = json_tokener_parse(text);
    nds_free(text);
    if (!spec)
        return false;
    const char *path = member(spec, "path");
    bool adapter = nds_kvstore_capabilities(kv) & NDS_KV_CAP_ADAPTER;
    if (!adapter)
        loc->adapters[0] = '\0';
    bool ok = adapter ? adapter_location(spec, path, loc) : base_location(spec, path, loc);
    json_object_put(spec);
    ok = ok && append_components(loc->path, sizeof loc->path, extra);
    if (ok && !adapter)
        memcpy(loc->base_path, loc->path, sizeof loc->base_path);
    return ok;
}

/* 0 apart, 1 equal, 2 b inside a, 3 a inside b: by whole components (both paths end in '/'). Over
 * one chain of adapters the joined key paths decide; a store with other adapters (or none) than
 * the other's may keep its keys anywhere in its base, so there the base stores' paths decide. */
static int overlap(const store_loc *a, const store_loc *b) {
    if (strcmp(a->space, b->space) != 0)
        return 0;
    bool same_chain = strcmp(a->adapters, b->adapters) == 0;
    const char *pa = same_chain ? a->path : a->base_path, *pb = same_chain ? b->path : b->base_path;
    size_t la = strlen(pa), lb = strlen(pb);
    if (strncmp(pa, pb, la < lb ? la : lb) != 0)
        return 0;
    return la == lb ? 1 : la < lb ? 2 : 3;
}

/* The destination's kvstore from the spec cp built (JSON with "kvstore", a url or an object, and
 * maybe "path"), opened without touching the array; *extra is the spec's "path" ("" if none). */
static int dst_kvstore(json_object *spec, nds_kvstore **kv, const char **extra) {
    json_object *k;
    *extra = member(spec, "path");
    if (!json_object_object_get_ex(spec, "kvstore", &k))
        return -1;
    const char *text = json_object_is_type(k, json_type_string)
                           ? json_object_get_string(k)
                           : json_object_to_json_string_ext(k, JSON_C_TO_STRING_PLAIN);
    nds_error_clear();
    return nds_kvstore_open(kv, text, NULL);
}

/* Refuses a destination that overlaps the source (see above). A destination whose store cannot be
 * opened or located is left to the open that follows, which reports it; a source whose location
 * cannot be decided is compared by its URL. */
static int check_no_overlap(nds_array *src, const char *dst_spec) {
    json_object *spec = json_tokener_parse(dst_spec);
    nds_kvstore *kv = NULL;
    const char *extra = "";
    if (!spec || dst_kvstore(spec, &kv, &extra) != 0) {
        json_object_put(spec);
        return CLI_OK;
    }
    store_loc s, d;
    const nds_kvstore *skv = nds_array_kvstore(src);
    int o = 0;
    if (store_location(kv, extra, &d)) {
        if (store_location(skv, "", &s))
            o = overlap(&s, &d);
        else
            o = strcmp(nds_kvstore_url(skv), nds_kvstore_url(kv)) == 0;
    }
    char durl[4096];
    snprintf(durl, sizeof durl, "%s%s%s", nds_kvstore_url(kv), extra[0] ? " path " : "", extra);
    nds_kvstore_free(kv);
    json_object_put(spec);
    const char *surl = nds_kvstore_url(skv);
    if (o == 1)
        return cli_fail("cp: destination %s is the source %s: refused (a copy onto itself would "
                        "destroy what it reads)", durl, surl);
    if (o == 2)
        return cli_fail("cp: destination %s is inside the source %s: refused (a copy into its own "
                        "source is never meaningful)", durl, surl);
    if (o == 3)
        return cli_fail("cp: the source %s is inside the destination %s: refused (the destination "
                        "would hold its own source; --delete-existing would delete it unread)",
                        surl, durl);
    return CLI_OK;
}

/* A failed destination open, with a hint when the fill value it was refused for came from the
 * source: formats without one (N5, precomputed) take only 0, and --fill 0 loses nothing (every
 * element is copied, fill-valued ones too). */
static int dst_open_failed(int st, const char *spec, const cp_args *ca, const uint8_t *fill) {
    const nds_error *e = nds_error_last();
    static const uint8_t zero[NDS_DTYPE_MAX_SIZE];
    if (st == NDS_EUNSUPPORTED && !ca->over.fill && memcmp(fill, zero, sizeof zero) != 0 &&
        strstr(e->message, "fill value"))
        return cli_fail("%s; cp takes the source's fill value: pass --fill 0 (every element is "
                        "copied either way)", e->message);
    return cli_fail_nds(st, spec);
}

/* schema[member] of the destination's spec, made when absent. */
static json_object *schema_child(json_object *spec, const char *member) {
    json_object *schema, *child;
    if (!json_object_object_get_ex(spec, "schema", &schema)) {
        schema = json_object_new_object();
        json_object_object_add(spec, "schema", schema);
    }
    if (!member || json_object_object_get_ex(schema, member, &child)) return member ? child : schema;
    child = json_object_new_object();
    json_object_object_add(schema, member, child);
    return child;
}

/* Where the destination's domain starts: the source's origin, plus (an OME-Zarr source) its
 * translation where that is a whole number of voxels; one that is not is said on stderr. */
static void domain_start(nds_array *src, const cli_physical *ph, int64_t *start) {
    nds_array_origin(src, start);
    for (size_t d = 0; d < ph->rank; d++) {
        if (ph->units[d].size <= 0 || ph->offset[d] == 0) continue;
        double voxels = ph->offset[d] / ph->units[d].size, whole = nearbyint(voxels);
        if (fabs(voxels - whole) <= 1e-9 * fmax(1.0, fabs(whole)) && fabs(whole) < 9e15) {
            start[d] += (int64_t)whole;
        } else if (fabs(voxels) < 9e15) {
            start[d] += (int64_t)floor(voxels); /* the voxel the translation falls in */
            fprintf(stderr, "ndstore cp: note: the source's translation in dimension %zu (%.15g %s) "
                            "is not a whole number of voxels (%.15g): the destination starts at "
                            "voxel %" PRId64 " there, and the shift of a part of a voxel is not "
                            "kept\n", d, ph->offset[d], ph->units[d].name, voxels, start[d]);
        }
    }
}

/* The source's domain origin (precomputed voxel_offset, an OME-Zarr dataset's translation in whole
 * voxels) into a precomputed destination (schema domain.inclusive_min, unless the spec gives one);
 * other destinations start at 0 (said). */
static void carry_origin(const int64_t *origin, size_t rank, json_object *spec, bool precomputed,
                         const char *format) {
    bool any = false;
    for (size_t d = 0; d < rank; d++) any |= origin[d] != 0;
    if (!any) return;
    char list[NDS_MAX_RANK * 24] = "";
    for (size_t d = 0, n = 0; d < rank; d++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s%" PRId64, d ? ", " : "", origin[d]);
    if (!precomputed) {
        fprintf(stderr, "ndstore cp: note: the source's domain starts at [%s]; the destination's "
                        "starts at 0 (%s cannot store an origin%s): its index i is the source's "
                        "origin + i\n", list, format,
                strcmp(format, "zarr3") == 0 ? "; cp --ome writes an OME-Zarr group that keeps "
                                               "it" : "");
        return;
    }
    json_object *domain = schema_child(spec, "domain");
    if (json_object_object_get_ex(domain, "inclusive_min", NULL)) return;
    json_object *min = json_object_new_array();
    for (size_t d = 0; d < rank; d++) json_object_array_add(min, json_object_new_int64(origin[d]));
    json_object_object_add(domain, "inclusive_min", min);
}

/* The source's physical units (its own, or its OME-Zarr group's) into a precomputed or N5
 * destination (schema dimension_units: "8nm"), unless the spec gives them; an OME-Zarr group (cp
 * --ome) keeps them in its multiscales; other formats cannot keep them: said on stderr. */
static void carry_units(const cli_physical *ph, json_object *spec, bool keeps, bool ome,
                        const char *format) {
    bool any = false;
    for (size_t d = 0; d < ph->rank; d++) any |= ph->units[d].size > 0;
    if (!any || ome) return;
    if (!keeps) {
        fprintf(stderr, "ndstore cp: note: the source's physical units (resolution) are not kept: "
                        "%s cannot store them%s\n", format,
                strcmp(format, "zarr3") == 0 ? " (cp --ome writes an OME-Zarr group that does)"
                                             : "");
        return;
    }
    json_object *schema = schema_child(spec, NULL);
    if (json_object_object_get_ex(schema, "dimension_units", NULL)) return;
    json_object *list = json_object_new_array();
    for (size_t d = 0; d < ph->rank; d++) {
        char text[40];
        snprintf(text, sizeof text, "%.15g%s", ph->units[d].size, ph->units[d].name);
        json_object_array_add(list, ph->units[d].size > 0 ? json_object_new_string(text) : NULL);
    }
    json_object_object_add(schema, "dimension_units", list);
}

/* Keeps the source's domain (origin, units) in a destination whose format can hold it, and says on
 * stderr what one that cannot loses, rather than leave the user to find shifted coordinates. */
static int carry_domain(nds_array *src, bool ome, char **spec) {
    json_object *o = json_tokener_parse(*spec), *driver = NULL;
    if (!o) return cli_fail("out of memory");
    json_object_object_get_ex(o, "driver", &driver);
    const char *format = driver ? json_object_get_string(driver) : "its format";
    bool precomputed = strcmp(format, "neuroglancer_precomputed") == 0;
    cli_physical ph;
    int64_t start[NDS_MAX_RANK];
    cli_physical_of(src, true, &ph);
    if (!ome) { /* an OME-Zarr group keeps the origin and translation as they are (carry_ome) */
        domain_start(src, &ph, start);
        carry_origin(start, ph.rank, o, precomputed, format);
    }
    carry_units(&ph, o, precomputed || strcmp(format, "n5") == 0, ome, format);
    char *text = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
                                                              JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
    if (!text) return cli_fail("out of memory");
    free(*spec);
    *spec = text;
    return CLI_OK;
}

/* cp --ome, after the copy: the group's zarr.json gets an OME-Zarr 0.5 multiscale of one dataset,
 * "0": SRC's axes (cli_ome_axis_names), units, voxel size as its scale (1 where SRC has no unit) and
 * the place of its first voxel as its translation (origin x voxel size + SRC's own translation). */
static int carry_ome(nds_array *src, const cp_args *ca, nds_context *ctx) {
    cli_physical ph;
    cli_physical_of(src, true, &ph);
    char names[NDS_MAX_RANK][64];
    cli_ome_axis_names(src, names);
    int64_t origin[NDS_MAX_RANK];
    nds_array_origin(src, origin);
    const char *units[NDS_MAX_RANK] = {NULL};
    double scale[NDS_MAX_RANK], translation[NDS_MAX_RANK];
    bool moved = false;
    for (size_t d = 0; d < ph.rank; d++) {
        bool has = ph.units[d].size > 0;
        units[d] = has ? ph.units[d].name : NULL;
        scale[d] = has ? ph.units[d].size : 1;
        translation[d] = (has ? ph.offset[d] : 0) + (double)origin[d] * scale[d];
        moved |= translation[d] != 0;
    }
    json_object *ms = cli_ome_multiscale_new(ph.rank, names, units);
    cli_ome_add_dataset(ms, "0", ph.rank, scale, moved ? translation : NULL);
    return cli_ome_write_group(ca->ome_group, ctx, ms);
}

/* The source's fill value as the destination's spec takes it. Strings: a string element is the
 * same JSON text in zarr v2 and v3; a bytes element (base64 in zarr v3, text in zarr v2) and a
 * fixed-width one (the typestring's own form) are left to the destination's default: cp copies
 * every element, fill-valued ones too, so no element changes. */
static json_object *string_fill(nds_array *src, nds_dtype t, const uint8_t *fill) {
    if (t == NDS_STRING) return cli_vlen_fill_json(src);
    if (t == NDS_BYTES_VLEN || t == NDS_BYTES_FIXED || t == NDS_UCS4_FIXED) return NULL;
    return cli_element_to_json(t, fill);
}

/* Opens the destination with the source's grid as defaults. The default chunk shape is the
 * source's read chunk: for a sharded source its inner chunk (the shard would make one huge chunk in
 * an unsharded destination; a sharded destination names its shard in its spec). *spec is the spec
 * it was created from (malloc'd, also on failure; free), which reopens it. */
static int open_dst(nds_array *src, const cp_args *ca, nds_context *ctx, nds_array **dst,
                    char **spec) {
    cli_schema def;
    memset(&def, 0, sizeof def);
    uint8_t fill[NDS_DTYPE_MAX_SIZE] = {0};
    nds_dtype t = nds_array_dtype(src);
    def.dtype = nds_dtype_name(t);
    char unit[16], timed[48];
    if (cli_time_unit(src, unit, sizeof unit)) { /* datetimes keep their unit: "datetime64[ns]" */
        snprintf(timed, sizeof timed, "%s[%s]", def.dtype, unit);
        def.dtype = timed;
    }
    if (cli_string_typestring(src, timed, sizeof timed)) /* fixed-width strings: "<U5", "|S8" */
        def.dtype = timed;
    def.shape_rank = def.chunk_rank = nds_array_rank(src);
    nds_array_shape(src, def.shape);
    nds_array_read_chunk_shape(src, def.chunks);
    nds_array_fill_value(src, fill);
    def.fill = string_fill(src, t, fill);
    int rc = cli_spec_build(ca->dst, &ca->over, &def, ca->delete_existing, spec);
    json_object_put(def.fill);
    if (rc == CLI_OK)
        rc = carry_domain(src, ca->ome, spec);
    if (rc == CLI_OK)
        rc = check_no_overlap(src, *spec);
    if (rc == CLI_OK) {
        nds_open_options opts = NDS_OPEN_OPTIONS_INIT;
        opts.ctx = ctx;
        nds_error_clear();
        int st = nds_array_open(dst, *spec, &opts);
        if (st != 0)
            rc = dst_open_failed(st, *spec, ca, fill);
    }
    return rc;
}

/* The destination must hold exactly the source's elements. */
static int check_same_grid(nds_array *src, nds_array *dst) {
    uint64_t s1[NDS_MAX_RANK], s2[NDS_MAX_RANK];
    size_t r1 = nds_array_rank(src), r2 = nds_array_rank(dst);
    nds_array_shape(src, s1);
    nds_array_shape(dst, s2);
    if (r1 != r2 || memcmp(s1, s2, r1 * sizeof s1[0]) != 0) {
        char a[NDS_MAX_RANK * 24], b[NDS_MAX_RANK * 24];
        cli_format_list(a, sizeof a, r1, s1);
        cli_format_list(b, sizeof b, r2, s2);
        return cli_fail("destination shape %s differs from the source's %s", b, a);
    }
    if (nds_array_dtype(src) != nds_array_dtype(dst) ||
        nds_array_dtype_size(src) != nds_array_dtype_size(dst)) /* "|S5" and "|S6" */
        return cli_fail("destination dtype %s differs from the source's %s",
                        nds_dtype_name(nds_array_dtype(dst)), nds_dtype_name(nds_array_dtype(src)));
    char u1[16], u2[16]; /* datetimes: the same counts in another unit would be other times */
    cli_time_unit(src, u1, sizeof u1);
    cli_time_unit(dst, u2, sizeof u2);
    if (strcmp(u1, u2) != 0)
        return cli_fail("destination dtype %s[%s] differs from the source's %s[%s]",
                        nds_dtype_name(nds_array_dtype(dst)), u2, nds_dtype_name(nds_array_dtype(src)), u1);
    return CLI_OK;
}

/* ---- the memory plan ---- */

/* What one chunk task in flight holds, in units of the largest object it handles (a destination
 * chunk or shard, a source read chunk): the decoded chunk, a reordered or re-encoded copy (N5's
 * big-endian transpose, precomputed's x-fastest image, a shard's inner chunks) and the encoded
 * bytes, each up to the object's size when the data does not compress. Peak RSS measured on
 * incompressible uint16 with /usr/bin/time, one thread vs two: 2x for zarr v2 and v3, sharded or
 * not, and unsharded precomputed; 3x for N5 and box-sharded precomputed, writing and reading. */
#define TASK_FACTOR 3

typedef struct cp_plan {
    uint64_t task;     /* bytes one chunk task in flight holds */
    uint64_t inflight; /* threads x task (saturated) */
    uint64_t slab;     /* slab budget handed to the tiler (it takes at least one chunk) */
    int threads;       /* threads of the context and of each call */
} cp_plan;

static uint64_t sat_mul(uint64_t a, uint64_t b) {
    uint64_t r;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

static uint64_t sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* Bytes of a box of the given shape (saturated). */
static uint64_t box_bytes(size_t rank, const uint64_t *shape, size_t elem) {
    uint64_t b = elem;
    for (size_t d = 0; d < rank; d++)
        b = sat_mul(b, shape[d]);
    return b;
}

/* The "sharding" of a precomputed array's open scale when its shards are hashed (not boxes of the
 * grid, so its chunk shape is the precomputed chunk), from info's details; NULL otherwise. *details
 * owns the result (json_object_put it, also when NULL is returned). */
static json_object *hashed_sharding(nds_array *dst, json_object **details) {
    uint64_t c[NDS_MAX_RANK], r[NDS_MAX_RANK];
    size_t rank = nds_array_rank(dst);
    nds_array_chunk_shape(dst, c);
    nds_array_read_chunk_shape(dst, r);
    *details = NULL;
    if (strcmp(nds_array_format(dst), "neuroglancer_precomputed") != 0 ||
        memcmp(c, r, rank * sizeof c[0]) != 0 || cli_details(dst, details) != 0)
        return NULL;
    json_object *scales = NULL, *open, *sharding = NULL;
    json_object_object_get_ex(*details, "scales", &scales);
    size_t n = json_object_is_type(scales, json_type_array) ? json_object_array_length(scales) : 0;
    for (size_t i = 0; i < n; i++) {
        json_object *s = json_object_array_get_idx(scales, i);
        if (json_object_object_get_ex(s, "open", &open) && json_object_get_boolean(open))
            json_object_object_get_ex(s, "sharding", &sharding);
    }
    return json_object_is_type(sharding, json_type_object) ? sharding : NULL;
}

static int64_t member_bits(json_object *o, const char *key) {
    json_object *v;
    int64_t b = json_object_object_get_ex(o, key, &v) ? json_object_get_int64(v) : 0;
    return b < 0 ? 0 : b > 62 ? 62 : b;
}

/* A hashed precomputed shard is read, rebuilt and rewritten whole by every write task touching it,
 * so it is what such a task holds: its size bounded from the sharding (chunks go to the shards in
 * runs of 2^preshift_bits by a hash: a shard gets the mean number of runs plus three standard
 * deviations). 0 for any other array. */
static uint64_t hashed_shard_bytes(nds_array *dst, uint64_t chunks, uint64_t chunk_bytes) {
    json_object *details;
    json_object *sh = hashed_sharding(dst, &details);
    uint64_t bytes = 0;
    if (sh) {
        uint64_t run = (uint64_t)1 << member_bits(sh, "preshift_bits");
        uint64_t runs = chunks / run + (chunks % run != 0);
        double mean = (double)runs / (double)((uint64_t)1 << member_bits(sh, "shard_bits"));
        double most = mean + 3 * sqrt(mean) + 1;
        bytes = sat_mul(sat_mul(most < (double)runs ? (uint64_t)most : runs, run), chunk_bytes);
    }
    json_object_put(details);
    return bytes;
}

/* Threads and slab within the budget: each thread costs its task in flight plus its chunk of the
 * slab (so every thread has a chunk to write); the slab takes what the tasks leave, at most half
 * the budget (more would not copy faster). When one thread does not fit, one thread copies and
 * the slab is half the budget (at least one chunk), as before the plan existed. */
static void plan_copy(nds_array *src, nds_array *dst, uint64_t budget, int max_threads,
                      cp_plan *p) {
    size_t rank = nds_array_rank(src), elem = nds_array_dtype_size(src);
    uint64_t shape[NDS_MAX_RANK], wc[NDS_MAX_RANK], rc[NDS_MAX_RANK], grid[NDS_MAX_RANK];
    nds_array_shape(src, shape);
    nds_array_chunk_shape(dst, wc);
    nds_array_read_chunk_shape(src, rc);
    for (size_t d = 0; d < rank; d++)
        grid[d] = wc[d] ? shape[d] / wc[d] + (shape[d] % wc[d] != 0) : 0;
    uint64_t chunk = box_bytes(rank, wc, elem);
    uint64_t held = max_u64(max_u64(chunk, box_bytes(rank, rc, elem)),
                            hashed_shard_bytes(dst, box_bytes(rank, grid, 1), chunk));
    p->task = sat_mul(TASK_FACTOR, held);
    uint64_t fit = budget / sat_add(p->task, chunk);
    p->threads = fit == 0 ? 1 : fit < (uint64_t)max_threads ? (int)fit : max_threads;
    p->inflight = sat_mul(p->task, (uint64_t)p->threads);
    if (fit == 0)
        p->slab = budget / 2;
    else
        p->slab = max_u64((uint64_t)p->threads * chunk,
                          budget / 2 < budget - p->inflight ? budget / 2 : budget - p->inflight);
}

/* Reopens both arrays in a context of exactly the plan's threads. Capping each call's threads is
 * not enough: every pool thread keeps its chunk buffers between calls, and which of a bigger pool's
 * threads join a call varies, so in the end all of them would hold a task's worth (measured: 4
 * threads' worth with calls capped at 2). DST reopens from the spec that created it, so encoding
 * parameters given only in the spec (precomputed jpeg_quality) still apply. */
static int refit(const cp_args *ca, const char *dst_spec, const cp_plan *p, nds_context **ctx,
                 nds_array **src, nds_array **dst) {
    nds_context *c = NULL;
    nds_context_options co = NDS_CONTEXT_OPTIONS_INIT;
    co.threads = p->threads;
    co.memory_budget = p->inflight < SIZE_MAX ? (size_t)p->inflight : SIZE_MAX;
    int st = nds_context_new(&c, &co);
    if (st != 0)
        return cli_fail_nds(st, "context");
    nds_array *s = NULL, *d = NULL;
    int rc = cli_open_array(ca->src, c, NDS_OPEN_EXISTING, &s);
    if (rc == CLI_OK)
        rc = cli_open_array(dst_spec, c, NDS_OPEN_EXISTING, &d);
    if (rc == CLI_OK)
        rc = check_same_grid(s, d); /* the spec that created DST opens it again: never expected */
    if (rc != CLI_OK) {
        nds_array_free(d);
        nds_array_free(s);
        nds_context_free(c);
        return rc;
    }
    nds_array_free(*dst);
    nds_array_free(*src);
    nds_context_free(*ctx);
    *src = s, *dst = d, *ctx = c;
    return CLI_OK;
}

/* ---- the copy ---- */

static int copy_slabs(nds_array *src, nds_array *dst, const cp_plan *plan) {
    size_t rank = nds_array_rank(src), elem = nds_array_dtype_size(src);
    uint64_t shape[NDS_MAX_RANK], chunks[NDS_MAX_RANK], count, bytes;
    nds_array_shape(src, shape);
    nds_array_chunk_shape(dst, chunks);
    nds_box box;
    nds_box_full(&box, rank, shape);
    int rc = cli_box_count(&box, elem, &count, &bytes);
    cli_tiler t;
    cli_tiler_init(&t, &box, elem, plan->slab, chunks);
    uint8_t *buf = rc == CLI_OK ? cli_slab_alloc(t.max_tile_bytes) : NULL;
    if (rc == CLI_OK && !buf)
        rc = cli_fail("out of memory (a slab of %" PRIu64 " bytes)", t.max_tile_bytes);
    nds_io_options io = NDS_IO_OPTIONS_INIT;
    io.threads = plan->threads;
    cli_progress bar;
    cli_progress_begin(&bar, "cp", bytes);
    double t0 = cli_now();
    nds_box sub;
    uint64_t n, done = 0;
    while (rc == CLI_OK && cli_tiler_next(&t, &sub, &n)) {
        int st = nds_array_read(src, &sub, buf, &io);
        if (st == 0)
            st = nds_array_write(dst, &sub, buf, &io);
        if (st != 0)
            rc = cli_fail_nds(st, "cp");
        done += n * elem;
        cli_progress_update(&bar, done);
    }
    cli_progress_end(&bar);
    free(buf);
    double secs = cli_now() - t0;
    if (rc == CLI_OK)
        printf("copied %" PRIu64 " elements (%" PRIu64 " bytes) to %s in %.2f s (%.1f MB/s)\n", count,
               bytes, nds_kvstore_url(nds_array_kvstore(dst)), secs,
               secs > 0 ? (double)bytes / secs / 1e6 : 0.0);
    return rc;
}

/* Variable-length arrays: elements have no fixed size, so no memory plan; slabs of rows as
 * nds_array_read_vlen returns them (strings_io.c). */
static int copy_strings(nds_array *src, nds_array *dst, int jobs) {
    uint64_t shape[NDS_MAX_RANK];
    nds_box box;
    nds_array_shape(src, shape);
    nds_box_full(&box, nds_array_rank(src), shape);
    nds_io_options io = NDS_IO_OPTIONS_INIT;
    io.threads = jobs;
    int rc = cli_copy_strings(src, dst, &box, &io);
    if (rc == CLI_OK)
        printf("copied %" PRIu64 " %s elements to %s\n", nds_box_count(&box),
               nds_dtype_name(nds_array_dtype(src)), nds_kvstore_url(nds_array_kvstore(dst)));
    return rc;
}

/* Creates the context (--jobs threads) and opens SRC and DST in it; *dst_spec reopens DST. */
static int open_arrays(const cp_args *ca, nds_context **ctx, nds_array **src, nds_array **dst,
                       char **dst_spec) {
    int rc = cli_context_new(ca->budget, (int)ca->jobs, ctx);
    if (rc == CLI_OK)
        rc = cli_open_array(ca->src, *ctx, 0, src);
    if (rc == CLI_OK)
        rc = open_dst(*src, ca, *ctx, dst, dst_spec);
    if (rc == CLI_OK)
        rc = check_same_grid(*src, *dst);
    return rc;
}

int cli_cmd_cp(int argc, char **argv) {
    cp_args ca;
    memset(&ca, 0, sizeof ca);
    int rc = parse_args(argc, argv, &ca);
    if (rc != CLI_OK) {
        json_object_put(ca.over.fill);
        free(ca.scaled_src);
        free(ca.ome_group);
        free(ca.ome_dst);
        return rc == -1 ? cli_help(help) : rc;
    }
    nds_context *ctx = NULL;
    nds_array *src = NULL, *dst = NULL;
    char *dst_spec = NULL;
    cp_plan plan;
    memset(&plan, 0, sizeof plan); /* (set by plan_copy; string arrays copy without one) */
    rc = ca.ome ? cli_ome_check_group(ca.ome_group, NULL) : CLI_OK; /* before anything is written */
    if (rc == CLI_OK)
        rc = open_arrays(&ca, &ctx, &src, &dst, &dst_spec);
    if (rc == CLI_OK && nds_dtype_is_vlen(nds_array_dtype(src))) {
        rc = copy_strings(src, dst, (int)ca.jobs);
    } else if (rc == CLI_OK) {
        plan_copy(src, dst, ca.budget, nds_context_threads(ctx), &plan);
        if (plan.threads < nds_context_threads(ctx))
            rc = refit(&ca, dst_spec, &plan, &ctx, &src, &dst);
    }
    if (rc == CLI_OK && !nds_dtype_is_vlen(nds_array_dtype(src)))
        rc = copy_slabs(src, dst, &plan);
    if (rc == CLI_OK && ca.ome)
        rc = carry_ome(src, &ca, ctx);
    nds_array_free(dst);
    nds_array_free(src);
    nds_context_free(ctx);
    free(dst_spec);
    free(ca.scaled_src);
    free(ca.ome_group);
    free(ca.ome_dst);
    json_object_put(ca.over.fill);
    return rc;
}
