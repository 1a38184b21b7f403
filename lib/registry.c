/* Registries of kvstore drivers, formats and codecs, by name. Built-ins come from lib/builtins.c
 * and are installed on first use; run-time registrations replace a same-named entry. A rwlock
 * guards each table. */
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "internal/error.h"
#include "internal/registry.h"

#define REGISTRY_MAX 64

typedef struct registry {
    pthread_rwlock_t lock;
    const void *entries[REGISTRY_MAX];
    size_t count;
} registry;

static registry kv_drivers = {PTHREAD_RWLOCK_INITIALIZER, {0}, 0};
static registry formats = {PTHREAD_RWLOCK_INITIALIZER, {0}, 0};
static registry codecs = {PTHREAD_RWLOCK_INITIALIZER, {0}, 0};
static pthread_once_t builtins_once = PTHREAD_ONCE_INIT;

typedef const char *(*name_fn)(const void *entry);
static const char *kv_name(const void *e) { return ((const nds_kv_driver *)e)->name; }
static const char *format_name(const void *e) { return ((const nds_format *)e)->name; }
static const char *codec_name(const void *e) { return ((const nds_codec *)e)->name; }

static int add(registry *r, const void *entry, name_fn name) {
    int rc = 0;
    pthread_rwlock_wrlock(&r->lock);
    size_t i = 0;
    while (i < r->count && strcmp(name(r->entries[i]), name(entry)) != 0) i++;
    if (i < r->count)
        r->entries[i] = entry;
    else if (r->count < REGISTRY_MAX)
        r->entries[r->count++] = entry;
    else
        rc = nds_err(NDS_ELIMIT, "registry full: cannot register \"%s\"", name(entry));
    pthread_rwlock_unlock(&r->lock);
    return rc;
}

static void install_builtins(void) {
    for (size_t i = 0; i < nds_builtin_kv_driver_count; i++)
        add(&kv_drivers, nds_builtin_kv_drivers[i], kv_name);
    const nds_kv_driver *test[4];
    for (size_t i = 0, n = nds_builtin_test_kv_drivers(test, 4); i < n; i++)
        add(&kv_drivers, test[i], kv_name);
    for (size_t i = 0; i < nds_builtin_format_count; i++)
        add(&formats, nds_builtin_formats[i], format_name);
    for (size_t i = 0; i < nds_builtin_codec_count; i++)
        add(&codecs, nds_builtin_codecs[i], codec_name);
}

static void ensure_builtins(void) { pthread_once(&builtins_once, install_builtins); }

/* Finds the entry for which match(entry, key) holds. */
static const void *find(registry *r, const char *key, int (*match)(const void *, const char *)) {
    ensure_builtins();
    if (!key) return NULL;
    const void *hit = NULL;
    pthread_rwlock_rdlock(&r->lock);
    for (size_t i = 0; i < r->count && !hit; i++)
        if (match(r->entries[i], key)) hit = r->entries[i];
    pthread_rwlock_unlock(&r->lock);
    return hit;
}

static int match_kv_name(const void *e, const char *k) { return strcmp(kv_name(e), k) == 0; }
static int match_kv_scheme(const void *e, const char *k) {
    const char *s = ((const nds_kv_driver *)e)->url_scheme;
    return s && strcmp(s, k) == 0;
}
static int match_format(const void *e, const char *k) {
    const nds_format *f = e;
    return strcmp(f->name, k) == 0 || (f->url_scheme && strcmp(f->url_scheme, k) == 0);
}
static int match_codec(const void *e, const char *k) { return strcmp(codec_name(e), k) == 0; }

const nds_kv_driver *nds_kv_driver_find(const char *name) {
    return find(&kv_drivers, name, match_kv_name);
}
const nds_kv_driver *nds_kv_driver_find_scheme(const char *scheme) {
    return find(&kv_drivers, scheme, match_kv_scheme);
}
const nds_format *nds_format_find(const char *name) { return find(&formats, name, match_format); }

/* Names a format goes by in "|NAME:" besides its name and URL scheme: neuroglancer's
 * "|precomputed:", and "|zarr2:" as neuroglancer's pipeline URLs write zarr v2. */
static const struct {
    const char *alias;
    const char *format;
} format_aliases[] = {{"precomputed", "neuroglancer_precomputed"}, {"zarr2", "zarr"}};

