/* Opening arrays, their metadata, attributes, and groups. The I/O path is in array_read.c and
 * array_io.c, resize / stats / verify in array_maint.c. */
#include <stdlib.h>
#include <string.h>

#include "internal/array_internal.h"
#include "internal/context_internal.h"
#include "internal/error.h"
#include "internal/json_util.h"
#include "internal/kvstore_internal.h"
#include "internal/registry.h"
#include "internal/spec.h"
#include "internal/txn_internal.h"
#include "internal/util.h"

/* Largest canonical chunk the core will hold in memory. */
#define NDS_CHUNK_BYTES_MAX ((uint64_t)2 << 30)

/* The optional read grid of sharded formats: every entry set, dividing the chunk, and a read_chunk
 * method. */
static int derive_read_chunk(nds_array *a) {
    const nds_array_meta *m = &a->meta;
    a->read_chunk_bytes = 0;
    if (m->rank == 0 || m->read_chunk_shape[0] == 0) return 0;
    size_t bytes = a->elem;
    for (size_t d = 0; d < m->rank; d++) {
        uint64_t r = m->read_chunk_shape[d];
        if (r == 0 || m->chunk_shape[d] % r != 0)
            return nds_err(NDS_EFORMAT,
                           "%s: read chunk dimension %zu (%llu) does not divide the chunk (%llu)",
                           nds_kvstore_url(a->kv), d, (unsigned long long)r,
                           (unsigned long long)m->chunk_shape[d]);
        bytes *= (size_t)r; /* <= chunk_bytes, which fits */
    }
    if (!a->format->read_chunk)
        return nds_err(NDS_EINTERNAL, "%s: format %s has a read grid but no read_chunk",
                       nds_kvstore_url(a->kv), a->format->name);
    a->read_chunk_bytes = bytes;
    return 0;
}

int nds_array_derive_sizes(nds_array *a) {
    const nds_array_meta *m = &a->meta;
    a->elem = m->elem_size ? m->elem_size : nds_dtype_size(m->dtype);
    bool vlen = nds_dtype_is_vlen(m->dtype); /* no size: lib/array_vlen.c */
    if ((a->elem == 0 && !vlen) || a->elem > NDS_ELEM_MAX_SIZE) return nds_err(NDS_EFORMAT, "%s: invalid dtype", nds_kvstore_url(a->kv));
    if (vlen && (a->format->decode_vlen == NULL || a->format->encode_vlen == NULL))
        return nds_err(NDS_EUNSUPPORTED, "%s: %s arrays of %s elements are not supported",
                       nds_kvstore_url(a->kv), a->format->name, nds_dtype_name(m->dtype));
    if (m->rank > NDS_MAX_RANK)
        return nds_err(NDS_EFORMAT, "%s: rank %zu above %d", nds_kvstore_url(a->kv), m->rank,
                       NDS_MAX_RANK);
    uint64_t elems, bytes;
    for (size_t d = 0; d < m->rank; d++)
        if (m->chunk_shape[d] == 0)
            return nds_err(NDS_EFORMAT, "%s: chunk dimension %zu is 0", nds_kvstore_url(a->kv), d);
    if (!nds_product_u64(m->chunk_shape, m->rank, &elems) ||
        !nds_mul_u64(elems, vlen ? 1 : a->elem, &bytes) || bytes > NDS_CHUNK_BYTES_MAX)
        return nds_err(NDS_ELIMIT, "%s: chunks of more than %llu bytes are not supported",
                       nds_kvstore_url(a->kv), (unsigned long long)NDS_CHUNK_BYTES_MAX);
    a->chunk_elems = (size_t)elems;
    a->chunk_bytes = vlen ? 0 : (size_t)bytes;
    return derive_read_chunk(a);
}

/* Format detection: the first registered format whose metadata key exists under kv. */
typedef struct detect_ctx {
    nds_kvstore *kv;
    const nds_format *found;
    int error;
} detect_ctx;

