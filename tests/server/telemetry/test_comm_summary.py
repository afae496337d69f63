"""The server's per-job communication figures from the steps the clients report: the exposed ratio
beside the total, and nccl-tests' bandwidths per op (algbw = bytes / time, busbw = bus_bytes / time)."""

from __future__ import annotations

import pytest

from gpuwatch.protocol import StepReport
from server.telemetry.job_tracker import JobTracker

MB = 1_000_000


def test_exposed_ratio_and_bandwidths_per_op() -> None:
    tracker = JobTracker(clock=lambda: 1000.0)
    stat = {"count": 2, "seconds": 0.02, "bytes": 200 * MB, "gpu_seconds": 0.02, "bus_bytes": 200 * MB * 1.75}
    steps = [
        StepReport.model_validate(
            {"job": "j", "rank": r, "step": 0, "ts": 999.0, "duration_s": 0.1, "comm_s": 0.02, "exposed_s": e}
            | {"collectives": {"all_reduce": stat}}
        )
        for r, e in ((0, 0.01), (1, 0.03))
    ]
    tracker.add_steps("n", steps)
    summary = tracker.summary("j")
    assert summary is not None
    assert summary.comm_overhead == pytest.approx(0.2)
    assert summary.comm_exposed == pytest.approx(0.2)  # (0.01 + 0.03) / 0.2
    assert [r.comm_exposed for r in summary.ranks] == [pytest.approx(0.1), pytest.approx(0.3)]
    ar = summary.collectives["all_reduce"]
    assert (ar.count, ar.bytes, ar.gpu_seconds) == (4, 400 * MB, pytest.approx(0.04))
    assert ar.algbw_bytes_per_s == pytest.approx(1e10)
    assert ar.busbw_bytes_per_s == pytest.approx(1.75e10)


def test_steps_of_an_older_client_have_no_exposed_ratio() -> None:
    tracker = JobTracker(clock=lambda: 1000.0)
    step = {"job": "old", "rank": 0, "step": 0, "ts": 999.0, "duration_s": 0.1, "comm_s": 0.05}
    tracker.add_steps("n", [StepReport.model_validate(step)])
    summary = tracker.summary("old")
    assert summary is not None
    assert summary.comm_overhead == pytest.approx(0.5)
    assert summary.comm_exposed is None and summary.collectives == {}
