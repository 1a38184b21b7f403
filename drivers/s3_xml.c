/* A small strict XML reader for S3 responses (s3_xml.h).
 *
 * Accepts: an optional <?xml ...?> declaration, comments, elements with attributes (skipped),
 * character data with the five predefined entities and numeric character references, CDATA
 * sections. Refuses: DOCTYPE (so no entity expansion), mismatched or unclosed tags, text outside
 * the root, bad references, nesting deeper than 16. Element paths are kept in a fixed buffer (names
 * longer than 256 bytes are refused), and text is accumulated per element in one growable buffer
 * bounded by the input size.
 *
 * Threading: pure functions. Ownership: parsed pages own their strings.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3_xml.h"
#include "ndstore/sys/buf.h"
#include "internal/error.h"
#include "internal/util.h"

#define MAX_DEPTH 16
#define MAX_PATH 1024

typedef struct xml_state {
    const char *p, *end, *start;
    char path[MAX_PATH];
    size_t path_len;
    size_t depth;
    size_t name_off[MAX_DEPTH]; /* where each open element's name starts in path */
    nds_buf text;               /* character data of the innermost open element */
    bool seen_root;
} xml_state;

static int bad(const xml_state *s, const char *what) {
    return nds_err(NDS_EFORMAT, "s3: xml: %s at byte %zu", what, (size_t)(s->p - s->start));
}

static bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-' || c == '.' || c == ':';
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* Skips from p past the first occurrence of terminator; false when it is missing. */
static bool skip_past(xml_state *s, const char *term) {
    size_t n = strlen(term);
    for (const char *q = s->p; q + n <= s->end; q++)
        if (memcmp(q, term, n) == 0) {
            s->p = q + n;
            return true;
        }
    return false;
}

static int append_utf8(nds_buf *b, unsigned long cp) {
    unsigned char u[4];
    size_t n;
    if (cp < 0x80)
        u[0] = (unsigned char)cp, n = 1;
    else if (cp < 0x800)
        u[0] = (unsigned char)(0xC0 | (cp >> 6)), u[1] = (unsigned char)(0x80 | (cp & 63)), n = 2;
    else if (cp < 0x10000) {
        u[0] = (unsigned char)(0xE0 | (cp >> 12));
        u[1] = (unsigned char)(0x80 | ((cp >> 6) & 63));
        u[2] = (unsigned char)(0x80 | (cp & 63));
        n = 3;
    } else {
        u[0] = (unsigned char)(0xF0 | (cp >> 18));
        u[1] = (unsigned char)(0x80 | ((cp >> 12) & 63));
        u[2] = (unsigned char)(0x80 | ((cp >> 6) & 63));
        u[3] = (unsigned char)(0x80 | (cp & 63));
        n = 4;
    }
    return nds_buf_append(b, u, n);
}

