/* kvstore drivers: the contract suite on memory and file, then what only one driver promises: file
 * durability (no temp or lock files left, values never torn by SIGKILL), lock files of dead
 * processes stolen, multi-process conditional writes, and the memory driver's all-or-nothing
 * commit. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "ndstore/sys/kv_driver.h"
#include "support_check.h"
#include "support_kv_conformance.h"
#include "../../drivers/file_lock.h"
#include "../../drivers/file_sync.h"
#include "internal/kvstore_internal.h"

extern const nds_kv_driver nds_kv_driver_memory;
extern const nds_kv_driver nds_kv_driver_file;

/* Lock mechanisms selectable through NDS_FILE_LOCK, indexed by loop tests. */
static const char *const lock_modes[] = {"dir", "ofd", "flock", "excl"};

/* ---- stores ---- */

static char *g_dirs[256];
static int g_dir_count;
static char *g_urls[256]; /* URLs handed out, valid until exit */
static int g_url_count;

static void remove_dirs(void) {
    for (int i = 0; i < g_dir_count; i++) {
        nds_test_rmtree(g_dirs[i]);
        free(g_dirs[i]);
    }
    for (int i = 0; i < g_url_count; i++)
        free(g_urls[i]);
    g_dir_count = g_url_count = 0;
}

/* A new temporary directory, removed when the (forked) test process exits. */
static const char *temp_dir(void) {
    if (g_dir_count == 0 && g_url_count == 0)
        atexit(remove_dirs);
    ck_assert_int_lt(g_dir_count, 256);
    char *d = nds_test_tmpdir();
    ck_assert_ptr_nonnull(d);
    g_dirs[g_dir_count++] = d;
    return d;
}

/* Keeps url until exit and returns it. */
static const char *keep_url(char *url) {
    if (g_dir_count == 0 && g_url_count == 0)
        atexit(remove_dirs);
    ck_assert_int_lt(g_url_count, 256);
    g_urls[g_url_count++] = url;
    return url;
}

static const char *memory_url(void) {
    static int n;
    char *url = NULL;
    ck_assert_int_ge(asprintf(&url, "memory://conformance-%d/", ++n), 0);
    return keep_url(url);
}

static const char *file_url(void) {
    const char *dir = temp_dir();
    char *url = NULL;
    ck_assert_int_ge(asprintf(&url, "file://%s/", dir), 0);
    return keep_url(url);
}

static nds_kvstore *open_store(const char *url) {
    nds_kvstore *kv = NULL;
    NDS_OK(nds_kvstore_open(&kv, url, NULL));
    return kv;
}

static char *path_in(const char *dir, const char *name) {
    char *p = NULL;
    ck_assert_int_ge(asprintf(&p, "%s/%s", dir, name), 0);
    return p;
}

static void write_file(const char *path, const char *text) {
    nds_test_write_file(path, text, strlen(text));
}

static bool exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

/* ---- file: no temp or lock files ---- */

static int g_reserved_found;

static int find_reserved(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag;
    const char *name = path + ftw->base;
    if (strstr(name, ".__tmp.") || strstr(name, ".__lock"))
        g_reserved_found++;
    return 0;
}

/* Grouped directory fsyncs: every caller gets a sync that started after its call, concurrent
 * callers share fsyncs, failures reach every caller they cover. */
typedef struct sync_worker {
    const char *dir;
    int failures;
} sync_worker;

static void *sync_many(void *arg) {
    sync_worker *w = arg;
    int fd = open(w->dir, O_RDONLY | O_DIRECTORY); /* each caller has its own descriptor */
    for (int i = 0; i < 200; i++)
        if (nds_file_sync_dir(w->dir, fd) != 0) w->failures++;
    close(fd);
    return NULL;
}

START_TEST(file_dir_syncs_are_grouped) {
    const char *dir = temp_dir();
    uint64_t calls0, fsyncs0, calls1, fsyncs1;
    nds_file_sync_counts(&calls0, &fsyncs0);
    pthread_t th[8];
    sync_worker w[8];
    for (int i = 0; i < 8; i++) {
        w[i] = (sync_worker){dir, 0};
        ck_assert_int_eq(pthread_create(&th[i], NULL, sync_many, &w[i]), 0);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(w[i].failures, 0);
    }
    nds_file_sync_counts(&calls1, &fsyncs1);
    ck_assert_uint_eq(calls1 - calls0, 1600);
    ck_assert_uint_ge(fsyncs1 - fsyncs0, 1);
    ck_assert_uint_le(fsyncs1 - fsyncs0, 1600);
    /* A lone caller always runs its own fsync: nothing started after its call is running. */
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    ck_assert_int_eq(nds_file_sync_dir(dir, fd), 0);
    close(fd);
    nds_file_sync_counts(&calls0, &fsyncs0);
    ck_assert_uint_eq(fsyncs0 - fsyncs1, 1);
}
END_TEST

START_TEST(file_leaves_no_temp_or_lock_files) {
    const char *dir = temp_dir();
    char *url = NULL;
    ck_assert_int_ge(asprintf(&url, "file://%s/", dir), 0);
    nds_kvstore *kv = open_store(url);
    for (int i = 0; i < 20; i++) {
        char key[32];
        snprintf(key, sizeof key, i % 2 ? "k%d" : "n/s/k%d", i);
        nds_generation g1 = nds_kv_test_put(kv, key, "one");
        nds_kv_test_put(kv, key, "two");
        nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
        wo.if_equal = g1; /* stale: the conflict path must clean up too */
        ck_assert_int_eq(nds_kvstore_write(kv, key, "three", 5, &wo, NULL), NDS_ECONFLICT);
        ck_assert_int_eq(nds_kvstore_delete(kv, key, &wo), NDS_ECONFLICT);
        if (i % 3 == 0)
            NDS_OK(nds_kvstore_delete(kv, key, NULL));
    }
    NDS_OK(nds_kvstore_delete_range(kv, "n/s/k1", "n/s/k9"));
    g_reserved_found = 0;
    ck_assert_int_eq(nftw(dir, find_reserved, 16, FTW_PHYS), 0);
    ck_assert_int_eq(g_reserved_found, 0);
    free(url);
    nds_kvstore_free(kv);
}
END_TEST

START_TEST(file_hides_and_refuses_reserved_names) {
    const char *dir = temp_dir();
    char *url = NULL, *p;
    ck_assert_int_ge(asprintf(&url, "file://%s/", dir), 0);
    nds_kvstore *kv = open_store(url);
    nds_kv_test_put(kv, "x", "x");
    nds_kv_test_put(kv, "n/y", "y");
    write_file(p = path_in(dir, "x.__lock"), ""), free(p);
    write_file(p = path_in(dir, "y.__tmp.1.2"), "partial"), free(p);
    write_file(p = path_in(dir, "n/z.__tmp.9.ff"), "partial"), free(p);
    char *all = nds_kv_test_list(kv, "");
    ck_assert_str_eq(all, "n/y=1,x=1");
    free(all);
    ck_assert_int_eq(nds_kvstore_write(kv, "bad.__lock", "v", 1, NULL, NULL), NDS_EINVAL);
    ck_assert_int_eq(nds_kvstore_write(kv, "a/bad.__tmp.1", "v", 1, NULL, NULL), NDS_EINVAL);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "bad.__tmp.1"));
    nds_read_result r;
    ck_assert_int_eq(nds_kvstore_read(kv, "x.__lock", NULL, &r), NDS_EINVAL);
    ck_assert_int_eq(nds_kvstore_write(kv, "dir/", "v", 1, NULL, NULL), NDS_EINVAL);
    free(url);
    nds_kvstore_free(kv);
}
END_TEST

