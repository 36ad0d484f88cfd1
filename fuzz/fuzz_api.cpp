// fuzz_api: random sequences of public calls (at most kMaxSteps per input) on one of four
// engines -- naive, pooled with 2 workers, per_device with 2 CPU workers, and per_device with
// ORDO_ENGINE_FLAG_PUSHERS_HELP and the smallest submission window (64), where a burst of pushes
// makes this thread run ops inside its pushes -- each status checked against the reference model
// in api_model.h, each op's run checked by api_ops.h.
//
// Steps: var new/delete, pushes (var lists with duplicates, both lists, deleted, zero, foreign and
// made-up handles; NULL arrays; good and bad options; directly or through a prepared op;
// callbacks that succeed, fail, throw, defer, complete themselves once or twice, push children,
// try to wait), waits (untimed when the model says they finish, short timeouts when it says they
// cannot, or short timeouts that may expire), completions of deferred ops (now, later, twice,
// made-up handles, or on a completer thread while this one's timed waits run out), clear_error,
// get_error, stale exec handles, a few engine calls, and bursts of 65-128 pushes (past the helping
// engine's window).
//
// Status oracle: the set of errors the header documents for the arguments given (any of them
// when several apply), else ORDO_OK. Behaviour oracle: the naive engine runs everything inside
// the calls, so after every step exactly the ops the model has run must have run and finished;
// threaded engines may lag, but never run an op the model has not started or finish one it has
// not finished; at the end, after completing every deferred op and ordo_wait_for_all, both must
// match exactly (callbacks called once or never, free_fn once per successful push).
//
// Engines are created once per process (threads are expensive); each input deletes its vars and
// waits for everything, so the next one starts from an idle engine with no error recorded.
#include <sched.h>

#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "api_model.h"
#include "api_ops.h"
#include "core/handle_bits.h"
#include "fuzz_check.h"
#include "fuzz_input.h"
#include "ordo/ordo.h"
#include "watchdog.h"

namespace fuzz_api {
namespace {

using fuzz::bit;
using fuzz::StatusSet;

constexpr int kMaxSteps = 64;
constexpr int kEngines = 4;
constexpr int kHelping = 3;           // g_engines[kHelping]: pushers help, window of 64
constexpr int32_t kSmallWindow = 64;  // the smallest max_pending the engine accepts
constexpr uint32_t kBurstMin = kSmallWindow + 1;
constexpr int kMaxBursts = 2;
constexpr uint64_t kForever = uint64_t{1} << 62;
constexpr int kHangSeconds = 20;  // generous: CI machines are loaded; a deadlock waits forever

struct EngineInfo {
  ordo_engine* e = nullptr;
  int32_t kind = 0;
  bool helping = false;  // ORDO_ENGINE_FLAG_PUSHERS_HELP with a window of kSmallWindow
  uint32_t tag = 0;      // the engine's handle tag, for made-up handles
};

EngineInfo g_engines[kEngines];

// A thread of the harness's own that calls ordo_complete while the harness thread goes on with
// timed waits and polls: a thread that neither pushes nor runs ops finishing an op (and running
// the wait marks it releases) while another thread's timed wait runs out, the race issue #21's
// hang came from and that no input could make while every completion was the harness's.
class Completer {
 public:
  Completer() : thread_([this] { loop(); }) {}
  // Hands one completion over; join() waits for it and returns what ordo_complete returned.
  void start(ordo_completion c, int32_t code, const char* message) {
    std::lock_guard<std::mutex> g(mutex_);
    job_ = {c, code, message};
    pending_ = true;
    cv_.notify_all();
  }
  ordo_status join() {
    std::unique_lock<std::mutex> g(mutex_);
    cv_.wait(g, [this] { return !pending_; });
    return status_;
  }

 private:
  struct Job {
    ordo_completion c;
    int32_t code;
    const char* message;
  };
  [[noreturn]] void loop() {
    for (;;) {
      Job job;
      {
        std::unique_lock<std::mutex> g(mutex_);
        cv_.wait(g, [this] { return pending_ && !running_; });
        job = job_;
        running_ = true;
      }
      ordo_status s = ordo_complete(job.c, job.code, job.message);
      std::lock_guard<std::mutex> g(mutex_);
      status_ = s;
      running_ = false;
      pending_ = false;
      cv_.notify_all();
    }
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  Job job_{};
  bool pending_ = false;
  bool running_ = false;
  ordo_status status_ = ORDO_OK;
  std::thread thread_;  // last: it starts once the fields above exist
};

Completer* g_completer = nullptr;  // made once per process, never joined (libFuzzer exits)

ordo_engine* make_engine(int32_t kind, bool helping) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = kind;
  cfg.cpu_threads = 2;
  cfg.cpu_priority_threads = 1;
  cfg.copy_threads = 1;
  cfg.max_pending = helping ? kSmallWindow : 8192;
  cfg.flags = helping ? ORDO_ENGINE_FLAG_PUSHERS_HELP : 0;
  ordo_engine* e = nullptr;
  EXPECT_STATUS(ordo_engine_create(&cfg, &e), 0);
  return e;
}

void init_engines() {
  const int32_t kinds[kEngines] = {ORDO_ENGINE_NAIVE, ORDO_ENGINE_POOLED, ORDO_ENGINE_PER_DEVICE,
                                   ORDO_ENGINE_PER_DEVICE};
  for (int i = 0; i < kEngines; ++i) {
    g_engines[i].kind = kinds[i];
    g_engines[i].helping = i == kHelping;
    g_engines[i].e = make_engine(kinds[i], g_engines[i].helping);
    ordo_var v = 0;
    EXPECT_STATUS(ordo_var_new(g_engines[i].e, &v), 0);
    g_engines[i].tag = ordo::HandleBits::decode(v).tag;
    EXPECT_STATUS(ordo_var_delete(g_engines[i].e, v), 0);
    EXPECT_STATUS(ordo_wait_for_all(g_engines[i].e), 0);
  }
}

const char* const kNames[] = {nullptr,
                              "",
                              "op",
                              "%s%n%d(printf in a name)",
                              "a name that is longer than forty-seven bytes, so the engine cuts it",
                              "n\xc3\xa4me"};
const int32_t kCodes[] = {0, 0, 0, 0, 1, 3, -1, 42, INT32_MAX, INT32_MIN};
const char* const kMessages[] = {nullptr, "", "boom", "%s%s%s%n"};

ordo_stats read_stats(ordo_engine* e) {
  ordo_stats st;
  std::memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  EXPECT_STATUS(ordo_engine_stats(e, &st), 0);
  return st;
}

struct VarPick {
  ordo_var value;
  int var;  // the model's var when the value names a live var of this engine, else -1
};

// One ordo_wait_for_var_async: its fn must run exactly once (never when the call failed), once
// the model's wait node is done, with that node's result.
struct AsyncWaitRecord {
  int node = -1;  // the model's node; -1 when the call was to fail
  std::atomic<int> calls{0};
  std::atomic<int> status{-1};
};

void on_async_wait(void* user_data, ordo_status status) {
  auto* r = static_cast<AsyncWaitRecord*>(user_data);
  r->status.store(status, std::memory_order_relaxed);
  r->calls.fetch_add(1, std::memory_order_release);
}

class Session {
 public:
  Session(const EngineInfo& engine, const EngineInfo& other, fuzz::Input& in)
      : eng_(engine), other_(other), e_(engine.e), in_(in) {}

