/* Prepared sets: one version from the parts many processes wrote (docs/versioned-format.md,
 * "Prepared sets").
 *
 * prepare writes a process's values into data objects and lists them, with their keys and
 * conditions (and side values its committer needs, such as partly written chunks), in a prepared
 * set "prepared/<token>": nothing a reader sees changes. commit_prepared publishes any number of
 * sets as one version: their values are referenced where they are (nothing is copied), keys several
 * sets create identically are written once, and a set is refused if a commit already published it.
 *
 * Threading: as the engine (versioned_store.c). Ownership: loaded sets are the caller's
 * (vs_prepared_dispose).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "versioned_store.h"
#include "internal/error.h"
#include "internal/util.h"

static int64_t wall_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int write_set(vs_store *s, const vs_prepared *p, char token[VS_ID_HEX]) {
    vs_id id;
    nds_buf b = {0};
    int rc = vs_id_random(&id);
    if (!rc) rc = vs_prepared_encode(p, &b);
    if (!rc) {
        char key[VS_OBJECT_KEY_MAX];
        vs_object_key(VS_PREPARED_PREFIX, &id, key);
        nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
        wo.if_equal.kind = NDS_GEN_ABSENT;
        rc = nds_kvstore_write(vs_store_base(s), key, b.data, b.len, &wo, NULL);
        if (rc) rc = nds_err_prefix(rc, "versioned store %s: writing %s", vs_store_url(s), key);
    }
    if (!rc) vs_id_hex(&id, token);
    nds_buf_dispose(&b);
    return rc;
}

int vs_store_prepare(vs_store *s, uint64_t base_version, const vs_write *ops, size_t n,
                     const vs_side_value *side, size_t m, char token[VS_ID_HEX]) {
    size_t nvalues = m;
    for (size_t i = 0; i < n; i++) nvalues += !ops[i].is_delete;
    const uint8_t **data = calloc(nvalues + 1, sizeof *data);
    size_t *len = calloc(nvalues + 1, sizeof *len);
    vs_ref *refs = calloc(nvalues + 1, sizeof *refs);
    vs_prepared p = {.base_version = base_version, .time_ns = wall_ns(), .nops = n, .nside = m};
    p.ops = calloc(n + 1, sizeof *p.ops);
    p.side = calloc(m + 1, sizeof *p.side);
    int rc = data && len && refs && p.ops && p.side ? 0 : nds_err(NDS_ENOMEM, "out of memory");
    size_t v = 0;
    for (size_t i = 0; !rc && i < n; i++) {
        if (strlen(ops[i].key) == 0 || strlen(ops[i].key) > VS_KEY_MAX)
            rc = nds_err(NDS_EINVAL, "versioned store %s: key \"%.64s\" must have 1 to %d bytes",
                         vs_store_url(s), ops[i].key, VS_KEY_MAX);
        p.ops[i] = (vs_prepared_op){.key = (char *)ops[i].key, .is_delete = ops[i].is_delete,
                                    .if_equal = ops[i].if_equal};
        if (!ops[i].is_delete) data[v] = ops[i].data, len[v++] = ops[i].len;
    }
    for (size_t i = 0; !rc && i < m; i++) {
        p.side[i].name = (char *)side[i].name;
        data[v] = side[i].data, len[v++] = side[i].len;
    }
    if (!rc) rc = vs_store_write_values(s, data, len, nvalues, refs, &p.objects, &p.nobjects);
    v = 0;
    for (size_t i = 0; !rc && i < n; i++)
        if (!ops[i].is_delete) p.ops[i].value = refs[v++];
    for (size_t i = 0; !rc && i < m; i++) p.side[i].value = refs[v++];
    if (!rc) rc = write_set(s, &p, token);
    free(p.ops), free(p.side), free(p.objects), free(data), free(len), free(refs);
    return rc;
}

int vs_store_prepared_load(vs_store *s, const char *token, vs_prepared *out) {
    vs_id id;
    if (vs_id_parse(token, &id) != 0)
        return nds_err(NDS_EINVAL, "versioned store %s: \"%.80s\" is not a prepared-set token (32 "
                       "lower-case hex digits)", vs_store_url(s), token);
    char key[VS_OBJECT_KEY_MAX], where[VS_OBJECT_KEY_MAX + 600];
    vs_object_key(VS_PREPARED_PREFIX, &id, key);
    nds_read_result r;
    int rc = nds_kvstore_read(vs_store_base(s), key, NULL, &r);
    if (rc) return nds_err_prefix(rc, "versioned store %s: reading %s", vs_store_url(s), key);
    if (r.state != NDS_READ_VALUE)
        rc = nds_err(NDS_ENOTFOUND, "versioned store %s: no prepared set %s (wrong store, or "
                     "collected)", vs_store_url(s), token);
    else {
        snprintf(where, sizeof where, "versioned store %s: prepared set %s", vs_store_url(s), key);
        rc = vs_prepared_decode(r.value.data, r.value.len, where, out);
    }
    nds_read_result_dispose(&r);
    return rc;
}

/* NDS_ECORRUPT when a data object holding the set's values is gone (lost, or collected): the
 * commit references values without reading them, and a version must never point at nothing. One
 * header read per object (values are packed in order, so a run of ops shares one). */
