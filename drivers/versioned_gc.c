/* Garbage collection of a versioned store (nds_versioned_gc, docs/versioned-format.md "Garbage
 * collection" and "GC state").
 *
 * Which objects are dead is read from the history, not from the trees: each commit lists the
 * objects it made reachable with their item counts, and its superseded list how many items of which
 * objects it stopped referencing. An object created at version c whose last item was superseded at
 * version d is referenced by exactly the versions [c, d); it is deleted when no kept version falls
 * in that range and d was committed more than the grace period ago.
 *
 * Incremental: a run leaves a state object "gc/state/<seq>" (versioned_gc_state.c) with the tallies
 * of every object still tracked, the orphans waiting for the grace period and what it deletes; the
 * next run starts from the newest state, reads only the commits after it, and lists only the object
 * names made since the last run (names begin with their creation time, vs_id_random). A missing or
 * unreadable state, or nds_gc_options.full_scan, makes the run read the whole history and list
 * every object instead (said in nds_gc_result.note); either way the same objects are deleted.
 *
 * Order of a run (what makes it safe against kills, taggers and other runs):
 *   1. read the newest state, the commits after it and the tags; finish the previous run's
 *      deletions (its state lists them), except objects a tag created since keeps (tracked again);
 *   2. list the new object names, choose what to delete;
 *   3. write the new state create-only as number seq + 1: of two runs from one state exactly one
 *      wins, the other deletes nothing new;
 *   4. list the states again (a newer one means others finished meanwhile: delete nothing) and
 *      the tags: an object whose versions a tag created meanwhile names is not deleted (a tagger
 *      writes its tag, then reads the newest state and withdraws when the state says the version
 *      is collected: one of the two always sees the other);
 *   5. delete, mark the run done (gc/done/<seq>), then delete the states (and marks) older than
 *      the one this run started from.
 * A run killed anywhere leaves either no new state (the next run redoes it) or a state whose
 * deletions the next run finishes (unless the mark says they are done).
 *
 * Threading: runs of one store serialise through the state's create-only write. Ownership:
 * everything is freed before returning.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ndstore/versioned.h"
#include "versioned_store.h"
#include "internal/error.h"
#include "internal/util.h"

#define GC_BUCKETS 65536
/* Names made this long before the last run's start are listed again: writers' clocks may lag the
 * collector's, and a name is made shortly before its object is written. */
#define GC_LIST_MARGIN_NS ((int64_t)3600 * 1000000000)
/* A run lists at most this many name prefixes per object kind. */
#define GC_LIST_PREFIXES_MAX 4
/* Hex digits of an id's time part (VS_ID_TIME_BYTES bytes). */
#define GC_TIME_DIGITS (2 * VS_ID_TIME_BYTES)

typedef struct gc_entry {
    vs_gc_object o;        /* tracked: what the history says; orphans: id, size (kind unused) */
    int kind;              /* vs_gc_orphan_kind: 0 data, 1 index, 2 prepared */
    bool tracked;          /* listed by a commit (else an orphan) */
    int64_t first_seen_ns; /* orphans */
    bool listed;           /* seen by this run's listing */
    bool doomed;           /* deleted by this run */
    struct gc_entry *next;
} gc_entry;

typedef struct gc_run {
    vs_store *s;
    nds_kvstore *base;
    const nds_gc_options *o;
    nds_gc_result *result;
    int64_t now_ns;
    uint64_t latest;
    uint64_t *state_seqs; /* existing states */
    size_t nstates;
    vs_gc_state prev; /* the state this run starts from (zeroed when none) */
    bool have_prev;
    bool full;     /* read every commit, list every object */
    uint64_t seq;  /* the state this run writes */
    uint64_t from; /* first version read */
    int64_t *tree; /* max segment tree over the commit times of versions from..latest */
    size_t ntimes;
    uint64_t *tags; /* sorted versions tags name */
    size_t ntags, captags;
    gc_entry **buckets;
    vs_gc_range *collected;
    size_t ncollected, capcollected;
    bool skipped; /* a tag made during the run saved objects it had chosen */
} gc_run;

static int64_t wall_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- the table of objects -------------------------------------------------------------------- */

static size_t bucket_of(const vs_id *id, int kind) {
    uint64_t h = 1469598103934665603ull ^ (uint64_t)kind;
    for (int i = 0; i < VS_ID_SIZE; i++) h = (h ^ id->b[i]) * 1099511628211ull;
    return (size_t)(h % GC_BUCKETS);
}

