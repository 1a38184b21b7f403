/* The helpers every command of the command line shares (cli.h): error reporting (one redacted
 * line on stderr), option, number and JSON parsing, reading small files, the clock, opening arrays
 * and counting boxes. Below the commands and main.c, which use it; it uses none of them.
 *
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
#include <time.h>
#include "cli.h"

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

int cli_context_new(uint64_t budget, int jobs, nds_context **ctx) {
    nds_context_options co = NDS_CONTEXT_OPTIONS_INIT;
    co.threads = jobs;
    co.memory_budget = (size_t)(budget - budget / 2);
    int st = nds_context_new(ctx, &co);
    return st == 0 ? CLI_OK : cli_fail_nds(st, "context");
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
