/* A program that uses an installed ndstore, as a user's would: built by tests/install/install_test.sh
 * with pkg-config and with find_package(ndstore), against the shared and the static library. Creates a
 * zarr v2 array on memory:// (blosc with zstd inside, so the compression libraries are linked and
 * called), writes a region, reads it back and prints "OK <version>" when every element is right. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include <ndstore/ndstore.h>

#define ROWS 40
#define COLS 30

static int fail(const char *what) {
    fprintf(stderr, "consumer: %s: %s\n", what, nds_error_last()->message);
    return 1;
}

int main(void) {
    const char *spec = "{\"driver\":\"zarr\",\"kvstore\":\"memory://consumer/\",\"create\":true,"
                       "\"metadata\":{\"shape\":[40,30],\"chunks\":[16,16],\"dtype\":\"<u4\","
                       "\"compressor\":{\"id\":\"blosc\",\"cname\":\"zstd\",\"clevel\":3,\"shuffle\":1}}}";
    nds_array *a;
    if (nds_array_open(&a, spec, NULL) != 0)
        return fail("create");
    uint64_t shape[2] = {ROWS, COLS};
    nds_box box;
    if (nds_box_parse(&box, "[5:37, 3:29]", 2, shape) != 0)
        return fail("region");
    uint64_t n = nds_box_count(&box);
    uint32_t *in = malloc(n * sizeof *in), *out = malloc(n * sizeof *out);
    if (!in || !out)
        return 1;
    for (uint64_t i = 0; i < n; i++)
        in[i] = (uint32_t)(i * 2654435761u);
    if (nds_array_write(a, &box, in, NULL) != 0)
        return fail("write");
    if (nds_array_read(a, &box, out, NULL) != 0)
        return fail("read");
    uint32_t corner;
    nds_box first;
    if (nds_box_parse(&first, "[0:1, 0:1]", 2, shape) != 0 || nds_array_read(a, &first, &corner, NULL) != 0)
        return fail("read outside the region");
    for (uint64_t i = 0; i < n; i++)
        if (out[i] != in[i]) {
            fprintf(stderr, "consumer: element %" PRIu64 " is %" PRIu32 ", wrote %" PRIu32 "\n", i,
                    out[i], in[i]);
            return 1;
        }
    if (corner != 0) {
        fprintf(stderr, "consumer: an unwritten element reads %" PRIu32 ", not the fill value 0\n", corner);
        return 1;
    }
    nds_array_free(a);
    free(in);
    free(out);
    printf("OK %s\n", nds_version());
    return 0;
}
