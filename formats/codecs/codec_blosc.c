/* The "blosc" codec: c-blosc 1.x chunks, byte-compatible with numcodecs.blosc.Blosc.
 *
 * Config (numcodecs names): {"cname": "lz4" | "lz4hc" | "blosclz" | "zstd" | "zlib" (and "snappy"
 * when the installed c-blosc has it), default "lz4"; "clevel": 0-9, default 5; "shuffle": 0 none, 1
 * byte, 2 bit, -1 auto (bit shuffle when the element size is 1, else byte shuffle), default 1;
 * "blocksize": bytes, 0 = automatic, default 0}. The typesize is the element size given to create
 * (not a config member, as in numcodecs, which takes it from the array's dtype). Omits: blosc2
 * frames, the global blosc state (blosc_init / blosc_set_nthreads), internal threads.
 *
 * Threading: an instance is immutable; the *_ctx functions keep all state on the stack of the call
 * and use one internal thread, since ndstore already spreads chunks over its own pool. Chunks
 * compressed with lz4 are decoded by blosc_blocks.c (block by block, into place or piece by piece),
 * the others by c-blosc. A decode request does parts (only the blocks holding them), parts through
 * a reader (only their stored bytes read) and pieces (lz4 chunks) here, the rest through the
 * generic fallback (nds_codec_decode_fallback). Limits:
 * c-blosc 1.x handles at most BLOSC_MAX_BUFFERSIZE (2 GiB - 16) bytes per chunk; larger input is
 * NDS_ELIMIT. Ownership: encode grows the caller's nds_buf; decode writes only out[0..out_cap).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blosc.h>
#include <json-c/json.h>

#include "ndstore/sys/codec.h"
#include "blosc_blocks.h"
#include "internal/error.h"
#include "internal/format_util.h"
#include "internal/json_util.h"
#include "internal/util.h"

#define DOC "blosc config"
#define NDS_BLOSC_AUTOSHUFFLE (-1)

typedef struct bl_state {
    char cname[16];   /* validated compressor name */
    int clevel;       /* 0-9 */
    int shuffle;      /* as configured, -1 kept so config_json round-trips */
    int doshuffle;    /* the resolved BLOSC_NOSHUFFLE / BLOSC_SHUFFLE / BLOSC_BITSHUFFLE */
    size_t blocksize; /* 0 = automatic */
    size_t typesize;  /* the element size, >= 1 */
} bl_state;

/* The compressors numcodecs can name. snappy is accepted only if this c-blosc was built with it. */
static bool cname_ok(const char *name) {
    static const char *const names[] = {"lz4", "lz4hc", "blosclz", "zstd", "zlib", "snappy"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(name, names[i]) == 0) return blosc_compname_to_compcode(name) >= 0;
    return false;
}

static int check_members(const json_object *config) {
    static const char *const known[] = {"id", "cname", "clevel", "shuffle", "blocksize"};
    json_object_object_foreach((json_object *)config, key, val) {
        (void)val;
        bool ok = false;
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
            ok = ok || strcmp(key, known[i]) == 0;
        if (!ok) return nds_err(NDS_EFORMAT, DOC ": unknown member \"%s\"", key);
    }
    return 0;
}

/* Reads the members into s (defaults already set). */
static int parse_config(const json_object *config, bl_state *s) {
    const char *cname = s->cname;
    int64_t clevel = s->clevel, shuffle = s->shuffle, blocksize = 0;
    int rc = check_members(config);
    if (!rc) rc = nds_json_get_string(config, "cname", true, DOC, &cname);
    if (!rc && !cname_ok(cname))
        return nds_err(NDS_EFORMAT,
                       DOC ": \"cname\" is \"%.40s\", not one of lz4, lz4hc, blosclz, zstd, zlib%s",
                       cname, blosc_compname_to_compcode("snappy") >= 0 ? ", snappy" : "");
    if (!rc) rc = nds_json_get_int(config, "clevel", true, 0, 9, DOC, &clevel);
    if (!rc) rc = nds_json_get_int(config, "shuffle", true, -1, 2, DOC, &shuffle);
    if (!rc)
        rc = nds_json_get_int(config, "blocksize", true, 0, BLOSC_MAX_BUFFERSIZE, DOC, &blocksize);
    if (rc) return rc;
    if (cname != s->cname) snprintf(s->cname, sizeof s->cname, "%s", cname); /* no overlap */
    s->clevel = (int)clevel;
    s->shuffle = (int)shuffle;
    s->blocksize = (size_t)blocksize;
    return 0;
}

