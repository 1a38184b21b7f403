/* Consolidated metadata (issue 20; formats/zarr_consolidated.c): zarr v2 .zmetadata and zarr v3
 * inline "consolidated_metadata" written by nds_group_consolidate and read with "consolidated":
 * true (the copy is used, costs one read, falls back to the array's own metadata when it has no
 * usable entry, and gives a read-only handle); hand-written zarr v3 golden documents as zarr-python
 * 3 writes them (zarr-python 3 is not installed here); malformed copies refused naming the key. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "support_check.h"
#include "support_format.h"

/* A zarr v2 hierarchy at url: group, array a [3,4] int32 with attributes, group sub, array
 * sub/b [5] float64; then consolidated (5 documents). */
static void make_v2_hierarchy(const char *url) {
    nds_array *a;
    NDS_OK(nds_group_create(url, "sub", "zarr", 1, NULL));
    NDS_OK(open_spec(&a,
                     "{\"driver\":\"zarr\",\"kvstore\":\"%sa/\",\"create\":true,\"metadata\":"
                     "{\"shape\":[3,4],\"chunks\":[2,2],\"dtype\":\"<i4\",\"compressor\":null}}",
                     url));
    int32_t v[12];
    for (int i = 0; i < 12; i++) v[i] = i;
    write_all(a, v);
    NDS_OK(nds_array_set_attributes(a, "{\"unit\":\"m\"}"));
    nds_array_free(a);
    NDS_OK(open_spec(&a,
                     "{\"driver\":\"zarr\",\"kvstore\":\"%ssub/b/\",\"create\":true,\"metadata\":"
                     "{\"shape\":[5],\"chunks\":[5],\"dtype\":\"<f8\",\"compressor\":null}}",
                     url));
    nds_array_free(a);
    size_t n = 0;
    NDS_OK(nds_group_consolidate(url, "", "zarr", &n, NULL));
    ck_assert_uint_eq(n, 5);
}

/* Replaces member of the consolidated entry key in url's .zmetadata with value (JSON text). */
static void edit_zmetadata(const char *url, const char *key, const char *member, const char *value) {
    json_object *doc = get_json(url, ".zmetadata"), *md, *e;
    ck_assert(json_object_object_get_ex(doc, "metadata", &md));
    ck_assert(json_object_object_get_ex(md, key, &e));
    json_object_object_add(e, member, json_tokener_parse(value));
    put_text(url, ".zmetadata", json_object_to_json_string(doc));
    json_object_put(doc);
}

static uint64_t shape0(nds_array *a) {
    uint64_t s[NDS_MAX_RANK];
    nds_array_shape(a, s);
    return s[0];
}

/* nds_group_consolidate writes .zmetadata as zarr-python does; "consolidated": true opens from
 * it (a shape changed only in the copy shows), reads the chunks, takes attributes from it; without
 * it the array's own .zarray is read. */
START_TEST(v2_consolidate_and_open) {
    const char *url = "memory://consol/v2/";
    make_v2_hierarchy(url);
    json_object *doc = get_json(url, ".zmetadata"), *v, *md;
    ck_assert(json_object_object_get_ex(doc, "zarr_consolidated_format", &v));
    ck_assert_int_eq(json_object_get_int(v), 1);
    ck_assert(json_object_object_get_ex(doc, "metadata", &md));
    static const char *const keys[] = {".zgroup", "a/.zarray", "a/.zattrs", "sub/.zgroup",
                                       "sub/b/.zarray"};
    for (size_t i = 0; i < 5; i++) ck_assert_msg(json_object_object_get_ex(md, keys[i], NULL), "%s", keys[i]);
    json_object_put(doc);

    edit_zmetadata(url, "a/.zarray", "shape", "[4,4]"); /* only the copy says 4 rows */
    nds_array *a;
    NDS_OK(open_spec(&a, "{\"driver\":\"zarr\",\"kvstore\":\"%sa/\",\"consolidated\":true}", url));
    ck_assert_uint_eq(shape0(a), 4);
    int32_t out[16];
    read_all(a, out);
    for (int i = 0; i < 12; i++) ck_assert_int_eq(out[i], i);
    for (int i = 12; i < 16; i++) ck_assert_int_eq(out[i], 0); /* fill */
    assert_attributes(a, "{\"unit\":\"m\"}");
    nds_array_free(a);
    NDS_OK(open_spec(&a, "{\"driver\":\"zarr\",\"kvstore\":\"%sa/\"}", url));
    ck_assert_uint_eq(shape0(a), 3);
    nds_array_free(a);
    /* two levels down: sub/b is covered by the root's copy */
    NDS_OK(open_spec(&a, "{\"driver\":\"zarr\",\"kvstore\":\"%ssub/b/\",\"consolidated\":true}",
                     url));
    ck_assert_uint_eq(shape0(a), 5);
    nds_array_free(a);
}
END_TEST

