/* nds_versioned_diff (include/ndstore/versioned.h): the keys that differ between two versions of
 * a versioned store, under the handle's path.
 *
 * The engine (vs_store_diff, over vs_tree_diff_range) walks both versions' trees at once and skips
 * the subtrees they share, so the cost follows the changes. Here: resolving the two versions (0:
 * the handle's view), restricting the walk to the handle's path [path, successor of path), and
 * reporting keys relative to it with their kind.
 *
 * Threading: as the handle (internally synchronised); the callback runs on the calling thread.
 * Ownership: keys passed to the callback are borrowed for the call.
 */
#include <stdlib.h>
#include <string.h>

#include "ndstore/versioned.h"
#include "versioned_store.h"
#include "internal/error.h"
#include "internal/util.h"

typedef struct diff_relay {
    size_t path_len; /* stripped from every key */
    nds_diff_fn fn;
    void *ctx;
} diff_relay;

static int relay(void *ctx, const char *key, const vs_entry *old_e, const vs_entry *new_e) {
    diff_relay *r = ctx;
    nds_diff_kind kind = !old_e ? NDS_DIFF_ADDED : !new_e ? NDS_DIFF_REMOVED : NDS_DIFF_CHANGED;
    return r->fn(r->ctx, key + r->path_len, kind);
}

/* Version v of the store, or the handle's view for 0. */
static int snapshot_of(vs_store *s, const vs_snapshot *view, uint64_t v, vs_snapshot *out) {
    if (v == 0) {
        *out = *view;
        return 0;
    }
    return vs_store_version(s, v, out);
}

int nds_versioned_diff(nds_kvstore *kv, uint64_t a, uint64_t b, nds_diff_fn fn, void *ctx) {
    vs_snapshot view, sa, sb;
    vs_store *s = vs_store_of(kv, &view);
    if (!s) return NDS_EINVAL; /* message set */
    if (!fn) return nds_err(NDS_EINVAL, "versioned diff of %s: no callback", nds_kvstore_url(kv));
    int rc = snapshot_of(s, &view, a, &sa);
    if (rc == 0) rc = snapshot_of(s, &view, b, &sb);
    if (rc) return rc;
    const char *path = nds_kvstore_path(kv);
    char *end = nds_prefix_successor(path);
    if (!end) return nds_err(NDS_ENOMEM, "versioned diff of %s: out of memory", nds_kvstore_url(kv));
    diff_relay r = {strlen(path), fn, ctx};
    rc = vs_store_diff(s, &sa, &sb, path, end, relay, &r);
    free(end);
    return rc;
}
