/* Arrays (include/ndstore/array.h): open, describe, read, write, resize, attributes, close.
 *
 * Selections arrive as start/stop/step vectors (python/ndstore/_index.py turns NumPy indexing into them),
 * so this file only checks what the C call needs: rank, and the caller's buffer (C-contiguous, writable for
 * reads, exactly the box's byte size), and reports a wrong one naming what was expected and what was got.
 * Every open, read, write and resize runs with the GIL released; busy counts those calls so close() in
 * another thread never frees the array under one (array.h: "no call on it may be running"). */
#include <string.h>
#include "nds_py.h"

typedef struct nds_py_array {
    PyObject_HEAD
    nds_array *a;
    nds_py_txn *txn; /* the transaction it was opened in (a reference: the nds_txn must outlive a), or NULL */
    size_t rank;
    size_t elem;
    int busy;   /* calls running with the GIL released */
    int closed; /* close() was called; the last call in flight frees a */
} nds_py_array;

static void free_array(nds_py_array *self) {
    nds_array *a = self->a;
    self->a = NULL;
    if (!a) return;
    Py_BEGIN_ALLOW_THREADS
    nds_array_free(a);
    Py_END_ALLOW_THREADS
}

/* Marks a call in flight; 0 with ValueError when the array is closed. */
static int begin_call(nds_py_array *self) {
    if (self->closed || !self->a) {
        PyErr_SetString(PyExc_ValueError, "array is closed");
        return 0;
    }
    self->busy++;
    return 1;
}

static void end_call(nds_py_array *self) {
    if (--self->busy == 0 && self->closed) free_array(self);
}

/* Locks the transactions a call uses (at most two, in address order, so two threads never wait on each
 * other). Called with the GIL released. */
static void lock_txns(nds_py_txn *t1, nds_py_txn *t2) {
    if (t1 == t2) t2 = NULL;
    if (t1 && t2 && t2 < t1) {
        nds_py_txn *t = t1;
        t1 = t2;
        t2 = t;
    }
    if (t1) nds_py_txn_lock(t1);
    if (t2) nds_py_txn_lock(t2);
}

static void unlock_txns(nds_py_txn *t1, nds_py_txn *t2) {
    if (t1 == t2) t2 = NULL;
    if (t1) nds_py_txn_unlock(t1);
    if (t2) nds_py_txn_unlock(t2);
}

PyObject *nds_py_array_open(PyObject *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"spec", "mode", "txn", NULL};
    const char *spec;
    unsigned int mode = 0;
    nds_py_txn *txn = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|IO&:array_open", names, &spec, &mode, nds_py_txn_converter, &txn))
        return NULL;
    nds_open_options o = NDS_OPEN_OPTIONS_INIT;
    o.mode = mode;
    o.txn = txn ? txn->txn : NULL;
    nds_array *a = NULL;
    int st;
    Py_BEGIN_ALLOW_THREADS
    lock_txns(txn, NULL);
    nds_error_clear();
    st = nds_array_open(&a, spec, &o);
    unlock_txns(txn, NULL);
    Py_END_ALLOW_THREADS
    if (st) return nds_py_raise(st);
    nds_py_array *obj = PyObject_New(nds_py_array, &nds_py_array_type);
    if (!obj) {
        nds_array_free(a);
        return NULL;
    }
    obj->a = a;
    obj->txn = txn;
    Py_XINCREF(txn);
    obj->rank = nds_array_rank(a);
    obj->elem = nds_array_dtype_size(a); /* per array for fixed-width strings ("|S12": 12) */
    obj->busy = 0;
    obj->closed = 0;
    return (PyObject *)obj;
}

