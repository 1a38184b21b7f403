/* The versioned store's on-disk codecs (drivers/versioned_format.c): names, envelopes, values and
 * their block checksums, nodes (round trips, golden bytes written out by hand, every validation
 * rule, bit flips and truncations), commits, superseded lists and tags.
 *
 * With NDS_VERSIONED_CORPUS=<dir> set, the corpus test also writes the fuzz harness's seed inputs
 * (fuzz/fuzz_versioned.c: first byte chooses the decoder) into <dir>; fuzz/corpus/fuzz_versioned/
 * holds them (the named files) and what a fuzzing run added (the hashed names).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support_check.h"
#include "ndstore/sys/kv_driver.h"
#include "internal/crc32c.h"
#include "internal/util.h"
#include "../../drivers/versioned_internal.h"

/* ---- helpers --------------------------------------------------------------------------------- */

static void put8(nds_buf *b, uint8_t v) { ck_assert_int_eq(nds_buf_append(b, &v, 1), 0); }
static void put16(nds_buf *b, uint16_t v) {
    put8(b, (uint8_t)v);
    put8(b, (uint8_t)(v >> 8));
}
static void put32(nds_buf *b, uint32_t v) {
    uint8_t t[4];
    nds_store_le32(t, v);
    ck_assert_int_eq(nds_buf_append(b, t, 4), 0);
}
static void put64(nds_buf *b, uint64_t v) {
    uint8_t t[8];
    nds_store_le64(t, v);
    ck_assert_int_eq(nds_buf_append(b, t, 8), 0);
}
static void putn(nds_buf *b, const void *p, size_t n) {
    ck_assert_int_eq(nds_buf_append(b, p, n), 0);
}
static void putkey(nds_buf *b, const char *k) {
    put16(b, (uint16_t)strlen(k));
    putn(b, k, strlen(k));
}
static void put_id(nds_buf *b, uint8_t first) {
    for (int i = 0; i < VS_ID_SIZE; i++) put8(b, (uint8_t)(first + i));
}

/* A valid ref (object id bytes 0x40.., a plausible node length). */
static void put_ref(nds_buf *b, uint64_t length) {
    put_id(b, 0x40);
    put64(b, 0);
    put64(b, length);
    put32(b, 0x12345678);
}

static void assert_error(int rc, int code, const char *part) {
    ck_assert_msg(rc == code, "rc %d, expected %d (%s)", rc, code, nds_error_last()->message);
    ck_assert_msg(strstr(nds_error_last()->message, part), "message \"%s\" lacks \"%s\"",
                  nds_error_last()->message, part);
}

/* Wraps payload in a node envelope and decodes it with its own crc. */
static int decode_payload(const nds_buf *payload, unsigned want_level, vs_node **out) {
    nds_buf env = {0};
    uint32_t crc;
    NDS_OK(vs_envelope_append(&env, VS_KIND_NODE, payload->data, payload->len, &crc));
    int rc = vs_node_decode(env.data, env.len, crc, want_level, "index object index/t at 0", out);
    nds_buf_dispose(&env);
    return rc;
}

static void expect_node_corrupt(const nds_buf *payload, unsigned want_level, const char *part) {
    vs_node *n = NULL;
    assert_error(decode_payload(payload, want_level, &n), NDS_ECORRUPT, part);
    ck_assert_ptr_null(n);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "index object index/t at 0: "));
}

/* A leaf head: level 0, reserved 0, count. */
static void leaf_head(nds_buf *b, uint32_t count) {
    put8(b, 0);
    put8(b, 0);
    put32(b, count);
}

static void inline_item(nds_buf *b, const char *key, const char *value) {
    putkey(b, key);
    put64(b, 1);
    put8(b, VS_ENTRY_INLINE);
    put32(b, (uint32_t)strlen(value));
    putn(b, value, strlen(value));
}

static void child_item(nds_buf *b, const char *key, uint64_t length, uint64_t keys) {
    putkey(b, key);
    put_ref(b, length);
    put64(b, keys);
}

/* A small leaf: an inline entry and a reference entry. */
static vs_node *sample_leaf(void) {
    vs_node *n = calloc(1, sizeof *n);
    n->level = 0;
    n->n = 3;
    n->entries = calloc(3, sizeof *n->entries);
    n->entries[0] = (vs_entry){.key = strdup("a"), .version = 1, .is_inline = true};
    n->entries[0].data = (uint8_t *)strdup("hi");
    n->entries[0].len = 2;
    n->entries[1] = (vs_entry){.key = strdup("b/c"), .version = 7};
    for (int i = 0; i < VS_ID_SIZE; i++) n->entries[1].value.object.b[i] = (uint8_t)i;
    n->entries[1].value.offset = 16;
    n->entries[1].value.length = 100;
    n->entries[1].value.crc = 0xdeadbeef;
    n->entries[2] = (vs_entry){.key = strdup("b/d"), .version = 9, .is_inline = true};
    return n;
}

static vs_node *sample_inner(void) {
    vs_node *n = calloc(1, sizeof *n);
    n->level = 1;
    n->n = 2;
    n->children = calloc(2, sizeof *n->children);
    n->children[0].first_key = strdup("");
    for (int i = 0; i < VS_ID_SIZE; i++) n->children[0].ref.object.b[i] = (uint8_t)(0x10 + i);
    n->children[0].ref.length = 200;
    n->children[0].ref.crc = 0x01020304;
    n->children[0].keys = 5;
    n->children[1].first_key = strdup("m");
    for (int i = 0; i < VS_ID_SIZE; i++) n->children[1].ref.object.b[i] = (uint8_t)(0x20 + i);
    n->children[1].ref.offset = 4096;
    n->children[1].ref.length = 300;
    n->children[1].ref.crc = 0xa0b0c0d0;
    n->children[1].keys = 3;
    return n;
}

static void assert_entries_equal(const vs_entry *a, const vs_entry *b) {
    ck_assert_str_eq(a->key, b->key);
    ck_assert_uint_eq(a->version, b->version);
    ck_assert_int_eq(a->is_inline, b->is_inline);
    if (a->is_inline) {
        ck_assert_uint_eq(a->len, b->len);
        ck_assert(a->len == 0 || memcmp(a->data, b->data, a->len) == 0);
    } else {
        ck_assert(memcmp(&a->value.object, &b->value.object, VS_ID_SIZE) == 0);
        ck_assert_uint_eq(a->value.offset, b->value.offset);
        ck_assert_uint_eq(a->value.length, b->value.length);
        ck_assert_uint_eq(a->value.crc, b->value.crc);
    }
}

static void assert_nodes_equal(const vs_node *a, const vs_node *b) {
    ck_assert_uint_eq(a->level, b->level);
    ck_assert_uint_eq(a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        if (a->level == 0) {
            assert_entries_equal(&a->entries[i], &b->entries[i]);
            continue;
        }
        const vs_child *x = &a->children[i], *y = &b->children[i];
        ck_assert_str_eq(x->first_key, y->first_key);
        ck_assert(memcmp(&x->ref.object, &y->ref.object, VS_ID_SIZE) == 0);
        ck_assert_uint_eq(x->ref.offset, y->ref.offset);
        ck_assert_uint_eq(x->ref.length, y->ref.length);
        ck_assert_uint_eq(x->ref.crc, y->ref.crc);
        ck_assert_uint_eq(x->keys, y->keys);
    }
}

/* ---- names ----------------------------------------------------------------------------------- */

