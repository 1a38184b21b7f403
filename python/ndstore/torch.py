"""ndstore.torch: distributed PyTorch checkpoints on ndstore's versioned store.

Every rank writes the tensors it owns; one version of the versioned store (docs/versioned-format.md)
holds the whole checkpoint, committed atomically across ranks with prepared parts:

1. planning: the ranks exchange what they hold (names, dtypes, global shapes, shard boxes) so that
   every rank derives the same manifest and the same assignment of writes (each shard box and each
   replicated tensor is written by exactly one rank);
2. writing: each rank writes its assignments into transactions on the versioned store and prepares
   them (nds_txn_prepare): data objects are written, nothing is visible; a rank whose staged data
   reaches the staging budget prepares a part and starts the next one, so memory stays bounded;
3. commit: the tokens are gathered on rank 0, which commits them as one version with the manifest
   (nds_txn_commit_prepared), and broadcasts the version (or the error) to every rank.

A rank killed before step 3 leaves nothing visible (its objects are garbage for `ndstore gc`).
The layout in the store: one zarr v3 array per tensor under `t/<path>/`, and the manifest key
`ndstore-torch.json` (the state dict's skeleton: every non-tensor value, and for each tensor its
array path, dtype and shape). Each checkpoint is a version; `list()` and `latest()` read the log.
"""
import concurrent.futures
import json
import math
import threading

import numpy as np
import torch
import torch.distributed as dist

import ndstore

__all__ = ["Shard", "save", "load", "list", "latest", "DEFAULT_STAGING_BUDGET"]

MANIFEST_KEY = "ndstore-torch.json"
MANIFEST_FORMAT = 1
COMMIT_TAG = "ndstore.torch"  # the member of a version's metadata that marks a checkpoint
DEFAULT_STAGING_BUDGET = 1 << 30  # bytes of host staging memory per process
CHUNK_TARGET_BYTES = 8 << 20  # chunks of about this size (bounded above by the whole tensor)
CHUNK_MIN_BYTES = 64 << 10  # aligned with the ranks' boxes down to this size (a shared chunk is
# sent to the committer by every rank as elements + mask and merged there: more bytes than small chunks)

_builtin_list = list

# torch dtype -> (ndstore dtype name, numpy dtype the data travels as)
_DTYPES = {
    torch.float32: ("float32", np.float32),
    torch.float16: ("float16", np.float16),
    torch.bfloat16: ("bfloat16", np.uint16),
    torch.float64: ("float64", np.float64),
    torch.int64: ("int64", np.int64),
    torch.int32: ("int32", np.int32),
    torch.int16: ("int16", np.int16),
    torch.int8: ("int8", np.int8),
    torch.uint8: ("uint8", np.uint8),
    torch.bool: ("bool", np.bool_),
}
_TORCH_BY_NAME = {name: dt for dt, (name, _) in _DTYPES.items()}


class Shard:
    """This rank's slice of a global tensor: `tensor` holds the elements of the box that starts at
    `offsets` in a tensor of `global_shape`."""

    def __init__(self, tensor, offsets, global_shape):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError("Shard: tensor must be a torch.Tensor, not %s" % type(tensor).__name__)
        offsets = tuple(int(o) for o in offsets)
        global_shape = tuple(int(n) for n in global_shape)
        if len(offsets) != tensor.dim() or len(global_shape) != tensor.dim():
            raise ValueError("Shard: offsets %s and global_shape %s must have one entry per "
                             "dimension of the tensor (%d)" % (offsets, global_shape, tensor.dim()))
        for d, (o, n, g) in enumerate(zip(offsets, tensor.shape, global_shape)):
            if o < 0 or o + n > g:
                raise ValueError("Shard: dimension %d: [%d, %d) lies outside [0, %d)" %
                                 (d, o, o + n, g))
        self.tensor = tensor
        self.offsets = offsets
        self.global_shape = global_shape

    def __repr__(self):
        return "Shard(%s %s at %s of %s)" % (self.tensor.dtype, tuple(self.tensor.shape),
                                             self.offsets, self.global_shape)


# ---- store URLs ---------------------------------------------------------------------------------

