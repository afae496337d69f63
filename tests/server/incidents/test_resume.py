"""A server killed in the middle of an incident does not lose it: the incident's next step and when it
is due are in the database, and the restarted server takes it (issue 22)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from server.store.db import make_engine, make_sessionmaker
from server.store.models import Action, Diagnosis, Incident
from tests.helpers import free_port, migrated_sqlite, new_token, start_server, wait_until

CUDA_ERROR = "RuntimeError: CUDA error: an illegal memory access was encountered"
ENV = {"GPUWATCH_INCIDENT_SETTLE_S": "3", "GPUWATCH_INCIDENT_RESUME_AFTER_S": "0.5", "GPUWATCH_HANG_CHECK_S": "0.2"}


def _incident(url: str) -> tuple[Incident, int, int]:
    """The one incident, its diagnoses and its decisions."""
    with make_sessionmaker(make_engine(url))() as session:
        (incident,) = session.scalars(select(Incident)).all()
        diagnoses = len(session.scalars(select(Diagnosis).where(Diagnosis.incident_id == incident.id)).all())
        decisions = len(
            session.scalars(select(Action).where(Action.incident_id == incident.id, Action.kind == "decision")).all()
        )
        return incident, diagnoses, decisions


@pytest.mark.slow
def test_a_failure_accepted_by_a_server_killed_before_diagnosing_it_is_decided_once_after_a_restart(
    tmp_path: Path,
) -> None:
    url = migrated_sqlite(tmp_path)
    port = free_port()
    token = new_token(url, "n1")
    api = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"}, timeout=10)
    server = start_server(tmp_path, port, tmp_path / "server.log", ENV)
    try:
        run = api.post("/api/v1/runs", json={"job": "train", "key": "train-1"}).json()["id"]
        line = {"stream": "run/train-1/stderr", "seq": 0, "ts": time.time(), "text": CUDA_ERROR}
        assert api.post("/api/v1/ingest", json={"batch_id": 0, "logs": [line]}).is_success
        assert api.post(f"/api/v1/runs/{run}/exit", json={"exit_code": 1, "streams": ["run/train-1/stderr"]}).is_success
    finally:
        server.stop(signal.SIGKILL)  # within the 3 s settle: the diagnosis timer dies with it
    incident, diagnoses, decisions = _incident(url)
    assert (incident.state, diagnoses, decisions) == ("open", 0, 0) and incident.due_at is not None
    server = start_server(tmp_path, port, tmp_path / "server2.log", ENV)
    try:
        # decided, then acting at once: the local job's restart waits for its supervisor (the decision is out)
        wait_until(lambda: _incident(url)[0].state == "acting", timeout=30, what="the restarted server's decision")
        decision = api.get(f"/api/v1/runs/{run}/decision").json()
    finally:
        server.stop()
    incident, diagnoses, decisions = _incident(url)
    assert (diagnoses, decisions, incident.due_at) == (1, 1, None)
    assert decision["state"] == "decided" and decision["decision"]["restart"] is True
    with make_sessionmaker(make_engine(url))() as session:  # diagnosed from the evidence, after the restart
        assert session.scalar(select(Diagnosis.reason)) == decision["decision"]["reason"] != "unknown"
    assert "resuming its overdue next step" in (tmp_path / "server2.log").read_text()
