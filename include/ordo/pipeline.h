/*
 * ordo pipelines: a task-parallel pipeline with token deferral, run on an engine's workers
 * (SPEC §8). Included by ordo.h; may also be included on its own.
 *
 * A pipeline has L lines and P pipes. Pipe 0 (always serial) generates tokens 0, 1, 2, ... until
 * it calls ordo_pipeflow_stop(); every token then visits pipes 1 .. P-1 in order, on one line.
 * A line holds one token at a time, so at most L tokens are past pipe 0 and not yet out of the
 * last pipe. A serial pipe (ORDO_PIPE_SERIAL) sees the tokens one at a time, in the order pipe 0
 * accepted them; a parallel pipe (ORDO_PIPE_PARALLEL) runs up to L tokens at once, in any order.
 * The k-th token accepted since the last reset runs on line k mod L.
 *
 * Token deferral: an invocation of pipe 0 may call ordo_pipeflow_defer(pf, t) for one or more
 * targets t (a B-frame waiting for its future reference frame). The token then leaves pipe 0
 * without being accepted, its line takes the next token at once, and the token is invoked
 * again in pipe 0 (with ordo_pipeflow_num_deferrals() one higher) once every valid target has
 * been accepted by pipe 0 (not when the target leaves the pipeline). Ready tokens are taken
 * before fresh ids, oldest first. Valid targets are ids not generated yet and tokens deferred
 * right now; a target already accepted, the token itself, or a token waiting in the ready queue
 * is invalid and ignored (when no target of the invocation is valid, the token is invoked again
 * at once; a callback that defers to invalid targets forever is invoked forever: branch on
 * num_deferrals). The exact rules are Taskflow v3.10's (docs/ARCHITECTURE.md points to the
 * case-by-case description), with its known bugs fixed: a run never replays tokens of an
 * earlier run, stop() forgets the targets named before it, a rerun without reset continues the
 * line ring where the last run left it, and a failing pipe ends the run with an error.
 *
 * A token whose deferral can never be resolved (a target past the last token, a cycle such as
 * 1 -> 2 -> 1, or tokens still waiting when pipe 0 stops) is dropped when the run ends: the run
 * reports ORDO_ERR_TOKENS_DROPPED and ordo_pipeline_dropped() names them. A run never hangs on
 * them.
 *
 * Threads: pipe callbacks run on the engine's CPU workers (for the naive engine, on the thread
 * that called ordo_pipeline_run, or that completes what the pushed run waits for), never two
 * callbacks of one serial pipe at once. No worker waits or spins while a line waits for a serial
 * pipe: whoever finishes the step a line waits for runs that line's step next, or leaves it where
 * any worker of the engine takes it. Short steps mostly run one after another on the thread that
 * made them runnable (cheaper than handing each to another core); a step never waits behind a
 * long callback while another worker is free. A callback may push ops, and may run other
 * pipelines of other engines; it must not wait on its own engine.
 * Pipeline handles are thread-safe (one run at a time); a pipeflow is valid only inside the
 * callback it was given to, on that thread.
 */
#ifndef ORDO_PIPELINE_H
#define ORDO_PIPELINE_H

#include "ordo.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A pipeline. Opaque, owned by the caller (ordo_pipeline_destroy). A handle that is NULL is
 *  ORDO_ERR_INVALID_ARGUMENT; one that ordo never handed out, or that was destroyed, is
 *  ORDO_ERR_INVALID_HANDLE (handles are slots of a table of 65,535 reused round robin, so a
 *  destroyed handle stays invalid for at least 65,535 - L creations, L the most alive at once). */
typedef struct ordo_pipeline ordo_pipeline;
/** What a pipe callback learns about the token it runs. Valid only inside that callback, on its
 *  thread; passed anywhere else (kept, made up, NULL) the getters below return their "invalid"
 *  value and the other functions ORDO_ERR_INVALID_STATE (NULL: ORDO_ERR_INVALID_ARGUMENT). */
typedef struct ordo_pipeflow ordo_pipeflow;

/** Pipe types (ordo_pipe.type). The first pipe must be serial. */
#define ORDO_PIPE_PARALLEL 1
#define ORDO_PIPE_SERIAL 2