static int try_format(void *c, const nds_format *f) {
    detect_ctx *d = c;
    if (!f->metadata_key) return 0;
    nds_read_options o = NDS_READ_OPTIONS_INIT;
    o.byte_length = 0; /* existence only */
    nds_read_result r;
    int rc = nds_kvstore_read(d->kv, f->metadata_key, &o, &r);
    if (rc) {
        d->error = rc;
        return 1;
    }
    int present = r.state == NDS_READ_VALUE;
    nds_read_result_dispose(&r);
    if (present) d->found = f;
    return present;
}

static int detect_format(nds_kvstore *kv, const nds_format **out) {
    detect_ctx d = {kv, NULL, 0};
    nds_format_each(try_format, &d);
    if (d.error) return d.error;
    if (!d.found)
        return nds_err(NDS_ENOTFOUND, "no array at %s (no format's metadata found)",
                       nds_kvstore_url(kv));
    *out = d.found;
    return 0;
}

/* Opens the spec's kvstore with its path as a directory (ending in '/'). */
static int open_array_kvstore(const json_object *spec, nds_context *ctx, nds_kvstore **out) {
    json_object *kvspec, *copy = NULL;
    json_object_object_get_ex(spec, "kvstore", &kvspec);
    json_object_deep_copy(kvspec, &copy, NULL);
    if (!copy) return nds_err(NDS_ENOMEM, "out of memory");
    const char *path = "";
    nds_json_get_string(copy, "path", true, "kvstore spec", &path);
    size_t n = strlen(path);
    if (n && path[n - 1] != '/') {
        char *dir = nds_asprintf("%s/", path);
        json_object_object_add(copy, "path", json_object_new_string(dir ? dir : path));
        free(dir);
    }
    int rc = nds_kvstore_open_json(out, copy, ctx);
    json_object_put(copy);
    return rc;
}

static int resolve_format(json_object *spec, nds_kvstore *kv, unsigned mode,
                          const nds_format **out) {
    const char *name = NULL;
    int rc = nds_json_get_string(spec, "driver", true, "spec", &name);
    if (rc) return rc;
    if (!name) {
        if (mode & NDS_OPEN_CREATE)
            name = "zarr"; /* creating with no format named: zarr v2 */
        else
            return detect_format(kv, out);
    }
    *out = nds_format_find(name);
    if (!*out) return nds_err(NDS_ENOTFOUND, "spec: unknown format driver \"%s\"", name);
    return 0;
}

static void array_destroy(nds_array *a) {
    if (!a) return;
    if (a->format) a->format->close(a->state);
    nds_kvstore_free(a->kv);
    nds_chunk_locks_dispose(&a->locks);
    pthread_rwlock_destroy(&a->meta_lock);
    free(a);
}

/* Whether a kvstore path names the root of its store: nothing but "/" and "." segments. */
static bool is_store_root(const char *path) {
    for (const char *p = path; *p; p++)
        if (*p != '/' && !(*p == '.' && (p == path || p[-1] == '/') && (p[1] == '/' || !p[1])))
            return false;
    return true;
}

/* delete_existing empties the array's path: at a store's root that is the whole store (file:///
 * is the whole file system), which no one means by replacing an array. */
static int delete_existing(nds_array *a) {
    if (is_store_root(nds_kvstore_path(a->kv)))
        return nds_err(NDS_EINVAL,
                       "delete_existing: refusing to delete everything in %s, the root of its store; "
                       "give the array a path below it",
                       nds_kvstore_url(a->kv));
    return nds_kvstore_delete_range(a->kv, "", "");
}


/* ---- the metadata generation a handle was opened at ---- */

int nds_array_metadata_generation(nds_array *a, nds_generation *gen) {
    gen->kind = NDS_GEN_NONE;
    if (!a->format->metadata_key) return 0;
    nds_read_options o = NDS_READ_OPTIONS_INIT;
    o.if_not_equal = a->meta_gen; /* unchanged: no bytes */
    nds_read_result r;
    int rc = nds_kvstore_read(a->kv, a->format->metadata_key, &o, &r);
    if (rc)
        return nds_err_prefix(rc, "%s: metadata of %s", a->format->name, nds_kvstore_url(a->kv));
    *gen = r.generation;
    nds_read_result_dispose(&r);
    return 0;
}

/* Metadata checks are only for handles outside transactions, on stores with generations. */
static bool checks_metadata(const nds_array *a) {
    return !a->txn && a->meta_gen.kind == NDS_GEN_VALUE;
}

