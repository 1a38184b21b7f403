/* The zarr v2 format driver: `.zarray` metadata, chunk keys, the chunk codec pipeline (filters,
 * compressor, byte order, C/F order), `.zattrs` attributes and `.zgroup` groups.
 *
 * Implements the zarr v2 storage specification for numeric dtypes; see docs/formats.md for what is
 * not supported (strings, objects, structured dtypes, filters other than numcodecs' array and
 * checksum filters: formats/codecs/array_codecs.h). Metadata parsing and printing live
 * in zarr2_metadata.c. Region iteration, fill handling and the conditional-write protocol are the
 * core's. Threading: an instance is immutable after open except through resize, which the core
 * serialises; decode_chunk / encode_chunk run on many threads at once and use a per-thread scratch
 * buffer for the F-order transpose and byte swapping. Ownership: the instance owns its metadata
 * document and codec instance; the kvstore is borrowed for each call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zarr2_metadata.h"
#include "zarr_consolidated.h"
#include "ndstore/sys/codec.h"
#include "codecs/array_codecs.h"
#include "ndstore/sys/format.h"
#include "ndstore/array.h"
#include "internal/dtype_util.h"
#include "internal/error.h"
#include "internal/format_util.h"
#include "internal/json_util.h"
#include "internal/strided.h"
#include "internal/util.h"

/* Rounds of create-or-open when other processes create and delete the array at the same time. */
#define OPEN_ATTEMPTS 8
/* Rounds of read-modify-conditional-write of .zarray on resize before giving up. */
#define RESIZE_ATTEMPTS 12

typedef struct zarr2 {
    nds_zarr2_meta m;       /* the parsed .zarray */
    json_object *doc;       /* the .zarray as stored (unknown members included), owned */
    const nds_codec *codec; /* the compressor, NULL for none */
    void *codec_state;      /* its instance, owned */
    nds_filter_chain *filters; /* "filters", NULL for none; owned */
    bool swap;              /* stored byte order differs from the host's */
    char url[512];          /* the array's kvstore URL, for messages */
    char doc_name[600];     /* "zarr: .zarray of <url>" */
    json_object *snapshot_attrs; /* opened from consolidated metadata: its .zattrs, owned */
} zarr2;

/* ---- per-thread scratch ---------------------------------------------------------------------- */

/* The calling thread's transpose buffer (a format slot of the shared per-thread scratch). */
static nds_buf *scratch_get(size_t n) { return nds_scratch_reserve(NDS_SCRATCH_FORMAT0, n); }

/* Frees the buffer when it is big, so an idle thread does not pin gigabytes. */
static void scratch_done(nds_buf *b) {
    (void)b;
    nds_scratch_trim(NDS_SCRATCH_FORMAT0);
}

/* ---- instance -------------------------------------------------------------------------------- */

/* Drops the metadata and codec so the instance can be (re)loaded. */
static void zarr2_reset(zarr2 *z) {
    if (z->codec) z->codec->destroy(z->codec_state);
    z->codec = NULL;
    z->codec_state = NULL;
    nds_filter_chain_free(z->filters);
    z->filters = NULL;
    nds_zarr2_meta_dispose(&z->m);
    json_object_put(z->doc);
    z->doc = NULL;
}

static void zarr2_close(void *state) {
    zarr2 *z = state;
    if (!z) return;
    zarr2_reset(z);
    json_object_put(z->snapshot_attrs);
    free(z);
}

/* Builds the filter chain for one chunk in the stored element type. */
static int load_filters(zarr2 *z, const char *name) {
    nds_np_dtype t;
    if (!nds_np_dtype_of(z->m.dtype, z->m.byte_order == '>', &t))
        return nds_err(NDS_EUNSUPPORTED, "%s: filters on %s arrays are not supported", name,
                       nds_dtype_name(z->m.dtype));
    return nds_filter_chain_parse(z->m.filters, t, z->m.chunk_nbytes, false, name, "filters",
                                  &z->filters);
}

