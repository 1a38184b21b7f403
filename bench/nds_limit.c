/* nds_limit: the physical limit of one benchmark workload on this machine: the codec alone
 * compressing and decompressing the array's chunks on every core, or for codec "none" memcpy of the
 * same bytes and a plain sequential file write / read of the same size. bench/bench.py prints the
 * workload's ndstore and zarr-python throughput as a share of it.
 *
 * usage: nds_limit --input RAW --dtype T --shape S --chunks C --codec C [--dir DIR] [--threads N]
 *                  [--min-seconds X]
 * RAW holds the array (C order, host byte order = little-endian here). The chunks are cut out of it
 * exactly as zarr v2 stores them (C order, edge chunks padded with zeros) before any clock starts.
 * Codecs, with the parameters numcodecs and ndstore use: "zstd:L" (libzstd, ZSTD_compressCCtx),
 * "blosc:CNAME:CLEVEL:SHUFFLE" (c-blosc *_ctx calls, typesize = element size, blosc's own threads
 * 1, automatic block size), "gzip:L" (libdeflate, gzip framing as zarr v2's "gzip"), "none"
 * (memcpy). Each of N threads (default: online cores) takes every N-th chunk and runs whole passes
 * over its share until X seconds (default 1) have passed; chunk i is compressed into its own buffer
 * and decompressed into its own place in an output array faulted in beforehand (as a reader
 * decoding straight into the caller's buffer would). MB/s = sum over threads of uncompressed bytes
 * / seconds. A first untimed pass checks that every chunk round-trips. With --dir and codec none it
 * also times writing the bytes to files in DIR, one per thread, each thread writing its contiguous
 * share sequentially (write() of 8 MiB pieces, one fsync at the end, fresh files every pass), and
 * reading them back (page cache warm), then removes the files. Prints one JSON
 * line: {"threads":..,"bytes":..,"chunks":..,"stored_bytes":..,"compress_mbs":..,
 * "decompress_mbs":..[,"file_write_mbs":..,"file_read_mbs":..]}. Exit 0, 1 on failure, 2 on usage.
 * Omits: codecs the benchmark does not use. Threading: workers share read-only chunks and write
 * disjoint parts of the output; each has its own codec contexts.
 */
#include <blosc.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libdeflate.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

enum { MAX_RANK = 32, MAX_THREADS = 256 };
enum codec_kind { CODEC_NONE, CODEC_ZSTD, CODEC_BLOSC, CODEC_GZIP };

typedef struct limit_args {
    const char *input, *dtype, *codec, *dir;
    size_t rank, chunk_rank;
    uint64_t shape[MAX_RANK], chunks[MAX_RANK];
    int threads;
    double min_seconds;
} limit_args;

typedef struct codec_cfg {
    enum codec_kind kind;
    int level, shuffle;
    char cname[16];
    size_t typesize;
} codec_cfg;

/* Everything the workers share: the chunks, their compressed forms and the output array. */
typedef struct job {
    codec_cfg codec;
    size_t nchunks, chunk_bytes, cap; /* cap: bytes reserved per compressed chunk */
    uint8_t *raw, *comp, *out;        /* raw and out: nchunks * chunk_bytes; comp: nchunks * cap */
    size_t *csize;
    int threads, decompress;
    double min_seconds;
    pthread_barrier_t start;
} job;

typedef struct worker {
    job *job;
    int id, err;
    double bytes, secs;
    pthread_t tid;
} worker;

static const char usage[] = "usage: nds_limit --input RAW --dtype uint16|float32|... --shape S "
                            "--chunks C --codec C [--dir DIR] [--threads N] [--min-seconds X]\n";

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int parse_list(const char *s, uint64_t *v, size_t *n) {
    size_t k = 0;
    while (*s && k < MAX_RANK) {
        char *end;
        unsigned long long x = strtoull(s, &end, 10);
        if (end == s || x == 0 || (*end && *end != ',')) return -1;
        v[k++] = x;
        s = *end == ',' ? end + 1 : end;
    }
    *n = k;
    return *s || k == 0 ? -1 : 0;
}

