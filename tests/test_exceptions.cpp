// C++ exceptions escaping a callback or a free_fn, against the library as shipped (libstdc++
// linked in statically). The header promises: a callback that throws fails its op with
// ORDO_ERR_OP_FAILED ("the callback threw"), and a free_fn that throws is ignored. With a
// private copy of libgcc's unwinder in libordo.so, the first throw aborted the process. A plain
// program rather than a Criterion test: the suite is C, and it must run in the shipped build.
#include <ordo/ordo.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace {

int failures = 0;

void expect(bool ok, const char* what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what);
  if (!ok) ++failures;
}

int32_t throwing_fn(ordo_exec*, void*) {
  throw std::runtime_error("thrown by a callback");
}

int32_t quiet_fn(ordo_exec*, void*) {
  return 0;
}

std::atomic<int> frees{0};

void throwing_free(void*) {
  frees.fetch_add(1);
  throw std::logic_error("thrown by a free_fn");
}

ordo_engine* make_engine(int32_t kind) {
  ordo_engine_config cfg;
  ordo_engine_config_init(&cfg);
  cfg.kind = kind;
  cfg.cpu_threads = 2;
  ordo_engine* e = nullptr;
  if (ordo_engine_create(&cfg, &e) != ORDO_OK) {
    std::printf("FAIL engine_create: %s\n", ordo_last_error_message());
    ++failures;
  }
  return e;
}

void a_throwing_callback_fails_its_op(int32_t kind) {
  ordo_engine* e = make_engine(kind);
  if (!e) return;
  ordo_var v;
  ordo_var_new(e, &v);
  ordo_opr_push(e, throwing_fn, nullptr, nullptr, 0, &v, 1, nullptr);
  ordo_status s = ordo_wait_for_var(e, v);
  char what[128];
  std::snprintf(what, sizeof what, "kind %d: a throwing callback fails with OP_FAILED (%s: %s)",
                kind, ordo_status_string(s), ordo_last_error_message());
  expect(s == ORDO_ERR_OP_FAILED && std::strstr(ordo_last_error_message(), "threw") != nullptr,
         what);
  expect(ordo_engine_destroy(e) == ORDO_OK, "destroy after the throw");
}

void throwing_free_fns_are_ignored(int32_t kind) {
  ordo_engine* e = make_engine(kind);
  if (!e) return;
  frees.store(0);
  ordo_push_opts o;
  ordo_push_opts_init(&o);
  o.free_fn = throwing_free;
  ordo_opr_push(e, quiet_fn, nullptr, nullptr, 0, nullptr, 0, &o);
  ordo_opr prepared = 0;
  ordo_opr_new(e, quiet_fn, nullptr, nullptr, 0, nullptr, 0, &o, &prepared);
  ordo_opr_push_prepared(e, prepared, 0);
  ordo_opr_delete(e, prepared);
  ordo_opr kept = 0;  // never deleted: its free_fn runs at destroy
  ordo_opr_new(e, quiet_fn, nullptr, nullptr, 0, nullptr, 0, &o, &kept);
  expect(ordo_wait_for_all(e) == ORDO_OK, "wait_for_all after throwing free_fns");
  expect(ordo_engine_destroy(e) == ORDO_OK, "destroy runs the last throwing free_fn");
  char what[96];
  std::snprintf(what, sizeof what, "kind %d: every free_fn ran once (%d of 3)", kind, frees.load());
  expect(frees.load() == 3, what);
}

int32_t pipe_source(ordo_pipeflow* pf, void*) {
  if (ordo_pipeflow_token(pf) == 50) ordo_pipeflow_stop(pf);
  return 0;
}

int32_t throwing_pipe(ordo_pipeflow* pf, void*) {
  if (ordo_pipeflow_token(pf) == 7) throw std::runtime_error("thrown by a pipe");
  return 0;
}

// A pipe callback that throws ends the run like a failing one: OP_FAILED, "threw", reset needed.
void a_throwing_pipe_fails_the_run(int32_t kind) {
  ordo_engine* e = make_engine(kind);
  if (!e) return;
  ordo_pipe pipes[2] = {{ORDO_PIPE_SERIAL, pipe_source, nullptr},
                        {ORDO_PIPE_PARALLEL, throwing_pipe, nullptr}};
  ordo_pipeline* p = nullptr;
  expect(ordo_pipeline_create(e, 4, pipes, 2, &p) == ORDO_OK, "pipeline_create");
  ordo_status s = ordo_pipeline_run(p);
  char what[256];
  std::snprintf(what, sizeof what, "kind %d: a throwing pipe fails the run (%s: %s)", kind,
                ordo_status_string(s), ordo_last_error_message());
  expect(s == ORDO_ERR_OP_FAILED &&
             std::strstr(ordo_last_error_message(), "pipe 1 threw a C++ exception on token 7"),
         what);
  expect(ordo_pipeline_run(p) == ORDO_ERR_INVALID_STATE, "a run after it needs a reset");
  expect(ordo_pipeline_reset(p) == ORDO_OK && ordo_pipeline_destroy(p) == ORDO_OK,
         "reset and destroy the pipeline");
  expect(ordo_engine_destroy(e) == ORDO_OK, "destroy after the throwing pipe");
}

}  // namespace

int main() {
  std::setvbuf(stdout, nullptr, _IONBF, 0);  // an abort must not swallow the lines before it
  const int32_t kinds[] = {ORDO_ENGINE_NAIVE, ORDO_ENGINE_POOLED, ORDO_ENGINE_PER_DEVICE};
  for (int32_t kind : kinds) {
    a_throwing_callback_fails_its_op(kind);
    throwing_free_fns_are_ignored(kind);
    a_throwing_pipe_fails_the_run(kind);
  }
  std::printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
