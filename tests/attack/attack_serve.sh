#!/usr/bin/env bash
# `ndstore serve` given hostile arguments: ports outside 0..65535 or not numbers, addresses that are
# names or garbage, one it cannot bind, a port already taken, thread counts out of range, a missing,
# empty or unknown URL. Each is refused with a message naming the argument (exit 2 for usage, 1 for a
# bind or store failure), never a crash, a hang or a server left listening.
source "$(dirname "$0")/attack_lib.sh"

# usage_refused DESC TEXT: exit 2, "ndstore: ..." then "usage: ...", the message containing TEXT.
usage_refused() {
    clean_exit "$1"
    expect_rc 2 "$1"
    check '[[ "$ERR" == "ndstore: "*"usage: ndstore serve"* ]]' "$1: message and usage line"
    expect_err "$2" "$1"
}

mkdir -p "$T/site"
for p in -1 65536 99999999999999999999 abc 80x ""; do
    nds serve "$T/site" --port "$p"; usage_refused "--port '$p'" "--port"
done
for b in localhost "" 999.1.1.1 "127.0.0.1:80" "::1::1" "$(printf 'a%.0s' $(seq 300))"; do
    nds serve "$T/site" --bind "$b" --port 0; usage_refused "--bind '${b:0:20}'" "--bind"
done
for n in 0 -3 257 many; do
    nds serve "$T/site" --threads "$n" --port 0; usage_refused "--threads '$n'" "--threads"
done
nds serve; usage_refused "no URL" "no URL given"
nds serve "$T/site" "$T/other" --port 0; usage_refused "two URLs" "unexpected argument"
nds serve "$T/site" --port; usage_refused "--port without a value" "needs a value"
nds serve "$T/site" --frobnicate; usage_refused "an unknown option" "unknown option"
nds serve "" --port 0; refused "an empty URL" "URL is empty"
nds serve "nosuch://x/" --port 0; refused "an unknown kvstore scheme" "nosuch"

# An address of no interface here (TEST-NET-1, never routed): bind fails, nothing is sent anywhere.
nds serve "$T/site" --bind 192.0.2.1 --port 0; refused "an address of no interface" "cannot listen on 192.0.2.1"

# A port already taken: refused naming it, and the first server is untouched.
"$BIN" serve "$T/site" --port 0 >"$T/first.out" 2>"$T/first.err" &
first=$!
on_exit "kill $first 2>/dev/null; wait $first 2>/dev/null"
for _ in $(seq 200); do [ -s "$T/first.out" ] && break; sleep 0.1; done
url=$(head -n 1 "$T/first.out")
port=${url##*:}
port=${port%/}
check '[[ "$port" =~ ^[0-9]+$ ]]' "the first server prints its port"
nds serve "$T/site" --port "$port"; refused "a port in use" "port $port"
check 'kill -0 "$first"' "the first server still runs"
kill -TERM "$first"
wait "$first"
RC=$?
check '[ "$RC" -eq 0 ]' "the first server stops with exit 0 (got $RC)"

finish
