/* nds_bench: times ndstore's engine on one workload: nds_array_write of a whole uint16 array from
 * memory, then nds_array_read of all of it back into memory, and checks the bytes read back.
 *
 * usage: nds_bench --input RAW --array URL --codec C [--shape 1024,1024,256] [--chunks 64,64,64]
 *                  [--threads N]
 * RAW holds the array's elements (uint16, C order, host byte order); bench/bench_zarr_python.py
 * writes it so that ndstore and zarr-python get the same data. URL is a kvstore URL
 * ("file:///tmp/x/a.zarr/" or "memory://a/"); the array (zarr v2) is created there and must not
 * exist yet. Prints one JSON line:
 * {"write_s":..,"read_s":..,"bytes":..,"stored_bytes":..,"chunks_stored":..,"threads":..}.
 * Only the two calls are timed: not loading RAW, not opening the array, not the check.
 * Omits: other dtypes (the benchmark's workloads are uint16). Threading: the library's pool only.
 * Exit status 0, 1 on failure (one line on stderr), 2 on bad usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "ndstore/ndstore.h"

typedef struct bench_args {
    const char *input, *array, *codec;
    size_t rank;
    uint64_t shape[NDS_MAX_RANK], chunks[NDS_MAX_RANK];
    int threads;
} bench_args;

static const char usage[] = "usage: nds_bench --input RAW --array URL --codec C "
                            "[--shape 1024,1024,256] [--chunks 64,64,64] [--threads N]\n";

static int fail(const char *what, int code) {
    const nds_error *e = nds_error_last();
    fprintf(stderr, "nds_bench: %s: %s\n", what,
            e->message[0] ? e->message : code ? nds_strerror(code) : strerror(errno));
    return 1;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* "1024,1024,256" -> v[0..*n). 0 or -1. */
static int parse_list(const char *s, uint64_t *v, size_t *n) {
    size_t k = 0;
    while (*s && k < NDS_MAX_RANK) {
        char *end;
        errno = 0;
        unsigned long long x = strtoull(s, &end, 10);
        if (errno || end == s || x == 0)
            return -1;
        v[k++] = x;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return -1;
    }
    *n = k;
    return *s || k == 0 ? -1 : 0;
}

static int parse_args(int argc, char **argv, bench_args *a) {
    static const uint64_t def_shape[] = {1024, 1024, 256}, def_chunks[] = {64, 64, 64};
    size_t chunk_rank = 3;
    memset(a, 0, sizeof *a);
    a->rank = 3;
    memcpy(a->shape, def_shape, sizeof def_shape);
    memcpy(a->chunks, def_chunks, sizeof def_chunks);
    for (int i = 1; i < argc; i += 2) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            return -1;
        if (strcmp(k, "--input") == 0) a->input = v;
        else if (strcmp(k, "--array") == 0) a->array = v;
        else if (strcmp(k, "--codec") == 0) a->codec = v;
        else if (strcmp(k, "--threads") == 0) a->threads = atoi(v);
        else if (strcmp(k, "--shape") == 0) {
            if (parse_list(v, a->shape, &a->rank)) return -1;
        } else if (strcmp(k, "--chunks") == 0) {
            if (parse_list(v, a->chunks, &chunk_rank)) return -1;
        } else {
            return -1;
        }
    }
    return a->input && a->array && a->codec && chunk_rank == a->rank ? 0 : -1;
}

/* Loads RAW (exactly bytes long) into a new buffer. */
static int load(const char *path, size_t bytes, uint8_t **out) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return fail(path, 0);
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

/* The spec that creates the array. The caller removes any old one ("delete_existing" is not used),
 * so the write is always timed on a fresh store. */
