//! Pipelines (`ordo_pipeline_*`, include/ordo/pipeline.h): `Pipe` (a closure and its type),
//! `Pipeflow` (what a pipe's closure sees), `Pipeline` (runs, pushed runs, resets).
//!
//! A pipe's closure crosses into C as a `Slot` (the boxed closure and the pipeline's shared
//! failure record) passed as the pipe's `user_data`, with one `extern "C"` trampoline
//! (`call_pipe`) as its `fn`. The `Pipeline` owns the slots: C calls them until the pipeline is
//! destroyed, or until `reset_pipes` replaced them (after a successful call only, which the
//! library refuses while a run is in flight), and the slots are dropped then, not before. A
//! boxed slot does not move when the `Pipeline` does. Nothing unwinds into C: the closure runs
//! under `catch_unwind`, and an `Err` or a panic is recorded (for the run's error) and returned
//! to the library as the failing code.
use std::fmt;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::os::raw::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::{self, NonNull};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ordo_sys as sys;

use crate::engine::EngineRef;
use crate::error::{check, Error, OpError, Result, FAILED};
use crate::op::{drop_payload, panic_message, with_ids, PushOptions};
use crate::var::Var;

type PipeResult = std::result::Result<(), OpError>;
type PipeFn = dyn Fn(&mut Pipeflow<'_>) -> PipeResult + Send + Sync + 'static;

/// One pipe of a pipeline: a closure called once per token, and whether the pipe is serial or
/// parallel. Made with [`Pipe::serial`] or [`Pipe::parallel`] and handed to
/// [`EngineRef::pipeline`] or [`Pipeline::reset_pipes`].
///
/// The closure runs on the engine's workers (for the naive engine, on the thread that runs the
/// pipeline), many times, and for a parallel pipe on several threads at once: hence
/// `Fn + Send + Sync + 'static`. `Ok(())` lets the token go on; `Err(OpError)` (its code and
/// message) and a panic (caught: code [`FAILED`], message "panicked: ...") fail the run.
pub struct Pipe {
    parallel: bool,
    f: Box<PipeFn>,
}

impl Pipe {
    /// A serial pipe: it sees the tokens one at a time, in the order pipe 0 accepted them
    /// (`ORDO_PIPE_SERIAL`). The first pipe must be serial.
    pub fn serial<F>(f: F) -> Pipe
    where
        F: Fn(&mut Pipeflow<'_>) -> PipeResult + Send + Sync + 'static,
    {
        Pipe {
            parallel: false,
            f: Box::new(f),
        }
    }

    /// A parallel pipe: it runs up to `lines` tokens at once, in any order
    /// (`ORDO_PIPE_PARALLEL`). Not allowed as the first pipe
    /// ([`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument)).
    pub fn parallel<F>(f: F) -> Pipe
    where
        F: Fn(&mut Pipeflow<'_>) -> PipeResult + Send + Sync + 'static,
    {
        Pipe {
            parallel: true,
            f: Box::new(f),
        }
    }

    /// Whether the pipe is parallel.
    pub fn is_parallel(&self) -> bool {
        self.parallel
    }
}

impl fmt::Debug for Pipe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.parallel {
            "Pipe::parallel(..)"
        } else {
            "Pipe::serial(..)"
        })
    }
}

/// What a pipe's closure learns about the token it runs and, in pipe 0, how it steers token
/// generation ([`stop`](Pipeflow::stop), [`defer`](Pipeflow::defer)).
///
/// The closure gets it as `&mut Pipeflow<'_>`, for the length of that call: it cannot be kept
/// past the call, nor handed to another thread (it is neither `Send` nor `Sync`), so every use
/// of it is valid and its getters return plain values. Both are compile errors:
///
/// ```compile_fail
/// use std::cell::RefCell;
/// use ordo::{Pipe, Pipeflow};
///
/// thread_local! {
///     static KEPT: RefCell<Option<&'static mut Pipeflow<'static>>> = RefCell::new(None);
/// }
/// let source = Pipe::serial(|pf| {
///     KEPT.with(|k| *k.borrow_mut() = Some(pf)); // the pipeflow cannot outlive the call
///     Ok(())
/// });
/// ```
///
/// ```compile_fail
/// let source = ordo::Pipe::serial(|pf| {
///     std::thread::scope(|s| {
///         s.spawn(|| pf.token()); // nor be used on another thread
///     });
///     Ok(())
/// });
/// ```
pub struct Pipeflow<'a> {
    raw: *mut sys::ordo_pipeflow,
    _life: PhantomData<&'a mut sys::ordo_pipeflow>,
    _not_send: PhantomData<*mut ()>,
}

