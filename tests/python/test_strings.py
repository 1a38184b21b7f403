"""Fixed-width strings (issue 20): zarr v2 |S<n> and <U<n>/>U<n> arrays are NumPy S<n> / U<n>
arrays through ndstore.Array; writes refuse another kind and never cut a value silently; zarr-python
2.13 (Debian's python3-zarr) reads what ndstore wrote and the reverse."""
import json

import numpy as np
import pytest

import ndstore


def create(tmp_path, name, dtype, fill, shape=(5,)):
    spec = {"driver": "zarr", "kvstore": "file://%s/%s/" % (tmp_path, name), "create": True,
            "metadata": {"dtype": dtype, "shape": list(shape), "chunks": [2], "fill_value": fill,
                         "compressor": None}}
    return ndstore.open(json.dumps(spec), create=True)


def test_bytes_read_write(tmp_path):
    a = create(tmp_path, "s", "|S4", "eno=")  # b"zz"
    assert a.dtype == np.dtype("S4")
    assert a.dtype_name == "null_terminated_bytes"
    assert a.fill_value == b"zz"
    assert list(a[:]) == [b"zz"] * 5
    a[1:4] = np.array([b"ab", b"a\x00b", b"four"])
    got = a[:]
    assert got.dtype == np.dtype("S4")
    assert got.tobytes() == b"zz\0\0ab\0\0a\0b\0fourzz\0\0"
    a[0] = b"x"
    assert a[0] == b"x"


def test_unicode_big_endian(tmp_path):
    a = create(tmp_path, "u", ">U3", "q\u00e9")
    assert a.dtype == np.dtype("U3")  # host order in memory
    assert a.fill_value == "q\u00e9"
    a[:3] = ["ab", "\U0001f600", "xyz"]
    assert list(a[:]) == ["ab", "\U0001f600", "xyz", "q\u00e9", "q\u00e9"]
    with open(tmp_path / "u" / "0", "rb") as f:
        assert f.read(4) == b"\0\0\0a"  # stored big-endian


def test_writes_refuse_other_kinds_and_cuts(tmp_path):
    a = create(tmp_path, "r", "<U2", "")
    with pytest.raises(TypeError, match="give str values"):
        a[0] = b"ab"
    with pytest.raises(ValueError, match="does not fit"):
        a[0] = "abc"
    b = create(tmp_path, "rb", "|S2", None)
    with pytest.raises(TypeError, match="give bytes values"):
        b[0] = "ab"
    with pytest.raises(ValueError, match="3 bytes does not fit"):
        b[:2] = [b"a", b"abc"]
    assert list(b[:2]) == [b"", b""]  # nothing written


def test_dtype_names_cannot_create_strings(url):
    with pytest.raises(TypeError, match="cannot create a string array"):
        ndstore.open(url("n"), create=True, shape=(4,), dtype="U5")


def test_open_checks_string_dtype(tmp_path):
    create(tmp_path, "c", "<U5", "").close()
    path = "%s/c" % tmp_path
    ndstore.open(path, dtype="U5").close()
    with pytest.raises(ndstore.Mismatch, match="dtype <U5"):
        ndstore.open(path, dtype="U4")


zarr = pytest.importorskip("zarr")


@pytest.mark.parametrize("dtype,fill,values", [
    ("|S5", b"ab", [b"hello", b"a\x00b", b""]),
    ("<U4", "0", ["\u00e9\U0001f600", "four", ""]),
    (">U2", None, ["hi", "x", "\u4e2d"]),
])
def test_zarr_python_both_ways(tmp_path, dtype, fill, values):
    path = str(tmp_path / "z.zarr")
    z = zarr.open(path, mode="w", shape=(5,), chunks=(2,), dtype=dtype, fill_value=fill)
    z[:3] = np.array(values, dtype=dtype)
    a = ndstore.open(path)
    assert a.dtype == np.dtype(dtype).newbyteorder("=")
    assert a[:].tobytes() == z[:].astype(a.dtype).tobytes()
    a[3:5] = np.array(values[:2], dtype=dtype)
    back = zarr.open(path, mode="r")[:]
    assert back.tobytes() == np.array(values + values[:2], dtype=dtype).tobytes()
