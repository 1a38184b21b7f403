/* Specs and the paths joined in them: nds_spec_parse (empty specs, a "path" under the kvstore),
 * nds_path_join / nds_path_check_root (the one normaliser of joined key paths); URL pipelines with
 * kvstore adapters (nds_kvstore_url_to_spec, nds_spec_url_split), the faulty driver as the adapter. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "support_check.h"
#include "ndstore/sys/kv_driver.h"
#include "internal/kvstore_internal.h"
#include "internal/spec.h"
#include "internal/util.h"

/* The join of base and rel, which must succeed. */
static void joins(const char *base, const char *rel, const char *want) {
    char *out = NULL;
    NDS_OK(nds_path_join(base, rel, "test path", &out));
    ck_assert_msg(strcmp(out, want) == 0, "join(\"%s\", \"%s\") = \"%s\", want \"%s\"", base, rel,
                  out, want);
    free(out);
}

/* The join of base and rel, which must be refused naming rel. */
static void climbs(const char *base, const char *rel) {
    char *out = NULL;
    ck_assert_int_eq(nds_path_join(base, rel, "test path", &out), NDS_EINVAL);
    ck_assert_ptr_null(out);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, rel));
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "test path"));
}

START_TEST(join_normalises) {
    joins("/root/", "x.zarr", "/root/x.zarr");
    joins("/root", "x.zarr", "/root/x.zarr");
    joins("/root/", "x/./y/../in.zarr", "/root/x/in.zarr");
    joins("/root/", "x//in.zarr/", "/root/x/in.zarr/");
    joins("/root/", "./a/", "/root/a/");
    joins("/d/a.zarr", "/", "/d/a.zarr/");
    joins("/d/a.zarr/", "/", "/d/a.zarr/");
    joins("/d/a.zarr", "", "/d/a.zarr");
    joins("", "a/b/", "a/b/");
    joins("", "/", "");
    joins("x/", "a/..", "x/");
    joins("x/", "a/b/..", "x/a/");
    joins("x/", "a/b/../", "x/a/");
    joins("x/", "...", "x/...");     /* three dots are a name */
    joins("x/", "..a/b..", "x/..a/b..");
}
END_TEST

START_TEST(join_refuses_climbing) {
    climbs("/root/", "../x.zarr");
    climbs("/root/", "..");
    climbs("/root/", "a/../../x");
    climbs("/root/", "./../x");
    climbs("/root/", "a/b/../../../x");
    climbs("", "/../x");
}
END_TEST

START_TEST(check_root) {
    NDS_OK(nds_path_check_root("/d/../x", "p"));
    NDS_OK(nds_path_check_root("a/b/../c/", "p"));
    NDS_OK(nds_path_check_root("", "p"));
    NDS_OK(nds_path_check_root("...", "p"));
    ck_assert_int_eq(nds_path_check_root("../x/", "kvstore path"), NDS_EINVAL);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "../x/"));
    ck_assert_int_eq(nds_path_check_root("/../x", "p"), NDS_EINVAL);
    ck_assert_int_eq(nds_path_check_root("a/../../x", "p"), NDS_EINVAL);
}
END_TEST

START_TEST(spec_path_joins_under_the_kvstore) {
    json_object *spec = NULL, *kv, *path;
    NDS_OK(nds_spec_parse("{\"kvstore\":\"memory://root/\",\"path\":\"x/./y/../a.zarr\"}", &spec));
    ck_assert(json_object_object_get_ex(spec, "kvstore", &kv));
    ck_assert(json_object_object_get_ex(kv, "path", &path));
    ck_assert_str_eq(json_object_get_string(path), "root/x/a.zarr");
    ck_assert(!json_object_object_get_ex(spec, "path", NULL));
    json_object_put(spec);
    spec = NULL;
    ck_assert_int_eq(nds_spec_parse("{\"kvstore\":\"file:///root/\",\"path\":\"../x.zarr\"}", &spec),
                     NDS_EINVAL);
    ck_assert_ptr_null(spec);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "../x.zarr"));
}
END_TEST

