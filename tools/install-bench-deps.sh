#!/usr/bin/env bash
# Installs the peers that `make bench` compares ordo with, on Debian 12, when they are missing.
# Usage: tools/install-bench-deps.sh [BUILD]   (BUILD: where peers fetched outside apt may go)
#
# Unlike tools/install-deps.sh this never fails the caller: a peer that cannot be installed is
# reported here and then SKIPped by its benchmark program, and the rest of the suite still runs.
# Runs as root (as on CI); with sudo when not root and sudo exists. Quiet when all is present.
set -uo pipefail

build=${1:-build}
# MXNet (bench_mxnet) comes from PyPI, not apt: bench/fetch_mxnet.sh runs on the way out, on
# every exit path, so that on a fresh machine pip has been installed below by then.
trap 'bash "$(dirname "$0")/../bench/fetch_mxnet.sh" "$build"' EXIT

# One line per peer: the Debian package and the file that proves it is installed (checking a
# file rather than dpkg's database also accepts a peer installed some other way).
need=()
want() { # want PACKAGE FILE...: PACKAGE is needed unless one of the files exists
  local pkg=$1
  shift
  for f in "$@"; do [ -e "$f" ] && return 0; done
  need+=("$pkg")
}
want clang /usr/bin/clang                                   # builds bench_libomp (OpenMP, LLVM)
want libomp-dev /usr/lib/llvm-*/lib/libomp.so               # LLVM's OpenMP runtime
want libstarpu-dev /usr/include/starpu/1.3/starpu.h         # StarPU 1.3 (bench_starpu)
want libtbb-dev /usr/include/oneapi/tbb.h                   # oneTBB 2021 (bench_tbb)
want libopenblas-dev /usr/include/x86_64-linux-gnu/cblas.h  # BLAS kernels of the Cholesky peers
want libgomp1 /usr/lib/x86_64-linux-gnu/libgomp.so.1          # NEEDED by MXNet's libmxnet.so
want libquadmath0 /usr/lib/x86_64-linux-gnu/libquadmath.so.0  # NEEDED by the wheel's libgfortran
python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip) # fetches the MXNet wheel
[ ${#need[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" != 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "install-bench-deps: not root and no sudo: cannot install ${need[*]}" >&2
    exit 0
  fi
  sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
echo "install-bench-deps: installing ${need[*]}" >&2
$sudo apt-get update -qq || echo "install-bench-deps: apt-get update failed" >&2
if ! $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; then
  # One missing package must not keep the others out: retry them one at a time.
  for pkg in "${need[@]}"; do
    $sudo apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null ||
      echo "install-bench-deps: could not install $pkg; its benchmark will be skipped" >&2
  done
fi
exit 0
