#!/usr/bin/python3
"""What users run (issue 17): `ndstore write -i x.npy`, `ndstore read -o x.npy` and `ndstore cp` as
whole processes, side by side with zarr-python + NumPy doing the same task, in one run.

zarr-python is timed two ways: inside its process (np.load + z[:] = a, or z[:] + np.save; the
interpreter's start and imports left out, as a user who already runs Python would see it) and as a
whole process (`python3 script.py`, what a shell user waits for). ndstore is always a whole process.
Every run reports its minor page faults (ru_minflt: fresh pages touched). ndstore's writes are
durable (fsync per chunk file and directory); zarr-python's are not (it never calls fsync).

usage: bench/cli_bench.py NDSTORE_BINARY [--reps N] [--quick] [--families] [--tmp DIR]
Prints one table; the medians over N alternating repetitions (default 5).
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_zarr_python import write_data  # noqa: E402  (the benchmark's data, one generator)

CODECS = [('zstd-1', 'zstd:1', 'Zstd(level=1)'),
          ('blosc lz4 shuffle', 'blosc:lz4:5:shuffle', "Blosc('lz4', 5, Blosc.SHUFFLE)"),
          ('none', 'none', 'None')]

ZARR_SCRIPT = r'''
import resource, sys, time
t_start = time.perf_counter()
import numpy as np, zarr
from numcodecs import Blosc, Zstd
mode, path, npy = sys.argv[1], sys.argv[2], sys.argv[3]
r0 = resource.getrusage(resource.RUSAGE_SELF)
t0 = time.perf_counter()
if mode == 'write':
    a = np.load(npy)
    z = zarr.open(path, mode='w', shape=a.shape, chunks=CHUNKS, dtype=a.dtype, compressor=COMP)
    z[:] = a
elif mode == 'read':
    np.save(npy, zarr.open(path, mode='r')[:])
else:  # copy: the read-write loop a user writes (zarr.copy needs an h5py-style group tree)
    src = zarr.open(path, mode='r')
    dst = zarr.open(npy, mode='w', shape=src.shape, chunks=src.chunks, dtype=src.dtype, compressor=COMP)
    step = src.chunks[0]
    for i in range(0, src.shape[0], step):
        dst[i:i + step] = src[i:i + step]
t1 = time.perf_counter()
r1 = resource.getrusage(resource.RUSAGE_SELF)
print(t1 - t0, r1.ru_minflt - r0.ru_minflt, r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
'''


def run_faults(cmd):
    """Runs cmd; (wall seconds, minor page faults of that process, stdout, CPU seconds)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = p.stdout.read()
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    secs = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit('failed (%s): %s' % (' '.join(cmd), err.decode().strip()))
    return secs, ru.ru_minflt, out.decode(), ru.ru_utime + ru.ru_stime


def same_npy(a, b):
    return np.array_equal(np.load(a, mmap_mode='r'), np.load(b, mmap_mode='r'))