/* Makes doc (ownership taken, even on error) the instance's metadata: parses it and creates the
 * codec. */
static int zarr2_load(zarr2 *z, json_object *doc, const char *name) {
    zarr2_reset(z);
    nds_zarr2_meta m;
    int rc = nds_zarr2_meta_parse(doc, name, &m);
    if (rc) {
        json_object_put(doc);
        return rc;
    }
    z->m = m;
    z->doc = doc;
    if (m.compressor) {
        rc = nds_format_codec_new(m.compressor, m.itemsize, name, "compressor", &z->codec,
                                  &z->codec_state);
        if (rc) return rc;
    }
    z->swap = m.itemsize > 1 && (m.byte_order == '>') != nds_host_is_big_endian();
    /* an object array's filter is its vlen codec, run by the core (lib/array_vlen.c) */
    return m.filters && !nds_dtype_is_vlen(m.dtype) ? load_filters(z, name) : 0;
}

static void zarr2_fill_meta(const zarr2 *z, nds_array_meta *meta) {
    memset(meta, 0, sizeof *meta);
    meta->rank = z->m.rank;
    memcpy(meta->shape, z->m.shape, sizeof meta->shape);
    memcpy(meta->chunk_shape, z->m.chunks, sizeof meta->chunk_shape);
    meta->dtype = z->m.dtype;
    meta->elem_size = nds_dtype_is_fixed_string(z->m.dtype) ? z->m.itemsize : 0;
    memcpy(meta->fill_value, z->m.fill, sizeof z->m.fill);
    meta->stored_canonical = !z->codec && !z->filters && !z->m.fortran && !z->swap &&
                             !nds_dtype_is_vlen(z->m.dtype);
    /* C order with a compressor: the compressor's decoded bytes are the chunk's (decode_chunk) */
    if (z->codec && !z->filters && !z->m.fortran && !nds_dtype_is_vlen(z->m.dtype))
        meta->decode_caps = z->codec->decode_caps;
}

/* ---- open ------------------------------------------------------------------------------------ */

/* Opens the stored .zarray text and checks it against what the spec asks for. */
static int open_existing(zarr2 *z, const nds_bytes *text, const json_object *req) {
    json_object *doc;
    int rc = nds_json_parse((const char *)text->data, text->len, z->doc_name, &doc);
    if (rc == 0) rc = zarr2_load(z, doc, z->doc_name);
    if (rc == 0) rc = nds_zarr2_meta_check(&z->m, req, z->url);
    return rc;
}

/* Creates the array from the spec's request with a create-only write; NDS_ECONFLICT when another
 * writer created it first. The whole document is validated before anything is written. */
static int create_new(zarr2 *z, nds_kvstore *kv, const json_object *req) {
    nds_read_result r;
    bool group;
    int rc = nds_format_read_key(kv, ".zgroup", "zarr", z->url, &r, &group);
    if (rc) return rc;
    if (group) {
        nds_read_result_dispose(&r);
        return nds_err(NDS_EEXIST,
                       "zarr: cannot create an array at %s: a group exists there (.zgroup)",
                       z->url);
    }
    char name[600];
    snprintf(name, sizeof name, "zarr: spec for %s", z->url);
    json_object *full = NULL, *norm = NULL;
    nds_zarr2_meta m = {0};
    if (json_object_deep_copy((json_object *)req, &full, NULL) != 0)
        return nds_err(NDS_ENOMEM, "zarr: out of memory");
    rc = nds_zarr2_request_complete(full, z->url);
    if (rc == 0) rc = nds_zarr2_meta_parse(full, name, &m);
    json_object_put(full);
    /* Store the compressor with its defaults spelled out, as zarr-python does. */
    if (rc == 0) rc = nds_zarr2_compressor_normalize(m.compressor, m.itemsize, name, &norm);
    if (rc) {
        nds_zarr2_meta_dispose(&m);
        return rc;
    }
    json_object_put(m.compressor);
    m.compressor = norm;
    json_object *doc = nds_zarr2_meta_to_json(&m);
    nds_zarr2_meta_dispose(&m);
    if (!doc) return nds_err(NDS_ENOMEM, "zarr: out of memory");
    rc = zarr2_load(z, doc, name);
    nds_generation absent = {.kind = NDS_GEN_ABSENT};
    if (rc == 0)
        rc = nds_format_write_json(kv, ".zarray", z->doc, &nds_json_style_python, &absent, "zarr",
                                   z->url);
    return rc;
}