  void run() {
    before_ = read_stats(e_);
    EXPECT_STATUS(ordo_var_new(other_.e, &foreign_), 0);
    for (int steps = 0; steps < kMaxSteps && !in_.done(); ++steps) {
      step();
      check_progress();
    }
    finish();
  }

 private:
  bool naive() const { return eng_.kind == ORDO_ENGINE_NAIVE; }

  void step() {
    static const char* const kStepNames[12] = {
        "var_new",      "var_delete",   "push",        "push",      "push", "complete",
        "wait_for_var", "wait_for_all", "clear_error", "get_error", "misc", "burst"};
    uint32_t kind = in_.below(12);
    FUZZ_TRACE("step: %s\n", kStepNames[kind]);
    switch (kind) {
      case 0:
        step_var_new();
        break;
      case 1:
        step_var_delete();
        break;
      case 2:
      case 3:
      case 4:
        step_push();
        break;
      case 5:
        step_complete();
        break;
      case 6:
        step_wait_var();
        break;
      case 7:
        step_wait_all();
        break;
      case 8:
        step_clear_error();
        break;
      case 9:
        step_get_error();
        break;
      case 10:
        step_misc();
        break;
      default:
        step_burst();
        break;
    }
  }

  // ---- choosing handles ------------------------------------------------------------------

  VarPick pick_var() {
    uint8_t t = in_.byte();
    std::vector<int> live, dead;
    for (int v = 0; v < model_.num_vars(); ++v) (model_.var(v).live ? live : dead).push_back(v);
    ordo_var value = 0;
    switch (t % 8) {
      case 0:
      case 1:
      case 2:
      case 3:
        if (!live.empty()) value = model_.var(live[(t >> 3) % live.size()]).handle;
        break;
      case 4:
        if (!dead.empty()) value = model_.var(dead[(t >> 3) % dead.size()]).handle;
        break;
      case 5:
        value = 0;
        break;
      case 6:
        value = foreign_;
        break;
      default:
        value = made_up_var(t >> 3);
        break;
    }
    return VarPick{value, live_var_named(value)};
  }

  ordo_var made_up_var(uint8_t how) {
    switch (how % 4) {
      case 0:  // this engine's tag, generation 0 (never issued)
        return ordo::HandleBits::encode(eng_.tag, ordo::HandleKind::kVar, 0, in_.byte());
      case 1:  // an index far beyond any var this engine has
        return ordo::HandleBits::encode(eng_.tag, ordo::HandleKind::kVar, 1 + in_.byte(),
                                        0xFFFFF0 + in_.below(16));
      case 2:  // anything at all (it may even name a live var: then it is one)
        return in_.u64();
      default: {  // a known handle with one bit flipped
        ordo_var base =
            model_.num_vars() ? model_.var(in_.below(model_.num_vars())).handle : foreign_;
        return base ^ (uint64_t{1} << in_.below(64));
      }
    }
  }

  int live_var_named(ordo_var value) const {
    if (value == 0) return -1;
    for (int v = 0; v < model_.num_vars(); ++v) {
      if (model_.var(v).live && model_.var(v).handle == value) return v;
    }
    return -1;
  }

  // ---- steps -------------------------------------------------------------------------------

  void step_var_new() {
    ordo_var v = 0;
    EXPECT_STATUS(ordo_var_new(e_, &v), 0);
    FUZZ_CHECK(v != 0, "ordo_var_new gave the handle 0");
    for (int i = 0; i < model_.num_vars(); ++i) {
      FUZZ_CHECK(model_.var(i).handle != v, "ordo_var_new reissued handle 0x%016llx (%s)",
                 static_cast<unsigned long long>(v), model_.var(i).live ? "live" : "deleted");
    }
    FUZZ_CHECK(v != foreign_, "ordo_var_new returned another engine's handle");
    model_.add_var(v);
    settled_.push_back(true);
  }

  void step_var_delete() {
    VarPick p = pick_var();
    if (p.var < 0) {
      EXPECT_STATUS(ordo_var_delete(e_, p.value), bit(ORDO_ERR_INVALID_HANDLE));
      return;
    }
    EXPECT_STATUS(ordo_var_delete(e_, p.value), 0);
    model_.push(NodeKind::kDeleteVar, {{p.var, true}});
    settled_[p.var] = false;
  }

  void step_clear_error() {
    VarPick p = pick_var();
    if (p.var < 0) {
      EXPECT_STATUS(ordo_var_clear_error(e_, p.value), bit(ORDO_ERR_INVALID_HANDLE));
      return;
    }
    EXPECT_STATUS(ordo_var_clear_error(e_, p.value), 0);
    model_.push(NodeKind::kClearError, {{p.var, true}});
    settled_[p.var] = false;
  }

  void step_push();
  void step_burst();
  ordo_status push_prepared(ordo_fn fn, OpRecord* r, const ordo_var* cv, size_t nc,
                            const ordo_var* mv, size_t nm, const ordo_push_opts* opts,
                            StatusSet errors);
  void step_complete();
  void complete_racing_waits(OpRecord* r, ordo_completion c, int32_t code, const char* msg);
  void step_wait_var();
  void async_wait(const VarPick& p);
  void check_async_waits(bool all_done);
  void step_wait_all();
  void step_get_error();
  void step_misc();
  void check_progress();
  void check_stats();
  void finish();

