/* PNG encode and decode of 8- and 16-bit grayscale, gray+alpha, RGB and RGBA images through libpng,
 * for the neuroglancer precomputed "png" chunk encoding (see codec_image.h).
 *
 * libpng reports errors by longjmp: each call keeps everything it allocates in one context struct
 * that outlives the setjmp, so nothing leaks and no local changes after setjmp. Warnings are
 * dropped (libpng would print them). Decoding checks the header (dimensions, bit depth, color type)
 * against what the caller expects before reading pixels, raises libpng's default 1,000,000-pixel
 * width and height limits (a chunk's image may be wide), and reads to the end of the image (IEND),
 * so a truncated file is an error. Omits: palette images and bit depths below 8 (refused), gamma
 * and color management (samples pass through unchanged). Threading: reentrant. Ownership: encode
 * replaces out's contents; decode writes exactly pixels x components x sample_bytes bytes of out.
 */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <png.h>

#include "codec_image.h"
#include "internal/dtype_util.h"
#include "internal/error.h"

#define PNG_MAX_DIM 0x7fffffffu

typedef struct png_ctx {
    png_structp png;
    png_infop info;
    char message[200]; /* libpng's error */
    nds_buf *out;      /* encode: destination */
    const uint8_t *in; /* decode: source */
    size_t len, pos;
    png_bytep *rows; /* decode: row pointers */
    int oom;         /* the write callback could not grow out */
} png_ctx;

static void on_error(png_structp png, png_const_charp msg) {
    png_ctx *c = png_get_error_ptr(png);
    snprintf(c->message, sizeof c->message, "%s", msg);
    png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp msg) {
    (void)png;
    (void)msg;
}

static int color_type_of(int components) {
    static const int types[] = {PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB,
                                PNG_COLOR_TYPE_RGB_ALPHA};
    return types[components - 1];
}

static int check_args(int components, int sample_bytes) {
    if (components < 1 || components > 4)
        return nds_err(NDS_EINVAL, "png: %d components; 1 to 4 are supported", components);
    if (sample_bytes != 1 && sample_bytes != 2)
        return nds_err(NDS_EINVAL, "png: %d-byte samples; 1 or 2 are supported", sample_bytes);
    return 0;
}

/* ---- encode ---------------------------------------------------------------------------------- */

static void write_cb(png_structp png, png_bytep data, png_size_t n) {
    png_ctx *c = png_get_io_ptr(png);
    if (nds_buf_append(c->out, data, n) != 0) {
        c->oom = 1;
        png_error(png, "out of memory");
    }
}

static void flush_cb(png_structp png) { (void)png; }

/* Runs the libpng calls of an encode; 0, or 1 after a longjmp. */
static int encode_rows(png_ctx *c, const uint8_t *pixels, uint32_t w, uint32_t h, int components,
                       int sample_bytes, int level) {
    if (setjmp(png_jmpbuf(c->png))) return 1;
    png_set_write_fn(c->png, c, write_cb, flush_cb);
    png_set_IHDR(c->png, c->info, w, h, sample_bytes * 8, color_type_of(components),
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_set_compression_level(c->png, level);
    png_write_info(c->png, c->info);
    if (sample_bytes == 2 && !nds_host_is_big_endian()) png_set_swap(c->png);
    size_t stride = (size_t)w * (size_t)components * (size_t)sample_bytes;
    for (uint32_t y = 0; y < h; y++) png_write_row(c->png, (png_const_bytep)(pixels + y * stride));
    png_write_end(c->png, NULL);
    return 0;
}

int nds_png_encode(const void *pixels, uint32_t width, uint32_t height, int components,
                   int sample_bytes, int level, nds_buf *out) {
    int rc = check_args(components, sample_bytes);
    if (rc) return rc;
    if (level < 0 || level > 9) return nds_err(NDS_EINVAL, "png: level %d outside [0, 9]", level);
    if (width == 0 || height == 0 || width > PNG_MAX_DIM || height > PNG_MAX_DIM)
        return nds_err(NDS_ELIMIT, "png: a %ux%u image is outside png's limits", width, height);
    png_ctx c;
    memset(&c, 0, sizeof c);
    c.out = out;
    out->len = 0;
    c.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &c, on_error, on_warning);
    c.info = c.png ? png_create_info_struct(c.png) : NULL;
    if (!c.info)
        rc = nds_err(NDS_ENOMEM, "png: out of memory");
    else if (encode_rows(&c, pixels, width, height, components, sample_bytes, level))
        rc = c.oom ? nds_err(NDS_ENOMEM, "png: out of memory")
                   : nds_err(NDS_EINVAL, "png: %s", c.message);
    png_destroy_write_struct(&c.png, &c.info);
    if (rc) out->len = 0;
    return rc;
}

