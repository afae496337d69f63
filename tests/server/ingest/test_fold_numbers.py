"""The numbers a batch's GPU series fold into, worked out by hand: the per-minute rollups and the job
tracker's totals, points and newest sample. The series are awkward on purpose: one crosses a minute
and a `POINT_GAP_S` bucket, arrives in two batches, lacks a utilisation and a period here and there,
and changes its period; others lack whole columns or have no job."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from gpuwatch.protocol import GpuSeries
from server.ingest.decode import mirror
from server.store.db import make_engine, make_sessionmaker, transaction
from server.store.models import Node
from server.store.rollups import RollupBuffer
from server.telemetry.job_tracker import JobTracker
from server.telemetry.samples import SampleBlock
from tests.helpers import migrated_sqlite

T0 = 1_800_000_000.0  # a whole hour: minute 0 is [T0, T0 + 60)
Series = mirror(GpuSeries)  # what the ingest path decodes a batch's series into

# GPU 0, job "j" rank 3: samples at T0 + 57 … 63, cut into two batches after the fourth (T0 + 60).
TS = [57.0, 58.0, 59.5, 60.0, 61.0, 63.0]
UTIL = [3.0, None, 50.0, 4.0, 100.0, 1.0]
PERIOD = [0.5, 1.0, None, 2.0, 0.25, 1.0]  # None: 1 s
POWER = [100.0, None, 300.0, 200.0, 40.0, 8.0]
MEM_UTIL = [10.0, 20.0, None, 30.0, 0.0, 5.0]
FB_USED = [1000.0, 1200.0, None, 900.0, 950.0, 1100.0]
TEMP = [50.0, 61.0, 55.0, None, 70.0, 40.0]
NVLINK_TX = [100, 200, 300, 400, 1024, 3072]
NVLINK_RX = [0, None, 0, 0, None, 1024]
PCIE_TX = [10.0, 20.0, 30.0, 40.0, 100.0, 300.0]
PCIE_RX = [1.0, 1.0, 1.0, 1.0, None, 12.0]


def _gpu0(start: int, end: int) -> Any:
    def cut(column: list[Any]) -> list[Any]:
        return column[start:end]

    return Series(
        gpu=0,
        uuid="GPU-0",
        job="j",
        rank=3,
        ts=[T0 + t for t in cut(TS)],
        util_gpu=cut(UTIL),
        util_mem=cut(MEM_UTIL),
        fb_used_mib=cut(FB_USED),
        fb_total_mib=[80000.0] * (end - start),
        power_w=cut(POWER),
        temp_c=cut(TEMP),
        period_s=cut(PERIOD),
        nvlink_tx_kib=cut(NVLINK_TX),
        nvlink_rx_kib=cut(NVLINK_RX),
        pcie_tx_kbps=cut(PCIE_TX),
        pcie_rx_kbps=cut(PCIE_RX),
    )


def _batches(block: bool = False) -> list[Any]:
    """The two batches' series, as lists (protocol 2's decoding) or, with ``block``, as protocol 3's
    `SampleBlock`: both folds must give the same numbers."""
    unowned = Series(gpu=1, uuid="GPU-1", ts=[T0 + 58, T0 + 59])  # no column but ts, no job
    other = Series(gpu=2, uuid="GPU-2", job="k", ts=[T0 + 10, T0 + 11], power_w=[50.0, None])  # no rank
    batches = [[_gpu0(0, 4), unowned, other], [_gpu0(4, 6)]]
    return [SampleBlock.of_series(b) for b in batches] if block else batches


BOTH = pytest.mark.parametrize("block", [False, True], ids=["lists", "block"])


@BOTH
def test_rollups_of_a_series_crossing_a_minute(tmp_path: Path, block: bool) -> None:
    url = migrated_sqlite(tmp_path)
    sessions = make_sessionmaker(make_engine(url))
    with transaction(sessions) as session:
        node = Node(name="n1")
        session.add(node)
        session.flush()
        node_id = node.id
    buffer = RollupBuffer(3600)
    for series in _batches(block):
        buffer.add(node_id, series)
    with transaction(sessions) as session:
        buffer.flush(session)

    engine = create_engine(url)
    with engine.connect() as conn:
        gpus = conn.execute(
            text(
                "SELECT g.uuid, r.samples, r.util_sum, r.util_max, r.mem_util_sum, r.fb_used_max_mib, r.power_sum_w, "
                "r.temp_max_c, r.gpu_seconds, r.idle_seconds, r.unallocated_seconds, r.energy_j "
                "FROM gpu_rollups r JOIN gpus g ON g.id = r.gpu_id ORDER BY g.uuid, r.minute"
            )
        ).all()
        jobs = conn.execute(
            text(
                "SELECT j.name, r.rank, r.gpu_seconds, r.idle_gpu_seconds, r.util_gpu_seconds, r.energy_j "
                "FROM job_rollups r JOIN jobs j ON j.id = r.job_id ORDER BY j.name, r.rank, r.minute"
            )
        ).all()
    engine.dispose()
    assert [tuple(r) for r in gpus] == [
        # minute 0: T0 + 57, 58, 59.5 (utilisations 3, -, 50; periods 0.5, 1, 1; power 100, -, 300)
        ("GPU-0", 3, 53.0, 50.0, 30.0, 1200.0, 400.0, 61.0, 2.5, 0.5, 0.0, 100 * 0.5 + 300 * 1.0),
        # minute 1: T0 + 60, 61, 63 (utilisations 4, 100, 1; periods 2, 0.25, 1; power 200, 40, 8)
        ("GPU-0", 3, 105.0, 100.0, 35.0, 1100.0, 248.0, 70.0, 3.25, 3.0, 0.0, 418.0),
        ("GPU-1", 2, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 0.0, 2.0, 0.0),
        ("GPU-2", 2, 0.0, 0.0, 0.0, 0.0, 50.0, 0.0, 2.0, 0.0, 0.0, 50.0),
    ]
    assert [tuple(r) for r in jobs] == [
        ("j", 3, 2.5, 0.5, 3 * 0.5 + 50 * 1.0, 350.0),
        ("j", 3, 3.25, 3.0, 4 * 2.0 + 100 * 0.25 + 1 * 1.0, 418.0),
        ("k", -1, 2.0, 0.0, 0.0, 50.0),
    ]


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@BOTH
def test_job_totals_points_and_newest_sample_of_a_series_crossing_a_bucket(block: bool) -> None:
    clock = Clock(T0 + 61)
    tracker = JobTracker(clock=clock)
    first, second = _batches(block)
    tracker.add_series("n1", first)
    with tracker.locked() as jobs:  # the newest sample (utilisation 4) is idle, its bucket's mean (19) is not
        assert tracker.gpus_idle(jobs["j"], clock.now)
        latest = jobs["j"].ranks[3].latest[0]
        assert (latest.ts, latest.util, latest.period_s, latest.power_w) == (T0 + 60, 4.0, 2.0, 200.0)
        assert (latest.nvlink_kib, latest.pcie_kbps, latest.n, latest.idle) == (400, 41.0, 1, 1)
    clock.now = T0 + 64
    tracker.add_series("n1", second)

    j = tracker.summary("j")
    assert j is not None
    assert (j.gpu_hours, j.idle_gpu_hours, j.energy_kwh) == (5.75 / 3600, 3.5 / 3600, 768.0 / 3.6e6)
    (rank,) = j.ranks
    assert rank.rank == 3 and rank.node == "n1" and rank.gpus == (0,)
    # Buckets [T0 + 57, + 62): utilisations 3, 50, 4 (mean 19) then 100 folded in (mean 39.25), 2 idle;
    # [T0 + 63, + 68): 1, idle. The mean and idle share count samples, the median bucket means.
    assert (rank.gpu_util_mean, rank.gpu_util_p50, rank.idle_fraction) == (158 / 5, (39.25 + 1.0) / 2, 3 / 5)
    # Each bucket's point keeps its last sample's counters: NVLink 1024 at T0 + 61, 3072 + 1024 at T0 + 63.
    assert rank.nvlink_bytes_per_s == (4096 - 1024) * 1024.0 / 2
    assert rank.pcie_bytes_per_s == (100.0 + 312.0) / 2 * 1024.0
    with tracker.locked() as jobs:
        latest = jobs["j"].ranks[3].latest[0]
        assert (latest.ts, latest.received, latest.util, latest.n, latest.idle) == (T0 + 63, T0 + 64, 1.0, 1, 1)
        assert (latest.nvlink_kib, latest.pcie_kbps, latest.period_s, latest.power_w) == (4096, 312.0, 1.0, 8.0)
        assert tracker.gpus_idle(jobs["j"], clock.now)

    k = tracker.summary("k")
    assert k is not None
    assert (k.gpu_hours, k.idle_gpu_hours, k.energy_kwh) == (2.0 / 3600, 0.0, 50.0 / 3.6e6)
    (rank,) = k.ranks
    assert rank.rank == -1 and rank.gpus == (2,) and rank.gpu_util_mean is None
    with tracker.locked() as jobs:
        assert not tracker.gpus_idle(jobs["k"], clock.now), "no utilisation reported: no evidence of idleness"
    assert tracker.summary("unowned") is None and sorted(tracker.jobs()) == ["j", "k"]


@BOTH
@pytest.mark.parametrize(("idle_util", "idle_s", "idle_samples"), [(5.0, 3.5, 3), (60.0, 4.5, 4)])
def test_job_idle_time_follows_the_trackers_threshold(
    idle_util: float, idle_s: float, idle_samples: int, block: bool
) -> None:
    """The tracker's idle threshold is its own (the rollups' is fixed at 5 %): under 5 % are utilisations
    3 (0.5 s), 4 (2 s) and 1 (1 s); under 60 % also 50 (1 s)."""
    tracker = JobTracker(idle_util=idle_util, clock=Clock(T0 + 64))
    for series in _batches(block):
        tracker.add_series("n1", series)
    j = tracker.summary("j")
    assert j is not None
    assert j.idle_gpu_hours == idle_s / 3600
    assert j.ranks[0].idle_fraction == idle_samples / 5
