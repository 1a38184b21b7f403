/* A tiny .npy reader for tests: NumPy format versions 1-3, simple (non-structured) dtypes. */
#ifndef NDS_TEST_SUPPORT_NPY_H
#define NDS_TEST_SUPPORT_NPY_H

#include <stddef.h>
#include <stdint.h>
#include "ndstore/box.h"

/** A loaded array: data converted to C order and host byte order. */
typedef struct nds_test_npy {
    char descr[32]; /**< NumPy dtype string as stored ("<i2", ">f4", "|b1", "<U7") */
    size_t rank;
    uint64_t shape[NDS_MAX_RANK];
    size_t itemsize; /**< bytes per element, from descr */
    uint8_t *data;   /**< malloc'd, count x itemsize bytes */
    size_t count;    /**< number of elements */
} nds_test_npy;

/** Loads path. @return 0, or -1 with a reason in why (cap bytes) */
int nds_test_npy_load(const char *path, nds_test_npy *out, char *why, size_t cap);
/** Frees the data. Accepts a zeroed struct. */
void nds_test_npy_free(nds_test_npy *n);

#endif
