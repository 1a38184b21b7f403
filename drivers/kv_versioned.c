/* The "versioned" kvstore adapter: history and atomic multi-key commits over any base kvstore that
 * has create-only writes (docs/versioned-format.md, docs/kvstores.md).
 *
 * Spec: {"driver":"versioned","base":<kvstore spec object or URL>,"path":"p/",
 *        "version":N | "tag":"name" | "time":"2026-11-27T10:00:00Z"}. URL: a pipeline segment
 * after the base's URL, "file:///ckpt/|versioned:" or "file:///ckpt/|versioned:@12/p/" ("@N",
 * "@TAG", "@latest" or "@TIME" (UTC, ISO 8601: the newest version committed at or before it),
 * then the path). The base's path is the store's root; the adapter's keys live in its versions.
 *
 * A process sees one version of a store at a time, through every handle it has open on it (they
 * share one state): the latest one when the first of them was opened, then each version its own
 * commits make, and the latest again after a commit loses a condition (so a re-read sees what beat
 * it) or nds_versioned_refresh. "version", "tag" or "time" pins handles to that version, read-only. Every write is a commit:
 * write/delete one key each, publish (the array layer's batches) and commit (transactions) many
 * keys as one version, all-or-nothing for commit.
 *
 * Generations are "v<N>": the version that wrote the key's value.
 *
 * Threading: internally synchronised (the handle's view under mu; the engine's own locks).
 * Ownership: the state owns its engine and base handle; staged values own copies of their bytes.
 * read's ranges form reads whole checksum blocks straight into the caller's buffers (the base's
 * ranges form) and checks them there; runs of ranges that follow each other read as one. A base without atomic create-only writes (what the
 * opened instance has: kv_driver.h instance_capabilities) is refused at open, saying why.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "ndstore/versioned.h"
#include "versioned_store.h"
#include "internal/error.h"
#include "internal/json_util.h"
#include "internal/kvstore_internal.h"
#include "internal/util.h"


typedef struct vk_state {
    json_object *ident; /* the spec without "path": which store this is */
    pid_t pid;          /* of the opener */
    int refs;           /* handles' instances sharing this state (under g_states_mu) */
    struct vk_state *next;
    vs_store *store;
    nds_kvstore *base;
    bool pinned;
    char *selector; /* "12" or a tag, when pinned */
    pthread_mutex_t mu;
    vs_snapshot view;
    char *url_base;
} vk_state;

/* ---- spec and URL ------------------------------------------------------------------------------ */

/* REST of "|versioned:REST": "[@SELECTOR[/]]PATH". */
static int vk_parse_url(const char *rest, json_object *spec) {
    const char *path = rest;
    if (*rest == '@') {
        const char *slash = strchr(rest, '/');
        size_t n = slash ? (size_t)(slash - rest - 1) : strlen(rest + 1);
        char *sel = strndup(rest + 1, n);
        if (!sel) return nds_err(NDS_ENOMEM, "out of memory");
        bool digits = n > 0 && strspn(sel, "0123456789") == n;
        int rc = 0;
        if (n == 0) rc = nds_err(NDS_EINVAL, "versioned url: \"@\" without a version or tag");
        else if (digits && n <= 19)
            json_object_object_add(spec, "version",
                                   json_object_new_int64((int64_t)strtoull(sel, NULL, 10)));
        else if (digits) rc = nds_err(NDS_EINVAL, "versioned url: version %s is too large", sel);
        else if (strchr(sel, ':')) /* a time: ':' is in no tag name */
            json_object_object_add(spec, "time", json_object_new_string(sel));
        else if (strcmp(sel, "latest") != 0)
            json_object_object_add(spec, "tag", json_object_new_string(sel));
        free(sel);
        if (rc) return rc;
        path = slash ? slash + 1 : "";
    }
    json_object_object_add(spec, "path", json_object_new_string(path));
    return 0;
}

