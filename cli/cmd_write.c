/* `ndstore write SPEC [--region R] -i IN.npy|- [--raw] [--txn MODE]`: writes .npy files (or raw bytes) into
 * regions. Several --region/-i pairs may be given; with --txn they are staged in one transaction and
 * committed together (isolated: per chunk; atomic: all or nothing, on stores with multi-key commit).
 *
 * The region's shape with dropped dimensions removed must equal the file's shape, and the file's dtype
 * must be the array's (no conversion): either mismatch is an error naming both sides. Data streams in
 * tiles of at most --memory-budget bytes (C-order files); a Fortran-order file is reordered in memory, so
 * it must fit the budget. Each touched chunk is committed by itself (the library's isolated per-chunk
 * write); on failure, chunks already written stay written.
 * Omits: dtype conversion, broadcasting.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "npy.h"
#include "strings_io.h"

static const char usage[] =
    "ndstore write SPEC [--region R -i IN.npy|-]... [--raw] [--txn isolated|atomic | --prepare]\n"
    "                   [--jobs N] [--scale S] [--units U]";

static const char help[] =
    "usage: ndstore write SPEC [--region R -i IN.npy|-]... [--raw] [--txn isolated|atomic | --prepare]\n"
    "                         [--jobs N] [--memory-budget BYTES] [--scale S] [--units U]\n"
    "\n"
    "Write .npy files (or raw bytes) into regions of an existing array. Each region's shape (without\n"
    "dimensions selected by an integer index) must equal its file's shape, and the dtypes must match.\n"
    "Several --region/-i pairs are paired in order. Variable-length arrays (string, bytes) take JSON\n"
    "Lines (IN.jsonl): one JSON string per element of the region in C order, base64 for bytes.\n"
    "\n"
    "  -r, --region R          NumPy-style region, e.g. '[0:512, 100:200]' (default: everything)\n"
    "  -i, --input FILE        input .npy file, or - for stdin\n"
    "      --raw               the input is raw bytes (C order, host byte order) of the region\n"
    "      --txn MODE          stage every pair in one transaction and commit it at the end:\n"
    "                          isolated (each chunk by itself) or atomic (all or nothing; needs a store\n"
    "                          with multi-key commit such as memory, lmdb or URL|versioned:). Without\n"
    "                          --txn each chunk is committed as it is written.\n"
    "      --prepare           on a versioned store: stage every pair, store them where no reader\n"
    "                          sees them and print \"prepared TOKEN\"; `ndstore commit URL TOKEN...`\n"
    "                          publishes the parts of many processes as one version\n"
    "  -j, --jobs N            threads for encoding (default: the number of cores)\n"
    "      --memory-budget B   memory for the slabs and the chunks in flight (default 256M)\n"
    "      --units U           the region's numbers are physical coordinates in U (nm, um, mm, ...)\n"
    "                          where the array has units (precomputed: its resolution, nm)\n"
    CLI_SCALE_HELP
    "  -h, --help              show this help\n"
    "\n"
    "Example: ndstore write /tmp/a.zarr --region '[0:10, 0:20]' -i block.npy\n"
    "         ndstore write 'lmdb:///d/c.lmdb/a/|zarr:' -r '[0:4]' -i a.npy -r '[8:12]' -i b.npy --txn atomic\n";

enum { OPT_RAW = 256, OPT_BUDGET, OPT_TXN, OPT_PREPARE };
#define MAX_PAIRS 64

static const struct option options[] = {
    {"region", required_argument, NULL, 'r'},
    {"input", required_argument, NULL, 'i'},
    {"raw", no_argument, NULL, OPT_RAW},
    {"jobs", required_argument, NULL, 'j'},
    {"memory-budget", required_argument, NULL, OPT_BUDGET},
    {"txn", required_argument, NULL, OPT_TXN},
    {"prepare", no_argument, NULL, OPT_PREPARE},
    CLI_SCALE_OPTION,
    {"units", required_argument, NULL, CLI_OPT_UNITS},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

typedef struct write_args {
    const char *spec;
    const char *scale; /* --scale, or NULL */
    const char *units; /* --units, or NULL */
    const char *regions[MAX_PAIRS], *inputs[MAX_PAIRS];
    size_t nregions, ninputs;
    bool raw;
    long jobs;
    uint64_t budget;
    nds_txn_mode txn; /* 0 = no transaction */
    bool prepare;     /* prepare the transaction instead of committing it */
} write_args;