/* The calls of kind so far on the faulty device of kv. */
static uint64_t calls(nds_kvstore *kv, const char *kind) {
    char *text;
    NDS_OK(nds_kvstore_spec(kv, &text));
    json_object *o = json_tokener_parse(text), *m, *v;
    ck_assert(json_object_object_get_ex(o, "calls", &m) && json_object_object_get_ex(m, kind, &v));
    uint64_t n = (uint64_t)json_object_get_int64(v);
    json_object_put(o);
    nds_free(text);
    return n;
}

/* Opening an array directly under its consolidated group costs one read; its attributes none;
 * without "consolidated" the open reads its metadata key several times (generation checks). */
START_TEST(open_costs_one_read) {
    make_v2_hierarchy("memory://consol/count/");
    const char *faulty = "{\"driver\":\"faulty\",\"base\":\"memory://consol/count/\","
                         "\"fail\":{},\"path\":\"%s\"}";
    char kvspec[512];
    snprintf(kvspec, sizeof kvspec, faulty, "a/");
    nds_kvstore *kv;
    NDS_OK(nds_kvstore_open(&kv, kvspec, NULL));
    uint64_t before = calls(kv, "read");
    nds_array *a;
    NDS_OK(open_spec(&a, "{\"driver\":\"zarr\",\"kvstore\":%s,\"consolidated\":true}", kvspec));
    char *attrs;
    NDS_OK(nds_array_get_attributes(a, &attrs));
    nds_free(attrs);
    uint64_t snapshot = calls(kv, "read") - before;
    nds_array_free(a);
    before = calls(kv, "read");
    NDS_OK(open_spec(&a, "{\"driver\":\"zarr\",\"kvstore\":%s}", kvspec));
    NDS_OK(nds_array_get_attributes(a, &attrs));
    nds_free(attrs);
    uint64_t own = calls(kv, "read") - before;
    nds_array_free(a);
    nds_kvstore_free(kv);
    ck_assert_msg(snapshot == 1, "consolidated open + attributes: %llu reads",
                  (unsigned long long)snapshot);
    ck_assert_msg(own >= 3, "own open + attributes: %llu reads", (unsigned long long)own);
}
END_TEST

/* A snapshot handle refuses every change, saying why; "consolidated" with "create" is refused. */
START_TEST(snapshot_is_read_only) {
    const char *url = "memory://consol/ro/";
    make_v2_hierarchy(url);
    nds_array *a;
    NDS_OK(open_spec(&a, "{\"driver\":\"zarr\",\"kvstore\":\"%sa/\",\"consolidated\":true}", url));
    int32_t v[12] = {0};
    nds_box box;
    uint64_t shape[2] = {3, 4};
    nds_box_full(&box, 2, shape);
    ck_assert_int_eq(nds_array_write(a, &box, v, NULL), NDS_EINVAL);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "read-only snapshot"));
    uint64_t bigger[2] = {6, 4};
    ck_assert_int_eq(nds_array_resize(a, bigger), NDS_EINVAL);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "consolidated"));
    ck_assert_int_eq(nds_array_set_attributes(a, "{}"), NDS_EINVAL);
    nds_txn *txn; /* a transaction's write through the snapshot handle too */
    NDS_OK(nds_txn_begin(&txn, NULL));
    nds_io_options io = NDS_IO_OPTIONS_INIT;
    io.txn = txn;
    ck_assert_int_eq(nds_array_write(a, &box, v, &io), NDS_EINVAL);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "read-only snapshot"));
    nds_txn_abort(txn);
    nds_txn_free(txn);
    nds_array_free(a);
    int rc = open_spec(&a,
                       "{\"driver\":\"zarr\",\"kvstore\":\"%sc/\",\"consolidated\":true,"
                       "\"create\":true,\"metadata\":{\"shape\":[1],\"chunks\":[1],\"dtype\":"
                       "\"<u1\"}}",
                       url);
    ck_assert_int_eq(rc, NDS_EINVAL);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "\"create\""));
    rc = open_spec(&a, "{\"driver\":\"n5\",\"kvstore\":\"%sa/\",\"consolidated\":true}", url);
    ck_assert_int_eq(rc, NDS_EUNSUPPORTED);
}
END_TEST

