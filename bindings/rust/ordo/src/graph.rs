//! Capture and replay (`ordo_graph_*`): [`EngineRef::capture`] records a closure's pushes as a
//! [`Graph`], which [`Graph::launch`] pushes again, as many times as wanted.
//!
//! What the binding adds to the C contract (include/ordo/ordo.h, "Capture and replay"):
//! - The capture is a closure: it ends however the closure ends (`Ok`, `Err` or a panic), so the
//!   engine is never left capturing; a recording that is not returned is destroyed at once.
//! - A captured op runs once per launch, so it is an `Fn + Send + Sync` closure, pushed through
//!   [`Capture::push`]; [`EngineRef::push`] (`FnOnce`) is refused inside the capture. A thread-
//!   local says which engine this thread captures, hidden while an op of that engine runs on
//!   the thread (the library does not record pushes from inside ops either).
//! - A [`Var`](crate::Var) of the captured engine dropped during the capture (when the library
//!   refuses var deletes) is deleted when the capture ends.
//! - A [`Graph`] owns its handle: dropping it destroys it, waiting (on a thread of its own) for
//!   launched ops still in flight.
use std::cell::{Cell, RefCell};
use std::fmt;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ptr::{self, NonNull};
use std::time::Duration;

use ordo_sys as sys;

use crate::engine::EngineRef;
use crate::error::{check, Error, OpError, Result};
use crate::op::{self, Exec, PushOptions};
use crate::var::Var;

thread_local! {
    /// The engine whose pushes this thread records through `EngineRef::capture`, while no op of
    /// that engine runs on this thread's stack; null otherwise.
    static CAPTURING: Cell<*mut sys::ordo_engine> = const { Cell::new(ptr::null_mut()) };
    /// Vars of the captured engine dropped during the capture, deleted once it ends.
    static DEFERRED_DELETES: RefCell<Vec<sys::ordo_var>> = const { RefCell::new(Vec::new()) };
}

/// Whether this thread records `engine`'s pushes now (outside its ops).
pub(crate) fn capturing(engine: NonNull<sys::ordo_engine>) -> bool {
    CAPTURING
        .try_with(|c| c.get() == engine.as_ptr())
        .unwrap_or(false)
}

/// Called by a `Var`'s drop: during a capture of its engine (which refuses var deletes), the
/// delete is put off until the capture ends, and this returns true.
pub(crate) fn defer_delete(engine: NonNull<sys::ordo_engine>, var: sys::ordo_var) -> bool {
    capturing(engine)
        && DEFERRED_DELETES
            .try_with(|d| d.borrow_mut().push(var))
            .is_ok()
}

/// Held while an op's closure runs: hides a capture of the op's engine on this thread, since
/// the library never records pushes made from inside an op.
pub(crate) struct OpScope {
    hidden: *mut sys::ordo_engine,
}

impl OpScope {
    pub(crate) fn enter(engine: NonNull<sys::ordo_engine>) -> OpScope {
        let hidden = CAPTURING
            .try_with(|c| {
                if c.get() == engine.as_ptr() {
                    c.replace(ptr::null_mut())
                } else {
                    ptr::null_mut()
                }
            })
            .unwrap_or(ptr::null_mut());
        OpScope { hidden }
    }
}

impl Drop for OpScope {
    fn drop(&mut self) {
        if !self.hidden.is_null() {
            let _ = CAPTURING.try_with(|c| c.set(self.hidden));
        }
    }
}

/// An open capture, ended by [`finish`](OpenCapture::finish) or, on an early exit or a panic,
/// by its drop (which destroys what was recorded).
struct OpenCapture<'a> {
    engine: &'a EngineRef,
    open: bool,
}