impl Pipeflow<'_> {
    /// The token's id. In pipe 0: for a fresh token the next id, for a resumed deferred token
    /// its own id.
    pub fn token(&self) -> u64 {
        // SAFETY: our pipeflow, inside its callback, on its thread.
        unsafe { sys::ordo_pipeflow_token(self.raw) }
    }

    /// The line running the callback (0 .. lines - 1). In pipes 1 and later the token's line;
    /// in pipe 0 the line whose step runs, which a token that defers does not keep.
    pub fn line(&self) -> u32 {
        // SAFETY: as in token.
        unsafe { sys::ordo_pipeflow_line(self.raw) }
    }

    /// The pipe running the callback (0 .. pipes - 1).
    pub fn pipe(&self) -> u32 {
        // SAFETY: as in token.
        unsafe { sys::ordo_pipeflow_pipe(self.raw) }
    }

    /// How many earlier pipe-0 invocations of this token deferred (in later pipes: the final
    /// count). A pipe-0 closure that defers should branch on it: a token deferring to invalid
    /// targets (see [`defer`](Pipeflow::defer)) is invoked again at once, forever.
    pub fn num_deferrals(&self) -> u32 {
        // SAFETY: as in token.
        unsafe { sys::ordo_pipeflow_num_deferrals(self.raw) }
    }

    /// Pipe 0 only: ends token generation. The current token is discarded (a fresh one is not
    /// counted in [`Pipeline::num_tokens`]; a resumed deferred one is reported as dropped),
    /// targets it named with [`defer`](Pipeflow::defer) are forgotten, no further pipe-0 call
    /// happens in this run, and the tokens already accepted run to the end.
    /// [`ErrorKind::InvalidState`](crate::ErrorKind::InvalidState) in another pipe (nothing
    /// changes; the run goes on unless the closure returns the error).
    pub fn stop(&mut self) -> Result<()> {
        // SAFETY: as in token.
        check(unsafe { sys::ordo_pipeflow_stop(self.raw) })
    }

    /// Pipe 0 only: this token leaves pipe 0 unaccepted (its line takes the next token at once)
    /// and is invoked again, with [`num_deferrals`](Pipeflow::num_deferrals) one higher, once
    /// `token` has been accepted by pipe 0. Several calls in one invocation wait for all their
    /// valid targets: ids not generated yet and tokens deferred right now. Other targets (one
    /// already accepted, this token itself, a token ready to resume) are ignored, and with no
    /// valid target the token is invoked again at once. A token whose targets are never
    /// accepted (never generated, a cycle, still waiting when pipe 0 stops) is dropped when the
    /// run ends: [`Pipeline::run`] then returns
    /// [`ErrorKind::TokensDropped`](crate::ErrorKind::TokensDropped).
    /// [`ErrorKind::InvalidState`](crate::ErrorKind::InvalidState) in another pipe (nothing
    /// changes).
    pub fn defer(&mut self, token: u64) -> Result<()> {
        // SAFETY: as in token.
        check(unsafe { sys::ordo_pipeflow_defer(self.raw, token) })
    }

    /// The raw pipeflow, for calls through `ordo_sys` during the callback.
    pub fn as_ptr(&self) -> *mut sys::ordo_pipeflow {
        self.raw
    }
}

