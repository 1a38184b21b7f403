/* The codec decode request's parts, readers and pieces (codec.h nds_decode_request): a part fills
 * the bytes asked for as a whole decode does and writes nothing past the value (blosc and zstd
 * decode only what holds it); blosc reads only the stored bytes a range needs through an
 * nds_part_reader; blosc hands over a chunk block by block as c-blosc decodes it, zstd in pieces
 * of 128 KiB through its window; every other
 * codec does all three through the generic fallback (nds_codec_decode_fallback). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blosc.h>
#include <zstd.h>

#include "support_check.h"
#include "support_codecs.h"
#include "internal/util.h"

/* Bytes [begin, end) of a value of exactly n bytes decoded from in[0..len) into out. */
static int decode_part(const nds_codec *c, void *st, const uint8_t *in, size_t len, uint8_t *out,
                       size_t n, size_t begin, size_t end) {
    nds_decode_request rq = NDS_DECODE_REQUEST_INIT;
    rq.in = in;
    rq.in_len = len;
    rq.dst = out;
    rq.cap = n;
    rq.begin = begin;
    rq.end = end;
    return c->decode(st, &rq);
}

/* A part fills the bytes asked for exactly as a whole decode does, writes nothing past the
 * value, and refuses what decode refuses (plus a block size larger than the chunk). */
START_TEST(test_blosc_decode_part) {
    static const int shuffles[] = {0, 1, 2};
    static const size_t elems[] = {1, 2, 4, 8};
    enum { N = 300000 }; /* several blosc blocks */
    uint8_t *data = malloc(N), *whole = malloc(N);
    for (size_t si = 0; si < 3; si++)
        for (size_t ei = 0; ei < 4; ei++) {
            char json[96];
            snprintf(json, sizeof json, "{\"cname\": \"lz4\", \"clevel\": 5, \"shuffle\": %d}",
                     shuffles[si]);
            void *st = make(&nds_codec_blosc, json, elems[ei]);
            nds_buf enc = {0};
            encode_filled(&nds_codec_blosc, st, data, N, (int)(si + ei) % PAT_COUNT, &enc);
            for (int k = 0; k < 40; k++) {
                size_t a = rnd() % (N + 1), b = rnd() % (N + 1);
                size_t begin = a < b ? a : b, end = a < b ? b : a;
                uint8_t *out = guarded(N);
                ck_assert_int_eq(
                    decode_part(&nds_codec_blosc, st, enc.data, enc.len, out, N, begin, end), 0);
                ck_assert_msg(memcmp(out + begin, data + begin, end - begin) == 0,
                              "%s elem %zu: bytes %zu..%zu differ", json, elems[ei], begin, end);
                check_guard(out, N, "blosc decode_part");
                free(out);
            }
            size_t got;
            ck_assert_int_eq(
                nds_codec_decode(&nds_codec_blosc, st, enc.data, enc.len, whole, N, &got), 0);
            /* The value's size must be the chunk's. */
            assert_error(decode_part(&nds_codec_blosc, st, enc.data, enc.len, whole, N - 1, 0, 8),
                         NDS_ECORRUPT, "blosc", "decode_part size");
            /* Truncated input and a block size beyond the chunk. */
            assert_error(decode_part(&nds_codec_blosc, st, enc.data, enc.len / 2, whole, N, 0, 8),
                         NDS_ECORRUPT, "truncated", "decode_part truncated");
            enc.data[8] = 0, enc.data[9] = 0, enc.data[10] = 0, enc.data[11] = 0x80;
            assert_error(decode_part(&nds_codec_blosc, st, enc.data, enc.len, whole, N, 0, 8),
                         NDS_ECORRUPT, "block size", "decode_part blocksize");
            nds_buf_dispose(&enc);
            nds_codec_blosc.destroy(st);
        }
    free(data);
    free(whole);
}
END_TEST

/* A stored value read in parts (nds_part_reader) from memory: counts the bytes read, shows only
 * the first visible bytes (as a value of that size), and fails call number fail_call (from 1)
 * with fail_rc. */
typedef struct mem_value {
    const uint8_t *data;
    size_t len, visible, bytes_read, last_len; /* last_len: of the last read */
    int calls, fail_call, fail_rc;
} mem_value;

