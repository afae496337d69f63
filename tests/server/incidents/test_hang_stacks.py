"""A hang's incident waits for its ranks' stacks (server/incidents/hang_stacks.py), over real HTTP against a
real server process: the suspect node is excluded only with node-local hardware evidence, the wait is
persisted (a server killed during it resumes it), and without answers the hang is decided all the same."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from gpuwatch.protocol import Batch, Event, JobProcess, RankStack, StackAnswer, StackFrame, StepReport, ThreadStack
from server.store.models import Incident
from tests.helpers import (
    Proc,
    free_port,
    migrated_sqlite,
    new_admin_token,
    new_token,
    start_server,
    stored_one,
    wait_until,
)

C10D = "/venv/lib/python3.11/site-packages/torch/distributed/distributed_c10d.py"
WAITING = (StackFrame(function="all_reduce", file="distributed_c10d.py", path=C10D, line=2800),)
BUSY = (StackFrame(function="busy_loop", file="train.py", path="/job/train.py", line=42),)


@dataclass
class Cluster:
    tmp: Path
    url: str
    port: int
    env: dict[str, str]
    a: httpx.Client
    b: httpx.Client
    server: Proc | None = None
    batch: int = 0

    def start(self, log: str = "server.log") -> None:
        self.server = start_server(self.tmp, self.port, self.tmp / log, self.env)

    def ingest(self, node: httpx.Client, **items: list) -> None:
        self.batch += 1
        assert node.post("/api/v1/ingest", content=Batch(batch_id=self.batch, **items).model_dump_json()).is_success

    def hang(self) -> tuple[int, dict]:
        """Job j: a run on node a, ranks 0-1 on a and 2-3 on b, whose steps stopped: (its run, its incident
        once it asked for stacks)."""
        run = self.a.post("/api/v1/runs", json={"job": "j", "key": "j-1"}).json()["id"]
        old = time.time() - 60
        for node, ranks in ((self.a, (0, 1)), (self.b, (2, 3))):
            self.ingest(
                node,
                processes=[JobProcess(job="j", pid=100 + r, rank=r, world_size=4, hang_timeout_s=0.5) for r in ranks],
                steps=[StepReport(job="j", rank=r, step=7, ts=old, duration_s=0.1) for r in ranks],
            )
        incident = wait_until(
            lambda: next((i for i in self.a.get("/api/v1/incidents").json() if i["stack_request"]), None),
            what="the hang's incident and its stack request",
        )
        return run, incident

    def answer(self, node: httpx.Client, *ranks: tuple[int, tuple[StackFrame, ...]]) -> None:
        (task,) = node.get("/api/v1/stacks/tasks").json()["tasks"]
        body = StackAnswer(
            ranks=[
                RankStack(rank=r, pid=100 + r, threads=[ThreadStack(name="MainThread", main=True, frames=list(f))])
                for r, f in ranks
            ]
        )
        assert node.post(f"/api/v1/stacks/tasks/{task['dump_id']}", content=body.model_dump_json()).status_code == 204

    def decision(self, run: int) -> dict:
        return wait_until(
            lambda: self.a.get(f"/api/v1/runs/{run}/decision", params={"wait": 1}).json()["decision"],
            timeout=30,
            what="the decision",
        )


def _cluster(tmp_path: Path, wait_s: float) -> Iterator[Cluster]:
    url = migrated_sqlite(tmp_path)
    port = free_port()
    admin = new_admin_token(url)
    clients = [
        httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {t}"}, timeout=10)
        for t in (new_token(url, "a"), new_token(url, "b"), admin)
    ]
    env = {
        "GPUWATCH_INCIDENT_SETTLE_S": "0.05",
        "GPUWATCH_HANG_CHECK_S": "0.1",
        "GPUWATCH_HANG_STACKS_WAIT_S": str(wait_s),
        "GPUWATCH_INCIDENT_RESUME_AFTER_S": "0.5",
    }
    c = Cluster(tmp_path, url, port, env, clients[0], clients[1])
    c.start()
    assert clients[2].post("/api/v1/jobs", json={"name": "j", "member_nodes": ["a", "b"]}).status_code == 201
    try:
        yield c
    finally:
        if c.server is not None:
            c.server.stop()
        for client in clients:
            client.close()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from _cluster(tmp_path, wait_s=20)


def _hang_incident(c: Cluster) -> dict:
    (incident,) = [i for i in c.a.get("/api/v1/incidents").json() if i["trigger"] == "hang"]
    return incident


def _incident(url: str) -> Incident:
    return stored_one(url, select(Incident).where(Incident.trigger == "hang"))


def test_a_suspect_node_with_a_hardware_xid_is_excluded(cluster: Cluster) -> None:
    run, _ = cluster.hang()
    xid = Event(stream="nvml", seq=1, ts=time.time(), kind="xid", gpu=2, message="fell off the bus", data={"xid": 79})
    cluster.ingest(cluster.b, events=[xid])  # during the run, on the suspect's node
    cluster.answer(cluster.a, (0, WAITING), (1, WAITING))
    cluster.answer(cluster.b, (2, BUSY), (3, WAITING))
    decision = cluster.decision(run)
    assert (decision["outcome"], decision["exclude_nodes"]) == ("restart_exclude_node", ["b"])
    d = _hang_incident(cluster)["diagnosis"]
    assert (d["reason"], d["node"], d["rank"]) == ("gpu_hardware", "b", 2)
    texts = [e["text"] for e in d["evidence"]]
    assert "rank 2 (b): busy_loop (train.py:42)" in texts
    assert "NVML Xid event (GPU 2): 79, fell off the bus" in texts
    assert "b logged a hardware Xid during the run" in d["explanation"]


def test_a_suspect_without_node_local_evidence_is_restarted_not_excluded(cluster: Cluster) -> None:
    run, _ = cluster.hang()
    cluster.answer(cluster.b, (2, BUSY), (3, WAITING))
    cluster.answer(cluster.a, (0, WAITING), (1, WAITING))
    decision = cluster.decision(run)
    assert (decision["outcome"], decision["exclude_nodes"]) == ("restart", [])
    d = _hang_incident(cluster)["diagnosis"]
    assert (d["reason"], d["node"], d["rank"]) == ("hang", "b", 2)
    assert "No hardware evidence on b: restart, not exclude." in d["explanation"]


def test_a_server_killed_during_the_wait_resumes_it_and_takes_the_answers(cluster: Cluster) -> None:
    run, incident = cluster.hang()
    assert cluster.server is not None
    cluster.server.stop(signal.SIGKILL)  # within the 20 s wait: its timer dies with it
    before = _incident(cluster.url)
    assert (before.state, before.due_at is not None, before.inputs["stacks"]["request"]) == (
        "open",
        True,
        incident["stack_request"],
    )
    cluster.start("server2.log")
    cluster.answer(cluster.a, (0, WAITING), (1, WAITING))
    cluster.answer(cluster.b, (2, WAITING), (3, BUSY))
    decision = cluster.decision(run)
    assert decision["outcome"] == "restart"
    d = _hang_incident(cluster)["diagnosis"]
    assert (d["reason"], d["node"], d["rank"]) == ("hang", "b", 3)
    assert _incident(cluster.url).inputs["stacks"]["request"] == incident["stack_request"], "the same request"


def test_without_answers_the_hang_is_decided_when_the_wait_ends(tmp_path: Path) -> None:
    for c in _cluster(tmp_path, wait_s=1.5):
        run, incident = c.hang()
        asked = time.monotonic()
        decision = c.decision(run)
        assert time.monotonic() - asked < 10, "decided soon after the wait, not never"
        assert decision["outcome"] == "restart"
        d = _hang_incident(c)["diagnosis"]
        assert (d["reason"], d["rank"]) == ("hang", None)
        assert "rank 0 (a): its node's agent did not answer in time" in [e["text"] for e in d["evidence"]]
        req = c.a.get(f"/api/v1/stacks/{incident['stack_request']}").json()
        assert req["state"] == "expired"
