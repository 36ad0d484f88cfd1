#!/usr/bin/env bash
# Copies what tests/run_gpu_checks.sh runs out of BUILD_DIR into DEST (the build's layout, so
# that the programs' RUNPATH $ORIGIN/../src still finds libordo.so), with the libraries of
# Criterion that a machine with a GPU may lack in DEST/lib: a folder small enough to travel to
# such a machine (about 30 MB). There: LD_LIBRARY_PATH=DEST/lib bash tests/run_gpu_checks.sh DEST.
# The CUDA libraries (cudart, cuBLAS, cuSOLVER) are not copied: that machine's toolkit has them.
# Usage: stage_gpu_checks.sh BUILD_DIR DEST
set -euo pipefail
build=${1:?usage: stage_gpu_checks.sh BUILD_DIR DEST}
dest=${2:?usage: stage_gpu_checks.sh BUILD_DIR DEST}
rm -rf "$dest"
mkdir -p "$dest"/{src,tests,examples,bench,lib}
cp -L "$build/src/libordo.so.0" "$dest/src/"
for prog in tests/ordo_tests tests/ordo_gpu_kernels_test tests/ordo_gpu_sim_test \
  tests/ordo_no_gpu_probe examples/gpu_cholesky bench/gpu_launch; do
  if [[ -x $build/$prog ]]; then cp "$build/$prog" "$dest/$prog"; else echo "not built: $prog"; fi
done
# Every library ordo_tests loads but glibc's, libgcc's, ordo's and CUDA's.
ldd "$build/tests/ordo_tests" | awk '/=> \// { print $3 }' |
  grep -v -E '/(libc|libm|libdl|libpthread|librt|libresolv|libgcc_s|libstdc\+\+|libordo)\.so' |
  while read -r lib; do cp -L "$lib" "$dest/lib/"; done
du -sh "$dest"
