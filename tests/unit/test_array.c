/* The core array engine, independent of any real format: a test-only format ("testfmt") stores raw
 * canonical chunks under "c/i/j..." and its metadata in "meta.json". Checked against a dense in-memory
 * reference over random boxes with steps, concurrent writers, fill handling, resize, stats and verify. */
#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <json-c/json.h>

#include "support_check.h"
#include "ndstore/sys/format.h"
#include "internal/error.h"
#include "internal/json_util.h"
#include "internal/strided.h"
#include "internal/util.h"

/* ---- the test format ---- */

typedef struct tf_state {
    nds_array_meta meta;
    size_t chunk_bytes;
} tf_state;

static int tf_write_meta(nds_kvstore *kv, const nds_array_meta *m, int create) {
    json_object *o = json_object_new_object(), *shape = json_object_new_array(), *chunks = json_object_new_array();
    for (size_t d = 0; d < m->rank; d++) {
        json_object_array_add(shape, json_object_new_uint64(m->shape[d]));
        json_object_array_add(chunks, json_object_new_uint64(m->chunk_shape[d]));
    }
    json_object_object_add(o, "shape", shape);
    json_object_object_add(o, "chunks", chunks);
    json_object_object_add(o, "fill", json_object_new_int(m->fill_value[0]));
    if (m->read_chunk_shape[0]) {
        json_object *rc = json_object_new_array();
        for (size_t d = 0; d < m->rank; d++) json_object_array_add(rc, json_object_new_uint64(m->read_chunk_shape[d]));
        json_object_object_add(o, "read_chunks", rc);
    }
    const char *text = json_object_to_json_string(o);
    nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
    if (create) wo.if_equal.kind = NDS_GEN_ABSENT;
    int rc = nds_kvstore_write(kv, "meta.json", text, strlen(text), &wo, NULL);
    json_object_put(o);
    return rc;
}

static int tf_parse_meta(json_object *o, nds_array_meta *m) {
    size_t n1, n2;
    int64_t fill = 0;
    memset(m, 0, sizeof *m);
    int rc = nds_json_get_u64_array(o, "shape", "meta.json", UINT64_MAX >> 1, m->shape, NDS_MAX_RANK, &n1);
    if (!rc) rc = nds_json_get_u64_array(o, "chunks", "meta.json", 1 << 20, m->chunk_shape, NDS_MAX_RANK, &n2);
    if (!rc) rc = nds_json_get_int(o, "fill", true, 0, 255, "meta.json", &fill);
    json_object *rv;
    if (!rc && json_object_object_get_ex(o, "read_chunks", &rv))
        rc = nds_json_get_u64_array(o, "read_chunks", "meta.json", 1 << 20, m->read_chunk_shape, NDS_MAX_RANK, &n2);
    if (!rc && n1 != n2) rc = nds_err(NDS_EFORMAT, "rank mismatch");
    m->rank = n1;
    m->dtype = NDS_UINT16;
    m->fill_value[0] = (uint8_t)fill;
    m->fill_value[1] = (uint8_t)fill;
    return rc;
}

static int tf_open(nds_kvstore *kv, const json_object *spec, unsigned mode, void **state, nds_array_meta *meta) {
    tf_state *s = calloc(1, sizeof *s);
    nds_read_result r;
    int rc = nds_kvstore_read(kv, "meta.json", NULL, &r);
    if (!rc && r.state == NDS_READ_VALUE) {
        json_object *o;
        rc = nds_json_parse((const char *)r.value.data, r.value.len, "meta.json", &o);
        if (!rc) rc = tf_parse_meta(o, &s->meta), json_object_put(o);
    } else if (!rc && (mode & NDS_OPEN_CREATE)) {
        json_object *m;
        rc = nds_json_member(spec, "metadata", "spec", &m);
        if (!rc) rc = tf_parse_meta(m, &s->meta);
        if (!rc) rc = tf_write_meta(kv, &s->meta, 1);
    } else if (!rc) {
        rc = nds_err(NDS_ENOTFOUND, "no test array");
    }
    nds_read_result_dispose(&r);
    if (rc) {
        free(s);
        return rc;
    }
    s->chunk_bytes = 2;
    for (size_t d = 0; d < s->meta.rank; d++) s->chunk_bytes *= s->meta.chunk_shape[d];
    *meta = s->meta;
    *state = s;
    return 0;
}

static void tf_close(void *s) { free(s); }

static int tf_chunk_key(void *st, const uint64_t *cell, char *buf, size_t cap) {
    tf_state *s = st;
    size_t used = (size_t)snprintf(buf, cap, "c");
    for (size_t d = 0; d < s->meta.rank; d++) used += (size_t)snprintf(buf + used, cap - used, "/%llu", (unsigned long long)cell[d]);
    return 0;
}

static int tf_parse_key(void *st, const char *key, uint64_t *cell) {
    tf_state *s = st;
    if (strncmp(key, "c", 1) != 0) return 0;
    const char *p = key + 1;
    for (size_t d = 0; d < s->meta.rank; d++) {
        if (*p != '/') return 0;
        char *end;
        cell[d] = strtoull(p + 1, &end, 10);
        p = end;
    }
    return *p == '\0';
}

static int decode_calls;

static int tf_decode_whole(void *st, const uint64_t *cell, const uint8_t *data, size_t len, uint8_t *out) {
    tf_state *s = st;
    __atomic_add_fetch(&decode_calls, 1, __ATOMIC_RELAXED);
    if (len != s->chunk_bytes) return nds_err(NDS_ECORRUPT, "expected %zu bytes, found %zu", s->chunk_bytes, len);
    memcpy(out, data, len);
    return 0;
}

/* Whole decodes only: parts, readers and pieces through the shared fallback. */
static int tf_decode(void *st, const uint64_t *cell, nds_decode_request *rq) {
    return nds_format_decode_fallback(st, cell, rq, tf_decode_whole);
}

static int tf_encode(void *st, const uint64_t *cell, const uint8_t *chunk, nds_buf *out) {
    tf_state *s = st;
    out->len = 0;
    return nds_buf_append(out, chunk, s->chunk_bytes);
}