static int open_or_create(zarr2 *z, nds_kvstore *kv, const json_object *req, unsigned mode) {
    if (!(mode & (NDS_OPEN_EXISTING | NDS_OPEN_CREATE))) mode |= NDS_OPEN_EXISTING;
    for (int attempt = 0; attempt < OPEN_ATTEMPTS; attempt++) {
        nds_read_result r;
        bool found = false;
        int rc = nds_format_read_key(kv, ".zarray", "zarr", z->url, &r, &found);
        if (rc) return rc;
        if (found) {
            if (mode & NDS_OPEN_EXISTING)
                rc = open_existing(z, &r.value, req);
            else
                rc = nds_err(NDS_EEXIST, "zarr: an array already exists at %s (.zarray)", z->url);
            nds_read_result_dispose(&r);
            return rc;
        }
        if (!(mode & NDS_OPEN_CREATE))
            return nds_err(NDS_ENOTFOUND, "zarr: no array at %s (.zarray not found)", z->url);
        rc = create_new(z, kv, req);
        if (rc != NDS_ECONFLICT) return rc;
        /* Another writer created it between our read and our write: open what it wrote. */
    }
    return nds_err(NDS_ECONFLICT,
                   "zarr: .zarray of %s kept appearing and disappearing while opening", z->url);
}

/* With "consolidated": true, opens from the consolidated copy (zarr_consolidated.h); *done stays
 * false when there is none for this array, or its entry does not load or match the spec (stale):
 * the array's own .zarray decides then. */
static int open_consolidated(zarr2 *z, nds_kvstore *kv, const json_object *spec,
                             const json_object *req, unsigned mode, bool *done) {
    nds_zc_entry found;
    char name[sizeof z->doc_name];
    int rc = nds_zc_open_entry(kv, spec, mode, NDS_ZC_V2, &found, name, sizeof name);
    json_object *doc = found.doc, *attrs = found.attrs;
    if (rc || !doc) return rc;
    rc = zarr2_load(z, doc, name);
    if (rc == 0) rc = nds_zarr2_meta_check(&z->m, req, z->url);
    if (rc) {
        json_object_put(attrs);
        zarr2_reset(z);
        nds_error_clear();
        return 0;
    }
    z->snapshot_attrs = attrs;
    *done = true;
    return 0;
}

static int zarr2_open(nds_kvstore *kv, const json_object *spec, unsigned mode, void **state,
                      nds_array_meta *meta) {
    *state = NULL;
    zarr2 *z = calloc(1, sizeof *z);
    if (!z) return nds_err(NDS_ENOMEM, "zarr: out of memory");
    snprintf(z->url, sizeof z->url, "%s", nds_kvstore_url(kv));
    snprintf(z->doc_name, sizeof z->doc_name, "zarr: .zarray of %s", z->url);
    json_object *req = NULL;
    bool done = false;
    int rc = nds_zarr2_request_from_spec(spec, z->url, &req);
    if (rc == 0) rc = open_consolidated(z, kv, spec, req, mode, &done);
    if (rc == 0 && !done) rc = open_or_create(z, kv, req, mode);
    json_object_put(req);
    if (rc) {
        zarr2_close(z);
        return rc;
    }
    zarr2_fill_meta(z, meta);
    *state = z;
    return 0;
}

/* ---- chunk keys ------------------------------------------------------------------------------ */

