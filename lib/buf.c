/* Growable byte buffers (nds_buf) and the bytes handed across the driver boundary (nds_bytes). */
#include <stdlib.h>
#include <string.h>

#include "ndstore/sys/buf.h"
#include "ndstore/sys/kv_driver.h"
#include "internal/error.h"

int nds_buf_reserve(nds_buf *b, size_t need) {
    if (need <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    uint8_t *p = realloc(b->data, cap);
    if (!p) return nds_err(NDS_ENOMEM, "out of memory allocating %zu bytes", cap);
    b->data = p;
    b->cap = cap;
    return 0;
}

int nds_buf_append(nds_buf *b, const void *p, size_t n) {
    if (n > SIZE_MAX - b->len) return nds_err(NDS_ENOMEM, "buffer size overflow");
    int rc = nds_buf_reserve(b, b->len + n);
    if (rc) return rc;
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

void nds_buf_dispose(nds_buf *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}

static void release_malloc(void *ctx, const uint8_t *data) {
    (void)ctx;
    free((void *)data);
}

void nds_bytes_release(nds_bytes *b) {
    if (b->release) b->release(b->release_ctx, b->data);
    memset(b, 0, sizeof *b);
}

int nds_bytes_copy(nds_bytes *b, const void *data, size_t len) {
    uint8_t *p = malloc(len ? len : 1);
    if (!p) return nds_err(NDS_ENOMEM, "out of memory allocating %zu bytes", len);
    if (len) memcpy(p, data, len);
    nds_bytes_take(b, p, len);
    return 0;
}

void nds_bytes_take(nds_bytes *b, uint8_t *p, size_t len) {
    b->data = p;
    b->len = len;
    b->release = release_malloc;
    b->release_ctx = NULL;
}

void nds_read_result_dispose(nds_read_result *r) { nds_bytes_release(&r->value); }

void nds_free(void *p) { free(p); }
