//! Ops: push options, the closure trampolines, `Exec` (what a running op sees), `Completion`
//! (a deferred op's one-shot completer) and prepared ops.
//!
//! A closure crosses into C as a `Box` passed as `user_data`, with a monomorphized `extern "C"`
//! trampoline as `fn` and another as `free_fn` (which drops the box, whether the op ran, failed
//! or was skipped; on a failed push the box is reclaimed here). Nothing unwinds into C: the
//! closure runs under `catch_unwind`, and so does the box's drop.
//!
//! A push recorded in a graph (`ordo_graph_begin_capture`) has its `fn` called once per launch,
//! possibly on several workers at once, and its `free_fn` once, when the graph is destroyed.
//! Prepared ops and [`Capture::push`](crate::Capture::push) take `Fn + Sync` closures, made for
//! that. A `FnOnce` push is refused inside [`EngineRef::capture`]; should one be recorded
//! anyway (a capture begun through `ordo_sys`), its closure still runs at most once: later
//! launches fail that op instead of calling it again.
use std::any::Any;
use std::cell::UnsafeCell;
use std::ffi::{CStr, CString};
use std::fmt;
use std::marker::PhantomData;
use std::mem::{ManuallyDrop, MaybeUninit};
use std::os::raw::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, Ordering};

use ordo_sys as sys;

use crate::engine::EngineRef;
use crate::error::{c_string, check, Error, OpError, Result, FAILED};
use crate::graph::OpScope;
use crate::var::Var;

/// Which workers run an op (`ORDO_PROP_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Prop {
    /// CPU workers (the default).
    Normal,
    /// Per-device kind: a dedicated CPU priority worker.
    CpuPrioritized,
    /// Per-device kind: upload workers.
    CopyToDevice,
    /// Per-device kind: download workers.
    CopyFromDevice,
    /// Runs inline on whichever thread makes it ready (the pusher, or the thread completing its
    /// last dependency): for short ops that start asynchronous work and defer.
    Async,
}

impl Prop {
    fn to_raw(self) -> i32 {
        match self {
            Prop::Normal => sys::ORDO_PROP_NORMAL,
            Prop::CpuPrioritized => sys::ORDO_PROP_CPU_PRIORITIZED,
            Prop::CopyToDevice => sys::ORDO_PROP_COPY_TO_DEVICE,
            Prop::CopyFromDevice => sys::ORDO_PROP_COPY_FROM_DEVICE,
            Prop::Async => sys::ORDO_PROP_ASYNC,
        }
    }

    fn from_raw(p: i32) -> Prop {
        match p {
            sys::ORDO_PROP_CPU_PRIORITIZED => Prop::CpuPrioritized,
            sys::ORDO_PROP_COPY_TO_DEVICE => Prop::CopyToDevice,
            sys::ORDO_PROP_COPY_FROM_DEVICE => Prop::CopyFromDevice,
            sys::ORDO_PROP_ASYNC => Prop::Async,
            _ => Prop::Normal,
        }
    }
}

/// The device an op runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Device {
    /// The CPU (the default).
    Cpu,
    /// A GPU by ordinal (without a usable GPU, i.e. a library built without CUDA or no runtime,
    /// driver or device, the push returns [`ErrorKind::NoDevice`](crate::ErrorKind::NoDevice)).
    Gpu(u32),
}

/// Options of a push, built step by step:
/// `PushOptions::new().name("load").priority(2).prop(Prop::CpuPrioritized)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushOptions {
    name: Option<CString>,
    priority: i32,
    prop: Prop,
    device: Device,
}

impl Default for PushOptions {
    fn default() -> Self {
        PushOptions::DEFAULT
    }
}

impl PushOptions {
    /// No name, priority 0, [`Prop::Normal`], [`Device::Cpu`].
    pub const DEFAULT: PushOptions = PushOptions {
        name: None,
        priority: 0,
        prop: Prop::Normal,
        device: Device::Cpu,
    };

