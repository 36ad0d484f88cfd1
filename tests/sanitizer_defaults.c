/*
 * ASan's defaults for the test suite's binary, so that running the ASan build by hand (for
 * example build-asan/tests/ordo_tests --filter=...) behaves as tests/run_sanitizers.sh runs it;
 * ASAN_OPTIONS still sets any option over these.
 *
 * detect_stack_use_after_return=1: the forced-unwind tests (test_forced_unwind.c) end threads
 * with pthread_cancel and pthread_exit inside callbacks. The unwind leaves the poisoned
 * redzones of the frames it skips on the thread's stack, and ASan's own __asan_handle_no_return
 * then trips over them (gcc 12: "CHECK failed: asan_thread.cpp:371 ... kCurrentStackFrameMagic",
 * pipeline_unwind::naive_run_thread_cancelled_in_a_pipe failing every time). With fake stacks
 * the locals live off the thread's stack, and the suite also checks use after return.
 */
#if defined(__SANITIZE_ADDRESS__)
#define ORDO_TESTS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ORDO_TESTS_ASAN 1
#endif
#endif

#ifdef ORDO_TESTS_ASAN
const char* __asan_default_options(void);
const char* __asan_default_options(void) {
  return "detect_stack_use_after_return=1";
}
#else
typedef int ordo_tests_no_asan_here; /* a translation unit must not be empty (ISO C) */
#endif
