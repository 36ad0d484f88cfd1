// DeviceTable: the engine's worker groups, found by device and property. Today one device, the
// CPU, whose groups depend on the engine kind (naive: none, every op inline; pooled: one group
// for every property; per_device: one group per property). A GPU will be an entry of its own,
// with its compute and copy groups; a push routes through find_device, and the per-queue stats
// (ordo_engine_queue_stats) walk the same table.
#pragma once

#include <cstdint>
#include <memory>

#include "engine/engine_config.h"
#include "exec/worker_group.h"
#include "ordo/ordo.h"

namespace ordo {

class DeviceTable {
 public:
  explicit DeviceTable(WorkerHost* host) : host_(host) {}
  DeviceTable(const DeviceTable&) = delete;
  DeviceTable& operator=(const DeviceTable&) = delete;

  // Creates the groups the engine's kind asks for and starts the normal CPU group's threads.
  // ORDO_ERR_NO_MEMORY (with a message) when no worker thread could start.
  ordo_status start(const EngineConfig& cfg);
  // Stops and joins every group's threads (each drained before). Idempotent.
  void stop_and_join();

  // The group that runs an op of this property on this device (nullptr: inline), starting its
  // threads if needed. INVALID_ARGUMENT / NO_DEVICE with a message for a placement the table
  // does not have; ORDO_ERR_SHUTDOWN (no message) once stop_and_join has stopped the group.
  ordo_status route(int32_t prop, int32_t device_type, int32_t device_id, WorkerGroup** out) {
    // Nearly every push: a normal CPU op on a started group (or inline, for the naive kind).
    if (prop == ORDO_PROP_NORMAL && device_type == ORDO_DEVICE_CPU && device_id == 0) {
      WorkerGroup* g = devices_[0].by_prop[ORDO_PROP_NORMAL];
      if (!g || g->started()) {
        *out = g;
        return ORDO_OK;
      }
    }
    return route_slow(prop, device_type, device_id, out);
  }
  // The CPU's normal group (where a throttled pusher helps), or nullptr (naive).
  WorkerGroup* cpu_group() const { return groups_[kCpu].get(); }

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
  static constexpr uint32_t kMaxDevices = 1;  // the CPU; GPUs raise it

  ordo_status route_slow(int32_t prop, int32_t device_type, int32_t device_id, WorkerGroup** out);
  const DeviceGroups* find_device(int32_t device_type, int32_t device_id) const;
  template <class F>
  void for_each_queue(F&& f) const;

  WorkerHost* const host_;
  std::unique_ptr<WorkerGroup> groups_[kNumGroups];
  DeviceGroups devices_[kMaxDevices] = {{ORDO_DEVICE_CPU, 0, {}}};
  uint32_t num_devices_ = 1;
};

}  // namespace ordo
