/* `ndstore checkpoint mark|status URL NAME [ARRAY...]`: checkpoint commit markers (nds_checkpoint_mark /
 * nds_checkpoint_status). Writers write their arrays under URL; when all are done, one runs `mark`, last.
 * Readers run `status`: exit 0 when the marker is there (complete), 1 when it is not (partial).
 */
#include <getopt.h>
#include <string.h>
#include "cli.h"

static const char usage[] = "ndstore checkpoint mark URL NAME [ARRAY...] | ndstore checkpoint status URL NAME";

static const char help[] =
    "usage: ndstore checkpoint mark URL NAME [ARRAY...]\n"
    "       ndstore checkpoint status URL NAME [--json]\n"
    "\n"
    "Checkpoint commit markers. Every writer writes its arrays under the store URL; when all have\n"
    "finished, one runs `mark`, which checks that each ARRAY (a path under URL) opens and then writes the\n"
    "marker NAME.checkpoint.json create-only (a checkpoint is marked once: marking again fails). A reader\n"
    "runs `status`: exit 0 and \"complete\" when the marker exists, exit 1 and \"incomplete\" when not.\n"
    "\n"
    "  --json       status: print the marker itself\n"
    "  -h, --help   show this help\n"
    "\n"
    "Example: ndstore checkpoint mark file:///ckpt/step-100/ step-100 layer1/w layer1/b\n";

static const struct option options[] = {
    {"json", no_argument, NULL, 'J'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static int mark(const char *url, const char *name, char **arrays, int n) {
    int st = nds_checkpoint_mark(url, name, (const char *const *)arrays, (size_t)n, NULL);
    if (st != 0)
        return cli_fail_nds(st, "checkpoint mark");
    printf("checkpoint %s marked complete with %d array%s\n", name, n, n == 1 ? "" : "s");
    return CLI_OK;
}

static int status(const char *url, const char *name, bool as_json) {
    int complete = 0;
    char *marker = NULL;
    int st = nds_checkpoint_status(url, name, &complete, &marker, NULL);
    if (st != 0)
        return cli_fail_nds(st, "checkpoint status");
    if (complete && as_json)
        printf("%s\n", marker);
    else
        printf("checkpoint %s: %s\n", name, complete ? "complete" : "incomplete (no marker)");
    nds_free(marker);
    return complete ? CLI_OK : CLI_FAIL;
}

int cli_cmd_checkpoint(int argc, char **argv) {
    bool as_json = false;
    int c;
    cli_getopt_reset();
    while ((c = getopt_long(argc, argv, ":hJ", options, NULL)) != -1) {
        if (c == 'h')
            return cli_help(help);
        if (c == 'J')
            as_json = true;
        else
            return cli_bad_option(usage, argv, c);
    }
    int left = argc - optind;
    if (left < 3)
        return cli_usage(usage, "expected mark|status, URL and NAME");
    const char *action = argv[optind], *name = argv[optind + 2];
    if (cli_require_spec("URL", argv[optind + 1]) != CLI_OK)
        return CLI_FAIL;
    char url[4096];
    if (cli_kvstore_url(argv[optind + 1], url, sizeof url, NULL, 0) != CLI_OK)
        return CLI_FAIL;
    if (strcmp(action, "mark") == 0)
        return mark(url, name, argv + optind + 3, left - 3);
    if (strcmp(action, "status") == 0)
        return left == 3 ? status(url, name, as_json) : cli_usage(usage, "status takes only URL and NAME");
    return cli_usage(usage, "unknown action '%s' (mark or status)", action);
}
