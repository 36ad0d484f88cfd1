"""Engine, Var and Completion: the Python face of ordo's C API.

How Python callables cross into C:
- Every op is pushed with one C trampoline (``_op_trampoline``) and an integer key as its
  user_data. The key indexes ``_ops``, which holds the Python callable (and the Engine) until the
  op's ``free_fn`` (``_free_trampoline``) removes it, after the op ran, failed or was skipped.
  So a callback never runs on a freed handle, and nothing Python holds is freed before C is done.
- The trampolines never let an exception out. An exception raised by an op's function fails the
  op with code ORDO_ERR_OP_FAILED and the exception's text (the trampoline defers the running op
  and completes it with that message). Should anything still escape, cffi's ``onerror`` (and the
  callback's ``error`` value) return ORDO_ERR_OP_FAILED, never 0: an exception is never counted
  as success.
- cffi releases the GIL around every C call, so the blocking calls (waits, close) let other
  Python threads, and the ops' own Python callbacks on the engine's workers, run.
"""
from __future__ import annotations

import asyncio
import atexit
import itertools
import math
import os
import re
import sys
import threading
import time
import traceback
import weakref
from dataclasses import dataclass
from typing import (TYPE_CHECKING, Any, Callable, Iterable, Literal, NamedTuple, Optional, Union,
                    overload)

from ._errors import (Error, InvalidArgument, InvalidHandle, InvalidState, OpFailed,
                      WouldDeadlock, check, error_for, last_error_message)
from ._lib import ffi, has, lib

if TYPE_CHECKING:
    from ._graph import Capture
    from ._pipeline import Pipeline

__all__ = ["Engine", "Var", "Completion", "Stats", "exit_timeout"]

OK: int = lib.ORDO_OK
_OP_FAILED: int = lib.ORDO_ERR_OP_FAILED
_TIMEOUT: int = lib.ORDO_ERR_TIMEOUT
_SHUTDOWN: int = lib.ORDO_ERR_SHUTDOWN
_INVALID_HANDLE: int = lib.ORDO_ERR_INVALID_HANDLE
_NO_TIMEOUT_NS = 1 << 61  # above 2^60 ns: the C API reads it as "no timeout"
_MSG_MAX = 480  # ordo keeps this much of "op 'NAME' failed (code N): MESSAGE"


def _call_interruptibly(call: Callable[[], int], name: str,
                        on_interrupt: Optional[Callable[[], None]] = None
                        ) -> tuple[int, Optional[str]]:
    """Runs the blocking C call `call()` so that Ctrl-C interrupts it on the main thread (the
    one Python delivers signals to, and only between two C calls): the call runs on a helper
    thread named `name` while this one waits on an Event, which Ctrl-C interrupts. Then
    KeyboardInterrupt is raised at once and the call goes on; or, with `on_interrupt`, that is
    called first and the wait goes on until the call returns (a second Ctrl-C leaves at once).
    Returns the status and, when it is not OK, the helper thread's last error message."""
    result: list[tuple[int, Optional[str]]] = []
    done = threading.Event()

    def run() -> None:
        try:
            s = call()
            result.append((s, last_error_message() if s != OK else None))
        finally:
            done.set()

    try:
        try:
            threading.Thread(target=run, name=name, daemon=True).start()
        except RuntimeError:  # no thread to be had: call here, as other threads do
            return call(), None
        done.wait()
    except KeyboardInterrupt:
        if on_interrupt is not None:
            on_interrupt()
            done.wait()
        raise
    return result[0]


def _wait_interruptibly(wait: Callable[[int], int],
                        ns: Optional[int]) -> tuple[int, Optional[str]]:
    """Runs the C wait `wait(timeout_ns)` so that Ctrl-C interrupts it when called on the main
    thread (_call_interruptibly; KeyboardInterrupt, the C wait and the ops go on, and nothing
    else changes). The same C call either way, so the same snapshot and ordering. Returns the
    status and the message when it is not this thread's last error message (the helper
    thread's)."""
    timeout_ns = _NO_TIMEOUT_NS if ns is None else ns
    if threading.current_thread() is not threading.main_thread():
        return wait(timeout_ns), None
    st = wait(0)  # done already, or refused (WOULD_DEADLOCK inside an op): on this thread
    if st != _TIMEOUT or ns == 0:
        return st, None
    return _call_interruptibly(lambda: wait(timeout_ns), "ordo-wait")

_KINDS = {
    None: lib.ORDO_ENGINE_DEFAULT,
    "default": lib.ORDO_ENGINE_DEFAULT,
    "naive": lib.ORDO_ENGINE_NAIVE,
    "pooled": lib.ORDO_ENGINE_POOLED,
    "per_device": lib.ORDO_ENGINE_PER_DEVICE,
}

#: Seconds that open engines get at interpreter exit to finish their work while none of it
#: completes (see Engine). Env ORDO_EXIT_TIMEOUT overrides the default of 5.
exit_timeout: float = float(os.environ.get("ORDO_EXIT_TIMEOUT", "5"))


