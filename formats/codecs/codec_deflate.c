/* The "gzip" and "zlib" codecs: DEFLATE in the gzip (RFC 1952) or zlib (RFC 1950) wrapper, via
 * libdeflate, byte-compatible with numcodecs.gzip.GZip and numcodecs.zlib.Zlib (which use Python's
 * gzip and zlib modules).
 *
 * Config (numcodecs names): {"level": 0-9, default 1; -1 is accepted as zlib's "default" and means
 * 6}. Encode writes one member / stream (libdeflate's gzip header: no name, mtime 0). Decode of
 * gzip accepts what Python's gzip module accepts: several concatenated members (their outputs
 * joined), optional header fields (name, comment, extra, header crc), and zero padding after a
 * member; other trailing bytes are an error. Decode of zlib stops at the end of the stream and
 * ignores trailing bytes, as Python's zlib.decompress does. Omits: preset dictionaries (zlib
 * FDICT), which numcodecs never writes.
 *
 * Threading: an instance is immutable. libdeflate compressors (one per level) and the decompressor
 * are cached per thread (pthread key, freed at thread exit), so calls allocate nothing after the
 * first. Ownership: encode grows the caller's nds_buf; decode writes only out[0..out_cap).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <libdeflate.h>
#include <json-c/json.h>

#include "ndstore/sys/codec.h"
#include "internal/error.h"
#include "internal/json_util.h"

#define LEVELS 10 /* 0..9 */

typedef struct deflate_state {
    int level;        /* as configured (-1..9), echoed by config_json */
    int eff_level;    /* 0..9 actually used */
    bool gzip;        /* gzip wrapper, else zlib */
    const char *name; /* "gzip" or "zlib", for messages */
} deflate_state;

typedef struct deflate_tls {
    struct libdeflate_compressor *comp[LEVELS];
    struct libdeflate_decompressor *decomp;
} deflate_tls;

static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static int tls_key_rc;

static void tls_free(void *p) {
    deflate_tls *t = p;
    for (int i = 0; i < LEVELS; i++) libdeflate_free_compressor(t->comp[i]);
    libdeflate_free_decompressor(t->decomp);
    free(t);
}

static void tls_init(void) { tls_key_rc = pthread_key_create(&tls_key, tls_free); }

static deflate_tls *tls_get(void) {
    if (pthread_once(&tls_once, tls_init) != 0 || tls_key_rc != 0) return NULL;
    deflate_tls *t = pthread_getspecific(tls_key);
    if (t) return t;
    t = calloc(1, sizeof *t);
    if (t && pthread_setspecific(tls_key, t) != 0) {
        free(t);
        t = NULL;
    }
    return t;
}

static struct libdeflate_compressor *tls_compressor(int level) {
    deflate_tls *t = tls_get();
    if (!t) return NULL;
    if (!t->comp[level]) t->comp[level] = libdeflate_alloc_compressor(level);
    return t->comp[level];
}

static struct libdeflate_decompressor *tls_decompressor(void) {
    deflate_tls *t = tls_get();
    if (!t) return NULL;
    if (!t->decomp) t->decomp = libdeflate_alloc_decompressor();
    return t->decomp;
}

static int create(void **state, const json_object *config, bool gzip) {
    const char *doc = gzip ? "gzip config" : "zlib config";
    int64_t level = 1;
    if (config) {
        if (!json_object_is_type(config, json_type_object))
            return nds_err(NDS_EFORMAT, "%s: expected a json object", doc);
        json_object_object_foreach((json_object *)config, key, val) {
            (void)val;
            if (strcmp(key, "id") && strcmp(key, "level"))
                return nds_err(NDS_EFORMAT, "%s: unknown member \"%s\"", doc, key);
        }
        int rc = nds_json_get_int(config, "level", true, -1, 9, doc, &level);
        if (rc) return rc;
    }
    deflate_state *s = malloc(sizeof *s);
    if (!s) return nds_err(NDS_ENOMEM, "%s: out of memory", gzip ? "gzip" : "zlib");
    s->level = (int)level;
    s->eff_level = level < 0 ? 6 : (int)level;
    s->gzip = gzip;
    s->name = gzip ? "gzip" : "zlib";
    *state = s;
    return 0;
}

static int gzip_create(void **state, const struct json_object *config, size_t elem_size) {
    (void)elem_size;
    return create(state, config, true);
}

static int zlib_create(void **state, const struct json_object *config, size_t elem_size) {
    (void)elem_size;
    return create(state, config, false);
}

static void deflate_destroy(void *state) { free(state); }

