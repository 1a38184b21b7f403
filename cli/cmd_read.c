/* `ndstore read SPEC [--region R] [-o OUT.npy|OUT.png|OUT.tif|-] [--raw]`: reads a region into a
 * .npy file (C order, host byte order, dropped dimensions left out of the shape), raw bytes, a PNG
 * or TIFF image (image_out.c, chosen by the name's extension), or, for small regions with no -o,
 * prints it as NumPy prints arrays.
 *
 * Large regions stream: the region is cut into tiles of at most --memory-budget bytes whose C-order data
 * concatenated is the region's, so memory stays bounded whatever the region's size. A failed write to a
 * file removes the partial file. Omits: Fortran-order output.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "cli.h"
#include "image_out.h"
#include "npy.h"
#include "strings_io.h"

static const char usage[] =
    "ndstore read SPEC [--region R [--units U]] [-o OUT.npy|OUT.png|OUT.tif|-] [--raw] [--jobs N]\n"
    "                  [--scale S]";

static const char help[] =
    "usage: ndstore read SPEC [--region R [--units U]] [-o OUT.npy|OUT.png|OUT.tif|-] [--raw]\n"
    "                         [--jobs N] [--memory-budget BYTES] [--scale S]\n"
    "\n"
    "Read a region of an array. With -o, write a .npy file (- = stdout), a PNG or a TIFF image, by the\n"
    "file's extension; with no -o, print regions of up to 1000 elements as text, as NumPy prints arrays.\n"
    "Variable-length arrays (string, bytes) are written as JSON Lines instead (-o FILE.jsonl, or\n"
    "printed): one JSON string per element in C order, base64 for bytes.\n"
    "\n"
    "  -r, --region R          NumPy-style region, e.g. '[0:512, 100:200:2, 7]' (default: everything);\n"
    "                          an integer index leaves that dimension out of the .npy shape\n"
    "  -o, --output FILE       output .npy file (or - for stdout); .png: a 2-D region of uint8 or\n"
    "                          uint16 (dimensions of size 1 do not count); .tif/.tiff: 2-D, or 3-D\n"
    "                          as one page per index of the region's first dimension, of 8-, 16-,\n"
    "                          32-bit integers, float32 or float64. Rows are the image's second-last\n"
    "                          dimension, columns its last. Other extensions are refused\n"
    "      --rgb               .png/.tif: the region's last dimension (3 or 4) is each pixel's RGB\n"
    "                          or RGBA colour\n"
    "      --raw               write raw bytes (C order, host byte order) instead of .npy\n"
    "  -j, --jobs N            threads for decoding (default: the number of cores)\n"
    "      --memory-budget B   memory for the slabs and the chunks in flight (default 256M)\n"
    "      --units U           the region's numbers are physical coordinates in U (nm, um, mm, ...)\n"
    "                          where the array has units (precomputed: its resolution, nm)\n"
    CLI_SCALE_HELP
    "  -h, --help              show this help\n"
    "\n"
    "Example: ndstore read /tmp/a.zarr --region '[0:10, 5]'\n";

enum { OPT_RAW = 256, OPT_BUDGET, OPT_RGB };

static const struct option options[] = {
    {"region", required_argument, NULL, 'r'},
    {"output", required_argument, NULL, 'o'},
    {"raw", no_argument, NULL, OPT_RAW},
    {"rgb", no_argument, NULL, OPT_RGB},
    {"jobs", required_argument, NULL, 'j'},
    {"memory-budget", required_argument, NULL, OPT_BUDGET},
    CLI_SCALE_OPTION,
    {"units", required_argument, NULL, CLI_OPT_UNITS},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

typedef struct read_args {
    const char *spec, *region, *output;
    const char *scale; /* --scale, or NULL */
    const char *units; /* --units, or NULL */
    bool raw, rgb;
    long jobs;
    uint64_t budget;
} read_args;

