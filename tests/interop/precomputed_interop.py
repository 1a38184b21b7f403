#!/usr/bin/python3
"""neuroglancer precomputed interoperability: the ndstore command line against an independent
implementation of the format written here from the specification (volume.md, sharded.md and the
compressed_segmentation README of neuroglancer), plus the FIB-25 fixture.

Usage: /usr/bin/python3 precomputed_interop.py NDSTORE_BINARY [FIXTURES_DIR] [-k SUBSTRING]

No client for the format is packaged in Debian, so the other side is this script (numpy, zlib,
hashlib-free MurmurHash3): it shares no code with ndstore.
  (a) the 64^3 FIB-25 segmentation (FIXTURES_DIR/compressed_segmentation) written by `ndstore write`
      to a compressed_segmentation scale (block 8^3 and others) is stored in a chunk that this
      script's decoder reads back bit-exactly, and `ndstore read` returns it bit-exactly; the encoded
      size is printed.
  (b) volumes this script writes (raw, compressed_segmentation; unsharded and sharded with the
      identity and murmurhash3_x86_128 hashes, raw and gzip indexes and data, voxel offsets, edge
      chunks) read in ndstore exactly.
  (c) sharded volumes `ndstore cp` writes (box shards, murmurhash3 with several shards, identity
      shard numbers that wrap; raw and gzip) read in this script exactly, shard file names included,
      and every shard file passes this script's strict structural check.
  (d) hashed shards this script writes (data gzip'd at level 9, where ndstore uses 6) partly
      rewritten by `ndstore write`: the new values read here, every chunk ndstore did not touch keeps
      this script's bytes exactly, and chunks written all zero leave their shard.
Prints one line per case ("ok NAME" or "FAIL NAME REASON") and then "N passed, N failed"; exits 1 on
any failure. Everything is written under one temporary directory, removed at the end.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import traceback
import zlib

import numpy as np

NDS = None
TMP = None
FILTER = None
PASSED = 0
FAILED = 0


class CaseFail(Exception):
    """A case's check failed; the message is the reason printed after FAIL."""


def case(name, fn, *args):
    global PASSED, FAILED
    if FILTER and FILTER not in name:
        return
    try:
        fn(*args)
        PASSED += 1
        print('ok', name)
    except CaseFail as e:
        FAILED += 1
        print('FAIL', name, e)
    except Exception:  # pylint: disable=broad-except
        FAILED += 1
        print('FAIL', name, traceback.format_exc().replace('\n', ' | '))


def nds(*args, ok=True):
    r = subprocess.run([NDS] + list(args), capture_output=True, text=True, timeout=300)
    if ok and r.returncode != 0:
        raise CaseFail('ndstore %s: exit %d: %s' % (' '.join(args), r.returncode, r.stderr.strip()))
    return r


def nds_read(spec, path):
    nds('read', spec, '-o', path)
    return np.load(path)


# ---- the format, from the specification ------------------------------------------------------

