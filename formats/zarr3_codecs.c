/* The zarr v3 codec pipeline: parsing a "codecs" list into a chain, decoding stored bytes into a
 * canonical array (C order, host byte order) and encoding it back.
 *
 * Implements the core codecs of the zarr v3 specification: transpose (array to array; several in a
 * row are composed into one permutation, and the legacy "C"/"F" orders are accepted), bytes (array
 * to bytes, little or big endian), sharding_indexed (array to bytes, in zarr3_shard.c), and the
 * bytes-to-bytes codecs gzip, zstd, blosc and crc32c, which are translated to the numcodecs-style
 * configs of the codec registry (nds_codec_find). "numcodecs.<id>" names (as zarr-python 3 writes
 * for numcodecs codecs) map to the registry codec <id> with the configuration passed through.
 * Array-to-array codecs other than transpose (bitround, numcodecs.delta, .fixedscaleoffset,
 * .quantize, .astype, .packbits) run through formats/codecs/array_codecs.c before the
 * array-to-bytes codec, which then sees their output type and size; they do not combine with
 * transpose or sharding_indexed (NDS_EUNSUPPORTED).
 * Omits: every other codec (NDS_EUNSUPPORTED naming it, whatever its must_understand says: a codec
 * cannot be skipped without misreading the data), partial decoding other than sharding's.
 *
 * Threading: a chain is immutable after parsing; decode and encode allocate per call. Ownership:
 * the chain owns its registry codec instances, their JSON and nested sharding codecs.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zarr3_codecs.h"
#include "zarr3_shard.h"
#include "codecs/array_codecs.h"
#include "codecs/packbits3.h"
#include "ndstore/sys/codec.h"
#include "internal/codec_spec.h"
#include "internal/dtype_util.h"
#include "internal/error.h"
#include "internal/format_util.h"
#include "internal/json_util.h"
#include "internal/strided.h"
#include "internal/util.h"

/* First output buffer of a bytes-to-bytes decode whose result size is not known in advance. */
#define GROW_START ((uint64_t)1 << 20)
/* Longest member path in messages ("codecs[0].configuration.codecs[1]..."). */
#define PATH_MAX_LEN 256

/* AB_VLEN: vlen-utf8 / vlen-bytes, whose element lists the core builds (lib/array_vlen.c). */
/* AB_PACKBITS: the zarr-extensions packbits codec (codecs/packbits3.c). */
typedef enum { AB_BYTES, AB_SHARDING, AB_VLEN, AB_PACKBITS } ab_kind;

/* A bytes-to-bytes codec: a registry codec instance and its normalised zarr v3 JSON. */
typedef struct bb_codec {
    const nds_codec *codec;
    void *state;
    json_object *v3; /* {"name": ..., "configuration": {...}}, owned */
    bool crc;        /* crc32c: decoding removes exactly 4 bytes */
} bb_codec;

struct nds_z3_chain {
    nds_z3_array arr;             /* the array encoded */
    size_t elem, nbytes;          /* bytes per element and canonical bytes of what the
                                   * array-to-bytes codec sees (arr after the array codecs) */
    json_object *aa_nc;           /* numcodecs configs of the array codecs, while parsing */
    json_object *aa_v3;           /* their v3 JSON, owned (NULL for none) */
    nds_filter_chain *aa;         /* the array codecs (array_codecs.h), NULL for none */
    bool transpose;               /* a non-identity permutation applies */
    size_t perm[NDS_MAX_RANK];    /* the composed permutation (numpy transpose axes) */
    nds_z3_array tarr; /* arr after the permutation: what the array-to-bytes codec sees */
    ab_kind ab;
    bool big_endian;              /* bytes: "endian" is "big" */
    bool swap;                    /* bytes: stored byte order differs from the host's */
    nds_z3_shard *shard;          /* sharding_indexed, owned */
    nds_packbits3 pb;             /* packbits */
    size_t n_bb;
    bb_codec bb[NDS_Z3_MAX_BB];
    uint64_t bound[NDS_Z3_MAX_BB + 1]; /* bound[k]: largest input of bb[k]; bound[n_bb]: output */
};

/* ---- small helpers --------------------------------------------------------------------------- */

static uint64_t sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
static uint64_t sat_mul(uint64_t a, uint64_t b) {
    uint64_t r;
    return nds_mul_u64(a, b, &r) ? r : UINT64_MAX;
}

/* Largest output of one bytes-to-bytes encode of n bytes: generous for zstd, gzip, blosc, lz4,
 * bz2 (each adds far less than n/8 + 1 KiB). */
static uint64_t bb_bound(const bb_codec *b, uint64_t n) {
    return b->crc ? sat_add(n, 4) : sat_add(sat_add(n, n / 8), 1024);
}

static bool name_is(const char *a, const char *b) { return strcmp(a, b) == 0; }

/* Fails with NDS_EFORMAT naming the first member of config not in allowed (NULL-terminated). */
/* Puts dp before the current error unless it is there already. The parsers given dp name it in
 * their own errors; only errors from below (a codec's create, config_json) lack it. Prefixing at
 * every level that holds dp repeated it ("zarr3: zarr.json of X: codecs[1]: zarr3: zarr.json of
 * X: codecs[1]: ..."), so the prefix is added once, wherever the error passes first. */
static int prefix_once(int rc, const char *dp) {
    const char *msg = nds_error_last()->message;
    if (nds_error_last()->code == rc && strncmp(msg, dp, strlen(dp)) == 0) return rc;
    return nds_err_prefix(rc, "%s", dp);
}

static int check_members(const json_object *config, const char *const *allowed, const char *dp) {
    if (!config) return 0;
    json_object_object_foreach((json_object *)config, key, val) {
        (void)val;
        bool ok = false;
        for (size_t i = 0; allowed[i] && !ok; i++) ok = name_is(key, allowed[i]);
        if (!ok)
            return nds_err(NDS_EFORMAT, "%s: unknown configuration member \"%.40s\"", dp, key);
    }
    return 0;
}

static json_object *new_codec_json(const char *name, json_object *config) {
    json_object *o = json_object_new_object();
    if (!o) {
        json_object_put(config);
        return NULL;
    }
    json_object_object_add(o, "name", json_object_new_string(name));
    if (config) json_object_object_add(o, "configuration", config);
    return o;
}

/* ---- transposition --------------------------------------------------------------------------- */

/* Copies between arr (canonical) and its transposition by perm (canonical of the permuted shape).
 * Both directions walk the permuted index space; forward writes it densely, inverse reads it. */
