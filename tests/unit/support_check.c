/* Shared helpers for the Check suites. */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support_check.h"

int nds_test_run(Suite *s) {
    SRunner *r = srunner_create(s);
    srunner_set_fork_status(r, CK_FORK);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed == 0 ? 0 : 1;
}

char *nds_test_tmpdir(void) {
    const char *base = getenv("TMPDIR");
    char *path = NULL;
    if (asprintf(&path, "%s/ndstore-test-XXXXXX", base ? base : "/tmp") < 0) return NULL;
    if (!mkdtemp(path)) {
        free(path);
        return NULL;
    }
    return path;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

void nds_test_rmtree(const char *path) {
    if (path) nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void nds_test_write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    fclose(f);
}