def murmur3_x86_128(data, seed=0):
    """MurmurHash3_x86_128 -> (h1, h2, h3, h4)."""
    m = 0xffffffff
    rotl = lambda x, r: ((x << r) | (x >> (32 - r))) & m

    def fmix(h):
        h ^= h >> 16
        h = (h * 0x85ebca6b) & m
        h ^= h >> 13
        h = (h * 0xc2b2ae35) & m
        return h ^ (h >> 16)

    c = [0x239b961b, 0xab0e9789, 0x38b34ae5, 0xa1e38b93]
    add = [0x561ccd1b, 0x0bcaa747, 0x96cd1c35, 0x32ac3b17]
    hrot, krot = [19, 17, 15, 13], [15, 16, 17, 18]
    h = [seed] * 4
    n = len(data)
    for b in range(n // 16):
        k = list(struct.unpack_from('<4I', data, 16 * b))
        for i in range(4):
            k[i] = (rotl((k[i] * c[i]) & m, krot[i]) * c[(i + 1) % 4]) & m
            h[i] ^= k[i]
            h[i] = (((rotl(h[i], hrot[i]) + h[(i + 1) % 4]) & m) * 5 + add[i]) & m
    tail = data[n // 16 * 16:] + b'\0' * 16
    k = list(struct.unpack_from('<4I', tail, 0))
    for i in range(4):
        h[i] ^= (rotl((k[i] * c[i]) & m, krot[i]) * c[(i + 1) % 4]) & m
    h = [x ^ n for x in h]
    h[0] = (h[0] + h[1] + h[2] + h[3]) & m
    h[1:] = [(x + h[0]) & m for x in h[1:]]
    h = [fmix(x) for x in h]
    h[0] = (h[0] + h[1] + h[2] + h[3]) & m
    h[1:] = [(x + h[0]) & m for x in h[1:]]
    return tuple(h)


def bits_for(n):
    return (n - 1).bit_length() if n > 1 else 0


def morton(cell, grid):
    bits = [bits_for(g) for g in grid]
    out, j = 0, 0
    for i in range(max(bits) if bits else 0):
        for d in range(3):
            if i < bits[d]:
                out |= ((cell[d] >> i) & 1) << j
                j += 1
    return out


def shard_of(sh, chunk_id):
    h = chunk_id >> sh['preshift_bits']
    if sh['hash'] == 'murmurhash3_x86_128':
        r = murmur3_x86_128(struct.pack('<Q', h))
        h = r[0] | r[1] << 32
    mini = h & ((1 << sh['minishard_bits']) - 1)
    shard = (h >> sh['minishard_bits']) & ((1 << sh['shard_bits']) - 1)
    return shard, mini


def shard_name(sh, shard):
    return '%0*x.shard' % ((sh['shard_bits'] + 3) // 4, shard)


def encode(sh, member, data):
    return zlib.compress(data, 6, 31) if sh.get(member, 'raw') == 'gzip' else data


def decode(sh, member, data):
    return zlib.decompress(data, 47) if sh.get(member, 'raw') == 'gzip' else data


def write_shard(sh, chunks):
    """chunks: {chunk_id: bytes} of one shard -> shard file bytes (minishards in order)."""
    n_mini = 1 << sh['minishard_bits']
    index_end = 16 * n_mini
    body, index = bytearray(), bytearray(index_end)
    by_mini = {}
    for cid in sorted(chunks):
        by_mini.setdefault(shard_of(sh, cid)[1], []).append(cid)
    for mi in range(n_mini):
        ids = by_mini.get(mi, [])
        starts, sizes = [], []
        for cid in ids:
            data = encode(sh, 'data_encoding', chunks[cid])
            starts.append(index_end + len(body))
            sizes.append(len(data))
            body += data
        arr = np.zeros((3, len(ids)), '<u8')
        prev_id, prev_end = 0, index_end
        for i, cid in enumerate(ids):
            arr[0, i], arr[1, i], arr[2, i] = cid - prev_id, starts[i] - prev_end, sizes[i]
            prev_id, prev_end = cid, starts[i] + sizes[i]
        mindex = encode(sh, 'minishard_index_encoding', arr.tobytes())
        start = len(body)
        body += mindex
        struct.pack_into('<QQ', index, 16 * mi, start, len(body))
    return bytes(index) + bytes(body)


def read_shard_chunk(sh, data, chunk_id):
    mi = shard_of(sh, chunk_id)[1]
    index_end = 16 << sh['minishard_bits']
    a, b = struct.unpack_from('<QQ', data, 16 * mi)
    if a == b:
        return None
    arr = np.frombuffer(decode(sh, 'minishard_index_encoding', data[index_end + a:index_end + b]), '<u8')
    arr = arr.reshape(3, -1)
    ids = np.cumsum(arr[0])
    pos = index_end
    for i in range(arr.shape[1]):
        start = pos + int(arr[1, i])
        end = start + int(arr[2, i])
        if int(ids[i]) == chunk_id:
            return decode(sh, 'data_encoding', data[start:end])
        pos = end
    return None


def shard_chunks(sh, shard, data):
    """Every chunk of a shard file, checked strictly: ids of this shard and minishard, ascending per
    minishard, byte ranges inside the file and not overlapping -> {chunk_id: stored bytes}."""
    index_end = 16 << sh['minishard_bits']
    if len(data) < index_end:
        raise CaseFail('shard %d: %d bytes, shorter than its index' % (shard, len(data)))
    out, ranges = {}, [(0, index_end)]
    for mi in range(1 << sh['minishard_bits']):
        a, b = struct.unpack_from('<QQ', data, 16 * mi)
        if a > b or index_end + b > len(data):
            raise CaseFail('shard %d: minishard %d index range [%d, %d) is bad' % (shard, mi, a, b))
        if a == b:
            continue
        ranges.append((index_end + a, index_end + b))
        arr = np.frombuffer(decode(sh, 'minishard_index_encoding', data[index_end + a:index_end + b]), '<u8')
        arr = arr.reshape(3, -1)
        ids, pos = np.cumsum(arr[0]), index_end
        for i in range(arr.shape[1]):
            cid, start = int(ids[i]), pos + int(arr[1, i])
            end = start + int(arr[2, i])
            if shard_of(sh, cid) != (shard, mi):
                raise CaseFail('shard %d minishard %d lists chunk %d of %s' % (shard, mi, cid, shard_of(sh, cid)))
            if i and cid <= int(ids[i - 1]):
                raise CaseFail('shard %d minishard %d: ids not ascending' % (shard, mi))
            if end > len(data):
                raise CaseFail('shard %d: chunk %d past the end' % (shard, cid))
            ranges.append((start, end))
            out[cid] = data[start:end]
            pos = end
    ranges.sort()
    for (s0, e0), (s1, e1) in zip(ranges, ranges[1:]):
        if s1 < e0 and s1 < e1:
            raise CaseFail('shard %d: byte ranges [%d, %d) and [%d, %d) overlap' % (shard, s0, e0, s1, e1))
    return out


def cseg_decode(data, vol, block, dtype, nchan):
    """The compressed_segmentation decoder: bytes -> array [c, z, y, x]."""
    words = np.frombuffer(data, '<u4')
    elem = np.dtype(dtype).itemsize // 4
    out = np.zeros((nchan, vol[2], vol[1], vol[0]), dtype)
    grid = [-(-vol[d] // block[d]) for d in range(3)]
    for c in range(nchan):
        base = int(words[c])
        b = 0
        for gz in range(grid[2]):
            for gy in range(grid[1]):
                for gx in range(grid[0]):
                    h0, h1 = int(words[base + 2 * b]), int(words[base + 2 * b + 1])
                    b += 1
                    table, bits, values = base + (h0 & 0xffffff), h0 >> 24, base + h1
                    for z in range(gz * block[2], min((gz + 1) * block[2], vol[2])):
                        for y in range(gy * block[1], min((gy + 1) * block[1], vol[1])):
                            for x in range(gx * block[0], min((gx + 1) * block[0], vol[0])):
                                i = (x - gx * block[0]) + block[0] * ((y - gy * block[1]) + block[1] * (z - gz * block[2]))
                                idx = (int(words[values + i * bits // 32]) >> (i * bits % 32)) & ((1 << bits) - 1) if bits else 0
                                lo = int(words[table + idx * elem])
                                hi = int(words[table + idx * elem + 1]) if elem == 2 else 0
                                out[c, z, y, x] = lo | hi << 32
    return out


def cseg_encode(arr, block):
    """The compressed_segmentation encoder for arr [c, z, y, x] (uint32 / uint64) -> bytes."""
    nchan, vol = arr.shape[0], (arr.shape[3], arr.shape[2], arr.shape[1])
    elem = arr.dtype.itemsize // 4
    out = [0] * nchan
    grid = [-(-vol[d] // block[d]) for d in range(3)]
    for c in range(nchan):
        out[c] = len(out)
        base = len(out)
        tables = {}  # identical lookup tables are written once per channel
        out += [0] * (2 * grid[0] * grid[1] * grid[2])
        b = 0
        for gz in range(grid[2]):
            for gy in range(grid[1]):
                for gx in range(grid[0]):
                    sub = arr[c, gz * block[2]:(gz + 1) * block[2], gy * block[1]:(gy + 1) * block[1],
                              gx * block[0]:(gx + 1) * block[0]]
                    uniq = sorted(set(int(v) for v in sub.flat))
                    bits = 0 if len(uniq) == 1 else next(k for k in (1, 2, 4, 8, 16, 32) if (1 << k) >= len(uniq))
                    packed = [0] * ((bits * block[0] * block[1] * block[2] + 31) // 32)
                    for (z, y, x), v in np.ndenumerate(sub):
                        i = x + block[0] * (y + block[1] * z)
                        if bits:
                            packed[i * bits // 32] |= uniq.index(int(v)) << (i * bits % 32)
                    values = len(out) - base
                    out += packed
                    table = tables.setdefault(tuple(uniq), len(out) - base)
                    if table == len(out) - base:
                        for v in uniq:
                            out += [v & 0xffffffff] + ([v >> 32] if elem == 2 else [])
                    out[base + 2 * b], out[base + 2 * b + 1] = table | bits << 24, values
                    b += 1
    return np.array(out, '<u4').tobytes()


# ---- the cases ---------------------------------------------------------------------------------

def load_fixture(fixtures):
    raw = np.fromfile(os.path.join(fixtures, 'compressed_segmentation', '64x64x64-raw-uint64-segmentation.dat'),
                      '<u8')
    return raw.reshape(64, 64, 64)  # [z, y, x]: x fastest


def a_fixture(fixtures, block):
    zyx = load_fixture(fixtures)
    xyzc = np.ascontiguousarray(zyx.transpose(2, 1, 0))[..., None]
    d = os.path.join(TMP, 'fix_%d_%d_%d' % tuple(block))
    np.save(d + '.npy', xyzc)
    spec = json.dumps({'driver': 'neuroglancer_precomputed', 'kvstore': 'file://' + d + '/',
                       'create': True, 'multiscale_metadata': {'data_type': 'uint64', 'num_channels': 1},
                       'scale_metadata': {'size': [64, 64, 64], 'chunk_size': [64, 64, 64], 'resolution': [8, 8, 8],
                                          'encoding': 'compressed_segmentation',
                                          'compressed_segmentation_block_size': block}})
    nds('create', spec)
    nds('write', 'file://' + d + '/|neuroglancer_precomputed:', '-i', d + '.npy')
    chunk = open(os.path.join(d, '8_8_8', '0-64_0-64_0-64'), 'rb').read()
    print('   compressed_segmentation block %s: %d bytes (raw %d)' % (block, len(chunk), 64 ** 3 * 8))
    if block == [8, 8, 8] and len(chunk) != 71348:
        raise CaseFail('encoded size %d, expected 71348' % len(chunk))
    if block[0] <= 8 and not np.array_equal(cseg_decode(chunk, (64, 64, 64), block, np.uint64, 1)[0], zyx):
        raise CaseFail('this decoder reads other labels')
    if block == [8, 8, 8] and cseg_encode(zyx[None], block) != chunk:
        raise CaseFail('this encoder writes other bytes')
    back = nds_read('file://' + d + '/|neuroglancer_precomputed:', d + '.out.npy')
    if not np.array_equal(back, xyzc):
        raise CaseFail('ndstore read differs')


def volume_info(dtype, nchan, size, chunk, encoding, offset, sharding, block=None):
    scale = {'key': 's', 'size': size, 'resolution': [4, 4, 40], 'voxel_offset': offset, 'chunk_sizes': [chunk],
             'encoding': encoding}
    if block:
        scale['compressed_segmentation_block_size'] = block
    if sharding:
        scale['sharding'] = sharding
    return {'@type': 'neuroglancer_multiscale_volume', 'type': 'segmentation' if block else 'image',
            'data_type': dtype, 'num_channels': nchan, 'scales': [scale]}


def chunk_bytes(arr, g, chunk, encoding, block):
    """arr [x, y, z, c] -> the stored chunk of grid cell g (clipped)."""
    sl = tuple(slice(g[d] * chunk[d], (g[d] + 1) * chunk[d]) for d in range(3))
    sub = arr[sl]  # [x, y, z, c]
    if encoding == 'raw':
        return np.asfortranarray(sub).astype(sub.dtype.newbyteorder('<')).tobytes(order='F')
    return cseg_encode(np.ascontiguousarray(sub.transpose(3, 2, 1, 0)), block)


def b_write_volume(name, dtype, nchan, size, chunk, encoding, offset, sharding, block=None):
    d = os.path.join(TMP, 'b_' + name)
    os.makedirs(os.path.join(d, 's'))
    rng = np.random.default_rng(len(name))
    arr = (rng.integers(0, 6, size=tuple(size) + (nchan,)) * 1000003).astype(dtype)
    info = volume_info(dtype, nchan, size, chunk, encoding, offset, sharding, block)
    open(os.path.join(d, 'info'), 'w').write(json.dumps(info))
    grid = [-(-size[k] // chunk[k]) for k in range(3)]
    shards = {}
    for gx in range(grid[0]):
        for gy in range(grid[1]):
            for gz in range(grid[2]):
                g = (gx, gy, gz)
                data = chunk_bytes(arr, g, chunk, encoding, block)
                if sharding:
                    cid = morton(g, grid)
                    shards.setdefault(shard_of(sharding, cid)[0], {})[cid] = data
                    continue
                lo = [offset[k] + g[k] * chunk[k] for k in range(3)]
                hi = [offset[k] + min((g[k] + 1) * chunk[k], size[k]) for k in range(3)]
                open(os.path.join(d, 's', '%d-%d_%d-%d_%d-%d' % (lo[0], hi[0], lo[1], hi[1], lo[2], hi[2])),
                     'wb').write(data)
    for shard, chunks in shards.items():
        open(os.path.join(d, 's', shard_name(sharding, shard)), 'wb').write(write_shard(sharding, chunks))
    back = nds_read('file://' + d + '/|neuroglancer_precomputed:', d + '.npy')
    if back.shape != arr.shape or not np.array_equal(back, arr):
        raise CaseFail('ndstore reads other values')
    r = nds('verify', 'file://' + d + '/|neuroglancer_precomputed:')
    if ' 0 bad' not in r.stdout:
        raise CaseFail('verify: ' + r.stdout.strip())


def sharding(pre, mini, shard, hash_, ienc, denc):
    return {'@type': 'neuroglancer_uint64_sharded_v1', 'preshift_bits': pre, 'minishard_bits': mini,
            'shard_bits': shard, 'hash': hash_, 'minishard_index_encoding': ienc, 'data_encoding': denc}


def b_cases():
    vols = [('u16', 'uint16', 2, [37, 29, 11], [8, 8, 4], 'raw', [5, -7, 100], None),
            ('u64_cseg', 'uint64', 1, [30, 20, 9], [16, 8, 4], 'compressed_segmentation', [0, 0, 0], [4, 4, 2]),
            ('u32_cseg_2c', 'uint32', 2, [17, 9, 6], [8, 8, 8], 'compressed_segmentation', [1, 2, 3], [3, 5, 2])]
    shardings = [None, sharding(0, 2, 3, 'identity', 'raw', 'raw'), sharding(1, 1, 6, 'identity', 'gzip', 'gzip'),
                 sharding(0, 3, 2, 'murmurhash3_x86_128', 'gzip', 'raw'),
                 sharding(2, 0, 4, 'murmurhash3_x86_128', 'raw', 'gzip'), sharding(0, 1, 1, 'identity', 'raw', 'gzip')]
    for v in vols:
        for i, sh in enumerate(shardings):
            name = '%s_%s' % (v[0], 'unsharded' if sh is None else '%s_%d' % (sh['hash'][:4], i))
            case('b ' + name, b_write_volume, name, *v[1:7], sh, v[7])


def c_ndstore_writes(name, sh, encoding):
    d = os.path.join(TMP, 'c_' + name)
    size, chunk = [45, 30, 17], [8, 8, 8]
    rng = np.random.default_rng(7)
    arr = (rng.integers(0, 4, size=tuple(size) + (1,)) * 77).astype('uint32')
    np.save(d + '.npy', arr)
    nds('create', d + '.zarr', '--shape', '45,30,17,1', '--chunks', '45,30,17,1', '--dtype', 'uint32')
    nds('write', d + '.zarr', '-i', d + '.npy')
    scale = {'chunk_size': chunk, 'sharding': sh, 'encoding': encoding, 'resolution': [2, 2, 2]}
    if encoding == 'compressed_segmentation':
        scale['compressed_segmentation_block_size'] = [4, 4, 4]
    nds('cp', d + '.zarr', json.dumps({'driver': 'neuroglancer_precomputed', 'kvstore': 'file://' + d + '/',
                                        'scale_metadata': scale}))
    grid = [-(-size[k] // chunk[k]) for k in range(3)]
    stored = 0
    for name in os.listdir(os.path.join(d, '2_2_2')):
        shard = int(name[:-len('.shard')], 16)
        if name != shard_name(sh, shard):
            raise CaseFail('unexpected file %s' % name)
        stored += len(shard_chunks(sh, shard, open(os.path.join(d, '2_2_2', name), 'rb').read()))
    for gx in range(grid[0]):
        for gy in range(grid[1]):
            for gz in range(grid[2]):
                g = (gx, gy, gz)
                cid = morton(g, grid)
                stored -= 1 if arr[gx * 8:(gx + 1) * 8, gy * 8:(gy + 1) * 8, gz * 8:(gz + 1) * 8].any() else 0
                path = os.path.join(d, '2_2_2', shard_name(sh, shard_of(sh, cid)[0]))
                data = read_shard_chunk(sh, open(path, 'rb').read(), cid) if os.path.exists(path) else None
                sub = arr[g[0] * 8:(g[0] + 1) * 8, g[1] * 8:(g[1] + 1) * 8, g[2] * 8:(g[2] + 1) * 8]
                if data is None:
                    if sub.any():
                        raise CaseFail('chunk %s missing' % (g,))
                    continue
                e = sub.shape
                if encoding == 'raw':
                    got = np.frombuffer(data, '<u4').reshape(e[3], e[2], e[1], e[0]).transpose(3, 2, 1, 0)
                else:
                    got = cseg_decode(data, (e[0], e[1], e[2]), (4, 4, 4), np.uint32, 1).transpose(3, 2, 1, 0)
                if not np.array_equal(got, sub):
                    raise CaseFail('chunk %s differs' % (g,))
    if stored:
        raise CaseFail('%d chunks stored that are all zero (or missing)' % stored)


def c_cases():
    # The grid is 6 x 4 x 3 chunks (7 Morton bits): the last four shard by hash or wrap.
    for i, sh in enumerate([sharding(0, 0, 8, 'identity', 'raw', 'raw'), sharding(2, 1, 5, 'identity', 'gzip', 'gzip'),
                            sharding(3, 3, 2, 'identity', 'gzip', 'raw'),
                            sharding(1, 2, 0, 'murmurhash3_x86_128', 'raw', 'gzip'),
                            sharding(0, 2, 3, 'murmurhash3_x86_128', 'gzip', 'gzip'),
                            sharding(1, 0, 4, 'murmurhash3_x86_128', 'raw', 'raw'),
                            sharding(1, 2, 2, 'identity', 'gzip', 'gzip'),
                            sharding(0, 1, 3, 'identity', 'raw', 'raw')]):
        for enc in ['raw', 'compressed_segmentation']:
            case('c %s_%d_%s' % (sh['hash'][:4], i, enc[:3]), c_ndstore_writes, '%d_%s' % (i, enc[:3]), sh, enc)


def d_partial_rewrite(name, sh):
    """Hashed shards written here (level 9 gzip data), then `ndstore write` of an unaligned region
    and of an all-zero block: new values read here, untouched chunks keep these bytes."""
    d = os.path.join(TMP, 'd_' + name)
    os.makedirs(os.path.join(d, 's'))
    size, chunk = [40, 24, 12], [8, 8, 4]
    grid = [-(-size[k] // chunk[k]) for k in range(3)]
    arr = (np.arange(np.prod(size)).reshape(size + [1]) % 251 + 1).astype('uint16')
    open(os.path.join(d, 'info'), 'w').write(json.dumps(volume_info('uint16', 1, size, chunk, 'raw', [0, 0, 0], sh)))
    shards, mine = {}, {}
    for g in np.ndindex(*grid):
        cid = morton(g, grid)
        raw = chunk_bytes(arr, g, chunk, 'raw', None)
        c = zlib.compressobj(9, zlib.DEFLATED, 31)
        mine[cid] = c.compress(raw) + c.flush()
        shards.setdefault(shard_of(sh, cid)[0], {})[cid] = raw
    for shard, chunks in shards.items():
        data = write_shard(dict(sh, data_encoding='raw'), {k: mine[k] for k in chunks})  # bytes as given
        open(os.path.join(d, 's', shard_name(sh, shard)), 'wb').write(data)
    spec = 'file://' + d + '/|neuroglancer_precomputed:'
    new = (np.arange(7 * 9 * 5).reshape(7, 9, 5, 1) + 3000).astype('uint16')
    np.save(d + '.new.npy', new)
    np.save(d + '.zero.npy', np.zeros((8, 8, 4, 1), 'uint16'))
    nds('write', spec, '-r', '[5:12, 10:19, 3:8, :]', '-i', d + '.new.npy', '-r', '[16:24, 8:16, 4:8, :]',
        '-i', d + '.zero.npy')
    arr[5:12, 10:19, 3:8] = new
    arr[16:24, 8:16, 4:8] = 0
    touched = {morton((x // 8, y // 8, z // 4), grid) for x in range(5, 12) for y in range(10, 19) for z in range(3, 8)}
    zeroed = morton((2, 1, 1), grid)
    found = {}
    for name_ in os.listdir(os.path.join(d, 's')):
        shard = int(name_[:-len('.shard')], 16)
        found.update(shard_chunks(sh, shard, open(os.path.join(d, 's', name_), 'rb').read()))
    for g in np.ndindex(*grid):
        cid = morton(g, grid)
        if cid == zeroed:
            if cid in found:
                raise CaseFail('chunk %s, written all zero, is still stored' % (g,))
            continue
        if cid not in touched and found.get(cid) != mine[cid]:
            raise CaseFail('chunk %s was not written but its bytes changed' % (g,))
        data = zlib.decompress(found[cid], 47)
        sub = arr[tuple(slice(g[k] * chunk[k], (g[k] + 1) * chunk[k]) for k in range(3))]
        e = sub.shape
        got = np.frombuffer(data, '<u2').reshape(e[3], e[2], e[1], e[0]).transpose(3, 2, 1, 0)
        if not np.array_equal(got, sub):
            raise CaseFail('chunk %s holds other values' % (g,))
    back = nds_read(spec, d + '.out.npy')
    if not np.array_equal(back, arr):
        raise CaseFail('ndstore reads other values')


def d_cases():
    case('d murmur partial rewrite', d_partial_rewrite, 'murmur', sharding(0, 2, 2, 'murmurhash3_x86_128', 'gzip', 'gzip'))
    case('d identity wrap partial rewrite', d_partial_rewrite, 'wrap', sharding(1, 1, 2, 'identity', 'raw', 'gzip'))


def murmur_vectors():
    # TensorStore's published vectors (pymmh3): key 0 and 42, seed 0.
    if murmur3_x86_128(struct.pack('<Q', 0))[:2] != (0xe028ae41, 0x4772b084):
        raise CaseFail('murmur3(0)')
    if murmur3_x86_128(struct.pack('<Q', 42))[:2] != (0x5119f47a, 0xc20b94f9):
        raise CaseFail('murmur3(42)')


def main(argv):
    global NDS, TMP, FILTER
    args = argv[1:]
    if '-k' in args[:-1]:
        i = args.index('-k')
        FILTER = args[i + 1]
        del args[i:i + 2]
    if len(args) not in (1, 2):
        print(__doc__)
        return 2
    NDS = os.path.abspath(args[0])
    # FIXTURES_DIR defaults to the repository's tests/fixtures.
    fixtures = args[1] if len(args) == 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                           '..', 'fixtures')
    TMP = tempfile.mkdtemp(prefix='nds-precomputed-')
    try:
        case('murmur3 vectors', murmur_vectors)
        for block in ([8, 8, 8], [4, 4, 4], [16, 16, 16], [5, 3, 7]):
            case('a fixture block %s' % block, a_fixture, fixtures, block)
        b_cases()
        c_cases()
        d_cases()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    print('%d passed, %d failed' % (PASSED, FAILED))
    return 1 if FAILED else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
