"""Two server replicas on one PostgreSQL (issue 8, acceptance 3, for the incident path): the same run
exit, the same silent node and the same Xid storm reaching both at once give one incident and one
decision each, never two."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from gpuwatch.config import Settings
from gpuwatch.protocol import Batch, Event, Heartbeat
from server.detect.silence import SilenceWatch
from server.store.migrate import upgrade
from server.store.models import Action, Incident
from tests.helpers import InProcessServer, new_token, wait_until

pytestmark = pytest.mark.postgres
Replicas = tuple[InProcessServer, InProcessServer]


@pytest.fixture
def replicas(postgres_url: str, tmp_path: Path) -> Iterator[tuple[InProcessServer, InProcessServer]]:
    upgrade(postgres_url)
    base = Settings(
        data_dir=tmp_path, database_url=postgres_url, incident_settle_s=0.05, node_timeout_s=1.0, hang_check_s=0.1
    )
    with InProcessServer(base) as a, InProcessServer(base.model_copy()) as b:
        yield a, b


def _together(*calls: Callable[[], httpx.Response]) -> list[httpx.Response]:
    """Run the calls at the same moment on threads; their results in order."""
    barrier = threading.Barrier(len(calls))
    results: list[httpx.Response] = [None] * len(calls)  # type: ignore[list-item]

    def go(i: int) -> None:
        barrier.wait()
        results[i] = calls[i]()

    threads = [threading.Thread(target=go, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return results


def _count(srv: InProcessServer, *where: Any) -> int:
    with srv.services.sessions() as s:
        return s.scalar(select(func.count()).select_from(Incident).where(*where))


def test_the_same_exit_at_both_replicas_is_one_incident_and_one_decision(replicas: Replicas) -> None:
    a, b = replicas
    token = new_token(a.services.settings.effective_database_url, "node-1")
    auth = {"Authorization": f"Bearer {token}"}
    run = httpx.post(f"{a.url}/api/v1/runs", json={"job": "j"}, headers=auth).json()["id"]
    body = {"exit_code": 143}
    answers = _together(
        lambda: httpx.post(f"{a.url}/api/v1/runs/{run}/exit", json=body, headers=auth, timeout=30),
        lambda: httpx.post(f"{b.url}/api/v1/runs/{run}/exit", json=body, headers=auth, timeout=30),
    )
    assert [r.status_code for r in answers] == [202, 202]
    wait_until(lambda: httpx.get(f"{a.url}/api/v1/runs/{run}/decision").json()["state"] == "decided", what="it")
    assert _count(a, Incident.run_id == run) == 1
    with a.services.sessions() as s:
        assert s.scalar(select(func.count()).select_from(Action).where(Action.kind == "decision")) == 1


def test_a_silent_node_seen_by_both_replicas_is_one_incident(replicas: Replicas) -> None:
    a, b = replicas
    token = new_token(a.services.settings.effective_database_url, "node-2")
    beat = Heartbeat(ts=time.time()).model_dump_json()
    assert httpx.post(f"{a.url}/api/v1/nodes/heartbeat", content=beat, headers={"Authorization": f"Bearer {token}"})
    # Replica b never heard from node-2 itself: it knows of the silence from the database.
    wait_until(lambda: _count(a, Incident.trigger == "node_silent") >= 1, what="the node_silent incident")
    now = time.time()
    for srv in (a, b, a, b):  # both watchers again and again, as their threads do: nothing new
        assert SilenceWatch(srv.services.incidents, started=now - 3600).check(now) == []
    assert _count(b, Incident.trigger == "node_silent") == 1


def test_an_xid_storm_through_both_replicas_is_one_incident(replicas: Replicas) -> None:
    a, b = replicas
    token = new_token(a.services.settings.effective_database_url, "node-3")
    auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def batch(n: int) -> bytes:
        ev = Event(stream="gpu:sim", seq=n, ts=time.time(), kind="xid", gpu=0, message="Xid 79", data={"xid": 79})
        return Batch(batch_id=n, events=[ev]).model_dump_json().encode()

    answers = _together(
        *[lambda n=n, srv=srv: httpx.post(f"{srv.url}/api/v1/ingest", content=batch(n), headers=auth, timeout=30)
          for n, srv in enumerate([a, b, a, b], start=1)]
    )  # fmt: skip
    assert [r.status_code for r in answers] == [200] * 4
    assert _count(a, Incident.trigger == "xid") == 1
