"""Transactions: ``ndstore.Transaction`` (include/ndstore/txn.h).

``with ndstore.Transaction("atomic") as t:`` makes ``t`` the current transaction of the running thread or
asyncio task (a contextvars.ContextVar): every ``ndstore.open`` inside the block opens its array in ``t``,
so creating it, its resizes, attribute changes, writes and reads go through ``t``. The block commits on a
normal exit and aborts on an exception. ``txn=t`` arguments (open, read, write) do the same explicitly.

The C library requires every array a transaction touches to stay open until it ends, and the transaction
to outlive every array opened in it. The Transaction holds every such Array until commit, abort or
prepare (an ``Array.close()`` meanwhile is carried out when the transaction ends), and each array opened in
it holds the C transaction.
"""
import contextvars

from . import _ndstore

_current = contextvars.ContextVar("ndstore_transaction", default=None)

_MODES = {"isolated": _ndstore.TXN_ISOLATED, "atomic": _ndstore.TXN_ATOMIC}


def current():
    """The Transaction of the innermost ``with`` block running in this context, or None."""
    return _current.get()


class Transaction:
    """A transaction: writes to one or more arrays (and raw keys) staged in memory, committed together.

    mode: ``"isolated"`` (each chunk committed by itself, no update lost) or ``"atomic"`` (everything in
    one multi-key commit of the store: memory, lmdb, or a versioned store; all or nothing).
    memory_limit: bytes the staged data may take (default 1 GiB); exceeding it raises ``ndstore.Limit``.
    """

    def __init__(self, mode="isolated", memory_limit=None):
        if mode not in _MODES:
            raise ValueError("mode: expected 'isolated' or 'atomic', got %r" % (mode,))
        if memory_limit is not None and (not isinstance(memory_limit, int) or memory_limit < 0):
            raise ValueError("memory_limit: expected a number of bytes >= 0, got %r" % (memory_limit,))
        self.mode = mode
        self._txn = _ndstore.Txn(_MODES[mode], memory_limit or 0)
        self._held = []  # arrays and kvstores the C transaction touches, kept open until it ends
        self._kept = []  # buffers staged by reference (Array.write(by_reference=True)), kept alive
        self._tokens = []

    # ---- bookkeeping used by Array ----
    def _hold(self, obj):
        if self._txn.ended:
            from ._errors import Poisoned
            raise Poisoned("transaction has ended (committed, prepared or aborted)", Poisoned.code)
        if not any(o is obj for o in self._held):
            self._held.append(obj)
            pin = getattr(obj, "_pin", None)
            if pin:
                pin(self)

    def _keep(self, buf):
        self._kept.append(buf)

    def _release(self):
        self._kept = []
        held, self._held = self._held, []
        for obj in held:
            unpin = getattr(obj, "_unpin", None)
            if unpin:
                unpin(self)

    @property
    def ended(self):
        """True once committed, prepared or aborted."""
        return self._txn.ended

    @property
    def memory(self):
        """Bytes of staged data held now."""
        return self._txn.memory()

    def commit(self):
        """Commits every staged write (GIL released). Raises Unsupported (atomic on a store without
        multi-key commit), Conflict, Poisoned or the storage error."""
        try:
            self._txn.commit()
        finally:
            self._release()

    def abort(self):
        """Discards every staged write."""
        try:
            if not self._txn.ended:
                self._txn.abort()
        finally:
            self._release()

    def prepare(self):
        """Stores the staged writes where no reader sees them (a versioned store) and returns the token
        that ``ndstore.commit(url, tokens)`` publishes, from this or any other process."""
        try:
            return self._txn.prepare()
        finally:
            self._release()

    def write_key(self, kvstore, key, data):
        """Stages a raw key write (e.g. a marker) applied with the commit. kvstore: a KvStore or a URL."""
        from ._kvstore import KvStore, kvstore_open
        if not isinstance(kvstore, KvStore):
            kvstore = kvstore_open(kvstore)
        self._hold(kvstore)
        self._txn.write_key(kvstore._kv, key, bytes(data) if not isinstance(data, bytes) else data)

    def __enter__(self):
        self._token = _current.set(self)
        return self

    def __exit__(self, exc_type, exc, tb):
        _current.reset(self._token)
        if self._txn.ended:
            self._release()
        elif exc_type is None:
            self.commit()
        else:
            self.abort()
        return False

    def __del__(self):
        # Abort while the arrays it holds are still open (nds_txn_free after them would be too late).
        txn = getattr(self, "_txn", None)
        if txn is not None and not txn.ended:
            try:
                txn.abort()
            except Exception:
                pass
        if getattr(self, "_held", None):
            self._release()

    def __repr__(self):
        return "<ndstore.Transaction %s%s>" % (self.mode, " ended" if self.ended else "")
