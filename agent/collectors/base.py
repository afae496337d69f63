"""The interface every GPU collector implements, and the registry that picks one by name.

A collector is asked for its inventory once (at registration) and for a `Reading` every sampling
interval. It never raises for one GPU's trouble: a field the GPU does not support is left out of the
sample, a GPU that stopped answering is reported as an event, and the other GPUs carry on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from gpuwatch.protocol import GpuInfo, GpuSample


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


@dataclass(slots=True)
class Reading:
    samples: list[GpuSample] = field(default_factory=list)
    events: list[GpuEvent] = field(default_factory=list)


class GpuCollector(Protocol):
    """What the agent needs from a source of GPU readings (NVML on real hardware, or the simulator)."""

    name: str

    def inventory(self) -> list[GpuInfo]:
        """The GPUs on this node, in index order."""
        ...

    def driver_version(self) -> str | None: ...

    def collect(self, now: float) -> Reading:
        """Read every GPU once. ``now`` is the timestamp to stamp samples with (an injectable clock)."""
        ...

    def close(self) -> None: ...
