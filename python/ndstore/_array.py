"""``ndstore.open`` and ``ndstore.Array``: NumPy indexing, reads into caller buffers, futures."""
import collections.abc
import concurrent.futures
import json
import numbers
import os

import numpy as np

from . import _ndstore, _spec, _txn
from ._dtypes import (STRING_KINDS, SUBBYTE_RANGE, VLEN_KINDS, float32_to_bfloat16, numpy_dtype,
                      numpy_dtype_of)
from ._index import select

#: The pool behind read_async / write_async: one thread per CPU (os.cpu_count()). The C calls release the
#: GIL, so these threads overlap I/O and decoding; each call also uses the context's own chunk threads.
executor = concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1,
                                                 thread_name_prefix="ndstore")


class Attributes(collections.abc.MutableMapping):
    """The array's user attributes, read from the store on every access and written through
    nds_array_set_attributes. ``update()`` is one write; ``a.attrs[k] = v`` is one read and one write."""

    def __init__(self, array):
        self._array = array

    def _read(self):
        return json.loads(self._array._call(lambda a: a.get_attributes()))

    def _write(self, attrs):
        text = json.dumps(attrs)
        self._array._call(lambda a: a.set_attributes(text))

    def __getitem__(self, key):
        return self._read()[key]

    def __setitem__(self, key, value):
        attrs = self._read()
        attrs[key] = value
        self._write(attrs)

    def __delitem__(self, key):
        attrs = self._read()
        del attrs[key]
        self._write(attrs)

    def __iter__(self):
        return iter(self._read())

    def __len__(self):
        return len(self._read())

    def update(self, *args, **kw):
        attrs = self._read()
        attrs.update(*args, **kw)
        self._write(attrs)

    def asdict(self):
        return self._read()

    def __repr__(self):
        return repr(self._read())


def _cast_string(value, target):
    """value (str / bytes, or arrays of them) as target (S<n> / U<n>): the same kind only (no implicit
    encoding), and never a silent cut: a value longer than the width is a ValueError."""
    arr = np.asarray(value)
    if arr.dtype.kind != target.kind:
        want = "bytes" if target.kind == "S" else "str"
        raise TypeError("cannot write %s to a %s array: give %s values" % (arr.dtype, target, want))
    if arr.size and arr.dtype.itemsize > target.itemsize:
        longest = int(np.char.str_len(arr).max())
        width = target.itemsize if target.kind == "S" else target.itemsize // 4
        if longest > width:
            raise ValueError("a value of %d %s does not fit %s (width %d)"
                             % (longest, "bytes" if target.kind == "S" else "characters", target, width))
    return arr.astype(target)


def _cast(value, target, dtype_name):
    """value as a NumPy array of target under NumPy's same_kind rule (TypeError for an unsafe cast).
    Python scalars are checked by value (5 fits uint8; 300 and 1.5 do not)."""
    if dtype_name in STRING_KINDS:
        return _cast_string(value, target)
    if dtype_name == "bfloat16":
        arr = np.asarray(value)
        if arr.dtype == np.uint16 or (arr.dtype.kind in "iu" and np.can_cast(value, np.uint16)):
            return arr.astype(np.uint16, copy=False)
        if arr.dtype.kind == "f":
            return float32_to_bfloat16(arr)
        raise TypeError("cannot write %s to a bfloat16 array: give uint16 bit patterns or float values"
                        % arr.dtype)
    if dtype_name in SUBBYTE_RANGE:  # int8/uint8 in memory, but fewer value bits on disk
        arr = _cast(value, target, None)
        lo, hi = SUBBYTE_RANGE[dtype_name]
        if arr.size and (arr.min() < lo or arr.max() > hi):
            raise TypeError("cannot write values outside [%d, %d] to a %s array" % (lo, hi, dtype_name))
        return arr
    if isinstance(value, (numbers.Number, np.generic)) and not isinstance(value, np.ndarray):
        if not np.can_cast(value, target, casting="same_kind"):
            raise TypeError("cannot cast %r to %s under the same_kind rule" % (value, target))
        if target.kind in "iu" and isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, bool):
            info = np.iinfo(target)
            if not info.min <= int(value) <= info.max:
                raise TypeError("cannot cast %r to %s: out of its range [%d, %d] (same_kind casting does not wrap "
                                "scalars)" % (value, target, info.min, info.max))
        return np.asarray(value, dtype=target)
    arr = np.asarray(value)
    if not np.can_cast(arr.dtype, target, casting="same_kind"):
        raise TypeError("cannot cast array data from %s to %s under the same_kind rule" % (arr.dtype, target))
    return arr


