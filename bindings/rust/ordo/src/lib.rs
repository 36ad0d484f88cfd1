//! Safe Rust binding of **ordo**, a task dependency engine (`libordo.so`).
//!
//! Create an [`Engine`], some [`Var`]s (tags that stand for pieces of your data), and push ops:
//! closures plus the vars they read and the vars they mutate. Two ops that share a var, where at
//! least one of them mutates it, run in push order; readers of a var may run at the same time;
//! everything else runs concurrently on the engine's workers.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//!
//! # fn main() -> ordo::Result<()> {
//! let engine = ordo::Engine::new()?;
//! let v = engine.new_var()?;               // v stands for `data`
//! let data = Arc::new(Mutex::new(Vec::new()));
//! for i in 0..3 {
//!     let d = data.clone();
//!     // writers of v: they run one after another, in push order
//!     engine.push(&[], &[&v], move |_| { d.lock().unwrap().push(i); Ok(()) })?;
//! }
//! engine.wait(&v)?;
//! assert_eq!(*data.lock().unwrap(), [0, 1, 2]);
//!
//! // a failing op: the var carries its error, and waiting on it returns it
//! let opts = ordo::PushOptions::new().name("load");
//! engine.push_with(&opts, &[], &[&v], |_| Err(ordo::OpError::new(7, "disk full")))?;
//! let err = engine.wait(&v).unwrap_err();
//! assert_eq!(err.kind(), ordo::ErrorKind::OpFailed);
//! assert_eq!(err.op_code(), Some(7));
//! assert!(err.message().contains("disk full"));
//! # Ok(()) }
//! ```
//!
//! # What the binding promises
//! - **Ops** are `FnOnce(&mut Exec) -> Result<(), OpError> + Send + 'static` closures (boxed,
//!   passed to C as `user_data`, dropped by the op's `free_fn` whether the op ran, failed or was
//!   skipped, or right away when the push fails). `Err(OpError)` fails the op with its code and
//!   message. A **panic** in an op is caught at the boundary (it never unwinds into C) and fails
//!   the op with code [`FAILED`] and the message "panicked: ...".
//! - **Deferred ops**: [`Exec::defer`] returns a [`Completion`], `Send`, consumed by
//!   [`Completion::complete`] or [`Completion::fail`] from any thread. Dropping it without either
//!   fails the op (so a lost completion never hangs the engine).
//! - **Errors** are [`Error`] values: the status code ([`ErrorKind`]) and the library's message,
//!   read on the calling thread right after the failing call.
//! - **Handles**: dropping the [`Engine`] shuts it down (runs every pushed op, joins the
//!   workers); a [`Var`] is deleted on drop and holds a counted [`EngineRef`], so it may outlive
//!   the `Engine` (its calls then return [`ErrorKind::Shutdown`]) but never its memory.
//! - **Async**: [`EngineRef::wait_async`] returns a [`WaitFuture`] that any executor can poll;
//!   no runtime is needed.
//! - **Blocking from inside an op**: waits on the op's own engine return
//!   [`ErrorKind::WouldDeadlock`] at once; push a follow-up op instead.
//! - **Capture and replay**: [`EngineRef::capture`] records pushes (`Fn + Send + Sync`
//!   closures, through [`Capture::push`]) as a [`Graph`] that [`Graph::launch`] pushes again,
//!   any number of times; the closures live until the graph is destroyed.
//! - **Pipelines**: [`EngineRef::pipeline`] builds a [`Pipeline`] of [`Pipe`]s (`Fn + Send +
//!   Sync` closures given a [`Pipeflow`], serial or parallel) that [`Pipeline::run`] runs
//!   (blocking) and [`Pipeline::push`] pushes as an op ordered through vars. An `Err` or a panic
//!   in a pipe fails the run (its message in the run's error); dropped tokens are
//!   [`ErrorKind::TokensDropped`]. The closures live until the pipeline is destroyed (a drop
//!   while a pushed run is in flight hands it to a thread that destroys it once the run is
//!   over) or its pipes are replaced.
//!
//! # Linking
//! The `ordo-sys` build script finds `libordo.so` through `ORDO_LIB_DIR` or `pkg-config ordo`.
//! At run time the library must be on the loader's path (installed, or `LD_LIBRARY_PATH`); this
//! crate's own tests and examples carry an rpath to it.
#![warn(missing_docs)]

