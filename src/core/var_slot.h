// VarSlot: the per-variable dependency queue (the heart of the engine).
//
// State, all guarded by `lock`:
//   active_readers  accesses granted for reading and not yet completed
//   writer_active   a write is granted and not yet completed
//   head..tail      accesses waiting, in push order (intrusive VarLink list)
// Rules: a read is granted at append when nothing waits and no writer is active (so readers
// overlap, and a waiting writer is never overtaken); a write when the var is idle. On release,
// the head of the FIFO is granted: one writer, or every consecutive reader.
//
// A granted access must still decrement its op's wait counter (the op whose counter reaches zero
// is ready). release() does not do that under the lock: the counter lives in another op's block,
// usually in another core's cache, and a miss while holding the lock would stall every pusher of
// this var. It returns the granted links instead, chained through their (now unused) `next`.
#pragma once

#include <cstdint>

#include "core/error_record.h"
#include "core/op_block.h"
#include "exec/spin_lock.h"

namespace ordo {

constexpr uint32_t kGenBits = 24;
constexpr uint32_t kGenMask = (1u << kGenBits) - 1;

struct alignas(64) VarSlot {
  SpinLock lock;
  bool live = false;  // false: free, or deleted (delete op may still be queued)
  bool writer_active = false;
  uint32_t gen = 1;  // 24-bit generation; 0 means retired (never reused)
  uint32_t active_readers = 0;
  uint32_t index = 0;
  VarLink* head = nullptr;
  VarLink* tail = nullptr;
  ErrorRecord* error = nullptr;  // read by grant holders, written under lock at completion

  // Appends an access; returns true when it is granted at once (no op counter touched).
  bool append(VarLink* l) {
    bool grantable = head == nullptr && !writer_active && (!l->write || active_readers == 0);
    if (grantable) {
      take(l);
      return true;
    }
    l->next = nullptr;
    if (tail) {
      tail->next = l;
    } else {
      head = l;
    }
    tail = l;
    return false;
  }

  // Completes one access and grants what becomes runnable. Returns the granted links, chained
  // through `next`; the caller settles them with settle_grants() after unlocking.
  VarLink* release(bool write) {
    if (write) {
      writer_active = false;
    } else {
      --active_readers;
    }
    VarLink* granted = nullptr;
    VarLink** tail_of_granted = &granted;
    while (head != nullptr) {
      VarLink* l = head;
      if (writer_active || (l->write && active_readers != 0)) break;
      head = l->next;
      if (head == nullptr) tail = nullptr;
      take(l);
      l->next = nullptr;
      *tail_of_granted = l;
      tail_of_granted = &l->next;
      if (l->write) break;
    }
    return granted;
  }

  bool idle() const { return head == nullptr && !writer_active && active_readers == 0; }

 private:
  void take(VarLink* l) {
    if (l->write) {
      writer_active = true;
    } else {
      ++active_readers;
    }
  }
};

// Decrements the wait counter of each granted link's op; `on_ready(op)` gets each op whose last
// missing grant this was. Call without holding any var lock.
template <class OnReady>
void settle_grants(VarLink* granted, OnReady&& on_ready) {
  while (granted) {
    VarLink* l = granted;
    granted = l->next;
    OpBlock* op = l->op;
    if (op->wait.fetch_sub(1, std::memory_order_acq_rel) == 1) on_ready(op);
  }
}

}  // namespace ordo