static int bl_create(void **state, const struct json_object *config, size_t elem_size) {
    bl_state tmp = {.cname = "lz4", .clevel = 5, .shuffle = BLOSC_SHUFFLE, .blocksize = 0};
    if (config) {
        if (!json_object_is_type(config, json_type_object))
            return nds_err(NDS_EFORMAT, DOC ": expected a json object");
        int rc = parse_config(config, &tmp);
        if (rc) return rc;
    }
    /* c-blosc itself treats a typesize above 255 as 1; numcodecs passes the dtype's size unchanged.
     */
    tmp.typesize = elem_size ? elem_size : 1;
    tmp.doshuffle = tmp.shuffle;
    if (tmp.shuffle == NDS_BLOSC_AUTOSHUFFLE)
        tmp.doshuffle = tmp.typesize == 1 ? BLOSC_BITSHUFFLE : BLOSC_SHUFFLE;
    bl_state *s = malloc(sizeof *s);
    if (!s) return nds_err(NDS_ENOMEM, "blosc: out of memory");
    *s = tmp;
    *state = s;
    return 0;
}

static void bl_destroy(void *state) { free(state); }

static int bl_encode(void *state, const uint8_t *in, size_t len, nds_buf *out) {
    const bl_state *s = state;
    if (len > BLOSC_MAX_BUFFERSIZE)
        return nds_err(NDS_ELIMIT, "blosc: chunk of %zu bytes exceeds blosc's limit of %d bytes",
                       len, BLOSC_MAX_BUFFERSIZE);
    size_t cap = len + BLOSC_MAX_OVERHEAD; /* always enough, per blosc.h */
    int rc = nds_buf_reserve(out, cap);
    if (rc) return rc;
    static const uint8_t empty[1];
    int n = blosc_compress_ctx(s->clevel, s->doshuffle, s->typesize, len,
                               len ? (const void *)in : empty, out->data, cap, s->cname,
                               s->blocksize, 1);
    if (n <= 0)
        return nds_err_cause(NDS_EINTERNAL, NDS_CAUSE_BLOSC, n,
                             "blosc: compression failed (code %d)", n);
    out->len = (size_t)n;
    return 0;
}

/* The header's sizes as the unsigned 32-bit numbers they are (blosc_cbuffer_sizes reads them as
 * int32, so a size past 2^31 came back sign-extended: 18446744071562067983); cbytes 0 for a format
 * version this blosc cannot read, as blosc_cbuffer_sizes says. */
static void header_sizes(const uint8_t *in, size_t *nbytes, size_t *cbytes, size_t *blocksize) {
    *nbytes = nds_load_le32(in + 4);
    *blocksize = nds_load_le32(in + 8);
    *cbytes = in[0] > BLOSC_VERSION_FORMAT ? 0 : nds_load_le32(in + 12);
}

