/* Variable-length arrays (issue 20): nds_array_read_vlen / nds_array_write_vlen on zarr v2 object
 * arrays (vlen-utf8 / vlen-bytes filters) and zarr v3 string / bytes arrays (vlen-utf8 /
 * vlen-bytes codecs): stored bytes as zarr-python 2.13 writes them, partial writes keeping the
 * other elements of a chunk, fill values, resize, verify, refusals, and damaged chunks. Through
 * the public API on memory://. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support_check.h"
#include "support_format.h"

/* A region's elements as one string "a|b|c" (elements joined by '|') into buf. */
static void joined(const uint64_t *off, const uint8_t *data, uint64_t n, char *buf, size_t cap) {
    size_t used = 0;
    for (uint64_t i = 0; i < n; i++) {
        int k = snprintf(buf + used, cap - used, "%s%.*s", i ? "|" : "",
                         (int)(off[i + 1] - off[i]), (const char *)data + off[i]);
        used += (size_t)k;
        ck_assert_uint_lt(used, cap);
    }
    buf[used] = '\0';
}

/* Reads box of a and asserts its elements joined by '|' are want. */
static void expect_read(nds_array *a, const nds_box *box, const char *want) {
    uint64_t *off;
    uint8_t *data;
    char got[4096];
    NDS_OK(nds_array_read_vlen(a, box, &off, &data, NULL));
    joined(off, data, nds_box_count(box), got, sizeof got);
    ck_assert_str_eq(got, want);
    ck_assert_uint_eq(off[0], 0);
    nds_array_vlen_free(off, data);
}

/* Writes the '|'-separated elements of text to box of a. */
static int write_joined(nds_array *a, const nds_box *box, const char *text) {
    uint64_t off[256], n = 0;
    char buf[4096];
    size_t len = strlen(text), j = 0;
    off[0] = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i == len || text[i] == '|') {
            off[++n] = j;
            continue;
        }
        buf[j++] = text[i];
    }
    ck_assert_uint_eq(n, nds_box_count(box));
    return nds_array_write_vlen(a, box, off, (const uint8_t *)buf, NULL);
}

static nds_box box1(uint64_t start, uint64_t stop, uint64_t step) {
    nds_box b;
    memset(&b, 0, sizeof b);
    b.rank = 1;
    b.start[0] = start;
    b.stop[0] = stop;
    b.step[0] = step;
    return b;
}

/* A zarr v2 object array at memory://<path>/: shape [5], chunks [2], no compressor. */
static nds_array *zarr2_objects(const char *path, const char *filter, const char *fill) {
    char members[512];
    snprintf(members, sizeof members,
             "\"shape\":[5],\"chunks\":[2],\"dtype\":\"|O\",\"compressor\":null,"
             "\"filters\":[{\"id\":\"%s\"}],\"fill_value\":%s",
             filter, fill);
    return zarr2_in_memory(path, members);
}

START_TEST(zarr2_strings_round_trip) {
    nds_array *a = zarr2_objects("u1", "vlen-utf8", "\"\"");
    ck_assert_int_eq(nds_array_dtype(a), NDS_STRING);
    ck_assert_uint_eq(nds_array_dtype_size(a), 0);
    nds_box all = box1(0, 5, 1);
    expect_read(a, &all, "||||"); /* fill "" */
    NDS_OK(write_joined(a, &all, "a|h\xc3\xa9llo||zz|last"));
    expect_read(a, &all, "a|h\xc3\xa9llo||zz|last");
    /* chunk 0 as numcodecs VLenUTF8 encodes ["a", "héllo"] */
    size_t len;
    uint8_t *chunk = get_raw("memory://u1/", "0", &len);
    const uint8_t want[] = {2, 0, 0, 0, 1, 0, 0, 0, 'a', 6, 0, 0, 0, 'h', 0xc3, 0xa9, 'l', 'l', 'o'};
    ck_assert_uint_eq(len, sizeof want);
    ck_assert_mem_eq(chunk, want, sizeof want);
    free(chunk);
    /* the edge chunk holds 2 elements, the one past the shape the fill */
    chunk = get_raw("memory://u1/", "2", &len);
    const uint8_t edge[] = {2, 0, 0, 0, 4, 0, 0, 0, 'l', 'a', 's', 't', 0, 0, 0, 0};
    ck_assert_uint_eq(len, sizeof edge);
    ck_assert_mem_eq(chunk, edge, sizeof edge);
    free(chunk);
    /* a partial write keeps the other element of its chunk; steps */
    nds_box one = box1(1, 2, 1), odd = box1(1, 5, 2), even = box1(0, 5, 2);
    NDS_OK(write_joined(a, &one, "B"));
    expect_read(a, &all, "a|B||zz|last");
    expect_read(a, &odd, "B|zz");
    expect_read(a, &even, "a||last");
    NDS_OK(write_joined(a, &even, "x|y|z"));
    expect_read(a, &all, "x|B|y|zz|z");
    /* a chunk left all fill is deleted */
    nds_box first = box1(0, 2, 1);
    NDS_OK(write_joined(a, &first, "|"));
    ck_assert_ptr_null(get_raw("memory://u1/", "0", NULL));
    expect_read(a, &all, "||y|zz|z");
    char *meta = NULL;
    NDS_OK(nds_array_metadata(a, &meta));
    ck_assert_msg(strstr(meta, "\"dtype\":\"|O\"") && strstr(meta, "vlen-utf8"), "%s", meta);
    nds_free(meta);
    nds_array_free(a);
}
END_TEST

