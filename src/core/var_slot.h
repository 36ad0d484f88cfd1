// VarSlot: the per-variable dependency queue (the heart of the engine).
//
// Pushers and workers run on different cores, and every cache line both of them write crosses
// between cores (a round trip costs about a push's time). So the slot is split by who writes what:
//
//   line 0, written by pushers:  push_lock, live, gen, read_epoch, last_arrival  and  `word`,
//                                one atomic 64-bit state; also the waits on the var's delete
//                                (deletes_done, delete_waits), which only a delete touches
//   line 1, written by workers:  the private FIFO (fifo_head..fifo_tail) and the error state;
//                                also the wait mark's state (wait_mark, its count, the waits
//                                on it), which only waits and marks touch
//
// `word` packs the var's whole shared state so that one CAS changes it:
//   bits 0-1   mode: kIdle (nothing active or waiting), kShared (only readers active, nothing
//              waiting: a new reader joins at once), kOwned (anything else)
//   bit  2     kWriter: a writer is active (kOwned only)
//   bit  3     kSplit: a granted wait mark is counting down the readers older than it
//   bits 4-47  the inbox: the youngest waiting VarLink of the current inbox generation (links
//              are 16-byte aligned, and user-space addresses on x86-64 and arm64 Linux fit in
//              48 bits)
//   bit  48    kSplitOld: while kSplit, the epoch of the readers it counts (1: kEpochBit)
//   bits 49-63 the number of active readers
//
// Arrival (a push, under push_lock, so pushers of one var are serialized): one CAS. Idle, or
// shared and a reader: granted at once. Otherwise the link joins the inbox: the first link of an
// inbox generation is recorded in `inbox_oldest`, and each later one is linked from its
// predecessor's `next` (forward order, as in an MCS queue) right after the CAS.
//
// Completion: in kShared a reader just decrements. Otherwise the thread that completes the
// last active access becomes the var's only *processor*: it owns the private FIFO, takes the
// whole inbox generation in one CAS (granting its oldest link in the same CAS when that is a
// writer), appends it to the FIFO as a segment without walking it, and grants the FIFO head:
// one writer, or the leading readers (with the readers of younger inbox generations, up to the
// next writer). A writer that completes with another writer at the FIFO
// head hands its grant straight on without touching `word`: a chain of writes pays for `word`
// once per inbox generation, not once per op, while the pusher keeps appending on its own core.
// The processor follows `next` only as it grants; if a pusher has published a link but not yet
// written its predecessor's `next`, the processor waits for that store (a few instructions).
//
// A granted access must still decrement its op's wait counter; complete() returns the granted
// links chained through `next`, and settle_grants() does the decrements.
//
// Wait marks (ordo_wait_for_var). A wait must return once every access pushed before it has
// completed, and must order nothing after it (SPEC 2.3): a reader pushed after the wait runs
// beside the readers pushed before it. So the wait's mark is a *read* access (a link with
// kMarkBit), granted with the readers around it so that it never holds up a later reader, that
// is not released when it is granted but once the readers older than it in its group have
// completed. Those are told apart from the younger ones by the read epoch: the mark flips
// `read_epoch` as it arrives, and every access records the epoch it arrived in, in its link.
// When the mark is granted (at once if only readers are active, or by the processor together
// with the queued readers around it), kSplit is set, with kSplitOld naming the older readers'
// epoch, and wait_mark_count holds the older readers still active, plus one for the mark's own
// run. Every reader that completes while kSplit is set, with that epoch, counts it down (the
// split and its epoch are seen in the completion's one CAS: an epoch read afterwards could
// already be a later mark's), and whoever takes it to zero ends the split and fires the mark
// (complete() returns it as `fired`). Everything older than a granted mark has completed except
// those readers (a group is granted only once nothing is active), so the count is exact. One
// mark per var at a time (begin_wait). A wait that comes while one is outstanding, with nothing
// pushed on the var since (`last_arrival` is the mark: the same thread polling with short
// timeouts), waits for exactly what that mark waits for, and joins it without arriving here.
// So does a wait that finds the var reserved for a mark still to come, which will come after
// it. After other accesses, a wait waits *behind* the mark: woken when the mark fires, it begins
// again, and pushes a mark of its own (or joins whatever mark it finds then, which came after
// its call). Its mark then counts what is left, and also the ops other threads pushed on the
// var while it waited behind: a wait made at that later moment would wait for them too. Those
// pushes overlap the call, and pushes are ordered only among themselves (SPEC 2.4), so
// nothing is broken; but such a wait returns later, by however long those ops take, without
// bound (and never, if one of them waits for the waiting thread). What the others pay: an arrival
// ORs the epoch into its link and records itself in last_arrival, and a reader's completion tests
// kSplit in the word it has just CASed.
#pragma once

