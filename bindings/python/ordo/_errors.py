"""ordo's status codes as Python exceptions: one class per ORDO_ERR_* code, all under Error."""
from __future__ import annotations

from typing import Optional

from ._lib import ffi, lib


class Error(Exception):
    """A failed ordo call. ``status`` is the ORDO_ERR_* code, ``status_name`` its name and
    ``message`` the library's message for it (which names the call that failed)."""

    status: int = 0

    def __init__(self, message: str, status: Optional[int] = None) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status
        self.message = message

    @property
    def status_name(self) -> str:
        return str(ffi.string(lib.ordo_status_string(self.status)).decode())


class InvalidArgument(Error, ValueError):
    """ORDO_ERR_INVALID_ARGUMENT: a bad value (a thread count out of range, a bad option)."""

    status = lib.ORDO_ERR_INVALID_ARGUMENT


class InvalidHandle(Error):
    """ORDO_ERR_INVALID_HANDLE: a var or completion that was deleted, used up, is of another
    engine, or an engine that was freed."""

    status = lib.ORDO_ERR_INVALID_HANDLE


class OpFailed(Error):
    """ORDO_ERR_OP_FAILED: an op the wait waited for failed, or was skipped because an op it
    depended on failed. ``code`` is the failing op's own code when known (a Python exception
    raised by an op's function is code ORDO_ERR_OP_FAILED, 3); ``message`` names the op and
    carries its text."""

    status = lib.ORDO_ERR_OP_FAILED

    def __init__(self, message: str, status: Optional[int] = None,
                 code: Optional[int] = None) -> None:
        super().__init__(message, status)
        self.code = code


class Timeout(Error, TimeoutError):
    """ORDO_ERR_TIMEOUT: a wait with a timeout ran out of time; nothing else happened."""

    status = lib.ORDO_ERR_TIMEOUT


class NoDevice(Error):
    """ORDO_ERR_NO_DEVICE: the op asked for a device this machine or build does not have."""

    status = lib.ORDO_ERR_NO_DEVICE


class Shutdown(Error):
    """ORDO_ERR_SHUTDOWN: the engine is closed or closing."""

    status = lib.ORDO_ERR_SHUTDOWN


class NoMemory(Error, MemoryError):
    """ORDO_ERR_NO_MEMORY: memory, threads or handle space ran out; nothing happened."""

    status = lib.ORDO_ERR_NO_MEMORY


class InvalidState(Error):
    """ORDO_ERR_INVALID_STATE: not valid now (e.g. an engine used in a forked child)."""

    status = lib.ORDO_ERR_INVALID_STATE


class WouldDeadlock(Error):
    """ORDO_ERR_WOULD_DEADLOCK: a wait or close called from inside an op of the same engine
    (push a follow-up op instead). Nothing happened."""

    status = lib.ORDO_ERR_WOULD_DEADLOCK


class Unsupported(Error):
    """ORDO_ERR_UNSUPPORTED: an option this library version does not know."""

    status = lib.ORDO_ERR_UNSUPPORTED


class TokensDropped(Error):
    """ORDO_ERR_TOKENS_DROPPED: a pipeline run ended with tokens whose deferral could never be
    resolved (a target never generated, a cycle, or still waiting when pipe 0 stopped); they were
    dropped. Everything else of the run happened, and the pipeline may run again. ``tokens`` are
    the dropped ids (``Pipeline.dropped()``)."""

    status = lib.ORDO_ERR_TOKENS_DROPPED

    def __init__(self, message: str, status: Optional[int] = None,
                 tokens: tuple[int, ...] = ()) -> None:
        super().__init__(message, status)
        self.tokens = tokens


class InternalError(Error):
    """ORDO_ERR_INTERNAL: a bug in ordo or an unexpected system error."""

    status = lib.ORDO_ERR_INTERNAL


_BY_STATUS: dict[int, type[Error]] = {
    cls.status: cls
    for cls in (InvalidArgument, InvalidHandle, OpFailed, Timeout, NoDevice, Shutdown, NoMemory,
                InvalidState, WouldDeadlock, Unsupported, InternalError, TokensDropped)
}


def last_error_message() -> str:
    """The calling thread's last ordo error message. Call it right after the failed call, on
    the same thread (a Python thread stays on one OS thread, so nothing can come between)."""
    n = lib.ordo_last_error_copy(ffi.NULL, 0)
    buf = ffi.new("char[]", n + 1)
    lib.ordo_last_error_copy(buf, n + 1)
    return str(ffi.string(buf).decode("utf-8", "replace"))


def error_for(status: int, message: Optional[str] = None) -> Error:
    """The exception for a status, with the calling thread's last error message by default."""
    if message is None:
        message = last_error_message()
    if not message:
        message = ffi.string(lib.ordo_status_string(status)).decode()
    cls = _BY_STATUS.get(status, Error)
    return cls(message, status)


def check(status: int) -> None:
    """Raises the exception for a non-zero status."""
    if status != 0:
        raise error_for(status)
