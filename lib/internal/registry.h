/* Name -> vtable registries for kvstore drivers, formats and codecs. The built-ins are listed once,
 * in lib/builtins.c; lookups take a read lock, so registration at run time is safe. */
#ifndef NDS_INTERNAL_REGISTRY_H
#define NDS_INTERNAL_REGISTRY_H

#include "ndstore/sys/kv_driver.h"
#include "ndstore/sys/format.h"
#include "ndstore/sys/codec.h"

/** Finds a kvstore driver by spec name; NULL when unknown. */
const nds_kv_driver *nds_kv_driver_find(const char *name);
/** Finds a kvstore driver by URL scheme; NULL when unknown. */
const nds_kv_driver *nds_kv_driver_find_scheme(const char *scheme);
/** The format name an alias in "|NAME:" stands for ("precomputed": "neuroglancer_precomputed"), or
 *  name itself when it is no alias. */
const char *nds_format_alias(const char *name);

/** The built-in tables (lib/builtins.c) and their lengths. */
extern const nds_kv_driver *const nds_builtin_kv_drivers[];
extern const size_t nds_builtin_kv_driver_count;
/** Test drivers the environment asks for (NDS_TEST_DRIVERS=faulty) in a library configured with
 *  NDS_TEST_DRIVERS, else none: fills out (cap entries) and returns how many. */
size_t nds_builtin_test_kv_drivers(const nds_kv_driver **out, size_t cap);
extern const nds_format *const nds_builtin_formats[];
extern const size_t nds_builtin_format_count;
extern const nds_codec *const nds_builtin_codecs[];
extern const size_t nds_builtin_codec_count;

#endif
