#!/usr/bin/env bash
# The bench suite (`make bench`): installs missing peers, builds, runs ordo and every peer on the
# same workloads, and prints one comparison table (bench/compare.py).
#
# Usage: bench/run.sh BUILD [--no-install] [--no-cholesky] [--rounds R] [--systems LIST] [FLAGS...]
#   FLAGS go to every bench_* program after the defaults `--reps 5 --threads 2`, so they win:
#   e.g. `bench/run.sh build --ops 200000 --only AB` for a quick run (bench/bench_common.h
#   lists the flags). The Cholesky programs (letter K) run when --only is absent or names K;
#   CHOLESKY_ARGS (env) adds flags to them, e.g. CHOLESKY_ARGS="--n 2048". The pipeline
#   programs (letter P: ordo's ordo_pipeline_run and oneTBB's parallel_pipeline, 3 pipes
#   serial-parallel-serial with empty stages, 2 and 4 lines) run when --only is absent or names
#   P; they take --ops (tokens), --reps and --threads from FLAGS.
#   --rounds R runs every program R times, interleaved (each round starts one program later), so
#   that a machine whose speed drifts during the run (a VM's cores moving) is shared by all
#   systems; the table then gives medians over rounds and how many rounds ordo won.
#   --systems "ordo gomp tbb" runs only the programs named (bench_NAME, cholesky_NAME; ordo's
#   are bench_ordo and the cholesky demo). Each A-F program runs once per workload, in a process
#   of its own, so that a runtime that takes too long on one workload (one repetition of
#   libgomp's C: 0.8 s at 200,000 ops, 148 s at 400,000, 62 s at 1,000,000) loses that cell only.
#   BENCH_TIMEOUT (env, seconds, default 900) bounds each of those processes and each Cholesky
#   program.
# Output: the table on stdout (also saved as BUILD/bench-table.txt), progress on stderr, the raw
# lines in BUILD/bench-results.txt (`bench/compare.py BUILD/bench-results.txt` re-prints it);
# BENCH_OUT (env, a directory) puts both files there instead (the test smoke run does).
# A peer that is missing, fails or times out is reported in the table; it never stops the run.
set -uo pipefail

if [ $# -lt 1 ] || [ "${1#-}" != "$1" ]; then
  sed -n '2,17p' "$0" >&2
  exit 2
fi
build=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")

install=1
cholesky=1
pipeline=1
only=""
rounds=1
systems=""
flags=()
while [ $# -gt 0 ]; do
  case $1 in
    --no-install) install=0 ;;
    --no-cholesky) cholesky=0 ;;
    --rounds)
      rounds=${2:-}
      shift
      ;;
    --systems)
      systems=${2:-}
      shift
      ;;
    --only) # not passed on: each program gets one letter of it (run_workloads)
      only=${2:-}
      shift
      ;;
    *) flags+=("$1") ;;
  esac
  shift
done
if [ -n "$only" ]; then
  case $only in *K*) ;; *) cholesky=0 ;; esac
  case $only in *P*) ;; *) pipeline=0 ;; esac
fi
if ! [[ $rounds =~ ^[1-9][0-9]*$ ]]; then
  echo "bench/run.sh: --rounds takes a positive count" >&2
  exit 2
