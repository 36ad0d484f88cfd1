// DeviceTable: the engine's worker groups, found by device and property. The CPU's groups depend
// on the engine kind (naive: none, every op inline; pooled: one group for every property;
// per_device: one group per property). Each GPU the device backend reports (device_api(), at
// most kMaxGpus) is an entry of its own with a StreamManager (its streams and event poller) and,
// per_device, its own compute group and one group per copy direction (pooled: the CPU's group;
// naive: inline). A push routes through find_device, and the per-queue stats
// (ordo_engine_queue_stats) walk the same table.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "device/device_count.h"
#include "device/stream_manager.h"
#include "engine/engine_config.h"
#include "exec/worker_group.h"
#include "ordo/ordo.h"

namespace ordo {

class DeviceTable {
 public:
  explicit DeviceTable(WorkerHost* host) : host_(host) {}
  DeviceTable(const DeviceTable&) = delete;
  DeviceTable& operator=(const DeviceTable&) = delete;

  // Creates the groups the engine's kind asks for and starts the normal CPU group's threads;
  // then an entry per GPU, whose streams are made by its first op (ensure_gpu_started;
  // `gpu_done(ctx, ...)` reports their events). ORDO_ERR_NO_MEMORY (with a message) when no
  // worker thread could start.
  ordo_status start(const EngineConfig& cfg, StreamManager::DoneFn gpu_done, void* ctx);
  // Stops and joins every group's threads (each drained before). Idempotent.
  void stop_and_join();
  // Gives every worker whose thread caller code ended a new thread (WorkerGroup::refill).
  void refill_workers();

  // The group that runs an op of this property on this device (nullptr: inline), starting its
  // threads, and a GPU's streams, if needed. INVALID_ARGUMENT / NO_DEVICE with a message for a
  // placement the table does not have or a GPU whose streams could not be made;
  // ORDO_ERR_SHUTDOWN (no message) once stop_and_join has stopped the group.
  ordo_status route(int32_t prop, int32_t device_type, int32_t device_id, WorkerGroup** out) {
    if (route_fast(prop, device_type, device_id, out)) return ORDO_OK;
    return route_slow(prop, device_type, device_id, out);
  }
  // Nearly every push: a normal CPU op on a started group (or inline, for the naive kind). False:
  // route() must decide.
  bool route_fast(int32_t prop, int32_t device_type, int32_t device_id, WorkerGroup** out) const {
    if (prop == ORDO_PROP_NORMAL && device_type == ORDO_DEVICE_CPU && device_id == 0) {
      WorkerGroup* g = devices_[0].by_prop[ORDO_PROP_NORMAL];
      if (!g || g->started()) {
        *out = g;
        return true;
      }
    }
    return false;
  }
  // The CPU's normal group (where a throttled pusher helps), or nullptr (naive).
  WorkerGroup* cpu_group() const { return groups_[kCpu].get(); }
  // GPU `id`'s streams (id < gpu_count()); started once an op has been routed to it.
  StreamManager* gpu(uint32_t id) const { return gpus_[id].get(); }
  uint32_t gpu_count() const { return static_cast<uint32_t>(gpus_.size()); }

  // The ready queues (one per group, device by device), for ordo_engine_queue_stats.
  uint32_t queue_count() const;
  bool queue_stats(uint32_t index, ordo_queue_stats* out) const;
  // ordo_stats' worker and ready fields (the fixed four queues of the CPU).
  void add_to(ordo_stats* out) const;

 private:
  enum GroupIndex { kCpu, kCpuPriority, kCopyTo, kCopyFrom, kNumGroups };
  // by_prop[p] is the group that runs ORDO_PROP_* p on the device; several entries may share a
  // group (pooled); nullptr: inline (naive). groups_ owns them.
  struct DeviceGroups {
    int32_t device_type;
    int32_t device_id;
    WorkerGroup* by_prop[kNumGroups];
  };
  static constexpr uint32_t kMaxDevices = 1 + kMaxGpus;  // the CPU, then GPU 0, 1, ...

  ordo_status route_slow(int32_t prop, int32_t device_type, int32_t device_id, WorkerGroup** out);
  ordo_status add_cpu_groups(const EngineConfig& cfg);
  void add_gpus(const EngineConfig& cfg, StreamManager::DoneFn gpu_done, void* ctx);
  ordo_status ensure_gpu_started(int32_t id);
  ordo_status no_such_device(int32_t device_type, int32_t device_id) const;
  const DeviceGroups* find_device(int32_t device_type, int32_t device_id) const;
  template <class F>
  void for_each_queue(F&& f) const;

  WorkerHost* const host_;
  std::unique_ptr<WorkerGroup> groups_[kNumGroups];
  DeviceGroups devices_[kMaxDevices] = {{ORDO_DEVICE_CPU, 0, {}}};
  uint32_t num_devices_ = 1;
  // Per GPU: its streams, and (per_device) its compute, h2d and d2h groups.
  std::vector<std::unique_ptr<StreamManager>> gpus_;
  std::vector<std::unique_ptr<WorkerGroup>> gpu_groups_;
  std::deque<std::string> gpu_roles_;    // the groups' names (a deque: they never move)
  const char* no_gpu_reason_ = nullptr;  // why there are no GPUs (static), or nullptr
};

}  // namespace ordo
