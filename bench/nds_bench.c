/* nds_bench: times one phase of ndstore's engine on one zarr v2 array, through the public API
 * only, so that bench/bench.py can run each phase in its own process and report its peak RSS.
 *
 * usage: nds_bench --mode write  --array URL --input RAW --codec C --dtype T --shape S --chunks C
 *        nds_bench --mode read   --array URL [--input RAW]
 *        nds_bench --mode random --array URL [--input RAW] --region R [--seconds 3] [--seed S]
 *        common: [--threads N] [--cache-bytes N] [--memory-budget N] [--readers N]
 * write:  creates the array (zarr v2, must not exist yet) and times one nds_array_write of RAW
 *         (the array's elements, C order, host byte order) into it.
 * read:   opens the array and times one nds_array_read of all of it into a buffer faulted in
 *         before the clock starts; then compares it with RAW, streamed (no second big buffer).
 *         --readers N: N threads read all of it at once on the one context, each into its own
 *         buffer (faulted in before the clock, so rss_kib - rss_before_kib is what the reads
 *         added: the chunks in flight the context's --memory-budget bounds); bytes is N x array.
 * random: opens the array and reads regions of shape R at random origins for the given seconds,
 *         into one reused buffer; then reads the first few again and compares them with RAW.
 *         Origins: splitmix64(seed), one draw per dimension, origin = draw % (shape - R + 1),
 *         moved up by one when it falls on a chunk boundary (so regions straddle chunks);
 *         bench.py draws the same sequence for zarr-python and checks seq_hash (FNV-1a over the
 *         origins used).
 * Prints one JSON line: {"secs":..,"bytes":..,"threads":..,"rss_kib":..,...}. rss_kib is the peak
 * RSS (VmHWM) right after the timed part (before any check), rss_before_kib just before it (after
 * loading the input or faulting in the output), rss_start_kib at the start of main.
 * Omits: formats other than zarr v2 on write (reads open any format).
 * Threading: the library's pool. Exit status 0, 1 on failure (one line on stderr), 2 on bad usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "ndstore/ndstore.h"

typedef struct bench_args {
    const char *mode, *input, *array, *codec, *dtype;
    size_t rank, chunk_rank, region_rank;
    uint64_t shape[NDS_MAX_RANK], chunks[NDS_MAX_RANK], region[NDS_MAX_RANK];
    int threads, readers;
    size_t cache_bytes, memory_budget;
    double seconds;
    uint64_t seed;
} bench_args;

/* What the timed part measured, printed as JSON. */
typedef struct bench_result {
    double secs;
    uint64_t bytes, regions, seq_hash;
    long rss_start_kib, rss_before_kib, rss_kib;
    nds_array_stats st;
} bench_result;

static const char usage[] =
    "usage: nds_bench --mode write|read|random --array URL [--input RAW] [--codec C] [--dtype T]\n"
    "                 [--shape S] [--chunks C] [--region R] [--seconds X] [--seed N] [--threads "
    "N]\n"
    "                 [--cache-bytes N] [--memory-budget N] [--readers N]\n";

enum { VERIFY_REGIONS = 4 }; /* random mode: regions re-read and checked after the clock stops */