static int deflate_encode(void *state, const uint8_t *in, size_t len, nds_buf *out) {
    const deflate_state *s = state;
    struct libdeflate_compressor *c = tls_compressor(s->eff_level);
    if (!c) return nds_err(NDS_ENOMEM, "%s: out of memory creating a compressor", s->name);
    size_t bound =
        s->gzip ? libdeflate_gzip_compress_bound(c, len) : libdeflate_zlib_compress_bound(c, len);
    if (bound < len)
        return nds_err(NDS_ELIMIT, "%s: input of %zu bytes is too large", s->name, len);
    int rc = nds_buf_reserve(out, bound);
    if (rc) return rc;
    static const uint8_t empty[1];
    const void *src = len ? (const void *)in : empty;
    size_t n = s->gzip ? libdeflate_gzip_compress(c, src, len, out->data, out->cap)
                       : libdeflate_zlib_compress(c, src, len, out->data, out->cap);
    if (n == 0) return nds_err(NDS_EINTERNAL, "%s: compression failed", s->name);
    out->len = n;
    return 0;
}

static int deflate_fail(const deflate_state *s, enum libdeflate_result r, size_t out_cap) {
    if (r == LIBDEFLATE_INSUFFICIENT_SPACE)
        return nds_err_cause(NDS_ECORRUPT, NDS_CAUSE_ZLIB, r,
                             "%s: decoded data exceeds the %zu bytes expected", s->name, out_cap);
    return nds_err_cause(NDS_ECORRUPT, NDS_CAUSE_ZLIB, r, "%s: invalid or truncated %s data",
                         s->name, s->name);
}

/* gzip: members are decoded one after another into consecutive parts of out, as gzip readers do. */
static int gzip_decode(const deflate_state *s, struct libdeflate_decompressor *d, const uint8_t *in,
                       size_t len, uint8_t *out, size_t out_cap, size_t *out_len) {
    size_t pos = 0, total = 0;
    do {
        size_t in_used = 0, out_used = 0;
        enum libdeflate_result r = libdeflate_gzip_decompress_ex(
            d, in + pos, len - pos, out + total, out_cap - total, &in_used, &out_used);
        if (r != LIBDEFLATE_SUCCESS) {
            if (pos > 0 && r == LIBDEFLATE_BAD_DATA)
                return nds_err_cause(NDS_ECORRUPT, NDS_CAUSE_ZLIB, r,
                                     "gzip: invalid data after the member ending at byte %zu", pos);
            return deflate_fail(s, r, out_cap);
        }
        pos += in_used;
        total += out_used;
        while (pos < len && in[pos] == 0) pos++; /* zero padding, which Python's gzip skips */
    } while (pos < len);
    *out_len = total;
    return 0;
}

static int deflate_decode_whole(void *state, const uint8_t *in, size_t len, uint8_t *out,
                                size_t out_cap, size_t *out_len) {
    const deflate_state *s = state;
    struct libdeflate_decompressor *d = tls_decompressor();
    if (!d) return nds_err(NDS_ENOMEM, "%s: out of memory creating a decompressor", s->name);
    uint8_t dummy;
    if (!out) { /* keeps pointer arithmetic on out defined when out_cap is 0 */
        out = &dummy;
        out_cap = 0;
    }
    if (s->gzip) return gzip_decode(s, d, in, len, out, out_cap, out_len);
    size_t n = 0;
    enum libdeflate_result r = libdeflate_zlib_decompress(d, in, len, out, out_cap, &n);
    if (r != LIBDEFLATE_SUCCESS) return deflate_fail(s, r, out_cap);
    *out_len = n;
    return 0;
}

static int deflate_config_json(void *state, struct json_object **out) {
    const deflate_state *s = state;
    json_object *o = json_object_new_object();
    if (!o) return nds_err(NDS_ENOMEM, "%s: out of memory", s->name);
    json_object_object_add(o, "id", json_object_new_string(s->name));
    json_object_object_add(o, "level", json_object_new_int(s->level));
    *out = o;
    return 0;
}

extern const nds_codec nds_codec_gzip, nds_codec_zlib;

/* Parts, readers and pieces: the generic fallback over the whole decode. */
static int deflate_decode(void *state, nds_decode_request *req) {
    const deflate_state *s = state;
    const nds_codec *self = s->gzip ? &nds_codec_gzip : &nds_codec_zlib;
    return nds_codec_decode_fallback(self, state, req, deflate_decode_whole);
}

const nds_codec nds_codec_gzip = {
    .version = NDS_CODEC_VERSION,
    .name = "gzip",
    .create = gzip_create,
    .destroy = deflate_destroy,
    .encode = deflate_encode,
    .decode = deflate_decode,
    .config_json = deflate_config_json,
};

const nds_codec nds_codec_zlib = {
    .version = NDS_CODEC_VERSION,
    .name = "zlib",
    .create = zlib_create,
    .destroy = deflate_destroy,
    .encode = deflate_encode,
    .decode = deflate_decode,
    .config_json = deflate_config_json,
};
