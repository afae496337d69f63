"""Collective timings from marks of an event source, resolved off the training thread.

A collective is timed by *marks*: an event source's ``mark()`` notes "now" on the clock it measures.
:data:`HOST` marks the host clock (exact for gloo, whose collectives run on the CPU); the CUDA
source in :mod:`gpuwatch.client.torch` records ``torch.cuda.Event(enable_timing=True)`` on the
current stream, which completes when the GPU gets there, so a mark taken after a blocking NCCL call
completes when the collective does (the call makes the stream wait for it). The training thread
only takes marks; the reporter's background thread asks ``ready()`` (``Event.query()``) and, once
every mark of a step is done, reads the times (:func:`resolve`). Nothing here synchronizes a device.

Per step this yields, per op: count, bytes, time, GPU time and bytes x bus factor (nccl-tests'
algbw = bytes / time, busbw = algbw x factor, doc/PERFORMANCE.md of NVIDIA/nccl-tests), and the
*exposed* communication: the length of the union of the intervals in which the step waited for a
collective, which is the part of the collectives not overlapped by compute:

- a blocking collective: its whole interval (the training thread, or the compute stream, waited);
- an async one: from the ``wait()`` call to its return (on a GPU: from when the compute stream
  reached the wait to when it could go on), and on the host clock also the launch call itself (the
  training thread computes nothing meanwhile; on a GPU the stream goes on);
- DDP's gradient buckets: from the end of backward compute (the last bucket became ready) to the
  last bucket's completion.
"""

from __future__ import annotations

from collections.abc import Iterable
from time import perf_counter
from typing import Any, Protocol

#: A collective whose marks are not all done this long after its step ended is reported on host
#: times (a stalled GPU, or an async collective never waited for).
RESOLVE_TIMEOUT_S = 60.0

#: nccl-tests' bus bandwidth factors by op, for a group of n ranks (doc/PERFORMANCE.md, "Summary").
_ALL_REDUCE = ("all_reduce", "ddp_allreduce")
_N_MINUS_1_OVER_N = (
    "all_gather",
    "all_gather_into_tensor",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "all_to_all",
    "all_to_all_single",
)
_ONE = ("broadcast", "reduce")


def bus_factor(op: str, n: int) -> float | None:
    """nccl-tests' factor from algorithm to bus bandwidth for ``op`` over ``n`` ranks (None: no data
    moved or an op it does not define, e.g. barrier)."""
    if n < 1:
        raise ValueError(f"a process group has at least one rank, not {n}")
    if op in _ALL_REDUCE:
        return 2 * (n - 1) / n
    if op in _N_MINUS_1_OVER_N:
        return (n - 1) / n
    if op in _ONE:
        return 1.0
    return None


class EventSource(Protocol):
    """Where marks come from: the host clock, CUDA events, or recorded timings in tests."""

    def mark(self) -> Any:
        """Note now on this source's clock; cheap, never blocks."""
        ...

    def ready(self, mark: Any) -> bool:
        """Whether ``mark`` has happened (a CUDA event: the stream got there); never blocks."""
        ...

    def seconds(self, start: Any, end: Any) -> float:
        """Seconds from ``start`` to ``end``, both ready."""
        ...


class HostClock:
    """Marks of ``time.perf_counter``: always ready."""

    def mark(self) -> float:
        return perf_counter()

    def ready(self, mark: Any) -> bool:
        return True

    def seconds(self, start: float, end: float) -> float:
        return end - start


HOST = HostClock()

# How the step waited for a collective.
BLOCKING, ASYNC, DDP = 0, 1, 2


class Collective:
    """One collective call's marks, filled in by whoever sees each moment (the training thread, a
    future's callback, a Work's ``wait()``) and read by :func:`resolve` once they are ready.

    ``t0`` / ``t1`` are host times of the same moments, kept for a device that never answers;
    ``returned`` is when an async launch returned (host clock)."""

    __slots__ = (
        "end",
        "factor",
        "kind",
        "nbytes",
        "op",
        "returned",
        "source",
        "start",
        "t0",
        "t1",
        "wait_from",
        "wait_to",
    )

    def __init__(self, op: str, nbytes: int, factor: float | None, source: EventSource, kind: int = BLOCKING) -> None:
        self.op, self.nbytes, self.factor, self.source, self.kind = op, nbytes, factor, source, kind
        self.end: Any = None
        self.wait_from: Any = None
        self.wait_to: Any = None
        self.t1: float | None = None
        self.returned: float | None = None
        self.t0 = perf_counter()
        self.start: Any = self.t0 if source is HOST else source.mark()

    def finish(self) -> None:
        """The collective is complete here (after a blocking call; in a completion callback)."""
        self.t1 = t = perf_counter()
        self.end = t if self.source is HOST else self.source.mark()

    def begin_wait(self) -> None:
        self.wait_from = self.source.mark()

    def end_wait(self) -> None:
        self.wait_to = self.source.mark()

    def ready(self) -> bool:
        if self.end is None or (self.wait_from is not None and self.wait_to is None):
            return False
        ready = self.source.ready
        marks = (self.start, self.end) if self.wait_from is None else (self.start, self.end, self.wait_to)
        return all(ready(m) for m in marks)


