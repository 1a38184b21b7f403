"""Transactions: the with-block (commit on exit, abort on exception), explicit txn=, atomic visibility,
prepare tokens from three processes committed by the parent."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ndstore


def versioned(tmp_path, path="", fmt="zarr3"):
    return "file://%s/ckpt/|versioned:%s|%s:" % (tmp_path, path, fmt)


def test_atomic_commit_visible_all_at_once(tmp_path):
    store = "file://%s/ckpt/" % tmp_path
    before = ndstore.current_version(store)
    with ndstore.Transaction("atomic") as t:
        a = ndstore.open(versioned(tmp_path, "a/"), create=True, shape=(8, 8), chunks=(4, 4), dtype="int32")
        b = ndstore.open(versioned(tmp_path, "b/"), create=True, shape=(6,), chunks=(2,), dtype="float64")
        a[...] = np.arange(64, dtype=np.int32).reshape(8, 8)
        b[::2] = 1.5
        a.attrs.update({"step": 7})
        # nobody outside the transaction sees anything yet: not the keys, not the array (opened from
        # another thread, which does not inherit the current transaction)
        with ndstore.kvstore_open(store + "|versioned:") as kv:
            assert kv.list() == []
        with pytest.raises(ndstore.NotFound):
            ndstore.executor.submit(ndstore.open, versioned(tmp_path, "a/")).result()
        assert ndstore.current_version(store) == before
        np.testing.assert_array_equal(a[2], np.arange(16, 24))  # the transaction sees its own writes
    assert t.ended
    with pytest.raises(ndstore.Poisoned, match="open it again"):
        a[0]  # bound to the ended transaction
    assert ndstore.current_version(store) == before + 1  # one version for all of it
    a2 = ndstore.open(versioned(tmp_path, "a/"))
    np.testing.assert_array_equal(a2[...], np.arange(64).reshape(8, 8))
    assert dict(a2.attrs) == {"step": 7}
    np.testing.assert_array_equal(ndstore.open(versioned(tmp_path, "b/"))[...], [1.5, 0, 1.5, 0, 1.5, 0])


def test_exception_aborts_nothing_visible(tmp_path):
    store = "file://%s/ckpt/" % tmp_path
    with pytest.raises(RuntimeError, match="boom"):
        with ndstore.Transaction("atomic"):
            a = ndstore.open(versioned(tmp_path, "x/"), create=True, shape=(4,), chunks=(2,), dtype="uint8")
            a[...] = 3
            raise RuntimeError("boom")
    assert ndstore.current_version(store) == 0
    with pytest.raises(ndstore.NotFound):
        ndstore.open(versioned(tmp_path, "x/"))
    assert ndstore.current_transaction() is None


def test_isolated_and_explicit_txn(tmp_path):
    u = "file://%s/plain|zarr:" % tmp_path
    a = ndstore.open(u, create=True, shape=(10,), chunks=(3,), dtype="int64")
    t = ndstore.Transaction("isolated")
    a.write(np.s_[2:5], np.array([1, 2, 3]), txn=t)
    np.testing.assert_array_equal(a.read(np.s_[0:6], txn=t), [0, 0, 1, 2, 3, 0])  # sees its staged writes
    np.testing.assert_array_equal(a[0:6], 0)                                         # others do not
    a.close()  # deferred: the transaction holds the array until it ends
    assert t.memory > 0
    t.commit()
    np.testing.assert_array_equal(ndstore.open(u)[0:6], [0, 0, 1, 2, 3, 0])
    with pytest.raises(ValueError, match="closed"):
        a[0]


def test_atomic_on_file_store_unsupported(tmp_path):
    u = "file://%s/f|zarr:" % tmp_path
    ndstore.open(u, create=True, shape=(4,), chunks=(2,), dtype="uint8").close()
    t = ndstore.Transaction("atomic")
    with t:
        a = ndstore.open(u)
        a[...] = 1
        with pytest.raises(ndstore.Unsupported) as info:
            t.commit()
    assert "atomic" in str(info.value) or "multi-key" in str(info.value)
    np.testing.assert_array_equal(ndstore.open(u)[...], 0)


def test_memory_limit(tmp_path):
    u = "file://%s/lim|zarr:" % tmp_path
    a = ndstore.open(u, create=True, shape=(1000,), chunks=(1000,), dtype="float64")
    t = ndstore.Transaction("isolated", memory_limit=1000)
    with pytest.raises(ndstore.Limit):
        a.write(np.s_[...], 1.0, txn=t)
    with pytest.raises(ndstore.Poisoned):
        t.commit()
    with pytest.raises(ValueError, match="mode"):
        ndstore.Transaction("eventual")


def test_write_key(tmp_path):
    store = "file://%s/ckpt/|versioned:" % tmp_path
    with ndstore.Transaction("atomic") as t:
        a = ndstore.open(versioned(tmp_path, "w/"), create=True, shape=(4,), chunks=(4,), dtype="uint8")
        a[...] = 2
        t.write_key(store, "DONE", b"ok")
    with ndstore.kvstore_open(store) as kv:
        assert kv.read("DONE") == b"ok"
        assert "w/zarr.json" in kv.list("w/")


CHILD = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    import numpy as np, ndstore
    url, rank = sys.argv[2], int(sys.argv[3])
    t = ndstore.Transaction("atomic")
    with t:
        a = ndstore.open(url, create=True, shape=(6, 4), chunks=(2, 4), dtype="int32")
        a[2 * rank:2 * rank + 2] = np.full((2, 4), rank + 1, dtype=np.int32)
        print(t.prepare())
""")


