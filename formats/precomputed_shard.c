/* neuroglancer_uint64_sharded_v1 for precomputed volumes (see precomputed_shard.h,
 * docs/formats.md).
 *
 * A shard file is: the shard index (2^minishard_bits entries of [start, end) uint64le, relative to
 * the index's end), then minishard indexes and chunk data in any order. A minishard index is a [3,
 * n] uint64le array: chunk ids (delta-coded), data offsets (the first relative to the shard index's
 * end, each next one relative to the end of the previous chunk) and sizes; raw or gzip. Chunk data
 * is raw or gzip. The chunk id of a volume chunk is the compressed Morton code of its grid cell;
 * the hashed id (identity or MurmurHash3_x86_128 of the id shifted right by preshift_bits) gives
 * the minishard (low minishard_bits) and the shard (next shard_bits). Writers lay a shard out as
 * the index, then per minishard its chunks in id order followed by its index; an update of some
 * chunks rebuilds that layout with the other chunks' stored bytes copied as they are.
 *
 * Omits: the obsolete <shard>.index / <shard>.data pair (only <shard>.shard files). Threading:
 * reentrant. Ownership: results are malloc'd or written into caller buffers.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "precomputed_shard.h"
#include "ndstore/sys/codec.h"
#include "internal/error.h"
#include "internal/format_util.h"
#include "internal/json_util.h"
#include "internal/util.h"

/* Attempts of a single-chunk read when the shard file changes between its range reads. */
#define READ_ATTEMPTS 8
/* Largest shard index a write will build (minishard_bits <= 24). */
#define MAX_WRITE_INDEX (UINT64_C(256) << 20)
/* gzip level of what ndstore writes (zlib's default). */
#define GZIP_LEVEL "6"
/* Most bytes DEFLATE can expand one byte of input to (a 258-byte match in 2 bits). */
#define DEFLATE_MAX_RATIO 1032

/* ---- MurmurHash3_x86_128 (public domain algorithm by Austin Appleby) ---------------------------
 */

static uint32_t rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

static uint32_t fmix32(uint32_t h) {
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    return h ^ (h >> 16);
}

/* Mixes the four 32-bit lanes k into h: a whole 16-byte block (full), or the zero-padded tail,
 * whose lanes are mixed into h without the block's rotate-add step (a lane of zeros mixes in
 * nothing, as in the reference's fall-through switch). */
static void mix_lanes(uint32_t h[4], uint32_t k[4], int full) {
    static const uint32_t mul1[4] = {0x239b961bu, 0xab0e9789u, 0x38b34ae5u, 0xa1e38b93u};
    static const int rot[4] = {15, 16, 17, 18}, hrot[4] = {19, 17, 15, 13};
    static const uint32_t add[4] = {0x561ccd1bu, 0x0bcaa747u, 0x96cd1c35u, 0x32ac3b17u};
    for (int i = 0; i < 4; i++) {
        k[i] *= mul1[i];
        k[i] = rotl32(k[i], rot[i]);
        k[i] *= mul1[(i + 1) & 3];
        h[i] ^= k[i];
        if (!full) continue;
        h[i] = rotl32(h[i], hrot[i]);
        h[i] += h[(i + 1) & 3];
        h[i] = h[i] * 5 + add[i];
    }
}

void nds_murmurhash3_x86_128(const void *data, size_t len, uint32_t seed, uint32_t out[4]) {
    const uint8_t *p = data;
    uint32_t h[4] = {seed, seed, seed, seed}, k[4];
    size_t nblocks = len / 16;
    for (size_t b = 0; b < nblocks; b++, p += 16) {
        for (int i = 0; i < 4; i++) k[i] = nds_load_le32(p + 4 * i);
        mix_lanes(h, k, 1);
    }
    uint8_t tail[16] = {0};
    size_t rest = len & 15;
    memcpy(tail, p, rest);
    for (int i = 0; i < 4; i++) k[i] = nds_load_le32(tail + 4 * i);
    mix_lanes(h, k, 0);
    for (int i = 0; i < 4; i++) h[i] ^= (uint32_t)len;
    h[0] += h[1] + h[2] + h[3];
    for (int i = 1; i < 4; i++) h[i] += h[0];
    for (int i = 0; i < 4; i++) h[i] = fmix32(h[i]);
    h[0] += h[1] + h[2] + h[3];
    for (int i = 1; i < 4; i++) h[i] += h[0];
    memcpy(out, h, sizeof h);
}

