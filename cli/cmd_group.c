/* `ndstore group URL [PATH] [--parents] [--format F]`: creates a group (zarr v2: .zgroup) at PATH inside
 * the store at URL (default: the store's root), and with --parents at every ancestor of PATH up to the
 * store's root too (nds_group_create). An existing group is left as it is.
 */
#include <getopt.h>
#include <string.h>
#include "cli.h"

static const char usage[] = "ndstore group URL [PATH] [--parents] [--format F]";

static const char help[] =
    "usage: ndstore group URL [PATH] [--parents] [--format F]\n"
    "\n"
    "Create a group at PATH inside the store at URL (file:///d/s.zarr/, a bare path, ...); without\n"
    "PATH, at the store's root. Existing groups are left as they are.\n"
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

int cli_cmd_group(int argc, char **argv) {
    bool parents = false;
    const char *format = NULL;
    int c;
    cli_getopt_reset();
    while ((c = getopt_long(argc, argv, ":hpf:", options, NULL)) != -1) {
        if (c == 'h')
            return cli_help(help);
        if (c == 'p')
            parents = true;
        else if (c == 'f')
            format = optarg;
        else
            return cli_bad_option(usage, argv, c);
    }
    if (argc - optind < 1 || argc - optind > 2)
        return cli_usage(usage, argc - optind == 0 ? "missing URL" : "too many arguments");
    if (cli_require_spec("URL", argv[optind]) != CLI_OK)
        return CLI_FAIL;
    const char *path = argc - optind == 2 ? argv[optind + 1] : "";
    char url[4096], fmt[64];
    if (cli_kvstore_url(argv[optind], url, sizeof url, fmt, sizeof fmt) != CLI_OK)
        return CLI_FAIL;
    if (!format)
        format = fmt[0] ? fmt : "zarr";
    nds_error_clear();
    int st = nds_group_create(url, path, format, parents, NULL);
    if (st != 0)
        return cli_fail_nds(st, url);
    nds_redact_secrets(url, sizeof url);
    printf("group %s%s%s (%s)\n", url, path[0] ? " " : "", path, format);
    return CLI_OK;
}
