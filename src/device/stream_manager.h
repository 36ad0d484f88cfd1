// StreamManager: one GPU's streams and the thread that watches their events (SPEC §7, issue
// #25). A configured number of compute streams (ordo_engine_config.gpu_compute_streams), taken
// round robin, and one stream per copy direction,
// so that uploads, kernels and downloads overlap. After a GPU op's callback has enqueued its
// work and returned, track() records an event on the op's stream; the manager's polling thread
// queries the events in flight and calls the completion function once one has fired (or failed:
// then with the backend's message), so no worker ever blocks in a synchronize. Every device call
// goes through DeviceApi (device_api.h): CUDA, or the tests' simulation.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/alloc_fault.h"
#include "device/device_api.h"

namespace ordo {

class StreamManager {
 public:
  enum class StreamKind { kCompute, kToDevice, kFromDevice };
  // done(ctx, token, error, message): the work before the event of `token` has finished
  // (error 0, message nullptr) or failed (the backend's code and a message naming it). Called on
  // the manager's thread, never under its lock; it may call track() again.
  using DoneFn = void (*)(void* ctx, uint64_t token, int error, const char* message);

  // `compute_streams`: how many compute streams (at least 1).
  StreamManager(DeviceApi* api, int32_t device, uint32_t compute_streams, DoneFn done, void* ctx);
  ~StreamManager();
  StreamManager(const StreamManager&) = delete;
  StreamManager& operator=(const StreamManager&) = delete;

  // ensure_started after stop().
  static constexpr int kStopped = -1;
  // Creates the streams on the device and starts the polling thread, at the first call only:
  // every later call returns what the first returned (0, or the backend's error with `what`
  // naming the call that failed; nothing is left behind on failure), and kStopped once stop()
  // has run. Thread-safe; once started, one load.
  int ensure_started(const char** what);
  // Waits until no event is in flight, then stops the thread and destroys streams and events.
  // Idempotent; no start follows it.
  void stop();

  DeviceApi* api() const { return api_; }
  int32_t device() const { return device_; }
  // Makes this GPU the calling thread's current device and picks the stream for a new op: the
  // next compute stream round robin, or the copy stream of that direction. 0 or the backend's
  // error.
  int enter(StreamKind kind, void** stream);
  // Records an event on `stream` after the work enqueued so far; done(ctx, token, ...) follows
  // once it fires. 0, or the backend's error (then done is never called for `token`);
  // DeviceApi::kOutOfMemory when host memory ran out (nothing is tracked; the op fails).
  // `*event` (when given): the event recorded, which stays this op's until done has returned,
  // and longer while pinned.
  int track(void* stream, uint64_t token, void** event = nullptr);
  // Keeps a tracked event from being recorded again for another op until unpin(): a stream that
  // is to wait for it (early release) must find this op's record. Pin only while done() has not
  // returned for the event's op. pin() throws std::bad_alloc when memory runs out (nothing
  // pinned).
  void pin(void* event);
  void unpin(void* event);

  // Checked before each allocation the manager makes (base/alloc_fault.h).
  static AllocFault alloc_fault_for_test;

  // Events recorded and not yet reported.
  uint32_t in_flight() const { return in_flight_.load(std::memory_order_acquire); }
  void* compute_stream(uint32_t i) const { return compute_[i]; }
  uint32_t compute_streams() const { return static_cast<uint32_t>(compute_.size()); }

  // Formats "CUDA error <code> (<name>): <message> [<call> on GPU <n>]" into buf.
  void describe(int code, const char* call, char* buf, size_t cap) const;

 private:
  struct Pending {
    void* event;
    uint64_t token;
  };
  void poll_loop();
  void free_event(void* ev);  // under mu_: back to free_events_, or parked while pinned
  // An event's pins, and whether it fired meanwhile (it goes back to free_events_ at the last
  // unpin). Parking needs no allocation: the poller, which parks, must never allocate.
  struct Pins {
    uint32_t count = 0;
    bool parked = false;
  };
  int start(const char** what);  // the first ensure_started's work
  void destroy_streams();

  DeviceApi* const api_;
  const int32_t device_;
  const DoneFn done_;
  void* const ctx_;
  std::vector<void*> compute_;  // sized in the constructor, never resized
  void* to_device_ = nullptr;
  void* from_device_ = nullptr;
  std::atomic<uint32_t> next_compute_{0};
  std::atomic<uint32_t> in_flight_{0};

  std::mutex mu_;
  std::condition_variable cv_;          // the poller: work arrived, or stop
  std::condition_variable drained_cv_;  // stop(): nothing in flight
  std::vector<Pending> pending_;        // recorded, not yet picked up by the poller
  // Fired, ready to record again. Its capacity is kept at least all_events_' size, so that
  // putting an event back (the poller, a failed record) never allocates.
  std::vector<void*> free_events_;
  std::vector<void*> all_events_;         // every event made, destroyed by stop()
  std::unordered_map<void*, Pins> pins_;  // pinned events
  bool stopping_ = false;
  std::thread poller_;

  enum class Life : uint8_t { kNew, kRunning, kFailed, kStopped };
  std::atomic<Life> life_{Life::kNew};
  std::mutex life_mu_;                // serializes ensure_started's first call and stop()
  int start_error_ = 0;               // kFailed: the backend's error (under life_mu_)
  const char* start_call_ = nullptr;  // kFailed: the call that failed (under life_mu_)
};

}  // namespace ordo