static gc_entry *find_entry(gc_run *g, const vs_id *id, int kind) {
    for (gc_entry *e = g->buckets[bucket_of(id, kind)]; e; e = e->next)
        if (e->kind == kind && memcmp(&e->o.id, id, sizeof *id) == 0) return e;
    return NULL;
}

static gc_entry *add_entry(gc_run *g, const vs_id *id, int kind) {
    gc_entry *e = calloc(1, sizeof *e);
    if (!e) {
        nds_err(NDS_ENOMEM, "versioned store gc: out of memory");
        return NULL;
    }
    e->o.id = *id;
    e->kind = kind;
    e->o.size = UINT64_MAX;
    size_t b = bucket_of(id, kind);
    e->next = g->buckets[b];
    g->buckets[b] = e;
    return e;
}

static void remove_entry(gc_run *g, gc_entry *e) {
    for (gc_entry **p = &g->buckets[bucket_of(&e->o.id, e->kind)]; *p; p = &(*p)->next)
        if (*p == e) {
            *p = e->next;
            free(e);
            return;
        }
}

static void free_entries(gc_run *g) {
    for (size_t b = 0; g->buckets && b < GC_BUCKETS; b++)
        for (gc_entry *e = g->buckets[b], *next; e; e = next) {
            next = e->next;
            free(e);
        }
    free(g->buckets);
}

static int track_state_object(gc_run *g, const vs_gc_object *o) {
    if (find_entry(g, &o->id, (int)o->kind)) return 0;
    gc_entry *e = add_entry(g, &o->id, (int)o->kind);
    if (!e) return NDS_ENOMEM;
    e->o = *o;
    e->tracked = true;
    return 0;
}

/* ---- collected ranges ------------------------------------------------------------------------ */

/* Adds versions [first, last] to the sorted, merged list. */
static int add_collected(gc_run *g, uint64_t first, uint64_t last) {
    if (first > last) return 0;
    size_t i = 0;
    while (i < g->ncollected && g->collected[i].last + 1 < first) i++;
    size_t j = i; /* ranges i..j-1 touch [first, last] and merge with it */
    while (j < g->ncollected && g->collected[j].first <= last + 1) {
        if (g->collected[j].first < first) first = g->collected[j].first;
        if (g->collected[j].last > last) last = g->collected[j].last;
        j++;
    }
    if (i == j) { /* a new range at i */
        if (g->ncollected == g->capcollected) {
            size_t cap = g->capcollected ? 2 * g->capcollected : 16;
            vs_gc_range *grown = realloc(g->collected, cap * sizeof *grown);
            if (!grown) return nds_err(NDS_ENOMEM, "versioned store gc: out of memory");
            g->collected = grown;
            g->capcollected = cap;
        }
        memmove(&g->collected[i + 1], &g->collected[i], (g->ncollected - i) * sizeof *g->collected);
        g->ncollected++;
    } else { /* ranges i..j-1 become one */
        memmove(&g->collected[i + 1], &g->collected[j], (g->ncollected - j) * sizeof *g->collected);
        g->ncollected -= j - i - 1;
    }
    g->collected[i] = (vs_gc_range){first, last};
    return 0;
}

/* The versions an object's range covers: [created, dead_at) or up to the latest. */
static uint64_t last_referencing(const gc_run *g, const vs_gc_object *o) {
    return o->dead_at ? o->dead_at - 1 : g->latest;
}

/* ---- the previous state ---------------------------------------------------------------------- */

static void set_note(gc_run *g, const char *fmt, const char *detail) {
    snprintf(g->result->note, sizeof g->result->note, fmt, detail);
}

