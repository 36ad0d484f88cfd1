// fuzz_handles: random 64-bit values and recycled handles -- vars deleted, prepared ops deleted,
// completions used, engines destroyed and freed, exec handles of finished ops -- against every
// public function that takes a handle.
//
// Oracle (handle_model.h): each call returns ORDO_OK on live handles and exactly the documented
// error otherwise (any of the documented ones when several apply), and never crashes, hangs or
// leaks (ASan/LSan, and a watchdog for the calls that must return). Engine pointers are slots of
// a static table (src/api/engine_registry.h), so a freed engine's pointer is safe to pass and
// must read as ORDO_ERR_INVALID_HANDLE; pointers into the table that no engine owns, misaligned
// ones and arbitrary values must too. At the end of every input each engine is destroyed and
// released, and every op and prepared op must have run and been freed exactly as often as it was
// successfully pushed and created.
//
// Each input creates its own engines (at most kMaxEngines), so inputs are independent and any
// crash replays on its own.
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "api/engine_registry.h"
#include "core/handle_bits.h"
#include "fuzz_check.h"
#include "fuzz_input.h"
#include "handle_model.h"
#include "ordo/ordo.h"
#include "watchdog.h"

namespace fuzz_handles {
namespace {

constexpr int kMaxSteps = 48;
constexpr int kMaxEngines = 3;    // created per input
constexpr int kHangSeconds = 20;  // generous: CI machines are loaded; a deadlock waits forever

int32_t count_run(ordo_exec* exec, void* user_data) {
  auto* t = static_cast<Tally*>(user_data);
  t->runs.fetch_add(1, std::memory_order_acq_rel);
  t->exec.store(exec, std::memory_order_release);
  return 0;
}

// An ORDO_PROP_ASYNC op with no vars: runs inside the push, defers, publishes its handle.
int32_t defer_run(ordo_exec* exec, void* user_data) {
  auto* t = static_cast<Tally*>(user_data);
  t->runs.fetch_add(1, std::memory_order_acq_rel);
  t->exec.store(exec, std::memory_order_release);
  ordo_completion c = 0;
  EXPECT_STATUS(ordo_exec_defer(exec, &c), 0);
  t->completion.store(c, std::memory_order_release);
  return 0;
}

void count_free(void* user_data) {
  auto* t = static_cast<Tally*>(user_data);
  int before = t->frees.fetch_add(1, std::memory_order_acq_rel);
  FUZZ_CHECK(before == 0, "free_fn called twice");
}

// An ordo_wait_fn: counts its calls (every accepted async wait calls it once, by the time its
// engine is destroyed; a refused one never).
void count_async_wait(void* user_data, ordo_status status) {
  (void)status;
  static_cast<std::atomic<int>*>(user_data)->fetch_add(1, std::memory_order_acq_rel);
}

class Session {
 public:
  explicit Session(fuzz::Input& in) : in_(in) {}

  void run() {
    for (int steps = 0; steps < kMaxSteps && !in_.done(); ++steps) step();
    finish();
  }

 private:
  void step() {
    static const char* const kStepNames[20] = {
        "create",    "destroy",  "retain",  "release", "var_new",    "var_new",  "var_call",
        "get_error", "wait_var", "push",    "push",    "opr_new",    "opr_push", "opr_delete",
        "complete",  "wait_all", "queries", "exec",    "bad_create", "push"};
    uint32_t kind = in_.below(20);
    FUZZ_TRACE("step: %s\n", kStepNames[kind]);
    switch (kind) {
      case 0:
        step_create();
        break;
      case 1:
        step_destroy();
        break;
      case 2:
        step_retain();
        break;
      case 3:
        step_release();
        break;
      case 4:
      case 5:
        step_var_new();
        break;
      case 6:
        step_var_call();
        break;
      case 7:
        step_get_error();
        break;
      case 8:
        step_wait_var();
        break;
      case 9:
      case 10:
        step_push();
        break;
      case 11:
        step_opr_new();
        break;
      case 12:
        step_opr_push();
        break;
      case 13:
        step_opr_delete();
        break;
      case 14:
        step_complete();
        break;
      case 15:
        step_wait_all();
        break;
      case 16:
        step_engine_queries();
        break;
      case 17:
        step_exec();
        break;
      case 18:
        step_bad_create();
        break;
      default:
        step_push();
        break;
    }
  }

