/* The zarr v3 format driver (formats/zarr3*.c) and the crc32c codec (the read paths are in
 * test_zarr3_reads.c): CRC vectors, zarr.json
 * parsing (every data type, fill values, key encodings, extensions, hostile documents), the codec
 * pipeline (bytes, transpose, gzip, zstd, blosc, crc32c), sharding (index at the start and the
 * end, nested, empty inner chunks, one write per shard per call, corrupt indexes), spec handling,
 * groups, attributes, resize, create races, and every array of the zarrita fixture
 * (tests/fixtures/zarr3_zarrita, or $NDS_FIXTURES). Through the public API on memory://
 * stores, and the vtable where the API does not reach. */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "support_check.h"
#include "support_format.h"
#include "internal/crc32c.h"
#include "ndstore/sys/codec.h"
#include "ndstore/sys/format.h"
#include "../../formats/zarr3_codecs.h"
#include "../../formats/zarr3_metadata.h"

extern const nds_format nds_format_zarr3;

/* ---- helpers --------------------------------------------------------------------------------- */

#define BYTES_LE "{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}}"

static int read_region(nds_array *a, const char *region, void *out) {
    uint64_t shape[NDS_MAX_RANK];
    nds_box box;
    nds_array_shape(a, shape);
    NDS_OK(nds_box_parse(&box, region, nds_array_rank(a), shape));
    return nds_array_read(a, &box, out, NULL);
}

static void write_region(nds_array *a, const char *region, const void *in) {
    uint64_t shape[NDS_MAX_RANK];
    nds_box box;
    nds_array_shape(a, shape);
    NDS_OK(nds_box_parse(&box, region, nds_array_rank(a), shape));
    NDS_OK(nds_array_write(a, &box, in, NULL));
}

/* Opens a zarr.json text through the parser only. */
static int parse_text(const char *text, nds_zarr3_meta *m) {
    json_object *doc = json_tokener_parse(text);
    ck_assert_msg(doc != NULL, "not json: %s", text);
    int rc = nds_zarr3_meta_parse(doc, "doc", m);
    json_object_put(doc);
    return rc;
}

static uint64_t le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static void put_le64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* ---- crc32c ---------------------------------------------------------------------------------- */

static uint32_t crc_bitwise(const uint8_t *p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
    }
    return ~c;
}

START_TEST(crc32c_vectors) {
    uint8_t zeros[32] = {0}, ones[32], inc[32];
    memset(ones, 0xff, sizeof ones);
    for (int i = 0; i < 32; i++) inc[i] = (uint8_t)i;
    /* RFC 3720 (iSCSI) test vectors, and the classic check value. */
    ck_assert_uint_eq(nds_crc32c((const uint8_t *)"123456789", 9), 0xE3069283u);
    ck_assert_uint_eq(nds_crc32c(zeros, 32), 0x8A9136AAu);
    ck_assert_uint_eq(nds_crc32c(ones, 32), 0x62A8AB43u);
    ck_assert_uint_eq(nds_crc32c(inc, 32), 0x46DD794Eu);
    ck_assert_uint_eq(nds_crc32c(NULL, 0), 0u);
    ck_assert_uint_eq(nds_crc32c_portable(inc, 32), 0x46DD794Eu);
    /* Every length and alignment agrees across the three implementations. */
    uint8_t buf[300];
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)(i * 131 + 7);
    for (size_t off = 0; off < 8; off++)
        for (size_t n = 0; n + off <= sizeof buf; n += 1 + n / 16) {
            uint32_t want = crc_bitwise(buf + off, n);
            ck_assert_uint_eq(nds_crc32c(buf + off, n), want);
            ck_assert_uint_eq(nds_crc32c_portable(buf + off, n), want);
            /* Extending a CRC over a split gives the CRC of the whole. */
            ck_assert_uint_eq(nds_crc32c_extend(nds_crc32c(buf + off, n / 3), buf + off + n / 3,
                                                n - n / 3),
                              want);
        }
}
END_TEST

/* Long inputs run three interleaved chains in blocks of 8192 and 256 bytes (lib/crc32c.c): every
 * length around those blocks' multiples, and random ones, agree with the slicing table. */
START_TEST(crc32c_interleaved_blocks) {
    size_t cap = 3 * 8192 * 2 + 3 * 256 * 3 + 64;
    uint8_t *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    uint32_t x = 12345;
    for (size_t i = 0; i < cap; i++) buf[i] = (uint8_t)((x = x * 1103515245u + 12345u) >> 16);
    size_t bases[] = {3 * 256, 3 * 256 * 2, 3 * 8192, 3 * 8192 + 3 * 256, 3 * 8192 * 2};
    for (size_t b = 0; b < sizeof bases / sizeof *bases; b++)
        for (size_t n = bases[b] - 9; n <= bases[b] + 9; n++)
            for (size_t off = 0; off < 3; off++)
                ck_assert_uint_eq(nds_crc32c(buf + off, n), nds_crc32c_portable(buf + off, n));
    for (int i = 0; i < 200; i++) {
        size_t n = (x = x * 1103515245u + 12345u) % (cap - 8), off = i % 8;
        ck_assert_uint_eq(nds_crc32c(buf + off, n), nds_crc32c_portable(buf + off, n));
        size_t cut = n / 2 + 1;
        if (cut > n) cut = n;
        ck_assert_uint_eq(nds_crc32c_extend(nds_crc32c(buf + off, cut), buf + off + cut, n - cut),
                          nds_crc32c_portable(buf + off, n));
    }
    free(buf);
}
END_TEST

START_TEST(crc32c_codec) {
    const nds_codec *c = nds_codec_find("crc32c");
    ck_assert_ptr_nonnull(c);
    void *st = NULL;
    NDS_OK(c->create(&st, NULL, 1));
    nds_buf out = {0};
    NDS_OK(c->encode(st, (const uint8_t *)"hello", 5, &out));
    ck_assert_uint_eq(out.len, 9);
    uint32_t crc = nds_crc32c((const uint8_t *)"hello", 5);
    uint8_t le[4];
    put_le32(le, crc);
    ck_assert_int_eq(memcmp(out.data + 5, le, 4), 0);
    uint8_t dec[16];
    size_t n = 0;
    NDS_OK(nds_codec_decode(c, st, out.data, out.len, dec, sizeof dec, &n));
    ck_assert_uint_eq(n, 5);
    ck_assert_int_eq(memcmp(dec, "hello", 5), 0);
    EXPECT_ERR(nds_codec_decode(c, st, out.data, out.len, dec, 4, &n), NDS_ECORRUPT, "exceeds");
    out.data[1] ^= 1;
    EXPECT_ERR(nds_codec_decode(c, st, out.data, out.len, dec, sizeof dec, &n), NDS_ECORRUPT,
               "crc32c mismatch");
    EXPECT_ERR(nds_codec_decode(c, st, out.data, 3, dec, sizeof dec, &n), NDS_ECORRUPT,
               "too short");
    json_object *bad = json_tokener_parse("{\"level\":1}");
    void *st2 = NULL;
    EXPECT_ERR(c->create(&st2, bad, 1), NDS_EFORMAT, "unknown member \"level\"");
    json_object_put(bad);
    nds_buf_dispose(&out);
    c->destroy(st);
}
END_TEST

/* ---- data types and fill values -------------------------------------------------------------- */

static const char *const all_dtypes[] = {"bool",    "int8",     "int16",     "int32",
                                         "int64",   "uint8",    "uint16",    "uint32",
                                         "uint64",  "float16",  "bfloat16",  "float32",
                                         "float64", "complex64", "complex128"};

/* Deterministic element bytes valid for t (bool: 0/1; floats: finite values). */
static void pattern(nds_dtype t, uint8_t *data, size_t n) {
    size_t es = nds_dtype_size(t);
    for (size_t i = 0; i < n; i++) {
        uint8_t *p = data + i * es;
        if (t == NDS_BOOL) p[0] = (uint8_t)(i % 3 == 0);
        else if (t == NDS_FLOAT32 || t == NDS_COMPLEX64) {
            float f[2] = {(float)i * 0.5f - 3.0f, (float)i};
            memcpy(p, f, es);
        } else if (t == NDS_FLOAT64 || t == NDS_COMPLEX128) {
            double d[2] = {(double)i * 0.25 - 7.0, -(double)i};
            memcpy(p, d, es);
        } else if (t == NDS_FLOAT16 || t == NDS_BFLOAT16) {
            uint16_t h = t == NDS_FLOAT16 ? (uint16_t)(0x3c00 + i) : (uint16_t)(0x3f80 + i);
            memcpy(p, &h, 2);
        } else
            for (size_t k = 0; k < es; k++) p[k] = (uint8_t)(i * 37 + k * 11 + 1);
    }
}

START_TEST(dtypes_round_trip) {
    static const char *const chains[] = {
        "[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}}]",
        "[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"big\"}},{\"name\":\"zstd\","
        "\"configuration\":{\"level\":3,\"checksum\":true}}]",
        "[{\"name\":\"transpose\",\"configuration\":{\"order\":[1,0]}},{\"name\":\"bytes\","
        "\"configuration\":{\"endian\":\"big\"}},{\"name\":\"crc32c\"}]"};
    for (size_t t = 0; t < sizeof all_dtypes / sizeof all_dtypes[0]; t++)
        for (size_t c = 0; c < 3; c++) {
            nds_dtype dt = nds_dtype_from_name(all_dtypes[t]);
            char path[64];
            snprintf(path, sizeof path, "dt/%zu/%zu", t, c);
            nds_array *a = zarr3_in_memory(path, zarr3_array_doc("[5,7]", all_dtypes[t], "[2,3]",
                                                      dt == NDS_BOOL ? "false" : "0", chains[c]));
            ck_assert_int_eq(nds_array_dtype(a), dt);
            size_t n = 35 * nds_dtype_size(dt);
            uint8_t *in = malloc(n), *out = malloc(n);
            pattern(dt, in, 35);
            write_all(a, in);
            nds_array_free(a);
            char url[128];
            snprintf(url, sizeof url, "memory://%s/|zarr3:", path);
            NDS_OK(nds_array_open(&a, url, NULL)); /* reopened from the stored zarr.json */
            read_all(a, out);
            ck_assert_msg(memcmp(in, out, n) == 0, "%s chain %zu differs", all_dtypes[t], c);
            nds_array_free(a);
            free(in);
            free(out);
        }
}
END_TEST