static int parse_args(int argc, char **argv, limit_args *a) {
    memset(a, 0, sizeof *a);
    a->threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    a->min_seconds = 1;
    for (int i = 1; i < argc; i += 2) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!v)
            return -1;
        else if (strcmp(k, "--input") == 0)
            a->input = v;
        else if (strcmp(k, "--dtype") == 0)
            a->dtype = v;
        else if (strcmp(k, "--codec") == 0)
            a->codec = v;
        else if (strcmp(k, "--dir") == 0)
            a->dir = v;
        else if (strcmp(k, "--threads") == 0)
            a->threads = atoi(v);
        else if (strcmp(k, "--min-seconds") == 0)
            a->min_seconds = strtod(v, NULL);
        else if (strcmp(k, "--shape") == 0)
            bad = parse_list(v, a->shape, &a->rank);
        else if (strcmp(k, "--chunks") == 0)
            bad = parse_list(v, a->chunks, &a->chunk_rank);
        else
            bad = 1;
        if (bad) return -1;
    }
    if (a->threads < 1 || a->threads > MAX_THREADS) a->threads = a->threads < 1 ? 1 : MAX_THREADS;
    return a->input && a->dtype && a->codec && a->rank && a->chunk_rank == a->rank ? 0 : -1;
}

static size_t dtype_size(const char *t) {
    static const char *const names[] = {"int8",   "uint8",   "int16", "uint16", "float16", "int32",
                                        "uint32", "float32", "int64", "uint64", "float64"};
    static const size_t sizes[] = {1, 1, 2, 2, 2, 4, 4, 4, 8, 8, 8};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        if (strcmp(t, names[i]) == 0) return sizes[i];
    return 0;
}

/* "none", "zstd:1", "gzip:1", "blosc:lz4:5:shuffle" (the compact strings bench.py passes ndstore).
 */
static int parse_codec(const char *s, size_t typesize, codec_cfg *c) {
    char shuffle[16] = "shuffle";
    memset(c, 0, sizeof *c);
    c->typesize = typesize;
    strcpy(c->cname, "lz4");
    c->level = 5;
    if (strcmp(s, "none") == 0) return c->kind = CODEC_NONE, 0;
    if (sscanf(s, "zstd:%d", &c->level) == 1 || (strcmp(s, "zstd") == 0 && (c->level = 3)))
        return c->kind = CODEC_ZSTD, 0;
    if (sscanf(s, "gzip:%d", &c->level) == 1 || (strcmp(s, "gzip") == 0 && (c->level = 6)))
        return c->kind = CODEC_GZIP, 0;
    if (strncmp(s, "blosc", 5) != 0 || (s[5] && s[5] != ':')) return -1;
    if (s[5]) sscanf(s + 6, "%15[^:]:%d:%15s", c->cname, &c->level, shuffle);
    c->shuffle = strcmp(shuffle, "noshuffle") == 0    ? BLOSC_NOSHUFFLE
                 : strcmp(shuffle, "bitshuffle") == 0 ? BLOSC_BITSHUFFLE
                                                      : BLOSC_SHUFFLE;
    return c->kind = CODEC_BLOSC, 0;
}

/* Copies chunk k of the array (C order) into dst, whose padding the caller has zeroed. */
static void gather(const limit_args *a, size_t esize, const uint8_t *arr, size_t k, uint8_t *dst) {
    uint64_t origin[MAX_RANK], ext[MAX_RANK], local[MAX_RANK] = {0};
    for (size_t d = a->rank; d-- > 0;) {
        uint64_t grid = (a->shape[d] + a->chunks[d] - 1) / a->chunks[d];
        origin[d] = (k % grid) * a->chunks[d];
        k /= grid;
        ext[d] = a->shape[d] - origin[d] < a->chunks[d] ? a->shape[d] - origin[d] : a->chunks[d];
    }
    size_t last = a->rank - 1;
    for (;;) {
        uint64_t src = 0, off = 0;
        for (size_t d = 0; d < a->rank; d++) {
            src = src * a->shape[d] + origin[d] + local[d];
            off = off * a->chunks[d] + local[d];
        }
        memcpy(dst + off * esize, arr + src * esize, ext[last] * esize);
        size_t d = last;
        while (d-- > 0 && ++local[d] == ext[d]) local[d] = 0;
        if (d == (size_t)-1) return;
    }
}

