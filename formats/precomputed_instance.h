/* The open scale of a neuroglancer precomputed volume (the format instance, `precomputed`) and what
 * the two files of the format driver share: precomputed.c (vtable, open and create, chunk keys,
 * grouped-write hooks) above precomputed_chunk.c (stored bytes <-> canonical chunks: one precomputed
 * chunk in its encoding, a shard box's whole shard file; the scratch and shard helpers below),
 * which never calls up. See precomputed.c for the layouts.
 *
 * Private to formats/precomputed*.c. An instance is immutable after open; every function here may
 * run on many threads at once on one instance (scratch buffers are per thread).
 */
#ifndef NDS_FORMATS_PRECOMPUTED_INSTANCE_H
#define NDS_FORMATS_PRECOMPUTED_INSTANCE_H

#include <stddef.h>
#include <stdint.h>

#include "precomputed_metadata.h"
#include "precomputed_shard.h"
#include "ndstore/box.h"
#include "ndstore/sys/buf.h"
#include "ndstore/sys/format.h"

/* How the open scale maps onto the core's chunk grid (see precomputed.c's file comment). */
typedef enum layout { UNSHARDED, SHARD_BOX, SHARD_HASHED } layout;

/* The format instance: one open scale. */
typedef struct precomputed {
    json_object *doc;  /* the info as stored, owned */
    nds_pc_info info;  /* its parse, owned */
    nds_pc_scale s;    /* the open scale, encoding parameters from the spec applied */
    uint64_t chunk[3]; /* the chunk size in use */
    uint64_t nc;       /* channels */
    nds_dtype dtype;
    size_t elem;        /* bytes per element */
    size_t chunk_bytes; /* canonical bytes of one precomputed chunk */
    nds_pc_grid grid;   /* chunk grid and Morton layout */
    layout layout;
    unsigned box[3];      /* SHARD_BOX: a shard spans 2^box[d] chunks in dimension d */
    uint64_t max_entries; /* bound on one minishard index */
    char url[512];
    char doc_name[600]; /* "neuroglancer_precomputed: info of <url>" */
} precomputed;

/** The calling thread's scratch buffer `slot` (0..2), emptied, with room for n bytes; NULL when out
 * of memory. */
nds_buf *nds_pc_scratch(int slot, size_t n);
/** Frees big scratch buffers so an idle pool thread does not pin a shard's worth of memory. */
void nds_pc_scratch_trim(void);
/** NDS_ENOMEM with the format's message. */
int nds_pc_no_memory(void);
/** The shard holding precomputed chunk g (grid coordinates). */
uint64_t nds_pc_chunk_shard(const precomputed *p, const uint64_t *g);
/** The shard holding shard-box cell (in units of shard boxes). */
uint64_t nds_pc_box_shard(const precomputed *p, const uint64_t *cell);

/** Extent of chunk g inside the volume: the chunk clipped at the upper edge. */
void nds_pc_chunk_extent(const precomputed *p, const uint64_t *g, uint64_t *e);
/** Decodes the stored bytes of chunk g (grid coordinates) into a canonical chunk (C order over
 * [x, y, z, channel], 0 past the volume's edge). @return 0 or NDS_ECORRUPT naming what is wrong */
int nds_pc_decode_one(const precomputed *p, const uint64_t *g, const uint8_t *data, size_t len,
                      uint8_t *out);
/** Encodes canonical chunk g (clipped to the volume) into out (appending). */
int nds_pc_encode_one(const precomputed *p, const uint64_t *g, const uint8_t *chunk, nds_buf *out);
/** Decodes a whole shard file into the canonical buffer of shard-box cell (out_bytes long). */
int nds_pc_decode_box(const precomputed *p, const uint64_t *cell, const uint8_t *data, size_t len,
                      uint8_t *out, size_t out_bytes);
/** Encodes the canonical buffer of shard-box cell as a shard file (chunks all 0 are left out). */
int nds_pc_encode_box(const precomputed *p, const uint64_t *cell, const uint8_t *box, nds_buf *out);
/** A write's read-modify-write of shard box u->cell, which it changes only inside u->changed
 *  (box coordinates; format.h nds_update_request): decodes from u->old (NULL: no shard stored)
 *  only the chunks the box changes in part, calls u->merge once, encodes the chunks the box
 *  reaches (a chunk left all 0 is removed) and keeps the stored bytes of the rest;
 *  u->all_fill when the shard holds no chunk any more. */
int nds_pc_update_box(const precomputed *p, nds_update_request *u);

#endif
