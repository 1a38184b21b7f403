#!/usr/bin/env bash
# Hostile regions: starts, stops and steps near 2^63 and 2^64 in every dimension, for reads and
# writes. Each read is compared element by element with a reference model (Python slicing, which has
# no overflow); each write is followed by a read of everything it may have touched. A step so large
# that it selects one element must simply work; numbers that cannot be represented are a clear error.
source "$(dirname "$0")/attack_lib.sh"

# ref.py: a sparse int32 model of an array (JSON {flat index: value}, fill 0).
#   ref.py apply STATE SHAPE REGION RAW   stores RAW (the region's values, C order) into STATE
#   ref.py expect STATE SHAPE REGION      prints the region's values (raw int32, C order)
#   ref.py values SHAPE REGION SEED       prints distinct values for the region (raw int32)
cat >"$T/ref.py" <<'EOF'
import itertools, json, os, struct, sys

def selection(shape, region):
    items = [s.strip() for s in region.strip().strip("[]").split(",")] if region.strip("[] ") else []
    items += [":"] * (len(shape) - len(items))
    axes = []
    for text, n in zip(items, shape):
        if ":" in text:
            parts = [int(p) if p.strip() else None for p in text.split(":")]
            axes.append(range(*slice(*parts).indices(n)))
        else:
            i = int(text)
            axes.append([i + n if i < 0 else i])
    return [sum(i * s for i, s in zip(idx, strides(shape))) for idx in itertools.product(*axes)]

def strides(shape):
    out, acc = [], 1
    for n in reversed(shape):
        out.insert(0, acc)
        acc *= n
    return out

cmd = sys.argv[1]
if cmd == "values":
    shape, region, seed = [int(x) for x in sys.argv[2].split(",")], sys.argv[3], int(sys.argv[4])
    n = len(selection(shape, region))
    sys.stdout.buffer.write(struct.pack("<%di" % n, *[seed * 1000 + k + 1 for k in range(n)]))
    sys.exit(0)
state_file, shape, region = sys.argv[2], [int(x) for x in sys.argv[3].split(",")], sys.argv[4]
state = json.load(open(state_file)) if os.path.exists(state_file) else {}
flat = selection(shape, region)
if cmd == "apply":
    raw = open(sys.argv[5], "rb").read()
    for f, v in zip(flat, struct.unpack("<%di" % len(flat), raw)):
        state[str(f)] = v
    json.dump(state, open(state_file, "w"))
else:
    sys.stdout.buffer.write(struct.pack("<%di" % len(flat), *[state.get(str(f), 0) for f in flat]))
EOF
ref() { python3 "$T/ref.py" "$@"; }

# read_matches ARRAY SHAPE REGION DESC: ndstore's read of REGION is the model's, byte for byte.
read_matches() {
    nds read "$T/$1" -r "$3" -o "$T/got.raw" --raw
    succeeded "$4: read $3"
    ref expect "$T/$1.json" "$2" "$3" >"$T/want.raw"
    check 'cmp -s "$T/got.raw" "$T/want.raw"' "$4: read $3 matches the reference"
}

# write_then_check ARRAY SHAPE REGION SEED DESC CHECKS...: writes distinct values to REGION, applies
# them to the model, then reads REGION and every region of CHECKS against it.
write_then_check() {
    local a=$1 shape=$2 region=$3 seed=$4 desc=$5 r
    shift 5
    ref values "$shape" "$region" "$seed" >"$T/in.raw"
    nds write "$T/$a" -r "$region" -i "$T/in.raw" --raw
    succeeded "$desc: write $region"
    ref apply "$T/$a.json" "$shape" "$region" "$T/in.raw"
    read_matches "$a" "$shape" "$region" "$desc"
    for r in "$@"; do read_matches "$a" "$shape" "$r" "$desc"; done
}

# A small array written whole: every stray element of a wrong read or write shows.
nds create "$T/s.zarr" --shape 8,20 --chunks 3,13 --dtype int32 --codec none
succeeded "create small array"
write_then_check s.zarr 8,20 '[:, :]' 0 "small, whole"
H=1000000000000000000 # 10^18: times a row's bytes it overflows int64
M=9223372036854775807 # 2^63 - 1
for region in "[4:5:$H, 0:20:13]" "[::$M, ::$M]" "[-1::$M, 19:20:$H]" "[0:8:7, 1::$H]" \
    "[::$H, ::19]" "[3:-1:$M, -2::$M]" "[$((M - 1)):, :]" "[:, -$M:-1:$H]"; do
    read_matches s.zarr 8,20 "$region" "small"
done
write_then_check s.zarr 8,20 "[4:5:$H, 0:20:13]" 1 "small, huge step" '[:, :]'
write_then_check s.zarr 8,20 "[::$M, -1::$M]" 2 "small, step 2^63-1" '[:, :]'
write_then_check s.zarr 8,20 "[1::6, 2::$H]" 3 "small, steps 6 and 10^18" '[:, :]'

# A huge array (2^32 - 5 squared, stored sparsely): starts, stops and steps at the ends of the
# range in both dimensions; after each write the whole neighbourhood of the written elements is read.
N=4294967291
nds create "$T/b.zarr" --shape $N,$N --chunks 1000,1000 --dtype int32 --codec zstd
succeeded "create huge array"
write_then_check b.zarr $N,$N "[1::2147483647, -1:]" 4 "huge, two rows at the far end" \
    "[0:3, -3:]" "[2147483646:2147483650, -2:]"
write_then_check b.zarr $N,$N "[::$((N - 1)), ::$M]" 5 "huge, corners" \
    "[-2:, :2]" "[:2, :2]" "[-2:, -2:]" "[::$((N - 1)), ::$((N - 1))]"
write_then_check b.zarr $N,$N "[-1::$H, 999:1002:2]" 6 "huge, last row across a chunk border" \
    "[-2:, 998:1003]"
write_then_check b.zarr $N,$N "[$((N - 3))::$((N - 4)), $((N - 1001))::999]" 7 "huge, near the end" \
    "[-4:, -1002:-997]"
read_matches b.zarr $N,$N "[::$M, ::$M]" "huge"
read_matches b.zarr $N,$N "[::2147483645, ::$((N - 1))]" "huge"
read_matches b.zarr $N,$N "[-$M:-1:$H, -1]" "huge"

# Numbers that cannot be represented: refused with the dimension and the number.
nds read "$T/s.zarr" -r '[0:8:99999999999999999999]'
refused "step past 2^63" "99999999999999999999 is out of range"
nds read "$T/s.zarr" -r '[-99999999999999999999]'
refused "index below -2^63" "out of range"
nds write "$T/s.zarr" -r '[0:8:0]' -i "$T/in.raw" --raw
refused "step 0" "step"
nds read "$T/s.zarr" -r "[$M]"
refused "index past the shape" "outside [0, 8)"
nds read "$T/s.zarr" -r "[-9223372036854775808]"
refused "index -2^63" "outside [0, 8)"

# A rank-0 array stored uncompressed: its read once indexed chunk_shape[rank - 1].
mkdir -p "$T/r0.zarr"
printf '{"zarr_format":2,"shape":[],"chunks":[],"dtype":"<i4","compressor":null,"fill_value":0,"order":"C","filters":null}' >"$T/r0.zarr/.zarray"
printf '\x05\x00\x00\x00' >"$T/r0.zarr/0"
nds read "$T/r0.zarr"
succeeded "read of a rank-0 array"
expect_out "5" "rank-0 read prints its value"

finish
