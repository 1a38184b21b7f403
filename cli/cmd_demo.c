/* `ndstore demo [--dir D] [--writers N] [--codec C]`: the main job on local files.
 *
 * Creates a zarr array (512x512x64 uint16, 64^3 chunks) under D (deleting one already there), then forks
 * N writer processes that each write a slab of rows [b_w, b_w+1) with a pattern that names the writer.
 * The slab boundaries are deliberately not chunk-aligned, so neighbouring writers share chunks (but no
 * elements): every shared chunk is written concurrently by two processes, and only the library's
 * per-chunk conditional writes keep both halves. The parent then reads the whole array back and checks
 * every element against the writer that owns its row, prints a region across a boundary, verifies every
 * chunk decodes, and prints `info`. Timings are printed in MB/s. Exit 1 when anything differs.
 *
 * Why fork before touching the library in the parent: the library runs a thread pool, and forking a
 * process with threads leaves the child with locks it cannot release. Setup runs in its own child, and
 * the parent opens the array only once every child has exited.
 * Each child's stderr is a pipe, so its one error line is reported by the parent as "writer N: ...".
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include "cli.h"
#include "npy.h"

#define DEMO_RANK 3
#define DEMO_MAX_WRITERS 64
static const uint64_t demo_shape[DEMO_RANK] = {512, 512, 64};
static const uint64_t demo_chunks[DEMO_RANK] = {64, 64, 64};

static const char usage[] = "ndstore demo [--dir D] [--writers N] [--codec C]";

static const char help[] =
    "usage: ndstore demo [--dir D] [--writers N] [--codec C]\n"
    "\n"
    "Create a 512x512x64 uint16 zarr array (64^3 chunks) in D/demo.zarr, write it from N processes at\n"
    "once whose slabs share chunks (not elements), read it back and check every element, then print a\n"
    "region, the chunk check and `info`, with timings.\n"
    "\n"
    "  -d, --dir D       directory (default ./ndstore-demo; an array there is replaced)\n"
    "  -w, --writers N   writer processes, 1..64 (default 4)\n"
    "  -c, --codec C     chunk codec (default blosc:lz4:5:shuffle)\n"
    "  -h, --help        show this help\n";

static const struct option options[] = {
    {"dir", required_argument, NULL, 'd'},
    {"writers", required_argument, NULL, 'w'},
    {"codec", required_argument, NULL, 'c'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

typedef struct demo {
    const char *dir;
    const char *codec;
    long writers;
    char url[4200];                       /* the array's URL */
    uint64_t bound[DEMO_MAX_WRITERS + 1]; /* writer w owns rows [bound[w], bound[w+1]) */
} demo;

/* The pattern names the writer in the top 4 bits, so an element another writer clobbered shows. */
static uint16_t pattern(long w, uint64_t i, uint64_t j, uint64_t k) {
    return (uint16_t)(((uint16_t)(w % 15 + 1) << 12) | ((i * 7 + j * 3 + k) & 0xfff));
}

/* Slab boundaries, each moved off the chunk grid (by up to half a chunk) so neighbours share chunks. */
static void plan(demo *d) {
    uint64_t rows = demo_shape[0], per = rows / (uint64_t)d->writers;
    uint64_t shift = per / 3 < demo_chunks[0] / 2 ? per / 3 : demo_chunks[0] / 2;
    for (long w = 0; w <= d->writers; w++)
        d->bound[w] = (uint64_t)w * rows / (uint64_t)d->writers + (w > 0 && w < d->writers ? shift : 0);
}

/* Chunks that two writers write into: the chunk rows a boundary falls inside, times chunks per row. */
static uint64_t shared_chunks(const demo *d) {
    uint64_t rows = 0, last = UINT64_MAX;
    for (long w = 1; w < d->writers; w++) {
        uint64_t row = d->bound[w] / demo_chunks[0];
        if (d->bound[w] % demo_chunks[0] != 0 && row != last)
            rows++, last = row;
    }
    return rows * (demo_shape[1] / demo_chunks[1]) * (demo_shape[2] / demo_chunks[2]);
}

static int mkdir_p(const char *dir) {
    char path[4096];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
        return cli_fail("--dir: path too long");
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            return cli_fail("%s: %s", path, strerror(errno));
        *p = c;
        if (c == '\0')
            return CLI_OK;
    }
}

/* ---- children ---- */

static int child_setup(const demo *d, const char *store) {
    cli_schema s;
    memset(&s, 0, sizeof s);
    s.dtype = "uint16";
    s.shape_rank = s.chunk_rank = DEMO_RANK;
    memcpy(s.shape, demo_shape, sizeof demo_shape);
    memcpy(s.chunks, demo_chunks, sizeof demo_chunks);
    s.codec = d->codec;
    int st = nds_group_create(store, "", "zarr", 0, NULL);
    if (st != 0)
        return cli_fail_nds(st, "group");
    char *spec = NULL;
    nds_array *a = NULL;
    int rc = cli_spec_build(d->url, &s, NULL, true, &spec);
    if (rc == CLI_OK)
        rc = cli_open_array(spec, NULL, 0, &a);
    nds_array_free(a);
    free(spec);
    return rc;
}