mod engine;
mod error;
mod graph;
mod op;
mod pipeline;
mod var;
mod wait;

pub use engine::{Config, Engine, EngineBuilder, EngineRef, Kind, Stats};
pub use error::{status_name, Error, ErrorKind, OpError, Result, FAILED};
pub use graph::{Capture, DestroyError, Graph};
pub use op::{Completion, Device, Exec, ExecInfo, Prepared, Prop, PushOptions};
pub use ordo_sys as sys;
pub use pipeline::{Pipe, Pipeflow, Pipeline, PipelineDestroyError};
pub use var::Var;
pub use wait::WaitFuture;

/// The README's examples run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

/// The loaded library's version, as "0.1.0".
pub fn version() -> &'static str {
    // SAFETY: a static, never-NULL string.
    unsafe { std::ffi::CStr::from_ptr(sys::ordo_version_string()) }
        .to_str()
        .unwrap_or("?")
}

/// How many GPUs the library can use: 0 in a build without CUDA, and without a GPU or its
/// driver (a push to [`Device::Gpu`] then fails with [`ErrorKind::NoDevice`] and the reason).
pub fn device_count() -> u32 {
    let mut n = 0i32;
    // SAFETY: a valid out pointer.
    unsafe { sys::ordo_device_count(&mut n) };
    n.max(0) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_send_sync<T: Send + Sync>() {}
    fn is_send<T: Send>() {}

    #[test]
    fn handles_are_send_and_sync() {
        is_send_sync::<Engine>();
        is_send_sync::<EngineRef>();
        is_send_sync::<Var>();
        is_send_sync::<Completion>();
        is_send_sync::<Prepared>();
        is_send_sync::<Graph>();
        is_send_sync::<DestroyError>();
        is_send_sync::<Pipeline>();
        is_send_sync::<PipelineDestroyError>();
        is_send_sync::<Pipe>();
        is_send::<WaitFuture>();
        is_send_sync::<Error>();
    }

    #[test]
    fn version_matches_the_declarations() {
        assert!(version().starts_with("0."));
        assert!(unsafe { sys::ordo_version() } >= sys::ORDO_VERSION_NUMBER);
    }

    #[test]
    fn error_kinds_round_trip() {
        for s in 1..=12 {
            let k = ErrorKind::from_status(s);
            assert!(!matches!(k, ErrorKind::Other(_)), "status {}", s);
            assert!(status_name(s).starts_with("ORDO_ERR_"));
        }
        assert_eq!(ErrorKind::from_status(12345), ErrorKind::Other(12345));
        let e = Error::new(sys::ORDO_ERR_TIMEOUT, "late");
        assert_eq!(e.to_string(), "ORDO_ERR_TIMEOUT: late");
        assert_eq!(e.kind(), ErrorKind::Timeout);
    }

    #[test]
    fn op_error_code_zero_means_failed() {
        assert_eq!(OpError::new(0, "x").code(), FAILED);
        assert_eq!(OpError::from("boom").code(), FAILED);
        assert_eq!(
            OpError::from(Error::new(sys::ORDO_ERR_SHUTDOWN, "m")).code(),
            sys::ORDO_ERR_SHUTDOWN
        );
    }

    #[test]
    fn names_with_nul_are_kept() {
        assert_eq!(error::c_string("a\0b").to_str().unwrap(), "a\u{FFFD}b");
    }

    #[test]
    fn bad_config_is_an_error_not_a_crash() {
        let e = Engine::builder().cpu_threads(5000).build().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(e.message().contains("cpu_threads"), "{}", e);
    }
}
