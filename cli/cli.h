/* Shared declarations of the ndstore command line (cli/).
 *
 * The command line uses only the public API (the headers in include/ndstore/) plus json-c to build specs and print
 * JSON. Each command lives in cli/cmd_<name>.c and is entered as cli_cmd_<name>(argc, argv) with argv[0]
 * the command name; it returns the process exit status: 0 success, 1 failure (one line "ndstore: <message>"
 * on stderr), 2 bad usage (a message and a usage line on stderr).
 *
 * The helpers declared here (common.c, tiles.c and the files each section names) print their own
 * errors and return an exit status, so a command reads as a straight line of
 * "if ((rc = step()) != 0) goto out;". Calls run one way: main.c -> the commands -> the helpers.
 * The process is single-threaded apart from the library's own pool; nothing here is thread-safe or
 * needs to be.
 */
#ifndef NDS_CLI_H
#define NDS_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <json-c/json.h>
#include "ndstore/ndstore.h"

/** Exit statuses. */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

/** Default memory budget of cp, read and write streaming (bytes). */
#define CLI_DEFAULT_BUDGET ((uint64_t)256 << 20)
/** What a streaming slab (read, write, cp) aims at, within the budget and at least one unit: small
 *  enough that its buffer, faulted in once, is reused for every slab instead of faulting in the
 *  whole array a page at a time (measured: a 134 MB read spent most of its time in page faults with
 *  a slab the size of the array), large enough that the library's threads share each slab's chunks. */
#define CLI_SLAB_TARGET ((uint64_t)16 << 20)
/** Regions up to this many elements are printed as text when read has no -o. */
#define CLI_PRINT_LIMIT 1000

#if defined(__GNUC__)
#define CLI_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define CLI_PRINTF(a, b)
#endif

/* ---- commands (cli/cmd_<name>.c) ---- */
int cli_cmd_create(int argc, char **argv);
int cli_cmd_info(int argc, char **argv);
int cli_cmd_read(int argc, char **argv);
int cli_cmd_write(int argc, char **argv);
int cli_cmd_cp(int argc, char **argv);
int cli_cmd_ls(int argc, char **argv);
int cli_cmd_verify(int argc, char **argv);
int cli_cmd_demo(int argc, char **argv);
int cli_cmd_resize(int argc, char **argv);
int cli_cmd_attrs(int argc, char **argv);
int cli_cmd_group(int argc, char **argv);
int cli_cmd_checkpoint(int argc, char **argv);
int cli_cmd_commit(int argc, char **argv);
int cli_cmd_gc(int argc, char **argv);
int cli_cmd_log(int argc, char **argv);
int cli_cmd_tag(int argc, char **argv);
int cli_cmd_diff(int argc, char **argv);
int cli_cmd_downsample(int argc, char **argv);

int cli_cmd_serve(int argc, char **argv);

/** Prints the info report of an open array (text, or one JSON object) to out. @return exit status */
int cli_info_print(nds_array *a, bool as_json, FILE *out);

/* ---- format details (format_detail.c) ---- */
/** The format-specific view of an open array (info's "details": zarr compressor/filters/order,
 *  zarr3 codecs, key encoding, dimension names, sharding, N5 compression and spatial attributes,
 *  precomputed scales), from its metadata document, spec and attributes; a new object ({} for
 *  other formats). Prints nothing: returns 0 or the library's NDS_E* code (nds_error_last()). */
int cli_details(nds_array *a, json_object **out);
/** Prints details as info's aligned "label:       value" lines. */
void cli_details_print(nds_array *a, json_object *details, FILE *out);
/** One line for ls: "uint16 [100, 200], chunks [10, 20], zstd" (sharded: "..., sharded 2x2 per
 *  shard, zstd"; precomputed: "2 scales [8_8_8, 16_16_16]; 8_8_8: uint8 [...], ..."). */
void cli_details_summary(nds_array *a, json_object *details, char *buf, size_t cap);

