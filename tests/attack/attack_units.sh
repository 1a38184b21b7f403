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
finish
