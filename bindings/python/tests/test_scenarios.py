"""The scenarios every binding's tests share (issue 24, item 6), and the exception-as-success
check: writes in push order, readers overlapping, an error skipping a dependent and surfacing as
OpFailed, a deferred op completed from another thread. (The async wait is in test_async.py, the
exit with work pending in test_exit.py.)"""
from __future__ import annotations

import threading
import time

import pytest

import ordo


def test_writes_run_in_push_order(engine: ordo.Engine) -> None:
    v = engine.var()
    seen: list[int] = []
    for i in range(1000):
        engine.push(lambda i=i: seen.append(i), writes=[v], name=f"w{i}")
    engine.wait(v)
    assert seen == list(range(1000))


def test_readers_overlap(threaded_engine: ordo.Engine) -> None:
    e = threaded_engine
    v = e.var()
    # Each reader waits at a 2-party barrier: it passes only if both readers run at once.
    barrier = threading.Barrier(2, timeout=20)
    met: list[int] = []
    for _ in range(2):
        e.push(lambda: met.append(barrier.wait()), reads=[v], name="reader")
    e.wait(v, timeout=30)
    assert sorted(met) == [0, 1]
    # and a writer after them waits for both
    order: list[str] = []
    gate = threading.Event()
    e.push(lambda: (gate.wait(10), order.append("r1")), reads=[v])
    e.push(lambda: order.append("r2"), reads=[v])
    e.push(lambda: order.append("w"), writes=[v])
    time.sleep(0.05)
    gate.set()
    e.wait(v, timeout=30)
    assert order[-1] == "w" and sorted(order[:2]) == ["r1", "r2"]


def test_error_skips_dependent_and_surfaces_as_op_failed(engine: ordo.Engine) -> None:
    a, b = engine.var(), engine.var()
    ran: list[str] = []

    def broken() -> None:
        raise ValueError("the input was bad")

    engine.push(broken, writes=[a], name="producer")
    engine.push(lambda: ran.append("consumer"), reads=[a], writes=[b], name="consumer")
    with pytest.raises(ordo.OpFailed) as info:
        engine.wait(b)
    assert ran == []  # skipped, never run
    err = info.value
    assert err.code == ordo.OpFailed.status == 3
    assert "producer" in str(err) and "ValueError: the input was bad" in str(err)
    assert isinstance(err, ordo.Error)
    with pytest.raises(ordo.OpFailed):
        engine.wait(a)
    s = engine.stats()
    assert (s.failed, s.skipped) == (2, 1)
    # clearing the error lets later ops run
    b.clear_error()
    engine.push(lambda: ran.append("after clear"), writes=[b])
    engine.wait(b)
    assert ran == ["after clear"]
    with pytest.raises(ordo.OpFailed):
        engine.wait_all()  # the failures since the last wait_all
    engine.wait_all()  # and the record is cleared


def test_deferred_op_completed_from_another_thread(engine: ordo.Engine) -> None:
    v = engine.var()
    order: list[str] = []
    threads: list[threading.Thread] = []

    def start(done: ordo.Completion) -> None:
        def later() -> None:
            time.sleep(0.05)
            order.append("completed")
            done.complete()
        t = threading.Thread(target=later)
        threads.append(t)
        t.start()

    engine.push(start, writes=[v], deferred=True, name="async")
    engine.push(lambda: order.append("dependent"), reads=[v])
    engine.wait(v, timeout=30)
    assert order == ["completed", "dependent"]
    for t in threads:
        t.join()


def test_deferred_op_failed_from_another_thread(engine: ordo.Engine) -> None:
    v = engine.var()
    engine.push(lambda c: threading.Thread(target=c.fail, args=(42, "disk on fire")).start(),
                writes=[v], deferred=True, name="io")
    with pytest.raises(ordo.OpFailed) as info:
        engine.wait(v, timeout=30)
    assert info.value.code == 42
    assert "disk on fire" in str(info.value) and "'io'" in str(info.value)


@pytest.mark.parametrize("kind", ["per_device", "pooled", "naive"])
def test_exception_in_fn_is_never_counted_as_success(kind: str) -> None:
    """200 runs: every op whose function raises is a failed op, seen by the wait and counted."""
    runs = 200
    with ordo.Engine(workers=2, kind=kind) as e:
        for i in range(runs):
            v = e.var()

            def boom(i: int = i) -> None:
                raise RuntimeError(f"run {i}")

            e.push(boom, writes=[v], name="boom")
            with pytest.raises(ordo.OpFailed) as info:
                e.wait(v)
            assert info.value.code == 3
            assert f"RuntimeError: run {i}" in str(info.value)
            v.delete()
        s = e.stats()
        assert (s.pushed, s.completed, s.failed) == (runs, runs, runs)


def test_base_exceptions_in_fn_fail_the_op(engine: ordo.Engine) -> None:
    for exc in (SystemExit(3), KeyboardInterrupt(), GeneratorExit()):
        v = engine.var()

        def raise_it(exc: BaseException = exc) -> None:
            raise exc

        engine.push(raise_it, writes=[v])
        with pytest.raises(ordo.OpFailed) as info:
            engine.wait(v)
        assert type(exc).__name__ in str(info.value)


def test_an_exception_escaping_the_trampoline_is_a_failure_code() -> None:
    """The last line of defence, called through C as the engine calls it: were an exception to
    escape the op trampoline itself, cffi's `error`/`onerror` return ORDO_ERR_OP_FAILED, not the
    default 0 (success)."""
    from ordo import _engine
    from ordo._lib import ffi

    def escapes(exec_: object, user_data: object) -> int:
        raise RuntimeError("escaped")

    def returns_junk(exec_: object, user_data: object) -> int:
        return "not an int"  # type: ignore[return-value]  # cffi cannot convert it: onerror

    for fn in (escapes, returns_junk):
        cb = _engine._make_op_callback(fn)
        assert cb(ffi.NULL, ffi.NULL) == 3
    # and the real trampoline, given a key no op has, fails too
    assert _engine._op_callback(ffi.NULL, ffi.cast("void*", 0)) == 3