/* The read grid: loads the enclosing storage chunk and copies the read chunk out of it (a real sharded
 * format would read only the inner chunk's byte range). Counts calls so tests see the path was taken. */
static int read_chunk_calls;

static int tf_read_chunk(void *st, nds_kvstore *kv, const uint64_t *cell, uint8_t *out, int *present) {
    tf_state *s = st;
    const nds_array_meta *m = &s->meta;
    uint64_t outer[NDS_MAX_RANK], ext[NDS_MAX_RANK];
    int64_t off = 0, src[NDS_MAX_RANK], dst[NDS_MAX_RANK];
    for (size_t d = 0; d < m->rank; d++) outer[d] = cell[d] * m->read_chunk_shape[d] / m->chunk_shape[d];
    char key[256];
    tf_chunk_key(st, outer, key, sizeof key);
    nds_read_result r;
    int rc = nds_kvstore_read(kv, key, NULL, &r);
    __atomic_add_fetch(&read_chunk_calls, 1, __ATOMIC_RELAXED);
    *present = rc == 0 && r.state == NDS_READ_VALUE;
    if (*present && r.value.len != s->chunk_bytes) rc = nds_err(NDS_ECORRUPT, "bad chunk size");
    if (!rc && *present) {
        nds_c_strides(m->rank, m->chunk_shape, 2, src);
        nds_c_strides(m->rank, m->read_chunk_shape, 2, dst);
        for (size_t d = 0; d < m->rank; d++) {
            ext[d] = m->read_chunk_shape[d];
            off += (int64_t)(cell[d] * m->read_chunk_shape[d] % m->chunk_shape[d]) * src[d];
        }
        nds_strided_copy(m->rank, ext, 2, out, dst, r.value.data + off, src);
    }
    nds_read_result_dispose(&r);
    return rc;
}

static int tf_metadata(void *st, json_object **out) {
    *out = json_object_new_object();
    return 0;
}

static int tf_resize(void *st, nds_kvstore *kv, const uint64_t *shape, nds_array_meta *meta) {
    tf_state *s = st;
    memcpy(s->meta.shape, shape, s->meta.rank * sizeof *shape);
    int rc = tf_write_meta(kv, &s->meta, 0);
    if (!rc) *meta = s->meta;
    return rc;
}

static int tf_get_attrs(void *st, nds_kvstore *kv, json_object **out) {
    *out = json_object_new_object();
    return 0;
}

static int tf_set_attrs(void *st, nds_kvstore *kv, const json_object *a) { return 0; }

static const nds_format testfmt = {
    .version = NDS_FORMAT_VERSION,
    .name = "testfmt",
    .url_scheme = "testfmt",
    .metadata_key = "meta.json",
    .open = tf_open,
    .close = tf_close,
    .metadata_json = tf_metadata,
    .get_attributes = tf_get_attrs,
    .set_attributes = tf_set_attrs,
    .chunk_key = tf_chunk_key,
    .parse_chunk_key = tf_parse_key,
    .decode_chunk = tf_decode,
    .encode_chunk = tf_encode,
    .resize = tf_resize,
    .read_chunk = tf_read_chunk,
};

/* The same format without resize, as a format whose bounds are fixed (precomputed) has. */
static nds_format testfmt_fixed;

/* ---- helpers ---- */

static nds_array *create_ex(const char *name, const char *shape, const char *chunks, int fill, const char *extra) {
    char spec[512];
    snprintf(spec, sizeof spec,
             "{\"driver\":\"testfmt\",\"kvstore\":\"memory://%s/\",\"create\":true,\"delete_existing\":true,"
             "\"metadata\":{\"shape\":%s,\"chunks\":%s,\"fill\":%d%s}}", name, shape, chunks, fill, extra);
    nds_array *a = NULL;
    NDS_OK(nds_array_open(&a, spec, NULL));
    return a;
}

static nds_array *create(const char *name, const char *shape, const char *chunks, int fill) {
    return create_ex(name, shape, chunks, fill, "");
}

static uint64_t count_keys_fn_total;
static int count_keys_fn(void *ctx, const char *key, uint64_t size) {
    (void)ctx, (void)key, (void)size;
    count_keys_fn_total++;
    return 0;
}

static uint64_t count_chunks(nds_array *a) {
    count_keys_fn_total = 0;
    NDS_OK(nds_kvstore_list(nds_array_kvstore(a), "c/", count_keys_fn, NULL));
    return count_keys_fn_total;
}

/* Reference: copy a box between a dense 3-d array and a dense box buffer. */
static void ref_box(uint16_t *ref, const uint64_t *shape, const nds_box *b, uint16_t *buf, int to_ref) {
    uint64_t n = 0;
    for (uint64_t i = b->start[0]; i < b->stop[0]; i += b->step[0])
        for (uint64_t j = b->start[1]; j < b->stop[1]; j += b->step[1])
            for (uint64_t k = b->start[2]; k < b->stop[2]; k += b->step[2]) {
                uint16_t *r = &ref[(i * shape[1] + j) * shape[2] + k];
                if (to_ref) *r = buf[n++];
                else buf[n++] = *r;
            }
}

static void random_box(nds_box *b, const uint64_t *shape) {
    b->rank = 3;
    b->dropped = 0;
    for (size_t d = 0; d < 3; d++) {
        b->start[d] = (uint64_t)rand() % shape[d];
        b->stop[d] = b->start[d] + 1 + (uint64_t)rand() % (shape[d] - b->start[d]);
        b->step[d] = 1 + (uint64_t)(rand() % 4 == 0 ? rand() % 3 : 0);
    }
}

/* ---- tests ---- */

