"""The deployment files: docker-compose.yml is valid Compose, and what it mounts or builds exists."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

from gpuwatch.config import Settings
from tests.helpers import REPO

ROOT = REPO


def test_compose_file_is_valid_against_the_compose_spec() -> None:
    out = subprocess.run(
        [
            str(Path(sys.executable).parent / "check-jsonschema"),
            "--builtin-schema",
            "vendor.compose-spec",
            str(ROOT / "docker-compose.yml"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_compose_bind_mounts_secrets_and_docker_copies_exist() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    sources = [
        v.split(":")[0]
        for service in compose["services"].values()
        for v in service.get("volumes", [])
        if v.startswith("./")
    ]
    assert sources, "the stack mounts its deploy/ and dashboards/ files"
    for src in sources:
        assert (ROOT / src).exists(), src
    for name, secret in compose["secrets"].items():  # `${VAR:-default}`: the default must exist
        default = re.fullmatch(r"\$\{\w+:-(.+)\}", secret["file"])
        assert default and (ROOT / default[1]).is_file(), name
    copies = re.findall(r"^COPY (\S+)", (ROOT / "Dockerfile").read_text(), re.M)
    for src in copies:
        assert (ROOT / src).exists(), src
    assert {"postgres", "server", "agent", "prometheus", "alertmanager", "grafana"} <= set(compose["services"])


def test_prometheus_keeps_the_exported_instance_label() -> None:
    config = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())
    job = next(j for j in config["scrape_configs"] if j["job_name"] == "gpuwatch")
    assert job["honor_labels"] is True


def test_compose_wires_prometheus_alertmanager_and_the_agent_profiles() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    config = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text())
    assert "./deploy/prometheus:/etc/prometheus:ro" in services["prometheus"]["volumes"]
    assert "--config.file=/etc/prometheus/prometheus.yml" in services["prometheus"]["command"]
    assert (ROOT / "deploy" / "prometheus" / config["rule_files"][0]).is_file(), "rule files resolve beside the config"
    [target] = config["scrape_configs"][0]["static_configs"][0]["targets"]
    assert target == f"server:{services['server']['ports'][0].split(':')[1]}"
    [alertmanager] = config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"]
    assert alertmanager.split(":")[0] in services and services["alertmanager"]["ports"] == ["9093:9093"]
    assert services["alertmanager"]["secrets"] == ["alert_webhook_url"]
    assert "/run/secrets/alert_webhook_url" in (ROOT / "deploy" / "alertmanager.yml").read_text()
    assert services["agent"]["profiles"] == services["agent-2"]["profiles"] == ["simulated"]
    gpu = services["agent-gpu"]
    assert gpu["profiles"] == ["gpu"] and "--simulate" not in gpu["command"]
    [device] = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and "gpu" in device["capabilities"]
    for name in ("postgres", "server", "prometheus", "alertmanager", "grafana"):
        assert "healthcheck" in services[name] and "profiles" not in services[name], name
    named = {v.split(":")[0] for s in services.values() for v in s.get("volumes", []) if not v.startswith(("./", "/"))}
    assert named == set(compose["volumes"]), "every named volume is declared, and every declared one used"


def test_token_file_supplies_the_agent_token(tmp_path: Path) -> None:
    secret = tmp_path / "node.token"
    secret.write_text("gwn_from_file\n")
    assert Settings(token_file=secret).effective_token == "gwn_from_file"
    assert Settings(token="direct", token_file=secret).effective_token == "direct"
