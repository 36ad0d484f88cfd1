#include "engine/engine_stats.h"

namespace ordo {

void collect_stats(const PendingCounts& counts, const OpOutcomes& outcomes,
                   const DeviceTable& devices, const Tracer* tracer, ordo_stats* out) {
  int64_t pushed, completed;
  counts.user_totals(&pushed, &completed);
  // SPEC 3: a skipped op counts as failed; `skipped` is how many of the failed never ran.
  int64_t failed, skipped;
  outcomes.counts(&failed, &skipped);
  out->pushed = static_cast<uint64_t>(pushed);
  out->completed = static_cast<uint64_t>(completed);
  out->pending = static_cast<uint64_t>(pushed - completed);
  out->failed = static_cast<uint64_t>(failed);
  out->skipped = static_cast<uint64_t>(skipped);
  devices.add_to(out);
  out->trace_records = tracer ? tracer->records() : 0;
  out->trace_dropped = tracer ? tracer->dropped() : 0;
}

}  // namespace ordo
