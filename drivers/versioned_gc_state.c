/* The garbage collector's state object (docs/versioned-format.md "GC state"): what one gc run
 * leaves for the next, so the next reads only the commits after it.
 *
 * Byte layout: one envelope of kind 'G' (versioned_internal.h), binary payload, integers
 * little-endian:
 *   seq (u64) | version (u64) | time_ns (i64) | flags (u32)
 *   | ncollected (u64) | ncollected x (first u64 | last u64)
 *   | nobjects (u64) | nobjects x object record | ndeleting (u64) | ndeleting x object record
 *   | npending (u64) | npending x orphan record | ndoomed (u64) | ndoomed x orphan record
 * object record (73 bytes): id (16) | kind (u8: 0 data, 1 index) | created (u64) | dead_at (u64)
 *   | total (u64) | superseded (u64) | max_time_ns (i64) | dead_time_ns (i64) | size (u64)
 * orphan record (33 bytes): id (16) | kind (u8: 0 data, 1 index, 2 prepared) | first_seen_ns (i64)
 *   | size (u64)
 *
 * Threading: reentrant. Ownership: a decoded state owns its arrays (vs_gc_state_dispose).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "versioned_internal.h"
#include "internal/error.h"
#include "internal/util.h"

#define STATE_HEAD_SIZE (8 + 8 + 8 + 4)
#define RANGE_SIZE 16
#define OBJECT_SIZE (VS_ID_SIZE + 1 + 7 * 8)
#define ORPHAN_SIZE (VS_ID_SIZE + 1 + 8 + 8)

void vs_gc_state_key(uint64_t seq, char out[VS_OBJECT_KEY_MAX]) {
    snprintf(out, VS_OBJECT_KEY_MAX, VS_GC_STATE_PREFIX "%020" PRIu64, seq);
}

int vs_gc_state_key_parse(const char *key, uint64_t *seq) {
    size_t plen = strlen(VS_GC_STATE_PREFIX);
    if (!key || strncmp(key, VS_GC_STATE_PREFIX, plen) != 0 || strlen(key) != plen + 20) return -1;
    uint64_t v = 0;
    for (const char *d = key + plen; *d; d++) {
        if (*d < '0' || *d > '9') return -1;
        unsigned digit = (unsigned)(*d - '0');
        if (v > (UINT64_MAX - digit) / 10) return -1;
        v = v * 10 + digit;
    }
    *seq = v;
    return 0;
}

/* ---- checks shared by encode and decode -------------------------------------------------------
 */

static int check_ranges(const vs_gc_state *s, const char *where) {
    for (size_t i = 0; i < s->ncollected; i++) {
        const vs_gc_range *r = &s->collected[i];
        if (r->first < 1 || r->first > r->last || r->last > s->version ||
            (i > 0 && r->first <= s->collected[i - 1].last + 1))
            return nds_err(NDS_ECORRUPT,
                           "%s: collected range %zu (%" PRIu64 "-%" PRIu64
                           ") is not sorted, merged and within versions 1-%" PRIu64,
                           where, i, r->first, r->last, s->version);
    }
    return 0;
}

static int check_object(const vs_gc_state *s, const vs_gc_object *o, const char *list, size_t i,
                        const char *where) {
    if (o->kind != VS_OBJECT_DATA && o->kind != VS_OBJECT_INDEX)
        return nds_err(NDS_ECORRUPT, "%s: %s object %zu: unknown kind %d", where, list, i,
                       (int)o->kind);
    if (o->created < 1 || o->created > s->version ||
        (o->dead_at && (o->dead_at <= o->created || o->dead_at > s->version)))
        return nds_err(NDS_ECORRUPT,
                       "%s: %s object %zu: created at %" PRIu64 ", dead at %" PRIu64
                       " is impossible in a state of version %" PRIu64,
                       where, list, i, o->created, o->dead_at, s->version);
    return 0;
}

static int check_orphan(const vs_gc_orphan *o, const char *list, size_t i, const char *where) {
    if (o->kind != VS_GC_ORPHAN_DATA && o->kind != VS_GC_ORPHAN_INDEX &&
        o->kind != VS_GC_ORPHAN_PREPARED)
        return nds_err(NDS_ECORRUPT, "%s: %s orphan %zu: unknown kind %d", where, list, i,
                       (int)o->kind);
    return 0;
}

static int check_state(const vs_gc_state *s, const char *where) {
    if (s->seq < 1) return nds_err(NDS_ECORRUPT, "%s: state sequence number 0", where);
    int rc = check_ranges(s, where);
    for (size_t i = 0; !rc && i < s->nobjects; i++)
        rc = check_object(s, &s->objects[i], "tracked", i, where);
    for (size_t i = 0; !rc && i < s->ndeleting; i++)
        rc = check_object(s, &s->deleting[i], "deleting", i, where);
    for (size_t i = 0; !rc && i < s->npending; i++)
        rc = check_orphan(&s->pending[i], "pending", i, where);
    for (size_t i = 0; !rc && i < s->ndoomed; i++)
        rc = check_orphan(&s->doomed[i], "doomed", i, where);
    return rc;
}

