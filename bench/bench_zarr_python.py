#!/usr/bin/python3
"""ndstore vs zarr-python: write and read one uint16 array with several compressors, in one run.

usage: bench_zarr_python.py --nds-bench PATH --tmp DIR [--shape 1024,1024,256] [--chunks 64,64,64]
                            [--only NAME] [--reps N] [--no-memory]
Run it through bench/run.sh, which builds nds_bench and makes and removes DIR.

The data (a smooth ramp plus 3 bits of seeded noise, the same every run) is generated once, not
timed, and saved raw for nds_bench. For each workload:
  ndstore:     nds_bench times nds_array_write of the whole array from memory into a new zarr v2
               array under DIR (file kvstore), then nds_array_read of all of it into memory;
  zarr-python: times z[...] = data into a new DirectoryStore array under DIR, then z[...] reading
               it back after reopening.
Both sides check that what they read equals the data. Throughput is uncompressed bytes / seconds, in
MB/s (10^6 bytes). Each measurement is repeated --reps times (default 3) and the best is kept.
Arrays are deleted after each workload, so at most two are on disk at once. Unless --no-memory,
ndstore also runs on a memory:// kvstore, which shows the engine (codec, copy, threads) without the
file driver's temporary file, fsyncs and rename per chunk; that goes in a second table.
"""
import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time

import numpy as np
import numcodecs
import zarr
from numcodecs import Blosc, GZip, Zstd

# name, ndstore codec string, zarr-python compressor
WORKLOADS = [
    ('none', 'none', None),
    ('zstd level 1', 'zstd:1', Zstd(level=1)),
    ('blosc lz4 shuffle clevel 5', 'blosc:lz4:5:shuffle', Blosc('lz4', 5, Blosc.SHUFFLE)),
    ('gzip level 1', 'gzip:1', GZip(level=1)),
]


def make_data(shape, seed=20240601):
    """uint16: i + j + 2k (a smooth ramp over the array) plus noise in [0, 8), slab by slab so no
    int64 temporary of the whole array is made."""
    rng = np.random.default_rng(seed)
    out = np.empty(shape, dtype=np.uint16)
    rest = np.zeros(shape[1:], dtype=np.uint16)
    for d, ix in enumerate(np.indices(shape[1:], dtype=np.uint16)):
        rest += ix * (2 if d == len(shape) - 2 else 1)
    for i in range(shape[0]):
        noise = rng.integers(0, 8, size=shape[1:], dtype=np.uint16)
        np.add(rest, noise, out=out[i])
        out[i] += np.uint16(i % 32768)
    return out


def stored_bytes(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs
               if not f.startswith('.'))


def run_ndstore(args, raw, codec, shape, chunks, memory=False):
    path = os.path.join(args.tmp, 'ndstore.zarr')
    url = 'memory://bench/' if memory else 'file://%s/' % path
    cmd = [args.nds_bench, '--input', raw, '--array', url, '--codec', codec,
           '--shape', ','.join(map(str, shape)), '--chunks', ','.join(map(str, chunks))]
    best = None
    for _ in range(args.reps):
        shutil.rmtree(path, ignore_errors=True)
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit('nds_bench failed (%s): %s' % (' '.join(cmd), r.stderr.strip()))
        res = json.loads(r.stdout)
        if best is None:
            best = res
        best['write_s'] = min(best['write_s'], res['write_s'])
        best['read_s'] = min(best['read_s'], res['read_s'])
    shutil.rmtree(path, ignore_errors=True)
    return best