/* An array missing from the copy, or whose entry does not load, opens from its own metadata; the
 * copy stays stale after changes below the group until consolidated again. */
START_TEST(fallback_and_stale) {
    const char *url = "memory://consol/fb/";
    make_v2_hierarchy(url);
    nds_array *a;
    NDS_OK(open_spec(&a,
                     "{\"driver\":\"zarr\",\"kvstore\":\"%snew/\",\"create\":true,\"metadata\":"
                     "{\"shape\":[7],\"chunks\":[7],\"dtype\":\"<u1\",\"compressor\":null}}",
                     url));
    nds_array_free(a);
    NDS_OK(open_spec(&a, "{\"driver\":\"zarr\",\"kvstore\":\"%snew/\",\"consolidated\":true}", url));
    ck_assert_uint_eq(shape0(a), 7); /* not in the copy: its own .zarray */
    nds_array_free(a);
    edit_zmetadata(url, "sub/b/.zarray", "dtype", "\"<q9\""); /* an entry that does not load */
    NDS_OK(open_spec(&a, "{\"driver\":\"zarr\",\"kvstore\":\"%ssub/b/\",\"consolidated\":true}",
                     url));
    ck_assert_int_eq(nds_array_dtype(a), NDS_FLOAT64);
    nds_array_free(a);
    /* resize through an ordinary handle: the copy is stale (documented), until consolidated */
    NDS_OK(open_spec(&a, "{\"driver\":\"zarr\",\"kvstore\":\"%sa/\"}", url));
    uint64_t bigger[2] = {9, 4};
    NDS_OK(nds_array_resize(a, bigger));
    nds_array_free(a);
    NDS_OK(open_spec(&a, "{\"driver\":\"zarr\",\"kvstore\":\"%sa/\",\"consolidated\":true}", url));
    ck_assert_uint_eq(shape0(a), 3);
    nds_array_free(a);
    NDS_OK(nds_group_consolidate(url, "", NULL, NULL, NULL));
    NDS_OK(open_spec(&a, "{\"driver\":\"zarr\",\"kvstore\":\"%sa/\",\"consolidated\":true}", url));
    ck_assert_uint_eq(shape0(a), 9);
    nds_array_free(a);
}
END_TEST

/* Malformed .zmetadata: a clear error naming the key and what is wrong, never a crash. */
START_TEST(v2_malformed) {
    static const struct {
        const char *doc, *says;
    } cases[] = {
        {"[1,2]", "expected a json object"},
        {"{\"metadata\":{}}", "zarr_consolidated_format"},
        {"{\"zarr_consolidated_format\":2,\"metadata\":{}}", "ndstore reads format 1"},
        {"{\"zarr_consolidated_format\":\"1\",\"metadata\":{}}", "zarr_consolidated_format"},
        {"{\"zarr_consolidated_format\":1}", "missing member \"metadata\""},
        {"{\"zarr_consolidated_format\":1,\"metadata\":[]}", "\"metadata\" must be an object"},
        {"{\"zarr_consolidated_format\":1,\"metadata\":{\"a/.zarray\":5}}",
         "entry \"a/.zarray\" must be an object"},
        {"{\"zarr_consolidated_format\":1,\"metadata\":{\"../x/.zarray\":{}}}", "../x/.zarray"},
        {"{\"zarr_consolidated_format\":1,\"metadata\":{\"a/data\":{}}}", "a/data"},
        {"{\"zarr_consolidated_format\":1,\"metadata\":{\"a/.zarray\":{}", "zmetadata"},
    };
    const char *url = "memory://consol/bad/";
    make_v2_hierarchy(url);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        put_text(url, ".zmetadata", cases[i].doc);
        nds_array *a = NULL;
        int rc = open_spec(&a, "{\"driver\":\"zarr\",\"kvstore\":\"%sa/\",\"consolidated\":true}",
                           url);
        ck_assert_msg(rc != 0, "case %zu opened", i);
        const char *m = nds_error_last()->message;
        ck_assert_msg(strstr(m, ".zmetadata") && strstr(m, cases[i].says), "case %zu: %s", i, m);
    }
}
END_TEST

/* A hand-written zarr v3 hierarchy as zarr-python 3 writes consolidated metadata (zarr-python 3
 * is not installed here: written from its format, a group zarr.json with "consolidated_metadata":
 * {"kind": "inline", "must_understand": false, "metadata": {path: node zarr.json}}). */