/* Decodes the reference at s->p ('&' ... ';') into the text buffer. */
static int read_reference(xml_state *s) {
    const char *semi =
        memchr(s->p, ';', (size_t)(s->end - s->p) < 12 ? (size_t)(s->end - s->p) : 12);
    if (!semi) return bad(s, "unterminated character reference");
    const char *r = s->p + 1;
    size_t n = (size_t)(semi - r);
    static const struct {
        const char *name;
        char c;
    } named[] = {{"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
    int rc = -1;
    for (size_t i = 0; i < 5 && rc < 0; i++)
        if (strlen(named[i].name) == n && memcmp(r, named[i].name, n) == 0)
            rc = nds_buf_append(&s->text, &named[i].c, 1);
    if (rc < 0 && n >= 2 && r[0] == '#') {
        bool hex = r[1] == 'x';
        unsigned long cp = 0;
        size_t i = hex ? 2 : 1;
        if (i == n) return bad(s, "empty character reference");
        for (; i < n; i++) {
            char c = r[i];
            int d = c >= '0' && c <= '9'          ? c - '0'
                    : hex && c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : hex && c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                  : -1;
            if (d < 0 || cp > 0x10FFFF) return bad(s, "bad character reference");
            cp = cp * (hex ? 16 : 10) + (unsigned long)d;
        }
        if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return bad(s, "bad character reference");
        rc = append_utf8(&s->text, cp);
    }
    if (rc < 0) return bad(s, "unknown entity");
    if (rc != 0) return nds_err(NDS_ENOMEM, "s3: xml: out of memory");
    s->p = semi + 1;
    return 0;
}

/* Reads a tag name at s->p into [*name, *name + *len). */
static int read_name(xml_state *s, const char **name, size_t *len) {
    const char *q = s->p;
    while (q < s->end && is_name_char(*q)) q++;
    if (q == s->p) return bad(s, "expected a tag name");
    if ((size_t)(q - s->p) > 256) return bad(s, "tag name too long");
    *name = s->p;
    *len = (size_t)(q - s->p);
    s->p = q;
    return 0;
}

/* Skips attributes up to '>' or "/>"; *empty tells which. */
static int skip_attributes(xml_state *s, bool *empty) {
    while (s->p < s->end) {
        char c = *s->p;
        if (c == '>') {
            s->p++;
            *empty = false;
            return 0;
        }
        if (c == '/' && s->p + 1 < s->end && s->p[1] == '>') {
            s->p += 2;
            *empty = true;
            return 0;
        }
        if (c == '"' || c == '\'') {
            const char *close = memchr(s->p + 1, c, (size_t)(s->end - s->p - 1));
            if (!close) return bad(s, "unterminated attribute value");
            s->p = close + 1;
        } else if (c == '<') {
            return bad(s, "'<' inside a tag");
        } else {
            s->p++;
        }
    }
    return bad(s, "unterminated tag");
}

static int end_element(xml_state *s, nds_xml_fn fn, void *ctx) {
    int rc = nds_buf_append(&s->text, "", 1);
    if (rc) return nds_err(NDS_ENOMEM, "s3: xml: out of memory");
    s->path[s->path_len] = '\0';
    rc = fn(ctx, s->path, (const char *)s->text.data, s->text.len - 1);
    s->text.len = 0;
    s->depth--;
    s->path_len = s->depth ? s->name_off[s->depth] - 1 : 0;
    return rc;
}

static int open_tag(xml_state *s, nds_xml_fn fn, void *ctx) {
    const char *name;
    size_t n;
    int rc = read_name(s, &name, &n);
    if (rc) return rc;
    if (s->depth == 0 && s->seen_root) return bad(s, "second root element");
    if (s->depth == MAX_DEPTH) return bad(s, "elements nested too deeply");
    size_t off = s->depth ? s->path_len + 1 : 0;
    if (off + n + 1 > MAX_PATH) return bad(s, "element path too long");
    if (s->depth) s->path[s->path_len] = '/';
    memcpy(s->path + off, name, n);
    s->path_len = off + n;
    s->name_off[s->depth++] = off;
    s->seen_root = true;
    s->text.len = 0;
    bool empty = false;
    if ((rc = skip_attributes(s, &empty))) return rc;
    return empty ? end_element(s, fn, ctx) : 0;
}

static int close_tag(xml_state *s, nds_xml_fn fn, void *ctx) {
    const char *name;
    size_t n;
    int rc = read_name(s, &name, &n);
    if (rc) return rc;
    if (s->depth == 0) return bad(s, "closing tag without an open element");
    size_t off = s->name_off[s->depth - 1];
    if (s->path_len - off != n || memcmp(s->path + off, name, n) != 0)
        return bad(s, "mismatched closing tag");
    while (s->p < s->end && is_space(*s->p)) s->p++;
    if (s->p >= s->end || *s->p != '>') return bad(s, "unterminated closing tag");
    s->p++;
    return end_element(s, fn, ctx);
}

/* Handles the markup at s->p ('<'). */
static int markup(xml_state *s, nds_xml_fn fn, void *ctx) {
    size_t left = (size_t)(s->end - s->p);
    if (left >= 4 && memcmp(s->p, "<!--", 4) == 0)
        return skip_past(s, "-->") ? 0 : bad(s, "unterminated comment");
    if (left >= 2 && s->p[1] == '?') {
        if (s->seen_root) return bad(s, "processing instruction after the root");
        return skip_past(s, "?>") ? 0 : bad(s, "unterminated declaration");
    }
    if (left >= 9 && memcmp(s->p, "<![CDATA[", 9) == 0) {
        if (s->depth == 0) return bad(s, "CDATA outside the root element");
        const char *from = s->p + 9;
        if (!skip_past(s, "]]>")) return bad(s, "unterminated CDATA");
        return nds_buf_append(&s->text, from, (size_t)(s->p - 3 - from))
                   ? nds_err(NDS_ENOMEM, "s3: xml: out of memory")
                   : 0;
    }
    if (left >= 2 && s->p[1] == '!')
        return bad(s, "DOCTYPE and other declarations are not accepted");
    s->p++;
    if (s->p < s->end && *s->p == '/') {
        s->p++;
        return close_tag(s, fn, ctx);
    }
    return open_tag(s, fn, ctx);
}

int nds_xml_walk(const char *xml, size_t len, nds_xml_fn fn, void *ctx) {
    xml_state s = {.p = xml, .end = xml + len, .start = xml};
    int rc = 0;
    while (rc == 0 && s.p < s.end) {
        char c = *s.p;
        if (c == '<') {
            rc = markup(&s, fn, ctx);
        } else if (s.depth == 0) {
            rc = is_space(c) ? (s.p++, 0) : bad(&s, "text outside the root element");
        } else if (c == '&') {
            rc = read_reference(&s);
        } else {
            const char *q = s.p;
            while (q < s.end && *q != '<' && *q != '&') q++;
            rc = nds_buf_append(&s.text, s.p, (size_t)(q - s.p))
                     ? nds_err(NDS_ENOMEM, "s3: xml: out of memory")
                     : 0;
            s.p = q;
        }
    }
    if (rc == 0 && s.depth) rc = bad(&s, "unclosed element at end of document");
    if (rc == 0 && !s.seen_root) rc = bad(&s, "no root element");
    nds_buf_dispose(&s.text);
    return rc;
}

/* ---- documents ---- */

char *nds_s3_url_decode(const char *s, size_t len, bool plus_space) {
    char *out = malloc(len + 1), *o = out;
    if (!out) return NULL;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == '%') {
            int v = 0;
            for (int k = 1; k <= 2; k++) {
                char h = i + (size_t)k < len ? s[i + (size_t)k] : 0;
                int d = h >= '0' && h <= '9'   ? h - '0'
                        : h >= 'a' && h <= 'f' ? h - 'a' + 10
                        : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                               : -1;
                if (d < 0) {
                    free(out);
                    return NULL;
                }
                v = v * 16 + d;
            }
            if (v == 0) {
                free(out);
                return NULL;
            }
            *o++ = (char)v;
            i += 2;
        } else {
            *o++ = plus_space && c == '+' ? ' ' : c;
        }
    }
    *o = '\0';
    return out;
}