static void transpose_copy(const nds_z3_chain *c, const uint8_t *src, uint8_t *dst, bool forward) {
    int64_t in_stride[NDS_MAX_RANK], t_stride[NDS_MAX_RANK], scatter[NDS_MAX_RANK];
    size_t rank = c->arr.rank;
    nds_c_strides(rank, c->arr.shape, c->elem, in_stride);
    nds_c_strides(rank, c->tarr.shape, c->elem, t_stride);
    for (size_t i = 0; i < rank; i++) scatter[i] = in_stride[c->perm[i]];
    if (forward)
        nds_strided_copy(rank, c->tarr.shape, c->elem, dst, t_stride, src, scatter);
    else
        nds_strided_copy(rank, c->tarr.shape, c->elem, dst, scatter, src, t_stride);
}

/* "order": a permutation of 0..rank-1, or the legacy "C" (identity) / "F" (reversed). */
static int parse_order(const json_object *config, size_t rank, const char *dp,
                       size_t *perm) {
    static const char *const allowed[] = {"order", NULL};
    json_object *order;
    int rc = check_members(config, allowed, dp);
    if (rc) return rc;
    if (!config || !json_object_object_get_ex(config, "order", &order))
        return nds_err(NDS_EFORMAT, "%s: transpose needs \"order\"", dp);
    if (json_object_is_type(order, json_type_string)) {
        const char *s = json_object_get_string(order);
        if (!name_is(s, "C") && !name_is(s, "F"))
            return nds_err(NDS_EFORMAT, "%s: \"order\" must be a permutation", dp);
        for (size_t i = 0; i < rank; i++) perm[i] = s[0] == 'C' ? i : rank - 1 - i;
        return 0;
    }
    bool seen[NDS_MAX_RANK] = {false};
    if (!json_object_is_type(order, json_type_array) || json_object_array_length(order) != rank)
        return nds_err(NDS_EFORMAT, "%s: \"order\" must be a permutation of %zu dimensions",
                       dp, rank);
    for (size_t i = 0; i < rank; i++) {
        json_object *e = json_object_array_get_idx(order, i);
        int64_t v = json_object_is_type(e, json_type_int) ? json_object_get_int64(e) : -1;
        if (v < 0 || (uint64_t)v >= rank || seen[v])
            return nds_err(NDS_EFORMAT, "%s: \"order\" must be a permutation of 0..%zu", dp,
                           rank - 1);
        seen[v] = true;
        perm[i] = (size_t)v;
    }
    return 0;
}

/* Applies one more transpose (order p) after the chain's current permutation. */
static void compose(nds_z3_chain *c, const size_t *p) {
    size_t total[NDS_MAX_RANK];
    for (size_t i = 0; i < c->arr.rank; i++) total[i] = c->perm[p[i]];
    memcpy(c->perm, total, c->arr.rank * sizeof total[0]);
    c->transpose = false;
    for (size_t i = 0; i < c->arr.rank; i++) {
        c->tarr.shape[i] = c->arr.shape[c->perm[i]];
        c->transpose = c->transpose || c->perm[i] != i;
    }
}

/* ---- array-to-bytes codecs ------------------------------------------------------------------- */

/* implicit: the bytes codec a list without an array-to-bytes codec gets (little-endian). */
static int parse_bytes(nds_z3_chain *c, const json_object *config, const char *dp,
                       bool implicit) {
    static const char *const allowed[] = {"endian", NULL};
    const char *endian = NULL;
    int rc = check_members(config, allowed, dp);
    if (!rc && config) rc = nds_json_get_string(config, "endian", true, dp, &endian);
    if (rc) return rc;
    if (!endian && !implicit && nds_dtype_swap_unit(c->tarr.dtype) > 1)
        return nds_err(NDS_EFORMAT, "%s: bytes needs \"endian\" for %s", dp,
                       nds_dtype_name(c->tarr.dtype));
    if (endian && !name_is(endian, "little") && !name_is(endian, "big"))
        return nds_err(NDS_EFORMAT, "%s: \"endian\" must be \"little\" or \"big\"", dp);
    c->ab = AB_BYTES;
    c->big_endian = endian && endian[0] == 'b';
    c->swap = nds_dtype_swap_unit(c->tarr.dtype) > 1 && c->big_endian != nds_host_is_big_endian();
    return 0;
}

/* packbits over what the array codecs before it produce (tarr). */
static int parse_packbits(nds_z3_chain *c, const json_object *config, const char *dp) {
    c->ab = AB_PACKBITS;
    return nds_packbits3_parse(config, c->tarr.dtype, dp, &c->pb);
}

/* The packed size of the array-to-bytes codec's input. */
static uint64_t packed_size(const nds_z3_chain *c) {
    return nds_packbits3_encoded_size(&c->pb, c->nbytes / c->elem);
}

/* vlen-utf8 (data_type string) / vlen-bytes (bytes): the element list is the core's, so the
 * chain holds only the codecs after it (nds_z3_chain_decode_vlen). Names with "numcodecs." too, as
 * zarrita reads them. No configuration members. */
static int vlen_kind(const char *name) {
    if (strncmp(name, "numcodecs.", 10) == 0) name += 10;
    return name_is(name, "vlen-utf8") ? NDS_STRING : name_is(name, "vlen-bytes") ? NDS_BYTES_VLEN : 0;
}

static int parse_vlen(nds_z3_chain *c, const char *name, const json_object *config,
                      const char *dp) {
    static const char *const allowed[] = {NULL};
    int rc = check_members(config, allowed, dp);
    if (rc) return rc;
    if ((int)c->arr.dtype != vlen_kind(name))
        return nds_err(NDS_EFORMAT, "%s: codec \"%s\" needs data_type \"%s\", not \"%s\"", dp,
                       name, vlen_kind(name) == NDS_STRING ? "string" : "bytes",
                       nds_dtype_name(c->arr.dtype));
    if (c->transpose || c->aa_nc)
        return nds_err(NDS_EUNSUPPORTED, "%s: array-to-array codecs before \"%s\" are not "
                                         "supported", dp, name);
    c->ab = AB_VLEN;
    return 0;
}

/* ---- bytes-to-bytes codecs ------------------------------------------------------------------- */

/* The numcodecs config and the normalised v3 configuration of a core bytes-to-bytes codec. */
typedef struct bb_parse {
    json_object *nc;   /* numcodecs-style config for the registry codec (with "id") */
    json_object *v3;   /* normalised v3 configuration, or NULL for none */
    size_t elem_size;  /* typesize handed to the registry codec */
} bb_parse;

static int parse_gzip(const json_object *cfg, const char *dp, bb_parse *p) {
    static const char *const allowed[] = {"level", NULL};
    int64_t level = 0;
    int rc = check_members(cfg, allowed, dp);
    if (!rc && !cfg) rc = nds_err(NDS_EFORMAT, "%s: gzip needs \"level\"", dp);
    if (!rc) rc = nds_json_get_int(cfg, "level", false, 0, 9, dp, &level);
    if (rc) return rc;
    json_object_object_add(p->nc, "level", json_object_new_int((int)level));
    json_object_object_add(p->v3, "level", json_object_new_int((int)level));
    return 0;
}