int nds_array_check_stale(const nds_array *a, const char *what) {
    if (a->snapshot)
        return nds_err(NDS_EINVAL,
                       "%s %s: opened from consolidated metadata (\"consolidated\": true), a "
                       "read-only snapshot; open it without \"consolidated\" to change it",
                       what, nds_kvstore_url(a->kv));
    if (!checks_metadata(a) || !__atomic_load_n(&a->meta_stale, __ATOMIC_ACQUIRE)) return 0;
    return nds_err(NDS_ECONFLICT,
                   "%s %s: array metadata changed since it was opened (resized?): reopen it", what,
                   nds_kvstore_url(a->kv));
}

int nds_array_check_metadata(nds_array *a, const char *what) {
    int rc = nds_array_check_stale(a, what);
    if (rc || !checks_metadata(a)) return rc;
    nds_generation now;
    rc = nds_array_metadata_generation(a, &now);
    if (rc) /* the write is done; whether it lies inside the shape is unknown */
        return nds_err_prefix(rc, "%s %s: done, but checking the array metadata failed", what,
                              nds_kvstore_url(a->kv));
    if (nds_generation_equal(&now, &a->meta_gen)) return 0;
    __atomic_store_n(&a->meta_stale, 1, __ATOMIC_RELEASE);
    return nds_err(
        NDS_ECONFLICT,
        "%s %s: array metadata changed during the write (resized?): what was written may "
        "lie outside the current shape; reopen the array and write again",
        what, nds_kvstore_url(a->kv));
}

void nds_array_metadata_changed(nds_array *a) {
    if (!checks_metadata(a)) return;
    /* Read after this handle's own metadata write: a change by someone else in between would be
     * taken for ours (the format interface does not return the generation it wrote). */
    nds_generation now;
    if (nds_array_metadata_generation(a, &now) == 0 && now.kind == NDS_GEN_VALUE) {
        a->meta_gen = now;
        __atomic_store_n(&a->meta_stale, 0, __ATOMIC_RELEASE);
    }
}

/* Whether a's metadata key still has the generation a was opened at (no error set). */
static bool metadata_current(nds_array *a) {
    nds_generation now;
    if (!checks_metadata(a)) return true;
    if (__atomic_load_n(&a->meta_stale, __ATOMIC_ACQUIRE)) return false;
    return nds_array_metadata_generation(a, &now) == 0 && nds_generation_equal(&now, &a->meta_gen);
}

/* Opens the format's instance and records the generation of the metadata it read: read before
 * and after the open, and kept when they agree or when the open created the metadata. When they
 * differ otherwise (someone changed it meanwhile) the instance is opened again, without creating,
 * from the metadata as it now is; a generation that keeps moving stays the older one, so that a
 * later check fails safe. */
static int open_format(nds_array *a, const nds_format *f, json_object *spec, unsigned mode) {
    unsigned reopen = mode & ~(unsigned)(NDS_OPEN_CREATE | NDS_OPEN_DELETE_EXISTING);
    nds_generation before = {NDS_GEN_NONE, {0}}, after;
    a->format = f;                   /* for the generation reads */
    a->meta_gen.kind = NDS_GEN_NONE; /* compared against nothing: read whole */
    if (!a->txn && !a->snapshot && nds_array_metadata_generation(a, &before))
        before.kind = NDS_GEN_NONE;
    for (int attempt = 0; attempt < 3; attempt++) {
        a->format =
            NULL; /* set again only when open succeeded: destroy must not close a failed state */
        int rc = f->open(a->kv, spec, attempt ? reopen : mode, &a->state, &a->meta);
        if (rc) return rc; /* its errors name the format already */
        a->format = f;
        if (a->txn || a->snapshot || nds_array_metadata_generation(a, &after) ||
            nds_generation_equal(&before, &after) || attempt == 2)
            break;
        if (before.kind != NDS_GEN_VALUE && (mode & NDS_OPEN_CREATE)) {
            /* This open created the metadata, or checked what a racing creator wrote against the
             * spec: the instance is what is stored. Opening again would judge a spec made for
             * creating (a schema the metadata overrides) as if it opened an existing array. */
            before = after;
            break;
        }
        f->close(a->state);
        a->state = NULL;
        before = after;
    }
    a->meta_gen = a->txn || a->snapshot ? (nds_generation){NDS_GEN_NONE, {0}} : before;
    return 0;
}

