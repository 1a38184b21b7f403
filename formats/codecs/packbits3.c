/* The zarr v3 "packbits" array-to-bytes codec (packbits3.h). */
#include <stdbool.h>
#include <string.h>

#include "packbits3.h"
#include "internal/dtype_util.h"
#include "internal/error.h"
#include "internal/json_util.h"
#include "internal/util.h"

/* The registry's list (zarr-extensions codecs/packbits, "Supported data types") of the types
 * ndstore has: components of N value bits, stored in memory in bytes of their own. float16 and
 * the float8 family are not in the list and are refused, as the spec leaves them undefined. */
static bool type_bits(nds_dtype t, unsigned *bits, unsigned *ncomp) {
    *ncomp = 1;
    switch (t) {
    case NDS_BOOL: *bits = 1; return true;
    case NDS_INT2:
    case NDS_UINT2: *bits = 2; return true;
    case NDS_INT4:
    case NDS_UINT4:
    case NDS_FLOAT4_E2M1FN: *bits = 4; return true;
    case NDS_INT8:
    case NDS_UINT8: *bits = 8; return true;
    case NDS_INT16:
    case NDS_UINT16:
    case NDS_BFLOAT16: *bits = 16; return true;
    case NDS_INT32:
    case NDS_UINT32:
    case NDS_FLOAT32: *bits = 32; return true;
    case NDS_INT64:
    case NDS_UINT64:
    case NDS_FLOAT64: *bits = 64; return true;
    case NDS_COMPLEX64: *bits = 32, *ncomp = 2; return true;
    case NDS_COMPLEX128: *bits = 64, *ncomp = 2; return true;
    default: return false;
    }
}

static bool is_signed(nds_dtype t) {
    return t == NDS_INT2 || t == NDS_INT4 || t == NDS_INT8 || t == NDS_INT16 || t == NDS_INT32 ||
           t == NDS_INT64;
}

/* An optional bit index member: absent or null keeps *out; else an integer 0 .. max. */
static int get_bit(const json_object *cfg, const char *key, unsigned max, const char *dp,
                   unsigned *out, int *given) {
    json_object *v = NULL;
    if (!cfg || !json_object_object_get_ex(cfg, key, &v) || json_object_is_type(v, json_type_null))
        return 0;
    int64_t i = 0;
    int rc = nds_json_get_int(cfg, key, false, 0, max, dp, &i);
    if (rc) return rc;
    *out = (unsigned)i;
    *given = 1;
    return 0;
}

static int get_padding(const json_object *cfg, const char *dp, nds_pb_padding *out) {
    json_object *v = NULL;
    *out = NDS_PB_PAD_NONE;
    if (!cfg || !json_object_object_get_ex(cfg, "padding_encoding", &v) ||
        json_object_is_type(v, json_type_null))
        return 0;
    const char *s = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
    if (strcmp(s, "first_byte") == 0)
        *out = NDS_PB_PAD_FIRST;
    else if (strcmp(s, "last_byte") == 0)
        *out = NDS_PB_PAD_LAST;
    else if (strcmp(s, "none") != 0)
        return nds_err(NDS_EFORMAT,
                       "%s: \"padding_encoding\" must be \"first_byte\", \"last_byte\" or \"none\"",
                       dp);
    return 0;
}

int nds_packbits3_parse(const json_object *cfg, nds_dtype t, const char *dp, nds_packbits3 *out) {
    memset(out, 0, sizeof *out);
    out->dtype = t;
    if (!type_bits(t, &out->comp_bits, &out->ncomp))
        return nds_err(NDS_EUNSUPPORTED, "%s: packbits does not support data type \"%s\"", dp,
                       nds_dtype_name(t));
    out->comp_bytes = (unsigned)nds_dtype_size(t) / out->ncomp;
    if (cfg) {
        json_object_object_foreach((json_object *)cfg, key, val) {
            (void)val;
            if (strcmp(key, "padding_encoding") != 0 && strcmp(key, "first_bit") != 0 &&
                strcmp(key, "last_bit") != 0)
                return nds_err(NDS_EFORMAT, "%s: unknown configuration member \"%.40s\"", dp, key);
        }
    }
    out->last_bit = out->comp_bits - 1;
    int rc = get_padding(cfg, dp, &out->padding);
    if (!rc)
        rc = get_bit(cfg, "first_bit", out->comp_bits - 1, dp, &out->first_bit, &out->first_given);
    if (!rc)
        rc = get_bit(cfg, "last_bit", out->comp_bits - 1, dp, &out->last_bit, &out->last_given);
    if (!rc && out->last_bit < out->first_bit)
        rc = nds_err(NDS_EFORMAT, "%s: \"last_bit\" (%u) is less than \"first_bit\" (%u)", dp,
                     out->last_bit, out->first_bit);
    return rc;
}

static unsigned bits_per_element(const nds_packbits3 *p) {
    return p->ncomp * (p->last_bit - p->first_bit + 1);
}

uint64_t nds_packbits3_encoded_size(const nds_packbits3 *p, uint64_t n) {
    return (n * bits_per_element(p) + 7) / 8 + (p->padding != NDS_PB_PAD_NONE);
}