START_TEST(empty_spec_refused) {
    static const char *const empty[] = {"", " ", "\t\n", " \r\n "};
    for (size_t i = 0; i < sizeof empty / sizeof empty[0]; i++) {
        json_object *spec = NULL;
        ck_assert_int_eq(nds_spec_parse(empty[i], &spec), NDS_EINVAL);
        ck_assert_ptr_null(spec);
        ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "empty"));
    }
    char dir[] = "/tmp/nds-spec-XXXXXX", file[64];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(file, sizeof file, "%s/s.json", dir);
    FILE *f = fopen(file, "w");
    ck_assert_ptr_nonnull(f);
    fputs(" \n", f);
    fclose(f);
    char at[80];
    snprintf(at, sizeof at, "@%s", file);
    json_object *spec = NULL;
    ck_assert_int_eq(nds_spec_parse(at, &spec), NDS_EINVAL);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "empty"));
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, file));
    unlink(file);
    rmdir(dir);
}
END_TEST

/* ---- URL pipelines: BASEURL(|ADAPTER:REST)* ---- */

static nds_kvstore *open_kv(const char *url) {
    nds_kvstore *kv = NULL;
    NDS_OK(nds_kvstore_open(&kv, url, NULL));
    return kv;
}

/* The value of key in kv, which must exist, as a string (caller frees). */
static char *value_of(nds_kvstore *kv, const char *key) {
    nds_read_result r;
    NDS_OK(nds_kvstore_read(kv, key, NULL, &r));
    ck_assert_msg(r.state == NDS_READ_VALUE, "%s%s is missing", nds_kvstore_url(kv), key);
    char *s = strndup((const char *)r.value.data, r.value.len);
    nds_read_result_dispose(&r);
    return s;
}

static void has_value(nds_kvstore *kv, const char *key, const char *want) {
    char *got = value_of(kv, key);
    ck_assert_str_eq(got, want);
    free(got);
}

/* Opening url is refused with NDS_EINVAL and a message holding each of the texts. */
static void url_refused(const char *url, const char *text1, const char *text2) {
    nds_kvstore *kv = NULL;
    nds_error_clear();
    int rc = nds_kvstore_open(&kv, url, NULL);
    ck_assert_msg(rc == NDS_EINVAL, "%s: got %d (%s), want NDS_EINVAL", url, rc,
                  nds_error_last()->message);
    ck_assert_ptr_null(kv);
    const char *msg = nds_error_last()->message;
    ck_assert_msg(strstr(msg, text1), "%s: message \"%s\" lacks \"%s\"", url, msg, text1);
    ck_assert_msg(!text2 || strstr(msg, text2), "%s: message \"%s\" lacks \"%s\"", url, msg, text2);
}

START_TEST(adapter_url_opens_and_round_trips_data) {
    nds_kvstore *kv = open_kv("memory://u1/|faulty:");
    ck_assert(nds_kvstore_capabilities(kv) & NDS_KV_CAP_ADAPTER);
    NDS_OK(nds_kvstore_write(kv, "k", "v1", 2, NULL, NULL));
    has_value(kv, "k", "v1");
    nds_kvstore *raw = open_kv("memory://u1/");
    has_value(raw, "k", "v1"); /* the base holds it: the URL named no faults */
    nds_kvstore_free(raw);
    nds_kvstore_free(kv);
}
END_TEST