static int add_pair_part(const char **list, size_t *n, const char *value) {
    if (*n == MAX_PAIRS) return cli_usage(usage, "at most %d --region/-i pairs", MAX_PAIRS);
    list[(*n)++] = value;
    return CLI_OK;
}

static int check_pairs(write_args *wa) {
    if (wa->ninputs == 0) return cli_usage(usage, "missing -i IN.npy (or -i - for stdin)");
    if (wa->nregions == 0 && wa->ninputs == 1) wa->regions[wa->nregions++] = NULL; /* everything */
    if (wa->nregions != wa->ninputs)
        return cli_usage(usage, "%zu --region and %zu -i options: each region needs its input", wa->nregions,
                         wa->ninputs);
    size_t stdin_uses = 0;
    for (size_t i = 0; i < wa->ninputs; i++) stdin_uses += strcmp(wa->inputs[i], "-") == 0;
    if (stdin_uses > 1) return cli_usage(usage, "stdin (-i -) can be read only once");
    return CLI_OK;
}

/* Parses argv; returns CLI_OK, CLI_USAGE (printed), or -1 for --help. */
static int parse_args(int argc, char **argv, write_args *wa) {
    memset(wa, 0, sizeof *wa);
    wa->budget = CLI_DEFAULT_BUDGET;
    int c;
    cli_getopt_reset();
    while ((c = getopt_long(argc, argv, ":hr:i:j:", options, NULL)) != -1) {
        switch (c) {
        case 'h': return -1;
        case 'r':
            if (add_pair_part(wa->regions, &wa->nregions, optarg) != CLI_OK) return CLI_USAGE;
            break;
        case 'i':
            if (add_pair_part(wa->inputs, &wa->ninputs, optarg) != CLI_OK) return CLI_USAGE;
            break;
        case OPT_TXN:
            if (strcmp(optarg, "isolated") == 0) wa->txn = NDS_TXN_ISOLATED;
            else if (strcmp(optarg, "atomic") == 0) wa->txn = NDS_TXN_ATOMIC;
            else return cli_usage(usage, "--txn: expected isolated or atomic, got '%s'", optarg);
            break;
        case OPT_PREPARE: wa->prepare = true; break;
        case CLI_OPT_SCALE: wa->scale = optarg; break;
        case CLI_OPT_UNITS: wa->units = optarg; break;
        case OPT_RAW: wa->raw = true; break;
        case 'j':
            if (cli_parse_long(optarg, 1, 1024, &wa->jobs) != 0)
                return cli_usage(usage, "--jobs: expected 1..1024, got '%s'", optarg);
            break;
        case OPT_BUDGET:
            if (cli_parse_size(optarg, &wa->budget) != 0 || wa->budget == 0)
                return cli_usage(usage, "--memory-budget: not a size: '%s'", optarg);
            break;
        default: return cli_bad_option(usage, argv, c);
        }
    }
    if (argc - optind != 1)
        return cli_usage(usage, argc - optind == 0 ? "missing SPEC" : "too many arguments");
    wa->spec = argv[optind];
    if (cli_require_spec("SPEC", wa->spec) != CLI_OK)
        return CLI_FAIL;
    if (wa->prepare && wa->txn) return cli_usage(usage, "--prepare and --txn exclude each other");
    if (wa->prepare) wa->txn = NDS_TXN_ATOMIC;
    return check_pairs(wa);
}

/* Everything one write needs. */
typedef struct write_job {
    nds_array *a;
    nds_box box;
    nds_dtype dtype;
    size_t elem;
    uint64_t count, bytes;
    FILE *in;
    const char *name;    /* input name for messages */
    bool swap;           /* input bytes are in the other byte order */
    nds_io_options io;
    uint64_t budget;
    uint64_t read_done; /* input bytes read so far (by the ring's I/O thread while streaming) */
} write_job;

static int read_input(write_job *w, void *buf, uint64_t n, uint64_t done) {
    size_t got = fread(buf, w->elem, n, w->in);
    if (got != n) {
        if (ferror(w->in))
            return cli_fail("%s: %s", w->name, strerror(errno));
        return cli_fail("%s: input ended after %" PRIu64 " of %" PRIu64 " data bytes", w->name,
                        done + got * w->elem, w->bytes);
    }
    if (w->swap)
        cli_byteswap(buf, n * w->elem / cli_swap_unit(w->dtype), cli_swap_unit(w->dtype));
    return CLI_OK;
}

