#!/usr/bin/env bash
# Hostile paths on the command line: copies into an ancestor or a descendant of their source, empty
# specs (which once meant the current directory), a spec "path" that climbs above its kvstore root,
# and ls of an empty prefix. Each must be refused before anything is deleted or created, with a
# message naming what is wrong, and leave every file where it was.
source "$(dirname "$0")/attack_lib.sh"

mk_array() { # mk_array PATH: a small zarr v2 array with data in every chunk
    nds create "$1" --dtype uint8 --shape 4,4 --chunks 2,2; succeeded "create $1"
    printf 'abcdefghijklmnop' >"$T/in.raw"
    nds write "$1" --raw -i "$T/in.raw"; succeeded "write $1"
}
intact() { # intact PATH DESC: the array still reads back what mk_array wrote
    nds read "$1" -o "$T/back.raw" --raw
    check '[ "$RC" -eq 0 ] && cmp -s "$T/back.raw" "$T/in.raw"' "$2: source intact"
}

# ---- cp into an ancestor or a descendant of the source (item 1) ----
mkdir -p "$T/d/p"
mk_array "$T/d/p/a.zarr"
echo keep >"$T/d/p/unrelated.txt"

nds cp "$T/d/p/a.zarr" "$T/d/p" --delete-existing
refused "cp into the source's parent with --delete-existing" "inside"
expect_err "$T/d/p" "the message names the destination"
intact "$T/d/p/a.zarr" "cp into the parent"
check '[ -f "$T/d/p/unrelated.txt" ]' "cp into the parent: unrelated files kept"

nds cp "$T/d/p/a.zarr" "$T/d" --delete-existing
refused "cp into the source's grandparent" "inside"
intact "$T/d/p/a.zarr" "cp into the grandparent"

nds cp "$T/d/p/a.zarr" "$T/d/p/a.zarr/c|zarr:" --delete-existing
refused "cp into a directory inside the source, --delete-existing" "inside"
intact "$T/d/p/a.zarr" "cp into the source's child"

nds cp "$T/d/p/a.zarr" "$T/d/p/a.zarr/c|zarr:"
refused "cp into a directory inside the source, no --delete-existing" "inside"
check '[ ! -e "$T/d/p/a.zarr/c" ]' "cp into the source's child: nothing created"

nds cp "$T/d/p/a.zarr" "$T/d/p" 
refused "cp into the source's parent, no --delete-existing" "inside"

nds cp "$T/d/p/a.zarr" "$T/d/p/a.zarr" --delete-existing
refused "cp onto the source itself" "source"
intact "$T/d/p/a.zarr" "cp onto itself"

ln -s "$T/d/p" "$T/link"
nds cp "$T/d/p/a.zarr" "$T/link" --delete-existing
refused "cp into the parent through a symlink" "inside"
intact "$T/d/p/a.zarr" "cp through a symlink"

nds cp "$T/link/a.zarr" "file://$T/d/p/./a.zarr/x/|zarr3:" --delete-existing
refused "cp into the source through a symlink and ./" "inside"

(cd "$T/d" && nds cp p/a.zarr p --delete-existing; refused "cp with relative paths into the parent" "inside")
intact "$T/d/p/a.zarr" "relative cp into the parent"

nds cp "$T/d/p/a.zarr" "{\"driver\":\"zarr\",\"kvstore\":\"file://$T/d\",\"path\":\"p\"}" --delete-existing
refused "cp into the parent given as JSON with a path" "inside"
intact "$T/d/p/a.zarr" "JSON cp into the parent"

# lmdb: the environment (resolved) and the key prefix inside it.
nds create "lmdb://$T/x.lmdb/a/|zarr:" --dtype uint8 --shape 4; succeeded "create in lmdb"
nds cp "lmdb://$T/x.lmdb/a/" "lmdb://$T/x.lmdb/|zarr:" --delete-existing
refused "lmdb cp into the environment's root" "inside"
nds info "lmdb://$T/x.lmdb/a/"; succeeded "the lmdb source is still there"
nds cp "lmdb://$T/x.lmdb/a/" "{\"driver\":\"zarr\",\"kvstore\":{\"driver\":\"lmdb\",\"env\":\"$T/./x.lmdb\",\"path\":\"a/b/\"}}"
refused "lmdb cp inside the source, env spelled with ./" "inside"
nds cp "lmdb://$T/x.lmdb/a/" "lmdb://$T/x.lmdb/ab/|zarr:"; succeeded "lmdb cp to a sibling prefix"

