#include "graph/graph.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_set>

#include "base/last_error.h"
#include "base/spin_lock.h"
#include "core/op_block.h"
#include "engine/thread_state.h"
#include "graph/chain_plan.h"

namespace ordo {

Graph::~Graph() {
  if (shelf_) shelf_->close();  // destroy waited for the members; carriers may still finish
  // The free_fns run here are the engine's, as those it runs after ops: marked busy with it
  // meanwhile, a push from one is made, never recorded into a capture this thread has open, and
  // a wait or destroy from one is WOULD_DEADLOCK (ordo.h, "From inside an op").
  this_thread::BusyScope busy(engine_);
  for (GraphOwned& o : owned_) {
    if (o.prepared) engine_->prepared_release(o.prepared);
  }
  for (GraphOwned& o : owned_) {
    if (o.free_fn) o.free_fn(o.user_data);
  }
}

namespace {
// Room for `more` elements, growing geometrically (reserve() alone would grow by exactly what
// is asked, making a capture quadratic).
template <class T>
void grow(std::vector<T>* v, size_t more) {
  if (v->capacity() - v->size() >= more) return;
  v->reserve(std::max(v->size() + more, std::max<size_t>(16, 2 * v->capacity())));
}
}  // namespace

void Graph::new_node(const OpSpec& spec, WorkerGroup* group, const VarRef* refs, size_t n) {
  const bool named = spec.name && spec.name[0];
  const bool owns = spec.free_fn || spec.kind == OpKind::kPrepared;
  grow(&nodes_, 1);  // everything grows before anything changes: a throw leaves no trace
  grow(&refs_, n);
  grow(&names_, named ? 1 : 0);
  grow(&owned_, owns ? 1 : 0);
  GraphNode node;
  node.fn = spec.fn;
  node.user_data = spec.user_data;
  node.group = group;
  node.first_ref = static_cast<uint32_t>(refs_.size());
  node.num_refs = static_cast<uint32_t>(n);
  node.priority = spec.priority;
  node.prop = static_cast<uint8_t>(spec.prop);
  node.device_type = static_cast<uint8_t>(spec.device_type);
  node.device_id = static_cast<uint8_t>(spec.device_id);
  if (named) {
    names_.emplace_back();
    copy_name(names_.back().text, spec.name);
    node.name = static_cast<uint32_t>(names_.size());
  }
  if (owns) {
    GraphOwned o;
    o.free_fn = spec.free_fn;
    o.user_data = spec.user_data;
    if (spec.kind == OpKind::kPrepared) o.prepared = static_cast<PreparedOp*>(spec.internal);
    owned_.push_back(o);
  }
  nodes_.push_back(node);
  refs_.insert(refs_.end(), refs, refs + n);
}

ordo_status Graph::add(const OpSpec& spec, WorkerGroup* group, const VarRef* refs, size_t n) {
  // A push checks its vars' generations under their locks as it arrives; a capture, now.
  for (size_t i = 0; i < n; ++i) {
    SpinGuard g(refs[i].slot->push_lock);
    if (!refs[i].slot->named_by(refs[i].gen)) return stale_var(engine_->tag(), refs[i]);
  }
  new_node(spec, group, refs, n);
  return ORDO_OK;
}

void Graph::add_chain(const std::vector<uint32_t>& members) {
  ChainVars vars;
  vars.first_ref = static_cast<uint32_t>(chain_refs_.size());
  for (uint32_t k : members) {
    const GraphNode& node = nodes_[k];
    const VarRef* r = refs_.data() + node.first_ref;
    bulk_nodes_.push_back({node.fn, node.user_data, name_of(node), r, node.num_refs});
    chain_refs_.insert(chain_refs_.end(), r, r + node.num_refs);
  }
  // One access per var, sorted by slot as VarRefs leaves a push's: mutable if any node mutates.
  auto first = chain_refs_.begin() + vars.first_ref;
  std::sort(first, chain_refs_.end(), [](const VarRef& a, const VarRef& b) {
    return a.slot < b.slot || (a.slot == b.slot && a.access > b.access);
  });
  auto last = std::unique(first, chain_refs_.end(),
                          [](const VarRef& a, const VarRef& b) { return a.slot == b.slot; });
  chain_refs_.erase(last, chain_refs_.end());
  vars.num_refs = static_cast<uint32_t>(chain_refs_.end() - first);
  chain_vars_.push_back(vars);
  chains_.push_back({&hook_, nullptr, static_cast<uint32_t>(members.size())});
}

void Graph::seal() {
  const std::vector<std::vector<uint32_t>> chains = find_chains(nodes_, refs_);
  std::vector<uint32_t> chain_of(nodes_.size(), kNoChain);  // chains' first nodes only
  std::vector<bool> in_chain(nodes_.size(), false);
  for (uint32_t c = 0; c < chains.size(); ++c) {
    chain_of[chains[c].front()] = c;
    for (uint32_t k : chains[c]) in_chain[k] = true;
    add_chain(chains[c]);
  }
  // The nodes are all in place: the chains can point at theirs.
  const BulkNode* at = bulk_nodes_.data();
  for (BulkChain& c : chains_) {
    c.nodes = at;
    at += c.count;
  }
  std::vector<bool> is_member(nodes_.size(), false);
  find_bundle(in_chain, &is_member);
  for (uint32_t i = 0; i < nodes_.size(); ++i) {
    if (chain_of[i] != kNoChain || (!in_chain[i] && !is_member[i])) {
      steps_.push_back({i, chain_of[i]});
    }
  }
  if (chains_.empty() && members_.empty()) return;
  vars_ = refs_;  // each (var, generation) once
  auto before = [](const VarRef& a, const VarRef& b) {
    return a.slot < b.slot || (a.slot == b.slot && a.gen < b.gen);
  };
  auto same = [](const VarRef& a, const VarRef& b) { return a.slot == b.slot && a.gen == b.gen; };
  std::sort(vars_.begin(), vars_.end(), before);
  vars_.erase(std::unique(vars_.begin(), vars_.end(), same), vars_.end());
}

void Graph::find_bundle(const std::vector<bool>& in_chain, std::vector<bool>* is_member) {
  std::unordered_set<const VarSlot*> used;  // by the nodes before
  for (uint32_t i = 0; i < nodes_.size(); ++i) {
    const GraphNode& node = nodes_[i];
    const VarRef* r = refs_.data() + node.first_ref;
    const bool plain = !in_chain[i] && node.num_refs == 1 && node.prop == ORDO_PROP_NORMAL &&
                       node.device_type == ORDO_DEVICE_CPU && node.group != nullptr &&
                       node.priority == 0 &&
                       (bundle_group_ == nullptr || node.group == bundle_group_);
    if (plain && used.count(r->slot) == 0) {
      bundle_group_ = node.group;
      member_nodes_.push_back(i);
    }
    for (uint32_t k = 0; k < node.num_refs; ++k) used.insert(r[k].slot);
  }
  if (member_nodes_.size() < kMinBundle) {
    member_nodes_.clear();
    bundle_group_ = nullptr;
    return;
  }
  for (uint32_t i : member_nodes_) {
    const GraphNode& node = nodes_[i];
    (*is_member)[i] = true;
    members_.push_back({node.fn, node.user_data, name_of(node)});
    member_refs_.push_back(refs_[node.first_ref]);
  }
  shelf_ =
      new BundleShelf(static_cast<uint32_t>(members_.size()),
                      static_cast<uint32_t>(bundle_group_->threads()), members_.data(), &hook_);
  shelf_->stock(BundleShelf::kRuns);  // a throw leaves shelf_ for ~Graph to close
}

bool Graph::vars_live() const {
  for (const VarRef& r : vars_) {
    SpinGuard g(r.slot->push_lock);
    if (!r.slot->named_by(r.gen)) return false;
  }
  return true;
}

inline ordo_status Graph::push_node(const GraphNode& node) {
  OpSpec spec;
  spec.fn = node.fn;
  spec.user_data = node.user_data;
  spec.kind = OpKind::kGraph;
  spec.internal = &hook_;
  spec.priority = node.priority;
  spec.prop = node.prop;
  spec.device_type = node.device_type;
  spec.device_id = node.device_id;
  spec.name = name_of(node);
  return engine_->push_resolved(spec, node.group, refs_.data() + node.first_ref, node.num_refs);
}

// One op for the whole chain, placed as its first node (every node has the same placement).
ordo_status Graph::push_chain(const Step& step) {
  const GraphNode& head = nodes_[step.node];
  const BulkChain& chain = chains_[step.chain];
  const ChainVars& vars = chain_vars_[step.chain];
  OpSpec spec;
  spec.fn = head.fn;  // what diagnostics show: the chain's first op
  spec.user_data = head.user_data;
  spec.kind = OpKind::kChain;
  spec.internal = &chains_[step.chain];
  spec.priority = head.priority;
  spec.name = name_of(head);
  return engine_->push_chain(spec, head.group, chain_refs_.data() + vars.first_ref, vars.num_refs,
                             chain.count);
}

ordo_status Graph::launch(const char* api) {
  // A var deleted since the capture stops a launch at that var's first use, with the ops before
  // it pushed. A chain runs ops of later captured pushes at its first node's place, and the
  // bundle's members arrive before the other nodes, so a graph with either looks first, and
  // with a var gone replays op by op, which stops where it must.
  if ((chains_.empty() && members_.empty()) || !vars_live()) return replay(api);
  // Counted for the whole launch at once, one per engine op and per member: one atomic per
  // launch here, one per engine op or member as it finishes.
  const size_t total = steps_.size() + members_.size();
  in_flight_.add_ops(static_cast<int64_t>(total));
  Progress at;
  if (!members_.empty()) launch_bundle(&at);
  for (const Step& step : steps_) {
    if (step.node >= at.stop) break;
    const ordo_status s = step.chain == kNoChain ? push_node(nodes_[step.node]) : push_chain(step);
    if (__builtin_expect(s != ORDO_OK, 0)) {  // shutdown, memory, or a var deleted just now
      at.stopped(step.node, s);
      break;
    }
    ++at.units;
    at.pushed += step.chain == kNoChain ? 1 : chains_[step.chain].count;
  }
  if (__builtin_expect(at.stop != kNoStop, 0)) {
    in_flight_.done(static_cast<int64_t>(total - at.units));
    return stopped(api, at.stop, at.pushed, at.status);
  }
  return ORDO_OK;
}

// The members arrive first, in capture order (none depends on an earlier node, and no earlier
// node uses its var, so nothing is ordered differently): those whose var would grant them now
// join the carrier, which is then queued once; the others are pushed the ordinary way after it
// (never before: a launch throttled by the window while it holds joined members that no queue
// has could wait for them).
void Graph::launch_bundle(Progress* at) {
  BundleRun* run = shelf_->take();
  if (!run) {  // every run in flight (overlapping launches): each member is pushed as a node
    for (uint32_t i = 0; i < members_.size() && push_member(i, at); ++i) {
    }
    return;
  }
  run->begin();
  OpBlock* carrier = nullptr;
  if (ordo_status s = engine_->begin_bundle(run, bundle_group_, &carrier)) {
    shelf_->give_back(run);
    at->stopped(member_nodes_[0], s);
    return;
  }
  const uint32_t tag = engine_->tag();
  uint32_t joined = 0;
  uint32_t busy = 0;
  for (uint32_t i = 0; i < members_.size(); ++i) {
    ordo_status stale = ORDO_OK;
    const Join j = join_member(run, joined, carrier, member_refs_[i], i, tag, &stale);
    if (j == Join::kJoined) {
      if (++joined % kPublishEvery == 0) {  // the workers start while the launch goes on
        run->publish(joined);
        engine_->post_bundle(carrier);
      }
    } else if (j == Join::kBusy) {
      run->busy(busy++) = i;
    } else {  // the pushes made again stop here: the members before it are pushed
      at->stopped(member_nodes_[i], stale);
      break;
    }
  }
  engine_->end_bundle(carrier, run, joined);
  at->units += joined;
  at->pushed += joined;
  for (uint32_t k = 0; k < busy && push_member(run->busy(k), at); ++k) {
  }
  engine_->drop_bundle(carrier);  // the launch's reference: the run is read no more here
}

bool Graph::push_member(uint32_t i, Progress* at) {
  const uint32_t node = member_nodes_[i];
  if (ordo_status s = push_node(nodes_[node])) {
    at->stopped(node, s);
    return false;
  }
  ++at->units;
  ++at->pushed;
  return true;
}

ordo_status Graph::replay(const char* api) {
  const size_t n = nodes_.size();
  in_flight_.add_ops(static_cast<int64_t>(n));
  for (size_t i = 0; i < n; ++i) {
    if (ordo_status s = push_node(nodes_[i])) {
      in_flight_.done(static_cast<int64_t>(n - i));
      return stopped(api, i, i, s);
    }
  }
  return ORDO_OK;
}

ordo_status Graph::stopped(const char* api, size_t index, size_t pushed, ordo_status s) {
  std::string why = last_error();  // the push's own account (a stale var, shutdown, memory)
  const GraphNode& node = nodes_[index];
  return fail(s,
              "%s: op %zu of %zu ('%s') could not be pushed: %s; the %zu ops pushed before it "
              "were run, the rest were not",
              api, index, nodes_.size(), node.name ? name_of(node) : "", why.c_str(), pushed);
}

void Graph::op_finished(OpHook* hook) {
  // The last touch of the graph by this op: destroy may free it right after.
  static_cast<Hook*>(hook)->graph->in_flight_.done();
}

}  // namespace ordo
