#!/bin/bash
# Instructions per op under callgrind (issue #26 item 5): push + run + complete of workloads A, B
# and D on the naive and per_device engines, and per replayed op of a captured graph (A, B).
# Deterministic where the wall clock on these VMs is not; compare two builds with it by giving
# each one's library directory.
#
# Usage: bench/instr_per_op.sh [BUILD] [LIBDIR]
#   BUILD   the meson build with bench/instr_per_op (default: build)
#   LIBDIR  the directory of the libordo.so.0 to count (default: BUILD/src)
# Each number is (I(2N) - I(N)) / N with N = 100,000 ops (for a graph: one more launch of N).
# Callgrind's counts still move by a few instructions between runs (the workers' idle spins).
set -euo pipefail
build=${1:-build}
lib=${2:-$build/src}
driver=$build/bench/instr_per_op
n=100000
# A fresh Debian machine has no valgrind: install it (as root, or with sudo) when missing.
if ! command -v valgrind >/dev/null 2>&1; then
  bash "$(cd "$(dirname "$0")/.." && pwd)/tools/apt-install.sh" instr_per_op valgrind
fi
[ -x "$driver" ] || { echo "instr_per_op.sh: $driver not built" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Total instructions of one run of the driver with the given arguments.
count() {
  LD_LIBRARY_PATH=$lib valgrind --tool=callgrind --callgrind-out-file="$tmp/out" "$driver" "$@" \
    2>&1 | sed -n 's/.*Collected : *\([0-9]*\).*/\1/p; s/.*refs: *\([0-9,]*\).*/\1/p' | tr -d , |
    tail -1
}
per_op() {  # per_op ARGS_SMALL -- ARGS_LARGE
  local small large
  small=$(count $1)
  large=$(count $2)
  awk -v a="$small" -v b="$large" -v n="$n" 'BEGIN { printf "%.1f", (b - a) / n }'
}

printf '%-22s %10s %10s %10s\n' "instructions per op" A B D
for kind in naive per_device; do
  row=$(printf '%-22s' "$kind")
  for w in A B D; do
    row+=$(printf ' %10s' "$(per_op "$kind $w $n" "$kind $w $((2 * n))")")
  done
  echo "$row"
done
row=$(printf '%-22s' "per_device, replayed")
for w in A B; do
  row+=$(printf ' %10s' "$(per_op "per_device $w $n 1" "per_device $w $n 2")")
done
echo "$row $(printf '%10s' -)"
