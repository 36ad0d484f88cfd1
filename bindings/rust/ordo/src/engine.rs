//! `Engine` (the owner: dropping it shuts the engine down), `EngineRef` (a counted reference that
//! any thread, op or var may hold) and the engine's configuration.
use std::ffi::CString;
use std::fmt;
use std::mem::{ManuallyDrop, MaybeUninit};
use std::ops::Deref;
use std::ptr::{self, NonNull};
use std::time::Duration;

use ordo_sys as sys;

use crate::error::{c_string, check, Error, OpError, Result};
use crate::op::{self, Exec, PushOptions};
use crate::var::Var;
use crate::wait::WaitFuture;

/// Which engine implementation runs the ops (SPEC §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Runs each op inside the push (or the call that makes it ready): a debugging aid, no
    /// worker threads.
    Naive,
    /// One shared pool of CPU workers.
    Pooled,
    /// Worker blocks per device and property (the default).
    PerDevice,
}

impl Kind {
    fn to_raw(self) -> i32 {
        match self {
            Kind::Naive => sys::ORDO_ENGINE_NAIVE,
            Kind::Pooled => sys::ORDO_ENGINE_POOLED,
            Kind::PerDevice => sys::ORDO_ENGINE_PER_DEVICE,
        }
    }

    fn from_raw(k: i32) -> Option<Kind> {
        match k {
            sys::ORDO_ENGINE_NAIVE => Some(Kind::Naive),
            sys::ORDO_ENGINE_POOLED => Some(Kind::Pooled),
            sys::ORDO_ENGINE_PER_DEVICE => Some(Kind::PerDevice),
            _ => None,
        }
    }
}

/// Builds an [`Engine`]. Fields left unset take their environment override (`ORDO_ENGINE`,
/// `ORDO_CPU_THREADS`, ...) or the library's default.
#[derive(Debug, Clone, Default)]
pub struct EngineBuilder {
    kind: Option<Kind>,
    cpu_threads: i32,
    cpu_priority_threads: i32,
    copy_threads: i32,
    max_pending: i32,
    pushers_help: bool,
    trace_path: Option<CString>,
    gpu_compute_streams: i32,
    gpu_stream_waits: i32,
}

impl EngineBuilder {
    /// The engine kind.
    pub fn kind(mut self, kind: Kind) -> Self {
        self.kind = Some(kind);
        self
    }
    /// CPU worker threads (1 to 1,024; default: hardware threads, at least 2).
    pub fn cpu_threads(mut self, n: u32) -> Self {
        self.cpu_threads = clamp_i32(n);
        self
    }
    /// Workers for [`Prop::CpuPrioritized`](crate::Prop::CpuPrioritized) ops (per-device kind).
    pub fn cpu_priority_threads(mut self, n: u32) -> Self {
        self.cpu_priority_threads = clamp_i32(n);
        self
    }
    /// Workers for each copy direction (per-device kind).
    pub fn copy_threads(mut self, n: u32) -> Self {
        self.copy_threads = clamp_i32(n);
        self
    }
    /// The submission window: a push from outside the engine's ops waits while more than this
    /// many ops are pending (at least 64; `None` turns the throttle off).
    pub fn max_pending(mut self, n: Option<u32>) -> Self {
        self.max_pending = match n {
            Some(n) => clamp_i32(n).max(1),
            None => -1,
        };
        self
    }
    /// Pushing threads run ready ops while the window is full (`ORDO_ENGINE_FLAG_PUSHERS_HELP`:
    /// read its caveats in the header before turning it on).
    pub fn pushers_help(mut self, on: bool) -> Self {
        self.pushers_help = on;
        self
    }
    /// Records every op and writes a Chrome trace JSON to this path at shutdown.
    pub fn trace_path(mut self, path: &str) -> Self {
        self.trace_path = Some(c_string(path));
        self
    }
    /// Compute streams per GPU, taken round robin by the GPU ops of [`Prop::Normal`] and
    /// [`Prop::CpuPrioritized`] (each copy direction has a stream of its own besides): 1 to 64,
    /// default 4 (env `ORDO_GPU_STREAMS`; 0 takes those, as leaving it unset does); another value
    /// makes [`build`](EngineBuilder::build) return
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument). Unused without a GPU.
    ///
    /// [`Prop::Normal`]: crate::Prop::Normal
    /// [`Prop::CpuPrioritized`]: crate::Prop::CpuPrioritized
    pub fn gpu_compute_streams(mut self, n: u32) -> Self {
        self.gpu_compute_streams = clamp_i32(n);
        self
    }
    /// Early release of GPU successors (SPEC §7; default on, env `ORDO_GPU_STREAM_WAITS`): a GPU
    /// op that depends only on GPU ops of the same GPU starts once their work is enqueued, its
    /// stream waiting for theirs on the device, instead of once their work has finished. If such
    /// a producer's work fails, an op that started early fails with its error as a skipped op
    /// does, though its closure ran. `false`: every successor starts once the work it depends on
    /// has finished.
    pub fn gpu_stream_waits(mut self, on: bool) -> Self {
        self.gpu_stream_waits = if on { 1 } else { -1 };
        self
    }

    /// Creates the engine and its workers.
    pub fn build(&self) -> Result<Engine> {
        let mut cfg = config_init();
        cfg.kind = self.kind.map_or(sys::ORDO_ENGINE_DEFAULT, Kind::to_raw);
        cfg.cpu_threads = self.cpu_threads;
        cfg.cpu_priority_threads = self.cpu_priority_threads;
        cfg.copy_threads = self.copy_threads;
        cfg.max_pending = self.max_pending;
        if self.pushers_help {
            cfg.flags |= sys::ORDO_ENGINE_FLAG_PUSHERS_HELP;
        }
        cfg.trace_path = self.trace_path.as_ref().map_or(ptr::null(), |p| p.as_ptr());
        cfg.gpu_compute_streams = self.gpu_compute_streams;
        cfg.gpu_stream_waits = self.gpu_stream_waits;
        let mut out = ptr::null_mut();
        // SAFETY: cfg is initialized with our struct's size; out is a valid out pointer.
        check(unsafe { sys::ordo_engine_create(&cfg, &mut out) })?;
        let ptr =
            NonNull::new(out).ok_or_else(|| Error::new(sys::ORDO_ERR_INTERNAL, "NULL engine"))?;
        Ok(Engine {
            r: ManuallyDrop::new(EngineRef { ptr }),
        })
    }
}