#include <atomic>
#include <cstdint>

#include "base/prefetch.h"
#include "base/spin_lock.h"
#include "core/error_record.h"
#include "core/op_block.h"

namespace ordo {

// A wait that waits on a var's outstanding wait mark instead of pushing its own (the engine's
// Waiter): it is woken when that mark fires. `retry`: it waited *behind* the mark (something
// arrived on the var after the mark and before the wait), or joined a reservation whose mark
// never came, so once woken it begins again; else it joined the mark, whose result is its own.
struct WaitJoiner {
  WaitJoiner* next_joiner = nullptr;
  bool retry = false;
};

struct alignas(64) VarSlot {
  static constexpr uint64_t kModeMask = 3;
  static constexpr uint64_t kIdle = 0;
  static constexpr uint64_t kShared = 1;
  static constexpr uint64_t kOwned = 2;
  static constexpr uint64_t kWriter = 4;
  static constexpr uint64_t kSplit = 8;
  static constexpr uint64_t kInboxMask = 0x0000FFFFFFFFFFF0ull;
  static constexpr uint64_t kSplitOld = uint64_t{1} << 48;
  static constexpr int kCountShift = 49;
  static constexpr uint64_t kOneReader = uint64_t{1} << kCountShift;
  static constexpr uint64_t kMaxReaders = 0x7FFF;
  static_assert(alignof(VarLink) > (kModeMask | kWriter | kSplit),
                "flags fit below a link's alignment");

  // What complete() hands back: the accesses it granted (chained through `next`), and a wait
  // mark that this completion released (its op must now run again, and fires).
  struct Completion {
    VarLink* granted;
    VarLink* fired;
  };

  // --- line 0: pushers ---
  // Orders pushers (two-phase locking across an op's vars). A thread completing an op takes it
  // only as a wait mark fires and as the var's delete completes: never for an ordinary op.
  SpinLock push_lock;
  bool live = false;  // false: free, or deleted (its delete op may still be queued)
  uint32_t gen = 1;   // 24-bit generation; 0 means retired (never reused)
  uint32_t index = 0;
  std::atomic<uint64_t> word{0};
  VarLink* inbox_oldest = nullptr;  // the first link of the current inbox generation
  // 0 or VarLink::kEpochBit: flipped by each wait mark's arrival. Pushers only, under push_lock
  // (a completion reads the epoch its split counts from the word, kSplitOld, in the same CAS
  // that sees kSplit: read from here afterwards, it could already be a later mark's).
  uintptr_t read_epoch = 0;
  VarLink* last_arrival = nullptr;  // the youngest access to arrive (pushers, under push_lock)
  // Deletes of this slot completed, and waits that began while the var was live and found it
  // deleted later (beginning again, pushing their mark, or looking at their deadline): they are
  // woken once the delete has completed (finish_delete()), which is ordered after everything
  // they wait for. Both under push_lock; rare.
  uint32_t deletes_done = 0;
  WaitJoiner* delete_waits = nullptr;

