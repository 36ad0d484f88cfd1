// fuzz_var_queue: ordo::VarSlot, the per-variable dependency queue, driven directly on one thread.
//
// The input is a sequence of steps: pushes (an op's accesses arriving at its vars in index order,
// as Engine::enqueue_on_vars does, possibly with other steps between two arrivals, as happens when
// workers complete ops while a pusher holds its locks) and completions of running ops (their
// accesses completed in link order, as OpRunner::finalize does, possibly one access per step).
// Every order this produces is one a real run could produce.
//
// The oracle is a reference model: per var, the plain list of accesses that arrived and are not
// completed, in arrival order. An access may run when it is a write at the head of the list, or a
// read with no write before it. After every step the slot must agree with it exactly:
//   - every access that may run is granted, and no other (no ordering violation, no stall, and
//     readers with no write between them run together);
//   - arrival (var_slot.h): arrive() grants exactly when the var is idle, or when it is a read and
//     only readers are active with nothing waiting (kShared);
//   - complete() returns, as its grant chain, only accesses that were not granted before;
//   - each op is triggered (pusher's count, or settle_grants reaching zero) exactly once, when
//     all of its accesses are granted, and its wait counter equals its missing grants;
//   - the state word matches var_slot.h's description: 0 (kIdle) exactly when nothing is pending,
//     the reader count equals the active readers, kWriter is set exactly while a writer is
//     active, nothing waits while kShared, and an empty slot has an empty private FIFO.
// Some steps are ordo_wait_for_var's (one var; var_slot.h "Wait marks"), taken as the engine
// takes them: begin_wait() under the push lock, then, when it reserved the var, the mark's push
// (at once or some steps later, other accesses and waits arriving between) or its failure
// (cancel_reservation()). The model treats a mark as a read; in addition:
//   - begin_wait reserves exactly when the var has no mark outstanding or reserved, joins
//     exactly when the var is reserved, the outstanding mark is the var's last arrival, or the
//     wait begins again, and else queues the wait behind the mark (retry set);
//   - a mark never arrives as a write;
//   - a mark fires (mark_run() true, or a completion returns it) only when every access pushed
//     before it has completed, exactly once, and never later than that: once it has run and
//     nothing older is left, it has fired;
//   - a fired mark hands over exactly the waits that joined it or queued behind it (and the
//     reservation it came from), and a cancelled reservation exactly those that joined it, each
//     set to begin again; a wait on a list that gives up leaves it, from wherever it is there;
//   - a wait handed over to return (not to begin again) finds every access that arrived before
//     its first step completed; waits handed back begin again in later steps (`again`: any mark
//     they find then came after them, so they join it), and at the end until none is left;
//   - kSplit is set exactly while a granted mark has not fired.
// Any difference, double trigger or missed trigger aborts. At the end every op must drain.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/var_slot.h"
#include "fuzz_check.h"
#include "fuzz_input.h"

namespace {

using ordo::OpBlock;
using ordo::VarLink;
using ordo::VarSlot;

constexpr int kVars = 4;  // an op touches at most 4 vars: inline links, over both link lines
constexpr size_t kMaxLiveOps = 64;
static_assert(kVars <= static_cast<int>(OpBlock::kInlineLinks), "links must fit inline");

struct Op {
  OpBlock* block = nullptr;
  int id = 0;
  int num_links = 0;
  int arrived = 0;    // accesses that have arrived; the push is over when all have
  int completed = 0;  // accesses completed, in link order
  int granted_at_arrival = 0;
  bool granted[kVars] = {};  // by the slot: at arrival, or in a completion's grant chain
  bool ready = false;        // triggered: by the pusher, or by settle_grants reaching zero
  bool mark = false;         // a wait mark (one read link with kMarkBit)
  bool mark_ran = false;     // the mark's op has run (mark_run() called)
  bool fired = false;        // the mark has fired: it may complete

