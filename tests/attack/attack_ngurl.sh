#!/usr/bin/env bash
# Neuroglancer's data source URLs on the command line (issue 21): "precomputed://", "zarr://",
# "zarr2://", "zarr3://", "n5://" in front of a kvstore URL (file://, http:// from a local static
# server), "|precomputed:" as the precomputed format, and hostile forms refused with one clear line;
# --scale INDEX|KEY|RESOLUTION on every command that opens an array.
# The static server is Python's http.server on 127.0.0.1 with a free port, bounded to 120 s and
# stopped on exit.
source "$(dirname "$0")/attack_lib.sh"

command -v python3 >/dev/null || { echo "SKIP: python3 needed for the static server"; finish; exit; }

W="$T/www"
mkdir -p "$W"
python3 -c "
import sys
sys.stdout.buffer.write(bytes(i % 251 for i in range(16 * 16 * 8)))" >"$T/r.bin"

# A precomputed volume, a zarr v3 and a zarr v2 array, an N5 dataset.
nds create '{"driver":"neuroglancer_precomputed","kvstore":"file://'"$W"'/vol/","create":true,
 "multiscale_metadata":{"data_type":"uint8","num_channels":1},
 "scale_metadata":{"size":[16,16,8],"chunk_size":[8,8,8],"encoding":"raw","resolution":[4,4,40]}}'
succeeded "create a precomputed volume"
nds write "precomputed://file://$W/vol" --raw -i "$T/r.bin"; succeeded "write through precomputed://file://"
nds create "zarr3://file://$W/z3" --shape 16,16,8 --chunks 8,8,8 --dtype uint8
succeeded "create through zarr3://"
check '[ -f "$W/z3/zarr.json" ]' "zarr3:// creates zarr v3"
nds create "zarr2://file://$W/z2" --shape 16,16,8 --chunks 8,8,8 --dtype uint8
succeeded "create through zarr2://"
check '[ -f "$W/z2/.zarray" ]' "zarr2:// creates zarr v2"
nds create "n5://file://$W/n5" --shape 16,16,8 --chunks 8,8,8 --dtype uint8
succeeded "create through n5://"
check '[ -f "$W/n5/attributes.json" ]' "n5:// creates N5"
for a in z3 z2 n5; do
    nds write "file://$W/$a" --raw -i "$T/r.bin"; succeeded "write $a"
done

# Local files through every prefix, and the |precomputed: alias.
nds info "precomputed://file://$W/vol"; succeeded "info precomputed://file://"
expect_out "format:      neuroglancer_precomputed" "precomputed:// opens the precomputed format"
nds info "file://$W/vol|precomputed:"; succeeded "info |precomputed:"
expect_out "format:      neuroglancer_precomputed" "|precomputed: is the precomputed format"
nds info "zarr://file://$W/z3"; succeeded "info zarr:// of a zarr v3 array"
expect_out "format:      zarr3" "zarr:// detects zarr v3"
nds info "zarr://file://$W/z2"; succeeded "info zarr:// of a zarr v2 array"
expect_out "format:      zarr" "zarr:// detects zarr v2"
nds info "zarr3://file://$W/z3"; succeeded "info zarr3://"
nds info "n5://file://$W/n5"; succeeded "info n5://"
expect_out "format:      n5" "n5:// opens N5"
nds read "precomputed://file://$W/vol" --region '[3, 4, 5, 0]'; succeeded "read through precomputed://"
expect_out "$(( ((3 * 16 + 4) * 8 + 5) % 251 ))" "the value read through precomputed://"
nds verify "zarr://file://$W/z2"; succeeded "verify through zarr://"
nds cp "precomputed://file://$W/vol" "zarr3://file://$T/copy"; succeeded "cp from precomputed:// to zarr3://"
check '[ -f "$T/copy/zarr.json" ]' "cp wrote zarr v3"

# The wrong format behind a prefix is not found; a prefix and a different |FORMAT: conflict.
nds info "zarr2://file://$W/z3"; refused "zarr2:// of a zarr v3 array" ".zarray"
nds info "precomputed://file://$W/z3"; refused "precomputed:// of a zarr v3 array" "info"
nds info "n5://file://$W/n5|zarr3:"; refused "n5:// with |zarr3:" "name different formats"
nds info "file://$W/z2|zarr2:"; succeeded "|zarr2: is zarr v2"
expect_out "format:      zarr" "|zarr2: opens zarr v2"

