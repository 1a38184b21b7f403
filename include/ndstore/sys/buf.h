/* A growable owned byte buffer, used by codec and format authors. One thread at a time. */
#ifndef NDSTORE_SYS_BUF_H
#define NDSTORE_SYS_BUF_H

#include <stddef.h>
#include <stdint.h>
#include "ndstore/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Bytes data[0..len) in malloc'd storage of cap bytes. Zero-initialise before first use. */
typedef struct nds_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
} nds_buf;

/** Ensures cap >= need (len unchanged). @return 0 or NDS_ENOMEM */
NDS_API int nds_buf_reserve(nds_buf *b, size_t need);
/** Appends n bytes. @return 0 or NDS_ENOMEM */
NDS_API int nds_buf_append(nds_buf *b, const void *p, size_t n);
/** Frees the storage and zeroes b. Accepts a zeroed buffer. */
NDS_API void nds_buf_dispose(nds_buf *b);

#ifdef __cplusplus
}
#endif
#endif