impl fmt::Debug for Pipeflow<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pipeflow")
            .field("token", &self.token())
            .field("line", &self.line())
            .field("pipe", &self.pipe())
            .field("num_deferrals", &self.num_deferrals())
            .finish()
    }
}

// ----------------------------------------------------------------------------------------------
// What C holds: the slots, and the failures they record
// ----------------------------------------------------------------------------------------------

/// A failing callback: where, and how. The library names one of them (the first to fail) in
/// the run's message; the record lets the binding add that callback's own message.
struct Failure {
    pipe: u32,
    token: u64,
    error: OpError,
}

/// What the slots of one pipeline share: the failures since the last reset (a failed run needs
/// a reset before the next one, so they are the failures of the last run). The first few are
/// kept: enough to find the one the library's message names among callbacks failing at once.
#[derive(Default)]
struct Shared {
    failures: Mutex<Vec<Failure>>,
}

const FAILURES_KEPT: usize = 64;

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Vec<Failure>> {
        // Nothing panics while holding it; a poisoned lock still holds consistent data.
        self.failures.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn record(&self, pipe: u32, token: u64, error: OpError) {
        let mut f = self.lock();
        if f.len() < FAILURES_KEPT {
            f.push(Failure { pipe, token, error });
        }
    }

    fn clear(&self) {
        self.lock().clear();
    }

    fn first(&self) -> Option<OpError> {
        self.lock().first().map(|f| f.error.clone())
    }

    /// The run's OP_FAILED error with the failing callback's message and code: the one the
    /// library's message names ("ordo_pipeline_run: pipe P failed on token T (line L); ..."),
    /// else the first recorded.
    fn explain(&self, err: Error) -> Error {
        let failures = self.lock();
        let named = failures.iter().find(|f| {
            err.message()
                .contains(&format!("pipe {} failed on token {} (", f.pipe, f.token))
        });
        match named.or_else(|| failures.first()) {
            Some(f) => Error::new(
                err.status(),
                format!("{}: {}", err.message(), f.error.message()),
            )
            .with_op_code(Some(f.error.code())),
            None => err,
        }
    }
}

struct Slot {
    f: Box<PipeFn>,
    shared: Arc<Shared>,
}

unsafe extern "C" fn call_pipe(pf: *mut sys::ordo_pipeflow, ud: *mut c_void) -> i32 {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: ud is a Slot that its Pipeline keeps until the library no longer calls it.
        let slot = &*(ud as *const Slot);
        let mut flow = Pipeflow {
            raw: pf,
            _life: PhantomData,
            _not_send: PhantomData,
        };
        let error = match catch_unwind(AssertUnwindSafe(|| (slot.f)(&mut flow))) {
            Ok(Ok(())) => return 0,
            Ok(Err(e)) => e,
            Err(p) => {
                let m = format!("panicked: {}", panic_message(&*p));
                drop_payload(p);
                OpError::new(FAILED, m)
            }
        };
        let code = error.code();
        slot.shared.record(flow.pipe(), flow.token(), error);
        code
    }));
    outcome.unwrap_or_else(|p| {
        drop_payload(p);
        FAILED
    })
}

/// The slots of one set of pipes, owned through raw pointers (`Box::into_raw`), so that the
/// pointers the library holds stay valid however the `Pipeline` moves; dropped by `Drop`.
struct Slots(Vec<NonNull<Slot>>);

// SAFETY: a Slot is a Send + Sync closure and an Arc of a Mutex; Slots only owns them.
unsafe impl Send for Slots {}
unsafe impl Sync for Slots {}

impl Drop for Slots {
    fn drop(&mut self) {
        for s in self.0.drain(..) {
            // SAFETY: made by Box::into_raw in make_pipes, dropped once, here.
            drop(unsafe { Box::from_raw(s.as_ptr()) });
        }
    }
}

