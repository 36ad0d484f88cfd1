"""Ctrl-C interrupts a wait on the main thread: wait() and wait_all(), untimed or with a long
timeout, raise KeyboardInterrupt soon after SIGINT instead of blocking inside C until the ops
finish; the ops go on, and a later wait sees them complete. Each case runs in a child
interpreter (a KeyboardInterrupt in pytest's own process would stop the session)."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

import pytest

import ordo

from conftest import ABI_FIXES, python_env

# The child: an op that defers and is completed only after the interrupted wait, SIGINT sent
# 0.3 s into the wait; it prints how long the wait took to give up, then completes the op and
# waits again.
CHILD = """
import os, queue, signal, sys, threading, time
import ordo

# Python raises KeyboardInterrupt on SIGINT only where SIGINT was not ignored when it started,
# and a shell ignores it in the commands it starts in the background (as CI does).
signal.signal(signal.SIGINT, signal.default_int_handler)
kind, call = sys.argv[1], sys.argv[2]
with ordo.Engine(workers=2, kind=kind) as e:
    v = e.var()
    q = queue.Queue()
    e.push(q.put, writes=[v], deferred=True, name="held")
    c = q.get(timeout=10)
    waits = {"wait": lambda: e.wait(v), "wait_timeout": lambda: e.wait(v, timeout=60),
             "wait_all": lambda: e.wait_all(), "wait_all_timeout": lambda: e.wait_all(timeout=60)}
    threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    start = time.monotonic()
    try:
        waits[call]()
        print("not interrupted")
    except KeyboardInterrupt:
        print(f"interrupted after {time.monotonic() - start:.2f} s")
    c.complete()
    waits[call]()
    print("then done, pending", e.stats().pending)
"""


@pytest.mark.skipif(not ABI_FIXES, reason="the library predates ordo_wait_for_var_async")
@pytest.mark.parametrize("kind", ["per_device", "pooled"])
@pytest.mark.parametrize("call", ["wait", "wait_timeout", "wait_all", "wait_all_timeout"])
def test_ctrl_c_interrupts_a_wait_on_the_main_thread(kind: str, call: str) -> None:
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(CHILD), kind, call],
                       env=python_env(), capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, f"exit status {p.returncode}\n{p.stdout}\n{p.stderr}"
    lines = p.stdout.splitlines()
    assert lines[0].startswith("interrupted after "), p.stdout
    took = float(lines[0].split()[2])
    assert 0.2 < took < 5, p.stdout  # the wait gave up soon after the signal, not at the op's end
    assert lines[1] == "then done, pending 0", p.stdout


def test_waits_on_the_main_thread_keep_their_results(threaded_engine: ordo.Engine) -> None:
    """The main thread's interruptible waits give what the blocking ones give: OpFailed with the
    op's message and code, Timeout naming the pending op, and OK."""
    e = threaded_engine
    v = e.var()
    e.push(lambda: 7, writes=[v], name="fails")
    with pytest.raises(ordo.OpFailed) as info:
        e.wait(v)
    assert info.value.code == 7 and "fails" in str(info.value)
    with pytest.raises(ordo.OpFailed):
        e.wait_all()
    v.clear_error()
    gate = threading.Event()
    e.push(lambda: gate.wait(10), writes=[v], name="slow")
    with pytest.raises(ordo.Timeout) as timed_out:
        e.wait(v, timeout=0.25)
    assert "slow" in str(timed_out.value)
    with pytest.raises(ordo.Timeout) as timed_out:
        e.wait_all(timeout=0.25)
    assert "slow" in str(timed_out.value)
    gate.set()
    e.wait(v, timeout=10)
    e.wait_all(timeout=10)


def test_a_main_thread_wait_lets_later_readers_overlap_earlier_ones(
        threaded_engine: ordo.Engine) -> None:
    """The main thread's wait is the C wait (ordo_wait_for_var), not an async wait queued on the
    var like a write: a reader pushed by another thread during the wait still runs beside a
    reader pushed before it (SPEC §2.2: two readers that wait for each other must pass)."""
    e = threaded_engine
    v = e.var()
    partner = threading.Event()
    met = []
    e.push(lambda: met.append(partner.wait(10)), reads=[v], name="first reader")

    def push_partner() -> None:
        time.sleep(0.3)  # the main thread is waiting by then
        e.push(partner.set, reads=[v], name="second reader")

    t = threading.Thread(target=push_partner)
    t.start()
    e.wait(v, timeout=30)
    t.join()
    assert met == [True], "the second reader waited for the first one"


