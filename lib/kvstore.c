/* kvstore handles: a shared driver instance plus a key prefix. The core joins prefix and key, so
 * drivers only ever see full keys; wrappers here are the one place for argument checks and
 * fallbacks. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/context_internal.h"
#include "internal/error.h"
#include "internal/json_util.h"
#include "internal/kvstore_internal.h"
#include "internal/registry.h"
#include "internal/util.h"

/* One opened driver instance, shared by every handle derived from it with nds_kvstore_sub. */
typedef struct kv_instance {
    atomic_int refs;
    const nds_kv_driver *driver;
    void *state;
    json_object *spec; /* the driver's spec without "path", for printing */
} kv_instance;

struct nds_kvstore {
    atomic_int refs;
    kv_instance *inst;
    nds_context *ctx;
    char *path; /* key prefix */
    char *url;  /* url_base + path, for messages */
};

static void instance_unref(kv_instance *inst) {
    if (!inst || atomic_fetch_sub(&inst->refs, 1) != 1) return;
    inst->driver->close(inst->state);
    json_object_put(inst->spec);
    free(inst);
}

/* base + path for messages and reports, which never show a credential. Each hidden secret
 * ("***") replaced at least one byte, so three times the length always holds the result. */
static char *redacted_url(const char *base, const char *path) {
    size_t n = strlen(base) + strlen(path);
    char *url = malloc(3 * n + 4);
    if (url) {
        snprintf(url, 3 * n + 4, "%s%s", base, path);
        nds_redact_secrets(url, 3 * n + 4);
    }
    return url;
}

static int make_handle(nds_kvstore **out, kv_instance *inst, nds_context *ctx, const char *path) {
    nds_kvstore *kv = calloc(1, sizeof *kv);
    char base[4096] = "";
    if (kv) {
        inst->driver->url_base(inst->state, base, sizeof base);
        kv->path = nds_strdup(path);
        kv->url = redacted_url(base, path);
    }
    if (!kv || !kv->path || !kv->url) {
        if (kv) free(kv->path), free(kv->url);
        free(kv);
        return nds_err(NDS_ENOMEM, "out of memory opening a kvstore");
    }
    atomic_init(&kv->refs, 1);
    atomic_fetch_add(&inst->refs, 1);
    kv->inst = inst;
    kv->ctx = nds_context_resolve(ctx);
    *out = kv;
    return 0;
}

int nds_kvstore_open_json(nds_kvstore **out, const json_object *spec, nds_context *ctx) {
    const char *name = NULL, *path = "";
    int rc = nds_json_get_string(spec, "driver", false, "kvstore spec", &name);
    if (rc) return rc;
    if ((rc = nds_json_get_string(spec, "path", true, "kvstore spec", &path))) return rc;
    if ((rc = nds_path_check_root(path, "kvstore path"))) return rc;
    const nds_kv_driver *d = nds_kv_driver_find(name);
    if (!d) return nds_err(NDS_ENOTFOUND, "kvstore spec: unknown driver \"%s\"", name);
    kv_instance *inst = calloc(1, sizeof *inst);
    if (!inst) return nds_err(NDS_ENOMEM, "out of memory opening a kvstore");
    inst->driver = d;
    if ((rc = d->open(&inst->state, spec))) {
        free(inst);
        return nds_err_prefix(rc, "%s kvstore", name);
    }
    json_object_deep_copy((json_object *)spec, &inst->spec, NULL);
    if (inst->spec) json_object_object_del(inst->spec, "path");
    atomic_init(&inst->refs, 1);
    rc = make_handle(out, inst, ctx, path);
    instance_unref(inst);
    return rc;
}

/* The spec of a pipeline's first segment, a URL with a scheme ("memory://x/") or a bare path (a
 * file URL). */
static int base_url_to_spec(const char *url, json_object **out) {
    if (url[strspn(url, " \t\r\n\v\f")] == '\0') /* "" would be the current directory */
        return nds_err(NDS_EINVAL, "kvstore url is empty: give a url or a path");
    const char *sep = strstr(url, "://");
    char scheme[32] = "file";
    const char *rest = url;
    if (sep) {
        size_t n = (size_t)(sep - url);
        if (n == 0 || n >= sizeof scheme) return nds_err(NDS_EINVAL, "bad kvstore url \"%s\"", url);
        memcpy(scheme, url, n);
        scheme[n] = '\0';
        rest = sep + 3;
    }
    if (sep && strcmp(scheme, "file") != 0) {
        /* Credentials never travel in a url (userinfo, a signed query): refused before a driver
         * could quote a piece of one ("bad bucket name \"AK:SECRET\""). */
        char *copy = nds_strdup(url);
        size_t cap = copy ? 3 * strlen(url) + 4 : 0;
        char *grown = copy ? realloc(copy, cap) : NULL;
        if (!grown) {
            free(copy);
            return nds_err(NDS_ENOMEM, "out of memory");
        }
        int hidden = nds_redact_secrets(grown, cap);
        if (hidden) {
            int rc = nds_err(NDS_EINVAL, "kvstore url \"%s\" holds a credential: credentials come "
                             "from the environment or the driver's credential files, never from "
                             "a url", grown);
            free(grown);
            return rc;
        }
        free(grown);
    }
    const nds_kv_driver *d = nds_kv_driver_find_scheme(scheme);
    if (!d || !d->parse_url)
        return nds_err(NDS_ENOTFOUND, "unknown kvstore url scheme \"%s\" in \"%s\"", scheme, url);
    json_object *spec = json_object_new_object();
    json_object_object_add(spec, "driver", json_object_new_string(d->name));
    int rc = d->parse_url(rest, spec);
    if (rc) {
        json_object_put(spec);
        return nds_err_prefix(rc, "kvstore url \"%s\"", url);
    }
    *out = spec;
    return 0;
}

