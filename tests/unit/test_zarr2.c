/* The zarr v2 format driver (formats/zarr2.c, formats/zarr2_metadata.c): metadata parsing and
 * printing, spec handling, chunk keys and codecs, create races, resize, attributes, groups, and
 * arrays written by zarr-python (read paths: test_zarr2_reads.c) (tests/fixtures/zarr2_zarr_python, or $NDS_FIXTURES). Mostly
 * through the public API on memory:// stores; the vtable directly where the API does not reach
 * (chunk key parsing, printing). */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "support_check.h"
#include "support_format.h"
#include "internal/json_util.h"
#include "ndstore/sys/codec.h"
#include "ndstore/sys/format.h"
#include "../../formats/zarr2_metadata.h"

extern const nds_format nds_format_zarr2;

/* ---- helpers --------------------------------------------------------------------------------- */

static bool host_big_endian(void) {
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 0;
}

/* ---- dtypes ---------------------------------------------------------------------------------- */

static const struct {
    const char *zarr;
    nds_dtype type;
} dtypes[] = {
    {"|b1", NDS_BOOL},        {"|i1", NDS_INT8},          {"|u1", NDS_UINT8},
    {"<i2", NDS_INT16},       {">i2", NDS_INT16},         {"<i4", NDS_INT32},
    {">i4", NDS_INT32},       {"<i8", NDS_INT64},         {">i8", NDS_INT64},
    {"<u2", NDS_UINT16},      {">u2", NDS_UINT16},        {"<u4", NDS_UINT32},
    {">u4", NDS_UINT32},      {"<u8", NDS_UINT64},        {">u8", NDS_UINT64},
    {"<f2", NDS_FLOAT16},     {">f2", NDS_FLOAT16},       {"<f4", NDS_FLOAT32},
    {">f4", NDS_FLOAT32},     {"<f8", NDS_FLOAT64},       {">f8", NDS_FLOAT64},
    {"<c8", NDS_COMPLEX64},   {">c8", NDS_COMPLEX64},     {"<c16", NDS_COMPLEX128},
    {">c16", NDS_COMPLEX128}, {"bfloat16", NDS_BFLOAT16},
};
#define NDTYPES (sizeof dtypes / sizeof dtypes[0])

/* Every dtype and byte order: stored typestring, raw stored bytes, write/read round trip, reopen.
 */
START_TEST(dtype_round_trips) {
    for (size_t i = 0; i < NDTYPES; i++) {
        char path[64], url[80], members[256];
        snprintf(path, sizeof path, "dtypes/%zu", i);
        snprintf(url, sizeof url, "memory://%s/", path);
        snprintf(members, sizeof members,
                 "\"shape\":[5,3],\"chunks\":[2,2],\"dtype\":\"%s\","
                 "\"compressor\":null,\"fill_value\":null",
                 dtypes[i].zarr);
        nds_array *a = zarr2_in_memory(path, members);
        ck_assert_int_eq(nds_array_dtype(a), dtypes[i].type);
        size_t item = nds_dtype_size(dtypes[i].type), unit = nds_dtype_swap_unit(dtypes[i].type);
        uint8_t in[15 * 16], out[15 * 16];
        for (size_t j = 0; j < sizeof in; j++)
            in[j] = dtypes[i].type == NDS_BOOL ? j % 2 : (uint8_t)(j * 37 + 11);
        write_all(a, in);
        read_all(a, out);
        ck_assert_msg(memcmp(in, out, 15 * item) == 0, "dtype %s: read differs", dtypes[i].zarr);
        json_object *z = get_json(url, ".zarray");
        char want[32];
        snprintf(want, sizeof want, "\"%s\"", dtypes[i].zarr);
        ck_assert_str_eq(member_str(z, "dtype"), want);
        ck_assert_str_eq(member_str(z, "fill_value"), "null");
        json_object_put(z);
        /* Chunk 0.0 holds elements (0,0) (0,1) (1,0) (1,1) = in[0], in[1], in[3], in[4]. */
        size_t len;
        char *raw = get_raw(url, "0.0", &len);
        ck_assert_ptr_nonnull(raw);
        ck_assert_uint_eq(len, 4 * item);
        bool swapped = dtypes[i].zarr[0] == (host_big_endian() ? '<' : '>') && item > 1;
        for (size_t b = 0; b < item; b++) {
            size_t u = b / unit * unit, k = b % unit, src = swapped ? u + unit - 1 - k : b;
            ck_assert_msg((uint8_t)raw[b] == in[src], "dtype %s: stored byte %zu", dtypes[i].zarr,
                          b);
            ck_assert_msg((uint8_t)raw[2 * item + b] == in[3 * item + src], "dtype %s: byte order",
                          dtypes[i].zarr);
        }
        free(raw);
        nds_array_free(a);
        NDS_OK(open_spec(&a,
                         "{\"driver\":\"zarr\",\"kvstore\":\"%s\",\"metadata\":{\"dtype\":\"%s\"}}",
                         url, dtypes[i].zarr));
        read_all(a, out);
        ck_assert(memcmp(in, out, 15 * item) == 0);
        nds_array_free(a);
    }
}
END_TEST

/* The metadata document printed for every dtype parses back to the same struct. */
START_TEST(metadata_parse_print_round_trip) {
    for (size_t i = 0; i < NDTYPES; i++) {
        for (int order = 0; order < 2; order++) {
            char text[512];
            snprintf(
                text, sizeof text,
                "{\"zarr_format\":2,\"shape\":[7,0,3],\"chunks\":[2,1,3],\"dtype\":\"%s\","
                "\"fill_value\":1,\"order\":\"%s\",\"compressor\":{\"id\":\"zstd\",\"level\":3},"
                "\"filters\":[],\"dimension_separator\":\"%s\"}",
                dtypes[i].zarr, order ? "F" : "C", order ? "/" : ".");
            json_object *doc = json_tokener_parse(text);
            nds_zarr2_meta m, m2;
            NDS_OK(nds_zarr2_meta_parse(doc, "test", &m));
            ck_assert_int_eq(m.dtype, dtypes[i].type);
            ck_assert_uint_eq(m.rank, 3);
            ck_assert_uint_eq(m.chunk_nbytes, 6 * nds_dtype_size(m.dtype));
            ck_assert_int_eq(m.fortran, order);
            ck_assert_int_eq(m.separator, order ? '/' : '.');
            json_object *back = nds_zarr2_meta_to_json(&m);
            nds_buf printed = {0};
            NDS_OK(nds_json_print(back, &nds_json_style_python, &printed));
            json_tokener *tok = json_tokener_new();
            json_object *again =
                json_tokener_parse_ex(tok, (const char *)printed.data, (int)printed.len);
            json_tokener_free(tok);
            ck_assert_ptr_nonnull(again);
            NDS_OK(nds_zarr2_meta_parse(again, "test", &m2));
            ck_assert_int_eq(m2.dtype, m.dtype);
            ck_assert_int_eq(m2.byte_order, m.byte_order);
            ck_assert(memcmp(m2.fill, m.fill, sizeof m.fill) == 0);
            ck_assert(memcmp(m2.chunks, m.chunks, sizeof m.chunks) == 0);
            NDS_OK(nds_zarr2_meta_check(&m, doc, "test"));
            ck_assert_str_eq(member_str(again, "dtype"), member_str(doc, "dtype"));
            nds_zarr2_meta_dispose(&m);
            nds_zarr2_meta_dispose(&m2);
            json_object_put(doc);
            json_object_put(back);
            json_object_put(again);
            nds_buf_dispose(&printed);
        }
    }
}
END_TEST

/* ---- fill values ----------------------------------------------------------------------------- */

/* Creates a 1-element array with the given dtype and fill JSON; returns it, stored fill text in
 * out. */
static nds_array *fill_array(const char *path, const char *dtype, const char *fill, char *stored,
                             size_t cap) {
    char members[256], url[128];
    snprintf(members, sizeof members,
             "\"shape\":[3],\"chunks\":[2],\"dtype\":\"%s\",\"fill_value\":%s", dtype, fill);
    nds_array *a = zarr2_in_memory(path, members);
    snprintf(url, sizeof url, "memory://%s/", path);
    json_object *z = get_json(url, ".zarray");
    snprintf(stored, cap, "%s", member_str(z, "fill_value"));
    json_object_put(z);
    return a;
}

START_TEST(fill_values) {
    char stored[64];
    double d[3];
    nds_array *a = fill_array("fill/nan", "<f8", "\"NaN\"", stored, sizeof stored);
    ck_assert_str_eq(stored, "\"NaN\"");
    read_all(a, d);
    ck_assert(isnan(d[0]) && isnan(d[2]));
    nds_array_free(a);

    float f[3];
    a = fill_array("fill/inf", ">f4", "\"Infinity\"", stored, sizeof stored);
    ck_assert_str_eq(stored, "\"Infinity\"");
    read_all(a, f);
    ck_assert(isinf(f[1]) && f[1] > 0);
    nds_array_free(a);

    a = fill_array("fill/ninf", "<f8", "\"-Infinity\"", stored, sizeof stored);
    read_all(a, d);
    ck_assert(isinf(d[0]) && d[0] < 0);
    nds_array_free(a);

    int64_t i64[3];
    a = fill_array("fill/min", "<i8", "-9223372036854775808", stored, sizeof stored);
    ck_assert_str_eq(stored, "-9223372036854775808");
    read_all(a, i64);
    ck_assert(i64[2] == INT64_MIN);
    nds_array_free(a);

    a = fill_array("fill/max", ">i8", "9223372036854775807", stored, sizeof stored);
    read_all(a, i64);
    ck_assert(i64[0] == INT64_MAX);
    nds_array_free(a);

    uint64_t u64[3];
    a = fill_array("fill/umax", "<u8", "18446744073709551615", stored, sizeof stored);
    ck_assert_str_eq(stored, "18446744073709551615");
    read_all(a, u64);
    ck_assert(u64[1] == UINT64_MAX);
    nds_array_free(a);

    int8_t i8[3];
    a = fill_array("fill/i8", "|i1", "-128", stored, sizeof stored);
    read_all(a, i8);
    ck_assert_int_eq(i8[0], -128);
    nds_array_free(a);

    int32_t i32[3] = {5, 5, 5};
    a = fill_array("fill/null", "<i4", "null", stored, sizeof stored);
    ck_assert_str_eq(stored, "null");
    read_all(a, i32);
    ck_assert(i32[0] == 0 && i32[2] == 0);
    nds_array_free(a);

    float c[6];
    a = fill_array("fill/complex", "<c8", "[1.5, \"NaN\"]", stored, sizeof stored);
    read_all(a, c);
    ck_assert(c[0] == 1.5f && isnan(c[1]));
    nds_array_free(a);

    uint8_t b[3];
    a = fill_array("fill/bool", "|b1", "true", stored, sizeof stored);
    ck_assert_str_eq(stored, "true");
    read_all(a, b);
    ck_assert(b[0] == 1 && b[2] == 1);
    nds_array_free(a);
}
END_TEST