class Case:
    def __init__(self, args, tmp, dtype, shape, chunks, name, codec, comp):
        self.nds, self.tmp, self.dtype, self.shape, self.chunks = args.ndstore, tmp, dtype, shape, chunks
        self.name, self.codec, self.comp = name, codec, comp
        self.script = os.path.join(tmp, 'zarr_task.py')
        with open(self.script, 'w') as f:
            f.write(ZARR_SCRIPT.replace('CHUNKS', repr(tuple(chunks))).replace('COMP', comp))
        self.results = {}

    def path(self, what):
        return os.path.join(self.tmp, what)

    def fresh(self, *paths):
        for p in paths:
            shutil.rmtree(p, ignore_errors=True)
            if os.path.exists(p):
                os.unlink(p)

    def nds_write(self, npy):
        arr = self.path('nds.zarr')
        self.fresh(arr)
        subprocess.run([self.nds, 'create', 'file://%s|zarr:' % arr, '--shape', ','.join(map(str, self.shape)),
                        '--chunks', ','.join(map(str, self.chunks)), '--dtype', self.dtype, '--codec', self.codec],
                       check=True, stdout=subprocess.DEVNULL)
        s, fl, _, cpu = run_faults([self.nds, 'write', arr, '-i', npy])
        return s, fl, cpu

    def nds_read(self, ref):
        out = self.path('nds_out.npy')
        self.fresh(out)
        s, fl, _, cpu = run_faults([self.nds, 'read', self.path('nds.zarr'), '-o', out])
        assert same_npy(out, ref), 'ndstore read gave other data'
        return s, fl, cpu

    def nds_cp(self):
        dst = self.path('nds_cp.zarr')
        self.fresh(dst)
        s, fl, _, cpu = run_faults([self.nds, 'cp', self.path('nds.zarr'), 'file://%s|zarr:' % dst,
                                    '--codec', self.codec])
        return s, fl, cpu

    def zarr(self, mode, src, npy):
        secs, _, out, _ = run_faults(['/usr/bin/python3', self.script, mode, src, npy])
        inner, inner_faults, inner_cpu = out.split()
        return float(inner), int(inner_faults), float(inner_cpu), secs

    def zarr_write(self, npy):
        self.fresh(self.path('zp.zarr'))
        return self.zarr('write', self.path('zp.zarr'), npy)

    def zarr_read(self, ref):
        out = self.path('zp_out.npy')
        self.fresh(out)
        r = self.zarr('read', self.path('zp.zarr'), out)
        assert same_npy(out, ref), 'zarr-python read gave other data'
        return r

    def zarr_cp(self):
        self.fresh(self.path('zp_cp.zarr'))
        return self.zarr('copy', self.path('zp.zarr'), self.path('zp_cp.zarr'))

    def measure(self, npy, reps):
        rows = {k: [] for k in ('nw', 'zw', 'nr', 'zr', 'nc', 'zc')}
        for _ in range(reps):  # alternating, so a slow moment of the machine hits both sides
            rows['nw'].append(self.nds_write(npy))
            rows['zw'].append(self.zarr_write(npy))
            rows['nr'].append(self.nds_read(npy))
            rows['zr'].append(self.zarr_read(npy))
            rows['nc'].append(self.nds_cp())
            rows['zc'].append(self.zarr_cp())
        med = lambda xs, i: statistics.median(x[i] for x in xs)  # noqa: E731
        mb = np.prod(self.shape) * np.dtype(self.dtype).itemsize / 1e6
        layout = '%s %s / %s' % (self.dtype, 'x'.join(map(str, self.shape)), 'x'.join(map(str, self.chunks)))
        out = []
        for task, n, z in (('write', 'nw', 'zw'), ('read', 'nr', 'zr'), ('cp', 'nc', 'zc')):
            ns, nf, nc = med(rows[n], 0), med(rows[n], 1), med(rows[n], 2)
            zs, zf, zc, zwhole = med(rows[z], 0), med(rows[z], 1), med(rows[z], 2), med(rows[z], 3)
            out.append((layout, self.name, task, mb / ns, nc, nf, mb / zs, zc, zf, mb / zwhole, zs / ns,
                        zwhole / ns))
        return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('ndstore')
    ap.add_argument('--reps', type=int, default=5)
    ap.add_argument('--quick', action='store_true', help='a small array, one repetition')
    ap.add_argument('--families', action='store_true',
                    help="also the benchmark's 537 MB families (1024x1024x256 uint16 in 64^3 and 128^3 chunks, "
                         "16384x8192 float32 in 1024^2 chunks)")
    ap.add_argument('--tmp', default=None)
    args = ap.parse_args()
    args.ndstore = os.path.abspath(args.ndstore)
    if args.quick:
        layouts = [('uint16', (64, 128, 128), [(32, 64, 64)])]
    else:
        layouts = [('uint16', (512, 512, 256), [(64, 64, 64)])]
        if args.families:  # the benchmark's array families (bench/bench.py), 537 MB each
            layouts += [('uint16', (1024, 1024, 256), [(64, 64, 64), (128, 128, 128)]),
                        ('float32', (16384, 8192), [(1024, 1024)])]
    reps = 1 if args.quick else args.reps
    tmp = tempfile.mkdtemp(prefix='nds-cli-bench-', dir=args.tmp)
    try:
        print('ndstore as a whole process; zarr-python %s + NumPy in process (whole process in the "whole"'
              ' column); medians of %d alternating runs; ndstore writes fsync, zarr-python writes do not;'
              ' faults = minor page faults of the process; CPU s = user + system seconds of the task (2 cores: a'
              ' wall-time ratio above 2x needs less CPU than zarr-python, which runs on one)' % (zarr_version(), reps))
        head = ('array / chunks', 'codec', 'task', 'ndstore MB/s', 'CPU s', 'faults', 'zarr-py MB/s', 'CPU s',
                'faults', 'zarr-py whole MB/s', 'ratio', 'ratio (whole)')
        print('| ' + ' | '.join(head) + ' |')
        print('|' + '---|' * len(head))
        for dtype, shape, chunk_list in layouts:
            raw = os.path.join(tmp, 'data.raw')
            write_data(raw, shape, dtype, 7)
            npy = os.path.join(tmp, 'in.npy')
            np.save(npy, np.fromfile(raw, dtype='<' + np.dtype(dtype).str[1:]).reshape(shape))
            os.unlink(raw)
            for chunks in chunk_list:
                for name, codec, comp in CODECS:
                    c = Case(args, tmp, dtype, shape, chunks, name, codec, comp)
                    c.zarr_write(npy)  # the zarr-python copy source exists before the first cp
                    c.nds_write(npy)
                    for r in c.measure(npy, reps):
                        print('| %s | %s | %s | %.0f | %.2f | %d | %.0f | %.2f | %d | %.0f | %.2fx | %.2fx |' % r,
                              flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def zarr_version():
    out = subprocess.run(['/usr/bin/python3', '-c', 'import zarr; print(zarr.__version__)'],
                         capture_output=True, text=True)
    return out.stdout.strip()


if __name__ == '__main__':
    main()
