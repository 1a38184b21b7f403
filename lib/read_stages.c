/* The stage implementations of the read plans (internal/read_pipeline.h): how each plan fetches a
 * chunk's bytes and decodes them into a view of the selection. Placing them is the pipeline's
 * (lib/array_read.c, lib/read_place.c). */
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "internal/context_internal.h"
#include "internal/error.h"
#include "internal/format_util.h"
#include "internal/kvstore_internal.h"
#include "internal/read_pipeline.h"

/* ---- shared by the stages ---- */

static int job_key(read_job *j) {
    return nds_array_chunk_key(j->c->a, j->cell, j->key, sizeof j->key);
}

/* The error of a chunk's read or decode, naming the chunk and its store. */
static int chunk_error(const read_job *j, int rc) {
    const nds_array *a = j->c->a;
    return nds_err_prefix(rc, "%s: chunk %s of %s", a->format->name, j->key,
                          nds_kvstore_url(a->kv));
}

/* The error of an uncompressed chunk whose stored size is not the chunk's: found bytes (or, when
 * a ranged read fell short, found or fewer). */
static int wrong_size(const read_job *j, uint64_t found, bool or_fewer) {
    const nds_array *a = j->c->a;
    return nds_err(NDS_ECORRUPT, "%s: chunk %s of %s: expected %zu bytes, found %llu%s",
                   a->format->name, j->key, nds_kvstore_url(a->kv), a->chunk_bytes,
                   (unsigned long long)found, or_fewer ? " or fewer" : "");
}

/* The job's chunk buffer: its slot of a run, else this thread's scratch; READ_SLACK bytes
 * longer than a chunk (see fetch_span_into). */
static uint8_t *job_chunk(read_job *j) {
    if (!j->chunk) j->chunk = nds_scratch(NDS_SCRATCH_CHUNK, j->c->grid_bytes + READ_SLACK);
    return j->chunk;
}

/* Points the job's view at the selection inside a canonical chunk. */
static void view_chunk(read_job *j, const uint8_t *chunk) {
    j->from = chunk + sel_chunk_offset(j->c, &j->s);
    j->from_stride = j->c->chunk_stride;
}

/* Reads the whole stored value of the chunk (or, with a generation, only when it changed). */
static int fetch_value_if(read_job *j, const nds_generation *if_not_equal) {
    nds_read_options ro = NDS_READ_OPTIONS_INIT;
    if (if_not_equal) ro.if_not_equal = *if_not_equal;
    int rc = nds_kvstore_read(j->c->a->kv, j->key, &ro, &j->r);
    if (rc) return chunk_error(j, rc);
    j->missing = j->r.state == NDS_READ_MISSING;
    return 0;
}

static int fetch_value(read_job *j) {
    int rc = job_key(j);
    return rc ? rc : fetch_value_if(j, NULL);
}

/* A decode has consumed the stored value: it goes back now, not when the job finishes, so that
 * the next chunk of a run reads into the same buffer (the file driver's per-thread buffer is free
 * again; holding a run's values at once faulted a fresh page for every stored byte: issue 17). The
 * result's state and generation stay for finish. */
static int consumed(read_job *j, int rc) {
    nds_read_result_dispose(&j->r);
    return rc;
}

/* Decodes the stored value whole into the job's chunk buffer. */
static int decode_whole(read_job *j) {
    nds_array *a = j->c->a;
    uint8_t *chunk = job_chunk(j);
    if (!chunk) return nds_err(NDS_ENOMEM, "out of memory");
    int rc = consumed(j, nds_format_decode_whole(a->format, a->state, j->cell, j->r.value.data,
                                                 j->r.value.len, chunk, a->chunk_bytes));
    if (rc) return chunk_error(j, rc);
    view_chunk(j, chunk);
    return 0;
}

/* A decode request for bytes [lo, hi) of the job's canonical chunk. */
static nds_decode_request part_request(const read_job *j, uint64_t lo, uint64_t hi) {
    nds_decode_request rq = NDS_DECODE_REQUEST_INIT;
    rq.begin = (size_t)lo;
    rq.end = (size_t)hi;
    rq.cap = j->c->a->chunk_bytes;
    return rq;
}

static void finish_value(read_job *j, int rc) {
    (void)rc;
    nds_read_result_dispose(&j->r);
}

/* ---- STORED: canonical chunks copied from the store ---- */

/* Chunk rows at least this long are read straight into the caller's buffer; shorter ones cost
 * more as scattered reads than one read and a copy. */
