/*
 * pipeline_tbb: oneTBB's side of workload P (bench/pipeline_common.h): tbb::parallel_pipeline
 * with serial_in_order / parallel / serial_in_order filters and empty bodies, at most `lines`
 * tokens in flight (max_number_of_live_tokens), the same tokens as ordo's.
 *
 * Threads: tbb::global_control(max_allowed_parallelism, T) and a task_arena(T); the calling
 * thread is one of the T (as in bench_tbb.cpp), whereas ordo runs T workers beside it.
 *
 * Usage: pipeline_tbb [--ops TOKENS] [--reps R] [--threads T]
 */
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_pipeline.h>
#include <oneapi/tbb/task_arena.h>

#include "pipeline_common.h"

namespace {

struct bench {
  tbb::task_arena* arena;
};

void run(void* ctx, unsigned lines, size_t tokens) {
  auto* b = static_cast<bench*>(ctx);
  b->arena->execute([&] {
    size_t next = 0;
    tbb::parallel_pipeline(
        lines,
        tbb::make_filter<void, size_t>(tbb::filter_mode::serial_in_order,
                                       [&](tbb::flow_control& fc) -> size_t {
                                         if (next == tokens) {
                                           fc.stop();
                                           return 0;
                                         }
                                         return next++;
                                       }) &
            tbb::make_filter<size_t, size_t>(tbb::filter_mode::parallel,
                                             [](size_t t) { return t; }) &
            tbb::make_filter<size_t, void>(tbb::filter_mode::serial_in_order, [](size_t) {}));
  });
}

}  // namespace

int main(int argc, char** argv) {
  bench_args a = pipeline_parse_args(argc, argv);
  tbb::global_control gc(tbb::global_control::max_allowed_parallelism,
                         static_cast<size_t>(a.threads));
  tbb::task_arena arena(a.threads);
  bench b{&arena};
  std::fprintf(stderr, "pipeline_tbb: %zu tokens, %d reps, %d threads\n", a.ops, a.reps, a.threads);
  for (unsigned lines : pipeline_lines) pipeline_measure("tbb", &a, lines, run, &b);
  return 0;
}