# The child for Pipeline.run(): pipe 0 generates tokens until `limit` (none at first), pipe 1
# takes a little while per token, or blocks on `gate` in the "second" case, where a second
# SIGINT follows the first.
PIPELINE_CHILD = """
import os, signal, sys, threading, time
import ordo

signal.signal(signal.SIGINT, signal.default_int_handler)
kind, case = sys.argv[1], sys.argv[2]
calls, limit, gate = [0], [None], threading.Event()

def source(pf):
    if limit[0] is not None and pf.token >= limit[0]:
        pf.stop()
        return
    calls[0] += 1
    time.sleep(0.001)

def work(pf):
    if case == "second":
        gate.wait(30)
    else:
        time.sleep(0.005)

def interrupt(after):
    threading.Timer(after, lambda: os.kill(os.getpid(), signal.SIGINT)).start()

with ordo.Engine(workers=2, kind=kind) as e:
    p = e.pipeline([source, ordo.Pipe(work, parallel=True)], lines=4)
    interrupt(0.3)
    if case == "second":
        interrupt(0.6)
    start = time.monotonic()
    try:
        p.run()
        print("not interrupted")
    except KeyboardInterrupt:
        print(f"interrupted after {time.monotonic() - start:.2f} s")
    except ordo.OpFailed as exc:
        print(f"failed, cause {type(exc.__cause__).__name__}")
        p.reset()
    if case == "second":
        try:
            p.run()
        except ordo.InvalidState:
            print("still in flight")
        gate.set()
        deadline = time.monotonic() + 20
        while True:
            try:
                p.destroy()
                break
            except ordo.InvalidState:
                assert time.monotonic() < deadline, "the run never ended"
                time.sleep(0.02)
        print("then destroyed")
    else:
        seen = calls[0]
        time.sleep(0.2)
        print("pipe 0 calls since:", calls[0] - seen)
        limit[0] = p.num_tokens + 3
        p.run()
        print("ran again, tokens", p.num_tokens - limit[0] + 3)
        p.destroy()
"""


def _run_pipeline_child(kind: str, case: str) -> list[str]:
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(PIPELINE_CHILD), kind, case],
                       env=python_env(), capture_output=True, text=True, timeout=90)
    assert p.returncode == 0, f"exit status {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p.stdout.splitlines()


def _took(line: str) -> float:
    assert line.startswith("interrupted after "), line
    return float(line.split()[2])


@pytest.mark.parametrize("kind", ["per_device", "pooled"])
def test_ctrl_c_stops_a_pipeline_run_on_the_main_thread(kind: str) -> None:
    """A run whose pipe 0 never stops ends soon after SIGINT: pipe 0 is not called again, the
    accepted tokens finish, run() raises KeyboardInterrupt, and the pipeline runs again."""
    lines = _run_pipeline_child(kind, "first")
    assert 0.2 < _took(lines[0]) < 5, lines
    assert lines[1] == "pipe 0 calls since: 0", lines
    assert lines[2] == "ran again, tokens 3", lines


def test_a_second_ctrl_c_leaves_the_pipeline_run_going_on() -> None:
    """The tokens in flight block, so the first SIGINT's stop cannot end the run; the second
    one raises at once, the run stays in flight (run() raises InvalidState) and ends once the
    tokens are let go."""
    lines = _run_pipeline_child("per_device", "second")
    assert 0.5 < _took(lines[0]) < 5, lines
    assert lines[1:] == ["still in flight", "then destroyed"], lines


def test_ctrl_c_in_a_naive_pipeline_run_fails_it_in_a_pipe_function() -> None:
    """The naive engine runs the pipe functions on the calling thread, which sees the signal in
    one of them: the run fails with the KeyboardInterrupt as its cause, as any raising pipe."""
    lines = _run_pipeline_child("naive", "first")
    assert lines[0] == "failed, cause KeyboardInterrupt", lines
    assert lines[1] == "pipe 0 calls since: 0", lines
    assert lines[2] == "ran again, tokens 3", lines


def test_a_main_thread_run_keeps_its_results(threaded_engine: ordo.Engine) -> None:
    """run() on the main thread (through the helper thread) raises what the C run returned,
    with its message, and the exception of a raising pipe as the cause."""
    e = threaded_engine

    def source(pf: ordo.Pipeflow) -> None:
        if pf.token == 5:
            pf.stop()

    def fails(pf: ordo.Pipeflow) -> None:
        if pf.token == 2:
            raise ValueError("token two")

    with e.pipeline([source, fails], lines=2) as p:
        with pytest.raises(ordo.OpFailed) as info:
            p.run()
        assert isinstance(info.value.__cause__, ValueError)
        assert "token two" in str(info.value)
        with pytest.raises(ordo.InvalidState):
            p.run()  # needs a reset
        p.reset()
    with e.pipeline([source], lines=1) as p:
        p.run()
        assert p.num_tokens == 5