START_TEST(ids_hex_and_parse) {
    vs_id a, b, c;
    NDS_OK(vs_id_random(&a));
    NDS_OK(vs_id_random(&b));
    ck_assert(memcmp(&a, &b, sizeof a) != 0);
    char hex[VS_ID_HEX];
    for (int i = 0; i < VS_ID_SIZE; i++) a.b[i] = (uint8_t)(0xa0 + i * 5);
    vs_id_hex(&a, hex);
    ck_assert_str_eq(hex, "a0a5aaafb4b9bec3c8cdd2d7dce1e6eb");
    ck_assert_int_eq(vs_id_parse(hex, &c), 0);
    ck_assert(memcmp(&a, &c, sizeof a) == 0);
    const char *bad[] = {"",
                         "a0",
                         "A0A5AAAFB4B9BEC3C8CDD2D7DCE1E6EB",
                         "a0a5aaafb4b9bec3c8cdd2d7dce1e6e",
                         "a0a5aaafb4b9bec3c8cdd2d7dce1e6eb0",
                         "a0a5aaafb4b9bec3c8cdd2d7dce1e6eg",
                         " a0a5aaafb4b9bec3c8cdd2d7dce1e6eb",
                         "a0a5aaafb4b9bec3c8cdd2d7dce1e6e\n"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(vs_id_parse(bad[i], &c) == NDS_EINVAL, "accepted \"%s\"", bad[i]);
    ck_assert_int_eq(vs_id_parse(NULL, &c), NDS_EINVAL);
    char key[VS_OBJECT_KEY_MAX];
    vs_object_key(VS_INDEX_PREFIX, &a, key);
    ck_assert_str_eq(key, "index/a0a5aaafb4b9bec3c8cdd2d7dce1e6eb");
}
END_TEST

START_TEST(commit_keys) {
    char key[VS_OBJECT_KEY_MAX];
    uint64_t v;
    vs_commit_key(5, key);
    ck_assert_str_eq(key, "commits/00000000000000000005");
    ck_assert_int_eq(vs_commit_key_parse(key, &v), 0);
    ck_assert_uint_eq(v, 5);
    vs_commit_key(UINT64_MAX, key);
    ck_assert_str_eq(key, "commits/18446744073709551615");
    ck_assert_int_eq(vs_commit_key_parse(key, &v), 0);
    ck_assert_uint_eq(v, UINT64_MAX);
    const char *bad[] = {"commits/0000000000000000005",   "commits/000000000000000000005",
                         "commits/18446744073709551616",  "commits/99999999999999999999",
                         "commit/00000000000000000005",   "commits/0000000000000000000x",
                         "commits/+0000000000000000005",  "commits/00000000000000000005/",
                         "xcommits/00000000000000000005", "commits/"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(vs_commit_key_parse(bad[i], &v) == -1, "accepted \"%s\"", bad[i]);
}
END_TEST

/* ---- envelopes ------------------------------------------------------------------------------- */

static void make_envelope(nds_buf *b, vs_kind kind, const char *payload) {
    b->len = 0;
    NDS_OK(vs_envelope_append(b, kind, (const uint8_t *)payload, strlen(payload), NULL));
}

START_TEST(envelope_round_trip_and_header) {
    nds_buf b = {0};
    uint32_t crc, crc2;
    NDS_OK(vs_envelope_append(&b, VS_KIND_TAG, (const uint8_t *)"hello", 5, &crc));
    ck_assert_uint_eq(b.len, 21);
    ck_assert(memcmp(b.data, "NDSVT\x01\x00\x00\x05\x00\x00\x00", 12) == 0);
    ck_assert_uint_eq(nds_load_le32(b.data + 12), nds_crc32c((const uint8_t *)"hello", 5));
    ck_assert_uint_eq(crc, nds_crc32c((const uint8_t *)"hello", 5));
    const uint8_t *p;
    size_t len;
    NDS_OK(vs_envelope_open(b.data, b.len, VS_KIND_TAG, "t", &p, &len, &crc2));
    ck_assert_uint_eq(len, 5);
    ck_assert(memcmp(p, "hello", 5) == 0);
    ck_assert_uint_eq(crc2, crc);
    nds_buf_dispose(&b);
}
END_TEST

START_TEST(envelope_refusals) {
    nds_buf b = {0};
    const uint8_t *p;
    size_t len;
    const char *w = "index object index/ab12 at 4096";
    make_envelope(&b, VS_KIND_NODE, "payload");
    assert_error(vs_envelope_open(b.data, 15, VS_KIND_NODE, w, &p, &len, NULL), NDS_ECORRUPT,
                 "index object index/ab12 at 4096: truncated: 15 bytes");
    b.data[0] = 'X';
    assert_error(vs_envelope_open(b.data, b.len, VS_KIND_NODE, w, &p, &len, NULL), NDS_ECORRUPT,
                 "index object index/ab12 at 4096: not an ndstore versioned object (bad magic)");
    make_envelope(&b, VS_KIND_NODE, "payload");
    b.data[5] = 7;
    assert_error(vs_envelope_open(b.data, b.len, VS_KIND_NODE, w, &p, &len, NULL), NDS_ECORRUPT,
                 ": format version 7 is newer than this ndstore reads (1)");
    b.data[5] = 0;
    assert_error(vs_envelope_open(b.data, b.len, VS_KIND_NODE, w, &p, &len, NULL), NDS_ECORRUPT,
                 "format version 0");
    make_envelope(&b, VS_KIND_COMMIT, "payload");
    assert_error(vs_envelope_open(b.data, b.len, VS_KIND_NODE, w, &p, &len, NULL), NDS_ECORRUPT,
                 ": kind 'C' where a node was expected");
    b.data[4] = 1;
    assert_error(vs_envelope_open(b.data, b.len, VS_KIND_NODE, w, &p, &len, NULL), NDS_ECORRUPT,
                 ": kind 0x01 where a node was expected");
    make_envelope(&b, VS_KIND_NODE, "payload");
    b.data[7] = 1;
    assert_error(vs_envelope_open(b.data, b.len, VS_KIND_NODE, w, &p, &len, NULL), NDS_ECORRUPT,
                 "reserved header bytes");
    make_envelope(&b, VS_KIND_NODE, "payload");
    assert_error(vs_envelope_open(b.data, b.len - 1, VS_KIND_NODE, w, &p, &len, NULL), NDS_ECORRUPT,
                 "payload length 7 but 6 bytes follow the header");
    put8(&b, 0);
    assert_error(vs_envelope_open(b.data, b.len, VS_KIND_NODE, w, &p, &len, NULL), NDS_ECORRUPT,
                 "payload length 7 but 8 bytes follow the header");
    make_envelope(&b, VS_KIND_NODE, "payload");
    uint32_t good = nds_load_le32(b.data + 12);
    b.data[VS_HEADER_SIZE] ^= 0x10;
    char expect[128];
    snprintf(expect, sizeof expect,
             "index object index/ab12 at 4096: payload checksum mismatch (stored 0x%08x, computed "
             "0x%08x)",
             good, nds_crc32c(b.data + VS_HEADER_SIZE, 7));
    assert_error(vs_envelope_open(b.data, b.len, VS_KIND_NODE, w, &p, &len, NULL), NDS_ECORRUPT,
                 expect);
    nds_buf_dispose(&b);
}
END_TEST

/* ---- values ---------------------------------------------------------------------------------- */

static uint8_t *pattern(size_t n, unsigned seed) {
    uint8_t *p = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(i * 131 + seed + (i >> 13));
    return p;
}

/* One size: append into a data object after another value, verify whole, block by block, in
 * ranges, then corrupt one byte of each block in turn: only that block's check fails. */
static void check_value_size(uint64_t len) {
    nds_buf obj = {0};
    NDS_OK(vs_data_begin(&obj));
    uint32_t crc0, crc;
    NDS_OK(vs_value_append(&obj, (const uint8_t *)"xyz", 3, &crc0));
    size_t off = obj.len;
    uint8_t *data = pattern(len, (unsigned)len);
    NDS_OK(vs_value_append(&obj, data, len, &crc));
    uint64_t table = vs_value_table_size(len);
    ck_assert_uint_eq(obj.len, off + len + table);
    vs_data_finish(&obj);
    const uint8_t *payload;
    size_t plen;
    NDS_OK(vs_envelope_open(obj.data, obj.len, VS_KIND_DATA, "data object", &payload, &plen, NULL));
    ck_assert_uint_eq(plen, obj.len - VS_HEADER_SIZE);
    NDS_OK(vs_value_verify(obj.data + VS_HEADER_SIZE, 3, crc0, "v0"));
    uint8_t *stored = obj.data + off;
    ck_assert(len == 0 || memcmp(stored, data, len) == 0);
    NDS_OK(vs_value_verify(stored, len, crc, "v1"));
    uint64_t nb = len <= VS_BLOCK_SIZE ? 1 : (len + VS_BLOCK_SIZE - 1) / VS_BLOCK_SIZE;
    const uint8_t *tab = table ? stored + len : NULL;
    if (table == 0) {
        ck_assert_uint_eq(crc, nds_crc32c(data, len));
    } else {
        ck_assert_uint_eq(table, 4 * nb);
        ck_assert_uint_eq(crc, nds_crc32c(tab, table));
        NDS_OK(vs_value_table_verify(tab, len, crc, "v1"));
        assert_error(vs_value_table_verify(tab, len, crc ^ 1, "v1 of key k"), NDS_ECORRUPT,
                     "v1 of key k: block table checksum mismatch");
    }
    for (uint64_t i = 0; i < nb; i++)
        NDS_OK(vs_value_blocks_verify(stored + i * VS_BLOCK_SIZE, len, i, 1, tab, crc, "v1"));
    for (uint64_t first = 0; first < nb; first++)
        for (uint64_t count = 0; first + count <= nb; count++)
            NDS_OK(vs_value_blocks_verify(stored + first * VS_BLOCK_SIZE, len, first, count, tab,
                                          crc, "v1"));
    ck_assert_int_eq(vs_value_blocks_verify(stored, len, 0, nb + 1, tab, crc, "v1"), NDS_EINVAL);
    ck_assert_int_eq(vs_value_blocks_verify(stored, len, nb, 1, tab, crc, "v1"), NDS_EINVAL);
    for (uint64_t bad = 0; bad < nb && len > 0; bad++) {
        uint64_t at = bad * VS_BLOCK_SIZE + (len - bad * VS_BLOCK_SIZE > 7 ? 7 : 0);
        stored[at] ^= 0x55;
        assert_error(vs_value_verify(stored, len, crc, "data object data/ff of key c/0"),
                     NDS_ECORRUPT, "data object data/ff of key c/0: block ");
        for (uint64_t i = 0; i < nb; i++) {
            int rc = vs_value_blocks_verify(stored + i * VS_BLOCK_SIZE, len, i, 1, tab, crc, "v1");
            ck_assert_msg(i == bad ? rc == NDS_ECORRUPT : rc == 0,
                          "len %llu: block %llu after corrupting block %llu: %d",
                          (unsigned long long)len, (unsigned long long)i, (unsigned long long)bad,
                          rc);
        }
        stored[at] ^= 0x55;
    }
    NDS_OK(vs_value_verify(stored, len, crc, "v1"));
    free(data);
    nds_buf_dispose(&obj);
}

START_TEST(values_and_block_checksums) {
    const uint64_t sizes[] = {0, 1, VS_BLOCK_SIZE, VS_BLOCK_SIZE + 1,
                              3 * VS_BLOCK_SIZE + VS_BLOCK_SIZE / 2};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) check_value_size(sizes[i]);
    ck_assert_uint_eq(vs_value_table_size(0), 0);
    ck_assert_uint_eq(vs_value_table_size(VS_BLOCK_SIZE), 0);
    ck_assert_uint_eq(vs_value_table_size(VS_BLOCK_SIZE + 1), 8);
    ck_assert_uint_eq(vs_value_table_size(3 * VS_BLOCK_SIZE + 1), 16);
}
END_TEST

START_TEST(value_block_message_names_block) {
    uint64_t len = 3 * VS_BLOCK_SIZE + VS_BLOCK_SIZE / 2;
    nds_buf b = {0};
    uint8_t *data = pattern(len, 3);
    uint32_t crc;
    NDS_OK(vs_value_append(&b, data, len, &crc));
    b.data[2 * VS_BLOCK_SIZE + 5] ^= 1;
    assert_error(vs_value_verify(b.data, len, crc, "w"), NDS_ECORRUPT,
                 "w: block 2 (bytes 2097152..3145728) checksum mismatch (stored 0x");
    ck_assert_int_eq(vs_data_begin(&b), NDS_EINVAL); /* not an empty buffer */
    /* A data object's payload length is a u32: refused before anything is read or allocated. */
    nds_buf near_full = {.data = NULL, .len = UINT32_MAX - 2, .cap = 0};
    assert_error(vs_value_append(&near_full, (const uint8_t *)"abcd", 4, &crc), NDS_ELIMIT,
                 "does not fit in a data object");
    ck_assert_uint_eq(near_full.len, UINT32_MAX - 2);
    assert_error(vs_envelope_append(&b, VS_KIND_NODE, b.data, (size_t)UINT32_MAX + 1, NULL),
                 NDS_ELIMIT, "a node of 4294967296 bytes exceeds the format's 4 GiB");
    free(data);
    nds_buf_dispose(&b);
}
END_TEST

/* ---- nodes: round trips and golden bytes ----------------------------------------------------- */

static void round_trip(const vs_node *n) {
    nds_buf b = {0};
    size_t len;
    uint32_t crc;
    put8(&b, 0xee); /* encode appends: the envelope starts after what is there */
    NDS_OK(vs_node_encode(n, &b, &len, &crc));
    ck_assert_uint_eq(len, b.len - 1);
    ck_assert_uint_eq(len, VS_HEADER_SIZE + vs_node_payload_size(n));
    vs_node *d;
    NDS_OK(vs_node_decode(b.data + 1, len, crc, n->level, "t", &d));
    assert_nodes_equal(n, d);
    vs_node_free(d);
    NDS_OK(vs_node_decode(b.data + 1, len, crc, VS_MAX_LEVEL + 1, "t", &d)); /* any level */
    vs_node_free(d);
    nds_buf_dispose(&b);
}

START_TEST(node_round_trips) {
    vs_node *leaf = sample_leaf(), *inner = sample_inner();
    round_trip(leaf);
    round_trip(inner);
    vs_node empty = {.level = 0};
    round_trip(&empty);
    /* Longest key, largest inline value, extreme numbers. */
    char *key = malloc(VS_KEY_MAX + 1);
    memset(key, 'k', VS_KEY_MAX);
    key[VS_KEY_MAX] = '\0';
    uint8_t *big = pattern(VS_INLINE_MAX, 1);
    vs_entry e[2] = {
        {.key = "k", .version = UINT64_MAX, .is_inline = true, .data = big, .len = VS_INLINE_MAX},
        {.key = key, .version = 0, .value = {.offset = 1, .length = 0, .crc = 0}}};
    vs_node edge = {.level = 0, .n = 2, .entries = e};
    round_trip(&edge);
    vs_child c[1] = {{.first_key = "", .ref = {.length = VS_ENVELOPE_MAX}, .keys = UINT64_MAX}};
    vs_node top = {.level = VS_MAX_LEVEL, .n = 1, .children = c};
    round_trip(&top);
    /* vs_entry_copy is deep. */
    vs_entry copy;
    NDS_OK(vs_entry_copy(&copy, &leaf->entries[0]));
    ck_assert_ptr_ne(copy.key, leaf->entries[0].key);
    ck_assert_ptr_ne(copy.data, leaf->entries[0].data);
    assert_entries_equal(&copy, &leaf->entries[0]);
    vs_entry_dispose(&copy);
    NDS_OK(vs_entry_copy(&copy, &leaf->entries[1]));
    assert_entries_equal(&copy, &leaf->entries[1]);
    vs_entry_dispose(&copy);
    free(key);
    free(big);
    vs_node_free(leaf);
    vs_node_free(inner);
}
END_TEST

static void check_golden(const vs_node *n, const nds_buf *payload) {
    nds_buf expect = {0};
    putn(&expect, "NDSVN\x01\x00\x00", 8);
    put32(&expect, (uint32_t)payload->len);
    put32(&expect, nds_crc32c(payload->data, payload->len));
    putn(&expect, payload->data, payload->len);
    nds_buf got = {0};
    size_t len;
    uint32_t crc;
    NDS_OK(vs_node_encode(n, &got, &len, &crc));
    ck_assert_uint_eq(got.len, expect.len);
    for (size_t i = 0; i < got.len; i++)
        ck_assert_msg(got.data[i] == expect.data[i], "byte %zu: 0x%02x, expected 0x%02x", i,
                      got.data[i], expect.data[i]);
    vs_node *d;
    NDS_OK(vs_node_decode(expect.data, expect.len, crc, n->level, "golden", &d));
    assert_nodes_equal(n, d);
    vs_node_free(d);
    nds_buf_dispose(&got);
    nds_buf_dispose(&expect);
}

START_TEST(node_golden_bytes) {
    /* The sample leaf, byte by byte as the header comment lays it out. */
    static const uint8_t leaf_bytes[] =
        {
            0x00, 0x00, 0x03, 0x00, 0x00, 0x00, /* level 0, reserved, 3 items */
            0x01, 0x00, 'a',  0x01, 0,    0,    0,    0,    0,    0,    0,    0x01, /* "a", version
                                                                                       1, inline */
            0x02, 0x00, 0x00, 0x00, 'h',  'i', /* 2 bytes "hi" */
            0x03, 0x00, 'b',  '/',  'c',  0x07, 0,    0,    0,    0,    0,    0,    0,
            0x00, /* "b/c", version 7, ref */
            0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c,
            0x0d, 0x0e, 0x0f,                            /* object id */
            0x10, 0,    0,    0,    0,    0,    0,    0, /* offset 16 */
            0x64, 0,    0,    0,    0,    0,    0,    0, /* length 100 */
            0xef, 0xbe, 0xad, 0xde,                      /* crc 0xdeadbeef */
            0x03, 0x00, 'b',  '/',  'd',  0x09, 0,    0,    0,    0,    0,    0,    0,
            0x01,                   /* "b/d", version 9, inline */
            0x00, 0x00, 0x00, 0x00, /* empty value */
        };
    static const uint8_t inner_bytes[] = {
        0x01, 0x00, 0x02, 0x00, 0x00, 0x00, /* level 1, reserved, 2 children */
        0x00, 0x00,                         /* "" */
        0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17,
        0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, /* object id */
        0,    0,    0,    0,    0,    0,    0,    0,    /* offset 0 */
        0xc8, 0,    0,    0,    0,    0,    0,    0,    /* envelope length 200 */
        0x04, 0x03, 0x02, 0x01,                         /* crc 0x01020304 */
        0x05, 0,    0,    0,    0,    0,    0,    0,    /* 5 keys */
        0x01, 0x00, 'm',                                /* "m" */
        0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27,
        0x28, 0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f, /* object id */
        0x00, 0x10, 0,    0,    0,    0,    0,    0,    /* offset 4096 */
        0x2c, 0x01, 0,    0,    0,    0,    0,    0,    /* envelope length 300 */
        0xd0, 0xc0, 0xb0, 0xa0,                         /* crc 0xa0b0c0d0 */
        0x03, 0,    0,    0,    0,    0,    0,    0,    /* 3 keys */
    };
    vs_node *leaf = sample_leaf(), *inner = sample_inner();
    nds_buf p = {0};
    putn(&p, leaf_bytes, sizeof leaf_bytes);
    check_golden(leaf, &p);
    p.len = 0;
    putn(&p, inner_bytes, sizeof inner_bytes);
    check_golden(inner, &p);
    nds_buf_dispose(&p);
    vs_node_free(leaf);
    vs_node_free(inner);
}
END_TEST

/* ---- nodes: every validation rule ------------------------------------------------------------ */

START_TEST(node_head_rules) {
    nds_buf p = {0};
    vs_node *n = NULL;
    putn(&p, "\0\0\0\0\0", 5);
    expect_node_corrupt(&p, 0, "shorter than its 6-byte head");
    p.len = 0;
    leaf_head(&p, 0);
    NDS_OK(decode_payload(&p, 0, &n)); /* an empty leaf */
    ck_assert_uint_eq(n->n, 0);
    vs_node_free(n);
    expect_node_corrupt(&p, 1, "node of level 0 where level 1 was expected");
    p.data[0] = VS_MAX_LEVEL + 1;
    expect_node_corrupt(&p, VS_MAX_LEVEL + 1, "node level 33 exceeds 32");
    p.data[0] = 0;
    p.data[1] = 1;
    expect_node_corrupt(&p, 0, "reserved byte is not zero");
    /* Hostile counts: refused before anything is allocated for them. */
    p.len = 0;
    leaf_head(&p, UINT32_MAX);
    inline_item(&p, "a", "");
    expect_node_corrupt(&p, 0, "node claims 4294967295 items, more than its");
    p.len = 0;
    put8(&p, 1);
    put8(&p, 0);
    put32(&p, 2);
    child_item(&p, "", 100, 1);
    expect_node_corrupt(&p, 1, "node claims 2 items");
    p.len = 0;
    put8(&p, 1);
    put8(&p, 0);
    put32(&p, 0);
    expect_node_corrupt(&p, 1, "inner node with no children");
    nds_buf_dispose(&p);
}
END_TEST

START_TEST(node_key_rules) {
    nds_buf p = {0};
    leaf_head(&p, 1);
    put16(&p, VS_KEY_MAX + 1);
    for (int i = 0; i <= VS_KEY_MAX; i++) put8(&p, 'k');
    put64(&p, 1);
    put8(&p, VS_ENTRY_INLINE);
    put32(&p, 0);
    expect_node_corrupt(&p, 0, "item 0: key length 4097 exceeds 4096");
    p.len = 0;
    leaf_head(&p, 1);
    putkey(&p, "a");
    p.data[p.len - 1] = '\0';
    put64(&p, 1);
    put8(&p, VS_ENTRY_INLINE);
    put32(&p, 0);
    expect_node_corrupt(&p, 0, "item 0: key holds a NUL byte");
    p.len = 0;
    leaf_head(&p, 2);
    inline_item(&p, "a\x01z", "");
    inline_item(&p, "a", "");
    expect_node_corrupt(&p, 0, "item 1: key not after the previous key");
    p.len = 0;
    leaf_head(&p, 2);
    inline_item(&p, "same", "");
    inline_item(&p, "same", "");
    expect_node_corrupt(&p, 0, "item 1: key not after the previous key");
    p.len = 0; /* memcmp order: 0xff sorts after 'z' (signed char comparison would not) */
    leaf_head(&p, 2);
    inline_item(&p, "z", "");
    inline_item(&p, "\xff", "");
    vs_node *n;
    NDS_OK(decode_payload(&p, 0, &n));
    vs_node_free(n);
    p.len = 0;
    leaf_head(&p, 1);
    inline_item(&p, "", "");
    expect_node_corrupt(&p, 0, "item 0: empty key");
    /* An inner node's first key may be empty, no other. */
    p.len = 0;
    put8(&p, 1);
    put8(&p, 0);
    put32(&p, 2);
    child_item(&p, "", 100, 1);
    child_item(&p, "", 100, 1);
    expect_node_corrupt(&p, 1, "item 1: empty key");
    nds_buf_dispose(&p);
}
END_TEST

START_TEST(node_item_rules) {
    nds_buf p = {0};
    char big[VS_INLINE_MAX + 2];
    memset(big, 'v', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    leaf_head(&p, 1);
    inline_item(&p, "a", big);
    expect_node_corrupt(&p, 0, "item 0: inline value of 513 bytes exceeds 512");
    p.len = 0;
    leaf_head(&p, 1);
    putkey(&p, "a");
    put64(&p, 1);
    put8(&p, 2);
    put_ref(&p, 10);
    expect_node_corrupt(&p, 0, "item 0: unknown flags 0x02");
    p.len = 0;
    leaf_head(&p, 1);
    putkey(&p, "a");
    put64(&p, 1);
    put8(&p, 0);
    put_id(&p, 0);
    put64(&p, UINT64_MAX - 5);
    put64(&p, 10);
    put32(&p, 0);
    expect_node_corrupt(&p, 0, "item 0: value offset + length overflows");
    const uint64_t lengths[] = {VS_HEADER_SIZE + VS_NODE_PAYLOAD_HEAD - 1, VS_ENVELOPE_MAX + 1};
    for (int i = 0; i < 2; i++) {
        p.len = 0;
        put8(&p, 1);
        put8(&p, 0);
        put32(&p, 1);
        child_item(&p, "", lengths[i], 1);
        expect_node_corrupt(&p, 1, "item 0: child envelope length");
    }
    p.len = 0;
    put8(&p, 2);
    put8(&p, 0);
    put32(&p, 2);
    child_item(&p, "", 100, UINT64_MAX);
    child_item(&p, "b", 100, 1);
    expect_node_corrupt(&p, 2, "item 1: subtree key counts overflow");
    p.len = 0;
    leaf_head(&p, 1);
    inline_item(&p, "a", "x");
    put8(&p, 0);
    expect_node_corrupt(&p, 0, "1 trailing bytes after the node's last item");
    p.len = 0;
    leaf_head(&p, 2);
    inline_item(&p, "a", "x");
    putkey(&p, "b");
    put64(&p, 1);
    put8(&p, 1);
    put32(&p, 40);
    putn(&p, "0123456789abcdef", 16);
    expect_node_corrupt(&p, 0, "item 1: truncated inline value (40 bytes needed, 16 left)");
    nds_buf_dispose(&p);
}
END_TEST

START_TEST(node_crc_and_encode_refusals) {
    vs_node *leaf = sample_leaf();
    nds_buf b = {0};
    size_t len;
    uint32_t crc;
    NDS_OK(vs_node_encode(leaf, &b, &len, &crc));
    vs_node *d = NULL;
    assert_error(vs_node_decode(b.data, b.len, crc + 1, 0, "w", &d), NDS_ECORRUPT,
                 "w: node checksum 0x");
    ck_assert_ptr_null(d);
    /* What the decoder refuses, the encoder refuses too. */
    b.len = 0;
    char *saved = leaf->entries[1].key;
    leaf->entries[1].key = "a";
    ck_assert_int_eq(vs_node_encode(leaf, &b, &len, &crc), NDS_EINVAL);
    leaf->entries[1].key = "";
    ck_assert_int_eq(vs_node_encode(leaf, &b, &len, &crc), NDS_EINVAL);
    leaf->entries[1].key = saved;
    leaf->entries[0].len = VS_INLINE_MAX + 1;
    ck_assert_int_eq(vs_node_encode(leaf, &b, &len, &crc), NDS_EINVAL);
    leaf->entries[0].len = 2;
    ck_assert_uint_eq(b.len, 0);
    vs_node *inner = sample_inner();
    inner->children[1].ref.length = 3;
    ck_assert_int_eq(vs_node_encode(inner, &b, &len, &crc), NDS_EINVAL);
    vs_node_free(inner);
    vs_node_free(leaf);
    nds_buf_dispose(&b);
}
END_TEST

/* ---- nodes: bit flips and truncations -------------------------------------------------------- */

/* Flips each bit of a valid node's envelope. With the original crc expected, every flip must be
 * refused. With the crcs recomputed (a writer that lies), decoding must refuse or give a node that
 * encodes back to exactly the flipped bytes: never a crash, never content other than the bytes. */
static void flip_every_bit(const vs_node *node) {
    nds_buf b = {0}, re = {0};
    size_t len;
    uint32_t crc;
    NDS_OK(vs_node_encode(node, &b, &len, &crc));
    for (size_t i = 0; i < b.len; i++) {
        for (int bit = 0; bit < 8; bit++) {
            b.data[i] ^= (uint8_t)(1u << bit);
            vs_node *d = NULL;
            int rc = vs_node_decode(b.data, b.len, crc, node->level, "flip", &d);
            ck_assert_msg(rc == NDS_ECORRUPT, "byte %zu bit %d: %d", i, bit, rc);
            ck_assert_ptr_null(d);
            uint32_t forged = nds_crc32c(b.data + VS_HEADER_SIZE, b.len - VS_HEADER_SIZE);
            uint8_t saved[4];
            memcpy(saved, b.data + 12, 4);
            if (i < 12 || i >= VS_HEADER_SIZE) nds_store_le32(b.data + 12, forged);
            rc = vs_node_decode(b.data, b.len, forged, VS_MAX_LEVEL + 1, "flip", &d);
            if (rc == 0) {
                re.len = 0;
                NDS_OK(vs_node_encode(d, &re, &len, NULL));
                ck_assert_msg(re.len == b.len && memcmp(re.data, b.data, b.len) == 0,
                              "byte %zu bit %d: decoded content differs from the bytes", i, bit);
                vs_node_free(d);
            } else {
                ck_assert_int_eq(rc, NDS_ECORRUPT);
            }
            memcpy(b.data + 12, saved, 4);
            b.data[i] ^= (uint8_t)(1u << bit);
        }
    }
    nds_buf_dispose(&b);
    nds_buf_dispose(&re);
}

START_TEST(node_bit_flips) {
    vs_node *leaf = sample_leaf(), *inner = sample_inner();
    flip_every_bit(leaf);
    flip_every_bit(inner);
    vs_node_free(leaf);
    vs_node_free(inner);
}
END_TEST

/* Every proper prefix of a valid node is refused; so is every prefix re-wrapped in a valid
 * envelope (a payload cut short with a matching crc). */
static void truncate_everywhere(const vs_node *node) {
    nds_buf b = {0};
    size_t len;
    uint32_t crc;
    NDS_OK(vs_node_encode(node, &b, &len, &crc));
    for (size_t cut = 0; cut < b.len; cut++) {
        vs_node *d = NULL;
        ck_assert_int_eq(vs_node_decode(b.data, cut, crc, node->level, "cut", &d), NDS_ECORRUPT);
        ck_assert_ptr_null(d);
        if (cut < VS_HEADER_SIZE) continue;
        nds_buf payload = {0};
        putn(&payload, b.data + VS_HEADER_SIZE, cut - VS_HEADER_SIZE);
        int rc = decode_payload(&payload, node->level, &d);
        ck_assert_msg(rc == NDS_ECORRUPT, "payload cut at %zu: %d", cut - VS_HEADER_SIZE, rc);
        nds_buf_dispose(&payload);
    }
    nds_buf_dispose(&b);
}

START_TEST(node_truncations) {
    vs_node *leaf = sample_leaf(), *inner = sample_inner();
    truncate_everywhere(leaf);
    truncate_everywhere(inner);
    vs_node_free(leaf);
    vs_node_free(inner);
}
END_TEST

/* ---- commits --------------------------------------------------------------------------------- */

static vs_object_count sample_objects[2];

static vs_commit sample_commit(void) {
    vs_commit c = {.version = 5, .parent = 4, .time_ns = INT64_C(1795755600123456789)};
    c.message = "step 5 \"quoted\" / \xc3\xbc";
    c.metadata = "{\"step\":5,\"loss\":0.25,\"ranks\":[0,1]}";
    c.root.ref.object.b[0] = 0xab;
    c.root.ref.offset = 4096;
    c.root.ref.length = 1234;
    c.root.ref.crc = 0xfedcba98;
    c.root.level = 2;
    c.root.keys = 1000;
    sample_objects[0] = (vs_object_count){.kind = VS_OBJECT_DATA, .items = 17};
    sample_objects[0].object.b[15] = 1;
    sample_objects[1] = (vs_object_count){.kind = VS_OBJECT_INDEX, .items = 4};
    sample_objects[1].object.b[15] = 2;
    c.objects = sample_objects;
    c.nobjects = 2;
    c.has_superseded = true;
    c.superseded.object.b[3] = 0x33;
    c.superseded.offset = 9000;
    c.superseded.length = 45;
    c.superseded.crc = 7;
    return c;
}

static void assert_refs_equal(const vs_ref *a, const vs_ref *b) {
    ck_assert(memcmp(&a->object, &b->object, sizeof a->object) == 0);
    ck_assert_uint_eq(a->offset, b->offset);
    ck_assert_uint_eq(a->length, b->length);
    ck_assert_uint_eq(a->crc, b->crc);
}

START_TEST(commit_round_trips) {
    vs_commit c = sample_commit(), d;
    nds_buf b = {0};
    NDS_OK(vs_commit_encode(&c, &b));
    const uint8_t *payload;
    size_t len;
    NDS_OK(vs_envelope_open(b.data, b.len, VS_KIND_COMMIT, "c", &payload, &len, NULL));
    char *text = strndup((const char *)payload, len);
    ck_assert_ptr_nonnull(strstr(text, "\"format\":\"ndstore-versioned\",\"format_version\":1,"
                                       "\"version\":5,\"parent\":4,"));
    ck_assert_ptr_nonnull(strstr(text, "\"time\":\"2026-11-27T05:00:00.123456789Z\""));
    free(text);
    NDS_OK(vs_commit_decode(b.data, b.len, 5, "commits/00000000000000000005", &d));
    ck_assert_uint_eq(d.version, 5);
    ck_assert_uint_eq(d.parent, 4);
    ck_assert_int_eq(d.time_ns, c.time_ns);
    ck_assert_str_eq(d.message, c.message);
    ck_assert_str_eq(d.metadata, "{\"step\":5,\"loss\":0.25,\"ranks\":[0,1]}");
    ck_assert(!d.root.empty);
    assert_refs_equal(&d.root.ref, &c.root.ref);
    ck_assert_uint_eq(d.root.level, 2);
    ck_assert_uint_eq(d.root.keys, 1000);
    ck_assert_uint_eq(d.nobjects, 2);
    for (size_t i = 0; i < 2; i++) {
        ck_assert(memcmp(&d.objects[i].object, &c.objects[i].object, VS_ID_SIZE) == 0);
        ck_assert_int_eq(d.objects[i].kind, c.objects[i].kind);
        ck_assert_uint_eq(d.objects[i].items, c.objects[i].items);
    }
    ck_assert(d.has_superseded);
    assert_refs_equal(&d.superseded, &c.superseded);
    vs_commit_dispose(&d);
    /* The smallest commit: empty tree, nothing created or superseded, no message, before 1970. */
    vs_commit m = {.version = 1, .parent = 0, .time_ns = -1, .root = {.empty = true}};
    b.len = 0;
    NDS_OK(vs_commit_encode(&m, &b));
    NDS_OK(vs_envelope_open(b.data, b.len, VS_KIND_COMMIT, "c", &payload, &len, NULL));
    ck_assert_ptr_nonnull(memmem(payload, len, "\"1969-12-31T23:59:59.999999999Z\"", 32));
    NDS_OK(vs_commit_decode(b.data, b.len, 1, "c", &d));
    ck_assert(d.root.empty && !d.has_superseded && d.nobjects == 0);
    ck_assert_ptr_null(d.message);
    ck_assert_ptr_null(d.metadata);
    ck_assert_int_eq(d.time_ns, -1);
    vs_commit_dispose(&d);
    nds_buf_dispose(&b);
}
END_TEST

START_TEST(commit_encode_refusals) {
    nds_buf b = {0};
    vs_commit c = sample_commit();
    c.parent = 3;
    ck_assert_int_eq(vs_commit_encode(&c, &b), NDS_EINVAL);
    c = sample_commit();
    c.version = 0;
    ck_assert_int_eq(vs_commit_encode(&c, &b), NDS_EINVAL);
    c = sample_commit();
    c.metadata = "[1]";
    ck_assert_int_eq(vs_commit_encode(&c, &b), NDS_EINVAL);
    c.metadata = "{";
    ck_assert_int_eq(vs_commit_encode(&c, &b), NDS_EINVAL);
    c = sample_commit();
    c.root.level = VS_MAX_LEVEL + 1;
    ck_assert_int_eq(vs_commit_encode(&c, &b), NDS_EINVAL);
    c = sample_commit();
    c.superseded.length = 3;
    ck_assert_int_eq(vs_commit_encode(&c, &b), NDS_EINVAL);
    ck_assert_uint_eq(b.len, 0);
    nds_buf_dispose(&b);
}
END_TEST

#define HEAD "{\"format\":\"ndstore-versioned\",\"format_version\":1,"
#define OKROOT                                                                                     \
    "{\"object\":\"000102030405060708090a0b0c0d0e0f\",\"offset\":0,\"length\":100,\"crc32c\":1,"
#define TAIL "\"objects\":[],\"superseded\":null}"
#define V5 "\"version\":5,\"parent\":4,\"time_ns\":1,"

static int decode_commit_text(const char *json, uint64_t expect, vs_commit *out) {
    nds_buf b = {0};
    make_envelope(&b, VS_KIND_COMMIT, json);
    char where[VS_OBJECT_KEY_MAX];
    vs_commit_key(expect, where);
    int rc = vs_commit_decode(b.data, b.len, expect, where, out);
    nds_buf_dispose(&b);
    return rc;
}

static void expect_commit_corrupt(const char *json, uint64_t expect, const char *part) {
    vs_commit c;
    assert_error(decode_commit_text(json, expect, &c), NDS_ECORRUPT, part);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, "commits/0000000000000000000"));
    ck_assert_ptr_null(c.objects);
    ck_assert_ptr_null(c.message);
}

