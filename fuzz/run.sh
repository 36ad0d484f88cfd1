#!/usr/bin/env bash
# Builds the libFuzzer harnesses (clang, ASan + UBSan + libFuzzer) in build-fuzz/ at the repo root,
# replays each harness's saved regressions, then fuzzes it for SECONDS on a copy of its seed
# corpus (new inputs and crash artifacts stay under build-fuzz/runs/, never in fuzz/corpus/).
# Exits non-zero when any regression or run finds a crash, a leak, a timeout or an oracle failure.
# Hangs: the harnesses' watchdog reports a call that must return but has not after 20 s (loaded
# CI machines stall for seconds; a deadlock waits forever); libFuzzer's -timeout=30 backs it up.
#
#   fuzz/run.sh [SECONDS] [HARNESS...]      default: 300 s, all four harnesses
#   ORDO_FUZZ_BUILD=dir                     build somewhere else than <repo>/build-fuzz
#   FUZZ_PIN=1                              oversubscribed: the replays and every fuzzing
#                                           process on one CPU (taskset), so that the engine's
#                                           threads preempt one another between two steps;
#                                           runs in build-fuzz/runs-pinned/
#   FUZZ_PROCS=N                            N fuzzing processes at once per harness (default
#                                           1), sharing its corpus; logs fuzz.1.log .. fuzz.N.log
#
# See fuzz/README.md for what each harness checks.
set -euo pipefail