/* Sets a file's modification time ago_s seconds in the past. */
static void age_file(const char *path, int ago_s) {
    struct timespec t[2];
    clock_gettime(CLOCK_REALTIME, &t[0]);
    t[0].tv_sec -= ago_s;
    t[1] = t[0];
    ck_assert_int_eq(utimensat(AT_FDCWD, path, t, 0), 0);
}

/* Read-only calls never unlink anything: list leaves every temp-like file alone. delete_range (a
 * write) removes abandoned temp files in ndstore's exact naming only, never a user's look-alike. */
START_TEST(file_only_delete_range_reaps_temp_files_of_dead_writers) {
    const char *dir = temp_dir();
    char *url = NULL, *dead_old, *dead_new, *live_old, *ancient, *lookalike;
    ck_assert_int_ge(asprintf(&url, "file://%s/", dir), 0);
    nds_kvstore *kv = open_store(url);
    nds_kv_test_put(kv, "k", "v");
    pid_t child = fork(); /* a pid that surely no longer exists once reaped */
    if (child == 0) _exit(0);
    waitpid(child, NULL, 0);
    char name[64];
    snprintf(name, sizeof name, "k.__tmp.%d.0123456789abcdef", (int)child);
    write_file(dead_old = path_in(dir, name), "partial");
    age_file(dead_old, 120);
    snprintf(name, sizeof name, "k.__tmp.%d.00000000000000ff", (int)child);
    write_file(dead_new = path_in(dir, name), "partial"); /* too recent to judge */
    snprintf(name, sizeof name, "k.__tmp.%d.1111111111111111", (int)getpid());
    write_file(live_old = path_in(dir, name), "partial"); /* a live writer's */
    age_file(live_old, 120);
    snprintf(name, sizeof name, "k.__tmp.%d.2222222222222222", (int)getpid());
    write_file(ancient = path_in(dir, name), "partial");
    age_file(ancient, 7200);
    write_file(lookalike = path_in(dir, "notes.__tmp.1.txt"), "the user's");
    age_file(lookalike, 7200);
    char *all = nds_kv_test_list(kv, "");
    ck_assert_str_eq(all, "k=1");
    free(all);
    ck_assert(exists(dead_old) && exists(dead_new) && exists(live_old) && exists(ancient));
    ck_assert(exists(lookalike));
    NDS_OK(nds_kvstore_delete_range(kv, "", ""));
    ck_assert(!exists(dead_old));
    ck_assert(exists(dead_new));
    ck_assert(exists(live_old));
    ck_assert(!exists(ancient));
    ck_assert(exists(lookalike));
    free(dead_old), free(dead_new), free(live_old), free(ancient), free(lookalike), free(url);
    nds_kvstore_free(kv);
}
END_TEST

/* ---- file: nothing outside the store's root is ever touched ---- */

static const char *const resolve_modes[] = {"auto", "walk"};

/* Asserts that rc is the refusal of a symbolic link, naming it. */
static void assert_link_refused(int rc, const char *link_name) {
    ck_assert_int_eq(rc, NDS_EUNSUPPORTED);
    ck_assert_msg(strstr(nds_error_last()->message, "symbolic link") &&
                      strstr(nds_error_last()->message, link_name),
                  "message: %s", nds_error_last()->message);
}

/* Links below the root are followed by nothing: reads, writes and deletes through one fail naming
 * it, list does not report what lies behind it, and delete_range leaves it (and its target) be.
 * Links that stay inside the store are refused alike. Both resolvers (openat2, checked walk). */