/// The slots for `pipes` and the `ordo_pipe` array that points at them.
fn make_pipes(
    pipes: impl IntoIterator<Item = Pipe>,
    shared: &Arc<Shared>,
) -> (Slots, Vec<sys::ordo_pipe>) {
    let mut slots = Slots(Vec::new());
    let mut raw = Vec::new();
    for p in pipes {
        let slot = Box::into_raw(Box::new(Slot {
            f: p.f,
            shared: shared.clone(),
        }));
        // SAFETY: Box::into_raw never returns NULL.
        slots.0.push(unsafe { NonNull::new_unchecked(slot) });
        raw.push(sys::ordo_pipe {
            type_: if p.parallel {
                sys::ORDO_PIPE_PARALLEL
            } else {
                sys::ORDO_PIPE_SERIAL
            },
            fn_: Some(call_pipe),
            user_data: slot as *mut c_void,
        });
    }
    (slots, raw)
}

/// The array for the library: NULL when empty (which it refuses as no pipes).
fn array(pipes: &[sys::ordo_pipe]) -> *const sys::ordo_pipe {
    if pipes.is_empty() {
        ptr::null()
    } else {
        pipes.as_ptr()
    }
}

// ----------------------------------------------------------------------------------------------
// Pipeline
// ----------------------------------------------------------------------------------------------

impl EngineRef {
    /// A pipeline of `lines` lines over `pipes` on this engine (`ordo_pipeline_create`).
    ///
    /// Pipe 0 (always serial) generates tokens 0, 1, 2, ... until its closure calls
    /// [`Pipeflow::stop`]; every token then visits the other pipes in order, on one line, and a
    /// line holds one token at a time (the k-th token accepted since the last reset runs on line
    /// k mod `lines`). A serial pipe sees the tokens one at a time in the order pipe 0 accepted
    /// them; a parallel one runs up to `lines` of them at once. Pipe 0 may defer a token until
    /// another one has been accepted ([`Pipeflow::defer`]); the rules are those of
    /// `include/ordo/pipeline.h`. A closure may push ops, but must not wait on this engine
    /// (its waits and runs return [`ErrorKind::WouldDeadlock`](crate::ErrorKind::WouldDeadlock)).
    ///
    /// Errors: [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for 0 lines or
    /// more than 65,536, no pipes or more than 65,536, more than 2^20 lines x pipes, or a
    /// parallel first pipe; [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown) once the engine
    /// is shut down; [`ErrorKind::NoMemory`](crate::ErrorKind::NoMemory) (memory, or 65,535
    /// pipelines alive). On an error the pipes' closures are dropped.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use ordo::Pipe;
    ///
    /// # fn main() -> ordo::Result<()> {
    /// let engine = ordo::Engine::new()?;
    /// let written = Arc::new(Mutex::new(Vec::new()));
    /// let w = written.clone();
    /// let mut pipeline = engine.pipeline(
    ///     4,
    ///     vec![
    ///         Pipe::serial(|pf| {
    ///             // pipe 0: tokens 0, 1, 2, ... until it stops
    ///             if pf.token() == 10 {
    ///                 pf.stop()?; // no token 10
    ///             } else if pf.token() == 2 && pf.num_deferrals() == 0 {
    ///                 pf.defer(5)?; // token 2 comes back once pipe 0 accepted token 5
    ///             }
    ///             Ok(())
    ///         }),
    ///         Pipe::parallel(|_pf| Ok(())), // up to 4 tokens at once, in any order
    ///         Pipe::serial(move |pf| {
    ///             w.lock().unwrap().push(pf.token()); // in the order pipe 0 accepted them
    ///             Ok(())
    ///         }),
    ///     ],
    /// )?;
    /// pipeline.run()?; // blocks until the last token has left the last pipe
    /// assert_eq!(*written.lock().unwrap(), [0, 1, 3, 4, 5, 2, 6, 7, 8, 9]);
    /// assert_eq!(pipeline.num_tokens()?, 10);
    /// # Ok(()) }
    /// ```
    pub fn pipeline<I>(&self, lines: u32, pipes: I) -> Result<Pipeline>
    where
        I: IntoIterator<Item = Pipe>,
    {
        let shared = Arc::new(Shared::default());
        let (slots, raw) = make_pipes(pipes, &shared);
        let mut out = ptr::null_mut();
        // SAFETY: valid engine, array of raw.len() pipes (copied) and out pointer; the slots
        // the pipes point at live as long as the pipeline (below).
        let s = unsafe {
            sys::ordo_pipeline_create(self.as_ptr(), lines, array(&raw), raw.len(), &mut out)
        };
        let handle = match NonNull::new(out) {
            Some(h) if s == sys::ORDO_OK => h,
            _ => {
                let err = if s == sys::ORDO_OK {
                    Error::new(
                        sys::ORDO_ERR_INTERNAL,
                        "ordo_pipeline_create: NULL pipeline",
                    )
                } else {
                    Error::last(s) // before the closures' drops can make other ordo calls
                };
                drop(slots); // the library keeps nothing on failure
                return Err(err);
            }
        };
        Ok(Pipeline {
            raw: handle,
            engine: self.clone(),
            slots: ManuallyDrop::new(slots),
            shared,
            lines,
            pipes: raw.len(),
        })
    }
}