static int check_set_objects(vs_store *s, const vs_prepared *p, const char *token) {
    const vs_id *last = NULL;
    for (size_t i = 0; i < p->nops; i++) {
        const vs_id *id = &p->ops[i].value.object;
        if (p->ops[i].is_delete || (last && memcmp(last, id, sizeof *id) == 0)) continue;
        last = id;
        char key[VS_OBJECT_KEY_MAX];
        vs_object_key(VS_DATA_PREFIX, id, key);
        nds_read_options ro = NDS_READ_OPTIONS_INIT;
        ro.byte_length = VS_HEADER_SIZE;
        nds_read_result r;
        int rc = nds_kvstore_read(vs_store_base(s), key, &ro, &r);
        if (rc)
            return nds_err_prefix(rc, "versioned store %s: prepared set %s: reading %s",
                                  vs_store_url(s), token, key);
        bool present = r.state == NDS_READ_VALUE;
        nds_read_result_dispose(&r);
        if (!present)
            return nds_err(NDS_ECORRUPT,
                           "versioned store %s: prepared set %s: data object %s is "
                           "missing (lost, or collected); nothing was committed",
                           vs_store_url(s), token, key);
    }
    return 0;
}

/* NDS_EINVAL when a commit after the oldest set's base version already published one of ids. */
static int refuse_committed(vs_store *s, const vs_snapshot *head, const vs_id *ids, size_t n,
                            uint64_t oldest_base) {
    for (uint64_t v = head->version; v > oldest_base; v--) {
        vs_commit c;
        int rc = vs_store_commit_info(s, v, &c);
        if (rc) return rc;
        for (size_t i = 0; i < c.ntokens && !rc; i++)
            for (size_t j = 0; j < n && !rc; j++)
                if (memcmp(&c.tokens[i], &ids[j], sizeof ids[j]) == 0) {
                    char hex[VS_ID_HEX];
                    vs_id_hex(&ids[j], hex);
                    rc = nds_err(NDS_EINVAL,
                                 "versioned store %s: prepared set %s was already committed in "
                                 "version %" PRIu64,
                                 vs_store_url(s), hex, v);
                }
        vs_commit_dispose(&c);
        if (rc) return rc;
    }
    return 0;
}

/* Whether the values at refs a and b hold the same bytes. */
static int same_value(vs_store *s, const vs_entry *a, const vs_entry *b, bool *same) {
    *same = false;
    uint64_t la = a->is_inline ? a->len : a->value.length, lb = b->is_inline ? b->len : b->value.length;
    if (la != lb) return 0;
    nds_bytes x, y;
    int rc = vs_store_read_value(s, a, 0, la, &x);
    if (rc) return rc;
    if (!(rc = vs_store_read_value(s, b, 0, lb, &y))) {
        *same = la == 0 || memcmp(x.data, y.data, la) == 0;
        nds_bytes_release(&y);
    }
    nds_bytes_release(&x);
    return rc;
}

static vs_entry ref_entry(const char *key, const vs_ref *ref) {
    return (vs_entry){.key = (char *)key, .value = *ref};
}

/* One key's writes across the sets: conditioned puts must agree (the same array created by each
 * process), else the last one wins. Returns the index in w of the write to keep. */
static int merge_duplicate(vs_store *s, vs_write *w, size_t kept, size_t i) {
    bool conditioned = w[kept].if_equal.kind != NDS_GEN_NONE || w[i].if_equal.kind != NDS_GEN_NONE;
    if (!conditioned) return (int)i;
    bool same = false;
    int rc = 0;
    if (!w[kept].is_delete && !w[i].is_delete && w[kept].ref && w[i].ref) {
        vs_entry a = ref_entry(w[kept].key, w[kept].ref), b = ref_entry(w[i].key, w[i].ref);
        rc = same_value(s, &a, &b, &same);
    }
    if (rc) return rc;
    if (!same)
        return nds_err(NDS_ECONFLICT,
                       "versioned store %s: prepared sets write different values to %s under a "
                       "condition (the same array created differently?)",
                       vs_store_url(s), w[i].key);
    return (int)kept;
}

/* A conditioned put whose condition fails on snap but whose value is already there is dropped
 * (settled): another process created the same metadata first. */
