/* The "faulty" kvstore driver: a test wrapper that forwards every call to a base kvstore and fails
 * some of them on a schedule, so tests can prove what the layers above do when storage misbehaves.
 *
 * Spec: {"driver":"faulty","base":<kvstore spec object or URL>,"fail":{"seed":1,"read":{...},...},
 * "path":"p/"}. The base is opened with nds_kvstore_open; a full key of the faulty handle (its path
 * + key) is passed to the base handle as a key relative to the base's own path, so the stored key
 * is base path + faulty path + key. Per operation kind (read, write, delete, list, commit) a rule
 * says which calls fail ("nth", "every", "from", seeded "probability", at most "times" failures)
 * and how ("mode"): "error" (NDS_EIO before the base is called), "short_read" (read only: the
 * base's bytes truncated to half, as if the connection dropped mid-body), "after_apply" (write,
 * delete, commit: the base applied it, the caller gets NDS_EIO: the ambiguous outcome of a lost
 * reply). delete_range counts as a delete call. Calls are numbered per kind from 1, counting every
 * call of that kind.
 *
 * Instances opened from equal specs (path aside) in one process share one "device": one base
 * handle, one set of call counters and one random stream, so several arrays on one faulty store see
 * one schedule. nds_kvstore_spec prints the counters as "calls" and "injected" (output only;
 * ignored when the spec is opened again).
 *
 * URL form (a kvstore adapter, NDS_KV_CAP_ADAPTER): BASEURL|faulty:PATH, e.g.
 * memory://x/|faulty:p/, a faulty store that injects nothing (faults need the JSON spec's "fail").
 * A handle's URL is the base's URL, "|faulty:" and its path, which parses back to the same store.
 *
 * Omits: capabilities copied from the base (the vtable's are static: this driver
 * reports conditional writes, multi-key commit and byte ranges, and a commit over a base without
 * multi-key commit fails with NDS_EUNSUPPORTED before anything is written, as on the base itself);
 * timeouts and HTTP-style errors (503s) of the network drivers.
 *
 * Threading: internally synchronised (the schedule under the device's mutex; the base is internally
 * synchronised itself). With several threads the order of calls, so which one is the nth, varies.
 * Ownership: a device owns its base handle; the last instance closed frees it.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "ndstore/sys/kv_driver.h"
#include "internal/error.h"
#include "internal/json_util.h"
#include "internal/kvstore_internal.h"
#include "internal/util.h"

enum { FK_READ, FK_WRITE, FK_DELETE, FK_LIST, FK_COMMIT, FK_KINDS };
static const char *const fk_kind_name[FK_KINDS] = {"read", "write", "delete", "list", "commit"};

typedef enum fk_mode { FK_ERROR, FK_SHORT_READ, FK_AFTER_APPLY, FK_MODES } fk_mode;
static const char *const fk_mode_name[FK_MODES] = {"error", "short_read", "after_apply"};

/** Which calls of one kind fail, and how. A zero member is not set. */
typedef struct fk_rule {
    uint64_t nth;       /* fail call number nth */
    uint64_t every;     /* fail calls every, 2*every, ... */
    uint64_t from;      /* fail call from and every later one */
    uint64_t times;     /* at most this many failures in all */
    double probability; /* fail each call with this probability (seeded stream) */
    fk_mode mode;
} fk_rule;

/** One faulty store: shared by the instances opened from equal specs in one process. */
typedef struct fk_device {
    json_object *ident; /* the spec without path and outputs; identity of the device */
    pid_t pid; /* opener: a forked child opens its own (the base may refuse the parent's) */
    int refs;  /* instances; under g_fk_mu */
    nds_kvstore *base;
    fk_rule rule[FK_KINDS];
    pthread_mutex_t mu; /* guards calls, injected, rng */
    uint64_t calls[FK_KINDS], injected[FK_KINDS], rng[FK_KINDS];
    char url_base[2048]; /* "<base url>|faulty:" */
    struct fk_device *next;
} fk_device;

static pthread_mutex_t g_fk_mu = PTHREAD_MUTEX_INITIALIZER; /* guards g_fk_devices and refs */
static fk_device *g_fk_devices;

/* ---- schedule ---- */

