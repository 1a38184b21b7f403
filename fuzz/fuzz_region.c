/* Fuzzes the NumPy-style region parser: any text against a fixed 3-d shape. A parsed box must lie inside
 * the shape. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ndstore/box.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const uint64_t shape[3] = {100, 1, 1u << 30};
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    nds_box box;
    if (nds_box_parse(&box, text, 3, shape) == 0 && nds_box_check(&box, 3, shape) != 0) abort();
    free(text);
    return 0;
}