  OpRecord* new_record() {
    records_.emplace_back();
    OpRecord* r = &records_.back();
    r->id = static_cast<int>(records_.size()) - 1;
    r->engine = e_;
    return r;
  }
  OpRecord* new_op_record(Behaviour behaviour, int32_t code, int32_t child_code);
  void link_preds(OpRecord* r, const std::vector<Access>& access);
  void record_push(OpRecord* r, const std::vector<Access>& access);
  Behaviour pick_behaviour() {
    return static_cast<Behaviour>(in_.below(static_cast<uint32_t>(Behaviour::kCount)));
  }
  int32_t pick_code() { return kCodes[in_.below(sizeof kCodes / sizeof kCodes[0])]; }

  const EngineInfo& eng_;
  const EngineInfo& other_;
  ordo_engine* e_;
  fuzz::Input& in_;
  Model model_;
  std::vector<bool> settled_;  // threaded engines: a wait has seen the var idle since its last op
  std::deque<OpRecord> records_;
  std::vector<OpRecord*> record_of_node_;  // by model node; nullptr for the engine's own ops
  std::deque<AsyncWaitRecord> async_waits_;
  int bursts_ = 0;
  ordo_var foreign_ = 0;  // a live var of another engine
  ordo_stats before_;     // the engine's counters when the input started (it was idle)
};

// ---- push ----------------------------------------------------------------------------------

// The options of one push and the errors they imply. `buf` holds the struct when its size is
// not the compiled one.
struct OptsChoice {
  alignas(8) unsigned char buf[sizeof(ordo_push_opts) + 16];
  const ordo_push_opts* ptr = nullptr;
  StatusSet errors = 0;
  bool has_free_fn = true;
  bool name_read = true;
};

void choose_opts(fuzz::Input& in, uint8_t variant, OptsChoice* c, ordo_push_opts* o) {
  ordo_push_opts_init(o);
  o->free_fn = free_op;
  o->prop = static_cast<int32_t>(in.below(5));
  o->priority = static_cast<int8_t>(in.byte());
  o->name = kNames[in.below(sizeof kNames / sizeof kNames[0])];
  std::memset(c->buf, 0, sizeof c->buf);
  c->ptr = o;
  switch (variant) {
    case 2:
      c->ptr = nullptr;  // defaults: no free_fn, no name, normal prop, priority 0
      c->has_free_fn = false;
      o->prop = 0;
      o->priority = 0;
      o->name = nullptr;
      return;
    case 3:
      o->prop = (in.byte() & 1) ? -1 - in.below(8) : 5 + in.below(100);
      c->errors |= bit(ORDO_ERR_INVALID_ARGUMENT);
      return;
    case 4:
      o->device_type = ORDO_DEVICE_GPU;
      o->device_id = in.below(4);
      c->errors |= bit(ORDO_ERR_NO_DEVICE);
      return;
    case 5:
      o->device_type = 2 + in.below(100);
      c->errors |= bit(ORDO_ERR_INVALID_ARGUMENT);
      return;
    case 6:
      o->device_id = 1 + in.below(8);
      c->errors |= bit(ORDO_ERR_INVALID_ARGUMENT);
      return;
    case 7:
      o->next = o;
      c->errors |= bit(ORDO_ERR_UNSUPPORTED);
      return;
    case 8:
      o->struct_size = in.below(4);
      c->errors |= bit(ORDO_ERR_INVALID_ARGUMENT);
      return;
    case 9:
    case 10: {  // a newer caller's bigger struct: fine while the unknown tail is zero
      o->struct_size = sizeof *o + 8;
      std::memcpy(c->buf, o, sizeof *o);
      if (variant == 9) {
        c->buf[sizeof *o + in.below(8)] = static_cast<unsigned char>(1 + in.below(255));
        c->errors |= bit(ORDO_ERR_UNSUPPORTED);
      }
      c->ptr = reinterpret_cast<const ordo_push_opts*>(c->buf);
      return;
    }
    case 11:  // an older caller's smaller struct, without name and next
      o->struct_size = offsetof(ordo_push_opts, name);
      std::memcpy(c->buf, o, offsetof(ordo_push_opts, name));
      c->ptr = reinterpret_cast<const ordo_push_opts*>(c->buf);
      c->name_read = false;
      return;
    default:
      return;
  }
}

// The same op through a prepared op: created with the same arguments (so the same errors),
// pushed once with the same priority, deleted at once. Its free_fn then runs once, after that
// push has finished: to the records and the model it is one ordinary push.
ordo_status Session::push_prepared(ordo_fn fn, OpRecord* r, const ordo_var* cv, size_t nc,
                                   const ordo_var* mv, size_t nm, const ordo_push_opts* opts,
                                   StatusSet errors) {
  ordo_opr h = 0;
  ordo_status s = ordo_opr_new(e_, fn, r, cv, nc, mv, nm, opts, &h);
  if (s != ORDO_OK) return s;
  FUZZ_CHECK(errors == 0, "ordo_opr_new accepted arguments the header rejects");
  EXPECT_STATUS(ordo_opr_push_prepared(e_, h, r->priority), 0);
  EXPECT_STATUS(ordo_opr_delete(e_, h), 0);
  EXPECT_STATUS(ordo_opr_push_prepared(e_, h, r->priority), bit(ORDO_ERR_INVALID_HANDLE));
  EXPECT_STATUS(ordo_opr_delete(e_, h), bit(ORDO_ERR_INVALID_HANDLE));
  return ORDO_OK;
}

void Session::step_push() {
  uint8_t shape = in_.byte();
  uint8_t variant = in_.below(16);
  size_t nc = shape & 3, nm = (shape >> 2) & 3;
  ordo_var cv[3] = {}, mv[3] = {};
  StatusSet errors = 0;
  std::vector<Access> access;
  auto add = [&](ordo_var* slot, bool write) {
    VarPick p = pick_var();
    *slot = p.value;
    if (p.var < 0) {
      errors |= bit(ORDO_ERR_INVALID_HANDLE);
      return;
    }
    for (Access& a : access) {
      if (a.var == p.var) {  // listed twice counts once; in both lists counts as mutable
        a.write = a.write || write;
        return;
      }
    }
    access.push_back({p.var, write});
  };
  for (size_t i = 0; i < nc; ++i) add(&cv[i], false);
  for (size_t i = 0; i < nm; ++i) add(&mv[i], true);

  Behaviour behaviour = pick_behaviour();
  int32_t code = pick_code();
  int32_t ignored_return = static_cast<int32_t>(in_.byte()) - 128;
  bool complete_twice = in_.byte() & 1;
  OpRecord* r =
      new_op_record(behaviour, code, behaviour == Behaviour::kPushChild ? pick_code() : 0);
  r->ignored_return = ignored_return;
  r->complete_twice = complete_twice;

  ordo_push_opts opts;
  OptsChoice oc;
  choose_opts(in_, variant, &oc, &opts);
  errors |= oc.errors;
  ordo_fn fn = run_op;
  const ordo_var* cvp = cv;
  const ordo_var* mvp = mv;
  if (variant == 0) {
    fn = nullptr;
    errors |= bit(ORDO_ERR_INVALID_ARGUMENT);
  } else if (variant == 1 && nc + nm > 0) {
    (nc ? cvp : mvp) = nullptr;
    errors |= bit(ORDO_ERR_INVALID_ARGUMENT);
  }

  r->tracked = oc.has_free_fn;
  r->prop = opts.prop;
  r->priority = opts.priority;
  r->inline_run = naive() || opts.prop == ORDO_PROP_ASYNC;
  r->may_run_on_pusher = eng_.helping && opts.prop == ORDO_PROP_NORMAL;
  if (oc.name_read && opts.name) {
    std::strncpy(r->name, opts.name, ORDO_NAME_MAX);
    r->name[ORDO_NAME_MAX] = '\0';
  }
  link_preds(r, access);

  FUZZ_TRACE("push op %d: %zu const, %zu mutable, variant %d, behaviour %d, code %d\n", r->id, nc,
             nm, variant, static_cast<int>(r->behaviour), r->code);
  ordo_status s = variant == 13 ? push_prepared(fn, r, cvp, nc, mvp, nm, oc.ptr, errors)
                                : ordo_opr_push(e_, fn, r, cvp, nc, mvp, nm, oc.ptr);
  fuzz::check_status(__FILE__, __LINE__, "ordo_opr_push", s, errors);
  if (s == ORDO_OK) record_push(r, access);
}

// More pushes in one step than the helping engine's window holds, so that its pushes are
// throttled and run ready ops -- this burst's and those of earlier steps, whatever they do -- on
// this thread; on the other engines, many ops at once. One behaviour and code for the whole burst;
// op i uses live var i % live, read when bit i % 8 of a mask is set, else mutated (no var when
// none is live). At most kMaxBursts per input, as the model's cost grows with its history: a
// later burst step is a misc step.
void Session::step_burst() {
  if (bursts_ == kMaxBursts) return step_misc();
  ++bursts_;
  uint32_t count = kBurstMin + in_.below(64);
  Behaviour behaviour = pick_behaviour();
  int32_t code = pick_code();
  int32_t child_code = behaviour == Behaviour::kPushChild ? pick_code() : 0;
  uint8_t reads = in_.byte();
  std::vector<int> live;
  for (int v = 0; v < model_.num_vars(); ++v) {
    if (model_.var(v).live) live.push_back(v);
  }
  FUZZ_TRACE("burst: %u ops, behaviour %d, code %d, read mask 0x%02x, %zu live vars\n", count,
             static_cast<int>(behaviour), code, reads, live.size());
  ordo_push_opts opts;
  ordo_push_opts_init(&opts);
  opts.free_fn = free_op;
  opts.name = "burst";
  for (uint32_t i = 0; i < count; ++i) {
    std::vector<Access> access;
    if (!live.empty()) access.push_back({live[i % live.size()], ((reads >> (i % 8)) & 1) == 0});
    OpRecord* r = new_op_record(behaviour, code, child_code);
    r->tracked = true;
    r->inline_run = naive();
    r->may_run_on_pusher = eng_.helping;
    std::strcpy(r->name, "burst");
    link_preds(r, access);
    ordo_var v = access.empty() ? 0 : model_.var(access[0].var).handle;
    bool write = !access.empty() && access[0].write;
    size_t nc = access.empty() || write ? 0 : 1;
    size_t nm = write ? 1 : 0;
    ordo_status s = ordo_opr_push(e_, run_op, r, &v, nc, &v, nm, &opts);
    fuzz::check_status(__FILE__, __LINE__, "ordo_opr_push (burst)", s, 0);
    record_push(r, access);
  }
  FUZZ_TRACE("burst: %ld callbacks so far ran on this (pushing) thread of a threaded engine\n",
             g_runs_on_harness.load());
}

// A record for an op about to be pushed, with its child's record when it pushes one.
OpRecord* Session::new_op_record(Behaviour behaviour, int32_t code, int32_t child_code) {
  OpRecord* r = new_record();
  r->behaviour = behaviour;
  r->code = code;
  if (behaviour == Behaviour::kPushChild) {
    OpRecord* child = new_record();
    child->is_child = true;
    child->tracked = true;
    child->code = child_code;
    child->inline_run = naive();
    child->may_run_on_pusher = eng_.helping;
    std::strcpy(child->name, "child");
    r->child = child;
  }
  return r;
}

// The tracked ops the model says `r` must follow, for its callback to check.
void Session::link_preds(OpRecord* r, const std::vector<Access>& access) {
  for (const Access& a : access) r->own_var = model_.var(a.var).handle;
  for (int p : model_.user_preds_for(access)) {
    OpRecord* q = record_of_node_[p];
    if (q && q->tracked) r->preds.push_back(q);
  }
}

// The push succeeded: the model takes the op.
void Session::record_push(OpRecord* r, const std::vector<Access>& access) {
  r->pushed = true;
  int32_t child_code = r->child ? r->child->code : 0;
  r->node = model_.push(NodeKind::kUser, access, r->behaviour, r->code, child_code);
  record_of_node_.resize(r->node + 1);  // a push makes the model's newest node
  record_of_node_[r->node] = r;
  for (const Access& a : access) settled_[a.var] = false;
}

// ---- completions -----------------------------------------------------------------------------

// Waits (bounded) for a deferring callback that the model says has run or will run to publish
// its handle; a threaded engine may not have got to it yet.
ordo_completion await_completion(OpRecord* r) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kHangSeconds);
  for (int spins = 0;; ++spins) {
    ordo_completion c = r->completion.load(std::memory_order_acquire);
    if (c) return c;
    FUZZ_CHECK(std::chrono::steady_clock::now() < deadline,
               "op %d: the model says it runs, but its callback has not run after %d s", r->id,
               kHangSeconds);
    if (spins > 100) std::this_thread::sleep_for(std::chrono::microseconds(50));
    sched_yield();
  }
}