  // --- line 1: the processor (the thread completing the last active access) ---
  alignas(64) VarLink* fifo_head = nullptr;
  VarLink* fifo_tail = nullptr;
  std::atomic<ErrorRecord*> error{nullptr};  // set by writers at completion, under error_lock
  SpinLock error_lock;                       // also taken by ordo_var_get_error
  // The outstanding wait mark (under push_lock: set by its pusher, cleared as it fires) and,
  // once it is granted, what it still waits for (see "Wait marks"). Signed: an older reader
  // may count down before the mark's grant has added its share.
  VarLink* wait_mark = nullptr;
  std::atomic<int64_t> wait_mark_count{0};
  // Waits on the outstanding mark (a stack, under push_lock: waits join it and leave it there,
  // and end_split() takes it there as the mark fires), and what end_split() took, for the mark's
  // op to wake (no other split can end first: the mark is older than any later mark, which
  // therefore waits for it).
  WaitJoiner* joiners = nullptr;
  WaitJoiner* fired_joiners = nullptr;

  // wait_mark while the wait that reserved the var (begin_wait) pushes its mark. Never a link:
  // links are 16-byte aligned.
  static VarLink* reserved_mark() { return reinterpret_cast<VarLink*>(uintptr_t{1}); }

  // Whether the handle generation `g` still names this var (caller holds push_lock).
  bool named_by(uint32_t g) const { return live && gen == g; }
  // How a wait (ordo_wait_for_var, not a poll) begins on this var; caller holds push_lock.
  //   kPushMark:  no mark is outstanding: the var is reserved for the caller's mark, which the
  //               caller pushes now (or, if that push fails, cancel_reservation()).
  //   kJoined:    j joined the outstanding mark, which waits for everything the wait must wait
  //               for, so the mark's result is j's: nothing arrived since the mark; or the var is
  //               reserved for a mark still to come; or `again`, a wait beginning again, whose
  //               call came before any mark it can find now (the one it began behind is gone).
  //   kBehind:    j waits behind the outstanding mark, with other accesses arrived since:
  //               j->retry, woken when the mark fires, begins again. A second mark on the var
  //               would need counts per epoch that the state word has no room for; once the mark
  //               has fired, everything before it has completed, and the wait's own mark then
  //               counts what is left.
  enum WaitStep { kPushMark, kJoined, kBehind };
  WaitStep begin_wait(WaitJoiner* j, bool again) {
    VarLink* m = wait_mark;
    if (!m) {
      wait_mark = reserved_mark();
      return kPushMark;
    }
    j->retry = m != reserved_mark() && !again && m != last_arrival;
    j->next_joiner = joiners;
    joiners = j;
    return j->retry ? kBehind : kJoined;
  }
  // A wait on the mark's list (joined, or behind it) gives up (caller holds push_lock): it
  // leaves the list, unless the mark has fired and taken it. Else threads polling with short
  // timeouts would leave one waiter per expired wait on the list until the mark fires. True: it
  // left, and nobody will wake it.
  bool leave_joiners(WaitJoiner* j) {
    for (WaitJoiner** at = &joiners; *at; at = &(*at)->next_joiner) {
      if (*at == j) {
        *at = j->next_joiner;
        return true;
      }
    }
    return false;
  }
  // The push of the reserved mark failed (caller holds push_lock): the var carries no mark.
  // Returns the waits that joined the reservation, to wake (retry set): each begins again.
  WaitJoiner* cancel_reservation() {
    if (wait_mark != reserved_mark()) return nullptr;
    WaitJoiner* joined = joiners;
    joiners = nullptr;
    for (WaitJoiner* j = joined; j; j = j->next_joiner) j->retry = true;
    wait_mark = nullptr;
    return joined;
  }
  // The var's delete op completes: returns the waits to wake (see delete_waits).
  WaitJoiner* finish_delete() {
    SpinGuard g(push_lock);
    ++deletes_done;
    WaitJoiner* w = delete_waits;
    delete_waits = nullptr;
    return w;
  }
  // For the fired mark's op: the waits that joined it.
  WaitJoiner* take_fired_joiners() {
    WaitJoiner* j = fired_joiners;
    fired_joiners = nullptr;
    return j;
  }