START_TEST(file_links_below_the_root_are_refused) {
    setenv("NDS_FILE_RESOLVE", resolve_modes[_i], 1);
    const char *dir = temp_dir(), *outside = temp_dir();
    char *url = NULL, *p, *q;
    ck_assert_int_ge(asprintf(&url, "file://%s/", dir), 0);
    write_file(p = path_in(outside, "0"), "precious"), free(p);
    nds_kvstore *kv = open_store(url);
    nds_kv_test_put(kv, "k", "v");
    nds_kv_test_put(kv, "real/x", "x");
    ck_assert_int_eq(symlink(outside, p = path_in(dir, "c")), 0);
    free(p);
    ck_assert_int_eq(symlink("real", p = path_in(dir, "in")), 0);
    free(p);
    ck_assert_int_eq(symlink(q = path_in(outside, "0"), p = path_in(dir, "f")), 0);
    free(p);
    nds_read_result r;
    assert_link_refused(nds_kvstore_read(kv, "c/0", NULL, &r), "/c");
    assert_link_refused(nds_kvstore_write(kv, "c/1", "new", 3, NULL, NULL), "/c");
    assert_link_refused(nds_kvstore_write(kv, "c/d/1", "new", 3, NULL, NULL), "/c");
    assert_link_refused(nds_kvstore_delete(kv, "c/0", NULL), "/c");
    assert_link_refused(nds_kvstore_read(kv, "f", NULL, &r), "/f");
    assert_link_refused(nds_kvstore_write(kv, "f", "new", 3, NULL, NULL), "/f");
    assert_link_refused(nds_kvstore_delete(kv, "f", NULL), "/f");
    assert_link_refused(nds_kvstore_read(kv, "in/x", NULL, &r), "/in");
    nds_kv_staged *st = NULL;
    assert_link_refused(nds_kvstore_stage(kv, "c/2", "new", 3, &st), "/c");
    ck_assert_int_eq(nds_kvstore_read(kv, "real/../../x", NULL, &r), NDS_EINVAL);
    char *all = nds_kv_test_list(kv, "");
    ck_assert_str_eq(all, "k=1,real/x=1"); /* what read and write can reach, and no more */
    free(all);
    NDS_OK(nds_kvstore_delete_range(kv, "", ""));
    all = nds_kv_test_list(kv, "");
    ck_assert_str_eq(all, "");
    free(all);
    char *v = NULL;
    size_t n = 0;
    FILE *f = fopen(q, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_gt(getline(&v, &n, f), 0);
    fclose(f);
    ck_assert_str_eq(v, "precious"); /* neither written, nor unlinked */
    free(v);
    DIR *d = opendir(outside);
    int entries = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        entries += e->d_name[0] != '.';
    closedir(d);
    ck_assert_int_eq(entries, 1); /* no value, temp or lock file was made outside */
    ck_assert(exists(p = path_in(dir, "c"))); /* delete_range left the links */
    free(p);
    ck_assert(exists(dir)); /* and the root itself */
    free(q);
    free(url);
    nds_kvstore_free(kv);
}
END_TEST

/* The root itself may be a symbolic link (resolved once, when first used); a root removed and made
 * again by someone else is found again, not read as an empty store. */
START_TEST(file_root_may_be_a_link_and_may_be_replaced) {
    setenv("NDS_FILE_RESOLVE", resolve_modes[_i], 1);
    const char *real = temp_dir(), *links = temp_dir();
    char *link = path_in(links, "store"), *url = NULL, *p;
    ck_assert_int_eq(symlink(real, link), 0);
    ck_assert_int_ge(asprintf(&url, "file://%s/", link), 0);
    nds_kvstore *kv = open_store(url);
    nds_kv_test_put(kv, "a/b", "1");
    ck_assert(exists(p = path_in(real, "a/b")));
    free(p);
    char *all = nds_kv_test_list(kv, "");
    ck_assert_str_eq(all, "a/b=1");
    free(all);
    nds_test_rmtree(real);
    ck_assert_int_eq(mkdir(real, 0777), 0);
    write_file(p = path_in(real, "new"), "made elsewhere"), free(p);
    char *v = nds_kv_test_get(kv, "new", NULL);
    ck_assert_str_eq(v, "made elsewhere");
    free(v);
    nds_kv_test_put(kv, "c/d", "2");
    ck_assert(exists(p = path_in(real, "c/d")));
    free(p);
    free(link);
    free(url);
    nds_kvstore_free(kv);
}
END_TEST

/* ---- file: generations, directories, URLs ---- */

START_TEST(file_generation_is_stat_identity) {
    const char *dir = temp_dir();
    char *url = NULL;
    ck_assert_int_ge(asprintf(&url, "file://%s/", dir), 0);
    nds_kvstore *kv = open_store(url);
    nds_generation g = nds_kv_test_put(kv, "g", "12345");
    char *p = path_in(dir, "g");
    struct stat st;
    ck_assert_int_eq(stat(p, &st), 0);
    char expected[NDS_GENERATION_MAX];
    snprintf(expected, sizeof expected, "%llx.%llx.%llx.%llx", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino,
             (unsigned long long)st.st_mtim.tv_sec * 1000000000ull +
                 (unsigned long long)st.st_mtim.tv_nsec,
             (unsigned long long)st.st_size);
    ck_assert_str_eq(g.value, expected);
    /* A new version's mtime is pushed past the version it replaces, even one stamped in the future.
     * */
    struct timespec future[2] = {{0, UTIME_OMIT}, {time(NULL) + 3600, 5}};
    ck_assert_int_eq(utimensat(AT_FDCWD, p, future, 0), 0);
    nds_kv_test_put(kv, "g", "54321");
    ck_assert_int_eq(stat(p, &st), 0);
    ck_assert(st.st_mtim.tv_sec > future[1].tv_sec ||
              (st.st_mtim.tv_sec == future[1].tv_sec && st.st_mtim.tv_nsec > future[1].tv_nsec));
    free(p);
    free(url);
    nds_kvstore_free(kv);
}
END_TEST

/* read_into: a value's span lands in scattered buffers (more of them than one preadv takes), with
 * read's generation and size; a span past the value is NDS_ERANGE; a missing key touches nothing. */
START_TEST(file_read_into_scatters_a_span) {
    const char *dir = temp_dir();
    char *url = NULL;
    ck_assert_int_ge(asprintf(&url, "file://%s/", dir), 0);
    nds_kvstore *kv = open_store(url);
    ck_assert(nds_kvstore_can_read_into(kv));
    enum { N = 3000, PIECES = 1500 }; /* pieces of 2 bytes: two preadv batches of IOV_MAX */
    uint8_t value[N + 10], out[2 * N];
    for (size_t i = 0; i < sizeof value; i++) value[i] = (uint8_t)(i * 7 + 1);
    nds_generation g;
    NDS_OK(nds_kvstore_write(kv, "v", value, sizeof value, NULL, &g));
    struct iovec iov[PIECES];
    memset(out, 0xEE, sizeof out);
    for (size_t i = 0; i < PIECES; i++) iov[i] = (struct iovec){out + 4 * i, 2}; /* every other pair */
    nds_read_result r;
    NDS_OK(nds_kvstore_read_into(kv, "v", 5, iov, PIECES, &r));
    ck_assert_int_eq(r.state, NDS_READ_VALUE);
    ck_assert_uint_eq(r.total_size, sizeof value);
    ck_assert(nds_generation_equal(&r.generation, &g));
    ck_assert_uint_eq(r.value.len, 0);
    for (size_t i = 0; i < PIECES; i++) {
        ck_assert_int_eq(out[4 * i], value[5 + 2 * i]);
        ck_assert_int_eq(out[4 * i + 1], value[5 + 2 * i + 1]);
        ck_assert_int_eq(out[4 * i + 2], 0xEE); /* the gaps are untouched */
    }
    ck_assert_int_eq(nds_kvstore_read_into(kv, "v", 20, iov, PIECES, &r), NDS_ERANGE);
    memset(out, 0xEE, sizeof out);
    NDS_OK(nds_kvstore_read_into(kv, "missing", 0, iov, PIECES, &r));
    ck_assert_int_eq(r.state, NDS_READ_MISSING);
    ck_assert_int_eq(out[0], 0xEE);
    free(url);
    nds_kvstore_free(kv);
}
END_TEST

/* read_ranges: ranges anywhere in a value (out of order, overlapping, empty) land in their
 * buffers, with read's generation and size; a range past the value is NDS_ERANGE; a missing key
 * touches nothing. */
START_TEST(file_read_ranges_reads_each_range) {
    const char *dir = temp_dir();
    char *url = NULL;
    ck_assert_int_ge(asprintf(&url, "file://%s/", dir), 0);
    nds_kvstore *kv = open_store(url);
    ck_assert(nds_kvstore_can_read_ranges(kv));
    uint8_t value[5000], out[4][128];
    for (size_t i = 0; i < sizeof value; i++) value[i] = (uint8_t)(i * 13 + 5);
    nds_generation g;
    NDS_OK(nds_kvstore_write(kv, "v", value, sizeof value, NULL, &g));
    memset(out, 0xEE, sizeof out);
    nds_byte_range ranges[4] = {{4900, 100, out[0]}, {0, 10, out[1]}, {5, 20, out[2]},
                                {2500, 0, out[3]}};
    nds_read_result r;
    NDS_OK(nds_kvstore_read_ranges(kv, "v", ranges, 4, &r));
    ck_assert_int_eq(r.state, NDS_READ_VALUE);
    ck_assert_uint_eq(r.total_size, sizeof value);
    ck_assert(nds_generation_equal(&r.generation, &g));
    for (size_t i = 0; i < 4; i++) {
        ck_assert_int_eq(memcmp(out[i], value + ranges[i].offset, ranges[i].len), 0);
        ck_assert_int_eq(out[i][ranges[i].len], 0xEE); /* nothing past the range */
    }
    ranges[3] = (nds_byte_range){4990, 11, out[3]};
    ck_assert_int_eq(nds_kvstore_read_ranges(kv, "v", ranges, 4, &r), NDS_ERANGE);
    memset(out, 0xEE, sizeof out);
    NDS_OK(nds_kvstore_read_ranges(kv, "missing", ranges, 4, &r));
    ck_assert_int_eq(r.state, NDS_READ_MISSING);
    ck_assert_int_eq(out[0][0], 0xEE);
    free(url);
    nds_kvstore_free(kv);
}
END_TEST

START_TEST(file_directories_and_odd_files) {
    const char *dir = temp_dir();
    char *url = NULL, *p;
    ck_assert_int_ge(asprintf(&url, "file://%s/", dir), 0);
    nds_kvstore *kv = open_store(url);
    ck_assert_int_eq(mkdir(p = path_in(dir, "sub"), 0777), 0);
    free(p);
    nds_read_result r;
    NDS_OK(nds_kvstore_read(kv, "sub", NULL, &r)); /* a directory at the key: missing */
    ck_assert_int_eq(r.state, NDS_READ_MISSING);
    ck_assert_int_eq(r.generation.kind, NDS_GEN_ABSENT);
    int rc = nds_kvstore_write(kv, "sub", "v", 1, NULL, NULL);
    ck_assert_int_lt(rc, 0);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "sub"));
    nds_kv_test_put(kv, "f", "file");
    ck_assert_int_lt(nds_kvstore_write(kv, "f/g", "v", 1, NULL, NULL), 0); /* f is a file */
    ck_assert_int_eq(mkfifo(p = path_in(dir, "fifo"), 0666), 0);
    free(p);
    ck_assert_int_eq(nds_kvstore_read(kv, "fifo", NULL, &r), NDS_EIO); /* and no hang */
    free(url);
    nds_kvstore_free(kv);
}
END_TEST

