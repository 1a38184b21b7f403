/* Helpers shared by the format suites (support_format.h). */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support_format.h"
#include "support_npy.h"
#include "ndstore/sys/kv_driver.h"

extern const nds_kv_driver nds_kv_driver_memory;

int open_spec(nds_array **a, const char *fmt, ...) {
    static char spec[16384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(spec, sizeof spec, fmt, ap);
    va_end(ap);
    *a = NULL;
    return nds_array_open(a, spec, NULL);
}

nds_array *zarr2_in_memory(const char *path, const char *members) {
    nds_array *a;
    NDS_OK(open_spec(&a,
                     "{\"driver\":\"zarr\",\"kvstore\":\"memory://%s/\",\"metadata\":{%s},"
                     "\"create\":true}",
                     path, members));
    return a;
}

const char *zarr3_array_doc(const char *shape, const char *dtype, const char *chunks,
                             const char *fill, const char *codecs) {
    static char doc[8192];
    snprintf(
        doc, sizeof doc,
        "{\"zarr_format\":3,\"node_type\":\"array\",\"shape\":%s,\"data_type\":\"%s\","
        "\"chunk_grid\":{\"name\":\"regular\",\"configuration\":{\"chunk_shape\":%s}},"
        "\"chunk_key_encoding\":{\"name\":\"default\",\"configuration\":{\"separator\":\"/\"}},"
        "\"fill_value\":%s,\"codecs\":%s}",
        shape, dtype, chunks, fill, codecs);
    return doc;
}

/* nds_array_open creating a zarr v3 array at memory://<path>/ from doc. */
static int zarr3_create(nds_array **a, const char *path, const char *doc) {
    return open_spec(a,
                     "{\"driver\":\"zarr3\",\"kvstore\":\"memory://%s/\",\"metadata\":%s,"
                     "\"create\":true}",
                     path, doc);
}

nds_array *zarr3_in_memory(const char *path, const char *doc) {
    nds_array *a;
    NDS_OK(zarr3_create(&a, path, doc));
    return a;
}

int zarr3_create_status(const char *path, const char *doc) {
    nds_array *a = NULL;
    int rc = zarr3_create(&a, path, doc);
    if (rc == 0) nds_array_free(a);
    return rc;
}

void put_raw(const char *url, const char *key, const void *data, size_t len) {
    nds_kvstore *kv;
    NDS_OK(nds_kvstore_open(&kv, url, NULL));
    NDS_OK(nds_kvstore_write(kv, key, data, len, NULL, NULL));
    nds_kvstore_free(kv);
}

void put_text(const char *url, const char *key, const char *text) { put_raw(url, key, text, strlen(text)); }

void *get_raw(const char *url, const char *key, size_t *len) {
    nds_kvstore *kv;
    nds_read_result r;
    NDS_OK(nds_kvstore_open(&kv, url, NULL));
    NDS_OK(nds_kvstore_read(kv, key, NULL, &r));
    char *out = NULL;
    if (r.state == NDS_READ_VALUE) {
        out = malloc(r.value.len + 1);
        ck_assert_ptr_nonnull(out);
        memcpy(out, r.value.data, r.value.len);
        out[r.value.len] = 0;
        if (len) *len = r.value.len;
    }
    nds_read_result_dispose(&r);
    nds_kvstore_free(kv);
    return out;
}

json_object *get_json(const char *url, const char *key) {
    char *text = get_raw(url, key, NULL);
    ck_assert_msg(text != NULL, "%s%s missing", url, key);
    json_object *o = json_tokener_parse(text);
    ck_assert_msg(o != NULL, "%s%s is not json: %s", url, key, text);
    free(text);
    return o;
}

const char *member_str(json_object *o, const char *key) {
    json_object *v = NULL;
    if (!json_object_object_get_ex(o, key, &v)) return "absent";
    return json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

/* The whole of a's current shape as a box. */
static void whole_box(nds_array *a, nds_box *box) {
    uint64_t shape[NDS_MAX_RANK];
    nds_array_shape(a, shape);
    nds_box_full(box, nds_array_rank(a), shape);
}

void read_all(nds_array *a, void *out) {
    nds_box box;
    whole_box(a, &box);
    NDS_OK(nds_array_read(a, &box, out, NULL));
}

void write_all(nds_array *a, const void *in) {
    nds_box box;
    whole_box(a, &box);
    NDS_OK(nds_array_write(a, &box, in, NULL));
}

void assert_attributes(nds_array *a, const char *want) {
    char *text;
    NDS_OK(nds_array_get_attributes(a, &text));
    json_object *got_j = json_tokener_parse(text), *want_j = json_tokener_parse(want);
    ck_assert_msg(json_object_equal(got_j, want_j), "attributes %s, want %s", text, want);
    json_object_put(got_j);
    json_object_put(want_j);
    nds_free(text);
}

void nds_test_fixtures_dir(char *buf, size_t cap) {
    const char *env = getenv("NDS_FIXTURES");
    char root[1024];
    snprintf(root, sizeof root, "%s", __FILE__);
    char *p = strstr(root, "tests/unit/support_format.c");
    if (p == root)
        snprintf(root, sizeof root, ".");
    else if (p)
        p[-1] = 0;
    if (env && env[0] == '/')
        snprintf(buf, cap, "%s", env);
    else if (snprintf(buf, cap, "%s/%s", root, env && env[0] ? env : "tests/fixtures") >=
             (int)cap)
        buf[0] = '\0'; /* too long: the fixture test then fails to open it, visibly */
}

nds_array *open_expect_npy(const char *url, const char *npy, const char *name) {
    char why[512];
    nds_test_npy want;
    ck_assert_msg(nds_test_npy_load(npy, &want, why, sizeof why) == 0, "%s (set NDS_FIXTURES)",
                  why);
    nds_array *a;
    int rc = nds_array_open(&a, url, NULL);
    ck_assert_msg(rc == 0, "%s: %s", name, nds_error_last()->message);
    ck_assert_uint_eq(nds_array_rank(a), want.rank);
    uint64_t shape[NDS_MAX_RANK];
    nds_array_shape(a, shape);
    for (size_t d = 0; d < want.rank; d++) ck_assert_uint_eq(shape[d], want.shape[d]);
    ck_assert_uint_eq(nds_array_dtype_size(a), want.itemsize);
    uint8_t *got = malloc(want.count * want.itemsize + 1);
    read_all(a, got);
    ck_assert_msg(memcmp(got, want.data, want.count * want.itemsize) == 0, "%s: values differ",
                  name);
    free(got);
    nds_test_npy_free(&want);
    return a;
}

void assert_random_boxes_u16(nds_array *a, const uint16_t *v, const uint64_t *shape, int n,
                             const char *name) {
    uint16_t *out = malloc(sizeof(uint16_t) * shape[0] * shape[1] * shape[2]);
    ck_assert_ptr_nonnull(out);
    for (int k = 0; k < n; k++) {
        nds_box box = {.rank = 3};
        for (int d = 0; d < 3; d++) {
            uint64_t a0 = (uint64_t)rand() % shape[d], a1 = (uint64_t)rand() % shape[d];
            box.start[d] = a0 < a1 ? a0 : a1;
            box.stop[d] = (a0 < a1 ? a1 : a0) + 1;
            box.step[d] = 1 + (uint64_t)(rand() % 3 == 0) * (uint64_t)(rand() % 4);
        }
        NDS_OK(nds_array_read(a, &box, out, NULL));
        size_t i = 0;
        for (uint64_t x = box.start[0]; x < box.stop[0]; x += box.step[0])
            for (uint64_t y = box.start[1]; y < box.stop[1]; y += box.step[1])
                for (uint64_t z = box.start[2]; z < box.stop[2]; z += box.step[2], i++)
                    if (out[i] != v[(x * shape[1] + y) * shape[2] + z]) /* ck_assert per element
                                                                          * costs a write(2) */
                        ck_abort_msg("%s: [%llu,%llu,%llu]", name, (unsigned long long)x,
                                     (unsigned long long)y, (unsigned long long)z);
    }
    free(out);
}

void set_box_u16(uint16_t *v, const uint64_t *shape, const uint64_t *lo, const uint64_t *hi,
                 uint16_t value) {
    for (uint64_t x = lo[0]; x < hi[0] && x < shape[0]; x++)
        for (uint64_t y = lo[1]; y < hi[1] && y < shape[1]; y++)
            for (uint64_t z = lo[2]; z < hi[2] && z < shape[2]; z++)
                v[(x * shape[1] + y) * shape[2] + z] = value;
}

/* ---- the racy kvstore: every method forwards to the memory driver ---- */

const char *race_doc;
int race_bumps;
int race_writes;
static const char *race_suffix = "";

static bool race_key(const char *key) {
    size_t n = strlen(key), k = strlen(race_suffix);
    return n >= k && strcmp(key + n - k, race_suffix) == 0;
}

/* The competitor, right before our write of a race_suffix key. */
static void race_compete(void *s, const char *key, const nds_write_options *o) {
    if (o->if_equal.kind == NDS_GEN_ABSENT && race_doc) {
        const char *doc = race_doc;
        race_doc = NULL;
        struct iovec one = {(void *)doc, strlen(doc)};
        NDS_OK(nds_kv_driver_memory.write(s, key, &one, 1, NULL, NULL));
    } else if (o->if_equal.kind == NDS_GEN_VALUE && race_bumps > 0) {
        race_bumps--;
        nds_read_result r;
        NDS_OK(nds_kv_driver_memory.read(s, key, NULL, NULL, 0, &r));
        struct iovec same = {(void *)r.value.data, r.value.len};
        NDS_OK(nds_kv_driver_memory.write(s, key, &same, 1, NULL, NULL));
        nds_read_result_dispose(&r);
    }
}

static int racy_write(void *s, const char *key, const struct iovec *iov, size_t iovcnt,
                      const nds_write_options *o, nds_generation *gen) {
    if (!race_key(key))
        __atomic_add_fetch(&race_writes, 1, __ATOMIC_SEQ_CST);
    else if (iov && o)
        race_compete(s, key, o);
    return nds_kv_driver_memory.write(s, key, iov, iovcnt, o, gen);
}

static int racy_parse_url(const char *rest, json_object *spec) {
    return nds_kv_driver_memory.parse_url(rest, spec);
}
static int racy_open(void **state, const json_object *spec) {
    return nds_kv_driver_memory.open(state, spec);
}
static void racy_close(void *state) { nds_kv_driver_memory.close(state); }
static void racy_url_base(void *state, char *buf, size_t cap) {
    (void)state, snprintf(buf, cap, "racy://");
}
static int racy_read(void *s, const char *key, const nds_read_options *o,
                     const nds_byte_range *ranges, size_t n, nds_read_result *out) {
    return nds_kv_driver_memory.read(s, key, o, ranges, n, out);
}
static int racy_list(void *s, const char *prefix, nds_list_fn fn, void *ctx) {
    return nds_kv_driver_memory.list(s, prefix, fn, ctx);
}

/* Two-phase writes: a staged value is a copy held until publish, which first lets a competitor
 * (race_before_publish, one shot) act, then applies each value as a conditional write. */
struct nds_kv_staged {
    char *key;
    uint8_t *data;
    size_t len;
};

void (*race_before_publish)(void);

static int racy_stage(void *s, const char *key, const uint8_t *data, size_t len,
                      nds_kv_staged **out) {
    (void)s;
    nds_kv_staged *st = calloc(1, sizeof *st);
    ck_assert_ptr_nonnull(st);
    st->key = strdup(key);
    st->data = malloc(len ? len : 1);
    ck_assert(st->key && st->data);
    memcpy(st->data, data, len);
    st->len = len;
    *out = st;
    return 0;
}

static void racy_discard(void *s, nds_kv_staged *st) {
    (void)s;
    free(st->key);
    free(st->data);
    free(st);
}

static int racy_publish(void *s, nds_kv_staged **st, nds_kv_publish *res, size_t n) {
    void (*compete)(void) = race_before_publish;
    race_before_publish = NULL;
    if (compete) compete();
    for (size_t i = 0; i < n; i++) {
        nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
        wo.if_equal = res[i].if_equal;
        struct iovec value = {st[i]->data, st[i]->len};
        res[i].status = racy_write(s, st[i]->key, &value, 1, &wo, &res[i].new_generation);
        ck_assert(res[i].status == 0 || res[i].status == NDS_ECONFLICT);
        racy_discard(s, st[i]);
    }
    return 0;
}

static const nds_kv_driver racy_driver = {
    .version = NDS_KV_DRIVER_VERSION,
    .name = "racy",
    .url_scheme = "racy",
    .capabilities = NDS_KV_CAP_ATOMIC_CONDITIONAL_WRITE | NDS_KV_CAP_BYTE_RANGE,
    .parse_url = racy_parse_url,
    .open = racy_open,
    .close = racy_close,
    .url_base = racy_url_base,
    .read = racy_read,
    .write = racy_write,
    .list = racy_list,
    .stage = racy_stage,
    .publish = racy_publish,
    .discard = racy_discard,
};

void racy_register(const char *suffix) {
    NDS_OK(nds_kv_driver_register(&racy_driver)); /* registering again replaces it by itself */
    race_suffix = suffix;
    race_doc = NULL;
    race_bumps = 0;
    race_writes = 0;
    race_before_publish = NULL;
}

void write_twos_to_second_half(nds_array *a) {
    uint16_t twos[4] = {2, 2, 2, 2};
    nds_box box;
    uint64_t shape[1] = {8};
    NDS_OK(nds_box_parse(&box, "[4:8]", 1, shape));
    NDS_OK(nds_array_write(a, &box, twos, NULL));
}
