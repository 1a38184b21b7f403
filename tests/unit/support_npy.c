/* A tiny .npy reader for tests (NumPy format versions 1-3, simple dtypes). Converts the data to C
 * order and host byte order so tests compare it with what ndstore reads. Not hardened: fixtures
 * only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support_npy.h"

static int fail(char *why, size_t cap, const char *msg, const char *path) {
    snprintf(why, cap, "%s: %s", path, msg);
    return -1;
}

static uint8_t *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = buf ? (size_t)n : 0;
    return buf;
}

/* Parses the header dict ("{'descr': '<i2', 'fortran_order': False, 'shape': (3, 3), }"). */
static int parse_header(const char *h, nds_test_npy *n, int *fortran) {
    const char *d = strstr(h, "'descr': '"), *f = strstr(h, "'fortran_order': "),
               *s = strstr(h, "'shape': (");
    if (!d || !f || !s) return -1;
    d += strlen("'descr': '");
    size_t k = strcspn(d, "'");
    if (k == 0 || k >= sizeof n->descr) return -1;
    memcpy(n->descr, d, k);
    n->descr[k] = 0;
    *fortran = strncmp(f + strlen("'fortran_order': "), "True", 4) == 0;
    s += strlen("'shape': (");
    n->rank = 0;
    while (*s && *s != ')') {
        char *end;
        unsigned long long v = strtoull(s, &end, 10);
        if (end == s || n->rank >= NDS_MAX_RANK) return -1;
        n->shape[n->rank++] = v;
        s = end;
        while (*s == ',' || *s == ' ') s++;
    }
    return *s == ')' ? 0 : -1;
}

/* Element size and byte-order unit of a descr. */
static int descr_sizes(const char *descr, size_t *itemsize, size_t *unit) {
    char kind = descr[1];
    long n = strtol(descr + 2, NULL, 10);
    if (n <= 0) return -1;
    *itemsize = kind == 'U' ? (size_t)n * 4 : (size_t)n;
    *unit = kind == 'c'                  ? *itemsize / 2
            : kind == 'U'                ? 4
            : kind == 'S' || kind == 'b' ? 1
                                         : *itemsize;
    return 0;
}

static void swap_units(uint8_t *p, size_t bytes, size_t unit) {
    for (size_t i = 0; unit > 1 && i + unit <= bytes; i += unit)
        for (size_t a = 0, b = unit - 1; a < b; a++, b--) {
            uint8_t t = p[i + a];
            p[i + a] = p[i + b];
            p[i + b] = t;
        }
}

/* F-order src -> C-order dst, element by element (fixtures are tiny). */
static void f_to_c(const nds_test_npy *n, const uint8_t *src, uint8_t *dst) {
    for (size_t c = 0; c < n->count; c++) {
        size_t rem = c, f = 0, stride = 1, idx[NDS_MAX_RANK];
        for (size_t d = n->rank; d-- > 0;) {
            idx[d] = rem % n->shape[d];
            rem /= n->shape[d];
        }
        for (size_t d = 0; d < n->rank; d++) {
            f += idx[d] * stride;
            stride *= n->shape[d];
        }
        memcpy(dst + c * n->itemsize, src + f * n->itemsize, n->itemsize);
    }
}

int nds_test_npy_load(const char *path, nds_test_npy *n, char *why, size_t cap) {
    memset(n, 0, sizeof *n);
    size_t len;
    uint8_t *b = read_file(path, &len);
    if (!b) return fail(why, cap, "cannot read", path);
    int rc = -1, fortran = 0;
    size_t hlen = 0, start = 0, unit = 1;
    if (len < 10 || memcmp(b, "\x93NUMPY", 6) != 0) goto out;
    hlen = b[6] == 1 ? (size_t)b[8] | (size_t)b[9] << 8
                     : (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
    start = b[6] == 1 ? 10 : 12;
    if (start + hlen > len) goto out;
    char *header = strndup((const char *)b + start, hlen);
    rc = header ? parse_header(header, n, &fortran) : -1;
    free(header);
    if (rc || descr_sizes(n->descr, &n->itemsize, &unit)) goto out;
    n->count = 1;
    for (size_t d = 0; d < n->rank; d++) n->count *= n->shape[d];
    rc = -1;
    if (len - start - hlen != n->count * n->itemsize ||
        !(n->data = malloc(n->count * n->itemsize + 1)))
        goto out;
    const uint8_t *src = b + start + hlen;
    if (fortran)
        f_to_c(n, src, n->data);
    else
        memcpy(n->data, src, n->count * n->itemsize);
    const uint16_t one = 1;
    char host = *(const uint8_t *)&one ? '<' : '>';
    if ((n->descr[0] == '<' || n->descr[0] == '>') && n->descr[0] != host)
        swap_units(n->data, n->count * n->itemsize, unit);
    rc = 0;
out:
    free(b);
    if (rc) {
        nds_test_npy_free(n);
        return fail(why, cap, "not a .npy file this reader understands", path);
    }
    return 0;
}

void nds_test_npy_free(nds_test_npy *n) {
    free(n->data);
    n->data = NULL;
}
