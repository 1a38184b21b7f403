/* Variable-length arrays on the command line (strings_io.h): JSON Lines through
 * nds_array_read_vlen / nds_array_write_vlen, a slab of rows (first dimension) at a time so that
 * memory follows the slab, not the region. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "strings_io.h"

/* Elements per slab: the library returns a slab's elements in one buffer. */
#define SLAB_ELEMENTS ((uint64_t)1 << 18)

static const char b64_chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Standard padded base64 of data[0..n) as a new JSON string. */
static json_object *base64_json(const uint8_t *data, size_t n) {
    char *text = malloc(4 * (n / 3 + 1) + 1);
    if (!text) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)data[i] << 16 | (i + 1 < n ? (uint32_t)data[i + 1] << 8 : 0) |
                     (i + 2 < n ? data[i + 2] : 0);
        text[k++] = b64_chars[v >> 18];
        text[k++] = b64_chars[(v >> 12) & 63];
        text[k++] = i + 1 < n ? b64_chars[(v >> 6) & 63] : '=';
        text[k++] = i + 2 < n ? b64_chars[v & 63] : '=';
    }
    text[k] = '\0';
    json_object *o = json_object_new_string(text);
    free(text);
    return o;
}

/* Decodes strict padded base64 s[0..len) into out (at least len / 4 * 3 bytes); -1 if invalid. */
static long base64_decode(const char *s, size_t len, uint8_t *out) {
    if (len % 4) return -1;
    long n = 0;
    for (size_t i = 0; i < len; i += 4) {
        uint32_t v = 0;
        int pad = 0;
        for (int k = 0; k < 4; k++) {
            const char *p = s[i + k] ? strchr(b64_chars, s[i + k]) : NULL;
            if (s[i + k] == '=' && i + 4 == len && k >= 2) {
                pad++;
                v <<= 6;
                continue;
            }
            if (!p || pad) return -1;
            v = v << 6 | (uint32_t)(p - b64_chars);
        }
        out[n++] = (uint8_t)(v >> 16);
        if (pad < 2) out[n++] = (uint8_t)(v >> 8);
        if (pad < 1) out[n++] = (uint8_t)v;
    }
    return n;
}

/* One element as a new JSON string. */
static json_object *element_json(nds_dtype t, const uint8_t *p, size_t n) {
    return t == NDS_STRING ? json_object_new_string_len((const char *)p, (int)n)
                           : base64_json(p, n);
}

void cli_vlen_label(nds_array *a, char *buf, size_t cap) {
    const char *name = nds_dtype_name(nds_array_dtype(a));
    char *text = NULL;
    json_object *doc = nds_array_metadata(a, &text) == 0 ? json_tokener_parse(text) : NULL;
    json_object *dtype, *filters, *id;
    nds_free(text);
    if (json_object_object_get_ex(doc, "dtype", &dtype) &&
        json_object_object_get_ex(doc, "filters", &filters) &&
        json_object_object_get_ex(json_object_array_get_idx(filters, 0), "id", &id))
        snprintf(buf, cap, "%s (%s %s)", name, json_object_get_string(dtype),
                 json_object_get_string(id));
    else
        snprintf(buf, cap, "%s", name);
    json_object_put(doc);
}

json_object *cli_vlen_fill_json(nds_array *a) {
    const uint8_t *fill;
    size_t n = nds_array_vlen_fill(a, &fill);
    return element_json(nds_array_dtype(a), fill, n);
}

/* ---- slabs of rows ---- */

/* Rows (indexes of the region's first dimension) per slab, at least 1. */
static uint64_t slab_rows(const nds_box *box) {
    uint64_t per_row = 1;
    for (size_t d = 1; d < box->rank; d++) per_row *= nds_box_extent(box, d);
    uint64_t rows = per_row ? SLAB_ELEMENTS / per_row : 1;
    return rows ? rows : 1;
}

/* The slab of rows [r0, r1) of the region (rank 0: the region itself). */
static nds_box slab_of(const nds_box *box, uint64_t r0, uint64_t r1) {
    nds_box s = *box;
    if (box->rank == 0) return s;
    s.start[0] = box->start[0] + r0 * box->step[0];
    s.stop[0] = box->start[0] + (r1 - 1) * box->step[0] + 1;
    return s;
}

