/* ndstore command line: dispatch to the commands, global --help and --version, and the helpers every
 * command shares (error reporting, option and number parsing, opening arrays, splitting boxes into tiles).
 *
 * Omits: configuration files and environment defaults; every setting is an option or part of the spec.
 * Threading: the command line itself is single-threaded; the library runs its own pool.
 * Ownership: helpers that allocate say so; everything else is borrowed.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <time.h>
#include "cli.h"

typedef struct cli_command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} cli_command;

static const cli_command commands[] = {
    {"info", "show an array's format, shape, dtype, chunks, codec, stored size and format detail",
     cli_cmd_info},
    {"create", "create an array from a spec or URL", cli_cmd_create},
    {"read", "read a region to .npy, raw bytes, or the terminal", cli_cmd_read},
    {"write", "write a .npy file or raw bytes into a region", cli_cmd_write},
    {"cp", "copy an array into a new array (any format and store), streaming", cli_cmd_cp},
    {"downsample", "build a multiscale pyramid: precomputed scales or an OME-Zarr group", cli_cmd_downsample},
    {"ls", "list the keys under a kvstore URL with their sizes, naming the arrays", cli_cmd_ls},
    {"verify", "decode every stored chunk and report the bad ones", cli_cmd_verify},
    {"resize", "change an array's shape", cli_cmd_resize},
    {"attrs", "print or replace an array's user attributes", cli_cmd_attrs},
    {"group", "create a group (and its parents), or consolidate its metadata", cli_cmd_group},
    {"checkpoint", "mark a checkpoint complete, or check whether it is", cli_cmd_checkpoint},
    {"commit", "publish prepared parts as one version of a versioned store", cli_cmd_commit},
    {"gc", "delete what no kept version of a versioned store references", cli_cmd_gc},
    {"log", "list the versions of a versioned store, newest first", cli_cmd_log},
    {"tag", "name a version of a versioned store (tags never move)", cli_cmd_tag},
    {"diff", "show the keys and chunks that changed between two versions", cli_cmd_diff},
    {"demo", "multi-process writers on local files, checked element by element", cli_cmd_demo},
    {"serve", "serve a store's keys over HTTP, read-only (byte ranges, CORS), for neuroglancer",
     cli_cmd_serve},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static const char main_usage[] = "ndstore [--help | --version] <command> [options] (ndstore --help lists them)";

static void print_main_help(void) {
    printf("usage: ndstore <command> [options]\n\nCommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        printf("  %-10s %s\n", commands[i].name, commands[i].summary);
    printf("\nRun `ndstore <command> --help` for a command's options.\n"
           "SPEC is JSON text, @file.json, or a URL such as file:///d/a.zarr|zarr: or a bare path.\n"
           "Exit status: 0 success, 1 failure, 2 bad usage.\n");
}

int main(int argc, char **argv) {
    if (argc < 2)
        return cli_usage(main_usage, "no command given");
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        if (strcmp(name, "help") == 0 && argc > 2) {
            /* "ndstore help read" is "ndstore read --help". */
            char *sub[] = {argv[2], "--help", NULL};
            for (size_t i = 0; i < N_COMMANDS; i++)
                if (strcmp(commands[i].name, argv[2]) == 0)
                    return commands[i].run(2, sub);
            return cli_usage(main_usage, "unknown command '%s'", argv[2]);
        }
        print_main_help();
        return CLI_OK;
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0) {
        printf("ndstore %s\n", nds_version());
        return CLI_OK;
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    if (name[0] == '-')
        return cli_usage(main_usage, "unknown option '%s'", name);
    return cli_usage(main_usage, "unknown command '%s'", name);
}

/* ---- reporting ---- */

/* The formatted message with its secrets hidden (the arguments it quotes may hold credentials),
 * malloc'd; NULL when out of memory. Formatted whole, never cut through a URL before redaction. */
static char *format_redacted(const char *fmt, va_list ap) {
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    size_t cap = n < 0 ? 1 : 3 * (size_t)n + 4; /* a hidden secret "***" replaced >= 1 byte */
    char *msg = malloc(cap);
    if (msg) {
        if (n < 0 || vsnprintf(msg, cap, fmt, again) < 0)
            msg[0] = '\0';
        nds_redact_secrets(msg, cap);
    }
    va_end(again);
    return msg;
}

int cli_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *msg = format_redacted(fmt, ap);
    va_end(ap);
    /* One line, whatever the message held: the contract is a single stderr line. */
    for (char *p = msg; p && *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    fflush(stdout);
    fprintf(stderr, "ndstore: %s\n", msg ? msg : "out of memory");
    free(msg);
    return CLI_FAIL;
}