/* "consolidated": true asks the format to open from its consolidated metadata: a read-only
 * snapshot (docs/formats.md), so not with a mode that creates, nor in a transaction, and only for
 * a format that has consolidated metadata. The metadata generation is then not read at all: the
 * open costs the consolidated copy's read alone. */
static int check_consolidated(nds_array *a, json_object *spec, unsigned mode) {
    bool asked = false;
    int rc = nds_json_get_bool(spec, "consolidated", true, "spec", &asked);
    if (rc || !asked) return rc;
    if (mode & (NDS_OPEN_CREATE | NDS_OPEN_DELETE_EXISTING))
        return nds_err(NDS_EINVAL, "spec: \"consolidated\": true opens a read-only snapshot; it "
                                   "cannot be combined with \"create\"");
    if (a->txn)
        return nds_err(NDS_EINVAL,
                       "spec: \"consolidated\": true opens a read-only snapshot, not inside a "
                       "transaction");
    if (!a->format->consolidate)
        return nds_err(NDS_EUNSUPPORTED,
                       "spec: \"consolidated\": format %s has no consolidated metadata",
                       a->format->name);
    a->snapshot = true;
    return 0;
}

static int open_with_spec(nds_array *a, json_object *spec, unsigned mode) {
    int rc = open_array_kvstore(spec, a->ctx, &a->kv);
    a->store = a->kv;
    if (!rc && a->txn) { /* inside a transaction: see and stage through its staging handle */
        nds_kvstore *staged = NULL;
        rc = nds_txn_check_open(a->txn);
        if (!rc) rc = nds_txn_kvstore(&staged, a->txn, a->kv);
        if (!rc) {
            nds_kvstore_free(a->kv);
            a->kv = staged;
        }
    }
    if (!rc) rc = resolve_format(spec, a->kv, mode, &a->format);
    if (!rc) rc = check_consolidated(a, spec, mode);
    if (!rc && (mode & NDS_OPEN_DELETE_EXISTING)) rc = delete_existing(a);
    if (rc) return rc;
    rc = open_format(a, a->format, spec, mode);
    if (rc) return rc;
    return nds_array_derive_sizes(a);
}

int nds_array_open(nds_array **out, const char *spec_text, const nds_open_options *opts) {
    *out = NULL;
    json_object *spec = NULL;
    int rc = nds_spec_parse(spec_text, &spec);
    if (rc) return rc;
    unsigned mode = opts && opts->mode ? opts->mode : 0;
    if (!mode && (rc = nds_spec_mode(spec, &mode))) {
        json_object_put(spec);
        return rc;
    }
    nds_array *a = calloc(1, sizeof *a);
    if (!a || nds_chunk_locks_init(&a->locks)) {
        free(a);
        json_object_put(spec);
        return nds_err(NDS_ENOMEM, "out of memory opening an array");
    }
    pthread_rwlock_init(&a->meta_lock, NULL);
    a->ctx = nds_context_resolve(opts ? opts->ctx : NULL);
    a->txn = opts && opts->version >= 2 ? opts->txn : NULL;
    rc = open_with_spec(a, spec, mode);
    json_object_put(spec);
    if (rc) {
        array_destroy(a);
        return rc;
    }
    *out = a;
    return 0;
}

void nds_array_free(nds_array *a) { array_destroy(a); }

size_t nds_array_rank(const nds_array *a) { return a->meta.rank; }
nds_dtype nds_array_dtype(const nds_array *a) { return a->meta.dtype; }
const char *nds_array_format(const nds_array *a) { return a->format->name; }
nds_kvstore *nds_array_kvstore(const nds_array *a) { return a->kv; }

void nds_array_shape(const nds_array *a, uint64_t *shape) {
    nds_array *m = (nds_array *)a;
    pthread_rwlock_rdlock(&m->meta_lock);
    memcpy(shape, a->meta.shape, a->meta.rank * sizeof *shape);
    pthread_rwlock_unlock(&m->meta_lock);
}

