/* The N5 format driver: attributes.json datasets and groups, block keys, and the block format
 * (header, Fortran-order big-endian payload, compression through the codec registry).
 *
 * Dimension order: ndstore's dimensions are the attributes.json order, so dimension 0 is the first
 * entry of "dimensions" and "blockSize" and of every block header, and the first part of a block
 * key ("i/j/k"). Inside a block N5 stores dimension 0 fastest (Fortran order), big-endian; decode
 * and encode convert to and from the core's canonical chunk (C order, host byte order, full block
 * shape). zarr-python's N5 store reverses the dimensions, so its arrays are the transpose of ours.
 *
 * Blocks: read in mode 0 (default) and mode 1 (varlength, when it holds as many elements as its
 * dimensions say); mode 2 (object) is NDS_EUNSUPPORTED; any other mode is NDS_ECORRUPT. Every
 * header field is checked against the bytes present and the blockSize before anything is sized
 * from it. Blocks smaller than blockSize are accepted on read (the rest of the block reads as 0,
 * N5's only fill value); ndstore writes mode 0 blocks clipped to the dataset at its upper edges,
 * as the Java implementation does. Metadata parsing lives in n5_metadata.c. Omits: mode 1 and 2
 * writes, lz4, rank 0 (see docs/formats.md).
 *
 * Threading: an instance is immutable after open except through resize and set_attributes, which
 * the core serialises; decode_chunk / encode_chunk run on many threads at once and use a
 * per-thread scratch buffer for the transpose. Ownership: the instance owns its parsed metadata,
 * the attributes.json document and the codec instance; the kvstore is borrowed for each call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "n5_metadata.h"
#include "ndstore/sys/codec.h"
#include "ndstore/sys/format.h"
#include "ndstore/array.h"
#include "internal/dtype_util.h"
#include "internal/error.h"
#include "internal/format_util.h"
#include "internal/json_util.h"
#include "internal/strided.h"
#include "internal/util.h"

#define ATTRS_KEY "attributes.json"
/* Rounds of create-or-open when other processes create and delete the dataset at the same time. */
#define OPEN_ATTEMPTS 8
/* Rounds of read-modify-conditional-write of attributes.json before giving up. */
#define REWRITE_ATTEMPTS 12
/* Block modes of the header. */
#define MODE_DEFAULT 0
#define MODE_VARLENGTH 1
#define MODE_OBJECT 2

typedef struct n5 {
    nds_n5_meta m;          /* the parsed dataset members */
    json_object *doc;       /* attributes.json as last read or written (attributes included) */
    const nds_codec *codec; /* NULL for raw */
    void *codec_state;      /* its instance, owned */
    bool swap;              /* the host is little-endian: blocks are big-endian */
    char url[512];          /* the dataset's kvstore URL, for messages */
    char doc_name[600];     /* "n5: attributes.json of <url>" */
} n5;

/* ---- instance -------------------------------------------------------------------------------- */

static void n5_reset(n5 *z) {
    if (z->codec) z->codec->destroy(z->codec_state);
    z->codec = NULL;
    z->codec_state = NULL;
    nds_n5_meta_dispose(&z->m);
    json_object_put(z->doc);
    z->doc = NULL;
}

static void n5_close(void *state) {
    n5 *z = state;
    if (!z) return;
    n5_reset(z);
    free(z);
}

/* Makes doc (ownership taken, even on error) the instance's metadata: parses it and creates the
 * codec. */
static int n5_load(n5 *z, json_object *doc, const char *name) {
    n5_reset(z);
    int rc = nds_n5_meta_parse(doc, name, &z->m);
    if (rc) {
        json_object_put(doc);
        return rc;
    }
    z->doc = doc;
    if (!z->m.codec_config) return 0;
    return nds_format_codec_new(z->m.codec_config, z->m.itemsize, name, "compression", &z->codec,
                                &z->codec_state);
}

