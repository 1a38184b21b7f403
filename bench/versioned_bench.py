#!/usr/bin/python3
"""The versioned store's benchmark rows (issue 18, item 6): one markdown table, the target beside
each number.

1. Reads through the adapter vs plain file://: the same uint16 array (512x512x256 in 64^3 chunks,
   zstd-1 and uncompressed, from the same .npy) in `file://D/plain/|zarr:` and in
   `file://D/v/|versioned:a/|zarr:`, `ndstore read URL -o x.npy` as whole processes, the two sides
   alternating, medians of --reps; also `ndstore write URL -i x.npy` into a fresh store each time
   (both sides fsync every file they write and its directory).
2-4. bench/nds_versioned_bench.c: objects and time of an atomic transaction of 1,000 keys, and of
   1 key into a store of 10^6 keys; base reads and time per lookup in a version of 10^6 keys
   (cold: a new handle per lookup; warm: one handle, cached nodes) against the tree height; 1,000
   zarr v3 arrays created and written in one atomic transaction on file://.
5. Garbage collection: `ndstore gc --keep-last 1 --grace 0s` of a store of about 1,000 versions
   (the first run reads the whole history), then again after 10 more versions (it reads the gc
   state and the 10 new commits): wall time of the process, commits read, objects listed, deleted.

usage: bench/versioned_bench.py BUILD_DIR [--reps N] [--quick] [--tmp DIR]
       BUILD_DIR holds ndstore and nds_versioned_bench (bench/run.sh builds them).
--quick: a small array, one repetition, 10^4 keys: a smoke run of a few seconds.
"""
import argparse
import json
import os
import re
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

CODECS = [('zstd-1', 'zstd:1'), ('none', 'none')]
READ_TARGET = 0.90  # versioned reads at least 90 % of plain file:// speed
ARRAY_MS_TARGET = 5.0  # per array amortised (the target is on Ceph RGW)


def run(cmd):
    """Runs cmd as a whole process; its wall seconds (exits on failure, with its stderr)."""
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    secs = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit('failed (%s): %s' % (' '.join(cmd), p.stderr.decode().strip()))
    return secs


class ReadCase:
    """One codec: the plain and the versioned side, written from the same .npy."""

    def __init__(self, nds, tmp, shape, chunks, codec):
        self.nds, self.tmp, self.shape, self.chunks, self.codec = nds, tmp, shape, chunks, codec

    def url(self, side):
        root = os.path.join(self.tmp, side)
        return 'file://%s/|zarr:' % root if side == 'plain' else 'file://%s/|versioned:a/|zarr:' % root

    def write(self, side, npy):
        root = os.path.join(self.tmp, side)
        shutil.rmtree(root, ignore_errors=True)
        subprocess.run([self.nds, 'create', self.url(side), '--shape', ','.join(map(str, self.shape)),
                        '--chunks', ','.join(map(str, self.chunks)), '--dtype', 'uint16',
                        '--codec', self.codec], check=True, stdout=subprocess.DEVNULL)
        return run([self.nds, 'write', self.url(side), '-i', npy])

    def read(self, side, npy):
        out = os.path.join(self.tmp, 'out.npy')
        if os.path.exists(out):
            os.unlink(out)
        secs = run([self.nds, 'read', self.url(side), '-o', out])
        if not np.array_equal(np.load(out, mmap_mode='r'), np.load(npy, mmap_mode='r')):
            sys.exit('ndstore read of %s gave other data' % self.url(side))
        return secs

    def measure(self, npy, reps):
        times = {k: [] for k in ('wp', 'wv', 'rp', 'rv')}
        for _ in range(reps):  # alternating, so a slow moment of the machine hits both sides
            times['wp'].append(self.write('plain', npy))
            times['wv'].append(self.write('v', npy))
        for _ in range(reps):
            times['rp'].append(self.read('plain', npy))
            times['rv'].append(self.read('v', npy))
        return {k: statistics.median(v) for k, v in times.items()}


def read_rows(args, tmp):
    shape, chunks = ((64, 128, 128), (32, 64, 64)) if args.quick else ((512, 512, 256), (64, 64, 64))
    raw, npy = os.path.join(tmp, 'data.raw'), os.path.join(tmp, 'in.npy')
    write_data(raw, shape, 'uint16', 7)
    np.save(npy, np.fromfile(raw, dtype='<u2').reshape(shape))
    os.unlink(raw)
    mb = np.prod(shape) * 2 / 1e6
    layout = 'uint16 %s / %s' % ('x'.join(map(str, shape)), 'x'.join(map(str, chunks)))
    rows = []
    for name, codec in CODECS:
        m = ReadCase(os.path.join(args.build, 'ndstore'), tmp, shape, chunks, codec).measure(npy, args.reps)
        ratio = m['rp'] / m['rv']  # versioned speed / plain speed
        rows.append(('read %s %s: versioned vs plain file://' % (layout, name),
                     '%.0f vs %.0f MB/s (%.2fx)' % (mb / m['rv'], mb / m['rp'], ratio),
                     'within 10 %% (>= %.2fx)' % READ_TARGET, 'met' if ratio >= READ_TARGET else 'MISSED'))
        rows.append(('write %s %s: versioned vs plain file:// (both fsync)' % (layout, name),
                     '%.0f vs %.0f MB/s (%.2fx)' % (mb / m['wv'], mb / m['wp'], m['wp'] / m['wv']),
                     '-', '-'))
    return rows


