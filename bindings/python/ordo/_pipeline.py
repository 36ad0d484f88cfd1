"""Pipelines (ordo_pipeline_*): a task-parallel pipeline with token deferral, run on an engine.

    def source(pf: ordo.Pipeflow) -> None:        # pipe 0: generates tokens 0, 1, 2, ...
        if pf.token == 100:
            pf.stop()

    with engine.pipeline([source, ordo.Pipe(work, parallel=True), ordo.Pipe(sink)],
                         lines=4) as p:
        p.run()                                    # blocks, GIL released
        assert p.num_tokens == 100

How the callbacks cross into C: every pipe is created with one C trampoline
(``_pipe_trampoline``) and an integer key as its user_data; the key indexes ``_pipe_fns``, which
holds the Python callable until the pipeline is destroyed or ``reset_pipes`` replaced the pipes
(the only moments after which the library no longer calls them). The records do not reference
the Pipeline object, so a Pipeline dropped undestroyed is garbage collected and destroyed then.
The trampoline never lets an exception out: one raised by a callback fails the run (the callback
returns ORDO_ERR_OP_FAILED) and is kept to be chained to the OpFailed that ``run()`` raises.
"""
from __future__ import annotations

import operator
import threading
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, NamedTuple, Optional, Union

from . import _engine
from ._engine import _exception_text, _key_of, _keys, _report_unraisable
from ._errors import (InvalidArgument, InvalidHandle, InvalidState, OpFailed, TokensDropped,
                      check, error_for, last_error_message)
from ._lib import ffi, lib

if TYPE_CHECKING:
    from ._engine import Engine, VarsArg

__all__ = ["Pipe", "Pipeflow", "Pipeline", "PIPE_SERIAL", "PIPE_PARALLEL"]

OK: int = lib.ORDO_OK
_OP_FAILED: int = lib.ORDO_ERR_OP_FAILED
_INVALID_STATE: int = lib.ORDO_ERR_INVALID_STATE
_INVALID_HANDLE: int = lib.ORDO_ERR_INVALID_HANDLE
_INVALID_ARGUMENT: int = lib.ORDO_ERR_INVALID_ARGUMENT
_TOKENS_DROPPED: int = lib.ORDO_ERR_TOKENS_DROPPED
_U64_MAX = 2**64 - 1
_U32_MAX = 2**32 - 1

#: A pipe that runs up to `lines` tokens at once, in any order (ORDO_PIPE_PARALLEL).
PIPE_PARALLEL: int = lib.ORDO_PIPE_PARALLEL
#: A pipe that sees the tokens one at a time, in the order pipe 0 accepted them
#: (ORDO_PIPE_SERIAL). The first pipe must be serial.
PIPE_SERIAL: int = lib.ORDO_PIPE_SERIAL

_TYPE_NAMES = {"serial": PIPE_SERIAL, "parallel": PIPE_PARALLEL}

PipeFn = Callable[["Pipeflow"], Any]


@dataclass(frozen=True)
class Pipe:
    """One pipe of a pipeline: ``fn(pipeflow)`` is called once per token. ``parallel=False``
    (serial): one token at a time, in the order pipe 0 accepted them; ``parallel=True``: up to
    `lines` tokens at once. The first pipe must be serial."""
    fn: PipeFn
    parallel: bool = False

    @property
    def type(self) -> int:
        """PIPE_PARALLEL or PIPE_SERIAL."""
        return PIPE_PARALLEL if self.parallel else PIPE_SERIAL


PipeArg = Union[Pipe, "tuple[Union[int, str], PipeFn]", PipeFn]