fn clamp_i32(n: u32) -> i32 {
    n.min(i32::MAX as u32) as i32
}

fn config_init() -> sys::ordo_engine_config {
    let mut cfg = MaybeUninit::<sys::ordo_engine_config>::zeroed();
    // SAFETY: writes at most size_of bytes into our zeroed struct (all-zero is a valid value:
    // integers and NULL pointers).
    unsafe {
        sys::ordo_engine_config_init_sized(
            cfg.as_mut_ptr(),
            std::mem::size_of::<sys::ordo_engine_config>(),
        );
        cfg.assume_init()
    }
}

/// An ordo engine: worker threads, queues and the vars made with it.
///
/// `Engine` owns the engine: dropping it runs every op pushed so far to completion (deferred
/// ops included: it waits for their [`Completion`](crate::Completion)s, which fail their op
/// when dropped), joins the workers, and makes later calls through any remaining
/// [`EngineRef`] or [`Var`] return [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown). Its methods are those of
/// [`EngineRef`] (through `Deref`). `Engine` is `Send` and `Sync`: push and wait from any
/// thread, through `&Engine`, an `Arc<Engine>` or an [`EngineRef`].
///
/// Dropped inside one of its own ops (the last `Arc<Engine>` moved into a closure), the
/// shutdown cannot wait on that thread; it is handed to a new thread, which finishes it once the
/// op has returned.
pub struct Engine {
    r: ManuallyDrop<EngineRef>,
}

impl Engine {
    /// An engine with the default configuration (and the environment's overrides).
    pub fn new() -> Result<Engine> {
        EngineBuilder::default().build()
    }

    /// A builder for an engine with other settings.
    pub fn builder() -> EngineBuilder {
        EngineBuilder::default()
    }

    /// A counted reference to this engine, for ops and other threads (`EngineRef::clone`).
    pub fn handle(&self) -> EngineRef {
        (*self.r).clone()
    }

    /// Shuts the engine down as dropping it does, and reports the outcome.
    /// [`ErrorKind::WouldDeadlock`](crate::ErrorKind::WouldDeadlock) from inside one of its ops (the shutdown then goes on in
    /// another thread, as for a drop).
    pub fn shutdown(self) -> Result<()> {
        let me = ManuallyDrop::new(self);
        destroy(me.r.ptr)
    }
}

