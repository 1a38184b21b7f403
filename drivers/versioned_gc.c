/* Garbage collection of a versioned store (nds_versioned_gc, docs/versioned-format.md "Garbage
 * collection").
 *
 * Which objects are dead is read from the history, not from the trees: each commit lists the objects
 * it made reachable with their item counts, and its superseded list how many items of which objects
 * it stopped referencing. An object created at version c whose last item was superseded at version d
 * is referenced by exactly the versions [c, d); it is deleted when no kept version falls in that
 * range and d was committed more than the grace period ago. Objects no commit lists (a killed
 * writer's, a lost race's, prepared sets) have no age in the store, so they are collected in two
 * runs: a run records them in "gc/pending/<time>", and a run at least the grace period later deletes
 * those still unreferenced. Commit objects are kept (they are the log); versions whose objects are
 * gone stay in the log and fail to open with a message naming the missing object.
 *
 * Cost: one read per commit and per superseded list, plus listings of data/, index/ and prepared/
 * (the trees are never walked). Threading: one run at a time per store is expected (two runs only
 * repeat each other's deletes). Ownership: everything is freed before returning.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "ndstore/versioned.h"
#include "versioned_store.h"
#include "internal/error.h"
#include "internal/json_util.h"
#include "internal/util.h"

#define GC_BUCKETS 65536
#define GC_PENDING_PREFIX "gc/pending/"

typedef struct gc_object {
    vs_id id;
    vs_object_kind kind;
    uint64_t created, total, superseded, dead_at; /* dead_at 0: still referenced */
    struct gc_object *next;
} gc_object;

typedef struct gc_run {
    vs_store *s;
    const nds_gc_options *o;
    int64_t now_ns;
    uint64_t latest;
    int64_t *times;   /* commit time of versions 1..latest (index v) */
    bool *kept;       /* per version */
    gc_object **buckets;
    nds_gc_result *result;
} gc_run;

static int64_t wall_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static size_t bucket_of(const vs_id *id, vs_object_kind kind) {
    uint64_t h = 1469598103934665603ull ^ (uint64_t)kind;
    for (int i = 0; i < VS_ID_SIZE; i++) h = (h ^ id->b[i]) * 1099511628211ull;
    return (size_t)(h % GC_BUCKETS);
}

static gc_object *find_object(gc_run *g, const vs_id *id, vs_object_kind kind) {
    for (gc_object *o = g->buckets[bucket_of(id, kind)]; o; o = o->next)
        if (o->kind == kind && memcmp(&o->id, id, sizeof *id) == 0) return o;
    return NULL;
}

static int add_object(gc_run *g, const vs_object_count *oc, uint64_t version) {
    gc_object *o = find_object(g, &oc->object, oc->kind);
    if (o) { /* counted by two commits: the later adds its items (prepared data objects) */
        o->total += oc->items;
        return 0;
    }
    if (!(o = calloc(1, sizeof *o))) return nds_err(NDS_ENOMEM, "out of memory");
    *o = (gc_object){oc->object, oc->kind, version, oc->items, 0, 0, NULL};
    size_t b = bucket_of(&oc->object, oc->kind);
    o->next = g->buckets[b];
    g->buckets[b] = o;
    return 0;
}

/* Reads commit v's superseded list and counts it against the objects. */
static int apply_superseded(gc_run *g, const vs_commit *c) {
    if (!c->has_superseded) return 0;
    char key[VS_OBJECT_KEY_MAX], where[VS_OBJECT_KEY_MAX + 600];
    vs_object_key(VS_INDEX_PREFIX, &c->superseded.object, key);
    snprintf(where, sizeof where, "versioned store %s: superseded list of version %" PRIu64 " in %s",
             vs_store_url(g->s), c->version, key);
    nds_read_options ro = NDS_READ_OPTIONS_INIT;
    ro.byte_start = (int64_t)c->superseded.offset;
    ro.byte_length = (int64_t)c->superseded.length;
    nds_read_result r;
    int rc = nds_kvstore_read(vs_store_base(g->s), key, &ro, &r);
    if (rc) return nds_err_prefix(rc, "%s", where);
    if (r.state != NDS_READ_VALUE) {
        nds_read_result_dispose(&r);
        return 0; /* the version's own index object is gone: collected before */
    }
    vs_superseded *list = NULL;
    size_t n = 0;
    rc = vs_superseded_decode(r.value.data, r.value.len, c->superseded.crc, where, &list, &n);
    nds_read_result_dispose(&r);
    for (size_t i = 0; !rc && i < n; i++) {
        gc_object *o = find_object(g, &list[i].object, list[i].kind);
        if (!o) continue; /* created by a version no longer read (cannot happen: all are) */
        o->superseded += list[i].items;
        if (o->superseded >= o->total && !o->dead_at) o->dead_at = c->version;
    }
    free(list);
    return rc;
}