/* Checks the 16-byte header against the bytes present and out_cap; *nbytes = the decoded size. */
static int check_header(const uint8_t *in, size_t len, size_t out_cap, size_t *nbytes) {
    if (len < BLOSC_MIN_HEADER_LENGTH)
        return nds_err(NDS_ECORRUPT, "blosc: truncated header (%zu bytes, need %d)", len,
                       BLOSC_MIN_HEADER_LENGTH);
    size_t n, cbytes, blocksize, validated;
    header_sizes(in, &n, &cbytes, &blocksize);
    if (cbytes == 0)
        return nds_err(NDS_ECORRUPT, "blosc: unsupported format version %u", (unsigned)in[0]);
    if (cbytes > len)
        return nds_err(NDS_ECORRUPT, "blosc: truncated chunk: header says %zu bytes, %zu present",
                       cbytes, len);
    /* Like numcodecs, bytes after the chunk's cbytes are ignored. */
    if (blosc_cbuffer_validate(in, cbytes, &validated) != 0)
        return nds_err(NDS_ECORRUPT, "blosc: invalid header (declares %zu bytes)", n);
    if (n > out_cap)
        return nds_err(NDS_ECORRUPT, "blosc: chunk declares %zu bytes, more than the %zu expected",
                       n, out_cap);
    *nbytes = n;
    return 0;
}

static int bl_decode_whole(void *state, const uint8_t *in, size_t len, uint8_t *out, size_t out_cap,
                           size_t *out_len) {
    (void)state;
    size_t nbytes = 0;
    int rc = check_header(in, len, out_cap, &nbytes);
    if (rc) return rc;
    if (nbytes == 0) { /* blosc returns 0 for both "empty" and some errors; settle it here */
        *out_len = 0;
        return 0;
    }
    rc = nds_blosc_decode_into(in, len, out, nbytes); /* lz4 chunks: see blosc_blocks.h */
    if (rc != NDS_EUNSUPPORTED) {
        *out_len = rc ? 0 : nbytes;
        return rc;
    }
    /* destsize = the declared size, which also bounds the block buffers blosc allocates. */
    int n = blosc_decompress_ctx(in, out, nbytes, 1);
    if (n <= 0 || (size_t)n != nbytes)
        return nds_err_cause(NDS_ECORRUPT, NDS_CAUSE_BLOSC, n,
                             "blosc: corrupt chunk (decompression returned %d, "
                             "expected %zu bytes)",
                             n, nbytes);
    *out_len = nbytes;
    return 0;
}

/* Decodes only the blocks holding bytes [begin, end): lz4 chunks here (blosc_blocks.c), the
 * others through blosc_getitem, in whole items of the chunk's typesize. */
static int bl_decode_part(void *state, const uint8_t *in, size_t len, uint8_t *out, size_t out_len,
                          size_t begin, size_t end) {
    size_t nbytes = 0;
    int rc = check_header(in, len, out_len, &nbytes);
    if (rc) return rc;
    if (nbytes != out_len)
        return nds_err(NDS_ECORRUPT, "blosc: chunk declares %zu bytes, %zu expected", nbytes,
                       out_len);
    if (begin >= end) return 0;
    size_t declared, cbytes, blocksize;
    header_sizes(in, &declared, &cbytes, &blocksize);
    /* blosc_getitem allocates two blocks: a block larger than the chunk is a lie, not a size. */
    if (blocksize == 0 || blocksize > nbytes)
        return nds_err(NDS_ECORRUPT, "blosc: block size %zu for a %zu-byte chunk", blocksize,
                       nbytes);
    rc = nds_blosc_decode_range(in, len, out, out_len, begin, nds_min_u64(end, nbytes));
    if (rc != NDS_EUNSUPPORTED) return rc; /* lz4 chunks: see blosc_blocks.h */
    size_t typesize = in[3] ? in[3] : 1, first = begin / typesize;
    size_t items = (nds_min_u64(end, nbytes) + typesize - 1) / typesize - first;
    if ((first + items) * typesize > nbytes) { /* a partial last item: decode it all */
        size_t got;
        return bl_decode_whole(state, in, len, out, out_len, &got);
    }
    int got = blosc_getitem(in, (int)first, (int)items, out + first * typesize);
    if (got < 0 || (size_t)got != items * typesize)
        return nds_err_cause(NDS_ECORRUPT, NDS_CAUSE_BLOSC, got,
                             "blosc: corrupt chunk (reading items %zu to %zu returned %d)", first,
                             first + items, got);
    return 0;
}