static void array_dealloc(nds_py_array *self) {
    free_array(self); /* no call can be running: each holds a reference to self */
    Py_XDECREF(self->txn);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int open_array(nds_py_array *self) {
    if (self->closed || !self->a) {
        PyErr_SetString(PyExc_ValueError, "array is closed");
        return 0;
    }
    return 1;
}

/* Fills box from start/stop/step sequences of the array's rank. */
static int box_from_args(nds_py_array *self, PyObject *start, PyObject *stop, PyObject *step, nds_box *box) {
    memset(box, 0, sizeof *box);
    box->rank = self->rank;
    if (!nds_py_u64_vector(start, self->rank, box->start, "start") ||
        !nds_py_u64_vector(stop, self->rank, box->stop, "stop") ||
        !nds_py_u64_vector(step, self->rank, box->step, "step"))
        return 0;
    for (size_t d = 0; d < self->rank; d++) {
        if (box->step[d] < 1) {
            PyErr_Format(PyExc_ValueError, "step[%zu]: must be >= 1, got %llu", d, (unsigned long long)box->step[d]);
            return 0;
        }
    }
    return 1;
}

/* Bytes of box's elements, or -1 with an error on overflow; *empty when no element is selected. */
static Py_ssize_t box_bytes(nds_py_array *self, const nds_box *box, int *empty) {
    uint64_t count = 1;
    *empty = 0;
    for (size_t d = 0; d < box->rank; d++) {
        uint64_t e = box->stop[d] > box->start[d] ? nds_box_extent(box, d) : 0;
        if (e == 0) *empty = 1;
        if (e && count > UINT64_MAX / e) {
            PyErr_SetString(PyExc_OverflowError, "selection: too many elements");
            return -1;
        }
        count *= e;
    }
    if (*empty) return 0;
    if (self->elem && count > (uint64_t)PY_SSIZE_T_MAX / self->elem) { /* string/bytes: elem 0 */
        PyErr_SetString(PyExc_OverflowError, "selection: too many bytes");
        return -1;
    }
    return (Py_ssize_t)(count * self->elem);
}

/* Gets a C-contiguous buffer of exactly want bytes from obj (writable when asked); names what is wrong. */
static int get_buffer(PyObject *obj, Py_buffer *view, Py_ssize_t want, int writable, const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_STRIDES) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: expected an object with the buffer protocol, got %.100s", what,
                     Py_TYPE(obj)->tp_name);
        return 0;
    }
    const char *bad = NULL;
    if (writable && view->readonly) bad = "is read-only";
    else if (!PyBuffer_IsContiguous(view, 'C')) bad = "is not C-contiguous";
    if (bad) {
        PyErr_Format(PyExc_ValueError, "%s: the buffer %s (expected a writable C-contiguous buffer of %zd bytes)",
                     what, bad, want);
    } else if (view->len != want) {
        PyErr_Format(PyExc_ValueError, "%s: expected %zd bytes, got %zd", what, want, view->len);
        bad = "size";
    }
    if (bad) {
        PyBuffer_Release(view);
        return 0;
    }
    return 1;
}

/* read(start, stop, step, out, txn=None) fills out (any writable C-contiguous buffer of the box's size);
 * write(start, stop, step, data, txn=None) writes data (a C-contiguous buffer of the box's size, of the
 * dtype). One body: they differ in the buffer's direction and the C call. */
