// fuzz_graph_replay: random programs captured into graphs (ordo_graph_*) and launched,
// interleaved with direct pushes of the same ops, var waits, clear_error and deferred
// completions, on the naive, pooled and per_device engines, checked against the reference model
// of fuzz_api (api_model.h): a launch must behave exactly as its captured pushes made again, so
// the model simply pushes the captured ops once per launch.
//
// Input: byte 0 picks the engine; then steps, each a byte (below(7)) and its arguments:
//   0 push template t directly         1 capture 1-4 templates into a new graph (misuse inside)
//   2 launch graph g                   3 complete the oldest deferred run of template t (code)
//   4 destroy graph g                  5 wait for var v (when the model says it finishes)
//   6 clear_error on var v
// Templates (6, fixed per input from the bytes after the engine): reads, writes, a return code,
// deferral (only for templates that write: their runs are then ordered, so the k-th deferred
// call is the model's k-th run) and a free_fn.
//
// Oracle: statuses as documented; the naive engine runs everything inside the calls, so after
// every step each template's calls equal the model's runs; threaded engines may lag but never
// run more. At the end, after completing every deferred run and ordo_wait_for_all: calls, skips,
// var errors, the wait_for_all status and the free_fn counts (per direct push; per captured push
// at graph destroy) all match.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "api_model.h"
#include "fuzz_check.h"
#include "fuzz_input.h"
#include "ordo/ordo.h"
#include "watchdog.h"

namespace fuzz_graph {
namespace {

using fuzz::bit;
using fuzz_api::Access;
using fuzz_api::Behaviour;
using fuzz_api::Model;
using fuzz_api::Node;
using fuzz_api::NodeKind;

constexpr int kEngines = 3;
constexpr int kVars = 4;
constexpr int kTemplates = 6;
constexpr int kMaxGraphs = 3;
constexpr int kMaxSteps = 48;
constexpr int kHangSeconds = 20;
const int32_t kCodes[] = {0, 0, 0, 5, 9};

ordo_engine* g_engines[kEngines];

struct Template {
  int id = 0;
  std::vector<Access> access;
  ordo_var reads[kVars], writes[kVars];
  size_t nr = 0, nw = 0;
  Behaviour behaviour = Behaviour::kReturn;
  int32_t code = 0;
  bool with_free = false;
  bool plain = false;  // pushed with opts NULL (ordo_opr_push's plain path when it has one var)
  std::atomic<int> calls{0};
  std::atomic<int> frees{0};
  std::mutex m;
  std::vector<ordo_completion> handles;  // deferred calls, in call order
  std::vector<int> runs;                 // the model's nodes of this template, push order
};

int32_t run_template(ordo_exec* x, void* ud) {
  auto* t = static_cast<Template*>(ud);
  if (t->behaviour == Behaviour::kDeferLater) {
    ordo_completion c = 0;
    FUZZ_CHECK(ordo_exec_defer(x, &c) == ORDO_OK, "defer failed: %s", ordo_last_error_message());
    std::lock_guard<std::mutex> g(t->m);
    t->handles.push_back(c);
    t->calls.fetch_add(1, std::memory_order_release);
    return 0;
  }
  t->calls.fetch_add(1, std::memory_order_release);
  return t->code;
}

void count_free(void* ud) {
  static_cast<Template*>(ud)->frees.fetch_add(1, std::memory_order_relaxed);
}

struct GraphRec {
  ordo_graph* g = nullptr;
  std::vector<int> templates;  // captured, in order
  std::vector<int> nodes;      // the model's nodes of every launch
};

class Session {
 public:
  Session(ordo_engine* e, bool naive, fuzz::Input& in) : e_(e), naive_(naive), in_(in) {}

  void run() {
    ordo_stats st = stats();
    skipped0_ = st.skipped;
    for (int v = 0; v < kVars; ++v) {
      EXPECT_STATUS(ordo_var_new(e_, &vars_[v]), 0);
      model_.add_var(vars_[v]);
    }
    for (int i = 0; i < kTemplates; ++i) make_template(i);
    for (int s = 0; s < kMaxSteps && !in_.done(); ++s) {
      step();
      check_calls(!naive_);
    }
    finish();
  }

 private:
  void make_template(int i) {
    Template& t = tpl_[i];
    t.id = i;
    const uint8_t r = in_.byte(), w = in_.byte(), how = in_.byte();
    for (int v = 0; v < kVars; ++v) {
      if (w & (1u << v)) {
        t.writes[t.nw++] = vars_[v];
        t.access.push_back({v, true});
      } else if (r & (1u << v)) {
        t.reads[t.nr++] = vars_[v];
        t.access.push_back({v, false});
      }
    }
    t.code = kCodes[how % 5];
    t.behaviour = t.nw > 0 && (how & 0x40) ? Behaviour::kDeferLater : Behaviour::kReturn;
    t.with_free = how & 0x80;
    t.plain = !t.with_free && (how & 0x20);
  }

