/* Building array specs for the commands that create arrays (create, cp, demo).
 *
 * A spec given on the command line is JSON text, "@file.json", or a URL. A URL "KV|FORMAT:" becomes
 * {"driver":"FORMAT","kvstore":"KV"} (the core accepts a URL string for "kvstore"); a URL or bare path with
 * no "|FORMAT:" is zarr. KV may end in kvstore adapters ("file:///d/|faulty:"): the library's
 * nds_spec_url_split says where the kvstore URL ends, so no command splits a URL its own way. Options go into the spec's "schema" member in TensorStore's shape:
 *   {"dtype":"uint16","domain":{"shape":[..]},"chunk_layout":{"chunk":{"shape":[..]}},
 *    "fill_value":V,"codec":"zstd:1"}
 * and "create": true is set. Omits: validation of the schema itself, which is the core's job (its messages
 * are better placed to name what is wrong for the format at hand).
 * Threading: none. Ownership: results are malloc'd and returned to the caller.
 */
#include <string.h>
#include <strings.h>
#include <errno.h>
#include <stdlib.h>
#include "cli.h"

/* Specs read with @file are small documents; this bounds a mistaken @/dev/zero. */
#define SPEC_FILE_MAX ((size_t)16 << 20)

/* The library splits the URL (nds_spec_url_split), so "file:///x/|faulty:|zarr:" means here what it
 * means to every open: the kvstore URL file:///x/|faulty: and the format zarr. */
static int spec_from_url(const char *url, json_object **out) {
    char *kvurl = NULL, *format = NULL;
    nds_error_clear();
    int st = nds_spec_url_split(url, &kvurl, &format);
    if (st != 0)
        return cli_fail_nds(st, url);
    json_object *obj = json_object_new_object();
    if (obj) {
        json_object_object_add(obj, "driver", json_object_new_string(format ? format : "zarr"));
        json_object_object_add(obj, "kvstore", json_object_new_string(kvurl));
    }
    nds_free(kvurl);
    nds_free(format);
    if (!obj)
        return cli_fail("out of memory");
    *out = obj;
    return CLI_OK;
}

/* JSON text, @file or URL to a spec object (new reference). */
static int spec_load(const char *spec, json_object **out) {
    const char *p = spec;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    json_object *obj = NULL;
    int rc;
    if (*p == '{') {
        rc = cli_json_parse(p, "spec", &obj);
    } else if (*p == '@') {
        char *text = NULL;
        rc = cli_read_file(p + 1, SPEC_FILE_MAX, &text, NULL);
        if (rc == CLI_OK && text[strspn(text, " \t\r\n\v\f")] == '\0')
            rc = cli_fail("spec file %s is empty", p + 1);
        if (rc == CLI_OK)
            rc = cli_json_parse(text, p + 1, &obj);
        free(text);
    } else {
        if (*p == '\0')
            return cli_fail("empty spec");
        return spec_from_url(p, out);
    }
    if (rc != CLI_OK)
        return rc;
    if (!json_object_is_type(obj, json_type_object)) {
        json_object_put(obj);
        return cli_fail("spec must be a JSON object");
    }
    *out = obj;
    return CLI_OK;
}

static json_object *u64_array(size_t n, const uint64_t *v) {
    json_object *arr = json_object_new_array();
    for (size_t i = 0; arr && i < n; i++)
        json_object_array_add(arr, json_object_new_uint64(v[i]));
    return arr;
}

/* Sets parent[key] = value (consumed) when force or when absent. */
static void put(json_object *parent, const char *key, json_object *value, bool force) {
    if (!force && json_object_object_get_ex(parent, key, NULL)) {
        json_object_put(value);
        return;
    }
    json_object_object_add(parent, key, value);
}

/* The object parent[key], created when absent; NULL when it exists and is not an object. */
static json_object *child_object(json_object *parent, const char *key) {
    json_object *c = NULL;
    if (json_object_object_get_ex(parent, key, &c))
        return json_object_is_type(c, json_type_object) ? c : NULL;
    c = json_object_new_object();
    json_object_object_add(parent, key, c);
    return c;
}

static int apply_schema(json_object *schema, const cli_schema *s, bool force) {
    if (s->dtype)
        put(schema, "dtype", json_object_new_string(s->dtype), force);
    if (s->codec)
        put(schema, "codec", json_object_new_string(s->codec), force);
    if (s->fill)
        put(schema, "fill_value", json_object_get(s->fill), force);
    if (s->shape_rank) {
        json_object *domain = child_object(schema, "domain");
        if (!domain)
            return cli_fail("spec: schema member \"domain\" must be an object");
        put(domain, "shape", u64_array(s->shape_rank, s->shape), force);
    }
    if (s->chunk_rank) {
        json_object *layout = child_object(schema, "chunk_layout");
        json_object *chunk = layout ? child_object(layout, "chunk") : NULL;
        if (!chunk)
            return cli_fail("spec: schema member \"chunk_layout\" must be an object with an object \"chunk\"");
        put(chunk, "shape", u64_array(s->chunk_rank, s->chunks), force);
    }
    return CLI_OK;
}

