//! `Error` (what an ordo call returns when it fails) and `OpError` (what an op returns to fail).
use std::ffi::{CStr, CString};
use std::fmt;

use ordo_sys as sys;

/// The result of every fallible call of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What kind of failure an [`Error`] is: the C status code as an enum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A bad argument: a var of another engine, a bad option value, a name with a NUL, ...
    InvalidArgument,
    /// A var, completion or prepared op that is stale, deleted or foreign.
    InvalidHandle,
    /// A waited-for op, or one it depended on, failed, or a pipe failed a pipeline run;
    /// [`Error::op_code`] has the failing code when known.
    OpFailed,
    /// A timed wait ran out of time; nothing else happened.
    Timeout,
    /// The op asked for a device this build or machine does not have.
    NoDevice,
    /// The engine is shutting down or shut down.
    Shutdown,
    /// Memory, handle space or threads ran out; nothing was pushed.
    NoMemory,
    /// The call is not valid now (an exec used outside its op, a second defer, a forked child).
    InvalidState,
    /// A blocking call from inside an op of the same engine; nothing happened.
    WouldDeadlock,
    /// An option this library does not know.
    Unsupported,
    /// A bug in ordo or an unexpected system error.
    Internal,
    /// A pipeline run ended with tokens whose deferral could never be resolved
    /// ([`Pipeline::run`](crate::Pipeline::run); [`Pipeline::dropped`](crate::Pipeline::dropped)
    /// names them). Every other result of the run is intact and the pipeline may run again.
    TokensDropped,
    /// A status code this binding does not know (a newer library).
    Other(i32),
}

impl ErrorKind {
    /// The kind of a C status code (`ORDO_ERR_*`).
    pub fn from_status(status: i32) -> ErrorKind {
        match status {
            sys::ORDO_ERR_INVALID_ARGUMENT => ErrorKind::InvalidArgument,
            sys::ORDO_ERR_INVALID_HANDLE => ErrorKind::InvalidHandle,
            sys::ORDO_ERR_OP_FAILED => ErrorKind::OpFailed,
            sys::ORDO_ERR_TIMEOUT => ErrorKind::Timeout,
            sys::ORDO_ERR_NO_DEVICE => ErrorKind::NoDevice,
            sys::ORDO_ERR_SHUTDOWN => ErrorKind::Shutdown,
            sys::ORDO_ERR_NO_MEMORY => ErrorKind::NoMemory,
            sys::ORDO_ERR_INVALID_STATE => ErrorKind::InvalidState,
            sys::ORDO_ERR_WOULD_DEADLOCK => ErrorKind::WouldDeadlock,
            sys::ORDO_ERR_UNSUPPORTED => ErrorKind::Unsupported,
            sys::ORDO_ERR_INTERNAL => ErrorKind::Internal,
            sys::ORDO_ERR_TOKENS_DROPPED => ErrorKind::TokensDropped,
            other => ErrorKind::Other(other),
        }
    }
}

/// A failed ordo call: its status code, the library's message for it (read on the calling
/// thread right after the call, from `ordo_last_error_message`), and for a failed op the op's
/// own code when the binding could learn it.
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    status: i32,
    message: String,
    op_code: Option<i32>,
}

impl Error {
    /// An error with this status and message.
    pub fn new(status: i32, message: impl Into<String>) -> Error {
        Error {
            status,
            message: message.into(),
            op_code: None,
        }
    }

    /// The error of a call that just returned `status` on this thread: reads the thread's last
    /// error message now, before any other ordo call can replace it.
    pub(crate) fn last(status: i32) -> Error {
        // SAFETY: never NULL; valid until the next ordo call on this thread, and copied here.
        let msg = unsafe { CStr::from_ptr(sys::ordo_last_error_message()) };
        Error::new(status, msg.to_string_lossy().into_owned())
    }

    pub(crate) fn with_op_code(mut self, code: Option<i32>) -> Error {
        self.op_code = code;
        self
    }

    /// The C status code (`ordo_sys::ORDO_ERR_*`).
    pub fn status(&self) -> i32 {
        self.status
    }

    /// The status as an [`ErrorKind`].
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::from_status(self.status)
    }

    /// The library's message, e.g. "op 'load' failed (code 7): disk full".
    pub fn message(&self) -> &str {
        &self.message
    }

    /// For [`ErrorKind::OpFailed`] from a wait on a var: the failing op's own code (what it
    /// returned, or passed to [`Completion::fail`](crate::Completion::fail)).
    pub fn op_code(&self) -> Option<i32> {
        self.op_code
    }

    /// The static name of the status, e.g. "ORDO_ERR_TIMEOUT".
    pub fn status_name(&self) -> &'static str {
        status_name(self.status)
    }
}

/// The static name of a status code, e.g. "ORDO_ERR_TIMEOUT" ("ORDO_ERR_UNKNOWN" if unknown).
pub fn status_name(status: i32) -> &'static str {
    // SAFETY: a static, never-NULL, NUL-terminated ASCII string.
    unsafe { CStr::from_ptr(sys::ordo_status_string(status)) }
        .to_str()
        .unwrap_or("ORDO_ERR_UNKNOWN")
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Error");
        d.field("status", &self.status_name())
            .field("message", &self.message);
        if let Some(c) = self.op_code {
            d.field("op_code", &c);
        }
        d.finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.message.is_empty() {
            f.write_str(self.status_name())
        } else {
            write!(f, "{}: {}", self.status_name(), self.message)
        }
    }
}

impl std::error::Error for Error {}

/// `Ok(())` for ORDO_OK, else the error with this thread's last message.
pub(crate) fn check(status: i32) -> Result<()> {
    if status == sys::ORDO_OK {
        Ok(())
    } else {
        Err(Error::last(status))
    }
}

/// The code an op fails with when it gives none: a panic, [`OpError::msg`], a dropped
/// [`Completion`](crate::Completion), or a code of 0 (which would mean success).
pub const FAILED: i32 = sys::ORDO_ERR_OP_FAILED;

/// How an op fails: a non-zero code (recorded unchanged in the error state of the vars the op
/// mutates, and given back by [`Error::op_code`]) and a message (shown in the waits' errors).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpError {
    code: i32,
    message: String,
}

impl OpError {
    /// A failure with this code (0 is taken as [`FAILED`], since 0 means success) and message.
    pub fn new(code: i32, message: impl Into<String>) -> OpError {
        OpError {
            code: if code == 0 { FAILED } else { code },
            message: message.into(),
        }
    }

    /// A failure with code [`FAILED`] and this message.
    pub fn msg(message: impl Into<String>) -> OpError {
        OpError::new(FAILED, message)
    }

    /// The code (never 0).
    pub fn code(&self) -> i32 {
        self.code
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for OpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "code {}: {}", self.code, self.message)
    }
}

impl std::error::Error for OpError {}

/// An ordo call that failed inside an op fails the op with the call's status and message, so
/// `?` works in op closures.
impl From<Error> for OpError {
    fn from(e: Error) -> OpError {
        OpError::new(e.status, e.message)
    }
}

impl From<String> for OpError {
    fn from(message: String) -> OpError {
        OpError::msg(message)
    }
}

impl From<&str> for OpError {
    fn from(message: &str) -> OpError {
        OpError::msg(message)
    }
}

/// A C string for the library: interior NULs (which C cannot carry) become U+FFFD.
pub(crate) fn c_string(s: &str) -> CString {
    match CString::new(s) {
        Ok(c) => c,
        Err(_) => CString::new(s.replace('\0', "\u{FFFD}")).expect("no NUL left"),
    }
}