START_TEST(adapter_url_path_is_under_the_base) {
    nds_kvstore *kv = open_kv("memory://u2/|faulty:p/");
    ck_assert_str_eq(nds_kvstore_path(kv), "p/");
    NDS_OK(nds_kvstore_write(kv, "k", "v2", 2, NULL, NULL));
    nds_kvstore *raw = open_kv("memory://u2/");
    has_value(raw, "p/k", "v2");
    nds_kvstore_free(raw);
    nds_kvstore_free(kv);
    /* The URL before an adapter names a directory: "u3" is "u3/", never a prefix of "u3p/k". */
    kv = open_kv("memory://u3|faulty:p/");
    NDS_OK(nds_kvstore_write(kv, "k", "v3", 2, NULL, NULL));
    raw = open_kv("memory://u3/");
    has_value(raw, "p/k", "v3");
    nds_kvstore_free(raw);
    nds_kvstore_free(kv);
}
END_TEST

START_TEST(adapters_stack) {
    json_object *spec = NULL;
    NDS_OK(nds_kvstore_url_to_spec("memory://u4/|faulty:a/|faulty:b/", &spec));
    json_object *inner = json_object_object_get(spec, "base");
    ck_assert_str_eq(json_object_get_string(json_object_object_get(spec, "driver")), "faulty");
    ck_assert_str_eq(json_object_get_string(json_object_object_get(spec, "path")), "b/");
    ck_assert_str_eq(json_object_get_string(json_object_object_get(inner, "path")), "a/");
    json_object *base = json_object_object_get(inner, "base");
    ck_assert_str_eq(json_object_get_string(json_object_object_get(base, "driver")), "memory");
    ck_assert_str_eq(json_object_get_string(json_object_object_get(base, "path")), "u4/");
    json_object_put(spec);
    nds_kvstore *kv = open_kv("memory://u4/|faulty:a/|faulty:b/");
    NDS_OK(nds_kvstore_write(kv, "k", "v4", 2, NULL, NULL));
    nds_kvstore *raw = open_kv("memory://u4/");
    has_value(raw, "a/b/k", "v4");
    ck_assert_str_eq(nds_kvstore_url(kv), "memory://u4/|faulty:a/|faulty:b/");
    nds_kvstore_free(kv);
    /* A JSON spec's "base" may itself be a pipeline. */
    kv = open_kv("{\"driver\":\"faulty\",\"base\":\"memory://u4/|faulty:a/\",\"path\":\"c/\"}");
    NDS_OK(nds_kvstore_write(kv, "k", "v4c", 3, NULL, NULL));
    has_value(raw, "a/c/k", "v4c");
    ck_assert_str_eq(nds_kvstore_url(kv), "memory://u4/|faulty:a/|faulty:c/");
    nds_kvstore_free(raw);
    nds_kvstore_free(kv);
}
END_TEST

START_TEST(handle_url_parses_back_to_the_same_store) {
    nds_kvstore *kv = open_kv("memory://u5/|faulty:p/");
    ck_assert(nds_kvstore_capabilities(kv) & NDS_KV_CAP_ADAPTER); /* not a memory path "u5/|f.." */
    ck_assert_str_eq(nds_kvstore_url(kv), "memory://u5/|faulty:p/");
    NDS_OK(nds_kvstore_write(kv, "k", "v5", 2, NULL, NULL));
    nds_kvstore *again = open_kv(nds_kvstore_url(kv));
    ck_assert_str_eq(nds_kvstore_url(again), nds_kvstore_url(kv));
    has_value(again, "k", "v5");
    ck_assert_str_eq(nds_kvstore_path(again), "p/");
    nds_kvstore *sub = NULL;
    NDS_OK(nds_kvstore_sub(&sub, kv, "q/"));
    ck_assert_str_eq(nds_kvstore_url(sub), "memory://u5/|faulty:p/q/");
    nds_kvstore_free(sub);
    nds_kvstore_free(again);
    nds_kvstore_free(kv);
}
END_TEST

