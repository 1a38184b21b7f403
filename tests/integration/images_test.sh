#!/usr/bin/env bash
# `ndstore read -o x.png / x.tif` (issue 21, cli/image_out.c): the images are read back by real
# third-party readers, PIL (python3-pil) for PNG and TIFF and tifffile (python3-tifffile) for every TIFF
# sample format, and their pixels compared exactly with the .npy the array was written from; unknown
# extensions are refused, never written as .npy.
#
# usage: tests/integration/images_test.sh path/to/ndstore
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/check_lib.sh"
scratch_setup images-test "${1:?usage: images_test.sh path/to/ndstore}"
# expect_fail DESC TEXT: exit 1, one "ndstore:" line containing TEXT, and no file left at $OUTFILE
expect_refused() {
    expect_rc "${3:-1}" "$1"
    expect_err "$2" "$1"
    check '[ ! -e "$OUTFILE" ]' "$1: no output file"
}
if ! "$PY" -c 'import numpy, PIL, tifffile' 2>/dev/null; then
    echo "FAIL: $PY lacks numpy, PIL or tifffile (scripts/install-deps.sh installs python3-pil python3-tifffile)"
    exit 1
fi

# make NAME DTYPE SHAPE CHUNKS [FORMAT]: an array NAME (zarr v3) holding distinct values of DTYPE,
# also saved as NAME.npy: the reference.
make() {
    "$PY" - "$1" "$2" "$3" <<'EOF'
import numpy as np, sys
name, dt, shape = sys.argv[1], np.dtype(sys.argv[2]), tuple(int(s) for s in sys.argv[3].split(","))
n = int(np.prod(shape))
if dt.kind == "f":
    a = (np.arange(n) * 0.37 - n / 5).astype(dt)
    if n > 3: a[1], a[2], a[3] = np.float32(1e30), -0.0, np.nan
else:
    info = np.iinfo(dt)  # values spread over the whole range: both signs, the extremes
    span = int(info.max) - int(info.min) + 1
    a = np.array([(i * 2654435761) % span + int(info.min) for i in range(n)], dtype=dt)
    a[0], a[-1] = info.min, info.max
np.save(name + ".npy", a.reshape(shape))
EOF
    nds create "file://$T/$1|zarr3:" --shape "$3" --chunks "$4" --dtype "$2" --delete-existing
    nds write "file://$T/$1|zarr3:" -i "$1.npy"
    expect_rc 0 "make $1"
}

# same READER IMAGE NPY EXPR: the image read with READER (pil or tifffile) equals EXPR of the
# reference array a (e.g. "a[2]"), values and dtype (PIL widens 16-bit PNGs to int32: values only).
same() {
    if "$PY" - "$@" <<'EOF'; then ok; else no "$2 read with $1 is not $4 of $3"; fi
import numpy as np, sys
from PIL import Image, ImageSequence
import tifffile
reader, image, ref, expr = sys.argv[1:5]
a = np.load(ref)
want = eval(expr)
if reader == "pil":
    im = Image.open(image)
    pages = [np.array(p) for p in ImageSequence.Iterator(im)]
    got = pages[0] if len(pages) == 1 else np.stack(pages)
    ok = got.shape == want.shape and np.array_equal(got, want, equal_nan=got.dtype.kind == "f")
    if im.mode not in ("I", "I;16"):  # exact dtype where PIL keeps it
        ok = ok and got.dtype == want.dtype
else:
    got = tifffile.imread(image)
    ok = got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want, equal_nan=True)
    ok = ok and (np.signbit(got) == np.signbit(want)).all() if got.dtype.kind == "f" else ok
if not ok:
    print("got", got.dtype, got.shape, got.ravel()[:8], "want", want.dtype, want.shape, want.ravel()[:8])
sys.exit(0 if ok else 1)
EOF
}

# ---- PNG: uint8 and uint16 grey, 2-D regions --------------------------------------------------------
make u8 uint8 5,37,23 2,8,8
make u16 uint16 5,37,23 2,8,8
nds read u8 -r '[2]' -o u8.png;                 expect_rc 0 "uint8 slice to png"
same pil u8.png u8.npy "a[2]"
nds read u16 -r '[3]' -o u16.png;               expect_rc 0 "uint16 slice to png"
same pil u16.png u16.npy "a[3]"
"$PY" -c 'from PIL import Image; im = Image.open("u16.png"); exit(0 if im.mode == "I;16" or im.info.get("bits", 16) == 16 else 1)' &&
    ok || no "a uint16 PNG is 16-bit"