static int mem_value_read(void *arg, uint64_t offset, size_t len, uint8_t *dst,
                          uint64_t *value_len) {
    mem_value *m = arg;
    if (++m->calls == m->fail_call) return m->fail_rc;
    if (offset > m->visible || len > m->visible - offset) return NDS_ERANGE;
    if (len) memcpy(dst, m->data + offset, len);
    m->bytes_read += len;
    m->last_len = len;
    *value_len = m->visible;
    return 0;
}

static int part_read_with(const nds_codec *c, void *st, mem_value *m, uint8_t *out, size_t n,
                          size_t begin, size_t end) {
    nds_part_reader r = {mem_value_read, m};
    m->calls = 0;
    m->bytes_read = 0;
    nds_decode_request rq = NDS_DECODE_REQUEST_INIT;
    rq.reader = &r;
    rq.dst = out;
    rq.cap = n;
    rq.begin = begin;
    rq.end = end;
    return c->decode(st, &rq);
}

static int part_read(void *st, mem_value *m, uint8_t *out, size_t n, size_t begin, size_t end) {
    return part_read_with(&nds_codec_blosc, st, m, out, n, begin, end);
}

/* A part through a reader gives the bytes asked for as a whole decode does and reads only the
 * header, the block index and the blocks holding them (blosc's format: a 16-byte header, then one
 * 32-bit start per block, blocks in order); what is better read whole, damage included, is read
 * whole (the fallback: all enc.len bytes) and decoded in memory, which names any damage; the
 * reader's own errors come back as they are. */