/* Stored as zarr-python 2.13 wrote them: fill null (missing elements read as empty, and a chunk
 * of empty elements is kept, since zarr-python reads a missing one as None), fill "zz". */
START_TEST(zarr2_fill_values) {
    nds_array *a = zarr2_objects("f1", "vlen-utf8", "null");
    const uint8_t stored[] = {3, 0, 0, 0, 1, 0, 0, 0, 'x', 0, 0, 0, 0, 0, 0, 0, 0};
    put_raw("memory://f1/", "0", stored, 7); /* wrong: fewer bytes than the list needs */
    nds_box all = box1(0, 5, 1);
    uint64_t *off;
    uint8_t *data;
    EXPECT_ERR(nds_array_read_vlen(a, &all, &off, &data, NULL), NDS_ECORRUPT, "chunk 0 of");
    ck_assert_ptr_null(off);
    ck_assert_ptr_null(data);
    nds_array_free(a);
    /* chunks [3]: zarr-python's z[0] = 'x' on a fill-null array of shape [5] */
    NDS_OK(open_spec(&a, "{\"driver\":\"zarr\",\"kvstore\":\"memory://f2/\",\"create\":true,"
                         "\"metadata\":{\"shape\":[5],\"chunks\":[3],\"dtype\":\"|O\","
                         "\"compressor\":null,\"filters\":[{\"id\":\"vlen-utf8\"}],"
                         "\"fill_value\":null}}"));
    put_raw("memory://f2/", "0", stored, sizeof stored);
    expect_read(a, &all, "x||||");
    nds_box first = box1(0, 3, 1);
    NDS_OK(write_joined(a, &first, "||"));
    size_t len;
    uint8_t *chunk = get_raw("memory://f2/", "0", &len);
    ck_assert_ptr_nonnull(chunk); /* kept: no fill element */
    ck_assert_uint_eq(len, 16);
    free(chunk);
    nds_array_free(a);
    a = zarr2_objects("f3", "vlen-bytes", "\"zz\"");
    ck_assert_int_eq(nds_array_dtype(a), NDS_BYTES_VLEN);
    expect_read(a, &all, "zz|zz|zz|zz|zz");
    nds_array_free(a);
    a = zarr2_objects("f4", "vlen-bytes", "0"); /* zarr-python's default for VLenBytes */
    expect_read(a, &all, "||||");
    nds_array_free(a);
    EXPECT_ERR(open_spec(&a, "{\"driver\":\"zarr\",\"kvstore\":\"memory://f5/\",\"create\":true,"
                             "\"metadata\":{\"shape\":[5],\"dtype\":\"|O\",\"fill_value\":1.5}}"),
               NDS_EFORMAT, "must be a string, null or 0");
}
END_TEST