START_TEST(stored_byte_layout) {
    /* int16 big-endian, shape [2,3] one chunk: the stored chunk is the big-endian C-order data. */
    nds_array *a = zarr3_in_memory("lay/be", zarr3_array_doc("[2,3]", "int16", "[2,3]", "0",
                                                  "[{\"name\":\"bytes\",\"configuration\":"
                                                  "{\"endian\":\"big\"}}]"));
    int16_t v[6] = {1, 2, 3, 0x0102, -1, 6};
    write_all(a, v);
    size_t len = 0;
    uint8_t *raw = get_raw("memory://lay/be/", "c/0/0", &len);
    ck_assert_uint_eq(len, 12);
    static const uint8_t want[12] = {0, 1, 0, 2, 0, 3, 1, 2, 0xff, 0xff, 0, 6};
    ck_assert_int_eq(memcmp(raw, want, 12), 0);
    free(raw);
    nds_array_free(a);
    /* transpose [1,0] stores F order; the legacy "F" means the same. */
    for (int legacy = 0; legacy < 2; legacy++) {
        char path[32], codecs[256];
        snprintf(path, sizeof path, "lay/t%d", legacy);
        snprintf(codecs, sizeof codecs,
                 "[{\"name\":\"transpose\",\"configuration\":{\"order\":%s}},"
                 "\"bytes\"]",
                 legacy ? "\"F\"" : "[1,0]");
        a = zarr3_in_memory(path, zarr3_array_doc("[2,3]", "uint8", "[2,3]", "0", codecs));
        uint8_t u[6] = {1, 2, 3, 4, 5, 6}, got[6];
        write_all(a, u);
        char url[64];
        snprintf(url, sizeof url, "memory://%s/", path);
        raw = get_raw(url, "c/0/0", &len);
        static const uint8_t f[6] = {1, 4, 2, 5, 3, 6};
        ck_assert_uint_eq(len, 6);
        ck_assert_int_eq(memcmp(raw, f, 6), 0);
        read_all(a, got);
        ck_assert_int_eq(memcmp(got, u, 6), 0);
        free(raw);
        nds_array_free(a);
    }
    /* a 3-d permutation, and two transposes composing to the identity */
    a = zarr3_in_memory("lay/p3", zarr3_array_doc("[2,3,4]", "uint16", "[2,3,4]", "0",
                                       "[{\"name\":\"transpose\",\"configuration\":{\"order\":"
                                       "[2,0,1]}},{\"name\":\"bytes\",\"configuration\":"
                                       "{\"endian\":\"little\"}}]"));
    uint16_t w[24], r[24];
    for (int i = 0; i < 24; i++) w[i] = (uint16_t)(i * 3);
    write_all(a, w);
    raw = get_raw("memory://lay/p3/", "c/0/0/0", &len);
    /* stored[k][i][j] = w[i][j][k] */
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++) {
                uint16_t s;
                memcpy(&s, raw + 2 * ((k * 2 + i) * 3 + j), 2);
                ck_assert_uint_eq(s, w[(i * 3 + j) * 4 + k]);
            }
    read_all(a, r);
    ck_assert_int_eq(memcmp(w, r, sizeof w), 0);
    free(raw);
    nds_array_free(a);
}
END_TEST

/* Parses a one-element float32/complex fill and returns its bytes. */
static void fill_of(const char *dtype, const char *fill, uint8_t *out) {
    nds_zarr3_meta m;
    int rc = parse_text(zarr3_array_doc("[1]", dtype, "[1]", fill, "[\"bytes\"]"), &m);
    if (rc == NDS_EFORMAT) { /* multi-byte types need an endian */
        rc = parse_text(zarr3_array_doc("[1]", dtype, "[1]", fill,
                                  "[{\"name\":\"bytes\",\"configuration\":{\"endian\":"
                                  "\"little\"}}]"), &m);
    }
    ck_assert_msg(rc == 0, "%s %s: %s", dtype, fill, nds_error_last()->message);
    memcpy(out, m.fill, NDS_DTYPE_MAX_SIZE);
    nds_zarr3_meta_dispose(&m);
}

static json_object *fill_back(const char *dtype, const uint8_t *fill) {
    return nds_zarr3_fill_json(nds_dtype_from_name(dtype), fill);
}

START_TEST(fill_values) {
    uint8_t f[NDS_DTYPE_MAX_SIZE];
    float x;
    double d;
    uint32_t u32;
    fill_of("float32", "\"NaN\"", f);
    memcpy(&x, f, 4);
    ck_assert(isnan(x));
    fill_of("float32", "\"Infinity\"", f);
    memcpy(&x, f, 4);
    ck_assert(isinf(x) && x > 0);
    fill_of("float32", "\"-Infinity\"", f);
    memcpy(&x, f, 4);
    ck_assert(isinf(x) && x < 0);
    fill_of("float32", "\"0x7fc00001\"", f); /* a NaN payload survives, and prints back as hex */
    memcpy(&u32, f, 4);
    ck_assert_uint_eq(u32, 0x7fc00001u);
    json_object *j = fill_back("float32", f);
    ck_assert_str_eq(json_object_get_string(j), "0x7fc00001");
    json_object_put(j);
    fill_of("float32", "\"NaN\"", f);
    j = fill_back("float32", f);
    ck_assert_str_eq(json_object_get_string(j), "NaN");
    json_object_put(j);
    fill_of("float32", "0.1", f);
    j = fill_back("float32", f);
    ck_assert_str_eq(json_object_to_json_string(j), "0.1"); /* shortest for the float, not double */
    json_object_put(j);
    fill_of("float64", "\"0x3ff0000000000000\"", f);
    memcpy(&d, f, 8);
    ck_assert(d == 1.0);
    fill_of("float16", "\"0x3c00\"", f);
    ck_assert_uint_eq(f[0] | f[1] << 8, 0x3c00);
    fill_of("bfloat16", "-2.5", f);
    ck_assert_uint_eq(f[0] | f[1] << 8, 0xc020);
    fill_of("complex64", "[\"NaN\", 1.5]", f);
    memcpy(&x, f, 4);
    ck_assert(isnan(x));
    memcpy(&x, f + 4, 4);
    ck_assert(x == 1.5f);
    fill_of("complex64", "[\"0x3f800000\", \"-Infinity\"]", f);
    memcpy(&x, f, 4);
    ck_assert(x == 1.0f);
    j = fill_back("complex64", f);
    ck_assert_str_eq(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN),
                     "[1.0,\"-Infinity\"]");
    json_object_put(j);
    fill_of("complex128", "[0.5, -2]", f);
    memcpy(&d, f + 8, 8);
    ck_assert(d == -2.0);
    fill_of("uint64", "18446744073709551615", f);
    ck_assert_uint_eq(le64(f), UINT64_MAX);
    fill_of("int8", "-128", f);
    ck_assert_int_eq((int8_t)f[0], -128);
    fill_of("bool", "true", f);
    ck_assert_uint_eq(f[0], 1);
    fill_of("int16", "null", f); /* zarrita writes null when no fill is given: zero */
    ck_assert_uint_eq(f[0] | f[1], 0);
    nds_zarr3_meta m;
    EXPECT_ERR(parse_text(zarr3_array_doc("[1]", "int8", "[1]", "200", "[\"bytes\"]"), &m), NDS_EFORMAT,
               "out of range");
    EXPECT_ERR(
        parse_text(zarr3_array_doc("[1]", "float32", "[1]", "\"nan\"",
                             "[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}}]"),
                   &m),
        NDS_EFORMAT, "fill_value");
    /* reading an empty array gives the fill */
    nds_array *a = zarr3_in_memory("fill/nan", zarr3_array_doc("[3]", "float64", "[2]", "\"NaN\"",
                                                    "[{\"name\":\"bytes\",\"configuration\":"
                                                    "{\"endian\":\"little\"}}]"));
    double out[3];
    read_all(a, out);
    ck_assert(isnan(out[0]) && isnan(out[2]));
    nds_array_free(a);
}
END_TEST

/* ---- chunk keys ------------------------------------------------------------------------------ */

