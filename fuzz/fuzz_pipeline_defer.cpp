// fuzz_pipeline_defer: random deferral scripts through ordo's pipelines, against a small
// sequential model of pipeline.md §3.2.
//
// An input picks an engine (naive; per_device with 1 or 2 workers; pooled with 3), a number of
// lines (1-8) and pipes (1-4, the later ones serial or parallel), then up to 6 steps: a run
// (ordo_pipeline_run), a pushed run (ordo_pipeline_push on a var, then ordo_wait_for_var), a
// reset, or a reset_pipes (new lines and pipe types). Each run has a script: where pipe 0 stops,
// up to 8 rules "in the invocation of token t with num_deferrals d, defer to these targets
// (past, future, self, never generated, UINT64_MAX, any), then maybe stop", and maybe a failure
// (pipe 0 at (t, d), or a later pipe at token t).
//
// The model runs the same script sequentially and says, for every run: the pipe-0 invocation
// sequence (token, num_deferrals, line), the accepted order with each token's line and
// num_deferrals, the dropped ids, num_tokens and the status. The engine must match it exactly:
// serial pipes in accepted order, parallel pipes as a set. After a failure the decisions of
// pipe 0 are still the model's up to the point where the run stopped, later pipes saw a prefix
// (serial) or a subset (parallel) of the accepted tokens, and the pipeline refuses to run until
// it is reset. A run or wait that does not return within 20 s is reported as a HANG.
#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "fuzz_input.h"
#include "ordo/ordo.h"
#include "watchdog.h"

namespace fuzz_pipeline {

constexpr int kFailCode = 77;
constexpr uint64_t kNever = 1000000;  // added to N: a target no run generates

struct Rule {
  uint64_t token;
  uint32_t nd;
  std::vector<uint64_t> targets;
  bool then_stop;
};

struct Script {
  uint64_t stop;
  std::vector<Rule> rules;
  int fail_pipe = -1;  // -1: none
  uint64_t fail_token = 0;
  uint32_t fail_nd = 0;  // pipe 0 only

  const Rule* rule_for(uint64_t t, uint32_t nd) const {
    for (const Rule& r : rules) {
      if (r.token == t && r.nd == nd) return &r;
    }
    return nullptr;
  }
  bool pipe0_fails(uint64_t t, uint32_t nd) const {
    return fail_pipe == 0 && fail_token == t && fail_nd == nd;
  }
};

struct Step0 {  // one pipe-0 invocation
  uint64_t token;
  uint32_t nd;
  uint32_t line;
  bool operator==(const Step0& o) const {
    return token == o.token && nd == o.nd && line == o.line;
  }
};
struct Seen {  // one token in a later pipe, or accepted by pipe 0
  uint64_t token;
  uint32_t line;
  uint32_t nd;
  bool operator==(const Seen& o) const {
    return token == o.token && line == o.line && nd == o.nd;
  }
  bool operator<(const Seen& o) const { return token < o.token; }
};

struct Outcome {
  std::vector<Step0> pipe0;
  std::vector<Seen> accepted;
  std::vector<uint64_t> dropped;
  bool failed = false;  // a pipe-0 failure (the model does not fail later pipes)
};

// ---- the model: pipeline.md §3.2, sequentially, with ordo's fixes --------------------------

class Model {
 public:
  uint64_t n = 0;         // num_tokens
  uint64_t accepted = 0;  // since the reset: the line ring
  uint32_t lines = 1;

