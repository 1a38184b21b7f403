#!/usr/bin/env python3
"""Neuroglancer, the real client, reading volumes that ndstore wrote and `ndstore serve` serves.

Volumes are written with the ndstore command line (create, write, cp), each a 128 x 128 x 16 volume
of 4 x 4 squares (32 x 32 voxels each, the same in every z):
  image         precomputed, uint8, JPEG encoding; square (i, j) has grey level 20 + 15 (i + 4 j)
  segmentation  precomputed, uint64, compressed_segmentation in murmurhash3_x86_128 shards (ranged
                reads); square (i, j) has label LABELS[(i + j) % 3], labels beyond 2^32
  zarr v3       zstd chunks, grey 250 - 15 (i + 4 j), opened as zarr3://
  zarr v3 sharded  the same in sharding_indexed shards of 2 x 4 x 2 inner chunks (ranged reads)
  zarr v2       the zarr v3 array copied by `ndstore cp` to zarr v2 (gzip), opened as zarr://
Two neuroglancers (tests/interop/neuroglancer/package-lock.json, `npm ci`): @janelia-flyem/neuroglancer
2.37.5, whose built dist/min is served as it is, reads the precomputed volumes and zarr v2 (its zarr
source requires "zarr_format": 2); neuroglancer 2.41.2, a library bundled here by build.mjs (esbuild,
about 2 s), reads zarr v3. Each viewer is served by an `ndstore serve`, the volumes by another on
another port (so CORS and, for shards, byte ranges are exercised). Headless Chromium (Debian's) is
driven over the DevTools protocol: an 800 x 600 page, the state in the URL fragment, a screenshot
every 0.5 s until the squares show what the data must show:
  image, zarr   each square's grey level is its voxel value (within 4, for JPEG) and R = G = B
  segmentation  squares of one label have one colour, squares of different labels differ, none is
                the background
Then each volume is damaged on disk (a chunk or a shard overwritten with garbage of its length) and
the page loaded again: the check must FAIL for 10 s while the damaged key is served, or the test
fails (a check that cannot fail proves nothing).

Usage: /usr/bin/python3 neuroglancer_test.py NDSTORE_BINARY
Needs chromium, node, python3-websocket, python3-numpy, and `npm ci --prefix tests/interop/neuroglancer`. Talks only to 127.0.0.1. Bounded: the whole run
stops after 170 s; every server and the browser are stopped on any exit (signals included).
Prints one line per check and "N passed, N failed"; exits 1 on any failure.
"""
import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
import zlib

import numpy as np
import websocket

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGES = os.path.join(HERE, 'neuroglancer')
JANELIA_VIEWER = os.path.join(PACKAGES, 'node_modules', '@janelia-flyem', 'neuroglancer', 'dist', 'min')
TOTAL_SECONDS = 170
READY_SECONDS = int(os.environ.get('NG_READY_SECONDS', 40))   # a healthy volume must be drawn within this
DAMAGED_SECONDS = 10  # a damaged one is watched this long: the check must never pass
SIZE, SQUARE, DEPTH = 128, 32, 16
LABELS = [1, (1 << 40) + 7, 123456789012345]

BIN = None
TMP = None
children = []  # (name, Popen, own process group) of everything started, stopped by cleanup()
passed = 0
failed = 0


def result(ok, what):
    global passed, failed
    if ok:
        passed += 1
        print('ok    ' + what, flush=True)
    else:
        failed += 1
        print('FAIL: ' + what, flush=True)


# ---- processes --------------------------------------------------------------------------------

def nds(*args):
    r = subprocess.run([BIN] + list(args), capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError('ndstore %s: exit %d: %s' % (' '.join(args[:1]), r.returncode, r.stderr.strip()))
    return r.stdout


class Server:
    """`ndstore serve URL --port 0`, its stderr (the request log) in a file."""

    def __init__(self, name, url):
        self.log_path = os.path.join(TMP, name + '.log')
        self.log = open(self.log_path, 'w')
        self.proc = subprocess.Popen([BIN, 'serve', url, '--port', '0'], stdout=subprocess.PIPE,
                                     stderr=self.log, text=True)
        children.append((name, self.proc, False))
        self.url = self.proc.stdout.readline().strip()  # printed once listening
        if not self.url.startswith('http://127.0.0.1:'):
            raise RuntimeError('ndstore serve %s printed %r, not its URL' % (url, self.url))

    def log_lines(self):
        with open(self.log_path) as f:
            return f.read().splitlines()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=20)