  FUZZ_ORACLE bool pushed() const { return arrived == num_links; }
  FUZZ_ORACLE VarLink& link(int i) const { return block->link(static_cast<uint32_t>(i)); }
  // Which of this op's links `l` is (-1: none).
  FUZZ_ORACLE int index_of(const VarLink* l) const {
    for (int i = 0; i < num_links; ++i) {
      if (&link(i) == l) return i;
    }
    return -1;
  }
};

struct Pending {
  Op* op;
  int link;
  uint64_t seq;  // its place among all arrivals on all vars
};

// A wait that joined a mark or queued behind it (or behind a reservation).
struct Joiner : ordo::WaitJoiner {
  int id = 0;
  int var = 0;
  const Op* on = nullptr;  // the mark, or kReservation; nullptr: handed back to begin again
  uint64_t first_seq = 0;  // arrivals before its first step: what it must wait for
  bool woken = false;
  bool done = false;
};

class VarQueueHarness {
 public:
  ~VarQueueHarness() {
    for (OpBlock* b : blocks_) delete b;
  }

  void run(fuzz::Input& in) {
    while (!in.done()) {
      step(in);
      check_all();
    }
    drain();
  }

 private:
  void step(fuzz::Input& in) {
    switch (in.below(4)) {
      case 0:
        push(in);
        break;
      case 1:
        if (pushing_) arrive_next(pushing_);
        break;
      case 2:
        if (Op* op = pick_ready(in.byte())) complete_all(op);
        break;
      default:
        if (Op* op = pick_ready(in.byte())) complete_next(op);
        break;
    }
  }

  // Starts a push of a new op: which vars, which of them written, and whether only the first
  // access arrives now (the rest in later steps).
  void push(fuzz::Input& in) {
    uint8_t vars = in.byte();
    uint8_t writes = in.byte();
    if (pushing_) finish_arrivals(pushing_);
    if (live_.size() >= kMaxLiveOps) return;
    uint32_t mask = vars & 0xF;
    if (mask == 0) mask = 1u << ((vars >> 4) & 3);
    if (writes & 0x80) {
      wait_step(__builtin_ctz(mask), writes, in.byte());
      return;
    }
    Op* op = new_op();
    for (int v = 0; v < kVars; ++v) {
      if (!(mask & (1u << v))) continue;
      ++op->num_links;
    }
    op->block->num_links = static_cast<uint16_t>(op->num_links);
    for (int i = 0, v = 0; v < kVars; ++v) {
      if (mask & (1u << v)) op->link(i++).set(&vars_[v], (writes >> v) & 1);
    }
    op->block->wait.store(op->num_links, std::memory_order_relaxed);
    for (int i = 0; i < op->num_links; ++i) op->link(i).var()->push_lock.lock();
    pushing_ = op;
    FUZZ_TRACE("push op %d: vars 0x%x, writes 0x%x%s\n", op->id, mask, writes & mask,
               (vars & 0x80) ? " (split)" : "");
    if (vars & 0x80) {
      arrive_next(op);
    } else {
      finish_arrivals(op);
    }
  }

  // A wait on var v (not a poll). Instead, while a wait has reserved v, 0x10: that wait's next
  // step, its mark arriving, or (0x20) its push failing. 0x04: a wait on v's mark gives up
  // (timed out). 0x08: a wait handed back to begin again (Engine::wait_for_var's `again`)
  // does. 0x40: a wait that reserves v pushes its mark in a later step (accesses and waits
  // arrive meanwhile).
  void wait_step(int v, uint8_t bits, uint8_t pick) {
    if (reserved_[v] && (bits & 0x10)) {
      if (bits & 0x20) {
        cancel_reservation(v);
      } else {
        push_mark(v);
      }
      return;
    }
    if (bits & 0x04) {
      if (Joiner* j = pick_joiner(v, pick, false)) give_up(j);
      return;
    }
    Joiner* j = (bits & 0x08) ? pick_joiner(v, pick, true) : nullptr;
    const bool again = j != nullptr;
    if (!j) {
      joiners_.push_back(std::make_unique<Joiner>());
      j = joiners_.back().get();
      j->id = next_id_++;
      j->var = v;
      j->first_seq = arrivals_;
    }
    begin(j, again, bits);
  }

