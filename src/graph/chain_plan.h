// ChainPlan: the chains of a captured graph, found once when the capture ends. A chain is a
// run of nodes that can only run one after another: each node's only successor inside the graph
// has it as its only predecessor (successors and predecessors: the direct dependencies the var
// queues would make, SPEC §2), and every node has the same accesses (vars and modes: see
// same_vars in chain_plan.cpp for why), placement and priority. A launch runs a chain as one
// engine op (engine/bulk_chain.h).
//
// Why a chain may be pushed as one op at its first node's place in the capture order: a node
// between two of its members that conflicts with any member would be a second successor or a
// second predecessor of a member, so no such node exists; and a node of another chain (or a
// single node) that must run after a member of this one was captured after this chain's first
// node (a dependency path into a chain can only enter at its first node), so the pushes stay in
// dependency order.
#pragma once

#include <cstdint>
#include <vector>

#include "core/var_refs.h"

namespace ordo {

struct GraphNode;

// The nodes of each chain of two or more, in capture order; chains ordered by their first node.
std::vector<std::vector<uint32_t>> find_chains(const std::vector<GraphNode>& nodes,
                                               const std::vector<VarRef>& refs);

}  // namespace ordo