# Rows straddle slabs: a budget of 300 bytes cuts the region into slabs of less than a row.
nds read u16 -r '[1]' -o u16_small.png --memory-budget 300;  expect_rc 0 "png from slabs smaller than a row"
same pil u16_small.png u16.npy "a[1]"
# A 3-D region with one dimension of size 1 is 2-D; so is a strided one.
nds read u8 -r '[1:4, 5:6]' -o col.png;         expect_rc 0 "3-d region with a size-1 dimension to png"
same pil col.png u8.npy "a[1:4, 5]"
nds read u8 -r '[0:5:2, 3, 1:23:3]' -o strided.png; expect_rc 0 "strided region to png"
same pil strided.png u8.npy "a[0:5:2, 3, 1:23:3]"
# One dimension left: a row when it is the region's last, a column otherwise.
nds read u8 -r '[2, 4]' -o row.png;             expect_rc 0 "1-d region to png"
same pil row.png u8.npy "a[2, 4][None, :]"
nds read u8 -r '[2, :, 4:5]' -o column.png;     expect_rc 0 "column region to png"
same pil column.png u8.npy "a[2, :, 4:5]"
nds read u8 -r '[2]' -o UPPER.PNG;              expect_rc 0 "extensions are case-insensitive"
same pil UPPER.PNG u8.npy "a[2]"

# ---- TIFF: every sample format, one page or many -----------------------------------------------------
for dt in uint8 int8 uint16 int16 uint32 int32 float32 float64; do
    make "t_$dt" "$dt" 4,7,5 2,3,3
    nds read "t_$dt" -o "$dt.tif";              expect_rc 0 "$dt 3-d region to a multi-page tif"
    same tifffile "$dt.tif" "t_$dt.npy" "a"
    nds read "t_$dt" -r '[2]' -o "$dt.tiff";    expect_rc 0 "$dt 2-d region to a one-page tiff"
    same tifffile "$dt.tiff" "t_$dt.npy" "a[2]"
done
# The sample format tag says what the samples are, as a second reader (PIL) sees it.
same pil uint8.tif t_uint8.npy "a"
same pil float32.tif t_float32.npy "a"
same pil int32.tiff t_int32.npy "a[2]"
"$PY" - <<'EOF' && ok || no "tif tags: SampleFormat, page count"
import tifffile
with tifffile.TiffFile("int16.tif") as t:
    assert len(t.pages) == 4, len(t.pages)
    assert all(p.tags["SampleFormat"].value == 2 and p.tags["BitsPerSample"].value == 16 for p in t.pages)
with tifffile.TiffFile("float64.tiff") as t:
    assert len(t.pages) == 1 and t.pages[0].tags["SampleFormat"].value == 3
EOF
nds read u16 -r '[1:4, 2:30:3, :]' -o stack.tif --memory-budget 200;  expect_rc 0 "tif from slabs smaller than a row"
same tifffile stack.tif u16.npy "a[1:4, 2:30:3, :]"

# ---- precomputed: what a page and a row are -----------------------------------------------------------
# A precomputed array is [x, y, z, channel] (channel fastest in memory): [:, :, z, 0] is an image whose
# rows are x and columns y; a 3-d region [x0:x1, y0:y1, z0:z1, 0] is one page per x.
"$PY" -c 'import numpy as np; np.save("pc.npy", (np.arange(6*5*4) % 251).astype(np.uint8).reshape(6, 5, 4, 1))'
nds create "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"file://$T/pc/\",\"multiscale_metadata\":{\"data_type\":\"uint8\",\"num_channels\":1},\"scale_metadata\":{\"size\":[6,5,4],\"chunk_size\":[4,4,4]}}"
expect_rc 0 "create precomputed"
nds write "file://$T/pc/|neuroglancer-precomputed:" -i pc.npy; expect_rc 0 "write precomputed"
nds read "file://$T/pc/|neuroglancer-precomputed:" -r '[:, :, 2, 0]' -o pc_z2.png; expect_rc 0 "precomputed z slice"
same pil pc_z2.png pc.npy "a[:, :, 2, 0]"
"$PY" -c 'from PIL import Image; exit(0 if Image.open("pc_z2.png").size == (5, 6) else 1)' && ok ||
    no "a precomputed z slice is y wide and x high"

# ---- colour (--rgb): the region's last dimension is each pixel's RGB or RGBA ---------------------------
# PIL keeps 8 bits of a 16-bit colour PNG, so those are read with png16.py: the PNG decoded with zlib
# and NumPy (chunks, the five row filters), an independent reader of what libpng wrote.
cat >png16.py <<'EOF'
import numpy as np, struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n"
pos, idat, ihdr = 8, b"", None
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR": ihdr = struct.unpack(">IIBBBBB", body)
    if kind == b"IDAT": idat += body
    pos += 12 + n
