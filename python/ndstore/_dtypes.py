"""Element types: every nds_dtype as a NumPy dtype.

NumPy has no bfloat16: a bfloat16 array's ``dtype`` is ``numpy.uint16`` (the raw bit patterns, host byte
order) and its ``dtype_name`` is ``"bfloat16"``. Writing to it takes uint16 bit patterns, or float32 /
float64 values converted with round-to-nearest-even (``float32_to_bfloat16``).

Nor has NumPy the zarr v3 ML types: the float8 family and float4_e2m1fn are ``numpy.uint8`` views of
their bit patterns (``dtype_name`` says which; ``ml_dtypes`` can reinterpret them with ``.view()``);
int4 and int2 are ``numpy.int8`` (one element per byte, sign-extended), uint4 and uint2 ``numpy.uint8``.
datetime64 / timedelta64 arrays are ``datetime64[unit]`` / ``timedelta64[unit]`` with the array's unit
(``numpy_dtype_of`` reads it from the metadata).

Fixed-width strings (issue 20; zarr v2 ``|S<n>``, ``<U<n>``) are NumPy ``S<n>`` / ``U<n>`` arrays: the
width is the array's (``numpy_dtype_of`` takes its element size). ``dtype="U5"`` / ``"S8"`` creates one
(zarr v2; other formats refuse, naming themselves).

Variable-length strings and bytes (``string`` / ``bytes``: zarr v3 with vlen-utf8 / vlen-bytes, zarr v2
``|O`` with those filters) are NumPy object arrays of ``str`` / ``bytes``. ``dtype=str``, ``object`` or
``"string"`` creates a string array, ``dtype=bytes`` or ``"bytes"`` a bytes array (NumPy's width-less
``U`` / ``S`` mean the same).
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
    # zarr v3 extension types (issue 20): bytes as they are in memory (dtype.h)
    "float8_e4m3": np.dtype(np.uint8), "float8_e5m2": np.dtype(np.uint8),
    "float8_e4m3fn": np.dtype(np.uint8), "float8_e4m3fnuz": np.dtype(np.uint8),
    "float8_e5m2fnuz": np.dtype(np.uint8), "float8_e4m3b11fnuz": np.dtype(np.uint8),
    "float8_e8m0fnu": np.dtype(np.uint8), "float4_e2m1fn": np.dtype(np.uint8),
    "int4": np.dtype(np.int8), "uint4": np.dtype(np.uint8), "int2": np.dtype(np.int8),
    "uint2": np.dtype(np.uint8),
    # without their unit; numpy_dtype_of gives the unit an array has
    "datetime64": np.dtype("M8"), "timedelta64": np.dtype("m8"),
    # without their width; numpy_dtype_of gives the width an array has
    "null_terminated_bytes": np.dtype("S"), "fixed_length_utf32": np.dtype("U"),
    # variable length: object arrays of str / bytes
    "string": np.dtype(object), "bytes": np.dtype(object),
}

# The variable-length types and the Python type of their elements.
VLEN_KINDS = {"string": str, "bytes": bytes}

# The string types and the NumPy kind of each.
STRING_KINDS = {"null_terminated_bytes": "S", "fixed_length_utf32": "U"}

# The value range of the sub-byte integers (NumPy's int8/uint8 hold more).
SUBBYTE_RANGE = {"int4": (-8, 7), "uint4": (0, 15), "int2": (-2, 1), "uint2": (0, 3)}

NAMES = tuple(name for name, _size in _ndstore.dtypes())
assert set(NAMES) == set(_NUMPY), "dtype list of the C library and the Python package differ"


def numpy_dtype(name):
    """The NumPy dtype of an nds_dtype name (bfloat16 -> uint16)."""
    return _NUMPY[name]


def time_unit(metadata):
    """The NumPy unit of a datetime64/timedelta64 array from its metadata document (dict): zarr v3
    {"data_type": {"configuration": {"unit", "scale_factor"}}} or zarr v2 {"dtype": "<M8[ns]"}; None when
    it names none."""
    dt = metadata.get("data_type")
    if isinstance(dt, dict):
        cfg = dt.get("configuration") or {}
        unit, scale = cfg.get("unit"), cfg.get("scale_factor", 1)
        if not isinstance(unit, str):
            return None
        unit = "us" if unit == "\u03bcs" else unit
        return "%d%s" % (scale, unit) if scale != 1 else unit
    typestring = metadata.get("dtype")
    if isinstance(typestring, str) and "[" in typestring and typestring.endswith("]"):
        return typestring[typestring.index("[") + 1:-1]
    return None


def numpy_dtype_of(name, metadata, itemsize=None):
    """The NumPy dtype an array of nds_dtype name holds, with the unit of its metadata for datetimes
    and, for fixed-width strings, the width of its element size (itemsize bytes; host byte order)."""
    if name in STRING_KINDS:
        kind = STRING_KINDS[name]
        return np.dtype("%s%d" % (kind, itemsize if kind == "S" else itemsize // 4))
    if name in ("datetime64", "timedelta64"):
        unit = time_unit(metadata)
        if unit:
            return np.dtype("%s[%s]" % (name, unit))
    return _NUMPY[name]


def dtype_name(dtype):
    """The nds_dtype name of a NumPy dtype, a type or a name ("bfloat16" accepted); TypeError otherwise."""
    if isinstance(dtype, str) and dtype in _NUMPY:
        return dtype
    if isinstance(dtype, str) and dtype.startswith(("datetime64[", "timedelta64[")):
        return dtype
    if dtype is str or dtype is object:  # variable-length strings (object arrays of str)
        return "string"
    if dtype is bytes:
        return "bytes"
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise TypeError("dtype: %r is not a data type (%s)" % (dtype, e)) from None
    name = dt.name if dt.kind != "b" else "bool"
    if dt.kind == "O":
        return "string"
    if dt.kind in "SU" and dt.itemsize == 0:  # NumPy's width-less str / bytes: variable length
        return "string" if dt.kind == "U" else "bytes"
    if dt.kind in "SU":  # fixed width: the NumPy typestring, which zarr v2 stores ("<U5", "|S8")
        return dt.newbyteorder("<").str if dt.kind == "U" else dt.str
    if dt.kind in "Mm":  # datetime64[ns], a schema dtype the formats store with its unit
        if "[" not in dt.name:
            raise TypeError("dtype: %s has no unit (give one: datetime64[ns])" % dt)
        return dt.name
    if name not in _NUMPY or dt.byteorder not in ("=", "|", "<" if np.little_endian else ">"):
        raise TypeError("dtype: %s is not supported (supported: %s)" % (dt, ", ".join(NAMES)))
    return name


def is_string_dtype(dtype):
    """1 when dtype is a NumPy fixed-width string dtype (S<n>, U<n>)."""
    if isinstance(dtype, str) and dtype in _NUMPY:
        return False
    try:
        return np.dtype(dtype).kind in "SU"
    except TypeError:
        return False


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