  // Adds an access (caller holds push_lock). True when it is granted at once.
  bool arrive(VarLink* l) {
    if (__builtin_expect(l->mark(), 0)) return arrive_wait_mark(l);
    return enqueue<false>(l, 0);
  }

  // The mark's op runs once its read is granted: true when nothing older is active any more
  // (the split is then over and the op fires now); false when an older reader will fire it.
  bool mark_run() {
    if (wait_mark_count.fetch_sub(1, std::memory_order_acq_rel) != 1) return false;
    end_split();
    return true;
  }

  // Completes one access; returns the links granted as a result (chained through `next`) and a
  // wait mark it released.
  // Always inlined: a call cost every op's completion 27 instructions (callgrind), which the
  // compiler chose once a graph bundle's members became a third caller.
  __attribute__((always_inline)) Completion complete(const VarLink& l) {
    if (l.write()) {
      if (fifo_head && fifo_head->write()) return {pop(), nullptr};  // the grant passes on
      return {process(true), nullptr};
    }
    uint64_t w = word.load(std::memory_order_relaxed);
    for (;;) {
      uint64_t next;
      if ((w & kModeMask) == kShared) {
        next = (w >> kCountShift) == 1 ? kIdle : w - kOneReader;
      } else {
        next = w - kOneReader;
      }
      if (word.compare_exchange_weak(w, next, std::memory_order_acq_rel,
                                     std::memory_order_relaxed)) {
        // A reader older than a granted mark (which is active: this is not the last reader).
        if (__builtin_expect((w & kSplit) != 0, 0) && l.epoch() == split_epoch(w)) {
          return {nullptr, older_reader_done()};
        }
        bool last = (next & kModeMask) == kOwned && (next >> kCountShift) == 0;
        return {last ? process(false) : nullptr, nullptr};
      }
    }
  }

  // For early release (engine/early_release.*): the var's queue as it stands. The caller holds
  // push_lock (no pusher is linking), and no completion of this var's accesses can be
  // processing it: every active access is one whose completion the caller's lock excludes.
  // The oldest waiting access, or nullptr.
  VarLink* queue_front() const {
    if (fifo_head) return fifo_head;
    return inbox(word.load(std::memory_order_acquire)) ? inbox_oldest : nullptr;
  }
  // The waiting access after `l` (a waiting access), or nullptr.
  VarLink* queue_after(const VarLink* l) const {
    if (VarLink* n = l->next.load(std::memory_order_acquire)) return n;
    // The FIFO's tail was the youngest of an inbox generation: the current one follows it.
    if (l != fifo_tail) return nullptr;
    return inbox(word.load(std::memory_order_acquire)) ? inbox_oldest : nullptr;
  }
  // Active readers, and whether a writer is active.
  uint64_t active_readers() const { return word.load(std::memory_order_acquire) >> kCountShift; }
  bool writer_active() const { return (word.load(std::memory_order_acquire) & kWriter) != 0; }