    /// The defaults.
    pub fn new() -> PushOptions {
        PushOptions::DEFAULT
    }
    /// The op's name, shown in errors and traces (the engine keeps up to 47 bytes).
    pub fn name(mut self, name: &str) -> Self {
        self.name = Some(c_string(name));
        self
    }
    /// Higher runs first among ready ops waiting for the same workers (default 0).
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }
    /// Which workers run the op.
    pub fn prop(mut self, prop: Prop) -> Self {
        self.prop = prop;
        self
    }
    /// The device the op runs on.
    pub fn device(mut self, device: Device) -> Self {
        self.device = device;
        self
    }

    pub(crate) fn to_raw(&self, free_fn: sys::ordo_free_fn) -> sys::ordo_push_opts {
        let mut o = MaybeUninit::<sys::ordo_push_opts>::zeroed();
        // SAFETY: writes at most size_of bytes into our zeroed struct (zero is valid for every
        // field: integers, NULL pointers, None).
        let mut o = unsafe {
            sys::ordo_push_opts_init_sized(
                o.as_mut_ptr(),
                std::mem::size_of::<sys::ordo_push_opts>(),
            );
            o.assume_init()
        };
        o.priority = self.priority;
        o.prop = self.prop.to_raw();
        match self.device {
            Device::Cpu => o.device_type = sys::ORDO_DEVICE_CPU,
            Device::Gpu(id) => {
                o.device_type = sys::ORDO_DEVICE_GPU;
                o.device_id = id.min(i32::MAX as u32) as i32;
            }
        }
        o.free_fn = free_fn;
        o.name = self.name.as_ref().map_or(ptr::null(), |n| n.as_ptr());
        o
    }
}

/// What a running op sees: defer its completion, learn about itself, reach its engine. Valid
/// only during the op's closure, on its thread (it is neither `Send` nor `Sync`).
pub struct Exec<'a> {
    raw: *mut sys::ordo_exec,
    engine: ManuallyDrop<EngineRef>,
    deferred: bool,
    _life: PhantomData<&'a mut sys::ordo_exec>,
}

impl<'a> Exec<'a> {
    /// # Safety
    /// `raw` is the running op's exec, `engine` its engine (alive while the op runs).
    unsafe fn new(raw: *mut sys::ordo_exec, engine: NonNull<sys::ordo_engine>) -> Exec<'a> {
        Exec {
            raw,
            engine: ManuallyDrop::new(EngineRef { ptr: engine }),
            deferred: false,
            _life: PhantomData,
        }
    }

    /// Makes the op asynchronous: it completes when the returned [`Completion`] is completed
    /// (from any thread, also before the closure returns), not when the closure returns, whose
    /// result is then ignored. A second call returns
    /// [`ErrorKind::InvalidState`](crate::ErrorKind::InvalidState).
    pub fn defer(&mut self) -> Result<Completion> {
        let mut c = 0;
        // SAFETY: our exec, on its thread, during its callback.
        check(unsafe { sys::ordo_exec_defer(self.raw, &mut c) })?;
        self.deferred = true;
        Ok(Completion { handle: c })
    }

    /// The engine running this op (to push follow-up ops from inside it; `clone()` it to keep a
    /// reference). Waits through it return
    /// [`ErrorKind::WouldDeadlock`](crate::ErrorKind::WouldDeadlock): an op must not block on
    /// its own engine.
    pub fn engine(&self) -> &EngineRef {
        &self.engine
    }

    fn raw_info(&self) -> Result<sys::ordo_exec_info> {
        let mut i = MaybeUninit::<sys::ordo_exec_info>::zeroed();
        // SAFETY: zeroed is valid; struct_size set; our exec during its callback.
        unsafe {
            (*i.as_mut_ptr()).struct_size = std::mem::size_of::<sys::ordo_exec_info>() as u32;
            check(sys::ordo_exec_get_info(self.raw, i.as_mut_ptr()))?;
            Ok(i.assume_init())
        }
    }

    /// A GPU op's CUDA stream (a `cudaStream_t`), null on the CPU: enqueue the op's GPU work
    /// there and return; the op completes once that work has finished (CUDA events, no thread
    /// blocks). The stream is ordo's: do not destroy or synchronize it.
    pub fn stream(&self) -> Result<*mut std::ffi::c_void> {
        Ok(self.raw_info()?.stream)
    }

    /// What the op is and where it runs.
    pub fn info(&self) -> Result<ExecInfo> {
        let i = self.raw_info()?;
        let name = if i.name.is_null() {
            String::new()
        } else {
            // SAFETY: valid during the callback; copied.
            unsafe { CStr::from_ptr(i.name) }
                .to_string_lossy()
                .into_owned()
        };
        Ok(ExecInfo {
            name,
            priority: i.priority,
            prop: Prop::from_raw(i.prop),
            worker_index: if i.worker_index < 0 {
                None
            } else {
                Some(i.worker_index as u32)
            },
            device: if i.device_type == sys::ORDO_DEVICE_GPU {
                Device::Gpu(i.device_id as u32)
            } else {
                Device::Cpu
            },
        })
    }

    /// The raw exec, for calls through `ordo_sys` during the closure.
    pub fn as_ptr(&self) -> *mut sys::ordo_exec {
        self.raw
    }
}

