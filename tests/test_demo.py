"""`gpuwatch demo --duration 20` shows all 16 simulated GPUs and exits 0 (acceptance point 1)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.helpers import CLI


@pytest.mark.slow
def test_demo_shows_all_sixteen_gpus_and_exits_zero(tmp_path: Path) -> None:
    out = subprocess.run(
        [*CLI, "demo", "--duration", "20", "--data-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={"COLUMNS": "120", "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "16/16 GPUs reported through the server." in out.stdout
    rows = set(re.findall(r"(demo-node-[12])\s*│\s*(\d+)\s*│\s*NVIDIA H100", out.stdout))
    assert rows == {(f"demo-node-{n}", str(i)) for n in (1, 2) for i in range(8)}
    assert re.search(r"http://127\.0\.0\.1:\d+/metrics", out.stdout)
    assert re.search(r"http://127\.0\.0\.1:\d+/docs", out.stdout)
    assert (tmp_path / "gpuwatch.db").exists()
