#include "graph/chain_plan.h"

#include <algorithm>
#include <unordered_map>

#include "core/op_block.h"
#include "graph/graph.h"

namespace ordo {

namespace {

constexpr uint32_t kNone = UINT32_MAX;

// Each node's direct predecessors, as a var's queue orders them: a write after the var's last
// write and the reads since it, a read after the last write.
std::vector<std::vector<uint32_t>> predecessors(const std::vector<GraphNode>& nodes,
                                                const std::vector<VarRef>& refs) {
  struct VarState {
    uint32_t last_write = kNone;
    std::vector<uint32_t> reads;  // since last_write
  };
  std::unordered_map<const VarSlot*, VarState> vars;
  std::vector<std::vector<uint32_t>> preds(nodes.size());
  for (uint32_t i = 0; i < nodes.size(); ++i) {
    for (uint32_t r = 0; r < nodes[i].num_refs; ++r) {
      const VarRef& ref = refs[nodes[i].first_ref + r];
      VarState& v = vars[ref.slot];
      if (v.last_write != kNone) preds[i].push_back(v.last_write);
      if (ref.access & VarLink::kWriteBit) {
        preds[i].insert(preds[i].end(), v.reads.begin(), v.reads.end());
        v.reads.clear();
        v.last_write = i;
      } else {
        v.reads.push_back(i);
      }
    }
    std::sort(preds[i].begin(), preds[i].end());
    preds[i].erase(std::unique(preds[i].begin(), preds[i].end()), preds[i].end());
  }
  return preds;
}

// Only a plain CPU op may be bulked, and only with one of the same placement and priority: the
// chain op is one op with one worker group, priority and property.
bool bulkable(const GraphNode& n) {
  return n.device_type == ORDO_DEVICE_CPU && n.prop == ORDO_PROP_NORMAL && n.group != nullptr;
}
bool same_placement(const GraphNode& a, const GraphNode& b) {
  return a.group == b.group && a.priority == b.priority;
}

// The node's accesses as a set: sorted (var, generation, access).
std::vector<VarRef> access_set(const GraphNode& n, const std::vector<VarRef>& refs) {
  std::vector<VarRef> set(refs.begin() + n.first_ref, refs.begin() + n.first_ref + n.num_refs);
  std::sort(set.begin(), set.end(), [](const VarRef& a, const VarRef& b) {
    if (a.slot != b.slot) return a.slot < b.slot;
    return a.gen != b.gen ? a.gen < b.gen : a.access < b.access;
  });
  return set;
}

// Only nodes with the same accesses chain: the chain op then holds exactly what each of its
// nodes would, from the first node's start (when the first node would take them) to the last
// node's end (in the dynamic path each var passes straight from one node to the next, queued
// right behind it). A chain that took a later node's var early, or kept an earlier node's var
// after that node, could hang a program the dynamic path runs: a node deferred until an outside
// op on such a var has run (fuzz_graph_replay found that one).
bool same_vars(const GraphNode& a, const GraphNode& b, const std::vector<VarRef>& refs) {
  if (a.num_refs != b.num_refs) return false;
  const std::vector<VarRef> x = access_set(a, refs), y = access_set(b, refs);
  for (size_t k = 0; k < x.size(); ++k) {
    if (x[k].slot != y[k].slot || x[k].gen != y[k].gen || x[k].access != y[k].access) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::vector<std::vector<uint32_t>> find_chains(const std::vector<GraphNode>& nodes,
                                               const std::vector<VarRef>& refs) {
  const auto preds = predecessors(nodes, refs);
  const uint32_t n = static_cast<uint32_t>(nodes.size());
  std::vector<uint32_t> num_succ(n, 0), succ(n, kNone);
  for (uint32_t j = 0; j < n; ++j) {
    for (uint32_t i : preds[j]) {
      ++num_succ[i];
      succ[i] = j;
    }
  }
  // next[i]: the node the chain goes on with after i; has_prev: i is not a chain's first node.
  std::vector<uint32_t> next(n, kNone);
  std::vector<bool> has_prev(n, false);
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t j = succ[i];
    if (num_succ[i] != 1 || preds[j].size() != 1) continue;
    if (!bulkable(nodes[i]) || !bulkable(nodes[j]) || !same_placement(nodes[i], nodes[j])) continue;
    if (!same_vars(nodes[i], nodes[j], refs)) continue;
    next[i] = j;
    has_prev[j] = true;
  }
  std::vector<std::vector<uint32_t>> chains;
  for (uint32_t i = 0; i < n; ++i) {
    if (has_prev[i] || next[i] == kNone) continue;
    std::vector<uint32_t> chain;
    size_t links = 0;  // the chain op's vars are at most the sum of its nodes'
    for (uint32_t k = i; k != kNone; k = next[k]) {
      if (links + nodes[k].num_refs > OpBlock::kMaxLinks) {  // too many: a new chain from k
        if (chain.size() > 1) chains.push_back(std::move(chain));
        chain.clear();
        links = 0;
      }
      chain.push_back(k);
      links += nodes[k].num_refs;
    }
    if (chain.size() > 1) chains.push_back(std::move(chain));
  }
  return chains;
}

}  // namespace ordo
