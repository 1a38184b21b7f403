/* `ndstore commit URL TOKEN... [-m MESSAGE] [--metadata JSON]`: publishes the parts that processes
 * prepared (`ndstore write --prepare`, nds_txn_prepare) as one version of the versioned store at URL
 * (nds_txn_commit_prepared): readers see every part or none.
 */
#include <getopt.h>
#include <inttypes.h>
#include <string.h>

#include "cli.h"

static const char usage[] = "ndstore commit URL TOKEN... [-m MESSAGE] [--metadata JSON]";
static const char help[] =
    "usage: ndstore commit URL TOKEN... [-m MESSAGE] [--metadata JSON]\n"
    "\n"
    "Publish the parts prepared by `ndstore write ... --prepare` (one TOKEN each, from any processes)\n"
    "as one version of the versioned store at URL (file:///ckpt/|versioned:, or file:///ckpt/).\n"
    "Readers see all of the parts or none. Chunks that several parts wrote in part are merged element\n"
    "by element; arrays several parts created identically are created once.\n"
    "\n"
    "  -m, --message TEXT   the version's message (ndstore log shows it)\n"
    "      --metadata JSON  a JSON object recorded with the version\n"
    "  -h, --help           show this help\n";

int cli_cmd_commit(int argc, char **argv) {
    static const struct option options[] = {{"message", required_argument, NULL, 'm'},
                                            {"metadata", required_argument, NULL, 'M'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    const char *message = NULL, *metadata = NULL;
    int c;
    cli_getopt_reset();
    while ((c = getopt_long(argc, argv, ":hm:", options, NULL)) != -1) {
        if (c == 'h') return cli_help(help);
        if (c == 'm') message = optarg;
        else if (c == 'M') metadata = optarg;
        else return cli_bad_option(usage, argv, c);
    }
    if (argc - optind < 2)
        return cli_usage(usage, argc - optind == 0 ? "missing URL" : "missing TOKEN");
    if (cli_require_spec("URL", argv[optind]) != CLI_OK) return CLI_FAIL;
    char spec[4096];
    const char *url = argv[optind];
    int n = snprintf(spec, sizeof spec, "%s%s", url, strstr(url, "|versioned:") ? "" : "|versioned:");
    if (n < 0 || (size_t)n >= sizeof spec) return cli_fail("URL too long");
    nds_kvstore *kv;
    nds_error_clear();
    int rc = nds_kvstore_open(&kv, spec, NULL);
    if (rc) return cli_fail_nds(rc, spec);
    size_t ntokens = (size_t)(argc - optind - 1);
    rc = nds_txn_commit_prepared(kv, (const char *const *)(argv + optind + 1), ntokens, message,
                                 metadata);
    uint64_t version = 0;
    if (!rc) rc = nds_versioned_current(kv, &version);
    int status = rc ? cli_fail_nds(rc, "commit") : CLI_OK;
    if (!rc)
        printf("committed %zu part%s as version %" PRIu64 "\n", ntokens, ntokens == 1 ? "" : "s",
               version);
    nds_kvstore_free(kv);
    return status;
}
