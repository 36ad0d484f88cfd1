#!/usr/bin/env bash
# Puts MXNet 1.9.1's engine library where bench_mxnet looks for it:
# BUILD/peers/mxnet/mxnet/libmxnet.so, with the two libraries the wheel bundles beside it
# (libmxnet.so finds them through its RPATH $ORIGIN). Source: the mxnet==1.9.1 wheel from PyPI,
# fetched with pip; no Python package is installed, the wheel is only unzipped.
# Usage: bench/fetch_mxnet.sh BUILD
#
# Never fails the caller: without the library, bench_mxnet prints SKIP lines and the suite goes on.
# Quiet when the library is already there. Needs python3 with pip (tools/install-bench-deps.sh
# installs python3-pip) and an x86_64 Linux (the only wheel MXNet published for Linux).
set -uo pipefail

build=${1:-build}
dest=$build/peers/mxnet
[ -f "$dest/mxnet/libmxnet.so" ] && exit 0

say() { echo "fetch_mxnet: $*" >&2; }

if ! python3 -m pip --version >/dev/null 2>&1; then
  say "python3 -m pip is not available; bench_mxnet will be skipped"
  exit 0
fi
mkdir -p "$dest" || exit 0
say "downloading mxnet==1.9.1 (about 50 MB) into $dest"
if ! python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$dest" mxnet==1.9.1; then
  say "pip download failed; bench_mxnet will be skipped"
  exit 0
fi
wheel=$(ls "$dest"/mxnet-1.9.1-*.whl 2>/dev/null | head -1)
if [ -z "$wheel" ]; then
  say "no mxnet 1.9.1 wheel in $dest after pip download; bench_mxnet will be skipped"
  exit 0
fi

# Unzip only the shared libraries (the wheel also holds Python code and headers, unused here),
# into a scratch folder first so that an interrupted run never leaves a half-written library.
tmp="$dest/unpack.$$"
rm -rf "$tmp"
if ! python3 - "$wheel" "$tmp" <<'EOF'; then
import sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    libs = [n for n in z.namelist() if n.startswith("mxnet/") and n.count("/") == 1 and ".so" in n]
    if "mxnet/libmxnet.so" not in libs:
        sys.exit("the wheel has no mxnet/libmxnet.so")
    for name in libs:
        z.extract(name, out)
EOF
  say "unzipping $wheel failed; bench_mxnet will be skipped"
  rm -rf "$tmp"
  exit 0
fi
rm -rf "$dest/mxnet"
mv "$tmp/mxnet" "$dest/mxnet" && rm -rf "$tmp" "$wheel"
say "ready: $dest/mxnet/libmxnet.so"
exit 0
