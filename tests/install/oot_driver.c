/* An out-of-tree kvstore driver, as a user would write one: built by tests/install/install_test.sh
 * against the INSTALLED headers (ndstore/sys/kv_driver.h, ndstore/sys/error.h) and library alone,
 * registered with nds_kv_driver_register and used through a spec by a zarr array:
 * {"driver":"zarr","kvstore":{"driver":"oot","path":"a/"},...}.
 *
 * The store: up to OOT_MAX keys in a table under one mutex, each value a malloc'd copy. It
 * implements the interface's required members and both forms of read (the value, zero-copy with a
 * reference; byte ranges copied into the caller's buffers, with nds_byte_ranges_copy), and reports
 * NDS_KV_CAP_READ_INTO so the engine reads whole uncompressed chunks into place with the ranges
 * form. Errors go through the exported nds_err helpers. Prints "OK <version>" when the array reads
 * back what was written and both read forms and the write were used; a missing header or an
 * unexported symbol fails the build or the link instead.
 */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ndstore/ndstore.h>
#include <ndstore/sys/error.h>
#include <ndstore/sys/kv_driver.h>

#define OOT_MAX 64

/* One stored value; a reference count lets a read hand out the bytes without copying them. */
typedef struct oot_value {
    int refs; /* under g.mu */
    size_t len;
    uint8_t *data;
} oot_value;

static struct {
    pthread_mutex_t mu;
    char *keys[OOT_MAX];
    oot_value *values[OOT_MAX];
    uint64_t gens[OOT_MAX]; /* 0: the slot is free */
    uint64_t counter;
    unsigned value_reads, range_reads, writes; /* what the engine called */
} g = {PTHREAD_MUTEX_INITIALIZER, {0}, {0}, {0}, 0, 0, 0, 0};

static void value_unref(oot_value *v) {
    pthread_mutex_lock(&g.mu);
    int last = v && --v->refs == 0;
    pthread_mutex_unlock(&g.mu);
    if (last) {
        free(v->data);
        free(v);
    }
}

static void value_release(void *ctx, const uint8_t *data) {
    (void)data;
    value_unref(ctx);
}

/* The slot of key, or -1 (under g.mu). */
static int find_slot(const char *key) {
    for (int i = 0; i < OOT_MAX; i++)
        if (g.gens[i] && strcmp(g.keys[i], key) == 0) return i;
    return -1;
}

static void gen_of(int slot, nds_generation *gen) {
    if (slot < 0) {
        gen->kind = NDS_GEN_ABSENT;
        gen->value[0] = '\0';
        return;
    }
    char text[24];
    snprintf(text, sizeof text, "%" PRIu64, g.gens[slot]);
    nds_generation_set(gen, text);
}

static int oot_open(void **state, const struct json_object *spec) {
    (void)spec;
    *state = &g;
    return 0;
}

static void oot_close(void *state) { (void)state; }

static void oot_url_base(void *state, char *buf, size_t cap) {
    (void)state;
    snprintf(buf, cap, "oot://");
}

/* The state a read's conditions leave for the generation found. */
static nds_read_state read_state(const nds_read_options *o, const nds_read_result *out, int slot) {
    if (o->if_equal.kind != NDS_GEN_NONE && !nds_generation_equal(&o->if_equal, &out->generation))
        return NDS_READ_ABORTED;
    if (nds_generation_equal(&o->if_not_equal, &out->generation)) return NDS_READ_UNCHANGED;
    return slot < 0 ? NDS_READ_MISSING : NDS_READ_VALUE;
}

/* Both forms look the key up once, under the lock, and take one reference to its value. */
static int oot_read(void *state, const char *key, const nds_read_options *opts,
                    const nds_byte_range *ranges, size_t n, nds_read_result *out) {
    (void)state;
    oot_value *v = NULL;
    pthread_mutex_lock(&g.mu);
    int slot = find_slot(key);
    gen_of(slot, &out->generation);
    out->state = read_state(opts, out, slot);
    if (out->state == NDS_READ_VALUE) {
        v = g.values[slot];
        v->refs++;
        out->total_size = v->len;
    }
    if (n > 0) g.range_reads++;
    else g.value_reads++;
    pthread_mutex_unlock(&g.mu);
    if (!v) return 0;
    if (n > 0) { /* into the caller's buffers */
        int rc = nds_byte_ranges_copy(ranges, n, v->data, v->len, key);
        value_unref(v);
        return rc ? nds_err_prefix(rc, "oot: read") : 0;
    }
    uint64_t off, len;
    if (nds_byte_range_resolve(opts, v->len, &off, &len) != 0) {
        value_unref(v);
        return nds_err_prefix(NDS_ERANGE, "oot: read %s", key);
    }
    out->value = (nds_bytes){v->data + off, (size_t)len, value_release, v};
    return 0;
}