/* ---- decode ---------------------------------------------------------------------------------- */

static void read_cb(png_structp png, png_bytep data, png_size_t n) {
    png_ctx *c = png_get_io_ptr(png);
    if (n > c->len - c->pos) png_error(png, "unexpected end of data");
    memcpy(data, c->in + c->pos, n);
    c->pos += n;
}

/* Checks the header against the chunk; 0 or an NDS error (not a longjmp). */
static int check_header(png_ctx *c, uint64_t pixels, int components, int sample_bytes) {
    png_uint_32 w, h;
    int depth, type, interlace;
    png_get_IHDR(c->png, c->info, &w, &h, &depth, &type, &interlace, NULL, NULL);
    if (type == PNG_COLOR_TYPE_PALETTE)
        return nds_err(NDS_ECORRUPT, "png: palette images are not supported");
    if (type != color_type_of(components))
        return nds_err(NDS_ECORRUPT, "png: color type %d does not have the chunk's %d channels",
                       type, components);
    if (depth != sample_bytes * 8)
        return nds_err(NDS_ECORRUPT, "png: %d-bit samples, the chunk needs %d", depth,
                       sample_bytes * 8);
    if ((uint64_t)w * h != pixels)
        return nds_err(NDS_ECORRUPT, "png: a %ux%u image has %llu pixels, the chunk needs %llu",
                       (unsigned)w, (unsigned)h, (unsigned long long)((uint64_t)w * h),
                       (unsigned long long)pixels);
    c->rows = malloc((size_t)h * sizeof *c->rows);
    if (!c->rows) return nds_err(NDS_ENOMEM, "png: out of memory");
    return 0;
}

/* Reads the header (phase 0) or the pixels (phase 1); 0, or 1 after a longjmp. */
static int decode_phase(png_ctx *c, int phase, int sample_bytes, uint8_t *out) {
    if (setjmp(png_jmpbuf(c->png))) return 1;
    if (phase == 0) {
        png_set_read_fn(c->png, c, read_cb);
        png_set_user_limits(c->png, PNG_MAX_DIM, PNG_MAX_DIM);
        png_read_info(c->png, c->info);
        return 0;
    }
    png_uint_32 h = png_get_image_height(c->png, c->info);
    size_t stride = png_get_rowbytes(c->png, c->info);
    if (sample_bytes == 2 && !nds_host_is_big_endian()) png_set_swap(c->png);
    png_set_interlace_handling(c->png);
    png_read_update_info(c->png, c->info);
    for (png_uint_32 y = 0; y < h; y++) c->rows[y] = out + (size_t)y * stride;
    png_read_image(c->png, c->rows);
    png_read_end(c->png, NULL);
    return 0;
}

int nds_png_decode(const uint8_t *in, size_t len, uint64_t pixels, int components, int sample_bytes,
                   void *out) {
    int rc = check_args(components, sample_bytes);
    if (rc) return rc;
    if (len < 8 || png_sig_cmp(in, 0, 8) != 0) return nds_err(NDS_ECORRUPT, "png: not a png image");
    png_ctx c;
    memset(&c, 0, sizeof c);
    c.in = in;
    c.len = len;
    c.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &c, on_error, on_warning);
    c.info = c.png ? png_create_info_struct(c.png) : NULL;
    if (!c.info)
        rc = nds_err(NDS_ENOMEM, "png: out of memory");
    else if (decode_phase(&c, 0, sample_bytes, out))
        rc = nds_err(NDS_ECORRUPT, "png: %s", c.message);
    else if ((rc = check_header(&c, pixels, components, sample_bytes)) == 0 &&
             decode_phase(&c, 1, sample_bytes, out))
        rc = nds_err(NDS_ECORRUPT, "png: %s", c.message);
    png_destroy_read_struct(&c.png, &c.info, NULL);
    free(c.rows);
    return rc;
}
