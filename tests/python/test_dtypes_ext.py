"""The zarr v3 extension types (issue 20) through the Python package: float8/float4 as uint8 bit
patterns with dtype_name, int4/int2 as int8 (range-checked on write), datetime64/timedelta64 with the
array's unit, read back from zarr v2 <M8[ns] and zarr v3 numpy.datetime64 arrays."""
import json
import os

import numpy as np
import pytest

import ndstore
from ndstore import _dtypes


def test_every_library_dtype_has_a_numpy_dtype():
    for name in ndstore.dtypes:
        if name in _dtypes.STRING_KINDS:  # the width is per array (numpy_dtype_of)
            assert _dtypes.numpy_dtype(name).kind == _dtypes.STRING_KINDS[name]
            continue
        assert _dtypes.numpy_dtype(name).itemsize >= 1


def test_float8_bit_patterns(url):
    a = ndstore.open(url("f8", "zarr3"), create=True, shape=(4,), chunks=(2,), dtype="float8_e4m3fn")
    assert a.dtype == np.uint8 and a.dtype_name == "float8_e4m3fn"
    a[:] = np.array([0x38, 0x7F, 0x7E, 0xFE], dtype=np.uint8)  # 1.0, NaN, 448, -448
    assert a[:].tolist() == [0x38, 0x7F, 0x7E, 0xFE]
    assert a.metadata["data_type"] == "float8_e4m3fn"


def test_int4_one_per_byte(url):
    a = ndstore.open(url("i4", "zarr3"), create=True, shape=(4,), chunks=(2,), dtype="int4", fill_value=-8)
    assert a.dtype == np.int8 and a.dtype_name == "int4"
    assert a[:].tolist() == [-8, -8, -8, -8]
    a[:2] = [7, -1]
    assert a[:].tolist() == [7, -1, -8, -8]
    with pytest.raises(TypeError, match=r"outside \[-8, 7\]"):
        a[0] = 8
    u = ndstore.open(url("u2", "zarr3"), create=True, shape=(2,), chunks=(2,), dtype="uint2")
    with pytest.raises(TypeError):
        u[:] = [4, 0]


def test_datetime64_zarr2_unit(url, tmp_path):
    path = tmp_path / "dt"
    path.mkdir()
    (path / ".zarray").write_text(json.dumps({
        "zarr_format": 2, "shape": [3], "chunks": [2], "dtype": "<M8[ns]", "compressor": None,
        "fill_value": -9223372036854775808, "order": "C", "filters": None}))
    a = ndstore.open("file://%s" % path)
    assert a.dtype == np.dtype("M8[ns]") and a.dtype_name == "datetime64"
    assert np.isnat(a[:]).all()  # the NaT fill
    values = np.array(["2024-01-01T00:00:00", "NaT", "1970-01-01T00:00:01"], dtype="M8[ns]")
    a[:] = values
    assert (a[:].view("i8") == values.view("i8")).all()


def test_timedelta64_zarr3_scale(url, tmp_path):
    path = tmp_path / "td"
    path.mkdir()
    (path / "zarr.json").write_text(json.dumps({
        "zarr_format": 3, "node_type": "array", "shape": [2],
        "data_type": {"name": "numpy.timedelta64", "configuration": {"unit": "s", "scale_factor": 10}},
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [2]}},
        "chunk_key_encoding": {"name": "default"}, "fill_value": "NaT",
        "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}]}))
    a = ndstore.open("file://%s|zarr3:" % path)
    assert a.dtype == np.dtype("m8[10s]")
    a[:] = np.array([3, -1], dtype="m8[10s]")
    assert a[:].view("i8").tolist() == [3, -1]


def test_dtype_names():
    assert _dtypes.dtype_name("int4") == "int4"
    assert _dtypes.dtype_name(np.dtype("M8[ns]")) == "datetime64[ns]"
    with pytest.raises(TypeError, match="no unit"):
        _dtypes.dtype_name(np.dtype("M8"))
    assert _dtypes.time_unit({"dtype": "<m8[10s]"}) == "10s"
    assert _dtypes.time_unit({"data_type": {"name": "numpy.datetime64",
                                            "configuration": {"unit": "\u03bcs", "scale_factor": 1}}}) == "us"


@pytest.mark.parametrize("fmt", ["zarr", "zarr3"])
def test_create_datetime_with_unit(url, fmt):
    u = url("cdt", fmt)
    a = ndstore.open(u, create=True, shape=(3,), chunks=(2,), dtype="M8[ms]", fill_value="NaT" if fmt == "zarr3"
                     else -9223372036854775808)
    assert a.dtype == np.dtype("M8[ms]")
    assert np.isnat(a[:]).all()
    a[1] = np.datetime64("2001-02-03T04:05:06.007")
    assert str(a[1]) == "2001-02-03T04:05:06.007"
    b = ndstore.open(u, dtype="datetime64[ms]")
    assert b.dtype == a.dtype
    with pytest.raises(ndstore.Mismatch):
        ndstore.open(u, dtype="M8[s]")
