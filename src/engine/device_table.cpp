#include "engine/device_table.h"

#include "base/last_error.h"

namespace ordo {

namespace {
// Why a push names a device the table does not have (its type is an ORDO_DEVICE_*).
ordo_status no_such_device(int32_t device_type, int32_t device_id) {
  if (device_type == ORDO_DEVICE_GPU) {
    return fail(ORDO_ERR_NO_DEVICE,
                "GPU %d requested, but this build of ordo has no CUDA support (0 GPUs)",
                static_cast<int>(device_id));
  }
  return fail(ORDO_ERR_INVALID_ARGUMENT, "ordo_push_opts.device_id=%d: the CPU is device 0",
              static_cast<int>(device_id));
}
}  // namespace

ordo_status DeviceTable::start(const EngineConfig& cfg) {
  if (cfg.kind == ORDO_ENGINE_NAIVE) return ORDO_OK;  // every route stays inline
  groups_[kCpu] = std::make_unique<WorkerGroup>(host_, "cpu", cfg.cpu_threads);
  DeviceGroups& cpu = devices_[0];
  if (cfg.kind == ORDO_ENGINE_POOLED) {
    for (auto& r : cpu.by_prop) r = groups_[kCpu].get();
  } else {
    groups_[kCpuPriority] = std::make_unique<WorkerGroup>(host_, "prio", cfg.cpu_priority_threads);
    groups_[kCopyTo] = std::make_unique<WorkerGroup>(host_, "h2d", cfg.copy_threads);
    groups_[kCopyFrom] = std::make_unique<WorkerGroup>(host_, "d2h", cfg.copy_threads);
    for (int i = 0; i < kNumGroups; ++i) cpu.by_prop[i] = groups_[i].get();
  }
  if (groups_[kCpu]->ensure_started() != ORDO_OK) {
    return fail(ORDO_ERR_NO_MEMORY, "ordo_engine_create: could not start any worker thread");
  }
  return ORDO_OK;
}

void DeviceTable::stop_and_join() {
  for (auto& group : groups_) {
    if (group) group->stop_and_join();
  }
}

ordo_status DeviceTable::route_slow(int32_t prop, int32_t device_type, int32_t device_id,
                                    WorkerGroup** out) {
  // The API checked prop and device_type against the header's values (make_spec): what is
  // left is whether this engine has the device.
  const DeviceGroups* device = find_device(device_type, device_id);
  if (!device) return no_such_device(device_type, device_id);
  *out = prop == ORDO_PROP_ASYNC ? nullptr : device->by_prop[prop];
  // A group's first op starts its threads; once destroy has stopped the group it refuses, since
  // nothing would join threads started then before the last release.
  ordo_status st = *out ? (*out)->ensure_started() : ORDO_OK;
  if (st == ORDO_ERR_SHUTDOWN || st == ORDO_OK) return st;
  return fail(ORDO_ERR_NO_MEMORY, "could not start worker threads for ordo_push_opts.prop=%d",
              static_cast<int>(prop));
}

const DeviceTable::DeviceGroups* DeviceTable::find_device(int32_t device_type,
                                                          int32_t device_id) const {
  for (uint32_t i = 0; i < num_devices_; ++i) {
    if (devices_[i].device_type == device_type && devices_[i].device_id == device_id) {
      return &devices_[i];
    }
  }
  return nullptr;
}

// Calls f(device, group, prop) for each ready queue once, device by device: `prop` is the
// ORDO_PROP_* its workers run, or -1 when one group runs every property (pooled).
template <class F>
void DeviceTable::for_each_queue(F&& f) const {
  for (uint32_t d = 0; d < num_devices_; ++d) {
    const DeviceGroups& dev = devices_[d];
    for (int p = 0; p < kNumGroups; ++p) {
      WorkerGroup* g = dev.by_prop[p];
      if (!g || (p > 0 && g == dev.by_prop[p - 1])) continue;  // inline, or shared: counted once
      const bool shared = p + 1 < kNumGroups && dev.by_prop[p + 1] == g;
      f(dev, g, shared ? -1 : static_cast<int32_t>(p));
    }
  }
}

uint32_t DeviceTable::queue_count() const {
  uint32_t n = 0;
  for_each_queue([&](const DeviceGroups&, WorkerGroup*, int32_t) { ++n; });
  return n;
}

bool DeviceTable::queue_stats(uint32_t index, ordo_queue_stats* out) const {
  uint32_t i = 0;
  bool found = false;
  for_each_queue([&](const DeviceGroups& dev, WorkerGroup* g, int32_t p) {
    if (i++ != index) return;
    found = true;
    out->device_type = dev.device_type;
    out->device_id = dev.device_id;
    out->prop = p;
    out->workers = static_cast<uint32_t>(g->running_threads());
    out->ready = g->ready_depth();
    out->name = g->role();
  });
  out->queues = i;
  return found;
}

void DeviceTable::add_to(ordo_stats* out) const {
  static_assert(kNumGroups == ORDO_STATS_QUEUES, "a queue_ready entry per worker group");
  static_assert(kCpu == ORDO_PROP_NORMAL && kCpuPriority == ORDO_PROP_CPU_PRIORITIZED &&
                    kCopyTo == ORDO_PROP_COPY_TO_DEVICE && kCopyFrom == ORDO_PROP_COPY_FROM_DEVICE,
                "groups are indexed like the properties they run");
  out->workers = 0;
  out->ready = 0;
  for (int i = 0; i < kNumGroups; ++i) {
    WorkerGroup* g = groups_[i].get();
    out->queue_ready[i] = g ? g->ready_depth() : 0;
    if (!g) continue;
    out->workers += static_cast<uint32_t>(g->running_threads());
    out->ready += out->queue_ready[i];
  }
}

}  // namespace ordo
