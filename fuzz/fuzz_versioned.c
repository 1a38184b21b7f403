/* libFuzzer harness for the versioned store's on-disk decoders (drivers/versioned_format.c). The
 * first input byte chooses the decoder (0 node, 1 commit, 2 superseded list, 3 tag, 4 envelope),
 * the second is its parameter (node: the wanted level, above 32 meaning any; commit: the expected
 * version; envelope: the kind wanted), the rest is the stored object. A node's and a superseded
 * list's expected crc is taken from the object's own header; when the first byte's top bit is set,
 * that header crc is first replaced by the payload's true crc32c. Both model a hostile writer (it
 * controls crcs as well as bytes), and they let mutated payloads reach the structural checks,
 * which a crc mismatch would otherwise stop at the door.
 *
 * Invariants trap: whatever decodes re-encodes to exactly the input bytes (nodes and superseded
 * lists: the encoding is canonical) or, for commits, to an object that decodes again to the same
 * version and tree; an opened envelope's payload lies inside the input. Errors are expected and
 * must come with a message. Threading: single-threaded, as libFuzzer runs it. Ownership:
 * everything is freed per input.
 */
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
    switch ((data[0] & 0x7f) % 5) {
    case 0: fuzz_node(obj, n, data[1], crc); break;
    case 1: fuzz_commit(obj, n, data[1]); break;
    case 2: fuzz_superseded(obj, n, crc); break;
    case 3: check_error(vs_tag_decode(obj, n, "fuzz", &version)); break;
    default: fuzz_envelope(obj, n, (vs_kind)data[1]); break;
    }
    free(obj);
    return 0;
}
