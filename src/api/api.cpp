// The exported C functions: argument checks, struct versioning, the exception barrier, and a
// call into the engine. Nothing here knows how dependencies are tracked.
#include <cinttypes>
#include <cstring>
#include <exception>
#include <new>

#include "api/engine_registry.h"
#include "api/entry.h"
#include "api/graph_entry.h"
#include "api/struct_io.h"
#include "base/last_error.h"
#include "core/handle_bits.h"
#include "device/device_count.h"
#include "engine/deferred_calls.h"
#include "engine/engine.h"
#include "engine/push_resolved.h"
#include "ordo/ordo.h"

using namespace ordo;

namespace {

// An output struct the library fills: the caller must say how large its copy is.
ordo_status check_out_struct(const char* fn_name, const char* arg, uint32_t size, const char* how) {
  if (struct_size_ok(size)) return ORDO_OK;
  if (size > kMaxStructSize) {
    return fail(ORDO_ERR_INVALID_ARGUMENT,
                "%s: %s->struct_size is %u, more than %u: the struct was not initialized (%s)",
                fn_name, arg, static_cast<unsigned>(size), static_cast<unsigned>(kMaxStructSize),
                how);
  }
  return fail(ORDO_ERR_INVALID_ARGUMENT, "%s: %s->struct_size is not set (%s)", fn_name, arg, how);
}

ordo_engine_config default_engine_config() {
  ordo_engine_config c;
  std::memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  c.kind = ORDO_ENGINE_DEFAULT;
  return c;
}

}  // namespace

