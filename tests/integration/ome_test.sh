#!/usr/bin/env bash
# OME-Zarr physical metadata (issue 21): a dataset of an OME-Zarr group has the group's axes units,
# scale and translation as its physical frame (info's physical bounds and voxel size, --units
# regions, read and compared with NumPy); `cp --ome` writes an array as dataset 0 of an OME-Zarr 0.5
# group that keeps its voxel size and place; cp from a dataset into precomputed keeps resolution and
# voxel_offset; hostile OME metadata never crashes and is named in a note.
#
# usage: tests/integration/ome_test.sh path/to/ndstore
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=$(realpath "${1:?usage: ome_test.sh path/to/ndstore}")
PY=/usr/bin/python3
T=$(mktemp -d "${TMPDIR:-/tmp}/ndstore-ome-test.XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
pass=0
fail=0
source "$HERE/check_lib.sh"
check() { if eval "$1"; then ok; else no "$2 ($1)"; fi; }
if ! "$PY" -c 'import numpy' 2>/dev/null; then echo "FAIL: $PY has no numpy"; exit 1; fi

# same A.npy B.npy: the two files hold the same array (shape, dtype, values)
same() { "$PY" -c "import numpy as np,sys; a,b=np.load(sys.argv[1]),np.load(sys.argv[2]); sys.exit(0 if a.shape==b.shape and a.dtype==b.dtype and (a==b).all() else 1)" "$1" "$2"; }
# slice_of SRC.npy 'EXPR' OUT.npy: saves SRC[EXPR] (NumPy indexing) as OUT
slice_of() { "$PY" -c "import numpy as np,sys; a=np.load(sys.argv[1]); np.save(sys.argv[3], eval('a['+sys.argv[2]+']'))" "$1" "$2" "$3"; }
# group_json DIR 'PYTHON': writes DIR/zarr.json, a zarr v3 group whose attributes are the Python
# expression (json.dumps'd; None -> null)
group_json() { "$PY" -c "import json,sys; json.dump({'zarr_format':3,'node_type':'group','attributes':eval(sys.argv[2])}, open(sys.argv[1]+'/zarr.json','w'))" "$1" "$2"; }

"$PY" -c "import numpy as np; np.save('vol.npy', np.random.default_rng(21).integers(0, 60000, (6, 12, 16), dtype=np.uint16))"

# ---- 1. a hand-written OME-Zarr 0.5 group: z, y, x in micrometer / nanometer, scale and translation
mkdir -p g
nds create "file://$T/g/s0|zarr3:" --shape 6,12,16 --chunks 4,8,8 --dtype uint16; expect_rc 0 "create dataset s0"
nds write "file://$T/g/s0|zarr3:" -i vol.npy; expect_rc 0 "write dataset s0"
OME05="{'ome': {'version': '0.5', 'multiscales': [{'axes': [{'name': 'z', 'type': 'space', 'unit': 'micrometer'}, {'name': 'y', 'type': 'space', 'unit': 'nanometer'}, {'name': 'x', 'type': 'space', 'unit': 'nanometer'}], 'datasets': [{'path': 's0', 'coordinateTransformations': [{'type': 'scale', 'scale': [0.04, 4, 8]}, {'type': 'translation', 'translation': [0.2, -8, 800]}]}]}]}}"
group_json g "$OME05"

nds info "file://$T/g/s0|zarr3:"
expect_rc 0 "info of an OME dataset"
expect_out "physical:    [0.2, 0.44) um x [-8, 40) nm x [800, 928) nm" "info: the dataset's physical bounds (translation + shape x scale)"
expect_out "voxel:       0.04 um x 4 nm x 8 nm (from the OME-Zarr group)" "info: the voxel size, said to come from the group"
nds info "$T/g" --scale s0
expect_out "physical:    [0.2, 0.44) um x [-8, 40) nm x [800, 928) nm" "info --scale on the group: the same bounds"
nds info "file://$T/g/s0|zarr3:" --json
check '[[ "$OUT" == *"\"offset\": 800"* && "$OUT" == *"\"units_from\": \"ome-zarr group\""* ]]' "info --json: offset and units_from"

# --units nm regions: z 240..360 nm is index 1 up to 4 ((240-200)/40 = 1, (360-200)/40 = 4); y -8..16
# nm is 0..6; x 816..880 nm is 2..10 with a step of 16 nm (2 voxels)
nds read "file://$T/g/s0|zarr3:" --units nm --region "240:360, -8:16, 816:880:16" -o r1.npy
expect_rc 0 "read an OME dataset with --units nm"
slice_of vol.npy "1:4, 0:6, 2:10:2" want1.npy
check 'same r1.npy want1.npy' "--units nm region on an OME dataset reads vol[1:4, 0:6, 2:10:2]"
# in um, through --scale on the group; a single index: z 0.3 um is (0.3-0.2)/0.04 = 2.5 -> voxel 2
nds read "$T/g" --scale s0 --units um --region "0.3, 0.0:0.012, 0.84" -o r2.npy
expect_rc 0 "read --scale s0 --units um"
slice_of vol.npy "2, 2:5, 5" want2.npy
check 'same r2.npy want2.npy' "--units um on the group's dataset reads vol[2, 2:5, 5]"
nds read "file://$T/g/s0|zarr3:" --units nm --region "600" -o out.npy
expect_rc 1 "a z index past the end of the dataset is outside its domain"
expect_err "outside" "the message says the region is outside"

# ---- hostile OME metadata: never a crash; what is ignored is named --------------------------------
hostile() { # hostile DESC 'PYTHON attributes' TEXT-IN-THE-NOTE
    group_json g "$2"
    nds info "file://$T/g/s0|zarr3:"
    if [ "$RC" -eq 0 ] && [[ "$ERR" == *"$3"* ]] && [[ "$ERR" != *"AddressSanitizer"* ]]; then ok
    else no "hostile $1: exit $RC, stderr lacks '$3'"; fi
    nds read "file://$T/g/s0|zarr3:" --units nm --region "0:100" -o h.npy
    if [ "$RC" -eq 1 ] || [ "$RC" -eq 0 ]; then ok; else no "hostile $1: --units read exit $RC"; fi
}
AX3="[{'name': 'z', 'unit': 'nanometer'}, {'name': 'y', 'unit': 'nanometer'}, {'name': 'x', 'unit': 'nanometer'}]"
DS_OK="[{'path': 's0', 'coordinateTransformations': [{'type': 'scale', 'scale': [40, 4, 4]}]}]"
ms() { echo "{'ome': {'version': '0.5', 'multiscales': [{'axes': $1, 'datasets': $2}]}}"; }
hostile "unknown unit" "$(ms "[{'name': 'z', 'unit': 'furlong'}, {'name': 'y', 'unit': 'nanometer'}, {'name': 'x', 'unit': 'nanometer'}]" "$DS_OK")" "unit furlong is not a length"
hostile "axes too short" "$(ms "[{'name': 'y', 'unit': 'nanometer'}]" "$DS_OK")" "not a list of 3 axes"
hostile "axes null" "$(ms None "$DS_OK")" "not a list of 3 axes"
hostile "unit null, others fine" "$(ms "[{'name': 'z', 'unit': None}, {'name': 'y', 'unit': 7}, {'name': 'x', 'unit': 'nanometer'}]" "$DS_OK")" "unit 7 is not a length"
hostile "scale too long" "$(ms "$AX3" "[{'path': 's0', 'coordinateTransformations': [{'type': 'scale', 'scale': [1, 2, 3, 4]}]}]")" "scale is not a list of 3 numbers"
hostile "scale with a null" "$(ms "$AX3" "[{'path': 's0', 'coordinateTransformations': [{'type': 'scale', 'scale': [1, None, 3]}]}]")" "scale[1] is not a positive number"
hostile "scale zero" "$(ms "$AX3" "[{'path': 's0', 'coordinateTransformations': [{'type': 'scale', 'scale': [1, 0, 3]}]}]")" "scale[1] is not a positive number"
hostile "scale huge" "$(ms "$AX3" "[{'path': 's0', 'coordinateTransformations': [{'type': 'scale', 'scale': [1, 1e308, 3]}]}]")" "scale[1] is not a positive number"
hostile "translation a string" "$(ms "$AX3" "[{'path': 's0', 'coordinateTransformations': [{'type': 'scale', 'scale': [1, 1, 1]}, {'type': 'translation', 'translation': 'far'}]}]")" "translation is not a list of 3 numbers"
hostile "transformations null" "$(ms "$AX3" "[{'path': 's0', 'coordinateTransformations': None}]")" "coordinateTransformations is not a list"
hostile "no transformations" "$(ms "$AX3" "[{'path': 's0'}]")" "has no coordinateTransformations"
hostile "an affine" "$(ms "$AX3" "[{'path': 's0', 'coordinateTransformations': [{'type': 'affine', 'affine': [1]}]}]")" "is not scale or translation"
group_json g "{'ome': {'multiscales': [None, 3]}}"
nds info "file://$T/g/s0|zarr3:"; expect_rc 0 "multiscales of nulls: info still works"
check '[[ "$OUT" != *"physical:"* ]]' "multiscales of nulls: no physical line"
group_json g "{'ome': {'multiscales': [{'axes': $AX3, 'datasets': [None, 5, {'path': None}]}]}}"
nds info "file://$T/g/s0|zarr3:"; expect_rc 0 "datasets of nulls: info still works"
check '[[ "$OUT" != *"physical:"* ]]' "datasets of nulls: no physical line"
printf '{"zarr_format": 3, "node_type": "group", "attributes": {"ome": ' >g/zarr.json
nds info "file://$T/g/s0|zarr3:"; expect_rc 0 "a truncated group zarr.json: info still works"
group_json g "$OME05"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