START_TEST(file_delete_range_prunes_empty_dirs) {
    const char *dir = temp_dir();
    char *url = NULL, *p;
    ck_assert_int_ge(asprintf(&url, "file://%s/", dir), 0);
    nds_kvstore *kv = open_store(url);
    nds_kv_test_put(kv, "p/q/r/1", "1");
    nds_kv_test_put(kv, "p/q/s/2", "2");
    nds_kv_test_put(kv, "p/t", "t");
    nds_kv_test_put(kv, "p/u/5/x", "x");
    NDS_OK(nds_kvstore_delete_range(kv, "p/q/", "p/q0"));
    ck_assert(!exists(p = path_in(dir, "p/q")));
    free(p);
    ck_assert(exists(p = path_in(dir, "p")));
    free(p);
    /* A range inside a directory leaves the directory, which may hold keys before the range. */
    NDS_OK(nds_kvstore_delete_range(kv, "p/u/5/", "p/u/5/z"));
    ck_assert(!exists(p = path_in(dir, "p/u/5")));
    free(p);
    ck_assert(exists(p = path_in(dir, "p/u")));
    free(p);
    char *all = nds_kv_test_list(kv, "");
    ck_assert_str_eq(all, "p/t=1");
    free(all);
    nds_kv_test_put(kv, "p/q/r/1", "again"); /* directories come back on demand */
    char *v = nds_kv_test_get(kv, "p/q/r/1", NULL);
    ck_assert_str_eq(v, "again");
    free(v);
    free(url);
    nds_kvstore_free(kv);
}
END_TEST

typedef struct race_job {
    nds_kvstore *kv;
    int errors;
} race_job;

static void *race_writer(void *arg) {
    race_job *j = arg;
    for (int i = 0; i < 300; i++)
        j->errors += nds_kvstore_write(j->kv, "r/x/y/k", "v", 1, NULL, NULL) != 0;
    return NULL;
}

static void *race_deleter(void *arg) {
    race_job *j = arg;
    for (int i = 0; i < 300; i++)
        j->errors += nds_kvstore_delete_range(j->kv, "r/", "r0") != 0;
    return NULL;
}

/* Writes racing with a delete_range that removes their directories all succeed. */
START_TEST(file_write_races_directory_removal) {
    nds_kvstore *kv = open_store(file_url());
    race_job w = {kv, 0}, d = {kv, 0};
    pthread_t tw, td;
    ck_assert_int_eq(pthread_create(&tw, NULL, race_writer, &w), 0);
    ck_assert_int_eq(pthread_create(&td, NULL, race_deleter, &d), 0);
    pthread_join(tw, NULL);
    pthread_join(td, NULL);
    ck_assert_int_eq(w.errors, 0);
    ck_assert_int_eq(d.errors, 0);
    nds_kvstore_free(kv);
}
END_TEST

START_TEST(file_url_forms) {
    const char *dir = temp_dir();
    ck_assert_int_eq(chdir(dir), 0);
    /* A relative URL path is resolved against the working directory when parsed, so the printed URL
     * reopens the same place. */
    nds_kvstore *rel = open_store("file://rel/store/");
    char *want_path = NULL, *want_url = NULL;
    char cwd[4096];
    ck_assert_ptr_nonnull(getcwd(cwd, sizeof cwd));
    ck_assert_int_ge(asprintf(&want_path, "%s/rel/store/", cwd), 0);
    ck_assert_int_ge(asprintf(&want_url, "file://%s/rel/store/", cwd), 0);
    ck_assert_str_eq(nds_kvstore_path(rel), want_path);
    ck_assert_str_eq(nds_kvstore_url(rel), want_url);
    free(want_path);
    free(want_url);
    nds_kv_test_put(rel, "k", "relative");
    ck_assert(exists("rel/store/k"));
    char *bare = NULL, *json = NULL;
    ck_assert_int_ge(asprintf(&bare, "%s/rel/store/", dir), 0);
    ck_assert_int_ge(asprintf(&json, "{\"driver\":\"file\",\"path\":\"%s/rel/store/\"}", dir), 0);
    nds_kvstore *abs = open_store(bare), *spec = open_store(json);
    char *v = nds_kv_test_get(abs, "k", NULL);
    ck_assert_str_eq(v, "relative");
    free(v);
    v = nds_kv_test_get(spec, "k", NULL);
    ck_assert_str_eq(v, "relative");
    free(v);
    free(bare);
    free(json);
    nds_kvstore_free(rel);
    nds_kvstore_free(abs);
    nds_kvstore_free(spec);
}
END_TEST

/* A store whose root does not exist yet makes it for its first key, also when that key is in a
 * subdirectory (a group "sub/.zgroup" in a new store, an adapter's path "sub/" over a new base). */
START_TEST(file_missing_root_is_made_for_a_nested_key) {
    const char *dir = temp_dir();
    char *url = NULL, *path = NULL;
    ck_assert_int_ge(asprintf(&url, "file://%s/new/root/", dir), 0);
    ck_assert_int_ge(asprintf(&path, "%s/new/root/a/b/k", dir), 0);
    nds_kvstore *kv = open_store(url);
    nds_kv_test_put(kv, "a/b/k", "nested");
    ck_assert(exists(path));
    char *v = nds_kv_test_get(kv, "a/b/k", NULL);
    ck_assert_str_eq(v, "nested");
    free(v);
    free(url);
    free(path);
    nds_kvstore_free(kv);
}
END_TEST

START_TEST(file_lock_env_is_checked) {
    setenv("NDS_FILE_LOCK", "bogus", 1);
    nds_kvstore *kv = NULL;
    ck_assert_int_eq(nds_kvstore_open(&kv, file_url(), NULL), NDS_EINVAL);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "NDS_FILE_LOCK"));
    setenv("NDS_FILE_LOCK", "auto", 1);
    NDS_OK(nds_kvstore_open(&kv, file_url(), NULL));
    nds_kvstore_free(kv);
}
END_TEST