static int settle(vs_store *s, const vs_snapshot *snap, vs_write *w, bool *drop) {
    *drop = false;
    if (w->if_equal.kind == NDS_GEN_NONE || w->is_delete || !w->ref) return 0;
    vs_entry cur;
    bool found;
    int rc = vs_store_lookup(s, snap, w->key, &cur, &found);
    if (rc || !found) return rc;
    nds_generation g;
    vs_generation(cur.version, &g);
    if (!nds_generation_satisfies(&w->if_equal, &g)) {
        vs_entry mine = ref_entry(w->key, w->ref);
        rc = same_value(s, &cur, &mine, drop);
    }
    vs_entry_dispose(&cur);
    return rc;
}

typedef struct commit_sets {
    vs_prepared *sets;
    vs_id *ids;
    size_t n;
    vs_write *w;
    size_t nw;
} commit_sets;

static int load_sets(vs_store *s, const char *const *tokens, size_t n, commit_sets *c,
                     uint64_t *oldest) {
    *oldest = UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
        int rc = vs_store_prepared_load(s, tokens[i], &c->sets[i]);
        if (rc) return rc;
        c->n = i + 1;
        if ((rc = check_set_objects(s, &c->sets[i], tokens[i]))) return rc;
        vs_id_parse(tokens[i], &c->ids[i]);
        for (size_t j = 0; j < i; j++)
            if (memcmp(&c->ids[j], &c->ids[i], sizeof c->ids[i]) == 0)
                return nds_err(NDS_EINVAL, "versioned store %s: token %s given twice",
                               vs_store_url(s), tokens[i]);
        if (c->sets[i].base_version < *oldest) *oldest = c->sets[i].base_version;
    }
    return 0;
}

/* The writes of every set (in token order, one per key), then the extras (which win). */
static int collect_writes(vs_store *s, commit_sets *c, const vs_write *extra, size_t nextra) {
    for (size_t t = 0; t < c->n; t++)
        for (size_t i = 0; i < c->sets[t].nops; i++) {
            const vs_prepared_op *op = &c->sets[t].ops[i];
            vs_write w = {.key = op->key, .len = op->value.length, .is_delete = op->is_delete,
                          .if_equal = op->if_equal, .ref = op->is_delete ? NULL : &op->value};
            size_t k = 0;
            while (k < c->nw && strcmp(c->w[k].key, op->key) != 0) k++;
            if (k == c->nw) {
                c->w[c->nw++] = w;
                continue;
            }
            c->w[c->nw] = w;
            int keep = merge_duplicate(s, c->w, k, c->nw);
            if (keep < 0) return keep;
            if ((size_t)keep == c->nw) c->w[k] = w;
        }
    for (size_t i = 0; i < nextra; i++) {
        size_t k = 0;
        while (k < c->nw && strcmp(c->w[k].key, extra[i].key) != 0) k++;
        c->w[k] = extra[i];
        if (k == c->nw) c->nw++;
    }
    return 0;
}

int vs_store_commit_prepared(vs_store *s, vs_snapshot *snap, const char *const *tokens, size_t n,
                             const vs_write *extra, size_t nextra, const vs_commit_options *o) {
    size_t total = nextra;
    commit_sets c = {calloc(n + 1, sizeof *c.sets), calloc(n + 1, sizeof *c.ids), 0, NULL, 0};
    uint64_t oldest = 0;
    int rc = c.sets && c.ids ? 0 : nds_err(NDS_ENOMEM, "out of memory");
    if (!rc) rc = load_sets(s, tokens, n, &c, &oldest);
    for (size_t t = 0; !rc && t < c.n; t++) total += c.sets[t].nops;
    if (!rc && !(c.w = calloc(total + 1, sizeof *c.w))) rc = nds_err(NDS_ENOMEM, "out of memory");
    if (!rc) rc = vs_store_latest(s, snap);
    if (!rc) rc = refuse_committed(s, snap, c.ids, c.n, oldest);
    if (!rc) rc = collect_writes(s, &c, extra, nextra);
    size_t kept = 0;
    for (size_t i = 0; !rc && i < c.nw; i++) {
        bool drop;
        if (!(rc = settle(s, snap, &c.w[i], &drop)) && !drop) c.w[kept++] = c.w[i];
    }
    if (!rc) {
        vs_commit_options opts = *o;
        opts.all_or_nothing = true;
        opts.tokens = c.ids;
        opts.ntokens = c.n;
        rc = kept ? vs_store_commit(s, snap, c.w, kept, &opts) : 0;
    }
    for (size_t t = 0; t < c.n; t++) vs_prepared_dispose(&c.sets[t]);
    free(c.sets), free(c.ids), free(c.w);
    return rc;
}