# --------------------------------------------------------------------------------------------
# What C holds for Python: the pending ops' callables and the pending async waits, by key.
# --------------------------------------------------------------------------------------------

class _Op(NamedTuple):
    fn: Callable[..., Any]
    deferred: bool
    engine: "Engine"


class _AsyncWait(NamedTuple):
    loop: asyncio.AbstractEventLoop
    future: "asyncio.Future[None]"
    engine: "Engine"
    var: int


_ops: dict[int, _Op] = {}
_async_waits: dict[int, _AsyncWait] = {}
_keys = itertools.count(1)  # next() is atomic under the GIL
_finalizing = False  # set at interpreter exit: ops that start after it do not run Python code


def _key_of(user_data: Any) -> int:
    return int(ffi.cast("uintptr_t", user_data))


def _exception_text(exc: BaseException) -> str:
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return text or type(exc).__name__


def _report_unraisable(exc: BaseException, what: str) -> None:
    try:
        hook: Any = sys.unraisablehook
        hook(_Unraisable(type(exc), exc, exc.__traceback__, what, None))
    except BaseException:  # noqa: BLE001 - nothing may escape into C
        pass


class _Unraisable(NamedTuple):
    exc_type: type
    exc_value: BaseException
    exc_traceback: Any
    err_msg: str
    object: Any


def _fail_running_op(exec_: Any, code: int, text: str) -> int:
    """Fails the op running on this thread with `code` and the message `text`: the op is
    deferred and completed at once, which is how a message reaches the op's error record."""
    c = ffi.new("ordo_completion*")
    if lib.ordo_exec_defer(exec_, c) == OK:
        lib.ordo_complete(c[0], code, text.encode("utf-8", "replace")[:_MSG_MAX])
    return code


def _op_onerror(exc_type: Any, exc_value: Any, tb: Any) -> int:
    # Reached only if something escaped the trampoline's own handler (it catches BaseException);
    # the op must still fail.
    return _OP_FAILED


class _Running(threading.local):
    """What runs on this thread: `exec`, the exec of the op whose function runs
    (ordo.current_op()); an op pushed and run inline from inside another (the naive engine)
    nests, so the trampoline restores the outer. `pipes`: how many pipe functions of pipelines
    run (nested the same way)."""
    exec: Any = None
    pipes: int = 0


_running = _Running()


def _inside_callback() -> bool:
    """Whether an op's or a pipe's function runs on this thread (below this call)."""
    return _running.exec is not None or _running.pipes > 0


def _op_trampoline(exec_: Any, user_data: Any) -> int:
    outer = _running.exec
    _running.exec = exec_
    try:
        return _run_op(exec_, user_data)
    finally:
        _running.exec = outer


def _run_op(exec_: Any, user_data: Any) -> int:
    try:
        op = _ops.get(_key_of(user_data))
        if op is None:  # cannot happen: the record lives until free_fn
            return _fail_running_op(exec_, _OP_FAILED, "ordo: the op's Python function is gone")
        if _finalizing or op.engine._abandoned:
            return _fail_running_op(exec_, _OP_FAILED,
                                    "not run: the Python interpreter is exiting")
        if op.deferred:
            c = ffi.new("ordo_completion*")
            st = lib.ordo_exec_defer(exec_, c)
            if st != OK:
                return _OP_FAILED
            completion = Completion(int(c[0]), op.engine)
            try:
                op.fn(completion)
            except BaseException as exc:  # noqa: BLE001 - becomes the op's failure
                if not completion._finish(_OP_FAILED, _exception_text(exc)):
                    _report_unraisable(exc, "ordo: a deferred op's function raised after its "
                                            "Completion was used")
            return 0  # ignored after defer
        try:
            result = op.fn()
        except BaseException as exc:  # noqa: BLE001 - becomes the op's failure
            return _fail_running_op(exec_, _OP_FAILED, _exception_text(exc))
        if result is None or type(result) is bool or not isinstance(result, int):
            return 0
        if result != 0 and not -2**31 <= result < 2**31:
            return _fail_running_op(exec_, _OP_FAILED,
                                    f"the op returned {result}, out of int32 range")
        return result
    except BaseException:  # noqa: BLE001 - never unwind into C; never count it as success
        return _OP_FAILED


def _free_trampoline(user_data: Any) -> None:
    try:
        _ops.pop(_key_of(user_data), None)
    except BaseException:  # noqa: BLE001
        pass


# The C function pointers. `error` is what the callback returns if an exception escapes it
# (cffi's default, 0, would be success), `onerror` the same as a function: both fail the op.
def _make_op_callback(trampoline: Callable[[Any, Any], int]) -> Any:
    return ffi.callback("ordo_fn", trampoline, error=_OP_FAILED, onerror=_op_onerror)


_op_callback = _make_op_callback(_op_trampoline)
_free_callback = ffi.callback("ordo_free_fn", _free_trampoline)


def _resolve(future: "asyncio.Future[None]", exc: Optional[BaseException]) -> None:
    if future.done():  # cancelled meanwhile
        return
    if exc is None:
        future.set_result(None)
    else:
        future.set_exception(exc)


