"""ndstore.Error and its subclasses: one per code of include/ndstore/errors.def, each raised by a real
failure where a test can cause one, with the C library's message."""
import os
import pickle
import re

import numpy as np
import pytest

import ndstore

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def errors_def():
    with open(os.path.join(ROOT, "include", "ndstore", "errors.def")) as f:
        text = f.read()
    return [(n, int(v)) for n, v in re.findall(r"^NDS_ERR\((\w+), (-?\d+),", text, re.M)]


def test_one_class_per_code():
    codes = errors_def()
    assert len(codes) >= 19
    names = {"EINVAL": "InvalidArgument", "ENOMEM": "NoMemory", "EIO": "IO", "ENOTFOUND": "NotFound",
             "EEXIST": "Exists", "ECONFLICT": "Conflict", "ECORRUPT": "Corrupt", "EUNSUPPORTED": "Unsupported",
             "EFORMAT": "Format", "ERANGE": "Range", "ELIMIT": "Limit", "EREADONLY": "ReadOnly",
             "ETIMEOUT": "Timeout", "EMISMATCH": "Mismatch", "EPOISONED": "Poisoned", "ENETWORK": "Network",
             "EPERM": "Permission", "EINTERNAL": "Internal"}
    for name, value in codes:
        if value == 0:
            continue
        cls = getattr(ndstore, names[name])
        assert issubclass(cls, ndstore.Error) and cls.code == value, name
        e = cls("what happened", value)
        assert str(e) == "what happened" and e.code == value
        again = pickle.loads(pickle.dumps(e))
        assert type(again) is cls and again.code == value and str(again) == "what happened"
    assert issubclass(ndstore.NotFound, KeyError)
    assert issubclass(ndstore.InvalidArgument, ValueError)
    assert issubclass(ndstore.Range, IndexError)


def check(exc_info, cls, *words):
    e = exc_info.value
    assert type(e) is cls and e.code == cls.code
    for w in words:
        assert w in str(e), (w, str(e))


def test_raised_with_the_library_message(tmp_path):
    base = "file://%s" % tmp_path
    with pytest.raises(ndstore.NotFound) as info:
        ndstore.open(base + "/none|zarr:")
    check(info, ndstore.NotFound, "no array", "none")
    ndstore.open(base + "/a|zarr:", create=True, shape=(4,), chunks=(4,), dtype="uint8", codec="zstd:1").close()
    with pytest.raises(ndstore.Exists) as info:
        ndstore.open(base + "/a|zarr:", create=True, open=False, shape=(4,), chunks=(4,), dtype="uint8")
    check(info, ndstore.Exists)
    with pytest.raises(ndstore.Mismatch) as info:
        ndstore.open(base + "/a|zarr:", create=True, shape=(5,), chunks=(4,), dtype="uint8")
    check(info, ndstore.Mismatch)
    with pytest.raises(ndstore.InvalidArgument) as info:
        ndstore.open(base + "/q|zarr:", create=True, shape=(4,), chunks=(2,), dtype="uint8", codec="zstd:abc")
    check(info, ndstore.InvalidArgument, "zstd:abc")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / ".zarray").write_text("{not json")
    with pytest.raises(ndstore.Format) as info:
        ndstore.open(str(tmp_path / "bad"))
    check(info, ndstore.Format, ".zarray")
    a = ndstore.open(base + "/a|zarr:")
    a[...] = 1
    (tmp_path / "a" / "0").write_bytes(b"garbage!")
    with pytest.raises(ndstore.Corrupt) as info:
        a[...]
    check(info, ndstore.Corrupt, "chunk 0", "zstd")
    with pytest.raises(ndstore.Range) as info:  # the C library's own check (Python checks first)
        a._a.read([0], [9], [1], bytearray(9))
    check(info, ndstore.Range, "outside [0, 4)")


def test_transaction_errors(tmp_path):
    t = ndstore.Transaction("isolated", memory_limit=100)
    a = ndstore.open("file://%s/l|zarr:" % tmp_path, create=True, shape=(1000,), chunks=(1000,), dtype="uint8")
    with pytest.raises(ndstore.Limit) as info:
        a.write(np.s_[...], 1, txn=t)
    check(info, ndstore.Limit)
    with pytest.raises(ndstore.Poisoned) as info:
        t.commit()
    check(info, ndstore.Poisoned)
    t2 = ndstore.Transaction("isolated")
    a.write(np.s_[0:3], 1, txn=t2)
    with pytest.raises(ndstore.Unsupported) as info:  # prepare needs a versioned store
        t2.prepare()
    check(info, ndstore.Unsupported)


def test_versioned_errors(tmp_path):
    store = "file://%s/ckpt/" % tmp_path
    with ndstore.kvstore_open(store + "|versioned:") as kv:
        kv.write("k", b"v")
    ndstore.tag(store, "t1")
    with pytest.raises(ndstore.Conflict) as info:
        ndstore.tag(store, "t1")
    check(info, ndstore.Conflict, "t1")
    with ndstore.kvstore_open(store + "|versioned:@1/") as old:
        assert old.read("k") == b"v"
        with pytest.raises(ndstore.ReadOnly) as info:
            old.write("k", b"w")
        check(info, ndstore.ReadOnly)


def test_network_and_io_errors(tmp_path):
    with pytest.raises((ndstore.Network, ndstore.Timeout)) as info:
        ndstore.kvstore_open("http://127.0.0.1:1/x/").read("k")
    assert "127.0.0.1" in str(info.value)
    (tmp_path / "dir" / "x").mkdir(parents=True)
    with ndstore.kvstore_open("file://%s/" % tmp_path) as kv:
        with pytest.raises(ndstore.IO) as info:
            kv.write("dir", b"y")  # a directory where the value's file goes
    check(info, ndstore.IO, "dir", "Is a directory")


def test_timeout_from_a_silent_server():
    """A server that accepts connections and never answers: the http driver's deadline ends the read."""
    import socket
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    try:
        spec = {"driver": "http", "base_url": "http://127.0.0.1:%d" % listener.getsockname()[1],
                "http_request_deadline": "1s"}
        with ndstore.kvstore_open(spec) as kv:
            with pytest.raises(ndstore.Timeout) as info:
                kv.read("k")
        check(info, ndstore.Timeout, "127.0.0.1", "deadline")
    finally:
        listener.close()


def test_closed_objects():
    kv = ndstore.kvstore_open("memory://closed/")
    kv.close()
    with pytest.raises(ValueError, match="closed"):
        kv.read("k")
