// CellStash: the runnable cells of a run that no thread is running yet, oldest first. Every
// line task of the run takes from it and puts into it (Pipeline::drive), so a cell waits here,
// not inside a thread that may be busy in a long callback: any worker that starts a line task
// finds it. A spin lock: the critical sections are two pointer moves.
#pragma once

#include "base/spin_lock.h"
#include "pipeline/grid.h"

namespace ordo {

class CellStash {
 public:
  // Appends `c`; returns whether the stash was empty before.
  bool put(Cell* c) {
    c->next_local = nullptr;
    SpinGuard g(lock_);
    const bool was_empty = head_ == nullptr;
    if (was_empty) {
      head_ = c;
    } else {
      tail_->next_local = c;
    }
    tail_ = c;
    return was_empty;
  }
  // The oldest cell, or nullptr; *more: whether others are left.
  Cell* take(bool* more) {
    SpinGuard g(lock_);
    Cell* c = head_;
    if (c) {
      head_ = c->next_local;
      if (!head_) tail_ = nullptr;
    }
    *more = head_ != nullptr;
    return c;
  }

 private:
  SpinLock lock_;
  Cell* head_ = nullptr;
  Cell* tail_ = nullptr;
};

}  // namespace ordo