/* Stores (or, iov NULL, deletes) key under the condition; old is the displaced value. */
static int put_locked(const char *key, oot_value *v, const nds_write_options *opts,
                      nds_generation *new_gen, oot_value **old) {
    int slot = find_slot(key);
    nds_generation cur;
    gen_of(slot, &cur);
    if (!nds_generation_satisfies(&opts->if_equal, &cur))
        return nds_err(NDS_ECONFLICT, "oot: write %s: generation changed", key);
    if (slot < 0 && v) {
        for (slot = 0; slot < OOT_MAX && g.gens[slot]; slot++) {}
        if (slot == OOT_MAX) return nds_err(NDS_ELIMIT, "oot: full (%d keys)", OOT_MAX);
        free(g.keys[slot]);
        if (!(g.keys[slot] = strdup(key))) return nds_err(NDS_ENOMEM, "oot: out of memory");
    }
    if (slot >= 0) {
        *old = g.values[slot];
        g.values[slot] = v;
        g.gens[slot] = v ? ++g.counter : 0;
    }
    gen_of(v ? slot : -1, new_gen);
    return 0;
}

/* A value in one buffer (data NULL: a delete), copied into the store. */
static int oot_write_value(void *state, const char *key, const uint8_t *data, size_t len,
                           const nds_write_options *opts, nds_generation *new_gen) {
    (void)state;
    oot_value *v = NULL, *old = NULL;
    if (data) {
        uint8_t *copy = malloc(len ? len : 1);
        v = calloc(1, sizeof *v);
        if (!v || !copy) {
            free(v);
            free(copy);
            return nds_err(NDS_ENOMEM, "oot: out of memory writing %s", key);
        }
        memcpy(copy, data, len);
        *v = (oot_value){1, len, copy};
    }
    pthread_mutex_lock(&g.mu);
    g.writes++;
    int rc = put_locked(key, v, opts, new_gen, &old);
    pthread_mutex_unlock(&g.mu);
    value_unref(rc ? v : old);
    return rc;
}

/* The pieces gathered by the library's exported helper (installed headers only). */
static int oot_write(void *state, const char *key, const struct iovec *iov, size_t iovcnt,
                     const nds_write_options *opts, nds_generation *new_gen) {
    return nds_kv_write_gathered(state, key, iov, iovcnt, opts, new_gen, oot_write_value);
}

static int oot_list(void *state, const char *prefix, nds_list_fn fn, void *ctx) {
    (void)state;
    char *keys[OOT_MAX];
    uint64_t sizes[OOT_MAX];
    size_t n = 0;
    pthread_mutex_lock(&g.mu); /* copied, so fn runs without the lock */
    for (int i = 0; i < OOT_MAX; i++)
        if (g.gens[i] && strncmp(g.keys[i], prefix, strlen(prefix)) == 0 &&
            (keys[n] = strdup(g.keys[i])))
            sizes[n++] = g.values[i]->len;
    pthread_mutex_unlock(&g.mu);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        if (!rc) rc = fn(ctx, keys[i], sizes[i]);
        free(keys[i]);
    }
    return rc;
}

static const nds_kv_driver oot_driver = {
    .version = NDS_KV_DRIVER_VERSION,
    .name = "oot",
    .url_scheme = NULL,
    .capabilities = NDS_KV_CAP_ATOMIC_CONDITIONAL_WRITE | NDS_KV_CAP_BYTE_RANGE |
                    NDS_KV_CAP_LOCAL | NDS_KV_CAP_READ_INTO,
    .open = oot_open,
    .close = oot_close,
    .url_base = oot_url_base,
    .read = oot_read,
    .write = oot_write,
    .list = oot_list,
};

static int fail(const char *what) {
    fprintf(stderr, "oot_driver: %s: %s\n", what, nds_error_last()->message);
    return 1;
}

#define ROWS 64
#define COLS 512 /* rows of 2 KiB: whole raw chunks are read into place (the ranges form) */

int main(void) {
    nds_kv_driver old = oot_driver;
    old.version = 4; /* a driver built for another interface version is refused */
    if (nds_kv_driver_register(&old) != NDS_EINVAL) return fail("version 4 was not refused");
    if (nds_kv_driver_register(&oot_driver) != 0) return fail("register");
    const char *spec = "{\"driver\":\"zarr\",\"kvstore\":{\"driver\":\"oot\",\"path\":\"a/\"},"
                       "\"create\":true,\"metadata\":{\"shape\":[64,512],\"chunks\":[32,512],"
                       "\"dtype\":\"<u4\",\"compressor\":null}}";
    nds_array *a;
    if (nds_array_open(&a, spec, NULL) != 0) return fail("create");
    uint64_t shape[2] = {ROWS, COLS};
    nds_box box;
    if (nds_box_parse(&box, "[0:64, 0:512]", 2, shape) != 0) return fail("region");
    uint32_t *in = malloc(ROWS * COLS * 4), *out = aligned_alloc(64, ROWS * COLS * 4);
    if (!in || !out) return 1;
    for (uint32_t i = 0; i < ROWS * COLS; i++) in[i] = i * 2654435761u;
    if (nds_array_write(a, &box, in, NULL) != 0) return fail("write");
    if (nds_array_read(a, &box, out, NULL) != 0) return fail("read");
    if (memcmp(in, out, ROWS * COLS * 4) != 0) {
        fprintf(stderr, "oot_driver: the array read back differs from what was written\n");
        return 1;
    }
    nds_array_free(a);
    free(in);
    free(out);
    if (!g.value_reads || !g.range_reads || !g.writes) {
        fprintf(stderr, "oot_driver: expected both read forms and writes, got %u value reads, %u "
                "range reads, %u writes\n", g.value_reads, g.range_reads, g.writes);
        return 1;
    }
    printf("OK %s\n", nds_version());
    return 0;
}
