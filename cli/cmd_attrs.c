/* `ndstore attrs SPEC [--set JSON]`: prints an array's user attributes as JSON, or replaces them with a
 * JSON object (text or @file.json).
 * Omits: merging into existing attributes (print, edit, --set).
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"

static const char usage[] = "ndstore attrs SPEC [--set JSON|@file.json] [--scale S]";

static const char help[] =
    "usage: ndstore attrs SPEC [--set JSON|@file.json] [--scale S]\n"
    "\n"
    "Print an array's user attributes (a JSON object), or replace them.\n"
    "\n"
    "      --set JSON          the new attributes: a JSON object, or @file.json\n"
    CLI_SCALE_HELP
    "  -h, --help              show this help\n";

static const struct option options[] = {
    {"set", required_argument, NULL, 's'},
    CLI_SCALE_OPTION,
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* The new attributes: the JSON object text as given (malloc'd), checked to parse as an object.
 * The text itself goes to the library, which keeps integers beyond 64 bits that a json-c
 * round trip here would clamp. */
static int load_attrs(const char *arg, char **out) {
    char *file_text = NULL;
    if (arg[0] == '@' && cli_read_file(arg + 1, (size_t)16 << 20, &file_text, NULL) != CLI_OK)
        return CLI_FAIL;
    json_object *obj = NULL;
    int rc = cli_json_parse(file_text ? file_text : arg, "--set", &obj);
    if (rc == CLI_OK && !json_object_is_type(obj, json_type_object))
        rc = cli_fail("--set: attributes must be a JSON object");
    json_object_put(obj);
    *out = rc == CLI_OK ? strdup(file_text ? file_text : arg) : NULL;
    free(file_text);
    if (rc != CLI_OK)
        return rc;
    return *out ? CLI_OK : cli_fail("out of memory");
}

static int print_attrs(nds_array *a) {
    char *text = NULL;
    nds_error_clear();
    int st = nds_array_get_attributes(a, &text);
    if (st != 0)
        return cli_fail_nds(st, "attributes");
    json_object *obj = cli_json_parse_exact(text);
    if (obj && json_object_is_type(obj, json_type_object) && json_object_object_length(obj) == 0)
        printf("{}\n");
    else
        printf("%s\n", obj ? json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PRETTY |
                                                                 JSON_C_TO_STRING_SPACED |
                                                                 JSON_C_TO_STRING_NOSLASHESCAPE)
                       : text);
    json_object_put(obj);
    nds_free(text);
    return CLI_OK;
}

int cli_cmd_attrs(int argc, char **argv) {
    const char *set = NULL, *scale = NULL;
    int c;
    cli_getopt_reset();
    while ((c = getopt_long(argc, argv, ":hs:", options, NULL)) != -1) {
        if (c == 'h')
            return cli_help(help);
        if (c == CLI_OPT_SCALE)
            scale = optarg;
        else if (c == 's')
            set = optarg;
        else
            return cli_bad_option(usage, argv, c);
    }
    if (argc - optind != 1)
        return cli_usage(usage, argc - optind == 0 ? "missing SPEC" : "too many arguments");
    if (cli_require_spec("SPEC", argv[optind]) != CLI_OK)
        return CLI_FAIL;
    char *attrs = NULL;
    if (set && load_attrs(set, &attrs) != CLI_OK)
        return CLI_FAIL;
    nds_array *a = NULL;
    char *scaled = NULL;
    int rc = cli_scale_spec(argv[optind], scale, &scaled);
    if (rc == CLI_OK)
        rc = cli_open_array(scaled ? scaled : argv[optind], NULL, 0, &a);
    free(scaled);
    if (rc == CLI_OK && attrs) {
        nds_error_clear();
        int st = nds_array_set_attributes(a, attrs);
        rc = st == 0 ? CLI_OK : cli_fail_nds(st, "attributes");
    } else if (rc == CLI_OK) {
        rc = print_attrs(a);
    }
    nds_array_free(a);
    free(attrs);
    return rc;
}