# Hostile forms: one clear line each, nothing opened.
nds info "precomputed://"; refused "bare precomputed://" "names no data source"
nds info "precomputed://precomputed://x"; refused "two prefixes" "two data source prefixes"
nds info "foo://x"; refused "unknown scheme" "unknown scheme \"foo://\""
nds info "precomputed://$W/vol"; refused "prefix before a bare path" "must be followed by a kvstore url"
nds info "precomputed://file://$W/vol|zip:"; refused "unknown |FORMAT: after a prefix" "\"zip\" is neither"
nds create "precomputed://" --shape 4 --dtype uint8; refused "create at bare precomputed://" "names no data source"
nds ls "precomputed://"; refused "ls of bare precomputed://" "names no data source"

# ---- --scale: a second scale (8_8_40, half the size, values 200) beside 4_4_40
nds create '{"driver":"neuroglancer_precomputed","kvstore":"file://'"$W"'/vol/","create":true,"open":true,
 "scale_metadata":{"size":[8,8,4],"chunk_size":[4,4,2],"encoding":"raw","resolution":[8,8,80]}}'
succeeded "add a scale 8_8_80"
python3 -c "import sys; sys.stdout.buffer.write(bytes([200]) * (8 * 8 * 4))" >"$T/s1.bin"
nds write "precomputed://file://$W/vol" --scale 1 --raw -i "$T/s1.bin"; succeeded "write --scale 1"
nds info "precomputed://file://$W/vol"; succeeded "info of the two scales"
expect_out "scales:      2" "info counts both scales"
expect_out "* 0  4_4_40  size [16, 16, 8]  offset [0, 0, 0]  resolution [4, 4, 40]  chunk [8, 8, 8]  raw  unsharded" "info lists scale 0"
expect_out "  1  8_8_80  size [8, 8, 4]    offset [0, 0, 0]  resolution [8, 8, 80]  chunk [4, 4, 2]  raw  unsharded" "info lists scale 1"
for s in 1 8_8_80 8,8,80 '[8, 8, 80]'; do
    nds read "precomputed://file://$W/vol" --scale "$s" --region '[7, 7, 3, 0]'; succeeded "read --scale $s"
    check '[ "$OUT" = 200 ]' "read --scale $s reads scale 1 (got '$OUT')"
    nds info "file://$W/vol|precomputed:" --scale "$s"; succeeded "info --scale $s"
    expect_out "shape:       [8, 8, 4, 1]" "info --scale $s shows scale 1's shape"
    expect_out "* 1  8_8_80" "info --scale $s marks scale 1"
done
nds read "precomputed://file://$W/vol" --scale 0 --region '[3, 4, 5, 0]'; succeeded "read --scale 0"
expect_out "$(( ((3 * 16 + 4) * 8 + 5) % 251 ))" "scale 0 kept its values after the write to scale 1"
nds verify "file://$W/vol" --scale 8_8_80; succeeded "verify --scale"
expect_out "checked 8 stored chunks" "verify --scale checks scale 1's 8 chunks"
nds verify "file://$W/vol"; succeeded "verify, scale 0"
expect_out "checked 4 stored chunks" "verify without --scale checks scale 0's 4 chunks"
nds attrs "file://$W/vol" --scale 1; succeeded "attrs --scale"
nds cp "precomputed://file://$W/vol" "zarr3://file://$T/s1copy" --scale 8,8,80; succeeded "cp --scale"
nds info "file://$T/s1copy"; succeeded "info of the copy of scale 1"
expect_out "shape:       [8, 8, 4, 1]" "cp --scale copies scale 1"
nds read "file://$T/s1copy" --region '[0, 0, 0, 0]'
check '[ "$OUT" = 200 ]' "the copy holds scale 1's values"