  FUZZ_ORACLE Outcome run(const Script& s) {
    Outcome out;
    std::deque<std::pair<uint64_t, uint32_t>> ready;
    std::map<uint64_t, std::pair<uint32_t, uint32_t>> deferred;  // token -> (nd, remaining)
    std::map<uint64_t, std::vector<uint64_t>> waiters;
    uint32_t line = static_cast<uint32_t>(accepted % lines);
    for (;;) {  // pipe-0 steps
      uint64_t t;
      uint32_t nd;
      if (!ready.empty()) {
        t = ready.front().first;
        nd = ready.front().second;
        ready.pop_front();
      } else {
        t = n;
        nd = 0;
      }
      bool next_token = false;
      while (!next_token) {  // invocations of t
        out.pipe0.push_back({t, nd, line});
        if (s.pipe0_fails(t, nd)) {
          out.failed = true;
          return finish(out, ready, deferred);
        }
        const Rule* r = s.rule_for(t, nd);
        if (t == s.stop || (r && r->then_stop)) {
          if (t != n) ready.push_back({t, nd});  // a resumed token stopped on: dropped
          return finish(out, ready, deferred);
        }
        if (t == n) ++n;
        std::set<uint64_t> pending;
        if (r) pending.insert(r->targets.begin(), r->targets.end());
        if (pending.empty()) {
          for (uint64_t w : waiters[t]) {
            auto it = deferred.find(w);
            if (it != deferred.end() && --it->second.second == 0) {
              ready.push_back({w, it->second.first});
              deferred.erase(it);
            }
          }
          waiters.erase(t);
          out.accepted.push_back({t, line, nd});
          ++accepted;
          line = (line + 1) % lines;
          break;  // the next step, on the next line
        }
        ++nd;
        uint32_t kept = 0;
        for (uint64_t x : pending) {
          if (x >= n || deferred.count(x)) {
            waiters[x].push_back(t);
            ++kept;
          }
        }
        if (kept) {
          deferred[t] = {nd, kept};
          next_token = true;  // the same line takes the next token
        }
      }
      if (next_token) continue;
    }
  }

 private:
  FUZZ_ORACLE static Outcome finish(Outcome& out,
                                    const std::deque<std::pair<uint64_t, uint32_t>>& ready,
                                    const std::map<uint64_t, std::pair<uint32_t, uint32_t>>& d) {
    for (const auto& r : ready) out.dropped.push_back(r.first);
    for (const auto& e : d) out.dropped.push_back(e.first);
    std::sort(out.dropped.begin(), out.dropped.end());
    return out;
  }
};

// ---- the pipeline under test: callbacks record what they see --------------------------------

struct Recorder {
  const Script* script = nullptr;
  std::vector<Step0> pipe0;  // pipe-0 steps never overlap
  std::mutex m;              // later pipes: parallel ones run at once
  std::vector<Seen> later[4];
  std::atomic<int> running[4] = {};
  std::atomic<int> bad{0};
  const char* bad_what = "";
};

struct PipeCtx {
  Recorder* r;
  int pipe;
};

int32_t pipe0(ordo_pipeflow* pf, void* ud) {
  Recorder* r = static_cast<PipeCtx*>(ud)->r;
  const Script& s = *r->script;
  if (r->running[0].fetch_add(1) != 0) {
    r->bad_what = "two pipe-0 callbacks at once";
    r->bad.fetch_add(1);
  }
  const uint64_t t = ordo_pipeflow_token(pf);
  const uint32_t nd = ordo_pipeflow_num_deferrals(pf);
  r->pipe0.push_back({t, nd, ordo_pipeflow_line(pf)});
  int32_t ret = 0;
  if (s.pipe0_fails(t, nd)) {
    ret = kFailCode;
  } else {
    const Rule* rule = s.rule_for(t, nd);
    if (rule) {
      for (uint64_t x : rule->targets) {
        if (ordo_pipeflow_defer(pf, x) != ORDO_OK) r->bad.fetch_add(1);
      }
    }
    if (t == s.stop || (rule && rule->then_stop)) {
      if (ordo_pipeflow_stop(pf) != ORDO_OK) r->bad.fetch_add(1);
    }
  }
  r->running[0].fetch_sub(1);
  return ret;
}

int32_t later(ordo_pipeflow* pf, void* ud) {
  auto* c = static_cast<PipeCtx*>(ud);
  Recorder* r = c->r;
  const uint64_t t = ordo_pipeflow_token(pf);
  {
    std::lock_guard<std::mutex> g(r->m);
    r->later[c->pipe].push_back({t, ordo_pipeflow_line(pf), ordo_pipeflow_num_deferrals(pf)});
  }
  if (ordo_pipeflow_stop(pf) != ORDO_ERR_INVALID_STATE ||
      ordo_pipeflow_defer(pf, t + 1) != ORDO_ERR_INVALID_STATE) {
    r->bad_what = "stop/defer in a later pipe was not refused";
    r->bad.fetch_add(1);
  }
  const Script& s = *r->script;
  return s.fail_pipe == c->pipe && s.fail_token == t ? kFailCode : 0;
}

// ---- the session -------------------------------------------------------------------------------

ordo_engine* engine_of(uint32_t which) {
  static ordo_engine* engines[4] = {};
  static const int32_t kinds[4] = {ORDO_ENGINE_NAIVE, ORDO_ENGINE_PER_DEVICE,
                                   ORDO_ENGINE_PER_DEVICE, ORDO_ENGINE_POOLED};
  static const int32_t threads[4] = {1, 1, 2, 3};
  if (!engines[which]) {
    ordo_engine_config cfg;
    ordo_engine_config_init(&cfg);
    cfg.kind = kinds[which];
    cfg.cpu_threads = threads[which];
    FUZZ_CHECK(ordo_engine_create(&cfg, &engines[which]) == ORDO_OK, "engine_create: %s",
               ordo_last_error_message());
  }
  return engines[which];
}

class Session {
 public:
  explicit Session(fuzz::Input& in) : in_(in) {}

