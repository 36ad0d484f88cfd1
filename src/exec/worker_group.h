// WorkerGroup: a set of worker threads that serve one ReadyQueue (one device and property, or
// the whole engine for the pooled kind). Threads start on first use, so per_device engines do
// not spawn priority and copy workers nobody asks for.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/event_count.h"
#include "core/op_pool.h"
#include "core/push_lane.h"
#include "exec/ready_queue.h"
#include "exec/work_deque.h"
#include "exec/worker_host.h"
#include "ordo/ordo.h"
#include "trace/trace_buffer.h"

namespace ordo {

class WorkerGroup;

struct alignas(64) Worker {
  WorkerGroup* group = nullptr;
  int32_t index = 0;
  OpBlock* next = nullptr;       // a ready op this worker runs next (no queue round trip)
  uint32_t unflushed = 0;        // completions since waiters were last told (see flush_completions)
  OpCache cache;                 // private free OpBlocks
  PushLane* lane = nullptr;      // counts the pushes this worker's ops make
  WorkDeque deque;               // ops this worker made ready; other workers of the group steal
  TraceBuffer* trace = nullptr;  // this worker's trace row; nullptr when tracing is off
  bool entered = false;          // its host set it up (a replacement thread keeps what it set up)
  bool vacant = false;           // its thread ended, none took it over yet (under start_mutex_)
};

class WorkerGroup {
 public:
  WorkerGroup(WorkerHost* host, const char* role, int32_t threads);
  ~WorkerGroup();

  bool started() const { return started_.load(std::memory_order_acquire); }
  // Starts the threads if not yet started. ORDO_OK, ORDO_ERR_NO_MEMORY, or ORDO_ERR_SHUTDOWN once
  // stop_and_join has run (threads started then would never be joined before the destructor).
  ordo_status ensure_started() {
    return started_.load(std::memory_order_acquire) ? ORDO_OK : start();
  }
  // Hands a ready op to the group's workers; `ring_hint` picks one of the ready rings. True when
  // it woke a sleeping worker.
  bool enqueue(OpBlock* op, size_t ring_hint) {
    queue_.push(op, ring_hint);  // a seq_cst RMW: the producer's half of the handshake (wake_one)
    return wake_one();
  }
  // Puts an op that worker `w` (of this group) made ready on its own deque, waking an idle
  // worker to steal it. False when the op must go through enqueue() instead.
  bool hand_to_self(Worker& w, OpBlock* op) {
    if (w.group != this || op->priority != 0 || !w.deque.push(op)) return false;
    std::atomic_thread_fence(std::memory_order_seq_cst);  // stands in for the RMW of enqueue()
    wake_one();
    return true;
  }
  // A ready op from the shared queue for a thread that is not one of the group's workers (a
  // throttled pusher that helps), or nullptr. The workers' own deques are left to them.
  OpBlock* take_ready(size_t ring_hint) {
    OpBlock* op = queue_.pop(ring_hint);
    return op ? op : queue_.pop_negative();
  }
  // Whether a worker of this group that just made `op` ready may run it itself next.
  bool may_keep(const Worker& w, const OpBlock* op) const {
    return w.group == this && w.next == nullptr && op->priority >= 0 && !queue_.has_urgent();
  }
  void stop_and_join();
  // Starts a thread for each worker whose thread caller code ended and that none took over yet
  // (worker_ended). One load when there is none.
  void refill();
  WorkerHost* host() const { return host_; }
  // The threads the group runs (its workers' indices are below it).
  int32_t threads() const { return threads_; }
  const char* role() const { return role_; }
  // Threads running, and ops ready and not yet taken (approximate while workers run).
  int32_t running_threads();
  uint64_t ready_depth();

 private:
  ordo_status start();
  void run(Worker* w);
  void worker_ended(Worker* w);
  void refill_locked();
  void give_up_worker(Worker* w);
  OpBlock* wait_for_work(Worker* w);
  OpBlock* search(Worker* w);
  // Wakes a sleeping worker for newly published work, unless a worker is searching: that one
  // will find it within microseconds, and a futex wake costs the producer (often the pushing
  // thread, the bottleneck) a system call. Producers call it after publishing with a seq_cst
  // RMW or fence; a searcher stops counting itself with a seq_cst RMW before its last look for
  // work, so either the producer sees it searching or it sees the work.
  bool wake_one() { return searching_.load(std::memory_order_seq_cst) == 0 && wake_.notify_one(); }
  OpBlock* find_work(Worker* w);
  OpBlock* steal(Worker* w);
  bool any_work_visible() const;
  static int pause_rounds_for(int32_t threads);

  WorkerHost* host_;
  const char* role_;
  int32_t threads_;
  int pause_rounds_;  // search rounds that pause-spin before the yielding ones
  ReadyQueue queue_;
  EventCount wake_;
  alignas(64) std::atomic<int32_t> searching_{0};  // workers spinning for work (not asleep)
  std::atomic<bool> started_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<int32_t> exited_{0};     // threads that caller code ended (worker_ended)
  std::atomic<int32_t> vacancies_{0};  // workers whose thread ended, not yet taken over
  std::mutex start_mutex_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<std::thread> threads_vec_;
};

}  // namespace ordo
