/* Helpers shared by the format suites (zarr v2, zarr v3, N5, precomputed): specs from printf
 * formats, raw keys on a kvstore URL, error expectations, the fixtures directory and .npy
 * comparisons, and the "racy" test kvstore (a competing writer, and a write counter). */
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

/** Creates a zarr v2 array at memory://<path>/ with the given "metadata" members (a JSON object's
 *  body), asserting success. */
nds_array *zarr2_in_memory(const char *path, const char *members);
/** A whole zarr v3 zarr.json for an array, with the codecs (JSON array text) and fill given (a
 *  static buffer, overwritten by the next call). */
const char *zarr3_array_doc(const char *shape, const char *dtype, const char *chunks,
                            const char *fill, const char *codecs);
/** Creates a zarr v3 array at memory://<path>/ from a whole zarr.json (doc), asserting success. */
nds_array *zarr3_in_memory(const char *path, const char *doc);
/** Tries to create a zarr v3 array at memory://<path>/ from doc; returns the status (the array, if
 *  made, is freed), for tests of refusals. */
int zarr3_create_status(const char *path, const char *doc);

/** Reads the whole array into out (asserting success). */
void read_all(nds_array *a, void *out);
/** Writes in to the whole array (asserting success). */
void write_all(nds_array *a, const void *in);

/** Asserts that a's attributes are the JSON object want (compared as JSON, not as text). */
void assert_attributes(nds_array *a, const char *want);

/** The fixtures directory into buf: $NDS_FIXTURES when absolute, else relative to the source
 * root (default tests/fixtures, in the repository); empty when it does not fit in cap. */
void nds_test_fixtures_dir(char *buf, size_t cap);
/** Opens the array at url and asserts that it equals the .npy file npy (rank, shape, item size and
 * every byte; name labels failures); returns it open. */
nds_array *open_expect_npy(const char *url, const char *npy, const char *name);

/** Reads n random boxes (steps included) of the 3-d uint16 array a and asserts each against v, its
 *  elements (shape[0..3), C order); name labels failures. */
void assert_random_boxes_u16(nds_array *a, const uint16_t *v, const uint64_t *shape, int n,
                             const char *name);

/** Sets the elements of the 3-d C-order array v (shape[0..3)) in the box [lo, hi) (clipped to the
 *  shape) to value: what a read sees where a chunk is missing. */
void set_box_u16(uint16_t *v, const uint64_t *shape, const uint64_t *lo, const uint64_t *hi,
                 uint16_t value);
/** Writes 2 into elements 4 to 7 of a one-dimensional array of 8 two-byte integers (the competing
 *  writer of the tests that race a batched write). */
void write_twos_to_second_half(nds_array *a);

/* The "racy" kvstore driver: racy://x/ names the keys of memory://x/, and a competing writer may
 * act right before a write or delete of a key ending in race_suffix (a metadata document):
 * - with a create-only write and race_doc set, it creates the key holding race_doc first (race_doc
 *   is then NULL: the race happened);
 * - with a conditional write and race_bumps > 0, it rewrites the stored value as it is, so its
 *   generation changes (race_bumps counts down).
 * race_writes counts the writes (published or not) and deletes of the other keys (atomically: chunk writes run on
 * pool threads). */
extern const char *race_doc;
extern int race_bumps;
extern int race_writes;
/* The racy driver stages writes (kv_driver.h) and publishes them as conditional writes; when set,
 * race_before_publish runs once (then is NULL again) at the start of the next publish. */
extern void (*race_before_publish)(void);
/** Registers the driver and arms it for keys ending in suffix: race_doc NULL,
 * race_bumps and race_writes 0. */
void racy_register(const char *suffix);

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