  void run() {
    const uint32_t which = in_.below(4);
    e_ = engine_of(which);
    const uint32_t lines = 1 + in_.below(8);
    read_pipes();
    model_.lines = lines;
    EXPECT_STATUS(ordo_pipeline_create(e_, lines, pipes_, num_pipes_, &p_), 0);
    EXPECT_STATUS(ordo_var_new(e_, &var_), 0);
    FUZZ_TRACE("engine %u, %u lines, %zu pipes\n", which, lines, num_pipes_);
    for (int step = 0; step < 6 && !in_.done(); ++step) {
      switch (in_.below(6)) {
        case 0:
        case 1:
        case 2:
          one_run(false);
          break;
        case 3:
          one_run(true);
          break;
        case 4:
          reset();
          break;
        default:
          reset_pipes();
          break;
      }
    }
    EXPECT_STATUS(ordo_pipeline_destroy(p_), 0);
    EXPECT_STATUS(ordo_var_delete(e_, var_), 0);
  }

 private:
  void read_pipes() {
    num_pipes_ = 1 + in_.below(4);
    const uint32_t kinds = in_.byte();
    for (size_t f = 0; f < num_pipes_; ++f) {
      ctx_[f] = {&rec_, static_cast<int>(f)};
      const bool parallel = f > 0 && (kinds >> f) & 1;
      types_[f] = parallel ? ORDO_PIPE_PARALLEL : ORDO_PIPE_SERIAL;
      pipes_[f] = {types_[f], f == 0 ? pipe0 : later, &ctx_[f]};
    }
  }

  uint64_t target(uint64_t token) {
    const uint64_t n = model_.n;
    switch (in_.below(6)) {
      case 0: {  // the past (maybe accepted, maybe deferred)
        const uint64_t back = 1 + in_.below(4);
        return token >= back ? token - back : 0;
      }
      case 1:  // the future
        return token + 1 + in_.below(6);
      case 2:
        return token;
      case 3:
        return n + kNever;
      case 4:
        return UINT64_MAX;
      default:
        return n + in_.below(30);
    }
  }

  Script read_script() {
    Script s;
    const uint64_t n = model_.n;
    s.stop = n + in_.below(24);
    const uint32_t nrules = in_.below(9);
    for (uint32_t i = 0; i < nrules; ++i) {
      Rule r;
      r.token = n + in_.below(24);
      r.nd = in_.below(3);
      const uint32_t b = in_.byte();
      const uint32_t ntargets = b % 4;
      r.then_stop = (b & 0x80) != 0 && (b & 0x40) != 0;  // rare
      for (uint32_t k = 0; k < ntargets; ++k) r.targets.push_back(target(r.token));
      s.rules.push_back(r);
    }
    const uint32_t f = in_.below(12);
    if (f == 0) {
      s.fail_pipe = 0;
      s.fail_token = n + in_.below(24);
      s.fail_nd = in_.below(2);
    } else if (f == 1 && num_pipes_ > 1) {
      s.fail_pipe = 1 + static_cast<int>(in_.below(static_cast<uint32_t>(num_pipes_ - 1)));
      s.fail_token = n + in_.below(24);
    }
    return s;
  }

