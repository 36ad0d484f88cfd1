#!/usr/bin/env bash
# The checks that need a real GPU, in one run, for a machine that has one (CI machines have none:
# there every GPU test skips with the reason). Each step has its own time limit, the whole run
# a budget (GPU_CHECKS_BUDGET seconds, default 540): a step that would start past it is skipped
# and named, so a hang or a slow step never loses the others' results.
# Usage: run_gpu_checks.sh BUILD_DIR [OUT_DIR]   (make gpu-check; tools/stage_gpu_checks.sh
# copies what it needs, Criterion's libraries too, into a folder that can travel to such a
# machine). Each step's output goes to OUT_DIR/NAME.log; the summary is printed at the end.
set -u
build=${1:?usage: run_gpu_checks.sh BUILD_DIR [OUT_DIR]}
out=${2:-$build/gpu-checks}
mkdir -p "$out"
budget=${GPU_CHECKS_BUDGET:-540}
export CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
start=$SECONDS
summary=()

# step NAME SECONDS COMMAND...: runs COMMAND under its limit (cut to what is left of the budget).
step() {
  local name=$1 limit=$2 left t0 rc
  shift 2
  left=$((budget - (SECONDS - start)))
  if ((left < 15)); then
    summary+=("$(printf '%-22s not run: the budget of %d s was spent' "$name" "$budget")")
    return
  fi
  ((limit > left)) && limit=$left
  echo "== $name: $*"
  t0=$SECONDS
  timeout -k 5 "$limit" "$@" >"$out/$name.log" 2>&1
  rc=$?
  tail -n "${GPU_CHECKS_TAIL:-30}" "$out/$name.log"
  local verdict=ok
  ((rc == 124 || rc == 137)) && verdict="TIMED OUT at $limit s"
  ((rc != 0 && rc != 124 && rc != 137)) && verdict="FAILED (status $rc)"
  summary+=("$(printf '%-22s %-24s %4d s' "$name" "$verdict" $((SECONDS - t0)))")
}

echo "== the machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv 2>&1 ||
  echo "nvidia-smi: not found or failed"
for f in "$build"/tests/ordo_gpu_kernels_test "$build"/examples/gpu_cholesky "$build"/bench/gpu_launch; do
  [[ -x $f ]] && ldd "$f" | grep 'not found' && echo "   ^ missing for $f"
done

step probe 60 "$build/tests/ordo_no_gpu_probe"
step gpu_kernels 300 "$build/tests/ordo_gpu_kernels_test" --jobs=1 --verbose
step gpu_real 120 "$build/tests/ordo_tests" --filter 'gpu_real/*' --verbose
step gpu_cholesky_small 120 "$build/examples/gpu_cholesky" --n 2000 --tile 256 --reps 1
step gpu_launch 180 "$build/bench/gpu_launch" --n 20000 --chain-n 5000 --reps 3
step gpu_sim 120 "$build/tests/ordo_gpu_sim_test"
step gpu_cholesky 180 "$build/examples/gpu_cholesky"
step main_suite 300 "$build/tests/ordo_tests" --jobs=8
# The kernel tests that should raise no CUDA error (not the failing kernel and launch, whose
# errors are the point) and time nothing (the sanitizer slows every CUDA call).
if command -v compute-sanitizer >/dev/null; then
  step memcheck 300 compute-sanitizer --tool memcheck --target-processes all --error-exitcode 99 \
    "$build/tests/ordo_gpu_kernels_test" --jobs=1 --verbose \
    --filter 'gpu_kernels/+(vector*|h2d*|many*|captured*)'
fi

echo "== summary (logs in $out)"
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
! grep -q -E 'FAILED|TIMED OUT' "$out/summary.txt"
