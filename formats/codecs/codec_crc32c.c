/* The "crc32c" codec (zarr v3): encode appends the CRC-32C (Castagnoli) of the data as 4
 * little-endian bytes; decode checks and strips it ("crc32c mismatch" on failure).
 *
 * The checksum uses the SSE4.2 crc32 instruction when the CPU has it (checked once at run time
 * with __builtin_cpu_supports, so the binary still runs on older x86-64 CPUs), and a slicing-by-8
 * table otherwise (other architectures, or no SSE4.2). Debian ships no C crc32c library, hence
 * this file. Config: {} (an "id" member is accepted and ignored; nothing else is).
 *
 * Threading: the table is built once under pthread_once; instances are stateless. Ownership:
 * encode grows the caller's nds_buf; decode writes only out[0..out_cap).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "ndstore/sys/codec.h"
#include "internal/error.h"
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

/** CRC-32C of p[0..n) (initial value and final xor 0xffffffff, as zarr v3 and iSCSI use). */
uint32_t nds_crc32c(const uint8_t *p, size_t n);
/** The same through the table, whatever the CPU has (so tests cover both paths). */
uint32_t nds_crc32c_portable(const uint8_t *p, size_t n);

uint32_t nds_crc32c_portable(const uint8_t *p, size_t n) {
    pthread_once(&crc_once, crc_init);
    return ~crc_sw(0xffffffffu, p, n);
}

uint32_t nds_crc32c(const uint8_t *p, size_t n) {
    pthread_once(&crc_once, crc_init);
    uint32_t crc = 0xffffffffu;
#if defined(__x86_64__) && defined(__GNUC__)
    if (crc_hw) return ~crc_hw_run(crc, p, n);
#endif
    return ~crc_sw(crc, p, n);
}

/* ---- codec vtable ---------------------------------------------------------------------------- */

static int crc_create(void **state, const struct json_object *config, size_t elem_size) {
    (void)elem_size;
    if (config && !json_object_is_type(config, json_type_object))
        return nds_err(NDS_EFORMAT, "crc32c config: expected a json object");
    if (config) {
        json_object_object_foreach((json_object *)config, key, val) {
            (void)val;
            if (strcmp(key, "id") != 0)
                return nds_err(NDS_EFORMAT, "crc32c config: unknown member \"%s\"", key);
        }
    }
    *state = NULL; /* stateless */
    return 0;
}

static void crc_destroy(void *state) { (void)state; }

static int crc_encode(void *state, const uint8_t *in, size_t len, nds_buf *out) {
    (void)state;
    if (len > SIZE_MAX - 4) return nds_err(NDS_ELIMIT, "crc32c: input too large");
    if (nds_buf_reserve(out, len + 4) != 0) return nds_err(NDS_ENOMEM, "crc32c: out of memory");
    if (len) memcpy(out->data, in, len);
    uint32_t c = nds_crc32c(in, len);
    nds_store_le32(out->data + len, c);
    out->len = len + 4;
    return 0;
}

static int crc_decode(void *state, const uint8_t *in, size_t len, uint8_t *out, size_t out_cap,
                      size_t *out_len) {
    (void)state;
    if (len < 4)
        return nds_err(NDS_ECORRUPT, "crc32c: %zu bytes is too short to hold a checksum", len);
    size_t n = len - 4;
    uint32_t stored = nds_load_le32(in + n);
    uint32_t actual = nds_crc32c(in, n);
    if (stored != actual)
        return nds_err(NDS_ECORRUPT, "crc32c mismatch (stored %08x, computed %08x)", stored,
                       actual);
    if (n > out_cap)
        return nds_err(NDS_ECORRUPT, "crc32c: decoded data exceeds the %zu bytes expected",
                       out_cap);
    if (n) memcpy(out, in, n);
    *out_len = n;
    return 0;
}

static int crc_config_json(void *state, struct json_object **out) {
    (void)state;
    *out = json_object_new_object();
    if (!*out) return nds_err(NDS_ENOMEM, "crc32c: out of memory");
    json_object_object_add(*out, "id", json_object_new_string("crc32c"));
    return 0;
}

const nds_codec nds_codec_crc32c = {
    .version = NDS_CODEC_VERSION,
    .name = "crc32c",
    .create = crc_create,
    .destroy = crc_destroy,
    .encode = crc_encode,
    .decode = crc_decode,
    .config_json = crc_config_json,
};