/* One component's value: its bytes as a little-endian number on a little-endian host (in memory
 * components are in the host's order; the codec's stream is little-endian, as "bytes"). */
static uint64_t load_comp(const uint8_t *c, unsigned nbytes) {
    uint64_t v = 0;
    bool big = nds_host_is_big_endian();
    for (unsigned i = 0; i < nbytes; i++) v |= (uint64_t)c[big ? nbytes - 1 - i : i] << (8 * i);
    return v;
}

static void store_comp(uint8_t *c, unsigned nbytes, uint64_t v) {
    bool big = nds_host_is_big_endian();
    for (unsigned i = 0; i < nbytes; i++, v >>= 8) c[big ? nbytes - 1 - i : i] = (uint8_t)v;
}

static uint64_t low_mask(unsigned b) { return b >= 64 ? UINT64_MAX : (UINT64_C(1) << b) - 1; }

/* Appends the b low bits of v at bit *pos of out (least significant first). */
static void put_bits(uint8_t *out, uint64_t *pos, uint64_t v, unsigned b) {
    while (b) {
        unsigned off = (unsigned)(*pos % 8), take = 8 - off < b ? 8 - off : b;
        out[*pos / 8] |= (uint8_t)((v & low_mask(take)) << off);
        v = take >= 64 ? 0 : v >> take;
        b -= take;
        *pos += take;
    }
}

static uint64_t get_bits(const uint8_t *in, uint64_t *pos, unsigned b) {
    uint64_t v = 0;
    for (unsigned got = 0; got < b;) {
        unsigned off = (unsigned)(*pos % 8), take = 8 - off < b - got ? 8 - off : b - got;
        v |= (uint64_t)((in[*pos / 8] >> off) & low_mask(take)) << got;
        got += take;
        *pos += take;
    }
    return v;
}

static size_t data_offset(const nds_packbits3 *p) { return p->padding == NDS_PB_PAD_FIRST; }

static unsigned padding_bits(const nds_packbits3 *p, size_t n) {
    return (unsigned)((8 - (uint64_t)n * bits_per_element(p) % 8) % 8);
}

void nds_packbits3_encode(const nds_packbits3 *p, const uint8_t *in, size_t n, uint8_t *out) {
    uint64_t total = nds_packbits3_encoded_size(p, n), pos = 0;
    unsigned b = p->last_bit - p->first_bit + 1;
    memset(out, 0, (size_t)total);
    uint8_t *bits = out + data_offset(p);
    for (size_t i = 0; i < n * p->ncomp; i++) {
        const uint8_t *c = in + i * p->comp_bytes;
        uint64_t v = p->dtype == NDS_BOOL ? c[0] != 0 : load_comp(c, p->comp_bytes);
        put_bits(bits, &pos, v >> p->first_bit, b);
    }
    if (p->padding == NDS_PB_PAD_FIRST) out[0] = (uint8_t)padding_bits(p, n);
    if (p->padding == NDS_PB_PAD_LAST) out[total - 1] = (uint8_t)padding_bits(p, n);
}

int nds_packbits3_decode(const nds_packbits3 *p, const uint8_t *in, size_t len, size_t n,
                         uint8_t *out) {
    uint64_t want = nds_packbits3_encoded_size(p, n), pos = 0;
    if (len != want)
        return nds_err(NDS_ECORRUPT, "packbits: expected %llu encoded bytes, found %zu",
                       (unsigned long long)want, len);
    unsigned pad = padding_bits(p, n), b = p->last_bit - p->first_bit + 1;
    size_t data_len = len - (p->padding != NDS_PB_PAD_NONE);
    const uint8_t *bits = in + data_offset(p);
    if (p->padding != NDS_PB_PAD_NONE) {
        uint8_t rec = p->padding == NDS_PB_PAD_FIRST ? in[0] : in[len - 1];
        if (rec != pad)
            return nds_err(NDS_ECORRUPT,
                           "packbits: %u padding bits recorded, %u expected for %zu elements", rec,
                           pad, n);
    }
    if (pad && data_len && (bits[data_len - 1] >> (8 - pad)) != 0)
        return nds_err(NDS_ECORRUPT, "packbits: the %u padding bits of the last byte are not zero",
                       pad);
    bool sign = is_signed(p->dtype);
    for (size_t i = 0; i < n * p->ncomp; i++) {
        uint64_t v = get_bits(bits, &pos, b) << p->first_bit;
        if (sign && (v >> p->last_bit & 1)) v |= ~low_mask(p->last_bit + 1); /* sign-extend */
        store_comp(out + i * p->comp_bytes, p->comp_bytes, v);
    }
    return 0;
}

json_object *nds_packbits3_config_json(const nds_packbits3 *p) {
    static const char *const names[] = {"none", "first_byte", "last_byte"};
    json_object *cfg = json_object_new_object();
    if (!cfg) return NULL;
    json_object_object_add(cfg, "padding_encoding", json_object_new_string(names[p->padding]));
    if (p->first_given) json_object_object_add(cfg, "first_bit", json_object_new_int(p->first_bit));
    if (p->last_given) json_object_object_add(cfg, "last_bit", json_object_new_int(p->last_bit));
    return cfg;
}
