#!/usr/bin/python3
"""ndstore vs zarr-python vs this machine's physical limit, on identical data, in one run (issue 6).

usage: bench.py --build DIR --tmp DIR [--reps N] [--only NAME[,NAME...]] [--quick] [--seconds X]
Run it through bench/run.sh, which builds nds_bench, nds_limit and ndstore, and makes and removes
the scratch DIR.

Workloads: a uint16 array (1024x1024x256) in 64^3 and in 128^3 chunks, and a float32 array
(16384x8192) in 1024^2 chunks, each with compressor none, zstd-1, blosc lz4 shuffle clevel 5 and
gzip-1; zarr v2 on file:// under --tmp. The data of each array family is generated once (not
timed). Per workload, every measured phase runs in its own process, which reports its peak RSS:
  limit:       nds_limit: the codec alone on every core (none: min of memcpy and plain file I/O);
  ndstore:     nds_bench --mode write, read, random (chunk cache 256 MiB), random (no cache);
  zarr-python: write, read, random, each in a forked child of this script.
Then, for the codec-bound uint16 64^3 workloads, ndstore's write and read with 1 thread (scaling),
and the memory of `ndstore cp` from a 2 GiB zarr v2 array to zarr v3 sharded, N5 and neuroglancer
precomputed, and the peak RSS of 8 concurrent full reads on one context with a 64 MiB and the default
memory budget. --only keeps the workloads whose name contains one of the given strings (the cp part
runs when no --only is given or "cp" is one of them, the concurrent reads with "concurrent").
--quick runs small arrays, for a smoke test.
Prints markdown tables. MB/s = 10^6 uncompressed bytes per second; RSS in MiB (2^20 bytes).
"""
import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

import numcodecs
import numpy as np
import zarr

import bench_zarr_python as zp

CODECS = [('none', 'none'), ('zstd-1', 'zstd:1'), ('blosc-lz4', 'blosc:lz4:5:shuffle'),
          ('gzip-1', 'gzip:1')]
CACHE_BYTES = 256 << 20  # "cache on": about half of a full-size array's decoded chunks
CACHE_ALL_BYTES = 1 << 30  # "cache = array": every decoded chunk of a full-size array fits
SEED = 7
MIB = 1 << 20


def families(quick):
    """(dtype, shape, data seed, [chunk shapes], random region shape) per array family. The regions
    have 262144 elements (64^3 = 512^2) either way."""
    return [('uint16', (128, 128, 128) if quick else (1024, 1024, 256), 20240601,
             [(64, 64, 64), (128, 128, 128)], (64, 64, 64)),
            ('float32', (1024, 2048) if quick else (16384, 8192), 20240602,
             [(1024, 1024)], (512, 512))]


def csv(v):
    return ','.join(map(str, v))


def run_proc(cmd):
    """Runs cmd; returns (stdout, wall seconds, peak RSS KiB of that one process via wait4)."""
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err)
        out = p.stdout.read()
        p.stdout.close()
        _, status, ru = os.wait4(p.pid, 0)
        secs = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            err.seek(0)
            sys.exit('failed (%s): %s' % (' '.join(cmd), err.read().decode().strip()))
    return out.decode(), secs, ru.ru_maxrss


def run_measured(cmd, tmp):
    """Runs cmd; returns (wall seconds, its peak RSS KiB). ru_maxrss from wait4 would keep this
    interpreter's peak as a floor (Linux carries it across exec), so GNU time, which forks cmd from
    its own small process, measures it when installed."""
    if not os.access('/usr/bin/time', os.X_OK):
        _, secs, rss = run_proc(cmd)
        return secs, rss
    out = os.path.join(tmp, 'time.out')
    _, secs, _ = run_proc(['/usr/bin/time', '-f', '%M', '-o', out] + cmd)
    with open(out) as f:
        rss = int(f.read().split()[-1])
    os.unlink(out)
    return secs, rss


def run_json(cmd):
    return json.loads(run_proc(cmd)[0])


