/* The zarr v3 sharding_indexed codec: a shard holds a grid of inner chunks, each encoded with its
 * own codec chain, plus an index of (offset, nbytes) pairs (2^64-1 twice = empty) encoded with the
 * index codecs, at the start or the end of the shard.
 *
 * Two ways in: whole shards (decode every inner chunk present, fill the rest; encode every inner
 * chunk that is not all fill value and build the index), and single inner chunks read straight
 * from a kvstore with byte-range reads of the index and of the chunk (nds_z3_shard_read), with a
 * small cache of decoded indexes keyed by shard key and generation.
 *
 * Private to formats/zarr3*.c. A shard codec is immutable once parsed; the index cache is
 * internally synchronised (one mutex, held only to look up or store an entry).
 */
#ifndef NDS_FORMATS_ZARR3_SHARD_H
#define NDS_FORMATS_ZARR3_SHARD_H

#include <pthread.h>

#include "zarr3_codecs.h"
#include "ndstore/kvstore.h"

/**
 * The codec chain operations a shard needs for its inner chunks and its index. A sharding codec
 * holds chains and a chain may hold a sharding codec, so the shard sits below the chain
 * (zarr3_codecs.c) and reaches chains only through these, which the chain passes to
 * nds_z3_shard_parse: this file never calls up. Each has the meaning of the nds_z3_chain_*
 * function of the same name (zarr3_codecs.h).
 */
typedef struct nds_z3_chain_ops {
    int (*parse)(const json_object *codecs, const nds_z3_array *arr, const char *doc,
                 const char *where, int depth, nds_z3_chain **out);
    void (*free)(nds_z3_chain *c);
    int (*to_json)(const nds_z3_chain *c, json_object **out);
    int (*fixed_size)(const nds_z3_chain *c, uint64_t *size);
    int (*decode)(const nds_z3_chain *c, const uint8_t *in, size_t len, uint8_t *out);
    int (*encode)(const nds_z3_chain *c, const uint8_t *chunk, nds_buf *out);
} nds_z3_chain_ops;

/** The parsed sharding_indexed configuration. */
struct nds_z3_shard {
    const nds_z3_chain_ops *ops;   /**< the chain operations (static storage) */
    nds_z3_array shard;            /**< the array the codec encodes (one shard) */
    uint64_t chunk[NDS_MAX_RANK];  /**< "chunk_shape": the inner chunk shape */
    uint64_t grid[NDS_MAX_RANK];   /**< inner chunks per shard in each dimension */
    uint64_t count;                /**< inner chunks per shard (<= NDS_Z3_MAX_SHARD_CHUNKS) */
    size_t elem;                   /**< bytes per element */
    size_t inner_nbytes;           /**< canonical bytes of one inner chunk */
    nds_z3_chain *inner;           /**< "codecs" */
    nds_z3_chain *index;           /**< "index_codecs", over a uint64 array grid + [2] */
    size_t index_nbytes;           /**< encoded size of the index (fixed) */
    bool index_at_start;           /**< "index_location" is "start" */
};

/** Parses a sharding_indexed "configuration" for arr (see nds_z3_chain_parse for the rest); its
 *  nested chains through ops (static storage). */
int nds_z3_shard_parse(const json_object *config, const nds_z3_array *arr, const char *doc,
                       const char *where, int depth, const nds_z3_chain_ops *ops,
                       nds_z3_shard **out);
/** Frees a shard codec. Accepts NULL. */
void nds_z3_shard_free(nds_z3_shard *s);
/** The normalised configuration as a new object. */
int nds_z3_shard_config_json(const nds_z3_shard *s, json_object **out);

/** Decodes a whole shard in[0..len) into out (canonical shard). Corrupt: ECORRUPT naming the
 *  inner chunk ("inner chunk [1, 0]: crc32c mismatch"). */
int nds_z3_shard_decode(const nds_z3_shard *s, const uint8_t *in, size_t len, uint8_t *out);
/** Encodes a canonical shard into out (replacing its contents). Inner chunks that are all fill
 *  value are not stored (their index entry is empty). */
int nds_z3_shard_encode(const nds_z3_shard *s, const uint8_t *chunk, nds_buf *out);
/** A write's read-modify-write of a shard it changes only inside u->changed (shard coordinates;
 *  format.h nds_update_request): decodes from u->old (NULL: no shard stored) only the inner chunks
 *  the box changes in part, calls u->merge once, encodes the inner chunks the box reaches and
 *  copies the stored bytes of the rest into u->out; u->all_fill when no inner chunk is left
 *  stored. Elements of u->chunk in inner chunks the box does not reach are left as they were. A
 *  corrupt old shard: NDS_ECORRUPT (merge not called). */
int nds_z3_shard_update(const nds_z3_shard *s, nds_update_request *u);

/**
 * Decodes and validates an encoded index (index_nbytes bytes) of a shard of total bytes into
 * entries[0..2*count): every entry is empty or lies inside the shard, clear of the index, and no
 * two overlap (identical ranges are allowed: a writer may share the bytes of equal chunks).
 * @return 0 or NDS_ECORRUPT naming the inner chunk
 */
int nds_z3_shard_index_parse(const nds_z3_shard *s, const uint8_t *bytes, size_t len,
                             uint64_t total, uint64_t *entries);
/** Writes "[1, 0]", the grid position of inner chunk i (C order), into buf. */
void nds_z3_shard_inner_name(const nds_z3_shard *s, uint64_t i, char *buf, size_t cap);

/** Decoded indexes of recently read shards, keyed by shard key and generation. */
typedef struct nds_z3_index_cache nds_z3_index_cache;
int nds_z3_index_cache_new(nds_z3_index_cache **out);
void nds_z3_index_cache_free(nds_z3_index_cache *c);

/**
 * Reads inner chunk i of the shard stored under key into out (canonical inner chunk): the index
 * with a byte-range read (a suffix read when it is at the end), then the chunk's byte range read
 * on condition that the shard is still the generation whose index was read (retried when not).
 * *present = 0 (out untouched) when the shard or the inner chunk is not stored.
 * Errors name the shard key and the inner chunk.
 */
int nds_z3_shard_read(const nds_z3_shard *s, nds_z3_index_cache *cache, nds_kvstore *kv,
                      const char *key, uint64_t i, uint8_t *out, int *present);

#endif
