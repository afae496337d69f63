"""In-memory telemetry: the latest sample and a ring buffer of recent samples per GPU.

Prometheus keeps the long time series; the server only needs what is current (for /metrics and the
API) and a short window (for incident evidence). Everything here is guarded by one lock because
FastAPI runs sync endpoints on a thread pool.

The ring keeps at most one point a second per GPU, of the fields a post-mortem plots, in typed arrays:
about 8 KB per GPU for the default 300 s (80 MB for 10,000 GPUs), whatever the sampling rate. Sample
objects would take about 1 KB each, 2.4 GB for the same window at 1 Hz.
"""

from __future__ import annotations

import math
import threading
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, NamedTuple

import numpy as np

from gpuwatch.protocol import GpuInfo, GpuSample, GpuSeries, IbPortSample, sample_at
from server.telemetry.labels import LabelBudget
from server.telemetry.samples import RING_COLUMNS, SampleBlock


class Point(NamedTuple):
    """One ring-buffer point: what a post-mortem plots (None: not reported)."""

    ts: float
    util_gpu: float | None
    fb_used_mib: float | None
    power_w: float | None
    temp_c: float | None
    xid_last: float | None


_VALUES = Point._fields[1:]
_KEPT = Point._fields  # the series' columns a ring keeps: its times, then _VALUES
assert _VALUES == RING_COLUMNS


class Ring:
    """The last ``size`` points, at most one per ``min_gap_s`` seconds, in typed arrays (NaN is None)."""

    __slots__ = ("_views", "arrays", "count", "min_gap_s", "next_ts", "size", "ts", "values")

    def __init__(self, size: int, min_gap_s: float = 1.0) -> None:
        self.size, self.count, self.min_gap_s = size, 0, min_gap_s
        self.next_ts = 0.0  # samples older than this are not kept
        self.ts = array("d", bytes(8 * size))
        self.values = [array("f", bytes(4 * size)) for _ in _VALUES]
        self.arrays = (self.ts, *self.values)  # in _KEPT's order
        self._views: tuple[np.ndarray, ...] | None = None  # numpy views of ``arrays``, made at a block's first add

    def add(self, series: GpuSeries) -> None:
        """Keep the samples of ``series`` (sorted by time) that are ``min_gap_s`` past the newest point."""
        keep, next_ts, gap = [], self.next_ts, self.min_gap_s
        for n, ts in enumerate(series.ts):  # which samples: usually all of them
            if ts >= next_ts:
                keep.append(n)
                next_ts = ts + gap
        if not keep:
            return
        self.next_ts = next_ts
        size, count, n = self.size, self.count, len(keep)
        start = count % size
        self.count = count + n
        if n == len(series.ts) and start + n <= size:  # all of them, in one stretch: slices of arrays
            for out, name in zip(self.arrays, _KEPT, strict=True):
                column = getattr(series, name)
                if column is None:
                    column = [math.nan] * n
                elif None in column:
                    column = [math.nan if v is None else v for v in column]
                out[start : start + n] = array(out.typecode, column)
            return
        slots = [(count + k) % size for k in range(n)]
        for out, name in zip(self.arrays, _KEPT, strict=True):
            column = getattr(series, name)
            for i, value in zip(slots, [None] * n if column is None else [column[k] for k in keep], strict=True):
                out[i] = math.nan if value is None else value

    def add_from(self, block: SampleBlock, i: int) -> None:
        """`add` for series ``i`` of a batch's block: the samples kept go in as array slices of its columns."""
        bounds = block.bounds()
        a, b = bounds[i], bounds[i + 1]
        times = block.ts_list()
        keep, next_ts, gap = [], self.next_ts, self.min_gap_s
        for n in range(a, b):  # which samples: usually all of them
            if (ts := times[n]) >= next_ts:
                keep.append(n)
                next_ts = ts + gap
        if not keep:
            return
        self.next_ts = next_ts
        if self._views is None:  # the arrays' own memory, written through numpy
            self._views = tuple(np.frombuffer(out, dtype=np.dtype(out.typecode)) for out in self.arrays)
        size, count, n = self.size, self.count, len(keep)
        self.count = count + n
        if n > size:  # only the newest ``size`` stay
            keep, count, n = keep[-size:], count + n - size, size
        start = count % size
        ts, values = self._views[0], self._views[1:]
        if n == b - a and start + n <= size:  # all of them, in one stretch
            ts[start : start + n] = block.ts[a:b]
            for out, row in zip(values, block.ring_values(), strict=True):
                out[start : start + n] = row[a:b]
            return
        slots = [(count + k) % size for k in range(n)]
        ts[slots] = block.ts[keep]
        for out, row in zip(values, block.ring_values(), strict=True):
            out[slots] = row[keep]

    def points(self) -> list[Point]:
        """Oldest first."""
        start = max(0, self.count - self.size)
        out = []
        for n in range(start, self.count):
            i = n % self.size
            vals = [c[i] for c in self.values]
            out.append(Point(self.ts[i], *(None if math.isnan(v) else v for v in vals)))
        return out