static uint64_t fk_splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Counts a call of kind and decides whether it fails; *n receives its number. The random stream
 * advances on every call when a probability is set, so a seed gives one sequence per kind. */
static bool fk_decide(fk_device *d, int kind, uint64_t *n) {
    const fk_rule *r = &d->rule[kind];
    pthread_mutex_lock(&d->mu);
    uint64_t c = *n = ++d->calls[kind];
    bool fire =
        (r->nth && c == r->nth) || (r->every && c % r->every == 0) || (r->from && c >= r->from);
    if (r->probability > 0) {
        double u = (double)(fk_splitmix(&d->rng[kind]) >> 11) * 0x1.0p-53;
        fire = fire || u < r->probability;
    }
    if (fire && r->times && d->injected[kind] >= r->times) fire = false;
    if (fire) d->injected[kind]++;
    pthread_mutex_unlock(&d->mu);
    return fire;
}

/* Takes back a decided failure that could not be injected (nothing to truncate, base refused). */
static void fk_uncount(fk_device *d, int kind) {
    pthread_mutex_lock(&d->mu);
    d->injected[kind]--;
    pthread_mutex_unlock(&d->mu);
}

static int fk_fail(int kind, const char *what, uint64_t n, bool applied) {
    return nds_err(NDS_EIO, "faulty: injected i/o error on %s of %s (%s call %llu)%s",
                   fk_kind_name[kind], what, fk_kind_name[kind], (unsigned long long)n,
                   applied ? ", after it was applied" : "");
}

/* ---- spec ---- */

/* Re-codes a json helper's error (NDS_EFORMAT, for documents) as a bad spec. */
static int fk_spec_err(void) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", nds_error_last()->message);
    return nds_err(NDS_EINVAL, "%s", msg);
}

static int fk_parse_mode(json_object *v, int kind, fk_mode *out) {
    const char *s = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
    int m = 0;
    while (m < FK_MODES && strcmp(s, fk_mode_name[m]) != 0) m++;
    if (m == FK_MODES)
        return nds_err(NDS_EINVAL,
                       "faulty kvstore spec: fail.%s.mode must be \"error\", \"short_read\" or "
                       "\"after_apply\"",
                       fk_kind_name[kind]);
    if ((m == FK_SHORT_READ && kind != FK_READ) ||
        (m == FK_AFTER_APPLY && (kind == FK_READ || kind == FK_LIST)))
        return nds_err(NDS_EINVAL, "faulty kvstore spec: mode \"%s\" does not apply to %s calls", s,
                       fk_kind_name[kind]);
    *out = (fk_mode)m;
    return 0;
}

static int fk_parse_probability(json_object *v, int kind, double *out) {
    double p = json_object_get_double(v);
    bool number = json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int);
    if (!number || !(p >= 0 && p <= 1))
        return nds_err(NDS_EINVAL,
                       "faulty kvstore spec: fail.%s.probability must be a number in [0, 1]",
                       fk_kind_name[kind]);
    *out = p;
    return 0;
}

static int fk_parse_rule(json_object *obj, int kind, fk_rule *r) {
    static const char *const counts[] = {"nth", "every", "from", "times"};
    uint64_t *slot[] = {&r->nth, &r->every, &r->from, &r->times};
    char doc[64];
    snprintf(doc, sizeof doc, "faulty kvstore spec: fail.%s", fk_kind_name[kind]);
    if (!json_object_is_type(obj, json_type_object))
        return nds_err(NDS_EINVAL, "%s must be an object", doc);
    json_object_object_foreach(obj, key, val) {
        int rc = 0;
        size_t i = 0;
        while (i < 4 && strcmp(key, counts[i]) != 0) i++;
        if (i < 4) {
            int64_t v = 0;
            rc = nds_json_get_int(obj, key, false, 1, INT64_MAX, doc, &v) ? fk_spec_err() : 0;
            *slot[i] = (uint64_t)v;
        } else if (strcmp(key, "probability") == 0) {
            rc = fk_parse_probability(val, kind, &r->probability);
        } else if (strcmp(key, "mode") == 0) {
            rc = fk_parse_mode(val, kind, &r->mode);
        } else {
            rc = nds_err(NDS_EINVAL, "%s: unknown member \"%s\"", doc, key);
        }
        if (rc) return rc;
    }
    return 0;
}

