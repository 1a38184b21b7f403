/* vlen-utf8 / vlen-bytes chunk lists (vlen.h): decode with every length checked against the bytes
 * present before anything is allocated or copied, encode from offsets + bytes. */
#include <stdlib.h>
#include <string.h>

#include "vlen.h"
#include "internal/dtype_util.h"
#include "internal/error.h"

static uint32_t load_u32le(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void store_u32le(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

void nds_vlen_list_dispose(nds_vlen_list *l) {
    free(l->offsets);
    free(l->data);
    memset(l, 0, sizeof *l);
}

/* First pass: walks the headers, checking each length against what is left; the total of the
 * element bytes into *total. */
static int vlen_scan(const uint8_t *in, size_t len, uint64_t count, uint64_t *total) {
    size_t at = 4;
    *total = 0;
    for (uint64_t i = 0; i < count; i++) {
        if (len - at < 4)
            return nds_err(NDS_ECORRUPT, "vlen: element %llu: its length header is past the end "
                                         "(%zu bytes)", (unsigned long long)i, len);
        uint32_t n = load_u32le(in + at);
        at += 4;
        if (n > len - at)
            return nds_err(NDS_ECORRUPT, "vlen: element %llu: length %u runs past the end (%zu "
                                         "bytes left)", (unsigned long long)i, n, len - at);
        at += n;
        *total += n;
    }
    if (at != len)
        return nds_err(NDS_ECORRUPT, "vlen: %zu bytes after the last of %llu elements", len - at,
                       (unsigned long long)count);
    return 0;
}

int nds_vlen_decode(const uint8_t *in, size_t len, uint64_t expected, bool utf8, nds_vlen_list *out) {
    memset(out, 0, sizeof *out);
    if (len < 4)
        return nds_err(NDS_ECORRUPT, "vlen: %zu bytes, fewer than the 4 of the element count", len);
    uint64_t count = load_u32le(in), total;
    if (count != expected)
        return nds_err(NDS_ECORRUPT, "vlen: %llu elements stored, the chunk has %llu",
                       (unsigned long long)count, (unsigned long long)expected);
    if (count > (len - 4) / 4) /* each element needs its 4-byte header: bounds the allocation */
        return nds_err(NDS_ECORRUPT, "vlen: %llu elements cannot fit in %zu bytes",
                       (unsigned long long)count, len);
    int rc = vlen_scan(in, len, count, &total);
    if (rc) return rc;
    out->offsets = malloc((size_t)(count + 1) * sizeof *out->offsets);
    out->data = malloc(total ? (size_t)total : 1);
    if (!out->offsets || !out->data) {
        nds_vlen_list_dispose(out);
        return nds_err(NDS_ENOMEM, "vlen: out of memory for %llu elements", (unsigned long long)count);
    }
    size_t at = 4;
    uint64_t pos = 0;
    for (uint64_t i = 0; i < count; i++) {
        uint32_t n = load_u32le(in + at);
        if (utf8 && !nds_utf8_valid(in + at + 4, n)) {
            nds_vlen_list_dispose(out);
            return nds_err(NDS_ECORRUPT, "vlen-utf8: element %llu is not valid UTF-8",
                           (unsigned long long)i);
        }
        out->offsets[i] = pos;
        memcpy(out->data + pos, in + at + 4, n);
        pos += n;
        at += 4 + (size_t)n;
    }
    out->offsets[count] = pos;
    out->count = count;
    return 0;
}

int nds_vlen_encode(const uint64_t *offsets, const uint8_t *data, uint64_t count, bool utf8,
                    nds_buf *out) {
    if (count > UINT32_MAX || offsets[0] != 0)
        return nds_err(NDS_EINVAL, "vlen: %llu elements (at most 2^32-1, offsets from 0)",
                       (unsigned long long)count);
    uint8_t head[4];
    store_u32le(head, (uint32_t)count);
    int rc = nds_buf_append(out, head, 4);
    for (uint64_t i = 0; rc == 0 && i < count; i++) {
        if (offsets[i + 1] < offsets[i] || offsets[i + 1] - offsets[i] > UINT32_MAX)
            return nds_err(NDS_EINVAL, "vlen: element %llu: offsets decrease or it is longer than "
                                       "2^32-1 bytes", (unsigned long long)i);
        uint64_t n = offsets[i + 1] - offsets[i];
        if (utf8 && !nds_utf8_valid(data + offsets[i], (size_t)n))
            return nds_err(NDS_EINVAL, "vlen-utf8: element %llu is not valid UTF-8",
                           (unsigned long long)i);
        store_u32le(head, (uint32_t)n);
        rc = nds_buf_append(out, head, 4);
        if (rc == 0) rc = nds_buf_append(out, data + offsets[i], (size_t)n);
    }
    return rc ? nds_err(rc, "vlen: out of memory") : 0;
}
