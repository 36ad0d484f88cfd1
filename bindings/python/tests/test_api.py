"""The rest of the API: handles, errors, timeouts, the GIL, keeping callables alive."""
from __future__ import annotations

import gc
import queue
import sys
import threading
import time
import weakref

import pytest

import ordo
from ordo import _engine

from conftest import THREADED_KINDS


def hold(engine: ordo.Engine, var: ordo.Var, name: str = "held") -> ordo.Completion:
    """Pushes a deferred op that writes `var` and returns its Completion once it runs."""
    q: "queue.Queue[ordo.Completion]" = queue.Queue()
    engine.push(q.put, writes=[var], deferred=True, name=name)
    return q.get(timeout=30)


def test_version_and_library() -> None:
    assert ordo.version().count(".") == 2
    assert "libordo.so" in ordo.library_path


def test_context_manager_closes_and_close_is_idempotent() -> None:
    with ordo.Engine(workers=2) as e:
        v = e.var()
        e.push(lambda: time.sleep(0.05), writes=[v])
    assert e.closed
    assert e.stats().completed == 1  # close ran the pending op; stats work after close
    e.close()  # again: nothing
    with pytest.raises(ordo.Shutdown):
        e.push(lambda: None)
    with pytest.raises(ordo.Shutdown):
        e.var()
    with pytest.raises(ordo.Shutdown):
        e.wait_all()


def test_concurrent_close_waits_for_the_drain() -> None:
    e = ordo.Engine(workers=2)
    v = e.var()
    e.push(lambda: time.sleep(0.3), writes=[v])
    t = threading.Thread(target=e.close)
    t.start()
    time.sleep(0.05)
    e.close()  # the second close returns only once the first has drained
    assert e.closed and e.stats().pending == 0
    t.join()


def test_engine_arguments() -> None:
    with pytest.raises(ordo.InvalidArgument):
        ordo.Engine(kind="quantum")
    with pytest.raises(ValueError):  # InvalidArgument is a ValueError too
        ordo.Engine(workers=0)
    with pytest.raises(ordo.InvalidArgument):
        ordo.Engine(workers=5000)  # the library's range is 1 to 1,024
    for kind in ("naive", "pooled", "per_device", None):
        with ordo.Engine(workers=1, kind=kind) as e:
            v = e.var()
            e.push(lambda: None, writes=[v])
            e.wait(v)


def test_invalid_handles() -> None:
    with ordo.Engine(workers=2) as e, ordo.Engine(workers=1) as other:
        v = e.var()
        v.delete()
        with pytest.raises(ordo.InvalidHandle):
            v.delete()
        with pytest.raises(ordo.InvalidHandle):
            e.push(lambda: None, writes=[v])
        with pytest.raises(ordo.InvalidHandle):
            e.wait(v)
        foreign = other.var()
        with pytest.raises(ordo.InvalidHandle) as info:
            e.push(lambda: None, reads=[foreign])
        assert info.value.status == 2 and info.value.status_name == "ORDO_ERR_INVALID_HANDLE"
        assert "ordo_opr_push" in info.value.message
        with pytest.raises(TypeError):
            e.push(lambda: None, writes=[42])  # type: ignore[list-item]
        with pytest.raises(TypeError):
            e.push("not callable")  # type: ignore[call-overload]
        assert _engine._ops == {} or all(op.engine is not e for op in _engine._ops.values())


def test_op_return_codes(engine: ordo.Engine) -> None:
    v, w, x = engine.var(), engine.var(), engine.var()
    engine.push(lambda: 0, writes=[v])
    engine.push(lambda: "anything but an int", writes=[w])
    engine.wait(v)
    engine.wait(w)
    engine.push(lambda: 17, writes=[x], name="seventeen")
    with pytest.raises(ordo.OpFailed) as info:
        engine.wait(x)
    assert info.value.code == 17 and "seventeen" in str(info.value)
    assert x.error() is not None and x.error()[0] == 17  # type: ignore[index]
    assert v.error() is None