static int fk_parse_fail(const json_object *spec, fk_device *d) {
    json_object *fail = NULL;
    int64_t seed = 1;
    if (!json_object_object_get_ex(spec, "fail", &fail))
        return 0; /* no failures: a plain pass-through */
    if (!json_object_is_type(fail, json_type_object))
        return nds_err(NDS_EINVAL, "faulty kvstore spec: \"fail\" must be an object");
    json_object_object_foreach(fail, key, val) {
        int kind = 0, rc;
        while (kind < FK_KINDS && strcmp(key, fk_kind_name[kind]) != 0) kind++;
        if (kind < FK_KINDS)
            rc = fk_parse_rule(val, kind, &d->rule[kind]);
        else if (strcmp(key, "seed") == 0)
            rc = nds_json_get_int(fail, "seed", false, 0, INT64_MAX, "faulty kvstore spec: fail",
                                  &seed)
                     ? fk_spec_err()
                     : 0;
        else
            rc = nds_err(NDS_EINVAL, "faulty kvstore spec: fail: unknown member \"%s\"", key);
        if (rc) return rc;
    }
    for (int k = 0; k < FK_KINDS; k++) d->rng[k] = (uint64_t)seed ^ ((uint64_t)(k + 1) << 56);
    return 0;
}

/* Checks the top-level members and makes the device identity: the spec without path and outputs. */
static int fk_identity(const json_object *spec, json_object **out) {
    json_object_object_foreach((json_object *)spec, key, val) {
        (void)val;
        static const char *const known[] = {"driver", "path", "base", "fail", "calls", "injected"};
        size_t i = 0;
        while (i < 6 && strcmp(key, known[i]) != 0) i++;
        if (i == 6) return nds_err(NDS_EINVAL, "faulty kvstore spec: unknown member \"%s\"", key);
    }
    json_object *base = NULL;
    if (!json_object_object_get_ex(spec, "base", &base) ||
        !(json_object_is_type(base, json_type_object) ||
          json_object_is_type(base, json_type_string)))
        return nds_err(NDS_EINVAL,
                       "faulty kvstore spec: \"base\" (a kvstore spec object or URL) is required");
    *out = NULL;
    if (json_object_deep_copy((json_object *)spec, out, NULL) != 0 || !*out)
        return nds_err(NDS_ENOMEM, "faulty: out of memory");
    json_object_object_del(*out, "path");
    json_object_object_del(*out, "calls");
    json_object_object_del(*out, "injected");
    return 0;
}

static int fk_open_base(const json_object *spec, nds_kvstore **out) {
    json_object *base = json_object_object_get((json_object *)spec, "base");
    char *text = json_object_is_type(base, json_type_string)
                     ? nds_strdup(json_object_get_string(base))
                     : nds_json_to_string(base, false);
    if (!text) return nds_err(NDS_ENOMEM, "faulty: out of memory");
    int rc = nds_kvstore_open(out, text, NULL);
    free(text);
    return rc ? nds_err_prefix(rc, "faulty: base") : 0;
}

static void fk_device_free(fk_device *d) {
    if (!d) return;
    nds_kvstore_free(d->base);
    json_object_put(d->ident);
    pthread_mutex_destroy(&d->mu);
    free(d);
}

static int fk_device_new(const json_object *spec, json_object *ident, fk_device **out) {
    fk_device *d = calloc(1, sizeof *d);
    if (!d) {
        json_object_put(ident);
        return nds_err(NDS_ENOMEM, "faulty: out of memory");
    }
    pthread_mutex_init(&d->mu, NULL);
    d->ident = ident;
    d->pid = getpid();
    d->refs = 1;
    int rc = fk_parse_fail(spec, d);
    if (!rc) rc = fk_open_base(spec, &d->base);
    if (rc) {
        fk_device_free(d);
        return rc;
    }
    snprintf(d->url_base, sizeof d->url_base, "%s|faulty:", nds_kvstore_url(d->base));
    *out = d;
    return 0;
}

/* This process's open device with this identity, with a reference taken; caller holds g_fk_mu. */
static fk_device *fk_find(const json_object *ident) {
    for (fk_device *d = g_fk_devices; d; d = d->next)
        if (d->pid == getpid() && nds_json_equal(d->ident, ident)) {
            d->refs++;
            return d;
        }
    return NULL;
}