const char *nds_format_alias(const char *name) {
    for (size_t i = 0; i < sizeof format_aliases / sizeof format_aliases[0]; i++)
        if (strcmp(name, format_aliases[i].alias) == 0) return format_aliases[i].format;
    return name;
}

const nds_codec *nds_codec_find(const char *name) { return find(&codecs, name, match_codec); }

int nds_kv_driver_register(const nds_kv_driver *d) {
    ensure_builtins();
    if (!d || !d->name)
        return nds_err(NDS_EINVAL, "kvstore driver registration: no driver or no name");
    if (d->version != NDS_KV_DRIVER_VERSION)
        return nds_err(NDS_EINVAL,
                       "kvstore driver %s: interface version %u, but this library has version %d "
                       "(rebuild the driver against this library's ndstore/sys/kv_driver.h)",
                       d->name, d->version, NDS_KV_DRIVER_VERSION);
    if (!d->stage != !d->publish || !d->stage != !d->discard)
        return nds_err(NDS_EINVAL, "kvstore driver %s: stage, publish and discard go together",
                       d->name);
    if (!d->prepare != !d->prepared_read || !d->prepare != !d->prepared_dispose ||
        !d->prepare != !d->commit_prepared)
        return nds_err(NDS_EINVAL, "kvstore driver %s: prepare, prepared_read, prepared_dispose "
                       "and commit_prepared go together", d->name);
    return add(&kv_drivers, d, kv_name);
}

/* Whether members that go together are all present or all absent (present: how many of n). */
static bool together(int present, int n) { return present == 0 || present == n; }

/* What is wrong with a format's members (NULL: nothing). */
static const char *format_defect(const nds_format *f) {
    if (!f->open || !f->close || !f->metadata_json || !f->get_attributes || !f->set_attributes ||
        !f->chunk_key || !f->parse_chunk_key || !f->decode_chunk || !f->encode_chunk)
        return "lacks open, close, metadata_json, get_attributes, set_attributes, chunk_key, "
               "parse_chunk_key, decode_chunk or encode_chunk";
    if (!together(!!f->group_key + !!f->group_read_chunk + !!f->group_encode, 3))
        return "has only some of group_key, group_read_chunk and group_encode, which go together";
    if (!together(!!f->group_parse_key + !!f->group_list, 2))
        return "has only one of group_parse_key and group_list, which go together";
    if (!together(!!f->decode_vlen + !!f->encode_vlen, 2))
        return "has only one of decode_vlen and encode_vlen, which go together";
    return NULL;
}

int nds_format_register(const nds_format *f) {
    ensure_builtins();
    if (!f || !f->name)
        return nds_err(NDS_EINVAL, "format registration: %s",
                       f ? "the format has no name" : "no format");
    if (f->version != NDS_FORMAT_VERSION)
        return nds_err(NDS_EINVAL,
                       "format registration: format \"%.40s\" is of version %u; this library "
                       "takes version %d (rebuild it against this library's ndstore/sys/format.h)",
                       f->name, f->version, NDS_FORMAT_VERSION);
    const char *defect = format_defect(f);
    if (defect)
        return nds_err(NDS_EINVAL, "format registration: format \"%.40s\" %s", f->name, defect);
    return add(&formats, f, format_name);
}

int nds_codec_register(const nds_codec *c) {
    ensure_builtins();
    if (!c || !c->name)
        return nds_err(NDS_EINVAL, "codec registration: %s",
                       c ? "the codec has no name" : "no codec");
    if (c->version != NDS_CODEC_VERSION)
        return nds_err(NDS_EINVAL,
                       "codec registration: codec \"%.40s\" is of version %u; this library "
                       "takes version %d",
                       c->name, c->version, NDS_CODEC_VERSION);
    if (!c->create || !c->destroy || !c->config_json || !c->encode || !c->decode)
        return nds_err(NDS_EINVAL,
                       "codec registration: codec \"%.40s\" lacks create, destroy, "
                       "config_json, encode or decode",
                       c->name);
    return add(&codecs, c, codec_name);
}

int nds_format_each(int (*fn)(void *ctx, const nds_format *f), void *ctx) {
    ensure_builtins();
    const void *copy[REGISTRY_MAX];
    pthread_rwlock_rdlock(&formats.lock);
    size_t n = formats.count;
    memcpy(copy, formats.entries, n * sizeof copy[0]);
    pthread_rwlock_unlock(&formats.lock);
    for (size_t i = 0; i < n; i++) {
        int rc = fn(ctx, copy[i]);
        if (rc) return rc;
    }
    return 0;
}