def run_zarr(args, data, compressor, chunks):
    path = os.path.join(args.tmp, 'zarr_python.zarr')
    wbest = rbest = float('inf')
    for _ in range(args.reps):
        shutil.rmtree(path, ignore_errors=True)
        z = zarr.open(zarr.DirectoryStore(path), mode='w', shape=data.shape, chunks=chunks,
                      dtype='<u2', compressor=compressor, fill_value=0)
        t0 = time.perf_counter()
        z[...] = data
        wbest = min(wbest, time.perf_counter() - t0)
        z = zarr.open(zarr.DirectoryStore(path), mode='r')
        t0 = time.perf_counter()
        back = z[...]
        rbest = min(rbest, time.perf_counter() - t0)
        if not np.array_equal(back, data):
            sys.exit('zarr-python read back different data')
        del back
    size = stored_bytes(path)
    shutil.rmtree(path, ignore_errors=True)
    return {'write_s': wbest, 'read_s': rbest, 'stored_bytes': size}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--nds-bench', required=True)
    ap.add_argument('--tmp', required=True)
    ap.add_argument('--shape', default='1024,1024,256')
    ap.add_argument('--chunks', default='64,64,64')
    ap.add_argument('--only', help='run only the workloads whose name contains this')
    ap.add_argument('--reps', type=int, default=3)
    ap.add_argument('--no-memory', action='store_true', help='skip the ndstore memory:// runs')
    args = ap.parse_args()
    shape = tuple(int(x) for x in args.shape.split(','))
    chunks = tuple(int(x) for x in args.chunks.split(','))

    t0 = time.perf_counter()
    data = make_data(shape)
    raw = os.path.join(args.tmp, 'data.u16')
    data.tofile(raw)
    mb = data.nbytes / 1e6
    print('data: %s uint16 in %s chunks, %.1f MB, generated in %.1f s (not timed)'
          % ('x'.join(map(str, shape)), 'x'.join(map(str, chunks)), mb, time.perf_counter() - t0),
          flush=True)
    print('zarr-python %s, numcodecs %s (blosc threads: %s), numpy %s, python %s'
          % (zarr.__version__, numcodecs.__version__, numcodecs.blosc.get_nthreads()
             if hasattr(numcodecs.blosc, 'get_nthreads') else '?', np.__version__,
             platform.python_version()), flush=True)

    rows = []
    for name, codec, comp in WORKLOADS:
        if args.only and args.only not in name:
            continue
        n = run_ndstore(args, raw, codec, shape, chunks)
        z = run_zarr(args, data, comp, chunks)
        m = None if args.no_memory else run_ndstore(args, raw, codec, shape, chunks, memory=True)
        rows.append((name, n, z, m))
        print('  %-28s ndstore %.2fs / %.2fs (%d threads), zarr-python %.2fs / %.2fs, '
              'stored %.1f / %.1f MB' % (name, n['write_s'], n['read_s'], n['threads'],
                                         z['write_s'], z['read_s'], n['stored_bytes'] / 1e6,
                                         z['stored_bytes'] / 1e6), flush=True)
    os.unlink(raw)

    print()
    print('| workload | ndstore write MB/s | zarr-python write MB/s | ratio | ndstore read MB/s '
          '| zarr-python read MB/s | ratio | stored MB (ndstore / zarr-python) |')
    print('|---|---:|---:|---:|---:|---:|---:|---:|')
    for name, n, z, _ in rows:
        nw, zw, nr, zr = (mb / n['write_s'], mb / z['write_s'], mb / n['read_s'],
                          mb / z['read_s'])
        print('| %s | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f | %.1f / %.1f |'
              % (name, nw, zw, nw / zw, nr, zr, nr / zr, n['stored_bytes'] / 1e6,
                 z['stored_bytes'] / 1e6))
    print('\nratio = ndstore / zarr-python (above 1: ndstore is faster)')
    if args.no_memory:
        return
    print('\nndstore on memory:// (no file I/O), same data and chunks:\n')
    print('| workload | write MB/s | read MB/s | file:// write speed as % of memory:// |')
    print('|---|---:|---:|---:|')
    for name, n, _, m in rows:
        print('| %s | %.0f | %.0f | %.0f%% |' % (name, mb / m['write_s'], mb / m['read_s'],
                                               100 * m['write_s'] / n['write_s']))


if __name__ == '__main__':
    main()