seconds=${1:-300}
if [ $# -gt 0 ]; then shift; fi
root=$(cd "$(dirname "$0")/.." && pwd)
build=${ORDO_FUZZ_BUILD:-$root/build-fuzz}
harnesses=("$@")
if [ ${#harnesses[@]} -eq 0 ]; then harnesses=(fuzz_var_queue fuzz_api fuzz_handles fuzz_pipeline_defer fuzz_graph_replay); fi

case $seconds in
  '' | *[!0-9]*) echo "fuzz/run.sh: SECONDS must be a whole number, got '$seconds'" >&2; exit 2 ;;
esac
pin=${FUZZ_PIN:-0}
procs=${FUZZ_PROCS:-1}
case $procs in
  '' | 0 | *[!0-9]*)
    echo "fuzz/run.sh: FUZZ_PROCS must be a positive number, got '$procs'" >&2
    exit 2
    ;;
esac
# what every harness process runs under: nothing, or taskset onto the first CPU we may use
pinned=()
runs_dir=runs
if [ "$pin" = 1 ]; then
  cpu=$(taskset -pc $$ | sed 's/.*: *//; s/[,-].*//')
  pinned=(taskset -c "$cpu")
  runs_dir=runs-pinned
fi

# clang 14 and its libFuzzer runtime, which Debian 12 ships apart (libclang-rt-14-dev), plus
# llvm-symbolizer for readable stack traces. Installed only when missing.
pick_clang() {
  for v in clang-14 clang; do
    if command -v "$v" >/dev/null 2>&1; then
      cc=$v
      cxx=${v/clang/clang++}
      return 0
    fi
  done
  return 1
}

have_libfuzzer() {
  local lib
  lib="$("$cc" -print-resource-dir)/lib/linux/libclang_rt.fuzzer-$(uname -m).a"
  [ -f "$lib" ]
}

install_toolchain() {
  local need=()
  if ! pick_clang; then
    need+=(clang-14 libclang-rt-14-dev)
  elif ! have_libfuzzer; then
    need+=(libclang-rt-14-dev)
  fi
  if [ ! -x /usr/lib/llvm-14/bin/llvm-symbolizer ] && ! command -v llvm-symbolizer >/dev/null 2>&1
  then
    need+=(llvm-14)
  fi
  if [ ${#need[@]} -eq 0 ]; then return 0; fi
  bash "$root/tools/apt-install.sh" fuzz/run.sh "${need[@]}"
  pick_clang
  have_libfuzzer || { echo "fuzz/run.sh: libFuzzer runtime still missing" >&2; exit 1; }
}

install_toolchain
for tool in meson ninja; do
  command -v $tool >/dev/null 2>&1 || { echo "fuzz/run.sh: $tool missing (make deps)" >&2; exit 1; }
done
if [ -x /usr/lib/llvm-14/bin/llvm-symbolizer ]; then
  export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-14/bin/llvm-symbolizer
fi
# Leaks fail the run (LSan); UBSan reports come with a stack and stop the run (the build also
# uses -fno-sanitize-recover=all). A caller's own settings win.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

if [ ! -f "$build/build.ninja" ]; then
  CC=$cc CXX=$cxx meson setup "$build" "$root" --buildtype=debugoptimized \
    -Dfuzz=true -Dtests=false -Db_sanitize=address,undefined -Db_lundef=false \
    -Dstatic_libstdcxx=false >"$build.setup.log" 2>&1 ||
    { cat "$build.setup.log" >&2; exit 1; }
  mv "$build.setup.log" "$build/setup.log"
fi
targets=()
for h in "${harnesses[@]}"; do targets+=("fuzz/$h"); done
ninja -C "$build" -j2 "${targets[@]}" >"$build/fuzz-build.log" 2>&1 ||
  { tail -40 "$build/fuzz-build.log" >&2; exit 1; }

# Replays the harness's saved regressions, each input once.
replay() {
  local h=$1 bin=$2 log=$3
  local files=("$root/fuzz/regressions/$h"/*)
  if [ ! -e "${files[0]}" ]; then
    echo 0
    return 0
  fi
  if ! "${pinned[@]}" "$bin" "${files[@]}" >"$log" 2>&1; then
    echo "FAILED"
    return 1
  fi
  echo "${#files[@]}"
}

# Open findings (fuzz/known_bugs.txt) whose checks stay off until they are fixed.
known=$({ grep -v '^#' "$root/fuzz/known_bugs.txt" 2>/dev/null || true; } | tr -s ' \n' ',' |
  sed 's/^,//; s/,$//')
export ORDO_FUZZ_KNOWN_BUGS=$known

failed=0
summary=()
how="${seconds} s per harness"
if [ "$procs" -gt 1 ]; then how="$how, $procs processes at once"; fi
if [ "$pin" = 1 ]; then how="$how, all on CPU $cpu"; fi
echo "== fuzz: $how, build in ${build#"$root"/}"
if [ -n "$known" ]; then echo "   open findings not checked (fuzz/known_bugs.txt): $known"; fi
for h in "${harnesses[@]}"; do
  bin="$build/fuzz/$h"
  work="$build/$runs_dir/$h"
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/artifacts"
  cp "$root/fuzz/corpus/$h"/* "$work/corpus/" 2>/dev/null || true

  if ! replayed=$(replay "$h" "$bin" "$work/regressions.log"); then
    echo "!! $h: a saved regression fails:"
    grep -E "ORACLE FAILURE|ERROR:|Running:" "$work/regressions.log" | tail -6 || true
    failed=1
    summary+=("$(printf '%-20s %-10s %12s %10s %8s  %s' "$h" "REGRESSION" - - - "$work/regressions.log")")
    continue
  fi

  dict=()
  if [ -f "$root/fuzz/$h.dict" ]; then dict=(-dict="$root/fuzz/$h.dict"); fi
  start_ns=$(date +%s%N)
  logs=(fuzz.log)
  if [ "$procs" -gt 1 ]; then
    logs=()
    for ((i = 1; i <= procs; i++)); do logs+=("fuzz.$i.log"); done
  fi
  pids=()
  for log in "${logs[@]}"; do
    (cd "$work" && exec "${pinned[@]}" "$bin" corpus -max_total_time="$seconds" -timeout=30 \
      -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=artifacts/ "${dict[@]}" \
      >"$log" 2>&1) &
    pids+=($!)
  done
  rc=0
  failed_log=${logs[0]}
  for i in "${!pids[@]}"; do
    r=0
    wait "${pids[$i]}" || r=$?
    if [ $r -ne 0 ] && [ $rc -eq 0 ]; then rc=$r; failed_log=${logs[$i]}; fi
  done
  elapsed_ms=$((($(date +%s%N) - start_ns) / 1000000 + 1))
  execs=0
  for log in "${logs[@]}"; do
    n=$(awk '/stat::number_of_executed_units/ {print $2}' "$work/$log")
    execs=$((execs + ${n:-0}))
  done
  rate=$((execs * 1000 / elapsed_ms))
  units=$(find "$work/corpus" -type f | wc -l)
  if [ $rc -eq 0 ]; then
    result=ok
  else
    result="FAIL($rc)"
    failed=1
    echo "!! $h failed (exit $rc); log: $work/$failed_log"
    grep -E "ORACLE FAILURE|ERROR: |SUMMARY|Test unit written" "$work/$failed_log" | head -8 || true
  fi
  summary+=("$(printf '%-20s %-10s %12s %10s %8s  %s regressions replayed' "$h" "$result" "$execs" "$rate" "$units" "$replayed")")
done

printf '%-20s %-10s %12s %10s %8s\n' harness result execs execs/s corpus
printf '%s\n' "${summary[@]}"
exit $failed
