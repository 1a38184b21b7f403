"""Key-value stores (include/ndstore/kvstore.h): ``ndstore.kvstore_open`` and ``ndstore.KvStore``."""
import json

from . import _ndstore


class KvStore:
    """A kvstore handle. Keys are relative to its path. Every call releases the GIL."""

    def __init__(self, kv):
        self._kv = kv

    @property
    def url(self):
        """The store's URL (credentials shown as ***)."""
        return self._kv.url

    @property
    def spec(self):
        """The store's spec as a dict (no credentials)."""
        return json.loads(self._kv.spec_json())

    @property
    def closed(self):
        return self._kv.closed

    def read(self, key):
        """The value of key as bytes, or None when the key does not exist."""
        return self._kv.read(key)

    def write(self, key, data):
        """Writes key = data (bytes-like)."""
        self._kv.write(key, data)

    def delete(self, key):
        """Deletes key (a missing key is not an error)."""
        self._kv.delete(key)

    def list(self, prefix=""):
        """The keys that start with prefix, sorted."""
        return sorted(self._kv.list(prefix))

    def close(self):
        self._kv.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        return "<ndstore.KvStore %s>" % ("closed" if self.closed else self.url)


def kvstore_open(url_or_spec):
    """Opens a kvstore from a URL ("file:///d/", "memory://x/", "file:///ckpt/|versioned:"), JSON text or a
    dict spec."""
    if isinstance(url_or_spec, KvStore):
        return url_or_spec
    if isinstance(url_or_spec, dict):
        url_or_spec = json.dumps(url_or_spec)
    if hasattr(url_or_spec, "__fspath__"):
        url_or_spec = str(url_or_spec.__fspath__())
    if not isinstance(url_or_spec, str):
        raise TypeError("url_or_spec: expected a URL, JSON text or a dict, got %s" % type(url_or_spec).__name__)
    if not url_or_spec.strip():
        raise ValueError("url_or_spec: is empty")
    return KvStore(_ndstore.kvstore_open(url_or_spec))