static void random_boxes_against_reference(nds_array *a) {
    uint64_t shape[3] = {23, 17, 9};
    static uint16_t ref[23 * 17 * 9], buf[23 * 17 * 9], got[23 * 17 * 9];
    for (size_t i = 0; i < 23 * 17 * 9; i++) ref[i] = 0x0707;
    srand(7);
    for (int iter = 0; iter < 200; iter++) {
        nds_box b;
        random_box(&b, shape);
        uint64_t n = nds_box_count(&b);
        if (iter % 3 != 2) {
            for (uint64_t i = 0; i < n; i++) buf[i] = (uint16_t)rand();
            NDS_OK(nds_array_write(a, &b, buf, NULL));
            ref_box(ref, shape, &b, buf, 1);
        } else {
            NDS_OK(nds_array_read(a, &b, got, NULL));
            ref_box(ref, shape, &b, buf, 0);
            ck_assert_mem_eq(got, buf, n * 2);
        }
    }
    nds_box all;
    nds_box_full(&all, 3, shape);
    NDS_OK(nds_array_read(a, &all, got, NULL));
    ck_assert_mem_eq(got, ref, sizeof ref);
}

START_TEST(random_boxes_match_reference) {
    nds_array *a = create("rand", "[23, 17, 9]", "[5, 4, 3]", 7);
    random_boxes_against_reference(a);
    ck_assert_int_eq(read_chunk_calls, 0);
    nds_array_free(a);
}
END_TEST

START_TEST(read_grid_finer_than_chunks) {
    /* Storage chunks of 10x8x9 read through 5x4x3 read chunks, as a sharded format does. */
    nds_array *a = create_ex("grid", "[23, 17, 9]", "[10, 8, 9]", 7, ",\"read_chunks\":[5, 4, 3]");
    random_boxes_against_reference(a);
    ck_assert_int_gt(read_chunk_calls, 0);
    nds_array_free(a);
}
END_TEST

START_TEST(missing_chunks_read_fill_and_fill_chunks_are_deleted) {
    nds_array *a = create("fill", "[10, 10, 10]", "[5, 5, 5]", 3);
    uint64_t shape[3] = {10, 10, 10};
    static uint16_t buf[1000];
    nds_box all;
    nds_box_full(&all, 3, shape);
    NDS_OK(nds_array_read(a, &all, buf, NULL));
    for (int i = 0; i < 1000; i++) ck_assert_uint_eq(buf[i], 0x0303);
    ck_assert_uint_eq(count_chunks(a), 0);
    nds_box one;
    NDS_OK(nds_box_parse(&one, "[1, 2, 3]", 3, shape));
    uint16_t v = 99;
    NDS_OK(nds_array_write(a, &one, &v, NULL));
    ck_assert_uint_eq(count_chunks(a), 1);
    v = 0x0303; /* writing fill back empties the chunk: it is deleted */
    NDS_OK(nds_array_write(a, &one, &v, NULL));
    ck_assert_uint_eq(count_chunks(a), 0);
    for (int i = 0; i < 1000; i++) buf[i] = 0x0303;
    NDS_OK(nds_array_write(a, &all, buf, NULL)); /* writing all fill stores nothing */
    ck_assert_uint_eq(count_chunks(a), 0);
    nds_array_stats st;
    NDS_OK(nds_array_stats_get(a, &st));
    ck_assert_uint_eq(st.chunks_total, 8);
    ck_assert_uint_eq(st.chunks_stored, 0);
    nds_array_free(a);
}
END_TEST

typedef struct writer_arg {
    nds_array *a;
    int id;
} writer_arg;

/* Writer id owns the elements whose last index k == id (mod 4): all writers share every chunk. */
static void *writer(void *p) {
    writer_arg *w = p;
    uint64_t shape[3];
    nds_array_shape(w->a, shape);
    for (int round = 0; round < 30; round++) {
        nds_box b;
        nds_box_full(&b, 3, shape);
        b.start[2] = (uint64_t)w->id;
        b.step[2] = 4;
        uint64_t n = nds_box_count(&b);
        uint16_t *buf = malloc(n * sizeof *buf);
        for (uint64_t i = 0; i < n; i++) buf[i] = (uint16_t)(w->id * 1000 + round);
        int rc = nds_array_write(w->a, &b, buf, NULL);
        free(buf);
        if (rc != 0) return (void *)1;
    }
    return NULL;
}

/* Checks that every element holds its owner's last round. */
static void check_final(nds_array *a) {
    uint64_t shape[3];
    nds_array_shape(a, shape);
    nds_box all;
    nds_box_full(&all, 3, shape);
    uint64_t n = nds_box_count(&all);
    uint16_t *got = malloc(n * sizeof *got);
    NDS_OK(nds_array_read(a, &all, got, NULL));
    for (uint64_t i = 0; i < n; i++) ck_assert_uint_eq(got[i], (i % shape[2] % 4) * 1000 + 29);
    free(got);
}

static void run_writers(nds_array *a, nds_array *b) {
    pthread_t t[4];
    writer_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (writer_arg){i % 2 ? a : b, i};
        pthread_create(&t[i], NULL, writer, &args[i]);
    }
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        ck_assert_ptr_null(r);
    }
}

START_TEST(concurrent_writers_lose_nothing) {
    nds_array *a = create("conc", "[8, 8, 8]", "[8, 8, 8]", 0);
    run_writers(a, a);
    /* A second handle on the same store sees the same result. */
    nds_array *b = NULL;
    NDS_OK(nds_array_open(&b, "memory://conc/|testfmt:", NULL));
    check_final(b);
    nds_array_free(a);
    nds_array_free(b);
}
END_TEST

START_TEST(two_handles_conflict_and_retry) {
    /* Two handles have separate lock tables, so only the conditional writes keep every update. */
    nds_array *a = create("two", "[4, 4, 64]", "[4, 4, 64]", 0);
    nds_array *b = NULL;
    NDS_OK(nds_array_open(&b, "memory://two/|testfmt:", NULL));
    run_writers(a, b);
    check_final(a);
    nds_array_free(a);
    nds_array_free(b);
}
END_TEST