def run_forked(fn, *args):
    """Runs fn(*args) in a forked child (this process holds no big arrays, so the child starts at
    the size of an interpreter with numpy and zarr loaded) and returns its JSON-able result."""
    sys.stdout.flush()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            msg = json.dumps(fn(*args))
        except BaseException as e:  # the parent reports it
            msg = json.dumps({'error': '%s: %s' % (type(e).__name__, e)})
        with os.fdopen(w, 'w') as f:
            f.write(msg)
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        msg = f.read()
    _, status, _ = os.wait4(pid, 0)
    res = json.loads(msg) if msg else {'error': 'child exited with status %d' % status}
    if 'error' in res:
        sys.exit('zarr-python: %s' % res['error'])
    return res


def best(results, key):
    """The best repetition by key (smallest), with the largest peak RSS of all of them."""
    b = dict(min(results, key=key))
    b['rss_kib'] = max(r['rss_kib'] for r in results)
    return b


def settled(fn):
    """Runs fn after sync(2) (not timed): the previous phase's files are written back first, so a
    phase never pays for the write-back of the one before it (on this machine's disk, flushing half
    a gigabyte in the background halved the speed of a read that followed a write)."""
    os.sync()
    return fn()


def repeat(args, fn, key):
    return best([settled(fn) for _ in range(args.reps)], key)


def by_secs(r):
    return r['secs']


def by_rate(r):
    return -r['regions'] / r['secs']


class Workload:
    def __init__(self, args, dtype, shape, raw, chunks, region, cname, codec):
        self.args, self.dtype, self.shape, self.raw = args, dtype, shape, raw
        self.chunks, self.region, self.codec = chunks, region, codec
        self.name = '%s %s^%d %s' % (dtype, chunks[0], len(chunks), cname)
        self.nds_path = os.path.join(args.tmp, 'ndstore.zarr')
        self.zarr_path = os.path.join(args.tmp, 'zarr_python.zarr')
        self.chunk_bytes = int(np.prod(chunks)) * np.dtype(dtype).itemsize
        self.r = {}
        self.limit_runs = []

    def nds(self, mode, *extra):
        cmd = [self.args.nds_bench, '--mode', mode, '--array', 'file://%s/' % self.nds_path,
               '--input', self.raw]
        if mode == 'write':
            shutil.rmtree(self.nds_path, ignore_errors=True)
            cmd += ['--codec', self.codec, '--dtype', self.dtype, '--shape', csv(self.shape),
                    '--chunks', csv(self.chunks)]
        elif mode == 'random':
            cmd += ['--region', csv(self.region), '--seconds', str(self.args.seconds),
                    '--seed', str(SEED)]
        res = run_json(cmd + list(extra))
        if mode == 'random':
            want = zp.seq_hash(self.shape, self.chunks, self.region, SEED, res['regions'])
            if res['seq_hash'] != want:
                sys.exit('nds_bench drew other random regions than bench_zarr_python.py')
        return res

    def run_limit(self, runs):
        """Adds `runs` runs of nds_limit to self.limit_runs and sets self.r['limit'] to the best
        of all so far."""
        cmd = [self.args.nds_limit, '--input', self.raw, '--dtype', self.dtype, '--shape',
               csv(self.shape), '--chunks', csv(self.chunks), '--codec', self.codec,
               '--min-seconds', str(self.args.limit_seconds), '--dir', self.args.tmp]
        self.limit_runs += [settled(lambda: run_json(cmd)) for _ in range(runs)]
        all_runs = self.limit_runs
        lim = {k: max(r[k] for r in all_runs) for k in all_runs[0]}
        if self.codec == 'none':
            lim['write'] = min(lim['compress_mbs'], lim['file_write_mbs'])
            lim['read'] = min(lim['decompress_mbs'], lim['file_read_mbs'])
        else:
            lim['write'], lim['read'] = lim['compress_mbs'], lim['decompress_mbs']
        self.r['limit'] = lim

    def run_ndstore(self, scaling):
        a, r = self.args, self.r
        r['nds_write'] = repeat(a, lambda: self.nds('write'), by_secs)
        r['nds_read'] = repeat(a, lambda: self.nds('read'), by_secs)
        r['nds_rand_on'] = repeat(a, lambda: self.nds('random', '--cache-bytes', str(CACHE_BYTES)),
                                  by_rate)
        r['nds_rand_off'] = repeat(a, lambda: self.nds('random'), by_rate)
        r['nds_rand_all'] = repeat(
            a, lambda: self.nds('random', '--cache-bytes', str(CACHE_ALL_BYTES)), by_rate)
        if scaling:
            r['nds_read_1'] = repeat(a, lambda: self.nds('read', '--threads', '1'), by_secs)
            r['nds_write_1'] = repeat(a, lambda: self.nds('write', '--threads', '1'), by_secs)
        shutil.rmtree(self.nds_path, ignore_errors=True)

    def run_zarr(self):
        a, r, p = self.args, self.r, self.zarr_path
        r['z_write'] = repeat(a, lambda: run_forked(zp.zarr_write, p, self.raw, self.shape,
                                                    self.chunks, self.dtype, self.codec), by_secs)
        r['z_read'] = repeat(a, lambda: run_forked(zp.zarr_read, p, self.raw), by_secs)
        r['z_rand'] = repeat(a, lambda: run_forked(zp.zarr_random, p, self.raw, self.region,
                                                   a.seconds, SEED), by_rate)
        r['z_stored'] = zp.stored_bytes(p)
        shutil.rmtree(p, ignore_errors=True)

    def run(self, scaling):
        t0 = time.perf_counter()
        # The limit is measured before and after ndstore's phases (half the repetitions each,
        # best of all): this machine's speed drifts by 20-40 % within minutes, and a limit taken
        # only before could catch a slow moment that ndstore's phases then miss.
        before = (self.args.reps + 1) // 2
        self.run_limit(before)
        self.run_ndstore(scaling)
        if self.args.reps > before:
            self.run_limit(self.args.reps - before)
        self.run_zarr()
        r = self.r
        print('  %-24s write %5.0f / %5.0f MB/s, read %5.0f / %5.0f MB/s (ndstore / zarr-python), '
              'limit %.0f / %.0f, random %.0f / %.0f / %.0f regions/s, %.0f s'
              % (self.name, mbs(r['nds_write']), mbs(r['z_write']), mbs(r['nds_read']),
                 mbs(r['z_read']), r['limit']['write'], r['limit']['read'], rps(r['nds_rand_on']),
                 rps(r['nds_rand_off']), rps(r['z_rand']), time.perf_counter() - t0), flush=True)


