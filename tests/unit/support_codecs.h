/* Helpers of the codec suites (test_codecs.c, test_codecs_part.c): instances from JSON text, data
 * patterns, guarded output buffers, error expectations, encodings. Header-only (static inline):
 * each suite is its own program. */
#ifndef NDS_TEST_SUPPORT_CODECS_H
#define NDS_TEST_SUPPORT_CODECS_H

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "ndstore/errors.h"
#include "ndstore/sys/codec.h"
#include "internal/json_util.h"

extern const nds_codec nds_codec_zstd;
extern const nds_codec nds_codec_blosc;
extern const nds_codec nds_codec_gzip;
extern const nds_codec nds_codec_zlib;
extern const nds_codec nds_codec_bz2;
extern const nds_codec nds_codec_lz4;

#define GUARD 64
#define GUARD_BYTE 0xA5
#define MIB (1u << 20)

static inline json_object *parse(const char *text) {
    json_object *o = NULL;
    ck_assert_msg(nds_json_parse(text, strlen(text), "test", &o) == 0, "bad test json %s", text);
    return o;
}

/* Creates an instance from JSON text (NULL = no config), asserting success. */
static inline void *make(const nds_codec *c, const char *json, size_t elem_size) {
    json_object *cfg = json ? parse(json) : NULL;
    void *st = NULL;
    int rc = c->create(&st, cfg, elem_size);
    ck_assert_msg(rc == 0, "%s create %s: %d %s", c->name, json ? json : "(null)", rc,
                  nds_error_last()->message);
    json_object_put(cfg);
    return st;
}

static uint64_t rng_state = 88172645463325252ull;
static inline uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

enum { PAT_ZERO, PAT_RAMP, PAT_RANDOM, PAT_INT32, PAT_TEXT, PAT_SPARSE, PAT_COUNT };

static inline void fill(uint8_t *p, size_t n, int pattern) {
    static const char text[] = "the quick brown fox jumps over the lazy dog 0123456789. ";
    for (size_t i = 0; i < n; i++) {
        switch (pattern) {
        case PAT_ZERO: p[i] = 0; break;
        case PAT_RAMP: p[i] = (uint8_t)i; break;
        case PAT_RANDOM: p[i] = (uint8_t)(rnd() >> 24); break;
        case PAT_INT32: p[i] = (uint8_t)((i / 4 * 7919) >> (8 * (i % 4))); break;
        case PAT_TEXT: p[i] = (uint8_t)text[i % (sizeof text - 1)]; break;
        default: p[i] = (rnd() % 97 == 0) ? (uint8_t)rnd() : 0; break;
        }
    }
}

/* An output buffer of cap bytes followed by GUARD bytes that must never change. */
static inline uint8_t *guarded(size_t cap) {
    uint8_t *p = malloc(cap + GUARD);
    ck_assert_ptr_nonnull(p);
    memset(p, 0x5A, cap);
    memset(p + cap, GUARD_BYTE, GUARD);
    return p;
}

static inline void check_guard(const uint8_t *p, size_t cap, const char *what) {
    for (size_t i = 0; i < GUARD; i++)
        ck_assert_msg(p[cap + i] == GUARD_BYTE, "%s: byte %zu past out_cap %zu was written", what,
                      i, cap);
}

static inline void assert_error(int rc, int code, const char *needle, const char *what) {
    ck_assert_msg(rc == code, "%s: expected %d (%s), got %d: %s", what, code, nds_strerror(code),
                  rc, nds_error_last()->message);
    if (needle)
        ck_assert_msg(strstr(nds_error_last()->message, needle) != NULL,
                      "%s: message \"%s\" does not mention \"%s\"", what, nds_error_last()->message,
                      needle);
}

static inline void encode_ok(const nds_codec *c, void *st, const uint8_t *in, size_t len,
                             nds_buf *out) {
    int rc = c->encode(st, in, len, out);
    ck_assert_msg(rc == 0, "%s encode %zu bytes: %d %s", c->name, len, rc,
                  nds_error_last()->message);
}

/* Fills data[0..len) with pattern and encodes it into out. */
static inline void encode_filled(const nds_codec *c, void *st, uint8_t *data, size_t len,
                                 int pattern, nds_buf *out) {
    fill(data, len, pattern);
    encode_ok(c, st, data, len, out);
}

/* Encodes data[0..split) and data[split..len) separately into out, one after the other (two
 * frames, members or streams); returns out->len. */
static inline size_t encode_two(const nds_codec *c, void *st, const uint8_t *data, size_t split,
                                size_t len, nds_buf *out) {
    nds_buf second = {0};
    encode_ok(c, st, data, split, out);
    encode_ok(c, st, data + split, len - split, &second);
    nds_buf_append(out, second.data, second.len);
    nds_buf_dispose(&second);
    return out->len;
}

#endif
