/* `ndstore ls URL [--recursive | --no-recursive]`: the keys under a kvstore prefix with their sizes,
 * sorted, then a total line. Recursive by default; --no-recursive folds keys below the first '/' into
 * one "dir/" entry with their total size. A trailing "|format:" on the URL is ignored, so an array URL
 * lists the array's keys, and a URL is taken as a directory (a '/' is appended when missing).
 *
 * Arrays among the keys are named: a key whose last component is a format's metadata key
 * (".zarray", "zarr.json", "attributes.json", "info") is opened as that format's array, and its
 * line ends with "(format: summary)" (cli_details_summary), or "(cannot open: message)" when the
 * document is there but unreadable; groups (open says not found) get nothing. A folded "dir/"
 * entry gets its own array's summary, or "(N arrays)" for the arrays below it.
 * Omits: glob patterns, human-readable sizes, formats registered at run time (the public API cannot
 * enumerate the registry; the four built-in names are listed here).
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "ndstore/sys/format.h"

static const char usage[] = "ndstore ls URL [--recursive | --no-recursive]";

static const char help[] =
    "usage: ndstore ls URL [--recursive | --no-recursive]\n"
    "\n"
    "List the keys under a kvstore URL (file:///d/a.zarr/, memory://x/, a bare path, or a JSON kvstore\n"
    "spec) with their sizes in bytes, sorted, then a total line. An array's metadata key\n"
    "(.zarray, zarr.json, attributes.json, info) ends with the array's format and a summary:\n"
    "dtype, shape, chunks, sharding, codec, and for precomputed its scales.\n"
    "\n"
    "  -R, --recursive      list every key below URL (the default)\n"
    "  -d, --no-recursive   show only the first level; deeper keys are summed into \"dir/\" entries\n"
    "  -h, --help           show this help\n";

static const struct option options[] = {
    {"recursive", no_argument, NULL, 'R'},
    {"no-recursive", no_argument, NULL, 'd'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

typedef struct entry {
    char *key;
    uint64_t size;   /* UINT64_MAX = unknown */
    char *note;      /* "(zarr: ...)" after the key, or NULL */
    bool opened;     /* note describes an array that opened (not an error) */
    uint64_t arrays; /* arrays this entry's metadata key opened (a folded entry: all below it) */
} entry;

typedef struct listing {
    entry *v;
    size_t n, cap;
    bool oom;
} listing;

static int collect(void *ctx, const char *key, uint64_t size) {
    listing *l = ctx;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        entry *v = realloc(l->v, cap * sizeof *v);
        if (!v) {
            l->oom = true;
            return 1;
        }
        l->v = v;
        l->cap = cap;
    }
    char *k = strdup(key);
    if (!k) {
        l->oom = true;
        return 1;
    }
    l->v[l->n++] = (entry){k, size, NULL, false, 0};
    return 0;
}

static int by_key(const void *a, const void *b) {
    return strcmp(((const entry *)a)->key, ((const entry *)b)->key);
}

/* Folds sorted keys "d/x", "d/y" into one entry "d/" (in place). The entry keeps the note of d's
 * own array ("d/.zarray") and counts the arrays below d. */
static void fold_dirs(listing *l) {
    size_t out = 0;
    for (size_t i = 0; i < l->n; i++) {
        entry e = l->v[i];
        char *slash = strchr(e.key, '/');
        if (slash) {
            if (strchr(slash + 1, '/')) { /* deeper than d's own metadata key */
                free(e.note);
                e.note = NULL;
                e.opened = false;
            }
            slash[1] = '\0';
        }
        if (out > 0 && slash && strcmp(l->v[out - 1].key, e.key) == 0) {
            entry *prev = &l->v[out - 1];
            prev->size = prev->size == UINT64_MAX || e.size == UINT64_MAX ? UINT64_MAX
                                                                           : prev->size + e.size;
            prev->arrays += e.arrays;
            if (!prev->note) {
                prev->note = e.note;
                prev->opened = e.opened;
                e.note = NULL;
            }
            free(e.note);
            free(e.key);
            continue;
        }
        l->v[out++] = e;
    }
    l->n = out;
}

/* Formats whose metadata keys mark arrays. (Formats registered at run time are not listed: the
 * public API has no way to enumerate the registry.) */
static const char *const known_formats[] = {"zarr", "zarr3", "n5", "neuroglancer_precomputed"};

/* The format whose metadata key is key's last component, or NULL. */
static const nds_format *format_of_key(const char *key) {
    const char *slash = strrchr(key, '/'), *base = slash ? slash + 1 : key;
    for (size_t i = 0; i < sizeof known_formats / sizeof known_formats[0]; i++) {
        const nds_format *f = nds_format_find(known_formats[i]);
        if (f && f->metadata_key && strcmp(f->metadata_key, base) == 0)
            return f;
    }
    return NULL;
}

/* The spec of format f's array in directory dir ("" or "a/b/") of kv, as new JSON text (free). */
static char *array_spec(nds_kvstore *kv, const char *dir, const nds_format *f) {
    nds_kvstore *sub = NULL;
    char *kvspec = NULL, *out = NULL;
    int st = dir[0] ? nds_kvstore_sub(&sub, kv, dir) : (sub = nds_kvstore_ref(kv), 0);
    if (st == 0)
        st = nds_kvstore_spec(sub, &kvspec);
    json_object *kvj = st == 0 ? json_tokener_parse(kvspec) : NULL;
    json_object *spec = json_object_new_object();
    if (kvj && spec) {
        json_object_object_add(spec, "driver", json_object_new_string(f->name));
        json_object_object_add(spec, "kvstore", kvj);
        out = strdup(json_object_to_json_string_ext(spec, JSON_C_TO_STRING_PLAIN));
    } else {
        json_object_put(kvj);
    }
    json_object_put(spec);
    nds_free(kvspec);
    nds_kvstore_free(sub);
    return out;
}

