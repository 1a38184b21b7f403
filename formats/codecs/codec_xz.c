/* The "xz" codec: .xz streams (LZMA2 filter, CRC64 check) via liblzma, the compression N5 calls
 * "xz" and numcodecs.lzma.LZMA writes with its defaults (format FORMAT_XZ, check -1 = CRC64).
 *
 * Config (numcodecs-style names): {"preset": 0-9, default 6}. Encode writes one stream with the
 * preset's LZMA2 options, except that the dictionary is shrunk to the input size (at least 4 KiB)
 * when the input is smaller than the preset's: the stream decodes the same everywhere, and
 * compressing a 64 KiB block at preset 9 needs about 1 MiB instead of 674 MiB. Decode follows
 * Python's lzma.decompress (which numcodecs and zarr-python's N5 store use): concatenated streams
 * are joined; once one stream has decoded, bytes that do not start a valid stream are ignored; a
 * stream that ends early is an error. Decoding is refused with NDS_ELIMIT when a stream's headers
 * ask for more than 128 MiB of decoder memory (preset 9 needs 65 MiB), so hostile headers cannot
 * make liblzma allocate gigabytes. Omits: "extreme" presets, custom filter chains, raw .lzma
 * (LZMA_alone) streams.
 *
 * Threading: an instance is immutable; every call has its own lzma_stream. Ownership: encode grows
 * the caller's nds_buf; decode writes only out[0..out_cap).
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <lzma.h>
#include <json-c/json.h>

#include "codec_util.h"
#include "ndstore/sys/codec.h"
#include "internal/error.h"

/* Decoder memory a stream may ask for: preset 9 (64 MiB dictionary) with room to spare. */
#define XZ_MEMLIMIT (UINT64_C(128) << 20)

/* The state is the preset, 0-9 (an nds_int_config). */
static int xz_create(void **state, const struct json_object *config, size_t elem_size) {
    (void)elem_size;
    return nds_int_config_create(state, config, "xz", "preset", 0, 9, 6);
}

static int xz_encode(void *state, const uint8_t *in, size_t len, nds_buf *out) {
    uint32_t preset = (uint32_t)((const nds_int_config *)state)->value;
    lzma_options_lzma opt;
    if (lzma_lzma_preset(&opt, preset))
        return nds_err(NDS_EINTERNAL, "xz: liblzma does not know preset %u", (unsigned)preset);
    /* A dictionary larger than the input only costs memory (see the header comment). */
    if (len < opt.dict_size)
        opt.dict_size = len < LZMA_DICT_SIZE_MIN ? LZMA_DICT_SIZE_MIN : (uint32_t)len;
    lzma_filter filters[] = {{LZMA_FILTER_LZMA2, &opt}, {LZMA_VLI_UNKNOWN, NULL}};
    size_t bound = lzma_stream_buffer_bound(len);
    if (bound == 0) return nds_err(NDS_ELIMIT, "xz: input of %zu bytes is too large", len);
    int rc = nds_buf_reserve(out, bound);
    if (rc) return nds_err(NDS_ENOMEM, "xz: out of memory for %zu bytes", bound);
    size_t pos = 0;
    static const uint8_t empty[1];
    lzma_ret ret = lzma_stream_buffer_encode(filters, LZMA_CHECK_CRC64, NULL, len ? in : empty,
                                             len, out->data, &pos, bound);
    if (ret == LZMA_MEM_ERROR) return nds_err(NDS_ENOMEM, "xz: out of memory compressing");
    if (ret != LZMA_OK)
        return nds_err_cause(NDS_EINTERNAL, NDS_CAUSE_OTHER, (long)ret,
                             "xz: compression failed (liblzma %d)", (int)ret);
    out->len = pos;
    return 0;
}