/// A pipeline ([`EngineRef::pipeline`]): runs ([`run`](Pipeline::run), blocking), pushed runs
/// ordered through vars ([`push`](Pipeline::push)), resets.
///
/// It owns the pipes' closures: they live until it is destroyed, or until
/// [`reset_pipes`](Pipeline::reset_pipes) replaced them, and are dropped then, once.
///
/// **Dropping it** destroys it. While a pushed run is in flight the library refuses that (and
/// the closures are still in use): the pipeline is then handed to a new thread that destroys
/// it, and drops the closures, as soon as the run is over (it polls, sleeping up to 10 ms
/// between tries). So a drop never blocks, never deadlocks (also inside one of the pipeline's
/// own callbacks) and never frees a closure the library may still call. A pushed run that
/// never ends (its op waits for a [`Completion`](crate::Completion) leaked with `mem::forget`)
/// keeps that thread polling, and the closures alive, for good; should the thread not start,
/// the closures are leaked. [`destroy`](Pipeline::destroy) reports the refusal instead.
///
/// `Pipeline` is `Send` and `Sync` (the library's handles are thread-safe, one run at a time;
/// the closures are `Send + Sync`). It holds an [`EngineRef`]; once the engine is shut down,
/// runs and pushes return [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown), and the
/// pipeline can still be destroyed.
pub struct Pipeline {
    raw: NonNull<sys::ordo_pipeline>,
    engine: EngineRef,
    /// Dropped by `Drop` (or by its helper thread), once the handle is destroyed.
    slots: ManuallyDrop<Slots>,
    shared: Arc<Shared>,
    lines: u32,
    pipes: usize,
}

// SAFETY: a pipeline handle may be used from any thread (include/ordo/pipeline.h); what it owns
// is Send + Sync (Slots, Arc<Shared>, EngineRef).
unsafe impl Send for Pipeline {}
unsafe impl Sync for Pipeline {}

impl Pipeline {
    /// Runs the pipeline until pipe 0 stops and every accepted token has left the last pipe,
    /// and returns then; the callbacks run on the engine's workers while this thread waits (on
    /// the naive engine, on this thread). Token ids and lines go on from the previous run
    /// unless the pipeline was reset.
    ///
    /// Errors:
    /// - [`ErrorKind::OpFailed`](crate::ErrorKind::OpFailed) when a closure returned `Err` or
    ///   panicked: no further callback started, and the pipeline needs
    ///   [`reset`](Pipeline::reset) before it runs again. The message is the library's (the
    ///   pipe, the token, its line, the code) followed by the closure's message ("panicked:
    ///   ..." for a panic), [`Error::op_code`] is the closure's code ([`FAILED`] for a panic),
    ///   and [`failure`](Pipeline::failure) keeps it until the reset.
    /// - [`ErrorKind::TokensDropped`](crate::ErrorKind::TokensDropped) when tokens whose
    ///   deferral could never be resolved were dropped: [`dropped`](Pipeline::dropped) names
    ///   them; the rest of the run happened and the pipeline may run again.
    /// - Before anything runs: [`ErrorKind::InvalidState`](crate::ErrorKind::InvalidState)
    ///   while a pushed run is in flight, or after a failed run until a reset;
    ///   [`ErrorKind::WouldDeadlock`](crate::ErrorKind::WouldDeadlock) from inside a callback
    ///   or op of the same engine; [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown) once
    ///   the engine is shut down; [`ErrorKind::NoMemory`](crate::ErrorKind::NoMemory).
    pub fn run(&mut self) -> Result<()> {
        // SAFETY: our live handle.
        let s = unsafe { sys::ordo_pipeline_run(self.raw.as_ptr()) };
        if s == sys::ORDO_OK {
            return Ok(());
        }
        let err = Error::last(s);
        if s == sys::ORDO_ERR_OP_FAILED {
            return Err(self.shared.explain(err));
        }
        Err(err)
    }

