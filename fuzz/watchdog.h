// A watchdog for calls that must return: an untimed wait the model says will finish, a destroy.
// If one blocks longer than its limit, the watchdog thread prints which call hung and aborts,
// which says more than libFuzzer's generic -timeout (kept as the backstop).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace fuzz {

class Watchdog {
 public:
  // Arms the watchdog for the current scope.
  class Scope {
   public:
    Scope(const char* what, int seconds) { instance().arm(what, seconds); }
    ~Scope() { instance().disarm(); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
  };

 private:
  static Watchdog& instance() {
    static Watchdog* w = new Watchdog();  // never destroyed: its thread lives as long as we do
    return *w;
  }

  Watchdog() {
    std::thread([this] { watch(); }).detach();
  }

  void arm(const char* what, int seconds) {
    what_.store(what, std::memory_order_relaxed);
    seconds_.store(seconds, std::memory_order_relaxed);
    auto now = std::chrono::steady_clock::now().time_since_epoch();
    deadline_ms_.store(
        std::chrono::duration_cast<std::chrono::milliseconds>(now).count() + seconds * 1000LL,
        std::memory_order_release);
  }
  void disarm() { deadline_ms_.store(0, std::memory_order_release); }

  void watch() {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      long long d = deadline_ms_.load(std::memory_order_acquire);
      if (d == 0) continue;
      auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::steady_clock::now().time_since_epoch())
                     .count();
      if (now > d) {
        std::fprintf(stderr,
                     "\n*** ORACLE FAILURE: HANG: %s has not returned after %d s (the model "
                     "says it must)\n",
                     what_.load(), seconds_.load());
        std::fflush(stderr);
        std::abort();
      }
    }
  }

  std::atomic<long long> deadline_ms_{0};
  std::atomic<const char*> what_{""};
  std::atomic<int> seconds_{0};
};

}  // namespace fuzz