/* Parses argv; returns CLI_OK, CLI_USAGE (printed), or -1 for --help. */
static int parse_args(int argc, char **argv, read_args *ra) {
    memset(ra, 0, sizeof *ra);
    ra->budget = CLI_DEFAULT_BUDGET;
    int c;
    cli_getopt_reset();
    while ((c = getopt_long(argc, argv, ":hr:o:j:", options, NULL)) != -1) {
        switch (c) {
        case 'h': return -1;
        case 'r': ra->region = optarg; break;
        case 'o': ra->output = optarg; break;
        case OPT_RAW: ra->raw = true; break;
        case OPT_RGB: ra->rgb = true; break;
        case CLI_OPT_SCALE: ra->scale = optarg; break;
        case CLI_OPT_UNITS: ra->units = optarg; break;
        case 'j':
            if (cli_parse_long(optarg, 1, 1024, &ra->jobs) != 0)
                return cli_usage(usage, "--jobs: expected 1..1024, got '%s'", optarg);
            break;
        case OPT_BUDGET:
            if (cli_parse_size(optarg, &ra->budget) != 0 || ra->budget == 0)
                return cli_usage(usage, "--memory-budget: not a size: '%s'", optarg);
            break;
        default: return cli_bad_option(usage, argv, c);
        }
    }
    if (argc - optind != 1)
        return cli_usage(usage, argc - optind == 0 ? "missing SPEC" : "too many arguments");
    ra->spec = argv[optind];
    if (cli_require_spec("SPEC", ra->spec) != CLI_OK)
        return CLI_FAIL;
    if (ra->raw && !ra->output)
        return cli_usage(usage, "--raw needs -o FILE or -o -");
    return CLI_OK;
}

static int print_region(nds_array *a, const nds_box *box, uint64_t count, uint64_t bytes,
                        const nds_io_options *io) {
    if (count > CLI_PRINT_LIMIT)
        return cli_usage(usage, "the region has %" PRIu64 " elements; only up to %d are printed: "
                                "give -o FILE.npy or -o -", count, CLI_PRINT_LIMIT);
    void *buf = malloc(bytes ? bytes : 1);
    if (!buf)
        return cli_fail("out of memory");
    int rc = count ? nds_array_read(a, box, buf, io) : 0;
    if (rc == 0) {
        uint64_t shape[NDS_MAX_RANK];
        size_t rank = cli_box_out_shape(box, shape);
        cli_print_array_sized(stdout, nds_array_dtype(a), nds_array_dtype_size(a), buf, rank, shape);
    }
    free(buf);
    return rc == 0 ? CLI_OK : cli_fail_nds(rc, "read");
}

typedef struct output {
    FILE *f;
    const char *name;
} output;

/* The ring's I/O side: one slab to the output. */
static int output_slab(void *arg, uint8_t *buf, uint64_t bytes) {
    output *o = arg;
    if (fwrite(buf, 1, bytes, o->f) != bytes)
        return cli_fail("%s: %s", o->name, strerror(errno));
    return CLI_OK;
}

typedef struct read_slabs {
    nds_array *a;
    const nds_io_options *io;
} read_slabs;

/* The array side: one slab of the region. */
static int read_slab(void *arg, const nds_box *sub, uint8_t *buf) {
    read_slabs *r = arg;
    int st = nds_array_read(r->a, sub, buf, r->io);
    return st == 0 ? CLI_OK : cli_fail_nds(st, "read");
}

/* Reads the region slab by slab into sink (its C-order bytes in order); each slab is written out
 * while the next one is read. */
static int stream_region(nds_array *a, const nds_box *box, uint64_t bytes, const read_args *ra,
                         const nds_io_options *io, cli_ring_io sink, void *sink_arg) {
    size_t elem = nds_array_dtype_size(a);
    uint64_t chunks[NDS_MAX_RANK];
    nds_array_read_chunk_shape(a, chunks);
    cli_tiler t;
    /* two slabs in half the budget: the library's chunks in flight have the other (cli_context_new) */
    cli_stream_tiler_init(&t, box, elem, ra->budget / 4, chunks);
    read_slabs r = {a, io};
    cli_stream_sides sides = {false, sink, sink_arg, read_slab, &r};
    return cli_stream_slabs(&t, elem, &sides, "read", bytes);
}

/* A PNG or TIFF image of the region (image_out.c checks that the region is one). */
static int write_image(nds_array *a, const nds_box *box, uint64_t bytes, const read_args *ra,
                       const nds_io_options *io, cli_out_kind kind) {
    uint64_t shape[NDS_MAX_RANK];
    size_t rank = cli_box_out_shape(box, shape);
    cli_image *img = NULL;
    int rc = cli_image_open(&img, kind, ra->output, nds_array_dtype(a), rank, shape, ra->rgb);
    if (rc != CLI_OK)
        return rc;
    return cli_image_close(img, stream_region(a, box, bytes, ra, io, cli_image_write, img));
}