START_TEST(chunk_keys) {
    static const struct {
        const char *encoding, *shape, *chunks, *key, *bad[6];
    } cases[] = {
        {"{\"name\":\"default\",\"configuration\":{\"separator\":\"/\"}}",
         "[10,10]",
         "[3,4]",
         "c/1/2",
         {"c/01/2", "c/1", "c/1/2/3", "c/4/0", "d/1/2", "c.1.2"}},
        {"{\"name\":\"default\",\"configuration\":{\"separator\":\".\"}}",
         "[10,10]",
         "[3,4]",
         "c.1.2",
         {"c/1/2", "c.1", "c.1.2.", "1.2", "c.+1.2", "c..1.2"}},
        {"{\"name\":\"default\"}",
         "[10,10]",
         "[3,4]",
         "c/1/2",
         {"c.1.2", "1/2", "c/1/3", "", "c", "c/"}},
        {"{\"name\":\"v2\"}",
         "[10,10]",
         "[3,4]",
         "1.2",
         {"1/2", "c.1.2", "1.2.0", "4.0", "01.2", "1."}},
        {"{\"name\":\"v2\",\"configuration\":{\"separator\":\"/\"}}",
         "[10,10]",
         "[3,4]",
         "1/2",
         {"1.2", "c/1/2", "1/2/", "/1/2", "1//2", "a/b"}},
        {"{\"name\":\"default\"}", "[]", "[]", "c", {"c/0", "0", "", "c/", "cc", "d"}},
        {"{\"name\":\"v2\"}", "[]", "[]", "0", {"c", "00", "1", "", "0.0", "0/"}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char doc[1024], path[32];
        snprintf(doc, sizeof doc,
                 "{\"zarr_format\":3,\"node_type\":\"array\",\"shape\":%s,\"data_type\":\"uint8\","
                 "\"chunk_grid\":{\"name\":\"regular\",\"configuration\":{\"chunk_shape\":%s}},"
                 "\"chunk_key_encoding\":%s,\"fill_value\":0,\"codecs\":[\"bytes\"]}",
                 cases[i].shape, cases[i].chunks, cases[i].encoding);
        snprintf(path, sizeof path, "keys/%zu", i);
        nds_array *a = zarr3_in_memory(path, doc);
        const nds_format *f = &nds_format_zarr3;
        void *st = NULL;
        nds_array_meta meta;
        nds_kvstore *kv = nds_array_kvstore(a);
        NDS_OK(f->open(kv, NULL, NDS_OPEN_EXISTING, &st, &meta));
        uint64_t cell[2] = {1, 2}, back[2] = {9, 9};
        char key[64];
        NDS_OK(f->chunk_key(st, cell, key, sizeof key));
        ck_assert_str_eq(key, cases[i].key);
        ck_assert_int_eq(f->parse_chunk_key(st, key, back), 1);
        if (meta.rank == 2) ck_assert(back[0] == 1 && back[1] == 2);
        for (int k = 0; k < 6; k++)
            ck_assert_msg(f->parse_chunk_key(st, cases[i].bad[k], back) == 0, "case %zu accepts %s",
                          i, cases[i].bad[k]);
        /* a write lands under that key */
        uint8_t v = 5;
        if (meta.rank == 2) write_region(a, "[3, 8]", &v);
        else write_all(a, &v);
        char url[64];
        snprintf(url, sizeof url, "memory://%s/", path);
        uint8_t *raw = get_raw(url, key, NULL);
        ck_assert_msg(raw != NULL, "no chunk under %s", key);
        free(raw);
        f->close(st);
        nds_array_free(a);
    }
}
END_TEST

/* ---- codecs ---------------------------------------------------------------------------------- */

START_TEST(compressor_chains) {
    static const struct {
        const char *codecs, *describe;
    } cases[] = {
        {"[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}},{\"name\":\"gzip\","
         "\"configuration\":{\"level\":5}}]",
         "bytes(endian=little) | gzip(level=5)"},
        {"[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}},{\"name\":\"zstd\","
         "\"configuration\":{\"level\":1}}]",
         "zstd(checksum=false, level=1)"},
        {"[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}},{\"name\":\"blosc\","
         "\"configuration\":{\"cname\":\"lz4\",\"clevel\":5,\"shuffle\":\"shuffle\",\"typesize\":4,"
         "\"blocksize\":0}}]",
         "blosc(blocksize=0, clevel=5, cname=lz4, shuffle=shuffle, typesize=4)"},
        {"[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}},{\"name\":\"blosc\","
         "\"configuration\":{\"cname\":\"zstd\",\"clevel\":3,\"shuffle\":\"bitshuffle\","
         "\"typesize\":4}}]",
         "shuffle=bitshuffle"},
        {"[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}},{\"name\":\"blosc\","
         "\"configuration\":{\"cname\":\"blosclz\",\"clevel\":1,\"shuffle\":\"noshuffle\"}}]",
         "shuffle=noshuffle"},
        {"[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"big\"}},{\"name\":\"zstd\","
         "\"configuration\":{\"level\":0}},{\"name\":\"crc32c\"}]",
         "| crc32c"},
        {"[{\"name\":\"zstd\",\"configuration\":{\"level\":2}},{\"name\":\"gzip\","
         "\"configuration\":{\"level\":1}}]",
         "bytes(endian=little) | zstd"},
        {"[\"bytes\",{\"name\":\"numcodecs.zlib\",\"configuration\":{\"level\":3}}]",
         "numcodecs.zlib(level=3)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[32];
        snprintf(path, sizeof path, "cc/%zu", i);
        const char *codecs = cases[i].codecs;
        char fixed[1024];
        if (strstr(codecs,
                   "[\"bytes\"")) { /* int32 needs an endian: give the bare name only here */
            snprintf(fixed, sizeof fixed, "[{\"name\":\"bytes\",\"configuration\":{\"endian\":"
                     "\"little\"}}%s", codecs + 8);
            codecs = fixed;
        }
        nds_array *a = zarr3_in_memory(path, zarr3_array_doc("[50,40]", "int32", "[16,16]", "-1", codecs));
        char desc[512];
        nds_array_codec_description(a, desc, sizeof desc);
        ck_assert_msg(strstr(desc, cases[i].describe) != NULL, "%s lacks %s", desc,
                      cases[i].describe);
        int32_t *in = malloc(2000 * 4), *out = malloc(2000 * 4);
        for (int k = 0; k < 2000; k++) in[k] = k % 97 == 0 ? -1 : k / 7;
        write_all(a, in);
        read_all(a, out);
        ck_assert_int_eq(memcmp(in, out, 2000 * 4), 0);
        uint64_t checked = 0, bad = 9;
        NDS_OK(nds_array_verify(a, NULL, NULL, &checked, &bad));
        ck_assert_uint_eq(checked, 12);
        ck_assert_uint_eq(bad, 0);
        free(in);
        free(out);
        nds_array_free(a);
    }
}
END_TEST

START_TEST(corrupt_chunks) {
    nds_array *a =
        zarr3_in_memory("bad/crc", zarr3_array_doc("[8]", "uint16", "[4]", "0",
                                        "[{\"name\":\"bytes\",\"configuration\":"
                                        "{\"endian\":\"little\"}},{\"name\":\"crc32c\"}]"));
    uint16_t v[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8];
    write_all(a, v);
    size_t len = 0;
    uint8_t *raw = get_raw("memory://bad/crc/", "c/1", &len);
    ck_assert_uint_eq(len, 12);
    raw[2] ^= 0x40;
    put_raw("memory://bad/crc/", "c/1", raw, len);
    EXPECT_ERR(read_region(a, "[4:8]", out), NDS_ECORRUPT, "crc32c mismatch");
    ck_assert(strstr(nds_error_last()->message, "c/1") != NULL);
    put_raw("memory://bad/crc/", "c/1", raw, 3);
    EXPECT_ERR(read_region(a, "[4:8]", out), NDS_ECORRUPT, "too short to hold a checksum");
    NDS_OK(read_region(a, "[0:4]", out)); /* other chunks are fine */
    free(raw);
    nds_array_free(a);
    a = zarr3_in_memory("bad/size", zarr3_array_doc("[8]", "uint16", "[4]", "0", "[" BYTES_LE "]"));
    put_raw("memory://bad/size/", "c/1", "1234567", 7);
    EXPECT_ERR(read_region(a, "[4:8]", out), NDS_ECORRUPT, "chunk c/1 of memory://bad/size/: expected 8 bytes, found 7");
    nds_array_free(a);
    a = zarr3_in_memory("bad/raw", zarr3_array_doc("[8]", "uint16", "[4]", "0",
                                        "[{\"name\":\"bytes\",\"configuration\":{\"endian\":"
                                        "\"little\"}},{\"name\":\"gzip\",\"configuration\":"
                                        "{\"level\":1}}]"));
    put_raw("memory://bad/raw/", "c/0", "garbage!", 8);
    EXPECT_ERR(read_region(a, "[0:4]", out), NDS_ECORRUPT, "gzip");
    nds_array_free(a);
}
END_TEST

/* ---- hostile metadata ------------------------------------------------------------------------ */

START_TEST(hostile_metadata) {
#define BASE_MEMBERS                                                                          \
    "\"zarr_format\":3,\"node_type\":\"array\",\"data_type\":\"int16\","                      \
    "\"chunk_key_encoding\":{\"name\":\"default\"},\"fill_value\":0,"
    static const struct {
        const char *doc;
        int code;
        const char *needle;
    } cases[] = {
        {"[]", NDS_EFORMAT, "expected a json object"},
        {"{}", NDS_EFORMAT, "missing member \"zarr_format\""},
        {"{\"zarr_format\":2}", NDS_EFORMAT, "\"zarr_format\" must be 3"},
        {"{\"zarr_format\":3,\"node_type\":\"group\"}", NDS_EFORMAT, "describes a group"},
        {"{\"zarr_format\":3,\"node_type\":\"array\"}", NDS_EFORMAT, "missing member \"shape\""},
        {"{" BASE_MEMBERS "\"shape\":[4],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":"
         "{\"chunk_shape\":[2]}}}",
         NDS_EFORMAT, "missing member \"codecs\""},
        {"{" BASE_MEMBERS "\"shape\":[-4],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":"
         "{\"chunk_shape\":[2]}},\"codecs\":[" BYTES_LE "]}",
         NDS_EFORMAT, "\"shape\" must be"},
        {"{" BASE_MEMBERS "\"shape\":[4.0],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":"
         "{\"chunk_shape\":[2]}},\"codecs\":[" BYTES_LE "]}",
         NDS_EFORMAT, "\"shape\" must be"},
        {"{" BASE_MEMBERS "\"shape\":[4],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":"
         "{\"chunk_shape\":[0]}},\"codecs\":[" BYTES_LE "]}",
         NDS_EFORMAT, "positive integers"},
        {"{" BASE_MEMBERS "\"shape\":[4,4],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":"
         "{\"chunk_shape\":[2]}},\"codecs\":[" BYTES_LE "]}",
         NDS_EFORMAT, "has 1 entries"},
        {"{" BASE_MEMBERS "\"shape\":[4],\"chunk_grid\":{\"name\":\"rectilinear\","
         "\"configuration\":{}},\"codecs\":[" BYTES_LE "]}",
         NDS_EUNSUPPORTED, "chunk_grid \"rectilinear\" is not supported"},
        {"{" BASE_MEMBERS
         "\"shape\":[4],\"chunk_grid\":{\"name\":\"regular\"},\"codecs\":[" BYTES_LE "]}",
         NDS_EFORMAT, "needs a \"configuration\""},
        {"{\"zarr_format\":3,\"node_type\":\"array\",\"data_type\":\"string\",\"shape\":[4],"
         "\"chunk_grid\":{\"name\":\"regular\",\"configuration\":{\"chunk_shape\":[2]}},"
         "\"chunk_key_encoding\":{\"name\":\"default\"},\"fill_value\":\"\",\"codecs\":[]}",
         NDS_EUNSUPPORTED, "data_type \"string\" needs the \"vlen-utf8\" codec"},
        {"{\"zarr_format\":3,\"node_type\":\"array\",\"data_type\":{\"name\":\"struct\"},"
         "\"shape\":[4]}",
         NDS_EUNSUPPORTED, "data_type \"struct\""},
        {"{\"zarr_format\":3,\"node_type\":\"array\",\"data_type\":\"int16\",\"shape\":[4],"
         "\"chunk_grid\":{\"name\":\"regular\",\"configuration\":{\"chunk_shape\":[2]}},"
         "\"chunk_key_encoding\":{\"name\":\"hashed\"},\"fill_value\":0,\"codecs\":[]}",
         NDS_EUNSUPPORTED, "chunk_key_encoding \"hashed\""},
        {"{\"zarr_format\":3,\"node_type\":\"array\",\"data_type\":\"int16\",\"shape\":[4],"
         "\"chunk_grid\":{\"name\":\"regular\",\"configuration\":{\"chunk_shape\":[2]}},"
         "\"chunk_key_encoding\":{\"name\":\"default\",\"configuration\":{\"separator\":\"-\"}},"
         "\"fill_value\":0,\"codecs\":[]}",
         NDS_EFORMAT, "separator"},
        {"{" BASE_MEMBERS "\"shape\":[4],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":"
         "{\"chunk_shape\":[2]}},\"codecs\":[{\"name\":\"lzma\"}]}",
         NDS_EUNSUPPORTED, "codecs[0]: codec \"lzma\" is not supported"},
        {"{" BASE_MEMBERS "\"shape\":[4],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":"
         "{\"chunk_shape\":[2]}},\"codecs\":[" BYTES_LE ",{\"name\":\"fancy\",\"must_understand\":"
         "false}]}",
         NDS_EUNSUPPORTED, "codecs[1]: codec \"fancy\" is not supported"},
        {"{" BASE_MEMBERS "\"shape\":[4],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":"
         "{\"chunk_shape\":[2]}},\"codecs\":[\"bytes\"]}",
         NDS_EFORMAT, "bytes needs \"endian\" for int16"},
        {"{" BASE_MEMBERS "\"shape\":[4],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":"
         "{\"chunk_shape\":[2]}},\"codecs\":[" BYTES_LE "," BYTES_LE "]}",
         NDS_EFORMAT, "a second array-to-bytes codec"},
        {"{" BASE_MEMBERS "\"shape\":[4],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":"
         "{\"chunk_shape\":[2]}},\"codecs\":[" BYTES_LE ",{\"name\":\"transpose\","
         "\"configuration\":{\"order\":[0]}}]}",
         NDS_EFORMAT, "transpose must come before"},
        {"{" BASE_MEMBERS "\"shape\":[4,4],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":"
         "{\"chunk_shape\":[2,2]}},\"codecs\":[{\"name\":\"transpose\",\"configuration\":"
         "{\"order\":[0,0]}}," BYTES_LE "]}",
         NDS_EFORMAT, "must be a permutation"},
        {"{" BASE_MEMBERS "\"shape\":[4],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":"
         "{\"chunk_shape\":[2]}},\"codecs\":[" BYTES_LE ",{\"name\":\"gzip\",\"configuration\":"
         "{\"level\":12}}]}",
         NDS_EFORMAT, "\"level\" is 12"},
        {"{" BASE_MEMBERS "\"shape\":[4],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":"
         "{\"chunk_shape\":[2]}},\"codecs\":[" BYTES_LE ",{\"name\":\"gzip\"}]}",
         NDS_EFORMAT, "gzip needs \"level\""},
        {"{" BASE_MEMBERS "\"shape\":[4],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":"
         "{\"chunk_shape\":[2]}},\"codecs\":[" BYTES_LE ",{\"name\":\"blosc\",\"configuration\":"
         "{\"cname\":\"lz4\",\"clevel\":5,\"shuffle\":\"shuffle\"}}]}",
         NDS_EFORMAT, "missing member \"typesize\""},
        {"{" BASE_MEMBERS "\"shape\":[4],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":"
         "{\"chunk_shape\":[2]}},\"codecs\":[" BYTES_LE ",{\"name\":\"blosc\",\"configuration\":"
         "{\"cname\":\"lzx\",\"clevel\":5,\"shuffle\":\"noshuffle\"}}]}",
         NDS_EFORMAT, "cname"},
        {"{" BASE_MEMBERS "\"shape\":[4],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":"
         "{\"chunk_shape\":[2]}},\"codecs\":[" BYTES_LE ",{\"name\":\"zstd\",\"configuration\":"
         "{\"level\":1,\"dict\":1}}]}",
         NDS_EFORMAT, "unknown configuration member \"dict\""},
        {"{" BASE_MEMBERS "\"shape\":[4],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":"
         "{\"chunk_shape\":[2]}},\"codecs\":[" BYTES_LE "],\"storage_transformers\":[{\"name\":"
         "\"x\"}]}",
         NDS_EUNSUPPORTED, "storage transformer \"x\""},
        {"{" BASE_MEMBERS "\"shape\":[4],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":"
         "{\"chunk_shape\":[2]}},\"codecs\":[" BYTES_LE "],\"extra\":1}",
         NDS_EUNSUPPORTED, "unknown member \"extra\""},
        {"{" BASE_MEMBERS "\"shape\":[4],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":"
         "{\"chunk_shape\":[2]}},\"codecs\":[" BYTES_LE "],\"ext\":{\"must_understand\":true}}",
         NDS_EUNSUPPORTED, "unknown member \"ext\""},
        {"{" BASE_MEMBERS "\"shape\":[4],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":"
         "{\"chunk_shape\":[2]}},\"codecs\":[" BYTES_LE "],\"dimension_names\":[\"x\",\"y\"]}",
         NDS_EFORMAT, "dimension_names"},
        {"{" BASE_MEMBERS "\"shape\":[4],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":"
         "{\"chunk_shape\":[2]}},\"codecs\":[" BYTES_LE "],\"attributes\":[]}",
         NDS_EFORMAT, "\"attributes\" must be an object"},
        {"{" BASE_MEMBERS "\"shape\":[4294967296,4294967296,2],\"chunk_grid\":{\"name\":"
         "\"regular\",\"configuration\":{\"chunk_shape\":[1,1,1]}},\"codecs\":[" BYTES_LE "]}",
         NDS_ELIMIT, "2^64"},
        {"{" BASE_MEMBERS "\"shape\":[4],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":"
         "{\"chunk_shape\":[2000000000]}},\"codecs\":[" BYTES_LE "]}",
         NDS_ELIMIT, "2 GiB"},
        {"{" BASE_MEMBERS "\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,"
         "1,1,1,1]}",
         NDS_ELIMIT, "at most 32"},
        {"{" BASE_MEMBERS "\"shape\":[4],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":"
         "{\"chunk_shape\":[4]}},\"codecs\":[{\"name\":\"sharding_indexed\",\"configuration\":"
         "{\"chunk_shape\":[3],\"codecs\":[" BYTES_LE "],\"index_codecs\":[" BYTES_LE "]}}]}",
         NDS_EFORMAT, "does not divide the shard shape"},
        {"{" BASE_MEMBERS "\"shape\":[4],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":"
         "{\"chunk_shape\":[4]}},\"codecs\":[{\"name\":\"sharding_indexed\",\"configuration\":"
         "{\"chunk_shape\":[2],\"codecs\":[" BYTES_LE "],\"index_codecs\":[" BYTES_LE
         ",{\"name\":\"gzip\",\"configuration\":{\"level\":1}}]}}]}",
         NDS_EFORMAT, "must have a fixed encoded size"},
        {"{" BASE_MEMBERS "\"shape\":[4],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":"
         "{\"chunk_shape\":[4]}},\"codecs\":[{\"name\":\"sharding_indexed\",\"configuration\":"
         "{\"chunk_shape\":[2],\"codecs\":[" BYTES_LE "]}}]}",
         NDS_EFORMAT, "missing member \"index_codecs\""},
        {"{" BASE_MEMBERS "\"shape\":[4],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":"
         "{\"chunk_shape\":[4]}},\"codecs\":[{\"name\":\"sharding_indexed\",\"configuration\":"
         "{\"chunk_shape\":[2],\"codecs\":[" BYTES_LE "],\"index_codecs\":[" BYTES_LE "],"
         "\"index_location\":\"middle\"}}]}",
         NDS_EFORMAT, "\"index_location\" must be"},
        {"{" BASE_MEMBERS
         "\"shape\":[1048576],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":"
         "{\"chunk_shape\":[33554432]}},\"codecs\":[{\"name\":\"sharding_indexed\","
         "\"configuration\":"
         "{\"chunk_shape\":[1],\"codecs\":[" BYTES_LE "],\"index_codecs\":[" BYTES_LE "]}}]}",
         NDS_ELIMIT, "inner chunks per shard"},
        {"{" BASE_MEMBERS "\"shape\":[4],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":"
         "{\"chunk_shape\":[2]}},\"codecs\":[7]}",
         NDS_EFORMAT, "codecs[0] must be a codec"},
        {"{" BASE_MEMBERS "\"shape\":[4],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":"
         "{\"chunk_shape\":[2]}},\"codecs\":[{\"configuration\":{}}]}",
         NDS_EFORMAT, "missing member \"name\""},
        /* errors of bytes-to-bytes codecs, at the top and nested in a shard: the path once */
        {"{" BASE_MEMBERS "\"shape\":[4],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":"
         "{\"chunk_shape\":[2]}},\"codecs\":[" BYTES_LE ",{\"name\":\"zstd\",\"configuration\":"
         "{\"level\":\"x\"}}]}",
         NDS_EFORMAT, "doc: codecs[1]: \"level\" must be an integer"},
        {"{" BASE_MEMBERS "\"shape\":[4],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":"
         "{\"chunk_shape\":[2]}},\"codecs\":[" BYTES_LE ",{\"name\":\"numcodecs.zlib\","
         "\"configuration\":{\"level\":99}}]}",
         NDS_EFORMAT, "doc: codecs[1]: zlib config: \"level\" is 99"},
        {"{" BASE_MEMBERS "\"shape\":[4],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":"
         "{\"chunk_shape\":[2]}},\"codecs\":[{\"name\":\"sharding_indexed\",\"configuration\":"
         "{\"chunk_shape\":[2],\"codecs\":[" BYTES_LE ",{\"name\":\"gzip\",\"configuration\":"
         "{\"level\":99}}],\"index_codecs\":[" BYTES_LE "]}}]}",
         NDS_EFORMAT, "doc: codecs[0].configuration.codecs[1]: \"level\" is 99"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        nds_zarr3_meta m;
        json_object *doc = json_tokener_parse(cases[i].doc);
        ck_assert_msg(doc != NULL, "case %zu is not json", i);
        int rc = nds_zarr3_meta_parse(doc, "doc", &m);
        json_object_put(doc);
        const char *msg = nds_error_last()->message;
        ck_assert_msg(rc == cases[i].code, "case %zu: expected %d, got %d (%s)", i, cases[i].code,
                      rc, msg);
        ck_assert_msg(strstr(msg, cases[i].needle) != NULL, "case %zu: \"%s\" lacks \"%s\"", i,
                      msg, cases[i].needle);
        const char *first = strstr(msg, "doc:"); /* the document is named once */
        ck_assert_msg(!first || !strstr(first + 1, "doc:"), "case %zu: \"%s\" repeats its prefix",
                      i, msg);
    }
    /* An extension object with must_understand false is ignored; nested sharding deeper than the
     * limit is refused. */
    nds_zarr3_meta m;
    NDS_OK(parse_text("{" BASE_MEMBERS "\"shape\":[4],\"chunk_grid\":{\"name\":\"regular\","
                      "\"configuration\":{\"chunk_shape\":[2]}},\"codecs\":[" BYTES_LE "],"
                      "\"ext\":{\"must_understand\":false,\"x\":1},\"dimension_names\":[\"x\"]}",
                      &m));
    nds_zarr3_meta_dispose(&m);
    char deep[8192] = "[" BYTES_LE "]";
    for (int k = 0; k < 5; k++) {
        char next[8192];
        int n = snprintf(next, sizeof next, "[{\"name\":\"sharding_indexed\",\"configuration\":"
                         "{\"chunk_shape\":[4],\"codecs\":%s,\"index_codecs\":[" BYTES_LE
                         "]}}]", deep);
        ck_assert_int_lt(n, (int)sizeof next);
        strcpy(deep, next);
    }
    char doc[9000];
    int n = snprintf(doc, sizeof doc,
                     "{" BASE_MEMBERS "\"shape\":[4],\"chunk_grid\":{\"name\":\"regular\","
                     "\"configuration\":{\"chunk_shape\":[4]}},\"codecs\":%s}",
                     deep);
    ck_assert_int_lt(n, (int)sizeof doc);
    EXPECT_ERR(parse_text(doc, &m), NDS_ELIMIT, "nested more than 4 levels");
}
END_TEST

/* ---- sharding -------------------------------------------------------------------------------- */

#define SHARD_CODECS(inner, loc)                                                                \
    "[{\"name\":\"sharding_indexed\",\"configuration\":{\"chunk_shape\":" inner ",\"codecs\":[" \
    BYTES_LE ",{\"name\":\"zstd\",\"configuration\":{\"level\":1}}],\"index_codecs\":["       \
    BYTES_LE ",{\"name\":\"crc32c\"}],\"index_location\":\"" loc "\"}}]"

/* Checks the stored index of shard key: n entries, crc ok; returns a malloc'd copy of the raw
 * shard and sets *empty to the number of empty entries. */
static uint8_t *check_shard(const char *url, const char *key, size_t n, bool at_start,
                            size_t *len, size_t *empty) {
    uint8_t *raw = get_raw(url, key, len);
    ck_assert_msg(raw != NULL, "shard %s missing", key);
    size_t ix = 16 * n + 4;
    ck_assert_uint_ge(*len, ix);
    const uint8_t *p = at_start ? raw : raw + *len - ix;
    uint8_t le[4];
    put_le32(le, nds_crc32c(p, 16 * n));
    ck_assert_int_eq(memcmp(p + 16 * n, le, 4), 0);
    *empty = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t off = le64(p + 16 * i), nb = le64(p + 16 * i + 8);
        if (off == UINT64_MAX) {
            ck_assert_uint_eq(nb, UINT64_MAX);
            (*empty)++;
            continue;
        }
        ck_assert_uint_le(off + nb, *len);
        if (at_start) ck_assert_uint_ge(off, ix);
        else ck_assert_uint_le(off + nb, *len - ix);
    }
    return raw;
}

static void sharded_round_trip(const char *path, const char *loc) {
    char codecs[2048], url[64];
    snprintf(codecs, sizeof codecs,
             "[{\"name\":\"sharding_indexed\",\"configuration\":{\"chunk_shape\":[2,3],"
             "\"codecs\":[" BYTES_LE ",{\"name\":\"zstd\",\"configuration\":{\"level\":1}}],"
             "\"index_codecs\":[" BYTES_LE ",{\"name\":\"crc32c\"}],\"index_location\":\"%s\"}}]",
             loc);
    snprintf(url, sizeof url, "memory://%s/", path);
    nds_array *a = zarr3_in_memory(path, zarr3_array_doc("[10,9]", "int16", "[4,6]", "7", codecs));
    uint64_t chunks[2];
    nds_array_chunk_shape(a, chunks);
    ck_assert(chunks[0] == 4 && chunks[1] == 6);
    int16_t in[90], out[90];
    for (int i = 0; i < 90; i++) in[i] = (int16_t)(i * 3 - 50);
    write_all(a, in);
    read_all(a, out);
    ck_assert_int_eq(memcmp(in, out, sizeof in), 0);
    int16_t sub[12];
    NDS_OK(read_region(a, "[3:7, 2:5]", sub)); /* crosses shards and inner chunks */
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 3; c++) ck_assert_int_eq(sub[r * 3 + c], in[(3 + r) * 9 + 2 + c]);
    size_t len, empty;
    uint8_t *raw = check_shard(url, "c/0/0", 4, loc[0] == 's', &len, &empty);
    ck_assert_uint_eq(empty, 0);
    free(raw);
    /* the edge shard c/2/1 (rows 8-9, columns 6-8): inner chunks beyond the array are empty */
    raw = check_shard(url, "c/2/1", 4, loc[0] == 's', &len, &empty);
    ck_assert_uint_eq(empty, 3);
    free(raw);
    /* filling one inner chunk of a shard empties its index entry; the rest stays */
    int16_t sevens[6] = {7, 7, 7, 7, 7, 7};
    write_region(a, "[0:2, 0:3]", sevens);
    raw = check_shard(url, "c/0/0", 4, loc[0] == 's', &len, &empty);
    ck_assert_uint_eq(empty, 1);
    free(raw);
    read_all(a, out);
    for (int r = 0; r < 10; r++)
        for (int c = 0; c < 9; c++)
            ck_assert_int_eq(out[r * 9 + c], r < 2 && c < 3 ? 7 : in[r * 9 + c]);
    /* a shard left all fill is deleted */
    int16_t fill24[24];
    for (int i = 0; i < 24; i++) fill24[i] = 7;
    write_region(a, "[4:8, 0:6]", fill24);
    ck_assert_ptr_null(get_raw(url, "c/1/0", NULL));
    nds_array_stats st;
    NDS_OK(nds_array_stats_get(a, &st));
    ck_assert_uint_eq(st.chunks_total, 6);
    ck_assert_uint_eq(st.chunks_stored, 5);
    uint64_t checked, bad;
    NDS_OK(nds_array_verify(a, NULL, NULL, &checked, &bad));
    ck_assert_uint_eq(checked, 5);
    ck_assert_uint_eq(bad, 0);
    nds_array_free(a);
}

START_TEST(sharding_index_end) { sharded_round_trip("sh/end", "end"); }
END_TEST

START_TEST(sharding_index_start) { sharded_round_trip("sh/start", "start"); }
END_TEST

START_TEST(sharding_nested) {
    const char *codecs =
        "[{\"name\":\"sharding_indexed\",\"configuration\":{\"chunk_shape\":[4,4],\"codecs\":["
        "{\"name\":\"sharding_indexed\",\"configuration\":{\"chunk_shape\":[2,2],\"codecs\":["
        "{\"name\":\"transpose\",\"configuration\":{\"order\":[1,0]}}," BYTES_LE
        ",{\"name\":\"gzip\",\"configuration\":{\"level\":1}}],\"index_codecs\":[" BYTES_LE "],"
        "\"index_location\":\"start\"}}],\"index_codecs\":[" BYTES_LE ",{\"name\":\"crc32c\"}]}}]";
    nds_array *a = zarr3_in_memory("sh/nested", zarr3_array_doc("[12,10]", "uint32", "[8,8]", "0", codecs));
    uint32_t in[120], out[120];
    for (int i = 0; i < 120; i++) in[i] = (uint32_t)(i * 2654435761u);
    in[0] = 0; /* some fill in the first inner-inner chunk */
    write_all(a, in);
    read_all(a, out);
    ck_assert_int_eq(memcmp(in, out, sizeof in), 0);
    uint32_t sub[6];
    NDS_OK(read_region(a, "[5:8, 3:5]", sub));
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 2; c++) ck_assert_uint_eq(sub[r * 2 + c], in[(5 + r) * 10 + 3 + c]);
    char desc[1024];
    nds_array_codec_description(a, desc, sizeof desc);
    ck_assert_msg(strstr(desc, "sharding_indexed(chunk_shape=[4,4], codecs=[sharding_indexed("
                               "chunk_shape=[2,2]") != NULL, "%s", desc);
    nds_array_free(a);
}
END_TEST