/* Without a fill value the array is created with 0 (0.0 for floats), not null. */
START_TEST(fill_default_is_zero) {
    nds_array *a = zarr2_in_memory("filldef/i", "\"shape\":[3],\"dtype\":\"<i2\"");
    json_object *z = get_json("memory://filldef/i/", ".zarray");
    ck_assert_str_eq(member_str(z, "fill_value"), "0");
    json_object_put(z);
    nds_array_free(a);
    a = zarr2_in_memory("filldef/f", "\"shape\":[3],\"dtype\":\"<f4\"");
    char *raw = get_raw("memory://filldef/f/", ".zarray", NULL);
    ck_assert_ptr_nonnull(strstr(raw, "\"fill_value\": 0.0,"));
    free(raw);
    nds_array_free(a);
}
END_TEST

START_TEST(fill_out_of_range_rejected) {
    static const struct {
        const char *dtype, *fill;
    } bad[] = {
        {"|u1", "256"},    {"|i1", "-129"}, {"<u2", "-1"},      {"<i8", "9223372036854775808"},
        {"<i4", "1.5"},    {"|b1", "2"},    {"<f4", "\"abc\""}, {"<i2", "\"NaN\""},
        {"<f8", "[1, 2]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        nds_array *a;
        EXPECT_ERR(
            open_spec(&a,
                      "{\"driver\":\"zarr\",\"kvstore\":\"memory://fillbad/%zu/\",\"metadata\":"
                      "{\"shape\":[3],\"dtype\":\"%s\",\"fill_value\":%s},\"create\":true}",
                      i, bad[i].dtype, bad[i].fill),
            NDS_EFORMAT, "fill_value");
        ck_assert_ptr_null(a);
        /* Nothing was written. */
        char url[64];
        snprintf(url, sizeof url, "memory://fillbad/%zu/", i);
        ck_assert_ptr_null(get_raw(url, ".zarray", NULL));
        /* The same value in a stored .zarray is refused too. */
        char text[256];
        snprintf(text, sizeof text,
                 "{\"zarr_format\":2,\"shape\":[3],\"chunks\":[3],\"dtype\":\"%s\","
                 "\"fill_value\":%s,\"order\":\"C\",\"compressor\":null,\"filters\":null}",
                 bad[i].dtype, bad[i].fill);
        put_text(url, ".zarray", text);
        snprintf(text, sizeof text, "%s|zarr:", url);
        EXPECT_ERR(nds_array_open(&a, text, NULL), NDS_EFORMAT, "fill_value");
    }
}
END_TEST

/* ---- orders and separators ------------------------------------------------------------------- */

START_TEST(fortran_order_raw_layout) {
    nds_array *a = zarr2_in_memory("order/f", "\"shape\":[3,4],\"chunks\":[3,4],\"dtype\":\"<u2\","
                                          "\"order\":\"F\",\"compressor\":null");
    uint16_t v[12], out[12];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) v[i * 4 + j] = (uint16_t)(i * 10 + j);
    write_all(a, v);
    size_t len;
    char *raw = get_raw("memory://order/f/", "0.0", &len);
    ck_assert_uint_eq(len, 24);
    for (int k = 0; k < 12; k++) {
        uint16_t s = (uint16_t)((uint8_t)raw[2 * k] | (uint8_t)raw[2 * k + 1] << 8);
        ck_assert_uint_eq(s, (k % 3) * 10 + k / 3); /* first dimension fastest */
    }
    free(raw);
    read_all(a, out);
    ck_assert(memcmp(v, out, sizeof v) == 0);
    nds_array_free(a);
}
END_TEST

/* F order + big-endian + zstd on ragged chunks: read back, and one chunk decoded by hand. */
START_TEST(fortran_big_endian_compressed) {
    nds_array *a =
        zarr2_in_memory("order/fbe", "\"shape\":[5,6,7],\"chunks\":[2,3,4],\"dtype\":\">i4\","
                                 "\"order\":\"F\",\"compressor\":{\"id\":\"zstd\",\"level\":3}");
    int32_t v[210], out[210];
    for (int i = 0; i < 210; i++) v[i] = i * 1000003 - 77;
    write_all(a, v);
    nds_io_options io = NDS_IO_OPTIONS_INIT;
    io.threads = 4;
    nds_box box;
    nds_box_full(&box, 3, (const uint64_t[]){5, 6, 7});
    NDS_OK(nds_array_read(a, &box, out, &io));
    ck_assert(memcmp(v, out, sizeof v) == 0);
    size_t len;
    char *raw = get_raw("memory://order/fbe/", "1.1.0", &len);
    const nds_codec *zstd = nds_codec_find("zstd");
    void *st;
    json_object *cfg = json_tokener_parse("{\"id\":\"zstd\"}");
    NDS_OK(zstd->create(&st, cfg, 4));
    uint8_t dec[96];
    size_t got;
    NDS_OK(nds_codec_decode(zstd, st, (const uint8_t *)raw, len, dec, sizeof dec, &got));
    ck_assert_uint_eq(got, 96);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++) {
                const uint8_t *p = dec + 4 * (i + 2 * (j + 3 * k));
                int32_t s = (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
                                      (uint32_t)p[2] << 8 | p[3]);
                ck_assert_int_eq(s, v[(2 + i) * 42 + (3 + j) * 7 + k]);
            }
    zstd->destroy(st);
    json_object_put(cfg);
    free(raw);
    nds_array_free(a);
}
END_TEST

START_TEST(slash_separator) {
    nds_array *a = zarr2_in_memory("sep/slash", "\"shape\":[4,4],\"chunks\":[2,2],\"dtype\":\"|u1\","
                                            "\"dimension_separator\":\"/\"");
    uint8_t v[16];
    for (int i = 0; i < 16; i++) v[i] = (uint8_t)(i + 1);
    write_all(a, v);
    char *raw = get_raw("memory://sep/slash/", "0/1", NULL);
    ck_assert_ptr_nonnull(raw);
    free(raw);
    ck_assert_ptr_null(get_raw("memory://sep/slash/", "0.1", NULL));
    nds_array_stats st;
    NDS_OK(nds_array_stats_get(a, &st));
    ck_assert_uint_eq(st.chunks_total, 4);
    ck_assert_uint_eq(st.chunks_stored, 4);
    nds_array_free(a);
    a = zarr2_in_memory("sep/dot", "\"shape\":[4,4],\"chunks\":[2,2],\"dtype\":\"|u1\"");
    write_all(a, v);
    raw = get_raw("memory://sep/dot/", "1.0", NULL);
    ck_assert_ptr_nonnull(raw);
    free(raw);
    json_object *z = get_json("memory://sep/dot/", ".zarray");
    ck_assert_str_eq(member_str(z, "dimension_separator"), "\".\"");
    json_object_put(z);
    nds_array_free(a);
}
END_TEST

/* ---- chunk keys (vtable) --------------------------------------------------------------------- */

static void *open_vtable(const char *url, const char *zarray, nds_kvstore **kv,
                         nds_array_meta *meta) {
    NDS_OK(nds_kvstore_open(kv, url, NULL));
    if (zarray) NDS_OK(nds_kvstore_write(*kv, ".zarray", zarray, strlen(zarray), NULL, NULL));
    void *st = NULL;
    NDS_OK(nds_format_zarr2.open(*kv, NULL, NDS_OPEN_EXISTING, &st, meta));
    return st;
}

