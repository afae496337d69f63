"""The alert rules (deploy/prometheus/alerts.yml), their promtool unit tests, Prometheus's config and
Alertmanager's routing; and one alert delivered by a real Prometheus through a real Alertmanager to
a webhook on loopback."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from agent.collectors.simulated import write_fault
from gpuwatch.config import Settings
from gpuwatch.diagnosis.xid import XID_REASONS
from tests.helpers import Proc, free_port, migrated_sqlite, new_token, require_tool, start_server, wait_until
from tests.prometheus_stack import PROMETHEUS_YML, Alertmanager, Binary, Prometheus, prometheus_config
from tests.promql import ALERTS_FILE, ROOT, alert_rules

DEPLOY = ROOT / "deploy"
ALERTS_TEST = DEPLOY / "prometheus" / "alerts_test.yml"
ALERTMANAGER_YML = DEPLOY / "alertmanager.yml"


def _run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)


@pytest.mark.prometheus
def test_promtool_accepts_the_rules_and_the_config() -> None:
    promtool = require_tool("promtool")
    rules = _run(promtool, "check", "rules", str(ALERTS_FILE))
    assert rules.returncode == 0, rules.stdout + rules.stderr
    assert f"SUCCESS: {len(alert_rules())} rules found" in rules.stdout
    config = _run(promtool, "check", "config", str(PROMETHEUS_YML))
    assert config.returncode == 0, config.stdout + config.stderr
    assert "SUCCESS: 1 rule files found" in config.stdout, "prometheus.yml loads alerts.yml"


@pytest.mark.prometheus
def test_promtool_unit_tests_of_the_alerts_pass() -> None:
    out = _run(require_tool("promtool"), "test", "rules", str(ALERTS_TEST))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def test_every_alert_has_a_firing_and_a_quiet_unit_test() -> None:
    cases: dict[str, set[bool]] = {}
    for test in yaml.safe_load(ALERTS_TEST.read_text())["tests"]:
        for case in test.get("alert_rule_test", []):
            cases.setdefault(case["alertname"], set()).add(bool(case.get("exp_alerts")))
    missing = {
        rule.name: cases.get(rule.name, set()) for rule in alert_rules() if cases.get(rule.name) != {True, False}
    }
    assert missing == {}, "alerts without both a firing (True) and a not-firing (False) case"


def test_every_alert_has_for_severity_summary_and_a_runbook_that_exists() -> None:
    anchors = {
        re.sub(r"[^a-z0-9 -]", "", heading.lower()).replace(" ", "-")
        for heading in re.findall(r"^#+ (.+)$", (DEPLOY / "README.md").read_text(), re.M)
    }
    names = [rule.name for rule in alert_rules()]
    assert len(names) == len(set(names)) >= 15
    for rule in alert_rules():
        assert "for" in rule.rule, rule.name
        assert rule.rule["labels"]["severity"] in {"critical", "warning"}, rule.name
        annotations = rule.rule["annotations"]
        assert annotations["summary"] and annotations["description"], rule.name
        doc, _, anchor = annotations["runbook"].partition("#")
        assert doc == "deploy/README.md" and anchor == rule.name.lower() and anchor in anchors, rule.name


def test_failed_runs_are_grouped_by_job_not_by_incident() -> None:
    """GpuwatchJobFailed fires per incident; Alertmanager groups them by the training job (the
    series' `job` label), and the rule keeps only its own labels, not the server's `instance` that
    would split them."""
    route = yaml.safe_load(ALERTMANAGER_YML.read_text())["route"]
    assert "job" in route["group_by"] and "incident" not in route["group_by"]
    [expr] = [rule.expr for rule in alert_rules() if rule.name == "GpuwatchJobFailed"]
    assert "gpuwatch_incident_open{" in expr and re.match(r"max by \(([\w, ]+)\)", expr)
    assert "instance" not in re.match(r"max by \(([\w, ]+)\)", expr).group(1)  # type: ignore[union-attr]


def _codes(expr: str) -> set[int]:
    """The Xid codes an alert selects from gpuwatch_xid_events_total; every selector of it in the
    expression must name the same ones."""
    selectors = re.findall(r'gpuwatch_xid_events_total\{xid=~?"([\d|]+)"\}', expr)
    assert selectors and len(set(selectors)) == 1, expr
    return {int(code) for code in selectors[0].split("|")}


def test_xid_alerts_follow_the_diagnosis_xid_table() -> None:
    """The alerts and `gpuwatch diagnose` agree on which Xids are the hardware's fault."""
    rules = {rule.name: rule.expr for rule in alert_rules()}
    hardware = {xid for xid, reason in XID_REASONS.items() if reason == "gpu_hardware"}
    assert _codes(rules["GpuFellOffTheBus"]) == {79}
    assert _codes(rules["GpuFatalXid"]) == hardware - {79}
    assert _codes(rules["GpuNvlinkError"]) == {xid for xid, reason in XID_REASONS.items() if reason == "nvlink_error"}


def _alertmanager_config_for(webhook_url: str) -> dict[str, Any]:
    """deploy/alertmanager.yml with its webhook url_file replaced by ``webhook_url``: the Alertmanager
    of Debian 12 (0.25) predates url_file (0.26), and a test has its own receiver anyway."""
    config = yaml.safe_load(ALERTMANAGER_YML.read_text())
    for receiver in config["receivers"]:
        for webhook in receiver.get("webhook_configs", []):
            assert webhook.pop("url_file") == "/run/secrets/alert_webhook_url"
            assert "url" not in webhook, "the webhook URL comes from a secret file, never from the repo"
            webhook["url"] = webhook_url
    return config


@pytest.mark.prometheus
def test_alertmanager_config_is_valid_and_routes_by_severity(tmp_path: Path) -> None:
    amtool = require_tool("amtool")
    path = tmp_path / "alertmanager.yml"
    path.write_text(yaml.safe_dump(_alertmanager_config_for("http://127.0.0.1:9/hook")))
    check = _run(amtool, "check-config", str(path))
    assert check.returncode == 0, check.stdout + check.stderr

    def receiver(*labels: str) -> str:
        out = _run(amtool, "config", "routes", "test", f"--config.file={path}", *labels)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    assert receiver("alertname=GpuFellOffTheBus", "severity=critical") == "critical"
    assert receiver("alertname=GpuThermalThrottling", "severity=warning") == "warning"
    assert receiver("alertname=SomethingElse") == "warning"


class _Webhook:
    """An HTTP receiver on loopback that keeps every JSON body POSTed to it."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        received = self.bodies

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/alerts"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def webhook() -> Iterator[_Webhook]:
    hook = _Webhook()
    yield hook
    hook.close()


@pytest.mark.prometheus
@pytest.mark.slow
def test_a_firing_alert_reaches_the_webhook_through_alertmanager(tmp_path: Path, webhook: _Webhook) -> None:
    prometheus = require_tool("prometheus")
    alertmanager = require_tool("prometheus-alertmanager", "alertmanager")
    am_port = free_port()
    am_config = _alertmanager_config_for(webhook.url)
    for route in [am_config["route"], *am_config["route"]["routes"]]:
        route["group_wait"] = "0s"  # the real waits (10 s for critical) are not what is tested here
    (tmp_path / "alertmanager.yml").write_text(yaml.safe_dump(am_config))
    # Besides alerts.yml, a critical alert that fires at once: gpuwatch's own need a live cluster
    # (tests/system/test_prometheus_live.py has one); what is tested here is the path to the receiver.
    now_rule = {
        "alert": "GpuwatchDeliveryTest",
        "expr": "vector(1)",
        "for": "0s",
        "labels": {"severity": "critical", "instance": "node-x", "gpu": "3"},
        "annotations": {"summary": "delivery test"},
    }
    (tmp_path / "now.yml").write_text(yaml.safe_dump({"groups": [{"name": "now", "rules": [now_rule]}]}))
    alertmanager_proc = Binary(
        [
            alertmanager,
            f"--config.file={tmp_path / 'alertmanager.yml'}",
            f"--storage.path={tmp_path / 'am-data'}",
            f"--web.listen-address=127.0.0.1:{am_port}",
            "--cluster.listen-address=",  # no gossip port: tests may run side by side
        ],
        tmp_path / "alertmanager.log",
    )
    config = prometheus_config(f"127.0.0.1:{free_port()}", [ALERTS_FILE, tmp_path / "now.yml"], f"127.0.0.1:{am_port}")
    prom = Prometheus(prometheus, config, tmp_path, "--rules.alert.resend-delay=1s")
    try:
        body = wait_until(lambda: webhook.bodies, timeout=30, what="a notification at the webhook")[0]
    finally:
        prom.stop()
        alertmanager_proc.stop()
    assert body["receiver"] == "critical" and body["status"] == "firing", body
    [alert] = body["alerts"]
    assert alert["labels"] == {
        "alertname": "GpuwatchDeliveryTest",
        "gpu": "3",
        "instance": "node-x",
        "severity": "critical",
    }
    assert alert["annotations"] == {"summary": "delivery test"}


@pytest.mark.prometheus
def test_a_silence_disruption_inhibits_the_nodes_own_alerts_in_alertmanager(tmp_path: Path) -> None:
    """Many nodes unheard at once pages once (GpuwatchSilenceDisruption), not once per node: the real
    Alertmanager marks the nodes' alerts of the same scrape job suppressed, and no others."""
    alertmanager = require_tool("prometheus-alertmanager", "alertmanager")
    port = free_port()
    (tmp_path / "alertmanager.yml").write_text(yaml.safe_dump(_alertmanager_config_for("http://127.0.0.1:9/hook")))
    proc = Binary(
        [
            alertmanager,
            f"--config.file={tmp_path / 'alertmanager.yml'}",
            f"--storage.path={tmp_path / 'am-data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--cluster.listen-address=",
        ],
        tmp_path / "alertmanager.log",
    )
    api = f"http://127.0.0.1:{port}/api/v2/alerts"

    def alert(name: str, severity: str, **labels: str) -> dict[str, Any]:
        return {"labels": {"alertname": name, "severity": severity, **labels}}

    sent = [
        alert("GpuwatchSilenceDisruption", "critical", instance="server:8600", job="gpuwatch"),
        alert("GpuwatchAgentDown", "warning", node="n1", instance="n1", job="gpuwatch"),
        alert("GpuwatchNodeSilent", "critical", node="n2", instance="n2", job="gpuwatch"),
        # Another gpuwatch's node (another scrape job), and an alert of another kind: not held back.
        alert("GpuwatchAgentDown", "warning", node="n3", instance="n3", job="gpuwatch-b"),
        alert("GpuFellOffTheBus", "critical", gpu="0", instance="n1", job="gpuwatch"),
    ]
    try:
        wait_until(lambda: _post_json(api, sent), timeout=30, what="Alertmanager taking alerts")

        def states() -> dict[tuple[str, str], str] | None:
            found = {
                (a["labels"]["alertname"], a["labels"]["instance"]): a["status"]["state"]
                for a in httpx.get(api, timeout=5).json()
            }
            return found if len(found) == len(sent) and "unprocessed" not in found.values() else None

        found = wait_until(states, timeout=30, what="all five alerts processed")
    finally:
        proc.stop()
    assert found == {
        ("GpuwatchSilenceDisruption", "server:8600"): "active",
        ("GpuwatchAgentDown", "n1"): "suppressed",
        ("GpuwatchNodeSilent", "n2"): "suppressed",
        ("GpuwatchAgentDown", "n3"): "active",
        ("GpuFellOffTheBus", "n1"): "active",
    }


def _post_json(url: str, body: Any) -> bool:
    """POST ``body`` as JSON; False while nothing listens at ``url`` yet."""
    try:
        return httpx.post(url, json=body, timeout=5).status_code == 200
    except httpx.TransportError:
        return False


@pytest.mark.prometheus
@pytest.mark.slow
def test_the_servers_post_and_the_rules_alert_are_one_alert_and_one_notification(
    tmp_path: Path, webhook: _Webhook
) -> None:
    """A fatal Xid from a simulated agent and a failed run: the server posts each to Alertmanager at once
    (server/notify/alertmanager.py), Prometheus' rules fire the same later; Alertmanager holds one alert
    of each and the webhook gets one notification of each, because the labels are equal."""
    am_binary = require_tool("prometheus-alertmanager", "alertmanager")
    prometheus = require_tool("prometheus")
    am_config = _alertmanager_config_for(webhook.url)
    for route in [am_config["route"], *am_config["route"]["routes"]]:
        # At once, and a second notification within a second of any change to a group: a second alert
        # (labels unequal) would show.
        route |= {"group_wait": "0s", "group_interval": "1s"}
    (tmp_path / "am").mkdir()
    am = Alertmanager(am_binary, am_config, tmp_path / "am")
    url = migrated_sqlite(tmp_path)
    token = new_token(url, "dedup-node")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {
        "GPUWATCH_NOTIFY_ALERTMANAGER_URL": am.url,
        "GPUWATCH_NOTIFY_ALERTMANAGER_RESEND_S": "120",  # Prometheus' posts (every second) are the latest
        "GPUWATCH_INCIDENT_SETTLE_S": "0.2",
    }
    procs: list[Proc] = []
    prom = None
    try:
        am.wait_ready()
        procs.append(start_server(tmp_path, port, tmp_path / "server.log", env))
        config = prometheus_config(f"127.0.0.1:{port}", [ALERTS_FILE], f"127.0.0.1:{am.port}")
        (tmp_path / "prom").mkdir()
        prom = Prometheus(prometheus, config, tmp_path / "prom", "--rules.alert.resend-delay=1s")
        args = ["agent", "--server", base, "--token", token, "--node", "dedup-node", "--simulate", "2"]
        args += ["--client-port", "0", "--flush", "0.5", "--interval", "0.5", "--data-dir", str(tmp_path)]
        procs.append(Proc(args, tmp_path / "agent.log"))
        wait_until(lambda: len(httpx.get(f"{base}/api/v1/gpus").json()) == 2, 30, "the agent's GPUs")
        prom.wait_ready()
        write_fault(Settings(data_dir=tmp_path, node="dedup-node").agent_dir / "faults", 1, "xid", code=48)
        auth = {"Authorization": f"Bearer {token}"}
        run = httpx.post(f"{base}/api/v1/runs", json={"job": "dedup-job"}, headers=auth)
        assert httpx.post(f"{base}/api/v1/runs/{run.json()['id']}/exit", json={"exit_code": 1}, headers=auth).is_success
        names = ("GpuFatalXid", "GpuwatchJobFailed")

        def from_prometheus(alert: dict[str, Any]) -> bool:
            return "/graph?g0.expr=" in alert.get("generatorURL", "")

        def merged() -> bool:
            """Each alert posted by the rule too (Prometheus' generator URL, its post the latest)."""
            return "firing" in prom.alerts().get(names[0], set()) and all(
                any(from_prometheus(a) for a in am.alerts(name)) for name in names
            )

        wait_until(merged, timeout=60, what="the rules' alerts in Alertmanager", every=0.2)
        # A few group intervals: a second alert or a second notification would show by then.
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            for name in names:
                assert len(am.alerts(name)) == 1, am.alerts(name)
                sent = [a for body in webhook.bodies for a in body["alerts"] if a["labels"]["alertname"] == name]
                assert len(sent) <= 1, sent
            time.sleep(0.2)  # polling the absence of a second notification until the deadline
    finally:
        if prom:
            prom.stop()
        for proc in reversed(procs):
            proc.stop()
        am.stop()
    for name in names:
        [notified] = [a for body in webhook.bodies for a in body["alerts"] if a["labels"]["alertname"] == name]
        assert notified["status"] == "firing"
    [xid] = [a for body in webhook.bodies for a in body["alerts"] if a["labels"]["alertname"] == "GpuFatalXid"]
    assert xid["labels"] == {
        "alertname": "GpuFatalXid",
        "severity": "critical",
        "instance": "dedup-node",
        "gpu": "1",
        "xid": "48",
    }
