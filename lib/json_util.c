/* json-c helpers with errors that name the member and the document. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal/error.h"
#include "internal/json_util.h"
#include "internal/util.h"

/* Bound on nesting so a hostile document cannot exhaust the stack. */
#define NDS_JSON_MAX_DEPTH 64

/* ---- integers beyond 64 bits ----------------------------------------------------------------
 * json-c clamps an integer literal outside int64/uint64 to the nearest bound without a trace in the
 * parsed value, so 2^64 reads as 2^64-1. nds_json_parse finds such literals in the text and marks
 * the parsed values they became: their userdata holds the literal, so readers of numbers refuse
 * them naming the member instead of using the clamped number, and their serializer prints the
 * literal, so a document passed through (user attributes, members ndstore does not interpret, a
 * zarr.json rewritten by a resize) keeps the number exactly as written. json-c's deep copy keeps
 * both (it copies a userdata-printing serializer with its text). */

/* 1 when text[0..n) is an integer literal (no fraction or exponent) outside int64 and uint64. */
static bool literal_overflows(const char *text, size_t n) {
    char buf[64];
    bool neg = text[0] == '-';
    size_t digits = n - (neg ? 1 : 0);
    for (size_t i = neg ? 1 : 0; i < n; i++)
        if (text[i] < '0' || text[i] > '9') return false;
    if (digits == 0) return false;
    if (digits < 19) return false; /* fits int64 whatever it is: no strtoll per small number */
    if (n >= sizeof buf) return true; /* more than 60 digits */
    memcpy(buf, text, n);
    buf[n] = '\0';
    errno = 0;
    if (neg)
        (void)strtoll(buf, NULL, 10);
    else
        (void)strtoull(buf, NULL, 10);
    return errno == ERANGE;
}

/* Calls found(text, n, overflows, ctx) for every integer literal outside strings, in document
 * order; returns how many overflow 64 bits. */
typedef void (*literal_fn)(const char *text, size_t n, bool overflows, void *ctx);
static size_t scan_int_literals(const char *text, size_t len, literal_fn found, void *ctx) {
    size_t over = 0;
    for (size_t i = 0; i < len;) {
        char c = text[i];
        if (c == '"') {
            for (i++; i < len && text[i] != '"'; i++)
                if (text[i] == '\\') i++;
            i++;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            size_t start = i;
            bool integer = c != '-' || (i + 1 < len && text[i + 1] >= '0' && text[i + 1] <= '9');
            for (i++; i < len && text[i] && strchr("0123456789+-.eE", text[i]); i++)
                if (text[i] == '.' || text[i] == 'e' || text[i] == 'E') integer = false;
            /* ("-Infinity", which json-c also reads, is not an integer: a '-' without digits.) */
            bool o = integer && literal_overflows(text + start, i - start);
            over += o;
            if (integer && found) found(text + start, i - start, o, ctx);
        } else {
            i++;
        }
    }
    return over;
}

typedef struct literal_list {
    const char **text; /* integer literals in document order */
    size_t *len;
    bool *over;
    size_t n, cap;
    bool oom; /* a literal could not be copied: the parse fails rather than leave a clamp */
} literal_list;

static void collect_literal(const char *text, size_t n, bool overflows, void *ctx) {
    literal_list *l = ctx;
    if (l->n < l->cap) {
        l->text[l->n] = text;
        l->len[l->n] = n;
        l->over[l->n] = overflows;
    }
    l->n++;
}

static char *copy_literal(const char *text, size_t n) {
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, text, n);
        s[n] = '\0';
    }
    return s;
}

static void free_literal(json_object *v, void *userdata) {
    (void)v;
    free(userdata);
}

/* Visits the integer values of v in document order (json-c keeps members in insertion order),
 * marking those whose literal overflowed; *next counts integers seen. */
static void mark_ints(json_object *v, literal_list *l, size_t *next) {
    switch (json_object_get_type(v)) {
    case json_type_int:
        if (*next < l->n && l->over[*next]) {
            char *c = copy_literal(l->text[*next], l->len[*next]);
            if (c)
                json_object_set_serializer(v, json_object_userdata_to_json_string, c, free_literal);
            l->oom = l->oom || !c;
        }
        (*next)++;
        break;
    case json_type_array:
        for (size_t i = 0; i < json_object_array_length(v); i++)
            mark_ints(json_object_array_get_idx(v, i), l, next);
        break;
    case json_type_object: {
        json_object_object_foreach(v, key, val) {
            (void)key;
            mark_ints(val, l, next);
        }
        break;
    }
    default: break;
    }
}

/* Marks the values of obj whose literals in text overflowed 64 bits. A document whose integers do
 * not line up with its literals (a member given twice, where json-c keeps one; numbers in a
 * comment, which json-c skips) is refused: a clamp is never let through. */
