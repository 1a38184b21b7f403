/* The built-in kvstore drivers, formats and codecs: the one core file that names them.
 * Adding one is adding its file and one row here. Format detection tries formats in this order.
 * The test driver "faulty" is no built-in: only a library configured with NDS_TEST_DRIVERS (the
 * default when the tests are built) has it, and registers it only when the environment variable
 * NDS_TEST_DRIVERS names it (nds_builtin_test_kv_drivers). */
#include <stdlib.h>
#include <string.h>

#include "internal/registry.h"

extern const nds_kv_driver nds_kv_driver_memory;
extern const nds_kv_driver nds_kv_driver_file;
extern const nds_kv_driver nds_kv_driver_lmdb;
extern const nds_kv_driver nds_kv_driver_s3;
extern const nds_kv_driver nds_kv_driver_gcs;
extern const nds_kv_driver nds_kv_driver_http;
extern const nds_kv_driver nds_kv_driver_https;
extern const nds_kv_driver nds_kv_driver_versioned;

extern const nds_format nds_format_zarr2;
extern const nds_format nds_format_zarr3;
extern const nds_format nds_format_n5;
extern const nds_format nds_format_precomputed;

extern const nds_codec nds_codec_zstd;
extern const nds_codec nds_codec_blosc;
extern const nds_codec nds_codec_gzip;
extern const nds_codec nds_codec_zlib;
extern const nds_codec nds_codec_bz2;
extern const nds_codec nds_codec_lz4;
extern const nds_codec nds_codec_xz;
extern const nds_codec nds_codec_crc32c;
extern const nds_codec nds_codec_adler32;
extern const nds_codec nds_codec_crc32;
extern const nds_codec nds_codec_fletcher32;
extern const nds_codec nds_codec_shuffle;

const nds_kv_driver *const nds_builtin_kv_drivers[] = {
    &nds_kv_driver_memory,
    &nds_kv_driver_file,
    &nds_kv_driver_lmdb,
    &nds_kv_driver_s3,
    &nds_kv_driver_gcs,
    &nds_kv_driver_http,
    &nds_kv_driver_https,
    &nds_kv_driver_versioned,
};
const size_t nds_builtin_kv_driver_count =
    sizeof nds_builtin_kv_drivers / sizeof nds_builtin_kv_drivers[0];

#ifdef NDS_TEST_DRIVERS
extern const nds_kv_driver nds_kv_driver_faulty; /* test driver: injects failures */

/* Whether the comma-separated list names name. */
static int list_names(const char *list, const char *name) {
    for (const char *p = list;; p++) {
        size_t len = strcspn(p, ",");
        if (len == strlen(name) && strncmp(p, name, len) == 0) return 1;
        p += len;
        if (!*p) return 0;
    }
}
#endif

size_t nds_builtin_test_kv_drivers(const nds_kv_driver **out, size_t cap) {
#ifdef NDS_TEST_DRIVERS
    const char *want = getenv("NDS_TEST_DRIVERS");
    if (want && cap > 0 && list_names(want, "faulty")) {
        out[0] = &nds_kv_driver_faulty;
        return 1;
    }
#else
    (void)out, (void)cap;
#endif
    return 0;
}

const nds_format *const nds_builtin_formats[] = {
    &nds_format_zarr2,
    &nds_format_zarr3,
    &nds_format_n5,
    &nds_format_precomputed,
};
const size_t nds_builtin_format_count = sizeof nds_builtin_formats / sizeof nds_builtin_formats[0];

const nds_codec *const nds_builtin_codecs[] = {
    &nds_codec_zstd, &nds_codec_blosc, &nds_codec_gzip, &nds_codec_zlib,
    &nds_codec_bz2,  &nds_codec_lz4,   &nds_codec_xz,   &nds_codec_crc32c,
    &nds_codec_adler32, &nds_codec_fletcher32, &nds_codec_shuffle, &nds_codec_crc32,
};
const size_t nds_builtin_codec_count = sizeof nds_builtin_codecs / sizeof nds_builtin_codecs[0];
