#include "engine/early_release.h"

#include <new>

namespace ordo {

AllocFault EarlyRelease::alloc_fault_for_test;

void EarlyRelease::recorded(OpBlock* op, void* event, void* stream, Handoff* out) {
  std::lock_guard<std::mutex> g(mu_);
  LinkCursor links(op);
  for (uint32_t i = 0; i < op->num_links; ++i) {
    VarLink& l = links.next();
    VarSlot* v = l.var();
    join(v, &l, op, event, stream);
    auto it = fronts_.find(v);
    if (it != fronts_.end()) extend(v, it->second, out);
  }
}

void EarlyRelease::pushed(const VarRef* refs, size_t n, Handoff* out) {
  std::lock_guard<std::mutex> g(mu_);
  for (size_t i = 0; i < n; ++i) {
    auto it = fronts_.find(refs[i].slot);
    if (it != fronts_.end()) extend(refs[i].slot, it->second, out);
  }
}

// The op becomes a recorded member of v's front: where it was granted early, or else (its access
// is active) in stage 0. An op of another device than the front's stays out, so that stage 0
// never counts as the whole of the active accesses while it is active.
void EarlyRelease::join(VarSlot* v, const VarLink* l, OpBlock* op, void* event, void* stream) {
  auto it = fronts_.find(v);
  if (it != fronts_.end()) {
    for (Stage& s : it->second.stages) {
      for (Member& m : s.members) {
        if (m.op == op) {
          m.event = event;
          m.stream = stream;
          return;
        }
      }
    }
  }
  if (l->early()) return;  // granted early, so a member already (above)
  try {
    if (it == fronts_.end()) {
      alloc_fault_for_test.check();
      it = fronts_.emplace(v, Front{op->device_id, {}}).first;
      alloc_fault_for_test.check();
      it->second.stages.push_back(Stage{l->write(), true, {}});
    }
    Front& f = it->second;
    Stage& active = f.stages.front();
    if (f.device != op->device_id || active.write != l->write()) return;
    alloc_fault_for_test.check();
    active.members.push_back(Member{op, const_cast<VarLink*>(l), event, stream});
  } catch (const std::bad_alloc&) {
    // Out of memory: the op stays out of the front. Stage 0 then never counts as the whole of
    // the active accesses while the op is active, so nothing is granted early after it: its
    // successors wait for their real grants, as with early release off.
    if (it != fronts_.end() && it->second.stages.empty()) fronts_.erase(it);
  }
}

void EarlyRelease::extend(VarSlot* v, Front& f, Handoff* out) {
  SpinGuard g(v->push_lock);
  while (extend_once(v, f, out)) {
  }
}

// Grants the group after the front's last stage early, if that stage allows it; true when a
// stage was added (which may allow no more until its members record).
bool EarlyRelease::extend_once(VarSlot* v, Front& f, Handoff* out) {
  Stage& last = f.stages.back();
  if (last.members.empty()) return false;
  for (const Member& m : last.members) {
    if (!m.event) return false;
  }
  if (f.stages.size() == 1) {
    // Stage 0 must be every active access: members are active, so equal counts suffice.
    const bool whole = last.write
                           ? v->writer_active()
                           : !v->writer_active() && v->active_readers() == last.members.size();
    return whole && grant_group(v, f, v->queue_front(), out);
  }
  if (!last.whole) return false;
  VarLink* start = v->queue_after(last.members.back().link);
  if (last.write || !start || start->write()) return grant_group(v, f, start, out);
  // Readers that arrived after the group was granted early join it when the var grants it: they
  // are granted early with it (after the same producers), or the stage stops being whole.
  const Stage& before = f.stages[f.stages.size() - 2];
  for (VarLink* l = start; l && !l->write(); l = v->queue_after(l)) {
    if (!eligible(l, f.device) || !room_for_member(&last) || !grant_early(l, before, out)) {
      last.whole = false;
      return false;
    }
    last.members.push_back(Member{l->op(), l, nullptr, nullptr});  // room reserved: no throw
  }
  return false;
}

// Grants the group that begins at `start` early, after the front's last stage: one writer, or
// the readers up to the next writer (those of them that are GPU ops of the front's device).
// Everything the new stage needs is allocated before any access is granted: out of memory, the
// group is not granted early (or only in part, as when one of its accesses is not eligible).
bool EarlyRelease::grant_group(VarSlot* v, Front& f, VarLink* start, Handoff* out) {
  if (!start) return false;
  Stage next{start->write(), true, {}};
  try {
    if (start->write()) {
      if (!eligible(start, f.device)) return false;
      alloc_fault_for_test.check();
      next.members.push_back(Member{start->op(), start, nullptr, nullptr});
    } else {
      for (VarLink* l = start; l && !l->write(); l = v->queue_after(l)) {
        if (!eligible(l, f.device)) {
          next.whole = false;
          continue;
        }
        alloc_fault_for_test.check();
        next.members.push_back(Member{l->op(), l, nullptr, nullptr});
      }
    }
    if (next.members.empty()) return false;
    alloc_fault_for_test.check();
    f.stages.push_back(Stage{next.write, next.whole, {}});  // keeps references to the others
  } catch (const std::bad_alloc&) {
    return false;
  }
  const Stage& last = f.stages[f.stages.size() - 2];
  Stage& added = f.stages.back();
  for (const Member& m : next.members) {
    if (room_for_member(&added) && grant_early(m.link, last, out)) {
      added.members.push_back(m);  // room reserved: no throw
    } else {
      added.whole = false;
    }
  }
  if (added.members.empty()) {
    f.stages.pop_back();
    return false;
  }
  return true;
}

bool EarlyRelease::room_for_member(Stage* stage) {
  try {
    alloc_fault_for_test.check();
    stage->members.reserve(stage->members.size() + 1);
    return true;
  } catch (const std::bad_alloc&) {
    return false;
  }
}

bool EarlyRelease::eligible(const VarLink* l, uint8_t device) const {
  if (l->mark() || l->early()) return false;
  const OpBlock* op = l->op();
  return op->kind <= OpKind::kLastCallers &&  // a caller's op: pushed, prepared or launched
         op->device_type == ORDO_DEVICE_GPU && op->device_id == device;
}

// The op's access `l` is granted early, after the members of `after` (recorded): their events
// are pinned for its stream to wait for. False, with nothing changed, when memory ran out.
bool EarlyRelease::grant_early(VarLink* l, const Stage& after, Handoff* out) {
  OpBlock* op = l->op();
  StreamManager* gpu = gpu_(ctx_, op->device_id);
  size_t pinned = 0;
  try {
    alloc_fault_for_test.check();
    if (!op->early_waits) op->early_waits = new EarlyWaits;  // an unused one: issue_waits frees
    alloc_fault_for_test.check();
    op->early_waits->waits.reserve(op->early_waits->waits.size() + after.members.size());
    for (const Member& m : after.members) {
      alloc_fault_for_test.check();
      gpu->pin(m.event);
      ++pinned;
    }
  } catch (const std::bad_alloc&) {
    for (size_t i = 0; i < pinned; ++i) gpu->unpin(after.members[i].event);
    return false;
  }
  l->var_bits |= VarLink::kEarlyBit;
  for (const Member& m : after.members) {
    op->early_waits->waits.push_back(EarlyWaits::Wait{m.event, m.stream});  // reserved
  }
  // One reference per access granted early, and the first brings one for the op's completion.
  const int32_t add = op->early_refs.load(std::memory_order_relaxed) == 0 ? 2 : 1;
  op->early_refs.fetch_add(add, std::memory_order_relaxed);
  if (op->wait.fetch_sub(1, std::memory_order_acq_rel) == 1) out->add_ready(op);
  return true;
}

void EarlyRelease::complete_links(OpBlock* op, ErrorRecord* failure, Handoff* out) {
  std::lock_guard<std::mutex> g(mu_);
  LinkCursor links(op);
  for (uint32_t i = 0; i < op->num_links; ++i) {
    const VarLink& l = links.next();
    VarSlot* v = l.var();
    if (failure && l.write()) v->set_error(failure);
    leave(v, op);
    const VarSlot::Completion done = v->complete(l);
    settle(done.granted, out);
    if (done.fired) out->add_ready(done.fired->op());
    auto it = fronts_.find(v);
    if (it == fronts_.end()) continue;
    // Stage 0 empty: its last member was the var's last active access, whose completion granted
    // stage 1 (if any) for real, which is now the active one.
    Front& f = it->second;
    if (f.stages.front().members.empty()) f.stages.pop_front();
    if (f.stages.empty()) {
      fronts_.erase(it);
    } else {
      extend(v, f, out);
    }
  }
}

void EarlyRelease::leave(VarSlot* v, OpBlock* op) {
  auto it = fronts_.find(v);
  if (it == fronts_.end()) return;
  for (Stage& s : it->second.stages) {
    for (auto m = s.members.begin(); m != s.members.end(); ++m) {
      if (m->op == op) {
        s.members.erase(m);
        return;
      }
    }
  }
}

// settle_grants() for the accesses a tracked op's completion granted: one granted early was
// counted then, and now completes the op's early references instead.
void EarlyRelease::settle(VarLink* granted, Handoff* out) {
  while (granted) {
    VarLink* l = granted;
    granted = l->next.load(std::memory_order_relaxed);
    OpBlock* op = l->op();
    if (l->early()) {
      if (op->early_refs.fetch_sub(1, std::memory_order_acq_rel) == 1) out->add_finished(op);
    } else if (op->wait.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      out->add_ready(op);
    }
  }
}

int EarlyRelease::issue_waits(OpBlock* op, void* stream) {
  EarlyWaits* w = op->early_waits;  // set before the op became ready; no lock needed
  if (!w) return 0;
  op->early_waits = nullptr;
  StreamManager* gpu = gpu_(ctx_, op->device_id);
  int error = 0;
  for (const EarlyWaits::Wait& wait : w->waits) {
    if (stream && error == 0 && wait.stream != stream) {
      error = gpu->api()->stream_wait_event(stream, wait.event);
    }
    gpu->unpin(wait.event);
  }
  delete w;
  return error;
}

}  // namespace ordo
