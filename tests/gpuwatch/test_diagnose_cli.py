"""`gpuwatch diagnose` as a user runs it: the JSON shape of DESIGN.md, the human format, big logs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import CLI, REPO, TESTS
from tests.llm_server import FakeLlmServer

CASE = TESTS / "data" / "failures"


def _run(*args: str, timeout: float = 120, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", **(env or {})}  # by default no GPUWATCH_LLM_*: the rules alone, no network
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


def _odd_log(tmp_path: Path) -> Path:
    """A log no rule explains, so that the LLM is asked."""
    log = tmp_path / "rank0.log"
    log.write_text("step 1 loss 2.000\nstep 2 loss 1.990\nworker stopped: E_WEIRD_42\n")
    return log


def _cite_odd_line(confidence: float) -> Any:
    def script(request: dict[str, Any]) -> tuple[int, str]:
        question = [m["content"] for m in request["messages"] if m["role"] == "user"][-1]
        lid = re.search(r"^(L\d+) \| worker stopped", question, re.M)
        assert lid is not None
        return 200, json.dumps({"reason": "script_error", "confidence": confidence, "evidence": [lid.group(1)]})

    return script


def test_the_llm_flags_configure_the_analyser_and_the_json_says_whether_its_answer_was_used(tmp_path: Path) -> None:
    log = str(_odd_log(tmp_path))
    with FakeLlmServer(_cite_odd_line(0.7)) as llm:
        env = {"GPUWATCH_LLM_BASE_URL": llm.base_url, "GPUWATCH_LLM_MODEL": "from-env"}
        used = _run("--format", "json", "--llm-model", "from-flag", log, env=env)
        flags = ["--llm-url", llm.base_url, "--llm-model", "m2", "--llm-min-confidence", "0.8", "--llm-budget", "900"]
        under = _run("--format", "json", *flags, log)
        text = _run(*flags, log)
    assert used.returncode == under.returncode == text.returncode == 0, used.stderr + under.stderr + text.stderr
    first, second = json.loads(used.stdout), json.loads(under.stdout)
    assert (first["reason"], first["source"], first["used"]) == ("script_error", "llm", True)
    assert first["model"] == "from-flag"
    assert first["evidence"][0]["line"] == 3 and first["llm_seconds"] >= 0
    assert (second["reason"], second["used"], second["model"]) == ("unknown", False, "m2")
    assert "0.80" in second["explanation"] and second["action"] == "restart"
    assert [r["model"] for r in llm.requests] == ["from-flag", "m2", "m2"]
    assert sum(len(m["content"]) for m in llm.requests[1]["messages"][1:]) / 4 <= 900
    assert "answer not used" in text.stdout and text.stdout.startswith("unknown ")


def test_the_llm_deadline_flag_gives_unknown_with_the_rules_guess(tmp_path: Path) -> None:
    log = tmp_path / "rank0.log"
    log.write_text("step 1\n[E ProcessGroupNCCL.cpp:1] NCCL WARN something odd in the proxy thread\n")
    with FakeLlmServer(_cite_odd_line(0.9), delay_s=10) as llm:
        out = _run("--format", "json", "--llm-url", llm.base_url, "--llm-model", "m", "--llm-timeout", "0.3", str(log))
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert (result["reason"], result["used"], result["model"]) == ("unknown", False, "m")
    assert "did not answer within 0.3 s" in result["explanation"]
    assert result["llm_seconds"] < 3


def test_a_bad_llm_flag_is_a_clear_error(tmp_path: Path) -> None:
    out = _run("--llm-min-confidence", "2", str(_odd_log(tmp_path)))
    assert out.returncode == 2 and "min_confidence" in out.stderr and not out.stdout
