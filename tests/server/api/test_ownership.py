"""A node acts only on its own jobs (docs/security.md), over real HTTP: node "a" owns a job, node "m"
is another node with a valid token. Each test is an attack that worked before the ownership model."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpuwatch.config import Settings
from gpuwatch.protocol import Batch, JobProcess, StepReport
from server.store.models import AuditEntry, Incident, Job
from tests.helpers import InProcessServer, new_admin_token, new_token, wait_until


@dataclass
class Cluster:
    server: InProcessServer
    a: httpx.Client  # the owner's node
    m: httpx.Client  # another node
    admin: httpx.Client

    def job(self, name: str) -> Job:
        with self.server.services.sessions() as session:
            job = session.query(Job).filter_by(name=name).one()
            session.expunge(job)
            return job

    def metric(self, name: str) -> float:
        text = self.a.get("/metrics").text
        return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples if s.name == name)


@pytest.fixture
def cluster(settings: Settings) -> Iterator[Cluster]:
    config = settings.model_copy(update={"incident_settle_s": 0.05, "hang_check_s": 0.05, "max_body_bytes": 2**20})
    url = config.effective_database_url
    with InProcessServer(config) as srv:
        clients = [
            httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {token}"}, timeout=10)
            for token in (new_token(url, "a"), new_token(url, "m"), new_admin_token(url))
        ]
        yield Cluster(srv, *clients)
        for client in clients:
            client.close()


SLURM_JOB = {"job": "llama", "scheduler": "slurm", "external_id": "123", "policy": {"max_restarts": 2}}


def test_another_node_cannot_take_over_a_job_or_change_what_its_restart_acts_on(cluster: Cluster) -> None:
    assert cluster.a.post("/api/v1/runs", json={**SLURM_JOB, "key": "llama-1"}).status_code == 201
    hijack = {**SLURM_JOB, "external_id": "999", "policy": {"max_restarts": 0}}
    refused = cluster.m.post("/api/v1/runs", json=hijack)
    # Not a member, and the scheduler cannot vouch for it (no Slurm here): refused.
    assert refused.status_code == 403 and "belongs to other nodes" in refused.json()["detail"]
    changed = cluster.a.post("/api/v1/runs", json={**SLURM_JOB, "external_id": "999"})
    assert changed.status_code == 409 and "PATCH /api/v1/jobs/" in changed.json()["detail"]
    job = cluster.job("llama")
    assert (job.scheduler, job.external_id, job.policy) == ("slurm", "123", {"max_restarts": 2})


def test_telemetry_never_changes_a_jobs_scheduler(cluster: Cluster) -> None:
    """A torchrun job under a local `gpuwatch run`: its processes report scheduler `torchrun`."""
    assert cluster.a.post("/api/v1/runs", json={"job": "tr", "key": "tr-1"}).status_code == 201
    proc = JobProcess(job="tr", pid=7, rank=0, scheduler="torchrun", external_id="x")
    assert cluster.a.post("/api/v1/ingest", content=Batch(batch_id=0, processes=[proc]).model_dump_json()).is_success
    job = cluster.job("tr")
    assert (job.scheduler, job.external_id) == ("local", None)


def test_another_nodes_reports_cannot_hang_a_run_it_does_not_own(cluster: Cluster) -> None:
    """A tiny hang timeout and one old step for another node's job used to open a `hang` incident on
    its running run, and the restart killed it."""
    assert cluster.a.post("/api/v1/runs", json={"job": "victim", "key": "v-1"}).status_code == 201
    old = time.time() - 3600
    attack = Batch(
        batch_id=0,
        processes=[JobProcess(job="victim", pid=1, rank=0, hang_timeout_s=0.1)],
        steps=[StepReport(job="victim", rank=0, step=1, ts=old, duration_s=1.0)],
    )
    assert cluster.m.post("/api/v1/ingest", content=attack.model_dump_json()).status_code == 200
    wait_until(lambda: cluster.metric("gpuwatch_ingest_foreign_job_reports_total") == 1, what="the refusal counted")
    # The same reports from the owner's node do hang it: the check runs, and only ownership held it back.
    assert cluster.a.post("/api/v1/ingest", content=attack.model_dump_json()).status_code == 200
    with cluster.server.services.sessions() as session:
        wait_until(lambda: session.query(Incident).filter_by(trigger="hang").count() == 1, what="the owner's hang")
    assert cluster.server.services.jobs.summary("victim").ranks[0].node == "a"


def test_run_keys_and_restarts_name_only_the_nodes_own_runs(cluster: Cluster) -> None:
    run = cluster.a.post("/api/v1/runs", json={"job": "j", "key": "j-1"}).json()["id"]
    assert cluster.a.post(f"/api/v1/runs/{run}/exit", json={"exit_code": 1}).json()["incident_id"] is not None
    reused = cluster.m.post("/api/v1/runs", json={"job": "mine", "key": "j-1"})
    assert reused.status_code == 409  # the key of a's run: m gets no run of a's back
    cross = cluster.m.post("/api/v1/runs", json={"job": "mine", "key": "m-1", "restart_of": "j-1"})
    assert cross.status_code == 409 and "another job" in cross.json()["detail"]
    # m cannot start a run of a's job, so cannot end one with exit 0 to resolve a's incidents either
    assert cluster.m.post("/api/v1/runs", json={"job": "j", "key": "m-2"}).status_code == 403


def test_an_admin_changes_a_jobs_scheduler_audited_and_a_node_cannot(cluster: Cluster) -> None:
    job_id = cluster.a.post("/api/v1/runs", json={**SLURM_JOB, "key": "llama-1"}).json()["job_id"]
    change = {"external_id": "456", "policy": {"max_restarts": 5}}
    assert cluster.a.patch(f"/api/v1/jobs/{job_id}", json=change).status_code == 403
    assert cluster.admin.patch(f"/api/v1/jobs/{job_id}", json={"policy": {"nonsense": 1}}).status_code == 422
    got = cluster.admin.patch(f"/api/v1/jobs/{job_id}", json=change)
    assert got.status_code == 200 and got.json()["external_id"] == "456"
    assert cluster.a.post("/api/v1/runs", json={**SLURM_JOB, **change, "key": "llama-2"}).status_code == 201
    with cluster.server.services.sessions() as session:
        entry = session.query(AuditEntry).filter_by(action="job.change").one()
        assert entry.target == "llama" and entry.params["before"]["external_id"] == "123"


def test_a_job_an_admin_registers_to_nodes_takes_runs_and_reports_from_each_of_them(cluster: Cluster) -> None:
    """A job run on several nodes with no scheduler to vouch for them: an admin names its nodes first."""
    job = {"name": "multi", "member_nodes": ["a", "m"]}
    assert cluster.m.post("/api/v1/jobs", json=job).status_code == 403
    assert cluster.admin.post("/api/v1/jobs", json=job).status_code == 201
    assert cluster.admin.post("/api/v1/jobs", json=job).status_code == 409  # once: changes go through PATCH
    for client, key in ((cluster.m, "multi-m"), (cluster.a, "multi-a")):
        assert client.post("/api/v1/runs", json={"job": "multi", "key": key}).status_code == 201
    step = StepReport(job="multi", rank=1, step=3, ts=time.time(), duration_s=1.0)
    assert cluster.m.post("/api/v1/ingest", content=Batch(batch_id=0, steps=[step]).model_dump_json()).is_success
    summary = wait_until(lambda: cluster.server.services.jobs.summary("multi"), what="m's step taken")
    assert summary.ranks[0].last_step == 3 and cluster.metric("gpuwatch_ingest_foreign_job_reports_total") == 0
    with cluster.server.services.sessions() as session:
        assert session.query(AuditEntry).filter_by(action="job.register", target="multi").count() == 1


def test_a_checkpoint_time_no_reader_could_date_is_refused_and_the_run_stays_running(cluster: Cluster) -> None:
    run = cluster.a.post("/api/v1/runs", json={"job": "ck", "key": "ck-1"}).json()["id"]
    bad = {"exit_code": 1, "checkpoint": {"path": "/ckpt/step_10", "step": 10, "saved_at": 1e12}}
    refused = cluster.a.post(f"/api/v1/runs/{run}/exit", json=bad)
    assert refused.status_code == 422 and "saved_at" in refused.json()["detail"]
    assert cluster.a.get(f"/api/v1/runs/{run}").json()["state"] == "running"  # nothing stored
    good = {**bad, "checkpoint": {**bad["checkpoint"], "saved_at": time.time() - 60}}
    assert cluster.a.post(f"/api/v1/runs/{run}/exit", json=good).json()["incident_id"] is not None