/* Finds the state to start from: the newest, when it decodes and fits the history. */
static int load_previous(gc_run *g) {
    int rc = vs_gc_states_list(g->s, &g->state_seqs, &g->nstates);
    if (rc) return rc;
    g->seq = g->nstates ? g->state_seqs[0] + 1 : 1;
    if (g->nstates == 0) {
        set_note(g, "%sno gc state yet: the first run", "");
        g->full = true;
        return 0;
    }
    /* The newest state that decodes: a run keeps the one before its own, so one damaged object
     * costs the newest run's work (done again), not a full scan. */
    char bad[sizeof g->result->note] = "";
    for (size_t i = 0; i < g->nstates && i < 2; i++) {
        rc = vs_gc_state_read(g->s, g->state_seqs[i], &g->prev);
        if (rc != NDS_ECORRUPT) break;
        if (!bad[0]) snprintf(bad, sizeof bad, "%s", nds_error_last()->message);
    }
    if (rc == NDS_ECORRUPT) {
        set_note(g, "%s; read the whole history instead", bad);
        g->full = true;
        return 0;
    }
    if (rc) return rc;
    if (bad[0]) {
        char detail[sizeof g->result->note];
        snprintf(detail, sizeof detail, "%.200s; started from the state before it", bad);
        set_note(g, "%s", detail);
    }
    if (g->prev.version > g->latest) {
        char text[64];
        snprintf(text, sizeof text, "%" PRIu64, g->prev.version);
        set_note(g, "the gc state is at version %s, after the latest: read the whole history",
                 text);
        vs_gc_state_dispose(&g->prev);
        g->full = true;
        return 0;
    }
    g->have_prev = true;
    if (g->o->full_scan) {
        set_note(g, "%sfull scan asked for", "");
        g->full = true;
    }
    for (size_t i = 0; i < g->prev.ncollected && !rc; i++)
        rc = add_collected(g, g->prev.collected[i].first, g->prev.collected[i].last);
    for (size_t i = 0; !g->full && !rc && i < g->prev.nobjects; i++)
        rc = track_state_object(g, &g->prev.objects[i]);
    for (size_t i = 0; !rc && i < g->prev.npending; i++) {
        const vs_gc_orphan *p = &g->prev.pending[i];
        if (find_entry(g, &p->id, (int)p->kind)) continue; /* listed twice: the first counts */
        gc_entry *e = add_entry(g, &p->id, (int)p->kind);
        if (!e) return NDS_ENOMEM;
        e->first_seen_ns = p->first_seen_ns;
        e->o.size = p->size;
    }
    return rc;
}

/* ---- the history ----------------------------------------------------------------------------- */

/* Counts commit v's listing of object oc. */
static int add_object(gc_run *g, const vs_object_count *oc, uint64_t v) {
    gc_entry *e = find_entry(g, &oc->object, (int)oc->kind);
    if (e && e->tracked) { /* counted by two commits: the later adds its items */
        e->o.total += oc->items;
        return 0;
    }
    if (!e && !(e = add_entry(g, &oc->object, (int)oc->kind))) return NDS_ENOMEM;
    /* New, or an orphan a commit now lists (a prepared part committed late): tracked from now. */
    uint64_t size = e->o.size;
    e->o = (vs_gc_object){oc->object, oc->kind, v, 0, oc->items, 0, INT64_MIN, 0, size};
    e->tracked = true;
    return 0;
}

static void archive_key(uint64_t version, char out[VS_OBJECT_KEY_MAX]) {
    snprintf(out, VS_OBJECT_KEY_MAX, VS_GC_SUPERSEDED_PREFIX "%020" PRIu64, version);
}

/* Reads commit c's superseded list envelope: from its index object, or, when gc deleted that,
 * from the copy gc kept (archive_superseded). *found false when neither exists. */
static int read_superseded(gc_run *g, const vs_commit *c, const char *where, nds_read_result *r,
                           bool *found) {
    char key[VS_OBJECT_KEY_MAX];
    vs_object_key(VS_INDEX_PREFIX, &c->superseded.object, key);
    nds_read_options ro = NDS_READ_OPTIONS_INIT;
    ro.byte_start = (int64_t)c->superseded.offset;
    ro.byte_length = (int64_t)c->superseded.length;
    int rc = nds_kvstore_read(g->base, key, &ro, r);
    if (!rc && r->state != NDS_READ_VALUE) {
        nds_read_result_dispose(r);
        archive_key(c->version, key);
        rc = nds_kvstore_read(g->base, key, NULL, r);
    }
    if (rc) return nds_err_prefix(rc, "%s", where);
    *found = r->state == NDS_READ_VALUE;
    if (!*found) nds_read_result_dispose(r);
    return 0;
}

/* Before the index object created by version c goes, keeps a copy of version c's superseded list
 * (which lives in it) as gc/superseded/<c>: a full scan, or a run starting from an older state,
 * learns from it when the objects it names died. Create-only; an existing copy is fine. */