/* Reads every commit: objects, superseded lists, times. */
static int read_history(gc_run *g) {
    for (uint64_t v = 1; v <= g->latest; v++) {
        vs_commit c;
        int rc = vs_store_commit_info(g->s, v, &c);
        if (rc) return rc;
        g->times[v] = c.time_ns;
        for (size_t i = 0; !rc && i < c.nobjects; i++) rc = add_object(g, &c.objects[i], v);
        if (!rc) rc = apply_superseded(g, &c);
        vs_commit_dispose(&c);
        if (rc) return rc;
    }
    return 0;
}

static int keep_tag(void *ctx, const char *key, uint64_t size) {
    (void)size;
    gc_run *g = ctx;
    uint64_t v;
    if (vs_store_tag(g->s, key + strlen(VS_TAG_PREFIX), &v) == 0 && v >= 1 && v <= g->latest)
        g->kept[v] = true;
    return 0;
}

/* The latest version, tagged versions, and what the options keep. */
static int choose_kept(gc_run *g) {
    g->kept[g->latest] = true;
    for (uint64_t v = 1; v <= g->latest; v++) {
        if (g->o->keep_last && v + g->o->keep_last > g->latest) g->kept[v] = true;
        if (g->o->older_than_ms >= 0 &&
            g->times[v] >= g->now_ns - g->o->older_than_ms * (int64_t)1000000)
            g->kept[v] = true;
    }
    int rc = nds_kvstore_list(vs_store_base(g->s), VS_TAG_PREFIX, keep_tag, g);
    for (uint64_t v = 1; v <= g->latest; v++) g->result->versions_kept += g->kept[v];
    return rc;
}

static int delete_object(gc_run *g, const char *key, uint64_t size) {
    g->result->objects_deleted++;
    g->result->bytes_deleted += size == UINT64_MAX ? 0 : size;
    if (g->o->dry_run) return 0;
    int rc = nds_kvstore_delete(vs_store_base(g->s), key, NULL);
    return rc ? nds_err_prefix(rc, "versioned store %s: deleting %s", vs_store_url(g->s), key) : 0;
}

/* A listed object's fate: dead and unkept -> deleted; unlisted by any commit -> a candidate. */
typedef struct sweep {
    gc_run *g;
    vs_object_kind kind;
    const char *prefix;
    json_object *candidates; /* keys of unreferenced objects seen now */
    json_object *old;        /* candidates of runs older than the grace period */
    int rc;
} sweep;

static bool kept_between(const gc_run *g, uint64_t from, uint64_t to_excl) {
    for (uint64_t v = from; v < to_excl && v <= g->latest; v++)
        if (g->kept[v]) return true;
    return false;
}

static bool was_candidate(const json_object *old, const char *key) {
    for (size_t i = 0; old && i < json_object_array_length(old); i++)
        if (strcmp(json_object_get_string(json_object_array_get_idx(old, i)), key) == 0)
            return true;
    return false;
}

static int sweep_one(void *ctx, const char *key, uint64_t size) {
    sweep *w = ctx;
    gc_run *g = w->g;
    vs_id id;
    if (vs_id_parse(key + strlen(w->prefix), &id) != 0) return 0; /* not ours: leave it */
    gc_object *o = w->kind == (vs_object_kind)-1 ? NULL : find_object(g, &id, w->kind);
    if (o) {
        bool dead = o->dead_at && !kept_between(g, o->created, o->dead_at) &&
                    g->times[o->dead_at] < g->now_ns - g->o->grace_ms * (int64_t)1000000;
        return dead ? (w->rc = delete_object(g, key, size)) : 0;
    }
    if (was_candidate(w->old, key)) return w->rc = delete_object(g, key, size);
    json_object_array_add(w->candidates, json_object_new_string(key));
    return 0;
}

/* Reads the pending lists: those older than the grace period give the candidates to delete now
 * (and are deleted after the sweep); keys are collected into *old_keys. */
typedef struct pending {
    gc_run *g;
    json_object *old;  /* candidate keys */
    json_object *done; /* pending list keys to delete */
} pending;