fn destroy(ptr: NonNull<sys::ordo_engine>) -> Result<()> {
    // SAFETY: we hold the creator's reference, which destroy drops.
    let s = unsafe { sys::ordo_engine_destroy(ptr.as_ptr()) };
    if s == sys::ORDO_ERR_WOULD_DEADLOCK {
        let err = Error::last(s);
        let p = SendPtr(ptr);
        let spawned = std::thread::Builder::new()
            .name("ordo-destroy".into())
            .spawn(move || {
                let p = p;
                // SAFETY: the reference is still ours (the refused destroy changed nothing).
                unsafe { sys::ordo_engine_destroy(p.0.as_ptr()) };
            });
        if spawned.is_err() {
            eprintln!(
                "ordo: an Engine dropped inside its own op could not be shut down (no thread)"
            );
        }
        return Err(err);
    }
    check(s)
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = destroy(self.r.ptr);
    }
}

impl Deref for Engine {
    type Target = EngineRef;
    fn deref(&self) -> &EngineRef {
        &self.r
    }
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Engine").field(&self.r.ptr).finish()
    }
}

struct SendPtr(NonNull<sys::ordo_engine>);
// SAFETY: the C library is thread-safe; the pointer is a reference we own.
unsafe impl Send for SendPtr {}

/// A counted reference to an engine (`ordo_engine_retain` / `ordo_engine_release`): cloning
/// adds a reference, dropping releases it. It keeps the engine's memory alive, not its workers:
/// once the [`Engine`] is dropped, calls through it return [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown) (read-only
/// queries still answer). Each [`Var`] holds one, so a var can never outlive its engine's memory.
pub struct EngineRef {
    pub(crate) ptr: NonNull<sys::ordo_engine>,
}

// SAFETY: every ordo function is thread-safe (include/ordo/ordo.h), and the engine's memory
// lives as long as the reference.
unsafe impl Send for EngineRef {}
unsafe impl Sync for EngineRef {}

impl Clone for EngineRef {
    fn clone(&self) -> EngineRef {
        // SAFETY: we hold a reference, so the engine is alive.
        let s = unsafe { sys::ordo_engine_retain(self.ptr.as_ptr()) };
        if s != sys::ORDO_OK {
            panic!("ordo: cannot add an engine reference: {}", Error::last(s));
        }
        EngineRef { ptr: self.ptr }
    }
}

impl Drop for EngineRef {
    fn drop(&mut self) {
        // SAFETY: we hold this reference.
        let s = unsafe { sys::ordo_engine_release(self.ptr.as_ptr()) };
        if s == sys::ORDO_ERR_WOULD_DEADLOCK {
            // The last reference, let go inside one of the engine's own ops (possible only when
            // the Engine itself was dropped in an op): release it from a thread of its own.
            let p = SendPtr(self.ptr);
            let _ = std::thread::Builder::new()
                .name("ordo-release".into())
                .spawn(move || {
                    let p = p;
                    // SAFETY: the refused release kept our reference.
                    unsafe { sys::ordo_engine_release(p.0.as_ptr()) };
                });
        }
    }
}

impl PartialEq for EngineRef {
    fn eq(&self, other: &EngineRef) -> bool {
        self.ptr == other.ptr
    }
}
impl Eq for EngineRef {}

impl fmt::Debug for EngineRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("EngineRef").field(&self.ptr).finish()
    }
}

/// A snapshot of an engine's counters (of the caller's ops).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Worker threads running.
    pub workers: u32,
    /// Ops accepted since the engine was created.
    pub pushed: u64,
    /// Ops finished: ran, failed or skipped.
    pub completed: u64,
    /// Ops that failed, skipped ones included.
    pub failed: u64,
    /// Ops not run because a var they use carried an error.
    pub skipped: u64,
    /// Pushed and not completed.
    pub pending: u64,
    /// Ready and waiting for a worker.
    pub ready: u64,
}

/// The engine's effective configuration (after the environment and defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The engine kind.
    pub kind: Option<Kind>,
    /// CPU workers.
    pub cpu_threads: i32,
    /// CPU-prioritized workers.
    pub cpu_priority_threads: i32,
    /// Workers per copy direction.
    pub copy_threads: i32,
    /// The submission window (-1: none).
    pub max_pending: i32,
    /// Pushers help (`ORDO_ENGINE_FLAG_PUSHERS_HELP`).
    pub pushers_help: bool,
    /// Compute streams per GPU.
    pub gpu_compute_streams: i32,
    /// Early release of GPU successors ([`EngineBuilder::gpu_stream_waits`]).
    pub gpu_stream_waits: bool,
}

impl EngineRef {
    /// The raw engine pointer, for calls through `ordo_sys` (no reference is added).
    pub fn as_ptr(&self) -> *mut sys::ordo_engine {
        self.ptr.as_ptr()
    }

