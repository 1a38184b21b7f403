/* libFuzzer harness for the versioned store's on-disk decoders (drivers/versioned_format.c). The
 * first input byte chooses the decoder (0 node, 1 commit, 2 superseded list, 3 tag, 4 envelope,
 * 5 prepared set, 6 gc state; other values modulo 5, as before prepared sets had one), the second
 * is its parameter (node: the wanted level, above 32 meaning any; commit: the expected version;
 * envelope: the kind wanted; prepared set: unused; gc state: the expected sequence number, 0 any),
 * the rest is the stored object. A node's and a
 * superseded list's expected crc is taken from the object's own header; when the first byte's top
 * bit is set, that header crc is first replaced by the payload's true crc32c. Both model a hostile
 * writer (it controls crcs as well as bytes), and they let mutated payloads reach the structural
 * checks, which a crc mismatch would otherwise stop at the door.
 *
 * Invariants trap: whatever decodes re-encodes to exactly the input bytes (nodes and superseded
 * lists: the encoding is canonical) or, for commits, to an object that decodes again to the same
 * version and tree, for prepared sets to one that decodes again to the same set (and a refused
 * set leaves nothing allocated), for gc states to exactly the input; an opened envelope's payload
 * lies inside the input. Errors are expected and must come with a message. Threading:
 * single-threaded, as libFuzzer runs it. Ownership: everything is freed per input.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ndstore/errors.h"
#include "internal/crc32c.h"
#include "internal/util.h"
#include "../drivers/versioned_internal.h"

static void check_error(int rc) {
    if (rc != 0 && (rc > 0 || !nds_error_last()->message[0])) __builtin_trap();
}

static void same_bytes(const nds_buf *b, const uint8_t *p, size_t n) {
    if (b->len != n || memcmp(b->data, p, n) != 0) __builtin_trap();
}

static void fuzz_node(const uint8_t *p, size_t n, unsigned level, uint32_t crc) {
    vs_node *node = NULL;
    int rc = vs_node_decode(p, n, crc, level, "fuzz", &node);
    check_error(rc);
    if (rc) {
        if (node) __builtin_trap();
        return;
    }
    if (level <= VS_MAX_LEVEL && node->level != level) __builtin_trap();
    nds_buf b = {0};
    size_t len;
    uint32_t crc2;
    if (vs_node_encode(node, &b, &len, &crc2) != 0 || crc2 != crc) __builtin_trap();
    same_bytes(&b, p, n);
    nds_buf_dispose(&b);
    vs_node_free(node);
}

static void fuzz_commit(const uint8_t *p, size_t n, uint64_t version) {
    vs_commit c, again;
    int rc = vs_commit_decode(p, n, version, "fuzz", &c);
    check_error(rc);
    if (rc) return;
    nds_buf b = {0};
    if (c.version != version || c.parent != version - 1) __builtin_trap();
    if (vs_commit_encode(&c, &b) != 0) __builtin_trap();
    if (vs_commit_decode(b.data, b.len, version, "fuzz again", &again) != 0) __builtin_trap();
    if (again.nobjects != c.nobjects || again.root.empty != c.root.empty ||
        again.root.keys != c.root.keys || again.has_superseded != c.has_superseded ||
        (c.message && strcmp(c.message, again.message) != 0))
        __builtin_trap();
    vs_commit_dispose(&again);
    vs_commit_dispose(&c);
    nds_buf_dispose(&b);
}

static void fuzz_superseded(const uint8_t *p, size_t n, uint32_t crc) {
    vs_superseded *s = NULL;
    size_t count;
    int rc = vs_superseded_decode(p, n, crc, "fuzz", &s, &count);
    check_error(rc);
    if (rc) return;
    nds_buf b = {0};
    size_t len;
    if (vs_superseded_encode(s, count, &b, &len, NULL) != 0) __builtin_trap();
    same_bytes(&b, p, n);
    nds_buf_dispose(&b);
    free(s);
}

static void fuzz_envelope(const uint8_t *p, size_t n, vs_kind kind) {
    const uint8_t *payload;
    size_t len;
    int rc = vs_envelope_open(p, n, kind, "fuzz", &payload, &len, NULL);
    check_error(rc);
    if (rc == 0 && (payload != p + VS_HEADER_SIZE || len != n - VS_HEADER_SIZE)) __builtin_trap();
}

static bool same_generation(const nds_generation *a, const nds_generation *b) {
    return a->kind == b->kind && (a->kind != NDS_GEN_VALUE || strcmp(a->value, b->value) == 0);
}

static bool same_ref(const vs_ref *a, const vs_ref *b) {
    return memcmp(&a->object, &b->object, sizeof a->object) == 0 && a->offset == b->offset &&
           a->length == b->length && a->crc == b->crc;
}

static void same_prepared(const vs_prepared *a, const vs_prepared *b) {
    if (a->base_version != b->base_version || a->time_ns != b->time_ns || a->nops != b->nops ||
        a->nside != b->nside || a->nobjects != b->nobjects)
        __builtin_trap();
    for (size_t i = 0; i < a->nops; i++) {
        const vs_prepared_op *x = &a->ops[i], *y = &b->ops[i];
        if (strcmp(x->key, y->key) != 0 || x->is_delete != y->is_delete ||
            !same_generation(&x->if_equal, &y->if_equal) ||
            (!x->is_delete && !same_ref(&x->value, &y->value)))
            __builtin_trap();
    }
    for (size_t i = 0; i < a->nside; i++)
        if (strcmp(a->side[i].name, b->side[i].name) != 0 ||
            !same_ref(&a->side[i].value, &b->side[i].value))
            __builtin_trap();
    for (size_t i = 0; i < a->nobjects; i++)
        if (memcmp(&a->objects[i].object, &b->objects[i].object, sizeof a->objects[i].object) ||
            a->objects[i].kind != b->objects[i].kind || a->objects[i].items != b->objects[i].items)
            __builtin_trap();
}

static void fuzz_prepared(const uint8_t *p, size_t n) {
    vs_prepared set, again;
    int rc = vs_prepared_decode(p, n, "fuzz", &set);
    check_error(rc);
    if (rc) {
        if (set.ops || set.side || set.objects) __builtin_trap(); /* nothing half-decoded leaks */
        return;
    }
    for (size_t i = 0; i < set.nops; i++)
        if (!set.ops[i].key[0] || strlen(set.ops[i].key) > VS_KEY_MAX) __builtin_trap();
    nds_buf b = {0};
    if (vs_prepared_encode(&set, &b) != 0) __builtin_trap();
    if (vs_prepared_decode(b.data, b.len, "fuzz again", &again) != 0) __builtin_trap();
    same_prepared(&set, &again);
    vs_prepared_dispose(&again);
    vs_prepared_dispose(&set);
    nds_buf_dispose(&b);
}

