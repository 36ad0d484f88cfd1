# Thin wrapper over meson/ninja. The real build is meson.build.
#   make run      build and run the main demo (examples/cholesky: tiled Cholesky on ordo), and
#                 draw its trace as a timeline (cholesky-trace.png)
#   make quickstart  build and run the smallest example (examples/quickstart.c)
#   make pipeline-demo  a frame pipeline whose B-frames defer to their future reference frames
#                 (examples/pipeline_frames.c): prints decode order and display order
#   make gpu-demo the same tiled Cholesky on a GPU (examples/gpu_cholesky.cu: cuBLAS/cuSOLVER tile
#                 kernels on ordo's streams, beside cusolverDnDpotrf); GPU_ARGS="--n 8192 --tile 512"
#                 (built when the CUDA toolkit is; without a GPU it says why and exits 0)
#   make bench-gpu  launch overhead: empty kernels as ordo GPU ops against raw <<<>>> launches
#                 (bench/gpu_launch.cu); GPU_ARGS="--n 20000" for a quick run
#   make gpu-check  every check that needs a real GPU, in one run of a few minutes (the kernel
#                 tests, the main suite on a GPU machine, the GPU demo and benchmark, memcheck):
#                 tests/run_gpu_checks.sh; tools/stage_gpu_checks.sh packs them for another machine
#   make test     build and run every test (sanitizer builds and short fuzz/stress runs included)
#   make bench    build and run the benchmarks against the peers (installs them when missing);
#                 BENCH_ARGS="--ops 200000 --only AB" for a quick run, "--rounds 3" to interleave
#                 3 rounds on a machine whose speed drifts (bench/run.sh lists flags)
#   make instr    instructions per op under callgrind (push + run + complete on A, B, D; a
#                 replayed op): bench/instr_per_op.sh, deterministic where the clock is not
#   make fuzz     run each libFuzzer harness for FUZZ_SECONDS (default 300)
#   make stress   run the long stress checker (STRESS_OPS, default 10,000,000 ops)
#   Oversubscribed (races show when a thread is preempted between two steps):
#     make stress STRESS_PIN=1 STRESS_PROCS=3   3 stress processes at once, all on one CPU
#     make fuzz FUZZ_PIN=1 FUZZ_PROCS=2         2 fuzzing processes per harness, on one CPU
#   (STRESS_PROCS/FUZZ_PROCS alone run that many at once over every CPU.)
#   make abi-check  compare libordo.so and the header's constants with the baseline under abi/
#                 (abidiff; part of make test): fails on any change but added functions
#   make abi-dump   rewrite that baseline from this build, after a reviewed compatible change
#   make install PREFIX=dir    install library, header and ordo.pc under dir
#   make clean
BUILD   ?= build
PREFIX  ?= /usr/local
MESON   ?= meson
JOBS    ?= 2
export JOBS # the scripts below (sanitizers, valgrind, bench) build with as many jobs
FUZZ_SECONDS ?= 300
STRESS_OPS ?= 10000000
STRESS_PIN ?= 0
STRESS_PROCS ?= 1
FUZZ_PIN ?= 0
FUZZ_PROCS ?= 1

.PHONY: all deps configure run quickstart pipeline-demo gpu-demo bench-gpu gpu-check test bench instr fuzz stress \
	abi-check abi-dump install clean

all: configure
	$(MESON) compile -C $(BUILD) -j $(JOBS)

# Installs what a fresh Debian 12 machine lacks (as root), and nothing when it is all there.
deps:
	@bash tools/install-deps.sh

configure: deps
	@if [ ! -f $(BUILD)/build.ninja ]; then $(MESON) setup $(BUILD); fi

run: all
	$(BUILD)/examples/cholesky
	python3 tools/trace_png.py cholesky-trace.json cholesky-trace.png

quickstart: all
	$(BUILD)/examples/quickstart

pipeline-demo: all
	$(BUILD)/examples/pipeline_frames

# Built only where meson found the CUDA toolkit (nvcc, cudart, cuBLAS, cuSOLVER).
gpu-demo: all
	@test -x $(BUILD)/examples/gpu_cholesky || \
	  { echo "examples/gpu_cholesky not built: no CUDA toolkit (meson option cuda)" >&2; exit 1; }
	$(BUILD)/examples/gpu_cholesky $(GPU_ARGS)

bench-gpu: all
	@test -x $(BUILD)/bench/gpu_launch || \
	  { echo "bench/gpu_launch not built: no CUDA toolkit (meson option cuda)" >&2; exit 1; }
	$(BUILD)/bench/gpu_launch $(GPU_ARGS)

gpu-check: all
	bash tests/run_gpu_checks.sh $(BUILD)

test: all
	bash tests/run_all.sh $(BUILD)

bench: all
	bash bench/run.sh $(BUILD) $(BENCH_ARGS)

instr: all
	bash bench/instr_per_op.sh $(BUILD)

fuzz: deps
	FUZZ_PIN=$(FUZZ_PIN) FUZZ_PROCS=$(FUZZ_PROCS) bash fuzz/run.sh $(FUZZ_SECONDS)

stress: all
	STRESS_PIN=$(STRESS_PIN) STRESS_PROCS=$(STRESS_PROCS) \
	  bash tests/run_stress.sh $(BUILD) --ops $(STRESS_OPS)

abi-check: all
	bash tools/abi_check.sh $(BUILD)

abi-dump: all
	bash tools/abi_check.sh $(BUILD) dump

install: configure
	$(MESON) configure $(BUILD) -Dprefix=$(abspath $(PREFIX))
	$(MESON) install -C $(BUILD)

clean:
	rm -rf $(BUILD) build-*