def _store_url(url):
    """The versioned kvstore URL for a user's URL: a base store gets `|versioned:` stacked on it;
    a URL ending in `|versioned:` is taken as it is."""
    if not isinstance(url, str) or not url:
        raise TypeError("ndstore.torch: url must be a non-empty string")
    if "|versioned:" in url:
        base, rest = url.rsplit("|versioned:", 1)
        if rest.strip("/"):
            raise ValueError("ndstore.torch: %r names a path or version inside the versioned store; "
                             "give the store itself (e.g. file:///ckpt/)" % url)
        return base + "|versioned:"
    return url + "|versioned:"


def _at_version(store_url, version):
    """The URL of the store pinned at a version (number or tag), read-only."""
    return "%s@%s/" % (store_url, version)


def _array_url(store_url, path):
    return "%s%s/|zarr3:" % (store_url, path)


# ---- the state dict's skeleton ------------------------------------------------------------------

_SAFE = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def _escape(component):
    """A key as one path component: safe characters kept, the others as ~XX (UTF-8 bytes)."""
    text = str(component)
    out = []
    for ch in text:
        if ch in _SAFE:
            out.append(ch)
        else:
            out.extend("~%02X" % b for b in ch.encode("utf-8"))
    escaped = "".join(out)
    if escaped in ("", ".", ".."):
        escaped = "~" + escaped.encode("utf-8").hex() + "~"
    return escaped


def _key_repr(key):
    if isinstance(key, bool) or not isinstance(key, (str, int)):
        raise TypeError("ndstore.torch: state dict keys must be str or int, not %r" % (key,))
    return key


def _flatten(value, path, tensors, where):
    """The JSON skeleton of value; tensors and Shards are collected into `tensors` as
    (path, value, where) and replaced by a reference."""
    if isinstance(value, (torch.Tensor, Shard)):
        tensors.append((path, value, where))
        return {"__ndstore__": "tensor", "path": path}
    if isinstance(value, dict):
        items = []
        for k, v in value.items():
            k = _key_repr(k)
            items.append([k, _flatten(v, path + "/" + _escape(k) if path else _escape(k),
                                      tensors, "%s[%r]" % (where, k))])
        return {"__ndstore__": "dict", "items": items}
    if isinstance(value, (_builtin_list, tuple)):
        items = [_flatten(v, "%s/%d" % (path, i) if path else str(i), tensors,
                          "%s[%d]" % (where, i)) for i, v in enumerate(value)]
        return items if isinstance(value, _builtin_list) else {"__ndstore__": "tuple", "items": items}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError("ndstore.torch: %s is a %s, which a checkpoint cannot hold (tensors, Shards, "
                    "dicts, lists, tuples, str, int, float, bool and None can)" %
                    (where or "the state dict", type(value).__name__))


def _unflatten(skel, tensors):
    """Rebuilds the value of a skeleton; a tensor reference becomes tensors(path)."""
    if isinstance(skel, _builtin_list):
        return [_unflatten(v, tensors) for v in skel]
    if isinstance(skel, dict):
        kind = skel.get("__ndstore__")
        if kind == "dict":
            return {k: _unflatten(v, tensors) for k, v in skel["items"]}
        if kind == "tuple":
            return tuple(_unflatten(v, tensors) for v in skel["items"])
        if kind == "tensor":
            return tensors(skel["path"])
        raise ndstore.Corrupt("ndstore.torch: manifest: unknown entry kind %r" % (kind,))
    return skel


# ---- planning -----------------------------------------------------------------------------------

def _describe(path, value, where):
    """What a rank tells the others about one of its tensors."""
    if isinstance(value, Shard):
        t, offsets, gshape, kind = value.tensor, value.offsets, value.global_shape, "shard"
    else:
        t, kind = value, "replicated"
        offsets, gshape = (0,) * value.dim(), tuple(value.shape)
    if t.dtype not in _DTYPES:
        raise TypeError("ndstore.torch: %s: dtype %s is not supported (%s are)" %
                        (where, t.dtype, ", ".join(str(d) for d in _DTYPES)))
    return {"path": path, "kind": kind, "dtype": _DTYPES[t.dtype][0], "shape": _builtin_list(gshape),
            "offsets": _builtin_list(offsets), "local": _builtin_list(t.shape), "where": where}


