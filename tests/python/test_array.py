"""ndstore.open / Array: creation, description, NumPy indexing checked against NumPy, writes with
broadcasting and casting, out= buffers, resize, attributes."""
import json

import numpy as np
import pytest

import ndstore

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
          "float32", "float64", "complex64", "complex128"]


def random_values(rng, shape, dtype):
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(max(info.min, -1000), min(info.max, 1000), size=shape, endpoint=True).astype(dt)
    if dt.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    return rng.standard_normal(shape).astype(dt)


def random_index(rng, n):
    """An integer (maybe negative) or a slice (maybe with a step, maybe negative, maybe past the end)."""
    kind = rng.integers(0, 5)
    if kind == 0:
        return int(rng.integers(-n, n))
    if kind == 1:
        return slice(None)
    lo = int(rng.integers(-n - 2, n + 2))
    hi = int(rng.integers(-n - 2, n + 3))
    step = int(rng.integers(1, 4)) * (1 if kind != 4 else -1)
    return slice(lo if rng.integers(0, 4) else None, hi if rng.integers(0, 4) else None,
                 step if kind >= 3 else None)


def random_key(rng, shape):
    key = [random_index(rng, n) for n in shape]
    k = int(rng.integers(0, len(shape) + 1))
    if rng.integers(0, 4) == 0:  # an ellipsis standing for dimensions i..j-1
        i = int(rng.integers(0, len(shape) + 1))
        j = int(rng.integers(i, len(shape) + 1))
        return tuple(key[:i]) + (Ellipsis,) + tuple(key[j:])
    return tuple(key[:k])  # fewer indices than dimensions


def test_create_describe_reopen(url):
    u = url("a")
    a = ndstore.open(u, create=True, shape=(30, 40), chunks=(8, 16), dtype="int32", codec="zstd:1", fill_value=-3)
    assert a.shape == (30, 40) and a.ndim == 2 and a.chunks == (8, 16)
    assert a.dtype == np.dtype(np.int32) and a.dtype_name == "int32"
    assert a.fill_value == -3 and a.format == "zarr" and a.url == u
    md = a.metadata
    assert md["compressor"] == {"id": "zstd", "level": 1} and md["dtype"] == "<i4" and md["fill_value"] == -3
    assert a.spec["driver"] == "zarr"
    assert (a[...] == -3).all()
    spec = a.spec
    a.close()
    assert a.closed
    with ndstore.open(u) as b:  # format detected
        assert b.shape == (30, 40) and b.fill_value == -3
    with ndstore.open(json.dumps(spec)) as c:  # the spec reopens it
        assert c.chunks == (8, 16)
    with ndstore.open(spec) as d:  # as a dict too
        assert d.dtype_name == "int32"


def test_same_metadata_as_cli(url, tmp_path):
    """open(create=True, ...) writes what `ndstore create --shape --chunks --dtype --codec` writes."""
    import os
    import subprocess
    cli = os.path.join(os.environ.get("NDS_BUILD", os.path.join(os.path.dirname(__file__), "..", "..", "build")),
                       "ndstore")
    if not os.path.exists(cli):
        pytest.skip("no ndstore CLI in the build")
    for codec in ["zstd:1", "blosc:lz4:5", "none", "gzip:1"]:
        ndstore.open(url("py"), create=True, delete_existing=True, shape=(100, 50), chunks=(10, 25),
                     dtype="float32", codec=codec).close()
        subprocess.run([cli, "create", str(tmp_path / "cli"), "--shape", "100,50", "--chunks", "10,25",
                        "--dtype", "float32", "--codec", codec, "--delete-existing"], check=True,
                       stdout=subprocess.DEVNULL)
        py = json.loads((tmp_path / "py" / ".zarray").read_text())
        cl = json.loads((tmp_path / "cli" / ".zarray").read_text())
        assert py == cl, codec


def test_formats_and_codecs(url):
    for fmt in ["zarr", "zarr3", "n5"]:
        a = ndstore.open(url("f_" + fmt, fmt), create=True, shape=(9, 7), chunks=(4, 4), dtype="uint16",
                         codec="zstd:1")
        a[...] = np.arange(63, dtype=np.uint16).reshape(9, 7)
        assert a.format == fmt
        np.testing.assert_array_equal(ndstore.open(url("f_" + fmt, fmt))[2:5, ::3],
                                      np.arange(63).reshape(9, 7)[2:5, ::3])
    b = ndstore.open(url("fmt", None), create=True, shape=(4,), chunks=(2,), dtype="uint8", format="zarr3")
    assert b.format == "zarr3"


