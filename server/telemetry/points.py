"""A rank's recent GPU points for the job tracker, in typed arrays allocated once.

The tracker keeps one point per GPU per `POINT_GAP_S` bucket of a rank's samples: the bucket's mean
utilisation and idle share, and its last period, power, NVLink and PCIe readings. As one object per
point (and a float object per value), 64 points took about 17 KB a rank, 170 MB for 10,000 ranks,
allocated over the first five minutes of ingest and walked by every full garbage collection: in the
10-minute load test at 100,000 samples/s the server's RSS grew from 360 to 646 MiB (bench/README.md).
Here a rank's points are columns of a ring, about 5 KB in ten objects that hold no references,
allocated when the rank is first seen; NaN stands for a value not reported.
"""

from __future__ import annotations

import math
import statistics
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field

#: A rank keeps one GPU point per GPU per `POINT_GAP_S` bucket, whatever the agent's sampling rate, at
#: most `POINTS_PER_RANK` of them: 5 min 20 s of a one-GPU rank, just over the default 300 s window.
POINT_GAP_S = 5.0
POINTS_PER_RANK = 64

_NAN = math.nan


@dataclass(slots=True)
class GpuPoint:
    """One bucket of one GPU's samples (or a single sample): what the ring stores a row of."""

    ts: float
    received: float
    gpu: int
    util: float | None  # the bucket's mean
    period_s: float
    power_w: float | None
    nvlink_kib: int | None
    pcie_kbps: float | None
    n: int = 0  # samples with a utilisation in the bucket
    idle: int = 0  # of which idle


@dataclass(slots=True)
class Window:
    """What the points of a time window say, summed over one rank or several."""

    n: int = 0  # samples with a utilisation
    util_sum: float = 0.0  # their utilisations, summed
    idle: int = 0  # of which idle
    means: list[float] = field(default_factory=list)  # each bucket's mean utilisation
    gpus: set[int] = field(default_factory=set)
    pcie_sum: float = 0.0  # KB/s, over `pcie_count` points
    pcie_count: int = 0
    #: by GPU: (first ts, its NVLink counter, last ts, its counter), of the points that have one
    nvlink: dict[int, tuple[float, float, float, float]] = field(default_factory=dict)

    @classmethod
    def merged(cls, windows: Iterable[Window]) -> Window:
        """The utilisation figures of several ranks' windows together (GPUs and counters stay per rank)."""
        out = cls()
        for w in windows:
            out.n += w.n
            out.util_sum += w.util_sum
            out.idle += w.idle
            out.means.extend(w.means)
        return out

    def util_stats(self) -> tuple[float | None, float | None, float | None]:
        """Mean utilisation and idle share over the buckets' samples; median of the bucket means."""
        if not self.n:
            return None, None, None
        return self.util_sum / self.n, statistics.median(self.means), self.idle / self.n

    def nvlink_bytes_per_s(self) -> float | None:
        """From each GPU's cumulative counter (first and last point), summed over the GPUs."""
        total, seen = 0.0, False
        for first_ts, first, last_ts, last in self.nvlink.values():
            if last_ts > first_ts and last >= first:
                total += (last - first) * 1024.0 / (last_ts - first_ts)
                seen = True
        return total if seen else None

    def pcie_bytes_per_s(self) -> float | None:
        return self.pcie_sum * 1024.0 / self.pcie_count if self.pcie_count else None