class Faults(NamedTuple):
    """A GPU's fault counts that only a reset clears (None: not reported). Unlike a utilization, they stay
    true of a GPU nobody hears any more, so they are exported and stored whatever its node does."""

    ecc_sbe_volatile: int | None
    ecc_dbe_volatile: int | None
    retired_pages_sbe: int | None
    retired_pages_dbe: int | None
    remap_failure: bool | None

    @classmethod
    def of(cls, sample: GpuSample) -> Faults:
        return cls(
            sample.ecc_sbe_volatile,
            sample.ecc_dbe_volatile,
            sample.retired_pages_sbe,
            sample.retired_pages_dbe,
            sample.remap_failure,
        )

    @classmethod
    def last_of(cls, series: GpuSeries) -> Faults:
        """The counts of the last sample of ``series``, read from its columns (no sample built)."""
        return cls(*(None if column is None else column[-1] for column in _FAULT_COLUMNS(series)))

    @classmethod
    def last_of_block(cls, block: SampleBlock) -> list[Faults]:
        """The counts of each series' last sample, read from a block's columns at once (no sample built)."""
        return [cls(*row) for row in block.at_last(cls._fields)]


_FAULT_COLUMNS = attrgetter(*Faults._fields)


NO_FAULTS = Faults(None, None, None, None, None)


class FaultChange(NamedTuple):
    """A GPU's fault counts changed (to be stored): its index and UUID, the new counts, the sample's time."""

    gpu: int
    uuid: str
    faults: Faults
    ts: float


@dataclass(slots=True)
class GpuState:
    node: str
    info: GpuInfo
    latest: GpuSample | None = None
    received_at: float | None = None  # server clock: when the latest sample arrived (agent clocks may skew)
    recent: Ring | None = field(default=None, repr=False)
    faults: Faults = NO_FAULTS  # the latest known, from its samples or (after a restart) the database
    latest_ts: float | None = None  # the latest sample's time
    #: whose last sample is the latest, not built yet: a series, or (block, series index)
    unbuilt: GpuSeries | tuple[SampleBlock, int] | None = field(default=None, repr=False)


@dataclass(slots=True)
class NodeState:
    name: str
    last_seen: float | None = None  # monotonic-free unix time of the last request from this node
    dropped: dict[str, int] = field(default_factory=dict)
    agent_seen: float | None = None  # its agent's last word (a supervisor's logs are not its agent's)


