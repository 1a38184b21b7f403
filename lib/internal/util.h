/* Small internal helpers: overflow-checked arithmetic, string helpers. */
#ifndef NDS_INTERNAL_UTIL_H
#define NDS_INTERNAL_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** *out = a * b; false on overflow. */
static inline bool nds_mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool nds_mul_size(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
static inline bool nds_add_u64(uint64_t a, uint64_t b, uint64_t *out) {
    return !__builtin_add_overflow(a, b, out);
}
static inline uint64_t nds_min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }
static inline uint64_t nds_max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }
static inline uint64_t nds_ceil_div(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

/* Little-endian fields of stored formats (blosc headers, shard indexes, checksums), byte by byte
 * so that any alignment and any host byte order work. */
static inline uint32_t nds_load_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t nds_load_le64(const uint8_t *p) {
    return (uint64_t)nds_load_le32(p) | (uint64_t)nds_load_le32(p + 4) << 32;
}
static inline void nds_store_le32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void nds_store_le64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/** Product of n values into *out; false on overflow. An empty product is 1. */
bool nds_product_u64(const uint64_t *v, size_t n, uint64_t *out);

/** malloc'd copy of s (NULL on failure or NULL s). */
char *nds_strdup(const char *s);
/** The smallest key above every key that starts with prefix (malloc'd; "" when there is none: no
 *  bound), for turning a prefix into a key range. NULL when out of memory. */
char *nds_prefix_successor(const char *prefix);
/** malloc'd printf result, or NULL. */
char *nds_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/**
 * The one normaliser for joining a relative key path under a base (a spec's "path" under its
 * kvstore, a group path, a sub-store of a handle): rel's empty and "." components are dropped and
 * each ".." removes the component of rel before it. A ".." with nothing of rel left to remove
 * would climb above base: an error (NDS_EINVAL, "WHAT \"rel\" climbs above ..."). A '/' separates
 * base and rel when base is not empty and does not end in one; the result ends in '/' when rel
 * names a directory (ends in '/', "." or ".."). *out is malloc'd (free) on success.
 */
int nds_path_join(const char *base, const char *rel, const char *what, char **out);
/** 0 when path's ".." components never climb above where it starts (its root); else NDS_EINVAL
 *  naming what and path. Nothing is rewritten: a stored path keeps its meaning. */
int nds_path_check_root(const char *path, const char *what);
/** Monotonic clock in nanoseconds. */
uint64_t nds_now_ns(void);
/** Sleeps ns nanoseconds. */
void nds_sleep_ns(uint64_t ns);
/** A thread-safe pseudo-random 64-bit value (for jitter and temp names; not for security). */
uint64_t nds_random_u64(void);

#endif