  FUZZ_ORACLE void one_run(bool pushed) {
    if (needs_reset_) {  // a failed run: refused until reset, then reset
      EXPECT_STATUS(ordo_pipeline_run(p_), fuzz::bit(ORDO_ERR_INVALID_STATE));
      EXPECT_STATUS(ordo_pipeline_push(p_, nullptr, 0, nullptr, 0, nullptr),
                    fuzz::bit(ORDO_ERR_INVALID_STATE));
      reset();
    }
    const Script s = read_script();
    Outcome want = model_.run(s);
    // A later pipe's failure happens only if its token is accepted.
    bool later_fails = false;
    if (s.fail_pipe > 0) {
      for (const Seen& a : want.accepted) later_fails |= a.token == s.fail_token;
    }
    rec_.script = &s;
    rec_.pipe0.clear();
    for (auto& v : rec_.later) v.clear();
    FUZZ_TRACE("run%s: stop %" PRIu64 ", %zu rules, fail pipe %d token %" PRIu64 "\n",
               pushed ? " (pushed)" : "", s.stop, s.rules.size(), s.fail_pipe, s.fail_token);
    ordo_status st;
    int32_t code = 0;
    {
      fuzz::Watchdog::Scope w(pushed ? "a pushed pipeline run" : "ordo_pipeline_run", 20);
      if (pushed) {
        EXPECT_STATUS(ordo_pipeline_push(p_, nullptr, 0, &var_, 1, nullptr), 0);
        st = ordo_wait_for_var(e_, var_);
        if (st == ORDO_ERR_OP_FAILED) {
          EXPECT_STATUS(ordo_var_get_error(e_, var_, &code, nullptr, 0), 0);
          EXPECT_STATUS(ordo_var_clear_error(e_, var_), 0);
          // the wait for the clear also waits for the run op's free_fn (the pipeline is free)
          EXPECT_STATUS(ordo_wait_for_var(e_, var_), 0);
        }
      } else {
        st = ordo_pipeline_run(p_);
        code = st;
      }
    }
    FUZZ_CHECK(rec_.bad.load() == 0, "a callback saw something wrong: %s", rec_.bad_what);
    if (want.failed || later_fails) {
      FUZZ_CHECK(st == ORDO_ERR_OP_FAILED, "a failing run returned %s",
                 ordo_status_string(st));
      if (pushed) FUZZ_CHECK(code == kFailCode, "the run's op failed with code %d", code);
      check_prefixes(want);
      if (want.failed) {  // pipe 0 failed: its decisions and the drops are the model's
        FUZZ_CHECK(rec_.pipe0 == want.pipe0, "pipe-0 sequence differs before a pipe-0 failure");
        check_tokens_and_dropped(want);
      }
      needs_reset_ = true;
      return;
    }
    const bool dropped = !want.dropped.empty();
    if (pushed) {
      FUZZ_CHECK(st == (dropped ? ORDO_ERR_OP_FAILED : ORDO_OK), "pushed run: %s (%s)",
                 ordo_status_string(st), ordo_last_error_message());
      if (dropped) FUZZ_CHECK(code == ORDO_ERR_TOKENS_DROPPED, "code %d", code);
    } else {
      FUZZ_CHECK(st == (dropped ? ORDO_ERR_TOKENS_DROPPED : ORDO_OK), "run: %s (%s)",
                 ordo_status_string(st), ordo_last_error_message());
    }
    FUZZ_CHECK(rec_.pipe0 == want.pipe0, "pipe-0 sequence: %zu invocations, model %zu%s",
               rec_.pipe0.size(), want.pipe0.size(), first_difference(want).c_str());
    for (size_t f = 1; f < num_pipes_; ++f) {
      std::vector<Seen> got = rec_.later[f], acc = want.accepted;
      if (types_[f] == ORDO_PIPE_PARALLEL) {
        std::sort(got.begin(), got.end());
        std::sort(acc.begin(), acc.end());
      }
      FUZZ_CHECK(got == acc, "pipe %zu (%s) saw %zu tokens, pipe 0 accepted %zu (or order, line, "
                 "nd differ)", f, types_[f] == ORDO_PIPE_SERIAL ? "serial" : "parallel",
                 got.size(), acc.size());
    }
    check_tokens_and_dropped(want);
  }