  // Nothing active and nothing waiting: every access pushed so far has completed (and set the
  // error it leaves, which it does before releasing).
  bool idle() const { return (word.load(std::memory_order_acquire) & kModeMask) == kIdle; }
  // Whether an access arriving now would be granted at once (caller holds push_lock, so no
  // arrival can change that before the caller's own: completions only free the var further).
  // arrive()'s test (enqueue() writes it out), without arriving: idle, or only readers active
  // and nothing waiting for a reader. A graph's bundle joins a member only then
  // (engine/bulk_bundle.h).
  bool grants_now(bool write) const {
    const uint64_t w = word.load(std::memory_order_acquire);
    const uint64_t mode = w & kModeMask;
    return mode == kIdle || (mode == kShared && !write && (w >> kCountShift) < kMaxReaders);
  }
  ErrorRecord* current_error() const { return error.load(std::memory_order_acquire); }
  // Replaces the error (taking a reference to r, which may be nullptr). Caller holds a write
  // grant, so no op reads it meanwhile; error_lock orders it with ordo_var_get_error.
  void set_error(ErrorRecord* r) {
    SpinGuard g(error_lock);
    ErrorRecord* old = error.load(std::memory_order_relaxed);
    error.store(ErrorRecord::retain(r), std::memory_order_release);
    ErrorRecord::release(old);
  }

 private:
  static VarLink* inbox(uint64_t w) { return reinterpret_cast<VarLink*>(w & kInboxMask); }
  // The word's bits of a split that counts the readers of epoch `older`, and back.
  static uint64_t split(uintptr_t older) { return kSplit | (older ? kSplitOld : 0); }
  static uintptr_t split_epoch(uint64_t w) { return (w & kSplitOld) ? VarLink::kEpochBit : 0; }

  // arrive()'s one CAS. kMark: a wait mark, which starts its split (`split_if_granted`, the word
  // bits from become_wait_mark) when it is granted at once; a separate instance, so that the
  // other accesses pay nothing for it.
  template <bool kMark>
  __attribute__((always_inline)) bool enqueue(VarLink* l, uint64_t split_if_granted) {
    l->var_bits |= read_epoch;
    last_arrival = l;
    l->next.store(nullptr, std::memory_order_relaxed);
    // Acquire: a processor reads inbox_oldest before the CAS that empties the inbox; seeing that
    // CAS orders our write of inbox_oldest after its read.
    uint64_t w = word.load(std::memory_order_acquire);
    for (;;) {
      uint64_t mode = w & kModeMask;
      uint64_t next;
      VarLink* prev = nullptr;
      bool granted = true;
      // The grant test is grants_now()'s, written out: sharing one helper cost the push path
      // 4-16 instructions per op (callgrind, per_device B and D, 2026-11-27). Keep them alike.
      if (mode == kIdle) {
        next = l->write() ? (kOwned | kWriter) : (kShared | kOneReader | split_if_granted);
      } else if (mode == kShared && !l->write() && (w >> kCountShift) < kMaxReaders) {
        next = (w + kOneReader) | split_if_granted;
      } else {
        prev = inbox(w);
        if (!prev) inbox_oldest = l;  // only this pusher writes it while the inbox is empty
        next = (w & ~(kInboxMask | kModeMask)) | kOwned | reinterpret_cast<uintptr_t>(l);
        granted = false;
      }
      if (word.compare_exchange_weak(w, next, std::memory_order_acq_rel,
                                     std::memory_order_acquire)) {
        if (prev) prev->next.store(l, std::memory_order_release);
        if (kMark && granted && split_if_granted != 0) {
          // Every reader active before the mark is older than it, plus one for its own run.
          const int64_t older = static_cast<int64_t>(w >> kCountShift);
          wait_mark_count.fetch_add(older + 1, std::memory_order_acq_rel);
        }
        return granted;
      }
    }
  }

  // Out of line: waits are rare, and the push's loop stays as small as it was.
  __attribute__((noinline)) bool arrive_wait_mark(VarLink* m) {
    return enqueue<true>(m, become_wait_mark(m));
  }

  // A wait mark arrives (caller holds push_lock, and reserved the var for it: begin_wait()).
  // It becomes the var's mark (the waits queued behind the reservation stay queued behind it)
  // and flips the read epoch, so that the accesses after it record the other one; returns the
  // word bits of the split it starts if it is granted at once (beside active readers, all older
  // than it).
  uint64_t become_wait_mark(VarLink* m) {
    wait_mark = m;
    const uintptr_t older = read_epoch;
    read_epoch = older ^ VarLink::kEpochBit;
    return split(older);
  }

