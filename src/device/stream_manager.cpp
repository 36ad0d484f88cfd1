#include "device/stream_manager.h"

#include <chrono>
#include <cstdio>
#include <new>

namespace ordo {

StreamManager::StreamManager(DeviceApi* api, int32_t device, uint32_t compute_streams, DoneFn done,
                             void* ctx)
    : api_(api),
      device_(device),
      done_(done),
      ctx_(ctx),
      compute_(compute_streams < 1 ? 1 : compute_streams, nullptr) {}

StreamManager::~StreamManager() {
  stop();
}

int StreamManager::ensure_started(const char** what) {
  if (life_.load(std::memory_order_acquire) == Life::kRunning) return 0;
  std::lock_guard<std::mutex> g(life_mu_);
  switch (life_.load(std::memory_order_relaxed)) {
    case Life::kRunning:
      return 0;
    case Life::kFailed:
      *what = start_call_;
      return start_error_;
    case Life::kStopped:
      return kStopped;
    case Life::kNew:
      break;
  }
  if (int e = start(what)) {
    start_error_ = e;
    start_call_ = *what;
    life_.store(Life::kFailed, std::memory_order_relaxed);
    return e;
  }
  life_.store(Life::kRunning, std::memory_order_release);
  return 0;
}

int StreamManager::start(const char** what) {
  *what = "cudaSetDevice";
  if (int e = api_->set_device(device_)) return e;
  *what = "cudaStreamCreate";
  for (void*& s : compute_) {
    if (int e = api_->stream_create(&s)) {
      s = nullptr;
      destroy_streams();
      return e;
    }
  }
  int e = api_->stream_create(&to_device_);
  if (e == 0) e = api_->stream_create(&from_device_);
  if (e != 0) {
    destroy_streams();
    return e;
  }
  poller_ = std::thread([this] { poll_loop(); });
  return 0;
}

void StreamManager::destroy_streams() {
  for (void*& s : compute_) {
    if (s) api_->stream_destroy(s);
    s = nullptr;
  }
  if (to_device_) api_->stream_destroy(to_device_);
  if (from_device_) api_->stream_destroy(from_device_);
  to_device_ = from_device_ = nullptr;
}

void StreamManager::stop() {
  std::lock_guard<std::mutex> life(life_mu_);
  const bool running = life_.load(std::memory_order_relaxed) == Life::kRunning;
  life_.store(Life::kStopped, std::memory_order_relaxed);
  if (!running) return;
  {
    std::unique_lock<std::mutex> lk(mu_);
    // The engine drained its ops before stopping its devices, so this wait is short (the last
    // op's report is still returning); it guards against an event left behind regardless.
    drained_cv_.wait(lk, [&] { return in_flight_.load(std::memory_order_acquire) == 0; });
    stopping_ = true;
  }
  cv_.notify_all();
  poller_.join();
  api_->set_device(device_);
  for (void* ev : all_events_) api_->event_destroy(ev);
  all_events_.clear();
  free_events_.clear();
  pins_.clear();
  destroy_streams();
}

int StreamManager::enter(StreamKind kind, void** stream) {
  if (int e = api_->set_device(device_)) return e;
  switch (kind) {
    case StreamKind::kToDevice:
      *stream = to_device_;
      break;
    case StreamKind::kFromDevice:
      *stream = from_device_;
      break;
    case StreamKind::kCompute:
      *stream = compute_[next_compute_.fetch_add(1, std::memory_order_relaxed) % compute_.size()];
      break;
  }
  return 0;
}

AllocFault StreamManager::alloc_fault_for_test;

int StreamManager::track(void* stream, uint64_t token, void** event) {
  void* ev = nullptr;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!free_events_.empty()) {
      ev = free_events_.back();
      free_events_.pop_back();
    } else {
      // A new event, made under the lock with the room for it reserved first (rare: the free
      // list is empty only until the events in flight reach their high mark).
      try {
        alloc_fault_for_test.check();
        all_events_.reserve(all_events_.size() + 1);
        free_events_.reserve(all_events_.size() + 1);
      } catch (const std::bad_alloc&) {
        return DeviceApi::kOutOfMemory;
      }
      if (int e = api_->event_create(&ev)) return e;
      all_events_.push_back(ev);  // reserved
    }
  }
  if (int e = api_->event_record(ev, stream)) {
    std::lock_guard<std::mutex> g(mu_);
    free_events_.push_back(ev);  // reserved
    return e;
  }
  {
    std::lock_guard<std::mutex> g(mu_);
    try {
      alloc_fault_for_test.check();
      pending_.push_back({ev, token});
    } catch (const std::bad_alloc&) {
      // Recorded but not watched: the event goes back (recording it again later is fine), and
      // the op fails rather than wait for a report that would never come.
      free_events_.push_back(ev);  // reserved
      return DeviceApi::kOutOfMemory;
    }
    in_flight_.fetch_add(1, std::memory_order_relaxed);
  }
  if (event) *event = ev;
  cv_.notify_one();
  return 0;
}

