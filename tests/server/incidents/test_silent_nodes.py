"""A run fails on a node whose agent is silent: what its kernel logged meanwhile is unseen. The server
waits for the agent (a persisted `due_at`, resumed by a restarted server), diagnoses with what it then
sent, says which agents were silent since when, and does not restart onto a node still silent (issue 22,
point 5). A node's agent silence is its `agent_seen_at`, written here where the ingest path writes it."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select, update

from gpuwatch.config import Settings
from server.store.db import make_engine, make_sessionmaker, transaction
from server.store.models import Incident, Job, Node
from tests.helpers import InProcessServer, free_port, migrated_sqlite, new_token, start_server, stored_one, wait_until

CUDA = "[rank0]: RuntimeError: CUDA error: unspecified launch failure"
XID = "[ 8812.113321] NVRM: Xid (PCI:0000:3a:00): 79, pid=4471, name=python, GPU has fallen off the bus."
TIMEOUT_S = 30.0  # node_timeout_s: an agent unheard this long is silent
STREAM = "run/train-1/stderr"


def _agent_heard(url: str, node: str, ago_s: float) -> None:
    engine = make_engine(url)
    try:
        with transaction(make_sessionmaker(engine)) as session:
            seen = datetime.fromtimestamp(time.time() - ago_s, UTC)
            session.execute(update(Node).where(Node.name == node).values(agent_seen_at=seen))
    finally:
        engine.dispose()


def _incident(url: str) -> Incident:
    return stored_one(url, select(Incident))


def _fail(api: httpx.Client, job: str = "train") -> tuple[int, int, float]:
    """A run of ``job`` on the client's node that logs a CUDA error and exits 1: (run, incident, when)."""
    run = api.post("/api/v1/runs", json={"job": job, "key": "train-1"}).json()["id"]
    line = {"stream": STREAM, "seq": 0, "ts": time.time(), "text": CUDA}
    assert api.post("/api/v1/ingest", json={"batch_id": 0, "logs": [line]}).is_success  # the supervisor's
    exited = time.monotonic()
    ended = api.post(f"/api/v1/runs/{run}/exit", json={"exit_code": 1, "streams": [STREAM]}).json()
    return run, ended["incident_id"], exited


def _decision(api: httpx.Client, run: int) -> dict:
    return wait_until(
        lambda: api.get(f"/api/v1/runs/{run}/decision", params={"wait": 1}).json()["decision"],
        what="the decision",
    )


@pytest.fixture
def fast(settings: Settings) -> Settings:
    # The watchdog checks hourly: no silence incident of its own, no sweep; the live timers decide.
    return settings.replace(
        incident_settle_s=0.05, node_timeout_s=TIMEOUT_S, hang_check_s=3600, recovery_silent_node_wait_s=1.0
    )


@pytest.fixture
def node(fast: Settings) -> Iterator[tuple[InProcessServer, httpx.Client]]:
    url = fast.effective_database_url
    token = new_token(url, "n1")
    with (
        InProcessServer(fast) as srv,
        httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as api,
    ):
        yield srv, api


def test_a_local_run_on_a_silent_node_waits_then_stops_flagged(fast: Settings, node: tuple) -> None:
    _, api = node
    url = fast.effective_database_url
    _agent_heard(url, "n1", 2 * TIMEOUT_S)
    run, incident_id, exited = _fail(api)
    decision = _decision(api, run)
    took = time.monotonic() - exited
    assert took >= 1.0, f"decided {took:.2f} s after the exit, before the wait for the silent agent ended"
    # Under the local executor the job can restart only on its own node, still silent: a clear stop.
    assert (decision["outcome"], decision["rule"], decision["exclude_nodes"]) == ("stop", "no_node", [])
    assert "agent is silent" in decision["why"]
    d = api.get(f"/api/v1/incidents/{incident_id}").json()["diagnosis"]
    assert d["reason"] == "cuda_error"
    assert "Node n1's agent was silent since" in d["explanation"] and "not restarted onto it" in d["explanation"]
    incident = _incident(url)
    assert incident.inputs["silent"]["still"] == ["n1"] and incident.due_at is None