extern "C" {

// ---- version, status, errors -----------------------------------------------------------------

ORDO_API uint32_t ordo_version(void) {
  return ORDO_VERSION_NUMBER;
}

ORDO_API const char* ordo_version_string(void) {
#define ORDO_STR2(x) #x
#define ORDO_STR(x) ORDO_STR2(x)
  return ORDO_STR(ORDO_VERSION_MAJOR) "." ORDO_STR(ORDO_VERSION_MINOR) "." ORDO_STR(
      ORDO_VERSION_PATCH);
}

ORDO_API const char* ordo_status_string(ordo_status s) {
  switch (s) {
    case ORDO_OK:
      return "ORDO_OK";
    case ORDO_ERR_INVALID_ARGUMENT:
      return "ORDO_ERR_INVALID_ARGUMENT";
    case ORDO_ERR_INVALID_HANDLE:
      return "ORDO_ERR_INVALID_HANDLE";
    case ORDO_ERR_OP_FAILED:
      return "ORDO_ERR_OP_FAILED";
    case ORDO_ERR_TIMEOUT:
      return "ORDO_ERR_TIMEOUT";
    case ORDO_ERR_NO_DEVICE:
      return "ORDO_ERR_NO_DEVICE";
    case ORDO_ERR_SHUTDOWN:
      return "ORDO_ERR_SHUTDOWN";
    case ORDO_ERR_NO_MEMORY:
      return "ORDO_ERR_NO_MEMORY";
    case ORDO_ERR_INVALID_STATE:
      return "ORDO_ERR_INVALID_STATE";
    case ORDO_ERR_WOULD_DEADLOCK:
      return "ORDO_ERR_WOULD_DEADLOCK";
    case ORDO_ERR_UNSUPPORTED:
      return "ORDO_ERR_UNSUPPORTED";
    case ORDO_ERR_INTERNAL:
      return "ORDO_ERR_INTERNAL";
    case ORDO_ERR_TOKENS_DROPPED:
      return "ORDO_ERR_TOKENS_DROPPED";
    default:
      return "ORDO_ERR_UNKNOWN";
  }
}

ORDO_API const char* ordo_last_error_message(void) {
  return last_error();
}

ORDO_API size_t ordo_last_error_copy(char* buf, size_t cap) {
  return copy_last_error(buf, cap);
}

ORDO_API size_t ordo_struct_size(int32_t kind) {
  switch (kind) {
    case ORDO_STRUCT_ENGINE_CONFIG:
      return sizeof(ordo_engine_config);
    case ORDO_STRUCT_STATS:
      return sizeof(ordo_stats);
    case ORDO_STRUCT_QUEUE_STATS:
      return sizeof(ordo_queue_stats);
    case ORDO_STRUCT_PUSH_OPTS:
      return sizeof(ordo_push_opts);
    case ORDO_STRUCT_EXEC_INFO:
      return sizeof(ordo_exec_info);
    default:
      return 0;
  }
}

// ---- engine ------------------------------------------------------------------------------------

ORDO_API void ordo_engine_config_init_sized(ordo_engine_config* cfg, size_t size) {
  if (cfg && struct_size_ok(size)) write_struct(default_engine_config(), cfg, size);
}

ORDO_API ordo_status ordo_engine_create(const ordo_engine_config* cfg, ordo_engine** out) {
  return guarded(__func__, [&](const char* api) -> ordo_status {
    if (!out) return null_arg(api, "out");
    *out = nullptr;
    ordo_engine_config c = default_engine_config();
    if (cfg) {
      if (ordo_status s = read_struct(cfg, &c, "ordo_engine_config")) return s;
      if (c.next) return fail(ORDO_ERR_UNSUPPORTED, "ordo_engine_config.next must be NULL");
      if (c.reserved0) return fail(ORDO_ERR_UNSUPPORTED, "ordo_engine_config.reserved0 must be 0");
      if (c.flags & ~ORDO_ENGINE_FLAG_PUSHERS_HELP) {
        return fail(ORDO_ERR_UNSUPPORTED,
                    "ordo_engine_config.flags=0x%x: only ORDO_ENGINE_FLAG_PUSHERS_HELP (0x%x) is "
                    "defined",
                    static_cast<unsigned>(c.flags), ORDO_ENGINE_FLAG_PUSHERS_HELP);
      }
    }
    EngineConfig resolved;
    if (ordo_status s = resolve_engine_config(&c, &resolved)) return s;
    return create_engine(resolved, out);
  });
}

ORDO_API ordo_status ordo_engine_destroy(ordo_engine* e) {
  return guarded(__func__, [&](const char* api) {
    Engine* engine;
    if (resolve_engine(e, &engine) == ORDO_OK && capturing(engine)) {
      return refuse_in_capture(api);
    }
    run_deferred_calls();
    ordo_status s = destroy_engine(e);
    run_deferred_calls();  // what threads that exited during the drain left (deferred_calls.h)
    return s;
  });
}

ORDO_API ordo_status ordo_engine_retain(ordo_engine* e) {
  return guarded(__func__, [&](const char*) { return retain_engine(e); });
}

ORDO_API ordo_status ordo_engine_release(ordo_engine* e) {
  return guarded(__func__, [&](const char*) {
    run_deferred_calls();
    ordo_status s = release_engine(e);
    run_deferred_calls();
    return s;
  });
}

ORDO_API ordo_status ordo_engine_get_config(ordo_engine* e, ordo_engine_config* out) {
  return with_engine(__func__, e, [&](Engine* engine, const char* api) -> ordo_status {
    if (!out) return null_arg(api, "out");
    if (ordo_status s =
            check_out_struct(api, "out", out->struct_size, "use ordo_engine_config_init")) {
      return s;
    }
    ordo_engine_config c = default_engine_config();
    c.kind = engine->config().kind;
    c.cpu_threads = engine->config().cpu_threads;
    c.cpu_priority_threads = engine->config().cpu_priority_threads;
    c.copy_threads = engine->config().copy_threads;
    c.max_pending = engine->config().max_pending;
    c.flags = engine->config().pushers_help ? ORDO_ENGINE_FLAG_PUSHERS_HELP : 0;
    c.trace_path = engine->config().trace_path;
    c.gpu_compute_streams = engine->config().gpu_compute_streams;
    c.gpu_stream_waits = engine->config().gpu_stream_waits ? 1 : -1;
    write_struct(c, out, out->struct_size);
    return ORDO_OK;
  });
}

ORDO_API ordo_status ordo_engine_stats(ordo_engine* e, ordo_stats* out) {
  return with_engine(__func__, e, [&](Engine* engine, const char* api) -> ordo_status {
    if (!out) return null_arg(api, "out");
    if (ordo_status s =
            check_out_struct(api, "out", out->struct_size, "set it to sizeof(ordo_stats)")) {
      return s;
    }
    ordo_stats st;
    std::memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    engine->stats(&st);
    write_struct(st, out, out->struct_size);
    return ORDO_OK;
  });
}

ORDO_API ordo_status ordo_engine_queue_stats(ordo_engine* e, uint32_t index,
                                             ordo_queue_stats* out) {
  return with_engine(__func__, e, [&](Engine* engine, const char* api) -> ordo_status {
    if (!out) return null_arg(api, "out");
    if (ordo_status s =
            check_out_struct(api, "out", out->struct_size, "set it to sizeof(ordo_queue_stats)")) {
      return s;
    }
    ordo_queue_stats q;
    std::memset(&q, 0, sizeof q);
    q.struct_size = sizeof q;
    if (!engine->queue_stats(index, &q)) {
      return fail(ORDO_ERR_INVALID_ARGUMENT, "%s: index %u, but the engine has %u queue%s", api,
                  static_cast<unsigned>(index), static_cast<unsigned>(q.queues),
                  q.queues == 1 ? "" : "s");
    }
    write_struct(q, out, out->struct_size);
    return ORDO_OK;
  });
}

ORDO_API ordo_status ordo_engine_queue_count(ordo_engine* e, uint32_t* out) {
  return with_engine(__func__, e, [&](Engine* engine, const char* api) -> ordo_status {
    if (!out) return null_arg(api, "out");
    *out = engine->queue_count();
    return ORDO_OK;
  });
}

ORDO_API ordo_status ordo_engine_dump(ordo_engine* e, FILE* out) {
  return with_engine(__func__, e, [&](Engine* engine, const char* api) -> ordo_status {
    if (!out) return null_arg(api, "out");
    engine->dump(out);
    return ORDO_OK;
  });
}

ORDO_API ordo_status ordo_engine_write_trace(ordo_engine* e, const char* path) {
  return with_engine(__func__, e, [&](Engine* engine, const char* api) -> ordo_status {
    if (!path) return null_arg(api, "path");
    if (!*path) return fail(ORDO_ERR_INVALID_ARGUMENT, "%s: path is empty", api);
    return engine->write_trace(path);
  });
}

ORDO_API ordo_status ordo_device_count(int32_t* out) {
  return guarded(__func__, [&](const char* api) -> ordo_status {
    if (!out) return null_arg(api, "out");
    *out = device_count();
    return ORDO_OK;
  });
}

// ---- variables ---------------------------------------------------------------------------------

ORDO_API ordo_status ordo_var_new(ordo_engine* e, ordo_var* out) {
  return with_engine(__func__, e, [&](Engine* engine, const char* api) -> ordo_status {
    if (!out) return null_arg(api, "out");
    return engine->var_new(out);
  });
}

ORDO_API ordo_status ordo_var_delete(ordo_engine* e, ordo_var v) {
  return with_engine(__func__, e, [&](Engine* engine, const char* api) -> ordo_status {
    if (capturing(engine)) return refuse_in_capture(api);
    return engine->var_delete(v);
  });
}

ORDO_API ordo_status ordo_var_clear_error(ordo_engine* e, ordo_var v) {
  return with_engine(__func__, e, [&](Engine* engine, const char* api) -> ordo_status {
    if (capturing(engine)) return refuse_in_capture(api);
    return engine->var_clear_error(v);
  });
}

ORDO_API ordo_status ordo_var_get_error(ordo_engine* e, ordo_var v, int32_t* code, char* buf,
                                        size_t cap) {
  return with_engine(__func__, e, [&](Engine* engine, const char* api) -> ordo_status {
    if (!code) return null_arg(api, "code");
    return engine->var_get_error(v, code, buf, cap);
  });
}

// ---- ops ---------------------------------------------------------------------------------------

ORDO_API void ordo_push_opts_init_sized(ordo_push_opts* opts, size_t size) {
  if (opts && struct_size_ok(size)) write_struct(default_push_opts(), opts, size);
}

ORDO_API ordo_status ordo_opr_push(ordo_engine* e, ordo_fn fn, void* user_data,
                                   const ordo_var* const_vars, size_t num_const,
                                   const ordo_var* mutable_vars, size_t num_mutable,
                                   const ordo_push_opts* opts) {
  return with_engine(__func__, e, [&](Engine* engine, const char* api) -> ordo_status {
    // The common push, no options and one var, takes a path of its own with the defaults as
    // constants (docs/PERFORMANCE.md, "The plain push"); anything else, bad arguments included,
    // the general one. One var: counts of 1 and 0, tested so that no wrapping sum passes.
    if (num_const + num_mutable == 1 && !opts && num_const <= 1 && fn) {
      const bool write = num_mutable == 1;
      const ordo_var* one = write ? mutable_vars : const_vars;
      if (one) return engine->push_plain(fn, user_data, *one, write);
    }
    OpSpec spec;
    if (ordo_status s = make_spec(api, fn, user_data, const_vars, num_const, mutable_vars,
                                  num_mutable, opts, &spec)) {
      return s;
    }
    return engine->push(spec, const_vars, num_const, mutable_vars, num_mutable);
  });
}

ORDO_API ordo_status ordo_opr_new(ordo_engine* e, ordo_fn fn, void* user_data,
                                  const ordo_var* const_vars, size_t num_const,
                                  const ordo_var* mutable_vars, size_t num_mutable,
                                  const ordo_push_opts* opts, ordo_opr* out) {
  return with_engine(__func__, e, [&](Engine* engine, const char* api) -> ordo_status {
    if (!out) return null_arg(api, "out");
    OpSpec spec;
    if (ordo_status s = make_spec(api, fn, user_data, const_vars, num_const, mutable_vars,
                                  num_mutable, opts, &spec)) {
      return s;
    }
    if (engine->shutting_down()) {
      return fail(ORDO_ERR_SHUTDOWN, "ordo_opr_new: the engine is shut down");
    }
    return engine->prepared_new(spec, const_vars, num_const, mutable_vars, num_mutable, out);
  });
}

ORDO_API ordo_status ordo_opr_push_prepared(ordo_engine* e, ordo_opr opr, int32_t priority) {
  return with_engine(__func__, e, [&](Engine* engine, const char*) -> ordo_status {
    return engine->prepared_push(opr, priority);
  });
}

ORDO_API ordo_status ordo_opr_delete(ordo_engine* e, ordo_opr opr) {
  return with_engine(__func__, e, [&](Engine* engine, const char*) -> ordo_status {
    return engine->prepared_delete(opr);
  });
}

// ---- inside an op ------------------------------------------------------------------------------

ORDO_API ordo_status ordo_exec_defer(ordo_exec* exec, ordo_completion* out) {
  return guarded(__func__, [&](const char* api) -> ordo_status {
    if (!exec) return null_arg(api, "exec");
    if (!out) return null_arg(api, "out");
    OpBlock* op = op_of_exec(exec);
    if (!op) {
      return fail(ORDO_ERR_INVALID_STATE,
                  "ordo_exec_defer: exec is not the op running on this thread (an exec is valid "
                  "only inside its own callback)");
    }
    if (ordo_status s = check_op_engine(op)) return s;
    return op->engine->defer(op, out);
  });
}

ORDO_API ordo_status ordo_complete(ordo_completion c, int32_t code, const char* message) {
  return guarded(__func__, [&](const char*) -> ordo_status {
    if (ordo_status s = check_handle_kind(c, HandleKind::kCompletion)) return s;
    HandleBits b = HandleBits::decode(c);
    EngineSlot* slot = b.kind == HandleKind::kCompletion ? slot_for_tag(b.tag) : nullptr;
    if (slot && !made_here(slot) && slot->engine.load(std::memory_order_acquire)) {
      return inherited_engine(slot);
    }
    Engine* engine = slot ? pin_engine(slot) : nullptr;
    if (!engine) {
      return fail(ORDO_ERR_INVALID_HANDLE,
                  "completion handle 0x%016" PRIx64 " is stale or made up (its engine is gone)", c);
    }
    // The pin keeps the engine's memory while this thread finishes the op, even if the owner
    // destroys it the moment the op completes; it never makes this thread the one to drain.
    // Dropped by a destructor: a free_fn may end the thread with a forced unwind.
    struct Unpin {
      EngineSlot* slot;
      ~Unpin() { unpin_engine(slot); }
    } unpin{slot};
    return engine->complete(b.gen, b.index, code, message);
  });
}

ORDO_API ordo_status ordo_exec_get_info(const ordo_exec* exec, ordo_exec_info* info) {
  return guarded(__func__, [&](const char* api) -> ordo_status {
    if (!exec) return null_arg(api, "exec");
    if (!info) return null_arg(api, "info");
    if (ordo_status s =
            check_out_struct(api, "info", info->struct_size, "set it to sizeof(ordo_exec_info)")) {
      return s;
    }
    OpBlock* op = op_of_exec(exec);
    if (!op) {
      return fail(ORDO_ERR_INVALID_STATE,
                  "ordo_exec_get_info: exec is not the op running on this thread");
    }
    if (ordo_status s = check_op_engine(op)) return s;
    Worker* w = running_worker();
    ordo_exec_info v;
    std::memset(&v, 0, sizeof v);
    v.struct_size = sizeof v;
    v.device_type = op->device_type;
    v.device_id = op->device_id;
    v.worker_index = (w && op->group && w->group == op->group) ? w->index : -1;
    v.priority = op->priority;
    v.prop = op->prop;
    v.stream = op->device_type == ORDO_DEVICE_GPU ? op->stream : nullptr;
    v.engine = reinterpret_cast<ordo_engine*>(slot_for_tag(op->engine->tag()));
    v.name = op->op_name();
    write_struct(v, info, info->struct_size);
    return ORDO_OK;
  });
}

// ---- waiting -----------------------------------------------------------------------------------

ORDO_API ordo_status ordo_wait_for_var(ordo_engine* e, ordo_var v) {
  return with_engine(__func__, e, [&](Engine* engine, const char* api) -> ordo_status {
    if (capturing(engine)) return refuse_in_capture(api);
    run_deferred_calls();
    return engine->wait_for_var(v, nullptr);
  });
}

ORDO_API ordo_status ordo_wait_for_var_timeout(ordo_engine* e, ordo_var v, uint64_t timeout_ns) {
  return with_engine(__func__, e, [&](Engine* engine, const char* api) -> ordo_status {
    if (capturing(engine)) return refuse_in_capture(api);
    run_deferred_calls();
    return engine->wait_for_var(v, &timeout_ns);
  });
}

ORDO_API ordo_status ordo_wait_for_all(ordo_engine* e) {
  return with_engine(__func__, e, [&](Engine* engine, const char* api) -> ordo_status {
    if (capturing(engine)) return refuse_in_capture(api);
    run_deferred_calls();
    return engine->wait_for_all(nullptr);
  });
}

ORDO_API ordo_status ordo_wait_for_all_timeout(ordo_engine* e, uint64_t timeout_ns) {
  return with_engine(__func__, e, [&](Engine* engine, const char* api) -> ordo_status {
    if (capturing(engine)) return refuse_in_capture(api);
    run_deferred_calls();
    return engine->wait_for_all(&timeout_ns);
  });
}

ORDO_API ordo_status ordo_wait_for_var_async(ordo_engine* e, ordo_var v, ordo_wait_fn fn,
                                             void* user_data) {
  return with_engine(__func__, e, [&](Engine* engine, const char* api) -> ordo_status {
    if (!fn) return null_arg(api, "fn");
    if (capturing(engine)) return refuse_in_capture(api);
    run_deferred_calls();
    return engine->wait_for_var_async(v, fn, user_data);
  });
}

}  // extern "C"
