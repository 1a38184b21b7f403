#!/usr/bin/env bash
# Hostile regions in physical units (read/write --units): numbers that are not numbers, infinities,
# huge and tiny values, units and unit-less dimensions mixed, "..." in every place, too many items,
# long items. Each is a clear error or the right voxels, never a crash, a hang or a silent clamp.
source "$(dirname "$0")/attack_lib.sh"

V="file://$T/pv/"
nds create '{"driver":"neuroglancer_precomputed","kvstore":"'"$V"'","create":true,"multiscale_metadata":{"type":"image","data_type":"uint8","num_channels":1},"scale_metadata":{"size":[16,8,4],"voxel_offset":[100,-4,0],"resolution":[8,8,40],"encoding":"raw","chunk_size":[16,8,4]}}'
succeeded "create a volume with units"

for region in "[nan, 0, 0, 0]" "[inf, 0, 0, 0]" "[-inf:inf, 0, 0, 0]" "[1e308, 0, 0, 0]" "[1e-320, 0, 0, 0]" \
              "[0x10, 0, 0, 0]" "[800nm, 0, 0, 0]" "[800:, 0, 0, 0]extra" "[::0, 0, 0, 0]" "[::-8, 0, 0, 0]" \
              "[800:900:1e300, 0, 0, 0]" "[1:2:3:4, 0, 0, 0]" "[$(printf '8%.0s' {1..200}), 0, 0, 0]"; do
    nds read "$V" --units nm --region "$region"
    refused "--units nm --region '${region:0:40}'"
done
nds read "$V" --units nm --region "$(printf '0,%.0s' {1..300})0"
refused "300 items" "more dimensions"
nds read "$V" --units nm --region "[..., 0]"
succeeded "... then the channel (an index: no unit)"
nds read "$V" --units nm --region "[800, ...]"
succeeded "x in nm then ..."
nds read "$V" --units nm --region "[..., ..., 0]"
refused "two ellipses" "more than one '...'"
nds read "$V" --units nm --region "[807.99999, -32, 0, 0]"
succeeded "the last nm of voxel 100"
nds read "$V" --units nm --region "[928, -32, 0, 0]"
refused "one voxel past the end" "outside the domain [100, 116)"
nds read "$V" --units nm --region "[800:928:8, -32:32:16, 0:160:40, 0]" -o "$T/steps.npy"
succeeded "whole-voxel steps in nm"
nds write "$V" --units nm --region "[800:808, -32, 0, 0]" -i "$T/steps.npy"
refused "write: the region's shape decides, as without --units" "shape"
# Hostile schema dimension_units when creating (precomputed: x, y, z lengths; N5: one per dimension).
PC='{"driver":"neuroglancer_precomputed","kvstore":"file://'"$T"'/u%s/","create":true,"multiscale_metadata":{"type":"image","data_type":"uint8","num_channels":1},"scale_metadata":{"encoding":"raw","size":[4,4,4],"chunk_size":[4,4,4]},"schema":{"dimension_units":%s}}'
i=0
for units in '["abc","nm","nm",null]' '["8nm","8nm","8nm","1nm"]' '["-8nm","nm","nm",null]' '["1e400nm","nm","nm",null]' \
             '["8parsecs","nm","nm",null]' '[8,"nm","nm",null]' '["nm","nm"]' '"8nm"' '["0nm","nm","nm",null]' '["nannm","nm","nm",null]'; do
    i=$((i + 1))
    # shellcheck disable=SC2059
    nds create "$(printf "$PC" "$i" "$units")"
    refused "precomputed dimension_units $units" "dimension_units"
done
N5='{"driver":"n5","kvstore":"file://'"$T"'/n%s/","create":true,"schema":{"dtype":"uint8","domain":{"shape":[4,4]},"dimension_units":%s}}'
for units in '["8nm",7]' '"8nm"' '["8 nanometres","nm"]' '["-1nm","nm"]'; do
    i=$((i + 1))
    # shellcheck disable=SC2059
    nds create "$(printf "$N5" "$i" "$units")"
    refused "N5 dimension_units $units" "dimension_units"
done
# N5 attributes other tools write that do not fit: units unknown, never an error or a crash.
mkdir -p "$T/odd.n5"
for attrs in '"resolution":[1],"units":["nm","nm"]' '"resolution":[0,1],"units":["nm","nm"]' \
             '"resolution":[1,1],"units":["nanometres","nm"]' '"pixelResolution":{"unit":5,"dimensions":[1,1]}' \
             '"resolution":"8","units":"nm"' '"pixelResolution":[1,2]'; do
    printf '{"dimensions":[4,4],"blockSize":[4,4],"dataType":"uint8","compression":{"type":"raw"},%s}' "$attrs" \
        >"$T/odd.n5/attributes.json"
    nds info "file://$T/odd.n5/|n5:"
    succeeded "N5 with $attrs"
    check '[[ "$OUT" != *"voxel:"* ]]' "N5 with $attrs: no units"
done
finish
