#!/usr/bin/env bash
# The versioned store from the command line, as a user runs it on local files: arrays created and
# written through `file:///D/|versioned:`, `ndstore log`, `ndstore tag`, reading an old version by
# number and by tag, atomic transactions on a file base (refused on a plain file store), writes to a
# pinned version refused, `ls` of the store, eight concurrent `ndstore write` processes into one
# array whose row blocks split chunks (every element lands and every version in the log reads whole),
# and `ndstore diff` of an array written twice (grouped by array, --keys, --json); `ndstore commit`
# of tokens it cannot publish (missing, malformed, corrupt or truncated sets, lost or corrupt data).
#
# usage: tests/integration/versioned_test.sh BUILD_DIR   (or path/to/ndstore)
# Needs /usr/bin/python3 (standard library only). Prints "FAIL: ..." per failed check and a final
# "N passed, N failed" line; exits 1 on any failure.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/check_lib.sh"
scratch_setup versioned "${1:?usage: versioned_test.sh BUILD_DIR}"

S="file://$T/ckpt/"
A="$S|versioned:model/a/|zarr3:"

# raw uint16 data: value = (i * 31 + j * 7 + SEED) mod 65536 over [64, 48]
make_raw() { # SEED ROWS_FROM ROWS_TO FILE
    $PY - "$@" <<'EOF'
import struct, sys
seed, r0, r1, path = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
with open(path, "wb") as f:
    for i in range(r0, r1):
        f.write(struct.pack("<48H", *[(i * 31 + j * 7 + seed) % 65536 for j in range(48)]))
EOF
}

