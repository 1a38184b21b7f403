/* The codec decode's shared parts (include/ndstore/sys/codec.h): the generic fallback a codec
 * calls for what it does not do itself (a reader's value read whole, a part decoded whole, pieces
 * handed over as one), the common whole decode, the same fallback for a format's chunk decode
 * (format.h nds_format_decode_fallback), and the formats' chunk decode that puts a part or the
 * pieces into the host's byte order (internal/format_util.h).
 *
 * Threading: any thread; the buffers are the calling thread's scratch (NDS_SCRATCH_CODEC for a
 * value read through a reader, NDS_SCRATCH_DECODE for a value decoded for a sink). */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "internal/error.h"
#include "internal/format_util.h"
#include "internal/dtype_util.h"
#include "internal/scratch.h"
#include "ndstore/sys/format.h"

int nds_codec_decode(const nds_codec *c, void *state, const uint8_t *in, size_t len, uint8_t *out,
                     size_t cap, size_t *out_len) {
    nds_decode_request rq = NDS_DECODE_REQUEST_INIT;
    rq.in = in;
    rq.in_len = len;
    rq.dst = out;
    rq.cap = cap;
    int rc = c->decode(state, &rq);
    *out_len = rc ? 0 : rq.out_len;
    return rc;
}

/* The reader's whole value into the codec scratch; a value shorter than it said is cut short.
 * The first read, of one byte, learns the size (an empty value, NDS_ERANGE, decodes as empty:
 * the codec then says what is wrong with it). */
static int read_whole(const char *who, const nds_part_reader *r, const uint8_t **in,
                      size_t *len) {
    uint64_t value_len = 0;
    uint8_t first;
    int rc = r->read(r->arg, 0, 1, &first, &value_len);
    if (rc == NDS_ERANGE) value_len = 0;
    else if (rc) return rc;
    if (value_len > SIZE_MAX - 1)
        return nds_err(NDS_ELIMIT, "%s: a stored value of %llu bytes is too large", who,
                       (unsigned long long)value_len);
    nds_buf *b = nds_scratch_reserve(NDS_SCRATCH_CODEC, (size_t)value_len);
    if (!b) return NDS_ENOMEM;
    rc = value_len ? r->read(r->arg, 0, (size_t)value_len, b->data, &value_len) : 0;
    if (rc == NDS_ERANGE)
        return nds_err(NDS_ECORRUPT, "%s: stored value cut short while it was read", who);
    *in = b->data;
    *len = (size_t)value_len;
    return rc;
}

/* The whole value decoded into dst, which must then hold exactly cap bytes unless the request
 * is a whole decode (whose size is only bounded). */
static int whole_into(const nds_codec *c, void *state, nds_decode_request *req,
                      nds_decode_whole_fn whole, uint8_t *dst) {
    size_t got = 0;
    int rc = whole(state, req->in, req->in_len, dst, req->cap, &got);
    if (rc) return rc;
    bool exact = req->end != SIZE_MAX || req->sink;
    if (exact && got != req->cap)
        return nds_err(NDS_ECORRUPT, "%s: expected %zu bytes after decompression, found %zu",
                       c->name, req->cap, got);
    req->out_len = got;
    return 0;
}

/* Hands the bytes of the request's range within a whole value buf[0..len) to its sink as one
 * piece, starting on a multiple of its alignment. Shared by the codec and format fallbacks. */
static int sink_range(nds_decode_request *req, uint8_t *buf, size_t len) {
    size_t end = req->end < len ? req->end : len;
    size_t begin = req->begin < end ? req->begin : end;
    if (req->align > 1) begin -= begin % req->align;
    return end > begin ? req->sink(req->sink_arg, begin, buf + begin, end - begin) : 0;
}

/* The whole value decoded into the decode scratch and handed to the sink as one piece (the
 * range's bytes, or all of them). */
static int whole_to_sink(const nds_codec *c, void *state, nds_decode_request *req,
                         nds_decode_whole_fn whole) {
    uint8_t *buf = nds_scratch(NDS_SCRATCH_DECODE, req->cap ? req->cap : 1);
    if (!buf) return NDS_ENOMEM;
    int rc = whole_into(c, state, req, whole, buf);
    if (rc == 0) rc = sink_range(req, buf, req->out_len);
    nds_scratch_trim(NDS_SCRATCH_DECODE);
    return rc;
}

