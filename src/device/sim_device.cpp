#include "device/sim_device.h"

#include <algorithm>

namespace ordo {

namespace {
thread_local int32_t tls_device = -1;
}  // namespace

struct SimDevice::Event {
  uint64_t recorded = 0;  // records made (the last one is what a query asks about)
  uint64_t reached = 0;   // the latest record its stream has reached
  int error = 0;          // the error the reached record reported
};

struct SimDevice::Item {
  enum Kind { kKernel, kRecord, kWait, kHostFunc } kind;
  std::function<void()> fn;
  int error = 0;
  Event* event = nullptr;
  uint64_t epoch = 0;
  void (*host_fn)(void*) = nullptr;
  void* arg = nullptr;
};

struct SimDevice::Stream {
  int32_t device = 0;
  std::deque<Item> items;
  int pending_error = 0;  // a failed kernel's, until the next event reached reports it
  bool stopping = false;
  std::thread thread;
};

SimDevice::SimDevice(int32_t devices) : devices_(devices) {}

SimDevice::~SimDevice() {
  std::vector<std::unique_ptr<Stream>> left;
  {
    std::lock_guard<std::mutex> g(mu_);
    for (auto& s : streams_) s->stopping = true;
    left.swap(streams_);
  }
  cv_.notify_all();
  for (auto& s : left) s->thread.join();
}

int32_t SimDevice::device_count(const char** why) {
  if (devices_ == 0 && why) *why = "the simulated device has no GPU";
  return devices_;
}

int SimDevice::take_failure(Call call) {
  int& f = fail_code_[static_cast<int>(call)];
  int code = f;
  f = 0;
  return code;
}

int SimDevice::set_device(int32_t device) {
  std::lock_guard<std::mutex> g(mu_);
  if (int code = take_failure(Call::kSetDevice)) return code;
  if (device < 0 || device >= devices_) return kErrInvalidValue;
  tls_device = device;
  return 0;
}

int32_t SimDevice::current_device() {
  return tls_device;
}

int SimDevice::stream_create(void** out) {
  std::lock_guard<std::mutex> g(mu_);
  if (int code = take_failure(Call::kStreamCreate)) return code;
  auto s = std::make_unique<Stream>();
  s->device = tls_device < 0 ? 0 : tls_device;
  Stream* raw = s.get();
  s->thread = std::thread([this, raw] { run_stream(raw); });
  streams_.push_back(std::move(s));
  *out = raw;
  return 0;
}

int SimDevice::stream_destroy(void* stream) {
  std::unique_ptr<Stream> mine;
  {
    std::lock_guard<std::mutex> g(mu_);
    auto it = std::find_if(streams_.begin(), streams_.end(),
                           [&](const std::unique_ptr<Stream>& s) { return s.get() == stream; });
    if (it == streams_.end()) return kErrInvalidValue;
    (*it)->stopping = true;  // like CUDA: the work already enqueued still runs
    mine = std::move(*it);
    streams_.erase(it);
  }
  cv_.notify_all();
  mine->thread.join();
  return 0;
}

int SimDevice::event_create(void** out) {
  std::lock_guard<std::mutex> g(mu_);
  events_.push_back(std::make_unique<Event>());
  *out = events_.back().get();
  return 0;
}

int SimDevice::event_destroy(void* event) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = std::find_if(events_.begin(), events_.end(),
                         [&](const std::unique_ptr<Event>& e) { return e.get() == event; });
  if (it == events_.end()) return kErrInvalidValue;
  events_.erase(it);
  return 0;
}

int SimDevice::event_record(void* event, void* stream) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (int code = take_failure(Call::kEventRecord)) return code;
    auto* e = static_cast<Event*>(event);
    Item it{Item::kRecord, {}, 0, e, ++e->recorded, nullptr, nullptr};
    static_cast<Stream*>(stream)->items.push_back(std::move(it));
  }
  cv_.notify_all();
  return 0;
}

int SimDevice::event_query(void* event) {
  std::lock_guard<std::mutex> g(mu_);
  if (int code = take_failure(Call::kEventQuery)) return code;
  auto* e = static_cast<Event*>(event);
  if (e->reached < e->recorded) return kNotReady;
  return e->error;
}

int SimDevice::stream_wait_event(void* stream, void* event) {
  {
    std::lock_guard<std::mutex> g(mu_);
    auto* e = static_cast<Event*>(event);
    Item it{Item::kWait, {}, 0, e, e->recorded, nullptr, nullptr};
    static_cast<Stream*>(stream)->items.push_back(std::move(it));
  }
  cv_.notify_all();
  return 0;
}

int SimDevice::launch_host_func(void* stream, void (*fn)(void*), void* arg) {
  {
    std::lock_guard<std::mutex> g(mu_);
    Item it{Item::kHostFunc, {}, 0, nullptr, 0, fn, arg};
    static_cast<Stream*>(stream)->items.push_back(std::move(it));
  }
  cv_.notify_all();
  return 0;
}

void SimDevice::launch(void* stream, std::function<void()> fn, int error) {
  {
    std::lock_guard<std::mutex> g(mu_);
    Item it{Item::kKernel, std::move(fn), error, nullptr, 0, nullptr, nullptr};
    static_cast<Stream*>(stream)->items.push_back(std::move(it));
  }
  cv_.notify_all();
}

void SimDevice::fail_next(Call call, int code) {
  std::lock_guard<std::mutex> g(mu_);
  fail_code_[static_cast<int>(call)] = code;
}

int32_t SimDevice::device_of(void* stream) {
  std::lock_guard<std::mutex> g(mu_);
  for (auto& s : streams_) {
    if (s.get() == stream) return s->device;
  }
  return -1;
}

size_t SimDevice::live_streams() {
  std::lock_guard<std::mutex> g(mu_);
  return streams_.size();
}

size_t SimDevice::live_events() {
  std::lock_guard<std::mutex> g(mu_);
  return events_.size();
}

const char* SimDevice::error_name(int code) {
  switch (code) {
    case 0:
      return "cudaSuccess";
    case kErrInvalidValue:
      return "cudaErrorInvalidValue";
    case kNotReady:
      return "cudaErrorNotReady";
    case kOutOfMemory:
      return "cudaErrorMemoryAllocation";
    case kErrLaunchFailure:
      return "cudaErrorLaunchFailure";
    default:
      return "cudaErrorUnknown";
  }
}

const char* SimDevice::error_string(int code) {
  switch (code) {
    case 0:
      return "no error";
    case kErrInvalidValue:
      return "invalid argument";
    case kNotReady:
      return "device not ready";
    case kOutOfMemory:
      return "out of memory";
    case kErrLaunchFailure:
      return "unspecified launch failure";
    default:
      return "unknown error";
  }
}

void SimDevice::run_stream(Stream* s) {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return !s->items.empty() || s->stopping; });
    if (s->items.empty()) return;  // stopping, and drained
    Item it = std::move(s->items.front());
    switch (it.kind) {
      case Item::kKernel:
        lk.unlock();
        if (it.fn) it.fn();
        lk.lock();
        if (it.error) s->pending_error = it.error;
        break;
      case Item::kRecord:
        it.event->reached = std::max(it.event->reached, it.epoch);
        it.event->error = s->pending_error;
        s->pending_error = 0;
        cv_.notify_all();  // streams waiting for this event
        break;
      case Item::kWait:
        cv_.wait(lk, [&] { return it.event->reached >= it.epoch || s->stopping; });
        break;
      case Item::kHostFunc:
        lk.unlock();
        it.host_fn(it.arg);
        lk.lock();
        break;
    }
    s->items.pop_front();
  }
}

}  // namespace ordo
