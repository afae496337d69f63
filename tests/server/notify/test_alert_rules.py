"""The alerts the server posts to Alertmanager are the Prometheus rules' alerts of the same names: equal
label sets (one fingerprint), severities, windows, hold times and annotations, checked against
deploy/prometheus/alerts.yml itself; and the labels the server builds from its state."""

from __future__ import annotations

import re

import pytest

from server.incidents.open_series import LABELS as OPEN_LABELS
from server.notify.alert_rules import FATAL_XID, FATAL_XIDS, FELL_OFF_THE_BUS, JOB_FAILED, RULES, AlertRule, render
from server.notify.alert_state import Alert, labels_of
from server.notify.alertmanager import check_labels, check_url, payload
from tests.promql import alert_rules

_DURATION = {"s": 1, "m": 60, "h": 3600}


def _seconds(text: str) -> float:
    return float(text[:-1]) * _DURATION[text[-1]]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_each_rule_aggregates_to_exactly_the_labels_the_server_posts(rule: AlertRule) -> None:
    [yml] = [r for r in alert_rules() if r.name == rule.name]
    grouping = re.match(r"\s*max by \(([\w, ]+)\) \(", yml.expr)
    assert grouping, f"{rule.name}: the expression must be `max by (<labels>) (...)`: {yml.expr}"
    assert tuple(label.strip() for label in grouping.group(1).split(",")) == rule.labels
    assert yml.rule["labels"] == {"severity": rule.severity}, "no other fixed label: the server adds none"
    assert _seconds(yml.rule["keep_firing_for"]) == rule.keep_firing_s
    annotations = yml.rule["annotations"]
    assert (annotations["summary"], annotations["description"], annotations["runbook"]) == (
        rule.summary,
        rule.description,
        rule.runbook,
    )


def test_the_event_windows_and_codes_are_the_rules() -> None:
    exprs = {r.name: r.expr for r in alert_rules()}
    for rule in (FATAL_XID, FELL_OFF_THE_BUS):
        windows = set(re.findall(r"offset (\d+[smh])\b", exprs[rule.name]))
        windows |= set(re.findall(r"\[(\d+[smh])\]", exprs[rule.name]))
        assert {_seconds(w) for w in windows} == {rule.window_s}, rule.name
    [codes] = set(re.findall(r'gpuwatch_xid_events_total\{xid=~"([\d|]+)"\}', exprs["GpuFatalXid"]))
    assert {int(c) for c in codes.split("|")} == FATAL_XIDS
    assert JOB_FAILED.labels == OPEN_LABELS, "GpuwatchJobFailed keeps every label of gpuwatch_incident_open"


def test_empty_labels_are_left_out_as_prometheus_leaves_them_out() -> None:
    # An Xid that names no GPU: gpuwatch_xid_events_total{gpu=""} has no gpu label in Prometheus.
    assert labels_of(FATAL_XID, {"instance": "n1", "gpu": "", "xid": "48"}) == (("instance", "n1"), ("xid", "48"))
    assert labels_of(FELL_OFF_THE_BUS, {"instance": "n1", "gpu": "3", "UUID": "GPU-x"}) == (
        ("instance", "n1"),
        ("gpu", "3"),
    )


def test_a_post_carries_the_rules_labels_and_rendered_annotations() -> None:
    alert = Alert(FATAL_XID, labels_of(FATAL_XID, {"instance": "n1", "gpu": "2", "xid": "48"}), 1_700_000_000.0)
    # Extra labels (Prometheus' external_labels) never override the rule's own.
    body = payload(alert, 1_700_000_060.0, {"cluster": "east", "instance": "ignored"}, "http://gw:8600")
    assert body["labels"] == {
        "alertname": "GpuFatalXid",
        "severity": "critical",
        "instance": "n1",
        "gpu": "2",
        "xid": "48",
        "cluster": "east",
    }
    assert body["annotations"]["summary"] == "Fatal Xid 48 on GPU 2 of n1"
    assert body["annotations"]["runbook"] == "deploy/README.md#gpufatalxid"
    assert "{{" not in body["annotations"]["description"]
    assert (body["startsAt"], body["endsAt"]) == ("2023-11-14T22:13:20.000Z", "2023-11-14T22:14:20.000Z")
    assert body["generatorURL"] == "http://gw:8600"
    assert render("{{ $labels.nope }}!", {}) == "!"


def test_bad_settings_are_refused_by_name_without_the_url() -> None:
    assert check_url("http://alertmanager:9093/") == "http://alertmanager:9093"
    with pytest.raises(ValueError, match="notify_alertmanager_url") as err:
        check_url("alertmanager:9093?token=s3cr3t")
    assert "s3cr3t" not in str(err.value)
    for bad in ({"alertname": "x"}, {"bad-name": "x"}, {"cluster": ""}):
        with pytest.raises(ValueError, match="notify_alertmanager_labels"):
            check_labels(bad)
