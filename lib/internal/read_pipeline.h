/* The read pipeline (lib/array_read.c, lib/read_stages.c, lib/read_place.c).
 *
 * A read decides once, per call, its plan: where each chunk's bytes come from (fetch), how they
 * become canonical bytes (decode) and where they land (place). Then every chunk of the call runs
 * the same steps, fetch -> decode -> (overlay staged elements) -> place, in read_chunk_job; the
 * plans differ only in the stage implementations they pick (read_stages.c). A stage may finish a
 * later step itself (a read into place lands the bytes; a piecewise decode places each piece) and
 * says so in the job. */
#ifndef NDS_INTERNAL_READ_PIPELINE_H
#define NDS_INTERNAL_READ_PIPELINE_H

#include "internal/array_io.h"
#include "internal/chunk_cache.h"

/** The plans of a read. AUTO lets the call choose (read_plan_choose); tests force the others. */
typedef enum nds_read_plan {
    NDS_READ_PLAN_AUTO = 0,
    /** Chunks stored canonically (uncompressed): the stored bytes are copied from the store, read
     *  straight into place, by planes or as the selection's span; no decode. */
    NDS_READ_PLAN_STORED,
    /** The stored value is read and decoded as the selection needs: a piece at a time for a whole
     *  chunk, in part for a part of one, reading only the stored bytes the part needs where the
     *  store reads into place, as the format's decode_caps say it can (its decode_chunk into
     *  a sink, of a part, through a reader; else a whole decode). */
    NDS_READ_PLAN_DECODE,
    /** The stored value is read whole and decoded whole into a chunk buffer: the general plan,
     *  the one that overlays a transaction's staged elements. */
    NDS_READ_PLAN_WHOLE,
    /** Through the context's decoded-chunk cache (a conditional read; a miss is decoded into a
     *  buffer that becomes the entry). */
    NDS_READ_PLAN_CACHED,
    /** The format's read grid (meta.read_chunk_shape): the format reads each inner chunk (a
     *  shard's, through ranged reads of its index and data). */
    NDS_READ_PLAN_GRID,
    NDS_READ_PLAN_COUNT
} nds_read_plan;

/** The plan's name ("stored", "decode", ...), for tests and messages. */
const char *nds_read_plan_name(nds_read_plan plan);

/** Whether a read goes in runs: the chunks a box spans along the last dimension (2 to 8 of
 *  them) brought into buffers side by side and the output written a whole row at a time. */
typedef enum nds_read_runs {
    NDS_READ_RUNS_AUTO = 0, /* as the call chooses */
    NDS_READ_RUNS_OFF,
    NDS_READ_RUNS_ON /* wherever the box allows (steps of 1 along the last dimension) */
} nds_read_runs;

/** nds_array_read with the plan and runs forced (AUTO: chosen as nds_array_read does). A plan
 *  that cannot read this array or call is NDS_EUNSUPPORTED with a message naming the plan and
 *  why; runs go with every plan but the cached one (its views are the cache's entries). */
int nds_array_read_with_plan(nds_array *a, const nds_box *box, void *out,
                             const nds_io_options *opts, nds_read_plan plan, nds_read_runs runs);

/** Bytes a job's chunk buffer holds beyond the chunk: room to place a span read from the store
 *  at the cache-line offset it has there. */
#define READ_SLACK 64

/** One chunk going through the pipeline. */
typedef struct read_job {
    io_call *c;
    uint64_t cell[NDS_MAX_RANK];
    chunk_sel s;
    char key[KEY_MAX];
    uint8_t *chunk;   /* a chunk buffer (c->grid_bytes + READ_SLACK) for the stages' bytes */
    bool alone;       /* placed by itself, not in a run: its view may have its own strides
                       * (planes) and decode may place a whole chunk a piece at a time */
    nds_read_result r; /* what fetch read (state NONE when nothing) */
    bool missing;     /* the chunk is not stored: its selection is the fill value */
    bool placed;      /* the selection is in the caller's buffer already */
    /* The selection's canonical bytes after decode: its first element and the byte strides. */
    const uint8_t *from;
    const int64_t *from_stride;
    int64_t packed[NDS_MAX_RANK]; /* strides of planes read one after the other */
    uint8_t *planes;              /* their buffer (scratch) */
    /* The cached plan's state. */
    nds_chunk_cache *cache;
    nds_cache_entry *hit;
    uint8_t *fresh;
    char url[KEY_MAX + 512];
} read_job;

/** The stages of a plan. fetch reads what the chunk needs from its store (or finds it missing,
 *  or lands it in place); decode turns it into the selection's canonical bytes (from /
 *  from_stride), or places it; finish releases what the job holds, given the job's outcome. */
typedef struct read_stages {
    int (*fetch)(read_job *j);
    int (*decode)(read_job *j);
    void (*finish)(read_job *j, int rc);
} read_stages;

/** The stage implementations of each plan (read_stages.c); NULL for AUTO. */
const read_stages *read_stages_of(nds_read_plan plan);

/* ---- placing (read_place.c) ---- */

/** Copies the job's view (from, from_stride) of its selection into the caller's buffer. */
void read_place_view(const read_job *j);
/** Fills the selection of chunk cell with the fill value. */
void read_place_fill(const io_call *c, const chunk_sel *s);
/** The sink (codec.h nds_piece_sink) that copies a whole chunk's decoded pieces into place; arg
 *  is a read_piece_target set up by read_piece_target_init. */
typedef struct read_piece_target {
    const io_call *c;
    uint8_t *dst; /* the selection's first byte in the caller's buffer */
    uint64_t unit[NDS_MAX_RANK], shape[NDS_MAX_RANK], held[NDS_MAX_RANK];
} read_piece_target;
void read_piece_target_init(read_piece_target *t, const io_call *c, const chunk_sel *s);
int read_place_piece(void *arg, size_t offset, uint8_t *data, size_t len);
/** The places of a whole chunk's rows in the caller's buffer, in stored order, rows that follow
 *  each other there merged (a read straight into place); the number of entries. */
size_t read_row_places(const io_call *c, const chunk_sel *s, struct iovec *iov);
/** Whether the caller's rows of a whole chunk all start on a cache line (see read_stages.c). */
bool read_rows_aligned(const io_call *c, const chunk_sel *s);

#endif