def test_timeouts(engine: ordo.Engine) -> None:
    v = engine.var()
    held = [hold(engine, v)]
    with pytest.raises(ordo.Timeout) as info:
        engine.wait(v, timeout=0.05)
    assert isinstance(info.value, TimeoutError)
    with pytest.raises(ordo.Timeout):
        engine.wait(v, timeout=0)  # a poll
    with pytest.raises(ordo.Timeout):
        engine.wait_all(timeout=0.01)
    with pytest.raises(ordo.InvalidArgument):
        engine.wait(v, timeout=-1)
    held[0].complete()
    engine.wait(v, timeout=10)
    engine.wait_all(timeout=10)


def test_completion_is_used_once(engine: ordo.Engine) -> None:
    v = engine.var()
    c = hold(engine, v)
    assert not c.done
    with pytest.raises(ordo.InvalidArgument):
        c.fail(0)
    c.complete()
    assert c.done
    with pytest.raises(ordo.InvalidHandle):
        c.complete()
    with pytest.raises(ordo.InvalidHandle):
        c.fail(5, "late")
    engine.wait(v)


def test_completion_from_inside_fn_and_exceptions_of_deferred_fns(engine: ordo.Engine) -> None:
    v = engine.var()
    engine.push(lambda c: c.complete(), writes=[v], deferred=True)  # before fn returns
    engine.wait(v)

    def raises_first(c: ordo.Completion) -> None:
        raise OSError("could not start")

    w = engine.var()
    engine.push(raises_first, writes=[w], deferred=True, name="starter")
    with pytest.raises(ordo.OpFailed) as info:
        engine.wait(w)
    assert "OSError: could not start" in str(info.value)

    # raised after the completion was used: the op keeps its outcome, the exception goes to
    # sys.unraisablehook
    x = engine.var()
    caught: list[BaseException] = []
    old = sys.unraisablehook
    sys.unraisablehook = lambda u: caught.append(u.exc_value)
    try:
        def completes_then_raises(c: ordo.Completion) -> None:
            c.complete()
            raise KeyError("after")

        engine.push(completes_then_raises, writes=[x], deferred=True)
        engine.wait(x)
    finally:
        sys.unraisablehook = old
    assert len(caught) == 1 and isinstance(caught[0], KeyError)


def test_a_completion_dropped_unused_fails_its_op(engine: ordo.Engine) -> None:
    v = engine.var()
    engine.push(lambda c: None, writes=[v], deferred=True, name="forgetful")
    with pytest.raises(ordo.OpFailed) as info:
        engine.wait(v, timeout=30)
    assert "garbage collected unused" in str(info.value)


def test_callables_are_kept_alive_until_their_op_ran(engine: ordo.Engine) -> None:
    runs: list[str] = []

    class Payload:
        def __call__(self) -> None:
            runs.append("ran")

    gate_var = engine.var()
    held = hold(engine, gate_var)  # holds the var
    p = Payload()
    ref = weakref.ref(p)
    engine.push(p, reads=[gate_var])
    del p
    for _ in range(3):
        gc.collect()
    assert ref() is not None and runs == []  # only the pending op holds it
    held.complete()
    engine.wait(gate_var)
    assert runs == ["ran"]
    gc.collect()
    assert ref() is None  # let go by free_fn, which runs before the waiters wake
    assert all(op.engine is not engine for op in _engine._ops.values())


@pytest.mark.parametrize("kind", THREADED_KINDS)
def test_the_gil_is_released_while_waiting(kind: str) -> None:
    """While the main thread blocks in wait(), another Python thread runs (it counts), and the
    ops' Python callbacks run on the workers (the wait would never return otherwise)."""
    with ordo.Engine(workers=2, kind=kind) as e:
        v = e.var()
        stop = threading.Event()
        counts = [0]

        def spin() -> None:
            while not stop.is_set():
                counts[0] += 1

        t = threading.Thread(target=spin)
        t.start()
        try:
            for _ in range(20):
                e.push(lambda: time.sleep(0.01), writes=[v])
            time.sleep(0.01)
            before = counts[0]
            e.wait(v, timeout=30)  # ~0.2 s of ops, all Python
            during = counts[0] - before
        finally:
            stop.set()
            t.join()
        assert during > 1000


