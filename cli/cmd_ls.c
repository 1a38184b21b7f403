/* `ndstore ls URL [--recursive | --no-recursive]`: the keys under a kvstore prefix with their sizes,
 * sorted, then a total line. Recursive by default; --no-recursive folds keys below the first '/' into
 * one "dir/" entry with their total size. A trailing "|format:" on the URL is ignored, so an array URL
 * lists the array's keys, and a URL is taken as a directory (a '/' is appended when missing).
 * Omits: glob patterns, human-readable sizes.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"

static const char usage[] = "ndstore ls URL [--recursive | --no-recursive]";

static const char help[] =
    "usage: ndstore ls URL [--recursive | --no-recursive]\n"
    "\n"
    "List the keys under a kvstore URL (file:///d/a.zarr/, memory://x/, a bare path, or a JSON kvstore\n"
    "spec) with their sizes in bytes, sorted, then a total line.\n"
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
    uint64_t size; /* UINT64_MAX = unknown */
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
    l->v[l->n++] = (entry){k, size};
    return 0;
}

static int by_key(const void *a, const void *b) {
    return strcmp(((const entry *)a)->key, ((const entry *)b)->key);
}

/* Folds sorted keys "d/x", "d/y" into one entry "d/" (in place). */
static void fold_dirs(listing *l) {
    size_t out = 0;
    for (size_t i = 0; i < l->n; i++) {
        char *slash = strchr(l->v[i].key, '/');
        if (slash)
            slash[1] = '\0';
        if (out > 0 && slash && strcmp(l->v[out - 1].key, l->v[i].key) == 0) {
            entry *prev = &l->v[out - 1];
            prev->size = prev->size == UINT64_MAX || l->v[i].size == UINT64_MAX ? UINT64_MAX
                                                                                 : prev->size + l->v[i].size;
            free(l->v[i].key);
            continue;
        }
        l->v[out++] = l->v[i];
    }
    l->n = out;
}

static void print_listing(const listing *l) {
    uint64_t total = 0, unknown = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (l->v[i].size == UINT64_MAX) {
            unknown++;
            printf("%12s  %s\n", "?", l->v[i].key);
        } else {
            total += l->v[i].size;
            printf("%12" PRIu64 "  %s\n", l->v[i].size, l->v[i].key);
        }
    }
    printf("%zu %s, %" PRIu64 " bytes", l->n, l->n == 1 ? "entry" : "entries", total);
    if (unknown)
        printf(" (%" PRIu64 " of unknown size)", unknown);
    printf("\n");
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
    char url[4096];
    cli_kvstore_url(argv[optind], url, sizeof url);
    /* A URL names a directory-like prefix: "d/a.zarr" lists d/a.zarr/..., not d/a.zarr.bak too. */
    size_t len = strlen(url);
    if (url[0] != '{' && len > 0 && url[len - 1] != '/' && len + 1 < sizeof url)
        memcpy(url + len, "/", 2);
    nds_kvstore *kv = NULL;
    nds_error_clear();
    int st = nds_kvstore_open(&kv, url, NULL);
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
        qsort(l.v, l.n, sizeof *l.v, by_key);
        if (!recursive)
            fold_dirs(&l);
        print_listing(&l);
    }
    for (size_t i = 0; i < l.n; i++)
        free(l.v[i].key);
    free(l.v);
    nds_kvstore_free(kv);
    return rc;
}
