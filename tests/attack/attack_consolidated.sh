#!/usr/bin/env bash
# Consolidated metadata (issue 20) through the command line: `group consolidate` writes zarr v2
# .zmetadata and zarr v3 inline consolidated_metadata; `ls` and `info` use them (ls lists from the
# copy in one read; info opens an array from it), say when a copy is stale, and name malformed
# copies (not an object, wrong format number, entries of the wrong type, hostile paths, deep
# nesting, many entries) without crashing. Over a local HTTP server (127.0.0.1, stdlib, stopped on
# exit) the requests are counted: ls of a 100-array hierarchy is one request, info of an array
# under its consolidated group two (its parent's miss, the root's copy) instead of six.
source "$(dirname "$0")/attack_lib.sh"
command -v python3 >/dev/null || { echo "SKIP: python3 needed to write hierarchies"; finish; exit; }

# hierarchy DIR N: a zarr v2 group with N uint16 arrays g<i/10>/a<i> (shape [4, i+1]) under
# groups g<k>, each with attributes {"index": i}.
hierarchy() {
    python3 - "$T/$1" "$2" <<'EOF'
import json, os, sys
root, n = sys.argv[1], int(sys.argv[2])
def put(path, doc):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        json.dump(doc, f)
put(root + '/.zgroup', {"zarr_format": 2})
for i in range(n):
    d = '%s/g%d/a%d' % (root, i // 10, i)
    put('%s/g%d/.zgroup' % (root, i // 10), {"zarr_format": 2})
    put(d + '/.zarray', {"zarr_format": 2, "shape": [4, i + 1], "chunks": [4, 4], "dtype": "<u2",
                         "compressor": None, "fill_value": 0, "order": "C", "filters": None})
    put(d + '/.zattrs', {"index": i})
EOF
}

hierarchy h 12
nds group consolidate "$T/h"; succeeded "group consolidate (zarr)"
expect_out "consolidated 27 metadata documents" "group consolidate counts the documents"
check '[ -f "$T/h/.zmetadata" ]' ".zmetadata written"

nds ls "$T/h" --consolidated; succeeded "ls --consolidated"
expect_out "consolidated metadata: file://$T/h/.zmetadata" "ls names the copy it listed"
expect_out "g1/a11/.zarray  (zarr: uint16 [4, 12], chunks [4, 4], raw)" "ls summarises an array from the copy"
check '! grep -q "a0/0.0" <<<"$OUT"' "ls from the copy lists no chunk keys"

nds info "$T/h/g1/a11" --consolidated; succeeded "info --consolidated"
expect_out '"index": 11' "info shows attributes from the copy"

# A change below the group leaves the copy stale: ls (listing keys) says so for that array only.
nds resize "$T/h/g0/a3" --shape 4,40; succeeded "resize an array under a consolidated group"
nds ls "$T/h"; succeeded "ls (keys) of a hierarchy with a stale copy"
check 'grep "g0/a3/.zarray" <<<"$OUT" | grep -q "consolidated copy differs"' "ls flags the stale array"
check '! grep "g0/a4/.zarray" <<<"$OUT" | grep -q "consolidated"' "ls leaves current arrays alone"
nds info "$T/h/g0/a3" --consolidated; succeeded "info --consolidated of a stale array"
expect_out "shape:       [4, 4]" "info --consolidated shows the snapshot (documented)"
nds info "$T/h/g0/a3"; succeeded "info of a stale array"
expect_out "shape:       [4, 40]" "info without --consolidated reads the array's own"
expect_out "consolidated: an ancestor group's consolidated metadata describes this array differently" \
    "info says the copy is stale"
nds info "$T/h/g0/a4"; succeeded "info of a current array"
check '! grep -q "^consolidated:" <<<"$OUT"' "info of a current array says nothing of the copy"
nds resize "{\"kvstore\":\"$T/h/g0/a3\",\"driver\":\"zarr\",\"consolidated\":true}" --shape 4,50
refused "resize through a consolidated snapshot" "read-only snapshot"
nds group consolidate "$T/h"; succeeded "re-consolidate"
nds ls "$T/h"; succeeded "ls after re-consolidating"
check '! grep -q "consolidated copy differs" <<<"$OUT"' "no stale flag after re-consolidating"

# zarr-python 3 style inline copy (hand-written: zarr-python 3 is not installed).
nds group "$T/v3" --format zarr3; succeeded "zarr3 group"
nds create "$T/v3/x|zarr3:" --shape 6 --dtype int16; succeeded "zarr3 array"
nds group consolidate "$T/v3"; succeeded "group consolidate (zarr3, detected)"
expect_out "zarr3: inline in zarr.json" "zarr3 consolidates inline"
check 'grep -q "\"consolidated_metadata\"" "$T/v3/zarr.json"' "zarr.json has consolidated_metadata"
nds ls "$T/v3" -c; succeeded "ls -c (zarr3)"
expect_out "x/zarr.json  (zarr3: int16 [6]" "ls lists the zarr3 array from the copy"

# The hand-written zarr3 fixture: listed from its copy; nothing stale (each own zarr.json equals it).
FIX="$ATTACK_DIR/../fixtures/zarr3_consolidated_hand/h.zarr"
nds ls "$FIX" -c; succeeded "ls -c of the hand-written zarr3 fixture"
expect_out "g/x/zarr.json  (zarr3: uint16 [6], chunks [4], raw)" "fixture array g/x listed from the copy"
expect_out "g/y/zarr.json  (zarr3: float32 [2, 3], chunks [2, 3], raw)" "fixture array g/y listed from the copy"
nds ls "$FIX"; succeeded "ls of the fixture's keys"
check '! grep -q "consolidated copy differs" <<<"$OUT"' "the fixture's copy matches every array"
nds info "$FIX/g/x" -c; succeeded "info -c of the fixture's g/x"
expect_out '"unit": "s"' "fixture attributes from the copy"

# Refusals.
nds group consolidate "$T/h/g0/a3"; refused "consolidate an array" ".zgroup not found"
nds group consolidate "$T/nothing"; refused "consolidate nothing" "no group"
nds info "{\"kvstore\":\"$T/h/g0/a3\",\"driver\":\"n5\",\"consolidated\":true}"
refused "consolidated n5" "no consolidated metadata"

# Malformed .zmetadata: named, never a crash.
bad() { # bad DESC TEXT-IN-MESSAGE DOCUMENT
    printf '%s' "$3" >"$T/h/.zmetadata"
    nds ls "$T/h" -c; refused "ls -c: $1" "$2"
    nds info "$T/h/g0/a3" -c; refused "info -c: $1" "$2"
}
bad "not an object" ".zmetadata" '[1, 2]'
bad "wrong format number" "zarr_consolidated_format" '{"zarr_consolidated_format": 2, "metadata": {}}'
bad "metadata not an object" '"metadata" must be an object' '{"zarr_consolidated_format": 1, "metadata": 7}'
bad "entry of the wrong type" 'entry "g0/a3/.zarray" must be an object' \
    '{"zarr_consolidated_format": 1, "metadata": {"g0/a3/.zarray": "x"}}'
bad "entry outside the group" '../a/.zarray' \
    '{"zarr_consolidated_format": 1, "metadata": {"../a/.zarray": {}}}'
bad "truncated" ".zmetadata" '{"zarr_consolidated_format": 1, "metadata": {'
python3 -c "print('{\"zarr_consolidated_format\": 1, \"metadata\": ' + '[' * 100000 + ']' * 100000 + '}')" >"$T/deep.json"
bad "nested 100000 deep" ".zmetadata" "$(cat "$T/deep.json")"
# An entry that does not load: ls names it on its line; info falls back to the array's own.
printf '%s' '{"zarr_consolidated_format": 1, "metadata": {".zgroup": {"zarr_format": 2}, "g0/a3/.zarray": {"zarr_format": 2, "shape": "x"}}}' >"$T/h/.zmetadata"
nds ls "$T/h" -c; succeeded "ls -c with a bad entry"
check 'grep "g0/a3/.zarray" <<<"$OUT" | grep -q "cannot open"' "ls names the entry that does not open"
nds info "$T/h/g0/a3" -c; succeeded "info -c falls back to the array's own metadata"
expect_out "shape:       [4, 40]" "the fallback read the array's own .zarray"
# Many entries: listed, bounded time.
python3 -c "
import json
print(json.dumps({'zarr_consolidated_format': 1, 'metadata': {'g%d/.zgroup' % i: {'zarr_format': 2} for i in range(20000)}}))" >"$T/h/.zmetadata"
nds ls "$T/h" -c; succeeded "ls -c of 20000 entries"
expect_out "20000 entries from consolidated metadata" "all 20000 entries listed"
nds ls "$T/h"; succeeded "ls (keys) with a copy of the wrong hierarchy"
check 'grep "g0/a3/.zarray" <<<"$OUT" | grep -q "not in the consolidated metadata"' "ls says the array is not in the copy"

# Requests over HTTP, counted by a stdlib server on 127.0.0.1 (stopped on exit, 120 s at most).
hierarchy web/h.zarr 100
nds group consolidate "$T/web/h.zarr"; succeeded "consolidate 100 arrays"
cat >"$T/count_server.py" <<'EOF'
import functools, http.server, sys, threading
root, portfile, logfile = sys.argv[1:4]
class H(http.server.SimpleHTTPRequestHandler):
    def log_request(self, code='-', size='-'):
        with open(logfile, 'a') as f:
            f.write('%s %s %s\n' % (self.command, self.path, code))
    def log_error(self, *a):
        pass
srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), functools.partial(H, directory=root))
with open(portfile, 'w') as f:
    f.write(str(srv.server_address[1]))
threading.Timer(120, srv.shutdown).start()
srv.serve_forever()
EOF
python3 "$T/count_server.py" "$T/web" "$T/port" "$T/log" &
server=$!
on_exit "kill $server 2>/dev/null; wait $server 2>/dev/null"
for _ in $(seq 50); do [ -s "$T/port" ] && break; sleep 0.1; done
U="http://127.0.0.1:$(cat "$T/port")/h.zarr/"
requests() { if [ -f "$T/log" ]; then grep -c . "$T/log"; else echo 0; fi; }

rm -f "$T/log"; nds ls "$U" --no-consolidated; refused "ls over http without the copy" "cannot list"
rm -f "$T/log"; nds ls "$U"; succeeded "ls over http (consolidated by default)"
n=$(requests); echo "ls of 100 arrays over http: $n request(s)"
check '[ "$n" -eq 1 ]' "ls over http is one request (was: cannot list)"
expect_out "g9/a99/.zarray  (zarr: uint16 [4, 100]" "ls over http summarises the arrays"
rm -f "$T/log"; nds info "${U}g3/a31|zarr:" --no-consolidated; succeeded "info over http, own metadata"
own=$(requests)
rm -f "$T/log"; nds info "${U}g3/a31|zarr:"; succeeded "info over http (consolidated by default)"
snap=$(requests); echo "info of one array over http: $own requests own metadata, $snap consolidated"
expect_out '"index": 31' "info over http shows attributes from the copy"
check '[ "$snap" -eq 2 ] && [ "$own" -gt "$snap" ]' "info over http: 2 requests from the copy ($snap), fewer than own ($own)"
nds group consolidate "$U"; refused "group consolidate over http" "cannot list"

finish