  // ---- picking arguments -------------------------------------------------------------------

  EnginePick classify(ordo_engine* ptr) {
    if (!ptr) return {ptr, nullptr, EState::kNull};
    for (EngineRec& r : engines_) {
      if (!r.freed && r.ptr == ptr)
        return {ptr, &r, r.destroyed ? EState::kShutDown : EState::kLive};
    }
    return {ptr, nullptr, EState::kStale};
  }

  EnginePick pick_engine() {
    uint8_t t = in_.byte();
    if (engines_.empty() || t % 8 == 5) return classify(nullptr);
    const EngineRec& base = engines_[(t >> 3) % engines_.size()];
    if (t % 8 != 6) return classify(base.ptr);
    auto addr = reinterpret_cast<uintptr_t>(base.ptr);
    switch (in_.below(5)) {
      case 0:  // inside a slot, misaligned
        return classify(
            reinterpret_cast<ordo_engine*>(addr + 1 + in_.below(sizeof(ordo::EngineSlot) - 1)));
      case 1: {  // another slot of the table: free, or an engine of this input
        int64_t k = static_cast<int64_t>(in_.below(9)) - 4;
        return classify(reinterpret_cast<ordo_engine*>(addr + k * sizeof(ordo::EngineSlot)));
      }
      case 2:  // one high bit flipped: usually outside the table, else misaligned in it
        return classify(
            reinterpret_cast<ordo_engine*>(addr ^ (uintptr_t{1} << (20 + in_.below(20)))));
      case 3:  // a real object that is not an engine
        return classify(reinterpret_cast<ordo_engine*>(&in_));
      default:
        return classify(reinterpret_cast<ordo_engine*>(static_cast<uintptr_t>(in_.u64()) | 1));
    }
  }

  // A handle value: mostly from the pool of its kind, sometimes from another kind's pool, 0,
  // random, or a near miss of a known one.
  uint64_t pick_value(const std::vector<uint64_t>& pool) {
    uint8_t t = in_.byte();
    const std::vector<uint64_t>* pools[] = {&var_pool_, &opr_pool_, &completion_pool_};
    switch (t % 8) {
      case 4: {
        const std::vector<uint64_t>& other = *pools[(t >> 3) % 3];
        return other.empty() ? 0 : other[in_.byte() % other.size()];
      }
      case 5:
        return 0;
      case 6:
        return in_.u64();
      case 7: {
        if (pool.empty()) return in_.u64();
        uint64_t v = pool[in_.byte() % pool.size()];
        ordo::HandleBits b = ordo::HandleBits::decode(v);
        switch (in_.below(5)) {
          case 0:
            return ordo::HandleBits::encode(b.tag, b.kind, b.gen + 1, b.index);
          case 1:
            return ordo::HandleBits::encode(b.tag, b.kind, b.gen, b.index + 1);
          case 2:
            return ordo::HandleBits::encode(b.tag + 1, b.kind, b.gen, b.index);
          case 3:  // the same slot of another kind's table: once the same value as a var's
            return ordo::HandleBits::encode(
                b.tag,
                static_cast<ordo::HandleKind>((static_cast<uint32_t>(b.kind) + 1 + in_.below(3)) &
                                              3),
                b.gen, b.index);
          default:
            return v ^ (uint64_t{1} << in_.below(64));
        }
      }
      default:
        return pool.empty() ? 0 : pool[(t >> 3) % pool.size()];
    }
  }

  void remember(std::vector<uint64_t>* pool, uint64_t v, const char* what) {
    FUZZ_CHECK(v != 0, "a new %s handle is 0", what);
    FUZZ_CHECK(std::find(pool->begin(), pool->end(), v) == pool->end(),
               "a new %s handle 0x%016llx was issued before (handles are never reused)", what,
               static_cast<unsigned long long>(v));
    pool->push_back(v);
  }

