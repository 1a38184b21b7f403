/* The neuroglancer_uint64_sharded_v1 format as the precomputed volume format uses it: compressed
 * Morton chunk ids, the identity and murmurhash3_x86_128 hashes, shard and minishard indexes (raw
 * or gzip), whole-shard parsing, building and updating (untouched chunks kept verbatim), and
 * single-chunk reads through byte ranges or from a shard in memory.
 *
 * Private to formats/precomputed*.c and the fuzz harnesses. Reentrant; no state. Sizes read from a
 * shard are checked against the bytes present and the caller's limits before anything is allocated.
 */
#ifndef NDS_FORMATS_PRECOMPUTED_SHARD_H
#define NDS_FORMATS_PRECOMPUTED_SHARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "precomputed_metadata.h"
#include "ndstore/kvstore.h"
#include "ndstore/sys/buf.h"

/** MurmurHash3_x86_128 of data[0..len) with seed; out[0..3] are h1..h4. */
void nds_murmurhash3_x86_128(const void *data, size_t len, uint32_t seed, uint32_t out[4]);
/** The sharded format's hash of a chunk id: MurmurHash3_x86_128 (seed 0) of its 8 little-endian
 * bytes, low 64 bits (h1 | h2 << 32). */
uint64_t nds_pc_murmur_u64(uint64_t key);

/** A chunk grid and its compressed Morton code layout. */
typedef struct nds_pc_grid {
    uint64_t grid[3]; /**< chunks per dimension: ceil(size / chunk) */
    unsigned bits[3]; /**< Morton bits per dimension: bit width of grid - 1 */
    unsigned total;   /**< sum of bits (<= 64 for sharded scales) */
} nds_pc_grid;

void nds_pc_grid_init(nds_pc_grid *g, const uint64_t size[3], const uint64_t chunk[3]);
/** Compressed Morton code of grid cell g (each g[d] < grid[d]). */
uint64_t nds_pc_morton(const nds_pc_grid *g, const uint64_t cell[3]);
/** Inverse of nds_pc_morton for id < 2^total. */
void nds_pc_morton_cell(const nds_pc_grid *g, uint64_t id, uint64_t cell[3]);

/** Shard and minishard of a chunk id. */
void nds_pc_shard_of(const nds_pc_sharding *s, uint64_t id, uint64_t *shard, uint64_t *minishard);
/** The shard file's key: "<scale key>/<shard in lower-case hex, ceil(shard_bits/4) digits>.shard".
 */
int nds_pc_shard_key(const char *scale_key, const nds_pc_sharding *s, uint64_t shard, char *buf,
                     size_t cap);

/**
 * When every shard holds the chunks of one aligned box of the grid (identity hash, and preshift +
 * minishard + shard bits cover every Morton bit; or shard_bits 0, one shard for the whole grid with
 * any hash), sets n[d] so that a shard spans 2^n[d] chunks in dimension d, and returns true; else
 * false (hashed or wrapped shards).
 */
bool nds_pc_shard_box(const nds_pc_sharding *s, const nds_pc_grid *g, unsigned n[3]);

/** One chunk of a minishard: its id and absolute byte range [start, end) in the shard file. */
typedef struct nds_pc_chunk_ref {
    uint64_t id, start, end;
} nds_pc_chunk_ref;

/** A list of chunk references: v[0..n) (malloc'd; cap entries of room while it grows). */
typedef struct nds_pc_refs {
    nds_pc_chunk_ref *v;
    size_t n, cap;
} nds_pc_refs;

/**
 * Decodes a minishard index (already cut from the shard file) into out (out->v malloc'd, out->n
 * entries; empty on error).
 * index_end is the shard index's size (16 << minishard_bits); file_len the shard file's size
 * (UINT64_MAX when unknown); at most max_entries entries are accepted.
 * @return 0, or NDS_ECORRUPT naming what is wrong (length not a multiple of 24, duplicate ids,
 *         offsets past the end or overflowing)
 */
int nds_pc_minishard_decode(const nds_pc_sharding *s, const uint8_t *data, size_t len,
                            uint64_t index_end, uint64_t file_len, uint64_t max_entries,
                            nds_pc_refs *out);

/**
 * Parses a whole shard file: every minishard index, every chunk. Each chunk must belong to shard
 * `shard` and to the minishard that lists it, and no two byte ranges (shard index, minishard
 * indexes, chunk data) may overlap. refs (malloc'd, *n entries) receive the chunks.
 * @return 0 or NDS_ECORRUPT
 */
