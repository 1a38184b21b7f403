/* Boxes split into tiles for streaming (cli_tiler: read, write, cp, downsample) and the slabs'
 * buffers (cli_slab_alloc). Pure arithmetic on boxes: uses no other file of the command line.
 *
 * Threading: one tiler per thread; nothing shared.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "cli.h"

static uint64_t min_u64(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* Bytes of a tile split at dimension d with one unit there; UINT64_MAX on overflow. */
static uint64_t tile_bytes_at(const cli_tiler *t, size_t d, size_t elem, const uint64_t *u) {
    uint64_t b = elem;
    for (size_t i = 0; i < t->box.rank; i++) {
        uint64_t e = i <= d ? min_u64(u[i], t->ext[i]) : t->ext[i];
        if (__builtin_mul_overflow(b, e, &b))
            return UINT64_MAX;
    }
    return b;
}

void cli_tiler_init(cli_tiler *t, const nds_box *box, size_t elem, uint64_t budget, const uint64_t *units) {
    memset(t, 0, sizeof *t);
    t->box = *box;
    uint64_t ones[NDS_MAX_RANK], u[NDS_MAX_RANK];
    size_t rank = box->rank;
    for (size_t d = 0; d < rank; d++) {
        ones[d] = 1;
        t->ext[d] = nds_box_extent(box, d);
        if (t->ext[d] == 0)
            t->done = true;
    }
    memcpy(u, units ? units : ones, rank * sizeof u[0]);
    for (size_t d = 0; d < rank; d++)
        if (u[d] == 0)
            u[d] = 1;
    if (rank == 0 || t->done) {
        t->max_tile_bytes = t->done ? 0 : elem;
        return;
    }
    /* The outermost split whose one-unit tile fits the budget; else single units everywhere. */
    size_t d = 0;
    uint64_t unit_bytes = tile_bytes_at(t, 0, elem, u);
    while (unit_bytes > budget && d + 1 < rank)
        unit_bytes = tile_bytes_at(t, ++d, elem, u);
    t->split = d;
    for (size_t i = 0; i < rank; i++)
        t->tile[i] = i < d ? min_u64(u[i], t->ext[i]) : t->ext[i];
    uint64_t aim = min_u64(budget, CLI_SLAB_TARGET);
    uint64_t k = unit_bytes <= aim ? aim / unit_bytes : 1;
    uint64_t span;
    if (k == 0 || __builtin_mul_overflow(k, u[d], &span) || span > t->ext[d])
        span = t->ext[d];
    t->tile[d] = span < 1 ? 1 : span;
    /* At most the budget, or one unit when even that is larger; saturates (and then fails to allocate)
     * only for a unit beyond 2^64 bytes. */
    t->max_tile_bytes = elem;
    for (size_t i = 0; i < rank; i++)
        if (__builtin_mul_overflow(t->max_tile_bytes, t->tile[i], &t->max_tile_bytes) ||
            t->max_tile_bytes > SIZE_MAX)
            t->max_tile_bytes = UINT64_MAX;
}

void cli_stream_tiler_init(cli_tiler *t, const nds_box *box, size_t elem, uint64_t budget,
                           const uint64_t *chunks) {
    uint64_t units[NDS_MAX_RANK];
    for (size_t d = 0; d < box->rank; d++)
        units[d] = 1; /* whole tiles after the split: their data concatenated is the box's */
    if (box->rank > 0 && box->step[0] == 1) {
        /* Rows of chunks only while one fits the budget: a split further in takes single
         * indices before it, or the tiles' data would not concatenate to the box's. */
        units[0] = chunks[0];
        cli_tiler_init(t, box, elem, budget, units);
        if (t->split == 0 || t->done)
            return;
        units[0] = 1;
    }
    cli_tiler_init(t, box, elem, budget, units);
}

void *cli_slab_alloc(uint64_t bytes) {
    const size_t huge = (size_t)2 << 20;
    if (bytes > SIZE_MAX - huge)
        return NULL;
    if (bytes < 2 * huge)
        return malloc(bytes ? bytes : 1);
    void *p = NULL;
    size_t n = (bytes + huge - 1) / huge * huge;
    if (posix_memalign(&p, huge, n) != 0)
        return NULL;
    (void)madvise(p, n, MADV_HUGEPAGE); /* advice only: without THP the slab still works */
    return p;
}

bool cli_tiler_next(cli_tiler *t, nds_box *sub, uint64_t *count) {
    if (t->done)
        return false;
    *sub = t->box;
    uint64_t c = 1;
    for (size_t d = 0; d < t->box.rank; d++) {
        uint64_t first = t->pos[d];
        uint64_t last = first + t->tile[d] < t->ext[d] ? first + t->tile[d] : t->ext[d];
        sub->start[d] = t->box.start[d] + first * t->box.step[d];
        sub->stop[d] = t->box.start[d] + (last - 1) * t->box.step[d] + 1;
        c *= last - first;
    }
    *count = c;
    if (t->box.rank == 0) {
        t->done = true;
        return true;
    }
    /* Odometer over dimensions 0..split, innermost fastest. */
    size_t d = t->split + 1;
    while (d-- > 0) {
        t->pos[d] += t->tile[d];
        if (t->pos[d] < t->ext[d])
            return true;
        t->pos[d] = 0;
    }
    t->done = true;
    return true;
}
