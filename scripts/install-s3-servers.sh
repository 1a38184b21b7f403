#!/usr/bin/env bash
# Installs the S3-compatible servers the S3 integration tests run on 127.0.0.1: a one-node Ceph (ceph-mon,
# ceph-osd, radosgw) and OpenStack Swift with s3api, plus python3-boto3/botocore (the SigV4 reference signer
# and the probe scripts). Idempotent: packages already present are skipped and apt-get runs only when
# something is missing. Debian 12; as root, or through sudo.
#
# Usage: scripts/install-s3-servers.sh [ceph|swift|all]   (default all)
# Measured on the 2-core project machine (fresh, apt lists current): ceph ~2-3 min, swift ~40 s; a no-op
# when everything is installed (< 1 s).
set -euo pipefail

which=${1:-all}
packages=(python3 python3-boto3 python3-botocore curl)
case "$which" in
  ceph|all) packages+=(ceph-mon ceph-osd radosgw ceph-common) ;;&
  swift|all) packages+=(swift swift-proxy swift-object swift-container swift-account python3-swift) ;;
  ceph) ;;
  *) echo "usage: $0 [ceph|swift|all]" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-s3-servers: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
start=$SECONDS
$sudo apt-get update -qq
# Debian's swift packages start their own services when installed: keep them from starting here (the tests
# start what they need on 127.0.0.1 and stop it afterwards).
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
  $sudo chmod +x "$policy"
  made_policy=1
fi
rc=0
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || rc=$?
[ $made_policy = 1 ] && $sudo rm -f "$policy"
echo "install-s3-servers: done in $((SECONDS - start)) s (rc $rc)" >&2
exit $rc
