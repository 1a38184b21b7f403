/* `ndstore resize SPEC --shape N,..`: changes an array's shape (same rank). Chunks wholly outside the new
 * shape are deleted and kept edge chunks are reset to fill beyond it (nds_array_resize).
 * Omits: changing the rank or the chunk shape (copy with `ndstore cp` for that).
 */
#include <getopt.h>
#include "cli.h"

static const char usage[] = "ndstore resize SPEC --shape N,..";

static const char help[] =
    "usage: ndstore resize SPEC --shape N,..\n"
    "\n"
    "Change an array's shape; the rank stays. Data outside the new shape is deleted, so growing again\n"
    "shows the fill value there.\n"
    "\n"
    "  --shape N,..   the new shape, e.g. 2000,1000\n"
    "  -h, --help     show this help\n";

static const struct option options[] = {
    {"shape", required_argument, NULL, 's'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static int do_resize(const char *spec, size_t rank, const uint64_t *shape) {
    nds_array *a = NULL;
    int rc = cli_open_array(spec, NULL, 0, &a);
    if (rc != CLI_OK)
        return rc;
    char old_s[NDS_MAX_RANK * 24], new_s[NDS_MAX_RANK * 24];
    uint64_t old[NDS_MAX_RANK];
    nds_array_shape(a, old);
    cli_format_list(old_s, sizeof old_s, nds_array_rank(a), old);
    cli_format_list(new_s, sizeof new_s, rank, shape);
    if (rank != nds_array_rank(a)) {
        rc = cli_fail("--shape %s has rank %zu, the array %s has rank %zu", new_s, rank, old_s,
                      nds_array_rank(a));
    } else {
        nds_error_clear();
        int st = nds_array_resize(a, shape);
        if (st != 0)
            rc = cli_fail_nds(st, "resize");
        else
            printf("resized %s from %s to %s\n", nds_kvstore_url(nds_array_kvstore(a)), old_s, new_s);
    }
    nds_array_free(a);
    return rc;
}

int cli_cmd_resize(int argc, char **argv) {
    uint64_t shape[NDS_MAX_RANK];
    size_t rank = 0;
    char err[256];
    int c;
    cli_getopt_reset();
    while ((c = getopt_long(argc, argv, ":hs:", options, NULL)) != -1) {
        if (c == 'h')
            return cli_help(help);
        if (c != 's')
            return cli_bad_option(usage, argv, c);
        if (cli_parse_u64_list(optarg, shape, NDS_MAX_RANK, &rank, err, sizeof err) != 0)
            return cli_usage(usage, "--shape: %s", err);
    }
    if (argc - optind != 1)
        return cli_usage(usage, argc - optind == 0 ? "missing SPEC" : "too many arguments");
    if (rank == 0)
        return cli_usage(usage, "missing --shape");
    if (cli_require_spec("SPEC", argv[optind]) != CLI_OK)
        return CLI_FAIL;
    return do_resize(argv[optind], rank, shape);
}