/* ---- encode -------------------------------------------------------------------------------------
 */

static uint8_t *put64(uint8_t *w, uint64_t v) {
    nds_store_le64(w, v);
    return w + 8;
}

static uint8_t *put_object(uint8_t *w, const vs_gc_object *o) {
    memcpy(w, o->id.b, VS_ID_SIZE);
    w[VS_ID_SIZE] = (uint8_t)o->kind;
    w += VS_ID_SIZE + 1;
    w = put64(w, o->created);
    w = put64(w, o->dead_at);
    w = put64(w, o->total);
    w = put64(w, o->superseded);
    w = put64(w, (uint64_t)o->max_time_ns);
    w = put64(w, (uint64_t)o->dead_time_ns);
    return put64(w, o->size);
}

static uint8_t *put_orphan(uint8_t *w, const vs_gc_orphan *o) {
    memcpy(w, o->id.b, VS_ID_SIZE);
    w[VS_ID_SIZE] = (uint8_t)o->kind;
    w += VS_ID_SIZE + 1;
    w = put64(w, (uint64_t)o->first_seen_ns);
    return put64(w, o->size);
}

int vs_gc_state_encode(const vs_gc_state *s, nds_buf *out) {
    if (check_state(s, "versioned: gc state to write")) return NDS_EINVAL; /* message set */
    uint64_t size = STATE_HEAD_SIZE + 5 * 8 + (uint64_t)s->ncollected * RANGE_SIZE +
                    (uint64_t)(s->nobjects + s->ndeleting) * OBJECT_SIZE +
                    (uint64_t)(s->npending + s->ndoomed) * ORPHAN_SIZE;
    if (size > UINT32_MAX)
        return nds_err(NDS_ELIMIT, "versioned: gc state of %" PRIu64 " bytes exceeds 4 GiB", size);
    uint8_t *payload = malloc(size);
    if (!payload) return nds_err(NDS_ENOMEM, "versioned: out of memory encoding the gc state");
    uint8_t *w = payload;
    w = put64(w, s->seq);
    w = put64(w, s->version);
    w = put64(w, (uint64_t)s->time_ns);
    nds_store_le32(w, s->flags);
    w = put64(w + 4, s->ncollected);
    for (size_t i = 0; i < s->ncollected; i++) {
        w = put64(w, s->collected[i].first);
        w = put64(w, s->collected[i].last);
    }
    w = put64(w, s->nobjects);
    for (size_t i = 0; i < s->nobjects; i++) w = put_object(w, &s->objects[i]);
    w = put64(w, s->ndeleting);
    for (size_t i = 0; i < s->ndeleting; i++) w = put_object(w, &s->deleting[i]);
    w = put64(w, s->npending);
    for (size_t i = 0; i < s->npending; i++) w = put_orphan(w, &s->pending[i]);
    w = put64(w, s->ndoomed);
    for (size_t i = 0; i < s->ndoomed; i++) w = put_orphan(w, &s->doomed[i]);
    int rc = vs_envelope_append(out, VS_KIND_GC_STATE, payload, (size_t)size, NULL);
    free(payload);
    return rc;
}

/* ---- decode -------------------------------------------------------------------------------------
 */

typedef struct cursor {
    const uint8_t *p;
    size_t left;
    const char *where;
} cursor;

static uint64_t get64(cursor *c) {
    uint64_t v = nds_load_le64(c->p);
    c->p += 8;
    c->left -= 8;
    return v;
}

/* Reads a count of records of record_size bytes; the records must fit in what is left (so a
 * hostile count cannot make the allocation large). */
static int get_count(cursor *c, size_t record_size, const char *what, size_t *n) {
    if (c->left < 8)
        return nds_err(NDS_ECORRUPT, "%s: gc state ends before the %s count", c->where, what);
    uint64_t v = get64(c);
    if (v > c->left / record_size)
        return nds_err(NDS_ECORRUPT,
                       "%s: gc state claims %" PRIu64 " %s (%zu bytes each) but %zu bytes are left",
                       c->where, v, what, record_size, c->left);
    *n = (size_t)v;
    return 0;
}

static void get_object(cursor *c, vs_gc_object *o) {
    memcpy(o->id.b, c->p, VS_ID_SIZE);
    o->kind = (vs_object_kind)c->p[VS_ID_SIZE];
    c->p += VS_ID_SIZE + 1;
    c->left -= VS_ID_SIZE + 1;
    o->created = get64(c);
    o->dead_at = get64(c);
    o->total = get64(c);
    o->superseded = get64(c);
    o->max_time_ns = (int64_t)get64(c);
    o->dead_time_ns = (int64_t)get64(c);
    o->size = get64(c);
}

