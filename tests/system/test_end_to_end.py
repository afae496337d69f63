"""Real `gpuwatch server` and `gpuwatch agent` processes talking HTTP on loopback."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers import CLI, Proc, free_port, migrated_sqlite, new_token, start_server, wait_until

NODES = ("e2e-node-1", "e2e-node-2")
_UTIL = re.compile(r"^DCGM_FI_DEV_GPU_UTIL\{(?P<labels>[^}]*)\} (?P<value>\S+)$", re.M)


def _labels(text: str) -> dict[str, str]:
    return dict(re.findall(r'(\w+)="([^"]*)"', text))


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A server and two 8-GPU simulated agents, each its own process."""
    url = migrated_sqlite(tmp_path)
    port = free_port()
    procs = [start_server(tmp_path, port, tmp_path / "server.log")]
    base = f"http://127.0.0.1:{port}"
    for name in NODES:
        procs.append(
            Proc(
                [
                    "agent",
                    "--server",
                    base,
                    "--token",
                    new_token(url, name),
                    "--node",
                    name,
                    "--client-port",
                    "0",
                    "--simulate",
                    "8",
                    "--flush",
                    "0.5",
                    "--data-dir",
                    str(tmp_path),
                ],
                tmp_path / f"{name}.log",
            )
        )
    yield base, tmp_path
    codes = [p.stop() for p in reversed(procs)]
    # Agents exit 0; uvicorn shuts down gracefully and then re-raises SIGTERM, as servers conventionally do.
    assert codes == [0, 0, -signal.SIGTERM], "every process should exit cleanly on SIGTERM"
    assert "Application shutdown complete" in procs[0].output()


@pytest.mark.slow
def test_metrics_have_every_simulated_gpu_with_dcgm_labels(cluster: tuple[str, Path]) -> None:
    base, _ = cluster

    def all_util_series() -> list[dict[str, str]]:
        series = [_labels(m["labels"]) for m in _UTIL.finditer(httpx.get(f"{base}/metrics").text)]
        return series if len(series) == 16 else []

    series = wait_until(all_util_series, timeout=30, what="DCGM_FI_DEV_GPU_UTIL for all 16 GPUs")
    inventory = {(g["node"], g["index"]): g["uuid"] for g in httpx.get(f"{base}/api/v1/gpus").json()}
    assert len(set(inventory.values())) == 16
    for s in series:
        assert set(s) == {"gpu", "UUID", "device", "modelName", "Hostname", "instance"}
        assert s["modelName"] == "NVIDIA H100 80GB HBM3"
        assert s["Hostname"] == s["instance"] and s["Hostname"] in NODES
        assert s["UUID"] == inventory[(s["Hostname"], int(s["gpu"]))]
        assert s["device"] == f"nvidia{s['gpu']}"
    assert {(s["Hostname"], int(s["gpu"])) for s in series} == set(inventory)
    text = httpx.get(f"{base}/metrics").text
    for name in NODES:
        assert f'gpuwatch_node_up{{instance="{name}",node="{name}"}} 1.0' in text


@pytest.mark.slow
def test_injected_xid_reaches_events_and_metrics(cluster: tuple[str, Path]) -> None:
    base, data_dir = cluster
    wait_until(lambda: len(httpx.get(f"{base}/api/v1/gpus").json()) == 16, what="registration")
    out = subprocess.run(
        [*CLI, "inject", NODES[0], "3", "xid", "--code", "48", "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "injected xid" in out.stdout
    events = wait_until(
        lambda: httpx.get(f"{base}/api/v1/events", params={"node": NODES[0], "kind": "xid"}).json(),
        what="the Xid event at the server",
    )
    assert events[0]["gpu_index"] == 3 and events[0]["data"]["xid"] == 48
    pattern = re.compile(r'DCGM_FI_DEV_XID_ERRORS\{[^}]*gpu="3"[^}]*instance="' + NODES[0] + r'"[^}]*\} 48\.0')
    wait_until(lambda: pattern.search(httpx.get(f"{base}/metrics").text), what="XID_ERRORS=48 on GPU 3")
    dbe = re.compile(r'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL\{[^}]*gpu="3"[^}]*instance="' + NODES[0] + r'"[^}]*\} 1\.0')
    assert dbe.search(httpx.get(f"{base}/metrics").text)


def test_agent_without_a_driver_names_simulate(tmp_path: Path) -> None:
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has an NVIDIA driver")
    out = subprocess.run(
        [*CLI, "agent", "--token", "x", "--data-dir", str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "--simulate" in lines[0], out.stderr


def test_inject_rejects_unknown_fault(tmp_path: Path) -> None:
    out = subprocess.run(
        [*CLI, "inject", "n1", "0", "meltdown", "--data-dir", str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2 and "meltdown" in out.stderr