ordo_completion made_up_completion(fuzz::Input& in, uint32_t tag) {
  switch (in.below(4)) {
    case 0:
      return 0;
    case 1:  // generation 0 is never issued
      return ordo::HandleBits::encode(tag, ordo::HandleKind::kCompletion, 0, in.byte());
    case 2:  // no engine has that many op blocks
      return ordo::HandleBits::encode(tag, ordo::HandleKind::kCompletion, 1 + in.byte(),
                                      0xFFFFF0 + in.below(16));
    default:  // anything, with the generation cleared
      return in.u64() & ~(uint64_t{ordo::kGenerationMask} << 24);
  }
}

void Session::step_complete() {
  uint8_t k = in_.byte();
  int32_t code = kCodes[in_.below(sizeof kCodes / sizeof kCodes[0])];
  const char* msg = kMessages[in_.below(sizeof kMessages / sizeof kMessages[0])];
  std::vector<OpRecord*> deferring;
  for (OpRecord& r : records_) {
    bool defers = r.behaviour == Behaviour::kDeferLater || r.behaviour == Behaviour::kDeferInside ||
                  r.behaviour == Behaviour::kDeferTwice;
    if (r.pushed && defers) deferring.push_back(&r);
  }
  if (deferring.empty() || (k & 7) == 7) {
    EXPECT_STATUS(ordo_complete(made_up_completion(in_, eng_.tag), code, msg),
                  bit(ORDO_ERR_INVALID_HANDLE));
    return;
  }
  OpRecord* r = deferring[k % deferring.size()];
  const Node& n = model_.node(r->node);
  if (!n.ran) {  // skipped (never deferred) or still blocked: nothing to complete
    EXPECT_STATUS(ordo_complete(made_up_completion(in_, eng_.tag), code, msg),
                  bit(ORDO_ERR_INVALID_HANDLE));
    return;
  }
  ordo_completion c = await_completion(r);
  if (n.state == Node::kDeferred && (k & 0x18) == 0x18) {
    complete_racing_waits(r, c, code, msg);
  } else if (n.state == Node::kDeferred) {
    FUZZ_TRACE("complete op %d with %d\n", r->id, code);
    r->completed_by_harness.store(true);
    EXPECT_STATUS(ordo_complete(c, code, msg), 0);
    model_.complete(r->node, code);
  } else {  // already completed: by the harness or inside the callback
    EXPECT_STATUS(ordo_complete(c, code, msg), bit(ORDO_ERR_INVALID_HANDLE));
  }
}