  // begin_wait for j, new or (again) handed back.
  void begin(Joiner* j, bool again, uint8_t bits) {
    const int v = j->var;
    VarSlot& s = vars_[v];
    const Op* outstanding = outstanding_mark(v);
    j->retry = false;
    j->on = nullptr;
    s.push_lock.lock();
    VarSlot::WaitStep step = s.begin_wait(j, again);
    s.push_lock.unlock();
    VarSlot::WaitStep expected = VarSlot::kBehind;
    if (!outstanding) {
      expected = VarSlot::kPushMark;
    } else if (outstanding == kReservation || again || last_arrival_[v] == &outstanding->link(0)) {
      expected = VarSlot::kJoined;
    }
    FUZZ_TRACE("wait %d on var %d%s: step %d\n", j->id, v, again ? " (again)" : "",
               static_cast<int>(step));
    FUZZ_CHECK(step == expected, "wait %d on var %d: begin_wait gave step %d, the model says %d",
               j->id, v, static_cast<int>(step), static_cast<int>(expected));
    if (step == VarSlot::kPushMark) {
      // Its own mark waits for everything before it, which fire() checks.
      erase_joiner(j);
      reserved_[v] = true;
      if (!(bits & 0x40)) push_mark(v);
      return;
    }
    FUZZ_CHECK(j->retry == (step == VarSlot::kBehind), "wait %d: retry=%d after step %d", j->id,
               j->retry, static_cast<int>(step));
    j->on = outstanding;
  }

  // A wait of var v: on its mark's list (begun == false), or handed back to begin again.
  FUZZ_ORACLE Joiner* pick_joiner(int v, uint8_t pick, bool handed_back) const {
    std::vector<Joiner*> found;
    for (const auto& j : joiners_) {
      if (j->var == v && (j->on == nullptr) == handed_back) found.push_back(j.get());
    }
    return found.empty() ? nullptr : found[pick % found.size()];
  }

  // A wait on a mark's list gives up: it leaves the list, from wherever it is there.
  void give_up(Joiner* j) {
    VarSlot& s = vars_[j->var];
    s.push_lock.lock();
    bool left = s.leave_joiners(j);
    s.push_lock.unlock();
    FUZZ_TRACE("wait %d on var %d gives up: left=%d\n", j->id, j->var, left);
    FUZZ_CHECK(left, "wait %d on var %d: could not leave its mark's list", j->id, j->var);
    erase_joiner(j);
  }

  void erase_joiner(const Joiner* j) {
    joiners_.erase(std::find_if(joiners_.begin(), joiners_.end(),
                                [&](const std::unique_ptr<Joiner>& o) { return o.get() == j; }));
  }

  // The var's mark that has not fired (kReservation: the var is reserved for one), or nullptr.
  FUZZ_ORACLE const Op* outstanding_mark(int v) const {
    if (reserved_[v]) return kReservation;
    for (const auto& other : live_) {
      if (other->mark && !other->fired && other->link(0).var() == &vars_[v]) return other.get();
    }
    return nullptr;
  }

  // The reserving wait's push failed: the waits behind the reservation come back.
  void cancel_reservation(int v) {
    VarSlot& s = vars_[v];
    s.push_lock.lock();
    ordo::WaitJoiner* behind = s.cancel_reservation();
    s.push_lock.unlock();
    reserved_[v] = false;
    FUZZ_TRACE("reservation of var %d cancelled\n", v);
    for (ordo::WaitJoiner* w = behind; w; w = w->next_joiner) {
      FUZZ_CHECK(w->retry, "var %d: a cancelled reservation handed over wait %d without retry", v,
                 static_cast<Joiner*>(w)->id);
    }
    hand_over(behind, v, kReservation, "a cancelled reservation");
    FUZZ_CHECK(s.wait_mark == nullptr, "var %d: a mark left after a cancelled reservation", v);
  }