static void n5_fill_meta(const n5 *z, nds_array_meta *meta) {
    memset(meta, 0, sizeof *meta); /* fill value 0: N5 has no other */
    meta->rank = z->m.rank;
    memcpy(meta->shape, z->m.shape, sizeof meta->shape);
    memcpy(meta->chunk_shape, z->m.block, sizeof meta->chunk_shape);
    meta->dtype = z->m.dtype;
    memcpy(meta->units, z->m.units, sizeof meta->units);
}

/* Reads and parses attributes.json; *doc is NULL when it is missing. */
static int read_doc(nds_kvstore *kv, const char *url, json_object **doc, nds_generation *gen) {
    nds_read_result r;
    bool found = false;
    char name[600];
    *doc = NULL;
    int rc = nds_format_read_key(kv, ATTRS_KEY, "n5", url, &r, &found);
    if (rc || !found) {
        if (gen) gen->kind = NDS_GEN_ABSENT;
        return rc;
    }
    snprintf(name, sizeof name, "n5: attributes.json of %s", url);
    rc = nds_json_parse((const char *)r.value.data, r.value.len, name, doc);
    if (rc == 0 && !json_object_is_type(*doc, json_type_object)) {
        json_object_put(*doc);
        *doc = NULL;
        rc = nds_err(NDS_EFORMAT, "%s: expected a json object", name);
    }
    if (gen) *gen = r.generation;
    nds_read_result_dispose(&r);
    return rc;
}

/* Writes doc as attributes.json (indented) with the given condition (NULL: none). */
static int write_doc(nds_kvstore *kv, const json_object *doc, const nds_generation *if_equal,
                     const char *url) {
    char *text = nds_json_to_string(doc, true);
    if (!text) return nds_err(NDS_ENOMEM, "n5: out of memory");
    nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
    if (if_equal) wo.if_equal = *if_equal;
    int rc = nds_kvstore_write(kv, ATTRS_KEY, text, strlen(text), &wo, NULL);
    free(text);
    if (rc && rc != NDS_ECONFLICT)
        rc = nds_err_prefix(rc, "n5: writing attributes.json of %s", url);
    return rc;
}

/* ---- open ------------------------------------------------------------------------------------ */

/* Creates the dataset from the spec's request with a create-only write; NDS_ECONFLICT when another
 * writer created attributes.json first. The whole document is validated before anything is
 * written. */
static int create_new(n5 *z, nds_kvstore *kv, const json_object *req) {
    char name[600];
    snprintf(name, sizeof name, "n5: spec for %s", z->url);
    json_object *doc = NULL;
    int rc = nds_n5_request_complete(req, z->url, &doc);
    if (rc == 0) rc = n5_load(z, doc, name);
    nds_generation absent = {.kind = NDS_GEN_ABSENT};
    if (rc == 0) rc = write_doc(kv, z->doc, &absent, z->url);
    return rc;
}

/* What to do with an attributes.json (doc, ownership taken) found where a dataset is to be
 * opened or created. */
static int open_found(n5 *z, json_object *doc, const json_object *req, unsigned mode) {
    int rc;
    if (!nds_n5_is_dataset(doc))
        rc = mode & NDS_OPEN_CREATE
                 ? nds_err(NDS_EEXIST,
                           "n5: cannot create a dataset at %s: a group exists there "
                           "(attributes.json without \"dimensions\")",
                           z->url)
                 : nds_err(NDS_ENOTFOUND,
                           "n5: no dataset at %s (its attributes.json describes a "
                           "group: no \"dimensions\")",
                           z->url);
    else if (!(mode & NDS_OPEN_EXISTING))
        rc = nds_err(NDS_EEXIST, "n5: a dataset already exists at %s (attributes.json)", z->url);
    else {
        rc = n5_load(z, doc, z->doc_name);
        return rc ? rc : nds_n5_meta_check(&z->m, z->doc, req, z->url);
    }
    json_object_put(doc);
    return rc;
}