impl fmt::Debug for Exec<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Exec")
            .field("deferred", &self.deferred)
            .finish()
    }
}

/// What a running op can learn about itself ([`Exec::info`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecInfo {
    /// Its name ("" if none).
    pub name: String,
    /// Its priority.
    pub priority: i32,
    /// Its property.
    pub prop: Prop,
    /// The worker's index within its group; `None` when run inline (naive engine,
    /// [`Prop::Async`], a helping pusher).
    pub worker_index: Option<u32>,
    /// The device it runs on.
    pub device: Device,
}

/// Completes a deferred op ([`Exec::defer`]), once, from any thread: it is `Send`, and
/// [`complete`](Completion::complete) and [`fail`](Completion::fail) consume it.
///
/// **Dropped without either**, it fails the op with code [`FAILED`] and the message
/// "ordo::Completion dropped without complete() or fail()" (or "... dropped during a panic"),
/// so that a lost completion never leaves the op, its waiters and the engine's shutdown hanging.
/// (A completion leaked with `mem::forget` does: the op stays pending until the process ends.)
#[must_use = "dropping a Completion fails its op"]
pub struct Completion {
    handle: sys::ordo_completion,
}

impl Completion {
    /// Completes the op successfully.
    pub fn complete(self) -> Result<()> {
        self.finish(Ok(()))
    }

    /// Fails the op with `code` (0 is taken as [`FAILED`]) and `message`.
    pub fn fail(self, code: i32, message: &str) -> Result<()> {
        self.finish(Err(OpError::new(code, message)))
    }

    /// Completes the op with an op closure's kind of result.
    pub fn finish(self, result: std::result::Result<(), OpError>) -> Result<()> {
        let me = ManuallyDrop::new(self);
        let s = match result {
            Ok(()) => {
                // SAFETY: any thread; a stale handle is an error, not UB.
                unsafe { sys::ordo_complete(me.handle, 0, ptr::null()) }
            }
            Err(e) => {
                let msg = c_string(e.message());
                // SAFETY: as above; the message is copied.
                unsafe { sys::ordo_complete(me.handle, e.code(), msg.as_ptr()) }
            }
        };
        check(s)
    }

    /// The raw handle (still owned by this `Completion`).
    pub fn handle(&self) -> sys::ordo_completion {
        self.handle
    }
}

