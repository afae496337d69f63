"""`gpuwatch diagnose` as a user runs it: the JSON shape of DESIGN.md, the human format, big logs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import CLI, REPO, TESTS

CASE = TESTS / "data" / "failures"


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin"}  # no GPUWATCH_LLM_*: the rules alone, no network
    return subprocess.run([*CLI, "diagnose", *args], capture_output=True, text=True, timeout=timeout, env=env)


def test_json_output_has_the_stable_shape(tmp_path: Path) -> None:
    (tmp_path / "rank1.log").write_text("step 1\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB\n")
    (tmp_path / "rank0.log").write_text(
        "step 1\n[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1) ran for 600000 "
        "milliseconds before timing out.\n"
    )
    out = _run("--format", "json", str(tmp_path / "rank0.log"), str(tmp_path / "rank1.log"))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 1, "one JSON object per invocation"
    result = json.loads(lines[0])
    assert {"reason", "category", "action", "confidence", "source", "evidence", "node", "rank"} <= set(result)
    assert (result["reason"], result["category"], result["action"], result["source"], result["rank"]) == (
        "gpu_oom",
        "framework",
        "notify",
        "rules",
        1,
    )
    assert result["evidence"][0] == {
        "file": str(tmp_path / "rank1.log"),
        "line": 2,
        "text": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB",
    }


def test_human_output_names_reason_and_evidence_lines() -> None:
    case = next(CASE.glob("079-*"))
    out = _run(*map(str, sorted(p for p in case.iterdir() if p.suffix in (".log", ".out"))))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("script_error (script; action: notify")
    assert "KeyError" in out.stdout and ":" in out.stdout.splitlines()[-1]


@pytest.mark.slow
def test_a_million_line_log_with_one_error_near_the_end(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO / "bench"))
    from diagnose import training_log  # the benchmark's generator: the same shape of log

    log = tmp_path / "train.log"
    log.write_text("\n".join(training_log(1_000_000)) + "\n")
    out = _run("--format", "json", str(log), timeout=300)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["reason"] == "gpu_oom" and result["evidence"][0]["line"] == 1_000_000 - 50 + 3