static int fail(const char *what, int code) {
    const nds_error *e = nds_error_last();
    fprintf(stderr, "nds_bench: %s: %s\n", what,
            code && e->message[0] ? e->message
            : code                ? nds_strerror(code)
                                  : strerror(errno));
    return 1;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Peak RSS of this address space: VmHWM, not ru_maxrss, which keeps the peak of the process that
 * exec'd us (the Python driver) as a floor. */
static long maxrss_kib(void) {
    char line[256];
    long kib = -1;
    FILE *f = fopen("/proc/self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
    if (f) fclose(f);
    return kib;
}

/* "1024,1024,256" -> v[0..*n). 0 or -1. */
static int parse_list(const char *s, uint64_t *v, size_t *n) {
    size_t k = 0;
    while (*s && k < NDS_MAX_RANK) {
        char *end;
        errno = 0;
        unsigned long long x = strtoull(s, &end, 10);
        if (errno || end == s || x == 0 || (*end && *end != ',')) return -1;
        v[k++] = x;
        s = *end == ',' ? end + 1 : end;
    }
    *n = k;
    return *s || k == 0 ? -1 : 0;
}

/* One "--key value" pair into a. 0 or -1. */
static int parse_one(bench_args *a, const char *k, const char *v) {
    if (strcmp(k, "--mode") == 0)
        a->mode = v;
    else if (strcmp(k, "--input") == 0)
        a->input = v;
    else if (strcmp(k, "--array") == 0)
        a->array = v;
    else if (strcmp(k, "--codec") == 0)
        a->codec = v;
    else if (strcmp(k, "--dtype") == 0)
        a->dtype = v;
    else if (strcmp(k, "--threads") == 0)
        a->threads = atoi(v);
    else if (strcmp(k, "--cache-bytes") == 0)
        a->cache_bytes = (size_t)strtoull(v, NULL, 10);
    else if (strcmp(k, "--memory-budget") == 0)
        a->memory_budget = (size_t)strtoull(v, NULL, 10);
    else if (strcmp(k, "--readers") == 0)
        a->readers = atoi(v);
    else if (strcmp(k, "--seconds") == 0)
        a->seconds = strtod(v, NULL);
    else if (strcmp(k, "--seed") == 0)
        a->seed = strtoull(v, NULL, 10);
    else if (strcmp(k, "--shape") == 0)
        return parse_list(v, a->shape, &a->rank);
    else if (strcmp(k, "--chunks") == 0)
        return parse_list(v, a->chunks, &a->chunk_rank);
    else if (strcmp(k, "--region") == 0)
        return parse_list(v, a->region, &a->region_rank);
    else
        return -1;
    return 0;
}

static int parse_args(int argc, char **argv, bench_args *a) {
    memset(a, 0, sizeof *a);
    a->dtype = "uint16";
    a->seconds = 3;
    a->seed = 1;
    a->readers = 1;
    for (int i = 1; i < argc; i += 2)
        if (i + 1 >= argc || parse_one(a, argv[i], argv[i + 1]) != 0) return -1;
    if (!a->mode || !a->array || a->readers < 1) return -1;
    if (strcmp(a->mode, "write") == 0)
        return a->input && a->codec && a->rank && a->chunk_rank == a->rank ? 0 : -1;
    if (strcmp(a->mode, "random") == 0) return a->region_rank && a->seconds > 0 ? 0 : -1;
    return strcmp(a->mode, "read") == 0 ? 0 : -1;
}

/* Loads RAW (exactly bytes long) into a new buffer. */
static int load(const char *path, size_t bytes, uint8_t **out) {
    FILE *f = fopen(path, "rb");
    if (!f) return fail(path, 0);
    uint8_t *buf = malloc(bytes ? bytes : 1);
    size_t got = buf ? fread(buf, 1, bytes, f) : 0;
    int extra = fgetc(f);
    fclose(f);
    if (!buf || got != bytes || extra != EOF) {
        free(buf);
        fprintf(stderr, "nds_bench: %s: expected exactly %zu bytes\n", path, bytes);
        return 1;
    }
    *out = buf;
    return 0;
}

/* Compares buf (bytes long) with the file at path, reading it in pieces. */
static int check_whole(const char *path, const uint8_t *buf, size_t bytes) {
    enum { PIECE = 1 << 20 };
    static uint8_t piece[PIECE];
    FILE *f = fopen(path, "rb");
    if (!f) return fail(path, 0);
    size_t off = 0, got;
    while ((got = fread(piece, 1, PIECE, f)) > 0 && off + got <= bytes &&
           memcmp(piece, buf + off, got) == 0)
        off += got;
    fclose(f);
    if (off == bytes && got == 0) return 0;
    fprintf(stderr, "nds_bench: the array read back differs from %s (at or after byte %zu)\n", path,
            off);
    return 1;
}

static void join_list(char *buf, size_t cap, const uint64_t *v, size_t n) {
    buf[0] = '\0';
    for (size_t d = 0; d < n; d++) {
        size_t len = strlen(buf);
        snprintf(buf + len, cap - len, "%s%" PRIu64, d ? "," : "", v[d]);
    }
}

/* Creates the array (the caller removed any old one, so the write is timed on a fresh store) and
 * times the write of RAW. */
static int run_write(const bench_args *a, nds_context *ctx, bench_result *r) {
    char spec[4096], shape[NDS_MAX_RANK * 24], chunks[NDS_MAX_RANK * 24];
    join_list(shape, sizeof shape, a->shape, a->rank);
    join_list(chunks, sizeof chunks, a->chunks, a->rank);
    snprintf(spec, sizeof spec,
             "{\"driver\":\"zarr\",\"kvstore\":\"%s\",\"create\":true,"
             "\"schema\":{\"dtype\":\"%s\",\"domain\":{\"shape\":[%s]},"
             "\"chunk_layout\":{\"chunk\":{\"shape\":[%s]}},\"codec\":\"%s\",\"fill_value\":0}}",
             a->array, a->dtype, shape, chunks, a->codec);
    size_t esize = nds_dtype_size(nds_dtype_from_name(a->dtype));
    if (esize == 0) return fprintf(stderr, "nds_bench: unknown dtype %s\n", a->dtype), 2;
    nds_box box;
    nds_box_full(&box, a->rank, a->shape);
    r->bytes = nds_box_count(&box) * esize;
    uint8_t *in = NULL;
    if (load(a->input, (size_t)r->bytes, &in)) return 1;
    nds_open_options oo = NDS_OPEN_OPTIONS_INIT;
    oo.ctx = ctx;
    nds_array *arr = NULL;
    int rc = nds_array_open(&arr, spec, &oo);
    if (rc == 0) {
        r->rss_before_kib = maxrss_kib();
        double t0 = now();
        rc = nds_array_write(arr, &box, in, NULL);
        r->secs = now() - t0;
        r->rss_kib = maxrss_kib();
    }
    nds_array_free(arr);
    free(in);
    return rc ? fail("write", rc) : 0;
}

/* One reader of --readers: the whole array into its own buffer. */
typedef struct reader {
    nds_array *arr;
    const nds_box *box;
    uint8_t *out;
    int rc;
} reader;

static void *read_all(void *arg) {
    reader *r = arg;
    r->rc = nds_array_read(r->arr, r->box, r->out, NULL);
    return NULL;
}

/* Times the read of the whole array by a->readers threads at once, each into a buffer faulted in
 * first, then checks each against RAW. */
static int run_read(const bench_args *a, nds_array *arr, bench_result *r) {
    uint64_t shape[NDS_MAX_RANK];
    nds_array_shape(arr, shape);
    nds_box box;
    nds_box_full(&box, nds_array_rank(arr), shape);
    size_t bytes = (size_t)(nds_box_count(&box) * nds_dtype_size(nds_array_dtype(arr)));
    int n = a->readers, rc = 0;
    reader *rd = calloc((size_t)n, sizeof *rd);
    pthread_t *tid = calloc((size_t)n, sizeof *tid);
    for (int i = 0; rd && tid && i < n; i++) {
        rd[i] = (reader){arr, &box, malloc(bytes ? bytes : 1), 0};
        if (!rd[i].out) break;
        memset(rd[i].out, 0xA5, bytes); /* fault every page in: the caller's buffer, reused */
    }
    for (int i = 0; i < n; i++)
        if (!rd || !tid || !rd[i].out) rc = fail("out of memory", NDS_ENOMEM);
    r->bytes = (uint64_t)bytes * (uint64_t)n;
    r->rss_before_kib = maxrss_kib();
    double t0 = now();
    if (rc == 0 && n == 1) read_all(&rd[0]);
    for (int i = 0; rc == 0 && n > 1 && i < n; i++) pthread_create(&tid[i], NULL, read_all, &rd[i]);
    for (int i = 0; rc == 0 && n > 1 && i < n; i++) pthread_join(tid[i], NULL);
    r->secs = now() - t0;
    r->rss_kib = maxrss_kib();
    for (int i = 0; rc == 0 && i < n; i++) {
        if (rd[i].rc)
            rc = fail("read", rd[i].rc);
        else if (a->input)
            rc = check_whole(a->input, rd[i].out, bytes);
    }
    for (int i = 0; rd && i < n; i++) free(rd[i].out);
    free(rd);
    free(tid);
    return rc;
}

static uint64_t splitmix64(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

/* The next random region (see the header comment; bench.py mirrors this), hashed into *hash. */
static void next_region(uint64_t *state, size_t rank, const uint64_t *shape, const uint64_t *chunks,
                        const uint64_t *region, nds_box *box, uint64_t *hash) {
    nds_box_full(box, rank, shape); /* step 1, nothing dropped */
    for (size_t d = 0; d < rank; d++) {
        uint64_t room = shape[d] - region[d], o = splitmix64(state) % (room + 1);
        if (o % chunks[d] == 0 && o < room) o++;
        box->start[d] = o;
        box->stop[d] = o + region[d];
        *hash = (*hash ^ o) * 0x100000001B3u;
    }
}

/* Compares a region read into buf with the same elements of RAW, one innermost row at a time. */
static int check_region(int fd, const nds_box *box, const uint64_t *shape, size_t esize,
                        const uint8_t *buf) {
    size_t rank = box->rank, row = (size_t)nds_box_extent(box, rank - 1) * esize;
    uint64_t idx[NDS_MAX_RANK];
    uint8_t tmp[1 << 16];
    if (row > sizeof tmp)
        return fprintf(stderr, "nds_bench: region rows over 64 KiB are not checked\n"), 1;
    memcpy(idx, box->start, sizeof idx);
    for (size_t off = 0;; off += row) {
        uint64_t flat = 0;
        for (size_t d = 0; d < rank; d++) flat = flat * shape[d] + idx[d];
        if (pread(fd, tmp, row, (off_t)(flat * esize)) != (ssize_t)row ||
            memcmp(tmp, buf + off, row))
            return fprintf(stderr, "nds_bench: a random region differs from the input\n"), 1;
        size_t d = rank - 1;
        while (d-- > 0 && ++idx[d] == box->stop[d]) idx[d] = box->start[d];
        if (d == (size_t)-1) return 0;
    }
}

/* Reads random regions until a->seconds have passed; then re-reads and checks the first few. */
static int run_random(const bench_args *a, nds_array *arr, bench_result *r) {
    size_t rank = nds_array_rank(arr), esize = nds_dtype_size(nds_array_dtype(arr));
    uint64_t shape[NDS_MAX_RANK], chunks[NDS_MAX_RANK], state = a->seed, count = 1;
    nds_array_shape(arr, shape);
    nds_array_read_chunk_shape(arr, chunks);
    for (size_t d = 0; d < a->region_rank; d++) count *= a->region[d];
    if (a->region_rank != rank)
        return fprintf(stderr, "nds_bench: --region needs %zu dimensions\n", rank), 2;
    for (size_t d = 0; d < rank; d++)
        if (a->region[d] > shape[d])
            return fprintf(stderr, "nds_bench: --region is larger than the array\n"), 2;
    uint8_t *buf = calloc((size_t)count, esize);
    if (!buf) return fail("out of memory", NDS_ENOMEM);
    nds_box box;
    int rc = 0;
    r->rss_before_kib = maxrss_kib();
    double t0 = now(), t;
    do {
        next_region(&state, rank, shape, chunks, a->region, &box, &r->seq_hash);
        rc = nds_array_read(arr, &box, buf, NULL);
        r->regions++;
        t = now();
    } while (rc == 0 && t - t0 < a->seconds);
    r->secs = t - t0;
    r->rss_kib = maxrss_kib();
    r->bytes = r->regions * count * esize;
    int fd = rc == 0 && a->input ? open(a->input, O_RDONLY) : -1;
    if (rc == 0 && a->input && fd < 0) rc = fail(a->input, 0);
    uint64_t again = a->seed, unused = 0;
    for (uint64_t i = 0; fd >= 0 && rc == 0 && i < r->regions && i < VERIFY_REGIONS; i++) {
        next_region(&again, rank, shape, chunks, a->region, &box, &unused);
        rc = nds_array_read(arr, &box, buf, NULL);
        rc = rc ? fail("read", rc) : check_region(fd, &box, shape, esize, buf);
    }
    if (fd >= 0) close(fd);
    free(buf);
    return rc < 0 ? fail("read", rc) : rc;
}

/* Opens the existing array for the read and random modes. */
static int run_opened(const bench_args *a, nds_context *ctx, bench_result *r) {
    nds_open_options oo = NDS_OPEN_OPTIONS_INIT;
    oo.ctx = ctx;
    nds_array *arr = NULL;
    int rc = nds_array_open(&arr, a->array, &oo);
    if (rc) return fail("open", rc);
    rc = strcmp(a->mode, "read") == 0 ? run_read(a, arr, r) : run_random(a, arr, r);
    if (rc == 0 && strcmp(a->mode, "read") == 0 && (rc = nds_array_stats_get(arr, &r->st)) != 0)
        rc = fail("stats", rc);
    nds_array_free(arr);
    return rc;
}

int main(int argc, char **argv) {
    bench_args a;
    if (parse_args(argc, argv, &a) != 0) {
        fputs(usage, stderr);
        return 2;
    }
    nds_context_options co = NDS_CONTEXT_OPTIONS_INIT;
    co.threads = a.threads;
    co.cache_bytes = a.cache_bytes;
    co.memory_budget = a.memory_budget;
    nds_context *ctx = NULL;
    bench_result r;
    memset(&r, 0, sizeof r);
    r.rss_start_kib = maxrss_kib();
    r.seq_hash = 0xCBF29CE484222325u;
    int rc = nds_context_new(&ctx, &co);
    if (rc) return fail("context", rc);
    rc = strcmp(a.mode, "write") == 0 ? run_write(&a, ctx, &r) : run_opened(&a, ctx, &r);
    if (rc == 0)
        printf("{\"secs\":%.6f,\"bytes\":%" PRIu64 ",\"threads\":%d,\"rss_start_kib\":%ld,"
               "\"rss_before_kib\":%ld,\"rss_kib\":%ld,\"regions\":%" PRIu64
               ",\"seq_hash\":%" PRIu64 ",\"stored_bytes\":%" PRIu64 ",\"chunks_stored\":%" PRIu64
               "}\n",
               r.secs, r.bytes, nds_context_threads(ctx), r.rss_start_kib, r.rss_before_kib,
               r.rss_kib, r.regions, r.seq_hash, r.st.bytes_stored, r.st.chunks_stored);
    nds_context_free(ctx);
    return rc;
}
