/*
 * bench_tbb: the oneTBB (2021) peer of the benchmark suite. Same workloads, flags and output as
 * every bench program (see bench_common.h); what is TBB-specific is written here.
 *
 * TBB has no data handles: a task says nothing about what it reads or writes, so the ordering
 * ordo derives from vars must be given to TBB as explicit edges. This program therefore turns
 * each workload's op sequence (the vars every op reads and mutates, the same sequence ordo is
 * pushed) into a tbb::flow::graph of continue_nodes with empty bodies: an op gets an edge from
 * the last op that mutated a var it reads, and, when it mutates a var, from every op that read
 * the var since its last mutation (or from that last mutation when nobody read it). That is the
 * same partial order ordo enforces. A flow graph must be complete before it runs (an edge added
 * after its source fired would never deliver), so the graph is built first and then started by
 * putting a message into every node without predecessors. Three systems are reported:
 *
 *   tbb-flow           timed: dependency analysis + graph construction + run + destruction.
 *                      This is the fair counterpart of ordo, whose timed push loop also does
 *                      the dependency analysis and frees what it allocated.
 *   tbb-flow-prebuilt  the same graph built before timing; timed: start + run only. A lower
 *                      bound on TBB's cost, not something a dynamic runtime can match.
 *   tbb-tg             tbb::task_group::run() once per op, for A and E only: their ops have no
 *                      dependencies, and task_group is TBB's natural dynamic submission. B, C and
 *                      D have dependencies a task_group cannot express: SKIP lines say so.
 *
 * Threads: tbb::global_control(max_allowed_parallelism, T) and a task_arena(T). In TBB the
 * thread that starts and waits for the work is one of the T threads (it submits, then executes
 * while waiting), whereas ordo and StarPU run T workers beside the pushing thread.
 * E (two pushers): two extra threads share a task_arena of T slots, 2 of them reserved for
 * them; each builds and runs its own half (its own graph, or its own task_group) and waits for
 * it, so both submit at once and then both execute. Starting the two threads is timed.
 * F (METG): the stencil as a flow graph, built inside the timed region (system tbb-flow).
 *
 * Usage: bench_tbb [--ops N] [--reps R] [--threads T] [--only LETTERS]
 */
#include <oneapi/tbb/flow_graph.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>
#include <oneapi/tbb/version.h>
#include <pthread.h>

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "bench_common.h"
#include "bench_pushers.h"

namespace flow = tbb::flow;
using op_node = flow::continue_node<flow::continue_msg>;

namespace {

/* One op of a workload: the vars it reads and the var it mutates (if any). */
struct op_access {
  uint32_t reads[2];
  uint32_t nreads;
  int64_t write; /* -1: the op only reads */
};

/* A workload as ordo is given it: the op sequence over nvars vars. */
struct program {
  size_t nvars = 0;
  std::vector<op_access> ops;
};

program independent_program(size_t n) { /* A and each half of E */
  program p;
  p.nvars = n;
  for (size_t i = 0; i < n; i++) p.ops.push_back({{0, 0}, 0, (int64_t)i});
  return p;
}

program chain_program(size_t n) { /* B */
  program p;
  p.nvars = 1;
  p.ops.assign(n, op_access{{0, 0}, 0, 0});
  return p;
}

program fanout_program(size_t n) { /* C */
  program p;
  p.nvars = 1;
  for (size_t r = 0; r < n / 10; r++) {
    p.ops.push_back({{0, 0}, 0, 0});
    for (int k = 0; k < BENCH_FAN_READERS; k++) p.ops.push_back({{0, 0}, 1, -1});
  }
  return p;
}

program dag_program(size_t n) { /* D */
  program p;
  p.nvars = BENCH_DAG_VARS;
  uint32_t* idx = bench_dag_indices(n);
  for (size_t k = 0; k < n; k++) p.ops.push_back({{idx[3 * k], idx[3 * k + 1]}, 2, idx[3 * k + 2]});
  free(idx);
  return p;
}

struct empty_body {
  flow::continue_msg operator()(const flow::continue_msg&) const { return {}; }
};

/* A program turned into a flow graph. The graph is declared first so that it outlives (is
 * destroyed after) its nodes. It must be constructed inside the arena that is to run it: a
 * flow graph runs its tasks in the arena it was created in. */
struct built_graph {
  flow::graph g;
  std::deque<op_node> nodes; /* a deque: nodes never move, and need not be copyable */
  std::vector<op_node*> roots;

  explicit built_graph(const program& p) {
    build(p, [](size_t) { return empty_body{}; });
  }
  /* make_body(k) gives op k's body: a check can record when each op runs. */
  template <typename MakeBody>
  built_graph(const program& p, MakeBody make_body) {
    build(p, make_body);
  }