static int archive_superseded(gc_run *g, uint64_t c) {
    vs_commit cm;
    int rc = vs_store_commit_info(g->s, c, &cm);
    if (rc || !cm.has_superseded) {
        vs_commit_dispose(&cm);
        return rc;
    }
    char key[VS_OBJECT_KEY_MAX], where[VS_OBJECT_KEY_MAX + 600];
    snprintf(where, sizeof where, "versioned store %s: superseded list of version %" PRIu64,
             vs_store_url(g->s), c);
    nds_read_result r;
    bool found = false;
    rc = read_superseded(g, &cm, where, &r, &found);
    vs_commit_dispose(&cm);
    if (rc || !found) return rc;
    archive_key(c, key);
    nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
    wo.if_equal.kind = NDS_GEN_ABSENT;
    rc = nds_kvstore_write(g->base, key, r.value.data, r.value.len, &wo, NULL);
    nds_read_result_dispose(&r);
    if (rc == NDS_ECONFLICT) return 0;
    return rc ? nds_err_prefix(rc, "versioned store %s: writing %s", vs_store_url(g->s), key) : 0;
}

static int apply_superseded(gc_run *g, const vs_commit *c) {
    if (!c->has_superseded) return 0;
    char key[VS_OBJECT_KEY_MAX], where[VS_OBJECT_KEY_MAX + 600];
    vs_object_key(VS_INDEX_PREFIX, &c->superseded.object, key);
    snprintf(where, sizeof where,
             "versioned store %s: superseded list of version %" PRIu64 " in %s", vs_store_url(g->s),
             c->version, key);
    nds_read_result r;
    bool found = false;
    int rc = read_superseded(g, c, where, &r, &found);
    if (rc || !found) return rc; /* not found: its objects' deaths are unknown (kept) */
    vs_superseded *list = NULL;
    size_t n = 0;
    rc = vs_superseded_decode(r.value.data, r.value.len, c->superseded.crc, where, &list, &n);
    nds_read_result_dispose(&r);
    for (size_t i = 0; !rc && i < n; i++) {
        gc_entry *e = find_entry(g, &list[i].object, (int)list[i].kind);
        if (!e || !e->tracked) continue; /* deleted before (no kept version reached it) */
        e->o.superseded += list[i].items;
        if (e->o.superseded >= e->o.total && !e->o.dead_at && c->version > e->o.created) {
            e->o.dead_at = c->version;
            e->o.dead_time_ns = c->time_ns;
        }
    }
    free(list);
    return rc;
}

static void tree_build(gc_run *g) {
    for (size_t i = g->ntimes - 1; i >= 1 && g->ntimes > 1; i--)
        g->tree[i] = g->tree[2 * i] > g->tree[2 * i + 1] ? g->tree[2 * i] : g->tree[2 * i + 1];
}

/* The newest commit time among versions [lo, hi] (both within from..latest). */
static int64_t tree_max(const gc_run *g, uint64_t lo, uint64_t hi) {
    int64_t best = INT64_MIN;
    size_t l = (size_t)(lo - g->from) + g->ntimes, r = (size_t)(hi - g->from) + g->ntimes + 1;
    for (; l < r; l /= 2, r /= 2) {
        if (l & 1) best = g->tree[l] > best ? g->tree[l] : best, l++;
        if (r & 1) r--, best = g->tree[r] > best ? g->tree[r] : best;
    }
    return best;
}

/* Reads the commits from..latest: objects, superseded lists, times. */
static int read_history(gc_run *g) {
    g->ntimes = g->latest >= g->from ? (size_t)(g->latest - g->from + 1) : 0;
    if (g->ntimes && !(g->tree = calloc(2 * g->ntimes, sizeof *g->tree)))
        return nds_err(NDS_ENOMEM, "versioned store gc: out of memory");
    for (uint64_t v = g->from; v <= g->latest; v++) {
        vs_commit c;
        int rc = vs_store_commit_info(g->s, v, &c);
        if (rc) return rc;
        g->result->commits_read++;
        g->tree[g->ntimes + (v - g->from)] = c.time_ns;
        for (size_t i = 0; !rc && i < c.nobjects; i++) rc = add_object(g, &c.objects[i], v);
        if (!rc) rc = apply_superseded(g, &c);
        vs_commit_dispose(&c);
        if (rc) return rc;
    }
    if (g->ntimes) tree_build(g);
    return 0;
}

/* Extends each tracked object's newest referencing time over the versions read now. */
static void update_times(gc_run *g) {
    for (size_t b = 0; g->ntimes && b < GC_BUCKETS; b++)
        for (gc_entry *e = g->buckets[b]; e; e = e->next) {
            if (!e->tracked) continue;
            uint64_t lo = e->o.created > g->from ? e->o.created : g->from;
            uint64_t hi = last_referencing(g, &e->o);
            if (lo > hi) continue;
            int64_t t = tree_max(g, lo, hi);
            if (t > e->o.max_time_ns) e->o.max_time_ns = t;
        }
}

/* ---- tags ------------------------------------------------------------------------------------ */