static int zarr2_chunk_key(void *state, const uint64_t *cell, char *buf, size_t cap) {
    const zarr2 *z = state;
    return nds_chunk_key_format(buf, cap, "", z->m.separator, cell, z->m.rank);
}

static int zarr2_parse_chunk_key(void *state, const char *key, uint64_t *cell) {
    const zarr2 *z = state;
    uint64_t grid[NDS_MAX_RANK];
    for (size_t d = 0; d < z->m.rank; d++) grid[d] = nds_ceil_div(z->m.shape[d], z->m.chunks[d]);
    return nds_chunk_key_parse(key, "", z->m.separator, grid, z->m.rank, cell);
}

/* ---- chunk codec pipeline -------------------------------------------------------------------- */

/* Copies a whole chunk between F order (src or dst per to_c) and C order. */
static void transpose(const zarr2 *z, uint8_t *dst, const uint8_t *src, bool to_c) {
    int64_t f[NDS_MAX_RANK], c[NDS_MAX_RANK];
    nds_f_strides(z->m.rank, z->m.chunks, z->m.itemsize, f);
    nds_c_strides(z->m.rank, z->m.chunks, z->m.itemsize, c);
    nds_strided_copy(z->m.rank, z->m.chunks, z->m.itemsize, dst, to_c ? c : f, src, to_c ? f : c);
}

static void swap_bytes(const zarr2 *z, uint8_t *data) {
    size_t unit = nds_dtype_swap_unit(z->m.dtype);
    nds_byteswap(data, z->m.chunk_nbytes / unit, unit);
}

/* Decompresses into dst, which must come out exactly chunk_nbytes long. */
static int decompress(const zarr2 *z, const uint8_t *data, size_t len, uint8_t *dst) {
    return nds_codec_decode_exact(z->codec, z->codec_state, data, len, dst, z->m.chunk_nbytes);
}

/* With filters: the compressor's output (or the stored bytes) is the filters' encoding, which
 * decodes into the chunk in its stored layout (then transposed and swapped as without). */
static int decode_filtered(const zarr2 *z, const uint8_t *data, size_t len, uint8_t *out) {
    size_t enc = nds_filter_chain_encoded_size(z->filters), n = z->m.chunk_nbytes;
    uint8_t *fbuf = NULL, *layout = NULL;
    int rc = 0;
    if (z->codec && !(fbuf = malloc(enc ? enc : 1)))
        return nds_err(NDS_ENOMEM, "zarr: out of memory for a %zu-byte chunk", enc);
    if (z->codec) rc = nds_codec_decode_exact(z->codec, z->codec_state, data, len, fbuf, enc);
    if (rc == 0 && z->m.fortran && !(layout = malloc(n ? n : 1)))
        rc = nds_err(NDS_ENOMEM, "zarr: out of memory for a %zu-byte chunk", n);
    if (rc == 0)
        rc = nds_filter_chain_decode(z->filters, fbuf ? fbuf : data, fbuf ? enc : len,
                                     layout ? layout : out);
    if (rc == 0 && layout) transpose(z, out, layout, true);
    if (rc == 0 && z->swap) swap_bytes(z, out);
    free(fbuf);
    free(layout);
    return rc;
}

/* An object array has no dense chunk (format.h): the core never asks for one; refused if asked. */
static int no_dense_chunk(const zarr2 *z) {
    return nds_err(NDS_EINTERNAL, "zarr: %s: an object array has no dense chunk (decode_vlen)", z->url);
}

