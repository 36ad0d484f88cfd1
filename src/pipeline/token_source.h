// TokenSource: where a pipeline's first pipe gets its tokens, and what happens to a token that
// defers (docs: ../shared/design/pipeline.md §3). It holds
//   - the next fresh id (num_tokens),
//   - the ready queue: deferred tokens whose targets have all been accepted, FIFO, taken
//     before any fresh id,
//   - the deferred tokens, each with its num_deferrals and how many targets it still waits for,
//   - per target, the tokens waiting for it, in the order they registered,
//   - the targets named by the pipe-0 invocation in progress (a set: duplicates collapse).
// Only pipe-0 steps use it, and they never overlap (pipe 0 is serial), so nothing here locks.
// After warm-up nothing allocates: the tables and queues keep their capacity.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "pipeline/token_map.h"

namespace ordo {

// A token about to enter pipe 0: its id and how many of its pipe-0 invocations deferred.
struct Draw {
  uint64_t token = 0;
  uint64_t deferrals = 0;
};

class TokenSource {
 public:
  enum class Outcome {
    kAccepted,  // the token passed pipe 0: it goes on to pipe 1 on this line
    kDeferred,  // it waits for at least one valid target; the line takes the next token
    kAgain,     // every target was invalid: the same token is invoked again at once
  };

  // Step A of §3.2: the oldest ready token, else a fresh id (not yet counted: settle does).
  Draw next();
  // Starts a pipe-0 invocation: the pending set is empty.
  void begin_invocation() { pending_.clear(); }
  // pf.defer(target) during the invocation. Throws std::bad_alloc when the set cannot grow.
  void add_target(uint64_t target);
  // Ends an invocation that did not stop (steps B and C): counts a fresh id, files the token's
  // valid targets, or accepts it and moves the tokens that waited only for it to the ready
  // queue. Updates d.deferrals. Throws std::bad_alloc (then the run must end: the tables may
  // be half updated, and end_run clears them).
  Outcome settle(Draw* d);
  // Puts a drawn token back at the end of the ready queue (a resumed token on which pipe 0
  // stopped: end_run then reports it as dropped). Throws std::bad_alloc.
  void requeue(const Draw& d) { push_ready(d); }
  // The end of a run (TF-BUG 1: nothing is left to replay in the next run): the ids of every
  // token still deferred or still ready, ascending, go into *dropped (its capacity kept), and
  // the deferral state is cleared; fresh ids go on. Returns how many were dropped (when memory
  // for the list runs out, *dropped is left empty but the count is still right).
  uint64_t end_run(std::vector<uint64_t>* dropped);
  // ordo_pipeline_reset: ids start at 0 again.
  void reset();

  // Fresh ids handed out so far (ordo_pipeline_num_tokens). Any thread.
  uint64_t num_tokens() const { return next_id_.load(std::memory_order_relaxed); }

 private:
  struct Deferred {
    uint64_t deferrals = 0;
    uint32_t remaining = 0;  // targets not yet accepted
  };
  struct Waiters {  // a list of links, oldest registration first
    uint32_t head = kNone;
    uint32_t tail = kNone;
  };
  struct Link {
    uint64_t token;
    uint32_t next;
  };
  static constexpr uint32_t kNone = UINT32_MAX;

  void wait_for(uint64_t target, uint64_t token);
  void accept(uint64_t token);
  void push_ready(const Draw& d);
  void dedupe_pending();
  void clear_deferrals();

  std::atomic<uint64_t> next_id_{0};  // N; written by pipe-0 steps only
  std::vector<uint64_t> pending_;
  // The ready queue: a ring over ready_ (its size a power of two, or 0).
  std::vector<Draw> ready_;
  size_t ready_head_ = 0;
  size_t ready_count_ = 0;
  TokenMap<Deferred> deferred_;
  TokenMap<Waiters> waiters_;
  std::vector<Link> links_;  // the waiter lists' links; free ones chained from free_link_
  uint32_t free_link_ = kNone;
};

}  // namespace ordo
