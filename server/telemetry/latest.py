"""In-memory telemetry: the latest sample and a ring buffer of recent samples per GPU.

Prometheus keeps the long time series; the server only needs what is current (for /metrics and the
API) and a short high-resolution window (for incident evidence). Everything here is guarded by one
lock because FastAPI runs sync endpoints on a thread pool.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field

from gpuwatch.protocol import GpuInfo, GpuSample, IbPortSample


@dataclass(slots=True)
class GpuState:
    node: str
    info: GpuInfo
    latest: GpuSample | None = None
    received_at: float | None = None  # server clock: when the latest sample arrived (agent clocks may skew)
    recent: deque[GpuSample] = field(default_factory=deque)


@dataclass(slots=True)
class NodeState:
    name: str
    last_seen: float | None = None  # monotonic-free unix time of the last request from this node
    dropped: dict[str, int] = field(default_factory=dict)


class Telemetry:
    """Latest values and recent history of every known GPU, keyed by (node, GPU index)."""

    def __init__(self, ring_size: int = 600) -> None:
        self._ring_size = ring_size
        self._lock = threading.Lock()
        self._gpus: dict[tuple[str, int], GpuState] = {}
        self._nodes: dict[str, NodeState] = {}
        self._ib: dict[tuple[str, str, int], tuple[IbPortSample, float]] = {}  # -> (latest, received)

    def set_inventory(self, node: str, gpus: list[GpuInfo]) -> None:
        """Record what GPUs a node has; samples for unknown GPUs are kept under a placeholder identity."""
        with self._lock:
            self._node(node)
            for info in gpus:
                state = self._gpus.get((node, info.index))
                if state is None:
                    self._gpus[(node, info.index)] = GpuState(node, info, recent=deque(maxlen=self._ring_size))
                else:
                    state.info = info

    def add_samples(self, node: str, samples: list[GpuSample], now: float | None = None) -> None:
        now = time.time() if now is None else now
        with self._lock:
            for sample in samples:
                state = self._gpus.get((node, sample.gpu))
                if state is None:
                    info = GpuInfo(index=sample.gpu, uuid=sample.uuid, name="unknown")
                    state = self._gpus[(node, sample.gpu)] = GpuState(node, info, recent=deque(maxlen=self._ring_size))
                if state.latest is None or sample.ts >= state.latest.ts:
                    state.latest = sample
                    state.received_at = now
                state.recent.append(sample)

    def add_ib(self, node: str, ports: list[IbPortSample], now: float | None = None) -> None:
        now = time.time() if now is None else now
        with self._lock:
            for p in ports:
                key = (node, p.device, p.port)
                if key not in self._ib or p.ts >= self._ib[key][0].ts:
                    self._ib[key] = (p, now)

    def ib_ports(self) -> list[tuple[str, IbPortSample, float]]:
        """(node, latest sample, when it arrived) of every InfiniBand port."""
        with self._lock:
            return [(node, p, at) for (node, _, _), (p, at) in sorted(self._ib.items())]

    def touch(self, node: str, dropped: dict[str, int] | None = None, now: float | None = None) -> None:
        """Note that ``node`` was heard from (and what its agent reports having dropped)."""
        with self._lock:
            state = self._node(node)
            state.last_seen = time.time() if now is None else now
            if dropped:
                state.dropped = dict(dropped)

    def gpus(self) -> list[GpuState]:
        with self._lock:
            return [self._copy(s) for _, s in sorted(self._gpus.items())]

    def nodes(self) -> list[NodeState]:
        with self._lock:
            return [NodeState(n.name, n.last_seen, dict(n.dropped)) for n in self._nodes.values()]

    def recent(self, node: str, gpu: int) -> list[GpuSample]:
        with self._lock:
            state = self._gpus.get((node, gpu))
            return list(state.recent) if state else []

    def _node(self, name: str) -> NodeState:
        state = self._nodes.get(name)
        if state is None:
            state = self._nodes[name] = NodeState(name)
        return state

    @staticmethod
    def _copy(state: GpuState) -> GpuState:
        # Samples are immutable pydantic models; only the containers need copying.
        return GpuState(state.node, state.info, state.latest, state.received_at)
