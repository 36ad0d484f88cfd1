// Telling a forced unwind from a C++ exception inside catch (...).
//
// pthread_exit and pthread_cancel end a thread by unwinding its stack with a "forced unwind",
// which C++ code may catch but must rethrow (swallowed, glibc aborts the process: "FATAL:
// exception not rethrown"). The usual way to tell it apart, catch (abi::__forced_unwind&),
// binds a reference to the null object that __cxa_begin_catch gives for an exception that is
// not C++, and gcc's UBSan (-fsanitize=null) aborts on that binding. So catch (...) and ask:
// std::current_exception() is empty exactly when the exception in flight is not a C++ one
// (libstdc++ cannot count references to those): a forced unwind, or another language's
// unwind (a Rust panic through an "C-unwind" function). Both must go on unwinding.
#pragma once

#include <exception>

namespace ordo {

// Only inside a catch handler. Never throws.
inline bool foreign_exception_in_flight() noexcept {
  return !std::current_exception();
}

}  // namespace ordo
