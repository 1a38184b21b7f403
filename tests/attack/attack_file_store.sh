#!/usr/bin/env bash
# Hostile file stores: symbolic links inside a store that lead out of it, files that look like
# ndstore's temp files, and lock files no live writer holds. A file store never reads, writes or
# removes anything outside its root; read-only commands never remove anything; a lock file with a
# garbled owner or a future mtime never blocks a writer forever.
source "$(dirname "$0")/attack_lib.sh"

# ---- a symlinked chunk directory that leads out of the store ----
mkdir -p "$T/outside"
printf 'precious' >"$T/outside/0"
nds create "file://$T/v3.zarr|zarr3:" --shape 8 --chunks 2 --dtype uint8
succeeded "create a zarr v3 array"
ln -s "$T/outside" "$T/v3.zarr/c"
printf '\1\2\3\4\5\6\7\10' >"$T/ones.raw"
nds write "$T/v3.zarr" --raw -i "$T/ones.raw"
refused "write through a chunk directory linked out of the store" "symbolic link"
check '[ "$(ls "$T/outside")" = 0 ]' "no file was created outside the store"
head -c 8 /dev/zero >"$T/zeros.raw"
nds write "$T/v3.zarr" --raw -i "$T/zeros.raw"
refused "all-fill write through the link" "symbolic link"
check '[ "$(cat "$T/outside/0")" = precious ]' "the all-fill write unlinked nothing outside the store"
nds read "$T/v3.zarr" --raw -o "$T/v3.out"
refused "read through the link" "symbolic link"
# Listing agrees with reads and writes: a link is not part of the store.
nds info "$T/v3.zarr"
succeeded "info of the store with a link in it"
nds verify "$T/v3.zarr"
succeeded "verify of the store with a link in it"
check '[ "$(cat "$T/outside/0")" = precious ]' "the file outside is still there after info and verify"
# Shrinking then growing neither removes what lies behind the link nor serves it as old data.
nds resize "$T/v3.zarr" --shape 2
succeeded "shrink the store with a link in it"
# A grow clears every chunk it exposes before it publishes the new shape; chunks behind a link
# cannot be cleared, so the grow is refused and the shape stays as it was.
nds resize "$T/v3.zarr" --shape 8
refused "grow it again: the exposed chunks lie behind the link" "symbolic link"
nds info "$T/v3.zarr"
expect_out "[2]" "the refused grow left the shape as it was"
check '[ "$(cat "$T/outside/0")" = precious ]' "the file outside survived the shrink"
nds read "$T/v3.zarr" --raw -o "$T/v3.out"
refused "read after shrink and grow: still refused, never stale data" "symbolic link"
# A store root that is itself a symlink is fine.
mkdir -p "$T/real"
ln -s "$T/real" "$T/linked.zarr"
nds create "$T/linked.zarr" --shape 8 --chunks 2 --dtype uint8
succeeded "create an array through a symlinked root"
nds write "$T/linked.zarr" --raw -i "$T/ones.raw"
succeeded "write through a symlinked root"
check '[ -f "$T/real/0" ]' "the chunk landed in the root's target"
nds read "$T/linked.zarr" --raw -o "$T/linked.out"
succeeded "read through a symlinked root"
check 'cmp -s "$T/ones.raw" "$T/linked.out"' "read back what was written"

# ---- files that look like temp files ----
mkdir -p "$T/plain/sub"
printf 'mine' >"$T/plain/notes.__tmp.1.txt"
printf 'mine' >"$T/plain/sub/x.__tmp.999999.0123456789abcdef"
touch -d '2 hours ago' "$T/plain/notes.__tmp.1.txt" "$T/plain/sub/x.__tmp.999999.0123456789abcdef"
nds ls "$T/plain"
succeeded "ls of a directory that is not a store"
check '[ -f "$T/plain/notes.__tmp.1.txt" ] && [ -f "$T/plain/sub/x.__tmp.999999.0123456789abcdef" ]' \
    "ls removed nothing"
nds create "$T/t.zarr" --shape 8 --chunks 2 --dtype uint8
nds write "$T/t.zarr" --raw -i "$T/ones.raw"
succeeded "write an array to hold temp-like files"
user="$T/t.zarr/0.__tmp.1.user-notes"
stale="$T/t.zarr/1.__tmp.999999.0123456789abcdef"
printf 'mine' >"$user"
printf 'partial' >"$stale"
touch -d '2 hours ago' "$user" "$stale"
for cmd in ls info verify read; do
    if [ "$cmd" = read ]; then nds read "$T/t.zarr" --raw -o "$T/t.out"; else nds $cmd "$T/t.zarr"; fi
    succeeded "$cmd of a store with old temp-like files"
    check '[ -f "$user" ] && [ -f "$stale" ]' "$cmd (read-only) removed nothing"
done
nds resize "$T/t.zarr" --shape 4
succeeded "resize of a store with old temp-like files"
check '[ -f "$user" ]' "resize kept a user file that only looks like a temp file"
nds create "$T/t.zarr" --shape 8 --chunks 2 --dtype uint8 --delete-existing
succeeded "delete-existing of a store with an abandoned temp file"
check '[ ! -e "$stale" ]' "a write path removed the abandoned temp file in ndstore's own naming"
check '[ -f "$user" ]' "and kept the user file that only looks like one"

# ---- an excl lock file with a garbled owner and a future mtime ----
nds create "$T/l.zarr" --shape 8 --chunks 8 --dtype uint8
printf 'garbage, no owner record' >"$T/l.zarr/0.__lock"
touch -d '1 hour' "$T/l.zarr/0.__lock"
ATTACK_TIMEOUT=20 NDS_FILE_LOCK=excl nds write "$T/l.zarr" --raw -i "$T/ones.raw"
succeeded "write past an excl lock file with a garbled owner and a future mtime"
nds read "$T/l.zarr" --raw -o "$T/l.out"
check 'cmp -s "$T/ones.raw" "$T/l.out"' "the write took effect"

finish