static int note_tag(void *ctx, const char *name, uint64_t v) {
    (void)name;
    gc_run *g = ctx;
    if (g->ntags == g->captags) {
        size_t cap = g->captags ? 2 * g->captags : 16;
        uint64_t *grown = realloc(g->tags, cap * sizeof *grown);
        if (!grown) return nds_err(NDS_ENOMEM, "versioned store gc: out of memory");
        g->tags = grown;
        g->captags = cap;
    }
    g->tags[g->ntags++] = v;
    return 0;
}

static int oldest_first(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y ? 1 : 0;
}

static int list_tags(gc_run *g) {
    g->ntags = 0;
    int rc = vs_store_tags(g->s, note_tag, g);
    if (rc) /* an unreadable tag could name any version: collect nothing until it is fixed */
        return nds_err_prefix(rc, "gc stops (a tag it cannot read could keep any version)");
    if (g->ntags) qsort(g->tags, g->ntags, sizeof *g->tags, oldest_first);
    return 0;
}

/* 1 when a tag names a version in [lo, hi]. */
static bool tagged_between(const gc_run *g, uint64_t lo, uint64_t hi) {
    size_t a = 0, b = g->ntags;
    while (a < b) {
        size_t mid = a + (b - a) / 2;
        if (g->tags[mid] < lo)
            a = mid + 1;
        else
            b = mid;
    }
    return a < g->ntags && g->tags[a] <= hi;
}

/* 1 when a version the options keep lies in the object's range. */
static bool kept_range(const gc_run *g, const vs_gc_object *o) {
    uint64_t hi = last_referencing(g, o);
    if (hi >= g->latest) return true;
    if (g->o->keep_last && hi + g->o->keep_last > g->latest) return true;
    if (g->o->older_than_ms >= 0 &&
        o->max_time_ns >= g->now_ns - g->o->older_than_ms * (int64_t)1000000)
        return true;
    return tagged_between(g, o->created, hi);
}

/* ---- the previous run's deletions ------------------------------------------------------------ */

static int delete_key(gc_run *g, const char *prefix, const vs_id *id);

/* Deletes a tracked object (an index object's superseded list is kept first). */
static int delete_tracked(gc_run *g, const vs_gc_object *o) {
    int rc = o->kind == VS_OBJECT_INDEX ? archive_superseded(g, o->created) : 0;
    return rc ? rc
              : delete_key(g, o->kind == VS_OBJECT_INDEX ? VS_INDEX_PREFIX : VS_DATA_PREFIX,
                           &o->id);
}

static int delete_key(gc_run *g, const char *prefix, const vs_id *id) {
    char key[VS_OBJECT_KEY_MAX];
    vs_object_key(prefix, id, key);
    int rc = nds_kvstore_delete(g->base, key, NULL);
    return rc ? nds_err_prefix(rc, "versioned store %s: deleting %s", vs_store_url(g->s), key) : 0;
}

static const char *orphan_prefix(int kind) {
    return kind == VS_GC_ORPHAN_DATA    ? VS_DATA_PREFIX
           : kind == VS_GC_ORPHAN_INDEX ? VS_INDEX_PREFIX
                                        : VS_PREPARED_PREFIX;
}

/* Deletes again what the previous run chose (a killed run left some), except objects a tag created
 * since its state keeps: those are tracked again. Not counted: the previous run counted them. */
static void done_key(uint64_t seq, char out[VS_OBJECT_KEY_MAX]) {
    snprintf(out, VS_OBJECT_KEY_MAX, VS_GC_DONE_PREFIX "%020" PRIu64, seq);
}

/* Whether run seq finished its deletions (it wrote gc/done/<seq> after them). */
static int run_finished(gc_run *g, uint64_t seq, bool *done) {
    char key[VS_OBJECT_KEY_MAX];
    done_key(seq, key);
    nds_read_result r;
    int rc = nds_kvstore_read(g->base, key, NULL, &r);
    if (rc) return nds_err_prefix(rc, "versioned store %s: reading %s", vs_store_url(g->s), key);
    *done = r.state == NDS_READ_VALUE;
    nds_read_result_dispose(&r);
    return 0;
}

