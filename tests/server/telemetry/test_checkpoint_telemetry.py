"""Checkpoint telemetry (issue 9): the client's saves reach the server through the agent's batches;
the server exports their age, cost and failures per job, and the job API shows the work at risk."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpuwatch.config import Settings
from gpuwatch.protocol import Batch, CheckpointReport, JobProcess
from tests.helpers import InProcessServer, Proc, free_port, migrated_sqlite, new_token, start_server, wait_until


def _metrics(srv: InProcessServer) -> dict[str, float]:
    out = {}
    for family in text_string_to_metric_families(httpx.get(f"{srv.url}/metrics").text):
        for s in family.samples:
            if s.name.startswith("gpuwatch_job_checkpoint") or s.name == "gpuwatch_job_gpu_hours_at_risk":
                out[s.name] = s.value
    return out


def test_saves_become_age_cost_failures_and_work_at_risk(settings: Settings) -> None:
    config = settings.replace(gpu_hour_price=2.0, max_body_bytes=1024 * 1024)
    with InProcessServer(config) as srv:
        token = new_token(config.effective_database_url, "node-c")
        now = time.time()
        saves = [
            CheckpointReport(job="llm", rank=0, step=100, ts=now - 600, path="/c/step_100", ok=True,
                             blocking_s=0.4, write_s=9.0, size_bytes=2_000_000_000),
            CheckpointReport(job="llm", rank=0, step=200, ts=now - 120, path="/c/step_200", ok=True,
                             blocking_s=0.5, write_s=10.0, size_bytes=2_100_000_000),
            CheckpointReport(job="llm", rank=0, step=300, ts=now - 5, path="/c/step_300", ok=False,
                             error="OSError: [Errno 28] No space left on device: '/c/step_300'"),
        ]  # fmt: skip
        procs = [JobProcess(job="llm", pid=100 + r, rank=r, world_size=4, gpu=r) for r in range(4)]
        batch = Batch(batch_id=1, processes=procs, checkpoints=saves)
        with httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {token}"}) as c:
            resp = c.post(
                "/api/v1/ingest", content=batch.model_dump_json(), headers={"Content-Type": "application/json"}
            )
            assert resp.status_code == 200, resp.text
            m = _metrics(srv)
            assert m["gpuwatch_job_checkpoint_age_seconds"] == pytest.approx(120, abs=5)
            assert m["gpuwatch_job_checkpoint_blocking_seconds"] == 0.5
            assert m["gpuwatch_job_checkpoint_write_seconds"] == 10.0
            assert m["gpuwatch_job_checkpoint_interval_seconds"] == pytest.approx(480)
            assert m["gpuwatch_job_checkpoint_failures_total"] == 1.0
            (job,) = c.get("/api/v1/jobs", params={"name": "llm"}).json()
            detail = c.get(f"/api/v1/jobs/{job['id']}").json()
        assert (detail["last_checkpoint_step"], detail["last_checkpoint_path"]) == (200, "/c/step_200")
        assert detail["gpus"] == 4
        assert detail["gpu_hours_at_risk"] == pytest.approx(4 * detail["checkpoint_age_s"] / 3600)
        assert detail["cost_at_risk"] == pytest.approx(2.0 * detail["gpu_hours_at_risk"])
        assert detail["checkpoint_age_s"] == pytest.approx(120, abs=5)
        listed = httpx.get(f"{srv.url}/api/v1/jobs/{job['id']}/checkpoints").json()
        assert [(c["step"], c["valid"]) for c in listed] == [(300, False), (200, True), (100, True)]
        # A run failure gives the tracker its MTBF, hence a Young/Daly optimum for the interval.
        srv.services.jobs.note_failure("llm")
        assert _metrics(srv)["gpuwatch_job_checkpoint_optimal_interval_seconds"] > 0


SAVER = """
import torch, gpuwatch.client as gw
ckpt = gw.AsyncCheckpointer({directory!r}, keep=2)
state = {{"w": torch.arange(1000.0)}}
for step in (10, 20):
    ckpt.save(state, step)
    ckpt.wait()
ckpt.close()
gw.stats()
"""


@pytest.mark.slow
def test_saves_travel_from_the_client_through_a_real_agent(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    url = migrated_sqlite(tmp_path)
    port, client_port = free_port(), free_port()
    server = start_server(tmp_path, port, tmp_path / "server.log")
    base = f"http://127.0.0.1:{port}"
    token = new_token(url, "node-t")
    args = ["--server", base, "--token", token, "--node", "node-t", "--simulate", "1", "--flush", "0.3"]
    agent = Proc(["agent", *args, "--client-port", str(client_port), "--data-dir", str(tmp_path)], tmp_path / "a.log")
    try:
        wait_until(lambda: httpx.get(f"{base}/api/v1/gpus").json(), what="the agent")
        env = {**os.environ, "GPUWATCH_AGENT_URL": f"http://127.0.0.1:{client_port}", "GPUWATCH_JOB": "saver"}
        done = subprocess.run(
            [sys.executable, "-c", SAVER.format(directory=str(tmp_path / "ckpt"))],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr

        def registered() -> list[dict] | None:
            jobs = httpx.get(f"{base}/api/v1/jobs", params={"name": "saver"}).json()
            listed = httpx.get(f"{base}/api/v1/jobs/{jobs[0]['id']}/checkpoints").json() if jobs else []
            return listed if len(listed) == 2 else None

        listed = wait_until(registered, timeout=30, what="both saves at the server")
        assert [(c["step"], c["valid"]) for c in listed] == [(20, True), (10, True)]
        assert listed[0]["path"].endswith("step_000020")
        assert 'gpuwatch_job_checkpoint_age_seconds{job="saver"}' in httpx.get(f"{base}/metrics").text
    finally:
        agent.stop()
        server.stop()


def test_a_supervised_jobs_checkpoint_age_is_exported_and_rebuilt_after_a_restart(settings: Settings) -> None:
    """A job under `gpuwatch run` that reports its checkpoints only at a run's exit (no agent, no
    AsyncCheckpointer) has an age too, and a restarted server has it again from the database."""
    token = new_token(settings.effective_database_url, "node-s")
    auth = {"Authorization": f"Bearer {token}"}
    saved_at = time.time() - 3 * 3600  # old enough for GpuwatchCheckpointTooOld
    with InProcessServer(settings) as srv, httpx.Client(base_url=srv.url, headers=auth) as c:
        first = c.post("/api/v1/runs", json={"job": "sup", "node": "node-s", "key": "sup-1"}).json()
        ref = {"path": "/c/step_40.pt", "step": 40, "saved_at": saved_at}
        ended = c.post(f"/api/v1/runs/{first['id']}/exit", json={"exit_code": 0, "checkpoint": ref})
        assert ended.status_code == 202, ended.text
        assert _metrics(srv)["gpuwatch_job_checkpoint_age_seconds"] == pytest.approx(3 * 3600, abs=30)
        c.post("/api/v1/runs", json={"job": "sup", "node": "node-s", "key": "sup-2"}).raise_for_status()
    with InProcessServer(settings) as srv:
        assert _metrics(srv)["gpuwatch_job_checkpoint_age_seconds"] == pytest.approx(3 * 3600, abs=30)