/* ---- reporting (common.c) ---- */
/** Prints "ndstore: <message>" on stderr; returns CLI_FAIL. */
int cli_fail(const char *fmt, ...) CLI_PRINTF(1, 2);
/** Prints "ndstore: <last library error>" (or nds_strerror(code) when no message is set); returns
 *  CLI_FAIL. what (may be NULL) is put in front of the message when the library's message is empty. */
int cli_fail_nds(int code, const char *what);
/** Prints "ndstore: <message>" and "usage: <usage>" on stderr; returns CLI_USAGE. */
int cli_usage(const char *usage, const char *fmt, ...) CLI_PRINTF(2, 3);
/** Prints help text on stdout; returns CLI_OK. */
int cli_help(const char *text);
/** Reports the option getopt_long rejected with c ('?' unknown, ':' missing value; the optstring must
 *  start with ':'); returns CLI_USAGE. */
int cli_bad_option(const char *usage, char **argv, int c);
/** Resets getopt_long before a command parses its options (argv[0] is the command). */
void cli_getopt_reset(void);

/* ---- parsing (common.c) ---- */
/** Parses "100,200" (optionally "[100, 200]") into out[0..*n). 0, or -1 (message in err). */
int cli_parse_u64_list(const char *text, uint64_t *out, size_t cap, size_t *n, char *err, size_t errcap);
/** Parses a byte size: digits with an optional K, M, G, T suffix (powers of 1024, "MiB" and "MB" too). */
int cli_parse_size(const char *text, uint64_t *out);
/** Parses a decimal integer in [min, max]. 0 or -1. */
int cli_parse_long(const char *text, long min, long max, long *out);
/** Formats shape as "[a, b, c]" into buf. */
void cli_format_list(char *buf, size_t cap, size_t rank, const uint64_t *v);
/** Formats shape as a NumPy tuple "(a, b)", "(a,)" or "()" into buf. */
void cli_format_tuple(char *buf, size_t cap, size_t rank, const uint64_t *v);
/** Parses JSON text, rejecting trailing garbage. what names it in the message. 0 or CLI_FAIL (printed). */
int cli_json_parse(const char *text, const char *what, json_object **out);
/** Compact JSON text from the library (attributes, metadata), parsed for printing; NULL when it
 *  does not parse. json-c clamps integers beyond 64 bits, which the library keeps digit for digit:
 *  when printing the parsed value would not give text back, the value prints as text itself. */
json_object *cli_json_parse_exact(const char *text);
/** Reads a whole file (at most max bytes) into a malloc'd NUL-terminated buffer. 0 or CLI_FAIL. */
int cli_read_file(const char *path, size_t max, char **out, size_t *len);
/** Seconds since an arbitrary fixed point (monotonic). */
double cli_now(void);

/* ---- arrays (common.c; regions: region_units.c) ---- */
/** CLI_OK when text, the argument named what ("SPEC", "SRC", "URL"), holds more than blanks; else
 *  prints "WHAT is empty" and returns CLI_FAIL. An empty spec would name the current directory, so
 *  every command checks its SPEC and URL arguments before it opens anything. */
int cli_require_spec(const char *what, const char *text);
/** A context for a streaming command (read, write, cp, downsample) of --jobs threads (0: one per
 *  core) under its --memory-budget: the library's chunks in flight get half of it (the rest is the
 *  command's own slabs), so the process stays within the budget plus a fixed overhead.
 *  CLI_OK or CLI_FAIL (printed). */
int cli_context_new(uint64_t budget, int jobs, nds_context **ctx);
/** Opens an array (mode 0 = from the spec) in ctx (NULL = default). 0 or CLI_FAIL (printed). */
int cli_open_array(const char *spec, nds_context *ctx, unsigned mode, nds_array **out);
/** Sets *box from region text (NULL = the whole array) in the array's domain coordinates, or with
 *  units ("nm"; NULL = none) in physical coordinates (cli_region_from_units). 0, or CLI_FAIL (printed). */
