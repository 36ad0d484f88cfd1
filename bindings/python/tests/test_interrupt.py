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
