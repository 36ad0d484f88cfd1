// BulkChain: ops that can only run one after another, run back to back inside one engine op
// (OpKind::kChain, MXNet's "bulk execution"). The layer that pushes such an op (a graph launch,
// src/graph/) builds the chain; the engine runs it (OpRunner::run_chain, chain_runner.cpp).
//
// The chain op holds every var of its nodes (read if the chain only reads it, mutable if any node
// mutates it) from its first node to its last, and applies the dynamic path's per-op rules to
// each node itself: a node with a var carrying an error is skipped and inherits it, a failed or
// skipped node leaves its failure on the vars it mutates, and each node is counted in the stats
// as one op. So the chain op runs even when its vars carry errors (it never skips as a whole).
#pragma once

#include <cstdint>

#include "core/op_block.h"
#include "core/var_refs.h"
#include "ordo/ordo.h"

namespace ordo {

// One op of a chain: its callback, user data, name (nullptr: none) and its own vars, in the
// order its push would have linked them (the first carrying an error is the one it inherits).
struct BulkNode {
  ordo_fn fn;
  void* user_data;
  const char* name;
  const VarRef* refs;
  uint32_t num_refs;
};

// A chain of at least two nodes. `hook` is told once the chain op has finished, as a kGraph op's.
struct BulkChain {
  OpHook* hook;
  const BulkNode* nodes;
  uint32_t count;
};

}  // namespace ordo
