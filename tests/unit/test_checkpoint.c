/* Checkpoint commit markers: absent until marked, marked once (create-only), arrays checked first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support_check.h"

START_TEST(mark_once_after_arrays_exist) {
    nds_array *a = NULL;
    NDS_OK(nds_array_open(&a,
                          "{\"driver\":\"zarr\",\"kvstore\":\"memory://ckpt1/layer/w/\",\"create\":true,"
                          "\"schema\":{\"dtype\":\"float32\",\"domain\":{\"shape\":[4]}}}",
                          NULL));
    int complete = 1;
    char *marker = NULL;
    NDS_OK(nds_checkpoint_status("memory://ckpt1/", "step-1", &complete, &marker, NULL));
    ck_assert_int_eq(complete, 0);
    ck_assert_ptr_null(marker);
    const char *arrays[] = {"layer/w", "layer/missing"};
    ck_assert_int_eq(nds_checkpoint_mark("memory://ckpt1/", "step-1", arrays, 2, NULL), NDS_ENOTFOUND);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "layer/missing"));
    NDS_OK(nds_checkpoint_status("memory://ckpt1", "step-1", &complete, NULL, NULL));
    ck_assert_int_eq(complete, 0); /* a failed mark writes nothing */
    NDS_OK(nds_checkpoint_mark("memory://ckpt1", "step-1", arrays, 1, NULL));
    ck_assert_int_eq(nds_checkpoint_mark("memory://ckpt1/", "step-1", arrays, 1, NULL), NDS_EEXIST);
    NDS_OK(nds_checkpoint_status("memory://ckpt1/", "step-1", &complete, &marker, NULL));
    ck_assert_int_eq(complete, 1);
    ck_assert_ptr_nonnull(strstr(marker, "\"layer/w\""));
    nds_free(marker);
    nds_array_free(a);
}
END_TEST

START_TEST(bad_names_and_markers) {
    int complete;
    ck_assert_int_eq(nds_checkpoint_mark("memory://ckpt2/", "a/b", NULL, 0, NULL), NDS_EINVAL);
    ck_assert_int_eq(nds_checkpoint_mark("memory://ckpt2/", "", NULL, 0, NULL), NDS_EINVAL);
    nds_kvstore *kv;
    NDS_OK(nds_kvstore_open(&kv, "memory://ckpt2/", NULL));
    NDS_OK(nds_kvstore_write(kv, "s.checkpoint.json", "{trunc", 6, NULL, NULL));
    ck_assert_int_eq(nds_checkpoint_status("memory://ckpt2/", "s", &complete, NULL, NULL), NDS_ECORRUPT);
    ck_assert_int_eq(complete, 0);
    nds_kvstore_free(kv);
}
END_TEST

int main(void) {
    Suite *s = suite_create("checkpoint");
    TCase *tc = tcase_create("checkpoint");
    tcase_add_test(tc, mark_once_after_arrays_exist);
    tcase_add_test(tc, bad_names_and_markers);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
