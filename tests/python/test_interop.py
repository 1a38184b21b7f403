"""Interop with zarr-python 2.13: arrays written by ndstore read by zarr with equal values, and the other
way round (several dtypes, codecs, fill values, partial edge chunks, attributes)."""
import numpy as np
import pytest

import ndstore

zarr = pytest.importorskip("zarr")
numcodecs = pytest.importorskip("numcodecs")

CASES = [("uint16", "zstd:1"), ("float32", "blosc:lz4:5"), ("int64", "none"), ("complex64", "gzip:1"),
         ("bool", "zstd:3"), ("float64", "blosc:zstd:3:bitshuffle")]


@pytest.mark.parametrize("dtype,codec", CASES)
def test_ndstore_writes_zarr_reads(tmp_path, dtype, codec):
    rng = np.random.default_rng(3)
    path = tmp_path / "nd.zarr"
    a = ndstore.open("file://%s|zarr:" % path, create=True, shape=(37, 21), chunks=(10, 8), dtype=dtype,
                     codec=codec, fill_value=0)
    value = (rng.standard_normal((37, 21)) * 100).astype(dtype)
    a[...] = value
    a[5:9, ::3] = np.zeros((), dtype)  # chunks may hold fill
    value[5:9, ::3] = 0
    a.attrs.update({"written_by": "ndstore"})
    z = zarr.open(str(path), mode="r")
    assert z.shape == (37, 21) and z.chunks == (10, 8) and z.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(z[...], value)
    assert z.attrs["written_by"] == "ndstore"


@pytest.mark.parametrize("dtype,compressor", [("uint8", None), ("int32", "zstd"), ("float64", "blosc"),
                                              ("float16", "zlib")])
def test_zarr_writes_ndstore_reads(tmp_path, dtype, compressor):
    comp = {None: None, "zstd": numcodecs.Zstd(level=2), "blosc": numcodecs.Blosc("lz4", 5),
            "zlib": numcodecs.Zlib(1)}[compressor]
    path = str(tmp_path / "z.zarr")
    z = zarr.open(path, mode="w", shape=(19, 33, 4), chunks=(7, 10, 4), dtype=dtype, compressor=comp,
                  fill_value=3)
    value = (np.random.default_rng(5).standard_normal((19, 33, 4)) * 50).astype(dtype)
    z[:10] = value[:10]  # the rest stays fill
    value[10:] = 3
    z.attrs["written_by"] = "zarr"
    a = ndstore.open(path)
    assert a.shape == (19, 33, 4) and a.chunks == (7, 10, 4) and a.dtype == np.dtype(dtype)
    assert a.fill_value == 3 and a.attrs["written_by"] == "zarr"
    np.testing.assert_array_equal(a[...], value)
    np.testing.assert_array_equal(a[3:17:2, ::-4, 1], value[3:17:2, ::-4, 1])