static int write_output(nds_array *a, const nds_box *box, uint64_t bytes, const read_args *ra,
                        const nds_io_options *io) {
    cli_out_kind kind; /* by the name's extension: never a .npy under an image's name */
    int rc = cli_output_kind(ra->output, ra->raw, usage, &kind);
    if (rc != CLI_OK)
        return rc;
    if (kind == CLI_OUT_PNG || kind == CLI_OUT_TIFF)
        return write_image(a, box, bytes, ra, io, kind);
    if (ra->rgb)
        return cli_usage(usage, "--rgb applies to images: -o FILE.png or FILE.tif");
    nds_dtype t = nds_array_dtype(a);
    char unit[16];
    cli_dtype_detail(a, unit, sizeof unit); /* datetimes: "<M8[ns]"; strings: "|S12" */
    if (!ra->raw && !cli_npy_descr_unit(t, unit))
        return cli_fail("%s has no .npy dtype: use --raw", nds_dtype_name(t));
    bool to_stdout = strcmp(ra->output, "-") == 0;
    if (to_stdout && isatty(STDOUT_FILENO))
        return cli_usage(usage, "refusing to write binary data to a terminal: redirect -o - or give a file");
    FILE *f = to_stdout ? stdout : fopen(ra->output, "wb");
    if (!f)
        return cli_fail("%s: %s", ra->output, strerror(errno));
    /* Only a regular file holding a partial read is removed on failure: never a device (-o
     * /dev/full once removed /dev/full itself), a FIFO or stdout. */
    struct stat st;
    bool remove_on_failure = !to_stdout && fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode);
    if (!ra->raw) {
        uint64_t shape[NDS_MAX_RANK];
        char err[256];
        size_t rank = cli_box_out_shape(box, shape);
        if (cli_npy_write_header(f, t, unit, rank, shape, err, sizeof err) != 0)
            rc = cli_fail("%s: %s", ra->output, err);
    }
    output out = {f, ra->output};
    if (rc == CLI_OK)
        rc = stream_region(a, box, bytes, ra, io, output_slab, &out);
    if (fflush(f) != 0 && rc == CLI_OK)
        rc = cli_fail("%s: %s", ra->output, strerror(errno));
    if (!to_stdout && fclose(f) != 0 && rc == CLI_OK)
        rc = cli_fail("%s: %s", ra->output, strerror(errno));
    if (rc != CLI_OK && remove_on_failure)
        unlink(ra->output);
    return rc;
}

/* A variable-length array (string, bytes): JSON Lines (strings_io.c), not .npy or raw bytes. */
static int read_variable_length(nds_array *a, const nds_box *box, const read_args *ra,
                                const nds_io_options *io) {
    if (ra->raw)
        return cli_usage(usage, "--raw: %s elements have variable length; without --raw, -o "
                                "FILE.jsonl writes them as JSON Lines",
                         nds_dtype_name(nds_array_dtype(a)));
    return cli_read_strings(a, box, ra->output, io);
}

int cli_cmd_read(int argc, char **argv) {
    read_args ra;
    int rc = parse_args(argc, argv, &ra);
    if (rc != CLI_OK)
        return rc == -1 ? cli_help(help) : rc;
    nds_context *ctx = NULL;
    nds_array *a = NULL;
    nds_box box;
    uint64_t count = 0, bytes = 0;
    char *scaled = NULL;
    rc = cli_scale_spec(ra.spec, ra.scale, &scaled);
    if (rc == CLI_OK)
        rc = cli_context_new(ra.budget, (int)ra.jobs, &ctx);
    if (rc == CLI_OK)
        rc = cli_open_array(scaled ? scaled : ra.spec, ctx, 0, &a);
    if (rc == CLI_OK)
        rc = cli_parse_region(a, ra.region, ra.units, &box);
    if (rc == CLI_OK)
        rc = cli_box_count(&box, nds_array_dtype_size(a), &count, &bytes);
    nds_io_options io = NDS_IO_OPTIONS_INIT;
    io.threads = (int)ra.jobs;
    if (rc == CLI_OK && nds_dtype_is_vlen(nds_array_dtype(a)))
        rc = read_variable_length(a, &box, &ra, &io);
    else if (rc == CLI_OK)
        rc = ra.output ? write_output(a, &box, bytes, &ra, &io) : print_region(a, &box, count, bytes, &io);
    nds_array_free(a);
    nds_context_free(ctx);
    free(scaled);
    return rc;
}