uint64_t nds_pc_murmur_u64(uint64_t key) {
    uint8_t b[8];
    nds_store_le64(b, key);
    uint32_t h[4];
    nds_murmurhash3_x86_128(b, 8, 0, h);
    return (uint64_t)h[0] | (uint64_t)h[1] << 32;
}

/* ---- chunk ids and shards -------------------------------------------------------------------- */

static uint64_t shr(uint64_t x, unsigned n) { return n >= 64 ? 0 : x >> n; }
static uint64_t low_mask(unsigned n) { return n >= 64 ? UINT64_MAX : (UINT64_C(1) << n) - 1; }

void nds_pc_grid_init(nds_pc_grid *g, const uint64_t size[3], const uint64_t chunk[3]) {
    g->total = 0;
    for (int d = 0; d < 3; d++) {
        g->grid[d] = nds_ceil_div(size[d], chunk[d]);
        g->bits[d] = g->grid[d] > 1 ? 64 - (unsigned)__builtin_clzll(g->grid[d] - 1) : 0;
        g->total += g->bits[d];
    }
}

uint64_t nds_pc_morton(const nds_pc_grid *g, const uint64_t cell[3]) {
    uint64_t id = 0;
    unsigned j = 0;
    for (unsigned i = 0; i < 64 && j < g->total; i++)
        for (int d = 0; d < 3; d++)
            if (i < g->bits[d]) id |= ((cell[d] >> i) & 1) << j++;
    return id;
}

void nds_pc_morton_cell(const nds_pc_grid *g, uint64_t id, uint64_t cell[3]) {
    unsigned j = 0;
    cell[0] = cell[1] = cell[2] = 0;
    for (unsigned i = 0; i < 64 && j < g->total; i++)
        for (int d = 0; d < 3; d++)
            if (i < g->bits[d]) cell[d] |= ((id >> j++) & 1) << i;
}

void nds_pc_shard_of(const nds_pc_sharding *s, uint64_t id, uint64_t *shard, uint64_t *minishard) {
    uint64_t h = shr(id, s->preshift_bits);
    if (s->murmur) h = nds_pc_murmur_u64(h);
    *minishard = h & low_mask(s->minishard_bits);
    *shard = shr(h, s->minishard_bits) & low_mask(s->shard_bits);
}

int nds_pc_shard_key(const char *scale_key, const nds_pc_sharding *s, uint64_t shard, char *buf,
                     size_t cap) {
    int n = snprintf(buf, cap, "%s/%0*llx.shard", scale_key, (int)((s->shard_bits + 3) / 4),
                     (unsigned long long)shard);
    if (n < 0 || (size_t)n >= cap)
        return nds_err(NDS_ERANGE, "neuroglancer_precomputed: shard key longer than %zu bytes",
                       cap);
    return 0;
}

bool nds_pc_shard_box(const nds_pc_sharding *s, const nds_pc_grid *g, unsigned n[3]) {
    unsigned low = s->preshift_bits + s->minishard_bits;
    if (s->shard_bits == 0)
        low = g->total; /* one shard file holds the whole grid, whatever the hash */
    else if (s->murmur || low + s->shard_bits < g->total)
        return false;
    unsigned k = low < g->total ? low : g->total, j = 0;
    n[0] = n[1] = n[2] = 0;
    for (unsigned i = 0; i < 64 && j < k; i++)
        for (int d = 0; d < 3 && j < k; d++)
            if (i < g->bits[d]) n[d]++, j++;
    return true;
}

/* ---- gzip ------------------------------------------------------------------------------------ */

/* The format's "gzip" encoding is plain gzip (RFC 1952): the registry's "gzip" codec, one instance
 * for the process, created on first use and published with a compare-and-swap (a thread that loses
 * the race frees its own). Codec instances are immutable, so every thread shares it; never freed.
 */
typedef struct gzip_codec {
    const nds_codec *codec;
    void *state;
} gzip_codec;

static _Atomic(gzip_codec *) gzip_shared;

static int gzip_get(const gzip_codec **out) {
    static const char config_text[] = "{\"id\": \"gzip\", \"level\": " GZIP_LEVEL "}";
    gzip_codec *g = atomic_load_explicit(&gzip_shared, memory_order_acquire), *none = NULL;
    json_object *config = NULL;
    if (g) {
        *out = g;
        return 0;
    }
    if (!(g = malloc(sizeof *g))) return nds_err(NDS_ENOMEM, "gzip: out of memory");
    int rc = nds_json_parse(config_text, sizeof config_text - 1, "gzip config", &config);
    if (!rc)
        rc = nds_format_codec_new(config, 1, "neuroglancer_precomputed", "the gzip encoding",
                                  &g->codec, &g->state);
    json_object_put(config);
    if (rc) {
        free(g);
        return rc;
    }
    if (!atomic_compare_exchange_strong(&gzip_shared, &none, g)) {
        g->codec->destroy(g->state);
        free(g);
        g = none;
    }
    *out = g;
    return 0;
}

