#!/usr/bin/env bash
# The one libordo.so loads and works where there is no GPU, driver or CUDA toolkit (issue #25):
# cudart is loaded at run time (src/device/cuda_device.cpp), never linked, so the library needs
# no libcudart/libcuda, and a program using it runs with the toolkit's libraries out of the
# loader's path (no LD_LIBRARY_PATH, no ld.so.cache,
# which on these machines lists /usr/local/cuda/lib64). Usage: check_cuda_loading.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: check_cuda_loading.sh BUILD_DIR}
lib="$build/src/libordo.so"
probe="$build/tests/ordo_no_gpu_probe"

needed=$(readelf -d "$lib" | awk '/NEEDED/ { print $5 }' | tr -d '[]')
echo "NEEDED: $(echo $needed)"
if ldd "$lib" | grep -Ei 'libcudart|libcuda\.so'; then
  echo "FAIL: $lib depends on the CUDA runtime or driver library" >&2
  exit 1
fi
if nm -D --defined-only "$lib" | awk '{ print $3 }' | grep -v '^ordo_' | grep -v '^ORDO_'; then
  echo "FAIL: $lib exports symbols other than ordo_*" >&2
  exit 1
fi

# The dynamic loader itself, told to ignore its cache: only the library's own folder and the
# system's default folders are searched, never /usr/local/cuda.
loader=$(readelf -l "$probe" | sed -n 's/.*interpreter: \(.*\)]/\1/p')
out=$(env -u LD_LIBRARY_PATH -u CUDA_HOME LD_DEBUG=libs "$loader" --inhibit-cache --library-path "$build/src" \
  "$probe" 2>"$build/no_gpu_probe.ld.log") || {
  echo "FAIL: the probe did not run (status $?)" >&2
  cat "$build/no_gpu_probe.ld.log" >&2
  exit 1
}
echo "$out"
# Match the loaded file's name, not its folder (a build folder may be called build-nocuda).
if grep -E 'calling init: (.*/)?[^/]*(cuda|nvidia)[^/]*$' "$build/no_gpu_probe.ld.log"; then
  echo "FAIL: a CUDA library was loaded" >&2
  exit 1
fi
if ! grep -q '^devices=0$' <<<"$out"; then
  echo "FAIL: expected 0 devices on this machine" >&2
  exit 1
fi
if ! grep -q '^push=ORDO_ERR_NO_DEVICE' <<<"$out" || ! grep -Eq '^message=.*GPU 0 requested.*: .+' <<<"$out"; then
  echo "FAIL: a GPU push must be ORDO_ERR_NO_DEVICE, with the reason" >&2
  exit 1
fi
echo "check_cuda_loading: OK (loads without the toolkit's libraries; 0 devices, with the reason)"