int cli_parse_region(nds_array *a, const char *region, const char *units, nds_box *box);
/** Region text in physical units (unit: "nm", "um", ...) as region text in domain coordinates:
 *  starts and indices round down, stops up, steps must be whole voxels; dimensions without a unit
 *  are left as they are. *out is malloc'd. CLI_OK or CLI_FAIL (printed). */
int cli_region_from_units(nds_array *a, const char *region, const char *unit, char **out);
#define CLI_OPT_UNITS 0x0417
/** The shape of box with dropped dimensions removed (what a .npy file holds); returns its rank. */
size_t cli_box_out_shape(const nds_box *box, uint64_t *shape);
/** Number of elements of box, or CLI_FAIL (printed) when the count overflows; 0 for an empty box. */
int cli_box_count(const nds_box *box, size_t elem, uint64_t *count, uint64_t *bytes);

/* ---- tiles (tiles.c) ---- */
/**
 * Splits a box into tiles of about CLI_SLAB_TARGET bytes (at least one unit, at most budget bytes
 * unless one unit is larger), visited in C order of their origins. units[d] (NULL = all 1) is the tile granularity in selected indices, measured from the box's
 * first index: cp passes the destination chunk shape so each tile is a run of whole chunks. With all units
 * 1, tiles are single indices in the dimensions before the split dimension and whole in the ones after it,
 * so the tiles' C-order data concatenated is the box's C-order data (read and write stream this way).
 */
typedef struct cli_tiler {
    nds_box box;                  /**< the whole selection */
    uint64_t ext[NDS_MAX_RANK];   /**< selected indices per dimension */
    uint64_t tile[NDS_MAX_RANK];  /**< tile extent per dimension (selected indices) */
    uint64_t pos[NDS_MAX_RANK];   /**< origin of the next tile (selected indices) */
    size_t split;                 /**< dimensions 0..split are iterated; the ones after are whole */
    bool done;                    /**< no tile left */
    uint64_t max_tile_bytes;      /**< bytes of the largest tile (the first one) */
} cli_tiler;
void cli_tiler_init(cli_tiler *t, const nds_box *box, size_t elem, uint64_t budget, const uint64_t *units);
/** Sets *sub to the next tile and *count to its elements; false when there is none left. */
bool cli_tiler_next(cli_tiler *t, nds_box *sub, uint64_t *count);
/** The tiler of a streamed read or write of box (C-order data, no reordering): dimension 0 in
 *  whole rows of chunks (chunks[0], when box steps by 1 there), so no chunk is decoded or encoded
 *  once per slab it straddles; the other dimensions whole where the budget allows. */
void cli_stream_tiler_init(cli_tiler *t, const nds_box *box, size_t elem, uint64_t budget,
                           const uint64_t *chunks);
/** The I/O side of a streamed read or write (slab_ring.c): io(arg, buf, bytes) fills or drains
 *  one slab (its errors printed, CLI_FAIL returned), for each tile in order, on an I/O thread. */
typedef int (*cli_ring_io)(void *arg, uint8_t *buf, uint64_t bytes);
/** The two sides of a streamed read or write: io (on the I/O thread) moves each slab between the
 *  file and its buffer; op (on the command's thread) moves it between the buffer and the array,
 *  returning CLI_OK or CLI_FAIL with its message printed. */
typedef struct cli_stream_sides {
    bool io_fills; /* io produces the slabs (a write's input) */
    cli_ring_io io;
    void *io_arg;
    int (*op)(void *arg, const nds_box *sub, uint8_t *buf);
    void *op_arg;
} cli_stream_sides;
/** Streams every tile of t through two slabs, the file side overlapped with the array side, with
 *  a progress bar (label, bytes); the first failure stops both. */
int cli_stream_slabs(const cli_tiler *t, size_t elem, const cli_stream_sides *sides,
                     const char *label, uint64_t bytes);
