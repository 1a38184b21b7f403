/* The "zstd" codec: Zstandard frames, byte-compatible with numcodecs.zstd.Zstd.
 *
 * Config (numcodecs names): {"level": int in [ZSTD_minCLevel(), 22], default 0 = zstd's default
 * (3); "checksum": bool, default false}. Encode writes one frame with the content size
 * (ZSTD_compress2), as numcodecs does. Decode accepts one or more concatenated frames, with or
 * without a content size, with or without a checksum; a declared content size larger than out_cap
 * is refused before decoding. A part decodes a frame's start only (as far as a region
 * needs), straight into the caller's buffer; a whole value into a sink comes in pieces of 128 KiB;
 * readers go through the generic fallback.
 * Omits: dictionaries, streaming (the caller always knows the decoded size bound).
 *
 * Threading: an instance is immutable. ZSTD contexts are cached per thread (pthread key, freed at
 * thread exit) so repeated calls allocate nothing; parameters are set on each call because one
 * thread may serve several instances. Ownership: encode grows the caller's nds_buf; decode writes
 * only out[0..out_cap).
 */
#include <ctype.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>
#include <zstd_errors.h>
#include <json-c/json.h>

#include "ndstore/sys/codec.h"
#include "internal/error.h"
#include "internal/json_util.h"

#define DOC "zstd config"
/* numcodecs documents -131072..22; ZSTD_maxCLevel() is 22 in every release so far. */
#define ZSTD_LEVEL_MAX 22

typedef struct zstd_state {
    int level;     /* 0 = the library default */
    bool checksum; /* append a content checksum to each frame */
} zstd_state;

/* Per-thread contexts, created on first use. */
typedef struct zstd_tls {
    ZSTD_CCtx *cctx;
    ZSTD_DCtx *dctx;
    uint8_t *piece; /* PIECE_BYTES for decodes in pieces, made on first use */
} zstd_tls;

static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static int tls_key_rc;

static void tls_free(void *p) {
    zstd_tls *t = p;
    ZSTD_freeCCtx(t->cctx);
    ZSTD_freeDCtx(t->dctx);
    free(t->piece);
    free(t);
}

static void tls_init(void) { tls_key_rc = pthread_key_create(&tls_key, tls_free); }

static zstd_tls *tls_get(void) {
    if (pthread_once(&tls_once, tls_init) != 0 || tls_key_rc != 0) return NULL;
    zstd_tls *t = pthread_getspecific(tls_key);
    if (t) return t;
    t = calloc(1, sizeof *t);
    if (t && pthread_setspecific(tls_key, t) != 0) {
        free(t);
        t = NULL;
    }
    return t;
}

/* "zstd: <library message>" with the first letter lower-cased, as our messages are. */
static int zstd_fail(int code, size_t zrc, const char *what) {
    char msg[128];
    snprintf(msg, sizeof msg, "%s", ZSTD_getErrorName(zrc));
    msg[0] = (char)tolower((unsigned char)msg[0]);
    return nds_err_cause(code, NDS_CAUSE_ZSTD, (long)ZSTD_getErrorCode(zrc), "zstd: %s: %s", what,
                         msg);
}

/* Rejects members numcodecs would not accept, so typos do not pass silently. */
static int check_members(const json_object *config) {
    json_object_object_foreach((json_object *)config, key, val) {
        (void)val;
        if (strcmp(key, "id") && strcmp(key, "level") && strcmp(key, "checksum"))
            return nds_err(NDS_EFORMAT, DOC ": unknown member \"%s\"", key);
    }
    return 0;
}

static int zstd_create(void **state, const struct json_object *config, size_t elem_size) {
    (void)elem_size;
    int64_t level = 0;
    bool checksum = false;
    if (config) {
        if (!json_object_is_type(config, json_type_object))
            return nds_err(NDS_EFORMAT, DOC ": expected a json object");
        int rc = check_members(config);
        if (!rc)
            rc = nds_json_get_int(config, "level", true, ZSTD_minCLevel(), ZSTD_LEVEL_MAX, DOC,
                                  &level);
        if (!rc) rc = nds_json_get_bool(config, "checksum", true, DOC, &checksum);
        if (rc) return rc;
    }
    zstd_state *s = malloc(sizeof *s);
    if (!s) return nds_err(NDS_ENOMEM, "zstd: out of memory");
    s->level = (int)level;
    s->checksum = checksum;
    *state = s;
    return 0;
}

static void zstd_destroy(void *state) { free(state); }