static int finish_previous(gc_run *g) {
    bool done = false;
    int rc = g->have_prev ? run_finished(g, g->prev.seq, &done) : 0;
    for (size_t i = 0; g->have_prev && !rc && i < g->prev.ndeleting; i++) {
        const vs_gc_object *o = &g->prev.deleting[i];
        if (tagged_between(g, o->created, o->dead_at ? o->dead_at - 1 : g->latest)) {
            if (!g->full) rc = track_state_object(g, o);
        } else if (!done && !g->o->dry_run) {
            rc = delete_tracked(g, o);
        }
    }
    for (size_t i = 0; g->have_prev && !done && !rc && !g->o->dry_run && i < g->prev.ndoomed; i++)
        rc = delete_key(g, orphan_prefix((int)g->prev.doomed[i].kind), &g->prev.doomed[i].id);
    return rc;
}

/* ---- listing --------------------------------------------------------------------------------- */

typedef struct lister {
    gc_run *g;
    int kind;
    const char *prefix;
} lister;

static int note_listed(void *ctx, const char *key, uint64_t size) {
    lister *l = ctx;
    gc_run *g = l->g;
    g->result->keys_listed++;
    vs_id id;
    if (vs_id_parse(key + strlen(l->prefix), &id) != 0) return 0; /* not ours: leave it */
    gc_entry *e = find_entry(g, &id, l->kind);
    if (!e) { /* no commit lists it: an orphan, first seen now */
        if (!(e = add_entry(g, &id, l->kind))) return NDS_ENOMEM;
        e->first_seen_ns = g->now_ns;
    }
    e->listed = true;
    e->o.size = size;
    return 0;
}

/* The hex prefixes of names whose time part lies in [from_ms, to_ms]: the finest granularity that
 * needs at most GC_LIST_PREFIXES_MAX prefixes. */
static size_t window_prefixes(uint64_t from_ms, uint64_t to_ms, char out[][GC_TIME_DIGITS + 1]) {
    for (int digits = GC_TIME_DIGITS; digits >= 1; digits--) {
        uint64_t bucket = (uint64_t)1 << (4 * (GC_TIME_DIGITS - digits));
        uint64_t first = from_ms / bucket, last = to_ms / bucket;
        if (last - first + 1 > GC_LIST_PREFIXES_MAX) continue;
        size_t n = 0;
        for (uint64_t b = first; b <= last; b++)
            snprintf(out[n++], GC_TIME_DIGITS + 1, "%0*" PRIx64, digits, b);
        return n;
    }
    snprintf(out[0], GC_TIME_DIGITS + 1, "%s", "");
    return 1;
}

static int list_kind(gc_run *g, int kind) {
    lister l = {g, kind, orphan_prefix(kind)};
    char prefixes[GC_LIST_PREFIXES_MAX][GC_TIME_DIGITS + 1];
    size_t n = 1;
    prefixes[0][0] = '\0';
    if (!g->full) {
        int64_t from = g->prev.time_ns - GC_LIST_MARGIN_NS, to = g->now_ns + GC_LIST_MARGIN_NS;
        n = window_prefixes(from > 0 ? (uint64_t)from / 1000000 : 0, (uint64_t)to / 1000000,
                            prefixes);
    }
    int rc = 0;
    for (size_t i = 0; !rc && i < n; i++) {
        char prefix[VS_OBJECT_KEY_MAX];
        snprintf(prefix, sizeof prefix, "%s%s", l.prefix, prefixes[i]);
        rc = nds_kvstore_list(g->base, prefix, note_listed, &l);
    }
    return rc;
}

/* A full scan's listing shows everything that exists: tracked objects it did not show were deleted
 * before (their versions are collected), orphans it did not show are gone. */
static int forget_unlisted(gc_run *g) {
    int rc = 0;
    for (size_t b = 0; !rc && b < GC_BUCKETS; b++)
        for (gc_entry *e = g->buckets[b], *next; !rc && e; e = next) {
            next = e->next;
            if (e->listed) continue;
            /* Deleted before. Its range is known when its death is; when the superseded list that
             * recorded it went with its own version's index object, only its first version is
             * known to be collected (and the objects it shared that death with look live: a full
             * scan keeps them, never deletes wrongly). */
            if (e->tracked)
                rc = add_collected(g, e->o.created, e->o.dead_at ? e->o.dead_at - 1 : e->o.created);
            remove_entry(g, e);
        }
    return rc;
}

static int list_objects(gc_run *g) {
    int rc = 0;
    for (int kind = VS_GC_ORPHAN_DATA; !rc && kind <= VS_GC_ORPHAN_PREPARED; kind++)
        rc = list_kind(g, kind);
    return !rc && g->full ? forget_unlisted(g) : rc;
}

/* ---- choosing, recording, deleting ----------------------------------------------------------- */

