/* JPEG encode and decode of uint8 images with 1 (grayscale) or 3 (RGB) components, through
 * libturbojpeg, for the neuroglancer precomputed "jpeg" chunk encoding (see codec_image.h).
 *
 * Encoding uses 4:4:4 (no chroma subsampling) for RGB, so the channels of a voxel stay independent;
 * grayscale images are plain single-component JPEGs. Decoding checks the header (dimensions and
 * components) against what the caller expects before decompressing, stops on libjpeg warnings
 * (truncated or corrupt data is an error, not a partly grey image) and limits progressive scans.
 * Omits: CMYK / YCCK images (refused), lossless JPEG.
 * Threading: reentrant; each call creates and destroys its own turbojpeg handle. Ownership: encode
 * replaces out's contents; decode writes exactly pixels x components bytes of out.
 */
#include <string.h>

#include <turbojpeg.h>

#include "codec_image.h"
#include "internal/error.h"

#ifndef TJFLAG_LIMITSCANS
#define TJFLAG_LIMITSCANS 0
#endif

/* The library's message for handle, as one lower-case-led line. */
static int tj_fail(tjhandle h, int code, const char *what) {
    return nds_err(code, "jpeg: %s: %s", what, h ? tjGetErrorStr2(h) : "cannot create a handle");
}

int nds_jpeg_encode(const uint8_t *pixels, uint32_t width, uint32_t height, int components,
                    int quality, nds_buf *out) {
    if (components != 1 && components != 3)
        return nds_err(NDS_EINVAL, "jpeg: %d components; only 1 (grayscale) or 3 (rgb)",
                       components);
    if (quality < 0 || quality > 100)
        return nds_err(NDS_EINVAL, "jpeg: quality %d outside [0, 100]", quality);
    if (width == 0 || height == 0 || width > NDS_JPEG_MAX_DIM || height > NDS_JPEG_MAX_DIM)
        return nds_err(NDS_ELIMIT,
                       "jpeg: a %ux%u image is outside jpeg's limits (1 to 65535 per side)", width,
                       height);
    tjhandle h = tjInitCompress();
    if (!h) return tj_fail(NULL, NDS_ENOMEM, "encoding");
    unsigned char *jpeg = NULL;
    unsigned long size = 0;
    int pf = components == 1 ? TJPF_GRAY : TJPF_RGB,
        samp = components == 1 ? TJSAMP_GRAY : TJSAMP_444;
    int rc = 0;
    /* quality 0 is not valid for libjpeg's scaling; 1 is the same lowest table. */
    if (tjCompress2(h, pixels, (int)width, 0, (int)height, pf, &jpeg, &size, samp,
                    quality ? quality : 1, TJFLAG_ACCURATEDCT) != 0)
        rc = tj_fail(h, NDS_EINVAL, "encoding");
    else if (nds_buf_reserve(out, size) != 0)
        rc = nds_err(NDS_ENOMEM, "jpeg: out of memory for a %lu-byte image", size);
    if (rc == 0) {
        memcpy(out->data, jpeg, size);
        out->len = size;
    }
    tjFree(jpeg);
    tjDestroy(h);
    return rc;
}

/* Checks the header against what the chunk needs. */
static int check_header(tjhandle h, const uint8_t *in, size_t len, uint64_t pixels, int components,
                        int *w, int *ht) {
    int samp, cs;
    if (tjDecompressHeader3(h, in, (unsigned long)len, w, ht, &samp, &cs) != 0)
        return tj_fail(h, NDS_ECORRUPT, "reading the header");
    int have = cs == TJCS_GRAY ? 1 : (cs == TJCS_RGB || cs == TJCS_YCbCr) ? 3 : 4;
    if (have != components)
        return nds_err(NDS_ECORRUPT, "jpeg: image has %d components, the chunk needs %d", have,
                       components);
    if ((uint64_t)*w * (uint64_t)*ht != pixels)
        return nds_err(NDS_ECORRUPT, "jpeg: a %dx%d image has %llu pixels, the chunk needs %llu",
                       *w, *ht, (unsigned long long)((uint64_t)*w * (uint64_t)*ht),
                       (unsigned long long)pixels);
    return 0;
}

int nds_jpeg_decode(const uint8_t *in, size_t len, uint64_t pixels, int components, uint8_t *out) {
    if (components != 1 && components != 3)
        return nds_err(NDS_EINVAL, "jpeg: %d components; only 1 (grayscale) or 3 (rgb)",
                       components);
    if (len == 0) return nds_err(NDS_ECORRUPT, "jpeg: empty image");
    tjhandle h = tjInitDecompress();
    if (!h) return tj_fail(NULL, NDS_ENOMEM, "decoding");
    int w = 0, ht = 0;
    int rc = check_header(h, in, len, pixels, components, &w, &ht);
    int pf = components == 1 ? TJPF_GRAY : TJPF_RGB;
    if (rc == 0 &&
        tjDecompress2(h, in, (unsigned long)len, out, w, 0, ht, pf,
                      TJFLAG_ACCURATEDCT | TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS) != 0)
        rc = tj_fail(h, NDS_ECORRUPT, "decoding");
    tjDestroy(h);
    return rc;
}
