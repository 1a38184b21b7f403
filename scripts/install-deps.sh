#!/usr/bin/env bash
# Installs every Debian package ndstore needs to build and test. Idempotent: packages already present are
# skipped, and apt-get runs only when something is missing. Works as root on a fresh Debian 12; as another
# user it uses sudo when available.
set -euo pipefail

packages=(
  build-essential cmake pkg-config openssl
  liblmdb-dev libzstd-dev libblosc-dev libcurl4-openssl-dev libssl-dev libjson-c-dev
  zlib1g-dev libdeflate-dev liblz4-dev libbz2-dev liblzma-dev libpng-dev libturbojpeg0-dev
  libtiff-dev  # ndstore read -o x.tif (cli/image_out.c)
  check
  python3 python3-numpy python3-zarr python3-numcodecs python3-fsspec
  python3-dev python3-pytest python3-torch  # the Python package (python/): build, tests; torch for ndstore.torch
  python3-pil python3-tifffile  # images_test.sh reads the PNG and TIFF files ndstore writes

  libmicrohttpd-dev  # `ndstore serve` (cli/cmd_serve.c): the HTTP server
  chromium python3-websocket  # the neuroglancer interop test drives headless Chromium over DevTools
  time  # GNU time: the benchmark reads the peak RSS of `ndstore cp` from it
)

# Node.js runs the zarrita interop test (npm installs zarrita from tests/interop/package-lock.json); a
# machine that already has node (e.g. from nodesource) keeps it.
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