def _wait_trampoline(user_data: Any, status: int) -> None:
    try:
        w = _async_waits.pop(_key_of(user_data), None)
        if w is None:
            return
        exc: Optional[BaseException] = None
        if status == _OP_FAILED:
            code, text = w.engine._var_error(w.var)
            exc = OpFailed(text or "an op the wait waited for failed", _OP_FAILED, code)
        elif status != OK:
            name = ffi.string(lib.ordo_status_string(status)).decode()
            if status == _SHUTDOWN:
                name += ": the engine shut down before the wait completed"
            exc = error_for(status, name)
        try:
            w.loop.call_soon_threadsafe(_resolve, w.future, exc)
        except RuntimeError:  # the loop was closed: nobody is waiting any more
            pass
    except BaseException:  # noqa: BLE001
        pass


_wait_callback = None
if has("ordo_wait_for_var_async"):
    _wait_callback = ffi.callback("ordo_wait_fn", _wait_trampoline)


# --------------------------------------------------------------------------------------------
# Completion
# --------------------------------------------------------------------------------------------

class Completion:
    """Completes a deferred op (``Engine.push(..., deferred=True)``). Call ``complete()`` or
    ``fail(code, message)`` once, from any thread. A Completion dropped unused (garbage
    collected) fails its op, so that a lost Completion cannot leave waiters hanging."""

    __slots__ = ("_handle", "_lock", "_used", "_engine_ref", "__weakref__")

    def __init__(self, handle: int, engine: "Engine") -> None:
        self._handle = handle
        self._lock = threading.Lock()
        self._used = False
        self._engine_ref = weakref.ref(engine)
        with engine._completions_lock:
            engine._completions[handle] = weakref.ref(self)

    def _finish(self, code: int, message: Optional[str]) -> bool:
        """Completes the op unless done already; False when it was."""
        with self._lock:
            if self._used:
                return False
            self._used = True
        engine = self._engine_ref()
        if engine is not None:
            with engine._completions_lock:
                engine._completions.pop(self._handle, None)
        msg = ffi.NULL if message is None else message.encode("utf-8", "replace")[:_MSG_MAX]
        st = lib.ordo_complete(self._handle, code, msg)
        if st != OK:
            raise error_for(st)
        return True

    def complete(self) -> None:
        """Completes the op successfully. Raises InvalidHandle if the Completion was used."""
        if not self._finish(0, None):
            raise InvalidHandle("ordo: this Completion was already used", _INVALID_HANDLE)

    def fail(self, code: int = _OP_FAILED, message: Optional[str] = None) -> None:
        """Fails the op with a non-zero code (any int32; default ORDO_ERR_OP_FAILED) and an
        optional message, which waiters see. Raises InvalidHandle if the Completion was used."""
        code = int(code)
        if code == 0 or not -2**31 <= code < 2**31:
            raise InvalidArgument(f"ordo: a failure code must be a non-zero int32, not {code}",
                                  lib.ORDO_ERR_INVALID_ARGUMENT)
        if not self._finish(code, message):
            raise InvalidHandle("ordo: this Completion was already used", _INVALID_HANDLE)

    @property
    def done(self) -> bool:
        """Whether complete() or fail() was called."""
        return self._used

    def __del__(self) -> None:
        try:
            if not self._used:
                self._finish(_OP_FAILED, "the op's Completion was garbage collected unused")
        except BaseException:  # noqa: BLE001
            pass

    def __repr__(self) -> str:
        return f"<ordo.Completion {self._handle:#x}{' used' if self._used else ''}>"


# --------------------------------------------------------------------------------------------
# Var
# --------------------------------------------------------------------------------------------

class Var:
    """A variable: a tag standing for a piece of your data (not the data). Ops that share a Var,
    where at least one of them writes it, run in push order. Made by ``Engine.var()``.

    ``delete()`` releases it (ordered like a write: ops pushed before still run); a Var that is
    garbage collected undeleted is deleted then."""

    __slots__ = ("_engine", "_handle", "_deleted", "__weakref__")

    def __init__(self, engine: "Engine", handle: int) -> None:
        self._engine = engine
        self._handle = handle
        self._deleted = False

    @property
    def engine(self) -> "Engine":
        return self._engine

    @property
    def handle(self) -> int:
        """The C handle (an ordo_var)."""
        return self._handle

    def delete(self) -> None:
        """Deletes the var. Every later use raises InvalidHandle (deleting twice too)."""
        self._deleted = True
        check(lib.ordo_var_delete(self._engine._ptr, self._handle))

    def clear_error(self) -> None:
        """Clears the var's error state, ordered like a write: ops pushed before still see the
        error, ops pushed after run normally."""
        check(lib.ordo_var_clear_error(self._engine._ptr, self._handle))

    def error(self) -> Optional[tuple[int, str]]:
        """The var's error state as it is now, (code, message), or None; not ordered with
        pending ops (wait first for a settled answer)."""
        code, text = self._engine._var_error(self._handle, raise_errors=True)
        return None if code == 0 else (code, text)

    def __del__(self) -> None:
        try:
            if not self._deleted and not _finalizing and not self._engine._closed:
                self._deleted = True
                lib.ordo_var_delete(self._engine._ptr, self._handle)
        except BaseException:  # noqa: BLE001
            pass

    def __repr__(self) -> str:
        return f"<ordo.Var {self._handle:#x}{' deleted' if self._deleted else ''}>"


