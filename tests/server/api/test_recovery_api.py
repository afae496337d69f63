"""The recovery API's contract: idempotent run starts and exits, the pause switch (an admin's), bad input
refused."""

from __future__ import annotations

import time
from datetime import datetime

import httpx
import pytest

from gpuwatch.config import Settings
from tests.helpers import InProcessServer, new_admin_token, new_token, wait_until


@pytest.fixture
def client(settings: Settings) -> httpx.Client:
    """A node's client (runs); its ``admin`` attribute is an admin's (the pause switch)."""
    fast = settings.replace(incident_settle_s=0.05, max_body_bytes=1024 * 1024)
    with InProcessServer(fast) as srv:
        token = new_token(fast.effective_database_url, "node-p")
        admin = new_admin_token(fast.effective_database_url)
        with (
            httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as c,
            httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {admin}"}, timeout=10) as a,
        ):
            c.admin = a  # type: ignore[attr-defined]
            yield c


def _decision(client: httpx.Client, run_id: int) -> dict:
    got = wait_until(
        lambda: (
            (d := client.get(f"/api/v1/runs/{run_id}/decision", params={"wait": 1}).json())["state"] == "decided" and d
        ),
        what="a decision",
    )
    return got["decision"]


def test_start_and_exit_are_idempotent(client: httpx.Client) -> None:
    first = client.post("/api/v1/runs", json={"job": "j", "key": "j-1"})
    again = client.post("/api/v1/runs", json={"job": "j", "key": "j-1"})
    assert (first.status_code, again.status_code) == (201, 200) and first.json() == again.json()
    run = first.json()["id"]
    ended = client.post(f"/api/v1/runs/{run}/exit", json={"exit_code": 1}).json()
    replay = client.post(f"/api/v1/runs/{run}/exit", json={"exit_code": 1}).json()
    assert ended == replay and ended["incident_id"] is not None
    assert len(client.get("/api/v1/incidents").json()) == 1


def test_pause_stops_restarts_but_decisions_are_still_recorded(client: httpx.Client) -> None:
    assert client.admin.post("/api/v1/recovery/pause", json={"paused": True}).json()["paused"] is True
    run = client.post("/api/v1/runs", json={"job": "p"}).json()["id"]
    client.post(f"/api/v1/runs/{run}/exit", json={"exit_code": 143, "signal": None})
    decision = _decision(client, run)
    assert (decision["reason"], decision["restart"], decision["rule"]) == ("preempted", False, "paused")
    client.admin.post("/api/v1/recovery/pause", json={"paused": False})
    run2 = client.post("/api/v1/runs", json={"job": "p"}).json()["id"]
    client.post(f"/api/v1/runs/{run2}/exit", json={"exit_code": 143})
    assert _decision(client, run2)["restart"] is True


@pytest.mark.parametrize(
    ("path", "body", "needle"),
    [
        ("/api/v1/runs", {"job": "x", "policy": {"max_restarts": -1}}, "max_restarts"),
        ("/api/v1/runs", {"job": "x", "policy": {"bogus": 1}}, "bogus"),
        ("/api/v1/runs", {"job": "x", "policy": {"overrides": {"gpu_oom": "reboot"}}}, "reboot"),
        ("/api/v1/recovery/pause", {"paused": "maybe"}, "paused"),
    ],
)
def test_bad_input_is_refused_with_the_reason(client: httpx.Client, path: str, body: dict, needle: str) -> None:
    resp = (client.admin if "pause" in path else client).post(path, json=body)
    assert resp.status_code == 422 and needle in resp.text


def test_supervisor_decision_outside_the_taxonomy_is_refused_and_nothing_recorded(client: httpx.Client) -> None:
    run = client.post("/api/v1/runs", json={"job": "r"}).json()["id"]
    bad = {"reason": "restart", "action": "restart", "rule": "restart", "restart": True, "at": time.time()}
    resp = client.post(f"/api/v1/runs/{run}/exit", json={"exit_code": 1, "diagnosis": {"reason": "x"}, "decision": bad})
    assert resp.status_code == 422 and "taxonomy" in resp.text
    assert client.get("/api/v1/incidents").json() == []
    assert client.get(f"/api/v1/runs/{run}/decision").json()["state"] == "pending", "the run is still open"
    assert client.get("/api/v1/runs/999/decision").status_code == 404
    assert httpx.post(f"{client.base_url}/api/v1/recovery/pause", json={"paused": True}).status_code == 401


