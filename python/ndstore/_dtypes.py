"""Element types: every nds_dtype as a NumPy dtype.

NumPy has no bfloat16: a bfloat16 array's ``dtype`` is ``numpy.uint16`` (the raw bit patterns, host byte
order) and its ``dtype_name`` is ``"bfloat16"``. Writing to it takes uint16 bit patterns, or float32 /
float64 values converted with round-to-nearest-even (``float32_to_bfloat16``).
"""
import numpy as np

from . import _ndstore

# nds_dtype name -> NumPy dtype (native byte order)
_NUMPY = {
    "bool": np.dtype(np.bool_), "int8": np.dtype(np.int8), "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32), "int64": np.dtype(np.int64), "uint8": np.dtype(np.uint8),
    "uint16": np.dtype(np.uint16), "uint32": np.dtype(np.uint32), "uint64": np.dtype(np.uint64),
    "float16": np.dtype(np.float16), "bfloat16": np.dtype(np.uint16), "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64), "complex64": np.dtype(np.complex64),
    "complex128": np.dtype(np.complex128),
}

NAMES = tuple(name for name, _size in _ndstore.dtypes())
assert set(NAMES) == set(_NUMPY), "dtype list of the C library and the Python package differ"


def numpy_dtype(name):
    """The NumPy dtype of an nds_dtype name (bfloat16 -> uint16)."""
    return _NUMPY[name]


def dtype_name(dtype):
    """The nds_dtype name of a NumPy dtype, a type or a name ("bfloat16" accepted); TypeError otherwise."""
    if isinstance(dtype, str) and dtype in _NUMPY:
        return dtype
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise TypeError("dtype: %r is not a data type (%s)" % (dtype, e)) from None
    name = dt.name if dt.kind != "b" else "bool"
    if name not in _NUMPY or dt.byteorder not in ("=", "|", "<" if np.little_endian else ">"):
        raise TypeError("dtype: %s is not supported (supported: %s)" % (dt, ", ".join(NAMES)))
    return name


def float32_to_bfloat16(values):
    """bfloat16 bit patterns (uint16) of float values, rounded to nearest even; NaN stays NaN (quiet)."""
    f = np.ascontiguousarray(values, dtype=np.float32)
    bits = f.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    nan = np.isnan(f)
    rounded = np.where(nan, (bits >> 16) | 0x40, rounded)
    return rounded.astype(np.uint16)


def bfloat16_to_float32(bits):
    """float32 values of bfloat16 bit patterns (exact)."""
    b = np.ascontiguousarray(bits, dtype=np.uint16)
    return (b.astype(np.uint32) << 16).view(np.float32)