START_TEST(sharding_one_write_per_shard) {
    racy_register("zarr.json"); /* counts the writes of other keys */
    nds_array *a;
    NDS_OK(open_spec(&a,
                     "{\"driver\":\"zarr3\",\"kvstore\":\"racy://cw/a/\",\"metadata\":%s,"
                     "\"create\":true}",
                     zarr3_array_doc("[16,16]", "uint8", "[8,8]", "0", SHARD_CODECS("[2,2]", "end"))));
    uint8_t in[256];
    for (int i = 0; i < 256; i++) in[i] = (uint8_t)(i | 1);
    race_writes = 0;
    write_all(a, in); /* 4 shards of 16 inner chunks each */
    ck_assert_int_eq(race_writes, 4);
    uint8_t box[6 * 10];
    memset(box, 9, sizeof box);
    race_writes = 0;
    write_region(a, "[5:11, 3:13]", box); /* touches all 4 shards, many inner chunks each */
    ck_assert_int_eq(race_writes, 4);
    uint8_t out[256];
    read_all(a, out);
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++)
            ck_assert_uint_eq(out[r * 16 + c],
                              r >= 5 && r < 11 && c >= 3 && c < 13 ? 9 : in[r * 16 + c]);
    nds_array_free(a);
}
END_TEST