fi
threads=2
for ((i = 0; i + 1 < ${#flags[@]}; i++)); do
  [ "${flags[$i]}" = --threads ] && threads=${flags[$((i + 1))]}
done
timeout_s=${BENCH_TIMEOUT:-900}

log() { echo "bench: $*" >&2; }

# ---- install and build ----
if [ $install = 1 ]; then
  bash "$root/tools/install-bench-deps.sh" "$build" || log "installing peers failed; going on"
fi
# Reconfigure so that meson sees peers installed since the build dir was set up.
if [ -f "$build/build.ninja" ]; then
  meson setup --reconfigure "$build" "$root" >/dev/null || log "meson reconfigure failed"
else
  meson setup "$build" "$root" >/dev/null || {
    log "meson setup failed"
    exit 1
  }
fi
meson compile -C "$build" -j "${JOBS:-2}" >/dev/null || log "the build failed; running what was built"
build=$(cd "$build" && pwd) # absolute: the Cholesky programs run inside it

out_dir=${BENCH_OUT:-$build}
mkdir -p "$out_dir" || {
  echo "bench/run.sh: cannot create BENCH_OUT=$out_dir" >&2
  exit 2
}
out_dir=$(cd "$out_dir" && pwd) # absolute too: a relative one would be lost inside $build
raw="$out_dir/bench-results.txt"
: >"$raw"

# The cache-line round trip between two cores (bench/core_latency.c says why it matters).
core_rtt() { # core_rtt WHEN
  [ -x "$build/bench/core_latency" ] || return 0
  local m
  read -r m _ < <("$build/bench/core_latency")
  echo "MACHINE c2c-$1 ${m} ns cache-line round trip between 2 cores ($1 the run)"
}

# ---- the machine and the run, for the table's header ----
{
  cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
  echo "MACHINE cpu ${cpu:-unknown}"
  echo "MACHINE cores $(nproc) online, $(grep -c ^processor /proc/cpuinfo) in /proc/cpuinfo"
  echo "MACHINE kernel $(uname -srm)"
  echo "MACHINE load $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min, before the run)"
  echo "MACHINE date $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "MACHINE commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  core_rtt before
  [ "$rounds" -gt 1 ] && echo "MACHINE rounds $rounds, interleaved (each round starts one program later)"
  echo "ARGS --reps 5 --threads 2 ${flags[*]}"
} >>"$raw"

# Runs one program; its stdout goes to the raw file (and, as progress, to stderr). A failure
# becomes a FAIL line in the table, not the end of the run.
run_program() { # run_program NAME COMMAND...
  local name=$1
  shift
  log "running $name"
  local t0=$SECONDS
  timeout --kill-after=10 "$timeout_s" "$@" | tee -a "$raw" >&2
  local rc=${PIPESTATUS[0]}
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "FAIL $name timed out after ${timeout_s}s" >>"$raw"
  elif [ "$rc" != 0 ]; then
    echo "FAIL $name exited with status $rc (its stderr above says why)" >>"$raw"
  fi
  log "$name took $((SECONDS - t0)) s"
}

# Whether --systems lets program NAME (bench_X or cholesky_X; the demo is ordo's) run.
wanted() { # wanted NAME
  [ -z "$systems" ] && return 0
  local sys=${1#bench_}
  sys=${sys#cholesky_}
  sys=${sys#pipeline_}
  [ "$sys" = cholesky ] && sys=ordo
  [[ " $systems " == *" $sys "* ]]
}

# ---- the programs: A-F (ordo first, then every peer that was built), then K ----
programs=()
if [ -z "$only" ] || [ -n "$(tr -dc 'A-F' <<<"$only")" ]; then
  if [ -x "$build/bench/bench_ordo" ]; then
    wanted bench_ordo && programs+=("$build/bench/bench_ordo")
  else
    echo "FAIL bench_ordo was not built" >>"$raw"
  fi
  for prog in "$build"/bench/bench_*; do
    name=$(basename "$prog")
    if [ ! -f "$prog" ] || [ ! -x "$prog" ] || [ "$name" = bench_ordo ]; then continue; fi
    wanted "$name" && programs+=("$prog")
  done
  [ -x "$build/bench/bench_gomp" ] || echo "SKIP gomp - not built (gcc OpenMP missing?)" >>"$raw"
  [ -x "$build/bench/bench_libomp" ] ||
    echo "SKIP libomp - not built (clang or libomp-dev missing)" >>"$raw"
fi
if [ $cholesky = 1 ]; then
  n_before=${#programs[@]}
  [ -x "$build/examples/cholesky" ] && wanted cholesky && programs+=("$build/examples/cholesky")
  # The peers by name (bench/cholesky_kernels, beside them, times kernels, not a runtime).
  for peer in gomp libomp starpu; do
    prog=$build/bench/cholesky_$peer
    [ -f "$prog" ] && [ -x "$prog" ] && wanted "cholesky_$peer" && programs+=("$prog")
  done
  [ ${#programs[@]} -gt "$n_before" ] || echo "SKIP cholesky K no Cholesky program was built or selected" >>"$raw"
fi

if [ $pipeline = 1 ]; then
  n_before=${#programs[@]}
  for sys in ordo tbb; do
    prog=$build/bench/pipeline_$sys
    [ -f "$prog" ] && [ -x "$prog" ] && wanted "pipeline_$sys" && programs+=("$prog")
  done
  [ -x "$build/bench/pipeline_tbb" ] || echo "SKIP tbb P not built (libtbb-dev missing?)" >>"$raw"
  [ ${#programs[@]} -gt "$n_before" ] || echo "SKIP pipeline P no pipeline program was built or selected" >>"$raw"
fi

read -r -a chol_args <<<"${CHOLESKY_ARGS:-}"
common=(--reps 5 --threads 2 "${flags[@]}")
letters=ABCDEF # the A-F workloads, one process each (--only given: the letters it names)
[ -n "$only" ] && letters=$(tr -dc 'A-F' <<<"$only")
# Runs one A-F program on each workload, a process per workload (its --only comes last: it wins).
run_workloads() { # run_workloads NAME COMMAND...
  local name=$1 w
  shift
  for ((w = 0; w < ${#letters}; w++)); do
    run_program "$name --only ${letters:$w:1}" "$@" "${common[@]}" --only "${letters:$w:1}"
  done
}
# Runs one program with the flags of its kind.
run_one() { # run_one PATH
  local prog=$1 name
  name=$(basename "$prog")
  case $name in
    bench_gomp | bench_libomp) OMP_NUM_THREADS=$threads run_workloads "$name" "$prog" ;;
    bench_ordo)
      # ordo's default engine, then its ORDO_ENGINE_FLAG_PUSHERS_HELP mode (ordo-help), then its
      # naive engine on A, B and E (ordo-naive): each op runs inside its push, so that time is
      # all of ordo's work per op on one thread, with no hand-off between threads (compare.py
      # names the peers faster than it)
      run_workloads "$name" "$prog"
      run_workloads "$name --pushers-help" "$prog" --pushers-help
      letters=$(tr -dc 'ABE' <<<"$letters") run_workloads "$name --kind naive" "$prog" --kind naive
      # capture and replay (ordo-graph): each workload captured once, launched per repetition
      letters=$(tr -dc 'ABCDE' <<<"$letters") run_workloads "$name --graph" "$prog" --graph
      ;;
    bench_*) run_workloads "$name" "$prog" ;;
    pipeline_*)
      # P: the flags the pipeline programs know (--ops is the number of tokens); the caller's
      # last value of each wins, as for the others
      local own=(--reps 5 --threads 2) i
      for ((i = 0; i + 1 < ${#flags[@]}; i += 2)); do
        case ${flags[$i]} in --ops | --reps | --threads) own+=("${flags[$i]}" "${flags[$((i + 1))]}") ;; esac
      done
      run_program "$name" "$prog" "${own[@]}"
      ;;
    *)
      # K: the same protocol for all, a warm-up, then the median of 5 (the table's rule), and
      # every program's factorization checked (residual, after the timed runs: a wrong result
      # fails the program and its cell); no trace for the demo (the peers write none either);
      # CHOLESKY_ARGS comes last, so it wins. The demo writes its trace into the current
      # directory: run it inside the build dir.
      local own=()
      [ "$name" = cholesky ] && own=(--trace "")
      (cd "$build" && run_program "$name" "$prog" --threads "$threads" --reps 5 --warmup 1 \
        "${own[@]}" "${chol_args[@]}")
      # the demo's DAG captured once and launched per run (ordo-graph), its launch overhead
      if [ "$name" = cholesky ]; then
        (cd "$build" && run_program "$name --graph" "$prog" --threads "$threads" --reps 5 \
          --warmup 1 --graph "${own[@]}" "${chol_args[@]}")
      fi
      ;;
  esac
}

count=${#programs[@]}
for ((r = 0; r < rounds; r++)); do
  [ "$rounds" -gt 1 ] && echo "ROUND $((r + 1))" >>"$raw" && log "round $((r + 1)) of $rounds"
  for ((i = 0; i < count; i++)); do
    run_one "${programs[$(((i + r) % count))]}"
  done
done

core_rtt after >>"$raw"
python3 "$here/compare.py" "$raw" | tee "$out_dir/bench-table.txt"
log "raw lines: $raw, table: $out_dir/bench-table.txt"
