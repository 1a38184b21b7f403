/* nds_versioned_bench: the versioned store's costs that checkpoints depend on (issue 18, item 6),
 * through the public API (and the engine's multi-key commit, see commit_keys);
 * bench/versioned_bench.py runs it and prints the table.
 *
 * usage: nds_versioned_bench DIR [--keys N] [--batch N] [--lookups N] [--arrays N]
 *                                [--commit-keys N]
 *        nds_versioned_bench --arrays-base URL [--arrays N]
 *        DIR (absolute) must be empty or missing; the stores go to DIR/commit/, DIR/big/ and
 *        DIR/arrays/. With --arrays-base, only the arrays row runs, on the base store URL
 *        (e.g. s3://bucket/bench-1/: a prefix that must be empty; credentials and endpoint from
 *        the environment, as for ndstore), then five commit_one rows (store_keys 0) into it.
 * Measurements, each printed as one JSON line {"what":...} when it is done:
 *   commit       one atomic transaction (nds_txn_write_key, nds_txn_commit: one multi-key commit)
 *                of --commit-keys raw keys (4 KiB values: data objects) into an empty store on
 *                file://; the objects it added under data/, index/, commits/ and whether the head
 *                hint exists, the time of its commit and of staging its keys.
 *   staging      --commit-keys, then 10x as many raw keys staged in a transaction with
 *                nds_txn_write_key (then aborted): the public path's cost per key.
 *   build        --keys keys (600-byte values, past the 512-byte inline limit, so every lookup also
 *                reads its value from a data object) written in multi-key commits of --batch keys
 *                (nds_kvstore_commit, as a transaction's commit, without the staging);
 *                commit j writes the keys i with i % commits == j, so every commit spreads over the
 *                whole key space (as a checkpoint step rewrites every array).
 *   lookup_cold  --lookups random keys, each from a NEW handle (its node cache empty; files still
 *                in the page cache) on the versioned store over a faulty wrapper of the base
 *                ({"driver":"versioned","base":{"driver":"faulty","base":"file://DIR/big/"}}):
 *                the base reads each lookup made (calls.read of the faulty base, from
 *                nds_kvstore_spec before and after; the handle's open is outside the count) and
 *                the time of the lookup alone. The tree's height comes from the latest commit.
 *   lookup_warm  the same keys on one handle, each looked up once to fill the cache, then timed and
 *                counted again.
 *   commit_one   one key committed (a transaction) into the store of --keys keys: objects added
 *                and time.
 *   arrays       --arrays zarr v3 arrays (uint16 64x64, one chunk, zstd-1) created and written
 *                inside one NDS_TXN_ATOMIC transaction (opened with nds_open_options.txn) on
 *                file://, one commit: total and per-array time (opens, writes, commit) and the
 *                objects added.
 * Every value a lookup reads, and a few of the arrays read back, are compared with what was
 * written. Exit status 0, 1 on failure (one line on stderr), 2 on bad usage.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "ndstore/ndstore.h"
#include "ndstore/sys/kv_driver.h"

typedef struct bench_args {
    const char *dir;
    const char *arrays_base; /* --arrays-base: only the arrays row, on this base URL */
    uint64_t keys, batch, lookups, arrays, commit_keys;
} bench_args;

/* Objects of a store's base, by kind (the keys of docs/versioned-format.md). */
typedef struct object_counts {
    uint64_t data, index, commits, head;
} object_counts;

enum { SMALL_VALUE = 600, COMMIT_VALUE = 4096, ARRAY_SIDE = 64 };

static const char usage[] = "usage: nds_versioned_bench DIR [--keys N] [--batch N] [--lookups N] "
                            "[--arrays N] [--commit-keys N]\n"
                            "       nds_versioned_bench --arrays-base URL [--arrays N]\n";

