/* The kvstore contract suite (DESIGN.md section 2), run against any driver through the public API.
 *
 * Usage: in a test's main(), suite_add_tcase(s, nds_kv_conformance_tcase("memory",
 * make_memory_url)); make_url must return the URL of a new, empty store each time it is called
 * ("memory://t1/", "file:///tmp/x/"), ending in '/', and the string must stay valid until the
 * process exits. Tests run in forked children (CK_FORK), so a make_url may create directories and
 * register their removal at exit.
 */
#ifndef NDS_TEST_SUPPORT_KV_CONFORMANCE_H
#define NDS_TEST_SUPPORT_KV_CONFORMANCE_H

#include <check.h>
#include <stddef.h>
#include "ndstore/kvstore.h"

/** Returns the URL of a new empty store (see above). */
typedef const char *(*nds_kv_url_fn)(void);

/** A test case holding every contract test, run against the stores make_url creates (up to 8
 *  per process). */
TCase *nds_kv_conformance_tcase(const char *name, nds_kv_url_fn make_url);

/** Opens the kvstore whose spec or URL fmt (printf-style) makes; fails the test on error. */
nds_kvstore *nds_kv_test_open(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/** The status of opening spec (the handle, if any, is freed): for specs that must be refused. */
int nds_kv_test_open_status(const char *spec);
/** Reads key into a malloc'd NUL-terminated string (NULL when missing; fails the test on
 *  error). gen (may be NULL) receives the generation. */
char *nds_kv_test_get(nds_kvstore *kv, const char *key, nds_generation *gen);
/** Writes a string value unconditionally (fails the test on error); returns the new generation. */
nds_generation nds_kv_test_put(nds_kvstore *kv, const char *key, const char *value);
/** Lists prefix into "key=size" entries, sorted and joined by ','; malloc'd. */
char *nds_kv_test_list(nds_kvstore *kv, const char *prefix);
/** Adds one to the decimal counter at key with read + conditional write, retrying on conflict.
 *  @return the number of conflicts met */
int nds_kv_test_increment(nds_kvstore *kv, const char *key);
/** procs forked processes, each with its own handle on url, increment the decimal counter at key
 *  "counter" rounds times (read + conditional write, retried on conflict); then the counter must
 *  be procs * rounds (no lost update). Fails the test naming a process that failed. */
void nds_kv_test_processes_increment(const char *url, int procs, int rounds);
/** A versioned store's contract under many processes (url ends in "|versioned:"): procs forked
 *  processes each commit rounds times an increment of the shared "counter" (read + conditional
 *  write, retried on conflict: an overlapping key) and a write of their own "own/<p>/<i>"
 *  (disjoint keys), recording the version each commit made. Then no commit is lost or made twice
 *  (versions 1..2 * procs * rounds, each made by exactly one recorded commit, and no later one),
 *  and every version, opened as url@N/, reads back exactly what was committed in it: the key
 *  written at N with its value and generation vN, the counter as of N, and exactly the keys (and
 *  sizes) written up to N. */
void nds_kv_test_versioned_processes(const char *url, int procs, int rounds);

#endif
