/* Key-value stores (include/ndstore/kvstore.h) and the versioned store's history (versioned.h).
 *
 * A KvStore holds one reference to an nds_kvstore. Every call takes a reference of its own before
 * releasing the GIL, so close() in another thread only drops the object's reference and the handle lives
 * until the call returns. Listings (keys, log, diff) are collected in C with the GIL released and turned
 * into Python objects afterwards. */
#include <stdlib.h>
#include <string.h>
#include "nds_py.h"

PyObject *nds_py_kvstore_wrap(nds_kvstore *kv) {
    nds_py_kvstore *o = PyObject_New(nds_py_kvstore, &nds_py_kvstore_type);
    if (!o) return NULL;
    o->kv = nds_kvstore_ref(kv);
    return (PyObject *)o;
}

int nds_py_kvstore_take(PyObject *obj, nds_kvstore **out) {
    if (!PyObject_TypeCheck(obj, &nds_py_kvstore_type)) {
        PyErr_Format(PyExc_TypeError, "kvstore: expected an ndstore KvStore, got %.100s", Py_TYPE(obj)->tp_name);
        return 0;
    }
    nds_py_kvstore *k = (nds_py_kvstore *)obj;
    if (!k->kv) {
        PyErr_SetString(PyExc_ValueError, "kvstore is closed");
        return 0;
    }
    *out = nds_kvstore_ref(k->kv);
    return 1;
}

PyObject *nds_py_kvstore_open(PyObject *self, PyObject *args) {
    const char *spec;
    if (!PyArg_ParseTuple(args, "s:kvstore_open", &spec)) return NULL;
    nds_kvstore *kv = NULL;
    int st;
    Py_BEGIN_ALLOW_THREADS
    nds_error_clear();
    st = nds_kvstore_open(&kv, spec, NULL);
    Py_END_ALLOW_THREADS
    if (st) return nds_py_raise(st);
    PyObject *o = nds_py_kvstore_wrap(kv);
    nds_kvstore_free(kv); /* the object took its own reference */
    return o;
}

static void kv_dealloc(nds_py_kvstore *self) {
    nds_kvstore_free(self->kv);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *kv_read(nds_py_kvstore *self, PyObject *args) {
    const char *key;
    if (!PyArg_ParseTuple(args, "s:read", &key)) return NULL;
    nds_kvstore *kv;
    if (!nds_py_kvstore_take((PyObject *)self, &kv)) return NULL;
    nds_read_result r;
    memset(&r, 0, sizeof r);
    int st;
    Py_BEGIN_ALLOW_THREADS
    nds_error_clear();
    st = nds_kvstore_read(kv, key, NULL, &r);
    Py_END_ALLOW_THREADS
    nds_kvstore_free(kv);
    if (st) return nds_py_raise(st);
    PyObject *out = r.state == NDS_READ_VALUE
                        ? PyBytes_FromStringAndSize((const char *)r.value.data, (Py_ssize_t)r.value.len)
                        : Py_NewRef(Py_None);
    nds_read_result_dispose(&r);
    return out;
}

static PyObject *kv_write(nds_py_kvstore *self, PyObject *args) {
    const char *key;
    Py_buffer data;
    if (!PyArg_ParseTuple(args, "sy*:write", &key, &data)) return NULL;
    nds_kvstore *kv;
    if (!nds_py_kvstore_take((PyObject *)self, &kv)) {
        PyBuffer_Release(&data);
        return NULL;
    }
    int st;
    Py_BEGIN_ALLOW_THREADS
    nds_error_clear();
    st = nds_kvstore_write(kv, key, data.buf, (size_t)data.len, NULL, NULL);
    Py_END_ALLOW_THREADS
    nds_kvstore_free(kv);
    PyBuffer_Release(&data);
    if (st) return nds_py_raise(st);
    Py_RETURN_NONE;
}

static PyObject *kv_delete(nds_py_kvstore *self, PyObject *args) {
    const char *key;
    if (!PyArg_ParseTuple(args, "s:delete", &key)) return NULL;
    nds_kvstore *kv;
    if (!nds_py_kvstore_take((PyObject *)self, &kv)) return NULL;
    int st;
    Py_BEGIN_ALLOW_THREADS
    nds_error_clear();
    st = nds_kvstore_delete(kv, key, NULL);
    Py_END_ALLOW_THREADS
    nds_kvstore_free(kv);
    if (st) return nds_py_raise(st);
    Py_RETURN_NONE;
}

/* A growing list of malloc'd strings with an integer each (a kind, a version), filled without the GIL. */
typedef struct str_list {
    char **s;
    long long *kind;
    size_t n, cap;
    int oom;
} str_list;

static int str_list_add(str_list *l, const char *s, long long kind) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        char **ns = realloc(l->s, cap * sizeof *ns);
        if (ns) l->s = ns;
        long long *nk = ns ? realloc(l->kind, cap * sizeof *nk) : NULL;
        if (nk) l->kind = nk;
        if (!ns || !nk) return l->oom = 1;
        l->cap = cap;
    }
    if (!(l->s[l->n] = strdup(s))) return l->oom = 1;
    l->kind[l->n++] = kind;
    return 0;
}