/* A bytes-to-bytes codec that stores its input as it is and counts its encodes and decodes: how
 * many inner chunks a write encodes and decodes. */
static atomic_int counted_encodes, counted_decodes;

static int count_create(void **state, const json_object *config, size_t elem) {
    (void)config, (void)elem;
    *state = NULL;
    return 0;
}
static void count_destroy(void *state) { (void)state; }
static int count_encode(void *state, const uint8_t *in, size_t len, nds_buf *out) {
    (void)state;
    atomic_fetch_add(&counted_encodes, 1);
    if (nds_buf_reserve(out, len ? len : 1)) return NDS_ENOMEM;
    memcpy(out->data, in, len);
    out->len = len;
    return 0;
}
static int count_decode_whole(void *state, const uint8_t *in, size_t len, uint8_t *out, size_t cap,
                              size_t *out_len) {
    (void)state;
    atomic_fetch_add(&counted_decodes, 1);
    if (len > cap) return NDS_ECORRUPT;
    memcpy(out, in, len);
    *out_len = len;
    return 0;
}
static const nds_codec count_codec;
static int count_decode(void *state, nds_decode_request *req) {
    return nds_codec_decode_fallback(&count_codec, state, req, count_decode_whole);
}
static int count_config(void *state, json_object **out) {
    (void)state;
    *out = json_object_new_object();
    json_object_object_add(*out, "id", json_object_new_string("test_count"));
    return 0;
}
static const nds_codec count_codec = {.version = NDS_CODEC_VERSION, .name = "test_count",
                                      .create = count_create, .destroy = count_destroy,
                                      .encode = count_encode, .decode = count_decode,
                                      .config_json = count_config};

/* How many 4x4 inner chunks the box [r0, r1) x [c0, c1) touches. */
static int inner_touched(int r0, int r1, int c0, int c1) {
    return ((r1 - 1) / 4 - r0 / 4 + 1) * ((c1 - 1) / 4 - c0 / 4 + 1);
}

/* A write that changes part of a shard decodes only the inner chunks it changes in part and
 * encodes only those it reaches; the others keep their stored bytes. Reads after each write equal
 * a model of the array: boxes inside one inner chunk, covering inner chunks exactly, across
 * shards, strided, one that empties an inner chunk, one that empties a whole shard (deleted), and
 * random boxes, with the index at the start and at the end; the same writes through a chain that
 * cannot keep bytes (a transpose before sharding) encode every inner chunk and read back the
 * same. */
