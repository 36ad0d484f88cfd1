// ordo_engine_stats' snapshot, put together from the parts that count: the caller's ops pushed
// and completed (PendingCounts), failed and skipped (OpOutcomes), the workers and ready ops of
// each queue (DeviceTable), and the trace's records (Tracer).
#pragma once

#include "engine/device_table.h"
#include "engine/op_outcomes.h"
#include "engine/pending_counts.h"
#include "ordo/ordo.h"
#include "trace/tracer.h"

namespace ordo {

void collect_stats(const PendingCounts& counts, const OpOutcomes& outcomes,
                   const DeviceTable& devices, const Tracer* tracer, ordo_stats* out);

}  // namespace ordo
