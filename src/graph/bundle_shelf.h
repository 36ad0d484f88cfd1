// BundleShelf: one graph's BundleRuns (engine/bulk_bundle.h), made when the capture ends
// (kRuns of them) and reused launch after launch, so that a launch never allocates. A launch
// that finds none free (kRuns launches of the graph still have members running) pushes its
// members one by one, as any other node.
// A run in flight belongs to its carrier, which finishes after the last of its members, so it
// may come back after the graph is destroyed (destroy waits for members, not carriers: a wait on
// a member's var must be enough to destroy the graph). The shelf therefore outlives the graph
// until the last run out comes back, and frees itself then. Nothing of the graph is read by a
// carrier after its members have finished.
#pragma once

#include <cstdint>

#include "base/spin_lock.h"
#include "engine/bulk_bundle.h"

namespace ordo {

class BundleShelf {
 public:
  // Each run has room for `capacity` members and `workers` slices, runs `members`, and tells
  // `hook` as each member finishes.
  BundleShelf(uint32_t capacity, uint32_t workers, const BundleMember* members, OpHook* hook)
      : capacity_(capacity), workers_(workers), members_(members), hook_(hook) {}
  BundleShelf(const BundleShelf&) = delete;
  BundleShelf& operator=(const BundleShelf&) = delete;

  static constexpr uint32_t kRuns = 2;
  // Makes `runs` runs (when the capture ends). Throws std::bad_alloc (the caller then closes it).
  void stock(uint32_t runs);
  // A free run for a launch, or nullptr when every run is in flight.
  BundleRun* take();
  // A run taken and never posted (the carrier could not be made).
  void give_back(BundleRun* run) { retire(run); }
  // The graph is being destroyed: frees the free runs now, the others as they come back, and
  // the shelf with the last. The caller must not use the shelf afterwards.
  void close();

 private:
  ~BundleShelf();
  static void retire(BundleRun* run);

  const uint32_t capacity_;
  const uint32_t workers_;
  const BundleMember* const members_;
  OpHook* const hook_;
  SpinLock lock_;
  BundleRun* free_ = nullptr;  // linked through next_free
  uint32_t out_ = 0;           // runs taken and not back yet
  bool closed_ = false;
};

}  // namespace ordo