#define READ_INTO_MIN_ROW 1024

/* A read by planes must save at least this many bytes over the one span from the selection's
 * first byte to its last, to pay for its system call (measured: one pread costs about what the
 * kernel's copy of 8 KiB does; 64^3 uint16 chunks, whose planes are 8 KiB, gained nothing from
 * it, 128^3 ones 1.27-1.43x); at most RANGES_MAX of them. */
#define RANGE_MIN_SAVING 8192
#define RANGES_MAX 4096

/* The bytes [*lo, *hi) of a canonical chunk that hold the selection: from its first element to
 * its last (the selection's extents step through the chunk with the box's steps). */
static void sel_byte_span(const io_call *c, const chunk_sel *s, uint64_t *lo, uint64_t *hi) {
    int64_t first = sel_chunk_offset(c, s), last = first;
    for (size_t d = 0; d < c->box->rank; d++) last += (int64_t)(s->extent[d] - 1) * c->chunk_stride[d];
    *lo = (uint64_t)first;
    *hi = (uint64_t)last + c->a->elem;
}

/* Whether a whole chunk can be read straight into place (never at rank 0: rows are along the last
 * dimension): every stored byte has its place in the caller's buffer (not an edge chunk, whose
 * stored rows run past the array), a store that reads into buffers cheaply, rows long enough to
 * be worth a scattered read, and starting on cache lines. */
static bool reads_into_place(const read_job *j) {
    const io_call *c = j->c;
    const nds_array *a = c->a;
    return a->meta.rank > 0 && j->s.whole && !chunk_crosses_edge(a, j->cell) &&
           nds_kvstore_can_read_into(a->kv) &&
           a->meta.chunk_shape[a->meta.rank - 1] * a->elem >= READ_INTO_MIN_ROW &&
           read_rows_aligned(c, &j->s);
}

/* The outcome of a read that should have found a whole canonical chunk. */
static int check_canonical_read(read_job *j, int rc) {
    if (rc == NDS_ERANGE || (!rc && j->r.state == NDS_READ_VALUE &&
                             j->r.total_size != j->c->a->chunk_bytes))
        return wrong_size(j, j->r.total_size, false);
    if (rc) return chunk_error(j, rc);
    j->missing = j->r.state != NDS_READ_VALUE;
    return 0;
}

static int fetch_into_place(read_job *j) {
    const nds_array *a = j->c->a;
    size_t rows = a->chunk_elems / a->meta.chunk_shape[a->meta.rank - 1];
    struct iovec *iov = malloc(rows * sizeof *iov);
    if (!iov) return nds_err(NDS_ENOMEM, "out of memory");
    int rc = nds_kvstore_read_into(a->kv, j->key, 0, iov, read_row_places(j->c, &j->s, iov), &j->r);
    free(iov);
    rc = check_canonical_read(j, rc);
    j->placed = !rc && !j->missing;
    return rc;
}

/* Whether reading the selection one plane (its last two dimensions) at a time pays over one
 * span: sets *planes and each plane's span *plane_bytes. */
static bool plane_ranges_pay(const read_job *j, size_t *planes, uint64_t *plane_bytes) {
    const io_call *c = j->c;
    const chunk_sel *s = &j->s;
    size_t rank = c->box->rank;
    if (rank < 3 || !nds_kvstore_can_read_ranges(c->a->kv)) return false;
    uint64_t n = 1, lo, hi;
    for (size_t d = 0; d + 2 < rank; d++) n *= s->extent[d];
    *plane_bytes = (s->extent[rank - 2] - 1) * (uint64_t)c->chunk_stride[rank - 2] +
                   (s->extent[rank - 1] - 1) * (uint64_t)c->chunk_stride[rank - 1] + c->a->elem;
    sel_byte_span(c, s, &lo, &hi);
    *planes = (size_t)n;
    return n > 1 && n <= RANGES_MAX && hi - lo >= n * (*plane_bytes + RANGE_MIN_SAVING);
}

/* Reads the selection's planes into one buffer, one after the other: the stored bytes between
 * planes (rows the selection does not reach) are not read. The view is that buffer. */