class Pipeflow:
    """What a pipe callback learns about the token it runs, and, in pipe 0, how it steers token
    generation. Valid only inside the callback it was given to, on that thread: afterwards (or
    from another thread) every attribute and method raises InvalidState."""

    __slots__ = ("_pf", "_live")

    def __init__(self, pf: Any) -> None:
        self._pf = pf
        self._live = True

    def _ptr(self) -> Any:
        if not self._live:
            raise InvalidState("ordo: a Pipeflow is valid only inside the pipe callback it was "
                               "given to (this one has returned)", _INVALID_STATE)
        return self._pf

    @staticmethod
    def _invalid() -> InvalidState:
        return InvalidState("ordo: a Pipeflow is valid only inside its pipe callback, on the "
                            "callback's thread", _INVALID_STATE)

    def _get(self, getter: Any, invalid: int) -> int:
        """A getter's answer; its "invalid" value (a pipeflow used on another thread) raises."""
        v = int(getter(self._ptr()))
        if v == invalid:
            raise self._invalid()
        return v

    @property
    def token(self) -> int:
        """The token's id. In pipe 0: for a fresh token the next id, for a resumed deferred
        token its own id."""
        return self._get(lib.ordo_pipeflow_token, _U64_MAX)

    @property
    def line(self) -> int:
        """The line running the callback (0 .. lines-1). In pipe 0, a token that defers does not
        keep this line."""
        return self._get(lib.ordo_pipeflow_line, _U32_MAX)

    @property
    def pipe(self) -> int:
        """The pipe running the callback (0 .. len(pipes)-1)."""
        return self._get(lib.ordo_pipeflow_pipe, _U32_MAX)

    @property
    def num_deferrals(self) -> int:
        """How many earlier pipe-0 invocations of this token deferred (in later pipes: the final
        count)."""
        ptr = self._ptr()
        v = int(lib.ordo_pipeflow_num_deferrals(ptr))
        # UINT32_MAX is also the most a valid pipeflow reports: the token tells them apart
        if v == _U32_MAX and int(lib.ordo_pipeflow_token(ptr)) == _U64_MAX:
            raise self._invalid()
        return v

    def stop(self) -> None:
        """Pipe 0 only: ends token generation. This token is discarded, no further pipe-0 call
        happens in this run, and the tokens already accepted run to the end. Raises
        InvalidState in another pipe (nothing changes)."""
        check(lib.ordo_pipeflow_stop(self._ptr()))

    def defer(self, token: int) -> None:
        """Pipe 0 only: this token leaves pipe 0 unaccepted and is called again (with
        ``num_deferrals`` one higher) once `token` has been accepted by pipe 0. Several calls
        wait for all of them. Valid targets are ids not generated yet and tokens deferred right
        now; others are ignored (when none is valid the token is called again at once: branch on
        ``num_deferrals``). A token whose targets can never be accepted is dropped at the end of
        the run (``run()`` raises TokensDropped). Raises InvalidState in another pipe."""
        t = operator.index(token)
        if not 0 <= t <= _U64_MAX:
            raise InvalidArgument(f"ordo: a token id is 0 to 2**64-1, not {t}", _INVALID_ARGUMENT)
        check(lib.ordo_pipeflow_defer(self._ptr(), t))

    def __repr__(self) -> str:
        if not self._live:
            return "<ordo.Pipeflow (expired)>"
        try:
            return f"<ordo.Pipeflow token={self.token} pipe={self.pipe} line={self.line}>"
        except InvalidState:
            return "<ordo.Pipeflow (other thread)>"


# --------------------------------------------------------------------------------------------
# What C holds for Python: the pipes' callables, by key.
# --------------------------------------------------------------------------------------------

class _State:
    """What the callbacks of one pipeline share (not the Pipeline itself, so that the records
    below do not keep it alive): its engine, and the exception of the current run."""

    __slots__ = ("engine", "exc", "pushed", "stop_requested")

    def __init__(self, engine: "Engine") -> None:
        self.engine = engine
        self.exc: Optional[BaseException] = None  # the first exception a callback raised
        self.pushed = False  # the current run was pushed: nobody can re-raise its exception
        self.stop_requested = False  # Ctrl-C during run(): pipe 0 ends token generation

    def failed(self, exc: BaseException) -> None:
        if self.exc is None:
            self.exc = exc
        if self.pushed:
            _report_unraisable(exc, "ordo: a pipe callback of a pushed pipeline run raised (the "
                                    "run's op fails with code 3)")


class _PipeRec(NamedTuple):
    fn: PipeFn
    state: _State


_pipe_fns: dict[int, _PipeRec] = {}