START_TEST(test_blosc_decode_part_read) {
    static const size_t elems[] = {1, 2, 4, 8};
    enum { N = 600000 };
    uint8_t *data = malloc(N), *whole = malloc(N);
    for (size_t ei = 0; ei < 4; ei++) {
        char json[128];
        snprintf(json, sizeof json,
                 "{\"cname\": \"lz4\", \"clevel\": 5, \"shuffle\": 1, \"blocksize\": %d}",
                 16384);
        void *st = make(&nds_codec_blosc, json, elems[ei]);
        nds_buf enc = {0};
        encode_filled(&nds_codec_blosc, st, data, N, PAT_TEXT, &enc);
        ck_assert(!(enc.data[2] & BLOSC_MEMCPYED));
        size_t BS = nds_load_le32(enc.data + 8), NB = (N + BS - 1) / BS; /* c-blosc may round it up */
        ck_assert_uint_ge(NB, 4);
        mem_value m = {.data = enc.data, .len = enc.len, .visible = enc.len};
        for (int k = 0; k < 60; k++) {
            size_t a = rnd() % N, b = rnd() % N, begin = a < b ? a : b, end = (a < b ? b : a) + 1;
            if (k % 3 == 0) end = begin + 1 + rnd() % 64; /* within a block or two */
            if (end > N) end = N;
            uint8_t *out = guarded(N);
            ck_assert_int_eq(part_read(st, &m, out, N, begin, end), 0);
            ck_assert_msg(memcmp(out + begin, data + begin, end - begin) == 0,
                          "elem %zu: bytes %zu..%zu differ", elems[ei], begin, end);
            check_guard(out, N, "blosc decode_part_read");
            free(out);
            size_t e = elems[ei], first = begin / e * e / BS, last = ((end + e - 1) / e * e - 1) / BS;
            size_t span_end = last + 1 < NB ? nds_load_le32(enc.data + 16 + 4 * (last + 1)) : enc.len;
            size_t want = 16 + 4 * NB + span_end - nds_load_le32(enc.data + 16 + 4 * first);
            ck_assert_msg(m.bytes_read == want, "elem %zu, bytes %zu..%zu: read %zu, expected %zu",
                          e, begin, end, m.bytes_read, want);
        }
        /* A value shorter than its header says is read whole and reported; the reader's own
         * errors come back as they are. */
        m.visible = enc.len - 10;
        assert_error(part_read(st, &m, whole, N, N - 5, N), NDS_ECORRUPT, "blosc", "cut short");
        ck_assert_uint_eq(m.last_len, enc.len - 10); /* read whole */
        m.visible = enc.len;
        m.fail_call = 1, m.fail_rc = NDS_ENOTFOUND;
        ck_assert_int_eq(part_read(st, &m, whole, N, 0, 8), NDS_ENOTFOUND);
        m.fail_call = 3, m.fail_rc = NDS_ECONFLICT;
        ck_assert_int_eq(part_read(st, &m, whole, N, 0, 8), NDS_ECONFLICT);
        m.fail_call = 0;
        /* Read whole: another decoded size (then refused), a block index out of order, a block
         * start past the chunk (decoded in memory: any answer but a crash). */
        assert_error(part_read(st, &m, whole, N - 1, 0, 8), NDS_ECORRUPT, "blosc", "size");
        ck_assert_uint_eq(m.last_len, enc.len);
        uint8_t *bad = malloc(enc.len);
        memcpy(bad, enc.data, enc.len);
        memcpy(bad + 16 + 4 * 1, enc.data + 16 + 4 * 2, 4); /* block 1 starts where block 2 does */
        mem_value mb = {.data = bad, .len = enc.len, .visible = enc.len};
        int rc = part_read(st, &mb, whole, N, 1 * BS, 2 * BS + 1);
        ck_assert_msg(rc == 0 || rc == NDS_ECORRUPT, "index out of order: %d", rc);
        ck_assert_uint_eq(mb.last_len, enc.len);
        memcpy(bad + 16 + 4 * 1, enc.data + 16 + 4 * 1, 4);
        bad[16 + 4 * 2 + 3] = 0x7f; /* block 2 starts past the end: block 1's end unknown */
        rc = part_read(st, &mb, whole, N, 1 * BS, 1 * BS + 1);
        ck_assert_msg(rc == 0 || rc == NDS_ECORRUPT, "block past the end: %d", rc);
        ck_assert_uint_eq(mb.last_len, enc.len);
        free(bad);
        nds_buf_dispose(&enc);
        nds_codec_blosc.destroy(st);
    }
    /* A chunk stored without compression (memcpyed) is read whole. */
    void *st = make(&nds_codec_blosc, "{\"cname\": \"lz4\", \"clevel\": 5, \"shuffle\": 0}", 1);
    nds_buf enc = {0};
    encode_filled(&nds_codec_blosc, st, data, N, PAT_RANDOM, &enc);
    ck_assert(enc.data[2] & BLOSC_MEMCPYED);
    mem_value m = {.data = enc.data, .len = enc.len, .visible = enc.len};
    ck_assert_int_eq(part_read(st, &m, whole, N, 100, 200), 0);
    ck_assert_uint_eq(m.last_len, enc.len);
    ck_assert_int_eq(memcmp(whole + 100, data + 100, 100), 0);
    nds_buf_dispose(&enc);
    nds_codec_blosc.destroy(st);
    free(data);
    free(whole);
}
END_TEST

/* zstd decodes a frame's start only, as far as the part asked for: the bytes asked for come back as
 * a whole decode gives them, nothing is written past the value; a value of another size, two
 * frames, a cut-short frame fall back to (and fail as) a whole decode. */
START_TEST(test_zstd_decode_part) {
    enum { N = 600000 }; /* several 128 KiB zstd blocks */
    uint8_t *data = malloc(N), *whole = malloc(N);
    static const char *const configs[] = {"{\"level\": 1}", "{\"level\": 3, \"checksum\": true}"};
    for (int ci = 0; ci < 2; ci++) {
        void *st = make(&nds_codec_zstd, configs[ci], 1);
        nds_buf enc = {0}, two = {0};
        encode_filled(&nds_codec_zstd, st, data, N, ci + 1, &enc);
        for (int k = 0; k < 60; k++) {
            size_t a = rnd() % (N + 1), b = rnd() % (N + 1);
            size_t begin = a < b ? a : b, end = a < b ? b : a;
            uint8_t *out = guarded(N);
            ck_assert_int_eq(
                decode_part(&nds_codec_zstd, st, enc.data, enc.len, out, N, begin, end), 0);
            ck_assert_msg(memcmp(out + begin, data + begin, end - begin) == 0,
                          "%s: bytes %zu..%zu differ", configs[ci], begin, end);
            check_guard(out, N, "zstd decode_part");
            free(out);
        }
        assert_error(decode_part(&nds_codec_zstd, st, enc.data, enc.len, whole, N - 1, 0, 8),
                     NDS_ECORRUPT, "zstd", "decode_part size");
        assert_error(decode_part(&nds_codec_zstd, st, enc.data, enc.len / 2, whole, N, 0, 8),
                     NDS_ECORRUPT, "zstd", "decode_part truncated");
        /* Two frames of N/2 bytes each: the part is decoded from the whole value. */
        encode_two(&nds_codec_zstd, st, data, N / 2, N, &two);
        ck_assert_int_eq(
            decode_part(&nds_codec_zstd, st, two.data, two.len, whole, N, N / 2 - 5, N / 2 + 5), 0);
        ck_assert_int_eq(memcmp(whole, data, N), 0);
        nds_buf_dispose(&two);
        nds_buf_dispose(&enc);
        nds_codec_zstd.destroy(st);
    }
    free(data);
    free(whole);
}
END_TEST