static int child_write(const demo *d, long w) {
    nds_array *a = NULL;
    int rc = cli_open_array(d->url, NULL, 0, &a);
    if (rc != CLI_OK)
        return rc;
    nds_box box;
    nds_box_full(&box, DEMO_RANK, demo_shape);
    box.start[0] = d->bound[w];
    box.stop[0] = d->bound[w + 1];
    uint64_t n = (box.stop[0] - box.start[0]) * demo_shape[1] * demo_shape[2];
    uint16_t *buf = malloc(n * sizeof *buf);
    if (!buf) {
        nds_array_free(a);
        return cli_fail("out of memory");
    }
    uint16_t *p = buf;
    for (uint64_t i = box.start[0]; i < box.stop[0]; i++)
        for (uint64_t j = 0; j < demo_shape[1]; j++)
            for (uint64_t k = 0; k < demo_shape[2]; k++)
                *p++ = pattern(w, i, j, k);
    int st = n ? nds_array_write(a, &box, buf, NULL) : 0;
    if (st != 0)
        rc = cli_fail_nds(st, "write");
    free(buf);
    nds_array_free(a);
    return rc;
}

/* ---- process management ---- */

typedef struct child {
    pid_t pid;
    int err_fd; /* read end of the child's stderr */
} child;

/* Forks a child running writer w (or setup when w < 0), its stderr piped to the parent. */
static int spawn(const demo *d, long w, const char *store, child *c) {
    int fds[2];
    if (pipe(fds) != 0)
        return cli_fail("pipe: %s", strerror(errno));
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return cli_fail("fork: %s", strerror(errno));
    }
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], STDERR_FILENO);
        close(fds[1]);
        int rc = w < 0 ? child_setup(d, store) : child_write(d, w);
        fflush(stderr);
        _exit(rc);
    }
    close(fds[1]);
    c->pid = pid;
    c->err_fd = fds[0];
    return CLI_OK;
}

/* Waits for a child; reports its error line when it failed. */
static int reap(child *c, const char *who) {
    int status = 0;
    while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR)
        ;
    char msg[2048];
    ssize_t n = read(c->err_fd, msg, sizeof msg - 1);
    close(c->err_fd);
    msg[n > 0 ? n : 0] = '\0';
    char *nl = strchr(msg, '\n');
    if (nl)
        *nl = '\0';
    const char *text = strncmp(msg, "ndstore: ", 9) == 0 ? msg + 9 : msg;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return CLI_OK;
    if (WIFSIGNALED(status))
        return cli_fail("demo: %s killed by signal %d", who, WTERMSIG(status));
    return cli_fail("demo: %s failed: %s", who, text[0] ? text : "no message");
}

static int run_writers(const demo *d, double *secs) {
    child kids[DEMO_MAX_WRITERS];
    int rc = CLI_OK;
    long started = 0;
    double t0 = cli_now();
    for (; started < d->writers && rc == CLI_OK; started++)
        rc = spawn(d, started, NULL, &kids[started]);
    if (rc != CLI_OK)
        started--;
    for (long w = 0; w < started; w++) {
        char who[32];
        snprintf(who, sizeof who, "writer %ld", w);
        int r = reap(&kids[w], who);
        rc = rc == CLI_OK ? r : rc;
    }
    *secs = cli_now() - t0;
    return rc;
}

/* ---- checking ---- */

static long owner(const demo *d, uint64_t row) {
    long w = 0;
    while (w + 1 < d->writers && row >= d->bound[w + 1])
        w++;
    return w;
}

static uint64_t check_all(const demo *d, const uint16_t *data) {
    uint64_t bad = 0;
    const uint16_t *p = data;
    for (uint64_t i = 0; i < demo_shape[0]; i++) {
        long w = owner(d, i);
        for (uint64_t j = 0; j < demo_shape[1]; j++)
            for (uint64_t k = 0; k < demo_shape[2]; k++, p++) {
                uint16_t want = pattern(w, i, j, k);
                if (*p != want && bad++ < 5)
                    printf("  element [%" PRIu64 ", %" PRIu64 ", %" PRIu64 "]: got %u, expected %u "
                           "(writer %ld)\n", i, j, k, *p, want, w);
            }
    }
    return bad;
}

static double mbps(uint64_t bytes, double secs) {
    return secs > 0 ? (double)bytes / secs / 1e6 : 0.0;
}

