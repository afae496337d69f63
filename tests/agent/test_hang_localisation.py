"""Hang localisation end to end (issue 23): a real server, a real agent, `gpuwatch run` of a real 2-rank
torch.distributed job (gloo, CPU, torchrun) in which rank 1 stops taking part while rank 0 waits in its
all_reduce. The hang incident must name rank 1 and its node, with the stack line where it is stuck as
evidence, within the hang timeout plus 30 s."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from agent.stacks import find_py_spy
from tests.helpers import (
    CLI,
    TESTS,
    Proc,
    free_port,
    migrated_sqlite,
    new_admin_token,
    new_token,
    start_server,
    wait_until,
)

pytest.importorskip("torch")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(find_py_spy() is None, reason="py-spy is an agent dependency: pip install -e ."),
]

JOB = TESTS / "jobs" / "hang_rank.py"
NODE = "node-h"
HANG_TIMEOUT_S = 3.0


def _lines_of(function: str) -> range:
    """The source lines of a function of the job script (where py-spy may find its rank)."""
    tree = ast.parse(JOB.read_text())
    (fn,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == function]
    return range(fn.lineno, (fn.end_lineno or fn.lineno) + 1)


@dataclass
class Rig:
    tmp: Path
    base: str
    token: str
    agent_url: str  # the agent's loopback API, where the training client reports
    admin: str  # an admin token

    def incident(self, job: str) -> dict | None:
        """The job's hang incident once it is decided."""
        jobs = httpx.get(f"{self.base}/api/v1/jobs", params={"name": job}, timeout=5).json()
        if not jobs:
            return None
        found = [
            i
            for i in httpx.get(f"{self.base}/api/v1/incidents", timeout=5).json()
            if i["job_id"] == jobs[0]["id"] and i["trigger"] == "hang"
        ]
        return found[0] if found and any(a["kind"] == "decision" for a in found[0]["actions"]) else None


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    (tmp_path / "srv").mkdir()
    url = migrated_sqlite(tmp_path / "srv")
    port = free_port()
    env = {"GPUWATCH_INCIDENT_SETTLE_S": "0.3", "GPUWATCH_HANG_CHECK_S": "0.25", "GPUWATCH_HANG_STACKS_WAIT_S": "20"}
    server = start_server(tmp_path / "srv", port, tmp_path / "server.log", env)
    base, token = f"http://127.0.0.1:{port}", new_token(url, NODE)
    client_port = free_port()
    agent = Proc(
        [
            "agent",
            *("--server", base, "--token", token, "--node", NODE, "--simulate", "1", "--flush", "0.5"),
            *("--interval", "0.5", "--client-port", str(client_port), "--data-dir", str(tmp_path / "agent")),
        ],
        tmp_path / "agent.log",
    )
    try:
        yield Rig(tmp_path, base, token, f"http://127.0.0.1:{client_port}", new_admin_token(url))
    finally:
        agent.stop()
        server.stop()


def _start(rig: Rig, how: str, hang_timeout_s: float = HANG_TIMEOUT_S) -> tuple[str, Path, Proc]:
    """`gpuwatch run` of the job with rank 1 stuck ``how`` after a few steps: its name, output dir, process."""
    job, out = f"hang-{how}", rig.tmp / how
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(JOB)]
    args = ["run", "--job", job, "--server", rig.base, "--token", rig.token, "--node", NODE]
    args += ["--data-dir", str(rig.tmp / "sup"), "--grace", "3", "--decision-timeout", "10"]
    args += ["--policy", "max_restarts=0"]  # decided once: stopped, not restarted into the same hang
    env = {
        "GPUWATCH_AGENT_URL": rig.agent_url,
        "GPUWATCH_HANG_TIMEOUT": str(hang_timeout_s),
        "OMP_NUM_THREADS": "1",
        # No GPU of the (simulated) node is the ranks': a CPU job is judged on its steps alone, as a
        # busy-looping rank on a real GPU node leaves its GPU idle.
        "NVIDIA_VISIBLE_DEVICES": "none",
    }
    proc = Proc([*args, "--", *torchrun, "--how", how, "--out", str(out)], rig.tmp / f"{job}.log", env)
    return job, out, proc


