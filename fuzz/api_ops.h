// The ops fuzz_api pushes: one record per push, shared by the harness thread and whichever thread
// runs the op. The callback and free_fn check, on that thread, what the contract says must hold
// at that moment:
//   - a callback runs at most once, never after its free_fn, and only once every op it must
//     follow (the model's predecessors that have a free_fn) has finished: free_fn runs "after
//     the op finished ... before waiters on its vars wake", so it marks the end of an op;
//   - free_fn runs exactly once, and for a deferred op only after ordo_complete was called;
//   - inside a callback, waits and destroy of the same engine are ORDO_ERR_WOULD_DEADLOCK, a
//     second defer is ORDO_ERR_INVALID_STATE, a second ordo_complete of one handle is
//     ORDO_ERR_INVALID_HANDLE, pushes work, and ordo_exec_get_info tells the truth.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "api_model.h"
#include "fuzz_check.h"
#include "ordo/ordo.h"

namespace fuzz_api {

struct OpRecord {
  int id = 0;     // for messages
  int node = -1;  // the model's node, once the push succeeded
  bool is_child = false;
  bool pushed = false;   // the push returned ORDO_OK
  bool tracked = false;  // pushed with our free_fn (not with opts == NULL)
  Behaviour behaviour = Behaviour::kReturn;
  int32_t code = 0;
  int32_t ignored_return = 0;   // what deferred callbacks return (must not matter)
  bool complete_twice = false;  // kDeferInside: also checks a second ordo_complete
  // What ordo_exec_get_info must say.
  ordo_engine* engine = nullptr;
  bool inline_run = false;  // naive engine or ORDO_PROP_ASYNC: worker_index -1
  // ORDO_ENGINE_FLAG_PUSHERS_HELP and a normal CPU op: a throttled pusher may run it (index -1).
  bool may_run_on_pusher = false;
  int32_t prop = 0;
  int32_t priority = 0;
  char name[ORDO_NAME_MAX + 1] = {};
  ordo_var own_var = 0;          // a var the op uses (0: none), for the wait it tries from inside
  std::vector<OpRecord*> preds;  // tracked ops that must have finished before this one runs
  OpRecord* child = nullptr;     // kPushChild

