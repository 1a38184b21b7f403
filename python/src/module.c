/* The ndstore._ndstore module: its function table, the small conversions every file uses, and module
 * initialisation. The Python package (python/ndstore/__init__.py) is the user-facing API. */
#include "nds_py.h"

int nds_py_u64_vector(PyObject *seq, size_t n, uint64_t *out, const char *what) {
    PyObject *fast = PySequence_Fast(seq, what);
    if (!fast) return 0;
    Py_ssize_t len = PySequence_Fast_GET_SIZE(fast);
    if ((size_t)len != n) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zu values, got %zd", what, n, len);
        Py_DECREF(fast);
        return 0;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, i);
        unsigned long long v = PyLong_AsUnsignedLongLong(item);
        if (v == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%s[%zd]: expected a non-negative 64-bit integer, got %R", what, i,
                         item);
            Py_DECREF(fast);
            return 0;
        }
        out[i] = (uint64_t)v;
    }
    Py_DECREF(fast);
    return 1;
}

PyObject *nds_py_u64_tuple(size_t n, const uint64_t *v) {
    PyObject *t = PyTuple_New((Py_ssize_t)n);
    for (size_t i = 0; t && i < n; i++) {
        PyObject *x = PyLong_FromUnsignedLongLong(v[i]);
        if (!x) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, (Py_ssize_t)i, x);
    }
    return t;
}

PyObject *nds_py_take_string(char *text) {
    PyObject *s = PyUnicode_FromString(text ? text : "");
    nds_free(text);
    return s;
}

static PyObject *py_version(PyObject *self, PyObject *noargs) { return PyUnicode_FromString(nds_version()); }

/* url_split(url) -> (kvstore_url, format or None): nds_spec_url_split, so Python splits URLs as every
 * other part of ndstore does. */
static PyObject *py_url_split(PyObject *self, PyObject *args) {
    const char *url;
    if (!PyArg_ParseTuple(args, "s:url_split", &url)) return NULL;
    char *kvurl = NULL, *format = NULL;
    nds_error_clear();
    int st = nds_spec_url_split(url, &kvurl, &format);
    if (st) return nds_py_raise(st);
    PyObject *out = Py_BuildValue("(sz)", kvurl, format);
    nds_free(kvurl);
    nds_free(format);
    return out;
}

/* dtypes() -> [(name, size)] of every valid nds_dtype, in enum order. */
static PyObject *py_dtypes(PyObject *self, PyObject *noargs) {
    PyObject *list = PyList_New(0);
    for (int t = NDS_DTYPE_INVALID + 1; list && t < NDS_DTYPE_COUNT; t++) {
        PyObject *item = Py_BuildValue("(sn)", nds_dtype_name((nds_dtype)t), (Py_ssize_t)nds_dtype_size((nds_dtype)t));
        if (!item || PyList_Append(list, item) < 0) Py_CLEAR(list);
        Py_XDECREF(item);
    }
    return list;
}

static PyMethodDef module_methods[] = {
    {"version", py_version, METH_NOARGS, "nds_version(): the C library's version string."},
    {"error_codes", nds_py_error_codes, METH_NOARGS, "[(name, code, text)] from include/ndstore/errors.def."},
    {"set_error_classes", nds_py_set_error_classes, METH_O, "Registers {code: exception class}."},
    {"url_split", py_url_split, METH_VARARGS, "nds_spec_url_split(url) -> (kvstore_url, format or None)."},
    {"dtypes", py_dtypes, METH_NOARGS, "[(name, size)] of every element type."},
    {"array_open", (PyCFunction)(void (*)(void))nds_py_array_open, METH_VARARGS | METH_KEYWORDS,
     "array_open(spec_json, mode=0, txn=None) -> Array (nds_array_open, GIL released)."},
    {"kvstore_open", nds_py_kvstore_open, METH_VARARGS, "kvstore_open(spec) -> KvStore (nds_kvstore_open)."},
    {"versioned_current", nds_py_versioned_current, METH_VARARGS, "versioned_current(kv) -> int."},
    {"versioned_refresh", nds_py_versioned_refresh, METH_VARARGS, "versioned_refresh(kv) -> int."},
    {"versioned_tags", nds_py_versioned_tags, METH_VARARGS, "versioned_tags(kv) -> [(name, version)] by name."},
    {"versioned_log", nds_py_versioned_log, METH_VARARGS,
     "versioned_log(kv, newest) -> [(version, time_ns, message, metadata_json, keys)] newest first."},
    {"versioned_tag", nds_py_versioned_tag, METH_VARARGS, "versioned_tag(kv, name, version)."},
    {"versioned_diff", nds_py_versioned_diff, METH_VARARGS,
     "versioned_diff(kv, a, b) -> [(key, kind)], kind 0 added, 1 removed, 2 changed."},
    {"versioned_gc", (PyCFunction)(void (*)(void))nds_py_versioned_gc, METH_VARARGS | METH_KEYWORDS,
     "versioned_gc(kv, keep_last, older_than_ms, grace_ms, dry_run) -> dict."},
    {"commit_prepared", (PyCFunction)(void (*)(void))nds_py_commit_prepared, METH_VARARGS | METH_KEYWORDS,
     "commit_prepared(kv, tokens, message=None, metadata_json=None) (nds_txn_commit_prepared)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "ndstore._ndstore",
                                        "C extension of the ndstore package (use `import ndstore`).", -1,
                                        module_methods, NULL, NULL, NULL, NULL};

static int add_type(PyObject *m, PyTypeObject *type, const char *name) {
    if (PyType_Ready(type) < 0) return -1;
    Py_INCREF(type);
    if (PyModule_AddObject(m, name, (PyObject *)type) < 0) {
        Py_DECREF(type);
        return -1;
    }
    return 0;
}

PyMODINIT_FUNC PyInit__ndstore(void) {
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    if (add_type(m, &nds_py_array_type, "Array") < 0 || add_type(m, &nds_py_txn_type, "Txn") < 0 ||
        add_type(m, &nds_py_kvstore_type, "KvStore") < 0 ||
        PyModule_AddIntConstant(m, "TXN_ISOLATED", NDS_TXN_ISOLATED) < 0 ||
        PyModule_AddIntConstant(m, "TXN_ATOMIC", NDS_TXN_ATOMIC) < 0 ||
        PyModule_AddIntConstant(m, "OPEN_EXISTING", NDS_OPEN_EXISTING) < 0 ||
        PyModule_AddIntConstant(m, "OPEN_CREATE", NDS_OPEN_CREATE) < 0 ||
        PyModule_AddIntConstant(m, "OPEN_DELETE_EXISTING", NDS_OPEN_DELETE_EXISTING) < 0 ||
        PyModule_AddIntConstant(m, "MAX_RANK", NDS_MAX_RANK) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
