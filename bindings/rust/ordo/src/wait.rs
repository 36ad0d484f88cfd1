//! `WaitFuture`: `ordo_wait_for_var_async` as a `Future`, with no async runtime. The shared state
//! holds the outcome and the last poll's `Waker`; the C callback (run once, on an engine thread
//! or inside the call) stores the outcome and wakes the task.
use std::fmt;
use std::future::Future;
use std::os::raw::{c_char, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use ordo_sys as sys;

use crate::error::{status_name, Error, Result};

#[derive(Default)]
struct State {
    outcome: Option<Result<()>>,
    waker: Option<Waker>,
    taken: bool,
}

struct Shared(Mutex<State>);

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock (a Waker's clone) leaves the state consistent.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What the C callback receives: the shared state, and the engine and var to read the error of
/// (valid while the callback runs: the engine is alive during its own callbacks).
struct Ticket {
    shared: Arc<Shared>,
    engine: *mut sys::ordo_engine,
    var: sys::ordo_var,
}

unsafe extern "C" fn on_settled(ud: *mut c_void, status: sys::ordo_status) {
    let r = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the Box<Ticket> given to ordo_wait_for_var_async, called exactly once.
        let t = Box::from_raw(ud as *mut Ticket);
        let outcome = if status == sys::ORDO_OK {
            Ok(())
        } else {
            Err(settled_error(&t, status))
        };
        let waker = {
            let mut st = t.shared.lock();
            st.outcome = Some(outcome);
            st.waker.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }));
    if let Err(p) = r {
        // A Waker that panicked: nothing to unwind into. Drop the payload quietly.
        if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(p))) {
            std::mem::forget(again);
        }
    }
}

/// The error for a failed wait: the var's error as the library reads it now (the callback runs
/// right after the ops before the wait completed, before later ones may change it).
fn settled_error(t: &Ticket, status: sys::ordo_status) -> Error {
    if status == sys::ORDO_ERR_OP_FAILED {
        let mut code = 0;
        let mut buf = [0 as c_char; 1024];
        // SAFETY: the engine is alive during its callback; buffer of buf.len() bytes.
        let s = unsafe {
            sys::ordo_var_get_error(t.engine, t.var, &mut code, buf.as_mut_ptr(), buf.len())
        };
        if s == sys::ORDO_OK && code != 0 {
            // SAFETY: NUL-terminated by the library.
            let msg = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }
                .to_string_lossy()
                .into_owned();
            return Error::new(status, msg).with_op_code(Some(code));
        }
    }
    Error::new(
        status,
        format!("wait_async on var {:#x}: {}", t.var, status_name(status)),
    )
}

/// A wait for a var as a `Future` ([`EngineRef::wait_async`](crate::EngineRef::wait_async)):
/// resolves to `Ok(())`, or the error a blocking wait would return ([`Error::op_code`] included),
/// once every op pushed on the var before the `wait_async` call has completed. The wait is
/// queued at that call, not at the first poll. It is `Send`, needs no runtime, and may be
/// dropped at any time (the engine's callback then finds nobody to wake).
///
/// Like `ordo_wait_for_var_async`, it is ordered as a write on the var: a reader pushed after it
/// starts only once the ops before it have completed. The task's `Waker` is woken on an engine
/// thread, as if from inside an op: a waker that polls the task right there must not block on
/// the same engine (its waits would return
/// [`ErrorKind::WouldDeadlock`](crate::ErrorKind::WouldDeadlock)).
pub struct WaitFuture {
    shared: Arc<Shared>,
}

impl WaitFuture {
    pub(crate) fn start(engine: *mut sys::ordo_engine, var: sys::ordo_var) -> WaitFuture {
        let shared = Arc::new(Shared(Mutex::new(State::default())));
        let ticket = Box::into_raw(Box::new(Ticket {
            shared: shared.clone(),
            engine,
            var,
        }));
        // SAFETY: valid engine; the ticket is the callback's once the call succeeds (the callback
        // may run inside this call).
        let s = unsafe {
            sys::ordo_wait_for_var_async(engine, var, Some(on_settled), ticket as *mut c_void)
        };
        if s != sys::ORDO_OK {
            let err = Error::last(s);
            // SAFETY: on an error the callback is never called: the ticket is ours again.
            drop(unsafe { Box::from_raw(ticket) });
            shared.lock().outcome = Some(Err(err));
        }
        WaitFuture { shared }
    }

    pub(crate) fn failed(err: Error) -> WaitFuture {
        let st = State {
            outcome: Some(Err(err)),
            waker: None,
            taken: false,
        };
        WaitFuture {
            shared: Arc::new(Shared(Mutex::new(st))),
        }
    }

    /// Whether the outcome is in (a poll would return `Ready`).
    pub fn is_ready(&self) -> bool {
        let st = self.shared.lock();
        st.outcome.is_some()
    }
}

impl Future for WaitFuture {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let mut st = self.shared.lock();
        if let Some(out) = st.outcome.take() {
            st.taken = true;
            return Poll::Ready(out);
        }
        if st.taken {
            panic!("ordo::WaitFuture polled after it returned Ready");
        }
        match &st.waker {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => st.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl fmt::Debug for WaitFuture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitFuture")
            .field("ready", &self.is_ready())
            .finish()
    }
}