static uint64_t region_rows(const nds_box *box) {
    return box->rank ? nds_box_extent(box, 0) : 1;
}

/* ---- read ---- */

static int write_lines(FILE *f, const char *name, nds_dtype t, const uint64_t *off,
                       const uint8_t *data, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) {
        json_object *o = element_json(t, data + off[i], (size_t)(off[i + 1] - off[i]));
        if (!o) return cli_fail("out of memory");
        const char *s = json_object_to_json_string_ext(
            o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        int bad = fputs(s, f) == EOF || fputc('\n', f) == EOF;
        json_object_put(o);
        if (bad) return cli_fail("%s: %s", name, strerror(errno));
    }
    return CLI_OK;
}

static int read_slabs(nds_array *a, const nds_box *box, FILE *f, const char *name,
                      const nds_io_options *io) {
    uint64_t rows = region_rows(box), step = slab_rows(box);
    if (nds_box_count(box) == 0) return CLI_OK;
    for (uint64_t r = 0; r < rows; r += step) {
        uint64_t end = r + step < rows ? r + step : rows, *off;
        nds_box s = slab_of(box, r, end);
        uint8_t *data;
        int st = nds_array_read_vlen(a, &s, &off, &data, io);
        if (st) return cli_fail_nds(st, "read");
        int rc = write_lines(f, name, nds_array_dtype(a), off, data, nds_box_count(&s));
        nds_array_vlen_free(off, data);
        if (rc != CLI_OK) return rc;
    }
    return CLI_OK;
}

static bool ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && strcmp(s + n - k, tail) == 0;
}

int cli_read_strings(nds_array *a, const nds_box *box, const char *output,
                     const nds_io_options *io) {
    if (!output && nds_box_count(box) > CLI_PRINT_LIMIT)
        return cli_fail("the region has %" PRIu64 " elements; only up to %d are printed: give "
                        "-o FILE.jsonl or -o -", nds_box_count(box), CLI_PRINT_LIMIT);
    if (output && (ends_with(output, ".npy") || ends_with(output, ".NPY")))
        return cli_fail("%s arrays have variable-length elements, which .npy cannot hold: give "
                        "-o FILE.jsonl (JSON Lines, one element per line)",
                        nds_dtype_name(nds_array_dtype(a)));
    bool to_stdout = !output || strcmp(output, "-") == 0;
    FILE *f = to_stdout ? stdout : fopen(output, "w");
    if (!f) return cli_fail("%s: %s", output, strerror(errno));
    const char *name = to_stdout ? "stdout" : output;
    int rc = read_slabs(a, box, f, name, io);
    if (fflush(f) != 0 && rc == CLI_OK) rc = cli_fail("%s: %s", name, strerror(errno));
    if (!to_stdout && fclose(f) != 0 && rc == CLI_OK) rc = cli_fail("%s: %s", name, strerror(errno));
    if (rc != CLI_OK && !to_stdout) remove(output);
    return rc;
}

/* ---- write ---- */

/* A slab's elements collected from the input: offsets (n + 1) into data. */
typedef struct slab_in {
    uint64_t *off;
    uint8_t *data;
    size_t cap; /* of data */
} slab_in;

static int append_element(slab_in *s, uint64_t i, const uint8_t *p, size_t n) {
    if (s->off[i] + n > s->cap) {
        size_t cap = s->cap ? s->cap : 4096;
        while (cap < s->off[i] + n) cap *= 2;
        uint8_t *grown = realloc(s->data, cap);
        if (!grown) return cli_fail("out of memory");
        s->data = grown;
        s->cap = cap;
    }
    if (n) memcpy(s->data + s->off[i], p, n);
    s->off[i + 1] = s->off[i] + n;
    return CLI_OK;
}