/* "|faulty:REST" in a URL pipeline: REST is the path; no faults (those need the JSON spec). */
static int fk_parse_url(const char *rest, struct json_object *spec) {
    json_object *path = json_object_new_string(rest);
    if (!path || json_object_object_add(spec, "path", path) != 0) {
        json_object_put(path);
        return nds_err(NDS_ENOMEM, "faulty: out of memory parsing url");
    }
    return 0;
}

static int fk_open(void **state, const struct json_object *spec) {
    json_object *ident;
    int rc = fk_identity(spec, &ident);
    if (rc) return rc;
    pthread_mutex_lock(&g_fk_mu);
    fk_device *d = fk_find(ident);
    pthread_mutex_unlock(&g_fk_mu);
    if (d) {
        json_object_put(ident);
        *state = d;
        return 0;
    }
    fk_device *fresh = NULL;
    if ((rc = fk_device_new(spec, ident, &fresh))) return rc; /* the base opens outside the lock */
    pthread_mutex_lock(&g_fk_mu);
    if ((d = fk_find(fresh->ident)) == NULL) { /* else another thread opened it meanwhile */
        fresh->next = g_fk_devices;
        g_fk_devices = d = fresh;
        fresh = NULL;
    }
    pthread_mutex_unlock(&g_fk_mu);
    fk_device_free(fresh);
    *state = d;
    return 0;
}

static void fk_close(void *state) {
    fk_device *d = state;
    if (!d) return;
    pthread_mutex_lock(&g_fk_mu);
    bool last = --d->refs == 0;
    if (last)
        for (fk_device **p = &g_fk_devices; *p; p = &(*p)->next)
            if (*p == d) {
                *p = d->next;
                break;
            }
    pthread_mutex_unlock(&g_fk_mu);
    if (last) fk_device_free(d);
}

static void fk_url_base(void *state, char *buf, size_t cap) {
    snprintf(buf, cap, "%s", ((fk_device *)state)->url_base);
}

/* Prints the counters, so a test can see how many calls of each kind a workload made. */
static int fk_to_json(void *state, struct json_object *spec) {
    fk_device *d = state;
    json_object *calls = json_object_new_object(), *injected = json_object_new_object();
    if (!calls || !injected) {
        json_object_put(calls);
        json_object_put(injected);
        return nds_err(NDS_ENOMEM, "faulty: out of memory");
    }
    pthread_mutex_lock(&d->mu);
    for (int k = 0; k < FK_KINDS; k++) {
        json_object_object_add(calls, fk_kind_name[k], json_object_new_int64((int64_t)d->calls[k]));
        json_object_object_add(injected, fk_kind_name[k],
                               json_object_new_int64((int64_t)d->injected[k]));
    }
    pthread_mutex_unlock(&d->mu);
    json_object_object_add(spec, "calls", calls);
    json_object_object_add(spec, "injected", injected);
    return 0;
}

/* ---- forwarded methods ---- */

/* A short read: the value form keeps half the bytes (total_size still tells the whole size, as a
 * dropped body would); the ranges form cannot hand out fewer bytes than asked, so it fails as a
 * driver that noticed the body end early does. */
static int fk_shorten(fk_device *d, const char *key, uint64_t n, size_t nranges,
                      nds_read_result *out) {
    if (out->state != NDS_READ_VALUE || (nranges == 0 && out->value.len == 0)) {
        fk_uncount(d, FK_READ); /* nothing to truncate */
        return 0;
    }
    if (nranges == 0) {
        out->value.len /= 2;
        return 0;
    }
    return nds_err(NDS_EIO, "faulty: injected short read of %s (read call %llu): the body ended "
                   "early", key, (unsigned long long)n);
}

static int fk_read(void *state, const char *key, const nds_read_options *opts,
                   const nds_byte_range *ranges, size_t nranges, nds_read_result *out) {
    fk_device *d = state;
    uint64_t n;
    bool fire = fk_decide(d, FK_READ, &n);
    if (fire && d->rule[FK_READ].mode == FK_ERROR) return fk_fail(FK_READ, key, n, false);
    int rc = nds_kvstore_read_ranges_if(d->base, key, opts, ranges, nranges, out);
    if (!fire) return rc;
    if (rc) {
        fk_uncount(d, FK_READ);
        return rc;
    }
    return fk_shorten(d, key, n, nranges, out);
}