    /// A new var.
    pub fn new_var(&self) -> Result<Var> {
        let mut id = 0;
        // SAFETY: valid engine and out pointer.
        check(unsafe { sys::ordo_var_new(self.as_ptr(), &mut id) })?;
        Ok(Var::from_raw(self.clone(), id))
    }

    /// Pushes an op that reads `reads` and mutates `writes`, with default options. The closure
    /// runs once, on a worker thread (inside this call for the naive engine); `Ok(())` completes
    /// the op, `Err` fails it with the error's code and message, and so does a panic (caught:
    /// code [`FAILED`](crate::FAILED), message "panicked: ..."). If a var it uses carries an
    /// error when its turn comes, it is not run (skipped) and is dropped unrun.
    ///
    /// Inside [`capture`](EngineRef::capture) on this thread (outside ops), it returns
    /// [`ErrorKind::InvalidState`](crate::ErrorKind::InvalidState) and drops `f`: a captured op
    /// runs once per launch, so it is recorded with [`Capture::push`](crate::Capture::push).
    ///
    /// ```no_run
    /// # fn main() -> ordo::Result<()> {
    /// let engine = ordo::Engine::new()?;
    /// let (a, b) = (engine.new_var()?, engine.new_var()?);
    /// engine.push(&[&a], &[&b], |_| Ok(()))?; // reads a, mutates b
    /// engine.wait(&b)?;
    /// # Ok(()) }
    /// ```
    pub fn push<F>(&self, reads: &[&Var], writes: &[&Var], f: F) -> Result<()>
    where
        F: FnOnce(&mut Exec<'_>) -> std::result::Result<(), OpError> + Send + 'static,
    {
        self.push_with(&PushOptions::DEFAULT, reads, writes, f)
    }

    /// [`push`](EngineRef::push) with options: name, priority, property, device.
    pub fn push_with<F>(
        &self,
        opts: &PushOptions,
        reads: &[&Var],
        writes: &[&Var],
        f: F,
    ) -> Result<()>
    where
        F: FnOnce(&mut Exec<'_>) -> std::result::Result<(), OpError> + Send + 'static,
    {
        if crate::graph::capturing(self.ptr) {
            return Err(Error::new(
                sys::ORDO_ERR_INVALID_STATE,
                "ordo::EngineRef::push: this thread is capturing the engine's pushes \
                 (EngineRef::capture) and a captured op runs once per launch, which a FnOnce \
                 closure cannot: record it with Capture::push (an Fn closure)",
            ));
        }
        self.check_vars(reads)?;
        self.check_vars(writes)?;
        op::push(self, opts, reads, writes, f)
    }

    /// Creates a prepared op: a closure and var lists checked and stored once, pushed many times
    /// with [`Prepared::push`](crate::Prepared::push) at less cost. The closure runs once per
    /// push, possibly on several workers at once when the vars allow it.
    pub fn prepare<F>(
        &self,
        opts: &PushOptions,
        reads: &[&Var],
        writes: &[&Var],
        f: F,
    ) -> Result<crate::Prepared>
    where
        F: Fn(&mut Exec<'_>) -> std::result::Result<(), OpError> + Send + Sync + 'static,
    {
        self.check_vars(reads)?;
        self.check_vars(writes)?;
        op::prepare(self, opts, reads, writes, f)
    }

    pub(crate) fn check_vars(&self, vars: &[&Var]) -> Result<()> {
        for v in vars {
            if v.engine().ptr != self.ptr {
                return Err(Error::new(
                    sys::ORDO_ERR_INVALID_HANDLE,
                    format!("var {:#x} belongs to another engine", v.id()),
                ));
            }
        }
        Ok(())
    }

    /// Blocks until every op pushed before this call that uses `var` has completed.
    /// [`ErrorKind::OpFailed`](crate::ErrorKind::OpFailed) when `var` is then in an error state (the message names the op,
    /// [`Error::op_code`] has its code); [`ErrorKind::WouldDeadlock`](crate::ErrorKind::WouldDeadlock) from inside an op of this
    /// engine (push a follow-up op instead).
    pub fn wait(&self, var: &Var) -> Result<()> {
        self.check_vars(&[var])?;
        // SAFETY: valid engine.
        let s = unsafe { sys::ordo_wait_for_var(self.as_ptr(), var.id()) };
        self.wait_result(s, var)
    }

    /// [`wait`](EngineRef::wait), giving up after `timeout` with [`ErrorKind::Timeout`](crate::ErrorKind::Timeout)
    /// (`Duration::ZERO` polls).
    pub fn wait_timeout(&self, var: &Var, timeout: Duration) -> Result<()> {
        self.check_vars(&[var])?;
        // SAFETY: valid engine.
        let s = unsafe { sys::ordo_wait_for_var_timeout(self.as_ptr(), var.id(), nanos(timeout)) };
        self.wait_result(s, var)
    }

    fn wait_result(&self, s: i32, var: &Var) -> Result<()> {
        if s == sys::ORDO_OK {
            return Ok(());
        }
        let err = Error::last(s);
        if s != sys::ORDO_ERR_OP_FAILED {
            return Err(err);
        }
        let mut code = 0;
        // SAFETY: valid engine and out pointer; no buffer.
        let q = unsafe {
            sys::ordo_var_get_error(self.as_ptr(), var.id(), &mut code, ptr::null_mut(), 0)
        };
        Err(err.with_op_code(if q == sys::ORDO_OK && code != 0 {
            Some(code)
        } else {
            None
        }))
    }

    /// A future that resolves once every op pushed on `var` before this call has completed, to
    /// `Ok(())` or the error a [`wait`](EngineRef::wait) would return; it never blocks a thread
    /// (`ordo_wait_for_var_async`). It needs no async runtime: any executor polls it.
    pub fn wait_async(&self, var: &Var) -> WaitFuture {
        match self.check_vars(&[var]) {
            Ok(()) => WaitFuture::start(self.as_ptr(), var.id()),
            Err(e) => WaitFuture::failed(e),
        }
    }

    /// Blocks until every op pushed before this call has completed. [`ErrorKind::OpFailed`](crate::ErrorKind::OpFailed) if
    /// any op failed (or was skipped) since the previous `wait_all`, with the first failure's
    /// message; that record is then cleared.
    pub fn wait_all(&self) -> Result<()> {
        // SAFETY: valid engine.
        check(unsafe { sys::ordo_wait_for_all(self.as_ptr()) })
    }

    /// [`wait_all`](EngineRef::wait_all), giving up after `timeout` with [`ErrorKind::Timeout`](crate::ErrorKind::Timeout)
    /// (the failure record is then kept).
    pub fn wait_all_timeout(&self, timeout: Duration) -> Result<()> {
        // SAFETY: valid engine.
        check(unsafe { sys::ordo_wait_for_all_timeout(self.as_ptr(), nanos(timeout)) })
    }

    /// The engine's counters now.
    pub fn stats(&self) -> Result<Stats> {
        let mut st = MaybeUninit::<sys::ordo_stats>::zeroed();
        // SAFETY: zeroed is a valid ordo_stats; struct_size set before the call.
        let st = unsafe {
            (*st.as_mut_ptr()).struct_size = std::mem::size_of::<sys::ordo_stats>() as u32;
            check(sys::ordo_engine_stats(self.as_ptr(), st.as_mut_ptr()))?;
            st.assume_init()
        };
        Ok(Stats {
            workers: st.workers,
            pushed: st.pushed,
            completed: st.completed,
            failed: st.failed,
            skipped: st.skipped,
            pending: st.pending,
            ready: st.ready,
        })
    }

    /// The effective configuration.
    pub fn config(&self) -> Result<Config> {
        let mut cfg = config_init();
        // SAFETY: struct_size set by init.
        check(unsafe { sys::ordo_engine_get_config(self.as_ptr(), &mut cfg) })?;
        Ok(Config {
            kind: Kind::from_raw(cfg.kind),
            cpu_threads: cfg.cpu_threads,
            cpu_priority_threads: cfg.cpu_priority_threads,
            copy_threads: cfg.copy_threads,
            max_pending: cfg.max_pending,
            pushers_help: cfg.flags & sys::ORDO_ENGINE_FLAG_PUSHERS_HELP != 0,
            gpu_compute_streams: cfg.gpu_compute_streams,
            gpu_stream_waits: cfg.gpu_stream_waits > 0,
        })
    }

    /// Writes the op records so far as Chrome trace JSON (tracing must be on: see
    /// [`EngineBuilder::trace_path`]).
    pub fn write_trace(&self, path: &str) -> Result<()> {
        let p = c_string(path);
        // SAFETY: valid engine and C string.
        check(unsafe { sys::ordo_engine_write_trace(self.as_ptr(), p.as_ptr()) })
    }
}

pub(crate) fn nanos(d: Duration) -> u64 {
    d.as_nanos().min(u64::MAX as u128) as u64
}