  Tally* new_tally() {
    tallies_.emplace_back();
    return &tallies_.back();
  }

  // ---- engines -----------------------------------------------------------------------------

  void step_create() {
    if (created_ >= kMaxEngines) return;
    ++created_;
    // Mostly naive: a threaded engine costs its threads and queues at every create.
    const int32_t kinds[] = {ORDO_ENGINE_NAIVE,      ORDO_ENGINE_NAIVE,     ORDO_ENGINE_NAIVE,
                             ORDO_ENGINE_NAIVE,      ORDO_ENGINE_NAIVE,     ORDO_ENGINE_POOLED,
                             ORDO_ENGINE_PER_DEVICE, ORDO_ENGINE_PER_DEVICE};
    ordo_engine_config cfg;
    ordo_engine_config_init(&cfg);
    cfg.kind = kinds[in_.below(8)];
    cfg.cpu_threads = 1 + in_.below(2);
    cfg.max_pending = 8192;
    ordo_engine* e = nullptr;
    EXPECT_STATUS(ordo_engine_create(&cfg, &e), 0);
    FUZZ_CHECK(e != nullptr, "ordo_engine_create gave NULL");
    FUZZ_CHECK(classify(e).state == EState::kStale, "ordo_engine_create reused a live pointer");
    FUZZ_TRACE("  engine %zu: kind %d, %d cpu threads\n", engines_.size(), cfg.kind,
               cfg.cpu_threads);
    EngineRec r;
    r.ptr = e;
    r.kind = cfg.kind;
    engines_.push_back(r);
  }

  // Bad configurations: the documented error, and *out set to NULL.
  void step_bad_create() {
    ordo_engine_config cfg;
    ordo_engine_config_init(&cfg);
    cfg.kind = ORDO_ENGINE_NAIVE;
    cfg.max_pending = 8192;
    alignas(8) unsigned char big[sizeof cfg + 16] = {};
    const ordo_engine_config* arg = &cfg;
    StatusSet want;
    switch (in_.below(7)) {
      case 0:
        cfg.kind = 4 + in_.below(100);
        want = bit(ORDO_ERR_INVALID_ARGUMENT);
        break;
      case 1:
        cfg.cpu_threads = -1 - in_.below(100);
        want = bit(ORDO_ERR_INVALID_ARGUMENT);
        break;
      case 2:
        cfg.flags = 2u << in_.below(31);  // bit 0 is ORDO_ENGINE_FLAG_PUSHERS_HELP
        want = bit(ORDO_ERR_UNSUPPORTED);
        break;
      case 3:
        cfg.next = &cfg;
        want = bit(ORDO_ERR_UNSUPPORTED);
        break;
      case 4:
        cfg.max_pending = 1 + in_.below(63);
        want = bit(ORDO_ERR_INVALID_ARGUMENT);
        break;
      case 5:
        cfg.struct_size = in_.below(4);
        want = bit(ORDO_ERR_INVALID_ARGUMENT);
        break;
      default:
        cfg.struct_size = sizeof cfg + 8;
        std::memcpy(big, &cfg, sizeof cfg);
        big[sizeof cfg + in_.below(8)] = 1;
        arg = reinterpret_cast<const ordo_engine_config*>(big);
        want = bit(ORDO_ERR_UNSUPPORTED);
        break;
    }
    ordo_engine* e = reinterpret_cast<ordo_engine*>(&cfg);  // must be overwritten with NULL
    EXPECT_STATUS(ordo_engine_create(arg, &e), want);
    FUZZ_CHECK(e == nullptr, "a failed ordo_engine_create left *out non-NULL");
    EXPECT_STATUS(ordo_engine_create(&cfg, nullptr), bit(ORDO_ERR_INVALID_ARGUMENT));
  }