# OME-Zarr multiscale groups: zarr v3 (OME-Zarr 0.5, "ome" in zarr.json's attributes) and zarr v2
# (0.4, .zattrs): a dataset by index, path or its "scale" transformation.
for v in 3 2; do
    G="$W/ome$v.zarr"
    fmt=$([ $v = 3 ] && echo zarr3 || echo zarr)
    nds create "file://$G/s0|$fmt:" --shape 8,8 --chunks 4,4 --dtype uint8; succeeded "create s0 (v$v)"
    nds create "file://$G/s1|$fmt:" --shape 4,4 --chunks 4,4 --dtype uint8; succeeded "create s1 (v$v)"
    python3 -c "import sys; sys.stdout.buffer.write(bytes([77]) * 16)" >"$T/s1.u8"
    nds write "file://$G/s1|$fmt:" --raw -i "$T/s1.u8"; succeeded "write s1 (v$v)"
    ms='[{"axes":[{"name":"y","type":"space"},{"name":"x","type":"space"}],"datasets":[
      {"path":"s0","coordinateTransformations":[{"type":"scale","scale":[1.0,1.0]}]},
      {"path":"s1","coordinateTransformations":[{"type":"scale","scale":[2.0,2.0]}]}]}]'
    if [ $v = 3 ]; then
        echo '{"zarr_format":3,"node_type":"group","attributes":{"ome":{"version":"0.5","multiscales":'"$ms"'}}}' >"$G/zarr.json"
    else
        echo '{"zarr_format":2}' >"$G/.zgroup"
        echo '{"multiscales":'"$ms"'}' >"$G/.zattrs"
    fi
    for s in 1 s1 2,2 '[2, 2]'; do
        nds read "file://$G" --scale "$s" --region '[3, 3]'; succeeded "read OME-Zarr v$v --scale $s"
        check '[ "$OUT" = 77 ]' "OME-Zarr v$v --scale $s reads dataset s1 (got '$OUT')"
    done
    nds info "zarr://file://$G" --scale 0; succeeded "info zarr:// of an OME-Zarr v$v group --scale 0"
    expect_out "shape:       [8, 8]" "OME-Zarr v$v --scale 0 is s0"
    nds info "file://$G" --scale 2,2,2
    refused "OME-Zarr v$v --scale of no dataset" "its scales: 0 (s0, resolution 1,1), 1 (s1, resolution 2,2)"
    nds info "file://$G"; refused "OME-Zarr v$v group without --scale" "no array at"
    nds info "n5://file://$G" --scale 1; refused "OME-Zarr v$v group through n5://" "n5"
done
# A dataset path that climbs out of the group's store is refused, not followed.
mkdir -p "$W/climb.zarr"
echo '{"zarr_format":3,"node_type":"group","attributes":{"multiscales":[{"datasets":[{"path":"../../../etc"}]}]}}' >"$W/climb.zarr/zarr.json"
nds info "file://$W/climb.zarr" --scale 0; refused "OME-Zarr dataset path climbing out" ".."
# Hostile members: nulls and wrong types where strings, objects and arrays belong.
mkdir -p "$W/odd.zarr"
echo '{"zarr_format":3,"node_type":"group","attributes":{"multiscales":[{"datasets":[
 {"path":null,"coordinateTransformations":[{"type":null},{"type":"scale","scale":null}]},
 {"path":"s1","coordinateTransformations":[null,7,{"type":"scale","scale":["a",{}]}]},
 7, null]}]}}' >"$W/odd.zarr/zarr.json"
for s in 0 1 s1 2,2 1,1 3; do
    nds info "file://$W/odd.zarr" --scale "$s"; refused "hostile OME-Zarr metadata, --scale $s"
done
nds info "file://$W/odd.zarr" --scale s9; refused "hostile OME-Zarr metadata, --scale s9"
expect_err "its scales: 0 (?, resolution none), 1 (s1, resolution none), 2 (?, resolution none), 3 (?, resolution none)" \
    "hostile datasets listed as they are"
# "ome": null is no OME-Zarr 0.5 member: the 0.4 "multiscales" beside it are used.
mkdir -p "$W/nullome.zarr"
cp -r "$W/ome3.zarr/s1" "$W/nullome.zarr/s1"
echo '{"zarr_format":3,"node_type":"group","attributes":{"ome":null,"multiscales":[{"datasets":[
 {"path":"s1","coordinateTransformations":[{"type":"scale","scale":[2,2]}]}]}]}}' >"$W/nullome.zarr/zarr.json"
