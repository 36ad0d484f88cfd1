"""Capture and replay (ordo_graph_*): record an engine's pushes once, launch them many times.

    with engine.capture() as cap:          # this thread's pushes are recorded, not run
        engine.push(step, writes=[state])
    graph = cap.graph
    for _ in range(100):
        graph.launch()                      # as if those pushes were made again, in order
    engine.wait_all()
    graph.destroy()
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from ._errors import error_for
from ._lib import ffi, lib

if TYPE_CHECKING:
    from ._engine import Engine

OK = 0


class Graph:
    """A captured sequence of pushes (``Engine.capture``). ``launch()`` pushes them again, in
    capture order, as if they were pushed again at that moment: the same functions, vars, names
    and priorities, ordered against every other push and wait through the vars; failures and
    skips as for pushed ops. The captured functions stay alive until ``destroy()``.

    ``destroy()`` raises InvalidState while ops of a launch have not finished (wait for them
    first, e.g. with ``engine.wait_all()``); after it, ``launch()`` raises InvalidHandle. A graph
    that is garbage collected undestroyed is destroyed then if no launch is in flight (otherwise
    its captured functions are kept until the process ends)."""

    def __init__(self, engine: "Engine", ptr: Any) -> None:
        self._engine = engine
        self._ptr = ptr
        self._destroyed = False

    @property
    def engine(self) -> "Engine":
        return self._engine

    def launch(self) -> None:
        """Pushes the captured ops again (asynchronous, like push). Raises InvalidHandle after
        destroy() (or when a var the graph uses was deleted: the ops before the first one that
        uses it were pushed), Shutdown once the engine is closed, InvalidState inside a
        capture of the engine on this thread."""
        st = lib.ordo_graph_launch(self._ptr)
        if st != OK:
            raise error_for(st)

    def destroy(self) -> None:
        """Destroys the graph and lets go of its captured functions."""
        st = lib.ordo_graph_destroy(self._ptr)
        if st != OK:
            raise error_for(st)
        self._destroyed = True

    def __enter__(self) -> "Graph":
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.destroy()

    def __del__(self) -> None:
        try:
            if not self._destroyed:
                lib.ordo_graph_destroy(self._ptr)  # refused while in flight: nothing happens
        except BaseException:  # noqa: BLE001
            pass

    def __repr__(self) -> str:
        state = "destroyed" if self._destroyed else "live"
        return f"<ordo.Graph {state}>"


class Capture:
    """``with engine.capture() as cap:`` records this thread's pushes to the engine instead of
    running them; when the block ends, ``cap.graph`` is the Graph. While it is open, waits,
    var deletes and clears, close() and launches on that engine from this thread raise
    InvalidState. If the block raises, what it recorded is dropped (``cap.graph`` stays None)."""

    def __init__(self, engine: "Engine") -> None:
        self._engine = engine
        self.graph: Optional[Graph] = None

    def __enter__(self) -> "Capture":
        st = lib.ordo_graph_begin_capture(self._engine._ptr)
        if st != OK:
            raise error_for(st)
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        out = ffi.new("ordo_graph**")
        st = lib.ordo_graph_end_capture(self._engine._ptr, out)
        if st != OK:
            if exc_type is None:
                raise error_for(st)
            return
        graph = Graph(self._engine, out[0])
        if exc_type is not None:
            graph.destroy()  # nothing was launched: never in flight
            return
        self.graph = graph