  ordo_stats stats() {
    ordo_stats st;
    std::memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    EXPECT_STATUS(ordo_engine_stats(e_, &st), 0);
    return st;
  }

  ordo_status push(Template& t) {
    if (t.plain) return ordo_opr_push(e_, run_template, &t, t.reads, t.nr, t.writes, t.nw, nullptr);
    ordo_push_opts o;
    ordo_push_opts_init(&o);
    o.name = "tpl";
    if (t.with_free) o.free_fn = count_free;
    return ordo_opr_push(e_, run_template, &t, t.reads, t.nr, t.writes, t.nw, &o);
  }

  int model_push(Template& t) {
    int id = model_.push(NodeKind::kUser, t.access, t.behaviour, t.code);
    t.runs.push_back(id);
    return id;
  }

  void step() {
    switch (in_.below(7)) {
      case 0: {
        Template& t = tpl_[in_.below(kTemplates)];
        EXPECT_STATUS(push(t), 0);
        model_push(t);
        ++direct_frees_[t.id];
        break;
      }
      case 1:
        capture();
        break;
      case 2:
        launch();
        break;
      case 3:
        complete_oldest(tpl_[in_.below(kTemplates)], kCodes[in_.below(5)]);
        break;
      case 4:
        destroy(in_.below(kMaxGraphs));
        break;
      case 5:
        wait_var(static_cast<int>(in_.below(kVars)));
        break;
      default: {
        int v = static_cast<int>(in_.below(kVars));
        EXPECT_STATUS(ordo_var_clear_error(e_, vars_[v]), 0);
        model_.push(NodeKind::kClearError, {{v, true}});
        break;
      }
    }
  }

  void capture() {
    int slot = -1;
    for (int i = 0; i < kMaxGraphs && slot < 0; ++i) slot = graphs_[i].g ? -1 : i;
    const int n = 1 + static_cast<int>(in_.below(4));
    const uint8_t misuse = in_.byte();
    if (slot < 0) return;
    GraphRec& rec = graphs_[slot];
    const uint64_t pushed0 = stats().pushed;
    EXPECT_STATUS(ordo_graph_begin_capture(e_), 0);
    for (int i = 0; i < n; ++i) {
      Template& t = tpl_[in_.below(kTemplates)];
      EXPECT_STATUS(push(t), 0);
      rec.templates.push_back(t.id);
      if (misuse & 1) EXPECT_STATUS(ordo_wait_for_all(e_), bit(ORDO_ERR_INVALID_STATE));
      if (misuse & 2) EXPECT_STATUS(ordo_graph_begin_capture(e_), bit(ORDO_ERR_INVALID_STATE));
      if (misuse & 4) {
        EXPECT_STATUS(ordo_var_delete(e_, vars_[0]), bit(ORDO_ERR_INVALID_STATE));
      }
    }
    EXPECT_STATUS(ordo_graph_end_capture(e_, &rec.g), 0);
    FUZZ_CHECK(stats().pushed == pushed0, "a captured push was pushed");
    check_calls(!naive_);
  }

  void launch() {
    GraphRec& rec = graphs_[in_.below(kMaxGraphs)];
    if (!rec.g) return;
    EXPECT_STATUS(ordo_graph_launch(rec.g), 0);
    for (int id : rec.templates) rec.nodes.push_back(model_push(tpl_[id]));
  }

  // The model's oldest run of t still deferred, and the index of its call.
  bool oldest_deferred(const Template& t, int* node, size_t* call) {
    size_t ran = 0;
    for (int id : t.runs) {
      const Node& n = model_.node(id);
      if (n.state == Node::kDeferred) {
        *node = id;
        *call = ran;
        return true;
      }
      ran += n.ran;
    }
    return false;
  }

  void complete_oldest(Template& t, int32_t code) {
    int node = -1;
    size_t call = 0;
    if (!oldest_deferred(t, &node, &call)) return;
    ordo_completion c = 0;
    {
      fuzz::Watchdog::Scope w("the callback of a run the model has started", kHangSeconds);
      for (;;) {
        {
          std::lock_guard<std::mutex> g(t.m);
          if (t.handles.size() > call) {
            c = t.handles[call];
            break;
          }
        }
        FUZZ_CHECK(!naive_, "naive: the deferred run of template %d was not called", t.id);
        std::this_thread::yield();
      }
    }
    EXPECT_STATUS(ordo_complete(c, code, "completed"), 0);
    model_.complete(node, code);
  }

  void destroy(int slot) {
    GraphRec& rec = graphs_[slot];
    if (!rec.g) return;
    bool done = true;
    for (int id : rec.nodes) done &= model_.node(id).state == Node::kDone;
    ordo_status s = ordo_graph_destroy(rec.g);
    if (!done || !naive_) {
      // Threaded engines may still be finishing ops the model has finished.
      EXPECT_STATUS(
          s, done ? bit(ORDO_OK) | bit(ORDO_ERR_INVALID_STATE) : bit(ORDO_ERR_INVALID_STATE));
    } else {
      EXPECT_STATUS(s, 0);
    }
    if (s == ORDO_OK) forget(rec);
  }