impl Drop for Completion {
    fn drop(&mut self) {
        let msg: &[u8] = if std::thread::panicking() {
            b"ordo::Completion dropped during a panic\0"
        } else {
            b"ordo::Completion dropped without complete() or fail()\0"
        };
        // SAFETY: as in finish; the message is a static C string.
        unsafe { sys::ordo_complete(self.handle, FAILED, msg.as_ptr() as *const _) };
    }
}

impl fmt::Debug for Completion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Completion({:#x})", self.handle)
    }
}

// ----------------------------------------------------------------------------------------------
// Trampolines
// ----------------------------------------------------------------------------------------------

type OpResult = std::result::Result<(), OpError>;

/// A `FnOnce` op's box. `taken` lets one call of `run_job` take the closure: the engine calls
/// a pushed op's `fn` once, but a push recorded in a graph is called once per launch, maybe on
/// two workers at once.
struct Job<F> {
    f: UnsafeCell<Option<F>>,
    taken: AtomicBool,
    engine: NonNull<sys::ordo_engine>,
}

/// The message of a panic payload.
pub(crate) fn panic_message(p: &(dyn Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&'static str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a payload that is not a string".to_string()
    }
}

/// Drops a panic payload without letting a panic in its own drop escape.
pub(crate) fn drop_payload(p: Box<dyn Any + Send>) {
    if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(p))) {
        std::mem::forget(again);
    }
}

/// The op's outcome as its callback's return value. A failure with a message goes through
/// defer + complete (a callback's return value carries only a code); after a defer by the
/// closure itself, the result is ignored (the Completion decides).
fn settle(x: &mut Exec<'_>, r: std::thread::Result<OpResult>) -> i32 {
    let (code, msg) = match r {
        Ok(Ok(())) => return 0,
        Ok(Err(e)) => (e.code(), e.message().to_string()),
        Err(p) => {
            let m = format!("panicked: {}", panic_message(&*p));
            drop_payload(p);
            (FAILED, m)
        }
    };
    if x.deferred {
        return 0;
    }
    let mut c = 0;
    // SAFETY: our exec, on its thread, during its callback.
    if unsafe { sys::ordo_exec_defer(x.raw, &mut c) } == sys::ORDO_OK {
        let m = c_string(&msg);
        // SAFETY: the handle just made; the message is copied.
        unsafe { sys::ordo_complete(c, code, m.as_ptr()) };
        0
    } else {
        code
    }
}

unsafe extern "C" fn run_job<F>(exec: *mut sys::ordo_exec, ud: *mut c_void) -> i32
where
    F: FnOnce(&mut Exec<'_>) -> OpResult + Send + 'static,
{
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: ud is the Job<F> this push boxed, alive until free_job, which the engine calls
        // after the op's last call.
        let job = &*(ud as *const Job<F>);
        let mut x = Exec::new(exec, job.engine);
        if job.taken.swap(true, Ordering::AcqRel) {
            let again = OpError::msg(
                "ordo: this op's FnOnce closure already ran (a push recorded in a graph outside \
                 ordo::Capture::push runs on the first launch only)",
            );
            return Some(settle(&mut x, Ok(Err(again))));
        }
        // SAFETY: the swap above let only this call through to the closure.
        let f = (*job.f.get()).take()?;
        let _scope = OpScope::enter(job.engine);
        let r = catch_unwind(AssertUnwindSafe(|| f(&mut x)));
        Some(settle(&mut x, r))
    }));
    match outcome {
        Ok(Some(code)) => code,
        Ok(None) => sys::ORDO_ERR_INTERNAL,
        Err(p) => {
            drop_payload(p);
            FAILED
        }
    }
}

unsafe extern "C" fn free_job<F>(ud: *mut c_void) {
    // SAFETY: ud is the Job<F> this push boxed; the engine calls free_fn exactly once.
    let r = catch_unwind(AssertUnwindSafe(|| drop(Box::from_raw(ud as *mut Job<F>))));
    if let Err(p) = r {
        drop_payload(p);
    }
}

