/* PNG and TIFF output of `ndstore read` (image_out.h). The region's bytes arrive in slabs that do
 * not respect row boundaries, so rows are assembled in one row buffer (a row lying whole inside a
 * slab is written straight from it) and handed to libpng / libtiff one at a time.
 *
 * libpng reports errors by longjmp: every call into it is made under a setjmp in this file, and
 * its messages are kept in the image for the report. libtiff reports through a process-wide
 * handler, which keeps the last message in a static buffer (one TIFF at a time: image_out.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <png.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <tiffio.h>
#include <unistd.h>
#include "cli.h"
#include "image_out.h"

static const char understood[] = ".npy, .png, .tif, .tiff (or --raw for raw bytes)";

/* The extension of name's last component ("" when none; a leading dot is a hidden file's name). */
static const char *extension(const char *name) {
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    const char *dot = strrchr(base, '.');
    return dot && dot != base ? dot : "";
}

int cli_output_kind(const char *name, bool raw, const char *usage, cli_out_kind *kind) {
    const char *ext = strcmp(name, "-") == 0 ? "" : extension(name);
    bool png = strcasecmp(ext, ".png") == 0;
    bool tiff = strcasecmp(ext, ".tif") == 0 || strcasecmp(ext, ".tiff") == 0;
    if (raw && (png || tiff))
        return cli_usage(usage,
                         "--raw writes raw bytes, not an image: drop --raw to write %s, or "
                         "name another file",
                         name);
    if (raw)
        *kind = CLI_OUT_RAW;
    else if (png)
        *kind = CLI_OUT_PNG;
    else if (tiff)
        *kind = CLI_OUT_TIFF;
    else if (ext[0] == '\0' || strcasecmp(ext, ".npy") == 0)
        *kind = CLI_OUT_NPY;
    else
        return cli_usage(usage,
                         "-o %s: the extension '%s' is not an output format ndstore writes; "
                         "understood: %s",
                         name, ext, understood);
    return CLI_OK;
}

/* ---- geometry ---- */

typedef struct geometry {
    uint64_t pages, height, width;
} geometry;

/* The image a region of shape is: dimensions of size 1 left out, up to max_dims left (2 or 3). */
static int image_geometry(const char *path, const char *what, size_t max_dims, size_t rank,
                          const uint64_t *shape, geometry *g) {
    uint64_t dims[NDS_MAX_RANK];
    size_t n = 0;
    bool last_kept = false;
    for (size_t d = 0; d < rank; d++)
        if (shape[d] != 1) {
            dims[n++] = shape[d];
            last_kept = d + 1 == rank;
        }
    if (n > max_dims) {
        char s[NDS_MAX_RANK * 24];
        cli_format_tuple(s, sizeof s, rank, shape);
        return cli_fail(
            "%s: a %s holds %s; the region's shape %s has %zu dimensions larger than 1: "
            "select a single index in the others (e.g. --region '[..., 7]')",
            path, what, max_dims == 2 ? "a 2-D image" : "a 2-D image or a 3-D stack of pages", s,
            n);
    }
    for (size_t d = 0; d < n; d++)
        if (dims[d] == 0)
            return cli_fail("%s: the region is empty: a %s needs at least one pixel", path, what);
    g->pages = n == 3 ? dims[0] : 1;
    g->height = n >= 2 ? dims[n - 2] : n == 1 && !last_kept ? dims[0] : 1;
    g->width = n >= 2 ? dims[n - 1] : n == 1 && last_kept ? dims[0] : 1;
    return CLI_OK;
}

/* ---- the image ---- */

struct cli_image {
    cli_out_kind kind;
    const char *path;
    FILE *f; /* PNG */
    png_structp png;
    png_infop info;
    char png_error[256];
    TIFF *tif;
    nds_dtype dtype;
    uint16_t bits, sample_format;
    uint16_t samples; /* per pixel: 1 grey, 3 RGB, 4 RGBA */
    geometry g;
    size_t row_bytes;
    uint8_t *row;       /* a row being assembled */
    size_t row_fill;    /* bytes of it so far */
    uint64_t rows_done; /* rows written (all pages) */
};

