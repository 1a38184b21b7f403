/* Decoding c-blosc 1.x lz4 chunks one block at a time (the blosc codec's decode into a piece
 * sink, and its decode of such chunks).
 *
 * c-blosc decodes a chunk only whole, into one buffer: a read then copies that buffer into the
 * caller's array, a second pass over memory. Here each block is decoded with liblz4 and
 * unshuffled into a block-sized buffer that stays in the cache, and handed on from there.
 * Private to formats/codecs/ (and the codec fuzz harness). Reentrant; the block buffers are the calling thread's
 * NDS_SCRATCH_BLOCKS.
 */
#ifndef NDS_FORMATS_BLOSC_BLOCKS_H
#define NDS_FORMATS_BLOSC_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

#include "ndstore/sys/codec.h"

/**
 * Decodes the blosc chunk in[0..len), whose decoded size must be out_len, block after block, and
 * calls sink with each decoded block (each starting at a multiple of align). Handles chunks of format version 2 compressed with lz4 or
 * lz4hc, byte-shuffled or not, whose header, block index and split sizes all lie inside the
 * chunk, in blocks of a multiple of align bytes; any other chunk (memcpyed, bit-shuffled, another compressor, another size, anything
 * out of place) is NDS_EUNSUPPORTED before any block, for c-blosc to decode (and judge) whole.
 * A split that lz4 cannot decode to its size: NDS_ECORRUPT naming the block.
 */
int nds_blosc_decode_blocks(const uint8_t *in, size_t len, size_t out_len, size_t align,
                            nds_piece_sink sink, void *arg);

/**
 * The same chunks decoded whole into out[0..out_len) (out_len: the decoded size), each block
 * unshuffled straight into its place: what c-blosc does, less the copy of streams stored as is.
 * NDS_EUNSUPPORTED (nothing written) for the chunks nds_blosc_decode_blocks declines.
 */
int nds_blosc_decode_into(const uint8_t *in, size_t len, uint8_t *out, size_t out_len);

/**
 * Only the blocks holding bytes [begin, end) of the chunk decoded into their places in out (the
 * codec's partial decode; only those blocks' places are checked, so a chunk put together from its
 * header, block index and some blocks decodes too). NDS_EUNSUPPORTED (nothing written) as for
 * nds_blosc_decode_into, and for an empty range or one past the chunk.
 */
int nds_blosc_decode_range(const uint8_t *in, size_t len, uint8_t *out, size_t out_len,
                           size_t begin, size_t end);

#endif
