/* The N5 format driver (formats/n5.c, formats/n5_metadata.c) and the xz codec
 * (formats/codecs/codec_xz.c): attributes.json parsing and writing, the block format (header
 * checks, Fortran-order big-endian payloads, clipped edge blocks), every compression, spec
 * handling, create races, resize, attributes, groups, and the blocks zarr-python wrote
 * (tests/fixtures/n5_zarr_python, or $NDS_FIXTURES). Mostly through the public API on
 * memory:// stores; the vtables directly where the API does not reach. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <lzma.h>

#include "support_check.h"
#include "support_format.h"
#include "ndstore/sys/codec.h"
#include "ndstore/sys/format.h"

extern const nds_format nds_format_n5;

/* ---- helpers --------------------------------------------------------------------------------- */

/* Creates a dataset at memory://<path>/ with the given "metadata" members (JSON object body). */
static nds_array *create_meta(const char *path, const char *members) {
    nds_array *a;
    NDS_OK(open_spec(&a,
                     "{\"driver\":\"n5\",\"kvstore\":\"memory://%s/\",\"metadata\":{%s},"
                     "\"create\":true}",
                     path, members));
    return a;
}

static int read_all_rc(nds_array *a, void *out) {
    uint64_t shape[NDS_MAX_RANK];
    nds_box box;
    nds_array_shape(a, shape);
    nds_box_full(&box, nds_array_rank(a), shape);
    return nds_array_read(a, &box, out, NULL);
}

#define RAW "\"compression\":{\"type\":\"raw\"}"
#define GZIP "\"compression\":{\"type\":\"gzip\"}"

/* A 2-byte big-endian value, and a block header with the given dims. */
static size_t put_be16(uint8_t *p, unsigned v) {
    p[0] = (uint8_t)(v >> 8), p[1] = (uint8_t)v;
    return 2;
}
static size_t put_be32(uint8_t *p, uint32_t v) {
    put_be16(p, v >> 16);
    put_be16(p + 2, v & 0xffff);
    return 4;
}
static size_t header(uint8_t *p, unsigned mode, unsigned ndims, const uint32_t *dims) {
    size_t n = put_be16(p, mode);
    n += put_be16(p + n, ndims);
    for (unsigned d = 0; d < ndims; d++) n += put_be32(p + n, dims[d]);
    return n;
}

/* ---- the xz codec ---------------------------------------------------------------------------- */

/* lzma.compress(b"ndstore xz vector: python lzma, preset 6") from Python 3.11. */
static const uint8_t PY_XZ[] = {
    0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00, 0x00, 0x04, 0xe6, 0xd6, 0xb4, 0x46, 0x02, 0x00, 0x21,
    0x01, 0x16, 0x00, 0x00, 0x00, 0x74, 0x2f, 0xe5, 0xa3, 0x01, 0x00, 0x27, 0x6e, 0x64, 0x73,
    0x74, 0x6f, 0x72, 0x65, 0x20, 0x78, 0x7a, 0x20, 0x76, 0x65, 0x63, 0x74, 0x6f, 0x72, 0x3a,
    0x20, 0x70, 0x79, 0x74, 0x68, 0x6f, 0x6e, 0x20, 0x6c, 0x7a, 0x6d, 0x61, 0x2c, 0x20, 0x70,
    0x72, 0x65, 0x73, 0x65, 0x74, 0x20, 0x36, 0x00, 0x84, 0x8e, 0xb3, 0xb2, 0x28, 0x06, 0xdc,
    0x34, 0x00, 0x01, 0x40, 0x28, 0xd4, 0x52, 0x4a, 0xe5, 0x1f, 0xb6, 0xf3, 0x7d, 0x01, 0x00,
    0x00, 0x00, 0x00, 0x04, 0x59, 0x5a};
static const char PY_XZ_TEXT[] = "ndstore xz vector: python lzma, preset 6";

static void *xz_new(const char *config) {
    const nds_codec *c = nds_codec_find("xz");
    ck_assert_ptr_nonnull(c);
    json_object *cfg = config ? json_tokener_parse(config) : NULL;
    void *st = NULL;
    NDS_OK(c->create(&st, cfg, 2));
    json_object_put(cfg);
    return st;
}

static int xz_decode(void *st, const uint8_t *in, size_t len, uint8_t *out, size_t cap,
                     size_t *got) {
    return nds_codec_decode(nds_codec_find("xz"), st, in, len, out, cap, got);
}

START_TEST(xz_round_trips) {
    const nds_codec *c = nds_codec_find("xz");
    static const size_t sizes[] = {0, 1, 1000, 300000};
    static const char *const configs[] = {"{\"preset\":0}", NULL, "{\"id\":\"xz\",\"preset\":9}"};
    static const int presets[] = {0, 6, 9};
    uint8_t *data = malloc(300000), *back = malloc(300001);
    for (size_t i = 0; i < 300000; i++) data[i] = (uint8_t)(i % 251 < 200 ? i / 1000 : i * 7);
    for (size_t k = 0; k < 3; k++) {
        void *st = xz_new(configs[k]);
        json_object *cfg;
        NDS_OK(c->config_json(st, &cfg));
        ck_assert_str_eq(member_str(cfg, "id"), "\"xz\"");
        ck_assert_int_eq(json_object_get_int(json_object_object_get(cfg, "preset")), presets[k]);
        json_object_put(cfg);
        for (size_t s = 0; s < 4; s++) {
            nds_buf enc = {0};
            NDS_OK(c->encode(st, data, sizes[s], &enc));
            ck_assert(enc.len >= 6 && memcmp(enc.data, "\xfd" "7zXZ", 5) == 0);
            size_t got = 99;
            NDS_OK(nds_codec_decode(c, st, enc.data, enc.len, back, sizes[s] + 1, &got));
            ck_assert_uint_eq(got, sizes[s]);
            ck_assert(memcmp(back, data, sizes[s]) == 0);
            nds_buf_dispose(&enc);
        }
        c->destroy(st);
    }
    free(data);
    free(back);
}
END_TEST

/* Python's lzma output decodes; concatenation, trailing junk and damage behave as in Python. */
START_TEST(xz_python_streams) {
    void *st = xz_new(NULL);
    size_t n = sizeof PY_XZ, text = strlen(PY_XZ_TEXT), got = 0;
    uint8_t out[256], two[2 * sizeof PY_XZ + 16];
    NDS_OK(xz_decode(st, PY_XZ, n, out, sizeof out, &got));
    ck_assert_uint_eq(got, text);
    ck_assert(memcmp(out, PY_XZ_TEXT, text) == 0);
    memcpy(two, PY_XZ, n);
    memcpy(two + n, PY_XZ, n);
    NDS_OK(xz_decode(st, two, 2 * n, out, sizeof out, &got)); /* concatenated: joined */
    ck_assert_uint_eq(got, 2 * text);
    ck_assert(memcmp(out + text, PY_XZ_TEXT, text) == 0);
    memcpy(two + n, "GARBAGE-GARBAGE!", 16); /* junk after a complete stream: ignored */
    NDS_OK(xz_decode(st, two, n + 16, out, sizeof out, &got));
    ck_assert_uint_eq(got, text);
    EXPECT_ERR(xz_decode(st, PY_XZ, n - 1, out, sizeof out, &got), NDS_ECORRUPT, "truncated");
    EXPECT_ERR(xz_decode(st, PY_XZ, n / 2, out, sizeof out, &got), NDS_ECORRUPT, "truncated");
    EXPECT_ERR(xz_decode(st, PY_XZ, 0, out, sizeof out, &got), NDS_ECORRUPT, "truncated");
    EXPECT_ERR(xz_decode(st, PY_XZ, n, out, text - 1, &got), NDS_ECORRUPT,
               "exceeds the 39 bytes expected");
    EXPECT_ERR(xz_decode(st, (const uint8_t *)"hello, not xz at all", 20, out, sizeof out, &got),
               NDS_ECORRUPT, "not an xz stream");
    memcpy(two, PY_XZ, n);
    two[40] ^= 0x55; /* inside the LZMA2 data: the CRC64 catches it */
    EXPECT_ERR(xz_decode(st, two, n, out, sizeof out, &got), NDS_ECORRUPT, "xz: corrupt data");
    nds_codec_find("xz")->destroy(st);
}
END_TEST

