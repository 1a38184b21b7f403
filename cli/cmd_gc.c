/* `ndstore gc URL (--keep-last N | --older-than DURATION) [--grace DURATION] [--dry-run]
 * [--full-scan]`: deletes what no kept version of a versioned store references (nds_versioned_gc),
 * and says what the run read: the commits since the last run, or the whole history and why.
 */
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage[] = "ndstore gc URL (--keep-last N | --older-than DURATION) "
                            "[--grace DURATION] [--dry-run] [--full-scan]";
static const char help[] =
    "usage: ndstore gc URL (--keep-last N | --older-than DURATION) [--grace DURATION] [--dry-run]\n"
    "                      [--full-scan]\n"
    "\n"
    "Delete what no kept version of the versioned store at URL references. The latest version and\n"
    "tagged versions are always kept; versions not kept stay in `ndstore log` but can no longer be\n"
    "read. Objects of writers that never committed are deleted by a run at least the grace period\n"
    "after a run that first saw them. A run reads only the commits made since the previous run (its\n"
    "state is kept under gc/state/ in the store) and lists only the objects made since; the first\n"
    "run, or one that finds no readable state, reads the whole history.\n"
    "\n"
    "  --keep-last N          keep the newest N versions\n"
    "  --older-than D         keep the versions committed less than D ago (30s, 10m, 6h, 7d)\n"
    "  --grace D              never delete what became garbage less than D ago (default 6h)\n"
    "  --dry-run              count, delete nothing\n"
    "  --full-scan            read the whole history and list every object (finds objects of\n"
    "                         writers whose clocks lag by more than an hour)\n"
    "  -h, --help             show this help\n";

/* "30s", "10m", "6h", "7d", or "250ms" into milliseconds. */
static int parse_duration(const char *text, int64_t *ms) {
    char *end;
    long long v = strtoll(text, &end, 10);
    if (end == text || v < 0) return -1;
    static const struct {
        const char *unit;
        int64_t ms;
    } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000}};
    for (size_t i = 0; i < sizeof units / sizeof *units; i++)
        if (strcmp(end, units[i].unit) == 0) {
            if (v > INT64_MAX / units[i].ms) return -1;
            *ms = (int64_t)v * units[i].ms;
            return 0;
        }
    return -1;
}

enum { OPT_KEEP = 256, OPT_OLDER, OPT_GRACE, OPT_DRY, OPT_FULL };

static int parse(int argc, char **argv, nds_gc_options *o) {
    static const struct option options[] = {{"keep-last", required_argument, NULL, OPT_KEEP},
                                            {"older-than", required_argument, NULL, OPT_OLDER},
                                            {"grace", required_argument, NULL, OPT_GRACE},
                                            {"dry-run", no_argument, NULL, OPT_DRY},
                                            {"full-scan", no_argument, NULL, OPT_FULL},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    int c;
    long n;
    cli_getopt_reset();
    while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        if (c == 'h') return -1;
        if (c == OPT_KEEP) {
            if (cli_parse_long(optarg, 1, LONG_MAX, &n) != 0)
                return cli_usage(usage, "--keep-last: expected a count >= 1, got '%s'", optarg);
            o->keep_last = (uint64_t)n;
        } else if (c == OPT_OLDER || c == OPT_GRACE) {
            int64_t *dst = c == OPT_OLDER ? &o->older_than_ms : &o->grace_ms;
            if (parse_duration(optarg, dst) != 0)
                return cli_usage(usage, "%s: expected a duration such as 30s, 10m, 6h or 7d, got '%s'",
                                 c == OPT_OLDER ? "--older-than" : "--grace", optarg);
        } else if (c == OPT_DRY) o->dry_run = 1;
        else if (c == OPT_FULL) o->full_scan = 1;
        else return cli_bad_option(usage, argv, c);
    }
    if (argc - optind != 1)
        return cli_usage(usage, argc - optind == 0 ? "missing URL" : "too many arguments");
    if (o->keep_last == 0 && o->older_than_ms < 0)
        return cli_usage(usage, "say what to keep: --keep-last N or --older-than DURATION");
    return CLI_OK;
}

int cli_cmd_gc(int argc, char **argv) {
    nds_gc_options o = NDS_GC_OPTIONS_INIT;
    int rc = parse(argc, argv, &o);
    if (rc != CLI_OK) return rc == -1 ? cli_help(help) : rc;
    const char *url = argv[optind];
    if (cli_require_spec("URL", url) != CLI_OK) return CLI_FAIL;
    char spec[4096];
    int len = snprintf(spec, sizeof spec, "%s%s", url, strstr(url, "|versioned:") ? "" : "|versioned:");
    if (len < 0 || (size_t)len >= sizeof spec) return cli_fail("URL too long");
    nds_kvstore *kv;
    nds_error_clear();
    int st = nds_kvstore_open(&kv, spec, NULL);
    if (st) return cli_fail_nds(st, spec);
    nds_gc_result r;
    st = nds_versioned_gc(kv, &o, &r);
    int status = st ? cli_fail_nds(st, "gc") : CLI_OK;
    if (!st) {
        printf("%s%" PRIu64 " objects (%" PRIu64 " bytes); kept %" PRIu64 " versions, %" PRIu64
               " no longer readable; %" PRIu64 " unreferenced objects wait for the grace period\n",
               o.dry_run ? "would delete " : "deleted ", r.objects_deleted, r.bytes_deleted,
               r.versions_kept, r.versions_collected, r.objects_pending);
        if (r.full_scan)
            printf("read the whole history: %" PRIu64 " commits, %" PRIu64
                   " objects listed (%s)\n",
                   r.commits_read, r.keys_listed, r.note);
        else
            printf("read %" PRIu64 " commits made since the last gc run, %" PRIu64
                   " objects listed%s%s\n",
                   r.commits_read, r.keys_listed, r.note[0] ? "; " : "", r.note);
    }
    nds_kvstore_free(kv);
    return status;
}
