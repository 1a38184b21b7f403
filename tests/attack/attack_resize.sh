#!/usr/bin/env bash
# Resize against what a racing writer, or a crash between a shrink's deletes and its metadata
# write, leaves behind: chunks beyond the shape and edge chunks with data beyond it. Growing must
# never expose any of it: every element the grow adds reads as the fill value. And `ndstore write`
# processes racing `ndstore resize` processes either succeed with their data in place or fail
# with a clear error.
source "$(dirname "$0")/attack_lib.sh"

# raw_of N VALUE: N int32 elements of VALUE.
raw_of() { python3 -c "import struct,sys; sys.stdout.buffer.write(struct.pack('<%di' % $1, *[$2] * $1))"; }
# all_equal FILE VALUE FIRST COUNT: the int32 elements [FIRST, FIRST + COUNT) of FILE all hold VALUE.
all_equal() {
    python3 -c "
import struct,sys
d = open('$1','rb').read(); v = struct.unpack('<%di' % (len(d) // 4), d)
sys.exit(0 if all(x == $2 for x in v[$3:$3 + $4]) else 1)"
}

# A chunk left beyond the shape (by a writer racing a shrink): a grow must not expose it.
A="$T/a.zarr"
nds create "$A" --shape 8,8 --chunks 4,4 --dtype int32 --codec none --fill 0
succeeded "create 8x8"
raw_of 64 7 >"$T/sevens.raw"
nds write "$A" -r '[:, :]' -i "$T/sevens.raw" --raw
succeeded "write 7 everywhere"
cp "$A/1.1" "$T/stale.1.1"
nds resize "$A" --shape 4,4
succeeded "shrink to 4x4"
check '[ ! -e "$A/1.1" ]' "the shrink deleted chunk 1.1"
cp "$T/stale.1.1" "$A/1.1" # what a writer with the old shape puts there after the shrink
nds resize "$A" --shape 8,8
succeeded "grow back to 8x8"
nds read "$A" -r '[4:, 4:]' -o "$T/corner.raw" --raw
succeeded "read the grown corner"
check 'all_equal "$T/corner.raw" 0 0 16' "the grown corner reads fill, not the stale chunk"

# An edge chunk holding data beyond the shape (a racing writer, or an old ndstore): a grow
# resets that part before exposing it.
B="$T/b.zarr"
nds create "$B" --shape 6,6 --chunks 4,4 --dtype int32 --codec none --fill 0
succeeded "create 6x6"
nds resize "$B" --shape 8,8
nds write "$B" -r '[:, :]' -i "$T/sevens.raw" --raw
succeeded "write 7 over 8x8"
cp "$B/0.1" "$T/edge.0.1"
nds resize "$B" --shape 6,6
succeeded "shrink to 6x6"
cp "$T/edge.0.1" "$B/0.1" # the edge chunk as it was before the shrink cleared its cut part
nds resize "$B" --shape 8,8
succeeded "grow to 8x8"
nds read "$B" -r '[0:4, 6:8]' -o "$T/edge.raw" --raw
succeeded "read the grown columns"
check 'all_equal "$T/edge.raw" 0 0 8' "the grown columns of the edge chunk read fill"
nds read "$B" -r '[0:4, 4:6]' -o "$T/kept.raw" --raw
check 'all_equal "$T/kept.raw" 7 0 8' "the kept part of the edge chunk is intact"

# The same through zarr v3 with sharding off and on (the format keeps its own chunk keys).
C="$T/c.zarr"
nds create "{\"driver\":\"zarr3\",\"kvstore\":\"file://$C/\",\"create\":true,\"metadata\":{\"shape\":[8,8],\"chunk_grid\":{\"name\":\"regular\",\"configuration\":{\"chunk_shape\":[4,4]}},\"data_type\":\"int32\",\"fill_value\":0}}"
succeeded "create zarr3 8x8"
nds write "file://$C|zarr3:" -r '[:, :]' -i "$T/sevens.raw" --raw
succeeded "write zarr3"
stale=$(cd "$C" && find . -path '*c/1/1' | head -1)
check '[ -n "$stale" ]' "zarr3 chunk c/1/1 exists"
[ -n "$stale" ] && cp "$C/$stale" "$T/z.stale"
nds resize "file://$C|zarr3:" --shape 4,4
succeeded "shrink zarr3"
[ -n "$stale" ] && mkdir -p "$(dirname "$C/$stale")" && cp "$T/z.stale" "$C/$stale"
nds resize "file://$C|zarr3:" --shape 8,8
succeeded "grow zarr3"
nds read "file://$C|zarr3:" -r '[4:, 4:]' -o "$T/zc.raw" --raw
check 'all_equal "$T/zc.raw" 0 0 16' "zarr3: the grown corner reads fill"

# Processes racing: two writers write rows of [4, 16) with their own values while a resizer shrinks
# to 4 rows and grows back. A write that exits 0 must have its values in place unless a later resize
# began before the check read it; so the check is done by the writer itself right after, and a
# missing value counts only when no resize started in between (the resizer logs its starts).
R="$T/r.zarr"
nds create "$R" --shape 16,8 --chunks 2,8 --dtype int32 --codec none --fill 0
succeeded "create 16x8"
: >"$T/resizes"
(
    for i in $(seq 1 40); do # each resize logged as "start end"; a pause after each grow
        for shape in 4,8 16,8; do
            t=$(date +%s%N)
            timeout 60 "$BIN" resize "$R" --shape $shape >/dev/null 2>&1
            echo "$t $(date +%s%N)" >>"$T/resizes"
        done
        sleep 0.15
    done
) &
resizer=$!
on_exit "kill $resizer 2>/dev/null"
race_writer() { # race_writer ID FIRST END: rows [FIRST, END) until the resizer is gone; logs "ID rc start end ok"
    local id=$1 rows="[$2:$3, :]" n=0
    raw_of $((($3 - $2) * 8)) "$id" >"$T/w$id.raw"
    while kill -0 "$resizer" 2>/dev/null && [ $n -lt 400 ]; do
        n=$((n + 1))
        local t0 t1 rc ok=-
        t0=$(date +%s%N)
        timeout 60 "$BIN" write "$R" -r "$rows" -i "$T/w$id.raw" --raw >/dev/null 2>"$T/w$id.err"
        rc=$?
        if [ $rc -eq 0 ] && timeout 60 "$BIN" read "$R" -r "$rows" -o "$T/w$id.got" --raw 2>/dev/null; then
            t1=$(date +%s%N)
            python3 -c "
import struct,sys
d = open('$T/w$id.got','rb').read(); v = struct.unpack('<%di' % (len(d) // 4), d)
sys.exit(0 if all(x == $id for x in v) else 1)" && ok=1 || ok=0
        else
            t1=$(date +%s%N)
            [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "ndstore: " "$T/w$id.err" && ok=e
        fi
        echo "$id $rc $t0 $t1 $ok" >>"$T/writes"
    done
}
: >"$T/writes"
# Each writer has rows of its own (so the other never overwrites them), and the two share the
# chunk of rows 8 and 9: a lost update inside that chunk counts as a loss too.
race_writer 101 4 9 &
w1=$!
race_writer 202 9 16 &
w2=$!
wait $w1 $w2
wait $resizer
# Judge: a successful write whose value was gone at once, with no resize running in between (a
# shrink clears the rows it cuts before it publishes the new shape, so a read in between sees them as
# fill: a resize is judged by when its process ran, not when it started, which lags the log by the
# process start). Writes that fall between resizes (the pauses) must never lose anything.
python3 - "$T/writes" "$T/resizes" >"$T/judge" <<'EOF'
import sys
runs = [tuple(int(x) for x in line.split()) for line in open(sys.argv[2]) if line.strip()]
lost = ok = conflicts = unclear = clear = 0
for line in open(sys.argv[1]):
    wid, rc, t0, t1, res = line.split()
    racing = any(a <= int(t1) and b >= int(t0) for a, b in runs)
    clear += rc == "0" and not racing
    if rc == "0" and res == "0" and not racing:
        lost += 1
    ok += rc == "0"
    conflicts += rc != "0" and res == "e"
    unclear += rc != "0" and res != "e"
print(lost, ok, conflicts, unclear, clear)
EOF
read -r lost okw conflicts unclear clear <"$T/judge"
echo "resize race (processes): $okw writes succeeded ($clear between resizes), $conflicts refused with a message, $unclear other"
check '[ "$clear" -ge 10 ]' "at least 10 successful writes fell between resizes ($clear): the judge judges something"
check '[ "$lost" -eq 0 ]' "no write reported success while its data was lost ($lost were)"
check '[ "$unclear" -eq 0 ]' "every failed write ended with one clear error"
check '[ "$okw" -gt 0 ]' "some writes succeeded"
nds resize "$R" --shape 4,8
nds resize "$R" --shape 16,8
nds read "$R" -r '[4:16, :]' -o "$T/final.raw" --raw
check 'all_equal "$T/final.raw" 0 0 96' "after a last shrink and grow, no stale element"

finish