// The completion goes to the completer thread; meanwhile this thread waits on a var (timed,
// or a poll) and for all work (timed), with timeouts from 0 to 2 ms, so that a timeout runs out
// while the op and the wait marks it releases are being finished on the other thread. A wait
// that returns must agree with the model, which counts the op completed from the hand-over on.
void Session::complete_racing_waits(OpRecord* r, ordo_completion c, int32_t code, const char* msg) {
  static const uint64_t kRaceTimeouts[4] = {0, 1000, 100000, 2000000};
  FUZZ_TRACE("complete op %d with %d on the completer thread\n", r->id, code);
  r->completed_by_harness.store(true);
  g_completer->start(c, code, msg);
  model_.complete(r->node, code);
  VarPick p = pick_var();
  const uint64_t t = kRaceTimeouts[in_.below(4)];
  if (p.var >= 0) {
    StatusSet result = bit(ORDO_ERR_TIMEOUT);
    if (t != 0) {  // a poll pushes nothing: the model has no node for it
      const Node& n = model_.node(model_.push_wait(p.var));
      if (n.state == Node::kDone) result |= n.saw.empty() ? bit(ORDO_OK) : bit(ORDO_ERR_OP_FAILED);
    } else if (model_.var_quiet(p.var)) {
      result |= bit(ORDO_OK) | bit(ORDO_ERR_OP_FAILED);
    }
    fuzz::Watchdog::Scope hang("ordo_wait_for_var_timeout racing a completion", kHangSeconds);
    fuzz::check_status(__FILE__, __LINE__, "ordo_wait_for_var_timeout racing a completion",
                       ordo_wait_for_var_timeout(e_, p.value, t), result);
  }
  {
    fuzz::Watchdog::Scope hang("ordo_wait_for_all_timeout racing a completion", kHangSeconds);
    ordo_status s = ordo_wait_for_all_timeout(e_, t);
    StatusSet result = bit(ORDO_ERR_TIMEOUT);
    if (model_.all_done())
      result |= model_.failure_pending() ? bit(ORDO_ERR_OP_FAILED) : bit(ORDO_OK);
    fuzz::check_status(__FILE__, __LINE__, "ordo_wait_for_all_timeout racing a completion", s,
                       result);
    if (s != ORDO_ERR_TIMEOUT) model_.take_failure();  // a wait that returned took the record
  }
  fuzz::Watchdog::Scope hang("the completer's ordo_complete", kHangSeconds);
  EXPECT_STATUS(g_completer->join(), 0);
}

// ---- waits -----------------------------------------------------------------------------------

// Every tracked op among `user_preds` has finished (a wait that returned waited for them).
void check_finished(const Model& model, std::deque<OpRecord>& records,
                    const std::vector<int>& user_preds, const char* after) {
  for (OpRecord& r : records) {
    if (r.node < 0 || !r.tracked) continue;
    bool needed = std::find(user_preds.begin(), user_preds.end(), r.node) != user_preds.end();
    if (needed) {
      FUZZ_CHECK(r.frees.load() == 1, "%s returned before op %d finished", after, r.id);
    }
  }
  (void)model;
}