/* Reads everything back, checks it, prints a region across the first boundary. */
static int read_and_check(const demo *d, nds_array *a) {
    uint64_t count = demo_shape[0] * demo_shape[1] * demo_shape[2], bytes = count * 2;
    uint16_t *data = malloc(bytes);
    if (!data)
        return cli_fail("out of memory");
    nds_box box;
    nds_box_full(&box, DEMO_RANK, demo_shape);
    double t0 = cli_now();
    int st = nds_array_read(a, &box, data, NULL);
    double secs = cli_now() - t0;
    if (st != 0) {
        free(data);
        return cli_fail_nds(st, "read");
    }
    printf("read back %" PRIu64 " bytes in %.3f s (%.1f MB/s)\n", bytes, secs, mbps(bytes, secs));
    uint64_t bad = check_all(d, data);
    free(data);
    if (bad)
        return cli_fail("demo: check failed: %" PRIu64 " of %" PRIu64 " elements differ", bad, count);
    printf("check: all %" PRIu64 " elements are what their writer wrote\n", count);
    /* Two rows across the first slab boundary (or the last two rows with one writer). */
    uint64_t r0 = d->bound[1] > 0 ? d->bound[1] - 1 : 0, out[2] = {2, 4};
    if (r0 + 2 > demo_shape[0])
        r0 = demo_shape[0] - 2;
    uint16_t small[8];
    nds_box_full(&box, DEMO_RANK, demo_shape);
    box.start[0] = r0, box.stop[0] = r0 + 2;
    box.start[1] = 0, box.stop[1] = 4;
    box.start[2] = 5, box.stop[2] = 6, box.dropped = 1u << 2;
    if ((st = nds_array_read(a, &box, small, NULL)) != 0)
        return cli_fail_nds(st, "read");
    char region[256];
    nds_box_format(&box, region, sizeof region);
    printf("region %s (rows %" PRIu64 " and %" PRIu64 " written by writers %ld and %ld):\n", region, r0,
           r0 + 1, owner(d, r0), owner(d, r0 + 1));
    cli_print_array(stdout, NDS_UINT16, small, 2, out);
    return CLI_OK;
}

static int print_bad(void *ctx, const char *key, int status, const char *message) {
    (void)ctx;
    printf("bad: %s: %s\n", key, message && message[0] ? message : nds_strerror(status));
    return 0;
}

static int verify_chunks(nds_array *a) {
    uint64_t checked = 0, bad = 0;
    int st = nds_array_verify(a, print_bad, NULL, &checked, &bad);
    if (st != 0)
        return cli_fail_nds(st, "verify");
    printf("verify: %" PRIu64 " stored chunks decoded, %" PRIu64 " bad\n", checked, bad);
    return bad ? cli_fail("demo: %" PRIu64 " bad chunks", bad) : CLI_OK;
}

static int run_demo(demo *d) {
    int rc = mkdir_p(d->dir);
    char abs[4096], store[4200];
    if (rc == CLI_OK && !realpath(d->dir, abs))
        rc = cli_fail("%s: %s", d->dir, strerror(errno));
    if (rc != CLI_OK)
        return rc;
    snprintf(store, sizeof store, "file://%s/", abs);
    snprintf(d->url, sizeof d->url, "file://%s/demo.zarr|zarr:", abs);
    plan(d);
    printf("ndstore demo: %s, 512x512x64 uint16, chunks 64x64x64, codec %s\n", d->url, d->codec);
    child setup;
    if ((rc = spawn(d, -1, store, &setup)) != CLI_OK || (rc = reap(&setup, "setup")) != CLI_OK)
        return rc;
    for (long w = 0; w < d->writers; w++)
        printf("writer %ld: rows [%" PRIu64 ", %" PRIu64 ")\n", w, d->bound[w], d->bound[w + 1]);
    printf("%" PRIu64 " chunks are shared by two writers (slab boundaries inside a chunk row)\n",
           shared_chunks(d));
    double secs;
    if ((rc = run_writers(d, &secs)) != CLI_OK)
        return rc;
    uint64_t bytes = demo_shape[0] * demo_shape[1] * demo_shape[2] * 2;
    printf("wrote %" PRIu64 " bytes from %ld processes in %.3f s (%.1f MB/s)\n", bytes, d->writers, secs,
           mbps(bytes, secs));
    nds_array *a = NULL;
    if ((rc = cli_open_array(d->url, NULL, 0, &a)) != CLI_OK)
        return rc;
    rc = read_and_check(d, a);
    if (rc == CLI_OK)
        rc = verify_chunks(a);
    if (rc == CLI_OK) {
        printf("\n");
        rc = cli_info_print(a, false, stdout);
    }
    nds_array_free(a);
    return rc;
}

int cli_cmd_demo(int argc, char **argv) {
    demo d;
    memset(&d, 0, sizeof d);
    d.dir = "ndstore-demo";
    d.codec = "blosc:lz4:5:shuffle";
    d.writers = 4;
    int c;
    cli_getopt_reset();
    while ((c = getopt_long(argc, argv, ":hd:w:c:", options, NULL)) != -1) {
        switch (c) {
        case 'h': return cli_help(help);
        case 'd': d.dir = optarg; break;
        case 'c': d.codec = optarg; break;
        case 'w':
            if (cli_parse_long(optarg, 1, DEMO_MAX_WRITERS, &d.writers) != 0)
                return cli_usage(usage, "--writers: expected 1..%d, got '%s'", DEMO_MAX_WRITERS, optarg);
            break;
        default: return cli_bad_option(usage, argv, c);
        }
    }
    if (argc != optind)
        return cli_usage(usage, "unexpected argument '%s'", argv[optind]);
    if (d.dir[0] == '\0')
        return cli_usage(usage, "--dir: empty path");
    return run_demo(&d);
}
