// PendingReport: what is still pending in an engine, for a person: the ops not yet finished
// (oldest first, with their state and how long they have been pending) and the vars that
// waits hang on. It backs the message of a timed wait that runs out and ordo_engine_dump.
// Cold code: it scans every op block and var slot the engine ever made.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "core/op_block.h"

namespace ordo {

class OpPool;
class VarTable;
struct VarSlot;

// One pending op, as a consistent copy of its block taken while the engine runs.
struct PendingOp {
  static constexpr uint32_t kVarsShown = OpBlock::kInlineLinks;
  uint64_t stamp = 0;  // push time and the pushing lane's count (OpLife::stamp): sorts in order
  uint64_t ticks = 0;  // push time (OpLife ticks)
  OpState state = OpState::kFree;
  OpKind kind = OpKind::kUser;
  int32_t waiting_grants = 0;  // var grants still missing (0: ready, or granted)
  uint32_t num_links = 0;
  uint32_t index = 0;  // the block's index
  char name[ORDO_NAME_MAX + 1] = {};
  struct Var {
    const VarSlot* slot;
    uint32_t index;
    uint32_t gen;
    bool write;
    bool mark;
  } vars[kVarsShown] = {};
  uint32_t vars_shown = 0;

  bool is_callers() const {
    return kind == OpKind::kUser || kind == OpKind::kPrepared || kind == OpKind::kGraph ||
           kind == OpKind::kChain || kind == OpKind::kBundle || kind == OpKind::kMember;
  }
  bool touches(const VarSlot* v) const;
};

class PendingReport {
 public:
  PendingReport(const OpPool& pool, const VarTable& vars, const LifeClock& clock, uint32_t tag);

  // Every pending op, oldest first (NO_MEMORY-safe: an empty list when memory ran out).
  const std::vector<PendingOp>& ops() const { return ops_; }
  // "; oldest: 'a' (deferred: waiting for ordo_complete) for 3.2 ms, ..." naming at most
  // `max_ops` of the caller's ops (only those on `only` when it is not null), for a timeout's
  // message; "" when none is pending.
  std::string oldest(const VarSlot* only, size_t max_ops) const;
  // The full report, as ordo_engine_dump writes it.
  void write(std::FILE* out) const;

 private:
  std::string describe(const PendingOp& op) const;
  std::string var_handle(uint32_t index, uint32_t gen) const;
  void write_vars_with_waits(std::FILE* out) const;

  const VarTable& vars_;
  const LifeClock& clock_;
  uint32_t tag_;
  std::vector<PendingOp> ops_;
};

}  // namespace ordo