/* The whole chunk from its stored bytes, in memory. */
static int decode_whole(void *state, const uint64_t *cell, const uint8_t *data, size_t len,
                        uint8_t *out) {
    const zarr2 *z = state;
    size_t n = z->m.chunk_nbytes;
    (void)cell;
    int rc = 0;
    if (nds_dtype_is_vlen(z->m.dtype)) return no_dense_chunk(z);
    if (z->filters) return decode_filtered(z, data, len, out);
    if (!z->codec) {
        if (len != n) return nds_err(NDS_ECORRUPT, "expected %zu bytes, found %zu", n, len);
        if (z->m.fortran)
            transpose(z, out, data, true);
        else
            memcpy(out, data, n);
    } else if (!z->m.fortran) {
        rc = decompress(z, data, len, out); /* straight into out: no extra copy */
    } else {
        nds_buf *tmp = scratch_get(n);
        if (!tmp) return nds_err(NDS_ENOMEM, "zarr: out of memory for a %zu-byte chunk", n);
        rc = decompress(z, data, len, tmp->data);
        if (rc == 0) transpose(z, out, tmp->data, true);
        scratch_done(tmp);
    }
    if (rc == 0 && z->swap) swap_bytes(z, out);
    return rc;
}

/* Whether bytes [begin, end) of the decoded value are bytes [begin, end) of the chunk: C order
 * with a compressor (which decodes a part where it can: blosc, zstd). */
static bool parts_are_chunk_parts(const zarr2 *z) {
    return z->codec && !z->filters && !z->m.fortran;
}

/* Decodes with the compressor as rq asks (a part, through a reader, into pieces), the chunk's
 * bytes put into the host's order. */
static int decode_request(const zarr2 *z, nds_decode_request *rq) {
    size_t unit = z->swap ? nds_dtype_swap_unit(z->m.dtype) : 0;
    rq->align = z->m.itemsize;
    return nds_codec_decode_chunk(z->codec, z->codec_state, rq, z->m.chunk_nbytes, unit);
}

/* C-order chunks with a compressor: a part, a reader and pieces as the compressor does them
 * (blosc, zstd); the rest (and whole decodes, whose size must be exactly the chunk's) whole. */
static int zarr2_decode_chunk(void *state, const uint64_t *cell, nds_decode_request *rq) {
    const zarr2 *z = state;
    if (nds_dtype_is_vlen(z->m.dtype)) return no_dense_chunk(z);
    bool whole = !rq->reader && !rq->sink && rq->end == SIZE_MAX;
    if (whole || !parts_are_chunk_parts(z))
        return nds_format_decode_fallback(state, cell, rq, decode_whole);
    return decode_request(z, rq);
}

/* With filters: the chunk in its stored layout, through the filters, then the compressor. */
static int encode_filtered(const zarr2 *z, const uint8_t *chunk, nds_buf *out) {
    size_t n = z->m.chunk_nbytes;
    nds_buf f = {0};
    uint8_t *layout = NULL;
    if ((z->m.fortran || z->swap) && !(layout = malloc(n ? n : 1)))
        return nds_err(NDS_ENOMEM, "zarr: out of memory for a %zu-byte chunk", n);
    if (layout) {
        if (z->m.fortran)
            transpose(z, layout, chunk, false);
        else
            memcpy(layout, chunk, n);
        if (z->swap) swap_bytes(z, layout);
    }
    int rc = nds_filter_chain_encode(z->filters, layout ? layout : chunk, z->codec ? &f : out);
    if (rc == 0 && z->codec) rc = z->codec->encode(z->codec_state, f.data, f.len, out);
    free(layout);
    nds_buf_dispose(&f);
    return rc;
}