/* Decodes one stream (nds_stream_decode_fn); r->lib_rc is liblzma's last result. */
static int decode_stream(const uint8_t *in, size_t len, uint8_t *out, size_t out_cap,
                         nds_stream_result *r) {
    lzma_stream strm = LZMA_STREAM_INIT;
    lzma_ret ret = lzma_stream_decoder(&strm, XZ_MEMLIMIT, 0);
    if (ret == LZMA_OK) {
        strm.next_in = in;
        strm.avail_in = len;
        strm.next_out = out;
        strm.avail_out = out_cap;
        do ret = lzma_code(&strm, LZMA_FINISH);
        while (ret == LZMA_OK);
        r->overflow = ret == LZMA_BUF_ERROR && strm.avail_out == 0 && strm.avail_in > 0;
        r->used = len - strm.avail_in;
        r->produced = out_cap - strm.avail_out;
        if (ret == LZMA_MEMLIMIT_ERROR) r->mem = lzma_memusage(&strm);
    }
    lzma_end(&strm);
    r->lib_rc = (long)ret;
    r->not_stream = !r->overflow && (ret == LZMA_FORMAT_ERROR || ret == LZMA_DATA_ERROR ||
                                     ret == LZMA_OPTIONS_ERROR);
    return ret == LZMA_STREAM_END ? 0 : NDS_ECORRUPT;
}

static int xz_fail(const nds_stream_result *r, size_t out_cap, size_t at) {
    long cause = r->lib_rc;
    if (r->overflow)
        return nds_err_cause(NDS_ECORRUPT, NDS_CAUSE_OTHER, cause,
                             "xz: decoded data exceeds the %zu bytes expected", out_cap);
    switch ((lzma_ret)r->lib_rc) {
    case LZMA_MEM_ERROR: return nds_err(NDS_ENOMEM, "xz: out of memory decompressing");
    case LZMA_MEMLIMIT_ERROR:
        return nds_err_cause(NDS_ELIMIT, NDS_CAUSE_OTHER, cause,
                             "xz: the stream at byte %zu needs %llu MiB of decoder memory, more "
                             "than the %llu MiB limit",
                             at, (unsigned long long)((r->mem + (1u << 20) - 1) >> 20),
                             (unsigned long long)(XZ_MEMLIMIT >> 20));
    case LZMA_BUF_ERROR:
        return nds_err_cause(NDS_ECORRUPT, NDS_CAUSE_OTHER, cause,
                             "xz: truncated stream starting at byte %zu", at);
    case LZMA_FORMAT_ERROR:
        return nds_err_cause(NDS_ECORRUPT, NDS_CAUSE_OTHER, cause,
                             "xz: not an xz stream at byte %zu (bad magic bytes)", at);
    case LZMA_OPTIONS_ERROR:
        return nds_err_cause(NDS_ECORRUPT, NDS_CAUSE_OTHER, cause,
                             "xz: the stream at byte %zu uses options liblzma does not support",
                             at);
    default:
        return nds_err_cause(NDS_ECORRUPT, NDS_CAUSE_OTHER, cause,
                             "xz: corrupt data in the stream starting at byte %zu (liblzma %d)", at,
                             (int)r->lib_rc);
    }
}

static int xz_decode_whole(void *state, const uint8_t *in, size_t len, uint8_t *out, size_t out_cap,
                           size_t *out_len) {
    (void)state;
    return nds_decode_streams(in, len, out, out_cap, out_len, decode_stream, xz_fail);
}

static int xz_config_json(void *state, struct json_object **out) {
    return nds_int_config_json(state, "xz", "preset", out);
}

extern const nds_codec nds_codec_xz;

/* Parts, readers and pieces: the generic fallback over the whole decode. */
static int xz_decode(void *state, nds_decode_request *req) {
    return nds_codec_decode_fallback(&nds_codec_xz, state, req, xz_decode_whole);
}

const nds_codec nds_codec_xz = {
    .version = NDS_CODEC_VERSION,
    .name = "xz",
    .create = xz_create,
    .destroy = free,
    .encode = xz_encode,
    .decode = xz_decode,
    .config_json = xz_config_json,
};
