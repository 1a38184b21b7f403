"""The versioned store's operations, named as the command line names them (docs/cli.md "log, tag, diff,
commit and gc"). ``url`` names the store, with or without its ``|versioned:`` segment
("file:///ckpt/" means "file:///ckpt/|versioned:"); a KvStore opened on a versioned store works too. A
version is read by opening "file:///ckpt/|versioned:@N/path/|zarr3:" (or "@TAG/"), read-only."""
import datetime
import json
import numbers

from . import _ndstore
from ._kvstore import KvStore, kvstore_open

_DIFF_KINDS = ("added", "removed", "changed")


class _Store:
    """The versioned kvstore of url (opened here, closed on exit) or of a KvStore (borrowed)."""

    def __init__(self, url):
        if isinstance(url, KvStore):
            self.kv, self.owned = url, False
            return
        if not isinstance(url, str):
            raise TypeError("url: expected a URL or an ndstore.KvStore, got %s" % type(url).__name__)
        if not url.strip():
            raise ValueError("url: is empty")
        self.kv = kvstore_open(url if "|versioned:" in url else url + "|versioned:")
        self.owned = True

    def __enter__(self):
        return self.kv._kv

    def __exit__(self, *exc):
        if self.owned:
            self.kv.close()
        return False


def _version_arg(v, what):
    if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < 0:
        raise ValueError("%s: expected a version number >= 0, got %r" % (what, v))
    return int(v)


def current_version(url):
    """The latest version of the store (0: nothing committed yet)."""
    with _Store(url) as kv:
        return _ndstore.versioned_refresh(kv)


def commit(url, tokens, message=None, metadata=None):
    """Publishes prepared parts (``Transaction.prepare()`` tokens, from any processes) as one version.
    metadata: a dict recorded with the version (JSON). Returns the new version number."""
    if isinstance(tokens, str):
        tokens = [tokens]
    tokens = list(tokens)
    if not tokens:
        raise ValueError("tokens: at least one token is needed")
    if metadata is not None and not isinstance(metadata, dict):
        raise TypeError("metadata: expected a dict, got %s" % type(metadata).__name__)
    if message is not None and not isinstance(message, str):
        raise TypeError("message: expected a str, got %s" % type(message).__name__)
    with _Store(url) as kv:
        _ndstore.commit_prepared(kv, tokens, message, json.dumps(metadata) if metadata is not None else None)
        return _ndstore.versioned_current(kv)


def log(url, newest=0):
    """The versions newest first (from newest, 0: the latest), each a dict: version, time (a UTC
    datetime), time_ns, message (or None), metadata (a dict or None), keys, tags (the names of the
    tags naming it)."""
    newest = _version_arg(newest, "newest")
    with _Store(url) as kv:
        entries = _ndstore.versioned_log(kv, newest)
        named = {}
        for name, version in _ndstore.versioned_tags(kv):
            named.setdefault(version, []).append(name)
    out = []
    for version, time_ns, message, metadata, keys in entries:
        out.append({
            "version": version,
            "time": datetime.datetime.fromtimestamp(time_ns / 1e9, tz=datetime.timezone.utc),
            "time_ns": time_ns,
            "message": message,
            "metadata": json.loads(metadata) if metadata is not None else None,
            "keys": keys,
            "tags": named.get(version, []),
        })
    return out


def tags(url):
    """{name: version} of every tag of the store, by name."""
    with _Store(url) as kv:
        return dict(_ndstore.versioned_tags(kv))


def tag(url, name, version=0):
    """Names version (0: the latest) with tag name; tags never move (Conflict when it exists)."""
    version = _version_arg(version, "version")
    if not isinstance(name, str):
        raise TypeError("name: expected a str, got %s" % type(name).__name__)
    with _Store(url) as kv:
        if version == 0:
            _ndstore.versioned_refresh(kv)
        _ndstore.versioned_tag(kv, name, version)


def diff(url, a, b):
    """[(key, "added" | "removed" | "changed")] from version a to version b, in key order."""
    a = _version_arg(a, "a")
    b = _version_arg(b, "b")
    with _Store(url) as kv:
        return [(key, _DIFF_KINDS[kind]) for key, kind in _ndstore.versioned_diff(kv, a, b)]


def _ms(value, what):
    if value is None:
        return -1
    if isinstance(value, datetime.timedelta):
        value = value.total_seconds()
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or value < 0:
        raise ValueError("%s: expected seconds >= 0 or a timedelta, got %r" % (what, value))
    return int(round(value * 1000))


def gc(url, keep_last=None, older_than=None, grace=None, dry_run=False):
    """Deletes what no kept version references. keep_last: keep the newest N versions; older_than: keep
    versions committed less than this ago (seconds or timedelta); grace (default 6 h): never delete what
    became garbage less than this ago. Returns a dict of what it did (versions_kept, versions_collected,
    objects_deleted, bytes_deleted, objects_pending)."""
    if keep_last is None and older_than is None:
        raise ValueError("keep_last, older_than: give at least one")
    if keep_last is not None and (not isinstance(keep_last, numbers.Integral) or keep_last < 1):
        raise ValueError("keep_last: expected a number of versions >= 1, got %r" % (keep_last,))
    with _Store(url) as kv:
        return _ndstore.versioned_gc(kv, int(keep_last or 0), _ms(older_than, "older_than"), _ms(grace, "grace"),
                                     bool(dry_run))