/* Per-thread codec state. */
typedef struct codec_state {
    ZSTD_CCtx *zc;
    ZSTD_DCtx *zd;
    struct libdeflate_compressor *gc;
    struct libdeflate_decompressor *gd;
} codec_state;

/* Compresses or decompresses chunk i; 0 or -1. */
static int one_chunk(job *j, codec_state *s, size_t i) {
    const codec_cfg *c = &j->codec;
    uint8_t *raw = j->raw + i * j->chunk_bytes, *out = j->out + i * j->chunk_bytes;
    uint8_t *comp = j->comp + i * j->cap;
    size_t n = j->chunk_bytes, got = 0;
    if (c->kind == CODEC_NONE) {
        memcpy(out, raw, n);
        return 0;
    }
    if (!j->decompress) {
        if (c->kind == CODEC_ZSTD)
            got = ZSTD_compressCCtx(s->zc, comp, j->cap, raw, n, c->level);
        else if (c->kind == CODEC_GZIP)
            got = libdeflate_gzip_compress(s->gc, raw, n, comp, j->cap);
        else {
            int r = blosc_compress_ctx(c->level, c->shuffle, c->typesize, n, raw, comp, j->cap,
                                       c->cname, 0, 1);
            got = r > 0 ? (size_t)r : 0;
        }
        j->csize[i] = got;
        return got == 0 || ZSTD_isError(got) ? -1 : 0;
    }
    if (c->kind == CODEC_ZSTD)
        got = ZSTD_decompressDCtx(s->zd, out, n, comp, j->csize[i]);
    else if (c->kind == CODEC_GZIP)
        got = libdeflate_gzip_decompress(s->gd, comp, j->csize[i], out, n, NULL) ? 0 : n;
    else
        got = (size_t)blosc_decompress_ctx(comp, out, n, 1);
    return got == n ? 0 : -1;
}

static void *work(void *p) {
    worker *w = p;
    job *j = w->job;
    codec_state s = {0};
    if (j->codec.kind == CODEC_ZSTD) {
        s.zc = ZSTD_createCCtx();
        s.zd = ZSTD_createDCtx();
        w->err = !s.zc || !s.zd;
    } else if (j->codec.kind == CODEC_GZIP) {
        s.gc = libdeflate_alloc_compressor(j->codec.level);
        s.gd = libdeflate_alloc_decompressor();
        w->err = !s.gc || !s.gd;
    }
    pthread_barrier_wait(&j->start);
    double t0 = now(), bytes = 0;
    do {
        for (size_t i = (size_t)w->id; i < j->nchunks && !w->err; i += (size_t)j->threads) {
            w->err = one_chunk(j, &s, i) != 0;
            bytes += (double)j->chunk_bytes;
        }
    } while (!w->err && now() - t0 < j->min_seconds);
    w->secs = now() - t0;
    w->bytes = bytes;
    ZSTD_freeCCtx(s.zc);
    ZSTD_freeDCtx(s.zd);
    if (s.gc) libdeflate_free_compressor(s.gc);
    if (s.gd) libdeflate_free_decompressor(s.gd);
    return NULL;
}

