"""Pipelines (Engine.pipeline, Pipeline, Pipe, Pipeflow): token flow through serial and parallel
pipes, deferral as the design notes' cases say (docs pipeline.md §6, Taskflow v3.10's rules),
failures, pushed runs ordered through vars, misuse raising the library's status."""
from __future__ import annotations

import gc
import queue
import sys
import threading
from typing import Any, Callable, Optional

import pytest

import ordo
from ordo import _pipeline

S, P = ordo.PIPE_SERIAL, ordo.PIPE_PARALLEL


def stopper(stop_at: int, log: Optional[list] = None,
            script: Optional[dict[tuple[int, int], tuple[int, ...]]] = None) -> Callable:
    """A pipe-0 callback: stops when a fresh token's id is `stop_at`; defers (token,
    num_deferrals) -> targets as `script` says; logs "token/nd@line" (+ " D" when it defers)."""
    script = script or {}

    def source(pf: ordo.Pipeflow) -> None:
        t, nd, line = pf.token, pf.num_deferrals, pf.line
        if t == stop_at and nd == 0:
            if log is not None:
                log.append(f"{t}/{nd}@L{line} STOP")
            pf.stop()
            return
        targets = script.get((t, nd), ())
        for x in targets:
            pf.defer(x)
        if log is not None:
            log.append(f"{t}/{nd}@L{line}" + (" D" if targets else ""))
    return source


def recorder(out: list) -> Callable:
    def pipe(pf: ordo.Pipeflow) -> None:
        out.append((pf.token, pf.line, pf.num_deferrals))
    return pipe


# --------------------------------------------------------------------------------------------
# Token flow
# --------------------------------------------------------------------------------------------

def test_serial_parallel_serial(engine: ordo.Engine) -> None:
    n, lines = 40, 4
    gen: list[int] = []
    par: list[tuple[int, int, int]] = []
    ser: list[tuple[int, int, int]] = []
    busy = {"now": 0, "most": 0}
    lock = threading.Lock()

    def source(pf: ordo.Pipeflow) -> None:
        assert pf.pipe == 0
        gen.append(pf.token)
        if pf.token == n:
            pf.stop()

    def middle(pf: ordo.Pipeflow) -> None:
        assert pf.pipe == 1
        par.append((pf.token, pf.line, pf.num_deferrals))

    def last(pf: ordo.Pipeflow) -> None:
        assert pf.pipe == 2
        with lock:
            busy["now"] += 1
            busy["most"] = max(busy["most"], busy["now"])
        ser.append((pf.token, pf.line, pf.num_deferrals))
        with lock:
            busy["now"] -= 1

    with engine.pipeline([source, ordo.Pipe(middle, parallel=True), (S, last)], lines) as p:
        assert (p.num_lines, p.num_pipes, p.num_tokens) == (lines, 3, 0)
        p.run()
        assert gen == list(range(n + 1))  # stop() on the fresh id n: token generation ends
        assert p.num_tokens == n  # the id pipe 0 stopped on does not count
        expected = [(t, t % lines, 0) for t in range(n)]
        assert sorted(par) == expected  # every token through the parallel pipe, once
        assert ser == expected  # the serial pipe in token order, each on its line
        assert busy["most"] == 1
        assert p.dropped() == []

        # a rerun without reset continues the ids (and stops at the same fresh id: none left)
        gen.clear(), par.clear(), ser.clear()
        p.reset_pipes([stopper(2 * n), ("parallel", middle), ordo.Pipe(last)])
        p.run()
        assert p.num_tokens == 2 * n and [t for t, _, _ in ser] == list(range(2 * n))
        ser.clear()
        p.reset()
        assert p.num_tokens == 0
        p.run()
        assert p.num_tokens == 2 * n and [t for t, _, _ in ser] == list(range(2 * n))


def test_stop_on_the_first_token(engine: ordo.Engine) -> None:
    later: list[Any] = []
    with engine.pipeline([stopper(0), recorder(later)], lines=2) as p:
        p.run()
        assert p.num_tokens == 0 and later == []