/* A gc state (versioned_gc_state.c): decoded states re-encode to exactly the input (the encoding
 * is canonical), their collected ranges answer lookups consistently, and a refused state leaves
 * nothing allocated. expect_seq 0 accepts any sequence number. */
static void fuzz_gc_state(const uint8_t *p, size_t n, uint64_t expect_seq) {
    vs_gc_state st;
    int rc = vs_gc_state_decode(p, n, expect_seq, "fuzz", &st);
    check_error(rc);
    if (rc) {
        if (st.collected || st.objects || st.deleting || st.pending || st.doomed) __builtin_trap();
        return;
    }
    if (expect_seq && st.seq != expect_seq) __builtin_trap();
    for (size_t i = 0; i < st.ncollected; i++)
        if (!vs_gc_state_collected(&st, st.collected[i].first) ||
            !vs_gc_state_collected(&st, st.collected[i].last) ||
            vs_gc_state_collected(&st, st.collected[i].last + 1))
            __builtin_trap();
    nds_buf b = {0};
    if (vs_gc_state_encode(&st, &b) != 0) __builtin_trap();
    same_bytes(&b, p, n);
    nds_buf_dispose(&b);
    vs_gc_state_dispose(&st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2 || size > (1 << 20)) return 0;
    const uint8_t *p = data + 2;
    size_t n = size - 2;
    /* A copy of exactly the object's bytes, so ASan sees any read past its end. */
    uint8_t *obj = malloc(n ? n : 1);
    if (!obj) return 0;
    memcpy(obj, p, n);
    if ((data[0] & 0x80) && n >= VS_HEADER_SIZE)
        nds_store_le32(obj + 12, nds_crc32c(obj + VS_HEADER_SIZE, n - VS_HEADER_SIZE));
    uint32_t crc = n >= VS_HEADER_SIZE ? nds_load_le32(obj + 12) : 0;
    uint64_t version;
    unsigned selector = data[0] & 0x7f;
    switch (selector == 5 || selector == 6 ? selector : selector % 5) {
    case 0: fuzz_node(obj, n, data[1], crc); break;
    case 1: fuzz_commit(obj, n, data[1]); break;
    case 2: fuzz_superseded(obj, n, crc); break;
    case 3: check_error(vs_tag_decode(obj, n, "fuzz", &version)); break;
    case 4: fuzz_envelope(obj, n, (vs_kind)data[1]); break;
    case 5: fuzz_prepared(obj, n); break;
    default: fuzz_gc_state(obj, n, data[1]); break;
    }
    free(obj);
    return 0;
}
