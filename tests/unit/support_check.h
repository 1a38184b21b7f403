/* Shared helpers for the Check suites. */
#ifndef NDS_TEST_SUPPORT_CHECK_H
#define NDS_TEST_SUPPORT_CHECK_H

#include <check.h>
#include "ndstore/ndstore.h"

/** Runs suite s in fork mode; returns the process exit status (0 when every test passed). */
int nds_test_run(Suite *s);
/** Asserts rc == 0 and shows the last error message when not. */
#define NDS_OK(expr)                                                                              \
    do {                                                                                          \
        int nds_ok_rc_ = (expr);                                                                  \
        ck_assert_msg(nds_ok_rc_ == 0, "%s failed: %d (%s)", #expr, nds_ok_rc_,                   \
                      nds_error_last()->message);                                                 \
    } while (0)
/** A fresh temporary directory (malloc'd path, no trailing slash). */
char *nds_test_tmpdir(void);
/** Removes a directory tree. */
void nds_test_rmtree(const char *path);
/** Creates or replaces the file at path with n bytes of data, asserting success. */
void nds_test_write_file(const char *path, const void *data, size_t n);

#endif