def _vlen_elements(value, dtype_name, shape):
    """value broadcast to shape as a flat list (C order) of encoded elements: str for a string array
    (stored as UTF-8), bytes for a bytes array; another type is a TypeError naming it (no implicit
    encoding)."""
    arr = np.empty((), dtype=object)
    if isinstance(value, (str, bytes)):
        arr[()] = value
    else:
        arr = np.asarray(value, dtype=object)
    try:
        arr = np.broadcast_to(arr, shape)
    except ValueError:
        raise ValueError("could not broadcast value of shape %s into the selection of shape %s"
                         % (arr.shape, shape)) from None
    kind = VLEN_KINDS[dtype_name]
    out = []
    for v in arr.ravel(order="C"):
        if not isinstance(v, kind):
            raise TypeError("cannot write %s to a %s array: give %s values"
                            % (type(v).__name__, dtype_name, kind.__name__))
        try:
            out.append(v.encode("utf-8") if kind is str else bytes(v))
        except UnicodeEncodeError as e:
            raise ValueError("a str element is not valid Unicode (%s)" % e) from None
    return out


def _vlen_buffers(elements):
    """The offsets (native uint64, count + 1) and bytes of encoded elements, for write_vlen."""
    offsets = np.zeros(len(elements) + 1, dtype=np.uint64)
    if elements:
        np.cumsum([len(e) for e in elements], out=offsets[1:])
    return offsets, b"".join(elements)


