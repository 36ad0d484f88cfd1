#!/usr/bin/env bash
# Runs every test. The main Criterion suite runs last so that its "Synthesis" line closes the log.
# Every step runs under tests/with_timeout.sh: a step that hangs fails CI at its limit (a few
# times its usual time; WITH_TIMEOUT_SCALE=N stretches every limit on a slow machine) with the
# step's name and the stacks of all its processes' threads, instead of holding the job.
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)

step_name=""
# section NAME: starts a step group; its commands fail under NAME.
section() {
  step_name=$1
  echo "== $1"
}
# run SECONDS COMMAND...: one command of the current section, under its time limit, named after
# the section and the program it runs (past env, its assignments, and bash or python3).
run() {
  local seconds=$1 prog a
  shift
  for a in "$@"; do
    case $a in env | *=* | bash | python3 | -*) continue ;; esac
    prog=$(basename -- "$a")
    break
  done
  bash "$here/with_timeout.sh" "$step_name: ${prog:-$1}" "$seconds" "$@"
}

section "the step timeout wrapper: a deliberately hung step is named, its stacks dumped, killed"
run 300 bash "$here/test_with_timeout.sh" "$build"

section "src/ includes run down the layers, with no loops (tools/check_layers.py)"
run 60 python3 "$here/test_check_layers.py"

section "the public header as C99 and C++17"
run 60 "$build/tests/header_c99"
run 60 "$build/tests/header_cxx17"
section "the public header as FFI generators read it (ORDO_API empty, ORDO_NO_INLINE_HELPERS)"
run 60 "$build/tests/header_c99_bare"
run 120 python3 "$here/test_header_cffi.py" "$here/../include/ordo/ordo.h" "$build/src/libordo.so"
section "a Python program that exits with ops pending neither aborts nor hangs (forced unwinds)"
run 300 python3 "$here/test_python_exit.py" "$build/src/libordo.so" 5

section "libordo.so is never unmapped by dlclose (its pthread key destructor must stay)"
# shellcheck disable=SC2016 # expanded by that bash
run 60 bash -c 'readelf -d "$0" | grep -q "Flags:.*NODELETE"' "$build/src/libordo.so" ||
  { echo "libordo.so lacks DF_1_NODELETE (-z nodelete)" >&2; exit 1; }

section "libordo.so loads anywhere: static TLS under 288 bytes, no symbol newer than GLIBC_2.34"
run 60 bash "$here/check_so_limits.sh" "$build/src/libordo.so"

section "libordo.so loads and works without the CUDA toolkit's libraries (cudart dlopened, 0 GPUs)"
run 60 bash "$here/check_cuda_loading.sh" "$build"

section "internal: GPU ops on the simulated device (streams, events, errors, shutdown)"
run 120 "$build/tests/ordo_gpu_sim_test"

section "real GPU: kernels on ordo's streams and copy streams (each test skips with the reason without a GPU)"
# Built only where the CUDA toolkit is (nvcc, cudart); the main suite's test_gpu_real.c needs none.
if [[ -x "$build/tests/ordo_gpu_kernels_test" ]]; then
  run 300 "$build/tests/ordo_gpu_kernels_test" --jobs=1 # timed tests: one GPU context at a time
  # The GPU demo, small, with its residual check (make gpu-demo runs N=16384), and the launch
  # benchmark, short (make bench-gpu); both print "no GPU: ..." and exit 0 without one.
  if [[ -x "$build/examples/gpu_cholesky" ]]; then # needs cuBLAS and cuSOLVER too
    run 300 "$build/examples/gpu_cholesky" --n 2000 --tile 256 --reps 1
  fi
  run 300 "$build/bench/gpu_launch" --n 5000 --chain-n 1000 --reps 1
else
  echo "not built: no CUDA toolkit (meson option cuda)"
fi

section "the ABI against abi/ (make abi-check: abidiff, and the header's constants)"
run 120 bash "$here/../tools/abi_check.sh" "$build"

section "C++ exceptions thrown by callbacks and free_fns"
run 120 "$build/tests/ordo_exceptions_test"

section "internal: an op block's completion generations never wrap"
run 120 "$build/tests/ordo_op_generations_test"
section "internal: an engine's reference count never wraps"
run 120 "$build/tests/ordo_engine_refs_test"
section "internal: a failed create writes no trace"
run 120 "$build/tests/ordo_failed_create_trace_test"
section "internal: wait races forced through the test seams (under AddressSanitizer)"
run 120 "$build/tests/ordo_wait_seams_test"

section "heap allocations on the hot path"
run 300 "$build/tests/ordo_alloc_test"

section "consumer built against the installed ordo.pc"
run 600 bash "$here/install_consumer.sh" "$build"

section "Rust binding: cargo test"
# bindings/rust against $build/src, offline; the first build of the crates takes about 30 s
run 600 bash "$here/run_rust.sh" "$build"

section "Python binding: pytest"
# the suite against this build's library, then pip install bindings/python into a fresh venv
run 600 bash "$here/run_python.sh" "$build"

