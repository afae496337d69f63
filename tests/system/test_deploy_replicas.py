"""The Prometheus example for several server replicas (deploy/prometheus/prometheus-replicas.yml,
docs/scale-out.md): every replica scraped under a label of its own, promtool accepts it, and its
recording rules fold the replicas away as each series needs."""

from __future__ import annotations

import subprocess

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import REPO, InProcessServer, require_tool
from tests.promql import metric_names

PROMETHEUS = REPO / "deploy" / "prometheus"
REPLICAS_YML = PROMETHEUS / "prometheus-replicas.yml"
RULES_TEST = PROMETHEUS / "replicas.rules_test.yml"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=60)


def test_each_replica_is_scraped_under_its_own_replica_label() -> None:
    config = yaml.safe_load(REPLICAS_YML.read_text())
    single = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())
    [job] = [j for j in config["scrape_configs"] if j["job_name"] == "gpuwatch"]
    assert job["honor_labels"] is True, "the exported instance=<node> label must survive, as in prometheus.yml"
    assert job["dns_sd_configs"][0]["names"] and job["dns_sd_configs"][0]["port"] == 8600
    assert {"source_labels": ["__address__"], "target_label": "replica"} in job["relabel_configs"]
    assert config["rule_files"][0] == single["rule_files"][0] == "alerts.yml"
    for name in config["rule_files"]:
        assert (PROMETHEUS / name).is_file(), name
    assert config["alerting"] == single["alerting"]


@pytest.mark.prometheus
def test_promtool_accepts_the_replicas_config_and_its_rules() -> None:
    promtool = require_tool("promtool")
    out = _run(promtool, "check", "config", str(REPLICAS_YML))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 2 rule files found" in out.stdout


@pytest.mark.prometheus
def test_the_recording_rules_fold_replicas_as_each_series_needs() -> None:
    out = _run(require_tool("promtool"), "test", "rules", str(RULES_TEST))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def test_the_recording_rules_read_series_the_server_exports(live_server: InProcessServer) -> None:
    families = text_string_to_metric_families(httpx.get(f"{live_server.url}/metrics").text)
    exported = {name for f in families for name in (f.name, f"{f.name}_total", *(s.name for s in f.samples))}
    rules = [r for g in yaml.safe_load((PROMETHEUS / "replicas.rules.yml").read_text())["groups"] for r in g["rules"]]
    used = {name: r["record"] for r in rules for name in metric_names(r["expr"])}
    assert {name: record for name, record in used.items() if name not in exported} == {}