static int open_or_create(n5 *z, nds_kvstore *kv, const json_object *req, unsigned mode) {
    if (!(mode & (NDS_OPEN_EXISTING | NDS_OPEN_CREATE))) mode |= NDS_OPEN_EXISTING;
    for (int attempt = 0; attempt < OPEN_ATTEMPTS; attempt++) {
        json_object *doc;
        int rc = read_doc(kv, z->url, &doc, NULL);
        if (rc) return rc;
        if (doc) return open_found(z, doc, req, mode);
        if (!(mode & NDS_OPEN_CREATE))
            return nds_err(NDS_ENOTFOUND, "n5: no dataset at %s (attributes.json not found)",
                           z->url);
        rc = create_new(z, kv, req);
        if (rc != NDS_ECONFLICT) return rc;
        /* Another writer created it between our read and our write: open what it wrote. */
    }
    return nds_err(NDS_ECONFLICT,
                   "n5: attributes.json of %s kept appearing and disappearing while opening",
                   z->url);
}

static int n5_open(nds_kvstore *kv, const json_object *spec, unsigned mode, void **state,
                   nds_array_meta *meta) {
    *state = NULL;
    n5 *z = calloc(1, sizeof *z);
    if (!z) return nds_err(NDS_ENOMEM, "n5: out of memory");
    snprintf(z->url, sizeof z->url, "%s", nds_kvstore_url(kv));
    snprintf(z->doc_name, sizeof z->doc_name, "n5: attributes.json of %s", z->url);
    z->swap = !nds_host_is_big_endian();
    json_object *req = NULL;
    int rc = nds_n5_request_from_spec(spec, z->url, &req);
    if (rc == 0) rc = open_or_create(z, kv, req, mode);
    json_object_put(req);
    if (rc) {
        n5_close(z);
        return rc;
    }
    n5_fill_meta(z, meta);
    *state = z;
    return 0;
}

/* ---- block keys ------------------------------------------------------------------------------ */

static int n5_chunk_key(void *state, const uint64_t *cell, char *buf, size_t cap) {
    const n5 *z = state;
    return nds_chunk_key_format(buf, cap, "", '/', cell, z->m.rank);
}

static int n5_parse_chunk_key(void *state, const char *key, uint64_t *cell) {
    const n5 *z = state;
    uint64_t grid[NDS_MAX_RANK];
    for (size_t d = 0; d < z->m.rank; d++) grid[d] = nds_ceil_div(z->m.shape[d], z->m.block[d]);
    return nds_chunk_key_parse(key, "", '/', grid, z->m.rank, cell);
}

/* ---- block format ---------------------------------------------------------------------------- */

/* A checked block header. */
typedef struct block_header {
    uint64_t dims[NDS_MAX_RANK]; /* block dimensions, each 1..blockSize */
    size_t count;                /* elements: the product of dims */
    size_t offset;               /* where the payload starts */
} block_header;

static uint32_t be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }
static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static void put_be16(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}
static void put_be32(uint8_t *p, uint32_t v) {
    put_be16(p, v >> 16);
    put_be16(p + 2, v & 0xffff);
}

static int check_mode(uint32_t mode) {
    if (mode == MODE_OBJECT)
        return nds_err(NDS_EUNSUPPORTED, "block mode 2 (object) is not supported: the block holds "
                                         "serialised objects, not array elements");
    if (mode > MODE_VARLENGTH)
        return nds_err(NDS_ECORRUPT, "unknown block mode %u (expected 0, default, or 1, varlength)",
                       mode);
    return 0;
}

/* Parses and checks the header of a len-byte block: mode, rank, each dimension against blockSize,
 * the varlength element count against the dimensions, and the header length against len. */
