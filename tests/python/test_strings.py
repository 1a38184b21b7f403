"""Strings (issue 20). Fixed width: zarr v2 |S<n> and <U<n>/>U<n> arrays are NumPy S<n> / U<n> arrays
through ndstore.Array; writes refuse another kind and never cut a value silently. Variable length:
zarr v2 |O (vlen-utf8 / vlen-bytes) and zarr v3 string / bytes arrays are NumPy object arrays of str
/ bytes. zarr-python 2.13 (Debian's python3-zarr) reads what ndstore wrote and the reverse."""
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


def test_create_fixed_width_by_dtype(url):
    a = ndstore.open(url("u"), create=True, shape=(4,), dtype="U5")
    assert a.dtype == np.dtype("U5") and a.metadata["dtype"] == "<U5"
    a[:] = ["ab", "", "\u00e9", "fives"]
    assert list(a[:]) == ["ab", "", "\u00e9", "fives"]
    assert ndstore.open(url("s"), create=True, shape=(4,), dtype="S8").metadata["dtype"] == "|S8"
    b = ndstore.open(url("v3", "zarr3"), create=True, shape=(4,), dtype="U5")  # the registry type
    assert b.metadata["data_type"] == {"name": "fixed_length_utf32", "configuration": {"length_bytes": 20}}
    b[1:3] = ["\U0001f600", "five5"]
    assert list(b[:]) == ["", "\U0001f600", "five5", ""]
    with pytest.raises(ndstore.InvalidArgument, match="n5"):
        ndstore.open(url("n", "n5"), create=True, shape=(4,), dtype="U5")


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


# ---- variable-length strings and bytes ----

@pytest.mark.parametrize("fmt", ["zarr", "zarr3"])
@pytest.mark.parametrize("dtype", [str, object, "string", "U"])
def test_vlen_strings(url, fmt, dtype):
    a = ndstore.open(url("v", fmt), create=True, shape=(3, 5), chunks=(2, 2), dtype=dtype)
    assert a.dtype == np.dtype(object) and a.dtype_name == "string"
    assert a.fill_value == ""
    values = [["", "a", "h\u00e9llo", "\U0001f600", "x" * 100], ["1", "22", "", "4", "5"],
              ["r2"] * 5]
    a[:] = values
    got = a[:]
    assert got.dtype == np.dtype(object) and got.shape == (3, 5)
    assert got.tolist() == values
    assert a[1, 2:5].tolist() == ["", "4", "5"]
    assert a[::2, ::-2].tolist() == [r[::-2] for r in values[::2]]
    assert a[0, 2] == "h\u00e9llo"  # a scalar: the str itself
    a[1, ::2] = "z"  # broadcast; the elements in between are kept
    assert a[1].tolist() == ["z", "22", "z", "4", "z"]
    assert all(type(v) is str for v in a[:].ravel())


@pytest.mark.parametrize("fmt", ["zarr", "zarr3"])
@pytest.mark.parametrize("dtype", [bytes, "bytes", "S"])
def test_vlen_bytes(url, fmt, dtype):
    a = ndstore.open(url("b", fmt), create=True, shape=(4,), chunks=(3,), dtype=dtype)
    assert a.dtype_name == "bytes" and a.fill_value == b""
    a[1:] = [b"\x00\xff", b"", bytes(range(256))]
    assert a[:].tolist() == [b"", b"\x00\xff", b"", bytes(range(256))]
    assert a.write_async(slice(0, 1), [b"q"]).result() is None
    assert a[0] == b"q"


def test_vlen_refusals(url):
    s = ndstore.open(url("s"), create=True, shape=(3,), dtype=str)
    b = ndstore.open(url("b", "zarr3"), create=True, shape=(3,), dtype=bytes)
    with pytest.raises(TypeError, match="give str values"):
        s[0] = b"bytes"
    with pytest.raises(TypeError, match="give bytes values"):
        b[0] = "text"
    with pytest.raises(TypeError, match="give str values"):
        s[:] = [1, 2, 3]
    with pytest.raises(ValueError, match="not valid Unicode"):
        s[0] = "\ud800"  # a lone surrogate has no UTF-8
    with pytest.raises(TypeError, match="variable-length"):
        s.read(out=np.empty(3, dtype=object))
    with pytest.raises(ValueError, match="broadcast"):
        s[:] = ["a", "b"]
    assert s[:].tolist() == ["", "", ""]  # nothing was written
    t = ndstore.Transaction()
    with pytest.raises(ndstore.Unsupported, match="inside a transaction"):
        s.write(slice(0, 1), ["x"], txn=t)
    t.abort()


@pytest.mark.parametrize("fmt", ["zarr", "zarr3"])
def test_vlen_string_fill(url, fmt):
    a = ndstore.open(url("f", fmt), create=True, shape=(3,), dtype=str, fill_value="-")
    assert a.fill_value == "-" and a[:].tolist() == ["-"] * 3
    a[1] = "x"
    assert a[:].tolist() == ["-", "x", "-"]


def test_vlen_open_checks_dtype(url):
    ndstore.open(url("c"), create=True, shape=(2,), dtype=str).close()
    ndstore.open(url("c"), dtype=str).close()
    with pytest.raises(ndstore.Mismatch, match="dtype string"):
        ndstore.open(url("c"), dtype=bytes)


@pytest.mark.parametrize("codec,fill", [("vlen-utf8", ""), ("vlen-bytes", None), ("vlen-utf8", "zz")])
def test_vlen_zarr_python_both_ways(tmp_path, codec, fill):
    import numcodecs
    path = str(tmp_path / "o.zarr")
    object_codec = numcodecs.VLenBytes() if codec == "vlen-bytes" else numcodecs.VLenUTF8()
    z = zarr.open(path, mode="w", shape=(6,), chunks=(4,), dtype=object, object_codec=object_codec,
                  fill_value=fill)
    kind = bytes if codec == "vlen-bytes" else str
    values = [v.encode() if kind is bytes else v for v in ["a", "\u00e9\u00e9", ""]]
    data = np.empty(3, dtype=object)
    data[:] = values
    z[:3] = data
    a = ndstore.open(path)
    missing = kind() if fill is None else fill
    assert a[:].tolist() == values + [missing] * 3
    four = b"4" if kind is bytes else "4"
    a[4:6] = [four, four]
    back = zarr.open(path, mode="r")[:].tolist()
    assert back[:3] == values and back[4:] == [four, four]