  // Completes the engine's outstanding deferred ops; from another thread while `blocking` runs
  // (destroy and the last release must wait for them), or first when `later` is false.
  template <class Call>
  void with_deferred_completed(EngineRec* r, bool later, Call&& blocking) {
    auto armed = r->armed;
    r->armed.clear();
    for (auto& a : armed) completion_used(a.first);
    if (!later || armed.empty()) {
      for (auto& a : armed) EXPECT_STATUS(ordo_complete(a.first, 0, nullptr), 0);
      blocking();
      return;
    }
    std::atomic<int> done{0};
    std::thread completer([&] {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      for (auto& a : armed) {
        done.fetch_add(1);
        EXPECT_STATUS(ordo_complete(a.first, 0, nullptr), 0);
      }
    });
    blocking();
    FUZZ_CHECK(done.load() == static_cast<int>(armed.size()),
               "the engine shut down before its deferred ops were completed");
    completer.join();
  }

  void drop_ref(EngineRec* r) {
    if (--r->refs == 0) {
      r->freed = true;
      for (Prepared& p : r->oprs) p.live = false;
      r->live_vars.clear();
    }
  }

  void step_destroy() {
    EnginePick p = pick_engine();
    bool later = in_.byte() & 1;
    if (p.state != EState::kLive) {
      EXPECT_STATUS(ordo_engine_destroy(p.ptr), engine_errors(p));
      return;
    }
    with_deferred_completed(p.rec, later, [&] {
      fuzz::Watchdog::Scope hang("ordo_engine_destroy", kHangSeconds);
      EXPECT_STATUS(ordo_engine_destroy(p.ptr), 0);
    });
    p.rec->destroyed = true;
    drop_ref(p.rec);
  }

  void step_retain() {
    EnginePick p = pick_engine();
    bool usable = p.state == EState::kLive || p.state == EState::kShutDown;
    EXPECT_STATUS(ordo_engine_retain(p.ptr), usable ? 0 : engine_errors(p));
    if (usable) ++p.rec->refs;
  }

  void step_release() {
    EnginePick p = pick_engine();
    bool later = in_.byte() & 1;
    bool usable = p.state == EState::kLive || p.state == EState::kShutDown;
    if (!usable) {
      EXPECT_STATUS(ordo_engine_release(p.ptr), engine_errors(p));
      return;
    }
    if (p.rec->refs > 1) {
      EXPECT_STATUS(ordo_engine_release(p.ptr), 0);
    } else {
      with_deferred_completed(p.rec, later, [&] {
        fuzz::Watchdog::Scope hang("ordo_engine_release (last)", kHangSeconds);
        EXPECT_STATUS(ordo_engine_release(p.ptr), 0);
      });
    }
    drop_ref(p.rec);
  }

  // ---- vars --------------------------------------------------------------------------------

  void step_var_new() {
    EnginePick p = pick_engine();
    bool null_out = in_.byte() == 0;
    ordo_var v = 0;
    StatusSet want = p.state == EState::kLive ? 0 : engine_errors(p);
    if (null_out) {
      EXPECT_STATUS(ordo_var_new(p.ptr, nullptr), want | bit(ORDO_ERR_INVALID_ARGUMENT));
      return;
    }
    EXPECT_STATUS(ordo_var_new(p.ptr, &v), want);
    if (want) return;
    remember(&var_pool_, v, "var");
    p.rec->live_vars.push_back(v);
  }

  // ordo_var_delete or ordo_var_clear_error.
  void step_var_call() {
    EnginePick p = pick_engine();
    bool del = in_.byte() & 1;
    ordo_var v = pick_value(var_pool_);
    bool valid = p.rec && p.rec->has_var(v);
    StatusSet want = expected_with_handle(p, valid);
    ordo_status s = del ? ordo_var_delete(p.ptr, v) : ordo_var_clear_error(p.ptr, v);
    fuzz::check_status(__FILE__, __LINE__, del ? "ordo_var_delete" : "ordo_var_clear_error", s,
                       want);
    if (del && s == ORDO_OK) {
      auto& live = p.rec->live_vars;
      live.erase(std::find(live.begin(), live.end(), v));
    }
  }