START_TEST(resize_deletes_and_clears) {
    nds_array *a = create("resize", "[10, 10, 10]", "[4, 4, 4]", 0);
    uint64_t shape[3] = {10, 10, 10};
    static uint16_t buf[1000];
    for (int i = 0; i < 1000; i++) buf[i] = 5;
    nds_box all;
    nds_box_full(&all, 3, shape);
    NDS_OK(nds_array_write(a, &all, buf, NULL));
    ck_assert_uint_eq(count_chunks(a), 27);
    uint64_t small[3] = {5, 10, 10};
    NDS_OK(nds_array_resize(a, small));
    ck_assert_uint_eq(count_chunks(a), 18); /* rows of chunks 2.. are gone */
    NDS_OK(nds_array_resize(a, shape));      /* grow back: the cut part reads fill */
    NDS_OK(nds_array_read(a, &all, buf, NULL));
    for (int i = 0; i < 1000; i++) ck_assert_uint_eq(buf[i], i / 100 < 5 ? 5 : 0);
    uint64_t got[3];
    nds_array_shape(a, got);
    ck_assert_uint_eq(got[0], 10);
    nds_array_free(a);
}
END_TEST

static int on_bad(void *ctx, const char *key, int status, const char *message) {
    ck_assert_str_eq(key, "c/0/0/0");
    ck_assert_int_eq(status, NDS_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(message, "expected 128 bytes, found 3"));
    ++*(int *)ctx;
    return 0;
}

START_TEST(verify_and_read_report_corrupt_chunks) {
    nds_array *a = create("corrupt", "[8, 8]", "[8, 8]", 0);
    NDS_OK(nds_kvstore_write(nds_array_kvstore(a), "c/0/0", "abc", 3, NULL, NULL));
    nds_array_free(a);
    a = create("corrupt3", "[8, 8, 8]", "[4, 4, 4]", 0);
    NDS_OK(nds_kvstore_write(nds_array_kvstore(a), "c/0/0/0", "abc", 3, NULL, NULL));
    int bad = 0;
    uint64_t checked, nbad;
    NDS_OK(nds_array_verify(a, on_bad, &bad, &checked, &nbad));
    ck_assert_int_eq(bad, 1);
    ck_assert_uint_eq(nbad, 1);
    ck_assert_uint_eq(checked, 1);
    static uint16_t buf[512];
    nds_box all;
    uint64_t shape[3] = {8, 8, 8};
    nds_box_full(&all, 3, shape);
    ck_assert_int_eq(nds_array_read(a, &all, buf, NULL), NDS_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "testfmt: chunk c/0/0/0 of memory://corrupt3/"));
    nds_array_free(a);
}
END_TEST

START_TEST(open_errors) {
    nds_array *a = NULL;
    ck_assert_int_eq(nds_array_open(&a, "memory://nothing-here/", NULL), NDS_ENOTFOUND);
    ck_assert_int_eq(nds_array_open(&a, "memory://x/|nosuchformat:", NULL), NDS_ENOTFOUND);
    ck_assert_int_eq(nds_array_open(&a, "nosuch://x/", NULL), NDS_ENOTFOUND);
    ck_assert_int_eq(nds_array_open(&a, "{\"driver\":\"testfmt\"}", NULL), NDS_EINVAL);
    ck_assert_int_eq(nds_array_open(&a, "{not json", NULL), NDS_EFORMAT);
    ck_assert_int_eq(nds_array_open(&a, "{\"kvstore\":\"memory://a/\",\"delete_existing\":true}", NULL), NDS_EINVAL);
    ck_assert_ptr_null(a);
    nds_array *b = create("detect", "[4]", "[2]", 0);
    NDS_OK(nds_array_open(&a, "memory://detect", NULL)); /* format detected from meta.json */
    ck_assert_str_eq(nds_array_format(a), "testfmt");
    char *spec;
    NDS_OK(nds_array_spec(a, &spec));
    ck_assert_str_eq(spec, "{\"driver\":\"testfmt\",\"kvstore\":{\"driver\":\"memory\",\"path\":\"detect/\"}}");
    nds_free(spec);
    nds_array_free(a);
    nds_array_free(b);
}
END_TEST

/* delete_existing at the root of a store (file:/// would be the whole file system) is refused before
 * anything is deleted; one path segment below the root is an array's place like any other. Only
 * memory stores here: a broken guard must not be able to empty a real disk. */
START_TEST(delete_existing_refuses_a_store_root) {
    static const char *const roots[] = {"memory://", "memory:///", "memory://./", "memory:////.//"};
    nds_kvstore *kv;
    NDS_OK(nds_kvstore_open(&kv, "memory://", NULL));
    NDS_OK(nds_kvstore_write(kv, "keep/me", "x", 1, NULL, NULL));
    for (size_t i = 0; i < sizeof roots / sizeof *roots; i++) {
        char spec[256];
        snprintf(spec, sizeof spec,
                 "{\"driver\":\"testfmt\",\"kvstore\":\"%s\",\"create\":true,\"delete_existing\":"
                 "true,\"metadata\":{\"shape\":[4],\"chunks\":[2],\"fill\":0}}",
                 roots[i]);
        nds_array *a = NULL;
        ck_assert_int_eq(nds_array_open(&a, spec, NULL), NDS_EINVAL);
        ck_assert_msg(strstr(nds_error_last()->message, "root of its store"), "%s: %s", roots[i],
                      nds_error_last()->message);
        ck_assert_ptr_null(a);
    }
    nds_read_result r;
    NDS_OK(nds_kvstore_read(kv, "keep/me", NULL, &r));
    ck_assert_int_eq(r.state, NDS_READ_VALUE); /* nothing was deleted */
    nds_read_result_dispose(&r);
    nds_kvstore_free(kv);
    nds_array *a = create(".x", "[4]", "[2]", 0); /* a name that starts with a dot is not the root */
    nds_array_free(a);
}
END_TEST