static int check_members(const json_object *spec) {
    static const char *const known[] = {"driver", "path", "base", "version", "tag", "time"};
    json_object_object_foreach((json_object *)spec, key, val) {
        (void)val;
        bool ok = false;
        for (size_t i = 0; i < sizeof known / sizeof *known; i++) ok |= strcmp(key, known[i]) == 0;
        if (!ok) return nds_err(NDS_EINVAL, "versioned kvstore spec: unknown member \"%s\"", key);
    }
    json_object *base = NULL;
    if (!json_object_object_get_ex(spec, "base", &base) ||
        !(json_object_is_type(base, json_type_object) ||
          json_object_is_type(base, json_type_string)))
        return nds_err(NDS_EINVAL,
                       "versioned kvstore spec: \"base\" (a kvstore spec object or URL) is "
                       "required");
    int selectors = json_object_object_get_ex(spec, "version", NULL) +
                    json_object_object_get_ex(spec, "tag", NULL) +
                    json_object_object_get_ex(spec, "time", NULL);
    if (selectors > 1)
        return nds_err(NDS_EINVAL,
                       "versioned kvstore spec: give one of \"version\", \"tag\" and \"time\"");
    return 0;
}

/* A store that commits needs a base whose create-only writes are atomic: refused here, at open,
 * rather than at its first commit. What the base has can depend on the instance (s3: its
 * "conditional_writes", and what its server supports), so the base finds out now (s3 probes next
 * to the hint, once per process per endpoint). A pinned store never writes, and neither does a
 * base that is read-only; a base whose credentials may not write (the probe refused) is left to
 * fail at its first write, so read-only users can still read the latest version. */
static int check_base_writes(nds_kvstore *base, const json_object *spec) {
    if ((nds_kvstore_capabilities(base) & NDS_KV_CAP_READ_ONLY) ||
        json_object_object_get_ex(spec, "version", NULL) ||
        json_object_object_get_ex(spec, "tag", NULL) || json_object_object_get_ex(spec, "time", NULL))
        return 0;
    uint32_t caps;
    char why[768];
    int rc = nds_kvstore_capabilities_detect(base, VS_HEAD_HINT, &caps, why, sizeof why);
    if (rc == NDS_EPERM) return 0;
    if (rc)
        return nds_err_prefix(rc, "finding out whether its base %s has create-only writes",
                              nds_kvstore_url(base));
    if (caps & NDS_KV_CAP_ATOMIC_CONDITIONAL_WRITE) return 0;
    /* the core prefixes "versioned kvstore: " */
    return nds_err(NDS_EUNSUPPORTED,
                   "its base %s lacks atomic create-only writes, which decide who commits each "
                   "version, so it cannot hold a versioned store%s%s",
                   nds_kvstore_url(base), why[0] ? ": " : "", why);
}

static int open_base(const json_object *spec, nds_kvstore **out) {
    json_object *base = json_object_object_get((json_object *)spec, "base");
    char *text = json_object_is_type(base, json_type_string)
                     ? nds_strdup(json_object_get_string(base))
                     : nds_json_to_string(base, false);
    if (!text) return nds_err(NDS_ENOMEM, "out of memory");
    int rc = nds_kvstore_open(out, text, NULL);
    free(text);
    if (rc) return nds_err_prefix(rc, "versioned store: base");
    if ((rc = check_base_writes(*out, spec))) {
        nds_kvstore_free(*out);
        *out = NULL; /* the caller's state_free frees it too */
    }
    return rc;
}

/* Parses "YYYY-MM-DDTHH:MM:SS[.fraction]Z" (UTC) into ns since the epoch; -1 when malformed. */
static int parse_utc(const char *text, int64_t *ns) {
    struct tm tm = {0};
    const char *p = strptime(text, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!p) return -1;
    int64_t frac = 0, scale = 1000000000;
    if (*p == '.') {
        for (p++; *p >= '0' && *p <= '9'; p++)
            if (scale > 1) frac += (*p - '0') * (scale /= 10);
    }
    if (strcmp(p, "Z") != 0) return -1;
    time_t secs = timegm(&tm);
    if (secs == (time_t)-1 || secs < 0 || secs > INT64_MAX / 1000000000 - 1) return -1;
    *ns = (int64_t)secs * 1000000000 + frac;
    return 0;
}

/* The newest version whose commit time is at or before the "time" member: walks the log down
 * from the latest (commit times are the committers' clocks, so the first one at or before it). */