def _hang(rig: Rig, how: str) -> tuple[dict, float, Proc]:
    """Run the job with rank 1 stuck ``how``; its decided hang incident and when rank 1 got stuck."""
    job, out, proc = _start(rig, how)
    hung = wait_until(lambda: json.loads((out / "hung.json").read_text()), timeout=120, what="rank 1 stuck")
    incident = wait_until(lambda: rig.incident(job), timeout=HANG_TIMEOUT_S + 60, what="the decided hang incident")
    return incident, float(hung["at"]), proc


def _decided_in(incident: dict, hung_at: float) -> float:
    (decision,) = [a for a in incident["actions"] if a["kind"] == "decision"]
    return datetime.fromisoformat(decision["created_at"]).timestamp() - hung_at


def _check(rig: Rig, incident: dict, hung_at: float, function: str) -> str:
    """The incident names rank 1 on NODE with a line of ``function`` as evidence, in time; that line."""
    d = incident["diagnosis"]
    assert (d["reason"], d["rank"], d["node"]) == ("hang", 1, NODE), d
    texts = [e["text"] for e in d["evidence"] if e["file"] == "stacks"]
    first = texts[0]
    m = re.fullmatch(rf"rank 1 \({NODE}\): {function} \(hang_rank\.py:(\d+)\)", first)
    assert m is not None, texts
    assert int(m.group(1)) in _lines_of(function), first
    assert "suspect rank 1 on node-h" in d["explanation"], d["explanation"]
    assert _decided_in(incident, hung_at) <= HANG_TIMEOUT_S + 30
    req = httpx.get(f"{rig.base}/api/v1/stacks/{incident['stack_request']}", timeout=5).json()
    assert req["state"] == "done" and req["requested_by"] == "server"
    groups = req["analysis"]["groups"]
    assert {tuple(g["ranks"]): (g["collective"], g["suspect"]) for g in groups} == {
        (0,): ("all_reduce", False),
        (1,): (None, True),
    }
    report = httpx.get(f"{rig.base}/api/v1/incidents/{incident['id']}/report", timeout=10).text
    assert "## Stack groups" in report and f"{function} (hang_rank.py:" in report
    return first


def test_a_rank_in_a_busy_loop_is_named_with_the_loop_as_evidence(rig: Rig) -> None:
    incident, hung_at, proc = _hang(rig, "busy")
    try:
        _check(rig, incident, hung_at, "busy_loop")
    finally:
        proc.stop()


def test_a_rank_asleep_in_its_data_loader_is_named_with_the_loading_line(rig: Rig) -> None:
    incident, hung_at, proc = _hang(rig, "sleep")
    try:
        line = _check(rig, incident, hung_at, "load_batch")
        sleep_line = next(n for n, text in enumerate(JOB.read_text().splitlines(), 1) if "time.sleep(3600)" in text)
        assert line.endswith(f"(hang_rank.py:{sleep_line})")
    finally:
        proc.stop()


def test_gpuwatch_job_stacks_names_the_stuck_rank_on_demand(rig: Rig) -> None:
    """No hang incident (a long hang timeout): an operator asks, and the CLI shows who is stuck where."""
    job, out, proc = _start(rig, "busy", hang_timeout_s=600)
    try:
        wait_until(lambda: (out / "hung.json").exists(), timeout=120, what="rank 1 stuck")
        job_id = httpx.get(f"{rig.base}/api/v1/jobs", params={"name": job}, timeout=5).json()[0]["id"]
        wait_until(  # both ranks' reports at the server (their processes at the agent came with them)
            lambda: len(httpx.get(f"{rig.base}/api/v1/jobs/{job_id}/utilization", timeout=5).json()["ranks"]) == 2,
            timeout=30,
            what="both ranks known",
        )
        args = [*CLI, "job", "stacks", job, "--server", rig.base, "--wait", "20"]
        done = subprocess.run([*args, "--token", rig.admin], capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert lines[0].endswith(f"for job {job}: done") and lines[1] == f"suspect: rank 1 on {NODE}", done.stdout
        assert "SUSPECT ranks 1 on node-h: in no collective" in lines
        assert f"ranks 0 on {NODE}: in all_reduce" in lines
        assert any(re.fullmatch(r"    busy_loop \(hang_rank\.py:\d+\)", ln) for ln in lines), done.stdout
        as_node = subprocess.run([*args, "--token", rig.token], capture_output=True, text=True, timeout=60, check=False)
        assert as_node.returncode != 0 and "HTTP 403" in as_node.stderr
    finally:
        proc.stop()
