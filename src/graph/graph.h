// Graph: the ops one capture recorded (ordo_graph_begin_capture .. ordo_graph_end_capture), each
// routed and resolved once, and pushed again by ordo_graph_launch, in capture order. A launch is
// the dynamic pushes made again: the same ordering, errors, skips, waits and stats
// (docs/ARCHITECTURE.md, section 10). A chain of ops that can only run one after another is
// pushed as one op that runs them back to back (engine/bulk_chain.h, graph/chain_plan.h), under
// the same per-op rules; every other op goes through the engine's ordinary push path.
//
// Each replayed op is the caller's callback and user data, pushed as OpKind::kGraph: instead of
// a free_fn, the engine tells the graph's OpHook when it has finished, which counts the graph's
// ops in flight down (InFlight), so that destroy can refuse a graph still running; the caller's
// own free_fns run once, when the graph is destroyed. The worker never reads the graph's nodes,
// except a chain op's, which the graph keeps unchanged until it is destroyed.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/var_refs.h"
#include "engine/bulk_bundle.h"
#include "engine/bulk_chain.h"
#include "engine/engine.h"
#include "engine/prepared.h"
#include "graph/bundle_shelf.h"
#include "graph/in_flight.h"
#include "ordo/ordo.h"

namespace ordo {

class Graph;

// One captured push: what a launch pushes again. 48 bytes: a launch reads the nodes (and their
// refs) in a stream, so what only destroy needs (free_fns, prepared ops) and the names (most ops
// have none) are kept apart.
struct GraphNode {
  ordo_fn fn = nullptr;
  void* user_data = nullptr;
  WorkerGroup* group = nullptr;
  uint32_t first_ref = 0;  // its vars: refs_[first_ref .. first_ref + num_refs)
  uint32_t num_refs = 0;
  uint32_t name = 0;  // 0: none; else names_[name - 1]
  int32_t priority = 0;
  uint8_t prop = ORDO_PROP_NORMAL;
  uint8_t device_type = ORDO_DEVICE_CPU;
  uint8_t device_id = 0;
};

// What a captured push leaves for destroy: its free_fn, or its prepared op's reference.
struct GraphOwned {
  ordo_free_fn free_fn = nullptr;  // called once, at destroy
  void* user_data = nullptr;
  PreparedOp* prepared = nullptr;  // a captured prepared push holds a reference on its op
};

class Graph {
 public:
  explicit Graph(Engine* engine) : engine_(engine) { hook_.graph = this; }
  // Drops the prepared ops' references and runs the caller's free_fns, capture order.
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  Engine* engine() const { return engine_; }
  size_t size() const { return nodes_.size(); }

  // Capture: records a push the engine has routed and resolved (ordo_opr_push, or
  // ordo_opr_push_prepared: spec.kind kPrepared, whose reference on its prepared op the graph
  // then keeps until it is destroyed). A var deleted since is refused, as the push would refuse
  // it, with nothing recorded.
  ordo_status add(const OpSpec& spec, WorkerGroup* group, const VarRef* refs, size_t n);

  // The capture has ended and the nodes are fixed: finds the chains a launch runs back to back
  // (graph/chain_plan.h) and lays out what each launch pushes. Throws std::bad_alloc.
  void seal();

  // Replays every node through the push path: a chain as one op (engine/bulk_chain.h), any
  // other node as its own push. The caller holds the graph (hold()) meanwhile.
  // A push refused half-way (a var deleted since the capture, shutdown) stops the launch: the
  // ops before it stay pushed, and the status and message say how far it got.
  ordo_status launch(const char* api);

  // A launch in progress, or ops of one still pending, keep the graph: destroy refuses it.
  // hold() and in_flight() are called under the graph table's lock (see InFlight::idle).
  void hold() { in_flight_.begin_launch(); }
  void release() { in_flight_.end_launch(); }
  bool in_flight() const { return !in_flight_.idle(); }

 private:
  // The engine's OpHook, with the way back to its graph.
  struct Hook : OpHook {
    Hook() : OpHook{&Graph::op_finished} {}
    Graph* graph = nullptr;
  };
  static void op_finished(OpHook* hook);
  void new_node(const OpSpec& spec, WorkerGroup* group, const VarRef* refs, size_t n);
  const char* name_of(const GraphNode& node) const {
    return node.name ? names_[node.name - 1].text : nullptr;
  }
  ordo_status stopped(const char* api, size_t index, size_t pushed, ordo_status s);
  // Inlined: a call per replayed op cost the replay path ~12 instructions per op (callgrind).
  [[gnu::always_inline]] inline ordo_status push_node(const GraphNode& node);
  void add_chain(const std::vector<uint32_t>& members);

  Engine* const engine_;
  std::vector<GraphNode> nodes_;  // fixed once the capture ends
  std::vector<VarRef> refs_;
  struct Name {
    char text[ORDO_NAME_MAX + 1];
  };
  std::vector<Name> names_;
  std::vector<GraphOwned> owned_;  // capture order
  Hook hook_;
  InFlight in_flight_;
  // What a launch pushes, in order (seal()): a node of its own, or a chain at its first node.
  static constexpr uint32_t kNoChain = UINT32_MAX;
  struct Step {
    uint32_t node;   // the node, or the chain's first node
    uint32_t chain;  // index in chains_, or kNoChain
  };
  std::vector<Step> steps_;
  // Per chain: what the engine runs (nodes point into bulk_nodes_), and its op's vars: the union
  // of its nodes' (mutable where any node mutates), chain_refs_[first_ref .. + num_refs).
  struct ChainVars {
    uint32_t first_ref;
    uint32_t num_refs;
  };
  std::vector<BulkChain> chains_;
  std::vector<ChainVars> chain_vars_;
  std::vector<BulkNode> bulk_nodes_;
  std::vector<VarRef> chain_refs_;
  ordo_status push_chain(const Step& step);
  // The bundle (engine/bulk_bundle.h): members in capture order, their vars and their nodes.
  // A member is a node of one var that no earlier node uses, a plain CPU op of bundle_group_ at
  // priority 0, not in a chain; a graph with fewer than kMinBundle has none.
  static constexpr size_t kMinBundle = 2;
  // Members joined between two publications to the workers (each may queue the carrier).
  static constexpr uint32_t kPublishEvery = 64;
  std::vector<BundleMember> members_;
  std::vector<VarRef> member_refs_;
  std::vector<uint32_t> member_nodes_;
  WorkerGroup* bundle_group_ = nullptr;
  BundleShelf* shelf_ = nullptr;  // the bundle's runs; outlives the graph (bundle_shelf.h)
  void find_bundle(const std::vector<bool>& in_chain, std::vector<bool>* is_member);
  // How far a launch got: engine ops handed on (each counted in InFlight), captured ops pushed,
  // and the first node whose push was refused (kNoStop: none) with its status.
  static constexpr uint32_t kNoStop = UINT32_MAX;
  struct Progress {
    size_t units = 0;
    size_t pushed = 0;
    uint32_t stop = kNoStop;
    ordo_status status = ORDO_OK;
    void stopped(uint32_t node, ordo_status s) {
      if (node < stop) {
        stop = node;
        status = s;
      }
    }
  };
  void launch_bundle(Progress* at);
  bool push_member(uint32_t i, Progress* at);
  // Every (var, generation) the graph uses, when it has chains (seal()), and whether each still
  // names its var. A launch whose var was deleted since the capture replays node by node.
  std::vector<VarRef> vars_;
  bool vars_live() const;
  ordo_status replay(const char* api);
};

}  // namespace ordo