# --------------------------------------------------------------------------------------------
# Engine
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Stats:
    """An engine's counters (``Engine.stats()``); exact when the engine is idle."""
    workers: int
    pushed: int
    completed: int
    failed: int
    skipped: int
    pending: int
    ready: int


@dataclass(frozen=True)
class Config:
    """An engine's effective configuration (``Engine.config()``): what it runs with after the
    environment and the defaults. ``kind`` is "naive", "pooled" or "per_device";
    ``gpu_stream_waits`` tells whether early release of GPU successors is on."""
    kind: str
    workers: int
    max_pending: int
    pushers_help: bool
    trace_path: Optional[str]
    gpu_compute_streams: int
    gpu_stream_waits: bool


_PROPS = {
    "normal": lib.ORDO_PROP_NORMAL,
    "cpu_prioritized": lib.ORDO_PROP_CPU_PRIORITIZED,
    "copy_to_device": lib.ORDO_PROP_COPY_TO_DEVICE,
    "copy_from_device": lib.ORDO_PROP_COPY_FROM_DEVICE,
    "async": lib.ORDO_PROP_ASYNC,
}
_PROP_NAMES = {v: k for k, v in _PROPS.items()}


@dataclass(frozen=True)
class OpInfo:
    """The op running on this thread (``ordo.current_op()``). ``prop`` is one of
    ``Engine.push``'s prop names; ``worker_index`` is None where the op runs inline (on the
    pushing thread); ``gpu`` is the GPU's ordinal for a GPU op, else None. ``stream`` is the
    op's CUDA stream as an int (a ``cudaStream_t``; 0 on the CPU): enqueue the op's GPU work
    there, e.g. ``with cupy.cuda.Stream.from_external(info):`` (an OpInfo of a GPU op speaks
    the CUDA stream protocol, ``__cuda_stream__``), ``cupy.cuda.ExternalStream(info.stream)``
    or ``torch.cuda.ExternalStream(info.stream, device=info.gpu)``, and return; ordo completes
    the op once that work has finished."""
    name: str
    priority: int
    prop: str
    worker_index: Optional[int]
    gpu: Optional[int]
    stream: int

    def __cuda_stream__(self) -> tuple[int, int]:
        """The CUDA stream protocol (version 0, the stream's address), for libraries that take
        any object with a stream. InvalidState for a CPU op, which has none."""
        if self.gpu is None:
            raise InvalidState(f"ordo: op {self.name!r} runs on the CPU: it has no CUDA stream",
                               lib.ORDO_ERR_INVALID_STATE)
        return (0, self.stream)


def current_op() -> OpInfo:
    """What the op whose function is running on this thread is: its name, priority, prop,
    worker and, for a GPU op, its GPU and CUDA stream (see ``OpInfo``). Raises InvalidState
    outside an op's function (a pipeline's pipe functions included)."""
    exec_ = _running.exec
    if exec_ is None:
        raise InvalidState("ordo.current_op(): no op's function is running on this thread",
                           lib.ORDO_ERR_INVALID_STATE)
    info = ffi.new("ordo_exec_info*")
    info.struct_size = ffi.sizeof("ordo_exec_info")
    st = lib.ordo_exec_get_info(exec_, info)
    if st != OK:
        raise error_for(st)
    name = ffi.string(info.name).decode("utf-8", "replace") if info.name != ffi.NULL else ""
    gpu = int(info.device_id) if info.device_type == lib.ORDO_DEVICE_GPU else None
    return OpInfo(name=name, priority=int(info.priority),
                  prop=_PROP_NAMES.get(int(info.prop), "normal"),
                  worker_index=None if info.worker_index < 0 else int(info.worker_index),
                  gpu=gpu, stream=int(ffi.cast("uintptr_t", info.stream)))


def device_count() -> int:
    """How many GPUs the library can use (0 in a build without CUDA, or without a GPU or its
    driver: a push with ``gpu=`` then raises NoDevice, whose message says why)."""
    n = ffi.new("int32_t*")
    st = lib.ordo_device_count(n)
    if st != OK:
        raise error_for(st)
    return int(n[0])


def _placement(prop: str, gpu: Optional[int]) -> tuple[int, Optional[int]]:
    """push's prop and gpu arguments, checked: the ORDO_PROP_* value and the GPU (or None)."""
    code = _PROPS.get(prop) if isinstance(prop, str) else None
    if code is None:
        raise InvalidArgument(f"ordo: prop must be one of {', '.join(map(repr, _PROPS))}, "
                              f"not {prop!r}", lib.ORDO_ERR_INVALID_ARGUMENT)
    if gpu is not None and (type(gpu) is bool or not isinstance(gpu, int)
                            or not 0 <= gpu < 2**31):
        raise InvalidArgument(f"ordo: gpu must be a GPU's ordinal (an int >= 0) or None, not "
                              f"{gpu!r}", lib.ORDO_ERR_INVALID_ARGUMENT)
    return code, gpu


