// VarWaits: ordo_wait_for_var and the waits on var deletes, the one object that owns the
// wait-mark protocol on the engine's side (core/var_slot.h, "Wait marks", holds the var's side):
// how a wait begins (its own mark, joining one, or waiting behind one), sleeps, times out and
// leaves, how a mark's op fires and wakes the waits on it, how a reservation whose mark could not
// be pushed is cancelled, and how a wait that outlives its var waits for the var's delete.
#pragma once

#include <cstdint>

#include "core/var_slot.h"
#include "ordo/ordo.h"

namespace ordo {

class Engine;
struct OpBlock;
struct Worker;

class VarWaits {
 public:
  explicit VarWaits(Engine& engine) : engine_(engine) {}
  VarWaits(const VarWaits&) = delete;
  VarWaits& operator=(const VarWaits&) = delete;

  // ordo_wait_for_var(_timeout): timeout_ns nullptr (or past 2^60) waits without a limit; 0 polls.
  ordo_status wait(ordo_var v, const uint64_t* timeout_ns);
  // Runs a wait mark's op (OpKind::kWaitSignal): once when its read is granted, and again when
  // the last reader older than it completes, when it fires and wakes the waits on it.
  void run_mark(OpBlock* op, Worker* self);
  // A var's delete op completes: wakes the waits that wait for it.
  static void delete_completed(VarSlot* v);

 private:
  template <class F>
  ordo_status with_var_locked(ordo_var h, F&& f);
  ordo_status poll(ordo_var h);
  ordo_status begin(ordo_var h, WaitJoiner* w, bool again, VarSlot** slot, uint32_t* deletes_done,
                    VarSlot::WaitStep* step);
  void cancel_reservation(VarSlot* slot);

  Engine& engine_;
};

}  // namespace ordo