static int read_pending(void *ctx, const char *key, uint64_t size) {
    (void)size;
    pending *p = ctx;
    gc_run *g = p->g;
    long long t = atoll(key + strlen(GC_PENDING_PREFIX));
    if ((int64_t)t >= g->now_ns - g->o->grace_ms * (int64_t)1000000) return 0;
    nds_read_result r;
    int rc = nds_kvstore_read(vs_store_base(g->s), key, NULL, &r);
    if (rc) return rc;
    json_object *list = NULL;
    if (r.state == NDS_READ_VALUE &&
        nds_json_parse((const char *)r.value.data, r.value.len, key, &list) == 0 &&
        json_object_is_type(list, json_type_array))
        for (size_t i = 0; i < json_object_array_length(list); i++)
            json_object_array_add(p->old, json_object_get(json_object_array_get_idx(list, i)));
    json_object_put(list);
    nds_read_result_dispose(&r);
    json_object_array_add(p->done, json_object_new_string(key));
    return 0;
}

static int write_pending(gc_run *g, json_object *candidates) {
    if (json_object_array_length(candidates) == 0 || g->o->dry_run) return 0;
    char key[64];
    snprintf(key, sizeof key, "%s%020" PRId64, GC_PENDING_PREFIX, g->now_ns);
    const char *text = json_object_to_json_string_ext(candidates, JSON_C_TO_STRING_PLAIN);
    int rc = nds_kvstore_write(vs_store_base(g->s), key, text, strlen(text), NULL, NULL);
    g->result->objects_pending = json_object_array_length(candidates);
    return rc ? nds_err_prefix(rc, "versioned store %s: writing %s", vs_store_url(g->s), key) : 0;
}

static int sweep_all(gc_run *g) {
    pending p = {g, json_object_new_array(), json_object_new_array()};
    json_object *candidates = json_object_new_array();
    int rc = nds_kvstore_list(vs_store_base(g->s), GC_PENDING_PREFIX, read_pending, &p);
    static const struct {
        const char *prefix;
        int kind;
    } kinds[] = {{VS_DATA_PREFIX, VS_OBJECT_DATA},
                 {VS_INDEX_PREFIX, VS_OBJECT_INDEX},
                 {VS_PREPARED_PREFIX, -1}};
    for (size_t k = 0; !rc && k < sizeof kinds / sizeof *kinds; k++) {
        sweep w = {g, (vs_object_kind)kinds[k].kind, kinds[k].prefix, candidates, p.old, 0};
        rc = nds_kvstore_list(vs_store_base(g->s), kinds[k].prefix, sweep_one, &w);
        if (!rc) rc = w.rc;
    }
    if (!rc) rc = write_pending(g, candidates);
    for (size_t i = 0; !rc && !g->o->dry_run && i < json_object_array_length(p.done); i++)
        rc = nds_kvstore_delete(vs_store_base(g->s),
                                json_object_get_string(json_object_array_get_idx(p.done, i)), NULL);
    json_object_put(p.old);
    json_object_put(p.done);
    json_object_put(candidates);
    return rc;
}

static void free_objects(gc_run *g) {
    for (size_t b = 0; g->buckets && b < GC_BUCKETS; b++)
        for (gc_object *o = g->buckets[b], *next; o; o = next) {
            next = o->next;
            free(o);
        }
    free(g->buckets);
}

int nds_versioned_gc(nds_kvstore *kv, const nds_gc_options *opts, nds_gc_result *result) {
    nds_gc_options o = opts ? *opts : (nds_gc_options)NDS_GC_OPTIONS_INIT;
    memset(result, 0, sizeof *result);
    vs_snapshot view, latest;
    vs_store *s = vs_store_of(kv, &view);
    if (!s) return NDS_EINVAL;
    if (o.keep_last == 0 && o.older_than_ms < 0)
        return nds_err(NDS_EINVAL, "gc: say what to keep (keep_last or older_than)");
    int rc = vs_store_latest(s, &latest);
    if (rc) return rc;
    gc_run g = {s, &o, wall_ns(), latest.version, calloc(latest.version + 1, sizeof(int64_t)),
                calloc(latest.version + 1, sizeof(bool)), calloc(GC_BUCKETS, sizeof(gc_object *)),
                result};
    if (!g.times || !g.kept || !g.buckets) rc = nds_err(NDS_ENOMEM, "out of memory");
    if (!rc) rc = read_history(&g);
    if (!rc) rc = choose_kept(&g);
    if (!rc) rc = sweep_all(&g);
    result->versions_collected = latest.version - result->versions_kept;
    free(g.times);
    free(g.kept);
    free_objects(&g);
    return rc;
}
