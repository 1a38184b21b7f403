#!/usr/bin/python3
"""N5 interoperability between the ndstore command line and zarr-python's N5 store.

Usage: /usr/bin/python3 n5_interop.py NDSTORE_BINARY [FIXTURES_DIR] [-k SUBSTRING]

FIXTURES_DIR (default: the repository's tests/fixtures) holds n5_zarr_python/, or is n5_zarr_python itself.
Runs with Debian's zarr-python 2.13, numcodecs and numpy (python3-zarr); the store is
zarr.n5.N5FSStore (which needs python3-fsspec), or zarr.n5.N5Store when fsspec is missing (same
format, said on the first line). Nothing from PyPI.

Dimension order: ndstore's dimensions are N5's attributes.json order (dimension 0 fastest inside a
block); zarr-python reverses them, so an ndstore array `a` is zarr-python's `a.T` (all axes
reversed) and vice versa.
  (a) zarr-python writes N5 datasets (every N5 data type, every compression it can write, ragged
      edges, missing blocks, groups, attributes), and `ndstore read` must return the transpose of
      what zarr-python reads back.
  (b) `ndstore create` + `ndstore write` write datasets (every compression, every data type,
      clipped edge blocks, groups, attributes, resize, datasets at the store root), and zarr-python
      must read exactly the transpose; ndstore also updates datasets zarr-python wrote.
  (c) every dataset of FIXTURES_DIR/n5_zarr_python/{raw,gzip,bzip2,xz,blosc} reads as the
      transpose of expected/<codec>.npy (element (i, j) = 4*i + j), and verifies.
Comparisons are exact (bit for bit). Prints one line per case ("ok NAME" or "FAIL NAME REASON")
and then "N passed, N failed"; exits 1 on any failure. Everything is written under one temporary
directory, removed at the end.
"""
import json
import os
import sys
import warnings

import numpy as np
import zarr
from numcodecs import BZ2, LZMA, Blosc, GZip, Zlib, Zstd

from interop_common import CaseFail, case, newdir, nds, nds_ok, nds_read, nds_write, run

STORE_CLASS = None  # zarr.n5.N5FSStore, or N5Store without fsspec

N5_DTYPES = ['uint8', 'uint16', 'uint32', 'uint64', 'int8', 'int16', 'int32', 'int64',
             'float32', 'float64']

warnings.simplefilter('ignore')  # zarr-python warns that not every N5 reader has blosc


def store(path):
    return STORE_CLASS(path)


# ---- running ndstore ----------------------------------------------------------------------------

def url(path):
    return 'file://%s|n5:' % path


def nds_create(path, dims, block, dtype, compression, extra=None):
    """ndstore create with an N5 "metadata" document (attributes.json members)."""
    meta = {'dimensions': list(dims), 'blockSize': list(block), 'dataType': dtype}
    if compression is not None:
        meta['compression'] = compression
    meta.update(extra or {})
    spec = {'driver': 'n5', 'kvstore': 'file://' + path, 'metadata': meta, 'create': True}
    nds_ok('create', json.dumps(spec))


def expect_failure(args, must_contain):
    """ndstore must exit 1 with one stderr line containing every string in must_contain."""
    r = nds(*args)
    lines = [ln for ln in r.stderr.split('\n') if ln.strip()]
    if r.returncode != 1 or len(lines) != 1:
        raise CaseFail('expected exit 1 and one error line, got exit %d: %r' %
                       (r.returncode, r.stderr[:400]))
    for s in must_contain:
        if s not in lines[0]:
            raise CaseFail('error line does not name %r: %r' % (s, lines[0]))


# ---- data and comparison ------------------------------------------------------------------------

def random_data(dtype, shape, seed):
    """Random values over the type's whole range (floats: normal values and specials)."""
    dt = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape, dtype=np.int64))
    if dt.kind in 'iu':
        info = np.iinfo(dt)
        v = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
        v[:2] = [info.min, info.max][:n]
    else:
        v = (rng.standard_normal(n) * 100).astype(dt)
        sp = [0.0, -0.0, np.inf, -np.inf, np.nan, float(np.finfo(dt).max)][:n]
        v[:len(sp)] = sp
    return v.reshape(shape)