static PyObject *array_io(nds_py_array *self, PyObject *args, PyObject *kw, int writing) {
    static char *read_names[] = {"start", "stop", "step", "out", "txn", NULL};
    static char *write_names[] = {"start", "stop", "step", "data", "txn", "by_ref", NULL};
    PyObject *start, *stop, *step, *buf;
    nds_py_txn *txn = NULL;
    int by_ref = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, writing ? "OOOO|O&p:write" : "OOOO|O&:read",
                                     writing ? write_names : read_names, &start, &stop, &step, &buf,
                                     nds_py_txn_converter, &txn, &by_ref))
        return NULL;
    nds_box box;
    int empty;
    if (!open_array(self) || !box_from_args(self, start, stop, step, &box)) return NULL;
    Py_ssize_t want = box_bytes(self, &box, &empty);
    Py_buffer view;
    if (want < 0 || !get_buffer(buf, &view, want, !writing, writing ? "data" : "out")) return NULL;
    if (empty) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    if (!begin_call(self)) {
        PyBuffer_Release(&view);
        return NULL;
    }
    nds_io_options o = NDS_IO_OPTIONS_INIT;
    o.txn = txn ? txn->txn : NULL;
    nds_py_txn *own = self->txn;
    int st;
    Py_BEGIN_ALLOW_THREADS
    lock_txns(own, txn);
    nds_error_clear();
    if (!writing)
        st = nds_array_read(self->a, &box, view.buf, &o);
    else
        st = by_ref ? nds_array_write_ref(self->a, &box, view.buf, &o)
                    : nds_array_write(self->a, &box, view.buf, &o);
    unlock_txns(own, txn);
    Py_END_ALLOW_THREADS
    end_call(self);
    PyBuffer_Release(&view);
    if (st) return nds_py_raise(st);
    Py_RETURN_NONE;
}

static PyObject *array_read(nds_py_array *self, PyObject *args, PyObject *kw) { return array_io(self, args, kw, 0); }

static PyObject *array_write(nds_py_array *self, PyObject *args, PyObject *kw) { return array_io(self, args, kw, 1); }

/* ---- variable-length arrays (string, bytes): offsets + bytes ---- */

/* read_vlen(start, stop, step, txn=None) -> (offsets, data): offsets the count + 1 native uint64
 * offsets as bytes, data the elements' bytes one after the other (nds_array_read_vlen). */
static PyObject *array_read_vlen(nds_py_array *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"start", "stop", "step", "txn", NULL};
    PyObject *start, *stop, *step;
    nds_py_txn *txn = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOO|O&:read_vlen", names, &start, &stop, &step,
                                     nds_py_txn_converter, &txn))
        return NULL;
    nds_box box;
    if (!open_array(self) || !box_from_args(self, start, stop, step, &box) || !begin_call(self))
        return NULL;
    nds_io_options o = NDS_IO_OPTIONS_INIT;
    o.txn = txn ? txn->txn : NULL;
    nds_py_txn *own = self->txn;
    uint64_t *off = NULL, count = nds_box_count(&box);
    uint8_t *data = NULL;
    int st;
    Py_BEGIN_ALLOW_THREADS
    lock_txns(own, txn);
    nds_error_clear();
    st = nds_array_read_vlen(self->a, &box, &off, &data, &o);
    unlock_txns(own, txn);
    Py_END_ALLOW_THREADS
    end_call(self);
    if (st) return nds_py_raise(st);
    PyObject *out = Py_BuildValue("(y#y#)", (const char *)off, (Py_ssize_t)((count + 1) * sizeof *off),
                                  (const char *)data, (Py_ssize_t)off[count]);
    nds_array_vlen_free(off, data);
    return out;
}

/* write_vlen(start, stop, step, offsets, data, txn=None): offsets count + 1 native uint64 (a buffer),
 * data the bytes they index (nds_array_write_vlen). */
static PyObject *array_write_vlen(nds_py_array *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"start", "stop", "step", "offsets", "data", "txn", NULL};
    PyObject *start, *stop, *step;
    Py_buffer off, data;
    nds_py_txn *txn = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOy*y*|O&:write_vlen", names, &start, &stop, &step,
                                     &off, &data, nds_py_txn_converter, &txn))
        return NULL;
    nds_box box;
    int ok = open_array(self) && box_from_args(self, start, stop, step, &box);
    uint64_t count = ok ? nds_box_count(&box) : 0;
    const uint64_t *o64 = off.buf;
    if (ok && (off.len != (Py_ssize_t)((count + 1) * sizeof(uint64_t)) || o64[count] > (uint64_t)data.len)) {
        PyErr_Format(PyExc_ValueError, "write_vlen: %llu elements need %llu offsets within the %zd data bytes",
                     (unsigned long long)count, (unsigned long long)count + 1, data.len);
        ok = 0;
    }
    if (ok && !begin_call(self)) ok = 0;
    int st = 0;
    if (ok) {
        nds_io_options o = NDS_IO_OPTIONS_INIT;
        o.txn = txn ? txn->txn : NULL;
        nds_py_txn *own = self->txn;
        Py_BEGIN_ALLOW_THREADS
        lock_txns(own, txn);
        nds_error_clear();
        st = nds_array_write_vlen(self->a, &box, o64, data.buf, &o);
        unlock_txns(own, txn);
        Py_END_ALLOW_THREADS
        end_call(self);
    }
    PyBuffer_Release(&off);
    PyBuffer_Release(&data);
    if (!ok) return NULL;
    if (st) return nds_py_raise(st);
    Py_RETURN_NONE;
}

