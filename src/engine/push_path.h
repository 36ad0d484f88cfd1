// PushPath: how an op gets in. A push routes the op to a worker group (DeviceTable), resolves its
// var handles (VarRefs), counts itself on the pushing thread's lane (PendingCounts), takes a
// block from the pool, and arrives at each var's queue under two-phase locking; an op that no
// access waits for is dispatched at once. Every so many pushes a lane checks the submission
// window (max_pending): an overfull window makes the pusher wait, or run ready ops itself
// (ORDO_ENGINE_FLAG_PUSHERS_HELP, push_helping.cpp). Once shutdown begins, pushes are refused.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/op_block.h"
#include "core/op_life.h"
#include "core/op_pool.h"
#include "core/var_refs.h"
#include "core/var_table.h"
#include "engine/device_table.h"
#include "engine/engine_config.h"
#include "engine/op_runner.h"
#include "engine/pending_counts.h"
#include "ordo/ordo.h"

namespace ordo {

class BundleRun;
class Engine;
class PushRecorder;

// What a push asks for, before it becomes an OpBlock.
struct OpSpec {
  ordo_fn fn = nullptr;
  void* user_data = nullptr;
  ordo_free_fn free_fn = nullptr;
  int32_t priority = 0;
  int32_t prop = ORDO_PROP_NORMAL;
  int32_t device_type = ORDO_DEVICE_CPU;
  int32_t device_id = 0;
  const char* name = nullptr;
  OpKind kind = OpKind::kUser;
  void* internal = nullptr;
};

// What ordo_opr_push with no options asks for: fn and user_data; every other field is OpSpec's
// default, here a constant, so that the plain push's instance of push_resolved_as() has none of
// the loads, stores and tests of them (docs/PERFORMANCE.md, "The plain push").
struct PlainSpec {
  ordo_fn fn;
  void* user_data;
  static constexpr ordo_free_fn free_fn = nullptr;
  static constexpr int32_t priority = 0;
  static constexpr int32_t prop = ORDO_PROP_NORMAL;
  static constexpr int32_t device_type = ORDO_DEVICE_CPU;
  static constexpr int32_t device_id = 0;
  static constexpr const char* name = nullptr;
  static constexpr OpKind kind = OpKind::kUser;
  static constexpr void* internal = nullptr;
};
// The OpSpec a spec stands for, for the paths that take one (captures, push_slow).
inline const OpSpec& full_spec(const OpSpec& spec) {
  return spec;
}
inline OpSpec full_spec(const PlainSpec& spec) {
  OpSpec full;
  full.fn = spec.fn;
  full.user_data = spec.user_data;
  return full;
}

// Records why a push was refused (nothing was pushed or done) and returns `status`
// (ORDO_ERR_SHUTDOWN or ORDO_ERR_NO_MEMORY). The message names no call: user pushes,
// ordo_opr_new and the internal pushes of deletes, clears and waits all come here, and the API
// layer puts the caller's name in front.
ordo_status refuse_push(ordo_status status);

class PushPath {
 public:
  struct Parts {
    Engine* engine;          // whose lanes a pushing thread claims (engine/lane_cache.h)
    const WorkerHost* host;  // the same engine, as this thread's state names it
    uint32_t tag;
    uint64_t uid;  // the engine's unique id, which keys a thread's lane (engine/lane_cache.h)
    const EngineConfig& cfg;
    VarTable& vars;
    OpPool& pool;
    PendingCounts& counts;
    DeviceTable& devices;
    OpRunner& runner;
  };
  explicit PushPath(const Parts& parts);
  PushPath(const PushPath&) = delete;
  PushPath& operator=(const PushPath&) = delete;