def compare(got, want, what='values'):
    """Exact comparison: shape, dtype and bits (any NaN equals any NaN)."""
    if got.shape != want.shape:
        raise CaseFail('%s: shape %s, expected %s' % (what, got.shape, want.shape))
    if got.dtype.newbyteorder('=') != want.dtype.newbyteorder('='):
        raise CaseFail('%s: dtype %s, expected %s' % (what, got.dtype, want.dtype))
    g, w = got.astype(want.dtype.newbyteorder('=')), want.astype(want.dtype.newbyteorder('='))
    if g.dtype.kind == 'f':
        same = (g.view('u%d' % g.itemsize) == w.view('u%d' % w.itemsize)) | (np.isnan(g) &
                                                                              np.isnan(w))
    else:
        same = g == w
    if not same.all():
        idx = tuple(int(i) for i in np.argwhere(~same)[0])
        raise CaseFail('%s differ: %d elements, first at %s: %r != %r' %
                       (what, int((~same).sum()), idx, g[idx], w[idx]))


def zarr_open(path, sub=None):
    return zarr.open_array(store=store(path), path=sub, mode='r')


# ---- (a) zarr-python writes, ndstore reads ------------------------------------------------------

COMPRESSORS = {
    'raw': None, 'gzip5': GZip(5), 'zlib3': Zlib(3), 'bz2-2': BZ2(2), 'xz4': LZMA(preset=4),
    'blosc-lz4-shuffle': Blosc('lz4', 5, Blosc.SHUFFLE), 'zstd3': Zstd(3),
    'blosc-zstd-bitshuffle': Blosc('zstd', 3, Blosc.BITSHUFFLE),
}


def a_roundtrip(tag, zshape, zchunks, dtype, compressor, sub='a', data=None):
    """zarr-python writes (its own dimension order), ndstore must read the transpose."""
    d = newdir(tag)
    root = zarr.group(store=store(d))
    z = root.create_dataset(sub, shape=zshape, chunks=zchunks, dtype=dtype, compressor=compressor)
    want = random_data(dtype, zshape, len(tag)) if data is None else data
    z[...] = want
    compare(nds_read(url(os.path.join(d, sub))), np.transpose(z[...]))
    compare(nds_read(url(os.path.join(d, sub))), np.transpose(want))


def a_cases():
    for i, dt in enumerate(N5_DTYPES):
        case('a/dtype/%s' % dt, a_roundtrip, 'ad%d' % i, (13, 7), (5, 3), dt, GZip(1))
    for name, comp in COMPRESSORS.items():
        case('a/compression/%s' % name, a_roundtrip, 'ac-' + name, (40, 33), (16, 10), 'int16',
             comp)
    case('a/3d-ragged', a_roundtrip, 'a3', (9, 10, 11), (4, 3, 5), 'float32', Zstd(1))
    case('a/1d', a_roundtrip, 'a1', (1000,), (64,), 'uint64', None)
    case('a/missing-blocks', a_missing_blocks)
    case('a/attributes', a_attributes)
    case('a/array-at-store-root', a_root_array)
    case('a/nested-group', a_roundtrip, 'ang', (6, 5), (2, 2), 'uint8', BZ2(1), 'g1/g2/a')


def a_missing_blocks():
    d = newdir('amiss')
    z = zarr.open_array(store=store(d), mode='w', shape=(10, 12), chunks=(4, 5), dtype='uint16',
                        compressor=GZip(1))
    z[0:4, 5:10] = 7
    z[8:10, 10:12] = 9
    compare(nds_read(url(d)), np.transpose(z[...]))
    # `ndstore ls` lines are "SIZE  KEY", maybe followed by a note on metadata keys.
    blocks = sorted(ln.split()[1] for ln in nds_ok('ls', d).stdout.splitlines()[:-1])
    if blocks != ['1/0', '2/2', 'attributes.json']:
        raise CaseFail('stored keys %s' % blocks)


def a_attributes():
    d = newdir('aattrs')
    z = zarr.open_array(store=store(d), mode='w', shape=(4, 3), chunks=(2, 2), dtype='int32')
    z.attrs['resolution'] = [4.0, 40.0]
    z.attrs['units'] = ['nm', 'nm']
    got = json.loads(nds_ok('attrs', url(d)).stdout)
    if got != {'resolution': [4.0, 40.0], 'units': ['nm', 'nm']}:
        raise CaseFail('attributes %r' % got)


def a_root_array():
    d = newdir('aroot')
    z = zarr.open_array(store=store(d), mode='w', shape=(5, 6), chunks=(2, 4), dtype='float64',
                        compressor=Blosc('zstd', 1, Blosc.NOSHUFFLE))
    z[...] = random_data('float64', (5, 6), 3)
    compare(nds_read(url(d)), np.transpose(z[...]))


# ---- (b) ndstore writes, zarr-python reads ------------------------------------------------------