static const char golden_v3[] =
    "{\"zarr_format\":3,\"node_type\":\"group\",\"attributes\":{\"title\":\"golden\"},"
    "\"consolidated_metadata\":{\"kind\":\"inline\",\"must_understand\":false,\"metadata\":{"
    "\"g\":{\"zarr_format\":3,\"node_type\":\"group\",\"attributes\":{},"
    "\"consolidated_metadata\":null},"
    "\"g/x\":{\"zarr_format\":3,\"node_type\":\"array\",\"shape\":[6],\"data_type\":\"uint16\","
    "\"chunk_grid\":{\"name\":\"regular\",\"configuration\":{\"chunk_shape\":[4]}},"
    "\"chunk_key_encoding\":{\"name\":\"default\",\"configuration\":{\"separator\":\"/\"}},"
    "\"fill_value\":7,\"codecs\":[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}}],"
    "\"attributes\":{\"unit\":\"s\"},\"dimension_names\":[\"t\"],\"storage_transformers\":[]}}}}";

START_TEST(v3_golden_inline) {
    const char *url = "memory://consol/v3g/";
    put_text(url, "zarr.json", golden_v3);
    uint16_t chunk0[4] = {1, 2, 3, 4};
    put_raw(url, "g/x/c/0", chunk0, sizeof chunk0);
    /* no g/zarr.json, no g/x/zarr.json: only the consolidated copy describes them */
    nds_array *a;
    NDS_OK(open_spec(&a, "{\"driver\":\"zarr3\",\"kvstore\":\"%sg/x/\",\"consolidated\":true}",
                     url));
    ck_assert_uint_eq(shape0(a), 6);
    uint16_t out[6];
    read_all(a, out);
    static const uint16_t want[6] = {1, 2, 3, 4, 7, 7};
    ck_assert_mem_eq(out, want, sizeof want);
    assert_attributes(a, "{\"unit\":\"s\"}");
    nds_array_free(a);
    /* without "consolidated": the array's own zarr.json, which is not there */
    ck_assert_int_eq(open_spec(&a, "{\"driver\":\"zarr3\",\"kvstore\":\"%sg/x/\"}", url),
                     NDS_ENOTFOUND);
}
END_TEST

/* The hand-written fixture tests/fixtures/zarr3_consolidated_hand (in the tree, not $NDS_FIXTURES):
 * every array opens from the copy and from its own zarr.json alike, with the values written. */
START_TEST(v3_hand_written_fixture) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", __FILE__);
    char *p = strstr(dir, "tests/unit/test_consolidated.c");
    ck_assert_ptr_nonnull(p);
    snprintf(p, sizeof dir - (size_t)(p - dir), "tests/fixtures/zarr3_consolidated_hand/h.zarr");
    static const char *const arrays[] = {"g/x", "g/y"};
    for (size_t i = 0; i < 2; i++) {
        nds_array *snap, *own;
        NDS_OK(open_spec(&snap, "{\"driver\":\"zarr3\",\"kvstore\":\"file://%s/%s/\","
                                "\"consolidated\":true}",
                         dir, arrays[i]));
        NDS_OK(open_spec(&own, "{\"driver\":\"zarr3\",\"kvstore\":\"file://%s/%s/\"}", dir,
                         arrays[i]));
        char *m1, *m2;
        NDS_OK(nds_array_metadata(snap, &m1));
        NDS_OK(nds_array_metadata(own, &m2));
        json_object *j1 = json_tokener_parse(m1), *j2 = json_tokener_parse(m2);
        ck_assert_msg(json_object_equal(j1, j2), "%s: %s vs %s", arrays[i], m1, m2);
        json_object_put(j1);
        json_object_put(j2);
        nds_free(m1);
        nds_free(m2);
        if (i == 0) {
            uint16_t out[6];
            static const uint16_t want[6] = {1, 2, 3, 4, 5, 6};
            read_all(snap, out);
            ck_assert_mem_eq(out, want, sizeof want);
            assert_attributes(snap, "{\"unit\":\"s\"}");
        } else {
            float out[6];
            static const float want[6] = {0.5f, 1.5f, 2.5f, 3.5f, 4.5f, 5.5f};
            read_all(snap, out);
            ck_assert_mem_eq(out, want, sizeof want);
        }
        nds_array_free(snap);
        nds_array_free(own);
    }
}
END_TEST

/* nds_group_consolidate for zarr3 writes the inline copy into the group's zarr.json, keeping its
 * other members; a v3 array opens from it. */