/* Puts decode_pieces' pieces together, checking that they come in order, aligned, inside the
 * value. */
typedef struct assembled {
    uint8_t *out;
    size_t next, pieces, cap, align;
} assembled;

static int assemble(void *arg, size_t offset, uint8_t *data, size_t len) {
    assembled *a = arg;
    if (offset != a->next || len > a->cap - offset || offset % a->align)
        ck_abort_msg("piece [%zu, +%zu) after %zu of %zu (align %zu)", offset, len, a->next,
                     a->cap, a->align);
    memcpy(a->out + offset, data, len);
    a->next = offset + len;
    a->pieces++;
    return 0;
}

/* decode_pieces of the chunk enc (decoded size n) with pieces aligned to align; the result
 * assembled into out. */
static int pieces_with(const nds_codec *c, void *st, const nds_buf *enc, size_t n, size_t align,
                       uint8_t *out, assembled *a) {
    *a = (assembled){.out = out, .cap = n, .align = align ? align : 1};
    nds_decode_request rq = NDS_DECODE_REQUEST_INIT;
    rq.in = enc->data;
    rq.in_len = enc->len;
    rq.cap = n;
    rq.sink = assemble;
    rq.sink_arg = a;
    rq.align = align;
    return c->decode(st, &rq);
}

static int pieces_of(void *st, const nds_buf *enc, size_t n, size_t align, uint8_t *out,
                     assembled *a) {
    return pieces_with(&nds_codec_blosc, st, enc, n, align, out, a);
}

/* The blosc chunks c-blosc writes with lz4 or lz4hc decode block by block (decode_pieces) and
 * whole (decode) to what c-blosc decodes: element sizes 1 to 17 (split by byte or not, under each split mode), byte shuffle or
 * none, block sizes that leave a short last block, sizes that are not a whole number of
 * elements, compressible and incompressible data (c-blosc 1.21 turns a forced block size of 1000
 * into 65536 for 2- and 4-byte elements, keeps it for 8-byte ones). */
