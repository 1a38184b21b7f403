/* libFuzzer harness for the array codecs and numcodecs filters (formats/codecs/array_codecs.c) and
 * the registry codecs adler32, fletcher32 and shuffle.
 *
 * Input layout: byte 0 picks a filter chain (byte % N_CHAINS); byte 1 the element count (byte % 64,
 * times 1 + bits 6-7); the rest is the payload. Every chain decodes the payload (as the stored
 * filters' output) into a guarded buffer: it must succeed (when the size is right and checksums
 * match) or fail with NDS_ECORRUPT, never crash or write past the chunk. The payload, cut or
 * zero-padded to the chunk, is then encoded and decoded back: lossless chains must give it back,
 * lossy ones must give back what encoding it again gives (bitround and quantize are idempotent;
 * fixedscaleoffset of floats is not and is only decoded; bitround on integers, a zarr v3 codec, is
 * parsed as v3 array codecs are, in host order). The registry codecs also decode the
 * payload directly under the same contract.
 * Run: fuzz_filters fuzz/corpus/fuzz_filters/ ; replayed in CI by replay_main.c.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "ndstore/errors.h"
#include "ndstore/sys/codec.h"
#include "../formats/codecs/array_codecs.h"

#define GUARD 64

typedef enum { LOSSLESS, IDEMPOTENT, LOSSY } kind;

typedef struct {
    const char *dtype, *filters;
    kind k;
} chain_case;

static const chain_case chains[] = {
    {"<i4", "[{\"id\":\"delta\",\"dtype\":\"<i4\"}]", LOSSLESS},
    {">i2", "[{\"id\":\"delta\",\"dtype\":\">i2\",\"astype\":\"|i1\"}]", LOSSY},
    {"<f8", "[{\"id\":\"delta\",\"dtype\":\"<f8\"}]", LOSSY},
    {"|u1", "[{\"id\":\"delta\",\"dtype\":\"|u1\"}]", LOSSLESS},
    {"<f8",
     "[{\"id\":\"fixedscaleoffset\",\"offset\":1000,\"scale\":10,\"dtype\":\"<f8\","
     "\"astype\":\"|u1\"}]",
     LOSSY},
    {"<i2", "[{\"id\":\"fixedscaleoffset\",\"offset\":7,\"scale\":3,\"dtype\":\"<i2\"}]", LOSSY},
    {"<f4", "[{\"id\":\"quantize\",\"digits\":2,\"dtype\":\"<f4\"}]", IDEMPOTENT},
    {"<f8", "[{\"id\":\"quantize\",\"digits\":4,\"dtype\":\"<f8\",\"astype\":\"<f4\"}]", LOSSY},
    {"<f4", "[{\"id\":\"bitround\",\"keepbits\":5}]", IDEMPOTENT},
    {"<f2", "[{\"id\":\"bitround\",\"keepbits\":0}]", IDEMPOTENT},
    {"<f8", "[{\"id\":\"bitround\",\"keepbits\":40}]", IDEMPOTENT},
    {"|b1", "[{\"id\":\"packbits\"}]", IDEMPOTENT},
    {"<u4", "[{\"id\":\"shuffle\",\"elementsize\":4}]", LOSSLESS},
    {"<i8", "[{\"id\":\"adler32\"}]", LOSSLESS},
    {"|u1", "[{\"id\":\"fletcher32\"}]", LOSSLESS},
    {"<f8", "[{\"id\":\"astype\",\"encode_dtype\":\"<f4\",\"decode_dtype\":\"<f8\"}]", LOSSY},
    {"<i4", "[{\"id\":\"astype\",\"encode_dtype\":\"<i8\",\"decode_dtype\":\"<i4\"}]", LOSSLESS},
    {">f8",
     "[{\"id\":\"quantize\",\"digits\":2,\"dtype\":\">f8\"},{\"id\":\"shuffle\","
     "\"elementsize\":8},{\"id\":\"adler32\"}]",
     IDEMPOTENT},
    {"<i2",
     "[{\"id\":\"delta\",\"dtype\":\"<i2\"},{\"id\":\"shuffle\",\"elementsize\":2},"
     "{\"id\":\"fletcher32\"}]",
     LOSSLESS},
};
/* zarr v3 array codecs (host byte order): bitround on integers, which zarr v2 does not have. */
static const chain_case host_chains[] = {
    {"<u4", "[{\"id\":\"bitround\",\"keepbits\":3}]", IDEMPOTENT},
    {"<i8", "[{\"id\":\"bitround\",\"keepbits\":1}]", IDEMPOTENT},
    {"|u1", "[{\"id\":\"bitround\",\"keepbits\":7}]", IDEMPOTENT},
};
#define N_V2 (sizeof chains / sizeof chains[0])
#define N_CHAINS (N_V2 + sizeof host_chains / sizeof host_chains[0])