@pytest.mark.parametrize("dtype", DTYPES)
def test_dtypes_round_trip(url, dtype):
    rng = np.random.default_rng(7)
    a = ndstore.open(url(dtype), create=True, shape=(13, 6), chunks=(5, 4), dtype=dtype)
    assert a.dtype == np.dtype(dtype) and a.dtype_name == dtype
    v = random_values(rng, (13, 6), dtype)
    a[...] = v
    np.testing.assert_array_equal(a[...], v)
    np.testing.assert_array_equal(ndstore.open(url(dtype))[...], v)


def test_bfloat16(url):
    a = ndstore.open(url("bf", "zarr3"), create=True, shape=(8,), chunks=(4,), dtype="bfloat16")
    assert a.dtype == np.uint16 and a.dtype_name == "bfloat16"
    bits = np.array([0x3F80, 0xC000, 0x7FC0, 0, 1, 0x8000, 0x7F80, 0x4049], dtype=np.uint16)
    a[...] = bits
    np.testing.assert_array_equal(a[...], bits)
    # float values are converted with round-to-nearest-even
    f = np.array([1.0, -2.0, np.nan, 0.0, 1.00390625, 1.01171875, np.inf, 3.140625], dtype=np.float32)
    a[...] = f
    got = a[...]
    # 1 + 2^-8 is halfway between 1.0 (even) and 1 + 2^-7: rounds to 1.0; 1 + 3 * 2^-8 rounds up to 1 + 2^-6
    np.testing.assert_array_equal(got[[0, 1, 3, 4, 5, 6, 7]],
                                  np.array([0x3F80, 0xC000, 0, 0x3F80, 0x3F82, 0x7F80, 0x4049], dtype=np.uint16))
    assert np.isnan(ndstore.bfloat16_to_float32(got[2:3]))[0]
    with pytest.raises(TypeError, match="bfloat16"):
        a[0] = 1 + 2j


def test_indexing_against_numpy(url):
    """A few hundred random selections on random shapes, chunkings and dtypes, read and written."""
    rng = np.random.default_rng(19)
    cases = 0
    for t in range(12):
        rank = int(rng.integers(1, 5))
        shape = tuple(int(rng.integers(1, 12)) for _ in range(rank))
        chunks = tuple(int(rng.integers(1, n + 2)) for n in shape)
        dtype = DTYPES[int(rng.integers(0, len(DTYPES)))]
        a = ndstore.open(url("r%d" % t), create=True, shape=shape, chunks=chunks, dtype=dtype)
        ref = random_values(rng, shape, dtype)
        a[...] = ref
        for _ in range(25):
            key = random_key(rng, shape)
            expect = ref[key]
            got = a[key]
            assert np.shape(got) == np.shape(expect), (shape, key)
            np.testing.assert_array_equal(got, expect, err_msg=str((shape, chunks, key)))
            if isinstance(got, np.ndarray):
                assert got.flags.c_contiguous and got.dtype == ref.dtype
            # write the same selection with new values (and sometimes a broadcast scalar)
            if rng.integers(0, 3) == 0:
                value = random_values(rng, (), dtype)[()]
            else:
                value = random_values(rng, np.shape(expect), dtype)
            ref[key] = value
            a[key] = value
            cases += 1
        np.testing.assert_array_equal(a[...], ref, err_msg=str((shape, chunks)))
    assert cases == 300


def test_broadcast_and_cast(url):
    a = ndstore.open(url("b"), create=True, shape=(4, 5, 6), chunks=(2, 2, 2), dtype="float64")
    a[...] = 1.5                                   # scalar
    a[1] = np.arange(6.0)                          # lower rank, broadcast over dimension 1
    a[2, :, 0] = np.arange(5, dtype=np.float32)    # safe cast
    a[3] = np.arange(5.0).reshape(5, 1)            # broadcast over the last dimension
    ref = np.full((4, 5, 6), 1.5)
    ref[1] = np.arange(6.0)
    ref[2, :, 0] = np.arange(5)
    ref[3] = np.arange(5.0).reshape(5, 1)
    np.testing.assert_array_equal(a[...], ref)
    with pytest.raises(ValueError, match="broadcast"):
        a[0] = np.zeros((3, 3))
    i = ndstore.open(url("i"), create=True, shape=(4,), chunks=(2,), dtype="uint8")
    i[0] = 5
    i[1:3] = np.array([1, 2], dtype=np.uint16)      # same kind, narrower: allowed as NumPy's same_kind does
    with pytest.raises(TypeError, match="same_kind"):
        i[0] = 1.5                                  # float into an integer array
    with pytest.raises(TypeError, match="same_kind"):
        i[:] = np.zeros(4, dtype=np.float32)
    with pytest.raises(TypeError, match="out of its range"):
        i[0] = 300                                  # does not fit
    np.testing.assert_array_equal(i[...], [5, 1, 2, 0])