static int parse_header(const n5 *z, const uint8_t *p, size_t len, block_header *h) {
    if (len < 4) return nds_err(NDS_ECORRUPT, "block of %zu bytes is shorter than its header", len);
    uint32_t mode = be16(p), ndims = be16(p + 2);
    int rc = check_mode(mode);
    if (rc) return rc;
    if (ndims != z->m.rank)
        return nds_err(NDS_ECORRUPT, "block header has %u dimensions, the dataset %zu", ndims,
                       z->m.rank);
    size_t hdr = 4 + 4 * (size_t)ndims + (mode == MODE_VARLENGTH ? 4 : 0);
    if (len < hdr)
        return nds_err(NDS_ECORRUPT, "block of %zu bytes is shorter than its %zu-byte header", len,
                       hdr);
    h->count = 1;
    for (size_t d = 0; d < ndims; d++) {
        h->dims[d] = be32(p + 4 + 4 * d);
        if (h->dims[d] == 0 || h->dims[d] > z->m.block[d])
            return nds_err(NDS_ECORRUPT,
                           "block dimension %zu is %llu, outside [1, %llu] "
                           "(blockSize)",
                           d, (unsigned long long)h->dims[d], (unsigned long long)z->m.block[d]);
        h->count *= (size_t)h->dims[d]; /* at most the block's element count: no overflow */
    }
    uint32_t n = mode == MODE_VARLENGTH ? be32(p + 4 + 4 * ndims) : 0;
    if (mode == MODE_VARLENGTH && n != h->count)
        return nds_err(NDS_EUNSUPPORTED,
                       "varlength block holds %u elements but its dimensions "
                       "hold %zu; only varlength blocks as dense as their dimensions can be read "
                       "as an array",
                       n, h->count);
    h->offset = hdr;
    return 0;
}

/* Decompresses the payload into dst, which must come out exactly n bytes long. */
static int decompress(const n5 *z, const uint8_t *data, size_t len, uint8_t *dst, size_t n) {
    return nds_codec_decode_exact(z->codec, z->codec_state, data, len, dst, n);
}

/* Copies the Fortran-order elements of a block of extent dims (packed) into the C-order full
 * block. */
static void unpack(const n5 *z, const uint64_t *dims, const uint8_t *packed, uint8_t *block) {
    int64_t f[NDS_MAX_RANK], c[NDS_MAX_RANK];
    nds_f_strides(z->m.rank, dims, z->m.itemsize, f);
    nds_c_strides(z->m.rank, z->m.block, z->m.itemsize, c);
    nds_strided_copy(z->m.rank, dims, z->m.itemsize, block, c, packed, f);
}

/* The inverse of unpack: the part of a C-order full block within dims, in Fortran order. */
static void pack(const n5 *z, const uint64_t *dims, const uint8_t *block, uint8_t *packed) {
    int64_t f[NDS_MAX_RANK], c[NDS_MAX_RANK];
    nds_f_strides(z->m.rank, dims, z->m.itemsize, f);
    nds_c_strides(z->m.rank, z->m.block, z->m.itemsize, c);
    nds_strided_copy(z->m.rank, dims, z->m.itemsize, packed, f, block, c);
}

static void to_host(const n5 *z, uint8_t *data, size_t count) {
    if (z->swap) nds_byteswap(data, count, z->m.itemsize);
}

/* The whole block from its stored bytes, in memory. */
static int decode_whole(void *state, const uint64_t *cell, const uint8_t *data, size_t len,
                        uint8_t *out) {
    const n5 *z = state;
    (void)cell;
    block_header h;
    int rc = parse_header(z, data, len, &h);
    if (rc) return rc;
    size_t n = h.count * z->m.itemsize, plen = len - h.offset;
    const uint8_t *payload = data + h.offset;
    if (n < z->m.block_nbytes) memset(out, 0, z->m.block_nbytes); /* a clipped block: 0 beyond */
    if (!z->codec) {
        if (plen != n)
            return nds_err(NDS_ECORRUPT,
                           "expected %zu bytes after the %zu-byte block header, "
                           "found %zu",
                           n, h.offset, plen);
        unpack(z, h.dims, payload, out);
    } else if (z->m.rank == 1) { /* Fortran and C order agree: no transpose */
        rc = decompress(z, payload, plen, out, n);
    } else {
        /* The transpose goes through a per-thread buffer, trimmed after a huge block. */
        nds_buf *tmp = nds_scratch_reserve(NDS_SCRATCH_FORMAT0, n);
        if (!tmp) return nds_err(NDS_ENOMEM, "n5: out of memory for a %zu-byte block", n);
        rc = decompress(z, payload, plen, tmp->data, n);
        if (rc == 0) unpack(z, h.dims, tmp->data, out);
        nds_scratch_trim(NDS_SCRATCH_FORMAT0);
    }
    if (rc == 0) to_host(z, out, z->m.block_nbytes / z->m.itemsize);
    return rc;
}