int cli_fail_nds(int code, const char *what) {
    const nds_error *e = nds_error_last();
    if (e && e->message && e->message[0])
        return cli_fail("%s", e->message);
    if (what)
        return cli_fail("%s: %s", what, nds_strerror(code));
    return cli_fail("%s", nds_strerror(code));
}

int cli_usage(const char *usage, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *msg = format_redacted(fmt, ap);
    va_end(ap);
    fflush(stdout);
    fprintf(stderr, "ndstore: %s\nusage: %s\n", msg ? msg : "out of memory", usage);
    free(msg);
    return CLI_USAGE;
}

int cli_help(const char *text) {
    fputs(text, stdout);
    return CLI_OK;
}

int cli_bad_option(const char *usage, char **argv, int c) {
    /* Commands pass an optstring starting with ':', so a missing value is ':' and unknown is '?'. */
    const char *opt = optind > 0 ? argv[optind - 1] : "?";
    if (c == ':')
        return cli_usage(usage, "option '%s' needs a value", opt);
    if (optopt != 0)
        return cli_usage(usage, "unknown option '-%c'", optopt);
    return cli_usage(usage, "unknown option '%s'", opt);
}

void cli_getopt_reset(void) {
    /* optind = 0 makes glibc's getopt re-initialise its internal state (permutation, nextchar). */
    optind = 0;
    opterr = 0;
    optopt = 0;
}

/* ---- parsing ---- */

int cli_parse_u64_list(const char *text, uint64_t *out, size_t cap, size_t *n, char *err, size_t errcap) {
    const char *p = text;
    size_t k = 0;
    while (*p == ' ' || *p == '[' || *p == '(')
        p++;
    while (*p && *p != ']' && *p != ')') {
        if (*p < '0' || *p > '9') {
            snprintf(err, errcap, "'%s' is not a list of non-negative integers", text);
            return -1;
        }
        errno = 0;
        char *end;
        unsigned long long v = strtoull(p, &end, 10);
        if (errno != 0) {
            snprintf(err, errcap, "'%s': number too large", text);
            return -1;
        }
        if (k == cap) {
            snprintf(err, errcap, "'%s': more than %zu dimensions", text, cap);
            return -1;
        }
        out[k++] = v;
        p = end;
        while (*p == ' ')
            p++;
        if (*p == ',' || *p == 'x')
            p++;
        while (*p == ' ')
            p++;
    }
    if (*p == ']' || *p == ')')
        p++;
    if (*p != '\0' || k == 0) {
        snprintf(err, errcap, "'%s' is not a list of non-negative integers", text);
        return -1;
    }
    *n = k;
    return 0;
}

int cli_parse_size(const char *text, uint64_t *out) {
    if (text[0] < '0' || text[0] > '9')
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno != 0)
        return -1;
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    case 't': case 'T': shift = 40; end++; break;
    default: break;
    }
    if (shift && (strcasecmp(end, "ib") == 0 || strcasecmp(end, "b") == 0))
        end += strlen(end);
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end != '\0' || (shift && v > (UINT64_MAX >> shift)))
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