static int zarr2_encode_chunk(void *state, const uint64_t *cell, const uint8_t *chunk,
                              nds_buf *out) {
    const zarr2 *z = state;
    size_t n = z->m.chunk_nbytes;
    (void)cell;
    if (nds_dtype_is_vlen(z->m.dtype)) return no_dense_chunk(z);
    if (z->filters) return encode_filtered(z, chunk, out);
    if (!z->codec) {
        if (nds_buf_reserve(out, n) != 0)
            return nds_err(NDS_ENOMEM, "zarr: out of memory for a chunk");
        if (z->m.fortran)
            transpose(z, out->data, chunk, false);
        else
            memcpy(out->data, chunk, n);
        if (z->swap) swap_bytes(z, out->data);
        out->len = n;
        return 0;
    }
    if (!z->m.fortran && !z->swap) return z->codec->encode(z->codec_state, chunk, n, out);
    nds_buf *tmp = scratch_get(n);
    if (!tmp) return nds_err(NDS_ENOMEM, "zarr: out of memory for a %zu-byte chunk", n);
    if (z->m.fortran)
        transpose(z, tmp->data, chunk, false);
    else
        memcpy(tmp->data, chunk, n);
    if (z->swap) swap_bytes(z, tmp->data);
    int rc = z->codec->encode(z->codec_state, tmp->data, n, out);
    scratch_done(tmp);
    return rc;
}

/* ---- object arrays (vlen-utf8 / vlen-bytes): the compressor alone, the core does the rest ---- */

static int zarr2_decode_vlen(void *state, const uint64_t *cell, const uint8_t *data, size_t len,
                             nds_buf *out) {
    const zarr2 *z = state;
    (void)cell;
    if (z->codec)
        return nds_codec_decode_grow(z->codec, z->codec_state, data, len,
                                     NDS_ZARR2_MAX_CHUNK_BYTES, out);
    out->len = 0;
    return nds_buf_append(out, data, len) ? nds_err(NDS_ENOMEM, "zarr: out of memory") : 0;
}

static int zarr2_encode_vlen(void *state, const uint64_t *cell, const uint8_t *list, size_t len,
                             nds_buf *out) {
    const zarr2 *z = state;
    (void)cell;
    out->len = 0;
    if (z->codec) return z->codec->encode(z->codec_state, list, len, out);
    return nds_buf_append(out, list, len) ? nds_err(NDS_ENOMEM, "zarr: out of memory") : 0;
}

/* ---- metadata, resize ------------------------------------------------------------------------ */

static int zarr2_metadata_json(void *state, json_object **out) {
    const zarr2 *z = state;
    *out = NULL;
    if (json_object_deep_copy(z->doc, out, NULL) != 0)
        return nds_err(NDS_ENOMEM, "zarr: out of memory");
    return 0;
}

/* 1 when a and b describe the same array apart from its shape. */
static bool same_but_shape(const nds_zarr2_meta *a, const nds_zarr2_meta *b) {
    json_object *ja = nds_zarr2_meta_to_json(a), *jb = nds_zarr2_meta_to_json(b);
    json_object_object_del(ja, "shape");
    json_object_object_del(jb, "shape");
    bool eq = ja && jb && json_object_equal(ja, jb);
    json_object_put(ja);
    json_object_put(jb);
    return eq;
}

/* One read-modify-conditional-write of .zarray with the new shape; NDS_ECONFLICT to retry. */
static int resize_once(zarr2 *z, nds_kvstore *kv, const uint64_t *new_shape) {
    nds_read_result r;
    bool found = false;
    int rc = nds_format_read_key(kv, ".zarray", "zarr", z->url, &r, &found);
    if (rc) return rc;
    if (!found) return nds_err(NDS_ENOTFOUND, "zarr: .zarray of %s disappeared", z->url);
    json_object *doc = NULL, *shape = json_object_new_array();
    nds_zarr2_meta now = {0}, next = {0};
    rc = nds_json_parse((const char *)r.value.data, r.value.len, z->doc_name, &doc);
    if (rc == 0) rc = nds_zarr2_meta_parse(doc, z->doc_name, &now);
    if (rc == 0 && !same_but_shape(&now, &z->m))
        rc = nds_err(NDS_EMISMATCH,
                     "%s: changed by another writer since it was opened; reopen the array",
                     z->doc_name);
    for (size_t d = 0; rc == 0 && d < z->m.rank; d++)
        json_object_array_add(shape, json_object_new_uint64(new_shape[d]));
    if (rc == 0) {
        json_object_object_add(doc, "shape", shape);
        shape = NULL;
        rc = nds_zarr2_meta_parse(doc, z->doc_name, &next); /* the new shape within limits */
    }
    if (rc == 0)
        rc = nds_format_write_json(kv, ".zarray", doc, &nds_json_style_python, &r.generation,
                                   "zarr", z->url);
    if (rc == 0) { /* the codec is unchanged (same_but_shape), so keep its instance */
        nds_zarr2_meta_dispose(&z->m);
        json_object_put(z->doc);
        z->m = next;
        z->doc = doc;
    } else {
        nds_zarr2_meta_dispose(&next);
        json_object_put(doc);
    }
    json_object_put(shape);
    nds_zarr2_meta_dispose(&now);
    nds_read_result_dispose(&r);
    return rc;
}

