/* libFuzzer harness for the compressed_segmentation decoder (and encoder).
 *
 * Input: byte 0 picks the label size (bit 0: uint64, else uint32) and the channel count (bits 1-2:
 * 1..3), bytes 1-3 the volume (1..16 per dimension), bytes 4-6 the block size (1..8); the rest is
 * an encoded chunk. The chunk is decoded into a volume-sized buffer; when it decodes, the volume is
 * encoded again and must decode to the same labels (and, being the encoder's own output, re-encode
 * to the same bytes). Invariant violations trap; errors are expected. Threading: single-threaded.
 * Ownership: everything is freed per input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ndstore/ndstore.h"
#include "../formats/codecs/compressed_segmentation.h"

static void check(int ok) {
    if (!ok) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 7 || size > (1u << 20)) return 0;
    size_t elem = data[0] & 1 ? 8 : 4, nchan = 1 + (data[0] >> 1 & 3) % 3;
    uint64_t vol[3], block[3];
    for (int d = 0; d < 3; d++) {
        vol[d] = 1 + data[1 + d] % 16;
        block[d] = 1 + data[4 + d] % 8;
    }
    size_t n = (size_t)(vol[0] * vol[1] * vol[2]) * nchan;
    int64_t st[4] = {1, (int64_t)vol[0], (int64_t)(vol[0] * vol[1]),
                     (int64_t)(vol[0] * vol[1] * vol[2])};
    uint8_t *a = calloc(n, elem), *b = calloc(n, elem);
    nds_buf e1 = {0}, e2 = {0};
    nds_cseg_volume v = {elem, vol, nchan, block, st};
    if (a && b && nds_cseg_decode(data + 7, size - 7, &v, a) == 0) {
        check(nds_cseg_encode(a, elem, vol, st, nchan, block, &e1) == 0);
        check(nds_cseg_decode(e1.data, e1.len, &v, b) == 0);
        check(memcmp(a, b, n * elem) == 0);
        check(nds_cseg_encode(b, elem, vol, st, nchan, block, &e2) == 0);
        check(e1.len == e2.len && memcmp(e1.data, e2.data, e1.len) == 0);
    }
    nds_buf_dispose(&e1);
    nds_buf_dispose(&e2);
    free(a);
    free(b);
    return 0;
}
