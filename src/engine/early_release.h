// EarlyRelease: GPU successors start before their producers' work has finished (issue #25 item
// 4, docs/ARCHITECTURE.md §7). A GPU op whose event is recorded (its callback returned, its
// work enqueued) lets the GPU ops of the same device that come next on its vars start at once;
// each waits for the producers' events on its own stream (cudaStreamWaitEvent) before its
// callback runs. Nothing changes in the vars' queues (core/var_slot.h): a successor so started
// is "granted early", its op's wait counter decremented for that access, while the var still
// holds it queued; the var grants it for real when the producer completes (its event fired), as
// it always did, and the op completes only then (OpBlock::early_refs). So every other access (a
// CPU op, a wait, another GPU's op, a delete) is granted exactly as before, once the work it
// follows has finished.
//
// Per var, a *front* lists the GPU accesses this engine tracks, in queue order, by stage: stage
// 0 is the var's active accesses (those of them that are tracked), each later stage a group
// granted early (one writer, or readers). The last stage may extend (the next group is granted
// early) when every access in it is recorded, and it is the whole group: for stage 0, the
// var's active accesses are all tracked (its state word's counts); for a later stage, no access
// outside it joined its group. Then the next group's ops of the same device are granted early
// with the last stage's events to wait for; a group that has any other access (a CPU op, a wait
// mark, another device's op) is granted early only in part and ends the front there.
//
// One mutex guards every front. Walking a var's queue also needs its push lock (no pusher is
// linking) and no completion processing the var: the var's active accesses are then all tracked
// GPU ops, and a tracked op completes its accesses under the same mutex (complete_links). Lock
// order: the mutex, then a push lock (VarSlot::complete may take it as a wait mark fires).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "base/alloc_fault.h"
#include "core/error_record.h"
#include "core/op_block.h"
#include "core/var_refs.h"
#include "core/var_slot.h"
#include "device/stream_manager.h"

namespace ordo {

// The events an op granted early waits for on its stream before its callback runs (pinned in
// their StreamManager until then).
struct EarlyWaits {
  struct Wait {
    void* event;
    void* stream;  // the producer's: no wait when the op runs on the same stream
  };
  std::vector<Wait> waits;
};

class EarlyRelease {
 public:
  // What a call made ready to run (dispatch them) or completed for real (finalize them: their
  // last access was granted by its var, after their own completion); chained through `next`.
  struct Handoff {
    OpBlock* ready = nullptr;
    OpBlock* finished = nullptr;
    void add_ready(OpBlock* op) {
      op->next = ready;
      ready = op;
    }
    void add_finished(OpBlock* op) {
      op->next = finished;
      finished = op;
    }
  };

  // `gpu(id)`: GPU id's streams (the events' owner).
  explicit EarlyRelease(StreamManager* (*gpu)(const void* ctx, uint32_t id), const void* ctx)
      : gpu_(gpu), ctx_(ctx) {}

  // `op`'s event is recorded on `stream` (its block cannot complete meanwhile): it joins its
  // vars' fronts, which may extend.
  void recorded(OpBlock* op, void* event, void* stream, Handoff* out);
  // A GPU op was pushed onto these vars and waits: their fronts may extend to it.
  void pushed(const VarRef* refs, size_t n, Handoff* out);
  // A GPU op completes (OpRunner::finalize_gpu): stores `failure` on its mutable vars and
  // completes its accesses, leaving the fronts; what the vars grant is settled into `out`.
  void complete_links(OpBlock* op, ErrorRecord* failure, Handoff* out);
  // Before the callback of an op granted early: its stream (nullptr: it will not run) waits for
  // the producers' events, which are unpinned. 0, or the backend's error of the failed wait.
  int issue_waits(OpBlock* op, void* stream);

  // Checked before each allocation early release makes (base/alloc_fault.h). Out of memory, early
  // release grants less, never wrongly: an access it cannot grant early waits for its real
  // grant, as with early release off.
  static AllocFault alloc_fault_for_test;

 private:
  struct Member {
    OpBlock* op;
    VarLink* link;
    void* event;  // nullptr until recorded
    void* stream;
  };
  struct Stage {
    bool write;
    bool whole;  // every access of the group is a member (later stages; stage 0 is checked)
    std::vector<Member> members;
  };
  struct Front {
    uint8_t device;
    std::deque<Stage> stages;  // [0]: the active accesses
  };

  void join(VarSlot* v, const VarLink* l, OpBlock* op, void* event, void* stream);
  void extend(VarSlot* v, Front& f, Handoff* out);
  bool extend_once(VarSlot* v, Front& f, Handoff* out);
  bool grant_group(VarSlot* v, Front& f, VarLink* start, Handoff* out);
  bool eligible(const VarLink* l, uint8_t device) const;
  bool grant_early(VarLink* l, const Stage& after, Handoff* out);
  static bool room_for_member(Stage* stage);
  void leave(VarSlot* v, OpBlock* op);
  void settle(VarLink* granted, Handoff* out);

  StreamManager* (*const gpu_)(const void* ctx, uint32_t id);
  const void* const ctx_;
  std::mutex mu_;
  std::unordered_map<VarSlot*, Front> fronts_;
};

}  // namespace ordo
