#!/usr/bin/env bash
# URL pipelines with kvstore adapters (KVURL|ADAPTER:REST|FORMAT:): every command reads one URL the
# same way, through the library's one splitter. The faulty test driver is the adapter (a URL gives it
# no faults, so it passes everything through). Hostile forms (a format or a plain kvstore in the
# middle, unknown names, malformed segments) are refused by every command with one message, and no
# refused URL leaves a file or directory behind.
source "$(dirname "$0")/attack_lib.sh"
export NDS_TEST_DRIVERS=faulty # the faulty test driver: a test build's library registers it when asked

D="file://$T/D/|faulty:|zarr:"
printf '\001\000\002\000\003\000\004\000' >"$T/in.raw"

# ---- one array through the adapter, seen alike by every command ----
nds create "$D" --shape 4,4 --chunks 2,2 --dtype uint16; succeeded "create over an adapter"
check '[ -f "$T/D/.zarray" ]' "create put .zarray in the base directory"
check '[ -z "$(find "$T" -name "*|*")" ]' "no file or directory named after a pipeline segment"
nds write "$D" -r '[0:2, 0:2]' -i "$T/in.raw" --raw; succeeded "write over an adapter"
check '[ -f "$T/D/0.0" ]' "write stored chunk 0.0 in the base directory"
nds read "$D" -r '[0:2, 0:2]'; succeeded "read over an adapter"
expect_out "[[1 2]" "read over an adapter gives what was written"
through="$OUT"
nds read "$T/D" -r '[0:2, 0:2]'; succeeded "read of the base directory"
check '[ "$OUT" = "$through" ]' "the adapter and its base read the same data"
nds info "$D"; succeeded "info over an adapter"
expect_out "file://$T/D/|faulty:" "info names the store by its pipeline URL"
expect_out "shape:       [4, 4]" "info over an adapter"
nds info "file://$T/D/|faulty:"; succeeded "info detects the format through an adapter"
expect_out "format:      zarr" "format detected through an adapter"
nds ls "$D"; succeeded "ls of an array URL over an adapter"
expect_out ".zarray" "ls lists the array's keys"
expect_out "0.0" "ls lists the written chunk"
nds ls "file://$T/D/|faulty:"; succeeded "ls of a kvstore URL with an adapter"
expect_out ".zarray" "ls of the kvstore URL"
nds verify "$D"; succeeded "verify over an adapter"
nds attrs "$D" --set '{"k": 1}'; succeeded "attrs over an adapter"
check '[ -f "$T/D/.zattrs" ]' "attrs wrote .zattrs in the base directory"
nds resize "$D" --shape 6,6; succeeded "resize over an adapter"
nds group "file://$T/G/|faulty:|zarr:" sub --parents; succeeded "group over an adapter"
check '[ -f "$T/G/sub/.zgroup" ] && [ -f "$T/G/.zgroup" ]' "group wrote .zgroup files in the base"
nds checkpoint mark "file://$T/D/|faulty:" step1; succeeded "checkpoint mark over an adapter"
check '[ -f "$T/D/step1.checkpoint.json" ]' "the marker is in the base directory"
nds checkpoint status "file://$T/D/|faulty:|zarr:" step1; succeeded "checkpoint status over an adapter"
nds cp "$D" "file://$T/C/|faulty:sub/|zarr3:"; succeeded "cp from and to adapter URLs"
check '[ -f "$T/C/sub/zarr.json" ]' "cp's destination is under the adapter's path in its base"
check '[ -z "$(find "$T" -name "*|*")" ]' "still no file or directory named after a segment"

# ---- cp's overlap check sees through adapters ----
nds cp "$D" "file://$T/D/|zarr3:"; refused "cp onto the adapter's own base" "is the source"
nds cp "$D" "file://$T/D/x/|faulty:|zarr3:"; refused "cp into the source's base, adapter on top" "inside the source"
nds cp "$D" "file://$T/D/|faulty:x/|zarr3:"; refused "cp under the source's adapter path" "inside the source"
nds cp "$T/D" "file://$T/D/|faulty:|zarr3:"; refused "cp of the base onto its adapter view" "is the source"
nds cp "$T/D" "{\"driver\":\"zarr\",\"kvstore\":{\"driver\":\"faulty\",\"base\":\"file://$T/E/\"},\"path\":\"b\"}"
succeeded "cp to a JSON faulty spec (its location read after the spec is freed was a use after free)"

# ---- hostile pipelines: one message from every command ----
bad="file://$T/B/|zarr:|faulty:|zarr:"
msg="spec url \"$bad\": \"zarr\" is not a kvstore adapter"
nds create "$bad" --shape 4 --dtype uint8; refused "create: a format in the middle" "$msg"
nds write "$bad" -i "$T/in.raw" --raw;    refused "write: a format in the middle" "$msg"
nds read "$bad";                          refused "read: a format in the middle" "$msg"
nds info "$bad";                          refused "info: a format in the middle" "$msg"
nds verify "$bad";                        refused "verify: a format in the middle" "$msg"
nds resize "$bad" --shape 2;              refused "resize: a format in the middle" "$msg"
nds attrs "$bad";                         refused "attrs: a format in the middle" "$msg"
nds ls "$bad";                            refused "ls: a format in the middle" "$msg"
nds group "$bad" g;                       refused "group: a format in the middle" "$msg"
nds checkpoint status "$bad" s;           refused "checkpoint: a format in the middle" "$msg"
nds cp "$T/D" "$bad";                     refused "cp DST: a format in the middle" "$msg"
nds cp "$bad" "$T/out.zarr";              refused "cp SRC: a format in the middle" "$msg"
check '[ ! -e "$T/B" ] && [ ! -e "$T/out.zarr" ]' "refused pipelines create nothing"

nds info "file://$T/D/|memory:|zarr:"; refused "a plain kvstore in the middle" "\"memory\" is not a kvstore adapter"
nds info "file://$T/D/|nosuch:|zarr:"; refused "an unknown adapter" "\"nosuch\" is not a kvstore adapter"
nds ls "file://$T/D/|nosuch:";         refused "ls: an unknown last segment" "\"nosuch\" is neither a kvstore adapter nor a format"
nds create "file://$T/B/|nosuch:" --shape 4; refused "create: an unknown last segment" "\"nosuch\" is neither"
nds info "file://$T/D/|Faulty:|zarr:"; refused "an upper-case segment name" "segment \"|Faulty:\""
nds info "file://$T/D/||zarr:";        refused "an empty segment" "segment \"|\""
nds info "file://$T/D/|faulty";        refused "a segment without ':'" "segment \"|faulty\""
nds info "|faulty:|zarr:";             refused "no kvstore before the pipeline" "no kvstore before"
nds info "file://$T/D/|zarr:x";        refused "text after the format's ':'" "nothing after its ':'"
nds info "file://$T/D/|faulty:../..|zarr:"; refused "an adapter path that climbs above its base" ".."
check '[ ! -e "$T/B" ]' "refused pipelines create nothing"
check '[ -z "$(find "$T" -name "*|*")" ]' "no refused URL left a file named after a segment"

finish