static int fetch_planes(read_job *j, size_t planes, uint64_t plane_bytes) {
    const io_call *c = j->c;
    size_t rank = c->box->rank;
    uint8_t *buf = nds_scratch(NDS_SCRATCH_CHUNK, planes * plane_bytes);
    nds_byte_range *ranges = malloc(planes * sizeof *ranges);
    if (!buf || !ranges) {
        free(ranges);
        return nds_err(NDS_ENOMEM, "out of memory");
    }
    uint64_t idx[NDS_MAX_RANK] = {0};
    int64_t off = sel_chunk_offset(c, &j->s);
    for (size_t p = 0; p < planes; p++) { /* odometer over the plane dimensions */
        ranges[p] = (nds_byte_range){(uint64_t)off, plane_bytes, buf + p * plane_bytes};
        for (size_t d = rank - 2; d-- > 0;) {
            off += c->chunk_stride[d];
            if (++idx[d] < j->s.extent[d]) break;
            off -= c->chunk_stride[d] * (int64_t)j->s.extent[d];
            idx[d] = 0;
        }
    }
    /* The driver reports the value's size with a range past its end too. */
    int rc = check_canonical_read(j, nds_kvstore_read_ranges(c->a->kv, j->key, ranges, planes, &j->r));
    free(ranges);
    j->planes = buf;
    j->packed[rank - 1] = c->chunk_stride[rank - 1];
    j->packed[rank - 2] = c->chunk_stride[rank - 2];
    j->packed[rank - 3] = (int64_t)plane_bytes;
    for (size_t d = rank - 3; d-- > 0;) j->packed[d] = j->packed[d + 1] * (int64_t)j->s.extent[d + 1];
    j->from = buf;
    j->from_stride = j->packed;
    return rc;
}

/* Reads the span of stored bytes from the selection's first element to its last (a region
 * straddling chunks needs a fraction of each). */
/* The outcome of a ranged read of the span starting at byte lo of a canonical chunk. */
static int check_span_read(read_job *j, int rc, uint64_t lo) {
    if (rc == NDS_ERANGE) return wrong_size(j, lo, true); /* shorter than the span */
    if (rc) return chunk_error(j, rc);
    j->missing = j->r.state != NDS_READ_VALUE;
    if (!j->missing && j->r.total_size != j->c->a->chunk_bytes)
        return wrong_size(j, j->r.total_size, false);
    return 0;
}

static int fetch_span(read_job *j) {
    uint64_t lo, hi;
    sel_byte_span(j->c, &j->s, &lo, &hi);
    nds_read_options ro = NDS_READ_OPTIONS_INIT;
    ro.byte_start = (int64_t)lo;
    ro.byte_length = (int64_t)(hi - lo);
    int rc = check_span_read(j, nds_kvstore_read(j->c->a->kv, j->key, &ro, &j->r), lo);
    if (!rc && !j->missing && j->r.value.len != hi - lo)
        return wrong_size(j, j->r.total_size, false);
    return rc;
}

/* fetch_span into the job's chunk buffer, from a store that reads into buffers cheaply: the
 * buffer is reused from chunk to chunk (a thread's scratch or its run's slot), where a value the
 * driver allocates would be fresh memory every time (page faults: issue 17). */
static int fetch_span_into(read_job *j) {
    uint64_t lo, hi;
    sel_byte_span(j->c, &j->s, &lo, &hi);
    uint8_t *chunk = job_chunk(j);
    if (!chunk) return nds_err(NDS_ENOMEM, "out of memory");
    /* The kernel copies from the page cache at under half speed into a destination whose offset
     * in a cache line differs from the source's (measured: 2.2 against 6.0-6.8 GB/s): the span
     * goes where its first byte has the offset it has in the file. */
    chunk += ((uintptr_t)lo - (uintptr_t)chunk) & 63;
    struct iovec iov = {chunk, (size_t)(hi - lo)};
    int rc = check_span_read(j, nds_kvstore_read_into(j->c->a->kv, j->key, lo, &iov, 1, &j->r), lo);
    if (rc) return rc;
    j->from = chunk;
    j->from_stride = j->c->chunk_stride;
    return 0;
}

static int fetch_stored(read_job *j) {
    int rc = job_key(j);
    if (rc) return rc;
    if (reads_into_place(j)) return fetch_into_place(j);
    size_t planes;
    uint64_t plane_bytes;
    if (j->alone && plane_ranges_pay(j, &planes, &plane_bytes))
        return fetch_planes(j, planes, plane_bytes);
    return nds_kvstore_can_read_into(j->c->a->kv) ? fetch_span_into(j) : fetch_span(j);
}

/* Stored bytes are canonical: the view is the span read (the reads into a buffer of ours set it
 * when fetched). */
static int decode_stored(read_job *j) {
    if (j->from) return 0;
    j->from = j->r.value.data;
    j->from_stride = j->c->chunk_stride;
    return 0;
}

