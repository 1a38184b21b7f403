/* Per-thread scratch buffers (internal/scratch.h): reused across calls on a thread, freed when the
 * thread exits. A file of its own below format_util.c, pool.c and codec_decode.c, which all use it,
 * so none of them needs another (no call cycle between files). */
#include <pthread.h>
#include <stdlib.h>

#include "internal/error.h"
#include "internal/scratch.h"

#define SCRATCH_KEEP ((size_t)64 << 20)

/* Scratch buffers live in thread-specific storage whose destructor frees them when a thread exits,
 * so the workers of a freed context give their memory back (a plain _Thread_local would leak it).
 */
typedef struct scratch_set {
    nds_buf slot[NDS_SCRATCH_SLOTS];
} scratch_set;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *p) {
    scratch_set *s = p;
    for (int i = 0; i < NDS_SCRATCH_SLOTS; i++) nds_buf_dispose(&s->slot[i]);
    free(s);
}

static void scratch_key_create(void) { pthread_key_create(&scratch_key, scratch_free); }

static scratch_set *scratch_get(void) {
    pthread_once(&scratch_once, scratch_key_create);
    scratch_set *s = pthread_getspecific(scratch_key);
    if (!s && (s = calloc(1, sizeof *s)) != NULL && pthread_setspecific(scratch_key, s) != 0) {
        free(s);
        s = NULL;
    }
    return s;
}

nds_buf *nds_scratch_buf(int slot) {
    scratch_set *s = scratch_get();
    return s ? &s->slot[slot] : NULL;
}

uint8_t *nds_scratch(int slot, size_t n) {
    nds_buf *b = nds_scratch_buf(slot);
    if (!b) {
        nds_err(NDS_ENOMEM, "out of memory");
        return NULL;
    }
    return nds_buf_reserve(b, n) == 0 ? b->data : NULL;
}

nds_buf *nds_scratch_reserve(int slot, size_t n) {
    return nds_scratch(slot, n ? n : 1) ? nds_scratch_buf(slot) : NULL;
}

void nds_scratch_trim(int slot) {
    nds_buf *b = nds_scratch_buf(slot);
    if (b && b->cap > SCRATCH_KEEP) nds_buf_dispose(b);
}