/* Runs one direction on every thread; MB/s summed over threads, or -1 on a codec failure. */
static double run_pass(job *j, int decompress, double min_seconds) {
    worker w[MAX_THREADS];
    j->decompress = decompress;
    j->min_seconds = min_seconds;
    pthread_barrier_init(&j->start, NULL, (unsigned)j->threads);
    for (int t = 0; t < j->threads; t++) {
        w[t] = (worker){.job = j, .id = t};
        pthread_create(&w[t].tid, NULL, work, &w[t]);
    }
    double mbs = 0;
    int err = 0;
    for (int t = 0; t < j->threads; t++) {
        pthread_join(w[t].tid, NULL);
        err |= w[t].err;
        mbs += w[t].bytes / 1e6 / (w[t].secs > 0 ? w[t].secs : 1e-9);
    }
    pthread_barrier_destroy(&j->start);
    return err ? -1 : mbs;
}

/* One thread's share of a file pass: its own file (buffered writes to one file serialise on the
 * inode lock, and ndstore writes a file per chunk), bytes [off, end) of the buffer. */
typedef struct io_share {
    const char *dir;
    uint8_t *buf;
    size_t off, end;
    int id, reading, err;
    pthread_t tid;
} io_share;

static void *io_work(void *p) {
    enum { PIECE = 8 << 20 };
    io_share *s = p;
    char path[4096];
    snprintf(path, sizeof path, "%s/nds_limit.%d.tmp", s->dir, s->id);
    if (!s->reading) unlink(path);
    int fd = s->reading ? open(path, O_RDONLY) : open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    s->err = fd < 0;
    for (size_t off = s->off; off < s->end && !s->err;) {
        size_t n = s->end - off < PIECE ? s->end - off : PIECE;
        ssize_t r = s->reading ? read(fd, s->buf + off, n) : write(fd, s->buf + off, n);
        s->err = r <= 0;
        off += r > 0 ? (size_t)r : 0;
    }
    if (fd >= 0) s->err |= (!s->reading && fsync(fd) != 0) | (close(fd) != 0);
    return NULL;
}

/* Writes (fresh files, one fsync each at the end) or reads back all of buf, one thread per core
 * each sequentially on its contiguous share, in whole passes until min_s; MB/s, or -1. */
static double file_pass(const char *dir, uint8_t *buf, size_t bytes, int reading, int threads,
                        double min_s) {
    io_share s[MAX_THREADS];
    double t0 = now(), total = 0;
    do {
        int err = 0;
        for (int t = 0; t < threads; t++) {
            size_t off = (bytes / (size_t)threads * (size_t)t) & ~(size_t)0xFFFFF;
            s[t] = (io_share){.dir = dir, .buf = buf, .off = off, .id = t, .reading = reading};
            if (t > 0) s[t - 1].end = off;
        }
        s[threads - 1].end = bytes;
        for (int t = 0; t < threads; t++) pthread_create(&s[t].tid, NULL, io_work, &s[t]);
        for (int t = 0; t < threads; t++) {
            pthread_join(s[t].tid, NULL);
            err |= s[t].err;
        }
        if (err) return -1;
        total += (double)bytes;
    } while (now() - t0 < min_s);
    return total / 1e6 / (now() - t0);
}

/* Removes the files file_pass made. */
static void file_remove(const char *dir, int threads) {
    char path[4096];
    for (int t = 0; t < threads; t++) {
        snprintf(path, sizeof path, "%s/nds_limit.%d.tmp", dir, t);
        unlink(path);
    }
}

/* Loads RAW and cuts it into chunks in j->raw. */
static int load_chunks(const limit_args *a, size_t esize, job *j) {
    size_t bytes = esize;
    for (size_t d = 0; d < a->rank; d++) bytes *= a->shape[d];
    uint8_t *arr = malloc(bytes);
    FILE *f = fopen(a->input, "rb");
    size_t got = arr && f ? fread(arr, 1, bytes, f) : 0;
    if (f) fclose(f);
    if (got != bytes) {
        free(arr);
        return fprintf(stderr, "nds_limit: %s: cannot read %zu bytes\n", a->input, bytes), 1;
    }
    for (size_t k = 0; k < j->nchunks; k++) gather(a, esize, arr, k, j->raw + k * j->chunk_bytes);
    free(arr);
    return 0;
}