  std::atomic<int> runs{0};
  std::atomic<int> frees{0};
  std::atomic<ordo_completion> completion{0};  // published by deferring callbacks
  std::atomic<bool> completed_by_harness{false};
  std::atomic<ordo_exec*> exec{nullptr};  // kept to test stale exec handles
};

int32_t run_op(ordo_exec* exec, void* user_data);

// Set on the harness's own thread; callbacks of threaded engines that run there were run by a
// helping pusher (ORDO_ENGINE_FLAG_PUSHERS_HELP). Counted so that a trace shows the mode at work.
inline thread_local bool tls_harness_thread = false;
inline std::atomic<long> g_runs_on_harness{0};

inline void free_op(void* user_data) {
  auto* r = static_cast<OpRecord*>(user_data);
  int before = r->frees.fetch_add(1, std::memory_order_acq_rel);
  FUZZ_CHECK(before == 0, "op %d: free_fn called %d times", r->id, before + 1);
  FUZZ_CHECK(r->runs.load() <= 1, "op %d: ran %d times", r->id, r->runs.load());
  if (r->behaviour == Behaviour::kDeferLater && r->runs.load() == 1) {
    FUZZ_CHECK(r->completed_by_harness.load(),
               "op %d deferred, but finished before its "
               "ordo_complete",
               r->id);
  }
}

inline ordo_push_opts child_opts() {
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.free_fn = free_op;
  o.name = "child";
  return o;
}

inline ordo_completion defer_ok(OpRecord* r, ordo_exec* exec) {
  ordo_completion c = 0;
  EXPECT_STATUS(ordo_exec_defer(exec, &c), 0);
  FUZZ_CHECK(c != 0, "op %d: ordo_exec_defer gave the handle 0", r->id);
  return c;
}

inline void check_info(OpRecord* r, ordo_exec* exec) {
  ordo_exec_info info;
  std::memset(&info, 0xAB, sizeof info);
  info.struct_size = sizeof info;
  EXPECT_STATUS(ordo_exec_get_info(exec, &info), 0);
  FUZZ_CHECK(info.struct_size == sizeof info, "op %d: info.struct_size changed", r->id);
  FUZZ_CHECK(info.device_type == ORDO_DEVICE_CPU && info.device_id == 0 && !info.stream,
             "op %d: not on the CPU", r->id);
  FUZZ_CHECK(info.prop == r->prop && info.priority == r->priority,
             "op %d: info says prop %d priority %d, pushed with %d, %d", r->id, info.prop,
             info.priority, r->prop, r->priority);
  FUZZ_CHECK(info.engine == r->engine, "op %d: info.engine is not its engine", r->id);
  FUZZ_CHECK(info.name && std::strcmp(info.name, r->name) == 0,
             "op %d: info.name \"%s\", expected \"%s\"", r->id, info.name ? info.name : "(null)",
             r->name);
  if (r->inline_run) {
    FUZZ_CHECK(info.worker_index == -1, "op %d runs inline, worker_index %d", r->id,
               info.worker_index);
  } else if (r->may_run_on_pusher) {
    FUZZ_CHECK(info.worker_index >= -1,
               "op %d runs on a worker or a helping pusher, worker_index %d", r->id,
               info.worker_index);
  } else {
    FUZZ_CHECK(info.worker_index >= 0, "op %d runs on a worker, worker_index %d", r->id,
               info.worker_index);
  }
  // A caller compiled against an older, shorter struct: nothing past its size is written.
  unsigned char small[16];
  std::memset(small, 0xCD, sizeof small);
  uint32_t eight = 8;
  std::memcpy(small, &eight, sizeof eight);
  EXPECT_STATUS(ordo_exec_get_info(exec, reinterpret_cast<ordo_exec_info*>(small)), 0);
  for (size_t i = 8; i < sizeof small; ++i) {
    FUZZ_CHECK(small[i] == 0xCD, "op %d: ordo_exec_get_info wrote past struct_size", r->id);
  }
  ordo_exec_info tiny;
  tiny.struct_size = 3;
  EXPECT_STATUS(ordo_exec_get_info(exec, &tiny), fuzz::bit(ORDO_ERR_INVALID_ARGUMENT));
}

inline void try_blocking_calls(OpRecord* r) {
  using fuzz::bit;
  EXPECT_STATUS(ordo_wait_for_all(r->engine), bit(ORDO_ERR_WOULD_DEADLOCK));
  EXPECT_STATUS(ordo_wait_for_all_timeout(r->engine, 0), bit(ORDO_ERR_WOULD_DEADLOCK));
  EXPECT_STATUS(ordo_engine_destroy(r->engine), bit(ORDO_ERR_WOULD_DEADLOCK));
  if (r->own_var) {
    // The harness may have deleted the var since the push: then INVALID_HANDLE is right too.
    EXPECT_STATUS(ordo_wait_for_var_timeout(r->engine, r->own_var, 0),
                  bit(ORDO_ERR_WOULD_DEADLOCK) | bit(ORDO_ERR_INVALID_HANDLE));
  }
}

// The behaviours that defer; returns what the callback returns (ignored by the engine).
inline int32_t run_deferring(OpRecord* r, ordo_exec* exec) {
  using fuzz::bit;
  ordo_completion c = defer_ok(r, exec);
  switch (r->behaviour) {
    case Behaviour::kDeferLater:
      break;
    case Behaviour::kDeferTwice: {
      ordo_completion again = 0;
      EXPECT_STATUS(ordo_exec_defer(exec, &again), bit(ORDO_ERR_INVALID_STATE));
      EXPECT_STATUS(ordo_complete(c, r->code, "completed inside"), 0);
      break;
    }
    default:  // kDeferInside
      EXPECT_STATUS(ordo_complete(c, r->code, r->code ? "failed inside" : nullptr), 0);
      if (r->complete_twice) {
        EXPECT_STATUS(ordo_complete(c, 0, nullptr), bit(ORDO_ERR_INVALID_HANDLE));
      }
      break;
  }
  r->completion.store(c, std::memory_order_release);
  return r->ignored_return;
}

inline int32_t run_op(ordo_exec* exec, void* user_data) {
  auto* r = static_cast<OpRecord*>(user_data);
  int before = r->runs.fetch_add(1, std::memory_order_acq_rel);
  FUZZ_CHECK(before == 0, "op %d: callback called %d times", r->id, before + 1);
  FUZZ_CHECK(r->frees.load() == 0, "op %d: callback after its free_fn", r->id);
  for (OpRecord* p : r->preds) {
    FUZZ_CHECK(p->frees.load(std::memory_order_acquire) == 1,
               "op %d started before op %d, which it must follow, had finished", r->id, p->id);
  }
  r->exec.store(exec, std::memory_order_release);
  if (tls_harness_thread && !r->inline_run) {
    FUZZ_CHECK(r->may_run_on_pusher, "op %d ran on the pushing thread of a worker engine", r->id);
    g_runs_on_harness.fetch_add(1, std::memory_order_relaxed);
  }
  switch (r->behaviour) {
    case Behaviour::kThrow:
      throw std::runtime_error("fuzz_api: an op that throws");
    case Behaviour::kDeferLater:
    case Behaviour::kDeferInside:
    case Behaviour::kDeferTwice:
      return run_deferring(r, exec);
    case Behaviour::kWaitInside:
      try_blocking_calls(r);
      break;
    case Behaviour::kPushChild: {
      ordo_push_opts o = child_opts();
      EXPECT_STATUS(ordo_opr_push(r->engine, run_op, r->child, nullptr, 0, nullptr, 0, &o), 0);
      break;
    }
    case Behaviour::kGetInfo:
      check_info(r, exec);
      break;
    default:
      break;
  }
  return r->code;
}

}  // namespace fuzz_api
