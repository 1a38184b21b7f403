/* `ndstore log URL [-n COUNT] [--json]` and `ndstore tag URL NAME [VERSION]`: the history of a
 * versioned store (include/ndstore/versioned.h). URL names the store, with or without its
 * "|versioned:" segment ("file:///ckpt/" means "file:///ckpt/|versioned:").
 */
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static const char log_usage[] = "ndstore log URL [-n COUNT] [--json]";
static const char log_help[] =
    "usage: ndstore log URL [-n COUNT] [--json]\n"
    "\n"
    "Print the versions of the versioned store at URL (file:///ckpt/|versioned:, or file:///ckpt/),\n"
    "newest first: number, time (UTC), keys, message and metadata.\n"
    "\n"
    "  -n, --max-count N   print at most N versions\n"
    "  --json              one JSON object per line\n"
    "  -h, --help          show this help\n";

static const char tag_usage[] = "ndstore tag URL NAME [VERSION]";
static const char tag_help[] =
    "usage: ndstore tag URL NAME [VERSION]\n"
    "\n"
    "Name VERSION (default: the latest) of the versioned store at URL. Tags never move: naming a\n"
    "second version with an existing tag fails. Open a tagged version read-only with\n"
    "URL|versioned:@NAME/.\n"
    "\n"
    "  -h, --help   show this help\n";

/* Opens url as a versioned store, adding "|versioned:" when it has no such segment. */
static int open_versioned(const char *url, nds_kvstore **out) {
    char spec[4096];
    bool has = strstr(url, "|versioned:") != NULL;
    int n = snprintf(spec, sizeof spec, "%s%s", url, has ? "" : "|versioned:");
    if (n < 0 || (size_t)n >= sizeof spec) return cli_fail("URL too long");
    nds_error_clear();
    int rc = nds_kvstore_open(out, spec, NULL);
    return rc ? cli_fail_nds(rc, spec) : CLI_OK;
}

static void format_time(int64_t ns, char *buf, size_t cap) {
    time_t secs = (time_t)(ns / 1000000000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

typedef struct log_call {
    long left;
    bool json;
} log_call;

static int print_version(void *ctx, const nds_version_info *v) {
    log_call *c = ctx;
    if (c->left-- == 0) return 1;
    char when[32];
    format_time(v->time_ns, when, sizeof when);
    if (c->json) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "version", json_object_new_int64((int64_t)v->version));
        json_object_object_add(o, "time", json_object_new_string(when));
        json_object_object_add(o, "time_ns", json_object_new_int64(v->time_ns));
        json_object_object_add(o, "keys", json_object_new_int64((int64_t)v->keys));
        if (v->message) json_object_object_add(o, "message", json_object_new_string(v->message));
        if (v->metadata)
            json_object_object_add(o, "metadata", json_tokener_parse(v->metadata));
        printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        json_object_put(o);
        return 0;
    }
    printf("version %" PRIu64 "  %s  %" PRIu64 " keys%s%s%s%s\n", v->version, when, v->keys,
           v->message ? "  " : "", v->message ? v->message : "", v->metadata ? "  " : "",
           v->metadata ? v->metadata : "");
    return 0;
}

int cli_cmd_log(int argc, char **argv) {
    static const struct option options[] = {{"max-count", required_argument, NULL, 'n'},
                                            {"json", no_argument, NULL, 'j'},
                                            {"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    log_call call = {-1, false};
    int c;
    cli_getopt_reset();
    while ((c = getopt_long(argc, argv, ":hn:", options, NULL)) != -1) {
        if (c == 'h') return cli_help(log_help);
        if (c == 'j') call.json = true;
        else if (c == 'n') {
            if (cli_parse_long(optarg, 0, LONG_MAX, &call.left) != CLI_OK)
                return cli_usage(log_usage, "-n: expected a count, got \"%s\"", optarg);
        } else return cli_bad_option(log_usage, argv, c);
    }
    if (argc - optind != 1)
        return cli_usage(log_usage, argc - optind == 0 ? "missing URL" : "too many arguments");
    if (cli_require_spec("URL", argv[optind]) != CLI_OK) return CLI_FAIL;
    nds_kvstore *kv;
    if (open_versioned(argv[optind], &kv) != CLI_OK) return CLI_FAIL;
    int rc = nds_versioned_log(kv, 0, print_version, &call);
    int status = rc < 0 ? cli_fail_nds(rc, nds_kvstore_url(kv)) : CLI_OK;
    nds_kvstore_free(kv);
    return status;
}

int cli_cmd_tag(int argc, char **argv) {
    static const struct option options[] = {{"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    int c;
    cli_getopt_reset();
    while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        if (c == 'h') return cli_help(tag_help);
        return cli_bad_option(tag_usage, argv, c);
    }
    int args = argc - optind;
    if (args < 2 || args > 3)
        return cli_usage(tag_usage, args < 2 ? "missing URL or NAME" : "too many arguments");
    uint64_t version = 0;
    if (args == 3) {
        long v;
        if (cli_parse_long(argv[optind + 2], 1, LONG_MAX, &v) != CLI_OK)
            return cli_usage(tag_usage, "VERSION: expected a version number >= 1, got \"%s\"",
                             argv[optind + 2]);
        version = (uint64_t)v;
    }
    if (cli_require_spec("URL", argv[optind]) != CLI_OK) return CLI_FAIL;
    nds_kvstore *kv;
    if (open_versioned(argv[optind], &kv) != CLI_OK) return CLI_FAIL;
    const char *name = argv[optind + 1];
    int rc = nds_versioned_tag(kv, name, version);
    if (!rc && version == 0) rc = nds_versioned_current(kv, &version);
    int status = rc ? cli_fail_nds(rc, nds_kvstore_url(kv)) : CLI_OK;
    if (!rc) printf("tag %s -> version %" PRIu64 "\n", name, version);
    nds_kvstore_free(kv);
    return status;
}