/* ---- URL pipelines: BASEURL(|NAME:REST)* ----
 *
 * Each "|NAME:REST" segment after the base URL names a kvstore adapter stacked on what precedes
 * it (in an array URL, the last may name the format instead). One reader of segments serves
 * kvstore URLs and array URLs alike, so no caller splits a URL its own way. */

/* One "|NAME:REST" segment. */
typedef struct url_segment {
    const char *text; /* the segment from its '|', for messages */
    size_t len;       /* bytes of text: up to the next '|' or the end */
    char name[64];    /* NAME */
    const char *rest; /* REST: after NAME's ':', up to text + len */
    size_t rest_len;
} url_segment;

static bool segment_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

/* Reads the segment that starts at p (a '|') of url; NDS_EINVAL naming it when malformed. */
static int read_segment(const char *url, const char *p, const char *what, url_segment *seg) {
    seg->text = p;
    seg->len = 1 + strcspn(p + 1, "|");
    size_t n = 0;
    while (n + 1 < seg->len && segment_name_char(p[1 + n])) n++;
    if (n == 0 || n >= sizeof seg->name || n + 1 >= seg->len || p[1 + n] != ':')
        return nds_err(NDS_EINVAL,
                       "%s \"%s\": segment \"%.*s\" is not |NAME:REST (NAME of a-z, 0-9, _, -)",
                       what, url, (int)seg->len, p);
    memcpy(seg->name, p + 1, n);
    seg->name[n] = '\0';
    seg->rest = p + 2 + n;
    seg->rest_len = seg->len - 2 - n;
    return 0;
}

/* The registered kvstore adapter named name, or NULL. */
static const nds_kv_driver *find_adapter(const char *name) {
    const nds_kv_driver *d = nds_kv_driver_find(name);
    return d && (d->capabilities & NDS_KV_CAP_ADAPTER) ? d : NULL;
}

/* The kvstore adapter seg names, or NDS_EINVAL naming it and the url. */
static int segment_adapter(const url_segment *seg, const char *url, const char *what,
                           const nds_kv_driver **out) {
    if ((*out = find_adapter(seg->name))) return 0;
    const nds_kv_driver *d = nds_kv_driver_find(seg->name);
    const char *why = d                            ? ""
                      : nds_format_find(seg->name) ? " (a format ends an array url)"
                                                   : " (no kvstore driver has that name)";
    return nds_err(NDS_EINVAL, "%s \"%s\": \"%s\" is not a kvstore adapter%s", what, url, seg->name,
                   why);
}

/* Makes a non-empty "path" of spec end in '/': the URL before an adapter names a directory. */
static void path_as_directory(json_object *spec) {
    const char *path = "";
    nds_json_get_string(spec, "path", true, "kvstore spec", &path);
    size_t n = strlen(path);
    if (n == 0 || path[n - 1] == '/') return;
    char *dir = nds_asprintf("%s/", path);
    if (dir) json_object_object_add(spec, "path", json_object_new_string(dir));
    free(dir);
}

/* *spec becomes {"driver": d, "base": <*spec>, ...} filled by d's parse_url from seg's REST. On
 * failure *spec is still the caller's to free. */
static int stack_adapter(json_object **spec, const nds_kv_driver *d, const url_segment *seg,
                         const char *url) {
    json_object *outer = json_object_new_object();
    char *rest = strndup(seg->rest, seg->rest_len);
    if (!outer || !rest) {
        json_object_put(outer);
        free(rest);
        return nds_err(NDS_ENOMEM, "out of memory");
    }
    path_as_directory(*spec);
    json_object_object_add(outer, "driver", json_object_new_string(d->name));
    json_object_object_add(outer, "base", *spec);
    *spec = outer;
    int rc = 0;
    if (d->parse_url)
        rc = d->parse_url(rest, outer);
    else if (rest[0])
        rc = nds_err(NDS_EINVAL, "adapter \"%s\" takes nothing after its ':', not \"%s\"", d->name,
                     rest);
    free(rest);
    return rc ? nds_err_prefix(rc, "kvstore url \"%s\"", url) : 0;
}