def mbs(res):
    return res['bytes'] / 1e6 / res['secs']


def synced_mbs(res):
    """zarr-python's write rate until its chunks were on disk."""
    return res['bytes'] / res.get('synced_secs', res['secs']) / 1e6


def rps(res):
    return res['regions'] / res['secs']


def mib(kib):
    return kib / 1024


def table(head, rows):
    print('| ' + ' | '.join(head) + ' |')
    print('|---' + '|---:' * (len(head) - 1) + '|')
    for row in rows:
        print('| ' + ' | '.join(row) + ' |')
    print()


def disk_limits(done):
    """Per workload, the write limit once the stored bytes must reach the disk: the codec's, or the
    plain file write speed (measured with the family's uncompressed workload) scaled by the
    compression ratio, whichever is lower. None where the family has no uncompressed workload."""
    disk = {(w.dtype, tuple(w.chunks)): w.r['limit']['file_write_mbs'] for w in done
            if 'file_write_mbs' in w.r['limit']}
    out = {}
    for w in done:
        d = disk.get((w.dtype, tuple(w.chunks)))
        stored = w.r['nds_read']['stored_bytes']
        if d and stored:
            out[w.name] = min(w.r['limit']['write'], d * w.r['nds_write']['bytes'] / stored)
    return out


def print_tables(done, cores):
    print('\n### Full write (ndstore: one nds_array_write; zarr-python: z[...] = data)\n')
    print('ndstore\'s write returns when every chunk is on disk (fsync); zarr-python\'s when its chunks '
          'are in the page cache. "zarr-python + sync": the same write timed until a sync(2) after it '
          'returns, i.e. until its chunks are on disk too.\n')
    with_disk = disk_limits(done)
    table(['workload', 'ndstore MB/s', 'zarr-python MB/s', 'zarr-python + sync MB/s', 'ratio',
           'ratio vs + sync', 'limit MB/s',
           'ndstore % of limit', 'limit incl. disk MB/s', 'ndstore % of it',
           'peak RSS MiB ndstore / zarr-python'],
          [[w.name, '%.0f' % mbs(r['nds_write']), '%.0f' % mbs(r['z_write']),
            '%.0f' % synced_mbs(r['z_write']),
            '%.2f' % (mbs(r['nds_write']) / mbs(r['z_write'])),
            '%.2f' % (mbs(r['nds_write']) / synced_mbs(r['z_write'])), '%.0f' % r['limit']['write'],
            '%.0f%%' % (100 * mbs(r['nds_write']) / r['limit']['write']),
            '%.0f' % with_disk[w.name] if w.name in with_disk else '',
            '%.0f%%' % (100 * mbs(r['nds_write']) / with_disk[w.name])
            if w.name in with_disk else '',
            '%.0f / %.0f' % (mib(r['nds_write']['rss_kib']), mib(r['z_write']['rss_kib']))]
           for w, r in ((w, w.r) for w in done)])
    print('### Full read, warm page cache (into a buffer faulted in beforehand, both sides)\n')
    rows = []
    for w in done:
        r = w.r
        n, z = r['nds_read'], r['z_read']
        added = mib(n['rss_kib'] - n['rss_before_kib'])
        bound = cores * 2 * w.chunk_bytes / MIB
        rows.append([w.name, '%.0f' % mbs(n), '%.0f' % mbs(z), '%.2f' % (mbs(n) / mbs(z)),
                     '%.0f' % r['limit']['read'], '%.0f%%' % (100 * mbs(n) / r['limit']['read']),
                     '%.0f / %.0f' % (mib(n['rss_kib']), mib(z['rss_kib'])),
                     '%.1f' % (mib(n['rss_kib']) - n['bytes'] / MIB),
                     '%.1f' % mib(n['rss_start_kib']),
                     '%.1f%s' % (added, '' if round(added, 1) <= bound else ' (over)'),
                     '%.1f' % bound])
    table(['workload', 'ndstore MB/s', 'zarr-python MB/s', 'ratio', 'limit MB/s',
           'ndstore % of limit', 'peak RSS MiB ndstore / zarr-python',
           'ndstore RSS - output MiB', 'of which process start MiB', 'added by the read MiB',
           'bound: %d x 2 chunks MiB' % cores], rows)
    print('### Random non-chunk-aligned region reads, %g s each (64^3, or 512^2 for float32)\n'
          % done[0].args.seconds)
    print('"cache on": a %d MiB chunk cache (about half the array); "cache = array": %d MiB, which '
          'holds every chunk, filling up during the phase.\n' % (CACHE_BYTES >> 20, CACHE_ALL_BYTES >> 20))
    keys = ('nds_rand_on', 'nds_rand_all', 'nds_rand_off', 'z_rand')
    table(['workload', 'ndstore cache on regions/s', 'ndstore cache = array regions/s',
           'ndstore cache off regions/s', 'zarr-python regions/s', 'ratio on', 'ratio = array',
           'ratio off', 'MB/s on / = array / off / zarr-python',
           'peak RSS MiB on / = array / off / zarr-python'],
          [[w.name] + ['%.0f' % rps(r[k]) for k in keys[:3]] + ['%.1f' % rps(r['z_rand'])] +
           ['%.1f' % (rps(r[k]) / rps(r['z_rand'])) for k in keys[:3]] +
           [' / '.join('%.0f' % mbs(r[k]) for k in keys),
            ' / '.join('%.0f' % mib(r[k]['rss_kib']) for k in keys)]
           for w, r in ((w, w.r) for w in done)])
    print_limits(done)
    print_scaling(done)


