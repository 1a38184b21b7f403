"""The benchmark's shared data and its zarr-python side; imported by bench/bench.py.

- write_data: the deterministic test data, written raw (C order, little-endian) to a file, block by
  block (so the orchestrator never holds a whole array), for nds_bench, nds_limit and zarr-python.
- regions: the random region origins, the same sequence as nds_bench's (splitmix64; see there).
- zarr_write / zarr_read / zarr_random: one zarr-python phase each; bench.py runs each in a forked
  child, so each reports the peak RSS of its own process (VmHWM right after the timed part, before
  any check). Like nds_bench, reads go into a buffer faulted in before the clock starts
  (get_basic_selection(..., out=buf)), so both sides are timed on the same work.
Omits: other dtypes than uint16 and float32. Threading: one thread (numcodecs' blosc uses its own).
"""
import os
import shutil
import time

import numpy as np
import zarr
from numcodecs import Blosc, GZip, Zstd

MASK64 = (1 << 64) - 1
FNV_OFFSET, FNV_PRIME = 0xCBF29CE484222325, 0x100000001B3
VERIFY_REGIONS = 4  # as nds_bench: regions re-read and checked after the clock stops


def compressor(codec):
    """zarr-python's compressor for one of bench.py's compact codec strings."""
    return {'none': None, 'zstd:1': Zstd(level=1), 'gzip:1': GZip(level=1),
            'blosc:lz4:5:shuffle': Blosc('lz4', 5, Blosc.SHUFFLE)}[codec]


def write_data(path, shape, dtype, seed):
    """uint16: (i mod 32768) + a ramp over the other dimensions (the last one of a 3-d array counts
    twice) + noise in [0, 8): 3 random bits per element, so it compresses about 2:1.
    float32: 100 + 0.01 i + 0.02 j + ... + N(0, 0.05) noise: a smooth field whose low mantissa bits
    are random, as in measured data. Written in blocks of about 8 MiB along dimension 0."""
    rng = np.random.default_rng(seed)
    inner = shape[1:]
    ramp = np.zeros(inner, dtype=np.float64 if dtype == 'float32' else np.uint16)
    for d, ix in enumerate(np.indices(inner)):
        w = 2 if (dtype == 'uint16' and d == len(shape) - 2) else 1
        ramp += (ix * (0.02 * w if dtype == 'float32' else w)).astype(ramp.dtype)
    rows = max(1, (8 << 20) // max(1, ramp.nbytes))
    with open(path, 'wb') as f:
        for i0 in range(0, shape[0], rows):
            i = np.arange(i0, min(shape[0], i0 + rows)).reshape((-1,) + (1,) * len(inner))
            if dtype == 'uint16':
                block = rng.integers(0, 8, size=(len(i),) + inner, dtype=np.uint16)
                block += ramp
                block += (i % 32768).astype(np.uint16)
            else:
                block = rng.standard_normal(size=(len(i),) + inner, dtype=np.float32)
                block *= np.float32(0.05)
                block += (100 + 0.01 * i + ramp).astype(np.float32)
            f.write(block.astype('<' + np.dtype(dtype).str[1:], copy=False).tobytes())


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


def regions(shape, chunks, region, seed):
    """Yields (origin, seq_hash so far) forever, exactly as nds_bench's next_region."""
    state, h = seed, FNV_OFFSET
    while True:
        origin = []
        for n, c, r in zip(shape, chunks, region):
            state, x = splitmix64(state)
            o = x % (n - r + 1)
            if o % c == 0 and o < n - r:
                o += 1
            origin.append(o)
            h = ((h ^ o) * FNV_PRIME) & MASK64
        yield tuple(origin), h


def seq_hash(shape, chunks, region, seed, count):
    """The seq_hash nds_bench reports after count regions."""
    h = FNV_OFFSET
    gen = regions(shape, chunks, region, seed)
    for _ in range(count):
        _, h = next(gen)
    return h


def maxrss_kib():
    """Peak RSS of this process (VmHWM; a forked child starts at its parent's current RSS)."""
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith('VmHWM:'):
                return int(line.split()[1])
    raise RuntimeError('no VmHWM in /proc/self/status')


def load_raw(raw, shape, dtype):
    return np.fromfile(raw, dtype='<' + np.dtype(dtype).str[1:]).reshape(shape)


def check_whole(raw, out):
    """Compares out with the raw file in 8 MiB pieces (no second whole array)."""
    flat = out.reshape(-1)
    step = (8 << 20) // out.itemsize
    with open(raw, 'rb') as f:
        for off in range(0, flat.size, step):
            piece = np.frombuffer(f.read(step * out.itemsize), dtype=out.dtype)
            if not np.array_equal(piece, flat[off:off + piece.size]):
                raise RuntimeError('zarr-python read back different data near element %d' % off)


def zarr_write(path, raw, shape, chunks, dtype, codec):
    data = load_raw(raw, shape, dtype)
    shutil.rmtree(path, ignore_errors=True)
    z = zarr.open(zarr.DirectoryStore(path), mode='w', shape=shape, chunks=chunks,
                  dtype=data.dtype, compressor=compressor(codec), fill_value=0)
    before = maxrss_kib()
    t0 = time.perf_counter()
    z[...] = data
    secs = time.perf_counter() - t0
    rss = maxrss_kib()
    # DirectoryStore never fsyncs: its chunks may still be only in the page cache. The time until
    # they are on disk (what ndstore's write includes) is measured too.
    os.sync()
    synced = time.perf_counter() - t0
    return {'secs': secs, 'synced_secs': synced, 'bytes': data.nbytes, 'rss_before_kib': before,
            'rss_kib': rss}


def zarr_read(path, raw):
    z = zarr.open(zarr.DirectoryStore(path), mode='r')
    out = np.empty(z.shape, dtype=z.dtype)
    out.fill(0)  # fault the pages in before the clock starts, as nds_bench does
    before = maxrss_kib()
    t0 = time.perf_counter()
    z.get_basic_selection(Ellipsis, out=out)
    secs = time.perf_counter() - t0
    res = {'secs': secs, 'bytes': out.nbytes, 'rss_before_kib': before, 'rss_kib': maxrss_kib()}
    check_whole(raw, out)
    return res


def zarr_random(path, raw, region, seconds, seed):
    z = zarr.open(zarr.DirectoryStore(path), mode='r')
    buf = np.zeros(region, dtype=z.dtype)
    gen = regions(z.shape, z.chunks, region, seed)
    count, h = 0, FNV_OFFSET
    before = maxrss_kib()
    t0 = time.perf_counter()
    while True:
        origin, h = next(gen)
        z.get_basic_selection(tuple(slice(o, o + r) for o, r in zip(origin, region)), out=buf)
        count += 1
        t = time.perf_counter()
        if t - t0 >= seconds:
            break
    res = {'secs': t - t0, 'regions': count, 'bytes': count * buf.nbytes, 'seq_hash': h,
           'rss_before_kib': before, 'rss_kib': maxrss_kib()}
    data = np.memmap(raw, dtype=buf.dtype, mode='r', shape=z.shape)
    gen = regions(z.shape, z.chunks, region, seed)
    for _ in range(min(count, VERIFY_REGIONS)):
        sel = tuple(slice(o, o + r) for o, r in zip(next(gen)[0], region))
        if not np.array_equal(z[sel], data[sel]):
            raise RuntimeError('zarr-python read a random region wrong')
    return res


def stored_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs
               if not f.startswith('.'))