static int fk_write(void *state, const char *key, const struct iovec *iov, size_t iovcnt,
                    const nds_write_options *opts, nds_generation *new_gen) {
    fk_device *d = state;
    int kind = iov ? FK_WRITE : FK_DELETE;
    uint64_t n;
    bool fire = fk_decide(d, kind, &n);
    if (fire && d->rule[kind].mode == FK_ERROR) return fk_fail(kind, key, n, false);
    int rc;
    if (iov) {
        rc = nds_kvstore_write_iov(d->base, key, iov, iovcnt, opts, new_gen);
    } else {
        rc = nds_kvstore_delete(d->base, key, opts);
        if (new_gen) new_gen->kind = NDS_GEN_ABSENT, new_gen->value[0] = '\0';
    }
    if (fire && rc)
        fk_uncount(d, kind); /* the base refused it: nothing was applied to lose a reply of */
    return fire && !rc ? fk_fail(kind, key, n, true) : rc;
}

static int fk_list(void *state, const char *prefix, nds_list_fn fn, void *ctx) {
    fk_device *d = state;
    uint64_t n;
    if (fk_decide(d, FK_LIST, &n)) return fk_fail(FK_LIST, prefix[0] ? prefix : "\"\"", n, false);
    return nds_kvstore_list(d->base, prefix, fn, ctx); /* the base hands back our full keys */
}

static int fk_delete_range(void *state, const char *begin, const char *end) {
    fk_device *d = state;
    uint64_t n;
    bool fire = fk_decide(d, FK_DELETE, &n);
    char what[300];
    snprintf(what, sizeof what, "range [%s, %s)", begin, end);
    if (fire && d->rule[FK_DELETE].mode == FK_ERROR) return fk_fail(FK_DELETE, what, n, false);
    int rc = nds_kvstore_delete_range(d->base, begin, end);
    if (fire && rc) fk_uncount(d, FK_DELETE);
    return fire && !rc ? fk_fail(FK_DELETE, what, n, true) : rc;
}

static int fk_commit(void *state, nds_kv_op *ops, size_t n) {
    fk_device *d = state;
    nds_kvstore **kvs = malloc((n ? n : 1) * sizeof *kvs);
    if (!kvs) return nds_err(NDS_ENOMEM, "faulty: out of memory in commit");
    for (size_t i = 0; i < n; i++) kvs[i] = d->base;
    /* A base without multi-key commit refuses before writing; no schedule applies to a refusal. */
    bool can = nds_kvstore_capabilities(d->base) & NDS_KV_CAP_ATOMIC_COMMIT;
    uint64_t call = 0;
    bool fire = can && fk_decide(d, FK_COMMIT, &call);
    char what[300];
    snprintf(what, sizeof what, "%zu keys (first %s)", n, n ? ops[0].key : "none");
    int rc = fire && d->rule[FK_COMMIT].mode == FK_ERROR ? fk_fail(FK_COMMIT, what, call, false)
                                                         : nds_kvstore_commit(kvs, ops, n);
    free(kvs);
    if (!fire || d->rule[FK_COMMIT].mode == FK_ERROR) return rc;
    if (rc) fk_uncount(d, FK_COMMIT);
    return rc ? rc : fk_fail(FK_COMMIT, what, call, true);
}

const nds_kv_driver nds_kv_driver_faulty = {
    .version = NDS_KV_DRIVER_VERSION,
    .name = "faulty",
    .url_scheme = NULL,
    .capabilities = NDS_KV_CAP_ATOMIC_CONDITIONAL_WRITE | NDS_KV_CAP_ATOMIC_COMMIT |
                    NDS_KV_CAP_BYTE_RANGE | NDS_KV_CAP_ADAPTER,
    .parse_url = fk_parse_url,
    .open = fk_open,
    .close = fk_close,
    .url_base = fk_url_base,
    .to_json = fk_to_json,
    .read = fk_read,
    .write = fk_write,
    .list = fk_list,
    .delete_range = fk_delete_range,
    .commit = fk_commit,
};