def _pipe_onerror(exc_type: Any, exc_value: Any, tb: Any) -> int:
    return _OP_FAILED  # something escaped the trampoline's own handler: still a failure


def _pipe_trampoline(pf: Any, user_data: Any) -> int:
    try:
        rec = _pipe_fns.get(_key_of(user_data))
        if rec is None:  # cannot happen: the record lives as long as C may call it
            return _OP_FAILED
        if _engine._finalizing or rec.state.engine._abandoned:
            return _OP_FAILED  # the interpreter is exiting: no Python code runs
        if rec.state.stop_requested and lib.ordo_pipeflow_pipe(pf) == 0:
            lib.ordo_pipeflow_stop(pf)  # run() was interrupted: no more tokens
            return 0
        flow = Pipeflow(pf)
        _engine._running.pipes += 1
        try:
            result = rec.fn(flow)
        except BaseException as exc:  # noqa: BLE001 - becomes the run's failure
            rec.state.failed(exc)
            return _OP_FAILED
        finally:
            flow._live = False
            _engine._running.pipes -= 1
        if result is None or type(result) is bool or not isinstance(result, int):
            return 0
        if result != 0 and not -2**31 <= result < 2**31:
            rec.state.failed(OverflowError(f"the pipe callback returned {result}, out of int32 "
                                           "range"))
            return _OP_FAILED
        return result
    except BaseException:  # noqa: BLE001 - never unwind into C; never count it as success
        return _OP_FAILED


_pipe_callback = ffi.callback("ordo_pipe_fn", _pipe_trampoline, error=_OP_FAILED,
                              onerror=_pipe_onerror)


def _pipe_of(item: Any) -> tuple[int, PipeFn]:
    if isinstance(item, Pipe):
        kind, fn = item.type, item.fn
    elif isinstance(item, tuple):
        if len(item) != 2:
            raise TypeError("ordo: a pipe tuple is (type, fn)")
        kind, fn = item
        if isinstance(kind, str):
            if kind not in _TYPE_NAMES:
                raise InvalidArgument(f"ordo: unknown pipe type {kind!r}; 'serial' or "
                                      "'parallel'", _INVALID_ARGUMENT)
            kind = _TYPE_NAMES[kind]
        kind = operator.index(kind)
        if not -2**63 <= kind < 2**63:
            raise InvalidArgument(f"ordo: unknown pipe type {kind}", _INVALID_ARGUMENT)
    elif callable(item):
        kind, fn = PIPE_SERIAL, item
    else:
        raise TypeError("ordo: a pipe is an ordo.Pipe, a (type, fn) tuple or a callable, not "
                        f"{type(item).__name__}")
    if not callable(fn):
        raise TypeError(f"ordo: a pipe's fn must be callable, not {type(fn).__name__}")
    return kind, fn


def _make_pipes(pipes: Iterable[PipeArg], state: _State) -> tuple[Any, int, list[int]]:
    """The ordo_pipe array (NULL when empty), its length and the keys registered for it."""
    specs = [_pipe_of(p) for p in pipes]
    if not specs:
        return ffi.NULL, 0, []
    arr = ffi.new("ordo_pipe[]", len(specs))
    keys = []
    for i, (kind, fn) in enumerate(specs):
        key = next(_keys)
        _pipe_fns[key] = _PipeRec(fn, state)
        keys.append(key)
        arr[i].type = kind
        arr[i].fn = _pipe_callback
        arr[i].user_data = ffi.cast("void*", key)
    return arr, len(specs), keys


def _forget(keys: Iterable[int]) -> None:
    for k in keys:
        _pipe_fns.pop(k, None)


def _lines_arg(lines: Any) -> int:
    n = operator.index(lines)
    if not 0 <= n <= _U32_MAX:
        raise InvalidArgument(f"ordo: lines must be 1 to 65,536, not {n}", _INVALID_ARGUMENT)
    return n


# Pipelines garbage collected while a pushed run was in flight (destroy refused): their handles
# and keys, destroyed at a later creation or at exit.
_orphans: list[tuple[Any, list[int]]] = []
_orphans_lock = threading.Lock()
_alive: "weakref.WeakSet[Pipeline]" = weakref.WeakSet()


