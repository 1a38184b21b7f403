/* libFuzzer harness for the bytes-to-bytes codecs (zstd, blosc, gzip, zlib, bz2, lz4).
 *
 * Input layout: byte 0 picks the codec (byte % 6) and one of its configs ((byte / 6) % 4); byte 1
 * picks out_cap (low 3 bits) and, when its top bit is set, also a round trip of the payload. The
 * rest is the payload, decoded with the chosen out_cap: decode must succeed within out_cap or fail
 * with NDS_ECORRUPT, never crash or write past out_cap (checked with a guard area). In round-trip
 * mode the payload is encoded and decoded back and must come back unchanged. Every codec also
 * decodes the middle third of out_cap bytes (a part: codec.h nds_decode_request) under the same
 * contract, and again reading the payload through a part reader, which must give the same bytes
 * whenever both succeed; and hands the payload over in pieces, which must come in order inside
 * out_cap and, when they do, be what decode gives (decode must then succeed too). ndstore's own
 * decoder of blosc-lz4 chunks (blosc_blocks.c) must succeed exactly where c-blosc's does, with
 * c-blosc's bytes, and decode a range of blocks to c-blosc's bytes. Run: fuzz_codecs -max_len=70000
 * fuzz/corpus/fuzz_codecs/ ; replayed in CI by replay_main.c.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blosc.h>
#include <json-c/json.h>

#include "ndstore/errors.h"
#include "ndstore/sys/codec.h"
#include "../formats/codecs/blosc_blocks.h"

extern const nds_codec nds_codec_zstd;
extern const nds_codec nds_codec_blosc;
extern const nds_codec nds_codec_gzip;
extern const nds_codec nds_codec_zlib;
extern const nds_codec nds_codec_bz2;
extern const nds_codec nds_codec_lz4;

#define N_CODECS 6
#define N_CONFIGS 4
#define GUARD 64

static const nds_codec *const codecs[N_CODECS] = {&nds_codec_zstd, &nds_codec_blosc,
                                                  &nds_codec_gzip, &nds_codec_zlib,
                                                  &nds_codec_bz2,  &nds_codec_lz4};

/* Per codec: four configs and the element size passed to create. */
static const char *const configs[N_CODECS][N_CONFIGS] = {
    {"{}", "{\"level\": -1}", "{\"level\": 5, \"checksum\": true}", "{\"level\": 1}"},
    {"{\"cname\": \"lz4\", \"shuffle\": 1}", "{\"cname\": \"zstd\", \"shuffle\": 2, \"clevel\": 3}",
     "{\"cname\": \"blosclz\", \"shuffle\": 0, \"clevel\": 9, \"blocksize\": 256}",
     "{\"cname\": \"zlib\", \"shuffle\": -1, \"clevel\": 1}"},
    {"{\"level\": 1}", "{\"level\": 0}", "{\"level\": 6}", "{\"level\": 9}"},
    {"{\"level\": 1}", "{\"level\": 0}", "{\"level\": 6}", "{\"level\": 9}"},
    {"{\"level\": 1}", "{\"level\": 9}", "{\"level\": 1}", "{\"level\": 9}"},
    {"{}", "{\"acceleration\": 10}", "{\"acceleration\": 0}", "{\"acceleration\": 65537}"},
};
static const size_t elem_sizes[N_CONFIGS] = {1, 2, 4, 8};
static const size_t caps[8] = {0, 1, 16, 255, 4096, 65536, 70000, 1u << 20};

static void *states[N_CODECS][N_CONFIGS];

/* Instances are created once and reused, as ndstore does (one instance, many calls). */
static void *state_for(size_t ci, size_t k) {
    if (states[ci][k]) return states[ci][k];
    json_object *cfg = json_tokener_parse(configs[ci][k]);
    if (!cfg || codecs[ci]->create(&states[ci][k], cfg, elem_sizes[k]) != 0) {
        fprintf(stderr, "fuzz_codecs: cannot create %s %s\n", codecs[ci]->name, configs[ci][k]);
        abort();
    }
    json_object_put(cfg);
    return states[ci][k];
}

static void roundtrip(const nds_codec *c, void *st, const uint8_t *p, size_t n) {
    nds_buf enc = {0};
    if (c->encode(st, p, n, &enc) != 0) {
        fprintf(stderr, "fuzz_codecs: %s encode failed: %s\n", c->name, nds_error_last()->message);
        abort();
    }
    uint8_t *out = malloc(n ? n : 1);
    size_t got = 0;
    int rc = nds_codec_decode(c, st, enc.data, enc.len, out, n, &got);
    if (rc != 0 || got != n || (n && memcmp(out, p, n) != 0)) {
        fprintf(stderr, "fuzz_codecs: %s round trip of %zu bytes failed: %s\n", c->name, n,
                rc ? nds_error_last()->message : "bytes differ");
        abort();
    }
    free(out);
    nds_buf_dispose(&enc);
}