/* Whole decodes only: a block's header says its size, and it may be clipped or big-endian. */
static int n5_decode_chunk(void *state, const uint64_t *cell, nds_decode_request *rq) {
    return nds_format_decode_fallback(state, cell, rq, decode_whole);
}

/* The block's extent: blockSize, clipped to the dataset at its upper edges. */
static size_t clipped_extent(const n5 *z, const uint64_t *cell, uint64_t *dims) {
    size_t count = 1;
    for (size_t d = 0; d < z->m.rank; d++) {
        uint64_t start = cell[d] * z->m.block[d];
        dims[d] = start < z->m.shape[d] ? nds_min_u64(z->m.block[d], z->m.shape[d] - start)
                                        : z->m.block[d];
        count *= (size_t)dims[d];
    }
    return count;
}

static void put_header(const n5 *z, const uint64_t *dims, uint8_t *p) {
    put_be16(p, MODE_DEFAULT);
    put_be16(p + 2, (uint32_t)z->m.rank);
    for (size_t d = 0; d < z->m.rank; d++) put_be32(p + 4 + 4 * d, (uint32_t)dims[d]);
}

/* Compresses packed[0..n) into out behind a header of hdr bytes. */
static int compress_block(const n5 *z, const uint8_t *packed, size_t n, size_t hdr, nds_buf *out) {
    int rc = z->codec->encode(z->codec_state, packed, n, out);
    if (rc) return rc;
    if (nds_buf_reserve(out, out->len + hdr) != 0)
        return nds_err(NDS_ENOMEM, "n5: out of memory for a block");
    memmove(out->data + hdr, out->data, out->len);
    out->len += hdr;
    return 0;
}

static int n5_encode_chunk(void *state, const uint64_t *cell, const uint8_t *chunk, nds_buf *out) {
    const n5 *z = state;
    uint64_t dims[NDS_MAX_RANK];
    size_t count = clipped_extent(z, cell, dims), n = count * z->m.itemsize;
    size_t hdr = 4 + 4 * z->m.rank;
    int rc = 0;
    if (!z->codec) { /* straight into out, behind the header */
        if (nds_buf_reserve(out, hdr + n) != 0)
            return nds_err(NDS_ENOMEM, "n5: out of memory for a %zu-byte block", hdr + n);
        pack(z, dims, chunk, out->data + hdr);
        to_host(z, out->data + hdr, count); /* the swap is its own inverse */
        out->len = hdr + n;
    } else if (z->m.rank == 1 && !z->swap) {
        rc = compress_block(z, chunk, n, hdr, out);
    } else {
        nds_buf *tmp = nds_scratch_reserve(NDS_SCRATCH_FORMAT0, n);
        if (!tmp) return nds_err(NDS_ENOMEM, "n5: out of memory for a %zu-byte block", n);
        pack(z, dims, chunk, tmp->data);
        to_host(z, tmp->data, count);
        rc = compress_block(z, tmp->data, n, hdr, out);
        nds_scratch_trim(NDS_SCRATCH_FORMAT0);
    }
    if (rc == 0) put_header(z, dims, out->data);
    return rc;
}

/* ---- metadata, resize, attributes ------------------------------------------------------------ */

/* The dataset members of doc (the reserved ones), as a new object. */
static json_object *dataset_members(const json_object *doc) {
    json_object *out = json_object_new_object();
    json_object_object_foreach((json_object *)doc, key, val) if (out && nds_n5_is_reserved(key))
        json_object_object_add(out, key, json_object_get(val));
    return out;
}

static int n5_metadata_json(void *state, json_object **out) {
    const n5 *z = state;
    *out = dataset_members(z->doc);
    return *out ? 0 : nds_err(NDS_ENOMEM, "n5: out of memory");
}

/* An edit of attributes.json: changes doc (the stored document) in place, or fails. */
typedef int (*edit_fn)(n5 *z, json_object *doc, const void *arg);

