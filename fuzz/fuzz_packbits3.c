/* libFuzzer harness for the zarr v3 packbits array-to-bytes codec (formats/codecs/packbits3.c).
 *
 * Input layout: byte 0 picks a data type and configuration (byte % N_CASES); byte 1 the element
 * count (byte % 64, times 1 + bits 6-7); the rest is the payload. The payload is decoded into a
 * guarded buffer: it must succeed or fail with NDS_ECORRUPT, never crash or write past the
 * elements; when it succeeds, encoding the elements again must give the payload back byte for
 * byte (the decoder accepts exactly the encoder's outputs). The payload, cut or zero-padded to the
 * elements' bytes, is then encoded and decoded: decoding that again must be stable (bits outside
 * first_bit..last_bit are dropped once).
 * Run: fuzz_packbits3 fuzz/corpus/fuzz_packbits3/ ; replayed in CI by replay_main.c.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "ndstore/errors.h"
#include "../formats/codecs/packbits3.h"
#include "internal/dtype_util.h"

#define GUARD 64

static const struct {
    nds_dtype t;
    const char *cfg;
} cases[] = {
    {NDS_BOOL, "{\"padding_encoding\":\"first_byte\"}"},
    {NDS_BOOL, NULL},
    {NDS_INT4, "{\"padding_encoding\":\"last_byte\"}"},
    {NDS_UINT4, NULL},
    {NDS_INT2, "{\"padding_encoding\":\"first_byte\"}"},
    {NDS_UINT2, "{\"padding_encoding\":\"last_byte\"}"},
    {NDS_FLOAT4_E2M1FN, NULL},
    {NDS_INT16, "{\"first_bit\":3,\"last_bit\":12,\"padding_encoding\":\"first_byte\"}"},
    {NDS_UINT64, "{\"first_bit\":1,\"last_bit\":63}"},
    {NDS_INT64, "{\"last_bit\":40,\"padding_encoding\":\"last_byte\"}"},
    {NDS_FLOAT32, NULL},
    {NDS_COMPLEX64, "{\"first_bit\":20,\"padding_encoding\":\"first_byte\"}"},
    {NDS_INT8, "{\"first_bit\":7}"},
};
#define N_CASES (sizeof cases / sizeof cases[0])

static void check(int ok) {
    if (!ok) __builtin_trap();
}

static void check_guard(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < GUARD; i++) check(p[n + i] == 0xA5);
}

/* Elements in their in-memory form: bools 0/1, sub-byte types normalised (what arrays hold). */
static void normalise(nds_dtype t, uint8_t *p, size_t n) {
    if (t == NDS_BOOL)
        for (size_t i = 0; i < n; i++) p[i] &= 1;
    nds_dtype_normalize(t, p, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    size_t ci = data[0] % N_CASES, count = (size_t)(data[1] % 64) * (1 + (data[1] >> 6));
    const uint8_t *p = data + 2;
    size_t len = size - 2, n = count * nds_dtype_size(cases[ci].t);
    json_object *cfg = cases[ci].cfg ? json_tokener_parse(cases[ci].cfg) : NULL;
    nds_packbits3 pb;
    check(nds_packbits3_parse(cfg, cases[ci].t, "fuzz", &pb) == 0);
    json_object_put(cfg);
    size_t enc_n = (size_t)nds_packbits3_encoded_size(&pb, count);
    uint8_t *out = malloc(n + GUARD), *in = calloc(1, n + 1), *enc = malloc(enc_n + 1),
            *again = malloc(n + GUARD);
    check(out && in && enc && again);
    memset(out, 0xA5, n + GUARD);
    int rc = nds_packbits3_decode(&pb, p, len, count, out);
    check(rc == 0 || rc == NDS_ECORRUPT);
    check_guard(out, n);
    if (rc == 0) { /* exactly the encoder's output */
        nds_packbits3_encode(&pb, out, count, enc);
        check(len == enc_n && (len == 0 || memcmp(enc, p, len) == 0));
    }
    memcpy(in, p, len < n ? len : n);
    normalise(cases[ci].t, in, n);
    nds_packbits3_encode(&pb, in, count, enc);
    memset(out, 0xA5, n + GUARD);
    check(nds_packbits3_decode(&pb, enc, enc_n, count, out) == 0);
    check_guard(out, n);
    if (pb.first_bit == 0 && pb.last_bit == pb.comp_bits - 1) check(n == 0 || !memcmp(out, in, n));
    nds_packbits3_encode(&pb, out, count, enc);
    memset(again, 0xA5, n + GUARD);
    check(nds_packbits3_decode(&pb, enc, enc_n, count, again) == 0);
    check_guard(again, n);
    check(n == 0 || memcmp(out, again, n) == 0);
    free(out);
    free(in);
    free(enc);
    free(again);
    return 0;
}
