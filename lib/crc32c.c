/* CRC-32C (Castagnoli), shared by the zarr v3 "crc32c" codec and the versioned store's checksums.
 *
 * The checksum uses the SSE4.2 crc32 instruction when the CPU has it (checked once at run time
 * with __builtin_cpu_supports, so the binary still runs on older x86-64 CPUs), and a slicing-by-8
 * table otherwise (other architectures, or no SSE4.2). Debian ships no C crc32c library, hence
 * this file. Threading: the table is built once under pthread_once.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "internal/crc32c.h"
#include "internal/util.h"

/* The reflected Castagnoli polynomial. */
#define CRC32C_POLY 0x82F63B78u

/* table[k][b]: the CRC of byte b followed by k zero bytes (slicing-by-8). */
static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static bool crc_hw;

static void crc_init(void) {
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t c = b;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (CRC32C_POLY & (0u - (c & 1u)));
        crc_table[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; b++)
        for (int k = 1; k < 8; k++)
            crc_table[k][b] = (crc_table[k - 1][b] >> 8) ^ crc_table[0][crc_table[k - 1][b] & 0xff];
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    crc_hw = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t crc_sw(uint32_t crc, const uint8_t *p, size_t n) {
    for (; n >= 8; p += 8, n -= 8) {
        uint32_t lo = crc ^ nds_load_le32(p);
        crc = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
              crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^ crc_table[3][p[4]] ^
              crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
    }
    while (n--) crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
    return crc;
}

#if defined(__x86_64__) && defined(__GNUC__)
/* Compiled for SSE4.2 only in this function; called only when the CPU has it. */
__attribute__((target("sse4.2"))) static uint32_t crc_hw_run(uint32_t crc, const uint8_t *p,
                                                             size_t n) {
    uint64_t c = crc;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t v;
        memcpy(&v, p, 8); /* x86 is little-endian, as the instruction expects */
        c = __builtin_ia32_crc32di(c, v);
    }
    uint32_t c32 = (uint32_t)c;
    while (n--) c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32;
}
#endif

uint32_t nds_crc32c_portable(const uint8_t *p, size_t n) {
    pthread_once(&crc_once, crc_init);
    return ~crc_sw(0xffffffffu, p, n);
}

uint32_t nds_crc32c_extend(uint32_t crc, const uint8_t *p, size_t n) {
    pthread_once(&crc_once, crc_init);
    crc = ~crc;
#if defined(__x86_64__) && defined(__GNUC__)
    if (crc_hw) return ~crc_hw_run(crc, p, n);
#endif
    return ~crc_sw(crc, p, n);
}

uint32_t nds_crc32c(const uint8_t *p, size_t n) { return nds_crc32c_extend(0, p, n); }