static int zstd_encode(void *state, const uint8_t *in, size_t len, nds_buf *out) {
    const zstd_state *s = state;
    size_t bound = ZSTD_compressBound(len);
    if (ZSTD_isError(bound) || bound == 0)
        return nds_err(NDS_ELIMIT, "zstd: input of %zu bytes is too large to compress", len);
    zstd_tls *t = tls_get();
    if (t && !t->cctx) t->cctx = ZSTD_createCCtx();
    if (!t || !t->cctx)
        return nds_err(NDS_ENOMEM, "zstd: out of memory creating a compression context");
    int rc = nds_buf_reserve(out, bound);
    if (rc) return rc;
    size_t zrc = ZSTD_CCtx_setParameter(t->cctx, ZSTD_c_compressionLevel, s->level);
    if (!ZSTD_isError(zrc)) zrc = ZSTD_CCtx_setParameter(t->cctx, ZSTD_c_checksumFlag, s->checksum);
    if (ZSTD_isError(zrc)) return zstd_fail(NDS_EINTERNAL, zrc, "setting parameters");
    zrc = ZSTD_compress2(t->cctx, out->data, out->cap, in, len);
    if (ZSTD_isError(zrc)) {
        ZSTD_CCtx_reset(t->cctx, ZSTD_reset_session_only);
        return zstd_fail(NDS_EINTERNAL, zrc, "compressing");
    }
    out->len = zrc;
    return 0;
}

/* The first frame's declared size, checked before decoding so a hostile header fails fast and
 * clearly. Later frames and frames without a size are bounded by ZSTD_decompressDCtx itself. */
static int check_declared_size(const uint8_t *in, size_t len, size_t out_cap) {
    unsigned long long n = ZSTD_getFrameContentSize(in, len);
    if (n == ZSTD_CONTENTSIZE_ERROR)
        return nds_err(NDS_ECORRUPT,
                       "zstd: not a zstd frame, or its header is cut short (%zu bytes)", len);
    if (n != ZSTD_CONTENTSIZE_UNKNOWN && n > out_cap)
        return nds_err(NDS_ECORRUPT, "zstd: frame declares %llu bytes, more than the %zu expected",
                       n, out_cap);
    return 0;
}

/* The calling thread's decompression context, created on first use; NULL when out of memory. */
static ZSTD_DCtx *dctx_get(void) {
    zstd_tls *t = tls_get();
    if (t && !t->dctx) t->dctx = ZSTD_createDCtx();
    return t ? t->dctx : NULL;
}

static int zstd_decode_whole(void *state, const uint8_t *in, size_t len, uint8_t *out,
                             size_t out_cap, size_t *out_len) {
    (void)state;
    int rc = check_declared_size(in, len, out_cap);
    if (rc) return rc;
    ZSTD_DCtx *dctx = dctx_get();
    if (!dctx) return nds_err(NDS_ENOMEM, "zstd: out of memory creating a decompression context");
    uint8_t dummy;
    size_t zrc = ZSTD_decompressDCtx(dctx, out ? out : &dummy, out ? out_cap : 0, in, len);
    if (ZSTD_isError(zrc)) {
        if (ZSTD_getErrorCode(zrc) == ZSTD_error_dstSize_tooSmall)
            return nds_err_cause(NDS_ECORRUPT, NDS_CAUSE_ZSTD, (long)ZSTD_getErrorCode(zrc),
                                 "zstd: decoded data exceeds the %zu bytes expected", out_cap);
        return zstd_fail(NDS_ECORRUPT, zrc, "decoding");
    }
    *out_len = zrc;
    return 0;
}

/* Decodes the start of a frame, up to at least byte end (zstd cannot start in the middle: a region
 * near the end of a chunk still decodes it all). Input goes in 16 KiB slices so the decoder stops
 * within a block (128 KiB of output at most) past end; blocks decode straight into out. Only a
 * single frame that declares exactly out_len bytes is decoded in part, anything else in full (which
 * checks it whole); a cut-short or corrupt frame is still an error when the damage lies in the part
 * decoded, and goes unnoticed past it, as for blosc's blocks. */
#define PART_SLICE 16384