    /// Pushes one run of the pipeline as an op of its engine that reads `reads` and mutates
    /// `writes`, and returns at once: the run starts once the ops pushed before on those vars
    /// are done, and ops pushed after on them wait for the whole run.
    ///
    /// A failing run fails the op: a wait on a var it mutates returns
    /// [`ErrorKind::OpFailed`](crate::ErrorKind::OpFailed) with the failing closure's code as
    /// [`Error::op_code`] (its message is then in [`failure`](Pipeline::failure)), or code
    /// `ORDO_ERR_TOKENS_DROPPED` (12) when tokens were dropped. The run is in flight until its
    /// op has finished: meanwhile `run`, `push`, `reset`, `reset_pipes`, `dropped` and
    /// `destroy` return [`ErrorKind::InvalidState`](crate::ErrorKind::InvalidState) (and a
    /// drop hands the pipeline to a thread, see [`Pipeline`]). Other errors (nothing pushed):
    /// [`ErrorKind::InvalidHandle`](crate::ErrorKind::InvalidHandle) for a var of another
    /// engine, [`ErrorKind::InvalidState`](crate::ErrorKind::InvalidState) after a failed run
    /// until a reset, or inside a capture on this thread,
    /// [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown),
    /// [`ErrorKind::NoMemory`](crate::ErrorKind::NoMemory).
    pub fn push(&self, reads: &[&Var], writes: &[&Var]) -> Result<()> {
        self.push_with(&PushOptions::DEFAULT, reads, writes)
    }

    /// [`push`](Pipeline::push) with options: the name, priority (also that of the run's
    /// steps), property and device of the op that starts the run (the steps themselves run on
    /// the normal CPU workers).
    pub fn push_with(&self, opts: &PushOptions, reads: &[&Var], writes: &[&Var]) -> Result<()> {
        self.engine.check_vars(reads)?;
        self.engine.check_vars(writes)?;
        let raw_opts = opts.to_raw(None);
        let s = with_ids(reads, |r, nr| {
            with_ids(writes, |w, nw| {
                // SAFETY: our live handle, valid arrays and options (no free_fn).
                unsafe { sys::ordo_pipeline_push(self.raw.as_ptr(), r, nr, w, nw, &raw_opts) }
            })
        });
        check(s)
    }

    /// Restarts the pipeline: token ids and lines from 0; the dropped list, a failed run's
    /// error and [`failure`](Pipeline::failure) cleared.
    /// [`ErrorKind::InvalidState`](crate::ErrorKind::InvalidState) while a pushed run is in
    /// flight.
    pub fn reset(&mut self) -> Result<()> {
        // SAFETY: our live handle.
        check(unsafe { sys::ordo_pipeline_reset(self.raw.as_ptr()) })?;
        self.shared.clear();
        Ok(())
    }

