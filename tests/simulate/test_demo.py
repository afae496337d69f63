"""`gpuwatch demo` (the README's first command): all 16 simulated GPUs through the server, and a job
that fails, is diagnosed, restarted from its checkpoint and recovers, ending with its post-mortem
(issue 2, acceptance 1; issue 7, acceptance 4)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers import CLI


@pytest.mark.slow
def test_demo_shows_all_gpus_and_ends_with_a_recovery_and_its_post_mortem(tmp_path: Path) -> None:
    out = subprocess.run(
        [*CLI, "demo", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=180,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "16/16 GPUs reported through the server." in out.stdout
    rows = set(re.findall(r"(demo-node-[12])\s*│\s*(\d+)\s*│\s*NVIDIA H100", out.stdout))
    assert rows == {(f"demo-node-{n}", str(i)) for n in (1, 2) for i in range(8)}
    assert re.search(r"http://127\.0\.0\.1:\d+/metrics", out.stdout)
    assert "demo-training: attempt 2 succeeded · incident 1: cuda_error → resolved" in out.stdout
    report = Path(re.search(r"post-mortem: (\S+\.html)", out.stdout).group(1))
    assert report.parent == tmp_path / "reports"
    html = report.read_text()
    assert "cuda_error" in html and "restarted as attempt 2, which succeeded" in html
    assert html.count("data:image/png;base64,") == 1, "the job's GPU of the failing node, plotted"
    assert "Plotted: the job&#x27;s GPU 0; 7 other GPUs of the node left out" in html
    md = report.with_suffix(".md").read_text()
    plots = re.findall(r"\]\((incident-1-gpu\d\.png)\)", md)
    assert plots == ["incident-1-gpu0.png"] and (report.parent / plots[0]).read_bytes().startswith(b"\x89PNG")
    assert (tmp_path / "gpuwatch.db").exists()


@pytest.mark.slow
def test_demo_with_a_duration_stops_then(tmp_path: Path) -> None:
    out = subprocess.run(
        [*CLI, "demo", "--duration", "8", "--nodes", "1", "--gpus", "2", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2/2 GPUs reported through the server." in out.stdout