static int zstd_decode_part(void *state, const uint8_t *in, size_t len, uint8_t *out,
                            size_t out_len, size_t begin, size_t end) {
    size_t got;
    (void)begin;
    unsigned long long declared = ZSTD_getFrameContentSize(in, len);
    size_t frame = ZSTD_findFrameCompressedSize(in, len);
    if (declared != out_len || ZSTD_isError(frame) || frame != len || end >= out_len) {
        int rc = zstd_decode_whole(state, in, len, out, out_len, &got);
        if (rc == 0 && got != out_len)
            rc = nds_err(NDS_ECORRUPT, "zstd: expected %zu bytes after decompression, found %zu",
                         out_len, got);
        return rc;
    }
    ZSTD_DCtx *dctx = dctx_get();
    if (!dctx) return nds_err(NDS_ENOMEM, "zstd: out of memory creating a decompression context");
    ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);
    /* Blocks decode straight into out (out stays the same buffer throughout): without this zstd
     * decodes into a window buffer of its own and copies out of it (5 % more CPU per region). A
     * libzstd without the parameter keeps that copy. */
    ZSTD_DCtx_setParameter(dctx, ZSTD_d_stableOutBuffer, 1);
    ZSTD_inBuffer ib = {in, 0, 0};
    ZSTD_outBuffer ob = {out, out_len, 0};
    while (ob.pos < end) {
        size_t before = ob.pos, had = ib.pos;
        ib.size = len - ib.size > PART_SLICE ? ib.size + PART_SLICE : len;
        size_t zrc = ZSTD_decompressStream(dctx, &ob, &ib);
        if (ZSTD_isError(zrc)) {
            ZSTD_DCtx_reset(dctx, ZSTD_reset_session_and_parameters);
            return zstd_fail(NDS_ECORRUPT, zrc, "decoding");
        }
        if (zrc == 0 || (ib.size == len && ob.pos == before && ib.pos == had)) break;
    }
    ZSTD_DCtx_reset(dctx, ZSTD_reset_session_and_parameters);
    if (ob.pos < end)
        return nds_err(NDS_ECORRUPT, "zstd: frame ends after %zu of the %zu bytes it declares",
                       ob.pos, out_len);
    return 0;
}

/* Pieces: frames decode through zstd's own window into a per-thread piece buffer of PIECE_BYTES
 * (rounded down to the alignment), handed over whenever it is full, so the receiver copies each
 * piece while it is in the cache rather than from a whole decoded chunk in memory (issue 17:
 * reading 4 MiB chunks into a slab spent 14 % of the CPU on that copy). The window is bounded by
 * the decoded size: a frame asking for a larger one (legal, but no writer of chunks makes it)
 * goes through the fallback's whole decode. */
#define PIECE_BYTES (128u << 10)

/* The smallest window log covering cap bytes (zstd's range: ZSTD_WINDOWLOG_MIN .. MAX). */
static int window_log_for(size_t cap) {
    int log = ZSTD_WINDOWLOG_MIN;
    while (log < ZSTD_WINDOWLOG_MAX && ((size_t)1 << log) < cap) log++;
    return log;
}

typedef struct piece_out {
    nds_decode_request *req;
    ZSTD_outBuffer ob; /* the piece being filled */
    size_t offset;     /* of the piece in the decoded value */
    size_t piece;      /* bytes per full piece: a multiple of req->align */
} piece_out;

/* Hands the filled piece over and starts the next (at most cap + 1 bytes in all, so that a value
 * larger than cap shows as such without decoding the rest; stream_pieces checks it). */
static int flush_piece(piece_out *p) {
    int rc = 0;
    if (p->ob.pos > 0) rc = p->req->sink(p->req->sink_arg, p->offset, p->ob.dst, p->ob.pos);
    p->offset += p->ob.pos;
    p->ob.pos = 0;
    size_t left = p->offset <= p->req->cap ? p->req->cap - p->offset + 1 : 0;
    p->ob.size = left < p->piece ? left : p->piece;
    return rc;
}

/* Runs the stream over the whole input; NDS_EUNSUPPORTED when the window is too large. */
static int stream_pieces(ZSTD_DCtx *dctx, piece_out *p) {
    const nds_decode_request *req = p->req;
    ZSTD_inBuffer ib = {req->in, req->in_len, 0};
    size_t zrc = 1;
    while (ib.pos < ib.size || zrc != 0) {
        size_t had_in = ib.pos, had_out = p->ob.pos;
        zrc = ZSTD_decompressStream(dctx, &p->ob, &ib);
        if (ZSTD_isError(zrc))
            return ZSTD_getErrorCode(zrc) == ZSTD_error_frameParameter_windowTooLarge
                       ? NDS_EUNSUPPORTED
                       : zstd_fail(NDS_ECORRUPT, zrc, "decoding");
        if (p->offset + p->ob.pos > req->cap)
            return nds_err_cause(NDS_ECORRUPT, NDS_CAUSE_ZSTD, 0,
                                 "zstd: decoded data exceeds the %zu bytes expected", req->cap);
        if (p->ob.pos == p->ob.size) {
            int rc = flush_piece(p);
            if (rc) return rc;
        } else if (ib.pos == had_in && p->ob.pos == had_out) {
            return nds_err(NDS_ECORRUPT, "zstd: frame cut short after %zu decoded bytes",
                           p->offset + p->ob.pos);
        }
    }
    return flush_piece(p);
}