  // A reader older than the granted mark completed: the mark fires when it was the last.
  VarLink* older_reader_done() {
    if (wait_mark_count.fetch_sub(1, std::memory_order_acq_rel) != 1) return nullptr;
    return end_split();
  }

  // Nothing older than the mark is active: take its waits, clear kSplit, and let the next wait
  // add its mark, all under push_lock, where waits begin (so none finds the mark half gone).
  // Rare (once per mark), and the lock is only ever held for a few instructions.
  VarLink* end_split() {
    SpinGuard g(push_lock);
    VarLink* m = wait_mark;
    fired_joiners = joiners;
    joiners = nullptr;
    word.fetch_and(~(kSplit | kSplitOld), std::memory_order_acq_rel);
    wait_mark = nullptr;
    return m;
  }

  // Removes the FIFO head. The head's successor may still be in flight from its pusher.
  VarLink* pop() {
    VarLink* l = fifo_head;
    if (l == fifo_tail) {
      fifo_head = fifo_tail = nullptr;
    } else {
      VarLink* n;
      for (int spins = 0; (n = l->next.load(std::memory_order_acquire)) == nullptr; ++spins) {
        if (spins < 64) {
          cpu_relax();
        } else {
          sched_yield();  // the pusher was preempted between its CAS and this store
        }
      }
      fifo_head = n;
    }
    l->next.store(nullptr, std::memory_order_relaxed);
    return l;
  }

  // Appends a taken inbox generation [oldest .. youngest] to the FIFO, without walking it. The
  // FIFO's old tail was the youngest of an earlier generation: no pusher writes its `next`.
  void append_segment(VarLink* oldest, VarLink* youngest) {
    if (fifo_tail) {
      fifo_tail->next.store(oldest, std::memory_order_relaxed);
    } else {
      fifo_head = oldest;
    }
    fifo_tail = youngest;
  }

  // The processor's loop: nothing is active; grant what comes next, or go idle. `holding_w`:
  // the caller is the completing writer, whose kWriter bit is still set.
  // Always inlined into complete(), as it was while complete() had one caller (see there).
  __attribute__((always_inline)) VarLink* process(bool holding_w) {
    for (;;) {
      if (fifo_head) {
        if (fifo_head->write()) {
          if (!holding_w) word.fetch_or(kWriter, std::memory_order_acq_rel);
          return pop();
        }
        return grant_readers(holding_w);
      }
      uint64_t w = word.load(std::memory_order_acquire);
      VarLink* youngest = inbox(w);
      if (!youngest) {
        if (word.compare_exchange_weak(w, kIdle, std::memory_order_acq_rel,
                                       std::memory_order_relaxed)) {
          return nullptr;
        }
        continue;
      }
      // The inbox is not empty and only this processor empties it, so inbox_oldest is this
      // generation's first link. A writer there is granted in the same CAS that takes the inbox.
      VarLink* oldest = inbox_oldest;
      bool writer = oldest->write();
      uint64_t next = writer ? ((w & ~kInboxMask) | kWriter) : (w & ~kInboxMask);
      if (!word.compare_exchange_weak(w, next, std::memory_order_acq_rel,
                                      std::memory_order_relaxed)) {
        continue;
      }
      append_segment(oldest, youngest);
      if (writer) return pop();
    }
  }

