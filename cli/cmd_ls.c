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
 * Consolidated metadata (issue 20): with --consolidated (the default for http(s)://, s3:// and
 * gs:// URLs), a URL whose root holds zarr v2 .zmetadata or a zarr v3 zarr.json with inline
 * "consolidated_metadata" is listed from that one document: its metadata keys, each array opened
 * from its consolidated copy (in a private memory store, so no further request), and no chunk keys
 * or sizes. Otherwise the keys are listed, and when the root holds consolidated metadata each
 * array's own metadata is compared with its copy there; a difference is said on its line.
 * Omits: glob patterns, human-readable sizes, formats registered at run time (the public API cannot
 * enumerate the registry; the four built-in names are listed here).
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"
#include "ndstore/sys/format.h"

static const char usage[] =
    "ndstore ls URL [--recursive | --no-recursive] [--consolidated | --no-consolidated]";

static const char help[] =
    "usage: ndstore ls URL [--recursive | --no-recursive] [--consolidated | --no-consolidated]\n"
    "\n"
    "List the keys under a kvstore URL (file:///d/a.zarr/, memory://x/, a bare path, or a JSON kvstore\n"
    "spec) with their sizes in bytes, sorted, then a total line. An array's metadata key\n"
    "(.zarray, zarr.json, attributes.json, info) ends with the array's format and a summary:\n"
    "dtype, shape, chunks, sharding, codec, and for precomputed its scales.\n"
    "\n"
    "  -R, --recursive      list every key below URL (the default)\n"
    "  -d, --no-recursive   show only the first level; deeper keys are summed into \"dir/\" entries\n"
    "  -c, --consolidated   when URL's root has consolidated metadata (zarr .zmetadata, zarr3\n"
    "                       consolidated_metadata), list its documents from it in one read (no\n"
    "                       chunk keys, no sizes); the default for http(s)://, s3:// and gs:// URLs\n"
    "  -C, --no-consolidated  list the store's keys; arrays whose own metadata differs from the\n"
    "                       root's consolidated copy say so (the default for other URLs)\n"
    "  -h, --help           show this help\n";

static const struct option options[] = {
    {"recursive", no_argument, NULL, 'R'},
    {"no-recursive", no_argument, NULL, 'd'},
    {"consolidated", no_argument, NULL, 'c'},
    {"no-consolidated", no_argument, NULL, 'C'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

typedef struct entry {
    char *key;
    uint64_t size;   /* UINT64_MAX = unknown */
    char *note;      /* "(zarr: ...)" after the key, or NULL */
    bool opened;     /* note describes an array that opened (not an error) */
    uint64_t arrays; /* arrays this entry's metadata key opened (a folded entry: all below it) */
    char *meta;      /* the opened array's metadata document (JSON text, nds_free), or NULL */
} entry;

typedef struct listing {
    entry *v;
    size_t n, cap;
    bool oom;
    bool from_snapshot; /* listed from consolidated metadata: no sizes */
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
    l->v[l->n++] = (entry){k, size, NULL, false, 0, NULL};
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
            nds_free(e.meta);
            continue;
        }
        l->v[out++] = e;
    }
    l->n = out;
}

typedef struct key_match {
    const char *base;       /* the key's last component */
    const nds_format *found;
} key_match;

static int match_metadata_key(void *ctx, const nds_format *f) {
    key_match *m = ctx;
    if (!f->metadata_key || strcmp(f->metadata_key, m->base) != 0)
        return 0;
    m->found = f;
    return 1;
}

/* The registered format whose metadata key is key's last component, or NULL. */
static const nds_format *format_of_key(const char *key) {
    const char *slash = strrchr(key, '/');
    key_match m = {slash ? slash + 1 : key, NULL};
    nds_format_each(match_metadata_key, &m);
    return m.found;
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
 * memory. *opened is set when the array opened, *meta (nds_free) to its metadata document. */
static char *describe_array(nds_kvstore *kv, const char *dir, const nds_format *f, bool *opened,
                            char **meta) {
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
    if (st == 0 && nds_array_metadata(a, meta) != 0)
        *meta = NULL; /* only compared with a consolidated copy: not worth failing the line */
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
            l->v[i].note = describe_array(kv, dir, f, &opened, &l->v[i].meta);
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
        if (l->from_snapshot) {
            printf("%12s  %s", "-", l->v[i].key);
        } else if (l->v[i].size == UINT64_MAX) {
            unknown++;
            printf("%12s  %s", "?", l->v[i].key);
        } else {
            total += l->v[i].size;
            printf("%12" PRIu64 "  %s", l->v[i].size, l->v[i].key);
        }
        print_note(&l->v[i]);
    }
    if (l->from_snapshot) {
        printf("%zu %s from consolidated metadata (chunk keys and sizes not listed: "
               "--no-consolidated lists the store)\n",
               l->n, l->n == 1 ? "entry" : "entries");
        return;
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

/* ---- consolidated metadata ------------------------------------------------------------------ */

/* snapshot_read's outcomes besides CLI_FAIL (a malformed copy, named on stderr). */
enum { SNAP_NONE = 0, SNAP_FOUND = 10 };
/* Largest consolidated document read (the library's limit too: formats/zarr_consolidated.h). */
#define SNAP_MAX_BYTES (256 << 20)

/* The consolidated metadata at a listing's root. */
typedef struct snapshot {
    json_object *doc;     /* the document as read (.zmetadata, or the root group's zarr.json) */
    json_object *entries; /* borrowed from doc: path -> metadata document */
    bool v3;              /* zarr.json's inline copy (entries keyed by node path) */
    const char *key;      /* ".zmetadata" or "zarr.json" */
} snapshot;

/* A key inside the root: relative, no empty, "." or ".." segments. */
static bool inner_path(const char *p) {
    if (!p[0] || p[0] == '/')
        return false;
    for (const char *s = p; *s;) {
        size_t n = strcspn(s, "/");
        if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
            return false;
        s += n;
        if (*s == '/' && !*++s)
            return false;
    }
    return true;
}

/* Checks the map of a consolidated document: each entry an inner path naming an object (v2: a
 * .zarray, .zattrs or .zgroup key). The formats check each document when it is opened. */
static int snapshot_check(const snapshot *s, const char *where) {
    if (!json_object_is_type(s->entries, json_type_object))
        return cli_fail("%s: \"%s\" must be an object", where,
                        s->v3 ? "consolidated_metadata.metadata" : "metadata");
    json_object_object_foreach(s->entries, k, v) {
        const char *slash = strrchr(k, '/'), *base = slash ? slash + 1 : k;
        bool named = s->v3 || strcmp(base, ".zarray") == 0 || strcmp(base, ".zattrs") == 0 ||
                     strcmp(base, ".zgroup") == 0;
        if (!inner_path(k) || !named)
            return cli_fail("%s: entry \"%.200s\" is not %s", where, k,
                            s->v3 ? "a path inside the group"
                                  : "a .zarray, .zattrs or .zgroup key inside the group");
        if (!json_object_is_type(v, json_type_object))
            return cli_fail("%s: entry \"%.200s\" must be an object", where, k);
    }
    return CLI_OK;
}

/* Finds the members of a parsed document that hold consolidated metadata: SNAP_FOUND, SNAP_NONE
 * (a zarr.json that is an array or a group without it), CLI_FAIL on a malformed copy. */
static int snapshot_parse(snapshot *s, const char *where) {
    json_object *v, *cm;
    if (!json_object_is_type(s->doc, json_type_object))
        return cli_fail("%s: expected a json object", where);
    if (!s->v3) {
        if (!json_object_object_get_ex(s->doc, "zarr_consolidated_format", &v) ||
            !json_object_is_type(v, json_type_int) || json_object_get_int64(v) != 1)
            return cli_fail("%s: \"zarr_consolidated_format\" must be 1", where);
        if (!json_object_object_get_ex(s->doc, "metadata", &s->entries))
            return cli_fail("%s: missing member \"metadata\"", where);
        return snapshot_check(s, where) == CLI_OK ? SNAP_FOUND : CLI_FAIL;
    }
    if (!json_object_object_get_ex(s->doc, "node_type", &v) ||
        strcmp(json_object_get_string(v), "group") != 0 ||
        !json_object_object_get_ex(s->doc, "consolidated_metadata", &cm) || !cm)
        return SNAP_NONE;
    if (!json_object_is_type(cm, json_type_object))
        return cli_fail("%s: \"consolidated_metadata\" must be an object or null", where);
    if (!json_object_object_get_ex(cm, "kind", &v) ||
        strcmp(json_object_get_string(v), "inline") != 0)
        return cli_fail("%s: \"consolidated_metadata\": \"kind\" must be \"inline\"", where);
    if (!json_object_object_get_ex(cm, "metadata", &s->entries))
        return cli_fail("%s: \"consolidated_metadata\": missing member \"metadata\"", where);
    return snapshot_check(s, where) == CLI_OK ? SNAP_FOUND : CLI_FAIL;
}

/* Reads one candidate key: SNAP_FOUND, SNAP_NONE when missing or no consolidated copy, CLI_FAIL. */
static int snapshot_try(nds_kvstore *kv, snapshot *s) {
    nds_read_result r = {0};
    nds_read_options o = NDS_READ_OPTIONS_INIT;
    o.byte_length = (int64_t)SNAP_MAX_BYTES + 1; /* a huge copy is refused without being held */
    nds_error_clear();
    int st = nds_kvstore_read(kv, s->key, &o, &r);
    if (st == NDS_EPERM) { /* readable keys may still be listed */
        nds_error_clear();
        return SNAP_NONE;
    }
    if (st != 0) {
        char what[4200];
        snprintf(what, sizeof what, "%s%s", nds_kvstore_url(kv), s->key);
        return cli_fail_nds(st, what);
    }
    int rc = SNAP_NONE;
    char where[4200];
    snprintf(where, sizeof where, "%s of %s", s->key, nds_kvstore_url(kv));
    if (r.state == NDS_READ_VALUE && (r.value.len > SNAP_MAX_BYTES || r.total_size > SNAP_MAX_BYTES)) {
        rc = cli_fail("%s: more than the %d MiB read as consolidated metadata", where,
                      SNAP_MAX_BYTES >> 20);
    } else if (r.state == NDS_READ_VALUE) {
        json_tokener *tok = json_tokener_new_ex(JSON_TOKENER_DEFAULT_DEPTH);
        s->doc = tok ? json_tokener_parse_ex(tok, (const char *)r.value.data, (int)r.value.len)
                     : NULL;
        bool whole = tok && json_tokener_get_error(tok) == json_tokener_success &&
                     json_tokener_get_parse_end(tok) == r.value.len && r.value.len <= INT32_MAX;
        json_tokener_free(tok);
        if (!s->doc || !whole)
            rc = cli_fail("%s: not valid JSON", where);
        else
            rc = snapshot_parse(s, where);
    }
    nds_read_result_dispose(&r);
    if (rc != SNAP_FOUND) {
        json_object_put(s->doc);
        s->doc = NULL;
        s->entries = NULL;
    }
    return rc;
}

/* The consolidated metadata at kv's root: .zmetadata first, then zarr.json. SNAP_FOUND, SNAP_NONE,
 * CLI_FAIL when a copy is there but malformed (printed). */
static int snapshot_read(nds_kvstore *kv, snapshot *s) {
    memset(s, 0, sizeof *s);
    s->key = ".zmetadata";
    int rc = snapshot_try(kv, s);
    if (rc != SNAP_NONE)
        return rc;
    s->v3 = true;
    s->key = "zarr.json";
    return snapshot_try(kv, s);
}

/* The consolidated copy of the metadata key of a listed entry, or NULL. */
static json_object *snapshot_entry(const snapshot *s, const char *key) {
    json_object *v = NULL;
    if (!s->v3)
        return json_object_object_get_ex(s->entries, key, &v) ? v : NULL;
    const char *slash = strrchr(key, '/');
    if (!slash) /* the root group's own document is not an entry */
        return NULL;
    char *path = strndup(key, (size_t)(slash - key));
    if (path && !json_object_object_get_ex(s->entries, path, &v))
        v = NULL;
    free(path);
    return v;
}

/* Appends to the note of each array whose own metadata differs from its consolidated copy. */
static void note_stale(listing *l, const snapshot *s) {
    for (size_t i = 0; i < l->n; i++) {
        entry *e = &l->v[i];
        if (!e->opened || !e->meta)
            continue;
        json_object *own = json_tokener_parse(e->meta), *copy = snapshot_entry(s, e->key);
        const char *say = !copy ? "not in the consolidated metadata"
                          : !json_object_equal(own, copy)
                              ? "consolidated copy differs: run `ndstore group consolidate`"
                              : NULL;
        json_object_put(own);
        if (!say)
            continue;
        size_t n = strlen(e->note) + strlen(say) + 4;
        char *note = malloc(n);
        if (note) {
            snprintf(note, n, "%s [%s]", e->note, say);
            free(e->note);
            e->note = note;
        }
    }
}

/* A process-private memory store holding the consolidated documents under their keys. */
static int snapshot_store(const snapshot *s, listing *l, nds_kvstore **out) {
    char url[128];
    static unsigned serial;
    snprintf(url, sizeof url, "memory://.ndstore-ls-consolidated-%ld-%u/", (long)getpid(),
             serial++);
    nds_error_clear();
    int st = nds_kvstore_open(out, url, NULL);
    if (st == 0 && s->v3) { /* the root group itself, without its copy of everything */
        json_object *root = NULL;
        json_object_deep_copy(s->doc, &root, NULL);
        json_object_object_del(root, "consolidated_metadata");
        const char *text = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN);
        st = nds_kvstore_write(*out, "zarr.json", text, strlen(text), NULL, NULL);
        json_object_put(root);
    }
    json_object_object_foreach(s->entries, k, v) {
        if (st != 0)
            break;
        char key[4200];
        snprintf(key, sizeof key, "%s%s", k, s->v3 ? "/zarr.json" : "");
        const char *text = json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN);
        st = nds_kvstore_write(*out, key, text, strlen(text), NULL, NULL);
    }
    if (st == 0)
        st = nds_kvstore_list(*out, "", collect, l);
    if (st != 0)
        return cli_fail_nds(st, "consolidated metadata");
    return l->oom ? cli_fail("out of memory listing consolidated metadata") : CLI_OK;
}

/* Notes name the private store's URL mem; they should name the listed store's, url. */
static void unname_store(listing *l, const char *mem, const char *url) {
    size_t m = strlen(mem);
    for (size_t i = 0; i < l->n; i++) {
        char *note = l->v[i].note, *at = note ? strstr(note, mem) : NULL;
        if (!at)
            continue;
        size_t n = strlen(note) + strlen(url) + 1;
        char *out = malloc(n);
        if (!out)
            continue;
        snprintf(out, n, "%.*s%s%s", (int)(at - note), note, url, at + m);
        free(note);
        l->v[i].note = out;
    }
}

/* Lists kv from its consolidated metadata s. */
static int list_snapshot(nds_kvstore *kv, const snapshot *s, bool recursive) {
    listing l = {0};
    nds_kvstore *mem = NULL;
    l.from_snapshot = true;
    int rc = snapshot_store(s, &l, &mem);
    if (rc == CLI_OK) {
        if (l.n > 1)
            qsort(l.v, l.n, sizeof *l.v, by_key);
        annotate(mem, &l);
        unname_store(&l, nds_kvstore_url(mem), nds_kvstore_url(kv));
        if (!recursive)
            fold_dirs(&l);
        printf("consolidated metadata: %s%s\n", nds_kvstore_url(kv), s->key);
        print_listing(&l);
    }
    for (size_t i = 0; i < l.n; i++) {
        free(l.v[i].key);
        free(l.v[i].note);
        nds_free(l.v[i].meta);
    }
    free(l.v);
    if (mem) {
        nds_kvstore_delete_range(mem, "", "");
        nds_kvstore_free(mem);
    }
    return rc;
}

/* Remote stores, where a listing costs requests (and plain http cannot list at all). */
static bool is_remote(const char *url) {
    static const char *const schemes[] = {"http://", "https://", "s3://", "gs://"};
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++)
        if (strncmp(url, schemes[i], strlen(schemes[i])) == 0)
            return true;
    return false;
}