static int version_at_time(vk_state *st, const char *text, uint64_t *out) {
    int64_t at;
    if (parse_utc(text, &at))
        return nds_err(NDS_EINVAL,
                       "versioned kvstore %s: time \"%s\" is not a UTC time like "
                       "2026-11-27T10:00:00Z",
                       vs_store_url(st->store), text);
    vs_snapshot latest;
    int rc = vs_store_latest(st->store, &latest);
    for (uint64_t v = rc ? 0 : latest.version; !rc && v >= 1; v--) {
        vs_commit c;
        if ((rc = vs_store_commit_info(st->store, v, &c))) break;
        bool before = c.time_ns <= at;
        vs_commit_dispose(&c);
        if (before) {
            *out = v;
            return 0;
        }
    }
    return rc ? rc
              : nds_err(NDS_ENOTFOUND, "versioned store %s: no version was committed at or before %s",
                        vs_store_url(st->store), text);
}

/* Sets the handle's view: the pinned version, or the latest. */
static int open_view(vk_state *st, const json_object *spec) {
    json_object *v;
    if (json_object_object_get_ex(spec, "version", &v)) {
        int64_t n;
        if (nds_json_get_int(spec, "version", false, 0, INT64_MAX, "versioned kvstore spec", &n))
            return nds_err(NDS_EINVAL,
                           "versioned kvstore spec: \"version\" must be an integer >= 0");
        st->pinned = true;
        st->selector = nds_asprintf("%" PRId64, n);
        return st->selector ? vs_store_version(st->store, (uint64_t)n, &st->view)
                            : nds_err(NDS_ENOMEM, "out of memory");
    }
    if (json_object_object_get_ex(spec, "time", &v)) {
        const char *text;
        int rc = nds_json_get_string(spec, "time", false, "versioned kvstore spec", &text);
        uint64_t n = 0;
        if (!rc) rc = version_at_time(st, text, &n);
        if (!rc && !(st->selector = nds_strdup(text))) rc = nds_err(NDS_ENOMEM, "out of memory");
        st->pinned = true;
        return rc ? rc : vs_store_version(st->store, n, &st->view);
    }
    if (json_object_object_get_ex(spec, "tag", &v)) {
        const char *tag;
        int rc = nds_json_get_string(spec, "tag", false, "versioned kvstore spec", &tag);
        uint64_t n;
        if (!rc) rc = vs_store_tag(st->store, tag, &n);
        if (!rc && !(st->selector = nds_strdup(tag))) rc = nds_err(NDS_ENOMEM, "out of memory");
        st->pinned = true;
        return rc ? rc : vs_store_version(st->store, n, &st->view);
    }
    return vs_store_latest(st->store, &st->view);
}

/* Handles on the same store (equal spec, path aside) in one process share one state: one engine,
 * one node cache and one view, so every array of a checkpoint reads the same version and a
 * transaction's conflict moves the view of all its arrays. A forked child opens its own. */
static pthread_mutex_t g_states_mu = PTHREAD_MUTEX_INITIALIZER;
static vk_state *g_states;

static void state_free(vk_state *st) {
    vs_store_free(st->store);
    nds_kvstore_free(st->base);
    pthread_mutex_destroy(&st->mu);
    json_object_put(st->ident);
    free(st->selector);
    free(st->url_base);
    free(st);
}

static void vk_close(void *state) {
    vk_state *st = state;
    if (!st) return;
    pthread_mutex_lock(&g_states_mu);
    bool last = --st->refs == 0;
    if (last)
        for (vk_state **p = &g_states; *p; p = &(*p)->next)
            if (*p == st) {
                *p = st->next;
                break;
            }
    pthread_mutex_unlock(&g_states_mu);
    if (last) state_free(st);
}

