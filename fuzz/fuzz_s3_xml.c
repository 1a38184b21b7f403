/* libFuzzer harness for the s3 driver's XML reader (drivers/s3_xml.c): arbitrary bytes as a
 * ListObjectsV2 page (keys percent-decoded and not), an <Error> document, an
 * InitiateMultipartUploadResult and a CompleteMultipartUploadResult. Invariants trap: a parsed page
 * has n <= cap, non-NULL keys, and a next token whenever it is truncated; an upload id is
 * non-empty. Errors are expected. Threading: single-threaded. Ownership: everything is freed per
 * input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../drivers/s3_xml.h"

static void check_page(const char *xml, size_t len, int url) {
    nds_s3_list_page p;
    if (nds_s3_parse_list(xml, len, url, &p) == 0) {
        if (p.n > p.cap || (p.truncated && (!p.next_token || !p.next_token[0]))) __builtin_trap();
        for (size_t i = 0; i < p.n; i++)
            if (!p.keys[i]) __builtin_trap();
    }
    nds_s3_list_page_dispose(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 1 << 20) return 0;
    char *xml = malloc(size + 1);
    if (!xml) return 0;
    memcpy(xml, data, size);
    xml[size] = '\0';
    check_page(xml, size, 1);
    check_page(xml, size, 0);
    char code[64], msg[256], etag[128];
    nds_s3_parse_error(xml, size, code, sizeof code, msg, sizeof msg);
    if (strlen(code) >= sizeof code || strlen(msg) >= sizeof msg) __builtin_trap();
    char *id = NULL;
    if (nds_s3_parse_upload_id(xml, size, &id) == 0 && (!id || !id[0])) __builtin_trap();
    free(id);
    nds_xml_find(xml, size, "CompleteMultipartUploadResult/ETag", etag, sizeof etag);
    char *dec = nds_s3_url_decode(xml, size, true);
    free(dec);
    free(xml);
    return 0;
}
