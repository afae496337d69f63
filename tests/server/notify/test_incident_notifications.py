"""On-call notifications from the server itself: an incident is announced when it is opened, diagnosed,
decided and resolved, to a real webhook on loopback, retried after a 500."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from gpuwatch.config import Settings
from tests.helpers import InProcessServer, new_token, wait_until
from tests.webhook_receiver import Receiver


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.stop()


def test_an_incident_is_announced_at_each_step_and_a_500_is_retried(settings: Settings, receiver: Receiver) -> None:
    receiver.fail(1, 500)  # the first delivery fails once and is sent again
    config = settings.replace(
        incident_settle_s=0.05,
        notify_webhook_urls=[receiver.url("/hook")],
        notify_backoff_s=0.05,
        public_url="http://gpuwatch.example:8600",
    )
    with InProcessServer(config) as srv:
        token = new_token(config.effective_database_url, "node-n")
        auth = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=srv.url, headers=auth, timeout=10) as c:
            run = c.post("/api/v1/runs", json={"job": "bert"}).json()["id"]
            incident = c.post(f"/api/v1/runs/{run}/exit", json={"exit_code": 143}).json()["incident_id"]
            wait_until(lambda: len({r.body["event"] for r in receiver.requests}) >= 3, what="three notices")
            ok = c.post("/api/v1/runs", json={"job": "bert"}).json()["id"]
            c.post(f"/api/v1/runs/{ok}/exit", json={"exit_code": 0})

            def events() -> list[str] | None:
                seen = [r.body["event"] for r in receiver.requests]
                return seen if "resolved" in seen else None

            seen = wait_until(events, what="the resolved notice")
            assert c.get(f"/api/v1/incidents/{incident}").json()["state"] == "resolved"
        metrics = httpx.get(f"{srv.url}/metrics").text
    assert seen[0] == seen[1] == "opened", "the first delivery failed (500) and was retried"
    assert [e for i, e in enumerate(seen) if i == 0 or e != seen[i - 1]] == [
        "opened",
        "diagnosed",
        "decided",
        "resolved",
    ]
    by_event = {r.body["event"]: r.body for r in receiver.requests}
    assert by_event["diagnosed"]["reason"] == "preempted" and by_event["diagnosed"]["job"] == "bert"
    assert by_event["decided"]["action"] == "restart"
    assert by_event["resolved"]["incident_id"] == incident
    assert by_event["opened"]["report_url"] == f"http://gpuwatch.example:8600/api/v1/incidents/{incident}/report"
    assert 'outcome="retry"' in metrics and "gpuwatch_notifications_total" in metrics