int nds_kvstore_url_to_spec(const char *url, json_object **out) {
    size_t base_len = strcspn(url, "|");
    if (base_len == 0 && url[0] == '|')
        return nds_err(NDS_EINVAL, "kvstore url \"%s\": no kvstore before the first '|'", url);
    char *base = strndup(url, base_len);
    if (!base) return nds_err(NDS_ENOMEM, "out of memory");
    json_object *spec = NULL;
    int rc = base_url_to_spec(base, &spec);
    free(base);
    url_segment seg;
    for (const char *p = url + base_len; !rc && *p; p += seg.len) {
        const nds_kv_driver *d = NULL;
        rc = read_segment(url, p, "kvstore url", &seg);
        if (!rc) rc = segment_adapter(&seg, url, "kvstore url", &d);
        if (!rc) rc = stack_adapter(&spec, d, &seg, url);
    }
    if (rc) {
        json_object_put(spec);
        return rc;
    }
    *out = spec;
    return 0;
}

int nds_url_split(const char *url, size_t *kv_len, char *format, size_t cap) {
    *kv_len = strlen(url);
    format[0] = '\0';
    const char *p = url + strcspn(url, "|");
    url_segment seg;
    for (; *p; p += seg.len) {
        const nds_kv_driver *d = NULL;
        int rc = read_segment(url, p, "spec url", &seg);
        if (rc) return rc;
        if (p[seg.len] != '\0') { /* not the last: an adapter */
            if ((rc = segment_adapter(&seg, url, "spec url", &d))) return rc;
            continue;
        }
        if (find_adapter(seg.name)) break;
        const nds_format *f = nds_format_find(nds_format_alias(seg.name)); /* "|precomputed:" */
        if (!f) /* NOTFOUND, as an unknown format in a JSON spec is */
            return nds_err(NDS_ENOTFOUND,
                           "spec url \"%s\": \"%s\" is neither a kvstore adapter nor a format", url,
                           seg.name);
        if (seg.rest_len != 0 || strlen(f->name) >= cap)
            return nds_err(NDS_EINVAL,
                           "spec url \"%s\": expected \"|format:\" with nothing after its ':', not "
                           "\"%.*s\"",
                           url, (int)seg.len, seg.text);
        snprintf(format, cap, "%s", f->name); /* the name, for a scheme or an alias too */
        *kv_len = (size_t)(p - url);
    }
    return 0;
}

int nds_kvstore_open(nds_kvstore **out, const char *spec, nds_context *ctx) {
    json_object *obj = NULL;
    int rc;
    const char *s = spec;
    while (*s == ' ' || *s == '\n' || *s == '\t') s++;
    if (*s == '{')
        rc = nds_json_parse(s, strlen(s), "kvstore spec", &obj);
    else
        rc = nds_kvstore_url_to_spec(s, &obj);
    if (rc) return rc;
    rc = nds_kvstore_open_json(out, obj, ctx);
    json_object_put(obj);
    return rc;
}

void nds_kvstore_free(nds_kvstore *kv) {
    if (!kv || atomic_fetch_sub(&kv->refs, 1) != 1) return;
    instance_unref(kv->inst);
    free(kv->path);
    free(kv->url);
    free(kv);
}

nds_kvstore *nds_kvstore_ref(nds_kvstore *kv) {
    atomic_fetch_add(&kv->refs, 1);
    return kv;
}

int nds_kvstore_sub(nds_kvstore **out, nds_kvstore *kv, const char *path) {
    char *joined = NULL;
    int rc = nds_path_join(kv->path, path, "kvstore path", &joined);
    if (rc) return rc;
    rc = make_handle(out, kv->inst, kv->ctx, joined);
    free(joined);
    return rc;
}

const char *nds_kvstore_url(const nds_kvstore *kv) { return kv->url; }
const char *nds_kvstore_path(const nds_kvstore *kv) { return kv->path; }
/* The instance's bits where the driver reports them (what it knows now, nothing sent). */
uint32_t nds_kvstore_capabilities(const nds_kvstore *kv) {
    const nds_kv_driver *d = kv->inst->driver;
    uint32_t caps = d->capabilities;
    if (d->instance_capabilities &&
        d->instance_capabilities(kv->inst->state, NULL, &caps, NULL, 0) != 0)
        caps = d->capabilities;
    return caps;
}
nds_context *nds_kvstore_context(const nds_kvstore *kv) { return kv->ctx; }