  void step_get_error() {
    EnginePick p = pick_engine();
    ordo_var v = pick_value(var_pool_);
    bool valid = p.rec && p.rec->has_var(v);
    // Reading an error state is allowed after destroy (nothing is pushed).
    StatusSet want = expected_with_handle(p, valid);
    if (p.state == EState::kShutDown) want |= valid ? bit(ORDO_OK) : 0;
    int32_t code = -12345;
    char buf[8];
    ordo_status s = ordo_var_get_error(p.ptr, v, &code, buf, sizeof buf);
    fuzz::check_status(__FILE__, __LINE__, "ordo_var_get_error", s, want);
    if (s == ORDO_OK) FUZZ_CHECK(code == 0, "a var no op failed on has error code %d", code);
    EXPECT_STATUS(ordo_var_get_error(p.ptr, v, nullptr, buf, sizeof buf),
                  want | bit(ORDO_ERR_INVALID_ARGUMENT));
  }

  void step_wait_var() {
    EnginePick p = pick_engine();
    uint8_t how = in_.byte();
    bool timed = how & 1;
    ordo_var v = pick_value(var_pool_);
    bool valid = p.rec && p.rec->has_var(v);
    StatusSet want = expected_with_handle(p, valid);
    if (how & 2) {  // bit 1 was unused: older inputs decode as before
      ordo_status s = ordo_wait_for_var_async(p.ptr, v, count_async_wait, &async_calls_);
      fuzz::check_status(__FILE__, __LINE__, "ordo_wait_for_var_async", s, want);
      if (s == ORDO_OK) ++async_accepted_;
    }
    fuzz::Watchdog::Scope hang("ordo_wait_for_var", kHangSeconds);
    if (timed) {
      // The ops on vars here never wait for anything, but a worker may not be done yet.
      if (p.state == EState::kLive && valid) want |= bit(ORDO_OK) | bit(ORDO_ERR_TIMEOUT);
      EXPECT_STATUS(ordo_wait_for_var_timeout(p.ptr, v, 0), want);
    } else {
      EXPECT_STATUS(ordo_wait_for_var(p.ptr, v), want);
    }
  }

  // ---- ops ---------------------------------------------------------------------------------

  // Up to 3 const and 3 mutable values; returns whether all name live vars of `r`.
  bool pick_lists(EngineRec* r, ordo_var* cv, size_t* nc, ordo_var* mv, size_t* nm) {
    uint8_t shape = in_.byte();
    *nc = shape & 3;
    *nm = (shape >> 2) & 3;
    bool valid = true;
    for (size_t i = 0; i < *nc; ++i) {
      cv[i] = pick_value(var_pool_);
      valid = valid && r && r->has_var(cv[i]);
    }
    for (size_t i = 0; i < *nm; ++i) {
      mv[i] = pick_value(var_pool_);
      valid = valid && r && r->has_var(mv[i]);
    }
    return valid;
  }

  void step_push() {
    EnginePick p = pick_engine();
    bool defers = (in_.byte() % 4) == 0;
    ordo_var cv[3], mv[3];
    size_t nc = 0, nm = 0;
    bool valid = defers || pick_lists(p.rec, cv, &nc, mv, &nm);
    StatusSet want = expected_with_handle(p, valid);
    Tally* t = new_tally();
    ordo_push_opts o;
    ordo_push_opts_init(&o);
    o.free_fn = count_free;
    o.prop = defers ? ORDO_PROP_ASYNC : ORDO_PROP_NORMAL;
    ordo_status s = ordo_opr_push(p.ptr, defers ? defer_run : count_run, t, cv, nc, mv, nm, &o);
    fuzz::check_status(__FILE__, __LINE__, "ordo_opr_push", s, want);
    if (s != ORDO_OK) return;
    t->expected_runs = 1;
    t->expect_free = true;
    if (!defers) return;
    // Its vars (none) are free, so it ran inside the push.
    ordo_completion c = t->completion.load(std::memory_order_acquire);
    FUZZ_CHECK(c != 0, "an ORDO_PROP_ASYNC op with free vars did not run inside its push");
    remember(&completion_pool_, c, "completion");
    p.rec->armed.emplace_back(c, t);
  }