/* Parses one input line (a JSON string) into element i of s. */
static int parse_line(slab_in *s, uint64_t i, nds_dtype t, char *line, size_t len,
                      const char *name, uint64_t line_no) {
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
    json_tokener *tok = json_tokener_new();
    json_object *o = tok ? json_tokener_parse_ex(tok, line, (int)len) : NULL;
    bool whole = tok && json_tokener_get_error(tok) == json_tokener_success &&
                 (size_t)json_tokener_get_parse_end(tok) == len;
    json_tokener_free(tok);
    int rc = CLI_OK;
    if (!whole || !json_object_is_type(o, json_type_string)) {
        rc = cli_fail("%s: line %" PRIu64 ": expected one JSON string (an element), got '%.40s'",
                      name, line_no, line);
    } else if (t == NDS_STRING) {
        rc = append_element(s, i, (const uint8_t *)json_object_get_string(o),
                            (size_t)json_object_get_string_len(o));
    } else {
        size_t n = (size_t)json_object_get_string_len(o);
        uint8_t *bytes = malloc(n / 4 * 3 + 1);
        long got = bytes ? base64_decode(json_object_get_string(o), n, bytes) : -1;
        rc = got < 0 ? cli_fail("%s: line %" PRIu64 ": a bytes element must be base64, got "
                                "'%.40s'", name, line_no, json_object_get_string(o))
                     : append_element(s, i, bytes, (size_t)got);
        free(bytes);
    }
    json_object_put(o);
    return rc;
}

/* Reads n lines into s (lines so far: *line_no). */
static int read_lines(FILE *in, const char *name, nds_dtype t, uint64_t n, uint64_t total,
                      slab_in *s, uint64_t *line_no) {
    char *line = NULL;
    size_t cap = 0;
    int rc = CLI_OK;
    s->off[0] = 0;
    for (uint64_t i = 0; i < n && rc == CLI_OK; i++) {
        ssize_t len = getline(&line, &cap, in);
        if (len < 0) {
            rc = ferror(in) ? cli_fail("%s: %s", name, strerror(errno))
                            : cli_fail("%s: input ended after %" PRIu64 " of the region's %" PRIu64
                                       " elements", name, *line_no, total);
            break;
        }
        rc = parse_line(s, i, t, line, (size_t)len, name, ++*line_no);
    }
    free(line);
    return rc;
}

int cli_write_strings(nds_array *a, const nds_box *box, FILE *in, const char *name,
                      const nds_io_options *io, uint64_t *bytes) {
    uint64_t rows = region_rows(box), step = slab_rows(box), total = nds_box_count(box);
    uint64_t line_no = 0;
    slab_in s = {malloc((SLAB_ELEMENTS + 1) * sizeof *s.off), NULL, 0};
    int rc = s.off ? CLI_OK : cli_fail("out of memory");
    *bytes = 0;
    for (uint64_t r = 0; rc == CLI_OK && total && r < rows; r += step) {
        nds_box sub = slab_of(box, r, r + step < rows ? r + step : rows);
        uint64_t n = nds_box_count(&sub);
        uint64_t *grown = n > SLAB_ELEMENTS ? realloc(s.off, (n + 1) * sizeof *s.off) : s.off;
        if (grown) s.off = grown;
        else rc = cli_fail("out of memory");
        if (rc == CLI_OK) rc = read_lines(in, name, nds_array_dtype(a), n, total, &s, &line_no);
        int st = rc == CLI_OK ? nds_array_write_vlen(a, &sub, s.off, s.data, io) : 0;
        if (st) rc = cli_fail_nds(st, "write");
        if (rc == CLI_OK) *bytes += s.off[n];
    }
    int c;
    while (rc == CLI_OK && (c = fgetc(in)) != EOF)
        if (c != '\n' && c != '\r' && c != ' ')
            rc = cli_fail("%s: more lines than the region's %" PRIu64 " elements", name, total);
    free(s.off);
    free(s.data);
    return rc;
}

/* ---- copy ---- */

int cli_copy_strings(nds_array *src, nds_array *dst, const nds_box *box, const nds_io_options *io) {
    uint64_t rows = region_rows(box), step = slab_rows(box);
    if (nds_box_count(box) == 0) return CLI_OK;
    for (uint64_t r = 0; r < rows; r += step) {
        nds_box s = slab_of(box, r, r + step < rows ? r + step : rows);
        uint64_t *off;
        uint8_t *data;
        int st = nds_array_read_vlen(src, &s, &off, &data, io);
        if (st) return cli_fail_nds(st, "read");
        st = nds_array_write_vlen(dst, &s, off, data, io);
        nds_array_vlen_free(off, data);
        if (st) return cli_fail_nds(st, "write");
    }
    return CLI_OK;
}