class Telemetry:
    """Latest values and recent history of every known GPU, keyed by (node, GPU index)."""

    def __init__(
        self,
        ring_size: int = 300,
        sample_type: Callable[..., Any] = GpuSample.model_construct,
        labels: LabelBudget | None = None,
    ) -> None:
        self._ring_size = ring_size
        self._labels = labels or LabelBudget()  # InfiniBand ports per node: each a series of /metrics
        self._sample_type = sample_type  # builds a GPU's latest sample (the server's: a msgspec mirror, 1 µs)
        self._lock = threading.Lock()
        self._gpus: dict[tuple[str, int], GpuState] = {}
        self._indices: dict[str, set[int]] = {}  # node → its GPUs' indices: a node's GPUs without a scan
        self._nodes: dict[str, NodeState] = {}
        self._ib: dict[tuple[str, str, int], tuple[IbPortSample, float]] = {}  # -> (latest, received)

    def set_inventory(self, node: str, gpus: list[GpuInfo]) -> None:
        """Record what GPUs a node has; samples for unknown GPUs are kept under a placeholder identity."""
        with self._lock:
            self._node(node)
            for info in gpus:
                state = self._gpus.get((node, info.index))
                if state is None:
                    self._add_gpu(node, info)
                else:
                    state.info = info

    def restore_node(self, node: str, last_seen: float | None, agent_seen: float | None) -> None:
        """A node as the database last knew it (at start-up): when it, and its agent, were last heard."""
        with self._lock:
            state = self._node(node)
            if state.last_seen is None:
                state.last_seen, state.agent_seen = last_seen, agent_seen

    def restore_gpu(self, node: str, info: GpuInfo, sampled_at: float | None, faults: Faults) -> None:
        """A GPU as the database last knew it (at start-up, before its agent reconnects): when it was last
        sampled, and its fault counts."""
        with self._lock:
            self._node(node)
            state = self._gpus.get((node, info.index)) or self._add_gpu(node, info)
            state.info = info
            if state.received_at is None:
                state.received_at, state.faults = sampled_at, faults

    def add_series(
        self, node: str, series: list[GpuSeries] | SampleBlock, now: float | None = None
    ) -> list[FaultChange]:
        """Samples (series sorted by time): the newest of each GPU becomes its latest, and the ring keeps
        some. Only the samples kept are looked at one by one. Returns the GPUs whose fault counts changed."""
        now = time.time() if now is None else now
        if isinstance(series, SampleBlock):
            return self._add_block(node, series, now)
        changed = []
        with self._lock:
            for s in series:
                state = self._gpus.get((node, s.gpu))
                if state is None:
                    state = self._add_gpu(node, GpuInfo(index=s.gpu, uuid=s.uuid, name="unknown"))
                last = s.ts[-1]
                if state.latest_ts is None or last >= state.latest_ts:
                    # Built when read (`_copy`): a scrape every 15 s reads it, batches replace it every 2 s.
                    state.unbuilt, state.latest_ts, state.received_at = s, last, now
                    if (faults := Faults.last_of(s)) != state.faults:
                        state.faults = faults
                        changed.append(FaultChange(s.gpu, s.uuid, faults, last))
                if state.recent is not None and s.ts[-1] >= state.recent.next_ts:
                    state.recent.add(s)
        return changed

    def _add_block(self, node: str, block: SampleBlock, now: float) -> list[FaultChange]:
        """`add_series` of a batch's block: the series' last samples and fault counts are read from its
        columns at once, and the rings take array slices."""
        changed = []
        faults_of: list[Faults] | None = None
        with self._lock:
            for i, (gpu, last) in enumerate(zip(block.gpu, block.last_ts(), strict=True)):
                state = self._gpus.get((node, gpu))
                if state is None:
                    state = self._add_gpu(node, GpuInfo(index=gpu, uuid=block.uuid[i], name="unknown"))
                if state.latest_ts is None or last >= state.latest_ts:
                    state.unbuilt, state.latest_ts, state.received_at = (block, i), last, now
                    if faults_of is None:
                        faults_of = Faults.last_of_block(block)
                    if (faults := faults_of[i]) != state.faults:
                        state.faults = faults
                        changed.append(FaultChange(gpu, block.uuid[i], faults, last))
                if state.recent is not None and last >= state.recent.next_ts:
                    state.recent.add_from(block, i)
        return changed

    def add_ib(self, node: str, ports: list[IbPortSample], now: float | None = None) -> None:
        now = time.time() if now is None else now
        with self._lock:
            for p in ports:
                key = (node, p.device, p.port)
                if key not in self._ib and not self._labels.admit(node, "ib_port", key):
                    continue
                if key not in self._ib or p.ts >= self._ib[key][0].ts:
                    self._ib[key] = (p, now)

    def ib_ports(self) -> list[tuple[str, IbPortSample, float]]:
        """(node, latest sample, when it arrived) of every InfiniBand port."""
        with self._lock:
            return [(node, p, at) for (node, _, _), (p, at) in sorted(self._ib.items())]

    def touch(
        self, node: str, dropped: dict[str, int] | None = None, now: float | None = None, *, agent: bool = True
    ) -> None:
        """Note that ``node`` was heard from, by its agent or (``agent`` False) only by a supervisor's
        logs (and what its agent reports having dropped)."""
        with self._lock:
            state = self._node(node)
            state.last_seen = time.time() if now is None else now
            if agent:
                state.agent_seen = state.last_seen
            if dropped:
                state.dropped = dict(dropped)

    def gpus(self, node: str | None = None) -> list[GpuState]:
        """Every GPU's state (or ``node``'s GPUs'), by node and index. A node's are found through its
        indices: when all 12,500 nodes of a 100,000-GPU cluster fell silent at once, each silence
        incident's snapshot sorted every GPU under the lock, and the server spent minutes on it."""
        with self._lock:
            if node is None:
                return [self._copy(s) for _, s in sorted(self._gpus.items())]
            return [self._copy(self._gpus[(node, i)]) for i in sorted(self._indices.get(node, ()))]

    def received(self, node: str) -> dict[int, float | None]:
        """When each GPU of ``node`` last had a sample (server clock), by index: no copies, no samples built."""
        with self._lock:
            return {i: self._gpus[(node, i)].received_at for i in self._indices.get(node, ())}

    def agent_seen(self, node: str) -> float | None:
        """The node's agent's last word (None: never heard, or unknown node)."""
        with self._lock:
            state = self._nodes.get(node)
            return state.agent_seen if state else None

    def nodes(self) -> list[NodeState]:
        with self._lock:
            return [NodeState(n.name, n.last_seen, dict(n.dropped), n.agent_seen) for n in self._nodes.values()]

    def recent(self, node: str, gpu: int) -> list[Point]:
        """The GPU's ring-buffer points, oldest first."""
        with self._lock:
            state = self._gpus.get((node, gpu))
            return state.recent.points() if state and state.recent else []

    def _add_gpu(self, node: str, info: GpuInfo) -> GpuState:
        """A GPU not known before, kept and indexed under its node (the caller holds the lock)."""
        state = self._gpus[(node, info.index)] = GpuState(node, info, recent=Ring(self._ring_size))
        self._indices.setdefault(node, set()).add(info.index)
        return state

    def _node(self, name: str) -> NodeState:
        state = self._nodes.get(name)
        if state is None:
            state = self._nodes[name] = NodeState(name)
        return state

    def _copy(self, state: GpuState) -> GpuState:
        """A copy for readers, its latest sample built if a batch left it unbuilt (the caller holds the lock)."""
        if (series := state.unbuilt) is not None:
            if isinstance(series, tuple):
                block, i = series
                state.latest = block.sample(i, self._sample_type)
            else:
                state.latest = sample_at(series, len(series.ts) - 1, self._sample_type)
            state.unbuilt = None
        # Samples are immutable; only the containers need copying.
        return GpuState(
            state.node, state.info, state.latest, state.received_at, faults=state.faults, latest_ts=state.latest_ts
        )