/** A buffer for slabs (tiles.c): large ones are aligned for, and advised to use, transparent huge
 *  pages (a few faults instead of one per 4 KiB page). NULL when out of memory. Free with free(). */
void *cli_slab_alloc(uint64_t bytes);

/* ---- specs (spec_build.c) ---- */
/** What goes into a spec's "schema". NULL / false members are left out. */
typedef struct cli_schema {
    const char *dtype;          /**< "uint16" */
    size_t shape_rank;          /**< 0 = no shape */
    uint64_t shape[NDS_MAX_RANK];
    size_t chunk_rank;          /**< 0 = no chunk shape */
    uint64_t chunks[NDS_MAX_RANK];
    const char *codec;          /**< compact codec string ("zstd:1") */
    json_object *fill;          /**< fill value (borrowed; a new reference is taken) */
} cli_schema;

/**
 * Builds the JSON text of a spec that creates an array: spec is JSON text, "@file.json" or a URL
 * ("file:///d/a.zarr|zarr:", "memory://x|zarr:", a bare path = zarr). Members of overrides replace what
 * the spec's "schema" holds; members of defaults (may be NULL) are added only where the schema has none.
 * Sets "create": true, and "delete_existing": true when delete_existing. *out is malloc'd (free).
 * @return CLI_OK, CLI_FAIL (printed)
 */
int cli_spec_build(const char *spec, const cli_schema *overrides, const cli_schema *defaults,
                   bool delete_existing, char **out);
/** Parses a --fill value ("0", "1.5", "NaN", "true", "[1, 2]") into a new JSON value. 0 or -1. */
int cli_fill_parse(const char *text, json_object **out);
/** The kvstore part of a URL (ls, group, checkpoint): the URL less a trailing "|FORMAT:", split by
 *  the library (nds_spec_url_split, so adapters stay: "file:///d/|faulty:|zarr:" gives
 *  "file:///d/|faulty:"), into buf; JSON text is copied as it is. format (may be NULL) receives the
 *  format's name, "" when none. CLI_OK, or CLI_FAIL (printed) for a bad pipeline or a long URL. */
int cli_kvstore_url(const char *url, char *buf, size_t cap, char *format, size_t format_cap);

/* ---- scales (scale.c) ---- */
/** --scale, one option for every command that opens an array: its getopt value (above any
 *  command's own option values), its struct option entry, and its help line. */
#define CLI_OPT_SCALE 0x5ca1e
#define CLI_SCALE_OPTION {"scale", required_argument, NULL, CLI_OPT_SCALE}
#define CLI_SCALE_HELP                                                                             \
    "      --scale S           a scale of a precomputed volume: its index in scales (0),\n"   \
    "                          its key (8_8_40) or its resolution (8,8,40)\n"
/**
 * The spec that opens scale (INDEX, KEY or RESOLUTION "x,y,z") of the neuroglancer precomputed
 * volume spec opens, into *out (malloc'd, free); *out = NULL when scale is NULL (spec as it is).
 * Where spec names no array, an OME-Zarr multiscale group (a URL or path) has its datasets as
 * scales (KEY: path, RESOLUTION: its scale transformation). CLI_OK, or CLI_FAIL (printed): an
 * unknown scale (the message lists the scales), another format (refused), a spec that does not
 * open.
 */
int cli_scale_spec(const char *spec, const char *scale, char **out);

/* ---- progress (progress.c) ---- */
/** A progress bar on stderr, drawn only when stderr is a terminal and the work has run a while. */
typedef struct cli_progress {
    bool enabled;       /**< stderr is a terminal */
    bool drawn;         /**< something is on the line and must be cleared */
    const char *label;
    uint64_t total;     /**< bytes of work */
    double start;       /**< cli_now() at begin */
    double last_draw;
} cli_progress;
void cli_progress_begin(cli_progress *p, const char *label, uint64_t total);
void cli_progress_update(cli_progress *p, uint64_t done);
/** Clears the bar (if drawn). */
void cli_progress_end(cli_progress *p);

#endif
