/* What the array engine knows of transactions (lib/txn.c). */
#ifndef NDS_INTERNAL_TXN_H
#define NDS_INTERNAL_TXN_H

#include <stdbool.h>
#include "ndstore/txn.h"
#include "ndstore/box.h"

struct nds_array;

/** One staged chunk: the written elements (canonical layout) and a byte per element, 1 = written.
 */
typedef struct nds_txn_chunk {
    struct nds_array *a;
    uint64_t cell[NDS_MAX_RANK];
    char *key;
    uint8_t *data;
    uint8_t *mask;
    struct nds_txn_chunk *next; /* hash chain */
} nds_txn_chunk;

/** NDS_EPOISONED (with a message) unless t is open. */
int nds_txn_check_open(const nds_txn *t);
/** The staged chunk for (a, key), created (zeroed mask) when create is set; NULL when absent or on
 *  error (*rc set; a limit error poisons the transaction). Internally synchronised. */
nds_txn_chunk *nds_txn_chunk_get(nds_txn *t, struct nds_array *a, const uint64_t *cell,
                                 const char *key, bool create, int *rc);
/** Whether t stages anything for array a (reads then use whole storage chunks, to overlay them). */
bool nds_txn_touches(nds_txn *t, const struct nds_array *a);
/** Copies the staged elements of c over chunk (canonical layout). */
void nds_txn_overlay(const nds_txn_chunk *c, uint8_t *chunk, size_t elems, size_t elem);
/** Marks t poisoned after a failed staging call. */
void nds_txn_poison(nds_txn *t);

#endif