def print_limits(done):
    print('### Physical limit (nds_limit, %d threads): codec alone; none: memcpy and file I/O\n'
          % done[0].r['limit']['threads'])
    rows = []
    for w in done:
        lim = w.r['limit']
        io = ('%.0f / %.0f' % (lim['file_write_mbs'], lim['file_read_mbs'])
              if 'file_write_mbs' in lim else '')
        rows.append([w.name, '%.0f' % lim['compress_mbs'], '%.0f' % lim['decompress_mbs'], io,
                     '%.1f / %.1f / %.1f' % (lim['stored_bytes'] / 1e6,
                                             w.r['nds_read']['stored_bytes'] / 1e6,
                                             w.r['z_stored'] / 1e6)])
    table(['workload', 'compress (none: memcpy) MB/s', 'decompress MB/s',
           'file write / read MB/s', 'stored MB: codec alone / ndstore / zarr-python'],
          rows)


def print_scaling(done):
    rows = []
    for w in done:
        r = w.r
        if 'nds_write_1' not in r:
            continue
        n = r['nds_write']['threads']
        rows.append([w.name, '%.0f' % mbs(r['nds_write_1']), '%.0f' % mbs(r['nds_write']),
                     '%.2f' % (mbs(r['nds_write']) / mbs(r['nds_write_1'])),
                     '%.0f' % mbs(r['nds_read_1']), '%.0f' % mbs(r['nds_read']),
                     '%.2f' % (mbs(r['nds_read']) / mbs(r['nds_read_1']))])
    if rows:
        print('### Scaling: ndstore with 1 thread vs the default (writes: %d threads, 2 per core; '
              'reads from file://: 1 per core), target >= 1.8x\n' % n)
        table(['workload', 'write 1 thread MB/s', 'write default MB/s', 'ratio',
               'read 1 thread MB/s', 'read default MB/s', 'ratio'], rows)