/* ---- a part through a reader: only the stored bytes a range needs ---- */

/* Reads through r; a value shorter than its header says is a truncated chunk. */
static int read_stored(const nds_part_reader *r, uint64_t offset, size_t len, uint8_t *dst,
                       uint64_t *value_len) {
    int rc = r->read(r->arg, offset, len, dst, value_len);
    if (rc == NDS_ERANGE)
        return nds_err(NDS_ECORRUPT, "blosc: truncated chunk: %zu bytes at %llu are missing", len,
                       (unsigned long long)offset);
    return rc;
}

/* Where the blocks holding bytes [begin, end) of a chunk lie in its stored bytes. */
typedef struct block_span {
    size_t index_end;  /* header and block index: bytes [0, index_end) */
    size_t first, last; /* blocks first..last */
    size_t lo, hi;      /* their stored bytes [lo, hi) */
} block_span;

/* Finds the stored bytes of blocks sp->first..sp->last from the block index idx (nblocks
 * entries) and the chunk's stored size cbytes; false when the index does not describe blocks in
 * order inside the chunk (the whole value is then read, and bl_decode_part reports what is
 * wrong). */
static bool find_block_span(const uint8_t *idx, size_t nblocks, size_t cbytes, block_span *sp) {
    sp->lo = nds_load_le32(idx + 4 * sp->first);
    sp->hi = sp->last + 1 < nblocks ? nds_load_le32(idx + 4 * (sp->last + 1)) : cbytes;
    if (sp->lo < sp->index_end || sp->hi > cbytes || sp->lo >= sp->hi) return false;
    for (size_t k = sp->first; k < sp->last; k++)
        if (nds_load_le32(idx + 4 * k) >= nds_load_le32(idx + 4 * (k + 1))) return false;
    return true;
}

/* Turns buf (header and index, then the span's bytes) into a chunk of its own that holds only
 * the span's blocks: cbytes shrunk to what is there, the span's block starts moved to where
 * its bytes now are; other blocks start at the span (never read). */
static void compact_chunk(uint8_t *buf, size_t nblocks, const block_span *sp) {
    size_t shift = sp->lo - sp->index_end;
    nds_store_le32(buf + 12, (uint32_t)(sp->index_end + sp->hi - sp->lo));
    for (size_t k = 0; k < nblocks; k++) {
        uint8_t *start = buf + BLOSC_MIN_HEADER_LENGTH + 4 * k;
        bool in_span = k >= sp->first && k <= sp->last;
        nds_store_le32(start, (uint32_t)(in_span ? nds_load_le32(start) - shift : sp->index_end));
    }
}

/* Reads the header and the block index into the codec scratch, then the blocks holding bytes
 * [begin, end) after them, and decodes those (blosc_getitem on the compacted chunk). Chunks
 * stored without compression (memcpyed) and item ranges bl_decode_part would decode whole are
 * NDS_EUNSUPPORTED: read whole (the generic fallback). */