int nds_pc_shard_parse(const nds_pc_sharding *s, uint64_t shard, const uint8_t *data, size_t len,
                       uint64_t max_entries, nds_pc_chunk_ref **refs, size_t *n);

/**
 * Finds chunk `id` in a whole shard file held in memory: its shard index entry, then its minishard
 * index (the rest of the file is not checked). ref->end == 0 when the shard does not hold it.
 * @return 0, or NDS_ECORRUPT naming what is wrong (as nds_pc_shard_read's checks)
 */
int nds_pc_shard_find(const nds_pc_sharding *s, const uint8_t *data, size_t len, uint64_t id,
                      uint64_t max_entries, nds_pc_chunk_ref *ref);

/** A chunk to put in a shard: its id and its encoded bytes (before data_encoding). */
typedef struct nds_pc_shard_chunk {
    uint64_t id;
    const uint8_t *data;
    size_t len;
} nds_pc_shard_chunk;

/** Changes to some chunks of a shard: v[0..n). */
typedef struct nds_pc_changes {
    nds_pc_shard_chunk *v;
    size_t n;
} nds_pc_changes;

/**
 * Builds a shard file from chunks (any order; ids must be distinct and belong to one shard): shard
 * index, then per minishard its chunks' data (gzip'd when data_encoding is gzip) in id order
 * followed by its minishard index. out's contents are replaced.
 * @return 0, NDS_ELIMIT (a shard index above 256 MiB), NDS_ENOMEM
 */
int nds_pc_shard_build(const nds_pc_sharding *s, const nds_pc_shard_chunk *chunks, size_t n,
                       nds_buf *out);

/**
 * The new bytes of shard `shard` (out's contents replaced) after changes to some of its chunks:
 * changes[i] is chunk id's new encoded bytes (before data_encoding), or a removal (data NULL). The
 * other chunks of the old shard file old[0..len) (NULL: none) keep their stored bytes verbatim; the
 * file is rebuilt as nds_pc_shard_build lays it out. out->len == 0 when no chunk is left. Sorts
 * changes in place by id.
 * @return 0; NDS_ECORRUPT when the old file does not parse (nds_pc_shard_parse); NDS_EINVAL for
 *         changes to chunks of other shards or to one chunk twice; NDS_ELIMIT, NDS_ENOMEM
 */
int nds_pc_shard_update(const nds_pc_sharding *s, uint64_t shard, const uint8_t *old, size_t len,
                        uint64_t max_entries, nds_pc_changes *changes, nds_buf *out);
/** nds_pc_shard_update over an old shard file already parsed (refs from nds_pc_shard_parse of
 *  old; old NULL and refs->n 0: none). */
int nds_pc_shard_update_parsed(const nds_pc_sharding *s, uint64_t shard, const uint8_t *old,
                               const nds_pc_refs *refs, nds_pc_changes *changes, nds_buf *out);

/**
 * The data of one chunk as stored (after data_encoding is undone) from a shard's bytes range; used
 * by whole-shard decoding. Decompressed output above limit is NDS_ECORRUPT.
 */
int nds_pc_chunk_data(const nds_pc_sharding *s, const uint8_t *data, size_t len, size_t limit,
                      nds_buf *out);

/** The bounds a shard read checks: entries per minishard index, bytes of one chunk's data. */
typedef struct nds_pc_limits {
    uint64_t max_entries;
    size_t chunk;
} nds_pc_limits;

/**
 * Reads chunk `id` of a sharded scale through byte-range reads of its shard file (16 bytes of shard
 * index, the minishard index, the chunk), all pinned to one generation of the file (retried when
 * the file changes in between). *present = 0 when the shard file or the chunk is absent. out
 * receives the chunk's encoded bytes (data_encoding undone), at most limits->chunk bytes.
 * @return 0, NDS_ECORRUPT naming the shard file and what is wrong, or the kvstore's error
 */
int nds_pc_shard_read(nds_kvstore *kv, const char *scale_key, const nds_pc_sharding *s, uint64_t id,
                      const nds_pc_limits *limits, nds_buf *out, int *present);

/** gzip (RFC 1952, one member, level 6, through the registry's "gzip" codec) of in[0..len)
 *  appended to out. */
int nds_pc_gzip(const uint8_t *in, size_t len, nds_buf *out);
/** Decompresses a gzip stream (one member with data) into out (contents replaced), sized by its
 *  trailer. A trailer claiming more than limit bytes or more than DEFLATE can make of len bytes,
 *  a zlib or other non-gzip stream, trailing bytes, a truncated or corrupt stream: NDS_ECORRUPT. */
int nds_pc_gunzip(const uint8_t *in, size_t len, size_t limit, nds_buf *out);

#endif
