#!/usr/bin/env bash
# Hostile image outputs of `ndstore read -o x.png / x.tif` (cli/image_out.c): names that are not
# files, a full device, images larger than the formats hold. Each must fail cleanly, name the output,
# and remove nothing it did not create. Then hostile `ndstore downsample` arguments and destinations
# (pyramids, the other half of issue 21's images).
source "$(dirname "$0")/attack_lib.sh"

nds create "$T/a.zarr" --shape 4,6,8 --chunks 2,3,4 --dtype uint8; succeeded "create"
nds write "$T/a.zarr" --region '[0:1, 0:1, 0:1]' --raw -i /dev/zero; clean_exit "write"

mkdir "$T/dir.png"
nds read "$T/a.zarr" -r '[1]' -o "$T/dir.png"; refused "a directory named .png" "dir.png"
check '[ -d "$T/dir.png" ]' "the directory is left alone"

ln -s /dev/full "$T/full.tif"
nds read "$T/a.zarr" -o "$T/full.tif"; refused "a tif onto a full device" "full.tif"
check '[ -c /dev/full ] && [ -L "$T/full.tif" ]' "the device and the link are left alone"
ln -s /dev/full "$T/full.png"
nds read "$T/a.zarr" -r '[1]' -o "$T/full.png"; refused "a png onto a full device" "full.png"

# Larger than the formats hold: refused before anything is read or created (no chunk is stored,
# so a read would be quick anyway; the refusal is by size).
nds create "$T/wide.zarr" --shape 1,8589934592 --chunks 1,1048576 --dtype uint8; succeeded "create wide"
nds read "$T/wide.zarr" -o "$T/wide.png"; refused "a png 2^33 pixels wide" "larger than a PNG holds"
check '[ ! -e "$T/wide.png" ]' "no wide.png left"
nds create "$T/pages.zarr" --shape 70000,2,2 --chunks 1000,2,2 --dtype uint8; succeeded "create pages"
nds read "$T/pages.zarr" -o "$T/pages.tif"; refused "a tif of 70000 pages" "larger than a TIFF holds"
check '[ ! -e "$T/pages.tif" ]' "no pages.tif left"

# Names: an empty extension after a dot, a dot file, a trailing slash.
nds read "$T/a.zarr" -r '[1]' -o "$T/x."; clean_exit "a name ending in a dot"
expect_rc 2 "a name ending in a dot is a usage error"
expect_err "the extension '.' is not an output format ndstore writes; understood" "a name ending in a dot"
nds read "$T/a.zarr" -r '[1]' -o "$T/.png"; succeeded "a dot file named .png has no extension: .npy"
nds read "$T/a.zarr" -r '[1]' -o "$T/nodir/x.png"; refused "a png in a missing directory" "nodir/x.png"

# ---- downsample ----
D="file://$T/pyr.zarr|zarr3:"
nds downsample "$T/a.zarr" "$D" --factors 100000,100000,100000; refused "a block of 10^15 elements" "a block of more than 67108864 elements"
nds downsample "$T/a.zarr" "$D" --factors 18446744073709551615,2,2; refused "a factor of 2^64-1" "a block of more than"
nds downsample "$T/a.zarr" "$D" --factors 0,2,2; refused "a factor of 0" "dimension 0: a factor is at least 1"
nds downsample "$T/a.zarr" "$D" --factors 2,2,2 --levels 9; refused "levels past one voxel" "give --levels 3 at most"
nds downsample "$T/a.zarr" "$D" --factors 2,2,2 --levels 99; clean_exit "--levels 99"
expect_rc 2 "--levels 99 is a usage error"
check '[ ! -e "$T/pyr.zarr" ]' "refusals write nothing"
nds create "file://$T/arr.zarr|zarr3:" --shape 4,4 --dtype uint8; succeeded "an array where the pyramid goes"
nds downsample "$T/a.zarr" "file://$T/arr.zarr|zarr3:" --factors 2,2,2; refused "a pyramid over an array" "zarr.json is not a zarr v3 group's"
check '[ ! -e "$T/arr.zarr/0" ]' "nothing written into the array"
printf 'not json' >"$T/junk.json" && mkdir -p "$T/junk.zarr" && cp "$T/junk.json" "$T/junk.zarr/zarr.json"
nds downsample "$T/a.zarr" "file://$T/junk.zarr|zarr3:" --factors 2,2,2; refused "a pyramid over a corrupt zarr.json" "zarr.json is not a zarr v3 group's"
nds downsample "$T/a.zarr" "file://$T/a.zarr/p|zarr3:" --factors 2,2,2; refused "a pyramid inside its source" "inside the source"
nds downsample "$T/a.zarr" "file://$T/nowhere|zarr:" --factors 2,2,2; refused "a zarr v2 pyramid" "not 'zarr'"
nds downsample "$T/a.zarr" "file://$T/p2.zarr|zarr3:" --factors 2,2,2 --memory-budget 2 --levels 1; succeeded "a 2-byte budget still runs (one chunk at a time)"
finish
