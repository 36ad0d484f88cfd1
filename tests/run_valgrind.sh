#!/usr/bin/env bash
# Valgrind memcheck over the whole Criterion suite (tests/test_*.c), built against the Criterion
# shim (tests/sanitizers/criterion_shim) so that it runs in one process: under Criterion every
# test is a fork+exec'd boxfort worker, which memcheck would have to start 200 times over.
# It uses BUILD's own libordo (the shipped build: optimized, libstdc++ linked in statically).
#
# --max-threads: trace/caller_rows_never_share_an_id_with_worker_rows starts 1,024 workers (the
# default allows 500).
# Any memcheck error or definite/indirect leak fails the run; "still reachable" blocks (glibc's
# and libstdc++'s process-lifetime buffers, the shim's saved environment) do not.
# membarrier(2), which ordo's asymmetric fence uses, is passed through by valgrind 3.19; where a
# valgrind lacks it the call fails with ENOSYS and ordo falls back to plain seq_cst fences
# (src/base/asymmetric_fence.cpp), so nothing is skipped for it.
#
#   bash tests/run_valgrind.sh BUILD [shim options, e.g. --filter 'wait/*']
set -euo pipefail
build=${1:-build}
build=${build%/}
shift || true
jobs=${JOBS:-2}

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }

# A fresh Debian machine has no valgrind: install it (as root, or with sudo) when missing.
if ! command -v valgrind >/dev/null 2>&1; then
  bash "$(cd "$(dirname "$0")/.." && pwd)/tools/apt-install.sh" run_valgrind valgrind
fi

echo "-- valgrind: build the shim runner ($build)"
t0=$(now)
ninja -C "$build" -j "$jobs" tests/ordo_tests_shim >/dev/null
echo "   built in $(elapsed "$t0")"

out="$build/valgrind-shim.out"
t1=$(now)
rc=0
# Memcheck runs code 20 to 50 times slower and one thread at a time: each .timeout is scaled
# by 20 (the slowest test, a 120k-op stress model, takes about 8 s here).
SHIM_TIMEOUT_SCALE=20 valgrind --tool=memcheck --error-exitcode=1 --leak-check=full \
  --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect \
  --num-callers=30 --max-threads=1200 "$build/tests/ordo_tests_shim" "$@" >"$out" 2>&1 || rc=$?
grep -E 'Shim synthesis|ERROR SUMMARY|definitely lost|indirectly lost' "$out" | sed 's/^==[0-9]*== //' || true
echo "   ran in $(elapsed "$t1") (status $rc)"
if [ "$rc" != 0 ]; then
  echo "valgrind: FAILED (output: $out)" >&2
  grep -vE '^\[RUN |^\[PASS\]' "$out" | tail -80 >&2
  exit 1
fi
echo "   valgrind: no error, no leak"