static int mark_overflows(json_object *obj, const char *text, size_t len, const char *doc) {
    if (scan_int_literals(text, len, NULL, NULL) == 0) return 0;
    literal_list l = {0};
    scan_int_literals(text, len, collect_literal, &l); /* counts (cap 0 stores nothing) */
    l.cap = l.n;
    l.text = calloc(l.cap, sizeof *l.text);
    l.len = calloc(l.cap, sizeof *l.len);
    l.over = calloc(l.cap, sizeof *l.over);
    int rc = 0;
    if (!l.text || !l.len || !l.over) {
        rc = nds_err(NDS_ENOMEM, "%s: out of memory", doc);
    } else {
        l.n = 0;
        scan_int_literals(text, len, collect_literal, &l);
        size_t seen = 0;
        mark_ints(obj, &l, &seen);
        if (l.oom)
            rc = nds_err(NDS_ENOMEM, "%s: out of memory", doc);
        else if (seen != l.n)
            rc = nds_err(NDS_EFORMAT, "%s: an integer does not fit 64 bits (and a member given "
                                      "twice or a comment hides which one)", doc);
    }
    free(l.text);
    free(l.len);
    free(l.over);
    return rc;
}

bool nds_json_int_overflowed(const json_object *v) {
    return json_object_is_type(v, json_type_int) &&
           json_object_get_userdata((json_object *)v) != NULL;
}

int nds_json_check_fits(const json_object *v, const char *doc, const char *member) {
    if (!nds_json_int_overflowed(v)) return 0;
    return nds_err(NDS_EFORMAT, "%s: \"%s\" %.40s does not fit 64 bits", doc, member,
                   (const char *)json_object_get_userdata((json_object *)v));
}

int nds_json_parse(const char *text, size_t len, const char *doc, json_object **out) {
    if (len > INT32_MAX)
        return nds_err(NDS_ELIMIT, "%s: json document too large (%zu bytes)", doc, len);
    json_tokener *tok = json_tokener_new_ex(NDS_JSON_MAX_DEPTH);
    if (!tok) return nds_err(NDS_ENOMEM, "%s: out of memory", doc);
    json_object *obj = json_tokener_parse_ex(tok, text, (int)len);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    size_t used = json_tokener_get_parse_end(tok);
    if (!obj && jerr == json_tokener_continue) {
        /* A bare number ("42") is only known to be complete at a delimiter. */
        obj = json_tokener_parse_ex(tok, " ", 1);
        jerr = json_tokener_get_error(tok);
        used = len;
    }
    json_tokener_free(tok);
    /* (json-c represents a JSON null as a NULL object: success with obj == NULL is a valid
     * document.) */
    if (jerr != json_tokener_success) {
        json_object_put(obj);
        if (jerr == json_tokener_continue)
            return nds_err(NDS_EFORMAT, "%s: invalid json: unexpected end", doc);
        return nds_err_cause(NDS_EFORMAT, NDS_CAUSE_JSON, jerr, "%s: invalid json at byte %zu: %s",
                             doc, used, json_tokener_error_desc(jerr));
    }
    for (size_t i = used; i < len; i++) {
        char c = text[i];
        if (c != ' ' && c != '\n' && c != '\r' && c != '\t' && c != '\0') {
            json_object_put(obj);
            return nds_err(NDS_EFORMAT, "%s: invalid json: trailing data at byte %zu", doc, i);
        }
    }
    int rc = mark_overflows(obj, text, used < len ? used : len, doc);
    if (rc) {
        json_object_put(obj);
        return rc;
    }
    *out = obj;
    return 0;
}

int nds_json_member(const json_object *obj, const char *key, const char *doc, json_object **out) {
    if (!json_object_is_type(obj, json_type_object))
        return nds_err(NDS_EFORMAT, "%s: expected a json object", doc);
    if (!json_object_object_get_ex(obj, key, out))
        return nds_err(NDS_EFORMAT, "%s: missing member \"%s\"", doc, key);
    return 0;
}

/* Finds key; 1 when present, 0 when absent (or obj not an object), with *v set. */
static int find(const json_object *obj, const char *key, json_object **v) {
    return json_object_is_type(obj, json_type_object) && json_object_object_get_ex(obj, key, v);
}

/* An integer value: json int, or a double with an exact integer value. */
static bool as_int64(json_object *v, int64_t *out) {
    if (nds_json_int_overflowed(v)) return false;
    if (json_object_is_type(v, json_type_int)) {
        int64_t x = json_object_get_int64(v);
        if (x == INT64_MAX && json_object_get_uint64(v) > (uint64_t)INT64_MAX) return false;
        *out = x;
        return true;
    }
    if (json_object_is_type(v, json_type_double)) {
        double d = json_object_get_double(v);
        if (!isfinite(d) || d != floor(d) || d < -9.2e18 || d > 9.2e18) return false;
        *out = (int64_t)d;
        return true;
    }
    return false;
}

