/* Committing prepared parts (nds_txn_commit_prepared, include/ndstore/txn.h).
 *
 * The driver publishes the parts' writes where they are; what only the array layer can do is done
 * here: chunks that parts wrote in part are merged. Each such chunk is read from the version the
 * commit builds on (with its generation), every part's elements are laid over it in token order,
 * and the encoded result joins the commit conditional on that generation. A conflict (someone
 * changed the chunk meanwhile) re-reads the new version and merges again. The arrays are opened
 * through a scratch transaction that stages the parts' small values (metadata a part created), so
 * arrays that exist only in the parts can be opened before they are committed.
 *
 * Threading: one caller per call. Ownership: everything is freed before returning.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/array_internal.h"
#include "internal/chunk_update.h"
#include "internal/error.h"
#include "internal/json_util.h"
#include "internal/kvstore_internal.h"
#include "internal/txn_internal.h"
#include "internal/util.h"

#define MERGE_ATTEMPTS_MAX 200

/* One chunk a part wrote in part. */
typedef struct partial {
    char array[1024]; /* the array's path in the store */
    char format[32];
    char key[256];    /* relative to the array */
    uint64_t cell[NDS_MAX_RANK];
    size_t rank, elems, elem;
    const uint8_t *mask, *data;
    size_t group; /* index of its (array, key) */
} partial;

/* One commit of prepared parts: what every attempt merges and commits. */
typedef struct prepared_commit {
    nds_kvstore *root;         /* the store, path "" */
    const char *const *tokens; /* n */
    size_t n;
    const nds_kv_prepared *sets; /* n, as read from the store */
    partial *ps;                 /* the chunks written in part, nps of them in ngroups groups */
    size_t nps, ngroups;
    const char *message, *metadata; /* of the version committed */
} prepared_commit;

static int parse_partial(const nds_kv_side *s, partial *p) {
    if (s->len < 4) return nds_err(NDS_ECORRUPT, "prepared chunk %s: too short", s->name);
    size_t hlen = nds_load_le32(s->data);
    if (hlen > s->len - 4) return nds_err(NDS_ECORRUPT, "prepared chunk %s: bad header", s->name);
    json_object *h;
    int rc = nds_json_parse((const char *)s->data + 4, hlen, "prepared chunk", &h);
    if (rc) return rc;
    const char *array = NULL, *format = NULL, *key = NULL;
    int64_t elems = 0, elem = 0;
    json_object *cell = NULL;
    rc = nds_json_get_string(h, "array", false, "prepared chunk", &array);
    if (!rc) rc = nds_json_get_string(h, "format", false, "prepared chunk", &format);
    if (!rc) rc = nds_json_get_string(h, "key", false, "prepared chunk", &key);
    if (!rc) rc = nds_json_get_int(h, "elems", false, 1, INT64_MAX, "prepared chunk", &elems);
    if (!rc) rc = nds_json_get_int(h, "elem", false, 1, 64, "prepared chunk", &elem);
    if (!rc && (!json_object_object_get_ex(h, "cell", &cell) ||
                !json_object_is_type(cell, json_type_array) ||
                json_object_array_length(cell) > NDS_MAX_RANK))
        rc = nds_err(NDS_ECORRUPT, "prepared chunk %s: bad cell", s->name);
    if (!rc && (strlen(array) >= sizeof p->array || strlen(format) >= sizeof p->format ||
                strlen(key) >= sizeof p->key ||
                (uint64_t)elems * (1 + (uint64_t)elem) != s->len - 4 - hlen))
        rc = nds_err(NDS_ECORRUPT, "prepared chunk %s: sizes do not match", s->name);
    if (!rc) {
        snprintf(p->array, sizeof p->array, "%s", array);
        snprintf(p->format, sizeof p->format, "%s", format);
        snprintf(p->key, sizeof p->key, "%s", key);
        p->rank = json_object_array_length(cell);
        for (size_t d = 0; d < p->rank; d++)
            p->cell[d] = (uint64_t)json_object_get_int64(json_object_array_get_idx(cell, d));
        p->elems = (size_t)elems;
        p->elem = (size_t)elem;
        p->mask = s->data + 4 + hlen;
        p->data = p->mask + p->elems;
    }
    json_object_put(h);
    return rc;
}

/* The arrays the merges need, opened through a scratch transaction. */
typedef struct merge_arrays {
    nds_txn *scratch;
    char **paths;
    nds_kvstore **subs;
    nds_array **arrays;
    size_t n;
} merge_arrays;

/* Stages the parts' small values under path into the scratch transaction (so an array created in
 * a part opens). */