def test_wait_from_inside_an_op_is_would_deadlock(threaded_engine: ordo.Engine) -> None:
    e = threaded_engine
    v, w = e.var(), e.var()
    got: list[BaseException] = []

    def waits() -> None:
        try:
            e.wait(v)
        except ordo.Error as exc:
            got.append(exc)
        try:
            e.close()
        except ordo.Error as exc:
            got.append(exc)

    e.push(waits, writes=[w])
    e.wait(w)
    assert [type(x) for x in got] == [ordo.WouldDeadlock, ordo.WouldDeadlock]
    assert not e.closed


def test_pushes_from_inside_ops_and_from_many_threads(threaded_engine: ordo.Engine) -> None:
    e = threaded_engine
    v = e.var()
    seen: dict[int, list[int]] = {t: [] for t in range(4)}

    def pusher(t: int) -> None:
        for i in range(300):
            e.push(lambda t=t, i=i: seen[t].append(i), writes=[v])

    threads = [threading.Thread(target=pusher, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    e.wait(v)
    assert all(seen[t] == list(range(300)) for t in range(4))  # each thread's pushes in order

    inner = e.var()
    e.push(lambda: e.push(lambda: seen[0].append(-1), writes=[inner]), writes=[v])
    e.wait(v)
    e.wait(inner)
    assert seen[0][-1] == -1


def test_priority_and_names_are_accepted(engine: ordo.Engine) -> None:
    v = engine.var()
    engine.push(lambda: None, writes=[v], priority=5, name="é" * 100)  # cut at ORDO_NAME_MAX
    engine.wait(v)
    with pytest.raises(OverflowError):
        engine.push(lambda: None, priority=2**40)


def test_var_garbage_collected_is_deleted(engine: ordo.Engine) -> None:
    out: list[int] = []
    engine.push(lambda: out.append(1), writes=[engine.var()])  # the Var goes at once
    engine.wait_all()
    assert out == [1]


def test_stats(engine: ordo.Engine) -> None:
    v = engine.var()
    for _ in range(10):
        engine.push(lambda: None, writes=[v])
    engine.wait_all()
    s = engine.stats()
    assert (s.pushed, s.completed, s.failed, s.pending) == (10, 10, 0, 0)


def test_pushes_racing_a_close_run_or_raise_shutdown() -> None:
    e = ordo.Engine(workers=2)
    v = e.var()
    ran = [0]
    outcomes: list[str] = []

    def pusher() -> None:
        try:
            for _ in range(100000):
                e.push(lambda: ran.__setitem__(0, ran[0] + 1), writes=[v])
            outcomes.append("all pushed")
        except ordo.Shutdown:
            outcomes.append("shutdown")

    threads = [threading.Thread(target=pusher) for _ in range(2)]
    for t in threads:
        t.start()
    time.sleep(0.05)
    e.close()
    for t in threads:
        t.join()
    assert len(outcomes) == 2
    s = e.stats()
    assert s.pushed == s.completed == ran[0] and s.pending == 0
    with pytest.raises(ordo.Shutdown):
        v.delete()


def test_config_reports_what_the_engine_runs_with() -> None:
    with ordo.Engine(workers=3, kind="pooled", max_pending=100) as e:
        c = e.config()
        assert (c.kind, c.workers, c.max_pending) == ("pooled", 3, 100)
        assert c.gpu_stream_waits is True  # the default: on
        assert 1 <= c.gpu_compute_streams <= 64
    assert e.config().workers == 3  # after close too


def test_gpu_settings_round_trip_and_are_checked() -> None:
    with ordo.Engine(workers=1, gpu_compute_streams=7, gpu_stream_waits=False) as e:
        c = e.config()
        assert (c.gpu_compute_streams, c.gpu_stream_waits) == (7, False)
    with ordo.Engine(workers=1, gpu_compute_streams=64, gpu_stream_waits=True) as e:
        assert (e.config().gpu_compute_streams, e.config().gpu_stream_waits) == (64, True)
    for bad in (0, 65, -1, 2**40):
        with pytest.raises(ordo.InvalidArgument, match="gpu_compute_streams"):
            ordo.Engine(workers=1, gpu_compute_streams=bad)
    with pytest.raises(ordo.InvalidArgument, match="gpu_stream_waits"):
        ordo.Engine(workers=1, gpu_stream_waits=1)  # type: ignore[arg-type]
