/* The "bz2" codec: bzip2 streams via libbz2, byte-compatible with numcodecs.bz2.BZ2 (Python's bz2).
 *
 * Config (numcodecs names): {"level": 1-9 (the block size in 100 kB units), default 1}. Encode
 * writes one stream. Decode follows Python's bz2.decompress: concatenated streams are joined; once
 * at least one stream has decoded, bytes that do not start a valid stream are ignored; a stream
 * that ends early is an error. Limits: encode input is at most UINT_MAX - 1% - 600 bytes (libbz2's
 * one-shot API counts in unsigned int); decode streams any size through the incremental API.
 *
 * Threading: an instance is immutable; each call has its own bz_stream (libbz2 has no way to reset
 * a stream for reuse, and bzip2's own work dwarfs the allocation). Ownership: encode grows the
 * caller's nds_buf; decode writes only out[0..out_cap).
 */
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <bzlib.h>
#include <json-c/json.h>

#include "codec_util.h"
#include "ndstore/sys/codec.h"
#include "internal/error.h"

/* The state is the level, 1-9 (an nds_int_config). */
static int bz2_create(void **state, const struct json_object *config, size_t elem_size) {
    (void)elem_size;
    return nds_int_config_create(state, config, "bz2", "level", 1, 9, 1);
}

static int bz2_encode(void *state, const uint8_t *in, size_t len, nds_buf *out) {
    const nds_int_config *s = state;
    /* bzip2's documented worst case: 1% larger plus 600 bytes. */
    size_t bound = len + len / 100 + 600;
    if (bound > UINT_MAX)
        return nds_err(NDS_ELIMIT, "bz2: input of %zu bytes exceeds libbz2's 4 GiB limit", len);
    int rc = nds_buf_reserve(out, bound);
    if (rc) return rc;
    unsigned int n = (unsigned int)bound;
    static char empty[1];
    int brc = BZ2_bzBuffToBuffCompress((char *)out->data, &n, len ? (char *)in : empty,
                                       (unsigned int)len, (int)s->value, 0, 0);
    if (brc == BZ_MEM_ERROR) return nds_err(NDS_ENOMEM, "bz2: out of memory compressing");
    if (brc != BZ_OK)
        return nds_err_cause(NDS_EINTERNAL, NDS_CAUSE_OTHER, brc, "bz2: compression failed (%d)",
                             brc);
    out->len = n;
    return 0;
}

/* Refills the unsigned-int-sized windows of strm from the size_t remainders. */
static void refill(bz_stream *strm, const uint8_t **in, size_t *in_left, uint8_t **out,
                   size_t *out_left) {
    if (strm->avail_in == 0 && *in_left) {
        unsigned int n = *in_left > UINT_MAX ? UINT_MAX : (unsigned int)*in_left;
        strm->next_in = (char *)*in;
        strm->avail_in = n;
        *in += n;
        *in_left -= n;
    }
    if (strm->avail_out == 0 && *out_left) {
        unsigned int n = *out_left > UINT_MAX ? UINT_MAX : (unsigned int)*out_left;
        strm->next_out = (char *)*out;
        strm->avail_out = n;
        *out += n;
        *out_left -= n;
    }
}

/* Decodes one stream (nds_stream_decode_fn); r->lib_rc is libbz2's last result. */
static int decode_stream(const uint8_t *in, size_t len, uint8_t *out, size_t out_cap,
                         nds_stream_result *r) {
    bz_stream strm;
    memset(&strm, 0, sizeof strm);
    int brc = BZ2_bzDecompressInit(&strm, 0, 0);
    if (brc != BZ_OK) return r->lib_rc = brc, NDS_ENOMEM;
    const uint8_t *ip = in;
    uint8_t *op = out;
    size_t in_left = len, out_left = out_cap, in_total = 0, out_total = 0;
    for (;;) {
        refill(&strm, &ip, &in_left, &op, &out_left);
        unsigned int ai = strm.avail_in, ao = strm.avail_out;
        brc = BZ2_bzDecompress(&strm);
        in_total += ai - strm.avail_in;
        out_total += ao - strm.avail_out;
        if (brc == BZ_STREAM_END) break;
        if (brc != BZ_OK) break;
        if (ai == strm.avail_in && ao == strm.avail_out) { /* no progress: out of input or space */
            brc = strm.avail_in == 0 && in_left == 0 ? BZ_UNEXPECTED_EOF : BZ_OUTBUFF_FULL;
            break;
        }
    }
    BZ2_bzDecompressEnd(&strm);
    r->used = in_total;
    r->produced = out_total;
    r->lib_rc = brc;
    r->not_stream = brc == BZ_DATA_ERROR || brc == BZ_DATA_ERROR_MAGIC;
    return brc == BZ_STREAM_END ? 0 : NDS_ECORRUPT;
}

static int bz2_fail(const nds_stream_result *r, size_t out_cap, size_t at) {
    int brc = (int)r->lib_rc;
    if (brc == BZ_MEM_ERROR) return nds_err(NDS_ENOMEM, "bz2: out of memory decompressing");
    if (brc == BZ_OUTBUFF_FULL)
        return nds_err_cause(NDS_ECORRUPT, NDS_CAUSE_OTHER, brc,
                             "bz2: decoded data exceeds the %zu bytes expected", out_cap);
    if (brc == BZ_UNEXPECTED_EOF)
        return nds_err_cause(NDS_ECORRUPT, NDS_CAUSE_OTHER, brc,
                             "bz2: truncated stream starting at byte %zu", at);
    return nds_err_cause(NDS_ECORRUPT, NDS_CAUSE_OTHER, brc,
                         "bz2: invalid data in the stream starting at byte %zu (libbz2 %d)", at,
                         brc);
}

static int bz2_decode_whole(void *state, const uint8_t *in, size_t len, uint8_t *out,
                            size_t out_cap, size_t *out_len) {
    (void)state;
    return nds_decode_streams(in, len, out, out_cap, out_len, decode_stream, bz2_fail);
}

static int bz2_config_json(void *state, struct json_object **out) {
    return nds_int_config_json(state, "bz2", "level", out);
}

extern const nds_codec nds_codec_bz2;

/* Parts, readers and pieces: the generic fallback over the whole decode. */
static int bz2_decode(void *state, nds_decode_request *req) {
    return nds_codec_decode_fallback(&nds_codec_bz2, state, req, bz2_decode_whole);
}

const nds_codec nds_codec_bz2 = {
    .version = NDS_CODEC_VERSION,
    .name = "bz2",
    .create = bz2_create,
    .destroy = free,
    .encode = bz2_encode,
    .decode = bz2_decode,
    .config_json = bz2_config_json,
};