nds create "$A" --shape 64,48 --chunks 16,16 --dtype uint16 --codec zstd:1
check '[ "$RC" -eq 0 ]' "create through the versioned store"
check '[ ! -e "$T/ckpt/|versioned:model" ] && [ ! -e "$T/ckpt/model" ]' "no directory named after the url"
make_raw 1 0 64 one.raw
make_raw 2 0 64 two.raw
nds write "$A" --raw -i one.raw
check '[ "$RC" -eq 0 ]' "write version one"
nds tag "$S" first
check '[ "$RC" -eq 0 ] && [[ "$OUT" == "tag first -> version "* ]]' "tag the latest version"
FIRST_VERSION=${OUT##* }
nds write "$A" --raw -i two.raw
check '[ "$RC" -eq 0 ]' "write version two"
nds read "$A" --raw -o now.raw
check 'cmp -s now.raw two.raw' "the latest version reads the second write"
nds read "$S|versioned:@first/model/a/|zarr3:" --raw -o then.raw
check '[ "$RC" -eq 0 ] && cmp -s then.raw one.raw' "the tag reads the first write"
nds tag "$S" first
check '[ "$RC" -eq 1 ] && [[ "$ERR" == *"exists (tags never move)"* ]]' "tags never move"
nds tag "$S" base 1
nds tag "$S"
check '[ "$RC" -eq 0 ] && [ "$OUT" = "$(printf "base 1\nfirst %s" "${FIRST_VERSION:-}")" ]' "tag URL lists the tags by name"
nds log "$S"
check '[ "$RC" -eq 0 ] && [[ "$OUT" == *"keys  tags: base"* ]]' "log shows the tags naming each version"
nds write "$S|versioned:@first/model/a/|zarr3:" --raw -i two.raw
check '[ "$RC" -eq 1 ] && [[ "$ERR" == *"read-only"* ]]' "a pinned version refuses writes"
nds log "$S"
check '[ "$RC" -eq 0 ] && [[ "$OUT" == "version "* ]]' "log prints versions"
nds log "$S" --json -n 1
check '[ "$RC" -eq 0 ] && [ "$(printf "%s\n" "$OUT" | wc -l)" -eq 1 ] && [[ "$OUT" == *"\"keys\":"* ]]' "log --json -n 1"
nds ls "$S|versioned:"
check '[ "$RC" -eq 0 ] && [[ "$OUT" == *"model/a/zarr.json"* ]]' "ls lists the store's keys"

# Atomic transactions need a multi-key commit: the plain file store has none, the versioned one has.
P="file://$T/plain/a/|zarr3:"
nds create "$P" --shape 64,48 --chunks 16,16 --dtype uint16
nds write "$P" --raw -i one.raw --txn atomic
check '[ "$RC" -eq 1 ] && [[ "$ERR" == *"multi-key commit"* ]]' "plain file store refuses atomic"
nds log "$S" --json -n 1
before=$(printf '%s\n' "$OUT" | $PY -c 'import json,sys; print(json.loads(sys.stdin.readline())["version"])')
nds write "$A" --raw -i one.raw --txn atomic
check '[ "$RC" -eq 0 ]' "atomic transaction on a versioned file store"
nds log "$S" --json -n 1
after=$(printf '%s\n' "$OUT" | $PY -c 'import json,sys; print(json.loads(sys.stdin.readline())["version"])')
check '[ "$after" -eq $((before + 1)) ]' "the atomic write is one version ($before -> $after)"

# Eight writers, row blocks of 8 (half a chunk): every chunk is shared by two processes.
B="$S|versioned:model/b/|zarr3:"
nds create "$B" --shape 64,48 --chunks 16,16 --dtype uint16 --codec zstd:1
# Each writer writes its eight rows one at a time (eight commits each), so the commits overlap.
for r in $(seq 0 63); do make_raw 9 "$r" $((r + 1)) "row$r.raw"; done
pids=()
for p in 0 1 2 3 4 5 6 7; do
    args=()
    for r in $(seq $((p * 8)) $((p * 8 + 7))); do args+=(--region "[$r, :]" --raw -i "row$r.raw"); done
    "$BIN" write "$B" "${args[@]}" >"w$p.out" 2>"w$p.err" &
    pids+=($!)
done
bad=0
for p in 0 1 2 3 4 5 6 7; do wait "${pids[$p]}" || bad=$((bad + 1)); done
check '[ "$bad" -eq 0 ]' "eight concurrent writers all succeed ($(cat w*.err | head -2))"
make_raw 9 0 64 all.raw
nds read "$B" --raw -o b.raw
check 'cmp -s b.raw all.raw' "every writer's rows landed"
# Every version in the log opens and reads without error.
nds log "$S" --json
versions=$(printf '%s\n' "$OUT" | $PY -c 'import json,sys; print(" ".join(str(json.loads(l)["version"]) for l in sys.stdin if l.strip()))')
unreadable=0
for v in $versions; do
    "$BIN" ls "$S|versioned:@$v/" >/dev/null 2>&1 || unreadable=$((unreadable + 1))
done
check '[ "$unreadable" -eq 0 ] && [ -n "$versions" ]' "every version lists"

# ndstore diff: an array written whole, then one chunk of it again: the diff names that chunk.
latest() { "$BIN" log "$S" --json -n 1 | $PY -c 'import json,sys; print(json.loads(sys.stdin.readline())["version"])'; }
D="$S|versioned:model/d/|zarr3:"
nds create "$D" --shape 64,48 --chunks 16,16 --dtype uint16 --codec zstd:1
created=$(latest)
nds write "$D" --raw -i one.raw
whole=$(latest)
$PY -c 'import struct,sys; open(sys.argv[1],"wb").write(struct.pack("<256H",*range(256)))' patch.raw
nds write "$D" --region "[16:32, 16:32]" --raw -i patch.raw
patched=$(latest)
nds diff "$S" "$whole" "$patched"
check '[ "$RC" -eq 0 ] && [ "$OUT" = "model/d/: 1 chunk changed, 0 added, 0 removed (c/1/1)" ]' "diff names the one chunk written again ($OUT)"
nds diff "$S" "$whole" "$patched" --keys
check '[ "$RC" -eq 0 ] && [ "$OUT" = "M model/d/c/1/1" ]' "diff --keys ($OUT)"
nds diff "$S" "$whole" "$patched" --json
check '[ "$RC" -eq 0 ] && [ "$OUT" = "{\"key\":\"model/d/c/1/1\",\"change\":\"changed\"}" ]' "diff --json ($OUT)"
nds diff "$S|versioned:model/d/" "$created" "$patched"
check '[ "$RC" -eq 0 ] && [ "$OUT" = "./: 0 chunks changed, 12 added, 0 removed (c/0/0 c/0/1 c/0/2 c/1/0 c/1/1 c/1/2 c/2/0 c/2/1 ...)" ]' "diff under a path, at most 8 chunk names ($OUT)"
nds diff "$S|versioned:model/" "$patched" "$created" --keys
check '[ "$RC" -eq 0 ] && [ "$(printf "%s\n" "$OUT" | grep -c "^- d/c/")" -eq 12 ] && ! [[ "$OUT" == *"a/"* ]]' "diff the way back: chunks removed, other arrays out of the path"
nds attrs "$D" --set '{"step":1}'
nds diff "$S" "$patched" "$(latest)"
check '[ "$RC" -eq 0 ] && [ "$OUT" = "M model/d/zarr.json" ]' "a metadata change is its own line ($OUT)"
nds diff "$S" "$whole" "$whole"
check '[ "$RC" -eq 0 ] && [ -z "$OUT" ]' "a version against itself: nothing"
nds diff "$S" 1 100000
check '[ "$RC" -eq 1 ] && [[ "$ERR" == *"version 100000 does not exist"* ]]' "diff of a missing version"
nds diff "$S" 0 1
check '[ "$RC" -eq 2 ] && [[ "$ERR" == *"A: expected a version number"* ]]' "diff refuses version 0"

# `ndstore commit` given a token it cannot publish: a missing or malformed token, a corrupt or
# truncated prepared set, a set whose data object is lost or corrupt. Each is an error naming the
# token, and nothing is committed; a good token then commits once.
PA="$S|versioned:model/p/|zarr3:"
nds create "$PA" --shape 32,48 --chunks 16,16 --dtype uint16 --codec zstd:1
prepare() { # TOKEN_VAR SPEC ARGS...: ndstore write --prepare, the token into TOKEN_VAR
    local var=$1
    shift
    nds write "$@" --prepare
    check '[ "$RC" -eq 0 ] && [[ "$OUT" == *"prepared "* ]]' "prepare a part"
    printf -v "$var" '%s' "${OUT##*prepared }"
}
set_object() { # TOKEN: the data object the prepared set lists first
    $PY - "$T/ckpt/prepared/$1" <<'EOF'
import json, sys
print(json.loads(open(sys.argv[1], "rb").read()[16:])["objects"][0]["object"])
EOF
}
flip_byte() { # FILE OFFSET
    $PY -c 'import sys; f = open(sys.argv[1], "r+b"); f.seek(int(sys.argv[2])); b = f.read(1); f.seek(int(sys.argv[2])); f.write(bytes([b[0] ^ 0x20]))' "$1" "$2"
}
make_raw 5 0 8 p0.raw
make_raw 5 8 16 p1.raw
make_raw 5 16 24 p3.raw
prepare tok0 "$PA" --region "[0:8, :]" --raw -i p0.raw
prepare tok1 "$PA" --region "[8:16, :]" --raw -i p1.raw
prepare tok3 "$PA" --region "[16:24, :]" --raw -i p3.raw
# A value above the prepared-read threshold (64 KiB): the commit references it without reading it.
Q="$S|versioned:model/q/|zarr3:"
nds create "$Q" --shape 256,256 --chunks 256,256 --dtype uint16
$PY -c 'import os,sys; open(sys.argv[1],"wb").write(os.urandom(131072))' q.raw
prepare tok2 "$Q" --raw -i q.raw
v0=$(latest)
nds commit "$S" "$tok0" 0123456789abcdef0123456789abcdef
check '[ "$RC" -eq 1 ] && [[ "$ERR" == *"no prepared set 0123456789abcdef0123456789abcdef"* ]]' "commit of a missing token names it"
nds commit "$S" "$tok0" not-a-token
check '[ "$RC" -eq 1 ] && [[ "$ERR" == *"\"not-a-token\" is not a prepared-set token"* ]]' "commit of a malformed token names it"
flip_byte "$T/ckpt/prepared/$tok1" 40
nds commit "$S" "$tok0" "$tok1"
check '[ "$RC" -eq 1 ] && [[ "$ERR" == *"prepared/$tok1: payload checksum mismatch"* ]]' "a corrupt prepared set: error names its token"
head -c 30 "$T/ckpt/prepared/$tok1" >cut && cp cut "$T/ckpt/prepared/$tok1"
nds commit "$S" "$tok0" "$tok1"
check '[ "$RC" -eq 1 ] && [[ "$ERR" == *"prepared/$tok1: payload length"* ]]' "a truncated prepared set: error names its token"
obj=$(set_object "$tok2")
mv "$T/ckpt/data/$obj" lost
nds commit "$S" "$tok2"
check '[ "$RC" -eq 1 ] && [[ "$ERR" == *"prepared set $tok2"*"data/$obj is missing"* ]]' "a set whose data object is lost: refused, naming the token"
mv lost "$T/ckpt/data/$obj"
obj=$(set_object "$tok3")
flip_byte "$T/ckpt/data/$obj" 100
nds commit "$S" "$tok3"
check '[ "$RC" -eq 1 ] && [[ "$ERR" == *"prepared set $tok3"*"checksum mismatch"* ]]' "a set whose data object is corrupt: error names the token"
check '[ "$(latest)" -eq "$v0" ]' "nothing committed by the refused commits"
nds commit "$S" "$tok0" "$tok2" -m "good parts"
check '[ "$RC" -eq 0 ] && [ "$OUT" = "committed 2 parts as version $((v0 + 1))" ]' "the good tokens commit ($OUT)"
nds read "$Q" --raw -o q.back
check 'cmp -s q.back q.raw' "the large part reads back"
nds commit "$S" "$tok0"
check '[ "$RC" -eq 1 ] && [[ "$ERR" == *"prepared set $tok0 was already committed in version $((v0 + 1))"* ]]' "a token commits once"


echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