static void get_orphan(cursor *c, vs_gc_orphan *o) {
    memcpy(o->id.b, c->p, VS_ID_SIZE);
    o->kind = (vs_gc_orphan_kind)c->p[VS_ID_SIZE];
    c->p += VS_ID_SIZE + 1;
    c->left -= VS_ID_SIZE + 1;
    o->first_seen_ns = (int64_t)get64(c);
    o->size = get64(c);
}

/* Allocates n records (at least one byte, so NULL means out of memory). */
static int alloc_records(void **out, size_t n, size_t size, const char *where) {
    *out = calloc(n ? n : 1, size);
    return *out ? 0 : nds_err(NDS_ENOMEM, "%s: out of memory", where);
}

static int get_objects(cursor *c, const char *what, vs_gc_object **out, size_t *n) {
    int rc = get_count(c, OBJECT_SIZE, what, n);
    if (!rc) rc = alloc_records((void **)out, *n, sizeof **out, c->where);
    for (size_t i = 0; !rc && i < *n; i++) get_object(c, &(*out)[i]);
    return rc;
}

static int get_orphans(cursor *c, const char *what, vs_gc_orphan **out, size_t *n) {
    int rc = get_count(c, ORPHAN_SIZE, what, n);
    if (!rc) rc = alloc_records((void **)out, *n, sizeof **out, c->where);
    for (size_t i = 0; !rc && i < *n; i++) get_orphan(c, &(*out)[i]);
    return rc;
}

static int decode_payload(cursor *c, uint64_t expect_seq, vs_gc_state *s) {
    if (c->left < STATE_HEAD_SIZE)
        return nds_err(NDS_ECORRUPT, "%s: gc state payload of %zu bytes is too short", c->where,
                       c->left);
    s->seq = get64(c);
    s->version = get64(c);
    s->time_ns = (int64_t)get64(c);
    s->flags = nds_load_le32(c->p);
    c->p += 4;
    c->left -= 4;
    if (expect_seq && s->seq != expect_seq)
        return nds_err(NDS_ECORRUPT, "%s: gc state says it is number %" PRIu64 ", not %" PRIu64,
                       c->where, s->seq, expect_seq);
    if (s->flags & ~VS_GC_STATE_FULL_SCAN)
        return nds_err(NDS_ECORRUPT, "%s: gc state has unknown flags 0x%x", c->where,
                       (unsigned)s->flags);
    int rc = get_count(c, RANGE_SIZE, "collected ranges", &s->ncollected);
    if (!rc) rc = alloc_records((void **)&s->collected, s->ncollected, RANGE_SIZE, c->where);
    for (size_t i = 0; !rc && i < s->ncollected; i++) {
        s->collected[i].first = get64(c);
        s->collected[i].last = get64(c);
    }
    if (!rc) rc = get_objects(c, "tracked objects", &s->objects, &s->nobjects);
    if (!rc) rc = get_objects(c, "deleting objects", &s->deleting, &s->ndeleting);
    if (!rc) rc = get_orphans(c, "pending orphans", &s->pending, &s->npending);
    if (!rc) rc = get_orphans(c, "doomed orphans", &s->doomed, &s->ndoomed);
    if (!rc && c->left)
        rc = nds_err(NDS_ECORRUPT, "%s: %zu bytes after the gc state's last record", c->where,
                     c->left);
    return rc ? rc : check_state(s, c->where);
}

int vs_gc_state_decode(const uint8_t *p, size_t n, uint64_t expect_seq, const char *where,
                       vs_gc_state *out) {
    memset(out, 0, sizeof *out);
    if (!where) where = "gc state";
    const uint8_t *payload = NULL;
    size_t len = 0;
    uint32_t crc = 0;
    int rc = vs_envelope_open(p, n, VS_KIND_GC_STATE, where, &payload, &len, &crc);
    if (rc) return rc;
    cursor c = {payload, len, where};
    rc = decode_payload(&c, expect_seq, out);
    if (rc) vs_gc_state_dispose(out);
    return rc;
}

void vs_gc_state_dispose(vs_gc_state *s) {
    if (!s) return;
    free(s->collected);
    free(s->objects);
    free(s->deleting);
    free(s->pending);
    free(s->doomed);
    memset(s, 0, sizeof *s);
}

bool vs_gc_state_collected(const vs_gc_state *s, uint64_t v) {
    size_t lo = 0, hi = s->ncollected;
    while (lo < hi) { /* the first range whose last >= v */
        size_t mid = lo + (hi - lo) / 2;
        if (s->collected[mid].last < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < s->ncollected && s->collected[lo].first <= v;
}