static void png_error_fn(png_structp png, png_const_charp msg) {
    cli_image *img = png_get_error_ptr(png);
    snprintf(img->png_error, sizeof img->png_error, "%s", msg);
    png_longjmp(png, 1);
}

static void png_warning_fn(png_structp png, png_const_charp msg) {
    (void)png, (void)msg; /* warnings do not stop the image and are not the user's business */
}

static char tiff_error[512];

static void tiff_error_fn(const char *module, const char *fmt, va_list ap) {
    char msg[400];
    vsnprintf(msg, sizeof msg, fmt, ap);
    snprintf(tiff_error, sizeof tiff_error, "%s%s%s", module ? module : "", module ? ": " : "",
             msg);
}

static void tiff_warning_fn(const char *module, const char *fmt, va_list ap) {
    (void)module, (void)fmt, (void)ap;
}

/* PNG: grey, 8 or 16 bits. */
static int png_check(const char *path, nds_dtype t, uint16_t *bits) {
    if (t == NDS_UINT8 || t == NDS_UINT16) {
        *bits = t == NDS_UINT8 ? 8 : 16;
        return CLI_OK;
    }
    return cli_fail("%s: a PNG holds uint8 or uint16 pixels; the array is %s: write .tif "
                    "(8-, 16- and 32-bit integers, float32, float64) or .npy",
                    path, nds_dtype_name(t));
}

static int tiff_check(const char *path, nds_dtype t, uint16_t *bits, uint16_t *format) {
    switch (t) {
    case NDS_UINT8:
    case NDS_UINT16:
    case NDS_UINT32: *format = SAMPLEFORMAT_UINT; break;
    case NDS_INT8:
    case NDS_INT16:
    case NDS_INT32: *format = SAMPLEFORMAT_INT; break;
    case NDS_FLOAT32:
    case NDS_FLOAT64: *format = SAMPLEFORMAT_IEEEFP; break;
    default:
        return cli_fail(
            "%s: ndstore writes TIFF pixels of uint8, uint16, uint32, int8, int16, int32, "
            "float32 or float64; the array is %s: write .npy",
            path, nds_dtype_name(t));
    }
    *bits = (uint16_t)(nds_dtype_size(t) * 8);
    return CLI_OK;
}

static int png_begin(cli_image *img) {
    img->f = fopen(img->path, "wb");
    if (!img->f) return cli_fail("%s: %s", img->path, strerror(errno));
    img->png = png_create_write_struct(PNG_LIBPNG_VER_STRING, img, png_error_fn, png_warning_fn);
    img->info = img->png ? png_create_info_struct(img->png) : NULL;
    if (!img->info) return cli_fail("%s: out of memory", img->path);
    if (setjmp(png_jmpbuf(img->png))) return cli_fail("%s: %s", img->path, img->png_error);
    png_init_io(img->png, img->f);
    png_set_IHDR(img->png, img->info, (png_uint_32)img->g.width, (png_uint_32)img->g.height,
                 img->bits,
                 img->samples == 1   ? PNG_COLOR_TYPE_GRAY
                 : img->samples == 3 ? PNG_COLOR_TYPE_RGB
                                     : PNG_COLOR_TYPE_RGB_ALPHA,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(img->png, img->info);
    uint16_t probe = 1;
    if (img->bits == 16 && *(uint8_t *)&probe == 1)
        png_set_swap(img->png); /* PNG samples are big-endian; ours are in host order */
    return CLI_OK;
}

/* The tags of one page (all pages alike; pages of a stack are marked as such). */
static int tiff_page_tags(cli_image *img, uint64_t page) {
    TIFF *t = img->tif;
    int ok = TIFFSetField(t, TIFFTAG_IMAGEWIDTH, (uint32_t)img->g.width) &&
             TIFFSetField(t, TIFFTAG_IMAGELENGTH, (uint32_t)img->g.height) &&
             TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, img->bits) &&
             TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, img->samples) &&
             TIFFSetField(t, TIFFTAG_SAMPLEFORMAT, img->sample_format) &&
             TIFFSetField(t, TIFFTAG_PHOTOMETRIC,
                          img->samples == 1 ? PHOTOMETRIC_MINISBLACK : PHOTOMETRIC_RGB) &&
             TIFFSetField(t, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG) &&
             TIFFSetField(t, TIFFTAG_COMPRESSION, COMPRESSION_NONE) &&
             TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, TIFFDefaultStripSize(t, 0));
    uint16_t alpha[1] = {EXTRASAMPLE_UNASSALPHA}; /* RGBA: the fourth sample is plain alpha */
    if (ok && img->samples == 4) ok = TIFFSetField(t, TIFFTAG_EXTRASAMPLES, (uint16_t)1, alpha);
    if (ok && img->g.pages > 1)
        ok = TIFFSetField(t, TIFFTAG_SUBFILETYPE, FILETYPE_PAGE) &&
             TIFFSetField(t, TIFFTAG_PAGENUMBER, (uint16_t)page, (uint16_t)img->g.pages);
    return ok ? CLI_OK : cli_fail("%s: %s", img->path, tiff_error);
}