START_TEST(non_adapters_refused_in_kvstore_urls) {
    url_refused("file:///x/|zarr:", "kvstore url \"file:///x/|zarr:\": \"zarr\" is not a kvstore adapter",
                NULL);
    url_refused("memory://x/|memory:", "\"memory\" is not a kvstore adapter", "memory://x/|memory:");
    url_refused("memory://x/|zip:", "\"zip\" is not a kvstore adapter", "memory://x/|zip:");
    url_refused("memory://x/|faulty:|zip:p", "\"zip\" is not a kvstore adapter", NULL);
    url_refused("memory://x/|Faulty:", "segment \"|Faulty:\"", "memory://x/|Faulty:");
    url_refused("memory://x/|faulty", "segment \"|faulty\"", NULL);
    url_refused("memory://x/||faulty:", "segment \"|\"", NULL);
    url_refused("memory://x/|:p", "segment \"|:p\"", NULL);
    url_refused("|faulty:", "no kvstore before", NULL);
}
END_TEST

/* A stand-in adapter with no parse_url: only URL parsing meets it. */
static const nds_kv_driver no_url_adapter = {
    .version = NDS_KV_DRIVER_VERSION,
    .name = "test-bare-adapter",
    .capabilities = NDS_KV_CAP_ADAPTER,
};

START_TEST(adapter_without_parse_url_takes_no_rest) {
    NDS_OK(nds_kv_driver_register(&no_url_adapter));
    json_object *spec = NULL;
    NDS_OK(nds_kvstore_url_to_spec("memory://u6|test-bare-adapter:", &spec));
    ck_assert_str_eq(json_object_get_string(json_object_object_get(spec, "driver")),
                     "test-bare-adapter");
    ck_assert_ptr_null(json_object_object_get(spec, "path"));
    json_object_put(spec);
    spec = NULL;
    ck_assert_int_eq(nds_kvstore_url_to_spec("memory://u6|test-bare-adapter:p/", &spec), NDS_EINVAL);
    ck_assert_ptr_null(spec);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "takes nothing after its ':'"));
}
END_TEST

START_TEST(array_url_over_an_adapter) {
    nds_array *a = NULL;
    nds_open_options o = NDS_OPEN_OPTIONS_INIT;
    o.mode = NDS_OPEN_CREATE;
    const char *create = "{\"driver\":\"zarr3\",\"kvstore\":\"memory://u7/|faulty:\",\"schema\":"
                         "{\"dtype\":\"uint8\",\"domain\":{\"shape\":[4]}}}";
    NDS_OK(nds_array_open(&a, create, &o));
    nds_array_free(a);
    a = NULL;
    NDS_OK(nds_array_open(&a, "memory://u7/|faulty:|zarr3:", NULL));
    ck_assert_str_eq(nds_array_format(a), "zarr3");
    ck_assert_str_eq(nds_kvstore_url(nds_array_kvstore(a)), "memory://u7/|faulty:");
    nds_box box;
    uint64_t shape[1] = {4};
    nds_box_full(&box, 1, shape);
    uint8_t in[4] = {1, 2, 3, 4}, out[4] = {0};
    NDS_OK(nds_array_write(a, &box, in, NULL));
    NDS_OK(nds_array_read(a, &box, out, NULL));
    ck_assert_mem_eq(in, out, 4);
    nds_array_free(a);
    a = NULL;
    NDS_OK(nds_array_open(&a, "memory://u7/|faulty:", NULL)); /* format detected */
    ck_assert_str_eq(nds_array_format(a), "zarr3");
    nds_array_free(a);
    nds_kvstore *raw = open_kv("memory://u7/");
    free(value_of(raw, "zarr.json"));
    nds_kvstore_free(raw);
}
END_TEST

/* nds_spec_url_split(url) gives kv and format (NULL = none). */
static void splits(const char *url, const char *kv, const char *format) {
    char *k = NULL, *f = NULL;
    NDS_OK(nds_spec_url_split(url, &k, &f));
    ck_assert_str_eq(k, kv);
    if (format)
        ck_assert_str_eq(f, format);
    else
        ck_assert_ptr_null(f);
    nds_free(k);
    nds_free(f);
}

