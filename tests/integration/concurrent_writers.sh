#!/bin/sh
# Multi-process writers on one file:// zarr array: N `ndstore write` processes, released at the
# same instant, write regions that share every chunk but no element; afterwards the array must hold
# exactly what each writer wrote (checked with numpy, through ndstore's read and independently
# through zarr-python). Repeated for R rounds, each with another write pattern and compressor.
#
# usage: concurrent_writers.sh [NDSTORE_BINARY] [-n WRITERS] [-r ROUNDS]
#        (binary default: $NDSTORE, else build/ndstore; writers default 8; rounds default 3)
# Needs /usr/bin/python3 with numpy and zarr (Debian's python3-zarr). Last line: "N passed, N
# failed"; exit status 1 on any failure, 2 on bad usage. Every process it starts it stops (trap on
# exit), and its temporary directory is removed.
set -u

NDS=${NDSTORE:-build/ndstore}
WRITERS=8
ROUNDS=3
PY=/usr/bin/python3
while [ $# -gt 0 ]; do
    case "$1" in
        -n) WRITERS=${2:?-n needs a number}; shift 2 ;;
        -r) ROUNDS=${2:?-r needs a number}; shift 2 ;;
        -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
        -*) echo "concurrent_writers.sh: unknown option $1" >&2; exit 2 ;;
        *) NDS=$1; shift ;;
    esac
done
case "$WRITERS$ROUNDS" in
    *[!0-9]*) echo "concurrent_writers.sh: -n and -r take numbers" >&2; exit 2 ;;
esac
if [ "$WRITERS" -lt 2 ] || [ "$ROUNDS" -lt 1 ]; then
    echo "concurrent_writers.sh: need at least 2 writers and 1 round" >&2; exit 2
fi
if [ ! -x "$NDS" ]; then
    echo "concurrent_writers.sh: ndstore binary '$NDS' not found (give its path)" >&2; exit 2