START_TEST(test_blosc_decode_pieces) {
    static const size_t typesizes[] = {1, 2, 3, 4, 7, 8, 16, 17};
    static const size_t sizes[] = {1, 37, 1000, 70001, 300000};
    static const int modes[] = {BLOSC_FORWARD_COMPAT_SPLIT, BLOSC_ALWAYS_SPLIT, BLOSC_NEVER_SPLIT};
    static const int patterns[] = {PAT_RAMP, PAT_INT32, PAT_RANDOM};
    uint8_t *data = malloc(300000), *out = malloc(300000), *ref = malloc(300000);
    size_t decoded = 0, declined = 0, unreadable = 0;
    for (size_t m = 0; m < 3; m++) {
        blosc_set_splitmode(modes[m]);
        for (size_t t = 0; t < sizeof typesizes / sizeof *typesizes; t++)
            for (int config = 0; config < 8; config++) {
                char json[160];
                snprintf(json, sizeof json,
                         "{\"cname\":\"%s\",\"clevel\":5,\"shuffle\":%d,\"blocksize\":%d}",
                         config & 4 ? "lz4hc" : "lz4", config & 1, config & 2 ? 1000 : 0);
                void *st = make(&nds_codec_blosc, json, typesizes[t]);
                for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++) {
                    size_t n = sizes[z];
                    nds_buf enc = {0};
                    assembled a;
                    encode_filled(&nds_codec_blosc, st, data, n, patterns[(z + t) % 3], &enc);
                    /* c-blosc's own decode is the reference: it cannot decode what it splits
                     * against its decoder's rule (BLOSC_ALWAYS_SPLIT, blocks under 128
                     * elements), and then neither may decode_pieces. */
                    size_t got = 0;
                    bool ok = blosc_decompress_ctx(enc.data, ref, n, 1) == (int)n;
                    /* the codec's whole decode (blosc_blocks.c for lz4) gives the same */
                    bool whole = nds_codec_decode(&nds_codec_blosc, st, enc.data, enc.len, out, n,
                                                  &got) == 0;
                    if (whole != ok || (ok && memcmp(out, ref, n) != 0))
                        ck_abort_msg("%s typesize %zu, %zu bytes, split mode %d: decode %d, "
                                     "c-blosc %d", json, typesizes[t], n, modes[m], whole, ok);
                    int rc = pieces_of(st, &enc, n, 1, out, &a);
                    bool memcpyed = enc.data[2] & BLOSC_MEMCPYED;
                    if (ok && rc != 0)
                        ck_abort_msg("%s typesize %zu, %zu bytes, split mode %d: %d %s", json,
                                     typesizes[t], n, modes[m], rc, nds_error_last()->message);
                    if (rc == 0 && (!ok || a.next != n || memcmp(out, ref, n) != 0 ||
                                    memcmp(ref, data, n) != 0))
                        ck_abort_msg("%s typesize %zu, %zu bytes, split mode %d: differs (c-blosc "
                                     "decodes it: %d)",
                                     json, typesizes[t], n, modes[m], ok);
                    unreadable += !ok;
                    decoded += rc == 0 && a.pieces > 1;               /* block by block */
                    declined += rc == 0 && memcpyed && a.pieces == 1; /* the fallback: whole */
                    nds_buf_dispose(&enc);
                }
                nds_codec_blosc.destroy(st);
            }
    }
    blosc_set_splitmode(BLOSC_FORWARD_COMPAT_SPLIT);
    /* Whole (one piece): memcpyed chunks (incompressible, or too small to compress); refused:
     * those c-blosc cannot decode. */
    ck_assert_uint_gt(decoded, 120); /* of 960, in more than one piece */
    ck_assert_uint_gt(declined, 50);
    ck_assert_uint_lt(unreadable, decoded / 8);
    free(data);
    free(out);
    free(ref);
}
END_TEST

/* What blosc's pieces leave to c-blosc (decoded whole, handed over as one piece by the fallback)
 * and what they report: bit shuffle, another compressor, memcpyed, blocks not a multiple of the
 * alignment go whole; another decoded size, a value cut short or with a block index out of place
 * are corrupt (the whole decode says so); an lz4 stream that does not decode is corrupt, naming
 * the block; random damage never crashes or writes out of place. */