static void check(int ok) {
    if (!ok) __builtin_trap();
}

static void check_guard(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < GUARD; i++) check(p[n + i] == 0xA5);
}

/* Encodes in and decodes it back into out (n bytes); the chain must accept its own output. */
static void encode_decode(const nds_filter_chain *c, const uint8_t *in, size_t n, uint8_t *out) {
    nds_buf enc = {0};
    check(nds_filter_chain_encode(c, in, &enc) == 0);
    check(enc.len == nds_filter_chain_encoded_size(c));
    check(nds_filter_chain_decode(c, enc.data, enc.len, out) == 0);
    nds_buf_dispose(&enc);
}

static void fuzz_chain(size_t ci, size_t count, const uint8_t *p, size_t len) {
    bool host = ci >= N_V2;
    const chain_case *cc = host ? &host_chains[ci - N_V2] : &chains[ci];
    nds_np_dtype t;
    check(nds_np_dtype_parse(cc->dtype, "fuzz", "dtype", &t) == 0);
    size_t n = count * t.size;
    json_object *list = json_tokener_parse(cc->filters);
    nds_filter_chain *c = NULL;
    check(list && nds_filter_chain_parse(list, t, n, host, "fuzz", "filters", &c) == 0);
    json_object_put(list);
    uint8_t *out = malloc(n + GUARD), *in = calloc(1, n + 1), *again = malloc(n + GUARD);
    check(out && in && again);
    memset(out, 0xA5, n + GUARD);
    int rc = nds_filter_chain_decode(c, p, len, out);
    check(rc == 0 || rc == NDS_ECORRUPT);
    check_guard(out, n);
    memcpy(in, p, len < n ? len : n);
    if (t.kind == 'b')
        for (size_t i = 0; i < n; i++) in[i] &= 1; /* NumPy bools are 0 or 1 */
    memset(out, 0xA5, n + GUARD);
    encode_decode(c, in, n, out);
    check_guard(out, n);
    if (cc->k == LOSSLESS) check(n == 0 || memcmp(out, in, n) == 0);
    if (cc->k == IDEMPOTENT) {
        memset(again, 0xA5, n + GUARD);
        encode_decode(c, out, n, again);
        check_guard(again, n);
        check(n == 0 || memcmp(out, again, n) == 0);
    }
    free(out);
    free(in);
    free(again);
    nds_filter_chain_free(c);
}

static void fuzz_registry(const char *id, const uint8_t *p, size_t len, size_t cap) {
    const nds_codec *codec = nds_codec_find(id);
    void *st = NULL;
    check(codec && codec->create(&st, NULL, 4) == 0);
    uint8_t *out = malloc(cap + GUARD);
    check(out != NULL);
    memset(out, 0xA5, cap + GUARD);
    size_t got = 0;
    int rc = nds_codec_decode(codec, st, p, len, out, cap, &got);
    check(rc == NDS_ECORRUPT || (rc == 0 && got <= cap));
    check_guard(out, cap);
    free(out);
    codec->destroy(st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    size_t ci = data[0] % N_CHAINS;
    size_t count = (size_t)(data[1] % 64) * (1 + (data[1] >> 6));
    fuzz_chain(ci, count, data + 2, size - 2);
    static const char *const ids[] = {"adler32", "fletcher32", "shuffle"};
    fuzz_registry(ids[data[0] % 3], data + 2, size - 2, count * 4);
    return 0;
}
