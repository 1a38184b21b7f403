"""NumPy basic indexing turned into an nds_box (start, stop, step per dimension, steps >= 1).

Supported: integers (negative ones count from the end), slices with any non-zero step (NumPy's clipping of
starts and stops), ``...``, and fewer indices than dimensions. An integer drops its dimension from the
result, as in NumPy. A negative step selects the same elements as the positive step from the other end,
so the box is the ascending one and the dimension is flipped in memory afterwards (``flips``). ``None``
(newaxis), boolean and integer arrays are refused with IndexError.
"""
import operator

import numpy as np


class Selection:
    """start/stop/step: the box; extents: its shape; dropped: dims given by an integer;
    flips: dims selected with a negative step; shape: the result's shape (NumPy's)."""

    __slots__ = ("start", "stop", "step", "extents", "dropped", "flips", "shape")

    def __init__(self, start, stop, step, extents, dropped, flips):
        self.start, self.stop, self.step = start, stop, step
        self.extents, self.dropped, self.flips = tuple(extents), dropped, flips
        self.shape = tuple(e for d, e in enumerate(extents) if d not in dropped)

    @property
    def size(self):
        n = 1
        for e in self.extents:
            n *= e
        return n

    def flip_view(self, arr):
        """arr (shaped like extents) with the negative-step dimensions reversed (a view)."""
        if not self.flips:
            return arr
        return arr[tuple(slice(None, None, -1) if d in self.flips else slice(None) for d in range(arr.ndim))]


def _expand(key, rank):
    if not isinstance(key, tuple):
        key = (key,)
    n_ellipsis = sum(1 for k in key if k is Ellipsis)
    if n_ellipsis > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if n_ellipsis:
        i = next(i for i, k in enumerate(key) if k is Ellipsis)
        fill = rank - (len(key) - 1)
        key = key[:i] + (slice(None),) * max(fill, 0) + key[i + 1:]
    if len(key) > rank:
        raise IndexError("too many indices: the array has %d dimension%s, %d were given"
                         % (rank, "" if rank == 1 else "s", len(key)))
    return key + (slice(None),) * (rank - len(key))


def select(key, shape):
    """The Selection of NumPy basic index key on an array of shape."""
    rank = len(shape)
    key = _expand(key, rank)
    start, stop, step, extents, dropped, flips = [], [], [], [], set(), set()
    for d, (k, n) in enumerate(zip(key, shape)):
        if isinstance(k, slice):
            try:
                r = range(*k.indices(n))
            except (TypeError, ValueError) as e:
                raise IndexError("dimension %d: invalid slice %r (%s)" % (d, k, e)) from None
            count = len(r)
            if r.step < 0:
                flips.add(d)
                lo = r[-1] if count else 0
                s = -r.step
            else:
                lo = r.start if count else 0
                s = r.step
            start.append(lo)
            stop.append(lo + (count - 1) * s + 1 if count else lo)
            step.append(s)
            extents.append(count)
            continue
        if k is None:
            raise IndexError("dimension %d: None (numpy.newaxis) is not supported; reshape the result" % d)
        if isinstance(k, (bool, np.bool_)):
            raise IndexError("dimension %d: boolean indices are not supported" % d)
        try:
            i = operator.index(k)
        except TypeError:
            raise IndexError("dimension %d: only integers, slices and '...' are supported (fancy indexing with "
                             "%s is not), got %r" % (d, type(k).__name__, k)) from None
        if i < -n or i >= n:
            raise IndexError("dimension %d: index %d is out of bounds [%d, %d) for size %d"
                             % (d, i, -n, n, n))
        if i < 0:
            i += n
        start.append(i)
        stop.append(i + 1)
        step.append(1)
        extents.append(1)
        dropped.add(d)
    return Selection(start, stop, step, extents, dropped, flips)