typedef struct list_ctx {
    nds_s3_list_page *page;
    bool url_encoded;
    char *key; /* Key of the Contents element being read */
    uint64_t size;
    bool have_size;
} list_ctx;

static int list_push(list_ctx *c) {
    nds_s3_list_page *p = c->page;
    if (!c->key) return nds_err(NDS_EFORMAT, "s3: list: a Contents element has no Key");
    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        char **k = realloc(p->keys, cap * sizeof *k);
        if (k) p->keys = k;
        uint64_t *sz = k ? realloc(p->sizes, cap * sizeof *sz) : NULL;
        if (!sz) return nds_err(NDS_ENOMEM, "s3: list: out of memory");
        p->sizes = sz;
        p->cap = cap;
    }
    p->keys[p->n] = c->key;
    p->sizes[p->n++] = c->have_size ? c->size : UINT64_MAX;
    c->key = NULL;
    c->have_size = false;
    return 0;
}

static int list_element(void *ctx, const char *path, const char *text, size_t len) {
    list_ctx *c = ctx;
    if (strncmp(path, "ListBucketResult", 16) != 0 || (path[16] && path[16] != '/'))
        return nds_err(NDS_EFORMAT, "s3: list: unexpected document element %s", path);
    const char *rel = path + 16;
    if (strcmp(rel, "/Contents/Key") == 0) {
        free(c->key);
        c->key = c->url_encoded ? nds_s3_url_decode(text, len, true) : nds_strdup(text);
        if (!c->key) return nds_err(NDS_EFORMAT, "s3: list: bad key encoding \"%.100s\"", text);
    } else if (strcmp(rel, "/Contents/Size") == 0) {
        char *end;
        unsigned long long v = strtoull(text, &end, 10);
        if (!len || *end || text[0] == '-')
            return nds_err(NDS_EFORMAT, "s3: list: bad Size \"%.40s\"", text);
        c->size = v;
        c->have_size = true;
    } else if (strcmp(rel, "/Contents") == 0) {
        return list_push(c);
    } else if (strcmp(rel, "/IsTruncated") == 0) {
        c->page->truncated = strcmp(text, "true") == 0;
    } else if (strcmp(rel, "/NextContinuationToken") == 0) {
        free(c->page->next_token);
        if (!(c->page->next_token = nds_strdup(text)))
            return nds_err(NDS_ENOMEM, "s3: list: out of memory");
    }
    return 0;
}