def test_steps_write_only_selected(url):
    a = ndstore.open(url("s"), create=True, shape=(20, 9), chunks=(7, 4), dtype="int16", fill_value=-1)
    a[1::3, ::2] = 7
    ref = np.full((20, 9), -1, dtype=np.int16)
    ref[1::3, ::2] = 7
    np.testing.assert_array_equal(a[...], ref)
    a[::-2, 8] = np.arange(10, dtype=np.int16)
    ref[::-2, 8] = np.arange(10)
    np.testing.assert_array_equal(a[...], ref)
    np.testing.assert_array_equal(a[::-3, ::-2], ref[::-3, ::-2])


def test_out_of_range_and_bad_indices(url):
    a = ndstore.open(url("o"), create=True, shape=(5, 6), chunks=(2, 2), dtype="uint8")
    with pytest.raises(IndexError, match=r"dimension 1: index 6 is out of bounds \[-6, 6\)"):
        a[0, 6]
    with pytest.raises(IndexError, match=r"dimension 0: index -6 is out of bounds"):
        a[-6] = 1
    with pytest.raises(IndexError, match="too many indices"):
        a[0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        a[..., ...]
    with pytest.raises(IndexError, match="fancy"):
        a[[0, 1]]
    with pytest.raises(IndexError, match="newaxis"):
        a[None]
    assert a[7:9].shape == (0, 6)  # clipped as NumPy clips
    a[7:9] = 3  # an empty selection writes nothing


def test_read_into_buffers(url):
    a = ndstore.open(url("out"), create=True, shape=(6, 8), chunks=(4, 4), dtype="uint16")
    ref = np.arange(48, dtype=np.uint16).reshape(6, 8)
    a[...] = ref
    out = np.zeros((2, 8), dtype=np.uint16)
    assert a.read(np.s_[1:3], out=out) is out
    np.testing.assert_array_equal(out, ref[1:3])
    ba = bytearray(2 * 4 * 2)
    a.read(np.s_[2:4, ::2], out=ba)
    np.testing.assert_array_equal(np.frombuffer(ba, dtype=np.uint16).reshape(2, 4), ref[2:4, ::2])
    big = np.zeros(100, dtype=np.uint8)
    mv = memoryview(big)[10:26]
    a.read(np.s_[5, :], out=mv)
    np.testing.assert_array_equal(big[10:26].view(np.uint16), ref[5])
    with pytest.raises(ValueError, match="expected 32 bytes, got 30"):
        a.read(np.s_[1:3], out=bytearray(30))
    with pytest.raises(ValueError, match="read-only"):
        a.read(np.s_[1:3], out=bytes(32))
    ro = np.zeros((2, 8), dtype=np.uint16)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        a.read(np.s_[1:3], out=ro)
    with pytest.raises(ValueError, match="not C-contiguous"):
        a.read(np.s_[0:4, 0:2], out=np.zeros((2, 4), dtype=np.uint16).T)
    with pytest.raises(ValueError, match="not C-contiguous"):
        a.read(np.s_[0, 0:4], out=np.zeros(8, dtype=np.uint16)[::2])
    with pytest.raises(TypeError, match="buffer protocol"):
        a.read(np.s_[0], out=[0] * 8)


def test_resize_and_attrs(url):
    a = ndstore.open(url("rs"), create=True, shape=(10, 10), chunks=(4, 4), dtype="uint8")
    a[...] = 9
    a.resize((6, 12))
    assert a.shape == (6, 12)
    np.testing.assert_array_equal(a[:, :10], np.full((6, 10), 9))
    np.testing.assert_array_equal(a[:, 10:], 0)
    with pytest.raises(ValueError, match="new_shape"):
        a.resize((5,))
    assert dict(a.attrs) == {}
    a.attrs["k"] = "v"
    a.attrs.update({"n": 2, "l": [1, 2]})
    del a.attrs["k"]
    assert dict(ndstore.open(url("rs")).attrs) == {"n": 2, "l": [1, 2]}
    assert len(a.attrs) == 2 and "n" in a.attrs


def test_attrs_update_is_one_write(url, monkeypatch):
    a = ndstore.open(url("one"), create=True, shape=(2,), chunks=(2,), dtype="uint8")
    writes = []
    real = ndstore.Attributes._write
    monkeypatch.setattr(ndstore.Attributes, "_write", lambda self, attrs: (writes.append(attrs), real(self, attrs)))
    a.attrs.update({"a": 1, "b": 2, "c": 3})
    assert writes == [{"a": 1, "b": 2, "c": 3}]


def test_open_argument_errors(url):
    with pytest.raises(ValueError, match="chunks: 1 dimensions, but shape has 2"):
        ndstore.open(url("e"), create=True, shape=(4, 4), chunks=(2,), dtype="uint8")
    with pytest.raises(TypeError, match="dtype"):  # (dtype=object now creates a string array: issue 20)
        ndstore.open(url("e"), create=True, shape=(4,), chunks=(2,), dtype="V8")
    with pytest.raises(TypeError, match="codec"):
        ndstore.open(url("e"), create=True, shape=(4,), chunks=(2,), dtype="uint8", codec=5)
    with pytest.raises(ValueError, match="delete_existing"):
        ndstore.open(url("e"), delete_existing=True)
    with pytest.raises(ValueError, match="open, create"):
        ndstore.open(url("e"), open=False)
    with pytest.raises(ValueError, match="format"):
        ndstore.open(url("e", "zarr3"), create=True, shape=(4,), chunks=(2,), dtype="uint8", format="n5")
    with pytest.raises(ValueError, match="spec_or_url: is empty"):
        ndstore.open("  ")
    with pytest.raises(TypeError, match="spec_or_url"):
        ndstore.open(42)
    with pytest.raises(ValueError, match="shape"):
        ndstore.open(url("e"), create=True, shape=(-1,), chunks=(2,), dtype="uint8")
    ndstore.open(url("m"), create=True, shape=(4,), chunks=(2,), dtype="uint8").close()
    with pytest.raises(ndstore.Mismatch, match="shape"):
        ndstore.open(url("m"), shape=(5,))
    with pytest.raises(ndstore.Exists):
        ndstore.open(url("m"), create=True, open=False, shape=(4,), chunks=(2,), dtype="uint8")


def test_rank_zero_and_empty(url):
    z = ndstore.open(url("z"), create=True, shape=(), chunks=(), dtype="float64")
    z[...] = 2.5
    ref = np.array(2.5)
    assert type(z[...]) is np.ndarray and z[...].shape == () and z[...] == ref[...]
    assert type(z[()]) is np.float64 and z[()] == ref[()]
    e = ndstore.open(url("e"), create=True, shape=(0, 5), chunks=(2, 2), dtype="int32")
    assert e[...].shape == (0, 5) and e[:, 1].shape == (0,)
    e[...] = 1  # nothing to write


def test_origin_of_a_precomputed_volume(tmp_path):
    """A precomputed scale's voxel_offset is the array's origin; indexing stays 0-based."""
    spec = {"driver": "neuroglancer_precomputed", "kvstore": "file://%s/pv/" % tmp_path, "create": True,
            "multiscale_metadata": {"type": "image", "data_type": "uint8", "num_channels": 1},
            "scale_metadata": {"size": [8, 4, 2], "voxel_offset": [100, -3, 0], "resolution": [8, 8, 40],
                               "encoding": "raw", "chunk_size": [8, 4, 2]}}
    a = ndstore.open(spec, create=True)
    assert a.origin == (100, -3, 0, 0)
    assert a.units == ((8.0, "nm"), (8.0, "nm"), (40.0, "nm"), None)
    a[1, 2, 1, 0] = 7
    assert ndstore.open("file://%s/pv/" % tmp_path)[1, 2, 1, 0] == 7
    b = ndstore.open("file://%s/z|zarr:" % tmp_path, create=True, shape=(3,), dtype="uint8")
    assert b.origin == (0,)
    assert b.units == (None,)