static int tiff_begin(cli_image *img, uint64_t bytes) {
    TIFFSetErrorHandler(tiff_error_fn);
    TIFFSetWarningHandler(tiff_warning_fn);
    tiff_error[0] = '\0';
    /* Classic TIFF offsets are 32-bit: larger images are BigTIFF ("w8"), which libtiff and
     * most readers (PIL, tifffile, Fiji) read. The margin covers tags and strip tables. */
    bool big = bytes > ((uint64_t)1 << 32) - ((uint64_t)64 << 20);
    img->tif = TIFFOpen(img->path, big ? "w8" : "w");
    if (!img->tif)
        return cli_fail("%s: %s", img->path, tiff_error[0] ? tiff_error : strerror(errno));
    return tiff_page_tags(img, 0);
}

/* --rgb: the region's last dimension is each pixel's colour, 3 (RGB) or 4 (RGBA) samples. */
static int color_samples(const char *path, size_t rank, const uint64_t *shape, uint16_t *samples) {
    uint64_t last = rank ? shape[rank - 1] : 1;
    if (last == 3 || last == 4) {
        *samples = (uint16_t)last;
        return CLI_OK;
    }
    char s[NDS_MAX_RANK * 24];
    cli_format_tuple(s, sizeof s, rank, shape);
    return cli_fail(
        "%s: --rgb takes the region's last dimension as each pixel's colour: 3 (RGB) or 4 "
        "(RGBA) values; the region's shape is %s",
        path, s);
}

int cli_image_open(cli_image **out, cli_out_kind kind, const char *path, nds_dtype t, size_t rank,
                   const uint64_t *shape, bool color) {
    *out = NULL;
    cli_image *img = calloc(1, sizeof *img);
    if (!img) return cli_fail("out of memory");
    img->kind = kind;
    img->path = path;
    img->dtype = t;
    bool png = kind == CLI_OUT_PNG;
    img->samples = 1;
    int rc =
        png ? png_check(path, t, &img->bits) : tiff_check(path, t, &img->bits, &img->sample_format);
    if (rc == CLI_OK && color) rc = color_samples(path, rank, shape, &img->samples);
    if (rc == CLI_OK) /* the colour dimension is no dimension of the image */
        rc = image_geometry(path, png ? "PNG" : "TIFF", png ? 2 : 3, color ? rank - 1 : rank, shape,
                            &img->g);
    /* PNG and classic TIFF sizes are 32-bit; TIFF page numbers are 16-bit. */
    if (rc == CLI_OK && (img->g.width > UINT32_MAX / 2 || img->g.height > UINT32_MAX / 2 ||
                         img->g.pages > UINT16_MAX))
        rc = cli_fail("%s: %" PRIu64 " pages of %" PRIu64 " x %" PRIu64
                      " pixels is larger than a %s "
                      "holds",
                      path, img->g.pages, img->g.height, img->g.width, png ? "PNG" : "TIFF");
    img->row_bytes = (size_t)img->g.width * img->samples * nds_dtype_size(t);
    if (rc == CLI_OK && !(img->row = malloc(img->row_bytes)))
        rc = cli_fail("out of memory (a row of %zu bytes)", img->row_bytes);
    if (rc == CLI_OK)
        rc = png ? png_begin(img) : tiff_begin(img, img->g.pages * img->g.height * img->row_bytes);
    if (rc != CLI_OK) return cli_image_close(img, rc);
    *out = img;
    return CLI_OK;
}

