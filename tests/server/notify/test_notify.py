"""On-call notifications: payload shapes, and delivery to a real HTTP receiver on loopback (retries,
giving up, never blocking the caller, bounded shutdown, URLs kept out of the logs)."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.registry import CollectorRegistry

from gpuwatch.config import Settings
from gpuwatch.diagnosis.model import Diagnosis, Evidence
from server.notify.webhooks import IncidentNotice, Notifier, Target, generic_payload, read_url_file, slack_payload
from tests.helpers import free_port, wait_until
from tests.webhook_receiver import SECRET, Receiver


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.stop()


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


def notice(incident_id: int = 42, event: str = "diagnosed", **kw: Any) -> IncidentNotice:
    fields: dict[str, Any] = {
        "job": "llama-70b",
        "attempt": 3,
        "node": "gpu-node-07",
        "reason": "nccl_timeout",
        "category": "infrastructure",
        "action": "restart",
        "confidence": 0.9234,
        "source": "rules",
        "summary": "Rank 5 hit the NCCL watchdog timeout after rank 12 stopped answering.",
        "evidence": ("rank5.log:1042 [Rank 5] Watchdog caught collective operation timeout",),
        "ts": datetime(2025, 3, 1, 12, 30, 5, tzinfo=UTC),
    }
    fields.update(kw)
    return IncidentNotice(event=event, incident_id=incident_id, **fields)  # type: ignore[arg-type]


def count(registry: CollectorRegistry, target: Target, outcome: str) -> float:
    value = registry.get_sample_value("gpuwatch_notifications_total", {"target": target.name, "outcome": outcome})
    assert value is not None, f"no {outcome} series for {target.name}"
    return value


def make(targets: list[Target], registry: CollectorRegistry, **kw: Any) -> Notifier:
    options: dict[str, Any] = {"public_url": "https://gpuwatch.example", "timeout_s": 2.0, "backoff_s": 0.01}
    options.update(kw)
    return Notifier(targets, registry=registry, **options)


# ------------------------------------------------------------------------------------------ payloads


def test_generic_payload_carries_every_field_flat() -> None:
    body = generic_payload(notice(report_url="https://gpuwatch.example/api/v1/incidents/42/report"))
    assert body == {
        "schema": "gpuwatch.incident.v1",
        "event": "diagnosed",
        "incident_id": 42,
        "job": "llama-70b",
        "attempt": 3,
        "node": "gpu-node-07",
        "reason": "nccl_timeout",
        "category": "infrastructure",
        "action": "restart",
        "confidence": 0.923,
        "source": "rules",
        "summary": "Rank 5 hit the NCCL watchdog timeout after rank 12 stopped answering.",
        "evidence": ["rank5.log:1042 [Rank 5] Watchdog caught collective operation timeout"],
        "report_url": "https://gpuwatch.example/api/v1/incidents/42/report",
        "ts": "2025-03-01T12:30:05.000+00:00",
        "text": "Incident #42 diagnosed: job llama-70b attempt 3 on gpu-node-07 — nccl_timeout",
    }
    json.dumps(body)  # serialisable as is


def test_slack_payload_has_text_blocks_fields_evidence_and_report_link() -> None:
    body = slack_payload(
        notice(
            event="decided",
            action="restart_exclude_node",
            summary="x < y & z",
            evidence=("rank0.log:7 a <b> & ```c```", *[f"rank{i}.log:1 line" for i in range(1, 9)]),
            report_url="https://gpuwatch.example/api/v1/incidents/42/report",
        )
    )
    assert body["text"] == (
        "Incident #42 decided: job llama-70b attempt 3 on gpu-node-07 — nccl_timeout → restart_exclude_node"
    )
    header, facts, summary, evidence, context = body["blocks"]
    assert header["type"] == "header" and header["text"]["type"] == "plain_text"
    assert header["text"]["text"].startswith(":arrows_counterclockwise: Incident #42 decided")
    assert [f["text"].split("\n")[0] for f in facts["fields"]] == [
        "*Job*",
        "*Attempt*",
        "*Node*",
        "*Reason*",
        "*Category*",
        "*Action*",
        "*Confidence*",
    ]
    assert facts["fields"][6]["text"] == "*Confidence*\n0.92 (rules)"
    assert summary["text"]["text"] == "x &lt; y &amp; z"
    code = evidence["text"]["text"]
    assert code.startswith("```rank0.log:7 a &lt;b&gt; &amp; `\u200b``c`\u200b``") and code.endswith("```")
    assert code.count("\n") == 4  # the first five evidence lines only
    assert context["elements"][0]["text"] == (
        "<https://gpuwatch.example/api/v1/incidents/42/report|Post-mortem report>"
        " · incident 42 · 2025-03-01 12:30:05 UTC"
    )


def test_slack_payload_of_a_bare_opened_notice_leaves_unknown_fields_out() -> None:
    body = slack_payload(IncidentNotice(event="opened", incident_id=7, job="j" * 300))
    header, facts, context = body["blocks"]
    assert len(header["text"]["text"]) == 150 and header["text"]["text"].endswith("…")
    assert [f["text"].split("\n")[0] for f in facts["fields"]] == ["*Job*"]
    assert "Post-mortem" not in context["elements"][0]["text"]


def test_notice_from_a_diagnosis_takes_its_fields_and_first_evidence_lines() -> None:
    diagnosis = Diagnosis(
        reason="gpu_hardware",
        confidence=0.97,
        source="rules",
        evidence=tuple(Evidence("kernel", i, f"NVRM: Xid (PCI:0000:3b:00): 79, line {i}") for i in range(1, 9)),
        node="gpu-node-03",
        explanation="GPU fell off the bus.",
    )
    n = IncidentNotice.from_diagnosis("diagnosed", 9, "bert", diagnosis, attempt=1)
    assert (n.reason, n.category, n.action, n.node, n.source) == (
        "gpu_hardware",
        "infrastructure",
        "restart_exclude_node",
        "gpu-node-03",
        "rules",
    )
    assert n.summary == "GPU fell off the bus."
    assert n.evidence[0] == "kernel:1 NVRM: Xid (PCI:0000:3b:00): 79, line 1" and len(n.evidence) == 5
    with pytest.raises(ValueError):
        IncidentNotice(event="exploded", incident_id=1, job="x")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ delivery


def test_notices_reach_generic_and_slack_receivers_with_the_report_link(
    receiver: Receiver, registry: CollectorRegistry
) -> None:
    hook, slack = Target("webhook", receiver.url("/hook")), Target("slack", receiver.url("/slack"))
    with make([hook, slack], registry) as notifier:
        notifier.notify(notice())
        wait_until(lambda: len(receiver.requests) == 2, what="both deliveries")
    by_path = {r.path: r for r in receiver.requests}
    assert by_path["/hook"].body["report_url"] == "https://gpuwatch.example/api/v1/incidents/42/report"
    assert by_path["/hook"].body["event"] == "diagnosed"
    assert by_path["/slack"].body["text"].startswith("Incident #42 diagnosed")
    assert (
        "/api/v1/incidents/42/report|Post-mortem report>" in by_path["/slack"].body["blocks"][-1]["elements"][0]["text"]
    )
    assert all(r.headers["Content-Type"] == "application/json" for r in receiver.requests)
    assert all(r.headers["User-Agent"].startswith("gpuwatch/") for r in receiver.requests)
    assert count(registry, hook, "sent") == count(registry, slack, "sent") == 1


@pytest.mark.parametrize("status", [500, 503, 429])
def test_a_retryable_answer_is_retried_until_it_succeeds(
    receiver: Receiver, registry: CollectorRegistry, status: int
) -> None:
    receiver.fail(2, status)
    hook = Target("webhook", receiver.url())
    notifier = make([hook], registry, retries=3)
    notifier.notify(notice())
    wait_until(lambda: count(registry, hook, "sent") == 1, what="delivery after two failures")
    notifier.close()
    assert len(receiver.requests) == 3
    assert [r.body for r in receiver.requests] == [generic_payload(notice(report_url=notifier.report_url(42)))] * 3
    assert (count(registry, hook, "retry"), count(registry, hook, "failed")) == (2, 0)


def test_gives_up_after_the_retries_when_nothing_listens(registry: CollectorRegistry) -> None:
    dead = Target("webhook", f"http://127.0.0.1:{free_port()}/hook")
    notifier = make([dead], registry, retries=2)
    notifier.notify(notice())
    wait_until(lambda: count(registry, dead, "failed") == 1, what="giving up")
    notifier.close()
    assert (count(registry, dead, "retry"), count(registry, dead, "sent")) == (2, 0)


def test_a_400_is_not_retried_and_the_next_notice_still_goes(receiver: Receiver, registry: CollectorRegistry) -> None:
    receiver.fail(1, 400)
    hook = Target("webhook", receiver.url())
    with make([hook], registry, retries=3) as notifier:
        notifier.notify(notice(1))
        notifier.notify(notice(2))
        wait_until(lambda: count(registry, hook, "sent") == 1, what="the second notice")
    assert [r.body["incident_id"] for r in receiver.requests] == [1, 2]
    assert (count(registry, hook, "rejected"), count(registry, hook, "retry")) == (1, 0)


def test_notify_never_blocks_while_the_receiver_hangs(receiver: Receiver, registry: CollectorRegistry) -> None:
    receiver.hold()
    hook = Target("webhook", receiver.url())
    with make([hook], registry, timeout_s=30.0) as notifier:
        for i in range(5):
            started = time.monotonic()
            notifier.notify(notice(i))
            assert time.monotonic() - started < 0.1
        wait_until(lambda: len(receiver.requests) == 1, what="the first request to be held")
        assert count(registry, hook, "sent") == 0
        receiver.release()
        wait_until(lambda: count(registry, hook, "sent") == 5, what="the held notices")
    assert [r.body["incident_id"] for r in receiver.requests] == [0, 1, 2, 3, 4]


def test_a_full_queue_drops_the_oldest_waiting_notice(receiver: Receiver, registry: CollectorRegistry) -> None:
    receiver.hold()
    hook = Target("webhook", receiver.url())
    with make([hook], registry, queue_size=2) as notifier:
        notifier.notify(notice(1))
        wait_until(lambda: len(receiver.requests) == 1, what="notice 1 in flight")
        for i in (2, 3, 4):
            notifier.notify(notice(i))
        assert count(registry, hook, "dropped") == 1
        receiver.release()
        wait_until(lambda: count(registry, hook, "sent") == 3, what="the notices kept")
    assert [r.body["incident_id"] for r in receiver.requests] == [1, 3, 4]


def test_close_sends_what_is_queued_first(receiver: Receiver, registry: CollectorRegistry) -> None:
    hook, slack = Target("webhook", receiver.url("/hook")), Target("slack", receiver.url("/slack"))
    notifier = make([hook, slack], registry)
    for i in range(10):
        notifier.notify(notice(i))
    notifier.close(timeout=10)
    assert len(receiver.requests) == 20
    assert count(registry, hook, "sent") == count(registry, slack, "sent") == 10
    notifier.notify(notice(99))  # after close: ignored, not raised
    assert count(registry, hook, "sent") == 10


def test_close_interrupts_a_long_backoff(registry: CollectorRegistry) -> None:
    dead = Target("webhook", f"http://127.0.0.1:{free_port()}/hook")
    notifier = make([dead], registry, retries=5, backoff_s=30.0)
    notifier.notify(notice(1))
    notifier.notify(notice(2))
    wait_until(lambda: count(registry, dead, "retry") == 1, what="the first retry wait")
    started = time.monotonic()
    notifier.close(timeout=0.2)
    assert time.monotonic() - started < 2.0
    assert count(registry, dead, "dropped") == 2  # the one backing off and the one behind it
    assert count(registry, dead, "failed") == 0


def test_webhook_urls_never_reach_the_logs(
    receiver: Receiver, registry: CollectorRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    ok, dead = Target("slack", receiver.url()), Target("slack", f"http://127.0.0.1:{free_port()}/services/{SECRET}")
    receiver.fail(1, 400)
    with make([ok, dead], registry, retries=1) as notifier:
        notifier.notify(notice(1))  # the receiver refuses it (400); the dead one fails twice
        notifier.notify(notice(2))  # the receiver takes it
        wait_until(lambda: count(registry, dead, "failed") == 2 and count(registry, ok, "sent") == 1, what="outcomes")
    messages = "\n".join(r.getMessage() for r in caplog.records)
    assert f"slack:127.0.0.1:{receiver.port}" in messages and "rejected" in messages and "failed" in messages
    assert SECRET not in messages and "s3cr3t" not in caplog.text
    assert SECRET not in repr(notifier.targets) + generate_latest(registry).decode()
    with pytest.raises(ValueError) as bad:
        Target("slack", f"hooks.slack.example/services/{SECRET}")
    assert SECRET not in str(bad.value)


def test_without_targets_notify_does_nothing(registry: CollectorRegistry) -> None:
    notifier = Notifier([], registry=registry)
    assert not notifier.enabled
    notifier.notify(notice())
    notifier.close(timeout=0)
    assert "gpuwatch_notifications_total{" not in generate_latest(registry).decode()


# ------------------------------------------------------------------------------------------ settings


def test_from_settings_reads_urls_from_environment_and_secret_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, registry: CollectorRegistry
) -> None:
    for name in list(os.environ):
        if name.upper().startswith("GPUWATCH_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("GPUWATCH_NOTIFY_WEBHOOK_URLS", '["https://ops.example/hook", "https://ops.example/hook"]')
    monkeypatch.setenv("GPUWATCH_NOTIFY_SLACK_URLS", f'["https://hooks.slack.example/services/{SECRET}"]')
    secret_file = tmp_path / "notify-urls"
    secret_file.write_text(
        "# on-call\n\nslack https://chat.example:8443/hooks/abc\nwebhook http://pager.example/x\nhttp://other.example/y\n"
    )
    settings = Settings(notify_url_file=secret_file, host="0.0.0.0", port=8600, notify_retries=1)
    notifier = Notifier.from_settings(settings, registry)
    try:
        assert [t.name for t in notifier.targets] == [
            "webhook:ops.example",
            "slack:hooks.slack.example",
            "slack:chat.example:8443",
            "webhook:pager.example",
            "webhook:other.example",
        ]
        assert notifier.retries == 1
        assert notifier.report_url(5).endswith(":8600/api/v1/incidents/5/report")
        assert "0.0.0.0" not in notifier.report_url(5)
        assert count(registry, notifier.targets[0], "sent") == 0  # series exist before the first notice
    finally:
        notifier.close(timeout=0)
    with pytest.raises(ValueError, match=r"notify_slack_urls\[1\]: a slack notification URL") as bad:
        Notifier.from_settings(Settings(notify_slack_urls=["https://a.example/x", f"a.example/{SECRET}"]))
    assert SECRET not in str(bad.value)
    public = Settings(public_url="https://gpuwatch.example/")
    assert Notifier.from_settings(public).report_url(5) == "https://gpuwatch.example/api/v1/incidents/5/report"


def test_a_bad_line_in_the_url_file_names_the_line_not_the_url(tmp_path: Path) -> None:
    secret_file = tmp_path / "notify-urls"
    secret_file.write_text(f"slack https://hooks.example/ok\nslack ftp://hooks.example/{SECRET}\n")
    with pytest.raises(ValueError, match=r"notify-urls:2: a slack notification URL is not an http\(s\) URL") as bad:
        read_url_file(secret_file)
    assert SECRET not in str(bad.value)