START_TEST(test_blosc_decode_pieces_refuses) {
    enum { N = 1000000 };
    uint8_t *data = malloc(N), *out = malloc(N);
    static const char *const declined[] = {
        "{\"cname\":\"lz4\",\"shuffle\":2}", "{\"cname\":\"blosclz\",\"shuffle\":1}",
        "{\"cname\":\"zstd\",\"shuffle\":1}", "{\"cname\":\"lz4\",\"clevel\":0}"};
    assembled a;
    for (size_t i = 0; i < sizeof declined / sizeof *declined; i++) {
        void *st = make(&nds_codec_blosc, declined[i], 2);
        nds_buf enc = {0};
        encode_filled(&nds_codec_blosc, st, data, N, PAT_INT32, &enc);
        ck_assert_int_eq(pieces_of(st, &enc, N, 1, out, &a), 0);
        ck_assert_uint_eq(a.pieces, 1);
        ck_assert_int_eq(memcmp(out, data, N), 0);
        nds_buf_dispose(&enc);
        nds_codec_blosc.destroy(st);
    }
    /* c-blosc 1.21 makes the block size 65536: 16 blocks */
    void *st = make(&nds_codec_blosc, "{\"cname\":\"lz4\",\"shuffle\":1,\"blocksize\":1000}", 2);
    nds_buf enc = {0};
    encode_filled(&nds_codec_blosc, st, data, N, PAT_RAMP, &enc);
    assert_error(pieces_of(st, &enc, N - 2, 1, out, &a), NDS_ECORRUPT, "blosc", "size");
    ck_assert_uint_eq(a.pieces, 0);
    ck_assert_int_eq(pieces_of(st, &enc, N, 3, out, &a), 0);
    ck_assert_uint_eq(a.pieces, 1);
    nds_buf cut = {.data = enc.data, .len = enc.len - 1};
    assert_error(pieces_of(st, &cut, N, 1, out, &a), NDS_ECORRUPT, "blosc", "cut");
    ck_assert_uint_eq(a.pieces, 0);
    uint32_t start1 = nds_load_le32(enc.data + 20);
    nds_store_le32(enc.data + 20, (uint32_t)enc.len); /* block 1 starts past the end */
    assert_error(pieces_of(st, &enc, N, 1, out, &a), NDS_ECORRUPT, "blosc", "index");
    ck_assert_uint_eq(a.pieces, 0);
    nds_store_le32(enc.data + 20, start1);
    ck_assert_int_eq(pieces_of(st, &enc, N, 2, out, &a), 0);
    ck_assert_int_eq(memcmp(out, data, N), 0);
    memset(enc.data + start1 + 4, 0xff, 8); /* block 1's lz4 stream */
    assert_error(pieces_of(st, &enc, N, 1, out, &a), NDS_ECORRUPT, "of block 1 (of",
                 "damaged lz4 stream");
    ck_assert_uint_eq(a.pieces, 1);
    for (int k = 0; k < 400; k++) { /* random damage: any answer but a crash */
        encode_filled(&nds_codec_blosc, st, data, N, PAT_RAMP, &enc);
        for (int j = 0; j < 1 + k % 4; j++) enc.data[rnd() % enc.len] ^= (uint8_t)(1 + rnd() % 255);
        int rc = pieces_of(st, &enc, N, 1, out, &a);
        ck_assert_msg(rc == 0 || rc == NDS_ECORRUPT, "damage: %d", rc);
    }
    nds_buf_dispose(&enc);
    nds_codec_blosc.destroy(st);
    free(data);
    free(out);
}
END_TEST

/* A zstd frame of n bytes with no content size and a window of 2^window_log, as a streaming
 * writer makes it (the input given in two calls, so zstd cannot fit the window to its size),
 * appended to out. */
static void zstd_stream_frame(const uint8_t *data, size_t n, int window_log, nds_buf *out) {
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    ck_assert_ptr_nonnull(cc);
    ck_assert(!ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_windowLog, window_log)));
    ck_assert(!ZSTD_isError(ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 0)));
    size_t at = out->len, room = ZSTD_compressBound(n) + 64;
    ck_assert_int_eq(nds_buf_reserve(out, at + room), 0);
    ZSTD_outBuffer ob = {out->data + at, room, 0};
    ZSTD_inBuffer ib = {data, n / 2, 0};
    ck_assert(!ZSTD_isError(ZSTD_compressStream2(cc, &ob, &ib, ZSTD_e_continue)));
    ib.size = n;
    size_t left;
    do {
        left = ZSTD_compressStream2(cc, &ob, &ib, ZSTD_e_end);
        ck_assert(!ZSTD_isError(left));
    } while (left != 0);
    out->len = at + ob.pos;
    ck_assert_uint_eq(ZSTD_getFrameContentSize(out->data + at, ob.pos), ZSTD_CONTENTSIZE_UNKNOWN);
    ZSTD_freeCCtx(cc);
}

/* zstd hands a whole value over in pieces of 128 KiB (its own window in between, never the whole
 * value), aligned as asked: the same bytes as a whole decode for one frame, two frames, a frame
 * without a content size, any alignment; a value of another size is corrupt (before any piece
 * when the frame declares its size), so is a frame cut short or damaged (never a crash); a
 * frame whose window is larger than the value (legal, though no chunk writer makes it) decodes
 * whole through the fallback, as one piece, and is refused when it comes after pieces were handed
 * over. */
