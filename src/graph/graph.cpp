#include "graph/graph.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "base/last_error.h"
#include "base/spin_lock.h"
#include "core/op_block.h"

namespace ordo {

Graph::~Graph() {
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

ordo_status Graph::launch(const char* api) {
  const size_t n = nodes_.size();
  // Counted for the whole launch at once: one atomic per launch here, one per op in op_finished.
  in_flight_.add_ops(static_cast<int64_t>(n));
  for (size_t i = 0; i < n; ++i) {
    GraphNode& node = nodes_[i];
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
    ordo_status s =
        engine_->push_resolved(spec, node.group, refs_.data() + node.first_ref, node.num_refs);
    if (__builtin_expect(s != ORDO_OK, 0)) {
      in_flight_.done(static_cast<int64_t>(n - i));
      return stopped(api, i, s);
    }
  }
  return ORDO_OK;
}

ordo_status Graph::stopped(const char* api, size_t index, ordo_status s) {
  std::string why = last_error();  // the push's own account (a stale var, shutdown, memory)
  const GraphNode& node = nodes_[index];
  return fail(s,
              "%s: op %zu of %zu ('%s') could not be pushed: %s; the %zu ops before it were "
              "pushed and run, the rest were not",
              api, index, nodes_.size(), node.name ? name_of(node) : "", why.c_str(), index);
}

void Graph::op_finished(OpHook* hook) {
  // The last touch of the graph by this op: destroy may free it right after.
  static_cast<Hook*>(hook)->graph->in_flight_.done();
}

}  // namespace ordo