int nds_kvstore_spec_json(const nds_kvstore *kv, json_object **out) {
    json_object *spec = NULL;
    if (kv->inst->spec) json_object_deep_copy(kv->inst->spec, &spec, NULL);
    if (!spec) spec = json_object_new_object();
    json_object_object_add(spec, "driver", json_object_new_string(kv->inst->driver->name));
    json_object_object_add(spec, "path", json_object_new_string(kv->path));
    if (kv->inst->driver->to_json) {
        int rc = kv->inst->driver->to_json(kv->inst->state, spec);
        if (rc) {
            json_object_put(spec);
            return rc;
        }
    }
    *out = spec;
    return 0;
}

int nds_kvstore_spec(const nds_kvstore *kv, char **out) {
    json_object *spec;
    int rc = nds_kvstore_spec_json(kv, &spec);
    if (rc) return rc;
    *out = nds_json_to_string(spec, false);
    json_object_put(spec);
    return *out ? 0 : nds_err(NDS_ENOMEM, "out of memory");
}

/* Joins the prefix and key into buf (heap when long); returns the full key or NULL. */
static char *full_key(const nds_kvstore *kv, const char *key, char *buf, size_t cap) {
    size_t a = strlen(kv->path), b = strlen(key);
    char *p = a + b + 1 <= cap ? buf : malloc(a + b + 1);
    if (!p) return NULL;
    memcpy(p, kv->path, a);
    memcpy(p + a, key, b + 1);
    return p;
}

