"""The deployment files: docker-compose.yml is valid Compose, and what it mounts or builds exists."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

from gpuwatch.config import Settings

ROOT = Path(__file__).resolve().parent.parent


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


def test_compose_bind_mounts_and_docker_copies_exist() -> None:
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
    copies = re.findall(r"^COPY (\S+)", (ROOT / "Dockerfile").read_text(), re.M)
    for src in copies:
        assert (ROOT / src).exists(), src
    assert {"postgres", "server", "agent", "prometheus", "alertmanager", "grafana"} <= set(compose["services"])


def test_prometheus_keeps_the_exported_instance_label() -> None:
    config = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())
    job = next(j for j in config["scrape_configs"] if j["job_name"] == "gpuwatch")
    assert job["honor_labels"] is True


def test_token_file_supplies_the_agent_token(tmp_path: Path) -> None:
    secret = tmp_path / "node.token"
    secret.write_text("gwn_from_file\n")
    assert Settings(token_file=secret).effective_token == "gwn_from_file"
    assert Settings(token="direct", token_file=secret).effective_token == "direct"
