/* `ndstore verify SPEC [--scale S]`: decodes every stored chunk (nds_array_verify; inside hashed
 * shards, every chunk their indexes list) and prints each bad one as "bad: <key>: <message>" on
 * stdout, then a summary line counting chunks, or shards when the storage chunks are shards of
 * inner chunks. Exit 1 (with one stderr line) when any is bad or the check could not run.
 * Omits: repairing or deleting bad chunks.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"

static const char usage[] = "ndstore verify SPEC [--scale S]";

static const char help[] =
    "usage: ndstore verify SPEC [--scale S]\n"
    "\n"
    "Decode every stored chunk of an array. Each chunk that fails is printed as\n"
    "`bad: <key>: <message>`, then a summary line. Exit status 1 when any chunk is bad.\n"
    "Sharded volumes are checked inside their shards (shard and minishard indexes, every chunk).\n"
    "\n"
    CLI_SCALE_HELP
    "  -h, --help              show this help\n";

static const struct option options[] = {
    CLI_SCALE_OPTION,
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* "shards" when a's storage chunks are shards of a grid of inner chunks (zarr v3 sharding,
 * precomputed shards that are grid boxes): verify then checks shards, each with every inner chunk,
 * and counts them, as info's "stored: N of M shards" does. Hashed shards are listed chunk by chunk
 * (their storage chunk is the chunk itself): "chunks". */
static const char *unit_of(nds_array *a) {
    uint64_t chunks[NDS_MAX_RANK], inner[NDS_MAX_RANK];
    nds_array_chunk_shape(a, chunks);
    nds_array_read_chunk_shape(a, inner);
    return memcmp(chunks, inner, nds_array_rank(a) * sizeof chunks[0]) != 0 ? "shards" : "chunks";
}

static int report_bad(void *ctx, const char *key, int status, const char *message) {
    (void)ctx;
    printf("bad: %s: %s\n", key, message && message[0] ? message : nds_strerror(status));
    fflush(stdout);
    return 0;
}

int cli_cmd_verify(int argc, char **argv) {
    int c;
    const char *scale = NULL;
    cli_getopt_reset();
    while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        if (c == 'h')
            return cli_help(help);
        if (c != CLI_OPT_SCALE)
            return cli_bad_option(usage, argv, c);
        scale = optarg;
    }
    if (argc - optind != 1)
        return cli_usage(usage, argc - optind == 0 ? "missing SPEC" : "too many arguments");
    if (cli_require_spec("SPEC", argv[optind]) != CLI_OK)
        return CLI_FAIL;
    nds_array *a = NULL;
    char *scaled = NULL;
    int rc = cli_scale_spec(argv[optind], scale, &scaled);
    if (rc == CLI_OK)
        rc = cli_open_array(scaled ? scaled : argv[optind], NULL, 0, &a);
    free(scaled);
    if (rc != CLI_OK)
        return rc;
    uint64_t checked = 0, bad = 0;
    nds_error_clear();
    int st = nds_array_verify(a, report_bad, NULL, &checked, &bad);
    if (st != 0) {
        rc = cli_fail_nds(st, "verify");
    } else {
        const char *unit = unit_of(a);
        printf("checked %" PRIu64 " stored %s of %s: %" PRIu64 " bad\n", checked, unit,
               nds_kvstore_url(nds_array_kvstore(a)), bad);
        if (bad)
            rc = cli_fail("%" PRIu64 " of %" PRIu64 " %s are bad", bad, checked, unit);
    }
    nds_array_free(a);
    return rc;
}