START_TEST(test_zstd_decode_pieces) {
    enum { N = 600000, PIECE = 128 << 10 };
    static const size_t sizes[] = {0, 1, 1000, PIECE, PIECE + 1, N};
    static const size_t aligns[] = {0, 1, 2, 4, 8, 12};
    uint8_t *data = malloc(N), *out = malloc(N);
    void *st = make(&nds_codec_zstd, "{\"level\": 3, \"checksum\": true}", 1);
    assembled a;
    for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++)
        for (size_t k = 0; k < sizeof aligns / sizeof *aligns; k++) {
            size_t n = sizes[z], unit = aligns[k] ? aligns[k] : 1, piece = PIECE / unit * unit;
            nds_buf enc = {0};
            encode_filled(&nds_codec_zstd, st, data, n, PAT_INT32, &enc);
            memset(out, 0, N);
            ck_assert_int_eq(pieces_with(&nds_codec_zstd, st, &enc, n, aligns[k], out, &a), 0);
            ck_assert_uint_eq(a.next, n);
            ck_assert_uint_eq(a.pieces, (n + piece - 1) / piece);
            ck_assert_int_eq(memcmp(out, data, n), 0);
            nds_buf_dispose(&enc);
        }
    nds_buf enc = {0};
    encode_filled(&nds_codec_zstd, st, data, N, PAT_RAMP, &enc);
    assert_error(pieces_with(&nds_codec_zstd, st, &enc, N + 1, 1, out, &a), NDS_ECORRUPT,
                 "declares 600000", "a larger value");
    ck_assert_uint_eq(a.pieces, 0);
    assert_error(pieces_with(&nds_codec_zstd, st, &enc, N - 1, 1, out, &a), NDS_ECORRUPT,
                 "declares 600000", "a smaller value");
    ck_assert_uint_eq(a.pieces, 0);
    nds_buf cut = {.data = enc.data, .len = enc.len / 2};
    assert_error(pieces_with(&nds_codec_zstd, st, &cut, N, 1, out, &a), NDS_ECORRUPT, "zstd",
                 "cut short");
    for (int k = 0; k < 300; k++) { /* random damage: any answer but a crash */
        nds_buf bad = {0};
        nds_buf_append(&bad, enc.data, enc.len);
        for (int j = 0; j < 1 + k % 4; j++) bad.data[rnd() % bad.len] ^= (uint8_t)(1 + rnd() % 255);
        int rc = pieces_with(&nds_codec_zstd, st, &bad, N, 1, out, &a);
        ck_assert_msg(rc == 0 || rc == NDS_ECORRUPT, "damage: %d", rc);
        nds_buf_dispose(&bad);
    }
    nds_buf_dispose(&enc);
    /* two frames: decoded across the frame boundary; more than cap in all is corrupt */
    encode_two(&nds_codec_zstd, st, data, N / 3, N, &enc);
    ck_assert_int_eq(pieces_with(&nds_codec_zstd, st, &enc, N, 2, out, &a), 0);
    ck_assert_uint_eq(a.pieces, (N + PIECE - 1) / PIECE);
    ck_assert_int_eq(memcmp(out, data, N), 0);
    assert_error(pieces_with(&nds_codec_zstd, st, &enc, N - 10, 2, out, &a), NDS_ECORRUPT,
                 "exceeds", "two frames, more than cap");
    assert_error(pieces_with(&nds_codec_zstd, st, &enc, N + 10, 2, out, &a), NDS_ECORRUPT,
                 "found 600000", "two frames, less than cap");
    nds_buf_dispose(&enc);
    /* no content size: in pieces; a window larger than the value: whole, one piece */
    zstd_stream_frame(data, N, 20, &enc);
    ck_assert_int_eq(pieces_with(&nds_codec_zstd, st, &enc, N, 4, out, &a), 0);
    ck_assert_uint_gt(a.pieces, 1);
    ck_assert_int_eq(memcmp(out, data, N), 0);
    nds_buf_dispose(&enc);
    zstd_stream_frame(data, 3 * PIECE, 27, &enc);
    ck_assert_int_eq(pieces_with(&nds_codec_zstd, st, &enc, 3 * PIECE, 4, out, &a), 0);
    ck_assert_uint_eq(a.pieces, 1);
    ck_assert_int_eq(memcmp(out, data, 3 * PIECE), 0);
    nds_buf_dispose(&enc);
    /* such a frame after pieces were handed over: refused, never handed over again */
    encode_ok(&nds_codec_zstd, st, data, PIECE + 100, &enc);
    zstd_stream_frame(data + PIECE + 100, 5000, 27, &enc);
    assert_error(pieces_with(&nds_codec_zstd, st, &enc, PIECE + 5100, 4, out, &a), NDS_ECORRUPT,
                 "asks for a window larger", "a large window after pieces");
    ck_assert_uint_eq(a.pieces, 1);
    nds_buf_dispose(&enc);
    nds_codec_zstd.destroy(st);
    free(data);
    free(out);
}
END_TEST

