/* Helpers shared by the format suites (zarr v2, zarr v3, N5, precomputed): specs from printf formats, raw
 * keys on a kvstore URL, and error expectations. */
#ifndef NDS_TEST_SUPPORT_FORMAT_H
#define NDS_TEST_SUPPORT_FORMAT_H

#include <string.h>
#include <json-c/json.h>
#include "support_check.h"

/** nds_array_open on a printf-formatted spec (at most 16 KiB); *a is NULL on failure. */
int open_spec(nds_array **a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/** Writes key = data[0..len) under a kvstore URL (asserting success). */
void put_raw(const char *url, const char *key, const void *data, size_t len);
/** Writes key = text under a kvstore URL. */
void put_text(const char *url, const char *key, const char *text);
/** The value of key under a kvstore URL, NUL-terminated and malloc'd, or NULL when missing; *len (may be
 *  NULL) gets its size. */
void *get_raw(const char *url, const char *key, size_t *len);
/** The value of key parsed as JSON (asserting it exists and parses); json_object_put it. */
json_object *get_json(const char *url, const char *key);
/** The compact JSON of member key of o (borrowed from o), or "absent". */
const char *member_str(json_object *o, const char *key);

/** Reads the whole array into out (asserting success). */
void read_all(nds_array *a, void *out);
/** Writes in to the whole array (asserting success). */
void write_all(nds_array *a, const void *in);

/** Asserts that expr returns code and that the last error message contains substr. */
#define EXPECT_ERR(expr, code, substr)                                                          \
    do {                                                                                        \
        int rc_ = (expr);                                                                       \
        const char *msg_ = nds_error_last()->message;                                           \
        ck_assert_msg(rc_ == (code), "%s: expected %d, got %d (%s)", #expr, (code), rc_, msg_); \
        ck_assert_msg(strstr(msg_, (substr)) != NULL, "%s: message \"%s\" lacks \"%s\"", #expr, \
                      msg_, (substr));                                                          \
    } while (0)

#endif