static int bl_decode_part_read(void *state, const nds_part_reader *r, uint8_t *out,
                               size_t out_len, size_t begin, size_t end) {
    uint8_t h[BLOSC_MIN_HEADER_LENGTH];
    uint64_t value_len;
    if (begin >= end) return 0;
    int rc = read_stored(r, 0, sizeof h, h, &value_len);
    if (rc) return rc;
    size_t nbytes = nds_load_le32(h + 4), blocksize = nds_load_le32(h + 8),
           cbytes = nds_load_le32(h + 12);
    size_t typesize = h[3] ? h[3] : 1;
    /* The whole items bl_decode_part decodes: bytes [from, to). */
    size_t from = begin / typesize * typesize;
    size_t to = (nds_min_u64(end, nbytes) + typesize - 1) / typesize * typesize;
    if ((h[2] & BLOSC_MEMCPYED) || blocksize == 0 || blocksize > nbytes || nbytes != out_len ||
        cbytes > value_len || to > nbytes || from >= to)
        return NDS_EUNSUPPORTED;
    size_t nblocks = nbytes / blocksize + (nbytes % blocksize != 0);
    block_span sp = {.index_end = BLOSC_MIN_HEADER_LENGTH + 4 * nblocks,
                     .first = from / blocksize,
                     .last = (to - 1) / blocksize};
    if (sp.index_end > cbytes) return NDS_EUNSUPPORTED;
    nds_buf *b = nds_scratch_reserve(NDS_SCRATCH_CODEC, sp.index_end);
    if (!b) return NDS_ENOMEM;
    memcpy(b->data, h, sizeof h);
    rc = read_stored(r, sizeof h, sp.index_end - sizeof h, b->data + sizeof h, &value_len);
    if (rc) return rc;
    if (!find_block_span(b->data + sizeof h, nblocks, cbytes, &sp)) return NDS_EUNSUPPORTED;
    size_t len = sp.index_end + sp.hi - sp.lo;
    if (!(b = nds_scratch_reserve(NDS_SCRATCH_CODEC, len))) return NDS_ENOMEM;
    if (!(rc = read_stored(r, sp.lo, sp.hi - sp.lo, b->data + sp.index_end, &value_len))) {
        compact_chunk(b->data, nblocks, &sp);
        rc = bl_decode_part(state, b->data, len, out, out_len, begin, end);
    }
    nds_scratch_trim(NDS_SCRATCH_CODEC);
    return rc;
}

extern const nds_codec nds_codec_blosc;

/* What blosc does itself: a part through a reader (only the blocks it needs are read), pieces
 * block by block (lz4 chunks: blosc_blocks.c, each block handed on while it is in the cache), a
 * part of a value in memory (only its blocks decoded). NDS_EUNSUPPORTED for the rest. */
static int bl_decode_native(void *state, nds_decode_request *req) {
    int rc = NDS_EUNSUPPORTED;
    if (req->reader) {
        if (req->end != SIZE_MAX && !req->sink) /* else read whole (the fallback) */
            rc = bl_decode_part_read(state, req->reader, req->dst, req->cap, req->begin, req->end);
    } else if (req->sink)
        rc = nds_blosc_decode_blocks(req->in, req->in_len, req->cap, req->align, req->sink,
                                     req->sink_arg);
    else if (req->end != SIZE_MAX)
        rc = bl_decode_part(state, req->in, req->in_len, req->dst, req->cap, req->begin, req->end);
    if (rc == 0) req->out_len = req->cap;
    return rc;
}

static int bl_decode(void *state, nds_decode_request *req) {
    if (!req->reader && !req->sink && req->end == SIZE_MAX)
        return bl_decode_whole(state, req->in, req->in_len, req->dst, req->cap, &req->out_len);
    int rc = bl_decode_native(state, req);
    if (rc != NDS_EUNSUPPORTED) return rc;
    return nds_codec_decode_fallback(&nds_codec_blosc, state, req, bl_decode_whole);
}

static int bl_config_json(void *state, struct json_object **out) {
    const bl_state *s = state;
    json_object *o = json_object_new_object();
    if (!o) return nds_err(NDS_ENOMEM, "blosc: out of memory");
    json_object_object_add(o, "id", json_object_new_string("blosc"));
    json_object_object_add(o, "cname", json_object_new_string(s->cname));
    json_object_object_add(o, "clevel", json_object_new_int(s->clevel));
    json_object_object_add(o, "shuffle", json_object_new_int(s->shuffle));
    json_object_object_add(o, "blocksize", json_object_new_int64((int64_t)s->blocksize));
    *out = o;
    return 0;
}

const nds_codec nds_codec_blosc = {
    .version = NDS_CODEC_VERSION,
    .name = "blosc",
    .create = bl_create,
    .destroy = bl_destroy,
    .encode = bl_encode,
    .config_json = bl_config_json,
    .decode = bl_decode,
    .decode_caps = NDS_DECODE_PART | NDS_DECODE_READER | NDS_DECODE_PIECES,
};