  /* Dependency analysis, the same rules as ordo: readers wait for the last mutation; a mutation
   * waits for the readers since the previous mutation, or for that mutation if none read. */
  template <typename MakeBody>
  void build(const program& p, MakeBody make_body) {
    std::vector<int64_t> last_writer(p.nvars, -1);
    std::vector<std::vector<size_t>> readers(p.nvars);
    std::vector<size_t> preds;
    for (size_t k = 0; k < p.ops.size(); k++) {
      const op_access& op = p.ops[k];
      nodes.emplace_back(g, make_body(k));
      preds.clear();
      for (uint32_t j = 0; j < op.nreads; j++) {
        uint32_t v = op.reads[j];
        if (last_writer[v] >= 0) preds.push_back((size_t)last_writer[v]);
        readers[v].push_back(k);
      }
      if (op.write >= 0) {
        size_t w = (size_t)op.write;
        if (!readers[w].empty()) {
          preds.insert(preds.end(), readers[w].begin(), readers[w].end());
          readers[w].clear();
        } else if (last_writer[w] >= 0) {
          preds.push_back((size_t)last_writer[w]);
        }
        last_writer[w] = (int64_t)k;
      }
      /* An edge counts once per make_edge: duplicates would only cost extra messages. */
      std::sort(preds.begin(), preds.end());
      preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
      for (size_t src : preds) flow::make_edge(nodes[src], nodes[k]);
      if (preds.empty()) roots.push_back(&nodes[k]);
    }
  }

  /* Starts every op without predecessors and waits for the whole graph. A continue_node resets
   * its count when it fires, so a graph can be run again. */
  void run() {
    for (op_node* r : roots) r->try_put(flow::continue_msg());
    g.wait_for_all();
  }
};

struct tbb_bench {
  const bench_args* args;
  tbb::task_arena* arena;     /* T slots: the calling thread and T-1 workers */
  tbb::task_arena* two_arena; /* E: slots for the two pusher threads */
  std::map<size_t, std::unique_ptr<built_graph>> prebuilt; /* by op count */
  std::map<size_t, std::unique_ptr<built_graph>> prebuilt_halves[2];
  /* The current workload's programs by op count (the list of vars per op: what a caller hands
   * ordo), made before timing. */
  std::map<size_t, program> programs;
  std::vector<uint64_t> cells;  /* F: where each task leaves its kernel's result */
  bench_pushers* two = nullptr; /* E: started before any timing, as for every system */
  void (*two_half)(tbb_bench* b, int which, size_t half) = nullptr; /* E's current workload */
};

/* tbb-flow: dependency analysis, graph construction, run and destruction, all timed. */
size_t run_flow(void* p, size_t n) {
  auto* b = static_cast<tbb_bench*>(p);
  const program& prog = b->programs.at(n);
  b->arena->execute([&] {
    built_graph graph(prog);
    graph.run();
  });
  return prog.ops.size();
}

size_t run_prebuilt(void* p, size_t n) {
  auto* b = static_cast<tbb_bench*>(p);
  built_graph& graph = *b->prebuilt.at(n);
  b->arena->execute([&] { graph.run(); });
  return graph.nodes.size();
}

size_t run_task_group(void* p, size_t n) { /* A only: no dependencies */
  auto* b = static_cast<tbb_bench*>(p);
  b->arena->execute([&] {
    tbb::task_group tg;
    for (size_t i = 0; i < n; i++) tg.run([] {});
    tg.wait();
  });
  return n;
}

/* E: bench_pushers.h's two threads, released together, each run b->two_half on its half
 * inside two_arena. */
void push_half_in_arena(void* ctx, int which, size_t half) {
  auto* b = static_cast<tbb_bench*>(ctx);
  b->two_arena->execute([&] { b->two_half(b, which, half); });
}

size_t run_two_pushers(tbb_bench* b, size_t n, void (*half)(tbb_bench*, int, size_t)) {
  b->two_half = half; /* published to the pushers by bench_pushers_run's barrier */
  return bench_pushers_run(b->two, n);
}

size_t run_two_flow(void* p, size_t n) {
  auto* b = static_cast<tbb_bench*>(p);
  return run_two_pushers(b, n, [](tbb_bench* b, int, size_t half) {
    built_graph graph(b->programs.at(half));
    graph.run();
  });
}

size_t run_two_prebuilt(void* p, size_t n) {
  auto* b = static_cast<tbb_bench*>(p);
  return run_two_pushers(
      b, n, [](tbb_bench* b, int i, size_t half) { b->prebuilt_halves[i].at(half)->run(); });
}

size_t run_two_task_groups(void* p, size_t n) {
  auto* b = static_cast<tbb_bench*>(p);
  return run_two_pushers(b, n, [](tbb_bench*, int, size_t half) {
    tbb::task_group tg;
    for (size_t k = 0; k < half; k++) tg.run([] {});
    tg.wait();
  });
}

/* The op counts bench_run_workload will ask for: the warm-up, then the timed size. */
std::vector<size_t> workload_sizes(const bench_args* a) {
  return {a->ops / 10, a->ops};
}

void prepare_programs(tbb_bench* b, program (*make)(size_t), bool halves) {
  b->programs.clear();
  for (size_t n : workload_sizes(b->args)) {
    size_t m = halves ? n / 2 : n;
    b->programs.emplace(m, make(m));
  }
}

void prepare_prebuilt(tbb_bench* b, bool halves) {
  for (auto& kv : b->programs) {
    if (!halves) {
      b->arena->execute([&] { b->prebuilt[kv.first] = std::make_unique<built_graph>(kv.second); });
      continue;
    }
    for (auto& half_graphs : b->prebuilt_halves)
      b->two_arena->execute(
          [&] { half_graphs[kv.first] = std::make_unique<built_graph>(kv.second); });
  }
}

void drop_prebuilt(tbb_bench* b) {
  b->prebuilt.clear();
  for (auto& h : b->prebuilt_halves) h.clear();
}

/* A-D on one thread of submission: tbb-flow, tbb-flow-prebuilt and (A only) tbb-tg. */
void run_single_pusher(tbb_bench* b, char w, program (*make)(size_t)) {
  const bench_args* a = b->args;
  prepare_programs(b, make, false);
  bench_run_workload("tbb-flow", w, a, run_flow, b);
  prepare_prebuilt(b, false);
  bench_run_workload("tbb-flow-prebuilt", w, a, run_prebuilt, b);
  drop_prebuilt(b);
  if (w == 'A') {
    bench_run_workload("tbb-tg", w, a, run_task_group, b);
  } else {
    bench_skip("tbb-tg", w,
               "task_group has no way to state data dependencies; see tbb-flow (explicit DAG)");
  }
}

void run_two_pusher_workload(tbb_bench* b) {
  const bench_args* a = b->args;
  b->two = bench_pushers_start(push_half_in_arena, b);
  prepare_programs(b, independent_program, true);
  bench_run_workload("tbb-flow", 'E', a, run_two_flow, b);
  prepare_prebuilt(b, true);
  bench_run_workload("tbb-flow-prebuilt", 'E', a, run_two_prebuilt, b);
  drop_prebuilt(b);
  bench_run_workload("tbb-tg", 'E', a, run_two_task_groups, b);
  bench_pushers_stop(b->two);
  b->two = nullptr;
}

/* F: task (s, i) depends on (s-1, i-1..i+1); graph built and destroyed inside the timing. */
void tbb_stencil(void* p, int width, int steps, uint64_t iterations) {
  auto* b = static_cast<tbb_bench*>(p);
  b->cells.assign((size_t)width * (size_t)steps, 0);
  uint64_t* cells = b->cells.data();
  b->arena->execute([&] {
    flow::graph g;
    std::deque<op_node> nodes;
    for (int s = 0; s < steps; s++) {
      for (int i = 0; i < width; i++) {
        uint64_t* out = cells + (size_t)s * (size_t)width + (size_t)i;
        nodes.emplace_back(g, [out, iterations](const flow::continue_msg&) {
          *out = bench_kernel(iterations);
          return flow::continue_msg();
        });
        for (int j = i - 1; s > 0 && j <= i + 1; j++)
          if (j >= 0 && j < width)
            flow::make_edge(nodes[(size_t)(s - 1) * (size_t)width + (size_t)j], nodes.back());
      }
    }
    for (int i = 0; i < width; i++) nodes[(size_t)i].try_put(flow::continue_msg());
    g.wait_for_all();
  });
}

}  // namespace