def _retry_orphans() -> None:
    with _orphans_lock:
        pending = list(_orphans)
        _orphans.clear()
    keep = []
    for ptr, keys in pending:
        st = lib.ordo_pipeline_destroy(ptr)
        if st == _INVALID_STATE:
            keep.append((ptr, keys))
        else:
            _forget(keys)
    if keep:
        with _orphans_lock:
            _orphans.extend(keep)


def _destroy_all_at_exit() -> None:
    # The engines are closed (their pushed runs are over): let go of every pipeline.
    for p in list(_alive):
        try:
            if not p._destroyed:
                p.destroy()
        except BaseException:  # noqa: BLE001 - a run still in flight: left to the OS
            pass
    _retry_orphans()


_engine._exit_hooks.append(_destroy_all_at_exit)


# --------------------------------------------------------------------------------------------
# Pipeline
# --------------------------------------------------------------------------------------------

class Pipeline:
    """A pipeline of ``lines`` lines over ``pipes`` on an engine (``Engine.pipeline``).

    Pipe 0 (always serial) generates tokens 0, 1, 2, ... until it calls ``pipeflow.stop()``;
    every token then visits the other pipes in order, on one line; a line holds one token at a
    time. A callback ``fn(pipeflow)`` returning None (or 0) succeeds; a non-zero int fails the
    run with that code; raising fails it with code 3 (ORDO_ERR_OP_FAILED). Callbacks run on the
    engine's workers (for the naive engine, on the thread that runs the pipeline), one at a time
    per serial pipe; they may push ops but must not wait on their own engine.

    A context manager: leaving the block destroys the pipeline (raising InvalidState if a pushed
    run is still in flight, as ``destroy()`` does). The pipes' functions are kept alive until
    ``destroy()`` or ``reset_pipes()``. A Pipeline garbage collected undestroyed is destroyed
    then (once its pushed run is over), and those still alive at interpreter exit are destroyed
    after the engines are closed."""

    def __init__(self, engine: "Engine", pipes: Iterable[PipeArg], lines: int) -> None:
        self._destroyed = True
        self._runs_inline = False
        self._ptr: Any = ffi.NULL
        self._keys: list[int] = []
        self._engine = engine
        self._state = _State(engine)
        if _orphans:
            _retry_orphans()
        n_lines = _lines_arg(lines)
        arr, n, keys = _make_pipes(pipes, self._state)
        out = ffi.new("ordo_pipeline**")
        try:
            st = lib.ordo_pipeline_create(engine._ptr, n_lines, arr, n, out)
        except BaseException:
            _forget(keys)
            raise
        if st != OK:
            _forget(keys)
            raise error_for(st)
        self._ptr = out[0]
        self._keys = keys
        self._runs_inline = engine.config().kind == "naive"
        self._lines = n_lines
        self._num_pipes = n
        self._destroyed = False
        _alive.add(self)

    # -- properties -------------------------------------------------------------------------

    @property
    def engine(self) -> "Engine":
        return self._engine

    @property
    def num_lines(self) -> int:
        return self._lines

    @property
    def num_pipes(self) -> int:
        return self._num_pipes

    @property
    def num_tokens(self) -> int:
        """The tokens generated since the last reset (the next fresh id; a deferred token
        counts, even one later dropped; the id pipe 0 stopped on does not)."""
        out = ffi.new("uint64_t*")
        check(lib.ordo_pipeline_num_tokens(self._live_ptr(), out))
        return int(out[0])

    @property
    def exception(self) -> Optional[BaseException]:
        """The exception a callback raised in the last run (pushed or not), or None. Cleared
        when a run starts and by reset()."""
        return self._state.exc

    def _live_ptr(self) -> Any:
        # A destroyed handle is refused here rather than passed on: its slot is reused after
        # 65,535 creations, when it would name another pipeline.
        if self._destroyed:
            raise InvalidHandle("ordo: the pipeline was destroyed", _INVALID_HANDLE)
        return self._ptr

    # -- runs -------------------------------------------------------------------------------

    def _begin(self, pushed: bool) -> tuple[Optional[BaseException], bool, bool]:
        """Resets the run state for a run about to start; returns the state before, which
        _refused() puts back when the library refuses the run (one may be in flight)."""
        s = self._state
        prev = (s.exc, s.pushed, s.stop_requested)
        s.exc, s.pushed, s.stop_requested = None, pushed, False
        return prev

    def _refused(self, prev: tuple[Optional[BaseException], bool, bool]) -> None:
        self._state.exc, self._state.pushed, self._state.stop_requested = prev

    def _run_interruptibly(self, ptr: Any) -> tuple[int, Optional[str]]:
        """ordo_pipeline_run(ptr), so that Ctrl-C stops it when called on the main thread
        (_engine._call_interruptibly): pipe 0 then ends token generation at its next call, the
        tokens already accepted run to the end, and KeyboardInterrupt is raised; a second
        Ctrl-C raises at once and leaves the run going on. A naive engine's run stays on this
        thread (its callbacks run on the thread that runs the pipeline, which then sees Ctrl-C
        in them), and so does a run from inside a callback of ordo (which the library
        refuses). Returns the status and the message when it is not this thread's last error
        message (the helper thread's)."""
        if (self._runs_inline or threading.current_thread() is not threading.main_thread()
                or _engine._inside_callback()):
            return lib.ordo_pipeline_run(ptr), None

        def stop() -> None:
            self._state.stop_requested = True

        return _engine._call_interruptibly(lambda: lib.ordo_pipeline_run(ptr),
                                           "ordo-pipeline-run", on_interrupt=stop)

    def run(self) -> None:
        """Runs the pipeline until pipe 0 stops and every accepted token has left the last
        pipe; blocks with the GIL released. Token ids and lines continue from the last run
        unless the pipeline was reset.

        Raises OpFailed when a callback failed (``code``: its code; one that raised is code 3,
        and its exception is chained as ``__cause__``): the tokens in flight are drained without
        more callbacks and the pipeline needs ``reset()`` before it runs again (InvalidState
        until then). Raises TokensDropped (``tokens``: their ids) when tokens whose deferral
        could never be resolved were dropped: the rest of the run is intact and the pipeline may
        run again. Before anything runs: InvalidHandle after destroy(), InvalidState while a
        run is in flight, WouldDeadlock from inside a callback or op of the same engine,
        Shutdown once the engine is closed.

        On the main thread Ctrl-C stops the run: pipe 0 is not called again, the tokens it
        accepted run to the end, then KeyboardInterrupt is raised (the pipeline may run again;
        after a failure meanwhile it needs ``reset()``). A second Ctrl-C raises at once and
        leaves the run going on: the pipeline counts as in flight until it ends."""
        ptr = self._live_ptr()
        prev = self._begin(pushed=False)
        st, message = self._run_interruptibly(ptr)
        if st == OK:
            return
        if message is None:
            message = last_error_message()
        if st == _OP_FAILED:
            exc = self._state.exc
            text = message if exc is None else f"{message}: {_exception_text(exc)}"
            raise OpFailed(text, st, _engine.Engine._code_in(message)) from exc
        if st == _TOKENS_DROPPED:
            raise TokensDropped(message, st, tuple(self.dropped()))
        if st != lib.ORDO_ERR_NO_MEMORY:  # refused: nothing ran (NO_MEMORY may be either)
            self._refused(prev)
        raise error_for(st, message)

    def push(self, reads: "VarsArg" = (), writes: "VarsArg" = (), *, name: Optional[str] = None,
             priority: int = 0) -> None:
        """Pushes one run of the pipeline as an op of its engine, ordered like any op through
        the vars it reads and writes: the run starts once the ops pushed before on those vars
        are done, and ops pushed after on them wait for the whole run. Returns at once.

        The op fails (a wait on a var it writes raises OpFailed) when a callback fails (with its
        code; an exception raised by a callback is code 3, is kept as ``exception`` and reported
        through ``sys.unraisablehook``, since nobody can catch it) or when tokens were dropped
        (code 12, ORDO_ERR_TOKENS_DROPPED). The run counts as in flight until its op is done:
        run(), push(), reset() and destroy() raise InvalidState meanwhile."""
        ptr = self._live_ptr()
        from ._engine import Engine
        r, nr = Engine._handles(reads, "reads")
        w, nw = Engine._handles(writes, "writes")
        opts = ffi.new("ordo_push_opts*")
        lib.ordo_push_opts_init_sized(opts, ffi.sizeof("ordo_push_opts"))
        opts.priority = priority
        name_buf = None
        if name is not None:
            name_buf = ffi.new("char[]", name.encode("utf-8", "replace"))
            opts.name = name_buf
        prev = self._begin(pushed=True)
        st = lib.ordo_pipeline_push(ptr, r, nr, w, nw, opts)
        if st != OK:
            self._refused(prev)
            raise error_for(st)

    def dropped(self) -> list[int]:
        """The ids of the tokens the last run dropped, ascending (until the next run or reset).
        Raises InvalidState while a run is in flight."""
        ptr = self._live_ptr()
        count = ffi.new("uint64_t*")
        check(lib.ordo_pipeline_dropped(ptr, count, ffi.NULL, 0))
        n = int(count[0])
        if n == 0:
            return []
        ids = ffi.new("uint64_t[]", n)
        check(lib.ordo_pipeline_dropped(ptr, count, ids, n))
        return [int(ids[i]) for i in range(min(n, int(count[0])))]

    # -- reset and destroy ------------------------------------------------------------------

    def reset(self) -> None:
        """Restarts the pipeline: token ids and lines from 0, the dropped list and a failed
        run's error cleared. Raises InvalidState while a run is in flight."""
        check(lib.ordo_pipeline_reset(self._live_ptr()))
        self._state.exc = None

    def reset_pipes(self, pipes: Iterable[PipeArg], lines: Optional[int] = None) -> None:
        """Replaces the pipes (and the number of lines, unless None), then resets as reset()
        does. The old pipes' functions are let go; on failure nothing changes."""
        ptr = self._live_ptr()
        n_lines = 0
        if lines is not None:
            n_lines = _lines_arg(lines)
            if n_lines == 0:
                raise InvalidArgument("ordo: lines must be 1 to 65,536, not 0 (None keeps the "
                                      "current number)", _INVALID_ARGUMENT)
        arr, n, keys = _make_pipes(pipes, self._state)
        try:
            st = lib.ordo_pipeline_reset_pipes(ptr, n_lines, arr, n)
        except BaseException:
            _forget(keys)
            raise
        if st != OK:
            _forget(keys)
            raise error_for(st)
        _forget(self._keys)
        self._keys = keys
        self._num_pipes = n
        if n_lines:
            self._lines = n_lines
        self._state.exc = None

    def destroy(self) -> None:
        """Destroys the pipeline and lets go of its pipes' functions. Raises InvalidState while
        a run is in flight (nothing happens), InvalidHandle when destroyed already."""
        st = lib.ordo_pipeline_destroy(self._live_ptr())
        if st != OK:
            raise error_for(st)
        self._destroyed = True
        _forget(self._keys)
        self._keys = []
        _alive.discard(self)

    def __enter__(self) -> "Pipeline":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._destroyed:
            return
        if exc_type is None:
            self.destroy()
            return
        try:
            self.destroy()
        except BaseException:  # noqa: BLE001 - the block's exception goes on; __del__ retries
            pass

    def __del__(self) -> None:
        try:
            if self._destroyed:
                return
            self._destroyed = True
            st = lib.ordo_pipeline_destroy(self._ptr)
            if st == _INVALID_STATE:  # a pushed run in flight: destroyed later
                with _orphans_lock:
                    _orphans.append((self._ptr, self._keys))
            else:
                _forget(self._keys)
        except BaseException:  # noqa: BLE001
            pass

    def __repr__(self) -> str:
        state = "destroyed" if self._destroyed else f"{self._num_pipes} pipes, {self._lines} lines"
        return f"<ordo.Pipeline {state}>"
