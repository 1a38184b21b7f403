/* Reusable per-thread read buffers: see file_readbuf.h. */
#include "file_readbuf.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "ndstore/sys/kv_driver.h"

/* A thread's buffer. Only its thread lends it (IDLE -> LENT); a release gives it back
 * (LENT -> IDLE); the thread's exit frees it when IDLE, else marks it ORPHANED so that the release
 * frees it. */
typedef struct readbuf {
    atomic_int state;
    uint8_t *data;
    size_t cap;
} readbuf;

enum { BUF_IDLE, BUF_LENT, BUF_ORPHANED };

static pthread_key_t g_key;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_key_ok;

static void readbuf_free(readbuf *b) {
    free(b->data);
    free(b);
}

static void thread_exit(void *p) {
    readbuf *b = p;
    for (;;) {
        int s = atomic_load(&b->state);
        if (s == BUF_IDLE) { /* nobody else can lend it: this thread was the only lender */
            readbuf_free(b);
            return;
        }
        if (atomic_compare_exchange_weak(&b->state, &s, BUF_ORPHANED)) return;
    }
}

static void make_key(void) { g_key_ok = pthread_key_create(&g_key, thread_exit) == 0; }

static void release_lent(void *ctx, const uint8_t *data) {
    (void)data;
    readbuf *b = ctx;
    int lent = BUF_LENT;
    if (!atomic_compare_exchange_strong(&b->state, &lent, BUF_IDLE)) readbuf_free(b); /* orphaned */
}

/* Capacity for len: a quarter of its power of two, rounded up, so values a few percent apart
 * share one size and the buffer is seldom regrown. */
static size_t capacity_for(size_t len) {
    if (len <= 65536) return 65536;
    size_t p = (size_t)1 << (63 - __builtin_clzll((unsigned long long)len)), step = p / 4;
    return (len + step - 1) / step * step;
}

/* The calling thread's buffer, free and at least len bytes, or NULL. */
static readbuf *thread_buffer(size_t len) {
    pthread_once(&g_once, make_key);
    if (!g_key_ok || len > NDS_FILE_READBUF_MAX) return NULL;
    readbuf *b = pthread_getspecific(g_key);
    if (!b) {
        if (!(b = calloc(1, sizeof *b))) return NULL;
        atomic_init(&b->state, BUF_IDLE);
        if (pthread_setspecific(g_key, b) != 0) {
            free(b);
            return NULL;
        }
    }
    if (atomic_load(&b->state) != BUF_IDLE) return NULL; /* still holding an earlier value */
    if (!b->data || b->cap < len) {
        size_t cap = capacity_for(len);
        /* Page-aligned: the kernel's copy into a buffer at a page offset of 16 (where malloc puts
         * large blocks) ran at less than half the speed here. */
        uint8_t *p = aligned_alloc(4096, (cap + 4095) / 4096 * 4096);
        if (!p) return NULL;
        free(b->data);
        b->data = p;
        b->cap = cap;
    }
    return b;
}

uint8_t *nds_file_readbuf_take(size_t len, nds_bytes *out) {
    readbuf *b = thread_buffer(len);
    if (b) {
        atomic_store(&b->state, BUF_LENT);
        *out = (nds_bytes){b->data, len, release_lent, b};
        return b->data;
    }
    uint8_t *p = malloc(len ? len : 1);
    if (p) nds_bytes_take(out, p, len);
    return p;
}