static int stage_small_values(merge_arrays *m, nds_kvstore *sub, const char *path,
                              const nds_kv_prepared *sets, size_t nsets) {
    size_t plen = strlen(path);
    for (size_t t = 0; t < nsets; t++)
        for (size_t i = 0; i < sets[t].nops; i++) {
            const nds_kv_prepared_op *op = &sets[t].ops[i];
            if (op->is_delete || !op->data || strncmp(op->key, path, plen) != 0) continue;
            nds_txn_value value = {op->data, op->len, false};
            int rc = nds_txn_stage_key(m->scratch, sub, op->key + plen, &value, NULL, NULL);
            if (rc) return rc;
        }
    return 0;
}

static int open_merge_array(merge_arrays *m, nds_kvstore *root, const partial *p,
                            const nds_kv_prepared *sets, size_t nsets, size_t *index) {
    for (*index = 0; *index < m->n; (*index)++)
        if (strcmp(m->paths[*index], p->array) == 0) return 0;
    size_t i = m->n;
    if (!(m->paths[i] = nds_strdup(p->array))) return nds_err(NDS_ENOMEM, "out of memory");
    m->n++;
    int rc = nds_kvstore_with_path(&m->subs[i], root, p->array);
    if (!rc) rc = stage_small_values(m, m->subs[i], p->array, sets, nsets);
    if (!rc) {
        char *spec = nds_asprintf("{\"driver\":\"%s\",\"kvstore\":\"%s\"}", p->format,
                                  nds_kvstore_url(m->subs[i]));
        nds_open_options o = NDS_OPEN_OPTIONS_INIT;
        o.txn = m->scratch;
        rc = spec ? nds_array_open(&m->arrays[i], spec, &o) : nds_err(NDS_ENOMEM, "out of memory");
        free(spec);
        if (rc) rc = nds_err_prefix(rc, "committing prepared parts: array %s", p->array);
    }
    return rc;
}

static void close_merge_arrays(merge_arrays *m) {
    for (size_t i = 0; i < m->n; i++) {
        nds_array_free(m->arrays[i]);
        nds_kvstore_free(m->subs[i]);
        free(m->paths[i]);
    }
    nds_txn_free(m->scratch); /* never committed: aborted */
    free(m->paths), free(m->subs), free(m->arrays);
}

/* Reads the chunk of group g's first partial from the version the commit builds on, lays every
 * partial of g over it in order and encodes it into op (conditional on the generation read). */
static int merge_group(const merge_arrays *m, const prepared_commit *pc, size_t g, size_t array,
                       nds_kv_op *op, nds_kvstore **kv, nds_buf *enc) {
    nds_array *a = m->arrays[array];
    const partial *ps = pc->ps, *first = NULL;
    size_t nps = pc->nps;
    for (size_t i = 0; i < nps && !first; i++)
        if (ps[i].group == g) first = &ps[i];
    if (first->elems != a->chunk_elems || first->elem != a->elem || first->rank != a->meta.rank)
        return nds_err(NDS_ECORRUPT, "prepared chunk %s of %s does not fit the array", first->key,
                       first->array);
    uint8_t *chunk = malloc(a->chunk_bytes);
    if (!chunk) return nds_err(NDS_ENOMEM, "out of memory");
    int present, all_fill = 0;
    nds_generation gen = {NDS_GEN_NONE, {0}};
    int rc = nds_array_load_chunk(a, first->cell, first->key, chunk, &present, &gen, false);
    for (size_t i = 0; !rc && i < nps; i++) {
        if (ps[i].group != g) continue;
        nds_txn_chunk c = {.a = a, .key = (char *)ps[i].key, .data = (uint8_t *)ps[i].data,
                           .mask = (uint8_t *)ps[i].mask};
        nds_txn_overlay(&c, chunk, a->chunk_elems, a->elem);
    }
    if (!rc) rc = nds_array_encode_for_store(a, first->cell, first->key, chunk, enc, &all_fill);
    free(chunk);
    *op = (nds_kv_op){first->key, all_fill ? NULL : enc->data, all_fill ? 0 : enc->len, gen,
                      {NDS_GEN_NONE, {0}}};
    *kv = m->subs[array];
    return rc;
}