/* vlen_fill() -> bytes: the fill element of a string / bytes array (nds_array_vlen_fill). */
static PyObject *array_vlen_fill(nds_py_array *self, PyObject *noargs) {
    if (!open_array(self)) return NULL;
    const uint8_t *bytes;
    size_t n = nds_array_vlen_fill(self->a, &bytes);
    return PyBytes_FromStringAndSize((const char *)bytes, (Py_ssize_t)n);
}

static PyObject *array_resize(nds_py_array *self, PyObject *args) {
    PyObject *shape_obj;
    uint64_t shape[NDS_MAX_RANK];
    if (!PyArg_ParseTuple(args, "O:resize", &shape_obj) || !open_array(self) ||
        !nds_py_u64_vector(shape_obj, self->rank, shape, "new_shape") || !begin_call(self))
        return NULL;
    nds_py_txn *own = self->txn;
    int st;
    Py_BEGIN_ALLOW_THREADS
    lock_txns(own, NULL);
    nds_error_clear();
    st = nds_array_resize(self->a, shape);
    unlock_txns(own, NULL);
    Py_END_ALLOW_THREADS
    end_call(self);
    if (st) return nds_py_raise(st);
    Py_RETURN_NONE;
}

static PyObject *array_close(nds_py_array *self, PyObject *noargs) {
    if (!self->closed) {
        self->closed = 1;
        if (self->busy == 0) free_array(self);
    }
    Py_RETURN_NONE;
}

/* ---- description ---- */

typedef void (*u64_getter)(const nds_array *, uint64_t *);

static PyObject *u64_property(nds_py_array *self, u64_getter get) {
    if (!open_array(self)) return NULL;
    uint64_t v[NDS_MAX_RANK];
    get(self->a, v);
    return nds_py_u64_tuple(self->rank, v);
}

static PyObject *array_shape(nds_py_array *self, PyObject *noargs) { return u64_property(self, nds_array_shape); }
static PyObject *array_chunks(nds_py_array *self, PyObject *noargs) {
    return u64_property(self, nds_array_chunk_shape);
}
static PyObject *array_read_chunks(nds_py_array *self, PyObject *noargs) {
    return u64_property(self, nds_array_read_chunk_shape);
}

/* A tuple of one item per dimension, item(values, d) making each (a new reference or NULL). */
static PyObject *per_dimension(size_t rank, PyObject *(*item)(const void *, size_t),
                               const void *values) {
    PyObject *t = PyTuple_New((Py_ssize_t)rank);
    for (size_t d = 0; t && d < rank; d++) {
        PyObject *v = item(values, d);
        if (!v) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, (Py_ssize_t)d, v);
    }
    return t;
}

static PyObject *origin_item(const void *values, size_t d) {
    return PyLong_FromLongLong(((const int64_t *)values)[d]);
}

static PyObject *unit_item(const void *values, size_t d) {
    const nds_unit *u = (const nds_unit *)values + d;
    if (u->size > 0) return Py_BuildValue("(ds)", u->size, u->name);
    Py_RETURN_NONE;
}

static PyObject *array_origin(nds_py_array *self, PyObject *noargs) {
    if (!open_array(self)) return NULL;
    int64_t origin[NDS_MAX_RANK];
    nds_array_origin(self->a, origin);
    return per_dimension(nds_array_rank(self->a), origin_item, origin);
}