int nds_pc_gzip(const uint8_t *in, size_t len, nds_buf *out) {
    const gzip_codec *g = NULL;
    nds_buf z = {0};
    int rc = gzip_get(&g);
    if (!rc) rc = g->codec->encode(g->state, in, len, &z);
    if (!rc && nds_buf_append(out, z.data, z.len)) rc = nds_err(NDS_ENOMEM, "gzip: out of memory");
    nds_buf_dispose(&z);
    return rc;
}

/* The output is sized up front by the trailer's ISIZE (the last member's size mod 2^32, RFC 1952
 * 2.3.1), which the codec checks against what it decodes. DEFLATE expands a byte to at most 1032,
 * so a trailer claiming more is refused before anything is allocated: a forged size never makes
 * us allocate more than the caller's limit nor more than the input could hold. What ISIZE does not
 * cover fails as too big for the buffer (NDS_ECORRUPT): data of 4 GiB or more (beyond any chunk or
 * minishard index), and streams whose members before the last hold data (writers of the format
 * write one member). */
int nds_pc_gunzip(const uint8_t *in, size_t len, size_t limit, nds_buf *out) {
    const gzip_codec *g = NULL;
    uint64_t isize = len >= 4 ? nds_load_le32(in + len - 4) : 0;
    size_t got = 0;
    out->len = 0;
    if (len < 2 || in[0] != 0x1f || in[1] != 0x8b)
        return nds_err(NDS_ECORRUPT, "gzip: not a gzip stream (no 1f 8b header)");
    if ((uint64_t)len < (isize + DEFLATE_MAX_RATIO - 1) / DEFLATE_MAX_RATIO)
        return nds_err(NDS_ECORRUPT,
                       "gzip: invalid stream: its trailer says %llu bytes, more than %zu bytes of "
                       "gzip can hold",
                       (unsigned long long)isize, len);
    if (isize > limit)
        return nds_err(NDS_ECORRUPT,
                       "gzip: data decompresses to more than %zu bytes (its trailer says %llu)",
                       limit, (unsigned long long)isize);
    int rc = gzip_get(&g);
    if (rc) return rc;
    if (nds_buf_reserve(out, isize ? (size_t)isize : 1))
        return nds_err(NDS_ENOMEM, "gzip: out of memory for %llu bytes", (unsigned long long)isize);
    rc = nds_codec_decode(g->codec, g->state, in, len, out->data, (size_t)isize, &got);
    if (!rc) out->len = got;
    return rc;
}

/* ---- minishard and shard indexes ------------------------------------------------------------- */

/* Undoes a raw/gzip encoding: *p / *len point at the plain bytes (in `tmp` when inflated). */
static int undo_encoding(bool gzip, const uint8_t **p, size_t *len, size_t limit, nds_buf *tmp) {
    if (!gzip) {
        if (*len > limit)
            return nds_err(NDS_ECORRUPT, "%zu bytes, more than the %zu expected", *len, limit);
        return 0;
    }
    int rc = nds_pc_gunzip(*p, *len, limit, tmp);
    *p = tmp->data;
    *len = tmp->len;
    return rc;
}

/* Fills refs from a decoded [3, n] index. */
static int read_refs(const uint8_t *p, size_t n, uint64_t index_end, uint64_t file_len,
                     nds_pc_chunk_ref *r) {
    uint64_t id = 0, pos = index_end;
    for (size_t i = 0; i < n; i++) {
        uint64_t did = nds_load_le64(p + 8 * i), doff = nds_load_le64(p + 8 * (n + i)),
                 size = nds_load_le64(p + 8 * (2 * n + i));
        if (i > 0 && did == 0)
            return nds_err(NDS_ECORRUPT, "minishard index lists chunk id %llu twice",
                           (unsigned long long)id);
        if (!nds_add_u64(id, did, &id) || !nds_add_u64(pos, doff, &r[i].start) ||
            !nds_add_u64(r[i].start, size, &r[i].end))
            return nds_err(NDS_ECORRUPT, "minishard index entry %zu overflows 64 bits", i);
        if (r[i].end > file_len)
            return nds_err(NDS_ECORRUPT,
                           "chunk %llu at bytes [%llu, %llu) runs past the end of the shard "
                           "(%llu bytes)",
                           (unsigned long long)id, (unsigned long long)r[i].start,
                           (unsigned long long)r[i].end, (unsigned long long)file_len);
        r[i].id = id;
        pos = r[i].end;
    }
    return 0;
}

