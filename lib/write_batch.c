/* Staged chunk writes published in batches: see internal/write_batch.h. */
#include <stdint.h>
#include <stdlib.h>

#include "internal/error.h"
#include "internal/kvstore_internal.h"
#include "internal/write_batch.h"

/** One batch: the staged values, their conditions and outcomes, and which chunk each is. */
struct nds_write_batch_part {
    size_t n, bytes;
    nds_kv_staged *staged[NDS_WRITE_BATCH_MAX];
    nds_kv_publish res[NDS_WRITE_BATCH_MAX];
    size_t cell[NDS_WRITE_BATCH_MAX];
};

void nds_write_batch_init(nds_write_batch *b, nds_kvstore *kv, nds_redo_fn redo, void *redo_ctx) {
    b->kv = kv;
    b->max_bytes = nds_kvstore_capabilities(kv) & NDS_KV_CAP_STAGES_IN_MEMORY
                       ? NDS_WRITE_BATCH_BYTES
                       : SIZE_MAX;
    pthread_mutex_init(&b->mu, NULL);
    b->filling = NULL;
    b->redo = redo;
    b->redo_ctx = redo_ctx;
}

/* Publishes a full (or last) part and frees it; conflicted chunks are written again one by one.
 * Runs on the caller's thread with no chunk lock held (redo takes one). */
static int publish_part(nds_write_batch *b, nds_write_batch_part *p) {
    int rc = nds_kvstore_publish(b->kv, p->staged, p->res, p->n);
    for (size_t i = 0; i < p->n; i++) {
        if (p->res[i].status == NDS_ECONFLICT && rc == 0)
            rc = b->redo(b->redo_ctx, p->cell[i]);
    }
    free(p);
    return rc;
}

int nds_write_batch_add(nds_write_batch *b, nds_kv_staged *staged, size_t bytes,
                        const nds_generation *if_equal, size_t cell_index) {
    nds_write_batch_part *full = NULL;
    pthread_mutex_lock(&b->mu);
    if (!b->filling && !(b->filling = calloc(1, sizeof *b->filling))) {
        pthread_mutex_unlock(&b->mu);
        nds_kvstore_discard(b->kv, staged);
        return nds_err(NDS_ENOMEM, "out of memory staging a write");
    }
    nds_write_batch_part *p = b->filling;
    p->staged[p->n] = staged;
    p->res[p->n].if_equal = *if_equal;
    p->cell[p->n] = cell_index;
    p->bytes += bytes;
    if (++p->n == NDS_WRITE_BATCH_MAX || p->bytes >= b->max_bytes) {
        full = p;
        b->filling = NULL;
    }
    pthread_mutex_unlock(&b->mu);
    return full ? publish_part(b, full) : 0;
}

int nds_write_batch_finish(nds_write_batch *b) {
    nds_write_batch_part *p = b->filling;
    b->filling = NULL;
    return p ? publish_part(b, p) : 0;
}

void nds_write_batch_dispose(nds_write_batch *b) {
    nds_write_batch_part *p = b->filling;
    for (size_t i = 0; p && i < p->n; i++) nds_kvstore_discard(b->kv, p->staged[i]);
    free(p);
    b->filling = NULL;
    pthread_mutex_destroy(&b->mu);
}