/* The payload as a stored value read in parts (nds_part_reader). */
typedef struct fuzz_value {
    const uint8_t *data;
    size_t len;
} fuzz_value;

static int fuzz_value_read(void *arg, uint64_t offset, size_t len, uint8_t *dst,
                           uint64_t *value_len) {
    const fuzz_value *v = arg;
    if (offset > v->len || len > v->len - offset) return NDS_ERANGE;
    if (len) memcpy(dst, v->data + offset, len);
    *value_len = v->len;
    return 0;
}

static void check_guard(const uint8_t *out, size_t cap, const char *codec, const char *what) {
    for (size_t i = 0; i < GUARD; i++)
        if (out[cap + i] != 0xA5) {
            fprintf(stderr, "fuzz_codecs: %s %s wrote past out_len %zu\n", codec, what, cap);
            abort();
        }
}

/* A part request: bytes [begin, end) of a value of cap bytes from in[0..n) or the reader r. */
static int decode_part(const nds_codec *c, void *st, const uint8_t *in, size_t n,
                       const nds_part_reader *r, uint8_t *out, size_t cap) {
    nds_decode_request rq = NDS_DECODE_REQUEST_INIT;
    rq.in = r ? NULL : in;
    rq.in_len = r ? 0 : n;
    rq.reader = r;
    rq.dst = cap ? out : NULL;
    rq.cap = cap;
    rq.begin = cap / 3;
    rq.end = cap - cap / 3;
    return c->decode(st, &rq);
}

/* The part read through a part reader over in[0..n): the part's contract, and the bytes the part
 * from memory gave (part, when part_rc is 0) whenever it succeeds too. */
static void part_read_checked(const nds_codec *c, void *st, const uint8_t *in, size_t n,
                              size_t cap, const uint8_t *part, int part_rc) {
    size_t begin = cap / 3, end = cap - cap / 3;
    uint8_t *out = malloc(cap + GUARD);
    memset(out + cap, 0xA5, GUARD);
    fuzz_value v = {in, n};
    nds_part_reader r = {fuzz_value_read, &v};
    int rc = decode_part(c, st, in, n, &r, out, cap);
    check_guard(out, cap, c->name, "decode_part_read");
    if (rc != 0 && rc != NDS_ECORRUPT && rc != NDS_ENOMEM) {
        fprintf(stderr, "fuzz_codecs: %s decode_part_read returned %d: %s\n", c->name, rc,
                nds_error_last()->message);
        abort();
    }
    if (rc == 0 && part_rc == 0 && begin < end && memcmp(out + begin, part + begin, end - begin)) {
        fprintf(stderr, "fuzz_codecs: %s decode_part_read and decode_part differ\n", c->name);
        abort();
    }
    free(out);
}

/* decode_pieces' pieces put together, checked to come in order inside the value. */
typedef struct pieces {
    uint8_t *out;
    size_t next, cap;
} pieces;

static int put_piece(void *arg, size_t offset, uint8_t *data, size_t len) {
    pieces *p = arg;
    if (offset != p->next || len > p->cap - offset) {
        fprintf(stderr, "fuzz_codecs: piece [%zu, +%zu) after %zu of %zu\n", offset, len,
                p->next, p->cap);
        abort();
    }
    memcpy(p->out + offset, data, len);
    p->next = offset + len;
    return 0;
}

/* decode_pieces over in[0..n) for a value of cap bytes: the pieces cover it and are what decode
 * gave (whole, decode_rc 0 with got == cap), or it fails as decode may. */
static void pieces_checked(const nds_codec *c, void *st, const uint8_t *in, size_t n, size_t cap,
                           const uint8_t *whole, int decode_rc, size_t got) {
    pieces p = {malloc(cap + 1), 0, cap};
    char why[256];
    snprintf(why, sizeof why, "%s", decode_rc ? nds_error_last()->message : "");
    nds_decode_request rq = NDS_DECODE_REQUEST_INIT;
    rq.in = in;
    rq.in_len = n;
    rq.cap = cap;
    rq.sink = put_piece;
    rq.sink_arg = &p;
    int rc = c->decode(st, &rq);
    if (rc != 0 && rc != NDS_ECORRUPT && rc != NDS_ENOMEM) {
        fprintf(stderr, "fuzz_codecs: %s decode_pieces returned %d: %s\n", c->name, rc,
                nds_error_last()->message);
        abort();
    }
    if (rc == 0 && (p.next != cap || decode_rc != 0 || got != cap || memcmp(p.out, whole, cap))) {
        fprintf(stderr, "fuzz_codecs: %s decode_pieces gave what decode did not (%d, %zu: %s)\n",
                c->name, decode_rc, got, why);
        abort();
    }
    free(p.out);
}