int nds_pc_minishard_decode(const nds_pc_sharding *s, const uint8_t *data, size_t len,
                            uint64_t index_end, uint64_t file_len, uint64_t max_entries,
                            nds_pc_refs *out) {
    nds_buf tmp = {0};
    nds_pc_chunk_ref **refs = &out->v;
    *out = (nds_pc_refs){NULL, 0, 0};
    uint64_t limit = max_entries > SIZE_MAX / 24 ? SIZE_MAX : max_entries * 24;
    int rc = undo_encoding(s->index_gzip, &data, &len, (size_t)limit, &tmp);
    if (rc) rc = nds_err_prefix(rc, "minishard index");
    if (!rc && len % 24 != 0)
        rc = nds_err(NDS_ECORRUPT, "minishard index of %zu bytes is not a multiple of 24", len);
    size_t count = len / 24;
    if (!rc && count && !(*refs = malloc(count * sizeof **refs)))
        rc = nds_err(NDS_ENOMEM, "out of memory for a minishard index");
    if (!rc) rc = read_refs(data, count, index_end, file_len, *refs);
    nds_buf_dispose(&tmp);
    if (rc) {
        free(*refs);
        *refs = NULL;
        return rc;
    }
    out->n = out->cap = count;
    return 0;
}

/* A byte range of the shard file, for the overlap check. */
typedef struct range {
    uint64_t start, end;
} range;

