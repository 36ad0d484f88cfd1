"""An interpreter that exits with work pending neither aborts nor hangs (issue 24, item 6): each
case runs in a child interpreter, which must exit with status 0, in time, without ordo's or the
C++ runtime's abort messages."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import ABI_FIXES, python_env

PRELUDE = """
import atexit, sys, threading, time
report = []
# registered before ordo is imported, so it runs after ordo's exit handler (LIFO)
# (callables in report are called then)
atexit.register(lambda: print("at exit:", *[r() if callable(r) else r for r in report],
                              flush=True))
import ordo
"""


def run_child(body: str, limit: float, exit_timeout: float = 0.5) -> tuple[str, str, float]:
    env = python_env()
    env["ORDO_EXIT_TIMEOUT"] = str(exit_timeout)
    code = textwrap.dedent(PRELUDE) + textwrap.dedent(body)
    start = time.monotonic()
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=limit + 30)
    took = time.monotonic() - start
    assert "FATAL" not in p.stderr and "terminate called" not in p.stderr, p.stderr
    assert p.returncode == 0, f"exit status {p.returncode}\nstdout:{p.stdout}\nstderr:{p.stderr}"
    assert took < limit, f"took {took:.1f} s\nstdout:{p.stdout}\nstderr:{p.stderr}"
    return p.stdout, p.stderr, took


def test_exit_with_ops_pending_runs_them() -> None:
    out, err, _ = run_child("""
        e = ordo.Engine(workers=2)
        v = e.var()
        n = [0]
        def op():
            time.sleep(0.0002)
            n[0] += 1
        for i in range(2000):
            e.push(op, writes=[v])
        report.append(n)
    """, limit=30)
    assert "at exit: [2000]" in out, out + err


def test_exit_blocked_in_a_deferred_op() -> None:
    """The deferred op is never completed: its dependents would wait forever. After
    ORDO_EXIT_TIMEOUT without progress its Completion is failed, its dependents skipped."""
    out, err, took = run_child("""
        e = ordo.Engine(workers=2)
        v = e.var()
        kept = []
        e.push(kept.append, writes=[v], deferred=True)
        ran = [0]
        for i in range(100):
            e.push(lambda: ran.__setitem__(0, ran[0] + 1), reads=[v])
        time.sleep(0.1)
        report.append(ran)
        report.append(lambda: (e.closed, e.stats().failed, e.stats().skipped))
    """, limit=15, exit_timeout=0.5)
    assert "at exit: [0] (True, 101, 100)" in out, out + err


def test_exit_with_a_daemon_thread_holding_a_completion_and_one_waiting() -> None:
    out, err, _ = run_child("""
        e = ordo.Engine(workers=2)
        v = e.var()
        def start(c):
            threading.Thread(target=lambda: (time.sleep(3600), c.complete()), daemon=True).start()
        e.push(start, writes=[v], deferred=True)
        outcome = []
        def waiter():
            try:
                e.wait(v)
                outcome.append("ok")
            except ordo.Error as x:
                outcome.append(type(x).__name__)
        w = threading.Thread(target=waiter, daemon=True)
        w.start()
        time.sleep(0.1)
        # read after ordo's exit handler failed the Completion: the waiter, woken in C, still
        # needs the GIL to record what it got, so it is given a moment
        report.append(lambda: (w.join(5), outcome)[1])
    """, limit=15)
    assert "at exit: ['OpFailed']" in out, out + err


def test_exit_with_an_op_blocked_forever_in_python() -> None:
    out, err, took = run_child("""
        e = ordo.Engine(workers=2)
        v = e.var()
        e.push(threading.Event().wait, writes=[v])
        for i in range(10):
            e.push(lambda: None, reads=[v])
        time.sleep(0.1)
    """, limit=15, exit_timeout=0.5)
    assert "left to the OS" in err


def test_exit_while_an_op_wakes_during_finalization() -> None:
    """An op still in Python code when the interpreter finalizes: its thread is ended by
    pthread_exit (a forced unwind through the engine's worker), which must not abort (the
    library lets forced unwinds through callbacks; before it did, this was "FATAL: exception not
    rethrown" and SIGABRT)."""
    out, err, _ = run_child("""
        import types
        class Slow:  # torn down after the exit handlers, while the interpreter finalizes
            def __del__(self, sleep=time.sleep):
                sleep(1.0)
        m = types.ModuleType("slow_teardown"); m.slow = Slow(); sys.modules[m.__name__] = m
        del m
        e = ordo.Engine(workers=2)
        v = e.var()
        e.push(lambda: time.sleep(0.6), writes=[v])  # wakes during finalization
        for i in range(10):
            e.push(lambda: None, reads=[v])
        time.sleep(0.05)
    """, limit=15, exit_timeout=0.1)


def test_exit_with_pipelines_alive_and_pushed_runs_pending() -> None:
    """A pushed run with work left runs to the end at exit; one queued behind a deferred op that
    is never completed is skipped once that op is failed; both pipelines (and the one never
    run) are destroyed after the engine closed: their functions are let go."""
    out, err, _ = run_child("""
        e = ordo.Engine(workers=2)
        done, stuck = e.var(), e.var()
        seen = []
        def source(pf):
            if pf.token == 300:
                pf.stop()
        def work(pf):
            time.sleep(0.0005)
            seen.append(pf.token)
        p = e.pipeline([source, work], lines=2)
        p.push(writes=[done])
        kept = []
        e.push(kept.append, writes=[stuck], deferred=True)
        q = e.pipeline([source, lambda pf: seen.append(-1)], lines=2)
        q.push(reads=[stuck])
        idle = e.pipeline([source], lines=1)
        report.append(lambda: (len(seen), -1 in seen, len(ordo._pipeline._pipe_fns),
                               p._destroyed, q._destroyed, idle._destroyed))
    """, limit=20, exit_timeout=0.5)
    assert "at exit: (300, False, 0, True, True, True)" in out, out + err


def test_exit_with_an_engine_closed_and_one_never_used() -> None:
    run_child("""
        with ordo.Engine(workers=1) as a:
            pass
        b = ordo.Engine(workers=2)
        c = ordo.Engine(kind="naive")
    """, limit=15)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_forked_child_neither_uses_nor_waits_for_the_parents_engine() -> None:
    out, err, _ = run_child("""
        import os
        e = ordo.Engine(workers=2)
        v = e.var()
        e.push(lambda: None, writes=[v])
        e.wait(v)
        pid = os.fork()
        if pid == 0:
            try:
                e.push(lambda: None, writes=[v])
                e.wait(v, timeout=2)
                print("child: push accepted and ran", flush=True)
            except ordo.Error as x:
                print("child:", type(x).__name__, flush=True)
            sys.exit(0)  # runs the exit handlers: the parent's engine must not be waited for
        _, status = os.waitpid(pid, 0)
        report.append(os.waitstatus_to_exitcode(status))
        e.push(lambda: None, writes=[v])
        e.wait(v)
    """, limit=20)
    assert "at exit: 0" in out, out + err
    if ABI_FIXES:
        assert "child: InvalidState" in out, out + err