static void make_spec(const bench_args *a, char *buf, size_t cap) {
    char shape[NDS_MAX_RANK * 24] = "", chunks[NDS_MAX_RANK * 24] = "";
    for (size_t d = 0; d < a->rank; d++) {
        size_t n1 = strlen(shape), n2 = strlen(chunks);
        snprintf(shape + n1, sizeof shape - n1, "%s%" PRIu64, d ? "," : "", a->shape[d]);
        snprintf(chunks + n2, sizeof chunks - n2, "%s%" PRIu64, d ? "," : "", a->chunks[d]);
    }
    snprintf(buf, cap,
             "{\"driver\":\"zarr\",\"kvstore\":\"%s\",\"create\":true,"
             "\"schema\":{\"dtype\":\"uint16\",\"domain\":{\"shape\":[%s]},"
             "\"chunk_layout\":{\"chunk\":{\"shape\":[%s]}},\"codec\":\"%s\",\"fill_value\":0}}",
             a->array, shape, chunks, a->codec);
}

/* Creates the array and times the write of in. */
static int timed_write(const bench_args *a, nds_context *ctx, const uint8_t *in, double *secs) {
    char spec[4096];
    make_spec(a, spec, sizeof spec);
    nds_open_options oo = NDS_OPEN_OPTIONS_INIT;
    oo.ctx = ctx;
    nds_array *arr = NULL;
    int rc = nds_array_open(&arr, spec, &oo);
    if (rc)
        return fail("create", rc);
    nds_box box;
    nds_box_full(&box, a->rank, a->shape);
    double t0 = now();
    rc = nds_array_write(arr, &box, in, NULL);
    *secs = now() - t0;
    nds_array_free(arr);
    return rc ? fail("write", rc) : 0;
}

/* Reopens the array, times the read into out, and gets its stored-size statistics. */
static int timed_read(const bench_args *a, nds_context *ctx, uint8_t *out, double *secs,
                      nds_array_stats *st) {
    char spec[4096];
    snprintf(spec, sizeof spec, "{\"driver\":\"zarr\",\"kvstore\":\"%s\"}", a->array);
    nds_open_options oo = NDS_OPEN_OPTIONS_INIT;
    oo.ctx = ctx;
    nds_array *arr = NULL;
    int rc = nds_array_open(&arr, spec, &oo);
    if (rc)
        return fail("open", rc);
    nds_box box;
    nds_box_full(&box, a->rank, a->shape);
    double t0 = now();
    rc = nds_array_read(arr, &box, out, NULL);
    *secs = now() - t0;
    if (rc == 0)
        rc = nds_array_stats_get(arr, st);
    nds_array_free(arr);
    return rc ? fail("read", rc) : 0;
}

int main(int argc, char **argv) {
    bench_args a;
    if (parse_args(argc, argv, &a) != 0) {
        fputs(usage, stderr);
        return 2;
    }
    size_t bytes = 2;
    for (size_t d = 0; d < a.rank; d++)
        bytes *= (size_t)a.shape[d];
    nds_context_options co = NDS_CONTEXT_OPTIONS_INIT;
    co.threads = a.threads;
    nds_context *ctx = NULL;
    uint8_t *in = NULL, *out = NULL;
    double wsec = 0, rsec = 0;
    nds_array_stats st = {0, 0, 0};
    int rc = nds_context_new(&ctx, &co) ? fail("context", 0) : 0;
    if (rc == 0)
        rc = load(a.input, bytes, &in);
    if (rc == 0 && !(out = malloc(bytes)))
        rc = fail("out of memory", NDS_ENOMEM);
    if (rc == 0)
        rc = timed_write(&a, ctx, in, &wsec);
    if (rc == 0)
        rc = timed_read(&a, ctx, out, &rsec, &st);
    if (rc == 0 && memcmp(in, out, bytes) != 0) {
        fprintf(stderr, "nds_bench: the array read back differs from what was written\n");
        rc = 1;
    }
    if (rc == 0)
        printf("{\"write_s\":%.6f,\"read_s\":%.6f,\"bytes\":%zu,\"stored_bytes\":%" PRIu64
               ",\"chunks_stored\":%" PRIu64 ",\"threads\":%d}\n", wsec, rsec, bytes,
               st.bytes_stored, st.chunks_stored, nds_context_threads(ctx));
    free(in);
    free(out);
    nds_context_free(ctx);
    return rc;
}