/* ---- file: reusable read buffers (file_readbuf.c) ---- */

typedef struct reader_arg {
    nds_kvstore *kv;
    nds_read_result r[2];
} reader_arg;

/* Reads "big" twice without releasing the first: the second cannot share the thread's buffer. */
static void *read_twice_and_exit(void *p) {
    reader_arg *a = p;
    NDS_OK(nds_kvstore_read(a->kv, "big", NULL, &a->r[0]));
    NDS_OK(nds_kvstore_read(a->kv, "big", NULL, &a->r[1]));
    return NULL;
}

static void assert_pattern(const nds_read_result *r, size_t n) {
    ck_assert_uint_eq(r->value.len, n);
    for (size_t i = 0; i < n; i += 4093) ck_assert_uint_eq(r->value.data[i], (uint8_t)(i * 7));
}

/* Values read on a thread stay valid after it exits and may be released by another thread; a value
 * still held keeps the next read of that thread from reusing its buffer. (ASan checks the frees.) */
START_TEST(file_read_buffers_outlive_their_thread) {
    nds_kvstore *kv = open_store(file_url());
    enum { N = 3 << 20 };
    uint8_t *v = malloc(N);
    for (size_t i = 0; i < N; i++) v[i] = (uint8_t)(i * 7);
    NDS_OK(nds_kvstore_write(kv, "big", v, N, NULL, NULL));
    for (int round = 0; round < 3; round++) {
        reader_arg a = {kv, {{0}}};
        pthread_t th;
        ck_assert_int_eq(pthread_create(&th, NULL, read_twice_and_exit, &a), 0);
        ck_assert_int_eq(pthread_join(th, NULL), 0);
        ck_assert_ptr_ne(a.r[0].value.data, a.r[1].value.data);
        assert_pattern(&a.r[0], N);
        assert_pattern(&a.r[1], N);
        nds_read_result_dispose(&a.r[round % 2]); /* the thread's own buffer, released after its exit */
        nds_read_result_dispose(&a.r[1 - round % 2]);
    }
    /* On one thread, a released buffer serves the next read. */
    nds_read_result r1, r2;
    NDS_OK(nds_kvstore_read(kv, "big", NULL, &r1));
    const uint8_t *first = r1.value.data;
    nds_read_result_dispose(&r1);
    NDS_OK(nds_kvstore_read(kv, "big", NULL, &r2));
    ck_assert_ptr_eq(r2.value.data, first);
    assert_pattern(&r2, N);
    nds_read_result_dispose(&r2);
    free(v);
    nds_kvstore_free(kv);
}
END_TEST

/* ---- file: two-phase writes (stage, then publish together) ---- */

static nds_kv_staged *stage_text(nds_kvstore *kv, const char *key, const char *value) {
    nds_kv_staged *st = NULL;
    NDS_OK(nds_kvstore_stage(kv, key, value, strlen(value), &st));
    ck_assert_ptr_nonnull(st);
    return st;
}

START_TEST(file_staged_values_publish_together) {
    const char *url = file_url();
    nds_kvstore *kv = open_store(url);
    ck_assert(nds_kvstore_can_stage(kv));
    nds_generation old = nds_kv_test_put(kv, "a", "old-a");
    nds_generation stale = nds_kv_test_put(kv, "b", "old-b");
    nds_generation cur_b = nds_kv_test_put(kv, "b", "new-b");
    nds_kv_staged *st[4] = {stage_text(kv, "a", "staged-a"), stage_text(kv, "b", "staged-b"),
                            stage_text(kv, "d/e/c", "staged-c"), stage_text(kv, "x", "gone")};
    /* Staged values are invisible: readers see the old values and generations, list no new key. */
    nds_generation g;
    char *v = nds_kv_test_get(kv, "a", &g);
    ck_assert_str_eq(v, "old-a");
    ck_assert(nds_generation_equal(&g, &old));
    free(v);
    char *keys = nds_kv_test_list(kv, "");
    ck_assert_str_eq(keys, "a=5,b=5");
    free(keys);
    nds_kvstore_discard(kv, st[3]);
    nds_kv_publish res[3] = {{.if_equal = old}, {.if_equal = stale}, {.if_equal = {NDS_GEN_ABSENT, ""}}};
    NDS_OK(nds_kvstore_publish(kv, st, res, 3));
    ck_assert_int_eq(res[0].status, 0);
    ck_assert_int_eq(res[1].status, NDS_ECONFLICT); /* b changed since: left as it is */
    ck_assert_int_eq(res[2].status, 0);
    v = nds_kv_test_get(kv, "a", &g);
    ck_assert_str_eq(v, "staged-a");
    ck_assert(nds_generation_equal(&g, &res[0].new_generation));
    free(v);
    v = nds_kv_test_get(kv, "b", &g);
    ck_assert_str_eq(v, "new-b");
    ck_assert(nds_generation_equal(&g, &cur_b));
    free(v);
    v = nds_kv_test_get(kv, "d/e/c", NULL);
    ck_assert_str_eq(v, "staged-c");
    free(v);
    keys = nds_kv_test_list(kv, "");
    ck_assert_str_eq(keys, "a=8,b=5,d/e/c=8");
    free(keys);
    /* Neither the conflict, the discard nor the publish leaves temp or lock files. */
    g_reserved_found = 0;
    ck_assert_int_eq(nftw(url + strlen("file://"), find_reserved, 16, FTW_PHYS), 0);
    ck_assert_int_eq(g_reserved_found, 0);
    nds_kvstore_free(kv);
}
END_TEST

START_TEST(file_stage_refuses_reserved_names) {
    nds_kvstore *kv = open_store(file_url());
    nds_kv_staged *st = NULL;
    ck_assert_int_eq(nds_kvstore_stage(kv, "k.__lock", "x", 1, &st), NDS_EINVAL);
    ck_assert_ptr_null(st);
    nds_kvstore_free(kv);
}
END_TEST

/* ---- file: SIGKILL during writes never tears a value ---- */

/* A self-checking value: seed, length, then a xorshift stream of the seed. */
static uint8_t *crash_value(uint32_t seed, size_t *len) {
    size_t n = 65536 + (size_t)(seed * 7919u) % (900 * 1024);
    uint8_t *v = malloc(n);
    uint32_t n32 = (uint32_t)n;
    memcpy(v, &seed, 4);
    memcpy(v + 4, &n32, 4);
    uint64_t x = (uint64_t)seed * 0x9E3779B97F4A7C15ull | 1;
    for (size_t i = 8; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        v[i] = (uint8_t)x;
    }
    *len = n;
    return v;
}

static bool crash_value_ok(const uint8_t *v, size_t len) {
    if (len < 8)
        return false;
    uint32_t seed;
    memcpy(&seed, v, 4);
    size_t n;
    uint8_t *want = crash_value(seed, &n);
    bool ok = n == len && memcmp(want, v, len) == 0;
    free(want);
    return ok;
}

