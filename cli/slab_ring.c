/* Two slab buffers shared by the command's thread and one I/O thread, so that a streamed read
 * writes slab k to its output while the library reads slab k+1, and a streamed write reads slab
 * k+1 from its input while the library writes slab k. Each side walks its own copy of the tiler
 * (the tiles are the same sequence), so buffers go 0, 1, 0, 1, ... and each carries the tile's
 * byte count without a queue. A side that fails stops the other at its next wait.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"

typedef struct cli_ring {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint8_t *buf[2];
    bool full[2];    /* filled by the producer, not yet drained */
    bool stop;       /* a side failed (or the command gave up): the other stops */
    int io_rc;       /* the I/O side's status (CLI_OK, or CLI_FAIL with its message printed) */
    bool io_fills;   /* the I/O side produces (a write's input) rather than consumes */
    cli_tiler tiler; /* the I/O side's copy */
    size_t elem;
    cli_ring_io io;
    void *arg;
    unsigned next_main, next_io;
} cli_ring;

/* Waits until buffer i is in the state a side needs (full for a consumer); false when stopped. */
static bool wait_for(cli_ring *r, unsigned i, bool want_full) {
    pthread_mutex_lock(&r->mu);
    while (!r->stop && r->full[i] != want_full) pthread_cond_wait(&r->cv, &r->mu);
    bool ok = !r->stop;
    pthread_mutex_unlock(&r->mu);
    return ok;
}

static void set_full(cli_ring *r, unsigned i, bool full) {
    pthread_mutex_lock(&r->mu);
    r->full[i] = full;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static void stop(cli_ring *r) {
    pthread_mutex_lock(&r->mu);
    r->stop = true;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static void *io_main(void *p) {
    cli_ring *r = p;
    nds_box sub;
    uint64_t n;
    while (cli_tiler_next(&r->tiler, &sub, &n)) {
        unsigned i = r->next_io++ & 1;
        if (!wait_for(r, i, !r->io_fills)) return NULL;
        r->io_rc = r->io(r->arg, r->buf[i], n * r->elem);
        if (r->io_rc != CLI_OK) {
            stop(r);
            return NULL;
        }
        set_full(r, i, r->io_fills);
    }
    return NULL;
}

/* Starts the I/O thread with its own copy of t (not yet advanced); io_fills: io produces slabs. */
static int cli_ring_start(cli_ring **out, const cli_tiler *t, size_t elem, bool io_fills,
                          cli_ring_io io, void *arg) {
    cli_ring *r = calloc(1, sizeof *r);
    if (!r) return cli_fail("out of memory");
    r->tiler = *t;
    r->elem = elem;
    r->io_fills = io_fills;
    r->io = io;
    r->arg = arg;
    r->buf[0] = cli_slab_alloc(t->max_tile_bytes);
    r->buf[1] = cli_slab_alloc(t->max_tile_bytes);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    if (!r->buf[0] || !r->buf[1] || pthread_create(&r->thread, NULL, io_main, r) != 0) {
        free(r->buf[0]);
        free(r->buf[1]);
        free(r);
        return cli_fail("out of memory (two slabs of %llu bytes)",
                        (unsigned long long)t->max_tile_bytes);
    }
    *out = r;
    return CLI_OK;
}

/* The buffer for the command's next tile (free to fill, or filled by io); NULL once io failed. */
static uint8_t *cli_ring_take(cli_ring *r) {
    unsigned i = r->next_main & 1;
    return wait_for(r, i, r->io_fills) ? r->buf[i] : NULL;
}

/* Hands the buffer taken last to the other side. */
static void cli_ring_give(cli_ring *r) {
    unsigned i = r->next_main++ & 1;
    set_full(r, i, !r->io_fills);
}

/* Stops (failed: at once; else after the last tile), frees; the I/O side's status. */
static int cli_ring_finish(cli_ring *r, bool failed) {
    if (failed) stop(r);
    pthread_join(r->thread, NULL);
    int rc = r->io_rc;
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r->buf[0]);
    free(r->buf[1]);
    free(r);
    return rc;
}

int cli_stream_slabs(const cli_tiler *t, size_t elem, const cli_stream_sides *sides,
                     const char *label, uint64_t bytes) {
    cli_ring *ring = NULL;
    int rc = cli_ring_start(&ring, t, elem, sides->io_fills, sides->io, sides->io_arg);
    if (rc != CLI_OK) return rc;
    cli_tiler mine = *t;
    cli_progress bar;
    cli_progress_begin(&bar, label, bytes);
    nds_box sub;
    uint64_t n, done = 0;
    while (rc == CLI_OK && cli_tiler_next(&mine, &sub, &n)) {
        uint8_t *buf = cli_ring_take(ring);
        if (!buf) break; /* the I/O side failed: its message is printed */
        rc = sides->op(sides->op_arg, &sub, buf);
        if (rc == CLI_OK) cli_ring_give(ring);
        done += n * elem;
        cli_progress_update(&bar, done);
    }
    int io_rc = cli_ring_finish(ring, rc != CLI_OK);
    cli_progress_end(&bar);
    return rc != CLI_OK ? rc : io_rc;
}