static int zarr2_resize(void *state, nds_kvstore *kv, const uint64_t *new_shape,
                        nds_array_meta *meta) {
    zarr2 *z = state;
    int rc = NDS_ECONFLICT;
    for (int attempt = 0; attempt < RESIZE_ATTEMPTS && rc == NDS_ECONFLICT; attempt++) {
        if (attempt)
            nds_sleep_ns((UINT64_C(1) << (attempt < 8 ? attempt : 8)) * 1000000 +
                         nds_random_u64() % 1000000);
        rc = resize_once(z, kv, new_shape);
    }
    if (rc == NDS_ECONFLICT)
        return nds_err(NDS_ECONFLICT, "%s: kept changing during resize; gave up after %d attempts",
                       z->doc_name, RESIZE_ATTEMPTS);
    if (rc == 0) zarr2_fill_meta(z, meta);
    return rc;
}

/* ---- attributes, groups, description --------------------------------------------------------- */

static int zarr2_get_attributes(void *state, nds_kvstore *kv, json_object **out) {
    const zarr2 *z = state;
    nds_read_result r;
    bool found = false;
    *out = NULL;
    if (z->snapshot_attrs) /* opened from consolidated metadata: its copy, no read */
        return json_object_deep_copy(z->snapshot_attrs, out, NULL) == 0
                   ? 0
                   : nds_err(NDS_ENOMEM, "zarr: out of memory");
    int rc = nds_format_read_key(kv, ".zattrs", "zarr", z->url, &r, &found);
    if (rc) return rc;
    if (!found) {
        *out = json_object_new_object();
        return *out ? 0 : nds_err(NDS_ENOMEM, "zarr: out of memory");
    }
    char name[600];
    snprintf(name, sizeof name, "zarr: .zattrs of %s", z->url);
    rc = nds_json_parse((const char *)r.value.data, r.value.len, name, out);
    nds_read_result_dispose(&r);
    if (rc == 0 && !json_object_is_type(*out, json_type_object)) {
        json_object_put(*out);
        *out = NULL;
        rc = nds_err(NDS_EFORMAT, "%s: expected a json object", name);
    }
    return rc;
}

static int zarr2_set_attributes(void *state, nds_kvstore *kv, const json_object *attrs) {
    const zarr2 *z = state;
    if (!json_object_is_type(attrs, json_type_object))
        return nds_err(NDS_EINVAL, "zarr: attributes of %s must be a json object", z->url);
    return nds_format_write_json(kv, ".zattrs", attrs, &nds_json_style_python, NULL, "zarr",
                                 z->url);
}

static int zarr2_create_group(nds_kvstore *kv) {
    const char *url = nds_kvstore_url(kv);
    nds_read_result r;
    bool array = false;
    int rc = nds_format_read_key(kv, ".zarray", "zarr", url, &r, &array);
    if (rc) return rc;
    if (array) {
        nds_read_result_dispose(&r);
        return nds_err(NDS_EEXIST,
                       "zarr: cannot create a group at %s: an array exists there (.zarray)", url);
    }
    json_object *doc = json_object_new_object();
    json_object_object_add(doc, "zarr_format", json_object_new_int(2));
    nds_generation absent = {.kind = NDS_GEN_ABSENT};
    rc = nds_format_write_json(kv, ".zgroup", doc, &nds_json_style_python, &absent, "zarr", url);
    json_object_put(doc);
    return rc == NDS_ECONFLICT ? 0 : rc; /* an existing group is left as it is */
}