N5_COMPRESSIONS = {
    'raw': {'type': 'raw'},
    'gzip5': {'type': 'gzip', 'level': 5},
    'gzip-zlib': {'type': 'gzip', 'level': 3, 'useZlib': True},
    'bzip2': {'type': 'bzip2', 'blockSize': 2},
    'xz': {'type': 'xz', 'preset': 4},
    'blosc': {'type': 'blosc', 'cname': 'lz4', 'clevel': 5, 'shuffle': 1, 'blocksize': 0},
    'blosc-bitshuffle': {'type': 'blosc', 'cname': 'zstd', 'clevel': 3, 'shuffle': 2},
    'zstd': {'type': 'zstd', 'level': 3},
    'default': None,
}


def b_roundtrip(tag, dims, block, dtype, compression):
    """ndstore writes (N5 order), zarr-python must read the transpose."""
    d = newdir(tag)
    nds_create(d, dims, block, dtype, compression)
    want = random_data(dtype, tuple(dims), len(tag))
    nds_write(url(d), want)
    z = zarr_open(d)
    if z.shape != tuple(reversed(dims)) or z.chunks != tuple(reversed(block)):
        raise CaseFail('zarr-python sees shape %s chunks %s' % (z.shape, z.chunks))
    compare(z[...], np.transpose(want))


def b_cases():
    for i, dt in enumerate(N5_DTYPES):
        case('b/dtype/%s' % dt, b_roundtrip, 'bd%d' % i, [13, 7], [5, 3], dt, {'type': 'gzip'})
    for name, comp in N5_COMPRESSIONS.items():
        case('b/compression/%s' % name, b_roundtrip, 'bc-' + name, [41, 30], [16, 7], 'uint16',
             comp)
    case('b/3d-clipped-edges', b_roundtrip, 'b3', [9, 10, 11], [4, 3, 5], 'int64', None)
    case('b/1d', b_roundtrip, 'b1', [777], [100], 'float32', {'type': 'xz'})
    case('b/clipped-blocks-on-disk', b_clipped_on_disk)
    case('b/codec-strings', b_codec_strings)
    case('b/attributes', b_attributes)
    case('b/groups', b_groups)
    case('b/resize', b_resize)
    case('b/update-zarr-python-dataset', b_update)
    case('b/errors', b_errors)


def b_clipped_on_disk():
    """The corner block is written clipped (N5 writers do), and zarr-python still reads it."""
    d = newdir('bclip')
    nds_create(d, [5, 4], [3, 3], 'uint16', {'type': 'raw'})
    nds_write(url(d), np.arange(20, dtype='uint16').reshape(5, 4))
    with open(os.path.join(d, '1', '1'), 'rb') as f:
        blk = f.read()
    if blk[:12] != bytes([0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 1]) or len(blk) != 12 + 2 * 2:
        raise CaseFail('corner block %s' % blk.hex())
    if blk[12:] != bytes([0, 15, 0, 19]):  # elements (3, 3) and (4, 3), dimension 0 fastest
        raise CaseFail('corner block payload %s' % blk[12:].hex())
    compare(zarr_open(d)[...], np.arange(20, dtype='uint16').reshape(5, 4).T)


def b_codec_strings():
    """`ndstore create --codec` strings become N5 compressions zarr-python decodes."""
    for codec in ['none', 'gzip:2', 'zlib:4', 'bz2:3', 'zstd:2', 'blosc:lz4hc:4:noshuffle']:
        d = newdir('bcs')
        nds_ok('create', url(d), '--shape', '30,20', '--chunks', '7,9', '--dtype', 'int32',
               '--codec', codec)
        want = random_data('int32', (30, 20), 5)
        nds_write(url(d), want)
        compare(zarr_open(d)[...], want.T, codec)


def b_attributes():
    d = newdir('battrs')
    nds_create(d, [6, 4], [3, 2], 'uint8', None, {'axes': ['x', 'y'], 'units': ['nm', 'nm']})
    nds_ok('attrs', url(d), '--set', json.dumps({'resolution': [8, 8], 'note': 'a/b'}))
    z = zarr_open(d)
    if dict(z.attrs) != {'resolution': [8, 8], 'note': 'a/b'}:
        raise CaseFail('zarr-python attributes %r' % dict(z.attrs))
    z2 = zarr.open_array(store=store(d), mode='r+')
    z2.attrs['from_python'] = 1
    got = json.loads(nds_ok('attrs', url(d)).stdout)
    if got.get('from_python') != 1 or got.get('note') != 'a/b':
        raise CaseFail('ndstore attributes %r' % got)