impl<'a> OpenCapture<'a> {
    fn begin(engine: &'a EngineRef) -> Result<OpenCapture<'a>> {
        // SAFETY: valid engine.
        check(unsafe { sys::ordo_graph_begin_capture(engine.as_ptr()) })?;
        // The library allows one capture per thread, so none was recorded here before.
        let _ = CAPTURING.try_with(|c| c.set(engine.as_ptr()));
        Ok(OpenCapture { engine, open: true })
    }

    /// Ends the capture: the recorded graph, or why there is none.
    fn finish(&mut self) -> Result<Graph> {
        self.open = false;
        let _ = CAPTURING.try_with(|c| c.set(ptr::null_mut()));
        let mut out = ptr::null_mut();
        // SAFETY: valid engine and out pointer; the capture was begun on this thread.
        let s = unsafe { sys::ordo_graph_end_capture(self.engine.as_ptr(), &mut out) };
        let r = match NonNull::new(out) {
            Some(raw) if s == sys::ORDO_OK => Ok(Graph {
                raw,
                engine: self.engine.clone(),
            }),
            _ if s == sys::ORDO_OK => Err(Error::new(sys::ORDO_ERR_INTERNAL, "NULL graph")),
            _ => Err(Error::last(s)),
        };
        // Vars dropped during the capture: deleted now, after the recorded pushes that use them
        // (a launch then stops at the first op that uses one, with ErrorKind::InvalidHandle).
        let deferred = DEFERRED_DELETES
            .try_with(|d| std::mem::take(&mut *d.borrow_mut()))
            .unwrap_or_default();
        for v in deferred {
            // SAFETY: valid engine; the var was this engine's and was not deleted yet.
            unsafe { sys::ordo_var_delete(self.engine.as_ptr(), v) };
        }
        r
    }
}

impl Drop for OpenCapture<'_> {
    fn drop(&mut self) {
        if self.open {
            if let Ok(g) = self.finish() {
                // Never launched, so never in flight: destroyed now, closures dropped.
                let _ = g.destroy();
            }
        }
    }
}

/// What the closure of [`EngineRef::capture`] records its pushes with. Only there, on the
/// capturing thread: it is neither `Send` nor `Sync`.
///
/// A captured op runs once per launch, so a `FnOnce` closure is refused at compile time:
///
/// ```compile_fail
/// # fn main() -> ordo::Result<()> {
/// let engine = ordo::Engine::new()?;
/// let v = engine.new_var()?;
/// let once = String::from("moved out by the first call");
/// let graph = engine.capture(|cap| {
///     cap.push(&[], &[&v], move |_| {
///         drop(once); // FnOnce: not Fn
///         Ok(())
///     })
/// })?;
/// # Ok(()) }
/// ```
///
/// and so is a push from another thread (which the library would not record):
///
/// ```compile_fail
/// # fn main() -> ordo::Result<()> {
/// let engine = ordo::Engine::new()?;
/// let v = engine.new_var()?;
/// let graph = engine.capture(|cap| {
///     std::thread::scope(|s| {
///         s.spawn(|| cap.push(&[], &[&v], |_| Ok(()))); // Capture is not Sync
///     });
///     Ok(())
/// })?;
/// # Ok(()) }
/// ```
pub struct Capture<'a> {
    engine: &'a EngineRef,
    _not_send: PhantomData<*const ()>,
}

impl<'a> Capture<'a> {
    /// Records a push of `f` reading `reads` and mutating `writes` (default options): nothing
    /// runs now; each launch of the graph pushes it again. The push is checked as a push would
    /// be (a var of another engine or a stale var is an error, and nothing is recorded).
    ///
    /// `f` runs once per launch, on whichever worker runs that launch's op, and possibly on two
    /// at once (two launches of an op that only reads, or that uses no var), hence `Fn + Sync`.
    /// It is dropped once, when the graph is destroyed. `Err` and panics fail that launch's op
    /// as they fail a pushed op.
    pub fn push<F>(&self, reads: &[&Var], writes: &[&Var], f: F) -> Result<()>
    where
        F: Fn(&mut Exec<'_>) -> std::result::Result<(), OpError> + Send + Sync + 'static,
    {
        self.push_with(&PushOptions::DEFAULT, reads, writes, f)
    }

    /// [`push`](Capture::push) with options (name, priority, property, device), which every
    /// launch uses.
    pub fn push_with<F>(
        &self,
        opts: &PushOptions,
        reads: &[&Var],
        writes: &[&Var],
        f: F,
    ) -> Result<()>
    where
        F: Fn(&mut Exec<'_>) -> std::result::Result<(), OpError> + Send + Sync + 'static,
    {
        self.engine.check_vars(reads)?;
        self.engine.check_vars(writes)?;
        op::push_shared(self.engine, opts, reads, writes, f)
    }

    /// The engine being captured.
    pub fn engine(&self) -> &'a EngineRef {
        self.engine
    }
}

impl fmt::Debug for Capture<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Capture").field(&self.engine).finish()
    }
}