START_TEST(v3_consolidate) {
    const char *url = "memory://consol/v3w/";
    NDS_OK(nds_group_create(url, "", "zarr3", 0, NULL));
    NDS_OK(nds_group_create(url, "g", "zarr3", 0, NULL));
    nds_array *a;
    NDS_OK(open_spec(&a,
                     "{\"driver\":\"zarr3\",\"kvstore\":\"%sg/y/\",\"create\":true,\"metadata\":"
                     "{\"shape\":[5],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":"
                     "{\"chunk_shape\":[5]}},\"data_type\":\"int8\"}}",
                     url));
    nds_array_free(a);
    size_t n = 0;
    NDS_OK(nds_group_consolidate(url, "", "zarr3", &n, NULL));
    ck_assert_uint_eq(n, 2);
    json_object *doc = get_json(url, "zarr.json"), *cm, *md, *e;
    ck_assert_str_eq(member_str(doc, "node_type"), "\"group\"");
    ck_assert(json_object_object_get_ex(doc, "consolidated_metadata", &cm));
    ck_assert_str_eq(member_str(cm, "kind"), "\"inline\"");
    ck_assert(json_object_object_get_ex(cm, "metadata", &md));
    ck_assert(json_object_object_get_ex(md, "g", &e));
    ck_assert_str_eq(member_str(e, "node_type"), "\"group\"");
    ck_assert(json_object_object_get_ex(md, "g/y", &e));
    ck_assert_str_eq(member_str(e, "node_type"), "\"array\"");
    json_object_put(doc);
    NDS_OK(open_spec(&a, "{\"driver\":\"zarr3\",\"kvstore\":\"%sg/y/\",\"consolidated\":true}",
                     url));
    ck_assert_uint_eq(shape0(a), 5);
    nds_array_free(a);
    /* consolidating where there is no group */
    ck_assert_int_eq(nds_group_consolidate(url, "g/y", "zarr3", NULL, NULL), NDS_EINVAL);
    ck_assert_int_eq(nds_group_consolidate(url, "nothing", "zarr3", NULL, NULL), NDS_ENOTFOUND);
    ck_assert_int_eq(nds_group_consolidate(url, "nothing", "zarr", NULL, NULL), NDS_ENOTFOUND);
    ck_assert_int_eq(nds_group_consolidate(url, "", "n5", NULL, NULL), NDS_EUNSUPPORTED);
}
END_TEST

/* Malformed inline consolidated metadata: errors naming zarr.json and the member. */
START_TEST(v3_malformed) {
    static const struct {
        const char *cm, *says;
    } cases[] = {
        {"[]", "must be an object or null"},
        {"{\"metadata\":{}}", "\"kind\" must be a string"},
        {"{\"kind\":\"file\",\"metadata\":{}}", "kind \"file\" is not supported"},
        {"{\"kind\":\"inline\",\"must_understand\":\"no\",\"metadata\":{}}", "must_understand"},
        {"{\"kind\":\"inline\"}", "missing member \"metadata\""},
        {"{\"kind\":\"inline\",\"metadata\":{\"x\":1}}", "entry \"x\" must be an object"},
        {"{\"kind\":\"inline\",\"metadata\":{\"x\":{}}}", "\"node_type\""},
        {"{\"kind\":\"inline\",\"metadata\":{\"/x\":{\"node_type\":\"array\"}}}", "\"/x\""},
    };
    const char *url = "memory://consol/v3bad/";
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char doc[512];
        snprintf(doc, sizeof doc,
                 "{\"zarr_format\":3,\"node_type\":\"group\",\"consolidated_metadata\":%s}",
                 cases[i].cm);
        put_text(url, "zarr.json", doc);
        nds_array *a = NULL;
        int rc = open_spec(&a, "{\"driver\":\"zarr3\",\"kvstore\":\"%sx/\",\"consolidated\":true}",
                           url);
        ck_assert_msg(rc != 0, "case %zu opened", i);
        const char *m = nds_error_last()->message;
        ck_assert_msg(strstr(m, "zarr.json") && strstr(m, cases[i].says), "case %zu: %s", i, m);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("consolidated");
    TCase *tc = tcase_create("consolidated");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, v2_consolidate_and_open);
    tcase_add_test(tc, open_costs_one_read);
    tcase_add_test(tc, snapshot_is_read_only);
    tcase_add_test(tc, fallback_and_stale);
    tcase_add_test(tc, v2_malformed);
    tcase_add_test(tc, v3_golden_inline);
    tcase_add_test(tc, v3_hand_written_fixture);
    tcase_add_test(tc, v3_consolidate);
    tcase_add_test(tc, v3_malformed);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