static int parse_zstd(const json_object *cfg, const char *dp, bb_parse *p) {
    static const char *const allowed[] = {"level", "checksum", NULL};
    int64_t level = 0;
    bool checksum = false;
    int rc = check_members(cfg, allowed, dp);
    if (!rc && !cfg) rc = nds_err(NDS_EFORMAT, "%s: zstd needs \"level\"", dp);
    if (!rc) rc = nds_json_get_int(cfg, "level", false, -131072, 22, dp, &level);
    if (!rc) rc = nds_json_get_bool(cfg, "checksum", true, dp, &checksum);
    if (rc) return rc;
    json_object_object_add(p->nc, "level", json_object_new_int((int)level));
    json_object_object_add(p->nc, "checksum", json_object_new_boolean(checksum));
    json_object_object_add(p->v3, "level", json_object_new_int((int)level));
    json_object_object_add(p->v3, "checksum", json_object_new_boolean(checksum));
    return 0;
}

static int shuffle_code(const char *s) {
    return name_is(s, "noshuffle") ? 0 : name_is(s, "shuffle") ? 1 : name_is(s, "bitshuffle") ? 2
                                                                                             : -1;
}

static int parse_blosc(const json_object *cfg, size_t elem, const char *dp,
                       bb_parse *p) {
    static const char *const allowed[] = {"cname", "clevel", "shuffle", "typesize", "blocksize",
                                          NULL};
    const char *cname = NULL, *shuffle = NULL;
    int64_t clevel = 0, typesize = (int64_t)elem, blocksize = 0;
    int rc = check_members(cfg, allowed, dp);
    if (!rc && !cfg) rc = nds_err(NDS_EFORMAT, "%s: blosc needs a configuration", dp);
    if (!rc) rc = nds_json_get_string(cfg, "cname", false, dp, &cname);
    if (!rc) rc = nds_json_get_int(cfg, "clevel", false, 0, 9, dp, &clevel);
    if (!rc) rc = nds_json_get_string(cfg, "shuffle", false, dp, &shuffle);
    if (!rc && shuffle_code(shuffle) < 0)
        rc = nds_err(NDS_EFORMAT,
                     "%s: blosc \"shuffle\" must be \"noshuffle\", \"shuffle\" or "
                     "\"bitshuffle\"",
                     dp);
    bool need_typesize = !rc && shuffle_code(shuffle) != 0;
    if (!rc) rc = nds_json_get_int(cfg, "typesize", !need_typesize, 1, 255, dp, &typesize);
    if (!rc) rc = nds_json_get_int(cfg, "blocksize", true, 0, INT32_MAX, dp, &blocksize);
    if (rc) return rc;
    json_object_object_add(p->nc, "cname", json_object_new_string(cname));
    json_object_object_add(p->nc, "clevel", json_object_new_int((int)clevel));
    json_object_object_add(p->nc, "shuffle", json_object_new_int(shuffle_code(shuffle)));
    json_object_object_add(p->nc, "blocksize", json_object_new_int64(blocksize));
    json_object_object_add(p->v3, "cname", json_object_new_string(cname));
    json_object_object_add(p->v3, "clevel", json_object_new_int((int)clevel));
    json_object_object_add(p->v3, "shuffle", json_object_new_string(shuffle));
    json_object_object_add(p->v3, "typesize", json_object_new_int((int)typesize));
    json_object_object_add(p->v3, "blocksize", json_object_new_int64(blocksize));
    p->elem_size = (size_t)typesize;
    return 0;
}

static int parse_crc32c(const json_object *cfg, const char *dp, bb_parse *p) {
    static const char *const allowed[] = {NULL};
    json_object_put(p->v3); /* crc32c has no configuration */
    p->v3 = NULL;
    return check_members(cfg, allowed, dp);
}

/* "numcodecs.<id>": the registry codec <id>, configured as numcodecs would be. */
static int parse_numcodecs(const char *id, const json_object *cfg, const char *dp, bb_parse *p) {
    if (cfg) {
        json_object_object_foreach((json_object *)cfg, key, val) {
            if (!name_is(key, "id")) json_object_object_add(p->nc, key, json_object_get(val));
        }
    }
    const nds_codec *codec = nds_codec_find(id);
    void *state = NULL;
    json_object *full = NULL;
    int rc = codec->create(&state, p->nc, p->elem_size);
    if (!rc) rc = codec->config_json(state, &full);
    codec->destroy(state);
    if (rc) return prefix_once(rc, dp);
    json_object_object_foreach(full, key, val) {
        if (!name_is(key, "id")) json_object_object_add(p->v3, key, json_object_get(val));
    }
    json_object_put(full);
    return 0;
}

/* The registry id a v3 bytes-to-bytes codec name maps to, or NULL when it is not one. */
static const char *bb_registry_id(const char *name) {
    static const char *const core[] = {"gzip", "zstd", "blosc", "crc32c"};
    for (size_t i = 0; i < sizeof core / sizeof core[0]; i++)
        if (name_is(name, core[i])) return core[i];
    if (strncmp(name, "numcodecs.", 10) == 0 && nds_codec_find(name + 10)) return name + 10;
    return NULL;
}

static int bb_fill(const char *name, const char *id, const json_object *cfg, size_t elem,
                   const char *dp, bb_parse *p) {
    if (name_is(name, "gzip")) return parse_gzip(cfg, dp, p);
    if (name_is(name, "zstd")) return parse_zstd(cfg, dp, p);
    if (name_is(name, "blosc")) return parse_blosc(cfg, elem, dp, p);
    if (name_is(name, "crc32c")) return parse_crc32c(cfg, dp, p);
    return parse_numcodecs(id, cfg, dp, p);
}

static int parse_bb(nds_z3_chain *c, const char *name, const char *id, const json_object *cfg,
                    const char *dp) {
    if (c->n_bb == NDS_Z3_MAX_BB)
        return nds_err(NDS_ELIMIT, "%s: more than %d bytes-to-bytes codecs", dp, NDS_Z3_MAX_BB);
    const nds_codec *codec = nds_codec_find(id);
    if (!codec) return nds_err(NDS_EUNSUPPORTED, "%s: codec \"%s\" is not available", dp, id);
    bb_parse p = {json_object_new_object(), json_object_new_object(), c->elem};
    if (!p.nc || !p.v3) {
        json_object_put(p.nc);
        json_object_put(p.v3);
        return nds_err(NDS_ENOMEM, "%s: out of memory", dp);
    }
    json_object_object_add(p.nc, "id", json_object_new_string(id));
    int rc = bb_fill(name, id, cfg, c->elem, dp, &p);
    bb_codec *b = &c->bb[c->n_bb];
    if (!rc) rc = codec->create(&b->state, p.nc, p.elem_size);
    json_object_put(p.nc);
    if (rc) {
        json_object_put(p.v3);
        return prefix_once(rc, dp);
    }
    b->codec = codec;
    b->crc = name_is(id, "crc32c") || name_is(id, "crc32") || name_is(id, "adler32") ||
             name_is(id, "fletcher32");
    b->v3 = new_codec_json(name, p.v3);
    c->n_bb++;
    return b->v3 ? 0 : nds_err(NDS_ENOMEM, "%s: out of memory", dp);
}

