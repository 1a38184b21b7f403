/* Helpers every format needs the same way: chunk keys made of decimal grid indices, and per-thread
 * scratch buffers. */
#ifndef NDS_INTERNAL_FORMAT_UTIL_H
#define NDS_INTERNAL_FORMAT_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include "ndstore/kvstore.h"
#include "ndstore/sys/buf.h"
#include "internal/json_util.h"

/**
 * Writes a chunk key into buf: prefix, then the rank indices of cell, each preceded by sep except
 * the first when prefix is empty ("0.1" for zarr v2, "c/0/1" for zarr v3 with prefix "c"). Rank 0
 * with an empty prefix is "0", zarr's convention. NDS_ERANGE when it does not fit in cap.
 */
int nds_chunk_key_format(char *buf, size_t cap, const char *prefix, char sep, const uint64_t *cell,
                         size_t rank);
/**
 * The inverse: 1 (and cell filled) when key is exactly what nds_chunk_key_format writes for some
 * cell whose every index d is below grid[d] (decimal, no leading zeros, no sign); else 0.
 */
int nds_chunk_key_parse(const char *key, const char *prefix, char sep, const uint64_t *grid,
                        size_t rank, uint64_t *cell);

/** Reads key (a metadata document): *found = false when it is missing (r is then empty); else r
 * holds it and must be disposed. Errors read "<who>: reading <key> of <url>: ...". */
int nds_format_read_key(nds_kvstore *kv, const char *key, const char *who, const char *url,
                        nds_read_result *r, bool *found);
/** Writes doc under key, printed in style, conditional on if_equal (NULL: unconditional).
 * NDS_ECONFLICT comes back as it is (the caller retries or reports); other errors read "<who>:
 * writing <key> of <url>". */
int nds_format_write_json(nds_kvstore *kv, const char *key, const json_object *doc,
                          const nds_json_style *style, const nds_generation *if_equal,
                          const char *who, const char *url);

/** Per-thread scratch buffers, reused across calls on a thread and freed when the thread exits. The
 * core uses the first two slots; formats use the FORMAT slots (a format's decode runs while the
 * core holds NDS_SCRATCH_CHUNK). */
enum {
    NDS_SCRATCH_CHUNK = 0,
    NDS_SCRATCH_ENCODED,
    NDS_SCRATCH_FORMAT0,
    NDS_SCRATCH_FORMAT1,
    NDS_SCRATCH_FORMAT2,
    NDS_SCRATCH_SLOTS
};
/** The calling thread's buffer of slot (its len is whatever the last user left); NULL when out of
 * memory. */
nds_buf *nds_scratch_buf(int slot);
/** Slot's storage grown to at least n bytes; NULL with NDS_ENOMEM set. */
uint8_t *nds_scratch(int slot, size_t n);
/** Frees the slot's storage when it holds more than is worth keeping (64 MiB), after a huge chunk.
 */
void nds_scratch_trim(int slot);

#endif