/* One attempt: merge every group on the current version and commit with the merged chunks. */
static int merge_and_commit(const prepared_commit *pc) {
    size_t ngroups = pc->ngroups;
    const partial *ps = pc->ps;
    merge_arrays m = {0};
    nds_kv_op *ops = calloc(ngroups + 1, sizeof *ops);
    nds_kvstore **kvs = calloc(ngroups + 1, sizeof *kvs);
    nds_buf *enc = calloc(ngroups + 1, sizeof *enc);
    m.paths = calloc(ngroups + 1, sizeof *m.paths);
    m.subs = calloc(ngroups + 1, sizeof *m.subs);
    m.arrays = calloc(ngroups + 1, sizeof *m.arrays);
    int rc = ops && kvs && enc && m.paths && m.subs && m.arrays
                 ? nds_txn_begin(&m.scratch, NULL)
                 : nds_err(NDS_ENOMEM, "out of memory");
    for (size_t g = 0; !rc && g < ngroups; g++) {
        size_t i = 0, array;
        while (ps[i].group != g) i++;
        rc = open_merge_array(&m, pc->root, &ps[i], pc->sets, pc->n, &array);
        if (!rc) rc = merge_group(&m, pc, g, array, &ops[g], &kvs[g], &enc[g]);
    }
    nds_kv_ops_across extra = {kvs, ops, ngroups};
    if (!rc)
        rc = nds_kvstore_commit_prepared(pc->root, pc->tokens, pc->n, &extra, pc->message,
                                         pc->metadata);
    for (size_t g = 0; enc && g < ngroups; g++) nds_buf_dispose(&enc[g]);
    close_merge_arrays(&m);
    free(ops), free(kvs), free(enc);
    return rc;
}

/* The partial chunks of every set, grouped by (array, key); a key a set also writes whole is
 * refused (overlapping parts). */
static int collect_partials(const nds_kv_prepared *sets, size_t n, partial **out, size_t *nps,
                            size_t *ngroups) {
    size_t total = 0;
    for (size_t t = 0; t < n; t++) total += sets[t].nside;
    partial *ps = calloc(total + 1, sizeof *ps);
    if (!ps) return nds_err(NDS_ENOMEM, "out of memory");
    int rc = 0;
    *nps = *ngroups = 0;
    for (size_t t = 0; !rc && t < n; t++)
        for (size_t i = 0; !rc && i < sets[t].nside; i++) {
            partial *p = &ps[*nps];
            if ((rc = parse_partial(&sets[t].side[i], p))) break;
            size_t j = 0;
            while (j < *nps && (strcmp(ps[j].array, p->array) || strcmp(ps[j].key, p->key))) j++;
            p->group = j < *nps ? ps[j].group : (*ngroups)++;
            (*nps)++;
            char full[1300];
            snprintf(full, sizeof full, "%s%s", p->array, p->key);
            for (size_t u = 0; !rc && u < n; u++)
                for (size_t k = 0; !rc && k < sets[u].nops; k++)
                    if (strcmp(sets[u].ops[k].key, full) == 0)
                        rc = nds_err(NDS_EINVAL,
                                     "chunk %s is written whole by one prepared part and in "
                                     "part by another: the parts overlap",
                                     full);
        }
    *out = ps;
    return rc;
}

int nds_txn_commit_prepared(nds_kvstore *kv, const char *const *tokens, size_t n,
                            const char *message, const char *metadata) {
    if (n == 0) return nds_err(NDS_EINVAL, "commit of prepared parts: no tokens");
    nds_kvstore *root = NULL;
    nds_kv_prepared *sets = calloc(n, sizeof *sets);
    int rc = sets ? nds_kvstore_with_path(&root, kv, "") : nds_err(NDS_ENOMEM, "out of memory");
    size_t loaded = 0;
    for (; !rc && loaded < n; loaded++)
        if ((rc = nds_kvstore_prepared_read(root, tokens[loaded], &sets[loaded]))) {
            /* A value of the set that does not read (its data object corrupt or lost) is named by
             * key and object; the user knows the set by its token. */
            if (!strstr(nds_error_last()->message, tokens[loaded]))
                rc = nds_err_prefix(rc, "prepared set %s", tokens[loaded]);
            break;
        }
    prepared_commit pc = {root, tokens, n, sets, NULL, 0, 0, message, metadata};
    if (!rc) rc = collect_partials(sets, n, &pc.ps, &pc.nps, &pc.ngroups);
    for (int attempt = 0; !rc || rc == NDS_ECONFLICT; attempt++) {
        if (attempt >= MERGE_ATTEMPTS_MAX) {
            rc = nds_err(NDS_ECONFLICT, "commit of prepared parts: still conflicting after %d "
                         "attempts; nothing was written", MERGE_ATTEMPTS_MAX);
            break;
        }
        if (attempt) nds_sleep_ns((uint64_t)1000000 * (uint64_t)(1 + nds_random_u64() % 8));
        rc = merge_and_commit(&pc);
        if (rc != NDS_ECONFLICT || pc.ngroups == 0) break; /* without merges a conflict is final */
    }
    for (size_t i = 0; i < loaded && i < n; i++) nds_kvstore_prepared_dispose(root, &sets[i]);
    free(pc.ps);
    free(sets);
    nds_kvstore_free(root);
    return rc;
}
