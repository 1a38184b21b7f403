/* Errors: the status codes of include/ndstore/errors.def, and raising the exception of a failed call.
 *
 * The classes themselves are made in Python (ndstore/_errors.py) from error_codes(), the same X-macro list
 * the C enum is made of, and handed back with set_error_classes({code: class}); so a code added to
 * errors.def gets its class without an edit here. */
#include "nds_py.h"

static PyObject *error_classes; /* dict: int code -> class; NULL before registration */

PyObject *nds_py_error_codes(PyObject *self, PyObject *noargs) {
    PyObject *list = PyList_New(0);
    if (!list) return NULL;
#define NDS_ERR(name, value, text)                                                                 \
    do {                                                                                           \
        PyObject *item = Py_BuildValue("(sis)", #name, (int)(value), text);                        \
        if (!item || PyList_Append(list, item) < 0) {                                              \
            Py_XDECREF(item);                                                                      \
            Py_DECREF(list);                                                                       \
            return NULL;                                                                           \
        }                                                                                          \
        Py_DECREF(item);                                                                           \
    } while (0);
#include <ndstore/errors.def>
#undef NDS_ERR
    return list;
}

PyObject *nds_py_set_error_classes(PyObject *self, PyObject *mapping) {
    if (!PyDict_Check(mapping)) {
        PyErr_SetString(PyExc_TypeError, "set_error_classes: expected a dict {code: class}");
        return NULL;
    }
    Py_INCREF(mapping);
    Py_XSETREF(error_classes, mapping);
    Py_RETURN_NONE;
}

PyObject *nds_py_error_class(int code) {
    PyObject *cls = NULL;
    if (error_classes) {
        PyObject *key = PyLong_FromLong(code);
        if (key) {
            cls = PyDict_GetItemWithError(error_classes, key); /* borrowed */
            Py_DECREF(key);
        }
        PyErr_Clear();
    }
    return cls ? cls : PyExc_RuntimeError;
}

PyObject *nds_py_raise(int st) {
    const nds_error *e = nds_error_last();
    /* The thread's last error belongs to this status only when the codes agree; otherwise it is stale. */
    const char *message = (e->code == st && e->message[0]) ? e->message : nds_strerror(st);
    PyObject *cls = nds_py_error_class(st);
    PyObject *exc = cls == PyExc_RuntimeError ? PyUnicode_FromFormat("ndstore error %d: %s", st, message)
                                              : PyObject_CallFunction(cls, "si", message, st);
    if (exc) {
        PyErr_SetObject(cls == PyExc_RuntimeError ? cls : (PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
    return NULL;
}
