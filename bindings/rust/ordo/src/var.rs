//! `Var`: a variable with RAII delete.
use std::fmt;
use std::os::raw::c_char;

use ordo_sys as sys;

use crate::engine::EngineRef;
use crate::error::{check, OpError, Result};

/// A variable: a tag that stands for a piece of your data. Ops that share a var, where at least
/// one of them mutates it, run in push order.
///
/// Dropping a `Var` deletes it (`ordo_var_delete`), ordered like a write: ops pushed before the
/// drop still run. A `Var` holds a reference to its engine (an [`EngineRef`]), so it may outlive
/// the [`Engine`](crate::Engine): its calls then return
/// [`ErrorKind::Shutdown`](crate::ErrorKind::Shutdown). `Var` is `Send` and `Sync`; share one
/// between threads or ops with `Arc<Var>` or by reference. Dropped inside
/// [`EngineRef::capture`]'s closure, it is deleted when the capture ends (the library refuses
/// var deletes during a capture).
pub struct Var {
    engine: EngineRef,
    id: sys::ordo_var,
}

impl Var {
    pub(crate) fn from_raw(engine: EngineRef, id: sys::ordo_var) -> Var {
        Var { engine, id }
    }

    /// The raw handle, for calls through `ordo_sys` (still owned by this `Var`).
    pub fn id(&self) -> sys::ordo_var {
        self.id
    }

    /// The engine this var belongs to.
    pub fn engine(&self) -> &EngineRef {
        &self.engine
    }

    /// Deletes the var now and reports the outcome (a drop does the same and ignores it).
    pub fn delete(mut self) -> Result<()> {
        let id = std::mem::replace(&mut self.id, 0);
        // SAFETY: valid engine.
        check(unsafe { sys::ordo_var_delete(self.engine.as_ptr(), id) })
    }

    /// Clears the var's error state, ordered like a write: ops pushed before still see the
    /// error, ops pushed after run normally.
    pub fn clear_error(&self) -> Result<()> {
        // SAFETY: valid engine.
        check(unsafe { sys::ordo_var_clear_error(self.engine.as_ptr(), self.id) })
    }

    /// The var's error state as it is now (not ordered with pending ops: wait first): `None`
    /// when it has none, else the failing op's code and the message "op 'NAME' failed (code N):
    /// MESSAGE".
    pub fn error(&self) -> Result<Option<OpError>> {
        let mut code = 0;
        let mut buf = [0 as c_char; 1024];
        // SAFETY: valid engine, out pointer and buffer of buf.len() bytes.
        check(unsafe {
            sys::ordo_var_get_error(
                self.engine.as_ptr(),
                self.id,
                &mut code,
                buf.as_mut_ptr(),
                buf.len(),
            )
        })?;
        if code == 0 {
            return Ok(None);
        }
        // SAFETY: NUL-terminated within buf by the library.
        let msg = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) };
        Ok(Some(OpError::new(code, msg.to_string_lossy().into_owned())))
    }

    /// Blocks until every op pushed on this var before the call has completed (as
    /// [`EngineRef::wait`]).
    pub fn wait(&self) -> Result<()> {
        self.engine.wait(self)
    }
}

impl Drop for Var {
    fn drop(&mut self) {
        if self.id != 0 && !crate::graph::defer_delete(self.engine.ptr, self.id) {
            // SAFETY: valid engine. SHUTDOWN after the engine's shutdown is fine: the var went
            // with it.
            unsafe { sys::ordo_var_delete(self.engine.as_ptr(), self.id) };
        }
    }
}

impl fmt::Debug for Var {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Var({:#x})", self.id)
    }
}