/* The generic fallback (nds_codec_decode_fallback), for the codecs that do no part, reader or
 * pieces of their own (zstd: no reader; its pieces are its own, above): a part is the whole value decoded into the
 * caller's buffer and must be exactly the size asked for; a reader's value is read whole (after a
 * one-byte read for its size) and its errors come back as they are; a sink gets the whole
 * value as one piece. */
START_TEST(test_fallback_requests) {
    static const char *const names[] = {"gzip", "zlib", "bz2", "lz4", "zstd", "xz"};
    enum { N = 200000 };
    uint8_t *data = malloc(N), *out = malloc(N + 8);
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const nds_codec *c = nds_codec_find(names[i]);
        ck_assert_ptr_nonnull(c);
        void *st = make(c, NULL, 4);
        nds_buf enc = {0};
        encode_filled(c, st, data, N, PAT_TEXT, &enc);
        uint8_t *g = guarded(N);
        ck_assert_int_eq(decode_part(c, st, enc.data, enc.len, g, N, 1000, 5000), 0);
        ck_assert_int_eq(memcmp(g + 1000, data + 1000, 4000), 0);
        check_guard(g, N, names[i]);
        free(g);
        assert_error(decode_part(c, st, enc.data, enc.len, out, N + 1, 0, 8), NDS_ECORRUPT,
                     "expected", "a part of a value of another size");
        mem_value m = {.data = enc.data, .len = enc.len, .visible = enc.len};
        memset(out, 0, N);
        ck_assert_int_eq(part_read_with(c, st, &m, out, N, 7, 9000), 0);
        ck_assert_int_eq(memcmp(out + 7, data + 7, 8993), 0);
        ck_assert_int_eq(m.calls, 2);
        ck_assert_uint_eq(m.last_len, enc.len);
        m.fail_call = 2, m.fail_rc = NDS_ECONFLICT;
        ck_assert_int_eq(part_read_with(c, st, &m, out, N, 7, 9000), NDS_ECONFLICT);
        assembled a;
        memset(out, 0, N);
        ck_assert_int_eq(pieces_with(c, st, &enc, N, 4, out, &a), 0);
        ck_assert_uint_eq(a.pieces, c == &nds_codec_zstd ? 2 : 1); /* zstd: 128 KiB pieces */
        ck_assert_int_eq(memcmp(out, data, N), 0);
        assert_error(pieces_with(c, st, &enc, N + 1, 4, out, &a), NDS_ECORRUPT, "expected",
                     "pieces of a value of another size");
        ck_assert_uint_eq(a.pieces, 0);
        nds_buf_dispose(&enc);
        c->destroy(st);
    }
    free(data);
    free(out);
}
END_TEST

int main(void) {
    Suite *s = suite_create("codecs_part");
    TCase *tc = tcase_create("codecs_part");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_blosc_decode_part);
    tcase_add_test(tc, test_blosc_decode_part_read);
    tcase_add_test(tc, test_zstd_decode_part);
    tcase_add_test(tc, test_blosc_decode_pieces);
    tcase_add_test(tc, test_blosc_decode_pieces_refuses);
    tcase_add_test(tc, test_zstd_decode_pieces);
    tcase_add_test(tc, test_fallback_requests);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