  void step_opr_new() {
    EnginePick p = pick_engine();
    ordo_var cv[3], mv[3];
    size_t nc = 0, nm = 0;
    bool valid = pick_lists(p.rec, cv, &nc, mv, &nm);
    StatusSet want = expected_with_handle(p, valid);
    Tally* t = new_tally();
    ordo_push_opts o;
    ordo_push_opts_init(&o);
    o.free_fn = count_free;
    ordo_opr h = 0;
    ordo_status s = ordo_opr_new(p.ptr, count_run, t, cv, nc, mv, nm, &o, &h);
    FUZZ_TRACE("  opr_new on %p -> %d, handle 0x%016llx\n", (void*)p.ptr, s, (unsigned long long)h);
    fuzz::check_status(__FILE__, __LINE__, "ordo_opr_new", s, want);
    if (s != ORDO_OK) return;
    remember(&opr_pool_, h, "prepared op");
    t->expect_free = true;
    Prepared prep{h, {}, t, true};
    prep.vars.assign(cv, cv + nc);
    prep.vars.insert(prep.vars.end(), mv, mv + nm);
    p.rec->oprs.push_back(prep);
  }

  void step_opr_push() {
    EnginePick p = pick_engine();
    ordo_opr h = pick_value(opr_pool_);
    Prepared* prep = p.rec ? p.rec->find_opr(h) : nullptr;
    bool valid = prep != nullptr;
    for (size_t i = 0; valid && i < prep->vars.size(); ++i) valid = p.rec->has_var(prep->vars[i]);
    StatusSet want = expected_with_handle(p, valid);
    ordo_status s = ordo_opr_push_prepared(p.ptr, h, static_cast<int8_t>(in_.byte()));
    FUZZ_TRACE("  opr_push 0x%016llx on %p -> %d\n", (unsigned long long)h, (void*)p.ptr, s);
    fuzz::check_status(__FILE__, __LINE__, "ordo_opr_push_prepared", s, want);
    if (s == ORDO_OK) ++prep->tally->expected_runs;
  }

  void step_opr_delete() {
    EnginePick p = pick_engine();
    ordo_opr h = pick_value(opr_pool_);
    Prepared* prep = p.rec ? p.rec->find_opr(h) : nullptr;
    StatusSet want = expected_with_handle(p, prep != nullptr);
    // Deleting a prepared op pushes nothing: after destroy it may still work.
    if (p.state == EState::kShutDown && prep) want |= bit(ORDO_OK);
    ordo_status s = ordo_opr_delete(p.ptr, h);
    FUZZ_TRACE("  opr_delete 0x%016llx on %p -> %d (model: %s)\n", (unsigned long long)h,
               (void*)p.ptr, s, prep ? "live" : "not live");
    fuzz::check_status(__FILE__, __LINE__, "ordo_opr_delete", s, want);
    if (s == ORDO_OK) prep->live = false;
  }

  // ---- completions, waits, queries -----------------------------------------------------------

  void completion_used(ordo_completion c) { used_completions_.push_back(c); }

  void step_complete() {
    ordo_completion c = pick_value(completion_pool_);
    int32_t code = (in_.byte() & 3) == 0 ? 7 : 0;
    EngineRec* owner = nullptr;
    size_t at = 0;
    for (EngineRec& r : engines_) {
      for (size_t i = 0; i < r.armed.size(); ++i) {
        if (r.armed[i].first == c) owner = &r, at = i;
      }
    }
    EXPECT_STATUS(ordo_complete(c, code, "fuzz"), owner ? 0 : bit(ORDO_ERR_INVALID_HANDLE));
    if (!owner) return;
    owner->armed.erase(owner->armed.begin() + static_cast<std::ptrdiff_t>(at));
    completion_used(c);
    if (code) owner->failure = true;
  }