/* One read-modify-conditional-write of attributes.json; NDS_ECONFLICT to retry. On success the
 * written document becomes z->doc (and z->m its parse). */
static int rewrite_once(n5 *z, nds_kvstore *kv, edit_fn edit, const void *arg) {
    json_object *doc;
    nds_generation gen;
    int rc = read_doc(kv, z->url, &doc, &gen);
    if (rc) return rc;
    if (!doc) return nds_err(NDS_ENOTFOUND, "%s: disappeared", z->doc_name);
    nds_n5_meta next = {0};
    rc = edit(z, doc, arg);
    if (rc == 0) rc = nds_n5_meta_parse(doc, z->doc_name, &next); /* still a valid dataset */
    if (rc == 0) rc = write_doc(kv, doc, &gen, z->url);
    if (rc) {
        nds_n5_meta_dispose(&next);
        json_object_put(doc);
        return rc;
    }
    /* The codec cannot have changed (edits keep "compression"): keep its instance. */
    nds_n5_meta_dispose(&z->m);
    json_object_put(z->doc);
    z->m = next;
    z->doc = doc;
    return 0;
}

/* rewrite_once with retries and backoff while other writers get in between. */
static int rewrite(n5 *z, nds_kvstore *kv, edit_fn edit, const void *arg, const char *what) {
    int rc = NDS_ECONFLICT;
    for (int attempt = 0; attempt < REWRITE_ATTEMPTS && rc == NDS_ECONFLICT; attempt++) {
        if (attempt)
            nds_sleep_ns((UINT64_C(1) << (attempt < 8 ? attempt : 8)) * 1000000 +
                         nds_random_u64() % 1000000);
        rc = rewrite_once(z, kv, edit, arg);
    }
    if (rc == NDS_ECONFLICT)
        return nds_err(NDS_ECONFLICT, "%s: kept changing during %s; gave up after %d attempts",
                       z->doc_name, what, REWRITE_ATTEMPTS);
    return rc;
}

/* Resize: the stored dataset must be ours but for its shape; then "dimensions" is replaced. */
static int edit_shape(n5 *z, json_object *doc, const void *arg) {
    const uint64_t *shape = arg;
    nds_n5_meta now;
    int rc = nds_n5_meta_parse(doc, z->doc_name, &now);
    if (rc) return rc;
    bool same = now.rank == z->m.rank && now.dtype == z->m.dtype &&
                memcmp(now.block, z->m.block, now.rank * sizeof now.block[0]) == 0 &&
                nds_json_equal(now.compression, z->m.compression);
    nds_n5_meta_dispose(&now);
    if (!same)
        return nds_err(NDS_EMISMATCH,
                       "%s: changed by another writer since it was opened; reopen "
                       "the dataset",
                       z->doc_name);
    json_object *dims = json_object_new_array();
    for (size_t d = 0; dims && d < z->m.rank; d++)
        json_object_array_add(dims, json_object_new_uint64(shape[d]));
    if (!dims) return nds_err(NDS_ENOMEM, "n5: out of memory");
    json_object_object_add(doc, "dimensions", dims);
    return 0;
}

static int n5_resize(void *state, nds_kvstore *kv, const uint64_t *new_shape,
                     nds_array_meta *meta) {
    n5 *z = state;
    int rc = rewrite(z, kv, edit_shape, new_shape, "resize");
    if (rc == 0) n5_fill_meta(z, meta);
    return rc;
}

static int n5_get_attributes(void *state, nds_kvstore *kv, json_object **out) {
    const n5 *z = state;
    json_object *doc;
    *out = NULL;
    int rc = read_doc(kv, z->url, &doc, NULL);
    if (rc) return rc;
    if (!doc) return nds_err(NDS_ENOTFOUND, "%s: disappeared", z->doc_name);
    *out = json_object_new_object();
    json_object_object_foreach(doc, key, val) {
        if (*out && !nds_n5_is_reserved(key))
            json_object_object_add(*out, key, json_object_get(val));
    }
    json_object_put(doc);
    return *out ? 0 : nds_err(NDS_ENOMEM, "n5: out of memory");
}