/* The child of an odd round: stages the three keys and publishes them together, until killed. */
static void crash_publisher(nds_kvstore *kv, uint32_t round) {
    for (uint32_t i = 0;; i += 3) {
        nds_kv_staged *st[3];
        nds_kv_publish res[3];
        for (uint32_t k = 0; k < 3; k++) {
            char key[8];
            snprintf(key, sizeof key, "k%u", k);
            size_t len;
            uint8_t *v = crash_value(round << 20 | (i + k), &len);
            res[k] = (nds_kv_publish){.if_equal = {NDS_GEN_NONE, ""}};
            if (nds_kvstore_stage(kv, key, v, len, &st[k]) != 0)
                _exit(5);
            free(v);
        }
        if (nds_kvstore_publish(kv, st, res, 3) != 0)
            _exit(6);
    }
}

/* The child: writes values (some conditionally) until killed; odd rounds through publish. */
static void crash_writer(const char *url, uint32_t round) {
    nds_kvstore *kv = NULL;
    if (nds_kvstore_open(&kv, url, NULL) != 0)
        _exit(3);
    if (round % 2)
        crash_publisher(kv, round);
    for (uint32_t i = 0;; i++) {
        char key[8];
        snprintf(key, sizeof key, "k%u", i % 3);
        size_t len;
        uint8_t *v = crash_value(round << 20 | i, &len);
        nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
        nds_read_result r;
        if (i % 2 && nds_kvstore_read(kv, key, NULL, &r) == 0) {
            wo.if_equal = r.generation;
            nds_read_result_dispose(&r);
        }
        int rc = nds_kvstore_write(kv, key, v, len, &wo, NULL);
        free(v);
        if (rc != 0 && rc != NDS_ECONFLICT)
            _exit(4);
    }
}

static void check_after_crash(nds_kvstore *kv) {
    for (int k = 0; k < 3; k++) {
        char key[8];
        snprintf(key, sizeof key, "k%d", k);
        nds_read_result r;
        NDS_OK(nds_kvstore_read(kv, key, NULL, &r));
        if (r.state == NDS_READ_MISSING)
            continue;
        ck_assert_msg(crash_value_ok(r.value.data, r.value.len), "%s is torn (%zu bytes)", key,
                      r.value.len);
        /* No lock left by the dead writer may block a new conditional write. */
        nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
        wo.if_equal = r.generation;
        size_t len;
        uint8_t *v = crash_value(0xfffff, &len);
        uint64_t t0 = (uint64_t)time(NULL);
        NDS_OK(nds_kvstore_write(kv, key, v, len, &wo, NULL));
        ck_assert_uint_le((uint64_t)time(NULL) - t0, 5);
        free(v);
        nds_read_result_dispose(&r);
    }
    char *keys = nds_kv_test_list(kv, "");
    for (char *t = strtok(keys, ","); t; t = strtok(NULL, ","))
        ck_assert_msg(t[0] == 'k' && strchr("012", t[1]) && t[2] == '=', "unexpected key %s", t);
    free(keys);
}

START_TEST(file_sigkill_never_tears_values) {
    setenv("NDS_FILE_LOCK", lock_modes[_i], 1);
    const char *url = file_url();
    nds_kvstore *kv = open_store(url);
    srand((unsigned)getpid());
    for (uint32_t round = 1; round <= 6; round++) {
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0)
            crash_writer(url, round);
        usleep(20000 + (useconds_t)(rand() % 100000));
        ck_assert_int_eq(kill(pid, SIGKILL), 0);
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFSIGNALED(status), "writer failed with status %d", status);
        check_after_crash(kv);
    }
    nds_kvstore_free(kv);
}
END_TEST

/* ---- file: O_EXCL lock files of dead or vanished owners are stolen ---- */

static void owner_record(char *buf, size_t cap, int pid, const char *host) {
    char myhost[256] = "", boot[64] = "-";
    gethostname(myhost, sizeof myhost - 1);
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (fgets(boot, sizeof boot, f))
            boot[strcspn(boot, "\n")] = '\0';
        fclose(f);
    }
    snprintf(buf, cap, "pid=%d host=%s boot=%s\n", pid, host ? host : myhost, boot);
}

/* A conditional write that must get through a stale lock file promptly. */
static void write_through(nds_kvstore *kv, const char *lock_path, const char *value) {
    nds_generation g;
    free(nds_kv_test_get(kv, "key", &g));
    nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
    wo.if_equal = g;
    time_t t0 = time(NULL);
    NDS_OK(nds_kvstore_write(kv, "key", value, strlen(value), &wo, NULL));
    ck_assert_int_le(time(NULL) - t0, 5);
    ck_assert(!exists(lock_path));
    char *v = nds_kv_test_get(kv, "key", NULL);
    ck_assert_str_eq(v, value);
    free(v);
}

START_TEST(excl_lock_of_dead_owner_is_stolen) {
    setenv("NDS_FILE_LOCK", "excl", 1);
    const char *dir = temp_dir();
    char *url = NULL, *lock = path_in(dir, "key.__lock"), rec[512];
    ck_assert_int_ge(asprintf(&url, "file://%s/", dir), 0);
    nds_kvstore *kv = open_store(url);
    nds_kv_test_put(kv, "key", "v0");
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    ck_assert_int_eq(waitpid(dead, NULL, 0), dead);
    owner_record(rec, sizeof rec, dead, NULL);
    write_file(lock, rec);
    write_through(kv, lock, "v1");
    /* Unreadable record, but an hour old: expired. */
    write_file(lock, "garbage");
    struct timespec old[2] = {{time(NULL) - 3600, 0}, {time(NULL) - 3600, 0}};
    ck_assert_int_eq(utimensat(AT_FDCWD, lock, old, 0), 0);
    write_through(kv, lock, "v2");
    /* Unreadable record, stamped an hour in the future: no live holder made it, so not "held
     * forever" either. */
    write_file(lock, "garbage");
    struct timespec future[2] = {{time(NULL) + 3600, 0}, {time(NULL) + 3600, 0}};
    ck_assert_int_eq(utimensat(AT_FDCWD, lock, future, 0), 0);
    write_through(kv, lock, "v3");
    free(lock);
    free(url);
    nds_kvstore_free(kv);
}
END_TEST

/* A lock file that cannot be taken (here a live owner's, with the bound shortened) fails the write
 * with NDS_ETIMEOUT naming the lock file, instead of waiting forever; nothing is written. */
START_TEST(excl_lock_wait_is_bounded) {
    setenv("NDS_FILE_LOCK", "excl", 1);
    nds_file_lock_set_limits(NDS_FILE_LOCK_STALE_S, 1);
    const char *dir = temp_dir();
    char *url = NULL, *lock = path_in(dir, "key.__lock"), rec[512];
    ck_assert_int_ge(asprintf(&url, "file://%s/", dir), 0);
    nds_kvstore *kv = open_store(url);
    nds_kv_test_put(kv, "key", "old");
    owner_record(rec, sizeof rec, (int)getpid(), NULL);
    write_file(lock, rec);
    time_t t0 = time(NULL);
    ck_assert_int_eq(nds_kvstore_write(kv, "key", "new", 3, NULL, NULL), NDS_ETIMEOUT);
    ck_assert_int_le(time(NULL) - t0, 5);
    ck_assert_msg(strstr(nds_error_last()->message, lock), "message: %s",
                  nds_error_last()->message);
    char *v = nds_kv_test_get(kv, "key", NULL);
    ck_assert_str_eq(v, "old");
    free(v);
    free(lock);
    free(url);
    nds_kvstore_free(kv);
}
END_TEST

