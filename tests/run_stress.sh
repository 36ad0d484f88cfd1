#!/usr/bin/env bash
# Runs the stress checker (BUILD/tests/ordo_stress), optionally oversubscribed: races in ordo show
# when a thread is preempted between two steps, which a machine with a core per thread rarely
# does. `make stress` runs this.
#
#   bash tests/run_stress.sh BUILD [ordo_stress flags...]
#   STRESS_PIN=1     every process on one CPU (taskset: the first CPU this shell may use), so the
#                    engine's workers, pushers, waiters and completers preempt one another
#   STRESS_PROCS=N   N processes at once (default 1), process i with --seed STRESS_SEED+i
#                    (STRESS_SEED defaults to 1; the --seed given here is overridden); with
#                    STRESS_PIN=1 they all share that one CPU
# Exit status: 0 when every process passed, else the first failing process's status (1 a
# mismatch or API error, 2 bad usage, 3 watchdog: see ordo_stress --help).
set -euo pipefail
build=${1:-build}
shift || true
bin="$build/tests/ordo_stress"
[ -x "$bin" ] || { echo "run_stress: $bin not built (make all)" >&2; exit 1; }
pin=${STRESS_PIN:-0}
procs=${STRESS_PROCS:-1}
seed=${STRESS_SEED:-1}
case $procs in
  '' | 0 | *[!0-9]*)
    echo "run_stress: STRESS_PROCS must be a positive number, got '$procs'" >&2
    exit 2
    ;;
esac

cmd=("$bin")
if [ "$pin" = 1 ]; then
  # "pid N's current affinity list: 0-3,8" -> 0
  cpu=$(taskset -pc $$ | sed 's/.*: *//; s/[,-].*//')
  cmd=(taskset -c "$cpu" "$bin")
fi

if [ "$procs" = 1 ] && [ "$pin" != 1 ]; then
  exec "${cmd[@]}" "$@"
fi

what="$procs process(es)"
if [ "$pin" = 1 ]; then what="$what pinned to CPU $cpu"; fi
echo "run_stress: $what: ordo_stress $* (seeds $seed..$((seed + procs - 1)))"
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
pids=()
t0=$(date +%s.%N)
for ((i = 0; i < procs; i++)); do
  "${cmd[@]}" "$@" --seed $((seed + i)) >"$logs/$i.log" 2>&1 &
  pids+=($!)
done
first_rc=0
for ((i = 0; i < procs; i++)); do
  rc=0
  wait "${pids[$i]}" || rc=$?
  if [ $rc -ne 0 ]; then
    echo "run_stress: process $i (--seed $((seed + i))) FAILED with exit $rc; its output:" >&2
    tail -60 "$logs/$i.log" >&2
    [ $first_rc -ne 0 ] || first_rc=$rc
  else
    summary=$(grep -E '^  ops: ' "$logs/$i.log" | sed 's/^ *//')
    echo "run_stress: process $i (--seed $((seed + i))) passed: $summary"
  fi
done
secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
echo "run_stress: $what done in $secs s: $([ $first_rc -eq 0 ] && echo PASS || echo FAIL)"
exit $first_rc
