/* Transactions (include/ndstore/txn.h): the Txn type, and committing prepared parts.
 *
 * A Txn owns one nds_txn. Arrays opened in it hold a reference to the Txn object, so the nds_txn outlives
 * them (txn.h: "the transaction must outlive the array"); the Python Transaction keeps those arrays alive
 * until it ends (the other half of that rule). Every C call that uses the transaction takes its lock with
 * the GIL released: a transaction is used by one thread at a time, and Python threads may share one. */
#include "nds_py.h"

void nds_py_txn_lock(nds_py_txn *t) { PyThread_acquire_lock(t->lock, WAIT_LOCK); }
void nds_py_txn_unlock(nds_py_txn *t) { PyThread_release_lock(t->lock); }

int nds_py_txn_converter(PyObject *obj, void *out) {
    if (obj == Py_None) {
        *(nds_py_txn **)out = NULL;
        return 1;
    }
    if (!PyObject_TypeCheck(obj, &nds_py_txn_type)) {
        PyErr_Format(PyExc_TypeError, "txn: expected an ndstore transaction or None, got %.100s",
                     Py_TYPE(obj)->tp_name);
        return 0;
    }
    *(nds_py_txn **)out = (nds_py_txn *)obj;
    return 1;
}

static int txn_init(nds_py_txn *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"mode", "memory_limit", NULL};
    int mode = NDS_TXN_ISOLATED;
    Py_ssize_t limit = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|in:Txn", names, &mode, &limit)) return -1;
    if (mode != NDS_TXN_ISOLATED && mode != NDS_TXN_ATOMIC) {
        PyErr_Format(PyExc_ValueError, "mode: expected TXN_ISOLATED or TXN_ATOMIC, got %d", mode);
        return -1;
    }
    if (limit < 0) {
        PyErr_Format(PyExc_ValueError, "memory_limit: must be >= 0, got %zd", limit);
        return -1;
    }
    if (self->txn) {
        PyErr_SetString(PyExc_RuntimeError, "Txn: already initialised");
        return -1;
    }
    if (!self->lock && !(self->lock = PyThread_allocate_lock())) {
        PyErr_NoMemory();
        return -1;
    }
    nds_txn_options o = NDS_TXN_OPTIONS_INIT;
    o.mode = (nds_txn_mode)mode;
    o.memory_limit = (size_t)limit;
    nds_error_clear();
    int st = nds_txn_begin(&self->txn, &o);
    if (st) {
        nds_py_raise(st);
        return -1;
    }
    return 0;
}