int cli_parse_long(const char *text, long min, long max, long *out) {
    errno = 0;
    char *end;
    long v = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

static void format_seq(char *buf, size_t cap, size_t rank, const uint64_t *v, char open, char close,
                       bool tuple) {
    size_t used = 0;
    if (cap == 0)
        return;
    buf[0] = '\0';
    used += (size_t)snprintf(buf, cap, "%c", open);
    for (size_t i = 0; i < rank && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%" PRIu64, i ? ", " : "", v[i]);
    if (used < cap)
        snprintf(buf + used, cap - used, "%s%c", tuple && rank == 1 ? "," : "", close);
}

void cli_format_list(char *buf, size_t cap, size_t rank, const uint64_t *v) {
    format_seq(buf, cap, rank, v, '[', ']', false);
}

void cli_format_tuple(char *buf, size_t cap, size_t rank, const uint64_t *v) {
    format_seq(buf, cap, rank, v, '(', ')', true);
}

int cli_json_parse(const char *text, const char *what, json_object **out) {
    json_tokener *tok = json_tokener_new();
    if (!tok)
        return cli_fail("out of memory");
    size_t len = strlen(text);
    /* Passing the NUL too ends a bare number, which would otherwise wait for more digits. */
    json_object *obj = json_tokener_parse_ex(tok, text, (int)len + 1);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    size_t used = (size_t)tok->char_offset;
    json_tokener_free(tok);
    if (!obj || jerr != json_tokener_success) {
        json_object_put(obj);
        return cli_fail("%s: invalid JSON: %s", what,
                        jerr == json_tokener_continue ? "unexpected end" : json_tokener_error_desc(jerr));
    }
    for (const char *p = text + (used < len ? used : len); *p; p++) {
        if (*p != ' ' && *p != '\n' && *p != '\t' && *p != '\r') {
            json_object_put(obj);
            return cli_fail("%s: invalid JSON: unexpected text after the value", what);
        }
    }
    *out = obj;
    return CLI_OK;
}

static void free_text(json_object *v, void *text) {
    (void)v;
    free(text);
}

json_object *cli_json_parse_exact(const char *text) {
    json_object *o = text ? json_tokener_parse(text) : NULL;
    if (!o)
        return NULL;
    /* The library writes this compact form: the same text back means nothing was clamped. */
    const char *again =
        json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    if (again && strcmp(again, text) == 0)
        return o;
    char *copy = strdup(text);
    if (!copy) {
        json_object_put(o);
        return NULL;
    }
    json_object_set_serializer(o, json_object_userdata_to_json_string, copy, free_text);
    return o;
}

int cli_read_file(const char *path, size_t max, char **out, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return cli_fail("%s: %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap)
            break;
        if (cap >= max) {
            free(buf);
            fclose(f);
            return cli_fail("%s: larger than %zu bytes", path, max);
        }
        cap = cap * 2 > max ? max : cap * 2;
        char *grown = realloc(buf, cap + 1);
        if (!grown)
            free(buf);
        buf = grown;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf)
        return cli_fail("%s: out of memory", path);
    if (bad) {
        free(buf);
        return cli_fail("%s: read error", path);
    }
    buf[n] = '\0';
    *out = buf;
    if (len)
        *len = n;
    return CLI_OK;
}

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- arrays ---- */

int cli_require_spec(const char *what, const char *text) {
    if (text[strspn(text, " \t\r\n\v\f")] != '\0')
        return CLI_OK;
    return cli_fail("%s is empty: give a path, a URL or a JSON spec (an empty one would name the "
                    "current directory)", what);
}

int cli_open_array(const char *spec, nds_context *ctx, unsigned mode, nds_array **out) {
    nds_open_options opts = NDS_OPEN_OPTIONS_INIT;
    opts.ctx = ctx;
    opts.mode = mode;
    nds_error_clear();
    int rc = nds_array_open(out, spec, &opts);
    if (rc != 0)
        return cli_fail_nds(rc, spec);
    return CLI_OK;
}

int cli_parse_region(nds_array *a, const char *region, const char *units, nds_box *box) {
    size_t rank = nds_array_rank(a);
    uint64_t shape[NDS_MAX_RANK];
    int64_t origin[NDS_MAX_RANK];
    nds_array_shape(a, shape);
    nds_array_origin(a, origin);
    if (!region) {
        nds_box_full(box, rank, shape);
        return CLI_OK;
    }
    char *converted = NULL;
    if (units && cli_region_from_units(a, region, units, &converted) != CLI_OK)
        return CLI_FAIL;
    nds_error_clear();
    int rc = nds_box_parse_domain(box, converted ? converted : region, rank, origin, shape);
    free(converted);
    if (rc != 0)
        return cli_fail_nds(rc, "region");
    return CLI_OK;
}

size_t cli_box_out_shape(const nds_box *box, uint64_t *shape) {
    size_t n = 0;
    for (size_t d = 0; d < box->rank; d++)
        if (!(box->dropped >> d & 1))
            shape[n++] = nds_box_extent(box, d);
    return n;
}

int cli_box_count(const nds_box *box, size_t elem, uint64_t *count, uint64_t *bytes) {
    uint64_t c = 1;
    for (size_t d = 0; d < box->rank; d++) {
        uint64_t e = nds_box_extent(box, d);
        if (e == 0) {
            *count = 0;
            *bytes = 0;
            return CLI_OK;
        }
        if (__builtin_mul_overflow(c, e, &c))
            return cli_fail("region has too many elements");
    }
    if (__builtin_mul_overflow(c, (uint64_t)elem, bytes))
        return cli_fail("region has too many bytes");
    *count = c;
    return CLI_OK;
}

/* ---- tiles ---- */

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* Bytes of a tile split at dimension d with one unit there; UINT64_MAX on overflow. */
static uint64_t tile_bytes_at(const cli_tiler *t, size_t d, size_t elem, const uint64_t *u) {
    uint64_t b = elem;
    for (size_t i = 0; i < t->box.rank; i++) {
        uint64_t e = i <= d ? min_u64(u[i], t->ext[i]) : t->ext[i];
        if (__builtin_mul_overflow(b, e, &b))
            return UINT64_MAX;
    }
    return b;
}

void cli_tiler_init(cli_tiler *t, const nds_box *box, size_t elem, uint64_t budget, const uint64_t *units) {
    memset(t, 0, sizeof *t);
    t->box = *box;
    uint64_t ones[NDS_MAX_RANK], u[NDS_MAX_RANK];
    size_t rank = box->rank;
    for (size_t d = 0; d < rank; d++) {
        ones[d] = 1;
        t->ext[d] = nds_box_extent(box, d);
        if (t->ext[d] == 0)
            t->done = true;
    }
    memcpy(u, units ? units : ones, rank * sizeof u[0]);
    for (size_t d = 0; d < rank; d++)
        if (u[d] == 0)
            u[d] = 1;
    if (rank == 0 || t->done) {
        t->max_tile_bytes = t->done ? 0 : elem;
        return;
    }
    /* The outermost split whose one-unit tile fits the budget; else single units everywhere. */
    size_t d = 0;
    uint64_t unit_bytes = tile_bytes_at(t, 0, elem, u);
    while (unit_bytes > budget && d + 1 < rank)
        unit_bytes = tile_bytes_at(t, ++d, elem, u);
    t->split = d;
    for (size_t i = 0; i < rank; i++)
        t->tile[i] = i < d ? min_u64(u[i], t->ext[i]) : t->ext[i];
    uint64_t aim = min_u64(budget, CLI_SLAB_TARGET);
    uint64_t k = unit_bytes <= aim ? aim / unit_bytes : 1;
    uint64_t span;
    if (k == 0 || __builtin_mul_overflow(k, u[d], &span) || span > t->ext[d])
        span = t->ext[d];
    t->tile[d] = span < 1 ? 1 : span;
    /* At most the budget, or one unit when even that is larger; saturates (and then fails to allocate)
     * only for a unit beyond 2^64 bytes. */
    t->max_tile_bytes = elem;
    for (size_t i = 0; i < rank; i++)
        if (__builtin_mul_overflow(t->max_tile_bytes, t->tile[i], &t->max_tile_bytes) ||
            t->max_tile_bytes > SIZE_MAX)
            t->max_tile_bytes = UINT64_MAX;
}

void cli_stream_tiler_init(cli_tiler *t, const nds_box *box, size_t elem, uint64_t budget,
                           const uint64_t *chunks) {
    uint64_t units[NDS_MAX_RANK];
    for (size_t d = 0; d < box->rank; d++)
        units[d] = 1; /* whole tiles after the split: their data concatenated is the box's */
    if (box->rank > 0 && box->step[0] == 1) {
        /* Rows of chunks only while one fits the budget: a split further in takes single
         * indices before it, or the tiles' data would not concatenate to the box's. */
        units[0] = chunks[0];
        cli_tiler_init(t, box, elem, budget, units);
        if (t->split == 0 || t->done)
            return;
        units[0] = 1;
    }
    cli_tiler_init(t, box, elem, budget, units);
}

void *cli_slab_alloc(uint64_t bytes) {
    const size_t huge = (size_t)2 << 20;
    if (bytes > SIZE_MAX - huge)
        return NULL;
    if (bytes < 2 * huge)
        return malloc(bytes ? bytes : 1);
    void *p = NULL;
    size_t n = (bytes + huge - 1) / huge * huge;
    if (posix_memalign(&p, huge, n) != 0)
        return NULL;
    (void)madvise(p, n, MADV_HUGEPAGE); /* advice only: without THP the slab still works */
    return p;
}

bool cli_tiler_next(cli_tiler *t, nds_box *sub, uint64_t *count) {
    if (t->done)
        return false;
    *sub = t->box;
    uint64_t c = 1;
    for (size_t d = 0; d < t->box.rank; d++) {
        uint64_t first = t->pos[d];
        uint64_t last = first + t->tile[d] < t->ext[d] ? first + t->tile[d] : t->ext[d];
        sub->start[d] = t->box.start[d] + first * t->box.step[d];
        sub->stop[d] = t->box.start[d] + (last - 1) * t->box.step[d] + 1;
        c *= last - first;
    }
    *count = c;
    if (t->box.rank == 0) {
        t->done = true;
        return true;
    }
    /* Odometer over dimensions 0..split, innermost fastest. */
    size_t d = t->split + 1;
    while (d-- > 0) {
        t->pos[d] += t->tile[d];
        if (t->pos[d] < t->ext[d])
            return true;
        t->pos[d] = 0;
    }
    t->done = true;
    return true;
}
