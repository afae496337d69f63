"""The job tracker's per-rank point ring: what a window of points says, what wraps around, and that its
storage is allocated once."""

from __future__ import annotations

import sys

import pytest

from server.telemetry.points import GpuPoint, PointRing, Window


def _point(ts: float, *, gpu: int = 0, util: float | None = 50.0, n: int = 1, idle: int = 0, **kw: object) -> GpuPoint:
    fields: dict[str, object] = {"power_w": None, "nvlink_kib": None, "pcie_kbps": None, "period_s": 1.0} | kw
    return GpuPoint(ts=ts, received=ts, gpu=gpu, util=util, n=n, idle=idle, **fields)  # type: ignore[arg-type]


def test_window_counts_only_points_received_within_it() -> None:
    ring = PointRing(8)
    for k in range(6):
        ring.add(_point(100.0 + k, util=10.0 * k, pcie_kbps=1.0 * k, gpu=k % 2))
    w = ring.window(now=105.0, window_s=2.0)  # received at 103, 104, 105
    assert w.n == 3 and w.util_sum == 30.0 + 40.0 + 50.0
    assert w.util_stats() == (40.0, 40.0, 0.0)
    assert w.gpus == {0, 1}
    assert w.pcie_bytes_per_s() == 4.0 * 1024


def test_oldest_points_are_overwritten_and_storage_never_grows() -> None:
    ring = PointRing(4)
    columns = [name for name in PointRing.__slots__ if name not in ("count", "size")]
    sizes = [sys.getsizeof(getattr(ring, name)) for name in columns]
    for k in range(10):
        ring.add(_point(float(k + 1), util=float(k)))
    w = ring.window(now=10.0, window_s=100.0)
    assert sorted(w.means) == [6.0, 7.0, 8.0, 9.0]  # the last four only
    assert [sys.getsizeof(getattr(ring, name)) for name in columns] == sizes


def test_fold_merges_a_bucket_and_refuses_an_overwritten_point() -> None:
    ring = PointRing(2)
    seq = ring.add(_point(1.0, util=80.0, n=4, idle=0, nvlink_kib=100))
    assert ring.fold(seq, _point(2.0, util=20.0, n=4, idle=2, power_w=300.0))
    w = ring.window(now=2.0, window_s=10.0)
    assert w.util_stats() == (50.0, 50.0, 0.25)  # 8 samples, 2 idle, one bucket
    assert w.nvlink == {0: (2.0, 100.0, 2.0, 100.0)}  # kept from the first part, stamped with the fold's time
    ring.add(_point(3.0))
    ring.add(_point(4.0))  # the folded point is gone
    assert not ring.fold(seq, _point(5.0))


def test_nvlink_rate_from_first_and_last_point_of_each_gpu() -> None:
    ring = PointRing(8)
    for k in range(4):
        ring.add(_point(10.0 + k, gpu=0, nvlink_kib=1000 + 512 * k))
        ring.add(_point(10.0 + k, gpu=1, nvlink_kib=5000))  # idle link: no bytes
    ring.add(_point(20.0, gpu=2, nvlink_kib=7))  # one point: no rate of its own
    w = ring.window(now=20.0, window_s=60.0)
    assert w.nvlink_bytes_per_s() == pytest.approx(512 * 1024.0)


def test_merged_windows_weigh_every_sample() -> None:
    a, b = PointRing(), PointRing()
    a.add(_point(1.0, util=100.0, n=3))
    b.add(_point(1.0, util=0.0, n=1, idle=1))
    merged = Window.merged([a.window(1.0, 10.0), b.window(1.0, 10.0)])
    assert merged.util_stats() == (75.0, 50.0, 0.25)
    assert Window().util_stats() == (None, None, None)