w, h, depth, ctype = ihdr[:4]
assert depth == 16 and ctype in (2, 6), ihdr
spp = 3 if ctype == 2 else 4
bpp, stride = 2 * spp, w * 2 * spp
raw, rows, prev = zlib.decompress(idat), [], bytearray(stride)
for y in range(h):
    f = raw[y * (stride + 1)]
    line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0
        b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
        p = a + b - c
        paeth = a if abs(p - a) <= abs(p - b) and abs(p - a) <= abs(p - c) else b if abs(p - b) <= abs(p - c) else c
        line[i] = (line[i] + [0, a, b, (a + b) // 2, paeth][f]) & 255
    rows.append(bytes(line))
    prev = line
got = np.frombuffer(b"".join(rows), dtype=">u2").reshape(h, w, spp)
want = eval(sys.argv[3], {"a": np.load(sys.argv[2])})
sys.exit(0 if got.shape == want.shape and (got == want).all() else 1)
EOF
make rgb8 uint8 3,6,5,3 2,3,3,3
make rgba16 uint16 6,5,4 3,3,4
nds read rgb8 -r '[1]' -o rgb.png --rgb;        expect_rc 0 "uint8 RGB png"
same pil rgb.png rgb8.npy "a[1]"
"$PY" -c 'from PIL import Image; exit(0 if Image.open("rgb.png").mode == "RGB" else 1)' && ok || no "an RGB png is RGB"
nds read rgba16 -o rgba.png --rgb --memory-budget 100; expect_rc 0 "uint16 RGBA png from small slabs"
"$PY" png16.py rgba.png rgba16.npy "a" && ok || no "uint16 RGBA png: samples read back exactly"
nds read rgb8 -r '[2, :, :, :]' -o rgb16.png --rgb; expect_rc 0 "uint8 RGB png again"
nds read rgba16 -r '[:, :, 0:3]' -o rgb16.png --rgb; expect_rc 0 "uint16 RGB png"
"$PY" png16.py rgb16.png rgba16.npy "a[:, :, 0:3]" && ok || no "uint16 RGB png: samples read back exactly"
nds read rgb8 -o rgb.tif --rgb;                 expect_rc 0 "uint8 RGB multi-page tif"
same tifffile rgb.tif rgb8.npy "a"
same pil rgb.tif rgb8.npy "a"
nds read rgba16 -o rgba.tif --rgb;              expect_rc 0 "uint16 RGBA tif"
same tifffile rgba.tif rgba16.npy "a"
"$PY" -c 'import tifffile; t = tifffile.TiffFile("rgba.tif"); p = t.pages[0]; exit(0 if p.photometric == 2 and tuple(p.tags["ExtraSamples"].value) == (2,) else 1)' &&
    ok || no "RGBA tif: photometric RGB, ExtraSamples unassociated alpha"
OUTFILE=grey.png; nds read u8 -r '[2]' -o grey.png --rgb
expect_refused "--rgb on a last dimension of 23" "--rgb takes the region's last dimension as each pixel's colour: 3 (RGB) or 4 (RGBA) values; the region's shape is (37, 23)"
nds read rgb8 -r '[1]' --rgb -o x.npy;          expect_rc 2 "--rgb with .npy"
expect_err "--rgb applies to images" "--rgb with .npy"

# ---- refused: never a silent .npy ----------------------------------------------------------------------
OUTFILE=x.jpgg; nds read u8 -r '[2]' -o x.jpgg
expect_refused "unknown extension" "the extension '.jpgg' is not an output format ndstore writes; understood: .npy, .png, .tif, .tiff" 2
OUTFILE=x.tif.gz; nds read u8 -r '[2]' -o x.tif.gz
expect_refused "compressed tif" "'.gz'" 2
OUTFILE=slice.jpg; nds read u8 -r '[2]' -o slice.jpg
expect_refused "jpeg" "understood" 2
OUTFILE=three.png; nds read u8 -o three.png
expect_refused "3-d png" "a PNG holds a 2-D image; the region's shape (5, 37, 23) has 3 dimensions larger than 1"
OUTFILE=four.tif; make u8_4d uint8 2,3,4,5 2,2,2,2; nds read u8_4d -o four.tif
expect_refused "4-d tif" "a TIFF holds a 2-D image or a 3-D stack of pages; the region's shape (2, 3, 4, 5)"
OUTFILE=signed.png; nds read t_int16 -r '[1]' -o signed.png
expect_refused "int16 png" "a PNG holds uint8 or uint16 pixels; the array is int16"
make i64 int64 3,4 2,2
OUTFILE=wide.tif; nds read i64 -o wide.tif
expect_refused "int64 tif" "the array is int64"
OUTFILE=raw.png; nds read u8 -r '[2]' --raw -o raw.png
expect_refused "--raw with a png name" "--raw writes raw bytes, not an image" 2
OUTFILE=empty.png; nds read u8 -r '[2, 0:0]' -o empty.png
expect_refused "empty region" "the region is empty"
mkdir -p ro && chmod 500 ro
OUTFILE=ro/x.tif; nds read u8 -r '[2]' -o ro/x.tif
if [ "$(id -u)" -ne 0 ]; then expect_refused "unwritable directory" "ro/x.tif"; fi
# .npy, no extension and --raw under any other name still work.
nds read u8 -r '[2]' -o plain;                  expect_rc 0 "no extension is .npy"
"$PY" -c 'import numpy as np; a = np.load("u8.npy"); assert (np.load("plain") == a[2]).all()' && ok || no "no extension: .npy"
nds read u8 -r '[2]' --raw -o x.bin;            expect_rc 0 "--raw under any name"
check '[ "$(stat -c %s x.bin)" -eq $((37 * 23)) ]' "--raw writes raw bytes"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
