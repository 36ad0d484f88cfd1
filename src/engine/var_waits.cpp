#include "engine/var_waits.h"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>

#include "base/last_error.h"
#include "core/error_record.h"
#include "core/var_refs.h"
#include "engine/engine.h"
#include "engine/test_seams.h"
#include "engine/timeouts.h"

namespace ordo {

// The thread blocked in ordo_wait_for_var, and what it learns. Shared by the waiting thread and
// the signal op: a timed-out waiter leaves, and the op still finds it alive.
struct Waiter : WaitJoiner {
  std::atomic<int32_t> refs{2};
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  bool mark_ran = false;  // the engine's: the wait mark's op ran once (var_slot.h, "Wait marks")
  int32_t code = 0;
  char text[ErrorRecord::kTextMax] = {};
  void drop() {
    if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }
};

namespace {

// What the waiter will report: the var's error, read while the signal op holds its grant.
Waiter* collect_wait_result(OpBlock* op) {
  auto* w = static_cast<Waiter*>(op->internal);
  if (ErrorRecord* e = first_error_of(op)) {
    w->code = e->code;
    std::memcpy(w->text, e->text, sizeof w->text);
  }
  return w;
}

void wake_one(Waiter* w) {
  {
    std::lock_guard<std::mutex> g(w->mutex);
    w->done = true;
  }
  w->cv.notify_all();
  w->drop();
}

// Wakes a list of waits: those on a fired mark, those that joined a reservation whose mark never
// came (retry set: they begin again), or those that waited for a var's delete.
void wake_joiners(WaitJoiner* list) {
  while (list) {
    auto* j = static_cast<Waiter*>(list);
    list = list->next_joiner;  // before the wake: the woken wait may free j
    wake_one(j);
  }
}

// Wakes the waiter and the waits on its mark (`joined`): those that joined it with what it
// learned; those behind it (retry) to begin again.
void wake_waiter(Waiter* w, WaitJoiner* joined) {
  for (WaitJoiner* j = joined; j; j = j->next_joiner) {
    if (j->retry) continue;
    static_cast<Waiter*>(j)->code = w->code;
    std::memcpy(static_cast<Waiter*>(j)->text, w->text, sizeof w->text);
  }
  wake_joiners(joined);
  wake_one(w);
}

}  // namespace

void VarWaits::run_mark(OpBlock* op, Worker* self) {
  VarLink& l = op->link(0);
  auto* waiter = static_cast<Waiter*>(op->internal);
  if (!waiter->mark_ran) {
    // Granted: fire now if nothing older is active, else the last older reader to complete
    // runs this op again (finalize, `fired`) and it fires then.
    waiter->mark_ran = true;
    if (!l.var()->mark_run()) return;
  }
  // Waits that joined the mark: taken before the mark's read is released below.
  WaitJoiner* joined = l.var()->take_fired_joiners();
  Waiter* w = collect_wait_result(op);
  engine_.counts_.count_internal_completion();
  // Release the var before waking the waiter: a wait that returns must leave the var idle
  // behind it, or an immediate wait_for_var_timeout(v, 0) would find this op still there.
  engine_.runner_.finalize(op, nullptr, self);
  wake_waiter(w, joined);
}

void VarWaits::delete_completed(VarSlot* v) {
  wake_joiners(v->finish_delete());
}

// Runs f(v) on the var `h` names under its push lock (no access arrives meanwhile), with a
// push's checks: refused once destroy has begun; INVALID_HANDLE for a foreign, made-up or
// deleted handle (a delete is caught under the lock, where it cannot race).
template <class F>
ordo_status VarWaits::with_var_locked(ordo_var h, F&& f) {
  if (engine_.shutting_down()) return refuse_push(ORDO_ERR_SHUTDOWN);
  VarRefs refs;
  if (ordo_status s = refs.collect(engine_.vars_, engine_.tag_, nullptr, 0, &h, 1)) return s;
  VarSlot* v = refs[0].slot;
  SpinGuard g(v->push_lock);
  if (!v->named_by(refs[0].gen)) return stale_var(engine_.tag_, refs[0]);
  return f(v);
}

// `detail`: the oldest ops still pending on the var (Engine::oldest_pending), or "" for a poll,
// which must stay cheap.
static ordo_status timed_out_waiting(const std::string& detail = std::string()) {
  return fail(ORDO_ERR_TIMEOUT, "ordo_wait_for_var: timed out; ops on the var are still pending%s",
              detail.c_str());
}

// ordo_wait_for_var_timeout(v, 0): looks at the var instead of queueing a wait mark on it, so a
// poll leaves nothing behind (not even a mark, which orders nothing but stays until the ops before
// it finish), allocates nothing and never sleeps.
ordo_status VarWaits::poll(ordo_var h) {
  return with_var_locked(h, [](VarSlot* v) {
    if (!v->idle()) {
      return timed_out_waiting();
    }
    SpinGuard e(v->error_lock);
    if (ErrorRecord* err = v->current_error()) return fail(ORDO_ERR_OP_FAILED, "%s", err->text);
    return ORDO_OK;
  });
}

// How a wait begins on its var (VarSlot::begin_wait, under the var's push lock, with a push's
// checks). *slot: the var's slot, and *deletes_done its count of deletes completed.
// `again`: the wait began before and is beginning again.
ordo_status VarWaits::begin(ordo_var h, WaitJoiner* w, bool again, VarSlot** slot,
                            uint32_t* deletes_done, VarSlot::WaitStep* step) {
  return with_var_locked(h, [&](VarSlot* v) {
    *slot = v;
    *deletes_done = v->deletes_done;
    *step = v->begin_wait(w, again);
    return ORDO_OK;
  });
}

// The push of a wait's mark failed after begin_wait reserved the var for it: no mark comes, so
// the waits that joined the reservation begin again (and meet the same refusal, or reserve).
void VarWaits::cancel_reservation(VarSlot* slot) {
  WaitJoiner* joined;
  {
    SpinGuard g(slot->push_lock);
    joined = slot->cancel_reservation();
  }
  wake_joiners(joined);
}

namespace {

using WaitClock = std::chrono::steady_clock;

// Sleeps until the waiter is woken (true) or, with a timeout, until the deadline (false).
bool sleep_until_woken(Waiter* w, bool timed, WaitClock::time_point deadline) {
  std::unique_lock<std::mutex> lock(w->mutex);
  auto is_done = [w] { return w->done; };
  if (!timed) {
    w->cv.wait(lock, is_done);
    return true;
  }
  return w->cv.wait_until(lock, deadline, is_done);
}

// A wait on a mark's list gives up: true when it left the list (the mark has not fired).
bool leave_wait_list(VarSlot* slot, Waiter* w) {
  SpinGuard g(slot->push_lock);
  return slot->leave_joiners(w);
}

// A wait that began on a live var (its slot, and the deletes of it completed then) found it
// deleted later (beginning again, pushing its mark, or at its deadline): that delete was pushed
// after the call, so it is ordered after every op the wait waits for. A timed wait whose
// deadline comes first says TIMEOUT. Returns `stale` (the var is gone, as the wait's handle check
// has just said) once the delete has completed, never while an op pushed before the call still
// runs.
ordo_status wait_for_the_delete(const Engine& engine, VarSlot* slot, uint32_t deletes_seen,
                                bool timed, bool reported, WaitClock::time_point deadline,
                                ordo_status stale) {
  auto* w = new Waiter();
  bool pending;
  {
    SpinGuard g(slot->push_lock);
    pending = slot->deletes_done == deletes_seen;
    if (pending) {
      w->next_joiner = slot->delete_waits;
      slot->delete_waits = w;
    }
  }
  if (!pending) {
    delete w;
    return stale;
  }
  const bool woken = sleep_until_woken(w, timed, deadline);
  w->drop();
  return woken ? stale : timed_out_waiting(reported ? engine.oldest_pending(slot) : std::string());
}

}  // namespace

// A wait begins (VarSlot::begin_wait): it pushes a wait mark, joins the outstanding one, or
// waits behind it and begins again once it has fired. Beginning again (`again`), it joins any
// mark it finds, since that mark came after the call. Out of time before a new beginning, it
// takes one last look instead, which leaves nothing behind (a poll).
ordo_status VarWaits::wait(ordo_var v, const uint64_t* timeout_ns) {
  if (engine_.called_from_inside()) {
    return fail(ORDO_ERR_WOULD_DEADLOCK,
                "ordo_wait_for_var called from inside an op of the same engine could wait for "
                "itself; push a follow-up op that reads the var instead");
  }
  timeout_ns = finite_or_null(timeout_ns);
  if (timeout_ns && *timeout_ns == 0) return poll(v);
  const bool timed = timeout_ns != nullptr;
  const bool reported = worth_a_report(timeout_ns);
  const WaitClock::time_point deadline =
      timed ? WaitClock::now() + std::chrono::nanoseconds(*timeout_ns) : WaitClock::time_point{};
  VarSlot* first_slot = nullptr;  // set once the wait has begun on a live var
  uint32_t deletes_seen = 0;
  // A stale handle after the wait began: the var has been deleted since.
  auto finish = [&](ordo_status s) {
    if (s != ORDO_ERR_INVALID_HANDLE || !first_slot) return s;
    return wait_for_the_delete(engine_, first_slot, deletes_seen, timed, reported, deadline, s);
  };
  for (bool again = false;; again = true) {
    if (again && timed && WaitClock::now() >= deadline) return finish(poll(v));
    auto* w = new Waiter();
    VarSlot* slot = nullptr;
    uint32_t deletes_done = 0;
    VarSlot::WaitStep step = VarSlot::kPushMark;
    if (ordo_status s = begin(v, w, again, &slot, &deletes_done, &step)) {
      delete w;
      return finish(s);
    }
    if (!again) {
      first_slot = slot;
      deletes_seen = deletes_done;
    }
    // The wait mark, a read (var_slot.h): it waits for the readers before it as well, and holds
    // up nothing after it.
    if (step == VarSlot::kPushMark) {
      hit_seam(Seam::kWaitReserved);
      if (ordo_status s =
              engine_.push_.push_internal(OpKind::kWaitSignal, v, VarLink::kMarkBit, w)) {
        cancel_reservation(slot);
        delete w;
        return finish(s);
      }
    }
    const bool woken = sleep_until_woken(w, timed, deadline);
    if (!woken) hit_seam(Seam::kWaitTimedOut);
    if (!woken && step != VarSlot::kPushMark && leave_wait_list(slot, w)) {
      w->drop();  // the reference kept for whoever wakes it: nobody will
    }
    const bool retry = woken && w->retry;
    ordo_status s = ORDO_OK;
    if (!woken) {
      s = timed_out_waiting(reported ? engine_.oldest_pending(slot) : std::string());
    } else if (!retry && w->code != 0) {
      s = fail(ORDO_ERR_OP_FAILED, "%s", w->text);
    }
    w->drop();
    if (!retry) return s;
  }
}

}  // namespace ordo