_open_engines: dict[int, "Engine"] = {}  # id -> engine: open engines live until closed or exit
_open_lock = threading.Lock()

VarsArg = Iterable[Var]


class Engine:
    """An ordo engine and its worker threads.

    ``Engine(workers=None, kind=None)``: ``workers`` is the number of CPU worker threads
    (default: env ORDO_CPU_THREADS, else the machine's); ``kind`` is "per_device" (the default),
    "pooled" or "naive" (ops run inside push, on the pushing thread: a debugging aid).

    Use it as a context manager, or call ``close()``: closing runs every op pushed to
    completion, then stops the workers. A ``with`` block that raises first fails the
    Completions of its deferred ops not used yet, so that the close cannot wait for them
    forever. An engine still open at interpreter exit is closed then:
    its pending work gets ``ordo.exit_timeout`` seconds (env ORDO_EXIT_TIMEOUT, default 5)
    during which some op must complete; past that, ops that have not started fail without
    running, unused Completions are failed, and once the ops running Python code return the
    engine is destroyed (if they do not within exit_timeout, it is left to the OS, with a
    warning on stderr, so that exit never hangs).

    Keyword-only settings (None: the environment's, else the library's default):
    ``max_pending`` (the submission window), ``trace_path`` (a Chrome trace written at close),
    ``gpu_compute_streams`` (compute streams per GPU, 1 to 64; env ORDO_GPU_STREAMS, default 4)
    and ``gpu_stream_waits`` (True/False: early release of GPU successors through stream waits;
    env ORDO_GPU_STREAM_WAITS, default on). The GPU settings are checked without a GPU too,
    and do nothing there. ``config()`` reports what the engine runs with.
    """

    def __init__(self, workers: Optional[int] = None,
                 kind: Union[None, str, int] = None, *,
                 max_pending: Optional[int] = None,
                 trace_path: Union[None, str, "os.PathLike[str]"] = None,
                 gpu_compute_streams: Optional[int] = None,
                 gpu_stream_waits: Optional[bool] = None) -> None:
        self._ptr: Any = ffi.NULL
        self._closed = True
        self._abandoned = False
        self._close_lock = threading.Lock()
        self._closed_event = threading.Event()
        # the Completions not used yet, weakly (one dropped unused fails its op itself)
        self._completions: dict[int, "weakref.ref[Completion]"] = {}
        self._completions_lock = threading.RLock()  # a GC-run __del__ may re-enter
        cfg = ffi.new("ordo_engine_config*")
        lib.ordo_engine_config_init_sized(cfg, ffi.sizeof("ordo_engine_config"))
        if isinstance(kind, str) or kind is None:
            if kind not in _KINDS:
                raise InvalidArgument(f"ordo: unknown engine kind {kind!r}; one of "
                                      "'per_device', 'pooled', 'naive'",
                                      lib.ORDO_ERR_INVALID_ARGUMENT)
            cfg.kind = _KINDS[kind]
        else:
            cfg.kind = int(kind)
        if workers is not None:
            if int(workers) < 1:
                raise InvalidArgument(f"ordo: workers must be at least 1, not {workers}",
                                      lib.ORDO_ERR_INVALID_ARGUMENT)
            cfg.cpu_threads = int(workers)
        if max_pending is not None:
            cfg.max_pending = int(max_pending)
        path_buf = None
        if trace_path is not None:
            path_buf = ffi.new("char[]", os.fsencode(trace_path))
            cfg.trace_path = path_buf
        if gpu_compute_streams is not None:
            n = int(gpu_compute_streams)
            # 0 would mean "the environment's" to the library: refuse it here, as the rest
            # of the range is refused there (its message names the field)
            cfg.gpu_compute_streams = n if n != 0 and -2**31 <= n < 2**31 else -1
        if gpu_stream_waits is not None:
            if not isinstance(gpu_stream_waits, bool):
                raise InvalidArgument("ordo: gpu_stream_waits must be True or False, not "
                                      f"{gpu_stream_waits!r}", lib.ORDO_ERR_INVALID_ARGUMENT)
            cfg.gpu_stream_waits = 1 if gpu_stream_waits else -1
        out = ffi.new("ordo_engine**")
        check(lib.ordo_engine_create(cfg, out))
        self._ptr = out[0]
        # The Python object's own reference: the engine's memory (not its workers) lives as long
        # as this object, so that a use after close() is ORDO_ERR_SHUTDOWN, never a freed
        # pointer. Released in __del__.
        st = lib.ordo_engine_retain(self._ptr)
        if st != OK:
            err = error_for(st)
            lib.ordo_engine_destroy(self._ptr)
            self._ptr = ffi.NULL
            raise err
        self._closed = False
        self._pid = os.getpid()
        with _open_lock:
            _open_engines[id(self)] = self

    # -- life ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Runs every op pushed so far to completion (deferred ones included: their Completions
        must be used), stops the workers and closes the engine. Later calls (pushes, waits, new
        vars) raise Shutdown. Calling close() again, from any thread, waits for the first close
        to finish. Raises WouldDeadlock from inside an op of this engine (nothing happens)."""
        if self._ptr == ffi.NULL:
            return
        st = lib.ordo_engine_destroy(self._ptr)
        if st == OK:
            self._mark_closed()
        elif st == _SHUTDOWN:  # another close is draining, or done
            self._closed_event.wait()
        else:
            raise error_for(st)

    def _mark_closed(self) -> None:
        self._closed = True
        with _open_lock:
            _open_engines.pop(id(self), None)
        self._closed_event.set()

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is not None:
            # The block failed: nobody may be left to use the Completions it handed out (and
            # its traceback keeps them alive), so fail them rather than let close() wait for
            # them forever. Work already pushed still runs.
            self._fail_completions("failed because the `with ordo.Engine()` block raised "
                                   f"{exc_type.__name__}")
        self.close()

    def _fail_completions(self, why: str) -> None:
        with self._completions_lock:
            refs = list(self._completions.values())
        for ref in refs:
            c = ref()
            if c is None:
                continue
            try:
                c._finish(_OP_FAILED, why)
            except BaseException:  # noqa: BLE001
                pass

    def __del__(self) -> None:
        try:
            if self._ptr != ffi.NULL and self._closed:
                lib.ordo_engine_release(self._ptr)
                self._ptr = ffi.NULL
        except BaseException:  # noqa: BLE001
            pass

    def __repr__(self) -> str:
        return f"<ordo.Engine {'closed' if self._closed else 'open'} at {id(self):#x}>"

    # -- vars and ops ---------------------------------------------------------------------

    def var(self) -> Var:
        """A new variable."""
        out = ffi.new("ordo_var*")
        check(lib.ordo_var_new(self._ptr, out))
        return Var(self, int(out[0]))

    @staticmethod
    def _handles(vars_: VarsArg, what: str) -> tuple[Any, int]:
        if isinstance(vars_, Var):
            vars_ = (vars_,)
        hs = []
        for v in vars_:
            if not isinstance(v, Var):
                raise TypeError(f"ordo: {what} must hold ordo.Var objects, not {type(v).__name__}")
            hs.append(v._handle)
        if not hs:
            return ffi.NULL, 0
        return ffi.new("ordo_var[]", hs), len(hs)

    @overload
    def push(self, fn: Callable[[], Any], reads: VarsArg = ..., writes: VarsArg = ..., *,
             name: Optional[str] = ..., priority: int = ..., deferred: Literal[False] = ...,
             prop: str = ..., gpu: Optional[int] = ...) -> None: ...

    @overload
    def push(self, fn: Callable[[Completion], Any], reads: VarsArg = ...,
             writes: VarsArg = ..., *, name: Optional[str] = ..., priority: int = ...,
             deferred: Literal[True], prop: str = ..., gpu: Optional[int] = ...) -> None: ...

    @overload
    def push(self, fn: Callable[..., Any], reads: VarsArg = ..., writes: VarsArg = ..., *,
             name: Optional[str] = ..., priority: int = ..., deferred: bool = ...,
             prop: str = ..., gpu: Optional[int] = ...) -> None: ...

    def push(self, fn: Callable[..., Any], reads: VarsArg = (), writes: VarsArg = (), *,
             name: Optional[str] = None, priority: int = 0, deferred: bool = False,
             prop: str = "normal", gpu: Optional[int] = None) -> None:
        """Pushes an op: `fn` runs on a worker thread after every op pushed before it that
        shares a var with it where either writes it; ops that only read a var may overlap.

        `fn()` returning None (or 0) succeeds; a non-zero int fails the op with that code;
        raising fails it with code ORDO_ERR_OP_FAILED (3) and the exception's text, which a wait
        on a var the op writes raises as OpFailed. An op whose inputs carry an error does not
        run: it passes the error on to the vars it writes.

        With ``deferred=True``, `fn(completion)` starts the work and the op completes when
        ``completion.complete()`` or ``completion.fail(code, message)`` is called (once, from
        any thread); its return value is ignored, and an exception it raises fails the op if
        the completion was not used yet.

        `name` shows in errors and traces; `priority`: higher runs first among ready ops.
        `prop` picks the workers: "normal", "cpu_prioritized", "copy_to_device",
        "copy_from_device" (on a GPU: its copy stream of that direction) or "async" (starts on
        the pushing thread). `gpu=n` makes it a GPU op of GPU n: `fn` finds its CUDA stream in
        ``ordo.current_op().stream``, enqueues its work there and returns, and the op completes
        once that work has finished (NoDevice where there is no such GPU; see
        ``ordo.device_count()``).
        `fn` (and what it references) is kept alive until the op is done."""
        if not callable(fn):
            raise TypeError(f"ordo: fn must be callable, not {type(fn).__name__}")
        prop_code, gpu = _placement(prop, gpu)
        r, nr = self._handles(reads, "reads")
        w, nw = self._handles(writes, "writes")
        opts = ffi.new("ordo_push_opts*")
        lib.ordo_push_opts_init_sized(opts, ffi.sizeof("ordo_push_opts"))
        opts.priority = priority
        opts.prop = prop_code
        if gpu is not None:
            opts.device_type = lib.ORDO_DEVICE_GPU
            opts.device_id = gpu
        opts.free_fn = _free_callback
        name_buf = None
        if name is not None:
            name_buf = ffi.new("char[]", name.encode("utf-8", "replace"))
            opts.name = name_buf
        key = next(_keys)
        _ops[key] = _Op(fn, bool(deferred), self)
        try:
            st = lib.ordo_opr_push(self._ptr, _op_callback, ffi.cast("void*", key),
                                   r, nr, w, nw, opts)
        except BaseException:
            _ops.pop(key, None)
            raise
        if st != OK:
            _ops.pop(key, None)  # nothing was pushed, free_fn will not run
            raise error_for(st)

    # -- capture and replay -------------------------------------------------------------------

    def capture(self) -> "Capture":
        """``with engine.capture() as cap:`` records this thread's pushes to this engine instead
        of running them; after the block, ``cap.graph.launch()`` pushes them again (see
        ``ordo.Graph``). Raises InvalidState when this thread already captures, or from inside
        an op."""
        from ._graph import Capture
        return Capture(self)

    # -- pipelines ----------------------------------------------------------------------------

    def pipeline(self, pipes: Iterable[Any], lines: int) -> "Pipeline":
        """A pipeline of `lines` lines over `pipes` on this engine (see ``ordo.Pipeline``):
        each pipe an ``ordo.Pipe(fn, parallel=False)``, a ``(type, fn)`` tuple (type
        ``ordo.PIPE_SERIAL``/``ordo.PIPE_PARALLEL`` or "serial"/"parallel") or a bare callable
        (serial). Raises InvalidArgument for no pipes, 0 lines or a parallel first pipe."""
        from ._pipeline import Pipeline
        return Pipeline(self, pipes, lines)

    # -- waits --------------------------------------------------------------------------------

    @staticmethod
    def _timeout_ns(timeout: Optional[float]) -> Optional[int]:
        if timeout is None or timeout == math.inf:
            return None
        if not timeout >= 0:
            raise InvalidArgument(f"ordo: timeout must be >= 0 seconds, not {timeout}",
                                  lib.ORDO_ERR_INVALID_ARGUMENT)
        return min(int(timeout * 1e9), _NO_TIMEOUT_NS)

    def _var_error(self, handle: int, raise_errors: bool = False) -> tuple[int, str]:
        code = ffi.new("int32_t*")
        buf = ffi.new("char[]", _MSG_MAX + 32)
        st = lib.ordo_var_get_error(self._ptr, handle, code, buf, len(buf))
        if st != OK:
            if raise_errors:
                raise error_for(st)
            return 0, ""
        return int(code[0]), ffi.string(buf).decode("utf-8", "replace")

    @staticmethod
    def _code_in(message: str) -> Optional[int]:
        m = re.search(r"\(code (-?\d+)\)", message)
        return int(m.group(1)) if m else None

    def wait(self, var: Var, timeout: Optional[float] = None) -> None:
        """Blocks (with the GIL released) until every op pushed before this call that reads or
        writes `var` has completed. Raises OpFailed if `var` is then in an error state (``code``
        is the failing op's code), Timeout after `timeout` seconds (0 polls), WouldDeadlock
        from inside an op of this engine. On the main thread Ctrl-C interrupts it
        (KeyboardInterrupt; the ops go on)."""
        if not isinstance(var, Var):
            raise TypeError(f"ordo: wait needs an ordo.Var, not {type(var).__name__}")
        ptr, handle = self._ptr, var._handle
        st, message = _wait_interruptibly(
            lambda ns: lib.ordo_wait_for_var_timeout(ptr, handle, ns), self._timeout_ns(timeout))
        if st == OK:
            return
        if message is None:
            message = last_error_message()
        if st == _OP_FAILED:
            code, _ = self._var_error(handle)
            raise OpFailed(message, st, code or self._code_in(message))
        raise error_for(st, message)

    def wait_all(self, timeout: Optional[float] = None) -> None:
        """Blocks (with the GIL released) until every op pushed so far has completed. Raises
        OpFailed if any op failed (or was skipped) since the previous wait_all, naming the first
        (the record is then cleared); Timeout after `timeout` seconds (the record is kept). On
        the main thread Ctrl-C interrupts it (KeyboardInterrupt; the ops go on)."""
        ptr = self._ptr
        st, message = _wait_interruptibly(lambda ns: lib.ordo_wait_for_all_timeout(ptr, ns),
                                          self._timeout_ns(timeout))
        if st == OK:
            return
        if message is None:
            message = last_error_message()
        if st == _OP_FAILED:
            raise OpFailed(message, st, self._code_in(message))
        raise error_for(st, message)

    def wait_async(self, var: Var) -> "asyncio.Future[None]":
        """An asyncio future, of the running event loop, that is done once every op pushed on
        `var` before this call has completed (``await engine.wait_async(v)``); it raises
        OpFailed as wait() does, or Shutdown when the engine closed first. Blocks nobody: the
        engine resolves it from its own thread through ``loop.call_soon_threadsafe``. Must be
        called with an event loop running in this thread."""
        if not isinstance(var, Var):
            raise TypeError(f"ordo: wait_async needs an ordo.Var, not {type(var).__name__}")
        if _wait_callback is None:
            raise NotImplementedError(
                "ordo: the loaded library has no ordo_wait_for_var_async (it is older than 0.1 "
                "with the bindings' ABI additions)")
        loop = asyncio.get_running_loop()
        future: "asyncio.Future[None]" = loop.create_future()
        key = next(_keys)
        _async_waits[key] = _AsyncWait(loop, future, self, var._handle)
        st = lib.ordo_wait_for_var_async(self._ptr, var._handle, _wait_callback,
                                         ffi.cast("void*", key))
        if st != OK:
            _async_waits.pop(key, None)
            raise error_for(st)
        return future

    # -- observability ------------------------------------------------------------------------

    def stats(self) -> Stats:
        """The engine's counters (of ops pushed through push()); works after close()."""
        s = ffi.new("ordo_stats*")
        s.struct_size = ffi.sizeof("ordo_stats")
        check(lib.ordo_engine_stats(self._ptr, s))
        return Stats(int(s.workers), int(s.pushed), int(s.completed), int(s.failed),
                     int(s.skipped), int(s.pending), int(s.ready))

    def config(self) -> Config:
        """The configuration the engine runs with (after the environment and the defaults);
        works after close()."""
        c = ffi.new("ordo_engine_config*")
        lib.ordo_engine_config_init_sized(c, ffi.sizeof("ordo_engine_config"))
        check(lib.ordo_engine_get_config(self._ptr, c))
        kinds = {v: k for k, v in _KINDS.items() if k not in (None, "default")}
        trace = ffi.string(c.trace_path).decode("utf-8", "surrogateescape") \
            if c.trace_path != ffi.NULL else None
        return Config(kinds.get(int(c.kind), str(int(c.kind))), int(c.cpu_threads),
                      int(c.max_pending), bool(c.flags & lib.ORDO_ENGINE_FLAG_PUSHERS_HELP),
                      trace, int(c.gpu_compute_streams), int(c.gpu_stream_waits) == 1)

    # -- interpreter exit -------------------------------------------------------------------

    def _close_at_exit(self, idle_limit: float) -> None:
        ptr = self._ptr
        # 1. let the work run while it makes progress (some op completes at least every
        #    idle_limit seconds)
        last = self.stats().completed
        since = time.monotonic()
        while True:
            st = lib.ordo_wait_for_all_timeout(ptr, 50_000_000)  # GIL released
            if st != _TIMEOUT:
                break
            done = self.stats().completed
            now = time.monotonic()
            if done != last:
                last, since = done, now
            elif now - since >= idle_limit:
                break
        if st == _TIMEOUT:
            # 2. stuck: ops that have not started fail without running Python code, and unused
            #    Completions fail; ops running Python code get idle_limit more to return
            self._abandoned = True
            self._fail_completions("failed at interpreter exit: the Completion was never used")
            st = lib.ordo_wait_for_all_timeout(ptr, int(idle_limit * 1e9))
            if st == _TIMEOUT:
                s = self.stats()
                sys.stderr.write(
                    f"ordo: at exit, an engine still runs {s.pending} op(s) after "
                    f"{2 * idle_limit:g} s without progress; it is left to the OS instead of "
                    "destroyed (destroying would wait for them forever)\n")
                return
        if lib.ordo_engine_destroy(ptr) == OK:
            self._mark_closed()


#: Called at interpreter exit once the open engines are closed (or left to the OS): the
#: pipelines still alive are destroyed there (ordo._pipeline).
_exit_hooks: list[Callable[[], None]] = []


def _at_exit() -> None:
    global _finalizing
    with _open_lock:
        engines = [e for e in _open_engines.values() if e._pid == os.getpid()]
    for e in engines:
        try:
            limit = getattr(sys.modules.get(__package__ or "ordo"), "exit_timeout", exit_timeout)
            e._close_at_exit(max(float(limit), 0.0))
        except BaseException as exc:  # noqa: BLE001
            _report_unraisable(exc, "ordo: closing an engine at interpreter exit")
    for hook in list(_exit_hooks):  # what depends on the engines' work being over
        try:
            hook()
        except BaseException as exc:  # noqa: BLE001
            _report_unraisable(exc, "ordo: an interpreter-exit hook")
    # After this, a callback that still reaches Python (an op of an engine left to the OS)
    # fails without running user code.
    _finalizing = True


def _after_fork_in_child() -> None:
    # The child has none of the parent's worker threads: its engines cannot run or drain, and
    # must not be waited for at exit. Calls on them fail in the C library (INVALID_STATE).
    with _open_lock:
        _open_engines.clear()


atexit.register(_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
