// The reference model behind fuzz_api: what the public contract (include/ordo/ordo.h) says an
// engine must do with a sequence of calls, computed with plain lists and no threads.
//
// Every pushed op (the caller's, and the internal ones: wait markers, clear_error, var delete) is
// a node; its predecessors are the earlier ops that share a var with it where either one writes.
// The model runs ops eagerly, in push order, as soon as all their predecessors are done, so at
// any moment it knows which ops *will* finish without more calls from the caller ("done") and
// which are stuck behind a deferred op that has not been completed (everything else). Because
// error states travel along the same edges, it also knows what each op sees: an op is skipped
// when a var it uses carries an error, a failing or skipped op passes its error on to the vars it
// writes, clear_error empties it, and a wait marker reports it.
//
// Where the contract leaves a choice (which of two errors a skipped op inherits), the model
// keeps every allowed answer: an error state is a set of possible codes, empty meaning "no error".
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace fuzz_api {

// What a caller's op does when it runs.
enum class Behaviour : uint8_t {
  kReturn,       // returns `code` (0: success)
  kThrow,        // throws a C++ exception: a failure with ORDO_ERR_OP_FAILED
  kDeferLater,   // defers; the harness completes it in a later step
  kDeferInside,  // defers and completes itself before returning (return value ignored)
  kDeferTwice,   // defers, checks that a second defer is refused, completes itself
  kWaitInside,   // calls waits and destroy from inside (all refused), then returns `code`
  kPushChild,    // pushes a var-less child op returning `child_code`, then returns `code`
  kGetInfo,      // checks ordo_exec_get_info, then returns `code`
  kCount
};

enum class NodeKind : uint8_t { kUser, kChild, kWait, kClearError, kDeleteVar };

using CodeSet = std::vector<int32_t>;  // sorted, unique; empty: no error

inline void add_codes(CodeSet* into, const CodeSet& more) {
  for (int32_t c : more) {
    if (!std::binary_search(into->begin(), into->end(), c)) {
      into->insert(std::upper_bound(into->begin(), into->end(), c), c);
    }
  }
}

struct Access {
  int var;
  bool write;
};

struct Node {
  NodeKind kind;
  std::vector<Access> access;
  std::vector<int> preds;       // direct predecessors (node ids)
  std::vector<int> user_preds;  // caller's ops among all transitive predecessors
  Behaviour behaviour = Behaviour::kReturn;
  int32_t code = 0;        // kReturn & co: the return value; kChild: its return value
  int32_t child_code = 0;  // kPushChild
  enum State : uint8_t { kPending, kDeferred, kDone } state = kPending;
  bool ran = false;      // the callback was (or will have been) called
  bool skipped = false;  // not called: a var carried an error
  bool failed = false;   // ran and failed, or skipped
  CodeSet saw;           // kWait: the var's error when its turn came
  int child = -1;        // kPushChild: the child's node, once the parent ran
};

struct Var {
  uint64_t handle = 0;
  bool live = true;
  std::vector<std::pair<int, bool>> history;  // (node, writes) in push order
  CodeSet error;                              // as of the last finished writer
};

class Model {
 public:
  int add_var(uint64_t handle) {
    vars_.push_back(Var{});
    vars_.back().handle = handle;
    return static_cast<int>(vars_.size()) - 1;
  }

  // Adds a node at the end of every queue it touches and runs whatever can run.
  int push(NodeKind kind, std::vector<Access> access, Behaviour b = Behaviour::kReturn,
           int32_t code = 0, int32_t child_code = 0) {
    int id = add_node(kind, std::move(access), b, code, child_code);
    advance();
    return id;
  }

  // ordo_wait_for_var (a timeout other than 0): it waits for every earlier op on the var, like a
  // write, but orders nothing: later readers do not follow it. (It is a wait mark; a wait that
  // finds another wait's mark outstanding joins it, or waits behind it and then pushes its own,
  // which later readers do not follow either: var_slot.h.)
  int push_wait(int var) {
    int id = add_node(NodeKind::kWait, {{var, true}}, Behaviour::kReturn, 0, 0);
    vars_[var].history.back().second = false;  // later readers do not follow it
    advance();
    return id;
  }

  // ordo_wait_for_var_async: queued like a write (later readers follow it), reads the var's
  // error when its turn comes, never fails.
  int push_async_wait(int var) { return push(NodeKind::kWait, {{var, true}}); }

  // The caller's ops among the transitive predecessors an op with these accesses would have.
  std::vector<int> user_preds_for(const std::vector<Access>& access) const {
    Node probe;
    for (const Access& a : access) {
      for (const auto& h : vars_[a.var].history) {
        if (a.write || h.second) add_pred(&probe, h.first);
      }
    }
    return probe.user_preds;
  }

  // The caller completes a deferred op with `code`.
  void complete(int id, int32_t code) {
    finish(id, code == 0 ? CodeSet{} : CodeSet{code});
    advance();
  }

  // A successful ordo_wait_for_all clears the failure record.
  bool take_failure() {
    bool f = failure_;
    failure_ = false;
    return f;
  }
  bool failure_pending() const { return failure_; }

  bool all_done() const {
    return std::all_of(nodes_.begin(), nodes_.end(),
                       [](const Node& n) { return n.state == Node::kDone; });
  }
  bool var_quiet(int v) const {
    for (const auto& h : vars_[v].history) {
      if (nodes_[h.first].state != Node::kDone) return false;
    }
    return true;
  }

  const Node& node(int id) const { return nodes_[id]; }
  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  const Var& var(int v) const { return vars_[v]; }
  int num_vars() const { return static_cast<int>(vars_.size()); }

 private:
  int add_node(NodeKind kind, std::vector<Access> access, Behaviour b, int32_t code,
               int32_t child_code) {
    int id = static_cast<int>(nodes_.size());
    nodes_.push_back(Node{});
    Node& n = nodes_.back();
    n.kind = kind;
    n.access = std::move(access);
    n.behaviour = b;
    n.code = code;
    n.child_code = child_code;
    for (const Access& a : n.access) {
      for (const auto& h : vars_[a.var].history) {
        if (a.write || h.second) add_pred(&n, h.first);
      }
    }
    for (const Access& a : n.access) vars_[a.var].history.emplace_back(id, a.write);
    if (kind == NodeKind::kDeleteVar) vars_[n.access[0].var].live = false;
    return id;
  }

  void add_pred(Node* n, int p) const {
    if (std::find(n->preds.begin(), n->preds.end(), p) != n->preds.end()) return;
    n->preds.push_back(p);
    const Node& pn = nodes_[p];
    if (pn.kind == NodeKind::kUser) {
      merge(&n->user_preds, {p});
    } else {
      merge(&n->user_preds, pn.user_preds);
    }
  }

  static void merge(std::vector<int>* into, const std::vector<int>& more) {
    for (int x : more) {
      if (std::find(into->begin(), into->end(), x) == into->end()) into->push_back(x);
    }
  }

  bool ready(const Node& n) const {
    return std::all_of(n.preds.begin(), n.preds.end(),
                       [&](int p) { return nodes_[p].state == Node::kDone; });
  }

  // Runs nodes in push order until nothing more can run (a child added on the way is picked up
  // by the same loop).
  void advance() {
    bool moved = true;
    while (moved) {
      moved = false;
      for (int id = 0; id < num_nodes(); ++id) {
        if (nodes_[id].state == Node::kPending && ready(nodes_[id])) {
          start(id);
          moved = true;
        }
      }
    }
  }

  void start(int id) {
    switch (nodes_[id].kind) {
      case NodeKind::kUser:
        start_user(id);
        return;
      case NodeKind::kChild:
        nodes_[id].ran = true;
        finish(id, nodes_[id].code ? CodeSet{nodes_[id].code} : CodeSet{});
        return;
      case NodeKind::kWait:
        nodes_[id].saw = vars_[nodes_[id].access[0].var].error;
        break;
      case NodeKind::kClearError:
        vars_[nodes_[id].access[0].var].error.clear();
        break;
      case NodeKind::kDeleteVar:
        break;
    }
    nodes_[id].state = Node::kDone;  // internal ops never fail
  }

  void start_user(int id) {
    CodeSet inherited;
    for (const Access& a : nodes_[id].access) add_codes(&inherited, vars_[a.var].error);
    if (!inherited.empty()) {
      nodes_[id].skipped = true;
      finish(id, inherited);
      return;
    }
    nodes_[id].ran = true;
    int32_t code = nodes_[id].code;
    switch (nodes_[id].behaviour) {
      case Behaviour::kDeferLater:
        nodes_[id].state = Node::kDeferred;
        return;
      case Behaviour::kThrow:
        code = 3;  // ORDO_ERR_OP_FAILED
        break;
      case Behaviour::kPushChild: {
        int child = add_node(NodeKind::kChild, {}, Behaviour::kReturn, nodes_[id].child_code, 0);
        nodes_[id].child = child;
        break;
      }
      default:
        break;
    }
    finish(id, code ? CodeSet{code} : CodeSet{});
  }

  void finish(int id, const CodeSet& failure) {
    Node& n = nodes_[id];
    n.state = Node::kDone;
    if (failure.empty()) return;
    n.failed = true;
    failure_ = true;
    for (const Access& a : n.access) {
      if (a.write) vars_[a.var].error = failure;
    }
  }

  std::vector<Node> nodes_;
  std::vector<Var> vars_;
  bool failure_ = false;
};

}  // namespace fuzz_api
