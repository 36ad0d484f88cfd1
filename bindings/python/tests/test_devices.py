"""Where ops run: push's prop and gpu arguments, ordo.current_op() and ordo.device_count().
Without a GPU (CI), a GPU push raises NoDevice with the reason, and the tests that need a GPU
skip; with one, a GPU op's CUDA stream runs real work (CuPy, else PyTorch, when installed)."""
from __future__ import annotations

import threading
from typing import Any, Optional

import pytest

import ordo

PROPS = ["normal", "cpu_prioritized", "copy_to_device", "copy_from_device", "async"]


def gpus() -> int:
    return ordo.device_count()


def test_device_count_is_a_count() -> None:
    n = ordo.device_count()
    assert isinstance(n, int) and 0 <= n <= 16


def test_current_op_outside_an_op_raises_invalid_state() -> None:
    with pytest.raises(ordo.InvalidState, match="no op"):
        ordo.current_op()
    raised: list[bool] = []

    def on_another_thread() -> None:
        try:
            ordo.current_op()
        except ordo.InvalidState:
            raised.append(True)

    t = threading.Thread(target=on_another_thread)
    t.start()
    t.join()
    assert raised == [True]


@pytest.mark.parametrize("prop", PROPS)
def test_an_op_sees_its_name_priority_and_prop(engine: ordo.Engine, prop: str) -> None:
    seen: list[ordo.OpInfo] = []
    v = engine.var()
    engine.push(lambda: seen.append(ordo.current_op()), writes=[v], name="probe", priority=3,
                prop=prop)
    engine.wait(v)
    (info,) = seen
    assert (info.name, info.priority, info.prop) == ("probe", 3, prop)
    assert (info.gpu, info.stream) == (None, 0)
    kind = engine.config().kind
    if kind == "naive" or prop == "async":
        assert info.worker_index is None  # ran inline, on the pushing thread
    else:
        assert isinstance(info.worker_index, int) and info.worker_index >= 0
    with pytest.raises(ordo.InvalidState):  # only inside the op
        ordo.current_op()
    with pytest.raises(ordo.InvalidState, match="no CUDA stream"):
        info.__cuda_stream__()


def test_current_op_is_the_inner_op_while_nested(engine: ordo.Engine) -> None:
    # A ready "async" op pushed from inside an op starts on the pushing thread, inside the
    # outer op's function: the outer is current again once the inner returns. (The naive
    # engine runs a push made inside an op once that op has returned.)
    seen: list[str] = []

    def outer() -> None:
        seen.append(ordo.current_op().name)
        engine.push(lambda: seen.append(ordo.current_op().name), name="inner", prop="async")
        seen.append(ordo.current_op().name)

    engine.push(outer, name="outer")
    engine.wait_all()
    if engine.config().kind == "naive":
        assert seen == ["outer", "outer", "inner"]
    else:
        assert seen == ["outer", "inner", "outer"]


def test_a_deferred_op_sees_itself_until_its_function_returns(engine: ordo.Engine) -> None:
    seen: list[str] = []

    def start(done: ordo.Completion) -> None:
        seen.append(ordo.current_op().name)
        done.complete()

    v = engine.var()
    engine.push(start, writes=[v], name="deferred", deferred=True)
    engine.wait(v)
    assert seen == ["deferred"]


@pytest.mark.parametrize("prop", ["", "Normal", "gpu", 2, None])
def test_bad_props_are_refused_before_anything_is_pushed(engine: ordo.Engine, prop: Any) -> None:
    ran: list[int] = []
    with pytest.raises(ordo.InvalidArgument, match="prop must be one of"):
        engine.push(lambda: ran.append(1), prop=prop)
    engine.wait_all()
    assert ran == [] and engine.stats().pushed == 0


@pytest.mark.parametrize("gpu", [-1, True, 1.0, "0", 2**31])
def test_bad_gpus_are_refused_before_anything_is_pushed(engine: ordo.Engine, gpu: Any) -> None:
    with pytest.raises(ordo.InvalidArgument, match="gpu must be"):
        engine.push(lambda: None, gpu=gpu)
    assert engine.stats().pushed == 0