def test_a_multi_node_run_restarts_without_its_silent_member(fast: Settings, node: tuple) -> None:
    srv, api = node
    url = fast.effective_database_url
    new_token(url, "n2")
    _agent_heard(url, "n1", 0)
    _agent_heard(url, "n2", 2 * TIMEOUT_S)
    api.post("/api/v1/runs", json={"job": "train", "key": "train-0"})
    with transaction(srv.services.sessions) as session:
        session.execute(update(Job).where(Job.name == "train").values(member_nodes=["n1", "n2"]))
    run, incident_id, _ = _fail(api)
    decision = _decision(api, run)
    assert (decision["outcome"], decision["exclude_nodes"]) == ("restart_exclude_node", ["n2"])
    assert "excluding n2 (agent silent" in decision["why"]
    d = api.get(f"/api/v1/incidents/{incident_id}").json()["diagnosis"]
    assert "Node n2's agent was silent since" in d["explanation"] and "n1's" not in d["explanation"]


def test_an_agent_that_speaks_during_the_wait_brings_the_xid_that_explains_the_failure(settings: Settings) -> None:
    slow = settings.replace(
        incident_settle_s=0.05, node_timeout_s=TIMEOUT_S, hang_check_s=3600, recovery_silent_node_wait_s=20.0
    )
    url = slow.effective_database_url
    token = new_token(url, "n1")
    with (
        InProcessServer(slow) as srv,
        httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as api,
    ):
        _agent_heard(url, "n1", 2 * TIMEOUT_S)
        run, incident_id, exited = _fail(api)
        wait_until(lambda: _incident(url).inputs.get("silent"), what="the wait for the silent agent")
        assert api.get(f"/api/v1/incidents/{incident_id}").json()["diagnosis"] is None
        # The agent is back: its backlog carries the Xid logged while it was down, then it beats.
        at_exit = time.time() - (time.monotonic() - exited)  # logged as the run failed
        xid = {"stream": "kernel", "seq": 0, "ts": at_exit, "text": XID}
        assert api.post("/api/v1/ingest", json={"batch_id": 1, "logs": [xid]}).is_success
        assert api.post("/api/v1/nodes/heartbeat", json={"ts": time.time()}).is_success
        decision = _decision(api, run)
        assert time.monotonic() - exited < 20.0, "decided when the agent spoke, not at the end of the wait"
        d = api.get(f"/api/v1/incidents/{incident_id}").json()["diagnosis"]
        assert (d["reason"], d["node"]) == ("gpu_hardware", "n1")
        assert "it spoke again before the diagnosis" in d["explanation"]
        assert (decision["outcome"], decision["rule"]) == ("stop", "no_node")  # the blamed GPU's node
        assert "agent is silent" not in decision["why"]


@pytest.mark.slow
def test_a_server_killed_during_the_wait_resumes_it_after_a_restart(tmp_path: Path) -> None:
    url = migrated_sqlite(tmp_path)
    port = free_port()
    token = new_token(url, "n1")
    env = {
        "GPUWATCH_INCIDENT_SETTLE_S": "0.05",
        "GPUWATCH_NODE_TIMEOUT_S": str(TIMEOUT_S),
        "GPUWATCH_RECOVERY_SILENT_NODE_WAIT_S": "3",
        "GPUWATCH_INCIDENT_RESUME_AFTER_S": "0.5",
        "GPUWATCH_HANG_CHECK_S": "0.2",
    }
    api = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"}, timeout=10)
    server = start_server(tmp_path, port, tmp_path / "server.log", env)
    try:
        _agent_heard(url, "n1", 2 * TIMEOUT_S)
        run, _, _ = _fail(api)
        wait_until(lambda: _incident(url).inputs.get("silent"), what="the wait for the silent agent")
    finally:
        server.stop(signal.SIGKILL)  # within the 3 s wait: its timer dies with it
    incident = _incident(url)
    assert (incident.state, incident.due_at is not None, "still" in incident.inputs["silent"]) == ("open", True, False)
    server = start_server(tmp_path, port, tmp_path / "server2.log", env)
    try:
        decision = _decision(api, run)
    finally:
        server.stop()
        api.close()
    assert (decision["rule"], "agent is silent" in decision["why"]) == ("no_node", True)
    incident = _incident(url)
    assert (incident.state, incident.inputs["silent"]["still"]) == ("done", ["n1"])  # a stop: nothing to carry out