static void str_list_free(str_list *l) {
    for (size_t i = 0; i < l->n; i++) free(l->s[i]);
    free(l->s);
    free(l->kind);
}

/* The list as Python: [str] (with_kind 0) or [(str, kind)]. */
static PyObject *str_list_to_py(const str_list *l, int with_kind) {
    PyObject *out = PyList_New((Py_ssize_t)l->n);
    for (size_t i = 0; out && i < l->n; i++) {
        PyObject *item = with_kind ? Py_BuildValue("(sL)", l->s[i], l->kind[i]) : PyUnicode_FromString(l->s[i]);
        if (!item) Py_CLEAR(out);
        else PyList_SET_ITEM(out, (Py_ssize_t)i, item);
    }
    return out;
}

static int list_one(void *ctx, const char *key, uint64_t size) { return str_list_add(ctx, key, 0) ? NDS_ENOMEM : 0; }

static PyObject *kv_list(nds_py_kvstore *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"prefix", NULL};
    const char *prefix = "";
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|s:list", names, &prefix)) return NULL;
    nds_kvstore *kv;
    if (!nds_py_kvstore_take((PyObject *)self, &kv)) return NULL;
    str_list l = {0};
    int st;
    Py_BEGIN_ALLOW_THREADS
    nds_error_clear();
    st = nds_kvstore_list(kv, prefix, list_one, &l);
    Py_END_ALLOW_THREADS
    nds_kvstore_free(kv);
    PyObject *out = st ? (l.oom ? PyErr_NoMemory() : nds_py_raise(st)) : str_list_to_py(&l, 0);
    str_list_free(&l);
    return out;
}

static PyObject *kv_close(nds_py_kvstore *self, PyObject *noargs) {
    nds_kvstore *kv = self->kv;
    self->kv = NULL;
    nds_kvstore_free(kv); /* calls in flight hold references of their own */
    Py_RETURN_NONE;
}

static PyObject *kv_get_url(nds_py_kvstore *self, void *closure) {
    if (!self->kv) return PyErr_Format(PyExc_ValueError, "kvstore is closed");
    return PyUnicode_FromString(nds_kvstore_url(self->kv));
}

static PyObject *kv_get_closed(nds_py_kvstore *self, void *closure) { return PyBool_FromLong(self->kv == NULL); }

static PyObject *kv_spec(nds_py_kvstore *self, PyObject *noargs) {
    if (!self->kv) return PyErr_Format(PyExc_ValueError, "kvstore is closed");
    char *text = NULL;
    nds_error_clear();
    int st = nds_kvstore_spec(self->kv, &text);
    if (st) return nds_py_raise(st);
    return nds_py_take_string(text);
}