  // Checks the op's placement (property, device) and returns the group that runs it (nullptr:
  // inline), starting its threads if needed.
  ordo_status route(int32_t prop, int32_t device_type, int32_t device_id, WorkerGroup** out) {
    ordo_status s = devices_.route(prop, device_type, device_id, out);
    return s == ORDO_ERR_SHUTDOWN ? refuse_push(s) : s;
  }
  // Always inlined into its callers (ordo_opr_push, the pipeline's pushes): with two callers
  // the compiler made it a call of its own (docs/PERFORMANCE.md, "Measurements behind the code").
  [[gnu::always_inline]] ordo_status push(const OpSpec& spec, const ordo_var* const_vars,
                                          size_t num_const, const ordo_var* mutable_vars,
                                          size_t num_mutable) {
    WorkerGroup* group;
    // Any other op than a normal CPU one takes push_slow (a GPU op's early release is there),
    // so that the common push pays for nothing it does not use.
    if (!devices_.route_fast(spec.prop, spec.device_type, spec.device_id, &group)) {
      return push_slow(spec, const_vars, num_const, mutable_vars, num_mutable);
    }
    if (num_const + num_mutable == 1) {
      const bool write = num_mutable == 1;
      VarRef ref;
      if (ordo_status s = VarRefs::collect_one(vars_, tag_, write ? mutable_vars[0] : const_vars[0],
                                               write, &ref)) {
        return s;
      }
      return push_resolved(spec, group, &ref, 1);
    }
    VarRefs refs;
    if (ordo_status s =
            refs.collect(vars_, tag_, const_vars, num_const, mutable_vars, num_mutable)) {
      return s;
    }
    return push_resolved(spec, group, refs.data(), refs.size());
  }
  // push() of ordo_opr_push's common case: no options, one var `v` (read, or written when
  // `write`); the caller has checked fn. The whole push is inlined into the caller, with
  // PlainSpec's constants folded (docs/PERFORMANCE.md, "The plain push").
  [[gnu::always_inline]] ordo_status push_plain(ordo_fn fn, void* user_data, ordo_var v,
                                                bool write) {
    const PlainSpec spec{fn, user_data};
    WorkerGroup* group;
    if (!devices_.route_fast(spec.prop, spec.device_type, spec.device_id, &group)) {
      return write ? push_slow(full_spec(spec), nullptr, 0, &v, 1)
                   : push_slow(full_spec(spec), &v, 1, nullptr, 0);
    }
    VarRef ref;
    if (ordo_status s = VarRefs::collect_one(vars_, tag_, v, write, &ref)) return s;
    return push_resolved_as(spec, group, &ref, 1);
  }
  // push() of an op that route_fast does not place: a GPU op that waits may then follow GPU ops
  // whose events are recorded, and early release may start it at once (engine/early_release.h).
  __attribute__((noinline)) ordo_status push_slow(const OpSpec& spec, const ordo_var* const_vars,
                                                  size_t num_const, const ordo_var* mutable_vars,
                                                  size_t num_mutable);
  // push_resolved() for an op of any placement: a GPU op that waits may follow GPU ops whose
  // events are recorded, so early release looks whether it can start at once (push_slow, the
  // prepared ops' push and a graph launch's; the common CPU push never comes here).
  ordo_status push_resolved_any_device(const OpSpec& spec, WorkerGroup* group, VarRef* refs,
                                       size_t n) {
    const ordo_status s = push_resolved(spec, group, refs, n);
    if (s == ORDO_OK && spec.device_type != ORDO_DEVICE_CPU) runner_.early_pushed(refs, n);
    return s;
  }
  // An internal op on one var; `access`: VarLink::kWriteBit, or kMarkBit for a wait's mark.
  ordo_status push_internal(OpKind kind, ordo_var v, uintptr_t access, void* internal);
  // `refs` come from VarRefs::collect (merged, at most OpBlock::kMaxLinks; sorted by slot
  // address unless a short list of distinct vars).
  ordo_status push_resolved(const OpSpec& spec, WorkerGroup* group, VarRef* refs, size_t n);
  // push_resolved's body (engine/push_resolved.h), for an OpSpec or a PlainSpec: inlined into
  // push_resolved and into push_plain's callers.
  template <class Spec>
  [[gnu::always_inline]] ordo_status push_resolved_as(const Spec& spec, WorkerGroup* group,
                                                      VarRef* refs, size_t n);

  // A graph launch's bundle (engine/bulk_bundle.h): its carrier, counted as one push, with no
  // links of its own and not yet queued; the launch joins members to it (join_member) and
  // queues it as it publishes them. Refused as a push is (shutdown, memory), nothing counted.
  ordo_status begin_bundle(BundleRun* run, WorkerGroup* group, OpBlock** out);

  // Refuses every push from now on (shutdown's first step); see push_resolved for the handshake.
  void close() { gate_.fetch_or(kClosed, std::memory_order_seq_cst); }
  bool closed() const { return (gate_.load(std::memory_order_acquire) & kClosed) != 0; }
  // A capture of this engine's pushes begins or ends (engine/push_recorder.h): while any is
  // open, pushes leave their fast path to look whether their thread captures.
  void capture_opened() { gate_.fetch_add(kCapture, std::memory_order_seq_cst); }
  void capture_closed() { gate_.fetch_sub(kCapture, std::memory_order_seq_cst); }

  // The cycle counter as last read: what a push stamps its op with (core/op_life.h), refreshed
  // when an idle spell ends (a worker wakes, a wait begins) and every 256 pushes of a lane.
  void refresh_ticks() { recent_ticks_.store(life_ticks(), std::memory_order_relaxed); }

 private:
  template <class Spec>
  [[gnu::always_inline]] void fill(OpBlock* op, const Spec& spec, WorkerGroup* group);
  // This thread's capture of the engine, if it has one open (engine/push_recorder.h).
  [[gnu::noinline, gnu::cold]] PushRecorder* recording() const;
  bool attach_links(OpBlock* op, size_t n) {
    op->num_links = static_cast<uint16_t>(n);
    return n <= OpBlock::kInlineLinks || attach_overflow_lines(op, n);
  }
  bool attach_overflow_lines(OpBlock* op, size_t n);
  ordo_status enqueue_on_vars(OpBlock* op, VarRef* refs, size_t n, bool* ready);
  [[gnu::always_inline]] ordo_status enqueue_on_var(OpBlock* op, const VarRef& ref, bool* ready);
  // The submission window and helping pushers (push_helping.cpp; run_inline_on_pusher in
  // push_resolved.h).
  void check_throttle(PushLane* lane, bool shared);
  void throttle(PushLane* lane);
  template <class F>
  void as_helper(PushLane* lane, F&& run);
  bool help_while_throttled(PushLane* lane);
  bool run_on_pusher(OpBlock* op, PushLane* lane);
  void run_inline_on_pusher(OpBlock* op, PushLane* lane);

  Engine* const engine_;
  const WorkerHost* const host_;
  const uint32_t tag_;
  const uint64_t uid_;
  const int32_t max_pending_;
  const bool pushers_help_;
  const int64_t throttle_check_every_;  // pushes of one lane between two looks at the window
  VarTable& vars_;
  OpPool& pool_;
  PendingCounts& counts_;
  DeviceTable& devices_;
  OpRunner& runner_;
  // Written rarely, each on a line of its own, so pushes read them from their cache.
  alignas(64) std::atomic<uint64_t> recent_ticks_{life_ticks()};
  // kClosed (shutdown has begun) plus kCapture per open capture: one test on every push.
  static constexpr uint32_t kClosed = 1;
  static constexpr uint32_t kCapture = 2;
  alignas(64) std::atomic<uint32_t> gate_{0};
};

}  // namespace ordo