  // `list` (from the slot) must hold exactly the waits on `on` of var v, each once. A wait that
  // joined returns: every access that arrived before its first step must have completed (marks
  // aside: waits wait for ops, not for other waits). One that must begin again is handed back.
  void hand_over(ordo::WaitJoiner* list, int v, const Op* on, const char* by) {
    size_t n = 0;
    for (ordo::WaitJoiner* w = list; w; w = w->next_joiner) {
      auto* j = static_cast<Joiner*>(w);
      FUZZ_CHECK(j->var == v && j->on == on && !j->woken,
                 "%s on var %d handed over wait %d (var %d, woken=%d), not one of its own", by, v,
                 j->id, j->var, j->woken);
      FUZZ_CHECK(++n <= joiners_.size(), "%s on var %d: the joiner list does not end", by, v);
      j->woken = true;
    }
    for (const auto& j : joiners_) {
      FUZZ_CHECK(j->var != v || j->on != on || j->woken, "%s on var %d did not hand over wait %d",
                 by, v, j->id);
      if (!j->woken) continue;
      j->woken = false;
      j->on = nullptr;
      if (j->retry) continue;  // handed back: it begins again in a later step
      for (const Pending& p : queue_[v]) {
        FUZZ_CHECK(p.op->mark || p.seq >= j->first_seq,
                   "%s on var %d: wait %d returns while op %d, which arrived before it, is pending",
                   by, v, j->id, p.op->id);
      }
      j->done = true;
    }
    joiners_.erase(std::remove_if(joiners_.begin(), joiners_.end(),
                                  [](const std::unique_ptr<Joiner>& j) { return j->done; }),
                   joiners_.end());
  }

  // The reserving wait's push: one link with kMarkBit, as Engine::push_internal makes it.
  void push_mark(int v) {
    Op* op = new_op();
    op->mark = true;
    op->num_links = 1;
    op->block->num_links = 1;
    VarLink& l = op->link(0);
    l.set(&vars_[v], VarLink::kMarkBit);
    op->block->wait.store(1, std::memory_order_relaxed);
    VarSlot& s = vars_[v];
    s.push_lock.lock();
    Census c = census(v);
    queue_[v].push_back({op, 0, arrivals_++});
    last_arrival_[v] = &l;
    bool granted = s.arrive(&l);
    reserved_[v] = false;
    for (const auto& j : joiners_) {
      if (j->var == v && j->on == kReservation) j->on = op;  // on the mark now
    }
    FUZZ_TRACE("mark op %d on var %d: granted=%d\n", op->id, v, granted);
    FUZZ_CHECK(l.mark() && !l.write(), "mark op %d on var %d: write=%d and mark=%d", op->id, v,
               l.write(), l.mark());
    bool expected = queue_[v].size() == 1 || (c.waiting == 0 && c.writers == 0);
    FUZZ_CHECK(granted == expected, "mark op %d on var %d: granted=%d, the model says %d", op->id,
               v, granted, expected);
    if (granted) {
      op->granted[0] = true;
      op->granted_at_arrival = 1;
    }
    op->arrived = 1;
    end_push(op);
  }

  // The mark's op runs (Engine::execute): it fires now, or an older reader fires it later.
  void run_mark(Op* op) {
    let_split_end(var_index(op->link(0).var()));
    op->mark_ran = true;
    bool now = op->link(0).var()->mark_run();
    FUZZ_TRACE("mark op %d runs: fires now=%d\n", op->id, now);
    if (now) fire(op, "its own run");
  }

  void fire(Op* op, const char* by) {
    int v = var_index(op->link(0).var());
    FUZZ_CHECK(op->mark && op->mark_ran, "op %d fired by %s but is no mark that ran", op->id, by);
    FUZZ_CHECK(!op->fired, "mark op %d fired twice (second by %s)", op->id, by);
    FUZZ_CHECK(queue_[v].front().op == op,
               "mark op %d on var %d fired by %s while an access pushed before it is pending "
               "(op %d)",
               op->id, v, by, queue_[v].front().op->id);
    op->fired = true;
    // As Engine::execute does before it wakes the waiter: the waits on the mark.
    hand_over(op->link(0).var()->take_fired_joiners(), v, op, by);
  }

  Op* new_op() {
    OpBlock* block;
    if (free_blocks_.empty()) {
      block = new OpBlock();
      block->bind_link_lines();  // as OpPool does: a link finds its op through its line
      blocks_.push_back(block);
    } else {
      block = free_blocks_.back();  // reused like the engine's pool: stale link fields and all
      free_blocks_.pop_back();
    }
    live_.push_back(std::make_unique<Op>());
    Op* op = live_.back().get();
    op->block = block;
    op->id = next_id_++;
    block->user_data = op;
    return op;
  }

  static Op* op_of(const OpBlock* b) { return static_cast<Op*>(b->user_data); }
  int var_index(const VarSlot* v) const { return static_cast<int>(v - vars_); }

  void finish_arrivals(Op* op) {
    while (!op->pushed()) arrive_next(op);
  }

