/* ndstore command line: dispatch to the commands, global --help and --version. The helpers every
 * command shares are in common.c (reporting, parsing, opening arrays) and tiles.c (splitting boxes
 * into tiles), below the commands, so calls run one way: main.c -> cmd_*.c -> helpers.
 *
 * Omits: configuration files and environment defaults; every setting is an option or part of the spec.
 * Threading: the command line itself is single-threaded; the library runs its own pool.
 * Ownership: helpers that allocate say so; everything else is borrowed.
 */
#include <stdio.h>
#include <string.h>
#include "cli.h"

typedef struct cli_command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} cli_command;

static const cli_command commands[] = {
    {"info", "show an array's format, shape, dtype, chunks, codec, stored size and format detail",
     cli_cmd_info},
    {"create", "create an array from a spec or URL", cli_cmd_create},
    {"read", "read a region to .npy, raw bytes, or the terminal", cli_cmd_read},
    {"write", "write a .npy file or raw bytes into a region", cli_cmd_write},
    {"cp", "copy an array into a new array (any format and store), streaming", cli_cmd_cp},
    {"downsample", "build a multiscale pyramid: precomputed scales or an OME-Zarr group", cli_cmd_downsample},
    {"ls", "list the keys under a kvstore URL with their sizes, naming the arrays", cli_cmd_ls},
    {"verify", "decode every stored chunk and report the bad ones", cli_cmd_verify},
    {"resize", "change an array's shape", cli_cmd_resize},
    {"attrs", "print or replace an array's user attributes", cli_cmd_attrs},
    {"group", "create a group (and its parents), or consolidate its metadata", cli_cmd_group},
    {"checkpoint", "mark a checkpoint complete, or check whether it is", cli_cmd_checkpoint},
    {"commit", "publish prepared parts as one version of a versioned store", cli_cmd_commit},
    {"gc", "delete what no kept version of a versioned store references", cli_cmd_gc},
    {"log", "list the versions of a versioned store, newest first", cli_cmd_log},
    {"tag", "name a version of a versioned store (tags never move)", cli_cmd_tag},
    {"diff", "show the keys and chunks that changed between two versions", cli_cmd_diff},
    {"demo", "multi-process writers on local files, checked element by element", cli_cmd_demo},
    {"serve", "serve a store's keys over HTTP, read-only (byte ranges, CORS), for neuroglancer",
     cli_cmd_serve},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static const char main_usage[] = "ndstore [--help | --version] <command> [options] (ndstore --help lists them)";

static void print_main_help(void) {
    printf("usage: ndstore <command> [options]\n\nCommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        printf("  %-10s %s\n", commands[i].name, commands[i].summary);
    printf("\nRun `ndstore <command> --help` for a command's options.\n"
           "SPEC is JSON text, @file.json, or a URL such as file:///d/a.zarr|zarr: or a bare path.\n"
           "Exit status: 0 success, 1 failure, 2 bad usage.\n");
}

int main(int argc, char **argv) {
    if (argc < 2)
        return cli_usage(main_usage, "no command given");
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        if (strcmp(name, "help") == 0 && argc > 2) {
            /* "ndstore help read" is "ndstore read --help". */
            char *sub[] = {argv[2], "--help", NULL};
            for (size_t i = 0; i < N_COMMANDS; i++)
                if (strcmp(commands[i].name, argv[2]) == 0)
                    return commands[i].run(2, sub);
            return cli_usage(main_usage, "unknown command '%s'", argv[2]);
        }
        print_main_help();
        return CLI_OK;
    }
    if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0) {
        printf("ndstore %s\n", nds_version());
        return CLI_OK;
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    if (name[0] == '-')
        return cli_usage(main_usage, "unknown option '%s'", name);
    return cli_usage(main_usage, "unknown command '%s'", name);
}