impl EngineRef {
    /// Records the pushes `record` makes through its [`Capture`] as a [`Graph`], running none of
    /// them: each [`Graph::launch`] then pushes them again, in the same order, as if they were
    /// pushed again at that moment (same closures, vars and options; ordered against every
    /// other push and wait through the vars; failures and skips as for pushed ops).
    ///
    /// [`Prepared::push`](crate::Prepared::push) of this engine inside `record` is recorded too
    /// (the graph keeps the prepared op alive until it is destroyed). While `record` runs, this
    /// thread's waits, var clears and graph launches on this engine return
    /// [`ErrorKind::InvalidState`](crate::ErrorKind::InvalidState), and so does
    /// [`push`](EngineRef::push) (its `FnOnce` closure could not run once per launch: use
    /// [`Capture::push`]). A [`Var`] of this engine dropped inside `record` is deleted when the
    /// capture ends. Ops and other threads push, wait and delete as usual meanwhile, unrecorded.
    ///
    /// The capture ends whatever `record` does. If it returns `Err` (its `?`) or panics, what
    /// was recorded is destroyed (the closures dropped, nothing run) and the error is returned,
    /// or the panic goes on. Errors of the capture itself:
    /// [`ErrorKind::InvalidState`](crate::ErrorKind::InvalidState) when this thread is already
    /// capturing (captures do not nest) or runs an op of this engine,
    /// [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown) when the engine is (or gets) shut
    /// down, [`ErrorKind::NoMemory`](crate::ErrorKind::NoMemory).
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    ///
    /// # fn main() -> ordo::Result<()> {
    /// let engine = ordo::Engine::new()?;
    /// let v = engine.new_var()?;
    /// let log = Arc::new(Mutex::new(Vec::new()));
    /// let graph = engine.capture(|cap| {
    ///     for step in ["load", "step"] {
    ///         let log = log.clone();
    ///         cap.push(&[], &[&v], move |_| {
    ///             log.lock().unwrap().push(step);
    ///             Ok(())
    ///         })?;
    ///     }
    ///     Ok(())
    /// })?;
    /// assert!(log.lock().unwrap().is_empty()); // recorded, not run
    /// for _ in 0..3 {
    ///     graph.launch()?; // asynchronous, like a push
    /// }
    /// engine.wait(&v)?;
    /// assert_eq!(*log.lock().unwrap(), ["load", "step"].repeat(3));
    /// graph.destroy()?; // the captured closures are dropped here
    /// # Ok(()) }
    /// ```
    pub fn capture<F>(&self, record: F) -> Result<Graph>
    where
        F: FnOnce(&Capture<'_>) -> Result<()>,
    {
        let mut open = OpenCapture::begin(self)?;
        let cap = Capture {
            engine: self,
            _not_send: PhantomData,
        };
        let recorded = record(&cap);
        match (recorded, open.finish()) {
            (Ok(()), graph) => graph,
            (Err(e), Ok(graph)) => {
                let _ = graph.destroy(); // never launched: never in flight
                Err(e)
            }
            (Err(e), Err(_)) => Err(e),
        }
    }
}

/// A captured sequence of pushes ([`EngineRef::capture`]), launched any number of times.
///
/// It keeps the captured closures alive, and drops them once, when it is destroyed:
/// [`destroy`](Graph::destroy) says whether it could be (not while ops of a launch are in
/// flight); **dropping it** destroys it at once when no launch is in flight, and otherwise hands
/// it to a new thread that destroys it as soon as those ops have finished (it polls, sleeping up
/// to 10 ms between tries), so a drop never blocks, never deadlocks, and drops the closures
/// exactly once. An op of a launch that never finishes (a [`Completion`](crate::Completion)
/// leaked with `mem::forget`) keeps that thread polling, and the closures alive, for good.
///
/// `Graph` is `Send` and `Sync`: any thread may launch it, several at once. It holds an
/// [`EngineRef`]; once the engine is shut down, launches return
/// [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown) and destroy still works.
pub struct Graph {
    raw: NonNull<sys::ordo_graph>,
    engine: EngineRef,
}

// SAFETY: a graph handle may be launched from any thread, by several at once, and destroyed on
// any thread (include/ordo/ordo.h); the closures it keeps are Send + Sync (Capture::push), or
// prepared ops' (Send + Sync as well), or FnOnce ones whose Job lets one call through (op.rs).
unsafe impl Send for Graph {}
unsafe impl Sync for Graph {}

impl Graph {
    /// Pushes the captured ops again, in capture order, as the captured pushes made now by this
    /// thread would be. Asynchronous like a push (the naive engine and
    /// [`Prop::Async`](crate::Prop::Async) ops run inline); wait for them through their vars
    /// or [`EngineRef::wait_all`].
    ///
    /// Errors: [`ErrorKind::InvalidHandle`](crate::ErrorKind::InvalidHandle) when a var the
    /// graph uses was deleted (the ops before the first one using it were pushed; the message
    /// says which and how many), [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown) once the
    /// engine is shut down, [`ErrorKind::InvalidState`](crate::ErrorKind::InvalidState) inside a
    /// capture of its engine on this thread, [`ErrorKind::NoMemory`](crate::ErrorKind::NoMemory).
    pub fn launch(&self) -> Result<()> {
        // SAFETY: our live handle (a stale one would be an error, not UB).
        check(unsafe { sys::ordo_graph_launch(self.raw.as_ptr()) })
    }

