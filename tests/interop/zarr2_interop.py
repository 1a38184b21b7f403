#!/usr/bin/python3
"""zarr v2 interoperability between the ndstore command line and zarr-python.

Usage: /usr/bin/python3 zarr2_interop.py NDSTORE_BINARY [FIXTURES_DIR] [-k SUBSTRING]

Runs with Debian's zarr-python 2.13, numcodecs and numpy (python3-zarr); nothing from PyPI.
  (a) zarr-python writes arrays (every dtype ndstore supports, both byte orders, C and F order, both
      dimension separators, every compressor, ragged edges, missing chunks, special fill values),
      and `ndstore read SPEC -o out.npy` must return exactly what zarr-python reads back.
  (b) `ndstore create` + `ndstore write -i in.npy` write arrays (every codec string and dtype,
      partial and strided regions, Fortran-order and big-endian .npy input), and zarr-python must
      read exactly what was written; ndstore also updates arrays zarr-python wrote.
  (c) every array of FIXTURES_DIR/zarr2_zarr_python/data.zarr reads as expected/<name>.npy (fixed
      width strings too); the object array (vlen-utf8) reads as JSON Lines equal to zarr-python's.
  (e) variable-length strings and bytes (object arrays with the VLenUTF8 / VLenBytes filters) both
      ways, through JSON Lines (`ndstore read -o x.jsonl`, `ndstore write -i x.jsonl`).
  (d) consolidated metadata: zarr.consolidate_metadata's .zmetadata is listed by `ndstore ls -c`, and
      arrays whose own .zarray/.zattrs were removed read through it ("consolidated": true); the
      .zmetadata `ndstore group consolidate` writes equals zarr-python's and zarr.open_consolidated
      reads the hierarchy through it alone.
  (f) attributes holding integers beyond 64 bits (Python ints are unbounded; json-c clamps them):
      what zarr-python writes, `ndstore attrs` and `ndstore info --json` show digit for digit, and
      what `ndstore attrs --set` stores, zarr-python reads back equal.
Comparisons are exact: bit for bit, except that any NaN equals any NaN (payloads need not survive).
Prints one line per case ("ok NAME" or "FAIL NAME REASON") and then "N passed, N failed"; exits 1 on
any failure. Everything is written under one temporary directory, removed at the end.
"""
import base64
import json
import os
import re
import sys

import numpy as np
import zarr
from numcodecs import (BZ2, CRC32, LZ4, Adler32, AsType, Blosc, BitRound, Delta,
                       FixedScaleOffset, GZip, PackBits, Quantize, Shuffle, VLenBytes, VLenUTF8,
                       Zlib, Zstd)

from interop_common import (CaseFail, case, describe, newdir, nds, nds_ok, nds_read, nds_write,
                            run, tmp_path)

# Every dtype ndstore supports that zarr-python can write, in both byte orders where there is one.
DTYPES = ['|b1', '|i1', '|u1']
for _code in ['i2', 'i4', 'i8', 'u2', 'u4', 'u8', 'f2', 'f4', 'f8', 'c8', 'c16']:
    DTYPES += ['<' + _code, '>' + _code]

NDS_DTYPE_NAMES = {
    'b1': 'bool', 'i1': 'int8', 'i2': 'int16', 'i4': 'int32', 'i8': 'int64', 'u1': 'uint8',
    'u2': 'uint16', 'u4': 'uint32', 'u8': 'uint64', 'f2': 'float16', 'f4': 'float32',
    'f8': 'float64', 'c8': 'complex64', 'c16': 'complex128',
}


# ---- running ndstore ----------------------------------------------------------------------------

def expect_clean_failure(args, must_contain):
    """ndstore must exit 1 with exactly one stderr line containing every string in must_contain."""
    r = nds(*args)
    lines = [ln for ln in r.stderr.split('\n') if ln.strip()]
    if r.returncode != 1:
        raise CaseFail('expected exit 1, got %s' % describe(args, r))
    if len(lines) != 1:
        raise CaseFail('expected one error line, got %d: %r' % (len(lines), r.stderr[:400]))
    for s in must_contain:
        if s.lower() not in lines[0].lower():
            raise CaseFail('error line does not name %r: %r' % (s, lines[0]))
    twice = re.search(r'\b([\w.-]+): \1: ', lines[0])
    if twice:
        raise CaseFail('error line repeats its context %r: %r' % (twice.group(0), lines[0]))


# ---- data and comparison ------------------------------------------------------------------------

def float_specials(dt):
    fi = np.finfo(dt)
    return [0.0, -0.0, np.inf, -np.inf, np.nan, float(fi.max), float(fi.min), float(fi.tiny),
            float(fi.smallest_subnormal), -float(fi.smallest_subnormal), 1.0, -1.5]