fi
case "$NDS" in /*) ;; *) NDS=$(pwd)/$NDS ;; esac

TMP=$(mktemp -d "${TMPDIR:-/tmp}/nds-concurrent-XXXXXX") || exit 1
PIDS=""
cleanup() {
    # Stop only the writers this script started, by their ids.
    for p in $PIDS; do kill "$p" 2>/dev/null; done
    for p in $PIDS; do wait "$p" 2>/dev/null; done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

PASSED=0
FAILED=0
# Array geometry: 6 x 9 chunks, ragged at both far edges, 2 MiB of uint32 in all.
SHAPE=512,1000
CHUNKS=100,128
CODECS="zstd:1 blosc:lz4:5:shuffle gzip:1 none blosc:zstd:3:bitshuffle lz4"

# Prints writer k's region for a pattern. Every pattern gives each writer elements in every chunk
# (or, for slabs, boundaries that cut through chunks) and gives no element to two writers.
region() { # pattern k
    case $1 in
        0) echo "[:, $2::$WRITERS]" ;;                       # interleaved columns
        1) echo "[$2::$WRITERS, :]" ;;                       # interleaved rows
        2) rows=$(( (512 + WRITERS - 1) / WRITERS ))         # slabs of rows; chunks are 100 rows
           lo=$(( $2 * rows )); hi=$(( lo + rows )); [ $hi -gt 512 ] && hi=512
           echo "[$lo:$hi, :]" ;;
        3) half=$(( WRITERS / 2 ))                           # a 2-D lattice
           echo "[$(( $2 % 2 ))::2, $(( $2 / 2 ))::$half]" ;;
    esac
}

# Writes writer k's input: value = 1 + linear index * 64 + k, so a lost or misplaced element shows.
make_inputs() { # dir pattern
    regions=""
    k=0
    while [ $k -lt "$WRITERS" ]; do regions="$regions$(region "$2" $k);"; k=$((k + 1)); done
    "$PY" - "$1" "$regions" <<'EOF'
import sys, numpy as np
d, regions = sys.argv[1], [r for r in sys.argv[2].split(';') if r]
def sel(text):  # "[a:b:c, d]" -> tuple of slices (only the forms region() prints)
    out = []
    for part in text.strip('[]').split(','):
        p = [int(x) if x.strip() else None for x in part.split(':')]
        out.append(slice(*p) if len(p) > 1 else p[0])
    return tuple(out)
ids = np.arange(512 * 1000, dtype=np.uint32).reshape(512, 1000)
owner = np.full((512, 1000), -1)
for k, r in enumerate(regions):
    s = sel(r)
    if (owner[s] != -1).any():
        sys.exit('test bug: writers %d and %d overlap' % (k, owner[s].max()))
    owner[s] = k
    np.save('%s/in%d.npy' % (d, k), 1 + ids[s] * 64 + k)
want = np.where(owner >= 0, 1 + ids * 64 + owner, 0).astype(np.uint32)
np.save('%s/want.npy' % d, want)
EOF
}

check() { # dir array
    "$PY" - "$1" "$2" <<'EOF'
import sys, numpy as np, zarr
d, arr = sys.argv[1], sys.argv[2]
want = np.load(d + '/want.npy')
for name, got in (('ndstore read', np.load(d + '/got.npy')),
                  ('zarr-python', zarr.open(zarr.DirectoryStore(arr), mode='r')[...])):
    if got.shape != want.shape or got.dtype != want.dtype:
        sys.exit('%s: shape %s dtype %s, expected %s %s' % (name, got.shape, got.dtype,
                                                             want.shape, want.dtype))
    bad = np.argwhere(got != want)
    if len(bad):
        i = tuple(bad[0])
        lost = int((got[got != want] == 0).sum())
        sys.exit('%s: %d elements differ (%d read as fill, i.e. lost), first at %s: got %d, '
                 'expected %d (writer %d)' % (name, len(bad), lost, i, got[i], want[i],
                                              (int(want[i]) - 1) % 64))
EOF
}

run_round() { # round
    r=$1
    pattern=$(( (r - 1) % 4 ))
    [ $pattern -eq 3 ] && [ $(( WRITERS % 2 )) -ne 0 ] && pattern=0  # the lattice needs even N
    # shellcheck disable=SC2086 # split the list into words on purpose
    set -- $CODECS
    shift $(( (r - 1) % $# ))
    codec=$1
    dir="$TMP/round$r"
    mkdir -p "$dir"
    arr="$dir/a.zarr"
    name="round $r: $WRITERS writers, pattern $pattern ($(region $pattern 0) ...), codec $codec"
    if ! "$NDS" create "file://$arr|zarr:" --shape $SHAPE --chunks $CHUNKS --dtype uint32 \
            --codec "$codec" --fill 0 >"$dir/create.log" 2>&1; then
        echo "FAIL $name: create: $(tr '\n' ' ' <"$dir/create.log")"; return 1
    fi
    if ! make_inputs "$dir" $pattern 2>"$dir/gen.log"; then
        echo "FAIL $name: $(tr '\n' ' ' <"$dir/gen.log")"; return 1
    fi
    # Every writer waits at a gate; removing nothing, creating "go" releases them all at once.
    PIDS=""
    k=0
    while [ $k -lt "$WRITERS" ]; do
        ( while [ ! -e "$dir/go" ]; do sleep 0.01; done
          exec "$NDS" write "file://$arr|zarr:" --region "$(region $pattern $k)" \
              -i "$dir/in$k.npy" >"$dir/w$k.log" 2>&1 ) &
        PIDS="$PIDS $!"
        k=$((k + 1))
    done
    sleep 0.2
    touch "$dir/go"
    bad=""
    k=0
    for p in $PIDS; do
        wait "$p"; st=$?
        [ $st -ne 0 ] && bad="$bad writer $k exit $st: $(tr '\n' ' ' <"$dir/w$k.log");"
        k=$((k + 1))
    done
    PIDS=""
    if [ -n "$bad" ]; then echo "FAIL $name:$bad"; return 1; fi
    if ! "$NDS" read "file://$arr|zarr:" -o "$dir/got.npy" >"$dir/read.log" 2>&1; then
        echo "FAIL $name: read: $(tr '\n' ' ' <"$dir/read.log")"; return 1
    fi
    if ! check "$dir" "$arr" 2>"$dir/check.log"; then
        echo "FAIL $name: $(tr '\n' ' ' <"$dir/check.log")"; return 1
    fi
    echo "ok $name"
    rm -rf "$dir"
    return 0
}

r=1
while [ $r -le "$ROUNDS" ]; do
    if run_round $r; then PASSED=$((PASSED + 1)); else FAILED=$((FAILED + 1)); fi
    r=$((r + 1))
done
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
