#include "engine/thread_state.h"

#include "engine/push_recorder.h"
#include "exec/worker_group.h"

namespace ordo {
namespace this_thread {

ORDO_HOT_TLS_SHARED Worker* worker = nullptr;
ORDO_HOT_TLS_SHARED RunningCallback running = {nullptr, 0};
ORDO_HOT_TLS_SHARED ExecTokens exec_tokens;
ORDO_HOT_TLS_SHARED const WorkerHost* busy[kBusyMax];
ORDO_HOT_TLS_SHARED int busy_depth = 0;
ORDO_HOT_TLS_SHARED Helper* helper = nullptr;
ORDO_HOT_TLS_SHARED PushRecorder* recorder = nullptr;

bool busy_with(const WorkerHost* engine) {
  if (worker && worker->group->host() == engine) return true;
  if (busy_depth > kBusyMax) return true;
  for (int i = 0; i < busy_depth; ++i) {
    if (busy[i] == engine) return true;
  }
  return false;
}

}  // namespace this_thread

OpBlock* op_of_exec(const ordo_exec* exec) {
  const this_thread::RunningCallback& r = this_thread::running;
  return r.op && token_of_exec(exec) == r.token ? r.op : nullptr;
}

}  // namespace ordo