/* ndstore's decoder of blosc-lz4 chunks against c-blosc's, on the chunks it takes (it checks the
 * header and every block's place first, so c-blosc parses nothing it would not). */
static void blosc_checked(const uint8_t *in, size_t n, size_t cap) {
    uint8_t *mine = malloc(cap + 1), *ref = malloc(cap + 1);
    int rc = nds_blosc_decode_into(in, n, mine, cap);
    if (rc != NDS_EUNSUPPORTED) {
        int cb = blosc_decompress_ctx(in, ref, cap, 1);
        if ((rc == 0) != (cb == (int)cap) || (rc == 0 && memcmp(mine, ref, cap) != 0)) {
            fprintf(stderr, "fuzz_codecs: blosc blocks %d, c-blosc %d (of %zu)\n", rc, cb, cap);
            abort();
        }
    }
    /* The blocks holding the middle third: c-blosc's bytes there, and no failure where c-blosc
     * decodes the whole chunk. */
    size_t begin = cap / 3, end = cap - cap / 3;
    rc = nds_blosc_decode_range(in, n, mine, cap, begin, end);
    if (rc != NDS_EUNSUPPORTED) {
        int cb = blosc_decompress_ctx(in, ref, cap, 1);
        if ((rc != 0 && cb == (int)cap) ||
            (rc == 0 && cb == (int)cap && memcmp(mine + begin, ref + begin, end - begin) != 0)) {
            fprintf(stderr, "fuzz_codecs: blosc blocks range %d, c-blosc %d\n", rc, cb);
            abort();
        }
    }
    free(mine);
    free(ref);
}

/* Decodes in[0..n) into a buffer of cap bytes plus a guard area; aborts on a contract violation. */
static void decode_checked(const nds_codec *c, void *st, const uint8_t *in, size_t n, size_t cap) {
    /* The guard catches writes past out_cap by the (uninstrumented) libraries, which ASan misses.
     */
    uint8_t *out = malloc(cap + GUARD);
    memset(out + cap, 0xA5, GUARD);
    size_t got = 0;
    int rc = nds_codec_decode(c, st, in, n, cap ? out : NULL, cap, &got);
    check_guard(out, cap, c->name, "decode");
    if (rc != 0 && rc != NDS_ECORRUPT && rc != NDS_ENOMEM) {
        fprintf(stderr, "fuzz_codecs: %s decode returned %d: %s\n", c->name, rc,
                nds_error_last()->message);
        abort();
    }
    if (rc == 0 && got > cap) abort();
    pieces_checked(c, st, in, n, cap, out, rc, got);
    if (c == &nds_codec_blosc) blosc_checked(in, n, cap);
    /* The middle third, under the same contract. */
    memset(out + cap, 0xA5, GUARD);
    rc = decode_part(c, st, in, n, NULL, out, cap);
    check_guard(out, cap, c->name, "decode_part");
    if (rc != 0 && rc != NDS_ECORRUPT && rc != NDS_ENOMEM) {
        fprintf(stderr, "fuzz_codecs: %s decode_part returned %d: %s\n", c->name, rc,
                nds_error_last()->message);
        abort();
    }
    part_read_checked(c, st, in, n, cap, out, rc);
    free(out);
}

/* Encodes plain, changes one byte and cuts the end as told by the 4-byte prefix, decodes. */
static void mutated(const nds_codec *c, void *st, const uint8_t *p, size_t n) {
    if (n < 4) return;
    size_t pos = (size_t)p[0] | (size_t)p[1] << 8;
    uint8_t flip = p[2], cut = p[3];
    nds_buf enc = {0};
    if (c->encode(st, p + 4, n - 4, &enc) != 0) abort();
    if (enc.len) enc.data[pos % enc.len] ^= flip;
    size_t len = enc.len - (cut % 32 < enc.len ? cut % 32 : enc.len);
    decode_checked(c, st, enc.data, len, n - 4);
    nds_buf_dispose(&enc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    size_t ci = data[0] % N_CODECS, k = (data[0] / N_CODECS) % N_CONFIGS;
    const nds_codec *c = codecs[ci];
    void *st = state_for(ci, k);
    const uint8_t *p = data + 2;
    size_t n = size - 2;
    size_t cap = caps[data[1] & 7];
    decode_checked(c, st, p, n, cap);
    if (data[1] & 0x40) mutated(c, st, p, n);
    if (data[1] & 0x80) roundtrip(c, st, p, n);
    return 0;
}