START_TEST(cache_hits_are_revalidated) {
    nds_context *ctx;
    nds_context_options co = NDS_CONTEXT_OPTIONS_INIT;
    co.cache_bytes = 64 << 20;
    NDS_OK(nds_context_new(&ctx, &co));
    nds_array *writer = create("cache", "[8, 8]", "[4, 4]", 0), *a = NULL;
    nds_open_options oo = NDS_OPEN_OPTIONS_INIT;
    oo.ctx = ctx;
    NDS_OK(nds_array_open(&a, "memory://cache/|testfmt:", &oo));
    uint64_t shape[2] = {8, 8};
    nds_box all;
    nds_box_full(&all, 2, shape);
    uint16_t buf[64];
    for (int i = 0; i < 64; i++) buf[i] = (uint16_t)i;
    NDS_OK(nds_array_write(writer, &all, buf, NULL));
    uint16_t got[64];
    decode_calls = 0;
    NDS_OK(nds_array_read(a, &all, got, NULL));
    ck_assert_int_eq(decode_calls, 4);
    NDS_OK(nds_array_read(a, &all, got, NULL));
    ck_assert_int_eq(decode_calls, 4); /* served from the cache after revalidation */
    ck_assert_mem_eq(got, buf, sizeof buf);
    nds_box one = {2, {5, 5}, {6, 6}, {1, 1}, 0};
    uint16_t v = 999;
    NDS_OK(nds_array_write(writer, &one, &v, NULL)); /* another handle, no cache: a changes under it */
    int before = decode_calls;
    NDS_OK(nds_array_read(a, &all, got, NULL));
    ck_assert_uint_eq(got[5 * 8 + 5], 999);
    ck_assert_int_eq(decode_calls, before + 1); /* only the changed chunk was decoded again */
    nds_array_free(a);
    nds_array_free(writer);
    nds_context_free(ctx);
}
END_TEST

/* A cache far smaller than the array: entries are evicted and their buffers recycled all the time,
 * while another handle keeps changing chunks; every read must still see exactly the stored data. */
START_TEST(cache_under_eviction_serves_current_data) {
    nds_context *ctx;
    nds_context_options co = NDS_CONTEXT_OPTIONS_INIT;
    co.cache_bytes = 16 * 3 * 32; /* three 32-byte chunks per cache shard */
    NDS_OK(nds_context_new(&ctx, &co));
    nds_array *writer = create("evict", "[64, 64]", "[4, 4]", 0), *a = NULL;
    nds_open_options oo = NDS_OPEN_OPTIONS_INIT;
    oo.ctx = ctx;
    NDS_OK(nds_array_open(&a, "memory://evict/|testfmt:", &oo));
    static uint16_t truth[64 * 64], got[64 * 64];
    for (int i = 0; i < 64 * 64; i++) truth[i] = (uint16_t)(i * 7 + 1);
    uint64_t shape[2] = {64, 64};
    nds_box all;
    nds_box_full(&all, 2, shape);
    NDS_OK(nds_array_write(writer, &all, truth, NULL));
    srand(11);
    for (int round = 0; round < 300; round++) {
        uint64_t r0 = (uint64_t)(rand() % 60), c0 = (uint64_t)(rand() % 60);
        uint64_t r1 = r0 + 1 + (uint64_t)(rand() % (int)(64 - r0));
        uint64_t c1 = c0 + 1 + (uint64_t)(rand() % (int)(64 - c0));
        nds_box box = {2, {r0, c0}, {r1, c1}, {1, 1}, 0};
        NDS_OK(nds_array_read(a, &box, got, NULL));
        size_t k = 0;
        for (uint64_t i = r0; i < r1; i++)
            for (uint64_t j = c0; j < c1; j++) ck_assert_uint_eq(got[k++], truth[i * 64 + j]);
        if (round % 3 == 0) { /* change one element under the cache */
            uint64_t i = (uint64_t)(rand() % 64), j = (uint64_t)(rand() % 64);
            nds_box one = {2, {i, j}, {i + 1, j + 1}, {1, 1}, 0};
            truth[i * 64 + j] = (uint16_t)rand();
            NDS_OK(nds_array_write(writer, &one, &truth[i * 64 + j], NULL));
        }
    }
    nds_array_free(a);
    nds_array_free(writer);
    nds_context_free(ctx);
}
END_TEST

START_TEST(resize_refused_before_touching_chunks) {
    nds_array *a = create("fixed", "[8, 8]", "[4, 4]", 0), *f = NULL;
    uint64_t shape[2] = {8, 8}, small[2] = {2, 2};
    nds_box all;
    nds_box_full(&all, 2, shape);
    uint16_t buf[64];
    for (int i = 0; i < 64; i++) buf[i] = (uint16_t)(i + 1);
    NDS_OK(nds_array_write(a, &all, buf, NULL));
    NDS_OK(nds_array_open(&f, "memory://fixed/|testfmt_fixed:", NULL));
    ck_assert_int_eq(nds_array_resize(f, small), NDS_EUNSUPPORTED);
    ck_assert_uint_eq(count_chunks(f), 4); /* nothing deleted or cleared */
    uint16_t got[64];
    NDS_OK(nds_array_read(f, &all, got, NULL));
    ck_assert_mem_eq(got, buf, sizeof buf);
    nds_array_free(f);
    nds_array_free(a);
}
END_TEST

START_TEST(rank_zero_array) {
    nds_array *a = create("scalar", "[]", "[]", 0);
    nds_box b;
    nds_box_full(&b, 0, NULL);
    uint16_t v = 4242, got = 0;
    NDS_OK(nds_array_write(a, &b, &v, NULL));
    NDS_OK(nds_array_read(a, &b, &got, NULL));
    ck_assert_uint_eq(got, 4242);
    nds_array_free(a);
}
END_TEST


/* ---- extreme starts, stops and steps ---- */

/* A sparse reference of the elements written into a huge array: (index, value) pairs, the last
 * write of an index last. */
typedef struct sparse_ref {
    uint64_t idx[8192][3];
    uint16_t val[8192];
    size_t n;
} sparse_ref;

static uint16_t sparse_get(const sparse_ref *r, const uint64_t *i, uint16_t fill) {
    for (size_t k = r->n; k-- > 0;)
        if (!memcmp(r->idx[k], i, sizeof r->idx[k])) return r->val[k];
    return fill;
}

