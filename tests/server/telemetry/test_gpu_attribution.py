"""A job whose processes are not tied to a GPU says so (issue 24, point 5). Its utilization answer names the
gap instead of leaving the GPU fields silently empty, and /metrics exports `gpuwatch_job_gpu_attributed`
(1 full, 0.5 partial, 0 none) for the Job dashboard. Real app on loopback, SQLite and PostgreSQL."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpuwatch.config import Settings
from gpuwatch.protocol import Batch, GpuSample, JobProcess, StepReport
from tests.helpers import InProcessServer, new_token

# job → {rank: the GPU its process declared (None: none, so no sample is attributed to the rank)}
JOBS: dict[str, dict[int, int | None]] = {
    "tied": {0: 0, 1: 1},  # LOCAL_RANK named each rank's GPU
    "half": {0: 2, 1: None},
    "untied": {0: None, 1: None},  # e.g. a launcher that sets no LOCAL_RANK, in another PID namespace
}


def _batch(now: float) -> Batch:
    processes = [
        JobProcess(job=job, pid=1000 + 10 * i + rank, rank=rank, world_size=2, gpu=gpu)
        for i, (job, ranks) in enumerate(JOBS.items())
        for rank, gpu in ranks.items()
    ]
    steps = [
        StepReport(job=job, rank=rank, step=step, ts=now - 5 + step, duration_s=1.0, comm_s=0.1)
        for job, ranks in JOBS.items()
        for rank in ranks
        for step in range(5)
    ]
    # What the agent ships: samples of the GPUs a job's process holds carry its job and rank; GPU 3 runs
    # the untied job's processes, which nothing ties to it, so its samples carry no job.
    owners = {gpu: (job, rank) for job, ranks in JOBS.items() for rank, gpu in ranks.items() if gpu is not None}
    samples = [
        GpuSample(
            ts=now - 3 + t, gpu=gpu, uuid=f"GPU-{gpu}", util_gpu=80.0, power_w=300.0, period_s=1.0, job=job, rank=r
        )
        for t in range(3)
        for gpu, (job, r) in [*owners.items(), (3, (None, None))]
    ]
    return Batch(batch_id=1, processes=processes, steps=steps, samples=samples)


@pytest.fixture
def server(tmp_path: Path, db_url: str) -> Iterator[InProcessServer]:
    with InProcessServer(Settings(data_dir=tmp_path, database_url=db_url, max_body_bytes=1024 * 1024)) as srv:
        token = new_token(db_url, "node-a")
        resp = httpx.post(
            f"{srv.url}/api/v1/ingest",
            content=_batch(time.time()).model_dump_json(),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            timeout=10,
        )
        assert resp.status_code == 200, resp.text
        yield srv


def _utilization(srv: InProcessServer, job: str) -> dict:
    [found] = httpx.get(f"{srv.url}/api/v1/jobs", params={"name": job}).json()
    resp = httpx.get(f"{srv.url}/api/v1/jobs/{found['id']}/utilization")
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_a_job_with_gpu_samples_on_every_rank_is_fully_attributed(server: InProcessServer) -> None:
    u = _utilization(server, "tied")
    assert (u["gpu_attribution"], u["gpu_attribution_note"]) == ("full", None)
    assert u["gpu_util_mean"] == pytest.approx(80.0)
    assert {r["rank"]: r["gpus"] for r in u["ranks"]} == {0: [0], 1: [1]}


def test_a_job_with_steps_but_no_gpu_samples_says_its_utilization_is_unknown(server: InProcessServer) -> None:
    u = _utilization(server, "untied")
    assert u["gpu_attribution"] == "none"
    assert u["gpu_util_mean"] is None and u["gpu_hours"] == 0
    note = u["gpu_attribution_note"]
    assert "ranks [0, 1] report steps" in note and "LOCAL_RANK" in note and "unknown, not zero" in note
    assert all(r["steps"] == 5 and r["gpus"] == [] for r in u["ranks"])


def test_a_job_with_an_untied_rank_is_partially_attributed(server: InProcessServer) -> None:
    u = _utilization(server, "half")
    assert u["gpu_attribution"] == "partial"
    assert u["gpu_attribution_note"].startswith("ranks [1] report steps but no GPU sample of their own")
    assert u["gpu_util_mean"] == pytest.approx(80.0)  # rank 0's GPU


def test_attribution_is_a_job_series_on_metrics(server: InProcessServer) -> None:
    text = httpx.get(f"{server.url}/metrics").text
    [family] = [f for f in text_string_to_metric_families(text) if f.name == "gpuwatch_job_gpu_attributed"]
    assert family.type == "gauge"
    assert {s.labels["job"]: s.value for s in family.samples} == {"tied": 1.0, "half": 0.5, "untied": 0.0}


def test_the_openapi_spec_lists_the_three_attributions(server: InProcessServer) -> None:
    spec = httpx.get(f"{server.url}/openapi.json").json()
    field = spec["components"]["schemas"]["JobUtilizationOut"]["properties"]["gpu_attribution"]
    assert set(field["enum"]) == {"none", "partial", "full"}