/**
 * A pipe's callback. Returns 0 for success; any other value is a failure that ends the run:
 * ordo_pipeline_run returns ORDO_ERR_OP_FAILED (a pushed run fails with that code), no further
 * callback starts, and the pipeline needs ordo_pipeline_reset before it runs again. It must not
 * unwind (a C++ exception escaping it is caught and counts as failure ORDO_ERR_OP_FAILED;
 * longjmp out of it is forbidden, see ordo.h). A forced unwind (pthread_exit, cancellation,
 * Python ending a thread at interpreter exit) passes through and ends the thread without
 * aborting the process, and ends the run as a failing callback does: ORDO_ERR_OP_FAILED (a
 * pushed run's op fails with that code, and the waiters on its vars wake), the message naming
 * the pipe, the token and its line and saying that the callback's thread exited; the tokens in
 * flight are drained without calling more callbacks, and the pipeline needs a reset. The exiting
 * thread finishes its share of the run on its way out and runs no more caller code (see ordo.h);
 * on the naive engine it is the thread that called ordo_pipeline_run or ordo_pipeline_push,
 * which then never returns: the pipeline is free again once the thread has exited. As for any
 * op whose callback ends its thread, the engine also counts the op that ran the step (named
 * "ordo_pipeline") as failed: the next ordo_wait_for_all reports it. A worker thread so ended
 * is replaced as ordo.h says (ordo_pipeline_run waits on the engine as ordo_wait_for_all does).
 */
typedef int32_t (*ordo_pipe_fn)(ordo_pipeflow* pf, void* user_data);

/** One pipe: its type (ORDO_PIPE_*), callback and the user_data it is given. Copied by
 *  ordo_pipeline_create and ordo_pipeline_reset_pipes; user_data stays the caller's. */
typedef struct ordo_pipe {
  int64_t type; /**< ORDO_PIPE_*. 64 bits wide so that the struct has no padding hole (no public
                     struct has one: an FFI declares every byte) while {type, fn, user_data}
                     initializers stay as they are; size and offsets are those of an int32_t
                     type followed by padding */
  ordo_pipe_fn fn;
  void* user_data;
} ordo_pipe;

/**
 * Creates a pipeline of num_lines lines over the pipes (copied) on engine e; *out receives it
 * (NULL on failure). The pipeline keeps e's memory (not its service) until it is destroyed: once
 * e is destroyed, runs return ORDO_ERR_SHUTDOWN. Token ids start at 0.
 * Errors: INVALID_ARGUMENT (e or out NULL; num_lines 0 or above 65,536; pipes NULL or
 * num_pipes 0 or above 65,536; more than 2^20 lines x pipes; a type other than ORDO_PIPE_*; a
 * parallel first pipe; a NULL fn), INVALID_HANDLE (e freed or made up), NO_MEMORY (memory, or
 * 65,535 pipelines alive).
 */
ORDO_API ordo_status ordo_pipeline_create(ordo_engine* e, uint32_t num_lines,
                                          const ordo_pipe* pipes, size_t num_pipes,
                                          ordo_pipeline** out);

/**
 * Runs the pipeline until pipe 0 stops and every token accepted has left the last pipe, and
 * returns then; the steps run on the engine's workers while the calling thread waits. Token ids
 * and lines continue from the previous run unless the pipeline was reset.
 * Returns ORDO_OK; ORDO_ERR_TOKENS_DROPPED when tokens were still deferred or ready at the end
 * (the message gives how many and the first ids; ordo_pipeline_dropped lists them; every other
 * result of the run is intact and the pipeline may run again); ORDO_ERR_OP_FAILED when a pipe
 * callback failed, threw or ended its thread (the message names the pipe, the token, its line
 * and the code; the tokens in flight are drained without calling more callbacks; the pipeline
 * then needs a reset);
 * ORDO_ERR_NO_MEMORY when the deferral tables could not grow (the run ends as after a failure).
 * Errors before anything runs: INVALID_ARGUMENT (NULL), INVALID_HANDLE, INVALID_STATE (a run of
 * this pipeline is in flight, pushed or not; or the last run failed and it was not reset),
 * WOULD_DEADLOCK (called from inside a pipe callback or op of the same engine), SHUTDOWN (the
 * engine is being or was destroyed), NO_MEMORY.
 */
ORDO_API ordo_status ordo_pipeline_run(ordo_pipeline* p);

/**
 * Pushes one run of the pipeline as an op of its engine, ordered like any op by the vars it
 * reads (const_vars) and mutates (mutable_vars): the run starts when they are ready, and the op
 * completes when the run ends. Returns at once. The op fails (its mutable vars take the error,
 * ordo_wait_for_var returns ORDO_ERR_OP_FAILED) when a pipe callback fails (the callback's code)
 * or when tokens were dropped (code ORDO_ERR_TOKENS_DROPPED); the message says what happened. An
 * op skipped because a var it uses carries an error runs nothing. opts: name, priority (also
 * that of the run's steps), prop and device of the op that starts the run (the steps run on
 * the normal CPU workers); opts->free_fn must be NULL (there is no user_data). The run counts
 * as in flight from this call until its op has finished.
 * Errors (nothing pushed): INVALID_ARGUMENT (p NULL, NULL array with a non-zero count, bad opts
 * field, free_fn set), INVALID_HANDLE (p or a var), INVALID_STATE (a run in flight, or a reset
 * needed), UNSUPPORTED (opts tail or next), NO_DEVICE, SHUTDOWN, NO_MEMORY.
 */