void StreamManager::pin(void* event) {
  std::lock_guard<std::mutex> g(mu_);
  alloc_fault_for_test.check();
  ++pins_[event].count;
}

void StreamManager::unpin(void* event) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = pins_.find(event);
  if (it == pins_.end() || --it->second.count != 0) return;
  const bool parked = it->second.parked;
  pins_.erase(it);
  if (parked) free_events_.push_back(event);  // reserved
}

void StreamManager::free_event(void* ev) {
  auto it = pins_.find(ev);
  if (it != pins_.end()) {
    it->second.parked = true;
  } else {
    free_events_.push_back(ev);  // reserved
  }
}

void StreamManager::describe(int code, const char* call, char* buf, size_t cap) const {
  std::snprintf(buf, cap, "CUDA error %d (%s): %s [%s on GPU %d]", code, api_->error_name(code),
                api_->error_string(code), call, static_cast<int>(device_));
}

// The polling thread: takes the events recorded since its last round, queries each, reports the
// fired ones, and keeps the others for the next round. With events in flight it yields a few
// rounds, then sleeps with a growing pause (up to 100 us); with none it sleeps on cv_.
void StreamManager::poll_loop() {
  std::vector<Pending> watching;
  std::vector<void*> fired;
  uint32_t idle_rounds = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      for (void* ev : fired) free_event(ev);
      fired.clear();
      if (watching.empty()) {
        cv_.wait(lk, [&] { return !pending_.empty() || stopping_; });
        if (pending_.empty()) return;  // stopping, nothing in flight
      }
      // Room first: this thread must never throw. Out of memory, the new events wait in
      // pending_ for a later round (the ones watched already are still polled).
      try {
        alloc_fault_for_test.check();
        watching.reserve(watching.size() + pending_.size());
        fired.reserve(watching.size() + pending_.size());
        watching.insert(watching.end(), pending_.begin(), pending_.end());  // reserved
        pending_.clear();
      } catch (const std::bad_alloc&) {
        if (watching.empty()) {
          lk.unlock();
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
          continue;
        }
      }
    }
    bool any = false;
    size_t kept = 0;
    for (const Pending& p : watching) {
      const int q = api_->event_query(p.event);
      if (q == DeviceApi::kNotReady) {
        watching[kept++] = p;
        continue;
      }
      any = true;
      char msg[256];
      if (q != 0) {
        api_->clear_error();
        describe(q, "cudaEventQuery", msg, sizeof msg);
      }
      done_(ctx_, p.token, q, q != 0 ? msg : nullptr);
      fired.push_back(p.event);  // reserved
      if (in_flight_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> g(mu_);
        drained_cv_.notify_all();
      }
    }
    watching.resize(kept);
    if (any || watching.empty()) {
      idle_rounds = 0;
    } else if (++idle_rounds < 16) {
      std::this_thread::yield();
    } else {
      const uint32_t us = idle_rounds < 48 ? 5 * (idle_rounds - 15) : 100;
      std::this_thread::sleep_for(std::chrono::microseconds(us < 100 ? us : 100));
    }
  }
}

}  // namespace ordo
