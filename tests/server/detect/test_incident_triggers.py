"""Incidents opened without a failed run: a fatal Xid arriving from a node, and a node going silent."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gpuwatch.config import Settings
from gpuwatch.protocol import Batch, Event, Heartbeat, LogLine
from tests.helpers import InProcessServer, Proc, migrated_sqlite, new_token, wait_until


@pytest.fixture
def server(tmp_path: Path) -> Iterator[InProcessServer]:
    url = migrated_sqlite(tmp_path)
    settings = Settings(
        data_dir=tmp_path,
        database_url=url,
        incident_settle_s=0.05,
        node_timeout_s=0.6,
        hang_check_s=0.05,
        incident_dedupe_s=600,
    )
    with InProcessServer(settings) as srv:
        yield srv


def _client(srv: InProcessServer, node: str) -> httpx.Client:
    token = new_token(srv.services.settings.effective_database_url, node)
    return httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {token}"}, timeout=10)


def _post(client: httpx.Client, batch: Batch) -> None:
    resp = client.post("/api/v1/ingest", content=batch.model_dump_json(), headers={"Content-Type": "application/json"})
    assert resp.status_code == 200, resp.text


def _incidents(srv: InProcessServer, trigger: str) -> list[dict]:
    return [i for i in httpx.get(f"{srv.url}/api/v1/incidents").json() if i["trigger"] == trigger]


def _diagnosed(srv: InProcessServer, trigger: str, count: int = 1) -> list[dict]:
    def check() -> list[dict] | None:
        found = _incidents(srv, trigger)
        return found if len(found) >= count and all(i["diagnosis"] for i in found) else None

    return wait_until(check, timeout=10, what=f"{count} diagnosed {trigger} incident(s)")


def test_fatal_nvml_xid_opens_one_incident_per_storm(server: InProcessServer) -> None:
    now = time.time()
    with _client(server, "node-x") as node:
        xid = Event(
            stream="gpu:sim", seq=0, ts=now, kind="xid", gpu=3, message="GPU 3 fell off the bus", data={"xid": 79}
        )
        _post(node, Batch(batch_id=1, events=[xid]))
        (incident,) = _diagnosed(server, "xid")
        d = incident["diagnosis"]
        assert (d["reason"], d["node"], d["action"]) == ("gpu_hardware", "node-x", "restart_exclude_node")
        assert d["evidence"][0]["file"] == "nvml-events"
        assert d["evidence"][0]["text"].startswith("NVML Xid event (GPU 3): 79")
        # More Xids from the same node within the window: the same incident, not a new one each.
        more = [xid.model_copy(update={"seq": n, "ts": now + n}) for n in range(1, 4)]
        _post(node, Batch(batch_id=2, events=more))
        # An application Xid (13) is not a node failure and opens nothing.
        app = xid.model_copy(update={"seq": 9, "data": {"xid": 13}, "message": "Graphics SM exception"})
        _post(node, Batch(batch_id=3, events=[app]))
    with _client(server, "node-y") as other:
        line = "[ 912.4] NVRM: Xid (PCI:0000:3a:00): 48, pid=1234, name=python, An uncorrectable double bit error"
        stale = LogLine(stream="kernel", seq=0, ts=now - 3600, text=line.replace("48", "79"))
        fresh = LogLine(stream="kernel", seq=1, ts=now, text=line)
        _post(other, Batch(batch_id=1, logs=[stale, fresh]))
        incidents = _diagnosed(server, "xid", count=2)
    assert len(incidents) == 2, "one per node: the storm on node-x stayed one incident"
    y = next(i for i in incidents if i["diagnosis"]["node"] == "node-y")
    assert y["diagnosis"]["reason"] == "gpu_hardware"
    assert any(e["text"] == line and e["file"] == "kernel" for e in y["diagnosis"]["evidence"])
    metrics = httpx.get(f"{server.url}/metrics").text
    assert 'gpuwatch_incidents_total{trigger="xid"} 2.0' in metrics


def test_stale_kernel_xid_opens_nothing(server: InProcessServer) -> None:
    """A freshly started agent replays the kernel's buffer: an Xid from an hour ago is history, not news."""
    with _client(server, "node-z") as node:
        old = LogLine(stream="kernel", seq=0, ts=time.time() - 3600, text="NVRM: Xid (PCI:0000:3a:00): 79, pid=1")
        _post(node, Batch(batch_id=1, logs=[old]))
        assert node.get("/api/v1/logs", params={"node": "node-z"}).status_code == 200
    assert _incidents(server, "xid") == []


def test_silent_node_opens_node_failure_once_per_silence(server: InProcessServer) -> None:
    with _client(server, "node-s") as node:
        beat = Heartbeat(ts=time.time()).model_dump_json()
        assert node.post("/api/v1/nodes/heartbeat", content=beat).status_code == 204
        (incident,) = _diagnosed(server, "node_silent")
        d = incident["diagnosis"]
        assert (d["reason"], d["category"], d["node"], d["source"]) == (
            "node_failure",
            "infrastructure",
            "node-s",
            "rules",
        )
        assert "no data from node node-s" in d["evidence"][0]["text"]
        # Still silent: no second incident. Back, then silent again: a new one.
        assert node.post("/api/v1/nodes/heartbeat", content=beat).status_code == 204
        _diagnosed(server, "node_silent", count=2)
    assert len(_incidents(server, "node_silent")) == 2


@pytest.mark.slow
def test_agent_ships_a_fatal_kernel_xid_at_once(server: InProcessServer, tmp_path: Path) -> None:
    """The agent flushes every 30 s here, but a fatal Xid line is shipped (and an incident opened) at once."""
    token = new_token(server.services.settings.effective_database_url, "node-k")
    kern = tmp_path / "kern.log"
    kern.write_text("[    1.0] Linux version 6.1.0\n")
    args = ["--server", server.url, "--token", token, "--node", "node-k", "--simulate", "1", "--client-port", "0"]
    agent = Proc(
        ["agent", *args, "--flush", "30", "--kernel-log", str(kern), "--data-dir", str(tmp_path)],
        tmp_path / "agent.log",
    )
    try:
        wait_until(lambda: httpx.get(f"{server.url}/api/v1/gpus").json(), what="the agent's registration")
        with open(kern, "a") as f:
            f.write("[  912.4] NVRM: Xid (PCI:0000:3a:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n")
        appended = time.monotonic()
        (incident,) = _diagnosed(server, "xid")
        print(f"xid incident diagnosed {time.monotonic() - appended:.2f}s after the kernel line")
        assert time.monotonic() - appended < 10, "well before the 30 s flush"
        assert incident["diagnosis"]["node"] == "node-k"
    finally:
        agent.stop()
