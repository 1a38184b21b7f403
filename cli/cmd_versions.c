/* `ndstore log URL [-n COUNT] [--json]`, `ndstore tag URL [NAME [VERSION]]` and
 * `ndstore diff URL A B [--keys] [--json]`: the history of a versioned store
 * (include/ndstore/versioned.h). URL names the store, with or without its "|versioned:" segment
 * ("file:///ckpt/" means "file:///ckpt/|versioned:"); a path after the segment narrows diff.
 *
 * diff's default output groups chunk keys by array. The keys come in order, so the directories on
 * the current key's path are a stack: each directory is checked once (is there an array's metadata
 * document in B or A?), from the top down to the first array, and every key under it follows.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <inttypes.h>
#include <limits.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static const char log_usage[] = "ndstore log URL [-n COUNT] [--json]";
static const char log_help[] =
    "usage: ndstore log URL [-n COUNT] [--json]\n"
    "\n"
    "Print the versions of the versioned store at URL (file:///ckpt/|versioned:, or file:///ckpt/),\n"
    "newest first: number, time (UTC), keys, message, metadata and the tags naming it.\n"
    "\n"
    "  -n, --max-count N   print at most N versions\n"
    "  --json              one JSON object per line\n"
    "  -h, --help          show this help\n";

static const char tag_usage[] = "ndstore tag URL [NAME [VERSION]]";
static const char tag_help[] =
    "usage: ndstore tag URL [NAME [VERSION]]\n"
    "\n"
    "Name VERSION (default: the latest) of the versioned store at URL. Tags never move: naming a\n"
    "second version with an existing tag fails. Open a tagged version read-only with\n"
    "URL|versioned:@NAME/. Without NAME, list the tags: one \"NAME VERSION\" line each, by name.\n"
    "\n"
    "  -h, --help   show this help\n";

/* Opens url as a versioned store, adding "|versioned:" when it has no such segment. */
static int open_versioned(const char *url, nds_kvstore **out) {
    char spec[4096];
    bool has = strstr(url, "|versioned:") != NULL;
    int n = snprintf(spec, sizeof spec, "%s%s", url, has ? "" : "|versioned:");
    if (n < 0 || (size_t)n >= sizeof spec) return cli_fail("URL too long");
    nds_error_clear();
    int rc = nds_kvstore_open(out, spec, NULL);
    return rc ? cli_fail_nds(rc, spec) : CLI_OK;
}

static void format_time(int64_t ns, char *buf, size_t cap) {
    time_t secs = (time_t)(ns / 1000000000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* The store's tags (nds_versioned_tags), in name order. */
typedef struct tag_list {
    char **names;
    uint64_t *versions;
    size_t n, cap;
    bool out_of_memory;
} tag_list;

static int collect_tag(void *ctx, const char *name, uint64_t version) {
    tag_list *t = ctx;
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 16;
        char **names = realloc(t->names, cap * sizeof *names);
        if (names) t->names = names;
        uint64_t *versions = names ? realloc(t->versions, cap * sizeof *versions) : NULL;
        if (!versions) return t->out_of_memory = true;
        t->versions = versions;
        t->cap = cap;
    }
    if (!(t->names[t->n] = strdup(name))) return t->out_of_memory = true;
    t->versions[t->n++] = version;
    return 0;
}

static void tag_list_dispose(tag_list *t) {
    for (size_t i = 0; i < t->n; i++) free(t->names[i]);
    free(t->names);
    free(t->versions);
}

typedef struct log_call {
    long left;
    bool json;
    tag_list tags;
} log_call;

static int print_version(void *ctx, const nds_version_info *v) {
    log_call *c = ctx;
    if (c->left-- == 0) return 1;
    char when[32];
    format_time(v->time_ns, when, sizeof when);
    if (c->json) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "version", json_object_new_int64((int64_t)v->version));
        json_object_object_add(o, "time", json_object_new_string(when));
        json_object_object_add(o, "time_ns", json_object_new_int64(v->time_ns));
        json_object_object_add(o, "keys", json_object_new_int64((int64_t)v->keys));
        if (v->message) json_object_object_add(o, "message", json_object_new_string(v->message));
        if (v->metadata)
            json_object_object_add(o, "metadata", json_tokener_parse(v->metadata));
        json_object *tags = json_object_new_array();
        for (size_t i = 0; i < c->tags.n; i++)
            if (c->tags.versions[i] == v->version)
                json_object_array_add(tags, json_object_new_string(c->tags.names[i]));
        json_object_object_add(o, "tags", tags);
        printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        json_object_put(o);
        return 0;
    }
    printf("version %" PRIu64 "  %s  %" PRIu64 " keys", v->version, when, v->keys);
    const char *sep = "  tags: ";
    for (size_t i = 0; i < c->tags.n; i++)
        if (c->tags.versions[i] == v->version) {
            printf("%s%s", sep, c->tags.names[i]);
            sep = ", ";
        }
    printf("%s%s%s%s\n", v->message ? "  " : "", v->message ? v->message : "",
           v->metadata ? "  " : "", v->metadata ? v->metadata : "");
    return 0;
}

