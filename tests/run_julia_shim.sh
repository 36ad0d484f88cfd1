#!/usr/bin/env bash
# The C half of the Julia binding (bindings/julia/Ordo.jl/deps/ordo_jl.c), which has no Julia
# to run it here: builds it with deps/test_ordo_jl.c, a C driver that plays Julia's part (drains
# the hub on a wake-up, runs each op on a thread of its own, completes it), under ASan+UBSan
# against this build's libordo.so, and runs the item-6 scenarios and the graph (capture and
# replay) ones through it; then, when the sanitizer step has built BUILD-tsan, again under TSan
# against that TSan-built libordo.so (TSan must see ordo's own synchronization, so not against
# the plain library).
# Usage: bash tests/run_julia_shim.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=$(cd "${1:-build}" && pwd)
deps="$root/bindings/julia/Ordo.jl/deps"
out="$build/julia-shim"
mkdir -p "$out"
cflags=(-std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -pthread -I"$root/include")

# The shared library that Pkg.build makes (deps/build.jl's flags): it must build warning-free.
cc "${cflags[@]}" -O2 -fPIC -shared "$deps/ordo_jl.c" -L"$build/src" -lordo -o "$out/libordo_jl.so"

cc "${cflags[@]}" -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined \
  "$deps/test_ordo_jl.c" "$deps/ordo_jl.c" -L"$build/src" -lordo -Wl,-rpath,"$build/src" \
  -o "$out/test_ordo_jl"
echo "under ASan+UBSan ($build/src):"
"$out/test_ordo_jl"

tsan_lib="$build-tsan/src"
if [[ -f "$tsan_lib/libordo.so" ]]; then
  cc "${cflags[@]}" -O1 -g -fsanitize=thread "$deps/test_ordo_jl.c" "$deps/ordo_jl.c" \
    -L"$tsan_lib" -lordo -Wl,-rpath,"$tsan_lib" -o "$out/test_ordo_jl_tsan"
  echo "under TSan ($tsan_lib):"
  TSAN_OPTIONS="halt_on_error=1 exitcode=66" "$out/test_ordo_jl_tsan"
fi