static void split_refused(const char *url, int code, const char *text) {
    char *k = NULL, *f = NULL;
    nds_error_clear();
    ck_assert_int_eq(nds_spec_url_split(url, &k, &f), code);
    ck_assert_ptr_null(k);
    ck_assert_ptr_null(f);
    const char *msg = nds_error_last()->message;
    ck_assert_msg(strstr(msg, text) && strstr(msg, url), "%s: message \"%s\" lacks \"%s\"", url, msg,
                  text);
    json_object *spec = NULL; /* every open says the same */
    ck_assert_int_eq(nds_spec_parse(url, &spec), code);
    ck_assert_str_eq(nds_error_last()->message, msg);
}

START_TEST(array_urls_split_in_one_place) {
    splits("file:///d/a.zarr|zarr:", "file:///d/a.zarr", "zarr");
    splits("file:///d/|faulty:|zarr3:", "file:///d/|faulty:", "zarr3");
    splits("memory://x/|faulty:a/|faulty:b:c@d/|n5:", "memory://x/|faulty:a/|faulty:b:c@d/", "n5");
    splits("memory://x/|faulty:p/", "memory://x/|faulty:p/", NULL);
    splits("/d/a.zarr", "/d/a.zarr", NULL);
    split_refused("file:///d/|zarr:|faulty:|zarr:", NDS_EINVAL, "\"zarr\" is not a kvstore adapter");
    split_refused("file:///d/|memory:|zarr:", NDS_EINVAL, "\"memory\" is not a kvstore adapter");
    split_refused("file:///d/|zip:", NDS_ENOTFOUND, "\"zip\" is neither a kvstore adapter nor a format");
    split_refused("file:///d/|zarr:x", NDS_EINVAL, "nothing after its ':'");
    split_refused("file:///d/|faulty:|", NDS_EINVAL, "segment \"|\"");
}
END_TEST

/* Neuroglancer's data source URLs: "NAME://" before a kvstore URL names the format (zarr://: v2
 * or v3, detected); "|precomputed:" is neuroglancer_precomputed. */
START_TEST(neuroglancer_prefixes_name_the_format) {
    splits("precomputed://gs://bucket/vol", "gs://bucket/vol", "neuroglancer_precomputed");
    splits("precomputed://https://host/vol", "https://host/vol", "neuroglancer_precomputed");
    splits("precomputed://http://127.0.0.1:8080/a/b/", "http://127.0.0.1:8080/a/b/",
           "neuroglancer_precomputed");
    splits("zarr://s3://bucket/a.zarr", "s3://bucket/a.zarr", NULL);
    splits("zarr2://file:///d/a.zarr", "file:///d/a.zarr", "zarr");
    splits("zarr3://file:///d/a.zarr", "file:///d/a.zarr", "zarr3");
    splits("n5://memory://x/|faulty:p/", "memory://x/|faulty:p/", "n5");
    splits("zarr://file:///d|zarr3:", "file:///d", "zarr3");
    splits("precomputed://file:///d|neuroglancer_precomputed:", "file:///d",
           "neuroglancer_precomputed");
    splits("file:///d/v|precomputed:", "file:///d/v", "neuroglancer_precomputed");
    splits("file:///d/v|neuroglancer-precomputed:", "file:///d/v", "neuroglancer_precomputed");
    splits("gs://b/a.zarr|zarr2:", "gs://b/a.zarr", "zarr");
    splits("zarr2://gs://b/a.zarr|zarr2:", "gs://b/a.zarr", "zarr");
}
END_TEST

