/* Array reads: a plan per call, then one pipeline per chunk (internal/read_pipeline.h).
 *
 * The plan says where a chunk's bytes come from and how they are decoded (its stages,
 * lib/read_stages.c), and whether the chunks along the last dimension go through together (a
 * run). Every chunk then runs fetch -> decode -> overlay -> place on the thread pool, each thread
 * holding one chunk (or one run: up to 2 MiB of chunks) at a time. */
#include <stddef.h>
#include <string.h>

#include "internal/array_internal.h"
#include "internal/array_io.h"
#include "internal/context_internal.h"
#include "internal/dtype_util.h"
#include "internal/error.h"
#include "internal/format_util.h"
#include "internal/kvstore_internal.h"
#include "internal/read_pipeline.h"
#include "internal/txn_internal.h"

static const char *const PLAN_NAMES[NDS_READ_PLAN_COUNT] = {
    "auto", "stored", "decode", "whole", "cached", "grid",
};

const char *nds_read_plan_name(nds_read_plan plan) {
    return plan < NDS_READ_PLAN_COUNT ? PLAN_NAMES[plan] : "unknown";
}

/* A call's plan: the stages every chunk runs, and how many chunks along the last dimension one
 * task takes (1: chunk by chunk). */
typedef struct read_call {
    io_call io;
    const read_stages *stages;
    size_t run;
} read_call;

/* ---- one chunk ---- */

/* Reads through a transaction see its staged elements over the stored chunk (the WHOLE plan: the
 * job holds the whole chunk decoded, or nothing when it is missing). */
static int overlay_staged(read_job *j) {
    io_call *c = j->c;
    nds_array *a = c->a;
    int rc = 0;
    nds_txn_chunk *staged = nds_txn_chunk_get(c->txn, a, j->cell, j->key, false, &rc);
    if (rc || !staged) return rc;
    if (j->missing) {
        if (!j->chunk && !(j->chunk = nds_scratch(NDS_SCRATCH_CHUNK, c->grid_bytes)))
            return nds_err(NDS_ENOMEM, "out of memory");
        nds_fill_elements(j->chunk, a->chunk_elems, a->elem, a->meta.fill_value);
    }
    nds_txn_overlay(staged, j->chunk, a->chunk_elems, a->elem);
    j->missing = false;
    j->from = j->chunk + sel_chunk_offset(c, &j->s);
    j->from_stride = c->chunk_stride;
    return 0;
}

/* Sets up job j for grid index i of the call; false when the call selects nothing there. */
static bool job_init(read_job *j, read_call *rc, size_t i, uint8_t *chunk, bool alone) {
    io_call *c = &rc->io;
    memset(j, 0, offsetof(read_job, url));
    j->c = c;
    j->chunk = chunk;
    j->alone = alone;
    grid_cell(&c->grid, i, j->cell);
    return select_in_chunk(&c->a->meta, c->grid_shape, c->box, j->cell, &j->s);
}

/* Fetch, decode and overlay: afterwards the job's selection is placed, missing, or a view. */
static int job_load(read_job *j, const read_stages *st) {
    int rc = st->fetch(j);
    if (!rc && !j->placed && !j->missing) rc = st->decode(j);
    if (!rc && j->c->txn) rc = overlay_staged(j);
    return rc;
}

static void job_place(const read_job *j) {
    if (j->missing)
        read_place_fill(j->c, &j->s);
    else if (!j->placed)
        read_place_view(j);
}

static int read_one(read_call *rc, size_t i) {
    read_job j;
    if (!job_init(&j, rc, i, NULL, true)) return 0;
    int err = job_load(&j, rc->stages);
    if (!err) job_place(&j);
    rc->stages->finish(&j, err);
    nds_scratch_trim(NDS_SCRATCH_CHUNK); /* do not pin huge chunks per thread */
    return err;
}

/* ---- runs of chunks along the last dimension ---- */

/* A task decodes at most this many chunks at once, and at most RUN_BUDGET bytes of them. Runs of
 * two 4 MiB chunks measured 1.04x (zstd, gzip) to 1.19x (blosc) faster, at 8 MiB more per thread:
 * not taken, to keep a read within its memory bound of (cores x 2) chunks. */
#define RUN_MAX 8
#define RUN_BUDGET ((size_t)2 << 20)

/* Loads the chunks of run t into consecutive chunk buffers, then copies their views out one
 * output row at a time. A chunk missing (or placed by its stage) is left out of the copy. */