#define WITH_FULL_KEY(kv, key, full, body)                                                         \
    do {                                                                                           \
        char full##_buf[512];                                                                      \
        char *full = full_key(kv, key, full##_buf, sizeof full##_buf);                             \
        if (!full) return nds_err(NDS_ENOMEM, "out of memory");                                    \
        body;                                                                                      \
        if (full != full##_buf) free(full);                                                        \
    } while (0)

/* The driver's one read method for a key relative to kv (opts NULL: defaults). */
static int read_full(nds_kvstore *kv, const char *key, const nds_read_options *opts,
                     const nds_byte_range *ranges, size_t n, nds_read_result *out) {
    static const nds_read_options defaults = NDS_READ_OPTIONS_INIT;
    memset(out, 0, sizeof *out);
    int rc;
    WITH_FULL_KEY(kv, key, full,
                  rc = kv->inst->driver->read(kv->inst->state, full, opts ? opts : &defaults,
                                              ranges, n, out));
    return rc;
}

int nds_kvstore_read(nds_kvstore *kv, const char *key, const nds_read_options *opts,
                     nds_read_result *out) {
    return read_full(kv, key, opts, NULL, 0, out);
}

int nds_kvstore_read_ranges_if(nds_kvstore *kv, const char *key, const nds_read_options *opts,
                               const nds_byte_range *ranges, size_t n, nds_read_result *out) {
    return read_full(kv, key, opts, ranges, n, out);
}

/* The driver's one write method for a key relative to kv; iov NULL deletes. */
static int write_full(nds_kvstore *kv, const char *key, const struct iovec *iov, size_t iovcnt,
                      const nds_write_options *opts, nds_generation *new_gen) {
    static const nds_write_options defaults = NDS_WRITE_OPTIONS_INIT;
    nds_generation ignored;
    if (kv->inst->driver->capabilities & NDS_KV_CAP_READ_ONLY)
        return nds_err(NDS_EREADONLY, "%s is read-only", kv->url);
    int rc;
    WITH_FULL_KEY(kv, key, full,
                  rc = kv->inst->driver->write(kv->inst->state, full, iov, iovcnt,
                                               opts ? opts : &defaults,
                                               new_gen ? new_gen : &ignored));
    return rc;
}

int nds_kvstore_write(nds_kvstore *kv, const char *key, const void *data, size_t len,
                      const nds_write_options *opts, nds_generation *new_gen) {
    static const uint8_t empty[1] = {0};
    struct iovec one = {(void *)(data ? data : empty), len};
    return write_full(kv, key, &one, 1, opts, new_gen);
}

int nds_kvstore_delete(nds_kvstore *kv, const char *key, const nds_write_options *opts) {
    return write_full(kv, key, NULL, 0, opts, NULL);
}

int nds_kvstore_capabilities_detect(nds_kvstore *kv, const char *key, uint32_t *caps, char *why,
                                    size_t cap) {
    const nds_kv_driver *d = kv->inst->driver;
    *caps = d->capabilities;
    if (why && cap) why[0] = '\0';
    if (!d->instance_capabilities) return 0;
    int rc;
    WITH_FULL_KEY(kv, key, full,
                  rc = d->instance_capabilities(kv->inst->state, full, caps, why, cap));
    return rc;
}

int nds_kvstore_write_hint(nds_kvstore *kv, const char *key, const void *data, size_t len) {
    const nds_kv_driver *d = kv->inst->driver;
    if (!d->write_hint) return nds_kvstore_write(kv, key, data, len, NULL, NULL);
    if (d->capabilities & NDS_KV_CAP_READ_ONLY)
        return nds_err(NDS_EREADONLY, "%s is read-only", kv->url);
    int rc;
    WITH_FULL_KEY(kv, key, full, rc = d->write_hint(kv->inst->state, full, data, len));
    return rc;
}

int nds_kvstore_write_iov(nds_kvstore *kv, const char *key, const struct iovec *iov, size_t iovcnt,
                          const nds_write_options *opts, nds_generation *new_gen) {
    static const struct iovec none = {NULL, 0}; /* iovcnt 0: an empty value, not a delete */
    return write_full(kv, key, iov ? iov : &none, iov ? iovcnt : 0, opts, new_gen);
}

bool nds_kvstore_can_read_into(const nds_kvstore *kv) {
    return (nds_kvstore_capabilities(kv) & NDS_KV_CAP_READ_INTO) != 0;
}

/* Ranges on the stack up to this many pieces of a read_into, else on the heap. */
#define READ_INTO_STACK 32

int nds_kvstore_read_into(nds_kvstore *kv, const char *key, uint64_t offset, const struct iovec *iov,
                          size_t iovcnt, nds_read_result *out) {
    if (iovcnt == 0) { /* still the ranges form: state, generation and size, no value */
        nds_byte_range none = {offset, 0, NULL};
        return read_full(kv, key, NULL, &none, 1, out);
    }
    nds_byte_range stack[READ_INTO_STACK];
    nds_byte_range *ranges = iovcnt <= READ_INTO_STACK ? stack : malloc(iovcnt * sizeof *ranges);
    if (!ranges) return nds_err(NDS_ENOMEM, "out of memory reading %s", key);
    for (size_t i = 0; i < iovcnt; offset += iov[i].iov_len, i++)
        ranges[i] = (nds_byte_range){offset, iov[i].iov_len, iov[i].iov_base};
    int rc = read_full(kv, key, NULL, ranges, iovcnt, out);
    if (ranges != stack) free(ranges);
    return rc;
}

bool nds_kvstore_can_read_ranges(const nds_kvstore *kv) { return nds_kvstore_can_read_into(kv); }

int nds_kvstore_read_ranges(nds_kvstore *kv, const char *key, const nds_byte_range *ranges,
                            size_t n, nds_read_result *out) {
    static const nds_byte_range none = {0, 0, NULL}; /* n == 0 stays the ranges form */
    return read_full(kv, key, NULL, n ? ranges : &none, n ? n : 1, out);
}

bool nds_kvstore_can_stage(const nds_kvstore *kv) {
    const nds_kv_driver *d = kv->inst->driver;
    return d->stage && !(d->capabilities & NDS_KV_CAP_READ_ONLY);
}

int nds_kvstore_stage(nds_kvstore *kv, const char *key, const void *data, size_t len,
                      nds_kv_staged **out) {
    static const uint8_t empty[1] = {0};
    int rc;
    WITH_FULL_KEY(kv, key, full,
                  rc = kv->inst->driver->stage(kv->inst->state, full, data ? data : empty, len,
                                               out));
    return rc;
}

int nds_kvstore_publish(nds_kvstore *kv, nds_kv_staged **staged, nds_kv_publish *results,
                        size_t n) {
    return n ? kv->inst->driver->publish(kv->inst->state, staged, results, n) : 0;
}

void nds_kvstore_discard(nds_kvstore *kv, nds_kv_staged *staged) {
    if (staged) kv->inst->driver->discard(kv->inst->state, staged);
}

/* Strips the handle's prefix from full keys before calling the user's function. */
typedef struct strip_ctx {
    size_t prefix_len;
    nds_list_fn fn;
    void *ctx;
} strip_ctx;

static int strip_prefix(void *c, const char *key, uint64_t size) {
    strip_ctx *s = c;
    return s->fn(s->ctx, key + s->prefix_len, size);
}

int nds_kvstore_list(nds_kvstore *kv, const char *prefix, nds_list_fn fn, void *ctx) {
    strip_ctx s = {strlen(kv->path), fn, ctx};
    int rc;
    WITH_FULL_KEY(kv, prefix, full,
                  rc = kv->inst->driver->list(kv->inst->state, full, strip_prefix, &s));
    return rc;
}

/* Fallback delete_range: collect the keys in range, then delete each. */
typedef struct key_list {
    char **keys;
    size_t n, cap;
    const char *begin, *end;
} key_list;

static int collect_in_range(void *c, const char *key, uint64_t size) {
    key_list *l = c;
    if (strcmp(key, l->begin) < 0 || (l->end[0] && strcmp(key, l->end) >= 0)) return 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        char **k = realloc(l->keys, cap * sizeof *k);
        if (!k) return nds_err(NDS_ENOMEM, "out of memory listing keys");
        l->keys = k;
        l->cap = cap;
    }
    if (!(l->keys[l->n] = nds_strdup(key)))
        return nds_err(NDS_ENOMEM, "out of memory listing keys");
    l->n++;
    return 0;
}

/* The longest common prefix of begin and end, the only keys a range can hold. */
static char *range_prefix(const char *begin, const char *end) {
    size_t n = 0;
    if (!end[0])
        n = 0;
    else
        while (begin[n] && begin[n] == end[n]) n++;
    char *p = malloc(n + 1);
    if (p) memcpy(p, begin, n), p[n] = '\0';
    return p;
}

int nds_kvstore_delete_range(nds_kvstore *kv, const char *begin, const char *end) {
    if (kv->inst->driver->capabilities & NDS_KV_CAP_READ_ONLY)
        return nds_err(NDS_EREADONLY, "%s is read-only", kv->url);
    char *fb = nds_asprintf("%s%s", kv->path, begin);
    char *fe = end[0] ? nds_asprintf("%s%s", kv->path, end) : nds_prefix_successor(kv->path);
    int rc = 0;
    if (!fb || !fe)
        rc = nds_err(NDS_ENOMEM, "out of memory");
    else if (kv->inst->driver->delete_range)
        rc = kv->inst->driver->delete_range(kv->inst->state, fb, fe);
    else {
        key_list l = {NULL, 0, 0, begin, end};
        char *prefix = range_prefix(begin, end);
        rc = prefix ? nds_kvstore_list(kv, prefix, collect_in_range, &l)
                    : nds_err(NDS_ENOMEM, "out of memory");
        for (size_t i = 0; i < l.n; i++) {
            if (rc == 0) rc = nds_kvstore_delete(kv, l.keys[i], NULL);
            free(l.keys[i]);
        }
        free(l.keys);
        free(prefix);
    }
    free(fb);
    free(fe);
    return rc;
}

void nds_generation_set(nds_generation *g, const char *value) {
    g->kind = NDS_GEN_VALUE;
    snprintf(g->value, sizeof g->value, "%s", value);
}

int nds_generation_equal(const nds_generation *a, const nds_generation *b) {
    if (a->kind == NDS_GEN_NONE || a->kind != b->kind) return 0;
    return a->kind == NDS_GEN_ABSENT || strcmp(a->value, b->value) == 0;
}

int nds_generation_satisfies(const nds_generation *if_equal, const nds_generation *current) {
    return if_equal->kind == NDS_GEN_NONE || nds_generation_equal(if_equal, current);
}

int nds_byte_range_resolve(const nds_read_options *o, uint64_t total, uint64_t *off,
                           uint64_t *len) {
    uint64_t start;
    if (o->byte_start < 0) {
        uint64_t suffix = (uint64_t)(-(o->byte_start + 1)) + 1;
        start = suffix > total ? 0 : total - suffix;
    } else {
        start = (uint64_t)o->byte_start;
        if (start > total)
            return nds_err(NDS_ERANGE, "byte range starts at %llu, beyond the value's %llu bytes",
                           (unsigned long long)start, (unsigned long long)total);
    }
    uint64_t n = total - start;
    if (o->byte_length >= 0 && (uint64_t)o->byte_length < n) n = (uint64_t)o->byte_length;
    *off = start;
    *len = n;
    return 0;
}

int nds_byte_ranges_copy(const nds_byte_range *ranges, size_t n, const uint8_t *data,
                         uint64_t total, const char *key) {
    for (size_t i = 0; i < n; i++)
        if (ranges[i].offset > total || ranges[i].len > total - ranges[i].offset)
            return nds_err(NDS_ERANGE, "read %s: %zu bytes at %llu, past the value's %llu", key,
                           ranges[i].len, (unsigned long long)ranges[i].offset,
                           (unsigned long long)total);
    for (size_t i = 0; i < n; i++)
        if (ranges[i].len) memcpy(ranges[i].dst, data + ranges[i].offset, ranges[i].len);
    return 0;
}

/* [*lo, *hi): the bytes from the first range's start to the last one's end. */
static void ranges_span(const nds_byte_range *ranges, size_t n, uint64_t *lo, uint64_t *hi) {
    *lo = UINT64_MAX, *hi = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t end = ranges[i].offset + ranges[i].len;
        if (ranges[i].offset < *lo) *lo = ranges[i].offset;
        if (end > *hi) *hi = end;
    }
}