int nds_codec_decode_fallback(const nds_codec *c, void *state, nds_decode_request *req,
                              nds_decode_whole_fn whole) {
    if (req->reader) {
        nds_decode_request mem = *req;
        mem.reader = NULL;
        int rc = read_whole(c->name, req->reader, &mem.in, &mem.in_len);
        /* The codec's own decode of the value in memory (a part where it can decode one). */
        if (rc == 0) rc = c->decode(state, &mem);
        req->out_len = mem.out_len;
        nds_scratch_trim(NDS_SCRATCH_CODEC);
        return rc;
    }
    if (req->sink) return whole_to_sink(c, state, req, whole);
    return whole_into(c, state, req, whole, req->dst);
}

/* ---- formats: the chunk decode's fallback (format.h) ---- */

/* The whole chunk decoded into dst (cap bytes, the canonical chunk). */
static int chunk_whole_into(void *state, const uint64_t *cell, nds_decode_request *req,
                            nds_chunk_decode_whole_fn whole, uint8_t *dst) {
    int rc = whole(state, cell, req->in, req->in_len, dst);
    req->out_len = rc ? 0 : req->cap;
    return rc;
}

/* The whole chunk decoded into the decode scratch and handed to the sink as one piece. */
static int chunk_whole_to_sink(void *state, const uint64_t *cell, nds_decode_request *req,
                               nds_chunk_decode_whole_fn whole) {
    uint8_t *buf = nds_scratch(NDS_SCRATCH_DECODE, req->cap ? req->cap : 1);
    if (!buf) return NDS_ENOMEM;
    int rc = chunk_whole_into(state, cell, req, whole, buf);
    if (rc == 0) rc = sink_range(req, buf, req->cap);
    nds_scratch_trim(NDS_SCRATCH_DECODE);
    return rc;
}

int nds_format_decode_fallback(void *state, const uint64_t *cell, nds_decode_request *req,
                               nds_chunk_decode_whole_fn whole) {
    if (req->reader) {
        nds_decode_request mem = *req;
        mem.reader = NULL;
        int rc = read_whole("chunk", req->reader, &mem.in, &mem.in_len);
        if (rc == 0) rc = nds_format_decode_fallback(state, cell, &mem, whole);
        req->out_len = mem.out_len;
        nds_scratch_trim(NDS_SCRATCH_CODEC);
        return rc;
    }
    if (req->sink) return chunk_whole_to_sink(state, cell, req, whole);
    return chunk_whole_into(state, cell, req, whole, req->dst);
}

int nds_format_decode_whole(const nds_format *f, void *state, const uint64_t *cell,
                            const uint8_t *in, size_t len, uint8_t *out, size_t n) {
    nds_decode_request rq = NDS_DECODE_REQUEST_INIT;
    rq.in = in;
    rq.in_len = len;
    rq.dst = out;
    rq.cap = n;
    return f->decode_chunk(state, cell, &rq);
}

/* A sink that puts each piece into the host's byte order before handing it on. */
typedef struct swapping_sink {
    size_t unit;
    nds_piece_sink sink;
    void *arg;
} swapping_sink;

static int swap_piece(void *arg, size_t offset, uint8_t *data, size_t len) {
    const swapping_sink *w = arg;
    nds_byteswap_span(data, 0, len, w->unit);
    return w->sink(w->arg, offset, data, len);
}

int nds_codec_decode_chunk(const nds_codec *c, void *state, nds_decode_request *req, size_t n,
                           size_t swap_unit) {
    req->cap = n;
    if (req->begin >= req->end) {
        req->out_len = n;
        return 0;
    }
    if (swap_unit <= 1) return c->decode(state, req);
    if (req->sink) {
        swapping_sink w = {swap_unit, req->sink, req->sink_arg};
        req->sink = swap_piece;
        req->sink_arg = &w;
        int rc = c->decode(state, req);
        req->sink = w.sink;
        req->sink_arg = w.arg;
        return rc;
    }
    int rc = c->decode(state, req);
    if (rc == 0) nds_byteswap_span(req->dst, req->begin, req->end < n ? req->end : n, swap_unit);
    return rc;
}