static int read_run(read_call *rc, size_t t) {
    io_call *c = &rc->io;
    size_t n = rc->run, pieces = 0, last = c->a->meta.rank - 1;
    size_t slot = c->grid_bytes + READ_SLACK;
    uint8_t *chunks = nds_scratch(NDS_SCRATCH_CHUNK, n * slot);
    if (!chunks) return nds_err(NDS_ENOMEM, "out of memory");
    read_job jobs[RUN_MAX];
    bool used[RUN_MAX] = {false};
    uint8_t *dst[RUN_MAX];
    const uint8_t *src[RUN_MAX];
    size_t row_bytes[RUN_MAX];
    const read_job *shape = NULL;
    int err = 0;
    for (size_t k = 0; k < n && !err; k++) {
        read_job *j = &jobs[k];
        if (!(used[k] = job_init(j, rc, t * n + k, chunks + k * slot, false))) continue;
        if ((err = job_load(j, rc->stages)) || j->missing || j->placed) {
            if (!err) job_place(j);
            continue;
        }
        shape = j;
        dst[pieces] = sel_buffer(c, &j->s);
        src[pieces] = j->from;
        row_bytes[pieces++] = j->s.extent[last] * c->a->elem;
    }
    /* The runs' views share the chunk layout (in a run no stage reads by planes), so one stride
     * serves them all. */
    if (!err && pieces) {
        nds_strided_layout outer = {last, shape->s.extent, c->buf_stride, shape->from_stride};
        nds_strided_copy_rows(&outer, pieces, dst, src, row_bytes, c->stream);
    }
    for (size_t k = 0; k < n; k++)
        if (used[k]) rc->stages->finish(&jobs[k], err);
    nds_scratch_trim(NDS_SCRATCH_CHUNK);
    return err;
}

static int read_task(void *ctx, size_t i) {
    read_call *rc = ctx;
    return rc->run > 1 ? read_run(rc, i) : read_one(rc, i);
}

/* ---- the plan ---- */

/* How many chunks along the last dimension one task takes when runs are possible: all those the
 * box spans there (2 to RUN_MAX of them), else 1. A chunk's rows land in the output as pieces of
 * longer rows (a 64^3 uint16 chunk of a 256-wide array: 4096 rows of 128 bytes, a quarter of an
 * output row each); a task that decodes them all writes whole output rows one after the other:
 * measured 1.1x (zstd) to 1.26x (blosc) faster full reads than chunk after chunk (runs that
 * cover part of the rows measured no faster: docs/performance.md). */
static size_t run_span(const io_call *c) {
    size_t last = c->a->meta.rank - 1;
    if (c->a->meta.rank < 2 || c->box->step[last] != 1) return 1;
    uint64_t k = c->grid.count[last];
    return k >= 2 && k <= RUN_MAX ? (size_t)k : 1;
}

/* Whether the box holds whole chunk planes (every dimension after the first covered from chunk
 * edge to chunk edge, or to the array's end): then no chunk is better read by planes. */
static bool box_holds_whole_planes(const io_call *c) {
    const nds_array *a = c->a;
    for (size_t d = 1; d < a->meta.rank; d++) {
        uint64_t g = c->grid_shape[d];
        if (c->box->step[d] != 1 || c->box->start[d] % g != 0 ||
            (c->box->stop[d] % g != 0 && c->box->stop[d] != a->meta.shape[d]))
            return false;
    }
    return true;
}

/* The run the call chooses: for plans that bring chunks into buffers of their own (not the
 * cache's entries; stored chunks only where the box holds whole planes of them: a run reads
 * each chunk's span, where a region's corner of a chunk is read by planes for fewer bytes,
 * measured 25 % faster), within the memory allowed per task, and when the runs leave work for
 * every thread. */
static size_t run_auto(const io_call *c, nds_read_plan plan, size_t threads) {
    bool stored = plan == NDS_READ_PLAN_STORED && box_holds_whole_planes(c);
    if (plan != NDS_READ_PLAN_DECODE && plan != NDS_READ_PLAN_GRID && !stored) return 1;
    size_t k = run_span(c);
    if (k < 2 || k * c->grid_bytes > RUN_BUDGET) return 1;
    return c->grid.total / k >= 4 * threads ? k : 1;
}

/* The plan a call chooses: a transaction's staged elements need whole chunks; a format with a read
 * grid reads its inner chunks; canonical chunks are copied from the store (also past a cache,
 * when the store is local: a cached canonical chunk saves only a read from the page cache, and
 * filling the cache costs a copy of the whole chunk); else through the cache when there is one,
 * else decoded as each selection needs. */