int nds_s3_parse_list(const char *xml, size_t len, bool url_encoded, nds_s3_list_page *out) {
    memset(out, 0, sizeof *out);
    list_ctx c = {out, url_encoded, NULL, 0, false};
    int rc = nds_xml_walk(xml, len, list_element, &c);
    free(c.key);
    if (rc == 0 && out->truncated && (!out->next_token || !out->next_token[0]))
        rc = nds_err(NDS_EFORMAT, "s3: list: truncated page without NextContinuationToken");
    return rc;
}

void nds_s3_list_page_dispose(nds_s3_list_page *p) {
    for (size_t i = 0; i < p->n; i++) free(p->keys[i]);
    free(p->keys);
    free(p->sizes);
    free(p->next_token);
    memset(p, 0, sizeof *p);
}

typedef struct err_ctx {
    char *code, *msg;
    size_t code_cap, msg_cap;
    bool is_error;
} err_ctx;

static int error_element(void *ctx, const char *path, const char *text, size_t len) {
    err_ctx *c = ctx;
    (void)len;
    if (strcmp(path, "Error") == 0)
        c->is_error = true;
    else if (strcmp(path, "Error/Code") == 0)
        snprintf(c->code, c->code_cap, "%s", text);
    else if (strcmp(path, "Error/Message") == 0)
        snprintf(c->msg, c->msg_cap, "%s", text);
    return 0;
}

bool nds_s3_parse_error(const char *xml, size_t len, char *code, size_t code_cap, char *msg,
                        size_t msg_cap) {
    if (code_cap) code[0] = '\0';
    if (msg_cap) msg[0] = '\0';
    err_ctx c = {code, msg, code_cap, msg_cap, false};
    if (!xml || len == 0) return false;
    nds_error_saved saved;
    nds_error_save(
        &saved,
        nds_error_last()->code); /* a parse failure here must not replace the caller's error */
    int rc = nds_xml_walk(xml, len, error_element, &c);
    nds_error_restore(&saved);
    return rc == 0 && c.is_error;
}

typedef struct find_ctx {
    const char *path;
    char *out;
    size_t cap;
    int found;
} find_ctx;

static int find_element(void *ctx, const char *path, const char *text, size_t len) {
    (void)len;
    find_ctx *c = ctx;
    if (!c->found && strcmp(path, c->path) == 0) {
        snprintf(c->out, c->cap, "%s", text);
        c->found = 1;
    }
    return 0;
}

int nds_xml_find(const char *xml, size_t len, const char *path, char *out, size_t cap) {
    find_ctx c = {path, out, cap, 0};
    if (cap) out[0] = '\0';
    if (!xml || !len) return 0;
    nds_error_saved saved;
    nds_error_save(&saved, nds_error_last()->code);
    int rc = nds_xml_walk(xml, len, find_element, &c);
    nds_error_restore(&saved);
    return rc == 0 && c.found;
}

static int upload_id_element(void *ctx, const char *path, const char *text, size_t len) {
    (void)len;
    char **out = ctx;
    if (strcmp(path, "InitiateMultipartUploadResult/UploadId") == 0 && !*out) {
        *out = nds_strdup(text);
        if (!*out) return nds_err(NDS_ENOMEM, "s3: out of memory");
    }
    return 0;
}

int nds_s3_parse_upload_id(const char *xml, size_t len, char **upload_id) {
    *upload_id = NULL;
    int rc = nds_xml_walk(xml, len, upload_id_element, upload_id);
    if (rc == 0 && (!*upload_id || !**upload_id))
        rc = nds_err(NDS_EFORMAT, "s3: InitiateMultipartUpload answer has no UploadId");
    if (rc) {
        free(*upload_id);
        *upload_id = NULL;
    }
    return rc;
}

int nds_xml_escape_append(nds_buf *out, const char *s) {
    int rc = 0;
    for (; *s && rc == 0; s++) {
        switch (*s) {
        case '&': rc = nds_buf_append(out, "&amp;", 5); break;
        case '<': rc = nds_buf_append(out, "&lt;", 4); break;
        case '>': rc = nds_buf_append(out, "&gt;", 4); break;
        case '"': rc = nds_buf_append(out, "&quot;", 6); break;
        case '\'': rc = nds_buf_append(out, "&apos;", 6); break;
        default: rc = nds_buf_append(out, s, 1);
        }
    }
    return rc ? NDS_ENOMEM : 0;
}
