#!/bin/bash
# Lays out a one-replica Swift all-in-one with s3api under $D (default /tmp/swift-s3api). The packages come
# from scripts/install-s3-servers.sh (run by tests/integration/s3_test.sh before this).
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
D=${D:-/tmp/swift-s3api}
rm -rf "$D"; mkdir -p "$D/srv/d1" "$D/logs"
for f in "$HERE"/*.conf.in; do sed "s|@D@|$D|g" "$f" > "$D/$(basename "${f%.in}")"; done
cd "$D"
for r in account:6202 container:6201 object:6200; do n=${r%%:*}; p=${r##*:}
  swift-ring-builder $n.builder create 6 1 1
  swift-ring-builder $n.builder add r1z1-127.0.0.1:$p/d1 100
  swift-ring-builder $n.builder rebalance
done