static int choose(gc_run *g) {
    int64_t before = g->now_ns - g->o->grace_ms * (int64_t)1000000;
    int rc = 0;
    for (size_t b = 0; !rc && b < GC_BUCKETS; b++)
        for (gc_entry *e = g->buckets[b]; !rc && e; e = e->next) {
            if (e->tracked)
                e->doomed = e->o.dead_at && e->o.dead_time_ns < before && !kept_range(g, &e->o);
            else
                e->doomed = e->first_seen_ns < before;
            g->result->objects_pending += !e->tracked && !e->doomed;
            if (!e->doomed) continue;
            g->result->objects_deleted++;
            if (e->o.size != UINT64_MAX) g->result->bytes_deleted += e->o.size;
            if (e->tracked) rc = add_collected(g, e->o.created, e->o.dead_at - 1);
        }
    for (size_t i = 0; i < g->ncollected; i++)
        if (g->collected[i].first <= g->latest)
            g->result->versions_collected +=
                (g->collected[i].last < g->latest ? g->collected[i].last : g->latest) -
                g->collected[i].first + 1;
    g->result->versions_kept = g->latest - g->result->versions_collected;
    return rc;
}

/* Appends e to the state's list it belongs to. */
static int state_add(vs_gc_state *st, const gc_entry *e, size_t *caps) {
    vs_gc_object **objs = e->doomed ? &st->deleting : &st->objects;
    size_t *nobj = e->doomed ? &st->ndeleting : &st->nobjects;
    vs_gc_orphan **orph = e->doomed ? &st->doomed : &st->pending;
    size_t *norph = e->doomed ? &st->ndoomed : &st->npending;
    size_t which = (e->tracked ? 0 : 2) + (e->doomed ? 1 : 0);
    size_t n = e->tracked ? *nobj : *norph;
    if (n == caps[which]) {
        size_t cap = caps[which] ? 2 * caps[which] : 64;
        void *grown =
            e->tracked ? realloc(*objs, cap * sizeof **objs) : realloc(*orph, cap * sizeof **orph);
        if (!grown) return nds_err(NDS_ENOMEM, "versioned store gc: out of memory");
        if (e->tracked)
            *objs = grown;
        else
            *orph = grown;
        caps[which] = cap;
    }
    if (e->tracked)
        (*objs)[(*nobj)++] = e->o;
    else
        (*orph)[(*norph)++] =
            (vs_gc_orphan){e->o.id, (vs_gc_orphan_kind)e->kind, e->first_seen_ns, e->o.size};
    return 0;
}

/* Writes state seq create-only: NDS_ECONFLICT when another run wrote it first. */
static int write_state(gc_run *g) {
    vs_gc_state st = {.seq = g->seq,
                      .version = g->latest,
                      .time_ns = g->now_ns,
                      .flags = g->full ? VS_GC_STATE_FULL_SCAN : 0,
                      .collected = g->collected,
                      .ncollected = g->ncollected};
    size_t caps[4] = {0};
    int rc = 0;
    for (size_t b = 0; !rc && b < GC_BUCKETS; b++)
        for (gc_entry *e = g->buckets[b]; !rc && e; e = e->next) rc = state_add(&st, e, caps);
    nds_buf buf = {0};
    char key[VS_OBJECT_KEY_MAX];
    vs_gc_state_key(g->seq, key);
    if (!rc) rc = vs_gc_state_encode(&st, &buf);
    if (!rc) {
        nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
        wo.if_equal.kind = NDS_GEN_ABSENT;
        rc = nds_kvstore_write(g->base, key, buf.data, buf.len, &wo, NULL);
        if (rc == NDS_ECONFLICT)
            rc = nds_err(NDS_ECONFLICT,
                         "versioned store %s: another gc run wrote %s first; this run deleted "
                         "nothing new (run it again)",
                         vs_store_url(g->s), key);
        else if (rc)
            rc = nds_err_prefix(rc, "versioned store %s: writing %s", vs_store_url(g->s), key);
    }
    nds_buf_dispose(&buf);
    free(st.objects);
    free(st.deleting);
    free(st.pending);
    free(st.doomed);
    return rc;
}

/* A run slow enough that others wrote two more states meanwhile (and deleted the one it was
 * numbered after) could write its number again: it must then delete nothing, since the newest state
 * knows nothing of its deletions. Its own state is withdrawn. */
