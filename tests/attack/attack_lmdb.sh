#!/usr/bin/env bash
# Corrupt LMDB environments: copies of a real store's data.mdb truncated at several sizes, with page
# headers zeroed or set to 0xff, and with random bytes flipped (bounded seeds). info, verify, ls and
# read on each must end with the data or one clear error: never a signal (SIGBUS, an LMDB
# assertion's abort), a sanitizer report or a hang. The unit test test_kvstore_lmdb.c
# (corrupt_copies_*) runs 200 seeds of flips through the kvstore API in one process.
source "$(dirname "$0")/attack_lib.sh"
ATTACK_TIMEOUT=20

command -v python3 >/dev/null || { echo "SKIP: python3 needed to corrupt files"; finish; exit; }

# The store: many small chunks (leaf and branch pages) and a few 8 KiB ones (overflow pages).
S="$T/good.lmdb"
python3 -c "
import random, sys
r = random.Random(1)
sys.stdout.buffer.write(bytes(r.getrandbits(8) if i % 4 else 0 for i in range(128 * 128 * 2)))" >"$T/r.bin"
nds create "lmdb://$S/a/" --dtype uint16 --shape 128,128 --chunks 8,8 --codec zstd; succeeded "create a"
nds create "lmdb://$S/b/" --dtype uint16 --shape 128,128 --chunks 64,64 --codec none; succeeded "create b"
nds write "lmdb://$S/a/" --raw -i "$T/r.bin"; succeeded "write a"
nds write "lmdb://$S/b/" --raw -i "$T/r.bin"; succeeded "write b"
SIZE=$(stat -c %s "$S/data.mdb")
PAGES=$((SIZE / 4096))

# corrupt NAME MODE ARG: $T/NAME.lmdb holds a corrupted copy of data.mdb.
corrupt() {
    rm -rf "$T/$1.lmdb"
    mkdir "$T/$1.lmdb"
    python3 - "$S/data.mdb" "$T/$1.lmdb/data.mdb" "$2" "$3" <<'EOF'
import random, sys
src, dst, mode, arg = sys.argv[1:5]
d = bytearray(open(src, "rb").read())
if mode == "trunc":
    d = d[:int(arg)]
elif mode in ("zero", "ff"):
    p = int(arg) * 4096
    d[p:p + 16] = (b"\0" if mode == "zero" else b"\xff") * 16
else:
    r = random.Random(int(arg))
    for _ in range(r.randint(1, 16)):
        i = r.randrange(len(d))
        d[i] ^= 1 << r.randrange(8)
open(dst, "wb").write(d)
EOF
}

# survived DESC: the data (exit 0) or a clean refusal (exit 1, one "ndstore:" line last on stderr).
survived() {
    clean_exit "$1"
    if [ "$RC" -eq 0 ]; then ok; return; fi
    expect_rc 1 "$1"
    check '[[ "$(printf "%s\n" "$ERR" | tail -1)" == "ndstore: "* ]]' "$1: ends with one 'ndstore:' line"
}

# every NAME [TEXT]: info, verify, ls and read of both arrays survive; with TEXT, each is refused
# and says TEXT.
every() {
    local e="lmdb://$T/$1.lmdb" c
    for c in "info $e/a/" "verify $e/a/" "ls $e/" "read $e/a/ -o $T/out.npy" "read $e/b/ -o $T/out.npy"; do
        # shellcheck disable=SC2086
        nds $c
        if [ $# -ge 2 ]; then refused "$1: ${c%% *}" "$2"; else survived "$1: ${c%% *}"; fi
    done
}

# Truncated files: refused on opening, naming the truncation (before: SIGBUS in info, verify, ls).
for cut in 8192 12288 $((SIZE / 2)) $((SIZE - 4096)) $((SIZE - 1)); do
    corrupt "trunc$cut" trunc "$cut"
    every "trunc$cut" "truncated"
done

# An empty data.mdb is a new environment to LMDB: an empty listing, no array (before: ls of any
# empty store passed NULL to qsort, a UBSan report).
corrupt empty trunc 0
nds ls "lmdb://$T/empty.lmdb/"; succeeded "ls of an empty data.mdb"
nds info "lmdb://$T/empty.lmdb/a/"; refused "info of an empty data.mdb" "no array"

# Page headers zeroed or 0xff (before: an LMDB assertion's abort in verify, ls looping forever).
for p in $(seq 2 $((PAGES - 1))); do
    corrupt "zero$p" zero "$p"; every "zero$p"
    corrupt "ff$p" ff "$p"; every "ff$p"
done

# Random bit flips anywhere in the file.
for seed in $(seq 1 25); do
    corrupt "flip$seed" flip "$seed"; every "flip$seed"
done

# The intact store still reads exactly.
nds read "lmdb://$S/b/" --raw -o "$T/back.bin"; succeeded "read intact store"
check 'cmp -s "$T/r.bin" "$T/back.bin"' "intact store reads back what was written"
finish
