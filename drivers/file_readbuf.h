/* Reusable per-thread read buffers for the file kvstore driver (drivers/kv_file.c).
 *
 * A value read by a thread lands in that thread's buffer when the buffer is free and the value is
 * at most NDS_FILE_READBUF_MAX bytes. A fresh allocation per read makes glibc grow its heap past
 * values of slightly different sizes and fault new pages in: a full read of many chunks paid that in
 * peak RSS (a float32 zstd read of 4 MiB chunks added 18.0 MiB instead of 15.0) and in time. The
 * bytes are handed out with a release that gives the buffer back; a release on another thread, or
 * after the owning thread has exited, is settled by the buffer's state word, so any thread may
 * release.
 *
 * Memory: each thread that reads keeps one buffer of up to NDS_FILE_READBUF_MAX bytes until it
 * exits. Threading: take on any thread (it uses that thread's buffer); release from any thread.
 */
#ifndef NDS_DRIVERS_FILE_READBUF_H
#define NDS_DRIVERS_FILE_READBUF_H

#include <stddef.h>
#include <stdint.h>

#include "ndstore/kvstore.h"

#define NDS_FILE_READBUF_MAX ((size_t)16 << 20)

/**
 * A buffer of at least len bytes for a value, with b's release set to give it back: the thread's
 * buffer when it is free and len fits, else a new allocation. b->data and b->len are set (len).
 * @return the writable buffer, or NULL when out of memory (b untouched)
 */
uint8_t *nds_file_readbuf_take(size_t len, nds_bytes *b);

#endif
