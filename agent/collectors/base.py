"""The interface every collector implements: `collect(now) -> Reading`, like node_exporter's one-method
`Collector`. GPU samples (NVML or simulated), InfiniBand port counters, events (Xid, ECC, link down)
and log lines (job logs, the kernel log) all come back in a `Reading`; the agent numbers events and
lines in their streams, attributes samples to jobs and batches the lot. Which collectors run is
decided by name in `agent/collectors/registry.py`.

A collector never raises for one device's or one file's trouble: a field the GPU does not support is
left out of the sample, a GPU that stopped answering is reported as an event, a missing file is
waited for. If it raises anyway, the agent logs and counts it and the other collectors go on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from gpuwatch.protocol import GpuInfo, GpuSample, IbPortSample

if TYPE_CHECKING:
    from agent.state import AgentState


class CollectorUnavailable(RuntimeError):
    """The collector cannot run on this machine (no driver, no library); the message says what to do."""


@dataclass(frozen=True, slots=True)
class GpuEvent:
    """Something a collector noticed between two readings, before the shipper sequences it."""

    ts: float
    kind: str  # e.g. "xid", "ecc_dbe", "gpu_lost", "thermal_throttle"
    gpu: int | None
    message: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Line:
    """A log line a collector read, before the agent numbers it in its stream."""

    stream: str  # e.g. "file:/path/to/job.log", "kernel"
    ts: float
    text: str


@dataclass(slots=True)
class Reading:
    """What one run of a collector found; every collector fills only the parts it knows."""

    samples: list[GpuSample] = field(default_factory=list)
    events: list[GpuEvent] = field(default_factory=list)
    ib: list[IbPortSample] = field(default_factory=list)
    lines: list[Line] = field(default_factory=list)
    urgent: bool = False  # the server should hear this now, not at the next flush (a fatal Xid line)


@runtime_checkable
class Collector(Protocol):
    """A source of readings. ``stream`` is the stream its events are numbered in (lines carry their own)."""

    stream: str

    def collect(self, now: float) -> Reading:
        """Read once. ``now`` is the timestamp to stamp what was read with (an injectable clock)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class GpuCollector(Collector, Protocol):
    """A collector of GPUs (NVML on real hardware, or the simulator): the node registers with its inventory."""

    name: str

    def inventory(self) -> list[GpuInfo]:
        """The GPUs on this node, in index order."""
        ...

    def driver_version(self) -> str | None: ...


@runtime_checkable
class Resumable(Protocol):
    """A collector that reads on from where it stopped (log positions), across agent restarts."""

    def save(self, state: AgentState) -> None:
        """Note in ``state`` the position up to which lines were returned: they are spooled by now."""
        ...