  void arrive_next(Op* op) {
    int i = op->arrived;
    VarLink& l = op->link(i);
    int v = var_index(l.var());
    Census c = census(v);
    bool expected = queue_[v].empty() || (!l.write() && c.waiting == 0 && c.writers == 0);
    queue_[v].push_back({op, i, arrivals_++});
    last_arrival_[v] = &l;
    bool granted = l.var()->arrive(&l);
    FUZZ_TRACE("  op %d arrives at var %d (%s): granted=%d\n", op->id, v,
               l.write() ? "write" : "read", granted);
    FUZZ_CHECK(granted == expected, "op %d: arrive(%s) on var %d returned %d, the model says %d",
               op->id, l.write() ? "write" : "read", v, granted, expected);
    if (granted) {
      op->granted[i] = true;
      ++op->granted_at_arrival;
    }
    if (++op->arrived == op->num_links) end_push(op);
  }

  // Mirrors the end of Engine::enqueue_on_vars: the pusher subtracts the grants it got.
  void end_push(Op* op) {
    for (int i = op->num_links; i-- > 0;) op->link(i).var()->push_lock.unlock();
    pushing_ = nullptr;
    int n = op->num_links;
    int g = op->granted_at_arrival;
    if (g == n) {
      trigger(op, "the pusher (all accesses granted at arrival)");
    } else if (g > 0 && op->block->wait.fetch_sub(g, std::memory_order_acq_rel) == g) {
      trigger(op, "the pusher's count");
    }
  }

  void trigger(Op* op, const char* by) {
    FUZZ_CHECK(!op->ready, "op %d triggered twice (second time by %s)", op->id, by);
    FUZZ_CHECK(op->pushed(), "op %d triggered by %s before its push finished", op->id, by);
    op->ready = true;
  }

  FUZZ_ORACLE Op* pick_ready(uint8_t k) {
    std::vector<Op*> ready;
    for (auto& op : live_) {
      // A mark that ran waits to be fired by an older reader's completion.
      if (op->ready && !(op->mark && op->mark_ran && !op->fired)) ready.push_back(op.get());
    }
    return ready.empty() ? nullptr : ready[k % ready.size()];
  }

  // A completion on var v may end a mark's split, which takes v's push lock (end_split): a
  // worker would wait the few instructions until the pusher holding it is done. This one thread
  // is that pusher too, so it finishes the push first.
  void let_split_end(int v) {
    if (!pushing_) return;
    for (int i = 0; i < pushing_->num_links; ++i) {
      if (pushing_->link(i).var() == &vars_[v]) {
        finish_arrivals(pushing_);
        return;
      }
    }
  }

  void complete_all(Op* op) {
    if (op->mark && !op->mark_ran) run_mark(op);
    if (op->mark && !op->fired) return;  // an older reader fires it
    for (int left = op->num_links - op->completed; left > 0; --left) complete_next(op);
  }

  // Completes the op's next access, as one iteration of OpRunner::finalize's loop.
  void complete_next(Op* op) {
    int i = op->completed;
    VarLink& l = op->link(i);
    int v = var_index(l.var());
    FUZZ_CHECK(op->granted[i], "op %d runs without its grant on var %d", op->id, v);
    if (op->mark && !op->mark_ran) run_mark(op);
    if (op->mark && !op->fired) return;  // an older reader fires it
    if (vars_[v].word.load(std::memory_order_relaxed) & VarSlot::kSplit) let_split_end(v);
    remove_from_queue(v, op, i);
    VarSlot::Completion done = l.var()->complete(l);
    FUZZ_TRACE("op %d completes on var %d (%s)\n", op->id, v, l.write() ? "write" : "read");
    check_chain(v, done.granted);
    ordo::settle_grants(done.granted, [&](OpBlock* b) { trigger(op_of(b), "settle_grants"); });
    if (done.fired) {
      FUZZ_CHECK(done.fired->var() == l.var(), "a completion on var %d fired another var's mark",
                 v);
      fire(op_of(done.fired->op()), "a completion");
    }
    if (++op->completed == op->num_links) retire(op);
  }

