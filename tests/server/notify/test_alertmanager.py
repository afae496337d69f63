"""The server's own alerts to Alertmanager (server/notify/alertmanager.py): what each post says (firing,
held, resolved), a dead or failing Alertmanager retried while ingest goes on, and against a real
Alertmanager: an alert resolved, and a failed run's alert asserted again from the database by a
restarted server to a restarted Alertmanager."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpuwatch.config import Settings
from gpuwatch.protocol import Batch, Event, GpuSample
from server.notify.alert_rules import FATAL_XID, JOB_FAILED
from server.notify.alert_state import Alert, labels_of
from server.notify.alertmanager import AlertSender
from tests.helpers import InProcessServer, free_port, new_token, require_tool, wait_until
from tests.prometheus_stack import Alertmanager
from tests.webhook_receiver import Receiver

T0 = 1_700_000_000.0
NULL_CONFIG: dict[str, Any] = {
    "route": {"receiver": "null", "group_by": ["alertname"], "group_wait": "0s", "group_interval": "1s"},
    "receivers": [{"name": "null"}],
}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.stop()


def _ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _job_alert(incident: str = "7") -> Alert:
    values = {"incident": incident, "job": "llama", "node": "n1", "run": "41", "trigger": "run_failed"}
    return Alert(JOB_FAILED, labels_of(JOB_FAILED, values | {"reason": "host_oom", "category": "framework"}), T0)


class _Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def test_posts_hold_each_alert_for_four_resends_and_resolve_it_with_the_rules_hold(receiver: Receiver) -> None:
    clock, state = _Clock(), [_job_alert()]
    sender = AlertSender(receiver.url("/am"), lambda now: list(state), resend_s=10, clock=clock)
    with httpx.Client() as client:
        assert sender.sync(client) == "sent"
        [firing] = receiver.requests[-1].body
        assert receiver.requests[-1].path == "/am/api/v2/alerts"
        assert firing["labels"]["alertname"] == "GpuwatchJobFailed" and firing["labels"]["incident"] == "7"
        assert _ts(firing["endsAt"]) == T0 + 40  # valid for 4 resend intervals, as Prometheus does
        # The incident closes: posted once more, ending when the rule's keep_firing_for (5m) ends.
        clock.now, state[:] = T0 + 100, []
        assert sender.sync(client) == "sent"
        [resolved] = receiver.requests[-1].body
        assert resolved["labels"] == firing["labels"] and _ts(resolved["endsAt"]) == T0 + 100 + 300
        # Then nothing more to say.
        clock.now += 10
        assert sender.sync(client) == "sent" and len(receiver.requests) == 2


def test_an_xid_alert_ends_with_its_window_and_without_prometheus_at_once(receiver: Receiver) -> None:
    clock = _Clock()
    xid = Alert(FATAL_XID, (("instance", "n1"), ("gpu", "0"), ("xid", "48")), T0, until=T0 + 3600)
    state = [xid]
    sender = AlertSender(receiver.url("/"), lambda now: list(state), resend_s=10, clock=clock, hold_resolved=False)
    with httpx.Client() as client:
        clock.now = T0 + 3590
        sender.sync(client)
        assert _ts(receiver.requests[-1].body[0]["endsAt"]) == T0 + 3600  # not past its window
        clock.now, state[:] = T0 + 3620, []
        sender.sync(client)
        assert _ts(receiver.requests[-1].body[0]["endsAt"]) == T0 + 3600  # resolved when the window ended


def _ingest_fatal_xid(srv: InProcessServer, code: int = 48) -> tuple[httpx.Response, float]:
    token = new_token(srv.services.settings.effective_database_url, "xid-node")
    ts = time.time()
    batch = Batch(
        batch_id=int(ts * 1000),
        samples=[GpuSample(ts=ts, gpu=i, uuid=f"GPU-{i}", util_gpu=50.0) for i in range(2)],
        events=[Event(stream="gpu:sim", seq=0, ts=ts, kind="xid", gpu=1, message=f"Xid {code}", data={"xid": code})],
    )
    started = time.monotonic()
    resp = httpx.post(
        f"{srv.url}/api/v1/ingest",
        content=batch.model_dump_json(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        timeout=10,
    )
    return resp, time.monotonic() - started


def _posts(srv: InProcessServer) -> dict[str, float]:
    text = httpx.get(f"{srv.url}/metrics").text
    return {
        s.labels["outcome"]: s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "gpuwatch_alertmanager_posts_total"
    }


def test_a_failing_alertmanager_is_retried_and_ingest_goes_on(settings: Settings, receiver: Receiver) -> None:
    receiver.fail(2, 503)
    settings.notify.alertmanager_url = receiver.url("/")
    settings.notify.alertmanager_backoff_s = 0.05
    with InProcessServer(settings) as srv:
        resp, took = _ingest_fatal_xid(srv)
        assert resp.status_code == 200, resp.text
        assert took < 2, "ingest does not wait on Alertmanager"

        def delivered() -> list[dict[str, Any]] | None:
            bodies = [r.body for r in receiver.requests]
            return bodies[-1] if len(bodies) >= 3 and bodies[-1] else None

        [alert] = wait_until(delivered, timeout=10, what="the Xid alert after two 503s")
        assert alert["labels"] == {
            "alertname": "GpuFatalXid",
            "severity": "critical",
            "instance": "xid-node",
            "gpu": "1",
            "xid": "48",
        }
        posts = _posts(srv)
        assert posts["failed"] >= 2 and posts["sent"] >= 1


def test_a_dead_alertmanager_is_logged_and_retried_while_ingest_goes_on(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()  # nothing listens there
    settings.notify.alertmanager_url = f"http://user:s3cr3t@127.0.0.1:{port}"
    settings.notify.alertmanager_backoff_s = 0.05
    caplog.set_level(logging.WARNING, "gpuwatch.server.notify")
    with InProcessServer(settings) as srv:
        for code in (48, 79):
            resp, took = _ingest_fatal_xid(srv, code)
            assert resp.status_code == 200 and took < 2
        wait_until(lambda: _posts(srv)["failed"] >= 3, timeout=10, what="failed posts retried")
    failures = [r.getMessage() for r in caplog.records if "post failed" in r.getMessage()]
    assert failures and all(f"127.0.0.1:{port}" in m and "s3cr3t" not in m for m in failures)


def test_a_gpu_judged_lost_is_posted_at_once_not_at_the_next_resend(settings: Settings, receiver: Receiver) -> None:
    settings.server.node_timeout_s = 0.5
    settings.notify.alertmanager_url = receiver.url("/")
    settings.notify.alertmanager_resend_s = 600  # only an event can make it post within the test
    with InProcessServer(settings) as srv:
        token = new_token(settings.effective_database_url, "bus-node")
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        batch_ids = iter(range(1, 10_000))

        def ship(gpus: range) -> None:
            ts = time.time()
            samples = [GpuSample(ts=ts, gpu=i, uuid=f"GPU-{i}", util_gpu=50.0) for i in gpus]
            body = Batch(batch_id=next(batch_ids), samples=samples).model_dump_json()
            assert httpx.post(f"{srv.url}/api/v1/ingest", content=body, headers=headers, timeout=10).is_success

        ship(range(2))

        def lost_posted() -> dict[str, Any] | None:
            ship(range(1))  # GPU 1 is no longer in the agent's batches
            for request in receiver.requests:
                for alert in request.body:
                    if alert["labels"]["alertname"] == "GpuFellOffTheBus":
                        return alert
            return None

        alert = wait_until(lost_posted, timeout=10, what="GpuFellOffTheBus posted", every=0.1)
        assert {k: alert["labels"][k] for k in ("instance", "gpu")} == {"instance": "bus-node", "gpu": "1"}


@pytest.mark.prometheus
def test_a_resolved_alert_leaves_a_real_alertmanager(tmp_path: Path) -> None:
    am = Alertmanager(require_tool("prometheus-alertmanager", "alertmanager"), NULL_CONFIG, tmp_path)
    state = [_job_alert("9")]
    sender = AlertSender(am.url, lambda now: list(state), resend_s=10, hold_resolved=False)
    try:
        am.wait_ready()
        with httpx.Client() as client:
            assert sender.sync(client) == "sent"
            [alert] = am.alerts("GpuwatchJobFailed")
            assert alert["labels"]["incident"] == "9" and alert["status"]["state"] in ("active", "unprocessed")
            state.clear()
            assert sender.sync(client) == "sent"
            wait_until(lambda: am.alerts() == [], timeout=10, what="the alert resolved in Alertmanager")
    finally:
        am.stop()


def _fail_a_run(base: str, token: str) -> str:
    auth = {"Authorization": f"Bearer {token}"}
    run = httpx.post(f"{base}/api/v1/runs", json={"job": "bert-ft"}, headers=auth)
    assert run.status_code == 201, run.text
    exit_ = httpx.post(f"{base}/api/v1/runs/{run.json()['id']}/exit", json={"exit_code": 1}, headers=auth)
    assert exit_.status_code == 202, exit_.text
    return str(exit_.json()["incident_id"])


def _open_series(base: str) -> list[dict[str, str]]:
    text = httpx.get(f"{base}/metrics").text
    return [
        {k: v for k, v in s.labels.items() if v}
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "gpuwatch_incident_open" and s.labels.get("reason")
    ]


@pytest.mark.prometheus
def test_a_failed_run_is_asserted_again_by_a_restarted_server_to_a_restarted_alertmanager(
    tmp_path: Path, settings: Settings
) -> None:
    binary = require_tool("prometheus-alertmanager", "alertmanager")
    (tmp_path / "1").mkdir()
    am = Alertmanager(binary, NULL_CONFIG, tmp_path / "1")
    settings.notify.alertmanager_url = am.url
    settings.notify.alertmanager_resend_s = 0.5
    token = new_token(settings.effective_database_url, "gpu-node-7")
    try:
        am.wait_ready()
        with InProcessServer(settings) as srv:
            incident = _fail_a_run(srv.url, token)
            [alert] = wait_until(lambda: am.alerts("GpuwatchJobFailed"), timeout=15, what="the failed run's alert")
            # The labels of the alert are those of the rule's series (which alerts.yml keeps by `max by`).
            [series] = _open_series(srv.url)
            assert {k: v for k, v in alert["labels"].items() if k not in ("alertname", "severity")} == series
            assert series["incident"] == incident
        am.stop()
        (tmp_path / "2").mkdir()
        am = Alertmanager(binary, NULL_CONFIG, tmp_path / "2", port=am.port)  # a new one: it knows nothing
        am.wait_ready()
        assert am.alerts() == []
        with InProcessServer(settings):  # a new server: it knows from the database
            [again] = wait_until(lambda: am.alerts("GpuwatchJobFailed"), timeout=15, what="the alert asserted again")
        assert again["labels"] == alert["labels"]
    finally:
        am.stop()


def test_a_bad_alertmanager_url_stops_the_server_with_the_settings_name(
    settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    from server.main import serve

    settings.notify.alertmanager_url = "alertmanager:9093"
    assert serve(settings) == 2
    assert "gpuwatch server: notify_alertmanager_url: expected http(s)://" in capsys.readouterr().err
