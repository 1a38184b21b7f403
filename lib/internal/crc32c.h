/* CRC-32C (Castagnoli): initial value and final xor 0xffffffff, as zarr v3, iSCSI and the
 * versioned store use. lib/crc32c.c. */
#ifndef NDS_INTERNAL_CRC32C_H
#define NDS_INTERNAL_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/** CRC-32C of p[0..n). */
uint32_t nds_crc32c(const uint8_t *p, size_t n);
/** The CRC-32C of the bytes whose CRC-32C is crc followed by p[0..n) (crc 0 starts a new one). */
uint32_t nds_crc32c_extend(uint32_t crc, const uint8_t *p, size_t n);
/** nds_crc32c through the slicing table whatever the CPU has (so tests cover both paths). */
uint32_t nds_crc32c_portable(const uint8_t *p, size_t n);

#endif