  void remove_from_queue(int v, Op* op, int link) {
    auto& q = queue_[v];
    auto it = std::find_if(q.begin(), q.end(),
                           [&](const Pending& p) { return p.op == op && p.link == link; });
    FUZZ_CHECK(it != q.end(), "op %d link %d is not pending on var %d", op->id, link, v);
    q.erase(it);
  }

  // Every link of the grant chain complete() returned must be newly granted, on this var, and
  // allowed to run; whether enough was granted is checked after the step (progress).
  FUZZ_ORACLE void check_chain(int v, VarLink* chain) {
    size_t got = 0;
    for (VarLink* l = chain; l; l = l->next.load(std::memory_order_relaxed)) {
      FUZZ_CHECK(l->var() == &vars_[v], "a grant chain of var %d holds a link of var %d", v,
                 var_index(l->var()));
      Op* op = op_of(l->op());
      int i = op->index_of(l);
      FUZZ_CHECK(i >= 0 && i < op->arrived, "op %d: granted link %d has not arrived", op->id, i);
      FUZZ_CHECK(!op->granted[i], "op %d: its access to var %d was granted twice", op->id, v);
      op->granted[i] = true;
      FUZZ_CHECK(++got <= kMaxLiveOps * kVars, "grant chain of var %d does not end", v);
    }
  }

  void retire(Op* op) {
    free_blocks_.push_back(op->block);
    live_.erase(std::find_if(live_.begin(), live_.end(),
                             [&](const std::unique_ptr<Op>& p) { return p.get() == op; }));
  }

  // The var's accesses by what the slot has done with them.
  struct Census {
    int readers = 0;  // granted reads
    int writers = 0;  // granted writes
    int waiting = 0;  // not granted
  };
  FUZZ_ORACLE Census census(int v) const {
    Census c;
    for (const Pending& p : queue_[v]) {
      if (!p.op->granted[p.link]) {
        ++c.waiting;
      } else if (p.op->link(p.link).write()) {
        ++c.writers;
      } else {
        ++c.readers;
      }
    }
    return c;
  }

  FUZZ_ORACLE void check_all() const {
    for (int v = 0; v < kVars; ++v) {
      check_queue(v);
      check_word(v);
    }
    for (const auto& op : live_) check_op(*op);
    for (const auto& op : live_) check_mark(*op);
  }

  // A mark that has run fires as soon as nothing pushed before it is pending.
  FUZZ_ORACLE void check_mark(const Op& op) const {
    if (!op.mark || !op.mark_ran || op.fired) return;
    int v = var_index(op.link(0).var());
    FUZZ_CHECK(queue_[v].front().op != &op,
               "mark op %d on var %d: everything before it completed but it has not fired", op.id,
               v);
  }

  // One pass over var v's list: granted exactly when nothing before conflicts.
  FUZZ_ORACLE void check_queue(int v) const {
    bool write_before = false;
    for (size_t pos = 0; pos < queue_[v].size(); ++pos) {
      const Pending& p = queue_[v][pos];
      bool write = p.op->link(p.link).write();
      bool may = write ? pos == 0 : !write_before;
      bool granted = p.op->granted[p.link];
      FUZZ_CHECK(!granted || may,
                 "op %d: granted on var %d while an earlier access conflicts (ordering broken)",
                 p.op->id, v);
      FUZZ_CHECK(granted || !may,
                 "op %d: its %s of var %d may run (nothing before it conflicts) but is not "
                 "granted (missed grant)",
                 p.op->id, write ? "write" : "read", v);
      write_before = write_before || write;
    }
  }

  FUZZ_ORACLE void check_op(const Op& op) const {
    int granted = 0;
    for (int i = 0; i < op.arrived; ++i) granted += op.granted[i];
    bool all = op.pushed() && granted == op.num_links;
    FUZZ_CHECK(op.ready == all, "op %d: triggered=%d but all accesses granted=%d (%s)", op.id,
               op.ready, all, op.ready ? "early trigger" : "missed trigger");
    int wait = op.block->wait.load(std::memory_order_relaxed);
    if (!op.pushed()) {
      int later = granted - op.granted_at_arrival;
      FUZZ_CHECK(wait == op.num_links - later, "op %d (push in progress): wait=%d, expected %d",
                 op.id, wait, op.num_links - later);
    } else if (!op.ready) {
      FUZZ_CHECK(wait == op.num_links - granted, "op %d: wait=%d but %d grants are missing", op.id,
                 wait, op.num_links - granted);
    }
  }