class PointRing:
    """The last ``size`` points of a rank, oldest overwritten first (see the module docstring)."""

    __slots__ = ("count", "gpu", "idle", "n", "nvlink", "pcie", "period", "power", "received", "size", "ts", "util")

    def __init__(self, size: int = POINTS_PER_RANK) -> None:
        self.size, self.count = size, 0  # points ever added; the newest is at (count - 1) % size
        self.gpu = array("h", bytes(2 * size))
        self.n = array("i", bytes(4 * size))
        self.idle = array("i", bytes(4 * size))
        nans = array("d", [_NAN]) * size
        self.ts, self.received, self.util, self.period, self.power, self.nvlink, self.pcie = (
            array("d", nans) for _ in range(7)
        )

    def add(self, p: GpuPoint) -> int:
        """Store ``p`` over the oldest point; returns its sequence number, for `fold`."""
        return self.put(p.ts, p.received, p.gpu, p.util, p.period_s, p.power_w, p.nvlink_kib, p.pcie_kbps, p.n, p.idle)

    def fold(self, seq: int, p: GpuPoint) -> bool:
        """Add ``p``, newer samples of the same GPU, to point ``seq``; False if that point was overwritten."""
        if not self.holds(seq):
            return False
        self.merge(seq, p.ts, p.received, p.util, p.period_s, p.power_w, p.nvlink_kib, p.pcie_kbps, p.n, p.idle)
        return True

    def holds(self, seq: int) -> bool:
        """Point ``seq`` is still in the ring (not overwritten by newer ones)."""
        return self.count - seq <= self.size

    def put(
        self,
        ts: float,
        received: float,
        gpu: int,
        util: float | None,
        period_s: float,
        power_w: float | None,
        nvlink_kib: int | None,
        pcie_kbps: float | None,
        n: int,
        idle: int,
    ) -> int:
        """`add` from the point's values (the job tracker's way: no `GpuPoint` built per bucket)."""
        seq = self.count
        i = seq % self.size
        self.gpu[i], self.n[i], self.idle[i] = gpu, n, idle
        self.ts[i], self.received[i], self.period[i] = ts, received, period_s
        self.util[i] = _NAN if util is None else util
        self.power[i] = _NAN if power_w is None else power_w
        self.nvlink[i] = _NAN if nvlink_kib is None else nvlink_kib
        self.pcie[i] = _NAN if pcie_kbps is None else pcie_kbps
        self.count += 1
        return seq

    def merge(
        self,
        seq: int,
        ts: float,
        received: float,
        util: float | None,
        period_s: float,
        power_w: float | None,
        nvlink_kib: int | None,
        pcie_kbps: float | None,
        n: int,
        idle: int,
    ) -> None:
        """`fold` from the values, into a point the ring still `holds`."""
        i = seq % self.size
        if n:
            had = self.n[i]
            total = had + n
            self.util[i] = util if not had else (self.util[i] * had + util * n) / total  # type: ignore[operator]
            self.n[i] = total
            self.idle[i] += idle
        self.ts[i], self.received[i], self.period[i] = ts, received, period_s
        if power_w is not None:
            self.power[i] = power_w
        if nvlink_kib is not None:
            self.nvlink[i] = nvlink_kib
        if pcie_kbps is not None:
            self.pcie[i] = pcie_kbps

    def window(self, now: float, window_s: float) -> Window:
        """The points received in the last ``window_s`` seconds before ``now``."""
        w = Window()
        received, util, n = self.received, self.util, self.n
        for i in range(min(self.count, self.size)):
            if not now - received[i] <= window_s:
                continue
            gpu = self.gpu[i]
            w.gpus.add(gpu)
            if n[i] and not math.isnan(u := util[i]):
                w.n += n[i]
                w.util_sum += u * n[i]
                w.idle += self.idle[i]
                w.means.append(u)
            if not math.isnan(pcie := self.pcie[i]):
                w.pcie_sum += pcie
                w.pcie_count += 1
            if not math.isnan(link := self.nvlink[i]):
                ts = self.ts[i]
                seen = w.nvlink.get(gpu)
                if seen is None:
                    w.nvlink[gpu] = (ts, link, ts, link)
                else:  # the earliest point (the lowest count at a tie) and the latest (the highest)
                    first_ts, first, last_ts, last = seen
                    if ts < first_ts or (ts == first_ts and link < first):
                        first_ts, first = ts, link
                    if ts > last_ts or (ts == last_ts and link > last):
                        last_ts, last = ts, link
                    w.nvlink[gpu] = (first_ts, first, last_ts, last)
        return w