int nds_kv_read_ranges_span(nds_kv_read_value_fn read_value, void *state, const char *key,
                            const nds_read_options *opts, const nds_byte_range *ranges, size_t n,
                            nds_read_result *out) {
    nds_read_options o = opts ? *opts : (nds_read_options)NDS_READ_OPTIONS_INIT;
    uint64_t lo, hi;
    ranges_span(ranges, n, &lo, &hi);
    for (size_t i = 0; i < n; i++)
        if (ranges[i].len > UINT64_MAX - ranges[i].offset || lo > INT64_MAX || hi - lo > INT64_MAX)
            return nds_err(NDS_ERANGE, "read %s: byte range %zu does not fit in 63 bits", key, i);
    o.byte_start = (int64_t)lo;
    o.byte_length = (int64_t)(hi - lo);
    int rc = read_value(state, key, &o, out);
    if (rc || out->state != NDS_READ_VALUE) return rc;
    /* the span as the value holds it: shorter when the value ends inside it */
    nds_byte_range *shifted = malloc(n * sizeof *shifted);
    if (!shifted) rc = nds_err(NDS_ENOMEM, "out of memory reading %s", key);
    for (size_t i = 0; !rc && i < n; i++)
        shifted[i] = (nds_byte_range){ranges[i].offset - lo, ranges[i].len, ranges[i].dst};
    if (!rc) rc = nds_byte_ranges_copy(shifted, n, out->value.data, out->value.len, key);
    if (rc == NDS_ERANGE)
        nds_err(NDS_ERANGE, "read %s: the value's %llu bytes end before byte %llu", key,
                (unsigned long long)out->total_size, (unsigned long long)hi);
    free(shifted);
    nds_bytes_release(&out->value);
    return rc;
}