static void finish_stored(read_job *j, int rc) {
    finish_value(j, rc);
    if (j->planes) nds_scratch_trim(NDS_SCRATCH_CHUNK); /* do not pin large plane buffers */
}

/* ---- DECODE: as much as the selection needs ---- */

/* Reads parts of one stored value (codec.h nds_part_reader) straight into the reader's buffers,
 * all from the version the first read saw. */
typedef struct part_source {
    nds_kvstore *kv;
    const char *key;
    nds_generation seen; /* NDS_GEN_NONE until the first read */
} part_source;

static int read_value_part(void *arg, uint64_t offset, size_t len, uint8_t *dst,
                           uint64_t *value_len) {
    part_source *p = arg;
    struct iovec iov = {dst, len};
    nds_read_result r;
    int rc = nds_kvstore_read_into(p->kv, p->key, offset, &iov, 1, &r);
    bool first = p->seen.kind == NDS_GEN_NONE;
    /* Later reads stay within the size the first one reported: a value shorter now is another
     * version. */
    if (rc == NDS_ERANGE && !first) return NDS_ECONFLICT;
    if (rc) return rc;
    if (r.state != NDS_READ_VALUE) return first ? NDS_ENOTFOUND : NDS_ECONFLICT;
    if (!first && !nds_generation_equal(&p->seen, &r.generation)) return NDS_ECONFLICT;
    p->seen = r.generation;
    *value_len = r.total_size;
    return 0;
}

/* Decodes the part of the chunk the selection needs reading only the stored bytes it needs, from
 * a store that reads into place (file), where the format says it reads parts
 * (NDS_DECODE_READER). NDS_EUNSUPPORTED (no message): read the value whole instead, as when it
 * changed between two reads (NDS_ECONFLICT). */
static int fetch_part(read_job *j) {
    nds_array *a = j->c->a;
    if (j->s.whole || !(a->meta.decode_caps & NDS_DECODE_READER) ||
        !nds_kvstore_can_read_into(a->kv))
        return NDS_EUNSUPPORTED;
    uint8_t *chunk = job_chunk(j);
    if (!chunk) return nds_err(NDS_ENOMEM, "out of memory");
    uint64_t lo, hi;
    sel_byte_span(j->c, &j->s, &lo, &hi);
    part_source src = {a->kv, j->key, {NDS_GEN_NONE, {0}}};
    nds_part_reader r = {read_value_part, &src};
    nds_decode_request rq = part_request(j, lo, hi);
    rq.reader = &r;
    rq.dst = chunk;
    int rc = a->format->decode_chunk(a->state, j->cell, &rq);
    if (rc == NDS_ENOTFOUND) {
        j->missing = true;
        return 0;
    }
    if (rc == NDS_ECONFLICT) return NDS_EUNSUPPORTED;
    if (rc) return chunk_error(j, rc);
    view_chunk(j, chunk);
    return 0;
}

static int fetch_encoded(read_job *j) {
    int rc = job_key(j);
    if (rc) return rc;
    rc = fetch_part(j);
    return rc == NDS_EUNSUPPORTED ? fetch_value_if(j, NULL) : rc;
}

/* Hands a whole chunk over a piece at a time, each piece copied into place while it is in the
 * cache: no decoded chunk in between (for chunks larger than the cache a pass over memory less). */
static int decode_pieces(read_job *j) {
    nds_array *a = j->c->a;
    read_piece_target t;
    read_piece_target_init(&t, j->c, &j->s);
    nds_decode_request rq = part_request(j, 0, SIZE_MAX); /* the whole chunk */
    rq.in = j->r.value.data;
    rq.in_len = j->r.value.len;
    rq.sink = read_place_piece;
    rq.sink_arg = &t;
    int rc = consumed(j, a->format->decode_chunk(a->state, j->cell, &rq));
    if (rc) return chunk_error(j, rc);
    j->placed = true;
    return 0;
}

/* Decodes only the bytes of the chunk that hold the selection. */
static int decode_part(read_job *j) {
    nds_array *a = j->c->a;
    uint8_t *chunk = job_chunk(j);
    if (!chunk) return nds_err(NDS_ENOMEM, "out of memory");
    uint64_t lo, hi;
    sel_byte_span(j->c, &j->s, &lo, &hi);
    nds_decode_request rq = part_request(j, lo, hi);
    rq.in = j->r.value.data;
    rq.in_len = j->r.value.len;
    rq.dst = chunk;
    int rc = consumed(j, a->format->decode_chunk(a->state, j->cell, &rq));
    if (rc) return chunk_error(j, rc);
    view_chunk(j, chunk);
    return 0;
}