/* ---- array codecs (numcodecs' array filters, bitround) --------------------------------------- */

/* The numcodecs id of a v3 array-to-array codec name ndstore implements, or NULL. */
static const char *aa_id(const char *name) {
    static const char *const ids[] = {"delta",    "fixedscaleoffset", "quantize",
                                      "bitround", "astype",           "packbits"};
    if (name_is(name, "bitround")) return "bitround";
    if (strncmp(name, "numcodecs.", 10) != 0) return NULL;
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        if (name_is(name + 10, ids[i])) return ids[i];
    return NULL;
}

/* Collects one array codec; the chain is built when the array-to-bytes codec comes (aa_build). */
static int aa_add(nds_z3_chain *c, const char *name, const char *id, const json_object *cfg,
                  const char *dp) {
    if (c->transpose)
        return nds_err(NDS_EUNSUPPORTED, "%s: \"%s\" together with transpose is not supported", dp,
                       name);
    json_object *nc = json_object_new_object(), *v3 = json_object_new_object();
    if (!c->aa_nc) c->aa_nc = json_object_new_array();
    if (!c->aa_v3) c->aa_v3 = json_object_new_array();
    if (!nc || !v3 || !c->aa_nc || !c->aa_v3) {
        json_object_put(nc);
        json_object_put(v3);
        return nds_err(NDS_ENOMEM, "%s: out of memory", dp);
    }
    json_object_object_add(nc, "id", json_object_new_string(id));
    json_object_object_add(v3, "name", json_object_new_string(name));
    if (cfg) {
        json_object_object_foreach((json_object *)cfg, key, val) {
            if (!name_is(key, "id")) json_object_object_add(nc, key, json_object_get(val));
        }
        json_object_object_add(v3, "configuration", json_object_get((json_object *)cfg));
    }
    json_object_array_add(c->aa_nc, nc);
    json_object_array_add(c->aa_v3, v3);
    return 0;
}

/* Builds the array codecs collected so far for arr (host byte order): what follows sees their
 * output type and size. */
static int aa_build(nds_z3_chain *c, const char *dp, bool sharding) {
    if (!c->aa_nc) return 0;
    nds_np_dtype t;
    json_object *list = c->aa_nc;
    c->aa_nc = NULL;
    int rc = 0;
    if (sharding)
        rc = nds_err(NDS_EUNSUPPORTED,
                     "%s: sharding_indexed after an array-to-array codec is not supported", dp);
    else if (!nds_np_dtype_of(c->arr.dtype, nds_host_is_big_endian(), &t))
        rc = nds_err(NDS_EUNSUPPORTED, "%s: array-to-array codecs on %s arrays are not supported",
                     dp, nds_dtype_name(c->arr.dtype));
    if (!rc) rc = nds_filter_chain_parse(list, t, c->nbytes, true, dp, "codecs", &c->aa);
    json_object_put(list);
    if (rc) return rc;
    nds_np_dtype e = nds_filter_chain_encoded_dtype(c->aa);
    c->tarr.dtype = nds_np_dtype_to_nds(e);
    c->elem = e.size;
    c->nbytes = nds_filter_chain_encoded_size(c->aa);
    c->tarr.rank = 1; /* what the bytes codec sees is a flat run of elements */
    c->tarr.shape[0] = c->nbytes / c->elem;
    return 0;
}

/* ---- parsing the list ------------------------------------------------------------------------ */

/* One entry: a bare name, or {"name", "configuration"?, "must_understand"?}. */
static int entry_parse(const json_object *e, const char *doc, const char *path, const char **name,
                       const json_object **config) {
    *config = NULL;
    if (json_object_is_type(e, json_type_string)) {
        *name = json_object_get_string((json_object *)e);
        return 0;
    }
    if (!json_object_is_type(e, json_type_object))
        return nds_err(NDS_EFORMAT, "%s: %s must be a codec object or a codec name", doc, path);
    json_object_object_foreach((json_object *)e, key, val) {
        if (name_is(key, "name") && json_object_is_type(val, json_type_string))
            *name = json_object_get_string(val);
        else if (name_is(key, "configuration") && json_object_is_type(val, json_type_object))
            *config = val;
        else if (name_is(key, "name") || name_is(key, "configuration"))
            return nds_err(NDS_EFORMAT, "%s: %s: \"%s\" must be %s", doc, path, key,
                           key[0] == 'n' ? "a string" : "an object");
        else if (!name_is(key, "must_understand") || !json_object_is_type(val, json_type_boolean))
            return nds_err(NDS_EFORMAT, "%s: %s: member \"%.40s\" is not valid here", doc, path,
                           key);
    }
    if (!*name) return nds_err(NDS_EFORMAT, "%s: %s: missing member \"name\"", doc, path);
    return 0;
}

/* Parse state: which kind of codec may come next. */
enum { STAGE_AA = 0, STAGE_BB = 1 };

/* What a sharding codec's nested chains are parsed, freed, printed, sized, decoded and encoded
 * with (zarr3_shard.c sits below this file and calls none of it directly). */
static const nds_z3_chain_ops chain_ops = {
    .parse = nds_z3_chain_parse,
    .free = nds_z3_chain_free,
    .to_json = nds_z3_chain_to_json,
    .fixed_size = nds_z3_chain_fixed_size,
    .decode = nds_z3_chain_decode,
    .encode = nds_z3_chain_encode,
};