/* Calls fn on every index of b, in C order, with its position in b's dense buffer. */
static void box_each(const nds_box *b, void (*fn)(void *, const uint64_t *, uint64_t), void *ctx) {
    uint64_t i[3], n = 0;
    /* Written so that no index past the shape is formed: i + step can overflow uint64. */
    for (i[0] = b->start[0]; i[0] < b->stop[0]; i[0] = b->stop[0] - i[0] > b->step[0] ? i[0] + b->step[0] : b->stop[0])
        for (i[1] = b->start[1]; i[1] < b->stop[1]; i[1] = b->stop[1] - i[1] > b->step[1] ? i[1] + b->step[1] : b->stop[1])
            for (i[2] = b->start[2]; i[2] < b->stop[2]; i[2] = b->stop[2] - i[2] > b->step[2] ? i[2] + b->step[2] : b->stop[2])
                fn(ctx, i, n++);
}

typedef struct sparse_visit {
    sparse_ref *ref;
    uint16_t *buf;
    int write;
} sparse_visit;

static void sparse_visit_fn(void *ctx, const uint64_t *i, uint64_t n) {
    sparse_visit *v = ctx;
    if (v->write) {
        ck_assert_uint_lt(v->ref->n, 8192);
        memcpy(v->ref->idx[v->ref->n], i, sizeof v->ref->idx[0]);
        v->ref->val[v->ref->n++] = v->buf[n];
    } else {
        uint16_t want = sparse_get(v->ref, i, 0x0707);
        if (v->buf[n] != want)
            ck_abort_msg("element [%llu, %llu, %llu]: read %u, expected %u", (unsigned long long)i[0],
                         (unsigned long long)i[1], (unsigned long long)i[2], v->buf[n], want);
    }
}

/* The selections of one dimension of extent n tried in every combination: huge steps that select
 * one element (normalised) or two or three, the last elements, steps of 2^64 - 1. */
static void extreme_dim(uint64_t n, int kind, uint64_t *start, uint64_t *stop, uint64_t *step) {
    uint64_t sel[7][3] = {
        {0, n, n - 1},                 /* first and last */
        {n - 1, n, INT64_MAX},         /* the last alone, step 2^63 - 1 */
        {3, n, (n - 3) / 2},           /* three, far apart */
        {0, n, UINT64_MAX},            /* the first alone, step 2^64 - 1 */
        {n - 2, n, 1},                 /* the last two */
        {n / 2, n / 2 + 1, UINT64_MAX - 1},
        {n - 7, n - 1, 3},             /* two near the end, stop not selected */
    };
    *start = sel[kind][0], *stop = sel[kind][1], *step = sel[kind][2];
}

START_TEST(extreme_boxes_match_reference) {
    /* Shapes near 2^62 (the format's limit), 2^40 and small, chunks of 5 x 4 x 3. */
    nds_array *a = create("extreme", "[4611686018427387911, 1099511627777, 1000]", "[5, 4, 3]", 7);
    static sparse_ref ref;
    uint64_t shape[3];
    nds_array_shape(a, shape);
    static uint16_t buf[64], got[64];
    srand(11);
    for (int pass = 0; pass < 2; pass++) /* pass 0 writes every box, pass 1 reads them back */
        for (int combo = 0; combo < 7 * 7 * 7; combo++) {
            nds_box b = {.rank = 3};
            extreme_dim(shape[0], combo % 7, &b.start[0], &b.stop[0], &b.step[0]);
            extreme_dim(shape[1], combo / 7 % 7, &b.start[1], &b.stop[1], &b.step[1]);
            extreme_dim(shape[2], combo / 49, &b.start[2], &b.stop[2], &b.step[2]);
            uint64_t count = nds_box_count(&b);
            ck_assert_uint_le(count, 27);
            sparse_visit v = {&ref, pass == 0 ? buf : got, pass == 0};
            if (pass == 0) {
                for (uint64_t i = 0; i < count; i++) buf[i] = (uint16_t)(rand() | 1);
                NDS_OK(nds_array_write(a, &b, buf, NULL));
            } else {
                NDS_OK(nds_array_read(a, &b, got, NULL));
            }
            box_each(&b, sparse_visit_fn, &v);
            if (pass == 0) { /* and what was written reads back at once */
                NDS_OK(nds_array_read(a, &b, got, NULL));
                v = (sparse_visit){&ref, got, 0};
                box_each(&b, sparse_visit_fn, &v);
            }
        }
    /* Neighbours of the written elements still hold fill: writes touched nothing else. */
    nds_box near = {.rank = 3, .start = {shape[0] - 3, shape[1] - 3, shape[2] - 3},
                    .stop = {shape[0], shape[1], shape[2]}, .step = {1, 1, 1}};
    NDS_OK(nds_array_read(a, &near, got, NULL));
    sparse_visit v = {&ref, got, 0};
    box_each(&near, sparse_visit_fn, &v);
    /* A box whose bytes cannot be represented: a clear error naming the region, nothing read. */
    nds_box all;
    nds_box_full(&all, 3, shape);
    ck_assert_int_eq(nds_array_read(a, &all, NULL, NULL), NDS_ERANGE);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "region [0:4611686018427387911, "));
    ck_assert_int_eq(nds_array_write(a, &all, NULL, NULL), NDS_ERANGE);
    nds_array_free(a);
}
END_TEST

/* ---- resize racing writers ---- */

/* Writers with their own handles write rows [16, 64) of a 64 x 8 array (chunks 4 x 8) while a
 * resizer shrinks it to 16 rows and grows it back, again and again: threads on a memory store, and
 * forked processes on a file store. Every write puts its own id (uint16, never the fill 0) into
 * every element it writes; tickets from one counter (in a shared mapping) order the events. Two
 * things must never be seen:
 * - a write that reported success although its data was lost: its id found in a chunk outside
 *   the shrunk shape although the write started after the shrink had returned (its handle was
 *   opened before the shrink, so it wrote with the old shape);
 * - a stale element after a grow: an id in rows [16, 64) right after the grow whose write had
 *   returned before the grow began (everything such a write left there lay outside the shrunk
 *   shape, and the grow must clear it before exposing it). */
#define RACE_WRITERS 3
#define RACE_WRITES 5000 /* per writer */
#define RACE_IDS (RACE_WRITERS * RACE_WRITES)

typedef struct race_write {
    uint64_t start, end; /* tickets; end 0 while in flight */
    int rc;
    uint64_t seen_invisible_after; /* ticket of the shrink after which its id lay outside the shape */
} race_write;