/* Sets up the job: chunk geometry, buffers (raw zeroed for edge padding, out faulted in). */
static int setup(const limit_args *a, job *j) {
    size_t esize = dtype_size(a->dtype);
    memset(j, 0, sizeof *j);
    if (!esize || parse_codec(a->codec, esize, &j->codec) != 0)
        return fprintf(stderr, "nds_limit: bad --dtype or --codec\n"), 2;
    j->threads = a->threads;
    j->chunk_bytes = esize;
    j->nchunks = 1;
    for (size_t d = 0; d < a->rank; d++) {
        j->chunk_bytes *= a->chunks[d];
        j->nchunks *= (a->shape[d] + a->chunks[d] - 1) / a->chunks[d];
    }
    size_t zb = ZSTD_compressBound(j->chunk_bytes);
    j->cap = (zb > j->chunk_bytes + BLOSC_MAX_OVERHEAD ? zb : j->chunk_bytes + BLOSC_MAX_OVERHEAD) +
             j->chunk_bytes / 64 + 4096; /* covers libdeflate's bound too */
    j->raw = calloc(j->nchunks, j->chunk_bytes);
    j->out = malloc(j->nchunks * j->chunk_bytes);
    j->comp = j->codec.kind == CODEC_NONE ? NULL : malloc(j->nchunks * j->cap);
    j->csize = calloc(j->nchunks, sizeof *j->csize);
    if (!j->raw || !j->out || (!j->comp && j->codec.kind != CODEC_NONE) || !j->csize)
        return fprintf(stderr, "nds_limit: out of memory\n"), 1;
    memset(j->out, 0xA5, j->nchunks * j->chunk_bytes);
    return load_chunks(a, esize, j);
}

/* Untimed pass: compress everything once, decompress once, and check the round trip. */
static int check_round_trip(job *j, size_t *stored) {
    if (run_pass(j, 0, 0) < 0 || run_pass(j, 1, 0) < 0 ||
        memcmp(j->raw, j->out, j->nchunks * j->chunk_bytes) != 0)
        return fprintf(stderr, "nds_limit: the codec failed or did not round-trip\n"), 1;
    *stored = 0;
    for (size_t i = 0; i < j->nchunks; i++)
        *stored += j->codec.kind == CODEC_NONE ? j->chunk_bytes : j->csize[i];
    return 0;
}

int main(int argc, char **argv) {
    limit_args a;
    job j;
    size_t stored = 0;
    if (parse_args(argc, argv, &a) != 0) return fputs(usage, stderr), 2;
    int rc = setup(&a, &j);
    if (rc == 0) rc = check_round_trip(&j, &stored);
    double comp = rc ? 0 : run_pass(&j, 0, a.min_seconds);
    double dec = j.codec.kind == CODEC_NONE ? comp : rc ? 0 : run_pass(&j, 1, a.min_seconds);
    size_t bytes = j.nchunks * j.chunk_bytes;
    if (rc == 0)
        printf("{\"threads\":%d,\"bytes\":%zu,\"chunks\":%zu,\"stored_bytes\":%zu,"
               "\"compress_mbs\":%.1f,\"decompress_mbs\":%.1f",
               j.threads, bytes, j.nchunks, stored, comp, dec);
    if (rc == 0 && a.dir && j.codec.kind == CODEC_NONE) {
        double w = file_pass(a.dir, j.raw, bytes, 0, j.threads, a.min_seconds);
        double r = w < 0 ? -1 : file_pass(a.dir, j.out, bytes, 1, j.threads, a.min_seconds);
        file_remove(a.dir, j.threads);
        if (w < 0 || r < 0)
            rc = fprintf(stderr, "nds_limit: file I/O in %s: %s\n", a.dir, strerror(errno)) > 0;
        else
            printf(",\"file_write_mbs\":%.1f,\"file_read_mbs\":%.1f", w, r);
    }
    if (rc == 0) printf("}\n");
    free(j.raw);
    free(j.out);
    free(j.comp);
    free(j.csize);
    return rc;
}
