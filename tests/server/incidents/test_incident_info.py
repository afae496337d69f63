"""`gpuwatch_incident_info`: the most recent incidents as series, read from the database at each scrape."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from gpuwatch.taxonomy import REASONS
from server.incidents.info import IncidentCollector
from server.store.db import make_engine, make_sessionmaker, transaction
from server.store.migrate import upgrade
from server.store.models import Action, Diagnosis, Incident, Job, Node
from tests.helpers import InProcessServer, new_token, wait_until


def _info(text: str) -> dict[str, dict[str, str]]:
    """incident id → the labels of its gpuwatch_incident_info sample (each must be 1)."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "gpuwatch_incident_info":
                assert s.value == 1.0
                out[s.labels["incident"]] = s.labels
    return out


def _diagnosis(incident_id: int, reason: str, node: str | None = None) -> Diagnosis:
    info = REASONS[reason]
    return Diagnosis(
        incident_id=incident_id,
        reason=reason,
        category=info.category,
        action=info.action,
        confidence=0.9,
        source="rules",
        node_name=node,
    )


def test_the_50_latest_incidents_with_their_latest_diagnosis_and_decision(empty_db_url: str) -> None:
    upgrade(empty_db_url)
    engine = make_engine(empty_db_url)
    try:
        sessions = make_sessionmaker(engine)
        with transaction(sessions) as s:
            node, other = Node(name="gpu-node-1"), Node(name="gpu-node-2")
            job = Job(name="llama")
            s.add_all([node, other, job])
            s.flush()
            ids = []
            for _ in range(52):
                incident = Incident(trigger="xid", node_id=node.id, state="open", opened_at=datetime.now(UTC))
                s.add(incident)
                s.flush()
                ids.append(incident.id)
            failed = s.get(Incident, ids[-1])
            assert failed is not None
            failed.trigger, failed.job_id, failed.state = "run_failed", job.id, "decided"
            # Rediagnosed: the later diagnosis counts; it blames the other node. Decided twice: the later wins.
            s.add(_diagnosis(ids[-1], "nccl_timeout"))
            s.flush()
            s.add(_diagnosis(ids[-1], "gpu_hardware", node="gpu-node-2"))
            s.add(Action(incident_id=ids[-1], job_id=job.id, kind="decision", params={"outcome": "restart"}))
            s.add(Action(incident_id=ids[-1], job_id=job.id, kind="exclude_node", params={"node": "gpu-node-2"}))
            s.flush()
            s.add(Action(incident_id=ids[-1], job_id=job.id, kind="decision", params={"outcome": "stop"}))
            s.add(_diagnosis(ids[-2], "host_oom"))  # diagnosed, no decision: the diagnosis's action
        registry = CollectorRegistry()
        registry.register(IncidentCollector(sessions))
        info = _info(generate_latest(registry).decode())
    finally:
        engine.dispose()
    assert set(info) == {str(i) for i in ids[-50:]}
    assert info[str(ids[-1])] == {
        "incident": str(ids[-1]),
        "job": "llama",
        "node": "gpu-node-2",
        "trigger": "run_failed",
        "reason": "gpu_hardware",
        "category": "infrastructure",
        "action": "stop",
        "state": "decided",
    }
    assert (info[str(ids[-2])]["reason"], info[str(ids[-2])]["action"]) == ("host_oom", "notify")
    assert info[str(ids[-3])] == {
        "incident": str(ids[-3]),
        "job": "",
        "node": "gpu-node-1",
        "trigger": "xid",
        "reason": "",
        "category": "",
        "action": "",
        "state": "open",
    }


def test_a_failed_run_shows_as_an_incident_on_metrics(live_server: InProcessServer) -> None:
    url = live_server.services.settings.effective_database_url
    auth = {"Authorization": f"Bearer {new_token(url, 'gpu-node-7')}"}
    base = live_server.url
    assert _info(httpx.get(f"{base}/metrics").text) == {}
    run = httpx.post(f"{base}/api/v1/runs", json={"job": "bert-ft"}, headers=auth)
    assert run.status_code == 201, run.text
    exit_ = httpx.post(f"{base}/api/v1/runs/{run.json()['id']}/exit", json={"exit_code": 1}, headers=auth)
    assert exit_.status_code == 202, exit_.text
    incident_id = str(exit_.json()["incident_id"])

    def acting() -> dict[str, str] | None:  # a restart decided, waiting for the job's supervisor to restart it
        labels = _info(httpx.get(f"{base}/metrics").text).get(incident_id)
        return labels if labels and labels["state"] == "acting" else None

    labels = wait_until(acting, timeout=10, what="the decided incident on /metrics", every=0.1)
    incident = httpx.get(f"{base}/api/v1/incidents/{incident_id}").json()
    [decision] = [a for a in incident["actions"] if a["kind"] == "decision"]
    d = incident["diagnosis"]
    assert labels == {
        "incident": incident_id,
        "job": "bert-ft",
        "node": d["node"] or "gpu-node-7",
        "trigger": "run_failed",
        "reason": d["reason"],
        "category": REASONS[d["reason"]].category,
        "action": decision["params"]["outcome"],
        "state": "acting",
    }
