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
source "$HERE/check_lib.sh"
scratch_setup ome-test "${1:?usage: ome_test.sh path/to/ndstore}"
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

# ---- OME-NGFF 0.4 in zarr v2 (.zattrs, no "ome" wrapper), a dataset path of two parts ------------
mkdir -p g4
nds create "file://$T/g4/lvl/s0|zarr:" --shape 6,12,16 --chunks 4,8,8 --dtype uint16; expect_rc 0 "create a zarr v2 dataset"
nds write "file://$T/g4/lvl/s0|zarr:" -i vol.npy; expect_rc 0 "write it"
echo '{"zarr_format": 2}' >g4/.zgroup
"$PY" -c "import json; json.dump({'multiscales': [{'version': '0.4', 'axes': [{'name': 'z', 'type': 'space', 'unit': 'angstrom'}, {'name': 'y', 'type': 'space', 'unit': 'micrometer'}, {'name': 'x', 'type': 'space', 'unit': 'micrometer'}], 'datasets': [{'path': 'lvl/s0', 'coordinateTransformations': [{'type': 'scale', 'scale': [500, 0.5, 0.25]}]}], 'coordinateTransformations': [{'type': 'scale', 'scale': [2, 1, 1]}, {'type': 'translation', 'translation': [1000, 0, 0]}]}]}, open('g4/.zattrs', 'w'))"
nds info "$T/g4/lvl/s0"
expect_out "physical:    [100000, 700000) pm x [0, 6) um x [0, 4) um" "OME 0.4 (zarr v2): angstrom as pm, the multiscale's scale and translation after the dataset's"
expect_out "voxel:       100000 pm x 0.5 um x 0.25 um (from the OME-Zarr group)" "OME 0.4: the voxel size"
nds read "$T/g4/lvl/s0" --units nm --region "200:300, 1000:2000, 3000" -o r4.npy
slice_of vol.npy "1:2, 2:4, 12" want4.npy
check 'same r4.npy want4.npy' "--units nm on the OME 0.4 dataset reads vol[1:2, 2:4, 12]"
nds create "file://$T/g4/other|zarr:" --shape 4 --chunks 4 --dtype uint8
nds info "$T/g4/other"
check '[[ "$OUT" != *"physical:"* && -z "$ERR" ]]' "an array beside the datasets gets no frame and no note"

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

# ---- 2. cp --ome: precomputed -> OME-Zarr -> precomputed keeps resolution and voxel_offset -------------
"$PY" -c "import numpy as np; np.save('pc.npy', np.random.default_rng(5).integers(0, 255, (16, 12, 6, 1), dtype=np.uint8))"
nds create "{\"driver\":\"neuroglancer_precomputed\",\"kvstore\":\"file://$T/pc/\",\"multiscale_metadata\":{\"data_type\":\"uint8\",\"num_channels\":1,\"type\":\"image\"},\"scale_metadata\":{\"size\":[16,12,6],\"chunk_size\":[8,8,4],\"resolution\":[4,6,40],\"voxel_offset\":[10,-2,3],\"encoding\":\"raw\"}}"
expect_rc 0 "create a precomputed volume at voxel_offset [10, -2, 3]"
nds write "file://$T/pc/|neuroglancer-precomputed:" -i pc.npy; expect_rc 0 "write it"
PC="file://$T/pc/|neuroglancer-precomputed:"

nds cp "$PC" "file://$T/o1|zarr3:"
expect_rc 0 "cp into zarr3 without --ome"
expect_err "cp --ome writes an OME-Zarr group that does" "cp into plain zarr3: the note points at --ome"
nds cp "$PC" "file://$T/o1|zarr3:" --ome
expect_rc 1 "cp --ome onto a zarr3 array (not a group) is refused"
expect_err "is not a zarr v3 group's" "the refusal says why"
nds cp "$PC" "file://$T/o2|zarr:" --ome; expect_rc 2 "cp --ome into zarr v2 is bad usage"
expect_err "an OME-Zarr 0.5 group is zarr v3" "the usage message names zarr v3"
nds cp "$PC" "{\"driver\":\"zarr3\",\"kvstore\":\"file://$T/o2/\"}" --ome; expect_rc 2 "cp --ome with a JSON DST is bad usage"

