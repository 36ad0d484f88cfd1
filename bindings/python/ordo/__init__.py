"""ordo: a task dependency engine (Python binding of libordo, through cffi in ABI mode).

    import ordo

    with ordo.Engine() as engine:
        total = engine.var()
        acc = []
        engine.push(lambda: acc.append(1), writes=[total])   # writers of one var run in order
        engine.push(lambda: acc.append(2), writes=[total])
        engine.wait(total)                                    # raises ordo.OpFailed on failure
        assert acc == [1, 2]

See ``Engine``, ``Engine.push``, ``Engine.pipeline`` and the exceptions (``Error`` and its
subclasses).
"""
from __future__ import annotations

from ._errors import (Error, InternalError, InvalidArgument, InvalidHandle, InvalidState,
                      NoDevice, NoMemory, OpFailed, Shutdown, Timeout, TokensDropped,
                      Unsupported, WouldDeadlock)
from ._lib import ffi, lib, library_path
from ._engine import (Completion, Config, Engine, OpInfo, Stats, Var, current_op,
                      device_count)
from ._graph import Capture, Graph
from ._pipeline import PIPE_PARALLEL, PIPE_SERIAL, Pipe, Pipeflow, Pipeline
from . import _engine

__all__ = [
    "Engine", "Var", "Completion", "Stats", "Config", "Graph", "Capture", "OpInfo",
    "current_op", "device_count",
    "Pipeline", "Pipe", "Pipeflow", "PIPE_SERIAL", "PIPE_PARALLEL",
    "Error", "OpFailed", "Timeout", "InvalidHandle", "InvalidArgument", "NoDevice", "Shutdown",
    "NoMemory", "InvalidState", "WouldDeadlock", "Unsupported", "InternalError", "TokensDropped",
    "version", "library_path", "exit_timeout",
]

__version__ = "0.1.0"


def version() -> str:
    """The loaded C library's version, e.g. "0.1.0"."""
    return str(ffi.string(lib.ordo_version_string()).decode())


#: Seconds that engines still open at interpreter exit get to finish their work while none of it
#: completes, before pending ops are failed (see Engine). Default 5; env ORDO_EXIT_TIMEOUT.
exit_timeout: float = _engine.exit_timeout
