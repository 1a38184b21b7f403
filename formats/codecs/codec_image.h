/* Image codecs used as chunk encodings by the neuroglancer precomputed format: JPEG (libturbojpeg,
 * formats/codecs/codec_jpeg.c) and PNG (libpng, formats/codecs/codec_png.c).
 *
 * They are not nds_codec byte transforms (an image needs its width, height and channel count), so
 * they are plain functions. Pixels are height rows of width pixels of `components` interleaved
 * samples; samples are uint8, or for 16-bit PNG uint16 in host byte order.
 *
 * Private to formats/. Reentrant: each call uses its own library handle. Nothing is printed:
 * library warnings are dropped and errors come back as NDS_E* codes with a message ("jpeg: ...",
 * "png: ...").
 */
#ifndef NDS_FORMATS_CODEC_IMAGE_H
#define NDS_FORMATS_CODEC_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "ndstore/sys/buf.h"

/** Largest JPEG width or height. */
#define NDS_JPEG_MAX_DIM 65535u

/**
 * Encodes width x height pixels of 1 (grayscale) or 3 (RGB, 4:4:4, no chroma subsampling) uint8
 * components at quality 0..100 into out (replacing its contents).
 * @return 0, NDS_EINVAL (bad components / quality), NDS_ELIMIT (a dimension above 65535),
 * NDS_ENOMEM
 */
int nds_jpeg_encode(const uint8_t *pixels, uint32_t width, uint32_t height, int components,
                    int quality, nds_buf *out);
/**
 * Decodes a JPEG whose width x height must equal pixels and whose component count must equal
 * components (1 or 3) into out (pixels x components bytes). The header is checked before anything
 * is allocated. @return 0, or NDS_ECORRUPT naming what differs or what libjpeg reported
 */
int nds_jpeg_decode(const uint8_t *in, size_t len, uint64_t pixels, int components, uint8_t *out);

/**
 * Encodes width x height pixels of components (1..4: gray, gray+alpha, RGB, RGBA) samples of
 * sample_bytes (1 or 2) at zlib level 0..9 into out (replacing its contents).
 * @return 0, NDS_EINVAL, NDS_ELIMIT (a dimension above 2^31-1), NDS_ENOMEM
 */
int nds_png_encode(const void *pixels, uint32_t width, uint32_t height, int components,
                   int sample_bytes, int level, nds_buf *out);
/**
 * Decodes a PNG whose width x height must equal pixels, whose color type must have components
 * samples (no palette) of sample_bytes x 8 bits, into out (pixels x components x sample_bytes
 * bytes; 16-bit samples in host order). Interlaced images are accepted.
 * @return 0, or NDS_ECORRUPT naming what differs or what libpng reported
 */
int nds_png_decode(const uint8_t *in, size_t len, uint64_t pixels, int components, int sample_bytes,
                   void *out);

#endif
