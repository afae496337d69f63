"""`gpuwatch_incident_open`: each open incident as a series naming its job, node and run, read from
the database at each scrape of a real server: it goes when the incident closes, outlives a server
restart once, and is capped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from gpuwatch.config import Settings
from server.incidents.open_series import LIMIT, OPEN_FOR
from server.store.db import make_engine, make_sessionmaker, transaction
from server.store.models import Incident, Node
from tests.helpers import InProcessServer, new_token, wait_until


def _scrape(base: str) -> tuple[dict[str, dict[str, str]], float]:
    """incident id → the labels of its gpuwatch_incident_open sample (each must be 1), and the overflow."""
    series, overflow = {}, -1.0
    for family in text_string_to_metric_families(httpx.get(f"{base}/metrics").text):
        for s in family.samples:
            if s.name == "gpuwatch_incident_open":
                assert s.value == 1.0
                assert s.labels["incident"] not in series, "one series per incident"
                series[s.labels["incident"]] = s.labels
            elif s.name == "gpuwatch_incident_open_overflow":
                overflow = s.value
    return series, overflow


def _fail_a_run(base: str, auth: dict[str, str], job: str) -> tuple[str, str]:
    """A run of ``job`` that exits 1: (its run id, its incident id)."""
    run = httpx.post(f"{base}/api/v1/runs", json={"job": job}, headers=auth)
    assert run.status_code == 201, run.text
    run_id = str(run.json()["id"])
    exit_ = httpx.post(f"{base}/api/v1/runs/{run_id}/exit", json={"exit_code": 1}, headers=auth)
    assert exit_.status_code == 202, exit_.text
    return run_id, str(exit_.json()["incident_id"])


def test_a_failed_run_is_a_series_until_resolved_and_survives_a_restart(settings: Settings) -> None:
    url = settings.effective_database_url
    auth = {"Authorization": f"Bearer {new_token(url, 'gpu-node-7')}"}
    with InProcessServer(settings) as srv:
        assert _scrape(srv.url) == ({}, 0.0)
        run_id, incident_id = _fail_a_run(srv.url, auth, "bert-ft")

        def diagnosed() -> dict[str, str] | None:
            labels = _scrape(srv.url)[0].get(incident_id)
            return labels if labels and labels["reason"] else None

        labels = wait_until(diagnosed, timeout=10, what="the diagnosed incident on /metrics", every=0.1)
        assert (labels["job"], labels["run"], labels["trigger"]) == ("bert-ft", run_id, "run_failed")
        assert labels["node"] and labels["category"]
    # A restarted server exports it again from the database, once.
    with InProcessServer(settings) as srv:
        series, overflow = _scrape(srv.url)
        assert series == {incident_id: labels} and overflow == 0.0
        # The job's next run succeeds: the incident is resolved and its series goes.
        run = httpx.post(f"{srv.url}/api/v1/runs", json={"job": "bert-ft"}, headers=auth)
        assert run.status_code == 201, run.text
        done = httpx.post(f"{srv.url}/api/v1/runs/{run.json()['id']}/exit", json={"exit_code": 0}, headers=auth)
        assert done.status_code in (200, 202), done.text
        wait_until(lambda: _scrape(srv.url) == ({}, 0.0), timeout=10, what="the resolved incident gone", every=0.1)


def test_the_series_are_capped_the_rest_counted_and_old_ones_dropped(tmp_path: Path, db_url: str) -> None:
    """On SQLite and PostgreSQL: the newest LIMIT open incidents of the last OPEN_FOR are series."""
    with InProcessServer(Settings(data_dir=tmp_path, database_url=db_url)) as server:
        _cap(server, db_url)


def _cap(live_server: InProcessServer, url: str) -> None:
    engine = make_engine(url)
    now = datetime.now(UTC)
    try:
        with transaction(make_sessionmaker(engine)) as s:
            node = Node(name="gpu-node-3")
            s.add(node)
            s.flush()
            s.add(Incident(trigger="xid", node_id=node.id, state="open", opened_at=now - OPEN_FOR * 2))
            s.add(Incident(trigger="xid", node_id=node.id, state="resolved", opened_at=now, closed_at=now))
            s.flush()
            ids = []
            for _ in range(LIMIT + 7):
                incident = Incident(trigger="xid", node_id=node.id, state="open", opened_at=now - timedelta(hours=1))
                s.add(incident)
                s.flush()
                ids.append(str(incident.id))
    finally:
        engine.dispose()
    series, overflow = _scrape(live_server.url)
    assert set(series) == set(ids[-LIMIT:]), "the newest LIMIT open incidents"
    assert overflow == 7.0
    assert series[ids[-1]] == {
        "incident": ids[-1],
        "job": "",
        "node": "gpu-node-3",
        "run": "",
        "trigger": "xid",
        "reason": "",
        "category": "",
    }
