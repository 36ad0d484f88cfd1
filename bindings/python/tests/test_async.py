"""Engine.wait_async: an awaitable that the engine resolves from its own thread (issue 24,
item 6's async wait)."""
from __future__ import annotations

import asyncio
import threading
import time

import pytest

import ordo
from ordo import _lib

pytestmark = pytest.mark.skipif(not _lib.has("ordo_wait_for_var_async"),
                                reason="the library has no ordo_wait_for_var_async")


def test_async_wait_in_asyncio(engine: ordo.Engine) -> None:
    async def main() -> list[str]:
        v = engine.var()
        events: list[str] = []
        for i in range(5):
            engine.push(lambda i=i: (time.sleep(0.02), events.append(f"op{i}")), writes=[v])
        waited = engine.wait_async(v)

        async def ticker() -> None:  # the loop keeps running while the ops do
            while not waited.done():
                events.append("tick")
                await asyncio.sleep(0.005)

        await asyncio.gather(waited, ticker())
        events.append("awaited")
        return events

    events = asyncio.run(asyncio.wait_for(main(), 30))
    ops = [x for x in events if x.startswith("op")]
    assert ops == [f"op{i}" for i in range(5)]
    assert events[-1] == "awaited"
    if engine.stats().workers > 0:  # not the naive engine, which ran the ops in push()
        assert "tick" in events


def test_async_wait_on_a_deferred_op_completed_from_a_thread(
        threaded_engine: ordo.Engine) -> None:
    e = threaded_engine

    async def main() -> None:
        v = e.var()
        e.push(lambda c: threading.Timer(0.05, c.complete).start(), writes=[v], deferred=True)
        await asyncio.wait_for(e.wait_async(v), 30)
        # nothing pending: resolved at once (the callback may run inside the call)
        await asyncio.wait_for(e.wait_async(v), 30)

    asyncio.run(main())


def test_async_wait_raises_op_failed(engine: ordo.Engine) -> None:
    async def main() -> None:
        v = engine.var()

        def broken() -> None:
            raise ZeroDivisionError("async boom")

        engine.push(broken, writes=[v], name="broken")
        with pytest.raises(ordo.OpFailed) as info:
            await asyncio.wait_for(engine.wait_async(v), 30)
        assert info.value.code == 3 and "ZeroDivisionError: async boom" in str(info.value)

    asyncio.run(main())


def test_async_wait_cancelled_and_loop_closed(threaded_engine: ordo.Engine) -> None:
    e = threaded_engine
    v = e.var()
    held: list[ordo.Completion] = []
    got = threading.Event()
    e.push(lambda c: (held.append(c), got.set()), writes=[v], deferred=True)
    assert got.wait(30)

    async def cancel_it() -> None:
        fut = e.wait_async(v)
        await asyncio.sleep(0.01)
        fut.cancel()

    asyncio.run(cancel_it())  # the loop is closed after this, the wait still pending

    async def another() -> None:
        e.wait_async(v)  # never awaited, its loop closes too

    asyncio.run(another())
    held[0].complete()  # both callbacks find their future cancelled or their loop closed
    e.wait(v, timeout=30)
    from ordo import _engine
    deadline = time.monotonic() + 10
    while any(w.engine is e for w in _engine._async_waits.values()):
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_async_wait_needs_a_running_loop(engine: ordo.Engine) -> None:
    with pytest.raises(RuntimeError):
        engine.wait_async(engine.var())


def test_async_wait_on_a_deleted_var(engine: ordo.Engine) -> None:
    async def main() -> None:
        v = engine.var()
        v.delete()
        with pytest.raises(ordo.InvalidHandle):
            engine.wait_async(v)

    asyncio.run(main())