def run_cp(args):
    """ndstore cp from a 2 GiB zarr v2 array (4-d: neuroglancer precomputed is x, y, z, channel) to
    three formats with the default memory budget; elapsed time and peak RSS of each cp."""
    side, shard = (128, 128) if args.quick else (1024, 256)
    shape, chunks = (side, side, side, 1), (64, 64, 64, 1)
    raw, src = os.path.join(args.tmp, 'cp.u16'), os.path.join(args.tmp, 'cp_source.zarr')
    zp.write_data(raw, shape, 'uint16', 20240603)
    made = run_json([args.nds_bench, '--mode', 'write', '--array', 'file://%s/' % src, '--input',
                     raw, '--codec', 'zstd:1', '--dtype', 'uint16', '--shape', csv(shape),
                     '--chunks', csv(chunks)])
    os.unlink(raw)
    dst = os.path.join(args.tmp, 'cp_dest')
    dests = [('zarr v3 sharded (%d^3 shards of 64^3 chunks, zstd-1)' % shard,
              {'driver': 'zarr3', 'schema': {'chunk_layout': {'write_chunk':
                                                              {'shape': [shard] * 3 + [1]}}}}),
             ('N5 (64^3 blocks, default gzip-1)', {'driver': 'n5'}),
             ('neuroglancer precomputed (64^3 chunks, raw)',
              {'driver': 'neuroglancer_precomputed'})]
    rows = []
    for name, spec in dests:
        spec['kvstore'] = 'file://%s/' % dst
        shutil.rmtree(dst, ignore_errors=True)
        secs, rss = run_measured([args.ndstore, 'cp', src, json.dumps(spec)], args.tmp)
        rows.append([name, '%.2f' % secs, '%.0f' % (made['bytes'] / 1e6 / secs),
                     '%.0f%s' % (mib(rss), '' if mib(rss) < 300 else ' (over)')])
        shutil.rmtree(dst, ignore_errors=True)
    shutil.rmtree(src, ignore_errors=True)
    print('### `ndstore cp` of a %.0f MiB zarr v2 array (%s uint16, 64^3 chunks, zstd-1), '
          'default memory budget, target < 300 MiB\n'
          % (made['bytes'] / MIB, 'x'.join(map(str, shape))))
    table(['destination', 'elapsed s', 'MB/s', 'peak RSS MiB'], rows)