# --------------------------------------------------------------------------------------------
# Deferral (the cases of pipeline.md §6; the pipe-0 traces are deterministic)
# --------------------------------------------------------------------------------------------

def test_deferral_documentation_example(engine: ordo.Engine) -> None:
    # T1a: L=4, S-S-S, stop at 11; 2 waits for 8; 5 waits for 2 and 7, then for 9
    log: list[str] = []
    p1: list[tuple[int, int, int]] = []
    p2: list[tuple[int, int, int]] = []
    script = {(2, 0): (8,), (5, 0): (2, 7), (5, 1): (9,)}
    with engine.pipeline([stopper(11, log, script), recorder(p1), recorder(p2)], 4) as p:
        p.run()
        assert " ".join(log) == (
            "0/0@L0 1/0@L1 2/0@L2 D 3/0@L2 4/0@L3 5/0@L0 D 6/0@L0 7/0@L1 8/0@L2 "
            "2/1@L3 5/1@L0 D 9/0@L0 5/2@L1 10/0@L2 11/0@L3 STOP")
        accepted = [0, 1, 3, 4, 6, 7, 8, 2, 9, 5, 10]
        assert [t for t, _, _ in p1] == accepted  # serial pipes follow the accepted order
        assert p2 == p1
        assert [line for _, line, _ in p1] == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2]
        assert {t: nd for t, _, nd in p1 if nd} == {2: 1, 5: 2}
        assert p.num_tokens == 11


def test_deferral_chain_reverses_the_order(engine: ordo.Engine) -> None:
    # T3: L=3, S-S, stop at 5, each of 0..3 waits for the next token
    log: list[str] = []
    p1: list[tuple[int, int, int]] = []
    script = {(t, 0): (t + 1,) for t in range(4)}
    with engine.pipeline([stopper(5, log, script), recorder(p1)], lines=3) as p:
        p.run()
        assert " ".join(log) == ("0/0@L0 D 1/0@L0 D 2/0@L0 D 3/0@L0 D 4/0@L0 "
                                 "3/1@L1 2/1@L2 1/1@L0 0/1@L1 5/0@L2 STOP")
        assert p1 == [(4, 0, 0), (3, 1, 1), (2, 2, 1), (1, 0, 1), (0, 1, 1)]
        assert p.num_tokens == 5


def test_deferral_to_self_is_invalid_and_retried_at_once(engine: ordo.Engine) -> None:
    # T2b: L=2, S-S, stop at 5, token 2 defers to itself twice: invoked again at once each time
    log: list[str] = []
    p1: list[tuple[int, int, int]] = []
    script = {(2, 0): (2,), (2, 1): (2,)}
    with engine.pipeline([stopper(5, log, script), recorder(p1)], lines=2) as p:
        p.run()
        assert " ".join(log) == "0/0@L0 1/0@L1 2/0@L0 D 2/1@L0 D 2/2@L0 3/0@L1 4/0@L0 5/0@L1 STOP"
        assert [t for t, _, _ in p1] == [0, 1, 2, 3, 4]
        assert p1[2] == (2, 0, 2)


def test_unresolvable_deferral_drops_the_token(engine: ordo.Engine) -> None:
    # T4a: L=2, S-S-S, stop at 6, token 1 waits for 100 (never generated): dropped
    log: list[str] = []
    p1: list[tuple[int, int, int]] = []
    p2: list[tuple[int, int, int]] = []
    script = {(1, 0): (100,)}
    with engine.pipeline([stopper(6, log, script), recorder(p1), recorder(p2)], 2) as p:
        with pytest.raises(ordo.TokensDropped) as info:
            p.run()
        assert info.value.tokens == (1,)
        assert info.value.status == 12 and info.value.status_name
        assert "1 token dropped" in str(info.value)
        assert " ".join(log) == "0/0@L0 1/0@L1 D 2/0@L1 3/0@L0 4/0@L1 5/0@L0 6/0@L1 STOP"
        assert [t for t, _, _ in p1] == [0, 2, 3, 4, 5] and p2 == p1
        assert [line for _, line, _ in p1] == [0, 1, 0, 1, 0]
        assert p.dropped() == [1]
        assert p.num_tokens == 6
        # the rest of the run was intact: the pipeline runs again without a reset (no replay
        # of token 1: the ids go on from 6, and pipe 0 is called on the fresh id 6 only)
        log.clear()
        p1.clear()
        p.run()
        assert log == ["6/0@L1 STOP"] and p1 == []  # the line ring goes on too
        assert p.dropped() == []
        p.reset()
        log.clear()
        with pytest.raises(ordo.TokensDropped):
            p.run()  # from token 0 again: the same drop
        assert p.dropped() == [1]