// ordo_wait_for_var_async beside a wait (bit 7 of the wait's byte, which otherwise only scales
// timeouts, so older inputs decode as before). Its fn is checked by check_async_waits.
void Session::async_wait(const VarPick& p) {
  async_waits_.emplace_back();
  AsyncWaitRecord* r = &async_waits_.back();
  if (p.var < 0) {
    EXPECT_STATUS(ordo_wait_for_var_async(e_, p.value, on_async_wait, r),
                  bit(ORDO_ERR_INVALID_HANDLE));
    return;
  }
  r->node = model_.push_async_wait(p.var);
  settled_[p.var] = false;
  EXPECT_STATUS(ordo_wait_for_var_async(e_, p.value, on_async_wait, r), 0);
}

// Each async wait's fn ran at most once, never before the model allows, with the model's
// result; exactly when the model's node is done on the naive engine (fns run inside the calls)
// and, with `all_done` (after a wait for all work), on every engine.
FUZZ_ORACLE void Session::check_async_waits(bool all_done) {
  for (AsyncWaitRecord& r : async_waits_) {
    if (all_done && r.node >= 0) {
      // The fn runs right after its op is counted complete: a wait may return just before.
      fuzz::Watchdog::Scope hang("an ordo_wait_fn after ordo_wait_for_all", kHangSeconds);
      while (r.calls.load(std::memory_order_acquire) == 0) std::this_thread::yield();
    }
    int calls = r.calls.load(std::memory_order_acquire);
    if (r.node < 0) {
      FUZZ_CHECK(calls == 0, "a failed ordo_wait_for_var_async called its fn %d times", calls);
      continue;
    }
    const Node& n = model_.node(r.node);
    bool done = n.state == Node::kDone;
    FUZZ_CHECK(calls <= (done ? 1 : 0), "an ordo_wait_fn ran %d times, the model says %s", calls,
               done ? "once" : "not yet");
    if (naive()) {
      FUZZ_CHECK(calls == (done ? 1 : 0), "naive: an ordo_wait_fn ran %d times, model done=%d",
                 calls, done);
    }
    if (calls == 1) {
      ordo_status want = n.saw.empty() ? ORDO_OK : ORDO_ERR_OP_FAILED;
      FUZZ_CHECK(r.status.load() == want, "an ordo_wait_fn got %s, the model says %s",
                 ordo_status_string(r.status.load()), ordo_status_string(want));
    }
  }
}

void Session::step_wait_var() {
  VarPick p = pick_var();
  uint8_t how = in_.byte();
  if (how & 0x80) async_wait(p);
  if (p.var < 0) {
    if (how & 1) {
      EXPECT_STATUS(ordo_wait_for_var(e_, p.value), bit(ORDO_ERR_INVALID_HANDLE));
    } else {
      EXPECT_STATUS(ordo_wait_for_var_timeout(e_, p.value, how), bit(ORDO_ERR_INVALID_HANDLE));
    }
    return;
  }
  ordo_status s;
  if (!model_.var_quiet(p.var) && (how >> 1) == 0) {
    // Stuck behind a deferred op nobody has completed, and a poll: it leaves nothing behind.
    s = ordo_wait_for_var_timeout(e_, p.value, 0);
    fuzz::check_status(__FILE__, __LINE__, "ordo_wait_for_var_timeout (poll, blocked)", s,
                       bit(ORDO_ERR_TIMEOUT));
    return;
  }
  int node = model_.push_wait(p.var);
  const Node& n = model_.node(node);
  StatusSet result = n.saw.empty() ? bit(ORDO_OK) : bit(ORDO_ERR_OP_FAILED);
  if (n.state != Node::kDone) {  // stuck behind a deferred op nobody has completed
    s = ordo_wait_for_var_timeout(e_, p.value, (how >> 1) * 4000u);
    fuzz::check_status(__FILE__, __LINE__, "ordo_wait_for_var_timeout (blocked)", s,
                       bit(ORDO_ERR_TIMEOUT));
    return;
  }
  fuzz::Watchdog::Scope hang("ordo_wait_for_var", kHangSeconds);
  switch (how % 4) {
    case 0:
      s = ordo_wait_for_var(e_, p.value);
      break;
    case 1:
      s = ordo_wait_for_var_timeout(e_, p.value, kForever);
      break;
    default:  // short: a threaded engine may not be done yet, the naive one always is
      s = ordo_wait_for_var_timeout(e_, p.value, (how >> 2) * 1000u);
      if (!naive()) result |= bit(ORDO_ERR_TIMEOUT);
      break;
  }
  fuzz::check_status(__FILE__, __LINE__, "ordo_wait_for_var", s, result);
  if (s == ORDO_ERR_TIMEOUT) return;
  check_finished(model_, records_, n.user_preds, "ordo_wait_for_var");
  settled_[p.var] = true;
}

void Session::step_wait_all() {
  uint8_t how = in_.byte();
  ordo_status s;
  if (!model_.all_done()) {
    s = ordo_wait_for_all_timeout(e_, (how >> 1) * 4000u);
    fuzz::check_status(__FILE__, __LINE__, "ordo_wait_for_all_timeout (blocked)", s,
                       bit(ORDO_ERR_TIMEOUT));
    return;
  }
  StatusSet result = model_.failure_pending() ? bit(ORDO_ERR_OP_FAILED) : bit(ORDO_OK);
  fuzz::Watchdog::Scope hang("ordo_wait_for_all", kHangSeconds);
  switch (how % 4) {
    case 0:
      s = ordo_wait_for_all(e_);
      break;
    case 1:
      s = ordo_wait_for_all_timeout(e_, kForever);
      break;
    default:
      s = ordo_wait_for_all_timeout(e_, (how >> 2) * 1000u);
      if (!naive()) result |= bit(ORDO_ERR_TIMEOUT);
      break;
  }
  fuzz::check_status(__FILE__, __LINE__, "ordo_wait_for_all", s, result);
  if (s == ORDO_ERR_TIMEOUT) return;  // the failure record is kept for the next wait
  model_.take_failure();
  for (OpRecord& r : records_) {
    if (r.node >= 0 && r.tracked) {
      FUZZ_CHECK(r.frees.load() == 1, "ordo_wait_for_all returned before op %d finished", r.id);
    }
  }
  for (size_t v = 0; v < settled_.size(); ++v) settled_[v] = true;
}