START_TEST(sharded_partial_writes_encode_what_they_touch) {
    enum { R = 16, C = 24 };
    NDS_OK(nds_codec_register(&count_codec));
    static const char *const layouts[] = {
        "[{\"name\":\"sharding_indexed\",\"configuration\":{\"chunk_shape\":[4,4],\"codecs\":["
        BYTES_LE ",{\"name\":\"numcodecs.test_count\"}],\"index_codecs\":[" BYTES_LE
        ",{\"name\":\"crc32c\"}],\"index_location\":\"start\"}}]",
        "[{\"name\":\"sharding_indexed\",\"configuration\":{\"chunk_shape\":[4,4],\"codecs\":["
        BYTES_LE ",{\"name\":\"numcodecs.test_count\"}],\"index_codecs\":[" BYTES_LE
        "],\"index_location\":\"end\"}}]",
        "[{\"name\":\"transpose\",\"configuration\":{\"order\":[1,0]}},"
        "{\"name\":\"sharding_indexed\",\"configuration\":{\"chunk_shape\":[4,4],\"codecs\":["
        BYTES_LE ",{\"name\":\"numcodecs.test_count\"}],\"index_codecs\":[" BYTES_LE "]}}]"};
    srand(5);
    for (int t = 0; t < 3; t++) {
        bool keeps = t < 2; /* the transposed chain re-encodes whole shards */
        char path[32];
        snprintf(path, sizeof path, "sh/part/%d", t);
        nds_array *a = zarr3_in_memory(path, zarr3_array_doc("[16,24]", "uint16", "[8,12]", "0", layouts[t]));
        uint16_t v[R * C], out[R * C], box[R * C];
        for (int i = 0; i < R * C; i++) v[i] = (uint16_t)(1 + i * 7);
        counted_encodes = 0;
        write_all(a, v);
        ck_assert_int_eq(counted_encodes, 24); /* 4 shards of 6 inner chunks */
        struct { int r0, r1, c0, c1, rstep, cstep, encodes, decodes; bool zero; } w[] = {
            {1, 3, 5, 7, 1, 1, 1, 1, false},    /* inside inner chunk (0, 1) of shard (0, 0) */
            {4, 8, 4, 12, 1, 1, 2, 0, false},   /* inner chunks (1, 1) and (1, 2), exactly */
            {6, 10, 10, 14, 1, 1, 4, 4, false}, /* one inner chunk in each of the 4 shards */
            {0, 16, 0, 24, 8, 12, 4, 4, false}, /* rows 0, 8, columns 0, 12: one per shard */
            {0, 16, 0, 24, 8, 8, 8, 8, false},  /* columns 0 and 8 span inner columns 0 to 2 */
            {0, 4, 0, 4, 1, 1, 0, 0, true},     /* all fill: the inner chunk is emptied */
            {8, 16, 23, 24, 1, 1, 2, 2, true},  /* column 23 of shard (1, 1) to fill */
            {8, 16, 12, 23, 1, 1, 0, 2, true},  /* the rest of it: the shard is deleted */
        };
        for (size_t k = 0; k < sizeof w / sizeof *w + 30; k++) {
            int r0, r1, c0, c1, rstep = 1, cstep = 1, want, want_dec = -1;
            bool zero = false;
            if (k < sizeof w / sizeof *w) {
                r0 = w[k].r0, r1 = w[k].r1, c0 = w[k].c0, c1 = w[k].c1;
                rstep = w[k].rstep, cstep = w[k].cstep, want = w[k].encodes, zero = w[k].zero;
                want_dec = w[k].decodes;
            } else { /* random boxes */
                r0 = rand() % R, r1 = r0 + 1 + rand() % (R - r0);
                c0 = rand() % C, c1 = c0 + 1 + rand() % (C - c0);
                want = inner_touched(r0, r1, c0, c1);
            }
            int n = 0;
            for (int r = r0; r < r1; r += rstep)
                for (int c = c0; c < c1; c += cstep) {
                    v[r * C + c] = zero ? 0 : (uint16_t)(1 + rand() % 60000);
                    box[n++] = v[r * C + c];
                }
            char region[64];
            snprintf(region, sizeof region, "[%d:%d:%d, %d:%d:%d]", r0, r1, rstep, c0, c1, cstep);
            counted_encodes = counted_decodes = 0;
            write_region(a, region, box);
            if (keeps)
                ck_assert_msg(counted_encodes == want, "layout %d, write %s: %d encodes, want %d",
                              t, region, (int)counted_encodes, want);
            if (keeps && want_dec >= 0)
                ck_assert_msg(counted_decodes == want_dec, "layout %d, write %s: %d decodes, want %d",
                              t, region, (int)counted_decodes, want_dec);
            else if (keeps)
                ck_assert_int_le(counted_decodes, want);
            else if (k == 0) /* the whole shard: its 6 inner chunks, none of them fill yet */
                ck_assert_int_eq(counted_encodes, 6);
            else
                ck_assert_int_ge(counted_encodes, want);
            read_all(a, out);
            ck_assert_msg(memcmp(out, v, sizeof v) == 0, "layout %d, after write %s", t, region);
            if (k == 7) { /* the all-fill shard is gone */
                nds_array_stats st;
                NDS_OK(nds_array_stats_get(a, &st));
                ck_assert_uint_eq(st.chunks_stored, 3);
            }
        }
        nds_array_free(a);
    }
}
END_TEST

/* Three handles of one sharded array (separate in-process locks, so their writes race through the
 * optimistic protocol) write different inner chunks of the one shard, a row at a time (each write
 * changes part of an inner chunk), every row once: no write is lost, whichever of them conflicts
 * and is redone. */
typedef struct shard_writer {
    nds_array *a;
    int col; /* inner chunk column this writer owns: columns col*4 .. col*4+3 */
    pthread_barrier_t *start;
} shard_writer;

static void *write_own_rows(void *arg) {
    shard_writer *w = arg;
    pthread_barrier_wait(w->start);
    for (int r = 0; r < 64; r++) {
        uint16_t row[4];
        for (int c = 0; c < 4; c++) row[c] = (uint16_t)(1 + r * 3 + w->col);
        char region[64];
        snprintf(region, sizeof region, "[%d:%d, %d:%d]", r, r + 1, w->col * 4, w->col * 4 + 4);
        write_region(w->a, region, row);
    }
    return NULL;
}

START_TEST(sharded_partial_writes_race) {
    static const char *spec = "{\"driver\":\"zarr3\",\"kvstore\":\"memory://sh/race/\"}";
    nds_array *first = zarr3_in_memory("sh/race", zarr3_array_doc("[64,12]", "uint16", "[64,12]", "0",
                                                       SHARD_CODECS("[4,4]", "end")));
    shard_writer w[3];
    pthread_t t[3];
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 3);
    for (int j = 0; j < 3; j++) {
        w[j].col = j;
        w[j].start = &start;
        NDS_OK(nds_array_open(&w[j].a, spec, NULL));
    }
    for (int j = 0; j < 3; j++)
        ck_assert_int_eq(pthread_create(&t[j], NULL, write_own_rows, &w[j]), 0);
    for (int j = 0; j < 3; j++) pthread_join(t[j], NULL);
    pthread_barrier_destroy(&start);
    uint16_t out[64 * 12];
    read_all(first, out);
    for (int r = 0; r < 64; r++)
        for (int c = 0; c < 12; c++)
            ck_assert_msg(out[r * 12 + c] == 1 + r * 3 + c / 4, "element (%d, %d): %u", r, c,
                          out[r * 12 + c]);
    for (int j = 0; j < 3; j++) nds_array_free(w[j].a);
    nds_array_free(first);
}
END_TEST

/* Rewrites entry i of the end index of shard key (2 inner chunks in [4] / [2]) and its crc. */
static void poke_index(const char *url, const char *key, size_t n, size_t i, uint64_t off,
                       uint64_t nb) {
    size_t len;
    uint8_t *raw = get_raw(url, key, &len);
    uint8_t *ix = raw + len - (16 * n + 4);
    put_le64(ix + 16 * i, off);
    put_le64(ix + 16 * i + 8, nb);
    put_le32(ix + 16 * n, nds_crc32c(ix, 16 * n));
    put_raw(url, key, raw, len);
    free(raw);
}

START_TEST(corrupt_shards) {
    const char *url = "memory://sh/bad/";
    nds_array *a = zarr3_in_memory("sh/bad", zarr3_array_doc("[8]", "uint16", "[4]", "0",
                                                  SHARD_CODECS("[2]", "end")));
    uint16_t in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8];
    write_all(a, in);
    size_t len;
    uint8_t *good = get_raw(url, "c/0", &len);
    /* a flipped index byte: the index crc catches it */
    uint8_t *raw = malloc(len);
    memcpy(raw, good, len);
    raw[len - 10] ^= 1;
    put_raw(url, "c/0", raw, len);
    EXPECT_ERR(read_region(a, "[0:2]", out), NDS_ECORRUPT, "shard c/0");
    ck_assert(strstr(nds_error_last()->message, "crc32c mismatch") != NULL);
    uint64_t checked, bad;
    NDS_OK(nds_array_verify(a, NULL, NULL, &checked, &bad));
    ck_assert_uint_eq(bad, 1);
    NDS_OK(read_region(a, "[4:8]", out)); /* the other shard still reads */
    /* an offset past the end, with a valid crc */
    put_raw(url, "c/0", good, len);
    poke_index(url, "c/0", 2, 1, len + 5, 10);
    EXPECT_ERR(read_region(a, "[2:4]", out), NDS_ECORRUPT, "inner chunk [1] (offset");
    ck_assert(strstr(nds_error_last()->message, "past the end of the shard") != NULL);
    ck_assert(strstr(nds_error_last()->message, "shard c/0") != NULL);
    /* an overflowing range */
    put_raw(url, "c/0", good, len);
    poke_index(url, "c/0", 2, 0, UINT64_MAX - 3, 10);
    EXPECT_ERR(read_region(a, "[0:2]", out), NDS_ECORRUPT, "past the end");
    /* offset empty but nbytes not */
    put_raw(url, "c/0", good, len);
    poke_index(url, "c/0", 2, 0, UINT64_MAX, 4);
    EXPECT_ERR(read_region(a, "[0:2]", out), NDS_ECORRUPT, "inner chunk [0]");
    /* overlapping ranges */
    put_raw(url, "c/0", good, len);
    uint64_t off0 = le64(good + len - 36), nb0 = le64(good + len - 28);
    poke_index(url, "c/0", 2, 1, off0 + 1, nb0);
    EXPECT_ERR(read_region(a, "[0:4]", out), NDS_ECORRUPT, "overlap");
    /* a range over the index */
    put_raw(url, "c/0", good, len);
    poke_index(url, "c/0", 2, 1, len - 20, 8);
    EXPECT_ERR(read_region(a, "[2:4]", out), NDS_ECORRUPT, "overlaps the shard index");
    /* identical ranges (shared bytes) are allowed: both inner chunks read the first's data */
    put_raw(url, "c/0", good, len);
    poke_index(url, "c/0", 2, 1, off0, nb0);
    NDS_OK(read_region(a, "[0:4]", out));
    ck_assert(out[2] == 1 && out[3] == 2);
    /* a truncated shard */
    put_raw(url, "c/0", good, 10);
    EXPECT_ERR(read_region(a, "[0:2]", out), NDS_ECORRUPT, "too short for its 36-byte index");
    NDS_OK(nds_array_verify(a, NULL, NULL, &checked, &bad));
    ck_assert_uint_eq(bad, 1);
    /* a corrupt inner chunk names it */
    memcpy(raw, good, len);
    raw[off0 + 1] ^= 0xff;
    put_raw(url, "c/0", raw, len);
    EXPECT_ERR(read_region(a, "[0:2]", out), NDS_ECORRUPT, "shard c/0: inner chunk [0]: zstd");
    free(raw);
    free(good);
    nds_array_free(a);
}
END_TEST

