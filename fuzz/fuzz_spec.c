/* Fuzzes spec parsing (JSON text and URL pipelines) and opening arrays from the result on the memory
 * kvstore: whatever the text, a clean error or an open array, never a crash.
 *
 * Only memory:// stores may open. A spec can name a store in many ways (a bare path is a local
 * file path, a driver name can be spelled with JSON escapes), so no filter on the text can keep the
 * fuzzer off the file system: the harness replaces every other driver with one that refuses to open.
 * (Before, inputs found by the fuzzer created, and with "delete_existing" emptied, directories
 * relative to wherever the replay ran: the build directory under ctest.) */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ndstore/ndstore.h"
#include "ndstore/sys/kv_driver.h"

static int refuse_url(const char *rest, struct json_object *spec) {
    (void)rest;
    (void)spec;
    return NDS_EUNSUPPORTED;
}

static int refuse_open(void **state, const struct json_object *spec) {
    (void)state;
    (void)spec;
    return NDS_EUNSUPPORTED;
}

#define REFUSING(sym, name_, scheme) \
    static const nds_kv_driver sym = {.version = 1, .name = name_, .url_scheme = scheme, \
                                      .parse_url = refuse_url, .open = refuse_open}

REFUSING(no_file, "file", "file");
REFUSING(no_lmdb, "lmdb", "lmdb");
REFUSING(no_s3, "s3", "s3");
REFUSING(no_gcs, "gcs", "gs");
REFUSING(no_http, "http", "http");
REFUSING(no_https, "https", "https");
REFUSING(no_faulty, "faulty", NULL);

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void only_memory(void) {
    const nds_kv_driver *const refusing[] = {&no_file, &no_lmdb, &no_s3,    &no_gcs,
                                             &no_http, &no_https, &no_faulty};
    for (size_t i = 0; i < sizeof refusing / sizeof *refusing; i++)
        if (nds_kv_driver_register(refusing[i]) != 0) abort(); /* never fuzz with real stores */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pthread_once(&once, only_memory);
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    nds_array *a = NULL;
    if (nds_array_open(&a, text, NULL) == 0) nds_array_free(a);
    free(text);
    return 0;
}