// ---- error state -----------------------------------------------------------------------------

void Session::step_get_error() {
  VarPick p = pick_var();
  uint8_t how = in_.byte();
  const size_t caps[] = {0, 1, 7, 64, 600};
  size_t cap = caps[how % 5];
  bool null_code = (how >> 3) % 8 == 0;
  bool null_buf = (how >> 6) == 0;
  StatusSet errors = 0;
  if (null_code) errors |= bit(ORDO_ERR_INVALID_ARGUMENT);
  if (p.var < 0) errors |= bit(ORDO_ERR_INVALID_HANDLE);
  int32_t code = INT32_MIN + 7;
  std::vector<char> buf(cap ? cap : 1, '\x7f');
  ordo_status s = ordo_var_get_error(e_, p.value, null_code ? nullptr : &code,
                                     null_buf ? nullptr : buf.data(), null_buf ? 0 : cap);
  fuzz::check_status(__FILE__, __LINE__, "ordo_var_get_error", s, errors);
  if (s != ORDO_OK) return;
  if (!null_buf && cap > 0) {
    FUZZ_CHECK(std::memchr(buf.data(), '\0', cap) != nullptr, "get_error: text not terminated");
  }
  bool settled = naive() ? model_.var_quiet(p.var) : settled_[p.var];
  if (!settled) return;  // "as it is now": pending ops may still change it
  FUZZ_CHECK(model_.var_quiet(p.var), "model: var settled but not quiet");
  const CodeSet& want = model_.var(p.var).error;
  if (want.empty()) {
    FUZZ_CHECK(code == 0, "var %d: error code %d, the model says no error", p.var, code);
  } else {
    FUZZ_CHECK(std::binary_search(want.begin(), want.end(), code),
               "var %d: error code %d is none of the %zu the model allows (first %d)", p.var, code,
               want.size(), want[0]);
    if (!null_buf && cap == 600) {
      char tag[32];
      std::snprintf(tag, sizeof tag, "(code %d)", static_cast<int>(code));
      FUZZ_CHECK(std::strstr(buf.data(), tag) != nullptr, "var %d: message \"%s\" lacks \"%s\"",
                 p.var, buf.data(), tag);
    }
  }
}

// ---- misc ------------------------------------------------------------------------------------

void Session::step_misc() {
  switch (in_.below(6)) {
    case 0:
      EXPECT_STATUS(ordo_engine_retain(e_), 0);
      EXPECT_STATUS(ordo_engine_release(e_), 0);
      break;
    case 1: {
      ordo_engine_config cfg;
      ordo_engine_config_init(&cfg);
      EXPECT_STATUS(ordo_engine_get_config(e_, &cfg), 0);
      FUZZ_CHECK(cfg.kind == eng_.kind, "get_config: kind %d, created as %d", cfg.kind, eng_.kind);
      if (!naive()) FUZZ_CHECK(cfg.cpu_threads == 2, "get_config: %d cpu threads", cfg.cpu_threads);
      FUZZ_CHECK(cfg.flags == (eng_.helping ? ORDO_ENGINE_FLAG_PUSHERS_HELP : 0u),
                 "get_config: flags 0x%x", cfg.flags);
      FUZZ_CHECK(cfg.max_pending == (eng_.helping ? kSmallWindow : 8192),
                 "get_config: max_pending %d", cfg.max_pending);
      break;
    }
    case 2: {  // an exec handle whose callback has returned is stale
      std::vector<OpRecord*> ran;
      for (OpRecord& r : records_) {
        if (r.exec.load() && r.frees.load() == 1) ran.push_back(&r);
      }
      if (ran.empty()) break;
      ordo_exec* x = ran[in_.byte() % ran.size()]->exec.load();
      ordo_completion c = 0;
      ordo_exec_info info;
      info.struct_size = sizeof info;
      EXPECT_STATUS(ordo_exec_defer(x, &c), bit(ORDO_ERR_INVALID_STATE));
      EXPECT_STATUS(ordo_exec_get_info(x, &info), bit(ORDO_ERR_INVALID_STATE));
      EXPECT_STATUS(ordo_exec_defer(x, nullptr),
                    bit(ORDO_ERR_INVALID_ARGUMENT) | bit(ORDO_ERR_INVALID_STATE));
      break;
    }
    case 3: {
      ordo_completion c = 0;
      ordo_exec_info info;
      info.struct_size = sizeof info;
      EXPECT_STATUS(ordo_exec_defer(nullptr, &c), bit(ORDO_ERR_INVALID_ARGUMENT));
      EXPECT_STATUS(ordo_exec_get_info(nullptr, &info), bit(ORDO_ERR_INVALID_ARGUMENT));
      break;
    }
    case 4: {
      ordo_var v = 0;
      EXPECT_STATUS(ordo_var_new(nullptr, &v), bit(ORDO_ERR_INVALID_ARGUMENT));
      EXPECT_STATUS(ordo_var_new(e_, nullptr), bit(ORDO_ERR_INVALID_ARGUMENT));
      EXPECT_STATUS(ordo_wait_for_all(nullptr), bit(ORDO_ERR_INVALID_ARGUMENT));
      break;
    }
    default:
      EXPECT_STATUS(ordo_complete(made_up_completion(in_, eng_.tag), 0, nullptr),
                    bit(ORDO_ERR_INVALID_HANDLE));
      // The sizes bindings check their layouts against (no input consumed).
      FUZZ_CHECK(ordo_struct_size(ORDO_STRUCT_PUSH_OPTS) == sizeof(ordo_push_opts) &&
                     ordo_struct_size(ORDO_STRUCT_ENGINE_CONFIG) == sizeof(ordo_engine_config) &&
                     ordo_struct_size(ORDO_STRUCT_STATS) == sizeof(ordo_stats) &&
                     ordo_struct_size(ORDO_STRUCT_QUEUE_STATS) == sizeof(ordo_queue_stats) &&
                     ordo_struct_size(ORDO_STRUCT_EXEC_INFO) == sizeof(ordo_exec_info) &&
                     ordo_struct_size(0) == 0 && ordo_struct_size(6) == 0,
                 "ordo_struct_size disagrees with the header");
      break;
  }
}