void nds_array_origin(const nds_array *a, int64_t *origin) {
    nds_array *m = (nds_array *)a;
    pthread_rwlock_rdlock(&m->meta_lock);
    memcpy(origin, a->meta.origin, a->meta.rank * sizeof *origin);
    pthread_rwlock_unlock(&m->meta_lock);
}

void nds_array_units(const nds_array *a, nds_unit *units) {
    nds_array *m = (nds_array *)a;
    pthread_rwlock_rdlock(&m->meta_lock);
    memcpy(units, a->meta.units, a->meta.rank * sizeof *units);
    pthread_rwlock_unlock(&m->meta_lock);
}

void nds_array_chunk_shape(const nds_array *a, uint64_t *chunks) {
    memcpy(chunks, a->meta.chunk_shape, a->meta.rank * sizeof *chunks);
}

void nds_array_read_chunk_shape(const nds_array *a, uint64_t *chunks) {
    const uint64_t *src = a->read_chunk_bytes ? a->meta.read_chunk_shape : a->meta.chunk_shape;
    memcpy(chunks, src, a->meta.rank * sizeof *chunks);
}

void nds_array_fill_value(const nds_array *a, void *out) {
    memcpy(out, a->meta.fill_value, NDS_DTYPE_MAX_SIZE);
}

size_t nds_array_dtype_size(const nds_array *a) { return a->elem; }

void nds_array_fill_element(const nds_array *a, void *out) {
    memcpy(out, a->meta.fill_value, a->elem);
}

void nds_array_codec_description(const nds_array *a, char *buf, size_t cap) {
    if (cap) buf[0] = '\0';
    if (a->format->describe_codec) a->format->describe_codec(a->state, buf, cap);
}

/* Serialises a new JSON object into malloc'd text and drops the object. */
static int take_json_text(json_object *obj, char **out) {
    *out = nds_json_to_string(obj, false);
    json_object_put(obj);
    return *out ? 0 : nds_err(NDS_ENOMEM, "out of memory");
}

int nds_array_spec(const nds_array *a, char **out) {
    json_object *kv;
    int rc = nds_kvstore_spec_json(a->kv, &kv);
    if (rc) return rc;
    json_object *spec = json_object_new_object();
    json_object_object_add(spec, "driver", json_object_new_string(a->format->name));
    json_object_object_add(spec, "kvstore", kv);
    if (a->format->spec_json && (rc = a->format->spec_json(a->state, spec)) != 0) {
        json_object_put(spec);
        return rc;
    }
    return take_json_text(spec, out);
}

int nds_array_metadata(const nds_array *a, char **out) {
    json_object *meta;
    nds_array *m = (nds_array *)a;
    pthread_rwlock_rdlock(&m->meta_lock);
    int rc = a->format->metadata_json(a->state, &meta);
    pthread_rwlock_unlock(&m->meta_lock);
    return rc ? rc : take_json_text(meta, out);
}

int nds_array_get_attributes(nds_array *a, char **out) {
    json_object *attrs;
    pthread_rwlock_rdlock(&a->meta_lock);
    int rc = a->format->get_attributes(a->state, a->kv, &attrs);
    pthread_rwlock_unlock(&a->meta_lock);
    return rc ? rc : take_json_text(attrs, out);
}

int nds_array_set_attributes(nds_array *a, const char *text) {
    json_object *attrs;
    int rc = nds_json_parse(text, strlen(text), "attributes", &attrs);
    if (rc) return rc;
    if (!json_object_is_type(attrs, json_type_object)) {
        json_object_put(attrs);
        return nds_err(NDS_EINVAL, "attributes must be a json object");
    }
    if ((rc = nds_array_check_stale(a, "attributes of")) != 0) { /* a read-only snapshot */
        json_object_put(attrs);
        return rc;
    }
    pthread_rwlock_wrlock(&a->meta_lock);
    bool current = metadata_current(a);
    rc = a->format->set_attributes(a->state, a->kv, attrs);
    /* The handle's metadata stays what it was: up to date only if it was before. */
    if (!rc && current) nds_array_metadata_changed(a);
    if (!rc && !current) __atomic_store_n(&a->meta_stale, 1, __ATOMIC_RELEASE);
    pthread_rwlock_unlock(&a->meta_lock);
    json_object_put(attrs);
    return rc;
}

