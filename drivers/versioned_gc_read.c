/* Reading the garbage collector's states back from a versioned store's base (their encoding is
 * versioned_gc_state.c): listing them, reading one, and whether the newest says a version is
 * collected. Below gc (versioned_gc.c) and tagging (versioned_tags.c), which both ask; calls only
 * the store's accessors. Threading: any thread. Ownership: the caller frees a listing and disposes
 * a state.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "versioned_store.h"
#include "versioned_internal.h"
#include "internal/error.h"

/* The sequence numbers of the states listed so far. */
typedef struct state_list {
    uint64_t *seqs;
    size_t n;
} state_list;

static int note_state(void *ctx, const char *key, uint64_t size) {
    (void)size;
    state_list *l = ctx;
    uint64_t seq;
    if (vs_gc_state_key_parse(key, &seq) != 0) return 0; /* not ours */
    uint64_t *grown = realloc(l->seqs, (l->n + 1) * sizeof *grown);
    if (!grown) return nds_err(NDS_ENOMEM, "versioned store gc: out of memory");
    l->seqs = grown;
    l->seqs[l->n++] = seq;
    return 0;
}

int vs_gc_state_read(vs_store *s, uint64_t seq, vs_gc_state *out) {
    char key[VS_OBJECT_KEY_MAX], where[VS_OBJECT_KEY_MAX + 600];
    vs_gc_state_key(seq, key);
    snprintf(where, sizeof where, "versioned store %s: gc state %s", vs_store_url(s), key);
    nds_read_result r;
    int rc = nds_kvstore_read(vs_store_base(s), key, NULL, &r);
    if (rc) return nds_err_prefix(rc, "%s", where);
    if (r.state != NDS_READ_VALUE)
        return nds_err(NDS_ECORRUPT, "%s: deleted while being read", where);
    rc = vs_gc_state_decode(r.value.data, r.value.len, seq, where, out);
    nds_read_result_dispose(&r);
    return rc;
}

static int newest_first(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

int vs_gc_states_list(vs_store *s, uint64_t **seqs, size_t *n) {
    state_list l = {NULL, 0};
    int rc = nds_kvstore_list(vs_store_base(s), VS_GC_STATE_PREFIX, note_state, &l);
    if (!rc && l.n) qsort(l.seqs, l.n, sizeof *l.seqs, newest_first);
    *seqs = l.seqs;
    *n = l.n;
    return rc;
}

int vs_gc_version_collected(vs_store *s, uint64_t v, bool *collected) {
    *collected = false;
    uint64_t *seqs = NULL;
    size_t n = 0;
    int rc = vs_gc_states_list(s, &seqs, &n);
    /* The newest state that decodes (a corrupt newest one is skipped: the one before it knows
     * at least what was collected up to it). */
    for (size_t i = 0; !rc && i < n; i++) {
        vs_gc_state st;
        rc = vs_gc_state_read(s, seqs[i], &st);
        if (rc == NDS_ECORRUPT) {
            rc = 0;
            continue;
        }
        if (!rc) *collected = vs_gc_state_collected(&st, v);
        vs_gc_state_dispose(&st);
        break;
    }
    free(seqs);
    return rc;
}