// ---- checks after every step, and the end of an input ----------------------------------------

// Links child records to the model's child nodes once their parent has run in the model.
void sync_children(const Model& model, std::deque<OpRecord>& records) {
  for (OpRecord& r : records) {
    if (r.child && r.node >= 0 && r.child->node < 0 && model.node(r.node).child >= 0) {
      r.child->node = model.node(r.node).child;
    }
  }
}

FUZZ_ORACLE void Session::check_progress() {
  sync_children(model_, records_);
  for (OpRecord& r : records_) {
    int runs = r.runs.load(std::memory_order_acquire);
    int frees = r.frees.load(std::memory_order_acquire);
    if (r.node < 0) {
      FUZZ_CHECK(runs == 0 && frees == 0, "op %d (%s) ran %d / freed %d times", r.id,
                 r.is_child ? "child of an op that has not run" : "push failed", runs, frees);
      continue;
    }
    const Node& n = model_.node(r.node);
    bool done = n.state == Node::kDone;
    if (naive()) {  // everything runs inside the calls: exact
      FUZZ_CHECK(runs == (n.ran ? 1 : 0), "naive: op %d ran %d times, the model says %d", r.id,
                 runs, n.ran);
      if (r.tracked) {
        FUZZ_CHECK(frees == (done ? 1 : 0), "naive: op %d freed %d times, model done=%d", r.id,
                   frees, done);
      }
    } else {  // threaded: may lag behind the model, never run ahead of it
      FUZZ_CHECK(n.ran || runs == 0, "op %d ran, but the model says it %s", r.id,
                 n.skipped ? "is skipped" : "cannot run yet");
      FUZZ_CHECK(done || frees == 0, "op %d finished, but the model says it cannot yet", r.id);
    }
  }
  check_async_waits(false);
}

// The engine is idle, so its counters are exact ("exact when the engine is idle"): this input's
// share of them must match the model's count of the caller's ops (children included; internal
// ops -- waits, clears, deletes -- are not counted).
void Session::check_stats() {
  uint64_t pushed = 0, failed = 0, skipped = 0;
  for (const OpRecord& r : records_) {
    if (r.node < 0) continue;
    const Node& n = model_.node(r.node);
    ++pushed;
    failed += n.failed;  // ran and failed, or skipped: SPEC 3 counts a skipped op as failed
    skipped += n.skipped;
  }
  ordo_stats now = read_stats(e_);
  FUZZ_CHECK(now.pushed - before_.pushed == pushed,
             "stats: %llu ops pushed in this input, the model accepted %llu",
             static_cast<unsigned long long>(now.pushed - before_.pushed),
             static_cast<unsigned long long>(pushed));
  FUZZ_CHECK(now.completed - before_.completed == pushed,
             "stats: %llu ops completed in this input, the model accepted %llu",
             static_cast<unsigned long long>(now.completed - before_.completed),
             static_cast<unsigned long long>(pushed));
  FUZZ_CHECK(now.failed - before_.failed == failed, "stats: %llu failed, the model says %llu",
             static_cast<unsigned long long>(now.failed - before_.failed),
             static_cast<unsigned long long>(failed));
  FUZZ_CHECK(now.skipped - before_.skipped == skipped, "stats: %llu skipped, the model says %llu",
             static_cast<unsigned long long>(now.skipped - before_.skipped),
             static_cast<unsigned long long>(skipped));
  FUZZ_CHECK(now.pending == 0 && now.ready == 0, "stats: idle engine with %llu pending, %llu ready",
             static_cast<unsigned long long>(now.pending),
             static_cast<unsigned long long>(now.ready));
}

void Session::finish() {
  // Complete every deferred op (completing one may start others that defer).
  for (bool again = true; again;) {
    again = false;
    for (OpRecord& r : records_) {
      if (r.node < 0 || model_.node(r.node).state != Node::kDeferred) continue;
      ordo_completion c = await_completion(&r);
      r.completed_by_harness.store(true);
      EXPECT_STATUS(ordo_complete(c, 0, nullptr), 0);
      model_.complete(r.node, 0);
      again = true;
    }
  }
  FUZZ_CHECK(model_.all_done(), "model: ops left after completing every deferred op");
  fuzz::Watchdog::Scope hang("ordo_wait_for_all at the end of the input", kHangSeconds);
  EXPECT_STATUS(ordo_wait_for_all(e_),
                model_.take_failure() ? bit(ORDO_ERR_OP_FAILED) : bit(ORDO_OK));
  sync_children(model_, records_);
  for (OpRecord& r : records_) {
    bool ran = r.node >= 0 && model_.node(r.node).ran;
    int frees_expected = (r.node >= 0 && r.tracked) ? 1 : 0;
    FUZZ_CHECK(r.runs.load() == (ran ? 1 : 0), "op %d ran %d times, expected %d", r.id,
               r.runs.load(), ran);
    FUZZ_CHECK(r.frees.load() == frees_expected, "op %d: free_fn called %d times, expected %d",
               r.id, r.frees.load(), frees_expected);
  }
  check_async_waits(true);
  check_stats();
  for (int v = 0; v < model_.num_vars(); ++v) {
    if (model_.var(v).live) EXPECT_STATUS(ordo_var_delete(e_, model_.var(v).handle), 0);
  }
  EXPECT_STATUS(ordo_var_delete(other_.e, foreign_), 0);
  EXPECT_STATUS(ordo_wait_for_all(e_), 0);
}

}  // namespace
}  // namespace fuzz_api

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The harness sets every engine field itself; the environment must not change them.
  for (const char* v :
       {"ORDO_ENGINE", "ORDO_CPU_THREADS", "ORDO_CPU_PRIORITY_THREADS", "ORDO_COPY_THREADS",
        "ORDO_MAX_PENDING", "ORDO_TRACE", "ORDO_PUSHERS_HELP"}) {
    unsetenv(v);
  }
  fuzz_api::init_engines();
  fuzz_api::g_completer = new fuzz_api::Completer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fuzz_api;
  tls_harness_thread = true;
  fuzz::Input in(data, size);
  int which = in.below(kEngines);
  Session s(g_engines[which], g_engines[(which + 1) % kEngines], in);
  s.run();
  return 0;
}