static int zarr2_consolidate(nds_kvstore *kv, size_t *count) {
    return nds_zc_consolidate(kv, NDS_ZC_V2, count);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "zstd(level=1)", "blosc(blocksize=0, clevel=5, cname=lz4, shuffle=1)" (members sorted), or
 * "none". */
/* "name(key=value, ...)" of one numcodecs config, keys sorted, "id" left out; appended at *used. */
static void describe_config(const json_object *config, char *buf, size_t cap, size_t *used) {
    const char *keys[64];
    size_t n = 0;
    json_object *id = json_object_object_get(config, "id");
    int k = snprintf(buf + *used, cap - *used, "%s", json_object_get_string(id));
    *used += k > 0 ? (size_t)k : 0;
    json_object_object_foreach((json_object *)config, key, val) {
        (void)val;
        if (strcmp(key, "id") != 0 && n < 64) keys[n++] = key;
    }
    if (n == 0 || *used >= cap) return;
    qsort(keys, n, sizeof keys[0], cmp_str);
    for (size_t i = 0; i < n && *used < cap; i++) {
        json_object *val = json_object_object_get(config, keys[i]);
        const char *v = json_object_is_type(val, json_type_string)
                            ? json_object_get_string(val)
                            : json_object_to_json_string_ext(val, JSON_C_TO_STRING_PLAIN);
        k = snprintf(buf + *used, cap - *used, "%s%s=%s", i ? ", " : "(", keys[i], v);
        *used += k > 0 ? (size_t)k : 0;
    }
    if (*used < cap) {
        k = snprintf(buf + *used, cap - *used, ")");
        *used += k > 0 ? (size_t)k : 0;
    }
}

/* The filters in order, then the compressor: "delta(astype=<i4, dtype=<i4) | zstd(level=1)". */
static void zarr2_describe_codec(void *state, char *buf, size_t cap) {
    const zarr2 *z = state;
    json_object *config = NULL;
    size_t used = 0;
    if (cap == 0) return;
    buf[0] = '\0';
    size_t nf = z->m.filters ? json_object_array_length(z->m.filters) : 0;
    for (size_t i = 0; i < nf && used < cap; i++) {
        describe_config(json_object_array_get_idx(z->m.filters, i), buf, cap, &used);
        int k = used < cap ? snprintf(buf + used, cap - used, " | ") : 0;
        used += k > 0 ? (size_t)k : 0;
    }
    if (used >= cap) return;
    if (!z->codec || z->codec->config_json(z->codec_state, &config) != 0) {
        snprintf(buf + used, cap - used, "%s", z->codec ? z->codec->name : "none");
        return;
    }
    describe_config(config, buf, cap, &used);
    json_object_put(config);
}

const nds_format nds_format_zarr2 = {
    .version = NDS_FORMAT_VERSION,
    .name = "zarr",
    .url_scheme = "zarr",
    .metadata_key = ".zarray",
    .open = zarr2_open,
    .close = zarr2_close,
    .chunk_key = zarr2_chunk_key,
    .parse_chunk_key = zarr2_parse_chunk_key,
    .decode_chunk = zarr2_decode_chunk,
    .encode_chunk = zarr2_encode_chunk,
    .metadata_json = zarr2_metadata_json,
    .resize = zarr2_resize,
    .get_attributes = zarr2_get_attributes,
    .set_attributes = zarr2_set_attributes,
    .create_group = zarr2_create_group,
    .describe_codec = zarr2_describe_codec,
    .consolidate = zarr2_consolidate,
    .decode_vlen = zarr2_decode_vlen,
    .encode_vlen = zarr2_encode_vlen,
};