static nds_read_plan plan_auto(const io_call *c) {
    const nds_array *a = c->a;
    bool cache = nds_context_cache(a->ctx) != NULL;
    if (c->txn) return NDS_READ_PLAN_WHOLE;
    if (c->grid_shape == a->meta.read_chunk_shape) return NDS_READ_PLAN_GRID;
    if (a->meta.stored_canonical &&
        (!cache || (nds_kvstore_capabilities(a->kv) & NDS_KV_CAP_LOCAL)))
        return NDS_READ_PLAN_STORED;
    return cache ? NDS_READ_PLAN_CACHED : NDS_READ_PLAN_DECODE;
}

/* Why a forced plan cannot read this call, or NULL when it can. */
static const char *plan_refusal(const io_call *c, nds_read_plan plan) {
    const nds_array *a = c->a;
    bool grid = c->grid_shape == a->meta.read_chunk_shape;
    if (c->txn && plan != NDS_READ_PLAN_WHOLE)
        return "only the whole plan overlays a transaction's staged chunks";
    /* Forced plans other than the grid's iterate the storage grid (nds_array_read_with_plan). */
    if (plan == NDS_READ_PLAN_GRID) return grid ? NULL : "the format has no read grid";
    if (plan == NDS_READ_PLAN_STORED && !a->meta.stored_canonical)
        return "the chunks are not stored canonically";
    if (plan == NDS_READ_PLAN_CACHED && !nds_context_cache(a->ctx))
        return "the context has no cache";
    return NULL;
}

static int plan_call(read_call *rc, nds_read_plan plan, nds_read_runs runs, size_t threads) {
    io_call *c = &rc->io;
    nds_read_plan chosen = plan == NDS_READ_PLAN_AUTO ? plan_auto(c) : plan;
    const char *why = plan_refusal(c, chosen);
    if (why)
        return nds_err(NDS_EUNSUPPORTED, "read of %s: plan %s: %s", nds_kvstore_url(c->a->kv),
                       nds_read_plan_name(chosen), why);
    rc->stages = read_stages_of(chosen);
    rc->run = runs == NDS_READ_RUNS_AUTO ? run_auto(c, chosen, threads)
              : runs == NDS_READ_RUNS_ON && chosen != NDS_READ_PLAN_CACHED ? run_span(c)
                                                                            : 1;
    return 0;
}

/* The threads a call runs on: the options', else the context's for local stores (0: the pool's). */
static size_t read_threads(const nds_array *a, const nds_io_options *opts) {
    size_t threads = call_threads(opts);
    if (threads == 0 && (nds_kvstore_capabilities(a->kv) & NDS_KV_CAP_LOCAL))
        threads = (size_t)nds_context_local_read_threads(a->ctx);
    return threads;
}

int nds_array_read_with_plan(nds_array *a, const nds_box *box, void *out,
                             const nds_io_options *opts, nds_read_plan plan, nds_read_runs runs) {
    if (nds_dtype_is_vlen(a->meta.dtype)) return nds_array_vlen_refusal(a, "read of");
    pthread_rwlock_rdlock(&a->meta_lock);
    nds_txn *txn = call_txn(a, opts);
    /* Staged chunks are whole storage chunks: overlaying them needs the storage grid. */
    bool staged = txn && nds_txn_touches(txn, a);
    bool fine = a->read_chunk_bytes != 0 && !staged &&
                (plan == NDS_READ_PLAN_AUTO || plan == NDS_READ_PLAN_GRID);
    read_call rc;
    int err = io_call_init(&rc.io, a, box, out, fine, "read of");
    if (!err && txn) err = nds_txn_check_open(txn);
    size_t threads = read_threads(a, opts);
    if (!err) {
        rc.io.txn = staged ? txn : NULL;
        rc.io.stream = nds_box_count(box) * a->elem >= nds_stream_threshold();
        err = plan_call(&rc, plan, runs, threads ? threads : (size_t)nds_context_threads(a->ctx));
    }
    if (!err)
        err = nds_pool_for_budget(nds_context_pool(a->ctx), nds_context_budget(a->ctx),
                                  rc.io.grid_bytes * (rc.run + 1), rc.io.grid.total / rc.run,
                                  threads, read_task, &rc);
    pthread_rwlock_unlock(&a->meta_lock);
    return err;
}

int nds_array_read(nds_array *a, const nds_box *box, void *out, const nds_io_options *opts) {
    return nds_array_read_with_plan(a, box, out, opts, NDS_READ_PLAN_AUTO, NDS_READ_RUNS_AUTO);
}