typedef struct race_state {
    char url[256];
    uint64_t ticket;
    unsigned next_id;
    int go, done;
    uint64_t shrunk_at; /* the ticket taken when the last shrink had returned */
    race_write w[RACE_IDS + 1];
} race_state;

static race_state *race; /* in a shared mapping */

static uint64_t race_tick(void) { return __atomic_add_fetch(&race->ticket, 1, __ATOMIC_SEQ_CST); }

/* One writer: writes until the resizer is done or the ids run out, reopening its handle after a
 * conflict (its metadata changed) or a refusal (opened while shrunk). 0, or 1 on another error. */
static int race_write_loop(unsigned seed) {
    static __thread uint16_t buf[64 * 8];
    nds_array *a = NULL;
    int failed = nds_array_open(&a, race->url, NULL) != 0;
    while (!failed && !__atomic_load_n(&race->done, __ATOMIC_SEQ_CST)) {
        uint64_t shape[2];
        nds_array_shape(a, shape);
        if (shape[0] < 64) { /* opened while shrunk: wait for the grow */
            nds_array_free(a);
            nds_sleep_ns(500000);
            failed = nds_array_open(&a, race->url, NULL) != 0;
            continue;
        }
        unsigned id = __atomic_add_fetch(&race->next_id, 1, __ATOMIC_SEQ_CST);
        if (id > RACE_IDS) break;
        uint64_t r0 = 16 + rand_r(&seed) % 48, r1 = r0 + 1 + rand_r(&seed) % (64 - r0);
        nds_box b = {.rank = 2, .start = {r0, 0}, .stop = {r1, 8}, .step = {1, 1}};
        for (size_t i = 0; i < (r1 - r0) * 8; i++) buf[i] = (uint16_t)id;
        race->w[id].start = race_tick();
        int rc = nds_array_write(a, &b, buf, NULL);
        race->w[id].rc = rc;
        __atomic_store_n(&race->w[id].end, race_tick(), __ATOMIC_SEQ_CST);
        if (rc == NDS_ECONFLICT) {
            nds_array_free(a);
            failed = nds_array_open(&a, race->url, NULL) != 0;
        } else if (rc) {
            fprintf(stderr, "write %u: %s\n", id, nds_error_last()->message);
            failed = 1;
        }
    }
    nds_array_free(a);
    return failed;
}

static void *race_writer_thread(void *arg) {
    return race_write_loop((unsigned)(uintptr_t)arg) ? (void *)1 : NULL;
}

/* Records the ids stored outside the shrunk shape (rows >= 16: chunk rows >= 4). */
static int race_note_invisible(void *ctx, const char *key, uint64_t size) {
    nds_array *a = ctx;
    unsigned row, col;
    (void)size;
    if (sscanf(key, "c/%u/%u", &row, &col) != 2 || row < 4) return 0;
    nds_read_result r;
    NDS_OK(nds_kvstore_read(nds_array_kvstore(a), key, NULL, &r));
    for (size_t i = 0; r.state == NDS_READ_VALUE && i < r.value.len / 2; i++) {
        uint16_t id;
        memcpy(&id, r.value.data + 2 * i, 2);
        if (id) race->w[id].seen_invisible_after = race->shrunk_at;
    }
    nds_read_result_dispose(&r);
    return 0;
}

static void race_check_after_grow(nds_array *a, uint64_t grow_start) {
    static uint16_t got[48 * 8];
    nds_box b = {.rank = 2, .start = {16, 0}, .stop = {64, 8}, .step = {1, 1}};
    NDS_OK(nds_array_read(a, &b, got, NULL));
    for (size_t i = 0; i < 48 * 8; i++) {
        uint64_t end = got[i] ? __atomic_load_n(&race->w[got[i]].end, __ATOMIC_SEQ_CST) : 0;
        if (got[i] && end != 0 && end < grow_start)
            ck_abort_msg("stale element after a grow: row %zu holds write %u, which returned at "
                         "ticket %llu, before the grow began at %llu", 16 + i / 8, got[i],
                         (unsigned long long)end, (unsigned long long)grow_start);
    }
}

/* Shrinks and grows rounds times (a: the resizer's handle), checking after each grow. */
static void race_resize(nds_array *a, int rounds, uint64_t pause_ns) {
    uint64_t big[2] = {64, 8}, small[2] = {16, 8};
    for (int round = 0; round < rounds; round++) {
        nds_sleep_ns(pause_ns);
        NDS_OK(nds_array_resize(a, small));
        race->shrunk_at = race_tick();
        NDS_OK(nds_kvstore_list(nds_array_kvstore(a), "c/", race_note_invisible, a));
        nds_sleep_ns(pause_ns);
        uint64_t grow_start = race_tick();
        NDS_OK(nds_array_resize(a, big));
        race_check_after_grow(a, grow_start);
    }
    __atomic_store_n(&race->done, 1, __ATOMIC_SEQ_CST);
}

/* After the writers are done: no write that reported success lost its data. */
static void race_check_writes(const char *what) {
    int succeeded = 0, conflicts = 0;
    for (unsigned id = 1; id <= RACE_IDS && race->w[id].end; id++) {
        race_write *w = &race->w[id];
        succeeded += w->rc == 0;
        conflicts += w->rc == NDS_ECONFLICT;
        if (w->rc == 0 && w->seen_invisible_after && w->start > w->seen_invisible_after)
            ck_abort_msg("write %u reported success, but it started (ticket %llu) after a shrink "
                         "had returned (%llu) and its data lay outside the shape", id,
                         (unsigned long long)w->start, (unsigned long long)w->seen_invisible_after);
    }
    printf("resize race (%s): %d writes succeeded, %d failed with NDS_ECONFLICT\n", what,
           succeeded, conflicts);
    ck_assert_int_gt(succeeded, 0);
    ck_assert_int_gt(conflicts, 0); /* the race did happen */
}