nds cp "$PC" "file://$T/ome|zarr3:" --ome
expect_rc 0 "cp --ome from precomputed"
check '[[ "$ERR" != *"not kept"* && "$ERR" != *"starts at 0"* ]]' "cp --ome says nothing is lost"
"$PY" - "$T/ome/zarr.json" <<'EOF2'
import json, sys
doc = json.load(open(sys.argv[1]))
ome = doc["attributes"]["ome"]
assert doc["node_type"] == "group" and ome["version"] == "0.5", doc
ms = ome["multiscales"][0]
assert [a["name"] for a in ms["axes"]] == ["x", "y", "z", "c"], ms["axes"]
assert [a.get("unit") for a in ms["axes"]] == ["nanometer"] * 3 + [None], ms["axes"]
assert [a.get("type") for a in ms["axes"]] == ["space"] * 3 + ["channel"], ms["axes"]
ds = ms["datasets"]
assert len(ds) == 1 and ds[0]["path"] == "0", ds
ct = ds[0]["coordinateTransformations"]
assert ct[0] == {"type": "scale", "scale": [4, 6, 40, 1]}, ct
assert ct[1] == {"type": "translation", "translation": [40, -12, 120, 0]}, ct
EOF2
check '[ $? -eq 0 ]' "the group's multiscales: axes x/y/z/c in nanometer, scale = resolution, translation = voxel_offset x resolution"
nds read "file://$T/ome/0|zarr3:" -o ome0.npy
check 'same ome0.npy pc.npy' "dataset 0 holds the volume"
nds info "file://$T/ome/0|zarr3:"
expect_out "physical:    [40, 104) nm x [-12, 60) nm x [120, 360) nm x -" "info of dataset 0: the precomputed volume's physical bounds"
nds info "$PC"
expect_out "physical:    [40, 104) nm x [-12, 60) nm x [120, 360) nm x -" "(the precomputed volume's own bounds, the same)"
nds read "file://$T/ome/0|zarr3:" --units nm --region "48:64, -12:0, 160" -o omeu.npy
nds read "$PC" --units nm --region "48:64, -12:0, 160" -o pcu.npy
check 'same omeu.npy pcu.npy' "the same --units nm region reads the same voxels from both"
slice_of pc.npy "2:6, 0:2, 1" want3.npy
check 'same omeu.npy want3.npy' "and they are pc[2:6, 0:2, 1] (NumPy)"

nds cp "file://$T/ome/0|zarr3:" "file://$T/back|neuroglancer-precomputed:"
expect_rc 0 "cp the OME dataset back into precomputed"
"$PY" - "$T/back/info" <<'EOF2'
import json, sys
s = json.load(open(sys.argv[1]))["scales"][0]
assert s["resolution"] == [4, 6, 40] and s["voxel_offset"] == [10, -2, 3] and s["size"] == [16, 12, 6], s
EOF2
check '[ $? -eq 0 ]' "precomputed -> OME-Zarr -> precomputed keeps resolution [4, 6, 40] and voxel_offset [10, -2, 3]"
nds read "file://$T/back/|neuroglancer-precomputed:" -o back.npy
check 'same back.npy pc.npy' "and the voxels"
nds cp "$T/ome" "file://$T/back2|neuroglancer-precomputed:" --scale 0
expect_rc 0 "cp --scale 0 of the group into precomputed"
check 'grep -q "\"voxel_offset\":\[10,-2,3\]" "$T/back2/info" && grep -q "\"resolution\":\[4,6,40\]" "$T/back2/info"' "through --scale too"

# OME -> N5: the units go into resolution + units; the origin cannot (said)
nds cp "file://$T/ome/0|zarr3:" "file://$T/n5|n5:"
expect_rc 0 "cp the OME dataset into N5"
expect_err "cannot store an origin" "N5 cannot keep the translation: said"
nds info "file://$T/n5|n5:"
expect_out "voxel:       4 nm x 6 nm x 40 nm x -" "N5 keeps the voxel size"
# N5 -> OME: the N5 axes' names
"$PY" -c "import json; d=json.load(open('n5/attributes.json')); d['axes']=['i','j','k','ch']; json.dump(d, open('n5/attributes.json','w'))"
nds cp "file://$T/n5|n5:" "file://$T/ome_n5|zarr3:" --ome
expect_rc 0 "cp --ome from N5"
check 'grep -q "\"name\": \"i\"" ome_n5/zarr.json && grep -q "\"name\": \"ch\"" ome_n5/zarr.json' "the axes are the N5 ones"
nds info "file://$T/ome_n5/0|zarr3:"
expect_out "voxel:       4 nm x 6 nm x 40 nm x -" "and the units are N5's"

# a translation that is not a whole number of voxels: kept to the voxel, said
mkdir -p frac
nds create "file://$T/frac/s0|zarr3:" --shape 6,12,16 --chunks 4,8,8 --dtype uint16
nds write "file://$T/frac/s0|zarr3:" -i vol.npy
group_json frac "{'ome': {'version': '0.5', 'multiscales': [{'axes': $AX3, 'datasets': [{'path': 's0', 'coordinateTransformations': [{'type': 'scale', 'scale': [40, 4, 4]}, {'type': 'translation', 'translation': [80, 6, -8]}]}]}]}}"
nds cp "file://$T/frac/s0|zarr3:" "file://$T/frac_n5|n5:"
expect_rc 0 "cp a dataset with a part-voxel translation"
expect_err "dimension 1 (6 nm) is not a whole number of voxels (1.5)" "the part-voxel translation is named"
nds cp "file://$T/frac/s0|zarr3:" "file://$T/frac_z|zarr3:" --ome
expect_rc 0 "cp --ome from a dataset with a part-voxel translation"
check '[[ "$ERR" != *"not a whole number"* ]]' "cp --ome has nothing to say about it"
check '"$PY" -c "import json,sys; ct=json.load(open(\"frac_z/zarr.json\"))[\"attributes\"][\"ome\"][\"multiscales\"][0][\"datasets\"][0][\"coordinateTransformations\"]; sys.exit(ct[1][\"translation\"] != [80, 6, -8])"' "cp --ome keeps a part-voxel translation exactly"
nds info "file://$T/frac_z/0|zarr3:"
expect_out "physical:    [80, 320) nm x [6, 54) nm x [-8, 56) nm" "and the physical bounds"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