START_TEST(hostile_neuroglancer_prefixes_refused) {
    split_refused("precomputed://", NDS_EINVAL, "precomputed:// names no data source");
    split_refused("zarr3://|faulty:", NDS_EINVAL, "zarr3:// names no data source");
    split_refused("precomputed://precomputed://x", NDS_EINVAL, "two data source prefixes");
    split_refused("zarr://n5://file:///d", NDS_EINVAL, "two data source prefixes");
    split_refused("foo://x", NDS_ENOTFOUND, "unknown scheme \"foo://\"");
    split_refused("precomputed:///d/v", NDS_EINVAL, "must be followed by a kvstore url");
    split_refused("precomputed://bucket/vol", NDS_EINVAL, "must be followed by a kvstore url");
    split_refused("precomputed://foo://x", NDS_EINVAL, "must be followed by a kvstore url");
    split_refused("n5://file:///d|zarr3:", NDS_EINVAL, "n5:// and \"|zarr3:\" name different");
    split_refused("zarr://file:///d|n5:", NDS_EINVAL, "zarr:// and \"|n5:\" name different");
    split_refused("zarr2://file:///d|zarr3:", NDS_EINVAL, "name different formats");
    split_refused("precomputed://file:///d|zip:", NDS_ENOTFOUND, "\"zip\" is neither");
}
END_TEST

/* Opens through the prefixes: zarr:// finds a zarr v3 array, precomputed:// a volume. */
START_TEST(neuroglancer_urls_open) {
    nds_array *a = NULL;
    nds_open_options o = NDS_OPEN_OPTIONS_INIT;
    o.mode = NDS_OPEN_CREATE;
    NDS_OK(nds_array_open(&a, "{\"driver\":\"zarr3\",\"kvstore\":\"memory://ng1/z/\",\"schema\":"
                              "{\"dtype\":\"uint8\",\"domain\":{\"shape\":[4]}}}", &o));
    nds_array_free(a);
    NDS_OK(nds_array_open(&a, "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":"
                              "\"memory://ng1/v/\",\"schema\":{\"dtype\":\"uint8\","
                              "\"domain\":{\"shape\":[4,4,4,1]}}}", &o));
    nds_array_free(a);
    const char *opens[][2] = {{"zarr://memory://ng1/z/", "zarr3"},
                              {"zarr3://memory://ng1/z", "zarr3"},
                              {"precomputed://memory://ng1/v/", "neuroglancer_precomputed"},
                              {"memory://ng1/v|precomputed:", "neuroglancer_precomputed"}};
    for (size_t i = 0; i < sizeof opens / sizeof opens[0]; i++) {
        a = NULL;
        NDS_OK(nds_array_open(&a, opens[i][0], NULL));
        ck_assert_str_eq(nds_array_format(a), opens[i][1]);
        nds_array_free(a);
    }
    a = NULL;
    ck_assert_int_eq(nds_array_open(&a, "zarr2://memory://ng1/z/", NULL), NDS_ENOTFOUND);
    ck_assert_int_eq(nds_array_open(&a, "n5://memory://ng1/v/", NULL), NDS_ENOTFOUND);
}
END_TEST

int main(void) {
    Suite *s = suite_create("spec");
    TCase *tc = tcase_create("paths");
    tcase_add_test(tc, join_normalises);
    tcase_add_test(tc, join_refuses_climbing);
    tcase_add_test(tc, check_root);
    tcase_add_test(tc, spec_path_joins_under_the_kvstore);
    tcase_add_test(tc, empty_spec_refused);
    suite_add_tcase(s, tc);
    TCase *urls = tcase_create("urls");
    tcase_add_test(urls, adapter_url_opens_and_round_trips_data);
    tcase_add_test(urls, adapter_url_path_is_under_the_base);
    tcase_add_test(urls, adapters_stack);
    tcase_add_test(urls, handle_url_parses_back_to_the_same_store);
    tcase_add_test(urls, non_adapters_refused_in_kvstore_urls);
    tcase_add_test(urls, adapter_without_parse_url_takes_no_rest);
    tcase_add_test(urls, array_url_over_an_adapter);
    tcase_add_test(urls, array_urls_split_in_one_place);
    tcase_add_test(urls, neuroglancer_prefixes_name_the_format);
    tcase_add_test(urls, hostile_neuroglancer_prefixes_refused);
    tcase_add_test(urls, neuroglancer_urls_open);
    suite_add_tcase(s, urls);
    return nds_test_run(s);
}