def b_groups():
    d = newdir('bgrp')
    nds_ok('group', 'file://' + d, 'raw/s0', '--parents', '--format', 'n5')
    nds_create(os.path.join(d, 'raw', 's0', 'data'), [8, 6], [4, 4], 'uint16', None)
    nds_write(url(os.path.join(d, 'raw', 's0', 'data')),
              np.arange(48, dtype='uint16').reshape(8, 6))
    g = zarr.open_group(store=store(d), mode='r')
    if list(g.group_keys()) != ['raw'] or list(g['raw'].group_keys()) != ['s0']:
        raise CaseFail('groups %r' % list(g.group_keys()))
    compare(g['raw/s0/data'][...], np.arange(48, dtype='uint16').reshape(8, 6).T)
    with open(os.path.join(d, 'attributes.json')) as f:
        if json.load(f) != {'n5': '2.0.0'}:
            raise CaseFail('root attributes.json')


def b_resize():
    d = newdir('bresize')
    nds_create(d, [10, 9], [4, 4], 'int16', {'type': 'zstd', 'level': 1}, {'axes': ['x', 'y']})
    data = random_data('int16', (10, 9), 7)
    nds_write(url(d), data)
    nds_ok('resize', url(d), '--shape', '6,12')
    z = zarr_open(d)
    want = np.zeros((6, 12), 'int16')
    want[:6, :9] = data[:6, :9]
    compare(z[...], want.T)
    compare(nds_read(url(d)), want)
    if json.loads(nds_ok('attrs', url(d)).stdout) != {'axes': ['x', 'y']}:
        raise CaseFail('attributes lost by resize')


def b_update():
    """ndstore writes a region into a dataset zarr-python wrote (whole blocks zarr-python wrote
    are re-encoded clipped); both read the same."""
    d = newdir('bupd')
    z = zarr.open_array(store=store(d), mode='w', shape=(11, 9), chunks=(4, 4), dtype='float32',
                        compressor=GZip(1))
    z[...] = random_data('float32', (11, 9), 11)
    mine = nds_read(url(d))
    patch = random_data('float32', (5, 6), 12)
    nds_write(url(d), patch, '[3:8, 5:11]')
    mine[3:8, 5:11] = patch
    compare(nds_read(url(d)), mine)
    compare(zarr_open(d)[...], mine.T)


def b_errors():
    d = newdir('berr')
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, 'attributes.json'), 'w') as f:
        json.dump({'dimensions': [4], 'blockSize': [2], 'dataType': 'uint8',
                   'compression': {'type': 'lz4', 'blockSize': 65536}}, f)
    expect_failure(['read', url(d)], ['compression "lz4" is not supported'])
    d = newdir('bcorrupt')
    nds_create(d, [4, 4], [2, 2], 'uint8', {'type': 'gzip'})
    nds_write(url(d), np.ones((4, 4), 'uint8'))
    with open(os.path.join(d, '1', '0'), 'r+b') as f:
        f.write(bytes([0, 0, 0, 2, 0, 0, 0, 9]))  # block dimension 9 > blockSize 2
    r = nds('verify', url(d))
    if r.returncode != 1 or 'bad: 1/0' not in r.stdout or 'block dimension 0 is 9' not in r.stdout:
        raise CaseFail('verify: exit %d, %r' % (r.returncode, r.stdout[:400]))


# ---- (c) the fixtures ---------------------------------------------------------------------------

def c_fixture(fixtures, name):
    want = np.load(os.path.join(fixtures, 'expected', name + '.npy'))
    got = nds_read(url(os.path.join(fixtures, name)))
    compare(got, want.T)
    ii, jj = np.indices(got.shape)
    compare(got, (4 * ii + jj).astype('uint16'), 'element (i, j) = 4i + j')
    nds_ok('verify', url(os.path.join(fixtures, name)))


def c_cases(fixtures):
    for name in ['raw', 'gzip', 'bzip2', 'xz', 'blosc']:
        case('c/fixture/%s' % name, c_fixture, fixtures, name)


def run_cases(fixtures):
    global STORE_CLASS
    if os.path.isdir(os.path.join(fixtures, 'n5_zarr_python')):
        fixtures = os.path.join(fixtures, 'n5_zarr_python')
    try:
        import fsspec  # noqa: F401  (N5FSStore needs it)
        STORE_CLASS = zarr.n5.N5FSStore
    except ImportError:
        STORE_CLASS = zarr.n5.N5Store
    print('store: zarr.n5.%s (zarr-python %s)' % (STORE_CLASS.__name__, zarr.__version__))
    a_cases()
    b_cases()
    c_cases(fixtures)


def main(argv):
    return run(argv, 'n5_interop.py', 'n5', run_cases)


if __name__ == '__main__':
    sys.exit(main(sys.argv))
