/* Shared declarations of the ndstore._ndstore extension module (python/src/).
 *
 * The module is a thin layer over the public C API (include/ndstore/): it converts arguments, releases
 * the GIL around every call that may block (open, read, write, resize, commit, prepare, kvstore I/O) and
 * turns a failed status into the ndstore.Error subclass of its code, carrying nds_error_last()'s message.
 * Selections, spec building, futures and the Transaction context manager live in python/ndstore/.
 *
 * Lifetimes: a C call on an array or a transaction runs with the GIL released, so another Python thread may
 * call close() meanwhile. Arrays count the calls in flight (busy) and the last one frees a closed array;
 * kvstore calls hold a reference of their own (nds_kvstore_ref). A transaction is used by one thread at a
 * time (txn.h): its lock is held, without the GIL, around every call that uses it.
 */
#ifndef NDS_PY_H
#define NDS_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "pythread.h"
#include <ndstore/ndstore.h>

/* ---- errors.c ---- */
/* Sets the Python exception for status st (< 0) from the calling thread's nds_error_last(). Returns NULL. */
PyObject *nds_py_raise(int st);
/* The exception class of code (an ndstore.Error subclass once registered, else RuntimeError). */
PyObject *nds_py_error_class(int code);
PyObject *nds_py_error_codes(PyObject *self, PyObject *noargs);
PyObject *nds_py_set_error_classes(PyObject *self, PyObject *mapping);

/* ---- txn.c ---- */
typedef struct nds_py_txn {
    PyObject_HEAD
    nds_txn *txn;
    PyThread_type_lock lock; /* one thread at a time uses txn */
    int ended;               /* committed, prepared or aborted */
} nds_py_txn;
extern PyTypeObject nds_py_txn_type;
/* Takes t's lock without holding the GIL (call with the GIL released). */
void nds_py_txn_lock(nds_py_txn *t);
void nds_py_txn_unlock(nds_py_txn *t);
/* Converts None or a Txn object; sets *out (borrowed) and returns 1, or 0 with TypeError. */
int nds_py_txn_converter(PyObject *obj, void *out);
PyObject *nds_py_commit_prepared(PyObject *self, PyObject *args, PyObject *kw);

/* ---- kvstore.c ---- */
typedef struct nds_py_kvstore {
    PyObject_HEAD
    nds_kvstore *kv; /* a reference of its own (nds_kvstore_ref); NULL once closed */
} nds_py_kvstore;
extern PyTypeObject nds_py_kvstore_type;
/* A new reference to kv (nds_kvstore_ref) owned by a new KvStore object. */
PyObject *nds_py_kvstore_wrap(nds_kvstore *kv);
/* Converts a KvStore object to a new reference of its handle (nds_kvstore_free it); 1, or 0 with an error. */
int nds_py_kvstore_take(PyObject *obj, nds_kvstore **out);
PyObject *nds_py_kvstore_open(PyObject *self, PyObject *args);
PyObject *nds_py_versioned_current(PyObject *self, PyObject *args);
PyObject *nds_py_versioned_refresh(PyObject *self, PyObject *args);
PyObject *nds_py_versioned_log(PyObject *self, PyObject *args);
PyObject *nds_py_versioned_tags(PyObject *self, PyObject *args);
PyObject *nds_py_versioned_tag(PyObject *self, PyObject *args);
PyObject *nds_py_versioned_diff(PyObject *self, PyObject *args);
PyObject *nds_py_versioned_gc(PyObject *self, PyObject *args, PyObject *kw);

/* ---- array.c ---- */
extern PyTypeObject nds_py_array_type;
PyObject *nds_py_array_open(PyObject *self, PyObject *args, PyObject *kw);

/* ---- helpers (module.c) ---- */
/* Fills a uint64 vector of exactly n entries from a sequence of non-negative ints; 0 with an error naming
 * what. */
int nds_py_u64_vector(PyObject *seq, size_t n, uint64_t *out, const char *what);
PyObject *nds_py_u64_tuple(size_t n, const uint64_t *v);
/* A Python str from ndstore malloc'd text (freed here); NULL-safe for the status path. */
PyObject *nds_py_take_string(char *text);

#endif