START_TEST(chunk_keys) {
    nds_kvstore *kv;
    nds_array_meta meta;
    void *st = open_vtable("memory://keys/a/",
                           "{\"zarr_format\":2,\"shape\":[10,20],\"chunks\":[3,7],"
                           "\"dtype\":\"<i2\",\"fill_value\":0,\"order\":\"C\",\"compressor\":null,"
                           "\"filters\":null}",
                           &kv, &meta);
    ck_assert_uint_eq(meta.rank, 2);
    ck_assert_uint_eq(meta.chunk_shape[1], 7);
    char key[64];
    NDS_OK(nds_format_zarr2.chunk_key(st, (const uint64_t[]){3, 2}, key, sizeof key));
    ck_assert_str_eq(key, "3.2");
    ck_assert_int_eq(nds_format_zarr2.chunk_key(st, (const uint64_t[]){3, 2}, key, 3), NDS_ERANGE);
    uint64_t cell[2];
    ck_assert_int_eq(nds_format_zarr2.parse_chunk_key(st, "3.2", cell), 1);
    ck_assert(cell[0] == 3 && cell[1] == 2);
    ck_assert_int_eq(nds_format_zarr2.parse_chunk_key(st, "0.0", cell), 1);
    static const char *const bad[] = {
        "4.0",  "3.3",  "03.1", ".zarray", ".zattrs", "0.0.0",
        "0",    "0.",   ".0",   "",        "0/0",     "18446744073709551616.0",
        "+1.0", "1.0 ", "-1.0", "1..0",    "a.b",     "0.0/"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(nds_format_zarr2.parse_chunk_key(st, bad[i], cell) == 0, "accepted \"%s\"",
                      bad[i]);
    nds_format_zarr2.close(st);
    nds_kvstore_free(kv);

    st = open_vtable("memory://keys/slash/",
                     "{\"zarr_format\":2,\"shape\":[10,20,5],\"chunks\":[3,7,5],"
                     "\"dtype\":\"<i2\",\"fill_value\":0,\"order\":\"C\",\"compressor\":null,"
                     "\"filters\":null,\"dimension_separator\":\"/\"}",
                     &kv, &meta);
    NDS_OK(nds_format_zarr2.chunk_key(st, (const uint64_t[]){1, 2, 0}, key, sizeof key));
    ck_assert_str_eq(key, "1/2/0");
    uint64_t cell3[3];
    ck_assert_int_eq(nds_format_zarr2.parse_chunk_key(st, "1/2/0", cell3), 1);
    ck_assert_int_eq(nds_format_zarr2.parse_chunk_key(st, "1.2.0", cell3), 0);
    ck_assert_int_eq(nds_format_zarr2.parse_chunk_key(st, "1/2/1", cell3), 0);
    nds_format_zarr2.close(st);
    nds_kvstore_free(kv);

    st = open_vtable("memory://keys/r0/",
                     "{\"zarr_format\":2,\"shape\":[],\"chunks\":[],\"dtype\":\"<f8\","
                     "\"fill_value\":null,\"order\":\"C\",\"compressor\":null,\"filters\":null}",
                     &kv, &meta);
    ck_assert_uint_eq(meta.rank, 0);
    NDS_OK(nds_format_zarr2.chunk_key(st, NULL, key, sizeof key));
    ck_assert_str_eq(key, "0");
    ck_assert_int_eq(nds_format_zarr2.parse_chunk_key(st, "0", cell), 1);
    ck_assert_int_eq(nds_format_zarr2.parse_chunk_key(st, "0.0", cell), 0);
    ck_assert_int_eq(nds_format_zarr2.parse_chunk_key(st, "1", cell), 0);
    nds_format_zarr2.close(st);
    nds_kvstore_free(kv);
}
END_TEST

START_TEST(rank_zero_array) {
    nds_array *a = zarr2_in_memory("rank0", "\"shape\":[],\"dtype\":\"<f8\",\"fill_value\":1.5");
    ck_assert_uint_eq(nds_array_rank(a), 0);
    double v = 0;
    read_all(a, &v);
    ck_assert(v == 1.5);
    v = -2.25;
    write_all(a, &v);
    double out = 0;
    read_all(a, &out);
    ck_assert(out == -2.25);
    char *raw = get_raw("memory://rank0/", "0", NULL);
    ck_assert_ptr_nonnull(raw);
    free(raw);
    json_object *z = get_json("memory://rank0/", ".zarray");
    ck_assert_str_eq(member_str(z, "chunks"), "[]");
    json_object_put(z);
    nds_array_free(a);
}
END_TEST

/* ---- hostile metadata ------------------------------------------------------------------------ */

#define BASE_REST "\"order\":\"C\",\"compressor\":null,\"filters\":null"

static const struct {
    const char *text;
    int code;
    const char *message;
} hostile[] = {
    {"{", NDS_EFORMAT, "invalid json"},
    {"", NDS_EFORMAT, "invalid json"},
    {"{\"zarr_format\":2} trailing", NDS_EFORMAT, "invalid json"},
    {"[]", NDS_EFORMAT, "expected a json object"},
    {"42", NDS_EFORMAT, "expected a json object"},
    {"null", NDS_EFORMAT, "expected a json object"},
    {"\"text\"", NDS_EFORMAT, "expected a json object"},
    {"{}", NDS_EFORMAT, "missing member \"zarr_format\""},
    {"{\"zarr_format\":3}", NDS_EFORMAT, "\"zarr_format\" must be 2"},
    {"{\"zarr_format\":\"2\"}", NDS_EFORMAT, "\"zarr_format\" must be 2"},
    {"{\"zarr_format\":2}", NDS_EFORMAT, "missing member \"shape\""},
    {"{\"zarr_format\":2,\"shape\":\"x\"}", NDS_EFORMAT,
     "\"shape\" must be an array of non-negative integers"},
    {"{\"zarr_format\":2,\"shape\":[-1]}", NDS_EFORMAT,
     "\"shape\" must be an array of non-negative integers"},
    {"{\"zarr_format\":2,\"shape\":[1.5]}", NDS_EFORMAT, "\"shape\" must be an array"},
    {"{\"zarr_format\":2,\"shape\":[true]}", NDS_EFORMAT, "\"shape\" must be an array"},
    {"{\"zarr_format\":2,\"shape\":[null]}", NDS_EFORMAT, "\"shape\" must be an array"},
    {"{\"zarr_format\":2,\"shape\":[1],\"chunks\":[0]}", NDS_EFORMAT,
     "\"chunks\" must be an array of positive integers"},
    {"{\"zarr_format\":2,\"shape\":[1],\"chunks\":{}}", NDS_EFORMAT, "\"chunks\" must be an array"},
    {"{\"zarr_format\":2,\"shape\":[1,2],\"chunks\":[1],\"dtype\":\"<i2\",\"fill_value\":"
     "0," BASE_REST "}",
     NDS_EFORMAT, "\"chunks\" has 1 entries but \"shape\" has 2"},
    {"{\"zarr_format\":2,\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,"
     "1,1]}",
     NDS_ELIMIT, "\"shape\" has 33 dimensions; ndstore supports at most 32"},
    {"{\"zarr_format\":2,\"shape\":[1],\"chunks\":[4294967296],\"dtype\":\"<i4\",\"fill_value\":"
     "0," BASE_REST "}",
     NDS_ELIMIT, "larger than 2 GiB"},
    {"{\"zarr_format\":2,\"shape\":[1,1],\"chunks\":[4294967296,4294967296],\"dtype\":\"<c16\","
     "\"fill_value\":0," BASE_REST "}",
     NDS_ELIMIT, "larger than 2 GiB"},
    {"{\"zarr_format\":2,\"shape\":[4294967296,4294967296,2],\"chunks\":[1,1,1],\"dtype\":\"|u1\","
     "\"fill_value\":0," BASE_REST "}",
     NDS_ELIMIT, "\"shape\" has more than 2^64 elements"},
    {"{\"zarr_format\":2,\"shape\":[1],\"chunks\":[1],\"dtype\":\"|S0\"}", NDS_EFORMAT,
     "\"dtype\" \"|S0\" is not a numpy string typestring"},
    {"{\"zarr_format\":2,\"shape\":[1],\"chunks\":[1],\"dtype\":\"<U7\",\"fill_value\":0,"
     BASE_REST "}", NDS_EFORMAT, "\"fill_value\" of a unicode string array must be a string"},
    {"{\"zarr_format\":2,\"shape\":[1],\"chunks\":[1],\"dtype\":\"|O\",\"fill_value\":0,"
     "\"order\":\"C\",\"compressor\":null,\"filters\":null}",
     NDS_EUNSUPPORTED, "dtype \"|O\" (python objects) with no object codec is not supported"},
    {"{\"zarr_format\":2,\"shape\":[1],\"chunks\":[1],\"dtype\":\"<M8\"}", NDS_EUNSUPPORTED,
     "dtype \"<M8\" is not supported (datetimes without a unit)"},
    {"{\"zarr_format\":2,\"shape\":[1],\"chunks\":[1],\"dtype\":\"|V8\"}", NDS_EUNSUPPORTED,
     "dtype \"|V8\" is not supported (void or structured elements)"},
    {"{\"zarr_format\":2,\"shape\":[1],\"chunks\":[1],\"dtype\":\"<f16\"}", NDS_EUNSUPPORTED,
     "dtype \"<f16\" is not supported"},
    {"{\"zarr_format\":2,\"shape\":[1],\"chunks\":[1],\"dtype\":[[\"a\",\"<i4\"],[\"b\",\"<f8\"]]}",
     NDS_EUNSUPPORTED, "structured dtype [[\"a\",\"<i4\"],[\"b\",\"<f8\"]] is not supported"},
    {"{\"zarr_format\":2,\"shape\":[1],\"chunks\":[1],\"dtype\":\"int\"}", NDS_EFORMAT,
     "\"dtype\" \"int\" is not a numpy type string"},
    {"{\"zarr_format\":2,\"shape\":[1],\"chunks\":[1],\"dtype\":\"|i2\"}", NDS_EFORMAT,
     "only valid for 1-byte types"},
    {"{\"zarr_format\":2,\"shape\":[1],\"chunks\":[1],\"dtype\":5}", NDS_EFORMAT,
     "\"dtype\" must be a string"},
    {"{\"zarr_format\":2,\"shape\":[1],\"chunks\":[1],\"dtype\":\"<i2\",\"fill_value\":\"x\"}",
     NDS_EFORMAT, "fill_value"},
    {"{\"zarr_format\":2,\"shape\":[1],\"chunks\":[1],\"dtype\":\"<i2\",\"fill_value\":0,\"order\":"
     "\"X\"}",
     NDS_EFORMAT, "\"order\" must be \"C\" or \"F\""},
    {"{\"zarr_format\":2,\"shape\":[1],\"chunks\":[1],\"dtype\":\"<i2\",\"fill_value\":0,\"order\":"
     "\"C\","
     "\"compressor\":{\"id\":\"lzma\"},\"filters\":null}",
     NDS_EUNSUPPORTED, "compressor \"lzma\" is not supported"},
    {"{\"zarr_format\":2,\"shape\":[1],\"chunks\":[1],\"dtype\":\"<i2\",\"fill_value\":0,\"order\":"
     "\"C\","
     "\"compressor\":\"zstd\",\"filters\":null}",
     NDS_EFORMAT, "\"compressor\" must be null or an object"},
    {"{\"zarr_format\":2,\"shape\":[1],\"chunks\":[1],\"dtype\":\"<i2\",\"fill_value\":0,\"order\":"
     "\"C\","
     "\"compressor\":{\"level\":1},\"filters\":null}",
     NDS_EFORMAT, "\"compressor\" must be null or an object"},
    {"{\"zarr_format\":2,\"shape\":[1],\"chunks\":[1],\"dtype\":\"<i2\",\"fill_value\":0,\"order\":"
     "\"C\","
     "\"compressor\":{\"id\":\"zstd\",\"level\":\"high\"},\"filters\":null}",
     NDS_EFORMAT, "compressor"},
    {"{\"zarr_format\":2,\"shape\":[1],\"chunks\":[1],\"dtype\":\"<i2\",\"fill_value\":0,\"order\":"
     "\"C\","
     "\"compressor\":null,\"filters\":[{\"id\":\"delta\"},{\"id\":\"vlen-utf8\"}]}",
     NDS_EFORMAT, "filter \"vlen-utf8\" (\"filters\"[1]) needs dtype \"|O\" and must come first"},
    {"{\"zarr_format\":2,\"shape\":[1],\"chunks\":[1],\"dtype\":\"<i2\",\"fill_value\":0,\"order\":"
     "\"C\","
     "\"compressor\":null,\"filters\":5}",
     NDS_EFORMAT, "\"filters\" must be null or an array"},
    {"{\"zarr_format\":2,\"shape\":[1],\"chunks\":[1],\"dtype\":\"<i2\",\"fill_value\":0,\"order\":"
     "\"C\","
     "\"compressor\":null}",
     NDS_EFORMAT, "missing member \"filters\""},
    {"{\"zarr_format\":2,\"shape\":[1],\"chunks\":[1],\"dtype\":\"<i2\",\"fill_value\":0," BASE_REST
     ",\"dimension_separator\":\"-\"}",
     NDS_EFORMAT, "\"dimension_separator\" must be \".\" or \"/\""},
};

/* Each bad document, through the public API and the vtable: the right code and a message naming the
 * member and the document. */
START_TEST(hostile_zarray) {
    for (size_t i = 0; i < sizeof hostile / sizeof hostile[0]; i++) {
        char url[64], spec[96], where[96];
        snprintf(url, sizeof url, "memory://hostile/%zu/", i);
        snprintf(spec, sizeof spec, "%s|zarr:", url);
        snprintf(where, sizeof where, ".zarray of %s: ", url);
        put_text(url, ".zarray", hostile[i].text);
        nds_array *a = NULL;
        int rc = nds_array_open(&a, spec, NULL);
        const char *msg = nds_error_last()->message;
        ck_assert_msg(rc == hostile[i].code, "case %zu: expected %d, got %d (%s)", i,
                      hostile[i].code, rc, msg);
        ck_assert_msg(strstr(msg, hostile[i].message), "case %zu: \"%s\" lacks \"%s\"", i, msg,
                      hostile[i].message);
        ck_assert_msg(strstr(msg, where), "case %zu: \"%s\" does not name the document", i, msg);
        ck_assert_ptr_null(a);
        nds_kvstore *kv;
        nds_array_meta meta;
        void *st = (void *)1;
        NDS_OK(nds_kvstore_open(&kv, url, NULL));
        ck_assert_int_eq(nds_format_zarr2.open(kv, NULL, NDS_OPEN_EXISTING, &st, &meta),
                         hostile[i].code);
        ck_assert_ptr_null(st);
        nds_kvstore_free(kv);
    }
}
END_TEST

/* A document nested far deeper than any metadata is refused, not recursed into. */
START_TEST(hostile_deep_nesting) {
    size_t depth = 100000;
    char *text = malloc(2 * depth + 1);
    memset(text, '[', depth);
    memset(text + depth, ']', depth);
    text[2 * depth] = 0;
    put_text("memory://deep/", ".zarray", text);
    free(text);
    nds_array *a;
    EXPECT_ERR(nds_array_open(&a, "memory://deep/|zarr:", NULL), NDS_EFORMAT,
               ".zarray of memory://deep/");
}
END_TEST

/* ---- corrupt chunks -------------------------------------------------------------------------- */

static void expect_corrupt(nds_array *a, const char *substr) {
    int32_t out[4];
    nds_box box;
    nds_box_full(&box, 1, (const uint64_t[]){4});
    EXPECT_ERR(nds_array_read(a, &box, out, NULL), NDS_ECORRUPT, substr);
}

static void encode_with(const char *codec_json, const void *in, size_t len, nds_buf *out) {
    json_object *cfg = json_tokener_parse(codec_json);
    json_object *id = json_object_object_get(cfg, "id");
    const nds_codec *c = nds_codec_find(json_object_get_string(id));
    void *st;
    NDS_OK(c->create(&st, cfg, 4));
    NDS_OK(c->encode(st, in, len, out));
    c->destroy(st);
    json_object_put(cfg);
}

START_TEST(corrupt_chunks) {
    nds_array *a = zarr2_in_memory(
        "corrupt/raw", "\"shape\":[4],\"chunks\":[4],\"dtype\":\"<i4\",\"compressor\":null");
    put_raw("memory://corrupt/raw/", "0", "abc", 3);
    expect_corrupt(a, "expected 16 bytes, found 3");
    put_raw("memory://corrupt/raw/", "0", "0123456789abcdefg", 17);
    expect_corrupt(a, "expected 16 bytes, found 17");
    put_raw("memory://corrupt/raw/", "0", "", 0);
    expect_corrupt(a, "expected 16 bytes, found 0");
    /* A region reads only the bytes that hold it: a value that ends before them, or after, is
     * still caught. */
    int32_t one;
    nds_box box;
    uint64_t shape[1] = {4};
    NDS_OK(nds_box_parse(&box, "[3:4]", 1, shape));
    put_raw("memory://corrupt/raw/", "0", "abc", 3);
    EXPECT_ERR(nds_array_read(a, &box, &one, NULL), NDS_ECORRUPT, "expected 16 bytes, found 12 or fewer");
    put_raw("memory://corrupt/raw/", "0", "0123456789abcdefg", 17);
    EXPECT_ERR(nds_array_read(a, &box, &one, NULL), NDS_ECORRUPT, "expected 16 bytes, found 17");
    put_raw("memory://corrupt/raw/", "0", "0123456789abcdef", 16);
    NDS_OK(nds_array_read(a, &box, &one, NULL));
    ck_assert_int_eq(one, 0x66656463); /* "cdef", little-endian */
    nds_array_free(a);

    static const char *const codecs[] = {"{\"id\":\"zstd\",\"level\":1}",
                                         "{\"id\":\"blosc\"}",
                                         "{\"id\":\"zlib\"}",
                                         "{\"id\":\"gzip\"}",
                                         "{\"id\":\"lz4\"}",
                                         "{\"id\":\"bz2\"}"};
    for (size_t i = 0; i < sizeof codecs / sizeof codecs[0]; i++) {
        char path[64], url[80], members[256];
        snprintf(path, sizeof path, "corrupt/c%zu", i);
        snprintf(url, sizeof url, "memory://%s/", path);
        snprintf(members, sizeof members,
                 "\"shape\":[4],\"chunks\":[4],\"dtype\":\"<i4\",\"compressor\":%s", codecs[i]);
        a = zarr2_in_memory(path, members);
        int32_t v[4] = {1, 2, 3, 4}, out[4];
        write_all(a, v);
        read_all(a, out);
        ck_assert(memcmp(v, out, sizeof v) == 0);
        put_raw(url, "0", "garbage!garbage!garbage!", 24);
        expect_corrupt(a, "");
        /* A valid stream of the wrong size. */
        nds_buf enc = {0};
        encode_with(codecs[i], v, 8, &enc);
        put_raw(url, "0", enc.data, enc.len);
        expect_corrupt(a, "");
        /* A valid stream of the right size, truncated. */
        encode_with(codecs[i], v, 16, &enc);
        put_raw(url, "0", enc.data, enc.len - 1);
        expect_corrupt(a, "");
        put_raw(url, "0", enc.data, enc.len / 2);
        expect_corrupt(a, "");
        nds_buf_dispose(&enc);
        nds_array_free(a);
    }
}
END_TEST

/* zarr-python writes booleans as 0/1 bytes; other byte values are passed through as stored. */
START_TEST(bool_bytes_kept) {
    nds_array *a = zarr2_in_memory(
        "boolbytes", "\"shape\":[3],\"chunks\":[3],\"dtype\":\"|b1\",\"compressor\":null");
    put_raw("memory://boolbytes/", "0", "\x00\x01\x02", 3);
    uint8_t out[3];
    read_all(a, out);
    ck_assert(out[0] == 0 && out[1] == 1 && out[2] == 2);
    nds_array_free(a);
}
END_TEST

/* ---- open modes and spec checks -------------------------------------------------------------- */

#define SPEC_AT(path) "{\"driver\":\"zarr\",\"kvstore\":\"memory://" path "/\","

START_TEST(open_modes) {
    nds_array *a;
    EXPECT_ERR(open_spec(&a, SPEC_AT("modes/a") "\"open\":true}"), NDS_ENOTFOUND,
               "no array at memory://modes/a/");
    NDS_OK(open_spec(
        &a, SPEC_AT("modes/a") "\"metadata\":{\"shape\":[4],\"dtype\":\"<u2\"},\"create\":true}"));
    nds_array_free(a);
    EXPECT_ERR(
        open_spec(
            &a,
            SPEC_AT("modes/a") "\"metadata\":{\"shape\":[4],\"dtype\":\"<u2\"},\"create\":true}"),
        NDS_EEXIST, "memory://modes/a/");
    NDS_OK(open_spec(
        &a, SPEC_AT("modes/a") "\"metadata\":{\"shape\":[4],\"dtype\":\"<u2\"},\"create\":true,"
                               "\"open\":true}"));
    nds_array_free(a);
    NDS_OK(open_spec(&a, "memory://modes/a/|zarr:"));
    ck_assert_str_eq(nds_array_format(a), "zarr");
    nds_array_free(a);
    /* Format detection from .zarray. */
    NDS_OK(open_spec(&a, "memory://modes/a/"));
    nds_array_free(a);
}
END_TEST

/* An existing array checked against each member a spec gives: same value opens, different value
 * names the member. */
START_TEST(open_checks_members) {
    nds_array *a = zarr2_in_memory(
        "check/a", "\"shape\":[6,8],\"chunks\":[3,4],\"dtype\":\"<i4\",\"fill_value\":7,"
                   "\"order\":\"F\",\"dimension_separator\":\"/\"");
    nds_array_free(a);
    static const struct {
        const char *given;
        const char *mismatch; /* NULL: must open */
    } cases[] = {
        {"\"metadata\":{\"shape\":[6,8]}", NULL},
        {"\"metadata\":{\"shape\":[6,9]}", "\"shape\" is [6,8], the spec asks for [6,9]"},
        {"\"metadata\":{\"shape\":[6]}", "\"shape\""},
        {"\"metadata\":{\"chunks\":[3,4]}", NULL},
        {"\"metadata\":{\"chunks\":[4,4]}", "\"chunks\" is [3,4]"},
        {"\"metadata\":{\"dtype\":\"<i4\"}", NULL},
        {"\"metadata\":{\"dtype\":\">i4\"}", "\"dtype\" is \"<i4\", the spec asks for \">i4\""},
        {"\"metadata\":{\"fill_value\":7}", NULL},
        {"\"metadata\":{\"fill_value\":7.0}", NULL},
        {"\"metadata\":{\"fill_value\":null}", "\"fill_value\""},
        {"\"metadata\":{\"fill_value\":8}", "\"fill_value\" is 7, the spec asks for 8"},
        {"\"metadata\":{\"order\":\"F\"}", NULL},
        {"\"metadata\":{\"order\":\"C\"}", "\"order\""},
        {"\"metadata\":{\"dimension_separator\":\"/\"}", NULL},
        {"\"metadata\":{\"dimension_separator\":\".\"}", "\"dimension_separator\""},
        {"\"metadata\":{\"compressor\":{\"id\":\"zstd\",\"level\":1}}", NULL},
        {"\"metadata\":{\"compressor\":{\"id\":\"zstd\",\"level\":2}}", "\"compressor\""},
        {"\"metadata\":{\"compressor\":null}", "\"compressor\""},
        {"\"metadata\":{\"filters\":[]}", NULL},
        {"\"metadata\":{\"zarr_format\":2}", NULL},
        {"\"schema\":{\"dtype\":\"int32\",\"domain\":{\"shape\":[6,8]},\"chunk_layout\":{\"chunk\":"
         "{\"shape\":[3,4]}},"
         "\"fill_value\":7,\"codec\":\"zstd:1\"}",
         NULL},
        {"\"schema\":{\"dtype\":\"uint32\"}", "\"dtype\""},
        {"\"schema\":{\"domain\":{\"shape\":[6,7]}}", "\"shape\""},
        {"\"schema\":{\"codec\":\"zstd:3\"}", "\"compressor\""},
        {"\"schema\":{\"codec\":\"none\"}", "\"compressor\""},
        {"\"dtype\":\"int32\"", NULL},
        {"\"dtype\":\"int16\"", "\"dtype\""},
        {"\"schema\":{\"dtype\":\"int16\"}", "\"dtype\" is \"<i4\", the spec asks for \"int16\""},
        /* "metadata" wins over "schema" */
        {"\"metadata\":{\"dtype\":\"<i4\"},\"schema\":{\"dtype\":\"int16\"}", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc =
            open_spec(&a, SPEC_AT("check/a") "%s,\"open\":true,\"create\":true}", cases[i].given);
        const char *msg = nds_error_last()->message;
        if (!cases[i].mismatch) {
            ck_assert_msg(rc == 0, "case %zu (%s): %d %s", i, cases[i].given, rc, msg);
            nds_array_free(a);
        } else {
            ck_assert_msg(rc == NDS_EMISMATCH, "case %zu (%s): %d %s", i, cases[i].given, rc, msg);
            ck_assert_msg(strstr(msg, cases[i].mismatch), "case %zu: \"%s\" lacks %s", i, msg,
                          cases[i].mismatch);
        }
    }
    /* A format-neutral dtype matches either byte order; 1-byte types match any order character. */
    nds_array_free(zarr2_in_memory("check/be", "\"shape\":[2],\"dtype\":\">i4\""));
    NDS_OK(open_spec(&a, SPEC_AT("check/be") "\"schema\":{\"dtype\":\"int32\"},\"open\":true}"));
    nds_array_free(a);
    EXPECT_ERR(open_spec(&a, SPEC_AT("check/be") "\"metadata\":{\"dtype\":\"<i4\"},\"open\":true}"),
               NDS_EMISMATCH, "\"dtype\"");
    nds_array_free(zarr2_in_memory("check/u1", "\"shape\":[2],\"dtype\":\"<u1\""));
    json_object *z = get_json("memory://check/u1/", ".zarray");
    ck_assert_str_eq(member_str(z, "dtype"), "\"|u1\"");
    json_object_put(z);
    NDS_OK(open_spec(&a, SPEC_AT("check/u1") "\"metadata\":{\"dtype\":\">u1\"},\"open\":true}"));
    nds_array_free(a);
}
END_TEST

START_TEST(spec_errors) {
    nds_array *a;
    EXPECT_ERR(
        open_spec(&a, SPEC_AT("specerr/a") "\"metadata\":{\"dtype\":\"<u2\"},\"create\":true}"),
        NDS_EINVAL, "without a shape");
    EXPECT_ERR(open_spec(&a, SPEC_AT("specerr/a") "\"metadata\":{\"shape\":[2]},\"create\":true}"),
               NDS_EINVAL, "without a dtype");
    EXPECT_ERR(
        open_spec(
            &a, SPEC_AT("specerr/a") "\"metadata\":{\"shape\":[2],\"dtype\":\"<u2\",\"chunk\":[1]},"
                                     "\"create\":true}"),
        NDS_EINVAL, "unknown metadata member \"chunk\"");
    EXPECT_ERR(open_spec(&a, SPEC_AT("specerr/a") "\"metadata\":[],\"create\":true}"), NDS_EINVAL,
               "\"metadata\" must be an object");
    EXPECT_ERR(
        open_spec(&a, SPEC_AT("specerr/a") "\"schema\":{\"dtype\":\"uint128\"},\"create\":true}"),
        NDS_EINVAL, "unknown \"dtype\" \"uint128\"");
    EXPECT_ERR(open_spec(&a, SPEC_AT("specerr/a") "\"schema\":{\"units\":[]},\"create\":true}"),
               NDS_EUNSUPPORTED, "schema member \"units\"");
    EXPECT_ERR(open_spec(&a, SPEC_AT("specerr/a") "\"schema\":{\"domain\":{\"inclusive_min\":[1]}},"
                                                  "\"create\":true}"),
               NDS_EUNSUPPORTED, "\"domain.inclusive_min\"");
    EXPECT_ERR(
        open_spec(&a, SPEC_AT("specerr/a") "\"schema\":{\"codec\":\"snappy:9\"},\"create\":true}"),
        NDS_EINVAL, "codec");
    EXPECT_ERR(open_spec(&a, SPEC_AT("specerr/a") "\"metadata\":{\"shape\":[2],\"dtype\":\"|V3\"},"
                                                  "\"create\":true}"),
               NDS_EUNSUPPORTED, "dtype \"|V3\"");
    EXPECT_ERR(
        open_spec(&a, SPEC_AT("specerr/a") "\"metadata\":{\"shape\":[2],\"dtype\":\"<u2\","
                                           "\"compressor\":{\"id\":\"blosc\",\"cname\":\"nope\"}},"
                                           "\"create\":true}"),
        NDS_EFORMAT, "compressor");
    EXPECT_ERR(open_spec(&a,
                         SPEC_AT("specerr/a") "\"metadata\":{\"shape\":[2],\"dtype\":\"<u2\","
                                              "\"filters\":[{\"id\":\"delta\"}]},\"create\":true}"),
               NDS_EFORMAT, "filters[0]: missing member \"dtype\"");
    EXPECT_ERR(
        open_spec(&a,
                  SPEC_AT("specerr/a") "\"metadata\":{\"shape\":[2],\"dtype\":\"<u2\","
                                       "\"filters\":[{\"id\":\"vlen-utf8\"}]},\"create\":true}"),
        NDS_EFORMAT, "filter \"vlen-utf8\" (\"filters\"[0]) needs dtype \"|O\"");
    /* Nothing was written by any of these. */
    ck_assert_ptr_null(get_raw("memory://specerr/a/", ".zarray", NULL));
}
END_TEST

/* Filters (issue 20): created from the spec's "metadata", kept in .zarray, applied before the
 * compressor in the stored layout (F order here), described in the codec line; a checksum filter
 * refuses a corrupt chunk naming the chunk and the filter. */
START_TEST(filters_write_read) {
    nds_array *a;
    NDS_OK(open_spec(&a, SPEC_AT("filt/a") "\"metadata\":{\"shape\":[6,5],\"chunks\":[4,3],"
                                           "\"dtype\":\">i4\",\"order\":\"F\",\"compressor\":null,"
                                           "\"filters\":[{\"id\":\"delta\",\"dtype\":\">i4\","
                                           "\"astype\":\"<i2\"},{\"id\":\"adler32\"}]},"
                                           "\"create\":true}"));
    int32_t in[30], out[30];
    for (int i = 0; i < 30; i++) in[i] = 1000 + i * i - 7 * (i % 4);
    nds_box box;
    nds_box_full(&box, 2, (const uint64_t[]){6, 5});
    NDS_OK(nds_array_write(a, &box, in, NULL));
    memset(out, 0, sizeof out);
    NDS_OK(nds_array_read(a, &box, out, NULL));
    ck_assert_mem_eq(out, in, sizeof in);
    char desc[200];
    nds_array_codec_description(a, desc, sizeof desc);
    ck_assert_str_eq(desc, "delta(astype=<i2, dtype=>i4) | adler32 | none");
    nds_array_free(a);
    /* Chunk 0.0 holds 4x3 int16 deltas (F order) after a 4-byte checksum. */
    size_t len = 0;
    uint8_t *raw = get_raw("memory://filt/a/", "0.0", &len);
    ck_assert_uint_eq(len, 4 + 12 * 2);
    ck_assert_uint_eq(raw[4] | raw[5] << 8, 1000); /* element (0,0), little-endian int16 */
    ck_assert_uint_eq((uint16_t)(raw[6] | raw[7] << 8), (uint16_t)(in[5] - in[0])); /* (1,0) */
    raw[len - 1] ^= 1;
    put_raw("memory://filt/a/", "0.0", raw, len);
    free(raw);
    NDS_OK(nds_array_open(&a, "memory://filt/a/|zarr:", NULL));
    EXPECT_ERR(nds_array_read(a, &box, out, NULL), NDS_ECORRUPT, "adler32 mismatch");
    EXPECT_ERR(nds_array_read(a, &box, out, NULL), NDS_ECORRUPT, "0.0");
    nds_array_free(a);
}
END_TEST

/* Defaults: ~1 MiB chunks within the shape, zstd level 1, C order, fill 0, "." separator. */
START_TEST(create_defaults_and_schema) {
    nds_array *a;
    NDS_OK(open_spec(
        &a,
        SPEC_AT(
            "defaults/a") "\"schema\":{\"dtype\":\"uint16\",\"domain\":{\"shape\":[4096,3000,3]}},"
                          "\"create\":true}"));
    uint64_t chunks[3], n = 2;
    nds_array_chunk_shape(a, chunks);
    for (int d = 0; d < 3; d++) n *= chunks[d];
    ck_assert_msg(n <= (1u << 20) && n >= (1u << 18), "chunk bytes %llu", (unsigned long long)n);
    ck_assert(chunks[0] <= 4096 && chunks[1] <= 3000 && chunks[2] <= 3);
    char desc[128];
    nds_array_codec_description(a, desc, sizeof desc);
    ck_assert_str_eq(desc, "zstd(level=1)");
    nds_array_free(a);
    char *raw = get_raw("memory://defaults/a/", ".zarray", NULL);
    ck_assert_ptr_nonnull(strstr(raw, "{\n    \"chunks\": [\n        "));
    ck_assert_ptr_nonnull(strstr(
        raw,
        "\n    \"compressor\": {\n        \"id\": \"zstd\",\n        \"level\": 1\n    },\n"
        "    \"dimension_separator\": \".\",\n    \"dtype\": \"<u2\",\n    \"fill_value\": 0,\n"
        "    \"filters\": null,\n    \"order\": \"C\",\n    \"shape\": [\n        4096,\n"
        "        3000,\n        3\n    ],\n    \"zarr_format\": 2\n}"));
    free(raw);

    NDS_OK(open_spec(
        &a, SPEC_AT("defaults/b") "\"schema\":{\"dtype\":\"float32\",\"domain\":{\"shape\":[0,10]},"
                                  "\"chunk_layout\":{\"write_chunk\":{\"shape\":[5,5]}},"
                                  "\"codec\":\"blosc:lz4:5:shuffle\",\"fill_value\":\"NaN\"},"
                                  "\"metadata\":{\"order\":\"F\"},\"create\":true}"));
    nds_array_codec_description(a, desc, sizeof desc);
    ck_assert_str_eq(desc, "blosc(blocksize=0, clevel=5, cname=lz4, shuffle=1)");
    nds_array_chunk_shape(a, chunks);
    ck_assert(chunks[0] == 5 && chunks[1] == 5);
    nds_array_free(a);
    json_object *z = get_json("memory://defaults/b/", ".zarray");
    ck_assert_str_eq(member_str(z, "dtype"), "\"<f4\"");
    ck_assert_str_eq(member_str(z, "order"), "\"F\"");
    ck_assert_str_eq(member_str(z, "fill_value"), "\"NaN\"");
    ck_assert_str_eq(
        member_str(z, "compressor"),
        "{\"blocksize\":0,\"clevel\":5,\"cname\":\"lz4\",\"id\":\"blosc\",\"shuffle\":1}");
    json_object_put(z);

    /* A zero-length dimension gets chunk 1 by default; "none" stores raw chunks. */
    NDS_OK(open_spec(
        &a, SPEC_AT("defaults/c") "\"schema\":{\"dtype\":\"bool\",\"domain\":{\"shape\":[0,7]},"
                                  "\"codec\":\"none\"},\"create\":true}"));
    nds_array_chunk_shape(a, chunks);
    ck_assert(chunks[0] == 1 && chunks[1] == 7);
    nds_array_codec_description(a, desc, sizeof desc);
    ck_assert_str_eq(desc, "none");
    nds_array_free(a);
    z = get_json("memory://defaults/c/", ".zarray");
    ck_assert_str_eq(member_str(z, "compressor"), "null");
    ck_assert_str_eq(member_str(z, "fill_value"), "false");
    ck_assert_str_eq(member_str(z, "dtype"), "\"|b1\"");
    json_object_put(z);
}
END_TEST

/* ---- create races ---------------------------------------------------------------------------- */

#define RACE_META                                                                         \
    "{\"zarr_format\":2,\"shape\":[6],\"chunks\":[3],\"dtype\":\"<i2\",\"fill_value\":0," \
    "\"order\":\"C\",\"compressor\":null,\"filters\":null}"

/* The racy store's competitor writes .zarray (support_format.h). */
START_TEST(create_race_loser_opens) {
    racy_register("/.zarray");
    nds_array *a;
    /* The competitor's array matches what we ask for (it chose no compressor): we open it. */
    race_doc = RACE_META;
    NDS_OK(open_spec(
        &a, "{\"driver\":\"zarr\",\"kvstore\":\"racy://race/a/\",\"metadata\":{\"shape\":[6],"
            "\"chunks\":[3],\"dtype\":\"<i2\"},\"create\":true,\"open\":true}"));
    ck_assert_ptr_null(race_doc); /* the race happened */
    char desc[64];
    nds_array_codec_description(a, desc, sizeof desc);
    ck_assert_str_eq(desc, "none");
    nds_array_free(a);
    char *raw = get_raw("memory://race/a/", ".zarray", NULL);
    ck_assert_str_eq(raw, RACE_META);
    free(raw);

    /* It does not match: the loser reports the member. */
    race_doc = RACE_META;
    EXPECT_ERR(
        open_spec(&a,
                  "{\"driver\":\"zarr\",\"kvstore\":\"racy://race/b/\",\"metadata\":{\"shape\":[7],"
                  "\"dtype\":\"<i2\"},\"create\":true,\"open\":true}"),
        NDS_EMISMATCH, "\"shape\" is [6], the spec asks for [7]");
    /* Create only: the loser gets EEXIST. */
    race_doc = RACE_META;
    EXPECT_ERR(
        open_spec(&a,
                  "{\"driver\":\"zarr\",\"kvstore\":\"racy://race/c/\",\"metadata\":{\"shape\":[6],"
                  "\"dtype\":\"<i2\"},\"create\":true}"),
        NDS_EEXIST, "racy://race/c/");
}
END_TEST

/* ---- batched (staged) chunk writes: a chunk changed between stage and publish is redone ------- */

static nds_array *g_competitor;

/* Writes the second half of the one chunk while the first writer's batch waits to publish. */
static void write_second_half(void) { write_twos_to_second_half(g_competitor); }

START_TEST(staged_write_conflict_is_redone) {
    racy_register("/.zarray");
    nds_array *a;
    NDS_OK(open_spec(&a, "{\"driver\":\"zarr\",\"kvstore\":\"racy://publish/a/\",\"metadata\":"
                         "{\"shape\":[8],\"chunks\":[8],\"dtype\":\"<i2\",\"compressor\":null},"
                         "\"create\":true}"));
    int16_t init[8] = {9, 9, 9, 9, 9, 9, 9, 9}, ones[4] = {1, 1, 1, 1}, got[8];
    write_all(a, init);
    /* A second handle has its own chunk locks, as another process would. */
    NDS_OK(open_spec(&g_competitor, "racy://publish/a/|zarr:"));
    race_before_publish = write_second_half;
    race_writes = 0;
    nds_box box;
    uint64_t shape[1] = {8};
    NDS_OK(nds_box_parse(&box, "[0:4]", 1, shape));
    NDS_OK(nds_array_write(a, &box, ones, NULL));
    ck_assert_ptr_null(race_before_publish); /* the competitor ran */
    ck_assert_int_eq(race_writes, 3); /* the competitor's, ours conflicted, ours redone */
    read_all(a, got);
    for (int i = 0; i < 8; i++) ck_assert_int_eq(got[i], i < 4 ? 1 : 2); /* no update lost */
    nds_array_free(g_competitor);
    nds_array_free(a);
}
END_TEST

/* The same race against an isolated transaction's commit, which stages and publishes its chunks in
 * batches too: the chunk is re-read and re-merged, both writes survive. */
START_TEST(staged_txn_commit_conflict_is_redone) {
    racy_register("/.zarray");
    nds_array *a;
    NDS_OK(open_spec(&a, "{\"driver\":\"zarr\",\"kvstore\":\"racy://publish/t/\",\"metadata\":"
                         "{\"shape\":[16],\"chunks\":[8],\"dtype\":\"<i2\",\"compressor\":null},"
                         "\"create\":true}"));
    int16_t init[16], ones[4] = {1, 1, 1, 1}, threes[8] = {3, 3, 3, 3, 3, 3, 3, 3}, got[16];
    for (int i = 0; i < 16; i++) init[i] = 9;
    write_all(a, init);
    NDS_OK(open_spec(&g_competitor, "racy://publish/t/|zarr:"));
    nds_txn *t;
    NDS_OK(nds_txn_begin(&t, NULL));
    nds_io_options io = NDS_IO_OPTIONS_INIT;
    io.txn = t;
    nds_box box;
    uint64_t shape[1] = {16};
    NDS_OK(nds_box_parse(&box, "[0:4]", 1, shape)); /* part of chunk 0, shared with the competitor */
    NDS_OK(nds_array_write(a, &box, ones, &io));
    NDS_OK(nds_box_parse(&box, "[8:16]", 1, shape)); /* all of chunk 1 */
    NDS_OK(nds_array_write(a, &box, threes, &io));
    race_before_publish = write_second_half;
    race_writes = 0;
    NDS_OK(nds_txn_commit(t));
    nds_txn_free(t);
    ck_assert_ptr_null(race_before_publish); /* the competitor ran */
    ck_assert_int_eq(race_writes, 4); /* the competitor's, our two chunks, chunk 0 redone */
    read_all(a, got);
    for (int i = 0; i < 16; i++) ck_assert_int_eq(got[i], i < 4 ? 1 : i < 8 ? 2 : 3);
    nds_array_free(g_competitor);
    nds_array_free(a);
}
END_TEST

typedef struct race_arg {
    int rc;
    char msg[256];
    const char *shape;
} race_arg;

static void *race_thread(void *p) {
    race_arg *r = p;
    nds_array *a = NULL;
    char spec[256];
    snprintf(spec, sizeof spec,
             "{\"driver\":\"zarr\",\"kvstore\":\"memory://race/threads/\",\"metadata\":"
             "{\"shape\":%s,\"chunks\":[4],\"dtype\":\"<u4\"},\"create\":true,\"open\":true}",
             r->shape);
    r->rc = nds_array_open(&a, spec, NULL);
    snprintf(r->msg, sizeof r->msg, "%s", nds_error_last()->message);
    nds_array_free(a);
    return NULL;
}

/* Many openers at once with create + open: all open one array; one asking for another shape fails.
 */
START_TEST(create_race_threads) {
    enum { N = 8 };
    pthread_t t[N];
    race_arg args[N];
    for (int i = 0; i < N; i++) {
        args[i].shape = "[16]";
        pthread_create(&t[i], NULL, race_thread, &args[i]);
    }
    for (int i = 0; i < N; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < N; i++) ck_assert_msg(args[i].rc == 0, "thread %d: %s", i, args[i].msg);
    race_arg other = {.shape = "[17]"};
    race_thread(&other);
    ck_assert_int_eq(other.rc, NDS_EMISMATCH);
}
END_TEST

/* ---- resize ---------------------------------------------------------------------------------- */

START_TEST(resize_rewrites_shape) {
    nds_array *a = zarr2_in_memory("resize/a", "\"shape\":[10,10],\"chunks\":[4,4],\"dtype\":\"<i2\"");
    int16_t v[100], out[60];
    for (int i = 0; i < 100; i++) v[i] = (int16_t)(i + 1);
    write_all(a, v);
    NDS_OK(nds_array_resize(a, (const uint64_t[]){5, 12}));
    uint64_t shape[2];
    nds_array_shape(a, shape);
    ck_assert(shape[0] == 5 && shape[1] == 12);
    char *raw = get_raw("memory://resize/a/", ".zarray", NULL);
    ck_assert_ptr_nonnull(strstr(raw, "\"shape\": [\n        5,\n        12\n    ],"));
    free(raw);
    nds_array_free(a);
    NDS_OK(open_spec(&a, "memory://resize/a/|zarr:"));
    nds_array_shape(a, shape);
    ck_assert(shape[0] == 5 && shape[1] == 12);
    read_all(a, out);
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 12; j++) ck_assert_int_eq(out[i * 12 + j], j < 10 ? v[i * 10 + j] : 0);
    /* Beyond the limits: refused, nothing changes. */
    EXPECT_ERR(nds_array_resize(a, (const uint64_t[]){UINT64_C(1) << 40, UINT64_C(1) << 40}),
               NDS_ELIMIT, "2^64");
    nds_array_shape(a, shape);
    ck_assert(shape[0] == 5 && shape[1] == 12);
    nds_array_free(a);
}
END_TEST

START_TEST(resize_keeps_unknown_members) {
    put_text("memory://resize/u/", ".zarray",
             "{\"zarr_format\":2,\"shape\":[4],\"chunks\":[2],\"dtype\":\"<i2\",\"fill_value\":0,"
             "\"order\":\"C\","
             "\"compressor\":null,\"filters\":null,\"x_custom\":{\"k\":[1.5,\"\\u00e9\"]}}");
    nds_array *a;
    NDS_OK(open_spec(&a, "memory://resize/u/|zarr:"));
    char *meta;
    NDS_OK(nds_array_metadata(a, &meta));
    ck_assert_ptr_nonnull(strstr(meta, "x_custom"));
    nds_free(meta);
    NDS_OK(nds_array_resize(a, (const uint64_t[]){9}));
    nds_array_free(a);
    char *raw = get_raw("memory://resize/u/", ".zarray", NULL);
    ck_assert_ptr_nonnull(strstr(
        raw, "\"x_custom\": {\n        \"k\": [\n            1.5,\n            \"\\u00e9\"\n"));
    ck_assert_ptr_nonnull(strstr(raw, "\"shape\": [\n        9\n    ]"));
    free(raw);
}
END_TEST

/* Another writer changed more than the shape since we opened: resize refuses rather than mixing. */
START_TEST(resize_detects_foreign_change) {
    nds_array *a = zarr2_in_memory("resize/f", "\"shape\":[4],\"chunks\":[2],\"dtype\":\"<i2\"");
    put_text("memory://resize/f/", ".zarray",
             "{\"zarr_format\":2,\"shape\":[4],\"chunks\":[3],\"dtype\":\"<i2\",\"fill_value\":0,"
             "\"order\":\"C\","
             "\"compressor\":null,\"filters\":null}");
    EXPECT_ERR(nds_array_resize(a, (const uint64_t[]){8}), NDS_EMISMATCH,
               "changed by another writer");
    nds_array_free(a);
}
END_TEST

/* A concurrent rewrite between our read and our conditional write: resize retries and lands. */
START_TEST(resize_retries_on_conflict) {
    racy_register("/.zarray");
    nds_array *a;
    NDS_OK(open_spec(
        &a, "{\"driver\":\"zarr\",\"kvstore\":\"racy://resize/r/\",\"metadata\":{\"shape\":[4],"
            "\"dtype\":\"<i2\"},\"create\":true}"));
    race_bumps = 2;
    NDS_OK(nds_array_resize(a, (const uint64_t[]){11}));
    ck_assert_int_eq(race_bumps, 0);
    uint64_t shape;
    nds_array_shape(a, &shape);
    ck_assert_uint_eq(shape, 11);
    nds_array_free(a);
    json_object *z = get_json("memory://resize/r/", ".zarray");
    ck_assert_str_eq(member_str(z, "shape"), "[11]");
    json_object_put(z);
}
END_TEST

/* ---- attributes and groups ------------------------------------------------------------------- */

START_TEST(attributes) {
    nds_array *a = zarr2_in_memory("attrs/a", "\"shape\":[2],\"dtype\":\"|u1\"");
    char *text;
    NDS_OK(nds_array_get_attributes(a, &text));
    ck_assert_str_eq(text, "{}");
    nds_free(text);
    NDS_OK(nds_array_set_attributes(a, "{\"b\": 1, \"a\": [1, 2.5, \"x\"], \"c\": {}}"));
    char *raw = get_raw("memory://attrs/a/", ".zattrs", NULL);
    ck_assert_str_eq(
        raw, "{\n    \"a\": [\n        1,\n        2.5,\n        \"x\"\n    ],\n    \"b\": 1,\n"
             "    \"c\": {}\n}");
    free(raw);
    assert_attributes(a, "{\"a\":[1,2.5,\"x\"],\"b\":1,\"c\":{}}");
    put_text("memory://attrs/a/", ".zattrs", "[1]");
    EXPECT_ERR(nds_array_get_attributes(a, &text), NDS_EFORMAT, ".zattrs of memory://attrs/a/");
    put_text("memory://attrs/a/", ".zattrs", "{\"a\":");
    EXPECT_ERR(nds_array_get_attributes(a, &text), NDS_EFORMAT, ".zattrs of memory://attrs/a/");
    nds_array_free(a);
}
END_TEST

START_TEST(attributes_vtable_rejects_non_object) {
    nds_kvstore *kv;
    nds_array_meta meta;
    void *st = open_vtable("memory://attrs/v/", RACE_META, &kv, &meta);
    json_object *arr = json_object_new_array();
    EXPECT_ERR(nds_format_zarr2.set_attributes(st, kv, arr), NDS_EINVAL, "must be a json object");
    json_object_put(arr);
    nds_format_zarr2.close(st);
    nds_kvstore_free(kv);
}
END_TEST

START_TEST(groups) {
    nds_kvstore *kv;
    NDS_OK(nds_kvstore_open(&kv, "memory://groups/g/", NULL));
    NDS_OK(nds_format_zarr2.create_group(kv));
    char *raw = get_raw("memory://groups/g/", ".zgroup", NULL);
    ck_assert_str_eq(raw, "{\n    \"zarr_format\": 2\n}");
    free(raw);
    NDS_OK(nds_format_zarr2.create_group(kv)); /* existing group: fine */
    nds_kvstore_free(kv);
    /* A group where an array is, and an array where a group is. */
    nds_array *a = zarr2_in_memory("groups/arr", "\"shape\":[2],\"dtype\":\"|u1\"");
    nds_array_free(a);
    NDS_OK(nds_kvstore_open(&kv, "memory://groups/arr/", NULL));
    EXPECT_ERR(nds_format_zarr2.create_group(kv), NDS_EEXIST, "an array exists there (.zarray)");
    nds_kvstore_free(kv);
    EXPECT_ERR(
        open_spec(
            &a,
            SPEC_AT("groups/g") "\"metadata\":{\"shape\":[2],\"dtype\":\"|u1\"},\"create\":true}"),
        NDS_EEXIST, "a group exists there (.zgroup)");
    /* Through the public API, with parents. */
    NDS_OK(nds_group_create("memory://groups/", "p/q/r", "zarr", 1, NULL));
    raw = get_raw("memory://groups/p/q/", ".zgroup", NULL);
    ck_assert_ptr_nonnull(raw);
    free(raw);
    raw = get_raw("memory://groups/p/q/r/", ".zgroup", NULL);
    ck_assert_ptr_nonnull(raw);
    free(raw);
}
END_TEST

/* ---- JSON printing --------------------------------------------------------------------------- */

/* Python: json.dumps(v, indent=4, sort_keys=True, ensure_ascii=True, separators=(",", ": ")). */
START_TEST(json_printing_matches_python) {
    const char *in =
        "{\"f\":[0.0,-0.0,1e-05,0.0001,1.5e+300,0.1,1.2345678901234567e+19,1e16,1e15,123.456,"
        "5e-324,2.5],\"s\":\"a\\\"b\\\\c\\n\\t\\u00e9\\u20ac\\ud83d\\ude00\\u0001\\u007f/\","
        "\"e\":{},\"l\":[],\"n\":null,\"t\":true,\"i\":[-5,18446744073709551615],"
        "\"nested\":{\"b\":{\"z\":1,\"a\":[{}]}}}";
    const char *want =
        "{\n    \"e\": {},\n    \"f\": [\n        0.0,\n        -0.0,\n        1e-05,\n        "
        "0.0001,\n"
        "        1.5e+300,\n        0.1,\n        1.2345678901234567e+19,\n        1e+16,\n"
        "        1000000000000000.0,\n        123.456,\n        5e-324,\n        2.5\n    ],\n"
        "    \"i\": [\n        -5,\n        18446744073709551615\n    ],\n    \"l\": [],\n    "
        "\"n\": null,\n"
        "    \"nested\": {\n        \"b\": {\n            \"a\": [\n                {}\n           "
        " ],\n"
        "            \"z\": 1\n        }\n    },\n"
        "    \"s\": \"a\\\"b\\\\c\\n\\t\\u00e9\\u20ac\\ud83d\\ude00\\u0001\\u007f/\",\n    \"t\": "
        "true\n}";
    json_object *v = json_tokener_parse(in);
    ck_assert_ptr_nonnull(v);
    nds_buf out = {0};
    NDS_OK(nds_json_print(v, &nds_json_style_python, &out));
    NDS_OK(nds_buf_append(&out, "", 1));
    ck_assert_str_eq((const char *)out.data, want);
    nds_buf_dispose(&out);
    json_object_put(v);
}
END_TEST

/* ---- arrays written by zarr-python ----------------------------------------------------------- */

/* Every array of the zarr-python fixture equals its .npy; string and object arrays are refused. */
START_TEST(zarr_python_fixtures) {
    static const char *const numeric[] = {
        "1d.chunked.i2",          "1d.chunked.ragged.i2", "1d.contiguous.b1",
        "1d.contiguous.blosc.i2", "1d.contiguous.f4.be",  "1d.contiguous.f4.le",
        "1d.contiguous.f8",       "1d.contiguous.i4",     "1d.contiguous.lz4.i2",
        "1d.contiguous.raw.i2",   "1d.contiguous.u1",     "1d.contiguous.zlib.i2",
        "1d.contiguous.zstd.i2",  "2d.chunked.i2",        "2d.chunked.ragged.i2",
        "2d.contiguous.i2",       "3d.chunked.i2",        "3d.chunked.mixed.i2.C",
        "3d.chunked.mixed.i2.F",  "3d.contiguous.i2"};
    /* Fixed-width strings (issue 20) read as raw elements: NumPy's bytes and host-order UCS-4. */
    static const char *const strings[] = {"1d.contiguous.S7", "1d.contiguous.U13.be",
                                          "1d.contiguous.U13.le", "1d.contiguous.U7",
                                          "2d.chunked.U7"};
    char dir[1024];
    nds_test_fixtures_dir(dir, sizeof dir);
    for (size_t i = 0; i < sizeof numeric / sizeof numeric[0]; i++) {
        char url[2048], npy[2048];
        snprintf(url, sizeof url, "file://%s/zarr2_zarr_python/data.zarr/%s/|zarr:", dir,
                 numeric[i]);
        snprintf(npy, sizeof npy, "%s/zarr2_zarr_python/expected/%s.npy", dir, numeric[i]);
        nds_array *a = open_expect_npy(url, npy, numeric[i]);
        nds_array_verify(a, NULL, NULL, NULL, NULL);
        nds_array_free(a);
    }
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) {
        char url[2048], npy[2048];
        snprintf(url, sizeof url, "file://%s/zarr2_zarr_python/data.zarr/%s/|zarr:", dir,
                 strings[i]);
        snprintf(npy, sizeof npy, "%s/zarr2_zarr_python/expected/%s.npy", dir, strings[i]);
        nds_array_free(open_expect_npy(url, npy, strings[i]));
    }
    /* An object array of vlen-utf8 strings (issue 20) reads through nds_array_read_vlen. */
    char url[2048];
    snprintf(url, sizeof url, "file://%s/zarr2_zarr_python/data.zarr/3d.chunked.O/|zarr:", dir);
    nds_array *a;
    NDS_OK(nds_array_open(&a, url, NULL));
    ck_assert_int_eq(nds_array_dtype(a), NDS_STRING);
    nds_box all = {.rank = 3, .stop = {2, 2, 2}, .step = {1, 1, 1}};
    uint64_t *off;
    uint8_t *data;
    NDS_OK(nds_array_read_vlen(a, &all, &off, &data, NULL));
    ck_assert_uint_eq(off[8], 20);
    ck_assert_mem_eq(data, "aaaaaaaaaabbbbbbbbbb", 20);
    ck_assert_uint_eq(off[3], 6); /* "a", "aa", "aaa" */
    nds_array_vlen_free(off, data);
    nds_array_free(a);
}
END_TEST