int cli_cmd_log(int argc, char **argv) {
    static const struct option options[] = {{"max-count", required_argument, NULL, 'n'},
                                            {"json", no_argument, NULL, 'j'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    log_call call = {-1, false, {NULL, NULL, 0, 0, false}};
    int c;
    cli_getopt_reset();
    while ((c = getopt_long(argc, argv, ":hn:", options, NULL)) != -1) {
        if (c == 'h') return cli_help(log_help);
        if (c == 'j') call.json = true;
        else if (c == 'n') {
            if (cli_parse_long(optarg, 0, LONG_MAX, &call.left) != CLI_OK)
                return cli_usage(log_usage, "-n: expected a count, got \"%s\"", optarg);
        } else return cli_bad_option(log_usage, argv, c);
    }
    if (argc - optind != 1)
        return cli_usage(log_usage, argc - optind == 0 ? "missing URL" : "too many arguments");
    if (cli_require_spec("URL", argv[optind]) != CLI_OK) return CLI_FAIL;
    nds_kvstore *kv;
    if (open_versioned(argv[optind], &kv) != CLI_OK) return CLI_FAIL;
    int rc = nds_versioned_tags(kv, collect_tag, &call.tags);
    if (!rc) rc = nds_versioned_log(kv, 0, print_version, &call);
    int status = rc < 0 ? cli_fail_nds(rc, nds_kvstore_url(kv)) : CLI_OK;
    if (call.tags.out_of_memory) status = cli_fail("out of memory listing tags");
    tag_list_dispose(&call.tags);
    nds_kvstore_free(kv);
    return status;
}

static int print_tag(void *ctx, const char *name, uint64_t version) {
    (void)ctx;
    printf("%s %" PRIu64 "\n", name, version);
    return 0;
}

static int list_tags(const char *url) {
    if (cli_require_spec("URL", url) != CLI_OK) return CLI_FAIL;
    nds_kvstore *kv;
    if (open_versioned(url, &kv) != CLI_OK) return CLI_FAIL;
    int rc = nds_versioned_tags(kv, print_tag, NULL);
    int status = rc ? cli_fail_nds(rc, nds_kvstore_url(kv)) : CLI_OK;
    nds_kvstore_free(kv);
    return status;
}

int cli_cmd_tag(int argc, char **argv) {
    static const struct option options[] = {{"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    int c;
    cli_getopt_reset();
    while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        if (c == 'h') return cli_help(tag_help);
        return cli_bad_option(tag_usage, argv, c);
    }
    int args = argc - optind;
    if (args < 1 || args > 3)
        return cli_usage(tag_usage, args < 1 ? "missing URL" : "too many arguments");
    if (args == 1) return list_tags(argv[optind]);
    uint64_t version = 0;
    if (args == 3) {
        long v;
        if (cli_parse_long(argv[optind + 2], 1, LONG_MAX, &v) != CLI_OK)
            return cli_usage(tag_usage, "VERSION: expected a version number >= 1, got \"%s\"",
                             argv[optind + 2]);
        version = (uint64_t)v;
    }
    if (cli_require_spec("URL", argv[optind]) != CLI_OK) return CLI_FAIL;
    nds_kvstore *kv;
    if (open_versioned(argv[optind], &kv) != CLI_OK) return CLI_FAIL;
    const char *name = argv[optind + 1];
    int rc = nds_versioned_tag(kv, name, version);
    if (!rc && version == 0) rc = nds_versioned_current(kv, &version);
    int status = rc ? cli_fail_nds(rc, nds_kvstore_url(kv)) : CLI_OK;
    if (!rc) printf("tag %s -> version %" PRIu64 "\n", name, version);
    nds_kvstore_free(kv);
    return status;
}

/* ---- diff ----------------------------------------------------------------------------------------- */

static const char diff_usage[] = "ndstore diff URL A B [--keys] [--json]";
static const char diff_help[] =
    "usage: ndstore diff URL A B [--keys] [--json]\n"
    "\n"
    "Show what changed from version A to version B of the versioned store at URL (A may be newer\n"
    "than B: the way back). A path after |versioned: narrows the diff to the keys under it.\n"
    "By default chunks are grouped by array (an array: a directory with zarr.json, .zarray, N5\n"
    "attributes.json with dimensions, or precomputed info, in A or B), one line per array with\n"
    "changed chunks; other keys, and the metadata keys themselves, get one line each:\n"
    "  model/w/: 3 chunks changed, 1 added, 0 removed (c/0/1 c/0/2 c/1/0 c/1/1)\n"
    "  M model/w/zarr.json\n"
    "  + notes.txt\n"
    "A key written again counts as changed even when its bytes are equal.\n"
    "\n"
    "  --keys       one line per key: + added, - removed, M changed\n"
    "  --json       one JSON object per key: {\"key\":...,\"change\":\"added\"|\"removed\"|\"changed\"}\n"
    "  -h, --help   show this help\n";

/* At most this many chunk names per array line, then "...". */
#define DIFF_NAMES_MAX 8

static const char *const kind_words[] = {"added", "removed", "changed"};
static const char kind_marks[] = {'+', '-', 'M'};

/* One differing key. */
typedef struct diff_key {
    char *key;
    nds_diff_kind kind;
} diff_key;

typedef struct diff_keys {
    diff_key *v;
    size_t n, cap;
} diff_keys;

static void diff_keys_dispose(diff_keys *d) {
    for (size_t i = 0; i < d->n; i++) free(d->v[i].key);
    free(d->v);
}

static int collect_key(void *ctx, const char *key, nds_diff_kind kind) {
    diff_keys *d = ctx;
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 256;
        diff_key *v = realloc(d->v, cap * sizeof *v);
        if (!v) return cli_fail("out of memory collecting the diff");
        d->v = v;
        d->cap = cap;
    }
    char *copy = strdup(key);
    if (!copy) return cli_fail("out of memory collecting the diff");
    d->v[d->n++] = (diff_key){copy, kind};
    return 0;
}

static int print_key_line(void *ctx, const char *key, nds_diff_kind kind) {
    (void)ctx;
    printf("%c %s\n", kind_marks[kind], key);
    return 0;
}

static int print_key_json(void *ctx, const char *key, nds_diff_kind kind) {
    (void)ctx;
    json_object *o = json_object_new_object();
    json_object_object_add(o, "key", json_object_new_string(key));
    json_object_object_add(o, "change", json_object_new_string(kind_words[kind]));
    printf("%s\n", json_object_to_json_string_ext(
                       o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
    return 0;
}

/* url pinned to version v, keeping its path: "X|versioned:[@SEL/]PATH" or "X" becomes
 * "X|versioned:@V/PATH" (the base part is kept as typed, credentials included). */
static char *pinned_url(const char *url, uint64_t v) {
    const char *seg = strstr(url, "|versioned:"), *path = "";
    size_t base_len = seg ? (size_t)(seg - url) : strlen(url);
    if (seg) {
        path = seg + strlen("|versioned:");
        if (*path == '@') {
            const char *slash = strchr(path, '/');
            path = slash ? slash + 1 : "";
        }
    }
    char *out = NULL;
    if (asprintf(&out, "%.*s|versioned:@%" PRIu64 "/%s", (int)base_len, url, v, path) < 0)
        return NULL;
    return out;
}

/* Metadata documents: their keys are listed one by one, never counted as chunks. */
static bool is_metadata_name(const char *name) {
    static const char *const names[] = {"zarr.json", ".zarray", ".zattrs", ".zgroup",
                                        ".zmetadata", "attributes.json", "info", "provenance"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(name, names[i]) == 0) return true;
    return false;
}

/* Whether a metadata document of the given name describes an array (zarr v3 and N5 use the same
 * name for groups). */
static bool describes_array(const char *name, const nds_bytes *doc) {
    if (strcmp(name, ".zarray") == 0 || strcmp(name, "info") == 0) return true;
    if (doc->len > INT_MAX) return false;
    json_tokener *tok = json_tokener_new();
    json_object *o = tok ? json_tokener_parse_ex(tok, (const char *)doc->data, (int)doc->len) : NULL;
    json_tokener_free(tok);
    json_object *v = NULL;
    bool array = false;
    if (strcmp(name, "zarr.json") == 0)
        array = json_object_object_get_ex(o, "node_type", &v) &&
                strcmp(json_object_get_string(v) ? json_object_get_string(v) : "", "array") == 0;
    else
        array = json_object_object_get_ex(o, "dimensions", &v) &&
                json_object_is_type(v, json_type_array);
    json_object_put(o);
    return array;
}

/* The two versions' handles, which say whether a directory holds an array. */
typedef struct array_probe {
    nds_kvstore *at[2]; /* B first: a metadata document present in both is read where it is now */
} array_probe;

/* Whether dir ("" or ending in '/') is an array in B or A. */
static int probe_array(array_probe *p, const char *dir, bool *is_array) {
    static const char *const names[] = {"zarr.json", ".zarray", "attributes.json", "info"};
    *is_array = false;
    for (size_t n = 0; n < sizeof names / sizeof *names; n++) {
        char *key = NULL;
        if (asprintf(&key, "%s%s", dir, names[n]) < 0) return cli_fail("out of memory");
        bool found = false;
        for (int side = 0; side < 2 && !found; side++) {
            nds_read_result r;
            nds_error_clear();
            int rc = nds_kvstore_read(p->at[side], key, NULL, &r);
            if (rc) {
                free(key);
                return cli_fail_nds(rc, nds_kvstore_url(p->at[side]));
            }
            found = r.state == NDS_READ_VALUE;
            if (found) *is_array = describes_array(names[n], &r.value);
            nds_read_result_dispose(&r);
        }
        free(key);
        if (found) return CLI_OK;
    }
    return CLI_OK;
}

/* An array with changed chunks: its line. */
typedef struct array_line {
    char *dir;
    uint64_t count[3]; /* by nds_diff_kind */
    const char *names[DIFF_NAMES_MAX]; /* borrowed from the collected keys */
    size_t nnames;
    bool more;
} array_line;

/* A directory on the path of the current key, checked once (keys come in order, so every key
 * under a directory follows the others at once). */
typedef struct dir_level {
    size_t len;  /* the directory is the current key's first len bytes */
    long line;   /* its array line (index into lines), or -1 when not an array */
} dir_level;

typedef struct grouper {
    array_probe probe;
    const char *prev;   /* the key the stack describes */
    dir_level *stack;   /* from "" down to the first array, at most one level per '/' + 1 */
    size_t depth;
    array_line *lines;
    size_t nlines, cap;
} grouper;

/* Pushes the directory key[0..len) after checking whether it is an array. */
static int push_dir(grouper *g, const char *key, size_t len) {
    char *dir = strndup(key, len);
    bool is_array = false;
    int status = dir ? probe_array(&g->probe, dir, &is_array) : cli_fail("out of memory");
    if (status != CLI_OK || !is_array) {
        free(dir);
        if (status == CLI_OK) g->stack[g->depth++] = (dir_level){len, -1};
        return status;
    }
    if (g->nlines == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 16;
        array_line *lines = realloc(g->lines, cap * sizeof *lines);
        if (!lines) {
            free(dir);
            return cli_fail("out of memory");
        }
        g->lines = lines;
        g->cap = cap;
    }
    g->lines[g->nlines] = (array_line){.dir = dir};
    g->stack[g->depth++] = (dir_level){len, (long)g->nlines++};
    return CLI_OK;
}

/* The array key belongs to (its line), or -1: the directories it shares with the previous key
 * are known, the others are checked from the top down to the first array. */
static int owner_of(grouper *g, const char *key, long *line) {
    while (g->depth > 0 && strncmp(key, g->prev, g->stack[g->depth - 1].len) != 0) g->depth--;
    int status = g->depth == 0 ? push_dir(g, key, 0) : CLI_OK;
    while (status == CLI_OK && g->stack[g->depth - 1].line < 0) {
        const char *slash = strchr(key + g->stack[g->depth - 1].len, '/');
        if (!slash) break;
        status = push_dir(g, key, (size_t)(slash - key) + 1);
    }
    g->prev = key;
    *line = g->stack[g->depth - 1].line;
    return status;
}

static void count_chunk(array_line *a, const char *name, nds_diff_kind kind) {
    a->count[kind]++;
    if (a->nnames < DIFF_NAMES_MAX)
        a->names[a->nnames++] = name;
    else
        a->more = true;
}

static void print_array_line(const array_line *a) {
    uint64_t changed = a->count[NDS_DIFF_CHANGED];
    printf("%s: %" PRIu64 " chunk%s changed, %" PRIu64 " added, %" PRIu64 " removed (",
           a->dir[0] ? a->dir : "./", changed, changed == 1 ? "" : "s", a->count[NDS_DIFF_ADDED],
           a->count[NDS_DIFF_REMOVED]);
    for (size_t i = 0; i < a->nnames; i++) printf("%s%s", i ? " " : "", a->names[i]);
    printf("%s)\n", a->more ? " ..." : "");
}

/* Sorts the keys into array lines and key lines, then prints both in key order (an array's line
 * where its directory sorts: before its own keys). */
static int print_grouped(grouper *g, const diff_keys *d) {
    long *owner = calloc(d->n ? d->n : 1, sizeof *owner);
    if (!owner) return cli_fail("out of memory");
    int status = CLI_OK;
    for (size_t i = 0; i < d->n && status == CLI_OK; i++) {
        status = owner_of(g, d->v[i].key, &owner[i]);
        const char *slash = strrchr(d->v[i].key, '/');
        const char *base = slash ? slash + 1 : d->v[i].key;
        if (status == CLI_OK && owner[i] >= 0 && is_metadata_name(base)) owner[i] = -1;
        if (status == CLI_OK && owner[i] >= 0) {
            array_line *a = &g->lines[owner[i]];
            count_chunk(a, d->v[i].key + strlen(a->dir), d->v[i].kind);
        }
    }
    size_t next_line = 0;
    for (size_t i = 0; i < d->n && status == CLI_OK; i++) {
        for (; next_line < g->nlines && strcmp(g->lines[next_line].dir, d->v[i].key) <= 0;
             next_line++)
            if (g->lines[next_line].nnames > 0) print_array_line(&g->lines[next_line]);
        if (owner[i] < 0) print_key_line(NULL, d->v[i].key, d->v[i].kind);
    }
    for (; status == CLI_OK && next_line < g->nlines; next_line++)
        if (g->lines[next_line].nnames > 0) print_array_line(&g->lines[next_line]);
    free(owner);
    return status;
}

/* The default output: needs the two versions' handles to find the arrays. */
static int diff_grouped(nds_kvstore *kv, const char *url, const uint64_t v[2]) {
    diff_keys d = {0};
    nds_error_clear();
    int rc = nds_versioned_diff(kv, v[0], v[1], collect_key, &d);
    /* collect_key stops with CLI_FAIL (printed); library errors are negative. */
    int status = rc == CLI_FAIL ? CLI_FAIL : rc ? cli_fail_nds(rc, nds_kvstore_url(kv)) : CLI_OK;
    size_t max_depth = 1;
    for (size_t i = 0; i < d.n; i++) {
        size_t depth = 1;
        for (const char *p = d.v[i].key; (p = strchr(p, '/')) != NULL; p++) depth++;
        if (depth > max_depth) max_depth = depth;
    }
    grouper g = {0};
    g.stack = calloc(max_depth, sizeof *g.stack);
    if (status == CLI_OK && !g.stack) status = cli_fail("out of memory");
    for (int side = 0; side < 2 && status == CLI_OK && d.n > 0; side++) {
        char *pinned = pinned_url(url, v[1 - side]);
        nds_error_clear();
        rc = pinned ? nds_kvstore_open(&g.probe.at[side], pinned, NULL) : NDS_ENOMEM;
        if (rc) status = cli_fail_nds(rc, pinned ? pinned : "out of memory");
        free(pinned);
    }
    if (status == CLI_OK) status = print_grouped(&g, &d);
    for (size_t i = 0; i < g.nlines; i++) free(g.lines[i].dir);
    free(g.lines);
    free(g.stack);
    nds_kvstore_free(g.probe.at[0]);
    nds_kvstore_free(g.probe.at[1]);
    diff_keys_dispose(&d);
    return status;
}

static int parse_version(const char *text, const char *what, uint64_t *out) {
    long v;
    if (cli_parse_long(text, 1, LONG_MAX, &v) != CLI_OK)
        return cli_usage(diff_usage, "%s: expected a version number >= 1, got \"%s\"", what, text);
    *out = (uint64_t)v;
    return CLI_OK;
}

int cli_cmd_diff(int argc, char **argv) {
    static const struct option options[] = {{"json", no_argument, NULL, 'j'},
                                            {"keys", no_argument, NULL, 'k'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    bool json = false, keys = false;
    int c;
    cli_getopt_reset();
    while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        if (c == 'h') return cli_help(diff_help);
        if (c == 'j') json = true;
        else if (c == 'k') keys = true;
        else return cli_bad_option(diff_usage, argv, c);
    }
    int args = argc - optind;
    if (args != 3)
        return cli_usage(diff_usage, args < 3 ? "missing URL, A or B" : "too many arguments");
    const char *url = argv[optind];
    uint64_t v[2];
    if (parse_version(argv[optind + 1], "A", &v[0]) != CLI_OK ||
        parse_version(argv[optind + 2], "B", &v[1]) != CLI_OK)
        return CLI_USAGE;
    if (cli_require_spec("URL", url) != CLI_OK) return CLI_FAIL;
    nds_kvstore *kv;
    if (open_versioned(url, &kv) != CLI_OK) return CLI_FAIL;
    int status;
    if (json || keys) {
        nds_error_clear();
        int rc = nds_versioned_diff(kv, v[0], v[1], json ? print_key_json : print_key_line, NULL);
        status = rc ? cli_fail_nds(rc, nds_kvstore_url(kv)) : CLI_OK;
    } else {
        status = diff_grouped(kv, url, v);
    }
    nds_kvstore_free(kv);
    return status;
}