/// Calls `f` with the raw handles of `vars` (on the stack for up to 16).
pub(crate) fn with_ids<R>(vars: &[&Var], f: impl FnOnce(*const sys::ordo_var, usize) -> R) -> R {
    if vars.is_empty() {
        return f(ptr::null(), 0);
    }
    if vars.len() <= 16 {
        let mut buf = [0u64; 16];
        for (b, v) in buf.iter_mut().zip(vars) {
            *b = v.id();
        }
        f(buf.as_ptr(), vars.len())
    } else {
        let ids: Vec<sys::ordo_var> = vars.iter().map(|v| v.id()).collect();
        f(ids.as_ptr(), ids.len())
    }
}

/// `ordo_opr_push` of `user_data` with `fn_` and, in the options, `free_fn`; the status.
fn push_raw(
    engine: &EngineRef,
    opts: &PushOptions,
    reads: &[&Var],
    writes: &[&Var],
    fn_: sys::ordo_fn,
    free_fn: sys::ordo_free_fn,
    user_data: *mut c_void,
) -> i32 {
    let raw_opts = opts.to_raw(free_fn);
    with_ids(reads, |r, nr| {
        with_ids(writes, |w, nw| {
            // SAFETY: valid engine, arrays and options; user_data is the caller's to give.
            unsafe { sys::ordo_opr_push(engine.as_ptr(), fn_, user_data, r, nr, w, nw, &raw_opts) }
        })
    })
}

pub(crate) fn push<F>(
    engine: &EngineRef,
    opts: &PushOptions,
    reads: &[&Var],
    writes: &[&Var],
    f: F,
) -> Result<()>
where
    F: FnOnce(&mut Exec<'_>) -> OpResult + Send + 'static,
{
    let job = Box::new(Job {
        f: UnsafeCell::new(Some(f)),
        taken: AtomicBool::new(false),
        engine: engine.ptr,
    });
    let (run, free) = (Some(run_job::<F> as _), Some(free_job::<F> as _));
    push_boxed(engine, opts, reads, writes, job, run, free)
}

/// Pushes `job` as the op's user data, with `run` and `free` (which drops it); a push that fails
/// keeps nothing and never calls `free`, so the box is reclaimed here.
fn push_boxed<J>(
    engine: &EngineRef,
    opts: &PushOptions,
    reads: &[&Var],
    writes: &[&Var],
    job: Box<J>,
    run: sys::ordo_fn,
    free: sys::ordo_free_fn,
) -> Result<()> {
    let job = Box::into_raw(job);
    let s = push_raw(engine, opts, reads, writes, run, free, job as *mut c_void);
    if s != sys::ORDO_OK {
        // The error first: the closure's drop may make other ordo calls.
        let err = Error::last(s);
        // SAFETY: a failed push (or capture) keeps nothing: the box is ours again.
        drop(unsafe { Box::from_raw(job) });
        return Err(err);
    }
    Ok(())
}

/// A push whose closure may be called many times, at once on several threads, and is dropped
/// by the `free_fn` after the last call: what a capture records ([`Capture::push`]), called
/// once per launch and dropped when the graph is destroyed.
///
/// [`Capture::push`]: crate::Capture::push
pub(crate) fn push_shared<F>(
    engine: &EngineRef,
    opts: &PushOptions,
    reads: &[&Var],
    writes: &[&Var],
    f: F,
) -> Result<()>
where
    F: Fn(&mut Exec<'_>) -> OpResult + Send + Sync + 'static,
{
    let job = Box::new(PreparedJob {
        f,
        engine: engine.ptr,
    });
    let (run, free) = (Some(run_prepared::<F> as _), Some(free_prepared::<F> as _));
    push_boxed(engine, opts, reads, writes, job, run, free)
}

// ----------------------------------------------------------------------------------------------
// Prepared ops
// ----------------------------------------------------------------------------------------------

struct PreparedJob<F> {
    f: F,
    engine: NonNull<sys::ordo_engine>,
}

unsafe extern "C" fn run_prepared<F>(exec: *mut sys::ordo_exec, ud: *mut c_void) -> i32
where
    F: Fn(&mut Exec<'_>) -> OpResult + Send + Sync + 'static,
{
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: ud is the PreparedJob<F> boxed by prepare or push_shared, alive until
        // free_prepared; shared.
        let job = &*(ud as *const PreparedJob<F>);
        let mut x = Exec::new(exec, job.engine);
        let _scope = OpScope::enter(job.engine);
        let r = catch_unwind(AssertUnwindSafe(|| (job.f)(&mut x)));
        settle(&mut x, r)
    }));
    outcome.unwrap_or_else(|p| {
        drop_payload(p);
        FAILED
    })
}

