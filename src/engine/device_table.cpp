#include "engine/device_table.h"

#include "base/fork_guard.h"
#include "base/last_error.h"
#include "device/device_api.h"

namespace ordo {

// Why a push names a device the table does not have (its type is an ORDO_DEVICE_*).
ordo_status DeviceTable::no_such_device(int32_t device_type, int32_t device_id) const {
  if (device_type == ORDO_DEVICE_GPU) {
    if (no_gpu_reason_) {
      return fail(ORDO_ERR_NO_DEVICE, "GPU %d requested, but there is none: %s (0 GPUs)",
                  static_cast<int>(device_id), no_gpu_reason_);
    }
    return fail(ORDO_ERR_NO_DEVICE, "GPU %d requested, but this engine has GPUs 0 to %u",
                static_cast<int>(device_id), static_cast<unsigned>(gpus_.size() - 1));
  }
  return fail(ORDO_ERR_INVALID_ARGUMENT, "ordo_push_opts.device_id=%d: the CPU is device 0",
              static_cast<int>(device_id));
}

ordo_status DeviceTable::start(const EngineConfig& cfg, StreamManager::DoneFn gpu_done, void* ctx) {
  if (cfg.kind != ORDO_ENGINE_NAIVE) {  // naive: no group, every route inline
    if (ordo_status s = add_cpu_groups(cfg)) return s;
  }
  add_gpus(cfg, gpu_done, ctx);
  return ORDO_OK;
}

// The CPU's groups, and its normal group's threads started.
ordo_status DeviceTable::add_cpu_groups(const EngineConfig& cfg) {
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

// An entry per GPU, its streams and its groups' threads made by its first op: an engine that
// runs only CPU ops never touches the GPU (no CUDA context, none of its memory, none of the
// driver's threads), and a child forked from a process that used CUDA, where CUDA cannot be
// used, can still make an engine for its CPU work. Nothing here when there is no GPU.
void DeviceTable::add_gpus(const EngineConfig& cfg, StreamManager::DoneFn gpu_done, void* ctx) {
  DeviceApi* api = device_api();
  const int32_t n = device_count(api, &no_gpu_reason_);
  for (int32_t id = 0; id < n; ++id) {
    gpus_.push_back(std::make_unique<StreamManager>(
        api, id, static_cast<uint32_t>(cfg.gpu_compute_streams), gpu_done, ctx));
    DeviceGroups& dev = devices_[num_devices_++];
    dev.device_type = ORDO_DEVICE_GPU;
    dev.device_id = id;
    if (cfg.kind == ORDO_ENGINE_NAIVE) {
      for (auto& r : dev.by_prop) r = nullptr;
    } else if (cfg.kind == ORDO_ENGINE_POOLED) {
      for (auto& r : dev.by_prop) r = groups_[kCpu].get();
    } else {
      // The callbacks only enqueue work, so few threads: half the compute streams for compute
      // (gpu_compute_threads; a CPU-prioritized GPU op runs there too), copy_threads per copy
      // direction.
      static const char* const kSuffix[3] = {"", "-h2d", "-d2h"};
      const int threads[3] = {gpu_compute_threads(cfg), cfg.copy_threads, cfg.copy_threads};
      WorkerGroup* made[3];
      for (int k = 0; k < 3; ++k) {
        gpu_roles_.push_back("gpu" + std::to_string(id) + kSuffix[k]);
        gpu_groups_.push_back(
            std::make_unique<WorkerGroup>(host_, gpu_roles_.back().c_str(), threads[k]));
        made[k] = gpu_groups_.back().get();
      }
      dev.by_prop[ORDO_PROP_NORMAL] = made[0];
      dev.by_prop[ORDO_PROP_CPU_PRIORITIZED] = made[0];
      dev.by_prop[ORDO_PROP_COPY_TO_DEVICE] = made[1];
      dev.by_prop[ORDO_PROP_COPY_FROM_DEVICE] = made[2];
    }
  }
}

// Makes GPU `id`'s streams at its first op (StreamManager::ensure_started: once; a failure is
// kept, so every later op for that GPU gets the same NO_DEVICE and CUDA's message, as in a
// forked child, where CUDA would refuse each time).
ordo_status DeviceTable::ensure_gpu_started(int32_t id) {
  StreamManager& sm = *gpus_[id];
  const char* call = nullptr;
  const int e = sm.ensure_started(&call);
  if (e == 0) return ORDO_OK;
  if (e == StreamManager::kStopped) return ORDO_ERR_SHUTDOWN;  // nothing would stop it again
  char msg[256];
  sm.describe(e, call, msg, sizeof msg);
  // The likeliest cause in a forked child, and one that CUDA's message does not name.
  const char* forked = fork_generation() == 0
                           ? ""
                           : " (this process is a fork() child: CUDA cannot be used in a child "
                             "forked after its parent used CUDA; start the child with exec, or "
                             "use the GPU in one process only)";
  return fail(ORDO_ERR_NO_DEVICE, "could not make GPU %d's streams: %s%s", static_cast<int>(id),
              msg, forked);
}

void DeviceTable::stop_and_join() {
  for (auto& group : groups_) {
    if (group) group->stop_and_join();
  }
  for (auto& group : gpu_groups_) group->stop_and_join();
  for (auto& sm : gpus_) sm->stop();  // the engine has drained: no event is left in flight
}

void DeviceTable::refill_workers() {
  for (auto& group : groups_) {
    if (group) group->refill();
  }
  for (auto& group : gpu_groups_) group->refill();
}

ordo_status DeviceTable::route_slow(int32_t prop, int32_t device_type, int32_t device_id,
                                    WorkerGroup** out) {
  // The API checked prop and device_type against the header's values (make_spec): what is
  // left is whether this engine has the device.
  const DeviceGroups* device = find_device(device_type, device_id);
  if (!device) return no_such_device(device_type, device_id);
  if (device_type == ORDO_DEVICE_GPU) {
    if (ordo_status s = ensure_gpu_started(device_id)) return s;
  }
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
      if (d > 0 && g == groups_[kCpu].get()) continue;  // a pooled GPU entry: the CPU's queue
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
