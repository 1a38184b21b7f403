/* `ndstore group URL [PATH] [--parents] [--format F]`: creates a group (zarr v2: .zgroup) at PATH inside
 * the store at URL (default: the store's root), and with --parents at every ancestor of PATH up to the
 * store's root too (nds_group_create). An existing group is left as it is.
 * `ndstore group consolidate URL [PATH] [--format F]`: writes the consolidated metadata of the group
 * (nds_group_consolidate; the format is the group's own when not given: .zgroup is zarr, zarr.json
 * zarr3). A store path named "consolidate" is given as ./consolidate.
 */
#include <getopt.h>
#include <string.h>
#include "cli.h"

static const char usage[] = "ndstore group URL [PATH] [--parents] [--format F]\n"
                            "       ndstore group consolidate URL [PATH] [--format F]";

static const char help[] =
    "usage: ndstore group URL [PATH] [--parents] [--format F]\n"
    "       ndstore group consolidate URL [PATH] [--format F]\n"
    "\n"
    "Create a group at PATH inside the store at URL (file:///d/s.zarr/, a bare path, ...); without\n"
    "PATH, at the store's root. Existing groups are left as they are.\n"
    "\n"
    "consolidate: write the consolidated metadata of the group at PATH (every metadata document\n"
    "below it, read by listing the store): zarr writes .zmetadata (zarr-python's\n"
    "consolidate_metadata), zarr3 writes \"consolidated_metadata\" into the group's zarr.json\n"
    "(as zarr-python 3). Without --format, the group's own format (.zgroup: zarr, zarr.json: zarr3).\n"
    "The copy is a snapshot: run this again after changing metadata below the group.\n"
    "\n"
    "  -p, --parents    also create the groups at every ancestor of PATH, the store's root included\n"
    "  --format F       group format (default zarr; also taken from a trailing |F: on the URL)\n"
    "  -h, --help       show this help\n";

static const struct option options[] = {
    {"parents", no_argument, NULL, 'p'},
    {"format", required_argument, NULL, 'f'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* The group format at url/path: zarr3 when a zarr.json is there and no .zgroup, else zarr. */
static const char *detect_group_format(const char *url, const char *path) {
    nds_kvstore *kv = NULL, *g = NULL;
    char dir[4200];
    snprintf(dir, sizeof dir, "/%s%s", path, path[0] ? "/" : "");
    const char *format = "zarr";
    if (nds_kvstore_open(&kv, url, NULL) == 0 && nds_kvstore_sub(&g, kv, dir) == 0) {
        nds_read_result r = {0};
        bool v2 = nds_kvstore_read(g, ".zgroup", NULL, &r) == 0 && r.state == NDS_READ_VALUE;
        nds_read_result_dispose(&r);
        memset(&r, 0, sizeof r);
        if (!v2 && nds_kvstore_read(g, "zarr.json", NULL, &r) == 0 && r.state == NDS_READ_VALUE)
            format = "zarr3";
        nds_read_result_dispose(&r);
    }
    nds_kvstore_free(g);
    nds_kvstore_free(kv);
    nds_error_clear(); /* a failed probe: consolidating names the error */
    return format;
}

/* What both forms take: URL [PATH] [--format F] (and --parents unless consolidating). */
typedef struct group_args {
    bool parents;
    const char *format; /* --format, or the URL's trailing |F:, or NULL */
    const char *path;
    char url[4096];
    char url_format[64]; /* the URL's trailing |F: */
} group_args;

/* parse_group_args' result when the command goes on (any other value is its exit status: help
 * printed, or a usage error). */
#define GROUP_ARGS_PARSED (-1)

/* Parses argv into *g. */
static int parse_group_args(int argc, char **argv, bool consolidating, group_args *g) {
    int c;
    g->parents = false;
    g->format = NULL;
    cli_getopt_reset();
    while ((c = getopt_long(argc, argv, consolidating ? ":hf:" : ":hpf:",
                            consolidating ? options + 1 : options, NULL)) != -1) {
        if (c == 'h')
            return cli_help(help);
        if (c == 'p')
            g->parents = true;
        else if (c == 'f')
            g->format = optarg;
        else
            return cli_bad_option(usage, argv, c);
    }
    if (argc - optind < 1 || argc - optind > 2)
        return cli_usage(usage, argc - optind == 0 ? "missing URL" : "too many arguments");
    if (cli_require_spec("URL", argv[optind]) != CLI_OK)
        return CLI_FAIL;
    g->path = argc - optind == 2 ? argv[optind + 1] : "";
    if (cli_kvstore_url(argv[optind], g->url, sizeof g->url, g->url_format,
                        sizeof g->url_format) != CLI_OK)
        return CLI_FAIL;
    if (!g->format && g->url_format[0])
        g->format = g->url_format;
    return GROUP_ARGS_PARSED;
}

static int consolidate(int argc, char **argv) {
    group_args g;
    int status = parse_group_args(argc, argv, true, &g);
    if (status != GROUP_ARGS_PARSED)
        return status;
    const char *format = g.format ? g.format : detect_group_format(g.url, g.path);
    size_t count = 0;
    nds_error_clear();
    int st = nds_group_consolidate(g.url, g.path, format, &count, NULL);
    if (st != 0)
        return cli_fail_nds(st, g.url);
    nds_redact_secrets(g.url, sizeof g.url);
    printf("consolidated %zu metadata document%s of group %s%s%s (%s: %s)\n", count,
           count == 1 ? "" : "s", g.url, g.path[0] ? " " : "", g.path, format,
           strcmp(format, "zarr3") == 0 ? "inline in zarr.json" : ".zmetadata");
    return CLI_OK;
}

int cli_cmd_group(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "consolidate") == 0)
        return consolidate(argc - 1, argv + 1);
    group_args g;
    int status = parse_group_args(argc, argv, false, &g);
    if (status != GROUP_ARGS_PARSED)
        return status;
    const char *format = g.format ? g.format : "zarr";
    char *url = g.url;
    const char *path = g.path;
    nds_error_clear();
    int st = nds_group_create(url, path, format, g.parents, NULL);
    if (st != 0)
        return cli_fail_nds(st, url);
    nds_redact_secrets(url, sizeof g.url);
    printf("group %s%s%s (%s)\n", url, path[0] ? " " : "", path, format);
    return CLI_OK;
}
