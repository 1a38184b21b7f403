/* Compact codec strings ("zstd:5", "blosc:zstd:7:bitshuffle", "none") -> numcodecs-style config
 * JSON.
 *
 * The string only says which members to set; defaults and range checks come from the codec itself:
 * the partial config is handed to the registered codec's create and its config_json is returned, so
 * the defaults live in one place (the codec) and a codec string can never produce a config the
 * codec would reject. An empty part keeps the default ("blosc::7" = lz4 at clevel 7). Omits:
 * blosc's blocksize and zstd's checksum (write the JSON config for those). Threading: any thread.
 * Ownership: *out is a new reference for the caller.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ndstore/sys/codec.h"
#include "internal/codec_spec.h"
#include "internal/error.h"

#define MAX_PARTS 4 /* blosc:cname:clevel:shuffle */
#define PART_MAX 32

/* One compact-string position: the member it sets and how to read it. */
typedef struct spec_arg {
    const char *member;
    enum { ARG_INT, ARG_STRING, ARG_SHUFFLE } kind;
} spec_arg;

typedef struct spec_form {
    const char *name;
    size_t nargs;
    spec_arg args[MAX_PARTS - 1];
} spec_form;

static const spec_form forms[] = {
    {"zstd", 1, {{"level", ARG_INT}}},
    {"blosc", 3, {{"cname", ARG_STRING}, {"clevel", ARG_INT}, {"shuffle", ARG_SHUFFLE}}},
    {"gzip", 1, {{"level", ARG_INT}}},
    {"zlib", 1, {{"level", ARG_INT}}},
    {"bz2", 1, {{"level", ARG_INT}}},
    {"lz4", 1, {{"acceleration", ARG_INT}}},
    {"xz", 1, {{"preset", ARG_INT}}},
};

/* Strict decimal integer (optional '-'), fitting in int. */
static int parse_int(const char *s, int *out) {
    if (!*s) return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < -2147483647L - 1 || v > 2147483647L) return -1;
    if (!((s[0] >= '0' && s[0] <= '9') || s[0] == '-')) return -1; /* no spaces or '+' */
    *out = (int)v;
    return 0;
}

static int parse_shuffle(const char *s, int *out) {
    static const char *const names[] = {"noshuffle", "shuffle", "bitshuffle"};
    for (int i = 0; i < 3; i++)
        if (strcmp(s, names[i]) == 0) return *out = i, 0;
    if (strcmp(s, "autoshuffle") == 0) return *out = -1, 0;
    return parse_int(s, out);
}

/* Sets one member of cfg from part; NDS_EINVAL naming the part on bad syntax. */
static int add_arg(json_object *cfg, const spec_arg *a, const char *part, const char *text) {
    int v = 0;
    json_object *val = NULL;
    if (a->kind == ARG_STRING) {
        val = json_object_new_string(part);
    } else if ((a->kind == ARG_INT ? parse_int(part, &v) : parse_shuffle(part, &v)) == 0) {
        val = json_object_new_int(v);
    } else {
        return nds_err(NDS_EINVAL, "codec \"%s\": %s \"%s\" is not %s", text, a->member, part,
                       a->kind == ARG_INT
                           ? "an integer"
                           : "noshuffle, shuffle, bitshuffle, autoshuffle or 0/1/2/-1");
    }
    if (!val) return nds_err(NDS_ENOMEM, "codec \"%s\": out of memory", text);
    json_object_object_add(cfg, a->member, val);
    return 0;
}

/* Splits text at ':' into parts[0..*n), each copied into its own PART_MAX buffer. */
static int split(const char *text, char parts[][PART_MAX], size_t *n) {
    size_t count = 0;
    const char *p = text;
    for (;;) {
        const char *colon = strchr(p, ':');
        size_t len = colon ? (size_t)(colon - p) : strlen(p);
        if (count == MAX_PARTS)
            return nds_err(NDS_EINVAL, "codec \"%s\": too many ':' parts", text);
        if (len >= PART_MAX)
            return nds_err(NDS_EINVAL, "codec \"%s\": part \"%.*s\" is too long", text, (int)len,
                           p);
        memcpy(parts[count], p, len);
        parts[count++][len] = '\0';
        if (!colon) break;
        p = colon + 1;
    }
    *n = count;
    return 0;
}

/* Runs the partial config through the codec to validate it and fill in its defaults. */
static int complete(const char *text, const char *name, json_object *partial, json_object **out) {
    const nds_codec *c = nds_codec_find(name);
    if (!c) return nds_err(NDS_EINVAL, "codec \"%s\": codec \"%s\" is not registered", text, name);
    void *state = NULL;
    int rc = c->create(&state, partial, 1);
    if (!rc) {
        rc = c->config_json(state, out);
        c->destroy(state);
    }
    if (rc && rc != NDS_ENOMEM) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", nds_error_last()->message);
        return nds_err(NDS_EINVAL, "codec \"%s\": %s", text, msg);
    }
    return rc;
}

int nds_codec_spec_parse(const char *text, json_object **out) {
    if (!text || !*text) return nds_err(NDS_EINVAL, "codec: empty codec string");
    char parts[MAX_PARTS][PART_MAX];
    size_t n = 0;
    int rc = split(text, parts, &n);
    if (rc) return rc;
    if (strcmp(parts[0], "none") == 0) {
        if (n > 1) return nds_err(NDS_EINVAL, "codec \"%s\": none takes no parameters", text);
        *out = NULL;
        return 0;
    }
    const spec_form *f = NULL;
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++)
        if (strcmp(parts[0], forms[i].name) == 0) f = &forms[i];
    if (!f)
        return nds_err(NDS_EINVAL,
                       "codec \"%s\": unknown codec \"%s\" (expected none, zstd, blosc, "
                       "gzip, zlib, bz2, lz4 or xz)",
                       text, parts[0]);
    if (n - 1 > f->nargs)
        return nds_err(NDS_EINVAL, "codec \"%s\": %s takes at most %zu ':' parameters", text,
                       f->name, f->nargs);
    json_object *cfg = json_object_new_object();
    if (!cfg) return nds_err(NDS_ENOMEM, "codec \"%s\": out of memory", text);
    json_object_object_add(cfg, "id", json_object_new_string(f->name));
    for (size_t i = 1; i < n && !rc; i++)
        if (parts[i][0]) rc = add_arg(cfg, &f->args[i - 1], parts[i], text);
    if (!rc) rc = complete(text, f->name, cfg, out);
    json_object_put(cfg);
    return rc;
}