/* One whole row out; a TIFF page ends after its last row. */
static int put_row(cli_image *img, uint8_t *row) {
    if (img->kind == CLI_OUT_PNG) {
        if (setjmp(png_jmpbuf(img->png))) return cli_fail("%s: %s", img->path, img->png_error);
        png_write_row(img->png, row);
        img->rows_done++;
        return CLI_OK;
    }
    uint64_t page = img->rows_done / img->g.height, in_page = img->rows_done % img->g.height;
    if (TIFFWriteScanline(img->tif, row, (uint32_t)in_page, 0) != 1)
        return cli_fail("%s: %s", img->path, tiff_error[0] ? tiff_error : "cannot write a row");
    img->rows_done++;
    if (in_page + 1 == img->g.height && page + 1 < img->g.pages) {
        if (!TIFFWriteDirectory(img->tif)) return cli_fail("%s: %s", img->path, tiff_error);
        return tiff_page_tags(img, page + 1);
    }
    return CLI_OK;
}

int cli_image_write(void *arg, uint8_t *buf, uint64_t bytes) {
    cli_image *img = arg;
    while (bytes > 0) {
        if (img->row_fill == 0 && bytes >= img->row_bytes) { /* a whole row in the slab */
            int rc = put_row(img, buf);
            if (rc != CLI_OK) return rc;
            buf += img->row_bytes, bytes -= img->row_bytes;
            continue;
        }
        size_t take = img->row_bytes - img->row_fill;
        if (take > bytes) take = (size_t)bytes;
        memcpy(img->row + img->row_fill, buf, take);
        img->row_fill += take, buf += take, bytes -= take;
        if (img->row_fill == img->row_bytes) {
            img->row_fill = 0;
            int rc = put_row(img, img->row);
            if (rc != CLI_OK) return rc;
        }
    }
    return CLI_OK;
}

/* png_write_end under its own setjmp (no local of the caller is live across it): 0 or -1. */
static int png_end(cli_image *img) {
    if (setjmp(png_jmpbuf(img->png))) return -1;
    png_write_end(img->png, img->info);
    return 0;
}

static int png_finish(cli_image *img, int rc) {
    if (img->png) {
        if (rc == CLI_OK && png_end(img) != 0) rc = cli_fail("%s: %s", img->path, img->png_error);
        png_destroy_write_struct(&img->png, img->info ? &img->info : NULL);
    }
    if (img->f && fclose(img->f) != 0 && rc == CLI_OK)
        rc = cli_fail("%s: %s", img->path, strerror(errno));
    return rc;
}

/* TIFFClose writes the last directory; its failures are reported only through the handler. */
static int tiff_finish(cli_image *img, int rc) {
    if (!img->tif) return rc;
    if (rc == CLI_OK) {
        tiff_error[0] = '\0';
        if (!TIFFFlush(img->tif))
            rc =
                cli_fail("%s: %s", img->path, tiff_error[0] ? tiff_error : "cannot write the file");
    }
    TIFFClose(img->tif);
    return rc;
}

int cli_image_close(cli_image *img, int rc) {
    if (!img) return rc;
    if (rc == CLI_OK && img->rows_done != img->g.pages * img->g.height)
        rc = cli_fail("%s: %" PRIu64 " rows written of %" PRIu64, img->path, img->rows_done,
                      img->g.pages * img->g.height); /* never expected: the read gave fewer bytes */
    bool opened = img->f || img->tif;
    rc = img->kind == CLI_OUT_PNG ? png_finish(img, rc) : tiff_finish(img, rc);
    /* A partial image is removed, as a partial .npy is; never a device or a FIFO. */
    struct stat st;
    if (rc != CLI_OK && opened && stat(img->path, &st) == 0 && S_ISREG(st.st_mode))
        unlink(img->path);
    free(img->row);
    free(img);
    return rc;
}