int nds_json_get_int(const json_object *obj, const char *key, bool optional, int64_t min,
                     int64_t max, const char *doc, int64_t *out) {
    json_object *v;
    if (!find(obj, key, &v)) {
        if (optional) return 0;
        return nds_err(NDS_EFORMAT, "%s: missing member \"%s\"", doc, key);
    }
    int64_t x;
    if (!as_int64(v, &x)) return nds_err(NDS_EFORMAT, "%s: \"%s\" must be an integer", doc, key);
    if (x < min || x > max)
        return nds_err(NDS_EFORMAT, "%s: \"%s\" is %lld, outside [%lld, %lld]", doc, key,
                       (long long)x, (long long)min, (long long)max);
    *out = x;
    return 0;
}

int nds_json_get_string(const json_object *obj, const char *key, bool optional, const char *doc,
                        const char **out) {
    json_object *v;
    if (!find(obj, key, &v)) {
        if (optional) return 0;
        return nds_err(NDS_EFORMAT, "%s: missing member \"%s\"", doc, key);
    }
    if (!json_object_is_type(v, json_type_string))
        return nds_err(NDS_EFORMAT, "%s: \"%s\" must be a string", doc, key);
    *out = json_object_get_string(v);
    return 0;
}

int nds_json_get_bool(const json_object *obj, const char *key, bool optional, const char *doc,
                      bool *out) {
    json_object *v;
    if (!find(obj, key, &v)) {
        if (optional) return 0;
        return nds_err(NDS_EFORMAT, "%s: missing member \"%s\"", doc, key);
    }
    if (!json_object_is_type(v, json_type_boolean))
        return nds_err(NDS_EFORMAT, "%s: \"%s\" must be true or false", doc, key);
    *out = json_object_get_boolean(v);
    return 0;
}

int nds_json_get_u64_array(const json_object *obj, const char *key, const char *doc, uint64_t max,
                           uint64_t *out, size_t cap, size_t *n) {
    json_object *v;
    if (!find(obj, key, &v)) return nds_err(NDS_EFORMAT, "%s: missing member \"%s\"", doc, key);
    if (!json_object_is_type(v, json_type_array))
        return nds_err(NDS_EFORMAT, "%s: \"%s\" must be an array of non-negative integers", doc,
                       key);
    size_t len = json_object_array_length(v);
    if (len > cap)
        return nds_err(NDS_EFORMAT, "%s: \"%s\" has %zu entries, at most %zu are supported", doc,
                       key, len, cap);
    for (size_t i = 0; i < len; i++) {
        int64_t x;
        if (!as_int64(json_object_array_get_idx(v, i), &x) || x < 0)
            return nds_err(NDS_EFORMAT, "%s: \"%s\"[%zu] must be a non-negative integer", doc, key,
                           i);
        if ((uint64_t)x > max)
            return nds_err(NDS_EFORMAT, "%s: \"%s\"[%zu] is %lld, above the limit %llu", doc, key,
                           i, (long long)x, (unsigned long long)max);
        out[i] = (uint64_t)x;
    }
    *n = len;
    return 0;
}

char *nds_json_to_string(const json_object *obj, bool pretty) {
    int flags =
        JSON_C_TO_STRING_NOSLASHESCAPE |
        (pretty ? JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED : JSON_C_TO_STRING_PLAIN);
    const char *s = json_object_to_json_string_ext((json_object *)obj, flags);
    return nds_strdup(s);
}

bool nds_json_equal(const json_object *a, const json_object *b) {
    return json_object_equal((json_object *)a, (json_object *)b) != 0;
}

bool nds_duration_ms(const char *text, bool bare_seconds, long *out) {
    char *end = NULL;
    errno = 0;
    double x = strtod(text, &end), scale = 1000;
    if (end == text || errno) return false;
    if (strcmp(end, "ms") == 0)
        scale = 1;
    else if (strcmp(end, "m") == 0)
        scale = 60000;
    else if (strcmp(end, "s") != 0 && !(bare_seconds && *end == '\0'))
        return false;
    if (!(x >= 0) || x * scale > 86400000.0) return false;
    *out = (long)(x * scale);
    return true;
}

int nds_json_duration_ms(json_object *v, const char *who, const char *member, long *out) {
    const char *text = json_object_get_string(v);
    bool number = json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double);
    if (!nds_duration_ms(text, number, out))
        return nds_err(
            NDS_EINVAL,
            "%s: spec member \"%s\": \"%.40s\" is not a duration like \"500ms\" or \"2s\"", who,
            member, text);
    return 0;
}