typedef struct blocked_write {
    nds_kvstore *kv;
    atomic_int done;
    int rc;
} blocked_write;

static void *blocked_writer(void *arg) {
    blocked_write *b = arg;
    b->rc = nds_kvstore_write(b->kv, "key", "new", 3, NULL, NULL);
    atomic_store(&b->done, 1);
    return NULL;
}

/* A fresh lock file of a live owner (or of another host) is respected until it goes away. */
START_TEST(excl_lock_of_live_owner_blocks) {
    setenv("NDS_FILE_LOCK", "excl", 1);
    const char *dir = temp_dir();
    char *url = NULL, *lock = path_in(dir, "key.__lock"), rec[512];
    ck_assert_int_ge(asprintf(&url, "file://%s/", dir), 0);
    nds_kvstore *kv = open_store(url);
    for (int other_host = 0; other_host < 2; other_host++) {
        nds_kv_test_put(kv, "key", "old");
        owner_record(rec, sizeof rec, other_host ? 1 : (int)getpid(),
                     other_host ? "elsewhere" : NULL);
        write_file(lock, rec);
        blocked_write b = {kv, 0, -1};
        pthread_t t;
        ck_assert_int_eq(pthread_create(&t, NULL, blocked_writer, &b), 0);
        usleep(300000);
        int finished = atomic_load(&b.done);
        ck_assert_msg(!finished, "the write did not wait for the lock");
        char *v = nds_kv_test_get(kv, "key", NULL);
        ck_assert_str_eq(v, "old");
        free(v);
        ck_assert_int_eq(unlink(lock), 0); /* the owner releases */
        pthread_join(t, NULL);
        ck_assert_int_eq(b.rc, 0);
        v = nds_kv_test_get(kv, "key", NULL);
        ck_assert_str_eq(v, "new");
        free(v);
    }
    free(lock);
    free(url);
    nds_kvstore_free(kv);
}
END_TEST

/* ---- file: processes incrementing one counter lose no update ---- */

/* Child side of the counter test: no Check assertions (they belong to the test process). */
static int child_increments(const char *url, int n) {
    nds_kvstore *kv = NULL;
    if (nds_kvstore_open(&kv, url, NULL) != 0)
        return 2;
    for (int i = 0; i < n;) {
        nds_read_result r;
        if (nds_kvstore_read(kv, "counter", NULL, &r) != 0)
            return 3;
        char text[32] = "0";
        if (r.state == NDS_READ_VALUE && r.value.len < sizeof text) {
            memcpy(text, r.value.data, r.value.len);
            text[r.value.len] = '\0';
        }
        nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
        wo.if_equal = r.generation;
        nds_read_result_dispose(&r);
        snprintf(text, sizeof text, "%ld", strtol(text, NULL, 10) + 1);
        int rc = nds_kvstore_write(kv, "counter", text, strlen(text), &wo, NULL);
        if (rc == 0)
            i++;
        else if (rc != NDS_ECONFLICT)
            return 4;
    }
    nds_kvstore_free(kv);
    return 0;
}

START_TEST(file_multiprocess_counter) {
    enum { PROCS = 4, EACH = 200 };
    setenv("NDS_FILE_LOCK", lock_modes[_i], 1);
    const char *url = file_url();
    pid_t pids[PROCS];
    for (int p = 0; p < PROCS; p++) {
        pids[p] = fork();
        ck_assert_int_ge(pids[p], 0);
        if (pids[p] == 0)
            _exit(child_increments(url, EACH));
    }
    for (int p = 0; p < PROCS; p++) {
        int status;
        ck_assert_int_eq(waitpid(pids[p], &status, 0), pids[p]);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d: status %d", p,
                      status);
    }
    nds_kvstore *kv = open_store(url);
    char *v = nds_kv_test_get(kv, "counter", NULL);
    ck_assert_str_eq(v, "800");
    free(v);
    nds_kvstore_free(kv);
}
END_TEST

/* ---- memory: commit and scale ---- */

typedef struct mem_fixture {
    const nds_kv_driver *d;
    void *state;
} mem_fixture;

static mem_fixture mem_open(void) {
    mem_fixture f = {&nds_kv_driver_memory, NULL};
    json_object *spec = json_object_new_object();
    NDS_OK(f.d->open(&f.state, spec));
    json_object_put(spec);
    return f;
}

/* The value at key through the vtable ("" when missing), and its generation. */
static char *mem_get(mem_fixture *f, const char *key, nds_generation *g) {
    nds_read_options o = NDS_READ_OPTIONS_INIT;
    nds_read_result r;
    NDS_OK(f->d->read(f->state, key, &o, NULL, 0, &r));
    char *s = calloc(1, r.value.len + 1);
    memcpy(s, r.value.data ? (const char *)r.value.data : "", r.value.len);
    if (g)
        *g = r.generation;
    nds_read_result_dispose(&r);
    return s;
}

static nds_kv_op op(const char *key, const char *value, nds_generation if_equal) {
    nds_kv_op o = {
        key, (const uint8_t *)value, value ? strlen(value) : 0, if_equal, {NDS_GEN_NONE, {0}}};
    return o;
}

static void assert_mem(mem_fixture *f, const char *key, const char *expected) {
    char *v = mem_get(f, key, NULL);
    ck_assert_msg(strcmp(v, expected) == 0, "%s: got \"%s\", expected \"%s\"", key, v, expected);
    free(v);
}

START_TEST(memory_commit_all_or_nothing) {
    mem_fixture f = mem_open();
    const nds_generation absent = {NDS_GEN_ABSENT, {0}}, none = {NDS_GEN_NONE, {0}};
    nds_kv_op create[2] = {op("ct/a", "1", absent), op("ct/b", "2", absent)};
    NDS_OK(f.d->commit(f.state, create, 2));
    nds_generation ga, gb;
    free(mem_get(&f, "ct/a", &ga));
    free(mem_get(&f, "ct/b", &gb));
    ck_assert(nds_generation_equal(&create[0].new_generation, &ga));
    ck_assert(nds_generation_equal(&create[1].new_generation, &gb));
    /* One stale condition: nothing is applied, not even the ops before it. */
    nds_kv_op stale[3] = {op("ct/a", "10", ga), op("ct/c", "30", absent), op("ct/b", "20", absent)};
    ck_assert_int_eq(f.d->commit(f.state, stale, 3), NDS_ECONFLICT);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "ct/b"));
    assert_mem(&f, "ct/a", "1");
    assert_mem(&f, "ct/b", "2");
    assert_mem(&f, "ct/c", "");
    nds_generation now;
    free(mem_get(&f, "ct/a", &now));
    ck_assert(nds_generation_equal(&now, &ga));
    /* Deletes, creates and unconditional writes together. */
    nds_kv_op mixed[3] = {op("ct/a", NULL, ga), op("ct/c", "3", absent), op("ct/b", "22", none)};
    NDS_OK(f.d->commit(f.state, mixed, 3));
    ck_assert_int_eq(mixed[0].new_generation.kind, NDS_GEN_ABSENT);
    assert_mem(&f, "ct/a", "");
    assert_mem(&f, "ct/b", "22");
    assert_mem(&f, "ct/c", "3");
    /* A key twice is refused, and nothing applied. */
    nds_kv_op twice[2] = {op("ct/d", "x", none), op("ct/d", "y", none)};
    ck_assert_int_eq(f.d->commit(f.state, twice, 2), NDS_EINVAL);
    assert_mem(&f, "ct/d", "");
    NDS_OK(f.d->commit(f.state, NULL, 0));
    /* The driver's store is the one every memory:// handle sees. */
    nds_kvstore *kv = open_store("memory://ct/");
    char *v = nds_kv_test_get(kv, "c", NULL);
    ck_assert_str_eq(v, "3");
    free(v);
    nds_kvstore_free(kv);
    f.d->close(f.state);
}
END_TEST

