/* CRC-32C (Castagnoli), shared by the zarr v3 "crc32c" codec and the versioned store's checksums.
 *
 * The checksum uses the SSE4.2 crc32 instruction when the CPU has it (checked once at run time
 * with __builtin_cpu_supports, so the binary still runs on older x86-64 CPUs), and a slicing-by-8
 * table otherwise (other architectures, or no SSE4.2). Debian ships no C crc32c library, hence
 * this file. Threading: the tables are built once under pthread_once.
 *
 * The instruction has a latency of 3 cycles and a throughput of 1, so one dependent chain runs at
 * a third of its speed. Long inputs are cut into three equal blocks checksummed by three
 * interleaved chains; the CRC register is linear over GF(2), so the three results combine as
 * crc(A|B|C) = shift(shift(a) ^ b) ^ c, where shift(r) is the register after the block's length of
 * zero bytes. shift is linear too, so it is four table lookups (tables built from the 32 basis
 * registers, each run through the instruction once at start-up).
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

#if defined(__x86_64__) && defined(__GNUC__)
/* Block lengths of the three-chain loop: long blocks for the bulk, short ones for the rest. */
#define CRC_LONG 8192
#define CRC_SHORT 256

/* shift_long[k][b] / shift_short[k][b]: the register after CRC_LONG / CRC_SHORT zero bytes,
 * starting from byte b in byte position k of the register (the rest zero). */
static uint32_t shift_long[4][256], shift_short[4][256];

static void shift_table_build(uint32_t tables[4][256], size_t len);
#endif

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
    if (crc_hw) {
        shift_table_build(shift_long, CRC_LONG);
        shift_table_build(shift_short, CRC_SHORT);
    }
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
/* One chain, 8 bytes per instruction. Compiled for SSE4.2 only in these functions; called only
 * when the CPU has it. */
__attribute__((target("sse4.2"))) static uint32_t crc_hw_chain(uint32_t crc, const uint8_t *p,
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

static uint32_t crc_shift(uint32_t tables[4][256], uint32_t r) {
    return tables[0][r & 0xff] ^ tables[1][(r >> 8) & 0xff] ^ tables[2][(r >> 16) & 0xff] ^
           tables[3][r >> 24];
}

/* Builds the table of a shift over len zero bytes from the shifts of the 32 one-bit registers. */
static void shift_table_build(uint32_t tables[4][256], size_t len) {
    static const uint8_t zeros[CRC_LONG];
    uint32_t basis[32];
    for (int bit = 0; bit < 32; bit++) basis[bit] = crc_hw_chain(1u << bit, zeros, len);
    for (int k = 0; k < 4; k++)
        for (uint32_t b = 0; b < 256; b++) {
            uint32_t r = 0;
            for (int bit = 0; bit < 8; bit++)
                if (b & (1u << bit)) r ^= basis[8 * k + bit];
            tables[k][b] = r;
        }
}

/* Three chains over three consecutive blocks of len bytes each (len a multiple of 8). */
__attribute__((target("sse4.2"))) static uint32_t crc_hw_triple(uint32_t crc, const uint8_t *p,
                                                                size_t len,
                                                                uint32_t tables[4][256]) {
    uint64_t a = crc, b = 0, c = 0;
    for (size_t i = 0; i < len; i += 8) {
        uint64_t va, vb, vc;
        memcpy(&va, p + i, 8);
        memcpy(&vb, p + len + i, 8);
        memcpy(&vc, p + 2 * len + i, 8);
        a = __builtin_ia32_crc32di(a, va);
        b = __builtin_ia32_crc32di(b, vb);
        c = __builtin_ia32_crc32di(c, vc);
    }
    uint32_t ab = crc_shift(tables, (uint32_t)a) ^ (uint32_t)b;
    return crc_shift(tables, ab) ^ (uint32_t)c;
}

static uint32_t crc_hw_run(uint32_t crc, const uint8_t *p, size_t n) {
    for (; n >= 3 * CRC_LONG; p += 3 * CRC_LONG, n -= 3 * CRC_LONG)
        crc = crc_hw_triple(crc, p, CRC_LONG, shift_long);
    for (; n >= 3 * CRC_SHORT; p += 3 * CRC_SHORT, n -= 3 * CRC_SHORT)
        crc = crc_hw_triple(crc, p, CRC_SHORT, shift_short);
    return crc_hw_chain(crc, p, n);
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