START_TEST(bytes_with_compressor_and_2d) {
    nds_array *a = zarr2_in_memory("b1", "\"shape\":[3,4],\"chunks\":[2,3],\"dtype\":\"|O\","
                                         "\"compressor\":{\"id\":\"zstd\",\"level\":1},"
                                         "\"filters\":[{\"id\":\"vlen-bytes\"}],\"fill_value\":\"\"");
    nds_box all;
    memset(&all, 0, sizeof all);
    all.rank = 2;
    all.stop[0] = 3;
    all.stop[1] = 4;
    all.step[0] = all.step[1] = 1;
    uint64_t off[13];
    uint8_t data[64];
    for (int i = 0; i < 12; i++) data[i * 2] = (uint8_t)('a' + i), data[i * 2 + 1] = 0xff;
    for (int i = 0; i <= 12; i++) off[i] = (uint64_t)i * 2; /* bytes: 0xff is fine */
    NDS_OK(nds_array_write_vlen(a, &all, off, data, NULL));
    uint64_t *o;
    uint8_t *d;
    NDS_OK(nds_array_read_vlen(a, &all, &o, &d, NULL));
    ck_assert_mem_eq(o, off, sizeof off);
    ck_assert_mem_eq(d, data, 24);
    nds_array_vlen_free(o, d);
    nds_box col = all; /* column 2, rows 0 and 2 */
    col.start[1] = 2;
    col.stop[1] = 3;
    col.step[0] = 2;
    NDS_OK(nds_array_read_vlen(a, &col, &o, &d, NULL));
    ck_assert_uint_eq(o[2], 4);
    ck_assert_mem_eq(d, "c\xffk\xff", 4);
    nds_array_vlen_free(o, d);
    nds_array_free(a);
}
END_TEST

START_TEST(refusals) {
    nds_array *a = zarr2_objects("r1", "vlen-utf8", "\"\"");
    nds_box all = box1(0, 5, 1), past = box1(0, 6, 1);
    uint8_t buf[64];
    EXPECT_ERR(nds_array_read(a, &all, buf, NULL), NDS_EINVAL, "nds_array_read_vlen");
    EXPECT_ERR(nds_array_write(a, &all, buf, NULL), NDS_EINVAL, "nds_array_write_vlen");
    EXPECT_ERR(write_joined(a, &all, "a|b|\xc3|d|e"), NDS_EINVAL, "element 2 is not valid UTF-8");
    const uint64_t back[] = {0, 2, 1, 3, 4, 5};
    EXPECT_ERR(nds_array_write_vlen(a, &all, back, (const uint8_t *)"abcde", NULL), NDS_EINVAL,
               "element 1: offsets decrease");
    uint64_t *off;
    uint8_t *data;
    EXPECT_ERR(nds_array_read_vlen(a, &past, &off, &data, NULL), NDS_ERANGE, "read of memory://r1/");
    ck_assert_ptr_null(get_raw("memory://r1/", "0", NULL)); /* nothing was written */
    nds_txn *t;
    NDS_OK(nds_txn_begin(&t, NULL));
    nds_io_options io = NDS_IO_OPTIONS_INIT;
    io.txn = t;
    const uint64_t ok[] = {0, 1, 2, 3, 4, 5};
    EXPECT_ERR(nds_array_write_vlen(a, &all, ok, (const uint8_t *)"abcde", &io), NDS_EUNSUPPORTED,
               "inside a transaction");
    nds_txn_free(t);
    nds_array_free(a);
    nds_array *n = zarr2_in_memory("r2", "\"shape\":[4],\"dtype\":\"<u2\"");
    EXPECT_ERR(nds_array_read_vlen(n, &all, &off, &data, NULL), NDS_EINVAL, "not uint16");
    nds_array_free(n);
    EXPECT_ERR(open_spec(&a, "{\"driver\":\"zarr\",\"kvstore\":\"memory://r3/\",\"create\":true,"
                             "\"metadata\":{\"shape\":[5],\"dtype\":\"|O\",\"filters\":[{\"id\":"
                             "\"vlen-utf8\"},{\"id\":\"vlen-bytes\"}]}}"),
               NDS_EFORMAT, "must come first");
    EXPECT_ERR(open_spec(&a, "{\"driver\":\"zarr\",\"kvstore\":\"memory://r4/\",\"create\":true,"
                             "\"metadata\":{\"shape\":[5],\"dtype\":\"|O\",\"filters\":[{\"id\":"
                             "\"delta\",\"dtype\":\"<i4\"}]}}"),
               NDS_EUNSUPPORTED, "with filter \"delta\"");
    EXPECT_ERR(open_spec(&a, "{\"driver\":\"zarr\",\"kvstore\":\"memory://r5/\",\"create\":true,"
                             "\"metadata\":{\"shape\":[5],\"dtype\":\"<u2\",\"filters\":[{\"id\":"
                             "\"vlen-utf8\"}]}}"),
               NDS_EFORMAT, "needs dtype \"|O\"");
    EXPECT_ERR(open_spec(&a, "{\"driver\":\"zarr\",\"kvstore\":\"memory://r6/\",\"create\":true,"
                             "\"metadata\":{\"shape\":[5],\"dtype\":\"|O\",\"order\":\"F\"}}"),
               NDS_EUNSUPPORTED, "order \"F\"");
}
END_TEST