static void *transfer_thread(void *arg) {
    mem_fixture *f = arg;
    for (int done = 0; done < 200;) {
        nds_generation ga, gb;
        char *a = mem_get(f, "tr/a", &ga), *b = mem_get(f, "tr/b", &gb);
        char na[32], nb[32];
        snprintf(na, sizeof na, "%ld", strtol(a, NULL, 10) - 1);
        snprintf(nb, sizeof nb, "%ld", strtol(b, NULL, 10) + 1);
        free(a), free(b);
        nds_kv_op ops[2] = {op("tr/a", na, ga), op("tr/b", nb, gb)};
        int rc = f->d->commit(f->state, ops, 2);
        ck_assert(rc == 0 || rc == NDS_ECONFLICT);
        done += rc == 0;
    }
    return NULL;
}

/* Threads moving units from a to b with two-key commits: no unit is lost or duplicated. */
START_TEST(memory_commit_concurrent_transfers) {
    mem_fixture f = mem_open();
    const nds_generation none = {NDS_GEN_NONE, {0}};
    nds_kv_op init[2] = {op("tr/a", "1000", none), op("tr/b", "0", none)};
    NDS_OK(f.d->commit(f.state, init, 2));
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, transfer_thread, &f), 0);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    assert_mem(&f, "tr/a", "200");
    assert_mem(&f, "tr/b", "800");
    f.d->close(f.state);
}
END_TEST

static int count_keys(void *ctx, const char *key, uint64_t size) {
    (void)key, (void)size;
    ++*(size_t *)ctx;
    return 0;
}

/* Prefix listing is an ordered seek, not a scan: 10,000 small listings over 100,000 keys stay fast.
 * */
START_TEST(memory_list_scales) {
    nds_kvstore *kv = open_store("memory://scale/");
    char key[32];
    for (int i = 0; i < 100000; i++) {
        snprintf(key, sizeof key, "%05d/%d", i / 10, i % 10);
        NDS_OK(nds_kvstore_write(kv, key, "v", 1, NULL, NULL));
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 10000; i++) {
        size_t n = 0;
        snprintf(key, sizeof key, "%05d/", i);
        NDS_OK(nds_kvstore_list(kv, key, count_keys, &n));
        ck_assert_uint_eq(n, 10);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    ck_assert_msg(s < 5.0, "10000 listings took %.2f s", s);
    NDS_OK(nds_kvstore_delete_range(kv, "00100/", "09000/"));
    size_t n = 0;
    NDS_OK(nds_kvstore_list(kv, "", count_keys, &n));
    ck_assert_uint_eq(n, 100000 - 89000);
    nds_kvstore_free(kv);
}
END_TEST

/* The driver interface is at version 1: a driver built for another version (the 0.1 tree's 2 to
 * 4 included) is refused with a message naming both versions; a half-given group is refused. */
START_TEST(driver_registration_checks_version) {
    nds_kv_driver d = nds_kv_driver_memory;
    d.name = "memory-copy";
    d.url_scheme = NULL;
    for (uint32_t v = 0; v <= 5; v++) {
        if (v == NDS_KV_DRIVER_VERSION) continue;
        d.version = v;
        ck_assert_int_eq(nds_kv_driver_register(&d), NDS_EINVAL);
        ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "interface version"));
    }
    ck_assert_int_eq(NDS_KV_DRIVER_VERSION, 1);
    d.version = NDS_KV_DRIVER_VERSION;
    d.stage = nds_kv_driver_file.stage; /* without publish and discard */
    ck_assert_int_eq(nds_kv_driver_register(&d), NDS_EINVAL);
    d.stage = NULL;
    static nds_kv_driver copy;
    copy = d;
    NDS_OK(nds_kv_driver_register(&copy));
    nds_kvstore *kv = open_store("{\"driver\":\"memory-copy\",\"path\":\"reg/\"}");
    nds_kv_test_put(kv, "k", "v");
    char *v = nds_kv_test_get(kv, "k", NULL);
    ck_assert_str_eq(v, "v");
    free(v);
    nds_kvstore_free(kv);
}
END_TEST

int main(void) {
    Suite *s = suite_create("kvstore");
    suite_add_tcase(s, nds_kv_conformance_tcase("memory", memory_url));
    suite_add_tcase(s, nds_kv_conformance_tcase("file", file_url));

    TCase *file = tcase_create("file");
    tcase_set_timeout(file, 300);
    tcase_add_test(file, file_leaves_no_temp_or_lock_files);
    tcase_add_test(file, file_staged_values_publish_together);
    tcase_add_test(file, file_read_buffers_outlive_their_thread);
    tcase_add_test(file, file_stage_refuses_reserved_names);
    tcase_add_test(file, file_dir_syncs_are_grouped);
    tcase_add_test(file, file_hides_and_refuses_reserved_names);
    tcase_add_test(file, file_only_delete_range_reaps_temp_files_of_dead_writers);
    tcase_add_loop_test(file, file_links_below_the_root_are_refused, 0, 2);
    tcase_add_loop_test(file, file_root_may_be_a_link_and_may_be_replaced, 0, 2);
    tcase_add_test(file, file_generation_is_stat_identity);
    tcase_add_test(file, file_read_into_scatters_a_span);
    tcase_add_test(file, file_read_ranges_reads_each_range);
    tcase_add_test(file, file_directories_and_odd_files);
    tcase_add_test(file, file_delete_range_prunes_empty_dirs);
    tcase_add_test(file, file_write_races_directory_removal);
    tcase_add_test(file, file_url_forms);
    tcase_add_test(file, file_missing_root_is_made_for_a_nested_key);
    tcase_add_test(file, file_lock_env_is_checked);
    tcase_add_loop_test(file, file_sigkill_never_tears_values, 0, 4);
    tcase_add_test(file, excl_lock_of_dead_owner_is_stolen);
    tcase_add_test(file, excl_lock_of_live_owner_blocks);
    tcase_add_test(file, excl_lock_wait_is_bounded);
    tcase_add_loop_test(file, file_multiprocess_counter, 0, 4);
    suite_add_tcase(s, file);

    TCase *memory = tcase_create("memory");
    tcase_set_timeout(memory, 120);
    tcase_add_test(memory, memory_commit_all_or_nothing);
    tcase_add_test(memory, memory_commit_concurrent_transfers);
    tcase_add_test(memory, memory_list_scales);
    tcase_add_test(memory, driver_registration_checks_version);
    suite_add_tcase(s, memory);
    return nds_test_run(s);
}