def objects(m):
    return '%d data, %d index, %d commit%s' % (m['data_objects'], m['index_objects'], m['commit_objects'],
                                               ' + head hint' if m['head_hint'] else '')


def objects_o1(m):
    """One data object (the values here are far below 64 MiB), one index object, one commit."""
    return m['data_objects'] <= 1 and m['index_objects'] == 1 and m['commit_objects'] == 1


def staging_row(small, large):
    """Staging raw keys in a transaction (nds_txn_write_key): linear, or worse?"""
    growth = (large['seconds'] / small['seconds']) / (large['keys'] / small['keys'])
    return ('staging %d vs %d raw keys in a transaction (nds_txn_write_key, no commit)'
            % (small['keys'], large['keys']),
            '%.1f vs %.1f ms (%.1fx the time per key)'
            % (small['seconds'] * 1e3, large['seconds'] * 1e3, growth),
            'linear (about 1x the time per key)', 'met' if growth < 2 else 'MISSED (superlinear)')


def engine_rows(args, tmp):
    cmd = [os.path.join(args.build, 'nds_versioned_bench'), os.path.join(tmp, 'engine')]
    if args.quick:
        cmd += ['--keys', '10000', '--batch', '1000', '--lookups', '100', '--arrays', '50']
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        sys.exit('failed (%s): %s' % (' '.join(cmd), p.stderr.decode().strip()))
    m, staging = {}, []
    for line in p.stdout.decode().splitlines():
        j = json.loads(line)
        m[j['what']] = j
        if j['what'] == 'staging':
            staging.append(j)
    c, one, b = m['commit'], m['commit_one'], m['build']
    cold, warm, arr = m['lookup_cold'], m['lookup_warm'], m['arrays']
    h = cold['height']
    rows = [
        ('atomic transaction of %d keys (%d B values) into an empty store: objects added'
         % (c['keys'], c['value_bytes']),
         objects(c), 'O(1): 1 data (per 64 MiB), 1 index, 1 commit + head',
         'met' if objects_o1(c) else 'MISSED'),
        ('commit of %d keys: time (fsynced; staging the keys in the transaction before it)' % c['keys'],
         '%.1f ms (+ %.1f ms)' % (c['seconds'] * 1e3, c['stage_seconds'] * 1e3), '-', '-'),
        staging_row(*staging),
        ('building the large version: %d keys in %d commits of %d'
         % (b['keys'], b['commits'], b['keys'] // b['commits']),
         '%.1f s (%.0f ms per commit)' % (b['seconds'], b['seconds'] * 1e3 / b['commits']), '-', '-'),
        ('commit of 1 key into a store of %d keys: objects added' % one['store_keys'], objects(one),
         'O(1): 1 data, 1 index, 1 commit + head', 'met' if objects_o1(one) else 'MISSED'),
        ('commit of 1 key into a store of %d keys: time (fsynced)' % one['store_keys'],
         '%.1f ms' % (one['seconds'] * 1e3), '-', '-'),
        ('lookup in a version of %d keys, cold (new handle): base reads (min/median/max)' % b['keys'],
         '%d / %d / %d (tree height %d)' % (cold['reads_min'], cold['reads_median'], cold['reads_max'], h),
         'height + 1 = %d' % (h + 1), 'met' if cold['reads_max'] <= h + 1 else 'MISSED'),
        ('lookup, cold: time (median / mean)',
         '%.0f / %.0f us' % (cold['seconds_median'] * 1e6, cold['seconds_mean'] * 1e6), '-', '-'),
        ('lookup, warm (nodes cached): base reads (min/median/max)',
         '%d / %d / %d' % (warm['reads_min'], warm['reads_median'], warm['reads_max']),
         '1 (the value only)', 'met' if warm['reads_max'] <= 1 else 'MISSED'),
        ('lookup, warm: time (median / mean)',
         '%.0f / %.0f us' % (warm['seconds_median'] * 1e6, warm['seconds_mean'] * 1e6), '-', '-'),
        ('%d zarr v3 arrays created + written in one atomic transaction on file://: per array'
         % arr['arrays'], '%.2f ms (total %.2f s, commit %.2f s)' % (arr['ms_per_array'], arr['seconds'],
                                                                     arr['commit_seconds']),
         '< %.0f ms on Ceph RGW (RGW not measured yet)' % ARRAY_MS_TARGET,
         'met on file://' if arr['ms_per_array'] < ARRAY_MS_TARGET else 'MISSED on file://'),
        ('%d arrays in one transaction: objects added' % arr['arrays'], objects(arr),
         'O(1): 1 data, 1 index, 1 commit + head', 'met' if objects_o1(arr) else 'MISSED'),
    ]
    return rows


GC_LINE1 = re.compile(r'deleted? (\d+) objects')
GC_LINE2 = re.compile(r'read (?:the whole history: )?(\d+) commits.*?, (\d+) objects listed')


def gc_run(nds, store, *flags):
    """One `ndstore gc --keep-last 1 --grace 0s` process: (seconds, deleted, commits read, listed)."""
    t0 = time.perf_counter()
    p = subprocess.run([nds, 'gc', store, '--keep-last', '1', '--grace', '0s'] + list(flags),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    secs = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit('ndstore gc failed: %s' % p.stderr.decode().strip())
    out = p.stdout.decode()
    d, r = GC_LINE1.search(out), GC_LINE2.search(out)
    if not d or not r:
        sys.exit('unexpected ndstore gc output: %s' % out)
    return secs, int(d.group(1)), int(r.group(1)), int(r.group(2))


def gc_rows(args, tmp):
    """gc on a store of about 1,000 versions (two passes over a uint8 array of one-row chunks of
    600 bytes: 64 chunks per version, each value in a data object), then on 10 more versions. Each
    point: a dry run (reads and listings: what deciding costs), a full-scan dry run for comparison,
    then the run itself (its deletions are fsynced, so it costs about what it deletes)."""
    nds = os.path.join(args.build, 'ndstore')
    rows_n = 3200 if args.quick else 32000
    root = os.path.join(tmp, 'gc')
    store = 'file://%s/' % root
    url = store + '|versioned:a/|zarr3:'
    subprocess.run([nds, 'create', url, '--shape', '%d,600' % rows_n, '--chunks', '1,600',
                    '--dtype', 'uint8', '--codec', 'none'], check=True, stdout=subprocess.DEVNULL)
    raw = os.path.join(tmp, 'gc.raw')
    for seed in (1, 2):
        np.random.default_rng(seed).integers(0, 255, (rows_n, 600), dtype=np.uint8).tofile(raw)
        run([nds, 'write', url, '-i', raw, '--raw'])
    versions = len(os.listdir(os.path.join(root, 'commits')))
    dry1 = gc_run(nds, store, '--dry-run')
    first = gc_run(nds, store)
    np.random.default_rng(3).integers(0, 255, (640, 600), dtype=np.uint8).tofile(raw)
    run([nds, 'write', url, '-r', '[0:640, :]', '-i', raw, '--raw'])
    more = len(os.listdir(os.path.join(root, 'commits'))) - versions
    full2 = gc_run(nds, store, '--dry-run', '--full-scan')
    dry2 = gc_run(nds, store, '--dry-run')
    second = gc_run(nds, store)
    decide = '%.0f ms: %d commits read, %d objects listed'
    done = '%.0f ms: %d objects deleted'
    return [
        ('gc (keep last 1) of %d versions, first run (no gc state: whole history): deciding (dry run)'
         % versions, decide % (dry1[0] * 1e3, dry1[2], dry1[3]), '-', '-'),
        ('gc, first run: the run (state written, deletions fsynced)',
         done % (first[0] * 1e3, first[1]), '-', '-'),
        ('gc after %d more versions: deciding, full scan (dry run, --full-scan)' % more,
         decide % (full2[0] * 1e3, full2[2], full2[3]), '-', '-'),
        ('gc after %d more versions: deciding, incremental from the gc state (dry run)' % more,
         decide % (dry2[0] * 1e3, dry2[2], dry2[3]),
         'reads only the %d new commits' % more, 'met' if dry2[2] == more else 'MISSED'),
        ('gc after %d more versions: the run' % more, done % (second[0] * 1e3, second[1]),
         'deletes what the full scan would (%d)' % full2[1],
         'met' if second[1] == full2[1] else 'MISSED'),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('build', help='the build directory (ndstore and nds_versioned_bench)')
    ap.add_argument('--reps', type=int, default=5)
    ap.add_argument('--quick', action='store_true', help='small sizes, one repetition')
    ap.add_argument('--tmp', default=None)
    args = ap.parse_args()
    args.build = os.path.abspath(args.build)
    if args.quick:
        args.reps = 1
    tmp = os.path.abspath(tempfile.mkdtemp(prefix='nds-versioned-bench-', dir=args.tmp))
    try:
        smoke = ' (--quick: a smoke run, the numbers mean nothing)' if args.quick else ''
        print('versioned store (issue 18) on file://: whole `ndstore` processes (medians of %d, alternating)'
              ' and bench/nds_versioned_bench%s' % (args.reps, smoke))
        print('| measurement | result | target | |')
        print('|---|---|---|---|')
        for row in read_rows(args, tmp) + engine_rows(args, tmp) + gc_rows(args, tmp):
            print('| %s | %s | %s | %s |' % row, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__':
    main()