static PyMethodDef kv_methods[] = {
    {"read", (PyCFunction)kv_read, METH_VARARGS, "read(key) -> bytes, or None when the key is missing."},
    {"write", (PyCFunction)kv_write, METH_VARARGS, "write(key, data): unconditional write."},
    {"delete", (PyCFunction)kv_delete, METH_VARARGS, "delete(key): deleting a missing key succeeds."},
    {"list", (PyCFunction)(void (*)(void))kv_list, METH_VARARGS | METH_KEYWORDS,
     "list(prefix='') -> keys starting with prefix, in no particular order."},
    {"close", (PyCFunction)kv_close, METH_NOARGS, "Drops this handle (idempotent)."},
    {"spec_json", (PyCFunction)kv_spec, METH_NOARGS, "The spec as JSON text (no credentials)."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef kv_getset[] = {{"url", (getter)kv_get_url, NULL, "URL (credentials shown as ***)", NULL},
                                  {"closed", (getter)kv_get_closed, NULL, "whether close() was called", NULL},
                                  {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject nds_py_kvstore_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ndstore._ndstore.KvStore",
    .tp_basicsize = sizeof(nds_py_kvstore),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A kvstore handle (ndstore.kvstore_open).",
    .tp_dealloc = (destructor)kv_dealloc,
    .tp_methods = kv_methods,
    .tp_getset = kv_getset,
};

/* ---- versioned store ---- */

typedef int (*version_call)(nds_kvstore *, uint64_t *);

static PyObject *version_query(PyObject *args, version_call fn, const char *fmt) {
    PyObject *kvobj;
    if (!PyArg_ParseTuple(args, fmt, &kvobj)) return NULL;
    nds_kvstore *kv;
    if (!nds_py_kvstore_take(kvobj, &kv)) return NULL;
    uint64_t v = 0;
    int st;
    Py_BEGIN_ALLOW_THREADS
    nds_error_clear();
    st = fn(kv, &v);
    Py_END_ALLOW_THREADS
    nds_kvstore_free(kv);
    if (st) return nds_py_raise(st);
    return PyLong_FromUnsignedLongLong(v);
}

PyObject *nds_py_versioned_current(PyObject *self, PyObject *args) {
    return version_query(args, nds_versioned_current, "O:versioned_current");
}
PyObject *nds_py_versioned_refresh(PyObject *self, PyObject *args) {
    return version_query(args, nds_versioned_refresh, "O:versioned_refresh");
}

typedef struct log_entry {
    uint64_t version, keys;
    int64_t time_ns;
    char *message, *metadata;
} log_entry;

typedef struct log_list {
    log_entry *e;
    size_t n, cap;
} log_list;

static char *dup_or_null(const char *s, int *oom) {
    if (!s) return NULL;
    char *d = strdup(s);
    if (!d) *oom = 1;
    return d;
}

static int log_one(void *ctx, const nds_version_info *info) {
    log_list *l = ctx;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 32;
        log_entry *ne = realloc(l->e, cap * sizeof *ne);
        if (!ne) return NDS_ENOMEM;
        l->e = ne;
        l->cap = cap;
    }
    int oom = 0;
    log_entry *e = &l->e[l->n++];
    e->version = info->version;
    e->keys = info->keys;
    e->time_ns = info->time_ns;
    e->message = dup_or_null(info->message, &oom);
    e->metadata = dup_or_null(info->metadata, &oom);
    return oom ? NDS_ENOMEM : 0;
}

PyObject *nds_py_versioned_log(PyObject *self, PyObject *args) {
    PyObject *kvobj;
    unsigned long long newest = 0;
    if (!PyArg_ParseTuple(args, "O|K:versioned_log", &kvobj, &newest)) return NULL;
    nds_kvstore *kv;
    if (!nds_py_kvstore_take(kvobj, &kv)) return NULL;
    log_list l = {0};
    int st;
    Py_BEGIN_ALLOW_THREADS
    nds_error_clear();
    st = nds_versioned_log(kv, (uint64_t)newest, log_one, &l);
    Py_END_ALLOW_THREADS
    nds_kvstore_free(kv);
    PyObject *out = st ? nds_py_raise(st) : PyList_New((Py_ssize_t)l.n);
    for (size_t i = 0; out && i < l.n; i++) {
        log_entry *e = &l.e[i];
        PyObject *item = Py_BuildValue("(KLzzK)", (unsigned long long)e->version, (long long)e->time_ns,
                                       e->message, e->metadata, (unsigned long long)e->keys);
        if (!item) Py_CLEAR(out);
        else PyList_SET_ITEM(out, (Py_ssize_t)i, item);
    }
    for (size_t i = 0; i < l.n; i++) {
        free(l.e[i].message);
        free(l.e[i].metadata);
    }
    free(l.e);
    return out;
}

PyObject *nds_py_versioned_tag(PyObject *self, PyObject *args) {
    PyObject *kvobj;
    const char *name;
    unsigned long long version = 0;
    if (!PyArg_ParseTuple(args, "Os|K:versioned_tag", &kvobj, &name, &version)) return NULL;
    nds_kvstore *kv;
    if (!nds_py_kvstore_take(kvobj, &kv)) return NULL;
    int st;
    Py_BEGIN_ALLOW_THREADS
    nds_error_clear();
    st = nds_versioned_tag(kv, name, (uint64_t)version);
    Py_END_ALLOW_THREADS
    nds_kvstore_free(kv);
    if (st) return nds_py_raise(st);
    Py_RETURN_NONE;
}

static int tag_one(void *ctx, const char *name, uint64_t version) {
    return str_list_add(ctx, name, (long long)version) ? NDS_ENOMEM : 0;
}

PyObject *nds_py_versioned_tags(PyObject *self, PyObject *args) {
    PyObject *kvobj;
    if (!PyArg_ParseTuple(args, "O:versioned_tags", &kvobj)) return NULL;
    nds_kvstore *kv;
    if (!nds_py_kvstore_take(kvobj, &kv)) return NULL;
    str_list l = {0};
    int st;
    Py_BEGIN_ALLOW_THREADS
    nds_error_clear();
    st = nds_versioned_tags(kv, tag_one, &l);
    Py_END_ALLOW_THREADS
    nds_kvstore_free(kv);
    PyObject *out = l.oom ? PyErr_NoMemory() : st ? nds_py_raise(st) : str_list_to_py(&l, 1);
    str_list_free(&l);
    return out;
}

static int diff_one(void *ctx, const char *key, nds_diff_kind kind) {
    return str_list_add(ctx, key, (int)kind) ? NDS_ENOMEM : 0;
}

PyObject *nds_py_versioned_diff(PyObject *self, PyObject *args) {
    PyObject *kvobj;
    unsigned long long a, b;
    if (!PyArg_ParseTuple(args, "OKK:versioned_diff", &kvobj, &a, &b)) return NULL;
    nds_kvstore *kv;
    if (!nds_py_kvstore_take(kvobj, &kv)) return NULL;
    str_list l = {0};
    int st;
    Py_BEGIN_ALLOW_THREADS
    nds_error_clear();
    st = nds_versioned_diff(kv, (uint64_t)a, (uint64_t)b, diff_one, &l);
    Py_END_ALLOW_THREADS
    nds_kvstore_free(kv);
    PyObject *out = st ? (l.oom ? PyErr_NoMemory() : nds_py_raise(st)) : str_list_to_py(&l, 1);
    str_list_free(&l);
    return out;
}

PyObject *nds_py_versioned_gc(PyObject *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"kvstore", "keep_last", "older_than_ms", "grace_ms", "dry_run", NULL};
    PyObject *kvobj;
    unsigned long long keep_last = 0;
    long long older = -1, grace = -1;
    int dry_run = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|KLLp:versioned_gc", names, &kvobj, &keep_last, &older, &grace,
                                     &dry_run))
        return NULL;
    nds_gc_options o = NDS_GC_OPTIONS_INIT;
    o.keep_last = (uint64_t)keep_last;
    o.older_than_ms = (int64_t)older;
    if (grace >= 0) o.grace_ms = (int64_t)grace; /* -1: the library's default */
    o.dry_run = dry_run;
    nds_kvstore *kv;
    if (!nds_py_kvstore_take(kvobj, &kv)) return NULL;
    nds_gc_result r;
    memset(&r, 0, sizeof r);
    int st;
    Py_BEGIN_ALLOW_THREADS
    nds_error_clear();
    st = nds_versioned_gc(kv, &o, &r);
    Py_END_ALLOW_THREADS
    nds_kvstore_free(kv);
    if (st) return nds_py_raise(st);
    return Py_BuildValue("{sKsKsKsKsK}", "versions_kept", (unsigned long long)r.versions_kept,
                         "versions_collected", (unsigned long long)r.versions_collected, "objects_deleted",
                         (unsigned long long)r.objects_deleted, "bytes_deleted", (unsigned long long)r.bytes_deleted,
                         "objects_pending", (unsigned long long)r.objects_pending);
}
