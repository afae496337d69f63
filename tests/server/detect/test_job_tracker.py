"""The job tracker and its detectors on a controlled clock: stragglers by compute time, hangs by
progress and idle GPUs, bounded memory."""

from __future__ import annotations

import pytest

from gpuwatch.protocol import GpuSample, JobProcess, StepReport
from server.detect.detection import Detection
from server.detect.hangs import HangDetector
from server.detect.stragglers import StragglerDetector
from server.telemetry.job_tracker import JobTracker
from tests.helpers import add_samples


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def _step(rank: int, n: int, ts: float, duration: float, comm: float, job: str = "j") -> StepReport:
    return StepReport(job=job, rank=rank, step=n, ts=ts, duration_s=duration, comm_s=comm, tokens=100)


class Watched(JobTracker):
    """The tracker with its detectors wired as the server wires them (server/services.py): stragglers
    checked on each batch's steps, quiet jobs forgotten before each hang check."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock=clock)
        self.stragglers = StragglerDetector(self, margin=0.2, steps=3, min_s=0.005)
        self.hangs = HangDetector(self, default_timeout_s=10)

    def add_steps(self, node: str, steps: list[StepReport]) -> list[Detection]:  # type: ignore[override]
        return self.stragglers.check(super().add_steps(node, steps))

    def check_hangs(self) -> list[Detection]:
        self.forget_quiet()
        return self.hangs.check()


def _tracker(clock: Clock) -> Watched:
    return Watched(clock)


def test_straggler_is_the_rank_with_long_compute_not_long_wall_time() -> None:
    clock = Clock()
    t = _tracker(clock)
    t.add_processes("n1", [JobProcess(job="j", pid=1, rank=0, world_size=2), JobProcess(job="j", pid=2, rank=1)])
    found = []
    for n in range(6):
        # Both ranks' steps take 1.0 s of wall time (synchronous all_reduce), but rank 0 waits 0.5 s in it:
        # rank 1 computes 0.9 s against rank 0's 0.5 s.
        found += t.add_steps("n1", [_step(0, n, clock.now, 1.0, 0.5), _step(1, n, clock.now, 1.0, 0.1)])
        clock.now += 1
    assert [(d.kind, d.ranks, d.node) for d in found] == [("straggler", (1,), "n1")]
    assert found[0].data["step"] == 2, "named on the 3rd slow step in a row"
    s = t.summary("j")
    assert s is not None and s.straggler_events == 1
    assert [r.straggler for r in s.ranks] == [False, True]
    assert s.ranks[0].comm_overhead == pytest.approx(0.5) and s.ranks[1].comm_overhead == pytest.approx(0.1)
    # It recovers, then falls behind again: a second event.
    for n in range(6, 8):
        t.add_steps("n1", [_step(0, n, clock.now, 1.0, 0.1), _step(1, n, clock.now, 1.0, 0.1)])
    again = []
    for n in range(8, 11):
        again += t.add_steps("n1", [_step(0, n, clock.now, 1.0, 0.5), _step(1, n, clock.now, 1.0, 0.1)])
    assert len(again) == 1


def test_steps_out_of_order_wait_for_every_rank() -> None:
    clock = Clock()
    t = _tracker(clock)
    found = []
    for n in range(4):
        found += t.add_steps("n1", [_step(1, n, clock.now, 1.0, 0.0)])  # rank 0's reports come later
    assert found == []
    for n in range(4):
        found += t.add_steps("n1", [_step(0, n, clock.now, 1.0, 0.6)])
    assert [d.ranks for d in found] == [(1,)]


def test_hang_needs_both_no_progress_and_idle_gpus() -> None:
    clock = Clock()
    t = _tracker(clock)
    t.add_processes("n1", [JobProcess(job="j", pid=1, rank=0, hang_timeout_s=5)])
    t.add_steps("n1", [_step(0, 0, clock.now, 1.0, 0.1)])
    busy = GpuSample(ts=clock.now, gpu=0, uuid="GPU-0", util_gpu=97.0, job="j", rank=0, period_s=1.0)
    add_samples(t, "n1", [busy])
    clock.now += 6
    add_samples(t, "n1", [busy.model_copy(update={"ts": clock.now})])
    assert t.check_hangs() == [], "a long step on a busy GPU is progress"
    add_samples(t, "n1", [busy.model_copy(update={"ts": clock.now + 0.5, "util_gpu": 0.0})])
    [hang] = t.check_hangs()
    assert hang.kind == "hang" and hang.job == "j" and hang.data["timeout_s"] == 5
    assert t.check_hangs() == [], "reported once per stall"
    t.add_steps("n1", [_step(0, 1, clock.now, 1.0, 0.1)])
    clock.now += 6
    assert len(t.check_hangs()) == 1, "a new stall after progress is reported again"


def test_gpu_samples_that_stopped_arriving_are_no_evidence_of_a_hang() -> None:
    """A replica that no longer receives a node's samples knows nothing of its GPUs: no hang on steps
    alone there, while a job whose fresh samples say idle still hangs."""
    clock = Clock()
    t = _tracker(clock)
    for job in ("unheard", "idle"):
        t.add_steps("n1", [_step(0, 0, clock.now, 1.0, 0.1, job=job)])
    idle = GpuSample(ts=clock.now, gpu=0, uuid="GPU-0", util_gpu=0.0, job="unheard", rank=0, period_s=1.0)
    add_samples(t, "n1", [idle])
    clock.now += 11  # past the default hang timeout (10 s); "unheard"'s last sample is as old
    add_samples(t, "n1", [idle.model_copy(update={"ts": clock.now, "gpu": 1, "uuid": "GPU-1", "job": "idle"})])
    assert [hang.job for hang in t.check_hangs()] == ["idle"]


def test_steps_redone_after_a_restart_are_progress() -> None:
    """Resumed from the checkpoint of step 5, the job reports steps 5, 6, … again: that is progress."""
    clock = Clock()
    t = _tracker(clock)
    for n in range(10):
        t.add_steps("n1", [_step(0, n, clock.now, 1.0, 0.1)])
        clock.now += 1
    idle = GpuSample(ts=clock.now, gpu=0, uuid="GPU-0", util_gpu=0.0, job="j", rank=0, period_s=1.0)
    for n in range(5, 12):  # the restarted run, on idle-looking GPUs, every second
        clock.now += 1
        t.add_steps("n1", [_step(0, n, clock.now, 1.0, 0.1)])
        add_samples(t, "n1", [idle.model_copy(update={"ts": clock.now})])
        assert t.check_hangs() == []
    summary = t.summary("j")
    assert summary is not None and summary.ranks[0].last_step == 11


def test_default_timeout_and_forgetting_idle_jobs() -> None:
    clock = Clock()
    t = _tracker(clock)
    t.add_steps("n1", [_step(0, 0, clock.now, 1.0, 0.0)])
    clock.now += 9
    assert t.check_hangs() == []
    clock.now += 2
    assert len(t.check_hangs()) == 1, "no GPU samples at all: judged on steps alone, default timeout 10 s"
    clock.now += 3601
    t.check_hangs()
    assert t.jobs() == []


def test_summary_rates_and_gpu_accounting() -> None:
    clock = Clock()
    t = _tracker(clock)
    for n in range(10):
        t.add_steps("n1", [_step(0, n, clock.now + n, 1.0, 0.25)])
        add_samples(
            t,
            "n1",
            [
                GpuSample(
                    ts=clock.now + n,
                    gpu=0,
                    uuid="GPU-0",
                    util_gpu=80.0 if n < 8 else 1.0,
                    power_w=500.0,
                    nvlink_tx_kib=1024 * n,
                    nvlink_rx_kib=0,
                    job="j",
                    rank=0,
                    period_s=1.0,
                )
            ],
        )
    clock.now += 10
    s = t.summary("j")
    assert s is not None
    r = s.ranks[0]
    assert r.tokens_per_s == 100.0  # 1000 tokens over 10 s of steps
    assert r.comm_overhead == 0.25 and r.step_s == 1.0
    # 10 samples in two 5 s buckets (means 80 and 48.4): the mean and idle share count every sample,
    # the median is over the bucket means (POINT_GAP_S).
    assert r.idle_fraction == 0.2 and r.gpu_util_mean == pytest.approx(64.2)
    assert r.gpu_util_p50 == pytest.approx((80.0 + 48.4) / 2)
    assert r.nvlink_bytes_per_s == 1024 * 1024.0  # 1 MiB more each second
    assert s.gpu_hours == 10 / 3600 and s.idle_gpu_hours == 2 / 3600
    assert s.energy_kwh == 500 * 10 / 3.6e6


def test_a_node_has_a_budget_of_tracked_jobs_that_quiet_jobs_give_back() -> None:
    """One node naming 100,000 jobs grew the server to 885 MiB and /metrics to 36 MB (issue 21)."""
    clock = Clock()
    t = JobTracker(max_jobs_per_node=3, forget_after_s=60, clock=clock)
    for n in range(5):
        t.add_steps("n1", [_step(0, 0, clock.now, 1.0, 0.1, job=f"j{n}")])
    t.add_steps("n2", [_step(0, 0, clock.now, 1.0, 0.1, job="other")])  # another node's budget is its own
    assert sorted(t.jobs()) == ["j0", "j1", "j2", "other"] and t.refused_jobs == 2
    t.add_steps("n1", [_step(0, 1, clock.now, 1.0, 0.1, job="j0")])  # a tracked job is always taken
    clock.now += 61
    t.add_steps("n1", [_step(0, 2, clock.now, 1.0, 0.1, job="j0")])
    assert sorted(t.forget_quiet()) == ["j1", "j2", "other"]
    t.add_steps("n1", [_step(0, 0, clock.now, 1.0, 0.1, job="j3")])  # room again
    assert sorted(t.jobs()) == ["j0", "j3"] and t.refused_jobs == 2
