// What the exported entry points share: the exception barrier, the engine lookup, and the
// checks and defaults of a push's arguments. Included by the files of src/api/ only.
#pragma once

#include <cstring>
#include <exception>
#include <new>

#include "api/engine_registry.h"
#include "api/struct_io.h"
#include "base/foreign_exception.h"
#include "base/last_error.h"
#include "engine/engine.h"
#include "ordo/ordo.h"

namespace ordo {

// No C++ exception crosses the C ABI. `body` gets the public function's name for its messages:
// inside a lambda, __func__ is "operator()". A forced unwind (pthread_exit or cancellation in a
// callback this call ran inline) is no exception of ordo's: the engine has finished the op, and
// it goes on to end the thread (swallowed, glibc would abort the process). Hence no noexcept:
// a forced unwind reaching a noexcept frame calls std::terminate.
template <class F>
ordo_status guarded(const char* fn_name, F&& body) {
  try {
    ordo_status s = body(fn_name);
    if (__builtin_expect(s != ORDO_OK, 0)) name_the_call(fn_name, s);
    return s;
  } catch (const std::bad_alloc&) {
    return fail(ORDO_ERR_NO_MEMORY, "%s: out of memory", fn_name);
  } catch (const std::exception& ex) {
    return fail(ORDO_ERR_INTERNAL, "%s: internal error: %s", fn_name, ex.what());
  } catch (...) {
    if (foreign_exception_in_flight()) throw;  // a forced unwind (base/foreign_exception.h)
    return fail(ORDO_ERR_INTERNAL, "%s: internal error", fn_name);
  }
}

// The one way an entry point that takes an engine starts: inside guarded(), the engine
// resolved (INVALID_ARGUMENT for NULL, INVALID_HANDLE for a pointer ordo never handed out or
// whose engine is gone, INVALID_STATE for one created before a fork() this process came
// from), then `body(engine, fn_name)`.
template <class F>
ordo_status with_engine(const char* fn_name, ordo_engine* e, F&& body) {
  return guarded(fn_name, [&](const char* api) -> ordo_status {
    Engine* engine;
    if (ordo_status s = resolve_engine(e, &engine)) return s;
    if (__builtin_expect(!made_here(slot_of(e)), 0)) return inherited_engine(slot_of(e));
    return body(engine, api);
  });
}

// The engine of the op running on this thread, unless it was created before a fork() (the
// forking thread was inside one of its callbacks): INVALID_STATE then.
inline ordo_status check_op_engine(const OpBlock* op) {
  const EngineSlot* s = slot_for_tag(op->engine->tag());
  return made_here(s) ? ORDO_OK : inherited_engine(s);
}

inline ordo_status null_arg(const char* fn_name, const char* arg) {
  return fail(ORDO_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn_name, arg);
}

// Far above any real op (at most 65,535 distinct vars), and small enough that two counts can
// never wrap around size_t when added.
constexpr size_t kMaxListLength = size_t{1} << 28;

inline ordo_status check_var_list(const char* fn_name, const ordo_var* vars, size_t n,
                                  const char* what) {
  if (n != 0 && !vars) {
    return fail(ORDO_ERR_INVALID_ARGUMENT, "%s: %s is NULL but its count is %zu", fn_name, what, n);
  }
  if (n > kMaxListLength) {
    return fail(ORDO_ERR_INVALID_ARGUMENT, "%s: %s has %zu entries; at most %zu are allowed",
                fn_name, what, n, kMaxListLength);
  }
  return ORDO_OK;
}

inline ordo_push_opts default_push_opts() {
  ordo_push_opts o;
  std::memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.prop = ORDO_PROP_NORMAL;
  o.device_type = ORDO_DEVICE_CPU;
  return o;
}

// Validates fn, lists and opts shared by ordo_opr_push, ordo_opr_new and ordo_pipeline_push; fills
// `spec`. Inlined: it is on every push, and its error messages are built out of line.
[[gnu::always_inline]] inline ordo_status make_spec(const char* fn_name, ordo_fn fn,
                                                    void* user_data, const ordo_var* cv, size_t nc,
                                                    const ordo_var* mv, size_t nm,
                                                    const ordo_push_opts* opts, OpSpec* spec) {
  // One test for the common case of valid arguments; the messages come from the slow path.
  if (!fn || (nc != 0 && !cv) || (nm != 0 && !mv) || (nc | nm) > kMaxListLength) {
    if (!fn) return null_arg(fn_name, "fn");
    if (ordo_status s = check_var_list(fn_name, cv, nc, "const_vars")) return s;
    if (ordo_status s = check_var_list(fn_name, mv, nm, "mutable_vars")) return s;
  }
  spec->fn = fn;
  spec->user_data = user_data;
  if (!opts) return ORDO_OK;  // OpSpec's defaults are the push defaults: nothing to copy
  ordo_push_opts o = default_push_opts();
  {
    if (ordo_status s = read_struct(opts, &o, "ordo_push_opts")) return s;
    if (o.next || o.reserved0) {
      return fail(ORDO_ERR_UNSUPPORTED, "%s: ordo_push_opts.%s must be %s", fn_name,
                  o.next ? "next" : "reserved0", o.next ? "NULL" : "0");
    }
    // What the options alone decide; whether the device exists is the engine's to say (route).
    if (o.prop < ORDO_PROP_NORMAL || o.prop > ORDO_PROP_ASYNC) {
      return fail(ORDO_ERR_INVALID_ARGUMENT, "%s: ordo_push_opts.prop=%d is not an ORDO_PROP_*",
                  fn_name, static_cast<int>(o.prop));
    }
    if (o.device_type != ORDO_DEVICE_CPU && o.device_type != ORDO_DEVICE_GPU) {
      return fail(ORDO_ERR_INVALID_ARGUMENT,
                  "%s: ordo_push_opts.device_type=%d is not an ORDO_DEVICE_*", fn_name,
                  static_cast<int>(o.device_type));
    }
  }
  spec->free_fn = o.free_fn;
  spec->priority = o.priority;
  spec->prop = o.prop;
  spec->device_type = o.device_type;
  spec->device_id = o.device_id;
  spec->name = o.name;
  return ORDO_OK;
}

}  // namespace ordo