  void forget(GraphRec& rec) {
    for (int id : rec.templates) ++graph_frees_[id];
    EXPECT_STATUS(ordo_graph_launch(rec.g), bit(ORDO_ERR_INVALID_HANDLE));
    rec = GraphRec{};
  }

  void wait_var(int v) {
    if (!model_.var_quiet(v)) return;
    int id = model_.push_wait(v);
    ordo_status s;
    {
      fuzz::Watchdog::Scope w("ordo_wait_for_var", kHangSeconds);
      s = ordo_wait_for_var(e_, vars_[v]);
    }
    EXPECT_STATUS(s, model_.node(id).saw.empty() ? 0 : bit(ORDO_ERR_OP_FAILED));
  }

  // Every template's calls against the model's runs: equal, or at most (threaded, mid-run).
  void check_calls(bool at_most) {
    for (Template& t : tpl_) {
      int want = 0;
      for (int id : t.runs) want += model_.node(id).ran;
      int got = t.calls.load(std::memory_order_acquire);
      FUZZ_CHECK(at_most ? got <= want : got == want, "template %d called %d times, model: %d",
                 t.id, got, want);
    }
  }

  void finish() {
    for (bool more = true; more;) {
      more = false;
      for (Template& t : tpl_) {
        int node;
        size_t call;
        if (oldest_deferred(t, &node, &call)) {
          complete_oldest(t, 0);
          more = true;
        }
      }
    }
    FUZZ_CHECK(model_.all_done(), "the model has ops left after completing every deferral");
    ordo_status s;
    {
      fuzz::Watchdog::Scope w("ordo_wait_for_all", kHangSeconds);
      s = ordo_wait_for_all(e_);
    }
    EXPECT_STATUS(s, model_.take_failure() ? bit(ORDO_ERR_OP_FAILED) : 0);
    check_calls(false);
    check_errors_and_skips();
    for (GraphRec& rec : graphs_) {
      if (!rec.g) continue;
      EXPECT_STATUS(ordo_graph_destroy(rec.g), 0);
      forget(rec);
    }
    for (Template& t : tpl_) {
      const int want = t.with_free ? direct_frees_[t.id] + graph_frees_[t.id] : 0;
      FUZZ_CHECK(t.frees.load() == want, "template %d: %d free_fn calls, expected %d", t.id,
                 t.frees.load(), want);
    }
    for (int v = 0; v < kVars; ++v) EXPECT_STATUS(ordo_var_delete(e_, vars_[v]), 0);
    fuzz::Watchdog::Scope w("ordo_wait_for_all (clean-up)", kHangSeconds);
    EXPECT_STATUS(ordo_wait_for_all(e_), 0);
  }

  void check_errors_and_skips() {
    uint64_t skipped = 0;
    for (int id = 0; id < model_.num_nodes(); ++id) {
      skipped += model_.node(id).kind == NodeKind::kUser && model_.node(id).skipped;
    }
    FUZZ_CHECK(stats().skipped - skipped0_ == skipped, "skipped %llu, model: %llu",
               static_cast<unsigned long long>(stats().skipped - skipped0_),
               static_cast<unsigned long long>(skipped));
    for (int v = 0; v < kVars; ++v) {
      int32_t code = 0;
      EXPECT_STATUS(ordo_var_get_error(e_, vars_[v], &code, nullptr, 0), 0);
      const auto& want = model_.var(v).error;
      bool ok = want.empty() ? code == 0 : std::find(want.begin(), want.end(), code) != want.end();
      FUZZ_CHECK(ok, "var %d carries error %d, not what the model allows", v, code);
    }
  }

  ordo_engine* const e_;
  const bool naive_;
  fuzz::Input& in_;
  Model model_;
  ordo_var vars_[kVars] = {};
  Template tpl_[kTemplates];
  GraphRec graphs_[kMaxGraphs];
  int direct_frees_[kTemplates] = {};
  int graph_frees_[kTemplates] = {};
  uint64_t skipped0_ = 0;
};

}  // namespace
}  // namespace fuzz_graph

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  for (const char* v :
       {"ORDO_ENGINE", "ORDO_CPU_THREADS", "ORDO_MAX_PENDING", "ORDO_TRACE", "ORDO_PUSHERS_HELP"}) {
    unsetenv(v);
  }
  const int32_t kinds[] = {ORDO_ENGINE_NAIVE, ORDO_ENGINE_POOLED, ORDO_ENGINE_PER_DEVICE};
  for (int i = 0; i < fuzz_graph::kEngines; ++i) {
    ordo_engine_config cfg;
    ordo_engine_config_init(&cfg);
    cfg.kind = kinds[i];
    cfg.cpu_threads = 2;
    EXPECT_STATUS(ordo_engine_create(&cfg, &fuzz_graph::g_engines[i]), 0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fuzz_graph;
  fuzz::Input in(data, size);
  const int which = static_cast<int>(in.below(kEngines));
  Session s(g_engines[which], which == 0, in);
  s.run();
  return 0;
}