/* Whether the sorted listing holds the root's consolidated metadata key. */
static bool lists_snapshot_key(const listing *l) {
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].key, ".zmetadata") == 0 || strcmp(l->v[i].key, "zarr.json") == 0)
            return true;
    return false;
}

/* Lists kv's keys; arrays whose own metadata differs from the root's consolidated copy say so. */
static int list_keys(nds_kvstore *kv, const char *url, bool recursive) {
    listing l = {0};
    int st = nds_kvstore_list(kv, "", collect, &l);
    int rc = CLI_OK;
    if (l.oom)
        rc = cli_fail("out of memory listing %s", url);
    else if (st != 0)
        rc = cli_fail_nds(st, url);
    if (rc == CLI_OK) {
        if (l.n > 1) /* an empty listing has no array: qsort(NULL, ..) is undefined */
            qsort(l.v, l.n, sizeof *l.v, by_key);
        annotate(kv, &l);
        snapshot s = {0};
        int found = lists_snapshot_key(&l) ? snapshot_read(kv, &s) : SNAP_NONE;
        if (found == SNAP_FOUND)
            note_stale(&l, &s);
        json_object_put(s.doc);
        if (!recursive)
            fold_dirs(&l);
        print_listing(&l);
        if (found == CLI_FAIL)
            rc = CLI_FAIL; /* the listing stands; the malformed copy was named */
    }
    for (size_t i = 0; i < l.n; i++) {
        free(l.v[i].key);
        free(l.v[i].note);
        nds_free(l.v[i].meta);
    }
    free(l.v);
    return rc;
}

int cli_cmd_ls(int argc, char **argv) {
    bool recursive = true;
    int consolidated = -1; /* -1: by the URL (remote stores) */
    int c;
    cli_getopt_reset();
    while ((c = getopt_long(argc, argv, ":hRdcC", options, NULL)) != -1) {
        if (c == 'h')
            return cli_help(help);
        if (c == 'R' || c == 'd')
            recursive = c == 'R';
        else if (c == 'c' || c == 'C')
            consolidated = c == 'c';
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
    if (consolidated < 0)
        consolidated = is_remote(url);
    nds_kvstore *kv = NULL;
    nds_error_clear();
    int st = open_as_directory(url, &kv);
    if (st != 0)
        return cli_fail_nds(st, url);
    snapshot s = {0};
    int found = consolidated ? snapshot_read(kv, &s) : SNAP_NONE;
    int rc = found == CLI_FAIL  ? CLI_FAIL
             : found == SNAP_FOUND ? list_snapshot(kv, &s, recursive)
                                : list_keys(kv, url, recursive);
    json_object_put(s.doc);
    nds_kvstore_free(kv);
    return rc;
}