/* Arbitrary bytes as a shard never crash a read or a verify, and never read wrong data silently:
 * each either fails or returns what a valid index describes. */
START_TEST(hostile_shards) {
    const char *url = "memory://sh/host/";
    nds_array *a =
        zarr3_in_memory("sh/host", zarr3_array_doc("[16]", "uint8", "[16]", "0",
                                        "[{\"name\":\"sharding_indexed\",\"configuration\":"
                                        "{\"chunk_shape\":[4],\"codecs\":[\"bytes\"],"
                                        "\"index_codecs\":[" BYTES_LE "]}}]"));
    uint64_t seed = 12345;
    uint8_t buf[200], out[16];
    for (int iter = 0; iter < 3000; iter++) {
        size_t n = (size_t)(seed % sizeof buf);
        for (size_t i = 0; i < n; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            buf[i] = (uint8_t)(seed >> 56);
            if (iter % 3 == 0 && i >= n - 64 && (seed >> 20) % 4 == 0) buf[i] = 0xff;
            if (iter % 3 == 1 && i >= n - 64 && (seed >> 20) % 3 == 0) buf[i] = 0;
        }
        put_raw(url, "c/0", buf, n);
        int rc = read_region(a, "[0:16]", out);
        ck_assert(rc == 0 || rc == NDS_ECORRUPT);
        uint64_t checked, bad;
        NDS_OK(nds_array_verify(a, NULL, NULL, &checked, &bad));
    }
    nds_array_free(a);
}
END_TEST

/* ---- specs, groups, attributes, resize ------------------------------------------------------- */

START_TEST(spec_schema_sharded) {
    nds_array *a;
    NDS_OK(open_spec(&a, "{\"driver\":\"zarr3\",\"kvstore\":\"memory://sp/a/\",\"schema\":{"
                         "\"dtype\":\"float32\",\"domain\":{\"shape\":[100,60],\"labels\":[\"y\","
                         "\"x\"]},\"chunk_layout\":{\"chunk\":{\"shape\":[10,10]},\"write_chunk\":"
                         "{\"shape\":[50,30]}},\"codec\":\"gzip:3\",\"fill_value\":1.5},"
                         "\"create\":true}"));
    uint64_t chunks[2];
    nds_array_chunk_shape(a, chunks);
    ck_assert(chunks[0] == 50 && chunks[1] == 30);
    nds_array_free(a);
    json_object *doc = get_json("memory://sp/a/", "zarr.json");
    ck_assert_str_eq(member_str(doc, "dimension_names"), "[\"y\",\"x\"]");
    ck_assert_str_eq(member_str(doc, "fill_value"), "1.5");
    ck_assert_str_eq(member_str(doc, "data_type"), "\"float32\"");
    ck_assert_str_eq(member_str(doc, "codecs"),
                     "[{\"name\":\"sharding_indexed\",\"configuration\":{\"chunk_shape\":[10,10],"
                     "\"codecs\":[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}},"
                     "{\"name\":\"gzip\",\"configuration\":{\"level\":3}}],\"index_codecs\":["
                     "{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}},{\"name\":"
                     "\"crc32c\"}],\"index_location\":\"end\"}}]");
    ck_assert_str_eq(member_str(doc, "chunk_key_encoding"),
                     "{\"name\":\"default\",\"configuration\":{\"separator\":\"/\"}}");
    ck_assert_str_eq(member_str(doc, "attributes"), "{}");
    json_object_put(doc);
    /* reopening checks what the spec asks for */
    EXPECT_ERR(open_spec(&a, "{\"driver\":\"zarr3\",\"kvstore\":\"memory://sp/a/\",\"schema\":"
                             "{\"domain\":{\"shape\":[100,61]}}}"), NDS_EMISMATCH,
               "\"shape\" is [100,60], the spec asks for [100,61]");
    EXPECT_ERR(open_spec(&a, "{\"driver\":\"zarr3\",\"kvstore\":\"memory://sp/a/\",\"schema\":"
                             "{\"chunk_layout\":{\"read_chunk\":{\"shape\":[5,5]}}}}"),
               NDS_EMISMATCH, "\"read_chunk\" is [10,10]");
    EXPECT_ERR(open_spec(&a, "{\"driver\":\"zarr3\",\"kvstore\":\"memory://sp/a/\",\"schema\":"
                             "{\"dtype\":\"int16\"}}"), NDS_EMISMATCH, "\"data_type\"");
    EXPECT_ERR(open_spec(&a, "{\"driver\":\"zarr3\",\"kvstore\":\"memory://sp/a/\",\"metadata\":"
                             "{\"fill_value\":2}}"), NDS_EMISMATCH, "\"fill_value\" is 1.5");
    NDS_OK(open_spec(&a,
                     "{\"driver\":\"zarr3\",\"kvstore\":\"memory://sp/a/\",\"schema\":{"
                     "\"dtype\":\"float32\",\"chunk_layout\":{\"write_chunk\":{\"shape\":"
                     "[50,30]},\"read_chunk\":{\"shape\":[10,10]}}},\"metadata\":{\"fill_value\":"
                     "1.5}}"));
    nds_array_free(a);
    /* errors in the spec itself */
    EXPECT_ERR(open_spec(&a, "{\"driver\":\"zarr3\",\"kvstore\":\"memory://sp/b/\",\"schema\":{"
                             "\"dtype\":\"uint8\",\"domain\":{\"shape\":[10]},\"chunk_layout\":{"
                             "\"write_chunk\":{\"shape\":[10]},\"read_chunk\":{\"shape\":[3]}}},"
                             "\"create\":true}"), NDS_EINVAL, "does not divide");
    EXPECT_ERR(open_spec(&a, "{\"driver\":\"zarr3\",\"kvstore\":\"memory://sp/b/\",\"metadata\":{"
                             "\"shapes\":[3]},\"create\":true}"), NDS_EINVAL,
               "unknown metadata member \"shapes\"");
    EXPECT_ERR(open_spec(&a, "{\"driver\":\"zarr3\",\"kvstore\":\"memory://sp/b/\",\"schema\":{"
                             "\"dtype\":\"uint8\"},\"create\":true}"), NDS_EINVAL,
               "without a shape");
    EXPECT_ERR(open_spec(&a, "{\"driver\":\"zarr3\",\"kvstore\":\"memory://sp/b/\",\"schema\":{"
                             "\"domain\":{\"shape\":[4]}},\"create\":true}"), NDS_EINVAL,
               "without a data type");
    EXPECT_ERR(open_spec(&a, "{\"driver\":\"zarr3\",\"kvstore\":\"memory://sp/b/\",\"schema\":{"
                             "\"units\":1}}"), NDS_EUNSUPPORTED, "schema member \"units\"");
    EXPECT_ERR(open_spec(&a, "{\"driver\":\"zarr3\",\"kvstore\":\"memory://sp/none/\"}"),
               NDS_ENOTFOUND, "zarr.json not found");
    /* plain chunks from "chunk", top-level dtype, the codec "none", defaults */
    NDS_OK(open_spec(&a, "{\"driver\":\"zarr3\",\"kvstore\":\"memory://sp/c/\",\"dtype\":"
                         "\"uint16\",\"schema\":{\"domain\":{\"shape\":[7]},\"chunk_layout\":{"
                         "\"chunk\":{\"shape\":[3]}},\"codec\":\"none\"},\"create\":true}"));
    nds_array_free(a);
    doc = get_json("memory://sp/c/", "zarr.json");
    ck_assert_str_eq(member_str(doc, "codecs"),
                     "[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}}]");
    ck_assert_str_eq(member_str(doc, "chunk_grid"),
                     "{\"name\":\"regular\",\"configuration\":{\"chunk_shape\":[3]}}");
    ck_assert_str_eq(member_str(doc, "fill_value"), "0");
    json_object_put(doc);
    /* defaults: zstd level 1, chunks of about 1 MiB; blosc from a compact string */
    NDS_OK(open_spec(&a,
                     "{\"driver\":\"zarr3\",\"kvstore\":\"memory://sp/d/\",\"schema\":{"
                     "\"dtype\":\"float64\",\"domain\":{\"shape\":[1000,1000]}},\"create\":true}"));
    nds_array_chunk_shape(a, chunks);
    ck_assert_uint_le(chunks[0] * chunks[1] * 8, 1u << 20);
    ck_assert_uint_gt(chunks[0] * chunks[1] * 8, 1u << 18);
    char desc[256];
    nds_array_codec_description(a, desc, sizeof desc);
    ck_assert_str_eq(desc, "bytes(endian=little) | zstd(checksum=false, level=1)");
    nds_array_free(a);
    NDS_OK(open_spec(&a, "{\"driver\":\"zarr3\",\"kvstore\":\"memory://sp/e/\",\"schema\":{"
                         "\"dtype\":\"uint8\",\"domain\":{\"shape\":[10]},\"codec\":"
                         "\"blosc:zstd:3:-1\"},\"create\":true}"));
    nds_array_codec_description(a, desc, sizeof desc);
    ck_assert_str_eq(desc, "bytes(endian=little) | blosc(blocksize=0, clevel=3, cname=zstd, "
                           "shuffle=bitshuffle, typesize=1)");
    nds_array_free(a);
}
END_TEST

