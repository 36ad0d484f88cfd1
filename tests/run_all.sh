#!/usr/bin/env bash
# Runs every test. The main Criterion suite runs last so that its "Synthesis" line closes the log.
set -euo pipefail
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)

echo "== the public header as C99 and C++17"
"$build/tests/header_c99"
"$build/tests/header_cxx17"

echo "== libordo.so is never unmapped by dlclose (its pthread key destructor must stay)"
readelf -d "$build/src/libordo.so" | grep -q 'Flags:.*NODELETE' ||
  { echo "libordo.so lacks DF_1_NODELETE (-z nodelete)" >&2; exit 1; }

echo "== C++ exceptions thrown by callbacks and free_fns"
"$build/tests/ordo_exceptions_test"

echo "== internal: an op block's completion generations never wrap"
"$build/tests/ordo_op_generations_test"
echo "== internal: an engine's reference count never wraps"
"$build/tests/ordo_engine_refs_test"
echo "== internal: a failed create writes no trace"
"$build/tests/ordo_failed_create_trace_test"

echo "== heap allocations on the hot path"
"$build/tests/ordo_alloc_test"

echo "== consumer built against the installed ordo.pc"
bash "$here/install_consumer.sh" "$build"

echo "== stress checker against a sequential model, short (make stress runs 10M ops)"
"$build/tests/ordo_stress" --ops 500000
echo "== the same, with throttled pushers running ready ops (ORDO_PUSHERS_HELP=1, a 64-op window)"
ORDO_PUSHERS_HELP=1 ORDO_MAX_PENDING=64 "$build/tests/ordo_stress" --ops 300000
echo "== the same on the naive engine: 4 pushers, each running its ops inside its pushes"
"$build/tests/ordo_stress" --kind naive --pushers 4 --ops 200000

echo "== the Cholesky demo, small, and its trace checked (make run runs N=4096)"
demo_dir=$(mktemp -d)
"$build/examples/cholesky" --n 512 --tile 64 --threads 2 --trace "$demo_dir/trace.json"
# 120 ops per factorization: the default warm-up's and the timed one's
python3 "$here/check_trace.py" "$demo_dir/trace.json" events=240 worker_rows=2 \
  events_on_workers=240 'name:potrf(0)=2' 'name:gemm(7,6,5)=2'
echo "== the demo with both trsm ways (--trsm solve: the textbook dtrsm), on ragged tiles"
for trsm in solve inverse; do
  "$build/examples/cholesky" --n 300 --tile 37 --threads 2 --trsm "$trsm" --trace ""
done
echo "== the Cholesky kernels alone (bench/cholesky_kernels), small"
"$build/bench/cholesky_kernels" --n 512 --tile 64 --calls 5
echo "== the trace timeline picture (tools/trace_png.py), on that trace and on made-up ones"
python3 "$here/test_trace_png.py" "$demo_dir/trace.json"
rm -rf "$demo_dir"

echo "== bench/compare.py: one run and several interleaved rounds"
python3 "$here/test_bench_compare.py"
echo "== bench smoke: ordo's side of the suite through bench/run.sh (make bench adds the peers)"
bench_dir=$(mktemp -d)
BENCH_OUT=$bench_dir bash "$here/../bench/run.sh" "$build" --no-install --no-cholesky \
  --systems ordo --ops 2000 --reps 1 >/dev/null 2>"$bench_dir/progress.txt" ||
  { cat "$bench_dir/progress.txt" >&2; exit 1; }
python3 "$here/check_bench_results.py" "$bench_dir/bench-results.txt"
rm -rf "$bench_dir"

echo "== the suite under ASan+UBSan (Criterion) and TSan (Criterion shim), in $build-asan, $build-tsan"
bash "$here/run_sanitizers.sh" "$build"

echo "== the suite under valgrind memcheck (Criterion shim)"
bash "$here/run_valgrind.sh" "$build"

echo "== libFuzzer harnesses: saved regressions, then 20 s each (make fuzz runs longer)"
bash "$here/../fuzz/run.sh" 20

echo "== Criterion suite"
# Bounded: the Criterion runner itself once hung (no test process left) on an overloaded machine;
# a hang must fail CI in minutes, not at its limit. The suite takes about 30 s.
timeout --kill-after=10 900 "$build/tests/ordo_tests" --jobs=2 ||
  { rc=$?; [ $rc -ge 124 ] && echo "run_all: the Criterion suite did not finish in 900 s" >&2; exit $rc; }