  void step_wait_all() {
    EnginePick p = pick_engine();
    if (p.state != EState::kLive) {
      EXPECT_STATUS(ordo_wait_for_all(p.ptr), engine_errors(p));
      return;
    }
    if (!p.rec->armed.empty()) {  // a deferred op nobody has completed: it cannot finish
      EXPECT_STATUS(ordo_wait_for_all_timeout(p.ptr, in_.byte() * 1000u), bit(ORDO_ERR_TIMEOUT));
      return;
    }
    fuzz::Watchdog::Scope hang("ordo_wait_for_all", kHangSeconds);
    EXPECT_STATUS(ordo_wait_for_all(p.ptr),
                  p.rec->failure ? bit(ORDO_ERR_OP_FAILED) : bit(ORDO_OK));
    p.rec->failure = false;
  }

  // get_config, stats, queue stats, dump, write_trace: they read the engine and push nothing.
  void step_engine_queries() {
    EnginePick p = pick_engine();
    bool usable = p.state == EState::kLive || p.state == EState::kShutDown;
    StatusSet want = usable ? 0 : engine_errors(p);
    // The header does not say whether get_config answers after destroy; accept both.
    StatusSet cfg_want =
        p.state == EState::kShutDown ? bit(ORDO_OK) | bit(ORDO_ERR_SHUTDOWN) : want;
    ordo_engine_config cfg;
    ordo_engine_config_init(&cfg);
    ordo_status s = ordo_engine_get_config(p.ptr, &cfg);
    fuzz::check_status(__FILE__, __LINE__, "ordo_engine_get_config", s, cfg_want);
    if (s == ORDO_OK) FUZZ_CHECK(cfg.kind == p.rec->kind, "get_config: wrong kind %d", cfg.kind);
    ordo_stats st;
    std::memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    EXPECT_STATUS(ordo_engine_stats(p.ptr, &st), want);  // documented to work after destroy
    EXPECT_STATUS(ordo_engine_stats(p.ptr, nullptr), want | bit(ORDO_ERR_INVALID_ARGUMENT));
    // The queue list, and the dump (to /dev/null): they read the engine as stats does.
    uint32_t queues = 0;
    ordo_status qs = ordo_engine_queue_count(p.ptr, &queues);
    fuzz::check_status(__FILE__, __LINE__, "ordo_engine_queue_count", qs, want);
    ordo_queue_stats q;
    std::memset(&q, 0, sizeof q);
    q.struct_size = sizeof q;
    if (qs == ORDO_OK) {
      FUZZ_CHECK(queues <= 4, "ordo_engine_queue_count: %u queues on the CPU", queues);
      for (uint32_t i = 0; i <= queues; ++i) {
        EXPECT_STATUS(ordo_engine_queue_stats(p.ptr, i, &q),
                      i < queues ? bit(ORDO_OK) : bit(ORDO_ERR_INVALID_ARGUMENT));
      }
    } else {
      EXPECT_STATUS(ordo_engine_queue_stats(p.ptr, 0, &q), want);
    }
    if (FILE* devnull = std::fopen("/dev/null", "w")) {
      EXPECT_STATUS(ordo_engine_dump(p.ptr, devnull), want);
      std::fclose(devnull);
    }
    EXPECT_STATUS(ordo_engine_dump(p.ptr, nullptr), want | bit(ORDO_ERR_INVALID_ARGUMENT));
    // Tracing is off here: the documented answer is INVALID_STATE, and no file is written.
    char path[64];
    std::snprintf(path, sizeof path, "/nonexistent-ordo-fuzz-dir/%d.json",
                  static_cast<int>(getpid()));
    StatusSet trace_want = usable ? bit(ORDO_ERR_INVALID_STATE) : engine_errors(p);
    if (p.state == EState::kShutDown) trace_want |= bit(ORDO_ERR_SHUTDOWN);
    EXPECT_STATUS(ordo_engine_write_trace(p.ptr, path), trace_want);
    EXPECT_STATUS(ordo_engine_write_trace(p.ptr, nullptr),
                  (usable ? 0 : engine_errors(p)) | bit(ORDO_ERR_INVALID_ARGUMENT));
  }