/* The ring's I/O side: the next slab of the input. */
static int input_slab(void *arg, uint8_t *buf, uint64_t bytes) {
    write_job *w = arg;
    int rc = read_input(w, buf, bytes / w->elem, w->read_done);
    w->read_done += bytes;
    return rc;
}

/* The array side: one slab into the region. */
static int write_slab(void *arg, const nds_box *sub, uint8_t *buf) {
    write_job *w = arg;
    int st = nds_array_write(w->a, sub, buf, &w->io);
    return st == 0 ? CLI_OK : cli_fail_nds(st, "write");
}

/* C-order input: slab by slab; the next slab is read in while the library writes one. */
static int stream_write(write_job *w) {
    uint64_t chunks[NDS_MAX_RANK];
    nds_array_chunk_shape(w->a, chunks);
    cli_tiler t;
    /* two slabs in half the budget: the library's chunks in flight have the other (cli_context_new) */
    cli_stream_tiler_init(&t, &w->box, w->elem, w->budget / 4, chunks);
    cli_stream_sides sides = {true, input_slab, w, write_slab, w};
    return cli_stream_slabs(&t, w->elem, &sides, "write", w->bytes);
}

/* Fortran-order input: the whole block is reordered in memory (read into one copy, reordered
 * into another), so both copies must fit the budget. */
static int fortran_write(write_job *w, const cli_npy_header *h) {
    if (w->bytes > w->budget / 2)
        return cli_fail("%s: a Fortran-order file of %" PRIu64 " bytes is reordered in memory, in two "
                        "copies larger than the memory budget (%" PRIu64 "); raise --memory-budget or "
                        "save it in C order", w->name, w->bytes, w->budget);
    uint8_t *src = malloc(w->bytes), *dst = malloc(w->bytes);
    int rc = src && dst ? read_input(w, src, w->count, 0) : cli_fail("out of memory");
    if (rc == CLI_OK) {
        cli_fortran_to_c(h->rank, h->shape, w->elem, dst, src);
        int st = nds_array_write(w->a, &w->box, dst, &w->io);
        if (st != 0)
            rc = cli_fail_nds(st, "write");
    }
    free(src);
    free(dst);
    return rc;
}

/* Checks a .npy header against the region: same dtype, same shape. */
static int check_header(write_job *w, const cli_npy_header *h) {
    char unit[16];
    cli_dtype_detail(w->a, unit, sizeof unit); /* a time unit, or a string width */
    if (!cli_npy_holds(h, w->dtype, unit)) /* also '|u1' for float8, '<M8[ns]' for datetime64[ns] */
        return cli_fail("dtype mismatch: %s holds %s ('%s'), the array is %s%s%s%s (.npy '%s')",
                        w->name, nds_dtype_name(h->dtype), h->descr, nds_dtype_name(w->dtype),
                        unit[0] ? "[" : "", unit, unit[0] ? "]" : "",
                        cli_npy_descr_unit(w->dtype, unit) ? cli_npy_descr_unit(w->dtype, unit) : "none");
    uint64_t shape[NDS_MAX_RANK];
    size_t rank = cli_box_out_shape(&w->box, shape);
    if (rank != h->rank || memcmp(shape, h->shape, rank * sizeof shape[0]) != 0) {
        char region[NDS_MAX_RANK * 72], s1[NDS_MAX_RANK * 24], s2[NDS_MAX_RANK * 24];
        nds_box_format(&w->box, region, sizeof region);
        cli_format_tuple(s1, sizeof s1, rank, shape);
        cli_format_tuple(s2, sizeof s2, h->rank, h->shape);
        return cli_fail("shape mismatch: region %s has shape %s, %s has shape %s", region, s1, w->name, s2);
    }
    return CLI_OK;
}

static int write_npy(write_job *w) {
    cli_npy_header h;
    char err[256];
    if (cli_npy_read_header(w->in, &h, err, sizeof err) != 0)
        return cli_fail("%s: %s", w->name, err);
    int rc = check_header(w, &h);
    if (rc != CLI_OK)
        return rc;
    w->swap = h.swap;
    if (h.fortran_order && h.rank > 1 && w->count > 1)
        return fortran_write(w, &h);
    return stream_write(w);
}

static int write_raw(write_job *w) {
    int rc = stream_write(w);
    if (rc == CLI_OK && fgetc(w->in) != EOF)
        rc = cli_fail("%s: input is longer than the region's %" PRIu64 " bytes", w->name, w->bytes);
    return rc;
}

