/* The versioned store's named and timed versions: tags (created once, never moved, listed by name,
 * pinned with @TAG) and versions opened at a UTC time (@TIME, "time"). test_versioned.c has the
 * rest of the adapter's tests. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "support_check.h"
#include "support_kv_conformance.h"
#include "../../drivers/versioned_store.h"

static const char *memory_base(void) {
    static char url[128];
    static int n;
    snprintf(url, sizeof url, "memory://versioned-history-%d-%d/", (int)getpid(), ++n);
    return url;
}

START_TEST(tags_name_versions_and_never_move) {
    const char *base = memory_base();
    nds_kvstore *kv = nds_kv_test_open("%s|versioned:", base), *b = nds_kv_test_open("%s", base);
    nds_kv_test_put(kv, "k", "first");
    nds_kv_test_put(kv, "k", "second");
    vs_store *s;
    NDS_OK(vs_store_open(&s, b, base));
    NDS_OK(vs_store_tag_create(s, "step-100", 1));
    ck_assert_int_eq(vs_store_tag_create(s, "step-100", 2), NDS_ECONFLICT);
    ck_assert_int_eq(vs_store_tag_create(s, "123", 2), NDS_EINVAL);
    ck_assert_int_eq(vs_store_tag_create(s, "latest", 2), NDS_EINVAL);
    ck_assert_int_eq(vs_store_tag_create(s, "x", 9), NDS_ENOTFOUND);
    vs_store_free(s);
    nds_kvstore *at = nds_kv_test_open("%s|versioned:@step-100/", base);
    char *got = nds_kv_test_get(at, "k", NULL);
    ck_assert_str_eq(got, "first");
    free(got);
    nds_kvstore_free(at);
    char spec[512];
    snprintf(spec, sizeof spec, "%s|versioned:@nope/", base);
    ck_assert_int_eq(nds_kv_test_open_status(spec), NDS_ENOTFOUND);
    nds_kvstore_free(kv);
    nds_kvstore_free(b);
}
END_TEST

typedef struct seen_tags {
    char names[8][32];
    uint64_t versions[8];
    int n;
} seen_tags;

static int note_tag(void *ctx, const char *name, uint64_t version) {
    seen_tags *t = ctx;
    ck_assert_int_lt(t->n, 8);
    snprintf(t->names[t->n], sizeof t->names[t->n], "%s", name);
    t->versions[t->n++] = version;
    return 0;
}

/* nds_versioned_tags: every tag by name with its version; keys under tags/ that are not tags are
 * skipped; a tag that does not decode is an error naming it; a plain store is refused. */
START_TEST(tags_are_listed_by_name) {
    const char *base = memory_base();
    nds_kvstore *kv = nds_kv_test_open("%s|versioned:", base), *b = nds_kv_test_open("%s", base);
    seen_tags t = {0};
    NDS_OK(nds_versioned_tags(kv, note_tag, &t));
    ck_assert_int_eq(t.n, 0);
    nds_kv_test_put(kv, "k", "first");
    nds_kv_test_put(kv, "k", "second");
    NDS_OK(nds_versioned_tag(kv, "zeta", 1));
    NDS_OK(nds_versioned_tag(kv, "alpha", 2));
    NDS_OK(nds_versioned_tag(kv, "mid.1", 1));
    nds_kv_test_put(b, "tags/not a tag", "junk"); /* not a valid tag name: names nothing */
    NDS_OK(nds_versioned_tags(kv, note_tag, &t));
    ck_assert_int_eq(t.n, 3);
    ck_assert_str_eq(t.names[0], "alpha");
    ck_assert_str_eq(t.names[1], "mid.1");
    ck_assert_str_eq(t.names[2], "zeta");
    ck_assert_uint_eq(t.versions[0], 2);
    ck_assert_uint_eq(t.versions[1], 1);
    ck_assert_uint_eq(t.versions[2], 1);
    nds_kv_test_put(b, "tags/broken", "NDSV garbage");
    t.n = 0;
    ck_assert_int_eq(nds_versioned_tags(kv, note_tag, &t), NDS_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "tags/broken"));
    ck_assert_int_eq(nds_versioned_tags(b, note_tag, &t), NDS_EINVAL);
    nds_kvstore_free(kv);
    nds_kvstore_free(b);
}
END_TEST

static int note_times(void *ctx, const nds_version_info *info) {
    int64_t *times = ctx;
    times[info->version] = info->time_ns;
    return 0;
}

/* UTC text of ns with all 9 fraction digits. */
static void utc_text(int64_t ns, char *buf, size_t cap) {
    time_t secs = (time_t)(ns / 1000000000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    char whole[32];
    strftime(whole, sizeof whole, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, cap, "%s.%09" PRId64 "Z", whole, ns % 1000000000);
}

/* "@TIME" and "time": the newest version committed at or before a UTC time, read-only. */
START_TEST(versions_open_at_a_time) {
    const char *base = memory_base();
    nds_kvstore *kv = nds_kv_test_open("%s|versioned:", base);
    nds_kv_test_put(kv, "k", "first");
    struct timespec pause = {0, 20 * 1000 * 1000};
    nanosleep(&pause, NULL);
    nds_kv_test_put(kv, "k", "second");
    int64_t times[3] = {0};
    NDS_OK(nds_versioned_log(kv, 0, note_times, times));
    ck_assert_int_gt(times[2], times[1]);
    char at[64];
    utc_text(times[1] + (times[2] - times[1]) / 2, at, sizeof at); /* between the two commits */
    nds_kvstore *then = nds_kv_test_open("%s|versioned:@%s/", base, at);
    char *got = nds_kv_test_get(then, "k", NULL);
    ck_assert_str_eq(got, "first");
    free(got);
    ck_assert_int_eq(nds_kvstore_write(then, "k", "x", 1, NULL, NULL), NDS_EREADONLY);
    nds_kvstore_free(then);
    utc_text(times[2], at, sizeof at); /* exactly the second commit's time: that one */
    then = nds_kv_test_open("%s|versioned:@%s/", base, at);
    got = nds_kv_test_get(then, "k", NULL);
    ck_assert_str_eq(got, "second");
    free(got);
    nds_kvstore_free(then);
    char spec[512];
    utc_text(times[1] - 1000000000, at, sizeof at); /* before anything was committed */
    snprintf(spec, sizeof spec, "%s|versioned:@%s/", base, at);
    ck_assert_int_eq(nds_kv_test_open_status(spec), NDS_ENOTFOUND);
    snprintf(spec, sizeof spec, "%s|versioned:@2026-13-99T10:00:00Z/", base);
    ck_assert_int_eq(nds_kv_test_open_status(spec), NDS_EINVAL);
    snprintf(spec, sizeof spec, "%s|versioned:@2026-11-27T10:00:00+01:00/", base);
    ck_assert_int_eq(nds_kv_test_open_status(spec), NDS_EINVAL);
    snprintf(spec, sizeof spec,
             "{\"driver\":\"versioned\",\"base\":\"%s\",\"tag\":\"x\",\"time\":\"%s\"}", base, at);
    ck_assert_int_eq(nds_kv_test_open_status(spec), NDS_EINVAL);
    nds_kvstore_free(kv);
}
END_TEST

int main(void) {
    Suite *s = suite_create("versioned history");
    TCase *tc = tcase_create("history");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, tags_name_versions_and_never_move);
    tcase_add_test(tc, tags_are_listed_by_name);
    tcase_add_test(tc, versions_open_at_a_time);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
