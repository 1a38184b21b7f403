/* `ndstore verify SPEC`: decodes every stored chunk (nds_array_verify) and prints each bad one as
 * "bad: <key>: <message>" on stdout, then a summary line. Exit 1 (with one stderr line) when any chunk is
 * bad or the check could not run.
 * Omits: repairing or deleting bad chunks.
 */
#include <getopt.h>
#include <inttypes.h>
#include "cli.h"

static const char usage[] = "ndstore verify SPEC";

static const char help[] =
    "usage: ndstore verify SPEC\n"
    "\n"
    "Decode every stored chunk of an array. Each chunk that fails is printed as\n"
    "`bad: <key>: <message>`, then a summary line. Exit status 1 when any chunk is bad.\n"
    "\n"
    "  -h, --help   show this help\n";

static const struct option options[] = {
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static int report_bad(void *ctx, const char *key, int status, const char *message) {
    (void)ctx;
    printf("bad: %s: %s\n", key, message && message[0] ? message : nds_strerror(status));
    fflush(stdout);
    return 0;
}

int cli_cmd_verify(int argc, char **argv) {
    int c;
    cli_getopt_reset();
    while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        if (c == 'h')
            return cli_help(help);
        return cli_bad_option(usage, argv, c);
    }
    if (argc - optind != 1)
        return cli_usage(usage, argc - optind == 0 ? "missing SPEC" : "too many arguments");
    if (cli_require_spec("SPEC", argv[optind]) != CLI_OK)
        return CLI_FAIL;
    nds_array *a = NULL;
    int rc = cli_open_array(argv[optind], NULL, 0, &a);
    if (rc != CLI_OK)
        return rc;
    uint64_t checked = 0, bad = 0;
    nds_error_clear();
    int st = nds_array_verify(a, report_bad, NULL, &checked, &bad);
    if (st != 0) {
        rc = cli_fail_nds(st, "verify");
    } else {
        printf("checked %" PRIu64 " stored chunks of %s: %" PRIu64 " bad\n", checked,
               nds_kvstore_url(nds_array_kvstore(a)), bad);
        if (bad)
            rc = cli_fail("%" PRIu64 " of %" PRIu64 " chunks are bad", bad, checked);
    }
    nds_array_free(a);
    return rc;
}