int main(void) {
    Suite *s = suite_create("zarr2");
    TCase *tc = tcase_create("zarr2");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, dtype_round_trips);
    tcase_add_test(tc, metadata_parse_print_round_trip);
    tcase_add_test(tc, fill_values);
    tcase_add_test(tc, fill_default_is_zero);
    tcase_add_test(tc, fill_out_of_range_rejected);
    tcase_add_test(tc, fortran_order_raw_layout);
    tcase_add_test(tc, fortran_big_endian_compressed);
    tcase_add_test(tc, slash_separator);
    tcase_add_test(tc, chunk_keys);
    tcase_add_test(tc, rank_zero_array);
    tcase_add_test(tc, hostile_zarray);
    tcase_add_test(tc, hostile_deep_nesting);
    tcase_add_test(tc, corrupt_chunks);
    tcase_add_test(tc, bool_bytes_kept);
    tcase_add_test(tc, open_modes);
    tcase_add_test(tc, open_checks_members);
    tcase_add_test(tc, spec_errors);
    tcase_add_test(tc, create_defaults_and_schema);
    tcase_add_test(tc, filters_write_read);
    tcase_add_test(tc, create_race_loser_opens);
    tcase_add_test(tc, staged_write_conflict_is_redone);
    tcase_add_test(tc, staged_txn_commit_conflict_is_redone);
    tcase_add_test(tc, create_race_threads);
    tcase_add_test(tc, resize_rewrites_shape);
    tcase_add_test(tc, resize_keeps_unknown_members);
    tcase_add_test(tc, resize_detects_foreign_change);
    tcase_add_test(tc, resize_retries_on_conflict);
    tcase_add_test(tc, attributes);
    tcase_add_test(tc, attributes_vtable_rejects_non_object);
    tcase_add_test(tc, groups);
    tcase_add_test(tc, json_printing_matches_python);
    tcase_add_test(tc, zarr_python_fixtures);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