/* A block header asking for a 1.5 GiB dictionary is refused before liblzma allocates it. */
START_TEST(xz_memory_limit) {
    uint8_t buf[sizeof PY_XZ];
    memcpy(buf, PY_XZ, sizeof buf);
    ck_assert_uint_eq(buf[14], 0x21); /* the LZMA2 filter; its one property byte is the dict */
    buf[16] = 40;                     /* 1.5 GiB */
    uint32_t crc = lzma_crc32(buf + 12, 8, 0);
    for (int i = 0; i < 4; i++) buf[20 + i] = (uint8_t)(crc >> (8 * i));
    void *st = xz_new(NULL);
    uint8_t out[64];
    size_t got;
    EXPECT_ERR(xz_decode(st, buf, sizeof buf, out, sizeof out, &got), NDS_ELIMIT,
               "MiB of decoder memory, more than the 128 MiB limit");
    nds_codec_find("xz")->destroy(st);
}
END_TEST

START_TEST(xz_config_errors) {
    const nds_codec *c = nds_codec_find("xz");
    static const struct {
        const char *config, *msg;
    } bad[] = {{"{\"preset\":10}", "\"preset\" is 10, outside [0, 9]"},
               {"{\"preset\":-1}", "outside [0, 9]"},
               {"{\"preset\":\"6\"}", "\"preset\" must be an integer"},
               {"{\"level\":6}", "unknown member \"level\""},
               {"[6]", "expected a json object"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_object *cfg = json_tokener_parse(bad[i].config);
        void *st = NULL;
        EXPECT_ERR(c->create(&st, cfg, 1), NDS_EFORMAT, bad[i].msg);
        json_object_put(cfg);
    }
}
END_TEST

/* ---- block layout ---------------------------------------------------------------------------- */

/* The fixture's layout: 5x4 uint16, blocks 3x2, element (i, j) = 4i + j; raw blocks are written
 * clipped, dimension 0 fastest, big-endian. */
START_TEST(raw_block_layout) {
    nds_array *a = create_meta("layout/a", "\"dimensions\":[5,4],\"blockSize\":[3,2],"
                                           "\"dataType\":\"uint16\"," RAW);
    uint16_t v[20], back[20];
    for (int i = 0; i < 20; i++) v[i] = (uint16_t)i;
    write_all(a, v);
    size_t len = 0;
    char *b00 = get_raw("memory://layout/a/", "0/0", &len);
    static const uint8_t want00[] = {0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 2, /* mode, ndims, 3, 2 */
                                     0, 0, 0, 4, 0, 8, 0, 1, 0, 5, 0, 9};
    ck_assert_uint_eq(len, sizeof want00);
    ck_assert(memcmp(b00, want00, len) == 0);
    char *b11 = get_raw("memory://layout/a/", "1/1", &len); /* the corner: clipped to 2x2 */
    static const uint8_t want11[] = {0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2,
                                     0, 14, 0, 18, 0, 15, 0, 19};
    ck_assert_uint_eq(len, sizeof want11);
    ck_assert(memcmp(b11, want11, len) == 0);
    free(b00);
    free(b11);
    read_all(a, back);
    ck_assert(memcmp(v, back, sizeof v) == 0);
    nds_array_free(a);
}
END_TEST

/* A 3-d block: the payload runs dimension 0 fastest, then 1, then 2. */
START_TEST(raw_block_layout_3d) {
    nds_array *a = create_meta("layout/b", "\"dimensions\":[2,3,4],\"blockSize\":[2,3,4],"
                                           "\"dataType\":\"int32\"," RAW);
    int32_t v[24];
    for (int i = 0; i < 24; i++) v[i] = i - 5; /* C order: v[(i*3 + j)*4 + k] */
    write_all(a, v);
    size_t len = 0;
    uint8_t *b = (uint8_t *)get_raw("memory://layout/b/", "0/0/0", &len);
    ck_assert_uint_eq(len, 4 + 12 + 24 * 4);
    uint32_t want_dims[] = {2, 3, 4};
    uint8_t hdr[16];
    header(hdr, 0, 3, want_dims);
    ck_assert(memcmp(b, hdr, 16) == 0);
    size_t at = 16;
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 3; j++)
            for (int i = 0; i < 2; i++, at += 4) {
                uint8_t be[4];
                put_be32(be, (uint32_t)v[(i * 3 + j) * 4 + k]);
                ck_assert_msg(memcmp(b + at, be, 4) == 0, "element (%d,%d,%d)", i, j, k);
            }
    free(b);
    nds_array_free(a);
}
END_TEST

/* Every N5 data type survives a write and read with and without compression. */
START_TEST(dtype_round_trips) {
    static const char *const types[] = {"uint8", "uint16", "uint32", "uint64", "int8",
                                        "int16", "int32",  "int64",  "float32", "float64"};
    static const char *const comps[] = {"{\"type\":\"raw\"}", "{\"type\":\"gzip\"}"};
    for (size_t t = 0; t < 10; t++)
        for (size_t c = 0; c < 2; c++) {
            char path[64], members[256];
            snprintf(path, sizeof path, "dtypes/%zu-%zu", t, c);
            snprintf(members, sizeof members,
                     "\"dimensions\":[7,5,3],\"blockSize\":[4,2,3],\"dataType\":\"%s\","
                     "\"compression\":%s", types[t], comps[c]);
            nds_array *a = create_meta(path, members);
            ck_assert_str_eq(nds_dtype_name(nds_array_dtype(a)), types[t]);
            size_t elem = nds_dtype_size(nds_array_dtype(a)), n = 7 * 5 * 3 * elem;
            uint8_t *v = malloc(n), *back = malloc(n);
            for (size_t i = 0; i < n; i++) v[i] = (uint8_t)(i * 37 + 11 + t);
            if (nds_array_dtype(a) == NDS_FLOAT32 || nds_array_dtype(a) == NDS_FLOAT64)
                for (size_t i = 0; i < n; i += elem) v[i + elem - 1] &= 0x3f; /* no NaNs */
            write_all(a, v);
            read_all(a, back);
            ck_assert_msg(memcmp(v, back, n) == 0, "%s / %s", types[t], comps[c]);
            free(v);
            free(back);
            nds_array_free(a);
        }
}
END_TEST

