/* Unit tests for the bytes-to-bytes codecs (zstd, blosc, gzip, zlib, bz2, lz4) and the compact
 * codec strings of lib/codec_spec.c.
 *
 * Covers: round trips over data patterns and sizes (0 B to 1 MiB) for every config option; config
 * defaults and config_json round trips; bad configs (NDS_EFORMAT naming the member); truncated,
 * bit-flipped and random input and too-small out_cap (NDS_ECORRUPT, nothing written past out_cap,
 * checked with a guard area); hostile declared sizes; concurrent use of one instance; golden
 * vectors encoded by Debian's numcodecs (decode proven against numcodecs); and, when
 * /usr/bin/python3 with numcodecs is present, numcodecs decoding what we encoded.
 */
#include <check.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <blosc.h>
#include <lz4.h>
#include <json-c/json.h>
#include <zstd.h>

#include "ndstore/errors.h"
#include "ndstore/sys/codec.h"
#include "internal/codec_spec.h"
#include "internal/json_util.h"
#include "internal/util.h"
#include "support_check.h"
#include "support_codecs.h"

/* ---------------------------------------------------------------------------------------------- */
/* Helpers */

static const nds_codec *codec_named(const char *name) {
    static const nds_codec *const all[] = {&nds_codec_zstd, &nds_codec_blosc, &nds_codec_gzip,
                                           &nds_codec_zlib, &nds_codec_bz2,   &nds_codec_lz4};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strcmp(all[i]->name, name) == 0) return all[i];
    ck_abort_msg("no codec %s", name);
    return NULL;
}

/* Encodes then decodes data[0..len) with out_cap == len and with out_cap = len + 100 (both must
 * give exactly the data back), checking the guard. */
static void roundtrip(const nds_codec *c, void *st, const uint8_t *data, size_t len,
                      const char *what) {
    nds_buf enc = {0};
    encode_ok(c, st, data, len, &enc);
    ck_assert_msg(enc.len > 0, "%s: empty encoding", what);
    for (size_t extra = 0; extra <= 100; extra += 100) {
        uint8_t *out = guarded(len + extra);
        size_t got = (size_t)-1;
        int rc = nds_codec_decode(c, st, enc.data, enc.len, out, len + extra, &got);
        ck_assert_msg(rc == 0, "%s: decode of %zu bytes (cap +%zu): %d %s", what, len, extra, rc,
                      nds_error_last()->message);
        ck_assert_msg(got == len, "%s: decoded %zu bytes, want %zu", what, got, len);
        ck_assert_msg(len == 0 || memcmp(out, data, len) == 0, "%s: decoded bytes differ", what);
        check_guard(out, len + extra, what);
        free(out);
    }
    nds_buf_dispose(&enc);
}

/* ---------------------------------------------------------------------------------------------- */
/* Round trips */

typedef struct cfg_case {
    const char *codec;
    const char *json;
    size_t elem_size;
    bool big; /* also run the 1 MiB sizes (slow configs skip them) */
} cfg_case;

static const cfg_case configs[] = {
    {"zstd", NULL, 1, true},
    {"zstd", "{}", 1, false},
    {"zstd", "{\"level\": 1}", 1, true},
    {"zstd", "{\"level\": -5}", 1, true},
    {"zstd", "{\"level\": 19}", 1, false},
    {"zstd", "{\"level\": 22}", 1, false},
    {"zstd", "{\"id\": \"zstd\", \"level\": 3, \"checksum\": true}", 1, true},
    {"zstd", "{\"level\": 3, \"checksum\": false}", 1, false},
    {"blosc", NULL, 4, true},
    {"blosc", "{\"cname\": \"lz4\", \"clevel\": 0, \"shuffle\": 0}", 1, true},
    {"blosc", "{\"cname\": \"lz4hc\", \"clevel\": 9, \"shuffle\": 1}", 8, false},
    {"blosc", "{\"cname\": \"blosclz\", \"clevel\": 1, \"shuffle\": 2}", 2, true},
    {"blosc", "{\"cname\": \"zstd\", \"clevel\": 5, \"shuffle\": -1}", 1, true},
    {"blosc", "{\"cname\": \"zstd\", \"clevel\": 5, \"shuffle\": -1}", 4, false},
    {"blosc", "{\"cname\": \"zlib\", \"clevel\": 3, \"shuffle\": 1, \"blocksize\": 4096}", 4, true},
    {"blosc", "{\"cname\": \"lz4\", \"clevel\": 5, \"shuffle\": 1, \"blocksize\": 256}", 16, false},
    {"blosc", "{\"id\": \"blosc\", \"cname\": \"lz4\", \"clevel\": 9, \"shuffle\": 2}", 300, false},
    {"gzip", NULL, 1, true},
    {"gzip", "{\"level\": 0}", 1, true},
    {"gzip", "{\"level\": 9}", 1, false},
    {"gzip", "{\"level\": -1}", 1, false},
    {"zlib", NULL, 1, true},
    {"zlib", "{\"level\": 0}", 1, false},
    {"zlib", "{\"id\": \"zlib\", \"level\": 6}", 1, false},
    {"zlib", "{\"level\": 9}", 1, false},
    {"bz2", NULL, 1, true},
    {"bz2", "{\"level\": 5}", 1, false},
    {"bz2", "{\"level\": 9}", 1, false},
    {"lz4", NULL, 1, true},
    {"lz4", "{\"acceleration\": 0}", 1, false},
    {"lz4", "{\"acceleration\": -3}", 1, false},
    {"lz4", "{\"acceleration\": 100}", 1, true},
    {"lz4", "{\"acceleration\": 2000000}", 1, false},
};
#define N_CONFIGS (sizeof configs / sizeof configs[0])

START_TEST(test_roundtrip) {
    const cfg_case *cc = &configs[_i];
    const nds_codec *c = codec_named(cc->codec);
    void *st = make(c, cc->json, cc->elem_size);
    static const size_t sizes[] = {0, 1, 2, 3, 7, 255, 256, 1000, 4097, 65537, MIB, MIB + 3};
    uint8_t *data = malloc(MIB + 3);
    ck_assert_ptr_nonnull(data);
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        size_t n = sizes[si];
        if (n >= MIB && !cc->big) continue;
        for (int pat = 0; pat < PAT_COUNT; pat++) {
            if (n >= MIB && pat != PAT_RANDOM && pat != PAT_INT32) continue;
            char what[200];
            snprintf(what, sizeof what, "%s %s size %zu pattern %d", cc->codec,
                     cc->json ? cc->json : "(null)", n, pat);
            fill(data, n, pat);
            roundtrip(c, st, data, n, what);
        }
    }
    free(data);
    c->destroy(st);
}
END_TEST

/* Every blosc compressor with every shuffle and several element sizes. */
START_TEST(test_blosc_matrix) {
    static const char *const cnames[] = {"lz4", "lz4hc", "blosclz", "zstd", "zlib"};
    static const int shuffles[] = {0, 1, 2, -1};
    static const size_t elems[] = {1, 2, 4, 8};
    uint8_t data[20000];
    for (size_t ci = 0; ci < 5; ci++)
        for (size_t si = 0; si < 4; si++)
            for (size_t ei = 0; ei < 4; ei++) {
                char json[160];
                snprintf(json, sizeof json, "{\"cname\": \"%s\", \"clevel\": %zu, \"shuffle\": %d}",
                         cnames[ci], (ci + si) % 10, shuffles[si]);
                void *st = make(&nds_codec_blosc, json, elems[ei]);
                for (int pat = 0; pat < PAT_COUNT; pat++) {
                    size_t n = 1 + (size_t)pat * 3331;
                    fill(data, n, pat);
                    roundtrip(&nds_codec_blosc, st, data, n, json);
                }
                nds_codec_blosc.destroy(st);
            }
}
END_TEST