def test_a_gpu_that_is_not_there_is_no_device(engine: ordo.Engine) -> None:
    ran: list[int] = []
    missing = gpus()  # one past the last GPU: 0 on a machine without one
    with pytest.raises(ordo.NoDevice) as info:
        engine.push(lambda: ran.append(1), gpu=missing)
    assert f"GPU {missing} requested" in str(info.value)
    if missing == 0:
        print("no GPU:", info.value)  # says why: no driver, no runtime, no device...
    engine.wait_all()
    assert ran == [] and engine.stats().pushed == 0


# ------------------------------------------------------------------------------------------------
# With a GPU
# ------------------------------------------------------------------------------------------------

needs_gpu = pytest.mark.skipif(gpus() == 0, reason="no GPU (ordo.device_count() is 0)")


@needs_gpu
@pytest.mark.parametrize("prop", ["normal", "copy_to_device", "copy_from_device"])
def test_a_gpu_op_gets_its_gpu_and_a_stream(engine: ordo.Engine, prop: str) -> None:
    seen: list[ordo.OpInfo] = []
    v = engine.var()
    for _ in range(8):
        engine.push(lambda: seen.append(ordo.current_op()), writes=[v], gpu=0, prop=prop)
    engine.wait(v)
    assert len(seen) == 8
    assert all(i.gpu == 0 and i.stream != 0 and i.prop == prop for i in seen)
    assert all(i.__cuda_stream__() == (0, i.stream) for i in seen)
    streams = {i.stream for i in seen}
    # compute ops go round robin over the compute streams; a copy direction has one stream
    assert len(streams) > 1 if prop == "normal" else len(streams) == 1


def _gpu_array_library() -> Optional[str]:
    for name in ("cupy", "torch"):
        try:
            mod = __import__(name)
        except ImportError:
            continue
        if name == "cupy" or mod.cuda.is_available():
            return name
    return None


@needs_gpu
def test_gpu_ops_run_kernels_on_their_streams_in_order(engine: ordo.Engine) -> None:
    """A chain of GPU ops on one var, each on the stream ordo gave it (different streams, round
    robin): fill with 3, times 2, plus 1, then a CPU op reads the result. Every element must be
    7: the ops' kernels ran in push order although each went to another stream, and the CPU op
    ran only after the last kernel had finished."""
    lib_name = _gpu_array_library()
    if lib_name is None:
        pytest.skip("neither CuPy nor PyTorch with CUDA is installed")
    n = 1 << 24
    v = engine.var()
    got: list[Any] = []
    streams: list[int] = []
    if lib_name == "cupy":
        import cupy

        x = cupy.empty(n, dtype=cupy.float32)

        def on_stream(work: Any) -> Any:
            def op() -> None:
                info = ordo.current_op()
                streams.append(info.stream)
                if hasattr(cupy.cuda.Stream, "from_external"):  # CuPy 14: the stream protocol
                    stream = cupy.cuda.Stream.from_external(info)
                    assert stream.ptr == info.stream
                else:
                    stream = cupy.cuda.ExternalStream(info.stream, info.gpu)
                with stream:
                    work()
            return op

        steps = [lambda: x.fill(3), lambda: x.__imul__(2), lambda: x.__iadd__(1)]
        result = lambda: cupy.asnumpy(x)  # noqa: E731 - the default stream, after the ops
    else:
        import torch

        x = torch.empty(n, dtype=torch.float32, device="cuda:0")

        def on_stream(work: Any) -> Any:
            def op() -> None:
                info = ordo.current_op()
                streams.append(info.stream)
                with torch.cuda.stream(torch.cuda.ExternalStream(info.stream, device=info.gpu)):
                    work()
            return op

        steps = [lambda: x.fill_(3), lambda: x.mul_(2), lambda: x.add_(1)]
        result = lambda: x.cpu().numpy()  # noqa: E731
    for step in steps:
        engine.push(on_stream(step), writes=[v], gpu=0)
    engine.push(lambda: got.append(result()), reads=[v])
    engine.wait(v)
    assert len(set(streams)) > 1, "the chain ran on one stream: round robin was not exercised"
    (host,) = got
    assert host.shape == (n,) and (host == 7).all(), f"{(host != 7).sum()} elements are not 7"
