/* What the array engine knows of transactions (lib/txn.c). */
#ifndef NDS_INTERNAL_TXN_H
#define NDS_INTERNAL_TXN_H

#include <stdbool.h>
#include "ndstore/txn.h"
#include "ndstore/box.h"
#include "ndstore/kvstore.h"

struct nds_array;

/** One staged chunk: the written elements (canonical layout) and a byte per element, 1 = written;
 *  or, staged by reference (nds_array_write_ref), every element in the caller's memory. */
typedef struct nds_txn_chunk {
    struct nds_array *a;
    uint64_t cell[NDS_MAX_RANK];
    char *key;
    uint8_t *data;
    uint8_t *mask;
    const uint8_t *ref; /* every element, borrowed from the caller (data and mask NULL), or NULL */
    struct nds_txn_chunk *next; /* hash chain */
} nds_txn_chunk;

/** NDS_EPOISONED (with a message) unless t is open. */
int nds_txn_check_open(const nds_txn *t);
/** The staged chunk for (a, key), created (zeroed mask) when create is set; NULL when absent or on
 *  error (*rc set; a limit error poisons the transaction). With create, a chunk staged by reference
 *  becomes a copy (data + mask) that the caller may write into. Internally synchronised. */
nds_txn_chunk *nds_txn_chunk_get(nds_txn *t, struct nds_array *a, const uint64_t *cell,
                                 const char *key, bool create, int *rc);
/** Stages every element of chunk (a, key) by reference: elements (canonical layout) stay the
 *  caller's, valid and unchanged until t ends; whatever was staged for the chunk is dropped. */
int nds_txn_stage_ref(nds_txn *t, struct nds_array *a, const uint64_t *cell, const char *key,
                      const uint8_t *elements);
/** Whether t stages anything for array a (reads then use whole storage chunks, to overlay them). */
bool nds_txn_touches(nds_txn *t, const struct nds_array *a);
/** Copies the staged elements of c over chunk (canonical layout). */
void nds_txn_overlay(const nds_txn_chunk *c, uint8_t *chunk, size_t elems, size_t elem);
/** A raw key's staged value: len bytes at data (copied), or a delete. */
typedef struct nds_txn_value {
    const void *data;
    size_t len;
    bool deleted;
} nds_txn_value;
/** Stages a raw key write (or delete) of kv + key; if_equal (may be NULL) is the condition the commit
 *  re-checks on the store; *staged (may be NULL) gets the generation reads inside the transaction see. */
int nds_txn_stage_key(nds_txn *t, nds_kvstore *kv, const char *key, const nds_txn_value *value,
                      const nds_generation *if_equal, nds_generation *staged);
/** Looks up the staged raw key kv + key: *found, and if so *deleted, *gen and (value may be NULL) a copy
 *  of its bytes. */
int nds_txn_key_lookup(nds_txn *t, nds_kvstore *kv, const char *key, bool *found, nds_bytes *value,
                       bool *deleted, nds_generation *gen);
/** Calls fn for each staged, not deleted raw key of kv starting with prefix (key relative to kv). */
int nds_txn_key_each(nds_txn *t, nds_kvstore *kv, const char *prefix, nds_list_fn fn, void *ctx);
/** A kvstore handle whose reads see t's staged keys and whose writes are staged in t (conditions checked
 *  against the store at once, and again at commit). base stays referenced. */
int nds_txn_kvstore(nds_kvstore **out, nds_txn *t, nds_kvstore *base);
/** Whether t's commit is running (staging handles then read and write the store itself). */
bool nds_txn_committing(nds_txn *t);
/** Marks t poisoned after a failed staging call. */
void nds_txn_poison(nds_txn *t);

#endif