/* The header blosc writes records what the config asked for. */
START_TEST(test_blosc_header) {
    uint8_t data[65536];
    fill(data, sizeof data, PAT_INT32);
    struct {
        const char *json;
        size_t elem;
        int want_flags; /* BLOSC_DOSHUFFLE / BLOSC_DOBITSHUFFLE bits */
        const char *lib;
        size_t blocksize;
    } cases[] = {
        {"{\"cname\": \"lz4\", \"shuffle\": -1}", 1, BLOSC_DOBITSHUFFLE, "LZ4", 0},
        {"{\"cname\": \"lz4\", \"shuffle\": -1}", 4, BLOSC_DOSHUFFLE, "LZ4", 0},
        {"{\"cname\": \"zstd\", \"shuffle\": 0}", 4, 0, "Zstd", 0},
        {"{\"cname\": \"zlib\", \"shuffle\": 2}", 8, BLOSC_DOBITSHUFFLE, "Zlib", 0},
        {"{\"cname\": \"blosclz\", \"shuffle\": 1, \"blocksize\": 256}", 4, BLOSC_DOSHUFFLE,
         "BloscLZ", 256},
        /* c-blosc raises some forced block sizes (numcodecs gives the same header). */
        {"{\"cname\": \"zstd\", \"shuffle\": 1, \"blocksize\": 4096}", 4, BLOSC_DOSHUFFLE, "Zstd",
         4096},
        {"{\"cname\": \"lz4hc\"}", 2, BLOSC_DOSHUFFLE, "LZ4", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        void *st = make(&nds_codec_blosc, cases[i].json, cases[i].elem);
        nds_buf enc = {0};
        encode_ok(&nds_codec_blosc, st, data, sizeof data, &enc);
        size_t typesize = 0, nbytes, cbytes, blocksize;
        int flags = 0;
        blosc_cbuffer_metainfo(enc.data, &typesize, &flags);
        blosc_cbuffer_sizes(enc.data, &nbytes, &cbytes, &blocksize);
        ck_assert_uint_eq(typesize, cases[i].elem);
        ck_assert_msg((flags & (BLOSC_DOSHUFFLE | BLOSC_DOBITSHUFFLE)) == cases[i].want_flags,
                      "%s elem %zu: flags %d", cases[i].json, cases[i].elem, flags);
        ck_assert_str_eq(blosc_cbuffer_complib(enc.data), cases[i].lib);
        ck_assert_uint_eq(nbytes, sizeof data);
        ck_assert_uint_eq(cbytes, enc.len);
        if (cases[i].blocksize) ck_assert_uint_eq(blocksize, cases[i].blocksize);
        nds_buf_dispose(&enc);
        nds_codec_blosc.destroy(st);
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Configs */

START_TEST(test_config_json) {
    struct {
        const char *codec, *in, *want;
    } cases[] = {
        {"zstd", NULL, "{\"id\":\"zstd\",\"level\":0}"},
        {"zstd", "{\"id\":\"zstd\"}", "{\"id\":\"zstd\",\"level\":0}"},
        {"zstd", "{\"level\":7}", "{\"id\":\"zstd\",\"level\":7}"},
        {"zstd", "{\"level\":-131072}", "{\"id\":\"zstd\",\"level\":-131072}"},
        {"zstd", "{\"level\":2,\"checksum\":true}",
         "{\"id\":\"zstd\",\"level\":2,\"checksum\":true}"},
        {"zstd", "{\"level\":2,\"checksum\":false}", "{\"id\":\"zstd\",\"level\":2}"},
        {"blosc", NULL,
         "{\"id\":\"blosc\",\"cname\":\"lz4\",\"clevel\":5,\"shuffle\":1,\"blocksize\":0}"},
        {"blosc", "{\"cname\":\"zstd\",\"clevel\":9,\"shuffle\":-1,\"blocksize\":65536}",
         "{\"id\":\"blosc\",\"cname\":\"zstd\",\"clevel\":9,\"shuffle\":-1,\"blocksize\":65536}"},
        {"blosc", "{\"shuffle\":2}",
         "{\"id\":\"blosc\",\"cname\":\"lz4\",\"clevel\":5,\"shuffle\":2,\"blocksize\":0}"},
        {"blosc", "{\"clevel\":5.0}",
         "{\"id\":\"blosc\",\"cname\":\"lz4\",\"clevel\":5,\"shuffle\":1,\"blocksize\":0}"},
        {"gzip", NULL, "{\"id\":\"gzip\",\"level\":1}"},
        {"gzip", "{\"level\":9}", "{\"id\":\"gzip\",\"level\":9}"},
        {"zlib", NULL, "{\"id\":\"zlib\",\"level\":1}"},
        {"zlib", "{\"level\":-1}", "{\"id\":\"zlib\",\"level\":-1}"},
        {"bz2", NULL, "{\"id\":\"bz2\",\"level\":1}"},
        {"bz2", "{\"level\":9}", "{\"id\":\"bz2\",\"level\":9}"},
        {"lz4", NULL, "{\"id\":\"lz4\",\"acceleration\":1}"},
        {"lz4", "{\"acceleration\":0}", "{\"id\":\"lz4\",\"acceleration\":0}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const nds_codec *c = codec_named(cases[i].codec);
        void *st = make(c, cases[i].in, 4);
        json_object *got = NULL;
        ck_assert_int_eq(c->config_json(st, &got), 0);
        json_object *want = parse(cases[i].want);
        ck_assert_msg(nds_json_equal(got, want), "%s %s: config_json %s, want %s", c->name,
                      cases[i].in ? cases[i].in : "(null)", json_object_to_json_string(got),
                      cases[i].want);
        /* The output must itself be an accepted config that round-trips. */
        void *st2 = NULL;
        ck_assert_int_eq(c->create(&st2, got, 4), 0);
        json_object *again = NULL;
        ck_assert_int_eq(c->config_json(st2, &again), 0);
        ck_assert(nds_json_equal(again, want));
        json_object_put(again);
        json_object_put(got);
        json_object_put(want);
        c->destroy(st2);
        c->destroy(st);
    }
    for (size_t i = 0; i < 6; i++)
        codec_named((const char *[]){"zstd", "blosc", "gzip", "zlib", "bz2", "lz4"}[i])
            ->destroy(NULL);
}
END_TEST

START_TEST(test_bad_configs) {
    struct {
        const char *codec, *json, *needle;
    } cases[] = {
        {"zstd", "[1]", "json object"},
        {"zstd", "{\"level\":\"3\"}", "\"level\""},
        {"zstd", "{\"level\":23}", "\"level\""},
        {"zstd", "{\"level\":-131073}", "\"level\""},
        {"zstd", "{\"level\":1.5}", "\"level\""},
        {"zstd", "{\"level\":null}", "\"level\""},
        {"zstd", "{\"checksum\":1}", "\"checksum\""},
        {"zstd", "{\"levle\":3}", "\"levle\""},
        {"blosc", "{\"cname\":\"snappy2\"}", "\"cname\""},
        {"blosc", "{\"cname\":\"LZ4\"}", "\"cname\""},
        {"blosc", "{\"cname\":5}", "\"cname\""},
        {"blosc", "{\"clevel\":10}", "\"clevel\""},
        {"blosc", "{\"clevel\":-1}", "\"clevel\""},
        {"blosc", "{\"clevel\":\"5\"}", "\"clevel\""},
        {"blosc", "{\"shuffle\":3}", "\"shuffle\""},
        {"blosc", "{\"shuffle\":-2}", "\"shuffle\""},
        {"blosc", "{\"shuffle\":\"bitshuffle\"}", "\"shuffle\""},
        {"blosc", "{\"blocksize\":-1}", "\"blocksize\""},
        {"blosc", "{\"blocksize\":4294967296}", "\"blocksize\""},
        {"blosc", "{\"blocksize\":true}", "\"blocksize\""},
        {"blosc", "{\"typesize\":4}", "\"typesize\""},
        {"blosc", "\"lz4\"", "json object"},
        {"gzip", "{\"level\":10}", "\"level\""},
        {"gzip", "{\"level\":-2}", "\"level\""},
        {"gzip", "{\"level\":\"1\"}", "\"level\""},
        {"gzip", "{\"compresslevel\":1}", "\"compresslevel\""},
        {"zlib", "{\"level\":10}", "\"level\""},
        {"zlib", "{\"level\":[1]}", "\"level\""},
        {"bz2", "{\"level\":0}", "\"level\""},
        {"bz2", "{\"level\":10}", "\"level\""},
        {"bz2", "{\"level\":false}", "\"level\""},
        {"lz4", "{\"acceleration\":\"fast\"}", "\"acceleration\""},
        {"lz4", "{\"acceleration\":1099511627776}", "\"acceleration\""},
        {"lz4", "{\"acceleration\":1.25}", "\"acceleration\""},
        {"lz4", "{\"level\":1}", "\"level\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const nds_codec *c = codec_named(cases[i].codec);
        json_object *cfg = parse(cases[i].json);
        void *st = (void *)&st;
        int rc = c->create(&st, cfg, 4);
        char what[160];
        snprintf(what, sizeof what, "%s %s", cases[i].codec, cases[i].json);
        assert_error(rc, NDS_EFORMAT, cases[i].needle, what);
        ck_assert_msg(
            strncmp(nds_error_last()->message, cases[i].codec, strlen(cases[i].codec)) == 0,
            "%s: message \"%s\" does not start with the codec", what, nds_error_last()->message);
        json_object_put(cfg);
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Bad input */

/* Decodes in[0..len) with out_cap; asserts no write past out_cap, and either success within
 * out_cap or NDS_ECORRUPT (NDS_ENOMEM is never expected for these small inputs). Returns rc. */
static int decode_guarded(const nds_codec *c, void *st, const uint8_t *in, size_t len,
                          size_t out_cap, const char *what) {
    uint8_t *out = guarded(out_cap);
    size_t got = (size_t)-1;
    int rc = nds_codec_decode(c, st, in, len, out, out_cap, &got);
    ck_assert_msg(rc == 0 || rc == NDS_ECORRUPT, "%s: unexpected rc %d: %s", what, rc,
                  nds_error_last()->message);
    if (rc == 0) ck_assert_msg(got <= out_cap, "%s: out_len %zu > out_cap %zu", what, got, out_cap);
    if (rc) ck_assert_msg(nds_error_last()->message[0] != '\0', "%s: error without message", what);
    check_guard(out, out_cap, what);
    free(out);
    return rc;
}

static const char *const all_names[] = {"zstd", "blosc", "gzip", "zlib", "bz2", "lz4"};

START_TEST(test_truncated) {
    const nds_codec *c = codec_named(all_names[_i]);
    void *st = make(c, NULL, 4);
    uint8_t data[3000];
    for (int pat = 0; pat < PAT_COUNT; pat++) {
        nds_buf enc = {0};
        encode_filled(c, st, data, sizeof data, pat, &enc);
        for (size_t n = 0; n < enc.len; n++) {
            char what[100];
            snprintf(what, sizeof what, "%s pattern %d truncated to %zu of %zu", c->name, pat, n,
                     enc.len);
            int rc = decode_guarded(c, st, enc.data, n, sizeof data, what);
            ck_assert_msg(rc == NDS_ECORRUPT, "%s: accepted", what);
        }
        nds_buf_dispose(&enc);
    }
    c->destroy(st);
}
END_TEST

START_TEST(test_small_out_cap) {
    const nds_codec *c = codec_named(all_names[_i]);
    void *st = make(c, NULL, 4);
    static const size_t sizes[] = {1, 100, 4097, 70000};
    uint8_t *data = malloc(70000);
    for (size_t si = 0; si < 4; si++) {
        for (int pat = 0; pat < PAT_COUNT; pat++) {
            size_t n = sizes[si];
            nds_buf enc = {0};
            encode_filled(c, st, data, n, pat, &enc);
            size_t caps[] = {0, n - 1, n / 2, 1};
            for (size_t k = 0; k < 4; k++) {
                if (caps[k] >= n) continue;
                char what[100];
                snprintf(what, sizeof what, "%s pattern %d size %zu out_cap %zu", c->name, pat, n,
                         caps[k]);
                int rc = decode_guarded(c, st, enc.data, enc.len, caps[k], what);
                ck_assert_msg(rc == NDS_ECORRUPT, "%s: accepted", what);
            }
            nds_buf_dispose(&enc);
        }
    }
    free(data);
    c->destroy(st);
}
END_TEST

/* Every single-bit flip and every byte set to 0x00/0xff in the first 64 bytes, then flips spread
 * over the rest: never a crash or a write past out_cap; checksummed formats must notice. */
START_TEST(test_corrupt) {
    const nds_codec *c = codec_named(all_names[_i]);
    void *st = make(c, NULL, 4);
    uint8_t data[2000];
    nds_buf enc = {0};
    encode_filled(c, st, data, sizeof data, PAT_TEXT, &enc);
    uint8_t *mut = malloc(enc.len);
    for (size_t pos = 0; pos < enc.len; pos += pos < 64 ? 1 : 7) {
        for (int v = 0; v < 10; v++) {
            memcpy(mut, enc.data, enc.len);
            mut[pos] = v < 8 ? (uint8_t)(mut[pos] ^ (1u << v)) : (v == 8 ? 0x00 : 0xff);
            if (memcmp(mut, enc.data, enc.len) == 0) continue;
            char what[100];
            snprintf(what, sizeof what, "%s byte %zu variant %d", c->name, pos, v);
            int rc = decode_guarded(c, st, mut, enc.len, sizeof data, what);
            /* gzip, zlib and bz2 carry checksums of the data, so a change they accept must be
             * one that does not matter (header mtime, padding bits after the last block). */
            bool checked =
                !strcmp(c->name, "gzip") || !strcmp(c->name, "zlib") || !strcmp(c->name, "bz2");
            if (checked && rc == 0) {
                uint8_t *out = guarded(sizeof data);
                size_t got = 0;
                ck_assert_int_eq(nds_codec_decode(c, st, mut, enc.len, out, sizeof data, &got), 0);
                ck_assert_msg(got == sizeof data && memcmp(out, data, got) == 0,
                              "%s: corruption not detected", what);
                free(out);
            }
        }
    }
    free(mut);
    nds_buf_dispose(&enc);
    c->destroy(st);
}
END_TEST

START_TEST(test_random_input) {
    const nds_codec *c = codec_named(all_names[_i]);
    void *st = make(c, NULL, 4);
    uint8_t buf[600];
    for (int iter = 0; iter < 3000; iter++) {
        size_t n = (size_t)(rnd() % sizeof buf);
        fill(buf, n, PAT_RANDOM);
        /* Sometimes start with a valid-looking header so the decoder gets past the first check. */
        if (iter % 3 == 1 && n >= 16) {
            static const uint8_t magic[][4] = {{0x28, 0xb5, 0x2f, 0xfd}, {0x02, 0x01, 0x21, 0x04},
                                               {0x1f, 0x8b, 0x08, 0x00}, {0x78, 0x9c, 0x00, 0x00},
                                               {'B', 'Z', 'h', '9'},     {0x10, 0x00, 0x00, 0x00}};
            memcpy(buf, magic[_i], 4);
        }
        char what[64];
        snprintf(what, sizeof what, "%s random input %d (%zu bytes)", c->name, iter, n);
        decode_guarded(c, st, buf, n, (size_t)(rnd() % 5000), what);
    }
    c->destroy(st);
}
END_TEST

START_TEST(test_empty_input) {
    const nds_codec *c = codec_named(all_names[_i]);
    void *st = make(c, NULL, 4);
    uint8_t one = 0;
    decode_guarded(c, st, &one, 0, 100, "empty input");
    assert_error(nds_codec_decode(c, st, &one, 0, NULL, 0, &(size_t){0}), NDS_ECORRUPT, c->name,
                 "empty input, NULL out");
    c->destroy(st);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Hostile declared sizes */

/* Header sizes past 2^31 are reported as the unsigned numbers they are (once sign-extended:
 * "header says 18446744071562067983 bytes"). */
START_TEST(test_hostile_blosc_sizes) {
    void *st = make(&nds_codec_blosc, NULL, 4);
    uint8_t in[32] = {2, 1, 0x01, 4};
    uint8_t out[64];
    size_t got;
    nds_store_le32(in + 4, 64);          /* nbytes */
    nds_store_le32(in + 8, 64);          /* blocksize */
    nds_store_le32(in + 12, 0x8000000f); /* cbytes: 2^31 + 15 */
    assert_error(nds_codec_decode(&nds_codec_blosc, st, in, sizeof in, out, sizeof out, &got),
                 NDS_ECORRUPT, "header says 2147483663 bytes, 32 present",
                 "blosc cbytes 2^31 + 15");
    nds_store_le32(in + 4, 0x8000000f); /* nbytes */
    nds_store_le32(in + 12, sizeof in);
    ck_assert_int_eq(nds_codec_decode(&nds_codec_blosc, st, in, sizeof in, out, sizeof out, &got),
                     NDS_ECORRUPT);
    ck_assert_msg(strstr(nds_error_last()->message, "2147483663") &&
                      !strstr(nds_error_last()->message, "18446744"),
                  "blosc nbytes 2^31 + 15: %s", nds_error_last()->message);
    nds_codec_blosc.destroy(st);
}
END_TEST

START_TEST(test_hostile_lz4) {
    void *st = make(&nds_codec_lz4, NULL, 1);
    /* Claims 4 GiB - 1, then 2 GiB, then 1 MiB + 1 with a 1 MiB out_cap; payload is a tiny block.
     */
    uint8_t in[] = {0xff, 0xff, 0xff, 0xff, 0x10, 'x'};
    decode_guarded(&nds_codec_lz4, st, in, sizeof in, MIB, "lz4 4 GiB");
    assert_error(nds_codec_decode(&nds_codec_lz4, st, in, sizeof in, NULL, 0, &(size_t){0}),
                 NDS_ECORRUPT, "declares", "lz4 4 GiB");
    uint8_t *out = guarded(MIB);
    size_t got;
    assert_error(nds_codec_decode(&nds_codec_lz4, st, in, sizeof in, out, MIB, &got), NDS_ECORRUPT,
                 "declares", "lz4 4 GiB, 1 MiB cap");
    in[0] = 0, in[1] = 0, in[2] = 0, in[3] = 0x80;
    assert_error(nds_codec_decode(&nds_codec_lz4, st, in, sizeof in, out, MIB, &got), NDS_ECORRUPT,
                 "declares", "lz4 2 GiB");
    in[0] = 1, in[1] = 0, in[2] = 0x10, in[3] = 0;
    assert_error(nds_codec_decode(&nds_codec_lz4, st, in, sizeof in, out, MIB, &got), NDS_ECORRUPT,
                 "declares", "lz4 1 MiB + 1");
    /* A declared size the block does not fill is corrupt too. */
    in[0] = 5, in[1] = 0, in[2] = 0, in[3] = 0;
    assert_error(nds_codec_decode(&nds_codec_lz4, st, in, sizeof in, out, MIB, &got), NDS_ECORRUPT,
                 "lz4", "lz4 short block");
    check_guard(out, MIB, "lz4 hostile");
    free(out);
    nds_codec_lz4.destroy(st);
}
END_TEST

START_TEST(test_hostile_zstd) {
    void *st = make(&nds_codec_zstd, NULL, 1);
    /* Frame header: magic, FHD = 0xe0 (8-byte content size, single segment), size 2^32. */
    uint8_t in[] = {0x28, 0xb5, 0x2f, 0xfd, 0xe0, 0x00, 0x00, 0x00,
                    0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00};
    ck_assert_uint_eq(ZSTD_getFrameContentSize(in, sizeof in), 1ull << 32);
    uint8_t *out = guarded(MIB);
    size_t got;
    assert_error(nds_codec_decode(&nds_codec_zstd, st, in, sizeof in, out, MIB, &got), NDS_ECORRUPT,
                 "declares", "zstd 4 GiB");
    check_guard(out, MIB, "zstd hostile");
    /* Not a zstd frame at all. */
    uint8_t junk[] = "this is not zstd";
    assert_error(nds_codec_decode(&nds_codec_zstd, st, junk, sizeof junk, out, MIB, &got),
                 NDS_ECORRUPT, "zstd", "zstd junk");
    free(out);
    nds_codec_zstd.destroy(st);
}
END_TEST

START_TEST(test_hostile_blosc) {
    void *st = make(&nds_codec_blosc, NULL, 4);
    uint8_t data[1000];
    nds_buf enc = {0};
    encode_filled(&nds_codec_blosc, st, data, sizeof data, PAT_RAMP, &enc);
    uint8_t *mut = malloc(enc.len);
    uint8_t *out = guarded(sizeof data);
    size_t got;
    /* nbytes = 2 GiB - 17. */
    memcpy(mut, enc.data, enc.len);
    mut[4] = 0xef, mut[5] = 0xff, mut[6] = 0xff, mut[7] = 0x7f;
    assert_error(nds_codec_decode(&nds_codec_blosc, st, mut, enc.len, out, sizeof data, &got),
                 NDS_ECORRUPT, "declares", "blosc 2 GiB");
    /* cbytes larger than the bytes present. */
    memcpy(mut, enc.data, enc.len);
    mut[12] = (uint8_t)(enc.len + 1), mut[13] = (uint8_t)((enc.len + 1) >> 8);
    assert_error(nds_codec_decode(&nds_codec_blosc, st, mut, enc.len, out, sizeof data, &got),
                 NDS_ECORRUPT, "truncated", "blosc cbytes");
    /* blocksize of 2 GiB: must fail without allocating it. */
    memcpy(mut, enc.data, enc.len);
    mut[8] = 0, mut[9] = 0, mut[10] = 0, mut[11] = 0x80;
    assert_error(nds_codec_decode(&nds_codec_blosc, st, mut, enc.len, out, sizeof data, &got),
                 NDS_ECORRUPT, "blosc", "blosc blocksize");
    /* A header from a future format version. */
    memcpy(mut, enc.data, enc.len);
    mut[0] = 9;
    assert_error(nds_codec_decode(&nds_codec_blosc, st, mut, enc.len, out, sizeof data, &got),
                 NDS_ECORRUPT, "blosc", "blosc version");
    check_guard(out, sizeof data, "blosc hostile");
    /* Trailing bytes after the chunk are ignored, as numcodecs does. */
    nds_buf_reserve(&enc, enc.len + 5);
    memset(enc.data + enc.len, 0xee, 5);
    ck_assert_int_eq(
        nds_codec_decode(&nds_codec_blosc, st, enc.data, enc.len + 5, out, sizeof data, &got), 0);
    ck_assert_uint_eq(got, sizeof data);
    ck_assert_mem_eq(out, data, sizeof data);
    free(out);
    free(mut);
    nds_buf_dispose(&enc);
    nds_codec_blosc.destroy(st);
}
END_TEST


/* Sizes past a library's limit are refused before the input is read (so a tiny buffer suffices). */
START_TEST(test_encode_limits) {
    uint8_t tiny[16] = {0};
    nds_buf out = {0};
    void *st = make(&nds_codec_lz4, NULL, 1);
    assert_error(nds_codec_lz4.encode(st, tiny, (size_t)LZ4_MAX_INPUT_SIZE + 1, &out), NDS_ELIMIT,
                 "lz4", "lz4 limit");
    nds_codec_lz4.destroy(st);
    st = make(&nds_codec_blosc, NULL, 1);
    assert_error(nds_codec_blosc.encode(st, tiny, (size_t)BLOSC_MAX_BUFFERSIZE + 1, &out),
                 NDS_ELIMIT, "blosc", "blosc limit");
    nds_codec_blosc.destroy(st);
    st = make(&nds_codec_bz2, NULL, 1);
    assert_error(nds_codec_bz2.encode(st, tiny, (size_t)5 << 30, &out), NDS_ELIMIT, "bz2",
                 "bz2 limit");
    nds_codec_bz2.destroy(st);
    nds_buf_dispose(&out);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Format details */

static void decode_expect(const nds_codec *c, void *st, const uint8_t *in, size_t len,
                          const uint8_t *want, size_t want_len, const char *what) {
    uint8_t *out = guarded(want_len + 10);
    size_t got = 0;
    int rc = nds_codec_decode(c, st, in, len, out, want_len + 10, &got);
    ck_assert_msg(rc == 0, "%s: %d %s", what, rc, nds_error_last()->message);
    ck_assert_msg(got == want_len, "%s: %zu bytes, want %zu", what, got, want_len);
    ck_assert_msg(want_len == 0 || memcmp(out, want, want_len) == 0, "%s: bytes differ", what);
    check_guard(out, want_len + 10, what);
    free(out);
}

/* Appends trailer to enc and decodes it with out_cap len: with needle NULL the trailer must be
 * ignored (data[0..len) comes back); else decoding fails with NDS_ECORRUPT naming needle. */
static void decode_with_trailer(const nds_codec *c, void *st, nds_buf *enc, const void *trailer,
                                size_t n, const uint8_t *data, size_t len, const char *needle,
                                const char *what) {
    nds_buf_append(enc, trailer, n);
    if (!needle)
        decode_expect(c, st, enc->data, enc->len, data, len, what);
    else
        assert_error(decode_guarded(c, st, enc->data, enc->len, len, what), NDS_ECORRUPT, needle,
                     what);
}

START_TEST(test_zstd_frames) {
    void *st = make(&nds_codec_zstd, NULL, 1);
    uint8_t data[5000];
    fill(data, sizeof data, PAT_TEXT);
    /* A frame without a content size, as streaming compressors write. */
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    uint8_t frame[6000];
    ZSTD_outBuffer ob = {frame, sizeof frame, 0};
    ZSTD_inBuffer ib = {data, sizeof data, 0};
    ck_assert(!ZSTD_isError(ZSTD_compressStream2(cc, &ob, &ib, ZSTD_e_continue)));
    size_t left;
    do left = ZSTD_compressStream2(cc, &ob, &ib, ZSTD_e_end);
    while (left && !ZSTD_isError(left));
    ck_assert(!ZSTD_isError(left));
    ZSTD_freeCCtx(cc);
    ck_assert(ZSTD_getFrameContentSize(frame, ob.pos) == ZSTD_CONTENTSIZE_UNKNOWN);
    decode_expect(&nds_codec_zstd, st, frame, ob.pos, data, sizeof data, "zstd no content size");
    assert_error(decode_guarded(&nds_codec_zstd, st, frame, ob.pos, sizeof data - 1, "small"),
                 NDS_ECORRUPT, "exceeds", "zstd no content size, small out_cap");
    /* Two concatenated frames decode to the concatenation. */
    nds_buf a = {0};
    encode_two(&nds_codec_zstd, st, data, 2000, sizeof data, &a);
    decode_expect(&nds_codec_zstd, st, a.data, a.len, data, sizeof data, "zstd two frames");
    /* With checksum on, a flipped payload byte is detected. */
    void *cs = make(&nds_codec_zstd, "{\"checksum\": true}", 1);
    fill(data, sizeof data, PAT_RANDOM); /* incompressible: payload stored raw */
    nds_buf c = {0};
    encode_ok(&nds_codec_zstd, cs, data, sizeof data, &c);
    c.data[c.len / 2] ^= 1;
    assert_error(decode_guarded(&nds_codec_zstd, cs, c.data, c.len, sizeof data, "checksum"),
                 NDS_ECORRUPT, "checksum", "zstd checksum");
    nds_buf_dispose(&a);
    nds_buf_dispose(&c);
    nds_codec_zstd.destroy(cs);
    nds_codec_zstd.destroy(st);
}
END_TEST

START_TEST(test_gzip_members) {
    void *st = make(&nds_codec_gzip, NULL, 1);
    uint8_t data[3000];
    fill(data, sizeof data, PAT_TEXT);
    nds_buf a = {0};
    size_t both = encode_two(&nds_codec_gzip, st, data, 1000, sizeof data, &a);
    decode_expect(&nds_codec_gzip, st, a.data, a.len, data, sizeof data, "gzip two members");
    /* Zero padding after the last member is allowed (Python's gzip skips it) ... */
    static const uint8_t zeros[7] = {0};
    decode_with_trailer(&nds_codec_gzip, st, &a, zeros, sizeof zeros, data, sizeof data, NULL,
                        "gzip zero padding");
    /* ... other trailing bytes are not. */
    decode_with_trailer(&nds_codec_gzip, st, &a, "xyz", 3, data, sizeof data, "after the member",
                        "gzip trailing junk");
    /* Out of room in the second member. */
    assert_error(decode_guarded(&nds_codec_gzip, st, a.data, both, 2500, "room"), NDS_ECORRUPT,
                 "exceeds", "gzip second member too big");
    nds_buf_dispose(&a);
    nds_codec_gzip.destroy(st);
}
END_TEST

START_TEST(test_zlib_trailing) {
    void *st = make(&nds_codec_zlib, NULL, 1);
    uint8_t data[500];
    nds_buf a = {0};
    encode_filled(&nds_codec_zlib, st, data, sizeof data, PAT_TEXT, &a);
    ck_assert_uint_eq(a.data[0], 0x78); /* zlib header: deflate, 32 KiB window */
    ck_assert_uint_eq(((unsigned)a.data[0] << 8 | a.data[1]) % 31, 0);
    /* Trailing bytes are ignored, as Python's zlib.decompress does. */
    static const uint8_t junk[4] = {1, 2, 3, 4};
    decode_with_trailer(&nds_codec_zlib, st, &a, junk, sizeof junk, data, sizeof data, NULL,
                        "zlib trailing bytes");
    nds_buf_dispose(&a);
    nds_codec_zlib.destroy(st);
}
END_TEST

START_TEST(test_bz2_streams) {
    void *st = make(&nds_codec_bz2, NULL, 1);
    uint8_t data[3000];
    fill(data, sizeof data, PAT_INT32);
    nds_buf a = {0};
    size_t both = encode_two(&nds_codec_bz2, st, data, 1000, sizeof data, &a);
    decode_expect(&nds_codec_bz2, st, a.data, a.len, data, sizeof data, "bz2 two streams");
    /* Python's bz2.decompress ignores undecodable bytes after a complete stream. */
    decode_with_trailer(&nds_codec_bz2, st, &a, "junk!", 5, data, sizeof data, NULL,
                        "bz2 trailing junk");
    /* A second stream cut short is an error. */
    assert_error(decode_guarded(&nds_codec_bz2, st, a.data, both - 3, sizeof data, "cut"),
                 NDS_ECORRUPT, "truncated", "bz2 truncated second stream");
    ck_assert_uint_eq(a.data[0], 'B');
    ck_assert_uint_eq(a.data[3], '1'); /* level 1 = 100 kB blocks */
    nds_buf_dispose(&a);
    nds_codec_bz2.destroy(st);
}
END_TEST

START_TEST(test_lz4_framing) {
    void *st = make(&nds_codec_lz4, NULL, 1);
    uint8_t data[70000];
    nds_buf a = {0};
    encode_filled(&nds_codec_lz4, st, data, sizeof data, PAT_TEXT, &a);
    ck_assert_uint_eq(a.data[0] | a.data[1] << 8 | a.data[2] << 16 | (uint32_t)a.data[3] << 24,
                      sizeof data);
    /* Trailing bytes make the block invalid (numcodecs passes the exact block size to LZ4). */
    decode_with_trailer(&nds_codec_lz4, st, &a, "zz", 2, data, sizeof data, "lz4",
                        "lz4 trailing bytes");
    nds_buf_dispose(&a);
    nds_codec_lz4.destroy(st);
}
END_TEST

/* An nds_buf that already holds data is overwritten from offset 0, as the interface says. */
START_TEST(test_encode_reuses_buf) {
    for (size_t i = 0; i < 6; i++) {
        const nds_codec *c = codec_named(all_names[i]);
        void *st = make(c, NULL, 4);
        uint8_t data[4000];
        fill(data, sizeof data, PAT_RAMP);
        nds_buf out = {0};
        nds_buf_append(&out, "leftover bytes", 14);
        encode_ok(c, st, data, sizeof data, &out);
        size_t first = out.len;
        encode_ok(c, st, data, 10, &out);
        ck_assert_msg(out.len < first, "%s: second encode did not reset len", c->name);
        decode_expect(c, st, out.data, out.len, data, 10, c->name);
        nds_buf_dispose(&out);
        c->destroy(st);
    }
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Threads: one instance shared by several threads (thread-local contexts must not mix)          */

typedef struct thread_arg {
    const nds_codec *c;
    void *st;
    int seed;
    int failures;
} thread_arg;

static void *thread_main(void *p) {
    thread_arg *a = p;
    size_t cap = 50000;
    uint8_t *data = malloc(cap), *out = malloc(cap);
    nds_buf enc = {0};
    for (int iter = 0; iter < 40; iter++) {
        size_t n = (size_t)(a->seed * 7919 + iter * 104729) % cap;
        for (size_t i = 0; i < n; i++) data[i] = (uint8_t)((i * (size_t)(a->seed + 1)) >> 3);
        size_t got = 0;
        if (a->c->encode(a->st, data, n, &enc) ||
            nds_codec_decode(a->c, a->st, enc.data, enc.len, out, cap, &got) || got != n ||
            (n && memcmp(out, data, n)))
            a->failures++;
    }
    nds_buf_dispose(&enc);
    free(data);
    free(out);
    return NULL;
}

START_TEST(test_threads) {
    const nds_codec *c = codec_named(all_names[_i]);
    void *st = make(c, NULL, 4);
    pthread_t th[6];
    thread_arg args[6];
    for (int i = 0; i < 6; i++) {
        args[i] = (thread_arg){c, st, i, 0};
        ck_assert_int_eq(pthread_create(&th[i], NULL, thread_main, &args[i]), 0);
    }
    for (int i = 0; i < 6; i++) {
        pthread_join(th[i], NULL);
        ck_assert_msg(args[i].failures == 0, "%s thread %d: %d failures", c->name, i,
                      args[i].failures);
    }
    c->destroy(st);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Golden vectors from numcodecs                                                                  */

typedef struct golden_vector {
    const char *codec;
    const char *name;
    char plain;      /* 'a', 'b' or 'y' (empty) */
    const char *hex; /* the encoded bytes */
} golden_vector;

/* Encoded by Debian's numcodecs 0.11.0+ds (numpy 1.24.2), Python's gzip module for the gzip
 * variants: plain 'a' = numpy.arange(64, dtype='<i4').tobytes(), 'b' = b'hello ndstore ' * 10, 'y'
 * = b''. Kept as hex so each vector's length is its own, not a number kept in step by hand. */
static const golden_vector golden[] = {
    {"zstd", "zstd_l1_a", 'a',
     "28b52ffd6000003503000690180810f86c061fab4c011400150015006f9cf1c5154f1cf1c30d2f9cf0c1050f1cf0"
     "ef03ef9cf3cd35cf1cf3cb2daf9cf2c9258f1cf2c71d016f9df5d5554f1df5d34d2f9df4d1450f1df4cf3d01ef9d"
     "f7dd75cf1df7db6daf9df6d9658f1df6d75d0100"},
    {"zstd", "zstd_l19_b", 'b', "28b52ffd208cad00007068656c6c6f206e6473746f72652001003bd2a904"},
    {"zstd", "zstd_empty", 'y', "28b52ffd2000010000"},
    {"blosc", "blosc_lz4_shuffle_a", 'a',
     "020131040001000000010000680000001400000050000000ff36000102030405060708090a0b0c0d0e0f10111213"
     "1415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f0000"
     "0000000500a3500000000000"},
    {"blosc", "blosc_zstd_bitshuffle_a", 'a',
     "02019404000100000001000040000000140000002800000028b52ffd600000f5000070aaccf000ff00ff0000ffff"
     "ffff00062050efcc53938c9b716659327e05"},
    {"blosc", "blosc_blosclz_noshuffle_b", 'b',
     "020100018c0000008c0000002d00000014000000150000002d68656c6c6f206e6473746f726520e0730d016520"},
    {"blosc", "blosc_zlib_auto_b", 'b',
     "020164018c0000008c000000310000001400000019000000785ecb48cdc9c957c84b292ec92f4a55c818501e00b6"
     "9a353f"},
    {"blosc", "blosc_lz4hc_a", 'a',
     "02013104000100000001000064000000140000004c000000ff32000102030405060708090a0b0c0d0e0f10111213"
     "1415161718191a1b1c1d1e1f202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f0001"
     "00a7500000000000"},
    {"blosc", "blosc_clevel0_b", 'b',
     "020122018c0000008c0000009c00000068656c6c6f206e6473746f72652068656c6c6f206e6473746f7265206865"
     "6c6c6f206e6473746f72652068656c6c6f206e6473746f72652068656c6c6f206e6473746f72652068656c6c6f20"
     "6e6473746f72652068656c6c6f206e6473746f72652068656c6c6f206e6473746f72652068656c6c6f206e647374"
     "6f72652068656c6c6f206e6473746f726520"},
    {"blosc", "blosc_empty", 'y', "02013301000000000100000010000000"},
    {"gzip", "gzip_l1_a", 'a',
     "1f8b0800c559026b04ff0dc3055202400000c003a5a43ba441a5bb24ffff2b76673684102246fdf0d3987113264d"
     "f965da8c5973e62d58b464d98a556bd66dd8b4e5b76d3b76edd977e0d091637ffcf5cf895367ce5db874e5da8d5b"
     "77ee3d78f4e4d98bff5ebd79f7e1d3976f47918ec900010000"},
    {"gzip", "gzip_fname_b", 'b',
     "1f8b080800f1536502ff6368756e6b2e62696e00cb48cdc9c957c84b292ec92f4a55c818501e00baef84378c0000"
     "00"},
    {"gzip", "gzip_multimember_a", 'a',
     "1f8b08000000000002030dc3870d80300c00b0b0cb2c65ff7f29b6e48888cadac6d6cedec1e4e8e4ece2ea6676b7"
     "78787a79fbf8faf903f2ac3177640000001f8b08000000000002030dc30b1281500000c0770d49d14785121251ba"
     "ffadecceec268410b935766762eade8399b985a5472b6b1b4f9ebdd8da79b5f7e6dd87834f475fbe9dfcf87576f1"
     "e7ea1f03557b859c000000"},
    {"zlib", "zlib_l1_a", 'a',
     "78010dc3055202400000c003a5a43ba441a5bb24ffff2b76673684102246fdf0d3987113264df965da8c5973e62d"
     "58b464d98a556bd66dd8b4e5b76d3b76edd977e0d091637ffcf5cf895367ce5db874e5da8d5b77ee3d78f4e4d98b"
     "ff5ebd79f7e1d3976fab9e07e1"},
    {"zlib", "zlib_l9_b", 'b', "78dacb48cdc9c957c84b292ec92f4a55c818501e00b69a353f"},
    {"bz2", "bz2_l1_a", 'a',
     "425a6831314159265359e392b767000001f8007fffffffffffffffa0005456a02602304c0134c9a604c984c4c039"
     "8002600026000000007807df808418828c390494599f8d38f41149351559761969bfee3af3f04314724b34f45355"
     "7659f6dbafc3f63967ff4d76df8dc0400002e45dc914e142438e4add9c"},
    {"bz2", "bz2_l9_b", 'b',
     "425a6839314159265359213de11100001d9180400006459c0020004052a9a3130801861349a4da6932994da613c4"
     "e26d3f4e2745dc914e1424084f784440"},
    {"lz4", "lz4_a1_a", 'a',
     "00010000f0f100000000010000000200000003000000040000000500000006000000070000000800000009000000"
     "0a0000000b0000000c0000000d0000000e0000000f00000010000000110000001200000013000000140000001500"
     "0000160000001700000018000000190000001a0000001b0000001c0000001d0000001e0000001f00000020000000"
     "2100000022000000230000002400000025000000260000002700000028000000290000002a0000002b0000002c00"
     "00002d0000002e0000002f0000003000000031000000320000003300000034000000350000003600000037000000"
     "38000000390000003a0000003b0000003c0000003d0000003e0000003f000000"},
    {"lz4", "lz4_a10_b", 'b',
     "8c000000ff1b68656c6c6f206e6473746f72652068656c6c6f206e6473746f72652068656c6c6f206e6473746f72"
     "65202a004a50746f726520"},
    {"lz4", "lz4_empty", 'y', "0000000000"},
};

/* The bytes of hex, malloc'd to their exact size (so ASan sees a read past the end); *len their
 * count. */
static uint8_t *from_hex(const char *hex, size_t *len) {
    size_t n = strlen(hex) / 2;
    ck_assert_msg(strlen(hex) % 2 == 0, "odd golden hex %.20s", hex);
    uint8_t *buf = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(buf);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        ck_assert(sscanf(hex + 2 * i, "%2x", &v) == 1);
        buf[i] = (uint8_t)v;
    }
    *len = n;
    return buf;
}

static void golden_plain(char kind, uint8_t *buf, size_t *len) {
    if (kind == 'a') { /* numpy.arange(64, dtype='<i4') */
        for (uint32_t i = 0; i < 64; i++) {
            buf[4 * i] = (uint8_t)i;
            buf[4 * i + 1] = buf[4 * i + 2] = buf[4 * i + 3] = 0;
        }
        *len = 256;
    } else if (kind == 'b') {
        for (int i = 0; i < 10; i++) memcpy(buf + 14 * i, "hello ndstore ", 14);
        *len = 140;
    } else {
        *len = 0;
    }
}

START_TEST(test_golden) {
    for (size_t i = 0; i < sizeof golden / sizeof golden[0]; i++) {
        const golden_vector *g = &golden[i];
        const nds_codec *c = codec_named(g->codec);
        /* Decoding does not depend on the config: a default instance reads every variant. */
        void *st = make(c, NULL, 4);
        uint8_t plain[256];
        size_t plain_len;
        golden_plain(g->plain, plain, &plain_len);
        size_t enc_len;
        uint8_t *enc = from_hex(g->hex, &enc_len);
        decode_expect(c, st, enc, enc_len, plain, plain_len, g->name);
        /* out_cap exactly the size works too; one byte less does not. */
        uint8_t *out = guarded(plain_len);
        size_t got = 0;
        ck_assert_msg(nds_codec_decode(c, st, enc, enc_len, out, plain_len, &got) == 0,
                      "%s exact: %s", g->name, nds_error_last()->message);
        ck_assert_uint_eq(got, plain_len);
        check_guard(out, plain_len, g->name);
        free(out);
        if (plain_len > 0) {
            out = guarded(plain_len - 1);
            assert_error(nds_codec_decode(c, st, enc, enc_len, out, plain_len - 1, &got),
                         NDS_ECORRUPT, g->codec, g->name);
            check_guard(out, plain_len - 1, g->name);
            free(out);
        }
        free(enc);
        c->destroy(st);
    }
}
END_TEST

/* numcodecs decodes what we encode, using the config our config_json writes. Skipped (with a note)
 * when /usr/bin/python3 or numcodecs is missing. */
static const char *const py_check =
    "import json, os, sys\n"
    "import numcodecs\n"
    "d = sys.argv[1]; n = 0\n"
    "old = tuple(int(x) for x in numcodecs.__version__.split('+')[0].split('.')[:2]) < (0, 12)\n"
    "for f in sorted(os.listdir(d)):\n"
    "    if not f.endswith('.json'): continue\n"
    "    base = os.path.join(d, f[:-5])\n"
    "    cfg = json.load(open(base + '.json'))\n"
    "    if old: cfg.pop('checksum', None)\n"
    "    codec = numcodecs.get_codec(cfg)\n"
    "    enc = open(base + '.enc', 'rb').read(); raw = open(base + '.raw', 'rb').read()\n"
    "    out = bytes(codec.decode(enc))\n"
    "    if out != raw: sys.exit('mismatch for %s %s' % (f, cfg))\n"
    "    n += 1\n"
    "print('numcodecs decoded', n)\n";

static bool have_numcodecs(void) {
    if (access("/usr/bin/python3", X_OK) != 0) return false;
    return system("/usr/bin/python3 -c 'import numcodecs' >/dev/null 2>&1") == 0;
}

START_TEST(test_numcodecs_reads_ours) {
    if (!have_numcodecs()) {
        fprintf(stderr, "test_numcodecs_reads_ours: skipped, no /usr/bin/python3 with numcodecs\n");
        return;
    }
    char dir[] = "/tmp/nds_codec_interop_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    size_t count = 0;
    uint8_t *data = malloc(70000);
    for (size_t ci = 0; ci < N_CONFIGS; ci++) {
        const nds_codec *c = codec_named(configs[ci].codec);
        void *st = make(c, configs[ci].json, configs[ci].elem_size);
        json_object *cfg = NULL;
        ck_assert_int_eq(c->config_json(st, &cfg), 0);
        /* No empty input: numcodecs 0.11 cannot decode empty zstd, lz4 or blosc data, even its own.
         */
        for (int pat = 1; pat < PAT_COUNT; pat += 2) {
            size_t n = 70000 / (size_t)pat;
            fill(data, n, pat);
            nds_buf enc = {0};
            encode_ok(c, st, data, n, &enc);
            char path[256];
            const char *js = json_object_to_json_string_ext(cfg, JSON_C_TO_STRING_PLAIN);
            snprintf(path, sizeof path, "%s/%03zu_%d.json", dir, ci, pat);
            nds_test_write_file(path, js, strlen(js));
            snprintf(path, sizeof path, "%s/%03zu_%d.enc", dir, ci, pat);
            nds_test_write_file(path, enc.data, enc.len);
            snprintf(path, sizeof path, "%s/%03zu_%d.raw", dir, ci, pat);
            nds_test_write_file(path, data, n);
            nds_buf_dispose(&enc);
            count++;
        }
        json_object_put(cfg);
        c->destroy(st);
    }
    free(data);
    char script[300], cmd[700];
    snprintf(script, sizeof script, "%s/check.py", dir);
    nds_test_write_file(script, py_check, strlen(py_check));
    snprintf(cmd, sizeof cmd, "cd / && /usr/bin/python3 %s %s 2>&1", script, dir);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    char line[4096] = "", all[8192] = "";
    while (fgets(line, sizeof line, p)) strncat(all, line, sizeof all - strlen(all) - 1);
    int status = pclose(p);
    char want[64];
    snprintf(want, sizeof want, "numcodecs decoded %zu", count);
    ck_assert_msg(status == 0 && strstr(all, want), "python said: %s", all);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Registry and compact codec strings                                                             */

START_TEST(test_registry) {
    for (size_t i = 0; i < 6; i++)
        ck_assert_ptr_eq(nds_codec_find(all_names[i]), codec_named(all_names[i]));
    ck_assert_ptr_null(nds_codec_find("snappy-ish"));
}
END_TEST

/* Registration takes codecs of this version with every method, and refuses the others by name:
 * a codec built for the old version 4 (four decodes), one without a decode, none at all. */
START_TEST(test_registry_refuses) {
    nds_codec old = nds_codec_zstd;
    old.name = "zstd-old";
    old.version = 4;
    assert_error(nds_codec_register(&old), NDS_EINVAL,
                 "codec \"zstd-old\" is of version 4; this library takes version 1", "version");
    ck_assert_ptr_null(nds_codec_find("zstd-old"));
    nds_codec partial = nds_codec_zstd;
    partial.name = "zstd-partial";
    partial.decode = NULL;
    assert_error(nds_codec_register(&partial), NDS_EINVAL, "lacks", "no decode");
    assert_error(nds_codec_register(NULL), NDS_EINVAL, "no codec", "NULL");
}
END_TEST

START_TEST(test_codec_spec) {
    /* A good string gives the JSON want; a bad one fails with NDS_EINVAL naming needle. */
    struct {
        const char *text, *want, *needle;
    } cases[] = {
        {"zstd", "{\"id\":\"zstd\",\"level\":0}", NULL},
        {"zstd:5", "{\"id\":\"zstd\",\"level\":5}", NULL},
        {"zstd:-3", "{\"id\":\"zstd\",\"level\":-3}", NULL},
        {"zstd:", "{\"id\":\"zstd\",\"level\":0}", NULL},
        {"blosc", "{\"id\":\"blosc\",\"cname\":\"lz4\",\"clevel\":5,\"shuffle\":1,\"blocksize\":0}",
         NULL},
        {"blosc:zstd",
         "{\"id\":\"blosc\",\"cname\":\"zstd\",\"clevel\":5,\"shuffle\":1,\"blocksize\":0}", NULL},
        {"blosc:zstd:7:bitshuffle",
         "{\"id\":\"blosc\",\"cname\":\"zstd\",\"clevel\":7,\"shuffle\":2,\"blocksize\":0}", NULL},
        {"blosc:lz4hc:9:noshuffle",
         "{\"id\":\"blosc\",\"cname\":\"lz4hc\",\"clevel\":9,\"shuffle\":0,\"blocksize\":0}", NULL},
        {"blosc:blosclz:1:shuffle",
         "{\"id\":\"blosc\",\"cname\":\"blosclz\",\"clevel\":1,\"shuffle\":1,\"blocksize\":0}",
         NULL},
        {"blosc:zlib:0:-1",
         "{\"id\":\"blosc\",\"cname\":\"zlib\",\"clevel\":0,\"shuffle\":-1,\"blocksize\":0}", NULL},
        {"blosc:lz4:3:autoshuffle",
         "{\"id\":\"blosc\",\"cname\":\"lz4\",\"clevel\":3,\"shuffle\":-1,\"blocksize\":0}", NULL},
        {"blosc::7",
         "{\"id\":\"blosc\",\"cname\":\"lz4\",\"clevel\":7,\"shuffle\":1,\"blocksize\":0}", NULL},
        {"blosc:::2",
         "{\"id\":\"blosc\",\"cname\":\"lz4\",\"clevel\":5,\"shuffle\":2,\"blocksize\":0}", NULL},
        {"gzip", "{\"id\":\"gzip\",\"level\":1}", NULL},
        {"gzip:9", "{\"id\":\"gzip\",\"level\":9}", NULL},
        {"zlib:0", "{\"id\":\"zlib\",\"level\":0}", NULL},
        {"bz2", "{\"id\":\"bz2\",\"level\":1}", NULL},
        {"bz2:9", "{\"id\":\"bz2\",\"level\":9}", NULL},
        {"lz4", "{\"id\":\"lz4\",\"acceleration\":1}", NULL},
        {"lz4:10", "{\"id\":\"lz4\",\"acceleration\":10}", NULL},
        {"", NULL, "empty"},
        {"snappy", NULL, "unknown codec"},
        {"ZSTD", NULL, "unknown codec"},
        {"none:1", NULL, "none"},
        {"zstd:x", NULL, "level"},
        {"zstd: 5", NULL, "level"},
        {"zstd:+5", NULL, "level"},
        {"zstd:5x", NULL, "level"},
        {"zstd:99", NULL, "level"},
        {"zstd:99999999999", NULL, "level"},
        {"zstd:1:2", NULL, "at most 1"},
        {"blosc:foo", NULL, "cname"},
        {"blosc:lz4:10", NULL, "clevel"},
        {"blosc:lz4:x", NULL, "clevel"},
        {"blosc:lz4:5:sideways", NULL, "shuffle"},
        {"blosc:lz4:5:3", NULL, "shuffle"},
        {"blosc:lz4:5:1:0", NULL, "too many"},
        {"gzip:10", NULL, "level"},
        {"gzip:1:2", NULL, "at most 1"},
        {"bz2:0", NULL, "level"},
        {"lz4:fast", NULL, "acceleration"},
        {"zstd:0123456789012345678901234567890123", NULL, "too long"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_object *got = NULL;
        int rc = nds_codec_spec_parse(cases[i].text, &got);
        char what[100];
        snprintf(what, sizeof what, "codec string \"%s\"", cases[i].text);
        if (!cases[i].want) {
            assert_error(rc, NDS_EINVAL, cases[i].needle, what);
            ck_assert_ptr_null(got);
            continue;
        }
        ck_assert_msg(rc == 0, "%s: %d %s", what, rc, nds_error_last()->message);
        json_object *want = parse(cases[i].want);
        ck_assert_msg(nds_json_equal(got, want), "%s: got %s", what,
                      json_object_to_json_string(got));
        json_object_put(got);
        json_object_put(want);
    }
    json_object *none = (json_object *)&none;
    ck_assert_int_eq(nds_codec_spec_parse("none", &none), 0);
    ck_assert_ptr_null(none);
}
END_TEST

/* ---------------------------------------------------------------------------------------------- */
/* Lying trailers */

static uint32_t get_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Decodes enc with the 4 bytes at `at` set to v (little-endian), with out_cap len and len + 100:
 * NDS_ECORRUPT with a message naming the codec, nothing written past out_cap. */
static void expect_lie(const nds_codec *c, void *st, const nds_buf *enc, size_t at, uint32_t v,
                       size_t len, const char *what) {
    uint8_t *mut = malloc(enc->len);
    ck_assert_ptr_nonnull(mut);
    memcpy(mut, enc->data, enc->len);
    for (int i = 0; i < 4; i++) mut[at + i] = (uint8_t)(v >> (8 * i));
    ck_assert_msg(memcmp(mut, enc->data, enc->len) != 0, "%s: nothing changed", what);
    for (size_t extra = 0; extra <= 100; extra += 100) {
        char w[160];
        snprintf(w, sizeof w, "%s, out_cap %zu", what, len + extra);
        assert_error(decode_guarded(c, st, mut, enc->len, len + extra, w), NDS_ECORRUPT, c->name,
                     w);
    }
    free(mut);
}

/* A gzip member whose ISIZE (data size mod 2^32: one more, one less, 0, huge) or CRC-32 does not
 * match its data, as the only member, the first of two or the last of two; a zlib stream whose
 * Adler-32 does not. Never accepted (no silent wrong data), never a write past out_cap. */
START_TEST(test_lying_trailer) {
    uint8_t data[3000];
    fill(data, sizeof data, PAT_TEXT);
    void *gz = make(&nds_codec_gzip, NULL, 1), *zl = make(&nds_codec_zlib, NULL, 1);
    nds_buf one = {0}, first = {0}, two = {0}, z = {0};
    encode_ok(&nds_codec_gzip, gz, data, sizeof data, &one);
    encode_ok(&nds_codec_gzip, gz, data, 1000, &first);
    encode_two(&nds_codec_gzip, gz, data, 1000, sizeof data, &two);
    decode_expect(&nds_codec_gzip, gz, one.data, one.len, data, sizeof data, "gzip unchanged");
    decode_expect(&nds_codec_gzip, gz, two.data, two.len, data, sizeof data, "gzip two unchanged");
    const struct {
        const nds_buf *enc;
        size_t end, n; /* where the member ends, how many bytes it holds */
        const char *what;
    } members[] = {{&one, one.len, sizeof data, "only member"},
                   {&two, first.len, 1000, "first of two"},
                   {&two, two.len, sizeof data - 1000, "last of two"}};
    for (size_t m = 0; m < sizeof members / sizeof members[0]; m++) {
        const nds_buf *e = members[m].enc;
        uint32_t n = (uint32_t)members[m].n;
        const uint32_t isizes[] = {n + 1, n - 1, 0, 0xFFFFFFFFu, n ^ 0x80000000u};
        char what[120];
        for (size_t k = 0; k < sizeof isizes / sizeof isizes[0]; k++) {
            snprintf(what, sizeof what, "gzip %s, ISIZE %u for %u bytes", members[m].what,
                     isizes[k], n);
            expect_lie(&nds_codec_gzip, gz, e, members[m].end - 4, isizes[k], sizeof data, what);
        }
        size_t crc_at = members[m].end - 8;
        snprintf(what, sizeof what, "gzip %s, CRC-32 off by one bit", members[m].what);
        expect_lie(&nds_codec_gzip, gz, e, crc_at, get_le32(e->data + crc_at) ^ 1, sizeof data,
                   what);
    }
    encode_ok(&nds_codec_zlib, zl, data, sizeof data, &z);
    expect_lie(&nds_codec_zlib, zl, &z, z.len - 4, get_le32(z.data + z.len - 4) ^ 1, sizeof data,
               "zlib, Adler-32 off by one bit");
    nds_buf_dispose(&one);
    nds_buf_dispose(&first);
    nds_buf_dispose(&two);
    nds_buf_dispose(&z);
    nds_codec_gzip.destroy(gz);
    nds_codec_zlib.destroy(zl);
}
END_TEST

static Suite *codecs_suite(void) {
    Suite *s = suite_create("codecs");
    TCase *tc = tcase_create("lying_trailer");
    tcase_add_test(tc, test_lying_trailer);
    suite_add_tcase(s, tc);

    tc = tcase_create("roundtrip");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_roundtrip, 0, (int)N_CONFIGS);
    tcase_add_test(tc, test_blosc_matrix);
    tcase_add_test(tc, test_blosc_header);
    suite_add_tcase(s, tc);

    tc = tcase_create("config");
    tcase_add_test(tc, test_config_json);
    tcase_add_test(tc, test_bad_configs);
    tcase_add_test(tc, test_registry);
    tcase_add_test(tc, test_registry_refuses);
    tcase_add_test(tc, test_codec_spec);
    suite_add_tcase(s, tc);

    tc = tcase_create("bad_input");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_truncated, 0, 6);
    tcase_add_loop_test(tc, test_small_out_cap, 0, 6);
    tcase_add_loop_test(tc, test_corrupt, 0, 6);
    tcase_add_loop_test(tc, test_random_input, 0, 6);
    tcase_add_loop_test(tc, test_empty_input, 0, 6);
    tcase_add_test(tc, test_hostile_lz4);
    tcase_add_test(tc, test_hostile_zstd);
    tcase_add_test(tc, test_hostile_blosc);
    tcase_add_test(tc, test_encode_limits);
    suite_add_tcase(s, tc);

    tc = tcase_create("formats");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_zstd_frames);
    tcase_add_test(tc, test_gzip_members);
    tcase_add_test(tc, test_zlib_trailing);
    tcase_add_test(tc, test_bz2_streams);
    tcase_add_test(tc, test_lz4_framing);
    tcase_add_test(tc, test_encode_reuses_buf);
    tcase_add_loop_test(tc, test_threads, 0, 6);
    suite_add_tcase(s, tc);

    tc = tcase_create("interop");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_golden);
    tcase_add_test(tc, test_numcodecs_reads_ours);
    tcase_add_test(tc, test_hostile_blosc_sizes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(codecs_suite());
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