#: (op, seconds, nbytes): a collective timed by the caller (``gpuwatch.client.record_collective``).
Plain = tuple[str, float, int]
#: {op: [count, seconds, bytes, gpu_seconds or None, bus_bytes or None]}
OpStats = dict[str, list[Any]]


def union_length(intervals: Iterable[tuple[float, float]]) -> float:
    """Total length covered by ``intervals`` (overlaps counted once; empty or reversed ones add 0)."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(i for i in intervals if i[1] > i[0]):
        if a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def ready(records: Iterable[Collective | Plain]) -> bool:
    """Whether every timed collective of a step can be resolved now."""
    return all(r.ready() for r in records if isinstance(r, Collective))


def resolve(records: list[Collective | Plain], *, give_up: bool = False) -> tuple[float, OpStats, float]:
    """A step's (communication seconds, per-op stats, exposed seconds) from its collectives.

    Call when :func:`ready` says so, or with ``give_up`` after :data:`RESOLVE_TIMEOUT_S`: then
    marks not done are replaced by host times, and a collective that never completed is left out."""
    comm_s = 0.0
    ops: OpStats = {}
    # Exposure intervals per clock, in seconds from a reference mark: marks of one source compare
    # with each other only.
    waits: dict[int, tuple[EventSource, Any, list[tuple[float, float]]]] = {}
    ddp: dict[int, list[Collective]] = {}

    def wait(src: EventSource, ref: Any, a: Any, b: Any) -> None:
        src, ref, intervals = waits.setdefault(id(src), (src, ref, []))
        intervals.append((src.seconds(ref, a), src.seconds(ref, b)))

    for r in records:
        if not isinstance(r, Collective):
            op, seconds, nbytes = r
            seconds, nbytes = float(seconds), int(nbytes)
            _add(ops, op, seconds, nbytes, None, None)
            comm_s += seconds
            continue
        src = r.source
        if r.ready():
            seconds = src.seconds(r.start, r.end)
            if r.wait_from is not None and src.seconds(r.start, r.wait_from) <= seconds:
                # Waited for while still running: it lasted, for the step, until the wait returned.
                seconds = max(seconds, src.seconds(r.start, r.wait_to))
            seconds = max(0.0, seconds)
            _add(ops, r.op, seconds, r.nbytes, seconds if src is not HOST else None, _bus(r))
            comm_s += seconds
        elif give_up and r.t1 is not None:
            seconds = max(0.0, r.t1 - r.t0)  # host times: for a GPU collective, only its launch
            _add(ops, r.op, seconds, r.nbytes, None, _bus(r))
            comm_s += seconds
            if r.kind == BLOCKING:
                wait(HOST, r.t0, r.t0, r.t1)
            continue
        else:
            continue  # never completed: no time to count
        if r.kind == DDP:
            ddp.setdefault(id(src), []).append(r)
        elif r.kind == BLOCKING:
            wait(src, r.start, r.start, r.end)
        else:
            if r.wait_from is not None:
                wait(src, r.start, r.wait_from, r.wait_to)
            if src is HOST and r.returned is not None:
                wait(src, r.start, r.start, r.returned)
    for buckets in ddp.values():
        src = buckets[0].source
        ref = waits[id(src)][1] if id(src) in waits else buckets[0].start

        def last(marks: list[Any], src: EventSource = src, ref: Any = ref) -> Any:
            return max(marks, key=lambda m: src.seconds(ref, m))

        # Backward compute ends when the last bucket becomes ready; the step waits from then until
        # the last bucket is reduced.
        wait(src, ref, last([b.start for b in buckets]), last([b.end for b in buckets]))
    return comm_s, ops, sum(union_length(intervals) for _, _, intervals in waits.values())


def _bus(r: Collective) -> float | None:
    return r.nbytes * r.factor if r.factor is not None else None


def _add(ops: OpStats, op: str, seconds: float, nbytes: int, gpu: float | None, bus: float | None) -> None:
    stat = ops.get(op)
    if stat is None:
        ops[op] = [1, seconds, nbytes, gpu, bus]
        return
    stat[0] += 1
    stat[1] += seconds
    stat[2] += nbytes
    if gpu is not None:
        stat[3] = gpu if stat[3] is None else stat[3] + gpu
    if bus is not None:
        stat[4] = bus if stat[4] is None else stat[4] + bus
