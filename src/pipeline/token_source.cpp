#include "pipeline/token_source.h"

#include <algorithm>
#include <new>

namespace ordo {

Draw TokenSource::next() {
  if (ready_count_ != 0) {  // resumed tokens come first (§3.3.3)
    Draw d = ready_[ready_head_];
    ready_head_ = (ready_head_ + 1) & (ready_.size() - 1);
    --ready_count_;
    return d;
  }
  return Draw{next_id_.load(std::memory_order_relaxed), 0};
}

void TokenSource::add_target(uint64_t target) {
  // A callback that names one target many times must not grow the set without bound: collapse
  // duplicates before the vector would have to grow.
  if (pending_.size() == pending_.capacity() && pending_.size() >= 32) dedupe_pending();
  pending_.push_back(target);
}

void TokenSource::dedupe_pending() {
  std::sort(pending_.begin(), pending_.end());
  pending_.erase(std::unique(pending_.begin(), pending_.end()), pending_.end());
}

TokenSource::Outcome TokenSource::settle(Draw* d) {
  uint64_t n = next_id_.load(std::memory_order_relaxed);
  if (d->token == n) {  // a fresh id is consumed even when the token defers
    ++n;
    next_id_.store(n, std::memory_order_relaxed);
  }
  if (pending_.empty()) {
    accept(d->token);
    return Outcome::kAccepted;
  }
  // Counted once per deferring invocation, before the targets are filtered (§3.4).
  ++d->deferrals;
  dedupe_pending();
  // Valid: not generated yet, or deferred right now. Invalid (dropped): already accepted, the
  // token itself, or resolved and waiting in the ready queue (TF-BUG 4, kept for
  // compatibility). The token is not in deferred_ yet, so naming itself is invalid.
  uint32_t kept = 0;
  for (uint64_t x : pending_) {
    if (x >= n || deferred_.find(x)) {
      wait_for(x, d->token);
      ++kept;
    }
  }
  if (kept == 0) return Outcome::kAgain;
  Deferred& e = deferred_.insert(d->token);
  e.deferrals = d->deferrals;
  e.remaining = kept;
  return Outcome::kDeferred;
}

// Registers `token` as waiting for `target`, after those that registered before it.
void TokenSource::wait_for(uint64_t target, uint64_t token) {
  uint32_t link = free_link_;
  if (link != kNone) {
    free_link_ = links_[link].next;
    links_[link] = Link{token, kNone};
  } else {
    if (links_.size() >= kNone) throw std::bad_alloc();
    links_.push_back(Link{token, kNone});
    link = static_cast<uint32_t>(links_.size() - 1);
  }
  Waiters& w = waiters_.insert(target);
  if (w.tail == kNone) {
    w.head = link;
  } else {
    links_[w.tail].next = link;
  }
  w.tail = link;
}

// `token` passed pipe 0: each token waiting for it has one target fewer; those with none left
// join the ready queue in the order they registered (§3.3.4).
void TokenSource::accept(uint64_t token) {
  Waiters* w = waiters_.find(token);
  if (!w) return;
  uint32_t link = w->head;
  waiters_.erase(token);
  while (link != kNone) {
    const Link l = links_[link];
    links_[link].next = free_link_;
    free_link_ = link;
    link = l.next;
    Deferred* e = deferred_.find(l.token);
    if (e && --e->remaining == 0) {
      push_ready(Draw{l.token, e->deferrals});
      deferred_.erase(l.token);
    }
  }
}

void TokenSource::push_ready(const Draw& d) {
  if (ready_count_ == ready_.size()) {  // full: double the ring, oldest first
    std::vector<Draw> bigger(ready_.empty() ? 16 : ready_.size() * 2);
    for (size_t i = 0; i < ready_count_; ++i) {
      bigger[i] = ready_[(ready_head_ + i) & (ready_.size() - 1)];
    }
    ready_.swap(bigger);
    ready_head_ = 0;
  }
  ready_[(ready_head_ + ready_count_) & (ready_.size() - 1)] = d;
  ++ready_count_;
}

uint64_t TokenSource::end_run(std::vector<uint64_t>* dropped) {
  const uint64_t count = deferred_.size() + ready_count_;
  dropped->clear();
  try {
    dropped->reserve(count);
    deferred_.for_each([&](uint64_t token, const Deferred&) { dropped->push_back(token); });
    for (size_t i = 0; i < ready_count_; ++i) {
      dropped->push_back(ready_[(ready_head_ + i) & (ready_.size() - 1)].token);
    }
    std::sort(dropped->begin(), dropped->end());
  } catch (const std::bad_alloc&) {
    dropped->clear();  // the count is still right; the caller says the ids are missing
  }
  clear_deferrals();
  return count;
}

void TokenSource::clear_deferrals() {
  deferred_.clear();
  waiters_.clear();
  links_.clear();
  free_link_ = kNone;
  ready_head_ = 0;
  ready_count_ = 0;
  pending_.clear();
}

void TokenSource::reset() {
  clear_deferrals();
  next_id_.store(0, std::memory_order_relaxed);
}

}  // namespace ordo
