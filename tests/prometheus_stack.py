"""A real Prometheus (and Alertmanager) on loopback for the tests, configured from deploy/."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.helpers import Proc, free_port, wait_until
from tests.promql import ALERTS_FILE, ROOT

PROMETHEUS_YML = ROOT / "deploy" / "prometheus" / "prometheus.yml"


class Binary(Proc):
    """A child process that is not `gpuwatch` (Prometheus, Alertmanager), its output in a file."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.args, self.log_path = args, log
        self._out = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(args, stdout=self._out, stderr=subprocess.STDOUT)


def prometheus_config(target: str, rule_files: list[Path], alertmanager: str | None = None) -> dict[str, Any]:
    """deploy/prometheus/prometheus.yml as shipped, but scraping and evaluating every second, with
    the gpuwatch job pointed at ``target`` and alerts sent to ``alertmanager`` (or nowhere)."""
    config = yaml.safe_load(PROMETHEUS_YML.read_text())
    assert config["rule_files"] == [ALERTS_FILE.name], "the shipped config loads alerts.yml"
    config["global"] |= {"scrape_interval": "1s", "evaluation_interval": "1s"}
    [job] = config["scrape_configs"]
    job["static_configs"] = [{"targets": [target]}]
    config["rule_files"] = [str(path) for path in rule_files]
    if alertmanager is None:
        del config["alerting"]
    else:
        config["alerting"]["alertmanagers"][0]["static_configs"] = [{"targets": [alertmanager]}]
    return config


class Prometheus:
    """`prometheus` on 127.0.0.1 with ``config``, and its HTTP API."""

    def __init__(self, binary: str, config: dict[str, Any], tmp: Path, *extra: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        path = tmp / "prometheus.yml"
        path.write_text(yaml.safe_dump(config))
        args = [
            binary,
            f"--config.file={path}",
            f"--storage.tsdb.path={tmp / 'prometheus-data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            *extra,
        ]
        self.proc = Binary(args, tmp / "prometheus.log")
        self._http = httpx.Client(base_url=f"{self.url}/api/v1", timeout=10)

    def wait_ready(self) -> None:
        def ready() -> bool:
            if self.proc.popen.poll() is not None:
                raise AssertionError(f"prometheus exited:\n{self.proc.output()[-3000:]}")
            return httpx.get(f"{self.url}/-/ready", timeout=1).status_code == 200

        wait_until(ready, timeout=30, what="prometheus to be ready")

    def stop(self) -> None:
        self._http.close()
        self.proc.stop()

    def api(self, path: str, **params: Any) -> Any:
        resp = self._http.post(path, data=params) if path == "/query" else self._http.get(path, params=params)
        body = resp.json()
        if body.get("status") != "success":
            raise QueryError(f"{path} {params}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """The instant vector (or scalar, as one sample) of ``expr`` now; NaN samples left out, so
        "no data" means what a panel would show as no data."""
        data = self.api("/query", query=expr)
        results = data["result"] if data["resultType"] in ("vector", "matrix") else [{"value": data["result"]}]
        return [r for r in results if "value" not in r or not math.isnan(float(r["value"][1]))]

    def label_values(self, label: str, match: str) -> set[str]:
        return set(self.api(f"/label/{label}/values", **{"match[]": match}))

    def alerts(self) -> dict[str, set[str]]:
        """Alert name → the states of its active alerts (pending, firing)."""
        states: dict[str, set[str]] = {}
        for alert in self.api("/alerts")["alerts"]:
            states.setdefault(alert["labels"]["alertname"], set()).add(alert["state"])
        return states

    def rules(self) -> list[dict[str, Any]]:
        return [rule for group in self.api("/rules")["groups"] for rule in group["rules"]]


class QueryError(Exception):
    """Prometheus refused a query (a parse error, …)."""


class Alertmanager:
    """`alertmanager` on 127.0.0.1 (``port``: a fixed one, to restart it in place) with ``config``, no
    cluster gossip (tests may run side by side), and its v2 API."""

    def __init__(self, binary: str, config: dict[str, Any], tmp: Path, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        path = tmp / "alertmanager.yml"
        path.write_text(yaml.safe_dump(config))
        args = [
            binary,
            f"--config.file={path}",
            f"--storage.path={tmp / 'am-data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--cluster.listen-address=",
        ]
        self.proc = Binary(args, tmp / "alertmanager.log")

    def wait_ready(self) -> None:
        def ready() -> bool:
            if self.proc.popen.poll() is not None:
                raise AssertionError(f"alertmanager exited:\n{self.proc.output()[-3000:]}")
            try:
                return httpx.get(f"{self.url}/-/ready", timeout=1).status_code == 200
            except httpx.TransportError:
                return False

        wait_until(ready, timeout=30, what="alertmanager to be ready")

    def alerts(self, name: str | None = None) -> list[dict[str, Any]]:
        """Its active alerts (``GET /api/v2/alerts``: resolved ones are not listed), of ``name`` if given."""
        found = httpx.get(f"{self.url}/api/v2/alerts", timeout=5).json()
        return [a for a in found if name is None or a["labels"]["alertname"] == name]

    def stop(self) -> None:
        self.proc.stop()