unsafe extern "C" fn free_prepared<F>(ud: *mut c_void) {
    // SAFETY: called once, after the delete and the last push of it (or, recorded in a graph,
    // when the graph is destroyed).
    let r = catch_unwind(AssertUnwindSafe(|| {
        drop(Box::from_raw(ud as *mut PreparedJob<F>))
    }));
    if let Err(p) = r {
        drop_payload(p);
    }
}

/// A prepared op ([`EngineRef::prepare`]): a closure and its var lists stored once and pushed
/// many times. Dropping it deletes it (pushes already made still run; the closure is dropped
/// after the last of them).
pub struct Prepared {
    engine: EngineRef,
    id: sys::ordo_opr,
    priority: i32,
}

impl Prepared {
    /// Pushes it once, with the priority of its options.
    pub fn push(&self) -> Result<()> {
        self.push_priority(self.priority)
    }

    /// Pushes it once, with this priority.
    pub fn push_priority(&self, priority: i32) -> Result<()> {
        // SAFETY: valid engine.
        check(unsafe { sys::ordo_opr_push_prepared(self.engine.as_ptr(), self.id, priority) })
    }

    /// Deletes it now and reports the outcome (a drop does the same).
    pub fn delete(mut self) -> Result<()> {
        let id = std::mem::replace(&mut self.id, 0);
        // SAFETY: valid engine.
        check(unsafe { sys::ordo_opr_delete(self.engine.as_ptr(), id) })
    }
}

impl Drop for Prepared {
    fn drop(&mut self) {
        if self.id != 0 {
            // SAFETY: valid engine; works after the engine's shutdown too.
            unsafe { sys::ordo_opr_delete(self.engine.as_ptr(), self.id) };
        }
    }
}

impl fmt::Debug for Prepared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Prepared({:#x})", self.id)
    }
}

pub(crate) fn prepare<F>(
    engine: &EngineRef,
    opts: &PushOptions,
    reads: &[&Var],
    writes: &[&Var],
    f: F,
) -> Result<Prepared>
where
    F: Fn(&mut Exec<'_>) -> OpResult + Send + Sync + 'static,
{
    let raw_opts = opts.to_raw(Some(free_prepared::<F>));
    let job = Box::into_raw(Box::new(PreparedJob {
        f,
        engine: engine.ptr,
    }));
    let mut id = 0;
    let s = with_ids(reads, |r, nr| {
        with_ids(writes, |w, nw| {
            // SAFETY: as in push.
            unsafe {
                sys::ordo_opr_new(
                    engine.as_ptr(),
                    Some(run_prepared::<F>),
                    job as *mut c_void,
                    r,
                    nr,
                    w,
                    nw,
                    &raw_opts,
                    &mut id,
                )
            }
        })
    });
    if s != sys::ORDO_OK {
        let err = Error::last(s);
        // SAFETY: nothing was created; the box is ours again.
        drop(unsafe { Box::from_raw(job) });
        return Err(err);
    }
    Ok(Prepared {
        engine: engine.clone(),
        id,
        priority: opts.priority,
    })
}