/* A single frame that declares its size must declare exactly cap: known before any piece. */
static int check_single_frame_size(const nds_decode_request *req) {
    unsigned long long n = ZSTD_getFrameContentSize(req->in, req->in_len);
    if (n == ZSTD_CONTENTSIZE_UNKNOWN || n == req->cap ||
        ZSTD_findFrameCompressedSize(req->in, req->in_len) != req->in_len)
        return 0;
    return nds_err(NDS_ECORRUPT, "zstd: expected %zu bytes after decompression, the frame "
                   "declares %llu", req->cap, n);
}

static int zstd_decode_pieces(nds_decode_request *req) {
    int rc = check_declared_size(req->in, req->in_len, req->cap);
    if (!rc) rc = check_single_frame_size(req);
    if (rc) return rc;
    zstd_tls *t = tls_get();
    ZSTD_DCtx *dctx = dctx_get();
    size_t align = req->align > 1 ? req->align : 1;
    if (!t || !dctx || (!t->piece && !(t->piece = malloc(PIECE_BYTES))))
        return nds_err(NDS_ENOMEM, "zstd: out of memory decoding in pieces");
    if (align > PIECE_BYTES) return NDS_EUNSUPPORTED; /* the fallback: one piece */
    piece_out p = {req, {t->piece, 0, 0}, 0, PIECE_BYTES / align * align};
    p.ob.size = req->cap + 1 < p.piece ? req->cap + 1 : p.piece;
    ZSTD_DCtx_reset(dctx, ZSTD_reset_session_and_parameters);
    ZSTD_DCtx_setParameter(dctx, ZSTD_d_windowLogMax, window_log_for(req->cap));
    rc = stream_pieces(dctx, &p);
    ZSTD_DCtx_reset(dctx, ZSTD_reset_session_and_parameters);
    /* A later frame asking for the larger window: the fallback would hand the first pieces over
     * again, out of order. No writer makes such a value; it is refused rather than misplaced. */
    if (rc == NDS_EUNSUPPORTED && p.offset > 0)
        return nds_err(NDS_ECORRUPT, "zstd: a frame after byte %zu asks for a window larger than "
                       "the value's %zu bytes", p.offset, req->cap);
    if (rc) return rc;
    if (p.offset != req->cap)
        return nds_err(NDS_ECORRUPT, "zstd: expected %zu bytes after decompression, found %zu",
                       req->cap, p.offset);
    req->out_len = req->cap;
    return 0;
}

extern const nds_codec nds_codec_zstd;

/* Into a buffer: whole values and parts here (straight into dst); a whole value in memory into a
 * sink here, in pieces; readers and parts into a sink through the generic fallback (a reader's
 * value read whole, then decoded here). */
static int zstd_decode(void *state, nds_decode_request *req) {
    if (req->sink && !req->reader && req->end == SIZE_MAX) {
        int rc = zstd_decode_pieces(req);
        if (rc != NDS_EUNSUPPORTED) return rc;
    }
    if (req->reader || req->sink)
        return nds_codec_decode_fallback(&nds_codec_zstd, state, req, zstd_decode_whole);
    if (req->end == SIZE_MAX)
        return zstd_decode_whole(state, req->in, req->in_len, req->dst, req->cap, &req->out_len);
    req->out_len = req->cap;
    return zstd_decode_part(state, req->in, req->in_len, req->dst, req->cap, req->begin, req->end);
}

static int zstd_config_json(void *state, struct json_object **out) {
    const zstd_state *s = state;
    json_object *o = json_object_new_object();
    if (!o) return nds_err(NDS_ENOMEM, "zstd: out of memory");
    json_object_object_add(o, "id", json_object_new_string("zstd"));
    json_object_object_add(o, "level", json_object_new_int(s->level));
    /* numcodecs < 0.12 has no "checksum" argument and rejects the member, so it is written only
     * when set. */
    if (s->checksum) json_object_object_add(o, "checksum", json_object_new_boolean(1));
    *out = o;
    return 0;
}

const nds_codec nds_codec_zstd = {
    .version = NDS_CODEC_VERSION,
    .name = "zstd",
    .create = zstd_create,
    .destroy = zstd_destroy,
    .encode = zstd_encode,
    .decode = zstd_decode,
    .config_json = zstd_config_json,
    .decode_caps = NDS_DECODE_PART | NDS_DECODE_PIECES, /* readers: the fallback */
};
