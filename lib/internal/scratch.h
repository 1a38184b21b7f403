/* Per-thread scratch buffers (lib/scratch.c), reused across calls on a thread and freed when the
 * thread exits. Thread-safe: each thread has its own. */
#ifndef NDS_INTERNAL_SCRATCH_H
#define NDS_INTERNAL_SCRATCH_H

#include <stddef.h>
#include <stdint.h>
#include "ndstore/sys/buf.h"

/** The slots: the
 * core uses the first two; formats use the FORMAT slots (a format's decode runs while the
 * core holds NDS_SCRATCH_CHUNK). */
enum {
    NDS_SCRATCH_CHUNK = 0,
    NDS_SCRATCH_ENCODED,
    NDS_SCRATCH_FORMAT0,
    NDS_SCRATCH_FORMAT1,
    NDS_SCRATCH_FORMAT2,
    NDS_SCRATCH_CODEC,  /* a codec's stored bytes read through a reader (lib/codec_decode.c) */
    NDS_SCRATCH_DECODE, /* a value decoded whole for a sink (nds_codec_decode_fallback) */
    NDS_SCRATCH_BLOCKS, /* a codec's block buffers (blosc_blocks.c), over any of the above */
    NDS_SCRATCH_SLOTS
};
/** The calling thread's buffer of slot (its len is whatever the last user left); NULL when out of
 * memory. */
nds_buf *nds_scratch_buf(int slot);
/** Slot's storage grown to at least n bytes; NULL with NDS_ENOMEM set. */
uint8_t *nds_scratch(int slot, size_t n);
/** The calling thread's buffer of slot, grown to at least n bytes (one when n is 0); NULL with
 * NDS_ENOMEM set. */
nds_buf *nds_scratch_reserve(int slot, size_t n);
/** Frees the slot's storage when it holds more than is worth keeping (64 MiB), after a huge chunk.
 */
void nds_scratch_trim(int slot);

#endif