  // Grants the readers at the FIFO head together, releasing the writer bit if held. If nothing
  // else waits, the var turns kShared so that later readers join without queueing.
  VarLink* grant_readers(bool holding_w) {
    VarLink* granted = nullptr;
    VarLink* granted_tail = nullptr;
    uint64_t k = 0;
    int64_t older_than_mark = -1;  // a wait mark among them: the readers granted before it
    uintptr_t older_epoch = 0;     // and their epoch
    uint64_t splitting = 0;        // the split's word bits, once its count is added
    for (;;) {
      while (fifo_head && !fifo_head->write() && k < kMaxReaders) {
        VarLink* l = pop();
        if (__builtin_expect(l->mark(), 0)) {
          older_than_mark = static_cast<int64_t>(k);
          older_epoch = l->epoch() ^ VarLink::kEpochBit;
        }
        if (granted_tail) {
          granted_tail->next.store(l, std::memory_order_relaxed);
        } else {
          granted = l;
        }
        granted_tail = l;
        ++k;
      }
      // Nothing was active before this group, so the readers older than a mark in it are
      // exactly those granted before it here; none of them runs before settle_grants(), later.
      if (__builtin_expect(older_than_mark >= 0 && splitting == 0, 0)) {
        wait_mark_count.fetch_add(older_than_mark + 1, std::memory_order_acq_rel);
        splitting = split(older_epoch);
      }
      if (publish_group(holding_w, k, splitting)) return granted;
    }
  }

  // grant_readers()'s end: the group of k readers becomes the var's active accesses. Readers of
  // a younger inbox generation join the group first when no write comes between: else a writer
  // followed by a stream of readers would run them in waves (found by fuzz_var_queue), and a
  // reader that arrived while the group was being granted would wait for the group's readers:
  // if one of them defers, for as long as its caller takes to complete it, possibly never
  // (found by fuzz_graph_replay). So the inbox is looked at again whenever the word's CAS
  // fails. False: readers were taken from the inbox into the FIFO, to pop first. As in
  // process(), only this processor empties the inbox.
  bool publish_group(bool holding_w, uint64_t k, uint64_t splitting) {
    uint64_t w = word.load(std::memory_order_acquire);
    for (;;) {
      VarLink* youngest = inbox(w);
      if (!fifo_head && youngest && k < kMaxReaders) {
        // Read before the CAS: once the inbox is empty, the next pusher rewrites inbox_oldest.
        VarLink* oldest = inbox_oldest;
        if (!oldest->write()) {
          if (word.compare_exchange_weak(w, w & ~kInboxMask, std::memory_order_acq_rel,
                                         std::memory_order_acquire)) {
            append_segment(oldest, youngest);
            return false;
          }
          continue;
        }
      }
      uint64_t next;
      if (!fifo_head && !youngest) {
        next = kShared | (k << kCountShift);
      } else {
        next = (holding_w ? (w & ~kWriter) : w) + (k << kCountShift);
      }
      if (word.compare_exchange_weak(w, next | splitting, std::memory_order_acq_rel,
                                     std::memory_order_acquire)) {
        return true;
      }
    }
  }
};

// The error of the first of the op's vars that carries one (nullptr: none).
inline ErrorRecord* first_error_of(OpBlock* op) {
  // Safe without a lock: the op holds a grant on each var, and errors change only when the
  // holder of a write grant completes, which excludes ours.
  ErrorRecord* e = nullptr;
  for_each_link(op, [&e](VarLink& l) { return (e = l.var()->current_error()) != nullptr; });
  return e;
}

// Decrements the wait counter of each granted link's op; `on_ready(op)` gets each op whose last
// missing grant this was.
template <class OnReady>
void settle_grants(VarLink* granted, OnReady&& on_ready) {
  // Each counter sits on a line its pusher wrote, and on x86 a read-modify-write waits for all
  // earlier loads: fetched one by one, a group of readers would pay its misses in series.
  if (granted && granted->next.load(std::memory_order_relaxed)) {
    for (VarLink* l = granted; l; l = l->next.load(std::memory_order_relaxed)) {
      prefetch_for_write(&l->op()->wait);
    }
  }
  while (granted) {
    VarLink* l = granted;
    granted = l->next.load(std::memory_order_relaxed);
    OpBlock* op = l->op();
    if (op->wait.fetch_sub(1, std::memory_order_acq_rel) == 1) on_ready(op);
  }
}

}  // namespace ordo