  // Exec handles are valid only inside their own callback, on its thread.
  void step_exec() {
    std::vector<ordo_exec*> old;
    for (Tally& t : tallies_) {
      if (ordo_exec* x = t.exec.load()) old.push_back(x);
    }
    ordo_exec* x;
    uint8_t how = in_.byte();
    if (how % 3 == 0 && !old.empty()) {
      x = old[(how >> 2) % old.size()];
    } else if (how % 3 == 1) {
      x = reinterpret_cast<ordo_exec*>(static_cast<uintptr_t>(in_.u64()) | 1);
    } else {
      x = reinterpret_cast<ordo_exec*>(&in_);
    }
    ordo_completion c = 0;
    ordo_exec_info info;
    info.struct_size = sizeof info;
    EXPECT_STATUS(ordo_exec_defer(x, &c), bit(ORDO_ERR_INVALID_STATE));
    EXPECT_STATUS(ordo_exec_get_info(x, &info), bit(ORDO_ERR_INVALID_STATE));
    FUZZ_CHECK(c == 0, "a refused ordo_exec_defer wrote a handle");
  }

  // ---- the end of an input ---------------------------------------------------------------------

  void finish() {
    for (EngineRec& r : engines_) {
      if (r.freed) continue;
      EXPECT_STATUS(ordo_wait_for_all_timeout(r.ptr, 0),
                    r.destroyed ? bit(ORDO_ERR_SHUTDOWN)
                                : bit(ORDO_OK) | bit(ORDO_ERR_TIMEOUT) | bit(ORDO_ERR_OP_FAILED));
      with_deferred_completed(&r, false, [] {});
      if (!r.destroyed) {
        fuzz::Watchdog::Scope hang("ordo_engine_destroy at the end", kHangSeconds);
        EXPECT_STATUS(ordo_engine_destroy(r.ptr), 0);
        r.destroyed = true;
        drop_ref(&r);
      }
      while (!r.freed) {
        EXPECT_STATUS(ordo_engine_release(r.ptr), 0);
        drop_ref(&r);
      }
      EXPECT_STATUS(ordo_engine_retain(r.ptr), bit(ORDO_ERR_INVALID_HANDLE));
    }
    for (Tally& t : tallies_) {
      FUZZ_CHECK(t.runs.load() == t.expected_runs, "an op ran %d times, pushed %d times",
                 t.runs.load(), t.expected_runs);
      FUZZ_CHECK(t.frees.load() == (t.expect_free ? 1 : 0), "free_fn ran %d times, expected %d",
                 t.frees.load(), t.expect_free ? 1 : 0);
    }
    for (ordo_completion c : used_completions_) {
      EXPECT_STATUS(ordo_complete(c, 0, nullptr), bit(ORDO_ERR_INVALID_HANDLE));
    }
    // Every engine is destroyed, and destroy drains: every accepted async wait has called back.
    FUZZ_CHECK(async_calls_.load() == async_accepted_, "%d ordo_wait_fn calls for %d async waits",
               async_calls_.load(), async_accepted_);
  }

  fuzz::Input& in_;
  std::deque<EngineRec> engines_;
  std::deque<Tally> tallies_;
  std::vector<uint64_t> var_pool_, opr_pool_, completion_pool_;
  std::vector<ordo_completion> used_completions_;
  std::atomic<int> async_calls_{0};  // ordo_wait_fn calls (count_async_wait)
  int async_accepted_ = 0;           // ordo_wait_for_var_async calls that returned ORDO_OK
  int created_ = 0;
};

}  // namespace
}  // namespace fuzz_handles

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  for (const char* v : {"ORDO_ENGINE", "ORDO_CPU_THREADS", "ORDO_CPU_PRIORITY_THREADS",
                        "ORDO_COPY_THREADS", "ORDO_MAX_PENDING", "ORDO_TRACE"}) {
    unsetenv(v);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  fuzz_handles::Session s(in);
  s.run();
  return 0;
}