/* Opens format f's array in dir and returns its note (malloc'd), or NULL for a group or when out of
 * memory. *opened is set when the array opened. */
static char *describe_array(nds_kvstore *kv, const char *dir, const nds_format *f, bool *opened) {
    char note[1024], summary[768];
    char *spec = array_spec(kv, dir, f);
    nds_array *a = NULL;
    nds_open_options o = NDS_OPEN_OPTIONS_INIT;
    o.mode = NDS_OPEN_EXISTING;
    nds_error_clear();
    int st = spec ? nds_array_open(&a, spec, &o) : NDS_ENOMEM;
    free(spec);
    *opened = st == 0;
    if (st == NDS_ENOTFOUND || st == NDS_ENOMEM)
        return NULL;
    json_object *d = NULL;
    if (st == 0)
        st = cli_details(a, &d);
    if (st == 0) {
        cli_details_summary(a, d, summary, sizeof summary);
        snprintf(note, sizeof note, "(%s: %s)", f->name, summary);
    } else {
        const nds_error *e = nds_error_last(); /* its message starts with the format's name */
        if (e->message[0])
            snprintf(note, sizeof note, "(cannot open: %s)", e->message);
        else
            snprintf(note, sizeof note, "(%s: cannot open: %s)", f->name, nds_strerror(st));
    }
    json_object_put(d);
    nds_array_free(a);
    return strdup(note);
}

/* Notes the entries that are arrays' metadata keys. */
static void annotate(nds_kvstore *kv, listing *l) {
    for (size_t i = 0; i < l->n; i++) {
        const nds_format *f = format_of_key(l->v[i].key);
        if (!f)
            continue;
        const char *slash = strrchr(l->v[i].key, '/');
        size_t n = slash ? (size_t)(slash - l->v[i].key) + 1 : 0;
        char *dir = strndup(l->v[i].key, n);
        bool opened = false;
        if (dir)
            l->v[i].note = describe_array(kv, dir, f, &opened);
        l->v[i].opened = opened;
        l->v[i].arrays = opened;
        free(dir);
    }
}

/* The rest of an entry's line: its array's note and, for a folded entry, the arrays below it. */
static void print_note(const entry *e) {
    uint64_t below = e->arrays - e->opened;
    if (e->note)
        printf("  %s", e->note);
    if (below > 0 && strchr(e->key, '/'))
        printf("%s(%" PRIu64 " array%s%s)", e->note ? " " : "  ", below, below == 1 ? "" : "s",
               e->note ? " below" : "");
    printf("\n");
}

static void print_listing(const listing *l) {
    uint64_t total = 0, unknown = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (l->v[i].size == UINT64_MAX) {
            unknown++;
            printf("%12s  %s", "?", l->v[i].key);
        } else {
            total += l->v[i].size;
            printf("%12" PRIu64 "  %s", l->v[i].size, l->v[i].key);
        }
        print_note(&l->v[i]);
    }
    printf("%zu %s, %" PRIu64 " bytes", l->n, l->n == 1 ? "entry" : "entries", total);
    if (unknown)
        printf(" (%" PRIu64 " of unknown size)", unknown);
    printf("\n");
}

/* A URL names a directory-like prefix: "d/a.zarr" lists d/a.zarr/..., not d/a.zarr.bak too. The
 * handle's path gets the '/' (not the URL's text, whose last segment may be an adapter's). */
static int open_as_directory(const char *url, nds_kvstore **out) {
    nds_kvstore *kv = NULL;
    int st = nds_kvstore_open(&kv, url, NULL);
    if (st != 0)
        return st;
    const char *path = nds_kvstore_path(kv);
    size_t len = strlen(path);
    if (len == 0 || path[len - 1] == '/') {
        *out = kv;
        return 0;
    }
    st = nds_kvstore_sub(out, kv, "/");
    nds_kvstore_free(kv);
    return st;
}

int cli_cmd_ls(int argc, char **argv) {
    bool recursive = true;
    int c;
    cli_getopt_reset();
    while ((c = getopt_long(argc, argv, ":hRd", options, NULL)) != -1) {
        if (c == 'h')
            return cli_help(help);
        if (c == 'R' || c == 'd')
            recursive = c == 'R';
        else
            return cli_bad_option(usage, argv, c);
    }
    if (argc - optind != 1)
        return cli_usage(usage, argc - optind == 0 ? "missing URL" : "too many arguments");
    if (cli_require_spec("URL", argv[optind]) != CLI_OK)
        return CLI_FAIL;
    char url[4096];
    if (cli_kvstore_url(argv[optind], url, sizeof url, NULL, 0) != CLI_OK)
        return CLI_FAIL;
    nds_kvstore *kv = NULL;
    nds_error_clear();
    int st = open_as_directory(url, &kv);
    if (st != 0)
        return cli_fail_nds(st, url);
    listing l = {0};
    st = nds_kvstore_list(kv, "", collect, &l);
    int rc = CLI_OK;
    if (l.oom)
        rc = cli_fail("out of memory listing %s", url);
    else if (st != 0)
        rc = cli_fail_nds(st, url);
    if (rc == CLI_OK) {
        if (l.n > 1) /* an empty listing has no array: qsort(NULL, ..) is undefined */
            qsort(l.v, l.n, sizeof *l.v, by_key);
        annotate(kv, &l);
        if (!recursive)
            fold_dirs(&l);
        print_listing(&l);
    }
    for (size_t i = 0; i < l.n; i++) {
        free(l.v[i].key);
        free(l.v[i].note);
    }
    free(l.v);
    nds_kvstore_free(kv);
    return rc;
}