static int entry_apply(nds_z3_chain *c, const char *name, const json_object *cfg, int *stage,
                       const char *doc, const char *path, int depth) {
    char dp[PATH_MAX_LEN + 640];
    NDS_Z3_PRINT(dp, "%s: %s", doc, path);
    const char *id = bb_registry_id(name), *aid = aa_id(name);
    if (aid) {
        if (*stage != STAGE_AA)
            return nds_err(NDS_EFORMAT, "%s: \"%s\" must come before the array-to-bytes codec", dp,
                           name);
        return aa_add(c, name, aid, cfg, dp);
    }
    if (name_is(name, "transpose")) {
        if (c->aa_nc)
            return nds_err(NDS_EUNSUPPORTED,
                           "%s: transpose together with array-to-array codecs "
                           "other than transpose is not supported",
                           dp);
        if (*stage != STAGE_AA)
            return nds_err(NDS_EFORMAT, "%s: transpose must come before the array-to-bytes codec",
                           dp);
        size_t p[NDS_MAX_RANK];
        int rc = parse_order(cfg, c->arr.rank, dp, p);
        if (!rc) compose(c, p);
        return rc;
    }
    if (vlen_kind(name)) {
        if (*stage != STAGE_AA)
            return nds_err(NDS_EFORMAT, "%s: a second array-to-bytes codec (\"%s\")", dp, name);
        *stage = STAGE_BB;
        return parse_vlen(c, name, cfg, dp);
    }
    if (nds_dtype_is_vlen(c->arr.dtype) && (*stage == STAGE_AA || !id))
        return nds_err(NDS_EUNSUPPORTED, "%s: data_type \"%s\" needs the \"%s\" codec first "
                                         "(\"%s\" is not supported for it)", dp,
                       nds_dtype_name(c->arr.dtype),
                       c->arr.dtype == NDS_STRING ? "vlen-utf8" : "vlen-bytes", name);
    if (name_is(name, "bytes") || name_is(name, "sharding_indexed") || name_is(name, "packbits")) {
        if (*stage != STAGE_AA)
            return nds_err(NDS_EFORMAT, "%s: a second array-to-bytes codec (\"%s\")", dp, name);
        *stage = STAGE_BB;
        int rc = aa_build(c, dp, name_is(name, "sharding_indexed"));
        if (rc) return rc;
        if (name_is(name, "bytes")) return parse_bytes(c, cfg, dp, false);
        if (name_is(name, "packbits")) return parse_packbits(c, cfg, dp);
        c->ab = AB_SHARDING;
        char sub[PATH_MAX_LEN];
        NDS_Z3_PRINT(sub, "%s.configuration", path);
        return nds_z3_shard_parse(cfg, &c->tarr, doc, sub, depth, &chain_ops, &c->shard);
    }
    if (id) {
        if (*stage == STAGE_AA) { /* no array-to-bytes codec yet: the implicit bytes codec */
            int rc = aa_build(c, dp, false);
            if (!rc) rc = parse_bytes(c, NULL, dp, true);
            if (rc) return rc;
            *stage = STAGE_BB;
        }
        return parse_bb(c, name, id, cfg, dp);
    }
    return nds_err(NDS_EUNSUPPORTED, "%s: codec \"%.60s\" is not supported", dp, name);
}

static void compute_bounds(nds_z3_chain *c) {
    if (c->ab == AB_VLEN) {
        c->bound[0] = NDS_Z3_MAX_CHUNK_BYTES; /* element lists: only bounded */
    } else if (c->ab == AB_BYTES) {
        c->bound[0] = c->nbytes;
    } else if (c->ab == AB_PACKBITS) {
        c->bound[0] = packed_size(c);
    } else {
        const nds_z3_shard *s = c->shard;
        uint64_t inner = s->inner->bound[s->inner->n_bb];
        c->bound[0] = sat_add(s->index_nbytes, sat_mul(s->count, inner));
    }
    for (size_t k = 0; k < c->n_bb; k++) c->bound[k + 1] = bb_bound(&c->bb[k], c->bound[k]);
}

static int chain_init(nds_z3_chain *c, const nds_z3_array *arr, const char *doc,
                      const char *where) {
    uint64_t n;
    c->arr = *arr;
    c->tarr = *arr;
    /* variable-length elements: counted as 1 byte (blosc's typesize, the chunk-size limit) */
    c->elem = nds_dtype_is_vlen(arr->dtype) ? 1 : nds_z3_elem_size(arr);
    for (size_t i = 0; i < arr->rank; i++) c->perm[i] = i;
    if (c->elem == 0) return nds_err(NDS_EFORMAT, "%s: %s: invalid data type", doc, where);
    if (!nds_product_u64(arr->shape, arr->rank, &n) || !nds_mul_u64(n, c->elem, &n) ||
        n > NDS_Z3_MAX_CHUNK_BYTES)
        return nds_err(NDS_ELIMIT, "%s: %s: chunks of more than 2 GiB are not supported", doc,
                       where);
    c->nbytes = (size_t)n;
    return 0;
}

int nds_z3_chain_parse(const json_object *codecs, const nds_z3_array *arr, const char *doc,
                       const char *where, int depth, nds_z3_chain **out) {
    *out = NULL;
    if (!json_object_is_type(codecs, json_type_array))
        return nds_err(NDS_EFORMAT, "%s: \"%s\" must be an array of codecs", doc, where);
    nds_z3_chain *c = calloc(1, sizeof *c);
    if (!c) return nds_err(NDS_ENOMEM, "%s: out of memory", doc);
    int rc = chain_init(c, arr, doc, where), stage = STAGE_AA;
    size_t n = json_object_array_length(codecs);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        char path[PATH_MAX_LEN];
        const char *name = NULL;
        const json_object *cfg;
        NDS_Z3_PRINT(path, "%s[%zu]", where, i);
        rc = entry_parse(json_object_array_get_idx(codecs, i), doc, path, &name, &cfg);
        if (!rc) rc = entry_apply(c, name, cfg, &stage, doc, path, depth);
    }
    if (rc == 0 && stage == STAGE_AA && nds_dtype_is_vlen(arr->dtype))
        rc = nds_err(NDS_EUNSUPPORTED, "%s: %s: data_type \"%s\" needs the \"%s\" codec", doc,
                     where, nds_dtype_name(arr->dtype),
                     arr->dtype == NDS_STRING ? "vlen-utf8" : "vlen-bytes");
    if (rc == 0 && stage == STAGE_AA) { /* no array-to-bytes codec: the implicit bytes codec */
        char dp[PATH_MAX_LEN + 640];
        NDS_Z3_PRINT(dp, "%s: %s", doc, where);
        rc = aa_build(c, dp, false);
        if (!rc) rc = parse_bytes(c, NULL, dp, true);
    }
    if (rc) {
        nds_z3_chain_free(c);
        return rc;
    }
    compute_bounds(c);
    *out = c;
    return 0;
}

void nds_z3_chain_free(nds_z3_chain *c) {
    if (!c) return;
    for (size_t k = 0; k < c->n_bb; k++) {
        c->bb[k].codec->destroy(c->bb[k].state);
        json_object_put(c->bb[k].v3);
    }
    nds_z3_shard_free(c->shard);
    nds_filter_chain_free(c->aa);
    json_object_put(c->aa_nc);
    json_object_put(c->aa_v3);
    free(c);
}