static race_state *race_setup(const char *url) {
    race = mmap(NULL, sizeof *race, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert(race != MAP_FAILED);
    memset(race, 0, sizeof *race);
    snprintf(race->url, sizeof race->url, "%s", url);
    return race;
}

START_TEST(resize_racing_writer_threads) {
    race_setup("memory://race/|testfmt:");
    nds_array *a = create("race", "[64, 8]", "[4, 8]", 0);
    pthread_t t[RACE_WRITERS];
    for (uintptr_t i = 0; i < RACE_WRITERS; i++)
        pthread_create(&t[i], NULL, race_writer_thread, (void *)(i + 1));
    race_resize(a, 150, 200000);
    for (int i = 0; i < RACE_WRITERS; i++) {
        void *r;
        pthread_join(t[i], &r);
        ck_assert_ptr_null(r);
    }
    race_check_writes("threads, memory");
    nds_array_free(a);
    munmap(race, sizeof *race);
}
END_TEST

START_TEST(resize_racing_writer_processes) {
    /* The writers are forked before this process touches a store (no pool crosses the fork);
     * they open their handles once the array exists (go). */
    char *dir = nds_test_tmpdir(), url[256];
    snprintf(url, sizeof url, "file://%s/race/|testfmt:", dir);
    race_setup(url);
    pid_t pids[RACE_WRITERS];
    for (int i = 0; i < RACE_WRITERS; i++) {
        fflush(NULL);
        if ((pids[i] = fork()) == 0) {
            alarm(120);
            while (!__atomic_load_n(&race->go, __ATOMIC_SEQ_CST)) nds_sleep_ns(1000000);
            _exit(race_write_loop((unsigned)i + 1));
        }
        ck_assert_int_gt(pids[i], 0);
    }
    char spec[512];
    snprintf(spec, sizeof spec,
             "{\"driver\":\"testfmt\",\"kvstore\":\"file://%s/race/\",\"create\":true,"
             "\"metadata\":{\"shape\":[64, 8],\"chunks\":[4, 8],\"fill\":0}}", dir);
    nds_array *a = NULL;
    NDS_OK(nds_array_open(&a, spec, NULL));
    __atomic_store_n(&race->go, 1, __ATOMIC_SEQ_CST);
    race_resize(a, 100, 5000000);
    for (int i = 0; i < RACE_WRITERS; i++) {
        int status;
        ck_assert_int_eq(waitpid(pids[i], &status, 0), pids[i]);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer %d failed", i);
    }
    race_check_writes("processes, file");
    nds_array_free(a);
    munmap(race, sizeof *race);
    nds_test_rmtree(dir);
    free(dir);
}
END_TEST

static int collect_name(void *ctx, const nds_format *f) {
    char *names = ctx;
    strcat(names, f->name);
    strcat(names, " ");
    return strcmp(f->name, "testfmt") == 0 ? 7 : 0; /* stops there, returning 7 */
}

static int collect_key_is_object(void *st, const char *key) {
    (void)st;
    return key[0] == 's';
}

/* The built-in formats first, then those registered at run time; fn's non-zero value stops it. */
START_TEST(format_each_lists_registered_formats) {
    char names[512] = "";
    ck_assert_int_eq(nds_format_each(collect_name, names), 7);
    ck_assert_str_eq(names, "zarr zarr3 n5 neuroglancer_precomputed testfmt ");
}
END_TEST

/* Registration takes version 1 only (the interface was reset for the first release) and refuses a
 * format missing a required member or with half of a pair, naming the format and what is wrong;
 * a refused format is not found afterwards. */
START_TEST(format_registration_checks_version_and_members) {
    nds_format f = testfmt;
    f.name = f.url_scheme = "testfmt_v5";
    f.version = 5; /* the last version before the reset */
    ck_assert_int_eq(nds_format_register(&f), NDS_EINVAL);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message,
                                 "format \"testfmt_v5\" is of version 5; this library takes version 1"));
    f.version = 0;
    ck_assert_int_eq(nds_format_register(&f), NDS_EINVAL);
    ck_assert_ptr_null(nds_format_find("testfmt_v5"));
    f.version = NDS_FORMAT_VERSION;
    f.decode_chunk = NULL;
    ck_assert_int_eq(nds_format_register(&f), NDS_EINVAL);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "lacks open"));
    f.decode_chunk = testfmt.decode_chunk;
    f.group_parse_key = collect_key_is_object;
    ck_assert_int_eq(nds_format_register(&f), NDS_EINVAL);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "group_parse_key and group_list"));
    ck_assert_ptr_null(nds_format_find("testfmt_v5"));
    ck_assert_int_eq(nds_format_register(NULL), NDS_EINVAL);
}
END_TEST

int main(void) {
    nds_format_register(&testfmt);
    testfmt_fixed = testfmt;
    testfmt_fixed.name = testfmt_fixed.url_scheme = "testfmt_fixed";
    testfmt_fixed.resize = NULL;
    nds_format_register(&testfmt_fixed);
    Suite *s = suite_create("array");
    TCase *tc = tcase_create("array");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, format_each_lists_registered_formats);
    tcase_add_test(tc, format_registration_checks_version_and_members);
    tcase_add_test(tc, random_boxes_match_reference);
    tcase_add_test(tc, read_grid_finer_than_chunks);
    tcase_add_test(tc, missing_chunks_read_fill_and_fill_chunks_are_deleted);
    tcase_add_test(tc, concurrent_writers_lose_nothing);
    tcase_add_test(tc, two_handles_conflict_and_retry);
    tcase_add_test(tc, resize_deletes_and_clears);
    tcase_add_test(tc, verify_and_read_report_corrupt_chunks);
    tcase_add_test(tc, open_errors);
    tcase_add_test(tc, delete_existing_refuses_a_store_root);
    tcase_add_test(tc, rank_zero_array);
    tcase_add_test(tc, extreme_boxes_match_reference);
    tcase_add_test(tc, resize_racing_writer_threads);
    tcase_add_test(tc, resize_racing_writer_processes);
    tcase_add_test(tc, resize_refused_before_touching_chunks);
    tcase_add_test(tc, cache_hits_are_revalidated);
    tcase_add_test(tc, cache_under_eviction_serves_current_data);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
