#include "exec/worker_group.h"

#include <cxxabi.h>
#include <pthread.h>
#include <sched.h>

#include <cstdio>
#include <system_error>

namespace ordo {

WorkerGroup::WorkerGroup(WorkerHost* host, const char* role, int32_t threads)
    : host_(host), role_(role), threads_(threads), pause_rounds_(pause_rounds_for(threads)) {}

WorkerGroup::~WorkerGroup() {
  stop_and_join();
}

ordo_status WorkerGroup::start() {
  std::lock_guard<std::mutex> g(start_mutex_);
  if (started_.load(std::memory_order_relaxed)) return ORDO_OK;
  if (stopping_.load(std::memory_order_relaxed)) return ORDO_ERR_SHUTDOWN;  // stop_and_join ran
  try {
    // Every Worker exists before any thread runs: workers scan each other's deques to steal.
    workers_.reserve(static_cast<size_t>(threads_));
    for (int32_t i = 0; i < threads_; ++i) {
      workers_.push_back(std::make_unique<Worker>());
      workers_.back()->group = this;
      workers_.back()->index = i;
    }
  } catch (const std::exception&) {
    workers_.clear();
    return ORDO_ERR_NO_MEMORY;
  }
  try {
    threads_vec_.reserve(static_cast<size_t>(threads_));
    for (int32_t i = 0; i < threads_; ++i) {
      Worker* w = workers_[static_cast<size_t>(i)].get();
      threads_vec_.emplace_back([this, w] { run(w); });
      char name[32];  // the kernel keeps 15 characters
      std::snprintf(name, sizeof name, "ordo-%.4s-%d", role_, static_cast<int>(i % 1000));
      name[15] = '\0';
      pthread_setname_np(threads_vec_.back().native_handle(), name);
    }
  } catch (const std::exception&) {
    // Threads that did start serve the queue; report the shortfall only if none did. Then the
    // workers go too: a later first op tries again, and must not add a second set beside them.
    if (threads_vec_.empty()) {
      workers_.clear();
      return ORDO_ERR_NO_MEMORY;
    }
    threads_ = static_cast<int32_t>(threads_vec_.size());
  }
  started_.store(true, std::memory_order_release);
  return ORDO_OK;
}

void WorkerGroup::stop_and_join() {
  std::lock_guard<std::mutex> g(start_mutex_);
  stopping_.store(true, std::memory_order_seq_cst);
  wake_.notify_all();
  for (auto& t : threads_vec_) {
    if (t.joinable()) t.join();
  }
}

int32_t WorkerGroup::running_threads() {
  if (stopping_.load(std::memory_order_acquire)) return 0;  // joined, or about to be
  std::lock_guard<std::mutex> g(start_mutex_);
  return static_cast<int32_t>(threads_vec_.size()) - exited_.load(std::memory_order_relaxed);
}

uint64_t WorkerGroup::ready_depth() {
  std::lock_guard<std::mutex> g(start_mutex_);  // workers_ is built under it
  uint64_t n = queue_.approx_size();
  for (const auto& w : workers_) n += w->deque.approx_size();
  return n;
}

void WorkerGroup::run(Worker* w) {
  try {
    host_->enter_worker(w);  // a replacement runs caller code there: inside the try
    for (;;) {
      OpBlock* op = w->next;
      w->next = nullptr;
      if (!op) op = find_work(w);
      if (!op) op = wait_for_work(w);
      if (!op) break;
      host_->execute(op, w);
    }
  } catch (abi::__forced_unwind&) {
    // Caller code ended this thread (pthread_exit, cancellation); the host has finished the op.
    // The thread must go on ending, so another takes its place and its Worker (next op, deque,
    // lane), unless the group is stopping.
    host_->flush_completions(w);
    replace(w);
    throw;
  }
  host_->flush_completions(w);
}

// Starts a thread to take over worker `w`, whose own thread is ending. Never throws, never
// blocks on stop_and_join (which holds start_mutex_ while it joins this very thread): it gives
// up once the group is stopping, and the ops `w` held then go to the shared queue, where the
// drain, which stops the group only when nothing is pending, has already seen them done.
void WorkerGroup::replace(Worker* w) {
  for (;;) {
    if (stopping_.load(std::memory_order_acquire)) break;
    std::unique_lock<std::mutex> lock(start_mutex_, std::try_to_lock);
    if (!lock.owns_lock()) {
      sched_yield();
      continue;
    }
    if (stopping_.load(std::memory_order_relaxed)) break;
    // Counted under the lock, with the replacement: running_threads() never sees the gap.
    exited_.fetch_add(1, std::memory_order_relaxed);
    try {
      threads_vec_.emplace_back([this, w] { run(w); });
      char name[32];
      std::snprintf(name, sizeof name, "ordo-%.4s-%d", role_, static_cast<int>(w->index % 1000));
      name[15] = '\0';
      pthread_setname_np(threads_vec_.back().native_handle(), name);
      return;
    } catch (...) {
      // No thread: the group goes on with one fewer.
      lock.unlock();
      give_up_worker(w);
      return;
    }
  }
  exited_.fetch_add(1, std::memory_order_relaxed);
  give_up_worker(w);
}

// A worker whose thread ended is not replaced: the op it kept for itself goes to the shared
// queue (its deque is stolen from as before).
void WorkerGroup::give_up_worker(Worker* w) {
  if (OpBlock* op = w->next) {
    w->next = nullptr;
    queue_.push(op, static_cast<size_t>(w->index));
    wake_one();
  }
}

// Urgent (positive-priority) ops first, then this worker's own deque (newest first: its data is
// warm), then the shared queue's priority-0 ops, then other workers' deques (which hold only
// priority-0 ops), and negative priorities last.
OpBlock* WorkerGroup::find_work(Worker* w) {
  const size_t hint = static_cast<size_t>(w->index);
  if (queue_.has_urgent()) {
    if (OpBlock* op = queue_.pop(hint)) return op;
  }
  if (OpBlock* op = w->deque.pop()) return op;
  if (OpBlock* op = queue_.pop(hint)) return op;
  if (OpBlock* op = steal(w)) return op;
  return queue_.pop_negative();
}

OpBlock* WorkerGroup::steal(Worker* w) {
  size_t n = workers_.size();
  for (size_t i = 1; i < n; ++i) {
    Worker* victim = workers_[(static_cast<size_t>(w->index) + i) % n].get();
    if (OpBlock* op = victim->deque.steal()) return op;
  }
  return nullptr;
}

bool WorkerGroup::any_work_visible() const {
  if (queue_.maybe_nonempty()) return true;
  for (const auto& other : workers_) {
    if (other->deque.maybe_nonempty()) return true;
  }
  return false;
}

namespace {
constexpr int kPauseRounds = 8;    // ~10 us of pause-spinning before yielding
constexpr int kSearchRounds = 64;  // then yields, up to this many rounds in all, before sleeping

// The CPUs this process may run on.
int usable_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  unsigned n = std::thread::hardware_concurrency();
  return n ? static_cast<int>(n) : 1;
}
}  // namespace

