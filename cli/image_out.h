/* Images out of `ndstore read -o`: the output kind chosen by the file name's extension, and PNG
 * (libpng) and TIFF (libtiff) writers fed the region's C-order bytes slab by slab, so an image
 * streams like a .npy file (memory: the slabs plus one row).
 *
 * Geometry: the region's shape (dropped dimensions already left out) less its dimensions of size 1
 * is the image: 2 dimensions are rows x columns (the first is the image's height, the last its
 * width, as NumPy and PIL see a 2-D array); a TIFF also takes 3, one page per index of the first
 * (slowest) one. One dimension is a row (a column when it is not the region's last dimension).
 * Threading: an image is written by one thread at a time (the read's I/O thread between open and
 * close); libtiff's error handler is process-wide, so one TIFF is written at a time.
 */
#ifndef NDS_CLI_IMAGE_OUT_H
#define NDS_CLI_IMAGE_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "ndstore/ndstore.h"

/** What `read -o NAME` writes. */
typedef enum cli_out_kind { CLI_OUT_NPY, CLI_OUT_RAW, CLI_OUT_PNG, CLI_OUT_TIFF } cli_out_kind;

/** The kind of -o name: "-" and names ending in .npy (or with no extension) are .npy, .png is PNG,
 *  .tif and .tiff are TIFF (case-insensitive); raw (--raw) is raw bytes under any name but an
 *  image's. Any other extension (".jpgg", ".tif.gz") is an error naming the extensions understood.
 *  CLI_OK, or CLI_USAGE (printed with usage). */
int cli_output_kind(const char *name, bool raw, const char *usage, cli_out_kind *kind);

typedef struct cli_image cli_image;

/** Checks that a region of dtype t and shape (rank dims) fits kind (PNG: uint8/uint16, 2-D;
 *  TIFF: 8-, 16-, 32-bit integers and float32/64, 2-D or 3-D), then creates path and writes the
 *  image's header. Grey pixels, or with color the region's last dimension (3 or 4) is each pixel's
 *  RGB or RGBA samples and the image is the dimensions before it. CLI_OK, or CLI_FAIL (printed;
 *  nothing created). */
int cli_image_open(cli_image **out, cli_out_kind kind, const char *path, nds_dtype t, size_t rank,
                   const uint64_t *shape, bool color);
/** The next bytes of the region's C-order data (a cli_ring_io: arg is the cli_image). CLI_OK, or
 *  CLI_FAIL (printed). */
int cli_image_write(void *arg, uint8_t *buf, uint64_t bytes);
/** Finishes the file (failed: removes it, when it is a regular file) and frees img. Returns rc,
 *  or CLI_FAIL (printed) when finishing fails. */
int cli_image_close(cli_image *img, int rc);

#endif
