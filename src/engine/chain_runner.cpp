// OpRunner's part that runs a graph launch's chain op (engine/bulk_chain.h): the nodes one after
// another on this thread, no hand-off between them, each under the rules the dynamic path applies
// to an op (SPEC §3). The chain op holds the vars of all its nodes, so each node finds the error
// state its own push would have found: a var carries an error left by an op before the launch or
// by an earlier node of the chain, and no other op can change it meanwhile.
#include <atomic>

#include "base/foreign_exception.h"
#include "core/error_record.h"
#include "core/exec_token.h"
#include "core/handle_bits.h"
#include "core/var_slot.h"
#include "engine/bulk_chain.h"
#include "engine/call_callback.h"
#include "engine/op_runner.h"
#include "engine/thread_state.h"

namespace ordo {

namespace {

const char* name_of(const BulkNode& node) {
  return node.name ? node.name : "";
}

// The error the node's push would inherit: its first var, in its own order, that carries one.
ErrorRecord* first_error_of(const BulkNode& node) {
  for (uint32_t i = 0; i < node.num_refs; ++i) {
    if (ErrorRecord* e = node.refs[i].slot->current_error()) return e;
  }
  return nullptr;
}

// One node's callback, under the chain op's block (ordo_exec_defer defers the chain op at this
// node), with the node's own exec token and, on a failure, its own name. A forced unwind passes
// through: run_node finishes the node (node_unwound).
ErrorRecord* call_node(OpBlock* op, const BulkNode& node) {
  return call_callback(op, node.fn, node.user_data, [&node] { return name_of(node); });
}

// A deferred node is complete: its completion handle is used up. A new generation makes it
// stale before a later node may defer the same block again (the pool does this when a block's
// use ends; a chain op's use spans several deferrals). 0 is never a generation.
ErrorRecord* end_deferral(OpBlock* op) {
  ErrorRecord* failure = op->async_error;
  op->async_error = nullptr;
  op->deferred = false;
  op->gen = next_generation(op->gen);
  if (op->gen == 0) op->gen = next_generation(0);
  return failure;
}

}  // namespace

void OpRunner::run_chain(OpBlock* op, Worker* self) {
  op->set_state(OpState::kRunning);
  const auto* chain = static_cast<const BulkChain*>(op->internal);
  uint32_t k = op->chain_at;
  if (op->deferred) {  // picked up again: node k deferred and has been completed
    end_node(chain->nodes[k], end_deferral(op));
    ++k;
  }
  for (; k < chain->count; ++k) {
    if (!run_node(op, k, self)) return;  // deferred: its completion picks the chain up
  }
  op->chain_at = 0;
  // Before the chain op counts itself: whoever sees it completed sees every node counted.
  counts_.count_bulk_completed(chain->count - 1);
  finalize(op, nullptr, self);  // the nodes left their errors on the vars already
}

// Always inlined into run_chain, its one caller: once execute had a third instance of
// run_user_op (finalize_one_var), gcc made it a call, 26 instructions more per replayed chain
// node (callgrind, 94.0 against 68.0).
__attribute__((always_inline)) inline bool OpRunner::run_node(OpBlock* op, uint32_t k,
                                                              Worker* self) {
  const BulkNode& node = static_cast<const BulkChain*>(op->internal)->nodes[k];
  const uint64_t start_ns = tracer_ ? tracer_->now_ns() : 0;
  if (ErrorRecord* inherited = first_error_of(node)) {
    outcomes_.skipped();
    if (tracer_) trace_named(name_of(node), op, self, start_ns, TraceOutcome::kSkipped);
    end_node(node, ErrorRecord::retain(inherited));  // skipped: passes the error on
    return true;
  }
  op->chain_at = k;  // before the callback: a completion may pick the chain up at once
  if (k != 0) {      // the first node's name is the op's already (the push copied it)
    op->has_name = node.name != nullptr;  // ordo_exec_get_info reports the running node's
    if (node.name) copy_name(op->name, node.name);
  }
  ErrorRecord* failure;
  try {
    failure = call_node(op, node);
  } catch (...) {  // only a forced unwind gets out of call_node
    node_unwound(op, k);
    throw;
  }
  if (tracer_) {
    trace_named(name_of(node), op, self, start_ns, ran_outcome(op->deferred, failure != nullptr));
  }
  if (op->deferred) {
    // Whichever of "callback returned" and "ordo_complete" comes second goes on with the chain.
    if (op->finish_refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return false;
    failure = end_deferral(op);
  }
  end_node(node, failure);
  return true;
}

// finalize()'s per-op half, for one node: the failure is counted and left on every var the node
// mutates, where the next nodes (and the ops after the chain) find it.
void OpRunner::end_node(const BulkNode& node, ErrorRecord* failure) {
  if (!failure) return;
  outcomes_.failed(failure);
  for (uint32_t i = 0; i < node.num_refs; ++i) {
    if (node.refs[i].access & VarLink::kWriteBit) node.refs[i].slot->set_error(failure);
  }
  ErrorRecord::release(failure);
}

void OpRunner::node_unwound(OpBlock* op, uint32_t k) {
  const BulkNode& node = static_cast<const BulkChain*>(op->internal)->nodes[k];
  ErrorRecord* failure;
  if (op->deferred) {
    // It deferred first: its completion picks the chain up, or already has, and it is ours.
    if (op->finish_refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    failure = end_deferral(op);
  } else {
    failure = ErrorRecord::make(ORDO_ERR_OP_FAILED, name_of(node),
                                "the callback's thread exited before it returned (a forced "
                                "unwind: pthread_exit or thread cancellation)");
  }
  end_node(node, failure);
  op->chain_at = k + 1;
  chain_resumable(op);  // this thread is ending: another worker goes on with the chain
}

}  // namespace ordo
