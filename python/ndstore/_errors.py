"""ndstore exceptions: ``Error`` and one subclass per status code of include/ndstore/errors.def.

The classes are made from the C library's own list (``_ndstore.error_codes()``, the X-macro list the C enum
is built from), so a code added there gets a class without an edit here; ``_NAMES`` only gives the known
codes their Python names. Three classes also derive from the builtin exception a Python caller would
expect, so ``except KeyError`` and the like keep working:

- ``NotFound`` is also a ``KeyError`` (a missing key, array or version);
- ``InvalidArgument`` is also a ``ValueError``;
- ``Range`` is also an ``IndexError`` (a selection outside the array).

``str(e)`` is the C library's one-line message (nds_error_last()), ``e.code`` the negative status code.
"""
from . import _ndstore

__all__ = ["Error"]


class Error(Exception):
    """Base of every ndstore error. ``code``: the C status code (negative int); ``message``: its text."""

    code = None

    def __init__(self, message="", code=None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self):
        return self.message

    def __reduce__(self):  # picklable across processes (futures, multiprocessing)
        return (type(self), (self.message, self.code))


_NAMES = {
    "EINVAL": "InvalidArgument", "ENOMEM": "NoMemory", "EIO": "IO", "ENOTFOUND": "NotFound",
    "EEXIST": "Exists", "ECONFLICT": "Conflict", "ECORRUPT": "Corrupt", "EUNSUPPORTED": "Unsupported",
    "EFORMAT": "Format", "ERANGE": "Range", "ELIMIT": "Limit", "EREADONLY": "ReadOnly",
    "ETIMEOUT": "Timeout", "EMISMATCH": "Mismatch", "EPOISONED": "Poisoned", "ENETWORK": "Network",
    "EPERM": "Permission", "EINTERNAL": "Internal",
}
_EXTRA_BASES = {"NotFound": KeyError, "InvalidArgument": ValueError, "Range": IndexError}


def _class_name(code_name):
    if code_name in _NAMES:
        return _NAMES[code_name]
    return code_name[1:].capitalize() if code_name.startswith("E") else code_name.capitalize()


def _make_classes():
    classes = {}
    by_code = {}
    for code_name, value, text in _ndstore.error_codes():
        if value == 0:
            continue
        name = _class_name(code_name)
        bases = (Error,) + ((_EXTRA_BASES[name],) if name in _EXTRA_BASES else ())
        doc = "ndstore status NDS_%s (%d): %s." % (code_name, value, text)
        cls = type(name, bases, {"__doc__": doc, "code": value, "__module__": "ndstore"})
        classes[name] = cls
        by_code[value] = cls
    _ndstore.set_error_classes(by_code)
    return classes, by_code


CLASSES, BY_CODE = _make_classes()
globals().update(CLASSES)
__all__ += sorted(CLASSES)