/* Attributes: the stored dataset members stay (whatever another writer made of them), the user
 * attributes are replaced. */
static int edit_attributes(n5 *z, json_object *doc, const void *arg) {
    (void)z;
    /* json_object_object_foreach reads the next entry before the body: deleting is safe. */
    json_object_object_foreach(doc, key, val) {
        (void)val;
        if (!nds_n5_is_reserved(key)) json_object_object_del(doc, key);
    }
    json_object_object_foreach((json_object *)arg, k, v)
        json_object_object_add(doc, k, json_object_get(v));
    return 0;
}

static int n5_set_attributes(void *state, nds_kvstore *kv, const json_object *attrs) {
    n5 *z = state;
    if (!json_object_is_type(attrs, json_type_object))
        return nds_err(NDS_EINVAL, "n5: attributes of %s must be a json object", z->url);
    json_object_object_foreach((json_object *)attrs, key, val) {
        (void)val;
        if (nds_n5_is_reserved(key))
            return nds_err(NDS_EINVAL,
                           "n5: attribute \"%s\" of %s is reserved for the dataset's "
                           "metadata",
                           key, z->url);
    }
    return rewrite(z, kv, edit_attributes, attrs, "setting attributes");
}

/* ---- groups, description --------------------------------------------------------------------- */

static int n5_create_group(nds_kvstore *kv) {
    const char *url = nds_kvstore_url(kv);
    json_object *doc;
    int rc = read_doc(kv, url, &doc, NULL);
    if (rc) return rc;
    if (doc) { /* an existing group is left as it is */
        rc = nds_n5_is_dataset(doc) ? nds_err(NDS_EEXIST,
                                              "n5: cannot create a group at %s: a "
                                              "dataset exists there (attributes.json)",
                                              url)
                                    : 0;
        json_object_put(doc);
        return rc;
    }
    /* Never an empty {}: zarr-python takes only a non-empty attributes.json for a group. */
    doc = json_object_new_object();
    json_object_object_add(doc, "n5", json_object_new_string(NDS_N5_VERSION));
    nds_generation absent = {.kind = NDS_GEN_ABSENT};
    rc = write_doc(kv, doc, &absent, url);
    json_object_put(doc);
    return rc == NDS_ECONFLICT ? 0 : rc; /* someone created it first: left as it is */
}

/* "gzip(level=1, useZlib=false)", "blosc(cname=lz4, clevel=5, shuffle=1, blocksize=0)", "raw". */
static void n5_describe_codec(void *state, char *buf, size_t cap) {
    const n5 *z = state;
    if (cap == 0) return;
    json_object *type = json_object_object_get(z->m.compression, "type");
    size_t used = (size_t)snprintf(buf, cap, "%s", json_object_get_string(type));
    int i = 0;
    json_object_object_foreach(z->m.compression, key, val) {
        if (strcmp(key, "type") == 0 || used >= cap) continue;
        const char *v = json_object_is_type(val, json_type_string)
                            ? json_object_get_string(val)
                            : json_object_to_json_string_ext(val, JSON_C_TO_STRING_PLAIN);
        int k = snprintf(buf + used, cap - used, "%s%s=%s", i++ ? ", " : "(", key, v);
        used += k > 0 ? (size_t)k : 0;
    }
    if (i && used < cap) snprintf(buf + used, cap - used, ")");
}

const nds_format nds_format_n5 = {
    .version = NDS_FORMAT_VERSION,
    .name = "n5",
    .url_scheme = "n5",
    .metadata_key = ATTRS_KEY,
    .open = n5_open,
    .close = n5_close,
    .chunk_key = n5_chunk_key,
    .parse_chunk_key = n5_parse_chunk_key,
    .decode_chunk = n5_decode_chunk,
    .encode_chunk = n5_encode_chunk,
    .metadata_json = n5_metadata_json,
    .resize = n5_resize,
    .get_attributes = n5_get_attributes,
    .set_attributes = n5_set_attributes,
    .create_group = n5_create_group,
    .describe_codec = n5_describe_codec,
};