/* A variable-length array (string, bytes): JSON Lines (strings_io.c). */
static int write_variable_length(write_job *w, const write_args *wa) {
    if (wa->raw)
        return cli_usage(usage, "--raw: %s elements have variable length; give them as JSON Lines",
                         nds_dtype_name(w->dtype));
    return cli_write_strings(w->a, &w->box, w->in, w->name, &w->io, &w->bytes);
}

static int run(write_job *w, const write_args *wa, const char *input) {
    bool from_stdin = strcmp(input, "-") == 0;
    w->name = from_stdin ? "stdin" : input;
    w->in = from_stdin ? stdin : fopen(input, "rb");
    if (!w->in)
        return cli_fail("%s: %s", input, strerror(errno));
    int rc = nds_dtype_is_vlen(w->dtype) ? write_variable_length(w, wa)
             : wa->raw                   ? write_raw(w)
                                         : write_npy(w);
    if (!from_stdin)
        fclose(w->in);
    if (rc == CLI_OK) {
        char region[NDS_MAX_RANK * 72];
        nds_box_format(&w->box, region, sizeof region);
        printf("%s %" PRIu64 " elements (%" PRIu64 " bytes) to %s\n", w->io.txn ? "staged" : "wrote", w->count,
               w->bytes, region);
    }
    return rc;
}

/* Writes one --region/-i pair. */
static int write_pair(write_job *w, const write_args *wa, size_t i) {
    int rc = cli_parse_region(w->a, wa->regions[i], wa->units, &w->box);
    if (rc == CLI_OK)
        rc = cli_box_count(&w->box, w->elem, &w->count, &w->bytes);
    return rc == CLI_OK ? run(w, wa, wa->inputs[i]) : rc;
}

/* Prints "prepared TOKEN": the token `ndstore commit` takes. */
static int prepare(nds_txn *txn) {
    char *token = NULL;
    int st = nds_txn_prepare(txn, &token);
    if (st != 0) return cli_fail_nds(st, "prepare");
    printf("prepared %s\n", token);
    nds_free(token);
    return CLI_OK;
}

static int commit(nds_txn *txn, nds_txn_mode mode, size_t pairs) {
    int st = nds_txn_commit(txn);
    if (st != 0)
        return cli_fail_nds(st, "commit");
    printf("committed %s transaction of %zu region%s\n", mode == NDS_TXN_ATOMIC ? "an atomic" : "an isolated",
           pairs, pairs == 1 ? "" : "s");
    return CLI_OK;
}

int cli_cmd_write(int argc, char **argv) {
    write_args wa;
    int rc = parse_args(argc, argv, &wa);
    if (rc != CLI_OK)
        return rc == -1 ? cli_help(help) : rc;
    write_job w;
    memset(&w, 0, sizeof w);
    w.io = (nds_io_options)NDS_IO_OPTIONS_INIT;
    w.io.threads = (int)wa.jobs;
    w.budget = wa.budget;
    nds_txn *txn = NULL;
    nds_context *ctx = NULL;
    char *scaled = NULL;
    rc = cli_scale_spec(wa.spec, wa.scale, &scaled);
    if (rc == CLI_OK)
        rc = cli_context_new(wa.budget, (int)wa.jobs, &ctx);
    if (rc == CLI_OK)
        rc = cli_open_array(scaled ? scaled : wa.spec, ctx, 0, &w.a);
    if (rc == CLI_OK && wa.txn) {
        nds_txn_options to = NDS_TXN_OPTIONS_INIT;
        to.mode = wa.txn;
        int st = nds_txn_begin(&txn, &to);
        rc = st ? cli_fail_nds(st, "transaction") : CLI_OK;
        w.io.txn = txn;
    }
    if (rc == CLI_OK) {
        w.dtype = nds_array_dtype(w.a);
        w.elem = nds_array_dtype_size(w.a);
    }
    for (size_t i = 0; rc == CLI_OK && i < wa.nregions; i++) rc = write_pair(&w, &wa, i);
    if (rc == CLI_OK && txn)
        rc = wa.prepare ? prepare(txn) : commit(txn, wa.txn, wa.nregions);
    nds_txn_free(txn); /* aborts what was not committed */
    nds_array_free(w.a);
    nds_context_free(ctx);
    free(scaled);
    return rc;
}