static PyObject *array_units(nds_py_array *self, PyObject *noargs) {
    if (!open_array(self)) return NULL;
    nds_unit units[NDS_MAX_RANK];
    nds_array_units(self->a, units);
    return per_dimension(nds_array_rank(self->a), unit_item, units);
}

static PyObject *array_dtype_name(nds_py_array *self, PyObject *noargs) {
    if (!open_array(self)) return NULL;
    return PyUnicode_FromString(nds_dtype_name(nds_array_dtype(self->a)));
}

static PyObject *array_fill_bytes(nds_py_array *self, PyObject *noargs) {
    if (!open_array(self)) return NULL;
    unsigned char v[NDS_ELEM_MAX_SIZE];
    memset(v, 0, sizeof v);
    nds_array_fill_element(self->a, v);
    return PyBytes_FromStringAndSize((const char *)v, (Py_ssize_t)self->elem);
}

static PyObject *array_dtype_size(nds_py_array *self, PyObject *noargs) {
    if (!open_array(self)) return NULL;
    return PyLong_FromSize_t(self->elem);
}

static PyObject *array_format(nds_py_array *self, PyObject *noargs) {
    if (!open_array(self)) return NULL;
    return PyUnicode_FromString(nds_array_format(self->a));
}

static PyObject *array_codec(nds_py_array *self, PyObject *noargs) {
    if (!open_array(self)) return NULL;
    char buf[1024];
    nds_array_codec_description(self->a, buf, sizeof buf);
    return PyUnicode_FromString(buf);
}

typedef int (*text_getter)(const nds_array *, char **);

static PyObject *text_property(nds_py_array *self, text_getter get) {
    if (!open_array(self)) return NULL;
    char *text = NULL;
    nds_error_clear();
    int st = get(self->a, &text);
    if (st) return nds_py_raise(st);
    return nds_py_take_string(text);
}

static PyObject *array_spec(nds_py_array *self, PyObject *noargs) { return text_property(self, nds_array_spec); }
static PyObject *array_metadata(nds_py_array *self, PyObject *noargs) {
    return text_property(self, nds_array_metadata);
}

static PyObject *array_get_attributes(nds_py_array *self, PyObject *noargs) {
    if (!begin_call(self)) return NULL;
    char *text = NULL;
    int st;
    nds_py_txn *own = self->txn;
    Py_BEGIN_ALLOW_THREADS
    lock_txns(own, NULL);
    nds_error_clear();
    st = nds_array_get_attributes(self->a, &text);
    unlock_txns(own, NULL);
    Py_END_ALLOW_THREADS
    end_call(self);
    if (st) return nds_py_raise(st);
    return nds_py_take_string(text);
}

static PyObject *array_set_attributes(nds_py_array *self, PyObject *args) {
    const char *json;
    if (!PyArg_ParseTuple(args, "s:set_attributes", &json) || !begin_call(self)) return NULL;
    int st;
    nds_py_txn *own = self->txn;
    Py_BEGIN_ALLOW_THREADS
    lock_txns(own, NULL);
    nds_error_clear();
    st = nds_array_set_attributes(self->a, json);
    unlock_txns(own, NULL);
    Py_END_ALLOW_THREADS
    end_call(self);
    if (st) return nds_py_raise(st);
    Py_RETURN_NONE;
}

static PyObject *array_kvstore(nds_py_array *self, PyObject *noargs) {
    if (!open_array(self)) return NULL;
    return nds_py_kvstore_wrap(nds_array_kvstore(self->a));
}

static PyObject *array_get_rank(nds_py_array *self, void *closure) { return PyLong_FromSize_t(self->rank); }
static PyObject *array_get_closed(nds_py_array *self, void *closure) { return PyBool_FromLong(self->closed); }
static PyObject *array_get_txn(nds_py_array *self, void *closure) {
    return Py_NewRef(self->txn ? (PyObject *)self->txn : Py_None);
}