def test_an_exclusion_is_released_when_its_time_is_up(settings: Settings) -> None:
    """A supervisor's own decision (server away at the time) excludes the node; the watchdog releases it
    after `recovery_exclude_ttl_s`, and the gauge goes back to 0."""
    config = settings.replace(recovery_exclude_ttl_s=0.5, hang_check_s=0.05)
    with InProcessServer(config) as srv:
        token = new_token(config.effective_database_url, "node-x")
        with httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {token}"}, timeout=10) as c:
            run = c.post("/api/v1/runs", json={"job": "x", "key": "x-1"}).json()["id"]
            diagnosis = {"reason": "gpu_hardware", "node": "node-x", "evidence": [], "source": "rules"}
            decision = {
                "reason": "gpu_hardware",
                "action": "restart_exclude_node",
                "rule": "restart",
                "restart": True,
                "exclude_nodes": ["node-x"],
                "at": time.time(),
                "node": "node-x",
            }
            body = {"exit_code": 1, "diagnosis": diagnosis, "decision": decision, "restarted": True}
            assert c.post(f"/api/v1/runs/{run}/exit", json=body).status_code == 202
            excluded = c.get("/api/v1/recovery").json()["excluded"]
            assert [e["node"] for e in excluded] == ["node-x"]
            assert 'gpuwatch_excluded_nodes{node="node-x"} 1.0' in c.get("/metrics").text
            wait_until(lambda: c.get("/api/v1/recovery").json()["excluded"] == [], what="the release")
            released = 'gpuwatch_excluded_nodes{node="node-x"} 0.0'
            wait_until(lambda: released in c.get("/metrics").text, what="the gauge back at 0")
            (incident,) = c.get("/api/v1/incidents").json()
            assert {a["kind"]: a["actor"] for a in incident["actions"]} == {
                "decision": "supervisor",
                "exclude_node": "supervisor",
                "restart": "supervisor",
            }


def test_reported_checkpoints_are_registered_once(client: httpx.Client) -> None:
    first = client.post("/api/v1/runs", json={"job": "ck", "key": "ck-1"}).json()
    ckpt = {"path": "/ckpt/step_000010.pt", "step": 10}
    for _ in range(2):  # the exit, then its replay
        client.post(f"/api/v1/runs/{first['id']}/exit", json={"exit_code": 143, "checkpoint": ckpt})
    second = client.post("/api/v1/runs", json={"job": "ck", "key": "ck-2"}).json()
    later = {"path": "/ckpt/step_000020.pt", "step": 20}
    client.post(f"/api/v1/runs/{second['id']}/exit", json={"exit_code": 0, "checkpoint": later})
    listed = client.get(f"/api/v1/jobs/{first['job_id']}/checkpoints").json()
    assert [(c["step"], c["path"], c["run_id"]) for c in listed] == [
        (20, later["path"], second["id"]),
        (10, ckpt["path"], first["id"]),
    ]
    assert client.get("/api/v1/jobs/999/checkpoints").status_code == 404


def _times(client: httpx.Client, incident_id: int) -> tuple[float, float | None, float | None]:
    """The incident's run's end, its decision's time and its restart's (seconds, the server's clock)."""
    inc = client.admin.get(f"/api/v1/incidents/{incident_id}").json()  # type: ignore[attr-defined]
    run = client.admin.get(f"/api/v1/runs/{inc['run_id']}").json()  # type: ignore[attr-defined]
    stamp = lambda s: datetime.fromisoformat(s).timestamp() if s else None  # noqa: E731
    decision = next(a for a in inc["actions"] if a["kind"] == "decision")
    restart = next((a for a in inc["actions"] if a["kind"] == "restart"), None)
    return stamp(run["ended_at"]), stamp(decision["created_at"]), stamp(restart and restart["finished_at"])


@pytest.mark.parametrize("error_s", [-5.0, 5.0])
def test_node_times_moved_by_a_wrong_offset_keep_exit_decision_and_restart_in_order(
    client: httpx.Client, error_s: float
) -> None:
    """A supervisor's times reach the server moved by the clock offset it measured, which is off by the
    measurement's error (milliseconds on one host under load; more across a slow link). Whatever the error,
    the record keeps causality: a run does not end after the server heard of its end, and its restart is
    not done before the decision that ordered it (fresh CI: a restart recorded 2.7 ms before its decision)."""
    first = client.post("/api/v1/runs", json={"job": "c", "key": f"c-1{error_s}"}).json()["id"]
    now = time.time()
    ended = client.post(
        f"/api/v1/runs/{first}/exit", json={"exit_code": 143, "ended_at": now, "clock_offset_s": error_s}
    ).json()
    heard_by = time.time()
    assert _decision(client, first)["restart"] is True
    client.post(
        "/api/v1/runs",
        json={
            "job": "c",
            "key": f"c-2{error_s}",
            "restart_of": f"c-1{error_s}",
            "started_at": time.time(),
            "clock_offset_s": error_s,
        },
    )
    ended_at, decided_at, restarted_at = _times(client, ended["incident_id"])
    assert ended_at <= heard_by and ended_at <= decided_at, (ended_at, decided_at)
    assert restarted_at is not None and decided_at <= restarted_at, (decided_at, restarted_at)