# A sibling whose name extends the source's is no overlap (component-wise prefix, not string).
nds cp "$T/d/p/a.zarr" "$T/d/p/a.zarr2"; succeeded "cp to a sibling a.zarr2"
intact "$T/d/p/a.zarr2" "the sibling copy"
nds cp "$T/d/p/a.zarr" "$T/d/q/b.zarr"; succeeded "cp to an unrelated directory"

# ---- empty specs (item 6) ----
mkdir -p "$T/cwd"
(cd "$T/cwd" && mk_array "$T/cwd")
for cmd in "info" "read" "verify" "attrs"; do
    (cd "$T/cwd" && nds $cmd ""; refused "$cmd with an empty SPEC" "empty")
done
(cd "$T/cwd" && nds resize "" --shape 0; refused "resize with an empty SPEC" "SPEC")
intact "$T/cwd" "resize \"\" in the array's directory"
(cd "$T/cwd" && nds resize "   " --shape 0; refused "resize with a blank SPEC" "empty")
: >"$T/empty.json"
(cd "$T/cwd" && nds resize "@$T/empty.json" --shape 0; refused "resize with an empty @file" "empty")
printf ' \n\t\n' >"$T/blank.json"
(cd "$T/cwd" && nds info "@$T/blank.json"; refused "info with a blank @file" "empty")
intact "$T/cwd" "after the empty-spec attempts"
(cd "$T/cwd" && nds write "" --raw -i "$T/in.raw"; refused "write with an empty SPEC" "empty")
(cd "$T/cwd" && nds create "" --dtype uint8 --shape 2 --delete-existing; refused "create with an empty SPEC" "empty")
intact "$T/cwd" "after create \"\" --delete-existing"
(cd "$T/cwd" && nds cp "" "$T/e1.zarr"; refused "cp with an empty SRC" "SRC")
(cd "$T/cwd" && nds cp "$T/d/p/a.zarr" "" --delete-existing; refused "cp with an empty DST" "DST")
intact "$T/cwd" "after cp to \"\" --delete-existing"
(cd "$T/cwd" && nds ls ""; refused "ls with an empty URL" "URL")
(cd "$T/cwd" && nds group ""; refused "group with an empty URL" "URL")
(cd "$T/cwd" && nds checkpoint mark "" cp1; refused "checkpoint with an empty URL" "URL")

# ---- a spec "path" above its kvstore root (item 10) ----
mkdir -p "$T/root"
nds create "{\"driver\":\"zarr\",\"kvstore\":\"file://$T/root/\",\"path\":\"../escaped.zarr\"}" --dtype uint8 --shape 2
refused "spec path climbing above the kvstore root" "../escaped.zarr"
check '[ ! -e "$T/escaped.zarr" ]' "nothing created above the root"
nds create "{\"driver\":\"zarr\",\"kvstore\":\"file://$T/root/\",\"path\":\"a/../../escaped.zarr\"}" --dtype uint8 --shape 2
refused "spec path climbing above the root after a component" "escaped.zarr"
check '[ ! -e "$T/escaped.zarr" ]' "nothing created above the root (a/../..)"
nds create "{\"driver\":\"zarr\",\"kvstore\":\"file://$T/root/\",\"path\":\"x/./y/../in.zarr\"}" --dtype uint8 --shape 2
succeeded "spec path with . and .. staying inside the root"
check '[ -f "$T/root/x/in.zarr/.zarray" ]' "x/./y/../in.zarr is x/in.zarr"
nds info "{\"kvstore\":\"file://$T/root/\",\"path\":\"x//in.zarr/\"}"; succeeded "empty components in path"
nds group "file://$T/root/" "../up"; refused "group path above the root" "../up"
check '[ ! -e "$T/up" ]' "no group above the root"
nds create "{\"driver\":\"zarr\",\"kvstore\":{\"driver\":\"memory\",\"path\":\"../x/\"}}" --dtype uint8 --shape 2
refused "memory kvstore path above the root" "../x/"

# ---- ls of an empty prefix (item 13) ----
mkdir -p "$T/emptydir"
nds ls "$T/emptydir"; succeeded "ls of an empty directory"
expect_out "0 entries" "ls of an empty directory prints the total"
nds ls "memory://nothing/"; succeeded "ls of an empty memory prefix"

finish