/* Damaged chunks: each an NDS_ECORRUPT naming the chunk, never a crash or a huge allocation. */
START_TEST(damaged_chunks) {
    nds_array *a = zarr2_objects("d1", "vlen-utf8", "\"\"");
    nds_box all = box1(0, 5, 1);
    static const struct {
        const char *bytes;
        size_t len;
        const char *message;
    } cases[] = {
        {"\x02\0\0\0\x01\0\0\0a\x01\0\0\0\xff", 14, "element 1 is not valid UTF-8"},
        {"\x03\0\0\0\x01\0\0\0a\x01\0\0\0b\0\0\0\0", 18, "3 elements stored, the chunk has 2"},
        {"\x02\0\0\0\x01\0\0\0a\x09\0\0\0b", 14, "length 9 runs past the end"},
        {"\x02\0\0\0\x01\0\0\0a", 9, "2 elements cannot fit in 9 bytes"},
        {"\x02\0\0\0\x01\0\0\0a\0\0\0", 12, "length header is past the end"},
        {"\xff\xff\xff\xff", 4, "elements stored"},
        {"\x02\0", 2, "fewer than the 4"},
        {"\x02\0\0\0\x01\0\0\0a\x01\0\0\0bXY", 16, "2 bytes after the last"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        put_raw("memory://d1/", "0", cases[i].bytes, cases[i].len);
        uint64_t *off;
        uint8_t *data;
        EXPECT_ERR(nds_array_read_vlen(a, &all, &off, &data, NULL), NDS_ECORRUPT, cases[i].message);
        ck_assert_msg(strstr(nds_error_last()->message, "chunk 0 of memory://d1/"), "%s",
                      nds_error_last()->message);
        nds_box one = box1(1, 2, 1);
        EXPECT_ERR(write_joined(a, &one, "q"), NDS_ECORRUPT, "chunk 0 of memory://d1/");
    }
    uint64_t checked = 0, bad = 0;
    NDS_OK(nds_array_verify(a, NULL, NULL, &checked, &bad));
    ck_assert_uint_eq(checked, 1);
    ck_assert_uint_eq(bad, 1);
    nds_array_free(a);
}
END_TEST

START_TEST(resize_resets_to_fill) {
    nds_array *a = zarr2_objects("z1", "vlen-utf8", "\"-\"");
    nds_box all = box1(0, 5, 1);
    NDS_OK(write_joined(a, &all, "a|b|c|d|e"));
    uint64_t shape = 3;
    NDS_OK(nds_array_resize(a, &shape));
    shape = 5;
    NDS_OK(nds_array_resize(a, &shape));
    expect_read(a, &all, "a|b|c|-|-");
    uint64_t checked = 0, bad = 1;
    NDS_OK(nds_array_verify(a, NULL, NULL, &checked, &bad));
    ck_assert_uint_eq(checked, 2);
    ck_assert_uint_eq(bad, 0);
    nds_array_free(a);
}
END_TEST

/* zarr v3 string arrays: the stored chunk of [vlen-utf8] alone is the registry's layout (u32le
 * count, then u32le length + bytes per element), so these bytes are the golden vector. */
START_TEST(zarr3_strings) {
    nds_array *a = zarr3_in_memory(
        "v3s", zarr3_array_doc("[5]", "string", "[3]", "\"-\"", "[{\"name\":\"vlen-utf8\"}]"));
    ck_assert_int_eq(nds_array_dtype(a), NDS_STRING);
    nds_box all = box1(0, 5, 1);
    expect_read(a, &all, "-|-|-|-|-");
    const uint8_t golden[] = {3, 0, 0, 0, 2, 0, 0, 0, 'a', 'b', 0, 0, 0, 0, 2, 0, 0, 0, 0xc3, 0xbc};
    put_raw("memory://v3s/", "c/0", golden, sizeof golden);
    expect_read(a, &all, "ab||\xc3\xbc|-|-");
    nds_box last = box1(3, 5, 1);
    NDS_OK(write_joined(a, &last, "x|yy"));
    size_t len;
    uint8_t *chunk = get_raw("memory://v3s/", "c/1", &len);
    const uint8_t want[] = {3, 0, 0, 0, 1, 0, 0, 0, 'x', 2, 0, 0, 0, 'y', 'y', 1, 0, 0, 0, '-'};
    ck_assert_uint_eq(len, sizeof want);
    ck_assert_mem_eq(chunk, want, sizeof want);
    free(chunk);
    expect_read(a, &all, "ab||\xc3\xbc|x|yy");
    char *meta = NULL;
    NDS_OK(nds_array_metadata(a, &meta));
    ck_assert_msg(strstr(meta, "\"data_type\":\"string\"") && strstr(meta, "\"fill_value\":\"-\"") &&
                      strstr(meta, "{\"name\":\"vlen-utf8\",\"configuration\":{}}"),
                  "%s", meta);
    nds_free(meta);
    nds_array_free(a);
    /* created from a spec without codecs: vlen-utf8 then zstd, fill "" */
    NDS_OK(open_spec(&a, "{\"driver\":\"zarr3\",\"kvstore\":\"memory://v3d/\",\"create\":true,"
                         "\"metadata\":{\"shape\":[5],\"data_type\":\"string\"}}"));
    NDS_OK(write_joined(a, &all, "one|two|three|four|five"));
    expect_read(a, &all, "one|two|three|four|five");
    NDS_OK(nds_array_metadata(a, &meta));
    ck_assert_msg(strstr(meta, "vlen-utf8") && strstr(meta, "zstd") &&
                      strstr(meta, "\"fill_value\":\"\""), "%s", meta);
    nds_free(meta);
    nds_array_free(a);
}
END_TEST

START_TEST(zarr3_bytes_and_refusals) {
    nds_array *a = zarr3_in_memory(
        "v3b", zarr3_array_doc("[4]", "bytes", "[2]", "\"AAE=\"",
                               "[{\"name\":\"vlen-bytes\"},{\"name\":\"gzip\","
                               "\"configuration\":{\"level\":5}}]"));
    ck_assert_int_eq(nds_array_dtype(a), NDS_BYTES_VLEN);
    nds_box all = box1(0, 4, 1);
    uint64_t *off;
    uint8_t *data;
    NDS_OK(nds_array_read_vlen(a, &all, &off, &data, NULL));
    ck_assert_uint_eq(off[4], 8);
    ck_assert_mem_eq(data, "\0\1\0\1\0\1\0\1", 8); /* the fill, b"\x00\x01" */
    nds_array_vlen_free(off, data);
    NDS_OK(write_joined(a, &all, "p|\xff\xfe||q"));
    expect_read(a, &all, "p|\xff\xfe||q");
    nds_array_free(a);
    a = zarr3_in_memory("v3l", zarr3_array_doc("[2]", "variable_length_bytes", "[2]", "[104, 105]",
                                               "[\"vlen-bytes\"]"));
    expect_read(a, &(nds_box){.rank = 1, .stop = {2}, .step = {1}}, "hi|hi");
    nds_array_free(a);
    EXPECT_ERR(open_spec(&a, "{\"driver\":\"zarr3\",\"kvstore\":\"memory://v3e1/\",\"create\":true,"
                             "\"metadata\":%s}",
                         zarr3_array_doc("[4]", "string", "[2]", "\"\"", "[{\"name\":\"bytes\"}]")),
               NDS_EUNSUPPORTED, "needs the \"vlen-utf8\" codec first");
    EXPECT_ERR(open_spec(&a, "{\"driver\":\"zarr3\",\"kvstore\":\"memory://v3e2/\",\"create\":true,"
                             "\"metadata\":%s}",
                         zarr3_array_doc("[4]", "uint8", "[2]", "0", "[{\"name\":\"vlen-utf8\"}]")),
               NDS_EFORMAT, "needs data_type \"string\", not \"uint8\"");
    EXPECT_ERR(open_spec(&a, "{\"driver\":\"zarr3\",\"kvstore\":\"memory://v3e3/\",\"create\":true,"
                             "\"metadata\":%s}",
                         zarr3_array_doc("[4]", "string", "[2]", "\"\"",
                                         "[{\"name\":\"sharding_indexed\",\"configuration\":{"
                                         "\"chunk_shape\":[1],\"codecs\":[\"vlen-utf8\"],"
                                         "\"index_codecs\":[\"bytes\"]}}]")),
               NDS_EUNSUPPORTED, "(\"sharding_indexed\" is not supported for it)");
    EXPECT_ERR(open_spec(&a, "{\"driver\":\"zarr3\",\"kvstore\":\"memory://v3e4/\",\"create\":true,"
                             "\"metadata\":%s}",
                         zarr3_array_doc("[4]", "string", "[2]", "7", "[\"vlen-utf8\"]")),
               NDS_EFORMAT, "\"fill_value\" of a string array must be a string");
    EXPECT_ERR(open_spec(&a, "{\"driver\":\"zarr3\",\"kvstore\":\"memory://v3e5/\",\"create\":true,"
                             "\"metadata\":%s}",
                         zarr3_array_doc("[4]", "bytes", "[2]", "\"!!\"", "[\"vlen-bytes\"]")),
               NDS_EFORMAT, "is not base64");
    /* a damaged gzip stream under vlen-utf8: the codec's error, naming the chunk */
    a = zarr3_in_memory("v3c", zarr3_array_doc("[4]", "string", "[2]", "\"\"",
                                               "[\"vlen-utf8\",{\"name\":\"gzip\","
                                               "\"configuration\":{\"level\":1}}]"));
    put_raw("memory://v3c/", "c/1", "garbage", 7);
    EXPECT_ERR(nds_array_read_vlen(a, &all, &off, &data, NULL), NDS_ECORRUPT, "chunk c/1 of");
    nds_array_free(a);
}
END_TEST

/* Two handles (so no shared in-process chunk lock) write different elements of one chunk from two
 * threads, many times: each write is a read-merge-conditional write of the chunk's list, so
 * neither writer's last element may be lost. */
typedef struct writer {
    nds_array *a;
    uint64_t index;
    int rounds;
} writer;

static void *write_rounds(void *arg) {
    writer *w = arg;
    nds_box one = box1(w->index, w->index + 1, 1);
    for (int r = 0; r < w->rounds; r++) {
        char text[32];
        int n = snprintf(text, sizeof text, "w%llu-%d", (unsigned long long)w->index, r);
        uint64_t off[2] = {0, (uint64_t)n};
        if (nds_array_write_vlen(w->a, &one, off, (const uint8_t *)text, NULL) != 0) return w;
    }
    return NULL;
}

START_TEST(concurrent_writers_of_one_chunk) {
    nds_array *a = zarr2_objects("cc", "vlen-utf8", "\"\""), *b;
    NDS_OK(open_spec(&b, "{\"driver\":\"zarr\",\"kvstore\":\"memory://cc/\"}"));
    writer w[2] = {{a, 0, 200}, {b, 1, 200}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++) ck_assert_int_eq(pthread_create(&t[i], NULL, write_rounds, &w[i]), 0);
    for (int i = 0; i < 2; i++) {
        void *failed;
        pthread_join(t[i], &failed);
        ck_assert_msg(failed == NULL, "writer %d failed: %s", i, nds_error_last()->message);
    }
    nds_box all = box1(0, 5, 1);
    expect_read(a, &all, "w0-199|w1-199|||");
    nds_array_free(a);
    nds_array_free(b);
}
END_TEST

/* A chunk that changes between the read and the conditional write is read and merged again. */
START_TEST(conflict_is_retried) {
    racy_register("0");
    nds_array *a = zarr2_objects("rc", "vlen-utf8", "\"\"");
    nds_box all = box1(0, 5, 1), one = box1(1, 2, 1);
    NDS_OK(write_joined(a, &all, "a|b|c|d|e"));
    nds_array_free(a);
    NDS_OK(open_spec(&a, "{\"driver\":\"zarr\",\"kvstore\":\"racy://rc/\"}"));
    race_bumps = 2; /* the stored chunk 0 is rewritten (same bytes, new generation) twice */
    NDS_OK(write_joined(a, &one, "B"));
    ck_assert_int_eq(race_bumps, 0); /* both conditional writes before the last were refused */
    expect_read(a, &all, "a|B|c|d|e");
    nds_array_free(a);
}
END_TEST

int main(void) {
    Suite *s = suite_create("strings_vlen");
    TCase *tc = tcase_create("strings_vlen");
    tcase_add_test(tc, zarr2_strings_round_trip);
    tcase_add_test(tc, zarr2_fill_values);
    tcase_add_test(tc, bytes_with_compressor_and_2d);
    tcase_add_test(tc, refusals);
    tcase_add_test(tc, damaged_chunks);
    tcase_add_test(tc, resize_resets_to_fill);
    tcase_add_test(tc, zarr3_strings);
    tcase_add_test(tc, concurrent_writers_of_one_chunk);
    tcase_add_test(tc, conflict_is_retried);
    tcase_add_test(tc, zarr3_bytes_and_refusals);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
