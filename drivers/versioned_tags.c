/* A versioned store's tags: creating one (refused for a version gc collected, asked again after the
 * write: versioned_gc.c "Order of a run") and listing them (nds_versioned_tags, `ndstore tag
 * URL`, `ndstore log`, gc).
 *
 * Tags live under "tags/" in the base store, one create-only object each (docs/versioned-format.md);
 * a listing reads every one, so the cost is one list plus one read per tag. Keys under "tags/"
 * whose name is not a valid tag name, or that vanish between the list and the read, are skipped:
 * they name nothing. A tag that exists but does not decode is an error naming it (gc must not
 * guess which version it keeps). Base stores list in no fixed order, so the tags are collected
 * and handed out sorted by name. Threading: any thread; the callback runs on the caller's.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "versioned_store.h"
#include "versioned_internal.h"
#include "internal/error.h"
#include "internal/util.h"

typedef struct found_tag {
    char *name;
    uint64_t version;
} found_tag;

typedef struct tags_call {
    vs_store *s;
    found_tag *tags;
    size_t n, cap;
} tags_call;

static int each_tag_key(void *ctx, const char *key, uint64_t size) {
    (void)size;
    tags_call *c = ctx;
    const char *name = key + strlen(VS_TAG_PREFIX);
    if (!vs_tag_name_valid(name)) return 0;
    uint64_t v;
    int rc = vs_store_tag(c->s, name, &v);
    if (rc == NDS_ENOTFOUND) { /* deleted between the listing and the read */
        nds_error_clear();
        return 0;
    }
    if (rc) return rc;
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        found_tag *grown = realloc(c->tags, cap * sizeof *grown);
        if (!grown) return nds_err(NDS_ENOMEM, "out of memory listing tags");
        c->tags = grown;
        c->cap = cap;
    }
    if (!(c->tags[c->n].name = nds_strdup(name)))
        return nds_err(NDS_ENOMEM, "out of memory listing tags");
    c->tags[c->n++].version = v;
    return 0;
}

static int by_name(const void *a, const void *b) {
    return strcmp(((const found_tag *)a)->name, ((const found_tag *)b)->name);
}

int vs_store_tags(vs_store *s, vs_tag_fn fn, void *ctx) {
    tags_call c = {s, NULL, 0, 0};
    int rc = nds_kvstore_list(vs_store_base(s), VS_TAG_PREFIX, each_tag_key, &c);
    if (!rc && c.n) qsort(c.tags, c.n, sizeof *c.tags, by_name);
    for (size_t i = 0; !rc && i < c.n; i++) rc = fn(ctx, c.tags[i].name, c.tags[i].version);
    for (size_t i = 0; i < c.n; i++) free(c.tags[i].name);
    free(c.tags);
    return rc;
}

/* ---- creating a tag ---- */

static int64_t wall_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* NDS_EINVAL naming v when gc collected it (some of its objects are deleted). */
static int tag_refuse_collected(vs_store *s, uint64_t v, bool *collected) {
    int rc = vs_gc_version_collected(s, v, collected);
    if (!rc && *collected)
        rc = nds_err(NDS_EINVAL,
                     "versioned store %s: version %" PRIu64
                     " was collected by gc (objects it references are deleted); it cannot be "
                     "tagged",
                     vs_store_url(s), v);
    return rc;
}

int vs_store_tag_create(vs_store *s, const char *name, uint64_t v) {
    if (!vs_tag_name_valid(name))
        return nds_err(NDS_EINVAL,
                       "versioned store %s: \"%s\" is not a valid tag name (1-128 of A-Z a-z 0-9 "
                       ". _ -, not all digits, not \"latest\")",
                       vs_store_url(s), name);
    vs_snapshot snap;
    int rc = vs_store_version(s, v, &snap);
    bool collected = false;
    if (!rc) rc = tag_refuse_collected(s, v, &collected);
    if (rc) return rc;
    nds_buf b = {0};
    char *key = nds_asprintf("%s%s", VS_TAG_PREFIX, name);
    if (!key) return nds_err(NDS_ENOMEM, "out of memory");
    if (!(rc = vs_tag_encode(v, wall_ns(), &b))) {
        nds_write_options wo = NDS_WRITE_OPTIONS_INIT;
        wo.if_equal.kind = NDS_GEN_ABSENT;
        rc = nds_kvstore_write(vs_store_base(s), key, b.data, b.len, &wo, NULL);
        if (rc == NDS_ECONFLICT)
            rc = nds_err(NDS_ECONFLICT, "versioned store %s: tag \"%s\" exists (tags never move)",
                         vs_store_url(s), name);
    }
    /* Asked again after the write: a gc run that listed the tags before it may have written a
     * state collecting v since; then the tag is withdrawn (versioned_gc.c, "Order of a run"). */
    if (!rc) rc = tag_refuse_collected(s, v, &collected);
    if (rc && collected) (void)nds_kvstore_delete(vs_store_base(s), key, NULL);
    nds_buf_dispose(&b);
    free(key);
    return rc;
}
