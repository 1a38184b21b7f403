/* Fuzzes spec parsing (JSON text and URL pipelines) and opening arrays from the result on the memory
 * kvstore: whatever the text, a clean error or an open array, never a crash. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ndstore/ndstore.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    /* Only memory:// stores: a fuzzer must not create files wherever a spec points. */
    if (strstr(text, "file") == NULL && text[0] != '@' && (text[0] == '{' || strncmp(text, "memory://", 9) == 0)) {
        nds_array *a = NULL;
        if (nds_array_open(&a, text, NULL) == 0) nds_array_free(a);
    }
    free(text);
    return 0;
}