const nds_z3_array *nds_z3_chain_array(const nds_z3_chain *c) { return &c->arr; }

const nds_z3_shard *nds_z3_chain_shard(const nds_z3_chain *c) {
    return c->ab == AB_SHARDING && !c->transpose && !c->aa && c->n_bb == 0 ? c->shard : NULL;
}

int nds_z3_chain_is_identity(const nds_z3_chain *c) {
    return c->ab == AB_BYTES && !c->transpose && !c->aa && !c->swap && c->n_bb == 0 &&
           !nds_dtype_is_subbyte(c->arr.dtype); /* stored bytes need normalising */
}

int nds_z3_chain_fixed_size(const nds_z3_chain *c, uint64_t *size) {
    if (c->ab != AB_BYTES && c->ab != AB_PACKBITS) return 0;
    uint64_t n = c->ab == AB_PACKBITS ? packed_size(c) : c->nbytes;
    for (size_t k = 0; k < c->n_bb; k++) {
        if (!c->bb[k].crc) return 0;
        n += 4;
    }
    *size = n;
    return 1;
}

/* ---- decode ---------------------------------------------------------------------------------- */

/* Decodes one bytes-to-bytes stage whose output size is only bounded: into a buffer that starts
 * small and grows (x4, up to the bound) while the codec fails. Codecs report a buffer too small
 * and corrupt input alike (NDS_ECORRUPT), so corrupt input grows the buffer to the bound before
 * its error comes out (docs/internals/status.md). */
static int decode_grow(const bb_codec *b, const uint8_t *in, size_t len, uint64_t bound,
                       uint8_t **buf, size_t *out_len) {
    bound = nds_min_u64(bound, 2 * NDS_Z3_MAX_CHUNK_BYTES);
    uint64_t cap = b->crc ? (len >= 4 ? len - 4 : 0)
                          : nds_min_u64(bound, nds_max_u64(GROW_START, (uint64_t)len * 4));
    for (;;) {
        uint8_t *p = realloc(*buf, cap ? (size_t)cap : 1);
        if (!p) return nds_err(NDS_ENOMEM, "%s: out of memory for %llu bytes", b->codec->name,
                               (unsigned long long)cap);
        *buf = p;
        int rc = nds_codec_decode(b->codec, b->state, in, len, p, (size_t)cap, out_len);
        if (rc != NDS_ECORRUPT || b->crc || cap >= bound) return rc;
        cap = nds_min_u64(bound, cap * 4);
    }
}

/* Decodes the first stage (closest to the array) straight into the array-to-bytes input. */
static int decode_exact(const nds_z3_chain *c, const uint8_t *in, size_t len, uint8_t *out) {
    const bb_codec *b = &c->bb[0];
    size_t got = 0;
    int rc = nds_codec_decode(b->codec, b->state, in, len, out, c->nbytes, &got);
    if (rc == 0 && got != c->nbytes)
        rc = nds_err(NDS_ECORRUPT, "%s: expected %zu bytes after decoding, found %zu",
                     b->codec->name, c->nbytes, got);
    return rc;
}

/* The array-to-bytes decode of cur[0..len) into dst (the transposed array). */
static int decode_ab(const nds_z3_chain *c, const uint8_t *cur, size_t len, bool in_place,
                     uint8_t *dst) {
    if (c->ab == AB_SHARDING) return nds_z3_shard_decode(c->shard, cur, len, dst);
    if (c->ab == AB_PACKBITS)
        return nds_packbits3_decode(&c->pb, cur, len, c->nbytes / c->elem, dst);
    if (!in_place) {
        if (len != c->nbytes)
            return nds_err(NDS_ECORRUPT, "bytes: expected %zu bytes, found %zu", c->nbytes, len);
        memcpy(dst, cur, len);
    }
    if (c->swap) {
        size_t unit = nds_dtype_swap_unit(c->tarr.dtype);
        nds_byteswap(dst, c->nbytes / unit, unit);
    }
    nds_dtype_normalize(c->arr.dtype, dst, c->nbytes); /* sub-byte types: bits bytes leaves open */
    return 0;
}

/* A string / bytes chain has no dense form (its lists are the core's): refused if asked. */
static int no_dense_form(void) {
    return nds_err(NDS_EINTERNAL, "zarr3: a vlen-utf8 / vlen-bytes chunk has no dense form");
}

int nds_z3_chain_decode(const nds_z3_chain *c, const uint8_t *in, size_t len, uint8_t *out) {
    if (c->ab == AB_VLEN) return no_dense_form();
    uint8_t *tbuf = NULL, *bufs[2] = {NULL, NULL};
    if ((c->transpose || c->aa) && !(tbuf = malloc(c->nbytes ? c->nbytes : 1)))
        return nds_err(NDS_ENOMEM, "zarr3: out of memory for a %zu-byte chunk", c->nbytes);
    uint8_t *ab_out = tbuf ? tbuf : out;
    const uint8_t *cur = in;
    size_t curlen = len;
    bool in_place = false;
    int rc = 0;
    for (size_t k = c->n_bb; rc == 0 && k-- > 0;) {
        if (k == 0 && c->ab == AB_BYTES) {
            rc = decode_exact(c, cur, curlen, ab_out);
            in_place = true;
        } else {
            rc = decode_grow(&c->bb[k], cur, curlen, c->bound[k], &bufs[k & 1], &curlen);
            cur = bufs[k & 1];
        }
    }
    if (rc == 0) rc = decode_ab(c, cur, curlen, in_place, ab_out);
    if (rc == 0 && c->aa)
        rc = nds_filter_chain_decode(c->aa, tbuf, c->nbytes, out);
    else if (rc == 0 && tbuf)
        transpose_copy(c, tbuf, out, false);
    free(tbuf);
    free(bufs[0]);
    free(bufs[1]);
    return rc;
}

/* Whether decoded bytes [begin, end) are bytes [begin, end) of the chunk: one bytes-to-bytes
 * codec straight over the bytes of the canonical order, with no checksum to verify over all. */
static bool part_is_chunk_part(const nds_z3_chain *c) {
    return c->ab == AB_BYTES && !c->transpose && !c->aa && c->n_bb == 1 && !c->bb[0].crc &&
           !nds_dtype_is_subbyte(c->arr.dtype); /* whole decodes normalise them (decode_ab) */
}

int nds_z3_chain_decodes_parts(const nds_z3_chain *c) { return part_is_chunk_part(c); }

unsigned nds_z3_chain_decode_caps(const nds_z3_chain *c) {
    return part_is_chunk_part(c) ? c->bb[0].codec->decode_caps : 0;
}