/* As the format says it decodes (meta.decode_caps): pieces for a whole chunk read alone, a part
 * for a part of one, else the whole chunk. */
static int decode_encoded(read_job *j) {
    if (j->from) return 0; /* decoded in part while fetched */
    unsigned caps = j->c->a->meta.decode_caps;
    /* Pieces are cut along the last dimension: a rank-0 array has none. */
    if (j->s.whole && j->alone && (caps & NDS_DECODE_PIECES) && j->c->a->meta.rank > 0)
        return decode_pieces(j);
    if (!j->s.whole && (caps & NDS_DECODE_PART)) return decode_part(j);
    return decode_whole(j);
}

/* ---- CACHED: through the decoded-chunk cache ---- */

/* A conditional read against the cached entry's generation. */
static int fetch_cached(read_job *j) {
    int rc = job_key(j);
    if (rc) return rc;
    cache_url(j->c->a, j->key, j->url, sizeof j->url);
    j->cache = nds_context_cache(j->c->a->ctx);
    j->hit = nds_cache_get(j->cache, j->url);
    return fetch_value_if(j, j->hit ? nds_cache_generation(j->hit) : NULL);
}

/* A hit still valid is the view; a miss is decoded into a buffer that then becomes the entry (no
 * copy into the cache). */
static int decode_cached(read_job *j) {
    nds_array *a = j->c->a;
    if (j->r.state == NDS_READ_UNCHANGED) {
        view_chunk(j, nds_cache_data(j->hit));
        return 0;
    }
    if (!(j->fresh = nds_cache_buffer(j->cache, a->chunk_bytes)))
        return nds_err(NDS_ENOMEM, "out of memory");
    int rc = consumed(j, nds_format_decode_whole(a->format, a->state, j->cell, j->r.value.data,
                                                 j->r.value.len, j->fresh, a->chunk_bytes));
    if (rc) return chunk_error(j, rc);
    view_chunk(j, j->fresh);
    return 0;
}

/* The new entry goes in (a failed decode or a missing chunk drops the stale one). */
static void finish_cached(read_job *j, int rc) {
    nds_array *a = j->c->a;
    if (!j->cache) { /* the key failed before the cache was reached */
        finish_value(j, rc);
        return;
    }
    nds_cache_release(j->cache, j->hit);
    if (j->fresh)
        nds_cache_put_owned(j->cache, j->url, rc ? NULL : j->fresh, a->chunk_bytes,
                            &j->r.generation);
    if (j->fresh && rc)
        nds_cache_buffer_free(j->cache, j->fresh, a->chunk_bytes);
    else if (j->r.state != NDS_READ_UNCHANGED && !j->fresh)
        nds_cache_forget(j->cache, j->url);
    finish_value(j, rc);
}

/* ---- GRID: the format reads the chunks of its read grid ---- */

static int fetch_grid(read_job *j) {
    nds_array *a = j->c->a;
    uint8_t *chunk = job_chunk(j);
    if (!chunk) return nds_err(NDS_ENOMEM, "out of memory");
    int present, rc = a->format->read_chunk(a->state, a->kv, j->cell, chunk, &present);
    if (rc)
        return nds_err_prefix(rc, "%s: read of %s", a->format->name, nds_kvstore_url(a->kv));
    j->missing = !present;
    if (present) view_chunk(j, chunk);
    return 0;
}

static int decode_nothing(read_job *j) {
    (void)j;
    return 0;
}

static void finish_nothing(read_job *j, int rc) {
    (void)j;
    (void)rc;
}

/* ---- the plans' stages ---- */

static const read_stages STAGES[NDS_READ_PLAN_COUNT] = {
    [NDS_READ_PLAN_STORED] = {fetch_stored, decode_stored, finish_stored},
    [NDS_READ_PLAN_DECODE] = {fetch_encoded, decode_encoded, finish_value},
    [NDS_READ_PLAN_WHOLE] = {fetch_value, decode_whole, finish_value},
    [NDS_READ_PLAN_CACHED] = {fetch_cached, decode_cached, finish_cached},
    [NDS_READ_PLAN_GRID] = {fetch_grid, decode_nothing, finish_nothing},
};

const read_stages *read_stages_of(nds_read_plan plan) {
    return plan > NDS_READ_PLAN_AUTO && plan < NDS_READ_PLAN_COUNT ? &STAGES[plan] : NULL;
}