nds read "file://$W/nullome.zarr" --scale 2,2 --region '[0, 0]'; succeeded "\"ome\": null beside multiscales"
check '[ "$OUT" = 77 ]' "\"ome\": null: dataset s1 read (got '$OUT')"
# A group whose multiscales has no datasets is no multiscale group: the open's own error.
mkdir -p "$W/empty.zarr"
echo '{"zarr_format":3,"node_type":"group","attributes":{"ome":{"multiscales":[{}]}}}' >"$W/empty.zarr/zarr.json"
nds info "file://$W/empty.zarr" --scale 0; refused "group without datasets" "describes a group"

# Unknown scales list the volume's; other formats are refused; an empty --scale is an error.
for s in 2 99999999999999999999999 16_16_160 8,8 8,8,81 'x,y,z' -1; do
    nds read "file://$W/vol" --scale "$s"
    refused "read --scale $s" "its scales: 0 (4_4_40, resolution 4,4,40), 1 (8_8_80, resolution 8,8,80)"
done
nds info "file://$W/vol" --scale ''; refused "empty --scale" "--scale is empty"
for cmd in read info verify attrs; do
    nds $cmd "file://$W/z3" --scale 0; refused "$cmd --scale of zarr v3" "only neuroglancer precomputed volumes and OME-Zarr multiscale groups have scales"
done
nds write "file://$W/n5" --scale 0 --raw -i "$T/r.bin"; refused "write --scale of N5" "is a n5 array"
nds cp "file://$W/z2" "file://$T/never" --scale 0; refused "cp --scale of zarr v2" "only neuroglancer precomputed"
check '[ ! -e "$T/never" ]' "a refused cp --scale creates nothing"
nds resize "file://$W/vol" --scale 0 --shape 4,4,4,1
check '[ "$RC" -eq 2 ]' "resize takes no --scale (precomputed volumes cannot be resized)"

# Over HTTP, as neuroglancer reads it: precomputed://http://..., zarr://http://...
cat >"$T/serve.py" <<'EOF'
import functools, http.server, sys
root, portfile = sys.argv[1], sys.argv[2]
class H(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(H, directory=root))
open(portfile, "w").write(str(srv.server_address[1]))
srv.serve_forever()
EOF
timeout 120 python3 "$T/serve.py" "$W" "$T/port" &
SERVER=$!
on_exit "kill $SERVER 2>/dev/null; wait $SERVER 2>/dev/null"
for _ in $(seq 50); do [ -s "$T/port" ] && break; sleep 0.1; done
P=$(cat "$T/port")
nds info "precomputed://http://127.0.0.1:$P/vol"; succeeded "info precomputed://http://"
expect_out "format:      neuroglancer_precomputed" "precomputed://http:// opens the volume"
expect_out "4_4_40  size [16, 16, 8]  offset [0, 0, 0]  resolution [4, 4, 40]" "info lists the scale's resolution"
nds read "precomputed://http://127.0.0.1:$P/vol" --region '[3, 4, 5, 0]'; succeeded "read precomputed://http://"
expect_out "$(( ((3 * 16 + 4) * 8 + 5) % 251 ))" "the value read over http"
nds info "zarr://http://127.0.0.1:$P/z3"; succeeded "info zarr://http:// (zarr v3)"
expect_out "format:      zarr3" "zarr://http:// detects zarr v3"
nds info "zarr://http://127.0.0.1:$P/z2"; succeeded "info zarr://http:// (zarr v2)"
expect_out "format:      zarr" "zarr://http:// detects zarr v2"
nds info "n5://http://127.0.0.1:$P/n5"; succeeded "info n5://http://"
nds read "precomputed://http://127.0.0.1:$P/vol" --scale 8_8_80 --region '[1, 2, 3, 0]'
succeeded "read --scale over http"
check '[ "$OUT" = 200 ]' "read --scale over http reads scale 1"
nds info "precomputed://http://127.0.0.1:$P/vol" --scale 1; succeeded "info --scale over http"
expect_out "* 1  8_8_80" "info --scale over http marks scale 1"
finish