static int fail(const char *what, int code) {
    const nds_error *e = nds_error_last();
    fprintf(stderr, "nds_versioned_bench: %s: %s\n", what,
            code && e->message[0] ? e->message : nds_strerror(code));
    return 1;
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* splitmix64: the random keys looked up, the same every run. */
static uint64_t next_random(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void key_name(char *buf, size_t cap, uint64_t i) { snprintf(buf, cap, "k/%09" PRIu64, i); }

/* A value that names its key, so a lookup that returned another key's bytes is caught. */
static void fill_value(uint8_t *buf, size_t len, uint64_t i) {
    uint64_t state = i;
    for (size_t j = 0; j < len; j += 8) {
        uint64_t r = next_random(&state);
        memcpy(buf + j, &r, len - j < 8 ? len - j : 8);
    }
}

/* ---- counting objects ------------------------------------------------------------------------ */

static int count_one(void *ctx, const char *key, uint64_t size) {
    (void)size;
    object_counts *c = ctx;
    if (!strncmp(key, "data/", 5))
        c->data++;
    else if (!strncmp(key, "index/", 6))
        c->index++;
    else if (!strncmp(key, "commits/", 8))
        c->commits++;
    else if (!strcmp(key, "head"))
        c->head++;
    return 0;
}

/* Lists the base as a plain store (file:// or --arrays-base): what the versioned store wrote. */
static int count_objects(const char *base_url, object_counts *out) {
    nds_kvstore *plain = NULL;
    memset(out, 0, sizeof *out);
    int rc = nds_kvstore_open(&plain, base_url, NULL);
    if (!rc) rc = nds_kvstore_list(plain, "", count_one, out);
    nds_kvstore_free(plain);
    return rc;
}

static void print_added(const object_counts *before, const object_counts *after) {
    printf("\"data_objects\":%" PRIu64 ",\"index_objects\":%" PRIu64 ",\"commit_objects\":%" PRIu64
           ",\"head_hint\":%s",
           after->data - before->data, after->index - before->index,
           after->commits - before->commits, after->head ? "true" : "false");
}

/* ---- writing keys ---------------------------------------------------------------------------- */

/* The multi-key commit of the engine (lib/internal/kvstore_internal.h), what an atomic transaction
 * ends in. The one call here outside the public headers: the public way to commit raw keys,
 * nds_txn_write_key, finds each staged key by a linear search (O(n^2) for n keys: measured by
 * measure_staging), which would take about a minute for each 100,000-key commit of
 * build_store. */
int nds_kvstore_commit(nds_kvstore *const *kvs, nds_kv_op *ops, size_t n);

/* Writes keys first, first + step, ... (count of them) in one multi-key commit: one version
 * (build_store's 100,000-key commits). */
static int commit_keys(nds_kvstore *kv, uint64_t first, uint64_t step, uint64_t count, size_t len) {
    nds_kv_op *ops = calloc(count, sizeof *ops);
    nds_kvstore **kvs = calloc(count, sizeof *kvs);
    char *keys = malloc(count * 32);
    uint8_t *values = malloc(count * len);
    int rc = ops && kvs && keys && values ? 0 : NDS_ENOMEM;
    for (uint64_t n = 0; n < count && !rc; n++) {
        uint64_t i = first + n * step;
        key_name(keys + n * 32, 32, i);
        fill_value(values + n * len, len, i);
        ops[n] = (nds_kv_op){
            keys + n * 32, values + n * len, len, {NDS_GEN_NONE, {0}}, {NDS_GEN_NONE, {0}}};
        kvs[n] = kv;
    }
    if (!rc) rc = nds_kvstore_commit(kvs, ops, count);
    free(ops), free(kvs), free(keys), free(values);
    return rc ? fail("commit", rc) : 0;
}

/* Staging count raw keys in a transaction (nds_txn_write_key), then aborting: the public path's
 * cost before any commit. */
static int measure_staging(const char *base_url, uint64_t count) {
    nds_kvstore *kv = NULL;
    nds_txn *t = NULL;
    char spec[1200], key[32];
    uint8_t value[16] = {0};
    snprintf(spec, sizeof spec, "%s|versioned:", base_url);
    int rc = nds_kvstore_open(&kv, spec, NULL);
    double t0 = now();
    if (!rc) rc = nds_txn_begin(&t, &(nds_txn_options){NDS_TXN_OPTIONS_VERSION, NDS_TXN_ATOMIC, 0});
    for (uint64_t i = 0; i < count && !rc; i++) {
        key_name(key, sizeof key, i);
        rc = nds_txn_write_key(t, kv, key, value, sizeof value);
    }
    double secs = now() - t0;
    nds_txn_free(t);
    nds_kvstore_free(kv);
    if (rc) return fail("staging", rc);
    printf("{\"what\":\"staging\",\"keys\":%" PRIu64 ",\"seconds\":%.6f}\n", count, secs);
    fflush(stdout);
    return 0;
}

static int open_versioned(const char *base_url, nds_kvstore **kv) {
    char spec[4096];
    snprintf(spec, sizeof spec, "%s|versioned:", base_url);
    int rc = nds_kvstore_open(kv, spec, NULL);
    return rc ? fail(spec, rc) : 0;
}

/* Writes keys first .. first + count - 1 in one atomic transaction (nds_txn_write_key, then
 * nds_txn_commit: the public path, one version); the time of each step. */
static int txn_commit_keys(nds_kvstore *kv, uint64_t first, uint64_t count, size_t len,
                           double *stage_secs, double *commit_secs) {
    nds_txn *t = NULL;
    uint8_t *value = malloc(len);
    if (!value) return fail("out of memory", NDS_ENOMEM);
    char key[32];
    double t0 = now();
    int rc = nds_txn_begin(&t, &(nds_txn_options){NDS_TXN_OPTIONS_VERSION, NDS_TXN_ATOMIC, 0});
    for (uint64_t i = first; i < first + count && !rc; i++) {
        key_name(key, sizeof key, i);
        fill_value(value, len, i);
        rc = nds_txn_write_key(t, kv, key, value, len);
    }
    double t1 = now();
    if (!rc) rc = nds_txn_commit(t);
    *stage_secs = t1 - t0;
    *commit_secs = now() - t1;
    nds_txn_free(t);
    free(value);
    return rc ? fail("transaction commit", rc) : 0;
}

/* Times one transaction of count keys into the store at base_url; prints the objects it added. */
static int measure_commit(const char *what, const char *base_url, uint64_t first, uint64_t count,
                          size_t len, uint64_t store_keys) {
    nds_kvstore *kv = NULL;
    object_counts before, after;
    double stage_secs = 0, commit_secs = 0;
    if (open_versioned(base_url, &kv)) return 1;
    int rc = count_objects(base_url, &before);
    if (rc) rc = fail("list", rc);
    if (!rc) rc = txn_commit_keys(kv, first, count, len, &stage_secs, &commit_secs);
    nds_kvstore_free(kv);
    if (!rc && (rc = count_objects(base_url, &after))) rc = fail("list", rc);
    if (rc) return rc;
    printf("{\"what\":\"%s\",\"keys\":%" PRIu64 ",\"value_bytes\":%zu,\"store_keys\":%" PRIu64
           ",\"stage_seconds\":%.6f,\"seconds\":%.6f,",
           what, count, len, store_keys, stage_secs, commit_secs);
    print_added(&before, &after);
    printf("}\n");
    fflush(stdout);
    return 0;
}

static int build_store(const char *base_url, uint64_t keys, uint64_t batch) {
    nds_kvstore *kv = NULL;
    if (open_versioned(base_url, &kv)) return 1;
    uint64_t commits = (keys + batch - 1) / batch;
    double t0 = now();
    int rc = 0;
    for (uint64_t j = 0; j < commits && !rc; j++)
        rc = commit_keys(kv, j, commits, (keys - j + commits - 1) / commits, SMALL_VALUE);
    double secs = now() - t0;
    nds_kvstore_free(kv);
    if (rc) return rc;
    printf("{\"what\":\"build\",\"keys\":%" PRIu64 ",\"commits\":%" PRIu64
           ",\"value_bytes\":%d,\"seconds\":%.6f}\n",
           keys, commits, SMALL_VALUE, secs);
    fflush(stdout);
    return 0;
}

/* ---- lookups --------------------------------------------------------------------------------- */

/* The faulty base's count of read calls, from the versioned handle's spec. */
static int base_reads(nds_kvstore *kv, uint64_t *reads) {
    char *spec = NULL;
    int rc = nds_kvstore_spec(kv, &spec);
    if (rc) return fail("spec", rc);
    const char *calls = strstr(spec, "\"calls\"");
    const char *read = calls ? strstr(calls, "\"read\"") : NULL;
    const char *colon = read ? strchr(read, ':') : NULL;
    int ok = colon && sscanf(colon + 1, "%" SCNu64, reads) == 1;
    if (!ok) fprintf(stderr, "nds_versioned_bench: no calls.read in the spec %s\n", spec);
    nds_free(spec);
    return ok ? 0 : 1;
}

/* The latest commit's root level + 1, from its JSON ("level" inside "root"). */
static int tree_height(const char *base_url, unsigned *height) {
    nds_kvstore *plain = NULL;
    object_counts c;
    int rc = count_objects(base_url, &c);
    if (!rc) rc = nds_kvstore_open(&plain, base_url, NULL);
    char key[64];
    snprintf(key, sizeof key, "commits/%020" PRIu64, c.commits);
    nds_read_result r = {0};
    if (!rc) rc = nds_kvstore_read(plain, key, NULL, &r);
    nds_kvstore_free(plain);
    if (rc) return fail(key, rc);
    const char *text = (const char *)r.value.data;
    const char *root = r.state == NDS_READ_VALUE && r.value.len > 16
                           ? memmem(text + 16, r.value.len - 16, "\"root\"", 6)
                           : NULL;
    const char *level =
        root ? memmem(root, r.value.len - (size_t)(root - text), "\"level\"", 7) : NULL;
    unsigned lv = 0;
    int ok = level && sscanf(level + 7, " : %u", &lv) == 1;
    nds_read_result_dispose(&r);
    if (!ok) return fprintf(stderr, "nds_versioned_bench: no root level in %s\n", key), 1;
    *height = lv + 1;
    return 0;
}

/* One lookup: its time and the base reads it made; checks the bytes. */
static int lookup(nds_kvstore *kv, uint64_t i, double *secs, uint64_t *reads) {
    char key[64];
    uint8_t expect[SMALL_VALUE];
    uint64_t r0, r1;
    key_name(key, sizeof key, i);
    fill_value(expect, sizeof expect, i);
    if (base_reads(kv, &r0)) return 1;
    nds_read_result r = {0};
    double t0 = now();
    int rc = nds_kvstore_read(kv, key, NULL, &r);
    *secs = now() - t0;
    if (rc) return fail(key, rc);
    int same = r.state == NDS_READ_VALUE && r.value.len == sizeof expect &&
               !memcmp(r.value.data, expect, sizeof expect);
    nds_read_result_dispose(&r);
    if (!same) return fprintf(stderr, "nds_versioned_bench: %s read back other bytes\n", key), 1;
    if (base_reads(kv, &r1)) return 1;
    *reads = r1 - r0;
    return 0;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void print_lookups(const char *what, unsigned height, uint64_t n, uint64_t *reads,
                          double *secs) {
    uint64_t total = 0;
    double time = 0;
    for (uint64_t i = 0; i < n; i++) total += reads[i], time += secs[i];
    qsort(reads, n, sizeof *reads, cmp_u64);
    qsort(secs, n, sizeof *secs, cmp_double);
    printf("{\"what\":\"%s\",\"lookups\":%" PRIu64 ",\"height\":%u,\"reads_min\":%" PRIu64
           ",\"reads_median\":%" PRIu64 ",\"reads_max\":%" PRIu64 ",\"reads_mean\":%.3f,"
           "\"seconds_median\":%.9f,\"seconds_mean\":%.9f}\n",
           what, n, height, reads[0], reads[n / 2], reads[n - 1], (double)total / (double)n,
           secs[n / 2], time / (double)n);
    fflush(stdout);
}

static int measure_lookups(const char *base_url, uint64_t keys, uint64_t n) {
    char spec[4096];
    snprintf(spec, sizeof spec,
             "{\"driver\":\"versioned\",\"base\":{\"driver\":\"faulty\",\"base\":\"%s\"}}",
             base_url);
    unsigned height = 0;
    if (tree_height(base_url, &height)) return 1;
    uint64_t *which = malloc(n * sizeof *which), *reads = malloc(n * sizeof *reads);
    double *secs = malloc(n * sizeof *secs);
    if (!which || !reads || !secs)
        return free(which), free(reads), free(secs), fail("memory", NDS_ENOMEM);
    uint64_t state = 42;
    for (uint64_t i = 0; i < n; i++) which[i] = next_random(&state) % keys;
    int rc = 0;
    for (uint64_t i = 0; i < n && !rc; i++) { /* cold: a new handle, an empty node cache */
        nds_kvstore *kv = NULL;
        rc = nds_kvstore_open(&kv, spec, NULL);
        if (rc)
            rc = fail(spec, rc);
        else
            rc = lookup(kv, which[i], &secs[i], &reads[i]);
        nds_kvstore_free(kv);
    }
    if (!rc) print_lookups("lookup_cold", height, n, reads, secs);
    nds_kvstore *kv = NULL;
    if (!rc && (rc = nds_kvstore_open(&kv, spec, NULL))) rc = fail(spec, rc);
    for (uint64_t i = 0; i < n && !rc; i++) rc = lookup(kv, which[i], &secs[i], &reads[i]);
    for (uint64_t i = 0; i < n && !rc; i++) rc = lookup(kv, which[i], &secs[i], &reads[i]);
    nds_kvstore_free(kv);
    if (!rc) print_lookups("lookup_warm", height, n, reads, secs);
    free(which), free(reads), free(secs);
    return rc;
}

/* ---- many arrays in one transaction ---------------------------------------------------------- */

static int open_array_in(nds_txn *t, const char *base_url, uint64_t i, nds_array **out) {
    char spec[4096];
    snprintf(spec, sizeof spec,
             "{\"driver\":\"zarr3\",\"kvstore\":\"%s|versioned:a%05" PRIu64 "/\",\"create\":true,"
             "\"schema\":{\"dtype\":\"uint16\",\"domain\":{\"shape\":[%d,%d]},"
             "\"chunk_layout\":{\"chunk\":{\"shape\":[%d,%d]}},\"codec\":\"zstd:1\"}}",
             base_url, i, ARRAY_SIDE, ARRAY_SIDE, ARRAY_SIDE, ARRAY_SIDE);
    nds_open_options o = NDS_OPEN_OPTIONS_INIT;
    o.txn = t;
    int rc = nds_array_open(out, spec, &o);
    return rc ? fail(spec, rc) : 0;
}

/* Reads a few arrays back through new handles: the transaction's version holds them. */
static int check_arrays(const char *base_url, uint64_t n, const uint16_t *buf) {
    uint16_t back[ARRAY_SIDE * ARRAY_SIDE];
    nds_box all = {2, {0, 0}, {ARRAY_SIDE, ARRAY_SIDE}, {1, 1}, 0};
    for (uint64_t i = 0; i < n; i += n / 4 + 1) {
        char url[4096];
        snprintf(url, sizeof url, "%s|versioned:a%05" PRIu64 "/|zarr3:", base_url, i);
        nds_array *a = NULL;
        int rc = nds_array_open(&a, url, NULL);
        if (!rc) rc = nds_array_read(a, &all, back, NULL);
        nds_array_free(a);
        if (rc) return fail(url, rc);
        for (int j = 0; j < ARRAY_SIDE * ARRAY_SIDE; j++)
            if (back[j] != (uint16_t)(buf[j] + i))
                return fprintf(stderr, "nds_versioned_bench: %s read back other data\n", url), 1;
    }
    return 0;
}

static int measure_arrays(const char *base_url, uint64_t n) {
    nds_array **arrays = calloc(n, sizeof *arrays);
    uint16_t *buf = malloc(sizeof(uint16_t) * ARRAY_SIDE * ARRAY_SIDE * 2);
    if (!arrays || !buf) return free(arrays), free(buf), fail("memory", NDS_ENOMEM);
    uint16_t *shifted = buf + ARRAY_SIDE * ARRAY_SIDE;
    for (int j = 0; j < ARRAY_SIDE * ARRAY_SIDE; j++) buf[j] = (uint16_t)(j * 7);
    object_counts before, after;
    int rc = count_objects(base_url, &before);
    nds_txn *t = NULL;
    nds_box all = {2, {0, 0}, {ARRAY_SIDE, ARRAY_SIDE}, {1, 1}, 0};
    nds_io_options io = NDS_IO_OPTIONS_INIT;
    double t0 = now();
    if (!rc) rc = nds_txn_begin(&t, &(nds_txn_options){NDS_TXN_OPTIONS_VERSION, NDS_TXN_ATOMIC, 0});
    io.txn = t;
    for (uint64_t i = 0; i < n && !rc; i++) {
        for (int j = 0; j < ARRAY_SIDE * ARRAY_SIDE; j++) shifted[j] = (uint16_t)(buf[j] + i);
        if ((rc = open_array_in(t, base_url, i, &arrays[i]))) break;
        if ((rc = nds_array_write(arrays[i], &all, shifted, &io))) rc = fail("write", rc);
    }
    double staged = now();
    if (!rc && (rc = nds_txn_commit(t))) rc = fail("transaction commit", rc);
    double secs = now() - t0, commit_secs = now() - staged;
    nds_txn_free(t);
    for (uint64_t i = 0; i < n; i++) nds_array_free(arrays[i]);
    free(arrays);
    if (!rc && (rc = count_objects(base_url, &after))) rc = fail("list", rc);
    if (!rc) rc = check_arrays(base_url, n, buf);
    free(buf);
    if (rc) return rc;
    printf("{\"what\":\"arrays\",\"arrays\":%" PRIu64 ",\"seconds\":%.6f,\"commit_seconds\":%.6f,"
           "\"ms_per_array\":%.4f,",
           n, secs, commit_secs, secs * 1e3 / (double)n);
    print_added(&before, &after);
    printf("}\n");
    fflush(stdout);
    return 0;
}

/* ---- main ------------------------------------------------------------------------------------ */

static int parse_args(int argc, char **argv, bench_args *a) {
    *a = (bench_args){NULL, NULL, 1000000, 100000, 1000, 1000, 1000};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--arrays-base")) {
            if (i + 1 == argc || !argv[i + 1][0]) return 1;
            a->arrays_base = argv[++i];
            continue;
        }
        uint64_t *target = !strcmp(argv[i], "--keys")          ? &a->keys
                           : !strcmp(argv[i], "--batch")       ? &a->batch
                           : !strcmp(argv[i], "--lookups")     ? &a->lookups
                           : !strcmp(argv[i], "--arrays")      ? &a->arrays
                           : !strcmp(argv[i], "--commit-keys") ? &a->commit_keys
                                                               : NULL;
        if (target) {
            char *end;
            if (i + 1 == argc) return 1;
            *target = strtoull(argv[++i], &end, 10);
            if (*end || *target == 0) return 1;
        } else if (argv[i][0] != '-' && !a->dir) {
            a->dir = argv[i];
        } else {
            return 1;
        }
    }
    if (a->arrays_base) return a->dir != NULL || strlen(a->arrays_base) > 3000;
    return a->dir == NULL || a->dir[0] != '/';
}

int main(int argc, char **argv) {
    bench_args a;
    if (parse_args(argc, argv, &a)) return fputs(usage, stderr), 2;
    setenv("NDS_TEST_DRIVERS", "faulty", 0); /* the faulty base counts reads (a test build's library) */
    if (a.arrays_base) { /* then 5 one-key versions: the latency of one commit on that store */
        int rc = measure_arrays(a.arrays_base, a.arrays);
        for (uint64_t i = 0; i < 5 && !rc; i++)
            rc = measure_commit("commit_one", a.arrays_base, i, 1, SMALL_VALUE, 0);
        return rc ? 1 : 0;
    }
    if (strlen(a.dir) > 900) return fputs("nds_versioned_bench: DIR too long\n", stderr), 2;
    char commit_url[1024], big_url[1024], arrays_url[1024];
    snprintf(commit_url, sizeof commit_url, "file://%s/commit/", a.dir);
    snprintf(big_url, sizeof big_url, "file://%s/big/", a.dir);
    snprintf(arrays_url, sizeof arrays_url, "file://%s/arrays/", a.dir);
    mkdir(a.dir, 0777);
    if (measure_commit("commit", commit_url, 0, a.commit_keys, COMMIT_VALUE, 0)) return 1;
    if (measure_staging(commit_url, a.commit_keys) ||
        measure_staging(commit_url, a.commit_keys * 10))
        return 1;
    if (build_store(big_url, a.keys, a.batch)) return 1;
    if (measure_lookups(big_url, a.keys, a.lookups)) return 1;
    if (measure_commit("commit_one", big_url, a.keys, 1, SMALL_VALUE, a.keys)) return 1;
    if (measure_arrays(arrays_url, a.arrays)) return 1;
    return 0;
}