/* Each compression writes what its name says after the header and reads back. */
START_TEST(compression_round_trips) {
    static const struct {
        const char *comp, *magic, *desc;
        size_t magic_len;
    } cases[] = {
        {"{\"type\":\"raw\"}", "", "raw", 0},
        {"{\"type\":\"gzip\",\"level\":6}", "\x1f\x8b", "gzip(level=6, useZlib=false)", 2},
        {"{\"type\":\"gzip\",\"useZlib\":true}", "\x78", "gzip(level=-1, useZlib=true)", 1},
        {"{\"type\":\"bzip2\",\"blockSize\":1}", "BZh1", "bzip2(blockSize=1)", 4},
        {"{\"type\":\"xz\",\"preset\":3}", "\xfd" "7zXZ", "xz(preset=3)", 5},
        {"{\"type\":\"blosc\",\"cname\":\"zstd\",\"clevel\":3,\"shuffle\":2}", "\x02",
         "blosc(cname=zstd, clevel=3, shuffle=2, blocksize=0)", 1},
        {"{\"type\":\"zstd\",\"level\":5}", "\x28\xb5\x2f\xfd", "zstd(level=5)", 4},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[64], members[256];
        snprintf(path, sizeof path, "comp/%zu", i);
        snprintf(members, sizeof members,
                 "\"dimensions\":[100,30],\"blockSize\":[64,16],\"dataType\":\"int16\","
                 "\"compression\":%s", cases[i].comp);
        nds_array *a = create_meta(path, members);
        char desc[128];
        nds_array_codec_description(a, desc, sizeof desc);
        ck_assert_str_eq(desc, cases[i].desc);
        int16_t v[3000], back[3000];
        for (int k = 0; k < 3000; k++) v[k] = (int16_t)((k % 97) * (k % 5) - 200);
        write_all(a, v);
        read_all(a, back);
        ck_assert_msg(memcmp(v, back, sizeof v) == 0, "%s", cases[i].comp);
        char url[64];
        snprintf(url, sizeof url, "memory://comp/%zu/", i);
        size_t len;
        char *blk = get_raw(url, "1/1", &len);
        ck_assert(len > 12 + cases[i].magic_len);
        ck_assert_msg(memcmp(blk + 12, cases[i].magic, cases[i].magic_len) == 0, "%s",
                      cases[i].comp);
        free(blk);
        uint64_t checked = 0, bad = 9;
        NDS_OK(nds_array_verify(a, NULL, NULL, &checked, &bad));
        ck_assert_uint_eq(checked, 4);
        ck_assert_uint_eq(bad, 0);
        nds_array_free(a);
    }
}
END_TEST

/* zarr-python writes edge blocks whole, Java clipped, and after a resize a block can be smaller
 * than the clipped extent: all read, with 0 beyond the block's data. */
START_TEST(edge_blocks_full_clipped_and_small) {
    nds_array *a = create_meta("edge/a", "\"dimensions\":[5,3],\"blockSize\":[4,2],"
                                         "\"dataType\":\"uint8\"," RAW);
    uint8_t blk[64];
    size_t n = header(blk, 0, 2, (const uint32_t[]){4, 2}); /* block 1/1, whole: 4x2 */
    for (int i = 0; i < 8; i++) blk[n + i] = (uint8_t)(100 + i);
    put_raw("memory://edge/a/", "1/1", blk, n + 8);
    n = header(blk, 0, 2, (const uint32_t[]){1, 2}); /* block 1/0, clipped: 1x2 */
    blk[n] = 7, blk[n + 1] = 8;
    put_raw("memory://edge/a/", "1/0", blk, n + 2);
    n = header(blk, 0, 2, (const uint32_t[]){2, 1}); /* block 0/0, smaller than 4x2 */
    blk[n] = 1, blk[n + 1] = 2;
    put_raw("memory://edge/a/", "0/0", blk, n + 2);
    uint8_t got[15];
    read_all(a, got);
    static const uint8_t want[15] = {1, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 7, 8, 100};
    ck_assert_msg(memcmp(got, want, 15) == 0, "%u %u %u %u %u %u", got[0], got[3], got[12],
                  got[13], got[14], got[11]);
    nds_array_free(a);
}
END_TEST

/* Varlength blocks (mode 1) read when dense; they are never written. */
START_TEST(varlength_blocks) {
    nds_array *a = create_meta("var/a", "\"dimensions\":[2,2],\"blockSize\":[2,2],"
                                        "\"dataType\":\"uint16\"," RAW);
    uint8_t blk[64];
    size_t n = header(blk, 1, 2, (const uint32_t[]){2, 2});
    n += put_be32(blk + n, 4);
    for (int i = 0; i < 4; i++) n += put_be16(blk + n, (unsigned)(10 + i));
    put_raw("memory://var/a/", "0/0", blk, n);
    uint16_t got[4];
    read_all(a, got);
    ck_assert(got[0] == 10 && got[1] == 12 && got[2] == 11 && got[3] == 13); /* F order on disk */
    put_be32(blk + 12, 3);
    put_raw("memory://var/a/", "0/0", blk, n);
    EXPECT_ERR(read_all_rc(a, got), NDS_EUNSUPPORTED, "varlength block holds 3 elements but its "
                                                      "dimensions hold 4");
    write_all(a, (const uint16_t[]){1, 2, 3, 4});
    char *stored = get_raw("memory://var/a/", "0/0", &n);
    ck_assert(stored[0] == 0 && stored[1] == 0); /* mode 0 */
    ck_assert_uint_eq(n, 12 + 8);
    free(stored);
    nds_array_free(a);
}
END_TEST

