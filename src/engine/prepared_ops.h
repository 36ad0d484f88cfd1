// PreparedOps: ordo_opr_new, ordo_opr_push_prepared and ordo_opr_delete. A prepared op stores
// its callback, options, group and resolved var list once (engine/prepared.h holds the table and
// each op's lock-free lifetime); each push copies them into a pooled op block and goes through
// the push path without routing or resolving again.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/var_table.h"
#include "engine/prepared.h"
#include "engine/push_path.h"
#include "ordo/ordo.h"

namespace ordo {

class PreparedOps {
 public:
  PreparedOps(const WorkerHost* engine, uint32_t tag, VarTable& vars, PushPath& push)
      : engine_(engine), tag_(tag), vars_(vars), push_(push) {}
  PreparedOps(const PreparedOps&) = delete;
  PreparedOps& operator=(const PreparedOps&) = delete;

  ordo_status create(const OpSpec& spec, const ordo_var* const_vars, size_t num_const,
                     const ordo_var* mutable_vars, size_t num_mutable, ordo_opr* out);
  ordo_status push(ordo_opr opr, int32_t priority);
  ordo_status destroy(ordo_opr opr);
  // A captured push of a prepared op keeps the reference it took (src/graph/) until its graph
  // is destroyed; this drops it.
  void release_captured(PreparedOp* p) {
    if (p->release()) finish(p);
  }
  // Runs the free_fn of every prepared op never deleted (engine teardown). Idempotent.
  void finish_all_live() { table_.finish_all_live(); }
  // Where a finished op drops its push's reference (OpRunner::release_user_data).
  PreparedTable& table() { return table_; }

 private:
  PreparedOp* find_live(ordo_opr opr, HandleBits* bits);
  void finish(PreparedOp* p);

  const WorkerHost* const engine_;
  const uint32_t tag_;
  VarTable& vars_;
  PushPath& push_;
  PreparedTable table_;
};

}  // namespace ordo