class Array:
    """An open array. Create with ``ndstore.open``. Internally synchronised: any thread may read and write."""

    def __init__(self, c_array, url=None, txn=None):
        self._a = c_array
        self._url = url
        self._txn = txn  # the Transaction it was opened in
        self._pins = []  # Transactions that hold this array until they end
        self._close_pending = False
        name = c_array.dtype_name()
        self._dtype_name = name
        self._dtype = numpy_dtype(name)
        if name in ("datetime64", "timedelta64"):  # the unit is in the metadata: datetime64[ns]
            self._dtype = numpy_dtype_of(name, json.loads(c_array.metadata()))
        if name in STRING_KINDS:  # the width is the array's: S12, U3
            self._dtype = numpy_dtype_of(name, None, c_array.dtype_size())
        self._vlen = name in VLEN_KINDS  # object arrays of str / bytes

    # ---- lifetime ----
    def _pin(self, txn):
        self._pins.append(txn)

    def _unpin(self, txn):
        self._pins = [t for t in self._pins if t is not txn]
        if not self._pins and self._close_pending:
            self._a.close()

    def close(self):
        """Closes the array. Inside a transaction that holds it, the close happens when the transaction
        ends (the C library needs the array until then); the array refuses calls from now on."""
        self._close_pending = True
        if not self._pins:
            self._a.close()

    @property
    def closed(self):
        return self._close_pending or self._a.closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _call(self, fn):
        if self._close_pending:
            raise ValueError("array is closed")
        if self._txn is not None and self._txn.ended:
            # The C array stays bound to its transaction; say what to do rather than the bare status.
            from ._errors import Poisoned
            raise Poisoned("%s: the array was opened in a transaction that has ended (committed, prepared or "
                           "aborted); open it again to use it" % (self._url or "array"), Poisoned.code)
        return fn(self._a)

    # ---- description ----
    @property
    def shape(self):
        return self._call(lambda a: a.shape())

    @property
    def origin(self):
        """Where the array's domain starts in each dimension (a neuroglancer precomputed scale's
        voxel_offset; 0 elsewhere). Indexing is 0-based: a[i] is domain coordinate origin + i."""
        return self._call(lambda a: a.origin())

    @property
    def units(self):
        """Per dimension, (size, unit) of one index step, e.g. (8.0, "nm") for a precomputed scale's
        x at resolution 8; None where the format gives no physical unit."""
        return self._call(lambda a: a.units())

    @property
    def ndim(self):
        return self._a.rank

    @property
    def size(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def dtype(self):
        """NumPy dtype (bfloat16: numpy.uint16, see dtype_name)."""
        return self._dtype

    @property
    def dtype_name(self):
        """The element type's ndstore name ("uint16", "bfloat16", ...)."""
        return self._dtype_name

    @property
    def chunks(self):
        """The chunk shape (for a sharded array: the shard, the unit of writes)."""
        return self._call(lambda a: a.chunks())

    @property
    def read_chunks(self):
        """The read chunk shape (the inner chunk of a sharded array, else the chunk)."""
        return self._call(lambda a: a.read_chunks())

    @property
    def fill_value(self):
        """The fill value as a NumPy scalar of dtype (str / bytes for a string / bytes array)."""
        if self._vlen:
            raw = self._call(lambda a: a.vlen_fill())
            return raw.decode("utf-8") if self._dtype_name == "string" else raw
        return np.frombuffer(self._call(lambda a: a.fill_bytes()), dtype=self._dtype)[0]

    @property
    def format(self):
        """The format driver's name ("zarr", "zarr3", "n5", "neuroglancer_precomputed")."""
        return self._call(lambda a: a.format())

    @property
    def codec(self):
        """The chunk codec's description ("zstd(level=1)")."""
        return self._call(lambda a: a.codec())

    @property
    def spec(self):
        """The spec that reopens this array (dict)."""
        return json.loads(self._call(lambda a: a.spec()))

    @property
    def metadata(self):
        """The format's metadata document (dict), e.g. the .zarray."""
        return json.loads(self._call(lambda a: a.metadata()))

    @property
    def url(self):
        """The URL it was opened with, or None when opened from a JSON spec."""
        return self._url

    @property
    def attrs(self):
        return Attributes(self)

    @property
    def kvstore(self):
        from ._kvstore import KvStore
        return KvStore(self._call(lambda a: a.kvstore()))

    def __len__(self):
        shape = self.shape
        if not shape:
            raise TypeError("len() of a 0-d array")
        return shape[0]

    def __repr__(self):
        if self.closed:
            return "<ndstore.Array closed>"
        return "<ndstore.Array %s shape=%s dtype=%s chunks=%s%s>" % (
            self.format, self.shape, self._dtype_name, self.chunks, " url=%s" % self._url if self._url else "")

    def __array__(self, dtype=None):
        out = self[...]
        return out if dtype is None else out.astype(dtype)

    def resize(self, new_shape):
        """Changes the shape (same rank); elements outside it are dropped, growing again shows fill."""
        if isinstance(new_shape, numbers.Integral):
            new_shape = (new_shape,)
        new_shape = tuple(new_shape)
        if len(new_shape) != self.ndim:
            raise ValueError("new_shape: %d dimensions, the array has %d" % (len(new_shape), self.ndim))
        self._call(lambda a: a.resize(new_shape))

    # ---- I/O ----
    def _io_txn(self, txn):
        if txn is None:
            return None
        if not isinstance(txn, _txn.Transaction):
            raise TypeError("txn: expected an ndstore.Transaction, got %s" % type(txn).__name__)
        if txn is self._txn:
            return None  # opened in it: every call goes through it already
        txn._hold(self)
        return txn._txn

    def read(self, sel=Ellipsis, out=None, txn=None):
        """Reads sel (NumPy basic indexing) into a new C-contiguous ndarray, or into out: any writable
        C-contiguous buffer (ndarray, bytearray, memoryview, ...) of exactly the selection's byte size,
        filled in place without a copy; returns out then."""
        s = select(sel, self.shape)
        c_txn = self._io_txn(txn)
        if self._vlen:
            if out is not None:
                raise TypeError("out=: %s arrays have variable-length elements; read without out"
                                % self._dtype_name)
            buf = self._read_vlen(s, c_txn)
        elif out is not None:
            if s.flips:
                raise IndexError("negative steps are not supported with out=: read with a positive step")
            self._call(lambda a: a.read(s.start, s.stop, s.step, out, c_txn))
            return out
        else:
            buf = np.empty(s.extents, dtype=self._dtype)
            self._call(lambda a: a.read(s.start, s.stop, s.step, buf, c_txn))
        if s.flips:
            buf = np.ascontiguousarray(s.flip_view(buf))
        result = buf.reshape(s.shape)
        # NumPy: an index of integers only (or () on a 0-d array) gives a scalar; "..." keeps an array
        scalar = not s.shape and (s.dropped or (isinstance(sel, tuple) and not sel))
        return result[()] if scalar else result

    def _read_vlen(self, s, c_txn):
        """The selection of a string / bytes array as an object array of its extents."""
        raw_off, data = self._call(lambda a: a.read_vlen(s.start, s.stop, s.step, c_txn))
        off = np.frombuffer(raw_off, dtype=np.uint64).tolist()
        buf = np.empty(len(off) - 1, dtype=object)
        if self._dtype_name == "string":
            buf[:] = [data[off[i]:off[i + 1]].decode("utf-8") for i in range(len(off) - 1)]
        else:
            buf[:] = [data[off[i]:off[i + 1]] for i in range(len(off) - 1)]
        return buf.reshape(s.extents)

    def _write_vlen(self, s, value, c_txn):
        elements = _vlen_elements(value, self._dtype_name, s.shape)
        arr = np.empty(len(elements), dtype=object)
        arr[:] = elements
        arr = np.ascontiguousarray(s.flip_view(arr.reshape(s.extents)))  # C order of the extents
        offsets, data = _vlen_buffers(list(arr.ravel()))
        self._call(lambda a: a.write_vlen(s.start, s.stop, s.step, offsets, data, c_txn))

    def write(self, sel, value, txn=None, by_reference=False):
        """Writes value to sel, broadcast to the selection's shape and cast under NumPy's same_kind rule.
        Only the selected elements are written (steps included): concurrent writers of the elements in
        between lose nothing (each chunk is merged and written conditionally by the C library).

        by_reference=True (inside a transaction only): chunks that value covers whole are staged as
        references into it instead of copies (nds_array_write_ref): no second copy of large data, and
        none of it counted in the transaction's memory. The transaction keeps value alive; the caller
        must not change it until the transaction is committed, prepared or aborted."""
        s = select(sel, self.shape)
        if self._vlen:
            return self._write_vlen(s, value, self._io_txn(txn))
        owner = txn if txn is not None else self._txn
        if by_reference and owner is None:
            raise ValueError("write(by_reference=True): only inside a transaction (it keeps the buffer "
                             "until it ends); open the array in one or pass txn=")
        data = self._dense(s, value)
        c_txn = self._io_txn(txn)
        if by_reference:
            owner._keep(data)
        self._call(lambda a: a.write(s.start, s.stop, s.step, data, c_txn, by_reference))

    def _dense(self, s, value):
        """value as the C-contiguous ndarray of selection s (broadcast, cast, flipped)."""
        arr = _cast(value, self._dtype, self._dtype_name)
        try:
            arr = np.broadcast_to(arr, s.shape)
        except ValueError:
            raise ValueError("could not broadcast value of shape %s into the selection of shape %s"
                             % (np.shape(arr), s.shape)) from None
        arr = s.flip_view(arr.reshape(s.extents))
        return np.ascontiguousarray(arr, dtype=self._dtype)

    def __getitem__(self, sel):
        return self.read(sel)

    def __setitem__(self, sel, value):
        self.write(sel, value)

    def read_async(self, sel=Ellipsis, out=None):
        """read() on the module's executor; a concurrent.futures.Future of the ndarray (or out)."""
        return executor.submit(self.read, sel, out)

    def write_async(self, sel, value):
        """write() on the module's executor; a concurrent.futures.Future of None. value is copied into
        the request first, so the caller may change it once this returns."""
        s = select(sel, self.shape)
        if self._vlen:  # str / bytes elements are immutable: a copy of the array of them suffices
            snapshot = np.array(np.broadcast_to(np.asarray(value, dtype=object), s.shape), dtype=object)
            return executor.submit(self.write, sel, snapshot)
        arr = _cast(value, self._dtype, self._dtype_name)
        snapshot = np.array(np.broadcast_to(arr, s.shape), dtype=self._dtype)
        return executor.submit(self.write, sel, snapshot)


def open(spec_or_url, *, create=False, open=True, delete_existing=False, shape=None, dtype=None, chunks=None,
         codec=None, fill_value=None, format=None, txn=None, context=None):
    """Opens (or creates) an array; see docs/python.md.

    spec_or_url: a URL ("file:///d/a.zarr|zarr:", "/d/a.zarr", "memory://x/|zarr3:"), JSON text, "@spec.json"
    or a dict. With create=True, shape, dtype, chunks, codec ("zstd:1", "blosc:lz4:5", "none") and fill_value
    make the metadata of the format (zarr v2 unless the URL, the spec or format= names another). Opening an
    existing array with shape/dtype/chunks given checks them (ndstore.Mismatch when they differ).
    txn: the Transaction to open it in (default: the current ``with ndstore.Transaction()`` block's).
    context: reserved; must be None (the default context of the process is used).
    """
    if context is not None:
        raise ValueError("context: only None (the default context) is supported")
    from ._dtypes import is_string_dtype
    checked_dtype = dtype
    if dtype is not None and not create and is_string_dtype(dtype):
        dtype = None  # opening only: checked below against the array (no format-neutral name exists)
    text, mode, url = _spec.build(spec_or_url, create, open, delete_existing, shape, dtype, chunks, codec,
                                  fill_value, format)
    if txn is None:
        txn = _txn.current()
    elif not isinstance(txn, _txn.Transaction):
        raise TypeError("txn: expected an ndstore.Transaction, got %s" % type(txn).__name__)
    if txn is not None and txn.ended:
        from ._errors import Poisoned
        raise Poisoned("txn: the transaction has ended (committed, prepared or aborted)", Poisoned.code)
    c_array = _ndstore.array_open(text, mode, txn._txn if txn is not None else None)
    array = Array(c_array, url=url, txn=txn)
    if txn is not None:
        txn._hold(array)
    if text == url and (shape is not None or checked_dtype is not None or chunks is not None):
        _check_opened(array, shape, checked_dtype, chunks)
    return array


def _check_opened(array, shape, dtype, chunks):
    from ._dtypes import dtype_name
    from ._errors import Mismatch
    wrong = []
    if shape is not None and tuple(_spec._shape_list(shape, "shape")) != array.shape:
        wrong.append("shape %s (asked %s)" % (array.shape, tuple(shape)))
    # datetimes compare with their unit: the array's "datetime64" + its NumPy dtype's "[ns]"
    have = array.dtype.name if array.dtype.kind in "Mm" else array.dtype_name
    if dtype is not None and array.dtype.kind in "SU":  # strings compare as NumPy dtypes (U5)
        asked = np.dtype(dtype)
        if asked.newbyteorder("=") != array.dtype:
            wrong.append("dtype %s (asked %s)" % (array.dtype, asked))
    elif dtype is not None and dtype_name(dtype) != have:
        wrong.append("dtype %s (asked %s)" % (have, dtype_name(dtype)))
    if chunks is not None and tuple(_spec._shape_list(chunks, "chunks")) != array.chunks:
        wrong.append("chunks %s (asked %s)" % (array.chunks, tuple(chunks)))
    if wrong:
        array.close()
        raise Mismatch("%s: the existing array has %s" % (array.url, ", ".join(wrong)), Mismatch.code)
