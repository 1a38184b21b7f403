/* libFuzzer harness for the vlen-utf8 / vlen-bytes chunk decoder (formats/codecs/vlen.c, issue 20).
 *
 * Input layout: byte 0 holds flags (bit 0: check UTF-8; bit 1: expect the count the payload itself
 * states, else byte 1 is the expected count); the payload starts at byte 2. Decoding must succeed
 * or fail with NDS_ECORRUPT, never read past the payload or crash (huge counts and lengths must not
 * allocate before they are checked). A payload that decodes must satisfy the list's invariants and
 * encode back to exactly itself (the layout has one encoding per list).
 * Run: fuzz_vlen fuzz/corpus/fuzz_vlen/ ; replayed in CI by replay_main.c.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ndstore/errors.h"
#include "../formats/codecs/vlen.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    bool utf8 = data[0] & 1, own_count = data[0] & 2;
    const uint8_t *payload = data + 2;
    size_t len = size - 2;
    /* an exact-size copy, so ASan sees any read past the payload */
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy) return 0;
    memcpy(copy, payload, len);
    uint64_t expected = data[1];
    if (own_count && len >= 4)
        expected = (uint64_t)copy[0] | (uint64_t)copy[1] << 8 | (uint64_t)copy[2] << 16 |
                   (uint64_t)copy[3] << 24;
    nds_vlen_list l;
    int rc = nds_vlen_decode(copy, len, expected, utf8, &l);
    if (rc != 0 && rc != NDS_ECORRUPT) abort();
    if (rc == 0) {
        if (l.count != expected || l.offsets[0] != 0) abort();
        for (uint64_t i = 0; i < l.count; i++)
            if (l.offsets[i + 1] < l.offsets[i]) abort();
        if (l.offsets[l.count] + 4 * (l.count + 1) != len) abort();
        nds_buf out = {0};
        if (nds_vlen_encode(l.offsets, l.data, l.count, utf8, &out) != 0) abort();
        if (out.len != len || memcmp(out.data, copy, len) != 0) abort();
        nds_buf_dispose(&out);
        nds_vlen_list_dispose(&l);
    } else if (l.offsets || l.data) {
        abort(); /* a failed decode leaves nothing to free */
    }
    free(copy);
    return 0;
}