def _chunks_for(shape, itemsize, cuts=None):
    """Chunks of about CHUNK_TARGET_BYTES, deterministic (every rank derives the same): from the
    last dimension on, each takes what room the inner ones leave. cuts[d] (the positions where
    the ranks' boxes start or end in dimension d) align the chunks with the boxes where that keeps
    chunks of at least CHUNK_MIN_BYTES: then no chunk is shared by two ranks, and the commit has
    nothing to merge (a shared chunk is written by every rank in part and merged by the
    committer: correct, but several times the bytes)."""
    chunks = [1] * len(shape)
    inner = itemsize
    for d in range(len(shape) - 1, -1, -1):
        n = max(shape[d], 1)
        c = min(n, max(1, CHUNK_TARGET_BYTES // inner))
        g = 0
        for cut in (cuts or {}).get(d, ()):
            g = math.gcd(g, cut)
        if g and g % c:
            aligned = next(k for k in range(min(c, g), 0, -1) if g % k == 0)
            outer = math.prod(max(k, 1) for k in shape[:d])  # what the outer dimensions can add
            if aligned * inner * outer >= min(CHUNK_MIN_BYTES, n * inner * outer):
                c = aligned
        chunks[d] = c
        inner *= c
    return chunks


def _box_cuts(boxes, shape):
    """{dimension: positions inside (0, shape) where a box starts or ends}."""
    cuts = {}
    for offsets, local in boxes:
        for d, (o, n) in enumerate(zip(offsets, local)):
            for p in (o, o + n):
                if 0 < p < shape[d]:
                    cuts.setdefault(d, set()).add(p)
    return cuts


def _plan(all_descriptions, world):
    """The manifest's tensor table and who writes what, the same on every rank.

    Returns (table, writes): table maps path -> {dtype, shape, kind}; writes[rank] lists
    (path, offsets, local) boxes that rank writes. A replicated tensor is written by one rank,
    chosen round-robin; a shard box several ranks hold identically is written by the lowest."""
    table, writes, seen = {}, [[] for _ in range(world)], set()
    replicated = 0
    for rank, descs in enumerate(all_descriptions):
        for d in descs:
            entry = table.get(d["path"])
            if entry is None:
                table[d["path"]] = {"dtype": d["dtype"], "shape": d["shape"], "kind": d["kind"]}
            elif (entry["dtype"], entry["shape"], entry["kind"]) != (d["dtype"], d["shape"], d["kind"]):
                raise ValueError("ndstore.torch: %s: ranks disagree: %s %s %s on one, %s %s %s on "
                                 "rank %d" % (d["where"], entry["kind"], entry["dtype"], entry["shape"],
                                              d["kind"], d["dtype"], d["shape"], rank))
            box = (d["path"], tuple(d["offsets"]), tuple(d["local"]))
            if box in seen:
                continue
            seen.add(box)
            if d["kind"] == "replicated":
                writes[replicated % world].append(box)
                replicated += 1
            else:
                writes[rank].append(box)
    boxes = {}
    for path, offsets, local in seen:
        boxes.setdefault(path, []).append((offsets, local))
    for path, entry in table.items():
        shape = entry["shape"] or [1]
        itemsize = np.dtype(_DTYPES[_TORCH_BY_NAME[entry["dtype"]]][1]).itemsize
        entry["chunks"] = _chunks_for(shape, itemsize, _box_cuts(boxes[path], shape))
    return table, writes


# ---- collectives --------------------------------------------------------------------------------

class _Group:
    """The ranks taking part: torch.distributed's group, or this process alone."""

    def __init__(self, group):
        self.distributed = dist.is_available() and dist.is_initialized()
        self.group = group if self.distributed else None
        self.rank = dist.get_rank(group) if self.distributed else 0
        self.world = dist.get_world_size(group) if self.distributed else 1

    def all_gather(self, obj):
        if not self.distributed:
            return [obj]
        out = [None] * self.world
        dist.all_gather_object(out, obj, group=self.group)
        return out

    def broadcast(self, obj):
        """rank 0's obj, on every rank."""
        if not self.distributed:
            return obj
        box = [obj]
        src = dist.get_global_rank(self.group, 0) if self.group is not None else 0
        dist.broadcast_object_list(box, src=src, group=self.group)
        return box[0]


# ---- writing ------------------------------------------------------------------------------------

def _as_numpy(t):
    """A CPU, C-contiguous NumPy view of t (a copy only where t is not like that already)."""
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


class _PartWriter:
    """Writes boxes into transactions on the versioned store, by reference (no copy of a chunk a box
    holds whole), preparing a part whenever the data it holds reaches half the budget; tokens()
    prepares the last one. staging: the async save's _Staging, whose copies this writer holds until
    the part that references them is prepared (None: the caller's tensors, held by the caller)."""

    def __init__(self, store_url, table, budget, codec, staging=None):
        self.store_url, self.table, self.budget, self.codec = store_url, table, budget, codec
        self.staging, self.referenced, self.held = staging, 0, []
        self.txn, self.arrays, self.tokens_done = None, {}, []

    def _array(self, path):
        if self.txn is None:
            self.txn = ndstore.Transaction("atomic")
            self.arrays = {}
        a = self.arrays.get(path)
        if a is None:
            entry = self.table[path]
            url = _array_url(self.store_url, "t/" + path)
            a = ndstore.open(url, create=True, open=True, shape=entry["shape"] or [1],
                             dtype=entry["dtype"], chunks=self._chunks(url, entry),
                             codec=self.codec, txn=self.txn)
            self.arrays[path] = a
        return a

    @staticmethod
    def _chunks(url, entry):
        """The planned chunks, or those of the array a previous checkpoint left there (saved by
        another number of ranks, say): its chunks are kept, so that it opens unchanged."""
        try:
            with ndstore.open(url) as old:
                if old.dtype_name == entry["dtype"] and _builtin_list(old.shape) == (entry["shape"] or [1]):
                    return _builtin_list(old.chunks)
        except ndstore.NotFound:
            pass
        return entry["chunks"]

    def write(self, path, offsets, data):
        """data: a NumPy array of the box at offsets (0-d tensors are stored as shape [1]), kept
        unchanged until the part is prepared."""
        n = max(data.nbytes, 1)
        if data.ndim == 0:
            data, offsets = data.reshape(1), (0,)
        a = self._array(path)
        sel = tuple(slice(o, o + k) for o, k in zip(offsets, data.shape))
        a.write(sel, data, by_reference=True)
        if self.staging is not None:
            self.referenced += n
            self.held.append(data)
        if self.txn.memory + self.referenced >= self.budget // 2:
            self.flush()

    def write_key(self, key, data):
        """Stages a raw key of the store (the manifest) in the current part."""
        if self.txn is None:
            self.txn, self.arrays = ndstore.Transaction("atomic"), {}
        self.txn.write_key(ndstore.kvstore_open(self.store_url), key, data)

    def flush(self):
        """Prepares the part written so far (if any) and releases what it referenced."""
        if self.txn is not None:
            self.tokens_done.append(self.txn.prepare())
            for a in self.arrays.values():
                a.close()
            self.txn, self.arrays = None, {}
        if self.staging is not None and self.held:
            self.staging.release(self.held)
            self.referenced, self.held = 0, []

    def tokens(self):
        self.flush()
        return self.tokens_done


def _commit(store_url, tokens, message, metadata):
    return ndstore.commit(store_url, tokens, message=message, metadata=metadata)


# ---- save ---------------------------------------------------------------------------------------

_async_groups = {}  # the torch.distributed group async saves use, per user group (made once)
_async_lock = threading.Lock()


def _async_group(group):
    """A separate gloo group for the background thread's collectives, so that they never interleave
    with the training loop's on the user's group (a collective call every rank makes, the first
    time)."""
    if not (dist.is_available() and dist.is_initialized()):
        return None
    with _async_lock:
        key = id(group)
        if key not in _async_groups:
            ranks = None if group is None else dist.get_process_group_ranks(group)
            _async_groups[key] = dist.new_group(ranks=ranks, backend="gloo")
        return _async_groups[key]


class _StagingPool:
    """Host buffers for async saves, kept between saves (as frameworks keep pinned staging memory):
    a training job saves the same tensors again and again, and copying into memory the process
    already has is several times faster than into fresh pages (each first touched by a page
    fault). At most `budget` bytes are kept; buffers are reused by exact size."""

    def __init__(self):
        self.lock, self.free, self.kept = threading.Lock(), {}, 0

    def copy(self, array):
        """A C-contiguous copy of array in a pooled buffer."""
        with self.lock:
            spare = self.free.get(array.nbytes)
            buf = spare.pop() if spare else None
            if buf is not None:
                self.kept -= array.nbytes
        if buf is None:
            buf = np.empty(array.nbytes, dtype=np.uint8)
        out = buf.view(array.dtype).reshape(array.shape) if array.nbytes else \
            np.empty(array.shape, array.dtype)
        np.copyto(out, array)
        return out

    def give_back(self, array, budget):
        base = array.base if array.base is not None else array
        if not isinstance(base, np.ndarray) or base.dtype != np.uint8 or base.ndim != 1:
            return
        with self.lock:
            if self.kept + base.nbytes <= budget:
                self.free.setdefault(base.nbytes, []).append(base)
                self.kept += base.nbytes


_staging_pool = _StagingPool()


class _Staging:
    """Host copies of the tensors an async save writes, bounded to `limit` bytes: put() blocks while
    the copies not yet released would exceed it (a larger model streams through). The writer stages
    the copies by reference, so they are released only once the part holding them is prepared; the
    iterator yields None when put() waits and nothing is queued: the writer then prepares. Released
    copies go back to the process's staging pool for the next async save."""

    def __init__(self, limit, budget):
        self.limit, self.budget, self.held, self.cond = limit, budget, 0, threading.Condition()
        self.items, self.closed, self.waiting = [], False, False

    def put(self, path, offsets, array):
        n = max(array.nbytes, 1)
        with self.cond:
            while self.held and self.held + n > self.limit:
                self.waiting = True
                self.cond.notify_all()
                self.cond.wait()
            self.waiting = False
            self.held += n
            self.items.append((path, offsets, array))
            self.cond.notify_all()

    def release(self, arrays):
        for a in arrays:
            _staging_pool.give_back(a, self.budget)
        with self.cond:
            self.held -= sum(max(a.nbytes, 1) for a in arrays)
            self.cond.notify_all()

    def close(self):
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def __iter__(self):
        while True:
            with self.cond:
                while not self.items and not self.closed and not self.waiting:
                    self.cond.wait()
                if not self.items and self.waiting:
                    item = None  # put() waits for memory the writer holds: prepare, then go on
                elif not self.items:
                    return
                else:
                    item = self.items.pop(0)
            yield item


def save(state_dict, url, *, group=None, async_=False, message=None, codec="none",
         staging_budget=DEFAULT_STAGING_BUDGET):
    """Saves state_dict as one checkpoint (one version of the versioned store at url) written by
    every rank of group (None: the default group, or this process alone without torch.distributed).

    Values: ndstore.torch.Shard(local, offsets, global_shape) is this rank's slice of a global
    tensor; a plain tensor is replicated (every rank holds it; one writes it); anything else (int,
    float, str, bool, None, lists, tuples, dicts) is kept in the checkpoint's manifest. Returns the
    version number on every rank; with async_=True a concurrent.futures.Future of it, returned once
    the tensors are copied to host memory (at most staging_budget bytes at a time: a larger state
    streams, and save returns when the rest is staged). Every rank must call save with the same
    keys. Raises ndstore.Error (or ValueError/TypeError for a state dict that cannot be saved) on
    every rank; then no version is made.
    """
    if staging_budget < (1 << 20):
        raise ValueError("ndstore.torch.save: staging_budget must be at least 1 MiB")
    store_url = _store_url(url)
    g = _Group(group)
    tensors = []
    skeleton = _flatten(state_dict, "", tensors, "state_dict")
    mine = [_describe(p, v, w) for p, v, w in tensors]
    values = {p: (v.tensor if isinstance(v, Shard) else v) for p, v, _ in tensors}
    everyone = g.all_gather(mine)
    table, writes = _plan(everyone, g.world)
    boxes = writes[g.rank]
    manifest = None
    if g.rank == 0:
        manifest = json.dumps({"format": MANIFEST_FORMAT, "tensors": table, "state": skeleton,
                               "world_size": g.world}).encode()
    metadata = {COMMIT_TAG: {"format": MANIFEST_FORMAT, "world_size": g.world,
                             "tensors": len(table)}}
    message = message or "ndstore.torch checkpoint"
    if not async_:
        arrays = {p: _as_numpy(values[p]) for p, _, _ in boxes}
        return _finish(g, store_url, table, boxes, arrays, staging_budget, codec, manifest,
                       message, metadata)
    bg = _Group(_async_group(group)) if g.distributed else g
    staging = _Staging(staging_budget // 2, staging_budget)
    future = concurrent.futures.Future()

    def run():
        try:
            future.set_result(_finish(bg, store_url, table, boxes, staging, staging_budget, codec,
                                      manifest, message, metadata))
        except BaseException as e:  # the future carries it to the caller
            future.set_exception(e)

    thread = threading.Thread(target=run, name="ndstore.torch.save", daemon=True)
    thread.start()
    try:
        for path, offsets, _ in boxes:
            staging.put(path, offsets, _staging_pool.copy(_as_numpy(values[path])))
    finally:
        staging.close()
    return future


def _finish(g, store_url, table, boxes, source, budget, codec, manifest, message, metadata):
    """Writes this rank's boxes and manifest part, gathers every rank's tokens, and on rank 0
    commits them; every rank returns the version or raises the error any rank met."""
    tokens, error = [], None
    try:
        writer = _PartWriter(store_url, table, budget, codec,
                             source if isinstance(source, _Staging) else None)
        items = source if isinstance(source, _Staging) else \
            ((p, o, source[p]) for p, o, _ in boxes)
        for item in items:  # None: the async staging waits for memory this writer holds
            writer.write(*item) if item is not None else writer.flush()
        if manifest is not None:
            writer.write_key(MANIFEST_KEY, manifest)
        tokens = writer.tokens()
    except Exception as e:  # told to every rank, so that none waits for a commit that never comes
        error = (type(e).__name__, "rank %d: %s: %s" % (g.rank, type(e).__name__, e))
    gathered = g.all_gather((tokens, error))
    outcome = None
    if g.rank == 0:
        errors = [err for _, err in gathered if err]
        if errors:
            outcome = ("error", errors[0][0], "; ".join(text for _, text in errors))
        else:
            try:
                all_tokens = [tok for toks, _ in gathered for tok in toks]
                outcome = ("version", _commit(store_url, all_tokens, message, metadata))
            except Exception as e:
                outcome = ("error", type(e).__name__, "commit: %s: %s" % (type(e).__name__, e))
    outcome = g.broadcast(outcome)
    if outcome[0] == "error":
        raise _error_class(outcome[1])("ndstore.torch.save: no checkpoint made: " + outcome[2])
    return outcome[1]


def _error_class(name):
    """The exception class a rank's error had (an ndstore.Error subclass, TypeError or
    ValueError), so that every rank raises the same kind; ndstore.Error for anything else."""
    cls = getattr(ndstore, name, None)
    if isinstance(cls, type) and issubclass(cls, ndstore.Error):
        return cls
    return {"TypeError": TypeError, "ValueError": ValueError}.get(name, ndstore.Error)


# ---- reading ------------------------------------------------------------------------------------

def list(url):  # noqa: A001  (the issue's name: ndstore.torch.list)
    """The checkpoints at url, newest first: dicts {version, time, message, tags, world_size,
    tensors} (tags: the names of the tags naming that version)."""
    store_url = _store_url(url)
    out = []
    for v in ndstore.log(store_url):
        meta = (v.get("metadata") or {}).get(COMMIT_TAG)
        if isinstance(meta, dict):
            out.append({"version": v["version"], "time": v["time"], "message": v["message"],
                        "tags": v["tags"], "world_size": meta.get("world_size"),
                        "tensors": meta.get("tensors")})
    return out


def latest(url):
    """The newest checkpoint's version at url, or None when there is none."""
    found = list(url)
    return found[0]["version"] if found else None


def _read_manifest(pinned_url, where):
    with ndstore.kvstore_open(pinned_url) as kv:
        raw = kv.read(MANIFEST_KEY)
    if raw is None:
        raise ndstore.NotFound("ndstore.torch.load: %s holds no ndstore.torch checkpoint (no %s)" %
                               (where, MANIFEST_KEY))
    try:
        manifest = json.loads(raw)
    except ValueError as e:
        raise ndstore.Corrupt("ndstore.torch.load: %s: %s is not JSON: %s" %
                              (where, MANIFEST_KEY, e)) from None
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise ndstore.Corrupt("ndstore.torch.load: %s: %s has format %r; this reader knows %d" %
                              (where, MANIFEST_KEY, manifest.get("format")
                               if isinstance(manifest, dict) else None, MANIFEST_FORMAT))
    return manifest


def _fill(pinned_url, path, entry, target, offsets, where):
    """Reads the box of target's shape at offsets of the stored tensor at path into target."""
    want = _TORCH_BY_NAME.get(entry["dtype"])
    if target.dtype != want:
        raise TypeError("ndstore.torch.load: %s: the checkpoint holds %s, the target is %s" %
                        (where, entry["dtype"], target.dtype))
    shape = entry["shape"]
    if len(offsets) != len(shape) or any(o < 0 or o + n > g for o, n, g in
                                         zip(offsets, target.shape, shape)):
        raise ValueError("ndstore.torch.load: %s: the box %s at %s does not lie inside the stored "
                         "shape %s" % (where, tuple(target.shape), offsets, shape))
    with ndstore.open(_array_url(pinned_url, "t/" + path)) as a:
        if not shape:  # a 0-d tensor, stored as shape [1]
            sel = (slice(0, 1),)
        else:
            sel = tuple(slice(o, o + n) for o, n in zip(offsets, target.shape))
        direct = target.device.type == "cpu" and target.is_contiguous()
        buf = target if direct else torch.empty(target.shape, dtype=target.dtype)
        a.read(sel, out=_as_numpy(buf).reshape(-1) if not shape else _as_numpy(buf))
        if not direct:
            with torch.no_grad():
                target.copy_(buf)


def load(url, like, *, group=None, version=None):
    """Loads a checkpoint into like (a state dict of the same keys): each Shard's tensor gets its
    box of the global tensor, whatever sharding saved it; each plain tensor gets the whole tensor;
    both are filled in place. Returns a dict of like's structure whose non-tensor values are the
    checkpoint's (values only the checkpoint has are included). version: a number, a tag or a UTC
    time ("2026-11-27T10:00:00Z": the newest version committed at or before it); None loads the
    latest checkpoint (rank 0 chooses it, so every rank of group loads the same one).
    """
    store_url = _store_url(url)
    g = _Group(group)
    if version is None:
        version = latest(url) if g.rank == 0 else None
        version = g.broadcast(version)
        if version is None:
            raise ndstore.NotFound("ndstore.torch.load: %s holds no checkpoint" % url)
    pinned = _at_version(store_url, version)
    where = "%s version %s" % (url, version)
    manifest = _read_manifest(pinned, where)
    table = manifest.get("tensors", {})
    tensors = []
    skeleton = _flatten(like, "", tensors, "like")
    for path, value, what in tensors:
        entry = table.get(path)
        if entry is None:
            raise ndstore.NotFound("ndstore.torch.load: %s: %s is not in the checkpoint" %
                                   (where, what))
        if isinstance(value, Shard):
            _fill(pinned, path, entry, value.tensor, value.offsets, what)
        else:
            if _builtin_list(value.shape) != entry["shape"]:
                raise ValueError("ndstore.torch.load: %s: %s has shape %s, the checkpoint %s" %
                                 (where, what, _builtin_list(value.shape), entry["shape"]))
            _fill(pinned, path, entry, value, (0,) * value.dim(), what)
    given = {p: v for p, v, _ in tensors}
    stored = _unflatten(manifest["state"], lambda p: given.get(p))
    return _merge(_unflatten(skeleton, lambda p: given[p]), stored)


_ABSENT = object()  # a key the checkpoint does not have


def _merge(mine, theirs):
    """mine (like's structure) with the checkpoint's non-tensor values: tensors and Shards stay
    mine, dicts are merged key by key (keys only the checkpoint has are added), any other value is
    the checkpoint's, or mine where the checkpoint has no such entry."""
    if isinstance(mine, (torch.Tensor, Shard)):
        return mine
    if isinstance(mine, dict) and isinstance(theirs, dict):
        out = dict(theirs)
        for k, v in mine.items():
            out[k] = _merge(v, theirs.get(k, _ABSENT))
        return out
    return mine if theirs is _ABSENT else theirs