section "Go binding: go test -race (bindings/go, against this build through an ordo.pc of the tree)"
run 300 bash "$here/run_go.sh" "$build"

section "stress checker against a sequential model, short (make stress runs 10M ops)"
run 300 "$build/tests/ordo_stress" --ops 500000
section "the same, with throttled pushers running ready ops (ORDO_PUSHERS_HELP=1, a 64-op window)"
run 300 env ORDO_PUSHERS_HELP=1 ORDO_MAX_PENDING=64 "$build/tests/ordo_stress" --ops 300000
section "the same on the naive engine: 4 pushers, each running its ops inside its pushes"
run 300 "$build/tests/ordo_stress" --kind naive --pushers 4 --ops 200000
section "the same oversubscribed (make stress STRESS_PIN=1 STRESS_PROCS=N): processes on one CPU"
# Races show when a thread is preempted between two steps: every thread of 2-3 processes on one
# CPU, each kind of engine; then 4 processes over all CPUs. About 20 s on 2 cores.
run 300 env STRESS_PIN=1 STRESS_PROCS=3 bash "$here/run_stress.sh" "$build" --ops 1500000
run 300 env STRESS_PIN=1 STRESS_PROCS=2 bash "$here/run_stress.sh" "$build" --ops 1000000 \
  --kind pooled
run 300 env STRESS_PIN=1 STRESS_PROCS=2 ORDO_PUSHERS_HELP=1 ORDO_MAX_PENDING=64 \
  bash "$here/run_stress.sh" "$build" --ops 1000000
run 300 env STRESS_PIN=1 STRESS_PROCS=2 bash "$here/run_stress.sh" "$build" --ops 1000000 \
  --kind naive
run 300 env STRESS_PROCS=4 bash "$here/run_stress.sh" "$build" --ops 600000

section "the Cholesky demo, small, and its trace checked (make run runs N=4096)"
demo_dir=$(mktemp -d)
run 300 "$build/examples/cholesky" --n 512 --tile 64 --threads 2 --trace "$demo_dir/trace.json"
# 120 ops per factorization: the default warm-up's and the timed one's
run 120 python3 "$here/check_trace.py" "$demo_dir/trace.json" events=240 worker_rows=2 \
  events_on_workers=240 'name:potrf(0)=2' 'name:gemm(7,6,5)=2'
section "the demo with both trsm ways (--trsm solve: the textbook dtrsm), on ragged tiles"
for trsm in solve inverse; do
  run 300 "$build/examples/cholesky" --n 300 --tile 37 --threads 2 --trsm "$trsm" --trace ""
done
section "the Cholesky kernels alone (bench/cholesky_kernels), small"
run 300 "$build/bench/cholesky_kernels" --n 512 --tile 64 --calls 5
section "the trace timeline picture (tools/trace_png.py), on that trace and on made-up ones"
run 300 python3 "$here/test_trace_png.py" "$demo_dir/trace.json"
rm -rf "$demo_dir"

section "bench/compare.py: one run and several interleaved rounds"
run 300 python3 "$here/test_bench_compare.py"
section "bench smoke: ordo's side of the suite through bench/run.sh (make bench adds the peers)"
bench_dir=$(mktemp -d)
run 600 env BENCH_OUT="$bench_dir" bash "$here/../bench/run.sh" "$build" --no-install \
  --no-cholesky --systems ordo --ops 2000 --reps 1 >/dev/null 2>"$bench_dir/progress.txt" ||
  { cat "$bench_dir/progress.txt" >&2; exit 1; }
run 120 python3 "$here/check_bench_results.py" "$bench_dir/bench-results.txt"
rm -rf "$bench_dir"

section "the suite under ASan+UBSan (Criterion) and TSan (Criterion shim), in $build-asan, $build-tsan"
# builds two configurations from scratch on a fresh machine, then runs the suite in each
run 2400 bash "$here/run_sanitizers.sh" "$build"

section "Julia binding's C half (no Julia here): Ordo.jl/deps driven from C, ASan+UBSan, TSan"
run 120 bash "$here/run_julia_shim.sh" "$build"

section "the suite under valgrind memcheck (Criterion shim)"
run 1800 bash "$here/run_valgrind.sh" "$build"

section "libFuzzer harnesses: saved regressions, then 20 s each (make fuzz runs longer)"
# builds build-fuzz/ from scratch on a fresh machine
run 1200 bash "$here/../fuzz/run.sh" 20
section "the same oversubscribed (make fuzz FUZZ_PIN=1 FUZZ_PROCS=2): on one CPU, 6 s each"
run 300 env FUZZ_PIN=1 FUZZ_PROCS=2 bash "$here/../fuzz/run.sh" 6

section "Criterion suite"
# The Criterion runner itself once hung (no test process left) on an overloaded machine; a hang
# must fail CI in minutes, not at its limit. The suite takes about 30 s.
run 900 "$build/tests/ordo_tests" --jobs=2