int main(int argc, char** argv) {
  bench_args a = bench_parse_args(argc, argv);
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, (size_t)a.threads);
  tbb::task_arena arena(a.threads);
  tbb::task_arena two_arena(std::max(a.threads, 2), 2);
  fprintf(stderr, "bench_tbb: oneTBB %s, arena of %d threads (the waiting thread included)\n",
          TBB_VERSION_STRING, arena.max_concurrency());

  tbb_bench b;
  b.args = &a;
  b.arena = &arena;
  b.two_arena = &two_arena;
  if (bench_wants(&a, 'A')) run_single_pusher(&b, 'A', independent_program);
  if (bench_wants(&a, 'B')) run_single_pusher(&b, 'B', chain_program);
  if (bench_wants(&a, 'C')) run_single_pusher(&b, 'C', fanout_program);
  if (bench_wants(&a, 'D')) run_single_pusher(&b, 'D', dag_program);
  if (bench_wants(&a, 'E')) run_two_pusher_workload(&b);
  if (bench_wants(&a, 'F')) {
    bench_metg_sweep("tbb-flow", a.threads, tbb_stencil, &b);
    bench_skip("tbb-flow-prebuilt", 'F', "the stencil graph is built inside the timing (tbb-flow)");
    bench_skip("tbb-tg", 'F', "task_group has no way to state the stencil's dependencies");
  }
  return 0;
}