# --------------------------------------------------------------------------------------------
# Failures
# --------------------------------------------------------------------------------------------

def test_raising_callback_fails_the_run_until_reset(engine: ordo.Engine) -> None:
    seen: list[int] = []

    def work(pf: ordo.Pipeflow) -> None:
        if pf.token == 3 and not ok["now"]:
            raise KeyError("bad token")
        seen.append(pf.token)

    ok = {"now": False}
    with engine.pipeline([stopper(10), work], lines=2) as p:
        with pytest.raises(ordo.OpFailed) as info:
            p.run()
        err = info.value
        assert err.code == 3 and err.status == ordo.OpFailed.status
        assert isinstance(err.__cause__, KeyError)  # the callback's exception, chained
        assert "pipe 1" in str(err) and "token 3" in str(err) and "KeyError" in str(err)
        assert p.exception is err.__cause__
        assert 3 not in seen and len(seen) < 10
        with pytest.raises(ordo.InvalidState):  # the pipeline needs a reset
            p.run()
        p.reset()
        assert p.exception is None and p.num_tokens == 0
        ok["now"] = True
        seen.clear()
        p.run()
        assert seen == list(range(10))


def test_returned_code_fails_the_run(engine: ordo.Engine) -> None:
    def work(pf: ordo.Pipeflow) -> int:
        return 7 if pf.token == 2 else 0

    with engine.pipeline([stopper(5), ordo.Pipe(work, parallel=True)], lines=3) as p:
        with pytest.raises(ordo.OpFailed) as info:
            p.run()
        assert info.value.code == 7 and info.value.__cause__ is None
        assert p.exception is None


def test_stop_and_defer_outside_pipe_0(engine: ordo.Engine) -> None:
    errors: list[type] = []

    def work(pf: ordo.Pipeflow) -> None:
        for call in (pf.stop, lambda: pf.defer(99)):
            try:
                call()
            except ordo.Error as e:
                errors.append(type(e))

    with engine.pipeline([stopper(3), work], lines=2) as p:
        p.run()  # refused, nothing changes: the run goes on
        assert errors == [ordo.InvalidState] * 6
        assert p.num_tokens == 3


# --------------------------------------------------------------------------------------------
# Pushed runs
# --------------------------------------------------------------------------------------------

def test_push_ordered_through_a_var(engine: ordo.Engine) -> None:
    v = engine.var()
    events: list[str] = []
    tokens: list[int] = []

    def producer() -> None:
        events.append("producer")

    def work(pf: ordo.Pipeflow) -> None:
        if not tokens:
            events.append("pipeline")
        tokens.append(pf.token)

    seen_by_consumer: list[list[int]] = []
    with engine.pipeline([stopper(20), ordo.Pipe(work)], lines=3) as p:
        engine.push(producer, writes=[v])
        p.push(writes=[v], name="pipeline run")
        engine.push(lambda: seen_by_consumer.append(list(tokens)), reads=[v])
        engine.wait(v)
        assert events == ["producer", "pipeline"]
        assert seen_by_consumer == [list(range(20))]  # the op after the push saw the whole run
        assert p.num_tokens == 20
        # again, reading the var: ordered after the writer before it
        p.reset_pipes([stopper(40), ordo.Pipe(work)])  # (resets: ids from 0 again)
        tokens.clear()
        p.push(reads=[v])
        engine.push(lambda: seen_by_consumer.append(list(tokens)), writes=[v])
        engine.wait(v)
        assert seen_by_consumer[-1] == list(range(40))


