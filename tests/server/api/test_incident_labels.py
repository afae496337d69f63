"""An admin confirms or corrects an incident's diagnosis (issue 19, "learn from on-call"): the diagnosis
is kept, the label stored beside it, audited, and counted in gpuwatch_diagnosis_corrections_total{from,to},
which a restarted server still reports (it is read from the database)."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from gpuwatch.config import Settings
from gpuwatch.protocol import Api, Batch, LogLine
from tests.helpers import InProcessServer, new_admin_token, new_token, wait_until

#: Lines no rule knows: the server diagnoses the run `unknown`.
UNKNOWN_LINES = [
    "2026-11-26 03:12:09 step 8120 loss 1.842 lr 2.0e-4",
    "2026-11-26 03:12:41 FATAL lustre client evicted by MDS mds-07 while writing shard 113 of /scratch/ckpt/step_8120",
    "2026-11-26 03:12:41 trainer exiting with status 1",
]


def failed_run(srv: InProcessServer, node_token: str, lines: list[str], job: str = "llama-70b") -> int:
    """A run of ``job`` that logged ``lines`` and exited 1; its incident's id, once diagnosed."""
    auth = {"Authorization": f"Bearer {node_token}"}
    with httpx.Client(base_url=srv.url, headers=auth, timeout=10) as node:
        run = node.post(Api.RUNS, json={"job": job}).json()
        stream = f"run/{run['id']}/stderr"
        batch = Batch(
            batch_id=int(time.time() * 1000),
            logs=[LogLine(stream=stream, seq=i, ts=time.time(), text=t) for i, t in zip(itertools.count(), lines)],
        )
        assert node.post(Api.INGEST, content=batch.model_dump_json()).status_code == 200
        ended = node.post(Api.RUN_EXIT.format(run_id=run["id"]), json={"exit_code": 1, "streams": [stream]}).json()
        incident_id = ended["incident_id"]
        wait_until(
            lambda: node.get(Api.INCIDENT.format(incident_id=incident_id)).json()["diagnosis"],
            what="the incident's diagnosis",
        )
        return incident_id


def corrections(base: str) -> dict[tuple[str, str], float]:
    families = {f.name: f for f in text_string_to_metric_families(httpx.get(f"{base}/metrics").text)}
    return {
        (s.labels["from"], s.labels["to"]): s.value
        for s in families["gpuwatch_diagnosis_corrections"].samples
        if s.name == "gpuwatch_diagnosis_corrections_total"
    }


def test_an_admin_corrects_a_diagnosis_which_is_kept_audited_and_counted_across_a_restart(
    tmp_path: Path, db_url: str
) -> None:
    settings = Settings(data_dir=tmp_path, database_url=db_url, incident_settle_s=0.05, token_cache_s=0.2)
    node_token, admin_token = new_token(db_url, "gpu-node-03"), new_admin_token(db_url, "alice")
    admin = {"Authorization": f"Bearer {admin_token}"}
    with InProcessServer(settings) as srv:
        incident_id = failed_run(srv, node_token, UNKNOWN_LINES)
        path = Api.INCIDENT_LABEL.format(incident_id=incident_id)
        assert corrections(srv.url) == {}
        made = httpx.post(
            srv.url + path, json={"reason": "storage_error", "note": "Lustre eviction on the MDS"}, headers=admin
        )
        assert made.status_code == 201, made.text
        label = made.json()
        assert (label["diagnosed"], label["reason"], label["confirmed"]) == ("unknown", "storage_error", False)
        assert label["by"].startswith("admin alice (") and admin_token not in label["by"]
        incident = httpx.get(srv.url + Api.INCIDENT.format(incident_id=incident_id)).json()
        assert incident["diagnosis"]["reason"] == "unknown", "the machine's diagnosis is kept as it was"
        assert incident["label"]["reason"] == "storage_error"
        assert incident["label"]["note"] == "Lustre eviction on the MDS"

        # A second incident, confirmed: counted from=to.
        confirmed_id = failed_run(srv, node_token, UNKNOWN_LINES, job="bert")
        confirm = srv.url + Api.INCIDENT_LABEL.format(incident_id=confirmed_id)
        ok = httpx.post(confirm, json={"reason": "unknown"}, headers=admin)
        assert ok.status_code == 201 and ok.json()["confirmed"] is True
        assert corrections(srv.url) == {("unknown", "storage_error"): 1.0, ("unknown", "unknown"): 1.0}

        audit = httpx.get(srv.url + "/api/v1/audit", params={"action": "incident.label"}, headers=admin).json()
        seen = [(e["target"], e["params"]["diagnosed"], e["params"]["reason"], e["params"]["verdict"]) for e in audit]
        assert seen == [
            (f"incident {confirmed_id}", "unknown", "unknown", "confirmed"),
            (f"incident {incident_id}", "unknown", "storage_error", "corrected"),
        ]
        assert audit[1]["actor"] == label["by"]

    with InProcessServer(settings) as again:  # the counter is the database's, not the process's
        assert corrections(again.url) == {("unknown", "storage_error"): 1.0, ("unknown", "unknown"): 1.0}


def test_a_label_is_refused_for_a_reason_outside_the_taxonomy_an_unknown_incident_and_a_node_token(
    settings: Settings,
) -> None:
    settings = settings.replace(incident_settle_s=0.05)
    url = settings.effective_database_url
    node_token, admin_token = new_token(url, "gpu-node-04"), new_admin_token(url, "bob")
    admin = {"Authorization": f"Bearer {admin_token}"}
    with InProcessServer(settings) as srv:
        incident_id = failed_run(srv, node_token, UNKNOWN_LINES)
        path = srv.url + Api.INCIDENT_LABEL.format(incident_id=incident_id)

        bad = httpx.post(path, json={"reason": "cosmic_rays"}, headers=admin)
        assert bad.status_code == 422 and "not in the failure taxonomy" in bad.json()["detail"]
        assert "storage_error" in bad.json()["detail"], "the error lists the reasons that are"
        too_long = httpx.post(path, json={"reason": "storage_error", "note": "x" * 5000}, headers=admin)
        assert too_long.status_code == 422
        nowhere = srv.url + Api.INCIDENT_LABEL.format(incident_id=99_999)
        missing = httpx.post(nowhere, json={"reason": "hang"}, headers=admin)
        assert missing.status_code == 404 and "no incident 99999" in missing.json()["detail"]
        as_node = httpx.post(path, json={"reason": "storage_error"}, headers={"Authorization": f"Bearer {node_token}"})
        assert as_node.status_code == 403 and "admin token" in as_node.json()["detail"]
        assert httpx.post(path, json={"reason": "storage_error"}).status_code == 401

        # Nothing of the refused labels was stored, audited or counted.
        assert httpx.get(srv.url + Api.INCIDENT.format(incident_id=incident_id)).json()["label"] is None
        assert httpx.get(srv.url + "/api/v1/audit", params={"action": "incident.label"}, headers=admin).json() == []
        assert corrections(srv.url) == {}
