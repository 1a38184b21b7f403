"""Versioned store operations with the CLI's names: log, tag, diff, gc, current_version, and opening a
version by URL ("|versioned:@N/")."""
import datetime

import numpy as np
import pytest

import ndstore


def make_versions(tmp_path):
    store = "file://%s/ckpt/" % tmp_path
    url = store + "|versioned:w/|zarr3:"
    with ndstore.Transaction("atomic"):
        a = ndstore.open(url, create=True, shape=(8,), chunks=(4,), dtype="int16")
        a[...] = 1
    with ndstore.Transaction("atomic"):
        ndstore.open(url)[0:4] = 2
    with ndstore.kvstore_open(store + "|versioned:") as kv:
        kv.write("notes.txt", b"hello")
    return store, url


def test_log_and_current_version(tmp_path):
    store, _ = make_versions(tmp_path)
    assert ndstore.current_version(store) == 3
    assert ndstore.current_version(store + "|versioned:") == 3
    entries = ndstore.log(store)
    assert [e["version"] for e in entries] == [3, 2, 1]
    now = datetime.datetime.now(datetime.timezone.utc)
    for e in entries:
        assert abs((now - e["time"]).total_seconds()) < 60 and isinstance(e["time_ns"], int)
        assert e["keys"] >= 1 and e["message"] is None and e["metadata"] is None
    assert [e["version"] for e in ndstore.log(store, newest=2)] == [2, 1]
    with ndstore.kvstore_open(store + "|versioned:") as kv:
        assert ndstore.current_version(kv) == 3  # a KvStore works as the URL does


def test_open_at_version_and_tag(tmp_path):
    store, url = make_versions(tmp_path)
    old = ndstore.open(store + "|versioned:@1/w/|zarr3:")
    np.testing.assert_array_equal(old[...], np.ones(8))
    np.testing.assert_array_equal(ndstore.open(url)[...], [2, 2, 2, 2, 1, 1, 1, 1])
    with pytest.raises(ndstore.ReadOnly):
        old[0] = 5
    ndstore.tag(store, "first", 1)
    ndstore.tag(store, "latest-ish")
    np.testing.assert_array_equal(ndstore.open(store + "|versioned:@first/w/|zarr3:")[...], np.ones(8))
    with pytest.raises(ndstore.Conflict, match="first"):
        ndstore.tag(store, "first", 2)  # tags never move
    with pytest.raises(ndstore.InvalidArgument):
        ndstore.tag(store, "123")
    with pytest.raises(ndstore.NotFound):
        ndstore.tag(store, "future", 99)
    latest = ndstore.current_version(store)
    assert list(ndstore.tags(store).items()) == [("first", 1), ("latest-ish", latest)]  # by name
    by_version = {e["version"]: e["tags"] for e in ndstore.log(store)}
    assert by_version[1] == ["first"] and by_version[latest] == ["latest-ish"]


def test_diff(tmp_path):
    store, _ = make_versions(tmp_path)
    d = ndstore.diff(store, 1, 2)
    assert d == [("w/c/0", "changed")]
    assert ndstore.diff(store, 2, 3) == [("notes.txt", "added")]
    assert ndstore.diff(store, 3, 1) == [("notes.txt", "removed"), ("w/c/0", "changed")]
    assert ndstore.diff(store + "|versioned:w/", 1, 3) == [("c/0", "changed")]  # narrowed to a path
    with pytest.raises(ndstore.NotFound):
        ndstore.diff(store, 1, 42)
    with pytest.raises(ValueError, match="a: expected a version"):
        ndstore.diff(store, -1, 2)


def test_gc(tmp_path):
    store, url = make_versions(tmp_path)
    dry = ndstore.gc(store, keep_last=1, grace=0, dry_run=True)
    assert set(dry) == {"versions_kept", "versions_collected", "objects_deleted", "bytes_deleted",
                        "objects_pending"}
    res = ndstore.gc(store, keep_last=1, grace=datetime.timedelta(0))
    assert res["versions_kept"] >= 1 and res["versions_collected"] == 2
    np.testing.assert_array_equal(ndstore.open(url)[...], [2, 2, 2, 2, 1, 1, 1, 1])  # the latest is intact
    again = ndstore.gc(store, older_than=3600)  # nothing more to delete; the count is cumulative
    assert again["objects_deleted"] == 0 and again["versions_collected"] == 2
    with pytest.raises(ValueError, match="keep_last, older_than"):
        ndstore.gc(store)
    with pytest.raises(ValueError, match="older_than"):
        ndstore.gc(store, older_than=-5)


def test_commit_argument_errors(tmp_path):
    store = "file://%s/ckpt/" % tmp_path
    with pytest.raises(ValueError, match="tokens"):
        ndstore.commit(store, [])
    with pytest.raises(TypeError, match="metadata"):
        ndstore.commit(store, ["x"], metadata="{}")
    with pytest.raises(ndstore.Error) as info:
        ndstore.commit(store, ["no-such-token"])
    assert info.value.code in (ndstore.InvalidArgument.code, ndstore.NotFound.code) and str(info.value)