def random_data(dtype, shape, seed):
    """Random values of dtype over its whole range, including the extremes and float specials."""
    dt = np.dtype(dtype)
    native = dt.newbyteorder('=')
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape, dtype=np.int64))
    if dt.kind == 'b':
        v = rng.integers(0, 2, n).astype(bool)
    elif dt.kind in 'iu':
        info = np.iinfo(native)
        v = rng.integers(info.min, info.max, n, dtype=native, endpoint=True)
        v[:2] = [info.min, info.max][:n]
    elif dt.kind == 'f':
        v = (rng.standard_normal(n) * 100).astype(native)
        sp = float_specials(native)[:n]
        v[:len(sp)] = sp
    else:
        part = np.dtype('f%d' % (dt.itemsize // 2))
        re = (rng.standard_normal(n) * 100).astype(part)
        im = (rng.standard_normal(n) * 100).astype(part)
        sp = float_specials(part)
        re[:min(n, len(sp))] = sp[:n]
        im[:min(n, len(sp))] = sp[::-1][:n]
        v = (re + 1j * im).astype(native)
        # re + 1j*im turns (inf, x) into (inf, nan) on some inputs: set the parts directly instead.
        f = v.view(part)
        f[0::2], f[1::2] = re, im
    return v.reshape(shape).astype(dt)


def smooth_data(dtype, shape, seed):
    """A ramp plus a little seeded noise: compressible, like real images."""
    dt = np.dtype(dtype)
    native = dt.newbyteorder('=')
    rng = np.random.default_rng(seed)
    ramp = np.zeros(shape, dtype=np.int64)
    for d, ix in enumerate(np.indices(shape)):
        ramp += ix * (d + 1) * 3
    noise = rng.integers(0, 4, shape)
    if dt.kind == 'b':
        v = (ramp // 7 + noise // 3) % 2 == 1
    elif dt.kind in 'iu':
        info = np.iinfo(native)
        span = int(info.max) - int(info.min) + 1
        if native.itemsize >= 8:  # the ramp fits; a modulo by 2**64 would overflow int64
            v = (ramp + noise).astype(native)
        else:
            v = ((ramp + noise - int(info.min)) % span + int(info.min)).astype(native)
    elif dt.kind == 'f':
        v = (ramp * 0.25 + noise).astype(native)
    else:
        v = (ramp * 0.25 + 1j * noise).astype(native)
    return v.astype(dt)


def bits(a):
    """Float or complex array flattened to (float parts, unsigned bit patterns)."""
    part = a.dtype.itemsize // 2 if a.dtype.kind == 'c' else a.dtype.itemsize
    flat = np.ascontiguousarray(a).reshape(-1)
    f = flat.view('f%d' % part)
    return f, f.view('u%d' % part)


def compare(got, want, what='values'):
    """Exact comparison; NaN equals NaN. got must be in host byte order (ndstore's .npy output)."""
    want = np.asarray(want)
    native = want.dtype.newbyteorder('=')
    if got.dtype != native:
        raise CaseFail('%s: dtype %s, expected %s' % (what, got.dtype.str, native.str))
    if got.shape != want.shape:
        raise CaseFail('%s: shape %s, expected %s' % (what, got.shape, want.shape))
    w = want.astype(native)
    if got.size == 0:
        return
    if native.kind in 'fc':
        gf, gb = bits(got)
        wf, wb = bits(w)
        gnan, wnan = np.isnan(gf), np.isnan(wf)
        bad = (gnan != wnan) | ((gb != wb) & ~gnan)
        step = 2 if native.kind == 'c' else 1
        bad_elems = np.flatnonzero(bad) // step
    else:
        bad_elems = np.flatnonzero(np.ascontiguousarray(got).reshape(-1)
                                   != np.ascontiguousarray(w).reshape(-1))
    if bad_elems.size:
        i = int(bad_elems[0])
        idx = np.unravel_index(i, got.shape) if got.ndim else ()
        raise CaseFail('%s: %d element(s) differ, first at %s: got %r, expected %r'
                       % (what, len(np.unique(bad_elems)), tuple(int(x) for x in idx),
                          got.reshape(-1)[i], w.reshape(-1)[i]))


def fill_json(v):
    """A fill value as zarr v2 JSON (what --fill and "fill_value" take)."""
    if isinstance(v, complex):
        return [fill_json(v.real), fill_json(v.imag)]
    if isinstance(v, float):
        if np.isnan(v):
            return 'NaN'
        if np.isinf(v):
            return 'Infinity' if v > 0 else '-Infinity'
    return v


# ---- (a) zarr-python writes, ndstore reads ------------------------------------------------------

def zarr_create(path, shape, chunks, dtype, compressor, order='C', sep='.', fill=0, filters=None):
    store = zarr.DirectoryStore(path, dimension_separator=sep)
    return zarr.open(store=store, mode='w', shape=shape, chunks=chunks, dtype=dtype,
                     compressor=compressor, order=order, fill_value=fill, filters=filters)


def a_roundtrip(tag, shape, chunks, dtype, compressor, order='C', sep='.', fill=0, data=None,
                region=None, spec_form='path'):
    """zarr-python writes data (into region, or everywhere); ndstore must read what zarr reads."""
    path = os.path.join(newdir(tag), 'a.zarr')
    z = zarr_create(path, shape, chunks, dtype, compressor, order, sep, fill)
    if data is not None:
        z[region if region is not None else Ellipsis] = data
    spec = path if spec_form == 'path' else 'file://%s|zarr:' % path
    got = nds_read(spec)
    compare(got, z[...])


def a_dtype_cases():
    codecs = [Blosc('lz4', 5, Blosc.SHUFFLE), Zstd(1)]
    k = 0
    for dtype in DTYPES:
        for order in 'CF':
            sep = '.' if k % 2 == 0 else '/'
            comp = codecs[k // 2 % 2]
            shape, chunks = (13, 17, 5), (4, 6, 3)
            data = random_data(dtype, shape, seed=k)
            case('a/dtype/%s/%s/sep%s/%s' % (dtype, order, sep, comp.codec_id), a_roundtrip,
                 'adt%d' % k, shape, chunks, dtype, comp, order, sep, 0, data)
            k += 1


def all_compressors():
    """Every compressor zarr-python can write that ndstore must read."""
    out = [('none', None), ('zstd1', Zstd(1)), ('zstd9', Zstd(9)), ('zstd22', Zstd(22)),
           ('zstd-5', Zstd(-5))]
    for cname in ['lz4', 'lz4hc', 'blosclz', 'zstd', 'zlib']:
        for shuffle in (0, 1, 2):
            out.append(('blosc-%s-s%d' % (cname, shuffle), Blosc(cname, 5, shuffle)))
    out += [('blosc-lz4-autoshuffle', Blosc('lz4', 5, Blosc.AUTOSHUFFLE)),
            ('blosc-lz4-clevel0', Blosc('lz4', 0, 1)), ('blosc-zstd-clevel9', Blosc('zstd', 9, 2)),
            ('blosc-lz4-blocksize256', Blosc('lz4', 5, 1, blocksize=256)),
            ('gzip1', GZip(1)), ('gzip9', GZip(9)), ('zlib1', Zlib(1)), ('zlib9', Zlib(9)),
            ('bz2-1', BZ2(1)), ('bz2-9', BZ2(9)), ('lz4-1', LZ4(1)), ('lz4-20', LZ4(20))]
    return out


def a_compressor_cases():
    for cname, comp in all_compressors():
        for i, dtype in enumerate(['|u1', '<u2', '>i4', '<f8', '>c16']):
            shape, chunks = (70, 90), (32, 40)
            data = smooth_data(dtype, shape, seed=i)
            case('a/codec/%s/%s' % (cname, dtype), a_roundtrip, 'acc', shape, chunks, dtype, comp,
                 'C', '.', 0, data)
        # Incompressible data: blosc stores such blocks verbatim, another decoder path.
        data = random_data('<u4', (50, 50), seed=7)
        case('a/codec/%s/random-u4' % cname, a_roundtrip, 'acr', (50, 50), (25, 30), '<u4', comp,
             'F', '/', 0, data)
    # Chunks large enough that blosc splits them into several blocks (and threads).
    for cname in ['lz4', 'lz4hc', 'blosclz', 'zstd', 'zlib']:
        for shuffle in (0, 1, 2):
            shape = (200, 300)
            data = smooth_data('<f8', shape, seed=shuffle)
            case('a/codec-large/blosc-%s-s%d/<f8' % (cname, shuffle), a_roundtrip, 'acl', shape,
                 (128, 256), '<f8', Blosc(cname, 5, shuffle), 'C', '.', 0, data)
    case('a/codec-large/zstd3/>u2', a_roundtrip, 'acl', (300, 500), (256, 256), '>u2', Zstd(3),
         'F', '/', 0, smooth_data('>u2', (300, 500), 3))
    # Blosc with snappy is readable only if the system's c-blosc has it; a clean error is fine too.
    case('a/codec/blosc-snappy (ok, or a clean error)', a_snappy)


def a_snappy():
    path = os.path.join(newdir('snappy'), 'a.zarr')
    try:
        z = zarr_create(path, (20, 20), (8, 8), '<u2', Blosc('snappy', 5, 1))
        z[...] = smooth_data('<u2', (20, 20), 1)
    except Exception:
        return  # this numcodecs cannot write snappy: nothing to check
    r = nds('read', path, '-o', tmp_path('snappy.npy'))
    if r.returncode == 0:
        compare(np.load(tmp_path('snappy.npy')), z[...])
        return
    expect_clean_failure(['read', path, '-o', tmp_path('snappy.npy')], ['snappy'])


def a_fill_cases():
    """Missing chunks must read as the fill value, including NaN, infinities and extremes."""
    fills = [('|b1', True), ('|i1', -5), ('|u1', 255), ('<u2', 42), ('>i8', -2**63),
             ('<i8', 2**63 - 1), ('<u8', 2**64 - 1), ('>u4', 4000000000), ('<f2', float('nan')),
             ('>f2', 0.1), ('>f4', float('nan')), ('<f4', float('-inf')), ('<f8', float('nan')),
             ('>f8', float('inf')), ('<f8', -0.0), ('<f8', 1e-310),
             ('>c8', complex(float('nan'), 1)),
             ('<c16', complex(float('inf'), float('nan'))), ('<c8', complex(-2.5, 0.5))]
    for i, (dtype, fill) in enumerate(fills):
        shape, chunks = (11, 13), (4, 5)
        for sep in './':
            region = (slice(2, 7), slice(3, 9))
            data = random_data(dtype, (5, 6), seed=i)
            case('a/fill/%s/%r/sep%s' % (dtype, fill, sep), a_fill_one, shape, chunks, dtype, fill,
                 sep, region, data)
    # fill_value null (zarr-python's "no fill"): every chunk written, so only parsing is tested.
    for dtype in ['<i4', '>f8', '|b1']:
        data = random_data(dtype, (9, 10), seed=3)
        case('a/fill/%s/null' % dtype, a_roundtrip, 'afn', (9, 10), (4, 4), dtype, Zstd(1), 'C',
             '.', None, data)


def a_fill_one(shape, chunks, dtype, fill, sep, region, data):
    path = os.path.join(newdir('afill'), 'a.zarr')
    z = zarr_create(path, shape, chunks, dtype, Blosc('lz4', 5, 1), 'C', sep, fill)
    z[region] = data
    z[10, 12] = data.reshape(-1)[1]  # one element in the ragged corner chunk
    stored = sum(len(f) for _, _, f in os.walk(path)) - 1
    if stored >= 9:
        raise CaseFail('test setup: expected missing chunks, found %d stored' % stored)
    compare(nds_read(path), expected_with_missing(path, z), 'vs zarr-python + .zarray fill')


def zarray_fill(path, native):
    """The fill value as the .zarray states it, decoded here rather than by zarr-python (2.13 turns
    ["Infinity", "NaN"] into nan+nanj; it also writes -0.0 as 0.0, so the JSON is the truth)."""
    with open(os.path.join(path, '.zarray')) as f:
        v = json.load(f)['fill_value']
    dec = lambda x: float(x) if isinstance(x, str) else x
    out = np.zeros((), dtype=native)
    if native.kind == 'c':
        out.real, out.imag = dec(v[0]), dec(v[1])
    else:
        out[()] = dec(v)
    return out[()]


def expected_with_missing(path, z):
    """What a reader must return: zarr-python's read inside stored chunks, the .zarray fill value in
    missing ones."""
    native = z.dtype.newbyteorder('=')
    want = z[...].astype(native)
    fill = zarray_fill(path, native)
    sep = z._dimension_separator or '.'
    grid = [-(-s // c) for s, c in zip(z.shape, z.chunks)]
    for idx in np.ndindex(*grid):
        if not os.path.exists(os.path.join(path, sep.join(str(i) for i in idx))):
            want[tuple(slice(i * c, (i + 1) * c) for i, c in zip(idx, z.chunks))] = fill
    return want


def a_region_cases():
    """Strided, negative, integer-indexed and empty regions of a ragged, partly missing array."""
    path = os.path.join(newdir('aregion'), 'a.zarr')
    z = zarr_create(path, (19, 23, 7), (5, 6, 4), '>i2', Blosc('zstd', 3, 2), 'F', '/', -7)
    z[0:15, 2:20, :] = random_data('>i2', (15, 18, 7), seed=11)
    regions = [
        ('[1:9:2, ::3, 2]', (slice(1, 9, 2), slice(None, None, 3), 2)),
        ('[-3:, 5, :]', (slice(-3, None), 5, slice(None))),
        ('[..., 1]', (Ellipsis, 1)),
        ('[0]', (0,)),
        ('[4:5, 22:23, 6:7]', (slice(4, 5), slice(22, 23), slice(6, 7))),
        ('[3, 4, 5]', (3, 4, 5)),
        ('[0:19:7, 1:23:11, 0:7:3]', (slice(0, 19, 7), slice(1, 23, 11), slice(0, 7, 3))),
        ('[4:4]', (slice(4, 4),)),
        ('[::5, ::6, ::4]', (slice(None, None, 5), slice(None, None, 6), slice(None, None, 4))),
    ]
    for text, sel in regions:
        case('a/region/%s' % text, lambda t=text, s=sel: compare(nds_read(path, t), z[s]))


def a_shape_cases():
    cases = [
        ('0-d', (), (), '<f8'),
        ('1-element', (1,), (1,), '<i4'),
        ('chunk>shape', (5,), (100,), '>u2'),
        ('rank5', (3, 4, 2, 5, 3), (2, 3, 2, 2, 2), '<c8'),
        ('ones-chunks', (3, 4), (1, 1), '|u1'),
        ('long-1d', (100003,), (4096,), '<u8'),
        ('empty-dim', (0, 5), (2, 2), '<i2'),
    ]
    for name, shape, chunks, dtype in cases:
        data = random_data(dtype, shape, seed=5) if np.prod(shape) else None
        case('a/shape/%s' % name, a_roundtrip, 'ash', shape, chunks, dtype, Zstd(1), 'C', '.', 0,
             data)
    case('a/spec/file-url', a_roundtrip, 'aurl', (10, 10), (3, 3), '<f4', GZip(5), 'C', '/', 0,
         smooth_data('<f4', (10, 10), 1), None, 'url')
    case('a/group/nested-array', a_nested_group)


def a_nested_group():
    root = newdir('agroup')
    g = zarr.open_group(zarr.DirectoryStore(os.path.join(root, 'g.zarr')), mode='w')
    sub = g.create_group('sub')
    z = sub.create_dataset('arr', shape=(6, 8), chunks=(4, 4), dtype='<i8', compressor=Zlib(3))
    z[...] = random_data('<i8', (6, 8), seed=2)
    z.attrs['units'] = 'm'
    compare(nds_read(os.path.join(root, 'g.zarr', 'sub', 'arr')), z[...])


def a_failure_cases():
    """What ndstore cannot read must fail cleanly: exit 1, one error line naming the problem."""
    def filters():
        path = os.path.join(newdir('afilt'), 'a.zarr')
        z = zarr_create(path, (10,), (5,), '<i4', Zstd(1),
                        filters=[Delta(dtype='<i4'), Zlib(1)])  # a compressor as a filter
        z[...] = np.arange(10)
        expect_clean_failure(['read', path, '-o', tmp_path('x.npy')], ['filter "zlib"'])

    def corrupt(comp, name):
        path = os.path.join(newdir('acorrupt'), 'a.zarr')
        z = zarr_create(path, (64, 64), (32, 32), '<u2', comp)
        z[...] = smooth_data('<u2', (64, 64), 1)
        key = os.path.join(path, '0.1')
        with open(key, 'rb') as f:
            raw = f.read()
        with open(key, 'wb') as f:
            f.write(raw[:len(raw) // 2])
        expect_clean_failure(['read', path, '-o', tmp_path('x.npy')], ['0.1'])

    case('a/error/filters-zlib', filters)
    for name, comp in [('zstd', Zstd(1)), ('blosc', Blosc('lz4', 5, 1)), ('gzip', GZip(1)),
                       ('zlib', Zlib(1)), ('bz2', BZ2(1)), ('lz4', LZ4(1)), ('none', None)]:
        case('a/error/truncated-chunk/%s' % name, corrupt, comp, name)


# ---- zarr v2 filters, both ways -----------------------------------------------------------------

def filter_cases():
    """(tag, dtype, filters, data): every filter zarr-python 2.13 writes that ndstore implements."""
    rng = np.random.default_rng(7)
    walk = np.cumsum(rng.integers(-40, 40, (30, 20)), axis=1)
    norm = rng.normal(0, 1, (30, 20))
    return [
        ('delta/<i4', '<i4', [Delta('<i4')], walk.astype('<i4')),
        ('delta/>i8-astype-i2', '>i8', [Delta('>i8', astype='<i2')], walk.astype('>i8')),
        ('delta/<f8', '<f8', [Delta('<f8')], norm),
        ('fixedscaleoffset/<f8-u1', '<f8', [FixedScaleOffset(1000, 10, '<f8', '|u1')],
         1000 + np.abs(norm) * 5),
        ('fixedscaleoffset/<f4-i2', '<f4', [FixedScaleOffset(-1.5, 100, '<f4', '<i2')],
         (norm * 30).astype('<f4')),
        ('quantize/<f8-3', '<f8', [Quantize(3, '<f8')], norm),
        ('quantize/<f4-1-f2', '<f4', [Quantize(1, '<f4', '<f2')], norm.astype('<f4')),
        ('bitround/<f4-7', '<f4', [BitRound(7)], norm.astype('<f4')),
        ('bitround/<f8-30', '<f8', [BitRound(30)], norm * 1e5),
        ('bitround/<f2-4', '<f2', [BitRound(4)], norm.astype('<f2')),
        ('packbits/|b1', '|b1', [PackBits()], norm > 0.3),
        ('shuffle/<u4', '<u4', [Shuffle(4)], (walk + 5000).astype('<u4')),
        ('shuffle/>f8-es8', '>f8', [Shuffle(8)], norm.astype('>f8')),
        ('astype/<f8-f4', '<f8', [AsType('<f4', '<f8')], norm),
        ('adler32/<i2', '<i2', [Adler32()], walk.astype('<i2')),
        ('crc32/<u2', '<u2', [CRC32()], (walk + 900).astype('<u2')),
        ('chain/quantize-shuffle-adler32', '>f8', [Quantize(2, '>f8'), Shuffle(8), Adler32()],
         norm.astype('>f8')),
        ('chain/fso-delta', '<f8', [FixedScaleOffset(0, 100, '<f8', '<i4'), Delta('<i4')],
         norm),
    ]


def a_filter_one(dtype, filters, data, order, compressor):
    path = os.path.join(newdir('afilter'), 'a.zarr')
    z = zarr_create(path, data.shape, (7, 9), dtype, compressor, order, filters=filters)
    z[...] = data
    compare(nds_read(path), z[...])


def b_filter_one(dtype, filters, data, order):
    """ndstore creates the array with the filters and writes data; zarr-python must read what
    it reads from the same data written by itself, and the chunks must be byte-identical (no
    compressor, so the stored bytes are the filters' output alone)."""
    root = newdir('bfilter')
    ours, theirs = os.path.join(root, 'n.zarr'), os.path.join(root, 'z.zarr')
    cfgs = [f.get_config() for f in filters]
    nds_ok('create', json_spec(ours, shape=list(data.shape), chunks=[7, 9], dtype=dtype,
                               compressor=None, filters=cfgs, order=order))
    nds_write(ours, data)
    z = zarr_create(theirs, data.shape, (7, 9), dtype, None, order, filters=filters)
    z[...] = data
    got = zarr.open(zarr.DirectoryStore(ours), mode='r')
    if [f.get_config() for f in (got.filters or [])] != cfgs:
        raise CaseFail('zarr-python sees filters %r' % got.filters)
    g = got[...]
    compare(g.astype(g.dtype.newbyteorder('=')), z[...], 'zarr-python read')
    for key in sorted(k for k in os.listdir(theirs) if not k.startswith('.')):
        with open(os.path.join(ours, key), 'rb') as f1, open(os.path.join(theirs, key), 'rb') as f2:
            if f1.read() != f2.read():
                raise CaseFail('chunk %s differs from the one zarr-python wrote' % key)
    compare(nds_read(ours), z[...], 'ndstore read-back')


def filter_both_ways():
    for tag, dtype, filters, data in filter_cases():
        for order in ['C', 'F']:
            case('a/filter/%s/%s' % (tag, order), a_filter_one, dtype, filters, data, order,
                 Zstd(1))
            case('b/filter/%s/%s' % (tag, order), b_filter_one, dtype, filters, data, order)
    tag, dtype, filters, data = filter_cases()[0]
    case('a/filter/%s/blosc' % tag, a_filter_one, dtype, filters, data, 'C',
         Blosc('lz4', 5, Blosc.SHUFFLE))

# ---- datetimes, both ways (issue 20) ------------------------------------------------------------

DATETIME_TYPES = ['<M8[ns]', '>M8[s]', '<M8[D]', '<m8[s]', '>m8[ms]', '<M8[10s]']


def time_values(dtype, n, seed):
    """n datetime64/timedelta64 values of dtype with NaT among them."""
    rng = np.random.default_rng(seed)
    v = rng.integers(-10**12, 10**12, size=n).astype('<i8')
    v[::7] = np.iinfo(np.int64).min  # NaT
    return v.view(np.dtype(dtype).newbyteorder('<')).astype(dtype)


def same_times(got, want, what):
    """Exact comparison of datetimes as their int64 counts (NaT is INT64_MIN; NaT != NaT in NumPy)."""
    native = np.dtype(want.dtype).newbyteorder('=')
    if got.dtype != native:
        raise CaseFail('%s: dtype %s, expected %s' % (what, got.dtype.str, native.str))
    compare(got.view('i8'), np.asarray(want).astype(native).view('i8'), what)


def a_datetime_one(dtype):
    """zarr-python writes (NaT fill, a missing chunk), ndstore reads; info shows the unit."""
    path = os.path.join(newdir('adt'), 'a.zarr')
    z = zarr_create(path, (23,), (5,), dtype, Zstd(1), fill=np.datetime64('NaT') if dtype[1] == 'M'
                    else np.timedelta64('NaT'))
    data = time_values(dtype, 23, len(dtype))
    z[:15] = data[:15]
    want = z[...]
    same_times(nds_read(path), want, 'ndstore read')
    info = nds_ok('info', path)
    unit = dtype[dtype.index('['):]
    if ('datetime64' if dtype[1] == 'M' else 'timedelta64') + unit not in info.stdout:
        raise CaseFail('info does not show %s: %s' % (unit, info.stdout[:200]))


def b_datetime_one(dtype):
    """ndstore creates (spec metadata) and writes a .npy of dtype, zarr-python reads it."""
    path = os.path.join(newdir('bdt'), 'a.zarr')
    nds_ok('create', json_spec(path, shape=[23], chunks=[5], dtype=dtype, compressor=None,
                               fill_value=-9223372036854775808, order='C', filters=None))
    data = time_values(dtype, 23, 3)
    nds_write(path, data[:18], '0:18')
    want = np.concatenate([data[:18], np.full(5, np.iinfo(np.int64).min).view(
        np.dtype(dtype).newbyteorder('<')).astype(dtype)])
    z = zarr.open(zarr.DirectoryStore(path), mode='r')
    got = z[...]
    same_times(got.astype(got.dtype.newbyteorder('=')), want, 'zarr-python read')
    same_times(nds_read(path), want, 'ndstore read-back')


def datetime_cases():
    for dtype in DATETIME_TYPES:
        case('a/datetime/%s' % dtype, a_datetime_one, dtype)
        case('b/datetime/%s' % dtype, b_datetime_one, dtype)


# ---- fixed-width strings, both ways (issue 20) ---------------------------------------------------

# (dtype, fill as zarr-python takes it, values): NUL-padded bytes with an inner NUL, non-ASCII and
# astral code points, both byte orders of U, zarr-python's default fill (0: b'0' / '0') and None.
STRING_CASES = [
    ('|S6', b'ab', [b'hello', b'x', b'a\x00b', b'', b'sixsix']),
    ('|S3', 0, [b'abc', b'\xff\x01', b'z']),
    ('<U5', 'q\u00e9', ['ab', '\u00e9\U0001f600', 'fives', '', 'x']),
    ('>U4', None, ['wxyz', '\u4e2d\u6587', 'a']),
    ('<U2', 0, ['hi', '']),
]


def same_strings(got, want, what):
    """Equal dtype (host order), shape and bytes: NumPy's == would ignore trailing NULs."""
    compare(got, want, what)
    w = np.ascontiguousarray(np.asarray(want).astype(got.dtype))
    if np.ascontiguousarray(got).view('u1').tobytes() != w.view('u1').tobytes():
        raise CaseFail('%s: the bytes differ' % what)


def a_string_one(dtype, fill, values):
    """zarr-python writes (a missing chunk, its fill), ndstore reads; info shows the typestring."""
    path = os.path.join(newdir('astr'), 'a.zarr')
    n = len(values) + 3
    z = zarr.open(zarr.DirectoryStore(path), mode='w', shape=(n,), chunks=(2,), dtype=dtype,
                  compressor=Zstd(1), fill_value=fill)
    z[:len(values)] = np.array(values, dtype=dtype)
    same_strings(nds_read(path), z[...], 'ndstore read')
    same_strings(nds_read(path, '1:%d' % (n - 1)), z[1:n - 1], 'ndstore read of a region')
    info = nds_ok('info', path)
    if 'dtype:       %s' % dtype not in info.stdout:
        raise CaseFail('info does not show %s: %s' % (dtype, info.stdout[:300]))


def b_string_one(dtype, fill, values):
    """ndstore creates (spec metadata, zarr-python's fill JSON) and writes, zarr-python reads."""
    path = os.path.join(newdir('bstr'), 'a.zarr')
    n = len(values) + 3
    ref = zarr.open(zarr.MemoryStore(), mode='w', shape=(n,), chunks=(2,), dtype=dtype,
                    fill_value=fill)
    fill_json = json.loads(ref.store['.zarray'])['fill_value']
    nds_ok('create', json_spec(path, shape=[n], chunks=[2], dtype=dtype, compressor=None,
                               fill_value=fill_json, order='C', filters=None))
    data = np.array(values, dtype=dtype)
    nds_write(path, data.astype(data.dtype.newbyteorder('=')), '0:%d' % len(values))
    ref[:len(values)] = data
    z = zarr.open(zarr.DirectoryStore(path), mode='r')
    if z.dtype != np.dtype(dtype):
        raise CaseFail('zarr-python sees dtype %s' % z.dtype.str)
    got = z[...]
    same_strings(got.astype(got.dtype.newbyteorder('=')), ref[...], 'zarr-python read')
    same_strings(nds_read(path), ref[...], 'ndstore read-back')
    # ndstore updates part of the array zarr-python reads again
    nds_write(path, data[:1].astype(data.dtype.newbyteorder('=')), '%d:%d' % (n - 1, n))
    got = z[...]
    if got[n - 1] != data[0]:
        raise CaseFail('after an update zarr-python reads %r' % got[n - 1])


def string_cases():
    for dtype, fill, values in STRING_CASES:
        case('a/string/%s/fill=%r' % (dtype, fill), a_string_one, dtype, fill, values)
        case('b/string/%s/fill=%r' % (dtype, fill), b_string_one, dtype, fill, values)


# ---- (b) ndstore writes, zarr-python reads ------------------------------------------------------

# Codec string -> the compressor config zarr-python must find in .zarray (None = no compressor).
CODEC_STRINGS = [
    ('none', None),
    ('zstd', {'id': 'zstd'}), ('zstd:1', {'id': 'zstd', 'level': 1}),
    ('zstd:9', {'id': 'zstd', 'level': 9}), ('zstd:22', {'id': 'zstd', 'level': 22}),
    ('zstd:-3', {'id': 'zstd', 'level': -3}),
    ('blosc', {'id': 'blosc'}), ('blosc::9', {'id': 'blosc', 'clevel': 9}),
    ('blosc:lz4:0', {'id': 'blosc', 'cname': 'lz4', 'clevel': 0}),
    ('blosc:zstd:5:autoshuffle', {'id': 'blosc', 'cname': 'zstd', 'shuffle': -1}),
    ('gzip', {'id': 'gzip'}), ('gzip:1', {'id': 'gzip', 'level': 1}),
    ('gzip:9', {'id': 'gzip', 'level': 9}),
    ('zlib', {'id': 'zlib'}), ('zlib:1', {'id': 'zlib', 'level': 1}),
    ('zlib:9', {'id': 'zlib', 'level': 9}),
    ('bz2', {'id': 'bz2'}), ('bz2:1', {'id': 'bz2', 'level': 1}),
    ('bz2:9', {'id': 'bz2', 'level': 9}),
    ('lz4', {'id': 'lz4'}), ('lz4:1', {'id': 'lz4', 'acceleration': 1}),
    ('lz4:30', {'id': 'lz4', 'acceleration': 30}),
]
for _cname in ['lz4', 'lz4hc', 'blosclz', 'zstd', 'zlib']:
    for _i, _sh in enumerate(['noshuffle', 'shuffle', 'bitshuffle']):
        CODEC_STRINGS.append(('blosc:%s:5:%s' % (_cname, _sh),
                              {'id': 'blosc', 'cname': _cname, 'clevel': 5, 'shuffle': _i}))
        CODEC_STRINGS.append(('blosc:%s:3:%d' % (_cname, _i),
                              {'id': 'blosc', 'cname': _cname, 'clevel': 3, 'shuffle': _i}))


def json_spec(path, **metadata):
    return json.dumps({'driver': 'zarr', 'kvstore': {'driver': 'file', 'path': path + '/'},
                       'metadata': metadata})


def zarr_open_check(path, want, want_compressor='skip'):
    """zarr-python opens path read-only; its values (and compressor) must be what was written."""
    z = zarr.open(zarr.DirectoryStore(path), mode='r')
    if want_compressor != 'skip':
        cfg = z.compressor.get_config() if z.compressor is not None else None
        if want_compressor is None and cfg is not None:
            raise CaseFail('compressor %r, expected none' % cfg)
        for k, v in (want_compressor or {}).items():
            if cfg is None or cfg.get(k) != v:
                raise CaseFail('zarr-python sees compressor %r, expected %s=%r' % (cfg, k, v))
    got = z[...]
    if got.dtype != np.dtype(want.dtype):
        raise CaseFail('zarr-python sees dtype %s, expected %s' % (got.dtype.str, want.dtype.str))
    compare(got.astype(got.dtype.newbyteorder('=')), want, 'zarr-python read')
    return z


def b_codec_one(codec, want_cfg, dtype):
    path = os.path.join(newdir('bcodec'), 'a.zarr')
    data = smooth_data(dtype, (70, 90), seed=len(codec))
    nds_ok('create', path, '--shape', '70,90', '--chunks', '32,40', '--dtype',
           NDS_DTYPE_NAMES[dtype[1:]], '--codec', codec)
    nds_write(path, data)
    zarr_open_check(path, data, want_cfg)
    compare(nds_read(path), data, 'ndstore read-back')


def b_codec_cases():
    for codec, cfg in CODEC_STRINGS:
        for dtype in ['<u2', '<f8']:
            case('b/codec/%s/%s' % (codec, dtype), b_codec_one, codec, cfg, dtype)
    # Large chunks: several blosc blocks, encoded on several threads.
    for codec in ['blosc:lz4:5:shuffle', 'blosc:zstd:1:bitshuffle', 'zstd:1', 'gzip:1']:
        case('b/codec-large/%s' % codec, b_large, codec)


def b_large(codec):
    path = os.path.join(newdir('blarge'), 'a.zarr')
    data = smooth_data('<u2', (64, 256, 256), seed=9)
    nds_ok('create', path, '--shape', '64,256,256', '--chunks', '64,128,128', '--dtype', 'uint16',
           '--codec', codec)
    nds_write(path, data)
    zarr_open_check(path, data)


def b_dtype_one(k, dtype, order, sep, codec, npy_form):
    """Create with a JSON spec (zarr dtype string, order, separator), write, zarr-python reads."""
    path = os.path.join(newdir('bdtype'), 'a.zarr')
    shape, chunks = (13, 17, 5), (4, 6, 3)
    data = random_data(dtype, shape, seed=100 + k)
    spec = json_spec(path, dtype=dtype, order=order, dimension_separator=sep, shape=list(shape),
                     chunks=list(chunks))
    nds_ok('create', spec, '--codec', codec)
    arr = data
    if npy_form == 'swapped':  # the .npy in the other byte order than the array's
        arr = data.astype(data.dtype.newbyteorder('S'))
    elif npy_form == 'fortran':
        arr = np.asfortranarray(data)
    nds_write(path, arr)
    z = zarr_open_check(path, data)
    if z.order != order or z._dimension_separator not in (sep, None if sep == '.' else sep):
        raise CaseFail('zarr-python sees order %s separator %r' % (z.order, z._dimension_separator))
    compare(nds_read(path), data, 'ndstore read-back')


def b_dtype_cases():
    forms = ['native', 'swapped', 'fortran']
    k = 0
    for dtype in DTYPES:
        for order in 'CF':
            sep = '/' if k % 2 == 0 else '.'
            codec = ['zstd:1', 'blosc:lz4:5:shuffle', 'gzip:1'][k % 3]
            form = forms[k // 2 % 3]
            case('b/dtype/%s/%s/sep%s/%s/npy-%s' % (dtype, order, sep, codec, form), b_dtype_one,
                 k, dtype, order, sep, codec, form)
            k += 1
    # The plain --dtype route (host byte order) for every dtype name.
    for code, name in NDS_DTYPE_NAMES.items():
        case('b/dtype-flag/%s' % name, b_dtype_flag, code, name)


def b_dtype_flag(code, name):
    path = os.path.join(newdir('bflag'), 'a.zarr')
    dtype = ('|' if code in ('b1', 'i1', 'u1') else '<') + code
    data = random_data(dtype, (9, 7), seed=len(name))
    nds_ok('create', path, '--shape', '9,7', '--chunks', '4,4', '--dtype', name)
    nds_write(path, data)
    zarr_open_check(path, data)


def b_fill_one(dtype, fill, region, sep):
    """Create with a fill value, write part: zarr-python sees fill elsewhere; untouched chunks are
    absent, and a chunk overwritten with fill is deleted."""
    path = os.path.join(newdir('bfill'), 'a.zarr')
    shape = (11, 13)
    spec = json_spec(path, dimension_separator=sep)
    nds_ok('create', spec, '--shape', '11,13', '--chunks', '4,5', '--dtype',
           NDS_DTYPE_NAMES[dtype[1:]], '--fill', json.dumps(fill_json(fill)), '--codec', 'zstd:1')
    want = np.full(shape, fill, dtype=np.dtype(dtype).newbyteorder('='))
    block = random_data(dtype, want[region].shape, seed=4)
    want[region] = block
    reg_text = '[%s]' % ', '.join('%d:%d' % (s.start, s.stop) for s in region)
    nds_write(path, block, reg_text)
    zarr_open_check(path, want)
    # Region [2:7, 3:9] with chunks (4, 5) touches chunk rows 0-1, columns 0-1: 4 chunks.
    keys = sorted(os.path.relpath(os.path.join(d, f), path) for d, _, fs in os.walk(path)
                  for f in fs if not f.startswith('.'))
    k = lambda i, j: '%d%s%d' % (i, sep, j)
    if keys != sorted([k(0, 0), k(0, 1), k(1, 0), k(1, 1)]):
        raise CaseFail('stored chunk keys %s, expected the 4 touched ones' % keys)
    # Overwrite chunk (0, 0) entirely with fill: it must be deleted, and read as fill.
    nds_write(path, np.full((4, 5), fill, dtype=want.dtype), '[0:4, 0:5]')
    want[0:4, 0:5] = fill
    if os.path.exists(os.path.join(path, k(0, 0))):
        raise CaseFail('chunk %s is all fill but still stored' % k(0, 0))
    zarr_open_check(path, want)


def b_fill_cases():
    fills = [('|b1', True), ('|i1', -128), ('|u1', 7), ('<i2', -300), ('<u4', 4000000000),
             ('<i8', -2**63), ('<u8', 2**64 - 1), ('<f2', float('nan')), ('<f4', float('-inf')),
             ('<f8', float('nan')), ('<f8', 2.5), ('<f8', -0.0), ('<c8', complex(float('nan'), 1)),
             ('<c16', complex(1.5, -2.0))]
    for i, (dtype, fill) in enumerate(fills):
        sep = './'[i % 2]
        case('b/fill/%s/%r/sep%s' % (dtype, fill, sep), b_fill_one, dtype, fill,
             (slice(2, 7), slice(3, 9)), sep)


def b_update_one(dtype, order, sep, comp, codec_name):
    """zarr-python writes an array, ndstore overwrites strided and unaligned parts of it, and
    zarr-python must see both writers' elements."""
    path = os.path.join(newdir('bupd'), 'a.zarr')
    shape, chunks = (23, 29), (6, 7)
    z = zarr_create(path, shape, chunks, dtype, comp, order, sep, 3)
    want = random_data(dtype, shape, seed=21)
    z[...] = want
    want = want.astype(want.dtype.newbyteorder('='))
    z[10:12, :] = 3  # some elements equal to the fill, zarr-python still stores the chunks
    want[10:12, :] = 3
    edits = [('[1:20:3, 2:29:5]', (slice(1, 20, 3), slice(2, 29, 5))),
             ('[5:18, 6:8]', (slice(5, 18), slice(6, 8))),
             ('[22, :]', (22, slice(None))),
             ('[0:23:11, 28]', (slice(0, 23, 11), 28))]
    for i, (text, sel) in enumerate(edits):
        block = random_data(dtype, want[sel].shape, seed=50 + i)
        nds_write(path, block, text)
        want[sel] = block
    zarr_open_check(path, want.astype(np.dtype(dtype)))
    compare(nds_read(path), want, 'ndstore read-back')


def b_update_cases():
    combos = [('<i4', 'C', '.', Zstd(1), 'zstd'), ('>f8', 'F', '/', Blosc('lz4', 5, 1), 'blosc'),
              ('>u2', 'C', '/', GZip(5), 'gzip'), ('<c8', 'F', '.', Zlib(1), 'zlib'),
              ('|b1', 'F', '.', BZ2(1), 'bz2'), ('>i8', 'C', '.', LZ4(1), 'lz4'),
              ('<f2', 'F', '/', None, 'none'), ('|u1', 'C', '.', Blosc('zstd', 3, 2), 'blosc-bit')]
    for dtype, order, sep, comp, name in combos:
        case('b/update-zarr-array/%s/%s/sep%s/%s' % (dtype, order, sep, name), b_update_one, dtype,
             order, sep, comp, name)


def b_delete_existing():
    """create --delete-existing replaces an array: zarr-python sees only the new one."""
    path = os.path.join(newdir('bdel'), 'a.zarr')
    nds_ok('create', path, '--shape', '10,10', '--chunks', '5,5', '--dtype', 'int16')
    nds_write(path, random_data('<i2', (10, 10), seed=1))
    nds_ok('create', path, '--shape', '6,7', '--chunks', '4,4', '--dtype', 'float32', '--fill',
           '1.5', '--delete-existing')
    left = sorted(f for f in os.listdir(path) if not f.startswith('.'))
    if left:
        raise CaseFail('chunks of the old array left behind: %s' % left)
    zarr_open_check(path, np.full((6, 7), 1.5, dtype='<f4'))


def b_errors():
    """Bad input to create/write fails cleanly."""
    path = os.path.join(newdir('berr'), 'a.zarr')
    nds_ok('create', path, '--shape', '10,10', '--chunks', '5,5', '--dtype', 'int16')
    npy = tmp_path('berr.npy')
    np.save(npy, np.zeros((10, 10), dtype='<i4'))
    expect_clean_failure(['write', path, '-i', npy], ['int32', 'int16'])
    np.save(npy, np.zeros((3, 3), dtype='<i2'))
    expect_clean_failure(['write', path, '-i', npy, '--region', '[0:4, 0:3]'], ['shape'])
    expect_clean_failure(['create', tmp_path('bad.zarr'), '--shape', '4', '--dtype',
                          'int16', '--codec', 'zstd:99'], ['zstd'])
    expect_clean_failure(['create', tmp_path('bad.zarr'), '--shape', '4', '--dtype',
                          'int16', '--codec', 'blosc:nosuch'], ['nosuch'])
    os.unlink(npy)


# ---- (c) fixtures written by zarr-python --------------------------------------------------------

def c_fixture_one(data_dir, exp_dir, name):
    path = os.path.join(data_dir, name)
    with open(os.path.join(path, '.zarray')) as f:
        dtype = json.load(f)['dtype']
    if isinstance(dtype, str) and dtype[1:2] == 'O':  # object arrays of strings (issue 20)
        got = nds_read_jsonl(path, False)
        want = [str(v) for v in zarr.open(zarr.DirectoryStore(path), mode='r')[...].ravel()]
        if got != want:
            raise CaseFail('read %r, zarr-python %r' % (got[:8], want[:8]))
        return
    want = np.load(os.path.join(exp_dir, name + '.npy'))
    got = nds_read(path)
    compare(got, want, 'vs expected/%s.npy' % name)
    compare(got, zarr.open(zarr.DirectoryStore(path), mode='r')[...], 'vs zarr-python')


def c_fixture_cases(fixtures):
    data_dir = os.path.join(fixtures, 'zarr2_zarr_python', 'data.zarr')
    exp_dir = os.path.join(fixtures, 'zarr2_zarr_python', 'expected')
    names = sorted(n for n in os.listdir(data_dir)
                   if os.path.exists(os.path.join(data_dir, n, '.zarray')))
    if not names:
        def none_found():
            raise CaseFail('no arrays in ' + data_dir)
        case('c/fixtures-present', none_found)
    for name in names:
        case('c/fixture/%s' % name, c_fixture_one, data_dir, exp_dir, name)


# ---- (e) variable-length strings and bytes -------------------------------------------------------

def nds_read_jsonl(spec, as_bytes, region=None):
    """ndstore read SPEC -o tmp.jsonl: the elements in C order (bytes elements base64-decoded)."""
    out = tmp_path('read-%d.jsonl' % os.getpid())
    args = ['read', spec, '-o', out] + (['--region', region] if region is not None else [])
    try:
        nds_ok(*args)
        with open(out, encoding='utf-8') as f:
            items = [json.loads(line) for line in f]
    finally:
        if os.path.exists(out):
            os.unlink(out)
    return [base64.b64decode(v) for v in items] if as_bytes else items


def nds_write_jsonl(spec, values, region=None):
    """ndstore write SPEC -i tmp.jsonl (bytes elements base64-encoded)."""
    path = tmp_path('write-%d.jsonl' % os.getpid())
    with open(path, 'w', encoding='utf-8') as f:
        for v in values:
            item = base64.b64encode(v).decode() if isinstance(v, bytes) else v
            f.write(json.dumps(item, ensure_ascii=False) + '\n')
    args = ['write', spec, '-i', path] + (['--region', region] if region is not None else [])
    try:
        nds_ok(*args)
    finally:
        os.unlink(path)


VLEN_TEXT = ['', 'a', 'h\u00e9llo', '\u4e2d\u6587', 'emoji \U0001F600', 'x' * 300, 'tab\tnl\nq"\\', '0']
VLEN_BYTES = [b'', b'\x00', b'\xff\xfe', b'abc', bytes(range(256)), b'\x00end']

# (filter, fill_value as given to zarr-python, what ndstore reads for a missing element)
VLEN_CASES = [
    ('vlen-utf8', '', ''), ('vlen-utf8', 'zz', 'zz'), ('vlen-utf8', None, ''),
    ('vlen-bytes', None, b''), ('vlen-bytes', 0, b''),
]


def codec_of(name):
    return VLenUTF8() if name == 'vlen-utf8' else VLenBytes()


def as_element(v, as_bytes):
    """What ndstore reads where zarr-python holds v (a fill of None / 0 reads as empty)."""
    if v is None or (isinstance(v, int) and v == 0):
        return b'' if as_bytes else ''
    return v.encode() if as_bytes and isinstance(v, str) else v


def a_vlen_one(filt, fill, missing, compressor):
    """zarr-python writes an object array (one chunk missing), ndstore reads it, also a stepped
    region and a 2-d one; info shows the dtype and the filter."""
    as_bytes = filt == 'vlen-bytes'
    values = VLEN_BYTES if as_bytes else VLEN_TEXT
    path = os.path.join(newdir('avlen'), 'a.zarr')
    n = len(values) + 4
    z = zarr.open(zarr.DirectoryStore(path), mode='w', shape=(n,), chunks=(3,), dtype=object,
                  object_codec=codec_of(filt), compressor=compressor, fill_value=fill)
    data = np.empty(len(values), dtype=object)
    data[:] = values
    z[:len(values)] = data
    want = [as_element(v, as_bytes) for v in z[...]]
    if want[-1] != missing:
        raise CaseFail('zarr-python reads %r for a missing element' % want[-1])
    got = nds_read_jsonl(path, as_bytes)
    if got != want:
        raise CaseFail('ndstore read %r, zarr-python %r' % (got[:6], want[:6]))
    got = nds_read_jsonl(path, as_bytes, '1:%d:2' % (n - 1))
    if got != want[1:n - 1:2]:
        raise CaseFail('stepped region: %r, want %r' % (got, want[1:n - 1:2]))
    info = nds_ok('info', path).stdout
    label = 'dtype:       %s (|O %s)' % ('bytes' if as_bytes else 'string', filt)
    if label not in info:
        raise CaseFail('info does not show %r: %s' % (label, info[:300]))


def a_vlen_2d():
    path = os.path.join(newdir('avlen2'), 'a.zarr')
    z = zarr.open(zarr.DirectoryStore(path), mode='w', shape=(5, 7), chunks=(2, 3), dtype=str,
                  fill_value='-')
    z[1:4, 2:6] = np.array([['r%dc%d' % (r, c) for c in range(2, 6)] for r in range(1, 4)])
    want = [str(v) for v in z[...].ravel()]
    if nds_read_jsonl(path, False) != want:
        raise CaseFail('2-d read differs')
    want = [str(v) for v in z[1:5:2, 1:7].ravel()]
    got = nds_read_jsonl(path, False, '1:5:2, 1:7')
    if got != want:
        raise CaseFail('2-d region: %r, want %r' % (got, want))


def b_vlen_one(filt, how, compressor):
    """ndstore creates (--dtype string/bytes, or a spec naming the filter) and writes, zarr-python
    reads; ndstore then updates one element of a chunk and zarr-python updates another."""
    as_bytes = filt == 'vlen-bytes'
    values = VLEN_BYTES if as_bytes else VLEN_TEXT
    path = os.path.join(newdir('bvlen'), 'a.zarr')
    n = len(values) + 2
    if how == 'flag':
        nds_ok('create', path, '--shape', str(n), '--chunks', '3', '--dtype',
               'bytes' if as_bytes else 'string', '--codec', compressor)
    else:
        nds_ok('create', json_spec(path, shape=[n], chunks=[3], dtype='|O', fill_value='',
                                   filters=[{'id': filt}], compressor=None, order='C'))
    nds_write_jsonl(path, values, '0:%d' % len(values))
    z = zarr.open(zarr.DirectoryStore(path), mode='r')
    meta = json.loads(z.store['.zarray'])
    if meta['dtype'] != '|O' or meta['filters'] != [{'id': filt}]:
        raise CaseFail('.zarray: %r' % meta)
    got = [as_element(v, as_bytes) for v in z[:len(values)]]
    if got != values:
        raise CaseFail('zarr-python read %r, want %r' % (got[:6], values[:6]))
    if z[n - 1] != '':  # the fill, which zarr-python reads as text for both filters
        raise CaseFail('zarr-python reads %r for a missing element' % z[n - 1])
    new = b'\x01new' if as_bytes else 'n\u00e9w'
    nds_write_jsonl(path, [new], '1:2')
    zw = zarr.open(zarr.DirectoryStore(path), mode='r+')
    if as_element(zw[1], as_bytes) != new or as_element(zw[0], as_bytes) != values[0] or \
            as_element(zw[2], as_bytes) != values[2]:
        raise CaseFail('after an update zarr-python reads %r' % (zw[:3],))
    zw[2] = b'zp' if as_bytes else 'zp'
    got = nds_read_jsonl(path, as_bytes)
    want = [values[0], new, b'zp' if as_bytes else 'zp'] + values[3:] + [values[0][:0]] * 2
    if got != want:
        raise CaseFail('ndstore read after zarr-python wrote: %r' % (got[:4],))


def b_vlen_errors():
    """Refusals with one error line: an element that is not UTF-8 (a raw byte 0xff inside the JSON
    string), too few lines, a line that is not a string, a .npy output."""
    path = os.path.join(newdir('bvlenerr'), 'a.zarr')
    nds_ok('create', path, '--shape', '3', '--dtype', 'string')
    bad = tmp_path('bad.jsonl')
    with open(bad, 'wb') as f:
        f.write(b'"a"\n"\xff"\n"c"\n')
    expect_clean_failure(['write', path, '-i', bad], ['element 1', 'UTF-8'])
    with open(bad, 'w') as f:
        f.write('"a"\n')
    expect_clean_failure(['write', path, '-i', bad], ['ended after 1', '3 elements'])
    with open(bad, 'w') as f:
        f.write('"a"\n7\n"c"\n')
    expect_clean_failure(['write', path, '-i', bad], ['line 2', 'JSON string'])
    expect_clean_failure(['read', path, '-o', tmp_path('x.npy')], ['JSON Lines'])


def vlen_cases():
    for filt, fill, missing in VLEN_CASES:
        for comp in [None, Zstd(3), Blosc()]:
            case('e/a/%s/fill=%r/%s' % (filt, fill, comp and comp.codec_id), a_vlen_one, filt,
                 fill, missing, comp)
    case('e/a/2d-regions', a_vlen_2d)
    for filt in ['vlen-utf8', 'vlen-bytes']:
        case('e/b/%s/flag' % filt, b_vlen_one, filt, 'flag', 'zstd:3')
        case('e/b/%s/spec' % filt, b_vlen_one, filt, 'spec', 'none')
    case('e/b/errors', b_vlen_errors)


# ---- (d) consolidated metadata -------------------------------------------------------------------

def d_hierarchy(root):
    """A zarr-python group with two arrays (one in a subgroup), attributes on both."""
    g = zarr.open_group(zarr.DirectoryStore(root), mode='w')
    a = g.create_dataset('a', shape=(5, 7), chunks=(2, 3), dtype='<i4', compressor=Zstd(3))
    a[...] = random_data('<i4', (5, 7), seed=5)
    a.attrs['units'] = 'nm'
    b = g.create_group('sub').create_dataset('b', shape=(9,), chunks=(4,), dtype='>f8',
                                             compressor=None, fill_value=1.5)
    b[2:6] = [1.0, 2.0, 3.0, 4.0]
    g.attrs['title'] = 'd'
    return g


def drop_own_metadata(root, arrays):
    """Removes the arrays' own .zarray and .zattrs: only the consolidated copy describes them."""
    for name in arrays:
        for key in ('.zarray', '.zattrs'):
            path = os.path.join(root, name, key)
            if os.path.exists(path):
                os.unlink(path)


def d_zarr_python_writes():
    root = os.path.join(newdir('dzp'), 'h.zarr')
    g = d_hierarchy(root)
    zarr.consolidate_metadata(zarr.DirectoryStore(root))
    want_a, want_b = g['a'][...], g['sub/b'][...]
    out = nds_ok('ls', root, '--consolidated').stdout
    for line in ('consolidated metadata: ', 'a/.zarray  (zarr: int32 [5, 7], chunks [2, 3], zstd',
                 'sub/b/.zarray  (zarr: float64 [9], chunks [4], raw)'):
        if line not in out:
            raise CaseFail('ls -c lacks %r: %s' % (line, out))
    drop_own_metadata(root, ['a', 'sub/b'])
    compare(nds_read(json.dumps({'driver': 'zarr', 'kvstore': os.path.join(root, 'a'),
                                 'consolidated': True})), want_a)
    compare(nds_read(json.dumps({'driver': 'zarr', 'kvstore': os.path.join(root, 'sub', 'b'),
                                 'consolidated': True})), want_b)
    info = nds_ok('info', os.path.join(root, 'a') + '|zarr:', '--consolidated').stdout
    if '"units": "nm"' not in info:
        raise CaseFail('info --consolidated lacks the attributes from .zmetadata: ' + info)
    r = nds('info', os.path.join(root, 'a') + '|zarr:', '--no-consolidated')
    if r.returncode == 0:
        raise CaseFail('the own .zarray was removed, yet info without the copy opened the array')


def d_ndstore_writes():
    root = os.path.join(newdir('dnds'), 'h.zarr')
    g = d_hierarchy(root)
    want_a, want_b = g['a'][...], g['sub/b'][...]
    zarr.consolidate_metadata(zarr.DirectoryStore(root))
    with open(os.path.join(root, '.zmetadata')) as f:
        theirs = json.load(f)
    os.unlink(os.path.join(root, '.zmetadata'))
    out = nds_ok('group', 'consolidate', root).stdout
    if 'consolidated 6 metadata documents' not in out:
        raise CaseFail('group consolidate: ' + out)
    with open(os.path.join(root, '.zmetadata')) as f:
        ours = json.load(f)
    if ours != theirs:
        raise CaseFail('.zmetadata differs from zarr-python\'s: %s vs %s' % (ours, theirs))
    drop_own_metadata(root, ['a', 'sub/b'])
    c = zarr.open_consolidated(zarr.DirectoryStore(root), mode='r')
    compare(c['a'][...], want_a)
    compare(c['sub/b'][...].astype('<f8'), want_b.astype('<f8'))  # byte order as zarr-python hands it
    if c['a'].attrs['units'] != 'nm' or c.attrs['title'] != 'd':
        raise CaseFail('attributes through open_consolidated: %s %s' % (dict(c['a'].attrs),
                                                                         dict(c.attrs)))


def d_consolidated_cases():
    case('d/consolidated/zarr-python-writes', d_zarr_python_writes)
    case('d/consolidated/ndstore-writes', d_ndstore_writes)


# ---- (f) attributes with integers beyond 64 bits -------------------------------------------------

BIG_ATTRS = {'id': 2**64 + 1, 'neg': -2**63 - 1, 'max': 2**64 - 1,
             'nested': {'list': [10**30, -10**30, 1], 'ok': 'm'}}


def f_zarr_python_writes():
    path = os.path.join(newdir('fbig'), 'a.zarr')
    z = zarr.open(path, mode='w', shape=(4,), chunks=(4,), dtype='<u1')
    z.attrs.update(BIG_ATTRS)
    got = json.loads(nds_ok('attrs', path).stdout)
    if got != BIG_ATTRS:
        raise CaseFail('ndstore attrs: %s, zarr-python wrote %s' % (got, BIG_ATTRS))
    info = json.loads(nds_ok('info', '--json', path).stdout)
    if info['attributes'] != BIG_ATTRS:
        raise CaseFail('ndstore info --json: %s' % info['attributes'])


def f_ndstore_writes():
    path = os.path.join(newdir('fbigw'), 'a.zarr')
    zarr.open(path, mode='w', shape=(4,), chunks=(4,), dtype='<u1')
    nds_ok('attrs', path, '--set', json.dumps(BIG_ATTRS))
    got = dict(zarr.open(path, mode='r').attrs)
    if got != BIG_ATTRS:
        raise CaseFail('zarr-python reads %s after ndstore attrs --set %s' % (got, BIG_ATTRS))


def f_big_attribute_cases():
    case('f/attributes/big-integers/zarr-python-writes', f_zarr_python_writes)
    case('f/attributes/big-integers/ndstore-writes', f_ndstore_writes)


# ---- main ---------------------------------------------------------------------------------------

def run_cases(fixtures):
    a_dtype_cases()
    a_compressor_cases()
    a_fill_cases()
    a_region_cases()
    a_shape_cases()
    a_failure_cases()
    filter_both_ways()
    datetime_cases()
    string_cases()
    b_codec_cases()
    b_dtype_cases()
    b_fill_cases()
    b_update_cases()
    case('b/create-delete-existing', b_delete_existing)
    case('b/errors', b_errors)
    c_fixture_cases(fixtures)
    d_consolidated_cases()
    vlen_cases()
    f_big_attribute_cases()


def main(argv):
    return run(argv, 'zarr2_interop.py', 'zarr2', run_cases)


if __name__ == '__main__':
    sys.exit(main(sys.argv))