static int state_new(const json_object *spec, json_object *ident, vk_state **out) {
    vk_state *st = calloc(1, sizeof *st);
    if (!st) {
        json_object_put(ident);
        return nds_err(NDS_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&st->mu, NULL);
    st->ident = ident;
    st->pid = getpid();
    st->refs = 1;
    int rc = open_base(spec, &st->base);
    if (!rc) rc = vs_store_open(&st->store, st->base, nds_kvstore_url(st->base));
    if (!rc) rc = open_view(st, spec);
    if (!rc) {
        st->url_base = st->pinned ? nds_asprintf("%s|versioned:@%s/", nds_kvstore_url(st->base),
                                                 st->selector)
                                  : nds_asprintf("%s|versioned:", nds_kvstore_url(st->base));
        if (!st->url_base) rc = nds_err(NDS_ENOMEM, "out of memory");
    }
    if (rc) {
        state_free(st);
        return rc;
    }
    *out = st;
    return 0;
}

static int vk_open(void **state, const json_object *spec) {
    int rc = check_members(spec);
    if (rc) return rc;
    json_object *ident = NULL;
    json_object_deep_copy((json_object *)spec, &ident, NULL);
    if (!ident) return nds_err(NDS_ENOMEM, "out of memory");
    json_object_object_del(ident, "path");
    pthread_mutex_lock(&g_states_mu); /* held while opening, so one store gets one state */
    vk_state *st = g_states;
    while (st && !(st->pid == getpid() && nds_json_equal(st->ident, ident))) st = st->next;
    if (st) {
        st->refs++;
        json_object_put(ident);
    } else if (!(rc = state_new(spec, ident, &st))) {
        st->next = g_states;
        g_states = st;
    }
    pthread_mutex_unlock(&g_states_mu);
    if (!rc) *state = st;
    return rc;
}

static void vk_url_base(void *state, char *buf, size_t cap) {
    snprintf(buf, cap, "%s", ((vk_state *)state)->url_base);
}

/* The base as its own (credential-free) spec, and the pin. */
static int vk_to_json(void *state, json_object *spec) {
    vk_state *st = state;
    json_object *base;
    int rc = nds_kvstore_spec_json(st->base, &base);
    if (rc) return rc;
    json_object_object_add(spec, "base", base);
    return 0;
}

/* ---- the view ------------------------------------------------------------------------------------ */

static vs_snapshot view_get(vk_state *st) {
    pthread_mutex_lock(&st->mu);
    vs_snapshot v = st->view;
    pthread_mutex_unlock(&st->mu);
    return v;
}

/* Moves the view forward (never back: another thread may have moved it further). */
static void view_advance(vk_state *st, const vs_snapshot *v) {
    pthread_mutex_lock(&st->mu);
    if (v->version > st->view.version) st->view = *v;
    pthread_mutex_unlock(&st->mu);
}

static int refuse_pinned(const vk_state *st) {
    return nds_err(NDS_EREADONLY,
                   "versioned store %s: opened at version %s, which is read-only (open the latest "
                   "version to write)",
                   vs_store_url(st->store), st->selector);
}

/* ---- reads --------------------------------------------------------------------------------------- */

/* Looks key up in the handle's view and fills out as a read finds it: MISSING (absent generation),
 * or VALUE with the key's generation and total size (*found: whether it exists). */
static int lookup_for_read(vk_state *st, const char *key, vs_entry *e, bool *found,
                           nds_read_result *out) {
    memset(out, 0, sizeof *out);
    vs_snapshot view = view_get(st);
    int rc = vs_store_lookup(st->store, &view, key, e, found);
    if (rc) return rc;
    out->state = *found ? NDS_READ_VALUE : NDS_READ_MISSING;
    out->generation.kind = NDS_GEN_ABSENT;
    if (*found) {
        vs_generation(e->version, &out->generation);
        out->total_size = e->is_inline ? e->len : e->value.length;
    }
    return 0;
}

/* The outcome of opts' conditions for the generation lookup_for_read found (out->state is VALUE
 * or MISSING before). */
static void apply_conditions(const nds_read_options *o, nds_read_result *out) {
    if (o->if_equal.kind != NDS_GEN_NONE && !nds_generation_equal(&o->if_equal, &out->generation))
        out->state = NDS_READ_ABORTED;
    else if (out->state == NDS_READ_VALUE && o->if_not_equal.kind != NDS_GEN_NONE &&
             nds_generation_equal(&o->if_not_equal, &out->generation))
        out->state = NDS_READ_UNCHANGED;
}

/* Reads the ranges of e's value (none past total), runs of ranges that follow each other as one
 * vs_store_read_into (checked against the value's checksums). */
static int read_ranges_of(vk_state *st, const vs_entry *e, const nds_byte_range *ranges, size_t n,
                          uint64_t total) {
    for (size_t i = 0; i < n; i++)
        if (ranges[i].offset > total || ranges[i].len > total - ranges[i].offset)
            return nds_err(NDS_ERANGE, "versioned store %s: %s holds %" PRIu64 " bytes, not %zu "
                           "from %" PRIu64, vs_store_url(st->store), e->key, total, ranges[i].len,
                           ranges[i].offset);
    struct iovec *iov = malloc(n * sizeof *iov);
    if (!iov) return nds_err(NDS_ENOMEM, "out of memory");
    int rc = 0;
    for (size_t i = 0, run; !rc && i < n; i += run) {
        uint64_t end = ranges[i].offset;
        for (run = 0; i + run < n && ranges[i + run].offset == end; run++) {
            iov[run] = (struct iovec){ranges[i + run].dst, ranges[i + run].len};
            end += ranges[i + run].len;
        }
        rc = vs_store_read_into(st->store, e, ranges[i].offset, iov, run);
    }
    free(iov);
    return rc;
}

/* Both forms from one lookup in the handle's view, so from one version. */
static int vk_read(void *state, const char *key, const nds_read_options *opts,
                   const nds_byte_range *ranges, size_t n, nds_read_result *out) {
    vk_state *st = state;
    nds_read_options o = opts ? *opts : (nds_read_options)NDS_READ_OPTIONS_INIT;
    vs_entry e;
    bool found;
    int rc = lookup_for_read(st, key, &e, &found, out);
    if (rc) return rc;
    apply_conditions(&o, out);
    uint64_t total = out->total_size, off, len;
    if (!found || out->state != NDS_READ_VALUE)
        ; /* nothing to read */
    else if (n > 0)
        rc = read_ranges_of(st, &e, ranges, n, total);
    else if (!(rc = nds_byte_range_resolve(&o, total, &off, &len)))
        rc = vs_store_read_value(st->store, &e, off, len, &out->value);
    if (found) vs_entry_dispose(&e);
    return rc;
}

typedef struct list_call {
    const char *prefix;
    size_t prefix_len;
    nds_list_fn fn;
    void *ctx;
    int stopped; /* the caller's non-zero return */
} list_call;

#define LIST_PAST_PREFIX 1

static int list_one(void *ctx, const vs_entry *e) {
    list_call *c = ctx;
    if (strncmp(e->key, c->prefix, c->prefix_len) != 0) return LIST_PAST_PREFIX;
    int rc = c->fn(c->ctx, e->key, e->is_inline ? e->len : e->value.length);
    if (rc) c->stopped = rc;
    return rc;
}

static int vk_list(void *state, const char *prefix, nds_list_fn fn, void *ctx) {
    vk_state *st = state;
    vs_snapshot view = view_get(st);
    list_call c = {prefix, strlen(prefix), fn, ctx, 0};
    int rc = vs_store_list(st->store, &view, prefix, "", list_one, &c);
    if (c.stopped) return c.stopped;
    return rc == LIST_PAST_PREFIX ? 0 : rc;
}

/* ---- writes -------------------------------------------------------------------------------------- */

/* Commits w[0..n) on the view and moves the view to what the commit saw. */
static int commit_writes(vk_state *st, vs_write *w, size_t n, bool all_or_nothing) {
    if (st->pinned) return refuse_pinned(st);
    vs_snapshot view = view_get(st);
    vs_commit_options o = {.all_or_nothing = all_or_nothing};
    int rc = vs_store_commit(st->store, &view, w, n, &o);
    view_advance(st, &view);
    return rc;
}

static int vk_write(void *state, const char *key, const struct iovec *iov, size_t iovcnt,
                    const nds_write_options *opts, nds_generation *new_gen) {
    vk_state *st = state;
    const uint8_t *data = NULL;
    size_t len = 0;
    uint8_t *owned = NULL;
    int rc = iov ? nds_iov_gather(iov, iovcnt, &data, &len, &owned) : 0;
    if (rc) return rc;
    vs_write w = {.key = key, .data = data, .len = len, .is_delete = data == NULL};
    if (opts) w.if_equal = opts->if_equal;
    rc = commit_writes(st, &w, 1, true);
    free(owned);
    if (!rc && new_gen) {
        if (data) vs_generation(view_get(st).version, new_gen);
        else new_gen->kind = NDS_GEN_ABSENT;
    }
    return rc;
}

static int vk_commit(void *state, nds_kv_op *ops, size_t n) {
    vk_state *st = state;
    vs_write *w = calloc(n ? n : 1, sizeof *w);
    if (!w) return nds_err(NDS_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        w[i] = (vs_write){.key = ops[i].key, .data = ops[i].data, .len = ops[i].len,
                          .is_delete = ops[i].data == NULL, .if_equal = ops[i].if_equal};
    int rc = commit_writes(st, w, n, true);
    uint64_t v = view_get(st).version;
    for (size_t i = 0; !rc && i < n; i++) {
        if (ops[i].data) vs_generation(v, &ops[i].new_generation);
        else ops[i].new_generation.kind = NDS_GEN_ABSENT;
    }
    free(w);
    return rc;
}

typedef struct key_list {
    char **keys;
    size_t n, cap;
    const char *end;
} key_list;

static int collect_key(void *ctx, const vs_entry *e) {
    key_list *l = ctx;
    if (*l->end && strcmp(e->key, l->end) >= 0) return LIST_PAST_PREFIX;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        char **grown = realloc(l->keys, cap * sizeof *grown);
        if (!grown) return nds_err(NDS_ENOMEM, "out of memory");
        l->keys = grown;
        l->cap = cap;
    }
    if (!(l->keys[l->n] = nds_strdup(e->key))) return nds_err(NDS_ENOMEM, "out of memory");
    l->n++;
    return 0;
}

/* One version deleting every key in [begin, end). */
static int vk_delete_range(void *state, const char *begin, const char *end) {
    vk_state *st = state;
    if (st->pinned) return refuse_pinned(st);
    vs_snapshot view = view_get(st);
    key_list l = {NULL, 0, 0, end};
    int rc = vs_store_list(st->store, &view, begin, "", collect_key, &l);
    if (rc == LIST_PAST_PREFIX) rc = 0;
    vs_write *w = rc || l.n == 0 ? NULL : calloc(l.n, sizeof *w);
    if (!rc && l.n && !w) rc = nds_err(NDS_ENOMEM, "out of memory");
    for (size_t i = 0; w && i < l.n; i++)
        w[i] = (vs_write){.key = l.keys[i], .is_delete = true};
    if (!rc && l.n) rc = commit_writes(st, w, l.n, true);
    for (size_t i = 0; i < l.n; i++) free(l.keys[i]);
    free(l.keys);
    free(w);
    return rc;
}

/* ---- staged writes (the array layer's batches: one version per publish) ----------------------- */

struct nds_kv_staged {
    char *key;
    uint8_t *data;
    size_t len;
};

static void vk_discard(void *state, nds_kv_staged *s) {
    (void)state;
    if (!s) return;
    free(s->key);
    free(s->data);
    free(s);
}

static int vk_stage(void *state, const char *key, const uint8_t *data, size_t len,
                    nds_kv_staged **out) {
    vk_state *st = state;
    if (st->pinned) return refuse_pinned(st);
    nds_kv_staged *s = calloc(1, sizeof *s);
    if (s) s->key = nds_strdup(key);
    if (s && s->key && (s->data = malloc(len ? len : 1))) {
        memcpy(s->data, data, len);
        s->len = len;
        *out = s;
        return 0;
    }
    vk_discard(state, s);
    return nds_err(NDS_ENOMEM, "out of memory staging %s", key);
}

static int vk_publish(void *state, nds_kv_staged **staged, nds_kv_publish *results, size_t n) {
    vk_state *st = state;
    vs_write *w = calloc(n ? n : 1, sizeof *w);
    int rc = w ? 0 : nds_err(NDS_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < n; i++)
        w[i] = (vs_write){.key = staged[i]->key, .data = staged[i]->data, .len = staged[i]->len,
                          .if_equal = results[i].if_equal};
    if (!rc) rc = commit_writes(st, w, n, false);
    uint64_t v = view_get(st).version;
    for (size_t i = 0; i < n; i++) {
        results[i].status = rc ? rc : w[i].status;
        if (results[i].status == 0) vs_generation(v, &results[i].new_generation);
        vk_discard(state, staged[i]);
    }
    free(w);
    return rc;
}


/* ---- prepared sets (one version from many processes' parts) ---------------------------------- */

static int vk_prepare(void *state, const nds_kv_op *ops, size_t n, const nds_kv_side *side,
                      size_t m, char *token, size_t cap) {
    vk_state *st = state;
    if (st->pinned) return refuse_pinned(st);
    if (cap < VS_ID_HEX) return nds_err(NDS_EINVAL, "versioned: token buffer too small");
    vs_write *w = calloc(n + 1, sizeof *w);
    vs_side_value *sv = calloc(m + 1, sizeof *sv);
    int rc = w && sv ? 0 : nds_err(NDS_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < n; i++)
        w[i] = (vs_write){.key = ops[i].key, .data = ops[i].data, .len = ops[i].len,
                          .is_delete = ops[i].data == NULL, .if_equal = ops[i].if_equal};
    for (size_t i = 0; !rc && i < m; i++) sv[i] = (vs_side_value){side[i].name, side[i].data, side[i].len};
    if (!rc) rc = vs_store_prepare(st->store, view_get(st).version, w, n, sv, m, token);
    free(w);
    free(sv);
    return rc;
}

/* What prepared_read hands out, and what it owns. */
typedef struct vk_prepared {
    vs_prepared set;
    nds_bytes *values; /* per op, then per side value */
} vk_prepared;

static void vk_prepared_dispose(void *state, nds_kv_prepared *p) {
    (void)state;
    vk_prepared *in = p->internal;
    if (in) {
        for (size_t i = 0; in->values && i < in->set.nops + in->set.nside; i++)
            nds_bytes_release(&in->values[i]);
        free(in->values);
        vs_prepared_dispose(&in->set);
        free(in);
    }
    free(p->ops);
    free(p->side);
    memset(p, 0, sizeof *p);
}

static int read_ref(vk_state *st, const char *key, const vs_ref *ref, nds_bytes *out) {
    vs_entry e = {.key = (char *)key, .value = *ref};
    return vs_store_read_value(st->store, &e, 0, ref->length, out);
}

static int vk_prepared_read(void *state, const char *token, nds_kv_prepared *out) {
    vk_state *st = state;
    memset(out, 0, sizeof *out);
    vk_prepared *in = calloc(1, sizeof *in);
    if (!in) return nds_err(NDS_ENOMEM, "out of memory");
    out->internal = in;
    int rc = vs_store_prepared_load(st->store, token, &in->set);
    size_t n = in->set.nops, m = in->set.nside;
    if (!rc && (!(in->values = calloc(n + m + 1, sizeof *in->values)) ||
                !(out->ops = calloc(n + 1, sizeof *out->ops)) ||
                !(out->side = calloc(m + 1, sizeof *out->side))))
        rc = nds_err(NDS_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < n; i++) {
        const vs_prepared_op *op = &in->set.ops[i];
        out->ops[i] = (nds_kv_prepared_op){op->key, op->is_delete, NULL,
                                           op->is_delete ? 0 : op->value.length, op->if_equal};
        if (!op->is_delete && op->value.length <= NDS_KV_PREPARED_SMALL &&
            !(rc = read_ref(st, op->key, &op->value, &in->values[i])))
            out->ops[i].data = in->values[i].data;
        out->nops = i + 1;
    }
    for (size_t i = 0; !rc && i < m; i++) {
        const vs_prepared_side *sd = &in->set.side[i];
        if (!(rc = read_ref(st, sd->name, &sd->value, &in->values[n + i])))
            out->side[i] = (nds_kv_side){sd->name, in->values[n + i].data, in->values[n + i].len};
        out->nside = i + 1;
    }
    if (rc) vk_prepared_dispose(state, out);
    return rc;
}

static int vk_commit_prepared(void *state, const char *const *tokens, size_t n, nds_kv_op *extra,
                              size_t nextra, const char *message, const char *metadata) {
    vk_state *st = state;
    if (st->pinned) return refuse_pinned(st);
    vs_write *w = calloc(nextra + 1, sizeof *w);
    if (!w) return nds_err(NDS_ENOMEM, "out of memory");
    for (size_t i = 0; i < nextra; i++)
        w[i] = (vs_write){.key = extra[i].key, .data = extra[i].data, .len = extra[i].len,
                          .is_delete = extra[i].data == NULL, .if_equal = extra[i].if_equal};
    vs_snapshot view = view_get(st);
    vs_commit_options o = {.message = message, .metadata = metadata};
    int rc = vs_store_commit_prepared(st->store, &view, tokens, n, w, nextra, &o);
    view_advance(st, &view); /* after a conflict too: a re-merge reads the new version */
    free(w);
    return rc;
}

extern const nds_kv_driver nds_kv_driver_versioned;
const nds_kv_driver nds_kv_driver_versioned = {
    .version = NDS_KV_DRIVER_VERSION,
    .name = "versioned",
    .url_scheme = NULL,
    .capabilities = NDS_KV_CAP_ATOMIC_CONDITIONAL_WRITE | NDS_KV_CAP_ATOMIC_COMMIT |
                    NDS_KV_CAP_BYTE_RANGE | NDS_KV_CAP_STAGES_IN_MEMORY | NDS_KV_CAP_ADAPTER |
                    NDS_KV_CAP_SNAPSHOT | NDS_KV_CAP_READ_INTO,
    .parse_url = vk_parse_url,
    .open = vk_open,
    .close = vk_close,
    .url_base = vk_url_base,
    .to_json = vk_to_json,
    .read = vk_read,
    .write = vk_write,
    .list = vk_list,
    .delete_range = vk_delete_range,
    .commit = vk_commit,
    .stage = vk_stage,
    .publish = vk_publish,
    .discard = vk_discard,
    .prepare = vk_prepare,
    .prepared_read = vk_prepared_read,
    .prepared_dispose = vk_prepared_dispose,
    .commit_prepared = vk_commit_prepared,
};

/* ---- public API (include/ndstore/versioned.h) --------------------------------------------------- */

static int versioned_state(nds_kvstore *kv, vk_state **out) {
    *out = nds_kvstore_driver_state(kv, &nds_kv_driver_versioned);
    if (!*out)
        return nds_err(NDS_EINVAL,
                       "%s is not a versioned store (open it as \"<url>|versioned:\")",
                       nds_kvstore_url(kv));
    return 0;
}

vs_store *vs_store_of(nds_kvstore *kv, vs_snapshot *view) {
    vk_state *st;
    if (versioned_state(kv, &st)) return NULL;
    *view = view_get(st);
    return st->store;
}

int nds_versioned_gc(nds_kvstore *kv, const nds_gc_options *opts, nds_gc_result *result) {
    memset(result, 0, sizeof *result);
    vk_state *st;
    int rc = versioned_state(kv, &st);
    return rc ? rc : vs_gc_run(st->store, opts, result);
}

int nds_versioned_current(nds_kvstore *kv, uint64_t *version) {
    vk_state *st;
    int rc = versioned_state(kv, &st);
    if (!rc) *version = view_get(st).version;
    return rc;
}

int nds_versioned_refresh(nds_kvstore *kv, uint64_t *version) {
    vk_state *st;
    int rc = versioned_state(kv, &st);
    if (rc) return rc;
    if (!st->pinned) {
        vs_snapshot latest;
        if ((rc = vs_store_latest(st->store, &latest))) return rc;
        view_advance(st, &latest);
    }
    *version = view_get(st).version;
    return 0;
}

int nds_versioned_log(nds_kvstore *kv, uint64_t newest, nds_version_fn fn, void *ctx) {
    vk_state *st;
    int rc = versioned_state(kv, &st);
    if (!rc && newest == 0) {
        vs_snapshot latest;
        if (!(rc = vs_store_latest(st->store, &latest))) newest = latest.version;
    }
    for (uint64_t v = newest; !rc && v >= 1; v--) {
        vs_commit c;
        if ((rc = vs_store_commit_info(st->store, v, &c))) break;
        nds_version_info info = {c.version, c.time_ns, c.message, c.metadata,
                                 c.root.empty ? 0 : c.root.keys};
        rc = fn(ctx, &info);
        vs_commit_dispose(&c);
    }
    return rc;
}

int nds_versioned_tag(nds_kvstore *kv, const char *name, uint64_t version) {
    vk_state *st;
    int rc = versioned_state(kv, &st);
    if (rc) return rc;
    if (version == 0) version = view_get(st).version;
    if (version == 0)
        return nds_err(NDS_ENOTFOUND, "versioned store %s: nothing committed yet to tag",
                       vs_store_url(st->store));
    return vs_store_tag_create(st->store, name, version);
}

int nds_versioned_tags(nds_kvstore *kv, nds_tag_fn fn, void *ctx) {
    vk_state *st;
    int rc = versioned_state(kv, &st);
    return rc ? rc : vs_store_tags(st->store, fn, ctx);
}