def test_pushed_run_failure_poisons_the_var(engine: ordo.Engine,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    reported: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", reported.append)
    v = engine.var()

    def work(pf: ordo.Pipeflow) -> None:
        if pf.token == 1:
            raise ValueError("pushed failure")

    with engine.pipeline([stopper(4), work], lines=2) as p:
        p.push(writes=[v])
        skipped: list[int] = []
        engine.push(lambda: skipped.append(1), writes=[v])
        with pytest.raises(ordo.OpFailed) as info:
            engine.wait(v)
        assert info.value.code == 3 and "pipe 1" in str(info.value)
        assert skipped == []  # the op after the failed run was skipped
        assert isinstance(p.exception, ValueError)
        assert [r.exc_value for r in reported] == [p.exception]  # reported: nobody catches it
        with pytest.raises(ordo.InvalidState):
            p.run()  # needs a reset, as after run()
        p.reset()
        v.clear_error()
        script = {(0, 0): (50,)}
        p.reset_pipes([stopper(3, None, script), lambda pf: None])
        p.push(writes=[v])
        with pytest.raises(ordo.OpFailed) as info:
            engine.wait(v)
        assert info.value.code == ordo.TokensDropped.status  # a dropped token fails the op
        assert p.dropped() == [0]


def test_in_flight_push_refuses_run_reset_destroy(threaded_engine: ordo.Engine) -> None:
    engine = threaded_engine
    v = engine.var()
    q: "queue.Queue[ordo.Completion]" = queue.Queue()
    engine.push(q.put, writes=[v], deferred=True)
    held = q.get(timeout=30)
    ran: list[int] = []
    p = engine.pipeline([stopper(3), lambda pf: ran.append(pf.token)], lines=2)
    p.push(reads=[v])  # waits for the held op: in flight from now on
    for call in (p.run, p.reset, p.destroy, p.dropped, lambda: p.push()):
        with pytest.raises(ordo.InvalidState):
            call()
    assert ran == []
    held.complete()
    engine.wait_all()
    assert ran == [0, 1, 2]
    p.destroy()


# --------------------------------------------------------------------------------------------
# Misuse and lifetimes
# --------------------------------------------------------------------------------------------

def test_pipeflow_used_after_its_callback(engine: ordo.Engine) -> None:
    kept: list[ordo.Pipeflow] = []

    def source(pf: ordo.Pipeflow) -> None:
        kept.append(pf)
        if pf.token == 2:
            pf.stop()

    with engine.pipeline([source], lines=1) as p:
        p.run()
    pf = kept[0]
    for get in (lambda: pf.token, lambda: pf.line, lambda: pf.pipe, lambda: pf.num_deferrals,
                pf.stop, lambda: pf.defer(5)):
        with pytest.raises(ordo.InvalidState):
            get()
    assert "expired" in repr(pf)


def test_pipeflow_from_another_thread(threaded_engine: ordo.Engine) -> None:
    results: list[Any] = []

    def source(pf: ordo.Pipeflow) -> None:
        def other() -> None:
            for get in (lambda: pf.token, lambda: pf.line, pf.stop):
                try:
                    results.append(get())
                except ordo.InvalidState:
                    results.append("invalid")
        t = threading.Thread(target=other)
        t.start()
        t.join()
        pf.stop()

    with threaded_engine.pipeline([source], lines=1) as p:
        p.run()
    assert results == ["invalid"] * 3


def test_bad_arguments(engine: ordo.Engine) -> None:
    noop = lambda pf: None  # noqa: E731
    before = len(_pipeline._pipe_fns)
    with pytest.raises(ordo.InvalidArgument):
        engine.pipeline([noop], lines=0)
    with pytest.raises(ValueError):  # InvalidArgument is a ValueError
        engine.pipeline([ordo.Pipe(noop, parallel=True), noop], lines=2)
    with pytest.raises(ordo.InvalidArgument):
        engine.pipeline([], lines=2)
    with pytest.raises(ordo.InvalidArgument):
        engine.pipeline([(7, noop)], lines=2)
    with pytest.raises(ordo.InvalidArgument):
        engine.pipeline([("sideways", noop)], lines=2)
    with pytest.raises(ordo.InvalidArgument):
        engine.pipeline([noop], lines=-1)
    with pytest.raises(TypeError):
        engine.pipeline([42], lines=1)
    with pytest.raises(TypeError):
        engine.pipeline([(S, 42)], lines=1)
    assert len(_pipeline._pipe_fns) == before  # nothing kept from the refused creations

    log: list[int] = []
    with engine.pipeline([stopper(2), lambda pf: log.append(pf.token)], lines=2) as p:
        with pytest.raises(ordo.InvalidArgument):
            p.reset_pipes([(P, noop)])  # parallel first pipe: nothing changes
        with pytest.raises(ordo.InvalidArgument):
            p.reset_pipes([noop], lines=0)
        assert p.num_pipes == 2
        p.run()
        assert log == [0, 1]

        def bad_defer(pf: ordo.Pipeflow) -> None:
            try:
                pf.defer(-1)
            finally:
                pf.stop()
        p.reset_pipes([bad_defer])
        with pytest.raises(ordo.OpFailed) as info:
            p.run()
        assert isinstance(info.value.__cause__, ordo.InvalidArgument)


def test_run_after_destroy_and_after_close() -> None:
    with ordo.Engine(workers=1) as engine:
        p = engine.pipeline([stopper(1)], lines=1)
        p.destroy()
        with pytest.raises(ordo.InvalidHandle):
            p.run()
        with pytest.raises(ordo.InvalidHandle):
            p.destroy()
        with pytest.raises(ordo.InvalidHandle):
            _ = p.num_tokens
        with pytest.raises(ordo.InvalidHandle):
            p.push()
        q = engine.pipeline([stopper(1)], lines=1)
    with pytest.raises(ordo.Shutdown):
        q.run()
    q.destroy()


def test_run_inside_a_callback_would_deadlock(engine: ordo.Engine) -> None:
    inner = engine.pipeline([stopper(1)], lines=1)
    errors: list[type] = []

    def source(pf: ordo.Pipeflow) -> None:
        try:
            inner.run()
        except ordo.Error as e:
            errors.append(type(e))
        pf.stop()

    with engine.pipeline([source], lines=1) as p, inner:
        p.run()
    assert errors == [ordo.WouldDeadlock]


def test_functions_kept_alive_until_destroy_or_replace(engine: ordo.Engine) -> None:
    before = len(_pipeline._pipe_fns)
    out: list[int] = []

    def make() -> Callable:
        return lambda pf: out.append(pf.token)  # referenced only by the pipeline

    p = engine.pipeline([stopper(3), make()], lines=2)
    gc.collect()
    p.run()
    assert out == [0, 1, 2]
    assert len(_pipeline._pipe_fns) == before + 2
    p.reset_pipes([stopper(2)])
    assert len(_pipeline._pipe_fns) == before + 1  # the replaced functions were let go
    p.run()
    p.destroy()
    assert len(_pipeline._pipe_fns) == before

    # a pipeline dropped undestroyed is destroyed by the garbage collector
    q = engine.pipeline([stopper(1), make()], lines=1)
    q.run()
    del q
    gc.collect()
    assert len(_pipeline._pipe_fns) == before


def test_readme_pipeline_example(engine: ordo.Engine) -> None:
    import re
    from conftest import SOURCE
    readme = SOURCE / "README.md"
    if not readme.exists():
        pytest.skip("an installed copy: no README")
    block = [b for b in re.findall(r"```python\n(.*?)```", readme.read_text(), re.S)
             if "engine.pipeline(" in b]
    assert len(block) == 1
    decoded: list[int] = []
    written: list[int] = []
    ns = {"ordo": ordo, "engine": engine, "frames": engine.var(), "out": engine.var(),
          "decode": lambda pf: decoded.append(pf.token),
          "write": lambda pf: written.append(pf.token)}
    exec(compile(block[0], str(readme), "exec"), ns)
    engine.wait_all()
    order = [0, 1] + list(range(3, 9)) + [2] + list(range(9, 100))
    assert written == order * 2  # run() then push(), each from token 0 (reset between)
    assert sorted(decoded) == sorted(order * 2)