static int check_still_newest(gc_run *g) {
    uint64_t *seqs = NULL;
    size_t n = 0;
    int rc = vs_gc_states_list(g->s, &seqs, &n);
    bool stale = !rc && n && seqs[0] > g->seq;
    free(seqs);
    if (rc || !stale) return rc;
    char key[VS_OBJECT_KEY_MAX];
    vs_gc_state_key(g->seq, key);
    (void)nds_kvstore_delete(g->base, key, NULL);
    return nds_err(NDS_ECONFLICT,
                   "versioned store %s: other gc runs finished while this one ran; it deleted "
                   "nothing new (run it again)",
                   vs_store_url(g->s));
}

/* Deletes what this run chose, except objects whose versions a tag created since the first tag
 * listing names (the next run tracks them again from the state's deleting list). */
static int delete_chosen(gc_run *g) {
    int rc = check_still_newest(g);
    if (!rc) rc = list_tags(g);
    for (size_t b = 0; !rc && b < GC_BUCKETS; b++)
        for (gc_entry *e = g->buckets[b]; !rc && e; e = e->next) {
            if (!e->doomed) continue;
            if (e->tracked && tagged_between(g, e->o.created, e->o.dead_at - 1)) {
                g->result->objects_deleted--;
                if (e->o.size != UINT64_MAX) g->result->bytes_deleted -= e->o.size;
                g->skipped = true;
                continue;
            }
            rc = e->tracked ? delete_tracked(g, &e->o)
                            : delete_key(g, orphan_prefix(e->kind), &e->o.id);
        }
    return rc;
}

/* Keeps the state this run wrote and the one it started from (a reader that chose the newest
 * finds it still there while the next run writes its own). */
static int delete_old_states(gc_run *g) {
    int rc = 0;
    for (size_t i = 0; !rc && i < g->nstates; i++) {
        if (g->state_seqs[i] + 1 >= g->seq) continue;
        char key[VS_OBJECT_KEY_MAX];
        vs_gc_state_key(g->state_seqs[i], key);
        rc = nds_kvstore_delete(g->base, key, NULL);
        done_key(g->state_seqs[i], key);
        if (!rc) rc = nds_kvstore_delete(g->base, key, NULL);
        if (rc) rc = nds_err_prefix(rc, "versioned store %s: deleting %s", vs_store_url(g->s), key);
    }
    return rc;
}

/* Says the deletions of this run are all done, so the next run need not repeat them. */
static int mark_done(gc_run *g) {
    char key[VS_OBJECT_KEY_MAX];
    done_key(g->seq, key);
    int rc = nds_kvstore_write(g->base, key, "", 0, NULL, NULL);
    return rc ? nds_err_prefix(rc, "versioned store %s: writing %s", vs_store_url(g->s), key) : 0;
}

static int run(gc_run *g) {
    int rc = load_previous(g);
    g->result->full_scan = g->full;
    g->from = g->full ? 1 : g->prev.version + 1;
    if (!rc) rc = read_history(g);
    if (!rc) rc = list_tags(g);
    if (!rc) rc = finish_previous(g);
    if (!rc) update_times(g);
    if (!rc) rc = list_objects(g);
    if (!rc) rc = choose(g);
    if (rc || g->o->dry_run) return rc;
    rc = write_state(g);
    if (!rc) rc = delete_chosen(g);
    /* Objects a late tag saved are left for the next run to track again, or to delete when the
     * tag was withdrawn: without the mark it looks at every one. */
    if (!rc && !g->skipped) rc = mark_done(g);
    if (!rc) rc = delete_old_states(g);
    return rc;
}

int vs_gc_run(vs_store *s, const nds_gc_options *opts, nds_gc_result *result) {
    nds_gc_options o = opts ? *opts : (nds_gc_options)NDS_GC_OPTIONS_INIT;
    memset(result, 0, sizeof *result);
    vs_snapshot latest;
    if (o.keep_last == 0 && o.older_than_ms < 0)
        return nds_err(NDS_EINVAL, "gc: say what to keep (keep_last or older_than)");
    if (o.grace_ms < 0) return nds_err(NDS_EINVAL, "gc: grace_ms must be >= 0");
    int rc = vs_store_latest(s, &latest);
    if (rc) return rc;
    gc_run g = {.s = s,
                .base = vs_store_base(s),
                .o = &o,
                .result = result,
                .now_ns = wall_ns(),
                .latest = latest.version,
                .buckets = calloc(GC_BUCKETS, sizeof(gc_entry *))};
    rc = g.buckets ? run(&g) : nds_err(NDS_ENOMEM, "versioned store gc: out of memory");
    free_entries(&g);
    vs_gc_state_dispose(&g.prev);
    free(g.state_seqs);
    free(g.tree);
    free(g.tags);
    free(g.collected);
    return rc;
}