int nds_z3_chain_decode_request(const nds_z3_chain *c, nds_decode_request *rq) {
    const bb_codec *b = &c->bb[0];
    rq->align = c->elem;
    return nds_codec_decode_chunk(b->codec, b->state, rq, c->nbytes,
                                  c->swap ? nds_dtype_swap_unit(c->tarr.dtype) : 0);
}

/* ---- encode ---------------------------------------------------------------------------------- */

/* The array as the array-to-bytes codec stores it: transposed and in the stored byte order. A
 * copy only when either applies (*own is then the caller's to free). */
static int stored_layout(const nds_z3_chain *c, const uint8_t *chunk, uint8_t **own,
                         const uint8_t **data) {
    *own = NULL;
    *data = chunk;
    if (!c->transpose && !c->swap) return 0;
    if (!(*own = malloc(c->nbytes ? c->nbytes : 1)))
        return nds_err(NDS_ENOMEM, "zarr3: out of memory for a %zu-byte chunk", c->nbytes);
    if (c->transpose)
        transpose_copy(c, chunk, *own, true);
    else
        memcpy(*own, chunk, c->nbytes);
    if (c->swap) {
        size_t unit = nds_dtype_swap_unit(c->tarr.dtype);
        nds_byteswap(*own, c->nbytes / unit, unit);
    }
    *data = *own;
    return 0;
}

int nds_z3_chain_update(const nds_z3_chain *c, nds_update_request *u) {
    /* The shard's coordinates are the chunk's only when nothing transposes before sharding, and
     * its stored bytes are the chunk's only when no bytes-to-bytes codec follows. */
    if (c->ab != AB_SHARDING || c->transpose || c->aa || c->n_bb != 0) return NDS_EUNSUPPORTED;
    return nds_z3_shard_update(c->shard, u);
}

int nds_z3_chain_decode_vlen(const nds_z3_chain *c, const uint8_t *in, size_t len,
                             nds_buf *out) {
    uint8_t *bufs[2] = {NULL, NULL};
    const uint8_t *cur = in;
    size_t curlen = len;
    int rc = c->ab == AB_VLEN ? 0 : nds_err(NDS_EINTERNAL, "zarr3: not a vlen codec chain");
    for (size_t k = c->n_bb; rc == 0 && k-- > 0;) {
        rc = decode_grow(&c->bb[k], cur, curlen, c->bound[k], &bufs[k & 1], &curlen);
        cur = bufs[k & 1];
    }
    out->len = 0;
    if (rc == 0 && nds_buf_append(out, cur, curlen))
        rc = nds_err(NDS_ENOMEM, "zarr3: out of memory for a %zu-byte chunk", curlen);
    free(bufs[0]);
    free(bufs[1]);
    return rc;
}

int nds_z3_chain_encode_vlen(const nds_z3_chain *c, const uint8_t *list, size_t len,
                             nds_buf *out) {
    nds_buf t[2] = {{0}, {0}};
    const uint8_t *cur = list;
    size_t curlen = len;
    int rc = 0;
    out->len = 0;
    if (c->n_bb == 0 && nds_buf_append(out, list, len))
        rc = nds_err(NDS_ENOMEM, "zarr3: out of memory encoding a chunk");
    for (size_t k = 0; rc == 0 && k < c->n_bb; k++) {
        nds_buf *dst = k + 1 == c->n_bb ? out : &t[k & 1];
        dst->len = 0;
        rc = c->bb[k].codec->encode(c->bb[k].state, cur, curlen, dst);
        cur = dst->data;
        curlen = dst->len;
    }
    nds_buf_dispose(&t[0]);
    nds_buf_dispose(&t[1]);
    return rc;
}

int nds_z3_chain_encode(const nds_z3_chain *c, const uint8_t *chunk, nds_buf *out) {
    if (c->ab == AB_VLEN) return no_dense_form();
    uint8_t *own;
    const uint8_t *data;
    nds_buf t[2] = {{0}, {0}}, a = {0};
    if (c->aa) { /* the array codecs first: what follows encodes their output */
        int rc = nds_filter_chain_encode(c->aa, chunk, &a);
        if (rc) {
            nds_buf_dispose(&a);
            return rc;
        }
        chunk = a.data;
    }
    int rc = stored_layout(c, chunk, &own, &data);
    const uint8_t *cur = data;
    size_t curlen = c->nbytes;
    if (rc == 0 && c->ab == AB_SHARDING) {
        nds_buf *dst = c->n_bb ? &t[1] : out;
        rc = nds_z3_shard_encode(c->shard, data, dst);
        cur = dst->data;
        curlen = dst->len;
    } else if (rc == 0 && c->ab == AB_PACKBITS) {
        nds_buf *dst = c->n_bb ? &t[1] : out;
        size_t packed = (size_t)packed_size(c);
        rc = nds_buf_reserve(dst, packed ? packed : 1);
        if (rc == 0) nds_packbits3_encode(&c->pb, data, c->nbytes / c->elem, dst->data);
        dst->len = packed;
        cur = dst->data;
        curlen = packed;
    } else if (rc == 0 && c->n_bb == 0) {
        rc = nds_buf_reserve(out, c->nbytes ? c->nbytes : 1);
        if (rc == 0 && c->nbytes) memcpy(out->data, data, c->nbytes);
        out->len = c->nbytes;
    }
    for (size_t k = 0; rc == 0 && k < c->n_bb; k++) {
        nds_buf *dst = k + 1 == c->n_bb ? out : &t[k & 1];
        dst->len = 0;
        rc = c->bb[k].codec->encode(c->bb[k].state, cur, curlen, dst);
        cur = dst->data;
        curlen = dst->len;
    }
    free(own);
    nds_buf_dispose(&t[0]);
    nds_buf_dispose(&t[1]);
    nds_buf_dispose(&a);
    return rc == NDS_ENOMEM ? nds_err(NDS_ENOMEM, "zarr3: out of memory encoding a chunk") : rc;
}

/* ---- JSON and description -------------------------------------------------------------------- */

static json_object *transpose_json(const nds_z3_chain *c) {
    json_object *order = json_object_new_array(), *cfg = json_object_new_object();
    for (size_t i = 0; order && i < c->arr.rank; i++)
        json_object_array_add(order, json_object_new_int64((int64_t)c->perm[i]));
    if (cfg) json_object_object_add(cfg, "order", order);
    else json_object_put(order);
    return new_codec_json("transpose", cfg);
}

