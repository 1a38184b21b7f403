/* Specs and the paths joined in them: nds_spec_parse (empty specs, a "path" under the kvstore),
 * nds_path_join / nds_path_check_root (the one normaliser of joined key paths). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "support_check.h"
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

int main(void) {
    Suite *s = suite_create("spec");
    TCase *tc = tcase_create("paths");
    tcase_add_test(tc, join_normalises);
    tcase_add_test(tc, join_refuses_climbing);
    tcase_add_test(tc, check_root);
    tcase_add_test(tc, spec_path_joins_under_the_kvstore);
    tcase_add_test(tc, empty_spec_refused);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