/* Hostile block headers and payloads: every field is checked before it sizes anything. */
START_TEST(corrupt_blocks) {
    nds_array *raw = create_meta("bad/raw", "\"dimensions\":[4,4],\"blockSize\":[2,2],"
                                            "\"dataType\":\"uint16\"," RAW);
    nds_array *gz = create_meta("bad/gz", "\"dimensions\":[4,4],\"blockSize\":[2,2],"
                                          "\"dataType\":\"uint16\"," GZIP);
    static const struct {
        int gzip;
        const char *hex; /* header and payload */
        int code;
        const char *msg;
    } cases[] = {
        {0, "", NDS_ECORRUPT, "block of 0 bytes is shorter than its header"},
        {0, "000000", NDS_ECORRUPT, "block of 3 bytes is shorter than its header"},
        {0, "00020002", NDS_EUNSUPPORTED, "block mode 2 (object) is not supported"},
        {0, "00070002", NDS_ECORRUPT, "unknown block mode 7"},
        {0, "ffff0002", NDS_ECORRUPT, "unknown block mode 65535"},
        {0, "00000003000000020000000200000002", NDS_ECORRUPT,
         "block header has 3 dimensions, the dataset 2"},
        {0, "0000ffff", NDS_ECORRUPT, "block header has 65535 dimensions"},
        {0, "000000020000000200", NDS_ECORRUPT, "shorter than its 12-byte header"},
        {0, "0001000200000002000000020000", NDS_ECORRUPT, "shorter than its 16-byte header"},
        {0, "000000020000000000000002", NDS_ECORRUPT, "block dimension 0 is 0, outside [1, 2]"},
        {0, "000000020000000200000003", NDS_ECORRUPT, "block dimension 1 is 3, outside [1, 2]"},
        {0, "00000002ffffffff00000002", NDS_ECORRUPT, "block dimension 0 is 4294967295"},
        {0, "0001000200000002000000020000ffff", NDS_EUNSUPPORTED,
         "varlength block holds 65535 elements"},
        {0, "000000020000000200000002000100020003", NDS_ECORRUPT,
         "expected 8 bytes after the 12-byte block header, found 6"},
        {0, "0000000200000002000000020001000200030004ff", NDS_ECORRUPT, "found 9"},
        {1, "000000020000000200000002", NDS_ECORRUPT, "gzip"},
        {1, "0000000200000002000000021f8b0800", NDS_ECORRUPT, "gzip"},
        {1, "000000020000000200000002deadbeefdeadbeef", NDS_ECORRUPT, "gzip"},
        /* gzip of 6 zero bytes: a valid stream, 2 bytes short of the 2x2 block */
        {1, "0000000200000002000000021f8b08000000000002036360000100a3a1c2b106000000", NDS_ECORRUPT,
         "expected 8 bytes after decompression, found 6"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t blk[128];
        size_t n = strlen(cases[i].hex) / 2;
        for (size_t k = 0; k < n; k++) sscanf(cases[i].hex + 2 * k, "%2hhx", &blk[k]);
        const char *url = cases[i].gzip ? "memory://bad/gz/" : "memory://bad/raw/";
        put_raw(url, "1/0", blk, n);
        uint16_t got[16];
        int rc = read_all_rc(cases[i].gzip ? gz : raw, got);
        const char *msg = nds_error_last()->message;
        ck_assert_msg(rc == cases[i].code, "case %zu: expected %d, got %d (%s)", i, cases[i].code,
                      rc, msg);
        ck_assert_msg(strstr(msg, cases[i].msg) && strstr(msg, "n5: chunk 1/0 of memory://bad/"),
                      "case %zu: \"%s\" lacks \"%s\"", i, msg, cases[i].msg);
    }
    nds_array_free(raw);
    nds_array_free(gz);
}
END_TEST

/* ---- attributes.json ------------------------------------------------------------------------- */

START_TEST(hostile_attributes) {
    static const struct {
        const char *doc;
        int code;
        const char *msg;
    } cases[] = {
        {"not json", NDS_EFORMAT, "invalid json"},
        {"[1,2]", NDS_EFORMAT, "expected a json object"},
        {"{\"dimensions\":5,\"blockSize\":[1],\"dataType\":\"uint8\",\"compression\":{\"type\":"
         "\"raw\"}}", NDS_EFORMAT, "\"dimensions\" must be an array"},
        {"{\"dimensions\":[-1],\"blockSize\":[1],\"dataType\":\"uint8\",\"compression\":{\"type\":"
         "\"raw\"}}", NDS_EFORMAT, "\"dimensions\"[0] must be a non-negative integer"},
        {"{\"dimensions\":[4],\"blockSize\":[0],\"dataType\":\"uint8\",\"compression\":{\"type\":"
         "\"raw\"}}", NDS_EFORMAT, "\"blockSize\"[0] must be at least 1"},
        {"{\"dimensions\":[4],\"blockSize\":[2147483648],\"dataType\":\"uint8\",\"compression\":"
         "{\"type\":\"raw\"}}", NDS_EFORMAT, "\"blockSize\"[0] is 2147483648, above the limit"},
        {"{\"dimensions\":[4,4],\"blockSize\":[2],\"dataType\":\"uint8\",\"compression\":{\"type\":"
         "\"raw\"}}", NDS_EFORMAT, "\"blockSize\" has 1 entries but \"dimensions\" has 2"},
        {"{\"dimensions\":[],\"blockSize\":[],\"dataType\":\"uint8\",\"compression\":{\"type\":"
         "\"raw\"}}", NDS_EUNSUPPORTED, "rank-0 datasets are not supported"},
        {"{\"dimensions\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"
         "\"blockSize\":[1],\"dataType\":\"uint8\",\"compression\":{\"type\":\"raw\"}}",
         NDS_ELIMIT, "\"dimensions\" has 33 dimensions"},
        {"{\"dimensions\":[4],\"blockSize\":[2],\"dataType\":\"object\",\"compression\":{\"type\":"
         "\"raw\"}}", NDS_EUNSUPPORTED, "\"dataType\" \"object\" is not supported"},
        {"{\"dimensions\":[4],\"blockSize\":[2],\"dataType\":\"bool\",\"compression\":{\"type\":"
         "\"raw\"}}", NDS_EUNSUPPORTED, "\"dataType\" \"bool\" is not supported"},
        {"{\"dimensions\":[4],\"blockSize\":[2],\"dataType\":7,\"compression\":{\"type\":\"raw\"}}",
         NDS_EFORMAT, "\"dataType\" must be a string"},
        {"{\"dimensions\":[4],\"blockSize\":[2],\"dataType\":\"uint8\"}", NDS_EFORMAT,
         "missing member \"compression\""},
        {"{\"dimensions\":[4],\"blockSize\":[2],\"compression\":{\"type\":\"raw\"}}", NDS_EFORMAT,
         "missing member \"dataType\""},
        {"{\"dataType\":\"uint8\",\"blockSize\":[2],\"compression\":{\"type\":\"raw\"}}",
         NDS_EFORMAT, "missing member \"dimensions\""},
        {"{\"dimensions\":[4],\"blockSize\":[2],\"dataType\":\"uint8\",\"compression\":\"gzip\"}",
         NDS_EFORMAT, "\"compression\" must be an object with a string \"type\""},
        {"{\"dimensions\":[4],\"blockSize\":[2],\"dataType\":\"uint8\",\"compression\":{\"type\":"
         "\"lz4\"}}", NDS_EUNSUPPORTED, "compression \"lz4\" is not supported"},
        {"{\"dimensions\":[4],\"blockSize\":[2],\"dataType\":\"uint8\",\"compression\":{\"type\":"
         "\"snappy\"}}", NDS_EUNSUPPORTED, "compression type \"snappy\" is not supported"},
        {"{\"dimensions\":[4],\"blockSize\":[2],\"dataType\":\"uint8\",\"compression\":{\"type\":"
         "\"gzip\",\"level\":10}}", NDS_EFORMAT, "compression \"gzip\": \"level\" is 10"},
        {"{\"dimensions\":[4],\"blockSize\":[2],\"dataType\":\"uint8\",\"compression\":{\"type\":"
         "\"gzip\",\"useZlib\":\"yes\"}}", NDS_EFORMAT, "\"useZlib\" must be true or false"},
        {"{\"dimensions\":[4],\"blockSize\":[2],\"dataType\":\"uint8\",\"compression\":{\"type\":"
         "\"blosc\",\"cname\":\"lz4\",\"clevel\":5,\"shuffle\":5}}", NDS_EFORMAT,
         "\"shuffle\" is 5, outside [-1, 2]"},
        {"{\"dimensions\":[4],\"blockSize\":[2],\"dataType\":\"uint8\",\"compression\":{\"type\":"
         "\"blosc\",\"cname\":\"nope\"}}", NDS_EFORMAT, "\"cname\" is \"nope\""},
        {"{\"dimensions\":[4],\"blockSize\":[2],\"dataType\":\"uint8\",\"compression\":{\"type\":"
         "\"bzip2\",\"blockSize\":0}}", NDS_EFORMAT, "\"blockSize\" is 0, outside [1, 9]"},
        {"{\"dimensions\":[65536,65536],\"blockSize\":[65536,32769],\"dataType\":\"uint8\","
         "\"compression\":{\"type\":\"raw\"}}", NDS_ELIMIT, "larger than 2^31 bytes"},
        {"{\"dimensions\":[4294967296,4294967296,2],\"blockSize\":[1,1,1],\"dataType\":\"uint8\","
         "\"compression\":{\"type\":\"raw\"}}", NDS_ELIMIT, "more than 2^64 elements"},
        {"{\"n5\":\"2.0.0\",\"axes\":[\"x\"]}", NDS_ENOTFOUND, "describes a group"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[64];
        snprintf(path, sizeof path, "memory://hostile/%zu/", i);
        put_text(path, "attributes.json", cases[i].doc);
        nds_array *a;
        int rc = open_spec(&a, "%s|n5:", path);
        const char *msg = nds_error_last()->message;
        ck_assert_msg(rc == cases[i].code, "case %zu: expected %d, got %d (%s)", i, cases[i].code,
                      rc, msg);
        ck_assert_msg(strstr(msg, cases[i].msg), "case %zu: \"%s\" lacks \"%s\"", i, msg,
                      cases[i].msg);
    }
}
END_TEST

/* What other writers put in attributes.json: unknown compression members, legacy compressionType,
 * user attributes next to the dataset members. */
START_TEST(foreign_attributes_documents) {
    put_text("memory://foreign/a/", "attributes.json",
             "{\"dimensions\":[3],\"blockSize\":[2],\"dataType\":\"float32\",\"compression\":"
             "{\"type\":\"blosc\",\"cname\":\"blosclz\",\"clevel\":6,\"shuffle\":0,"
             "\"blocksize\":0,\"nthreads\":4},\"pixelResolution\":{\"unit\":\"um\",\"dimensions\":"
             "[0.5]},\"downsamplingFactors\":[2]}");
    nds_array *a;
    NDS_OK(open_spec(&a, "memory://foreign/a/|n5:"));
    char desc[128], *text;
    nds_array_codec_description(a, desc, sizeof desc);
    ck_assert_str_eq(desc, "blosc(cname=blosclz, clevel=6, shuffle=0, blocksize=0)");
    NDS_OK(nds_array_get_attributes(a, &text));
    json_object *attrs = json_tokener_parse(text);
    ck_assert_str_eq(member_str(attrs, "downsamplingFactors"), "[2]");
    ck_assert_str_eq(member_str(attrs, "pixelResolution"),
                     "{\"unit\":\"um\",\"dimensions\":[0.5]}");
    ck_assert_str_eq(member_str(attrs, "dimensions"), "absent");
    json_object_put(attrs);
    nds_free(text);
    NDS_OK(nds_array_metadata(a, &text));
    json_object *meta = json_tokener_parse(text);
    ck_assert_str_eq(member_str(meta, "dimensions"), "[3]");
    ck_assert_str_eq(member_str(meta, "pixelResolution"), "absent");
    json_object_put(meta);
    nds_free(text);
    float v[3] = {1.5f, -2.0f, 3.25f}, back[3];
    write_all(a, v);
    read_all(a, back);
    ck_assert(memcmp(v, back, sizeof v) == 0);
    nds_array_free(a);

    /* N5 0.x: "compressionType" instead of "compression". */
    put_text("memory://foreign/b/", "attributes.json",
             "{\"dimensions\":[3],\"blockSize\":[3],\"dataType\":\"uint8\",\"compressionType\":"
             "\"bzip2\"}");
    NDS_OK(open_spec(&a, "memory://foreign/b/|n5:"));
    nds_array_codec_description(a, desc, sizeof desc);
    ck_assert_str_eq(desc, "bzip2(blockSize=9)");
    nds_array_free(a);
}
END_TEST

/* What ndstore writes: the members in N5's order, compression normalised, the "n5" version, the
 * spec's attributes after them. */
START_TEST(create_document) {
    nds_array *a = create_meta(
        "doc/a", "\"dimensions\":[10,20],\"blockSize\":[5,5],\"dataType\":\"uint8\","
                 "\"compression\":{\"type\":\"bzip2\"},\"units\":[\"nm\",\"nm\"],"
                 "\"resolution\":[4.0,40.5],\"axes\":[\"x\",\"y\"]");
    nds_array_free(a);
    char *raw = get_raw("memory://doc/a/", "attributes.json", NULL);
    json_object *doc = json_tokener_parse(raw);
    static const char *const order[] = {"dimensions", "blockSize", "dataType", "compression",
                                        "n5",         "units",     "resolution", "axes"};
    size_t i = 0;
    json_object_object_foreach(doc, key, val) {
        (void)val;
        ck_assert_msg(i < 8 && strcmp(key, order[i]) == 0, "member %zu is %s", i, key);
        i++;
    }
    ck_assert_uint_eq(i, 8);
    ck_assert_str_eq(member_str(doc, "compression"), "{\"type\":\"bzip2\",\"blockSize\":9}");
    ck_assert_str_eq(member_str(doc, "n5"), "\"2.0.0\"");
    ck_assert_str_eq(member_str(doc, "resolution"), "[4.0,40.5]");
    ck_assert_msg(strstr(raw, "\n") != NULL, "written indented: %s", raw);
    json_object_put(doc);
    free(raw);
    /* Integers spelled as doubles are written as integers (zarr-python needs ints). */
    nds_array_free(create_meta("doc/b", "\"dimensions\":[4.0,3],\"blockSize\":[2.0,3],"
                                        "\"dataType\":\"int8\",\"compression\":{\"type\":"
                                        "\"gzip\",\"level\":4.0}"));
    doc = get_json("memory://doc/b/", "attributes.json");
    ck_assert_str_eq(member_str(doc, "dimensions"), "[4,3]");
    ck_assert_str_eq(member_str(doc, "blockSize"), "[2,3]");
    ck_assert_str_eq(member_str(doc, "compression"),
                     "{\"type\":\"gzip\",\"level\":4,\"useZlib\":false}");
    json_object_put(doc);
}
END_TEST

/* Defaults and TensorStore-style schema members. */
START_TEST(create_from_schema) {
    nds_array *a;
    NDS_OK(open_spec(&a, "{\"driver\":\"n5\",\"kvstore\":\"memory://schema/a/\",\"schema\":"
                         "{\"dtype\":\"uint16\",\"domain\":{\"shape\":[3000,2000]}},"
                         "\"create\":true}"));
    nds_array_free(a);
    json_object *doc = get_json("memory://schema/a/", "attributes.json");
    ck_assert_str_eq(member_str(doc, "dimensions"), "[3000,2000]");
    ck_assert_str_eq(member_str(doc, "blockSize"), "[750,500]"); /* <= 1 MiB */
    ck_assert_str_eq(member_str(doc, "dataType"), "\"uint16\"");
    ck_assert_str_eq(member_str(doc, "compression"),
                     "{\"type\":\"gzip\",\"level\":1,\"useZlib\":false}");
    json_object_put(doc);
    static const struct {
        const char *codec, *want;
    } codecs[] = {
        {"\"none\"", "{\"type\":\"raw\"}"},
        {"\"zlib:3\"", "{\"type\":\"gzip\",\"level\":3,\"useZlib\":true}"},
        {"\"gzip\"", "{\"type\":\"gzip\",\"level\":1,\"useZlib\":false}"},
        {"\"bz2:2\"", "{\"type\":\"bzip2\",\"blockSize\":2}"},
        {"\"zstd:7\"", "{\"type\":\"zstd\",\"level\":7}"},
        {"\"blosc:lz4:4:bitshuffle\"",
         "{\"type\":\"blosc\",\"cname\":\"lz4\",\"clevel\":4,\"shuffle\":2,\"blocksize\":0}"},
        {"{\"driver\":\"n5\",\"compression\":{\"type\":\"xz\",\"preset\":1}}",
         "{\"type\":\"xz\",\"preset\":1}"},
    };
    for (size_t i = 0; i < sizeof codecs / sizeof codecs[0]; i++) {
        NDS_OK(open_spec(&a, "{\"driver\":\"n5\",\"kvstore\":\"memory://schema/c%zu/\",\"schema\":"
                             "{\"dtype\":\"int8\",\"domain\":{\"shape\":[4]},\"chunk_layout\":"
                             "{\"chunk\":{\"shape\":[3]}},\"fill_value\":0,\"codec\":%s},"
                             "\"create\":true}",
                         i, codecs[i].codec));
        nds_array_free(a);
        char url[64];
        snprintf(url, sizeof url, "memory://schema/c%zu/", i);
        doc = get_json(url, "attributes.json");
        ck_assert_str_eq(member_str(doc, "compression"), codecs[i].want);
        ck_assert_str_eq(member_str(doc, "blockSize"), "[3]");
        json_object_put(doc);
    }
    /* "metadata" wins over "schema". */
    NDS_OK(open_spec(&a, "{\"driver\":\"n5\",\"kvstore\":\"memory://schema/m/\",\"metadata\":"
                         "{\"dataType\":\"float64\",\"blockSize\":[2]},\"schema\":{\"dtype\":"
                         "\"int8\",\"domain\":{\"shape\":[4]},\"chunk_layout\":{\"chunk\":"
                         "{\"shape\":[3]}}},\"create\":true}"));
    ck_assert_int_eq(nds_array_dtype(a), NDS_FLOAT64);
    uint64_t chunk;
    nds_array_chunk_shape(a, &chunk);
    ck_assert_uint_eq(chunk, 2);
    nds_array_free(a);
}
END_TEST

START_TEST(spec_errors) {
    static const struct {
        const char *rest;
        int code;
        const char *msg;
    } cases[] = {
        {"\"schema\":{\"dtype\":\"uint8\"}", NDS_EINVAL, "cannot create a dataset without "
                                                        "dimensions"},
        {"\"schema\":{\"domain\":{\"shape\":[4]}}", NDS_EINVAL, "without a data type"},
        {"\"schema\":{\"dtype\":\"bool\",\"domain\":{\"shape\":[4]}}", NDS_EUNSUPPORTED,
         "dtype \"bool\" is not supported by N5"},
        {"\"schema\":{\"dtype\":\"complex64\",\"domain\":{\"shape\":[4]}}", NDS_EUNSUPPORTED,
         "not supported by N5"},
        {"\"schema\":{\"dtype\":\"u16\",\"domain\":{\"shape\":[4]}}", NDS_EINVAL,
         "unknown \"dtype\" \"u16\""},
        {"\"schema\":{\"dtype\":\"uint8\",\"domain\":{\"shape\":[4]},\"fill_value\":7}",
         NDS_EUNSUPPORTED, "fill value 7 is not supported (N5 has no fill value"},
        {"\"schema\":{\"dtype\":\"uint8\",\"domain\":{\"shape\":[4]},\"codec\":\"lz4\"}",
         NDS_EUNSUPPORTED, "codec \"lz4\" has no N5 equivalent"},
        {"\"schema\":{\"dtype\":\"uint8\",\"domain\":{\"shape\":[4]},\"codec\":\"brotli\"}",
         NDS_EINVAL, "\"codec\""},
        {"\"schema\":{\"dtype\":\"uint8\",\"domain\":{\"shape\":[4],\"inclusive_min\":[0]}}",
         NDS_EUNSUPPORTED, "\"domain.inclusive_min\" is not supported"},
        {"\"schema\":{\"dtype\":\"uint8\",\"domain\":{\"shape\":[4]},\"dimension_units\":"
         "[\"8 nanometres\"]}", NDS_EINVAL, "dimension_units: \"8 nanometres\" is not a unit"},
        {"\"metadata\":{\"dimensions\":[4],\"dataType\":\"uint8\",\"compression\":{\"type\":"
         "\"gzip\",\"lvl\":3}}", NDS_EFORMAT, "\"lvl\" is not a parameter of compression \"gzip\""},
        {"\"metadata\":{\"dimensions\":[4],\"dataType\":\"uint8\",\"compression\":{\"type\":"
         "\"blosc\",\"cname\":\"nope\"}}", NDS_EFORMAT, "\"cname\" is \"nope\""},
        {"\"metadata\":[1]", NDS_EINVAL, "\"metadata\" must be an object"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        nds_array *a;
        int rc = open_spec(&a, "{\"driver\":\"n5\",\"kvstore\":\"memory://specerr/%zu/\",%s,"
                               "\"create\":true}", i, cases[i].rest);
        const char *msg = nds_error_last()->message;
        ck_assert_msg(rc == cases[i].code, "case %zu: expected %d, got %d (%s)", i, cases[i].code,
                      rc, msg);
        ck_assert_msg(strstr(msg, cases[i].msg), "case %zu: \"%s\" lacks \"%s\"", i, msg,
                      cases[i].msg);
        char url[64];
        snprintf(url, sizeof url, "memory://specerr/%zu/", i);
        ck_assert_ptr_null(get_raw(url, "attributes.json", NULL)); /* nothing written */
    }
}
END_TEST

/* ---- opening --------------------------------------------------------------------------------- */

START_TEST(open_modes) {
    nds_array *a;
    EXPECT_ERR(open_spec(&a, "memory://modes/none/|n5:"), NDS_ENOTFOUND,
               "no dataset at memory://modes/none/ (attributes.json not found)");
    nds_array_free(create_meta("modes/a", "\"dimensions\":[4],\"dataType\":\"uint8\""));
    EXPECT_ERR(open_spec(&a, "{\"driver\":\"n5\",\"kvstore\":\"memory://modes/a/\",\"metadata\":"
                             "{\"dimensions\":[4],\"dataType\":\"uint8\"},\"create\":true}"),
               NDS_EEXIST, "a dataset already exists at memory://modes/a/");
    NDS_OK(open_spec(&a, "memory://modes/a/")); /* detected from attributes.json */
    ck_assert_str_eq(nds_array_format(a), "n5");
    nds_array_free(a);
    put_text("memory://modes/g/", "attributes.json", "{\"n5\":\"2.0.0\"}");
    EXPECT_ERR(open_spec(&a, "memory://modes/g/|n5:"), NDS_ENOTFOUND, "describes a group");
    EXPECT_ERR(open_spec(&a, "{\"driver\":\"n5\",\"kvstore\":\"memory://modes/g/\",\"metadata\":"
                             "{\"dimensions\":[4],\"dataType\":\"uint8\"},\"create\":true,"
                             "\"open\":true}"),
               NDS_EEXIST, "cannot create a dataset at memory://modes/g/: a group exists there");
}
END_TEST

/* Opening with "metadata" checks each member given against what is stored. */
START_TEST(open_checks_members) {
    nds_array_free(create_meta("check/a", "\"dimensions\":[5,4],\"blockSize\":[3,2],"
                                          "\"dataType\":\"uint16\",\"compression\":{\"type\":"
                                          "\"gzip\"},\"units\":[\"nm\",\"nm\"]"));
    static const struct {
        const char *meta;
        const char *msg; /* NULL: matches */
    } cases[] = {
        {"\"dimensions\":[5,4]", NULL},
        {"\"dimensions\":[5,5]", "\"dimensions\" is [5,4], the spec asks for [5,5]"},
        {"\"blockSize\":[3,2],\"dataType\":\"uint16\"", NULL},
        {"\"blockSize\":[2,3]", "\"blockSize\" is [3,2], the spec asks for [2,3]"},
        {"\"dataType\":\"int16\"", "\"dataType\" is \"uint16\", the spec asks for \"int16\""},
        {"\"compression\":{\"type\":\"gzip\",\"level\":-1,\"useZlib\":false}", NULL},
        {"\"compression\":{\"type\":\"gzip\",\"level\":1}",
         "\"compression\" is {\"type\":\"gzip\",\"level\":-1,\"useZlib\":false}, the spec asks "
         "for {\"type\":\"gzip\",\"level\":1}"},
        {"\"units\":[\"nm\",\"nm\"]", NULL},
        {"\"units\":[\"um\",\"nm\"]", "\"units\" is [\"nm\",\"nm\"]"},
        {"\"axes\":[\"x\",\"y\"]", "\"axes\" is absent"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        nds_array *a;
        int rc = open_spec(&a, "{\"driver\":\"n5\",\"kvstore\":\"memory://check/a/\",\"metadata\":"
                               "{%s},\"open\":true}", cases[i].meta);
        if (!cases[i].msg) {
            ck_assert_msg(rc == 0, "case %zu: %s", i, nds_error_last()->message);
            nds_array_free(a);
        } else {
            EXPECT_ERR(rc, NDS_EMISMATCH, cases[i].msg);
        }
    }
}
END_TEST

#define RACE_DOC                                                                                \
    "{\"dimensions\":[6],\"blockSize\":[3],\"dataType\":\"int16\",\"compression\":{\"type\":" \
    "\"raw\"}}"

/* The racy store's competitor writes attributes.json (support_format.h). */
START_TEST(create_race_loser_opens) {
    racy_register("attributes.json");
    nds_array *a;
    race_doc = RACE_DOC;
    NDS_OK(open_spec(&a, "{\"driver\":\"n5\",\"kvstore\":\"racy://race/a/\",\"metadata\":"
                         "{\"dimensions\":[6],\"blockSize\":[3],\"dataType\":\"int16\"},"
                         "\"create\":true,\"open\":true}"));
    ck_assert_ptr_null(race_doc); /* the race happened */
    char desc[64];
    nds_array_codec_description(a, desc, sizeof desc);
    ck_assert_str_eq(desc, "raw"); /* the winner's */
    nds_array_free(a);
    race_doc = RACE_DOC;
    EXPECT_ERR(open_spec(&a, "{\"driver\":\"n5\",\"kvstore\":\"racy://race/b/\",\"metadata\":"
                             "{\"dimensions\":[7],\"dataType\":\"int16\"},\"create\":true,"
                             "\"open\":true}"),
               NDS_EMISMATCH, "\"dimensions\" is [6], the spec asks for [7]");
    race_doc = RACE_DOC;
    EXPECT_ERR(open_spec(&a, "{\"driver\":\"n5\",\"kvstore\":\"racy://race/c/\",\"metadata\":"
                             "{\"dimensions\":[6],\"dataType\":\"int16\"},\"create\":true}"),
               NDS_EEXIST, "racy://race/c/");
}
END_TEST

/* ---- resize, attributes, groups -------------------------------------------------------------- */

START_TEST(resize_keeps_attributes) {
    nds_array *a = create_meta("resize/a", "\"dimensions\":[5,4],\"blockSize\":[3,2],"
                                           "\"dataType\":\"uint8\",\"axes\":[\"x\",\"y\"]");
    put_text("memory://resize/a/", "attributes.json",
             "{\"dimensions\":[5,4],\"blockSize\":[3,2],\"dataType\":\"uint8\",\"compression\":"
             "{\"type\":\"gzip\",\"level\":1,\"useZlib\":false,\"extra\":1},\"n5\":\"2.0.0\","
             "\"axes\":[\"x\",\"y\"],\"custom\":{\"k\":[1,2]}}");
    NDS_OK(nds_array_resize(a, (const uint64_t[]){9, 2}));
    uint64_t shape[2];
    nds_array_shape(a, shape);
    ck_assert(shape[0] == 9 && shape[1] == 2);
    json_object *doc = get_json("memory://resize/a/", "attributes.json");
    ck_assert_str_eq(member_str(doc, "dimensions"), "[9,2]");
    ck_assert_str_eq(member_str(doc, "custom"), "{\"k\":[1,2]}");
    ck_assert_str_eq(member_str(doc, "compression"),
                     "{\"type\":\"gzip\",\"level\":1,\"useZlib\":false,\"extra\":1}");
    json_object_put(doc);
    /* Another writer changes the block size: resize refuses. */
    put_text("memory://resize/a/", "attributes.json",
             "{\"dimensions\":[9,2],\"blockSize\":[3,3],\"dataType\":\"uint8\",\"compression\":"
             "{\"type\":\"raw\"}}");
    EXPECT_ERR(nds_array_resize(a, (const uint64_t[]){4, 4}), NDS_EMISMATCH,
               "changed by another writer since it was opened");
    nds_array_free(a);
}
END_TEST

START_TEST(resize_retries_on_conflict) {
    racy_register("attributes.json");
    nds_array *a;
    NDS_OK(open_spec(&a, "{\"driver\":\"n5\",\"kvstore\":\"racy://resize/r/\",\"metadata\":"
                         "{\"dimensions\":[4],\"dataType\":\"int16\"},\"create\":true}"));
    race_bumps = 2;
    NDS_OK(nds_array_resize(a, (const uint64_t[]){11}));
    ck_assert_int_eq(race_bumps, 0);
    race_bumps = 1;
    NDS_OK(nds_array_set_attributes(a, "{\"a\":1}"));
    ck_assert_int_eq(race_bumps, 0);
    nds_array_free(a);
    json_object *doc = get_json("memory://resize/r/", "attributes.json");
    ck_assert_str_eq(member_str(doc, "dimensions"), "[11]");
    ck_assert_str_eq(member_str(doc, "a"), "1");
    json_object_put(doc);
}
END_TEST

START_TEST(attributes) {
    nds_array *a = create_meta("attrs/a", "\"dimensions\":[2],\"dataType\":\"uint8\","
                                          "\"resolution\":[8]");
    char *text;
    NDS_OK(nds_array_get_attributes(a, &text));
    ck_assert_str_eq(text, "{\"resolution\":[8]}");
    nds_free(text);
    NDS_OK(nds_array_set_attributes(a, "{\"units\":[\"nm\"],\"note\":\"hi/there\"}"));
    json_object *doc = get_json("memory://attrs/a/", "attributes.json");
    ck_assert_str_eq(member_str(doc, "resolution"), "absent"); /* replaced */
    ck_assert_str_eq(member_str(doc, "units"), "[\"nm\"]");
    ck_assert_str_eq(member_str(doc, "dimensions"), "[2]");
    ck_assert_str_eq(member_str(doc, "n5"), "\"2.0.0\"");
    json_object_put(doc);
    assert_attributes(a, "{\"units\":[\"nm\"],\"note\":\"hi/there\"}");
    EXPECT_ERR(nds_array_set_attributes(a, "{\"blockSize\":[1]}"), NDS_EINVAL,
               "attribute \"blockSize\" of memory://attrs/a/ is reserved");
    uint8_t v[2] = {3, 4}, back[2];
    write_all(a, v); /* the dataset still works */
    read_all(a, back);
    ck_assert(back[0] == 3 && back[1] == 4);
    nds_array_free(a);
}
END_TEST

START_TEST(groups) {
    NDS_OK(nds_group_create("memory://grp/", "a/b", "n5", 1, NULL));
    static const char *const urls[] = {"memory://grp/", "memory://grp/a/", "memory://grp/a/b/"};
    for (size_t i = 0; i < 3; i++) {
        char *raw = get_raw(urls[i], "attributes.json", NULL);
        ck_assert_ptr_nonnull(raw);
        json_object *doc = json_tokener_parse(raw);
        ck_assert_str_eq(json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PLAIN),
                         "{\"n5\":\"2.0.0\"}");
        json_object_put(doc);
        free(raw);
    }
    put_text("memory://grp/a/", "attributes.json", "{\"n5\":\"2.0.0\",\"mine\":1}");
    NDS_OK(nds_group_create("memory://grp/", "a", "n5", 0, NULL)); /* left as it is */
    json_object *doc = get_json("memory://grp/a/", "attributes.json");
    ck_assert_str_eq(member_str(doc, "mine"), "1");
    json_object_put(doc);
    nds_array_free(create_meta("grp/a/d", "\"dimensions\":[2],\"dataType\":\"uint8\""));
    EXPECT_ERR(nds_group_create("memory://grp/", "a/d", "n5", 0, NULL), NDS_EEXIST,
               "cannot create a group at memory://grp/a/d/: a dataset exists there");
}
END_TEST

START_TEST(chunk_keys) {
    nds_array *a = create_meta("keys/a", "\"dimensions\":[10,0,7],\"blockSize\":[3,4,7],"
                                         "\"dataType\":\"uint8\"");
    nds_array_free(a);
    a = create_meta("keys/b", "\"dimensions\":[10,100,7],\"blockSize\":[3,4,7],"
                              "\"dataType\":\"uint8\"");
    nds_array_free(a);
    nds_kvstore *kv;
    NDS_OK(nds_kvstore_open(&kv, "memory://keys/b/", NULL));
    void *st;
    nds_array_meta meta;
    NDS_OK(nds_format_n5.open(kv, NULL, NDS_OPEN_EXISTING, &st, &meta));
    ck_assert_uint_eq(meta.rank, 3);
    char key[64];
    NDS_OK(nds_format_n5.chunk_key(st, (const uint64_t[]){3, 24, 0}, key, sizeof key));
    ck_assert_str_eq(key, "3/24/0");
    EXPECT_ERR(nds_format_n5.chunk_key(st, (const uint64_t[]){3, 24, 0}, key, 5), NDS_ERANGE,
               "longer than 5 bytes");
    uint64_t cell[3];
    ck_assert_int_eq(nds_format_n5.parse_chunk_key(st, "3/24/0", cell), 1);
    ck_assert(cell[0] == 3 && cell[1] == 24 && cell[2] == 0);
    static const char *const not_keys[] = {"attributes.json", "4/0/0",  "3/25/0", "03/1/0",
                                           "1/1",             "1/1/0/", "1/1/0/0", "1.1.0",
                                           "",                "-1/0/0", "1/+1/0", "1/1/x"};
    for (size_t i = 0; i < sizeof not_keys / sizeof not_keys[0]; i++)
        ck_assert_msg(nds_format_n5.parse_chunk_key(st, not_keys[i], cell) == 0, "%s",
                      not_keys[i]);
    nds_format_n5.close(st);
    nds_kvstore_free(kv);
}
END_TEST

/* ---- blocks written by zarr-python ----------------------------------------------------------- */

/* Every fixture: 5x4 uint16 (attributes.json order), element (i, j) = 4i + j. */
START_TEST(zarr_python_fixtures) {
    static const char *const names[] = {"raw", "gzip", "bzip2", "xz", "blosc"};
    char dir[1024];
    nds_test_fixtures_dir(dir, sizeof dir);
    for (size_t i = 0; i < 5; i++) {
        nds_array *a;
        int rc = open_spec(&a, "file://%s/n5_zarr_python/%s/|n5:", dir, names[i]);
        ck_assert_msg(rc == 0, "%s: %s (set NDS_FIXTURES)", names[i], nds_error_last()->message);
        uint64_t shape[2];
        nds_array_shape(a, shape);
        ck_assert(nds_array_rank(a) == 2 && shape[0] == 5 && shape[1] == 4);
        ck_assert_int_eq(nds_array_dtype(a), NDS_UINT16);
        uint16_t got[20];
        read_all(a, got);
        for (int k = 0; k < 20; k++)
            ck_assert_msg(got[k] == k, "%s: element (%d, %d) is %u", names[i], k / 4, k % 4,
                          got[k]);
        uint64_t checked = 0, bad = 1;
        NDS_OK(nds_array_verify(a, NULL, NULL, &checked, &bad));
        ck_assert(checked == 4 && bad == 0);
        nds_array_free(a);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("n5");
    TCase *tc = tcase_create("n5");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, xz_round_trips);
    tcase_add_test(tc, xz_python_streams);
    tcase_add_test(tc, xz_memory_limit);
    tcase_add_test(tc, xz_config_errors);
    tcase_add_test(tc, raw_block_layout);
    tcase_add_test(tc, raw_block_layout_3d);
    tcase_add_test(tc, dtype_round_trips);
    tcase_add_test(tc, compression_round_trips);
    tcase_add_test(tc, edge_blocks_full_clipped_and_small);
    tcase_add_test(tc, varlength_blocks);
    tcase_add_test(tc, corrupt_blocks);
    tcase_add_test(tc, hostile_attributes);
    tcase_add_test(tc, foreign_attributes_documents);
    tcase_add_test(tc, create_document);
    tcase_add_test(tc, create_from_schema);
    tcase_add_test(tc, spec_errors);
    tcase_add_test(tc, open_modes);
    tcase_add_test(tc, open_checks_members);
    tcase_add_test(tc, create_race_loser_opens);
    tcase_add_test(tc, resize_keeps_attributes);
    tcase_add_test(tc, resize_retries_on_conflict);
    tcase_add_test(tc, attributes);
    tcase_add_test(tc, groups);
    tcase_add_test(tc, chunk_keys);
    tcase_add_test(tc, zarr_python_fixtures);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