static int ab_json(const nds_z3_chain *c, json_object **out) {
    json_object *cfg = NULL;
    if (c->ab == AB_VLEN) { /* as zarr-python 3 writes it: an empty configuration */
        *out = new_codec_json(c->arr.dtype == NDS_STRING ? "vlen-utf8" : "vlen-bytes",
                              json_object_new_object());
    } else if (c->ab == AB_PACKBITS) {
        *out = new_codec_json("packbits", nds_packbits3_config_json(&c->pb));
    } else if (c->ab == AB_SHARDING) {
        int rc = nds_z3_shard_config_json(c->shard, &cfg);
        if (rc) return rc;
        *out = new_codec_json("sharding_indexed", cfg);
    } else {
        cfg = json_object_new_object();
        if (cfg)
            json_object_object_add(cfg, "endian",
                                   json_object_new_string(c->big_endian ? "big" : "little"));
        *out = new_codec_json("bytes", cfg);
    }
    return *out ? 0 : nds_err(NDS_ENOMEM, "zarr3: out of memory");
}

int nds_z3_chain_to_json(const nds_z3_chain *c, json_object **out) {
    json_object *list = json_object_new_array(), *ab = NULL;
    if (!list) return nds_err(NDS_ENOMEM, "zarr3: out of memory");
    if (c->transpose) json_object_array_add(list, transpose_json(c));
    for (size_t k = 0; c->aa_v3 && k < json_object_array_length(c->aa_v3); k++)
        json_object_array_add(list, json_object_get(json_object_array_get_idx(c->aa_v3, k)));
    int rc = ab_json(c, &ab);
    if (rc) {
        json_object_put(list);
        return rc;
    }
    json_object_array_add(list, ab);
    for (size_t k = 0; k < c->n_bb; k++) json_object_array_add(list, json_object_get(c->bb[k].v3));
    *out = list;
    return 0;
}

/* Appends printf output to buf[*used..cap), keeping it NUL-terminated and never overflowing. */
static void put(char *buf, size_t cap, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t cap, size_t *used, const char *fmt, ...) {
    if (*used >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *used, cap - *used, fmt, ap);
    va_end(ap);
    *used = n < 0 ? cap : nds_min_u64(cap, *used + (size_t)n);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void describe_list(const json_object *list, char *buf, size_t cap, size_t *used);

/* "name(key=value, ...)" with keys sorted and nested codec lists described too. */
static void describe_codec(const json_object *codec, char *buf, size_t cap, size_t *used) {
    json_object *name = NULL, *cfg = NULL;
    json_object_object_get_ex(codec, "name", &name);
    json_object_object_get_ex(codec, "configuration", &cfg);
    put(buf, cap, used, "%s", json_object_get_string(name));
    if (!cfg || json_object_object_length(cfg) == 0) return;
    const char *keys[16];
    size_t n = 0;
    json_object_object_foreach(cfg, key, val) {
        (void)val;
        if (n < 16) keys[n++] = key;
    }
    qsort(keys, n, sizeof keys[0], cmp_str);
    put(buf, cap, used, "(");
    for (size_t i = 0; i < n; i++) {
        json_object *v = json_object_object_get(cfg, keys[i]);
        put(buf, cap, used, "%s%s=", i ? ", " : "", keys[i]);
        if (name_is(keys[i], "codecs") || name_is(keys[i], "index_codecs")) {
            put(buf, cap, used, "[");
            describe_list(v, buf, cap, used);
            put(buf, cap, used, "]");
        } else if (json_object_is_type(v, json_type_string)) {
            put(buf, cap, used, "%s", json_object_get_string(v));
        } else {
            put(buf, cap, used, "%s", json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN));
        }
    }
    put(buf, cap, used, ")");
}

static void describe_list(const json_object *list, char *buf, size_t cap, size_t *used) {
    for (size_t i = 0; i < json_object_array_length(list); i++) {
        if (i) put(buf, cap, used, " | ");
        describe_codec(json_object_array_get_idx(list, i), buf, cap, used);
    }
}

void nds_z3_chain_describe(const nds_z3_chain *c, char *buf, size_t cap) {
    json_object *list = NULL;
    size_t used = 0;
    if (cap == 0) return;
    buf[0] = '\0';
    if (nds_z3_chain_to_json(c, &list) != 0) return;
    describe_list(list, buf, cap, &used);
    json_object_put(list);
}

/* ---- numcodecs configs to zarr v3 ------------------------------------------------------------ */

static const char *shuffle_name(int64_t code, size_t elem) {
    if (code < 0) code = elem == 1 ? 2 : 1; /* numcodecs' AUTOSHUFFLE */
    return code == 0 ? "noshuffle" : code == 1 ? "shuffle" : "bitshuffle";
}

/* Maps a full numcodecs config (defaults filled in) to the v3 configuration of name. */
static json_object *v3_config_of(const char *id, json_object *full, size_t elem) {
    json_object *cfg = json_object_new_object(), *v;
    if (!cfg) return NULL;
    json_object_object_foreach(full, key, val) {
        if (name_is(key, "id")) continue;
        if (name_is(id, "blosc") && name_is(key, "shuffle"))
            json_object_object_add(cfg, key, json_object_new_string(
                                                 shuffle_name(json_object_get_int64(val), elem)));
        else if (name_is(id, "gzip") && name_is(key, "level") && json_object_get_int(val) < 0)
            json_object_object_add(cfg, key, json_object_new_int(6)); /* zlib's default level */
        else
            json_object_object_add(cfg, key, json_object_get(val));
    }
    if (name_is(id, "blosc"))
        json_object_object_add(cfg, "typesize", json_object_new_int64((int64_t)elem));
    if (name_is(id, "zstd") && !json_object_object_get_ex(cfg, "checksum", &v))
        json_object_object_add(cfg, "checksum", json_object_new_boolean(0));
    return cfg;
}

int nds_z3_codec_from_numcodecs(const json_object *config, size_t elem_size, const char *doc,
                                json_object **out) {
    *out = NULL;
    const char *id = NULL;
    int rc = nds_json_get_string(config, "id", false, doc, &id);
    if (rc) return rc;
    const nds_codec *codec = nds_codec_find(id);
    if (!codec) return nds_err(NDS_EUNSUPPORTED, "%s: codec \"%.40s\" is not supported", doc, id);
    void *state = NULL;
    json_object *full = NULL;
    rc = codec->create(&state, config, elem_size);
    if (!rc) rc = codec->config_json(state, &full);
    codec->destroy(state);
    if (rc) return prefix_once(rc, doc);
    bool core = name_is(id, "gzip") || name_is(id, "zstd") || name_is(id, "blosc") ||
                name_is(id, "crc32c");
    char name[64];
    snprintf(name, sizeof name, "%s%s", core ? "" : "numcodecs.", id);
    json_object *cfg = name_is(id, "crc32c") ? NULL : v3_config_of(id, full, elem_size);
    json_object_put(full);
    *out = new_codec_json(name, cfg);
    return *out ? 0 : nds_err(NDS_ENOMEM, "%s: out of memory", doc);
}