def stop_process(name, proc, group):
    if proc.poll() is not None:
        return
    try:
        if group:
            os.killpg(proc.pid, signal.SIGTERM)
        else:
            proc.terminate()
        proc.wait(timeout=10)
    except (subprocess.TimeoutExpired, ProcessLookupError):
        try:
            os.killpg(proc.pid, signal.SIGKILL) if group else proc.kill()
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)


def cleanup():
    for name, proc, group in reversed(children):
        stop_process(name, proc, group)
    children.clear()
    if TMP and not os.environ.get('KEEP'):
        shutil.rmtree(TMP, ignore_errors=True)


def on_signal(signum, frame):
    raise SystemExit('stopped by signal %d' % signum)


# ---- the browser ------------------------------------------------------------------------------

class Browser:
    """Headless Chromium with software WebGL, driven over the DevTools protocol (one page)."""

    def __init__(self):
        profile = os.path.join(TMP, 'chromium-profile')
        os.makedirs(profile)
        self.proc = subprocess.Popen(
            ['chromium', '--headless=new', '--no-sandbox', '--use-gl=angle', '--use-angle=swiftshader',
             '--enable-unsafe-swiftshader', '--remote-debugging-port=0', '--remote-allow-origins=*',
             '--user-data-dir=' + profile, '--no-first-run', '--no-default-browser-check',
             '--disable-background-networking', 'about:blank'],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(TMP, 'chromium.log'), 'w'),
            start_new_session=True)
        children.append(('chromium', self.proc, True))
        port_file = os.path.join(profile, 'DevToolsActivePort')
        port = None
        for _ in range(300):
            if os.path.exists(port_file):
                lines = open(port_file).read().split()
                if lines:
                    port = int(lines[0])
                    break
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        if port is None:
            raise RuntimeError('chromium did not open its DevTools port (see chromium.log)')
        with urllib.request.urlopen('http://127.0.0.1:%d/json/list' % port, timeout=10) as r:
            pages = [t for t in json.load(r) if t.get('type') == 'page']
        self.ws = websocket.create_connection(pages[0]['webSocketDebuggerUrl'], timeout=30)
        self.next_id = 0
        self.call('Emulation.setDeviceMetricsOverride', width=800, height=600, deviceScaleFactor=1,
                  mobile=False)
        self.call('Network.enable')
        self.call('Network.setCacheDisabled', cacheDisabled=True)

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({'id': self.next_id, 'method': method, 'params': params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get('id') == self.next_id:
                if 'error' in msg:
                    raise RuntimeError('%s: %s' % (method, msg['error']))
                return msg.get('result', {})

    def open(self, url):
        # about:blank first: a URL differing only in its fragment would not reload the viewer, and
        # its chunks cached in memory would hide a damaged store.
        self.call('Page.navigate', url='about:blank')
        time.sleep(0.2)
        self.call('Page.navigate', url=url)

    def screenshot(self):
        data = base64.b64decode(self.call('Page.captureScreenshot', format='png')['data'])
        with open(os.path.join(TMP, 'last.png'), 'wb') as f:  # kept with KEEP=1, to look at
            f.write(data)
        return png_decode(data)

    def close(self):
        try:
            self.ws.close()
        except Exception:
            pass


# ---- PNG --------------------------------------------------------------------------------------

def png_decode(data):
    """An 8-bit RGB or RGBA PNG (what Chromium's screenshots are) as an H x W x 3 uint8 array."""
    if data[:8] != b'\x89PNG\r\n\x1a\n':
        raise ValueError('not a PNG')
    pos, idat, width = 8, [], None
    while pos < len(data):
        n = int.from_bytes(data[pos:pos + 4], 'big')
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b'IHDR':
            width, height = int.from_bytes(body[0:4], 'big'), int.from_bytes(body[4:8], 'big')
            depth, color, interlace = body[8], body[9], body[12]
            if depth != 8 or color not in (2, 6) or interlace:
                raise ValueError('PNG depth %d color %d interlace %d not handled' % (depth, color, interlace))
            bpp = 3 if color == 2 else 4
        elif kind == b'IDAT':
            idat.append(body)
    raw = np.frombuffer(zlib.decompress(b''.join(idat)), np.uint8).reshape(height, 1 + width * bpp)
    out = np.zeros((height, width * bpp), np.int32)
    prev = np.zeros(width * bpp, np.int32)
    for y in range(height):
        f, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        if f == 0:
            cur = line
        elif f == 1:  # Sub: a running sum per channel
            cur = np.cumsum(line.reshape(width, bpp), axis=0).reshape(-1) & 255
        elif f == 2:
            cur = (line + prev) & 255
        else:
            cur = unfilter_slow(f, line, prev, bpp)
        out[y] = cur
        prev = cur
    return out.reshape(height, width, bpp)[:, :, :3].astype(np.uint8)


def unfilter_slow(f, line, prev, bpp):
    cur = np.zeros_like(line)
    ln, pv = line.tolist(), prev.tolist()
    c = [0] * len(ln)
    for i in range(len(ln)):
        a = c[i - bpp] if i >= bpp else 0
        b = pv[i]
        if f == 3:
            c[i] = (ln[i] + ((a + b) >> 1)) & 255
        else:  # Paeth
            cc = pv[i - bpp] if i >= bpp else 0
            p = a + b - cc
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - cc)
            pred = a if pa <= pb and pa <= pc else (b if pb <= pc else cc)
            c[i] = (ln[i] + pred) & 255
    cur[:] = c
    return cur


# ---- what the screen must show ----------------------------------------------------------------

def volume_box(img):
    """The volume's outline (neuroglancer draws it yellow): (x0, y0, x1, y1) inside it, or None."""
    r, g, b = (img[:, :, k].astype(int) for k in range(3))
    yellow = (r > 200) & (g > 200) & (b < 90)
    # The outline's sides are long runs of yellow; the yellow labels of the top bar are not.
    rows, cols = np.nonzero(yellow.sum(axis=1) > 200)[0], np.nonzero(yellow.sum(axis=0) > 200)[0]
    if len(rows) < 2 or len(cols) < 2:
        return None
    x0, x1, y0, y1 = cols.min(), cols.max(), rows.min(), rows.max()
    if x1 - x0 < 200 or y1 - y0 < 200:
        return None
    return x0 + 2, y0 + 2, x1 - 1, y1 - 1


def square_colours(img, box):
    """The median colour of the middle of each square (i along x, j along y): dict (i, j) -> RGB."""
    x0, y0, x1, y1 = box
    sx, sy = (x1 - x0) / (SIZE / SQUARE), (y1 - y0) / (SIZE / SQUARE)
    out = {}
    for i in range(SIZE // SQUARE):
        for j in range(SIZE // SQUARE):
            cx, cy = int(x0 + (i + 0.5) * sx), int(y0 + (j + 0.5) * sy)
            patch = img[cy - int(sy / 4):cy + int(sy / 4), cx - int(sx / 4):cx + int(sx / 4)].reshape(-1, 3)
            out[(i, j)] = np.median(patch, axis=0)
    return out


def check_grey(img, level, tolerance):
    """Each square's grey level is level(i, j) within tolerance. (ok, why)."""
    box = volume_box(img)
    if box is None:
        return False, 'no volume outline on the page yet'
    for (i, j), c in square_colours(img, box).items():
        want = level(i, j)
        if max(abs(c - want)) > tolerance:
            return False, 'square (%d, %d) shows %s, not grey %d' % (i, j, c.astype(int).tolist(), want)
    return True, 'all 16 squares show their grey level'


def check_segments(img):
    """Squares of one label share a colour, of different labels differ, and none is background."""
    box = volume_box(img)
    if box is None:
        return False, 'no volume outline on the page yet'
    colours = square_colours(img, box)
    background = np.median(img[box[1]:box[3], 4:box[0] - 10].reshape(-1, 3), axis=0)
    for (i, j), c in colours.items():
        if np.abs(c - background).max() < 30:
            return False, 'square (%d, %d) shows the background %s' % (i, j, c.astype(int).tolist())
    for a, ca in colours.items():
        for b, cb in colours.items():
            same_label = (a[0] + a[1]) % 3 == (b[0] + b[1]) % 3
            d = np.abs(ca - cb).max()
            if same_label and d > 6:
                return False, 'squares %s and %s have one label but colours %s and %s' % (
                    a, b, ca.astype(int).tolist(), cb.astype(int).tolist())
            if not same_label and d < 15:
                return False, 'squares %s and %s have different labels but one colour %s' % (
                    a, b, ca.astype(int).tolist())
    return True, 'one colour per label, different labels differ (%d colours)' % len(
        {tuple(c.astype(int)) for c in colours.values()})


# ---- the volumes ------------------------------------------------------------------------------

def squares(dtype, value):
    a = np.zeros((SIZE, SIZE, DEPTH), dtype)  # [x, y, z]
    for i in range(SIZE // SQUARE):
        for j in range(SIZE // SQUARE):
            a[i * SQUARE:(i + 1) * SQUARE, j * SQUARE:(j + 1) * SQUARE, :] = value(i, j)
    return a


def precomputed(name, dtype, scale, array):
    d = os.path.join(TMP, 'data', name)
    spec = {'driver': 'neuroglancer_precomputed', 'kvstore': 'file://' + d + '/',
            'multiscale_metadata': {'type': 'image' if dtype == 'uint8' else 'segmentation',
                                    'data_type': dtype, 'num_channels': 1},
            'scale_metadata': dict({'size': [SIZE, SIZE, DEPTH], 'resolution': [4, 4, 40]}, **scale)}
    nds('create', json.dumps(spec))
    npy = os.path.join(TMP, name + '.npy')
    np.save(npy, array[..., None])  # [x, y, z, channel]
    nds('write', 'file://' + d + '/|neuroglancer_precomputed:', '-i', npy)


def make_volumes():
    grey = lambda i, j: 20 + 15 * (i + 4 * j)
    precomputed('image', 'uint8', {'chunk_size': [64, 64, 8], 'encoding': 'jpeg', 'jpeg_quality': 95},
                squares(np.uint8, grey))
    sharding = {'@type': 'neuroglancer_uint64_sharded_v1', 'preshift_bits': 1, 'hash': 'murmurhash3_x86_128',
                'minishard_bits': 2, 'shard_bits': 2, 'minishard_index_encoding': 'gzip',
                'data_encoding': 'gzip'}
    precomputed('segmentation', 'uint64',
                {'chunk_size': [32, 32, 8], 'encoding': 'compressed_segmentation',
                 'compressed_segmentation_block_size': [8, 8, 8], 'sharding': sharding},
                squares(np.uint64, lambda i, j: LABELS[(i + j) % 3]))
    v3 = 'file://' + os.path.join(TMP, 'data', 'v3.zarr') + '|zarr3:'
    nds('create', v3, '--shape', '%d,%d,%d' % (SIZE, SIZE, DEPTH), '--chunks', '64,64,8', '--dtype', 'uint8',
        '--codec', 'zstd:1')
    npy = os.path.join(TMP, 'zarr.npy')
    np.save(npy, squares(np.uint8, lambda i, j: 250 - 15 * (i + 4 * j)))
    nds('write', v3, '-i', npy)
    nds('cp', v3, 'file://' + os.path.join(TMP, 'data', 'v2.zarr') + '|zarr:', '--codec', 'gzip')
    sharded = {'driver': 'zarr3', 'kvstore': 'file://' + os.path.join(TMP, 'data', 'sharded.zarr') + '/',
               'schema': {'dtype': 'uint8', 'domain': {'shape': [SIZE, SIZE, DEPTH]}, 'codec': 'zstd:1',
                          'chunk_layout': {'write_chunk': {'shape': [64, SIZE, DEPTH]},
                                           'read_chunk': {'shape': [32, 32, 8]}}}}
    nds('create', json.dumps(sharded))
    nds('write', 'file://' + os.path.join(TMP, 'data', 'sharded.zarr') + '|zarr3:', '-i', npy)


def viewer_state(layer):
    state = {'position': [SIZE / 2, SIZE / 2, DEPTH / 2], 'crossSectionScale': 0.25, 'layout': 'xy',
             'showAxisLines': False, 'layers': [layer]}
    if layer['source'].startswith('precomputed://'):
        # zarr has no units: neuroglancer names its dimensions and gives each one unit.
        state['dimensions'] = {'x': [4e-9, 'm'], 'y': [4e-9, 'm'], 'z': [4e-8, 'm']}
    return state


ZARR_GREY = lambda img: check_grey(img, lambda i, j: 250 - 15 * (i + 4 * j), 1)

CASES = [
    # name, viewer, layer, check, key damaged (relative to the data server)
    ('image (precomputed, jpeg)', 'janelia',
     {'type': 'image', 'source': 'precomputed://{data}/image', 'name': 'img'},
     lambda img: check_grey(img, lambda i, j: 20 + 15 * (i + 4 * j), 4),
     'image/4_4_40/0-64_0-64_8-16'),
    ('segmentation (precomputed, compressed_segmentation, murmurhash3 shards)', 'janelia',
     {'type': 'segmentation', 'source': 'precomputed://{data}/segmentation', 'name': 'seg',
      'selectedAlpha': 1, 'notSelectedAlpha': 1},
     check_segments,
     'segmentation/4_4_40/0.shard'),  # "shard" in the key: its reads must be ranges
    ('zarr v3 (zarr3://, neuroglancer 2.41.2)', 'official',
     {'type': 'image', 'source': 'zarr3://{data}/v3.zarr', 'name': 'zarr3'},
     ZARR_GREY,
     'v3.zarr/c/0/0/1'),
    ('zarr v3 sharded (sharding_indexed, neuroglancer 2.41.2)', 'official',
     {'type': 'image', 'source': 'zarr3://{data}/sharded.zarr', 'name': 'sharded'},
     ZARR_GREY,
     'sharded.zarr/c/0/0/0'),  # "shard" in the key: its reads must be ranges
    ('zarr v2 (the v3 array copied by ndstore cp)', 'janelia',
     {'type': 'image', 'source': 'zarr://{data}/v2.zarr', 'name': 'zarr2'},
     ZARR_GREY,
     'v2.zarr/0.0.1'),
]


def watch(browser, url, check, seconds):
    """Opens url and takes a screenshot every 0.5 s until check passes, for up to seconds.
    Returns (passed, the check's last word, seconds it took)."""
    browser.open(url)
    start = time.monotonic()
    why = 'no screenshot'
    while time.monotonic() - start < seconds:
        time.sleep(0.5)
        ok, why = check(browser.screenshot())
        if ok:
            return True, why, time.monotonic() - start
    return False, why, None


def damage(path):
    n = os.path.getsize(path)
    with open(path, 'wb') as f:
        f.write(bytes((i * 131 + 7) & 255 for i in range(n)))


def run_case(browser, viewers, data, case):
    name, viewer, layer, check, damaged_key = case
    layer = dict(layer, source=layer['source'].format(data=data.url.rstrip('/')))
    url = viewers[viewer].url + '#!' + urllib.parse.quote(json.dumps(viewer_state(layer)))
    served_before = len(data.log_lines())
    ok, why, took = watch(browser, url, check, READY_SECONDS)
    result(ok, '%s: drawn as the data says%s: %s' % (name, ' in %.1f s' % took if ok else '', why))
    if 'shard' in damaged_key:  # a sharded volume is read by byte ranges: 206s, never whole shards
        statuses = [line.split(' ')[2] for line in data.log_lines()[served_before:]
                    if line.split(' ')[:2] == ['GET', '/' + damaged_key]]
        result(statuses and set(statuses) == {'206'},
               '%s: the shard is read in byte ranges (GET answers %s)' % (name, ' '.join(statuses)))
    if not ok:
        shutil.copy(os.path.join(TMP, 'last.png'), os.path.join(TMP, 'failed-%s.png' % layer['name']))
        return
    damage(os.path.join(TMP, 'data', damaged_key))
    served_before = len(data.log_lines())
    ok, why, _ = watch(browser, url, check, DAMAGED_SECONDS)
    served = [line for line in data.log_lines()[served_before:]
              if line.split(' ')[1:2] == ['/' + damaged_key] and line.split(' ')[2] in ('200', '206')]
    result(not ok and served, '%s: with %s damaged the check fails (%s; the damaged key served %d times)'
           % (name, damaged_key, why if not ok else 'it PASSED', len(served)))


def main():
    global BIN, TMP
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    BIN = os.path.abspath(sys.argv[1])
    if not os.path.exists(os.path.join(JANELIA_VIEWER, 'index.html')):
        print('FAIL: no neuroglancer viewer at %s (npm ci --prefix tests/interop/neuroglancer)' % JANELIA_VIEWER)
        return 1
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGALRM):
        signal.signal(s, on_signal)
    signal.alarm(TOTAL_SECONDS)
    TMP = tempfile.mkdtemp(prefix='nds-neuroglancer-')
    browser = None
    try:
        make_volumes()
        official = os.path.join(TMP, 'neuroglancer-2.41.2')
        subprocess.run(['node', os.path.join(PACKAGES, 'build.mjs'), official], check=True, timeout=120)
        viewers = {'janelia': Server('viewer-2.37.5', 'file://' + JANELIA_VIEWER),
                   'official': Server('viewer-2.41.2', 'file://' + official)}
        data = Server('data', 'file://' + os.path.join(TMP, 'data'))
        browser = Browser()
        for case in CASES:
            run_case(browser, viewers, data, case)
        browser.close()
        for server in list(viewers.values()) + [data]:
            rc = server.stop()
            result(rc == 0, 'ndstore serve stops on SIGTERM with exit 0 (got %s)' % rc)
    except SystemExit as e:
        result(False, 'the run stopped: %s' % e)
    except Exception as e:  # any other failure is a failed run, after the cleanup
        result(False, 'the run failed: %s: %s' % (type(e).__name__, e))
    finally:
        signal.alarm(0)
        if browser:
            browser.close()
        cleanup()
    print('%d passed, %d failed' % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == '__main__':
    sys.exit(main())