ORDO_API ordo_status ordo_pipeline_push(ordo_pipeline* p, const ordo_var* const_vars,
                                        size_t num_const, const ordo_var* mutable_vars,
                                        size_t num_mutable, const ordo_push_opts* opts);

/**
 * Restarts the pipeline: token ids and lines start at 0, the dropped-token list and a failed
 * run's error are cleared. Errors: INVALID_ARGUMENT, INVALID_HANDLE, INVALID_STATE (a run in
 * flight).
 */
ORDO_API ordo_status ordo_pipeline_reset(ordo_pipeline* p);

/**
 * Replaces the pipes (copied, checked as in ordo_pipeline_create) and, when num_lines is not 0,
 * the number of lines, then resets the pipeline as ordo_pipeline_reset does (Taskflow's
 * ScalablePipeline::reset). On failure nothing changes. Errors: as ordo_pipeline_create, plus
 * INVALID_HANDLE and INVALID_STATE (a run in flight).
 */
ORDO_API ordo_status ordo_pipeline_reset_pipes(ordo_pipeline* p, uint32_t num_lines,
                                               const ordo_pipe* pipes, size_t num_pipes);

/** *out = the tokens generated since the last reset (the next fresh id; a token deferred, even
 *  one later dropped, counts; the id pipe 0 stopped on, or failed on, does not). While a run is
 *  in flight, a snapshot. Errors: INVALID_ARGUMENT (NULL), INVALID_HANDLE. */
ORDO_API ordo_status ordo_pipeline_num_tokens(const ordo_pipeline* p, uint64_t* out);

/**
 * The tokens the last run dropped (still deferred or ready when it ended, or a resumed token on
 * which pipe 0 stopped), until the next run or reset: *count receives how many, and ids (when not NULL) the first min(count, cap) of them,
 * ascending. Errors: INVALID_ARGUMENT (p or count NULL, ids NULL with cap not 0),
 * INVALID_HANDLE, INVALID_STATE (a run in flight).
 */
ORDO_API ordo_status ordo_pipeline_dropped(const ordo_pipeline* p, uint64_t* count,
                                           uint64_t* ids, size_t cap);

/** Destroys the pipeline (its handle is invalid at once) and lets go of its engine's memory.
 *  Errors: INVALID_ARGUMENT, INVALID_HANDLE, INVALID_STATE (a run in flight: nothing done).
 *  In a child of fork(), a pipeline whose engine the parent created is refused by every call
 *  with INVALID_STATE (as its engine is, see ordo.h), except this one, which only invalidates
 *  the handle (nothing is freed or waited for). */
ORDO_API ordo_status ordo_pipeline_destroy(ordo_pipeline* p);

/** The token's id; UINT64_MAX for an invalid pf. In pipe 0, for a fresh token, the next id;
 *  for a resumed deferred token, its own id. */
ORDO_API uint64_t ordo_pipeflow_token(const ordo_pipeflow* pf);
/** The line running the callback (0 .. L-1); UINT32_MAX for an invalid pf. In pipes >= 1 the
 *  token's line; in pipe 0 the line whose step runs, which a deferring token does not keep. */
ORDO_API uint32_t ordo_pipeflow_line(const ordo_pipeflow* pf);
/** The pipe running the callback (0 .. P-1); UINT32_MAX for an invalid pf. */
ORDO_API uint32_t ordo_pipeflow_pipe(const ordo_pipeflow* pf);
/** How many earlier pipe-0 invocations of this token deferred (in pipes >= 1: the final
 *  count); UINT32_MAX for an invalid pf (and the most it reports). */
ORDO_API uint32_t ordo_pipeflow_num_deferrals(const ordo_pipeflow* pf);
/**
 * Pipe 0 only: ends token generation. The current token is discarded (a fresh one is not
 * counted; a resumed deferred one is reported as dropped), targets it named with
 * ordo_pipeflow_defer are forgotten, no further pipe-0 invocation happens in this run, and the
 * tokens already accepted run to the end. Errors:
 * INVALID_ARGUMENT (NULL), INVALID_STATE (pf invalid, or a pipe other than 0: the run goes on).
 */
ORDO_API ordo_status ordo_pipeflow_stop(ordo_pipeflow* pf);
/**
 * Pipe 0 only: the token waits for `token` to be accepted by pipe 0 before it is invoked again
 * (see the top of this file for valid targets). Several calls in one invocation wait for all
 * valid targets; naming one target twice counts once. Errors: INVALID_ARGUMENT (NULL),
 * INVALID_STATE (pf invalid, or a pipe other than 0: nothing changes, the run goes on),
 * NO_MEMORY.
 */
ORDO_API ordo_status ordo_pipeflow_defer(ordo_pipeflow* pf, uint64_t token);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ORDO_PIPELINE_H */