    /// Destroys the graph now, dropping its captured closures on this thread, once each, in
    /// capture order. Refused while a launch is in flight (being pushed, or ops of it not
    /// finished): [`ErrorKind::InvalidState`](crate::ErrorKind::InvalidState), and the graph
    /// comes back in the [`DestroyError`] (wait for its ops, e.g. with
    /// [`EngineRef::wait_all`], and try again). `?` turns a `DestroyError` into an [`Error`]
    /// (the graph is then dropped, see [`Graph`]).
    pub fn destroy(self) -> std::result::Result<(), DestroyError> {
        // SAFETY: our live handle.
        let s = unsafe { sys::ordo_graph_destroy(self.raw.as_ptr()) };
        if s == sys::ORDO_OK {
            let me = ManuallyDrop::new(self); // the handle is gone: no second destroy
                                              // SAFETY: read once from a value that is never dropped; releases its reference.
            drop(unsafe { ptr::read(&me.engine) });
            return Ok(());
        }
        let error = Error::last(s);
        Err(DestroyError { graph: self, error })
    }

    /// The engine whose pushes the graph recorded.
    pub fn engine(&self) -> &EngineRef {
        &self.engine
    }

    /// The raw handle, for calls through `ordo_sys` (still owned by this `Graph`).
    pub fn as_ptr(&self) -> *mut sys::ordo_graph {
        self.raw.as_ptr()
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        // SAFETY: our live handle.
        let s = unsafe { sys::ordo_graph_destroy(self.raw.as_ptr()) };
        if s != sys::ORDO_ERR_INVALID_STATE {
            return; // destroyed (or a handle already destroyed through ordo_sys)
        }
        // Ops of a launch in flight: destroy it once they have finished, from another thread,
        // so that this drop can never wait for itself (inside an op, or before a completion).
        let g = SendGraph(self.raw);
        let spawned = std::thread::Builder::new()
            .name("ordo-graph-drop".into())
            .spawn(move || {
                let g = g;
                let mut nap = Duration::from_micros(50);
                // SAFETY: the handle is still ours (a refused destroy changes nothing).
                while unsafe { sys::ordo_graph_destroy(g.0.as_ptr()) }
                    == sys::ORDO_ERR_INVALID_STATE
                {
                    std::thread::sleep(nap);
                    nap = (nap * 2).min(Duration::from_millis(10));
                }
            });
        if spawned.is_err() {
            eprintln!(
                "ordo: a Graph dropped while its launch was in flight could not be destroyed (no \
                 thread): its closures are kept until the process ends"
            );
        }
    }
}

impl fmt::Debug for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Graph")
            .field("raw", &self.raw)
            .field("engine", &self.engine)
            .finish()
    }
}

struct SendGraph(NonNull<sys::ordo_graph>);
// SAFETY: graph handles may be destroyed on any thread; what they keep is Send.
unsafe impl Send for SendGraph {}

/// A [`Graph::destroy`] that was refused: the error, and the graph, still alive.
#[derive(Debug)]
pub struct DestroyError {
    /// The graph, not destroyed.
    pub graph: Graph,
    /// Why: [`ErrorKind::InvalidState`](crate::ErrorKind::InvalidState) while a launch is in
    /// flight.
    pub error: Error,
}

impl fmt::Display for DestroyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl std::error::Error for DestroyError {}

/// The error alone; the graph is dropped (which destroys it once its launches are over).
impl From<DestroyError> for Error {
    fn from(e: DestroyError) -> Error {
        e.error
    }
}