int nds_kv_write_gathered(void *state, const char *key, const struct iovec *iov, size_t iovcnt,
                          const nds_write_options *opts, nds_generation *new_gen,
                          nds_kv_value_write_fn write_value) {
    if (!iov) return write_value(state, key, NULL, 0, opts, new_gen);
    const uint8_t *data;
    size_t len;
    uint8_t *owned;
    int rc = nds_iov_gather(iov, iovcnt, &data, &len, &owned);
    if (!rc) rc = write_value(state, key, data, len, opts, new_gen);
    free(owned);
    return rc;
}

int nds_iov_gather(const struct iovec *iov, size_t iovcnt, const uint8_t **data, size_t *len,
                   uint8_t **owned) {
    static const uint8_t empty[1] = {0};
    *owned = NULL;
    if (iovcnt <= 1) {
        *data = iovcnt && iov[0].iov_base ? iov[0].iov_base : empty;
        *len = iovcnt ? iov[0].iov_len : 0;
        return 0;
    }
    size_t total = 0;
    for (size_t i = 0; i < iovcnt; i++) {
        if (iov[i].iov_len > SIZE_MAX - total)
            return nds_err(NDS_ELIMIT, "a value of %zu pieces is too large", iovcnt);
        total += iov[i].iov_len;
    }
    if (!(*owned = malloc(total ? total : 1)))
        return nds_err(NDS_ENOMEM, "out of memory gathering a value of %zu bytes", total);
    for (size_t i = 0, at = 0; i < iovcnt; at += iov[i].iov_len, i++)
        if (iov[i].iov_len) memcpy(*owned + at, iov[i].iov_base, iov[i].iov_len);
    *data = *owned;
    *len = total;
    return 0;
}

/* Two handles are on one store when they share the driver instance, or their drivers and driver
 * specs (without path) are equal: e.g. two opens of the same LMDB environment. */
static bool same_store(const nds_kvstore *a, const nds_kvstore *b) {
    if (a->inst == b->inst) return true;
    return a->inst->driver == b->inst->driver && a->inst->spec && b->inst->spec &&
           nds_json_equal(a->inst->spec, b->inst->spec);
}

/* Checks that every op's handle is on kvs[0]'s store. */
static int check_one_store(nds_kvstore *const *kvs, size_t n) {
    for (size_t i = 1; i < n; i++)
        if (!same_store(kvs[0], kvs[i]))
            return nds_err(NDS_EUNSUPPORTED,
                           "an atomic commit must stay within one kvstore, but it spans %s and %s; "
                           "nothing was written",
                           kvs[0]->url, kvs[i]->url);
    return 0;
}

/* Replaces each op's key by its full key (handle path + key); *relative keeps the keys given. */
static int to_full_keys(nds_kvstore *const *kvs, nds_kv_op *ops, size_t n, const char ***relative,
                        size_t *done) {
    *done = 0;
    if (!(*relative = malloc((n ? n : 1) * sizeof **relative)))
        return nds_err(NDS_ENOMEM, "out of memory");
    for (; *done < n; (*done)++) {
        char *full = nds_asprintf("%s%s", kvs[*done]->path, ops[*done].key);
        if (!full) return nds_err(NDS_ENOMEM, "out of memory");
        (*relative)[*done] = ops[*done].key;
        ops[*done].key = full;
    }
    return 0;
}