// Pause-spinning holds the CPU. When the group has a worker for every usable CPU, any thread that
// pushes work shares a CPU with a worker, and a pause-spinning worker takes that CPU from it;
// yielding at once hands it over. Measured on 2 vCPUs with 2 workers (bench_ordo, runs at the
// same core-to-core round trip): yielding at once took an independent-op push (A) from ~128 to
// ~72 ns/op and a chain (B) from ~64 to ~57, fan-out (C) within noise, at the price of a slightly
// lower efficiency at 1 us grains (F).
int WorkerGroup::pause_rounds_for(int32_t threads) {
  return threads < usable_cpus() ? kPauseRounds : 0;
}

// Spins briefly (work often arrives within microseconds; pause-spinning only where the machine
// has CPUs to spare, see pause_rounds_for), then yields, then sleeps. Yielding early matters: the
// thread that pushes the work usually shares the cores with the workers, and a spinning worker
// would take the CPU from it. Completions are flushed first, so that a waiter
// sees the engine idle as soon as it is.
OpBlock* WorkerGroup::wait_for_work(Worker* w) {
  host_->flush_completions(w);
  for (;;) {
    if (OpBlock* op = search(w)) return op;
    uint32_t key = wake_.prepare_wait();
    if (any_work_visible()) {  // an op is there, or a push is half done: search again
      wake_.cancel_wait();
      continue;
    }
    if (stopping_.load(std::memory_order_seq_cst)) {
      wake_.cancel_wait();
      return find_work(w);
    }
    wake_.wait(key);
    host_->worker_woke(w);
  }
}

// The spinning phase, during which producers leave this worker unwoken (see wake_one). When
// it ends, this worker may have been counted on for work it has not seen: having found an op,
// the last searcher wakes a sleeper if more work is visible; having found none, the caller
// checks once more before sleeping.
OpBlock* WorkerGroup::search(Worker* w) {
  searching_.fetch_add(1, std::memory_order_seq_cst);
  OpBlock* op = nullptr;
  for (int round = 0; round < kSearchRounds; ++round) {
    if ((op = find_work(w))) break;
    if (round < pause_rounds_) {
      for (int i = 0; i < 32; ++i) cpu_relax();
    } else {
      sched_yield();
    }
  }
  if (searching_.fetch_sub(1, std::memory_order_seq_cst) == 1 && op && any_work_visible()) {
    wake_.notify_one();
  }
  return op;
}

}  // namespace ordo
