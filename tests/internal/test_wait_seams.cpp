// Wait races that timing alone hits once in a million runs, forced through the engine's test
// seams (src/engine/test_seams.h). Built with AddressSanitizer over its own copy of the engine
// sources, so that a reference dropped twice is a reported use-after-free, not silent damage.
//
// 1. A var deleted between a wait reserving it for its mark and pushing that mark: the push
//    fails, and the wait that joined the reservation meanwhile must be woken to begin again
//    (Engine::cancel_wait_reservation). Without that wake it slept for good.
// 2. A timed wait that joined another wait's mark times out, and the mark fires before it leaves
//    the mark's list: the mark took it and woke it, so the wait must not drop the reference kept
//    for its waker (it would drop it twice).
#include <ordo/ordo.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "engine/test_seams.h"
#include "internal_check.h"

using internal_test::check;

namespace {

using Clock = std::chrono::steady_clock;

std::string dump(ordo_engine* e) {
  char* buf = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  if (!f) return std::string();
  ordo_engine_dump(e, f);
  std::fclose(f);
  std::string text(buf, len);
  std::free(buf);
  return text;
}

// Polls until `pred` holds or `seconds` pass; true when it held.
template <class P>
bool eventually(P pred, double seconds = 10.0) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  while (!pred()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

struct Deferred {
  std::atomic<ordo_completion> handle{0};
};

int32_t defer_fn(ordo_exec* x, void* ud) {
  ordo_completion c = 0;
  ordo_exec_defer(x, &c);
  static_cast<Deferred*>(ud)->handle.store(c);
  return 0;
}

// A var held by a deferred op (so that waits on it block), on a fresh engine.
struct HeldVar {
  ordo_engine* e = nullptr;
  ordo_var v = 0;
  Deferred d;
  bool ok = false;
  HeldVar() {
    ordo_engine_config cfg;
    ordo_engine_config_init(&cfg);
    cfg.cpu_threads = 2;
    if (ordo_engine_create(&cfg, &e) != ORDO_OK || ordo_var_new(e, &v) != ORDO_OK) return;
    if (ordo_opr_push(e, defer_fn, &d, nullptr, 0, &v, 1, nullptr) != ORDO_OK) return;
    ok = eventually([&] { return d.handle.load() != 0; });
  }
};

struct Result {
  std::atomic<int> status{-1};
  std::atomic<bool> done{false};
};

// --- 1: the reservation's mark fails to push ---------------------------------------------------

struct ReservationRace {
  HeldVar* held;
  std::atomic<bool> fired{false};
  Result second;
  std::thread second_thread;
  bool joined = false;
  ordo_status delete_status = -1;
  std::atomic<bool> seam_done{false};  // the fields above are set
};

void on_reserved(ordo::Seam seam, void* arg) {
  auto* r = static_cast<ReservationRace*>(arg);
  if (seam != ordo::Seam::kWaitReserved || r->fired.exchange(true)) return;
  // This thread (the first wait) has reserved the var. A second wait joins the reservation...
  r->second_thread = std::thread([r] {
    r->second.status.store(ordo_wait_for_var(r->held->e, r->held->v));
    r->second.done.store(true);
  });
  r->joined = eventually([r] {
    return dump(r->held->e).find("being pushed, 1 other waits joined it") != std::string::npos;
  });
  // ...and the var is deleted before the first wait pushes its mark, whose push then fails.
  r->delete_status = ordo_var_delete(r->held->e, r->held->v);
  r->seam_done.store(true);
}

void reservation_whose_mark_fails_to_push() {
  HeldVar held;
  check(held.ok, "set-up: a var held by a deferred op");
  if (!held.ok) return;
  ReservationRace race;
  race.held = &held;
  ordo::set_test_seam(on_reserved, &race);
  Result first;
  std::thread first_thread([&] {
    first.status.store(ordo_wait_for_var(held.e, held.v));
    first.done.store(true);
  });
  check(eventually([&] { return race.seam_done.load(); }), "the first wait reserved the var");
  ordo::set_test_seam(nullptr, nullptr);
  check(race.joined, "the second wait joined the reservation (ordo_engine_dump said so)");
  check(race.delete_status == ORDO_OK, "the delete between the reservation and its push");
  // Both waits now wait for the delete, which waits for the deferred op.
  check(ordo_complete(held.d.handle.load(), 0, nullptr) == ORDO_OK, "the deferred op completes");
  const bool both = eventually([&] { return first.done.load() && race.second.done.load(); });
  check(both,
        "both waits returned once the var's delete finished (the second one was never "
        "woken when the first one's mark failed to push)");
  if (!both) {
    std::fprintf(stderr, "%s", dump(held.e).c_str());
    std::fflush(stderr);
    std::_Exit(1);  // a thread is stuck in the engine: the process cannot end cleanly
  }
  first_thread.join();
  race.second_thread.join();
  check(first.status.load() == ORDO_ERR_INVALID_HANDLE, "the first wait: INVALID_HANDLE");
  check(race.second.status.load() == ORDO_ERR_INVALID_HANDLE, "the second wait: INVALID_HANDLE");
  check(ordo_engine_destroy(held.e) == ORDO_OK, "destroy");
}

// --- 2: a joined wait times out, and the mark fires before it leaves ---------------------------

struct TimeoutRace {
  HeldVar* held;
  Result* marker;  // the untimed wait whose mark the timed one joined
  std::atomic<bool> fired{false};
  bool mark_fired = false;
};

void on_timed_out(ordo::Seam seam, void* arg) {
  auto* r = static_cast<TimeoutRace*>(arg);
  if (seam != ordo::Seam::kWaitTimedOut || r->fired.exchange(true)) return;
  // The timed wait has run out but not yet left the mark's list: fire the mark now. It takes
  // the timed wait from the list and wakes it, then wakes its own waiter.
  ordo_complete(r->held->d.handle.load(), 0, nullptr);
  r->mark_fired = eventually([r] { return r->marker->done.load(); });
}

void joined_wait_times_out_as_its_mark_fires() {
  HeldVar held;
  check(held.ok, "set-up: a var held by a deferred op");
  if (!held.ok) return;
  Result marker;
  std::thread marker_thread([&] {
    marker.status.store(ordo_wait_for_var(held.e, held.v));
    marker.done.store(true);
  });
  check(
      eventually([&] { return dump(held.e).find("a wait mark outstanding") != std::string::npos; }),
      "the untimed wait pushed its mark");
  TimeoutRace race;
  race.held = &held;
  race.marker = &marker;
  ordo::set_test_seam(on_timed_out, &race);
  // Nothing pushed since the mark: this wait joins it, and runs out first.
  const ordo_status timed = ordo_wait_for_var_timeout(held.e, held.v, 20 * 1000 * 1000);
  ordo::set_test_seam(nullptr, nullptr);
  check(race.fired.load(), "the timed wait ran out");
  check(race.mark_fired, "the mark fired before the timed wait left its list");
  check(timed == ORDO_ERR_TIMEOUT, "the timed wait says TIMEOUT", ordo_status_string(timed));
  marker_thread.join();
  check(marker.status.load() == ORDO_OK, "the untimed wait: OK");
  check(ordo_wait_for_all(held.e) == ORDO_OK, "wait_for_all");
  check(ordo_engine_destroy(held.e) == ORDO_OK, "destroy");
}

}  // namespace

int main() {
  for (int round = 0; round < 20; ++round) {
    reservation_whose_mark_fails_to_push();
    joined_wait_times_out_as_its_mark_fires();
    if (internal_test::failed()) break;
  }
  std::printf("wait seams: %s\n",
              internal_test::failed() ? "FAILED" : "2 races x 20 rounds passed");
  return internal_test::failed() ? 1 : 0;
}
