/* ndstore: chunked N-dimensional array storage. Umbrella header: include this one. */
#ifndef NDSTORE_NDSTORE_H
#define NDSTORE_NDSTORE_H
#include "ndstore/version.h"
#include "ndstore/errors.h"
#include "ndstore/dtype.h"
#include "ndstore/box.h"
#include "ndstore/context.h"
#include "ndstore/kvstore.h"
#include "ndstore/versioned.h"
#include "ndstore/txn.h"
#include "ndstore/array.h"
#include "ndstore/checkpoint.h"
#endif