    /// Replaces the pipes, and the number of lines unless `lines` is `None`, then resets the
    /// pipeline as [`reset`](Pipeline::reset) does. The old pipes' closures are dropped here,
    /// once the library has let go of them. On an error nothing changes and the new closures
    /// are dropped: [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) as for
    /// [`EngineRef::pipeline`] (`Some(0)` lines included),
    /// [`ErrorKind::InvalidState`](crate::ErrorKind::InvalidState) while a pushed run is in
    /// flight.
    pub fn reset_pipes<I>(&mut self, lines: Option<u32>, pipes: I) -> Result<()>
    where
        I: IntoIterator<Item = Pipe>,
    {
        let (slots, raw) = make_pipes(pipes, &self.shared);
        if lines == Some(0) {
            drop(slots);
            return Err(Error::new(
                sys::ORDO_ERR_INVALID_ARGUMENT,
                "ordo::Pipeline::reset_pipes: lines must be 1 to 65,536, not 0 (None keeps the \
                 current number)",
            ));
        }
        // SAFETY: our live handle, an array of raw.len() pipes (copied) whose slots are kept
        // below when the call succeeds.
        let s = unsafe {
            sys::ordo_pipeline_reset_pipes(
                self.raw.as_ptr(),
                lines.unwrap_or(0),
                array(&raw),
                raw.len(),
            )
        };
        if s != sys::ORDO_OK {
            let err = Error::last(s);
            drop(slots); // the library kept nothing: the old pipes are still in use
            return Err(err);
        }
        // From now on the library calls the new slots only, never the old ones.
        let old = std::mem::replace(&mut *self.slots, slots);
        self.lines = lines.unwrap_or(self.lines);
        self.pipes = raw.len();
        self.shared.clear();
        drop(old);
        Ok(())
    }

    /// The tokens generated since the last reset: the next fresh id (a deferred token counts,
    /// even one later dropped; the id pipe 0 stopped on does not). While a run is in flight, a
    /// snapshot.
    pub fn num_tokens(&self) -> Result<u64> {
        let mut n = 0;
        // SAFETY: our live handle and an out pointer.
        check(unsafe { sys::ordo_pipeline_num_tokens(self.raw.as_ptr(), &mut n) })?;
        Ok(n)
    }

    /// The ids of the tokens the last run dropped, ascending, until the next run or reset.
    /// [`ErrorKind::InvalidState`](crate::ErrorKind::InvalidState) while a run is in flight.
    pub fn dropped(&self) -> Result<Vec<u64>> {
        let mut ids: Vec<u64> = Vec::new();
        loop {
            let mut count = 0;
            let cap = ids.capacity();
            let p = if cap == 0 {
                ptr::null_mut()
            } else {
                ids.as_mut_ptr()
            };
            // SAFETY: our live handle; p is NULL with cap 0, or cap writable u64s.
            check(unsafe { sys::ordo_pipeline_dropped(self.raw.as_ptr(), &mut count, p, cap) })?;
            let count = usize::try_from(count).unwrap_or(usize::MAX);
            if count <= cap {
                // SAFETY: the library wrote the first min(count, cap) = count ids.
                unsafe { ids.set_len(count) };
                return Ok(ids);
            }
            // (on the second try only if a pushed run ended in between: ask again)
            ids.reserve_exact(count);
        }
    }

    /// The first failure of a closure since the last reset (its code and message: what
    /// [`run`](Pipeline::run) appends to its error), or `None`. For a pushed run, whose var
    /// carries only the library's message, this is where the closure's message is.
    pub fn failure(&self) -> Option<OpError> {
        self.shared.first()
    }

    /// The number of lines.
    pub fn num_lines(&self) -> u32 {
        self.lines
    }

    /// The number of pipes.
    pub fn num_pipes(&self) -> usize {
        self.pipes
    }

    /// The engine the pipeline runs on.
    pub fn engine(&self) -> &EngineRef {
        &self.engine
    }

    /// The raw handle, for calls through `ordo_sys` (still owned by this `Pipeline`: do not
    /// destroy it, nor replace its pipes).
    pub fn as_ptr(&self) -> *mut sys::ordo_pipeline {
        self.raw.as_ptr()
    }