static int create_group_at(nds_kvstore *root, const nds_format *f, const char *path, size_t len) {
    char *sub = nds_asprintf("%.*s%s", (int)len, path, len && path[len - 1] != '/' ? "/" : "");
    nds_kvstore *kv = NULL;
    int rc = sub ? nds_kvstore_sub(&kv, root, sub) : nds_err(NDS_ENOMEM, "out of memory");
    free(sub);
    if (!rc) rc = f->create_group(kv);
    nds_kvstore_free(kv);
    return rc;
}

/* Creates the group at path under root and, with parents, first at the root and every ancestor. */
static int create_groups(nds_kvstore *root, const nds_format *f, const char *path, int parents) {
    size_t n = strlen(path);
    while (n && path[n - 1] == '/') n--;
    int rc = 0;
    if (parents) {
        rc = create_group_at(root, f, path, 0);
        for (size_t i = 1; i < n && !rc; i++)
            if (path[i] == '/' && path[i - 1] != '/') rc = create_group_at(root, f, path, i);
    }
    if (!rc && (n || !parents)) rc = create_group_at(root, f, path, n);
    return rc;
}

int nds_group_create(const char *kvstore_spec, const char *path, const char *format, int parents,
                     nds_context *ctx) {
    const nds_format *f = nds_format_find(format ? format : "zarr");
    if (!f) return nds_err(NDS_ENOTFOUND, "unknown format \"%s\"", format);
    if (!f->create_group) return nds_err(NDS_EUNSUPPORTED, "%s: groups are not supported", f->name);
    nds_kvstore *kv;
    int rc = nds_kvstore_open(&kv, kvstore_spec, ctx);
    if (rc) return rc;
    const char *p = nds_kvstore_path(kv);
    size_t n = strlen(p);
    nds_kvstore *root = kv;
    if (n && p[n - 1] != '/')
        rc = nds_kvstore_sub(&root, kv, "/"); /* the store path is a directory */
    char *norm = NULL; /* "a/./b" is "a/b"; "../x" is refused before anything is created */
    if (!rc) rc = nds_path_join("", path ? path : "", "group path", &norm);
    if (!rc) rc = create_groups(root, f, norm, parents);
    free(norm);
    if (root != kv) nds_kvstore_free(root);
    nds_kvstore_free(kv);
    return rc;
}

/* The group's handle: path inside the store named by kvstore_spec, as a directory. */
static int open_group_kvstore(const char *kvstore_spec, const char *path, nds_context *ctx,
                              nds_kvstore **out) {
    nds_kvstore *kv;
    int rc = nds_kvstore_open(&kv, kvstore_spec, ctx);
    if (rc) return rc;
    char *norm = NULL, *dir = NULL;
    rc = nds_path_join("", path ? path : "", "group path", &norm);
    if (!rc) {
        const char *p = nds_kvstore_path(kv);
        size_t n = strlen(p);
        /* The store path is a directory ("d/s.zarr" holds "d/s.zarr/.zgroup"). */
        dir = nds_asprintf("%s%s%s", n && p[n - 1] != '/' ? "/" : "", norm, norm[0] ? "/" : "");
        rc = dir ? nds_kvstore_sub(out, kv, dir) : nds_err(NDS_ENOMEM, "out of memory");
    }
    free(dir);
    free(norm);
    nds_kvstore_free(kv);
    return rc;
}

int nds_group_consolidate(const char *kvstore_spec, const char *path, const char *format,
                          size_t *count, nds_context *ctx) {
    if (count) *count = 0;
    const nds_format *f = nds_format_find(format ? format : "zarr");
    if (!f) return nds_err(NDS_ENOTFOUND, "unknown format \"%s\"", format);
    if (!f->consolidate)
        return nds_err(NDS_EUNSUPPORTED, "%s: consolidated metadata is not supported", f->name);
    nds_kvstore *g = NULL;
    int rc = open_group_kvstore(kvstore_spec, path, ctx, &g);
    if (!rc) rc = f->consolidate(g, count);
    nds_kvstore_free(g);
    return rc;
}
