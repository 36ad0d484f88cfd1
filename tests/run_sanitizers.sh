#!/usr/bin/env bash
# Sanitizer runs of the whole Criterion suite (tests/test_*.c), each in its own build directory
# next to BUILD (BUILD-asan, BUILD-tsan, BUILD-shim-selftest; `make clean` removes build-*):
#
#   asan  ASan + UBSan (fatal) + LeakSanitizer: libordo and the real Criterion binary. Every
#         process's reports go to files (log_path), because Criterion ignores a test process
#         that passes and then fails LeakSanitizer at exit (status 23 is dropped, the test
#         counts as passing). Any report fails the run; the one known leak of Criterion's own
#         runner is checked, not suppressed (tests/sanitizers/check_asan_logs.sh).
#   tsan  TSan: Criterion 2.4 cannot start under TSan (boxfort maps its arena at a random
#         address inside TSan's reserved shadow range: "Could not initialize inheritable
#         arena"; no Criterion option or environment variable changes that address), so the
#         same sources are built against tests/sanitizers/criterion_shim and run in one process.
#
#   bash tests/run_sanitizers.sh BUILD [asan|tsan|all]     (default all)
# No suppression file is used for either.
set -euo pipefail
build=${1:-build}
build=${build%/} # "build/" must give build-asan, not build/-asan
which=${2:-all}
root=$(cd "$(dirname "$0")/.." && pwd)
jobs=${JOBS:-2}

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f s", b - a }'; }

# configure DIR OPTIONS...: sets DIR up, or brings an existing DIR to OPTIONS.
configure() {
  local dir=$1
  shift
  if [ -f "$dir/build.ninja" ]; then
    meson configure "$dir" "$@" >/dev/null
  else
    local log
    log=$(mktemp)
    meson setup "$dir" "$root" "$@" >"$log" 2>&1 || {
      cat "$log" >&2
      rm -f "$log"
      return 1
    }
    rm -f "$log"
  fi
}

run_asan() {
  local dir="$build-asan" t0 t1
  echo "-- ASan+UBSan: build ($dir)"
  t0=$(now)
  # -fno-sanitize-recover: the first UBSan finding aborts the test process (a Criterion crash),
  # besides being written to the log files below.
  configure "$dir" -Db_sanitize=address,undefined -Db_lundef=false -Dstatic_libstdcxx=false \
    -Dinvariants=true -Dc_args=-fno-sanitize-recover=all -Dcpp_args=-fno-sanitize-recover=all
  ninja -C "$dir" -j "$jobs" tests/ordo_tests >/dev/null
  echo "   built in $(elapsed "$t0")"

  local logs="$dir/sanitizer-logs" out="$dir/asan-criterion.out"
  rm -rf "$logs" && mkdir -p "$logs"
  logs=$(cd "$logs" && pwd)
  t1=$(now)
  # exitcode=23 tells a sanitizer exit from Criterion's own statuses.
  local common="log_path=$logs/asan:exitcode=23"
  local rc=0 pid
  ASAN_OPTIONS="$common:detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1" \
    UBSAN_OPTIONS="$common:halt_on_error=1:print_stacktrace=1" \
    "$dir/tests/ordo_tests" --jobs=2 >"$out" 2>&1 &
  pid=$!
  wait "$pid" || rc=$?
  grep -E 'Synthesis' "$out" || true
  echo "   ran in $(elapsed "$t1") (status $rc)"
  # The Synthesis line decides for the tests: a runner leak report replaces Criterion's status.
  local synth ok_synth=0
  synth=$(grep -E 'Synthesis: Tested:' "$out" || true)
  if [[ $synth =~ Tested:\ ([0-9]+)\ \|\ Passing:\ ([0-9]+)\ \|\ Failing:\ 0\ \|\ Crashing:\ 0 ]] &&
    [ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ] && [ "${BASH_REMATCH[1]}" -gt 0 ]; then
    ok_synth=1
  fi
  local ok_logs=0
  bash "$root/tests/sanitizers/check_asan_logs.sh" "$logs" "$pid" && ok_logs=1
  if [ "$ok_synth" != 1 ] || [ "$ok_logs" != 1 ] || { [ "$rc" != 0 ] && [ "$rc" != 23 ]; }; then
    echo "ASan+UBSan: FAILED (Criterion output: $out, reports: $logs)" >&2
    tail -60 "$out" >&2
    return 1
  fi
  echo "   ASan+UBSan: no report"
}

run_tsan() {
  local dir="$build-tsan" t0 t1
  echo "-- TSan: build ($dir, the suite on the Criterion shim)"
  t0=$(now)
  # gcc's -Wtsan says that TSan does not model std::atomic_thread_fence. The one fence that
  # carries data between threads (WorkDeque::push's release) is a release store under TSan
  # (src/exec/work_deque.h); the others order atomics against atomics (the Chase-Lev
  # pop/steal Dekker, EventCount's notify, the membarrier-paired AsymmetricFence), which TSan
  # does not check anyway, so the warning is turned off rather than the build.
  local cxx_flags=()
  if ${CXX:-c++} -Werror -Wno-tsan -fsyntax-only -x c++ /dev/null 2>/dev/null; then
    cxx_flags=(-Dcpp_args=-Wno-tsan)
  fi
  configure "$dir" -Db_sanitize=thread -Db_lundef=false -Dstatic_libstdcxx=false -Dinvariants=true \
    "${cxx_flags[@]}"
  ninja -C "$dir" -j "$jobs" tests/ordo_tests_shim tests/ordo_gpu_sim_test >/dev/null
  echo "   built in $(elapsed "$t0")"

  t1=$(now)
  local out="$dir/tsan-shim.out" rc=0
  # halt_on_error: the first race ends the run with exitcode 66. history_size=4 keeps enough
  # history to print both stacks of a race in long tests. The shim scales each .timeout by 10.
  TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 history_size=4" \
    SHIM_TIMEOUT_SCALE=10 "$dir/tests/ordo_tests_shim" >"$out" 2>&1 || rc=$?
  grep -E 'Shim synthesis' "$out" || true
  echo "   ran in $(elapsed "$t1") (status $rc)"
  if [ "$rc" != 0 ] || grep -q 'WARNING: ThreadSanitizer' "$out"; then
    echo "TSan: FAILED (output: $out)" >&2
    grep -vE '^\[RUN |^\[PASS\]' "$out" | tail -80 >&2
    return 1
  fi
  echo "   TSan: no report"
  # GPU ops on the simulated device (streams and events on host threads, an event-polling thread
  # per GPU): the engine's GPU path under TSan, on a machine without a GPU.
  local gout="$dir/tsan-gpu-sim.out"
  rc=0
  TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1" \
    "$dir/tests/ordo_gpu_sim_test" >"$gout" 2>&1 || rc=$?
  if [ "$rc" != 0 ] || grep -q 'WARNING: ThreadSanitizer' "$gout"; then
    echo "TSan (GPU ops on the simulated device): FAILED (output: $gout)" >&2
    tail -80 "$gout" >&2
    return 1
  fi
  echo "   TSan, GPU ops on the simulated device: no report"
}

t_all=$(now)
case "$which" in
  asan) run_asan ;;
  tsan) run_tsan ;;
  all)
    echo "-- Criterion shim self-test"
    bash "$root/tests/sanitizers/shim_selftest.sh" "$build-shim-selftest"
    run_asan
    run_tsan
    ;;
  *)
    echo "usage: run_sanitizers.sh BUILD [asan|tsan|all]" >&2
    exit 2
    ;;
esac
echo "-- sanitizers: done in $(elapsed "$t_all")"