static void to_relative_keys(nds_kv_op *ops, const char **relative, size_t done) {
    for (size_t i = 0; i < done; i++) {
        free((char *)ops[i].key);
        ops[i].key = relative[i];
    }
    free(relative);
}

int nds_kvstore_commit(nds_kvstore *const *kvs, nds_kv_op *ops, size_t n) {
    if (n == 0) return 0;
    const nds_kv_driver *d = kvs[0]->inst->driver;
    if (!d->commit)
        return nds_err(NDS_EUNSUPPORTED,
                       "atomic commit needs a kvstore with multi-key commit (memory, lmdb, or a "
                       "versioned store: URL|versioned:); %s (driver %s) has none, so nothing was "
                       "written",
                       kvs[0]->url, d->name);
    int rc = check_one_store(kvs, n);
    if (rc) return rc;
    const char **relative = NULL;
    size_t done;
    if (!(rc = to_full_keys(kvs, ops, n, &relative, &done)))
        rc = d->commit(kvs[0]->inst->state, ops, n);
    to_relative_keys(ops, relative, done);
    return rc;
}

bool nds_kvstore_can_prepare(const nds_kvstore *kv) {
    return kv->inst->driver->prepare != NULL;
}

static int refuse_prepare(const nds_kvstore *kv) {
    return nds_err(NDS_EUNSUPPORTED,
                   "prepared commits need a versioned store (URL|versioned:); %s (driver %s) has "
                   "none",
                   kv->url, kv->inst->driver->name);
}

int nds_kvstore_prepare(nds_kvstore *store, const nds_kv_ops_across *writes,
                        const nds_kv_side *side, size_t m, char *token, size_t cap) {
    const nds_kv_driver *d = store->inst->driver;
    if (!d->prepare) return refuse_prepare(store);
    for (size_t i = 0; i < writes->n; i++)
        if (!same_store(store, writes->kvs[i]))
            return nds_err(NDS_EUNSUPPORTED,
                           "a prepared set must stay within one kvstore, but it spans %s and %s",
                           store->url, writes->kvs[i]->url);
    const char **relative = NULL;
    size_t done;
    int rc = to_full_keys(writes->kvs, writes->ops, writes->n, &relative, &done);
    if (!rc) rc = d->prepare(store->inst->state, writes->ops, writes->n, side, m, token, cap);
    to_relative_keys(writes->ops, relative, done);
    return rc;
}

int nds_kvstore_prepared_read(nds_kvstore *kv, const char *token, nds_kv_prepared *out) {
    if (!kv->inst->driver->prepared_read) return refuse_prepare(kv);
    return kv->inst->driver->prepared_read(kv->inst->state, token, out);
}

void nds_kvstore_prepared_dispose(nds_kvstore *kv, nds_kv_prepared *p) {
    if (kv->inst->driver->prepared_dispose) kv->inst->driver->prepared_dispose(kv->inst->state, p);
}

int nds_kvstore_commit_prepared(nds_kvstore *store, const char *const *tokens, size_t n,
                                const nds_kv_ops_across *extra, const char *message,
                                const char *metadata) {
    const nds_kv_driver *d = store->inst->driver;
    if (!d->commit_prepared) return refuse_prepare(store);
    for (size_t i = 0; i < extra->n; i++)
        if (!same_store(store, extra->kvs[i]))
            return nds_err(NDS_EUNSUPPORTED, "a commit must stay within one kvstore (%s, %s)",
                           store->url, extra->kvs[i]->url);
    const char **relative = NULL;
    size_t done;
    int rc = to_full_keys(extra->kvs, extra->ops, extra->n, &relative, &done);
    if (!rc)
        rc = d->commit_prepared(store->inst->state, tokens, n, extra->ops, extra->n, message,
                                metadata);
    to_relative_keys(extra->ops, relative, done);
    return rc;
}

int nds_kvstore_wrap(nds_kvstore **out, const nds_kv_driver *driver, void *state, nds_context *ctx,
                     const char *path) {
    kv_instance *inst = calloc(1, sizeof *inst);
    if (!inst) {
        driver->close(state);
        return nds_err(NDS_ENOMEM, "out of memory");
    }
    inst->driver = driver;
    inst->state = state;
    atomic_init(&inst->refs, 1);
    int rc = make_handle(out, inst, ctx, path);
    instance_unref(inst);
    return rc;
}

int nds_kvstore_with_path(nds_kvstore **out, nds_kvstore *kv, const char *path) {
    return make_handle(out, kv->inst, kv->ctx, path);
}

void *nds_kvstore_driver_state(const nds_kvstore *kv, const nds_kv_driver *driver) {
    return kv->inst->driver == driver ? kv->inst->state : NULL;
}