    /// Destroys the pipeline now, dropping its closures on this thread. Refused while a pushed
    /// run is in flight: [`ErrorKind::InvalidState`](crate::ErrorKind::InvalidState), and the
    /// pipeline comes back in the [`PipelineDestroyError`] (wait for the run's op and try
    /// again). `?` turns the refusal into an [`Error`] (the pipeline is then dropped, see
    /// [`Pipeline`]).
    pub fn destroy(self) -> std::result::Result<(), PipelineDestroyError> {
        // SAFETY: our live handle.
        let s = unsafe { sys::ordo_pipeline_destroy(self.raw.as_ptr()) };
        if s != sys::ORDO_OK {
            let error = Error::last(s);
            return Err(PipelineDestroyError {
                pipeline: self,
                error,
            });
        }
        let mut me = ManuallyDrop::new(self); // the handle is gone: no second destroy
                                              // SAFETY: fields of a value that is never dropped, each dropped once, here.
        unsafe {
            ManuallyDrop::drop(&mut me.slots);
            ptr::drop_in_place(&mut me.engine);
            ptr::drop_in_place(&mut me.shared);
        }
        Ok(())
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        // SAFETY: our live handle.
        let s = unsafe { sys::ordo_pipeline_destroy(self.raw.as_ptr()) };
        if s != sys::ORDO_ERR_INVALID_STATE {
            // Destroyed (or destroyed through ordo_sys already): nothing calls the closures.
            // SAFETY: dropped once, here.
            unsafe { ManuallyDrop::drop(&mut self.slots) };
            return;
        }
        // A pushed run in flight: destroy the pipeline once it is over, from another thread, so
        // that this drop never waits (for itself inside a callback, or for a completion). The
        // slots go along and are dropped only after the destroy; if the thread does not start,
        // they are leaked rather than freed under the library.
        // SAFETY: taken once; self.slots is not used again.
        let slots = ManuallyDrop::new(unsafe { ManuallyDrop::take(&mut self.slots) });
        let p = SendPipeline(self.raw);
        let spawned = std::thread::Builder::new()
            .name("ordo-pipeline-drop".into())
            .spawn(move || {
                let (p, mut slots) = (p, slots);
                let mut nap = Duration::from_micros(50);
                // SAFETY: the handle is still ours (a refused destroy changes nothing).
                while unsafe { sys::ordo_pipeline_destroy(p.0.as_ptr()) }
                    == sys::ORDO_ERR_INVALID_STATE
                {
                    std::thread::sleep(nap);
                    nap = (nap * 2).min(Duration::from_millis(10));
                }
                // SAFETY: destroyed: the library no longer calls them.
                unsafe { ManuallyDrop::drop(&mut slots) };
            });
        if spawned.is_err() {
            eprintln!(
                "ordo: a Pipeline dropped while its pushed run was in flight could not be \
                 destroyed (no thread): its closures are kept until the process ends"
            );
        }
    }
}

impl fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pipeline")
            .field("raw", &self.raw)
            .field("lines", &self.lines)
            .field("pipes", &self.pipes)
            .finish()
    }
}

struct SendPipeline(NonNull<sys::ordo_pipeline>);
// SAFETY: pipeline handles may be destroyed on any thread.
unsafe impl Send for SendPipeline {}

/// A [`Pipeline::destroy`] that was refused: the error, and the pipeline, still alive.
#[derive(Debug)]
pub struct PipelineDestroyError {
    /// The pipeline, not destroyed.
    pub pipeline: Pipeline,
    /// Why: [`ErrorKind::InvalidState`](crate::ErrorKind::InvalidState) while a pushed run is
    /// in flight.
    pub error: Error,
}

impl fmt::Display for PipelineDestroyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl std::error::Error for PipelineDestroyError {}

/// The error alone; the pipeline is dropped (which destroys it once its pushed run is over).
impl From<PipelineDestroyError> for Error {
    fn from(e: PipelineDestroyError) -> Error {
        e.error
    }
}
