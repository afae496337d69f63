"""GPU time, bandwidth and exposed communication from recorded CUDA-event timings.

A fake event source plays back times as a GPU would have recorded them: each ``mark()`` takes the
next recorded time, and a mark is ready only once the fake GPU's clock has passed it, as
``Event.query()`` answers. The same code then runs that reads real CUDA events on a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

import gpuwatch.client as gw
from gpuwatch.client import timing
from gpuwatch.client.reporter import Reporter
from gpuwatch.client.timing import ASYNC, BLOCKING, DDP, HOST, Collective, bus_factor, resolve, union_length
from tests.gpuwatch.client.conftest import Capture

MB = 1_000_000


@dataclass(frozen=True)
class Mark:
    t: float  # seconds on the fake GPU's clock


class RecordedEvents:
    """An event source that plays back recorded GPU times; ``gpu_now`` is how far the GPU has got."""

    def __init__(self, *times: float) -> None:
        self.times = list(times)
        self.gpu_now = float("inf")

    def mark(self) -> Mark:
        return Mark(self.times.pop(0))

    def ready(self, mark: Mark) -> bool:
        return mark.t <= self.gpu_now

    def seconds(self, start: Mark, end: Mark) -> float:
        return end.t - start.t


def blocking(src: RecordedEvents, op: str = "all_reduce", nbytes: int = 0, n: int = 8) -> Collective:
    c = Collective(op, nbytes, bus_factor(op, n), src, BLOCKING)
    c.finish()
    return c


def test_bus_factors_are_nccl_tests() -> None:
    assert bus_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    assert bus_factor("ddp_allreduce", 2) == pytest.approx(1.0)
    for op in ("all_gather_into_tensor", "reduce_scatter_tensor", "all_to_all_single"):
        assert bus_factor(op, 4) == pytest.approx(3 / 4)
    assert bus_factor("broadcast", 16) == bus_factor("reduce", 16) == 1.0
    assert bus_factor("all_reduce", 1) == 0.0  # one rank moves nothing over a bus
    assert bus_factor("barrier", 8) is None
    with pytest.raises(ValueError, match="at least one rank"):
        bus_factor("all_reduce", 0)


def test_gpu_time_and_bandwidths_of_a_blocking_all_reduce() -> None:
    # 100 MB all-reduced over 8 ranks: on the GPU from 10 ms to 30 ms, whatever the host saw.
    src = RecordedEvents(0.010, 0.030)
    c = blocking(src, nbytes=100 * MB)
    comm_s, ops, exposed = resolve([c])
    count, seconds, nbytes, gpu, bus = ops["all_reduce"]
    assert (count, nbytes) == (1, 100 * MB)
    assert seconds == gpu == pytest.approx(0.020)
    assert comm_s == pytest.approx(0.020)
    assert nbytes / gpu == pytest.approx(5e9)  # algbw: 5 GB/s
    assert bus / gpu == pytest.approx(5e9 * 2 * 7 / 8)  # busbw: 8.75 GB/s
    assert exposed == pytest.approx(0.020), "a blocking collective is waited for all along"


def test_a_step_waits_until_the_gpu_has_passed_every_mark() -> None:
    src = RecordedEvents(1.0, 1.5)
    c = blocking(src)
    src.gpu_now = 1.2
    assert not timing.ready([c])
    src.gpu_now = 1.5
    assert timing.ready([c])


def test_ddp_exposed_is_from_the_last_bucket_ready_to_the_last_bucket_done() -> None:
    # Three buckets: ready at 100/130/150 ms (150 ms = backward compute ends), reduced by 140/175/190 ms.
    src = RecordedEvents(0.100, 0.130, 0.150, 0.140, 0.175, 0.190)
    buckets = [Collective("ddp_allreduce", 25 * MB, bus_factor("ddp_allreduce", 4), src, DDP) for _ in range(3)]
    for b in buckets:
        b.finish()
    comm_s, ops, exposed = resolve(buckets)
    assert comm_s == pytest.approx(0.040 + 0.045 + 0.040)
    assert ops["ddp_allreduce"][3] == pytest.approx(0.125)
    assert ops["ddp_allreduce"][4] == pytest.approx(3 * 25 * MB * 1.5)
    assert exposed == pytest.approx(0.190 - 0.150)


def test_an_async_collective_done_before_its_wait_is_fully_overlapped() -> None:
    # Launched at 0, done at 30 ms; compute reached wait() at 50 ms and went straight on.
    src = RecordedEvents(0.000, 0.030, 0.050, 0.050)
    c = Collective("all_reduce", MB, bus_factor("all_reduce", 2), src, ASYNC)
    c.finish()
    c.begin_wait()
    c.end_wait()
    comm_s, _, exposed = resolve([c])
    assert comm_s == pytest.approx(0.030)
    assert exposed == 0.0


def test_async_collective_is_exposed_only_while_waited_for() -> None:
    # Launched at 0, done at 80 ms on the GPU; the compute stream reached wait() at 50 ms and went on at 80 ms.
    src = RecordedEvents(0.000, 0.080, 0.050, 0.080)
    c = Collective("all_gather_into_tensor", 64 * MB, bus_factor("all_gather_into_tensor", 2), src, ASYNC)
    c.finish()  # the future's callback
    c.begin_wait()
    c.end_wait()
    comm_s, ops, exposed = resolve([c])
    assert comm_s == ops["all_gather_into_tensor"][3] == pytest.approx(0.080)
    assert ops["all_gather_into_tensor"][4] / 0.080 == pytest.approx(64 * MB / 0.080 / 2)
    assert exposed == pytest.approx(0.030)


def test_a_collective_waited_for_while_running_lasts_until_the_wait_returns() -> None:
    # Done at 40 ms, but the waiting thread woke at 45 ms: the step lost 45 ms to it, 20 of them waiting.
    c = Collective("all_reduce", 4, 1.0, HOST, ASYNC)
    c.start, c.returned, c.end, c.wait_from, c.wait_to = 0.000, 0.001, 0.040, 0.025, 0.045
    comm_s, _, exposed = resolve([c])
    assert comm_s == pytest.approx(0.045)
    assert exposed == pytest.approx(0.001 + 0.020)


def test_on_the_host_clock_an_async_launch_call_is_exposed_too() -> None:
    # gloo: the launch call took 2 ms of the training thread; it then waited from 30 to 50 ms.
    c = Collective("all_reduce", 4, 1.0, HOST, ASYNC)
    c.start, c.returned, c.end, c.wait_from, c.wait_to = 0.000, 0.002, 0.050, 0.030, 0.050
    comm_s, _, exposed = resolve([c])
    assert comm_s == pytest.approx(0.050)
    assert exposed == pytest.approx(0.002 + 0.020)


def test_an_async_wait_still_open_keeps_the_step_unresolved() -> None:
    src = RecordedEvents(0.0, 0.1, 0.05)
    c = Collective("all_reduce", 4, 1.0, src, ASYNC)
    c.finish()
    c.begin_wait()
    assert not c.ready()


def test_overlapping_waits_count_once_and_separate_ones_add_up() -> None:
    # Blocking 0-10 ms; two async collectives waited for at 40-70 and 60-90 ms (together 40-90).
    src = RecordedEvents(0.000, 0.010, 0.020, 0.030, 0.025, 0.035, 0.040, 0.070, 0.060, 0.090)
    first = blocking(src)
    a = Collective("all_reduce", 0, None, src, ASYNC)
    b = Collective("all_reduce", 0, None, src, ASYNC)
    a.finish()
    b.finish()
    a.begin_wait()
    a.end_wait()
    b.begin_wait()
    b.end_wait()
    _, _, exposed = resolve([first, a, b])
    assert exposed == pytest.approx(0.010 + 0.050)


def test_union_length() -> None:
    assert union_length([]) == 0.0
    assert union_length([(0, 1), (0.5, 2), (3, 4), (3.5, 3.6), (5, 4)]) == pytest.approx(3.0)


def test_a_gpu_that_never_answers_falls_back_to_host_times() -> None:
    src = RecordedEvents(1.0, 2.0)
    c = blocking(src, nbytes=10)
    src.gpu_now = 0.0
    comm_s, ops, exposed = resolve([c], give_up=True)
    assert ops["all_reduce"][3] is None, "no GPU time claimed"
    assert comm_s == pytest.approx(c.t1 - c.t0)  # type: ignore[operator]
    assert exposed == pytest.approx(c.t1 - c.t0)  # type: ignore[operator]


def test_host_clock_collectives_and_plain_records_mix() -> None:
    c = Collective("all_reduce", 8, 1.0, HOST, BLOCKING)
    c.finish()
    comm_s, ops, exposed = resolve([c, ("all_reduce", 0.5, 8)])
    assert ops["all_reduce"][:3] == [2, pytest.approx(0.5 + c.t1 - c.t0), 16]  # type: ignore[operator]
    assert ops["all_reduce"][3] is None
    assert exposed == pytest.approx(c.t1 - c.t0)  # type: ignore[operator]
    assert comm_s == pytest.approx(ops["all_reduce"][1])


def test_reporter_sends_a_step_once_its_gpu_timings_are_in(captured: tuple[Reporter, Capture]) -> None:
    rep, capture = captured
    src = RecordedEvents(0.000, 0.004)
    with gw.step():
        rep.record(blocking(src, nbytes=8 * MB, n=2))
    src.gpu_now = 0.002  # the GPU is still in the all-reduce
    rep._tick(final=False)  # what the reporter's thread does every interval
    assert capture.steps() == [] and gw.stats()["buffered"] == 1
    src.gpu_now = 1.0
    rep._tick(final=False)
    (step,) = capture.steps()
    stat = step.collectives["all_reduce"]
    assert (stat.count, stat.bytes, stat.gpu_seconds, stat.bus_bytes) == (1, 8 * MB, pytest.approx(0.004), 8 * MB)
    assert step.comm_s == pytest.approx(0.004)
    # GPU time, not clamped to the host's step time: a host that runs ahead of its GPU times its steps short.
    assert step.exposed_s == pytest.approx(0.004)


def test_at_exit_a_step_the_gpu_never_finished_goes_with_host_times(captured: tuple[Reporter, Capture]) -> None:
    rep, capture = captured
    src = RecordedEvents(5.0, 6.0)
    src.gpu_now = 0.0
    with gw.step():
        rep.record(blocking(src, nbytes=4))
    assert rep.flush(timeout_s=0.05)
    (step,) = capture.steps()
    assert step.collectives["all_reduce"].gpu_seconds is None
    assert step.comm_s < 0.5