START_TEST(open_modes_and_groups) {
    NDS_OK(nds_group_create("memory://gr/", "a/b", "zarr3", 1, NULL));
    json_object *g = get_json("memory://gr/a/b/", "zarr.json");
    ck_assert_str_eq(json_object_to_json_string_ext(g, JSON_C_TO_STRING_PLAIN),
                     "{\"zarr_format\":3,\"node_type\":\"group\",\"attributes\":{}}");
    json_object_put(g);
    json_object_put(get_json("memory://gr/", "zarr.json")); /* parents too */
    json_object_put(get_json("memory://gr/a/", "zarr.json"));
    NDS_OK(nds_group_create("memory://gr/", "a/b", "zarr3", 0, NULL)); /* exists: fine */
    nds_array *a;
    EXPECT_ERR(nds_array_open(&a, "memory://gr/a/b/|zarr3:", NULL), NDS_ENOTFOUND,
               "zarr.json describes a group");
    EXPECT_ERR(open_spec(&a,
                         "{\"driver\":\"zarr3\",\"kvstore\":\"memory://gr/a/b/\",\"metadata\":%s,"
                         "\"create\":true}",
                         zarr3_array_doc("[2]", "uint8", "[2]", "0", "[\"bytes\"]")),
               NDS_EEXIST, "a group exists there");
    a = zarr3_in_memory("gr/arr", zarr3_array_doc("[2]", "uint8", "[2]", "0", "[\"bytes\"]"));
    nds_array_free(a);
    EXPECT_ERR(nds_group_create("memory://gr/", "arr", "zarr3", 0, NULL), NDS_EEXIST,
               "an array exists there");
    EXPECT_ERR(open_spec(&a,
                         "{\"driver\":\"zarr3\",\"kvstore\":\"memory://gr/arr/\",\"metadata\":%s,"
                         "\"create\":true,\"open\":false}",
                         zarr3_array_doc("[2]", "uint8", "[2]", "0", "[\"bytes\"]")),
               NDS_EEXIST, "already exists");
    /* format detection from zarr.json */
    NDS_OK(nds_array_open(&a, "memory://gr/arr/", NULL));
    ck_assert_str_eq(nds_array_format(a), "zarr3");
    nds_array_free(a);
    /* the document as printed: two-space indent, no escaped slashes */
    char *text = (char *)get_raw("memory://gr/arr/", "zarr.json", NULL);
    ck_assert_msg(strstr(text, "\n  \"node_type\": \"array\"") != NULL, "%s", text);
    ck_assert_msg(strstr(text, "\"separator\": \"/\"") != NULL, "%s", text);
    free(text);
}
END_TEST

START_TEST(attributes_and_resize) {
    nds_array *a = zarr3_in_memory("ar/a", zarr3_array_doc("[8,8]", "uint8", "[4,4]", "0",
                                                SHARD_CODECS("[2,2]", "end")));
    char *attrs;
    NDS_OK(nds_array_get_attributes(a, &attrs));
    ck_assert_str_eq(attrs, "{}");
    nds_free(attrs);
    NDS_OK(nds_array_set_attributes(a, "{\"units\":\"nm\",\"scale\":[1,2]}"));
    NDS_OK(nds_array_get_attributes(a, &attrs));
    ck_assert_str_eq(attrs, "{\"units\":\"nm\",\"scale\":[1,2]}");
    nds_free(attrs);
    json_object *doc = get_json("memory://ar/a/", "zarr.json");
    ck_assert_str_eq(member_str(doc, "attributes"), "{\"units\":\"nm\",\"scale\":[1,2]}");
    ck_assert_str_eq(member_str(doc, "shape"), "[8,8]");
    json_object_put(doc);
    uint8_t in[64], out[64];
    for (int i = 0; i < 64; i++) in[i] = (uint8_t)(i + 1);
    write_all(a, in);
    uint64_t shape[2] = {5, 3};
    NDS_OK(nds_array_resize(a, shape));
    ck_assert_ptr_null(get_raw("memory://ar/a/", "c/0/1", NULL)); /* outside: deleted */
    ck_assert_ptr_null(get_raw("memory://ar/a/", "c/1/1", NULL));
    doc = get_json("memory://ar/a/", "zarr.json");
    ck_assert_str_eq(member_str(doc, "shape"), "[5,3]");
    ck_assert_str_eq(member_str(doc, "attributes"), "{\"units\":\"nm\",\"scale\":[1,2]}");
    json_object_put(doc);
    shape[0] = shape[1] = 8;
    NDS_OK(nds_array_resize(a, shape)); /* growing again shows fill beyond the old edge */
    read_all(a, out);
    for (int r = 0; r < 8; r++)
        for (int c = 0; c < 8; c++)
            ck_assert_uint_eq(out[r * 8 + c], r < 5 && c < 3 ? in[r * 8 + c] : 0);
    EXPECT_ERR(nds_array_set_attributes(a, "[1]"), NDS_EINVAL, "json object");
    nds_array_free(a);
}
END_TEST

typedef struct racer {
    const char *spec;
    int rc;
} racer;

static void *race_open(void *arg) {
    racer *r = arg;
    nds_array *a = NULL;
    r->rc = nds_array_open(&a, r->spec, NULL);
    nds_array_free(a);
    return NULL;
}

START_TEST(create_race_threads) {
    static char spec[16384];
    snprintf(spec, sizeof spec, "{\"driver\":\"zarr3\",\"kvstore\":\"memory://race/a/\","
             "\"metadata\":%s,\"create\":true,\"open\":true}",
             zarr3_array_doc("[6]", "int16", "[3]", "0", SHARD_CODECS("[1]", "end")));
    pthread_t t[8];
    racer r[8];
    for (int i = 0; i < 8; i++) {
        r[i] = (racer){spec, -99};
        pthread_create(&t[i], NULL, race_open, &r[i]);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
        ck_assert_int_eq(r[i].rc, 0);
    }
}
END_TEST

/* ---- arrays written by zarrita's Python ancestor -------------------------------------------- */

/* A rank-0 array stored uncompressed on file, where reads copy straight from the stored bytes
 * (once indexed chunk_shape[rank - 1], out of bounds for rank 0). */
START_TEST(rank_zero_on_file) {
    char *dir = nds_test_tmpdir(), url[512];
    snprintf(url, sizeof url, "file://%s/s/", dir);
    put_text(url, "zarr.json", zarr3_array_doc("[]", "int32", "[]", "0", "[" BYTES_LE "]"));
    nds_array *a;
    NDS_OK(open_spec(&a, "%s|zarr3:", url));
    nds_box all;
    nds_box_full(&all, 0, NULL);
    int32_t v = -123456, got = 0;
    NDS_OK(nds_array_write(a, &all, &v, NULL));
    NDS_OK(nds_array_read(a, &all, &got, NULL));
    ck_assert_int_eq(got, v);
    nds_array_free(a);
    nds_test_rmtree(dir);
    free(dir);
    /* blosc-lz4, whose chunks are handed over a block at a time (the last dimension again) */
    a = zarr3_in_memory("r0/blosc", zarr3_array_doc("[]", "int32", "[]", "0",
        "[" BYTES_LE ",{\"name\":\"blosc\",\"configuration\":{\"cname\":\"lz4\",\"clevel\":5,"
        "\"shuffle\":\"shuffle\",\"typesize\":4,\"blocksize\":0}}]"));
    got = 0;
    NDS_OK(nds_array_write(a, &all, &v, NULL));
    NDS_OK(nds_array_read(a, &all, &got, NULL));
    ck_assert_int_eq(got, v);
    nds_array_free(a);
}
END_TEST

START_TEST(zarrita_fixtures) {
    static const char *const names[] = {
        "1d.chunked.compressed.sharded.i2", "1d.chunked.filled.compressed.sharded.i2",
        "1d.chunked.i2", "1d.chunked.ragged.i2", "1d.contiguous.b1", "1d.contiguous.blosc.i2",
        "1d.contiguous.compressed.sharded.b1", "1d.contiguous.compressed.sharded.f4",
        "1d.contiguous.compressed.sharded.f8", "1d.contiguous.compressed.sharded.i2",
        "1d.contiguous.compressed.sharded.i4", "1d.contiguous.compressed.sharded.u1",
        "1d.contiguous.f4.be", "1d.contiguous.f4.le", "1d.contiguous.f8", "1d.contiguous.gzip.i2",
        "1d.contiguous.i4", "1d.contiguous.raw.i2", "1d.contiguous.u1",
        "2d.chunked.compressed.sharded.filled.i2", "2d.chunked.compressed.sharded.i2",
        "2d.chunked.i2", "2d.chunked.ragged.compressed.sharded.i2", "2d.chunked.ragged.i2",
        "2d.contiguous.compressed.sharded.i2", "2d.contiguous.i2",
        "3d.chunked.compressed.sharded.i2", "3d.chunked.i2",
        "3d.chunked.mixed.compressed.sharded.i2", "3d.chunked.mixed.i2.C", "3d.chunked.mixed.i2.F",
        "3d.contiguous.compressed.sharded.i2", "3d.contiguous.i2"};
    char dir[1024];
    nds_test_fixtures_dir(dir, sizeof dir);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char url[2048], npy[2048];
        snprintf(url, sizeof url, "file://%s/zarr3_zarrita/data.zarr/%s/|zarr3:", dir, names[i]);
        snprintf(npy, sizeof npy, "%s/zarr3_zarrita/expected/%s.npy", dir, names[i]);
        nds_array *a = open_expect_npy(url, npy, names[i]);
        uint64_t checked = 0, bad = 1;
        NDS_OK(nds_array_verify(a, NULL, NULL, &checked, &bad));
        ck_assert_msg(bad == 0, "%s: %llu bad chunks", names[i], (unsigned long long)bad);
        nds_array_free(a);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("zarr3");
    TCase *tc = tcase_create("zarr3");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, crc32c_vectors);
    tcase_add_test(tc, crc32c_interleaved_blocks);
    tcase_add_test(tc, crc32c_codec);
    tcase_add_test(tc, dtypes_round_trip);
    tcase_add_test(tc, stored_byte_layout);
    tcase_add_test(tc, fill_values);
    tcase_add_test(tc, chunk_keys);
    tcase_add_test(tc, compressor_chains);
    tcase_add_test(tc, corrupt_chunks);
    tcase_add_test(tc, hostile_metadata);
    tcase_add_test(tc, sharding_index_end);
    tcase_add_test(tc, sharding_index_start);
    tcase_add_test(tc, sharding_nested);
    tcase_add_test(tc, sharding_one_write_per_shard);
    tcase_add_test(tc, sharded_partial_writes_encode_what_they_touch);
    tcase_add_test(tc, sharded_partial_writes_race);
    tcase_add_test(tc, corrupt_shards);
    tcase_add_test(tc, hostile_shards);
    tcase_add_test(tc, spec_schema_sharded);
    tcase_add_test(tc, open_modes_and_groups);
    tcase_add_test(tc, attributes_and_resize);
    tcase_add_test(tc, create_race_threads);
    tcase_add_test(tc, zarrita_fixtures);
    tcase_add_test(tc, rank_zero_on_file);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