def test_prepare_tokens_from_three_processes(tmp_path):
    store = "file://%s/ckpt/" % tmp_path
    url = versioned(tmp_path, "model/w/")
    pydir = os.path.join(os.environ.get("NDS_BUILD", os.path.join(os.path.dirname(__file__), "..", "..", "build")),
                         "python")
    procs = [subprocess.Popen(["/usr/bin/python3", "-c", CHILD, os.path.abspath(pydir), url, str(r)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(3)]
    tokens = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        tokens.append(out.strip().splitlines()[-1])
    assert ndstore.current_version(store) == 0  # prepared parts are invisible
    with pytest.raises(ndstore.NotFound):
        ndstore.open(url)
    version = ndstore.commit(store, tokens, message="step 1", metadata={"step": 1})
    assert version == 1
    np.testing.assert_array_equal(ndstore.open(url)[...], np.repeat([1, 2, 3], 8).reshape(6, 4))
    entry = ndstore.log(store)[0]
    assert entry["message"] == "step 1" and entry["metadata"] == {"step": 1} and entry["version"] == 1


def test_open_with_explicit_txn(tmp_path):
    url = versioned(tmp_path, "e/")
    t = ndstore.Transaction("atomic")
    a = ndstore.open(url, create=True, shape=(4,), chunks=(2,), dtype="uint16", txn=t)
    assert ndstore.current_transaction() is None
    a[...] = 9
    with pytest.raises(ndstore.NotFound):
        ndstore.open(url)  # outside the transaction: not there yet
    t.commit()
    np.testing.assert_array_equal(ndstore.open(url)[...], [9, 9, 9, 9])
    with pytest.raises(TypeError, match="txn"):
        ndstore.open(url, txn="atomic")
    with pytest.raises(ndstore.Poisoned):
        ndstore.open(url, txn=t)  # ended


def test_write_by_reference(tmp_path):
    """Whole chunks are staged as references (no memory counted) and the transaction keeps the data
    alive: the caller may drop its name before the commit."""
    url = versioned(tmp_path, "r/", "zarr")
    t = ndstore.Transaction("atomic")
    a = ndstore.open(url, create=True, shape=(6, 8), chunks=(2, 8), dtype="uint16", codec="none", txn=t)
    data = np.arange(48, dtype=np.uint16).reshape(6, 8)
    metadata = t.memory  # the staged array metadata
    a.write(np.s_[0:4], data[0:4], by_reference=True)
    assert t.memory == metadata
    a.write(np.s_[4:6, 1:3], 7, by_reference=True)  # not whole chunks: copied
    assert t.memory > metadata
    want = data.copy()
    want[4:6, 1:3] = 7
    want[4:6, [0, 3, 4, 5, 6, 7]] = 0
    del data
    np.testing.assert_array_equal(a[...], want)  # read your writes
    token = t.prepare()
    ndstore.commit("file://%s/ckpt/" % tmp_path, [token])
    np.testing.assert_array_equal(ndstore.open(url)[...], want)
    b = ndstore.open("file://%s/plain|zarr:" % tmp_path, create=True, shape=(4,), chunks=(2,),
                     dtype="uint16")
    with pytest.raises(ValueError, match="only inside a transaction"):
        b.write(np.s_[...], np.zeros(4, np.uint16), by_reference=True)