START_TEST(commit_decode_rules) {
    vs_commit c;
    /* Unknown members are ignored (a later version may add some). */
    NDS_OK(decode_commit_text(HEAD V5 "\"future\":{\"x\":[1]},\"root\":null," TAIL, 5, &c));
    vs_commit_dispose(&c);
    NDS_OK(decode_commit_text(HEAD V5 "\"root\":" OKROOT "\"level\":0,\"keys\":1}," TAIL, 5, &c));
    ck_assert(!c.root.empty && c.root.ref.length == 100 && c.root.ref.object.b[15] == 0x0f);
    vs_commit_dispose(&c);
    const struct {
        const char *json;
        uint64_t expect;
        const char *part;
    } cases[] = {
        {"[]", 5, "payload is not a json object"},
        {"{", 5, "invalid json"},
        {"{\"format_version\":1," V5 "\"root\":null," TAIL, 5, "missing member \"format\""},
        {"{\"format\":\"zarr\",\"format_version\":1," V5 "\"root\":null," TAIL, 5,
         "\"format\" is \"zarr\""},
        {"{\"format\":\"ndstore-versioned\",\"format_version\":2," V5 "\"root\":null," TAIL, 5,
         "format_version 2 is newer than this ndstore reads (1)"},
        {"{\"format\":\"ndstore-versioned\",\"format_version\":0," V5 "\"root\":null," TAIL, 5,
         "\"format_version\" is 0"},
        {HEAD "\"version\":0,\"parent\":0,\"time_ns\":1,\"root\":null," TAIL, 0,
         "\"version\" is 0"},
        {HEAD "\"version\":\"5\",\"parent\":4,\"time_ns\":1,\"root\":null," TAIL, 5,
         "\"version\" must be an integer"},
        {HEAD "\"version\":5.0,\"parent\":4,\"time_ns\":1,\"root\":null," TAIL, 5,
         "\"version\" must be an integer"},
        {HEAD "\"version\":18446744073709551615,\"parent\":4,\"time_ns\":1,\"root\":null," TAIL, 5,
         "\"version\""},
        {HEAD "\"version\":5,\"parent\":3,\"time_ns\":1,\"root\":null," TAIL, 5,
         "\"parent\" is 3, not version 5 - 1"},
        {HEAD "\"version\":5,\"parent\":-1,\"time_ns\":1,\"root\":null," TAIL, 5,
         "\"parent\" is -1"},
        {HEAD V5 "\"root\":null," TAIL, 6, "commits/00000000000000000006 holds version 5"},
        {HEAD "\"version\":5,\"parent\":4,\"root\":null," TAIL, 5, "missing member \"time_ns\""},
        {HEAD V5 "\"message\":5,\"root\":null," TAIL, 5, "\"message\" must be a string"},
        {HEAD V5 "\"message\":\"a\\u0000b\",\"root\":null," TAIL, 5, "\"message\" holds a NUL"},
        {HEAD V5 "\"metadata\":[1],\"root\":null," TAIL, 5, "\"metadata\" must be an object"},
        {HEAD V5 TAIL, 5, "missing member \"root\""},
        {HEAD V5 "\"root\":5," TAIL, 5, "\"root\" must be an object or null"},
        {HEAD V5 "\"root\":{\"object\":\"000102030405060708090a0b0c0d0e0f\",\"offset\":0,"
                 "\"length\":3,\"crc32c\":1,\"level\":0,\"keys\":1}," TAIL,
         5, "member \"root\": \"length\" is 3, outside [22, 4294967296]"},
        {HEAD V5 "\"root\":" OKROOT "\"level\":33,\"keys\":1}," TAIL, 5,
         "member \"root\": \"level\" is 33"},
        {HEAD V5 "\"root\":" OKROOT "\"keys\":1}," TAIL, 5, "missing member \"level\""},
        {HEAD V5 "\"root\":{\"object\":\"000102030405060708090A0B0C0D0E0F\",\"offset\":0,"
                 "\"length\":100,\"crc32c\":1,\"level\":0,\"keys\":1}," TAIL,
         5, "\"object\" is not 32 lower-case hex digits"},
        {HEAD V5 "\"root\":{\"object\":\"000102030405060708090a0b0c0d0e0f\",\"offset\":0,"
                 "\"length\":100,\"crc32c\":4294967296,\"level\":0,\"keys\":1}," TAIL,
         5, "\"crc32c\" is 4294967296"},
        {HEAD V5 "\"root\":{\"object\":\"000102030405060708090a0b0c0d0e0f\",\"offset\":-1,"
                 "\"length\":100,\"crc32c\":0,\"level\":0,\"keys\":1}," TAIL,
         5, "\"offset\" is -1"},
        {HEAD V5 "\"root\":null,\"objects\":{},\"superseded\":null}", 5,
         "\"objects\" must be an array"},
        {HEAD V5 "\"root\":null,\"superseded\":null}", 5, "missing member \"objects\""},
        {HEAD V5 "\"root\":null,\"objects\":[5],\"superseded\":null}", 5,
         "member \"objects\" item 0: must be an object"},
        {HEAD V5 "\"root\":null,\"objects\":[{\"object\":\"000102030405060708090a0b0c0d0e0f\","
                 "\"kind\":\"data\",\"items\":1},{\"object\":\"000102030405060708090a0b0c0d0e0f\","
                 "\"kind\":\"blob\",\"items\":1}],\"superseded\":null}",
         5, "member \"objects\" item 1: \"kind\" is \"blob\", not \"data\" or \"index\""},
        {HEAD V5 "\"root\":null,\"objects\":[{\"object\":\"000102030405060708090a0b0c0d0e0f\","
                 "\"kind\":\"data\",\"items\":-2}],\"superseded\":null}",
         5, "item 0: \"items\" is -2"},
        {HEAD V5 "\"root\":null,\"objects\":[]}", 5, "missing member \"superseded\""},
        {HEAD V5 "\"root\":null,\"objects\":[],\"superseded\":[]}", 5,
         "\"superseded\" must be an object or null"},
        {HEAD V5 "\"root\":null,\"objects\":[],\"superseded\":{\"object\":"
                 "\"000102030405060708090a0b0c0d0e0f\",\"offset\":0,\"length\":19,\"crc32c\":1}}",
         5, "member \"superseded\": \"length\" is 19"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        expect_commit_corrupt(cases[i].json, cases[i].expect, cases[i].part);
    /* A commit envelope is not a tag, nor a node. */
    nds_buf b = {0};
    make_envelope(&b, VS_KIND_TAG, HEAD V5 "\"root\":null," TAIL);
    assert_error(vs_commit_decode(b.data, b.len, 5, "c", &c), NDS_ECORRUPT,
                 "kind 'T' where a commit was expected");
    nds_buf_dispose(&b);
}
END_TEST

/* Every prefix and every bit flip of an encoded commit is refused (the crc covers the payload). */
START_TEST(commit_truncations_and_flips) {
    vs_commit c = sample_commit(), d;
    nds_buf b = {0};
    NDS_OK(vs_commit_encode(&c, &b));
    for (size_t cut = 0; cut < b.len; cut++)
        ck_assert_int_eq(vs_commit_decode(b.data, cut, 5, "c", &d), NDS_ECORRUPT);
    for (size_t i = 0; i < b.len; i++) {
        b.data[i] ^= 0x20;
        ck_assert_msg(vs_commit_decode(b.data, b.len, 5, "c", &d) == NDS_ECORRUPT, "byte %zu", i);
        b.data[i] ^= 0x20;
    }
    nds_buf_dispose(&b);
}
END_TEST

/* ---- superseded lists and tags --------------------------------------------------------------- */

START_TEST(superseded_lists) {
    vs_superseded s[3] = {{.kind = VS_OBJECT_DATA, .items = 5},
                          {.kind = VS_OBJECT_INDEX, .items = UINT64_MAX},
                          {.kind = VS_OBJECT_DATA, .items = 0}};
    for (int i = 0; i < 3; i++) memset(s[i].object.b, 0x11 * (i + 1), VS_ID_SIZE);
    nds_buf b = {0};
    size_t len, count;
    uint32_t crc;
    put8(&b, 0);
    NDS_OK(vs_superseded_encode(s, 3, &b, &len, &crc));
    ck_assert_uint_eq(len, VS_HEADER_SIZE + 4 + 3 * 25);
    ck_assert_uint_eq(b.len, 1 + len);
    /* Layout: count, then id | kind | items per object. */
    ck_assert_uint_eq(nds_load_le32(b.data + 1 + VS_HEADER_SIZE), 3);
    ck_assert_uint_eq(b.data[1 + VS_HEADER_SIZE + 4 + 25 + 16], 1);
    vs_superseded *d;
    NDS_OK(vs_superseded_decode(b.data + 1, len, crc, "s", &d, &count));
    ck_assert_uint_eq(count, 3);
    for (int i = 0; i < 3; i++) {
        ck_assert(memcmp(&d[i].object, &s[i].object, VS_ID_SIZE) == 0);
        ck_assert_int_eq(d[i].kind, s[i].kind);
        ck_assert_uint_eq(d[i].items, s[i].items);
    }
    free(d);
    for (size_t cut = 0; cut < len; cut++)
        ck_assert_int_eq(vs_superseded_decode(b.data + 1, cut, crc, "s", &d, &count), NDS_ECORRUPT);
    assert_error(
        vs_superseded_decode(b.data + 1, len, crc ^ 4, "index object index/9 at 70", &d, &count),
        NDS_ECORRUPT, "index object index/9 at 70: superseded list checksum 0x");
    b.len = 0;
    NDS_OK(vs_superseded_encode(NULL, 0, &b, &len, &crc));
    NDS_OK(vs_superseded_decode(b.data, b.len, crc, "s", &d, &count));
    ck_assert_uint_eq(count, 0);
    ck_assert_ptr_null(d);
    /* Hand-made payloads: a bad kind, a count the bytes do not match. */
    nds_buf p = {0}, env = {0};
    put32(&p, 1);
    put_id(&p, 0);
    put8(&p, 2);
    put64(&p, 1);
    NDS_OK(vs_envelope_append(&env, VS_KIND_SUPERSEDED, p.data, p.len, &crc));
    assert_error(vs_superseded_decode(env.data, env.len, crc, "s", &d, &count), NDS_ECORRUPT,
                 "s: superseded item 0: unknown kind 2");
    p.data[0] = 0xff;
    p.data[3] = 0xff;
    env.len = 0;
    NDS_OK(vs_envelope_append(&env, VS_KIND_SUPERSEDED, p.data, p.len, &crc));
    assert_error(vs_superseded_decode(env.data, env.len, crc, "s", &d, &count), NDS_ECORRUPT,
                 "superseded list claims 4278190335 items");
    s[1].kind = (vs_object_kind)7;
    size_t before = b.len;
    ck_assert_int_eq(vs_superseded_encode(s, 2, &b, &len, &crc), NDS_EINVAL);
    ck_assert_uint_eq(b.len, before); /* a refusal appends nothing */
    nds_buf_dispose(&p);
    nds_buf_dispose(&env);
    nds_buf_dispose(&b);
}
END_TEST

START_TEST(tags) {
    nds_buf b = {0};
    uint64_t v;
    NDS_OK(vs_tag_encode(42, INT64_C(1795755600000000000), &b));
    NDS_OK(vs_tag_decode(b.data, b.len, "tags/best", &v));
    ck_assert_uint_eq(v, 42);
    for (size_t cut = 0; cut < b.len; cut++)
        ck_assert_int_eq(vs_tag_decode(b.data, cut, "tags/best", &v), NDS_ECORRUPT);
    make_envelope(&b, VS_KIND_TAG, "{\"version\":-1,\"time_ns\":0}");
    assert_error(vs_tag_decode(b.data, b.len, "tags/best", &v), NDS_ECORRUPT,
                 "tags/best: \"version\" is -1");
    make_envelope(&b, VS_KIND_TAG, "{\"version\":3}");
    assert_error(vs_tag_decode(b.data, b.len, "tags/best", &v), NDS_ECORRUPT,
                 "missing member \"time_ns\"");
    make_envelope(&b, VS_KIND_TAG, "{\"version\":3.5,\"time_ns\":0}");
    assert_error(vs_tag_decode(b.data, b.len, "tags/best", &v), NDS_ECORRUPT,
                 "\"version\" must be an integer");
    make_envelope(&b, VS_KIND_TAG, "3");
    assert_error(vs_tag_decode(b.data, b.len, "tags/best", &v), NDS_ECORRUPT,
                 "payload is not a json object");
    make_envelope(&b, VS_KIND_COMMIT, "{\"version\":3,\"time_ns\":0}");
    assert_error(vs_tag_decode(b.data, b.len, "tags/best", &v), NDS_ECORRUPT,
                 "kind 'C' where a tag was expected");
    nds_buf_dispose(&b);
    const char *good[] = {"best", "v1.0", "epoch_3-final", "a", "0x1", "latest2", "1.5"};
    for (size_t i = 0; i < sizeof good / sizeof *good; i++)
        ck_assert_msg(vs_tag_name_valid(good[i]), "refused \"%s\"", good[i]);
    char long_name[130];
    memset(long_name, 'x', 129);
    long_name[129] = '\0';
    const char *bad[] = {"",  "latest", "123",     "0",   "a/b", "a b", "caf\xc3\xa9",
                         ".", "..",     long_name, "a\\b"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(!vs_tag_name_valid(bad[i]), "accepted \"%s\"", bad[i]);
    long_name[128] = '\0';
    ck_assert(vs_tag_name_valid(long_name));
}
END_TEST

/* ---- the fuzz harness's seed corpus ---------------------------------------------------------- */

/* One seed: selector byte (fuzz/fuzz_versioned.c: 0 node, 1 commit, 2 superseded list, 3 tag,
 * 4 envelope, 5 prepared set), parameter byte (node: wanted level; commit: expected version;
 * envelope: kind), then
 * the object. Each must decode as the harness will decode it; with NDS_VERSIONED_CORPUS set it is
 * also written there. */
static void seed(const char *name, uint8_t selector, uint8_t param, const nds_buf *obj) {
    const uint8_t *payload;
    size_t len;
    uint64_t v;
    vs_commit c;
    vs_node *n;
    vs_superseded *s;
    uint32_t crc = obj->len >= VS_HEADER_SIZE ? nds_load_le32(obj->data + 12) : 0;
    switch (selector) {
    case 0:
        NDS_OK(vs_node_decode(obj->data, obj->len, crc, param, name, &n));
        vs_node_free(n);
        break;
    case 1:
        NDS_OK(vs_commit_decode(obj->data, obj->len, param, name, &c));
        vs_commit_dispose(&c);
        break;
    case 2:
        NDS_OK(vs_superseded_decode(obj->data, obj->len, crc, name, &s, &len));
        free(s);
        break;
    case 3: NDS_OK(vs_tag_decode(obj->data, obj->len, name, &v)); break;
    case 5: {
        vs_prepared p;
        NDS_OK(vs_prepared_decode(obj->data, obj->len, name, &p));
        vs_prepared_dispose(&p);
        break;
    }
    default:
        NDS_OK(vs_envelope_open(obj->data, obj->len, (vs_kind)param, name, &payload, &len, NULL));
    }
    const char *dir = getenv("NDS_VERSIONED_CORPUS");
    if (!dir || !dir[0]) return;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    uint8_t head[2] = {selector, param};
    ck_assert_uint_eq(fwrite(head, 1, 2, f), 2);
    ck_assert_uint_eq(fwrite(obj->data, 1, obj->len, f), obj->len);
    ck_assert_int_eq(fclose(f), 0);
    /* The same with the harness's forged-crc bit, so mutations start from both modes. */
    snprintf(path, sizeof path, "%s/%s_forged", dir, name);
    ck_assert_ptr_nonnull(f = fopen(path, "wb"));
    head[0] |= 0x80;
    ck_assert_uint_eq(fwrite(head, 1, 2, f), 2);
    ck_assert_uint_eq(fwrite(obj->data, 1, obj->len, f), obj->len);
    ck_assert_int_eq(fclose(f), 0);
}

START_TEST(fuzz_seed_corpus) {
    nds_buf b = {0};
    size_t len;
    uint32_t crc;
    vs_node *leaf = sample_leaf(), *inner = sample_inner();
    NDS_OK(vs_node_encode(leaf, &b, &len, &crc));
    seed("node_leaf", 0, 0, &b);
    seed("node_leaf_any_level", 0, 255, &b);
    seed("envelope_node", 4, VS_KIND_NODE, &b);
    b.len = 0;
    NDS_OK(vs_node_encode(inner, &b, &len, &crc));
    seed("node_inner", 0, 1, &b);
    b.len = 0;
    vs_commit c = sample_commit();
    NDS_OK(vs_commit_encode(&c, &b));
    seed("commit_full", 1, 5, &b);
    b.len = 0;
    vs_commit m = {.version = 1, .parent = 0, .time_ns = 0, .root = {.empty = true}};
    NDS_OK(vs_commit_encode(&m, &b));
    seed("commit_minimal", 1, 1, &b);
    b.len = 0;
    vs_superseded s[2] = {{.kind = VS_OBJECT_DATA, .items = 3},
                          {.kind = VS_OBJECT_INDEX, .items = 1}};
    s[1].object.b[0] = 1;
    NDS_OK(vs_superseded_encode(s, 2, &b, &len, &crc));
    seed("superseded", 2, 0, &b);
    b.len = 0;
    NDS_OK(vs_tag_encode(7, 1795755600, &b));
    seed("tag", 3, 0, &b);
    b.len = 0;
    NDS_OK(vs_data_begin(&b));
    NDS_OK(vs_value_append(&b, (const uint8_t *)"value bytes", 11, &crc));
    vs_data_finish(&b);
    seed("envelope_data", 4, VS_KIND_DATA, &b);
    vs_node_free(leaf);
    vs_node_free(inner);
    nds_buf_dispose(&b);
}
END_TEST

/* ---- prepared sets --------------------------------------------------------------------------- */

#define PSET "prepared/000102030405060708090a0b0c0d0e0f"

static vs_prepared_op sample_ops[3];
static vs_prepared_side sample_side[1];
static vs_object_count sample_set_objects[1];

/* A set with a create-only put, a put, a conditioned delete, a side value and one data object. */
static vs_prepared sample_prepared(void) {
    vs_ref ref = {.offset = 16, .length = 612, .crc = 0xdeadbeef};
    ref.object.b[0] = 0x11;
    sample_ops[0] = (vs_prepared_op){.key = "step-100/w/zarr.json", .value = ref};
    sample_ops[0].if_equal.kind = NDS_GEN_ABSENT;
    ref.offset = 628, ref.length = 4096;
    sample_ops[1] = (vs_prepared_op){.key = "step-100/w/c/0/0", .value = ref};
    sample_ops[2] = (vs_prepared_op){.key = "old/x \"q\" \xc3\xbc", .is_delete = true};
    nds_generation_set(&sample_ops[2].if_equal, "v7");
    ref.offset = 4724, ref.length = 200;
    sample_side[0] = (vs_prepared_side){.name = "chunk/0", .value = ref};
    sample_set_objects[0] = (vs_object_count){.kind = VS_OBJECT_DATA, .items = 3};
    sample_set_objects[0].object.b[0] = 0x11;
    return (vs_prepared){.base_version = 11,
                         .time_ns = INT64_C(1795756800123456789),
                         .ops = sample_ops,
                         .nops = 3,
                         .side = sample_side,
                         .nside = 1,
                         .objects = sample_set_objects,
                         .nobjects = 1};
}

static void assert_prepared_equal(const vs_prepared *a, const vs_prepared *b) {
    ck_assert_uint_eq(a->base_version, b->base_version);
    ck_assert_int_eq(a->time_ns, b->time_ns);
    ck_assert_uint_eq(a->nops, b->nops);
    for (size_t i = 0; i < a->nops; i++) {
        ck_assert_str_eq(a->ops[i].key, b->ops[i].key);
        ck_assert_int_eq(a->ops[i].is_delete, b->ops[i].is_delete);
        ck_assert_int_eq(a->ops[i].if_equal.kind, b->ops[i].if_equal.kind);
        if (a->ops[i].if_equal.kind == NDS_GEN_VALUE)
            ck_assert_str_eq(a->ops[i].if_equal.value, b->ops[i].if_equal.value);
        if (!a->ops[i].is_delete) assert_refs_equal(&a->ops[i].value, &b->ops[i].value);
    }
    ck_assert_uint_eq(a->nside, b->nside);
    for (size_t i = 0; i < a->nside; i++) {
        ck_assert_str_eq(a->side[i].name, b->side[i].name);
        assert_refs_equal(&a->side[i].value, &b->side[i].value);
    }
    ck_assert_uint_eq(a->nobjects, b->nobjects);
    for (size_t i = 0; i < a->nobjects; i++) {
        ck_assert(memcmp(&a->objects[i].object, &b->objects[i].object, VS_ID_SIZE) == 0);
        ck_assert_int_eq(a->objects[i].kind, b->objects[i].kind);
        ck_assert_uint_eq(a->objects[i].items, b->objects[i].items);
    }
}

START_TEST(prepared_round_trips) {
    vs_prepared p = sample_prepared(), d;
    nds_buf b = {0};
    NDS_OK(vs_prepared_encode(&p, &b));
    const uint8_t *payload;
    size_t len;
    NDS_OK(vs_envelope_open(b.data, b.len, VS_KIND_PREPARED, PSET, &payload, &len, NULL));
    ck_assert_ptr_nonnull(memmem(payload, len,
                                 "\"format\":\"ndstore-versioned-prepared\","
                                 "\"format_version\":1,\"base_version\":11,",
                                 75));
    NDS_OK(vs_prepared_decode(b.data, b.len, PSET, &d));
    assert_prepared_equal(&p, &d);
    vs_prepared_dispose(&d);
    ck_assert_ptr_null(d.ops); /* dispose leaves an empty set */
    /* The smallest set: nothing to write, no side value, no object, base version 0. */
    vs_prepared e = {.time_ns = -1};
    b.len = 0;
    NDS_OK(vs_prepared_encode(&e, &b));
    NDS_OK(vs_prepared_decode(b.data, b.len, PSET, &d));
    assert_prepared_equal(&e, &d);
    vs_prepared_dispose(&d);
    nds_buf_dispose(&b);
}
END_TEST

#define PHEAD "{\"format\":\"ndstore-versioned-prepared\",\"format_version\":1,"
#define PREF                                                                                       \
    "{\"object\":\"000102030405060708090a0b0c0d0e0f\",\"offset\":16,\"length\":5,\"crc32c\":1}"
#define PBASE "\"base_version\":3,\"time_ns\":1,"

static void expect_prepared_corrupt(const char *json, const char *part) {
    nds_buf b = {0};
    make_envelope(&b, VS_KIND_PREPARED, json);
    vs_prepared d;
    assert_error(vs_prepared_decode(b.data, b.len, PSET, &d), NDS_ECORRUPT, part);
    ck_assert_ptr_nonnull(strstr(nds_error_last()->message, PSET ": "));
    ck_assert(d.ops == NULL && d.side == NULL && d.objects == NULL && d.nops == 0);
    nds_buf_dispose(&b);
}

START_TEST(prepared_decode_rules) {
    vs_prepared d;
    nds_buf b = {0};
    /* Unknown members are ignored; if_equal may be left out (no condition). */
    make_envelope(&b, VS_KIND_PREPARED,
                  PHEAD PBASE "\"later\":[1],\"ops\":[{\"key\":\"a\",\"value\":" PREF
                              "}],\"side\":[],\"objects\":[]}");
    NDS_OK(vs_prepared_decode(b.data, b.len, PSET, &d));
    ck_assert_uint_eq(d.nops, 1);
    ck_assert_int_eq(d.ops[0].if_equal.kind, NDS_GEN_NONE);
    vs_prepared_dispose(&d);
    const struct {
        const char *json, *part;
    } cases[] = {
        {"[]", "payload is not a json object"},
        {"{", "invalid json"},
        {"{\"format\":\"ndstore-versioned\",\"format_version\":1," PBASE
         "\"ops\":[],\"side\":[],\"objects\":[]}",
         "not a prepared set (format \"ndstore-versioned\")"},
        {"{\"format_version\":1," PBASE "\"ops\":[],\"side\":[],\"objects\":[]}",
         "missing member \"format\""},
        {"{\"format\":\"ndstore-versioned-prepared\",\"format_version\":2," PBASE
         "\"ops\":[],\"side\":[],\"objects\":[]}",
         "format_version 2 is newer than this ndstore reads (1)"},
        {"{\"format\":\"ndstore-versioned-prepared\"," PBASE
         "\"ops\":[],\"side\":[],\"objects\":[]}",
         "missing member \"format_version\""},
        {PHEAD "\"time_ns\":1,\"ops\":[],\"side\":[],\"objects\":[]}",
         "missing member \"base_version\""},
        {PHEAD "\"base_version\":-1,\"time_ns\":1,\"ops\":[],\"side\":[],\"objects\":[]}",
         "\"base_version\" is -1"},
        {PHEAD "\"base_version\":3,\"ops\":[],\"side\":[],\"objects\":[]}",
         "missing member \"time_ns\""},
        {PHEAD PBASE "\"side\":[],\"objects\":[]}", "missing member \"ops\""},
        {PHEAD PBASE "\"ops\":{},\"side\":[],\"objects\":[]}", "\"ops\" must be an array"},
        {PHEAD PBASE "\"ops\":[],\"objects\":[]}", "missing member \"side\""},
        {PHEAD PBASE "\"ops\":[],\"side\":[]}", "missing member \"objects\""},
        {PHEAD PBASE "\"ops\":[5],\"side\":[],\"objects\":[]}", "ops[0] must be an object"},
        {PHEAD PBASE "\"ops\":[{\"key\":\"\",\"value\":null}],\"side\":[],\"objects\":[]}",
         "ops[0]: \"key\" must have 1 to"},
        {PHEAD PBASE "\"ops\":[{\"key\":\"a\\u0000b\",\"value\":null}],\"side\":[],\"objects\":[]}",
         "ops[0]: \"key\" must have 1 to"},
        {PHEAD PBASE "\"ops\":[{\"value\":null}],\"side\":[],\"objects\":[]}",
         "ops[0]: missing member \"key\""},
        {PHEAD PBASE "\"ops\":[{\"key\":\"a\",\"if_equal\":7,\"value\":null}],\"side\":[],"
                     "\"objects\":[]}",
         "ops[0]: \"if_equal\" must be null, \"absent\" or a generation"},
        {PHEAD PBASE "\"ops\":[{\"key\":\"a\"}],\"side\":[],\"objects\":[]}",
         "ops[0]: missing member \"value\""},
        {PHEAD PBASE "\"ops\":[{\"key\":\"a\",\"value\":null},{\"key\":\"b\",\"value\":5}],"
                     "\"side\":[],\"objects\":[]}",
         "ops[1]: \"value\" must be an object or null"},
        {PHEAD PBASE "\"ops\":[{\"key\":\"a\",\"value\":{\"object\":\"00\",\"offset\":0,"
                     "\"length\":1,\"crc32c\":1}}],\"side\":[],\"objects\":[]}",
         "ops[0]: \"object\" is not 32 lower-case hex digits"},
        {PHEAD PBASE "\"ops\":[],\"side\":[{\"name\":\"chunk/0\",\"value\":null}],\"objects\":[]}",
         "side[0]: \"value\" must be an object"},
        {PHEAD PBASE "\"ops\":[],\"side\":[{\"value\":" PREF "}],\"objects\":[]}",
         "side[0]: missing member \"name\""},
        {PHEAD PBASE "\"ops\":[],\"side\":[[]],\"objects\":[]}", "side[0] must be an object"},
        {PHEAD PBASE "\"ops\":[],\"side\":[],\"objects\":[{\"object\":"
                     "\"000102030405060708090a0b0c0d0e0f\",\"kind\":\"blob\",\"items\":1}]}",
         "member \"objects\" item 0: \"kind\" is \"blob\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        expect_prepared_corrupt(cases[i].json, cases[i].part);
    /* A commit envelope is not a prepared set. */
    b.len = 0;
    make_envelope(&b, VS_KIND_COMMIT, PHEAD PBASE "\"ops\":[],\"side\":[],\"objects\":[]}");
    assert_error(vs_prepared_decode(b.data, b.len, PSET, &d), NDS_ECORRUPT,
                 "kind 'C' where a prepared set was expected");
    nds_buf_dispose(&b);
}
END_TEST

/* Every prefix and every bit flip of an encoded prepared set is refused (the crc covers the
 * payload), and the failed decode leaves nothing to free. */
START_TEST(prepared_truncations_and_flips) {
    vs_prepared p = sample_prepared(), d;
    nds_buf b = {0};
    NDS_OK(vs_prepared_encode(&p, &b));
    for (size_t cut = 0; cut < b.len; cut++) {
        ck_assert_int_eq(vs_prepared_decode(b.data, cut, PSET, &d), NDS_ECORRUPT);
        ck_assert(d.ops == NULL && d.nops == 0);
    }
    for (size_t i = 0; i < b.len; i++)
        for (int bit = 0; bit < 8; bit++) {
            b.data[i] ^= (uint8_t)(1u << bit);
            ck_assert_msg(vs_prepared_decode(b.data, b.len, PSET, &d) == NDS_ECORRUPT,
                          "byte %zu bit %d", i, bit);
            b.data[i] ^= (uint8_t)(1u << bit);
        }
    nds_buf_dispose(&b);
}
END_TEST

/* The harness's prepared-set seeds (selector 5): a full set, the smallest, each in both crc
 * modes (seed()). */
START_TEST(prepared_fuzz_seeds) {
    nds_buf b = {0};
    vs_prepared p = sample_prepared(), e = {.base_version = 0, .time_ns = 0};
    NDS_OK(vs_prepared_encode(&p, &b));
    seed("prepared_full", 5, 0, &b);
    b.len = 0;
    NDS_OK(vs_prepared_encode(&e, &b));
    seed("prepared_empty", 5, 0, &b);
    nds_buf_dispose(&b);
}
END_TEST

int main(void) {
    Suite *s = suite_create("versioned_format");
    TCase *tc = tcase_create("versioned_format");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, ids_hex_and_parse);
    tcase_add_test(tc, commit_keys);
    tcase_add_test(tc, envelope_round_trip_and_header);
    tcase_add_test(tc, envelope_refusals);
    tcase_add_test(tc, values_and_block_checksums);
    tcase_add_test(tc, value_block_message_names_block);
    tcase_add_test(tc, node_round_trips);
    tcase_add_test(tc, node_golden_bytes);
    tcase_add_test(tc, node_head_rules);
    tcase_add_test(tc, node_key_rules);
    tcase_add_test(tc, node_item_rules);
    tcase_add_test(tc, node_crc_and_encode_refusals);
    tcase_add_test(tc, node_bit_flips);
    tcase_add_test(tc, node_truncations);
    tcase_add_test(tc, commit_round_trips);
    tcase_add_test(tc, commit_encode_refusals);
    tcase_add_test(tc, commit_decode_rules);
    tcase_add_test(tc, commit_truncations_and_flips);
    tcase_add_test(tc, superseded_lists);
    tcase_add_test(tc, tags);
    tcase_add_test(tc, fuzz_seed_corpus);
    tcase_add_test(tc, prepared_round_trips);
    tcase_add_test(tc, prepared_decode_rules);
    tcase_add_test(tc, prepared_truncations_and_flips);
    tcase_add_test(tc, prepared_fuzz_seeds);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