int cli_spec_build(const char *spec, const cli_schema *overrides, const cli_schema *defaults,
                   bool delete_existing, char **out) {
    json_object *obj = NULL;
    int rc = spec_load(spec, &obj);
    if (rc != CLI_OK)
        return rc;
    json_object *schema = child_object(obj, "schema");
    if (!schema)
        rc = cli_fail("spec: member \"schema\" must be an object");
    if (rc == CLI_OK && overrides)
        rc = apply_schema(schema, overrides, true);
    if (rc == CLI_OK && defaults)
        rc = apply_schema(schema, defaults, false);
    if (rc == CLI_OK && json_object_object_length(schema) == 0)
        json_object_object_del(obj, "schema");
    if (rc == CLI_OK) {
        json_object_object_add(obj, "create", json_object_new_boolean(1));
        if (delete_existing)
            json_object_object_add(obj, "delete_existing", json_object_new_boolean(1));
        const char *text = json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN |
                                                                   JSON_C_TO_STRING_NOSLASHESCAPE);
        *out = text ? strdup(text) : NULL;
        if (!*out)
            rc = cli_fail("out of memory");
    }
    json_object_put(obj);
    return rc;
}

/* 1 when v is an integer json-c clamped: text is outside int64 and uint64 (2^64 would become
 * 2^64-1 silently). */
static bool clamped_int(json_object *v, const char *text) {
    if (!json_object_is_type(v, json_type_int))
        return false;
    const char *t = text + strspn(text, " \t");
    errno = 0;
    if (t[0] == '-')
        (void)strtoll(t, NULL, 10);
    else
        (void)strtoull(t, NULL, 10);
    return errno == ERANGE;
}

int cli_fill_parse(const char *text, json_object **out) {
    static const struct { const char *in, *out; } special[] = {
        {"nan", "NaN"}, {"inf", "Infinity"}, {"infinity", "Infinity"}, {"+inf", "Infinity"},
        {"-inf", "-Infinity"}, {"-infinity", "-Infinity"}, {"nat", "NaT"},
    };
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) {
        if (strcasecmp(text, special[i].in) == 0) {
            *out = json_object_new_string(special[i].out);
            return *out ? 0 : -1;
        }
    }
    if (strncasecmp(text, "0x", 2) == 0) { /* a bit pattern, as zarr v3 writes them */
        *out = json_object_new_string(text);
        return *out ? 0 : -1;
    }
    json_tokener *tok = json_tokener_new();
    if (!tok)
        return -1;
    /* Passing the NUL too ends a bare number ("12" would otherwise wait for more digits). */
    json_object *v = json_tokener_parse_ex(tok, text, (int)strlen(text) + 1);
    bool ok = json_tokener_get_error(tok) == json_tokener_success &&
              (size_t)tok->char_offset >= strlen(text);
    json_tokener_free(tok);
    if (!ok || json_object_is_type(v, json_type_object) || clamped_int(v, text)) {
        json_object_put(v);
        return -1;
    }
    *out = v; /* NULL for JSON null, which the formats read as zero */
    return 0;
}

int cli_kvstore_url(const char *url, char *buf, size_t cap, char *format, size_t format_cap) {
    if (format && format_cap)
        format[0] = '\0';
    if (url[strspn(url, " \t\r\n")] == '{') { /* a JSON kvstore spec: nothing to split */
        if (snprintf(buf, cap, "%s", url) >= (int)cap)
            return cli_fail("kvstore spec longer than %zu bytes", cap - 1);
        return CLI_OK;
    }
    char *kvurl = NULL, *name = NULL;
    nds_error_clear();
    int st = nds_spec_url_split(url, &kvurl, &name);
    if (st != 0)
        return cli_fail_nds(st, url);
    int rc = CLI_OK;
    if (snprintf(buf, cap, "%s", kvurl) >= (int)cap)
        rc = cli_fail("url '%s': longer than %zu bytes", url, cap - 1);
    else if (format && name && snprintf(format, format_cap, "%s", name) >= (int)format_cap)
        rc = cli_fail("url '%s': format name longer than %zu bytes", url, format_cap - 1);
    nds_free(kvurl);
    nds_free(name);
    return rc;
}