static PyMethodDef array_methods[] = {
    {"read", (PyCFunction)(void (*)(void))array_read, METH_VARARGS | METH_KEYWORDS,
     "read(start, stop, step, out, txn=None): nds_array_read into out (GIL released)."},
    {"write", (PyCFunction)(void (*)(void))array_write, METH_VARARGS | METH_KEYWORDS,
     "write(start, stop, step, data, txn=None, by_ref=False): nds_array_write, or nds_array_write_ref "
     "(the caller keeps data alive and unchanged until the transaction ends) (GIL released)."},
    {"read_vlen", (PyCFunction)(void (*)(void))array_read_vlen, METH_VARARGS | METH_KEYWORDS,
     "read_vlen(start, stop, step, txn=None) -> (offsets, data): nds_array_read_vlen (GIL released)."},
    {"write_vlen", (PyCFunction)(void (*)(void))array_write_vlen, METH_VARARGS | METH_KEYWORDS,
     "write_vlen(start, stop, step, offsets, data, txn=None): nds_array_write_vlen (GIL released)."},
    {"vlen_fill", (PyCFunction)array_vlen_fill, METH_NOARGS, "The fill element of a string / bytes array."},
    {"resize", (PyCFunction)array_resize, METH_VARARGS, "resize(new_shape): nds_array_resize (GIL released)."},
    {"close", (PyCFunction)array_close, METH_NOARGS, "Closes the array (idempotent)."},
    {"shape", (PyCFunction)array_shape, METH_NOARGS, "The current shape."},
    {"origin", (PyCFunction)array_origin, METH_NOARGS,
     "Where the domain starts per dimension (nds_array_origin: precomputed voxel_offset)."},
    {"units", (PyCFunction)array_units, METH_NOARGS,
     "Per dimension (size, unit) of one index step, or None (nds_array_units)."},
    {"chunks", (PyCFunction)array_chunks, METH_NOARGS, "The chunk (or shard) shape."},
    {"read_chunks", (PyCFunction)array_read_chunks, METH_NOARGS, "The read chunk shape (inner chunk)."},
    {"dtype_name", (PyCFunction)array_dtype_name, METH_NOARGS, "The element type's name."},
    {"fill_bytes", (PyCFunction)array_fill_bytes, METH_NOARGS, "The fill value, one element of bytes."},
    {"dtype_size", (PyCFunction)array_dtype_size, METH_NOARGS,
     "Bytes per element (nds_array_dtype_size: per array for fixed-width strings)."},
    {"format", (PyCFunction)array_format, METH_NOARGS, "The format driver's name."},
    {"codec", (PyCFunction)array_codec, METH_NOARGS, "The codec's description."},
    {"spec", (PyCFunction)array_spec, METH_NOARGS, "The spec that reopens the array, JSON text."},
    {"metadata", (PyCFunction)array_metadata, METH_NOARGS, "The format's metadata document, JSON text."},
    {"get_attributes", (PyCFunction)array_get_attributes, METH_NOARGS, "User attributes, JSON text."},
    {"set_attributes", (PyCFunction)array_set_attributes, METH_VARARGS, "Replaces the user attributes (JSON)."},
    {"kvstore", (PyCFunction)array_kvstore, METH_NOARGS, "The array's kvstore (a KvStore of its own)."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef array_getset[] = {
    {"rank", (getter)array_get_rank, NULL, "number of dimensions", NULL},
    {"closed", (getter)array_get_closed, NULL, "whether close() was called", NULL},
    {"txn", (getter)array_get_txn, NULL, "the Txn it was opened in, or None", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

PyTypeObject nds_py_array_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ndstore._ndstore.Array",
    .tp_basicsize = sizeof(nds_py_array),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An open nds_array (use ndstore.open).",
    .tp_dealloc = (destructor)array_dealloc,
    .tp_methods = array_methods,
    .tp_getset = array_getset,
};