static int cmp_range(const void *a, const void *b) {
    const range *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* No two non-empty ranges may overlap. */
static int check_overlaps(range *r, size_t n) {
    qsort(r, n, sizeof *r, cmp_range);
    uint64_t end = 0;
    size_t prev = 0;
    for (size_t i = 0; i < n; i++) {
        if (r[i].start == r[i].end) continue;
        if (r[i].start < end)
            return nds_err(NDS_ECORRUPT,
                           "byte ranges [%llu, %llu) and [%llu, %llu) of the shard overlap",
                           (unsigned long long)r[prev].start, (unsigned long long)r[prev].end,
                           (unsigned long long)r[i].start, (unsigned long long)r[i].end);
        end = r[i].end;
        prev = i;
    }
    return 0;
}

/* A whole shard file being parsed. */
typedef struct shard_file {
    const nds_pc_sharding *s;
    uint64_t shard;
    const uint8_t *data;
    size_t len;
    uint64_t max_entries;
} shard_file;

/* Appends the refs of minishard m (checked to belong there) to the growing list all. */
static int add_minishard(const shard_file *f, uint64_t m, const nds_pc_refs *list,
                         nds_pc_refs *all) {
    const nds_pc_sharding *s = f->s;
    const nds_pc_chunk_ref *got = list->v;
    uint64_t shard = f->shard;
    for (size_t i = 0; i < list->n; i++) {
        uint64_t sh, mi;
        nds_pc_shard_of(s, got[i].id, &sh, &mi);
        if (sh != shard || mi != m)
            return nds_err(NDS_ECORRUPT,
                           "chunk id %llu is listed in shard %llu minishard %llu but belongs to "
                           "shard %llu minishard %llu",
                           (unsigned long long)got[i].id, (unsigned long long)shard,
                           (unsigned long long)m, (unsigned long long)sh, (unsigned long long)mi);
        if (all->n == all->cap) {
            size_t nc = all->cap ? all->cap * 2 : 64;
            nds_pc_chunk_ref *r = realloc(all->v, nc * sizeof *r);
            if (!r) return nds_err(NDS_ENOMEM, "out of memory parsing a shard");
            all->v = r;
            all->cap = nc;
        }
        all->v[all->n++] = got[i];
    }
    return 0;
}

/* Shard index entry m of a whole shard file of len bytes (at least its shard index): the
 * minishard index's range [*a, *b) relative to the shard index's end, checked against the file. */
static int index_entry(const nds_pc_sharding *s, const uint8_t *data, size_t len, uint64_t m,
                       uint64_t *a, uint64_t *b) {
    uint64_t index_end = (uint64_t)16 << s->minishard_bits;
    *a = nds_load_le64(data + 16 * m);
    *b = nds_load_le64(data + 16 * m + 8);
    if (*a > *b || *b > len - index_end)
        return nds_err(NDS_ECORRUPT, "shard index entry %llu: minishard index [%llu, %llu) is %s",
                       (unsigned long long)m, (unsigned long long)*a, (unsigned long long)*b,
                       *a > *b ? "reversed" : "past the end of the shard");
    return 0;
}

static int short_shard(size_t len, uint64_t index_end) {
    return nds_err(NDS_ECORRUPT, "shard of %zu bytes is shorter than its %llu-byte shard index",
                   len, (unsigned long long)index_end);
}

/* Parses minishard m's index (its range read from the shard index) into all. */
static int parse_minishard(const shard_file *f, uint64_t m, range *ir, nds_pc_refs *all) {
    uint64_t index_end = (uint64_t)16 << f->s->minishard_bits, a, b;
    int rc = index_entry(f->s, f->data, f->len, m, &a, &b);
    if (rc) return rc;
    *ir = (range){index_end + a, index_end + b};
    if (a == b) return 0;
    nds_pc_refs got;
    rc = nds_pc_minishard_decode(f->s, f->data + index_end + a, (size_t)(b - a), index_end, f->len,
                                 f->max_entries, &got);
    if (!rc) rc = add_minishard(f, m, &got, all);
    free(got.v);
    return rc ? nds_err_prefix(rc, "minishard %llu", (unsigned long long)m) : 0;
}

int nds_pc_shard_parse(const nds_pc_sharding *s, uint64_t shard, const uint8_t *data, size_t len,
                       uint64_t max_entries, nds_pc_chunk_ref **refs, size_t *n) {
    uint64_t count = (uint64_t)1 << s->minishard_bits, index_end = count * 16;
    *refs = NULL;
    *n = 0;
    if (len < index_end) return short_shard(len, index_end);
    range *ranges = malloc((size_t)(count + 1) * sizeof *ranges);
    size_t nr = 0;
    int rc = ranges ? 0 : nds_err(NDS_ENOMEM, "out of memory parsing a shard");
    shard_file f = {s, shard, data, len, max_entries};
    nds_pc_refs all = {NULL, 0, 0};
    for (uint64_t m = 0; m < count && !rc; m++) rc = parse_minishard(&f, m, &ranges[nr++], &all);
    *refs = all.v;
    *n = all.n;
    if (!rc) {
        range *all = realloc(ranges, (nr + *n + 1) * sizeof *all);
        if (!all)
            rc = nds_err(NDS_ENOMEM, "out of memory parsing a shard");
        else
            ranges = all;
    }
    for (size_t i = 0; !rc && i < *n; i++) ranges[nr++] = (range){(*refs)[i].start, (*refs)[i].end};
    if (!rc) ranges[nr++] = (range){0, index_end};
    if (!rc) rc = check_overlaps(ranges, nr);
    free(ranges);
    if (rc) {
        free(*refs);
        *refs = NULL;
        *n = 0;
    }
    return rc;
}

int nds_pc_shard_find(const nds_pc_sharding *s, const uint8_t *data, size_t len, uint64_t id,
                      uint64_t max_entries, nds_pc_chunk_ref *ref) {
    uint64_t index_end = (uint64_t)16 << s->minishard_bits, shard, m, a, b;
    memset(ref, 0, sizeof *ref);
    if (len < index_end) return short_shard(len, index_end);
    nds_pc_shard_of(s, id, &shard, &m);
    int rc = index_entry(s, data, len, m, &a, &b);
    if (rc || a == b) return rc;
    nds_pc_refs refs;
    rc = nds_pc_minishard_decode(s, data + index_end + a, (size_t)(b - a), index_end, len,
                                 max_entries, &refs);
    for (size_t i = 0; !rc && i < refs.n; i++)
        if (refs.v[i].id == id) *ref = refs.v[i];
    free(refs.v);
    return rc ? nds_err_prefix(rc, "minishard %llu", (unsigned long long)m) : 0;
}

/* ---- building a shard ------------------------------------------------------------------------ */

static _Thread_local const nds_pc_sharding *sort_sharding; /* qsort has no context argument */

static uint64_t minishard_of(const nds_pc_sharding *s, uint64_t id) {
    uint64_t sh, mi;
    nds_pc_shard_of(s, id, &sh, &mi);
    return mi;
}

/* A chunk being laid out: its bytes are the encoded chunk, or (stored) bytes copied verbatim from
 * a shard file, data_encoding already applied. */
typedef struct item {
    nds_pc_shard_chunk c;
    bool stored;
} item;

static int cmp_chunk(const void *a, const void *b) {
    const nds_pc_shard_chunk *x = &((const item *)a)->c, *y = &((const item *)b)->c;
    uint64_t mx = minishard_of(sort_sharding, x->id), my = minishard_of(sort_sharding, y->id);
    if (mx != my) return mx < my ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Appends one minishard's chunks [i, j) and its index; sets its shard index entry. */
static int build_minishard(const nds_pc_sharding *s, const item *it, size_t i, size_t j,
                           uint64_t index_end, nds_buf *out, nds_buf *index) {
    size_t n = j - i;
    index->len = 0;
    if (nds_buf_reserve(index, n * 24) != 0)
        return nds_err(NDS_ENOMEM, "out of memory building a shard");
    uint64_t prev_id = 0, prev_end = index_end;
    for (size_t k = 0; k < n; k++) {
        const nds_pc_shard_chunk *c = &it[i + k].c;
        uint64_t start = out->len;
        int rc = s->data_gzip && !it[i + k].stored
                     ? nds_pc_gzip(c->data, c->len, out)
                     : (nds_buf_append(out, c->data, c->len) ? NDS_ENOMEM : 0);
        if (rc)
            return rc == NDS_ENOMEM ? nds_err(NDS_ENOMEM, "out of memory building a shard") : rc;
        nds_store_le64(index->data + 8 * k, c->id - prev_id);
        nds_store_le64(index->data + 8 * (n + k), start - prev_end);
        nds_store_le64(index->data + 8 * (2 * n + k), out->len - start);
        prev_id = c->id;
        prev_end = out->len;
    }
    index->len = n * 24;
    uint64_t a = out->len - index_end;
    int rc = s->index_gzip ? nds_pc_gzip(index->data, index->len, out)
                           : (nds_buf_append(out, index->data, index->len) ? NDS_ENOMEM : 0);
    if (rc) return rc == NDS_ENOMEM ? nds_err(NDS_ENOMEM, "out of memory building a shard") : rc;
    uint64_t m = minishard_of(s, it[i].c.id);
    nds_store_le64(out->data + 16 * m, a);
    nds_store_le64(out->data + 16 * m + 8, out->len - index_end);
    return 0;
}

/* Lays out items (sorted here) as nds_pc_shard_build describes. */
static int build_items(const nds_pc_sharding *s, item *items, size_t n, nds_buf *out) {
    uint64_t index_end = (uint64_t)16 << s->minishard_bits;
    if (index_end > MAX_WRITE_INDEX)
        return nds_err(NDS_ELIMIT,
                       "neuroglancer_precomputed: writing shards with minishard_bits %u (a "
                       "%llu-byte shard index) is not supported (at most 24)",
                       s->minishard_bits, (unsigned long long)index_end);
    sort_sharding = s;
    qsort(items, n, sizeof *items, cmp_chunk);
    out->len = 0;
    if (nds_buf_reserve(out, (size_t)index_end) != 0)
        return nds_err(NDS_ENOMEM, "out of memory building a shard");
    memset(out->data, 0, (size_t)index_end);
    out->len = (size_t)index_end;
    nds_buf index = {0};
    int rc = 0;
    for (size_t i = 0, j; i < n && !rc; i = j) {
        uint64_t m = minishard_of(s, items[i].c.id);
        for (j = i + 1; j < n && minishard_of(s, items[j].c.id) == m; j++) {
        }
        rc = build_minishard(s, items, i, j, index_end, out, &index);
    }
    /* Empty minishards get a zero-length range at the end of the previous one. (A written entry
     * never is [0, 0): a minishard's index follows its chunks' data.) */
    for (uint64_t m = 0, last = 0; !rc && m < index_end / 16; m++) {
        uint64_t a = nds_load_le64(out->data + 16 * m), b = nds_load_le64(out->data + 16 * m + 8);
        if (a == 0 && b == 0)
            nds_store_le64(out->data + 16 * m, last), nds_store_le64(out->data + 16 * m + 8, last);
        else
            last = b;
    }
    nds_buf_dispose(&index);
    return rc;
}

int nds_pc_shard_build(const nds_pc_sharding *s, const nds_pc_shard_chunk *chunks, size_t n,
                       nds_buf *out) {
    item *items = malloc((n ? n : 1) * sizeof *items);
    if (!items) return nds_err(NDS_ENOMEM, "out of memory building a shard");
    for (size_t i = 0; i < n; i++) items[i] = (item){chunks[i], false};
    int rc = build_items(s, items, n, out);
    free(items);
    return rc;
}

/* ---- updating a shard ------------------------------------------------------------------------ */

static int cmp_id(const void *a, const void *b) {
    uint64_t x = ((const nds_pc_shard_chunk *)a)->id, y = ((const nds_pc_shard_chunk *)b)->id;
    return (x > y) - (x < y);
}

/* Sorts the changes by id and checks they are distinct chunks of `shard`. */
static int check_changes(const nds_pc_sharding *s, uint64_t shard, nds_pc_shard_chunk *c,
                         size_t n) {
    qsort(c, n, sizeof *c, cmp_id);
    for (size_t i = 0; i < n; i++) {
        uint64_t sh, mi;
        nds_pc_shard_of(s, c[i].id, &sh, &mi);
        if (sh != shard)
            return nds_err(NDS_EINVAL, "chunk %llu belongs to shard %llu, not %llu",
                           (unsigned long long)c[i].id, (unsigned long long)sh,
                           (unsigned long long)shard);
        if (i > 0 && c[i].id == c[i - 1].id)
            return nds_err(NDS_EINVAL, "chunk %llu is changed twice", (unsigned long long)c[i].id);
    }
    return 0;
}

int nds_pc_shard_update(const nds_pc_sharding *s, uint64_t shard, const uint8_t *old, size_t len,
                        uint64_t max_entries, nds_pc_changes *changes, nds_buf *out) {
    nds_pc_refs refs = {NULL, 0, 0};
    out->len = 0;
    int rc = old ? nds_pc_shard_parse(s, shard, old, len, max_entries, &refs.v, &refs.n) : 0;
    if (!rc) rc = nds_pc_shard_update_parsed(s, shard, old, &refs, changes, out);
    free(refs.v);
    return rc;
}

int nds_pc_shard_update_parsed(const nds_pc_sharding *s, uint64_t shard, const uint8_t *old,
                               const nds_pc_refs *parsed, nds_pc_changes *ch, nds_buf *out) {
    const nds_pc_chunk_ref *refs = parsed->v;
    size_t nrefs = parsed->n, n = ch->n;
    nds_pc_shard_chunk *changes = ch->v;
    item *all = NULL;
    size_t m = 0;
    out->len = 0;
    int rc = check_changes(s, shard, changes, n);
    if (!rc && !(all = malloc((nrefs + n + 1) * sizeof *all)))
        rc = nds_err(NDS_ENOMEM, "out of memory updating a shard");
    for (size_t i = 0; !rc && i < nrefs; i++) { /* kept chunks: their stored bytes as they are */
        nds_pc_shard_chunk key = {refs[i].id, NULL, 0};
        if (!bsearch(&key, changes, n, sizeof *changes, cmp_id))
            all[m++] = (item){
                {refs[i].id, old + refs[i].start, (size_t)(refs[i].end - refs[i].start)}, true};
    }
    for (size_t k = 0; !rc && k < n; k++)
        if (changes[k].data) all[m++] = (item){changes[k], false};
    if (!rc && m) rc = build_items(s, all, m, out);
    free(all);
    return rc;
}

/* ---- reading chunks -------------------------------------------------------------------------- */

int nds_pc_chunk_data(const nds_pc_sharding *s, const uint8_t *data, size_t len, size_t limit,
                      nds_buf *out) {
    if (!s->data_gzip) {
        if (len > limit)
            return nds_err(NDS_ECORRUPT, "chunk of %zu bytes, more than the %zu expected", len,
                           limit);
        out->len = 0;
        return nds_buf_append(out, data, len) ? nds_err(NDS_ENOMEM, "out of memory") : 0;
    }
    return nds_pc_gunzip(data, len, limit, out);
}

/* Reads [start, start + len) of key at generation gen (NONE: any, and *gen receives it).
 * *state: 0 value (r to dispose), 1 missing, 2 the file changed (retry); r holds nothing unless 0
 * is returned with *state 0. */
static int read_range(nds_kvstore *kv, const char *key, uint64_t start, uint64_t len,
                      nds_generation *gen, nds_read_result *r, int *state) {
    nds_read_options o = NDS_READ_OPTIONS_INIT;
    o.if_equal = *gen;
    o.byte_start = (int64_t)start;
    o.byte_length = (int64_t)len;
    int rc = nds_kvstore_read(kv, key, &o, r);
    if (rc == NDS_ERANGE)
        return nds_err(NDS_ECORRUPT, "bytes [%llu, %llu) are past the end of the shard",
                       (unsigned long long)start, (unsigned long long)(start + len));
    if (rc) return rc;
    *state = r->state == NDS_READ_VALUE ? 0 : r->state == NDS_READ_MISSING ? 1 : 2;
    if (*state) nds_read_result_dispose(r);
    if (*state == 0 && gen->kind == NDS_GEN_NONE) *gen = r->generation;
    if (*state == 0 && r->value.len != len) {
        uint64_t total = r->total_size;
        nds_read_result_dispose(r);
        return nds_err(NDS_ECORRUPT,
                       "bytes [%llu, %llu) run past the end of the shard (%llu bytes)",
                       (unsigned long long)start, (unsigned long long)(start + len),
                       (unsigned long long)total);
    }
    return 0;
}

typedef struct lookup {
    nds_kvstore *kv;
    const char *key;
    const nds_pc_sharding *s;
    uint64_t id, minishard, max_entries;
    size_t limit;
    nds_buf *out;
} lookup;

/* Finds the chunk in minishard index bytes; *ref.end == 0 when absent. */
static int find_in_minishard(const lookup *l, const uint8_t *p, size_t len, uint64_t file_len,
                             nds_pc_chunk_ref *ref) {
    nds_pc_refs refs;
    int rc = nds_pc_minishard_decode(l->s, p, len, (uint64_t)16 << l->s->minishard_bits, file_len,
                                     l->max_entries, &refs);
    memset(ref, 0, sizeof *ref);
    for (size_t i = 0; !rc && i < refs.n; i++)
        if (refs.v[i].id == l->id) *ref = refs.v[i];
    free(refs.v);
    return rc;
}

/* One attempt; *state 2 means the shard changed between reads. */
static int lookup_once(const lookup *l, int *present, int *state) {
    nds_generation gen = {NDS_GEN_NONE, {0}};
    nds_read_result r;
    uint64_t index_end = (uint64_t)16 << l->s->minishard_bits;
    *present = 0;
    int rc = read_range(l->kv, l->key, 16 * l->minishard, 16, &gen, &r, state);
    if (rc) return rc;
    if (*state) { /* no shard file: no chunk */
        *state = 0;
        return 0;
    }
    uint64_t a = nds_load_le64(r.value.data), b = nds_load_le64(r.value.data + 8),
             total = r.total_size;
    nds_read_result_dispose(&r);
    if (a > b || index_end + b < b || index_end + b > total)
        return nds_err(NDS_ECORRUPT, "shard index entry %llu: minishard index [%llu, %llu) is %s",
                       (unsigned long long)l->minishard, (unsigned long long)a,
                       (unsigned long long)b, a > b ? "reversed" : "past the end of the shard");
    if (a == b) return 0;
    if ((b - a) / 24 > l->max_entries + 64)
        return nds_err(NDS_ECORRUPT,
                       "minishard index of %llu bytes is larger than any chunk grid allows",
                       (unsigned long long)(b - a));
    if ((rc = read_range(l->kv, l->key, index_end + a, b - a, &gen, &r, state)) || *state)
        return rc ? rc : (*state = 2, 0);
    nds_pc_chunk_ref ref;
    rc = find_in_minishard(l, r.value.data, r.value.len, total, &ref);
    nds_read_result_dispose(&r);
    if (rc || ref.end == 0) return rc;
    if (ref.end - ref.start > l->limit + 1024)
        return nds_err(NDS_ECORRUPT, "chunk %llu has %llu bytes, more than a chunk can take",
                       (unsigned long long)l->id, (unsigned long long)(ref.end - ref.start));
    if ((rc = read_range(l->kv, l->key, ref.start, ref.end - ref.start, &gen, &r, state)) || *state)
        return rc ? rc : (*state = 2, 0);
    rc = nds_pc_chunk_data(l->s, r.value.data, r.value.len, l->limit, l->out);
    nds_read_result_dispose(&r);
    *present = rc == 0;
    return rc;
}

int nds_pc_shard_read(nds_kvstore *kv, const char *scale_key, const nds_pc_sharding *s, uint64_t id,
                      const nds_pc_limits *limits, nds_buf *out, int *present) {
    char key[NDS_PC_MAX_KEY + 64];
    uint64_t shard, minishard;
    nds_pc_shard_of(s, id, &shard, &minishard);
    int rc = nds_pc_shard_key(scale_key, s, shard, key, sizeof key);
    lookup l = {kv, key, s, id, minishard, limits->max_entries, limits->chunk, out};
    for (int attempt = 0; !rc && attempt < READ_ATTEMPTS; attempt++) {
        int state = 0;
        rc = lookup_once(&l, present, &state);
        if (!rc && state != 2) return 0;
    }
    if (!rc)
        rc = nds_err(NDS_ECONFLICT, "shard kept changing while reading chunk %llu",
                     (unsigned long long)id);
    return nds_err_prefix(rc, "shard %s", key);
}
