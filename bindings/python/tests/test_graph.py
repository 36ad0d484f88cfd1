"""Capture and replay (Engine.capture, Graph): recorded pushes run only when launched, each
launch behaves as the pushes made again, misuse raises the library's status as an exception."""
from __future__ import annotations

import time

import pytest

import ordo
from ordo import _engine


def test_capture_records_and_launch_replays(engine: ordo.Engine) -> None:
    v = engine.var()
    log: list[str] = []
    with engine.capture() as cap:
        engine.push(lambda: log.append("a"), writes=[v], name="a")
        engine.push(lambda: log.append("b"), writes=[v], name="b")
    assert log == []  # recorded, not run
    graph = cap.graph
    assert isinstance(graph, ordo.Graph)
    for _ in range(3):
        graph.launch()
    engine.push(lambda: log.append("after"), writes=[v])
    engine.wait(v)
    assert log == ["a", "b"] * 3 + ["after"]  # launches ordered with pushes through the var
    graph.destroy()
    with pytest.raises(ordo.InvalidHandle):
        graph.launch()
    with pytest.raises(ordo.InvalidHandle):
        graph.destroy()


def test_graph_keeps_functions_until_destroy(engine: ordo.Engine) -> None:
    v = engine.var()
    before = len(_engine._ops)
    with engine.capture() as cap:
        engine.push(lambda: None, writes=[v])
    assert cap.graph is not None
    cap.graph.launch()
    engine.wait_all()
    assert len(_engine._ops) == before + 1  # the captured function outlives its launches
    cap.graph.destroy()
    assert len(_engine._ops) == before


def test_failure_in_a_launched_op(engine: ordo.Engine) -> None:
    v = engine.var()

    def boom() -> None:
        raise RuntimeError("replayed failure")

    with engine.capture() as cap:
        engine.push(boom, writes=[v], name="boom")
    assert cap.graph is not None
    with cap.graph as graph:
        graph.launch()
        with pytest.raises(ordo.OpFailed, match="replayed failure"):
            engine.wait(v)
        with pytest.raises(ordo.OpFailed):
            engine.wait_all()


def test_waits_inside_a_capture_are_refused(engine: ordo.Engine) -> None:
    v = engine.var()
    with engine.capture() as cap:
        with pytest.raises(ordo.InvalidState):
            engine.wait(v)
        with pytest.raises(ordo.InvalidState):
            engine.wait_all()
        with pytest.raises(ordo.InvalidState):
            with engine.capture():
                pass
    assert cap.graph is not None
    cap.graph.destroy()


def test_a_block_that_raises_drops_its_recording(engine: ordo.Engine) -> None:
    v = engine.var()
    ran: list[int] = []
    before = len(_engine._ops)
    cap = engine.capture()
    with pytest.raises(KeyError):
        with cap:
            engine.push(lambda: ran.append(1), writes=[v])
            raise KeyError("stop")
    assert cap.graph is None
    assert len(_engine._ops) == before  # the recorded function was let go
    engine.wait(v)  # the capture is over: waits work again
    assert ran == []


def test_destroy_while_in_flight_is_refused() -> None:
    with ordo.Engine(workers=2, kind="pooled") as engine:
        v = engine.var()
        completions: list[ordo.Completion] = []
        with engine.capture() as cap:
            engine.push(completions.append, writes=[v], deferred=True)
        assert cap.graph is not None
        cap.graph.launch()
        deadline = time.monotonic() + 30
        while not completions and time.monotonic() < deadline:
            time.sleep(0.001)
        assert completions, "the launched deferred op did not start"
        with pytest.raises(ordo.InvalidState):
            cap.graph.destroy()
        completions[0].complete()
        engine.wait(v)
        cap.graph.destroy()
