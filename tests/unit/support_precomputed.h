/* Helpers of the neuroglancer precomputed test suites (test_precomputed.c,
 * test_precomputed_shard.c): keys under a prefix, a whole-array box, the test pattern, the last
 * error's message. Header-only (static inline): each suite is its own program. */
#ifndef NDS_TEST_SUPPORT_PRECOMPUTED_H
#define NDS_TEST_SUPPORT_PRECOMPUTED_H

#include <stdint.h>
#include <string.h>

#include "support_check.h"
#include "ndstore/ndstore.h"

/* The multiscale part of a spec: uint16, two channels, an image. */
#define MS_U16                                                                                     \
    "\"multiscale_metadata\":{\"data_type\":\"uint16\",\"num_channels\":2,\"type\":\"image\"}"

static inline int count_keys_fn(void *ctx, const char *key, uint64_t size) {
    (void)key, (void)size;
    ++*(int *)ctx;
    return 0;
}

static inline int count_keys(const char *url, const char *prefix) {
    nds_kvstore *kv;
    int n = 0;
    NDS_OK(nds_kvstore_open(&kv, url, NULL));
    NDS_OK(nds_kvstore_list(kv, prefix, count_keys_fn, &n));
    nds_kvstore_free(kv);
    return n;
}

static inline void whole(nds_array *a, nds_box *box) {
    uint64_t shape[NDS_MAX_RANK];
    nds_array_shape(a, shape);
    nds_box_full(box, nds_array_rank(a), shape);
}

/* Element (x, y, z, c) of the test pattern for a dtype size, in C order over [x, y, z, c]. */
static inline uint64_t pattern(uint64_t x, uint64_t y, uint64_t z, uint64_t c) {
    return (x * 7 + y * 13 + z * 31 + c * 101) ^ (x * y);
}

/* Fills buf (C order over shape[4]) with pattern, truncated to elem bytes (little-endian host). */
static inline void fill_pattern(uint8_t *buf, const uint64_t *shape, size_t elem, uint64_t mask) {
    size_t i = 0;
    for (uint64_t x = 0; x < shape[0]; x++)
        for (uint64_t y = 0; y < shape[1]; y++)
            for (uint64_t z = 0; z < shape[2]; z++)
                for (uint64_t c = 0; c < shape[3]; c++, i++) {
                    uint64_t v = pattern(x, y, z, c) & mask;
                    memcpy(buf + i * elem, &v, elem); /* tests run on little-endian hosts */
                }
}

static inline const char *last_message(void) { return nds_error_last()->message; }

#endif