  // After a failure: pipe 0 made the model's decisions as far as it went (a later pipe's
  // failure stops it at a point the schedule decides), serial pipes saw a prefix of the
  // accepted order, parallel ones a subset.
  FUZZ_ORACLE void check_prefixes(const Outcome& want) {
    FUZZ_CHECK(rec_.pipe0.size() <= want.pipe0.size(), "pipe 0 ran past the model's stop");
    for (size_t i = 0; i < rec_.pipe0.size(); ++i) {
      FUZZ_CHECK(rec_.pipe0[i] == want.pipe0[i], "pipe-0 invocation %zu differs from the model",
                 i);
    }
    for (size_t f = 1; f < num_pipes_; ++f) {
      const std::vector<Seen>& got = rec_.later[f];
      if (types_[f] == ORDO_PIPE_SERIAL) {
        FUZZ_CHECK(got.size() <= want.accepted.size(), "pipe %zu ran too many tokens", f);
        for (size_t i = 0; i < got.size(); ++i) {
          FUZZ_CHECK(got[i] == want.accepted[i], "serial pipe %zu: token %zu out of order", f, i);
        }
      } else {
        std::set<uint64_t> seen;
        for (const Seen& g : got) {
          FUZZ_CHECK(seen.insert(g.token).second, "parallel pipe %zu ran a token twice", f);
          bool found = false;
          for (const Seen& a : want.accepted) found |= a == g;
          FUZZ_CHECK(found, "parallel pipe %zu ran a token pipe 0 did not accept", f);
        }
      }
    }
  }

  FUZZ_ORACLE void check_tokens_and_dropped(const Outcome& want) {
    uint64_t n = 0;
    EXPECT_STATUS(ordo_pipeline_num_tokens(p_, &n), 0);
    FUZZ_CHECK(n == model_.n, "num_tokens %" PRIu64 ", model %" PRIu64, n, model_.n);
    uint64_t count = 0;
    std::vector<uint64_t> ids(want.dropped.size() + 1, 0);
    EXPECT_STATUS(ordo_pipeline_dropped(p_, &count, ids.data(), ids.size()), 0);
    ids.resize(std::min<size_t>(count, ids.size()));
    FUZZ_CHECK(count == want.dropped.size() && ids == want.dropped,
               "dropped: %" PRIu64 " ids, model %zu", count, want.dropped.size());
  }

  FUZZ_ORACLE std::string first_difference(const Outcome& want) const {
    for (size_t i = 0; i < rec_.pipe0.size() && i < want.pipe0.size(); ++i) {
      if (!(rec_.pipe0[i] == want.pipe0[i])) {
        char b[160];
        std::snprintf(b, sizeof b,
                      "; first difference at %zu: %" PRIu64 "/%u@L%u, model %" PRIu64 "/%u@L%u", i,
                      rec_.pipe0[i].token, rec_.pipe0[i].nd, rec_.pipe0[i].line,
                      want.pipe0[i].token, want.pipe0[i].nd, want.pipe0[i].line);
        return b;
      }
    }
    return "";
  }

  void reset() {
    FUZZ_TRACE("reset\n");
    EXPECT_STATUS(ordo_pipeline_reset(p_), 0);
    model_.n = 0;
    model_.accepted = 0;
    needs_reset_ = false;
  }

  void reset_pipes() {
    const uint32_t lines = in_.below(9);  // 0: keep
    read_pipes();
    FUZZ_TRACE("reset_pipes: %u lines, %zu pipes\n", lines, num_pipes_);
    EXPECT_STATUS(ordo_pipeline_reset_pipes(p_, lines, pipes_, num_pipes_), 0);
    if (lines) model_.lines = lines;
    model_.n = 0;
    model_.accepted = 0;
    needs_reset_ = false;
  }

  fuzz::Input& in_;
  ordo_engine* e_ = nullptr;
  ordo_pipeline* p_ = nullptr;
  ordo_var var_ = 0;
  Recorder rec_;
  PipeCtx ctx_[4];
  ordo_pipe pipes_[4];
  int32_t types_[4];
  size_t num_pipes_ = 1;
  Model model_;
  bool needs_reset_ = false;
};

}  // namespace fuzz_pipeline

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  fuzz_pipeline::Session s(in);
  s.run();
  return 0;
}