  FUZZ_ORACLE void check_word(int v) const {
    const VarSlot& s = vars_[v];
    uint64_t w = s.word.load(std::memory_order_relaxed);
    Census c = census(v);
    int readers = c.readers, writers = c.writers, waiting = c.waiting;
    uint64_t mode = w & VarSlot::kModeMask;
    bool empty = queue_[v].empty();
    FUZZ_CHECK((w == 0) == empty, "var %d: word=0x%016llx with %zu accesses pending", v,
               static_cast<unsigned long long>(w), queue_[v].size());
    bool splitting = false;
    for (const Pending& p : queue_[v]) {
      if (p.op->mark && p.op->granted[0] && !p.op->fired) splitting = true;
    }
    FUZZ_CHECK(((w & VarSlot::kSplit) != 0) == splitting,
               "var %d: kSplit=%d while a granted mark waits=%d", v, (w & VarSlot::kSplit) != 0,
               splitting);
    FUZZ_CHECK(static_cast<int>(w >> VarSlot::kCountShift) == readers,
               "var %d: word counts %d readers, %d are active", v,
               static_cast<int>(w >> VarSlot::kCountShift), readers);
    FUZZ_CHECK(((w & VarSlot::kWriter) != 0) == (writers == 1),
               "var %d: kWriter=%d with %d active writers", v, (w & VarSlot::kWriter) != 0,
               writers);
    FUZZ_CHECK(mode != 3, "var %d: invalid mode 3", v);
    if (waiting > 0)
      FUZZ_CHECK(mode == VarSlot::kOwned, "var %d: accesses wait, mode %d", v,
                 static_cast<int>(mode));
    if (mode == VarSlot::kShared) {
      FUZZ_CHECK(waiting == 0 && writers == 0, "var %d: kShared with %d waiting, %d writers", v,
                 waiting, writers);
    }
    if ((w & VarSlot::kInboxMask) != 0) FUZZ_CHECK(waiting > 0, "var %d: inbox set, none wait", v);
    if (empty) {
      FUZZ_CHECK(s.fifo_head == nullptr && s.fifo_tail == nullptr, "var %d: idle, FIFO not empty",
                 v);
    }
  }

  // Everything pushed must be able to finish: complete ready ops until none is left.
  void drain() {
    if (pushing_) finish_arrivals(pushing_);
    for (int v = 0; v < kVars; ++v) {
      if (reserved_[v]) push_mark(v);
    }
    check_all();
    for (;;) {
      // Waits handed back begin again (and may push marks), until none is left.
      Joiner* back = nullptr;
      for (const auto& j : joiners_) {
        if (j->on == nullptr) back = j.get();
      }
      if (back) {
        begin(back, true, 0);
        check_all();
        continue;
      }
      if (live_.empty()) break;
      Op* op = pick_ready(0);
      FUZZ_CHECK(op != nullptr, "%zu ops left and none is runnable (lost grant)", live_.size());
      complete_all(op);
      check_all();
    }
    for (int v = 0; v < kVars; ++v) {
      FUZZ_CHECK(vars_[v].word.load() == 0, "var %d not idle after draining", v);
      FUZZ_CHECK(vars_[v].wait_mark == nullptr, "var %d: a wait mark left after draining", v);
    }
    FUZZ_CHECK(joiners_.empty(), "%zu waits never woken after draining", joiners_.size());
  }

  static inline const Op* const kReservation = reinterpret_cast<const Op*>(uintptr_t{1});

  VarSlot vars_[kVars];
  std::vector<Pending> queue_[kVars];  // the model
  bool reserved_[kVars] = {};          // a wait reserved the var; its mark has not arrived
  const VarLink* last_arrival_[kVars] = {};
  uint64_t arrivals_ = 0;
  std::vector<std::unique_ptr<Joiner>> joiners_;
  std::vector<std::unique_ptr<Op>> live_;
  std::vector<OpBlock*> blocks_;
  std::vector<OpBlock*> free_blocks_;
  Op* pushing_ = nullptr;
  int next_id_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::Input in(data, size);
  auto harness = std::make_unique<VarQueueHarness>();
  harness->run(in);
  return 0;
}