def run_concurrent_reads(args):
    """8 threads reading all of one array at once on one context (nds_bench --readers 8), with a 64 MiB
    memory budget, with the default (256 MiB) and with 16 GiB (no bound): time and the peak RSS the
    reads added above their
    output buffers (faulted in before), which the budget bounds (docs/guarantees.md, "Memory
    budget")."""
    shape, chunks = ((16, 256, 512), (4, 256, 512)) if args.quick else ((32, 1024, 1024),
                                                                          (4, 1024, 1024))
    raw, src = os.path.join(args.tmp, 'conc.u16'), os.path.join(args.tmp, 'conc.zarr')
    zp.write_data(raw, shape, 'uint16', 20261127)
    run_json([args.nds_bench, '--mode', 'write', '--array', 'file://%s/' % src, '--input', raw,
              '--codec', 'zstd:1', '--dtype', 'uint16', '--shape', csv(shape), '--chunks',
              csv(chunks)])
    rows = []
    for budget in (64 << 20, 256 << 20, 16 << 30):  # the last: no effective bound
        runs = [run_json([args.nds_bench, '--mode', 'read', '--array', 'file://%s/' % src,
                          '--input', raw, '--readers', '8', '--memory-budget', str(budget)])
                for _ in range(args.reps)]
        r = best(runs, by_secs)
        rows.append(['%d MiB' % (budget >> 20) if budget < 16 << 30 else '16 GiB (no bound)', '%.2f' % r['secs'], '%.0f' % (r['bytes'] / 1e6 / r['secs']),
                     '%.0f' % mib(r['rss_kib'] - r['rss_before_kib'])])
    os.unlink(raw)
    shutil.rmtree(src, ignore_errors=True)
    print('### 8 concurrent full reads on one context (%s uint16, %.0f MiB chunks, zstd-1, file://), '
          'peak RSS above the 8 output buffers\n'
          % ('x'.join(map(str, shape)), 2 * np.prod(chunks) / MIB))
    table(['memory budget', 'elapsed s', 'MB/s (all readers)', 'peak RSS added MiB'], rows)


def check_disk(args):
    need = (64 if args.quick else 3600) * 10**6
    free = shutil.disk_usage(args.tmp).free
    if free < need:
        sys.exit('need about %.1f GB free under %s, have %.1f' % (need / 1e9, args.tmp, free / 1e9))


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--build', required=True, help='build dir with nds_bench, nds_limit, ndstore')
    ap.add_argument('--tmp', required=True, help='scratch dir (on the disk to measure)')
    ap.add_argument('--reps', type=int, default=1, help='best of N for every measurement')
    ap.add_argument('--only', help='comma-separated substrings of workload names, "cp" or '
                    '"concurrent"')
    ap.add_argument('--quick', action='store_true', help='small arrays, short phases')
    ap.add_argument('--seconds', type=float, help='random-read phase length (default 3)')
    args = ap.parse_args()
    args.nds_bench, args.nds_limit, args.ndstore = (os.path.join(args.build, n) for n in
                                                    ('nds_bench', 'nds_limit', 'ndstore'))
    args.seconds = args.seconds or (0.05 if args.quick else 3)
    args.limit_seconds = 0.01 if args.quick else 1
    args.only = [s for s in (args.only or '').split(',') if s]
    return args


def main():
    args = parse_args()
    start = time.perf_counter()
    check_disk(args)
    cores = os.cpu_count()
    print('zarr-python %s, numcodecs %s (blosc threads: %s), numpy %s, python %s; parent RSS '
          '%.0f MiB' % (zarr.__version__, numcodecs.__version__, numcodecs.blosc.get_nthreads(),
                        np.__version__, platform.python_version(), mib(zp.maxrss_kib())),
          flush=True)
    done = []
    for dtype, shape, seed, chunk_list, region in families(args.quick):
        todo = [(c, cn, cs) for c in chunk_list for cn, cs in CODECS]
        names = ['%s %s^%d %s' % (dtype, c[0], len(c), cn) for c, cn, _ in todo]
        todo = [t for t, n in zip(todo, names) if not args.only or any(s in n for s in args.only)]
        if not todo:
            continue
        raw = os.path.join(args.tmp, 'data.raw')
        t0 = time.perf_counter()
        zp.write_data(raw, shape, dtype, seed)
        print('data: %s %s, %.1f MB, generated in %.1f s (not timed)'
              % ('x'.join(map(str, shape)), dtype, os.path.getsize(raw) / 1e6,
                 time.perf_counter() - t0), flush=True)
        for chunks, cname, codec in todo:
            w = Workload(args, dtype, shape, raw, chunks, region, cname, codec)
            w.run(scaling=dtype == 'uint16' and chunks == chunk_list[0] and codec != 'none')
            done.append(w)
        os.unlink(raw)
    if done:
        print_tables(done, cores)
    if not args.only or 'cp' in args.only:
        run_cp(args)
    if not args.only or 'concurrent' in args.only:
        run_concurrent_reads(args)
    print('total time: %.0f s' % (time.perf_counter() - start))


if __name__ == '__main__':
    main()