static void txn_dealloc(nds_py_txn *self) {
    nds_txn_free(self->txn); /* every array opened in it is gone: they hold a reference to self */
    if (self->lock) PyThread_free_lock(self->lock);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int txn_ready(nds_py_txn *self) {
    if (!self->txn) {
        PyErr_SetString(PyExc_ValueError, "transaction is not initialised");
        return 0;
    }
    return 1;
}

static PyObject *txn_commit(nds_py_txn *self, PyObject *noargs) {
    if (!txn_ready(self)) return NULL;
    int st;
    Py_BEGIN_ALLOW_THREADS
    nds_py_txn_lock(self);
    nds_error_clear();
    st = nds_txn_commit(self->txn);
    nds_py_txn_unlock(self);
    Py_END_ALLOW_THREADS
    self->ended = 1;
    if (st) return nds_py_raise(st);
    Py_RETURN_NONE;
}

static PyObject *txn_abort(nds_py_txn *self, PyObject *noargs) {
    if (!txn_ready(self)) return NULL;
    Py_BEGIN_ALLOW_THREADS
    nds_py_txn_lock(self);
    nds_txn_abort(self->txn);
    nds_py_txn_unlock(self);
    Py_END_ALLOW_THREADS
    self->ended = 1;
    Py_RETURN_NONE;
}

static PyObject *txn_prepare(nds_py_txn *self, PyObject *noargs) {
    if (!txn_ready(self)) return NULL;
    char *token = NULL;
    int st;
    Py_BEGIN_ALLOW_THREADS
    nds_py_txn_lock(self);
    nds_error_clear();
    st = nds_txn_prepare(self->txn, &token);
    nds_py_txn_unlock(self);
    Py_END_ALLOW_THREADS
    self->ended = 1;
    if (st) return nds_py_raise(st);
    return nds_py_take_string(token);
}

static PyObject *txn_write_key(nds_py_txn *self, PyObject *args) {
    PyObject *kvobj;
    const char *key;
    Py_buffer data;
    if (!txn_ready(self) || !PyArg_ParseTuple(args, "Osy*:write_key", &kvobj, &key, &data)) return NULL;
    nds_kvstore *kv = NULL;
    if (!nds_py_kvstore_take(kvobj, &kv)) {
        PyBuffer_Release(&data);
        return NULL;
    }
    int st;
    Py_BEGIN_ALLOW_THREADS
    nds_py_txn_lock(self);
    nds_error_clear();
    st = nds_txn_write_key(self->txn, kv, key, data.buf, (size_t)data.len);
    nds_py_txn_unlock(self);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    nds_kvstore_free(kv);
    if (st) return nds_py_raise(st);
    Py_RETURN_NONE;
}

static PyObject *txn_memory(nds_py_txn *self, PyObject *noargs) {
    if (!txn_ready(self)) return NULL;
    return PyLong_FromSize_t(nds_txn_memory(self->txn));
}

static PyObject *txn_get_ended(nds_py_txn *self, void *closure) { return PyBool_FromLong(self->ended); }

static PyMethodDef txn_methods[] = {
    {"commit", (PyCFunction)txn_commit, METH_NOARGS, "nds_txn_commit (GIL released)."},
    {"abort", (PyCFunction)txn_abort, METH_NOARGS, "nds_txn_abort."},
    {"prepare", (PyCFunction)txn_prepare, METH_NOARGS, "nds_txn_prepare -> token (GIL released)."},
    {"write_key", (PyCFunction)txn_write_key, METH_VARARGS, "write_key(kvstore, key, bytes): nds_txn_write_key."},
    {"memory", (PyCFunction)txn_memory, METH_NOARGS, "Bytes of staged data (nds_txn_memory)."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef txn_getset[] = {{"ended", (getter)txn_get_ended, NULL, "committed, prepared or aborted", NULL},
                                   {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject nds_py_txn_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ndstore._ndstore.Txn",
    .tp_basicsize = sizeof(nds_py_txn),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Txn(mode=TXN_ISOLATED, memory_limit=0): one nds_txn (use ndstore.Transaction).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)txn_init,
    .tp_dealloc = (destructor)txn_dealloc,
    .tp_methods = txn_methods,
    .tp_getset = txn_getset,
};

/* commit_prepared(kv, tokens, message=None, metadata=None) */
PyObject *nds_py_commit_prepared(PyObject *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"kvstore", "tokens", "message", "metadata", NULL};
    PyObject *kvobj, *tokens;
    const char *message = NULL, *metadata = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|zz:commit_prepared", names, &kvobj, &tokens, &message,
                                     &metadata))
        return NULL;
    PyObject *fast = PySequence_Fast(tokens, "tokens: expected a sequence of str");
    if (!fast) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    const char **v = PyMem_Calloc((size_t)n + 1, sizeof *v);
    if (!v) {
        Py_DECREF(fast);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, i);
        if (!PyUnicode_Check(item) || !(v[i] = PyUnicode_AsUTF8(item))) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "tokens[%zd]: expected str, got %.100s", i, Py_TYPE(item)->tp_name);
            PyMem_Free(v);
            Py_DECREF(fast);
            return NULL;
        }
    }
    nds_kvstore *kv = NULL;
    if (!nds_py_kvstore_take(kvobj, &kv)) {
        PyMem_Free(v);
        Py_DECREF(fast);
        return NULL;
    }
    int st;
    Py_BEGIN_ALLOW_THREADS
    nds_error_clear();
    st = nds_txn_commit_prepared(kv, v, (size_t)n, message, metadata);
    Py_END_ALLOW_THREADS
    nds_kvstore_free(kv);
    PyMem_Free(v);
    Py_DECREF(fast);
    if (st) return nds_py_raise(st);
    Py_RETURN_NONE;
}
